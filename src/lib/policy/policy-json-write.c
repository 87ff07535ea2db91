/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "policy/policy.h"
#include "strv.h"

/* The writer of the JSON policy document (docs/policy.md), the inverse of
 * policy_load_json(): one encoder per top-level field, in a table in the
 * loader's order, so the output's key order is fixed. An encoder that
 * leaves its result NULL leaves the field out; that is how a default (an
 * empty list, false, an unset string, a limit not given explicitly) is
 * written, so the reader's own default applies on the way back. */

_Static_assert(sizeof(json_int_t) == sizeof(int64_t), "json_int_t is not 64 bits");

typedef struct JsonOutField JsonOutField;

/* Encodes its field of @p into a new value in @ret, or NULL to leave it out. */
typedef int (*JsonEncode)(const Policy *p, const JsonOutField *f, json_t **ret);

struct JsonOutField {
        const char *name;
        JsonEncode encode;
        size_t offset; /* of the field in Policy, for the generic encoders */
};

/* json_string() fails both for invalid UTF-8 and on OOM; its unchecked form
 * only on OOM, which tells the two apart. */
static int json_new_string(const char *s, json_t **ret) {
        json_t *v;

        if (!s)
                return -EINVAL;
        v = json_string(s);
        if (!v) {
                _cleanup_(json_decrefp) json_t *probe = json_string_nocheck(s);

                return probe ? -EILSEQ : -ENOMEM;
        }
        *ret = v;
        return 0;
}

/* Sets @key of @obj to @v, taking @v (also on failure); a NULL @v is left out. */
static int json_set_take(json_t *obj, const char *key, json_t *v) {
        if (!v)
                return 0;
        return json_object_set_new(obj, key, v) < 0 ? -ENOMEM : 0;
}

static int json_set_string(json_t *obj, const char *key, const char *s) {
        json_t *v = NULL;
        int r;

        if (!s)
                return 0;
        r = json_new_string(s, &v);
        if (r < 0)
                return r;
        return json_set_take(obj, key, v);
}

/* A count of bytes or processes: an integer while it fits in json_int_t,
 * else its decimal digits as a string (the reader takes both). */
static int json_new_u64(uint64_t v, json_t **ret) {
        char buf[32];
        json_t *j;

        if (v <= (uint64_t)INT64_MAX)
                j = json_integer((json_int_t)v);
        else {
                (void)snprintf(buf, sizeof(buf), "%" PRIu64, v);
                j = json_string(buf);
        }
        if (!j)
                return -ENOMEM;
        *ret = j;
        return 0;
}

