/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What only hutch's own front ends (src/cli: hutch, hutch serve, hutch
 * mcp) need from the core beyond the public include/hutch.h. Together with
 * hutch.h it is the door from src/cli into the core
 * (tools/check-layering.py; docs/architecture.md §6). Nothing here is
 * exported from libhutch.so: the functions are not _public_, and their
 * contract may change with the front ends. Errors come as the core's
 * HutchError (hutch-error.h), which the front ends map to their answers.
 *
 * Each function takes a sandbox by name and opens the store itself, as
 * hutch.h's functions do. */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hutch-error.h"
#include "hutch.h"
#include "macro.h"

/* The digest that image @ref names in the image store now, in @ret_digest
 * (a new string). -ENOENT with @reterr naming it when there is none. */
int hutch_ext_image_digest(const char *ref, char **ret_digest, HutchError *reterr);

/* ---- a streaming exec, for a caller with its own event loop ---- */

/* Connects to the keeper of sandbox @name, starting the sandbox first when
 * it is not running (under its lock). Returns 0 with @ret_sock (blocking,
 * close-on-exec; the caller closes it), or -errno with @reterr (-ENOENT
 * when there is no such sandbox). */
int hutch_ext_connect(const char *name, int *ret_sock, HutchError *reterr);

typedef struct HutchExtExec {
        char **argv;
        char **env;          /* "K=V" set over the sandbox's environment, or NULL */
        const char *cwd;     /* or NULL: the policy's working directory */
        uint64_t timeout_ms; /* 0: the policy's timeout */
        bool detach;
        int fds[3];       /* the command's stdin, stdout, stderr (borrowed) */
        bool stdin_pipe;  /* with detach: its stdin a pipe the keeper keeps (hutch_exec_stdin()) */
        const char *user; /* --user, or NULL: the sandbox's (hutch.h) */
} HutchExtExec;

/* Sends @e (its fds included) on @sock from hutch_ext_connect(). Returns 0
 * or -errno with @reterr. */
int hutch_ext_exec_send(int sock, const HutchExtExec *e, HutchError *reterr);

/* The answers hutch_ext_exec_answer() reads. */
typedef enum HutchExtAnswer {
        HUTCH_EXT_ANSWER_STARTED = 1,
        HUTCH_EXT_ANSWER_OUTCOME = 2,
} HutchExtAnswer;

/* Reads one answer to the exec sent on @sock: HUTCH_EXT_ANSWER_STARTED
 * with @ret_id, or HUTCH_EXT_ANSWER_OUTCOME with @ret_exit_code and (when
 * @ret_json is non-NULL) the outcome's JSON, which the caller frees.
 * -EAGAIN when @sock is non-blocking and nothing waits; -EPIPE when the
 * keeper closed the connection; -ECONNRESET when it was stopping and
 * started nothing; -EPERM with the keeper's refusal in @reterr; another
 * -errno with @reterr. Closing @sock before the outcome kills the command
 * (unless detached). */
int hutch_ext_exec_answer(int sock, uint64_t *ret_id, int *ret_exit_code, char **ret_json,
                          HutchError *reterr);

/* ---- published ports of a running sandbox ---- */

/* Asks the keeper of sandbox @name (started when it is not running) for
 * its published ports: with @action NULL, the list; with "add" and @spec
 * ("HOST_IP:HOST_PORT:PORT"), publishes one more for the keeper's life.
 * Returns 0 with the keeper's JSON answer in @ret_json (free() it), or
 * -errno with @reterr. */
int hutch_ext_ports(const char *name, const char *action, const char *spec, char **ret_json,
                    HutchError *reterr);

/* ---- names ---- */

/* The longest sandbox or snapshot name (store/store.h's STORE_NAME_MAX,
 * which hutch-ext.c checks is the same). */
#define HUTCH_EXT_NAME_MAX 63

/* Whether @name is a valid sandbox or snapshot name:
 * [a-z0-9][a-z0-9_.-]{0,62}. */
bool hutch_ext_name_is_valid(const char *name);

/* Whether @spec is a --user of docker's forms: NAME, UID, NAME:GROUP or
 * UID:GID (policy.h's user_spec_is_valid()). */
bool hutch_ext_user_spec_is_valid(const char *spec);

/* A signal by name ("TERM", "SIGTERM", "term") or number ("15"): 1 to
 * NSIG-1, or -EINVAL. */
int hutch_ext_signal_parse(const char *s);

/* ---- the microVM backend's hooks for the hutch binary ---- */

/* `hutch __vm-fwd SOCKET`, the microVM's guestfwd helper (vm.h's
 * vm_forward_run()): copies stdin to the unix socket @path and it to
 * stdout until both sides ended. Returns 0 or -errno. */
int hutch_ext_vm_forward(const char *path);

/* Sets a function the microVM backend calls before it builds a template
 * (@done false: a cold boot of seconds) and after (@done true, @ok whether
 * it worked), for a notice on the terminal (vm.h's
 * vm_set_template_build_hook()). NULL: none. */
void hutch_ext_vm_template_hook(void (*hook)(bool done, bool ok));

/* ---- hutch doctor ---- */

/* The container engine hutch runs under, as `hutch doctor` names it
 * ("none", "docker", "podman", "kubernetes", "lxc", "nspawn", "other";
 * sandbox/container.h's container_detect()). */
const char *hutch_ext_container_engine(void);

/* ==== issue 16 (h16s): the CLI verbs' door into the core ==== */

/* ---- hutch doctor's probes (doctor/features.h) ---- */

