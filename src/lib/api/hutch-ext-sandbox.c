/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch-ext.h's persistent-sandbox verbs: create, update, the keeper,
 * exec, ls, stop, rm, logs and gc over api/persist.h and the store. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "api/hutch-ext.h"
#include "api/persist.h"
#include "policy/policy.h"
#include "sandbox/keeper.h"
#include "store/store.h"
#include "strv.h"
#include "vm/vm.h"

void hutch_ext_created_done(HutchExtCreated *c) {
        if (!c)
                return;
        free(c->name);
        free(c->id);
        free(c->no_disk_limit);
        free(c->no_range);
        *c = (HutchExtCreated){};
}

int hutch_ext_create(const char *name, const Policy *policy, const char *from,
                     uint64_t idle_timeout_ms, HutchExtCreated *ret, HutchError *reterr) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        _cleanup_(hutch_ext_created_done) HutchExtCreated c = {};
        int r;

        r = store_open(&s, reterr);
        if (r < 0)
                return r;
        r = persist_create(s, name, policy, from, idle_timeout_ms, &rec, reterr);
        if (r < 0)
                return r;
        c.name = strdup(rec->name);
        c.id = strdup(rec->id);
        if (!c.name || !c.id)
                return -ENOMEM;
        if (rec->disk_limit == 0) {
                HutchError why = {};

                (void)persist_disk_supported(&why);
                c.no_disk_limit = strdup(why.msg[0] ? why.msg : "it cannot be enforced here");
                if (!c.no_disk_limit)
                        return -ENOMEM;
        }
        /* A microVM's ids are its own: the map is the namespace backend's. */
        if (!s->idmap.privileged && !s->idmap.ranged && s->idmap.no_range[0] &&
            !(policy && policy->backend == SANDBOX_BACKEND_VM)) {
                c.no_range = strdup(s->idmap.no_range);
                if (!c.no_range)
                        return -ENOMEM;
        }
        *ret = c;
        c = (HutchExtCreated){};
        return 0;
}

int hutch_ext_sandbox_policy(const char *name_or_id, char **ret_name, char **ret_policy_json,
                             HutchError *reterr) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        int r;

        r = store_open_sandbox(&s, name_or_id, &rec, reterr);
        if (r < 0)
                return r;
        if (ret_name)
                *ret_name = TAKE_PTR(rec->name);
        if (ret_policy_json)
                *ret_policy_json = TAKE_PTR(rec->policy_json);
        return 0;
}

int hutch_ext_update(const char *name, const Policy *policy, char ***ret_changed,
                     HutchError *reterr) {
        _cleanup_(store_freep) Store *s = NULL;
        int r;

        r = store_open(&s, reterr);
        if (r < 0)
                return r;
        return persist_update(s, name, policy, ret_changed, reterr);
}

int hutch_ext_keeper_main(const char *name, int ready_fd, char *const *env, HutchError *reterr) {
        return persist_keeper_main(name, ready_fd, env, reterr);
}

int hutch_ext_exec_run(const char *name, const HutchExtExec *e, bool tty, int forward_sigfd,
                       uint64_t *ret_id, int *ret_exit_code, char **ret_json, HutchError *reterr) {
        _cleanup_(store_freep) Store *s = NULL;
        KeeperExec req = {
                .argv = e->argv,
                .env = e->env,
                .cwd = e->cwd,
                .timeout_ms = e->timeout_ms,
                .detach = e->detach,
                .tty = tty,
                .fds = {e->fds[0], e->fds[1], e->fds[2]},
                .stdin_pipe = e->stdin_pipe,
                .user = e->user,
        };
        int r;

        r = store_open(&s, reterr);
        if (r < 0)
                return r;
        return persist_exec(s, name, &req, forward_sigfd, ret_id, ret_exit_code, ret_json, reterr);
}

int hutch_ext_stop(const char *name_or_id, char **ret_name, HutchError *reterr) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        int r;

        r = store_open_sandbox(&s, name_or_id, &rec, reterr);
        if (r < 0)
                return r;
        r = persist_stop(s, rec->name, reterr);
        if (r >= 0 && ret_name)
                *ret_name = TAKE_PTR(rec->name);
        return r;
}

int hutch_ext_destroy(const char *name, bool force, HutchError *reterr) {
        _cleanup_(store_freep) Store *s = NULL;
        int r;

        r = store_open(&s, reterr);
        if (r < 0)
                return r;
        return persist_destroy(s, name, force, reterr);
}

int hutch_ext_sandbox_file(const char *name_or_id, const char *sub, char **ret_name,
                           char **ret_path, HutchError *reterr) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        int r;

        r = store_open_sandbox(&s, name_or_id, &rec, reterr);
        if (r < 0)
                return r;
        r = store_sandbox_path(s, rec->name, sub, ret_path);
        if (r < 0)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        *ret_name = TAKE_PTR(rec->name);
        return 0;
}

int hutch_ext_gc(unsigned *ret_removed, HutchError *reterr) {
        _cleanup_(store_freep) Store *s = NULL;
        unsigned n = 0;
        int r;

        r = store_open(&s, reterr);
        if (r < 0)
                return r;
        r = store_gc(s, &n, reterr);
        if (r < 0)
                return r;
        /* The microVM template folders of removed stores (docs/vm.md): no
         * store is left to free them otherwise. */
        *ret_removed = n + vm_templates_reclaim();
        return 0;
}

