/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "ns/userns.h"
#include "sandbox/host-setup.h"
#include "sandbox/rootfs.h"
#include "strv.h"
#include "vm/vm-image-root.h"
#include "vm/vm-layers.h"

/* How long the helper may take to build the tree. */
#define VM_LAYERS_TIMEOUT_MS 30000
#define VM_LAYERS_MSG_MAX 600
#define VM_LAYERS_STAGE_SIZE (1ULL << 20)

/* What the helper gets: the sandbox's policy and layers (it is a fork:
 * they are its own copies), its end of the socket, and where to mount its
 * root. */
typedef struct Helper {
        const Policy *policy;
        const SandboxLayerPaths *layers; /* NULL: a one-shot image run */
        const ImageRoot *image;          /* the root is an image, or NULL */
        const char *stage;
        int sock;
        bool privileged;
} Helper;

/* The host trees, as detached mounts: sent by the supervisor when it is
 * root (sandbox_prepare_mounts(): idmapped workspace and binds, the data
 * dir and the layers), else opened here (as the user, whose user and
 * mount namespace these are). Order: workspace, binds, data, layers; an
 * image's layers in a message of their own (vm_image_layers_recv()). */
static int helper_trees(const Helper *h, int *ws, int *binds, int *data, int *layers,
                        int *image_layers, HutchError *reterr) {
        const Policy *p = h->policy;
        size_t n_layers = h->layers ? strv_length(h->layers->layers) : 0, n = 0, want;
        int fds[2 + POLICY_MAX_BINDS + SANDBOX_MAX_LAYERS];
        char go[4];
        ssize_t k;
        int r;

        if (n_layers > SANDBOX_MAX_LAYERS)
                return hutch_error_set(reterr, E2BIG, "too many layers");
        want = h->privileged ? (p->workspace ? 1 : 0) + p->n_binds + (h->layers ? 1 : 0) + n_layers
                             : 0;
        k = recv_with_fds(h->sock, go, sizeof(go), fds, want);
        if (k != 2 || memcmp(go, "go", 2) != 0)
                return hutch_error_set(reterr, EPROTO, "no start message from the keeper");
        if (h->privileged) {
                if (p->workspace)
                        *ws = fds[n++];
                for (size_t i = 0; i < p->n_binds; i++)
                        binds[i] = fds[n++];
                if (h->layers)
                        *data = fds[n++];
                for (size_t i = 0; i < n_layers; i++)
                        layers[i] = fds[n++];
                for (size_t i = 0; i < n; i++)
                        if (fds[i] < 0)
                                return hutch_error_set(reterr, EPROTO,
                                                       "a layer is missing from the keeper's "
                                                       "message");
                return h->image ? vm_image_layers_recv(h->sock, h->image, image_layers, reterr) : 0;
        }
        if (p->workspace) {
                /* SECURITY: a one-shot run's copied workspace is only
                 * read, as sandbox_prepare_trees() opens it as root. */
                r = sandbox_open_detached_tree(
                        p->workspace, -EBADF,
                        p->read_only || p->workspace_mode == WORKSPACE_MODE_OVERLAY ||
                                (!h->layers && p->workspace_mode == WORKSPACE_MODE_COPY),
                        ws, reterr);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < p->n_binds; i++) {
                r = sandbox_open_detached_tree(p->binds[i].source, -EBADF, p->binds[i].read_only,
                                               &binds[i], reterr);
                if (r < 0)
                        return r;
        }
        r = h->layers ? sandbox_open_detached_tree(h->layers->data_dir, -EBADF, false, data, reterr)
                      : 0;
        for (size_t i = 0; r >= 0 && i < n_layers; i++)
                r = sandbox_open_detached_tree(h->layers->layers[i], -EBADF, true, &layers[i],
                                               reterr);
        if (r >= 0 && h->image)
                r = vm_image_layers_open(h->image, -EBADF, image_layers, reterr);
        return r;
}

/* Attaches the detached mount @fd at the new directory @path. */
static int attach(int fd, const char *path, HutchError *reterr) {
        if (mkdir(path, 0755) < 0)
                return hutch_error_set(reterr, errno, "failed to create '%s': %m", path);
        if (move_mount(fd, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH) < 0)
                return hutch_error_set(reterr, errno, "failed to attach '%s': %m", path);
        return 0;
}

