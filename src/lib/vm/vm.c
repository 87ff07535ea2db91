/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* QEMU microvm: the command line, the process, QMP, templates, and the
 * host end of the agent's port (see vm.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "ns/landlock.h"
#include "parse-util.h"
#include "rm-rf.h"
#include "seccomp/seccomp-filter.h"
#include "strv.h"
#include "time-util.h"
#include "vm/vm-internal.h"
#include "vm/vm.h"

#define QMP_TIMEOUT_MS 10000
#define MIGRATE_TIMEOUT_MS 60000
#define CONSOLE_TAIL_MAX (64U << 10)
/* TCG's translation cache: bounded, so that the host cgroup's cap on
 * QEMU's own memory holds (the default is 1 GiB). */
#define TCG_TB_SIZE_MIB 128
#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)
#define QMP_IGNORE_SHARED                                                                          \
        "{\"execute\":\"migrate-set-capabilities\",\"arguments\":{\"capabilities\":[{"             \
        "\"capability\":\"x-ignore-shared\",\"state\":true}]}}\n"

int vm_tsc_hints(char **ret) {
        _cleanup_free_ char *text = NULL, *khz_file = NULL;
        uint64_t khz = 0;
        int r;

        /* The guest's TSC under TCG runs at the host's rate; telling the
         * kernel spares it the calibration that hangs some TCG boots. */
        if (read_full_file("/sys/devices/system/cpu/cpu0/tsc_freq_khz", 64, &khz_file) >= 0) {
                khz_file[strcspn(khz_file, "\n")] = '\0';
                if (safe_atou64(khz_file, &khz) < 0)
                        khz = 0;
        }
        if (!khz && read_full_file("/proc/cpuinfo", 1U << 20, &text) >= 0) {
                /* "cpu MHz\t\t: 2596.144" */
                char *p = strstr(text, "cpu MHz"), *dot;
                uint64_t mhz = 0, frac = 0;

                p = p ? strchr(p, ':') : NULL;
                if (p) {
                        p += 1 + strspn(p + 1, " \t");
                        p[strcspn(p, "\n")] = '\0';
                        dot = strchr(p, '.');
                        if (dot) {
                                *dot = '\0';
                                dot[1 + strspn(dot + 1, "0123456789")] = '\0';
                                if (strlen(dot + 1) > 3)
                                        dot[4] = '\0';
                                if (safe_atou64(dot + 1, &frac) < 0)
                                        frac = 0;
                                for (size_t n = strlen(dot + 1); n < 3; n++)
                                        frac *= 10;
                        }
                        if (safe_atou64(p, &mhz) >= 0)
                                khz = mhz * 1000 + frac;
                }
        }
        if (!khz) {
                *ret = strdup("");
                return *ret ? 0 : -ENOMEM;
        }
        /* lpj: loops per jiffy at HZ=250 (Debian's), the TSC delay loop. */
        r = asprintf(ret, "tsc_early_khz=%" PRIu64 " lpj=%" PRIu64 " no_timer_check", khz,
                     khz * 1000 / 250);
        return r < 0 ? -ENOMEM : 0;
}

static int argv_addf(char ***argv, const char *fmt, ...) _printf_(2, 3);
static int argv_addf(char ***argv, const char *fmt, ...) {
        va_list ap;
        char *s = NULL;
        int n;

        va_start(ap, fmt);
        n = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (n < 0)
                return -ENOMEM;
        return strv_push_take(argv, s);
}

/* A value inside a QEMU option list: commas are doubled. */
static int qemu_escape(const char *s, char **ret) {
        size_t n = 0;
        char *out, *w;

        for (const char *p = s; *p; p++)
                n += *p == ',' ? 2 : 1;
        out = w = malloc(n + 1);
        if (!out)
                return -ENOMEM;
        for (const char *p = s; *p; p++) {
                *w++ = *p;
                if (*p == ',')
                        *w++ = ',';
        }
        *w = '\0';
        *ret = out;
        return 0;
}

int qemu_path(const VmConfig *c, const char *path, char **ret) {
        for (size_t i = 0; i < c->n_dirs; i++) {
                size_t n = strlen(c->dirs[i].path);

                if (strncmp(path, c->dirs[i].path, n) != 0 || (path[n] != '\0' && path[n] != '/'))
                        continue;
                return asprintf(ret, "/proc/self/fd/%zu%s", QEMU_FD_DIRS + i, path + n) < 0
                               ? -ENOMEM
                               : 0;
        }
        *ret = strdup(path);
        return *ret ? 0 : -ENOMEM;
}

/* qemu_escape() of qemu_path(). */
static int qemu_path_escape(const VmConfig *c, const char *path, char **ret) {
        _cleanup_free_ char *p = NULL;
        int r;

        r = qemu_path(c, path, &p);
        if (r < 0)
                return r;
        return qemu_escape(p, ret);
}

