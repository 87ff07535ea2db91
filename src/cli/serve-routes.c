/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The routes of `hutch serve` other than exec: sandboxes, files,
 * snapshots, diff/apply and the audit log. Each is one call of the C API
 * (include/hutch.h), whose errors map 1:1 to the error body.
 *
 * The calls that can take long (the file routes start a stopped sandbox, a
 * snapshot of a running sandbox copies its layer, diff and apply walk the
 * workspace, stop waits for the keeper) run in a worker process
 * (serve-worker.c, the `worker` flag of serve.c's route table), so that
 * other clients and running streams are not held up. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "api/hutch-ext.h"
#include "fd-util.h"
#include "parse-util.h"
#include "serve.h"
#include "strv.h"

#define AUDIT_LIMIT_DEFAULT 1000U
#define AUDIT_LIMIT_MAX 10000U
#define AUDIT_READ_MAX (8U << 20) /* only the log's tail is read */

/* Answers 204 after a C API call that returned @r >= 0, else its error. */
static void reply_done(ServeCtx *c, int r, const hutch_error *err) {
        if (r < 0)
                serve_reply_api_error(c->req, r, err, NULL);
        else
                serve_reply_no_content(c->req);
}

/* Appends @item (taken) to @arr; on failure frees both and returns NULL,
 * which the next call passes on and serve_reply_json() answers as OOM. */
static json_t *array_append(json_t *arr, json_t *item) {
        if (arr && json_array_append_new(arr, item) == 0)
                return arr;
        if (!arr)
                json_decref(item);
        json_decref(arr);
        return NULL;
}

/* ---- sandboxes ---- */

/* The published ports as bound while it runs, else as its policy asks
 * (GET .../ports); from the description alone ({"port"} each) if that
 * fails. */
static json_t *ports_json(const char *name, const hutch_sandbox_desc *d) {
        _cleanup_free_ char *text = NULL;
        hutch_error ignored = {};
        json_t *arr;

        if (d->n_ports == 0)
                return json_array();
        if (hutch_ports(name, &text, NULL, &ignored) >= 0) {
                arr = json_loads(text, 0, NULL);
                if (json_is_array(arr))
                        return arr;
                json_decref(arr);
        }
        arr = json_array();
        for (size_t k = 0; arr && k < MIN((size_t)d->n_ports, ELEMENTSOF(d->ports)); k++)
                (void)json_array_append_new(arr, json_pack("{s:i}", "port", (int)d->ports[k]));
        return arr;
}

/* A string field of a C struct: "" is JSON's null. */
static json_t *string_or_null(const char *s) {
        return s[0] ? json_string(s) : json_null();
}

static json_t *sandbox_json(const hutch_sandbox_info *i) {
        _cleanup_free_ hutch_sandbox_desc *d = NULL;
        hutch_error ignored = {};
        json_t *o = json_pack("{s:s,s:s,s:s,s:I,s:I,s:I,s:o}", "name", i->name, "id", i->id,
                              "state", i->running ? "running" : "stopped", "created_ms",
                              (json_int_t)i->created_ms, "last_used_ms",
                              (json_int_t)i->last_used_ms, "disk_bytes", (json_int_t)i->disk_bytes,
                              "parent", string_or_null(i->parent));

        /* API 1.4 (issue 23): backend, image, published ports (1.6: the
         * image's name); a sandbox removed meanwhile is "ns" with none. */
        if (o && hutch_sandbox_describe(i->name, &d, &ignored) < 0) {
                d = calloc(1, sizeof(*d));
                if (d)
                        (void)snprintf(d->backend, sizeof(d->backend), "ns");
        }
        if (o && (!d || json_object_set_new(o, "backend", json_string(d->backend)) < 0 ||
                  json_object_set_new(o, "image", string_or_null(d->image)) < 0 ||
                  json_object_set_new(o, "image_name", string_or_null(d->image_name)) < 0 ||
                  json_object_set_new(o, "ports", ports_json(i->name, d)) < 0)) {
                json_decref(o);
                return NULL;
        }
        return o;
}

void serve_sandbox_list(ServeCtx *c) {
        _cleanup_free_ hutch_sandbox_info *l = NULL;
        hutch_error err = {};
        json_t *arr;
        size_t n = 0;
        int r;

        r = hutch_list(&l, &n, &err);
        if (r < 0) {
                serve_reply_api_error(c->req, r, &err, NULL);
                return;
        }
        arr = json_array();
        for (size_t i = 0; i < n; i++)
                arr = array_append(arr, sandbox_json(&l[i]));
        serve_reply_json(c->req, 200, arr ? json_pack("{s:o}", "sandboxes", arr) : NULL);
}

typedef struct CreateArgs {
        const char *name;
        json_t *policy;
        const char *from_snapshot;
} CreateArgs;

static const ServeField create_fields[] = {
        {"name", SERVE_FIELD_STRING, offsetof(CreateArgs, name), true},
        {"policy", SERVE_FIELD_OBJECT, offsetof(CreateArgs, policy), false},
        {"from_snapshot", SERVE_FIELD_STRING, offsetof(CreateArgs, from_snapshot), false},
};

static void hutch_policy_freep(hutch_policy **p) {
        hutch_policy_free(*p);
}

/* Creates a sandbox. With "policy" that document is its policy; with only
 * "from_snapshot", the snapshot's (the defaults for an imported one:
 * persist_create()); with neither, the defaults. */
void serve_sandbox_create(ServeCtx *c) {
        _cleanup_(hutch_policy_freep) hutch_policy *p = NULL;
        _cleanup_free_ char *policy_text = NULL, *location = NULL;
        CreateArgs a = {};
        _cleanup_(hutch_sandbox_info_done) hutch_sandbox_info info = {};
        hutch_error err = {};
        json_t *root = NULL;
        char id[17];
        int r;

        r = serve_body_object(c, create_fields, ELEMENTSOF(create_fields), &a, &root);
        if (r < 0)
                return;
        if (!hutch_ext_name_is_valid(a.name)) {
                serve_reply_status(c->req, 400, "invalid_argument", "/name",
                                   "invalid sandbox name '%.64s': it must match "
                                   "[a-z0-9][a-z0-9_.-]{0,62}",
                                   a.name);
                goto out;
        }
        if (a.from_snapshot && !hutch_ext_name_is_valid(a.from_snapshot)) {
                serve_reply_status(c->req, 400, "invalid_argument", "/from_snapshot",
                                   "invalid snapshot name '%.64s'", a.from_snapshot);
                goto out;
        }
        if (a.policy || !a.from_snapshot) {
                p = hutch_policy_new();
                if (!p) {
                        serve_reply_errno(c->req, ENOMEM, NULL, "out of memory");
                        goto out;
                }
        }
        if (a.policy) {
                policy_text = json_dumps(a.policy, JSON_COMPACT);
                r = policy_text ? hutch_policy_load_json(p, policy_text, &err) : -ENOMEM;
                if (r < 0) {
                        serve_reply_api_error(c->req, r, &err, "/policy");
                        goto out;
                }
        }
        r = hutch_create(a.name, p, a.from_snapshot, id, &err);
        if (r >= 0)
                r = hutch_get(a.name, &info, &err);
        if (r < 0) {
                serve_reply_api_error(c->req, r, &err, "/policy");
                goto out;
        }
        if (asprintf(&location, "/v1/sandboxes/%s", a.name) >= 0)
                (void)evhttp_add_header(evhttp_request_get_output_headers(c->req), "Location",
                                        location);
        else
                location = NULL;
        serve_reply_json(c->req, 201, sandbox_json(&info));
out:
        json_decref(root);
}

void serve_sandbox_get(ServeCtx *c) {
        _cleanup_(hutch_sandbox_info_done) hutch_sandbox_info info = {};
        hutch_error err = {};
        json_t *o, *policy;
        int r;

        r = hutch_get(c->param, &info, &err);
        if (r < 0) {
                serve_reply_api_error(c->req, r, &err, NULL);
                return;
        }
        o = sandbox_json(&info);
        /* API 1.6: one sandbox also carries its policy as recorded (the
         * list does not: hutch_list() reads no policy). */
        policy = info.policy_json ? json_loads(info.policy_json, 0, NULL) : json_object();
        if (o && (!policy || json_object_set_new(o, "policy", policy) < 0)) {
                json_decref(o);
                o = NULL;
        }
        serve_reply_json(c->req, 200, o);
}

/* Stops the sandbox when it runs (its commands end) and removes it. */
void serve_sandbox_delete(ServeCtx *c) {
        hutch_error err = {};

        reply_done(c, hutch_destroy(c->param, &err), &err);
}

void serve_sandbox_stop(ServeCtx *c) {
        hutch_error err = {};

        reply_done(c, hutch_stop(c->param, &err), &err);
}

/* ---- files ---- */

/* The mandatory "path" query parameter, or NULL after answering 400. */
static const char *query_path(const ServeCtx *c) {
        const char *path = serve_query(c, "path");

        if (!path || !path[0])
                serve_reply_status(c->req, 400, "invalid_argument", NULL,
                                   "the query parameter 'path' is required");
        return path && path[0] ? path : NULL;
}

static json_t *file_info_json(const hutch_file_info *f) {
        char mode[8];

        (void)snprintf(mode, sizeof(mode), "%04o", f->mode & 07777);
        return json_pack("{s:s,s:s,s:I,s:s,s:I}", "name", f->name, "type", f->type, "size",
                         (json_int_t)f->size, "mode", mode, "mtime_ms", (json_int_t)f->mtime_ms);
}

void serve_file_read(ServeCtx *c) {
        _cleanup_free_ char *data = NULL;
        const char *path = query_path(c);
        hutch_error err = {};
        size_t len = 0;
        int r;

        if (!path)
                return;
        r = hutch_file_read(c->param, path, SERVE_FILE_READ_MAX, &data, &len, &err);
        if (r < 0) {
                serve_reply_api_error(c->req, r, &err, NULL);
                return;
        }
        serve_reply_bytes(c->req, 200, "application/octet-stream", data, len);
}

/* "644" or "0644": permission bits in octal. */
static int parse_mode(const char *s, unsigned *ret) {
        unsigned m = 0;
        size_t n = strlen(s);

        if (n == 0 || n > 4)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                if (s[i] < '0' || s[i] > '7')
                        return -EINVAL;
                m = m * 8 + (unsigned)(s[i] - '0');
        }
        *ret = m;
        return 0;
}

