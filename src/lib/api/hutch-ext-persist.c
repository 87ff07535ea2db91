/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch-ext.h's persistent-sandbox verbs: each opens the store and calls
 * api/persist.h or api/processes.h with it. */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/hutch-ext.h"
#include "api/persist.h"
#include "api/processes.h"
#include "policy/policy.h"
#include "sandbox/exec-table.h"
#include "store/store.h"

static_assert(HUTCH_EXT_PORT_HOST_MAX >= PORT_SPEC_STRING_MAX, "a port spec's host fits");
static_assert(HUTCH_EXT_KILL_GRACE_DEFAULT_MS == EXEC_KILL_GRACE_DEFAULT_MS,
              "hutch-ext.h's default grace is the exec table's");
static_assert(HUTCH_EXT_KILL_GRACE_MAX_MS == EXEC_KILL_GRACE_MAX_MS,
              "hutch-ext.h's longest grace is the exec table's");

/* Opens the store as `s` and runs @call with it (hutch.c's STORE_CALL,
 * with the core's HutchError). */
#define WITH_STORE(reterr, call)                                                                   \
        ({                                                                                         \
                _cleanup_(store_freep) Store *s = NULL;                                            \
                int r_ = store_open(&s, (reterr));                                                 \
                                                                                                   \
                if (r_ >= 0)                                                                       \
                        r_ = (call);                                                               \
                r_;                                                                                \
        })

int hutch_ext_sandbox_name(const char *name_or_id, char **ret_name, HutchError *reterr) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        char *name;
        int r;

        r = store_open_sandbox(&s, name_or_id, &rec, reterr);
        if (r < 0)
                return r;
        name = strdup(rec->name);
        if (!name)
                return -ENOMEM;
        *ret_name = name;
        return 0;
}

int hutch_ext_exec_list_json(const char *name, char **ret_json, HutchError *reterr) {
        return WITH_STORE(reterr, persist_exec_list(s, name, ret_json, reterr));
}

int hutch_ext_exec_kill(const char *name, uint64_t id, int sig, uint64_t grace_ms, bool wait,
                        HutchError *reterr) {
        return WITH_STORE(reterr,
                          persist_exec_kill(s, name, id, sig, grace_ms, wait, NULL, NULL, reterr));
}

int hutch_ext_exec_wait(const char *name, uint64_t id, int *ret_exit_code, char **ret_json,
                        HutchError *reterr) {
        return WITH_STORE(reterr, persist_exec_wait(s, name, id, ret_exit_code, ret_json, reterr));
}

int hutch_ext_exec_output(const char *name, uint64_t id, bool follow, int out_fd, int err_fd,
                          HutchError *reterr) {
        return WITH_STORE(reterr, persist_exec_output(s, name, id, follow, out_fd, err_fd, reterr));
}

int hutch_ext_ports_list(const char *name, char **ret_json, bool *ret_running, HutchError *reterr) {
        return WITH_STORE(reterr, persist_ports_list(s, name, ret_json, ret_running, reterr));
}

int hutch_ext_port_add(const char *name, const char *spec, char **ret_json, HutchError *reterr) {
        return WITH_STORE(reterr, persist_port_add(s, name, spec, ret_json, reterr));
}

int hutch_ext_port_remove(const char *name, uint16_t port, HutchError *reterr) {
        return WITH_STORE(reterr, persist_port_remove(s, name, port, reterr));
}

int hutch_ext_port_exposed(const char *spec, char *host, size_t size, unsigned *ret_port) {
        PortSpec s;

        if (port_spec_parse(spec, &s, NULL) < 0 || port_spec_is_loopback(&s))
                return 0;
        port_spec_host_to_string(&s, host, size);
        *ret_port = s.port;
        return 1;
}
