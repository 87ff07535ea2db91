/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json-fields.h"
#include "macro.h"
#include "strv.h"

void json_member_pointer(char *buf, size_t size, const char *key, long index) {
        size_t n = 0;

        if (size < 2)
                return;
        buf[n++] = '/';
        for (const char *k = key; *k && n + 3 < size; k++) {
                if (*k == '~' || *k == '/') {
                        buf[n++] = '~';
                        buf[n++] = *k == '~' ? '0' : '1';
                } else
                        buf[n++] = *k;
        }
        buf[n] = '\0';
        if (index >= 0)
                (void)snprintf(buf + n, size - n, "/%ld", index);
}

static const char *field_type_name(JsonFieldType t) {
        switch (t) {
        case JSON_FIELD_STRING:
                return "a string";
        case JSON_FIELD_STRV:
                return "an array of strings";
        case JSON_FIELD_BOOL:
                return "a boolean";
        case JSON_FIELD_U64:
                return "an integer >= 0";
        case JSON_FIELD_OBJECT:
                return "an object";
        case JSON_FIELD_ENV:
                return "an object of strings ({\"KEY\": \"VALUE\"})";
        case JSON_FIELD_ANY:
                return "a JSON value";
        }
        return "?";
}

static bool json_string_is_clean(json_t *v) {
        return json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v);
}

/* Checks @v against @f's type. Returns -1 when it fits, else the index of
 * the bad array element, or -2 for the value itself. */
static long field_check(const JsonFieldDef *f, json_t *v) {
        size_t i;
        json_t *e;

        switch (f->type) {
        case JSON_FIELD_STRING:
                return json_string_is_clean(v) ? -1 : -2;
        case JSON_FIELD_STRV:
                if (!json_is_array(v))
                        return -2;
                json_array_foreach(v, i, e) if (!json_string_is_clean(e)) return (long)MIN(
                        i, (size_t)LONG_MAX);
                return -1;
        case JSON_FIELD_BOOL:
                return json_is_boolean(v) ? -1 : -2;
        case JSON_FIELD_U64:
                return json_is_integer(v) && json_integer_value(v) >= 0 ? -1 : -2;
        case JSON_FIELD_OBJECT:
                return json_is_object(v) ? -1 : -2;
        case JSON_FIELD_ENV: {
                const char *key;

                if (json_is_array(v)) {
                        json_array_foreach(v, i, e) if (!json_string_is_clean(e)) return (long)MIN(
                                i, (size_t)LONG_MAX);
                        return -1;
                }
                if (!json_is_object(v))
                        return -2;
                json_object_foreach(v, key, e) if (!json_string_is_clean(e)) return -2;
                return -1;
        }
        case JSON_FIELD_ANY:
                return -1;
        }
        return -2;
}

static int field_store(const JsonFieldDef *f, json_t *v, void *dest) {
        char *at = (char *)dest + f->offset;
        size_t i;
        json_t *e;

        switch (f->type) {
        case JSON_FIELD_STRING:
                *(const char **)(void *)at = json_string_value(v);
                return 0;
        case JSON_FIELD_STRV: {
                char **l = calloc(json_array_size(v) + 1, sizeof(char *));

                if (!l)
                        return -ENOMEM;
                json_array_foreach(v, i, e) {
                        l[i] = strdup(json_string_value(e));
                        if (!l[i]) {
                                strv_free(l);
                                return -ENOMEM;
                        }
                }
                *(char ***)(void *)at = l;
                return 0;
        }
        case JSON_FIELD_BOOL:
                *(bool *)(void *)at = json_is_true(v);
                return 0;
        case JSON_FIELD_U64:
                *(uint64_t *)(void *)at = (uint64_t)json_integer_value(v);
                return 0;
        case JSON_FIELD_OBJECT:
        case JSON_FIELD_ANY:
                *(json_t **)(void *)at = v;
                return 0;
        case JSON_FIELD_ENV: {
                size_t n = json_is_array(v) ? json_array_size(v) : json_object_size(v);
                char **l = calloc(n + 1, sizeof(char *));
                const char *key;

                if (!l)
                        return -ENOMEM;
                i = 0;
                if (json_is_array(v))
                        json_array_foreach(v, i, e) {
                                l[i] = strdup(json_string_value(e));
                                if (!l[i]) {
                                        strv_free(l);
                                        return -ENOMEM;
                                }
                        }
                else
                        json_object_foreach(v, key, e) {
                                if (asprintf(&l[i], "%s=%s", key, json_string_value(e)) < 0) {
                                        l[i] = NULL;
                                        strv_free(l);
                                        return -ENOMEM;
                                }
                                i++;
                        }
                *(char ***)(void *)at = l;
                return 0;
        }
        }
        return -EINVAL;
}

const JsonFieldDef *json_fields_find(const JsonFieldDef *fields, size_t n, const char *name) {
        for (size_t i = 0; i < n; i++)
                if (strcmp(fields[i].name, name) == 0)
                        return &fields[i];
        return NULL;
}

int json_fields_decode(json_t *obj, const JsonFieldDef *fields, size_t n_fields, void *dest,
                       HutchError *reterr) {
        char ptr[HUTCH_ERROR_POINTER_MAX];
        const char *key;
        json_t *v;
        int r = 0;

        /* Everything is checked before anything is stored. */
        json_object_foreach(obj, key, v) {
                const JsonFieldDef *f = json_fields_find(fields, n_fields, key);
                long bad;

                if (!f) {
                        json_member_pointer(ptr, sizeof(ptr), key, -1);
                        return hutch_error_set_pointer(reterr, EINVAL, ptr, "unknown field '%.64s'",
                                                       key);
                }
                if (json_is_null(v))
                        continue;
                bad = field_check(f, v);
                if (bad == -1)
                        continue;
                json_member_pointer(ptr, sizeof(ptr), key, bad >= 0 ? bad : -1);
                return hutch_error_set_pointer(
                        reterr, EINVAL, ptr, "'%s' must be %s%s", f->name, field_type_name(f->type),
                        f->type == JSON_FIELD_STRING || f->type == JSON_FIELD_STRV ||
                                        f->type == JSON_FIELD_ENV
                                ? " (without NUL characters)"
                                : "");
        }
        for (size_t i = 0; i < n_fields; i++) {
                v = json_object_get(obj, fields[i].name);
                if (fields[i].mandatory && (!v || json_is_null(v))) {
                        json_member_pointer(ptr, sizeof(ptr), fields[i].name, -1);
                        return hutch_error_set_pointer(reterr, EINVAL, ptr, "missing field '%s'",
                                                       fields[i].name);
                }
        }
        for (size_t i = 0; i < n_fields && r >= 0; i++) {
                v = json_object_get(obj, fields[i].name);
                if (v && !json_is_null(v))
                        r = field_store(&fields[i], v, dest);
        }
        if (r >= 0)
                return 0;
        for (size_t i = 0; i < n_fields; i++)
                if (fields[i].type == JSON_FIELD_STRV || fields[i].type == JSON_FIELD_ENV) {
                        char ***l = (char ***)(void *)((char *)dest + fields[i].offset);

                        *l = strv_free(*l);
                }
        return hutch_error_set(reterr, -r, "out of memory");
}

const char *json_fields_unknown(json_t *obj, const JsonFieldDef *fields, size_t n_fields) {
        const char *key;
        json_t *v;

        json_object_foreach(obj, key, v) if (!json_fields_find(fields, n_fields, key)) return key;
        return NULL;
}
