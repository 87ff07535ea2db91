/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "cgroup/cgroup.h"
#include "doctor/features.h"
#include "fd-util.h"
#include "ns/userns.h"
#include "rm-rf.h"
#include "sandbox/container.h"
#include "seccomp/seccomp-filter.h"
#include "store/disk-image.h"
#include "vm/vm.h"

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif

/* Bound on the small /proc and /sys files the probes read. */
#define SMALL_FILE_MAX (64U * 1024U)

/* Any unprivileged range works for the idmapped-mount probe: it only asks
 * whether the kernel and the filesystem accept an idmap. */
#define IDMAP_PROBE_BASE "2147483648"

/* ---- enums ---- */

static const char *const feature_status_table[_FEATURE_STATUS_MAX] = {
        [FEATURE_OK] = "ok",
        [FEATURE_MISSING] = "missing",
        [FEATURE_DEGRADED] = "degraded",
};

const char *feature_status_to_string(FeatureStatus s) {
        if (s < 0 || s >= _FEATURE_STATUS_MAX)
                return NULL;
        return feature_status_table[s];
}

FeatureStatus feature_status_from_string(const char *s) {
        if (!s)
                return _FEATURE_STATUS_INVALID;
        for (int i = 0; i < _FEATURE_STATUS_MAX; i++)
                if (strcmp(s, feature_status_table[i]) == 0)
                        return (FeatureStatus)i;
        return _FEATURE_STATUS_INVALID;
}

static const char *const feature_id_table[_FEATURE_ID_MAX] = {
        [FEATURE_USER_NAMESPACES] = "user_namespaces",
        [FEATURE_MOUNT_IN_USERNS] = "mount_in_userns",
        [FEATURE_OVERLAYFS] = "overlayfs",
        [FEATURE_IDMAPPED_MOUNTS] = "idmapped_mounts",
        [FEATURE_SECCOMP] = "seccomp",
        [FEATURE_LANDLOCK] = "landlock",
        [FEATURE_CGROUPS] = "cgroups",
        [FEATURE_KVM] = "kvm",
        [FEATURE_MICROVM] = "microvm",
        [FEATURE_DISK_LIMIT] = "disk_limit",
        [FEATURE_SUB_IDS] = "sub_ids",
};

const char *feature_id_to_string(FeatureId id) {
        if (id < 0 || id >= _FEATURE_ID_MAX)
                return NULL;
        return feature_id_table[id];
}

FeatureId feature_id_from_string(const char *s) {
        if (!s)
                return _FEATURE_ID_INVALID;
        for (int i = 0; i < _FEATURE_ID_MAX; i++)
                if (strcmp(s, feature_id_table[i]) == 0)
                        return (FeatureId)i;
        return _FEATURE_ID_INVALID;
}

bool feature_is_required(FeatureId id) {
        return id == FEATURE_USER_NAMESPACES || id == FEATURE_MOUNT_IN_USERNS ||
               id == FEATURE_SECCOMP;
}

static const char *const feature_impact_table[_FEATURE_ID_MAX][_FEATURE_STATUS_MAX] = {
        [FEATURE_USER_NAMESPACES] =
                {
                        [FEATURE_OK] =
                                "hutch run can map the sandbox's root to an unprivileged host id",
                        [FEATURE_MISSING] =
                                "hutch run cannot work here: every sandbox needs a user namespace",
                        [FEATURE_DEGRADED] = "user namespaces work only partly; hutch run may fail",
                },
        [FEATURE_MOUNT_IN_USERNS] =
                {
                        [FEATURE_OK] = "hutch can build the sandbox's own /proc, /tmp and "
                                       "read-only system dirs",
                        [FEATURE_MISSING] = "hutch run cannot work here: it cannot build the "
                                            "sandbox's filesystem",
                        [FEATURE_DEGRADED] = "hutch run works, with the fallback the detail names "
                                             "(reported in the outcome's degraded list; "
                                             "docs/containers.md)",
                },
        [FEATURE_OVERLAYFS] =
                {
                        [FEATURE_OK] = "overlay roots, overlay workspaces and O(1) snapshots are "
                                       "available",
                        [FEATURE_MISSING] = "overlay roots, overlay workspaces and O(1) snapshots "
                                            "are unavailable",
                        [FEATURE_DEGRADED] = "overlayfs works with restrictions",
                },
        [FEATURE_IDMAPPED_MOUNTS] =
                {
                        [FEATURE_OK] = "the sandbox can use the caller's workspace with the "
                                       "caller's ownership",
                        [FEATURE_MISSING] = "as root, hutch cannot give the sandbox write access "
                                            "to the workspace as the caller's user; run hutch as "
                                            "a normal user",
                        [FEATURE_DEGRADED] = "idmapped mounts work only on some filesystems",
                },
        [FEATURE_SECCOMP] =
                {
                        [FEATURE_OK] = "hutch can block dangerous system calls",
                        [FEATURE_MISSING] = "hutch run cannot work here: it refuses to run without "
                                            "a seccomp filter",
                        [FEATURE_DEGRADED] =
                                "system calls are filtered, but a violation kills one thread "
                                "instead of the whole process",
                },
        [FEATURE_LANDLOCK] =
                {
                        [FEATURE_OK] =
                                "filesystem access is also confined by landlock (defence in depth)",
                        [FEATURE_MISSING] =
                                "sandboxes run without the landlock layer; namespaces and seccomp "
                                "still apply",
                        [FEATURE_DEGRADED] = "landlock confines only part of the filesystem access",
                },
        [FEATURE_CGROUPS] =
                {
                        [FEATURE_OK] = "the default memory and pids limits, --memory and --pids "
                                       "are hard per-sandbox cgroup limits",
                        [FEATURE_MISSING] =
                                "hutch run uses no cgroup: the default limits are not enforced, "
                                "and --memory, --pids or --cpus need --allow-degraded (weaker "
                                "per-process rlimits)",
                        [FEATURE_DEGRADED] =
                                "limits no cgroup can hold are not enforced by default; asking "
                                "for them needs --allow-degraded (weaker per-process rlimits)",
                },
        [FEATURE_KVM] =
                {
                        [FEATURE_OK] = "the microVM backend (--backend vm) can use KVM",
                        [FEATURE_MISSING] =
                                "the microVM backend needs --vm-accel tcg (slow emulation)",
                        [FEATURE_DEGRADED] =
                                "the microVM backend needs --vm-accel tcg (slow emulation)",
                },
        [FEATURE_MICROVM] =
                {
                        [FEATURE_OK] = "hutch run --backend vm can start microVMs here",
                        [FEATURE_MISSING] = "hutch run --backend vm fails (exit 125) until the "
                                            "missing part is installed",
                        [FEATURE_DEGRADED] = "hutch run --backend vm fails (exit 125) until the "
                                             "missing part is installed",
                },
        [FEATURE_DISK_LIMIT] =
                {
                        [FEATURE_OK] = "persistent sandboxes get a disk limit (hutch create "
                                       "--disk, default 10g)",
                        [FEATURE_MISSING] = "persistent sandboxes have no disk limit: hutch "
                                            "create --disk needs --allow-degraded, and the "
                                            "default 10g is not enforced",
                        [FEATURE_DEGRADED] = "persistent sandboxes have no disk limit",
                },
        [FEATURE_SUB_IDS] =
                {
                        [FEATURE_OK] = "persistent sandboxes have 65536 ids: packages install as "
                                       "root (apt, dpkg, npm -g, pip)",
                        [FEATURE_MISSING] = "persistent sandboxes map only your own id: package "
                                            "installs as another user (apt's _apt) fail",
                        [FEATURE_DEGRADED] = "persistent sandboxes map only your own id",
                },
};

