/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Shared by the persistent-sandbox verbs (persist.c, snapshot.c, diff.c);
 * what they do is in the library (api/persist.h). */

#include "store/store.h"

/* Opens the store and (with @name) loads that sandbox; on failure logs and
 * returns HUTCH_EXIT_FAILURE, else 0. */
int persist_open(const char *name, Store **ret_store, SandboxRecord **ret_rec);

/* "YYYY-MM-DD HH:MM:SS" (local time) of @ms since the epoch, or "-" for 0. */
void persist_format_time(uint64_t ms, char *buf, size_t size);

/* `hutch logs NAME --exec ID [--follow]` (procs.c): an exit code. */
int procs_print_output(const char *name, const char *exec_id, bool follow);
