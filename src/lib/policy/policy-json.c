/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "fd-util.h"
#include "parse-util.h"
#include "policy/policy-internal.h"
#include "policy/policy.h"
#include "strv.h"

/* The JSON policy document (docs/policy.md), decoded table by table: each
 * object has a static table of its fields, and json_dispatch_object() walks
 * the object's members in document order, refusing unknown ones. Errors
 * carry the JSON pointer of the offending member; since jansson keeps no
 * positions, json_locate() finds its line in the text afterwards. */

/* jansson enforces JSON_PARSER_MAX_DEPTH while parsing; the locator only
 * ever sees text jansson accepted, this bounds its recursion regardless. */
#define JSON_LOCATE_MAX_DEPTH 4096

typedef enum JsonTypeMask {
        JT_OBJECT = 1 << 0,
        JT_ARRAY = 1 << 1,
        JT_STRING = 1 << 2,
        JT_INTEGER = 1 << 3,
        JT_REAL = 1 << 4,
        JT_BOOLEAN = 1 << 5,
        JT_NULL = 1 << 6,
} JsonTypeMask;

typedef enum JsonFieldFlags {
        JSON_MANDATORY = 1 << 0,
} JsonFieldFlags;

typedef struct JsonCtx {
        char *pointer; /* the member being decoded, as a JSON pointer */
        size_t pointer_len;
        size_t pointer_alloc;
        bool failed;       /* the first error is kept, later ones dropped */
        bool err_at_key;   /* the error is about the key, not the value */
        char *err_pointer; /* where the first error happened */
        HutchError err;    /* its message, without the pointer */
} JsonCtx;

typedef struct JsonField JsonField;

/* Decodes @v (already checked against @f->types) into @userdata. */
typedef int (*JsonDispatch)(JsonCtx *c, const JsonField *f, json_t *v, void *userdata);
typedef int (*PolicyStringSetter)(Policy *p, const char *s, HutchError *reterr);

struct JsonField {
        const char *name;
        unsigned types; /* JsonTypeMask of the accepted JSON types */
        JsonDispatch dispatch;
        size_t offset;             /* of the destination in @userdata (generic dispatchers) */
        PolicyStringSetter setter; /* for json_dispatch_setter() */
        unsigned flags;            /* JsonFieldFlags */
};

/* The decoded members of the nested objects, borrowed from the json_t. */
typedef struct JsonWorkspace {
        const char *path;
        WorkspaceMode mode;
} JsonWorkspace;

typedef struct JsonBind {
        const char *source;
        const char *target;
        bool read_only;
} JsonBind;

typedef struct JsonTmpfs {
        const char *path;
        uint64_t size;
} JsonTmpfs;

static void json_ctx_done(JsonCtx *c) {
        free(c->pointer);
        free(c->err_pointer);
}

/* Appends one reference token to the pointer, escaped as RFC 6901 says
 * ('~' as "~0", '/' as "~1"). Returns the previous length for
 * json_ctx_pop(), or -ENOMEM. */
static int json_ctx_push(JsonCtx *c, const char *token) {
        size_t need = c->pointer_len + 2 + 2 * strlen(token);
        size_t saved = c->pointer_len;

        if (need > c->pointer_alloc) {
                size_t alloc = MAX(need, 2 * c->pointer_alloc);
                char *n = realloc(c->pointer, alloc);

                if (!n)
                        return -ENOMEM;
                c->pointer = n;
                c->pointer_alloc = alloc;
        }
        c->pointer[c->pointer_len++] = '/';
        for (const char *t = token; *t; t++) {
                if (*t == '~' || *t == '/') {
                        c->pointer[c->pointer_len++] = '~';
                        c->pointer[c->pointer_len++] = *t == '~' ? '0' : '1';
                } else
                        c->pointer[c->pointer_len++] = *t;
        }
        c->pointer[c->pointer_len] = '\0';
        return (int)MIN(saved, (size_t)INT32_MAX);
}

static int json_ctx_push_index(JsonCtx *c, size_t i) {
        char buf[32];

        (void)snprintf(buf, sizeof(buf), "%zu", i);
        return json_ctx_push(c, buf);
}

static void json_ctx_pop(JsonCtx *c, int saved) {
        c->pointer_len = (size_t)saved;
        if (c->pointer)
                c->pointer[c->pointer_len] = '\0';
}

static int json_ctx_vfail(JsonCtx *c, int errnum, bool at_key, const char *fmt, va_list ap)
        _printf_(4, 0);
static int json_ctx_vfail(JsonCtx *c, int errnum, bool at_key, const char *fmt, va_list ap) {
        if (c->failed)
                return -errnum;
        c->failed = true;
        c->err_at_key = at_key;
        c->err = (HutchError){.errnum = errnum};
        (void)vsnprintf(c->err.msg, sizeof(c->err.msg), fmt, ap);
        c->err_pointer = strdup(c->pointer_len > 0 ? c->pointer : "");
        return -errnum;
}

static int json_ctx_fail(JsonCtx *c, int errnum, const char *fmt, ...) _printf_(3, 4);
static int json_ctx_fail(JsonCtx *c, int errnum, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = json_ctx_vfail(c, errnum, false, fmt, ap);
        va_end(ap);
        return r;
}

