/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch-ext.h's image store: what hutch-image shows of image-store.h.
 * Only hutch-image calls the import (it alone links libarchive). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/hutch-ext.h"
#include "image/image-store.h"
#include "rm-rf.h"
#include "sha256.h"
#include "store/store.h"
#include "strv.h"

struct HutchExtImages {
        ImageStore *s;
};

int hutch_ext_images_open(HutchExtImages **ret, HutchError *reterr) {
        _cleanup_(store_freep) Store *store = NULL;
        HutchExtImages *h;
        int r;

        r = store_open(&store, reterr);
        if (r < 0)
                return r;
        h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        r = image_store_open(store, &h->s, reterr);
        if (r < 0) {
                free(h);
                return r;
        }
        *ret = h;
        return 0;
}

HutchExtImages *hutch_ext_images_free(HutchExtImages *h) {
        if (!h)
                return NULL;
        (void)image_store_free(h->s);
        free(h);
        return NULL;
}

void hutch_ext_image_done(HutchExtImage *im) {
        if (!im)
                return;
        free(im->digest);
        strv_free(im->names);
        free(im->json);
        *im = (HutchExtImage){};
}

HutchExtImage *hutch_ext_images_list_free(HutchExtImage *l, size_t n) {
        if (!l)
                return NULL;
        for (size_t i = 0; i < n; i++)
                hutch_ext_image_done(l + i);
        free(l);
        return NULL;
}

static int image_take(const Image *im, HutchExtImage *ret) {
        _cleanup_(hutch_ext_image_done) HutchExtImage x = {
                .n_layers = im->n_layers,
                .imported_ms = im->imported_ms,
                .skipped_devices = im->skipped_devices != 0,
        };

        x.digest = strdup(im->digest);
        if (!x.digest)
                return -ENOMEM;
        STRV_FOREACH(name, im->names)
                if (strv_extend(&x.names, image_ref_familiar(*name)) < 0)
                        return -ENOMEM;
        for (size_t i = 0; i < im->n_layers; i++)
                x.size += im->layers[i].size;
        if (image_to_json(im, &x.json) < 0)
                x.json = NULL;
        *ret = x;
        x = (HutchExtImage){};
        return 0;
}

int hutch_ext_image_import(HutchExtImages *h, const char *path, const char *name, int stdin_fd,
                           HutchExtImage *ret, HutchError *reterr) {
        _cleanup_(image_freep) Image *im = NULL;
        int r;

        r = image_store_import(h->s, path, name, stdin_fd, &im, reterr);
        if (r < 0)
                return r;
        return image_take(im, ret);
}

int hutch_ext_image_list(HutchExtImages *h, HutchExtImage **ret, size_t *ret_n,
                         HutchError *reterr) {
        Image **l = NULL;
        HutchExtImage *out;
        size_t n = 0;
        int r;

        r = image_store_list(h->s, &l, &n, reterr);
        if (r < 0)
                return r;
        out = calloc(n + 1, sizeof(*out));
        for (size_t i = 0; out && i < n; i++)
                if (image_take(l[i], out + i) < 0)
                        out = hutch_ext_images_list_free(out, n);
        image_list_free(l, n);
        if (!out)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        *ret = out;
        *ret_n = n;
        return 0;
}

int hutch_ext_image_get(HutchExtImages *h, const char *ref, HutchExtImage *ret,
                        HutchError *reterr) {
        _cleanup_(image_freep) Image *im = NULL;
        int r;

        r = image_store_resolve(h->s, ref, &im, reterr);
        if (r < 0)
                return r;
        r = image_take(im, ret);
        if (r < 0)
                return hutch_error_set(reterr, -r, "out of memory");
        return 0;
}

int hutch_ext_image_remove(HutchExtImages *h, const char *ref, bool *ret_gone, HutchError *reterr) {
        return image_store_remove(h->s, ref, ret_gone, reterr);
}

int hutch_ext_image_gc(HutchExtImages *h, unsigned *ret_removed, HutchError *reterr) {
        return image_store_gc(h->s, ret_removed, reterr);
}

bool hutch_ext_image_ref_is_valid(const char *ref) {
        return image_ref_is_valid(ref);
}

const char *hutch_ext_image_ref_familiar(const char *name) {
        return image_ref_familiar(name);
}

int hutch_ext_image_pull_dir(const HutchExtImages *h, const char *repository, char **ret_dir) {
        unsigned char d[SHA256_DIGEST_SIZE];
        char hex[33];
        Sha256 sha;

        sha256_init(&sha);
        sha256_update(&sha, repository, strlen(repository));
        sha256_finish(&sha, d);
        for (size_t i = 0; i < 16; i++)
                (void)snprintf(hex + 2 * i, 3, "%02x", d[i]);
        if (asprintf(ret_dir, "%s/.tmp-pull-%s", h->s->dir, hex) < 0)
                return -ENOMEM;
        return 0;
}

int hutch_ext_image_import_pulled(HutchExtImages *h, const char *dir, const char *name,
                                  HutchExtImage *ret, HutchError *reterr) {
        _cleanup_(image_freep) Image *im = NULL;
        const char *base = strrchr(dir, '/');
        int r;

        r = image_store_import(h->s, dir, name, -1, &im, reterr);
        /* Imported or not (its blobs matched their digests, so a failed
         * import is a bad image, not a bad download): the folder goes. */
        (void)rm_rf_at(h->s->dirfd, base ? base + 1 : dir);
        if (r < 0)
                return r;
        return image_take(im, ret);
}
