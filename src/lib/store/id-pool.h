/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The machine-wide pool of host id ranges for root's persistent sandboxes
 * (docs/persistent.md "Id range", issue 15).
 *
 * SECURITY: as root, each persistent sandbox maps its ids 0..65535 to a
 * range of host ids of its own, so that the root of one sandbox is never
 * the same host uid as the root of another (file ownership, signals,
 * per-uid kernel accounting). The ranges come from one pool shared by
 * every store on the machine (every HUTCH_HOME): ID_POOL_SIZE ranges of
 * USERNS_RANGE_SIZE ids from host id ID_POOL_BASE (2^31) up, skipping any
 * range that overlaps a line of /etc/subuid or /etc/subgid (the ids the
 * administrator gives to users and to root's fixed range) or that is not
 * mapped in hutch's own user namespace (a container's).
 *
 * The pool is the file ID_POOL_DIR/id-pool, changed only under a flock of
 * ID_POOL_DIR/id-pool.lock and written atomically. Each line after the
 * header "hutch-id-pool 1" is "BASE ID HOME": the first host id of a
 * range, the 16-hex-digit id of the sandbox that holds it and the
 * canonical folder of its store. A range is held from `hutch create`
 * until `hutch rm` (or `hutch gc` of its store finds no such sandbox);
 * the lowest free range is handed out first, so a released range is
 * reused. Ranges of stores whose folder is gone are released by the next
 * allocation.
 *
 * The files of a sandbox's layers stay owned by the store's fixed range
 * (ns/userns.h) and are idmapped into the sandbox's own range when it
 * starts, so snapshots and `create --from` do not depend on the range.
 *
 * A persistent microVM sandbox's QEMU runs in a user namespace of its
 * range as a namespace sandbox's init does (docs/vm.md "Id ranges").
 *
 * A pool file that is lost (its folder wiped) is rebuilt: each claim is
 * given the ranges its store's sandbox records name (IdPoolHold) and puts
 * back those the pool lacks, before it hands out anything; so a range a
 * sandbox of that store holds (running or not) is never handed out
 * again. NEEDSWORK: the ranges of other stores come back only when each
 * store next claims; the pool base is fixed at ID_POOL_BASE.
 *
 * In builds with test hooks, $HUTCH_TEST_ID_POOL names another folder for
 * the pool and $HUTCH_TEST_ID_POOL_SIZE a smaller number of ranges. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hutch-error.h"

#define ID_POOL_DIR "/var/lib/hutch"
#define ID_POOL_BASE UINT32_C(0x80000000)
/* 2^31 / 65536 ranges, less the last (its top id would be (uid_t)-1). */
#define ID_POOL_SIZE UINT32_C(32767)

/* A range that a sandbox record of the store names ("id", "id_base" of
 * its sandbox.json). */
typedef struct IdPoolHold {
        char id[17];
        uint32_t base;
} IdPoolHold;

/* Returns the range held by the sandbox @id of the store @home, taking
 * the lowest free one (@hint first, when it is free) if it holds none.
 * @held (@n_held entries, may be NULL) are the ranges the store's records
 * name: one the pool does not list for its sandbox, and that no one else
 * holds, is put back first (a lost pool file). @home must be a canonical
 * path without newlines. Returns 0 and @ret_base, -ENOSPC when every
 * range is held (@reterr says so, naming the pool), -EBADMSG on a pool
 * file that does not parse, -errno. */
int id_pool_claim(const char *home, const char *id, uint32_t hint, const IdPoolHold *held,
                  size_t n_held, uint32_t *ret_base, HutchError *reterr);

/* Releases the range of the sandbox @id of the store @home (nothing if it
 * holds none). Returns 0 or -errno. */
int id_pool_release(const char *home, const char *id);

/* Releases every range of the store @home whose sandbox id is not in
 * @live (NULL-terminated). The caller holds the store's lock, so that no
 * sandbox is being made meanwhile. Returns the number released or -errno. */
int id_pool_sweep(const char *home, char *const *live);

/* Does [@base, @base + @count) overlap a range of any line
 * ("NAME:START:COUNT") of the /etc/subuid-style @text? Lines that do not
 * parse are skipped. */
bool id_pool_overlaps_subids(const char *text, uint32_t base, uint32_t count);
