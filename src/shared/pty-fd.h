/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A pty master passed over a unix socket (the "channel"), on both sides of
 * both backends: the namespace backend's command sends it to the relay
 * (src/lib/sandbox/pty.h), a microVM guest's command to the agent
 * (src/guest/agent-pty.c). One message "pty" with the master
 * (SCM_RIGHTS). */

/* Sends @master over @chan. Returns 0 or -errno. */
int pty_fd_send(int chan, int master);

/* Receives the master from @chan (blocking). Returns 0 with a new CLOEXEC
 * fd in @ret_master, -EPIPE when the channel closed without one (the
 * command did not start), -EBADMSG for anything but exactly one pty master
 * (every fd that came is closed then), or -errno. */
int pty_fd_recv(int chan, int *ret_master);
