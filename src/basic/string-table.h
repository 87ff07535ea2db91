/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* An enum's names (docs/style.md §3: each enum has _to_string and
 * _from_string), from one table indexed by the enum:
 *
 *   static const char *const mode_table[_MODE_MAX] = {[MODE_A] = "a", ...};
 *   DEFINE_STRING_TABLE_LOOKUP(mode, Mode, mode_table);
 *
 * defines `const char *mode_to_string(Mode m)` (NULL out of range) and
 * `Mode mode_from_string(const char *s)` (-EINVAL, the enum's _INVALID,
 * for NULL or a name not in the table). */

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "macro.h"

/* The index of @s in @table of @n names (NULL entries never match), or
 * -EINVAL. */
static inline int string_table_lookup(const char *const *table, size_t n, const char *s) {
        for (size_t i = 0; s && i < n; i++)
                if (table[i] && strcmp(table[i], s) == 0)
                        return (int)i;
        return -EINVAL;
}

#define DEFINE_STRING_TABLE_LOOKUP(name, type, table)                                              \
        const char *name##_to_string(type v) {                                                     \
                if ((long)v < 0 || (size_t)v >= ELEMENTSOF(table))                                 \
                        return NULL;                                                               \
                return (table)[v];                                                                 \
        }                                                                                          \
        type name##_from_string(const char *s) {                                                   \
                return (type)string_table_lookup((table), ELEMENTSOF(table), s);                   \
        }                                                                                          \
        struct string_table_trailing_semicolon
