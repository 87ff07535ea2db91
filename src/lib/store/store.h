/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The store of persistent sandboxes and snapshots (docs/persistent.md):
 *
 *   $HUTCH_HOME/                  (default $XDG_DATA_HOME/hutch, root: /var/lib/hutch)
 *     sandboxes/<name>/sandbox.json   the record (policy, parent snapshot, layer gen)
 *     sandboxes/<name>/lock           flock: one changing command at a time
 *     sandboxes/<name>/data/upper-<gen>/{root,ws}   the sandbox's own layer
 *     sandboxes/<name>/data/work/{root,ws}          overlayfs work dirs
 *     sandboxes/<name>/disk.img       (disk limit) an ext4 image that holds data/
 *                                     and data/logs/; data/ is its mount point
 *     sandboxes/<name>/ws-manifest    the host workspace as it was at create
 *     sandboxes/<name>/history.jsonl  one line per finished exec
 *     sandboxes/<name>/logs/exec-<id>.{out,err}  output of detached execs
 *     snapshots/<snap>/snapshot.json  the record (layers, parent, policy)
 *     snapshots/<snap>/layer/{root,ws}      (imported: layers/<i>/...)
 *     snapshots/.tmp-*, sandboxes/.tmp-*    being made or removed; `hutch gc`
 *   RUNTIME/s-<key>/               the store's runtime folder (state)
 *     store                        the store's canonical path (claims the folder)
 *     <name>/keeper.sock, keeper.lock (held while the keeper runs), keeper.log
 *   where RUNTIME is /run/hutch (root), $XDG_RUNTIME_DIR/hutch,
 *   /run/user/<uid>/hutch when it is the caller's, else $HUTCH_HOME/run,
 *   and <key> is 12 hex digits of the SHA-256 of the store's canonical
 *   path; $HUTCH_STATE_DIR, when set, is the state folder itself
 *   (docs/persistent.md).
 *
 * Every record is written to a temporary name, fsync'ed and renamed. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hutch-error.h"
#include "macro.h"
#include "ns/userns.h"

#define STORE_NAME_MAX 63
#define STORE_KEY_HEX 12
#define STORE_RECORD_VERSION 1
#define STORE_RECORD_MAX (4U << 20)

typedef struct Store {
        char *home;
        char *state;     /* this store's runtime folder: keepers' sockets and locks */
        char *runtime;   /* the caller's, shared by its stores (VM templates) */
        IdMapping idmap; /* who the sandboxes' files belong to */
} Store;

/* Finds (and creates, 0700) the store and state directories; a directory
 * of the wrong owner or writable by others is refused (@reterr names its
 * owner and mode). */
int store_open(Store **ret, HutchError *reterr);
Store *store_free(Store *s);
DEFINE_POINTER_CLEANUP(Store, store_free)

/* [a-z0-9][a-z0-9_.-]{0,62} */
bool store_name_is_valid(const char *name);

typedef struct SandboxRecord {
        char *name;
        char *id; /* 16 hex digits, also accepted where a name is */
        uint64_t created_ms, last_used_ms;
        char *policy_json;
        char *parent; /* the snapshot it continues from, or NULL */
        uint64_t gen; /* its layer is data/upper-<gen> */
        uint64_t idle_timeout_ms;
        /* The size of its disk image (store/disk-image.h), which holds data/;
         * 0: it has none, and nothing limits its disk use. */
        uint64_t disk_limit;
        /* As root: the first host id of its range of the id pool
         * (store/id-pool.h), held from create to rm; 0: none (a user's
         * sandbox, or one made before the pool). */
        uint32_t id_base;
        /* Not stored: where data/ can be reached now when it is not the
         * store's folder (its disk image mounted, api/persist.c
         * persist_data_open()); NULL: the store's folder. */
        char *data_dir;
} SandboxRecord;

SandboxRecord *sandbox_record_free(SandboxRecord *r);
DEFINE_POINTER_CLEANUP(SandboxRecord, sandbox_record_free)

