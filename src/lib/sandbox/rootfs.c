/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "copy.h"
#include "fd-util.h"
#include "macro.h"
#include "net/dns-table.h"
#include "ns/landlock.h"
#include "ns/mount-util.h"
#include "sandbox/container.h"
#include "sandbox/rootfs.h"
#include "sandbox/secrets.h"
#include "strv.h"

#define OLDROOT "/oldroot"
#define MASK_FILE "/.hutch-empty"
#define ROOT_TMPFS_SIZE (8ULL << 20)
#define DEV_TMPFS_SIZE (1ULL << 20)

const char *const rootfs_system_dirs[] = {
        "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", NULL,
};

const char *const rootfs_image_ca_bundles[] = {
        "/etc/ssl/certs/ca-certificates.crt", /* Debian, Ubuntu, Alpine, Arch */
        "/etc/pki/tls/certs/ca-bundle.crt",   /* Fedora, RHEL */
        "/etc/ssl/cert.pem",                  /* Alpine, macOS-style */
        "/etc/ssl/ca-bundle.pem",             /* openSUSE */
        NULL,
};

const char *const rootfs_persistent_dirs[] = {
        POLICY_SANDBOX_HOME, "/var", "/opt", "/srv", "/home", "/mnt", NULL,
};

#define STAGE ROOTFS_STAGE
#define OVERLAY_OPTS_MAX 8192

/* SECURITY: files and folders of the host's /etc that hold credentials. They
 * are covered by an empty read-only file or folder, whatever their modes. */
static const char *const masked_files[] = {
        "/etc/shadow",  "/etc/shadow-",          "/etc/gshadow",     "/etc/gshadow-",
        "/etc/sudoers", "/etc/security/opasswd", "/etc/krb5.keytab", NULL,
};
static const char *const masked_dirs[] = {
        "/etc/sudoers.d",
        "/etc/ssl/private",
        NULL,
};

/* Device nodes bound from the host's /dev: the minimal set programs expect. */
static const char *const dev_nodes[] = {
        "null", "zero", "full", "random", "urandom", "tty", NULL,
};

/* procfs entries that must not be writable from inside even where the
 * kernel would allow a namespaced root to write them. */
static const char *const proc_readonly[] = {
        "/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs", NULL,
};

static int fail(HutchError *reterr, int r, const char *what, const char *path) {
        return hutch_error_set(reterr, -r, "failed to %s '%s': %s", what, path, strerror(-r));
}

static int pivot_root_syscall(const char *new_root, const char *put_old) {
        if (syscall(SYS_pivot_root, new_root, put_old) < 0)
                return negative_errno();
        return 0;
}

/* Where pivot_root(2) is refused (the default seccomp profiles of Docker and
 * Podman, an initramfs root): the host's root is bound at OLDROOT, the
 * sandbox root tmpfs (the working directory) is moved over "/" and entered
 * with chroot, as runc's no-pivot mode does. The host's root mount then
 * stays in the mount namespace beneath the tmpfs, reachable by path only
 * through OLDROOT (unmounted at the end of rootfs_setup()).
 * SECURITY: this is as strong as the pivot for the command, because
 * everything that could walk out of a chroot or uncover the mount is gone
 * before it runs: capabilities are dropped (no CAP_SYS_CHROOT, no
 * CAP_SYS_ADMIN) under no_new_privs, and the seccomp filter denies chroot,
 * pivot_root, mount, umount2, move_mount, open_tree, unshare, setns,
 * namespace clones and clone3 (so no new user namespace gives them back);
 * init holds no descriptor of the host's tree once the tree is built, and
 * every process of the sandbox descends from the chrooted init. */
static int enter_by_move(const char *base, HutchError *reterr) {
        char staged[64];

        if (strcmp(base, "/") == 0)
                return hutch_error_set(reterr, EPERM,
                                       "pivot_root is refused and there is no directory to "
                                       "stage the sandbox root in");
        if (mount("/", "oldroot", NULL, MS_BIND | MS_REC, NULL) < 0)
                return fail(reterr, negative_errno(), "bind the host root at", OLDROOT);
        /* The copy holds the root tmpfs itself, over the host's @base: take
         * it off so that OLDROOT shows the host's @base as a pivot would. */
        (void)snprintf(staged, sizeof(staged), "oldroot%s", base);
        if (umount2(staged, MNT_DETACH) < 0)
                return fail(reterr, negative_errno(), "uncover", base);
        if (mount(".", "/", NULL, MS_MOVE, NULL) < 0)
                return fail(reterr, negative_errno(), "move the sandbox root over", "/");
        if (chroot(".") < 0)
                return fail(reterr, negative_errno(), "enter the sandbox root", "/");
        return 0;
}

/* Mounts the sandbox root tmpfs on a host directory and pivots into it, so
 * that the host's root stays reachable at OLDROOT while the tree is built.
 * Where pivot_root is refused, enters it with enter_by_move() instead and
 * sets *@ret_moved. */
static int enter_staging_root(bool *ret_moved, HutchError *reterr) {
        static const char *const bases[] = {"/tmp", "/mnt", "/var/tmp", "/run", "/", NULL};
        const char *base = NULL;
        int r;

        /* SECURITY: nothing mounted here may propagate back to the host. */
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return fail(reterr, negative_errno(), "make private", "/");

        for (size_t i = 0; bases[i]; i++) {
                struct stat st;

                if (stat(bases[i], &st) == 0 && S_ISDIR(st.st_mode)) {
                        base = bases[i];
                        break;
                }
        }
        if (!base)
                return hutch_error_set(reterr, ENOENT, "no directory to stage the sandbox root");

        r = mount_tmpfs(base, ROOT_TMPFS_SIZE, 0755, MS_NOSUID | MS_NODEV);
        if (r < 0)
                return fail(reterr, r, "mount the root tmpfs on", base);
        if (chdir(base) < 0)
                return fail(reterr, negative_errno(), "enter", base);
        if (mkdir("oldroot", 0700) < 0)
                return fail(reterr, negative_errno(), "create", OLDROOT);
        r = pivot_root_syscall(".", "oldroot");
        *ret_moved = r == -EPERM || r == -EINVAL;
        if (*ret_moved)
                r = enter_by_move(base, reterr);
        else if (r < 0)
                return fail(reterr, r, "pivot into the sandbox root from", base);
        if (r < 0)
                return r;
        if (chdir("/") < 0)
                return fail(reterr, negative_errno(), "enter", "/");
        return 0;
}

static int host_path(const char *path, char *buf, size_t size) {
        int n = snprintf(buf, size, OLDROOT "%s", path);

        if (n < 0 || (size_t)n >= size)
                return -ENAMETOOLONG;
        return 0;
}

static int bind_readonly(const char *source, const char *target, HutchError *reterr) {
        int r;

        r = mount_bind(source, target);
        if (r < 0)
                return fail(reterr, r, "bind-mount", source);
        r = mount_set_attr(target, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, true);
        if (r < 0)
                return fail(reterr, r, "make read-only", target);
        return 0;
}

/* Creates the directory @path for a mount point of hutch's, or accepts one
 * that is there already (an image's root has most of them).
 * SECURITY: the image is not trusted: what is there must be a directory,
 * never a symlink, which would put the mount somewhere else (the host's
 * root is still mounted at OLDROOT while the tree is built). */
static int make_dir(const char *path, mode_t mode, HutchError *reterr) {
        struct stat st;

        if (mkdir(path, mode) == 0)
                return 0;
        if (errno != EEXIST)
                return fail(reterr, negative_errno(), "create", path);
        if (lstat(path, &st) < 0)
                return fail(reterr, negative_errno(), "inspect", path);
        if (!S_ISDIR(st.st_mode))
                return hutch_error_set(reterr, ENOTDIR,
                                       "the image's '%s' is not a directory (hutch mounts its own "
                                       "there)",
                                       path);
        return 0;
}

