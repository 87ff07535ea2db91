/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* POST /v1/sandboxes/{name}/exec and .../exec/stream: a command in a
 * persistent sandbox, driven through the keeper's control protocol
 * (src/lib/sandbox/keeper.h) from the event loop, so that one exec never
 * holds up another request.
 *
 * The command's stdin is a sealed memfd holding the request's "stdin" (or
 * /dev/null), its stdout and stderr are pipes whose read ends the loop
 * watches, and the keeper's answers ("started", "outcome") arrive on the
 * control socket. The exec ends when the outcome is in and both pipes are
 * at EOF. If the HTTP client goes away first, the control socket is
 * closed, which makes the keeper kill the command. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>

#include "api/hutch-ext.h"
#include "base64.h"
#include "fd-util.h"
#include "log.h"
#include "serve-exec-args.h"
#include "serve.h"
#include "strv.h"

/* After the outcome, how long to wait for the pipes' EOF: only a process
 * that escaped the exec's cgroup (no cgroup delegation) can hold them. */
#define EXEC_EOF_GRACE_MS 2000
#define EXEC_READ_SIZE 65536

typedef struct ExecOutput {
        ExecJob *job;
        const char *name; /* "stdout", "stderr" */
        int fd;           /* the read end, or -EBADF at EOF */
        struct event *ev;
        struct evbuffer *captured; /* not streaming: what goes in the answer */
        bool truncated;
        char carry[4]; /* streaming: an incomplete UTF-8 sequence held back */
        size_t carry_len;
} ExecOutput;

struct ExecJob {
        Server *srv;
        struct evhttp_request *req;      /* NULL once the client is gone */
        struct evhttp_connection *evcon; /* its closecb points at us while set */
        bool stream, detach, started, have_outcome, paused;
        int sock; /* the keeper connection; closing it kills the command */
        struct event *sock_ev, *grace_ev, *hangup_ev;
        ExecOutput out[2];
        uint64_t output_limit, id;
        char *outcome_json;
        ExecJob *prev, *next;
};

static void exec_args_done(ExecArgs *a) {
        a->argv = strv_free(a->argv);
        a->env = strv_free(a->env);
}

/* What exec takes besides argv and env. */
static int exec_args_validate_rest(const ExecArgs *a, HutchError *reterr) {
        if (a->cwd && a->cwd[0] != '/')
                return hutch_error_set_pointer(reterr, EINVAL, "/cwd",
                                               "the working directory must be absolute");
        if (a->user && !hutch_ext_user_spec_is_valid(a->user))
                return hutch_error_set_pointer(reterr, EINVAL, "/user",
                                               "invalid user '%s' (want NAME, UID, NAME:GROUP or "
                                               "UID:GID)",
                                               a->user);
        if (a->stdin_text && a->stdin_base64)
                return hutch_error_set_pointer(reterr, EINVAL, "/stdin_base64",
                                               "give 'stdin' or 'stdin_base64', not both");
        if (a->detach && (a->stdin_text || a->stdin_base64))
                return hutch_error_set_pointer(reterr, EINVAL, "/detach",
                                               "a detached command has no stdin (start it with "
                                               "'stdin_open' and POST .../execs/{exec}/stdin)");
        if (a->stdin_open && !a->detach)
                return hutch_error_set_pointer(reterr, EINVAL, "/stdin_open",
                                               "'stdin_open' needs 'detach'");
        if (a->output_limit > SERVE_OUTPUT_MAX)
                return hutch_error_set_pointer(reterr, EINVAL, "/output_limit",
                                               "'output_limit' is at most %u bytes",
                                               SERVE_OUTPUT_MAX);
        return 0;
}

/* @env_json is the request's "env": an object (API 1.1) or an array (1.0),
 * for the error's pointer. */
