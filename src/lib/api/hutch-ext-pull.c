/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch-ext.h's registry client for hutch-pull (issue 16, h16x): the
 * reference's candidates and the confined pull of registry/registry.h.
 * Compiled into the registry library (src/lib/api/meson.build's
 * pull_ext_sources), not libhutch-core. */
#include <errno.h>
#include <stdlib.h>

#include "api/hutch-ext.h"
#include "registry/registry.h"

HutchExtPullRef *hutch_ext_pull_refs_free(HutchExtPullRef *l, size_t n) {
        if (!l)
                return NULL;
        for (size_t i = 0; i < n; i++)
                (void)image_ref_free(l[i].ref);
        free(l);
        return NULL;
}

int hutch_ext_pull_candidates(const char *s, HutchExtPullRef **ret, size_t *ret_n,
                              HutchError *reterr) {
        _cleanup_(image_refs_freep) ImageRef **refs = NULL;
        HutchExtPullRef *l;
        size_t n = 0;
        int r;

        r = image_ref_candidates(s, &refs, reterr);
        if (r < 0)
                return r;
        while (refs[n])
                n++;
        l = calloc(n, sizeof(*l));
        if (!l)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                ImageRef *ref = TAKE_PTR(refs[i]);

                l[i] = (HutchExtPullRef){
                        .domain = ref->domain,
                        .repository = ref->repository,
                        .tag = ref->tag,
                        .endpoint = image_ref_endpoint(ref),
                        .alias_where = ref->alias_where,
                        .insecure = ref->insecure,
                        .mirror = ref->mirror,
                        .ref = ref,
                };
        }
        *ret = l;
        *ret_n = n;
        return 0;
}

char *hutch_ext_pull_ref_string(const HutchExtPullRef *r) {
        return image_ref_to_string(r->ref);
}

int hutch_ext_pull(const HutchExtPullRef *r, const HutchExtPullOptions *o, const char *layout_dir,
                   char **ret_digest, int *ret_layout_fd, HutchError *reterr) {
        PullProgressOps ops = {};
        PullOptions po = {
                .tls_verify = o->tls_verify,
                .os = o->os,
                .arch = o->arch,
                .variant = o->variant,
                .cert_dir = o->cert_dir,
                .auth_file = o->auth_file,
        };

        if (o->progress) {
                ops = (PullProgressOps){o->progress->begin, o->progress->end,
                                        o->progress->userdata};
                po.progress = &ops;
        }
        return registry_pull_confined(r->ref, &po, layout_dir, ret_digest, ret_layout_fd, reterr);
}
