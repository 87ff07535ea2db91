/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "image/image-store.h"
#include "sandbox/image-root.h"
#include "store/store.h"
#include "strv.h"

_Static_assert(IMAGE_ROOT_MAX_LAYERS == IMAGE_LAYERS_MAX, "an image of the store fits a sandbox");

/* Removes the run's mark, in the process that took it only (a forked
 * child freeing its copy leaves it). */
static void image_root_unmark_run(ImageRoot *img) {
        _cleanup_(store_freep) Store *store = NULL;
        _cleanup_(image_store_freep) ImageStore *is = NULL;
        HutchError ignored = {};
        int pid = 0;

        if (!img->run_mark)
                return;
        if (sscanf(img->run_mark, "%d-", &pid) == 1 && pid == (int)getpid() &&
            store_open(&store, &ignored) >= 0 && image_store_open(store, &is, &ignored) >= 0)
                (void)image_store_unuse(is, img->digest, "run", img->run_mark, &ignored);
        img->run_mark = mfree(img->run_mark);
}

ImageRoot *image_root_free(ImageRoot *img) {
        if (!img)
                return NULL;
        image_root_unmark_run(img);
        free(img->name);
        free(img->digest);
        strv_free(img->layers);
        strv_free(img->env);
        free(img->workdir);
        free(img->user);
        strv_free(img->entrypoint);
        strv_free(img->cmd);
        free(img);
        return NULL;
}

int image_root_mark_run(ImageRoot *img, HutchError *reterr) {
        _cleanup_(store_freep) Store *store = NULL;
        _cleanup_(image_store_freep) ImageStore *is = NULL;
        _cleanup_free_ char *holder = NULL;
        int r;

        r = image_store_run_holder(getpid(), &holder);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot name this run: %s", strerror(-r));
        r = store_open(&store, reterr);
        if (r < 0)
                return r;
        r = image_store_open(store, &is, reterr);
        if (r < 0)
                return r;
        r = image_store_use(is, img->digest, "run", holder, reterr);
        if (r < 0)
                return r;
        img->run_mark = TAKE_PTR(holder);
        return 0;
}

int image_root_command(const ImageRoot *img, char *const *argv, char ***ret, HutchError *reterr) {
        _cleanup_strv_free_ char **l = NULL;
        char *const *tail = argv && argv[0] ? argv : img->cmd;
        int r;

        for (size_t i = 0; img->entrypoint && img->entrypoint[i]; i++) {
                r = strv_extend(&l, img->entrypoint[i]);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; tail && tail[i]; i++) {
                r = strv_extend(&l, tail[i]);
                if (r < 0)
                        return r;
        }
        if (!l || !l[0])
                return hutch_error_set(reterr, EINVAL,
                                       "missing command: the image '%s' has no Entrypoint or Cmd "
                                       "(usage: hutch run --image %s [FLAGS] -- CMD [ARGS...])",
                                       img->name, img->name);
        *ret = TAKE_PTR(l);
        return 0;
}

int image_root_resolve(const char *name, ImageRoot **ret, HutchError *reterr) {
        _cleanup_(store_freep) Store *store = NULL;
        _cleanup_(image_store_freep) ImageStore *is = NULL;
        _cleanup_(image_freep) Image *im = NULL;
        _cleanup_(image_root_freep) ImageRoot *img = NULL;
        HutchError err = {};
        int r;

        r = store_open(&store, reterr);
        if (r < 0)
                return r;
        r = image_store_open(store, &is, reterr);
        if (r < 0)
                return r;
        r = image_store_resolve(is, name, &im, &err);
        if (r == -ENOENT)
                return hutch_error_set(reterr, ENOENT,
                                       "no image '%s' in the image store (hutch image ls lists "
                                       "them; hutch image import or pull adds one)",
                                       name);
        if (r < 0) {
                if (reterr)
                        *reterr = err;
                return r;
        }
        if (im->n_layers == 0 || im->n_layers > IMAGE_ROOT_MAX_LAYERS)
                return hutch_error_set(reterr, E2BIG,
                                       "the image '%s' has %zu layers (1 to %d can be a sandbox's "
                                       "root)",
                                       name, im->n_layers, IMAGE_ROOT_MAX_LAYERS);
        /* Both backends, one-shot and persistent (docs/images-run.md). */
        r = image_check_platform(im, name, reterr);
        if (r < 0)
                return r;

        img = calloc(1, sizeof(*img));
        if (!img)
                return -ENOMEM;
        img->layers = calloc(im->n_layers + 1, sizeof(char *));
        img->name = strdup(name);
        if (!img->layers || !img->name)
                return -ENOMEM;
        /* The store lists them lowest first; the overlay wants the top first. */
        for (size_t i = 0; i < im->n_layers; i++)
                img->layers[i] = TAKE_PTR(im->layers[im->n_layers - 1 - i].path);
        img->digest = TAKE_PTR(im->digest);
        img->env = TAKE_PTR(im->config.env);
        img->user = TAKE_PTR(im->config.user);
        img->entrypoint = TAKE_PTR(im->config.entrypoint);
        img->cmd = TAKE_PTR(im->config.cmd);
        if (im->config.working_dir && im->config.working_dir[0] == '/')
                img->workdir = TAKE_PTR(im->config.working_dir);
        *ret = TAKE_PTR(img);
        return 0;
}
