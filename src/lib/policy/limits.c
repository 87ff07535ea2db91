/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "parse-util.h"
#include "policy/policy-internal.h"
#include "policy/policy.h"

static const char *const limit_table[_POLICY_LIMIT_MAX] = {
        [POLICY_LIMIT_MEMORY] = "memory",       [POLICY_LIMIT_MEMORY_SWAP] = "memory_swap",
        [POLICY_LIMIT_CPUS] = "cpus",           [POLICY_LIMIT_PIDS] = "pids",
        [POLICY_LIMIT_TIMEOUT] = "timeout",     [POLICY_LIMIT_DISK] = "disk",
        [POLICY_LIMIT_OUTPUT] = "output_limit",
};

/* How each limit is named in messages without a flag context. */
static const char *const limit_noun[_POLICY_LIMIT_MAX] = {
        [POLICY_LIMIT_MEMORY] = "memory limit", [POLICY_LIMIT_MEMORY_SWAP] = "memory+swap limit",
        [POLICY_LIMIT_CPUS] = "cpu limit",      [POLICY_LIMIT_PIDS] = "pids limit",
        [POLICY_LIMIT_TIMEOUT] = "timeout",     [POLICY_LIMIT_DISK] = "disk size",
        [POLICY_LIMIT_OUTPUT] = "output limit",
};

const char *policy_limit_to_string(PolicyLimit l) {
        if (l < 0 || l >= _POLICY_LIMIT_MAX)
                return NULL;
        return limit_table[l];
}

PolicyLimit policy_limit_from_string(const char *s) {
        if (!s)
                return _POLICY_LIMIT_INVALID;
        for (int i = 0; i < _POLICY_LIMIT_MAX; i++)
                if (strcmp(limit_table[i], s) == 0)
                        return (PolicyLimit)i;
        return _POLICY_LIMIT_INVALID;
}

/* Parses "1", "1.5", "0.25", "2.125" into thousandths. */
static int parse_millis(const char *s, uint32_t *ret) {
        const char *dot = strchr(s, '.');
        char whole[16], frac[4] = "000";
        uint32_t w, f;
        size_t n;

        n = dot ? (size_t)(dot - s) : strlen(s);
        if (n == 0 || n >= sizeof(whole))
                return -EINVAL;
        memcpy(whole, s, n);
        whole[n] = '\0';
        if (safe_atou32(whole, &w) < 0)
                return -EINVAL;
        if (dot) {
                size_t m = strlen(dot + 1);

                if (m == 0 || m > 3)
                        return -EINVAL;
                memcpy(frac, dot + 1, m);
                if (safe_atou32(frac, &f) < 0)
                        return -EINVAL;
        } else
                f = 0;
        if (w > UINT32_MAX / 1000 - 1)
                return -ERANGE;
        *ret = w * 1000 + f;
        return 0;
}

static int limit_error(HutchError *reterr, int err, PolicyLimit which, const char *text,
                       const char *ctx, const char *why) {
        if (ctx)
                return hutch_error_set(reterr, err, "invalid %s '%s': %s", ctx, text, why);
        return hutch_error_set(reterr, err, "invalid %s '%s': %s", limit_noun[which], text, why);
}