static int exec_args_validate(const ExecArgs *a, json_t *env_json, HutchError *reterr) {
        size_t i = 0;

        if (!a->argv[0] || !a->argv[0][0])
                return hutch_error_set_pointer(reterr, EINVAL, "/argv",
                                               "'argv' must name a command");
        if (json_is_object(env_json)) {
                const char *key;
                json_t *v;

                /* The names as sent: "A=B" must not pass as "A". */
                json_object_foreach(env_json, key, v) {
                        char ptr[HUTCH_ERROR_POINTER_MAX] = "/env";

                        if (env_name_is_valid(key))
                                continue;
                        serve_member_pointer(ptr + 4, sizeof(ptr) - 4, key, -1);
                        return hutch_error_set_pointer(reterr, EINVAL, ptr,
                                                       "invalid environment variable name "
                                                       "'%.64s' (want {\"KEY\": \"VALUE\"}, KEY "
                                                       "matching [A-Za-z_][A-Za-z0-9_]*)",
                                                       key);
                }
                return exec_args_validate_rest(a, reterr);
        }
        STRV_FOREACH(e, a->env) {
                _cleanup_free_ char *key = strndup(*e, strcspn(*e, "="));
                char ptr[32];

                (void)snprintf(ptr, sizeof(ptr), "/env/%zu", i++);
                if (!key)
                        return hutch_error_set(reterr, ENOMEM, "out of memory");
                if (!strchr(*e, '=') || !env_name_is_valid(key))
                        return hutch_error_set_pointer(reterr, EINVAL, ptr,
                                                       "invalid environment entry '%.64s' (want "
                                                       "{\"KEY\": \"VALUE\"}, KEY matching "
                                                       "[A-Za-z_][A-Za-z0-9_]*)",
                                                       *e);
        }
        return exec_args_validate_rest(a, reterr);
}

/* A sealed memfd holding @data: the command reads it as its stdin. */
static int stdin_memfd(const char *data, size_t len) {
        _cleanup_close_ int fd = memfd_create("hutch-serve-stdin", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        int r;

        if (fd < 0)
                return negative_errno();
        r = loop_write(fd, data, len);
        if (r < 0)
                return r;
        if (lseek(fd, 0, SEEK_SET) < 0)
                return negative_errno();
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0)
                return negative_errno();
        return TAKE_FD(fd);
}

/* ---- the job ---- */

static void job_free(ExecJob *job) {
        if (!job)
                return;
        if (job->prev)
                job->prev->next = job->next;
        else if (job->srv->jobs == job)
                job->srv->jobs = job->next;
        if (job->next)
                job->next->prev = job->prev;
        if (job->evcon)
                evhttp_connection_set_closecb(job->evcon, NULL, NULL);
        for (size_t i = 0; i < ELEMENTSOF(job->out); i++) {
                if (job->out[i].ev)
                        event_free(job->out[i].ev);
                safe_close(job->out[i].fd);
                if (job->out[i].captured)
                        evbuffer_free(job->out[i].captured);
        }
        if (job->sock_ev)
                event_free(job->sock_ev);
        if (job->grace_ev)
                event_free(job->grace_ev);
        if (job->hangup_ev)
                event_free(job->hangup_ev);
        /* SECURITY: closing the connection before the outcome makes the
         * keeper kill the command and everything it started. */
        safe_close(job->sock);
        free(job->outcome_json);
        free(job);
}

/* The client went away (or the connection failed); the command is killed
 * with the job. evhttp frees the request after this returns, unless it
 * was mid-answer (a stream): then libevent 2.1 has detached it from the
 * connection and left it to us. */
static void on_client_close(struct evhttp_connection *evcon, void *arg) {
        ExecJob *job = arg;

        if (job->req && !evhttp_request_get_connection(job->req))
                evhttp_request_free(job->req);
        job->req = NULL;
        job->evcon = NULL;
        log_debug("exec client went away; ending the command");
        job_free(job);
}

/* The client's socket saw a hangup while evhttp was not reading from it
 * (it does not, before an answer starts): drop the connection, which ends
 * the job through on_client_close(). */
static void on_client_hangup(evutil_socket_t fd, short what, void *arg) {
        ExecJob *job = arg;

        if (job->evcon)
                evhttp_connection_free(job->evcon);
}

/* evhttp reads from the connection while a streamed answer is going out
 * (that is how it sees a hangup), with its read timeout: off while the
 * command runs, which may be silent for longer; back on for the
 * connection's next request. The write timeout stays: a client that stops
 * reading is dropped, and its command killed, after SERVE_TIMEOUT_S. */
