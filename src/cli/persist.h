/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Shared by the persistent-sandbox verbs (persist.c, snapshot.c, diff.c);
 * what they do is in the library (api/persist.h). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "YYYY-MM-DD HH:MM:SS" (local time) of @ms since the epoch, or "-" for 0. */
void persist_format_time(uint64_t ms, char *buf, size_t size);

/* `hutch logs NAME --exec ID [--follow]` (procs.c): an exit code. */
int procs_print_output(const char *name, const char *exec_id, bool follow);
