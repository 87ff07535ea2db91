/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* envd: routing, the REST routes, the filesystem service and the Connect
 * framing of answers (e2b-envd.h, docs/e2b-envd.md). */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "api/hutch-ext.h"
#include "base64.h"
#include "e2b-envd-form.h"
#include "e2b-envd.h"
#include "e2b-internal.h"
#include "hutch.h"
#include "json-fields.h"
#include "macro.h"
#include "strv.h"

/* ---- answers ---- */

static int envd_unary_error(E2bRequest *req, ConnectCode code, const char *message) {
        _cleanup_free_ char *body = connect_error_json(code, message);

        if (!body)
                return -ENOMEM;
        return e2b_reply(req, connect_code_to_http_status(code), "application/json", body,
                         strlen(body));
}

int envd_reply_message(EnvdCall *call, json_t *obj) {
        _cleanup_free_ char *text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;

        json_decref(obj);
        if (!text)
                return envd_unary_error(call->req, CONNECT_RESOURCE_EXHAUSTED, "out of memory");
        return e2b_reply(call->req, 200, "application/json", text, strlen(text));
}

int envd_reply_code(EnvdCall *call, ConnectCode code, const char *fmt, ...) {
        char msg[512];
        va_list ap;

        va_start(ap, fmt);
        (void)vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (call->stream && !call->req->answered) {
                int r = envd_stream_begin(call);

                if (r >= 0)
                        r = envd_stream_end(call, code, msg);
                return r < 0 ? r : 0;
        }
        return envd_unary_error(call->req, code, msg);
}

int envd_reply_hutch_error(EnvdCall *call, int r, const hutch_error *err) {
        return envd_reply_code(call, connect_code_from_errno(-r), "%s",
                               err && err->message[0] ? err->message : strerror(-r));
}

static const char stream_head[] = "HTTP/1.1 200 OK\r\n"
                                  "Content-Type: application/connect+json\r\n"
                                  "Transfer-Encoding: chunked\r\n"
                                  "Cache-Control: no-store\r\n"
                                  "\r\n";

/* A piece of a chunk (write_chunk()). */
typedef struct ChunkPart {
        const void *p;
        size_t len;
} ChunkPart;

/* One chunk of the chunked body holding the @n @parts in turn, then @tail
 * (the body's last chunk, or ""), in one write (small writes in a row
 * would wait on Nagle's algorithm and the peer's delayed ACK: tens of ms
 * per message; and each segment wakes the client once more), after the
 * stream's head when it is pending. */
static int write_chunk(EnvdCall *call, const ChunkPart *parts, size_t n, const char *tail) {
        _cleanup_free_ char *buf = NULL;
        size_t total = 0, data = 0, extra = sizeof(stream_head) + 48;
        int k, r;

        for (size_t i = 0; i < n; i++) {
                if (parts[i].len > SIZE_MAX - extra - data)
                        return -EMSGSIZE;
                data += parts[i].len;
        }
        buf = malloc(data + extra);
        if (!buf)
                return -ENOMEM;
        if (call->head_pending) {
                memcpy(buf, stream_head, sizeof(stream_head) - 1);
                total = sizeof(stream_head) - 1;
        }
        k = snprintf(buf + total, 32, "%zx\r\n", data);
        total += (size_t)k;
        for (size_t i = 0; i < n; i++) {
                if (parts[i].len > 0)
                        memcpy(buf + total, parts[i].p, parts[i].len);
                total += parts[i].len;
        }
        memcpy(buf + total, "\r\n", 2);
        total += 2;
        assert(strlen(tail) <= 8);
        memcpy(buf + total, tail, strlen(tail));
        total += strlen(tail);
        r = e2b_conn_write(call->req->conn, buf, total);
        if (r >= 0)
                call->head_pending = false;
        return r;
}

