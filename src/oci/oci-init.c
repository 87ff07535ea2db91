/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The pre-exec child of `hutch-oci create` (oci.h). Single-threaded; it
 * reports the step that failed to the parent, as the sandbox's init does. */

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <net/if.h>
#include <sched.h>
#include <seccomp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <termios.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "oci.h"
#include "sandbox/rootfs.h"
#include "seccomp/seccomp-filter.h"

static const char *const cap_names[] = {
        "CAP_CHOWN",
        "CAP_DAC_OVERRIDE",
        "CAP_DAC_READ_SEARCH",
        "CAP_FOWNER",
        "CAP_FSETID",
        "CAP_KILL",
        "CAP_SETGID",
        "CAP_SETUID",
        "CAP_SETPCAP",
        "CAP_LINUX_IMMUTABLE",
        "CAP_NET_BIND_SERVICE",
        "CAP_NET_BROADCAST",
        "CAP_NET_ADMIN",
        "CAP_NET_RAW",
        "CAP_IPC_LOCK",
        "CAP_IPC_OWNER",
        "CAP_SYS_MODULE",
        "CAP_SYS_RAWIO",
        "CAP_SYS_CHROOT",
        "CAP_SYS_PTRACE",
        "CAP_SYS_PACCT",
        "CAP_SYS_ADMIN",
        "CAP_SYS_BOOT",
        "CAP_SYS_NICE",
        "CAP_SYS_RESOURCE",
        "CAP_SYS_TIME",
        "CAP_SYS_TTY_CONFIG",
        "CAP_MKNOD",
        "CAP_LEASE",
        "CAP_AUDIT_WRITE",
        "CAP_AUDIT_CONTROL",
        "CAP_SETFCAP",
        "CAP_MAC_OVERRIDE",
        "CAP_MAC_ADMIN",
        "CAP_SYSLOG",
        "CAP_WAKE_ALARM",
        "CAP_BLOCK_SUSPEND",
        "CAP_AUDIT_READ",
        "CAP_PERFMON",
        "CAP_BPF",
        "CAP_CHECKPOINT_RESTORE",
};

int oci_cap_from_name(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(cap_names); i++)
                if (strcmp(cap_names[i], name) == 0)
                        return (int)i;
        return -EINVAL;
}

const char *oci_cap_to_name(int cap) {
        if (cap < 0 || (size_t)cap >= ELEMENTSOF(cap_names))
                return NULL;
        return cap_names[cap];
}

int oci_namespace_flag(const char *type) {
        static const struct {
                const char *name;
                int flag;
        } t[] = {
                {"pid", CLONE_NEWPID},       {"network", CLONE_NEWNET}, {"mount", CLONE_NEWNS},
                {"ipc", CLONE_NEWIPC},       {"uts", CLONE_NEWUTS},     {"user", CLONE_NEWUSER},
                {"cgroup", CLONE_NEWCGROUP},
        };
        for (size_t i = 0; i < ELEMENTSOF(t); i++)
                if (strcmp(t[i].name, type) == 0)
                        return t[i].flag;
        return 0;
}

_printf_(3, 4) _Noreturn static void init_fail(const OciInit *init, int err, const char *fmt, ...) {
        char msg[1024];
        va_list ap;
        int n;

        msg[0] = 'E';
        va_start(ap, fmt);
        n = vsnprintf(msg + 1, sizeof(msg) - 1, fmt, ap);
        va_end(ap);
        if (n < 0)
                n = 0;
        if ((size_t)n > sizeof(msg) - 2)
                n = (int)sizeof(msg) - 2;
        if (err != 0)
                n += snprintf(msg + 1 + n, sizeof(msg) - 1 - (size_t)n, ": %s", strerror(err));
        if (init->sync_fd >= 0)
                (void)loop_write(init->sync_fd, msg, strlen(msg));
        else
                dprintf(STDERR_FILENO, "hutch-oci: %s\n", msg + 1);
        _exit(init->sync_fd >= 0 ? 1 : 127);
}

static const char *json_str(json_t *o, const char *key) {
        json_t *v = json_object_get(o, key);
        return json_is_string(v) ? json_string_value(v) : NULL;
}

/* Opens @path (absolute, container view) inside @rootfd, creating what is
 * missing: directories, and the last component as a file when @as_file.
 * SECURITY: every lookup is RESOLVE_IN_ROOT, so a symlink in the image
 * cannot point a mount target at the host. Returns an O_PATH fd or -errno. */
static int openat_in_root(int rootfd, const char *path, int flags) {
        struct open_how how = {.flags = (uint64_t)flags | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT};
        int fd = (int)syscall(SYS_openat2, rootfd, path, &how, sizeof(how));

        return fd < 0 ? -errno : fd;
}

