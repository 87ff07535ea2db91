/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
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
        case JSON_FIELD_CUSTOM:
                return "a value its parse accepts";
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
        case JSON_FIELD_CUSTOM:
                return json_type_mask(v) & f->json_types ? -1 : -2;
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
        case JSON_FIELD_CUSTOM:
                return 0; /* parsed in the first pass */
        }
        return -EINVAL;
}

const JsonFieldDef *json_fields_find(const JsonFieldDef *fields, size_t n, const char *name) {
        for (size_t i = 0; i < n; i++)
                if (strcmp(fields[i].name, name) == 0)
                        return &fields[i];
        return NULL;
}

/* Fills @reterr for a refusal of the decoder's own: by @o's hook when there
 * is one, else from @fmt; then the pointer @ptr and @at_key. */
static int refuse(const JsonFieldsOptions *o, JsonFieldsRefusal what, const char *key,
                  const JsonFieldDef *f, json_t *v, const char *ptr, bool at_key,
                  HutchError *reterr, const char *fmt, ...) _printf_(9, 10);
static int refuse(const JsonFieldsOptions *o, JsonFieldsRefusal what, const char *key,
                  const JsonFieldDef *f, json_t *v, const char *ptr, bool at_key,
                  HutchError *reterr, const char *fmt, ...) {
        HutchError e = {};
        va_list ap;

        if (o && o->message)
                (void)o->message(what, key, f, v, o->userdata, &e);
        if (e.errnum == 0) {
                va_start(ap, fmt);
                (void)vsnprintf(e.msg, sizeof(e.msg), fmt, ap);
                va_end(ap);
                e.errnum = EINVAL;
        }
        (void)snprintf(e.pointer, sizeof(e.pointer), "%s", ptr);
        e.at_key = at_key;
        if (reterr)
                *reterr = e;
        return -e.errnum;
}

/* Runs @f's parse on @v and, on failure, puts the member's name in front of
 * the pointer the parse left in @reterr. */
static int field_parse(const JsonFieldsOptions *o, const JsonFieldDef *f, const char *key,
                       json_t *v, void *dest, HutchError *reterr) {
        char ptr[HUTCH_ERROR_POINTER_MAX];
        HutchError e = {};
        int r;

        if (!(json_type_mask(v) & f->json_types)) {
                (void)json_type_error(&e, f->json_types, v);
                json_member_pointer(ptr, sizeof(ptr), key, -1);
                return refuse(o, JSON_FIELDS_WRONG_TYPE, key, f, v, ptr, false, reterr, "%s",
                              e.msg);
        }
        r = f->parse(f, v, dest, &e);
        if (r >= 0)
                return 0;
        if (e.errnum == 0)
                (void)hutch_error_set(&e, -r, "%s", r == -ENOMEM ? "out of memory" : strerror(-r));
        json_error_prefix(&e, key);
        if (reterr)
                *reterr = e;
        return -e.errnum;
}

/* Checks the member @key of value @v against its field @f: a custom one is
 * parsed, another type checked (stored later, by field_store()). */
static int member_check(const JsonFieldsOptions *o, const JsonFieldDef *f, const char *key,
                        json_t *v, void *dest, HutchError *reterr) {
        char ptr[HUTCH_ERROR_POINTER_MAX];
        long bad;

        if (f->type == JSON_FIELD_CUSTOM)
                return field_parse(o, f, key, v, dest, reterr);
        if (json_is_null(v))
                return 0;
        bad = field_check(f, v);
        if (bad == -1)
                return 0;
        json_member_pointer(ptr, sizeof(ptr), key, bad >= 0 ? bad : -1);
        return refuse(o, JSON_FIELDS_WRONG_TYPE, key, f, v, ptr, false, reterr, "'%s' must be %s%s",
                      f->name, field_type_name(f->type),
                      f->type == JSON_FIELD_STRING || f->type == JSON_FIELD_STRV ||
                                      f->type == JSON_FIELD_ENV
                              ? " (without NUL characters)"
                              : "");
}

