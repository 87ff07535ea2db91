/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The commands of one microVM over the agent's port (vm-session.h). */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "macro.h"
#include "time-util.h"
#include "vm/vm-session.h"

void vm_mux_init(VmMux *m, Vm *vm) {
        *m = (VmMux){.vm = vm};
}

void vm_mux_done(VmMux *m) {
        m->out = mfree(m->out);
        m->out_len = m->out_off = m->out_cap = 0;
}

static void mux_fail(VmMux *m, int err, const char *what, unsigned chan) {
        if (m->error.errnum == 0)
                (void)hutch_error_set(&m->error, err, "%s (channel %u)", what, chan);
}

/* Writes what the port takes of the queued frames. */
static void mux_push(VmMux *m) {
        while (m->out_off < m->out_len) {
                ssize_t n = write(m->vm->agent_fd, m->out + m->out_off, m->out_len - m->out_off);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return;
                if (n <= 0) {
                        m->gone = true;
                        return;
                }
                m->out_off += (size_t)n;
        }
        m->out_off = m->out_len = 0;
}

/* Queues one frame for the agent and writes what the port takes. */
static int mux_send(VmMux *m, AgentMsg type, uint8_t chan, const void *payload, size_t len) {
        size_t need = AGENT_HEADER_SIZE + len;

        if (len > AGENT_FRAME_MAX)
                return -EMSGSIZE;
        if (m->gone || m->error.errnum)
                return -EPIPE;
        if (m->out_len - m->out_off + need > VM_MUX_OUT_MAX) {
                mux_fail(m, EPROTO, "the guest does not read its port", chan);
                return -EPROTO;
        }
        /* Compacted only when it must grow otherwise. */
        if (m->out_off > 0 && m->out_cap - m->out_len < need) {
                memmove(m->out, m->out + m->out_off, m->out_len - m->out_off);
                m->out_len -= m->out_off;
                m->out_off = 0;
        }
        if (m->out_cap - m->out_len < need) {
                size_t cap = MAX(m->out_cap * 2, m->out_len + need);
                unsigned char *p = realloc(m->out, cap);

                if (!p) {
                        mux_fail(m, ENOMEM, "out of memory", chan);
                        return -ENOMEM;
                }
                m->out = p;
                m->out_cap = cap;
        }
        agent_frame_header(m->out + m->out_len, type, chan, payload, len);
        if (len > 0)
                memcpy(m->out + m->out_len + AGENT_HEADER_SIZE, payload, len);
        m->out_len += need;
        mux_push(m);
        return 0;
}

static void send_le32(VmMux *m, AgentMsg type, uint8_t chan, uint32_t v) {
        unsigned char b[4];

        agent_put_le32(b, v);
        (void)mux_send(m, type, chan, b, sizeof(b));
}

/* Acknowledges the output taken, once there is enough of it to matter
 * (agent-protocol.h: the agent never waits for less). */
static void session_ack(VmMux *m, VmSession *ss) {
        if (ss->taken < AGENT_ACK_MIN || ss->exited || ss->chan < 0)
                return;
        send_le32(m, AGENT_MSG_ACK, (uint8_t)ss->chan, (uint32_t)ss->taken);
        ss->taken = 0;
}

static void pending_clear(VmSession *ss, size_t i) {
        VmPending *p = &ss->pending[i];

        ss->held -= p->len - p->off;
        ss->taken += p->len - p->off;
        p->len = p->off = 0;
}

/* An output frame of stream @i: what the output limit keeps waits for the
 * session's descriptor; the rest is dropped, and counts as taken. */
static int session_output(VmMux *m, VmSession *ss, size_t i, const void *data, size_t len) {
        Relay *r = &ss->s->relays[i];
        VmPending *p = &ss->pending[i];
        uint64_t k = r->written < r->limit ? MIN((uint64_t)len, r->limit - r->written) : 0;

        /* SECURITY: what a guest may make the host hold is bounded. */
        if (ss->held + ss->taken + len > AGENT_WINDOW) {
                mux_fail(m, EPROTO, "the guest overran its output window", (unsigned)ss->chan);
                return -EPROTO;
        }
        if (!r->limit)
                k = len;
        if (k < len)
                r->truncated = true;
        r->written += k;
        if (r->out_fd < 0)
                k = 0; /* the reader went away: dropped */
        if (k > 0) {
                if (p->off > 0) {
                        memmove(p->buf, p->buf + p->off, p->len - p->off);
                        p->len -= p->off;
                        p->off = 0;
                }
                if (p->cap - p->len < k) {
                        size_t cap = MAX(p->cap * 2, (size_t)AGENT_CHUNK);
                        unsigned char *b;

                        cap = MAX(cap, p->len + (size_t)k);
                        b = realloc(p->buf, cap);

                        if (!b) {
                                mux_fail(m, ENOMEM, "out of memory", (unsigned)ss->chan);
                                return -ENOMEM;
                        }
                        p->buf = b;
                        p->cap = cap;
                }
                memcpy(p->buf + p->len, data, (size_t)k);
                p->len += (size_t)k;
                ss->held += k;
        }
        ss->taken += len - k;
        session_ack(m, ss);
        return 0;
}

