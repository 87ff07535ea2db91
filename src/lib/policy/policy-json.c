/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "fd-util.h"
#include "json-fields.h"
#include "parse-util.h"
#include "policy/policy-internal.h"
#include "policy/policy.h"
#include "strv.h"

/* The JSON policy document (docs/policy.md), decoded table by table with
 * the one field-table decoder (src/basic/json-fields.h): each object has a
 * static table of its fields, each field a parse function that applies it
 * to the Policy in the document's order, refusing unknown members. Errors
 * carry the JSON pointer of the offending member; since jansson keeps no
 * positions, json_locate() finds its line in the text afterwards. */

/* jansson enforces JSON_PARSER_MAX_DEPTH while parsing; the locator only
 * ever sees text jansson accepted, this bounds its recursion regardless. */
#define JSON_LOCATE_MAX_DEPTH 4096

typedef int (*PolicyStringSetter)(Policy *p, const char *s, HutchError *reterr);
typedef int (*PolicyListAdder)(Policy *p, const char *value, const char *ctx, HutchError *reterr);

/* JsonFieldDef.data of a field applied by a setter or a list adder. */
typedef struct PolicySetterRef {
        PolicyStringSetter set;
} PolicySetterRef;

typedef struct PolicyAdderRef {
        PolicyListAdder add;
} PolicyAdderRef;

/* A field of type JSON_FIELD_CUSTOM. */
#define CUSTOM(name, types, parse, offset, mandatory, data)                                        \
        { name, JSON_FIELD_CUSTOM, offset, mandatory, parse, types, data }

/* The decoded members of the nested objects, borrowed from the json_t. */
typedef struct JsonWorkspace {
        const char *path;
        WorkspaceMode mode;
} JsonWorkspace;

/* An element of "binds" or "tmpfs": each table fills its own members. */
typedef struct JsonMount {
        const char *source;
        const char *target; /* a bind's target, a tmpfs' path */
        bool read_only;
        uint64_t size;
} JsonMount;

/* A missing member points at the object that lacks it. */
static const JsonFieldsOptions policy_decode_options = {.flags = JSON_FIELDS_MISSING_AT_OBJECT};

/* Passes on the error @r that a policy function described in @e, without
 * its pointer (the decoder knows where it is). */
static int fail_from(HutchError *reterr, int r, const HutchError *e) {
        if (e->errnum != 0 && e->msg[0] != '\0')
                return hutch_error_set(reterr, e->errnum, "%s", e->msg);
        return hutch_error_set(reterr, -r, "%s", strerror(-r));
}

/* Decodes the nested object @v (of any JSON type: anything else is refused)
 * by @fields, a missing member pointing at the object. */
static int decode_object(json_t *v, const JsonFieldDef *fields, size_t n_fields, void *dest,
                         HutchError *reterr) {
        if (!json_is_object(v))
                return json_type_error(reterr, JSON_TYPE_OBJECT, v);
        return json_fields_decode_with(v, fields, n_fields, dest, &policy_decode_options, reterr);
}

static int parse_bool(const JsonFieldDef *f, json_t *v, void *dest, HutchError *reterr) {
        *(bool *)((char *)dest + f->offset) = json_is_true(v);
        return 0;
}

static int parse_borrow(const JsonFieldDef *f, json_t *v, void *dest, HutchError *reterr) {
        *(json_t **)((char *)dest + f->offset) = v;
        return 0;
}

static int parse_nonempty_string(const JsonFieldDef *f, json_t *v, void *dest, HutchError *reterr) {
        const char *s = json_string_value(v);

        if (s[0] == '\0')
                return hutch_error_set(reterr, EINVAL, "%s must not be empty", f->name);
        *(const char **)((char *)dest + f->offset) = s;
        return 0;
}

static int parse_setter(const JsonFieldDef *f, json_t *v, void *dest, HutchError *reterr) {
        const PolicySetterRef *ref = f->data;
        HutchError e = {};
        int r;

        r = ref->set(dest, json_string_value(v), &e);
        if (r < 0)
                return fail_from(reterr, r, &e);
        return 0;
}