static int open_in_root(int rootfd, const char *path, bool as_file) {
        _cleanup_free_ char *copy = NULL;
        int fd;

        fd = openat_in_root(rootfd, path, O_PATH);
        if (fd != -ENOENT)
                return fd;
        copy = strdup(path);
        if (!copy)
                return -ENOMEM;
        /* Create each missing component, looking its parent up again. */
        for (char *p = copy + 1;; p++) {
                bool last = *p == '\0';
                _cleanup_close_ int dfd = -EBADF;
                char *slash;
                int r;

                if (*p != '/' && !last)
                        continue;
                *p = '\0';
                slash = strrchr(copy, '/');
                *slash = '\0';
                dfd = openat_in_root(rootfd, copy[0] ? copy : "/", O_DIRECTORY);
                *slash = '/';
                if (dfd < 0)
                        return dfd;
                if (slash[1] == '\0') {
                        /* a "//" or trailing "/" */
                } else if (last && as_file) {
                        r = openat(dfd, slash + 1, O_CREAT | O_WRONLY | O_NOFOLLOW | O_CLOEXEC,
                                   0644);
                        if (r < 0 && errno != EEXIST)
                                return -errno;
                        if (r >= 0)
                                (void)close(r);
                } else if (mkdirat(dfd, slash + 1, 0755) < 0 && errno != EEXIST)
                        return -errno;
                if (last)
                        break;
                *p = '/';
        }
        return openat_in_root(rootfd, path, O_PATH);
}

typedef struct MountOpts {
        unsigned long flags, clear, propagation;
        bool bind, rec, tmpcopyup;
        char data[1024];
} MountOpts;

static int mount_opts_parse(json_t *options, MountOpts *ret) {
        static const struct {
                const char *name;
                bool clear;
                unsigned long flag;
        } flags[] = {
                {"ro", false, MS_RDONLY},
                {"rw", true, MS_RDONLY},
                {"nosuid", false, MS_NOSUID},
                {"suid", true, MS_NOSUID},
                {"nodev", false, MS_NODEV},
                {"dev", true, MS_NODEV},
                {"noexec", false, MS_NOEXEC},
                {"exec", true, MS_NOEXEC},
                {"sync", false, MS_SYNCHRONOUS},
                {"async", true, MS_SYNCHRONOUS},
                {"dirsync", false, MS_DIRSYNC},
                {"noatime", false, MS_NOATIME},
                {"atime", true, MS_NOATIME},
                {"nodiratime", false, MS_NODIRATIME},
                {"diratime", true, MS_NODIRATIME},
                {"relatime", false, MS_RELATIME},
                {"norelatime", true, MS_RELATIME},
                {"strictatime", false, MS_STRICTATIME},
                {"nostrictatime", true, MS_STRICTATIME},
        };
        static const struct {
                const char *name;
                unsigned long flag;
        } prop[] = {
                {"private", MS_PRIVATE},       {"rprivate", MS_PRIVATE | MS_REC},
                {"shared", MS_SHARED},         {"rshared", MS_SHARED | MS_REC},
                {"slave", MS_SLAVE},           {"rslave", MS_SLAVE | MS_REC},
                {"unbindable", MS_UNBINDABLE}, {"runbindable", MS_UNBINDABLE | MS_REC},
        };
        size_t i;
        json_t *o;

        *ret = (MountOpts){};
        json_array_foreach(options, i, o) {
                const char *s = json_string_value(o);
                bool done = false;

                if (!s)
                        return -EINVAL;
                if (strcmp(s, "bind") == 0) {
                        ret->bind = true;
                        continue;
                }
                if (strcmp(s, "rbind") == 0) {
                        ret->bind = ret->rec = true;
                        continue;
                }
                for (size_t k = 0; k < ELEMENTSOF(flags) && !done; k++)
                        if (strcmp(s, flags[k].name) == 0) {
                                if (flags[k].clear) {
                                        ret->flags &= ~flags[k].flag;
                                        ret->clear |= flags[k].flag;
                                } else
                                        ret->flags |= flags[k].flag;
                                done = true;
                        }
                for (size_t k = 0; k < ELEMENTSOF(prop) && !done; k++)
                        if (strcmp(s, prop[k].name) == 0) {
                                ret->propagation = prop[k].flag;
                                done = true;
                        }
                if (done)
                        continue;
                if (strcmp(s, "tmpcopyup") == 0) {
                        ret->tmpcopyup = true;
                        continue;
                }
                /* Anything else is filesystem data ("mode=755", "size=64k"). */
                if (strlen(ret->data) + strlen(s) + 2 > sizeof(ret->data))
                        return -E2BIG;
                if (ret->data[0])
                        (void)strcat(ret->data, ",");
                (void)strcat(ret->data, s);
        }
        return 0;
}