/* An array of the strings of @l (possibly empty). */
static int json_new_strv(char *const *l, json_t **ret) {
        _cleanup_(json_decrefp) json_t *arr = json_array();
        int r;

        if (!arr)
                return -ENOMEM;
        STRV_FOREACH(s, (char **)l) {
                json_t *v = NULL;

                r = json_new_string(*s, &v);
                if (r < 0)
                        return r;
                if (json_array_append_new(arr, v) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(arr);
        return 0;
}

static int encode_string(const Policy *p, const JsonOutField *f, json_t **ret) {
        const char *s = *(char *const *)((const char *)p + f->offset);

        if (!s) {
                *ret = NULL;
                return 0;
        }
        return json_new_string(s, ret);
}

static int encode_bool(const Policy *p, const JsonOutField *f, json_t **ret) {
        bool b = *(const bool *)((const char *)p + f->offset);

        *ret = NULL;
        if (!b)
                return 0;
        *ret = json_true();
        return *ret ? 0 : -ENOMEM;
}

static int encode_strv(const Policy *p, const JsonOutField *f, json_t **ret) {
        char *const *l = *(char **const *)((const char *)p + f->offset);

        if (strv_length(l) == 0) {
                *ret = NULL;
                return 0;
        }
        return json_new_strv(l, ret);
}

static int encode_workspace(const Policy *p, const JsonOutField *f, json_t **ret) {
        const char *mode = workspace_mode_to_string(p->workspace_mode);
        _cleanup_(json_decrefp) json_t *o = NULL;
        int r;

        *ret = NULL;
        if (!p->workspace)
                return 0;
        if (!mode)
                return -EINVAL;
        o = json_object();
        if (!o)
                return -ENOMEM;
        r = json_set_string(o, "path", p->workspace);
        if (r < 0)
                return r;
        r = json_set_string(o, "mode", mode);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(o);
        return 0;
}

/* Encodes item @i of one of the policy's arrays into a new value. */
typedef int (*JsonEncodeItem)(const Policy *p, size_t i, json_t **ret);

/* An array of @n items, or NULL (left out) for none. */
static int encode_array(const Policy *p, size_t n, JsonEncodeItem item, json_t **ret) {
        _cleanup_(json_decrefp) json_t *arr = NULL;
        int r;

        *ret = NULL;
        if (n == 0)
                return 0;
        arr = json_array();
        if (!arr)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                json_t *v = NULL;

                r = item(p, i, &v);
                if (r < 0)
                        return r;
                if (json_array_append_new(arr, v) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(arr);
        return 0;
}

static int encode_bind(const Policy *p, size_t i, json_t **ret) {
        _cleanup_(json_decrefp) json_t *o = json_object();
        const BindMount *b = &p->binds[i];
        int r;

        if (!o)
                return -ENOMEM;
        r = json_set_string(o, "source", b->source);
        if (r < 0)
                return r;
        r = json_set_string(o, "target", b->target);
        if (r < 0)
                return r;
        if (b->read_only) {
                r = json_set_take(o, "read_only", json_true());
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(o);
        return 0;
}

static int encode_binds(const Policy *p, const JsonOutField *f, json_t **ret) {
        return encode_array(p, p->n_binds, encode_bind, ret);
}

static int encode_one_tmpfs(const Policy *p, size_t i, json_t **ret) {
        _cleanup_(json_decrefp) json_t *o = json_object();
        json_t *size = NULL;
        int r;

        if (!o)
                return -ENOMEM;
        r = json_set_string(o, "path", p->tmpfs[i].path);
        if (r < 0)
                return r;
        r = json_new_u64(p->tmpfs[i].size, &size);
        if (r < 0)
                return r;
        r = json_set_take(o, "size", size);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(o);
        return 0;
}

static int encode_tmpfs(const Policy *p, const JsonOutField *f, json_t **ret) {
        return encode_array(p, p->n_tmpfs, encode_one_tmpfs, ret);
}

/* "KEY=VALUE" entries become the members of one object, in their order.
 * -EINVAL for an entry without '=' or with an invalid name. */
static int encode_env(const Policy *p, const JsonOutField *f, json_t **ret) {
        _cleanup_(json_decrefp) json_t *o = NULL;
        int r;

        *ret = NULL;
        if (strv_length(p->env) == 0)
                return 0;
        o = json_object();
        if (!o)
                return -ENOMEM;
        STRV_FOREACH(e, p->env) {
                const char *eq = strchr(*e, '=');
                _cleanup_free_ char *key = NULL;

                if (!eq)
                        return -EINVAL;
                key = strndup(*e, (size_t)(eq - *e));
                if (!key)
                        return -ENOMEM;
                if (!env_name_is_valid(key)) /* the reader would refuse it */
                        return -EINVAL;
                r = json_set_string(o, key, eq + 1);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(o);
        return 0;
}

/* Only a mode given explicitly is written: an implied "allow" (from
 * allow_hosts or secrets) comes back implied, and network_set with it. */
/* The backend and the accelerator are written only when not the default. */
static int encode_backend(const Policy *p, const JsonOutField *f, json_t **ret) {
        const char *s = sandbox_backend_to_string(p->backend);

        *ret = NULL;
        if (!s)
                return -EINVAL;
        if (p->backend == SANDBOX_BACKEND_NS)
                return 0;
        return json_new_string(s, ret);
}

static int encode_vm_accel(const Policy *p, const JsonOutField *f, json_t **ret) {
        const char *s = vm_accel_to_string(p->vm_accel);

        *ret = NULL;
        if (!s)
                return -EINVAL;
        if (p->vm_accel == VM_ACCEL_KVM)
                return 0;
        return json_new_string(s, ret);
}

static int encode_network(const Policy *p, const JsonOutField *f, json_t **ret) {
        const char *mode = network_mode_to_string(p->network);

        *ret = NULL;
        if (!p->network_set)
                return 0;
        if (!mode)
                return -EINVAL;
        return json_new_string(mode, ret);
}

/* "dns" only when it is not the default. */
static int encode_dns(const Policy *p, const JsonOutField *f, json_t **ret) {
        *ret = NULL;
        if (!p->dns_transparent)
                return 0;
        return json_new_string("transparent", ret);
}

/* Thousandths of a CPU as the shortest exact decimal: "2", "1.5", "0.125". */
static int json_new_cpus(uint32_t millis, json_t **ret) {
        char buf[32];
        size_t n;

        (void)snprintf(buf, sizeof(buf), "%" PRIu32 ".%03" PRIu32, millis / 1000, millis % 1000);
        n = strlen(buf);
        while (buf[n - 1] == '0')
                buf[--n] = '\0';
        if (buf[n - 1] == '.')
                buf[n - 1] = '\0';
        return json_new_string(buf, ret);
}

/* Milliseconds in the largest unit that divides them: "30s", "1500ms", "0". */
static int json_new_duration(uint64_t ms, json_t **ret) {
        static const struct {
                const char *unit;
                uint64_t factor;
        } units[] = {
                {"h", 60 * 60 * 1000},
                {"m", 60 * 1000},
                {"s", 1000},
                {"ms", 1},
        };
        char buf[32] = "0";

        for (size_t i = 0; ms > 0 && i < ELEMENTSOF(units); i++)
                if (ms % units[i].factor == 0) {
                        (void)snprintf(buf, sizeof(buf), "%" PRIu64 "%s", ms / units[i].factor,
                                       units[i].unit);
                        break;
                }
        return json_new_string(buf, ret);
}

static int encode_limit(const Policy *p, PolicyLimit which, json_t **ret) {
        switch (which) {
        case POLICY_LIMIT_MEMORY:
                return json_new_u64(p->memory_max, ret);
        case POLICY_LIMIT_MEMORY_SWAP:
                return json_new_u64(p->memory_swap_max, ret);
        case POLICY_LIMIT_CPUS:
                return json_new_cpus(p->cpu_millis, ret);
        case POLICY_LIMIT_PIDS:
                return json_new_u64(p->pids_max, ret);
        case POLICY_LIMIT_TIMEOUT:
                return json_new_duration(p->timeout_ms, ret);
        case POLICY_LIMIT_DISK:
                return json_new_u64(p->disk_size, ret);
        case POLICY_LIMIT_OUTPUT:
                return json_new_u64(p->output_limit, ret);
        case _POLICY_LIMIT_MAX:
        case _POLICY_LIMIT_INVALID:
        default:
                return -EINVAL;
        }
}

/* Only the limits given explicitly: the others are left to the reader's
 * defaults, and come back with their explicit bit clear. */
static int encode_limits(const Policy *p, const JsonOutField *f, json_t **ret) {
        _cleanup_(json_decrefp) json_t *o = NULL;
        int r;

        *ret = NULL;
        if ((p->limits_explicit & ((1U << _POLICY_LIMIT_MAX) - 1)) == 0)
                return 0;
        o = json_object();
        if (!o)
                return -ENOMEM;
        for (int i = 0; i < _POLICY_LIMIT_MAX; i++) {
                json_t *v = NULL;

                if (!(p->limits_explicit & (1U << i)))
                        continue;
                r = encode_limit(p, (PolicyLimit)i, &v);
                if (r < 0)
                        return r;
                r = json_set_take(o, policy_limit_to_string((PolicyLimit)i), v);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(o);
        return 0;
}

static int encode_secret(const Policy *p, size_t i, json_t **ret) {
        _cleanup_(json_decrefp) json_t *o = json_object();
        const PolicySecret *s = &p->secrets[i];
        _cleanup_free_ char *source = NULL;
        json_t *v = NULL;
        int r;

        if (!o)
                return -ENOMEM;
        /* The format has one "source": a secret with two cannot be written. */
        if (s->env_var && s->file)
                return -EINVAL;
        if (s->file && asprintf(&source, "file:%s", s->file) < 0)
                return -ENOMEM;
        if (s->env_var && asprintf(&source, "env:%s", s->env_var) < 0)
                return -ENOMEM;

        r = json_set_string(o, "name", s->name);
        if (r < 0)
                return r;
        r = json_set_string(o, "source", source);
        if (r < 0)
                return r;
        r = json_new_strv(s->hosts, &v);
        if (r < 0)
                return r;
        r = json_set_take(o, "hosts", v);
        if (r < 0)
                return r;
        r = json_set_string(o, "header", s->header);
        if (r < 0)
                return r;
        r = json_set_string(o, "query", s->query);
        if (r < 0)
                return r;
        r = json_set_string(o, "path_prefix", s->path_prefix);
        if (r < 0)
                return r;
        if (s->methods) {
                v = NULL;
                r = json_new_strv(s->methods, &v);
                if (r < 0)
                        return r;
                r = json_set_take(o, "methods", v);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(o);
        return 0;
}

static int encode_secrets(const Policy *p, const JsonOutField *f, json_t **ret) {
        return encode_array(p, p->n_secrets, encode_secret, ret);
}

static const JsonOutField policy_out_table[] = {
        {"workspace", encode_workspace, 0},
        {"binds", encode_binds, 0},
        {"tmpfs", encode_tmpfs, 0},
        {"env", encode_env, 0},
        {"env_pass", encode_strv, offsetof(Policy, env_pass)},
        {"workdir", encode_string, offsetof(Policy, workdir)},
        {"hostname", encode_string, offsetof(Policy, hostname)},
        {"read_only", encode_bool, offsetof(Policy, read_only)},
        {"network", encode_network, 0},
        {"dns", encode_dns, 0},
        {"limits", encode_limits, 0},
        {"allow_hosts", encode_strv, offsetof(Policy, allow_hosts)},
        {"deny_hosts", encode_strv, offsetof(Policy, deny_hosts)},
        {"allow_private", encode_strv, offsetof(Policy, allow_private)},
        {"resolve", encode_strv, offsetof(Policy, resolve)},
        {"audit_log", encode_string, offsetof(Policy, audit_log)},
        {"secrets", encode_secrets, 0},
        {"upstream_ca", encode_strv, offsetof(Policy, upstream_ca)},
        {"allow_degraded", encode_bool, offsetof(Policy, allow_degraded)},
        {"backend", encode_backend, 0},
        {"vm_accel", encode_vm_accel, 0},
        {"vm_kernel", encode_string, offsetof(Policy, vm_kernel)},
        {"image", encode_string, offsetof(Policy, image)},
        {"ports", encode_strv, offsetof(Policy, ports)},
        {"user", encode_string, offsetof(Policy, user)},
};

int policy_to_json(const Policy *p, char **ret) {
        _cleanup_(json_decrefp) json_t *root = NULL;
        _cleanup_free_ char *text = NULL;
        int r;

        if (!p || !ret)
                return -EINVAL;
        root = json_object();
        if (!root)
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(policy_out_table); i++) {
                const JsonOutField *f = &policy_out_table[i];
                json_t *v = NULL;

                r = f->encode(p, f, &v);
                if (r < 0)
                        return r;
                r = json_set_take(root, f->name, v);
                if (r < 0)
                        return r;
        }

        text = json_dumps(root, JSON_COMPACT);
        if (!text)
                return -ENOMEM;
        /* The reader refuses a larger document; say so now rather than when
         * it is read back. */
        if (strlen(text) > POLICY_MAX_FILE_SIZE)
                return -EFBIG;
        *ret = TAKE_PTR(text);
        return 0;
}