typedef struct HutchExtCheck {
        const char *name;   /* the check's JSON key ("user_namespaces", ...), static */
        const char *status; /* "ok", "missing" or "degraded", static */
        const char *impact; /* one sentence on what @status means here, static */
        char *detail;       /* owned: one line on what was found */
        bool required;      /* `hutch run` cannot work when this one is "missing" */
        bool missing;       /* @status is "missing" */
} HutchExtCheck;

/* Runs every probe of `hutch doctor` (they fork: call it from a
 * single-threaded process) and returns them, in the order the doctor
 * prints them, in @ret (free with hutch_ext_checks_free()) and their count
 * in @ret_n. -errno when a probe could not run (not when it found a
 * feature missing), with that check's name in @ret_failed. */
int hutch_ext_doctor_probe(HutchExtCheck **ret, size_t *ret_n, const char **ret_failed);

/* Frees the @n checks of @c; accepts NULL. Returns NULL. */
HutchExtCheck *hutch_ext_checks_free(HutchExtCheck *c, size_t n);

/* ---- the terminal relay's side of a pty (sandbox/pty.h) ---- */

/* Receives the master of the pty the command made inside the sandbox from
 * @chan (blocking). Returns 0 with a new close-on-exec fd in @ret_master,
 * -EPIPE when the channel closed without one (the command did not start),
 * -EBADMSG for anything but exactly one pty master, or -errno. */
int hutch_ext_pty_recv(int chan, int *ret_master);

/* Tells the command on @chan that the window size is set: it may exec. */
int hutch_ext_pty_go(int chan);

/* ---- the persistent-sandbox verbs (api/persist.h, api/processes.h) ----
 *
 * As hutch.h's, each opens the store itself (its failure in @reterr as the
 * store said it), takes a sandbox's name or id, and fails with -errno and
 * a one-line message in @reterr: the CLI prints those as they are. */

/* The name of the sandbox that @name_or_id names, in @ret_name (a new
 * string): -ENOENT with @reterr when there is none. */
int hutch_ext_sandbox_name(const char *name_or_id, char **ret_name, HutchError *reterr);

/* `hutch kill`'s grace before SIGKILL: the default and the most
 * (sandbox/exec-table.h's EXEC_KILL_GRACE_*, checked equal). */
#define HUTCH_EXT_KILL_GRACE_DEFAULT_MS 10000U
#define HUTCH_EXT_KILL_GRACE_MAX_MS (24ULL * 3600 * 1000)

/* The running execs as a JSON array of {id, argv, start_ms, pid,
 * detached} (persist_exec_list()); free(). */
int hutch_ext_exec_list_json(const char *name, char **ret_json, HutchError *reterr);

/* persist_exec_kill(): @sig to exec @id, everything it started killed
 * @grace_ms later (0: never) unless @sig is SIGKILL; with @wait, returns
 * once it ended. */
int hutch_ext_exec_kill(const char *name, uint64_t id, int sig, uint64_t grace_ms, bool wait,
                        HutchError *reterr);

/* persist_exec_wait(): the exit code in @ret_exit_code and, when @ret_json
 * is non-NULL, the outcome's JSON (free()). */
int hutch_ext_exec_wait(const char *name, uint64_t id, int *ret_exit_code, char **ret_json,
                        HutchError *reterr);

/* persist_exec_output(): detached exec @id's output to @out_fd and
 * @err_fd, with @follow until it ends. -EPIPE when a reader went away. */
int hutch_ext_exec_output(const char *name, uint64_t id, bool follow, int out_fd, int err_fd,
                          HutchError *reterr);

/* The published ports (persist_ports_list(), persist_port_add(),
 * persist_port_remove()): the list as JSON with whether it runs; one
 * more (@ret_json: the entry as bound or saved); one fewer. */
int hutch_ext_ports_list(const char *name, char **ret_json, bool *ret_running, HutchError *reterr);
int hutch_ext_port_add(const char *name, const char *spec, char **ret_json, HutchError *reterr);
int hutch_ext_port_remove(const char *name, uint16_t port, HutchError *reterr);

/* Whether the port spec @spec ("[IP:][HOSTPORT:]PORT") publishes on a
 * host address that is not loopback: 1 with that address ("0.0.0.0",
 * "::") in @host (@size bytes, HUTCH_EXT_PORT_HOST_MAX is enough) and the
 * sandbox's port in @ret_port; 0 for loopback or an invalid spec. */
#define HUTCH_EXT_PORT_HOST_MAX 72
int hutch_ext_port_exposed(const char *spec, char *host, size_t size, unsigned *ret_port);

/* ---- hutch run: one command in a one-shot sandbox (sandbox/sandbox.h) ---- */

struct Policy; /* policy/policy.h: what the CLI's flags (run-flags.h) fill */

typedef struct HutchExtOutcome {
        int exit_code;     /* shell convention: status, or 128+signal */
        unsigned degraded; /* 1 << PolicyLimit of the limits no cgroup enforced */
        char *denied;      /* JSON array of the proxy's denials, or NULL for []; owned */
        char *json;        /* the whole outcome as `--json` writes it, or NULL (no memory); owned */
} HutchExtOutcome;

#define HUTCH_EXT_OUTCOME_NULL ((HutchExtOutcome){})
void hutch_ext_outcome_done(HutchExtOutcome *o);

/* Runs @argv under @policy (validated) as `hutch run` does
 * (sandbox_run()): @env is the environment -e K and --env-pass copy from.
 * With @tty, the command gets a pty made inside the sandbox and this
 * process's fds 0-2 must be the terminal relay's channel meanwhile
 * (terminal.h; namespace backend). Returns 0 with @ret filled (release
 * with hutch_ext_outcome_done()), or -errno with @reterr. */
