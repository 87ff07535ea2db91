/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The microVM driver's pieces that `hutch run --backend vm`
 * (sandbox_run_vm(), declared in sandbox/backend.h) shares with the keeper
 * of a persistent microVM sandbox (keeper-vm.c); private to src/lib/vm. */

#include <poll.h>
#include <signal.h>
#include <stdbool.h>

#include "hutch-error.h"
#include "ns/userns.h"
#include "policy/policy.h"
#include "sandbox/backend.h"
#include "sandbox/cgroup-setup.h"
#include "sandbox/image-root.h"
#include "sandbox/outcome.h"
#include "sandbox/proxy-spawn.h"
#include "sandbox/secrets.h"
#include "sandbox/supervise.h"
#include "store/store.h"
#include "vm/vm-session.h"
#include "vm/vm.h"

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
        /* A persistent sandbox as root: the first host id of its range of
         * the id pool (SandboxLayerPaths.id_base; 0: none), which
         * vm_run_prepare() moves @idmap onto (store/id-pool.h). */
        uint32_t id_base;
        /* A one-shot run as root: where vm_run_prepare() puts the fd that
         * holds its range's lease (store/id-pool.h), which the caller
         * closes after the VM is gone; NULL: no lease (the fixed range). */
        int *id_lease;
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

/* How many of the sandbox's ids the guest sees (0..n-1): the map's count,
 * or with the ranged map of a user's persistent image sandbox the
 * sub-ids' count (0 the user, 1.. the sub-ids; docs/vm.md "Images"). */
static inline uint32_t vm_run_ids(const VmRun *v) {
        return v->idmap.ranged ? v->idmap.sub_count : v->idmap.count;
}

/* The EXEC payload: @argv, @env ("K=V"), the working directory @cwd, and
 * the user @user (--user or the image's User; NULL or "": the sandbox's
 * root), whose HOME and USER the agent sets unless @policy_env (the
 * policy's own -e) has them. */
int vm_run_build_exec(char *const *argv, char *const *env, const char *cwd, const char *user,
                      char *const *policy_env, char **ret, size_t *ret_len);
