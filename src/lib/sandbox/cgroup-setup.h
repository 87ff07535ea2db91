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
        Cgroup *cgroup;       /* NULL when no hierarchy at all can be used */
        CgroupLimits rlimits; /* to apply in init (degraded, allowed); zero = none */
        unsigned degraded;    /* 1 << PolicyLimit of limits not enforced by a cgroup */
} RunCgroup;

/* Creates the cgroup "@name" for a run of @p. Returns 0, or -EOPNOTSUPP (or the
 * cgroup error) with @reterr naming the limit that cannot be enforced. */
int run_cgroup_prepare(const Policy *p, const char *name, RunCgroup *ret, HutchError *reterr);

/* Removes the cgroup (killing what is left) and frees it. */
void run_cgroup_done(RunCgroup *rc);

/* Fills the outcome's cpu, memory peak and OOM/pids evidence from the
 * cgroup's counters, when there is a cgroup. */
void run_cgroup_stats(RunCgroup *rc, CgroupStats *ret);