static void do_mount(const OciInit *init, int rootfd, json_t *m, size_t idx) {
        const char *dest = json_str(m, "destination"), *type = json_str(m, "type"),
                   *src = json_str(m, "source");
        MountOpts o;
        struct stat st;
        char target[64];
        int fd, r;

        r = mount_opts_parse(json_object_get(m, "options"), &o);
        if (r < 0)
                init_fail(init, -r, "mounts/%zu: bad options", idx);
        if (!type)
                type = o.bind ? "bind" : "none";
        if (strcmp(type, "bind") == 0 || strcmp(type, "rbind") == 0)
                o.bind = true;
        if (strcmp(type, "rbind") == 0)
                o.rec = true;

        if (o.bind) {
                if (!src || stat(src, &st) < 0)
                        init_fail(init, errno, "mounts/%zu: bind source '%s'", idx, src ? src : "");
        }
        fd = open_in_root(rootfd, dest, o.bind && !S_ISDIR(st.st_mode));
        if (fd < 0)
                init_fail(init, -fd, "mounts/%zu: destination '%s'", idx, dest);
        (void)snprintf(target, sizeof(target), "/proc/self/fd/%d", fd);

        if (o.bind) {
                struct statvfs sv;
                unsigned long keep = 0;

                if (mount(src, target, NULL, MS_BIND | (o.rec ? MS_REC : 0), NULL) < 0)
                        init_fail(init, errno, "mounts/%zu: bind '%s' on '%s'", idx, src, dest);
                (void)close(fd);
                fd = open_in_root(rootfd, dest, false);
                if (fd < 0)
                        init_fail(init, -fd, "mounts/%zu: reopen '%s'", idx, dest);
                (void)snprintf(target, sizeof(target), "/proc/self/fd/%d", fd);
                if (o.flags & (MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)) {
                        /* Keep what the source mount already locks (nosuid,
                         * nodev...): a remount may only add flags. */
                        if (statvfs(target, &sv) == 0) {
                                if (sv.f_flag & ST_NOSUID)
                                        keep |= MS_NOSUID;
                                if (sv.f_flag & ST_NODEV)
                                        keep |= MS_NODEV;
                                if (sv.f_flag & ST_NOEXEC)
                                        keep |= MS_NOEXEC;
                                if (sv.f_flag & ST_RDONLY)
                                        keep |= MS_RDONLY;
                        }
                        if (mount(NULL, target, NULL,
                                  MS_BIND | MS_REMOUNT | o.flags | (keep & ~o.clear), NULL) < 0)
                                init_fail(init, errno, "mounts/%zu: remount '%s'", idx, dest);
                }
        } else if (strcmp(type, "cgroup") == 0) {
                /* NEEDSWORK: v1 controllers are not mounted into the
                 * container; an empty read-only tmpfs stands in (docs/oci.md). */
                if (mount("cgroup", target, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                          "mode=555,size=4k") < 0)
                        init_fail(init, errno, "mounts/%zu: cgroup on '%s'", idx, dest);
        } else {
                if (o.tmpcopyup)
                        init_fail(init, EOPNOTSUPP, "mounts/%zu: option tmpcopyup", idx);
                if (mount(src ? src : type, target, type, o.flags, o.data[0] ? o.data : NULL) < 0)
                        init_fail(init, errno, "mounts/%zu: %s on '%s'", idx, type, dest);
        }
        if (o.propagation) {
                /* The fd still names the directory under the new mount. */
                (void)close(fd);
                fd = open_in_root(rootfd, dest, false);
                if (fd < 0)
                        init_fail(init, -fd, "mounts/%zu: reopen '%s'", idx, dest);
                (void)snprintf(target, sizeof(target), "/proc/self/fd/%d", fd);
        }
        if (o.propagation && mount(NULL, target, NULL, o.propagation, NULL) < 0)
                init_fail(init, errno, "mounts/%zu: propagation of '%s'", idx, dest);
        (void)close(fd);
}

/* The devices every container has (the runtime-spec's default list):
 * bind-mounted from the host, which works in a user namespace too. */
static void default_devices(const OciInit *init, int rootfd) {
        static const char *const devs[] = {"null", "zero", "full", "random", "urandom", "tty"};
        static const char *const links[][2] = {
                {"/proc/self/fd", "fd"},       {"/proc/self/fd/0", "stdin"},
                {"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"},
                {"pts/ptmx", "ptmx"},
        };
        _cleanup_close_ int devfd = -EBADF;
        char path[64], target[64];
        int fd, dfd;

        dfd = open_in_root(rootfd, "/dev", false);
        if (dfd < 0)
                init_fail(init, -dfd, "open /dev");
        (void)snprintf(path, sizeof(path), "/proc/self/fd/%d", dfd);
        devfd = open(path, O_DIRECTORY | O_CLOEXEC);
        (void)close(dfd);
        if (devfd < 0)
                init_fail(init, errno, "open /dev");
        for (size_t i = 0; i < ELEMENTSOF(devs); i++) {
                (void)snprintf(path, sizeof(path), "/dev/%s", devs[i]);
                fd = open_in_root(rootfd, path, true);
                if (fd < 0)
                        init_fail(init, -fd, "create %s", path);
                (void)snprintf(target, sizeof(target), "/proc/self/fd/%d", fd);
                if (mount(path, target, NULL, MS_BIND, NULL) < 0)
                        init_fail(init, errno, "bind %s", path);
                (void)close(fd);
        }
        for (size_t i = 0; i < ELEMENTSOF(links); i++)
                if (symlinkat(links[i][0], devfd, links[i][1]) < 0 && errno != EEXIST)
                        init_fail(init, errno, "symlink /dev/%s", links[i][1]);
}

static void mask_paths(const OciInit *init, json_t *linux_obj) {
        json_t *v;
        size_t i;

        json_array_foreach(json_object_get(linux_obj, "maskedPaths"), i, v) {
                const char *p = json_string_value(v);
                struct stat st;

                if (lstat(p, &st) < 0) {
                        if (errno == ENOENT)
                                continue;
                        init_fail(init, errno, "maskedPaths: '%s'", p);
                }
                if (S_ISDIR(st.st_mode)) {
                        if (mount("tmpfs", p, "tmpfs", MS_RDONLY, "size=0,mode=000") < 0)
                                init_fail(init, errno, "maskedPaths: '%s'", p);
                } else if (mount("/dev/null", p, NULL, MS_BIND, NULL) < 0)
                        init_fail(init, errno, "maskedPaths: '%s'", p);
        }
        json_array_foreach(json_object_get(linux_obj, "readonlyPaths"), i, v) {
                const char *p = json_string_value(v);

                if (mount(p, p, NULL, MS_BIND | MS_REC, NULL) < 0) {
                        if (errno == ENOENT)
                                continue;
                        init_fail(init, errno, "readonlyPaths: '%s'", p);
                }
                if (mount(NULL, p, NULL,
                          MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                          NULL) < 0)
                        init_fail(init, errno, "readonlyPaths: remount '%s'", p);
        }
}

