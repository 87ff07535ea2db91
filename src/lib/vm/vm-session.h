/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The commands of one microVM, over the agent's port (agent-protocol.h,
 * protocol 1.1): VmMux owns the port in both directions (frames for the
 * agent queue in order and go out when the port takes them; frames from
 * it go to the session of their channel); a VmSession is one command,
 * EXEC to EXIT, its stdin read from a descriptor and its output written
 * to two. Any number of sessions share a mux, up to AGENT_MAX_EXECS at
 * once.
 *
 * Nothing here blocks: the caller polls what the *_poll_fill() calls ask
 * for and hands the revents back. The port is always read (what a channel
 * may send is bounded by its window), and a session's output is written
 * only when its descriptor polls writable, at most PIPE_BUF at a time: a
 * client that stops reading holds up its own command only (its window
 * fills, the agent stops reading the command's pipes), never the others,
 * the signals or the timeouts. Its descriptors must not block: sockets
 * are used with MSG_DONTWAIT; pipes and terminals must be O_NONBLOCK
 * descriptions of their own (fd_reopen_nonblocking()), or a single
 * session's (as `hutch run`'s own stdio is).
 *
 * SECURITY: the guest is not trusted. A frame for a channel that has no
 * session, out of its order, or past its window breaks the protocol: the
 * mux records the error (VmMux.error), every session ends, and the caller
 * stops the VM. Private to src/lib/sandbox. */

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>

#include "hutch-error.h"
#include "sandbox/outcome.h"
#include "sandbox/supervise.h"
#include "vm/vm.h"

/* A session's stdin is read only while the queue for the agent holds less
 * than this (the port is slow to take it). */
#define VM_MUX_OUT_SOFT (64U << 10)
/* SECURITY: past this, the guest does not read its port (what else is
 * queued, acknowledgements and signals, is small): it breaks the
 * protocol. */
#define VM_MUX_OUT_MAX (4U << 20)

typedef struct VmSession VmSession;

typedef struct VmMux {
        Vm *vm; /* borrowed */
        VmSession *chans[AGENT_MAX_EXECS];
        unsigned char *out; /* frames for the agent not written yet: out[off..len) */
        size_t out_len, out_off, out_cap;
        bool gone;        /* the port failed or closed, or QEMU ended: the VM is gone */
        HutchError error; /* the guest broke the protocol (or out of memory) */
} VmMux;

/* Output the session's descriptor has not taken yet. */
typedef struct VmPending {
        unsigned char *buf;
        size_t len, off, cap;
} VmPending;

struct VmSession {
        Supervision *s; /* relays (out_fd, limit, written, truncated), forwarded_signal, end_ms */
        int in_fd;      /* borrowed: the command's stdin */
        int chan;       /* its channel, or -1 before vm_session_start() */
        bool started;   /* STARTED came */
        uint32_t pid;   /* STARTED's: the command's pid in the guest (0: not said) */
        bool failed;    /* ERROR came instead: @error says why */
        bool exited;    /* EXIT came: @exit */
        bool stdin_eof, timed_out;
        /* A connection's guest side half-closed (an empty STDOUT, protocol
         * 1.4); @out_shut once passed on to the stdout descriptor
         * (shutdown(SHUT_WR) of a socket, after what came before). */
        bool out_eof, out_shut;
        bool user_failed;      /* ERROR at AGENT_STEP_USER: exit 125 */
        uint64_t kill_sent_ms; /* when vm_session_kill() told the agent, or 0 */
        bool sock[3];          /* stdin, stdout, stderr are sockets: I/O with MSG_DONTWAIT */
        AgentExit exit;
        HutchError error;
        uint64_t in_flight; /* stdin bytes sent, not acknowledged */
        uint64_t held;      /* output bytes received, not yet written or dropped */
        uint64_t taken;     /* output bytes written or dropped, not acknowledged */
        VmPending pending[2];
};

#define VM_SESSION_NPOLL 3

void vm_mux_init(VmMux *m, Vm *vm);
/* Frees the queue; the sessions are the callers'. */
void vm_mux_done(VmMux *m);

/* The port's descriptor to poll, and what to do with its revents: frames
 * out, frames in (each to its session). */
void vm_mux_poll_fill(const VmMux *m, struct pollfd *p);
void vm_mux_poll_handle(VmMux *m, const struct pollfd *p);

/* Starts @ss (with @s, @in_fd and its relays set; chan -1): EXEC with the
 * payload @exec (vm_run_build_exec()) on a free channel. 0, -EBUSY when
 * every channel is in use, -ENOMEM. STARTED (or ERROR) comes later
 * through vm_mux_poll_handle(). */
int vm_session_start(VmMux *m, VmSession *ss, const void *exec, size_t len);
/* vm_session_start() for a connection (protocol 1.3): the agent connects
 * to 127.0.0.1:@port in the guest; the session's stdin is what goes
 * there, its stdout what comes back. STARTED, or ERROR (ECONNREFUSED:
 * nothing listens), comes later. */
int vm_session_connect(VmMux *m, VmSession *ss, uint16_t port);
/* The window size of a command started with a terminal ("t:" in its
 * EXEC), unless it did not start or exited. */
void vm_session_resize(VmMux *m, VmSession *ss, unsigned rows, unsigned cols);
/* @ss is the command of channel @chan, whose EXEC was answered already
 * (STARTED, through vm_agent_request()). */
void vm_session_attach(VmMux *m, VmSession *ss, uint8_t chan);
/* Frees @ss's channel, once it ended (or the VM is gone), and its
 * buffers. */
void vm_session_release(VmMux *m, VmSession *ss);

void vm_session_poll_fill(const VmMux *m, const VmSession *ss, struct pollfd p[VM_SESSION_NPOLL]);
void vm_session_poll_handle(VmMux *m, VmSession *ss, const struct pollfd p[VM_SESSION_NPOLL]);

/* The microVM backend's one kill (deadline.h), for its --timeout, a
 * kill, or its client gone: the agent kills the command's cgroup in the
 * guest (everything it started), once it started and until it exited;
 * @ss->kill_sent_ms says since when. SECURITY: a guest that does not end
 * it is the caller's to end: the VM goes (a one-shot run's at once, the
 * keeper's after VM_KILL_GRACE_MS), so a timeout is never left
 * unenforced. */
#define VM_KILL_GRACE_MS 5000U
void vm_session_kill(VmMux *m, VmSession *ss);

/* Passes @sig to the command (SIGNAL), unless it did not start or exited. */
void vm_session_signal(VmMux *m, VmSession *ss, int sig);
/* Drops the output not written yet, and all that comes later (the
 * command's client does not read it, and the command is being killed:
 * the agent's EXIT must not wait for that client). */
void vm_session_discard_output(VmMux *m, VmSession *ss);
/* Output waits for the session's descriptors. */
bool vm_session_output_pending(const VmSession *ss);

/* It failed to start, or its EXIT came and its output is out, or the VM
 * is gone or broke the protocol. */
bool vm_session_ended(const VmMux *m, const VmSession *ss);

/* The outcome's reason, exit code, signal, CPU time, memory peak and
 * truncation from the session's EXIT; -EPROTO without one. */
int vm_session_outcome(const VmSession *ss, Outcome *o);