/* A boolean query parameter @key: "1"/"true" or "0"/"false", absent is
 * false. -EINVAL after answering 400. */
static int query_bool(const ServeCtx *c, const char *key, bool *ret) {
        const char *v = serve_query(c, key);

        if (!v || strcmp(v, "0") == 0 || strcmp(v, "false") == 0) {
                *ret = false;
                return 0;
        }
        if (strcmp(v, "1") == 0 || strcmp(v, "true") == 0) {
                *ret = true;
                return 0;
        }
        serve_reply_status(c->req, 400, "invalid_argument", NULL,
                           "invalid %s '%.16s' (want true or false)", key, v);
        return -EINVAL;
}

/* ?mode (default @def) and ?parents as a hutch_file_write()/mkdir mode;
 * -EINVAL after answering 400. */
static int query_mode_parents(const ServeCtx *c, unsigned def, unsigned *ret) {
        const char *mode_s = serve_query(c, "mode");
        bool parents;

        *ret = def;
        if (mode_s && parse_mode(mode_s, ret) < 0) {
                serve_reply_status(c->req, 400, "invalid_argument", NULL,
                                   "invalid mode '%.16s' (want octal permission bits, like 0644)",
                                   mode_s);
                return -EINVAL;
        }
        if (query_bool(c, "parents", &parents) < 0)
                return -EINVAL;
        if (parents)
                *ret |= HUTCH_FILE_PARENTS;
        return 0;
}