static void apply_sysctls(const OciInit *init, json_t *sysctl) {
        const char *key;
        json_t *v;

        json_object_foreach(sysctl, key, v) {
                char path[512];
                _cleanup_close_ int fd = -EBADF;
                const char *val = json_string_value(v);

                (void)snprintf(path, sizeof(path), "/proc/sys/%s", key);
                for (char *c = path + strlen("/proc/sys/"); *c; c++)
                        if (*c == '.')
                                *c = '/';
                fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
                if (fd < 0 || write(fd, val, strlen(val)) < 0)
                        init_fail(init, errno, "sysctl '%s'", key);
        }
}

static void apply_rlimits(const OciInit *init, json_t *process) {
        static const struct {
                const char *name;
                int res;
        } t[] = {
                {"RLIMIT_AS", RLIMIT_AS},
                {"RLIMIT_CORE", RLIMIT_CORE},
                {"RLIMIT_CPU", RLIMIT_CPU},
                {"RLIMIT_DATA", RLIMIT_DATA},
                {"RLIMIT_FSIZE", RLIMIT_FSIZE},
                {"RLIMIT_LOCKS", RLIMIT_LOCKS},
                {"RLIMIT_MEMLOCK", RLIMIT_MEMLOCK},
                {"RLIMIT_MSGQUEUE", RLIMIT_MSGQUEUE},
                {"RLIMIT_NICE", RLIMIT_NICE},
                {"RLIMIT_NOFILE", RLIMIT_NOFILE},
                {"RLIMIT_NPROC", RLIMIT_NPROC},
                {"RLIMIT_RSS", RLIMIT_RSS},
                {"RLIMIT_RTPRIO", RLIMIT_RTPRIO},
                {"RLIMIT_RTTIME", RLIMIT_RTTIME},
                {"RLIMIT_SIGPENDING", RLIMIT_SIGPENDING},
                {"RLIMIT_STACK", RLIMIT_STACK},
        };
        json_t *v;
        size_t i;

        json_array_foreach(json_object_get(process, "rlimits"), i, v) {
                const char *type = json_str(v, "type");
                struct rlimit rl = {
                        .rlim_cur = (rlim_t)json_integer_value(json_object_get(v, "soft")),
                        .rlim_max = (rlim_t)json_integer_value(json_object_get(v, "hard")),
                };
                int res = -1;

                for (size_t k = 0; k < ELEMENTSOF(t); k++)
                        if (type && strcmp(type, t[k].name) == 0)
                                res = t[k].res;
                if (res < 0)
                        init_fail(init, EINVAL, "process/rlimits/%zu: type", i);
                if (setrlimit(res, &rl) < 0)
                        init_fail(init, errno, "process/rlimits/%zu: %s", i, type);
        }
}

static uint64_t cap_set(json_t *caps, const char *which) {
        uint64_t set = 0;
        json_t *v;
        size_t i;

        json_array_foreach(json_object_get(caps, which), i, v) {
                int c = oci_cap_from_name(json_string_value(v));
                if (c >= 0)
                        set |= UINT64_C(1) << c;
        }
        return set;
}

/* Drops the bounding set to process.capabilities.bounding, switches to
 * the user and sets the other sets exactly as the config grants (an
 * absent list is the empty set). */
static void apply_user_and_caps(const OciInit *init, json_t *process) {
        json_t *caps = json_object_get(process, "capabilities"), *user, *v;
        uint64_t bounding = cap_set(caps, "bounding"), eff = cap_set(caps, "effective"),
                 perm = cap_set(caps, "permitted"), inh = cap_set(caps, "inheritable"),
                 amb = cap_set(caps, "ambient");
        struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
        struct __user_cap_data_struct data[2] = {};
        gid_t groups[64];
        size_t ng = 0, i;
        uid_t uid;
        gid_t gid;

        user = json_object_get(process, "user");
        uid = (uid_t)json_integer_value(json_object_get(user, "uid"));
        gid = (gid_t)json_integer_value(json_object_get(user, "gid"));
        json_array_foreach(json_object_get(user, "additionalGids"), i, v) {
                if (ng >= ELEMENTSOF(groups))
                        init_fail(init, E2BIG, "process/user/additionalGids");
                groups[ng++] = (gid_t)json_integer_value(v);
        }
        if (json_is_integer(json_object_get(user, "umask")))
                (void)umask((mode_t)json_integer_value(json_object_get(user, "umask")));

        for (int c = 0; c <= 63; c++) {
                if (bounding & (UINT64_C(1) << c))
                        continue;
                if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
                        init_fail(init, errno, "drop capability %d from the bounding set", c);
        }
        if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
                init_fail(init, errno, "PR_SET_KEEPCAPS");
        if (setgroups(ng, groups) < 0 && !(ng == 0 && errno == EPERM))
                init_fail(init, errno, "setgroups");
        if (setresgid(gid, gid, gid) < 0)
                init_fail(init, errno, "setgid %u", (unsigned)gid);
        if (setresuid(uid, uid, uid) < 0)
                init_fail(init, errno, "setuid %u", (unsigned)uid);
        if (prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) < 0)
                init_fail(init, errno, "PR_SET_KEEPCAPS");
        data[0].effective = (uint32_t)eff;
        data[1].effective = (uint32_t)(eff >> 32);
        data[0].permitted = (uint32_t)perm;
        data[1].permitted = (uint32_t)(perm >> 32);
        data[0].inheritable = (uint32_t)inh;
        data[1].inheritable = (uint32_t)(inh >> 32);
        if (syscall(SYS_capset, &hdr, data) < 0)
                init_fail(init, errno, "capset");
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
                init_fail(init, errno, "clear the ambient set");
        for (int c = 0; c <= 63; c++)
                if ((amb & (UINT64_C(1) << c)) &&
                    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, c, 0, 0) < 0)
                        init_fail(init, errno, "raise ambient capability %d", c);
}

