/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The pure parsers of envd's REST routes (e2b-envd.c, docs/e2b-envd.md),
 * apart so that tests/unit/test-e2b-connect.c and
 * tests/fuzz/fuzz-e2b-envelope.c cover them: a query's parameters, the
 * multipart/form-data body of POST /files, a chunk-size line. Every
 * input is a client's; nothing here logs or touches the network. */

#include <stddef.h>
#include <stdint.h>

/* The most parts one multipart body may have. */
#define ENVD_FORM_PARTS_MAX 1024

/* The value of a hex digit, or -1. */
int envd_hexval(char c);

/* The value of query parameter @name in @query (no '?'), percent-decoded
 * ('+' is a space), as a new string in @ret; NULL there when absent.
 * -EINVAL for a bad escape or an encoded NUL, -ENOMEM. */
int envd_query_get(const char *query, const char *name, char **ret);

/* The boundary parameter of a multipart/form-data Content-Type @ct, as a
 * new string (1 to 70 characters, quoted or not). -EINVAL otherwise. */
int envd_form_boundary(const char *ct, char **ret);

/* One part of a multipart/form-data body. */
typedef struct EnvdFormPart {
        char *filename;   /* its filename="..." (%22, %0D, %0A decoded), new */
        const char *data; /* its bytes, pointing into the body */
        size_t len;
} EnvdFormPart;

/* Splits @body (@len bytes) by @boundary into @parts (room for
 * ENVD_FORM_PARTS_MAX, zeroed by the caller), each with a filename.
 * Returns 0 with their number in @ret_n; -EINVAL for a malformed body or
 * a part without a filename, -E2BIG beyond ENVD_FORM_PARTS_MAX, -ENOMEM.
 * The filenames already set are the caller's to free in every case. */
int envd_form_parse(const char *body, size_t len, const char *boundary, EnvdFormPart *parts,
                    size_t *ret_n);