int json_fields_decode_with(json_t *obj, const JsonFieldDef *fields, size_t n_fields, void *dest,
                            const JsonFieldsOptions *o, HutchError *reterr) {
        unsigned flags = o ? o->flags : 0;
        char ptr[HUTCH_ERROR_POINTER_MAX];
        const char *key;
        json_t *v;
        int r = 0;

        /* Everything is checked before anything is stored, but for the
         * custom fields, parsed as they come. */
        json_object_foreach(obj, key, v) {
                const JsonFieldDef *f = json_fields_find(fields, n_fields, key);

                if (!f && !(flags & JSON_FIELDS_OPEN)) {
                        json_member_pointer(ptr, sizeof(ptr), key, -1);
                        return refuse(o, JSON_FIELDS_UNKNOWN, key, NULL, v, ptr, true, reterr,
                                      "unknown field '%.64s'", key);
                }
                if (!f || (flags & JSON_FIELDS_TABLE_ORDER))
                        continue;
                r = member_check(o, f, key, v, dest, reterr);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < n_fields; i++) {
                v = json_object_get(obj, fields[i].name);
                if (fields[i].mandatory &&
                    (!v || (json_is_null(v) && fields[i].type != JSON_FIELD_CUSTOM))) {
                        if (flags & JSON_FIELDS_MISSING_AT_OBJECT)
                                ptr[0] = '\0';
                        else
                                json_member_pointer(ptr, sizeof(ptr), fields[i].name, -1);
                        return refuse(o, JSON_FIELDS_MISSING, fields[i].name, &fields[i], NULL, ptr,
                                      false, reterr, "missing field '%s'", fields[i].name);
                }
                if (v && (flags & JSON_FIELDS_TABLE_ORDER)) {
                        r = member_check(o, &fields[i], fields[i].name, v, dest, reterr);
                        if (r < 0)
                                return r;
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

int json_fields_decode(json_t *obj, const JsonFieldDef *fields, size_t n_fields, void *dest,
                       HutchError *reterr) {
        return json_fields_decode_with(obj, fields, n_fields, dest, NULL, reterr);
}

unsigned json_type_mask(json_t *v) {
        switch (json_typeof(v)) {
        case JSON_OBJECT:
                return JSON_TYPE_OBJECT;
        case JSON_ARRAY:
                return JSON_TYPE_ARRAY;
        case JSON_STRING:
                return JSON_TYPE_STRING;
        case JSON_INTEGER:
                return JSON_TYPE_INTEGER;
        case JSON_REAL:
                return JSON_TYPE_REAL;
        case JSON_TRUE:
        case JSON_FALSE:
                return JSON_TYPE_BOOLEAN;
        case JSON_NULL:
                return JSON_TYPE_NULL;
        }
        return 0;
}

static const char *const json_type_names[] = {
        "an object", "an array", "a string", "an integer", "a real number", "a boolean", "null",
};

const char *json_type_name(json_t *v) {
        unsigned m = json_type_mask(v);

        for (size_t i = 0; i < ELEMENTSOF(json_type_names); i++)
                if (m == 1U << i)
                        return json_type_names[i];
        return "an unknown type";
}

int json_type_error(HutchError *reterr, unsigned expected, json_t *v) {
        char buf[128] = "";
        size_t n = 0;

        for (size_t i = 0; i < ELEMENTSOF(json_type_names); i++)
                if (expected & (1U << i)) {
                        int k = snprintf(buf + n, sizeof(buf) - n, "%s%s", n > 0 ? " or " : "",
                                         json_type_names[i]);
                        if (k < 0 || (size_t)k >= sizeof(buf) - n)
                                break;
                        n += (size_t)k;
                }
        return hutch_error_set(reterr, EINVAL, "expected %s, got %s", buf, json_type_name(v));
}

static void error_prefix(HutchError *e, const char *token) {
        char ptr[HUTCH_ERROR_POINTER_MAX];
        size_t n;

        json_member_pointer(ptr, sizeof(ptr), token, -1);
        n = strlen(ptr);
        (void)snprintf(ptr + n, sizeof(ptr) - n, "%s", e->pointer);
        memcpy(e->pointer, ptr, sizeof(e->pointer));
}

void json_error_prefix(HutchError *e, const char *key) {
        error_prefix(e, key);
}

void json_error_prefix_index(HutchError *e, size_t index) {
        char buf[32];

        (void)snprintf(buf, sizeof(buf), "%zu", index);
        error_prefix(e, buf);
}

const char *json_fields_unknown(json_t *obj, const JsonFieldDef *fields, size_t n_fields) {
        const char *key;
        json_t *v;

        json_object_foreach(obj, key, v) if (!json_fields_find(fields, n_fields, key)) return key;
        return NULL;
}
