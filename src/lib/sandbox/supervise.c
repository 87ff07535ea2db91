/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "sandbox/outcome.h"
#include "sandbox/sandbox.h"
#include "sandbox/supervise.h"
#include "sandbox/sync.h"
#include "time-util.h"

void supervision_done(Supervision *s) {
        for (size_t i = 0; i < ELEMENTSOF(s->relays); i++) {
                s->relays[i].in_fd = safe_close(s->relays[i].in_fd);
                s->relays[i].buf = mfree(s->relays[i].buf);
        }
}

static void handle_sync_message(Supervision *s) {
        int fds[SANDBOX_PROXY_SOCKETS_MAX];
        SyncMsg m;
        int r;

        r = sync_recv(s->sync_fd, &m, fds, ELEMENTSOF(fds));
        if (r <= 0) {
                /* EOF or garbage: stop reading; the pidfd ends the loop. */
                if (r < 0 && r != -EAGAIN && s->error.errnum == 0)
                        (void)hutch_error_set(&s->error, EBADMSG,
                                              "malformed message from the sandbox init");
                if (r != -EAGAIN)
                        s->sync_fd = -EBADF;
                return;
        }
        if (m.op == SYNC_OP_SOCKETS) {
                HutchError e = {};

                if (s->on_sockets)
                        r = s->on_sockets(s, fds, m.n_fds, &e);
                else {
                        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                                fds[i] = safe_close(fds[i]);
                        r = -EPROTO;
                }
                if (r < 0 && s->error.errnum == 0) {
                        if (e.errnum)
                                s->error = e;
                        else
                                (void)hutch_error_set(&s->error, -r,
                                                      "unexpected proxy sockets from the sandbox");
                }
                if (r < 0)
                        /* Fail closed: nothing may run without its wall. */
                        (void)pidfd_send_signal(s->pidfd, SIGKILL, NULL, 0);
                return;
        }
        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                fds[i] = safe_close(fds[i]);
        switch ((SyncOp)m.op) {
        case SYNC_OP_ERROR:
                if (s->error.errnum == 0)
                        (void)hutch_error_set(&s->error, m.err > 0 && m.err < 4096 ? m.err : EIO,
                                              "sandbox setup failed: %s: %s", m.step, m.msg);
                break;
        case SYNC_OP_STARTED:
                s->started = true;
                s->fallbacks = (unsigned)(m.values[1] & ((1U << _OUTCOME_FALLBACK_MAX) - 1));
                s->start_ms = time_monotonic_ms();
                break;
        case SYNC_OP_EXITED:
                s->exited = true;
                s->status = m.status;
                s->end_ms = time_monotonic_ms();
                break;
        case SYNC_OP_GO:
        case SYNC_OP_CONTINUE:
        case SYNC_OP_SOCKETS:
        case SYNC_OP_CA:
        case SYNC_OP_LAYERS:
        case SYNC_OP_READY:
        case SYNC_OP_EXEC:
        case SYNC_OP_SIGNAL:
        case SYNC_OP_STEM:
        case SYNC_OP_IMAGE:
        case _SYNC_OP_MAX:
        case _SYNC_OP_INVALID:
        default:
                (void)hutch_error_set(&s->error, EBADMSG,
                                      "unexpected message from the sandbox init");
                break;
        }
}

/* Reads a chunk of the command's output into the empty buffer, keeping
 * what is within the limit. */
static void relay_fill(Relay *r) {
        ssize_t n;
        uint64_t k;

        n = read(r->in_fd, r->buf, RELAY_BUF_SIZE);
        if (n < 0) {
                if (errno == EINTR || errno == EAGAIN)
                        return;
                r->in_fd = safe_close(r->in_fd);
                return;
        }
        if (n == 0) {
                r->in_fd = safe_close(r->in_fd);
                return;
        }
        k = r->written < r->limit ? MIN((uint64_t)n, r->limit - r->written) : 0;
        if (k < (uint64_t)n)
                r->truncated = true;
        r->written += k;
        r->off = 0;
        r->len = r->out_fd >= 0 ? (size_t)k : 0; /* the reader went away: drop */
}

/* Writes what the caller's fd can take now (at most PIPE_BUF, which a
 * pipe that polls writable always accepts without blocking). */
static void relay_flush(Relay *r) {
        ssize_t n = write(r->out_fd, r->buf + r->off, MIN(r->len - r->off, (size_t)PIPE_BUF));

        if (n < 0) {
                if (errno == EINTR || errno == EAGAIN)
                        return;
                r->out_fd = -EBADF; /* the reader went away: keep draining */
                r->len = r->off = 0;
                return;
        }
        r->off += (size_t)n;
        if (r->off >= r->len)
                r->len = r->off = 0;
}