int hutch_ext_run(const struct Policy *policy, char *const *argv, char *const *env, bool tty,
                  HutchExtOutcome *ret, HutchError *reterr);

/* ---- snapshots (api/persist.h, store/store.h) ---- */

typedef struct HutchExtSnapshot {
        char *name, *id;
        uint64_t created_ms;
        uint64_t disk_bytes;         /* its folder's use (hutch_ext_snapshot_list() only) */
        char *parent;                /* the snapshot below, or NULL */
        char *origin;                /* the sandbox it was taken from, or NULL; an imported one's
                                      * is the archive's text */
        bool imported;               /* made from an archive: data, never authority */
        char *policy_json;           /* its sandbox's policy ("{}" when imported) */
        char *suggested_policy_json; /* what an imported archive asked for, or NULL */
} HutchExtSnapshot;

void hutch_ext_snapshot_done(HutchExtSnapshot *s);
/* Frees the @n snapshots of @l; accepts NULL. Returns NULL. */
HutchExtSnapshot *hutch_ext_snapshots_free(HutchExtSnapshot *l, size_t n);

/* persist_snapshot(): snapshot @snap (NULL: the first free NAME.N) of
 * sandbox @name, its name in @ret_snap; @ret_running (may be NULL) whether
 * the sandbox ran, and then @ret_sandbox (may be NULL) its name (also
 * when given by id; NULL when it could not be read again). */
int hutch_ext_snapshot(const char *name, const char *snap, char **ret_snap, bool *ret_running,
                       char **ret_sandbox, HutchError *reterr);

/* The snapshots' names, sorted (a strv: free it). A failure to list them
 * says "cannot list the snapshots: ERROR" in @reterr. */
int hutch_ext_snapshot_names(char ***ret, HutchError *reterr);

/* Every snapshot that can be read, in name order, with its disk use
 * (hutch_ext_snapshots_free()); errors as hutch_ext_snapshot_names(). */
int hutch_ext_snapshot_list(HutchExtSnapshot **ret, size_t *ret_n, HutchError *reterr);

/* Snapshot @snap (name or id) into @ret (hutch_ext_snapshot_done(); no
 * disk use). -ENOENT with @reterr when there is none. */
int hutch_ext_snapshot_get(const char *snap, HutchExtSnapshot *ret, HutchError *reterr);

/* persist_snapshot_remove(): -EBUSY while something uses it. */
int hutch_ext_snapshot_remove(const char *snap, HutchError *reterr);

/* ---- hutch diff and apply: the overlay workspace (api/persist.h, store/diff.h) ---- */

/* Turns each of @paths ("/workspace/x", "./x/", "x") into a workspace
 * path ("x"), in place (persist_paths_normalize()): -EINVAL naming one
 * that is absolute elsewhere or holds "..". */
int hutch_ext_paths_normalize(char **paths, HutchError *reterr);

/* Sandbox @name's workspace changes, opened (persist_diff()): those under
 * @paths (normalised; NULL: all). Holds the store (in the caller's sub-id
 * range: store_enter_range()) and the workspace's layers until freed. */
typedef struct HutchExtDiff HutchExtDiff;
int hutch_ext_diff_open(const char *name, char **paths, HutchExtDiff **ret, HutchError *reterr);
HutchExtDiff *hutch_ext_diff_free(HutchExtDiff *d);
DEFINE_POINTER_CLEANUP(HutchExtDiff, hutch_ext_diff_free)

/* The number of changes selected. */
size_t hutch_ext_diff_count(const HutchExtDiff *d);
/* Change @i's path as a message shows it (ws_path_escape(): a new
 * string) in @ret_path; returns 1 for a regular file, 0 for another
 * type, or -ENOMEM. */
int hutch_ext_diff_entry(const HutchExtDiff *d, size_t i, char **ret_path);
/* The changes as `--json` prints them (ws_diff_to_json(), compact; free();
 * NULL when there was no memory for the text alone). */
int hutch_ext_diff_json(const HutchExtDiff *d, char **ret_text);
/* `--name-status` (ws_diff_print_stat()) to @f. */
int hutch_ext_diff_name_status(const HutchExtDiff *d, FILE *f);
/* The unified diff of change @i (all of them with HUTCH_EXT_DIFF_ALL) to
 * @fd (ws_diff_write_patch()). */
#define HUTCH_EXT_DIFF_ALL SIZE_MAX
int hutch_ext_diff_patch(const HutchExtDiff *d, size_t i, int fd, HutchError *reterr);

typedef struct HutchExtApply {
        char **conflicts;  /* the selected paths the host changed since (a strv) */
        char **modes_kept; /* entries written with a safer mode than asked (a strv) */
        size_t n_applied;
        bool applied;    /* the changes were written */
        char *workspace; /* the host folder */
} HutchExtApply;
void hutch_ext_apply_done(HutchExtApply *a);

/* persist_apply(): writes sandbox @name's changes under @paths into its
 * host folder; @force overwrites conflicts (WS_APPLY_FORCE), @modes
 * applies the sandbox's modes (WS_APPLY_MODES). @ret is filled on failure
 * too (-EEXIST: the conflicts, nothing written). */
int hutch_ext_apply(const char *name, char **paths, bool force, bool modes, HutchExtApply *ret,
                    HutchError *reterr);

/* ---- the persistent sandbox's own verbs: create, update, the keeper,
 * exec, ls, stop, rm, logs, gc (api/persist.h, store/store.h) ---- */

