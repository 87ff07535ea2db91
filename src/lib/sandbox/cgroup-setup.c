/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "sandbox/cgroup-setup.h"
#include "sandbox/container.h"
#include "signal-util.h"

#define CPU_PERIOD_US 100000ULL
#define CPU_MIN_QUOTA_US 1000ULL

static bool controller_usable(const CgroupTopology *t, CgroupController c) {
        return t->controllers[c].version != CGROUP_VERSION_NONE && t->controllers[c].writable;
}

static CgroupLimits policy_cgroup_limits(const Policy *p) {
        CgroupLimits lim = {
                .memory_max = p->memory_max,
                .pids_max = p->pids_max,
        };

        /* --memory-swap is memory + swap (docker); the cgroup wants the swap
         * beyond memory. */
        if (p->memory_max && p->memory_swap_max > p->memory_max)
                lim.memory_swap_max = p->memory_swap_max - p->memory_max;
        if (p->cpu_millis) {
                lim.cpu_period_us = CPU_PERIOD_US;
                lim.cpu_quota_us =
                        MAX((uint64_t)p->cpu_millis * CPU_PERIOD_US / 1000, CPU_MIN_QUOTA_US);
        }
        return lim;
}

static const char *const limit_flag[_POLICY_LIMIT_MAX] = {
        [POLICY_LIMIT_MEMORY] = "--memory",       [POLICY_LIMIT_MEMORY_SWAP] = "--memory-swap",
        [POLICY_LIMIT_CPUS] = "--cpus",           [POLICY_LIMIT_PIDS] = "--pids",
        [POLICY_LIMIT_TIMEOUT] = "--timeout",     [POLICY_LIMIT_DISK] = "--disk",
        [POLICY_LIMIT_OUTPUT] = "--output-limit",
};

static int refuse(unsigned missing, HutchError *reterr) {
        const char *fix = container_fix(container_detect(), CONTAINER_NEED_CGROUPS);

        for (int i = 0; i < _POLICY_LIMIT_MAX; i++)
                if (missing & (1U << i))
                        return hutch_error_set(
                                reterr, EOPNOTSUPP,
                                "%s was asked for but no writable cgroup can enforce it here "
                                "(see 'hutch doctor' and docs/cgroups.md%s%s); pass "
                                "--allow-degraded to run with rlimits instead",
                                limit_flag[i], fix ? "; in this container: " : "", fix ?: "");
        return -EOPNOTSUPP;
}

/* Drops from @lim what @t cannot enforce, recording it in @degraded. */
static void drop_unusable(const CgroupTopology *t, CgroupLimits *lim, unsigned *degraded) {
        if ((lim->memory_max || lim->memory_swap_max) && !controller_usable(t, CGROUP_MEMORY)) {
                *degraded |= 1U << POLICY_LIMIT_MEMORY;
                if (lim->memory_swap_max)
                        *degraded |= 1U << POLICY_LIMIT_MEMORY_SWAP;
                lim->memory_max = lim->memory_swap_max = 0;
        }
        if (lim->pids_max && !controller_usable(t, CGROUP_PIDS)) {
                *degraded |= 1U << POLICY_LIMIT_PIDS;
                lim->pids_max = 0;
        }
        if (lim->cpu_quota_us && !controller_usable(t, CGROUP_CPU)) {
                *degraded |= 1U << POLICY_LIMIT_CPUS;
                lim->cpu_quota_us = lim->cpu_period_us = 0;
        }
}

static unsigned limits_mask(const CgroupLimits *lim) {
        return (lim->memory_max ? 1U << POLICY_LIMIT_MEMORY : 0) |
               (lim->memory_swap_max ? 1U << POLICY_LIMIT_MEMORY_SWAP : 0) |
               (lim->pids_max ? 1U << POLICY_LIMIT_PIDS : 0) |
               (lim->cpu_quota_us ? 1U << POLICY_LIMIT_CPUS : 0);
}

/* A run whose supervisor was SIGKILLed cannot remove its cgroups; its
 * processes died with its pid namespace (a microVM's QEMU with its death
 * signal), so what is left is empty "run-<pid>-<hex>" trees (the leaf
 * "exec", a keeper's "x-<id>/exec") or "vm-<pid>-<hex>" ones of a pid that
 * no longer exists. Remove those under @base (rmdir refuses anything still
 * populated). */
static void gc_stale_runs(const char *base) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;

        if (!base)
                return;
        d = opendir(base);
        while (d && (de = readdir(d))) {
                char path[4096];

                if (!name_pid_is_gone(de->d_name, "run-") && !name_pid_is_gone(de->d_name, "vm-"))
                        continue;
                (void)snprintf(path, sizeof(path), "%s/%s", base, de->d_name);
                (void)cgroup_remove_tree(path);
        }
}

