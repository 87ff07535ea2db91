/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Base64 (RFC 4648 §4 and, asked for, §5's URL-safe alphabet), decoded
 * strictly: one input has one meaning. Every decoder of the tree (the
 * API's stdin_base64, proto3 JSON bytes, registry credentials, the
 * proxy's masking) goes through here. */

#include <stddef.h>
#include <stdint.h>

typedef enum Base64Flags {
        /* '-' and '_' are taken as '+' and '/' (both alphabets at once, as
         * proto3 JSON reads bytes). */
        BASE64_URL_TOO = 1 << 0,
        /* The padding may be left out (then the length is not a multiple
         * of 4); when present it must still be exactly right. */
        BASE64_PAD_OPTIONAL = 1 << 1,
} Base64Flags;

/* The base64 (standard alphabet, padded) of the @len bytes at @data as a
 * new NUL-terminated string. -ENOMEM (also when its size would overflow). */
int base64_encode(const void *data, size_t len, char **ret);

/* The 6-bit value of @c in either alphabet ('+' and '-' are 62, '/' and
 * '_' are 63), or -1 when it is none of them. */
int base64_value(char c);

/* Decodes the @len characters at @s into a new buffer, NUL-terminated (the
 * NUL not counted in @ret_len). Refused with -EINVAL: a character outside
 * the alphabet (whitespace too), padding that is wrong or missing (unless
 * BASE64_PAD_OPTIONAL), a lone last character, and bits left over in the
 * last character that are not zero (so no two inputs decode to the same
 * bytes). -ENOMEM. On error *@ret is untouched. */
int base64_decode(const char *s, size_t len, Base64Flags flags, uint8_t **ret, size_t *ret_len);
