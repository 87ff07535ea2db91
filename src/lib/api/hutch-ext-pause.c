/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch-ext.h's pause that keeps memory (issue 20): the keeper's
 * "pause"/"unpause" (sandbox/keeper.h); and its halt, E2B's kill. */
#include <errno.h>

#include "api/hutch-ext.h"
#include "api/persist.h"
#include "fd-util.h"
#include "sandbox/keeper.h"
#include "store/store.h"

int hutch_ext_pause(const char *name, bool on, HutchError *reterr) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_close_ int sock = -EBADF;
        int r;

        if (!name)
                return hutch_error_set(reterr, EINVAL, "no sandbox name given");
        r = store_open(&s, reterr);
        if (r < 0)
                return r;
        r = persist_connect(s, name, false, &sock, reterr);
        if (r == -ENOENT || r == -ECONNREFUSED)
                return hutch_error_set(reterr, ENOTCONN, "sandbox '%s' is not running", name);
        if (r < 0)
                return r;
        return keeper_simple(sock, on ? "pause" : "unpause", reterr);
}

int hutch_ext_halt(const char *name, int *ret_keeper, HutchError *reterr) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        int pidfd = -EBADF, r;

        if (!name || !ret_keeper)
                return hutch_error_set(reterr, EINVAL, "no sandbox name given");
        r = store_open_sandbox(&s, name, &rec, reterr);
        if (r >= 0)
                r = persist_halt(s, rec->name, &pidfd, reterr);
        if (r < 0)
                return r;
        *ret_keeper = pidfd;
        return 0;
}