static void connection_read_timeout(struct evhttp_connection *evcon, bool on) {
        struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
        const struct timeval tv = {.tv_sec = SERVE_TIMEOUT_S};

        if (bev)
                (void)bufferevent_set_timeouts(bev, on ? &tv : NULL, &tv);
}

/* Detaches the job from its connection before the final answer, which
 * may be the connection's end. */
static struct evhttp_request *job_take_request(ExecJob *job) {
        struct evhttp_request *req = job->req;

        if (job->evcon) {
                evhttp_connection_set_closecb(job->evcon, NULL, NULL);
                if (job->stream && job->started)
                        connection_read_timeout(job->evcon, true);
        }
        job->evcon = NULL;
        job->req = NULL;
        if (job->hangup_ev) {
                event_free(job->hangup_ev);
                job->hangup_ev = NULL;
        }
        return req;
}

static void emit_line(ExecJob *job, json_t *obj);

/* Ends the job with an error: an error answer before the stream started,
 * an {"error":...} line after. */
static void job_fail(ExecJob *job, int r, const HutchError *err) {
        const char *msg = err && err->msg[0] ? err->msg : strerror(-r);

        if (job->stream && job->started && job->req) {
                emit_line(job, json_pack("{s:{s:s,s:s,s:n}}", "error", "code", "exec_failed",
                                         "message", msg, "field"));
                evhttp_send_reply_end(job_take_request(job));
        } else if (job->req)
                serve_reply_status(job_take_request(job), 503, "exec_failed", NULL, "%s", msg);
        job_free(job);
}

static void on_flushed(struct evhttp_connection *evcon, void *arg);

static void outputs_enable(ExecJob *job, bool on) {
        for (size_t i = 0; i < ELEMENTSOF(job->out); i++)
                if (job->out[i].fd >= 0 && job->out[i].ev) {
                        if (on)
                                (void)event_add(job->out[i].ev, NULL);
                        else
                                (void)event_del(job->out[i].ev);
                }
}

/* One NDJSON line of the stream (@obj taken). When the client reads more
 * slowly than the command writes, reading the pipes pauses (the command
 * then blocks on its full pipe) until the output drains. */
static void emit_line(ExecJob *job, json_t *obj) {
        _cleanup_free_ char *text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
        struct evbuffer *buf;
        struct bufferevent *bev;

        json_decref(obj);
        if (!text || !job->req)
                return;
        buf = evbuffer_new();
        if (!buf)
                return;
        if (evbuffer_add(buf, text, strlen(text)) == 0 && evbuffer_add(buf, "\n", 1) == 0)
                evhttp_send_reply_chunk_with_cb(job->req, buf, on_flushed, job);
        evbuffer_free(buf);
        bev = job->evcon ? evhttp_connection_get_bufferevent(job->evcon) : NULL;
        if (bev && evbuffer_get_length(bufferevent_get_output(bev)) > SERVE_STREAM_HIGH_WATER &&
            !job->paused) {
                job->paused = true;
                outputs_enable(job, false);
        }
}

static void on_flushed(struct evhttp_connection *evcon, void *arg) {
        ExecJob *job = arg;

        if (job->paused) {
                job->paused = false;
                outputs_enable(job, true);
        }
}

/* The outcome object of the keeper, with this answer's truncation. */
static json_t *job_outcome(const ExecJob *job) {
        json_t *o = json_loads(job->outcome_json, 0, NULL);

        if (!json_is_object(o)) {
                json_decref(o);
                return NULL;
        }
        if (!job->stream) {
                (void)json_object_set_new(o, "stdout_truncated",
                                          json_boolean(job->out[0].truncated));
                (void)json_object_set_new(o, "stderr_truncated",
                                          json_boolean(job->out[1].truncated));
        }
        return o;
}