static void stream_nodelay(EnvdCall *call) {
        int one = 1;

        /* Stream messages go out as they come. */
        (void)setsockopt(call->req->conn->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        call->req->answered = true;
}

int envd_stream_begin(EnvdCall *call) {
        stream_nodelay(call);
        return e2b_conn_write(call->req->conn, stream_head, sizeof(stream_head) - 1);
}

void envd_stream_begin_with_next(EnvdCall *call) {
        stream_nodelay(call);
        call->head_pending = true;
}

static int stream_frame(EnvdCall *call, uint8_t flags, const char *text, const char *tail) {
        uint8_t h[CONNECT_ENVELOPE_HEAD];
        size_t len = strlen(text);
        int r;

        r = connect_envelope_head(flags, len, h);
        if (r < 0)
                return r;
        return write_chunk(call, (const ChunkPart[]){{h, sizeof(h)}, {text, len}}, 2, tail);
}

int envd_stream_message(EnvdCall *call, json_t *obj) {
        _cleanup_free_ char *text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;

        json_decref(obj);
        if (!text)
                return -ENOMEM;
        return stream_frame(call, 0, text, "");
}

int envd_stream_end(EnvdCall *call, ConnectCode code, const char *message) {
        _cleanup_free_ char *text = connect_end_stream_json(code, message);

        if (!text)
                return -ENOMEM;
        /* The end-of-stream frame and the body's last chunk, together. */
        return stream_frame(call, CONNECT_FLAG_END_STREAM, text, "0\r\n\r\n");
}

int envd_stream_last(EnvdCall *call, json_t *obj, ConnectCode code, const char *message) {
        _cleanup_free_ char *text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
        _cleanup_free_ char *end = connect_end_stream_json(code, message);
        uint8_t h[CONNECT_ENVELOPE_HEAD], he[CONNECT_ENVELOPE_HEAD];
        int r;

        json_decref(obj);
        if (!text || !end)
                return -ENOMEM;
        r = connect_envelope_head(0, strlen(text), h);
        if (r >= 0)
                r = connect_envelope_head(CONNECT_FLAG_END_STREAM, strlen(end), he);
        if (r < 0)
                return r;
        /* Issue 20: one segment, so the client wakes once for the end of
         * a command, not once per frame. */
        return write_chunk(
                call,
                (const ChunkPart[]){
                        {h, sizeof(h)}, {text, strlen(text)}, {he, sizeof(he)}, {end, strlen(end)}},
                4, "0\r\n\r\n");
}

/* ---- requests ---- */

/* The user E2B names (the `username` parameter, else "Authorization:
 * Basic base64(user:)"): "user" or "root", the two accounts of E2B's base
 * template, or none (ENVD_USER_DEFAULT). Any other name is -EINVAL. */
static int envd_user_parse(const E2bRequest *req, const char *username, EnvdUser *ret) {
        const char *auth = e2b_request_header(req, "Authorization");
        _cleanup_free_ uint8_t *dec = NULL;
        EnvdUser from_auth = ENVD_USER_DEFAULT;
        size_t n = 0;

        if (auth) {
                if (strncasecmp(auth, "Basic ", 6) != 0)
                        return -EINVAL;
                if (base64_decode(auth + 6, strlen(auth + 6), BASE64_PAD_OPTIONAL, &dec, &n) < 0)
                        return -EINVAL;
                if (n == 5 && memcmp(dec, "user:", 5) == 0)
                        from_auth = ENVD_USER_USER;
                else if (n == 5 && memcmp(dec, "root:", 5) == 0)
                        from_auth = ENVD_USER_ROOT;
                else
                        return -EINVAL;
        }
        if (username && username[0]) {
                if (strcmp(username, "user") == 0)
                        *ret = ENVD_USER_USER;
                else if (strcmp(username, "root") == 0)
                        *ret = ENVD_USER_ROOT;
                else
                        return -EINVAL;
                return 0;
        }
        *ret = from_auth;
        return 0;
}

/* Sandbox @sandbox's policy (hutch_get_policy()) as JSON, in @ret (the
 * caller's): the one reader of it for the user checks below. */
static int sandbox_policy(const char *sandbox, json_t **ret) {
        _cleanup_free_ char *policy = NULL;
        hutch_error err = {};
        json_t *o;
        int r;

        r = hutch_get_policy(sandbox, &policy, &err);
        if (r < 0)
                return r;
        o = json_loads(policy, 0, NULL);
        if (!json_is_object(o)) {
                json_decref(o);
                return -EINVAL;
        }
        *ret = o;
        return 0;
}

int envd_user_spec(const char *sandbox, EnvdUser user, const char **ret_spec) {
        json_t *o = NULL, *image;
        bool host_base;
        int r;

        switch (user) {
        case ENVD_USER_DEFAULT:
                *ret_spec = NULL;
                return 0;
        case ENVD_USER_ROOT:
                *ret_spec = "root";
                return 0;
        case ENVD_USER_USER:
                break;
        default:
                return -EINVAL;
        }
        /* The host base has no account "user" (its /etc is the host's):
         * there the sandbox's own user is E2B's "user" (docs/e2b.md
         * "Templates"). Any image (or a snapshot of one) names it, and
         * one without it refuses the command (exit 125, naming it). */
        r = sandbox_policy(sandbox, &o);
        if (r < 0)
                return r;
        image = json_object_get(o, "image");
        host_base = !json_is_string(image) || json_string_length(image) == 0;
        json_decref(o);
        *ret_spec = host_base ? NULL : "user";
        return 0;
}

/* Resolves the request's sandbox: 0, or -ENOENT / -EACCES / -EAGAIN
 * (e2b_sandbox_lookup()), -ENOENT without the E2b-Sandbox-Id header. */
static int envd_resolve(const E2bRequest *req, E2bSandboxRef *ret) {
        const char *id = e2b_request_header(req, "E2b-Sandbox-Id");

        if (!id)
                return -ENOENT;
        return e2b_sandbox_lookup(req->srv, id, e2b_request_header(req, "X-Access-Token"), ret);
}

static ConnectCode resolve_code(int r, const char **ret_msg) {
        switch (r) {
        case -EACCES:
                *ret_msg = "the access token (X-Access-Token) is missing or wrong";
                return CONNECT_UNAUTHENTICATED;
        case -EAGAIN:
                *ret_msg = "the sandbox is paused";
                return CONNECT_UNAVAILABLE;
        case -ENOENT:
                *ret_msg = "sandbox not found";
                return CONNECT_NOT_FOUND;
        default:
                *ret_msg = strerror(-r);
                return CONNECT_INTERNAL;
        }
}

/* Reads the body the request announced (at most @max), Content-Length or
 * chunked. -E2BIG beyond @max, -EBADMSG for broken chunks. */
static int read_body(E2bRequest *req, uint64_t max, char **ret, size_t *ret_len) {
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;

        if (!req->chunked)
                return e2b_request_body(req, max, ret, ret_len);
        for (;;) {
                char line[64];
                size_t i = 0;
                uint64_t n = 0;
                int r;

                /* The chunk size line: hex digits, maybe extensions. */
                for (;;) {
                        char c;

                        r = e2b_conn_read_exact(req->conn, &c, 1);
                        if (r < 0)
                                return r;
                        if (c == '\n')
                                break;
                        if (i >= sizeof(line) - 1)
                                return -EBADMSG;
                        line[i++] = c;
                }
                line[i] = '\0';
                i = 0;
                if (envd_hexval(line[0]) < 0)
                        return -EBADMSG;
                while (envd_hexval(line[i]) >= 0) {
                        if (n > max)
                                return -E2BIG;
                        n = n << 4 | (uint64_t)envd_hexval(line[i++]);
                }
                if (n > max || len + n > max)
                        return -E2BIG;
                if (n == 0) {
                        /* Trailers (none expected) up to the empty line. */
                        for (;;) {
                                char c, prev = 0;
                                size_t k = 0;

                                do {
                                        r = e2b_conn_read_exact(req->conn, &c, 1);
                                        if (r < 0)
                                                return r;
                                        if (c != '\r' && c != '\n')
                                                k++;
                                        prev = c;
                                } while (c != '\n' && k < 8192);
                                (void)prev;
                                if (k == 0)
                                        break;
                                if (k >= 8192)
                                        return -EBADMSG;
                        }
                        break;
                }
                {
                        char *nb = realloc(buf, len + n + 1);
                        char crlf[2];

                        if (!nb)
                                return -ENOMEM;
                        buf = nb;
                        r = e2b_conn_read_exact(req->conn, buf + len, n);
                        if (r < 0)
                                return r;
                        len += n;
                        r = e2b_conn_read_exact(req->conn, crlf, 2);
                        if (r < 0)
                                return r;
                        if (crlf[0] != '\r' || crlf[1] != '\n')
                                return -EBADMSG;
                }
        }
        if (!buf) {
                buf = malloc(1);
                if (!buf)
                        return -ENOMEM;
        }
        buf[len] = '\0';
        req->body_done = true;
        *ret = TAKE_PTR(buf);
        *ret_len = len;
        return 0;
}

/* ---- entries ---- */

static const char *file_type_name(const char *type) {
        if (strcmp(type, "file") == 0)
                return "FILE_TYPE_FILE";
        if (strcmp(type, "dir") == 0)
                return "FILE_TYPE_DIRECTORY";
        if (strcmp(type, "symlink") == 0)
                return "FILE_TYPE_SYMLINK";
        return NULL; /* FILE_TYPE_UNSPECIFIED: the zero value, omitted */
}

static void permissions_string(const char *type, unsigned mode, char buf[11]) {
        static const char rwx[] = "rwxrwxrwx";

        buf[0] = strcmp(type, "dir") == 0 ? 'd' : strcmp(type, "symlink") == 0 ? 'L' : '-';
        for (int i = 0; i < 9; i++)
                buf[1 + i] = mode & (1U << (8 - i)) ? rwx[i] : '-';
        buf[10] = '\0';
}

/* An EntryInfo in proto3 JSON: zero values omitted, int64 as a string. */
static json_t *entry_json(const char *name, const char *path, const char *type, uint64_t size,
                          unsigned mode, int64_t mtime_ms) {
        const char *t = file_type_name(type);
        json_t *o = json_object();
        char perms[11], ts[40], sz[24];

        if (!o)
                return NULL;
        permissions_string(type, mode, perms);
        (void)snprintf(sz, sizeof(sz), "%" PRIu64, size);
        if ((name[0] && json_object_set_new(o, "name", json_string(name)) < 0) ||
            (t && json_object_set_new(o, "type", json_string(t)) < 0) ||
            json_object_set_new(o, "path", json_string(path)) < 0 ||
            (size && json_object_set_new(o, "size", json_string(sz)) < 0) ||
            (mode && json_object_set_new(o, "mode", json_integer(mode)) < 0) ||
            json_object_set_new(o, "permissions", json_string(perms)) < 0) {
                json_decref(o);
                return NULL;
        }
        if (connect_timestamp_format(mtime_ms / 1000 - (mtime_ms % 1000 < 0),
                                     (uint32_t)((mtime_ms % 1000 + 1000) % 1000) * 1000000U, ts,
                                     sizeof(ts)) >= 0 &&
            json_object_set_new(o, "modifiedTime", json_string(ts)) < 0) {
                json_decref(o);
                return NULL;
        }
        return o;
}

static const char *last_part(const char *path) {
        const char *s = strrchr(path, '/');

        return s && s[1] ? s + 1 : s ? path : path;
}

/* @dir + "/" + @rel (no doubled slash). */
static char *path_join(const char *dir, const char *rel) {
        size_t n = strlen(dir);
        char *s = NULL;

        if (asprintf(&s, "%s%s%s", dir, n > 0 && dir[n - 1] == '/' ? "" : "/", rel) < 0)
                return NULL;
        return s;
}

/* Stat @path in the sandbox as an EntryInfo (into @ret). */
static int stat_entry(const char *name, const char *path, json_t **ret, hutch_error *err) {
        hutch_file_info info = {};
        json_t *e;
        int r;

        r = hutch_file_stat(name, path, &info, err);
        if (r < 0)
                return r;
        e = entry_json(info.name[0] ? info.name : last_part(path), path, info.type, info.size,
                       info.mode, info.mtime_ms);
        if (!e)
                return -ENOMEM;
        *ret = e;
        return 0;
}

/* ---- filesystem.Filesystem ---- */

/* A filesystem request message, decoded by its method's table
 * (FsMethod.fields): the members it may have, each with its type. */
typedef struct FsMessage {
        const char *path, *source, *destination;
        json_t *depth; /* checked by ListDir */
        bool recursive, include_entry, allow_network_mounts;
} FsMessage;

#define FS_FIELD(name, type, member, mandatory)                                                    \
        { name, type, offsetof(FsMessage, member), mandatory }

/* The string member @key of the message into @ret, NULL when absent;
 * -EINVAL (answered) for another type or, when @mandatory, an absent or
 * empty one. */
static int msg_string(EnvdCall *call, const char *key, bool mandatory, const char **ret) {
        json_t *v = json_object_get(call->msg, key);

        *ret = NULL;
        if (!v || json_is_null(v)) {
                if (mandatory) {
                        (void)envd_reply_code(call, CONNECT_INVALID_ARGUMENT, "'%s' is required",
                                              key);
                        return -EINVAL;
                }
                return 0;
        }
        if (!json_is_string(v) || (mandatory && json_string_length(v) == 0) ||
            strlen(json_string_value(v)) != json_string_length(v)) {
                (void)envd_reply_code(call, CONNECT_INVALID_ARGUMENT,
                                      "'%s' must be a non-empty string", key);
                return -EINVAL;
        }
        *ret = json_string_value(v);
        return 0;
}

static int msg_bool(EnvdCall *call, const char *key, bool *ret) {
        json_t *v = json_object_get(call->msg, key);

        *ret = false;
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_boolean(v)) {
                (void)envd_reply_code(call, CONNECT_INVALID_ARGUMENT, "'%s' must be a boolean",
                                      key);
                return -EINVAL;
        }
        *ret = json_is_true(v);
        return 0;
}