typedef struct HutchExtCreated {
        char *name, *id;
        /* Why it has no disk limit (persist_disk_supported()'s reason, or
         * "it cannot be enforced here"), or NULL: it has one. */
        char *no_disk_limit;
        /* Why the store maps only the caller's own id (no sub-id range:
         * docs/persistent.md "Id range"), or NULL. */
        char *no_range;
} HutchExtCreated;
void hutch_ext_created_done(HutchExtCreated *c);

/* persist_create(): sandbox @name under @policy (NULL with @from: the
 * snapshot's), from snapshot @from or empty, stopping after
 * @idle_timeout_ms idle (0: the default). */
int hutch_ext_create(const char *name, const struct Policy *policy, const char *from,
                     uint64_t idle_timeout_ms, HutchExtCreated *ret, HutchError *reterr);

/* The name and the policy (JSON) of sandbox @name_or_id, each a new
 * string (either pointer may be NULL). */
int hutch_ext_sandbox_policy(const char *name_or_id, char **ret_name, char **ret_policy_json,
                             HutchError *reterr);

/* persist_update(): @policy for sandbox @name; the fields that changed in
 * @ret_changed (a strv). */
int hutch_ext_update(const char *name, const struct Policy *policy, char ***ret_changed,
                     HutchError *reterr);

/* `hutch __keeper NAME READY_FD` (persist_keeper_main()): -errno with
 * @reterr untouched when the failure was written to @ready_fd only. */
int hutch_ext_keeper_main(const char *name, int ready_fd, char *const *env, HutchError *reterr);

/* persist_exec(): runs @e in sandbox @name (started when needed), with
 * @tty its fds the terminal relay's channel; signals read from
 * @forward_sigfd (or -EBADF) go to the command. Detached: @ret_id; else
 * @ret_exit_code and the outcome's JSON in @ret_json (free()). */
int hutch_ext_exec_run(const char *name, const HutchExtExec *e, bool tty, int forward_sigfd,
                       uint64_t *ret_id, int *ret_exit_code, char **ret_json, HutchError *reterr);

/* persist_stop(): 1 when it ran, 0 when it did not; @ret_name (may be
 * NULL) its name. */
int hutch_ext_stop(const char *name_or_id, char **ret_name, HutchError *reterr);

/* persist_destroy(): -EBUSY for a running one unless @force. */
int hutch_ext_destroy(const char *name, bool force, HutchError *reterr);

/* The path of sandbox @name_or_id's file @sub ("history.jsonl",
 * "audit.jsonl") in @ret_path and its name in @ret_name (new strings). */
int hutch_ext_sandbox_file(const char *name_or_id, const char *sub, char **ret_name,
                           char **ret_path, HutchError *reterr);

/* store_gc(), then vm_templates_reclaim() (the microVM template folders of
 * removed stores): the leftovers removed in @ret_removed. */
int hutch_ext_gc(unsigned *ret_removed, HutchError *reterr);

/* The sandboxes' names, sorted (a strv). A failure to list them says
 * "cannot list the sandboxes: ERROR" in @reterr. */
int hutch_ext_sandbox_names(char ***ret, HutchError *reterr);

/* One sandbox as `hutch ls` shows it. */
typedef struct HutchExtLsEntry {
        char *name;   /* as listed */
        bool damaged; /* its record cannot be read: nothing below is set */
        char *id;
        bool running;
        const char *backend; /* "ns", "vm" (static) */
        uint64_t created_ms, last_used_ms;
        uint64_t disk_bytes, disk_limit;
        char **degraded;  /* the limits it goes without ("disk"), a strv */
        char *parent;     /* its snapshot, or NULL */
        char *from;       /* the first snapshot below its own ones, or NULL */
        uint64_t usage;   /* its layers and its own snapshots' */
        char image[256];  /* "" for the host's base */
        char *ports_json; /* with @with_ports: GET .../ports's array */
} HutchExtLsEntry;
HutchExtLsEntry *hutch_ext_ls_free(HutchExtLsEntry *l, size_t n);

/* Every sandbox, in name order; errors as hutch_ext_sandbox_names(). */
int hutch_ext_ls(bool with_ports, HutchExtLsEntry **ret, size_t *ret_n, HutchError *reterr);

/* ---- the image store, for hutch-image and hutch-pull (image/image-store.h) ---- */

/* The image store, open (store_open(), image_store_open()). */
typedef struct HutchExtImages HutchExtImages;
int hutch_ext_images_open(HutchExtImages **ret, HutchError *reterr);
HutchExtImages *hutch_ext_images_free(HutchExtImages *h);
DEFINE_POINTER_CLEANUP(HutchExtImages, hutch_ext_images_free)

typedef struct HutchExtImage {
        char *digest; /* "sha256:<hex>", its id */
        char **names; /* as Docker shows them ("python:3.12"), sorted; a strv, maybe empty */
        size_t n_layers;
        uint64_t size; /* its layers' sizes summed */
        uint64_t imported_ms;
        bool skipped_devices; /* device nodes of its layers were left out */
        char *json;           /* what `hutch image inspect` prints, or NULL (no memory) */
} HutchExtImage;
void hutch_ext_image_done(HutchExtImage *im);
HutchExtImage *hutch_ext_images_list_free(HutchExtImage *l, size_t n);

/* image_store_import(): the OCI layout, archive or "-" (@stdin_fd) at
 * @path, named @name (NULL: its own name, if any). */
int hutch_ext_image_import(HutchExtImages *h, const char *path, const char *name, int stdin_fd,
                           HutchExtImage *ret, HutchError *reterr);
