/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Turns a policy's limits into a cgroup for one run (private to
 * src/lib/sandbox), and the cgroup's counters into the outcome.
 *
 * SECURITY: fail closed. A limit the user asked for (flag or policy file)
 * that no writable cgroup can enforce is an error unless the policy allows
 * a degraded run; then the init applies rlimits instead. The default
 * limits (memory and pids) are applied wherever a cgroup can hold them and
 * are otherwise reported as degraded in the outcome. */

#include <stdbool.h>

#include "cgroup/cgroup.h"
#include "hutch-error.h"
#include "policy/policy.h"
#include "sandbox/outcome.h"

typedef struct RunCgroup {
        CgroupTopology topology; /* owned; detected by run_cgroup_plan() */
        CgroupLimits want;       /* the policy's limits */
        CgroupLimits limits;     /* what the cgroup will enforce */
        Cgroup *cgroup;          /* NULL when no hierarchy at all can be used */
        CgroupLimits rlimits;    /* to apply in init (degraded, allowed); zero = none */
        unsigned degraded;       /* 1 << PolicyLimit of limits not enforced by a cgroup */
        bool one_shot;           /* set before run_cgroup_create(): cgroup_new_run() */
} RunCgroup;

/* Before anything is created: detects the hierarchies and decides which
 * limits a cgroup can hold. Returns 0, or -EOPNOTSUPP with @reterr naming
 * a limit that was asked for and cannot be enforced. */
int run_cgroup_plan(const Policy *p, RunCgroup *ret, HutchError *reterr);

/* Removes the cgroups that runs whose supervisor was SIGKILLed left
 * (empty, of a pid that is gone) in the hierarchies @rc planned. Nothing
 * depends on it but the tidiness of the hierarchies, so a run calls it
 * where it costs the start nothing (issue 16: after its sandbox was
 * released, while the command runs). */
void run_cgroup_gc(const RunCgroup *rc);

/* Creates the cgroup "@name" as planned (while the sandbox init builds its
 * filesystem, so the two overlap) and settles the rlimits of a degraded
 * run. Returns 0, or the cgroup error when a limit that was asked for
 * turns out not to be enforceable after all. */
int run_cgroup_create(const Policy *p, RunCgroup *rc, const char *name, HutchError *reterr);

/* A running sandbox's new limits (hutch update): @p's memory, swap, cpus
 * and pids written to the cgroup as cgroup_update_limits() allows, and
 * rc->want/limits updated. -EOPNOTSUPP without a cgroup, or naming the
 * limit that cannot change live. */
int run_cgroup_update(RunCgroup *rc, const Policy *p, HutchError *reterr);

/* Removes the cgroup (killing what is left), frees it and the topology. */
void run_cgroup_done(RunCgroup *rc);

/* Fills the outcome's cpu, memory peak and OOM/pids evidence from the
 * cgroup's counters, when there is a cgroup. */
void run_cgroup_stats(RunCgroup *rc, CgroupStats *ret);