const char *feature_impact(FeatureId id, FeatureStatus status) {
        if (id < 0 || id >= _FEATURE_ID_MAX || status < 0 || status >= _FEATURE_STATUS_MAX)
                return NULL;
        return feature_impact_table[id][status];
}

void feature_check_done(FeatureCheck *c) {
        if (!c)
                return;
        free(c->detail);
        *c = (FeatureCheck){};
}

/* ---- small helpers ---- */

/* Appends printf output to the malloc'd string *s (NULL is empty). */
static _printf_(2, 3) int strextendf(char **s, const char *fmt, ...) {
        _cleanup_free_ char *add = NULL;
        va_list ap;
        size_t a, b;
        char *n;
        int k;

        va_start(ap, fmt);
        k = vasprintf(&add, fmt, ap);
        va_end(ap);
        if (k < 0) {
                add = NULL;
                return -ENOMEM;
        }
        a = *s ? strlen(*s) : 0;
        b = (size_t)k;
        n = realloc(*s, a + b + 1);
        if (!n)
                return -ENOMEM;
        memcpy(n + a, add, b + 1);
        *s = n;
        return 0;
}

static int check_set(FeatureCheck *ret, FeatureStatus status, char *detail_take) {
        if (!detail_take)
                return -ENOMEM;
        *ret = (FeatureCheck){.status = status, .detail = detail_take};
        return 0;
}

/* True if @word appears in @list as a whole item separated by any of @seps. */
static bool word_in_list(const char *list, const char *word, const char *seps) {
        size_t n = strlen(word);

        if (!list || n == 0)
                return false;
        for (const char *p = list; *p;) {
                size_t k;

                p += strspn(p, seps);
                k = strcspn(p, seps);
                if (k == n && strncmp(p, word, n) == 0)
                        return true;
                p += k;
        }
        return false;
}

/* Reads a small /proc or /sys file without its trailing newline. */
static int read_one_line(const char *path, char **ret) {
        _cleanup_free_ char *s = NULL;
        size_t n;
        int r;

        r = read_full_file(path, SMALL_FILE_MAX, &s);
        if (r < 0)
                return r;
        n = strcspn(s, "\n");
        s[n] = '\0';
        *ret = TAKE_PTR(s);
        return 0;
}

/* Returns 1 if the sysctl file @path holds exactly @value, 0 if it holds
 * something else or does not exist. */
static int sysctl_is(const char *path, const char *value) {
        _cleanup_free_ char *s = NULL;

        if (read_one_line(path, &s) < 0)
                return 0;
        return strcmp(s, value) == 0;
}

static const char *errno_text(int r) {
        return strerror(r < 0 ? -r : r);
}

/* ---- running a probe in a child ---- */

/* What a probe child tells its parent. It lives in a MAP_SHARED page, so
 * the child (or its child, the pid 1 of a new pid namespace) writes it in
 * place and the parent reads it after waitpid(): no protocol to parse. */
typedef struct ProbeReport {
        int error;         /* 0, or -errno of the failed step */
        char step[128];    /* the step that failed */
        int pivot_refused; /* mount probe: errno of a refused pivot_root, else 0 */
} ProbeReport;

typedef int (*ProbeFn)(ProbeReport *rep, void *userdata);

static void report_step(ProbeReport *rep, const char *step) {
        size_t n = MIN(strlen(step), sizeof(rep->step) - 1);

        memcpy(rep->step, step, n);
        rep->step[n] = '\0';
}

static int wait_for_pid(pid_t pid, int *ret_status) {
        int status;

        for (;;) {
                if (waitpid(pid, &status, 0) >= 0)
                        break;
                if (errno != EINTR)
                        return negative_errno();
        }
        *ret_status = status;
        return 0;
}

/* Forks; the child runs @fn, stores its result in the shared report and
 * _exit()s. The child's namespaces, mounts and seccomp filter die with it.
 * Returns 0 and the report (whose error says whether the probe worked), or
 * -errno if the child could not be run. */
static int probe_in_child(ProbeFn fn, void *userdata, ProbeReport *ret) {
        ProbeReport *shared;
        pid_t pid;
        int status, r;

        shared = mmap(NULL, sizeof(ProbeReport), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                      -1, 0);
        if (shared == MAP_FAILED)
                return negative_errno();
        *shared = (ProbeReport){.error = -ECHILD};
        report_step(shared, "the probe process died before reporting");

        pid = fork();
        if (pid < 0) {
                r = negative_errno();
                (void)munmap(shared, sizeof(ProbeReport));
                return r;
        }
        if (pid == 0) {
                r = fn(shared, userdata);
                shared->error = r < 0 ? r : 0;
                _exit(0);
        }

        r = wait_for_pid(pid, &status);
        if (r >= 0)
                *ret = *shared;
        (void)munmap(shared, sizeof(ProbeReport));
        return r;
}

/* Maps the caller's own uid and gid to 0 in the user namespace it has just
 * entered: the one map an unprivileged process may write for itself
 * (user_namespaces(7)). @uid and @gid are the ids from before unshare(). */
