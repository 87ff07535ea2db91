/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch-agent's SETUP (agent-protocol.h): the clock, the seed, the
 * command's root under SBX (9p shares, tmpfs, a minimal /dev, the masks
 * over the host's secrets), its cgroup root and the NIC. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/openat2.h>
#include <linux/random.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent-protocol.h"
#include "agent.h"
#include "fd-util.h"
#include "macro.h"
#include "parse-util.h"

#define MAX_SETUP_MOUNTS 32
/* The most ids a command's user namespace maps (USERNS_RANGE_SIZE). */
#define MAX_SETUP_IDS 65536U

SandboxNs sandbox_ns = {.user = -EBADF, .mnt = -EBADF, .ipc = -EBADF, .uts = -EBADF};

Setup setup = {
        .uid = 65534,
        .gid = 65534,
        .ids = 1,
        .size_tmp = 1024ULL << 20,
        .size_home = 1024ULL << 20,
        .size_shm = 64ULL << 20,
        .size_workspace = 4096ULL << 20,
};

int fail(Fail *f, int err, const char *step, const char *detail) {
        f->err = err > 0 ? err : EIO;
        (void)snprintf(f->step, sizeof(f->step), "%s", step);
        (void)snprintf(f->msg, sizeof(f->msg), "%.300s%s%s", detail ? detail : "",
                       detail ? ": " : "", strerror(f->err));
        return -f->err;
}

/* One directory of mkdir_p(). SECURITY: an image's root (root=) is the
 * image's tree, not trusted: what is there below SBX must be a directory,
 * never a symlink, which the agent (not chrooted) would follow into its
 * own tree with the mount made there (-ENOTDIR). */
