/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch diff / hutch apply: a persistent sandbox's changes to its overlay
 * workspace, shown or written back to the host folder (docs/persistent.md). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "fd-util.h"
#include "log.h"
#include "persist.h"
#include "policy/policy.h"
#include "sandbox/sandbox.h"
#include "store/diff.h"
#include "store/store.h"
#include "strv.h"

static int fail(const HutchError *err, int r) {
        log_error("%s", err->msg[0] ? err->msg : strerror(-r));
        return HUTCH_EXIT_FAILURE;
}

typedef struct WsView {
        Policy *policy;
        int *layer_fds; /* the sandbox's own ws/, then the snapshot layers' ws/ */
        size_t n_layers;
        int host_fd;
} WsView;

static void ws_view_done(WsView *v) {
        for (size_t i = 0; i < v->n_layers; i++)
                (void)close(v->layer_fds[i]);
        free(v->layer_fds);
        v->host_fd = safe_close(v->host_fd);
        v->policy = policy_free(v->policy);
        *v = (WsView){.host_fd = -EBADF};
}

/* Opens the workspace's layers (top first) and the host folder. */
static int ws_view_open(const Store *s, const SandboxRecord *rec, WsView *v, HutchError *reterr) {
        _cleanup_strv_free_ char **chain = NULL, **dirs = NULL;
        _cleanup_free_ char *own = NULL;
        char sub[96];
        int r;

        v->policy = policy_new();
        if (!v->policy)
                return -ENOMEM;
        r = policy_load_json(v->policy, rec->policy_json, strlen(rec->policy_json), reterr);
        if (r < 0)
                return r;
        if (!v->policy->workspace || v->policy->workspace_mode != WORKSPACE_MODE_OVERLAY)
                return hutch_error_set(reterr, EINVAL,
                                       "sandbox '%s' has no overlay workspace (diff and apply "
                                       "work on --workspace DIR:overlay)",
                                       rec->name);
        (void)snprintf(sub, sizeof(sub), "data/upper-%llu/ws", (unsigned long long)rec->gen);
        r = store_sandbox_path(s, rec->name, sub, &own);
        if (r < 0)
                return r;
        r = strv_extend(&dirs, own);
        if (r < 0)
                return r;
        r = store_snapshot_chain(s, rec->parent, SIZE_MAX, &chain, reterr);
        if (r < 0)
                return r;
        STRV_FOREACH(l, chain) {
                _cleanup_free_ char *p = NULL;

                if (asprintf(&p, "%s/ws", *l) < 0)
                        return -ENOMEM;
                r = strv_push_take(&dirs, TAKE_PTR(p));
                if (r < 0)
                        return r;
        }
        v->layer_fds = calloc(strv_length(dirs), sizeof(int));
        if (!v->layer_fds)
                return -ENOMEM;
        STRV_FOREACH(d, dirs) {
                int fd = open(*d, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

                if (fd < 0)
                        return hutch_error_set(reterr, errno, "cannot open the layer %s: %m", *d);
                v->layer_fds[v->n_layers++] = fd;
        }
        v->host_fd = open(v->policy->workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (v->host_fd < 0)
                return hutch_error_set(reterr, errno, "cannot open the workspace '%s': %m",
                                       v->policy->workspace);
        return 0;
}

/* Keeps only the changes under one of @paths (relative to the workspace;
 * a leading "/workspace/" or "./" is dropped). */
static size_t filter_paths(WsChange *changes, size_t n, char **paths) {
        size_t kept = 0;

        if (strv_length(paths) == 0)
                return n;
        for (size_t i = 0; i < n; i++) {
                bool keep = false;

                STRV_FOREACH(p, paths) {
                        size_t len = strlen(*p);

                        if (strncmp(changes[i].path, *p, len) == 0 &&
                            (changes[i].path[len] == '\0' || changes[i].path[len] == '/' ||
                             len == 0))
                                keep = true;
                }
                if (keep) {
                        WsChange tmp = changes[kept];

                        changes[kept++] = changes[i];
                        changes[i] = tmp;
                }
        }
        return kept;
}

static int normalize_paths(char **paths) {
        STRV_FOREACH(p, paths) {
                char *s = *p;

                if (strncmp(s, POLICY_SANDBOX_WORKSPACE "/",
                            strlen(POLICY_SANDBOX_WORKSPACE) + 1) == 0)
                        s += strlen(POLICY_SANDBOX_WORKSPACE) + 1;
                while (strncmp(s, "./", 2) == 0)
                        s += 2;
                memmove(*p, s, strlen(s) + 1);
                while (strlen(*p) > 0 && (*p)[strlen(*p) - 1] == '/')
                        (*p)[strlen(*p) - 1] = '\0';
                /* Whole components: "v1..2.txt" is a name, "a/../b" is not. */
                if ((*p)[0] != '\0' && !ws_path_is_valid(*p)) {
                        log_error("path '%s' must be relative to the workspace (no '.' or '..' "
                                  "components)",
                                  *p);
                        return -EINVAL;
                }
        }
        return 0;
}

int verb_diff(int argc, char **argv) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        _cleanup_(ws_view_done) WsView v = {.host_fd = -EBADF};
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
        if (normalize_paths(paths) < 0)
                return HUTCH_EXIT_FAILURE;
        r = persist_open(name, &s, &rec);
        if (r != 0)
                return r;
        r = ws_view_open(s, rec, &v, &err);
        if (r < 0)
                return fail(&err, r);
        r = ws_diff(v.layer_fds, v.n_layers, v.host_fd, &changes, &n, &err);
        if (r < 0)
                return fail(&err, r);
        n_all = n;
        n = filter_paths(changes, n, paths);
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

static int load_manifest(const Store *s, const SandboxRecord *rec, WsManifest **ret,
                         HutchError *reterr) {
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -EBADF;
        int r;

        r = store_sandbox_path(s, rec->name, "ws-manifest", &path);
        if (r < 0)
                return r;
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0 && errno == ENOENT) {
                *ret = NULL;
                return 0;
        }
        if (fd < 0)
                return hutch_error_set(reterr, errno, "cannot open %s: %m", path);
        return ws_manifest_load(fd, ret, reterr);
}

int verb_apply(int argc, char **argv) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        _cleanup_(ws_view_done) WsView v = {.host_fd = -EBADF};
        _cleanup_(ws_manifest_freep) WsManifest *m = NULL;
        _cleanup_strv_free_ char **paths = NULL;
        _cleanup_close_ int lock = -EBADF;
        WsApplyResult res = {};
        const char *name = NULL;
        bool force = false;
        HutchError err = {};
        int r;

        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--force") == 0 || strcmp(argv[i], "-f") == 0)
                        force = true;
                else if (strcmp(argv[i], "--") == 0)
                        continue;
                else if (argv[i][0] == '-') {
                        log_error("usage: hutch apply NAME [--force] [PATH...]");
                        return HUTCH_EXIT_FAILURE;
                } else if (!name)
                        name = argv[i];
                else if (strv_extend(&paths, argv[i]) < 0)
                        return HUTCH_EXIT_FAILURE;
        }
        if (!name) {
                log_error("usage: hutch apply NAME [--force] [PATH...]");
                return HUTCH_EXIT_FAILURE;
        }
        if (normalize_paths(paths) < 0)
                return HUTCH_EXIT_FAILURE;
        r = persist_open(name, &s, &rec);
        if (r != 0)
                return r;
        r = store_lock_sandbox(s, rec->name, &lock);
        if (r < 0) {
                log_error("no sandbox named '%s'", name);
                return HUTCH_EXIT_FAILURE;
        }
        r = ws_view_open(s, rec, &v, &err);
        if (r < 0)
                return fail(&err, r);
        r = load_manifest(s, rec, &m, &err);
        if (r < 0)
                return fail(&err, r);
        if (!m && !force) {
                log_error("sandbox '%s' has no record of the host folder as it was (it comes "
                          "from an imported snapshot): host changes cannot be detected; use "
                          "--force to apply anyway",
                          rec->name);
                return HUTCH_EXIT_FAILURE;
        }
        r = ws_apply(v.layer_fds, v.n_layers, v.host_fd, m,
                     strv_length(paths) ? (const char *const *)paths : NULL, force, &res, &err);
        if (r == -EEXIST) {
                STRV_FOREACH(c, res.conflicts)
                        log_error(
                                "conflict: '%s' changed on the host since the sandbox was created",
                                *c);
                ws_apply_result_done(&res);
                log_error("nothing was applied; use --force to overwrite the host's changes");
                return HUTCH_EXIT_FAILURE;
        }
        if (r < 0) {
                ws_apply_result_done(&res);
                return fail(&err, r);
        }
        (void)printf("applied %zu change%s to %s\n", res.n_applied, res.n_applied == 1 ? "" : "s",
                     v.policy->workspace);
        ws_apply_result_done(&res);
        /* The host folder now holds these changes: they are the new
         * baseline for the next apply's check. */
        r = persist_write_manifest(s, rec, v.host_fd, &err);
        if (r < 0)
                return fail(&err, r);
        return 0;
}
