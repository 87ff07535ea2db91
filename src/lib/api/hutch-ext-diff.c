/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch-ext.h's diff and apply: persist_diff() and persist_apply() over
 * the store, the workspace view held for the printing. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>

#include "api/hutch-ext.h"
#include "api/persist.h"
#include "store/diff.h"
#include "store/store.h"
#include "strv.h"

struct HutchExtDiff {
        Store *store;
        WsView view;
        WsChange *changes;
        size_t n, n_all;
};

HutchExtDiff *hutch_ext_diff_free(HutchExtDiff *d) {
        if (!d)
                return NULL;
        (void)ws_changes_free(d->changes, d->n_all);
        ws_view_done(&d->view);
        (void)store_free(d->store);
        free(d);
        return NULL;
}

int hutch_ext_paths_normalize(char **paths, HutchError *reterr) {
        return persist_paths_normalize(paths, reterr);
}

int hutch_ext_diff_open(const char *name, char **paths, HutchExtDiff **ret, HutchError *reterr) {
        HutchExtDiff *d;
        int r;

        d = calloc(1, sizeof(*d));
        if (!d)
                return -ENOMEM;
        d->view = WS_VIEW_NULL;
        r = store_open(&d->store, reterr);
        if (r >= 0)
                r = store_enter_range(d->store, reterr);
        if (r >= 0)
                r = persist_diff(d->store, name, paths, &d->view, &d->changes, &d->n, &d->n_all,
                                 reterr);
        if (r < 0) {
                (void)hutch_ext_diff_free(d);
                return r;
        }
        *ret = d;
        return 0;
}

size_t hutch_ext_diff_count(const HutchExtDiff *d) {
        return d->n;
}

int hutch_ext_diff_entry(const HutchExtDiff *d, size_t i, char **ret_path) {
        int r;

        r = ws_path_escape(d->changes[i].path, ret_path);
        if (r < 0)
                return r;
        return d->changes[i].type == WS_ENTRY_FILE;
}

int hutch_ext_diff_json(const HutchExtDiff *d, char **ret_text) {
        json_t *j = NULL;
        char *text;
        int r;

        r = ws_diff_to_json(d->changes, d->n, &j);
        if (r < 0)
                return r;
        /* NULL when there was no memory for the text (the CLI prints []). */
        text = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        *ret_text = text;
        return 0;
}

int hutch_ext_diff_name_status(const HutchExtDiff *d, FILE *f) {
        return ws_diff_print_stat(f, d->changes, d->n);
}

int hutch_ext_diff_patch(const HutchExtDiff *d, size_t i, int fd, HutchError *reterr) {
        const WsView *v = &d->view;

        if (i == HUTCH_EXT_DIFF_ALL)
                return ws_diff_write_patch(v->layer_fds, v->n_layers, v->host_fd, d->changes, d->n,
                                           fd, reterr);
        return ws_diff_write_patch(v->layer_fds, v->n_layers, v->host_fd, d->changes + i, 1, fd,
                                   reterr);
}

void hutch_ext_apply_done(HutchExtApply *a) {
        if (!a)
                return;
        strv_free(a->conflicts);
        strv_free(a->modes_kept);
        free(a->workspace);
        *a = (HutchExtApply){};
}

int hutch_ext_apply(const char *name, char **paths, bool force, bool modes, HutchExtApply *ret,
                    HutchError *reterr) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(persist_apply_done) PersistApply a = {};
        WsApplyFlags flags = (force ? WS_APPLY_FORCE : 0) | (modes ? WS_APPLY_MODES : 0);
        int r;

        *ret = (HutchExtApply){};
        r = store_open(&s, reterr);
        if (r < 0)
                return r;
        r = store_enter_range(s, reterr);
        if (r < 0)
                return r;
        r = persist_apply(s, name, paths, flags, &a, reterr);
        *ret = (HutchExtApply){
                .conflicts = TAKE_PTR(a.res.conflicts),
                .modes_kept = TAKE_PTR(a.res.modes_kept),
                .n_applied = a.res.n_applied,
                .applied = a.applied,
                .workspace = TAKE_PTR(a.workspace),
        };
        return r;
}
