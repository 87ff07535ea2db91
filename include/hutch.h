/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef HUTCH_H
#define HUTCH_H

/* hutch: the C API (docs/api-c.md). "The small function your agent calls
 * instead of exec()": one-shot sandboxes, persistent sandboxes, snapshots,
 * and file access inside a sandbox. The CLI, `hutch serve` and `hutch mcp`
 * are thin layers over these calls.
 *
 * Conventions:
 *  - Every function returns 0 (or a count) on success and a negative errno
 *    on failure, and then fills @err (when not NULL) with a one-line
 *    message; for a policy error also the JSON pointer of the field
 *    ("/limits/memory") in err->field.
 *  - Output parameters are written only on success. Strings and arrays
 *    returned are owned by the caller and freed with the matching
 *    hutch_*_free() (or free() where said).
 *  - Sandboxes and snapshots are named [a-z0-9][a-z0-9_.-]{0,62}; a
 *    sandbox's 16-hex-digit id is accepted wherever a name is.
 *  - The store is $HUTCH_HOME (docs/persistent.md); the calls work for
 *    root and for unprivileged users.
 *  - The library is not thread-safe: call it from one thread at a time
 *    (each call is independent; state lives in the store and the keepers).
 *  - Stable: HUTCH_API_VERSION grows with additions; nothing here changes
 *    meaning within a major version. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HUTCH_API_VERSION_MAJOR 1
#define HUTCH_API_VERSION_MINOR 0

typedef struct hutch_error {
        int code;          /* positive errno */
        char message[512]; /* one line, no trailing newline */
        char field[128];   /* JSON pointer of the policy field at fault, or "" */
} hutch_error;

/* ---- policies ---- */

/* The policy of docs/policy.md: the same fields as `hutch run`'s flags. */
typedef struct hutch_policy hutch_policy;

/* A policy with the defaults (no network, 2g memory, 1024 pids, ...). */
hutch_policy *hutch_policy_new(void);
void hutch_policy_free(hutch_policy *p);

/* Loads a JSON policy document (docs/policy.md) over @p's current values:
 * -EINVAL with err->field naming the field for a bad one. */
int hutch_policy_load_json(hutch_policy *p, const char *json, hutch_error *err);

/* The policy as a JSON document (only explicit limits are written); free(). */
int hutch_policy_to_json(const hutch_policy *p, char **ret_json, hutch_error *err);

/* Setters: each takes the value as the matching `hutch run` flag does and
 * fails with -EINVAL naming it. */
int hutch_policy_set_workspace(hutch_policy *p, const char *spec /* DIR[:mount|copy|overlay] */,
                               hutch_error *err);
int hutch_policy_add_bind(hutch_policy *p, const char *spec /* HOST:SANDBOX[:ro] */,
                          hutch_error *err);
int hutch_policy_add_env(hutch_policy *p, const char *spec /* K=V or K */, hutch_error *err);
int hutch_policy_set_workdir(hutch_policy *p, const char *dir, hutch_error *err);
int hutch_policy_set_network(hutch_policy *p, const char *mode /* none|allow */, hutch_error *err);
int hutch_policy_allow_host(hutch_policy *p, const char *pattern, hutch_error *err);
int hutch_policy_add_secret(hutch_policy *p, const char *spec /* as --secret */, hutch_error *err);
/* @name: memory, memory-swap, cpus, pids, timeout, disk, output-limit;
 * @value as the flag takes it ("512m", "1.5", "30s"). */
int hutch_policy_set_limit(hutch_policy *p, const char *name, const char *value, hutch_error *err);

/* Checks the policy against the host (paths exist, combinations make
 * sense): what every call below does first. */
int hutch_policy_validate(const hutch_policy *p, hutch_error *err);

/* ---- outcomes ---- */

typedef struct hutch_outcome {
        int exit_code;   /* shell convention: status, 126, 127, 128+signal */
        int signal;      /* terminating signal, 0 if none */
        char reason[16]; /* exited, signaled, timeout, oom, pids, killed */
        uint64_t wall_ms, cpu_ms, mem_peak_bytes;
        bool stdout_truncated, stderr_truncated;
        char *json; /* the whole outcome as JSON (with "denied", "degraded"); free() */
} hutch_outcome;