static int json_ctx_fail_key(JsonCtx *c, int errnum, const char *fmt, ...) _printf_(3, 4);
static int json_ctx_fail_key(JsonCtx *c, int errnum, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = json_ctx_vfail(c, errnum, true, fmt, ap);
        va_end(ap);
        return r;
}

/* Records the error @r that a policy function described in @e, at the
 * current pointer. */
static int json_ctx_fail_from(JsonCtx *c, int r, const HutchError *e) {
        if (e->errnum != 0 && e->msg[0] != '\0')
                return json_ctx_fail(c, e->errnum, "%s", e->msg);
        return json_ctx_fail(c, -r, "%s", strerror(-r));
}

static int json_ctx_fail_key_from(JsonCtx *c, int r, const HutchError *e) {
        if (e->errnum != 0 && e->msg[0] != '\0')
                return json_ctx_fail_key(c, e->errnum, "%s", e->msg);
        return json_ctx_fail_key(c, -r, "%s", strerror(-r));
}

static const char *json_type_name(const json_t *v) {
        switch (json_typeof(v)) {
        case JSON_OBJECT:
                return "an object";
        case JSON_ARRAY:
                return "an array";
        case JSON_STRING:
                return "a string";
        case JSON_INTEGER:
                return "an integer";
        case JSON_REAL:
                return "a real number";
        case JSON_TRUE:
        case JSON_FALSE:
                return "a boolean";
        case JSON_NULL:
                return "null";
        }
        return "an unknown type";
}

static unsigned json_type_mask(const json_t *v) {
        switch (json_typeof(v)) {
        case JSON_OBJECT:
                return JT_OBJECT;
        case JSON_ARRAY:
                return JT_ARRAY;
        case JSON_STRING:
                return JT_STRING;
        case JSON_INTEGER:
                return JT_INTEGER;
        case JSON_REAL:
                return JT_REAL;
        case JSON_TRUE:
        case JSON_FALSE:
                return JT_BOOLEAN;
        case JSON_NULL:
                return JT_NULL;
        }
        return 0;
}

/* "expected a string or an object, got an array" */
static int json_ctx_fail_type(JsonCtx *c, unsigned expected, const json_t *v) {
        static const struct {
                unsigned mask;
                const char *name;
        } names[] = {
                {JT_OBJECT, "an object"},   {JT_ARRAY, "an array"},     {JT_STRING, "a string"},
                {JT_INTEGER, "an integer"}, {JT_REAL, "a real number"}, {JT_BOOLEAN, "a boolean"},
                {JT_NULL, "null"},
        };
        char buf[128] = "";
        size_t n = 0;

        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (expected & names[i].mask) {
                        int k = snprintf(buf + n, sizeof(buf) - n, "%s%s", n > 0 ? " or " : "",
                                         names[i].name);
                        if (k < 0 || (size_t)k >= sizeof(buf) - n)
                                break;
                        n += (size_t)k;
                }
        return json_ctx_fail(c, EINVAL, "expected %s, got %s", buf, json_type_name(v));
}

/* Decodes the members of @obj with @table (at most 32 fields), in document
 * order: an unknown member, a member of a wrong type or a missing mandatory
 * member is -EINVAL. */
static int json_dispatch_object(JsonCtx *c, json_t *obj, const JsonField *table, size_t n_table,
                                void *userdata) {
        uint32_t seen = 0;
        const char *key;
        json_t *v;
        int r;

        assert(n_table <= 32);
        if (!json_is_object(obj))
                return json_ctx_fail_type(c, JT_OBJECT, obj);

        json_object_foreach(obj, key, v) {
                const JsonField *f = NULL;
                int saved;

                for (size_t i = 0; i < n_table; i++)
                        if (strcmp(table[i].name, key) == 0) {
                                f = table + i;
                                seen |= UINT32_C(1) << i;
                                break;
                        }
                saved = json_ctx_push(c, key);
                if (saved < 0)
                        return saved;
                if (!f)
                        return json_ctx_fail_key(c, EINVAL, "unknown field '%s'", key);
                if (!(json_type_mask(v) & f->types))
                        return json_ctx_fail_type(c, f->types, v);
                r = f->dispatch(c, f, v, userdata);
                if (r < 0)
                        return r;
                json_ctx_pop(c, saved);
        }

        for (size_t i = 0; i < n_table; i++)
                if ((table[i].flags & JSON_MANDATORY) && !(seen & (UINT32_C(1) << i)))
                        return json_ctx_fail(c, EINVAL, "missing field '%s'", table[i].name);
        return 0;
}

static int json_dispatch_bool(JsonCtx *c, const JsonField *f, json_t *v, void *userdata) {
        *(bool *)((char *)userdata + f->offset) = json_is_true(v);
        return 0;
}

static int json_dispatch_nonempty_string(JsonCtx *c, const JsonField *f, json_t *v,
                                         void *userdata) {
        const char *s = json_string_value(v);

        if (s[0] == '\0')
                return json_ctx_fail(c, EINVAL, "%s must not be empty", f->name);
        *(const char **)((char *)userdata + f->offset) = s;
        return 0;
}

static int json_dispatch_setter(JsonCtx *c, const JsonField *f, json_t *v, void *userdata) {
        HutchError e = {};
        int r;

        r = f->setter(userdata, json_string_value(v), &e);
        if (r < 0)
                return json_ctx_fail_from(c, r, &e);
        return 0;
}

