/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* PATCH /v1/sandboxes/{name} (docs/api.md "Changing a sandbox's policy"):
 * `hutch update` through the C API. The body's "policy" is a JSON merge
 * patch (RFC 7396) over the stored policy: a field given replaces the
 * stored one (lists included, so an allowlist can narrow), an object
 * ("limits") is patched field by field, null resets a field to its
 * default. hutch_update() then does what `hutch update` does: stopped,
 * any change; running, limits and the network policy live, the rest
 * refused naming the field. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <event2/http.h>

#include "macro.h"
#include "serve.h"

typedef struct UpdateArgs {
        json_t *policy;
} UpdateArgs;

static const ServeField update_fields[] = {
        {"policy", SERVE_FIELD_OBJECT, offsetof(UpdateArgs, policy), true},
};

/* RFC 7396 onto @target (an object). 0 or -ENOMEM. */
static int merge_patch(json_t *target, json_t *patch) {
        const char *key;
        json_t *v;

        json_object_foreach(patch, key, v) {
                json_t *old = json_object_get(target, key);

                if (json_is_null(v)) {
                        (void)json_object_del(target, key);
                        continue;
                }
                if (json_is_object(v) && json_is_object(old)) {
                        if (merge_patch(old, v) < 0)
                                return -ENOMEM;
                        continue;
                }
                if (json_object_set(target, key, v) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* The fields that differ between @a and @b (objects), as PREFIX.KEY one
 * level into objects, appended to @arr. */
static int changed_fields(json_t *a, json_t *b, const char *prefix, json_t *arr) {
        const char *key;
        json_t *v;
        void *tmp;
        int r;

        for (int pass = 0; pass < 2; pass++) {
                json_t *from = pass == 0 ? a : b, *to = pass == 0 ? b : a;

                json_object_foreach_safe(from, tmp, key, v) {
                        json_t *w = json_object_get(to, key);
                        char name[160];

                        if (pass == 1 && w)
                                continue; /* seen in pass 0 */
                        if (w && json_equal(v, w))
                                continue;
                        if (!prefix && json_is_object(v) && (!w || json_is_object(w))) {
                                json_t *none = json_object();

                                r = none ? changed_fields(v, w ?: none, key, arr) : -ENOMEM;
                                json_decref(none);
                                if (r < 0)
                                        return r;
                                continue;
                        }
                        (void)snprintf(name, sizeof(name), "%s%s%s", prefix ?: "",
                                       prefix ? "." : "", key);
                        if (json_array_append_new(arr, json_string(name)) < 0)
                                return -ENOMEM;
                }
        }
        return 0;
}

static int sort_strings(const void *x, const void *y) {
        return strcmp(json_string_value(*(json_t *const *)x),
                      json_string_value(*(json_t *const *)y));
}

static json_t *sorted(json_t *arr) {
        size_t n = json_array_size(arr);
        json_t **items;
        json_t *out;

        if (!arr)
                return NULL;
        items = calloc(n ? n : 1, sizeof(*items));
        out = items ? json_array() : NULL;
        for (size_t i = 0; out && i < n; i++)
                items[i] = json_array_get(arr, i);
        if (out)
                qsort(items, n, sizeof(*items), sort_strings);
        for (size_t i = 0; out && i < n; i++)
                if (json_array_append(out, items[i]) < 0) {
                        json_decref(out);
                        out = NULL;
                }
        free(items);
        json_decref(arr);
        return out;
}

void serve_sandbox_update(ServeCtx *c) {
        _cleanup_free_ char *stored = NULL, *text = NULL, *now = NULL;
        hutch_policy *p = NULL;
        UpdateArgs a = {};
        hutch_error err = {};
        json_t *root = NULL, *merged = NULL, *before = NULL, *after = NULL, *changed = NULL;
        int r;

        r = serve_body_object(c, update_fields, ELEMENTSOF(update_fields), &a, &root);
        if (r < 0)
                return;
        r = hutch_get_policy(c->param, &stored, &err);
        if (r < 0) {
                serve_reply_api_error(c->req, r, &err, NULL);
                goto out;
        }
        before = json_loads(stored, 0, NULL);
        merged = before ? json_deep_copy(before) : NULL;
        if (!json_is_object(merged) || merge_patch(merged, a.policy) < 0 ||
            !(text = json_dumps(merged, JSON_COMPACT))) {
                serve_reply_errno(c->req, ENOMEM, NULL, "out of memory");
                goto out;
        }
        p = hutch_policy_new();
        r = p ? hutch_policy_load_json(p, text, &err) : -ENOMEM;
        if (r >= 0)
                r = hutch_update(c->param, p, &err);
        if (r < 0) {
                serve_reply_api_error(c->req, r, &err, "/policy");
                goto out;
        }
        r = hutch_get_policy(c->param, &now, &err);
        if (r < 0) {
                serve_reply_api_error(c->req, r, &err, NULL);
                goto out;
        }
        after = json_loads(now, 0, NULL);
        changed = json_array();
        if (!json_is_object(after) || !changed ||
            changed_fields(before, after, NULL, changed) < 0) {
                serve_reply_errno(c->req, ENOMEM, NULL, "out of memory");
                goto out;
        }
        serve_reply_json(
                c->req, 200,
                json_pack("{s:o,s:O}", "changed", sorted(TAKE_PTR(changed)), "policy", after));
out:
        hutch_policy_free(p);
        json_decref(changed);
        json_decref(after);
        json_decref(before);
        json_decref(merged);
        json_decref(root);
}