static int sandbox_names(Store *s, char ***ret, HutchError *reterr) {
        int r;

        r = store_list(s, "sandboxes", ret);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot list the sandboxes: %s", strerror(-r));
        return 0;
}

int hutch_ext_sandbox_names(char ***ret, HutchError *reterr) {
        _cleanup_(store_freep) Store *s = NULL;
        int r;

        r = store_open(&s, reterr);
        if (r < 0)
                return r;
        return sandbox_names(s, ret, reterr);
}

/* Its published ports, in the shape of GET .../ports (docs/api.md): as
 * bound while it runs, else as its policy asks; {"port"} alone for each if
 * that cannot be read. */
static char *ls_ports_json(Store *s, const char *name, const PersistInfo *info) {
        _cleanup_free_ char *text = NULL;
        HutchError ignored = {};
        bool running;
        json_t *arr;
        char *out;

        if (info->n_ports == 0)
                return strdup("[]");
        if (persist_ports_list(s, name, &text, &running, &ignored) >= 0) {
                arr = json_loads(text, 0, NULL);
                if (json_is_array(arr)) {
                        json_decref(arr);
                        return TAKE_PTR(text);
                }
                json_decref(arr);
        }
        arr = json_array();
        for (size_t k = 0; arr && k < MIN((size_t)info->n_ports, ELEMENTSOF(info->ports)); k++)
                (void)json_array_append_new(arr, json_pack("{s:i}", "port", (int)info->ports[k]));
        out = arr ? json_dumps(arr, JSON_COMPACT) : NULL;
        json_decref(arr);
        return out;
}

/* The first snapshot below the sandbox's own ones (taken of it since it
 * was made) in @ret_from, and its disk use with theirs in @ret_usage. */
static int ls_origin(Store *s, const SandboxRecord *rec, uint64_t own_bytes, char **ret_from,
                     uint64_t *ret_usage) {
        _cleanup_free_ char *p = rec->parent ? strdup(rec->parent) : NULL;
        uint64_t usage = own_bytes;

        if (rec->parent && !p)
                return -ENOMEM;
        /* A chain is finite, but a damaged store must not loop. */
        for (unsigned depth = 0; p && depth < 1024; depth++) {
                _cleanup_(snapshot_record_freep) SnapshotRecord *snap = NULL;
                _cleanup_free_ char *dir = NULL;

                if (store_snapshot_load(s, p, &snap, NULL) < 0 || !snap->origin ||
                    strcmp(snap->origin, rec->name) != 0 || snap->created_ms < rec->created_ms)
                        break;
                if (store_snapshot_path(s, snap->name, NULL, &dir) >= 0)
                        usage += store_disk_usage(dir);
                free(p);
                p = NULL;
                if (snap->parent) {
                        p = strdup(snap->parent);
                        if (!p)
                                return -ENOMEM;
                }
        }
        *ret_from = TAKE_PTR(p);
        *ret_usage = usage;
        return 0;
}

HutchExtLsEntry *hutch_ext_ls_free(HutchExtLsEntry *l, size_t n) {
        if (!l)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                free(l[i].name);
                free(l[i].id);
                strv_free(l[i].degraded);
                free(l[i].parent);
                free(l[i].from);
                free(l[i].ports_json);
        }
        free(l);
        return NULL;
}

static int ls_entry(Store *s, const char *name, bool with_ports, HutchExtLsEntry *e) {
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        HutchError ignored = {};
        PersistInfo info;
        int r;

        e->name = strdup(name);
        if (!e->name)
                return -ENOMEM;
        if (store_sandbox_load(s, name, &rec, &ignored) < 0) {
                e->damaged = true;
                return 0;
        }
        persist_info(s, rec, &info);
        r = ls_origin(s, rec, info.disk_bytes, &e->from, &e->usage);
        if (r < 0)
                return r;
        free(e->name);
        e->name = TAKE_PTR(rec->name);
        e->id = TAKE_PTR(rec->id);
        e->parent = TAKE_PTR(rec->parent);
        e->running = info.running;
        e->backend = sandbox_backend_to_string(info.backend);
        e->created_ms = rec->created_ms;
        e->last_used_ms = info.last_used_ms;
        e->disk_bytes = info.disk_bytes;
        e->disk_limit = info.disk_limit;
        for (int i = 0; i < _POLICY_LIMIT_MAX; i++)
                if ((info.degraded & (1U << i)) &&
                    strv_extend(&e->degraded, policy_limit_to_string(i)) < 0)
                        return -ENOMEM;
        (void)snprintf(e->image, sizeof(e->image), "%s", info.image);
        if (with_ports) {
                e->ports_json = ls_ports_json(s, e->name, &info);
                if (!e->ports_json)
                        return -ENOMEM;
        }
        return 0;
}

int hutch_ext_ls(bool with_ports, HutchExtLsEntry **ret, size_t *ret_n, HutchError *reterr) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_strv_free_ char **names = NULL;
        HutchExtLsEntry *l;
        size_t n;
        int r;

        r = store_open(&s, reterr);
        if (r < 0)
                return r;
        r = sandbox_names(s, &names, reterr);
        if (r < 0)
                return r;
        n = strv_length(names);
        l = calloc(n + 1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                r = ls_entry(s, names[i], with_ports, l + i);
                if (r < 0) {
                        (void)hutch_ext_ls_free(l, n);
                        return r;
                }
        }
        *ret = l;
        *ret_n = n;
        return 0;
}
