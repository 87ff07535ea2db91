/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The execs of a sandbox as processes over the API (docs/processes.md,
 * docs/api.md "Processes"): GET .../execs, GET .../execs/{exec}, POST
 * .../execs/{exec}/signal and GET .../execs/{exec}/output[?follow=1], each
 * over the C API's hutch_exec_*().
 *
 * The output route streams NDJSON as POST .../exec/stream does, without
 * blocking the loop: a child process (one per request, killed when the
 * client goes or the server ends) runs hutch_exec_output() into two pipes
 * that the loop reads, and says first on a third whether the exec has a
 * log ({"ok":true} or the error, which becomes the HTTP answer) and, when
 * it followed it to its end, its outcome. It keeps none of the server's
 * descriptors: a connection the server closes is closed. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>

#include "api/hutch-ext.h"
#include "fd-util.h"
#include "log.h"
#include "parse-util.h"
#include "serve.h"

#define OUTPUT_READ_SIZE 65536
/* The child's status lines: {"ok":true}, an error, an outcome. */
#define OUTPUT_STATUS_MAX (64U << 10)

/* The sandbox's name and the exec's id of .../execs/{exec}[/...]: 0, or
 * -EINVAL after answering 400. */
static int exec_params(const ServeCtx *c, char name[HUTCH_EXT_NAME_MAX + 1], uint64_t *ret_id) {
        const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(c->req);
        const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
        const char *p = path ? path + strlen("/v1/sandboxes/") : NULL;
        size_t n = p ? strcspn(p, "/") : 0;
        uint64_t id;

        /* dispatch() matched the pattern: the name is the third part. */
        if (!p || n == 0 || n > HUTCH_EXT_NAME_MAX) {
                serve_reply_status(c->req, 400, "invalid_argument", NULL, "invalid sandbox name");
                return -EINVAL;
        }
        memcpy(name, p, n);
        name[n] = '\0';
        if (!hutch_ext_name_is_valid(name)) {
                serve_reply_status(c->req, 400, "invalid_argument", NULL,
                                   "invalid name '%s': it must match [a-z0-9][a-z0-9_.-]{0,62}",
                                   name);
                return -EINVAL;
        }
        if (safe_atou64(c->param, &id) < 0 || id == 0 || id > INT64_MAX) {
                serve_reply_status(c->req, 400, "invalid_argument", NULL,
                                   "invalid exec id '%s' (want a positive number)", c->param);
                return -EINVAL;
        }
        *ret_id = id;
        return 0;
}

static json_t *exec_info_json(const hutch_exec_info *x) {
        json_t *argv = json_array();

        for (size_t i = 0; argv && x->argv && x->argv[i]; i++)
                (void)json_array_append_new(argv, json_string(x->argv[i]));
        return json_pack("{s:I,s:o,s:I,s:i,s:b,s:b}", "id", (json_int_t)x->id, "argv",
                         argv ? argv : json_array(), "start_ms", (json_int_t)x->start_ms, "pid",
                         x->pid, "detached", x->detached, "running", true);
}

void serve_execs_list(ServeCtx *c) {
        hutch_exec_info *l = NULL;
        hutch_error err = {};
        json_t *arr;
        size_t n = 0;
        int r;

        r = hutch_exec_list(c->param, &l, &n, &err);
        if (r < 0) {
                serve_reply_api_error(c->req, r, &err, NULL);
                return;
        }
        arr = json_array();
        for (size_t i = 0; arr && i < n; i++)
                if (json_array_append_new(arr, exec_info_json(&l[i])) < 0) {
                        json_decref(arr);
                        arr = NULL;
                }
        hutch_exec_list_free(l, n);
        serve_reply_json(c->req, 200, arr ? json_pack("{s:o}", "execs", arr) : NULL);
}

/* A running exec as the list shows it; one that ended as {id, running:
 * false, outcome}. With ?wait=1, the latter once it ended. Runs in a
 * worker (waiting can take long). */