static uint32_t seccomp_action(const char *name, json_t *errno_ret, int default_errno) {
        int e = json_is_integer(errno_ret) ? (int)json_integer_value(errno_ret) : default_errno;

        if (strcmp(name, "SCMP_ACT_ALLOW") == 0)
                return SCMP_ACT_ALLOW;
        if (strcmp(name, "SCMP_ACT_ERRNO") == 0)
                return SCMP_ACT_ERRNO((uint16_t)e);
        if (strcmp(name, "SCMP_ACT_KILL") == 0 || strcmp(name, "SCMP_ACT_KILL_THREAD") == 0)
                return SCMP_ACT_KILL;
        if (strcmp(name, "SCMP_ACT_KILL_PROCESS") == 0)
                return SCMP_ACT_KILL_PROCESS;
        if (strcmp(name, "SCMP_ACT_TRAP") == 0)
                return SCMP_ACT_TRAP;
        if (strcmp(name, "SCMP_ACT_LOG") == 0)
                return SCMP_ACT_LOG;
        return SCMP_ACT_KILL_PROCESS; /* validated before; never reached */
}

static int seccomp_op(const char *s) {
        static const struct {
                const char *name;
                int op;
        } t[] = {
                {"SCMP_CMP_NE", SCMP_CMP_NE},
                {"SCMP_CMP_LT", SCMP_CMP_LT},
                {"SCMP_CMP_LE", SCMP_CMP_LE},
                {"SCMP_CMP_EQ", SCMP_CMP_EQ},
                {"SCMP_CMP_GE", SCMP_CMP_GE},
                {"SCMP_CMP_GT", SCMP_CMP_GT},
                {"SCMP_CMP_MASKED_EQ", SCMP_CMP_MASKED_EQ},
        };
        for (size_t i = 0; s && i < ELEMENTSOF(t); i++)
                if (strcmp(t[i].name, s) == 0)
                        return t[i].op;
        return -EINVAL;
}

/* The config's own filter, loaded after hutch's: the kernel runs every
 * filter and the strictest answer wins, so the config can narrow hutch's
 * wall and never open it. */
static void load_config_seccomp(const OciInit *init, json_t *sc) {
        _cleanup_(seccomp_releasep) scmp_filter_ctx ctx = NULL;
        json_t *v, *a;
        size_t i, k;
        int def_errno = json_is_integer(json_object_get(sc, "defaultErrnoRet"))
                                ? (int)json_integer_value(json_object_get(sc, "defaultErrnoRet"))
                                : EPERM;
        int r;

        ctx = seccomp_init(seccomp_action(json_str(sc, "defaultAction"),
                                          json_object_get(sc, "defaultErrnoRet"), EPERM));
        if (!ctx)
                init_fail(init, ENOMEM, "linux/seccomp");
        json_array_foreach(json_object_get(sc, "architectures"), i, v) {
                const char *n = json_string_value(v);
                uint32_t arch = 0;

                if (strcmp(n, "SCMP_ARCH_X86_64") == 0)
                        arch = SCMP_ARCH_X86_64;
                else if (strcmp(n, "SCMP_ARCH_X86") == 0)
                        arch = SCMP_ARCH_X86;
                else if (strcmp(n, "SCMP_ARCH_X32") == 0)
                        arch = SCMP_ARCH_X32;
                else if (strcmp(n, "SCMP_ARCH_AARCH64") == 0)
                        arch = SCMP_ARCH_AARCH64;
                else if (strcmp(n, "SCMP_ARCH_ARM") == 0)
                        arch = SCMP_ARCH_ARM;
                if (arch == 0)
                        continue;
                r = seccomp_arch_add(ctx, arch);
                if (r < 0 && r != -EEXIST)
                        init_fail(init, -r, "linux/seccomp/architectures/%zu", i);
        }
        json_array_foreach(json_object_get(sc, "syscalls"), i, v) {
                uint32_t act = seccomp_action(json_str(v, "action"), json_object_get(v, "errnoRet"),
                                              def_errno == 0 ? EPERM : EPERM);
                struct scmp_arg_cmp cmp[6];
                unsigned n_cmp = 0;
                json_t *name;
                size_t j;

                json_array_foreach(json_object_get(v, "args"), k, a) {
                        if (n_cmp >= 6)
                                init_fail(init, E2BIG, "linux/seccomp/syscalls/%zu/args", i);
                        cmp[n_cmp++] = (struct scmp_arg_cmp){
                                .arg = (unsigned)json_integer_value(json_object_get(a, "index")),
                                .op = seccomp_op(json_str(a, "op")),
                                .datum_a = (scmp_datum_t)json_integer_value(
                                        json_object_get(a, "value")),
                                .datum_b = (scmp_datum_t)json_integer_value(
                                        json_object_get(a, "valueTwo")),
                        };
                }
                json_array_foreach(json_object_get(v, "names"), j, name) {
                        int nr = seccomp_syscall_resolve_name(json_string_value(name));

                        if (nr == __NR_SCMP_ERROR)
                                continue; /* a name this libseccomp does not know */
                        r = seccomp_rule_add_array(ctx, act, nr, n_cmp, cmp);
                        /* -EACCES: the action equals the default; -EEXIST:
                         * duplicates; both are harmless in a profile. */
                        if (r < 0 && r != -EACCES && r != -EEXIST && r != -EINVAL)
                                init_fail(init, -r, "linux/seccomp/syscalls/%zu '%s'", i,
                                          json_string_value(name));
                }
        }
        r = seccomp_load(ctx);
        if (r < 0)
                init_fail(init, -r, "load linux/seccomp");
}