static int json_dispatch_workspace_mode(JsonCtx *c, const JsonField *f, json_t *v, void *userdata) {
        const char *s = json_string_value(v);
        WorkspaceMode m;

        m = workspace_mode_from_string(s);
        if (m < 0)
                return json_ctx_fail(c, EINVAL,
                                     "unknown workspace mode '%s' (expected 'mount', 'copy' or "
                                     "'overlay')",
                                     s);
        *(WorkspaceMode *)((char *)userdata + f->offset) = m;
        return 0;
}

static int json_dispatch_bind_target(JsonCtx *c, const JsonField *f, json_t *v, void *userdata) {
        const char *s = json_string_value(v);
        HutchError e = {};
        int r;

        r = policy_check_target(s, false, NULL, &e);
        if (r < 0)
                return json_ctx_fail_from(c, r, &e);
        *(const char **)((char *)userdata + f->offset) = s;
        return 0;
}

static int json_dispatch_tmpfs_path(JsonCtx *c, const JsonField *f, json_t *v, void *userdata) {
        const char *s = json_string_value(v);
        HutchError e = {};
        int r;

        r = policy_check_target(s, true, NULL, &e);
        if (r < 0)
                return json_ctx_fail_from(c, r, &e);
        *(const char **)((char *)userdata + f->offset) = s;
        return 0;
}

/* A size is a string as parse_size() takes it ("64m") or a byte count. */
static int json_dispatch_size(JsonCtx *c, const JsonField *f, json_t *v, void *userdata) {
        HutchError e = {};
        char text[32];
        uint64_t size;
        int r;

        if (json_is_integer(v)) {
                json_int_t i = json_integer_value(v);

                (void)snprintf(text, sizeof(text), "%" JSON_INTEGER_FORMAT, i);
                if (i < 0)
                        return json_ctx_fail(c, EINVAL, "invalid size %s", text);
                size = (uint64_t)i;
        } else {
                r = parse_size(json_string_value(v), &size);
                if (r < 0)
                        return json_ctx_fail(c, EINVAL, "invalid size '%s'", json_string_value(v));
                (void)snprintf(text, sizeof(text), "%s", json_string_value(v));
        }
        r = policy_check_tmpfs_size(size, text, NULL, &e);
        if (r < 0)
                return json_ctx_fail_from(c, r, &e);
        *(uint64_t *)((char *)userdata + f->offset) = size;
        return 0;
}

static const JsonField workspace_table[] = {
        {"path", JT_STRING, json_dispatch_nonempty_string, offsetof(JsonWorkspace, path), NULL,
         JSON_MANDATORY},
        {"mode", JT_STRING, json_dispatch_workspace_mode, offsetof(JsonWorkspace, mode), NULL, 0},
};

static const JsonField bind_table[] = {
        {"source", JT_STRING, json_dispatch_nonempty_string, offsetof(JsonBind, source), NULL,
         JSON_MANDATORY},
        {"target", JT_STRING, json_dispatch_bind_target, offsetof(JsonBind, target), NULL,
         JSON_MANDATORY},
        {"read_only", JT_BOOLEAN, json_dispatch_bool, offsetof(JsonBind, read_only), NULL, 0},
};

static const JsonField tmpfs_table[] = {
        {"path", JT_STRING, json_dispatch_tmpfs_path, offsetof(JsonTmpfs, path), NULL,
         JSON_MANDATORY},
        {"size", JT_STRING | JT_INTEGER, json_dispatch_size, offsetof(JsonTmpfs, size), NULL, 0},
};

static int json_dispatch_workspace(JsonCtx *c, const JsonField *f, json_t *v, void *userdata) {
        Policy *p = userdata;
        JsonWorkspace w = {.mode = p->workspace_mode};
        HutchError e = {};
        int r;

        if (json_is_string(v)) {
                r = policy_set_workspace_spec_ctx(p, json_string_value(v), NULL, &e);
                if (r < 0)
                        return json_ctx_fail_from(c, r, &e);
                return 0;
        }
        r = json_dispatch_object(c, v, workspace_table, ELEMENTSOF(workspace_table), &w);
        if (r < 0)
                return r;
        r = policy_set_workspace_path(p, w.path, w.mode, NULL, &e);
        if (r < 0)
                return json_ctx_fail_from(c, r, &e);
        return 0;
}

static int json_dispatch_binds(JsonCtx *c, const JsonField *f, json_t *v, void *userdata) {
        Policy *p = userdata;
        json_t *item;
        size_t i;
        int r;

        json_array_foreach(v, i, item) {
                JsonBind b = {};
                HutchError e = {};
                int saved;

                saved = json_ctx_push_index(c, i);
                if (saved < 0)
                        return saved;
                r = json_dispatch_object(c, item, bind_table, ELEMENTSOF(bind_table), &b);
                if (r < 0)
                        return r;
                r = policy_add_bind(p, b.source, b.target, b.read_only, NULL, &e);
                if (r < 0)
                        return json_ctx_fail_from(c, r, &e);
                json_ctx_pop(c, saved);
        }
        return 0;
}