static void job_finish(ExecJob *job) {
        json_t *outcome = job_outcome(job), *ans;
        struct evhttp_request *req;

        if (!outcome) {
                HutchError err = {};

                (void)hutch_error_set(&err, EPROTO, "malformed outcome from the sandbox");
                job_fail(job, -EPROTO, &err);
                return;
        }
        if (job->stream) {
                emit_line(job, json_pack("{s:o}", "outcome", outcome));
                req = job_take_request(job);
                if (req)
                        evhttp_send_reply_end(req);
                job_free(job);
                return;
        }
        ans = json_pack("{s:o}", "outcome", outcome);
        for (size_t i = 0; ans && i < ELEMENTSOF(job->out); i++) {
                struct evbuffer *b = job->out[i].captured;
                size_t len = evbuffer_get_length(b);
                const char *data = len ? (const char *)evbuffer_pullup(b, -1) : "";
                const char *enc = NULL;
                char key[32];
                json_t *s;

                /* A cut in the middle of a character would turn the
                 * whole text into base64. */
                if (job->out[i].truncated)
                        len -= serve_utf8_incomplete_tail(data, len);
                s = serve_output_string(data, len, &enc);
                (void)snprintf(key, sizeof(key), "%s_encoding", job->out[i].name);
                if (!s || json_object_set_new(ans, job->out[i].name, s) < 0 ||
                    json_object_set_new(ans, key, json_string(enc)) < 0) {
                        json_decref(ans);
                        ans = NULL;
                }
        }
        req = job_take_request(job);
        if (req)
                serve_reply_json(req, 200, ans);
        else
                json_decref(ans);
        job_free(job);
}

static void job_maybe_finish(ExecJob *job) {
        if (job->have_outcome && job->out[0].fd < 0 && job->out[1].fd < 0)
                job_finish(job);
}

static void on_grace(evutil_socket_t fd, short what, void *arg) {
        job_finish(arg);
}

static void output_eof(ExecOutput *out) {
        ExecJob *job = out->job;

        if (out->ev) {
                event_free(out->ev);
                out->ev = NULL;
        }
        out->fd = safe_close(out->fd);
        if (job->stream && out->carry_len > 0) {
                const char *enc = NULL;
                json_t *s = serve_output_string(out->carry, out->carry_len, &enc);

                out->carry_len = 0;
                emit_line(job, s ? json_pack("{s:s,s:o,s:s}", "stream", out->name, "data", s,
                                             "encoding", enc)
                                 : NULL);
        }
}

static void on_output(evutil_socket_t fd, short what, void *arg) {
        ExecOutput *out = arg;
        ExecJob *job = out->job;
        char buf[sizeof(out->carry) + EXEC_READ_SIZE];
        size_t have = out->carry_len, hold;
        ssize_t n;

        memcpy(buf, out->carry, out->carry_len);
        n = read(out->fd, buf + have, EXEC_READ_SIZE);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n <= 0) {
                output_eof(out);
                job_maybe_finish(job);
                return;
        }
        if (!job->stream) {
                size_t room = job->output_limit - evbuffer_get_length(out->captured);

                if ((size_t)n > room)
                        out->truncated = true;
                (void)evbuffer_add(out->captured, buf, MIN((size_t)n, room));
                return;
        }
        have += (size_t)n;
        hold = serve_utf8_incomplete_tail(buf, have);
        memcpy(out->carry, buf + have - hold, hold);
        out->carry_len = hold;
        if (have > hold) {
                const char *enc = NULL;
                json_t *s = serve_output_string(buf, have - hold, &enc);

                emit_line(job, s ? json_pack("{s:s,s:o,s:s}", "stream", out->name, "data", s,
                                             "encoding", enc)
                                 : NULL);
        }
}

static void on_started(ExecJob *job) {
        if (job->detach) {
                struct evhttp_request *req = job_take_request(job);

                serve_reply_json(req, 202, json_pack("{s:I}", "id", (json_int_t)job->id));
                job_free(job);
                return;
        }
        if (job->stream) {
                struct evkeyvalq *h = evhttp_request_get_output_headers(job->req);

                (void)evhttp_add_header(h, "Content-Type", "application/x-ndjson");
                (void)evhttp_add_header(h, "Cache-Control", "no-store");
                evhttp_send_reply_start(job->req, 200, NULL);
                if (job->evcon)
                        connection_read_timeout(job->evcon, false);
                emit_line(job, json_pack("{s:{s:I}}", "started", "id", (json_int_t)job->id));
        }
        /* Only now: a stream's lines come after its "started". */
        outputs_enable(job, !job->paused);
}

