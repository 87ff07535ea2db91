/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Shared by the persistent-sandbox verbs (persist.c, snapshot.c, diff.c);
 * what they do is in the library (api/persist.h). */

#include "store/store.h"

/* Opens the store and (with @name) loads that sandbox; on failure logs and
 * returns HUTCH_EXIT_FAILURE, else 0. */
int persist_open(const char *name, Store **ret_store, SandboxRecord **ret_rec);
