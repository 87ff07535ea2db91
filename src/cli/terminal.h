/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The caller's side of `hutch exec -t` and `hutch run -t`
 * (docs/terminal.md): a relay process between the caller's terminal and
 * the master of the pty made inside the sandbox (hutch_ext_pty_recv()).
 *
 * terminal_relay_start() checks that stdin is a terminal, forks the relay
 * and hands back the channel, the command's end: it is passed as the
 * command's stdin, stdout and stderr. With @interactive the caller's
 * terminal is put in raw mode (every key, Ctrl-C included, goes to the
 * pty, whose line discipline signals the foreground job inside) and the
 * relay copies stdin to the master; without, stdin stays unread. The
 * relay copies the master to stdout and passes window-size changes
 * (SIGWINCH) on to the master.
 *
 * terminal_relay_finish() (also run by the cleanup, on every exit path)
 * waits for the relay to copy the last output, ends it, and restores the
 * caller's terminal modes. When hutch itself is killed (SIGKILL), the relay
 * gets SIGHUP (PR_SET_PDEATHSIG) and restores them. */

#include <stdbool.h>
#include <sys/types.h>
#include <termios.h>

typedef struct TerminalRelay {
        pid_t pid;  /* the relay, or 0 */
        int chan;   /* the command's end of the channel, or -EBADF */
        int tty_fd; /* the caller's terminal (its stdin) */
        bool raw;   /* its modes were changed: @saved restores them */
        struct termios saved;
} TerminalRelay;

#define TERMINAL_RELAY_NULL ((TerminalRelay){.chan = -EBADF, .tty_fd = -EBADF})

/* The error docker prints for -t without a terminal on stdin. */
#define TERMINAL_NOT_A_TTY "the input device is not a TTY"

/* Starts the relay on the caller's stdin and stdout. -ENOTTY when stdin is
 * not a terminal; another -errno on failure (nothing changed then). */
int terminal_relay_start(TerminalRelay *t, bool interactive);

/* Closes the caller's copy of the channel (once the command's request has
 * gone: the sandbox holds its own). */
void terminal_relay_close_chan(TerminalRelay *t);

/* Waits for the relay (it ends when the command's pty closes, or when the
 * channel closes without a pty), then restores the terminal. */
void terminal_relay_finish(TerminalRelay *t);