void serve_exec_get(ServeCtx *c) {
        const char *wait_s = serve_query(c, "wait");
        char name[HUTCH_EXT_NAME_MAX + 1];
        hutch_exec_info *l = NULL;
        hutch_outcome o = {};
        hutch_error err = {};
        json_t *outcome;
        size_t n = 0;
        uint64_t id;
        int r;

        if (exec_params(c, name, &id) < 0)
                return;
        if (wait_s && strcmp(wait_s, "0") != 0 && strcmp(wait_s, "1") != 0) {
                serve_reply_status(c->req, 400, "invalid_argument", NULL,
                                   "invalid wait '%.16s' (0 or 1)", wait_s);
                return;
        }
        if (!wait_s || strcmp(wait_s, "0") == 0) {
                r = hutch_exec_list(name, &l, &n, &err);
                if (r < 0) {
                        serve_reply_api_error(c->req, r, &err, NULL);
                        return;
                }
                for (size_t i = 0; i < n; i++)
                        if (l[i].id == id) {
                                serve_reply_json(c->req, 200, exec_info_json(&l[i]));
                                hutch_exec_list_free(l, n);
                                return;
                        }
                hutch_exec_list_free(l, n);
        }
        r = hutch_exec_wait(name, id, &o, &err);
        if (r < 0) {
                serve_reply_api_error(c->req, r, &err, NULL);
                return;
        }
        outcome = json_loads(o.json, 0, NULL);
        hutch_outcome_done(&o);
        serve_reply_json(c->req, 200,
                         outcome ? json_pack("{s:I,s:b,s:o}", "id", (json_int_t)id, "running",
                                             false, "outcome", outcome)
                                 : NULL);
}

typedef struct SignalArgs {
        const char *signal;
        uint64_t grace_ms;
        bool have_grace;
} SignalArgs;

static const ServeField signal_fields[] = {
        {"signal", SERVE_FIELD_STRING, offsetof(SignalArgs, signal), false},
        {"grace_ms", SERVE_FIELD_U64, offsetof(SignalArgs, grace_ms), false},
};

/* {"signal":"TERM","grace_ms":N}: as `hutch kill`. Without "signal",
 * SIGTERM and SIGKILL 10 s later (or "grace_ms"); with it, that signal
 * alone unless "grace_ms" is given. Returns 204 at once. */
void serve_exec_signal(ServeCtx *c) {
        SignalArgs a = {.grace_ms = UINT64_MAX};
        char name[HUTCH_EXT_NAME_MAX + 1];
        hutch_error err = {};
        json_t *root = NULL;
        uint64_t id, grace;
        int r, sig = SIGTERM;

        if (exec_params(c, name, &id) < 0)
                return;
        r = serve_body_object(c, signal_fields, ELEMENTSOF(signal_fields), &a, &root);
        if (r < 0)
                return;
        if (a.signal) {
                sig = hutch_ext_signal_parse(a.signal);
                if (sig < 0) {
                        serve_reply_status(c->req, 400, "invalid_argument", "/signal",
                                           "invalid signal '%.32s' (TERM, KILL, HUP, INT, USR1, "
                                           "15, ...)",
                                           a.signal);
                        json_decref(root);
                        return;
                }
        }
        grace = a.grace_ms != UINT64_MAX ? a.grace_ms : a.signal ? 0 : 10000;
        r = hutch_exec_signal(name, id, sig, grace, &err);
        json_decref(root);
        if (r < 0)
                serve_reply_api_error(c->req, r, &err, NULL);
        else
                serve_reply_no_content(c->req);
}

/* ---- GET .../execs/{exec}/output ---- */

typedef struct OutputStream {
        struct OutputJob *job;
        const char *name; /* "stdout", "stderr" */
        int fd;
        struct event *ev;
        char carry[4];
        size_t carry_len;
} OutputStream;

typedef struct OutputJob {
        struct evhttp_request *req; /* NULL once the client is gone */
        struct evhttp_connection *evcon;
        pid_t pid;
        bool replying;
        OutputStream out[2];
        int status_fd;
        struct event *status_ev;
        struct evbuffer *status;
        json_t *outcome;
} OutputJob;

