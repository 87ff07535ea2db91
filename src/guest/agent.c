/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch-agent: PID 1 of a hutch microVM (DESIGN.md §6, docs/vm.md).
 *
 * Linked statically and put at /init of the initramfs hutch builds. It
 * mounts the kernel filesystems, loads the modules of /modules (in name
 * order, with their parameters from the kernel command line), opens the
 * virtio-serial port AGENT_PORT_NAME and says HELLO. From then on it only
 * answers the host (agent-protocol.h): SETUP builds the command's root
 * under /sbx (9p shares, tmpfs, a minimal /dev), EXEC runs a command there
 * (any number at once, one per channel; or the file operation builtin of
 * src/lib/sandbox/file-op.h, confined as a command is).
 *
 * SECURITY: the command runs chrooted into /sbx, as the uid and gid the
 * host names, with no capabilities (bounding and ambient sets cleared),
 * no_new_privs, in a cgroup of its own with the memory and pids limits. It
 * never sees the agent's /dev (the virtio port), and the agent is not
 * dumpable. A frame that breaks the protocol ends the agent, and with it
 * the VM (panic=-1 and -no-reboot). */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/random.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent-protocol.h"
#include "exec-util.h"
#include "fd-util.h"
#include "macro.h"
#include "parse-util.h"
#include "sandbox/file-op.h"
#include "signal-util.h"

#define SBX "/sbx"
#define PORT_WAIT_MS 20000
#define OUTPUT_DRAIN_MS 2000
#define MAX_SETUP_MOUNTS 32

static int port_fd = -EBADF; /* the virtio port: the agent's only peer */

/* Says why the agent gives up on the console (the host shows its last
 * lines) and ends the VM: PID 1 exiting panics the kernel. */
_noreturn_ static void die(const char *what, int err) {
        (void)dprintf(STDERR_FILENO, "hutch-agent: %s: %s\n", what, strerror(err));
        (void)reboot(RB_POWER_OFF);
        _exit(1);
}

static void console_setup(void) {
        int fd = open("/dev/console", O_RDWR | O_NOCTTY | O_CLOEXEC);

        if (fd < 0)
                return;
        (void)dup2(fd, STDIN_FILENO);
        (void)dup2(fd, STDOUT_FILENO);
        (void)dup2(fd, STDERR_FILENO);
        (void)close(fd);
}

/* cgroup2's favordynmods (Linux 6.0): moving a process into a cgroup
 * (each EXEC) takes the cgroup threadgroup lock for writing, which by
 * default waits for an RCU grace period: 5-20 ms under TCG. With it, fork
 * and exit pay a little instead. Older kernels (--vm-kernel) refuse the
 * option: they mount without it. */
static void mount_kernel_filesystems(void) {
        static const struct {
                const char *fstype, *target, *options, *fallback;
        } m[] = {
                {"devtmpfs", "/dev", "mode=0755", NULL},
                {"proc", "/proc", NULL, NULL},
                {"sysfs", "/sys", NULL, NULL},
                {"cgroup2", "/sys/fs/cgroup", "favordynmods", ""},
                {"tmpfs", "/run", "mode=0700,size=64m", NULL},
        };

        for (size_t i = 0; i < ELEMENTSOF(m); i++) {
                int r;

                (void)mkdir(m[i].target, 0755);
                r = mount(m[i].fstype, m[i].target, m[i].fstype, MS_NOSUID | MS_NOEXEC,
                          m[i].options);
                if (r < 0 && errno == EINVAL && m[i].fallback)
                        r = mount(m[i].fstype, m[i].target, m[i].fstype, MS_NOSUID | MS_NOEXEC,
                                  m[i].fallback);
                if (r < 0 && errno != EBUSY)
                        die(m[i].target, errno);
        }
        console_setup();
}

/* "virtio_mmio.device=..." on the command line is for the module
 * virtio_mmio: collects "@mod.K=V" entries as "K=V K=V". */
static void module_params(const char *cmdline, const char *mod, char *out, size_t size) {
        size_t n = strlen(mod), used = 0;
        const char *p = cmdline;

        out[0] = '\0';
        while (*p) {
                size_t len = strcspn(p, " \n");

                if (len > n + 1 && strncmp(p, mod, n) == 0 && p[n] == '.' &&
                    used + (len - n - 1) + 2 < size) {
                        (void)snprintf(out + used, size - used, "%s%.*s", used ? " " : "",
                                       (int)(len - n - 1), p + n + 1);
                        used = strlen(out);
                }
                p += len;
                while (*p == ' ' || *p == '\n')
                        p++;
        }
}

/* Loads /modules/NN-name.ko in name order (hutch numbered them after
 * modules.dep, dependencies first). */
static void load_modules(void) {
        _cleanup_free_ char *cmdline = NULL;
        struct dirent **list = NULL;
        int n;

        if (read_full_file("/proc/cmdline", 65536, &cmdline) < 0)
                cmdline = NULL;
        n = scandir("/modules", &list, NULL, alphasort);
        for (int i = 0; i < n; i++) {
                char mod[256], params[1024], path[512];
                const char *name = list[i]->d_name, *dash = strchr(name, '-');
                size_t len;
                int fd;

                if (name[0] == '.' || !dash || !strstr(name, ".ko")) {
                        free(list[i]);
                        continue;
                }
                len = MIN((size_t)(strstr(name, ".ko") - dash - 1), sizeof(mod) - 1);
                memcpy(mod, dash + 1, len);
                mod[len] = '\0';
                for (char *c = mod; *c; c++)
                        if (*c == '-')
                                *c = '_';
                module_params(cmdline ? cmdline : "", mod, params, sizeof(params));
                (void)snprintf(path, sizeof(path), "/modules/%s", name);
                fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0 || (syscall(SYS_finit_module, fd, params, 0) < 0 && errno != EEXIST))
                        (void)dprintf(STDERR_FILENO, "hutch-agent: module %s: %s\n", mod,
                                      strerror(errno));
                (void)safe_close(fd);
                free(list[i]);
        }
        free(list);
}

static void sleep_ms(long ms) {
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};

        (void)nanosleep(&ts, NULL);
}

/* The port's device node: /sys/class/virtio-ports/vportNpM/name holds
 * its name, devtmpfs makes /dev/vportNpM. */
static int open_port(void) {
        for (long waited = 0; waited < PORT_WAIT_MS; waited += 5) {
                _cleanup_(closedirp) DIR *d = opendir("/sys/class/virtio-ports");
                struct dirent *de;

                while (d && (de = readdir(d))) {
                        _cleanup_free_ char *name = NULL;
                        char path[300];
                        int fd;

                        if (de->d_name[0] == '.')
                                continue;
                        (void)snprintf(path, sizeof(path), "/sys/class/virtio-ports/%s/name",
                                       de->d_name);
                        if (read_full_file(path, 256, &name) < 0)
                                continue;
                        name[strcspn(name, "\n")] = '\0';
                        if (strcmp(name, AGENT_PORT_NAME) != 0)
                                continue;
                        (void)snprintf(path, sizeof(path), "/dev/%s", de->d_name);
                        fd = open(path, O_RDWR | O_CLOEXEC | O_NOCTTY);
                        if (fd >= 0)
                                return fd;
                }
                sleep_ms(5);
        }
        return -ETIMEDOUT;
}

