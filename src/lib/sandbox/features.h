/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Kernel feature detection for `hutch doctor` (DESIGN.md §1, §3).
 *
 * Each probe answers "does this feature work here, for this caller?" by
 * really trying it in a forked child (the child's namespaces and mounts die
 * with it), and explains a failure by reading the relevant sysctls only
 * afterwards. A probe fills a FeatureCheck: a status and a one-line detail
 * that says what was found and, on failure, why and what to do.
 *
 * Probes return 0 whenever they reached a verdict, including "missing";
 * -errno only when the probe itself could not run (fork failed, -ENOMEM).
 * They must be called from a single-threaded process (they fork), and they
 * do not log.
 *
 * The cgroup layout parser is a pure function over the text of
 * /proc/self/mountinfo so that it can be tested on any layout. */

#include <stdbool.h>
#include <stddef.h>

#include "macro.h"

typedef enum FeatureStatus {
        FEATURE_OK,       /* works as hutch needs it */
        FEATURE_MISSING,  /* not available: the dependent functionality is off */
        FEATURE_DEGRADED, /* partly available: hutch falls back to something weaker */
        _FEATURE_STATUS_MAX,
        _FEATURE_STATUS_INVALID = -EINVAL,
} FeatureStatus;

/* "ok", "missing", "degraded"; NULL for an out-of-range value. */
const char *feature_status_to_string(FeatureStatus s);
/* The inverse; _FEATURE_STATUS_INVALID for an unknown or NULL string. */
FeatureStatus feature_status_from_string(const char *s);

typedef enum FeatureId {
        FEATURE_USER_NAMESPACES, /* unshare(CLONE_NEWUSER) + writing the id maps */
        FEATURE_MOUNT_IN_USERNS, /* mount/pid namespace: tmpfs, bind, proc as pid 1 */
        FEATURE_OVERLAYFS,       /* overlayfs mounted inside a user namespace */
        FEATURE_IDMAPPED_MOUNTS, /* mount_setattr(MOUNT_ATTR_IDMAP), needed as root */
        FEATURE_SECCOMP,         /* seccomp filter mode with the errno/kill_process actions */
        FEATURE_LANDLOCK,        /* landlock ABI version */
        FEATURE_CGROUPS,         /* a writable cgroup v2 or v1 place with memory + pids */
        FEATURE_KVM,             /* /dev/kvm for the microVM backend (informational) */
        _FEATURE_ID_MAX,
        _FEATURE_ID_INVALID = -EINVAL,
} FeatureId;

/* The JSON key of each check: "user_namespaces", "mount_in_userns",
 * "overlayfs", "idmapped_mounts", "seccomp", "landlock", "cgroups", "kvm";
 * NULL for an out-of-range value. */
const char *feature_id_to_string(FeatureId id);
/* The inverse; _FEATURE_ID_INVALID for an unknown or NULL string. */
FeatureId feature_id_from_string(const char *s);

/* True for the checks `hutch run` cannot work without: user namespaces,
 * mounts in them and seccomp. A required check that is "degraded" still
 * lets `hutch run` work. */
bool feature_is_required(FeatureId id);

/* One sentence on what @status of check @id means for the user (static
 * string, never NULL for valid arguments; NULL for out-of-range ones). */
const char *feature_impact(FeatureId id, FeatureStatus status);

typedef struct FeatureCheck {
        FeatureStatus status;
        char *detail; /* owned, one line, never NULL after a successful probe */
} FeatureCheck;

/* Frees the contents of @c (not @c itself) and resets it; accepts NULL. */
void feature_check_done(FeatureCheck *c);

/* The probes. Each writes @ret (which the caller releases with
 * feature_check_done()) only when it returns 0. */

/* A child unshares CLONE_NEWUSER, denies setgroups and maps its own uid and
 * gid to 0 ("0 <euid> 1"). On failure the detail names the sysctl that
 * forbids it: user.max_user_namespaces = 0, Debian's
 * kernel.unprivileged_userns_clone = 0, or Ubuntu's
 * kernel.apparmor_restrict_unprivileged_userns = 1. */
int feature_probe_user_namespaces(FeatureCheck *ret);

/* A child unshares user + mount + pid namespaces; its child (pid 1 of the
 * new pid namespace) mounts a tmpfs, mounts proc on a directory of it, and
 * bind-mounts / recursively and remounts that bind read-only. */
int feature_probe_mount_in_userns(FeatureCheck *ret);

/* A child in new user + mount namespaces mounts overlayfs from lower, upper
 * and work directories on a tmpfs and checks that a write through the
 * merged directory lands in the upper one. */
int feature_probe_overlayfs(FeatureCheck *ret);