/* A connection's guest side half-closed: passed on to the stdout socket
 * once its pending output is written (a pipe or file has no half-close:
 * its end comes with the session's). */
static void session_out_eof(VmSession *ss) {
        Relay *r = &ss->s->relays[0];

        if (!ss->out_eof || ss->out_shut || ss->pending[0].len > ss->pending[0].off)
                return;
        ss->out_shut = true;
        if (r->out_fd >= 0 && ss->sock[1])
                (void)shutdown(r->out_fd, SHUT_WR);
}

/* Whether an EXEC's ERROR (le32 errno, "step" NUL "message" NUL) is at
 * AGENT_STEP_USER. */
static bool error_step_is_user(const void *payload, size_t len) {
        size_t pos = 4;
        const char *step = len >= 6 ? agent_payload_next(payload, len, &pos) : NULL;

        return step && strcmp(step, AGENT_STEP_USER) == 0;
}

/* One frame from the agent, to the session of its channel. */
static void mux_frame(VmMux *m, const AgentFrame *fr) {
        VmSession *ss = m->chans[fr->chan];

        if (fr->type == AGENT_MSG_PONG)
                return;
        if (!ss) {
                mux_fail(m, EPROTO, "a frame for no command from the guest", fr->chan);
                return;
        }
        switch ((AgentMsg)fr->type) {
        case AGENT_MSG_STARTED:
                if (ss->started || ss->failed)
                        break;
                ss->started = true;
                if (fr->len == 4)
                        ss->pid = agent_get_le32(fr->payload);
                return;
        case AGENT_MSG_ERROR:
                if (ss->started || ss->failed)
                        break;
                ss->failed = true;
                ss->user_failed = error_step_is_user(fr->payload, fr->len);
                (void)vm_agent_error_decode(fr->payload, fr->len,
                                            "the command could not start in the guest", &ss->error);
                /* The agent freed the channel. */
                m->chans[fr->chan] = NULL;
                ss->chan = -1;
                return;
        case AGENT_MSG_STDOUT:
        case AGENT_MSG_STDERR:
                if (!ss->started || ss->exited)
                        break;
                if (fr->type == AGENT_MSG_STDOUT && fr->len == 0) {
                        ss->out_eof = true;
                        session_out_eof(ss);
                        return;
                }
                (void)session_output(m, ss, fr->type == AGENT_MSG_STDERR, fr->payload, fr->len);
                return;
        case AGENT_MSG_ACK:
                if (fr->len != 4)
                        break;
                ss->in_flight -= MIN(ss->in_flight, (uint64_t)agent_get_le32(fr->payload));
                return;
        case AGENT_MSG_EXIT:
                if (!ss->started || ss->exited ||
                    agent_exit_decode(fr->payload, fr->len, &ss->exit) < 0)
                        break;
                ss->exited = true;
                ss->s->end_ms = time_monotonic_ms();
                return;
        case AGENT_MSG_HELLO:
        case AGENT_MSG_SETUP:
        case AGENT_MSG_READY:
        case AGENT_MSG_EXEC:
        case AGENT_MSG_STDIN:
        case AGENT_MSG_SIGNAL:
        case AGENT_MSG_PING:
        case AGENT_MSG_PONG:
        case AGENT_MSG_CONNECT:
        case AGENT_MSG_RESIZE:
        case _AGENT_MSG_MAX:
        case _AGENT_MSG_INVALID:
        default:
                break;
        }
        mux_fail(m, EPROTO, "an unexpected frame from the guest", fr->chan);
}

