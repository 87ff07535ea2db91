/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch serve: the HTTP API (docs/api.md; the contract is docs/api.yaml).
 * This file listens, authenticates, routes and answers; the routes are in
 * serve-exec.c and serve-routes.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>

#include "cli.h"
#include "e2b.h"
#include "fd-util.h"
#include "log.h"
#include "parse-util.h"
#include "serve-ui.h"
#include "serve.h"

typedef struct Listener {
        Server *srv;
        struct evhttp *http;
} Listener;

typedef enum BodyKind {
        BODY_NONE,
        BODY_JSON,
        BODY_RAW,
} BodyKind;

typedef struct Route {
        enum evhttp_cmd_type method;
        const char *pattern;
        void (*handler)(ServeCtx *c);
        BodyKind body;
        size_t body_max;
        const char *const *query; /* the query parameters it takes, or NULL */
        bool worker;              /* can take long: runs in a worker (serve-worker.c) */
} Route;

static void serve_version(ServeCtx *c);
static void serve_routes(ServeCtx *c);

static const char *const query_path[] = {"path", NULL};
static const char *const query_path_mode[] = {"path", "mode", "parents", "user", NULL};
static const char *const query_path_parents[] = {"path", "parents", NULL};
static const char *const query_path_list[] = {"path", "recursive", "depth", NULL};
static const char *const query_limit[] = {"limit", NULL};
static const char *const query_wait[] = {"wait", NULL};
static const char *const query_follow[] = {"follow", NULL};
static const char *const query_close[] = {"close", NULL};

/* The dispatch table. GET /v1/routes lists it, and tests/integration/
 * test_serve.py checks it against docs/api.yaml both ways. */