/* Opens the merged directory @path for QEMU. SECURITY: the sandbox owns
 * the persistent directories' contents; one it replaced with a symlink
 * must not lead QEMU anywhere else. */
static int open_share(const char *path, const char *name, int *ret, HutchError *reterr) {
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        if (fd < 0 && (errno == ENOTDIR || errno == ELOOP))
                return hutch_error_set(reterr, ENOTDIR,
                                       "the persistent directory %s is no longer a directory; "
                                       "remove the sandbox's change to it",
                                       name);
        if (fd < 0)
                return hutch_error_set(reterr, errno, "failed to open '%s': %m", path);
        *ret = fd;
        return 0;
}

static int helper_build(const Helper *h, int *shares, size_t *n_shares, HutchError *reterr) {
        const Policy *p = h->policy;
        int ws = -EBADF, data = -EBADF, binds[POLICY_MAX_BINDS], layers[SANDBOX_MAX_LAYERS];
        int image_layers[IMAGE_ROOT_MAX_LAYERS];
        size_t n_layers = h->layers ? strv_length(h->layers->layers) : 0, n = 0;
        char opts[64], path[64];
        int r;

        for (size_t i = 0; i < ELEMENTSOF(binds); i++)
                binds[i] = -EBADF;
        for (size_t i = 0; i < ELEMENTSOF(layers); i++)
                layers[i] = -EBADF;
        for (size_t i = 0; i < ELEMENTSOF(image_layers); i++)
                image_layers[i] = -EBADF;
        r = helper_trees(h, &ws, binds, &data, layers, image_layers, reterr);
        if (r < 0)
                return r;
        /* SECURITY: nothing mounted here may propagate back to the host. */
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return hutch_error_set(reterr, errno, "failed to make '/' private: %m");
        /* The root of the tree: a tmpfs owned by the sandbox's root, entered
         * while the helper is still the caller on the host (who can reach
         * the stage directory), then the helper becomes that root. */
        (void)snprintf(opts, sizeof(opts), "mode=0755,uid=0,gid=0,size=%llu",
                       (unsigned long long)VM_LAYERS_STAGE_SIZE);
        if (mount("tmpfs", h->stage, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
                return hutch_error_set(reterr, errno, "failed to mount the stage on '%s': %m",
                                       h->stage);
        if (chdir(h->stage) < 0 || chroot(".") < 0 || chdir("/") < 0)
                return hutch_error_set(reterr, errno, "failed to enter the stage: %m");
        if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
                return hutch_error_set(reterr, errno, "failed to become the sandbox's root: %m");
        if (mkdir(ROOTFS_STAGE, 0700) < 0)
                return hutch_error_set(reterr, errno, "failed to create '%s': %m", ROOTFS_STAGE);
        {
                RootfsLayers l = {
                        .data_fd = data,
                        .data_path = h->layers ? h->layers->data_dir : NULL,
                        .upper = h->layers ? h->layers->upper : NULL,
                        .layer_fds = layers,
                        .layer_paths = h->layers ? h->layers->layers : NULL,
                        .n_layers = n_layers,
                };

                /* An image's root: one overlay of the whole tree
                 * (vm-image.h); else the persistent directories'. */
                r = h->image ? vm_image_root_mount(p, h->layers ? &l : NULL, h->image, image_layers,
                                                   reterr)
                             : rootfs_layers_mount(&l, reterr);
                if (r >= 0 && h->image && p->read_only)
                        r = vm_image_mount_points(p, reterr);
                /* A one-shot run's workspace is the guest's to copy or
                 * overlay, as without an image. */
                if (r >= 0 && p->workspace && p->workspace_mode == WORKSPACE_MODE_OVERLAY &&
                    h->layers) {
                        if (mkdir("/ws", 0755) < 0)
                                return hutch_error_set(reterr, errno, "failed to create /ws: %m");
                        r = rootfs_workspace_overlay_mount(p, &l, ws, p->workspace, "/ws", reterr);
                } else if (r >= 0 && p->workspace)
                        r = attach(ws, "/ws", reterr);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < p->n_binds; i++) {
                (void)snprintf(path, sizeof(path), "/b%zu", i);
                r = attach(binds[i], path, reterr);
                if (r < 0)
                        return r;
        }
        if (h->image) {
                r = open_share(ROOTFS_IMAGE_ROOT, "/", &shares[n++], reterr);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; !h->image && rootfs_persistent_dirs[i]; i++) {
                char merged[128];

                (void)snprintf(merged, sizeof(merged), ROOTFS_STAGE "/p%s",
                               rootfs_persistent_dirs[i]);
                r = open_share(merged, rootfs_persistent_dirs[i], &shares[n++], reterr);
                if (r < 0)
                        return r;
        }
        if (p->workspace) {
                r = open_share("/ws", POLICY_SANDBOX_WORKSPACE, &shares[n++], reterr);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < p->n_binds; i++) {
                (void)snprintf(path, sizeof(path), "/b%zu", i);
                r = open_share(path, p->binds[i].target, &shares[n++], reterr);
                if (r < 0)
                        return r;
        }
        *n_shares = n;
        return 0;
}

/* The helper, in its new user and mount namespace: builds the tree and
 * sends the shares' descriptors ("ok"), or "error: MESSAGE". */
_noreturn_ static void helper_main(const Helper *h) {
        int shares[VM_RUN_MAX_SHARE_NAMES];
        size_t n = 0;
        HutchError err = {};
        char msg[VM_LAYERS_MSG_MAX];
        int r;

        (void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        r = helper_build(h, shares, &n, &err);
        if (r < 0) {
                (void)snprintf(msg, sizeof(msg), "error: %s", err.msg[0] ? err.msg : strerror(-r));
                (void)send(h->sock, msg, strlen(msg), MSG_NOSIGNAL);
                _exit(1);
        }
        _exit(send_with_fds(h->sock, "ok", 2, shares, n) < 0 ? 1 : 0);
}

/* The cache, template and run directories as QEMU will open them; as
 * root, idmapped: the cache (read-only) through the sandbox's namespace,
 * the others through @rw_userns_fd. */
static int open_dirs(const VmRun *v, bool privileged, int rw_userns_fd, VmLayers *l,
                     HutchError *reterr) {
        const char *paths[3] = {v->cache_dir, v->template_dir, v->run_dir};
        int *fds[3] = {&l->cache_fd, &l->template_fd, &l->run_fd};
        int r;

        for (size_t i = 0; i < ELEMENTSOF(paths); i++) {
                r = mkdir_private(paths[i]);
                if (r < 0)
                        return hutch_error_set(reterr, -r, "cannot use '%s': %s", paths[i],
                                               strerror(-r));
                if (privileged) {
                        /* SECURITY: QEMU only reads the cache (hutch wrote
                         * the images before it starts): a compromised QEMU
                         * must not rewrite a kernel every later VM boots. */
                        r = sandbox_open_detached_tree(paths[i],
                                                       i == 0 ? l->userns_fd : rw_userns_fd, i == 0,
                                                       fds[i], reterr);
                        if (r < 0)
                                return r;
                        continue;
                }
                *fds[i] = open(paths[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
                if (*fds[i] < 0)
                        return hutch_error_set(reterr, errno, "cannot open '%s': %m", paths[i]);
        }
        return 0;
}

/* Sends the helper its trees and waits for its answer. */
static int helper_talk(int sock, const Prepared *prep, const int *image_fds, size_t n_image_fds,
                       VmLayers *l, HutchError *reterr) {
        int fds[2 + POLICY_MAX_BINDS + SANDBOX_MAX_LAYERS];
        char msg[VM_LAYERS_MSG_MAX + 1];
        struct pollfd pfd = {.fd = sock, .events = POLLIN};
        size_t n = 0;
        ssize_t k;
        int r;

        for (size_t i = 0; i < prep->n_fds; i++)
                if (prep->fds[i] >= 0)
                        fds[n++] = prep->fds[i];
        for (size_t i = 0; i < prep->n_layer_fds; i++)
                fds[n++] = prep->layer_fds[i];
        r = send_with_fds(sock, "go", 2, fds, n);
        /* An image's layers: a message of their own (at most 64 each). */
        /* "im", then the layers in batches (vm_image_layers_recv()). */
        if (r >= 0 && n_image_fds > 0)
                r = send_with_fds(sock, "im", 2, NULL, 0);
        if (r >= 0 && n_image_fds > 0)
                r = send_fds_batched(sock, image_fds, n_image_fds);
        if (r < 0)
                return hutch_error_set(reterr, -r, "failed to start the layers' helper: %s",
                                       strerror(-r));
        r = poll(&pfd, 1, VM_LAYERS_TIMEOUT_MS);
        if (r <= 0)
                return hutch_error_set(reterr, ETIMEDOUT,
                                       "the sandbox's layers were not mounted within %d ms",
                                       VM_LAYERS_TIMEOUT_MS);
        k = recv_with_fds(sock, msg, VM_LAYERS_MSG_MAX, l->share_fds, ELEMENTSOF(l->share_fds));
        if (k < 0)
                return hutch_error_set(reterr, (int)-k, "failed to read the layers: %s",
                                       strerror((int)-k));
        msg[k] = '\0';
        for (l->n_share_fds = 0;
             l->n_share_fds < ELEMENTSOF(l->share_fds) && l->share_fds[l->n_share_fds] >= 0;
             l->n_share_fds++)
                ;
        if (k >= 7 && strncmp(msg, "error: ", 7) == 0)
                return hutch_error_set(reterr, EIO, "failed to mount the sandbox's layers: %s",
                                       msg + 7);
        if (k != 2 || memcmp(msg, "ok", 2) != 0)
                return hutch_error_set(reterr, EPROTO,
                                       "the layers' helper ended without an answer");
        return 0;
}

int vm_layers_open(const VmRun *v, const SandboxLayerPaths *layers, VmLayers *ret,
                   HutchError *reterr) {
        _cleanup_free_ char *stage = NULL;
        _cleanup_close_ int pidfd = -EBADF;
        VmLayers l = VM_LAYERS_NULL;
        Prepared prep = {};
        IdMapping idmap;
        int socks[2], status = 0, r;
        int image_fds[IMAGE_ROOT_MAX_LAYERS];
        size_t n_image_fds = 0;
        pid_t pid;

        for (size_t i = 0; i < ELEMENTSOF(image_fds); i++)
                image_fds[i] = -EBADF;

        for (size_t i = 0; i < ELEMENTSOF(l.share_fds); i++)
                l.share_fds[i] = -EBADF;
        /* vm_run_prepare()'s: as root, the sandbox's range of the pool,
         * with the store's range as the layers' owner. */
        idmap = v->idmap;
        if (asprintf(&stage, "%s/stage", v->run_dir) < 0) {
                stage = NULL;
                return -ENOMEM;
        }
        if (mkdir(stage, 0700) < 0)
                return hutch_error_set(reterr, errno, "cannot create '%s': %m", stage);
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, socks) < 0)
                return hutch_error_set(reterr, errno, "socketpair: %m");
        pid = sandbox_clone(CLONE_NEWUSER | CLONE_NEWNS, &pidfd);
        if (pid == 0) {
                Helper h = {
                        .policy = v->policy,
                        .layers = layers,
                        .image = v->image,
                        .stage = stage,
                        .sock = socks[1],
                        .privileged = idmap.privileged,
                };

                (void)close(socks[0]);
                helper_main(&h);
        }
        (void)close(socks[1]);
        if (pid < 0) {
                (void)close(socks[0]);
                return hutch_error_set(reterr, -pid,
                                       "failed to create the sandbox's namespaces: %s (see 'hutch "
                                       "doctor')",
                                       strerror(-pid));
        }
        r = sandbox_userns_adopt(pid, &idmap, &l.userns_fd, reterr);
        /* A one-shot run's writable trees through the sandbox's root
         * alone, as vm_oneshot_open() maps them. */
        if (r >= 0)
                r = sandbox_prepare_mounts(v->policy, layers, &idmap, pid, !layers, &prep, reterr);
        /* As root, an image's layers idmapped through the sandbox's
         * namespace, as the namespace backend mounts them. */
        if (r >= 0 && v->image && idmap.privileged) {
                r = vm_image_layers_open(v->image, l.userns_fd, image_fds, reterr);
                n_image_fds = strv_length(v->image->layers);
        }
        if (r >= 0)
                r = open_dirs(v, idmap.privileged, l.userns_fd, &l, reterr);
        if (r >= 0)
                r = helper_talk(socks[0], &prep, image_fds, n_image_fds, &l, reterr);
        prepared_done(&prep);
        for (size_t i = 0; i < ELEMENTSOF(image_fds); i++)
                image_fds[i] = safe_close(image_fds[i]);
        (void)close(socks[0]);
        if (r < 0)
                (void)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
        (void)waitpid(pid, &status, 0);
        if (r < 0) {
                vm_layers_done(&l);
                return r;
        }
        *ret = l;
        return 0;
}

void vm_layers_done(VmLayers *l) {
        l->userns_fd = safe_close(l->userns_fd);
        l->cache_fd = safe_close(l->cache_fd);
        l->template_fd = safe_close(l->template_fd);
        l->run_fd = safe_close(l->run_fd);
        for (size_t i = 0; i < l->n_share_fds; i++)
                l->share_fds[i] = safe_close(l->share_fds[i]);
        l->n_share_fds = 0;
}

void vm_layers_configure(const VmLayers *l, const VmRun *v, VmConfig *c) {
        c->in_userns = true;
        c->userns_fd = l->userns_fd;
        /* SECURITY: the guest sees the sandbox's ids from VM_GUEST_ID_BASE
         * on, never 0 (issue 26). */
        c->guest_id = VM_GUEST_ID_BASE;
        c->userns_count = vm_run_ids(v);
        c->userns_ranged = v->idmap.ranged;
        c->n_dirs = 0;
        /* The shares first: their names are below the run directory. */
        for (size_t i = 0; i < l->n_share_fds && v->share_names[i]; i++)
                c->dirs[c->n_dirs++] = (VmDir){.path = v->share_names[i], .fd = l->share_fds[i]};
        c->dirs[c->n_dirs++] = (VmDir){.path = v->cache_dir, .fd = l->cache_fd};
        c->dirs[c->n_dirs++] = (VmDir){.path = v->template_dir, .fd = l->template_fd};
        c->dirs[c->n_dirs++] = (VmDir){.path = v->run_dir, .fd = l->run_fd};
}

int vm_oneshot_open(VmRun *v, VmLayers *ret, HutchError *reterr) {
        _cleanup_close_ int rw_userns_fd = -EBADF;
        VmLayers l = VM_LAYERS_NULL;
        Prepared prep = {};
        IdMapping root_only = v->idmap;
        size_t k = 0;
        int r;

        for (size_t i = 0; i < ELEMENTSOF(l.share_fds); i++)
                l.share_fds[i] = -EBADF;
        for (size_t i = 0; i < ELEMENTSOF(prep.fds); i++)
                prep.fds[i] = -EBADF;
        for (size_t i = 0; i < ELEMENTSOF(prep.layer_fds); i++)
                prep.layer_fds[i] = -EBADF;
        prep.n_fds = 1 + v->policy->n_binds;
        if (!v->idmap.privileged)
                return hutch_error_set(reterr, EPERM, "a one-shot VM's namespace needs root");
        /* SECURITY: what QEMU writes is mapped through a namespace of the
         * sandbox's root alone (the caller's files are that root's, and
         * nothing else is mapped): no chown of QEMU's gives a host file to
         * another id. What it only reads, through the sandbox's whole
         * range, as the namespace backend maps it. */
        root_only.count = 1;
        r = sandbox_userns_make(&v->idmap, &l.userns_fd, reterr);
        if (r >= 0)
                r = sandbox_userns_make(&root_only, &rw_userns_fd, reterr);
        if (r >= 0)
                r = sandbox_prepare_trees(v->policy, l.userns_fd, rw_userns_fd, &prep, reterr);
        if (r >= 0)
                r = open_dirs(v, true, rw_userns_fd, &l, reterr);
        /* The shares QEMU reaches through a descriptor, in
         * VmRun.share_names' order: the workspace, the binds. */
        for (size_t i = 0; r >= 0 && i < prep.n_fds; i++) {
                const char *path = i == 0 ? v->policy->workspace : v->policy->binds[i - 1].source;

                if (prep.fds[i] < 0)
                        continue;
                v->share_names[k] = strdup(path);
                if (!v->share_names[k])
                        r = -ENOMEM;
                else
                        l.share_fds[k++] = TAKE_FD(prep.fds[i]);
        }
        l.n_share_fds = k;
        prepared_done(&prep);
        if (r < 0) {
                vm_layers_done(&l);
                return r;
        }
        *ret = l;
        return 0;
}