static int write_self_maps(ProbeReport *rep, uid_t uid, gid_t gid) {
        char map[64];
        int r;

        report_step(rep, "write /proc/self/setgroups");
        r = write_string_file("/proc/self/setgroups", "deny");
        if (r < 0 && r != -ENOENT) /* COMPAT(kernel < 3.19): no setgroups file */
                return r;

        report_step(rep, "write /proc/self/uid_map");
        (void)snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)uid);
        r = write_string_file("/proc/self/uid_map", map);
        if (r < 0)
                return r;

        report_step(rep, "write /proc/self/gid_map");
        (void)snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)gid);
        r = write_string_file("/proc/self/gid_map", map);
        if (r < 0)
                return r;

        report_step(rep, "check that uid 0 inside is the caller");
        if (getuid() != 0 || getgid() != 0)
                return -EPROTO;
        return 0;
}

static int enter_userns(ProbeReport *rep, int extra_flags, const char *step) {
        uid_t uid = geteuid();
        gid_t gid = getegid();

        report_step(rep, step);
        if (unshare(CLONE_NEWUSER | extra_flags) < 0)
                return negative_errno();
        return write_self_maps(rep, uid, gid);
}

/* Mounts a tmpfs over a directory that exists on every system and makes it
 * the cwd, so the rest of the probe uses short relative paths.
 * SECURITY: only ever called in a child's private mount namespace; the
 * tmpfs hides the host directory from that child alone. */
