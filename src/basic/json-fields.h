/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Table-driven decoding of a JSON object (docs/style.md §7): a static
 * table of {name, type, offset, mandatory} per object, one decoder for
 * every JSON document hutch reads from a client or a file: the API's
 * request bodies (src/cli/serve-*.c), the members a proxy configuration
 * and a snapshot archive's manifest may have (json_fields_find()).
 *
 * The errors are the API's: "unknown field 'x'", "'x' must be a string",
 * "missing field 'x'", each -EINVAL with @reterr's JSON pointer naming the
 * member ("/argv/2" for an array's element). */

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "hutch-error.h"

typedef enum JsonFieldType {
        JSON_FIELD_STRING, /* const char *, borrowed from the JSON object */
        JSON_FIELD_STRV,   /* char **, a new NULL-terminated copy: strv_free() */
        JSON_FIELD_BOOL,   /* bool */
        JSON_FIELD_U64,    /* uint64_t: a JSON integer >= 0 */
        JSON_FIELD_OBJECT, /* json_t *, borrowed */
        JSON_FIELD_ENV,    /* char ** of "KEY=VALUE", a new copy: strv_free(); from an
                            * object of strings (API 1.1) or an array of "KEY=VALUE"
                            * strings (the API 1.0 shape, still accepted) */
        JSON_FIELD_ANY,    /* json_t *, borrowed, of any type: the caller checks it */
} JsonFieldType;

typedef struct JsonFieldDef {
        const char *name;
        JsonFieldType type;
        size_t offset; /* of the destination in the caller's struct */
        bool mandatory;
} JsonFieldDef;

/* "/" + @key escaped as RFC 6901 says, plus "/@index" when @index >= 0,
 * into @buf (truncated to @size). */
void json_member_pointer(char *buf, size_t size, const char *key, long index);

/* The entry of @fields named @name, or NULL. */
const JsonFieldDef *json_fields_find(const JsonFieldDef *fields, size_t n_fields, const char *name);

/* The first member of object @obj that @fields does not name, or NULL. */
const char *json_fields_unknown(json_t *obj, const JsonFieldDef *fields, size_t n_fields);

/* Decodes the JSON object @obj (the caller checked it is one) into @dest
 * by @fields: each member must be named in the table and have its type;
 * null counts as absent (the destination keeps its default). Everything is
 * checked before anything is stored. Unknown members, wrong types and
 * missing mandatory members are -EINVAL with @reterr's pointer naming the
 * member; -ENOMEM with "out of memory". On failure the STRV and ENV
 * destinations already filled are freed and reset to NULL. */
int json_fields_decode(json_t *obj, const JsonFieldDef *fields, size_t n_fields, void *dest,
                       HutchError *reterr);
