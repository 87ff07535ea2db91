/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The supervisor's event loop for one run (private to src/lib/sandbox):
 * reads the sync messages of the sandbox init, forwards the caller's
 * signals to it, enforces the wall-clock timeout, and relays the command's
 * stdout/stderr when an output limit is set. Single-threaded, one poll(). */

#include <stdbool.h>
#include <stdint.h>

#include "cgroup/cgroup.h"
#include "hutch-error.h"
#include "sandbox/deadline.h"

#define RELAY_BUF_SIZE 65536

/* One output stream of the command: bytes from @in_fd (a pipe) are copied to
 * @out_fd until @limit bytes were kept; the rest is read and dropped, so
 * the command never blocks on a full pipe. Writes to @out_fd happen only
 * when poll() says it can take them (at most PIPE_BUF at a time), so a
 * caller that stops reading never stalls the supervisor: the timeout and
 * signals keep working. The caller's fd stays as it is (no O_NONBLOCK on a
 * shared file description). */
typedef struct Relay {
        int in_fd;  /* owned; -EBADF once at EOF or when unused */
        int out_fd; /* borrowed (the caller's 1 or 2); -EBADF after a write error */
        uint64_t limit;
        uint64_t written; /* bytes kept for the caller so far */
        bool truncated;
        size_t len, off; /* pending bytes in buf[off..len) */
        /* RELAY_BUF_SIZE bytes, owned, NULL when @in_fd is unused: on the
         * heap, so that a run without an output limit neither zeroes nor
         * faults in 128 KiB of stack (issue 16). supervision_done() frees
         * it. */
        char *buf;
} Relay;

typedef struct Supervision Supervision;

/* Called with the listening sockets init created for the proxy; takes
 * ownership of @fds. A failure is recorded as the run's error. */
typedef int (*SupervisionSocketsFn)(Supervision *s, int *fds, size_t n_fds, HutchError *reterr);

struct Supervision {
        int sync_fd;              /* borrowed */
        int pidfd;                /* borrowed: the sandbox init */
        int sigfd;                /* borrowed: signalfd of the forwarded signals */
        CommandDeadline deadline; /* the --timeout (deadline.h), from the start */
        Relay relays[2];
        Cgroup *cgroup; /* borrowed, or NULL */
        SupervisionSocketsFn on_sockets;
        void *userdata;

        bool started, exited, timed_out, init_gone;
        int status;           /* the command's wait status, valid with exited */
        int forwarded_signal; /* the last signal passed on to the command, or 0 */
        uint64_t start_ms, end_ms;
        unsigned fallbacks; /* SYNC_OP_STARTED: 1 << OutcomeFallback of init's */
        HutchError error;   /* errnum != 0 once init reported a failure */
};

/* The namespace backend's one kill (deadline.h): everything a command
 * started ends, for its --timeout, a kill, or its client gone. Its own
 * @cgroup, when it has one, is killed whole (daemons that left its session
 * included). A one-shot run's @init_pidfd (or -EBADF) is killed too: its
 * death ends the pid namespace. A keeper's exec without a cgroup has init
 * kill exec @exec_id's process through the sync socket @sync_fd
 * (SYNC_OP_SIGNAL). */
typedef struct NsCommand {
        Cgroup *cgroup;
        int init_pidfd;
        int sync_fd;
        uint64_t exec_id;
} NsCommand;

void ns_command_kill(const NsCommand *c);

/* Runs until init is gone and every relay reached EOF. */
void supervise(Supervision *s);

/* Closes the relays' pipe ends. */
void supervision_done(Supervision *s);