static int enter_scratch_tmpfs(ProbeReport *rep) {
        static const char *const candidates[] = {"/tmp", "/run", "/mnt", "/dev/shm", "/dev"};
        const char *dir = NULL;

        report_step(rep, "make the mount tree private");
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return negative_errno();

        for (size_t i = 0; i < ELEMENTSOF(candidates) && !dir; i++) {
                struct stat st;

                if (stat(candidates[i], &st) >= 0 && S_ISDIR(st.st_mode))
                        dir = candidates[i];
        }
        report_step(rep, "find a directory for a scratch tmpfs");
        if (!dir)
                return -ENOENT;

        report_step(rep, "mount a tmpfs");
        if (mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") < 0)
                return negative_errno();
        report_step(rep, "enter the tmpfs");
        if (chdir(dir) < 0)
                return negative_errno();
        return 0;
}

/* ---- 1. user namespaces ---- */

static int userns_child(ProbeReport *rep, void *userdata) {
        return enter_userns(rep, 0, "unshare(CLONE_NEWUSER)");
}

/* Why user namespaces fail, from the sysctls that gate them and the errno
 * of the failed step; NULL when none of them explains it. */
static const char *userns_hint(const ProbeReport *rep) {
        bool root = geteuid() == 0, at_unshare = strncmp(rep->step, "unshare", 7) == 0;
        int error = rep->error;

        if (sysctl_is("/proc/sys/user/max_user_namespaces", "0"))
                return "user namespaces are disabled: user.max_user_namespaces is 0; "
                       "enable them with sysctl user.max_user_namespaces=15000";
        if (!root && sysctl_is("/proc/sys/kernel/unprivileged_userns_clone", "0"))
                return "Debian's kernel.unprivileged_userns_clone is 0; allow them with "
                       "sysctl kernel.unprivileged_userns_clone=1";
        if (!root && sysctl_is("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1"))
                return "Ubuntu's AppArmor restricts unprivileged user namespaces; allow hutch with "
                       "an AppArmor profile or sysctl "
                       "kernel.apparmor_restrict_unprivileged_userns=0";
        if (!at_unshare)
                return NULL;
        if (error == -ENOSPC)
                return "a namespace limit is reached (user.max_user_namespaces, or "
                       "user.max_mnt_namespaces / user.max_pid_namespaces)";
        if (error == -EINVAL)
                return "the kernel is built without user namespaces (CONFIG_USER_NS)";
        if (error == -EPERM)
                return "a container's seccomp filter or a chroot can forbid them";
        return NULL;
}

/* "STEP failed: ERROR[; HINT][; in this <engine> container: FIX]", the
 * fix being the engine's setting for @need (none for _CONTAINER_NEED_INVALID
 * or outside a container). */
static char *failure_detail_fix(const ProbeReport *rep, const char *hint, ContainerNeed need) {
        ContainerEngine e = need >= 0 ? container_detect() : CONTAINER_NONE;
        const char *fix = container_fix(e, need);
        char *s = NULL;

        if (strextendf(&s, "%s failed: %s", rep->step, errno_text(rep->error)) < 0)
                return NULL;
        if ((hint && strextendf(&s, "; %s", hint) < 0) ||
            (fix && strextendf(&s, "; in this %s container: %s", container_engine_to_string(e),
                               fix) < 0)) {
                free(s);
                return NULL;
        }
        return s;
}

static char *failure_detail(const ProbeReport *rep, const char *hint) {
        return failure_detail_fix(rep, hint, _CONTAINER_NEED_INVALID);
}

int feature_probe_user_namespaces(FeatureCheck *ret) {
        _cleanup_free_ char *max = NULL;
        bool clone3_filtered;
        ProbeReport rep;
        char *d = NULL;
        int r;

        r = probe_in_child(userns_child, NULL, &rep);
        if (r < 0)
                return r;
        if (rep.error < 0)
                return check_set(
                        ret, FEATURE_MISSING,
                        failure_detail_fix(&rep, userns_hint(&rep), CONTAINER_NEED_NAMESPACES));

        if (read_one_line("/proc/sys/user/max_user_namespaces", &max) < 0)
                max = NULL;
        /* A zero size is invalid (EINVAL) unless a filter answers first:
         * container profiles answer clone3 with ENOSYS, and hutch then uses
         * clone() (sandbox_clone()). */
        clone3_filtered = syscall(SYS_clone3, NULL, (size_t)0) < 0 && errno == ENOSYS;
        if (asprintf(&d, "user namespaces work (probed as uid %u%s%s)%s", (unsigned)geteuid(),
                     max ? "; user.max_user_namespaces=" : "", max ?: "",
                     clone3_filtered ? "; clone3 is filtered (ENOSYS), hutch run uses clone()"
                                     : "") < 0)
                return -ENOMEM;
        return check_set(ret, FEATURE_OK, d);
}

/* ---- 2. mounts in a user namespace ---- */

/* Runs as pid 1 of the new pid namespace. */
static int mount_pid1(ProbeReport *rep) {
        struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY};
        struct statvfs sv;
        char self[16];
        ssize_t n;
        int r;

        report_step(rep, "check that the probe is pid 1 of a new pid namespace");
        if (getpid() != 1)
                return -EPROTO;

        r = enter_scratch_tmpfs(rep);
        if (r < 0)
                return r;

        report_step(rep, "mkdir on the tmpfs");
        if (mkdir("proc", 0755) < 0 || mkdir("root", 0755) < 0)
                return negative_errno();

        report_step(rep, "mount proc");
        if (mount("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
                return negative_errno();
        report_step(rep, "check that the new proc shows pid 1 as self");
        n = readlink("proc/self", self, sizeof(self) - 1);
        if (n < 0)
                return negative_errno();
        self[n] = '\0';
        if (strcmp(self, "1") != 0)
                return -EPROTO;

        report_step(rep, "bind-mount / recursively");
        if (mount("/", "root", NULL, MS_BIND | MS_REC, NULL) < 0)
                return negative_errno();
        report_step(rep, "make the bind mount read-only (mount_setattr)");
        if (mount_setattr(AT_FDCWD, "root", AT_RECURSIVE, &attr, sizeof(attr)) < 0)
                return negative_errno();
        report_step(rep, "check that the bind mount is read-only");
        if (statvfs("root", &sv) < 0)
                return negative_errno();
        if (!(sv.f_flag & ST_RDONLY))
                return -EPROTO;

        /* As rootfs_setup() does: pivot_root, or where a seccomp profile
         * refuses it, the move-mount + chroot fallback. */
        report_step(rep, "mkdir on the tmpfs");
        if (mkdir("old", 0755) < 0)
                return negative_errno();
        report_step(rep, "pivot_root into the tmpfs");
        if (syscall(SYS_pivot_root, ".", "old") == 0)
                return 0;
        if (errno != EPERM && errno != EINVAL)
                return negative_errno();
        rep->pivot_refused = errno;
        report_step(rep, "move the tmpfs over / (pivot_root is refused)");
        if (mount(".", "/", NULL, MS_MOVE, NULL) < 0)
                return negative_errno();
        report_step(rep, "chroot into the tmpfs (pivot_root is refused)");
        if (chroot(".") < 0)
                return negative_errno();
        return 0;
}

static int mount_child(ProbeReport *rep, void *userdata) {
        pid_t pid;
        int status, r;

        r = enter_userns(rep, CLONE_NEWNS | CLONE_NEWPID,
                         "unshare(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWPID)");
        if (r < 0)
                return r;

        report_step(rep, "fork pid 1 of the new pid namespace");
        pid = fork();
        if (pid < 0)
                return negative_errno();
        if (pid == 0) {
                r = mount_pid1(rep);
                rep->error = r < 0 ? r : 0;
                _exit(0);
        }
        r = wait_for_pid(pid, &status);
        if (r < 0)
                return r;
        if (!WIFEXITED(status)) {
                report_step(rep, "pid 1 of the new pid namespace died");
                return -ECHILD;
        }
        return rep->error;
}

static const char *mount_hint(const ProbeReport *rep) {
        if (strstr(rep->step, "unshare") || strstr(rep->step, "_map") ||
            strstr(rep->step, "setgroups"))
                return userns_hint(rep);
        if (strcmp(rep->step, "mount proc") == 0 && rep->error == -EPERM)
                return "the host's /proc has parts hidden by over-mounts (as in a container), so "
                       "the kernel refuses a new proc; hutch run --allow-degraded binds the "
                       "container's /proc read-only instead (docs/containers.md)";
        if (strstr(rep->step, "mount_setattr") && rep->error == -ENOSYS)
                return "mount_setattr() needs Linux 5.12";
        return NULL;
}

int feature_probe_mount_in_userns(FeatureCheck *ret) {
        ProbeReport rep;
        int r;

        r = probe_in_child(mount_child, NULL, &rep);
        if (r < 0)
                return r;
        if (rep.error < 0)
                return check_set(ret, FEATURE_MISSING,
                                 failure_detail_fix(
                                         &rep, mount_hint(&rep),
                                         strcmp(rep.step, "mount proc") == 0 ? CONTAINER_NEED_PROCFS
                                         : strstr(rep.step, "unshare") ? CONTAINER_NEED_NAMESPACES
                                                                       : _CONTAINER_NEED_INVALID));
        if (rep.pivot_refused) {
                const char *fix = container_fix(container_detect(), CONTAINER_NEED_PIVOT_ROOT);
                char *d = NULL;

                if (asprintf(&d,
                             "a user namespace can mount tmpfs, proc and read-only recursive "
                             "binds, but pivot_root is refused (%s): hutch run enters the sandbox "
                             "root by move-mount + chroot (degraded: pivot_root)%s%s",
                             errno_text(rep.pivot_refused), fix ? "; to avoid it: " : "",
                             fix ?: "") < 0)
                        return -ENOMEM;
                return check_set(ret, FEATURE_DEGRADED, d);
        }
        return check_set(ret, FEATURE_OK,
                         strdup("a user namespace can mount tmpfs, proc (as pid 1 of a new pid "
                                "namespace), read-only recursive binds and pivot_root"));
}

/* ---- 3. overlayfs in a user namespace ---- */

static int overlay_child(ProbeReport *rep, void *userdata) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        int r;

        r = enter_userns(rep, CLONE_NEWNS, "unshare(CLONE_NEWUSER|CLONE_NEWNS)");
        if (r < 0)
                return r;
        r = enter_scratch_tmpfs(rep);
        if (r < 0)
                return r;

        report_step(rep, "create lower, upper and work directories");
        if (mkdir("lower", 0755) < 0 || mkdir("upper", 0755) < 0 || mkdir("work", 0755) < 0 ||
            mkdir("merged", 0755) < 0)
                return negative_errno();
        fd = open("lower/file", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0)
                return negative_errno();
        fd = safe_close(fd);

        report_step(rep, "mount overlay");
        if (mount("overlay", "merged", "overlay", 0, "lowerdir=lower,upperdir=upper,workdir=work") <
            0) {
                /* COMPAT(kernel < 5.11 semantics): some kernels want userxattr
                 * spelled out for an unprivileged overlay. */
                if (errno != EINVAL)
                        return negative_errno();
                if (mount("overlay", "merged", "overlay", 0,
                          "lowerdir=lower,upperdir=upper,workdir=work,userxattr") < 0)
                        return negative_errno();
        }

        report_step(rep, "see the lower file through the overlay");
        if (stat("merged/file", &st) < 0)
                return negative_errno();
        report_step(rep, "write through the overlay");
        fd = open("merged/new", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0)
                return negative_errno();
        report_step(rep, "find the write in the upper directory");
        if (stat("upper/new", &st) < 0)
                return negative_errno();
        return 0;
}

int feature_probe_overlayfs(FeatureCheck *ret) {
        _cleanup_free_ char *fs = NULL;
        const char *hint = NULL;
        ProbeReport rep;
        int r;

        r = probe_in_child(overlay_child, NULL, &rep);
        if (r < 0)
                return r;
        if (rep.error >= 0)
                return check_set(ret, FEATURE_OK,
                                 strdup("overlayfs can be mounted in a user namespace"));

        if (read_full_file("/proc/filesystems", SMALL_FILE_MAX, &fs) >= 0 &&
            !word_in_list(fs, "overlay", " \t\n"))
                hint = "overlay is not in /proc/filesystems (kernel without CONFIG_OVERLAY_FS, "
                       "or run modprobe overlay)";
        else if (strcmp(rep.step, "mount overlay") == 0 && rep.error == -EPERM)
                hint = "this kernel does not allow overlayfs in user namespaces (needs Linux 5.11)";
        else if (strstr(rep.step, "unshare") || strstr(rep.step, "_map"))
                hint = userns_hint(&rep);
        return check_set(ret, FEATURE_MISSING, failure_detail(&rep, hint));
}

/* ---- 4. idmapped mounts ---- */

static void close_pairp(int (*p)[2]) {
        (*p)[0] = safe_close((*p)[0]);
        (*p)[1] = safe_close((*p)[1]);
}

/* Runs in the probe child (host namespaces, root): a grandchild creates
 * the user namespace the idmap points to; the child writes its maps,
 * clones the mount of the cwd with open_tree() and idmaps it. The clone is
 * detached and never attached anywhere: closing its fd drops it. */
static int idmap_child(ProbeReport *rep, void *userdata) {
        struct mount_attr attr = {.attr_set = MOUNT_ATTR_IDMAP};
        _cleanup_close_ int ns = -EBADF, tree = -EBADF;
        _cleanup_(close_pairp) int ready[2] = {-EBADF, -EBADF}, hold[2] = {-EBADF, -EBADF};
        char path[64], c;
        int32_t err = 0;
        pid_t pid;
        ssize_t n;
        int status, r = 0;

        report_step(rep, "create pipes");
        if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(hold, O_CLOEXEC) < 0)
                return negative_errno();

        report_step(rep, "fork the user namespace holder");
        pid = fork();
        if (pid < 0)
                return negative_errno();
        if (pid == 0) {
                /* Reports unshare()'s result, then holds the namespace until
                 * the parent closes hold[1]. */
                ready[0] = safe_close(ready[0]);
                hold[1] = safe_close(hold[1]);
                err = unshare(CLONE_NEWUSER) < 0 ? negative_errno() : 0;
                (void)loop_write(ready[1], &err, sizeof(err));
                (void)loop_read(hold[0], &c, 1);
                _exit(0);
        }
        ready[1] = safe_close(ready[1]);
        hold[0] = safe_close(hold[0]);

        report_step(rep, "unshare(CLONE_NEWUSER) in the holder");
        n = loop_read(ready[0], &err, sizeof(err));
        ready[0] = safe_close(ready[0]);
        if (n < 0)
                r = (int)n;
        else if ((size_t)n != sizeof(err))
                r = -EPROTO;
        else if (err < 0)
                r = err;

        if (r >= 0) {
                report_step(rep, "write the holder's uid_map");
                (void)snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
                r = write_string_file(path, "0 " IDMAP_PROBE_BASE " 65536\n");
        }
        if (r >= 0) {
                report_step(rep, "write the holder's gid_map");
                (void)snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)pid);
                r = write_string_file(path, "0 " IDMAP_PROBE_BASE " 65536\n");
        }
        if (r >= 0) {
                report_step(rep, "open the holder's user namespace");
                (void)snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
                ns = open(path, O_RDONLY | O_CLOEXEC);
                if (ns < 0)
                        r = negative_errno();
        }
        if (r >= 0) {
                report_step(rep, "open_tree(OPEN_TREE_CLONE) of the current directory");
                tree = open_tree(AT_FDCWD, ".", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
                if (tree < 0)
                        r = negative_errno();
        }
        if (r >= 0) {
                report_step(rep, "mount_setattr(MOUNT_ATTR_IDMAP)");
                attr.userns_fd = (uint64_t)ns;
                if (mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
                        r = negative_errno();
        }

        /* Release the holder whatever happened, and reap it. */
        hold[1] = safe_close(hold[1]);
        if (wait_for_pid(pid, &status) < 0 && r >= 0)
                r = -ECHILD;
        return r;
}

int feature_probe_idmapped_mounts(FeatureCheck *ret) {
        _cleanup_free_ char *cwd = NULL;
        const char *hint = NULL;
        ProbeReport rep;
        char *d = NULL;
        int r;

        if (geteuid() != 0)
                return check_set(ret, FEATURE_OK, strdup("not needed (single-id map)"));

        cwd = get_current_dir_name();
        if (!cwd && errno == ENOMEM)
                return -ENOMEM;

        r = probe_in_child(idmap_child, NULL, &rep);
        if (r < 0)
                return r;
        if (rep.error >= 0) {
                if (asprintf(&d,
                             "idmapped mounts work on the filesystem of '%s'; hutch needs them as "
                             "root to give the sandbox access to the caller's workspace",
                             cwd ?: ".") < 0)
                        return -ENOMEM;
                return check_set(ret, FEATURE_OK, d);
        }

        if (strncmp(rep.step, "unshare", 7) == 0)
                hint = userns_hint(&rep);
        else if (rep.error == -ENOSYS)
                hint = "open_tree() and mount_setattr() need Linux 5.12";
        else if (strstr(rep.step, "MOUNT_ATTR_IDMAP") && rep.error == -EINVAL)
                hint = "the filesystem of the current directory does not support idmapped mounts";
        if (asprintf(&d, "on '%s': ", cwd ?: ".") < 0)
                return -ENOMEM;
        if (strextendf(&d, "%s failed: %s%s%s", rep.step, errno_text(rep.error), hint ? "; " : "",
                       hint ?: "") < 0 ||
            strextendf(&d, "; hutch needs them as root to give the sandbox access to the caller's "
                           "workspace") < 0) {
                free(d);
                return -ENOMEM;
        }
        return check_set(ret, FEATURE_MISSING, d);
}

/* ---- 5. seccomp ---- */

static int seccomp_child(ProbeReport *rep, void *userdata) {
        long k;
        int r;

        /* The probe loads exactly the filter `hutch run` loads. */
        report_step(rep, "load hutch's seccomp filter");
        r = seccomp_filter_load_default();
        if (r < 0)
                return r;

        report_step(rep, "check that the filter makes unshare(0) fail with EPERM");
        k = syscall(SYS_unshare, 0);
        if (k >= 0 || errno != EPERM)
                return -EPROTO;
        return 0;
}

static const char *seccomp_hint(const ProbeReport *rep) {
        if (strcmp(rep->step, "load a seccomp filter") != 0)
                return NULL;
        if (rep->error == -EPERM || rep->error == -EACCES)
                return "this process may not install seccomp filters (a container runtime's own "
                       "filter can forbid it)";
        if (rep->error == -EINVAL)
                return "the kernel is built without CONFIG_SECCOMP_FILTER";
        return NULL;
}

static bool seccomp_action_avail(uint32_t action) {
        return syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) == 0;
}