/* Every complete image, sorted by digest (hutch_ext_images_list_free()). */
int hutch_ext_image_list(HutchExtImages *h, HutchExtImage **ret, size_t *ret_n, HutchError *reterr);
/* The image @ref (a name or a digest) names. */
int hutch_ext_image_get(HutchExtImages *h, const char *ref, HutchExtImage *ret, HutchError *reterr);
/* image_store_remove(): @ret_gone whether the image went (else a name of
 * it did). */
int hutch_ext_image_remove(HutchExtImages *h, const char *ref, bool *ret_gone, HutchError *reterr);
/* image_store_gc(): 1 when an import runs (nothing removed). */
int hutch_ext_image_gc(HutchExtImages *h, unsigned *ret_removed, HutchError *reterr);

/* For hutch-pull: whether @ref is an image name the store takes
 * (image_ref_is_valid()), and the short form of canonical @name as
 * Docker shows it (image_ref_familiar(); borrowed from @name). */
bool hutch_ext_image_ref_is_valid(const char *ref);
const char *hutch_ext_image_ref_familiar(const char *name);

/* The folder a pull of @repository ("DOMAIN/PATH") downloads into:
 * $HUTCH_HOME/images/.tmp-pull-<its hash>, the same for the same
 * repository so that a pull that was cut off continues there (a new
 * string in @ret_dir). */
int hutch_ext_image_pull_dir(const HutchExtImages *h, const char *repository, char **ret_dir);

/* Imports the layout a pull left in @dir (from hutch_ext_image_pull_dir())
 * as @name (NULL: none; found by its digest), then removes the folder,
 * imported or not (its blobs matched their digests: a failed import is a
 * bad image). */
int hutch_ext_image_import_pulled(HutchExtImages *h, const char *dir, const char *name,
                                  HutchExtImage *ret, HutchError *reterr);

/* ---- hutch-archive: a snapshot as an archive (store/archive.h) ---- */

/* How a long copy shows its progress: @begin with what it does, the fd to
 * watch and whether the bytes done are its size (written) or its offset
 * (read), with the total when known (0: not); @end with what was done
 * and whether it worked. Either may be NULL. */
typedef struct HutchExtProgress {
        void (*begin)(void *userdata, const char *what, int fd, bool by_offset, uint64_t total);
        void (*end)(void *userdata, const char *done, bool ok);
        void *userdata;
} HutchExtProgress;

/* Writes snapshot @snap (name or id) with its whole chain as one archive
 * to @path (via @path.tmp-PID, renamed when complete; docs/persistent.md
 * "Moving a sandbox"). An imported snapshot passes on its suggested
 * policy as the policy, a suggestion again for the importer. */
int hutch_ext_snapshot_export(const char *snap, const char *path, const HutchExtProgress *p,
                              HutchError *reterr);

/* Imports the archive at @path as a new snapshot (named @name, or as the
 * archive says), its name in @ret_name. SECURITY: an imported snapshot is
 * data, never authority (issue 26): the archive's policy is kept only as
 * a suggestion, and its image must be in the image store. */
int hutch_ext_snapshot_import(const char *path, const char *name, const HutchExtProgress *p,
                              char **ret_name, HutchError *reterr);

/* ==== issue 16 (h16w): the streaming exec door (hutch-ext-stream.c) ====
 *
 * One exec in a persistent sandbox, streamed by a front end with its own
 * loop (hutch serve's exec WebSocket, serve-ws.c; E2B envd's Start,
 * e2b-envd-process.c): the keeper connection, the request, the command's
 * stdio pipes or its pty (sandbox/pty.h), its signals and its outcome,
 * over the keeper protocol (sandbox/keeper.h), the same for the namespace
 * and the microVM backend. SECURITY: closing the stream before the outcome
 * kills the command and everything it started. */

typedef struct HutchExtStreamOpts {
        char **argv;
        char **env;          /* "K=V" set over the sandbox's environment, or NULL */
        const char *cwd;     /* or NULL: the policy's working directory */
        uint64_t timeout_ms; /* 0: the policy's timeout */
        const char *user;    /* --user, or NULL: the sandbox's */
        bool tty;            /* a pty made inside (hutch_ext_exec_stream_pty()) */
        bool stdin_pipe;     /* without @tty: stdin a pipe (else /dev/null) */
        bool nonblock;       /* the keeper connection non-blocking */
} HutchExtStreamOpts;

typedef struct HutchExtStream HutchExtStream;

/* Connects to the keeper of sandbox @name (started when it is not
 * running) and sends the exec of @o. Returns 0 with the stream in @ret
 * (hutch_ext_exec_stream_close()), or -errno with @reterr (-ENOENT when
 * there is no such sandbox; -EINVAL without argv). */
int hutch_ext_exec_stream_open(const char *name, const HutchExtStreamOpts *o, HutchExtStream **ret,
                               HutchError *reterr);

/* Closes the keeper connection (the command is killed unless its outcome
 * came) and the ends not taken. Accepts NULL; returns NULL. */
HutchExtStream *hutch_ext_exec_stream_close(HutchExtStream *s);
DEFINE_POINTER_CLEANUP(HutchExtStream, hutch_ext_exec_stream_close)

/* The keeper connection, to poll for its answers (borrowed). */
int hutch_ext_exec_stream_fd(const HutchExtStream *s);

/* Without a tty: hands the caller the command's ends (each close-on-exec,
 * the caller closes them): @ret_in stdin's write end (non-blocking;
 * -EBADF without stdin_pipe), @ret_out and @ret_err the read ends of
 * stdout and stderr (non-blocking). -EBADF for each with a tty, or when
 * taken before. Any pointer may be NULL (that end stays the stream's). */