static const Route routes[] = {
        {EVHTTP_REQ_GET, "/v1/version", serve_version, BODY_NONE, 0, NULL},
        {EVHTTP_REQ_GET, "/v1/routes", serve_routes, BODY_NONE, 0, NULL},
        /* In workers: reading a sandbox's disk use mounts its disk image
         * (tens of milliseconds each; a dashboard lists them every 5 s). */
        {EVHTTP_REQ_GET, "/v1/sandboxes", serve_sandbox_list, BODY_NONE, 0, NULL, true},
        {EVHTTP_REQ_POST, "/v1/sandboxes", serve_sandbox_create, BODY_JSON, SERVE_JSON_BODY_MAX,
         NULL},
        {EVHTTP_REQ_GET, "/v1/sandboxes/{name}", serve_sandbox_get, BODY_NONE, 0, NULL, true},
        {EVHTTP_REQ_DELETE, "/v1/sandboxes/{name}", serve_sandbox_delete, BODY_NONE, 0, NULL, true},
        {EVHTTP_REQ_PATCH, "/v1/sandboxes/{name}", serve_sandbox_update, BODY_JSON,
         SERVE_JSON_BODY_MAX, NULL, true},
        {EVHTTP_REQ_POST, "/v1/sandboxes/{name}/stop", serve_sandbox_stop, BODY_NONE, 0, NULL,
         true},
        {EVHTTP_REQ_POST, "/v1/sandboxes/{name}/exec", serve_exec, BODY_JSON, SERVE_BODY_MAX, NULL},
        {EVHTTP_REQ_POST, "/v1/sandboxes/{name}/exec/stream", serve_exec_stream, BODY_JSON,
         SERVE_BODY_MAX, NULL},
        {EVHTTP_REQ_GET, "/v1/sandboxes/{name}/exec/ws", serve_exec_ws_plain, BODY_NONE, 0, NULL},
        {EVHTTP_REQ_GET, "/v1/sandboxes/{name}/files", serve_file_read, BODY_NONE, 0, query_path,
         true},
        {EVHTTP_REQ_PUT, "/v1/sandboxes/{name}/files", serve_file_write, BODY_RAW, SERVE_BODY_MAX,
         query_path_mode, true},
        {EVHTTP_REQ_DELETE, "/v1/sandboxes/{name}/files", serve_file_remove, BODY_NONE, 0,
         query_path, true},
        {EVHTTP_REQ_GET, "/v1/sandboxes/{name}/files/list", serve_file_list, BODY_NONE, 0,
         query_path_list, true},
        {EVHTTP_REQ_POST, "/v1/sandboxes/{name}/files/mkdir", serve_file_mkdir, BODY_NONE, 0,
         query_path_mode, true},
        {EVHTTP_REQ_POST, "/v1/sandboxes/{name}/files/move", serve_file_move, BODY_JSON,
         SERVE_JSON_BODY_MAX, NULL, true},
        {EVHTTP_REQ_GET, "/v1/sandboxes/{name}/files/stat", serve_file_stat, BODY_NONE, 0,
         query_path, true},
        /* serve-archive.c */
        {EVHTTP_REQ_GET, "/v1/sandboxes/{name}/files/archive", serve_file_archive_get, BODY_NONE, 0,
         query_path, true},
        {EVHTTP_REQ_PUT, "/v1/sandboxes/{name}/files/archive", serve_file_archive_put, BODY_RAW,
         SERVE_BODY_MAX, query_path_parents, true},
        {EVHTTP_REQ_POST, "/v1/sandboxes/{name}/files/archive", serve_file_archive_put, BODY_RAW,
         SERVE_BODY_MAX, query_path_parents, true},
        {EVHTTP_REQ_POST, "/v1/sandboxes/{name}/snapshots", serve_snapshot_create, BODY_JSON,
         SERVE_JSON_BODY_MAX, NULL, true},
        {EVHTTP_REQ_POST, "/v1/sandboxes/{name}/restore", serve_snapshot_restore, BODY_JSON,
         SERVE_JSON_BODY_MAX, NULL, true},
        {EVHTTP_REQ_GET, "/v1/sandboxes/{name}/diff", serve_diff, BODY_NONE, 0, NULL, true},
        {EVHTTP_REQ_POST, "/v1/sandboxes/{name}/apply", serve_apply, BODY_JSON, SERVE_JSON_BODY_MAX,
         NULL, true},
        {EVHTTP_REQ_GET, "/v1/sandboxes/{name}/audit", serve_audit, BODY_NONE, 0, query_limit},
        /* docs/processes.md (serve-execs.c) */
        {EVHTTP_REQ_GET, "/v1/sandboxes/{name}/execs", serve_execs_list, BODY_NONE, 0, NULL},
        {EVHTTP_REQ_GET, "/v1/sandboxes/{name}/execs/{exec}", serve_exec_get, BODY_NONE, 0,
         query_wait, true},
        {EVHTTP_REQ_POST, "/v1/sandboxes/{name}/execs/{exec}/signal", serve_exec_signal, BODY_JSON,
         SERVE_JSON_BODY_MAX, NULL},
        {EVHTTP_REQ_GET, "/v1/sandboxes/{name}/execs/{exec}/output", serve_exec_output, BODY_NONE,
         0, query_follow},
        {EVHTTP_REQ_POST, "/v1/sandboxes/{name}/execs/{exec}/stdin", serve_exec_stdin, BODY_RAW,
         SERVE_BODY_MAX, query_close, true},
        {EVHTTP_REQ_GET, "/v1/sandboxes/{name}/ports", serve_sandbox_ports, BODY_NONE, 0, NULL},
        {EVHTTP_REQ_POST, "/v1/sandboxes/{name}/ports", serve_port_publish, BODY_JSON,
         SERVE_JSON_BODY_MAX, NULL, true},
        {EVHTTP_REQ_DELETE, "/v1/sandboxes/{name}/ports/{port}", serve_port_unpublish, BODY_NONE, 0,
         NULL, true},
        {EVHTTP_REQ_GET, "/v1/snapshots", serve_snapshot_list, BODY_NONE, 0, NULL},
        {EVHTTP_REQ_DELETE, "/v1/snapshots/{snapshot}", serve_snapshot_delete, BODY_NONE, 0, NULL,
         true},
        {EVHTTP_REQ_GET, "/v1/sandboxes/{name}/history", serve_history, BODY_NONE, 0, query_limit},
        {EVHTTP_REQ_GET, "/v1/sandboxes/{name}/diff/patch", serve_diff_patch, BODY_NONE, 0,
         query_path, true},
        {EVHTTP_REQ_GET, "/v1/sandboxes/{name}/stats", serve_stats, BODY_NONE, 0, NULL},
        {EVHTTP_REQ_GET, "/v1/sandboxes/{name}/stats/stream", serve_stats_stream, BODY_NONE, 0,
         NULL},
};

static const struct {
        enum evhttp_cmd_type method;
        const char *name;
} methods[] = {
        {EVHTTP_REQ_GET, "GET"},       {EVHTTP_REQ_POST, "POST"},
        {EVHTTP_REQ_HEAD, "HEAD"},     {EVHTTP_REQ_PUT, "PUT"},
        {EVHTTP_REQ_DELETE, "DELETE"}, {EVHTTP_REQ_OPTIONS, "OPTIONS"},
        {EVHTTP_REQ_TRACE, "TRACE"},   {EVHTTP_REQ_CONNECT, "CONNECT"},
        {EVHTTP_REQ_PATCH, "PATCH"},
};

static const char *method_name(enum evhttp_cmd_type m) {
        for (size_t i = 0; i < ELEMENTSOF(methods); i++)
                if (methods[i].method == m)
                        return methods[i].name;
        return "?";
}

/* ---- answers ---- */