/* Decodes the call's message by @fields into @ret: an unknown member
 * first, then each member in the table's order. 0, or -EINVAL with the
 * error answered (proto3 JSON, deny by default). */
static int fs_decode(EnvdCall *call, const JsonFieldDef *fields, size_t n, FsMessage *ret) {
        const char *bad = json_fields_unknown(call->msg, fields, n);
        int r = 0;

        *ret = (FsMessage){};
        if (bad) {
                (void)envd_reply_code(call, CONNECT_INVALID_ARGUMENT, "unknown field '%s'", bad);
                return -EINVAL;
        }
        for (size_t i = 0; r >= 0 && i < n; i++) {
                void *dst = (uint8_t *)ret + fields[i].offset;

                switch (fields[i].type) {
                case JSON_FIELD_STRING:
                        r = msg_string(call, fields[i].name, fields[i].mandatory, dst);
                        break;
                case JSON_FIELD_BOOL:
                        r = msg_bool(call, fields[i].name, dst);
                        break;
                case JSON_FIELD_ANY:
                        *(json_t **)dst = json_object_get(call->msg, fields[i].name);
                        break;
                case JSON_FIELD_STRV:
                case JSON_FIELD_U64:
                case JSON_FIELD_OBJECT:
                case JSON_FIELD_ENV:
                case JSON_FIELD_CUSTOM:
                        assert(!"an FsMessage field of another type");
                        r = -EINVAL;
                        break;
                }
        }
        return r;
}

static int fs_stat(EnvdCall *call, const FsMessage *args) {
        hutch_error err = {};
        json_t *e = NULL;
        int r;

        r = stat_entry(call->sbx.name, args->path, &e, &err);
        if (r < 0)
                return envd_reply_hutch_error(call, r, &err);
        return envd_reply_message(call, json_pack("{s:o}", "entry", e));
}