int qemu_argv(const QemuArgs *a, char ***ret) {
        const VmConfig *c = a->config;
        _cleanup_strv_free_ char **argv = NULL;
        _cleanup_free_ char *con = NULL, *vmlinux = NULL, *initramfs = NULL;
        uint64_t mib = c->ram_bytes >> 20;
        int r;

        /* -kernel and -initrd take no options: no escaping. */
        r = qemu_path(c, a->vmlinux, &vmlinux);
        if (r >= 0)
                r = qemu_path(c, a->initramfs, &initramfs);
        if (r >= 0)
                r = strv_extend(&argv, a->qemu);
        if (r >= 0)
                r = strv_extend(&argv, "-M");
        if (r >= 0)
                r = argv_addf(&argv, "microvm,isa-serial=on,rtc=off,pit=off,pic=off%s",
                              a->ram_path ? ",memory-backend=ram0" : "");
        if (r < 0)
                return r;
        r = argv_addf(&argv, "-accel");
        if (r >= 0 && c->accel == VM_ACCEL_TCG)
                r = argv_addf(&argv, "tcg,tb-size=%d", TCG_TB_SIZE_MIB);
        else if (r >= 0)
                r = argv_addf(&argv, "kvm");
        if (r >= 0)
                r = argv_addf(&argv, "-cpu");
        if (r >= 0)
                r = argv_addf(&argv, "%s", c->accel == VM_ACCEL_TCG ? "max" : "host");
        if (r >= 0)
                r = argv_addf(&argv, "-m");
        if (r >= 0)
                r = argv_addf(&argv, "%" PRIu64, mib);
        if (r >= 0)
                r = argv_addf(&argv, "-smp");
        if (r >= 0)
                r = argv_addf(&argv, "%u", c->vcpus);
        if (r < 0)
                return r;
        {
                /* SECURITY: QEMU's own seccomp filter. With a NIC, slirp
                 * starts the guestfwd helper (hutch __vm-fwd) for each
                 * connection to the proxy: that needs spawn, and the
                 * helper's child setup calls setsid(), which the
                 * elevateprivileges set (deny and children alike) kills.
                 * There the set is allowed; no_new_privs, set before QEMU
                 * starts (qemu_exec()), still keeps QEMU and the helper
                 * from gaining privileges (docs/vm.md). */
                const char *fixed[] = {
                        "-nodefaults",
                        "-no-user-config",
                        "-display",
                        "none",
                        "-no-reboot",
                        "-sandbox",
                        c->net_helper ? "on,obsolete=deny,elevateprivileges=allow,spawn=allow,"
                                        "resourcecontrol=deny"
                                      : "on,obsolete=deny,elevateprivileges=deny,spawn=deny,"
                                        "resourcecontrol=deny",
                        "-kernel",
                        vmlinux,
                        "-initrd",
                        initramfs,
                        "-append",
                        a->cmdline,
                };

                for (size_t i = 0; r >= 0 && i < ELEMENTSOF(fixed); i++)
                        r = strv_extend(&argv, fixed[i]);
        }
        if (r >= 0)
                r = qemu_path_escape(c, a->console_path, &con);
        if (r >= 0)
                r = argv_addf(&argv, "-chardev");
        if (r >= 0)
                r = argv_addf(&argv, "file,id=con,path=%s", con);
        if (r >= 0)
                r = argv_addf(&argv, "-serial");
        if (r >= 0)
                r = argv_addf(&argv, "chardev:con");
        if (r >= 0)
                r = argv_addf(&argv, "-device");
        if (r >= 0)
                r = argv_addf(&argv, "virtio-serial-device,max_ports=2");
        if (r >= 0)
                r = argv_addf(&argv, "-chardev");
        if (r >= 0)
                r = argv_addf(&argv, "socket,id=agent,fd=%d", QEMU_FD_AGENT);
        if (r >= 0)
                r = argv_addf(&argv, "-device");
        if (r >= 0)
                r = argv_addf(&argv, "virtserialport,chardev=agent,name=" AGENT_PORT_NAME);
        for (size_t i = 0; r >= 0 && i < c->n_shares; i++) {
                _cleanup_free_ char *p = NULL;

                r = qemu_path_escape(c, a->empty_dir ? a->empty_dir : c->shares[i].path, &p);
                if (r >= 0)
                        r = argv_addf(&argv, "-fsdev");
                if (r >= 0)
                        r = argv_addf(&argv, "local,id=fs%zu,path=%s,security_model=none%s", i, p,
                                      c->shares[i].read_only ? ",readonly=on" : "");
                if (r >= 0)
                        r = argv_addf(&argv, "-device");
                if (r >= 0)
                        r = argv_addf(&argv, "virtio-9p-device,fsdev=fs%zu,mount_tag=h%zu", i, i);
        }
        if (r >= 0 && c->net_helper) {
                _cleanup_free_ char *h = NULL;

                /* SECURITY: restrict=on: the guest reaches nothing through
                 * slirp but the forward to the proxy (no host loopback, no
                 * slirp DNS, no outside). A template has the NIC but no
                 * forward. */
                r = qemu_escape(c->net_helper, &h);
                if (r >= 0)
                        r = argv_addf(&argv, "-netdev");
                if (r >= 0 && a->ram_shared)
                        r = argv_addf(&argv, "user,id=net0,restrict=on,ipv6=off");
                else if (r >= 0)
                        r = argv_addf(
                                &argv,
                                "user,id=net0,restrict=on,ipv6=off,guestfwd=tcp:" AGENT_PROXY_ADDR
                                ":3128-cmd:%s",
                                h);
                if (r >= 0)
                        r = argv_addf(&argv, "-device");
                if (r >= 0)
                        r = argv_addf(&argv, "virtio-net-device,netdev=net0");
        }
        if (r >= 0)
                r = argv_addf(&argv, "-chardev");
        if (r >= 0)
                r = argv_addf(&argv, "socket,id=qmp,fd=%d", QEMU_FD_QMP);
        if (r >= 0)
                r = argv_addf(&argv, "-mon");
        if (r >= 0)
                r = argv_addf(&argv, "chardev=qmp,mode=control");
        if (r >= 0 && a->ram_path) {
                _cleanup_free_ char *p = NULL;

                r = qemu_path_escape(c, a->ram_path, &p);
                if (r >= 0)
                        r = argv_addf(&argv, "-object");
                if (r >= 0)
                        r = argv_addf(&argv,
                                      "memory-backend-file,id=ram0,size=%" PRIu64
                                      "M,mem-path=%s,share=%s",
                                      mib, p, a->ram_shared ? "on" : "off");
        }
        if (r >= 0 && a->incoming) {
                /* migrate-incoming on the monitor, after x-ignore-shared
                 * is set: the RAM is the template's file, the stream has
                 * the devices only. */
                r = argv_addf(&argv, "-incoming");
                if (r >= 0)
                        r = argv_addf(&argv, "defer");
        }
        if (r < 0)
                return r;
        *ret = TAKE_PTR(argv);
        return 0;
}

/* ---- the process ---- */

/* In the forked child: VmConfig.files in a mount namespace of its own.
 * SECURITY: the namespace is private (nothing propagates to the host); a
 * file whose host path is closed to others is open here to QEMU and its
 * children only (another process would need ptrace access to QEMU to
 * reach its /proc/PID/root). Opened by path in the new namespace, not
 * through inherited descriptors: a mount of the caller's namespace cannot
 * be bound in a new one. */