static void on_keeper(evutil_socket_t fd, short what, void *arg) {
        ExecJob *job = arg;

        for (;;) {
                HutchError err = {};
                char *json = NULL;
                uint64_t id = 0;
                int code = 0, r;

                r = hutch_ext_exec_answer(job->sock, &id, &code, &json, &err);
                if (r == -EAGAIN)
                        return;
                if (r < 0) {
                        job_fail(job, r, &err);
                        return;
                }
                if (r == HUTCH_EXT_ANSWER_STARTED && !job->started) {
                        bool detach = job->detach;

                        job->started = true;
                        job->id = id;
                        on_started(job);
                        if (detach)
                                return; /* on_started() answered and freed the job */
                        continue;
                }
                if (r != HUTCH_EXT_ANSWER_OUTCOME || !job->started) {
                        free(json);
                        (void)hutch_error_set(&err, EPROTO, "unexpected answer from the keeper");
                        job_fail(job, -EPROTO, &err);
                        return;
                }
                job->outcome_json = json;
                job->have_outcome = true;
                (void)event_del(job->sock_ev);
                if (job->out[0].fd >= 0 || job->out[1].fd >= 0) {
                        struct timeval tv = {.tv_sec = EXEC_EOF_GRACE_MS / 1000,
                                             .tv_usec = (EXEC_EOF_GRACE_MS % 1000) * 1000};

                        job->grace_ev = evtimer_new(job->srv->base, on_grace, job);
                        if (job->grace_ev)
                                (void)evtimer_add(job->grace_ev, &tv);
                }
                job_maybe_finish(job);
                return;
        }
}

/* ---- starting ---- */

static int job_new(ServeCtx *c, bool stream, const ExecArgs *a, ExecJob **ret) {
        ExecJob *job = calloc(1, sizeof(ExecJob));

        if (!job)
                return -ENOMEM;
        *job = (ExecJob){
                .srv = c->srv,
                .req = c->req,
                .stream = stream,
                .detach = a->detach,
                .sock = -EBADF,
                .output_limit = a->output_limit,
        };
        for (size_t i = 0; i < ELEMENTSOF(job->out); i++) {
                job->out[i] = (ExecOutput){
                        .job = job,
                        .name = i == 0 ? "stdout" : "stderr",
                        .fd = -EBADF,
                };
                if (!stream) {
                        job->out[i].captured = evbuffer_new();
                        if (!job->out[i].captured) {
                                job_free(job);
                                return -ENOMEM;
                        }
                }
        }
        *ret = job;
        return 0;
}

/* Sends the exec request with the command's stdio and arms the events.
 * Returns -errno with @reterr; the job is then the caller's to free. */
static int job_start(ExecJob *job, const ExecArgs *a, const char *stdin_data, size_t stdin_len,
                     HutchError *reterr) {
        _cleanup_close_ int in = -EBADF, out_w = -EBADF, err_w = -EBADF;
        int p[2], r;
        HutchExtExec req;

        if (stdin_data)
                in = stdin_memfd(stdin_data, stdin_len);
        else {
                in = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (in < 0)
                        in = negative_errno();
        }
        if (in < 0)
                return hutch_error_set(reterr, -in, "cannot prepare the command's stdin: %s",
                                       strerror(-in));
        for (size_t i = 0; i < ELEMENTSOF(job->out); i++) {
                if (job->detach) {
                        /* The keeper sends a detached command's output to
                         * its log; the descriptors are only the protocol's. */
                        r = open("/dev/null", O_WRONLY | O_CLOEXEC);
                        if (r < 0)
                                return hutch_error_set(reterr, errno, "open /dev/null: %m");
                        *(i == 0 ? &out_w : &err_w) = r;
                        continue;
                }
                if (pipe2(p, O_CLOEXEC) < 0)
                        return hutch_error_set(reterr, errno, "pipe: %m");
                job->out[i].fd = p[0];
                *(i == 0 ? &out_w : &err_w) = p[1];
                if (fcntl(p[0], F_SETFL, O_NONBLOCK) < 0)
                        return hutch_error_set(reterr, errno, "fcntl: %m");
                job->out[i].ev = event_new(job->srv->base, p[0], EV_READ | EV_PERSIST, on_output,
                                           &job->out[i]);
                if (!job->out[i].ev)
                        return hutch_error_set(reterr, ENOMEM, "out of memory");
        }
        req = (HutchExtExec){
                .argv = a->argv,
                .env = a->env,
                .cwd = a->cwd,
                .timeout_ms = a->timeout_ms,
                .detach = a->detach,
                .fds = {in, out_w, err_w},
                .stdin_pipe = a->stdin_open,
                .user = a->user,
        };
        r = hutch_ext_exec_send(job->sock, &req, reterr);
        if (r < 0)
                return r;
        /* Only the command holds the write ends now: their EOF is its end. */
        if (fcntl(job->sock, F_SETFL, O_NONBLOCK) < 0)
                return hutch_error_set(reterr, errno, "fcntl: %m");
        job->sock_ev = event_new(job->srv->base, job->sock, EV_READ | EV_PERSIST, on_keeper, job);
        if (!job->sock_ev || event_add(job->sock_ev, NULL) < 0)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        return 0;
}

