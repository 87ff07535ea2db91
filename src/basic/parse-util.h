/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Checked number parsing: the whole string must be consumed, no sign, no
 * leading/trailing space, no overflow. All return 0 and write @ret only on
 * success; -EINVAL for a malformed string, -ERANGE for an overflow. */

#include <stdbool.h>
#include <stdint.h>

int safe_atou64(const char *s, uint64_t *ret);
int safe_atou32(const char *s, uint32_t *ret);
int safe_atoi(const char *s, int *ret);

/* Parses a byte size: digits, an optional fraction of up to 9 digits, and
 * an optional suffix k, m, g, t (binary multiples, case-insensitive, an
 * optional trailing 'b' or 'ib' accepted: "64m", "1G", "1.5g", "512KiB",
 * "100b", "4096"); a fraction is rounded down to a whole byte. -EINVAL for
 * "12q", "", "-1", "1.", ".5g", "1.5" (a fraction of a byte); -ERANGE when
 * the value does not fit in 64 bits. */
int parse_size(const char *s, uint64_t *ret);

/* Parses a duration into milliseconds: digits with a unit ms, s, m or h
 * ("30s", "1500ms", "2m"); a bare "0" is accepted and means zero. A number
 * without a unit other than 0 is -EINVAL (ambiguous); -ERANGE on overflow. */
int parse_duration_ms(const char *s, uint64_t *ret);

/* Parses a boolean: 1/yes/true/on and 0/no/false/off. */
int parse_boolean(const char *s, bool *ret);

/* The value of hex digit @c (0-9, a-f, A-F), or -1. */
int hex_digit(char c);