/* Writes the raw request body to ?path (atomically: a temp file renamed
 * over it), created with ?mode (default 0644), with its missing parents
 * when ?parents=true, owned by ?user when given (hutch_ext_file_write()). */
void serve_file_write(ServeCtx *c) {
        _cleanup_free_ char *data = NULL;
        const char *path = query_path(c);
        HutchError err = {};
        unsigned mode;
        size_t len = 0;
        int r;

        if (!path || query_mode_parents(c, 0644, &mode) < 0)
                return;
        r = serve_body(c, &data, &len);
        if (r < 0) {
                serve_reply_errno(c->req, -r, NULL, "%s", strerror(-r));
                return;
        }
        r = hutch_ext_file_write(c->param, path, data, len, mode, serve_query(c, "user"), &err);
        if (r < 0) {
                serve_reply_hutch_error(c->req, r, &err);
                return;
        }
        serve_reply_json(c->req, 200,
                         json_pack("{s:s,s:I}", "path", path, "size", (json_int_t)len));
}

void serve_file_remove(ServeCtx *c) {
        const char *path = query_path(c);
        hutch_error err = {};
        int r;

        if (!path)
                return;
        r = hutch_file_remove(c->param, path, &err);
        reply_done(c, r, &err);
}

/* ?recursive=true: the tree as hutch_file_walk() gives it, each name a
 * path relative to ?path, ?depth levels deep (0 or absent: all). */
