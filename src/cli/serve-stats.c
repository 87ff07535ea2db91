/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The routes the dashboard added (docs/api.md, docs/ui.md): a sandbox's
 * exec history, its memory and cpu now, and the same as server-sent events
 * every SERVE_STATS_INTERVAL_MS, and the workspace diff as a patch.
 *
 * The numbers come from the sandbox's cgroup, found from outside: the
 * keeper's pid (SO_PEERCRED of a connection to its socket, which is in the
 * store's own 0700 state folder), its child in a sandbox's "exec" leaf (the
 * sandbox's init, or QEMU), and that process's cgroup in the memory and v2
 * hierarchies. The
 * sandbox's cgroup is the parent of the process's "exec" leaf, so the
 * numbers count every exec of the sandbox. */
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

#include "api/persist.h"
#include "cgroup/cgroup.h"
#include "fd-util.h"
#include "parse-util.h"
#include "serve.h"
#include "store/diff.h"
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
        char name[STORE_NAME_MAX + 1];
        StatsStream *prev, *next;
};

/* The cgroup mounts, detected once: one server per process, and the
 * mounts of cgroup hierarchies do not move while it runs. */
static CgroupTopology topology;
static int topology_state; /* 0: not yet, 1: detected, < 0: failed */

/* The pid of the sandbox @name's keeper: > 0, 0 when it is not running. */
static pid_t keeper_pid(Store *store, const char *name) {
        _cleanup_close_ int sock = -EBADF;
        struct ucred cred;
        socklen_t len = sizeof(cred);

        if (persist_connect(store, name, false, &sock, NULL) < 0)
                return 0;
        if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.pid <= 0)
                return 0;
        return cred.pid;
}

/* The /proc/PID/cgroup text of the first child of @pid that sits in a
 * sandbox's leaf (a path ending in "/exec": cgroup_new()'s name for it),
 * which is the sandbox's init (or QEMU): not hutch-proxy, which the keeper
 * starts too and which stays in the keeper's cgroup. NULL if none. */
static char *sandbox_child_cgroup(pid_t pid) {
        _cleanup_free_ char *path = NULL, *children = NULL;
        char *save = NULL;

        if (asprintf(&path, "/proc/%d/task/%d/children", (int)pid, (int)pid) < 0)
                return NULL;
        if (read_full_file(path, 64 << 10, &children) < 0)
                return NULL;
        for (char *tok = strtok_r(children, " \n", &save); tok;
             tok = strtok_r(NULL, " \n", &save)) {
                _cleanup_free_ char *cpath = NULL, *text = NULL;
                uint32_t child;

                if (safe_atou32(tok, &child) < 0 || child == 0 || child > INT32_MAX)
                        continue;
                if (asprintf(&cpath, "/proc/%u/cgroup", child) < 0)
                        return NULL;
                if (read_full_file(cpath, 64 << 10, &text) < 0)
                        continue;
                if (strstr(text, "/exec\n"))
                        return TAKE_PTR(text);
        }
        return NULL;
}

/* The path of @pid's cgroup in the hierarchy named by the /proc/PID/cgroup
 * @key ("" for v2, "memory", "cpuacct"), without its last component: new
 * string or NULL. Lines of other hierarchies are not judged. */
static char *proc_cgroup_parent(const char *text, const char *key) {
        for (const char *line = text; line && *line;) {
                const char *eol = strchrnul(line, '\n'), *c1 = memchr(line, ':', eol - line);
                const char *c2 = c1 ? memchr(c1 + 1, ':', eol - c1 - 1) : NULL;

                if (c2) {
                        bool match = false;

                        /* "4:memory:/p", "2:cpu,cpuacct:/p" or "0::/p". */
                        if (!key[0])
                                match = c2 == c1 + 1 && line[0] == '0' && c1 == line + 1;
                        else
                                for (const char *k = c1 + 1; k < c2;) {
                                        const char *comma = memchr(k, ',', c2 - k);
                                        const char *kend = comma ? comma : c2;

                                        if ((size_t)(kend - k) == strlen(key) &&
                                            memcmp(k, key, kend - k) == 0)
                                                match = true;
                                        k = comma ? comma + 1 : c2;
                                }
                        if (match && c2[1] == '/') {
                                const char *slash = c2 + 1, *p;

                                for (p = c2 + 1; p < eol; p++)
                                        if (*p == '/')
                                                slash = p;
                                if (slash == c2 + 1 || memmem(c2 + 1, eol - c2 - 1, "/..", 3))
                                        return NULL;
                                return strndup(c2 + 1, slash - c2 - 1);
                        }
                }
                line = *eol ? eol + 1 : NULL;
        }
        return NULL;
}