static int qemu_private_files(const VmConfig *c) {
        int src[VM_MAX_FILES];
        char target[PATH_MAX], from[64];

        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return negative_errno();
        /* Opened before the tmpfs hides VM_PRIVATE_DIR, which they may be
         * below; these descriptors end with exec. */
        for (size_t i = 0; i < c->n_files; i++) {
                src[i] = open(c->files[i].path, O_PATH | O_CLOEXEC);
                if (src[i] < 0)
                        return negative_errno();
        }
        if (mount("tmpfs", VM_PRIVATE_DIR, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k") < 0)
                return negative_errno();
        for (size_t i = 0; i < c->n_files; i++) {
                int fd;

                if ((size_t)snprintf(target, sizeof(target), VM_PRIVATE_DIR "/%s",
                                     c->files[i].name) >= sizeof(target))
                        return -ENAMETOOLONG;
                fd = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
                if (fd < 0)
                        return negative_errno();
                (void)close(fd);
                (void)snprintf(from, sizeof(from), "/proc/self/fd/%d", src[i]);
                if (mount(from, target, NULL, MS_BIND, NULL) < 0)
                        return negative_errno();
        }
        return 0;
}

/* The group that may read and write /dev/kvm, when QEMU is to use KVM as
 * the sandbox's root of root hutch; (gid_t)-1 otherwise. SECURITY: never
 * group 0, whose files are not QEMU's business. */
static gid_t kvm_group(const VmConfig *c, bool host_root) {
        struct stat st;

        if (!host_root || c->accel != VM_ACCEL_KVM || stat("/dev/kvm", &st) < 0 ||
            !S_ISCHR(st.st_mode) || st.st_gid == 0 || (st.st_mode & 0060) != 0060)
                return (gid_t)-1;
        return st.st_gid;
}

/* What QEMU may reach by path, read-only: itself, its libraries and data,
 * the system's configuration (the guest's /usr and /etc shares), what it
 * reads of /sys and of its own /proc entries (/proc/self is QEMU's, the
 * process that execs it; not the other processes' /proc/PID, whose memory
 * and environment its uid could read), the random devices. */
static const char *const qemu_system_paths[] = {
        "/usr",         "/etc",        "/lib", "/lib64",     "/lib32",
        "/bin",         "/sbin",       "/sys", "/proc/self", "/proc/filesystems",
        "/dev/urandom", "/dev/random",
};

/* In QEMU's child, its descriptors in place (@n from QEMU_FD_AGENT):
 * SECURITY: QEMU (and what it starts: the guestfwd helper) reaches by path
 * only what the VM is made of (docs/vm.md), read-only but for the
 * writable shares, the run and template directories and /dev/null: not
 * the caller's home, keys or other files, whatever its uid may read.
 * COMPAT(kernel < 5.13, or Landlock disabled): defence in depth, as in the
 * namespace backend (`hutch doctor` reports it): left out. */
static int qemu_landlock(const VmConfig *c, size_t n) {
        LandlockPath p[ELEMENTSOF(qemu_system_paths) + 8 + VM_MAX_SHARES + VM_MAX_DIRS];
        size_t k = 0;
        int r;

        for (size_t i = 0; i < ELEMENTSOF(qemu_system_paths); i++)
                p[k++] = (LandlockPath){.path = qemu_system_paths[i], .optional = true};
        p[k++] = (LandlockPath){.path = "/dev/null", .write = true};
        if (c->accel == VM_ACCEL_KVM)
                p[k++] = (LandlockPath){.path = "/dev/kvm", .write = true};
        /* The guestfwd helper and the proxy's socket. */
        if (c->n_files > 0)
                p[k++] = (LandlockPath){.path = VM_PRIVATE_DIR};
        /* In the sandbox's user namespace what it uses is mostly
         * descriptors (its writes limited by their mounts and the id
         * mapping); paths it cannot reach need no rule. */
        for (size_t i = 3; i < n; i++)
                p[k++] = (LandlockPath){.fd = QEMU_FD_AGENT + (int)i, .write = true};
        p[k++] = (LandlockPath){.path = c->cache_dir, .optional = true};
        p[k++] = (LandlockPath){.path = c->template_dir, .write = true, .optional = true};
        p[k++] = (LandlockPath){.path = c->run_dir, .write = true, .optional = true};
        if (c->kernel)
                p[k++] = (LandlockPath){.path = c->kernel, .optional = true};
        for (size_t i = 0; i < c->n_shares; i++)
                p[k++] = (LandlockPath){.path = c->shares[i].path,
                                        .write = !c->shares[i].read_only,
                                        .optional = true};
        r = landlock_restrict_paths(p, k);
        return r == -EOPNOTSUPP ? 0 : r;
}

/* In qemu_exec()'s child, the root of c->userns_fd's namespace: moves
 * into a new user namespace nested in it (VmConfig.guest_id). Its maps are
 * written by a forked child that stays in the outer namespace (a process
 * may not write a multi-id map of its own namespace), while this process
 * is dumpable: a non-dumpable process's /proc files are host root's. */
static int userns_nest(uint32_t id, uint32_t count, bool split) {
        pid_t self = getpid(), writer;
        int go[2], status = 0, r = 0;

        if (pipe2(go, O_CLOEXEC) < 0)
                return negative_errno();
        (void)prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
        writer = fork();
        if (writer == 0) {
                char path[64], map[96], c;

                (void)close(go[1]);
                if (read(go[0], &c, 1) != 1)
                        _exit(1);
                /* Two extents under a ranged map: the kernel wants each
                 * within one extent of the parent's map, and the ranged
                 * map of a user with sub-ids has its 0 (the user) apart
                 * from 1.. (the sub-ids; docs/vm.md "Images"). */
                if (split && count > 1)
                        (void)snprintf(map, sizeof(map), "%u 0 1\n%u 1 %u\n", id, id + 1,
                                       count - 1);
                else
                        (void)snprintf(map, sizeof(map), "%u 0 %u\n", id, count);
                (void)snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)self);
                if (write_string_file(path, map) < 0)
                        _exit(2);
                (void)snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)self);
                _exit(write_string_file(path, map) < 0 ? 3 : 0);
        }
        (void)close(go[0]);
        if (writer < 0) {
                (void)close(go[1]);
                return negative_errno();
        }
        if (unshare(CLONE_NEWUSER) < 0)
                r = negative_errno();
        else if (write(go[1], "x", 1) != 1)
                r = -EIO;
        (void)close(go[1]);
        if (waitpid(writer, &status, 0) < 0 && r >= 0)
                r = negative_errno();
        (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        if (r >= 0 && (!WIFEXITED(status) || WEXITSTATUS(status) != 0))
                r = -EPERM;
        return r;
}

/* The capabilities QEMU had as its namespace's root, as ambient ones of
 * its uid there (which is not 0), so that its 9p server may still chown
 * and read files of the namespace's other ids as before. */
static int caps_keep_ambient(void) {
        struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
        struct __user_cap_data_struct d[2] = {};

        if (syscall(SYS_capget, &h, d) < 0)
                return negative_errno();
        d[0].inheritable = d[0].permitted;
        d[1].inheritable = d[1].permitted;
        if (syscall(SYS_capset, &h, d) < 0)
                return negative_errno();
        for (unsigned c = 0; c < 64; c++)
                if (d[c / 32].permitted & (1U << (c % 32)))
                        (void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, c, 0, 0);
        return 0;
}

/* In the forked child: the cgroup, the user namespace, the fixed
 * descriptors, exec. */
