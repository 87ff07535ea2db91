/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Helpers shared by the cgroup sources; not part of the subsystem's
 * interface. All paths are absolute directory paths, and every file
 * access goes through an fd of the directory (openat, O_NOFOLLOW). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Cgroup files are small; counters and settings stay far below this.
 * cgroup.procs of a huge cgroup could exceed it, so the kill code streams
 * that file instead of using cg_read(). */
#define CG_FILE_MAX (64U * 1024U)

/* Opens the directory @path (O_RDONLY|O_DIRECTORY|O_CLOEXEC). */
int cg_open_dir(const char *path);

/* Writes @value to @file in directory @dfd in a single write(2). */
int cg_write_at(int dfd, const char *file, const char *value);
/* Same, opening @dir first. */
int cg_write(const char *dir, const char *file, const char *value);
/* Reads @file in @dir (at most CG_FILE_MAX bytes) into a new string. */
int cg_read(const char *dir, const char *file, char **ret);

/* Looks up "KEY VALUE" lines (memory.events, cpu.stat, cgroup.events,
 * memory.oom_control): 0 and the value, -ENOENT if there is no such key,
 * -EBADMSG if its value is not a number. */
int cg_keyed_value(const char *text, const char *key, uint64_t *ret);

/* Returns whether @word appears in the @sep-separated list @list. */
bool cg_word_in_list(const char *list, const char *word, const char *sep);

/* faccessat(AT_EACCESS) of @file in @dir (the directory itself when @file
 * is NULL) for writing. */
bool cg_writable(const char *dir, const char *file);

/* Joins "@a/@b" into a new string; NULL on OOM. */
char *cg_path_join(const char *a, const char *b);