static int mkdir_one(const char *path) {
        struct stat st;

        if (mkdir(path, 0755) == 0)
                return 0;
        if (errno != EEXIST)
                return negative_errno();
        if (!setup.root_tag[0] || strncmp(path, SBX "/", sizeof(SBX)) != 0)
                return 0;
        if (lstat(path, &st) < 0)
                return negative_errno();
        return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

/* mkdir -p of @path (absolute), each new directory 0755. */
static int mkdir_p(const char *path) {
        char buf[4096];
        int r;

        if (strlen(path) >= sizeof(buf))
                return -ENAMETOOLONG;
        strcpy(buf, path);
        for (char *p = buf + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = '\0';
                r = mkdir_one(buf);
                if (r < 0)
                        return r;
                *p = '/';
        }
        return mkdir_one(buf);
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
                        if (fchown(t, setup.uid, setup.gid) < 0)
                                return negative_errno();
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
                        if (fchown(t, setup.uid, setup.gid) < 0)
                                return negative_errno();
                } else if (S_ISLNK(st.st_mode)) {
                        char target[4096];
                        ssize_t n = readlinkat(src, de->d_name, target, sizeof(target) - 1);

                        if (n < 0)
                                return negative_errno();
                        target[n] = '\0';
                        if (symlinkat(target, dst, de->d_name) < 0)
                                return negative_errno();
                        if (fchownat(dst, de->d_name, setup.uid, setup.gid, AT_SYMLINK_NOFOLLOW) <
                            0)
                                return negative_errno();
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
        r = mount_tmpfs(SBX "/dev/shm", setup.size_shm, "1777", true, f);
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

/* Lowercase hex only: what the host writes. */
static int hex_digit_lower(char c) {
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
                int hi = hex_digit_lower(hex[2 * i]), lo = hex_digit_lower(hex[2 * i + 1]);

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
        if (strncmp(kv, "root=", 5) == 0) {
                if (!v[0] || strlen(v) >= sizeof(setup.root_tag) || strchr(v, ','))
                        return fail(f, EINVAL, "parse the setup", kv);
                (void)snprintf(setup.root_tag, sizeof(setup.root_tag), "%s", v);
                return 0;
        }
        if (strncmp(kv, "caps=", 5) == 0) {
                if (strcmp(v, "package") != 0)
                        return fail(f, EINVAL, "parse the setup", kv);
                setup.package_caps = true;
                return 0;
        }
        if (strncmp(kv, "readonly=", 9) == 0) {
                setup.read_only = strcmp(v, "1") == 0;
                return 0;
        }
        if (strncmp(kv, "ids=", 4) == 0) {
                r = parse_u64_key(v, &u, f);
                if (r < 0 || u == 0 || u > MAX_SETUP_IDS)
                        return r < 0 ? r : fail(f, EINVAL, "parse the setup", kv);
                setup.ids = (uint32_t)u;
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
            strncmp(kv, "mask=", 5) == 0 || strncmp(kv, "cabind=", 7) == 0)
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

/* The most an image's CA bundle and the sandbox CA may be together: the
 * namespace backend's tmpfs for them (rootfs.c's setup_ca_bundle()). */
#define CA_BUNDLE_MAX (4U << 20)
#define CA_BUNDLE_COMBINED "/run/hutch-ca-bundle.pem"

/* Writes the image's bundle (@image, an O_PATH descriptor of a regular
 * file), then @src (the sandbox CA), to CA_BUNDLE_COMBINED, 0444, in the
 * agent's own /run: the namespace backend's combined bundle for an image
 * (copy_system_ca_bundle(), then rootfs_install_ca_bundle()). */
static int ca_bundle_combine(int image, const char *src, Fail *f) {
        _cleanup_free_ char *own = NULL, *ca = NULL;
        _cleanup_close_ int in = -EBADF, out = -EBADF;
        size_t n_own = 0, n_ca = 0;
        char path[64];
        int r;

        /* The same file, now for reading (O_NONBLOCK: nothing holds the
         * agent, though it is a regular file). */
        (void)snprintf(path, sizeof(path), "/proc/self/fd/%d", image);
        in = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (in < 0)
                return fail(f, errno, "read the image's CA bundle", NULL);
        r = read_full_fd(in, CA_BUNDLE_MAX, &own, &n_own);
        if (r < 0)
                return fail(f, -r, "read the image's CA bundle", NULL);
        r = read_full_file_at(AT_FDCWD, src, O_NOFOLLOW, CA_BUNDLE_MAX, &ca);
        if (r < 0)
                return fail(f, -r, "read the sandbox CA", src);
        n_ca = strlen(ca);
        if (n_own + 1 + n_ca > CA_BUNDLE_MAX)
                return fail(f, EFBIG, "combine the CA bundle", "the image's bundle is too big");
        out = open(CA_BUNDLE_COMBINED, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
        if (out < 0)
                return fail(f, errno, "create", CA_BUNDLE_COMBINED);
        r = loop_write(out, own, n_own);
        if (r >= 0 && n_own > 0 && own[n_own - 1] != '\n')
                r = loop_write(out, "\n", 1);
        if (r >= 0)
                r = loop_write(out, ca, n_ca);
        if (r < 0)
                return fail(f, -r, "write", CA_BUNDLE_COMBINED);
        return 0;
}

/* A read-only bind of CA_BUNDLE_COMBINED over @to_fd (with @to_path
 * relative to it; "" for @to_fd itself). */
static int ca_bundle_bind(int to_fd, const char *to_path, const char *what, Fail *f) {
        struct mount_attr attr = {
                .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        };
        _cleanup_close_ int tree = -EBADF;

        tree = open_tree(AT_FDCWD, CA_BUNDLE_COMBINED,
                         OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
        if (tree < 0 || mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0 ||
            move_mount(tree, "", to_fd, to_path,
                       MOVE_MOUNT_F_EMPTY_PATH | (to_path[0] ? 0 : MOVE_MOUNT_T_EMPTY_PATH)) < 0)
                return fail(f, errno, "bind the CA bundle over", what);
        return 0;
}

/* cabind=SRC:DST (repeatable; an image's root only): the first DST that
 * is a regular file in the command's root is the image's CA bundle
 * (the host's table, rootfs_image_ca_bundles, in its order; "a regular
 * file" is the namespace backend's rule, an lstat() in the image's root);
 * the others are not looked at. Its bytes and SRC's (the sandbox CA, on
 * the CA share) make the combined bundle, bound read-only over DST and
 * over SRC, as on the namespace backend; with no such DST, SRC stays the
 * sandbox CA alone, as there.
 * SECURITY: the image's tree is not trusted and the agent is not
 * chrooted: DST is resolved inside SBX (RESOLVE_IN_ROOT: its symlinks
 * and ".." never leave the root; no magic links), its last component is
 * never followed (a symlink is no regular file: skipped), and it is read
 * and bound through the descriptor found, never a path walked again. */
static int setup_ca_bind(const char *v, const char *colon, Fail *f) {
        static bool bound;
        struct open_how how = {
                .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
        };
        _cleanup_close_ int root = -EBADF, target = -EBADF;
        char src[4096];
        struct stat st;
        int r;

        if (!setup.root_tag[0] || v[0] != '/' || colon[1] != '/' ||
            (size_t)(colon - v) >= sizeof(src) - sizeof(SBX))
                return fail(f, EINVAL, "parse the setup", v);
        if (bound)
                return 0;
        root = open(SBX, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return fail(f, errno, "open the sandbox root", NULL);
        /* EAGAIN: a rename raced a ".." (nothing else runs in the root). */
        for (unsigned tries = 0; tries < 8; tries++) {
                target = (int)syscall(SYS_openat2, root, colon + 2, &how, sizeof(how));
                if (target >= 0 || errno != EAGAIN)
                        break;
        }
        /* As lstat() failing in the namespace backend: not this one. */
        if (target < 0 || fstat(target, &st) < 0 || !S_ISREG(st.st_mode))
                return 0;
        (void)snprintf(src, sizeof(src), SBX "%.*s", (int)(colon - v), v);
        r = ca_bundle_combine(target, src, f);
        if (r >= 0)
                r = ca_bundle_bind(target, "", colon + 1, f);
        if (r >= 0)
                r = ca_bundle_bind(AT_FDCWD, src, src, f);
        if (r < 0)
                return r;
        bound = true;
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
        if (strncmp(kv, "cabind=", 7) == 0)
                return setup_ca_bind(v, colon, f);
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

/* procfs entries no command may write, whatever its ids: the namespace
 * backend's list (rootfs.c's proc_readonly). */
static const char *const proc_readonly[] = {
        "/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs",
};

/* In the sandbox's init (pid 1 of the sandbox's pid namespace, in mount,
 * IPC and UTS namespaces of its own): a /proc of that pid namespace over
 * the root's /proc, with proc_readonly read-only. */
static int sandbox_init_mounts(void) {
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return negative_errno();
        if (mount("proc", SBX "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
                return negative_errno();
        for (size_t i = 0; i < ELEMENTSOF(proc_readonly); i++) {
                char path[64];

                (void)snprintf(path, sizeof(path), SBX "%s", proc_readonly[i]);
                if (mount(path, path, NULL, MS_BIND | MS_REC, NULL) < 0) {
                        if (errno == ENOENT)
                                continue;
                        return negative_errno();
                }
                if (mount(NULL, path, NULL,
                          MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                          NULL) < 0)
                        return negative_errno();
        }
        return 0;
}

/* The sandbox's init: mounts its /proc, says how that went on @report,
 * then holds the pid namespace and reaps what is orphaned in it, as
 * nobody, with no capability and none of the agent's descriptors. */
_noreturn_ static void sandbox_init_main(int report) {
        unsigned char b[4];
        sigset_t mask;
        int r;

        r = sandbox_init_mounts();
        agent_put_le32(b, (uint32_t)(r < 0 ? -r : 0));
        if (loop_write(report, b, sizeof(b)) < 0 || r < 0)
                _exit(1);
        (void)close_range(3, ~0U, 0);
        if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
            setresuid(65534, 65534, 65534) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                _exit(1);
        /* SIGCHLD stays blocked (the agent's mask): waited for here. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        (void)sigprocmask(SIG_BLOCK, &mask, NULL);
        for (;;) {
                siginfo_t si;

                while (waitpid(-1, NULL, WNOHANG) > 0)
                        ;
                (void)sigwaitinfo(&mask, &si);
        }
}

/* A process in a new user namespace whose ids 0..ids-1 are setup.uid..
 * and setup.gid..: that namespace, in sandbox_ns.user. */
static int userns_make(Fail *f) {
        char path[64], map[64];
        int hold[2], r = 0;
        pid_t pid;

        if (pipe2(hold, O_CLOEXEC) < 0)
                return fail(f, errno, "create the sandbox's user namespace", NULL);
        pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, 0);
        if (pid == 0) {
                char c;

                (void)close(hold[1]);
                /* Until the pipe's end (EOF), through EINTR. */
                (void)loop_read(hold[0], &c, 1);
                _exit(0);
        }
        (void)close(hold[0]);
        if (pid < 0) {
                (void)close(hold[1]);
                return fail(f, errno, "create the sandbox's user namespace", NULL);
        }
        (void)snprintf(map, sizeof(map), "0 %u %u\n", (unsigned)setup.uid, setup.ids);
        (void)snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
        r = write_string_file(path, map);
        if (r >= 0) {
                (void)snprintf(map, sizeof(map), "0 %u %u\n", (unsigned)setup.gid, setup.ids);
                (void)snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)pid);
                r = write_string_file(path, map);
        }
        if (r >= 0) {
                (void)snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
                sandbox_ns.user = open(path, O_RDONLY | O_CLOEXEC);
                if (sandbox_ns.user < 0)
                        r = negative_errno();
        }
        (void)close(hold[1]);
        (void)waitpid(pid, NULL, 0);
        if (r < 0)
                return fail(f, -r, "write the sandbox's id maps", map);
        return 0;
}

/* SECURITY (issue 15, item 5; issue 26): the sandbox's namespaces. Its
 * init is pid 1 of a new pid namespace, which the agent makes its
 * children's: a command sees the sandbox's processes only, never the
 * agent's /proc/1 (its descriptors: the host's port). It has mount, IPC
 * and UTS namespaces of its own (its /proc, read-only where it matters),
 * which every command joins, and the user namespace whose root the
 * command is (userns_make()). */
static int setup_namespaces(Fail *f) {
        static const struct {
                const char *name;
                int *fd;
        } ns[] = {
                {"mnt", &sandbox_ns.mnt},
                {"ipc", &sandbox_ns.ipc},
                {"uts", &sandbox_ns.uts},
        };
        _cleanup_close_ int pid_ns = -EBADF;
        unsigned char b[4];
        char path[64];
        int report[2];
        pid_t pid;
        ssize_t n;
        int r;

        r = userns_make(f);
        if (r < 0)
                return r;
        if (pipe2(report, O_CLOEXEC) < 0)
                return fail(f, errno, "start the sandbox's init", NULL);
        pid = (pid_t)syscall(SYS_clone,
                             CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | SIGCHLD,
                             NULL, NULL, NULL, 0);
        if (pid == 0) {
                (void)close(report[0]);
                sandbox_init_main(report[1]);
        }
        (void)close(report[1]);
        if (pid < 0) {
                (void)close(report[0]);
                return fail(f, errno, "start the sandbox's init", NULL);
        }
        n = loop_read(report[0], b, sizeof(b));
        (void)close(report[0]);
        if (n != (ssize_t)sizeof(b) || agent_get_le32(b) != 0) {
                (void)waitpid(pid, NULL, 0);
                return fail(f, n == (ssize_t)sizeof(b) ? (int)agent_get_le32(b) : EIO,
                            "mount the sandbox's /proc", NULL);
        }
        for (size_t i = 0; i < ELEMENTSOF(ns); i++) {
                (void)snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)pid, ns[i].name);
                *ns[i].fd = open(path, O_RDONLY | O_CLOEXEC);
                if (*ns[i].fd < 0)
                        return fail(f, errno, "open the sandbox's namespaces", path);
        }
        (void)snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
        pid_ns = open(path, O_RDONLY | O_CLOEXEC);
        if (pid_ns < 0 || setns(pid_ns, CLONE_NEWPID) < 0)
                return fail(f, errno, "enter the sandbox's pid namespace", NULL);
        return 0;
}

static int setup_cgroup_root(Fail *f) {
        int r = write_string_file("/sys/fs/cgroup/cgroup.subtree_control", "+memory +pids +cpu");

        if (r < 0)
                return fail(f, -r, "enable the cgroup controllers", NULL);
        return 0;
}

int do_setup(const void *payload, size_t len, Fail *f) {
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
        /* SECURITY: no id of the command's is one the guest kernel treats
         * as privileged (issue 26). */
        if (setup.uid == 0 || setup.gid == 0 || setup.uid > UINT32_MAX - setup.ids ||
            setup.gid > UINT32_MAX - setup.ids)
                return fail(f, EINVAL, "parse the setup", "the command's ids");
        r = setup_cgroup_root(f);
        if (r < 0)
                return r;
        /* An image's root is its share (writable unless --read-only);
         * the host base's a tmpfs of the agent's. */
        if (setup.root_tag[0]) {
                r = mount_9p(setup.root_tag, SBX, !setup.read_only, f);
                if (r < 0)
                        return r;
        } else if (mkdir_p(SBX) < 0 ||
                   mount("tmpfs", SBX, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") < 0)
                return fail(f, errno, "mount the sandbox root", NULL);
        r = setup_dev(f);
        if (r < 0)
                return r;
        /* Its /proc is the sandbox init's (setup_namespaces()). */
        if (mkdir_p(SBX "/proc") < 0)
                return fail(f, errno, "create a mount point", SBX "/proc");
        r = mount_tmpfs(SBX "/tmp", setup.size_tmp, "1777", true, f);
        /* An image's /root is the image's (the sandbox's upper). */
        if (r >= 0 && !setup.root_tag[0])
                r = mount_tmpfs(SBX "/root", setup.size_home, "0700", true, f);
        if (r >= 0 && setup.read_only && !setup.root_tag[0])
                r = remount_read_only(SBX "/root", f);
        if (r < 0)
                return r;
        pos = 0;
        while ((kv = agent_payload_next(payload, len, &pos))) {
                r = setup_entry(kv, f);
                if (r < 0)
                        return r;
        }
        /* The root's own directories are fixed now (an image's root is
         * the sandbox's: read-only with --read-only only). */
        if (!setup.root_tag[0] &&
            mount("none", SBX, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
                  NULL) < 0)
                return fail(f, errno, "make the sandbox root read-only", NULL);
        r = setup_net(f);
        if (r < 0)
                return r;
        r = setup_namespaces(f);
        if (r < 0)
                return r;
        setup.done = true;
        return 0;
}