int policy_set_limit(Policy *p, PolicyLimit which, const char *text, const char *ctx,
                     HutchError *reterr) {
        uint64_t v = 0;
        uint32_t m = 0;
        int r;

        if (!p || !text || which < 0 || which >= _POLICY_LIMIT_MAX)
                return -EINVAL;

        switch (which) {
        case POLICY_LIMIT_MEMORY:
        case POLICY_LIMIT_MEMORY_SWAP:
        case POLICY_LIMIT_DISK:
        case POLICY_LIMIT_OUTPUT:
                r = parse_size(text, &v);
                if (r < 0)
                        return limit_error(reterr, -r, which, text, ctx,
                                           r == -ERANGE ? "too large"
                                                        : "expected a size like 512m or 2g");
                if (v == 0)
                        return limit_error(reterr, EINVAL, which, text, ctx,
                                           "must be greater than 0");
                if (which == POLICY_LIMIT_MEMORY && v < POLICY_MIN_MEMORY)
                        return limit_error(reterr, EINVAL, which, text, ctx,
                                           text[strspn(text, "0123456789")] == '\0'
                                                   ? "that is in bytes (a size without a unit "
                                                     "is, as docker's), below the minimum of 6m: "
                                                     "give a unit, as 512m"
                                                   : "below the minimum of 6m");
                if (which == POLICY_LIMIT_DISK && v < POLICY_MIN_TMPFS_SIZE)
                        return limit_error(reterr, EINVAL, which, text, ctx,
                                           "below the minimum of 4k");
                break;
        case POLICY_LIMIT_CPUS:
                r = parse_millis(text, &m);
                if (r < 0)
                        return limit_error(reterr, -r, which, text, ctx,
                                           "expected a positive number of CPUs like 1.5");
                if (m == 0)
                        return limit_error(reterr, EINVAL, which, text, ctx,
                                           "must be greater than 0");
                if (m > POLICY_MAX_CPU_MILLIS)
                        return limit_error(reterr, ERANGE, which, text, ctx, "at most 1024 CPUs");
                break;
        case POLICY_LIMIT_PIDS:
                r = safe_atou64(text, &v);
                if (r < 0)
                        return limit_error(reterr, -r, which, text, ctx,
                                           "expected a whole number of processes");
                if (v == 0)
                        return limit_error(reterr, EINVAL, which, text, ctx, "must be at least 1");
                break;
        case POLICY_LIMIT_TIMEOUT:
                r = parse_duration_ms(text, &v);
                if (r < 0)
                        return limit_error(reterr, -r, which, text, ctx,
                                           "expected a duration like 30s, 1500ms, 5m or 1h "
                                           "(0 for none)");
                break;
        case _POLICY_LIMIT_MAX:
        case _POLICY_LIMIT_INVALID:
        default:
                return -EINVAL;
        }

        switch (which) {
        case POLICY_LIMIT_MEMORY:
                p->memory_max = v;
                break;
        case POLICY_LIMIT_MEMORY_SWAP:
                p->memory_swap_max = v;
                break;
        case POLICY_LIMIT_CPUS:
                p->cpu_millis = m;
                break;
        case POLICY_LIMIT_PIDS:
                p->pids_max = v;
                break;
        case POLICY_LIMIT_TIMEOUT:
                p->timeout_ms = v;
                break;
        case POLICY_LIMIT_DISK:
                p->disk_size = v;
                break;
        case POLICY_LIMIT_OUTPUT:
                p->output_limit = v;
                break;
        case _POLICY_LIMIT_MAX:
        case _POLICY_LIMIT_INVALID:
        default:
                return -EINVAL;
        }
        p->limits_explicit |= 1U << which;
        return 0;
}

int policy_validate_limits(const Policy *p, HutchError *reterr) {
        if (p->memory_max != 0 && p->memory_max < POLICY_MIN_MEMORY)
                return hutch_error_set(reterr, EINVAL,
                                       "memory limit %llu is below the minimum of 6m",
                                       (unsigned long long)p->memory_max);
        if (p->memory_swap_max != 0 && p->memory_swap_max < p->memory_max)
                return hutch_error_set(
                        reterr, EINVAL,
                        "memory+swap limit (--memory-swap) must be at least the "
                        "memory limit (--memory, %llu MiB%s)",
                        (unsigned long long)(p->memory_max >> 20),
                        (p->limits_explicit & (1U << POLICY_LIMIT_MEMORY)) ? "" : " by default");
        if (p->memory_swap_max != 0 && p->memory_max == 0)
                return hutch_error_set(reterr, EINVAL,
                                       "a memory+swap limit (--memory-swap) needs a memory limit");
        if (p->cpu_millis > POLICY_MAX_CPU_MILLIS)
                return hutch_error_set(reterr, ERANGE, "cpu limit above 1024 CPUs");
        if (p->disk_size != 0 && p->disk_size < POLICY_MIN_TMPFS_SIZE)
                return hutch_error_set(reterr, EINVAL, "disk size below the minimum of 4k");
        return 0;
}