int feature_probe_seccomp(FeatureCheck *ret) {
        _cleanup_free_ char *actions = NULL;
        bool have_errno, have_kill_process;
        ProbeReport rep;
        char *d = NULL;
        int mode, r;

        mode = prctl(PR_GET_SECCOMP, 0, 0, 0, 0);
        if (mode < 0) {
                r = negative_errno();
                if (asprintf(&d, "prctl(PR_GET_SECCOMP) failed: %s%s", errno_text(r),
                             r == -EINVAL ? "; the kernel is built without CONFIG_SECCOMP" : "") <
                    0)
                        return -ENOMEM;
                return check_set(ret, FEATURE_MISSING, d);
        }

        if (read_one_line("/proc/sys/kernel/seccomp/actions_avail", &actions) >= 0) {
                have_errno = word_in_list(actions, "errno", " ");
                have_kill_process = word_in_list(actions, "kill_process", " ");
        } else {
                /* COMPAT(kernel < 4.14): no actions_avail; ask the syscall. */
                actions = NULL;
                have_errno = seccomp_action_avail(SECCOMP_RET_ERRNO);
                have_kill_process = seccomp_action_avail(SECCOMP_RET_KILL_PROCESS);
        }
        if (!have_errno)
                return check_set(ret, FEATURE_MISSING,
                                 strdup("the seccomp filter action \"errno\" is not available"));

        r = probe_in_child(seccomp_child, NULL, &rep);
        if (r < 0)
                return r;
        if (rep.error < 0)
                return check_set(ret, FEATURE_MISSING, failure_detail(&rep, seccomp_hint(&rep)));

        if (asprintf(&d, "seccomp filters work (actions: %s)%s%s", actions ?: "errno",
                     have_kill_process ? "" : "; the kill_process action is not available",
                     mode == 2 ? "; hutch already runs under a filter, hutch's stacks on it" : "") <
            0)
                return -ENOMEM;
        return check_set(ret, have_kill_process ? FEATURE_OK : FEATURE_DEGRADED, d);
}

