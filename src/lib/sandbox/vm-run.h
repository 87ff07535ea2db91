/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* `hutch run --backend vm` (docs/vm.md): sandbox_run() hands a policy with
 * backend vm to sandbox_run_vm(), which has the same contract: @argv runs
 * in a fresh microVM under @policy (validated), the caller's SIGINT,
 * SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 are passed to it, its
 * stdin is the caller's, and its end is an Outcome. -errno with @reterr
 * for hutch's own failures: QEMU or the kernel missing (-ENOENT, with the
 * apt-get line), an accelerator that cannot work here (-EOPNOTSUPP), a
 * guest that did not come up in time (-ETIMEDOUT, with the last console
 * lines); nothing is left running then. */

#include "hutch-error.h"
#include "policy/policy.h"
#include "sandbox/outcome.h"

int sandbox_run_vm(const Policy *policy, char *const *argv, char *const *caller_env,
                   Outcome *ret_outcome, HutchError *reterr);