_noreturn_ static void qemu_exec(const VmConfig *c, char **argv, int fds[3], int log_fd,
                                 pid_t parent) {
        int high[3 + VM_MAX_DIRS], devnull;
        size_t n = 3 + c->n_dirs;
        bool host_root = geteuid() == 0;

        (void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        /* The parent may have died before the prctl(). */
        if (getppid() != parent)
                _exit(127);
        /* A process group of its own: the terminal's ^C goes to hutch,
         * which passes it to the command, not to QEMU (which would end the
         * VM under it). */
        (void)setpgid(0, 0);
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                _exit(127);
        if (c->cgroup && cgroup_attach(c->cgroup, getpid()) < 0)
                _exit(126);
        if (c->n_files > 0 && host_root && qemu_private_files(c) < 0)
                _exit(127);
        if (c->in_userns) {
                gid_t kvm_gid = kvm_group(c, host_root);

                /* As root hutch with KVM, QEMU keeps one supplementary
                 * group: /dev/kvm's (set here: it is not mapped in the
                 * sandbox's user namespace), so that the sandbox's root may
                 * open it. NEEDSWORK: untested here (no usable KVM). */
                if (kvm_gid != (gid_t)-1 && setgroups(1, &kvm_gid) < 0)
                        _exit(127);
                if (setns(c->userns_fd, CLONE_NEWUSER) < 0)
                        _exit(127);
                /* Supplementary groups cannot be dropped where the map was
                 * written unprivileged (setgroups is denied there). */
                if (kvm_gid == (gid_t)-1)
                        (void)setgroups(0, NULL);
                if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
                        _exit(127);
                if (c->guest_id > 0) {
                        uid_t id = (uid_t)c->guest_id;

                        if (userns_nest(c->guest_id, c->userns_count, c->userns_ranged) < 0 ||
                            setresgid(id, id, id) < 0 || setresuid(id, id, id) < 0 ||
                            caps_keep_ambient() < 0)
                                _exit(127);
                }
                /* SECURITY: as root hutch this changed the host uid (to the
                 * sandbox's range), which clears the death signal: set it
                 * again, or a QEMU whose keeper was SIGKILLed would live on
                 * with the sandbox's layers mounted. */
                if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
                        _exit(127);
        }
        if (c->n_files > 0 && !host_root && qemu_private_files(c) < 0)
                _exit(127);
        for (size_t i = 0; i < n; i++) {
                int fd = i < 3 ? fds[i] : c->dirs[i - 3].fd;

                high[i] = fd >= 0 ? fcntl(fd, F_DUPFD, 100) : -1;
                if (fd >= 0 && high[i] < 0)
                        _exit(127);
        }
        devnull = open("/dev/null", O_RDWR);
        if (devnull < 0 || dup2(devnull, STDIN_FILENO) < 0 || dup2(devnull, STDOUT_FILENO) < 0 ||
            dup2(log_fd, STDERR_FILENO) < 0)
                _exit(127);
        for (size_t i = 0; i < n; i++)
                if (high[i] >= 0 && dup2(high[i], QEMU_FD_AGENT + (int)i) < 0)
                        _exit(127);
        (void)close_range(QEMU_FD_AGENT + (unsigned)n, ~0U, 0);
        if (qemu_landlock(c, n) < 0)
                _exit(127);
        /* SECURITY: QEMU serves the guest's 9p requests on host folders:
         * no set-id file may come of them (seccomp-filter.h). */
        if (seccomp_filter_load_vmm() < 0)
                _exit(127);
        (void)execv(argv[0], argv);
        _exit(127);
}

/* Starts QEMU with @argv; @incoming_fd (or -EBADF) becomes its
 * QEMU_FD_INCOMING. Fills @vm's pid, pidfd, agent and QMP sockets. */
static int qemu_spawn(Vm *vm, const VmConfig *c, char **argv, int incoming_fd, HutchError *reterr) {
        _cleanup_close_ int log_fd = -EBADF;
        int agent[2], qmp[2], fds[3];
        pid_t pid, self;

        log_fd = open(vm->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (log_fd < 0)
                return hutch_error_set(reterr, errno, "cannot create '%s': %m", vm->log_path);
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, agent) < 0)
                return hutch_error_set(reterr, errno, "failed to create the VM's sockets: %m");
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, qmp) < 0) {
                (void)safe_close(agent[0]);
                (void)safe_close(agent[1]);
                return hutch_error_set(reterr, errno, "failed to create the VM's sockets: %m");
        }
        fds[0] = agent[1];
        fds[1] = qmp[1];
        fds[2] = incoming_fd;
        self = getpid();
        pid = fork();
        if (pid == 0)
                qemu_exec(c, argv, fds, log_fd, self);
        (void)safe_close(agent[1]);
        (void)safe_close(qmp[1]);
        if (pid < 0) {
                (void)safe_close(agent[0]);
                (void)safe_close(qmp[0]);
                return hutch_error_set(reterr, errno, "failed to start QEMU: %m");
        }
        vm->pid = pid;
        vm->agent_fd = agent[0];
        vm->qmp_fd = qmp[0];
        vm->pidfd = pidfd_open(pid, 0);
        if (vm->pidfd < 0)
                return hutch_error_set(reterr, errno, "failed to watch QEMU: %m");
        (void)fcntl(vm->agent_fd, F_SETFL, O_NONBLOCK);
        return 0;
}

static void qemu_kill(Vm *vm) {
        if (vm->pid > 0) {
                if (vm->pidfd >= 0)
                        (void)pidfd_send_signal(vm->pidfd, SIGKILL, NULL, 0);
                else
                        (void)kill(vm->pid, SIGKILL);
                (void)waitpid(vm->pid, NULL, 0);
        }
        vm->pid = 0;
        vm->pidfd = safe_close(vm->pidfd);
        vm->agent_fd = safe_close(vm->agent_fd);
        vm->qmp_fd = safe_close(vm->qmp_fd);
        if (vm->reader)
                *vm->reader = (AgentReader){};
}

Vm *vm_free(Vm *vm) {
        if (!vm)
                return NULL;
        qemu_kill(vm);
        free(vm->console_path);
        free(vm->log_path);
        free(vm->reader);
        free(vm);
        return NULL;
}

/* ---- QMP ---- */

/* Reads QMP lines until one answers (has "return" or "error"); events are
 * skipped. Returns 0, or -EIO with QEMU's error text in @reterr. */
static int qmp_wait_answer(int fd, json_t **ret, HutchError *reterr) {
        char buf[65536];
        size_t len = 0;
        uint64_t deadline = time_monotonic_ms() + QMP_TIMEOUT_MS;

        for (;;) {
                char *nl;
                ssize_t n;
                struct pollfd p = {.fd = fd, .events = POLLIN};
                uint64_t now = time_monotonic_ms();

                while ((nl = memchr(buf, '\n', len))) {
                        json_t *j = json_loadb(buf, (size_t)(nl - buf), 0, NULL);
                        size_t used = (size_t)(nl - buf) + 1;

                        memmove(buf, buf + used, len - used);
                        len -= used;
                        if (!j)
                                continue;
                        if (json_object_get(j, "return")) {
                                if (ret)
                                        *ret = j;
                                else
                                        json_decref(j);
                                return 0;
                        }
                        if (json_object_get(j, "error")) {
                                const char *d = json_string_value(
                                        json_object_get(json_object_get(j, "error"), "desc"));

                                (void)hutch_error_set(reterr, EIO, "QEMU refused: %s",
                                                      d ? d : "(no reason)");
                                json_decref(j);
                                return -EIO;
                        }
                        json_decref(j);
                }
                if (now >= deadline)
                        return hutch_error_set(reterr, ETIMEDOUT, "QEMU's monitor did not answer");
                if (poll(&p, 1, (int)(deadline - now)) < 0 && errno != EINTR)
                        return negative_errno();
                if (!(p.revents & (POLLIN | POLLHUP)))
                        continue;
                if (len >= sizeof(buf))
                        return hutch_error_set(reterr, EMSGSIZE, "QEMU's monitor line too long");
                n = read(fd, buf + len, sizeof(buf) - len);
                if (n <= 0)
                        return hutch_error_set(reterr, EPIPE, "QEMU's monitor went away");
                len += (size_t)n;
        }
}

static int qmp_command(int fd, const char *json, json_t **ret, HutchError *reterr) {
        int r = loop_write(fd, json, strlen(json));

        if (r < 0)
                return hutch_error_set(reterr, -r, "failed to talk to QEMU's monitor: %s",
                                       strerror(-r));
        return qmp_wait_answer(fd, ret, reterr);
}

/* The greeting, then capabilities negotiation. */
static int qmp_open(int fd, HutchError *reterr) {
        char buf[4096];
        ssize_t n;
        struct pollfd p = {.fd = fd, .events = POLLIN};

        if (poll(&p, 1, QMP_TIMEOUT_MS) <= 0)
                return hutch_error_set(reterr, ETIMEDOUT, "QEMU's monitor did not greet");
        n = read(fd, buf, sizeof(buf));
        if (n <= 0 || !memmem(buf, (size_t)n, "QMP", 3))
                return hutch_error_set(reterr, EPROTO, "QEMU's monitor did not greet");
        return qmp_command(fd, "{\"execute\":\"qmp_capabilities\"}\n", NULL, reterr);
}

/* ---- the agent's port ---- */