/* ---- 6. landlock ---- */

int feature_probe_landlock(FeatureCheck *ret) {
        _cleanup_free_ char *lsm = NULL;
        char *d = NULL;
        long abi;
        int r;

        abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
        if (abi >= 1) {
                if (asprintf(&d, "landlock ABI %ld", abi) < 0)
                        return -ENOMEM;
                return check_set(ret, FEATURE_OK, d);
        }
        r = abi < 0 ? negative_errno() : -EPROTO;

        if (read_one_line("/sys/kernel/security/lsm", &lsm) < 0)
                lsm = NULL;
        if (lsm && !word_in_list(lsm, "landlock", ","))
                r = asprintf(&d,
                             "landlock is not in the active LSM list "
                             "(/sys/kernel/security/lsm: %s); add it to the lsm= kernel "
                             "parameter",
                             lsm);
        else if (r == -ENOSYS)
                r = asprintf(&d, "landlock_create_ruleset() is not implemented: the kernel has no "
                                 "landlock (needs Linux 5.13 with CONFIG_SECURITY_LANDLOCK)");
        else if (r == -EOPNOTSUPP)
                r = asprintf(&d, "landlock is built in but disabled at boot; add it to the lsm= "
                                 "kernel parameter");
        else
                r = asprintf(&d, "landlock_create_ruleset() failed: %s", errno_text(r));
        if (r < 0)
                return -ENOMEM;
        return check_set(ret, FEATURE_MISSING, d);
}

/* ---- 7. cgroups ---- */

/* What `hutch run` asks of a place (cgroup-setup.c): a hierarchy serves it
 * and its base can be written. */
static bool cgroup_place_usable(const CgroupPlace *p) {
        return p->version != CGROUP_VERSION_NONE && p->writable;
}

/* Appends how @p looks to hutch: "v1 /sys/fs/cgroup/memory/hutch
 * (writable)", or why there is nothing to use. @none says why a place
 * with version NONE is empty. */
static int cgroup_place_describe(char **s, const CgroupPlace *p, const char *none) {
        const char *v = cgroup_version_to_string(p->version);

        if (p->version == CGROUP_VERSION_NONE)
                return strextendf(s, "%s", none);
        if (!p->base)
                return strextendf(s, "%s at %s with no base for this user", v, p->mount);
        return strextendf(s, "%s %s (%s)", v, p->base, p->writable ? "writable" : "not writable");
}

/* Appends the kill/freeze part, following cgroup_new()'s choice: v2 when
 * usable, else the v1 freezer, else SIGKILL passes over the hierarchies a
 * run always uses when it can (memory for its counters, pids for the
 * default limit, cpuacct for cpu time). */
