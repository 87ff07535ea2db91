/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Routes that can take long (a snapshot's copy, a diff of a large
 * workspace, a stop that waits for the keeper, a file operation that starts
 * a sandbox) run in a worker: a fork of the server that makes the one C API
 * call and writes its answer to a pipe, while the event loop goes on
 * serving everyone else. The C API is not thread-safe, hence processes. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include "fd-util.h"
#include "log.h"
#include "parse-util.h"
#include "serve.h"

int serve_worker_fd = -1;

/* The worker's answer: "STATUS CONTENT-TYPE\n" ("-" for none), then the
 * body up to EOF. */
#define WORKER_HEAD_MAX 128
/* A worker's answer is bounded like any answer: a file read is the largest. */
#define WORKER_ANSWER_MAX (MAX(SERVE_FILE_READ_MAX, SERVE_ARCHIVE_MAX) + (1U << 20))

void serve_worker_answer(int status, const char *ctype, const void *data, size_t len) {
        char head[WORKER_HEAD_MAX];
        int n = snprintf(head, sizeof(head), "%d %s\n", status, ctype ? ctype : "-");

        if (n > 0 && loop_write(serve_worker_fd, head, (size_t)n) >= 0 && len > 0)
                (void)loop_write(serve_worker_fd, data, len);
        _exit(0);
}

typedef struct Worker {
        struct evhttp_request *req;
        struct evhttp_connection *evcon;
        struct event *ev;
        struct evbuffer *in;
        pid_t pid;
        int fd;
} Worker;

static void worker_free(Worker *w) {
        if (w->evcon)
                evhttp_connection_set_closecb(w->evcon, NULL, NULL);
        if (w->ev)
                event_free(w->ev);
        if (w->in)
                evbuffer_free(w->in);
        (void)safe_close(w->fd);
        /* It wrote its answer and exits (or already has). */
        if (w->pid > 0)
                (void)waitpid(w->pid, NULL, 0);
        free(w);
}

/* The client left: its answer is dropped when the worker ends (the call
 * itself goes on: store operations are not left half done). */
static void on_worker_client_close(struct evhttp_connection *evcon, void *arg) {
        Worker *w = arg;

        if (w->req && !evhttp_request_get_connection(w->req))
                evhttp_request_free(w->req);
        w->req = NULL;
        w->evcon = NULL;
}

static void worker_answer(Worker *w) {
        size_t len = evbuffer_get_length(w->in);
        struct evbuffer_ptr eol = evbuffer_search_eol(w->in, NULL, NULL, EVBUFFER_EOL_LF);
        char head[WORKER_HEAD_MAX], *space;
        struct evbuffer *body;
        uint64_t status;

        if (eol.pos < 0 || (size_t)eol.pos >= sizeof(head) ||
            evbuffer_remove(w->in, head, (size_t)eol.pos + 1) != eol.pos + 1) {
                serve_reply_status(w->req, 500, "internal", NULL,
                                   "the worker for this request ended without an answer");
                return;
        }
        head[eol.pos] = '\0';
        space = strchr(head, ' ');
        if (!space || (*space = '\0', safe_atou64(head, &status) < 0) || status < 200 ||
            status > 599) {
                serve_reply_status(w->req, 500, "internal", NULL, "malformed worker answer");
                return;
        }
        if (strcmp(space + 1, "-") != 0)
                (void)evhttp_add_header(evhttp_request_get_output_headers(w->req), "Content-Type",
                                        space + 1);
        body = len > (size_t)eol.pos + 1 ? w->in : NULL;
        evhttp_send_reply(w->req, (int)status, NULL, body);
}

static void on_worker_read(evutil_socket_t fd, short what, void *arg) {
        Worker *w = arg;
        int n;

        (void)what;
        n = evbuffer_read(w->in, fd, 65536);
        if (n > 0 && evbuffer_get_length(w->in) <= WORKER_ANSWER_MAX)
                return;
        if (w->req) {
                struct evhttp_request *req = w->req;

                if (w->evcon)
                        evhttp_connection_set_closecb(w->evcon, NULL, NULL);
                w->evcon = NULL;
                if (n > 0)
                        serve_reply_status(req, 500, "internal", NULL, "the answer is too large");
                else
                        worker_answer(w);
                w->req = NULL;
        }
        if (n > 0 && w->pid > 0)
                (void)kill(w->pid, SIGKILL);
        worker_free(w);
}

void serve_in_worker(ServeCtx *c, void (*handler)(ServeCtx *c)) {
        static const char no_answer[] =
                "{\"error\":{\"code\":\"internal\",\"message\":\"no answer\",\"field\":null}}\n";
        Worker *w;
        int pipes[2];
        pid_t pid;

        if (pipe2(pipes, O_CLOEXEC) < 0) {
                serve_reply_errno(c->req, errno, NULL, "cannot start a worker: %m");
                return;
        }
        pid = fork();
        if (pid < 0) {
                int e = errno;

                (void)close(pipes[0]);
                (void)close(pipes[1]);
                serve_reply_errno(c->req, e, NULL, "cannot start a worker: %s", strerror(e));
                return;
        }
        if (pid == 0) {
                /* The server's loop never runs here; if the server ends,
                 * so does the worker (the store stays consistent). */
                (void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
                (void)close(pipes[0]);
                serve_worker_fd = pipes[1];
                handler(c);
                /* Every handler answers; this is a last resort. */
                serve_worker_answer(500, "application/json", no_answer, strlen(no_answer));
        }
        (void)close(pipes[1]);
        w = calloc(1, sizeof(Worker));
        if (w) {
                *w = (Worker){.req = c->req, .pid = pid, .fd = pipes[0]};
                w->in = evbuffer_new();
                w->ev = event_new(c->srv->base, pipes[0], EV_READ | EV_PERSIST, on_worker_read, w);
        }
        if (!w || !w->in || !w->ev || event_add(w->ev, NULL) < 0) {
                if (w)
                        w->req = NULL;
                else {
                        (void)close(pipes[0]);
                        (void)kill(pid, SIGKILL);
                        (void)waitpid(pid, NULL, 0);
                }
                if (w)
                        worker_free(w);
                serve_reply_errno(c->req, ENOMEM, NULL, "out of memory");
                return;
        }
        w->evcon = evhttp_request_get_connection(c->req);
        if (w->evcon)
                evhttp_connection_set_closecb(w->evcon, on_worker_client_close, w);
}