int vm_agent_recv(Vm *vm, uint64_t timeout_ms, AgentFrame *ret) {
        uint64_t deadline = time_monotonic_ms() + timeout_ms;

        for (;;) {
                struct pollfd p[2] = {
                        {.fd = vm->agent_fd, .events = POLLIN},
                        {.fd = vm->pidfd, .events = POLLIN},
                };
                uint64_t now = time_monotonic_ms();
                int r = agent_reader_next(vm->reader, ret);
                ssize_t n;

                if (r != 0)
                        return r;
                if (now >= deadline)
                        return -ETIMEDOUT;
                if (poll(p, 2, (int)MIN(deadline - now, (uint64_t)INT_MAX)) < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (p[0].revents) {
                        n = agent_reader_fill(vm->reader, vm->agent_fd);
                        if (n == 0)
                                return -EPIPE;
                        if (n < 0 && n != -EAGAIN)
                                return (int)n;
                        continue;
                }
                if (p[1].revents)
                        return -ECHILD;
        }
}

int vm_console_tail(const Vm *vm, size_t max_lines, char **ret) {
        const char *paths[2] = {vm->console_path, vm->log_path};
        _cleanup_free_ char *out = NULL;
        size_t used = 0;

        out = calloc(1, 1);
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < 2; i++) {
                _cleanup_close_ int fd = open(paths[i], O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
                _cleanup_free_ char *text = NULL;
                size_t len = 0, lines = 0;
                const char *start;
                struct stat st;
                char *p;

                if (fd < 0 || fstat(fd, &st) < 0)
                        continue;
                if (st.st_size > (off_t)CONSOLE_TAIL_MAX)
                        (void)lseek(fd, st.st_size - (off_t)CONSOLE_TAIL_MAX, SEEK_SET);
                if (read_full_fd(fd, CONSOLE_TAIL_MAX, &text, &len) < 0)
                        continue;
                while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r'))
                        text[--len] = '\0';
                start = text;
                for (size_t j = len; j > 0; j--)
                        if (text[j - 1] == '\n' && ++lines >= max_lines) {
                                start = text + j;
                                break;
                        }
                for (const char *c = start; *c; c++) {
                        /* One line for the error message: newlines become " | ",
                         * other control bytes are dropped. */
                        const char *add = *c == '\n' ? " | " : NULL;
                        char one[2] = {*c, 0};

                        if (!add && (unsigned char)*c < 0x20)
                                continue;
                        if (!add)
                                add = one;
                        p = realloc(out, used + strlen(add) + 4);
                        if (!p)
                                return -ENOMEM;
                        out = p;
                        memcpy(out + used, add, strlen(add) + 1);
                        used += strlen(add);
                }
                if (used && i == 0) {
                        p = realloc(out, used + 4);
                        if (!p)
                                return -ENOMEM;
                        out = p;
                        memcpy(out + used, " | ", 4);
                        used += 3;
                }
        }
        *ret = TAKE_PTR(out);
        return 0;
}

void vm_error_add_console(const Vm *vm, HutchError *e) {
        _cleanup_free_ char *tail = NULL;
        char msg[2 * HUTCH_ERROR_MSG_MAX];
        size_t keep;

        if (!e || !vm || vm_console_tail(vm, 8, &tail) < 0)
                return;
        if (!tail[0]) {
                (void)snprintf(msg, sizeof(msg), "%s (the guest console is empty)", e->msg);
                (void)snprintf(e->msg, sizeof(e->msg), "%.*s", (int)sizeof(e->msg) - 1, msg);
                return;
        }
        /* The end of the console says most: cut its beginning to fit. */
        keep = sizeof(e->msg) - 1 - MIN(strlen(e->msg) + 24, sizeof(e->msg) - 1);
        (void)snprintf(msg, sizeof(msg), "%s; last console lines: %s", e->msg,
                       tail + (strlen(tail) > keep ? strlen(tail) - keep : 0));
        (void)snprintf(e->msg, sizeof(e->msg), "%.*s", (int)sizeof(e->msg) - 1, msg);
}

int vm_agent_error_decode(const void *payload, size_t len, const char *what, HutchError *reterr) {
        size_t pos = 4;
        const char *step = len >= 6 ? agent_payload_next(payload, len, &pos) : NULL;
        const char *msg = step ? agent_payload_next(payload, len, &pos) : NULL;
        int err = len >= 4 ? (int)agent_get_le32(payload) : EIO;

        return hutch_error_set(reterr, err > 0 && err < 4096 ? err : EIO, "%s: %s: %s", what,
                               step ? step : "?", msg ? msg : "?");
}

int vm_agent_request(Vm *vm, AgentMsg type, uint8_t chan, const void *payload, size_t len,
                     AgentMsg want, HutchError *reterr) {
        AgentFrame fr;
        int r;

        r = agent_frame_write(vm->agent_fd, type, chan, payload, len);
        if (r < 0)
                return hutch_error_set(reterr, -r, "failed to talk to the guest: %s", strerror(-r));
        r = vm_agent_recv(vm, vm->boot_timeout_ms, &fr);
        if (r == -ETIMEDOUT)
                (void)hutch_error_set(reterr, ETIMEDOUT,
                                      "the guest did not answer within %" PRIu64 " ms",
                                      vm->boot_timeout_ms);
        else if (r < 0)
                (void)hutch_error_set(reterr, -r, "the guest went away (%s)", strerror(-r));
        if (r < 0) {
                vm_error_add_console(vm, reterr);
                return r;
        }
        if (fr.chan != chan)
                return hutch_error_set(reterr, EPROTO, "an answer on channel %u from the guest",
                                       fr.chan);
        if (fr.type == want)
                return 0;
        if (fr.type == AGENT_MSG_ERROR)
                return vm_agent_error_decode(fr.payload, fr.len,
                                             type == AGENT_MSG_EXEC
                                                     ? "the command could not start in the guest"
                                                     : "sandbox setup failed in the guest",
                                             reterr);
        return hutch_error_set(reterr, EPROTO, "unexpected answer %u from the guest", fr.type);
}

/* ---- starting ---- */

typedef struct Images {
        char *qemu, *kernel, *release, *vmlinux, *agent, *initramfs, *cmdline;
} Images;

static void images_done(Images *im) {
        free(im->qemu);
        free(im->kernel);
        free(im->release);
        free(im->vmlinux);
        free(im->agent);
        free(im->initramfs);
        free(im->cmdline);
}

/* SECURITY: fail closed. KVM is used only where it can run this kernel;
 * a PVM host's /dev/kvm cannot (it runs PVM guest kernels only), and there
 * is no quiet fallback to TCG. */
static int accel_check(VmAccel accel, HutchError *reterr) {
        int fd;

        if (accel != VM_ACCEL_KVM)
                return 0;
        if (access("/sys/module/kvm_pvm", F_OK) == 0)
                return hutch_error_set(reterr, EOPNOTSUPP,
                                       "this host's KVM is kvm_pvm, which cannot boot a stock "
                                       "kernel; use --vm-accel tcg (software emulation, slow) "
                                       "(see 'hutch doctor')");
        fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
        if (fd < 0)
                return hutch_error_set(reterr, errno,
                                       "cannot use /dev/kvm: %m; use --vm-accel tcg (software "
                                       "emulation, slow) or give this user access to /dev/kvm");
        (void)close(fd);
        return 0;
}

static int images_prepare(const VmConfig *c, Images *im, HutchError *reterr) {
        _cleanup_free_ char *tsc = NULL;
        int r;

        r = vm_qemu_find(&im->qemu, reterr);
        if (r < 0)
                return r;
        r = vm_kernel_find(c->kernel, &im->kernel, &im->release, reterr);
        if (r < 0)
                return r;
        r = accel_check(c->accel, reterr);
        if (r < 0)
                return r;
        r = vm_agent_binary_find(&im->agent, reterr);
        if (r < 0)
                return r;
        r = vm_vmlinux_prepare(im->kernel, c->cache_dir, &im->vmlinux, reterr);
        if (r < 0)
                return r;
        r = vm_initramfs_prepare(im->agent, im->release, c->cache_dir, &im->initramfs, reterr);
        if (r < 0)
                return r;
        if (c->accel == VM_ACCEL_TCG) {
                r = vm_tsc_hints(&tsc);
                if (r < 0)
                        return r;
        }
        /* Under TCG only:
         * - mitigations=off: TCG does not emulate speculation, so they would
         *   cost time for nothing.
         * - norandmaps: TCG finds a translated block by its virtual address,
         *   so a library mapped at a new random address in every process
         *   is translated again in every process: ~25 ms of the ~45 ms that
         *   `true` took, the dynamic loader and libc. SECURITY: this is the
         *   command's user-space ASLR in the guest only (not the guest
         *   kernel's KASLR, not the host's); it does not loosen any boundary
         *   between the command and the guest kernel or the host, which is
         *   what the VM is for. It does make a memory-safety bug in a
         *   program run in the sandbox easier to exploit, the exploit then
         *   being confined as the command is (docs/vm.md). */
        r = asprintf(&im->cmdline,
                     "console=ttyS0 quiet loglevel=3 panic=-1 rdinit=/init 8250.nr_uarts=1 "
                     "random.trust_cpu=off %s%s",
                     c->accel == VM_ACCEL_TCG ? "mitigations=off norandmaps " : "", tsc ? tsc : "");
        return r < 0 ? -ENOMEM : 0;
}

/* What every QEMU command line of @vm has: the images and the console. */
static QemuArgs qemu_args_base(const VmConfig *c, const Images *im, const Vm *vm) {
        return (QemuArgs){
                .qemu = im->qemu,
                .vmlinux = im->vmlinux,
                .initramfs = im->initramfs,
                .cmdline = im->cmdline,
                .config = c,
                .console_path = vm->console_path,
        };
}

static int template_key(const VmConfig *c, const Images *im, char out[VM_KEY_HEX + 1]) {
        VmKey k = {};
        uint64_t shape[5] = {c->ram_bytes, c->vcpus, c->n_shares, c->net_helper != NULL,
                             (uint64_t)c->accel};
        int r;

        vm_key_init(&k);
        vm_key_add_str(&k, "hutch-template-2");
        r = vm_key_add_file_id(&k, im->qemu);
        vm_key_add_str(&k, im->vmlinux);
        vm_key_add_str(&k, im->initramfs);
        vm_key_add_str(&k, im->cmdline);
        vm_key_add(&k, shape, sizeof(shape));
        for (size_t i = 0; i < c->n_shares; i++)
                vm_key_add(&k, &c->shares[i].read_only, sizeof(bool));
        vm_key_finish(&k, out);
        return r;
}

static Vm *vm_alloc(const VmConfig *c, const char *tag) {
        _cleanup_(vm_freep) Vm *vm = calloc(1, sizeof(Vm));

        if (!vm)
                return NULL;
        vm->pidfd = vm->agent_fd = vm->qmp_fd = -EBADF;
        vm->boot_timeout_ms = c->boot_timeout_ms;
        vm->reader = calloc(1, sizeof(AgentReader));
        if (!vm->reader || asprintf(&vm->console_path, "%s/console%s.log", c->run_dir, tag) < 0 ||
            asprintf(&vm->log_path, "%s/qemu%s.log", c->run_dir, tag) < 0)
                return NULL;
        return TAKE_PTR(vm);
}

/* Boots @argv and waits (bounded) for the agent's HELLO. */
static int boot_wait_hello(Vm *vm, const VmConfig *c, char **argv, HutchError *reterr) {
        AgentFrame fr;
        int r;

        r = qemu_spawn(vm, c, argv, -EBADF, reterr);
        if (r < 0)
                return r;
        r = vm_agent_recv(vm, vm->boot_timeout_ms, &fr);
        if (r == 1 && fr.type == AGENT_MSG_HELLO)
                return 0;
        if (r == -ETIMEDOUT)
                (void)hutch_error_set(reterr, ETIMEDOUT,
                                      "the guest did not come up within %" PRIu64 " ms",
                                      vm->boot_timeout_ms);
        else
                (void)hutch_error_set(reterr, r < 0 ? -r : EPROTO, "the guest failed to boot (%s)",
                                      r < 0 ? strerror(-r) : "unexpected first message");
        vm_error_add_console(vm, reterr);
        qemu_kill(vm);
        return r < 0 ? r : -EPROTO;
}

/* Saves the booted, idle @vm's device state to @state_path (the RAM is
 * in the shared file already): stop, migrate to a file descriptor, wait
 * for completion. */
static int template_save(Vm *vm, const char *state_path, HutchError *reterr) {
        _cleanup_close_ int fd = -EBADF;
        char cmd[256];
        int r;

        r = qmp_open(vm->qmp_fd, reterr);
        if (r < 0)
                return r;
        fd = open(state_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return hutch_error_set(reterr, errno, "cannot create '%s': %m", state_path);
        /* The file goes to QEMU over the monitor (SCM_RIGHTS) as "tpl". */
        r = send_with_fds(
                vm->qmp_fd, "{\"execute\":\"getfd\",\"arguments\":{\"fdname\":\"tpl\"}}\n",
                strlen("{\"execute\":\"getfd\",\"arguments\":{\"fdname\":\"tpl\"}}\n"), &fd, 1);
        if (r < 0)
                return hutch_error_set(reterr, -r, "failed to hand QEMU the template file: %s",
                                       strerror(-r));
        /* Not stopped first: the migration stops the guest when it
         * completes, and a restored VM takes the run state of its source
         * (a stopped source would restore stopped). */
        r = qmp_wait_answer(vm->qmp_fd, NULL, reterr);
        if (r >= 0)
                r = qmp_command(vm->qmp_fd, QMP_IGNORE_SHARED, NULL, reterr);
        if (r >= 0)
                r = qmp_command(vm->qmp_fd,
                                "{\"execute\":\"migrate\",\"arguments\":{\"uri\":\"fd:tpl\"}}\n",
                                NULL, reterr);
        if (r < 0)
                return r;
        for (uint64_t deadline = time_monotonic_ms() + MIGRATE_TIMEOUT_MS;;) {
                json_t *ans = NULL;
                const char *status;
                struct timespec ts = {.tv_nsec = 5000000};

                r = qmp_command(vm->qmp_fd, "{\"execute\":\"query-migrate\"}\n", &ans, reterr);
                if (r < 0)
                        return r;
                status = json_string_value(
                        json_object_get(json_object_get(ans, "return"), "status"));
                (void)snprintf(cmd, sizeof(cmd), "%s", status ? status : "");
                json_decref(ans);
                if (strcmp(cmd, "completed") == 0)
                        break;
                if (strcmp(cmd, "failed") == 0 || strcmp(cmd, "cancelled") == 0)
                        return hutch_error_set(reterr, EIO, "saving the template VM %s", cmd);
                if (time_monotonic_ms() >= deadline)
                        return hutch_error_set(reterr, ETIMEDOUT,
                                               "saving the template VM timed out");
                (void)nanosleep(&ts, NULL);
        }
        return fsync(fd) < 0 ? negative_errno() : 0;
}

/* Boots a template VM for @key into @dir (a temporary name renamed to the
 * final one when complete). */
static int template_build(const VmConfig *c, const Images *im, const char *dir,
                          HutchError *reterr) {
        _cleanup_free_ char *tmp = NULL, *ram = NULL, *state = NULL, *empty = NULL;
        _cleanup_strv_free_ char **argv = NULL;
        _cleanup_(vm_freep) Vm *vm = NULL;
        QemuArgs a;
        int r;

        if (asprintf(&tmp, "%s.tmp-%d", dir, (int)getpid()) < 0 ||
            asprintf(&ram, "%s/ram", tmp) < 0 || asprintf(&state, "%s/state", tmp) < 0 ||
            asprintf(&empty, "%s/empty", tmp) < 0)
                return -ENOMEM;
        (void)rm_rf_at(AT_FDCWD, tmp);
        if (mkdir(tmp, 0700) < 0 || mkdir(empty, 0500) < 0)
                return hutch_error_set(reterr, errno, "cannot create '%s': %m", tmp);
        vm = vm_alloc(c, "-template");
        if (!vm)
                return -ENOMEM;
        a = qemu_args_base(c, im, vm);
        a.ram_path = ram;
        a.ram_shared = true;
        a.empty_dir = empty;
        r = qemu_argv(&a, &argv);
        if (r < 0)
                goto fail;
        r = boot_wait_hello(vm, c, argv, reterr);
        if (r < 0)
                goto fail;
        r = template_save(vm, state, reterr);
        if (r < 0) {
                vm_error_add_console(vm, reterr);
                goto fail;
        }
        vm = vm_free(vm);
        if (rename(tmp, dir) < 0) {
                /* Another hutch made the same template meanwhile: use it. */
                r = errno == ENOTEMPTY || errno == EEXIST ? 0 : negative_errno();
                (void)rm_rf_at(AT_FDCWD, tmp);
                if (r < 0)
                        return hutch_error_set(reterr, -r, "cannot store the template: %s",
                                               strerror(-r));
        }
        return 0;
fail:
        vm = vm_free(vm);
        (void)rm_rf_at(AT_FDCWD, tmp);
        return r;
}

static int start_restore(const VmConfig *c, const Images *im, const char *dir, Vm *vm,
                         HutchError *reterr) {
        _cleanup_free_ char *ram = NULL, *state = NULL;
        _cleanup_strv_free_ char **argv = NULL;
        _cleanup_close_ int fd = -EBADF;
        QemuArgs a;
        int r;

        if (asprintf(&ram, "%s/ram", dir) < 0 || asprintf(&state, "%s/state", dir) < 0)
                return -ENOMEM;
        fd = open(state, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -ENOENT;
        a = qemu_args_base(c, im, vm);
        a.ram_path = ram;
        a.incoming = true;
        r = qemu_argv(&a, &argv);
        if (r < 0)
                return r;
        r = qemu_spawn(vm, c, argv, fd, reterr);
        if (r >= 0)
                r = qmp_open(vm->qmp_fd, reterr);
        if (r >= 0)
                r = qmp_command(vm->qmp_fd, QMP_IGNORE_SHARED, NULL, reterr);
        if (r >= 0)
                r = qmp_command(vm->qmp_fd,
                                "{\"execute\":\"migrate-incoming\",\"arguments\":{\"uri\":"
                                "\"fd:" STRINGIFY(QEMU_FD_INCOMING) "\"}}\n",
                                NULL, reterr);
        if (r < 0) {
                vm_error_add_console(vm, reterr);
                qemu_kill(vm);
        }
        return r;
}

static int start_cold(const VmConfig *c, const Images *im, Vm *vm, HutchError *reterr) {
        _cleanup_strv_free_ char **argv = NULL;
        QemuArgs a = qemu_args_base(c, im, vm);
        int r;

        r = qemu_argv(&a, &argv);
        if (r < 0)
                return r;
        r = boot_wait_hello(vm, c, argv, reterr);
        if (r >= 0)
                vm->start = VM_START_COLD;
        return r;
}

/* Whether @path is a folder that shm_dir_recorded() made: its name, and
 * a directory of ours that nobody else can open. */
static bool shm_dir_is_ours(const char *path) {
        char prefix[64];
        struct stat st;
        size_t n;

        (void)snprintf(prefix, sizeof(prefix), "/dev/shm/hutch-vm-%u-", (unsigned)geteuid());
        n = strlen(prefix);
        if (strncmp(path, prefix, n) != 0 || strlen(path) != n + 6 || strchr(path + n, '/'))
                return false;
        return lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
               (st.st_mode & 0077) == 0;
}

/* The file in a /dev/shm folder that names the record (the store's
 * vm-templates.path, canonical) that gave the folder out: the claim that
 * vm_templates_reclaim() checks. Only we can write it (the folder is 0700). */
#define SHM_DIR_OWNER "store"

/* Whether the folder @dfd (@path, checked by shm_dir_is_ours()) is proven
 * orphaned: its owner file names a record that is gone, or one of ours
 * that names another folder now, read under a shared lock on it that
 * stays held through @rec_fd (the caller's to close after the removal), so
 * that no VM of that store is handed the folder meanwhile. A folder
 * without an owner file (an older hutch's) proves nothing; one being made
 * has its record locked by its maker: not proven either. */
static bool shm_dir_orphaned(int dfd, const char *path, int *rec_fd) {
        _cleanup_free_ char *owner = NULL, *text = NULL;
        struct stat st;
        size_t len;
        int r;

        r = read_full_file_at(dfd, SHM_DIR_OWNER, O_NOFOLLOW, PATH_MAX, &owner);
        if (r < 0 || owner[0] != '/' || strchr(owner, '\n'))
                return false;
        *rec_fd = open(owner, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (*rec_fd < 0)
                return errno == ENOENT || errno == ENOTDIR;
        /* SECURITY: a record is ours only as a file of our own; another
         * user's file that names this folder proves nothing either way. */
        if (fstat(*rec_fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid())
                return false;
        /* A store handing out a folder right now holds the lock: wait for
         * nobody, the next VM start looks again. */
        if (flock(*rec_fd, LOCK_SH | LOCK_NB) < 0)
                return false;
        r = read_full_fd(*rec_fd, PATH_MAX, &text, &len);
        return r >= 0 && strlen(text) == len && strcmp(text, path) != 0;
}

/* vm.h. Holds no record's lock but the one it checks (two stores
 * reclaiming at once never wait for each other). */
unsigned vm_templates_reclaim(void) {
        _cleanup_(closedirp) DIR *d = NULL;
        unsigned n = 0;
        char prefix[64];
        struct dirent *de;

        (void)snprintf(prefix, sizeof(prefix), "hutch-vm-%u-", (unsigned)geteuid());
        d = opendir("/dev/shm");
        if (!d)
                return 0;
        while ((de = readdir(d))) {
                _cleanup_free_ char *path = NULL;
                _cleanup_close_ int dfd = -EBADF, rec_fd = -EBADF;
                struct stat st;

                if (strncmp(de->d_name, prefix, strlen(prefix)) != 0)
                        continue;
                if (asprintf(&path, "/dev/shm/%s", de->d_name) < 0)
                        break;
                if (!shm_dir_is_ours(path))
                        continue;
                /* SECURITY: the folder opened without following a link and
                 * checked again through its fd; /dev/shm is sticky, so no
                 * other user can rename it away from under us. */
                dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (dfd < 0 || fstat(dfd, &st) < 0 || st.st_uid != geteuid() ||
                    (st.st_mode & 0077) != 0)
                        continue;
                if (!shm_dir_orphaned(dfd, path, &rec_fd))
                        continue;
                if (rm_rf_at(AT_FDCWD, path) >= 0)
                        n++;
        }
        return n;
}

/* Writes @record (a canonical path) as the owner file of the new folder
 * @dir. 0 or -errno. */
static int shm_dir_claim(const char *dir, const char *record) {
        _cleanup_close_ int dfd = -EBADF, fd = -EBADF;

        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return negative_errno();
        fd = openat(dfd, SHM_DIR_OWNER, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return negative_errno();
        return loop_write(fd, record, strlen(record));
}

/* SECURITY: /dev/shm is writable by every user, so the folder there has
 * a random name made by mkdtemp() (never one another user made first:
 * issue 26) and is recorded in @record_dir (the caller's store) for the
 * next VMs; made anew when the recorded one is gone (a reboot) or is not
 * a private folder of ours. The record's lock keeps two VMs starting at
 * once to one folder. A new folder names its record (SHM_DIR_OWNER) before
 * the record names it, under that lock: vm_templates_reclaim() frees it once
 * the record is gone. */
static int shm_dir_recorded(const char *record_dir, char **ret) {
        _cleanup_free_ char *rec = NULL, *text = NULL, *fresh = NULL, *canon = NULL;
        _cleanup_close_ int fd = -EBADF;
        size_t len;
        int r;

        if (asprintf(&rec, "%s/vm-templates.path", record_dir) < 0)
                return -ENOMEM;
        fd = open(rec, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return negative_errno();
        while (flock(fd, LOCK_EX) < 0)
                if (errno != EINTR)
                        return negative_errno();
        r = read_full_fd(fd, PATH_MAX, &text, &len);
        if (r >= 0 && strlen(text) == len && shm_dir_is_ours(text)) {
                *ret = TAKE_PTR(text);
                return 0;
        }
        canon = realpath(rec, NULL);
        if (!canon)
                return negative_errno();
        if (asprintf(&fresh, "/dev/shm/hutch-vm-%u-XXXXXX", (unsigned)geteuid()) < 0) {
                fresh = NULL;
                return -ENOMEM;
        }
        if (!mkdtemp(fresh))
                return negative_errno();
        r = shm_dir_claim(fresh, canon);
        if (r >= 0 &&
            (ftruncate(fd, 0) < 0 || pwrite(fd, fresh, strlen(fresh), 0) != (ssize_t)strlen(fresh)))
                r = errno > 0 ? -errno : -EIO;
        if (r < 0) {
                (void)rm_rf_at(AT_FDCWD, fresh);
                return r;
        }
        *ret = TAKE_PTR(fresh);
        return 0;
}

int vm_template_dir(const char *runtime_dir, const char *record_dir, char **ret) {
        struct statfs sf;

        if (statfs(runtime_dir, &sf) == 0 && (unsigned long)sf.f_type == TMPFS_MAGIC)
                return asprintf(ret, "%s/vm-templates", runtime_dir) < 0 ? -ENOMEM : 0;
        (void)vm_templates_reclaim();
        return shm_dir_recorded(record_dir, ret);
}

static void (*template_build_hook)(bool done, bool ok);

void vm_set_template_build_hook(void (*hook)(bool done, bool ok)) {
        template_build_hook = hook;
}

int vm_start(const VmConfig *c, Vm **ret, HutchError *reterr) {
        _cleanup_(images_done) Images im = {};
        _cleanup_(vm_freep) Vm *vm = NULL;
        _cleanup_free_ char *dir = NULL;
        char key[VM_KEY_HEX + 1];
        bool built = false;
        int r;

        if (c->n_shares > VM_MAX_SHARES || c->n_dirs > VM_MAX_DIRS || c->vcpus == 0 ||
            c->ram_bytes < (64ULL << 20))
                return hutch_error_set(reterr, EINVAL, "invalid VM shape");
        r = images_prepare(c, &im, reterr);
        if (r < 0)
                return r;
        vm = vm_alloc(c, "");
        if (!vm)
                return -ENOMEM;
        if (!c->use_template) {
                r = start_cold(c, &im, vm, reterr);
                if (r < 0)
                        return r;
                *ret = TAKE_PTR(vm);
                return 0;
        }

        r = mkdir_private(c->template_dir);
        if (r < 0)
                return mkdir_private_error("template directory", c->template_dir, r, reterr);
        r = template_key(c, &im, key);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot read '%s': %s", im.qemu, strerror(-r));
        if (asprintf(&dir, "%s/%s", c->template_dir, key) < 0)
                return -ENOMEM;
        if (access(dir, F_OK) < 0) {
                HutchError e = {};

                if (template_build_hook)
                        template_build_hook(false, false);
                r = template_build(c, &im, dir, &e);
                if (template_build_hook)
                        template_build_hook(true, r >= 0);
                /* A guest that does not boot fails here as it would cold;
                 * any other template failure falls back to a cold boot. */
                if (r == -ETIMEDOUT || r == -ECHILD || r == -EPIPE) {
                        if (reterr)
                                *reterr = e;
                        return r;
                }
                built = r >= 0;
        }
        r = start_restore(c, &im, dir, vm, reterr);
        if (r >= 0) {
                vm->start = built ? VM_START_BUILT : VM_START_TEMPLATE;
                *ret = TAKE_PTR(vm);
                return 0;
        }
        if (r != -ENOENT)
                return r;
        r = start_cold(c, &im, vm, reterr);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(vm);
        return 0;
}

/* ---- the guestfwd helper ---- */

int vm_forward_run(const char *path) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        _cleanup_close_ int s = -EBADF;
        bool in_open = true, out_open = true;
        char buf[65536];

        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, path, strlen(path) + 1);
        s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (s < 0)
                return negative_errno();
        if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                return negative_errno();
        while (in_open || out_open) {
                struct pollfd p[2] = {
                        {.fd = in_open ? STDIN_FILENO : -1, .events = POLLIN},
                        {.fd = out_open ? s : -1, .events = POLLIN},
                };
                ssize_t n;
                int r;

                if (poll(p, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (p[0].revents) {
                        n = read(STDIN_FILENO, buf, sizeof(buf));
                        if (n <= 0) {
                                in_open = false;
                                (void)shutdown(s, SHUT_WR);
                        } else if ((r = loop_write(s, buf, (size_t)n)) < 0)
                                return r;
                }
                if (p[1].revents) {
                        n = read(s, buf, sizeof(buf));
                        if (n <= 0) {
                                out_open = false;
                                (void)shutdown(STDOUT_FILENO, SHUT_WR);
                        } else if ((r = loop_write(STDOUT_FILENO, buf, (size_t)n)) < 0)
                                return r;
                }
        }
        return 0;
}