static int fs_list_dir(EnvdCall *call, const FsMessage *args) {
        hutch_file_entry *l = NULL;
        hutch_file_info info = {};
        hutch_error err = {};
        const char *path = args->path;
        json_t *arr, *d = args->depth;
        json_int_t depth = 1;
        size_t n = 0;
        int r;

        if (d && !json_is_null(d)) {
                if (!json_is_integer(d) || json_integer_value(d) < 0 || json_integer_value(d) > 64)
                        return envd_reply_code(call, CONNECT_INVALID_ARGUMENT,
                                               "'depth' must be 0 to 64");
                depth = json_integer_value(d) ? json_integer_value(d) : 1;
        }
        r = hutch_file_stat(call->sbx.name, path, &info, &err);
        if (r < 0)
                return envd_reply_hutch_error(call, r, &err);
        if (strcmp(info.type, "dir") != 0)
                return envd_reply_code(call, CONNECT_INVALID_ARGUMENT, "'%s' is not a directory",
                                       path);
        r = hutch_file_walk(call->sbx.name, path, (unsigned)depth, &l, &n, &err);
        if (r < 0)
                return envd_reply_hutch_error(call, r, &err);
        arr = json_array();
        for (size_t i = 0; arr && i < n; i++) {
                _cleanup_free_ char *full = path_join(path, l[i].path);
                json_t *e = full ? entry_json(last_part(l[i].path), full, l[i].type, l[i].size,
                                              l[i].mode, l[i].mtime_ms)
                                 : NULL;

                if (!e || json_array_append_new(arr, e) < 0) {
                        json_decref(arr);
                        arr = NULL;
                }
        }
        hutch_file_entries_free(l, n);
        if (!arr)
                return envd_reply_code(call, CONNECT_RESOURCE_EXHAUSTED, "out of memory");
        return envd_reply_message(call, json_pack("{s:o}", "entries", arr));
}

/* The image User of the image @ref names in the store, in @ret_user
 * (NULL: it has none). */
static int image_user(const char *ref, char **ret_user) {
        _cleanup_(hutch_ext_images_freep) HutchExtImages *s = NULL;
        _cleanup_(hutch_ext_image_done) HutchExtImage im = {};
        HutchError err = {};
        json_t *o, *u;
        char *user = NULL;
        int r;

        r = hutch_ext_images_open(&s, &err);
        if (r < 0)
                return r;
        r = hutch_ext_image_get(s, ref, &im, &err);
        if (r < 0)
                return r;
        if (!im.json)
                return -ENOMEM;
        o = json_loads(im.json, 0, NULL);
        if (!o)
                return -EINVAL;
        u = json_object_get(json_object_get(o, "config"), "User");
        if (json_is_string(u) && json_string_length(u) > 0) {
                user = strdup(json_string_value(u));
                if (!user) {
                        json_decref(o);
                        return -ENOMEM;
                }
        }
        json_decref(o);
        *ret_user = user;
        return 0;
}

int envd_file_owner(const char *sandbox, EnvdUser user, char **ret_spec) {
        const char *spec = NULL;
        char *owner = NULL;
        json_t *o = NULL, *v;
        int r;

        if (user != ENVD_USER_DEFAULT) {
                r = envd_user_spec(sandbox, user, &spec);
                if (r < 0)
                        return r;
                if (spec) {
                        owner = strdup(spec);
                        if (!owner)
                                return -ENOMEM;
                }
                *ret_spec = owner;
                return 0;
        }
        /* No user named: the one a command without a user runs as (the
         * sandbox's init: its policy's user, else the image's User, else
         * root), so that what a command and a file call make agree. */
        r = sandbox_policy(sandbox, &o);
        if (r < 0)
                return r;
        v = json_object_get(o, "user");
        if (json_is_string(v) && json_string_length(v) > 0)
                owner = strdup(json_string_value(v));
        else {
                v = json_object_get(o, "image");
                if (json_is_string(v) && json_string_length(v) > 0) {
                        /* SECURITY: an image that cannot be read fails the
                         * call, never makes the file root's instead. */
                        r = image_user(json_string_value(v), &owner);
                        json_decref(o);
                        if (r < 0)
                                return r;
                        *ret_spec = owner;
                        return 0;
                }
                json_decref(o);
                *ret_spec = NULL;
                return 0;
        }
        json_decref(o);
        if (!owner)
                return -ENOMEM;
        *ret_spec = owner;
        return 0;
}

/* The hutch --user spec the owner of what a file call creates is (NULL:
 * the sandbox's root), in @ret_spec; on failure the call is answered. */
static int fs_owner(EnvdCall *call, char **ret_spec) {
        int r = envd_file_owner(call->sbx.name, call->user, ret_spec);

        if (r < 0)
                (void)envd_reply_code(call, connect_code_from_errno(-r),
                                      "cannot find who owns what sandbox '%s' makes: %s",
                                      call->sbx.name, strerror(-r));
        return r;
}

static int envd_reply_core_error(EnvdCall *call, int r, const HutchError *err) {
        return envd_reply_code(call, connect_code_from_errno(err->errnum > 0 ? err->errnum : -r),
                               "%s", err->msg[0] ? err->msg : strerror(-r));
}

static int fs_make_dir(EnvdCall *call, const FsMessage *args) {
        hutch_file_info info = {};
        hutch_error err = {};
        HutchError herr = {};
        _cleanup_free_ char *owner = NULL;
        const char *path = args->path;
        json_t *e = NULL;
        int r;

        /* E2B's MakeDir makes the parents and says already_exists for an
         * existing path (the SDK's makeDir() then returns false). */
        r = hutch_file_stat(call->sbx.name, path, &info, &err);
        if (r >= 0)
                return envd_reply_code(call, CONNECT_ALREADY_EXISTS, "'%s' already exists", path);
        if (r != -ENOENT)
                return envd_reply_hutch_error(call, r, &err);
        err = (hutch_error){};
        /* What it makes is the call's user's (E2B's MakeDir as `user`). */
        if (fs_owner(call, &owner) < 0)
                return 0;
        r = hutch_ext_file_mkdir(call->sbx.name, path, 0755 | HUTCH_FILE_PARENTS, owner, &herr);
        if (r < 0)
                return envd_reply_core_error(call, r, &herr);
        r = stat_entry(call->sbx.name, path, &e, &err);
        if (r < 0)
                return envd_reply_hutch_error(call, r, &err);
        return envd_reply_message(call, json_pack("{s:o}", "entry", e));
}