void serve_reply_json(struct evhttp_request *req, int status, json_t *obj) {
        static const char oom[] =
                "{\"error\":{\"code\":\"out_of_memory\",\"message\":\"out of memory\","
                "\"field\":null}}";
        _cleanup_free_ char *text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
        struct evbuffer *buf = evbuffer_new();

        json_decref(obj);
        if (!buf) {
                evhttp_send_error(req, 503, NULL);
                return;
        }
        if (!text)
                status = 503;
        if (serve_worker_fd >= 0) {
                const char *t = text ? text : oom;
                _cleanup_free_ char *line = NULL;

                if (asprintf(&line, "%s\n", t) < 0)
                        line = NULL;
                serve_worker_answer(line ? status : 503, "application/json", line ? line : oom,
                                    line ? strlen(line) : strlen(oom));
        }
        if (evbuffer_add(buf, text ? text : oom, text ? strlen(text) : strlen(oom)) < 0 ||
            evbuffer_add(buf, "\n", 1) < 0) {
                evbuffer_free(buf);
                evhttp_send_error(req, 503, NULL);
                return;
        }
        (void)evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                                "application/json");
        evhttp_send_reply(req, status, NULL, buf);
        evbuffer_free(buf);
}

void serve_reply_no_content(struct evhttp_request *req) {
        if (serve_worker_fd >= 0)
                serve_worker_answer(204, NULL, NULL, 0);
        evhttp_send_reply(req, 204, NULL, NULL);
}

void serve_reply_bytes(struct evhttp_request *req, int status, const char *ctype, const void *data,
                       size_t len) {
        struct evbuffer *buf;

        if (serve_worker_fd >= 0)
                serve_worker_answer(status, ctype, data, len);
        buf = evbuffer_new();
        if (!buf || evbuffer_add(buf, data, len) < 0) {
                if (buf)
                        evbuffer_free(buf);
                serve_reply_errno(req, ENOMEM, NULL, "out of memory");
                return;
        }
        if (ctype)
                (void)evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                                        ctype);
        evhttp_send_reply(req, status, NULL, buf);
        evbuffer_free(buf);
}

static void reply_vstatus(struct evhttp_request *req, int status, const char *code,
                          const char *field, const char *fmt, va_list ap) _printf_(5, 0);
static void reply_vstatus(struct evhttp_request *req, int status, const char *code,
                          const char *field, const char *fmt, va_list ap) {
        char msg[HUTCH_ERROR_MSG_MAX];

        (void)vsnprintf(msg, sizeof(msg), fmt, ap);
        if (status >= 500)
                log_error("%s %s: %s", method_name(evhttp_request_get_command(req)),
                          evhttp_request_get_uri(req), msg);
        serve_reply_json(req, status,
                         json_pack("{s:{s:s,s:s,s:o}}", "error", "code", code, "message", msg,
                                   "field", field && field[0] ? json_string(field) : json_null()));
}

void serve_reply_status(struct evhttp_request *req, int status, const char *code, const char *field,
                        const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        reply_vstatus(req, status, code, field, fmt, ap);
        va_end(ap);
}

void serve_reply_errno(struct evhttp_request *req, int errnum, const char *field, const char *fmt,
                       ...) {
        const char *code;
        int status;
        va_list ap;

        serve_errno_to_status(errnum, &status, &code);
        va_start(ap, fmt);
        reply_vstatus(req, status, code, field, fmt, ap);
        va_end(ap);
}

void serve_reply_hutch_error(struct evhttp_request *req, int r, const HutchError *err) {
        int errnum = err && err->errnum > 0 ? err->errnum : -r;

        serve_reply_errno(req, errnum, err ? err->pointer : NULL, "%s",
                          err && err->msg[0] ? err->msg : strerror(errnum));
}

void serve_reply_api_error(struct evhttp_request *req, int r, const hutch_error *err,
                           const char *field_prefix) {
        int errnum = err && err->code > 0 ? err->code : -r;
        char field[HUTCH_ERROR_POINTER_MAX] = "";

        if (err && err->field[0])
                (void)snprintf(field, sizeof(field), "%s%s", field_prefix ? field_prefix : "",
                               err->field);
        serve_reply_errno(req, errnum, field, "%s",
                          err && err->message[0] ? err->message : strerror(errnum));
}

/* ---- requests ---- */

int serve_body(const ServeCtx *c, char **ret, size_t *ret_len) {
        struct evbuffer *in = evhttp_request_get_input_buffer(c->req);
        size_t len = evbuffer_get_length(in);
        char *data = malloc(len + 1);

        if (!data)
                return -ENOMEM;
        if (evbuffer_copyout(in, data, len) != (ev_ssize_t)len) {
                free(data);
                return -EIO;
        }
        data[len] = '\0';
        *ret = data;
        *ret_len = len;
        return 0;
}

