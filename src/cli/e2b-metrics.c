/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* GET /sandboxes/{id}/metrics of hutch serve --e2b (docs/e2b.md
 * "Metrics"): one sample of the sandbox's cgroup, as E2B's SandboxMetric. */

#include <errno.h>
#include <time.h>
#include <unistd.h>

#include "e2b-internal.h"
#include "macro.h"
#include "parse-util.h"
#include "serve.h"
#include "time-util.h"

/* The window over which cpuUsedPct is measured: two samples of the cpu
 * counter this far apart. */
#define CPU_WINDOW_MS 100
#define MEMORY_DEFAULT (UINT64_C(2) << 30) /* the policy's default (docs/policy.md) */

static uint64_t mono_usec(void) {
        struct timespec ts;

        (void)clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* A limit of the policy JSON (a size string or a number), 0 when absent
 * or unreadable. */
static uint64_t limit_bytes(json_t *limits, const char *key) {
        json_t *v = json_object_get(limits, key);
        uint64_t n = 0;

        if (json_is_integer(v) && json_integer_value(v) > 0)
                return (uint64_t)json_integer_value(v);
        if (json_is_string(v) && parse_size(json_string_value(v), &n) >= 0)
                return n;
        return 0;
}

static double limit_cpus(json_t *limits) {
        json_t *v = json_object_get(limits, "cpus");

        if (json_is_number(v))
                return json_number_value(v);
        if (json_is_string(v))
                return strtod(json_string_value(v), NULL);
        return 0;
}

int e2b_metrics_sample(const char *name, json_t **ret, hutch_error *err) {
        hutch_sandbox_info info = {};
        json_t *policy = NULL, *limits, *a = NULL, *b = NULL, *o;
        uint64_t t0, t1, mem_total;
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        double cpus, pct = 0;
        int cpu_count, r;

        r = hutch_get(name, &info, err);
        if (r < 0)
                return r;
        if (!info.running) {
                hutch_sandbox_info_done(&info);
                *ret = json_array();
                return *ret ? 0 : -ENOMEM;
        }
        policy = info.policy_json ? json_loads(info.policy_json, 0, NULL) : NULL;
        limits = json_object_get(policy, "limits");
        cpus = limit_cpus(limits);
        cpu_count = cpus > 0 ? (int)cpus + (cpus > (int)cpus) : (int)(online > 0 ? online : 1);
        mem_total = limit_bytes(limits, "memory");
        if (mem_total == 0)
                mem_total = MEMORY_DEFAULT;
        /* cpu: the cgroup's usage over a short window, as a share of the
         * CPUs the sandbox may use (its --cpus, else the host's). */
        t0 = mono_usec();
        a = serve_stats_sample(name);
        (void)usleep(CPU_WINDOW_MS * 1000);
        b = serve_stats_sample(name);
        t1 = mono_usec();
        if (a && b && json_is_integer(json_object_get(a, "cpu_usec")) &&
            json_is_integer(json_object_get(b, "cpu_usec")) && t1 > t0) {
                json_int_t d = json_integer_value(json_object_get(b, "cpu_usec")) -
                               json_integer_value(json_object_get(a, "cpu_usec"));

                pct = d > 0 ? (double)d * 100.0 /
                                      ((double)(t1 - t0) * (cpus > 0 ? cpus : cpu_count))
                            : 0;
                pct = MIN(pct, 100.0);
        }
        o = json_pack("{s:i,s:f,s:O,s:I,s:I,s:o}", "cpuCount", cpu_count, "cpuUsedPct",
                      (double)(long)(pct * 100 + 0.5) / 100, "memUsed",
                      b ? json_object_get(b, "memory_bytes") : json_null(), "memTotal",
                      (json_int_t)mem_total, "diskUsed", (json_int_t)info.disk_bytes, "diskTotal",
                      info.disk_limit_bytes > 0 ? json_integer((json_int_t)info.disk_limit_bytes)
                                                : json_null());
        json_decref(a);
        json_decref(b);
        json_decref(policy);
        hutch_sandbox_info_done(&info);
        *ret = o ? json_pack("[o]", o) : NULL;
        return *ret ? 0 : -ENOMEM;
}