static int fs_move(EnvdCall *call, const FsMessage *args) {
        hutch_error err = {};
        HutchError herr = {};
        _cleanup_free_ char *owner = NULL;
        const char *from = args->source, *to = args->destination;
        json_t *e = NULL;
        int r;

        /* The parents it makes are the call's user's. */
        if (fs_owner(call, &owner) < 0)
                return 0;
        r = hutch_ext_file_move(call->sbx.name, from, to, HUTCH_FILE_PARENTS | HUTCH_FILE_REPLACE,
                                owner, &herr);
        if (r < 0)
                return envd_reply_core_error(call, r, &herr);
        r = stat_entry(call->sbx.name, to, &e, &err);
        if (r < 0)
                return envd_reply_hutch_error(call, r, &err);
        return envd_reply_message(call, json_pack("{s:o}", "entry", e));
}

static int fs_remove(EnvdCall *call, const FsMessage *args) {
        hutch_file_entry *l = NULL;
        hutch_file_info info = {};
        hutch_error err = {};
        const char *path = args->path;
        size_t n = 0;
        int r;

        r = hutch_file_stat(call->sbx.name, path, &info, &err);
        if (r < 0)
                return envd_reply_hutch_error(call, r, &err);
        /* E2B removes a directory with what is in it: the walk is sorted
         * by path, so backwards every entry comes before its directory. */
        if (strcmp(info.type, "dir") == 0) {
                r = hutch_file_walk(call->sbx.name, path, 0, &l, &n, &err);
                if (r < 0)
                        return envd_reply_hutch_error(call, r, &err);
                for (size_t i = n; r >= 0 && i > 0; i--) {
                        _cleanup_free_ char *full = path_join(path, l[i - 1].path);

                        r = full ? hutch_file_remove(call->sbx.name, full, &err) : -ENOMEM;
                }
                hutch_file_entries_free(l, n);
                if (r < 0)
                        return envd_reply_hutch_error(call, r, &err);
        }
        r = hutch_file_remove(call->sbx.name, path, &err);
        if (r < 0)
                return envd_reply_hutch_error(call, r, &err);
        return envd_reply_message(call, json_object());
}

/* ---- WatchDir: by polling ---- */

/* How often WatchDir walks the tree: the latency of its events
 * (docs/e2b-envd.md "Watching"). */
#define WATCH_INTERVAL_MS 200
/* A watch of more entries than this ends with resource_exhausted. */
#define WATCH_ENTRIES_MAX 100000

static int entry_cmp(const void *a, const void *b) {
        return strcmp(((const hutch_file_entry *)a)->path, ((const hutch_file_entry *)b)->path);
}

static int watch_event(EnvdCall *call, const char *name, const char *type, bool include_entry,
                       const char *dir, const hutch_file_entry *e) {
        json_t *ev = json_pack("{s:s,s:s}", "name", name, "type", type);

        if (!ev)
                return -ENOMEM;
        if (include_entry && e) {
                _cleanup_free_ char *full = path_join(dir, e->path);
                json_t *en = full ? entry_json(last_part(e->path), full, e->type, e->size, e->mode,
                                               e->mtime_ms)
                                  : NULL;

                if (!en || json_object_set_new(ev, "entry", en) < 0) {
                        json_decref(ev);
                        return -ENOMEM;
                }
        }
        return envd_stream_message(call, json_pack("{s:o}", "filesystem", ev));
}

/* Compares the walks @a (before) and @b (after), both sorted by path,
 * and sends an event per difference. */
static int watch_diff(EnvdCall *call, const char *dir, bool include_entry,
                      const hutch_file_entry *a, size_t na, const hutch_file_entry *b, size_t nb) {
        size_t i = 0, j = 0;
        int r = 0;

        while (r >= 0 && (i < na || j < nb)) {
                int c = i >= na ? 1 : j >= nb ? -1 : strcmp(a[i].path, b[j].path);

                if (c < 0) {
                        r = watch_event(call, a[i].path, "EVENT_TYPE_REMOVE", false, dir, NULL);
                        i++;
                } else if (c > 0) {
                        r = watch_event(call, b[j].path, "EVENT_TYPE_CREATE", include_entry, dir,
                                        &b[j]);
                        j++;
                } else {
                        if (a[i].size != b[j].size || a[i].mtime_ms != b[j].mtime_ms ||
                            strcmp(a[i].type, b[j].type) != 0)
                                r = watch_event(call, b[j].path, "EVENT_TYPE_WRITE", include_entry,
                                                dir, &b[j]);
                        else if (a[i].mode != b[j].mode)
                                r = watch_event(call, b[j].path, "EVENT_TYPE_CHMOD", include_entry,
                                                dir, &b[j]);
                        i++;
                        j++;
                }
        }
        return r;
}

/* Whether the watched sandbox was paused or killed. Asked under its table
 * lock, which a pause or kill holds from before the stop until its record
 * says so: a walk that failed because the sandbox was stopping then sees
 * the end state, not the half-stopped one (whose errors would reach the
 * client as some other code). */
static bool sandbox_went(EnvdCall *call) {
        const char *id = e2b_request_header(call->req, "E2b-Sandbox-Id");
        _cleanup_close_ int lock = id ? e2b_table_lock(call->req->srv, id) : -EBADF;
        E2bSandboxRef now = {};

        return envd_resolve(call->req, &now) < 0 || strcmp(now.name, call->sbx.name) != 0;
}

