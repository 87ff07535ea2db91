/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "pty-fd.h"

/* A command's terminal (`hutch exec -t`, `hutch run -t`; docs/terminal.md).
 *
 * SECURITY: the caller's terminal never enters the sandbox (bubblewrap's
 * CVE-2017-5226: TIOCSTI on a shared terminal types into the caller's
 * shell). The pty is made inside, from the sandbox's own devpts instance
 * (rootfs.c mounts it with newinstance at /dev/pts, /dev/ptmx -> pts/ptmx),
 * by the command's own process just before it execs: the command is the
 * session leader and the slave its controlling terminal and fds 0-2. The
 * master goes out over a unix socket, the "channel", that the caller gave
 * as the command's stdin, stdout and stderr, to the caller's relay
 * (src/cli/terminal.c), which holds it for the exec's life: it copies bytes
 * between the caller's terminal and the master and sets the master's
 * window size. Nothing of the caller's terminal is given to the sandbox.
 *
 * The channel protocol (SOCK_SEQPACKET): inside -> relay one message
 * "pty" with the master (SCM_RIGHTS); relay -> inside one byte once the
 * window size is set, after which the command execs. */

/* Inside the sandbox, in the command's process: opens a pty from
 * /dev/ptmx, makes the process a session leader (when it is not one yet)
 * with the slave as its controlling terminal, sends the master over @chan
 * and waits for the relay's go, then puts the slave on fds 0, 1 and 2
 * (@chan, when it is one of them, is replaced; otherwise the caller closes
 * it). Returns 0, or -errno: -EPIPE when the relay went away. */
int pty_attach_inside(int chan);

/* The relay's side receives the master with pty_fd_recv() (pty-fd.h,
 * shared with the microVM guest's agent). */

/* The relay's go: the window size is set, the command may exec. */
int pty_send_go(int chan);
