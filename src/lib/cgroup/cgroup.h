/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* cgroups: hard per-sandbox resource limits (memory + swap, pids, cpu
 * quota), killing or freezing everything a sandbox started, and the
 * counters the outcome reports (OOM kills, pids.max hits, cpu time, peak
 * memory). docs/cgroups.md explains the choices for users.
 *
 * Hierarchies are chosen per controller, not per machine: each controller
 * is served by the v2 (unified) hierarchy when the v2 hierarchy offers it,
 * else by the v1 hierarchy mounted for it, else by nothing. A hybrid host
 * (v1 memory, pids, cpu plus an empty v2 hierarchy) and a pure v2 host
 * (systemd) both work, as does any mix, such as pids and cpu moved to v2
 * while memory stays on v1. Killing and freezing always prefer v2
 * (cgroup.kill, cgroup.freeze exist on every non-root v2 cgroup, with or
 * without controllers), then the v1 freezer, then a plain kill loop.
 *
 * Where hutch creates its cgroups (the "base" of a hierarchy):
 *  - as root: "<mount>/hutch" in every hierarchy, created on first use and
 *    never removed (concurrent sandboxes share it);
 *  - otherwise, on v2: $HUTCH_CGROUP_BASE_V2 when set, else the parent of
 *    the process's own cgroup (systemd's delegation: the user's scope sits
 *    in a subtree the user owns); on v1: the process's own cgroup in each
 *    hierarchy. A base the caller cannot write is unusable.
 * Under the base, one sandbox is "<base>/<name>" (the limits live there)
 * with the leaf "<base>/<name>/exec" where the processes go: v2 forbids
 * processes in a cgroup that hands controllers to its children.
 *
 * Nothing here logs, and every function returns -errno on failure. Files
 * are written through a directory fd (openat, O_CLOEXEC, O_NOFOLLOW), each
 * value in one write(2).
 *
 * SECURITY: a limit that was asked for and cannot be enforced is an error
 * (fail closed), never a silent no-op. The caller may fall back to
 * rlimits_apply() only when the user allowed a degraded run. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "hutch-error.h"
#include "macro.h"

typedef enum CgroupController {
        CGROUP_MEMORY,
        CGROUP_PIDS,
        CGROUP_CPU,
        _CGROUP_CONTROLLER_MAX,
        _CGROUP_CONTROLLER_INVALID = -EINVAL,
} CgroupController;

/* "memory", "pids", "cpu"; NULL for an out-of-range value. */
const char *cgroup_controller_to_string(CgroupController c);
/* The inverse; _CGROUP_CONTROLLER_INVALID for NULL or an unknown name. */
CgroupController cgroup_controller_from_string(const char *s);

typedef enum CgroupVersion {
        CGROUP_VERSION_NONE,
        CGROUP_VERSION_1,
        CGROUP_VERSION_2,
        _CGROUP_VERSION_MAX,
        _CGROUP_VERSION_INVALID = -EINVAL,
} CgroupVersion;

/* "none", "v1", "v2"; NULL for an out-of-range value. */
const char *cgroup_version_to_string(CgroupVersion v);
/* The inverse; _CGROUP_VERSION_INVALID for NULL or an unknown name. */
CgroupVersion cgroup_version_from_string(const char *s);

/* One hierarchy as hutch would use it. */
typedef struct CgroupPlace {
        CgroupVersion version; /* NONE: nothing serves this here */
        char *mount;           /* mount point of the hierarchy, or NULL */
        char *base;            /* where "<name>" is created, or NULL if there is no
                                * place for us (non-root, no delegation) */
        bool create_base;      /* the base is "<mount>/hutch", created on first use */
        bool writable;         /* filled by cgroup_topology_probe(): the base (or, with
                                * create_base, its parent) can be written; for v2
                                * controllers also: offered by the v2 hierarchy */
} CgroupPlace;

/* Which hierarchy serves what, and where hutch may create cgroups. */
typedef struct CgroupTopology {
        bool privileged;                                 /* computed for root */
        CgroupPlace controllers[_CGROUP_CONTROLLER_MAX]; /* memory, pids, cpu */
        CgroupPlace v2;      /* the unified hierarchy (kill, freeze, cpu.stat) */
        CgroupPlace freezer; /* v1 freezer (kill, freeze without v2) */
        CgroupPlace cpuacct; /* v1 cpuacct (cpu time without v2) */
} CgroupTopology;