static int parse_workspace_mode(const JsonFieldDef *f, json_t *v, void *dest, HutchError *reterr) {
        const char *s = json_string_value(v);
        WorkspaceMode m;

        m = workspace_mode_from_string(s);
        if (m < 0)
                return hutch_error_set(reterr, EINVAL,
                                       "unknown workspace mode '%s' (expected 'mount', 'copy' or "
                                       "'overlay')",
                                       s);
        *(WorkspaceMode *)((char *)dest + f->offset) = m;
        return 0;
}

/* A bind target (data NULL) or a tmpfs path (data non-NULL). */
static int parse_target(const JsonFieldDef *f, json_t *v, void *dest, HutchError *reterr) {
        const char *s = json_string_value(v);
        HutchError e = {};
        int r;

        r = policy_check_target(s, f->data != NULL, NULL, &e);
        if (r < 0)
                return fail_from(reterr, r, &e);
        *(const char **)((char *)dest + f->offset) = s;
        return 0;
}

/* A size is a string as parse_size() takes it ("64m") or a byte count. */
static int parse_size_field(const JsonFieldDef *f, json_t *v, void *dest, HutchError *reterr) {
        HutchError e = {};
        char text[32];
        uint64_t size;
        int r;

        if (json_is_integer(v)) {
                json_int_t i = json_integer_value(v);

                (void)snprintf(text, sizeof(text), "%" JSON_INTEGER_FORMAT, i);
                if (i < 0)
                        return hutch_error_set(reterr, EINVAL, "invalid size %s", text);
                size = (uint64_t)i;
        } else {
                r = parse_size(json_string_value(v), &size);
                if (r < 0)
                        return hutch_error_set(reterr, EINVAL, "invalid size '%s'",
                                               json_string_value(v));
                (void)snprintf(text, sizeof(text), "%s", json_string_value(v));
        }
        r = policy_check_tmpfs_size(size, text, NULL, &e);
        if (r < 0)
                return fail_from(reterr, r, &e);
        *(uint64_t *)((char *)dest + f->offset) = size;
        return 0;
}

static const JsonFieldDef workspace_fields[] = {
        CUSTOM("path", JSON_TYPE_STRING, parse_nonempty_string, offsetof(JsonWorkspace, path), true,
               NULL),
        CUSTOM("mode", JSON_TYPE_STRING, parse_workspace_mode, offsetof(JsonWorkspace, mode), false,
               NULL),
};

static const JsonFieldDef bind_fields[] = {
        CUSTOM("source", JSON_TYPE_STRING, parse_nonempty_string, offsetof(JsonMount, source), true,
               NULL),
        CUSTOM("target", JSON_TYPE_STRING, parse_target, offsetof(JsonMount, target), true, NULL),
        CUSTOM("read_only", JSON_TYPE_BOOLEAN, parse_bool, offsetof(JsonMount, read_only), false,
               NULL),
};

static const bool is_tmpfs = true;

static const JsonFieldDef tmpfs_fields[] = {
        CUSTOM("path", JSON_TYPE_STRING, parse_target, offsetof(JsonMount, target), true,
               &is_tmpfs),
        CUSTOM("size", JSON_TYPE_STRING | JSON_TYPE_INTEGER, parse_size_field,
               offsetof(JsonMount, size), false, NULL),
};

static int parse_workspace(const JsonFieldDef *f, json_t *v, void *dest, HutchError *reterr) {
        Policy *p = dest;
        JsonWorkspace w = {.mode = p->workspace_mode};
        HutchError e = {};
        int r;

        if (json_is_string(v)) {
                r = policy_set_workspace_spec_ctx(p, json_string_value(v), NULL, &e);
                if (r < 0)
                        return fail_from(reterr, r, &e);
                return 0;
        }
        r = decode_object(v, workspace_fields, ELEMENTSOF(workspace_fields), &w, reterr);
        if (r < 0)
                return r;
        r = policy_set_workspace_path(p, w.path, w.mode, NULL, &e);
        if (r < 0)
                return fail_from(reterr, r, &e);
        return 0;
}

static int bind_add(Policy *p, const JsonMount *m, HutchError *reterr) {
        return policy_add_bind(p, m->source, m->target, m->read_only, NULL, reterr);
}

static int tmpfs_add(Policy *p, const JsonMount *m, HutchError *reterr) {
        return policy_add_tmpfs(p, m->target, m->size, NULL, reterr);
}