static int cgroup_describe_kill(char **s, const CgroupTopology *t) {
        bool fallback;
        int r;

        if (cgroup_place_usable(&t->v2)) {
                r = strextendf(s, "kill/freeze: ");
                return r < 0 ? r : cgroup_place_describe(s, &t->v2, "");
        }
        if (cgroup_place_usable(&t->freezer)) {
                r = strextendf(s, "kill/freeze: freezer ");
                return r < 0 ? r : cgroup_place_describe(s, &t->freezer, "");
        }

        fallback = cgroup_place_usable(t->controllers + CGROUP_MEMORY) ||
                   cgroup_place_usable(t->controllers + CGROUP_PIDS) ||
                   cgroup_place_usable(&t->cpuacct);
        r = strextendf(s, "kill/freeze: no writable v2 or v1 freezer cgroup (");
        if (r >= 0)
                r = cgroup_place_describe(s, &t->v2, "no v2 mounted");
        if (r >= 0)
                r = strextendf(s, ", freezer ");
        if (r >= 0)
                r = cgroup_place_describe(s, &t->freezer, "not mounted");
        if (r < 0)
                return r;
        if (fallback)
                return strextendf(s, "); kill falls back to SIGKILL passes over the sandbox's "
                                     "cgroups, freeze is unavailable");
        return strextendf(s, "); nothing can kill by cgroup, the pid namespace still ends "
                             "everything when the run ends");
}

/* Appends what a missing controller means for `hutch run`: asking for its
 * limit needs --allow-degraded, and the memory and pids defaults are
 * dropped (cgroup-setup.c). */
static int cgroup_describe_consequence(char **s, const bool usable[_CGROUP_CONTROLLER_MAX]) {
        static const char *const flag[_CGROUP_CONTROLLER_MAX] = {
                [CGROUP_MEMORY] = "--memory",
                [CGROUP_PIDS] = "--pids",
                [CGROUP_CPU] = "--cpus",
        };
        bool first = true;
        int r;

        for (CgroupController c = 0; c < _CGROUP_CONTROLLER_MAX; c++) {
                if (usable[c])
                        continue;
                r = strextendf(s, "%s%s", first ? "; " : "/", flag[c]);
                if (r < 0)
                        return r;
                first = false;
        }
        if (first)
                return 0;
        r = strextendf(s, " will need --allow-degraded");
        if (r < 0)
                return r;
        if (!usable[CGROUP_MEMORY] && !usable[CGROUP_PIDS])
                return strextendf(s, "; the default memory and pids limits are not enforced");
        if (!usable[CGROUP_MEMORY])
                return strextendf(s, "; the default memory limit is not enforced");
        if (!usable[CGROUP_PIDS])
                return strextendf(s, "; the default pids limit is not enforced");
        return 0;
}

int feature_cgroups_from_error(int error, const HutchError *e, FeatureCheck *ret) {
        const char *env = secure_getenv("HUTCH_CGROUP_BASE_V2");
        const char *why = e && e->errnum == -error ? e->msg : "";
        _cleanup_free_ char *hint = NULL;
        char *d = NULL;

        if (error >= 0 || !ret)
                return -EINVAL;

        if (error == -EINVAL && env && *env &&
            asprintf(&hint,
                     " ($HUTCH_CGROUP_BASE_V2 '%s' must be an existing directory inside the v2 "
                     "mount, absolute, without . or ..)",
                     env) < 0) {
                hint = NULL;
                return -ENOMEM;
        }
        if (asprintf(&d,
                     "detecting the cgroup layout failed: %s%s%s%s; hutch run and hutch create "
                     "refuse to start (exit 125) until this is fixed",
                     errno_text(error), *why ? ": " : "", why, hint ?: "") < 0)
                return -ENOMEM;
        return check_set(ret, FEATURE_MISSING, d);
}

int feature_cgroups_from_topology(const CgroupTopology *t, FeatureCheck *ret) {
        bool usable[_CGROUP_CONTROLLER_MAX] = {};
        char *d = NULL;
        int r = 0;

        if (!t || !ret)
                return -EINVAL;

        for (CgroupController c = 0; r >= 0 && c < _CGROUP_CONTROLLER_MAX; c++) {
                usable[c] = cgroup_place_usable(t->controllers + c);
                r = strextendf(&d, "%s%s: ", c > 0 ? "; " : "", cgroup_controller_to_string(c));
                if (r >= 0)
                        r = cgroup_place_describe(&d, t->controllers + c, "no hierarchy offers it");
        }
        if (r >= 0)
                r = strextendf(&d, "; ");
        if (r >= 0)
                r = cgroup_describe_kill(&d, t);
        if (r >= 0)
                r = cgroup_describe_consequence(&d, usable);
        if (r < 0) {
                free(d);
                return r;
        }
        return check_set(
                ret, usable[CGROUP_MEMORY] && usable[CGROUP_PIDS] ? FEATURE_OK : FEATURE_DEGRADED,
                d);
}

int feature_probe_cgroups(FeatureCheck *ret) {
        _cleanup_(cgroup_topology_done) CgroupTopology t = {};
        ContainerEngine engine = container_detect();
        const char *fix = container_fix(engine, CONTAINER_NEED_CGROUPS);
        FeatureCheck c = {};
        HutchError e = {};
        int r;

        r = cgroup_topology_detect(&t, &e);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                r = feature_cgroups_from_error(r, &e, &c);
        else
                r = feature_cgroups_from_topology(&t, &c);
        if (r < 0)
                return r;
        if (c.status != FEATURE_OK && fix &&
            strextendf(&c.detail, "; in this %s container: %s", container_engine_to_string(engine),
                       fix) < 0) {
                feature_check_done(&c);
                return -ENOMEM;
        }
        *ret = c;
        return 0;
}

/* ---- disk limit of persistent sandboxes ---- */