void vm_mux_poll_fill(const VmMux *m, struct pollfd *p) {
        bool broken = m->gone || m->error.errnum;

        *p = (struct pollfd){
                .fd = broken ? -1 : m->vm->agent_fd,
                .events = (short)(POLLIN | (m->out_off < m->out_len ? POLLOUT : 0)),
        };
}

void vm_mux_poll_handle(VmMux *m, const struct pollfd *p) {
        AgentFrame fr;
        ssize_t n;
        int r;

        if (p->revents & POLLOUT)
                mux_push(m);
        if (!(p->revents & ~POLLOUT))
                return;
        n = agent_reader_fill(m->vm->reader, m->vm->agent_fd);
        if (n == 0 || (n < 0 && n != -EAGAIN && n != -ENOBUFS && n != -EBADMSG))
                m->gone = true;
        while (!m->error.errnum && (r = agent_reader_next(m->vm->reader, &fr)) != 0) {
                if (r < 0) {
                        mux_fail(m, EBADMSG, "a malformed frame from the guest", 0);
                        return;
                }
                mux_frame(m, &fr);
        }
}

/* Which of @ss's descriptors are sockets. */
static void session_kinds(VmSession *ss) {
        int fds[3] = {ss->in_fd, ss->s->relays[0].out_fd, ss->s->relays[1].out_fd};

        for (size_t i = 0; i < 3; i++) {
                struct stat st;

                ss->sock[i] = fds[i] >= 0 && fstat(fds[i], &st) >= 0 && S_ISSOCK(st.st_mode);
        }
}

/* EXEC or CONNECT on a free channel. */
static int session_open(VmMux *m, VmSession *ss, AgentMsg type, const void *payload, size_t len) {
        int r;

        session_kinds(ss);
        for (size_t c = 0; c < AGENT_MAX_EXECS; c++) {
                if (m->chans[c])
                        continue;
                r = mux_send(m, type, (uint8_t)c, payload, len);
                if (r < 0)
                        return r;
                m->chans[c] = ss;
                ss->chan = (int)c;
                return 0;
        }
        return -EBUSY;
}

int vm_session_start(VmMux *m, VmSession *ss, const void *exec, size_t len) {
        return session_open(m, ss, AGENT_MSG_EXEC, exec, len);
}

int vm_session_connect(VmMux *m, VmSession *ss, uint16_t port) {
        unsigned char b[4];

        agent_put_le32(b, port);
        return session_open(m, ss, AGENT_MSG_CONNECT, b, sizeof(b));
}

void vm_session_resize(VmMux *m, VmSession *ss, unsigned rows, unsigned cols) {
        unsigned char b[8];

        if (!ss->started || ss->exited || ss->chan < 0)
                return;
        agent_put_le32(b, rows);
        agent_put_le32(b + 4, cols);
        (void)mux_send(m, AGENT_MSG_RESIZE, (uint8_t)ss->chan, b, sizeof(b));
}

void vm_session_attach(VmMux *m, VmSession *ss, uint8_t chan) {
        session_kinds(ss);
        m->chans[chan] = ss;
        ss->chan = chan;
        ss->started = true;
}

void vm_session_release(VmMux *m, VmSession *ss) {
        if (ss->chan >= 0 && m->chans[ss->chan] == ss)
                m->chans[ss->chan] = NULL;
        ss->chan = -1;
        for (size_t i = 0; i < 2; i++) {
                ss->pending[i].buf = mfree(ss->pending[i].buf);
                ss->pending[i].len = ss->pending[i].off = ss->pending[i].cap = 0;
        }
}

bool vm_session_output_pending(const VmSession *ss) {
        return ss->held > 0;
}

bool vm_session_ended(const VmMux *m, const VmSession *ss) {
        return ss->failed || m->gone || m->error.errnum ||
               (ss->exited && !vm_session_output_pending(ss));
}

void vm_session_poll_fill(const VmMux *m, const VmSession *ss, struct pollfd p[VM_SESSION_NPOLL]) {
        bool want_in = ss->started && !ss->exited && !ss->stdin_eof &&
                       ss->in_flight + AGENT_CHUNK <= AGENT_WINDOW &&
                       m->out_len - m->out_off < VM_MUX_OUT_SOFT;

        p[0] = (struct pollfd){.fd = want_in ? ss->in_fd : -1, .events = POLLIN};
        for (size_t i = 0; i < 2; i++)
                p[1 + i] = (struct pollfd){.fd = ss->pending[i].len > ss->pending[i].off
                                                         ? ss->s->relays[i].out_fd
                                                         : -1,
                                           .events = POLLOUT};
}