/* Frees the strings of @t and resets it; accepts NULL. */
void cgroup_topology_done(CgroupTopology *t);

/* The pure part: parses @mountinfo (the text of /proc/self/mountinfo) and
 * @proc_self_cgroup (the text of /proc/self/cgroup) and fills @ret with the
 * places hutch would use as root (@privileged) or as a normal user. It
 * reads no file, so it cannot know which controllers the v2 hierarchy
 * offers: a controller without a v1 mount is tentatively given to v2 (when
 * one is mounted), and every place has writable = false until
 * cgroup_topology_probe() looks at the filesystem.
 *
 * Every mountinfo line must have the shape of one (mount id, parent id,
 * MAJ:MIN, root, mount point, mount options, optional fields, the " - "
 * separator, fstype, source, super options), its octal escapes (\040 is a
 * space) in root and mount point must decode, and its mount point must be
 * absolute; empty lines are skipped. Only the cgroup and cgroup2 lines are
 * judged further, since only they are used: their root must be a path,
 * their mount point must have no "." or ".." component and their super
 * options no space. Any other line may have a root that is not a path
 * (nsfs's "net:[4026532178]" after `ip netns add`), an empty source and
 * super options with spaces (docs/cgroups.md, issue 24). With several
 * mounts of one hierarchy, the first whose root is "/" wins, else the
 * first. A v1 mount serves the controllers in its super options
 * ("rw,cpu,cpuacct"); named hierarchies (name=systemd) serve none.
 *
 * Lines of @proc_self_cgroup are "ID:CONTROLLERS:PATH"; they are only
 * consulted for a normal user (the v2 base is the parent of "0::/PATH",
 * the v1 base the PATH of the controller's line), and a hierarchy whose
 * line is missing, or a v2 cgroup that is the hierarchy's root, or that
 * lies outside the part of the hierarchy that is mounted, has no base.
 * Every line consulted must have its two colons; the one used must have a
 * numeric ID (0 for v2) and an absolute PATH without "." or ".."
 * components; the others are not judged.
 *
 * A cgroup mount whose root has a ".." component (a cgroupfs mounted from
 * outside our cgroup namespace) is skipped.
 *
 * Returns 0, -EINVAL if @mountinfo or @proc_self_cgroup is NULL, -EBADMSG
 * for a malformed line as above (then @reterr, when not NULL, names the
 * file, the line number, what is wrong and the line itself, quoted), or
 * -ENOMEM. @ret is written only on success. */
int cgroup_topology_parse(const char *mountinfo, const char *proc_self_cgroup, bool privileged,
                          CgroupTopology *ret, HutchError *reterr);

/* Looks at the filesystem, without creating anything: reads the
 * controllers the v2 hierarchy offers at the base (for a created-on-demand
 * base, at the mount point: hutch enables them there itself); a controller
 * tentatively given to v2 that is not offered gets version NONE. Then sets
 * every place's writable flag: the base must be a directory the caller can
 * write with writable cgroup.procs (and, on v2, cgroup.subtree_control);
 * for a created-on-demand base that does not exist yet, its parent must
 * be. Returns 0, -EINVAL for a NULL @t, -ENOMEM. */
int cgroup_topology_probe(CgroupTopology *t);

/* cgroup_topology_parse() on this process's /proc/self/mountinfo and
 * /proc/self/cgroup, as root when the effective uid is 0; then
 * $HUTCH_CGROUP_BASE_V2, when set, replaces the v2 base (it must be an
 * existing directory inside the v2 mount, given as an absolute path
 * without "." or ".." components); then cgroup_topology_probe(). Creates
 * nothing. Returns 0, -EINVAL for a bad $HUTCH_CGROUP_BASE_V2, the parse
 * errors above (with @reterr naming the malformed line), or the error
 * reading a /proc file. */
int cgroup_topology_detect(CgroupTopology *ret, HutchError *reterr);