/* JsonFieldDef.data of "binds" and "tmpfs": how each element is decoded,
 * then added to the Policy. */
typedef struct PolicyMountsRef {
        const JsonFieldDef *fields;
        size_t n_fields;
        int (*add)(Policy *p, const JsonMount *m, HutchError *reterr);
} PolicyMountsRef;

static const PolicyMountsRef binds_ref = {bind_fields, ELEMENTSOF(bind_fields), bind_add};
static const PolicyMountsRef tmpfs_ref = {tmpfs_fields, ELEMENTSOF(tmpfs_fields), tmpfs_add};

/* A list of mount entries ("binds", "tmpfs"), each an object decoded by
 * its table and added in the document's order. */
static int parse_mounts(const JsonFieldDef *f, json_t *v, void *dest, HutchError *reterr) {
        const PolicyMountsRef *ref = f->data;
        json_t *item;
        size_t i;
        int r;

        json_array_foreach(v, i, item) {
                JsonMount m = {.size = POLICY_DEFAULT_TMP_SIZE};
                HutchError e = {};

                r = decode_object(item, ref->fields, ref->n_fields, &m, reterr);
                if (r >= 0) {
                        r = ref->add(dest, &m, &e);
                        if (r < 0)
                                r = fail_from(reterr, r, &e);
                }
                if (r < 0) {
                        json_error_prefix_index(reterr, i);
                        return r;
                }
        }
        return 0;
}

static int parse_env(const JsonFieldDef *f, json_t *v, void *dest, HutchError *reterr) {
        const char *key;
        json_t *value;
        int r;

        json_object_foreach(v, key, value) {
                HutchError e = {};

                if (!json_is_string(value))
                        r = json_type_error(reterr, JSON_TYPE_STRING, value);
                else {
                        r = policy_add_env(dest, key, json_string_value(value), NULL, &e);
                        if (r < 0) {
                                bool at_key = r == -EINVAL; /* the name is wrong */

                                r = fail_from(reterr, r, &e);
                                reterr->at_key = at_key;
                        }
                }
                if (r < 0) {
                        json_error_prefix(reterr, key);
                        return r;
                }
        }
        return 0;
}

/* A limit is given as a string the way the flag takes it ("512m", "1.5",
 * "30s") or as a number: bytes for sizes, a count for pids, CPUs for cpus
 * (a timeout needs its unit, so only 0 is accepted as a number). */
static int parse_limit(const JsonFieldDef *f, json_t *v, void *dest, HutchError *reterr) {
        PolicyLimit which = policy_limit_from_string(f->name);
        HutchError e = {};
        char text[64];
        int r;

        if (json_is_string(v)) {
                r = policy_set_limit(dest, which, json_string_value(v), NULL, &e);
                if (r < 0)
                        return fail_from(reterr, r, &e);
                return 0;
        }
        if (json_is_integer(v)) {
                json_int_t i = json_integer_value(v);

                if (i < 0)
                        return hutch_error_set(reterr, EINVAL, "%s must not be negative", f->name);
                if (which == POLICY_LIMIT_TIMEOUT && i != 0)
                        return hutch_error_set(reterr, EINVAL,
                                               "timeout needs a unit: write it as a string like "
                                               "\"30s\" (0 alone means none)");
                (void)snprintf(text, sizeof(text), "%" JSON_INTEGER_FORMAT, i);
        } else {
                double d = json_real_value(v);

                if (!(d > 0 && d <= POLICY_MAX_CPU_MILLIS / 1000))
                        return hutch_error_set(reterr, EINVAL, "%s must be in (0, 1024]", f->name);
                (void)snprintf(text, sizeof(text), "%.3f", d);
        }
        r = policy_set_limit(dest, which, text, NULL, &e);
        if (r < 0)
                return fail_from(reterr, r, &e);
        return 0;
}

#define LIMIT(name, types) CUSTOM(name, types, parse_limit, 0, false, NULL)

