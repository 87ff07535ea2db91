/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch-ext.h's snapshots: the store's records as the CLI shows them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/hutch-ext.h"
#include "api/persist.h"
#include "store/store.h"
#include "strv.h"

void hutch_ext_snapshot_done(HutchExtSnapshot *s) {
        if (!s)
                return;
        free(s->name);
        free(s->id);
        free(s->parent);
        free(s->origin);
        free(s->policy_json);
        free(s->suggested_policy_json);
        *s = (HutchExtSnapshot){};
}

HutchExtSnapshot *hutch_ext_snapshots_free(HutchExtSnapshot *l, size_t n) {
        if (!l)
                return NULL;
        for (size_t i = 0; i < n; i++)
                hutch_ext_snapshot_done(l + i);
        free(l);
        return NULL;
}

/* Moves what @rec owns that @ret shows into @ret. */
static void snapshot_take(SnapshotRecord *rec, HutchExtSnapshot *ret) {
        *ret = (HutchExtSnapshot){
                .name = TAKE_PTR(rec->name),
                .id = TAKE_PTR(rec->id),
                .created_ms = rec->created_ms,
                .parent = TAKE_PTR(rec->parent),
                .origin = TAKE_PTR(rec->origin),
                .imported = rec->imported,
                .policy_json = TAKE_PTR(rec->policy_json),
                .suggested_policy_json = TAKE_PTR(rec->suggested_policy_json),
        };
}

int hutch_ext_snapshot(const char *name, const char *snap, char **ret_snap, bool *ret_running,
                       char **ret_sandbox, HutchError *reterr) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        bool running = false;
        int r;

        r = store_open(&s, reterr);
        if (r < 0)
                return r;
        r = persist_snapshot(s, name, snap, ret_snap, &running, reterr);
        if (r < 0)
                return r;
        if (ret_running)
                *ret_running = running;
        if (ret_sandbox)
                *ret_sandbox = running && store_sandbox_load(s, name, &rec, NULL) >= 0
                                       ? strdup(rec->name)
                                       : NULL;
        return 0;
}

static int names(Store *s, char ***ret, HutchError *reterr) {
        int r;

        r = store_list(s, "snapshots", ret);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot list the snapshots: %s", strerror(-r));
        return 0;
}

int hutch_ext_snapshot_names(char ***ret, HutchError *reterr) {
        _cleanup_(store_freep) Store *s = NULL;
        int r;

        r = store_open(&s, reterr);
        if (r < 0)
                return r;
        return names(s, ret, reterr);
}

int hutch_ext_snapshot_list(HutchExtSnapshot **ret, size_t *ret_n, HutchError *reterr) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_strv_free_ char **l = NULL;
        HutchExtSnapshot *out;
        size_t n = 0;
        int r;

        r = store_open(&s, reterr);
        if (r < 0)
                return r;
        r = names(s, &l, reterr);
        if (r < 0)
                return r;
        out = calloc(strv_length(l) + 1, sizeof(*out));
        if (!out)
                return -ENOMEM;
        STRV_FOREACH(name, l) {
                _cleanup_(snapshot_record_freep) SnapshotRecord *rec = NULL;
                _cleanup_free_ char *dir = NULL;

                if (store_snapshot_load(s, *name, &rec, NULL) < 0)
                        continue;
                snapshot_take(rec, out + n);
                out[n].disk_bytes = store_snapshot_path(s, out[n].name, NULL, &dir) >= 0
                                            ? store_disk_usage(dir)
                                            : 0;
                n++;
        }
        *ret = out;
        *ret_n = n;
        return 0;
}

int hutch_ext_snapshot_get(const char *snap, HutchExtSnapshot *ret, HutchError *reterr) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(snapshot_record_freep) SnapshotRecord *rec = NULL;
        int r;

        r = store_open(&s, reterr);
        if (r < 0)
                return r;
        r = store_snapshot_load(s, snap, &rec, reterr);
        if (r < 0)
                return r;
        snapshot_take(rec, ret);
        return 0;
}

int hutch_ext_snapshot_remove(const char *snap, HutchError *reterr) {
        _cleanup_(store_freep) Store *s = NULL;
        int r;

        r = store_open(&s, reterr);
        if (r < 0)
                return r;
        return persist_snapshot_remove(s, snap, reterr);
}