void hutch_ext_exec_stream_take_stdio(HutchExtStream *s, int *ret_in, int *ret_out, int *ret_err);

/* With a tty: the channel the pty's master comes on when the command
 * started inside (borrowed, to poll), or -EBADF (no tty, or the master
 * came, or the channel was given up). */
int hutch_ext_exec_stream_pty_fd(const HutchExtStream *s);

/* With a tty: receives the master (blocking until the channel has it),
 * sets the window size to @cols x @rows (when neither is 0) and lets the
 * command exec; the channel is closed then, in every case. Returns 0 with
 * @ret_master (close-on-exec, non-blocking; the caller closes it), -EPIPE
 * when the channel closed without one (the command did not start: its
 * outcome says why), -EBADMSG for anything but one pty master, -EBADF
 * when there is no channel, or -errno. */
int hutch_ext_exec_stream_pty(HutchExtStream *s, uint16_t cols, uint16_t rows, int *ret_master);

/* Closes the pty channel without waiting for the master (the command, if
 * it starts, gets -EPIPE from its side and does not exec). Accepts
 * NULL. */
void hutch_ext_exec_stream_pty_abandon(HutchExtStream *s);

/* Sets the window size of the pty master @master (from
 * hutch_ext_exec_stream_pty()): 0 or -errno. */
int hutch_ext_exec_stream_resize(int master, uint16_t cols, uint16_t rows);

/* Reads one answer of the keeper, as hutch_ext_exec_answer():
 * HUTCH_EXT_ANSWER_STARTED with @ret_id, or HUTCH_EXT_ANSWER_OUTCOME with
 * @ret_exit_code and (when @ret_json is non-NULL) the outcome's JSON
 * (free()); -EAGAIN (nonblock) when nothing waits; -EPIPE when the keeper
 * closed the connection; -ECONNRESET when it was stopping and started
 * nothing; -EPERM with its refusal in @reterr; another -errno with
 * @reterr. */
int hutch_ext_exec_stream_answer(HutchExtStream *s, uint64_t *ret_id, int *ret_exit_code,
                                 char **ret_json, HutchError *reterr);

/* Passes signal @sig (1 to NSIG-1) on to the command: 0 or -errno
 * (-EINVAL for another number). */
int hutch_ext_exec_stream_signal(HutchExtStream *s, int sig);

/* ==== issue 16 (h16x): hutch serve's and the E2B server's door ==== */

/* ---- the store's folders (store/store.h) ---- */

typedef struct HutchExtStorePaths {
        char *home;    /* $HUTCH_HOME: the store (the E2B server's table lives in home/e2b) */
        char *state;   /* this store's runtime folder: keepers' sockets and locks */
        char *runtime; /* the caller's, shared by its stores (the default api.sock) */
} HutchExtStorePaths;
void hutch_ext_store_paths_done(HutchExtStorePaths *p);

/* Opens the store (creating its folders, as every call here does) and
 * returns its folders in @ret (hutch_ext_store_paths_done()), or -errno
 * with the store's message in @reterr. */
int hutch_ext_store_paths(HutchExtStorePaths *ret, HutchError *reterr);

/* ---- a running sandbox's memory and cpu, for GET .../stats ---- */

typedef struct HutchExtStats {
        bool running; /* its keeper answers */
        bool has_memory, has_cpu;
        uint64_t memory_bytes; /* its cgroup's memory.current (v1: memory.usage_in_bytes) */
        uint64_t cpu_usec;     /* its cgroup's cpu time (v2 cpu.stat, else v1 cpuacct) */
} HutchExtStats;

/* Samples sandbox @name's cgroup now, found from its keeper's pid (all
 * false when it does not run, or what cannot be read). The cgroup mounts
 * are detected once per process: call from one thread. */
void hutch_ext_stats_sample(const char *name, HutchExtStats *ret);

/* Forgets the cgroup mounts hutch_ext_stats_sample() detected. */
void hutch_ext_stats_reset(void);

/* ---- the allowlist's host patterns (net/allowlist.h) ---- */

/* Whether @pattern is an allow or deny entry ("HOST[:PORT]", "*.DOMAIN",
 * an address or CIDR): 0, or -EINVAL with why in @reterr. */
int hutch_ext_host_pattern_check(const char *pattern, HutchError *reterr);

/* Whether the allow entry @entry is within an entry of @ceiling (a strv;
 * NULL: none): the same or a narrower host, on ports that entry allows. */
bool hutch_ext_host_within(char **ceiling, const char *entry);

/* ---- hutch-pull: the registry client (registry/registry.h) ----
 *
 * Not in libhutch-core: hutch-ext-pull.c is compiled into the registry
 * library (it links libssl and http_parser), which only hutch-pull links. */

struct ImageRef;

/* One registry a pull tries (image_ref_candidates()), its fields borrowed
 * from @ref, which the list owns. */
typedef struct HutchExtPullRef {
        const char *domain;      /* "registry.example.test", "localhost:5000" */
        const char *repository;  /* "library/python" */
        const char *tag;         /* "3.12", "latest"; NULL for a pull by digest only */
        const char *endpoint;    /* the host[:port] connected to (image_ref_endpoint()) */
        const char *alias_where; /* the registries.conf [aliases] line that resolved it, or NULL */
        bool insecure;           /* its [[registry]] says insecure = true */
        bool mirror;             /* @endpoint is a [[registry.mirror]] of @domain */
        struct ImageRef *ref;    /* the registry client's */
} HutchExtPullRef;