static const JsonFieldDef limits_fields[] = {
        LIMIT("memory", JSON_TYPE_STRING | JSON_TYPE_INTEGER),
        LIMIT("memory_swap", JSON_TYPE_STRING | JSON_TYPE_INTEGER),
        LIMIT("cpus", JSON_TYPE_STRING | JSON_TYPE_INTEGER | JSON_TYPE_REAL),
        LIMIT("pids", JSON_TYPE_STRING | JSON_TYPE_INTEGER),
        LIMIT("timeout", JSON_TYPE_STRING | JSON_TYPE_INTEGER),
        LIMIT("disk", JSON_TYPE_STRING | JSON_TYPE_INTEGER),
        LIMIT("output_limit", JSON_TYPE_STRING | JSON_TYPE_INTEGER),
};

static int parse_limits(const JsonFieldDef *f, json_t *v, void *dest, HutchError *reterr) {
        return json_fields_decode_with(v, limits_fields, ELEMENTSOF(limits_fields), dest,
                                       &policy_decode_options, reterr);
}

/* An array of strings, each applied by the field's adder. */
static int parse_string_list(const JsonFieldDef *f, json_t *v, void *dest, HutchError *reterr) {
        const PolicyAdderRef *ref = f->data;
        json_t *item;
        size_t i;
        int r;

        json_array_foreach(v, i, item) {
                HutchError e = {};

                if (!json_is_string(item))
                        r = json_type_error(reterr, JSON_TYPE_STRING, item);
                else {
                        r = ref->add(dest, json_string_value(item), NULL, &e);
                        if (r < 0)
                                r = fail_from(reterr, r, &e);
                }
                if (r < 0) {
                        json_error_prefix_index(reterr, i);
                        return r;
                }
        }
        return 0;
}

