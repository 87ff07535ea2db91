/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch-ext.h's one-shot run: sandbox_run() and its outcome. */
#include <stdlib.h>

#include "api/hutch-ext.h"
#include "sandbox/sandbox.h"

void hutch_ext_outcome_done(HutchExtOutcome *o) {
        if (!o)
                return;
        free(o->denied);
        free(o->json);
        *o = HUTCH_EXT_OUTCOME_NULL;
}

int hutch_ext_run(const Policy *policy, char *const *argv, char *const *env, bool tty,
                  HutchExtOutcome *ret, HutchError *reterr) {
        _cleanup_(outcome_done) Outcome o = {};
        char *json = NULL;
        int r;

        if (tty)
                sandbox_set_command_tty(true);
        r = sandbox_run(policy, argv, env, &o, reterr);
        if (tty)
                sandbox_set_command_tty(false);
        if (r < 0)
                return r;
        /* Without memory for it, NULL: the caller says so where it writes it. */
        if (outcome_to_json(&o, &json) < 0)
                json = NULL;
        *ret = (HutchExtOutcome){
                .exit_code = o.exit_code,
                .degraded = o.degraded,
                .denied = TAKE_PTR(o.denied),
                .json = json,
        };
        return 0;
}