/* As root: clones the current directory's mount with open_tree() and
 * idmaps it with mount_setattr(MOUNT_ATTR_IDMAP) to a child's user
 * namespace (the clone is never attached). As another user: "ok", not
 * needed (single-id map). */
int feature_probe_idmapped_mounts(FeatureCheck *ret);

/* prctl(PR_GET_SECCOMP) works, the "errno" and "kill_process" actions are
 * available (/proc/sys/kernel/seccomp/actions_avail, or
 * SECCOMP_GET_ACTION_AVAIL when that file is unreadable), and a child
 * really installs a filter that makes one syscall fail with EXDEV.
 * "degraded" when kill_process is unavailable. */
int feature_probe_seccomp(FeatureCheck *ret);

/* landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION): "ok"
 * with the ABI version, or "missing" with the reason (not built, or not in
 * the active LSM list of /sys/kernel/security/lsm). */
int feature_probe_landlock(FeatureCheck *ret);

/* Reads /proc/self/mountinfo and /proc/self/cgroup and reports the cgroup
 * layout and where hutch would create its cgroups: as root the v2 root or
 * the v1 hierarchy roots, else the parent of our own v2 cgroup (systemd's
 * delegation) or our own v1 cgroups. "ok" when a writable v2 place with the
 * memory and pids controllers or writable v1 memory and pids hierarchies
 * exist, else "degraded" (limits fall back to rlimits). */
int feature_probe_cgroups(FeatureCheck *ret);

/* /dev/kvm can be opened read-write and answers KVM_GET_API_VERSION. When
 * /sys/module/kvm_pvm exists the host's KVM only runs PVM guest kernels:
 * "degraded". Informational: never required. */
int feature_probe_kvm(FeatureCheck *ret);

/* Runs the probe of @id. -EINVAL for an out-of-range @id. */
int feature_probe(FeatureId id, FeatureCheck *ret);

/* cgroup layout (pure parsing) */

/* Caps on what the parser allocates for a hostile or absurd mountinfo: at
 * most this many cgroup mounts are kept (-E2BIG beyond). */
#define CGROUP_LAYOUT_MOUNTS_MAX 256U

typedef struct CgroupMount {
        bool v2;            /* "cgroup2" rather than "cgroup" */
        char *root;         /* the hierarchy path mounted there (field 4), unescaped */
        char *path;         /* the mount point (field 5), unescaped */
        char **controllers; /* v1: controllers from the super options, in order;
                             * v2: NULL (they live in cgroup.controllers) */
        char *name;         /* v1 named hierarchy ("systemd" for name=systemd), or NULL */
} CgroupMount;

typedef struct CgroupLayout {
        CgroupMount *mounts; /* in mountinfo order */
        size_t n_mounts;
} CgroupLayout;

/* Frees the contents of @l and resets it; accepts NULL. */
void cgroup_layout_done(CgroupLayout *l);

/* Parses @mountinfo (the text of /proc/<pid>/mountinfo) and keeps the
 * cgroup and cgroup2 mounts. Every line is validated, cgroup or not; empty
 * lines are skipped. Octal escapes (\040 and friends) in the root and mount
 * point are decoded. v1 controllers are recognised from a fixed list of
 * known controller names; other super options (rw, xattr, ...) are
 * ignored.
 *
 * Returns 0 and fills @ret (possibly with no mounts), -EINVAL if
 * @mountinfo is NULL, -EBADMSG for a malformed line (fewer than six fields
 * before the " - " separator, no separator, fewer than three fields after
 * it, a non-numeric mount or parent id, a bad MAJ:MIN, or a bad escape),
 * -E2BIG for more than CGROUP_LAYOUT_MOUNTS_MAX cgroup mounts, -ENOMEM. */
int cgroup_layout_parse(const char *mountinfo, CgroupLayout *ret);

/* The first v2 mount, the first v1 mount carrying @controller, or NULL.
 * With several mounts of one hierarchy (bind mounts), the first whose root
 * is "/" is preferred. */
const CgroupMount *cgroup_layout_find_v2(const CgroupLayout *l);
const CgroupMount *cgroup_layout_find_v1(const CgroupLayout *l, const char *controller);

/* Looks up our own cgroup in @proc_self_cgroup (the text of
 * /proc/self/cgroup): the "0::PATH" line when @controller is NULL, else
 * the v1 line whose comma-separated controller list contains @controller.
 * Returns 0 and a copy of PATH in @ret, -EINVAL if @proc_self_cgroup is
 * NULL, -ENOENT if there is no such line, -EBADMSG for a malformed line
 * (not "ID:LIST:/PATH"), -ENOMEM. */
int cgroup_self_path(const char *proc_self_cgroup, const char *controller, char **ret);