/* Execs @process; with @start_state (the container's init after `start`),
 * config.json's startContainer hooks run first, from the container's root
 * and under the same user, capabilities and seccomp filters as the process
 * itself (the hook's file comes from the container's root: it gets no more
 * than what that root's programs get). */
static void exec_process(const OciInit *init, json_t *process, const char *start_state) {
        json_t *v, *args = json_object_get(process, "args");
        const char *cwd = json_str(process, "cwd");
        _cleanup_free_ char **argv = NULL;
        size_t i;

        argv = calloc(json_array_size(args) + 1, sizeof(char *));
        if (!argv)
                init_fail(init, ENOMEM, "argv");
        json_array_foreach(args, i, v) argv[i] = (char *)json_string_value(v);
        if (clearenv() != 0)
                init_fail(init, ENOMEM, "clearenv");
        json_array_foreach(json_object_get(process, "env"), i, v) {
                if (putenv((char *)json_string_value(v)) != 0)
                        init_fail(init, errno, "process/env/%zu", i);
        }
        if (cwd && chdir(cwd) < 0)
                init_fail(init, errno, "process/cwd '%s'", cwd);
        apply_user_and_caps(init, process);
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                init_fail(init, errno, "PR_SET_NO_NEW_PRIVS");
        /* SECURITY: hutch's deny list is always in force; the config's own
         * filter only adds to it. */
        if (seccomp_filter_load_default() < 0)
                init_fail(init, errno, "load hutch's seccomp filter");
        if (json_is_object(json_object_get(json_object_get(init->config, "linux"), "seccomp")))
                load_config_seccomp(
                        init, json_object_get(json_object_get(init->config, "linux"), "seccomp"));
        if (start_state) {
                char what[PATH_MAX + 64];
                int r = oci_hooks_run(json_object_get(init->config, "hooks"), "startContainer",
                                      start_state, what, sizeof(what));
                if (r < 0)
                        init_fail(init, r == -ECHILD ? 0 : -r, "%s", what);
        }
        execvp(argv[0], argv);
        init_fail(init, errno, "exec '%s'", argv[0]);
}

/* A new network namespace gets its loopback up, as runc does. */
static void loopback_up(const OciInit *init) {
        _cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct ifreq ifr = {};

        (void)snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
        if (fd < 0 || ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
                init_fail(init, errno, "read the flags of lo");
        if (ifr.ifr_flags & IFF_UP)
                return;
        ifr.ifr_flags |= IFF_UP;
        if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
                init_fail(init, errno, "bring lo up");
}

/* io.hutch.allow-host: hutch-proxy's listening sockets, made here in the
 * container's network namespace and sent to `create`, which hands them to
 * the proxy outside. Init keeps no copy. */
static void proxy_sockets_send(const OciInit *init) {
        char what[256], msg[IF_NAMESIZE + 1] = "P";
        int fds[2], r;

        /* "P" and the name of an interface besides lo, if there is one. */
        r = oci_net_listen(fds, msg + 1, sizeof(msg) - 1, what, sizeof(what));
        if (r < 0)
                init_fail(init, -r, "%s", what);
        r = send_with_fds(init->sync_fd, msg, strlen(msg), fds, fds[1] >= 0 ? 2 : 1);
        (void)close(fds[0]);
        if (fds[1] >= 0)
                (void)close(fds[1]);
        if (r < 0)
                init_fail(init, -r, "send hutch-proxy's sockets");
}

/* process.terminal: a pty from the container's own devpts, its master sent
 * to the engine's console socket (SCM_RIGHTS, as runc does), its slave the
 * process's controlling terminal and fds 0-2. */
static void console_setup(const OciInit *init, json_t *process) {
        json_t *size = json_object_get(process, "consoleSize");
        char cbuf[CMSG_SPACE(sizeof(int))] = {}, name[64], *pts;
        struct iovec iov = {.iov_base = (void *)"/dev/ptmx", .iov_len = 9};
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = cbuf,
                            .msg_controllen = sizeof(cbuf)};
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        _cleanup_close_ int master = -EBADF, slave = -EBADF;

        if (!json_is_true(json_object_get(process, "terminal")))
                return;
        if (init->console_fd < 0)
                init_fail(init, EINVAL, "process/terminal needs --console-socket");
        master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (master < 0 || unlockpt(master) < 0)
                init_fail(init, errno, "open /dev/ptmx");
        if (ptsname_r(master, name, sizeof(name)) != 0)
                init_fail(init, errno, "ptsname");
        pts = name;
        slave = open(pts, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (slave < 0)
                init_fail(init, errno, "open '%s'", pts);
        if (json_is_object(size)) {
                struct winsize ws = {
                        .ws_row =
                                (unsigned short)json_integer_value(json_object_get(size, "height")),
                        .ws_col =
                                (unsigned short)json_integer_value(json_object_get(size, "width")),
                };
                (void)ioctl(slave, TIOCSWINSZ, &ws);
        }
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &master, sizeof(int));
        if (sendmsg(init->console_fd, &mh, MSG_NOSIGNAL) < 0)
                init_fail(init, errno, "send the pty to the console socket");
        (void)close(init->console_fd);
        if (ioctl(slave, TIOCSCTTY, 0) < 0)
                init_fail(init, errno, "TIOCSCTTY");
        for (int fd = 0; fd < 3; fd++)
                if (dup2(slave, fd) < 0)
                        init_fail(init, errno, "dup2 the pty");
}