static int fs_watch_dir(EnvdCall *call, const FsMessage *args) {
        hutch_file_entry *prev = NULL;
        hutch_file_info info = {};
        hutch_error err = {};
        /* allowNetworkMounts is accepted: polling works on any mount. */
        bool recursive = args->recursive, include_entry = args->include_entry;
        const char *path = args->path;
        struct timespec start;
        uint64_t waited = 0, since_ping = 0;
        size_t nprev = 0;
        int r;

        (void)clock_gettime(CLOCK_MONOTONIC, &start);
        r = hutch_file_stat(call->sbx.name, path, &info, &err);
        if (r >= 0 && strcmp(info.type, "dir") != 0)
                r = -ENOTDIR;
        if (r >= 0)
                r = hutch_file_walk(call->sbx.name, path, recursive ? 0 : 1, &prev, &nprev, &err);
        if (r < 0) {
                ConnectCode code = connect_code_from_errno(-r);
                const char *m = err.message[0] ? err.message : strerror(-r);

                if (envd_stream_begin(call) >= 0)
                        (void)envd_stream_end(call, code, m);
                return 1;
        }
        qsort(prev, nprev, sizeof(*prev), entry_cmp);
        r = envd_stream_begin(call);
        if (r >= 0)
                r = envd_stream_message(call, json_pack("{s:{}}", "start"));
        while (r >= 0) {
                hutch_file_entry *cur = NULL;
                E2bSandboxRef now_sbx = {};
                struct pollfd p = {.fd = call->req->conn->fd, .events = POLLIN | POLLRDHUP};
                size_t ncur = 0;

                /* The client going away ends the watch; so does its deadline. */
                if (poll(&p, 1, WATCH_INTERVAL_MS) != 0)
                        break;
                waited += WATCH_INTERVAL_MS;
                since_ping += WATCH_INTERVAL_MS;
                if (call->timeout_ms && waited >= call->timeout_ms) {
                        r = envd_stream_end(call, CONNECT_DEADLINE_EXCEEDED,
                                            "the watch's timeout passed");
                        break;
                }
                /* The file calls start a stopped sandbox on demand: one
                 * paused or killed meanwhile ends the watch instead. */
                if (envd_resolve(call->req, &now_sbx) < 0 ||
                    strcmp(now_sbx.name, call->sbx.name) != 0) {
                        (void)envd_stream_end(call, CONNECT_UNAVAILABLE,
                                              "the sandbox was paused or killed");
                        break;
                }
                err = (hutch_error){};
                r = hutch_file_walk(call->sbx.name, path, recursive ? 0 : 1, &cur, &ncur, &err);
                if (r < 0 && sandbox_went(call)) {
                        /* Paused or killed during the walk. */
                        (void)envd_stream_end(call, CONNECT_UNAVAILABLE,
                                              "the sandbox was paused or killed");
                        break;
                }
                if (r < 0) {
                        (void)envd_stream_end(call, connect_code_from_errno(-r),
                                              err.message[0] ? err.message : strerror(-r));
                        break;
                }
                if (ncur > WATCH_ENTRIES_MAX) {
                        hutch_file_entries_free(cur, ncur);
                        (void)envd_stream_end(call, CONNECT_RESOURCE_EXHAUSTED,
                                              "too many entries to watch");
                        break;
                }
                qsort(cur, ncur, sizeof(*cur), entry_cmp);
                r = watch_diff(call, path, include_entry, prev, nprev, cur, ncur);
                hutch_file_entries_free(prev, nprev);
                prev = cur;
                nprev = ncur;
                if (r >= 0 && since_ping >= 30000) {
                        since_ping = 0;
                        r = envd_stream_message(call, json_pack("{s:{}}", "keepalive"));
                }
        }
        hutch_file_entries_free(prev, nprev);
        return 1;
}

/* The filesystem service's methods: each one's message and handler.
 * The watcher trio (CreateWatcher, ...) is not served: the SDK does not
 * call it (docs/e2b-envd.md). */
static const JsonFieldDef fs_path_fields[] = {
        FS_FIELD("path", JSON_FIELD_STRING, path, true),
};
static const JsonFieldDef fs_list_dir_fields[] = {
        FS_FIELD("path", JSON_FIELD_STRING, path, true),
        FS_FIELD("depth", JSON_FIELD_ANY, depth, false),
};
static const JsonFieldDef fs_move_fields[] = {
        FS_FIELD("source", JSON_FIELD_STRING, source, true),
        FS_FIELD("destination", JSON_FIELD_STRING, destination, true),
};
static const JsonFieldDef fs_watch_dir_fields[] = {
        FS_FIELD("path", JSON_FIELD_STRING, path, true),
        FS_FIELD("recursive", JSON_FIELD_BOOL, recursive, false),
        FS_FIELD("includeEntry", JSON_FIELD_BOOL, include_entry, false),
        FS_FIELD("allowNetworkMounts", JSON_FIELD_BOOL, allow_network_mounts, false),
};

typedef struct FsMethod {
        const char *name;
        bool stream;
        const JsonFieldDef *fields;
        size_t n_fields;
        int (*handle)(EnvdCall *call, const FsMessage *args);
} FsMethod;

static const FsMethod fs_methods[] = {
        {"Stat", false, fs_path_fields, ELEMENTSOF(fs_path_fields), fs_stat},
        {"ListDir", false, fs_list_dir_fields, ELEMENTSOF(fs_list_dir_fields), fs_list_dir},
        {"MakeDir", false, fs_path_fields, ELEMENTSOF(fs_path_fields), fs_make_dir},
        {"Move", false, fs_move_fields, ELEMENTSOF(fs_move_fields), fs_move},
        {"Remove", false, fs_path_fields, ELEMENTSOF(fs_path_fields), fs_remove},
        {"WatchDir", true, fs_watch_dir_fields, ELEMENTSOF(fs_watch_dir_fields), fs_watch_dir},
};

static const FsMethod *fs_method_find(const char *method) {
        for (size_t i = 0; i < ELEMENTSOF(fs_methods); i++)
                if (strcmp(fs_methods[i].name, method) == 0)
                        return &fs_methods[i];
        return NULL;
}

static int filesystem_call(EnvdCall *call, const char *method) {
        const FsMethod *fm = fs_method_find(method);
        FsMessage m;

        if (!fm)
                return -ENOENT;
        if (fs_decode(call, fm->fields, fm->n_fields, &m) < 0)
                return fm->stream ? 1 : 0;
        return fm->handle(call, &m);
}

/* 1 for a server stream, 0 for unary, -ENOENT for an unknown method. */
static int filesystem_method_shape(const char *method) {
        const FsMethod *fm = fs_method_find(method);

        return fm ? fm->stream : -ENOENT;
}

/* ---- Connect calls ---- */

