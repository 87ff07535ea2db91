/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <string.h>

#include "api/persist.h"
#include "image/image-store.h"

int persist_image_digest(Store *s, const char *ref, char **ret, HutchError *reterr) {
        _cleanup_(image_store_freep) ImageStore *is = NULL;
        _cleanup_(image_freep) Image *im = NULL;
        int r;

        r = image_store_open(s, &is, reterr);
        if (r < 0)
                return r;
        r = image_store_resolve(is, ref, &im, reterr);
        if (r == -ENOENT)
                return hutch_error_set(reterr, ENOENT,
                                       "no image '%s' in the image store (hutch image ls lists "
                                       "them; hutch image import or pull adds one)",
                                       ref);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(im->digest);
        return 0;
}

int persist_image_name(Store *s, const char *ref, char **ret) {
        _cleanup_(image_store_freep) ImageStore *is = NULL;
        _cleanup_(image_freep) Image *im = NULL;
        int r;

        *ret = NULL;
        r = image_store_open(s, &is, NULL);
        if (r >= 0)
                r = image_store_resolve(is, ref, &im, NULL);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        if (im->names && im->names[0]) {
                *ret = strdup(im->names[0]);
                if (!*ret)
                        return -ENOMEM;
        }
        return 0;
}

int persist_image_pin(Store *s, Policy *p, HutchError *reterr) {
        _cleanup_(image_store_freep) ImageStore *is = NULL;
        _cleanup_(image_freep) Image *im = NULL;
        _cleanup_free_ char *digest = NULL;
        int r;

        if (!p->image)
                return 0;
        r = persist_image_digest(s, p->image, &digest, reterr);
        if (r < 0)
                return r;
        /* An image of another platform is refused before the sandbox is
         * made (docs/images-run.md), as a run refuses it. */
        r = image_store_open(s, &is, reterr);
        if (r >= 0)
                r = image_store_resolve(is, digest, &im, reterr);
        if (r >= 0)
                r = image_check_platform(im, p->image, reterr);
        if (r < 0)
                return r;
        return policy_set_image(p, digest, reterr);
}

static int image_mark(Store *s, const char *policy_json, const char *kind, const char *holder,
                      bool use, HutchError *reterr) {
        _cleanup_(image_store_freep) ImageStore *is = NULL;
        _cleanup_(policy_freep) Policy *p = NULL;
        int r;

        if (!policy_json)
                return 0;
        p = policy_new();
        if (!p)
                return -ENOMEM;
        r = policy_load_json(p, policy_json, strlen(policy_json), reterr);
        if (r < 0)
                return r;
        if (!p->image)
                return 0;
        r = image_store_open(s, &is, reterr);
        if (r < 0)
                return r;
        if (use)
                return image_store_use(is, p->image, kind, holder, reterr);
        return image_store_unuse(is, p->image, kind, holder, reterr);
}

int persist_image_mark(Store *s, const char *policy_json, const char *kind, const char *holder,
                       HutchError *reterr) {
        return image_mark(s, policy_json, kind, holder, true, reterr);
}

int persist_image_unmark(Store *s, const char *policy_json, const char *kind, const char *holder) {
        HutchError ignored = {};

        return image_mark(s, policy_json, kind, holder, false, &ignored);
}