static void output_job_free(OutputJob *job) {
        if (job->evcon)
                evhttp_connection_set_closecb(job->evcon, NULL, NULL);
        for (size_t i = 0; i < 2; i++) {
                if (job->out[i].ev)
                        event_free(job->out[i].ev);
                (void)safe_close(job->out[i].fd);
        }
        if (job->status_ev)
                event_free(job->status_ev);
        (void)safe_close(job->status_fd);
        if (job->status)
                evbuffer_free(job->status);
        /* Our child: it only reads and writes, and is gone at once. */
        if (job->pid > 0) {
                (void)kill(job->pid, SIGKILL);
                (void)waitpid(job->pid, NULL, 0);
        }
        json_decref(job->outcome);
        free(job);
}

static void output_emit(OutputJob *job, json_t *obj) {
        _cleanup_free_ char *text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
        struct evbuffer *buf;

        json_decref(obj);
        if (!text || !job->req || !job->replying)
                return;
        buf = evbuffer_new();
        if (!buf)
                return;
        if (evbuffer_add(buf, text, strlen(text)) == 0 && evbuffer_add(buf, "\n", 1) == 0)
                evhttp_send_reply_chunk(job->req, buf);
        evbuffer_free(buf);
}

/* Everything is in: the outcome line (when it followed to the end), and
 * the answer's end. */
static void output_job_maybe_finish(OutputJob *job) {
        if (job->out[0].fd >= 0 || job->out[1].fd >= 0 || job->status_fd >= 0)
                return;
        if (job->req) {
                if (job->replying) {
                        if (job->outcome)
                                output_emit(job, json_pack("{s:O}", "outcome", job->outcome));
                        if (job->evcon)
                                evhttp_connection_set_closecb(job->evcon, NULL, NULL);
                        evhttp_send_reply_end(job->req);
                } else
                        serve_reply_status(job->req, 500, "internal", NULL,
                                           "the output reader ended without an answer");
        }
        job->req = NULL;
        output_job_free(job);
}

static void on_output_close(struct evhttp_connection *evcon, void *arg) {
        OutputJob *job = arg;

        if (job->req && !evhttp_request_get_connection(job->req))
                evhttp_request_free(job->req);
        job->req = NULL;
        job->evcon = NULL;
        output_job_free(job);
}

static void on_output_data(evutil_socket_t fd, short what, void *arg) {
        OutputStream *out = arg;
        OutputJob *job = out->job;
        char buf[sizeof(out->carry) + OUTPUT_READ_SIZE];
        size_t have = out->carry_len, hold;
        const char *enc = NULL;
        json_t *s;
        ssize_t n;

        memcpy(buf, out->carry, out->carry_len);
        n = read(out->fd, buf + have, OUTPUT_READ_SIZE);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n <= 0) {
                event_free(out->ev);
                out->ev = NULL;
                out->fd = safe_close(out->fd);
                if (out->carry_len > 0) {
                        s = serve_output_string(out->carry, out->carry_len, &enc);
                        output_emit(job, s ? json_pack("{s:s,s:o,s:s}", "stream", out->name, "data",
                                                       s, "encoding", enc)
                                           : NULL);
                }
                output_job_maybe_finish(job);
                return;
        }
        have += (size_t)n;
        hold = serve_utf8_incomplete_tail(buf, have);
        memcpy(out->carry, buf + have - hold, hold);
        out->carry_len = hold;
        if (have > hold) {
                s = serve_output_string(buf, have - hold, &enc);
                output_emit(job, s ? json_pack("{s:s,s:o,s:s}", "stream", out->name, "data", s,
                                               "encoding", enc)
                                   : NULL);
        }
}

