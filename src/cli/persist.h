/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Shared by the persistent-sandbox verbs (persist.c, snapshot.c, diff.c). */

#include <stdbool.h>

#include "hutch-error.h"
#include "store/store.h"

/* Opens the store and (with @name) loads that sandbox; on failure logs and
 * returns HUTCH_EXIT_FAILURE, else 0. */
int persist_open(const char *name, Store **ret_store, SandboxRecord **ret_rec);

/* Connects to the sandbox's keeper; with @start, starts it first when none
 * runs (exec). Returns 0 with @ret_sock, or -errno (@reterr). */
int persist_connect(const Store *s, const char *name, bool start, int *ret_sock,
                    HutchError *reterr);

/* Stops the keeper: 1 when one ran, 0 when none did, or -errno. */
int persist_stop(const Store *s, const char *name, HutchError *reterr);

/* After create: record the host workspace (overlay mode) for apply's
 * conflict check, or take the snapshot's record when @snap has one. */
int persist_record_workspace(const Store *s, const SandboxRecord *rec, const SnapshotRecord *snap,
                             HutchError *reterr);

/* Records the host folder's current state as apply's baseline. */
int persist_write_manifest(const Store *s, const SandboxRecord *rec, int host_fd,
                           HutchError *reterr);