/* What a pull of @s tries, in order (image_ref_candidates()): a new array
 * in @ret (hutch_ext_pull_refs_free()) of @ret_n >= 1, or -errno with
 * @reterr. */
int hutch_ext_pull_candidates(const char *s, HutchExtPullRef **ret, size_t *ret_n,
                              HutchError *reterr);
HutchExtPullRef *hutch_ext_pull_refs_free(HutchExtPullRef *l, size_t n);

/* @r written out ("registry.example.test/library/python:3.12"): a new
 * string or NULL (OOM). */
char *hutch_ext_pull_ref_string(const HutchExtPullRef *r);

/* registry.h's PullOptions and PullProgressOps. */
typedef struct HutchExtPullProgress {
        void (*begin)(void *userdata, const char *what, int fd, uint64_t size);
        void (*end)(void *userdata, bool ok);
        void *userdata;
} HutchExtPullProgress;

typedef struct HutchExtPullOptions {
        bool tls_verify;      /* false: any certificate, or plain HTTP */
        const char *os;       /* "linux" */
        const char *arch;     /* "amd64" */
        const char *variant;  /* NULL: any */
        const char *cert_dir; /* extra CA certificates (*.crt), or NULL */
        const char *auth_file;
        const HutchExtPullProgress *progress; /* or NULL */
} HutchExtPullOptions;

/* registry_pull_confined(): @r into the OCI image layout @layout_dir by a
 * confined child; the manifest's digest in @ret_digest and the layout's
 * fd with its flock in @ret_layout_fd (each may be NULL). */
int hutch_ext_pull(const HutchExtPullRef *r, const HutchExtPullOptions *o, const char *layout_dir,
                   char **ret_digest, int *ret_layout_fd, HutchError *reterr);

/* ---- files owned by a user (issue 20: E2B's files written "as" a user) ----
 * hutch_file_write(), hutch_file_mkdir() and hutch_file_move() of hutch.h
 * with @user (a --user spec: NAME, UID, NAME:GROUP, UID:GID; NULL: as
 * those, owned by the sandbox's root), resolved in the sandbox's own
 * /etc/passwd and /etc/group: the file written, the directory made and
 * the missing parents made on the way are that user's (fchown() on the
 * descriptor, never a path; docs/api.md "Files"). An existing directory
 * keeps its owner. -EINVAL with @reterr for a user the sandbox lacks;
 * -EPERM when the sandbox cannot hand out the user's ids (not in its
 * user namespace: a sandbox without a range of ids has only root). */
int hutch_ext_file_write(const char *name, const char *path, const void *data, size_t len,
                         unsigned mode, const char *user, HutchError *reterr);
int hutch_ext_file_mkdir(const char *name, const char *path, unsigned mode, const char *user,
                         HutchError *reterr);
int hutch_ext_file_move(const char *name, const char *from, const char *to, unsigned flags,
                        const char *user, HutchError *reterr);

/* ---- pause that keeps memory (issue 20: E2B's pause) ----
 * Freezes (@on) or thaws running sandbox @name whole (its cgroup: v2
 * cgroup.freeze or the v1 freezer; a microVM's QEMU): its processes stay,
 * using no CPU, until the thaw or the keeper's end (an idle stop, `hutch
 * stop`: thawed, then stopped). Not tied to the caller's connection, as
 * the snapshot's freeze is. Execs and file operations are refused while
 * it is paused. Idempotent. Returns 0, -ENOTCONN when it is not running,
 * -EPERM with @reterr when the keeper refused (a sandbox without a
 * cgroup of its own, as for a user without delegated cgroups: "no
 * cgroup: this sandbox cannot be frozen"), or another -errno. */
int hutch_ext_pause(const char *name, bool on, HutchError *reterr);

/* ---- issue 20 (h20r): E2B's kill answers once the processes are gone ----
 * Stops running sandbox @name's processes, as hutch_stop(), but returns
 * once its keeper has answered (every process of the sandbox has ended,
 * its cgroups and proxy are removed), not after the keeper's own exit and
 * the release of its disk image (the ext4 unmount and the loop device's
 * detach, ~10-25 ms), which hutch_destroy() still waits for. For a caller
 * that destroys the sandbox next. @ret_keeper: a pidfd of the exiting
 * keeper (readable once it has exited: wait on it before the destroy,
 * which would poll), or -EBADF when there is none (it was not running, or
 * no pidfd). Returns 0 (also when it was not running), or -errno with
 * @reterr. */
int hutch_ext_halt(const char *name, int *ret_keeper, HutchError *reterr);

/* ---- issue 16 (h16p): the run flags' policy (src/cli/run-flags.c) ----
 * The CLI's run flags (hutch run, create, update; the serve, mcp and E2B
 * servers' defaults) fill a struct Policy (policy/policy.h) through these
 * calls only; the CLI never sees its fields. A flag's value is applied as
 * the flag named says, with the flag's own error messages. */

/* A new policy with the documented defaults (docs/policy.md), or NULL
 * (no memory). hutch_ext_policy_free() accepts NULL and returns NULL. */
struct Policy *hutch_ext_policy_new(void);
struct Policy *hutch_ext_policy_free(struct Policy *p);
DEFINE_POINTER_CLEANUP(struct Policy, hutch_ext_policy_free)

/* Applies the JSON policy @json (a NUL-terminated object) or the JSON
 * file @path over @p: -EINVAL (or the file's errno) with @reterr. */
int hutch_ext_policy_load_json(struct Policy *p, const char *json, HutchError *reterr);
int hutch_ext_policy_load_file(struct Policy *p, const char *path, HutchError *reterr);

