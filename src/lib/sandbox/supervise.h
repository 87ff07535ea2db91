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

/* One output stream of the command: bytes from @in_fd (a pipe) are copied to
 * @out_fd until @limit bytes were written; the rest is read and dropped, so
 * the command never blocks on a full pipe. */
typedef struct Relay {
        int in_fd;  /* owned; -EBADF once at EOF or when unused */
        int out_fd; /* borrowed (the caller's 1 or 2); -EBADF after a write error */
        uint64_t limit;
        uint64_t written;
        bool truncated;
} Relay;

typedef struct Supervision Supervision;

/* Called with the listening sockets init created for the proxy; takes
 * ownership of @fds. A failure is recorded as the run's error. */
typedef int (*SupervisionSocketsFn)(Supervision *s, int *fds, size_t n_fds, HutchError *reterr);

struct Supervision {
        int sync_fd; /* borrowed */
        int pidfd;   /* borrowed: the sandbox init */
        int sigfd;   /* borrowed: signalfd of the forwarded signals */
        int timerfd; /* borrowed: armed with the timeout, or -EBADF */
        Relay relays[2];
        Cgroup *cgroup; /* borrowed, or NULL */
        SupervisionSocketsFn on_sockets;
        void *userdata;

        bool started, exited, timed_out, init_gone;
        int status;           /* the command's wait status, valid with exited */
        int forwarded_signal; /* the last signal passed on to the command, or 0 */
        uint64_t start_ms, end_ms;
        HutchError error; /* errnum != 0 once init reported a failure */
};

/* Runs until init is gone and every relay reached EOF. */
void supervise(Supervision *s);

/* Closes the relays' pipe ends. */
void supervision_done(Supervision *s);

uint64_t now_ms(void);
