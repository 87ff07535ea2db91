/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch-ext.h over the core: each function opens the store, finds the
 * sandbox and calls api/persist.h or the keeper's client side. */
#include <assert.h>
#include <errno.h>

#include "api/hutch-ext.h"
#include "api/persist.h"
#include "api/processes.h"
#include "fd-util.h"
#include "policy/policy.h"
#include "sandbox/container.h"
#include "sandbox/keeper.h"
#include "store/store.h"
#include "vm/vm.h"

static_assert(HUTCH_EXT_NAME_MAX == STORE_NAME_MAX, "hutch-ext.h's name bound is the store's");

int hutch_ext_image_digest(const char *ref, char **ret_digest, HutchError *reterr) {
        _cleanup_(store_freep) Store *s = NULL;
        int r;

        r = store_open(&s, reterr);
        if (r < 0)
                return r;
        return persist_image_digest(s, ref, ret_digest, reterr);
}

int hutch_ext_connect(const char *name, int *ret_sock, HutchError *reterr) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        int r;

        r = store_open_sandbox(&s, name, &rec, reterr);
        if (r < 0)
                return r;
        return persist_connect(s, rec->name, true, ret_sock, reterr);
}

int hutch_ext_exec_send(int sock, const HutchExtExec *e, HutchError *reterr) {
        KeeperExec req = {
                .argv = e->argv,
                .env = e->env,
                .cwd = e->cwd,
                .timeout_ms = e->timeout_ms,
                .detach = e->detach,
                .fds = {e->fds[0], e->fds[1], e->fds[2]},
                .stdin_pipe = e->stdin_pipe,
                .user = e->user,
        };

        return keeper_exec_send(sock, &req, reterr);
}

int hutch_ext_exec_answer(int sock, uint64_t *ret_id, int *ret_exit_code, char **ret_json,
                          HutchError *reterr) {
        int r;

        r = keeper_exec_answer(sock, ret_id, ret_exit_code, ret_json, reterr);
        if (r == KEEPER_ANSWER_STARTED)
                return HUTCH_EXT_ANSWER_STARTED;
        if (r == KEEPER_ANSWER_OUTCOME)
                return HUTCH_EXT_ANSWER_OUTCOME;
        return r;
}

int hutch_ext_ports(const char *name, const char *action, const char *spec, char **ret_json,
                    HutchError *reterr) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_close_ int sock = -EBADF;
        int r;

        r = store_open(&s, reterr);
        if (r < 0)
                return r;
        r = persist_connect(s, name, true, &sock, reterr);
        if (r < 0)
                return r;
        return keeper_ports(sock, action, spec, 0, ret_json, reterr);
}

bool hutch_ext_name_is_valid(const char *name) {
        return store_name_is_valid(name);
}

bool hutch_ext_user_spec_is_valid(const char *spec) {
        return user_spec_is_valid(spec);
}

int hutch_ext_signal_parse(const char *s) {
        return persist_signal_parse(s);
}

int hutch_ext_vm_forward(const char *path) {
        return vm_forward_run(path);
}

void hutch_ext_vm_template_hook(void (*hook)(bool done, bool ok)) {
        vm_set_template_build_hook(hook);
}

const char *hutch_ext_container_engine(void) {
        return container_engine_to_string(container_detect());
}
