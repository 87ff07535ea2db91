/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Scratch files for the unit tests (tests/unit/test-util.c), shared
 * instead of copied into each test. Each fails the running test (cmocka's
 * fail_msg()) rather than returning an error. */

#include <stddef.h>
#include <sys/types.h>

/* A new directory /tmp/hutch-test-XXXXXX, by its canonical path (/tmp may
 * be a symlink; policies store canonical paths); free() it. */
char *make_tmpdir(void);

/* Removes the tree at *@dir (when set) and frees the string. */
void tmpdir_removep(char **dir);
#define _cleanup_tmpdir_ _cleanup_(tmpdir_removep)

/* "@a/@b", a new string. */
char *path_join(const char *a, const char *b);

/* Creates or truncates @path (mode 0644, or @mode) with @len bytes of
 * @data; write_text() writes the string @text. */
void write_file(const char *path, const void *data, size_t len);
void write_file_mode(const char *path, const void *data, size_t len, mode_t mode);
void write_text(const char *path, const char *text);
