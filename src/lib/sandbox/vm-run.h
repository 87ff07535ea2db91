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
 * lines); nothing is left running then.
 *
 * The pieces below are shared with the keeper of a persistent microVM
 * sandbox (keeper-vm.c); private to src/lib/sandbox. */

#include <poll.h>
#include <signal.h>
#include <stdbool.h>

#include "hutch-error.h"
#include "ns/userns.h"
#include "policy/policy.h"
#include "sandbox/cgroup-setup.h"
#include "sandbox/image-root.h"
#include "sandbox/outcome.h"
#include "sandbox/proxy-spawn.h"
#include "sandbox/secrets.h"
#include "sandbox/supervise.h"
#include "sandbox/vm-session.h"
#include "store/store.h"
#include "vm/vm.h"

int sandbox_run_vm(const Policy *policy, char *const *argv, char *const *caller_env,
                   Outcome *ret_outcome, HutchError *reterr);

/* The persistent directories (or an image's root), the workspace and the
 * binds. */
#define VM_RUN_MAX_SHARE_NAMES (8 + POLICY_MAX_BINDS)

typedef struct VmRun {
        const Policy *policy;
        bool persistent; /* a persistent sandbox: its shares are share_names */
        /* The policy's image, resolved (vm-image.h), or NULL: the root is
         * then one share, share_names[0] (docs/vm.md, "Images"). */
        ImageRoot *image;
        /* QEMU runs as the root of a user namespace (VmConfig.in_userns):
         * always for a persistent sandbox, as root hutch for a one-shot
         * run (vm_oneshot_open()). */
        bool in_userns;
        IdMapping idmap; /* the sandbox's (idmapping_for_caller()) */
        char name[64];
        Store *store;
        char *run_dir, *template_dir, *cache_dir, *proxy_sock, *helper;
        char *self; /* the running hutch: the guestfwd helper's binary */
        char **env;
        RunCgroup rc;
        ProxyProcess proxy;
        char *proxy_binary;
        SecretSet *secrets; /* the real values, until the proxy has them */
        char *ca_dir;       /* with secrets: the bundle, shared read-only at /run/hutch */
        /* With in_userns: the names of the shares (VmConfig.dirs binds
         * each to its directory), in the order of the SETUP's mounts: the
         * persistent directories (rootfs_persistent_dirs), the workspace,
         * the binds (a one-shot run: the workspace's and the binds' host
         * paths); NULL after the last. */
        char *share_names[VM_RUN_MAX_SHARE_NAMES];
        Vm *vm;
        int sigfd;
        sigset_t orig_mask;
        bool mask_saved;
        struct sigaction old_pipe;
        bool pipe_saved;
} VmRun;

/* Everything before the VM starts, for @v->policy (and @v->persistent;
 * sets @v->idmap and @v->in_userns):
 * the environment, the proxy (network allow), the run directory in the
 * store's state, the host cgroup, SIGINT... blocked into @v->sigfd, and
 * @c and the SETUP payload in @setup. -errno with @reterr; vm_run_done()
 * releases what was made either way. */
int vm_run_prepare(VmRun *v, VmConfig *c, char *const *caller_env, char **setup, size_t *setup_len,
                   HutchError *reterr);
void vm_run_done(VmRun *v);

/* The EXEC payload: @argv, @env ("K=V"), the working directory @cwd. */
int vm_run_build_exec(char *const *argv, char *const *env, const char *cwd, char **ret,
                      size_t *ret_len);