static void gc_stale(const CgroupTopology *t) {
        for (int c = 0; c < _CGROUP_CONTROLLER_MAX; c++)
                gc_stale_runs(t->controllers[c].base);
        gc_stale_runs(t->v2.base);
        gc_stale_runs(t->freezer.base);
        gc_stale_runs(t->cpuacct.base);
}

void run_cgroup_gc(const RunCgroup *rc) {
        gc_stale(&rc->topology);
}

int run_cgroup_plan(const Policy *p, RunCgroup *ret, HutchError *reterr) {
        RunCgroup rc = {.want = policy_cgroup_limits(p)};
        HutchError e = {};
        int r;

        r = cgroup_topology_detect(&rc.topology, &e);
        if (r == -EBADMSG && e.errnum == EBADMSG)
                return hutch_error_set(reterr, EBADMSG,
                                       "failed to detect the cgroup layout: %s (see 'hutch "
                                       "doctor' and docs/cgroups.md)",
                                       e.msg);
        if (r < 0)
                return hutch_error_set(reterr, -r,
                                       "failed to detect the cgroup layout: %s (a bad "
                                       "$HUTCH_CGROUP_BASE_V2? see 'hutch doctor')",
                                       strerror(-r));
        rc.limits = rc.want;
        drop_unusable(&rc.topology, &rc.limits, &rc.degraded);
        if ((rc.degraded & p->limits_explicit) && !p->allow_degraded) {
                cgroup_topology_done(&rc.topology);
                return refuse(rc.degraded & p->limits_explicit, reterr);
        }
        *ret = rc;
        return 0;
}

static int cgroup_make(RunCgroup *rc, const char *name, const CgroupLimits *lim,
                       HutchError *reterr) {
        if (rc->one_shot)
                return cgroup_new_run(&rc->topology, name, lim, &rc->cgroup, reterr);
        return cgroup_new(&rc->topology, name, lim, &rc->cgroup, reterr);
}

int run_cgroup_create(const Policy *p, RunCgroup *rc, const char *name, HutchError *reterr) {
        int r;

        r = cgroup_make(rc, name, &rc->limits, reterr);
        if (r < 0) {
                unsigned failed = limits_mask(&rc->limits);

                /* The hierarchies looked usable but refused: fail closed for
                 * what was asked for, degrade the defaults. */
                if ((failed & p->limits_explicit) && !p->allow_degraded)
                        return r;
                rc->degraded |= failed;
                /* A cgroup without limits still makes the timeout exact. */
                if (cgroup_make(rc, name, &(CgroupLimits){}, NULL) < 0)
                        rc->cgroup = NULL;
        }

        /* Degraded limits the user asked for become rlimits (see
         * rlimits_apply() for what they do and do not bound). */
        if (p->allow_degraded) {
                unsigned asked = rc->degraded & p->limits_explicit;

                if (asked & (1U << POLICY_LIMIT_MEMORY)) {
                        rc->rlimits.memory_max = rc->want.memory_max;
                        rc->rlimits.memory_swap_max = rc->want.memory_swap_max;
                }
                if (asked & (1U << POLICY_LIMIT_PIDS))
                        rc->rlimits.pids_max = rc->want.pids_max;
        }
        return 0;
}

int run_cgroup_update(RunCgroup *rc, const Policy *p, HutchError *reterr) {
        CgroupLimits lim = policy_cgroup_limits(p);
        int r;

        /* SECURITY: a limit that was degraded at the start has no cgroup
         * to go to; it is refused rather than left unenforced. */
        if (!rc->cgroup || rc->degraded)
                return hutch_error_set(reterr, EOPNOTSUPP,
                                       "the sandbox's limits are not all held by a cgroup, so they "
                                       "cannot change while it runs (stop it first)");
        r = cgroup_update_limits(rc->cgroup, &lim, reterr);
        if (r < 0)
                return r;
        rc->want = rc->limits = lim;
        return 0;
}

void run_cgroup_done(RunCgroup *rc) {
        if (rc->cgroup)
                (void)cgroup_destroy(rc->cgroup);
        rc->cgroup = NULL;
        cgroup_topology_done(&rc->topology);
}

void run_cgroup_stats(RunCgroup *rc, CgroupStats *ret) {
        CgroupStats st = {};

        if (rc->cgroup && cgroup_stats(rc->cgroup, &st) < 0)
                st = (CgroupStats){};
        *ret = st;
}