static int json_dispatch_tmpfs(JsonCtx *c, const JsonField *f, json_t *v, void *userdata) {
        Policy *p = userdata;
        json_t *item;
        size_t i;
        int r;

        json_array_foreach(v, i, item) {
                JsonTmpfs t = {.size = POLICY_DEFAULT_TMP_SIZE};
                HutchError e = {};
                int saved;

                saved = json_ctx_push_index(c, i);
                if (saved < 0)
                        return saved;
                r = json_dispatch_object(c, item, tmpfs_table, ELEMENTSOF(tmpfs_table), &t);
                if (r < 0)
                        return r;
                r = policy_add_tmpfs(p, t.path, t.size, NULL, &e);
                if (r < 0)
                        return json_ctx_fail_from(c, r, &e);
                json_ctx_pop(c, saved);
        }
        return 0;
}

static int json_dispatch_env(JsonCtx *c, const JsonField *f, json_t *v, void *userdata) {
        Policy *p = userdata;
        const char *key;
        json_t *value;
        int r;

        json_object_foreach(v, key, value) {
                HutchError e = {};
                int saved;

                saved = json_ctx_push(c, key);
                if (saved < 0)
                        return saved;
                if (!json_is_string(value))
                        return json_ctx_fail_type(c, JT_STRING, value);
                r = policy_add_env(p, key, json_string_value(value), NULL, &e);
                if (r == -EINVAL) /* the name is wrong: point at the key */
                        return json_ctx_fail_key_from(c, r, &e);
                if (r < 0)
                        return json_ctx_fail_from(c, r, &e);
                json_ctx_pop(c, saved);
        }
        return 0;
}

/* A limit is given as a string the way the flag takes it ("512m", "1.5",
 * "30s") or as a number: bytes for sizes, a count for pids, CPUs for cpus
 * (a timeout needs its unit, so only 0 is accepted as a number). */
static int json_dispatch_limit(JsonCtx *c, const JsonField *f, json_t *v, void *userdata) {
        PolicyLimit which = policy_limit_from_string(f->name);
        HutchError e = {};
        char text[64];
        int r;

        if (json_is_string(v)) {
                r = policy_set_limit(userdata, which, json_string_value(v), NULL, &e);
                if (r < 0)
                        return json_ctx_fail_from(c, r, &e);
                return 0;
        }
        if (json_is_integer(v)) {
                json_int_t i = json_integer_value(v);

                if (i < 0)
                        return json_ctx_fail(c, EINVAL, "%s must not be negative", f->name);
                if (which == POLICY_LIMIT_TIMEOUT && i != 0)
                        return json_ctx_fail(c, EINVAL,
                                             "timeout needs a unit: write it as a string like "
                                             "\"30s\" (0 alone means none)");
                (void)snprintf(text, sizeof(text), "%" JSON_INTEGER_FORMAT, i);
        } else {
                double d = json_real_value(v);

                if (!(d > 0 && d <= POLICY_MAX_CPU_MILLIS / 1000))
                        return json_ctx_fail(c, EINVAL, "%s must be in (0, 1024]", f->name);
                (void)snprintf(text, sizeof(text), "%.3f", d);
        }
        r = policy_set_limit(userdata, which, text, NULL, &e);
        if (r < 0)
                return json_ctx_fail_from(c, r, &e);
        return 0;
}

static const JsonField limits_table[] = {
        {"memory", JT_STRING | JT_INTEGER, json_dispatch_limit, 0, NULL, 0},
        {"memory_swap", JT_STRING | JT_INTEGER, json_dispatch_limit, 0, NULL, 0},
        {"cpus", JT_STRING | JT_INTEGER | JT_REAL, json_dispatch_limit, 0, NULL, 0},
        {"pids", JT_STRING | JT_INTEGER, json_dispatch_limit, 0, NULL, 0},
        {"timeout", JT_STRING | JT_INTEGER, json_dispatch_limit, 0, NULL, 0},
        {"disk", JT_STRING | JT_INTEGER, json_dispatch_limit, 0, NULL, 0},
        {"output_limit", JT_STRING | JT_INTEGER, json_dispatch_limit, 0, NULL, 0},
};

static int json_dispatch_limits(JsonCtx *c, const JsonField *f, json_t *v, void *userdata) {
        return json_dispatch_object(c, v, limits_table, ELEMENTSOF(limits_table), userdata);
}

typedef int (*PolicyListAdder)(Policy *p, const char *value, const char *ctx, HutchError *reterr);

static int json_dispatch_string_list(JsonCtx *c, json_t *v, Policy *p, PolicyListAdder add) {
        json_t *item;
        size_t i;
        int r;

        json_array_foreach(v, i, item) {
                HutchError e = {};
                int saved;

                saved = json_ctx_push_index(c, i);
                if (saved < 0)
                        return saved;
                if (!json_is_string(item))
                        return json_ctx_fail_type(c, JT_STRING, item);
                r = add(p, json_string_value(item), NULL, &e);
                if (r < 0)
                        return json_ctx_fail_from(c, r, &e);
                json_ctx_pop(c, saved);
        }
        return 0;
}

static int add_env_pass(Policy *p, const char *name, const char *ctx, HutchError *reterr) {
        return policy_add_env(p, name, NULL, ctx, reterr);
}

static int json_dispatch_env_pass(JsonCtx *c, const JsonField *f, json_t *v, void *userdata) {
        return json_dispatch_string_list(c, v, userdata, add_env_pass);
}

static int json_dispatch_allow_hosts(JsonCtx *c, const JsonField *f, json_t *v, void *userdata) {
        return json_dispatch_string_list(c, v, userdata, policy_add_allow_host);
}

