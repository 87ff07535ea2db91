/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <jansson.h>
#include <string.h>

#include "policy/policy.h"
#include "sandbox/outcome.h"
#include "string-table.h"

static const char *const reason_table[_OUTCOME_REASON_MAX] = {
        [OUTCOME_EXITED] = "exited", [OUTCOME_SIGNALED] = "signaled", [OUTCOME_TIMEOUT] = "timeout",
        [OUTCOME_OOM] = "oom",       [OUTCOME_PIDS] = "pids",         [OUTCOME_KILLED] = "killed",
};

DEFINE_STRING_TABLE_LOOKUP(outcome_reason, OutcomeReason, reason_table);

static const char *const fallback_table[_OUTCOME_FALLBACK_MAX] = {
        [OUTCOME_FALLBACK_PIVOT_ROOT] = "pivot_root",
        [OUTCOME_FALLBACK_PROCFS] = "procfs",
};

DEFINE_STRING_TABLE_LOOKUP(outcome_fallback, OutcomeFallback, fallback_table);

void outcome_done(Outcome *o) {
        free(o->denied);
        o->denied = NULL;
}

int outcome_to_json(const Outcome *o, char **ret) {
        json_t *obj, *degraded, *denied;
        char *s;

        denied = o->denied ? json_loads(o->denied, 0, NULL) : NULL;
        if (!json_is_array(denied)) {
                json_decref(denied);
                denied = json_array();
        }
        if (!denied)
                return -ENOMEM;

        degraded = json_array();
        if (!degraded) {
                json_decref(denied);
                return -ENOMEM;
        }
        for (int i = 0; i < _POLICY_LIMIT_MAX; i++)
                if ((o->degraded & (1U << i)) &&
                    json_array_append_new(degraded, json_string(policy_limit_to_string(i))) < 0) {
                        json_decref(degraded);
                        json_decref(denied);
                        return -ENOMEM;
                }
        for (int i = 0; i < _OUTCOME_FALLBACK_MAX; i++)
                if ((o->fallbacks & (1U << i)) &&
                    json_array_append_new(degraded, json_string(fallback_table[i])) < 0) {
                        json_decref(degraded);
                        json_decref(denied);
                        return -ENOMEM;
                }
        obj = json_pack(
                "{s:i, s:o, s:s, s:I, s:I, s:I, s:b, s:b, s:o, s:o}", "exit_code", o->exit_code,
                "signal", o->signal > 0 ? json_integer(o->signal) : json_null(), "reason",
                outcome_reason_to_string(o->reason) ?: "exited", "wall_ms", (json_int_t)o->wall_ms,
                "cpu_ms", (json_int_t)o->cpu_ms, "mem_peak_bytes", (json_int_t)o->mem_peak_bytes,
                "stdout_truncated", o->stdout_truncated, "stderr_truncated", o->stderr_truncated,
                "denied", denied, "degraded", degraded);
        if (!obj)
                return -ENOMEM;
        s = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(obj);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}
