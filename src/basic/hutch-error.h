/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* HutchError carries a failure across a parse/validation boundary (policy
 * JSON, CLI flags, the clone boundary): the errno, a one-line message and,
 * for JSON input, a JSON pointer and line. Callers pass NULL when they do
 * not want the detail. Internal code returns -errno only. */

#include <stdarg.h>
#include <stdbool.h>

#include "macro.h"

#define HUTCH_ERROR_MSG_MAX 512
#define HUTCH_ERROR_POINTER_MAX 256

typedef struct HutchError {
        int errnum;                            /* positive errno */
        unsigned line;                         /* 1-based line in the input, 0 if unknown */
        unsigned column;                       /* 1-based column, 0 if unknown */
        char msg[HUTCH_ERROR_MSG_MAX];         /* lowercase, no trailing full stop */
        char pointer[HUTCH_ERROR_POINTER_MAX]; /* JSON pointer ("/workspace/mode"), or "" */
        bool at_key; /* the pointer's last member is wrong by its name (unknown, an invalid
                      * variable name), not its value: a locator shows the key */
} HutchError;

/* Fills @reterr (when non-NULL) and returns -@errnum, so a caller can write
 * `return hutch_error_set(reterr, EINVAL, "bad size '%s'", s);`.
 * @errnum must be a positive errno value. */
int hutch_error_set(HutchError *reterr, int errnum, const char *fmt, ...) _printf_(3, 4);

/* Same, with a JSON pointer naming the offending field. */
int hutch_error_set_pointer(HutchError *reterr, int errnum, const char *pointer, const char *fmt,
                            ...) _printf_(4, 5);