static int json_dispatch_deny_hosts(JsonCtx *c, const JsonField *f, json_t *v, void *userdata) {
        return json_dispatch_string_list(c, v, userdata, policy_add_deny_host);
}

static int json_dispatch_allow_private(JsonCtx *c, const JsonField *f, json_t *v, void *userdata) {
        return json_dispatch_string_list(c, v, userdata, policy_add_allow_private);
}

static int json_dispatch_resolve(JsonCtx *c, const JsonField *f, json_t *v, void *userdata) {
        return json_dispatch_string_list(c, v, userdata, policy_add_resolve);
}

static int json_dispatch_upstream_ca(JsonCtx *c, const JsonField *f, json_t *v, void *userdata) {
        return json_dispatch_string_list(c, v, userdata, policy_add_upstream_ca);
}

static int json_dispatch_ports(JsonCtx *c, const JsonField *f, json_t *v, void *userdata) {
        return json_dispatch_string_list(c, v, userdata, policy_add_port);
}

/* A member of "secrets", borrowed from the json_t. */
typedef struct JsonSecret {
        const char *name;
        const char *source; /* "env:VAR" or "file:PATH" */
        json_t *hosts;
        const char *header;
        const char *query;
        const char *path_prefix;
        json_t *methods;
} JsonSecret;

static int json_dispatch_borrow(JsonCtx *c, const JsonField *f, json_t *v, void *userdata) {
        *(json_t **)((char *)userdata + f->offset) = v;
        return 0;
}

static const JsonField secret_table[] = {
        {"name", JT_STRING, json_dispatch_nonempty_string, offsetof(JsonSecret, name), NULL,
         JSON_MANDATORY},
        {"source", JT_STRING, json_dispatch_nonempty_string, offsetof(JsonSecret, source), NULL, 0},
        {"hosts", JT_ARRAY, json_dispatch_borrow, offsetof(JsonSecret, hosts), NULL,
         JSON_MANDATORY},
        {"header", JT_STRING, json_dispatch_nonempty_string, offsetof(JsonSecret, header), NULL, 0},
        {"query", JT_STRING, json_dispatch_nonempty_string, offsetof(JsonSecret, query), NULL, 0},
        {"path_prefix", JT_STRING, json_dispatch_nonempty_string, offsetof(JsonSecret, path_prefix),
         NULL, 0},
        {"methods", JT_ARRAY, json_dispatch_borrow, offsetof(JsonSecret, methods), NULL, 0},
};

/* Copies the strings of the array member @key of the current object into
 * @ret; the pointer then names the item that is not a string. */