/* Limits; 0 means "no limit" everywhere. */
typedef struct CgroupLimits {
        uint64_t memory_max;      /* bytes */
        uint64_t memory_swap_max; /* swap allowed beyond memory_max; needs memory_max */
        uint64_t cpu_quota_us;    /* cpu time per period; >= 1000 */
        uint64_t cpu_period_us;   /* 1000..1000000, 0 means 100000; needs cpu_quota_us */
        uint64_t pids_max;        /* tasks (processes and threads) */
} CgroupLimits;

typedef struct Cgroup Cgroup;

/* Creates the sandbox cgroup "<base>/<name>" and its leaf
 * "<base>/<name>/exec" in every hierarchy needed, applies @lim (on
 * "<name>", so that everything below counts) and returns the new object in
 * @ret. @name must match [a-z0-9][a-z0-9_.-]{0,62}. @t is borrowed (the
 * Cgroup keeps copies of the paths it needs).
 *
 * Hierarchies used: the one serving each limit in @lim (required); the v2
 * hierarchy when writable (kill, freeze, cpu time), else the v1 freezer
 * and v1 cpuacct when writable; the memory hierarchy when writable, for
 * the peak and OOM counters even without a memory limit. Controllers a v2
 * limit needs are enabled in the cgroup.subtree_control files on the way
 * down (for root: the v2 root's and "hutch"'s).
 *
 * Memory: v2 writes memory.max and memory.swap.max (the extra swap, 0 by
 * default) on "<name>", and memory.oom.group = 1 on the leaf, so that an
 * OOM kills the whole leaf rather than one process of it. v1 writes
 * memory.limit_in_bytes and memory.memsw.limit_in_bytes (memory + swap),
 * and makes sure memory.oom_control has the OOM killer enabled (a disabled
 * killer would hang the sandbox instead). When the swap file is missing
 * (no swap accounting) that is fine only if /proc/swaps lists no active
 * swap. Pids: pids.max. Cpu: v2 cpu.max "QUOTA PERIOD"; v1
 * cpu.cfs_period_us then cpu.cfs_quota_us.
 *
 * SECURITY: fails closed. When a limit in @lim cannot be enforced (no
 * hierarchy serves the controller, its base is not writable, a write is
 * refused), nothing is left behind: everything this call created is
 * removed, and it returns -EOPNOTSUPP (no usable hierarchy) or the errno
 * of the failed step, with @reterr naming the limit and what to do.
 * Other returns: -EINVAL for a bad @name or inconsistent @lim (swap
 * without memory, a period without a quota, a quota below 1000 or a
 * period outside 1000..1000000), -EOPNOTSUPP also when no hierarchy at all
 * is usable (nothing could kill the sandbox), -EEXIST when "<name>"
 * already exists in a hierarchy (it is not touched), -ENOMEM. */
int cgroup_new(const CgroupTopology *t, const char *name, const CgroupLimits *lim, Cgroup **ret,
               HutchError *reterr);

/* cgroup_new() for a one-shot run (issue 16): in a v1 hierarchy, and in
 * a v2 one without a memory limit, the processes sit in "<name>" itself,
 * with no "exec" leaf (one cgroup less to create and remove per
 * hierarchy; v1 counts limits hierarchically and allows processes next to
 * child cgroups, v2 does where "<name>" enables no controller below it).
 * A v2 memory limit keeps the v2 leaf (memory.oom.group). Not for a
 * cgroup that gets cgroup_new_child() children or whose processes are
 * found by their "exec" leaf (a persistent sandbox's). */
int cgroup_new_run(const CgroupTopology *t, const char *name, const CgroupLimits *lim, Cgroup **ret,
                   HutchError *reterr);

/* Frees the object only: the cgroups stay. Accepts NULL; returns NULL. */
Cgroup *cgroup_free(Cgroup *c);
DEFINE_POINTER_CLEANUP(Cgroup, cgroup_free)

/* The name given to cgroup_new(). */
const char *cgroup_name(const Cgroup *c);

/* The version of the hierarchy serving @controller in @c (NONE when
 * unused), and the path of "<base>/<name>" there (NULL when unused). */
CgroupVersion cgroup_controller_version(const Cgroup *c, CgroupController controller);
const char *cgroup_controller_path(const Cgroup *c, CgroupController controller);
/* The leaf in the v2 hierarchy ("<name>/exec", or "<name>" for some of
 * cgroup_new_run()'s), or NULL when v2 is not used. */