static int add_env_pass(Policy *p, const char *name, const char *ctx, HutchError *reterr) {
        return policy_add_env(p, name, NULL, ctx, reterr);
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

static const JsonFieldDef secret_fields[] = {
        CUSTOM("name", JSON_TYPE_STRING, parse_nonempty_string, offsetof(JsonSecret, name), true,
               NULL),
        CUSTOM("source", JSON_TYPE_STRING, parse_nonempty_string, offsetof(JsonSecret, source),
               false, NULL),
        CUSTOM("hosts", JSON_TYPE_ARRAY, parse_borrow, offsetof(JsonSecret, hosts), true, NULL),
        CUSTOM("header", JSON_TYPE_STRING, parse_nonempty_string, offsetof(JsonSecret, header),
               false, NULL),
        CUSTOM("query", JSON_TYPE_STRING, parse_nonempty_string, offsetof(JsonSecret, query), false,
               NULL),
        CUSTOM("path_prefix", JSON_TYPE_STRING, parse_nonempty_string,
               offsetof(JsonSecret, path_prefix), false, NULL),
        CUSTOM("methods", JSON_TYPE_ARRAY, parse_borrow, offsetof(JsonSecret, methods), false,
               NULL),
};

/* Copies the strings of the array member @key of a secret into @ret; the
 * pointer then names the item that is not a string. */
static int secret_strings(const char *key, json_t *arr, char ***ret, HutchError *reterr) {
        _cleanup_strv_free_ char **l = NULL;
        json_t *item;
        size_t i;
        int r;

        json_array_foreach(arr, i, item) {
                if (!json_is_string(item)) {
                        r = json_type_error(reterr, JSON_TYPE_STRING, item);
                        json_error_prefix_index(reterr, i);
                        json_error_prefix(reterr, key);
                        return r;
                }
                r = strv_extend(&l, json_string_value(item));
                if (r < 0)
                        return r;
        }
        if (!l) {
                l = calloc(1, sizeof(char *));
                if (!l)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

/* Applies one member of "secrets"; errors point inside it. */
static int parse_secret(json_t *item, Policy *p, HutchError *reterr) {
        _cleanup_strv_free_ char **hosts = NULL, **methods = NULL;
        _cleanup_free_ char *file = NULL;
        JsonSecret js = {};
        PolicySecret s = {};
        HutchError e = {};
        int r;

        r = decode_object(item, secret_fields, ELEMENTSOF(secret_fields), &js, reterr);
        if (r < 0)
                return r;
        r = secret_strings("hosts", js.hosts, &hosts, reterr);
        if (r < 0)
                return r;
        if (js.methods) {
                r = secret_strings("methods", js.methods, &methods, reterr);
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
                        return hutch_error_set(reterr, -r, "cannot make '%s' absolute: %s",
                                               js.source + 5, strerror(-r));
                s.file = file;
        } else if (js.source && strncmp(js.source, "env:", 4) == 0 && js.source[4])
                s.env_var = (char *)js.source + 4;
        else if (js.source) {
                r = hutch_error_set(reterr, EINVAL,
                                    "invalid source '%s' (expected \"env:VARIABLE\" or "
                                    "\"file:PATH\")",
                                    js.source);
                json_error_prefix(reterr, "source");
                return r;
        }
        r = policy_add_secret(p, &s, NULL, &e);
        if (r < 0)
                return fail_from(reterr, r, &e);
        return 0;
}

static int parse_secrets(const JsonFieldDef *f, json_t *v, void *dest, HutchError *reterr) {
        json_t *item;
        size_t i;
        int r;

        json_array_foreach(v, i, item) {
                r = parse_secret(item, dest, reterr);
                if (r < 0) {
                        json_error_prefix_index(reterr, i);
                        return r;
                }
        }
        return 0;
}

/* A top-level string applied by a setter, and an array of strings each
 * applied by an adder. */
#define SETTER(name, fn)                                                                           \
        CUSTOM(name, JSON_TYPE_STRING, parse_setter, 0, false, &(const PolicySetterRef){fn})
#define LIST(name, fn)                                                                             \
        CUSTOM(name, JSON_TYPE_ARRAY, parse_string_list, 0, false, &(const PolicyAdderRef){fn})

static const JsonFieldDef policy_fields[] = {
        CUSTOM("workspace", JSON_TYPE_STRING | JSON_TYPE_OBJECT, parse_workspace, 0, false, NULL),
        CUSTOM("binds", JSON_TYPE_ARRAY, parse_mounts, 0, false, &binds_ref),
        CUSTOM("tmpfs", JSON_TYPE_ARRAY, parse_mounts, 0, false, &tmpfs_ref),
        CUSTOM("env", JSON_TYPE_OBJECT, parse_env, 0, false, NULL),
        LIST("env_pass", add_env_pass),
        SETTER("workdir", policy_set_workdir),
        SETTER("hostname", policy_set_hostname),
        CUSTOM("read_only", JSON_TYPE_BOOLEAN, parse_bool, offsetof(Policy, read_only), false,
               NULL),
        SETTER("network", policy_set_network),
        SETTER("dns", policy_set_dns),
        CUSTOM("limits", JSON_TYPE_OBJECT, parse_limits, 0, false, NULL),
        LIST("allow_hosts", policy_add_allow_host),
        LIST("deny_hosts", policy_add_deny_host),
        LIST("allow_private", policy_add_allow_private),
        LIST("resolve", policy_add_resolve),
        SETTER("audit_log", policy_set_audit_log),
        CUSTOM("secrets", JSON_TYPE_ARRAY, parse_secrets, 0, false, NULL),
        LIST("upstream_ca", policy_add_upstream_ca),
        CUSTOM("allow_degraded", JSON_TYPE_BOOLEAN, parse_bool, offsetof(Policy, allow_degraded),
               false, NULL),
        SETTER("backend", policy_set_backend),
        SETTER("vm_accel", policy_set_vm_accel),
        SETTER("vm_kernel", policy_set_vm_kernel),
        SETTER("image", policy_set_image),
        LIST("ports", policy_add_port),
        SETTER("user", policy_set_user),
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
        HutchError e = {};
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

        r = json_fields_decode_with(root, policy_fields, ELEMENTSOF(policy_fields), p,
                                    &policy_decode_options, &e);
        if (r >= 0)
                return 0;

        /* A pointer that names nothing leaves the line unknown (0). */
        (void)json_locate(text, len, e.pointer, e.at_key, &line, &column);
        if (origin && line > 0)
                r = hutch_error_set_pointer(reterr, e.errnum, e.pointer, "%s line %u: %s: %s", name,
                                            line, e.pointer, e.msg);
        else
                r = hutch_error_set_pointer(reterr, e.errnum, e.pointer, "%s: %s: %s", name,
                                            e.pointer, e.msg);
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
