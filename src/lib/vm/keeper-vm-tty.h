/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A terminal for an exec of a VM sandbox (`hutch exec -t`, the exec
 * WebSocket with "tty"; docs/vm.md "Published ports and terminals").
 *
 * The client speaks the pty channel protocol of pty.h, as with the
 * namespace backend: it gets a pty master over the channel, sets its
 * window size and says go. The command's own pty is in the guest (the
 * agent opens it from the sandbox's devpts: the command is its session
 * leader, the slave its controlling terminal); the keeper bridges the two
 * with a pty of the host's whose slave it holds in raw mode (no echo, no
 * signals, no line editing: the guest's terminal does all of that), and
 * passes each window size it reads from that slave on as RESIZE.
 *
 * SECURITY: the caller's terminal never reaches the sandbox, only bytes
 * do; the host pty is the keeper's, and the client holds its master only.
 * Private to src/lib/sandbox. */

#include <errno.h>
#include <stdbool.h>
#include <sys/types.h>

/* Opens a host pty, sends its master over the client's channel @chan
 * ("pty" with SCM_RIGHTS, without blocking) and returns its slave in
 * @ret_slave: raw, non-blocking. 0 or -errno. */
int vm_tty_open(int chan, int *ret_slave);

/* The window size set on @slave's master (24x80 when none is). */
void vm_tty_size(int slave, unsigned *ret_rows, unsigned *ret_cols);

/* `hutch run -t --backend vm`'s wait for the client's go on @chan (pty.h),
 * blocking for at most @timeout_ms (the relay is a local process that
 * answers at once). 0, -EPIPE when the channel closed first, -ETIMEDOUT. */
int vm_tty_wait_go(int chan, int timeout_ms);

/* Window-size changes as events (issue 18: no re-reading every 200 ms).
 * The host pty tells the holder of its slave of no change, but the kernel
 * sends SIGWINCH to the foreground process group of the terminal's
 * session at each change made on the master. So a small helper process
 * ("hutch-winch") makes the pty its controlling terminal in a session of
 * its own, and writes a byte to a pipe for each SIGWINCH; @fd is that
 * pipe's read end (non-blocking) to poll. The helper keeps no descriptor
 * of the pty (its session's reference is not an open file: the master
 * still sees the end when the slave's holder closes it) and none of its
 * parent's; it dies with its parent (PR_SET_PDEATHSIG) or at the pty's
 * hangup. */
typedef struct VmTtyWatch {
        pid_t pid; /* the helper, or 0 */
        int fd;    /* its pipe's read end, or -EBADF */
} VmTtyWatch;

#define VM_TTY_WATCH_NULL ((VmTtyWatch){.fd = -EBADF})

/* Starts the helper on @slave and waits (at most 5 s) until it holds the
 * pty as its terminal, so that no change after this returns is missed.
 * 0 or -errno (nothing left running then). */
int vm_tty_watch_start(VmTtyWatch *w, int slave);
/* Reads what the helper wrote. true when a change came. */
bool vm_tty_watch_drain(VmTtyWatch *w);
/* Kills and reaps the helper, closes the pipe. NULL-safe on a stopped one. */
void vm_tty_watch_stop(VmTtyWatch *w);