/* Init is gone: read what it sent before it went. */
static void drain_sync(Supervision *s) {
        while (s->sync_fd >= 0) {
                struct pollfd q = {.fd = s->sync_fd, .events = POLLIN};

                if (poll(&q, 1, 0) <= 0 || !(q.revents & (POLLIN | POLLHUP)))
                        break;
                handle_sync_message(s);
        }
        s->sync_fd = -EBADF;
}

void ns_command_kill(const NsCommand *c) {
        if (c->cgroup)
                (void)cgroup_kill(c->cgroup);
        if (c->init_pidfd >= 0)
                (void)pidfd_send_signal(c->init_pidfd, SIGKILL, NULL, 0);
        else if (!c->cgroup && c->sync_fd >= 0)
                (void)sync_send_values(c->sync_fd, SYNC_OP_SIGNAL,
                                       (uint64_t[3]){c->exec_id, SIGKILL, 0}, NULL, 0);
}

/* The --timeout is over: the command, and init with it. */
static void on_timeout(Supervision *s) {
        if (command_deadline_check(&s->deadline, time_monotonic_ms(), false) == COMMAND_DUE_NONE)
                return;
        s->timed_out = true;
        ns_command_kill(&(NsCommand){.cgroup = s->cgroup, .init_pidfd = s->pidfd});
}

void supervise(Supervision *s) {
        for (;;) {
                struct pollfd pfd[8];
                int idx_sync = -1, idx_sig, idx_pid = -1, timeout = -1;
                int idx_in[2] = {-1, -1}, idx_out[2] = {-1, -1};
                nfds_t n = 0;
                bool relays_busy = false;

                for (size_t i = 0; i < ELEMENTSOF(s->relays); i++)
                        relays_busy =
                                relays_busy || s->relays[i].in_fd >= 0 || s->relays[i].len > 0;
                if (s->init_gone && s->sync_fd < 0 && !relays_busy)
                        return;

                if (s->sync_fd >= 0) {
                        idx_sync = (int)n;
                        pfd[n++] = (struct pollfd){.fd = s->sync_fd, .events = POLLIN};
                }
                idx_sig = (int)n;
                pfd[n++] = (struct pollfd){.fd = s->sigfd, .events = POLLIN};
                if (!s->init_gone) {
                        idx_pid = (int)n;
                        pfd[n++] = (struct pollfd){.fd = s->pidfd, .events = POLLIN};
                }
                if (!s->timed_out && !s->init_gone)
                        timeout = command_deadline_poll_timeout(
                                command_deadline_next(&s->deadline, false), time_monotonic_ms());
                for (size_t i = 0; i < ELEMENTSOF(s->relays); i++) {
                        Relay *r = &s->relays[i];

                        if (r->len > 0) {
                                idx_out[i] = (int)n;
                                pfd[n++] = (struct pollfd){.fd = r->out_fd, .events = POLLOUT};
                        } else if (r->in_fd >= 0) {
                                idx_in[i] = (int)n;
                                pfd[n++] = (struct pollfd){.fd = r->in_fd, .events = POLLIN};
                        }
                }

                if (poll(pfd, n, timeout) < 0) {
                        if (errno == EINTR)
                                continue;
                        return;
                }

                if (idx_sync >= 0 && (pfd[idx_sync].revents & (POLLIN | POLLHUP | POLLERR)))
                        handle_sync_message(s);
                if (pfd[idx_sig].revents & POLLIN) {
                        struct signalfd_siginfo si;

                        if (read(s->sigfd, &si, sizeof(si)) == sizeof(si) && !s->init_gone) {
                                s->forwarded_signal = (int)si.ssi_signo;
                                (void)pidfd_send_signal(s->pidfd, (int)si.ssi_signo, NULL, 0);
                        }
                }
                if (timeout >= 0)
                        on_timeout(s);
                for (size_t i = 0; i < ELEMENTSOF(s->relays); i++) {
                        if (idx_in[i] >= 0 &&
                            (pfd[idx_in[i]].revents & (POLLIN | POLLHUP | POLLERR)))
                                relay_fill(&s->relays[i]);
                        if (idx_out[i] >= 0 && pfd[idx_out[i]].revents) {
                                if (pfd[idx_out[i]].revents & (POLLERR | POLLNVAL)) {
                                        s->relays[i].out_fd = -EBADF;
                                        s->relays[i].len = s->relays[i].off = 0;
                                } else
                                        relay_flush(&s->relays[i]);
                        }
                }
                if (idx_pid >= 0 && (pfd[idx_pid].revents & POLLIN)) {
                        s->init_gone = true;
                        drain_sync(s);
                        if (!s->end_ms)
                                s->end_ms = time_monotonic_ms();
                }
        }
}