static int connect_call(E2bRequest *req, const char *service, const char *method) {
        _cleanup_free_ char *body = NULL;
        const uint8_t *msg = NULL;
        const char *why = NULL;
        EnvdCall call = {.req = req};
        json_error_t jerr;
        size_t len = 0, mlen = 0;
        ConnectCode code;
        bool stream;
        int shape, r;

        shape = strcmp(service, "process.Process") == 0 ? envd_process_method_shape(method)
                                                        : filesystem_method_shape(method);
        if (shape < 0)
                return envd_unary_error(req, CONNECT_UNIMPLEMENTED, "unknown method") < 0 ? -EIO
                                                                                          : 1;
        stream = shape == 1;
        call.stream = stream;
        if (!connect_content_type_ok(e2b_request_header(req, "Content-Type"),
                                     stream ? CONNECT_SHAPE_STREAM : CONNECT_SHAPE_UNARY)) {
                /* The spec: 415, so a client can tell the codec is wrong. */
                r = e2b_reply(req, 415, NULL, NULL, 0);
                return r < 0 ? r : 1;
        }
        if (connect_timeout_parse(e2b_request_header(req, "Connect-Timeout-Ms"), &call.timeout_ms) <
            0)
                return envd_unary_error(req, CONNECT_INVALID_ARGUMENT,
                                        "malformed Connect-Timeout-Ms") < 0
                               ? -EIO
                               : 1;
        r = read_body(req, CONNECT_MESSAGE_MAX + (stream ? CONNECT_ENVELOPE_HEAD : 0), &body, &len);
        if (r == -E2BIG)
                return envd_unary_error(req, CONNECT_RESOURCE_EXHAUSTED,
                                        "the message is larger than 4 MiB") < 0
                               ? -EIO
                               : 1;
        if (r < 0)
                return r;
        if (stream) {
                r = connect_stream_request((const uint8_t *)body, len, CONNECT_MESSAGE_MAX, &msg,
                                           &mlen);
                if (r == -EMSGSIZE)
                        return envd_unary_error(req, CONNECT_RESOURCE_EXHAUSTED,
                                                "the message is larger than 4 MiB") < 0
                                       ? -EIO
                                       : 0;
                if (r < 0)
                        return envd_unary_error(req, CONNECT_INVALID_ARGUMENT,
                                                "malformed envelope") < 0
                                       ? -EIO
                                       : 0;
        } else {
                msg = (const uint8_t *)body;
                mlen = len;
        }
        call.msg = json_loadb((const char *)msg, mlen, JSON_REJECT_DUPLICATES, &jerr);
        if (!json_is_object(call.msg)) {
                json_decref(call.msg);
                return envd_unary_error(req, CONNECT_INVALID_ARGUMENT,
                                        "the message is not a JSON object") < 0
                               ? -EIO
                               : 0;
        }
        r = envd_resolve(req, &call.sbx);
        if (r < 0) {
                code = resolve_code(r, &why);
                json_decref(call.msg);
                if (stream) {
                        r = envd_stream_begin(&call);
                        if (r >= 0)
                                r = envd_stream_end(&call, code, why);
                        return r < 0 ? r : 0;
                }
                return envd_unary_error(req, code, why) < 0 ? -EIO : 0;
        }
        if (envd_user_parse(req, NULL, &call.user) < 0) {
                json_decref(call.msg);
                why = "unknown user (E2B's base template has 'user' and 'root')";
                if (stream) {
                        r = envd_stream_begin(&call);
                        if (r >= 0)
                                r = envd_stream_end(&call, CONNECT_INVALID_ARGUMENT, why);
                        return r < 0 ? r : 0;
                }
                return envd_unary_error(req, CONNECT_INVALID_ARGUMENT, why) < 0 ? -EIO : 0;
        }
        if (strcmp(service, "process.Process") == 0)
                r = envd_process_call(&call, method);
        else
                r = filesystem_call(&call, method);
        json_decref(call.msg);
        return r < 0 ? r : 0;
}

/* ---- REST ---- */

static int rest_error(E2bRequest *req, int status, const char *msg) {
        int r = e2b_reply_error(req, status, "%s", msg);

        return r < 0 ? r : 0;
}

/* The sandbox of a /files request: by header, or by its signature. */
static int files_resolve(E2bRequest *req, const char *op, const char *path, const char *user,
                         E2bSandboxRef *ret) {
        _cleanup_free_ char *sig = NULL, *exp = NULL;
        uint64_t expiration = 0;
        int r;

        if (e2b_request_header(req, "E2b-Sandbox-Id") && e2b_request_header(req, "X-Access-Token"))
                return envd_resolve(req, ret);
        r = envd_query_get(req->query, "signature", &sig);
        if (r < 0)
                return r;
        if (!sig)
                return envd_resolve(req, ret);
        r = envd_query_get(req->query, "signature_expiration", &exp);
        if (r < 0)
                return r;
        if (exp) {
                expiration = 0;
                for (const char *p = exp; *p; p++) {
                        if (*p < '0' || *p > '9' || expiration > UINT64_MAX / 10 - 10)
                                return -EACCES;
                        expiration = expiration * 10 + (uint64_t)(*p - '0');
                }
                if (!exp[0])
                        return -EACCES;
        }
        return e2b_sandbox_lookup_signature(req->srv, path, op, user ? user : "", sig, expiration,
                                            ret);
}

static int files_status(int r) {
        switch (r) {
        case -EACCES:
                return 401;
        case -EAGAIN:
                return 502;
        case -ENOENT:
                return 404;
        case -EINVAL:
        case -ENOTDIR:
        case -EISDIR:
                return 400;
        case -EFBIG:
        case -E2BIG:
                return 413;
        case -ENOSPC:
        case -EDQUOT:
                return 507;
        case -EPERM:
                return 403;
        default:
                return 500;
        }
}

static int files_get(E2bRequest *req) {
        _cleanup_free_ char *path = NULL, *user = NULL, *data = NULL, *disp = NULL;
        E2bSandboxRef sbx = {};
        EnvdUser euser = ENVD_USER_DEFAULT;
        hutch_error err = {};
        size_t len = 0;
        int r;

        if (envd_query_get(req->query, "path", &path) < 0 ||
            envd_query_get(req->query, "username", &user) < 0)
                return rest_error(req, 400, "malformed query");
        if (!path || !path[0])
                return rest_error(req, 400, "'path' is required");
        if (envd_user_parse(req, user, &euser) < 0)
                return rest_error(req, 400,
                                  "unknown user (E2B's base template has 'user' and "
                                  "'root')");
        r = files_resolve(req, "read", path, user, &sbx);
        if (r < 0)
                return rest_error(req, r == -ENOENT ? 404 : files_status(r),
                                  r == -EACCES   ? "the access token or signature is wrong"
                                  : r == -EAGAIN ? "the sandbox is paused"
                                                 : "sandbox not found");
        r = hutch_file_read(sbx.name, path, ENVD_FILE_MAX, &data, &len, &err);
        if (r < 0)
                return rest_error(req, files_status(r),
                                  err.message[0] ? err.message : strerror(-r));
        if (asprintf(&disp, "Content-Disposition: attachment; filename=\"%s\"", last_part(path)) <
            0)
                disp = NULL;
        /* A name with a quote or a control character gets no header. */
        if (disp && strpbrk(last_part(path), "\"\\\r\n") == NULL)
                req->extra_header = disp;
        r = e2b_reply(req, 200, "application/octet-stream", data, len);
        req->extra_header = NULL;
        return r < 0 ? r : 0;
}

