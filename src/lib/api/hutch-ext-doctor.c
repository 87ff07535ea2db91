/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch-ext.h's doctor: the probes of doctor/features.h as the CLI prints
 * them. */
#include <errno.h>
#include <stdlib.h>

#include "api/hutch-ext.h"
#include "doctor/features.h"

HutchExtCheck *hutch_ext_checks_free(HutchExtCheck *c, size_t n) {
        if (!c)
                return NULL;
        for (size_t i = 0; i < n; i++)
                free(c[i].detail);
        free(c);
        return NULL;
}

int hutch_ext_doctor_probe(HutchExtCheck **ret, size_t *ret_n, const char **ret_failed) {
        HutchExtCheck *c;

        c = calloc(_FEATURE_ID_MAX, sizeof(*c));
        if (!c)
                return -ENOMEM;
        for (FeatureId id = 0; id < _FEATURE_ID_MAX; id++) {
                FeatureCheck check = {};
                int r;

                r = feature_probe(id, &check);
                if (r < 0) {
                        (void)hutch_ext_checks_free(c, _FEATURE_ID_MAX);
                        if (ret_failed)
                                *ret_failed = feature_id_to_string(id);
                        return r;
                }
                c[id] = (HutchExtCheck){
                        .name = feature_id_to_string(id),
                        .status = feature_status_to_string(check.status),
                        .impact = feature_impact(id, check.status),
                        .detail = check.detail, /* ours now */
                        .required = feature_is_required(id),
                        .missing = check.status == FEATURE_MISSING,
                };
        }
        *ret = c;
        *ret_n = _FEATURE_ID_MAX;
        return 0;
}