void hutch_outcome_done(hutch_outcome *o); /* frees o->json */

/* ---- one-shot ---- */

/* Runs @argv in a fresh sandbox under @p with the caller's stdin, stdout
 * and stderr (as `hutch run`), and waits. The command's failure is an
 * outcome, not an error. */
int hutch_run(const hutch_policy *p, char *const argv[], hutch_outcome *ret, hutch_error *err);

/* ---- persistent sandboxes ---- */

/* Creates sandbox @name with policy @p (NULL with @from_snapshot: the
 * snapshot's policy), from @from_snapshot or empty. Returns its id in
 * @ret_id (17 bytes) when not NULL. -EEXIST for a taken name. */
int hutch_create(const char *name, const hutch_policy *p, const char *from_snapshot,
                 char ret_id[17], hutch_error *err);

/* Replaces sandbox @name's policy with @p (as `hutch update`, but the
 * whole policy, not flags over it). A running namespace sandbox takes new
 * memory, swap, cpus and pids limits at once (-EPERM naming a limit it
 * cannot change live), and a running sandbox of either backend a new
 * allow_hosts, deny_hosts, allow_private and resolve through its
 * hutch-proxy; any other change to a running sandbox is -EBUSY with the
 * first field named in the message; the workspace and the backend never
 * change (-EINVAL). Nothing to change is 0. */
int hutch_update(const char *name, const hutch_policy *p, hutch_error *err);
/* Sandbox @name's stored policy as a JSON document (free() it): what
 * hutch_update() compares a new one with. */
int hutch_get_policy(const char *name, char **ret_json, hutch_error *err);

typedef struct hutch_exec_options {
        char *const *argv;   /* required */
        char *const *env;    /* "K=V" over the sandbox's environment, or NULL */
        const char *cwd;     /* absolute, or NULL for the policy's */
        uint64_t timeout_ms; /* 0: the policy's */
        int stdin_fd;        /* -1: /dev/null */
        int stdout_fd;       /* -1: discarded */
        int stderr_fd;       /* -1: discarded */
        bool detach;         /* run in the background; @ret gets no outcome */
        /* The user the command runs as, found in the sandbox's /etc/passwd
         * and /etc/group: "NAME", "UID", "NAME:GROUP" or "UID:GID" (docker's
         * --user), or NULL for the sandbox's (its policy's "user", else its
         * image's User, else root). -EINVAL for a malformed one; an unknown
         * one ends the exec with status 125. */
        const char *user;
} hutch_exec_options;

/* Runs a command in sandbox @name (started on demand) and waits for its
 * outcome. With o->detach, returns once it started (its output goes to the
 * sandbox's logs) and @ret is left untouched. */
int hutch_exec(const char *name, const hutch_exec_options *o, hutch_outcome *ret, hutch_error *err);

/* ---- the execs of a sandbox as processes (docs/processes.md) ----
 * Every exec has an id (> 0). None of these starts a stopped sandbox:
 * -ENOENT for an exec id that never was, -ESRCH for signalling one that
 * has ended ("exec 7 has already ended (exit 0)"). */

/* Runs @o's command in the background (whatever o->detach says): returns
 * once it started, with its exec id in @ret_id (may be NULL). Its stdout
 * and stderr go to the sandbox's log files (o->stdout_fd and o->stderr_fd
 * are not used): 8 MiB of each kept, the head (hutch_exec_output()). */
int hutch_exec_detached(const char *name, const hutch_exec_options *o, uint64_t *ret_id,
                        hutch_error *err);

/* As o->stdin_fd of hutch_exec_detached(): the command's stdin is a pipe
 * that the sandbox's keeper keeps open, fed later by hutch_exec_stdin(). */
#define HUTCH_EXEC_STDIN_KEEP (-2)