/* A number (the first of the file, or of the line starting with @key). */
static int read_counter(const char *mount, const char *dir, const char *file, const char *key,
                        uint64_t *ret) {
        _cleanup_free_ char *path = NULL, *text = NULL;
        const char *p;
        char *end;

        if (!mount || asprintf(&path, "%s%s/%s", mount, dir, file) < 0)
                return -ENOENT;
        if (read_full_file(path, 64 << 10, &text) < 0)
                return -ENOENT;
        p = text;
        if (key) {
                size_t klen = strlen(key);

                for (p = text; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
                        if (strncmp(p, key, klen) == 0 && p[klen] == ' ') {
                                p += klen + 1;
                                break;
                        }
                if (!p)
                        return -ENOENT;
        }
        end = strchrnul(p, '\n');
        *end = '\0';
        return safe_atou64(p, ret);
}

json_t *serve_stats_sample(Store *store, const char *name) {
        _cleanup_free_ char *text = NULL, *v2 = NULL, *mem = NULL, *acct = NULL;
        const CgroupPlace *mp = &topology.controllers[CGROUP_MEMORY];
        json_t *memory = json_null(), *cpu = json_null();
        pid_t kpid;
        uint64_t n;

        kpid = keeper_pid(store, name);
        text = kpid > 0 ? sandbox_child_cgroup(kpid) : NULL;
        if (text && topology_state == 0)
                topology_state = cgroup_topology_detect(&topology, NULL) < 0 ? -1 : 1;
        if (text && topology_state > 0) {
                v2 = proc_cgroup_parent(text, "");
                mem = proc_cgroup_parent(text, "memory");
                acct = proc_cgroup_parent(text, "cpuacct");
                if (mp->version == CGROUP_VERSION_2 && v2 &&
                    read_counter(topology.v2.mount, v2, "memory.current", NULL, &n) >= 0)
                        memory = json_integer((json_int_t)n);
                else if (mp->version == CGROUP_VERSION_1 && mem &&
                         read_counter(mp->mount, mem, "memory.usage_in_bytes", NULL, &n) >= 0)
                        memory = json_integer((json_int_t)n);
                if (v2 && read_counter(topology.v2.mount, v2, "cpu.stat", "usage_usec", &n) >= 0)
                        cpu = json_integer((json_int_t)n);
                else if (acct &&
                         read_counter(topology.cpuacct.mount, acct, "cpuacct.usage", NULL, &n) >= 0)
                        cpu = json_integer((json_int_t)(n / 1000));
        }
        return json_pack("{s:b,s:o,s:o,s:I}", "running", kpid > 0, "memory_bytes", memory,
                         "cpu_usec", cpu, "sampled_ms", (json_int_t)time_realtime_ms());
}

/* Loads the route's sandbox, answering 404 when there is none. */
static int load_sandbox(ServeCtx *c, SandboxRecord **ret) {
        HutchError err = {};
        int r;

        r = store_sandbox_load(c->srv->store, c->param, ret, &err);
        if (r < 0)
                serve_reply_hutch_error(c->req, r, &err);
        return r;
}

void serve_stats(ServeCtx *c) {
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;

        if (load_sandbox(c, &rec) < 0)
                return;
        serve_reply_json(c->req, 200, serve_stats_sample(c->srv->store, rec->name));
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
        json_t *j = serve_stats_sample(s->srv->store, s->name);
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
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        struct timeval tv = {.tv_sec = SERVE_STATS_INTERVAL_MS / 1000,
                             .tv_usec = (SERVE_STATS_INTERVAL_MS % 1000) * 1000};
        const struct timeval timeout = {.tv_sec = SERVE_TIMEOUT_S};
        struct evkeyvalq *h = evhttp_request_get_output_headers(c->req);
        struct bufferevent *bev;
        StatsStream *s;

        if (load_sandbox(c, &rec) < 0)
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
        (void)snprintf(s->name, sizeof(s->name), "%s", rec->name);
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
        cgroup_topology_done(&topology);
        topology_state = 0;
}

/* ---- the exec history ---- */

/* The sandbox's finished execs (history.jsonl), oldest first; ?limit
 * (default 100) of the newest. */
void serve_history(ServeCtx *c) {
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -EBADF;
        const char *limit_s = serve_query(c, "limit");
        uint32_t limit = HISTORY_LIMIT_DEFAULT;
        json_t *arr;
        int r;

        if (limit_s &&
            (safe_atou32(limit_s, &limit) < 0 || limit == 0 || limit > HISTORY_LIMIT_MAX)) {
                serve_reply_status(c->req, 400, "invalid_argument", NULL,
                                   "invalid limit '%.16s' (1 to %u)", limit_s, HISTORY_LIMIT_MAX);
                return;
        }
        if (load_sandbox(c, &rec) < 0)
                return;
        if (store_sandbox_path(c->srv->store, rec->name, "history.jsonl", &path) < 0) {
                serve_reply_errno(c->req, ENOMEM, NULL, "out of memory");
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
        _cleanup_(ws_view_done) WsView v = WS_VIEW_NULL;
        _cleanup_strv_free_ char **paths = NULL;
        _cleanup_free_ char *text = NULL;
        _cleanup_close_ int fd = -EBADF;
        const char *path = serve_query(c, "path");
        WsChange *changes = NULL;
        size_t n = 0, n_all = 0, len = 0;
        HutchError err = {};
        int r;

        if (path && strv_extend(&paths, path) < 0) {
                serve_reply_errno(c->req, ENOMEM, NULL, "out of memory");
                return;
        }
        r = persist_paths_normalize(paths, &err);
        /* In the worker (a fork of its own): the store's user namespace,
         * as `hutch diff` enters it, for files of a user's sub-ids. */
        if (r >= 0)
                r = store_enter_range(c->srv->store, &err);
        if (r >= 0)
                r = persist_diff(c->srv->store, c->param, paths, &v, &changes, &n, &n_all, &err);
        if (r < 0) {
                serve_reply_hutch_error(c->req, r, &err);
                return;
        }
        fd = memfd_create("hutch-serve-patch", MFD_CLOEXEC);
        r = fd < 0 ? negative_errno() : 0;
        if (r >= 0)
                r = ws_diff_write_patch(v.layer_fds, v.n_layers, v.host_fd, changes, n, fd, &err);
        (void)ws_changes_free(changes, n_all);
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