/* Checks @p as a whole against the host (policy_validate()). */
int hutch_ext_policy_validate(const struct Policy *p, HutchError *reterr);

/* @p as the JSON that hutch_ext_policy_load_json() takes back, in @ret (a
 * new string). -ENOMEM, or -EINVAL for a policy JSON cannot hold. */
int hutch_ext_policy_to_json(const struct Policy *p, char **ret);

/* The run flags that set the policy, one per flag. */
typedef enum HutchExtFlag {
        HUTCH_EXT_FLAG_VOLUME,            /* -v SRC:DST[:ro] */
        HUTCH_EXT_FLAG_WORKDIR,           /* -w DIR */
        HUTCH_EXT_FLAG_USER,              /* -u USER */
        HUTCH_EXT_FLAG_ENV,               /* -e K[=V] */
        HUTCH_EXT_FLAG_ENV_PASS,          /* --env-pass K */
        HUTCH_EXT_FLAG_WORKSPACE,         /* --workspace DIR[:MODE] (hutch run: mount) */
        HUTCH_EXT_FLAG_WORKSPACE_OVERLAY, /* the same where no MODE means overlay (create) */
        HUTCH_EXT_FLAG_TMPFS,             /* --tmpfs PATH[:size=N] */
        HUTCH_EXT_FLAG_READ_ONLY,         /* --read-only (no value) */
        HUTCH_EXT_FLAG_HOSTNAME,          /* --hostname */
        HUTCH_EXT_FLAG_NETWORK,           /* --network */
        HUTCH_EXT_FLAG_DNS,               /* --dns */
        HUTCH_EXT_FLAG_ALLOW_DEGRADED,    /* --allow-degraded (no value) */
        HUTCH_EXT_FLAG_ALLOW_HOST,        /* --allow-host HOST[:PORT] or an http(s) URL */
        HUTCH_EXT_FLAG_PUBLISH,           /* -p */
        HUTCH_EXT_FLAG_DENY_HOST,         /* --deny-host */
        HUTCH_EXT_FLAG_ALLOW_PRIVATE,     /* --allow-private */
        HUTCH_EXT_FLAG_RESOLVE,           /* --resolve */
        HUTCH_EXT_FLAG_AUDIT_LOG,         /* --audit-log */
        HUTCH_EXT_FLAG_SECRET,            /* --secret */
        HUTCH_EXT_FLAG_UPSTREAM_CA,       /* --upstream-ca */
        HUTCH_EXT_FLAG_BACKEND,           /* --backend */
        HUTCH_EXT_FLAG_VM_ACCEL,          /* --vm-accel */
        HUTCH_EXT_FLAG_VM_KERNEL,         /* --vm-kernel */
        HUTCH_EXT_FLAG_IMAGE,             /* --image */
        HUTCH_EXT_FLAG_MEMORY,            /* --memory */
        HUTCH_EXT_FLAG_MEMORY_SWAP,       /* --memory-swap */
        HUTCH_EXT_FLAG_CPUS,              /* --cpus */
        HUTCH_EXT_FLAG_PIDS,              /* --pids */
        HUTCH_EXT_FLAG_TIMEOUT,           /* --timeout */
        HUTCH_EXT_FLAG_DISK,              /* --disk */
        HUTCH_EXT_FLAG_OUTPUT_LIMIT,      /* --output-limit */
        _HUTCH_EXT_FLAG_MAX,
        _HUTCH_EXT_FLAG_INVALID = -EINVAL,
} HutchExtFlag;

/* Applies run flag @flag with @value (ignored by the flags without one)
 * to @p. -EINVAL with @reterr naming the flag and value (e.g. "invalid
 * size '12q' in --tmpfs '/tmp:size=12q'"), or -ENOMEM. */
int hutch_ext_policy_flag(struct Policy *p, HutchExtFlag flag, const char *value,
                          HutchError *reterr);

/* What the CLI verbs read of a policy; the pointers are borrowed from the
 * policy and live as long as it is unchanged. */
typedef struct HutchExtPolicyView {
        const char *image;        /* --image, or NULL */
        const char *workspace;    /* the workspace's host path, or NULL */
        bool workspace_mount;     /* the workspace is mounted (not copied, no overlay) */
        bool workspace_copy;      /* the workspace is copied in */
        bool read_only;           /* --read-only */
        bool vm;                  /* --backend vm */
        uint64_t output_limit;    /* bytes per stream; 0: none */
        bool memory_explicit;     /* --memory was given (memory_max is the user's) */
        uint64_t memory_max;      /* bytes */
        uint32_t cpu_millis;      /* 1000: one CPU; 0: no quota */
        unsigned limits_explicit; /* 1 << limit, as HutchExtOutcome's degraded */
        char *const *ports;       /* -p entries, or NULL */
        char *const *allow_hosts; /* --allow-host entries, or NULL */
} HutchExtPolicyView;

void hutch_ext_policy_view(const struct Policy *p, HutchExtPolicyView *ret);

/* The name of limit @limit (a bit number of limits_explicit and of
 * HutchExtOutcome's degraded: "memory", "cpus", ...), or NULL past the
 * last. */
const char *hutch_ext_policy_limit_name(unsigned limit);

/* Checks before anything is created that -w names a directory that will
 * exist when a one-shot sandbox of the namespace backend starts (the root
 * holds only mount points; the system directories, the workspace and the
 * binds show host directories; tmpfs mounts start empty). -ENOENT or
 * -ENOTDIR with @reterr naming the path; 0 when it exists or cannot be
 * told from the host. */
int hutch_ext_policy_check_workdir(const struct Policy *p, HutchError *reterr);