/* The child's first status line: start the stream, or answer its error. */
static void output_status_line(OutputJob *job, json_t *line) {
        json_t *e = json_object_get(line, "error");

        if (json_is_object(json_object_get(line, "outcome"))) {
                json_decref(job->outcome);
                job->outcome = json_incref(json_object_get(line, "outcome"));
                return;
        }
        if (job->replying || !job->req)
                return;
        if (json_is_object(e)) {
                hutch_error err = {.code = (int)json_integer_value(json_object_get(e, "code"))};
                const char *msg = json_string_value(json_object_get(e, "message"));

                (void)snprintf(err.message, sizeof(err.message), "%s", msg ? msg : "failed");
                if (err.code <= 0 || err.code >= 4096)
                        err.code = EIO;
                if (job->evcon)
                        evhttp_connection_set_closecb(job->evcon, NULL, NULL);
                job->evcon = NULL;
                serve_reply_api_error(job->req, -err.code, &err, NULL);
                job->req = NULL;
                return;
        }
        (void)evhttp_add_header(evhttp_request_get_output_headers(job->req), "Content-Type",
                                "application/x-ndjson");
        evhttp_send_reply_start(job->req, 200, "OK");
        job->replying = true;
        for (size_t i = 0; i < 2; i++)
                (void)event_add(job->out[i].ev, NULL);
}

static void on_output_status(evutil_socket_t fd, short what, void *arg) {
        OutputJob *job = arg;
        int n = evbuffer_read(job->status, fd, 4096);
        char *line;

        while ((line = evbuffer_readln(job->status, NULL, EVBUFFER_EOL_LF))) {
                json_t *j = json_loads(line, 0, NULL);

                if (json_is_object(j))
                        output_status_line(job, j);
                json_decref(j);
                free(line);
        }
        if (n > 0 && evbuffer_get_length(job->status) <= OUTPUT_STATUS_MAX)
                return;
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        event_free(job->status_ev);
        job->status_ev = NULL;
        job->status_fd = safe_close(job->status_fd);
        /* No "ok": its output was never started (the child died). */
        if (!job->replying) {
                for (size_t i = 0; i < 2; i++) {
                        if (job->out[i].ev)
                                event_free(job->out[i].ev);
                        job->out[i].ev = NULL;
                        job->out[i].fd = safe_close(job->out[i].fd);
                }
        }
        output_job_maybe_finish(job);
}

static void status_write(int fd, json_t *obj) {
        _cleanup_free_ char *text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;

        json_decref(obj);
        if (text && loop_write(fd, text, strlen(text)) >= 0)
                (void)loop_write(fd, "\n", 1);
}

/* In the child: fds 3 and 4 are stdout's and stderr's pipes, 5 the
 * status pipe; nothing else of the server's is open. */
_noreturn_ static void output_child(const char *name, uint64_t id, bool follow) {
        hutch_outcome o = {};
        hutch_error err = {};
        int r;

        /* Whether there is a log: its bytes so far go nowhere. */
        r = hutch_exec_output(name, id, false, -1, -1, &err);
        if (r < 0) {
                status_write(5, json_pack("{s:{s:i,s:s}}", "error", "code", err.code, "message",
                                          err.message));
                _exit(1);
        }
        status_write(5, json_pack("{s:b}", "ok", true));
        r = hutch_exec_output(name, id, follow, 3, 4, &err);
        (void)close(3);
        (void)close(4);
        /* Followed to its end: the outcome is in the history. */
        if (r >= 0 && follow && hutch_exec_wait(name, id, &o, &err) >= 0) {
                json_t *j = json_loads(o.json, 0, NULL);

                if (j)
                        status_write(5, json_pack("{s:o}", "outcome", j));
                hutch_outcome_done(&o);
        }
        _exit(r < 0 ? 1 : 0);
}

