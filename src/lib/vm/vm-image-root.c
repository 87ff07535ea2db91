/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

#include "fd-util.h"
#include "macro.h"
#include "sandbox/host-setup.h"
#include "strv.h"
#include "vm/vm-image-root.h"

int vm_image_resolve(const Policy *p, bool mark_run, ImageRoot **ret, HutchError *reterr) {
        _cleanup_(image_root_freep) ImageRoot *img = NULL;
        int r;

        r = image_root_resolve(p->image, &img, reterr);
        if (r < 0)
                return r;
        if (mark_run) {
                r = image_root_mark_run(img, reterr);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(img);
        return 0;
}

int vm_image_layers_open(const ImageRoot *img, int userns_fd, int *fds, HutchError *reterr) {
        size_t n = strv_length(img->layers);
        int r;

        if (n == 0 || n > IMAGE_ROOT_MAX_LAYERS)
                return hutch_error_set(reterr, E2BIG, "the image '%s' has %zu layers", img->name,
                                       n);
        for (size_t i = 0; i < n; i++) {
                r = sandbox_open_detached_tree(img->layers[i], userns_fd, true, &fds[i], reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}

int vm_image_layers_recv(int sock, const ImageRoot *img, int *fds, HutchError *reterr) {
        size_t n = strv_length(img->layers);
        char tag[4];
        ssize_t k;
        int r;

        for (size_t i = 0; i < IMAGE_ROOT_MAX_LAYERS; i++)
                fds[i] = -EBADF;
        if (n == 0 || n > IMAGE_ROOT_MAX_LAYERS)
                return hutch_error_set(reterr, E2BIG, "the image '%s' has %zu layers", img->name,
                                       n);
        k = recv_with_fds(sock, tag, sizeof(tag), NULL, 0);
        if (k != 2 || memcmp(tag, "im", 2) != 0)
                return hutch_error_set(reterr, EPROTO, "no image layers from the keeper");
        /* Exactly one per layer, in batches (send_fds_batched()). */
        r = recv_fds_batched(sock, fds, n);
        if (r < 0)
                return hutch_error_set(reterr, -r,
                                       "the image's layers do not match the keeper's message: %s",
                                       strerror(-r));
        return 0;
}

int vm_image_root_mount(const Policy *p, const RootfsLayers *l, const ImageRoot *img,
                        const int *fds, HutchError *reterr) {
        RootfsImage image = {
                .layer_fds = fds,
                .layer_paths = img->layers,
                .n_layers = strv_length(img->layers),
        };
        RootfsConfig c = {
                .policy = p,
                .workspace_fd = -EBADF,
                .layers = l,
                .image = &image,
        };

        for (size_t i = 0; i < image.n_layers; i++)
                if (fds[i] < 0)
                        return hutch_error_set(reterr, EBADF,
                                               "a layer of the image '%s' is not open", img->name);
        return rootfs_image_root_mount(&c, reterr);
}

/* Makes the directory @path (absolute) below @root, component by
 * component, never following a symlink. */
static int mount_point_make(int root, const char *path, HutchError *reterr) {
        _cleanup_close_ int dir = -EBADF;
        char buf[4096];
        char *save = NULL;

        if (strlen(path) >= sizeof(buf))
                return hutch_error_set(reterr, ENAMETOOLONG, "the path '%s' is too long", path);
        memcpy(buf, path, strlen(path) + 1);
        dir = fcntl(root, F_DUPFD_CLOEXEC, 3);
        if (dir < 0)
                return hutch_error_set(reterr, errno, "failed to open the image's root: %m");
        for (char *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
                int next;

                if (strcmp(c, ".") == 0 || strcmp(c, "..") == 0)
                        return hutch_error_set(reterr, EINVAL, "invalid mount point '%s'", path);
                if (mkdirat(dir, c, 0755) < 0 && errno != EEXIST)
                        return hutch_error_set(reterr, errno,
                                               "failed to create the mount point '%s': %m", path);
                next = openat(dir, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (next < 0 && (errno == ENOTDIR || errno == ELOOP))
                        return hutch_error_set(reterr, ENOTDIR,
                                               "the image's '%s' is not a directory (hutch mounts "
                                               "'%s' there)",
                                               c, path);
                if (next < 0)
                        return hutch_error_set(reterr, errno, "failed to open '%s': %m", path);
                (void)close(dir);
                dir = next;
        }
        return 0;
}

int vm_image_mount_points(const Policy *p, HutchError *reterr) {
        _cleanup_close_ int root = -EBADF;
        int r = 0;

        root = open(ROOTFS_IMAGE_ROOT, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (root < 0)
                return hutch_error_set(reterr, errno, "failed to open the image's root: %m");
        if (p->workspace)
                r = mount_point_make(root, POLICY_SANDBOX_WORKSPACE, reterr);
        for (size_t i = 0; r >= 0 && i < p->n_binds; i++)
                r = mount_point_make(root, p->binds[i].target, reterr);
        for (size_t i = 0; r >= 0 && i < p->n_tmpfs; i++)
                if (strncmp(p->tmpfs[i].path, "/dev/", 5) != 0)
                        r = mount_point_make(root, p->tmpfs[i].path, reterr);
        return r;
}