static int json_secret_strings(JsonCtx *c, const char *key, json_t *arr, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        json_t *item;
        size_t i;
        int saved, r;

        saved = json_ctx_push(c, key);
        if (saved < 0)
                return saved;
        json_array_foreach(arr, i, item) {
                int s2 = json_ctx_push_index(c, i);

                if (s2 < 0)
                        return s2;
                if (!json_is_string(item))
                        return json_ctx_fail_type(c, JT_STRING, item);
                r = strv_extend(&l, json_string_value(item));
                if (r < 0)
                        return r;
                json_ctx_pop(c, s2);
        }
        json_ctx_pop(c, saved);
        if (!l) {
                l = calloc(1, sizeof(char *));
                if (!l)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

static int json_dispatch_secrets(JsonCtx *c, const JsonField *f, json_t *v, void *userdata) {
        Policy *p = userdata;
        json_t *item;
        size_t i;
        int r;

        json_array_foreach(v, i, item) {
                _cleanup_strv_free_ char **hosts = NULL, **methods = NULL;
                _cleanup_free_ char *file = NULL;
                JsonSecret js = {};
                PolicySecret s = {};
                HutchError e = {};
                int saved;

                saved = json_ctx_push_index(c, i);
                if (saved < 0)
                        return saved;
                r = json_dispatch_object(c, item, secret_table, ELEMENTSOF(secret_table), &js);
                if (r < 0)
                        return r;
                r = json_secret_strings(c, "hosts", js.hosts, &hosts);
                if (r < 0)
                        return r;
                if (js.methods) {
                        r = json_secret_strings(c, "methods", js.methods, &methods);
                        if (r < 0)
                                return r;
                }
                s = (PolicySecret){
                        .name = (char *)js.name,
                        .hosts = hosts,
                        .header = (char *)js.header,
                        .query = (char *)js.query,
                        .path_prefix = (char *)js.path_prefix,
                        .methods = methods,
                };
                if (js.source && strncmp(js.source, "file:", 5) == 0 && js.source[5]) {
                        r = policy_path_make_absolute(js.source + 5, &file);
                        if (r < 0)
                                return json_ctx_fail(c, -r, "cannot make '%s' absolute: %s",
                                                     js.source + 5, strerror(-r));
                        s.file = file;
                } else if (js.source && strncmp(js.source, "env:", 4) == 0 && js.source[4])
                        s.env_var = (char *)js.source + 4;
                else if (js.source) {
                        saved = json_ctx_push(c, "source");
                        if (saved < 0)
                                return saved;
                        return json_ctx_fail(c, EINVAL,
                                             "invalid source '%s' (expected \"env:VARIABLE\" or "
                                             "\"file:PATH\")",
                                             js.source);
                }
                r = policy_add_secret(p, &s, NULL, &e);
                if (r < 0)
                        return json_ctx_fail_from(c, r, &e);
                json_ctx_pop(c, saved);
        }
        return 0;
}

static const JsonField policy_table[] = {
        {"workspace", JT_STRING | JT_OBJECT, json_dispatch_workspace, 0, NULL, 0},
        {"binds", JT_ARRAY, json_dispatch_binds, 0, NULL, 0},
        {"tmpfs", JT_ARRAY, json_dispatch_tmpfs, 0, NULL, 0},
        {"env", JT_OBJECT, json_dispatch_env, 0, NULL, 0},
        {"env_pass", JT_ARRAY, json_dispatch_env_pass, 0, NULL, 0},
        {"workdir", JT_STRING, json_dispatch_setter, 0, policy_set_workdir, 0},
        {"hostname", JT_STRING, json_dispatch_setter, 0, policy_set_hostname, 0},
        {"read_only", JT_BOOLEAN, json_dispatch_bool, offsetof(Policy, read_only), NULL, 0},
        {"network", JT_STRING, json_dispatch_setter, 0, policy_set_network, 0},
        {"dns", JT_STRING, json_dispatch_setter, 0, policy_set_dns, 0},
        {"limits", JT_OBJECT, json_dispatch_limits, 0, NULL, 0},
        {"allow_hosts", JT_ARRAY, json_dispatch_allow_hosts, 0, NULL, 0},
        {"deny_hosts", JT_ARRAY, json_dispatch_deny_hosts, 0, NULL, 0},
        {"allow_private", JT_ARRAY, json_dispatch_allow_private, 0, NULL, 0},
        {"resolve", JT_ARRAY, json_dispatch_resolve, 0, NULL, 0},
        {"audit_log", JT_STRING, json_dispatch_setter, 0, policy_set_audit_log, 0},
        {"secrets", JT_ARRAY, json_dispatch_secrets, 0, NULL, 0},
        {"upstream_ca", JT_ARRAY, json_dispatch_upstream_ca, 0, NULL, 0},
        {"allow_degraded", JT_BOOLEAN, json_dispatch_bool, offsetof(Policy, allow_degraded), NULL,
         0},
        {"backend", JT_STRING, json_dispatch_setter, 0, policy_set_backend, 0},
        {"vm_accel", JT_STRING, json_dispatch_setter, 0, policy_set_vm_accel, 0},
        {"vm_kernel", JT_STRING, json_dispatch_setter, 0, policy_set_vm_kernel, 0},
        {"image", JT_STRING, json_dispatch_setter, 0, policy_set_image, 0},
        {"ports", JT_ARRAY, json_dispatch_ports, 0, NULL, 0},
        {"user", JT_STRING, json_dispatch_setter, 0, policy_set_user, 0},
};

/* The locator: a minimal scanner over JSON text that a parser already
 * accepted. It still never reads past @len, and fails with -EINVAL on
 * anything unexpected rather than trusting the text. */

typedef struct JsonScan {
        const char *s;
        size_t len;
        size_t pos;
} JsonScan;

static void scan_ws(JsonScan *j) {
        while (j->pos < j->len && strchr(" \t\r\n", j->s[j->pos]) && j->s[j->pos] != '\0')
                j->pos++;
}

static int scan_hex4(JsonScan *j, uint32_t *ret) {
        uint32_t v = 0;

        if (j->len - j->pos < 4)
                return -EINVAL;
        for (size_t i = 0; i < 4; i++) {
                char ch = j->s[j->pos + i];

                v <<= 4;
                if (ch >= '0' && ch <= '9')
                        v |= (uint32_t)(ch - '0');
                else if (ch >= 'a' && ch <= 'f')
                        v |= (uint32_t)(ch - 'a' + 10);
                else if (ch >= 'A' && ch <= 'F')
                        v |= (uint32_t)(ch - 'A' + 10);
                else
                        return -EINVAL;
        }
        j->pos += 4;
        *ret = v;
        return 0;
}

static size_t utf8_encode(uint32_t cp, char out[4]) {
        if (cp < 0x80) {
                out[0] = (char)cp;
                return 1;
        }
        if (cp < 0x800) {
                out[0] = (char)(0xC0 | (cp >> 6));
                out[1] = (char)(0x80 | (cp & 0x3F));
                return 2;
        }
        if (cp < 0x10000) {
                out[0] = (char)(0xE0 | (cp >> 12));
                out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
                out[2] = (char)(0x80 | (cp & 0x3F));
                return 3;
        }
        out[0] = (char)(0xF0 | (cp >> 18));
        out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[3] = (char)(0x80 | (cp & 0x3F));
        return 4;
}

/* Scans the string at the current position; with @ret, returns it
 * decoded (it cannot be longer than its encoded form). */
static int scan_string(JsonScan *j, char **ret) {
        _cleanup_free_ char *out = NULL;
        size_t start, n = 0;
        int r;

        if (j->pos >= j->len || j->s[j->pos] != '"')
                return -EINVAL;
        start = ++j->pos;
        if (ret) {
                out = malloc(j->len - start + 1);
                if (!out)
                        return -ENOMEM;
        }
        while (j->pos < j->len && j->s[j->pos] != '"') {
                char ch = j->s[j->pos++];
                uint32_t cp;

                if (ch != '\\') {
                        if (out)
                                out[n++] = ch;
                        continue;
                }
                if (j->pos >= j->len)
                        return -EINVAL;
                ch = j->s[j->pos++];
                switch (ch) {
                case '"':
                case '\\':
                case '/':
                        cp = (uint32_t)ch;
                        break;
                case 'b':
                        cp = '\b';
                        break;
                case 'f':
                        cp = '\f';
                        break;
                case 'n':
                        cp = '\n';
                        break;
                case 'r':
                        cp = '\r';
                        break;
                case 't':
                        cp = '\t';
                        break;
                case 'u':
                        r = scan_hex4(j, &cp);
                        if (r < 0)
                                return r;
                        if (cp >= 0xD800 && cp <= 0xDBFF && j->len - j->pos >= 6 &&
                            j->s[j->pos] == '\\' && j->s[j->pos + 1] == 'u') {
                                uint32_t lo;

                                j->pos += 2;
                                r = scan_hex4(j, &lo);
                                if (r < 0)
                                        return r;
                                if (lo < 0xDC00 || lo > 0xDFFF)
                                        return -EINVAL;
                                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                        }
                        break;
                default:
                        return -EINVAL;
                }
                /* Each escape is at least as long as its UTF-8 encoding. */
                if (out) {
                        char buf[4];
                        size_t k = utf8_encode(cp, buf);

                        memcpy(out + n, buf, k);
                        n += k;
                }
        }
        if (j->pos >= j->len)
                return -EINVAL;
        j->pos++; /* the closing quote */
        if (ret) {
                out[n] = '\0';
                *ret = TAKE_PTR(out);
        }
        return 0;
}

static int scan_value(JsonScan *j, unsigned depth);

/* Scans the members of an object or the elements of an array, the opening
 * bracket already consumed, through the closing one. */
static int scan_container(JsonScan *j, bool object, unsigned depth) {
        char close = object ? '}' : ']';
        int r;

        scan_ws(j);
        if (j->pos < j->len && j->s[j->pos] == close) {
                j->pos++;
                return 0;
        }
        for (;;) {
                if (object) {
                        r = scan_string(j, NULL);
                        if (r < 0)
                                return r;
                        scan_ws(j);
                        if (j->pos >= j->len || j->s[j->pos] != ':')
                                return -EINVAL;
                        j->pos++;
                        scan_ws(j);
                }
                r = scan_value(j, depth + 1);
                if (r < 0)
                        return r;
                scan_ws(j);
                if (j->pos >= j->len)
                        return -EINVAL;
                if (j->s[j->pos] == close) {
                        j->pos++;
                        return 0;
                }
                if (j->s[j->pos] != ',')
                        return -EINVAL;
                j->pos++;
                scan_ws(j);
        }
}

static int scan_value(JsonScan *j, unsigned depth) {
        char ch;

        if (depth > JSON_LOCATE_MAX_DEPTH || j->pos >= j->len)
                return -EINVAL;
        ch = j->s[j->pos];
        if (ch == '"')
                return scan_string(j, NULL);
        if (ch == '{' || ch == '[') {
                j->pos++;
                return scan_container(j, ch == '{', depth);
        }
        /* A number or a literal: up to the next delimiter. */
        if (!strchr("-0123456789tfn", ch) || ch == '\0')
                return -EINVAL;
        while (j->pos < j->len && !strchr(",]} \t\r\n", j->s[j->pos]) && j->s[j->pos] != '\0')
                j->pos++;
        return 0;
}

/* Moves to the member @token of the object at the current position, or the
 * element @token of the array there. With @want_key, stops on the key. */
static int scan_step(JsonScan *j, const char *token, bool want_key) {
        char open = j->pos < j->len ? j->s[j->pos] : '\0';
        uint64_t index = 0;
        int r;

        if (open != '{' && open != '[')
                return -ENOENT;
        if (open == '[' && safe_atou64(token, &index) < 0)
                return -ENOENT;
        j->pos++;
        scan_ws(j);
        if (j->pos < j->len && j->s[j->pos] == (open == '{' ? '}' : ']'))
                return -ENOENT;

        for (uint64_t i = 0;; i++) {
                bool found = open == '[' && i == index;

                if (open == '{') {
                        _cleanup_free_ char *key = NULL;
                        size_t key_pos = j->pos;

                        r = scan_string(j, &key);
                        if (r < 0)
                                return r;
                        found = strcmp(key, token) == 0;
                        scan_ws(j);
                        if (j->pos >= j->len || j->s[j->pos] != ':')
                                return -EINVAL;
                        j->pos++;
                        scan_ws(j);
                        if (found && want_key) {
                                j->pos = key_pos;
                                return 0;
                        }
                }
                if (found)
                        return 0;
                r = scan_value(j, 1);
                if (r < 0)
                        return r;
                scan_ws(j);
                if (j->pos >= j->len)
                        return -EINVAL;
                if (j->s[j->pos] != ',')
                        return -ENOENT; /* the closing bracket: not there */
                j->pos++;
                scan_ws(j);
        }
}

int json_locate(const char *text, size_t len, const char *pointer, bool want_key,
                unsigned *ret_line, unsigned *ret_column) {
        JsonScan j = {.s = text, .len = len};
        unsigned line = 1, column = 1;
        const char *p;
        int r;

        if (!text || !pointer || (pointer[0] != '\0' && pointer[0] != '/'))
                return -EINVAL;
        scan_ws(&j);

        p = pointer;
        while (*p == '/') {
                _cleanup_free_ char *token = NULL;
                size_t n = strcspn(p + 1, "/"), k = 0;
                bool last;

                token = malloc(n + 1);
                if (!token)
                        return -ENOMEM;
                for (size_t i = 0; i < n; i++) {
                        char ch = p[1 + i];

                        if (ch == '~') {
                                if (i + 1 >= n || (p[2 + i] != '0' && p[2 + i] != '1'))
                                        return -EINVAL;
                                ch = p[2 + i] == '0' ? '~' : '/';
                                i++;
                        }
                        token[k++] = ch;
                }
                token[k] = '\0';
                p += 1 + n;
                last = *p == '\0';

                r = scan_step(&j, token, want_key && last);
                if (r < 0)
                        return r;
        }

        for (size_t i = 0; i < j.pos && i < len; i++) {
                unsigned char ch = (unsigned char)text[i];

                if (ch == '\n') {
                        line++;
                        column = 1;
                } else if ((ch & 0xC0) != 0x80)
                        column++; /* count characters, not UTF-8 continuation bytes */
        }
        *ret_line = line;
        *ret_column = column;
        return 0;
}

/* Applies @text; @origin is the file name for messages, or NULL. Messages
 * start with "policy file 'p.json' line 3: ..." for a file and with
 * "policy: ..." (the line only in @reterr) without one. */
static int policy_load_json_origin(Policy *p, const char *text, size_t len, const char *origin,
                                   HutchError *reterr) {
        _cleanup_(json_decrefp) json_t *root = NULL;
        _cleanup_(json_ctx_done) JsonCtx c = {};
        _cleanup_free_ char *name = NULL;
        unsigned line = 0, column = 0;
        json_error_t jerr;
        int r;

        if (!p || !text)
                return -EINVAL;
        if (origin)
                r = asprintf(&name, "policy file '%s'", origin);
        else
                r = asprintf(&name, "policy");
        if (r < 0)
                return -ENOMEM;
        if (len > POLICY_MAX_FILE_SIZE)
                return hutch_error_set(reterr, EFBIG, "%s is larger than the limit of %u bytes",
                                       name, POLICY_MAX_FILE_SIZE);

        root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!root) {
                r = hutch_error_set(reterr, EINVAL, "%s%s line %d column %d: %s", name,
                                    origin ? "" : ":", jerr.line, jerr.column, jerr.text);
                if (reterr) {
                        reterr->line = jerr.line > 0 ? (unsigned)jerr.line : 0;
                        reterr->column = jerr.column > 0 ? (unsigned)jerr.column : 0;
                }
                return r;
        }
        if (!json_is_object(root)) {
                r = hutch_error_set(reterr, EINVAL, "%s: the top level must be an object, not %s",
                                    name, json_type_name(root));
                if (reterr)
                        (void)json_locate(text, len, "", false, &reterr->line, &reterr->column);
                return r;
        }

        r = json_dispatch_object(&c, root, policy_table, ELEMENTSOF(policy_table), p);
        if (r >= 0)
                return 0;
        if (!c.failed || !c.err_pointer) /* out of memory before anything was recorded */
                return r;

        /* A pointer that names nothing leaves the line unknown (0). */
        (void)json_locate(text, len, c.err_pointer, c.err_at_key, &line, &column);
        if (origin && line > 0)
                r = hutch_error_set_pointer(reterr, c.err.errnum, c.err_pointer,
                                            "%s line %u: %s: %s", name, line, c.err_pointer,
                                            c.err.msg);
        else
                r = hutch_error_set_pointer(reterr, c.err.errnum, c.err_pointer, "%s: %s: %s", name,
                                            c.err_pointer, c.err.msg);
        if (reterr) {
                reterr->line = line;
                reterr->column = column;
        }
        return r;
}

int policy_load_json(Policy *p, const char *text, size_t len, HutchError *reterr) {
        return policy_load_json_origin(p, text, len, NULL, reterr);
}

int policy_load_file(Policy *p, const char *path, HutchError *reterr) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        size_t size = 0, alloc = 0;
        int r;

        if (!p || !path)
                return -EINVAL;
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) {
                r = negative_errno();
                return hutch_error_set(reterr, -r, "cannot open policy file '%s': %s", path,
                                       strerror(-r));
        }
        /* Read up to one byte past the limit, so an oversized file (or pipe)
         * is refused instead of being cut short. */
        for (;;) {
                ssize_t n;

                if (size == alloc) {
                        size_t want = MAX(alloc * 2, (size_t)4096);
                        char *b;

                        want = MIN(want, (size_t)POLICY_MAX_FILE_SIZE + 1);
                        if (want == alloc)
                                break;
                        b = realloc(buf, want);
                        if (!b)
                                return -ENOMEM;
                        buf = b;
                        alloc = want;
                }
                n = loop_read(fd, buf + size, alloc - size);
                if (n < 0)
                        return hutch_error_set(reterr, (int)-n, "cannot read policy file '%s': %s",
                                               path, strerror((int)-n));
                if (n == 0)
                        break;
                size += (size_t)n;
        }
        if (size > POLICY_MAX_FILE_SIZE)
                return hutch_error_set(reterr, EFBIG,
                                       "policy file '%s' is larger than the limit of %u bytes",
                                       path, POLICY_MAX_FILE_SIZE);
        return policy_load_json_origin(p, buf ? buf : "", size, path, reterr);
}