static int files_post(E2bRequest *req) {
        _cleanup_free_ char *path = NULL, *user = NULL, *body = NULL, *boundary = NULL;
        _cleanup_free_ EnvdFormPart *parts = NULL;
        const char *ct = e2b_request_header(req, "Content-Type");
        const char *enc = e2b_request_header(req, "Content-Encoding");
        E2bSandboxRef sbx = {};
        EnvdUser euser = ENVD_USER_DEFAULT;
        HutchError err = {};
        _cleanup_free_ char *owner = NULL;
        json_t *arr = NULL;
        size_t len = 0, n = 0;
        int r;

        if (envd_query_get(req->query, "path", &path) < 0 ||
            envd_query_get(req->query, "username", &user) < 0)
                return rest_error(req, 400, "malformed query");
        if (envd_user_parse(req, user, &euser) < 0)
                return rest_error(req, 400,
                                  "unknown user (E2B's base template has 'user' and "
                                  "'root')");
        if (enc && strcasecmp(enc, "identity") != 0)
                return rest_error(req, 415, "Content-Encoding is not supported (only identity)");
        /* File metadata (X-Metadata-* headers, user.* xattrs in E2B) is not
         * kept: refused rather than dropped (docs/e2b-envd.md). */
        for (size_t i = 0; i < req->n_headers; i++)
                if (strncasecmp(req->headers[i].name, "X-Metadata-", 11) == 0)
                        return rest_error(req, 501, "file metadata is not supported");
        r = files_resolve(req, "write", path ? path : "", user, &sbx);
        if (r < 0)
                return rest_error(req, r == -ENOENT ? 404 : files_status(r),
                                  r == -EACCES   ? "the access token or signature is wrong"
                                  : r == -EAGAIN ? "the sandbox is paused"
                                                 : "sandbox not found");
        /* The files written (and the parents made) are the user's. */
        r = envd_file_owner(sbx.name, euser, &owner);
        if (r < 0)
                return rest_error(req, 500, "cannot find who owns what the sandbox makes");
        r = read_body(req, ENVD_FILE_MAX + (64U << 10), &body, &len);
        if (r == -E2BIG)
                return rest_error(req, 413, "the upload is larger than 256 MiB");
        if (r < 0)
                return r;
        parts = calloc(ENVD_FORM_PARTS_MAX, sizeof(EnvdFormPart));
        if (!parts)
                return -ENOMEM;
        if (ct && strncasecmp(ct, "application/octet-stream", 24) == 0) {
                if (!path || !path[0])
                        return rest_error(req, 400, "'path' is required");
                parts[0] = (EnvdFormPart){.filename = strdup(path), .data = body, .len = len};
                if (!parts[0].filename)
                        return -ENOMEM;
                n = 1;
        } else if (ct && envd_form_boundary(ct, &boundary) == 0) {
                r = envd_form_parse(body, len, boundary, parts, &n);
                if (r < 0) {
                        for (size_t i = 0; i < ENVD_FORM_PARTS_MAX; i++)
                                free(parts[i].filename);
                        return rest_error(req, 400, "malformed multipart/form-data body");
                }
        } else
                return rest_error(
                        req, 415,
                        "the body must be multipart/form-data or application/octet-stream");
        arr = json_array();
        for (size_t i = 0; r >= 0 && i < n; i++) {
                /* With ?path=, one file goes there; else each part's name. */
                const char *dest = path && path[0] && n == 1 ? path : parts[i].filename;

                if (!dest || !dest[0]) {
                        r = -EINVAL;
                        break;
                }
                err = (HutchError){};
                if (ENVD_FILE_MAX < parts[i].len)
                        r = -EFBIG;
                else
                        r = hutch_ext_file_write(sbx.name, dest, parts[i].data, parts[i].len,
                                                 0644 | HUTCH_FILE_PARENTS, owner, &err);
                if (r >= 0 && arr)
                        (void)json_array_append_new(arr, json_pack("{s:s,s:s,s:s}", "name",
                                                                   last_part(dest), "type", "file",
                                                                   "path", dest));
        }
        for (size_t i = 0; i < n; i++)
                free(parts[i].filename);
        if (r < 0) {
                json_decref(arr);
                return rest_error(req, files_status(err.errnum > 0 ? -err.errnum : r),
                                  err.msg[0] ? err.msg : strerror(-r));
        }
        r = e2b_reply_json(req, 200, arr);
        return r < 0 ? r : 0;
}

static int health(E2bRequest *req) {
        E2bSandboxRef sbx = {};
        int r;

        /* 204 for a running sandbox; 502 for a paused, killed or unknown
         * one, as E2B's proxy answers (the SDK's checkSandboxHealth()). */
        r = envd_resolve(req, &sbx);
        if (r == -EACCES)
                return rest_error(req, 401, "the access token (X-Access-Token) is wrong");
        if (r < 0)
                return rest_error(req, 502,
                                  r == -EAGAIN ? "the sandbox is paused"
                                               : "the sandbox is not running");
        r = e2b_reply(req, 204, NULL, NULL, 0);
        return r < 0 ? r : 0;
}

int e2b_envd_handle(E2bRequest *req) {
        const char *p = req->path;
        int r;

        if (strcmp(p, "/health") == 0) {
                if (strcmp(req->method, "GET") != 0)
                        return rest_error(req, 405, "only GET");
                r = health(req);
        } else if (strcmp(p, "/files") == 0) {
                if (strcmp(req->method, "GET") == 0)
                        r = files_get(req);
                else if (strcmp(req->method, "POST") == 0)
                        r = files_post(req);
                else
                        r = rest_error(req, 405, "only GET and POST");
        } else if (strncmp(p, "/process.Process/", 17) == 0 ||
                   strncmp(p, "/filesystem.Filesystem/", 23) == 0) {
                bool proc = p[1] == 'p';
                const char *method = p + (proc ? 17 : 23);

                if (strcmp(req->method, "POST") != 0) {
                        r = envd_unary_error(req, CONNECT_UNIMPLEMENTED, "only POST");
                        r = r < 0 ? r : 1;
                } else
                        r = connect_call(req, proc ? "process.Process" : "filesystem.Filesystem",
                                         method);
        } else {
                r = envd_unary_error(req, CONNECT_NOT_FOUND, "no such route");
                r = r < 0 ? r : 0;
        }
        /* A body left unread (an error answered early) ends the connection. */
        if (r == 0 && !req->body_done && (req->body_len > 0 || req->chunked))
                r = 1;
        return r;
}
