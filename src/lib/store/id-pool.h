/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The machine-wide pool of host id ranges for root's sandboxes
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
 * Running leases. A range is also held, while a sandbox runs on it, by a
 * lease: an open file description lock (F_OFD_SETLK) on byte i of
 * ID_POOL_DIR/id-pool.lock for range i, held by the process that runs the
 * sandbox (a one-shot `hutch run`'s supervisor, a persistent sandbox's
 * keeper) and dropped by the kernel when that process ends, however it
 * ends (SIGKILL too): no lease outlives its holder and nothing needs
 * cleaning. A one-shot run as root takes the lowest range that no pool
 * line holds and no one leases, for its lifetime only: nothing is
 * written and no flock is taken (it never waits for a claim's fsync), the
 * cost is reading the pool, /etc/subuid, /etc/subgid and hutch's own id
 * maps (about 30-50 us). Every claim skips leased ranges. The lease alone
 * decides who runs on a range: a keeper takes its range's lease before it
 * uses it and moves to a new range when someone else holds it. When the
 * holder is killed, its sandbox's init dies with it (PR_SET_PDEATHSIG), a
 * moment later than the lease.
 *
 * A pool file that is lost (unlinked) is rebuilt: each claim is given the
 * ranges its store's sandbox records name (IdPoolHold) and puts back
 * those the pool lacks and no other line holds, before it hands out anything;
 * so a range a sandbox of that store holds is never handed out again.
 * The running sandboxes of every other store keep their ranges by their
 * leases; a stopped sandbox of another store whose range was handed out
 * meanwhile gets a new range when it next starts (its layers are
 * idmapped, so nothing depends on the range). NEEDSWORK: a lease lives
 * on the lock file's inode, so wiping the whole folder (the lock file
 * too) while sandboxes run loses their leases; the pool base is fixed at
 * ID_POOL_BASE (2^31: above the ids distributions give users and their
 * sub-ids, below (uid_t)-1).
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
 * holds or leases, is put back first (a lost pool file). With @ret_lease
 * (a sandbox about to run), the range's running lease is taken too and
 * @ret_lease is the fd that holds it (close it when the sandbox has
 * ended); a range the pool lists for @id that someone else leases is
 * given up for a new one. @home must be a canonical path without
 * newlines. Returns 0 and @ret_base, -ENOSPC when every range is held
 * (@reterr says so, naming the pool), -EBADMSG on a pool file that does
 * not parse, -errno. */
int id_pool_claim(const char *home, const char *id, uint32_t hint, const IdPoolHold *held,
                  size_t n_held, uint32_t *ret_base, int *ret_lease, HutchError *reterr);

/* A one-shot run's range: the lowest that no pool line holds and no one
 * leases, with its lease taken. Returns 0, @ret_base and @ret_lease (the
 * fd that holds the lease: close it when the sandbox has ended), -ENOSPC
 * when there is none, -errno. */
int id_pool_lease(uint32_t *ret_base, int *ret_lease, HutchError *reterr);

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