int feature_probe_disk_limit(FeatureCheck *ret) {
        char tmp[] = "/tmp/hutch-doctor-XXXXXX";
        _cleanup_free_ char *img = NULL, *src = NULL;
        _cleanup_close_ int mnt = -EBADF;
        HutchError err = {};
        char *d = NULL;
        int r;

        r = disk_image_supported(&err);
        if (r >= 0) {
                if (!mkdtemp(tmp))
                        return -errno;
                if (asprintf(&img, "%s/disk.img", tmp) < 0 || asprintf(&src, "%s/src", tmp) < 0) {
                        (void)rm_rf_at(AT_FDCWD, tmp);
                        return -ENOMEM;
                }
                r = mkdir(src, 0700) < 0 ? hutch_error_set(&err, errno, "mkdir: %m") : 0;
                if (r >= 0)
                        r = disk_image_make(img, DISK_IMAGE_MIN_SIZE, src, &err);
                if (r >= 0)
                        r = disk_image_mount(img, false, &mnt, &err);
                mnt = safe_close(mnt);
                (void)rm_rf_at(AT_FDCWD, tmp);
        }
        if (r < 0) {
                if (asprintf(&d, "%s", err.msg[0] ? err.msg : errno_text(r)) < 0)
                        return -ENOMEM;
                return check_set(ret, FEATURE_MISSING, d);
        }
        if (asprintf(&d, "an ext4 image on a loop device mounts (e2fsprogs' mkfs.ext4)") < 0)
                return -ENOMEM;
        return check_set(ret, FEATURE_OK, d);
}

/* ---- id range of persistent sandboxes ---- */

int feature_probe_sub_ids(FeatureCheck *ret) {
        IdMapping m;
        char *d = NULL;
        int r;

        r = idmapping_for_caller_ranged(NULL, NULL, NULL, &m);
        if (r < 0) {
                if (asprintf(&d,
                             "a malformed or unsafe line of yours in /etc/subuid or "
                             "/etc/subgid: %s",
                             errno_text(r)) < 0)
                        return -ENOMEM;
                return check_set(ret, FEATURE_MISSING, d);
        }
        if (m.privileged)
                r = asprintf(&d, "as root: host ids %u-%u (%s)", m.uid_base,
                             m.uid_base + m.count - 1, m.uid_source);
        else if (m.ranged)
                r = asprintf(&d, "0 is you (%u), 1-%u are host ids %u-%u (newuidmap/newgidmap)",
                             (unsigned)m.caller_uid, m.sub_count, m.sub_uid_base,
                             m.sub_uid_base + m.sub_count - 1);
        else
                r = asprintf(&d, "%s", m.no_range);
        if (r < 0)
                return -ENOMEM;
        return check_set(ret, m.privileged || m.ranged ? FEATURE_OK : FEATURE_MISSING, d);
}

/* ---- 8. /dev/kvm ---- */

int feature_probe_kvm(FeatureCheck *ret) {
        static const char pvm_note[] = "kvm_pvm: this host's KVM only runs PVM guest kernels; the "
                                       "microVM backend will need --vm-accel tcg";
        _cleanup_close_ int fd = -EBADF;
        bool pvm = access("/sys/module/kvm_pvm", F_OK) >= 0;
        char *d = NULL;
        int version, r;

        fd = open("/dev/kvm", O_RDWR | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) {
                r = negative_errno();
                if (r == -ENOENT)
                        r = asprintf(&d,
                                     "no /dev/kvm (no hardware virtualisation here, or the kvm "
                                     "module is not loaded)%s%s",
                                     pvm ? "; " : "", pvm ? pvm_note : "");
                else if (r == -EACCES || r == -EPERM)
                        r = asprintf(&d,
                                     "/dev/kvm cannot be opened read-write by uid %u (add the "
                                     "user to the group owning /dev/kvm)%s%s",
                                     (unsigned)geteuid(), pvm ? "; " : "", pvm ? pvm_note : "");
                else
                        r = asprintf(&d, "opening /dev/kvm failed: %s%s%s", errno_text(r),
                                     pvm ? "; " : "", pvm ? pvm_note : "");
                if (r < 0)
                        return -ENOMEM;
                return check_set(ret, FEATURE_MISSING, d);
        }

        version = ioctl(fd, KVM_GET_API_VERSION, 0);
        if (version < 0) {
                r = negative_errno();
                if (asprintf(&d, "/dev/kvm does not answer KVM_GET_API_VERSION: %s",
                             errno_text(r)) < 0)
                        return -ENOMEM;
                return check_set(ret, FEATURE_MISSING, d);
        }
        if (pvm) {
                if (asprintf(&d, "/dev/kvm opens (KVM API version %d), but %s", version, pvm_note) <
                    0)
                        return -ENOMEM;
                return check_set(ret, FEATURE_DEGRADED, d);
        }
        if (asprintf(&d, "/dev/kvm works (KVM API version %d)", version) < 0)
                return -ENOMEM;
        return check_set(ret, FEATURE_OK, d);
}

/* ---- 9. the microVM backend's parts ---- */

int feature_probe_microvm(FeatureCheck *ret) {
        _cleanup_free_ char *qemu = NULL, *kernel = NULL, *release = NULL, *agent = NULL;
        HutchError e = {};
        char *d = NULL;
        int r;

        r = vm_qemu_find(&qemu, &e);
        if (r >= 0)
                r = vm_kernel_find(NULL, &kernel, &release, &e);
        if (r >= 0)
                r = vm_agent_binary_find(&agent, &e);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                d = strdup(e.msg);
                if (!d)
                        return -ENOMEM;
                return check_set(ret, FEATURE_MISSING, d);
        }
        if (asprintf(&d, "QEMU %s, guest kernel %s, agent %s", qemu, kernel, agent) < 0)
                return -ENOMEM;
        return check_set(ret, FEATURE_OK, d);
}

/* ---- dispatch ---- */

int feature_probe(FeatureId id, FeatureCheck *ret) {
        switch (id) {
        case FEATURE_USER_NAMESPACES:
                return feature_probe_user_namespaces(ret);
        case FEATURE_MOUNT_IN_USERNS:
                return feature_probe_mount_in_userns(ret);
        case FEATURE_OVERLAYFS:
                return feature_probe_overlayfs(ret);
        case FEATURE_IDMAPPED_MOUNTS:
                return feature_probe_idmapped_mounts(ret);
        case FEATURE_SECCOMP:
                return feature_probe_seccomp(ret);
        case FEATURE_LANDLOCK:
                return feature_probe_landlock(ret);
        case FEATURE_CGROUPS:
                return feature_probe_cgroups(ret);
        case FEATURE_KVM:
                return feature_probe_kvm(ret);
        case FEATURE_MICROVM:
                return feature_probe_microvm(ret);
        case FEATURE_DISK_LIMIT:
                return feature_probe_disk_limit(ret);
        case FEATURE_SUB_IDS:
                return feature_probe_sub_ids(ret);
        case _FEATURE_ID_MAX:
        case _FEATURE_ID_INVALID:
        default:
                return -EINVAL;
        }
}