typedef struct SnapshotRecord {
        char *name;
        char *id;
        uint64_t created_ms;
        char *parent;  /* the snapshot below this one, or NULL */
        char **layers; /* directories inside the snapshot's folder, top first */
        char *policy_json;
        char *origin;       /* the sandbox it was taken from (information) */
        char *origin_upper; /* the sandbox layer it was made of (crash recovery) */
        bool has_manifest;  /* ws-manifest is in the snapshot's folder */
        /* SECURITY: a snapshot made from an archive (`hutch snapshot import`)
         * is data, never authority (issue 26): its policy_json is "{}" and
         * `create --from` takes the caller's policy; what the archive's
         * manifest said is kept in suggested_policy_json, shown by `hutch
         * snapshot inspect` and never applied. A snapshot made here is not
         * imported and its policy is the sandbox's. */
        bool imported;
        char *suggested_policy_json; /* imported: the archive's policy, else NULL */
} SnapshotRecord;

SnapshotRecord *snapshot_record_free(SnapshotRecord *r);
DEFINE_POINTER_CLEANUP(SnapshotRecord, snapshot_record_free)

/* "<home>/sandboxes/<name>[/<sub>]" and the like, as new strings. */
/* With the ranged map (a user with sub-ids, ns/userns.h), moves the
 * calling process (single-threaded: the CLI) into the store's user
 * namespace, where the caller's ids and sub-ids read as on the host and
 * the caller may read, chown and remove files of its sub-ids: for the
 * verbs that read or write a sandbox's files from outside it (diff,
 * apply, snapshot export/import). Nothing to do otherwise. Returns 0 or
 * -errno (@reterr says why). */
int store_enter_range(const Store *s, HutchError *reterr);

int store_sandbox_path(const Store *s, const char *name, const char *sub, char **ret);
int store_snapshot_path(const Store *s, const char *name, const char *sub, char **ret);
int store_state_path(const Store *s, const char *name, const char *sub, char **ret);

/* Takes the sandbox's lock (blocking; the fd holds it). -ENOENT when there
 * is no such sandbox. */
int store_lock_sandbox(const Store *s, const char *name, int *ret_fd);
/* The store-wide lock for creating and removing names and snapshots. */
int store_lock_all(const Store *s, int *ret_fd);

/* Loads a sandbox by name or id, recovering from an interrupted snapshot
 * first (call with the sandbox's lock held when it may change). -ENOENT
 * (with @reterr) when there is none. */
int store_sandbox_load(Store *s, const char *name_or_id, SandboxRecord **ret, HutchError *reterr);
/* store_open() and store_sandbox_load() in one: the API's calls that take
 * a sandbox by name or id begin so. On failure neither is returned. */
int store_open_sandbox(Store **ret_store, const char *name_or_id, SandboxRecord **ret,
                       HutchError *reterr);
/* The same for a caller that holds the sandbox's lock. Without it, a
 * sandbox whose recovery is needed while another command holds the lock is
 * -EBUSY. */
int store_sandbox_load_locked(Store *s, const char *name, SandboxRecord **ret, HutchError *reterr);
int store_sandbox_save(const Store *s, const SandboxRecord *r, HutchError *reterr);

/* Makes the sandbox's folder (data dirs owned by the sandbox's root) and
 * its record, under a temporary name renamed into place last. With
 * @r->disk_limit, data/ (and its logs/) is made inside a new disk image of
 * that size (store/disk-image.h). -EEXIST
 * when the name is taken, -ENOENT when its parent snapshot is gone (both
 * checked under the store's lock). */
int store_sandbox_create(Store *s, SandboxRecord *r, HutchError *reterr);

/* As root, the range of the id pool that the sandbox @r holds (claimed
 * now if it holds none, @r->id_base preferred), written to its record
 * when it changed: for its start, under its lock. With @ret_lease (may be
 * NULL), its running lease too (store/id-pool.h): the fd to hold while
 * the sandbox runs, -EBADF for a user's store. 0 and @ret_base 0 for a
 * user's store. Returns 0 or -errno (-ENOSPC: the pool is exhausted). */
int store_sandbox_id_range(Store *s, SandboxRecord *r, uint32_t *ret_base, int *ret_lease,
                           HutchError *reterr);