int serve_body_object(const ServeCtx *c, const ServeField *fields, size_t n_fields, void *dest,
                      json_t **ret_root) {
        _cleanup_free_ char *text = NULL;
        json_error_t jerr;
        HutchError err = {};
        json_t *root;
        size_t len;
        int r;

        r = serve_body(c, &text, &len);
        if (r < 0) {
                serve_reply_errno(c->req, -r, NULL, "cannot read the request body");
                return r;
        }
        if (len == 0)
                root = json_object();
        else
                root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!root) {
                serve_reply_status(c->req, 400, "invalid_json", NULL,
                                   "the request body is not valid JSON: %s (line %d, column %d)",
                                   jerr.text, jerr.line, jerr.column);
                return -EINVAL;
        }
        r = serve_decode_object(root, fields, n_fields, dest, &err);
        if (r < 0) {
                json_decref(root);
                serve_reply_hutch_error(c->req, r, &err);
                return r;
        }
        *ret_root = root;
        return 0;
}

const char *serve_query(const ServeCtx *c, const char *key) {
        return evhttp_find_header(c->query, key);
}

/* Parses the query string into @q and checks it against @route: only the
 * parameters it takes, each once, no NUL. Answers and returns -EINVAL
 * otherwise. */
static int parse_query(struct evhttp_request *req, const Route *route, const char *raw,
                       struct evkeyvalq *q) {
        struct evkeyval *kv;

        if (!raw || !raw[0])
                return 0;
        /* A %00 would decode to a NUL that cuts the value short. */
        if (strstr(raw, "%00")) {
                serve_reply_status(req, 400, "invalid_argument", NULL,
                                   "query parameters must not contain NUL characters");
                return -EINVAL;
        }
        if (evhttp_parse_query_str(raw, q) < 0) {
                serve_reply_status(req, 400, "invalid_argument", NULL, "malformed query string");
                return -EINVAL;
        }
        TAILQ_FOREACH(kv, q, next) {
                bool known = false;

                for (const char *const *k = route->query; k && *k; k++)
                        known = known || strcmp(*k, kv->key) == 0;
                if (!known) {
                        serve_reply_status(req, 400, "invalid_argument", NULL,
                                           "unknown query parameter '%.64s'", kv->key);
                        return -EINVAL;
                }
                for (struct evkeyval *o = TAILQ_NEXT(kv, next); o; o = TAILQ_NEXT(o, next))
                        if (strcmp(o->key, kv->key) == 0) {
                                serve_reply_status(req, 400, "invalid_argument", NULL,
                                                   "query parameter '%s' given twice", kv->key);
                                return -EINVAL;
                        }
        }
        return 0;
}

/* SECURITY: the socket is 0600 in a 0700 directory already; the peer's
 * uid is checked as well, as the keeper does. */