static void file_walk(ServeCtx *c, const char *path) {
        const char *depth_s = serve_query(c, "depth");
        hutch_file_entry *l = NULL;
        hutch_error err = {};
        uint32_t depth = 0;
        json_t *arr;
        size_t n = 0;
        int r;

        if (depth_s && safe_atou32(depth_s, &depth) < 0) {
                serve_reply_status(c->req, 400, "invalid_argument", NULL,
                                   "invalid depth '%.16s' (want a number of levels)", depth_s);
                return;
        }
        r = hutch_file_walk(c->param, path, depth, &l, &n, &err);
        if (r < 0) {
                serve_reply_api_error(c->req, r, &err, NULL);
                return;
        }
        arr = json_array();
        for (size_t i = 0; i < n; i++) {
                hutch_file_info f = {
                        .size = l[i].size, .mode = l[i].mode, .mtime_ms = l[i].mtime_ms};
                json_t *o;

                (void)snprintf(f.type, sizeof(f.type), "%s", l[i].type);
                o = file_info_json(&f);
                if (o && json_object_set_new(o, "name", json_string(l[i].path)) < 0) {
                        json_decref(o);
                        o = NULL;
                }
                arr = array_append(arr, o);
        }
        hutch_file_entries_free(l, n);
        serve_reply_json(c->req, 200, arr ? json_pack("{s:o}", "entries", arr) : NULL);
}

void serve_file_list(ServeCtx *c) {
        _cleanup_free_ hutch_file_info *l = NULL;
        const char *path = query_path(c);
        hutch_error err = {};
        bool recursive;
        json_t *arr;
        size_t n = 0;
        int r;

        if (!path || query_bool(c, "recursive", &recursive) < 0)
                return;
        if (recursive) {
                file_walk(c, path);
                return;
        }
        if (serve_query(c, "depth")) {
                serve_reply_status(c->req, 400, "invalid_argument", NULL,
                                   "depth needs recursive=true");
                return;
        }
        r = hutch_file_list(c->param, path, &l, &n, &err);
        if (r < 0) {
                serve_reply_api_error(c->req, r, &err, NULL);
                return;
        }
        arr = json_array();
        for (size_t i = 0; i < n; i++)
                arr = array_append(arr, file_info_json(&l[i]));
        serve_reply_json(c->req, 200, arr ? json_pack("{s:o}", "entries", arr) : NULL);
}

void serve_file_stat(ServeCtx *c) {
        const char *path = query_path(c);
        hutch_file_info f;
        hutch_error err = {};
        int r;

        if (!path)
                return;
        r = hutch_file_stat(c->param, path, &f, &err);
        if (r < 0)
                serve_reply_api_error(c->req, r, &err, NULL);
        else
                serve_reply_json(c->req, 200, file_info_json(&f));
}

/* Makes directory ?path with ?mode (default 0755); ?parents=true makes
 * the missing ones too and accepts an existing directory; what it makes
 * is owned by ?user when given. */
void serve_file_mkdir(ServeCtx *c) {
        const char *path = query_path(c);
        HutchError err = {};
        unsigned mode;
        int r;

        if (!path || query_mode_parents(c, 0755, &mode) < 0)
                return;
        r = hutch_ext_file_mkdir(c->param, path, mode, serve_query(c, "user"), &err);
        if (r < 0) {
                serve_reply_hutch_error(c->req, r, &err);
                return;
        }
        serve_reply_json(c->req, 200, json_pack("{s:s}", "path", path));
}

typedef struct MoveArgs {
        const char *from, *to;
        bool replace, parents;
        const char *user;
} MoveArgs;

static const ServeField move_fields[] = {
        {"from", SERVE_FIELD_STRING, offsetof(MoveArgs, from), true},
        {"to", SERVE_FIELD_STRING, offsetof(MoveArgs, to), true},
        {"replace", SERVE_FIELD_BOOL, offsetof(MoveArgs, replace), false},
        {"parents", SERVE_FIELD_BOOL, offsetof(MoveArgs, parents), false},
        {"user", SERVE_FIELD_STRING, offsetof(MoveArgs, user), false},
};

/* {from, to, replace?, parents?, user?}: renames inside the sandbox; the
 * parents it makes are owned by user when given. */