/* Writes @len bytes of @data to the stdin of running exec @id (started
 * detached with HUTCH_EXEC_STDIN_KEEP), blocking until the command took
 * them into its pipe (ETIMEDOUT after 30 s of it not reading); with
 * @close, then closes its stdin (the command reads EOF). ENOTCONN for an
 * exec started without its stdin kept (or closed already), ESRCH for one
 * that ended, ENOENT for one that never was, EPIPE when the command
 * closed its end. */
int hutch_exec_stdin(const char *name, uint64_t id, const void *data, size_t len, bool close,
                     hutch_error *err);

typedef struct hutch_exec_info {
        uint64_t id;
        char **argv; /* NULL-terminated */
        uint64_t start_ms;
        int pid; /* its first process as the sandbox sees it; 0: not known yet */
        bool detached;
} hutch_exec_info;

/* The running execs of sandbox @name (none for a stopped one); free with
 * hutch_exec_list_free(). */
int hutch_exec_list(const char *name, hutch_exec_info **ret, size_t *ret_n, hutch_error *err);
void hutch_exec_list_free(hutch_exec_info *l, size_t n);

/* Sends @sig to exec @id's command; unless @sig is SIGKILL and @grace_ms
 * is 0, everything the exec started is killed @grace_ms later if it still
 * runs (10000 as `hutch kill`; 0: never). Returns at once: wait for the end
 * with hutch_exec_wait(). */
int hutch_exec_signal(const char *name, uint64_t id, int sig, uint64_t grace_ms, hutch_error *err);

/* Waits for exec @id to end (at once for one that did) and fills @ret
 * with its outcome (release with hutch_outcome_done()). */
int hutch_exec_wait(const char *name, uint64_t id, hutch_outcome *ret, hutch_error *err);

/* Writes detached exec @id's output so far, its stdout to @stdout_fd and
 * its stderr to @stderr_fd (-1: discarded; blocking writes); with
 * @follow, goes on as it writes until it ends (or the sandbox stops).
 * -ENOENT for an exec that was not detached. */
int hutch_exec_output(const char *name, uint64_t id, bool follow, int stdout_fd, int stderr_fd,
                      hutch_error *err);

typedef struct hutch_sandbox_info {
        char name[64];
        char id[17];
        bool running;
        /* disk_bytes: its layers' files; with a disk image, the blocks the
         * image file has allocated on the host (docs/persistent.md). */
        uint64_t created_ms, last_used_ms, disk_bytes;
        char parent[64]; /* snapshot it continues from, or "" */
        /* hutch_get() only (NULL from hutch_list()): the sandbox's policy as
         * JSON, as recorded (an image pinned to its digest), and the disk
         * limit that is enforced (0: none). Released by
         * hutch_sandbox_info_done(). */
        char *policy_json;
        uint64_t disk_limit_bytes;
        /* ABI: the caller allocates this struct (hutch_get()) and walks
         * hutch_list()'s array of it: it never grows. What came later is
         * hutch_sandbox_describe()'s. */
} hutch_sandbox_info;

/* Every sandbox (sorted by name); free() the array. */
int hutch_list(hutch_sandbox_info **ret, size_t *ret_n, hutch_error *err);
/* One sandbox; hutch_sandbox_info_done(@ret) releases what it holds. */
int hutch_get(const char *name, hutch_sandbox_info *ret, hutch_error *err);
/* Frees @i's policy_json and sets it to NULL (@i itself is the caller's). */
void hutch_sandbox_info_done(hutch_sandbox_info *i);

/* ---- a sandbox's description (issue 23, HTTP API 1.4) ---- */

/* What `hutch ls` and the dashboard show besides hutch_sandbox_info: the
 * backend ("ns" or "vm"), the policy's image (NAME[:TAG] or sha256:HEX;
 * "" for the host's base), and the ports its policy publishes (-p):
 * @n_ports of them, the first 16 listed in @ports by their port inside the
 * sandbox (hutch_ports() gives the host side as bound).
 * ABI: only the library allocates it (hutch_sandbox_describe()); a later
 * version may append fields, never move or resize these. */
typedef struct hutch_sandbox_desc {
        char backend[8];
        char image[256];
        unsigned n_ports;
        uint16_t ports[16];
        /* Since HTTP API 1.6: a name (NAME:TAG) of the image store that
         * points at @image now, the first in order, or "" (none does, or
         * no image). */
        char image_name[256];
} hutch_sandbox_desc;

