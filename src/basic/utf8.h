/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* UTF-8 checks for text that goes into JSON (whose strings must be valid
 * UTF-8): command output, file contents and names, which may hold any
 * byte. Valid means RFC 3629: no overlong forms, no surrogates (U+D800 to
 * U+DFFF), nothing above U+10FFFF. NUL is a valid character here; the
 * callers that cannot hold one check for it themselves. */

#include <stdbool.h>
#include <stddef.h>

/* The length (1 to 4) of the valid sequence @s starts with, looking at
 * most at @n bytes, or 0 when it does not start one (a cut-off sequence at
 * the end of @s is not valid). */
size_t utf8_sequence_length(const char *s, size_t n);

/* Whether the @n bytes at @s are all valid UTF-8. */
bool utf8_is_valid_n(const char *s, size_t n);

/* A copy of the @n bytes at @s in which each byte that does not start a
 * valid sequence is replaced by U+FFFD (3 bytes), NUL-terminated; its
 * length (without the terminator) goes to @ret_len when not NULL. Returns
 * 0, or -ENOMEM (also when the result's size would overflow). */
int utf8_sanitize(const char *s, size_t n, char **ret, size_t *ret_len);