static bool peer_is_owner(struct evhttp_request *req) {
        struct evhttp_connection *evcon = evhttp_request_get_connection(req);
        struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
        struct ucred cred;
        socklen_t len = sizeof(cred);

        if (!bev || getsockopt(bufferevent_getfd(bev), SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
                return false;
        return cred.uid == geteuid();
}

static void dispatch(struct evhttp_request *req, void *arg) {
        Listener *l = arg;
        const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
        enum evhttp_cmd_type method = evhttp_request_get_command(req);
        struct evkeyvalq query = {};
        const Route *route = NULL;
        char allow[128] = "", param[HUTCH_EXT_NAME_MAX + 1] = "";
        const char *path = uri ? evhttp_uri_get_path(uri) : NULL, *p = NULL;
        size_t body_len = evbuffer_get_length(evhttp_request_get_input_buffer(req)), plen = 0;
        ServeCtx c;

        TAILQ_INIT(&query);
        /* Clients come through a front (serve-front.c), which checked their
         * token or uid, on a connection of this server's own user; checked
         * again here for whoever reaches evhttp's socket itself. */
        if (!peer_is_owner(req)) {
                serve_reply_status(req, 403, "permission_denied", NULL,
                                   "only the server's owner may use this socket");
                return;
        }
        if (!path) {
                serve_reply_status(req, 400, "invalid_argument", NULL, "malformed URI");
                return;
        }
        if (l->srv->ui && serve_ui_dispatch(l->srv, req, path))
                return;

        for (size_t i = 0; i < ELEMENTSOF(routes); i++) {
                const char *rp;
                size_t rplen;

                if (!serve_path_match(routes[i].pattern, path, &rp, &rplen))
                        continue;
                if (routes[i].method == method) {
                        route = &routes[i];
                        p = rp;
                        plen = rplen;
                        break;
                }
                (void)snprintf(allow + strlen(allow), sizeof(allow) - strlen(allow), "%s%s",
                               allow[0] ? ", " : "", method_name(routes[i].method));
        }
        if (!route && allow[0]) {
                (void)evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
                serve_reply_status(req, 405, "method_not_allowed", NULL,
                                   "%s is not allowed here (allowed: %s)", method_name(method),
                                   allow);
                return;
        }
        if (!route) {
                serve_reply_status(req, 404, "no_such_route", NULL, "no route %s %.128s",
                                   method_name(method), path);
                return;
        }
        if (p) {
                if (plen > HUTCH_EXT_NAME_MAX) {
                        serve_reply_status(req, 400, "invalid_argument", NULL,
                                           "invalid name: longer than %d characters",
                                           HUTCH_EXT_NAME_MAX);
                        return;
                }
                memcpy(param, p, plen);
                param[plen] = '\0';
                if (!hutch_ext_name_is_valid(param)) {
                        serve_reply_status(
                                req, 400, "invalid_argument", NULL,
                                "invalid name '%s': it must match [a-z0-9][a-z0-9_.-]{0,62}",
                                param);
                        return;
                }
        }
        if (route->body == BODY_NONE && body_len > 0) {
                serve_reply_status(req, 400, "invalid_argument", NULL,
                                   "%s %s takes no request body", method_name(method),
                                   route->pattern);
                return;
        }
        if (body_len > route->body_max) {
                serve_reply_status(req, 413, "too_large", NULL,
                                   "the request body is larger than %zu bytes", route->body_max);
                return;
        }
        if (parse_query(req, route, evhttp_uri_get_query(uri), &query) < 0) {
                evhttp_clear_headers(&query);
                return;
        }
        c = (ServeCtx){.srv = l->srv, .req = req, .param = p ? param : NULL, .query = &query};
        if (route->worker)
                serve_in_worker(&c, route->handler);
        else
                route->handler(&c);
        evhttp_clear_headers(&query);
}

/* ---- the routes of this file ---- */

static void serve_version(ServeCtx *c) {
        serve_reply_json(c->req, 200,
                         json_pack("{s:s,s:i,s:i}", "version", HUTCH_VERSION, "api_major",
                                   SERVE_API_VERSION_MAJOR, "api_minor", SERVE_API_VERSION_MINOR));
}

static void serve_routes(ServeCtx *c) {
        json_t *arr = json_array();

        for (size_t i = 0; arr && i < ELEMENTSOF(routes); i++) {
                json_t *q = json_array();

                for (const char *const *k = routes[i].query; q && k && *k; k++)
                        (void)json_array_append_new(q, json_string(*k));
                if (json_array_append_new(arr, json_pack("{s:s,s:s,s:o}", "method",
                                                         method_name(routes[i].method), "path",
                                                         routes[i].pattern, "query",
                                                         q ? q : json_null())) < 0) {
                        json_decref(arr);
                        arr = NULL;
                }
        }
        serve_reply_json(c->req, 200, arr ? json_pack("{s:o}", "routes", arr) : NULL);
}

/* ---- listening ---- */

static int setup_http(Listener *l, Server *srv) {
        l->srv = srv;
        l->http = evhttp_new(srv->base);
        if (!l->http)
                return -ENOMEM;
        evhttp_set_max_headers_size(l->http, SERVE_HEADERS_MAX);
        evhttp_set_max_body_size(l->http, SERVE_BODY_MAX);
        evhttp_set_timeout(l->http, SERVE_TIMEOUT_S);
        /* Every method reaches dispatch(), which answers 405 in JSON. */
        evhttp_set_allowed_methods(l->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                                    EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
                                                    EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE |
                                                    EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
        evhttp_set_gencb(l->http, dispatch, l);
        return 0;
}

/* Hands the listening @fd (taken) to @l's evhttp. */
static int listen_on(Listener *l, int fd) {
        struct evconnlistener *el;

        el = evconnlistener_new(l->srv->base, NULL, NULL,
                                LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fd);
        if (!el) {
                (void)close(fd);
                return -ENOMEM;
        }
        if (!evhttp_bind_listener(l->http, el)) {
                evconnlistener_free(el);
                return -ENOMEM;
        }
        return 0;
}

/* Binds the unix socket at @path (mode 0600): refuses when another server
 * holds @path's lock file, replaces a stale socket. Returns the listening
 * fd, with the lock in @ret_lock. */
static int unix_listen(const char *path, int *ret_lock) {
        _cleanup_close_ int fd = -EBADF, lock = -EBADF;
        _cleanup_free_ char *lock_path = NULL;
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        struct stat st;
        mode_t old_umask;
        int r;

        if (strlen(path) >= sizeof(sa.sun_path))
                return log_error_errno(-ENAMETOOLONG, "socket path '%s' is too long", path);
        if (asprintf(&lock_path, "%s.lock", path) < 0) {
                lock_path = NULL;
                return log_error_errno(-ENOMEM, "out of memory");
        }
        lock = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (lock < 0)
                return log_error_errno(negative_errno(), "cannot open '%s': %m", lock_path);
        if (flock(lock, LOCK_EX | LOCK_NB) < 0)
                return log_error_errno(-EBUSY, "another hutch serve listens on '%s'", path);
        if (lstat(path, &st) == 0) {
                if (!S_ISSOCK(st.st_mode))
                        return log_error_errno(-EEXIST, "'%s' exists and is not a socket", path);
                if (unlink(path) < 0)
                        return log_error_errno(negative_errno(), "cannot remove '%s': %m", path);
        }
        strcpy(sa.sun_path, path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return log_error_errno(negative_errno(), "socket: %m");
        /* SECURITY: born 0600, never briefly wider. */
        old_umask = umask(0177);
        r = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? negative_errno() : 0;
        (void)umask(old_umask);
        if (r < 0)
                return log_error_errno(r, "cannot bind '%s': %m", path);
        if (listen(fd, 128) < 0)
                return log_error_errno(negative_errno(), "listen: %m");
        *ret_lock = TAKE_FD(lock);
        return TAKE_FD(fd);
}

/* evhttp's own socket, which only the fronts connect to: "evhttp.sock",
 * mode 0600, in a new 0700 directory ".serve-XXXXXX" of @state_dir. Returns
 * the listening fd, with both paths in @ret_dir and @ret_path. */
static int inner_listen(const char *state_dir, char **ret_dir, char **ret_path) {
        _cleanup_free_ char *dir = NULL, *p = NULL;
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        mode_t old_umask;
        int r;

        if (asprintf(&dir, "%s/.serve-XXXXXX", state_dir) < 0) {
                dir = NULL;
                return log_error_errno(-ENOMEM, "out of memory");
        }
        if (!mkdtemp(dir))
                return log_error_errno(negative_errno(), "cannot create a folder in '%s': %m",
                                       state_dir);
        if (asprintf(&p, "%s/evhttp.sock", dir) < 0) {
                p = NULL;
                (void)rmdir(dir);
                return log_error_errno(-ENOMEM, "out of memory");
        }
        if (strlen(p) >= sizeof(sa.sun_path)) {
                (void)rmdir(dir);
                return log_error_errno(-ENAMETOOLONG, "socket path '%s' is too long", p);
        }
        strcpy(sa.sun_path, p);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
                r = negative_errno();
                (void)rmdir(dir);
                return log_error_errno(r, "socket: %m");
        }
        old_umask = umask(0177);
        r = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? negative_errno() : 0;
        (void)umask(old_umask);
        if (r >= 0 && listen(fd, 128) < 0)
                r = negative_errno();
        if (r < 0) {
                (void)unlink(p);
                (void)rmdir(dir);
                return log_error_errno(r, "cannot listen on '%s': %m", p);
        }
        *ret_dir = TAKE_PTR(dir);
        *ret_path = TAKE_PTR(p);
        return TAKE_FD(fd);
}

static int tcp_listen(const char *spec, char *ret_addr, size_t size) {
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_storage ss;
        socklen_t len;
        char host[INET6_ADDRSTRLEN];
        int one = 1;
        uint16_t port;

        if (serve_parse_listen(spec, &ss, &len) < 0)
                return log_error_errno(-EINVAL,
                                       "invalid --listen '%s' (want IPV4:PORT or [IPV6]:PORT, "
                                       "numeric)",
                                       spec);
        fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return log_error_errno(negative_errno(), "socket: %m");
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (ss.ss_family == AF_INET6)
                (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
        if (bind(fd, (struct sockaddr *)&ss, len) < 0)
                return log_error_errno(negative_errno(), "cannot bind '%s': %m", spec);
        if (listen(fd, 128) < 0)
                return log_error_errno(negative_errno(), "listen: %m");
        len = sizeof(ss);
        if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
                return log_error_errno(negative_errno(), "getsockname: %m");
        if (ss.ss_family == AF_INET6) {
                const struct sockaddr_in6 *sa = (const struct sockaddr_in6 *)&ss;

                (void)inet_ntop(AF_INET6, &sa->sin6_addr, host, sizeof(host));
                port = ntohs(sa->sin6_port);
                (void)snprintf(ret_addr, size, "[%s]:%u", host, port);
                if (!IN6_IS_ADDR_LOOPBACK(&sa->sin6_addr))
                        log_warning("listening on %s, which is not a loopback address", ret_addr);
        } else {
                const struct sockaddr_in *sa = (const struct sockaddr_in *)&ss;

                (void)inet_ntop(AF_INET, &sa->sin_addr, host, sizeof(host));
                port = ntohs(sa->sin_port);
                (void)snprintf(ret_addr, size, "%s:%u", host, port);
                if ((ntohl(sa->sin_addr.s_addr) >> 24) != 127)
                        log_warning("listening on %s, which is not a loopback address", ret_addr);
        }
        return TAKE_FD(fd);
}

static void stop_cb(evutil_socket_t fd, short what, void *arg) {
        (void)event_base_loopbreak(arg);
}

static void serve_usage(FILE *f) {
        (void)fprintf(f,
                      "usage: hutch serve [--socket PATH] [--listen HOST:PORT --token-file FILE\n"
                      "                   [--max-connections N]] [--ui [--ui-session TIME]]\n\n"
                      "Serves the HTTP API (docs/api.md) on a unix socket, by default\n"
                      "$XDG_RUNTIME_DIR/hutch/api.sock (mode 0600).\n"
                      "  --socket PATH        the unix socket to listen on\n"
                      "  --listen HOST:PORT   also listen on TCP (numeric address; port 0 picks "
                      "one)\n"
                      "  --token-file FILE    the bearer token TCP clients must send "
                      "(required with --listen)\n"
                      "  --max-connections N  TCP connections served at once (default %u); more "
                      "wait\n"
                      "                       in the kernel's listen queue\n"
                      "  --ui                 also serve the web dashboard at /ui/ "
                      "(docs/ui.md)\n"
                      "  --ui-session TIME    a dashboard session's lifetime (default 12h, "
                      "at most 168h)\n"
                      "  --e2b                serve E2B's API instead (docs/e2b.md; "
                      "'hutch serve --e2b --help')\n",
                      SERVE_MAX_CONNECTIONS);
}

typedef struct ServeArgs {
        const char *socket_path;
        const char *listen;
        const char *token_file;
        unsigned max_connections;
        bool max_connections_given;
        bool ui;
        uint64_t ui_session_s; /* --ui-session; 0: SERVE_UI_SESSION_S */
} ServeArgs;

static int parse_args(int argc, char **argv, ServeArgs *a) {
        static const struct option options[] = {{"socket", required_argument, NULL, 's'},
                                                {"listen", required_argument, NULL, 'l'},
                                                {"token-file", required_argument, NULL, 't'},
                                                {"max-connections", required_argument, NULL, 'm'},
                                                {"ui", no_argument, NULL, 'u'},
                                                {"ui-session", required_argument, NULL, 'S'},
                                                {"help", no_argument, NULL, 'h'},
                                                {}};
        int c;

        optind = 0;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "+h", options, NULL)) >= 0)
                switch (c) {
                case 's':
                        a->socket_path = optarg;
                        break;
                case 'l':
                        a->listen = optarg;
                        break;
                case 't':
                        a->token_file = optarg;
                        break;
                case 'm': {
                        uint32_t n;

                        if (safe_atou32(optarg, &n) < 0 || n == 0 || n > 65536) {
                                log_error("invalid --max-connections '%s' (want 1 to 65536)",
                                          optarg);
                                return -EINVAL;
                        }
                        a->max_connections = n;
                        a->max_connections_given = true;
                        break;
                }
                case 'u':
                        a->ui = true;
                        break;
                case 'S': {
                        uint64_t ms;

                        if (parse_duration_ms(optarg, &ms) < 0 || ms < 1000 ||
                            ms > SERVE_UI_SESSION_MAX_S * 1000U) {
                                log_error("invalid --ui-session '%s' (want 1s to 168h, as 12h)",
                                          optarg);
                                return -EINVAL;
                        }
                        a->ui_session_s = ms / 1000U;
                        break;
                }
                case 'h':
                        serve_usage(stdout);
                        return 1;
                default:
                        log_error("unknown or incomplete option '%s' (see 'hutch serve --help')",
                                  argv[optind - 1]);
                        return -EINVAL;
                }
        if (optind < argc) {
                log_error("unexpected argument '%s' (see 'hutch serve --help')", argv[optind]);
                return -EINVAL;
        }
        /* SECURITY: TCP is reachable by every local user (or more): never
         * without a token. */
        if (a->listen && !a->token_file) {
                log_error("--listen needs --token-file: refusing to serve TCP without a token");
                return -EINVAL;
        }
        if (a->token_file && !a->listen) {
                log_error("--token-file is only used with --listen");
                return -EINVAL;
        }
        if (a->ui_session_s != 0 && !a->ui) {
                log_error("--ui-session is only used with --ui");
                return -EINVAL;
        }
        if (a->max_connections_given && !a->listen) {
                log_error("--max-connections is only used with --listen");
                return -EINVAL;
        }
        return 0;
}

int verb_serve(int argc, char **argv) {
        _cleanup_(hutch_ext_store_paths_done) HutchExtStorePaths store = {};
        _cleanup_free_ char *default_path = NULL, *inner_dir = NULL, *inner_path = NULL;
        _cleanup_close_ int lock = -EBADF;
        ServeArgs args = {.max_connections = SERVE_MAX_CONNECTIONS};
        Server srv = {};
        Listener ul = {};
        ServeFront front = {}, ufront = {};
        ServeUi ui = {};
        struct event *sig_ev[3] = {};
        const int sigs[3] = {SIGINT, SIGTERM, SIGHUP};
        char tcp_addr[INET6_ADDRSTRLEN + 16] = "";
        const char *path;
        HutchError err = {};
        int fd, tcp_fd = -EBADF, r;

        /* hutch serve --e2b: E2B's API instead (e2b.h, docs/e2b.md). */
        for (int i = 1; i < argc; i++)
                if (strcmp(argv[i], "--e2b") == 0)
                        return e2b_serve_main(argc, argv);
        r = parse_args(argc, argv, &args);
        if (r != 0)
                return r > 0 ? 0 : HUTCH_EXIT_FAILURE;
        if (args.token_file && serve_token_file_load(args.token_file, "token", srv.token_sha) < 0)
                return HUTCH_EXIT_FAILURE;
        srv.has_token = args.token_file;
        if (args.ui) {
                r = serve_ui_init(&ui);
                if (r < 0) {
                        log_error_errno(r, "cannot draw the dashboard's session key: %m");
                        return HUTCH_EXIT_FAILURE;
                }
                if (args.ui_session_s != 0)
                        ui.session_s = args.ui_session_s;
                srv.ui = &ui;
        }
        r = hutch_ext_store_paths(&store, &err);
        if (r < 0) {
                log_error("%s", err.msg[0] ? err.msg : strerror(-r));
                return HUTCH_EXIT_FAILURE;
        }
        path = args.socket_path;
        if (!path) {
                /* The caller's one default server (whichever store it
                 * serves: a second store's server is refused, by the
                 * socket's lock, unless given its own --socket). */
                if (asprintf(&default_path, "%s/api.sock", store.runtime) < 0) {
                        default_path = NULL;
                        log_error("out of memory");
                        return HUTCH_EXIT_FAILURE;
                }
                path = default_path;
        }
        /* A client that goes away mid-answer must not kill the server. The
         * commands it runs get default dispositions back (sandbox init). */
        (void)signal(SIGPIPE, SIG_IGN);

        srv.base = event_base_new();
        if (!srv.base) {
                log_error("cannot create the event loop");
                return HUTCH_EXIT_FAILURE;
        }
        r = setup_http(&ul, &srv);
        if (r < 0) {
                log_error_errno(r, "cannot set up the HTTP server: %m");
                goto finish;
        }
        fd = unix_listen(path, &lock);
        if (fd < 0) {
                r = fd;
                goto finish;
        }
        r = inner_listen(store.state, &inner_dir, &inner_path);
        if (r >= 0)
                r = listen_on(&ul, r);
        if (r >= 0) {
                /* Clients reach evhttp only through a front (serve.h). */
                ufront = (ServeFront){
                        .base = srv.base,
                        .owner_only = true,
                        .inner_path = inner_path,
                        .upgrade = serve_ws_upgrade,
                        .upgrade_data = &srv,
                };
                r = serve_front_listen(&ufront, fd);
        } else
                (void)close(fd);
        if (r >= 0 && args.listen) {
                front = (ServeFront){
                        .base = srv.base,
                        .token_sha = srv.token_sha,
                        .inner_path = inner_path,
                        .upgrade = serve_ws_upgrade,
                        .upgrade_data = &srv,
                        .max = args.max_connections,
                        .ui = srv.ui,
                };
                tcp_fd = tcp_listen(args.listen, tcp_addr, sizeof(tcp_addr));
                r = tcp_fd < 0 ? tcp_fd : serve_front_listen(&front, tcp_fd);
        }
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(sigs); i++) {
                sig_ev[i] = evsignal_new(srv.base, sigs[i], stop_cb, srv.base);
                if (!sig_ev[i] || event_add(sig_ev[i], NULL) < 0)
                        r = -ENOMEM;
        }
        if (r < 0) {
                log_error_errno(r, "cannot start listening: %m");
                goto finish;
        }
        /* The readiness lines: tests and scripts wait for them. */
        (void)printf("listening on unix:%s\n", path);
        if (args.listen)
                (void)printf("listening on tcp:%s\n", tcp_addr);
        if (args.ui && args.listen)
                (void)printf("dashboard at http://%s/ui/\n", tcp_addr);
        (void)fflush(stdout);

        if (event_base_dispatch(srv.base) < 0) {
                log_error("the event loop failed");
                r = -EIO;
        }
finish:
        /* Running commands are killed: their connections to the keepers
         * close with the jobs. */
        serve_exec_abort_all(&srv);
        serve_stats_abort_all(&srv);
        serve_ws_abort_all();
        for (size_t i = 0; i < ELEMENTSOF(sig_ev); i++)
                if (sig_ev[i])
                        event_free(sig_ev[i]);
        serve_front_stop(&front);
        serve_front_stop(&ufront);
        if (ul.http)
                evhttp_free(ul.http);
        if (inner_path)
                (void)unlink(inner_path);
        if (inner_dir)
                (void)rmdir(inner_dir);
        if (lock >= 0)
                (void)unlink(path);
        event_base_free(srv.base);
        return r < 0 ? HUTCH_EXIT_FAILURE : 0;
}
