/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The routes the dashboard added (docs/api.md, docs/ui.md): a sandbox's
 * exec history, its memory and cpu now, and the same as server-sent events
 * every SERVE_STATS_INTERVAL_MS, and the workspace diff as a patch.
 *
 * The numbers come from the sandbox's cgroup, found from outside
 * (hutch_ext_stats_sample(), src/lib/api/hutch-ext-serve.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>

#include "api/hutch-ext.h"
#include "fd-util.h"
#include "parse-util.h"
#include "serve.h"
#include "strv.h"
#include "time-util.h"

#define HISTORY_LIMIT_DEFAULT 100U
#define HISTORY_LIMIT_MAX 10000U
#define SERVE_STATS_INTERVAL_MS 2000
#define SERVE_STATS_STREAMS_MAX 256 /* open stats streams at once */

struct StatsStream {
        Server *srv;
        struct evhttp_request *req;
        struct evhttp_connection *evcon;
        struct event *timer, *hangup;
        char name[HUTCH_EXT_NAME_MAX + 1];
        StatsStream *prev, *next;
};

json_t *serve_stats_sample(const char *name) {
        HutchExtStats st;

        hutch_ext_stats_sample(name, &st);
        return json_pack("{s:b,s:o,s:o,s:I}", "running", st.running, "memory_bytes",
                         st.has_memory ? json_integer((json_int_t)st.memory_bytes) : json_null(),
                         "cpu_usec",
                         st.has_cpu ? json_integer((json_int_t)st.cpu_usec) : json_null(),
                         "sampled_ms", (json_int_t)time_realtime_ms());
}

/* The name of the route's sandbox, answering 404 when there is none. */
static int load_sandbox(ServeCtx *c, char **ret_name) {
        HutchError err = {};
        int r;

        r = hutch_ext_sandbox_name(c->param, ret_name, &err);
        if (r < 0)
                serve_reply_hutch_error(c->req, r, &err);
        return r;
}

void serve_stats(ServeCtx *c) {
        _cleanup_free_ char *name = NULL;

        if (load_sandbox(c, &name) < 0)
                return;
        serve_reply_json(c->req, 200, serve_stats_sample(name));
}

/* ---- the stream ---- */

static void stream_free(StatsStream *s) {
        if (s->prev)
                s->prev->next = s->next;
        else if (s->srv->stats_streams == s)
                s->srv->stats_streams = s->next;
        if (s->next)
                s->next->prev = s->prev;
        s->srv->n_stats_streams--;
        if (s->evcon)
                evhttp_connection_set_closecb(s->evcon, NULL, NULL);
        if (s->timer)
                event_free(s->timer);
        if (s->hangup)
                event_free(s->hangup);
        free(s);
}

static void stream_send(StatsStream *s) {
        _cleanup_free_ char *text = NULL;
        json_t *j = serve_stats_sample(s->name);
        struct evbuffer *buf;

        text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        buf = evbuffer_new();
        if (!buf)
                return;
        if (text && evbuffer_add_printf(buf, "data: %s\n\n", text) > 0)
                evhttp_send_reply_chunk(s->req, buf);
        evbuffer_free(buf);
}

static void on_stream_tick(evutil_socket_t fd, short what, void *arg) {
        stream_send(arg);
}

static void on_stream_close(struct evhttp_connection *evcon, void *arg) {
        StatsStream *s = arg;

        if (s->req && !evhttp_request_get_connection(s->req))
                evhttp_request_free(s->req);
        s->req = NULL;
        s->evcon = NULL;
        stream_free(s);
}

/* The client hung up while evhttp was not reading (as serve-exec.c's
 * on_client_hangup()): dropping the connection ends the stream through
 * on_stream_close(). */
static void on_stream_hangup(evutil_socket_t fd, short what, void *arg) {
        StatsStream *s = arg;

        if (s->evcon)
                evhttp_connection_free(s->evcon);
}

void serve_stats_stream(ServeCtx *c) {
        _cleanup_free_ char *name = NULL;
        struct timeval tv = {.tv_sec = SERVE_STATS_INTERVAL_MS / 1000,
                             .tv_usec = (SERVE_STATS_INTERVAL_MS % 1000) * 1000};
        const struct timeval timeout = {.tv_sec = SERVE_TIMEOUT_S};
        struct evkeyvalq *h = evhttp_request_get_output_headers(c->req);
        struct bufferevent *bev;
        StatsStream *s;

        if (load_sandbox(c, &name) < 0)
                return;
        if (c->srv->n_stats_streams >= SERVE_STATS_STREAMS_MAX) {
                serve_reply_status(c->req, 503, "unavailable", NULL,
                                   "too many stats streams (at most %d); try again",
                                   SERVE_STATS_STREAMS_MAX);
                return;
        }
        s = calloc(1, sizeof(*s));
        if (!s) {
                serve_reply_errno(c->req, ENOMEM, NULL, "out of memory");
                return;
        }
        s->srv = c->srv;
        s->req = c->req;
        (void)snprintf(s->name, sizeof(s->name), "%s", name);
        s->timer = event_new(c->srv->base, -1, EV_PERSIST, on_stream_tick, s);
        if (!s->timer || event_add(s->timer, &tv) < 0) {
                if (s->timer)
                        event_free(s->timer);
                free(s);
                serve_reply_errno(c->req, ENOMEM, NULL, "out of memory");
                return;
        }
        s->next = c->srv->stats_streams;
        if (s->next)
                s->next->prev = s;
        c->srv->stats_streams = s;
        c->srv->n_stats_streams++;
        s->evcon = evhttp_request_get_connection(c->req);
        evhttp_connection_set_closecb(s->evcon, on_stream_close, s);
        /* No read timeout while the stream lasts (the client sends nothing
         * more); the write timeout stays, so a client that stops reading
         * is dropped after SERVE_TIMEOUT_S. */
        bev = evhttp_connection_get_bufferevent(s->evcon);
        if (bev) {
                (void)bufferevent_set_timeouts(bev, NULL, &timeout);
                if (event_base_get_features(c->srv->base) & EV_FEATURE_EARLY_CLOSE) {
                        s->hangup = event_new(c->srv->base, bufferevent_getfd(bev), EV_CLOSED,
                                              on_stream_hangup, s);
                        if (s->hangup)
                                (void)event_add(s->hangup, NULL);
                }
        }
        (void)evhttp_add_header(h, "Content-Type", "text/event-stream");
        (void)evhttp_add_header(h, "Cache-Control", "no-store");
        evhttp_send_reply_start(c->req, 200, NULL);
        stream_send(s);
}

void serve_stats_abort_all(Server *srv) {
        while (srv->stats_streams) {
                /* The requests go with evhttp's connections. */
                stream_free(srv->stats_streams);
        }
        hutch_ext_stats_reset();
}

/* ---- the exec history ---- */

/* The sandbox's finished execs (history.jsonl), oldest first; ?limit
 * (default 100) of the newest. */
void serve_history(ServeCtx *c) {
        _cleanup_free_ char *name = NULL, *path = NULL;
        _cleanup_close_ int fd = -EBADF;
        const char *limit_s = serve_query(c, "limit");
        uint32_t limit = HISTORY_LIMIT_DEFAULT;
        HutchError err = {};
        json_t *arr;
        int r;

        if (limit_s &&
            (safe_atou32(limit_s, &limit) < 0 || limit == 0 || limit > HISTORY_LIMIT_MAX)) {
                serve_reply_status(c->req, 400, "invalid_argument", NULL,
                                   "invalid limit '%.16s' (1 to %u)", limit_s, HISTORY_LIMIT_MAX);
                return;
        }
        r = hutch_ext_sandbox_file(c->param, "history.jsonl", &name, &path, &err);
        if (r < 0) {
                serve_reply_hutch_error(c->req, r, &err);
                return;
        }
        arr = json_array();
        if (!arr) {
                serve_reply_errno(c->req, ENOMEM, NULL, "out of memory");
                return;
        }
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        r = fd >= 0 ? serve_jsonl_tail(fd, limit, arr) : errno == ENOENT ? 0 : negative_errno();
        if (r < 0) {
                json_decref(arr);
                serve_reply_errno(c->req, -r, NULL, "cannot read the exec history: %s",
                                  strerror(-r));
                return;
        }
        serve_reply_json(c->req, 200, json_pack("{s:o}", "entries", arr));
}

/* ---- the workspace diff as a patch ---- */

#define PATCH_MAX (16U << 20)

/* The unified diff of the sandbox's workspace changes (all, or under
 * ?path), as `hutch diff` prints it; in a worker (diff runs /usr/bin/diff). */
void serve_diff_patch(ServeCtx *c) {
        _cleanup_(hutch_ext_diff_freep) HutchExtDiff *d = NULL;
        _cleanup_strv_free_ char **paths = NULL;
        _cleanup_free_ char *text = NULL;
        _cleanup_close_ int fd = -EBADF;
        const char *path = serve_query(c, "path");
        size_t len = 0;
        HutchError err = {};
        int r;

        if (path && strv_extend(&paths, path) < 0) {
                serve_reply_errno(c->req, ENOMEM, NULL, "out of memory");
                return;
        }
        r = hutch_ext_paths_normalize(paths, &err);
        /* In the worker (a fork of its own): the store's user namespace,
         * as `hutch diff` enters it, for files of a user's sub-ids. */
        if (r >= 0)
                r = hutch_ext_diff_open(c->param, paths, &d, &err);
        if (r < 0) {
                serve_reply_hutch_error(c->req, r, &err);
                return;
        }
        fd = memfd_create("hutch-serve-patch", MFD_CLOEXEC);
        r = fd < 0 ? negative_errno() : 0;
        if (r >= 0)
                r = hutch_ext_diff_patch(d, HUTCH_EXT_DIFF_ALL, fd, &err);
        if (r >= 0 && lseek(fd, 0, SEEK_SET) < 0)
                r = negative_errno();
        if (r >= 0)
                r = read_full_fd(fd, PATCH_MAX, &text, &len);
        if (r < 0) {
                serve_reply_hutch_error(c->req, r, &err);
                return;
        }
        serve_reply_bytes(c->req, 200, "text/x-diff; charset=utf-8", text, len);
}