/* Sandbox @name's description into *@ret, allocated by the library
 * (free() it). Reads its record and policy (and the image store's names)
 * only: mounts nothing, asks no keeper. -ENOENT for no such sandbox. */
int hutch_sandbox_describe(const char *name, hutch_sandbox_desc **ret, hutch_error *err);

/* Stops a running sandbox (its processes end; its files stay). 0 also when
 * it was not running. */
int hutch_stop(const char *name, hutch_error *err);

/* Stops (when running) and removes the sandbox and its files. */
int hutch_destroy(const char *name, hutch_error *err);

/* ---- published ports (docs/network.md "Published ports") ---- */

/* Sandbox @name's published ports as a JSON array (free() it) of
 * {"port":N,"protocol":"tcp","host_ip":S,"host_port":N}: while it runs,
 * as bound (@ret_running, may be NULL, true); stopped, its policy's
 * entries (host_port 0: a free one, chosen at the start). */
int hutch_ports(const char *name, char **ret_json, bool *ret_running, hutch_error *err);

/* A socket connected to 127.0.0.1:@port inside running sandbox @name,
 * published or not (non-blocking, close-on-exec; the caller closes it).
 * ENOTCONN when the sandbox is not running, ECONNREFUSED when nothing
 * listens on @port there. */
int hutch_port_connect(const char *name, unsigned port, int *ret_fd, hutch_error *err);

/* Publishes one more port of sandbox @name, as `hutch port NAME add
 * SPEC`: @spec is docker's "[IP:][HOSTPORT:]PORT" (IP default 127.0.0.1,
 * HOSTPORT 0 or none: a free one). Saved in its policy; a running sandbox
 * gets its listener now (a host port in use is refused, EADDRINUSE, with
 * nothing saved). The entry as hutch_ports() lists it in @ret_json (a JSON
 * array of one; free() it; may be NULL). */
int hutch_port_publish(const char *name, const char *spec, char **ret_json, hutch_error *err);

/* Stops publishing port @port (1-65535, inside the sandbox) of sandbox
 * @name, as `hutch port NAME rm PORT`: dropped from its policy, its
 * listener closed when it runs. ENOENT when it was not published. */
int hutch_port_unpublish(const char *name, unsigned port, hutch_error *err);

/* ---- snapshots ---- */

/* Freezes sandbox @name's files into snapshot @snap (running or not;
 * running processes are not captured). */
int hutch_snapshot(const char *name, const char *snap, hutch_error *err);

/* Puts sandbox @name back to snapshot @snap: it is stopped, its own
 * changes since are discarded, and it continues from @snap. */
int hutch_restore(const char *name, const char *snap, hutch_error *err);

int hutch_snapshot_remove(const char *snap, hutch_error *err);

/* Snapshot names, sorted; free with hutch_strv_free(). */
int hutch_snapshot_list(char ***ret, hutch_error *err);
void hutch_strv_free(char **l);

/* ---- files inside a sandbox ----
 * Paths are absolute inside the sandbox, or relative to its workspace (or
 * $HOME without one). They are resolved inside the sandbox, by a process
 * of the sandbox with its identity and confinement: nothing outside the
 * sandbox's own view (its root, its mounts) can be reached, whatever `..`,
 * symlinks or magic links say. The sandbox is started on demand. */

/* Reads a regular file of at most @max bytes (-EFBIG beyond); free(). */
int hutch_file_read(const char *name, const char *path, size_t max, char **ret_data,
                    size_t *ret_len, hutch_error *err);

/* Flags or-ed into the @mode of hutch_file_write() and hutch_file_mkdir():
 * create the missing directories of the path (0755), and for mkdir accept
 * an existing directory (mkdir -p). */
#define HUTCH_FILE_PARENTS (1U << 16)
/* For hutch_file_move(): replace an existing destination (not a
 * directory). */
#define HUTCH_FILE_REPLACE (1U << 17)