/* Removes the sandbox's folder (renamed away first, so it disappears at
 * once). The caller has stopped it. */
int store_sandbox_remove(const Store *s, const char *name, HutchError *reterr);

/* Names of all sandboxes / snapshots, sorted. */
int store_list(const Store *s, const char *kind, char ***ret);

int store_snapshot_load(const Store *s, const char *name_or_id, SnapshotRecord **ret,
                        HutchError *reterr);

/* The host paths of the snapshot layers under @parent, top first (at most
 * @max; -E2BIG when the chain is deeper). */
int store_snapshot_chain(const Store *s, const char *parent, size_t max, char ***ret,
                         HutchError *reterr);

/* Who depends on snapshot @name: a sandbox or snapshot name, or NULL. */
int store_snapshot_dependent(const Store *s, const char *name, char **ret);

/* Freezes the stopped sandbox's layer into snapshot @snap by rename (O(1))
 * and gives the sandbox a new empty layer on top of it. With a disk image
 * (@r->data_dir set: its data/ mounted writable) the layer is copied out of
 * the image instead, then removed from it. */
int store_snapshot_stopped(Store *s, SandboxRecord *r, const char *snap, HutchError *reterr);

/* A running sandbox: @copy_layer copies its layer (the caller froze it)
 * into the empty directory it is given. */
typedef int (*StoreCopyFn)(int src_dirfd, int dst_dirfd, HutchError *reterr);
int store_snapshot_copy(Store *s, const SandboxRecord *r, const char *snap, StoreCopyFn copy_layer,
                        HutchError *reterr);

/* Points the stopped sandbox @r (the caller holds its lock) at snapshot
 * @snap with a new empty layer: its own layer and its former parent are
 * dropped (hutch_restore()). Under the store's lock, so @snap cannot go
 * away meanwhile: -ENOENT when there is no snapshot @snap, -E2BIG when its
 * chain is deeper than @max_layers. Crash-safe: the new layer is made,
 * then the record naming it and @snap is written (the commit point), then
 * the old layer is removed (left to `hutch gc` when that fails). @r is
 * updated on success. */
int store_sandbox_reset(Store *s, SandboxRecord *r, const char *snap, size_t max_layers,
                        HutchError *reterr);

/* Writes a snapshot record under a new temp folder: returns the folder's
 * path; store_snapshot_commit() renames it into place. */
int store_snapshot_begin(const Store *s, char **ret_tmp, HutchError *reterr);
int store_snapshot_commit(const Store *s, const char *tmp, const SnapshotRecord *r,
                          HutchError *reterr);

int store_snapshot_remove(const Store *s, const char *name, HutchError *reterr);

/* Marks the temp folder @tmp as in use (a flock on the folder) for as long
 * as the returned fd is open, so that gc leaves it alone: for work done
 * without the store's lock (an import). */
int store_temp_hold(const char *tmp, int *ret_fd, HutchError *reterr);

/* Removes leftovers of interrupted commands: temp folders (not held), unused layer
 * generations, state of keepers that are gone. Returns how many. */
int store_gc(Store *s, unsigned *ret_removed, HutchError *reterr);

/* Whether a keeper runs for @name (its keeper.lock is held). */
bool store_keeper_running(const Store *s, const char *name);

/* The JSON of a snapshot record (for export's manifest) and back. */
int snapshot_record_to_json(const SnapshotRecord *r, char **ret);
int snapshot_record_from_json(const char *text, SnapshotRecord **ret, HutchError *reterr);

/* Copies the file @from to @to_dir/@name (through a temp name, fsync'ed).
 * -ENOENT when @from does not exist. */
int store_file_copy(const char *from, const char *to_dir, const char *name);

/* The sandbox's data/ folder as it can be reached now (@r->data_dir, or
 * the store's). */
int store_sandbox_data_path(const Store *s, const SandboxRecord *r, const char *sub, char **ret);

/* Disk use of a folder, in bytes (st_blocks). */
uint64_t store_disk_usage(const char *path);

/* A new 16-hex-digit id. */
int store_new_id(char **ret);