void serve_file_move(ServeCtx *c) {
        _cleanup_(json_decrefp) json_t *root = NULL;
        HutchError err = {};
        MoveArgs a = {};
        int r;

        if (serve_body_object(c, move_fields, ELEMENTSOF(move_fields), &a, &root) < 0)
                return;
        r = hutch_ext_file_move(c->param, a.from, a.to,
                                (a.replace ? HUTCH_FILE_REPLACE : 0) |
                                        (a.parents ? HUTCH_FILE_PARENTS : 0),
                                a.user, &err);
        if (r < 0) {
                serve_reply_hutch_error(c->req, r, &err);
                return;
        }
        serve_reply_json(c->req, 200, json_pack("{s:s,s:s}", "from", a.from, "to", a.to));
}

/* ---- snapshots ---- */

typedef struct SnapshotArgs {
        const char *snapshot;
} SnapshotArgs;

static const ServeField snapshot_fields[] = {
        {"snapshot", SERVE_FIELD_STRING, offsetof(SnapshotArgs, snapshot), true},
};

/* Decodes {"snapshot": NAME}; NULL after answering an error. */
static const char *snapshot_arg(const ServeCtx *c, json_t **ret_root) {
        SnapshotArgs a = {};

        if (serve_body_object(c, snapshot_fields, ELEMENTSOF(snapshot_fields), &a, ret_root) < 0)
                return NULL;
        if (!hutch_ext_name_is_valid(a.snapshot)) {
                serve_reply_status(c->req, 400, "invalid_argument", "/snapshot",
                                   "invalid snapshot name '%.64s': it must match "
                                   "[a-z0-9][a-z0-9_.-]{0,62}",
                                   a.snapshot);
                json_decref(*ret_root);
                *ret_root = NULL;
                return NULL;
        }
        return a.snapshot;
}

void serve_snapshot_create(ServeCtx *c) {
        json_t *root = NULL;
        const char *snap = snapshot_arg(c, &root);
        hutch_error err = {};
        int r;

        if (!snap)
                return;
        r = hutch_snapshot(c->param, snap, &err);
        if (r < 0)
                serve_reply_api_error(c->req, r, &err, NULL);
        else
                serve_reply_json(c->req, 201,
                                 json_pack("{s:s,s:s}", "snapshot", snap, "sandbox", c->param));
        json_decref(root);
}

void serve_snapshot_restore(ServeCtx *c) {
        json_t *root = NULL;
        const char *snap = snapshot_arg(c, &root);
        hutch_error err = {};
        int r;

        if (!snap)
                return;
        r = hutch_restore(c->param, snap, &err);
        reply_done(c, r, &err);
        json_decref(root);
}

static void hutch_strv_freep(char ***l) {
        hutch_strv_free(*l);
}

void serve_snapshot_list(ServeCtx *c) {
        _cleanup_(hutch_strv_freep) char **names = NULL;
        hutch_error err = {};
        json_t *arr;
        int r;

        r = hutch_snapshot_list(&names, &err);
        if (r < 0) {
                serve_reply_api_error(c->req, r, &err, NULL);
                return;
        }
        arr = json_array();
        STRV_FOREACH(n, names)
                arr = array_append(arr, json_pack("{s:s}", "name", *n));
        serve_reply_json(c->req, 200, arr ? json_pack("{s:o}", "snapshots", arr) : NULL);
}

void serve_snapshot_delete(ServeCtx *c) {
        hutch_error err = {};

        reply_done(c, hutch_snapshot_remove(c->param, &err), &err);
}

/* ---- diff and apply ---- */

void serve_diff(ServeCtx *c) {
        _cleanup_free_ char *text = NULL;
        hutch_error err = {};
        json_t *changes;
        int r;

        r = hutch_diff_json(c->param, &text, &err);
        if (r < 0) {
                serve_reply_api_error(c->req, r, &err, NULL);
                return;
        }
        changes = json_loads(text, 0, NULL);
        if (!json_is_array(changes)) {
                json_decref(changes);
                serve_reply_errno(c->req, EPROTO, NULL, "the diff is not a JSON array");
                return;
        }
        serve_reply_json(c->req, 200, json_pack("{s:o}", "changes", changes));
}

typedef struct ApplyArgs {
        char **paths;
        bool force;
} ApplyArgs;

static const ServeField apply_fields[] = {
        {"paths", SERVE_FIELD_STRV, offsetof(ApplyArgs, paths), false},
        {"force", SERVE_FIELD_BOOL, offsetof(ApplyArgs, force), false},
};

/* Writes the sandbox's workspace changes (all, or under "paths") to the
 * host folder; 409 when the host changed one of them too, unless "force". */