/* Writes @len bytes to @path atomically (a temp file renamed over it),
 * creating it with @mode (e.g. 0644) or keeping an existing file's mode;
 * with HUTCH_FILE_PARENTS in @mode, its missing directories too. */
int hutch_file_write(const char *name, const char *path, const void *data, size_t len,
                     unsigned mode, hutch_error *err);

/* Makes directory @path with @mode (-EEXIST when it exists); with
 * HUTCH_FILE_PARENTS, its missing parents too and no error for an
 * existing directory. */
int hutch_file_mkdir(const char *name, const char *path, unsigned mode, hutch_error *err);

/* Renames @from to @to inside the sandbox (-EEXIST for an existing @to
 * unless @flags holds HUTCH_FILE_REPLACE; HUTCH_FILE_PARENTS makes @to's
 * missing directories; -EXDEV across file systems of the sandbox). */
int hutch_file_move(const char *name, const char *from, const char *to, unsigned flags,
                    hutch_error *err);

typedef struct hutch_file_info {
        char name[256]; /* the entry's name (list) or the path's last part (stat) */
        char type[8];   /* file, dir, symlink, other */
        uint64_t size;
        unsigned mode; /* permission bits */
        int64_t mtime_ms;
} hutch_file_info;

/* The entries of directory @path, sorted by name; free() the array. */
int hutch_file_list(const char *name, const char *path, hutch_file_info **ret, size_t *ret_n,
                    hutch_error *err);
int hutch_file_stat(const char *name, const char *path, hutch_file_info *ret, hutch_error *err);
/* Removes a file, a symlink or an empty directory (-ENOTEMPTY otherwise). */
int hutch_file_remove(const char *name, const char *path, hutch_error *err);

/* One entry of a walk: @path relative to the directory walked. */
typedef struct hutch_file_entry {
        char *path; /* "src/main.c" */
        char type[8];
        uint64_t size;
        unsigned mode;
        int64_t mtime_ms;
} hutch_file_entry;

/* The tree below directory @path, depth-first and sorted by path, at most
 * @max_depth levels deep (0: as deep as it goes, up to 64), symlinks
 * listed and never followed, at most 100000 entries (-E2BIG beyond); free
 * with hutch_file_entries_free(). */
int hutch_file_walk(const char *name, const char *path, unsigned max_depth, hutch_file_entry **ret,
                    size_t *ret_n, hutch_error *err);
void hutch_file_entries_free(hutch_file_entry *l, size_t n);

/* ---- a tree as tar (docs/api-c.md) ---- */

/* The tree below directory @path as a tar stream (ustar, pax headers for
 * long names): directories, regular files and symlinks (never followed)
 * with their permission bits and mtimes; other types left out. At most
 * @max bytes (-EFBIG beyond) and 100000 entries (-E2BIG); free(). */
int hutch_file_archive_get(const char *name, const char *path, size_t max, char **ret_data,
                           size_t *ret_len, hutch_error *err);

/* Extracts the tar stream @data (@len bytes) into directory @path (with
 * HUTCH_FILE_PARENTS in @flags: made with its missing parents), inside the
 * sandbox. Refused (err->message names the entry): absolute paths and ".."
 * components (-EPERM), anything through a symlink (-ELOOP), symlinks
 * pointing outside @path and hard links to anything but a file below it
 * (-EPERM), device nodes and fifos (-EPERM); set-user-id and set-group-id
 * bits are dropped. Entries extracted before a refusal stay. */
int hutch_file_archive_put(const char *name, const char *path, const void *data, size_t len,
                           unsigned flags, hutch_error *err);

/* ---- the workspace ---- */

/* The sandbox's changes to its overlay workspace as JSON (an array of
 * {path, kind, type}, as `hutch diff --json`); free(). */
int hutch_diff_json(const char *name, char **ret_json, hutch_error *err);

/* Writes those changes (all, or under @paths, a NULL-terminated list) to the
 * host folder; -EEXIST (nothing written) when the host changed a path the
 * sandbox changed, unless @force. Returns the number applied. */
int hutch_apply(const char *name, char *const *paths, bool force, hutch_error *err);

#ifdef __cplusplus
}
#endif

#endif
