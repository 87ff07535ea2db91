/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch diff / hutch apply: a persistent sandbox's changes to its overlay
 * workspace, shown or written back to the host folder (docs/persistent.md). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "api/persist.h"
#include "cli.h"
#include "fd-util.h"
#include "log.h"
#include "persist.h"
#include "store/diff.h"
#include "store/store.h"
#include "strv.h"

static int fail(const HutchError *err, int r) {
        log_error("%s", err->msg[0] ? err->msg : strerror(-r));
        return HUTCH_EXIT_FAILURE;
}

int verb_diff(int argc, char **argv) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(ws_view_done) WsView v = WS_VIEW_NULL;
        _cleanup_strv_free_ char **paths = NULL;
        WsChange *changes = NULL;
        size_t n = 0, n_all = 0;
        const char *name = NULL;
        bool stat_only = false, as_json = false;
        HutchError err = {};
        int r;

        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--stat") == 0)
                        stat_only = true;
                else if (strcmp(argv[i], "--json") == 0)
                        as_json = true;
                else if (argv[i][0] == '-' && strcmp(argv[i], "--") != 0) {
                        log_error("usage: hutch diff NAME [--stat | --json] [PATH...]");
                        return HUTCH_EXIT_FAILURE;
                } else if (strcmp(argv[i], "--") == 0)
                        continue;
                else if (!name)
                        name = argv[i];
                else if (strv_extend(&paths, argv[i]) < 0)
                        return HUTCH_EXIT_FAILURE;
        }
        if (!name || (stat_only && as_json)) {
                log_error("usage: hutch diff NAME [--stat | --json] [PATH...]");
                return HUTCH_EXIT_FAILURE;
        }
        r = persist_paths_normalize(paths, &err);
        if (r < 0)
                return fail(&err, r);
        r = persist_open(NULL, &s, NULL);
        if (r != 0)
                return r;
        r = persist_diff(s, name, paths, &v, &changes, &n, &n_all, &err);
        if (r < 0)
                return fail(&err, r);
        if (as_json) {
                json_t *j = NULL;
                _cleanup_free_ char *text = NULL;

                r = ws_diff_to_json(changes, n, &j);
                if (r >= 0) {
                        text = json_dumps(j, JSON_COMPACT);
                        json_decref(j);
                        (void)printf("%s\n", text ? text : "[]");
                }
        } else if (stat_only)
                r = ws_diff_print_stat(stdout, changes, n);
        else {
                (void)fflush(stdout);
                r = ws_diff_write_patch(v.layer_fds, v.n_layers, v.host_fd, changes, n,
                                        STDOUT_FILENO, &err);
        }
        (void)ws_changes_free(changes, n_all);
        if (r < 0)
                return err.msg[0] ? fail(&err, r) : HUTCH_EXIT_FAILURE;
        return 0;
}

int verb_apply(int argc, char **argv) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(persist_apply_done) PersistApply a = {};
        _cleanup_strv_free_ char **paths = NULL;
        const char *name = NULL;
        WsApplyFlags flags = 0;
        HutchError err = {};
        int r;

        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--force") == 0 || strcmp(argv[i], "-f") == 0)
                        flags |= WS_APPLY_FORCE;
                else if (strcmp(argv[i], "--modes") == 0)
                        flags |= WS_APPLY_MODES;
                else if (strcmp(argv[i], "--") == 0)
                        continue;
                else if (argv[i][0] == '-') {
                        log_error("usage: hutch apply NAME [--force] [--modes] [PATH...]");
                        return HUTCH_EXIT_FAILURE;
                } else if (!name)
                        name = argv[i];
                else if (strv_extend(&paths, argv[i]) < 0)
                        return HUTCH_EXIT_FAILURE;
        }
        if (!name) {
                log_error("usage: hutch apply NAME [--force] [--modes] [PATH...]");
                return HUTCH_EXIT_FAILURE;
        }
        r = persist_paths_normalize(paths, &err);
        if (r < 0)
                return fail(&err, r);
        r = persist_open(NULL, &s, NULL);
        if (r != 0)
                return r;
        r = persist_apply(s, name, paths, flags, &a, &err);
        if (r == -EEXIST && !a.applied) {
                STRV_FOREACH(c, a.res.conflicts)
                        log_error(
                                "conflict: '%s' changed on the host since the sandbox was created",
                                *c);
                log_error("nothing was applied; use --force to overwrite the host's changes");
                return HUTCH_EXIT_FAILURE;
        }
        /* SECURITY: what a sandbox asked for and did not get is said. */
        STRV_FOREACH(m, a.res.modes_kept)
                log_warning("%s: no group/other write or sticky bit the host's entry did not "
                            "have (--modes applies them)",
                            *m);
        if (a.applied)
                (void)printf("applied %zu change%s to %s\n", a.res.n_applied,
                             a.res.n_applied == 1 ? "" : "s", a.workspace);
        if (r < 0)
                return fail(&err, r);
        return 0;
}