void serve_apply(ServeCtx *c) {
        ApplyArgs a = {};
        hutch_error err = {};
        json_t *root = NULL;
        int r;

        r = serve_body_object(c, apply_fields, ELEMENTSOF(apply_fields), &a, &root);
        if (r < 0)
                return;
        r = hutch_apply(c->param, a.paths && a.paths[0] ? a.paths : NULL, a.force, &err);
        if (r < 0)
                serve_reply_api_error(c->req, r, &err, NULL);
        else
                serve_reply_json(c->req, 200, json_pack("{s:i}", "applied", r));
        strv_free(a.paths);
        json_decref(root);
}

/* ---- the audit log ---- */

/* The last @max lines of the file's last AUDIT_READ_MAX bytes, each a JSON
 * object (others are skipped), into @arr. */
static int audit_tail(int fd, unsigned max, json_t *arr) {
        _cleanup_free_ char *text = NULL;
        struct stat st;
        off_t from;
        size_t n = 0, len;
        char *start;
        int r;

        if (fstat(fd, &st) < 0)
                return negative_errno();
        from = st.st_size > (off_t)AUDIT_READ_MAX ? st.st_size - (off_t)AUDIT_READ_MAX : 0;
        if (lseek(fd, from, SEEK_SET) < 0)
                return negative_errno();
        r = read_full_fd(fd, AUDIT_READ_MAX, &text, &len);
        if (r < 0)
                return r;
        start = text;
        if (from > 0) {
                /* The first line is cut: skip it. */
                char *nl = memchr(text, '\n', len);

                start = nl ? nl + 1 : text + len;
        }
        /* Back from the end to the start of the last @max lines. */
        for (char *p = text + len; p > start; p--)
                if (p[-1] == '\n' && p != text + len && ++n == max) {
                        start = p;
                        break;
                }
        for (char *line = start, *next; line < text + len; line = next) {
                json_t *j;

                next = memchr(line, '\n', (size_t)(text + len - line));
                if (!next)
                        next = text + len;
                j = json_loadb(line, (size_t)(next - line), 0, NULL);
                if (json_is_object(j))
                        (void)json_array_append_new(arr, j);
                else
                        json_decref(j);
                if (next < text + len)
                        next++;
        }
        return 0;
}

int serve_jsonl_tail(int fd, unsigned max, json_t *arr) {
        return audit_tail(fd, max, arr);
}

/* The network audit log (network allow): the proxy's decisions, one JSON
 * object per entry, oldest first; ?limit (default 1000) of the newest. */
void serve_audit(ServeCtx *c) {
        _cleanup_free_ char *name = NULL, *path = NULL;
        _cleanup_close_ int fd = -EBADF;
        const char *limit_s = serve_query(c, "limit");
        uint32_t limit = AUDIT_LIMIT_DEFAULT;
        HutchError err = {};
        json_t *arr;
        int r;

        if (limit_s &&
            (safe_atou32(limit_s, &limit) < 0 || limit == 0 || limit > AUDIT_LIMIT_MAX)) {
                serve_reply_status(c->req, 400, "invalid_argument", NULL,
                                   "invalid limit '%.16s' (1 to %u)", limit_s, AUDIT_LIMIT_MAX);
                return;
        }
        /* Not in the C API: the log's path comes from hutch-ext.h. */
        r = hutch_ext_sandbox_file(c->param, "audit.jsonl", &name, &path, &err);
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
        r = fd >= 0 ? audit_tail(fd, limit, arr) : errno == ENOENT ? 0 : negative_errno();
        if (r < 0) {
                json_decref(arr);
                serve_reply_errno(c->req, -r, NULL, "cannot read the audit log: %s", strerror(-r));
                return;
        }
        serve_reply_json(c->req, 200, json_pack("{s:o}", "entries", arr));
}

/* ---- published ports ---- */

void serve_sandbox_ports(ServeCtx *c) {
        _cleanup_free_ char *json = NULL;
        hutch_error err = {};
        bool running = false;
        json_t *ports;
        int r;

        r = hutch_ports(c->param, &json, &running, &err);
        if (r < 0) {
                serve_reply_api_error(c->req, r, &err, NULL);
                return;
        }
        ports = json_loads(json, 0, NULL);
        if (!ports) {
                serve_reply_errno(c->req, ENOMEM, NULL, "out of memory");
                return;
        }
        serve_reply_json(c->req, 200, json_pack("{s:b,s:o}", "running", running, "ports", ports));
}