const char *cgroup_leaf_path_v2(const Cgroup *c);

/* Opens the v2 leaf (O_RDONLY|O_DIRECTORY|O_CLOEXEC) for
 * clone3(CLONE_INTO_CGROUP). Returns a new fd that the caller owns, or
 * -EOPNOTSUPP when @c uses no v2 hierarchy, or the open error.
 * SECURITY: the fd is a directory of the host's cgroupfs. A child cloned
 * while it is open inherits it (CLOEXEC only acts at exec), so the caller
 * closes it right after clone3() and the child closes every inherited fd
 * it does not need before anything else. */
int cgroup_leaf_fd_v2(Cgroup *c);

/* Creates "<name>/<child>" and its own leaf in every hierarchy @parent
 * uses (one exec of a persistent sandbox): no limits of its own, since
 * the parent's limits count for everything below it; with a v2 memory
 * limit its leaf gets memory.oom.group. cgroup_kill(), cgroup_stats() and
 * cgroup_remove() on the returned object act on the child only. @parent
 * must outlive it. Returns 0, -EINVAL for a bad @child ("exec" is the
 * parent's own leaf), -EEXIST, or the mkdir/write error (nothing left
 * behind). */
int cgroup_new_child(Cgroup *parent, const char *child, Cgroup **ret, HutchError *reterr);

/* Opens the leaf's cgroup.procs (O_WRONLY) in every hierarchy @c uses, up
 * to @max_fds, for a process to move itself there by writing "0": the
 * kernel checks the permission against the opener's credentials. Returns
 * 0 with @ret_n fds in @fds (the caller closes them), -E2BIG, or the open
 * error (nothing left open). */
int cgroup_open_procs(Cgroup *c, int *fds, size_t max_fds, size_t *ret_n);

/* What a process about to be created needs to start in the leaves of
 * @c without cgroup_attach() (issue 16: moving another process takes the
 * kernel's cgroup_threadgroup_rwsem for writing, which waits for an RCU
 * grace period): in @ret_v2_fd the v2 leaf opened as by
 * cgroup_leaf_fd_v2() for clone3(CLONE_INTO_CGROUP), or -EBADF when @c
 * uses no v2 hierarchy; in @tasks_fds (up to @max_fds, @ret_n of them)
 * the "tasks" file of each v1 leaf, opened O_WRONLY|O_CLOEXEC, where the
 * new process's thread moves itself by writing "0" (a v1 write of the
 * writer's own thread takes no such lock; the kernel checks the
 * permission against the opener's credentials, so it works from inside
 * the sandbox's user namespace). The caller owns every fd; the same
 * SECURITY note as cgroup_leaf_fd_v2()'s applies. Returns 0, -EINVAL,
 * -E2BIG, or the open error (nothing left open). */
int cgroup_open_join(Cgroup *c, int *ret_v2_fd, int *tasks_fds, size_t max_fds, size_t *ret_n);

/* Moves @pid (a whole process) into the leaf of every hierarchy @c uses
 * (cgroup.procs). The v2 leaf is written too, which is harmless after
 * CLONE_INTO_CGROUP. Do it before the process runs anything: children it
 * already forked stay where they are. Returns 0, -EINVAL for @pid <= 0,
 * -ESRCH when @pid does not exist, -ENOENT after cgroup_remove(), or the
 * write error; on failure @pid may already sit in some of the leaves. */
int cgroup_attach(Cgroup *c, pid_t pid);

/* Kills every process in "<name>" and below (the leaf and anything under
 * it) and waits until none is left. v2: cgroup.kill; a kernel without it
 * (COMPAT(kernel < 5.14)) gets the v1 method on the v2 tree. v1: freeze
 * with the freezer, SIGKILL every pid in cgroup.procs of the cgroup and
 * all its descendants, thaw; without a freezer, repeated SIGKILL passes
 * over cgroup.procs. Waits about one second at most (v2: poll on
 * cgroup.events until "populated 0"; v1: until cgroup.procs is empty
 * everywhere). Returns 0 once empty, -ETIMEDOUT if processes are still
 * there after the wait, or an -errno from the cgroup files. */
int cgroup_kill(Cgroup *c);

