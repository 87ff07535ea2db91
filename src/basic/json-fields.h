/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Table-driven decoding of a JSON object (docs/style.md §7): a static
 * table of {name, type, offset, mandatory} per object, one decoder for
 * every JSON document hutch reads from a client or a file: the API's
 * request bodies (src/cli/serve-*.c), the policy document (one table per
 * object, src/lib/policy/policy-json.c), MCP's tool arguments, hutch-proxy's
 * configuration document and its secrets (src/proxy/proxy-config.c) and a
 * snapshot archive's manifest and its layers (src/lib/store/archive-import.c).
 *
 * The errors are the API's: "unknown field 'x'", "'x' must be a string",
 * "missing field 'x'", each -EINVAL with @reterr's JSON pointer naming the
 * member ("/argv/2" for an array's element).
 *
 * A field whose value needs more than a type (a size like "512m", an enum
 * name, a nested object, an array of objects) is JSON_FIELD_CUSTOM: the
 * table names the JSON types it accepts and a parse function that decodes
 * it, with its own messages. */

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
        JSON_FIELD_CUSTOM, /* decoded by the field's @parse (below) */
} JsonFieldType;

/* The JSON types a JSON_FIELD_CUSTOM field accepts (JsonFieldDef.json_types). */
typedef enum JsonTypeMask {
        JSON_TYPE_OBJECT = 1 << 0,
        JSON_TYPE_ARRAY = 1 << 1,
        JSON_TYPE_STRING = 1 << 2,
        JSON_TYPE_INTEGER = 1 << 3,
        JSON_TYPE_REAL = 1 << 4,
        JSON_TYPE_BOOLEAN = 1 << 5,
        JSON_TYPE_NULL = 1 << 6,
} JsonTypeMask;

typedef struct JsonFieldDef JsonFieldDef;

/* Decodes the value @v of field @f (its JSON type already one of
 * @f->json_types) into @dest, the struct json_fields_decode() was given
 * (the field's own destination, if it has one, is at @f->offset). On
 * failure returns -errno with @reterr (never NULL) filled by
 * hutch_error_set(): its pointer is relative to the value ("" for the value
 * itself, "/0/source" inside it); the decoder puts the member's name in
 * front. A parse may store as it goes: what it stored before a later
 * member fails is the caller's to undo. */
typedef int (*JsonFieldParse)(const JsonFieldDef *f, json_t *v, void *dest, HutchError *reterr);

struct JsonFieldDef {
        const char *name;
        JsonFieldType type;
        size_t offset; /* of the destination in the caller's struct */
        bool mandatory;
        /* JSON_FIELD_CUSTOM only: */
        JsonFieldParse parse;
        unsigned json_types; /* JsonTypeMask; another type fails as json_type_error() says */
        const void *data;    /* for @parse: a setter, a nested table, ... */
};

typedef enum JsonFieldsFlags {
        /* A missing mandatory member's pointer names the object that lacks
         * it ("/binds/1"), not the member ("/binds/1/target"): the policy's
         * way, so a locator finds a line. */
        JSON_FIELDS_MISSING_AT_OBJECT = 1 << 0,
        /* The members are taken in the table's order, not the document's:
         * first every member is checked to be named (unless
         * JSON_FIELDS_OPEN), then each field in turn is checked for being
         * missing, of its type, and parsed, before the next field is looked
         * at. For a document whose fields depend on the ones before (a
         * format and its version first; a count before the list it bounds),
         * so the error reported is the one of the first field that fails. */
        JSON_FIELDS_TABLE_ORDER = 1 << 1,
        /* Members the table does not name are left alone, not refused: for
         * an object that holds a caller's members beside the decoder's own
         * (a snapshot archive's manifest). */
        JSON_FIELDS_OPEN = 1 << 2,
} JsonFieldsFlags;

/* What the decoder itself refuses (JsonFieldsOptions.message). */
typedef enum JsonFieldsRefusal {
        JSON_FIELDS_UNKNOWN,    /* a member the table does not name (@f NULL) */
        JSON_FIELDS_WRONG_TYPE, /* a member of a type its field does not take */
        JSON_FIELDS_MISSING,    /* a mandatory member is absent (@v NULL) */
} JsonFieldsRefusal;

typedef struct JsonFieldsOptions {
        unsigned flags; /* JsonFieldsFlags */
        /* Words a refusal in the caller's own terms (MCP says "unknown
         * argument"): fills @reterr by hutch_error_set() and returns its
         * -errno; the decoder then sets the pointer (and at_key) as for its
         * own words. NULL: "unknown field 'x'", "'x' must be a string",
         * "expected a string, got null" (JSON_FIELD_CUSTOM), "missing field
         * 'x'". */
        int (*message)(JsonFieldsRefusal what, const char *key, const JsonFieldDef *f, json_t *v,
                       const void *userdata, HutchError *reterr);
        const void *userdata;
} JsonFieldsOptions;

/* "/" + @key escaped as RFC 6901 says, plus "/@index" when @index >= 0,
 * into @buf (truncated to @size). */
void json_member_pointer(char *buf, size_t size, const char *key, long index);

/* The entry of @fields named @name, or NULL. */
const JsonFieldDef *json_fields_find(const JsonFieldDef *fields, size_t n_fields, const char *name);

/* The first member of object @obj that @fields does not name, or NULL. */
const char *json_fields_unknown(json_t *obj, const JsonFieldDef *fields, size_t n_fields);

/* Decodes the JSON object @obj (the caller checked it is one) into @dest
 * by @fields: each member must be named in the table and have its type;
 * null counts as absent (the destination keeps its default), except for a
 * JSON_FIELD_CUSTOM field, where null is a value like any other (refused
 * unless json_types has JSON_TYPE_NULL, and then present for "mandatory"). The members are checked
 * in the document's order, and a JSON_FIELD_CUSTOM member is parsed as it is met (so the first
 * error in the document is the one reported); then missing mandatory members (with
 * JSON_FIELDS_TABLE_ORDER: unknown members first, then field by field in the table's order); the
 * other types are stored only after all of that passed. Unknown members (@reterr->at_key set),
 * wrong types and missing mandatory members are -EINVAL with @reterr's pointer naming the member; a
 * parse's own error keeps its errno and message, its pointer behind the member's; -ENOMEM with "out
 * of memory". On failure the STRV and ENV destinations already filled are freed and reset to NULL.
 */
int json_fields_decode(json_t *obj, const JsonFieldDef *fields, size_t n_fields, void *dest,
                       HutchError *reterr);
/* Same, with @options (NULL: the defaults). */
int json_fields_decode_with(json_t *obj, const JsonFieldDef *fields, size_t n_fields, void *dest,
                            const JsonFieldsOptions *options, HutchError *reterr);

/* Refuses @v for not being one of the JsonTypeMask @expected: -EINVAL,
 * "expected a string or an integer, got an array", pointer "". */
int json_type_error(HutchError *reterr, unsigned expected, json_t *v);
/* The JsonTypeMask bit of @v's type. */
unsigned json_type_mask(json_t *v);
/* "an object", "a string", "null", ...: @v's type in a message. */
const char *json_type_name(json_t *v);

/* Puts "/@key" (escaped as RFC 6901 says) in front of @e's pointer, for an
 * error found inside the member @key; with json_error_prefix_index(),
 * "/@index" for an array's element. A pointer longer than
 * HUTCH_ERROR_POINTER_MAX - 1 loses its end. */
void json_error_prefix(HutchError *e, const char *key);
void json_error_prefix_index(HutchError *e, size_t index);