static void exec_start(ServeCtx *c, bool stream) {
        _cleanup_(exec_args_done) ExecArgs a = {.output_limit = SERVE_OUTPUT_DEFAULT};
        _cleanup_free_ char *decoded = NULL;
        const char *stdin_data = NULL;
        size_t stdin_len = 0,
               n_fields = serve_exec_n_fields - (stream ? SERVE_EXEC_FIELDS_NOT_STREAMED : 0);
        HutchError err = {};
        json_t *root = NULL;
        ExecJob *job = NULL;
        struct bufferevent *bev;
        int r;

        r = serve_body_object(c, serve_exec_fields, n_fields, &a, &root);
        if (r < 0)
                return;
        r = exec_args_validate(&a, json_object_get(root, "env"), &err);
        if (r >= 0 && a.stdin_base64) {
                r = base64_decode(a.stdin_base64, strlen(a.stdin_base64), 0, (uint8_t **)&decoded,
                                  &stdin_len);
                if (r < 0)
                        r = hutch_error_set_pointer(&err, -r, "/stdin_base64",
                                                    "'stdin_base64' is not valid base64");
                stdin_data = decoded;
        } else if (r >= 0 && a.stdin_text) {
                stdin_data = a.stdin_text;
                stdin_len = strlen(a.stdin_text);
        }
        if (r >= 0)
                r = job_new(c, stream, &a, &job);
        /* NEEDSWORK: starting a stopped sandbox's keeper happens here, in
         * the event loop: it takes the sandbox's lock and waits for the
         * keeper to be ready (tens of milliseconds, at most
         * KEEPER_START_TIMEOUT_MS), during which other clients wait. The
         * ready pipe could be one more event. */
        if (r >= 0)
                r = hutch_ext_connect(c->param, &job->sock, &err);
        if (r >= 0)
                r = job_start(job, &a, stdin_data, stdin_len, &err);
        json_decref(root);
        if (r < 0) {
                job_free(job);
                serve_reply_hutch_error(c->req, r, &err);
                return;
        }
        job->next = c->srv->jobs;
        if (job->next)
                job->next->prev = job;
        c->srv->jobs = job;
        job->evcon = evhttp_request_get_connection(c->req);
        evhttp_connection_set_closecb(job->evcon, on_client_close, job);
        /* SECURITY: a client that hangs up kills its command, also when
         * no answer has started yet (EV_CLOSED: EPOLLRDHUP). */
        bev = evhttp_connection_get_bufferevent(job->evcon);
        if (bev && (event_base_get_features(c->srv->base) & EV_FEATURE_EARLY_CLOSE)) {
                job->hangup_ev = event_new(c->srv->base, bufferevent_getfd(bev), EV_CLOSED,
                                           on_client_hangup, job);
                if (job->hangup_ev)
                        (void)event_add(job->hangup_ev, NULL);
        }
}

void serve_exec(ServeCtx *c) {
        exec_start(c, false);
}

void serve_exec_stream(ServeCtx *c) {
        exec_start(c, true);
}

void serve_exec_abort_all(Server *srv) {
        while (srv->jobs) {
                ExecJob *job = srv->jobs;

                (void)job_take_request(job);
                job_free(job);
        }
}
