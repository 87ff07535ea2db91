/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* NULL-terminated string vectors (argv, envp). A NULL vector is a valid
 * empty one. Functions that add take copies of their arguments unless the
 * name says _take (which takes ownership of the string even on failure). */

#include <stdbool.h>
#include <stddef.h>

#include "macro.h"

char **strv_free(char **l);
DEFINE_POINTER_CLEANUP(char *, strv_free)
#define _cleanup_strv_free_ _cleanup_(strv_freep)

size_t strv_length(char *const *l);

/* Appends @s (copied). Returns 0 or -ENOMEM. */
int strv_extend(char ***l, const char *s);
/* Appends @s, taking ownership of it (freed on failure too). */
int strv_push_take(char ***l, char *s);
/* Deep copy; returns NULL on OOM (an empty input gives an empty vector). */
char **strv_copy(char *const *l);
bool strv_contains(char *const *l, const char *s);

/* Environment-style vectors of "KEY=VALUE" strings. */

/* Returns the value of @key in @l, or NULL. */
const char *strv_env_get(char *const *l, const char *key);
/* Sets KEY=VALUE, replacing an existing entry for KEY. Returns 0 or -ENOMEM. */
int strv_env_set(char ***l, const char *key, const char *value);
/* Returns true if @key is a valid environment name: [A-Za-z_][A-Za-z0-9_]*. */
bool env_name_is_valid(const char *key);