/* Changes the limits of a live @c to @lim (a running sandbox's update):
 * each limit @lim sets must be one @c was made with (its controller is
 * there), and each one @c was made with must stay set: adding a
 * controller or lifting a limit needs a new cgroup. A v1 memory limit
 * raised above the old memory+swap one writes the new memory+swap first.
 * Returns 0, -EOPNOTSUPP naming the limit that cannot change live, or the
 * kernel's refusal (-EBUSY for a v1 memory limit below the usage). */
int cgroup_update_limits(Cgroup *c, const CgroupLimits *lim, HutchError *reterr);

/* Freezes (@frozen) or thaws everything in "<name>" and below: v2
 * cgroup.freeze, else the v1 freezer. Waits (about one second at most) for
 * the state to settle (v2: cgroup.events "frozen 1"/"frozen 0"; v1:
 * freezer.state FROZEN/THAWED). Returns 0, -EOPNOTSUPP when @c uses
 * neither, -ETIMEDOUT when the state did not settle, or a write error. */
int cgroup_set_frozen(Cgroup *c, bool frozen);

typedef struct CgroupStats {
        uint64_t oom_kills;       /* processes the OOM killer killed */
        uint64_t pids_max_events; /* forks refused by pids.max */
        uint64_t cpu_usec;        /* user + system cpu time, valid with have_cpu */
        uint64_t mem_peak_bytes;  /* highest memory use, valid with have_mem_peak */
        bool have_cpu, have_mem_peak;
} CgroupStats;

/* Reads the counters of "<name>" and everything below it. v2 (on
 * "<name>", where the kernel counts for the whole subtree):
 * memory.events "oom_kill", pids.events "max", cpu.stat "usage_usec",
 * memory.peak. v1: memory.oom_control "oom_kill" and pids.events "max"
 * summed over the leaf cgroups (v1 counts them where the event happened),
 * cpuacct.usage (ns, divided by 1000) and memory.max_usage_in_bytes of
 * "<name>". A
 * counter whose hierarchy is not used is 0 (or not "have_"). Returns 0 and
 * fills @ret, -EBADMSG for a counter file that does not parse, or the read
 * error. */
int cgroup_stats(Cgroup *c, CgroupStats *ret);

/* Kills what is left (cgroup_kill()), then removes every directory @c
 * created, deepest first (also directories someone created below the
 * leaf), retrying rmdir for about a second while the kernel says EBUSY.
 * An empty hierarchy (the usual end) goes with one rmdir per directory, no
 * walk: the kernel refuses to remove a cgroup holding a process or a child.
 * Never removes a base. Idempotent: a second call finds nothing to do and
 * returns 0. Returns 0, or the first error (typically -EBUSY or
 * -ETIMEDOUT) while still trying every directory. */
int cgroup_remove(Cgroup *c);

/* cgroup_remove(), then cgroup_free(). Accepts NULL (returns 0). Returns
 * what cgroup_remove() returned; @c is freed in every case. */
int cgroup_destroy(Cgroup *c);

/* Removes the cgroup directory @path and every cgroup below it, deepest
 * first, without waiting and without killing: one that still has
 * processes stays (-EBUSY). For the empty trees a SIGKILLed supervisor
 * left. Returns 0 (also when @path does not exist), or the first -errno. */
int cgroup_remove_tree(const char *path);

/* The fallback when no cgroup can enforce a limit and the user allowed a
 * degraded run: sets soft and hard limits of the calling process (and so
 * of what it forks later; the sandbox init calls it before forking the
 * command). Only ever lowers a limit.
 *  - memory_max: RLIMIT_AS = memory_max + memory_swap_max. Address space
 *    is not memory use: mappings that are never touched count, so a
 *    program with large reservations (JITs, sanitizers) fails early;
 *  - pids_max: RLIMIT_NPROC. It counts every process of the real uid on
 *    the whole host, not of this sandbox, so it is only meaningful when
 *    the sandbox runs as a uid nobody else uses, and it binds only
 *    processes without CAP_SYS_RESOURCE in the initial user namespace;
 *  - cpu: not applied. RLIMIT_CPU ends a process after an amount of cpu
 *    time; it is not a rate limit.
 * Returns 0, -EINVAL for a NULL @lim or a sum that overflows, or the
 * setrlimit(2) error. */
int rlimits_apply(const CgroupLimits *lim);