/* Writes what the descriptor of stream @i takes now: at most PIPE_BUF,
 * which a pipe that polled writable accepts without blocking. */
static void session_flush(VmMux *m, VmSession *ss, size_t i, short revents) {
        VmPending *p = &ss->pending[i];
        Relay *r = &ss->s->relays[i];
        ssize_t n = -1;

        if (!(revents & (POLLERR | POLLNVAL))) {
                size_t k = MIN(p->len - p->off, (size_t)PIPE_BUF);

                n = ss->sock[1 + i]
                            ? send(r->out_fd, p->buf + p->off, k, MSG_DONTWAIT | MSG_NOSIGNAL)
                            : write(r->out_fd, p->buf + p->off, k);
        }
        if (n < 0 && (errno == EINTR || errno == EAGAIN) && !(revents & (POLLERR | POLLNVAL)))
                return;
        if (n < 0) {
                /* The reader went away: dropped from now on. */
                r->out_fd = -EBADF;
                pending_clear(ss, i);
        } else {
                p->off += (size_t)n;
                ss->held -= (uint64_t)n;
                ss->taken += (uint64_t)n;
                if (p->off >= p->len)
                        p->len = p->off = 0;
        }
        if (i == 0)
                session_out_eof(ss);
        session_ack(m, ss);
}

void vm_session_poll_handle(VmMux *m, VmSession *ss, const struct pollfd p[VM_SESSION_NPOLL]) {
        for (size_t i = 0; i < 2; i++)
                if (p[1 + i].revents)
                        session_flush(m, ss, i, p[1 + i].revents);
        if (p[0].revents && ss->chan >= 0 && !ss->exited && !ss->stdin_eof) {
                char buf[AGENT_CHUNK];
                ssize_t n = ss->sock[0] ? recv(ss->in_fd, buf, sizeof(buf), MSG_DONTWAIT)
                                        : read(ss->in_fd, buf, sizeof(buf));

                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        return;
                if (n <= 0) {
                        ss->stdin_eof = true;
                        n = 0;
                }
                ss->in_flight += (uint64_t)n;
                (void)mux_send(m, AGENT_MSG_STDIN, (uint8_t)ss->chan, buf, (size_t)n);
        }
}

void vm_session_signal(VmMux *m, VmSession *ss, int sig) {
        if (!ss->started || ss->exited || ss->chan < 0)
                return;
        ss->s->forwarded_signal = sig;
        send_le32(m, AGENT_MSG_SIGNAL, (uint8_t)ss->chan, (uint32_t)sig);
}

void vm_session_kill(VmMux *m, VmSession *ss) {
        if (!ss->started || ss->exited)
                return;
        if (!ss->kill_sent_ms)
                ss->kill_sent_ms = MAX(time_monotonic_ms(), 1U);
        vm_session_signal(m, ss, SIGKILL);
}

void vm_session_discard_output(VmMux *m, VmSession *ss) {
        for (size_t i = 0; i < 2; i++) {
                ss->s->relays[i].out_fd = -EBADF;
                pending_clear(ss, i);
        }
        session_ack(m, ss);
}

int vm_session_outcome(const VmSession *ss, Outcome *o) {
        int status = ss->exit.status;

        if (!ss->exited)
                return -EPROTO;
        if (WIFEXITED(status)) {
                o->reason = OUTCOME_EXITED;
                o->exit_code = WEXITSTATUS(status);
        } else if (WIFSIGNALED(status)) {
                o->reason = OUTCOME_SIGNALED;
                o->signal = WTERMSIG(status);
                o->exit_code = 128 + o->signal;
        } else
                return -EPROTO;
        o->cpu_ms = ss->exit.cpu_usec / 1000;
        o->mem_peak_bytes = ss->exit.mem_peak_bytes;
        o->stdout_truncated = ss->s->relays[0].truncated;
        o->stderr_truncated = ss->s->relays[1].truncated;
        if (ss->exit.flags & AGENT_EXIT_OOM)
                o->reason = OUTCOME_OOM;
        else if ((ss->exit.flags & AGENT_EXIT_PIDS) && o->exit_code != 0)
                o->reason = OUTCOME_PIDS;
        else if (o->reason == OUTCOME_SIGNALED && o->signal == ss->s->forwarded_signal)
                o->reason = OUTCOME_KILLED;
        return 0;
}