void serve_exec_output(ServeCtx *c) {
        const char *follow_s = serve_query(c, "follow");
        int p[3][2] = {{-EBADF, -EBADF}, {-EBADF, -EBADF}, {-EBADF, -EBADF}};
        char name[HUTCH_EXT_NAME_MAX + 1];
        OutputJob *job = NULL;
        bool follow;
        uint64_t id;
        pid_t pid;

        if (exec_params(c, name, &id) < 0)
                return;
        if (follow_s && strcmp(follow_s, "0") != 0 && strcmp(follow_s, "1") != 0) {
                serve_reply_status(c->req, 400, "invalid_argument", NULL,
                                   "invalid follow '%.16s' (0 or 1)", follow_s);
                return;
        }
        follow = follow_s && strcmp(follow_s, "1") == 0;
        for (size_t i = 0; i < 3; i++)
                if (pipe2(p[i], O_CLOEXEC) < 0)
                        goto fail;
        pid = fork();
        if (pid < 0)
                goto fail;
        if (pid == 0) {
                /* Dies with the server; keeps nothing of it but stdio. */
                (void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
                if (dup2(p[0][1], 3) < 0 || dup2(p[1][1], 4) < 0 || dup2(p[2][1], 5) < 0 ||
                    syscall(SYS_close_range, 6U, ~0U, 0U) < 0)
                        _exit(1);
                (void)signal(SIGPIPE, SIG_IGN);
                output_child(name, id, follow);
        }
        job = calloc(1, sizeof(OutputJob));
        if (!job) {
                (void)kill(pid, SIGKILL);
                (void)waitpid(pid, NULL, 0);
                goto fail;
        }
        *job = (OutputJob){.req = c->req,
                           .evcon = evhttp_request_get_connection(c->req),
                           .pid = pid,
                           .status_fd = p[2][0]};
        for (size_t i = 0; i < 3; i++) {
                p[i][1] = safe_close(p[i][1]);
                (void)fcntl(p[i][0], F_SETFL, fcntl(p[i][0], F_GETFL) | O_NONBLOCK);
        }
        p[2][0] = -EBADF;
        job->status = evbuffer_new();
        job->status_ev = event_new(c->srv->base, job->status_fd, EV_READ | EV_PERSIST,
                                   on_output_status, job);
        for (size_t i = 0; i < 2; i++) {
                job->out[i] = (OutputStream){
                        .job = job, .name = i == 0 ? "stdout" : "stderr", .fd = TAKE_FD(p[i][0])};
                job->out[i].ev = event_new(c->srv->base, job->out[i].fd, EV_READ | EV_PERSIST,
                                           on_output_data, &job->out[i]);
        }
        if (!job->status || !job->status_ev || !job->out[0].ev || !job->out[1].ev ||
            event_add(job->status_ev, NULL) < 0) {
                job->req = NULL;
                output_job_free(job);
                serve_reply_errno(c->req, ENOMEM, NULL, "out of memory");
                return;
        }
        if (job->evcon)
                evhttp_connection_set_closecb(job->evcon, on_output_close, job);
        return;
fail:
        for (size_t i = 0; i < 3; i++) {
                (void)safe_close(p[i][0]);
                (void)safe_close(p[i][1]);
        }
        serve_reply_errno(c->req, errno ? errno : EIO, NULL, "cannot read the exec's output: %m");
}

/* ---- POST .../execs/{exec}/stdin[?close=1] ---- */

/* The body's bytes to the stdin of a detached exec started with
 * "stdin_open" (hutch_exec_stdin()); with close=1 (or true), then its EOF.
 * 204; 409 for an exec that takes no input, 404 for one that ended or
 * never was. In a worker: it waits until the command took the bytes. */
void serve_exec_stdin(ServeCtx *c) {
        _cleanup_free_ char *body = NULL;
        const char *close_q = serve_query(c, "close");
        char name[HUTCH_EXT_NAME_MAX + 1];
        hutch_error err = {};
        bool close_it = false;
        size_t len = 0;
        uint64_t id;
        int r;

        if (exec_params(c, name, &id) < 0)
                return;
        if (close_q) {
                if (strcmp(close_q, "1") == 0 || strcmp(close_q, "true") == 0)
                        close_it = true;
                else if (strcmp(close_q, "0") != 0 && strcmp(close_q, "false") != 0) {
                        serve_reply_status(c->req, 400, "invalid_argument", NULL,
                                           "invalid close '%.16s' (want 1, true, 0 or false)",
                                           close_q);
                        return;
                }
        }
        r = serve_body(c, &body, &len);
        if (r < 0) {
                serve_reply_errno(c->req, -r, NULL, "cannot read the request body");
                return;
        }
        r = hutch_exec_stdin(name, id, body, len, close_it, &err);
        if (r < 0)
                serve_reply_api_error(c->req, r, &err, NULL);
        else
                serve_reply_no_content(c->req);
}