/* Binds one system directory read-only, or recreates it as the same
 * symlink (merged /usr: /bin -> usr/bin). A directory the host lacks is
 * skipped. */
static int setup_system_dir(const char *dir, HutchError *reterr) {
        char src[4096], target[4096];
        struct stat st;
        ssize_t n;
        int r;

        r = host_path(dir, src, sizeof(src));
        if (r < 0)
                return fail(reterr, r, "resolve", dir);
        if (lstat(src, &st) < 0) {
                if (errno == ENOENT)
                        return 0;
                return fail(reterr, negative_errno(), "inspect", dir);
        }
        if (S_ISLNK(st.st_mode)) {
                n = readlink(src, target, sizeof(target) - 1);
                if (n < 0)
                        return fail(reterr, negative_errno(), "read symlink", dir);
                target[n] = '\0';
                if (symlink(target, dir) < 0)
                        return fail(reterr, negative_errno(), "create symlink", dir);
                return 0;
        }
        if (!S_ISDIR(st.st_mode))
                return 0;
        if (mkdir(dir, 0755) < 0)
                return fail(reterr, negative_errno(), "create", dir);
        return bind_readonly(src, dir, reterr);
}

/* @path is a regular file (rootfs_masked_paths() checked). */
static int mask_file(const char *path, HutchError *reterr) {
        int r;

        r = mount_bind(MASK_FILE, path);
        if (r < 0)
                return fail(reterr, r, "mask", path);
        r = mount_set_attr(path, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false);
        if (r < 0)
                return fail(reterr, r, "make read-only", path);
        return 0;
}

/* @path is a directory (rootfs_masked_paths() checked). */
static int mask_dir(const char *path, HutchError *reterr) {
        int r;

        r = mount_tmpfs(path, 4096, 0755, MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY);
        if (r < 0)
                return fail(reterr, r, "mask", path);
        return 0;
}

static int add_mask(char ***l, char kind, const char *path) {
        char *e;

        if (asprintf(&e, "%c:%s", kind, path) < 0)
                return -ENOMEM;
        return strv_push_take(l, e);
}

int rootfs_masked_paths(char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        struct stat st;
        int r;

        for (size_t i = 0; masked_files[i]; i++)
                if (lstat(masked_files[i], &st) == 0 && S_ISREG(st.st_mode)) {
                        r = add_mask(&l, 'f', masked_files[i]);
                        if (r < 0)
                                return r;
                }
        for (size_t i = 0; masked_dirs[i]; i++)
                if (lstat(masked_dirs[i], &st) == 0 && S_ISDIR(st.st_mode)) {
                        r = add_mask(&l, 'd', masked_dirs[i]);
                        if (r < 0)
                                return r;
                }
        /* SECURITY: the host's SSH keys (ssh_host_*_key and friends). */
        d = opendir("/etc/ssh");
        while (d && (de = readdir(d))) {
                char path[512];

                if (!strstr(de->d_name, "key"))
                        continue;
                (void)snprintf(path, sizeof(path), "/etc/ssh/%s", de->d_name);
                if (lstat(path, &st) == 0 && S_ISREG(st.st_mode)) {
                        r = add_mask(&l, 'f', path);
                        if (r < 0)
                                return r;
                }
        }
        *ret = TAKE_PTR(l);
        return 0;
}