/* ---- SETUP ---- */

typedef struct Setup {
        uid_t uid;
        gid_t gid;
        uint64_t memory, pids;
        uint64_t size_tmp, size_home, size_shm, size_workspace;
        bool net, read_only, done;
} Setup;

static Setup setup = {
        .uid = 65534,
        .gid = 65534,
        .size_tmp = 1024ULL << 20,
        .size_home = 1024ULL << 20,
        .size_shm = 64ULL << 20,
        .size_workspace = 4096ULL << 20,
};
static unsigned exec_count = 0;

typedef struct Fail {
        int err;
        char step[128];
        char msg[512];
} Fail;

static int fail(Fail *f, int err, const char *step, const char *detail) {
        f->err = err > 0 ? err : EIO;
        (void)snprintf(f->step, sizeof(f->step), "%s", step);
        (void)snprintf(f->msg, sizeof(f->msg), "%.300s%s%s", detail ? detail : "",
                       detail ? ": " : "", strerror(f->err));
        return -f->err;
}

/* mkdir -p of @path (absolute), each new directory 0755. */
static int mkdir_p(const char *path) {
        char buf[4096];

        if (strlen(path) >= sizeof(buf))
                return -ENAMETOOLONG;
        strcpy(buf, path);
        for (char *p = buf + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = '\0';
                if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                        return negative_errno();
                *p = '/';
        }
        if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                return negative_errno();
        return 0;
}

