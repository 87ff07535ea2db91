/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <string.h>

#include "cli-util.h"
#include "cli.h"
#include "log.h"

int cli_fail(const HutchError *err, int r) {
        log_error("%s", err && err->msg[0] ? err->msg : strerror(-r));
        return HUTCH_EXIT_FAILURE;
}

int cli_store_open(const char *name, Store **ret_store, SandboxRecord **ret_rec) {
        _cleanup_(store_freep) Store *s = NULL;
        HutchError err = {};
        int r;

        r = store_open(&s, &err);
        if (r < 0)
                return cli_fail(&err, r);
        if (name) {
                r = store_sandbox_load(s, name, ret_rec, &err);
                if (r < 0)
                        return cli_fail(&err, r);
        }
        *ret_store = TAKE_PTR(s);
        return 0;
}