static int setup_etc_masks(HutchError *reterr) {
        _cleanup_strv_free_ char **masks = NULL;
        int fd, r;

        fd = open(MASK_FILE, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
        if (fd < 0)
                return fail(reterr, negative_errno(), "create", MASK_FILE);
        (void)close(fd);
        /* The sandbox's /etc is the host's here: the same list. */
        r = rootfs_masked_paths(&masks);
        if (r < 0)
                return fail(reterr, r, "list the files to hide in", "/etc");
        STRV_FOREACH(m, masks) {
                r = (*m)[0] == 'f' ? mask_file(*m + 2, reterr) : mask_dir(*m + 2, reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The kernel refuses a new procfs in a user namespace where the visible
 * one has over-mounted parts (a container's masked /proc paths). With
 * --allow-degraded the container's own /proc is bound instead,
 * recursively (its masks are locked to it) and read-only: the sandbox
 * then sees the processes of the container's pid namespace (their pids,
 * cmdlines and stat files) besides its own, and the container's masks
 * stay. SECURITY: their /proc/PID/root, cwd, fd, environ and mem need
 * ptrace access, which landlock denies to the sandbox for every process
 * outside it (even one of the same uid), so this mode needs landlock and
 * is refused without it. Returns 1 when it bound the container's /proc. */
static int setup_host_proc(const RootfsConfig *c, int mount_errno, HutchError *reterr) {
        const char *fix = container_fix(c->container, CONTAINER_NEED_PROCFS);
        int r;

        if (mount_errno != EPERM || !c->allow_host_proc)
                return hutch_error_set(
                        reterr, mount_errno,
                        "failed to mount '/proc': %s (parts of /proc are masked, as in a "
                        "container%s%s; or --allow-degraded: docs/containers.md)",
                        strerror(mount_errno), fix ? "; fix: " : "", fix ?: "");
        if (landlock_get_abi() < 0)
                return hutch_error_set(reterr, mount_errno,
                                       "failed to mount '/proc': %s, and the container's /proc "
                                       "cannot stand in for it without landlock "
                                       "(docs/containers.md)",
                                       strerror(mount_errno));
        if (mount(OLDROOT "/proc", "/proc", NULL, MS_BIND | MS_REC, NULL) < 0)
                return fail(reterr, negative_errno(), "bind-mount", OLDROOT "/proc");
        r = mount_set_attr(
                "/proc",
                MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, true);
        if (r < 0)
                return fail(reterr, r, "make read-only", "/proc");
        return 1;
}

static int setup_proc(const RootfsConfig *c, HutchError *reterr) {
        int r;

        r = make_dir("/proc", 0555, reterr);
        if (r < 0)
                return r;
        if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
                return setup_host_proc(c, errno, reterr);
        for (size_t i = 0; proc_readonly[i]; i++) {
                if (access(proc_readonly[i], F_OK) < 0)
                        continue;
                r = mount_bind(proc_readonly[i], proc_readonly[i]);
                if (r < 0)
                        return fail(reterr, r, "bind-mount", proc_readonly[i]);
                r = mount_set_attr(proc_readonly[i], MOUNT_ATTR_RDONLY, true);
                if (r < 0)
                        return fail(reterr, r, "make read-only", proc_readonly[i]);
        }
        return 0;
}

static uint64_t tmpfs_size_for(const Policy *p, const char *path, uint64_t fallback) {
        for (size_t i = 0; i < p->n_tmpfs; i++)
                if (strcmp(p->tmpfs[i].path, path) == 0)
                        return p->tmpfs[i].size;
        return fallback;
}

static int setup_dev(const Policy *p, HutchError *reterr) {
        static const char *const links[][2] = {
                {"/proc/self/fd", "/dev/fd"},       {"/proc/self/fd/0", "/dev/stdin"},
                {"/proc/self/fd/1", "/dev/stdout"}, {"/proc/self/fd/2", "/dev/stderr"},
                {"pts/ptmx", "/dev/ptmx"},
        };
        int fd, r;

        r = make_dir("/dev", 0755, reterr);
        if (r < 0)
                return r;
        r = mount_tmpfs("/dev", DEV_TMPFS_SIZE, 0755, MS_NOSUID | MS_NOEXEC);
        if (r < 0)
                return fail(reterr, r, "mount", "/dev");

        for (size_t i = 0; dev_nodes[i]; i++) {
                char src[64], dst[64];

                (void)snprintf(src, sizeof(src), OLDROOT "/dev/%s", dev_nodes[i]);
                (void)snprintf(dst, sizeof(dst), "/dev/%s", dev_nodes[i]);
                fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY,
                          0444);
                if (fd < 0)
                        return fail(reterr, negative_errno(), "create", dst);
                (void)close(fd);
                r = mount_bind(src, dst);
                if (r < 0)
                        return fail(reterr, r, "bind-mount", src);
        }

        if (mkdir("/dev/pts", 0755) < 0)
                return fail(reterr, negative_errno(), "create", "/dev/pts");
        if (mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
                  "newinstance,ptmxmode=0666,mode=0620") < 0)
                return fail(reterr, negative_errno(), "mount", "/dev/pts");

        if (mkdir("/dev/shm", 01777) < 0)
                return fail(reterr, negative_errno(), "create", "/dev/shm");
        r = mount_tmpfs("/dev/shm", tmpfs_size_for(p, "/dev/shm", POLICY_DEFAULT_SHM_SIZE), 01777,
                        MS_NOSUID | MS_NODEV);
        if (r < 0)
                return fail(reterr, r, "mount", "/dev/shm");

        for (size_t i = 0; i < ELEMENTSOF(links); i++)
                if (symlink(links[i][0], links[i][1]) < 0)
                        return fail(reterr, negative_errno(), "create symlink", links[i][1]);

        /* The /dev tmpfs itself is read-only; its bound nodes and submounts
         * keep their own flags. */
        r = mount_set_attr("/dev", MOUNT_ATTR_RDONLY, false);
        if (r < 0)
                return fail(reterr, r, "make read-only", "/dev");
        return 0;
}

static int stage_dir(const char *name, char *buf, size_t size, HutchError *reterr) {
        int n = snprintf(buf, size, STAGE "/%s", name);

        if (n < 0 || (size_t)n >= size)
                return fail(reterr, -ENAMETOOLONG, "create", name);
        if (mkdir(buf, 0700) < 0)
                return fail(reterr, negative_errno(), "create", buf);
        return 0;
}

/* Attaches a detached mount (or binds a host path, without fd) at a new
 * directory STAGE/@name. */
static int stage_attach(int fd, const char *host, const char *name, HutchError *reterr) {
        char path[256];
        int r;

        r = stage_dir(name, path, sizeof(path), reterr);
        if (r < 0)
                return r;
        if (fd >= 0) {
                if (move_mount(fd, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH) < 0)
                        return fail(reterr, negative_errno(), "attach", name);
                return 0;
        }
        r = mount_bind(host, path);
        if (r < 0)
                return fail(reterr, r, "bind-mount", host);
        return 0;
}

static int append(char *buf, size_t size, size_t *len, const char *const *parts) {
        for (size_t i = 0; parts[i]; i++) {
                size_t n = strlen(parts[i]);

                if (n >= size - *len)
                        return -ENAMETOOLONG;
                memcpy(buf + *len, parts[i], n + 1);
                *len += n;
        }
        return 0;
}

/* Mounts an overlay on @target: the layers' @sub directories (top first)
 * over @bottom, with @upper and @work. userxattr: whiteouts and opaque
 * directories are recorded in user.overlay.* xattrs, which an
 * unprivileged mounter may set (docs/persistent.md). */
static int mount_overlay(const RootfsLayers *l, const char *sub, const char *bottom,
                         const char *upper, const char *work, const char *target,
                         HutchError *reterr) {
        char opts[OVERLAY_OPTS_MAX];
        size_t len = 0;
        int r;

        opts[0] = '\0';
        r = append(opts, sizeof(opts), &len, (const char *const[]){"lowerdir=", NULL});
        for (size_t i = 0; r >= 0 && l && i < l->n_layers; i++) {
                char layer[32];

                (void)snprintf(layer, sizeof(layer), STAGE "/l%zu/", i);
                r = append(opts, sizeof(opts), &len, (const char *const[]){layer, sub, ":", NULL});
        }
        if (r >= 0)
                r = append(opts, sizeof(opts), &len,
                           (const char *const[]){bottom, ",upperdir=", upper, ",workdir=", work,
                                                 ",userxattr", NULL});
        if (r < 0)
                return fail(reterr, r, "build the overlay options for", target);
        if (mount("overlay", target, "overlay", MS_NOSUID | MS_NODEV, opts) < 0)
                return fail(reterr, negative_errno(), "mount the overlay on", target);
        return 0;
}

/* --workspace DIR:overlay. Persistent: the upper is the sandbox's own
 * layer; one-shot: a tmpfs (sized like a copied workspace) that is
 * discarded with the sandbox. */
int rootfs_workspace_overlay_mount(const Policy *p, const RootfsLayers *l, int workspace_fd,
                                   const char *src, const char *target, HutchError *reterr) {
        char upper[512], work[512];
        int r;

        r = stage_attach(workspace_fd, src, "wsh", reterr);
        if (r < 0)
                return r;
        if (l) {
                (void)snprintf(upper, sizeof(upper), STAGE "/data/%s/ws", l->upper);
                (void)snprintf(work, sizeof(work), STAGE "/data/work/ws");
        } else {
                char dir[256];

                r = stage_dir("wsu", dir, sizeof(dir), reterr);
                if (r < 0)
                        return r;
                r = mount_tmpfs(
                        dir,
                        tmpfs_size_for(p, POLICY_SANDBOX_WORKSPACE,
                                       p->disk_size ? p->disk_size : POLICY_DEFAULT_COPY_SIZE),
                        0755, MS_NOSUID | MS_NODEV);
                if (r < 0)
                        return fail(reterr, r, "mount the workspace's upper tmpfs on", dir);
                (void)snprintf(upper, sizeof(upper), STAGE "/wsu/upper");
                (void)snprintf(work, sizeof(work), STAGE "/wsu/work");
                if (mkdir(upper, 0755) < 0 || mkdir(work, 0700) < 0)
                        return fail(reterr, negative_errno(), "create", upper);
        }
        return mount_overlay(l, "ws", STAGE "/wsh", upper, work, target, reterr);
}

/* Attaches @l's data dir at STAGE/data and its snapshot layers at
 * STAGE/l<i> (read-only). */
static int layers_attach(const RootfsLayers *l, HutchError *reterr) {
        char path[512];
        int r;

        r = host_path(l->data_path, path, sizeof(path));
        if (r < 0)
                return fail(reterr, r, "resolve", l->data_path);
        r = stage_attach(l->data_fd, path, "data", reterr);
        if (r < 0)
                return r;
        for (size_t i = 0; i < l->n_layers; i++) {
                char name[32];

                (void)snprintf(name, sizeof(name), "l%zu", i);
                r = host_path(l->layer_paths[i], path, sizeof(path));
                if (r < 0)
                        return fail(reterr, r, "resolve", l->layer_paths[i]);
                r = stage_attach(l->layer_fds[i], path, name, reterr);
                if (r < 0)
                        return r;
                if (l->layer_fds[i] < 0) {
                        (void)snprintf(path, sizeof(path), STAGE "/%s", name);
                        r = mount_set_attr(path, MOUNT_ATTR_RDONLY, true);
                        if (r < 0)
                                return fail(reterr, r, "make read-only", path);
                }
        }
        return 0;
}

int rootfs_layers_mount(const RootfsLayers *l, HutchError *reterr) {
        char path[512];
        int r;

        r = layers_attach(l, reterr);
        if (r < 0)
                return r;
        /* The bottom layer: the empty persistent directories, on a small
         * tmpfs of its own so that it can be detached like the others. */
        r = stage_dir("skel", path, sizeof(path), reterr);
        if (r < 0)
                return r;
        r = mount_tmpfs(path, 64ULL << 10, 0755, MS_NOSUID | MS_NODEV);
        if (r < 0)
                return fail(reterr, r, "mount", path);
        for (size_t i = 0; rootfs_persistent_dirs[i]; i++) {
                (void)snprintf(path, sizeof(path), STAGE "/skel%s", rootfs_persistent_dirs[i]);
                if (mkdir(path, strcmp(rootfs_persistent_dirs[i], POLICY_SANDBOX_HOME) == 0
                                        ? 0700
                                        : 0755) < 0)
                        return fail(reterr, negative_errno(), "create", path);
        }
        r = stage_dir("p", path, sizeof(path), reterr);
        if (r < 0)
                return r;
        {
                char upper[512], work[512];

                (void)snprintf(upper, sizeof(upper), STAGE "/data/%s/root", l->upper);
                (void)snprintf(work, sizeof(work), STAGE "/data/work/root");
                r = mount_overlay(l, "root", STAGE "/skel", upper, work, STAGE "/p", reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The mount points of hutch's in an image's root, in the skeleton below
 * its layers: there whatever the image has, and never written to a
 * persistent sandbox's layer. */
static const struct {
        const char *name;
        mode_t mode;
} image_skel[] = {
        {"proc", 0555}, {"dev", 0755}, {"tmp", 01777}, {"run", 0755}, {"root", 0700},
};

#define NEWROOT ROOTFS_IMAGE_ROOT

/* Builds an image sandbox's root overlay at NEWROOT, with its layers
 * attached below STAGE (a tmpfs here, so that it can move into the new
 * root whole). */
static int image_root_mount(const RootfsConfig *c, HutchError *reterr) {
        const RootfsImage *img = c->image;
        const Policy *p = c->policy;
        _cleanup_free_ char *bottom = NULL;
        char path[512], upper[512], work[512];
        size_t len = 0;
        int r;

        r = mount_tmpfs(STAGE, 64ULL << 10, 0700, MS_NOSUID | MS_NODEV);
        if (r < 0)
                return fail(reterr, r, "mount", STAGE);
        if (c->layers) {
                r = layers_attach(c->layers, reterr);
                if (r < 0)
                        return r;
        }
        bottom = malloc(OVERLAY_OPTS_MAX);
        if (!bottom)
                return fail(reterr, -ENOMEM, "build the overlay options for", NEWROOT);
        bottom[0] = '\0';
        for (size_t i = 0; i < img->n_layers; i++) {
                char name[32];

                (void)snprintf(name, sizeof(name), "i%zu", i);
                r = host_path(img->layer_paths[i], path, sizeof(path));
                if (r < 0)
                        return fail(reterr, r, "resolve", img->layer_paths[i]);
                r = stage_attach(img->layer_fds ? img->layer_fds[i] : -EBADF, path, name, reterr);
                if (r < 0)
                        return r;
                (void)snprintf(path, sizeof(path), STAGE "/%s", name);
                if (!img->layer_fds || img->layer_fds[i] < 0) {
                        r = mount_set_attr(path, MOUNT_ATTR_RDONLY, true);
                        if (r < 0)
                                return fail(reterr, r, "make read-only", path);
                }
                r = append(bottom, OVERLAY_OPTS_MAX, &len, (const char *const[]){path, ":", NULL});
                if (r < 0)
                        return fail(reterr, r, "build the overlay options for", NEWROOT);
        }
        r = stage_dir("iskel", path, sizeof(path), reterr);
        if (r < 0)
                return r;
        r = mount_tmpfs(path, 64ULL << 10, 0755, MS_NOSUID | MS_NODEV);
        if (r < 0)
                return fail(reterr, r, "mount", path);
        for (size_t i = 0; i < ELEMENTSOF(image_skel); i++) {
                char dir[600];

                (void)snprintf(dir, sizeof(dir), "%s/%s", path, image_skel[i].name);
                if (mkdir(dir, image_skel[i].mode) < 0 || chmod(dir, image_skel[i].mode) < 0)
                        return fail(reterr, negative_errno(), "create", dir);
        }
        r = append(bottom, OVERLAY_OPTS_MAX, &len, (const char *const[]){path, NULL});
        if (r < 0)
                return fail(reterr, r, "build the overlay options for", NEWROOT);

        if (c->layers) {
                (void)snprintf(upper, sizeof(upper), STAGE "/data/%s/root", c->layers->upper);
                (void)snprintf(work, sizeof(work), STAGE "/data/work/root");
        } else {
                r = stage_dir("iu", path, sizeof(path), reterr);
                if (r < 0)
                        return r;
                /* The run's changes to the image: as much room as $HOME
                 * would have on the host base. */
                r = mount_tmpfs(path, p->disk_size ? p->disk_size : POLICY_DEFAULT_HOME_SIZE, 0755,
                                MS_NOSUID | MS_NODEV);
                if (r < 0)
                        return fail(reterr, r, "mount the root's upper tmpfs on", path);
                (void)snprintf(upper, sizeof(upper), STAGE "/iu/upper");
                (void)snprintf(work, sizeof(work), STAGE "/iu/work");
                if (mkdir(upper, 0755) < 0 || mkdir(work, 0700) < 0)
                        return fail(reterr, negative_errno(), "create", upper);
        }
        if (mkdir(NEWROOT, 0755) < 0)
                return fail(reterr, negative_errno(), "create", NEWROOT);
        return mount_overlay(c->layers, "root", bottom, upper, work, NEWROOT, reterr);
}

int rootfs_image_root_mount(const RootfsConfig *c, HutchError *reterr) {
        if (!c->image)
                return -EINVAL;
        return image_root_mount(c, reterr);
}

/* Makes the overlay at NEWROOT the root, taking the host's root (OLDROOT)
 * and the stage along; the staging tmpfs is detached. Where pivot_root is
 * refused (@moved), the overlay is moved over "/" and entered with chroot,
 * as enter_by_move() does. */
static int image_root_enter(bool moved, HutchError *reterr) {
        if (mkdir(NEWROOT OLDROOT, 0700) < 0)
                return fail(reterr, negative_errno(), "create", NEWROOT OLDROOT);
        if (mount(OLDROOT, NEWROOT OLDROOT, NULL, MS_MOVE, NULL) < 0)
                return fail(reterr, negative_errno(), "move the host's root to", NEWROOT OLDROOT);
        if (mkdir(NEWROOT STAGE, 0700) < 0)
                return fail(reterr, negative_errno(), "create", NEWROOT STAGE);
        if (mount(STAGE, NEWROOT STAGE, NULL, MS_MOVE, NULL) < 0)
                return fail(reterr, negative_errno(), "move the stage to", NEWROOT STAGE);
        if (chdir(NEWROOT) < 0)
                return fail(reterr, negative_errno(), "enter", NEWROOT);
        if (moved) {
                if (mount(".", "/", NULL, MS_MOVE, NULL) < 0)
                        return fail(reterr, negative_errno(), "move the image's root over", "/");
                if (chroot(".") < 0)
                        return fail(reterr, negative_errno(), "enter the image's root", "/");
        } else {
                int r;

                if (mkdir(NEWROOT STAGE "/t", 0700) < 0)
                        return fail(reterr, negative_errno(), "create", NEWROOT STAGE "/t");
                r = pivot_root_syscall(".", "." STAGE "/t");
                if (r < 0)
                        return fail(reterr, r, "pivot into the image's root", NEWROOT);
        }
        if (chdir("/") < 0)
                return fail(reterr, negative_errno(), "enter", "/");
        if (!moved) {
                if (umount2(STAGE "/t", MNT_DETACH) < 0)
                        return fail(reterr, negative_errno(), "unmount", STAGE "/t");
                if (rmdir(STAGE "/t") < 0)
                        return fail(reterr, negative_errno(), "remove", STAGE "/t");
        }
        return 0;
}

/* Persistent sandbox: the overlay of the persistent directories, then a
 * bind of each of them. */
static int setup_persistent(const RootfsConfig *c, HutchError *reterr) {
        _cleanup_close_ int top = -EBADF;
        char path[512];
        int r;

        r = rootfs_layers_mount(c->layers, reterr);
        if (r < 0)
                return r;
        top = open(STAGE "/p", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (top < 0)
                return fail(reterr, negative_errno(), "open", STAGE "/p");
        for (size_t i = 0; rootfs_persistent_dirs[i]; i++) {
                const char *d = rootfs_persistent_dirs[i];
                struct stat st;

                /* SECURITY: the sandbox owns these directories' contents;
                 * one it replaced with a symlink would be followed by the
                 * bind (into the host's tree, still mounted at /oldroot). */
                if (fstatat(top, d + 1, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return fail(reterr, negative_errno(), "inspect the persistent directory",
                                    d);
                if (!S_ISDIR(st.st_mode))
                        return hutch_error_set(reterr, ENOTDIR,
                                               "the persistent directory %s is no longer a "
                                               "directory; remove the sandbox's change to it",
                                               d);
                (void)snprintf(path, sizeof(path), STAGE "/p%s", d);
                if (mkdir(d, 0755) < 0)
                        return fail(reterr, negative_errno(), "create", d);
                r = mount_bind(path, d);
                if (r < 0)
                        return fail(reterr, r, "bind-mount", d);
                r = mount_set_attr(d,
                                   MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                           (c->policy->read_only ? MOUNT_ATTR_RDONLY : 0),
                                   false);
                if (r < 0)
                        return fail(reterr, r, "set flags of", d);
        }
        return 0;
}

/* Detaches the staging mounts: the overlays keep what they use. */
static int stage_remove(HutchError *reterr) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;

        d = opendir(STAGE);
        if (!d) {
                if (errno == ENOENT)
                        return 0;
                return fail(reterr, negative_errno(), "open", STAGE);
        }
        while ((de = readdir(d))) {
                char path[512];

                if (de->d_name[0] == '.')
                        continue;
                (void)snprintf(path, sizeof(path), STAGE "/%s", de->d_name);
                if (umount2(path, MNT_DETACH) < 0 && errno != EINVAL)
                        return fail(reterr, negative_errno(), "unmount", path);
                if (rmdir(path) < 0 && errno != ENOTEMPTY)
                        return fail(reterr, negative_errno(), "remove", path);
        }
        (void)closedir(TAKE_PTR(d));
        /* An image sandbox's stage is a tmpfs of its own (image_root_mount()). */
        if (umount2(STAGE, MNT_DETACH) < 0 && errno != EINVAL)
                return fail(reterr, negative_errno(), "unmount", STAGE);
        if (rmdir(STAGE) < 0)
                return fail(reterr, negative_errno(), "remove", STAGE);
        return 0;
}

static int setup_workspace(const RootfsConfig *c, HutchError *reterr) {
        const Policy *p = c->policy;
        char src[4096];
        int r;

        if (!p->workspace)
                return 0;
        r = host_path(p->workspace, src, sizeof(src));
        if (r < 0)
                return fail(reterr, r, "resolve", p->workspace);
        r = make_dir(POLICY_SANDBOX_WORKSPACE, 0755, reterr);
        if (r < 0)
                return r;

        if (p->workspace_mode == WORKSPACE_MODE_COPY) {
                _cleanup_close_ int from = -EBADF, to = -EBADF;

                r = mount_tmpfs(
                        POLICY_SANDBOX_WORKSPACE,
                        tmpfs_size_for(p, POLICY_SANDBOX_WORKSPACE,
                                       p->disk_size ? p->disk_size : POLICY_DEFAULT_COPY_SIZE),
                        0755, MS_NOSUID | MS_NODEV);
                if (r < 0)
                        return fail(reterr, r, "mount the workspace tmpfs on",
                                    POLICY_SANDBOX_WORKSPACE);
                if (c->workspace_fd >= 0)
                        from = openat(c->workspace_fd, ".",
                                      O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
                else
                        from = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
                if (from < 0)
                        return fail(reterr, negative_errno(), "open the workspace", p->workspace);
                to = open(POLICY_SANDBOX_WORKSPACE, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (to < 0)
                        return fail(reterr, negative_errno(), "open", POLICY_SANDBOX_WORKSPACE);
                r = copy_tree(from, to, reterr);
                if (r < 0)
                        return r;
        } else if (p->workspace_mode == WORKSPACE_MODE_OVERLAY) {
                r = rootfs_workspace_overlay_mount(p, c->layers, c->workspace_fd, src,
                                                   POLICY_SANDBOX_WORKSPACE, reterr);
                if (r < 0)
                        return r;
        } else if (c->workspace_fd >= 0) {
                if (move_mount(c->workspace_fd, "", AT_FDCWD, POLICY_SANDBOX_WORKSPACE,
                               MOVE_MOUNT_F_EMPTY_PATH) < 0)
                        return fail(reterr, negative_errno(), "attach the workspace", p->workspace);
        } else {
                r = mount_bind(src, POLICY_SANDBOX_WORKSPACE);
                if (r < 0)
                        return fail(reterr, r, "bind-mount the workspace", p->workspace);
        }

        r = mount_set_attr(POLICY_SANDBOX_WORKSPACE,
                           MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                   (p->read_only ? MOUNT_ATTR_RDONLY : 0),
                           true);
        if (r < 0)
                return fail(reterr, r, "set flags of", POLICY_SANDBOX_WORKSPACE);
        return 0;
}

typedef struct UserMount {
        const char *target;
        const BindMount *bind; /* or NULL for a tmpfs */
        const TmpfsMount *tmpfs;
        int tree;   /* a bind's detached source tree */
        bool owned; /* tree was cloned here (else it is the caller's) */
        bool dir;   /* the mount point is a directory */
} UserMount;

typedef struct UserMounts {
        UserMount list[POLICY_MAX_BINDS + POLICY_MAX_TMPFS];
        size_t n;
} UserMounts;

static void user_mounts_done(UserMounts *u) {
        for (size_t i = 0; i < u->n; i++)
                if (u->list[i].owned)
                        u->list[i].tree = safe_close(u->list[i].tree);
        u->n = 0;
}

static int user_mount_compare(const void *a, const void *b) {
        return strcmp(((const UserMount *)a)->target, ((const UserMount *)b)->target);
}

/* Clones the host tree of a bind that the supervisor did not prepare,
 * from OLDROOT. SECURITY: the source was validated as a canonical path; a
 * component swapped for a symlink since then is refused, not followed
 * (as sandbox_open_detached_tree() does for the supervisor). */
static int user_mount_clone_source(int oldroot, UserMount *m, HutchError *reterr) {
        struct open_how how = {
                .flags = O_PATH | O_CLOEXEC,
                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        _cleanup_close_ int src = -EBADF;

        src = (int)syscall(SYS_openat2, oldroot, m->bind->source, &how, sizeof(how));
        if (src < 0)
                return hutch_error_set(reterr, errno,
                                       "failed to open '%s' for the sandbox (a symlink in the path "
                                       "is refused): %m",
                                       m->bind->source);
        m->tree = open_tree(src, "",
                            OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH);
        if (m->tree < 0)
                return fail(reterr, negative_errno(), "bind-mount", m->bind->source);
        m->owned = true;
        return 0;
}

/* -v binds and --tmpfs mounts, parents before children, with each bind's
 * source tree open (while OLDROOT is still there). Entries for /tmp,
 * /dev/shm, $HOME and a copied workspace only resize those default mounts
 * and are skipped here. */
static int user_mounts_prepare(const RootfsConfig *c, UserMounts *u, HutchError *reterr) {
        const Policy *p = c->policy;
        _cleanup_close_ int oldroot = -EBADF;
        /* A --tmpfs /workspace sizes a copied workspace or an overlay's
         * upper tmpfs. */
        bool workspace_tmpfs = p->workspace && (p->workspace_mode == WORKSPACE_MODE_COPY ||
                                                p->workspace_mode == WORKSPACE_MODE_OVERLAY);
        int r;

        for (size_t i = 0; i < p->n_binds && u->n < ELEMENTSOF(u->list); i++)
                u->list[u->n++] = (UserMount){
                        .target = p->binds[i].target,
                        .bind = &p->binds[i],
                        .tree = c->bind_fds ? c->bind_fds[i] : -EBADF,
                };
        for (size_t i = 0; i < p->n_tmpfs && u->n < ELEMENTSOF(u->list); i++) {
                const char *t = p->tmpfs[i].path;

                if (strcmp(t, "/tmp") == 0 || strcmp(t, "/dev/shm") == 0 ||
                    strcmp(t, POLICY_SANDBOX_HOME) == 0 ||
                    (workspace_tmpfs && strcmp(t, POLICY_SANDBOX_WORKSPACE) == 0))
                        continue;
                u->list[u->n++] = (UserMount){
                        .target = t,
                        .tmpfs = &p->tmpfs[i],
                        .tree = -EBADF,
                        .dir = true,
                };
        }
        qsort(u->list, u->n, sizeof(u->list[0]), user_mount_compare);

        for (size_t i = 0; i < u->n; i++) {
                UserMount *m = &u->list[i];
                struct stat st;

                if (!m->bind)
                        continue;
                if (m->tree < 0) {
                        if (oldroot < 0) {
                                oldroot = open(OLDROOT, O_PATH | O_DIRECTORY | O_CLOEXEC);
                                if (oldroot < 0)
                                        return fail(reterr, negative_errno(), "open", OLDROOT);
                        }
                        r = user_mount_clone_source(oldroot, m, reterr);
                        if (r < 0)
                                return r;
                }
                if (fstat(m->tree, &st) < 0)
                        return fail(reterr, negative_errno(), "inspect", m->bind->source);
                m->dir = S_ISDIR(st.st_mode);
        }
        return 0;
}

/* Opens the mount point of @m below @root, made as it has to be
 * (mount_point_open_beneath()). */
static int user_mount_point(int root, const UserMount *m, HutchError *reterr) {
        size_t len = 0;
        int fd;

        fd = mount_point_open_beneath(root, m->target, m->dir, &len);
        if (fd == -ELOOP)
                return hutch_error_set(reterr, ELOOP,
                                       "the mount target '%s' has a symlink in its path ('%.*s'); "
                                       "mount points are never made through symlinks",
                                       m->target, (int)len, m->target);
        if (fd < 0)
                return hutch_error_set(reterr, -fd,
                                       "failed to create the mount point '%s' (at '%.*s'): %s",
                                       m->target, (int)len, m->target, strerror(-fd));
        return fd;
}

static int user_mount_attach(const Policy *p, int root, const UserMount *m, HutchError *reterr) {
        _cleanup_close_ int point = -EBADF;
        int r;

        point = user_mount_point(root, m, reterr);
        if (point < 0)
                return point;
        if (m->tmpfs) {
                r = mount_tmpfs_at(point, m->tmpfs->size, 01777,
                                   MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
                if (r < 0)
                        return fail(reterr, r, "mount tmpfs on", m->target);
                return 0;
        }
        r = mount_move_to(m->tree, point);
        if (r < 0)
                return fail(reterr, r, "attach", m->bind->source);
        r = mount_set_attr_fd(m->tree,
                              MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                      (m->bind->read_only ? MOUNT_ATTR_RDONLY : 0),
                              true);
        if (r < 0)
                return fail(reterr, r, "set flags of", m->target);
        return 0;
}

/* SECURITY: runs after OLDROOT is gone; every mount point is walked from
 * "/" one component at a time and never through a symlink. */
static int user_mounts_attach(const Policy *p, const UserMounts *u, HutchError *reterr) {
        _cleanup_close_ int root = -EBADF;
        int r;

        if (u->n == 0)
                return 0;
        root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return fail(reterr, negative_errno(), "open", "/");
        for (size_t i = 0; i < u->n; i++) {
                r = user_mount_attach(p, root, &u->list[i], reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Copies the host's system CA bundle, resolved as on the host (symlinks
 * stay within OLDROOT), to @out, ending it with a newline. A host without
 * one leaves @out empty. SECURITY: the sandbox gets a copy in its own
 * tmpfs; the host's file is only opened for reading, by init before the
 * command exists, and closed here. */
static int copy_system_ca_bundle(int out, const char *bundle, bool image, HutchError *reterr) {
        /* SECURITY: an image's bundle is read from the image's root with
         * the host's still mounted at OLDROOT: a symlink of the image's
         * may not lead there (RESOLVE_NO_XDEV: it never leaves the root's
         * own mount). */
        struct open_how how = {
                .flags = O_RDONLY | O_CLOEXEC | O_NOCTTY,
                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | (image ? RESOLVE_NO_XDEV : 0),
        };
        _cleanup_close_ int root = -EBADF, in = -EBADF;
        off_t size = 0;
        char last = '\n';
        struct stat st;
        int r;

        if (!bundle)
                return 0;
        root = open(image ? "/" : OLDROOT, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return fail(reterr, negative_errno(), "open", image ? "/" : OLDROOT);
        /* EAGAIN: a rename or mount elsewhere raced a ".." of a symlink. */
        for (unsigned tries = 0; tries < 8; tries++) {
                in = (int)syscall(SYS_openat2, root, bundle + 1, &how, sizeof(how));
                if (in >= 0 || errno != EAGAIN)
                        break;
        }
        if (in < 0 && errno == ENOENT)
                return 0;
        if (in < 0 || fstat(in, &st) < 0)
                return fail(reterr, negative_errno(), "open the system CA bundle", bundle);
        if (!S_ISREG(st.st_mode))
                return fail(reterr, -EINVAL, "read the system CA bundle", bundle);
        /* In the kernel, page cache to page cache; the tmpfs size caps it. */
        for (;;) {
                ssize_t n = sendfile(out, in, NULL, 1U << 20);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return fail(reterr, negative_errno(), "copy the system CA bundle to",
                                    SANDBOX_CA_BUNDLE_PATH);
                if (n == 0)
                        break;
                size += n;
        }
        if (size > 0 && pread(in, &last, 1, size - 1) != 1)
                return fail(reterr, -EIO, "read the system CA bundle", bundle);
        r = last == '\n' ? 0 : loop_write(out, "\n", 1);
        if (r < 0)
                return fail(reterr, r, "write", SANDBOX_CA_BUNDLE_PATH);
        return 0;
}

/* With secrets: a small tmpfs at SANDBOX_CA_BUNDLE_DIR with a bundle file
 * holding the host's system CAs, bound over the system bundle when the
 * sandbox has one (so clients that ignore the environment trust the
 * sandbox CA too). The sandbox CA is appended later
 * (rootfs_install_ca_bundle()): the proxy makes it while the filesystem is
 * built, and init would otherwise wait for it with nothing to do. */
static int setup_ca_bundle(bool wanted, bool image, HutchError *reterr) {
        _cleanup_close_ int out = -EBADF;
        const char *bundle = SANDBOX_SYSTEM_CA_BUNDLE;
        struct stat st;
        int r;

        if (!wanted)
                return 0;
        /* An image's bundle is where its distribution keeps it. */
        if (image) {
                bundle = NULL;
                for (size_t i = 0; rootfs_image_ca_bundles[i]; i++)
                        if (lstat(rootfs_image_ca_bundles[i], &st) == 0 && S_ISREG(st.st_mode)) {
                                bundle = rootfs_image_ca_bundles[i];
                                break;
                        }
        }
        r = make_dir("/run", 0755, reterr);
        if (r < 0)
                return r;
        r = make_dir(SANDBOX_CA_BUNDLE_DIR, 0755, reterr);
        if (r < 0)
                return r;
        r = mount_tmpfs(SANDBOX_CA_BUNDLE_DIR, 4ULL << 20, 0755, MS_NOSUID | MS_NODEV | MS_NOEXEC);
        if (r < 0)
                return fail(reterr, r, "mount", SANDBOX_CA_BUNDLE_DIR);
        out = open(SANDBOX_CA_BUNDLE_PATH, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
        if (out < 0)
                return fail(reterr, negative_errno(), "create", SANDBOX_CA_BUNDLE_PATH);
        r = copy_system_ca_bundle(out, bundle, image, reterr);
        if (r < 0)
                return r;

        /* SECURITY: in an image only a regular file (lstat above) is
         * covered, never a symlink's target. */
        if (!bundle || stat(bundle, &st) < 0 || !S_ISREG(st.st_mode))
                return 0;
        r = mount_bind(SANDBOX_CA_BUNDLE_PATH, bundle);
        if (r < 0)
                return fail(reterr, r, "bind the CA bundle over", bundle);
        r = mount_set_attr(bundle, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false);
        if (r < 0)
                return fail(reterr, r, "make read-only", bundle);
        return 0;
}

#define SANDBOX_DNS_DIR "/run/hutch-dns"

/* Creates the empty file @path (absolute, no "." or ".." components) and
 * its missing parent directories, in the sandbox's own root. */
static int make_file_path(const char *path, HutchError *reterr) {
        _cleanup_close_ int fd = -EBADF;
        char dir[PATH_MAX];
        int r;

        for (const char *p = strchr(path + 1, '/'); p; p = strchr(p + 1, '/')) {
                (void)snprintf(dir, sizeof(dir), "%.*s", (int)(p - path), path);
                r = make_dir(dir, 0755, reterr);
                if (r < 0)
                        return r;
        }
        fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                return fail(reterr, negative_errno(), "create", path);
        return 0;
}

/* Where the resolver's file is bound: /etc/resolv.conf when it is a
 * regular file; made when it is missing (an image without one); for the
 * host base, the target of a symlink into /run (systemd-resolved's
 * "../run/systemd/resolve/stub-resolv.conf"), which the sandbox lacks:
 * its /run is hutch's own, made here. SECURITY: an image's symlink is
 * never followed (as the CA bundle's), nor one that leaves /run. */
static int resolv_conf_target(bool image, char *buf, size_t size, HutchError *reterr) {
        static const char path[] = "/etc/resolv.conf";
        char link[PATH_MAX - 8];
        struct stat st;
        ssize_t n;

        (void)snprintf(buf, size, "%s", path);
        if (lstat(path, &st) < 0) {
                if (errno != ENOENT)
                        return fail(reterr, negative_errno(), "inspect", path);
                return make_file_path(path, reterr);
        }
        if (S_ISREG(st.st_mode))
                return 0;
        if (!S_ISLNK(st.st_mode) || image)
                return hutch_error_set(reterr, EINVAL,
                                       "transparent DNS needs %s to be a regular file%s", path,
                                       image ? " in the image" : "");
        n = readlink(path, link, sizeof(link) - 1);
        if (n < 0)
                return fail(reterr, negative_errno(), "read the symlink", path);
        link[n] = '\0';
        (void)snprintf(buf, size, "%s%s", link[0] == '/' ? "" : "/etc/", link);
        /* "/etc/../run/x" is "/run/x". */
        if (strncmp(buf, "/etc/../", 8) == 0)
                memmove(buf, buf + 7, strlen(buf + 7) + 1);
        if (strncmp(buf, "/run/", 5) != 0 || strstr(buf, "/../") || strstr(buf, "/./"))
                return hutch_error_set(reterr, EINVAL,
                                       "transparent DNS cannot cover %s: it is a symlink to '%s', "
                                       "outside /run",
                                       path, link);
        if (lstat(buf, &st) == 0)
                return S_ISREG(st.st_mode) ? 0
                                           : hutch_error_set(reterr, EINVAL,
                                                             "transparent DNS needs %s to be a "
                                                             "regular file",
                                                             buf);
        return make_file_path(buf, reterr);
}

/* Transparent DNS: /etc/resolv.conf names the resolver that init made
 * for hutch-proxy (docs/network.md, "Transparent DNS"). A small read-only
 * tmpfs holds the file, bound over the sandbox's /etc/resolv.conf (over
 * its target when that is a symlink inside the sandbox). No search list:
 * the name asked is the name the allowlist is checked against. */
static int setup_resolv_conf(const Policy *p, bool image, HutchError *reterr) {
        static const char text[] = "# hutch: transparent DNS (docs/network.md)\n"
                                   "nameserver " DNS_RESOLVER_ADDR_STRING "\n"
                                   "options timeout:2 attempts:2\n";
        _cleanup_close_ int out = -EBADF;
        char target[PATH_MAX];
        int r;

        if (!p->dns_transparent)
                return 0;
        r = make_dir("/run", 0755, reterr);
        if (r < 0)
                return r;
        r = make_dir(SANDBOX_DNS_DIR, 0755, reterr);
        if (r < 0)
                return r;
        r = mount_tmpfs(SANDBOX_DNS_DIR, 64ULL << 10, 0755, MS_NOSUID | MS_NODEV | MS_NOEXEC);
        if (r < 0)
                return fail(reterr, r, "mount", SANDBOX_DNS_DIR);
        out = open(SANDBOX_DNS_DIR "/resolv.conf", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
        if (out < 0)
                return fail(reterr, negative_errno(), "create", SANDBOX_DNS_DIR "/resolv.conf");
        r = loop_write(out, text, sizeof(text) - 1);
        if (r < 0)
                return fail(reterr, r, "write", SANDBOX_DNS_DIR "/resolv.conf");
        /* A file open for writing would keep the remount below busy. */
        out = safe_close(out);
        r = mount_set_attr(SANDBOX_DNS_DIR,
                           MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false);
        if (r < 0)
                return fail(reterr, r, "make read-only", SANDBOX_DNS_DIR);
        r = resolv_conf_target(image, target, sizeof(target), reterr);
        if (r < 0)
                return r;
        r = mount_bind(SANDBOX_DNS_DIR "/resolv.conf", target);
        if (r < 0)
                return fail(reterr, r, "bind the transparent resolver's file over", target);
        r = mount_set_attr(target, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false);
        if (r < 0)
                return fail(reterr, r, "make read-only", target);
        return 0;
}

int rootfs_ca_bundle_setup(HutchError *reterr) {
        return setup_ca_bundle(true, true, reterr);
}

/* Writes all of @fd (from offset 0) to @path, opened with O_WRONLY and
 * @flags (O_CREAT|O_TRUNC for a new file, O_APPEND to add to one). */
static int copy_fd_to_file(int fd, const char *path, int flags, HutchError *reterr) {
        _cleanup_close_ int out = -EBADF;
        char buf[4096];
        off_t off = 0;
        int r;

        out = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW | flags, 0444);
        if (out < 0)
                return fail(reterr, negative_errno(), "open", path);
        for (;;) {
                ssize_t n = pread(fd, buf, sizeof(buf), off);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return fail(reterr, negative_errno(), "read the CA bundle for", path);
                if (n == 0)
                        return 0;
                r = loop_write(out, buf, (size_t)n);
                if (r < 0)
                        return fail(reterr, r, "write", path);
                off += n;
        }
}

int rootfs_install_ca_bundle(int ca_fd, uint64_t hash, HutchError *reterr) {
        int r;

        r = copy_fd_to_file(ca_fd, SANDBOX_CA_BUNDLE_PATH, O_APPEND, reterr);
        if (r < 0)
                return r;
        if (hash != 0) {
                char path[128];

                if (mkdir(SANDBOX_CA_DIR, 0755) < 0)
                        return fail(reterr, negative_errno(), "create", SANDBOX_CA_DIR);
                (void)snprintf(path, sizeof(path), SANDBOX_CA_DIR "/%08llx.0",
                               (unsigned long long)hash);
                r = copy_fd_to_file(ca_fd, path, O_CREAT | O_TRUNC, reterr);
                if (r < 0)
                        return r;
        }
        /* Read-only from now on (the bind over the system bundle already is). */
        r = mount_set_attr(SANDBOX_CA_BUNDLE_DIR,
                           MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false);
        if (r < 0)
                return fail(reterr, r, "make read-only", SANDBOX_CA_BUNDLE_DIR);
        return 0;
}

int rootfs_setup(const RootfsConfig *c, unsigned *ret_fallbacks, HutchError *reterr) {
        _cleanup_(user_mounts_done) UserMounts user = {};
        const Policy *p = c->policy;
        unsigned fallbacks = 0;
        bool moved = false;
        int r;

        r = enter_staging_root(&moved, reterr);
        if (r < 0)
                return r;
        if (moved)
                fallbacks |= 1U << OUTCOME_FALLBACK_PIVOT_ROOT;

        if (c->image) {
                if (mkdir(STAGE, 0700) < 0)
                        return fail(reterr, negative_errno(), "create", STAGE);
                r = image_root_mount(c, reterr);
                if (r < 0)
                        return r;
                r = image_root_enter(moved, reterr);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; !c->image && rootfs_system_dirs[i]; i++) {
                r = setup_system_dir(rootfs_system_dirs[i], reterr);
                if (r < 0)
                        return r;
        }
        /* An image's /etc is its own: nothing of the host's to hide. */
        r = c->image ? 0 : setup_etc_masks(reterr);
        if (r < 0)
                return r;
        r = setup_ca_bundle(c->ca_bundle, c->image != NULL, reterr);
        if (r < 0)
                return r;
        r = setup_resolv_conf(p, c->image != NULL, reterr);
        if (r < 0)
                return r;
        r = setup_proc(c, reterr);
        if (r < 0)
                return r;
        if (r > 0)
                fallbacks |= 1U << OUTCOME_FALLBACK_PROCFS;
        r = setup_dev(p, reterr);
        if (r < 0)
                return r;

        r = make_dir("/tmp", 01777, reterr);
        if (r < 0)
                return r;
        r = mount_tmpfs("/tmp", tmpfs_size_for(p, "/tmp", POLICY_DEFAULT_TMP_SIZE), 01777,
                        MS_NOSUID | MS_NODEV);
        if (r < 0)
                return fail(reterr, r, "mount", "/tmp");

        if (!c->image && mkdir(STAGE, 0700) < 0)
                return fail(reterr, negative_errno(), "create", STAGE);
        if (c->image) {
                /* The whole root is the sandbox's (its layer or a tmpfs). */
        } else if (c->layers) {
                r = setup_persistent(c, reterr);
                if (r < 0)
                        return r;
        } else {
                if (mkdir(POLICY_SANDBOX_HOME, 0700) < 0)
                        return fail(reterr, negative_errno(), "create", POLICY_SANDBOX_HOME);
                r = mount_tmpfs(
                        POLICY_SANDBOX_HOME,
                        tmpfs_size_for(p, POLICY_SANDBOX_HOME,
                                       p->disk_size ? p->disk_size : POLICY_DEFAULT_HOME_SIZE),
                        0700, MS_NOSUID | MS_NODEV | (p->read_only ? MS_RDONLY : 0));
                if (r < 0)
                        return fail(reterr, r, "mount", POLICY_SANDBOX_HOME);
        }

        r = setup_workspace(c, reterr);
        if (r < 0)
                return r;
        r = stage_remove(reterr);
        if (r < 0)
                return r;
        r = user_mounts_prepare(c, &user, reterr);
        if (r < 0)
                return r;

        /* SECURITY: drop every reference to the host's root before the -v
         * and --tmpfs mount points are made: their parents may be in the
         * workspace, the persistent directories or another bind, where the
         * sandbox or a repository put what it liked. */
        if (umount2(OLDROOT, MNT_DETACH) < 0)
                return fail(reterr, negative_errno(), "unmount", OLDROOT);
        if (rmdir(OLDROOT) < 0)
                return fail(reterr, negative_errno(), "remove", OLDROOT);
        if (!c->image && unlink(MASK_FILE) < 0)
                return fail(reterr, negative_errno(), "remove", MASK_FILE);
        r = user_mounts_attach(p, &user, reterr);
        if (r < 0)
                return r;
        /* An image's root is writable (its upper) unless --read-only. */
        r = mount_set_attr("/",
                           MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                   (!c->image || p->read_only ? MOUNT_ATTR_RDONLY : 0),
                           false);
        if (r < 0)
                return fail(reterr, r, "make read-only", "/");
        *ret_fallbacks = fallbacks;
        return 0;
}

int rootfs_writable_paths(const Policy *p, bool persistent, char ***ret) {
        /* SECURITY: /proc is not on the list: the command may not write
         * procfs files (oom_score_adj, comm, attr/...), only read them. */
        static const char *const always[] = {
                "/tmp",      "/dev/shm",    "/dev/pts",     "/dev/null", "/dev/zero",
                "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty",  NULL,
        };
        _cleanup_strv_free_ char **l = NULL;
        int r;

        for (size_t i = 0; always[i]; i++) {
                r = strv_extend(&l, always[i]);
                if (r < 0)
                        return r;
        }
        /* An image's root is the sandbox's own (its upper layer). */
        if (p->image && !p->read_only) {
                r = strv_extend(&l, "/");
                if (r < 0)
                        return r;
        }
        if (!p->read_only) {
                r = strv_extend(&l, POLICY_SANDBOX_HOME);
                if (r < 0)
                        return r;
                for (size_t i = 1; persistent && !p->image && rootfs_persistent_dirs[i]; i++) {
                        r = strv_extend(&l, rootfs_persistent_dirs[i]);
                        if (r < 0)
                                return r;
                }
                if (p->workspace) {
                        r = strv_extend(&l, POLICY_SANDBOX_WORKSPACE);
                        if (r < 0)
                                return r;
                }
        }
        for (size_t i = 0; i < p->n_tmpfs; i++)
                if (!strv_contains(l, p->tmpfs[i].path)) {
                        r = strv_extend(&l, p->tmpfs[i].path);
                        if (r < 0)
                                return r;
                }
        for (size_t i = 0; i < p->n_binds; i++)
                if (!p->binds[i].read_only) {
                        r = strv_extend(&l, p->binds[i].target);
                        if (r < 0)
                                return r;
                }
        if (!l) {
                l = calloc(1, sizeof(char *));
                if (!l)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(l);
        return 0;
}