/* SECURITY: until it execs the container's program, this process runs
 * hutch-oci's binary inside the container's namespaces. Not dumpable, a
 * container process without CAP_SYS_PTRACE cannot open its
 * /proc/PID/exe and rewrite the host's binary (runc's CVE-2019-5736).
 * execve() makes the container's program dumpable again. */
static void make_undumpable(const OciInit *init) {
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                init_fail(init, errno, "PR_SET_DUMPABLE");
}

_Noreturn void oci_exec_run(const OciInit *init, json_t *process) {
        char go;

        make_undumpable(init);

        if (read(init->sync_fd, &go, 1) != 1)
                _exit(1);
        for (size_t i = 0; i < init->n_ns; i++)
                if (init->ns_types[i] == CLONE_NEWUSER && setns(init->ns_fds[i], 0) < 0)
                        init_fail(init, errno, "join the container's user namespace");
        for (size_t i = 0; i < init->n_ns; i++) {
                if (init->ns_types[i] != CLONE_NEWUSER && init->ns_types[i] != CLONE_NEWPID &&
                    setns(init->ns_fds[i], init->ns_types[i]) < 0)
                        init_fail(init, errno, "join the container's namespaces");
                (void)close(init->ns_fds[i]);
        }
        if (json_is_true(json_object_get(process, "terminal")) && setsid() < 0)
                init_fail(init, errno, "setsid");
        console_setup(init, process);
        apply_rlimits(init, process);
        if (close_range(3 + (unsigned)init->preserve_fds, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
                init_fail(init, errno, "close_range");
        /* The sync socket is CLOEXEC: the parent sees EOF once exec worked. */
        if (fcntl(init->sync_fd, F_SETFD, FD_CLOEXEC) < 0)
                init_fail(init, errno, "fcntl");
        exec_process(init, process, NULL);
        _exit(127);
}

/* The container is set up but not yet pivoted into its root: `create`
 * starts hutch-proxy and runs the prestart and createRuntime hooks now
 * (runtime-spec: before pivot_root), then sends the state JSON (and the
 * proxy's CA with secrets), with which the createContainer hooks run
 * here, in the container's namespaces (their paths resolve in this mount
 * namespace, before pivot_root). Returns the state JSON for the
 * startContainer hooks (status "created"); the CA memfd in *@ret_ca
 * (-EBADF without secrets) and its subject hash in *@ret_hash. */
static char *pre_pivot(const OciInit *init, int *ret_ca, uint64_t *ret_hash) {
        _cleanup_free_ char *buf = NULL;
        json_t *state;
        char what[PATH_MAX + 64], *text, *end;
        size_t n_fds = 0;
        int fds[1] = {-EBADF}, r;
        ssize_t n;

        if (write(init->sync_fd, "H", 1) != 1)
                _exit(1);
        n = recv(init->sync_fd, NULL, 0, MSG_PEEK | MSG_TRUNC);
        if (n < 18)
                _exit(1);
        buf = malloc((size_t)n + 1);
        if (!buf)
                init_fail(init, ENOMEM, "the hooks' state");
        n = oci_recv_fds(init->sync_fd, buf, (size_t)n, fds, 1, &n_fds);
        if (n < 18 || buf[0] != 'h')
                _exit(1);
        buf[n] = '\0';
        *ret_ca = fds[0];
        *ret_hash = strtoull(buf + 1, &end, 16);
        if (end != buf + 17)
                _exit(1);
        r = oci_hooks_run(json_object_get(init->config, "hooks"), "createContainer", buf + 17, what,
                          sizeof(what));
        if (r < 0)
                init_fail(init, r == -ECHILD ? 0 : -r, "%s", what);
        state = json_loads(buf + 17, 0, NULL);
        if (!state || json_object_set_new(state, "status", json_string("created")) < 0)
                init_fail(init, ENOMEM, "the hooks' state");
        text = json_dumps(state, JSON_COMPACT);
        json_decref(state);
        if (!text)
                init_fail(init, ENOMEM, "the hooks' state");
        return text;
}

/* io.hutch.secret: the CA bundle with the root's own system CAs and the
 * proxy's CA, at SANDBOX_CA_BUNDLE_PATH and bound over the root's bundle
 * (rootfs.h), read-only. In the container's root, before anything of the
 * container's runs. */
static void install_ca(const OciInit *init, int ca, uint64_t hash) {
        HutchError err = {};

        if (rootfs_ca_bundle_setup(&err) < 0 || rootfs_install_ca_bundle(ca, hash, &err) < 0)
                init_fail(init, 0, "the CA bundle for io.hutch.secret: %s", err.msg);
}

_Noreturn void oci_init_run(const OciInit *init) {
        json_t *cfg = init->config, *linux_obj = json_object_get(cfg, "linux"),
               *process = json_object_get(cfg, "process"), *m;
        const char *rootpath = json_str(json_object_get(cfg, "root"), "path"),
                   *hostname = json_str(cfg, "hostname");
        _cleanup_free_ char *root = NULL;
        _cleanup_close_ int rootfd = -EBADF, fifo = -EBADF, ca = -EBADF;
        _cleanup_free_ char *start_state = NULL;
        uint64_t ca_hash = 0;
        OciInit late = *init;
        bool dev_mounted = false;
        char go, b;
        size_t i;

        make_undumpable(init);
        if (read(init->sync_fd, &go, 1) != 1)
                _exit(1);
        for (i = 0; i < init->n_ns; i++)
                if (init->ns_types[i] == CLONE_NEWUSER && setns(init->ns_fds[i], 0) < 0)
                        init_fail(init, errno, "join the user namespace");
        for (i = 0; i < init->n_ns; i++) {
                if (init->ns_types[i] != CLONE_NEWUSER && init->ns_types[i] != CLONE_NEWPID &&
                    setns(init->ns_fds[i], init->ns_types[i]) < 0)
                        init_fail(init, errno, "join a namespace given by path");
                (void)close(init->ns_fds[i]);
        }
        if (init->new_netns || init->proxy)
                loopback_up(init);
        if (init->proxy)
                proxy_sockets_send(init);
        if (setsid() < 0)
                init_fail(init, errno, "setsid");

        if (rootpath[0] == '/')
                root = strdup(rootpath);
        else if (asprintf(&root, "%s/%s", init->bundle, rootpath) < 0)
                root = NULL;
        if (!root)
                init_fail(init, ENOMEM, "root/path");
        if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
                init_fail(init, errno, "make / a slave mount");
        if (mount(root, root, NULL, MS_BIND | MS_REC, NULL) < 0)
                init_fail(init, errno, "bind root/path '%s'", root);
        if (mount(NULL, root, NULL, MS_PRIVATE, NULL) < 0)
                init_fail(init, errno, "make the root private");
        rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (rootfd < 0)
                init_fail(init, errno, "open root/path '%s'", root);
        json_array_foreach(json_object_get(cfg, "mounts"), i, m) {
                do_mount(init, rootfd, m, i);
                if (strcmp(json_str(m, "destination"), "/dev") == 0)
                        dev_mounted = true;
        }
        if (dev_mounted)
                default_devices(init, rootfd);
        apply_sysctls(init, json_object_get(linux_obj, "sysctl"));
        if (hostname && sethostname(hostname, strlen(hostname)) < 0)
                init_fail(init, errno, "hostname '%s'", hostname);

        if (init->pre_pivot)
                start_state = pre_pivot(init, &ca, &ca_hash);

        /* SECURITY: the fifo is opened before pivot_root and read only
         * after: it is the host file `start` writes to. */
        fifo = open(init->fifo, O_RDWR | O_CLOEXEC);
        if (fifo < 0)
                init_fail(init, errno, "open the exec fifo");
        if (fchdir(rootfd) < 0)
                init_fail(init, errno, "chdir to the root");
        if (syscall(SYS_pivot_root, ".", ".") < 0)
                init_fail(init, errno, "pivot_root");
        if (umount2(".", MNT_DETACH) < 0)
                init_fail(init, errno, "detach the old root");
        if (chdir("/") < 0)
                init_fail(init, errno, "chdir /");
        if (ca >= 0) {
                install_ca(init, ca, ca_hash);
                ca = safe_close(ca);
        }
        mask_paths(init, linux_obj);
        if (json_is_true(json_object_get(json_object_get(cfg, "root"), "readonly")) &&
            mount(NULL, "/", NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) < 0)
                init_fail(init, errno, "make the root read-only");
        console_setup(init, process);
        apply_rlimits(init, process);
        if (json_is_integer(json_object_get(process, "oomScoreAdj"))) {
                char s[32];
                (void)snprintf(
                        s, sizeof(s), "%lld",
                        (long long)json_integer_value(json_object_get(process, "oomScoreAdj")));
                if (write_string_file("/proc/self/oom_score_adj", s) < 0)
                        init_fail(init, errno, "process/oomScoreAdj");
        }

        if (write(init->sync_fd, "R", 1) != 1)
                _exit(1);
        (void)close(init->sync_fd);
        late.sync_fd = -EBADF;
        /* Created: wait for `start` (or for delete to kill us). */
        if (read(fifo, &b, 1) != 1)
                _exit(1);
        (void)close(TAKE_FD(fifo));
        if (close_range(3 + (unsigned)init->preserve_fds, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
                init_fail(&late, errno, "close_range");
        exec_process(&late, process, start_state);
        _exit(127);
}
