/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Kernel feature detection for `hutch doctor` (docs/doctor.md, docs/architecture.md §3).
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
 * The cgroups check has no parser of its own: it asks the cgroup library
 * (cgroup/cgroup.h) exactly what `hutch run` asks it, so that the doctor
 * and the run can never disagree. */

#include <stdbool.h>
#include <stddef.h>

#include "cgroup/cgroup.h"
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
        FEATURE_CGROUPS,         /* writable memory + pids cgroups where `hutch run` puts them */
        FEATURE_KVM,             /* /dev/kvm for the microVM backend (informational) */
        FEATURE_MICROVM,         /* QEMU, a guest kernel and hutch-agent (informational) */
        FEATURE_DISK_LIMIT,      /* persistent sandboxes' disk images (informational) */
        FEATURE_SUB_IDS,         /* the ranged map of a user's sandboxes (informational) */
        _FEATURE_ID_MAX,
        _FEATURE_ID_INVALID = -EINVAL,
} FeatureId;

/* The JSON key of each check: "user_namespaces", "mount_in_userns",
 * "overlayfs", "idmapped_mounts", "seccomp", "landlock", "cgroups", "kvm",
 * "microvm";
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

/* cgroup_topology_detect(), as `hutch run` does (it reads
 * /proc/self/mountinfo and /proc/self/cgroup, applies
 * $HUTCH_CGROUP_BASE_V2 and checks writability; it creates nothing). The
 * detail names, for memory, pids and cpu, the version and the base hutch
 * would use and whether it is writable ("memory: v1
 * /sys/fs/cgroup/memory/hutch (writable)"), then what kills and freezes a
 * sandbox: the v2 base when usable, else the v1 freezer, else nothing (and
 * then whether SIGKILL passes or only the pid namespace end a run). A
 * controller is usable when a hierarchy serves it and its base is
 * writable. "ok" when memory and pids are both usable, else "degraded",
 * with the flags that will need --allow-degraded and the defaults that are
 * not enforced. "missing" when the detection fails (the error is in the
 * detail, with the malformed line of /proc/self/mountinfo or
 * /proc/self/cgroup when that is the cause; `hutch run` then refuses to
 * start). Returns -ENOMEM only when out of memory. */
int feature_probe_cgroups(FeatureCheck *ret);

/* The pure part of feature_probe_cgroups() when the detection failed with
 * @error (negative) and @e (what cgroup_topology_detect() put there, or
 * NULL): "missing", the errno's text, @e's message when it is about
 * @error, and what a bad $HUTCH_CGROUP_BASE_V2 must be for -EINVAL.
 * Returns 0 and fills @ret, -EINVAL for a NULL @ret or @error >= 0,
 * -ENOMEM. */
int feature_cgroups_from_error(int error, const HutchError *e, FeatureCheck *ret);

/* The pure part of feature_probe_cgroups(): the check for topology @t (as
 * cgroup_topology_detect() or cgroup_topology_parse() plus
 * cgroup_topology_probe() fill it; @t is borrowed). Returns 0 and fills
 * @ret, -EINVAL for a NULL argument, -ENOMEM. */
int feature_cgroups_from_topology(const CgroupTopology *t, FeatureCheck *ret);

/* /dev/kvm can be opened read-write and answers KVM_GET_API_VERSION. When
 * /sys/module/kvm_pvm exists the host's KVM only runs PVM guest kernels:
 * "degraded". Informational: never required. */
int feature_probe_kvm(FeatureCheck *ret);

/* What `hutch run --backend vm` needs besides an accelerator: QEMU
 * (qemu-system-x86_64), a guest kernel (the newest /boot/vmlinuz-*) and
 * hutch-agent, found as the run finds them (vm/vm.h). "ok" naming the
 * three, or "missing" with the apt-get line of what is not there.
 * Informational: never required. */
int feature_probe_microvm(FeatureCheck *ret);

/* As root: makes a 16 MiB disk image in a temporary folder and mounts it
 * (detached) as a persistent sandbox's is (store/disk-image.h), then
 * removes it. "ok", or "missing" naming why (not root, no loop devices,
 * no ext4, no mkfs.ext4, or the mount's error). Informational: never
 * required. */
int feature_probe_disk_limit(FeatureCheck *ret);

/* The id range of persistent sandboxes (ns/userns.h): as root "ok"
 * naming root's range; as a user "ok" naming the sub-ids newuidmap maps,
 * or "missing" with the reason and the usermod line that fixes it.
 * Informational: never required. */
int feature_probe_sub_ids(FeatureCheck *ret);

/* Runs the probe of @id. -EINVAL for an out-of-range @id. */
int feature_probe(FeatureId id, FeatureCheck *ret);