static int mount_tmpfs(const char *target, uint64_t size, const char *mode, bool owned, Fail *f) {
        char opts[128];
        int r;

        r = mkdir_p(target);
        if (r < 0)
                return fail(f, -r, "create a mount point", target);
        (void)snprintf(opts, sizeof(opts), "size=%llu,mode=%s", (unsigned long long)size, mode);
        if (owned)
                (void)snprintf(opts + strlen(opts), sizeof(opts) - strlen(opts), ",uid=%u,gid=%u",
                               (unsigned)setup.uid, (unsigned)setup.gid);
        if (mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
                return fail(f, errno, "mount a tmpfs", target);
        return 0;
}

/* --read-only: a writable mount the sandbox made (a copied or overlaid
 * workspace, $HOME) becomes read-only once it is populated. */
static int remount_read_only(const char *target, Fail *f) {
        if (mount(NULL, target, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
                  NULL) < 0)
                return fail(f, errno, "make read-only", target);
        return 0;
}

static int mount_9p(const char *tag, const char *target, bool rw, Fail *f) {
        char opts[256];
        int r;

        r = mkdir_p(target);
        if (r < 0)
                return fail(f, -r, "create a mount point", target);
        /* Read-only shares cache freely (the system's /usr); writable ones
         * stay coherent with the host. */
        (void)snprintf(opts, sizeof(opts), "trans=virtio,version=9p2000.L,msize=262144,cache=%s",
                       rw ? "mmap" : "loose");
        if (mount(tag, target, "9p", MS_NOSUID | MS_NODEV | (rw ? 0 : MS_RDONLY), opts) < 0)
                return fail(f, errno, "mount a 9p share", target);
        return 0;
}

/* Copies the tree @src into the directory @dst (both open fds), owned by
 * the command's uid. Symlinks are copied as symlinks; devices, fifos and
 * sockets are skipped, as the namespace backend's copy does. */
static int copy_tree(int src, int dst, unsigned depth) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        int r;

        if (depth > 256)
                return -ELOOP;
        r = opendir_fd(src, &d);
        if (r < 0)
                return r;
        while ((de = readdir_no_dot(d))) {
                struct stat st;

                if (fstatat(src, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return negative_errno();
                if (S_ISDIR(st.st_mode)) {
                        _cleanup_close_ int s = -EBADF, t = -EBADF;

                        if (mkdirat(dst, de->d_name, st.st_mode & 07777) < 0)
                                return negative_errno();
                        s = openat(src, de->d_name,
                                   O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        t = openat(dst, de->d_name,
                                   O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (s < 0 || t < 0)
                                return negative_errno();
                        r = copy_tree(s, t, depth + 1);
                        if (r < 0)
                                return r;
                        (void)fchown(t, setup.uid, setup.gid);
                } else if (S_ISREG(st.st_mode)) {
                        _cleanup_close_ int s = -EBADF, t = -EBADF;
                        char buf[65536];
                        ssize_t n;

                        s = openat(src, de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                        t = openat(dst, de->d_name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                                   st.st_mode & 07777);
                        if (s < 0 || t < 0)
                                return negative_errno();
                        while ((n = read(s, buf, sizeof(buf))) > 0) {
                                r = loop_write(t, buf, (size_t)n);
                                if (r < 0)
                                        return r;
                        }
                        if (n < 0)
                                return negative_errno();
                        (void)fchown(t, setup.uid, setup.gid);
                } else if (S_ISLNK(st.st_mode)) {
                        char target[4096];
                        ssize_t n = readlinkat(src, de->d_name, target, sizeof(target) - 1);

                        if (n < 0)
                                return negative_errno();
                        target[n] = '\0';
                        if (symlinkat(target, dst, de->d_name) < 0)
                                return negative_errno();
                        (void)fchownat(dst, de->d_name, setup.uid, setup.gid, AT_SYMLINK_NOFOLLOW);
                }
        }
        return errno ? negative_errno() : 0;
}

static unsigned mount_count = 0;

/* mount=TAG:MODE:PATH */
static int setup_share(const char *spec, Fail *f) {
        char tag[32], mode[16], aux[64], target[4096];
        const char *c1 = strchr(spec, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        int r;

        if (!c2 || (size_t)(c1 - spec) >= sizeof(tag) || (size_t)(c2 - c1 - 1) >= sizeof(mode) ||
            c2[1] != '/' || strlen(c2 + 1) + sizeof(SBX) > sizeof(target) ||
            mount_count >= MAX_SETUP_MOUNTS)
                return fail(f, EINVAL, "parse the setup", spec);
        (void)snprintf(tag, sizeof(tag), "%.*s", (int)(c1 - spec), spec);
        (void)snprintf(mode, sizeof(mode), "%.*s", (int)(c2 - c1 - 1), c1 + 1);
        (void)snprintf(target, sizeof(target), SBX "%s", c2 + 1);
        (void)snprintf(aux, sizeof(aux), "/run/share-%u", mount_count++);

        if (strcmp(mode, "ro") == 0 || strcmp(mode, "rw") == 0)
                return mount_9p(tag, target, mode[1] == 'w', f);
        if (strcmp(mode, "copy") == 0) {
                _cleanup_close_ int s = -EBADF, t = -EBADF;

                r = mount_9p(tag, aux, false, f);
                if (r < 0)
                        return r;
                r = mount_tmpfs(target, setup.size_workspace, "0755", true, f);
                if (r < 0)
                        return r;
                s = open(aux, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                t = open(target, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (s < 0 || t < 0)
                        return fail(f, errno, "open the workspace copy", target);
                errno = 0;
                r = copy_tree(s, t, 0);
                (void)umount2(aux, MNT_DETACH);
                if (r < 0)
                        return fail(f, -r, "copy the workspace", c2 + 1);
                return setup.read_only ? remount_read_only(target, f) : 0;
        }
        if (strcmp(mode, "overlay") == 0) {
                char lower[128], upper[128], work[128], opts[512];

                (void)snprintf(lower, sizeof(lower), "%s/lower", aux);
                (void)snprintf(upper, sizeof(upper), "%s/upper", aux);
                (void)snprintf(work, sizeof(work), "%s/work", aux);
                r = mount_tmpfs(aux, setup.size_workspace, "0755", false, f);
                if (r < 0)
                        return r;
                r = mount_9p(tag, lower, false, f);
                if (r < 0)
                        return r;
                if (mkdir(upper, 0755) < 0 || mkdir(work, 0755) < 0 ||
                    chown(upper, setup.uid, setup.gid) < 0)
                        return fail(f, errno, "create the overlay's upper layer", upper);
                r = mkdir_p(target);
                if (r < 0)
                        return fail(f, -r, "create a mount point", target);
                (void)snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s,workdir=%s", lower,
                               upper, work);
                if (mount("overlay", target, "overlay", MS_NOSUID | MS_NODEV, opts) < 0)
                        return fail(f, errno, "mount the workspace overlay", c2 + 1);
                return setup.read_only ? remount_read_only(target, f) : 0;
        }
        return fail(f, EINVAL, "parse the setup", spec);
}

static int setup_dev(Fail *f) {
        static const struct {
                const char *name;
                unsigned major, minor;
        } nodes[] = {
                {"null", 1, 3},   {"zero", 1, 5},    {"full", 1, 7},
                {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0},
        };
        static const char *const links[][2] = {
                {"ptmx", "pts/ptmx"},          {"fd", "/proc/self/fd"},
                {"stdin", "/proc/self/fd/0"},  {"stdout", "/proc/self/fd/1"},
                {"stderr", "/proc/self/fd/2"},
        };
        int r;

        r = mount_tmpfs(SBX "/dev", 1 << 20, "0755", false, f);
        if (r < 0)
                return r;
        for (size_t i = 0; i < ELEMENTSOF(nodes); i++) {
                char path[64];

                (void)snprintf(path, sizeof(path), SBX "/dev/%s", nodes[i].name);
                if (mknod(path, S_IFCHR | 0666, makedev(nodes[i].major, nodes[i].minor)) < 0 ||
                    chmod(path, 0666) < 0)
                        return fail(f, errno, "create a device node", path);
        }
        for (size_t i = 0; i < ELEMENTSOF(links); i++) {
                char path[64];

                (void)snprintf(path, sizeof(path), SBX "/dev/%s", links[i][0]);
                if (symlink(links[i][1], path) < 0)
                        return fail(f, errno, "create a /dev link", path);
        }
        if (mkdir(SBX "/dev/pts", 0755) < 0 ||
            mount("devpts", SBX "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
                  "newinstance,ptmxmode=0666,mode=0620") < 0)
                return fail(f, errno, "mount devpts", NULL);
        r = mount_tmpfs(SBX "/dev/shm", setup.size_shm, "1777", false, f);
        if (r < 0)
                return r;
        if (mount("none", SBX "/dev", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID, NULL) < 0)
                return fail(f, errno, "make /dev read-only", NULL);
        return 0;
}

static int setup_net(Fail *f) {
        _cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct ifreq ifr = {};
        struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;

        if (s < 0)
                return fail(f, errno, "open a socket", NULL);
        (void)snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
        if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
                return fail(f, errno, "bring up lo", NULL);
        ifr.ifr_flags |= IFF_UP;
        if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
                return fail(f, errno, "bring up lo", NULL);
        if (!setup.net)
                return 0;
        memset(&ifr, 0, sizeof(ifr));
        (void)snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "eth0");
        sin->sin_family = AF_INET;
        (void)inet_pton(AF_INET, AGENT_GUEST_ADDR, &sin->sin_addr);
        if (ioctl(s, SIOCSIFADDR, &ifr) < 0)
                return fail(f, errno, "configure eth0", NULL);
        (void)inet_pton(AF_INET, "255.255.255.0", &sin->sin_addr);
        if (ioctl(s, SIOCSIFNETMASK, &ifr) < 0)
                return fail(f, errno, "configure eth0's netmask", NULL);
        if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
                return fail(f, errno, "bring up eth0", NULL);
        ifr.ifr_flags |= IFF_UP;
        if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
                return fail(f, errno, "bring up eth0", NULL);
        return 0;
}

static int hex_digit(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        return -1;
}

/* SECURITY: every VM restored from one template starts with the same
 * CRNG state; the host's random bytes are credited and the CRNG reseeded
 * before anything of the user's runs. */
static int setup_seed(const char *hex, Fail *f) {
        struct {
                struct rand_pool_info info;
                unsigned char buf[64];
        } e = {};
        size_t n = strlen(hex) / 2;
        _cleanup_close_ int fd = -EBADF;

        if (n > sizeof(e.buf) || strlen(hex) % 2)
                return fail(f, EINVAL, "parse the setup", "seed");
        for (size_t i = 0; i < n; i++) {
                int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);

                if (hi < 0 || lo < 0)
                        return fail(f, EINVAL, "parse the setup", "seed");
                e.buf[i] = (unsigned char)(hi << 4 | lo);
        }
        e.info.entropy_count = (int)n * 8;
        e.info.buf_size = (int)n;
        fd = open("/dev/urandom", O_RDWR | O_CLOEXEC);
        if (fd < 0 || ioctl(fd, RNDADDENTROPY, &e) < 0 || ioctl(fd, RNDRESEEDCRNG) < 0)
                return fail(f, errno, "reseed the guest's random pool", NULL);
        return 0;
}

static int setup_time(const char *value, Fail *f) {
        const char *dot = strchr(value, '.');
        char sec[32];
        uint64_t s = 0, ns = 0;
        struct timespec ts;

        if (!dot || (size_t)(dot - value) >= sizeof(sec))
                return fail(f, EINVAL, "parse the setup", "time");
        (void)snprintf(sec, sizeof(sec), "%.*s", (int)(dot - value), value);
        if (safe_atou64(sec, &s) < 0 || safe_atou64(dot + 1, &ns) < 0 || ns >= 1000000000)
                return fail(f, EINVAL, "parse the setup", "time");
        ts = (struct timespec){.tv_sec = (time_t)s, .tv_nsec = (long)ns};
        if (clock_settime(CLOCK_REALTIME, &ts) < 0)
                return fail(f, errno, "set the clock", NULL);
        return 0;
}

static int parse_u64_key(const char *v, uint64_t *out, Fail *f) {
        if (safe_atou64(v, out) < 0)
                return fail(f, EINVAL, "parse the setup", v);
        return 0;
}

static const struct {
        const char *key;
        uint64_t *value;
} u64_keys[] = {
        {"memory=", &setup.memory},     {"pids=", &setup.pids},
        {"size.tmp=", &setup.size_tmp}, {"size.home=", &setup.size_home},
        {"size.shm=", &setup.size_shm}, {"size.workspace=", &setup.size_workspace},
};

/* The scalar keys; mounts and links come in a second pass, once the
 * sizes and ids are known. */
static int setup_scalar(const char *kv, Fail *f) {
        const char *v = strchr(kv, '=') + 1;
        uint64_t u = 0;
        int r = 0;

        if (strncmp(kv, "time=", 5) == 0)
                return setup_time(v, f);
        if (strncmp(kv, "seed=", 5) == 0)
                return setup_seed(v, f);
        if (strncmp(kv, "hostname=", 9) == 0)
                return sethostname(v, strlen(v)) < 0 ? fail(f, errno, "set the hostname", v) : 0;
        if (strncmp(kv, "net=", 4) == 0) {
                setup.net = strcmp(v, "1") == 0;
                return 0;
        }
        if (strncmp(kv, "readonly=", 9) == 0) {
                setup.read_only = strcmp(v, "1") == 0;
                return 0;
        }
        if (strncmp(kv, "uid=", 4) == 0 || strncmp(kv, "gid=", 4) == 0) {
                r = parse_u64_key(v, &u, f);
                if (r < 0 || u > UINT32_MAX - 1)
                        return r < 0 ? r : fail(f, EINVAL, "parse the setup", kv);
                if (kv[0] == 'u')
                        setup.uid = (uid_t)u;
                else
                        setup.gid = (gid_t)u;
                return 0;
        }
        for (size_t i = 0; i < ELEMENTSOF(u64_keys); i++)
                if (strncmp(kv, u64_keys[i].key, strlen(u64_keys[i].key)) == 0)
                        return parse_u64_key(v, u64_keys[i].value, f);
        if (strncmp(kv, "mount=", 6) == 0 || strncmp(kv, "link=", 5) == 0 ||
            strncmp(kv, "tmpfs=", 6) == 0 || strncmp(kv, "bind=", 5) == 0 ||
            strncmp(kv, "mask=", 5) == 0)
                return 0;
        return fail(f, EINVAL, "parse the setup (unknown key)", kv);
}

/* mask=f:PATH and mask=d:PATH: SECURITY, a host file or directory the
 * command must not read (shadow, sudoers, SSH host keys: the namespace
 * backend's list, rootfs_masked_paths()) is covered by an empty read-only
 * file or tmpfs. The command cannot unmount it: it has no capabilities. */
static int setup_mask(const char *v, Fail *f) {
        static bool have_empty;
        char target[4096];
        struct stat st;

        if ((v[0] != 'f' && v[0] != 'd') || v[1] != ':' || v[2] != '/' ||
            strlen(v + 2) >= sizeof(target) - sizeof(SBX))
                return fail(f, EINVAL, "parse the setup", v);
        (void)snprintf(target, sizeof(target), SBX "%s", v + 2);
        if (lstat(target, &st) < 0)
                return 0; /* not in the guest's view: nothing to hide */
        if (v[0] == 'd') {
                if (!S_ISDIR(st.st_mode))
                        return fail(f, ENOTDIR, "mask", target);
                if (mount("tmpfs", target, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                          "mode=0755,size=4k") < 0)
                        return fail(f, errno, "mask", target);
                return 0;
        }
        if (!S_ISREG(st.st_mode))
                return fail(f, EINVAL, "mask", target);
        if (!have_empty) {
                int fd = open("/run/empty-mask", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);

                if (fd < 0)
                        return fail(f, errno, "create", "/run/empty-mask");
                (void)close(fd);
                have_empty = true;
        }
        if (mount("/run/empty-mask", target, NULL, MS_BIND, NULL) < 0 ||
            mount(NULL, target, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
                  NULL) < 0)
                return fail(f, errno, "mask", target);
        return 0;
}

/* tmpfs=SIZE:PATH, link=PATH:TARGET and bind=SRC:DST (both in the
 * sandbox's root; the bind is read-only) */
static int setup_entry(const char *kv, Fail *f) {
        const char *v = strchr(kv, '=') + 1, *colon = strchr(v, ':');
        char a[4096], b[4096];

        if (strncmp(kv, "mount=", 6) == 0)
                return setup_share(v, f);
        if (strncmp(kv, "mask=", 5) == 0)
                return setup_mask(v, f);
        if (!colon || (size_t)(colon - v) >= sizeof(a) - sizeof(SBX) ||
            strlen(colon + 1) >= sizeof(b) - sizeof(SBX))
                return 0;
        if (strncmp(kv, "tmpfs=", 6) == 0) {
                uint64_t size;

                (void)snprintf(a, sizeof(a), "%.*s", (int)(colon - v), v);
                if (safe_atou64(a, &size) < 0 || colon[1] != '/')
                        return fail(f, EINVAL, "parse the setup", kv);
                (void)snprintf(b, sizeof(b), SBX "%s", colon + 1);
                return mount_tmpfs(b, size, "0755", true, f);
        }
        if (strncmp(kv, "link=", 5) == 0) {
                if (v[0] != '/')
                        return fail(f, EINVAL, "parse the setup", kv);
                (void)snprintf(a, sizeof(a), SBX "%.*s", (int)(colon - v), v);
                if (symlink(colon + 1, a) < 0)
                        return fail(f, errno, "create a link", a);
        }
        if (strncmp(kv, "bind=", 5) == 0) {
                if (v[0] != '/' || colon[1] != '/')
                        return fail(f, EINVAL, "parse the setup", kv);
                (void)snprintf(a, sizeof(a), SBX "%.*s", (int)(colon - v), v);
                (void)snprintf(b, sizeof(b), SBX "%s", colon + 1);
                if (mount(a, b, NULL, MS_BIND, NULL) < 0 ||
                    mount(NULL, b, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
                          NULL) < 0)
                        return fail(f, errno, "bind", b);
        }
        return 0;
}

static int setup_cgroup_root(Fail *f) {
        int r = write_string_file("/sys/fs/cgroup/cgroup.subtree_control", "+memory +pids +cpu");

        if (r < 0)
                return fail(f, -r, "enable the cgroup controllers", NULL);
        return 0;
}

static int do_setup(const void *payload, size_t len, Fail *f) {
        const char *kv;
        size_t pos = 0;
        int r;

        if (setup.done)
                return fail(f, EALREADY, "set up the sandbox", "a second SETUP");
        while ((kv = agent_payload_next(payload, len, &pos))) {
                if (!strchr(kv, '='))
                        return fail(f, EINVAL, "parse the setup", kv);
                r = setup_scalar(kv, f);
                if (r < 0)
                        return r;
        }
        r = setup_cgroup_root(f);
        if (r < 0)
                return r;
        if (mkdir_p(SBX) < 0 ||
            mount("tmpfs", SBX, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") < 0)
                return fail(f, errno, "mount the sandbox root", NULL);
        r = setup_dev(f);
        if (r < 0)
                return r;
        if (mkdir_p(SBX "/proc") < 0 ||
            mount("proc", SBX "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
                return fail(f, errno, "mount /proc", NULL);
        r = mount_tmpfs(SBX "/tmp", setup.size_tmp, "1777", false, f);
        if (r >= 0)
                r = mount_tmpfs(SBX "/root", setup.size_home, "0700", true, f);
        if (r >= 0 && setup.read_only)
                r = remount_read_only(SBX "/root", f);
        if (r < 0)
                return r;
        pos = 0;
        while ((kv = agent_payload_next(payload, len, &pos))) {
                r = setup_entry(kv, f);
                if (r < 0)
                        return r;
        }
        /* The root's own directories are fixed now. */
        if (mount("none", SBX, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
                  NULL) < 0)
                return fail(f, errno, "make the sandbox root read-only", NULL);
        r = setup_net(f);
        if (r < 0)
                return r;
        setup.done = true;
        return 0;
}

/* ---- EXEC ---- */

typedef struct Buf {
        struct Buf *next;
        size_t len, off;
        unsigned char data[];
} Buf;

/* One command, on its channel (agent-protocol.h). */
typedef struct Exec {
        uint8_t chan;
        bool builtin; /* the file operation builtin (file-op.h), not a program */
        pid_t pid;
        int out[2]; /* read ends of stdout, stderr */
        int in;     /* write end of stdin, -EBADF once closed */
        bool in_eof;
        Buf *queue;
        size_t queued;        /* stdin bytes in the queue */
        uint64_t in_unacked;  /* stdin bytes passed on or dropped, not acknowledged yet */
        uint64_t out_unacked; /* output bytes sent, not acknowledged by the host yet */
        bool exited;
        int status;
        int64_t drain_deadline; /* once exited: when to give up on its output */
        char cgroup[96];        /* the cgroup.procs file of its cgroup */
} Exec;

/* The commands running, by channel. */
static Exec *execs[AGENT_MAX_EXECS];

/* Cgroups of ended commands still being emptied (the kill works
 * asynchronously), removed when they are: a directory and until when to
 * keep trying. */
static struct {
        char dir[64];
        int64_t until;
} doomed[AGENT_MAX_EXECS];
static size_t n_doomed;

static int64_t mono_ms(void) {
        struct timespec ts;

        (void)clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void send_frame(AgentMsg type, uint8_t chan, const void *payload, size_t len) {
        if (agent_frame_write(port_fd, type, chan, payload, len) < 0)
                die("write to the host", errno);
}

static void send_error(uint8_t chan, const Fail *f) {
        if (agent_frame_write_error(port_fd, chan, f->err, f->step, f->msg) < 0)
                die("write to the host", errno);
}

static void send_le32(AgentMsg type, uint8_t chan, uint32_t v) {
        unsigned char b[4];

        agent_put_le32(b, v);
        send_frame(type, chan, b, sizeof(b));
}

/* In the command's child (spawn_command()): reports @what on @errfd and
 * exits. */
_noreturn_ static void child_fail(int errfd, int err, const char *what) {
        unsigned char b[4];

        agent_put_le32(b, (uint32_t)err);
        (void)write(errfd, b, sizeof(b));
        (void)write(errfd, what, strlen(what));
        _exit(125);
}

static void drop_privileges(int errfd) {
        struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
        struct __user_cap_data_struct data[2] = {};

        if (setgroups(0, NULL) < 0)
                child_fail(errfd, errno, "drop the supplementary groups");
        if (setresgid(setup.gid, setup.gid, setup.gid) < 0 ||
            setresuid(setup.uid, setup.uid, setup.uid) < 0)
                child_fail(errfd, errno, "change to the command's uid");
        for (int c = 0; c <= CAP_LAST_CAP; c++)
                if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL && errno != EPERM)
                        child_fail(errfd, errno, "drop the bounding set");
        (void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
        /* uid 0 (the caller was root) keeps its uid but no capability. */
        if (syscall(SYS_capset, &hdr, data) < 0)
                child_fail(errfd, errno, "drop the capabilities");
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                child_fail(errfd, errno, "set no_new_privs");
}

_noreturn_ static void child_main(Exec *x, char **argv, char **envp, const char *cwd,
                                  int pipes[3][2], int errfd) {
        char pid[32];
        int r;

        signals_reset_default();
        if (setsid() < 0)
                child_fail(errfd, errno, "create a session");
        (void)snprintf(pid, sizeof(pid), "%d", (int)getpid());
        r = write_string_file(x->cgroup, pid);
        if (r < 0)
                child_fail(errfd, -r, "enter the command's cgroup");
        if (dup2(pipes[0][0], STDIN_FILENO) < 0 || dup2(pipes[1][1], STDOUT_FILENO) < 0 ||
            dup2(pipes[2][1], STDERR_FILENO) < 0)
                child_fail(errfd, errno, "set up stdio");
        if (chroot(SBX) < 0 || chdir("/") < 0)
                child_fail(errfd, errno, "enter the sandbox root");
        drop_privileges(errfd);
        if (chdir(cwd) < 0)
                child_fail(errfd, errno, "enter the working directory");
        if (x->builtin) {
                /* Confined as a command is; its status is its errno. It
                 * runs without an exec: the agent's descriptors (the port,
                 * the other commands' pipes, its own stdin's write end)
                 * would stay open in it but for this. */
                if (close_range(3, ~0U, 0) < 0)
                        _exit(EIO);
                _exit(file_op_main(cwd, argv));
        }
        exec_or_exit(argv, envp);
}

/* Starts child_main() with vfork(): the child borrows the agent's memory
 * until its execve() (or _exit()) and the agent waits until then, so
 * neither the agent's page tables are copied nor its pages made
 * copy-on-write, and execve() has no copy to tear down: 1.5 ms of an exec
 * under TCG. child_main() never returns; of the agent's memory it changes
 * only environ (exec_or_exit() sets it), put back here, and errno, which
 * the caller reads only when vfork() failed (there was no child then).
 * SECURITY: the child shares memory with the agent only while it runs the
 * agent's own code: the command's code runs after execve(), in an address
 * space of its own. The child is a process of its own (its files, root,
 * credentials, signal handlers, session and cgroup are not the agent's),
 * and while it changes its credentials the shared memory stays as
 * non-dumpable as the agent made it. The file operation builtin runs the
 * agent's code to its end (allocating, opening files): it gets a fork()
 * and memory of its own. */
static pid_t spawn_command(Exec *x, char **argv, char **envp, const char *cwd, int pipes[3][2],
                           int errfd) {
        extern char **environ;
        char **saved = environ;
        pid_t pid = x->builtin ? fork() : vfork();

        if (pid == 0)
                child_main(x, argv, envp, cwd, pipes, errfd);
        environ = saved;
        return pid;
}

/* A command's cgroup, empty, with the limits of @memory and @pids (0: none). */
typedef struct Cgroup {
        char dir[48];
        uint64_t memory, pids;
} Cgroup;

/* The next command's cgroup, made after a command's EXIT was sent ("" when
 * there is none).
 * SECURITY: it is a new cgroup, never used: its counters (oom_kill, pids
 * max, usage_usec, memory.peak) start at zero, so an EXIT reports its own
 * command only. Nothing joins it before its command: the commands do not
 * see /sys/fs/cgroup. */
static Cgroup next_cgroup;

static int cgroup_make(Cgroup *c, Fail *f) {
        char path[96], val[32];
        int r;

        *c = (Cgroup){.memory = setup.memory, .pids = setup.pids};
        (void)snprintf(c->dir, sizeof(c->dir), "/sys/fs/cgroup/cmd-%u", ++exec_count);
        if (mkdir(c->dir, 0755) < 0)
                return fail(f, errno, "create the command's cgroup", c->dir);
        if (c->memory) {
                (void)snprintf(path, sizeof(path), "%s/memory.max", c->dir);
                (void)snprintf(val, sizeof(val), "%llu", (unsigned long long)c->memory);
                r = write_string_file(path, val);
                if (r < 0) {
                        (void)rmdir(c->dir);
                        return fail(f, -r, "set the memory limit", NULL);
                }
                (void)snprintf(path, sizeof(path), "%s/memory.swap.max", c->dir);
                (void)write_string_file(path, "0");
        }
        if (c->pids) {
                (void)snprintf(path, sizeof(path), "%s/pids.max", c->dir);
                (void)snprintf(val, sizeof(val), "%llu", (unsigned long long)c->pids);
                r = write_string_file(path, val);
                if (r < 0) {
                        (void)rmdir(c->dir);
                        return fail(f, -r, "set the pids limit", NULL);
                }
        }
        return 0;
}

/* Makes next_cgroup ready; a failure is left for cgroup_create() to
 * report. */
static void cgroup_prepare(void) {
        Fail f = {};

        if (!next_cgroup.dir[0] && cgroup_make(&next_cgroup, &f) < 0)
                next_cgroup.dir[0] = '\0';
}

/* The prepared cgroup when its limits are still the sandbox's, else a new
 * one: 0.5 ms less between EXEC and the command's start. */
static int cgroup_create(Exec *x, Fail *f) {
        Cgroup c = next_cgroup;
        int r;

        next_cgroup.dir[0] = '\0';
        if (c.dir[0] && (c.memory != setup.memory || c.pids != setup.pids)) {
                (void)rmdir(c.dir);
                c.dir[0] = '\0';
        }
        if (!c.dir[0]) {
                r = cgroup_make(&c, f);
                if (r < 0)
                        return r;
        }
        (void)snprintf(x->cgroup, sizeof(x->cgroup), "%s/cgroup.procs", c.dir);
        return 0;
}

/* "KEY VALUE" lines of a cgroup file: the value of @key, or 0. */
static uint64_t cgroup_key(const char *file, const char *key) {
        _cleanup_free_ char *text = NULL;
        size_t n = strlen(key);

        if (read_full_file(file, 65536, &text) < 0)
                return 0;
        for (char *line = text; line && *line;
             line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
                uint64_t v;
                char num[32];

                if (strncmp(line, key, n) != 0 || line[n] != ' ')
                        continue;
                (void)snprintf(num, sizeof(num), "%.*s", (int)strcspn(line + n + 1, "\n"),
                               line + n + 1);
                return safe_atou64(num, &v) < 0 ? 0 : v;
        }
        return 0;
}

/* The directory of @x's cgroup into @dir. */
static void exec_cgroup_dir(const Exec *x, char *dir, size_t size) {
        (void)snprintf(dir, size, "%.*s", (int)(strlen(x->cgroup) - strlen("/cgroup.procs")),
                       x->cgroup);
}

/* Removes the cgroups of ended commands that have emptied; gives up on
 * one after its time (it stays, empty or not). */
static void doomed_sweep(void) {
        int64_t now = mono_ms();

        for (size_t i = 0; i < n_doomed;) {
                if ((rmdir(doomed[i].dir) < 0 && errno == EBUSY) && now < doomed[i].until) {
                        i++;
                        continue;
                }
                doomed[i] = doomed[--n_doomed];
        }
}

static void stdin_drop_queue(Exec *x) {
        while (x->queue) {
                Buf *b = x->queue;

                x->queue = b->next;
                x->in_unacked += b->len - b->off;
                free(b);
        }
        x->queued = 0;
}

/* The end of @x: its EXIT (after all its output), then its cgroup and
 * the channel are freed. */
static void exec_finish(Exec *x) {
        char dir[64], path[96];
        AgentExit e = {.status = x->status};
        unsigned char buf[AGENT_EXIT_SIZE];
        _cleanup_free_ char *peak = NULL;
        uint64_t v;

        for (int i = 0; i < 2; i++)
                x->out[i] = safe_close(x->out[i]);
        x->in = safe_close(x->in);
        stdin_drop_queue(x);
        exec_cgroup_dir(x, dir, sizeof(dir));
        (void)snprintf(path, sizeof(path), "%s/memory.events", dir);
        if (cgroup_key(path, "oom_kill") > 0)
                e.flags |= AGENT_EXIT_OOM;
        (void)snprintf(path, sizeof(path), "%s/pids.events", dir);
        if (cgroup_key(path, "max") > 0)
                e.flags |= AGENT_EXIT_PIDS;
        (void)snprintf(path, sizeof(path), "%s/cpu.stat", dir);
        e.cpu_usec = cgroup_key(path, "usage_usec");
        (void)snprintf(path, sizeof(path), "%s/memory.peak", dir);
        if (read_full_file(path, 64, &peak) >= 0) {
                peak[strcspn(peak, "\n")] = '\0';
                if (safe_atou64(peak, &v) >= 0)
                        e.mem_peak_bytes = v;
        }
        agent_exit_encode(&e, buf);
        send_frame(AGENT_MSG_EXIT, x->chan, buf, sizeof(buf));
        /* Removing the cgroup and making the next one need not delay the
         * EXIT. cgroup.kill works asynchronously: the killed may still be
         * exiting, and rmdir refuses a populated cgroup (they would pile
         * up): retried for 1 s. */
        if (rmdir(dir) < 0 && errno == EBUSY && n_doomed < ELEMENTSOF(doomed)) {
                (void)snprintf(doomed[n_doomed].dir, sizeof(doomed[n_doomed].dir), "%s", dir);
                doomed[n_doomed++].until = mono_ms() + 1000;
        }
        execs[x->chan] = NULL;
        free(x);
        cgroup_prepare();
}

/* Kills everything left in the command's cgroup (daemons it started), as
 * the end of a pid namespace does in the namespace backend. */
static void exec_kill_all(Exec *x) {
        char dir[64], path[96];

        exec_cgroup_dir(x, dir, sizeof(dir));
        (void)snprintf(path, sizeof(path), "%s/cgroup.kill", dir);
        (void)write_string_file(path, "1");
}

/* Acknowledges the stdin taken, once there is enough of it to matter
 * (agent-protocol.h). */
static void stdin_ack(Exec *x) {
        if (x->in_unacked < AGENT_WINDOW / 4)
                return;
        send_le32(AGENT_MSG_ACK, x->chan, (uint32_t)x->in_unacked);
        x->in_unacked = 0;
}

static void stdin_push(Exec *x, const void *data, size_t len) {
        Buf *b, **tail;

        if (len == 0) {
                x->in_eof = true;
                if (!x->queue)
                        x->in = safe_close(x->in);
                return;
        }
        /* The host keeps to the window: this is bounded. */
        if (x->queued + len > AGENT_WINDOW)
                die("the host overran a command's stdin window", EPROTO);
        if (x->in < 0) {
                /* Nobody reads it any more: dropped, and acknowledged. */
                x->in_unacked += len;
                stdin_ack(x);
                return;
        }
        b = malloc(sizeof(Buf) + len);
        if (!b)
                die("queue a command's stdin", ENOMEM);
        *b = (Buf){.len = len};
        memcpy(b->data, data, len);
        for (tail = &x->queue; *tail; tail = &(*tail)->next)
                ;
        *tail = b;
        x->queued += len;
}

static void stdin_flush(Exec *x) {
        while (x->queue) {
                Buf *b = x->queue;
                ssize_t n = write(x->in, b->data + b->off, b->len - b->off);

                if (n < 0) {
                        if (errno == EAGAIN || errno == EINTR)
                                break;
                        /* EPIPE: the command closed its stdin. */
                        stdin_drop_queue(x);
                        x->in = safe_close(x->in);
                        break;
                }
                b->off += (size_t)n;
                x->in_unacked += (size_t)n;
                if (b->off < b->len)
                        break;
                x->queue = b->next;
                x->queued -= b->len;
                free(b);
        }
        if (!x->queue && x->in_eof)
                x->in = safe_close(x->in);
        stdin_ack(x);
}

/* One read of output stream @i, within the window. */
static void relay_output(Exec *x, int i) {
        unsigned char buf[AGENT_CHUNK];
        size_t room = (size_t)MIN((uint64_t)sizeof(buf), AGENT_WINDOW - x->out_unacked);
        ssize_t n = read(x->out[i], buf, room);

        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n <= 0) {
                x->out[i] = safe_close(x->out[i]);
                return;
        }
        x->out_unacked += (uint64_t)n;
        send_frame(i == 0 ? AGENT_MSG_STDOUT : AGENT_MSG_STDERR, x->chan, buf, (size_t)n);
}

static void reap(void) {
        int status;
        pid_t p;

        while ((p = waitpid(-1, &status, WNOHANG)) > 0)
                for (size_t c = 0; c < AGENT_MAX_EXECS; c++) {
                        Exec *x = execs[c];

                        if (!x || x->pid != p || x->exited)
                                continue;
                        x->exited = true;
                        x->status = status;
                        x->drain_deadline = mono_ms() + OUTPUT_DRAIN_MS;
                        exec_kill_all(x);
                        break;
                }
}

static void strv_free_simple(char **l) {
        for (char **p = l; p && *p; p++)
                free(*p);
        free(l);
}

static int start_exec(Exec *x, const void *payload, size_t len, Fail *f) {
        char **argv = NULL, **envp = NULL, *cwd = NULL;
        size_t na = 0, ne = 0, pos = 0;
        int pipes[3][2] = {{-1, -1}, {-1, -1}, {-1, -1}}, err[2] = {-1, -1};
        const char *s;
        unsigned char ebuf[4 + 256];
        ssize_t n;
        int r = 0;

        if (!setup.done)
                return fail(f, EPROTO, "run the command", "EXEC before SETUP");
        while ((s = agent_payload_next(payload, len, &pos))) {
                char ***v = s[0] == 'a' ? &argv : s[0] == 'e' ? &envp : NULL;
                size_t *c = s[0] == 'a' ? &na : &ne;

                if (strncmp(s, "c:", 2) == 0) {
                        free(cwd);
                        cwd = strdup(s + 2);
                        continue;
                }
                if (!v || s[1] != ':') {
                        r = fail(f, EINVAL, "parse the command", s);
                        goto out;
                }
                char **nv = realloc(*v, (*c + 2) * sizeof(char *));
                if (!nv || !(nv[*c] = strdup(s + 2))) {
                        *v = nv ? nv : *v;
                        r = fail(f, ENOMEM, "parse the command", NULL);
                        goto out;
                }
                nv[++*c] = NULL;
                *v = nv;
        }
        if (!argv || !cwd) {
                r = fail(f, EINVAL, "parse the command", "no argv or working directory");
                goto out;
        }
        if (!envp)
                envp = calloc(1, sizeof(char *));
        x->builtin = strcmp(argv[0], FILE_OP_ARGV0) == 0;
        r = cgroup_create(x, f);
        if (r < 0)
                goto out;
        for (int i = 0; i < 3; i++)
                if (pipe2(pipes[i], O_CLOEXEC) < 0) {
                        r = fail(f, errno, "create the command's pipes", NULL);
                        goto out;
                }
        if (pipe2(err, O_CLOEXEC) < 0) {
                r = fail(f, errno, "create the command's pipes", NULL);
                goto out;
        }
        x->pid = spawn_command(x, argv, envp, cwd, pipes, err[1]);
        if (x->pid < 0) {
                r = fail(f, errno, "fork the command", NULL);
                goto out;
        }
        err[1] = safe_close(err[1]);
        n = loop_read(err[0], ebuf, sizeof(ebuf) - 1);
        if (n >= 4) {
                ebuf[n] = '\0';
                (void)waitpid(x->pid, NULL, 0);
                x->pid = 0;
                r = fail(f, (int)agent_get_le32(ebuf), (const char *)ebuf + 4, cwd);
                goto out;
        }
        x->in = pipes[0][1];
        pipes[0][1] = -1;
        for (int i = 0; i < 2; i++) {
                x->out[i] = pipes[1 + i][0];
                pipes[1 + i][0] = -1;
                (void)fcntl(x->out[i], F_SETFL, O_NONBLOCK);
        }
        (void)fcntl(x->in, F_SETFL, O_NONBLOCK);
out:
        if (r < 0 && x->cgroup[0]) {
                /* Empty: the child, if there was one, is reaped. */
                x->cgroup[strlen(x->cgroup) - strlen("/cgroup.procs")] = '\0';
                (void)rmdir(x->cgroup);
        }
        for (int i = 0; i < 3; i++)
                for (int j = 0; j < 2; j++)
                        (void)safe_close(pipes[i][j]);
        (void)safe_close(err[0]);
        (void)safe_close(err[1]);
        strv_free_simple(argv);
        strv_free_simple(envp);
        free(cwd);
        return r;
}

/* EXEC on @chan: STARTED, or ERROR. */
static void handle_exec(uint8_t chan, const void *payload, size_t len) {
        Fail f = {};
        Exec *x;

        if (execs[chan]) {
                (void)fail(&f, EBUSY, "run the command", "its channel is in use");
                send_error(chan, &f);
                return;
        }
        x = malloc(sizeof(Exec));
        if (!x)
                die("start a command", ENOMEM);
        *x = (Exec){.chan = chan, .out = {-EBADF, -EBADF}, .in = -EBADF};
        if (start_exec(x, payload, len, &f) < 0) {
                free(x);
                send_error(chan, &f);
                return;
        }
        execs[chan] = x;
        send_le32(AGENT_MSG_STARTED, chan, (uint32_t)x->pid);
}

static void handle_host_frame(const AgentFrame *fr) {
        Exec *x = execs[fr->chan];
        Fail f = {};

        switch ((AgentMsg)fr->type) {
        case AGENT_MSG_SETUP:
                if (do_setup(fr->payload, fr->len, &f) < 0)
                        send_error(fr->chan, &f);
                else
                        send_frame(AGENT_MSG_READY, fr->chan, NULL, 0);
                return;
        case AGENT_MSG_EXEC:
                handle_exec(fr->chan, fr->payload, fr->len);
                return;
        case AGENT_MSG_STDIN:
                /* Frames for a channel whose EXIT is on its way: dropped. */
                if (x)
                        stdin_push(x, fr->payload, fr->len);
                return;
        case AGENT_MSG_ACK:
                if (x && fr->len == 4)
                        x->out_unacked -=
                                MIN(x->out_unacked, (uint64_t)agent_get_le32(fr->payload));
                return;
        case AGENT_MSG_PING:
                send_frame(AGENT_MSG_PONG, fr->chan, fr->payload, fr->len);
                return;
        case AGENT_MSG_SIGNAL:
                if (x && x->pid > 0 && !x->exited && fr->len == 4) {
                        int sig = (int)agent_get_le32(fr->payload);

                        if (sig > 0 && sig < NSIG)
                                (void)kill(-x->pid, sig);
                }
                return;
        case AGENT_MSG_HELLO:
        case AGENT_MSG_READY:
        case AGENT_MSG_ERROR:
        case AGENT_MSG_STARTED:
        case AGENT_MSG_STDOUT:
        case AGENT_MSG_STDERR:
        case AGENT_MSG_EXIT:
        case AGENT_MSG_PONG:
        case _AGENT_MSG_MAX:
        case _AGENT_MSG_INVALID:
        default:
                die("an unexpected frame from the host", EPROTO);
        }
}

/* Whether @x is over: exited, and its output read to the end (or given up
 * on: held open by something that escaped the kill). Its output waiting
 * for the host's acknowledgement does not count against it. */
static bool exec_over(Exec *x, int64_t now) {
        if (!x->exited)
                return false;
        if (x->out[0] < 0 && x->out[1] < 0)
                return true;
        if (x->out_unacked >= AGENT_WINDOW)
                x->drain_deadline = now + OUTPUT_DRAIN_MS;
        return now >= x->drain_deadline;
}

/* The whole frames @rd holds. */
static void handle_host_frames(AgentReader *rd) {
        AgentFrame fr;
        int r;

        while ((r = agent_reader_next(rd, &fr)) > 0)
                handle_host_frame(&fr);
        if (r < 0)
                die("a malformed frame from the host", EBADMSG);
}

/* Serves the host for good: its frames, and every command's streams. */
_noreturn_ static void serve(AgentReader *rd, int sigfd) {
        for (;;) {
                struct pollfd p[2 + 3 * AGENT_MAX_EXECS];
                uint8_t chan[ELEMENTSOF(p)], what[ELEMENTSOF(p)];
                int64_t now = mono_ms(), wait = -1;
                size_t n = 0;

                for (size_t c = 0; c < AGENT_MAX_EXECS; c++)
                        if (execs[c] && exec_over(execs[c], now))
                                exec_finish(execs[c]);
                p[n++] = (struct pollfd){.fd = port_fd, .events = POLLIN};
                p[n++] = (struct pollfd){.fd = sigfd, .events = POLLIN};
                for (size_t c = 0; c < AGENT_MAX_EXECS; c++) {
                        Exec *x = execs[c];

                        if (!x)
                                continue;
                        for (uint8_t i = 0; i < 2; i++)
                                if (x->out[i] >= 0 && x->out_unacked < AGENT_WINDOW) {
                                        chan[n] = (uint8_t)c;
                                        what[n] = i;
                                        p[n++] = (struct pollfd){.fd = x->out[i], .events = POLLIN};
                                }
                        if (x->queue && x->in >= 0) {
                                chan[n] = (uint8_t)c;
                                what[n] = 2;
                                p[n++] = (struct pollfd){.fd = x->in, .events = POLLOUT};
                        }
                        if (x->exited && (wait < 0 || x->drain_deadline - now < wait))
                                wait = MAX(x->drain_deadline - now, 0);
                }
                if (n_doomed > 0 && (wait < 0 || wait > 10))
                        wait = 10;
                if (poll(p, n, (int)wait) < 0) {
                        if (errno == EINTR)
                                continue;
                        die("poll", errno);
                }
                if (p[1].revents & POLLIN) {
                        struct signalfd_siginfo si;

                        while (read(sigfd, &si, sizeof(si)) == sizeof(si))
                                ;
                        reap();
                }
                for (size_t i = 2; i < n; i++) {
                        Exec *x = execs[chan[i]];

                        if (!p[i].revents || !x)
                                continue;
                        if (what[i] < 2)
                                relay_output(x, what[i]);
                        else
                                stdin_flush(x);
                }
                if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
                        ssize_t r = agent_reader_fill(rd, port_fd);

                        if (r == 0)
                                die("the host closed the port", EPIPE);
                        if (r < 0 && r != -EAGAIN)
                                die("read from the host", (int)-r);
                        handle_host_frames(rd);
                }
                doomed_sweep();
        }
}

int main(int argc, char **argv) {
        static AgentReader rd; /* 64 KiB: not on the stack */
        struct utsname u;
        sigset_t mask;
        int sigfd;

        if (getpid() != 1) {
                (void)fprintf(stderr,
                              "hutch-agent is the init of a hutch microVM, not a command\n");
                return 1;
        }
        mount_kernel_filesystems();
        (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        load_modules();
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        (void)sigprocmask(SIG_BLOCK, &mask, NULL);
        sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (sigfd < 0)
                die("signalfd", errno);
        port_fd = open_port();
        if (port_fd < 0)
                die("open the virtio port " AGENT_PORT_NAME, -port_fd);
        (void)uname(&u);
        send_frame(AGENT_MSG_HELLO, 0, u.release, strlen(u.release));

        /* No host on the other end (a template waiting to be saved sees
         * none after it): wait for one. */
        for (;;) {
                struct pollfd p = {.fd = port_fd, .events = POLLIN};
                ssize_t n;

                if (poll(&p, 1, -1) < 0 && errno != EINTR)
                        die("poll", errno);
                n = agent_reader_fill(&rd, port_fd);
                if (n > 0)
                        break;
                if (n < 0 && n != -EAGAIN)
                        die("read from the host", (int)-n);
                if (n == 0)
                        sleep_ms(5);
        }
        handle_host_frames(&rd);
        serve(&rd, sigfd);
}
