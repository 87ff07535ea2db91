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
