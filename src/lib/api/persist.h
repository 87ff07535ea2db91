/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Persistent sandboxes, one level above the store and the keeper: what
 * the CLI verbs (src/cli/persist.c, snapshot.c, diff.c) and the C API
 * (include/hutch.h, api/hutch.c) both do, written once. Each function
 * takes an open Store, accepts a sandbox's name or id where it says
 * @name, and fails with -errno and a one-line message in @reterr (the
 * messages are the CLI's: it prints them as they are).
 *
 * Locking (docs/persistent.md): changing commands on one sandbox hold its
 * lock (store_lock_sandbox()); starting a keeper happens under it too, so
 * a command that holds the lock and found the sandbox stopped keeps it
 * stopped. */

#include <stdbool.h>
#include <stdint.h>

#include "hutch-error.h"
#include "policy/policy.h"
#include "sandbox/keeper.h"
#include "store/diff.h"
#include "store/store.h"

/* ---- the keeper ---- */

/* The hutch binary that runs keepers (`hutch __keeper NAME FD`): $HUTCH_BINARY
 * when set; else this process's own executable when it is called "hutch"
 * (the CLI, installed or in a build tree); else the installed one
 * (HUTCH_INSTALLED_BINARY, when it is there). -ENOENT naming
 * $HUTCH_BINARY otherwise. */
int persist_binary_find(char **ret, HutchError *reterr);

/* The keeper's own entry point (`hutch __keeper NAME READY_FD`): loads
 * the sandbox, takes its keeper lock and runs sandbox_keep() until it
 * stops. @env is the caller's environment (secrets and --env-pass names
 * are read from it). Failures before the sandbox is ready are written to
 * @ready_fd ("error: MESSAGE\n"), which is closed; those before
 * sandbox_keep() ran (the record, the policy, the lock) only there: then
 * -errno is returned with @reterr untouched. Others fill @reterr. */
int persist_keeper_main(const char *name, int ready_fd, char *const *env, HutchError *reterr);

/* Connects to the sandbox's keeper; with @start, starts it first when none
 * runs. Returns 0 with @ret_sock, or -errno (without @start: -ENOENT or
 * -ECONNREFUSED when it is not running, and @reterr is not touched). */
int persist_connect(const Store *s, const char *name, bool start, int *ret_sock,
                    HutchError *reterr);

/* Stops the keeper and waits for it to exit: 1 when one ran, 0 when none
 * did, or -errno. */
int persist_stop(const Store *s, const char *name, HutchError *reterr);

/* Stops the sandbox's processes: returns once the keeper has answered
 * "stop" (its execs and init have ended, and with init every process of
 * its pid namespace; its cgroups and proxy are removed), without waiting
 * for the keeper's own exit and the release of its disk image, as
 * persist_stop() does (persist_destroy() waits for those). @ret_pidfd: a
 * pidfd of the exiting keeper, or -EBADF. 1 when it ran, 0 when it did
 * not, or -errno. */
int persist_halt(const Store *s, const char *name, int *ret_pidfd, HutchError *reterr);

/* Starts the sandbox when needed and runs @req in it: keeper_exec() over
 * persist_connect(). */
int persist_exec(Store *s, const char *name, const KeeperExec *req, int forward_sigfd,
                 uint64_t *ret_id, int *ret_exit_code, char **ret_json, HutchError *reterr);

/* Starts the sandbox when needed and runs the file operation @req in it
 * (keeper_file()). On failure of the operation itself the message names
 * the path: "cannot read '/etc/x' in sandbox 'NAME': ERROR". */
int persist_file(Store *s, const char *name, const KeeperFile *req, HutchError *reterr);

/* Makes the files of sandbox @rec reachable for a while, for a sandbox
 * with a disk image (store/disk-image.h), whose data/ is a mount point:
 * sets @rec->data_dir (see store_sandbox_data_path()) to the data/ of its
 * running keeper's mount namespace, or, when it is stopped, to a detached
 * mount of the image held by @ret_fd (read-only unless @writable: then
 * the image file is not touched). Close @ret_fd when done (the mount
 * then goes, and the loop device with it). Without a disk image, nothing
 * (@ret_fd is -EBADF). -EBUSY when the image stayed in use. */
int persist_data_open(const Store *s, SandboxRecord *rec, bool writable, int *ret_fd,
                      HutchError *reterr);

/* Whether this process can give a sandbox a disk limit: 0, or -errno with
 * @reterr saying why not and what would make it work. */
int persist_disk_supported(HutchError *reterr);

/* ---- lifecycle ---- */

/* Creates sandbox @name with @policy (validated here; NULL with @from: the
 * snapshot's if it was made here, the defaults if it was imported), from
 * snapshot @from or empty, stopping after @idle_timeout_ms of no command
 * (0: the default); records the host workspace (overlay mode) for apply.
 * Its disk limit (@ret->disk_limit) is the policy's disk size or
 * DISK_IMAGE_DEFAULT_SIZE; where it cannot be enforced
 * (persist_disk_supported()), an explicit one is an error unless the policy
 * allows degraded limits, and the default is dropped (0). A workspace in
 * copy mode is refused (-EINVAL); a taken name is -EEXIST. Returns the new
 * record in @ret (may be NULL). */
int persist_create(Store *s, const char *name, const Policy *policy, const char *from,
                   uint64_t idle_timeout_ms, SandboxRecord **ret, HutchError *reterr);

/* Changes sandbox @name's policy to @policy (validated here), saved in its
 * record (store_sandbox_save(): crash-safe). Under the sandbox's lock, so
 * nothing starts it meanwhile. While it runs, nothing changes: the first
 * field that would is refused with -EBUSY, named ("limits.memory",
 * "allow_hosts"; docs/persistent.md, "Changing the policy"). The workspace
 * and the backend never change (-EINVAL, named). @ret_changed (may be
 * NULL) gets the fields that changed, empty when none did. */
int persist_update(Store *s, const char *name, const Policy *policy, char ***ret_changed,
                   HutchError *reterr);

/* Removes the sandbox and its files. A running one is -EBUSY unless
 * @force, which stops it first. */
int persist_destroy(Store *s, const char *name, bool force, HutchError *reterr);

#define PERSIST_INFO_PORTS_MAX 16

typedef struct PersistInfo {
        bool running;
        uint64_t last_used_ms;  /* the last exec's end, or the creation */
        uint64_t disk_bytes;    /* the sandbox's layers; with a disk image, the blocks the
                                 * image file has allocated on the host (never mounted) */
        uint64_t disk_limit;    /* its disk image's size; 0: none */
        unsigned degraded;      /* 1 << PolicyLimit of limits not enforced (disk) */
        SandboxBackend backend; /* its policy's ("ns" when it cannot be read) */
        /* Its policy's image ("" for the host's base) and published ports
         * (the sandbox side, the first PERSIST_INFO_PORTS_MAX of @n_ports). */
        char image[256];
        unsigned n_ports;
        uint16_t ports[PERSIST_INFO_PORTS_MAX];
} PersistInfo;

/* What `hutch ls` shows of a loaded sandbox besides its record. */
void persist_info(const Store *s, const SandboxRecord *rec, PersistInfo *ret);

/* Only @ret's backend, image and ports, from @rec's policy (the rest of
 * @ret is left as it is). */
void persist_describe(const SandboxRecord *rec, PersistInfo *ret);

/* ---- images (docs/images-run.md) ---- */

/* Pins the image of a persistent sandbox's policy: @p->image, a name, is
 * replaced by the digest of the image it names now, so that a later
 * import or pull under the same name never changes the layers below the
 * sandbox's own. Nothing to do without an image. -ENOENT with @reterr
 * naming the image when the store has none of that name. */
int persist_image_pin(Store *s, Policy *p, HutchError *reterr);

/* The digest of the image @ref names now, in @ret (a new string); -ENOENT
 * with @reterr naming it when there is none. */
int persist_image_digest(Store *s, const char *ref, char **ret, HutchError *reterr);
/* The first name (NAME:TAG) that points at image @ref now, into *@ret
 * (free()), or NULL when none does or there is no such image. */
int persist_image_name(Store *s, const char *ref, char **ret);

/* Marks the image of the policy in @policy_json (a digest, as pinned),
 * if it has one, as used by @kind ("sandbox" or "snapshot") @holder, so
 * that `hutch image rm` refuses to remove it while that exists
 * (image_store_use()). */
int persist_image_mark(Store *s, const char *policy_json, const char *kind, const char *holder,
                       HutchError *reterr);
/* Removes that mark (when @holder goes): 0 or -errno. */
int persist_image_unmark(Store *s, const char *policy_json, const char *kind, const char *holder);

/* ---- published ports (docs/network.md, "Published ports") ---- */
/* Sandbox @name's published ports as a JSON array of
 * {"port","protocol","host_ip","host_port"} (keeper.h's "ports"): while
 * it runs, as its keeper bound them (@ret_running true); stopped, its
 * policy's entries (host_port 0: a free one, chosen at the start). */
int persist_ports_list(Store *s, const char *name, char **ret_json, bool *ret_running,
                       HutchError *reterr);
/* Publishes @spec (port_spec_parse()) on sandbox @name: saved in its
 * policy, under its lock, and started now when it runs (a host port in
 * use is refused then, with nothing saved). @ret_json (may be NULL): the
 * entry as bound (as saved when stopped), as persist_ports_list(). */
int persist_port_add(Store *s, const char *name, const char *spec, char **ret_json,
                     HutchError *reterr);
/* Stops publishing sandbox port @port of @name: dropped from its policy,
 * and its forwarder stopped when it runs. -ENOENT when it was not
 * published. */
int persist_port_remove(Store *s, const char *name, uint16_t port, HutchError *reterr);

/* A socket connected to 127.0.0.1:@port inside running sandbox @name
 * (keeper_port_connect()). -ENOTCONN when it is not running. */
int persist_port_connect(Store *s, const char *name, uint16_t port, int *ret_fd,
                         HutchError *reterr);

/* ---- snapshots ---- */

/* Freezes sandbox @name into snapshot @snap (NULL: the first free of
 * NAME.1, NAME.2, ...): a copy while it runs (frozen meanwhile), else its
 * layer by rename. Returns the snapshot's name in @ret_snap (may be NULL)
 * and whether the sandbox was running in @ret_running (may be NULL). */
int persist_snapshot(Store *s, const char *name, const char *snap, char **ret_snap,
                     bool *ret_running, HutchError *reterr);

/* Stops sandbox @name and puts it on snapshot @snap with a new empty
 * layer: its own changes since are gone (store_sandbox_reset()). Its
 * policy and its workspace record stay. */
int persist_restore(Store *s, const char *name, const char *snap, HutchError *reterr);

/* Removes snapshot @snap (name or id); -EBUSY while something uses it. */
int persist_snapshot_remove(Store *s, const char *snap, HutchError *reterr);

/* ---- the overlay workspace ---- */

/* A sandbox's overlay workspace opened for diff and apply. */
typedef struct WsView {
        Policy *policy;
        int *layer_fds; /* the sandbox's own ws/, then the snapshot layers' ws/ */
        size_t n_layers;
        int host_fd;
} WsView;

#define WS_VIEW_NULL ((WsView){.host_fd = -EBADF})
void ws_view_done(WsView *v);

/* Turns each of @paths ("/workspace/x", "./x/", "x") into the workspace
 * path ws_diff() uses ("x"), in place: -EINVAL naming one that is
 * absolute elsewhere or holds "..". */
int persist_paths_normalize(char **paths, HutchError *reterr);

/* The changes of sandbox @name's workspace, those under @paths (normalised;
 * NULL or empty: all) first in @ret_changes with their count in
 * @ret_n; @ret_n_all counts all of them (ws_changes_free() needs it). @v
 * gets the opened view (release with ws_view_done()). */
int persist_diff(Store *s, const char *name, char **paths, WsView *v, WsChange **ret_changes,
                 size_t *ret_n, size_t *ret_n_all, HutchError *reterr);

typedef struct PersistApply {
        WsApplyResult res; /* the conflicts and the count applied */
        bool applied;      /* the changes were written (the new baseline may not be) */
        char *workspace;   /* the host folder */
} PersistApply;

void persist_apply_done(PersistApply *a);

/* Writes sandbox @name's changes (under @paths, normalised; NULL: all)
 * into the host folder and records the folder as the next apply's
 * baseline. -EEXIST with @ret->res.conflicts when the host changed a
 * selected path since (nothing written) unless WS_APPLY_FORCE; -EINVAL
 * when there is no baseline (an imported snapshot's sandbox) unless
 * WS_APPLY_FORCE. Modes as ws_apply() writes them (WS_APPLY_MODES; the
 * ones kept safer in @ret->res.modes_kept). Returns the number of changes
 * applied. @ret is filled on failure too. */
int persist_apply(Store *s, const char *name, char **paths, WsApplyFlags flags, PersistApply *ret,
                  HutchError *reterr);
