/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* One-shot sandbox: sandbox_run() is the supervisor of docs/architecture.md §2. It
 * clones the sandbox init into new user, mount, pid, net, ipc, uts and
 * cgroup namespaces, writes the id maps, hands it the bind mounts, waits for
 * the command and fills the outcome.
 *
 * The calling process must be single-threaded. Failures of the sandbox's own
 * setup (before the command runs) are returned as -errno with @reterr saying
 * which step failed; the command's own failure is an Outcome, not an
 * error. */

#include "hutch-error.h"
#include "policy/policy.h"
#include "sandbox/outcome.h"

/* Where hutch-proxy listens inside a sandbox in network mode allow:
 * 127.0.0.1 and [::1], this port. */
#define SANDBOX_PROXY_PORT 3128
/* The listening sockets init hands to hutch-proxy at most: its two at
 * SANDBOX_PROXY_PORT, and with transparent DNS the resolver's and one per
 * allowlisted name and port (DNS_TABLE_LISTENERS_MAX); one SCM_RIGHTS
 * message (64 descriptors) carries them. */
#define SANDBOX_PROXY_SOCKETS_MAX 56

/* Snapshot layers below a persistent sandbox's own (a snapshot chain's
 * depth): each is one descriptor in SYNC_OP_LAYERS, with the data dir. */
#define SANDBOX_MAX_LAYERS 15

/* A persistent sandbox's layers on the host (see rootfs.h RootfsLayers). */
typedef struct SandboxLayerPaths {
        const char *data_dir; /* holds upper-<gen>/{root,ws} and work/{root,ws} */
        const char *upper;    /* "upper-<gen>" */
        char **layers;        /* snapshot layer dirs (each with root/ and ws/), top first;
                               * at most SANDBOX_MAX_LAYERS */
        uint32_t id_base;     /* as root: the first host id of its range of the pool
                               * (store/id-pool.h), its layers idmapped onto it; 0: none */
} SandboxLayerPaths;

/* Runs @argv (argv[0] searched in the sandbox's PATH) under @policy, which
 * must have passed policy_validate(). @caller_env is the environment the
 * -e K / --env-pass names are copied from. Forwards SIGINT, SIGTERM and
 * SIGHUP received by the caller to the command. */
int sandbox_run(const Policy *policy, char *const *argv, char *const *caller_env,
                Outcome *ret_outcome, HutchError *reterr);

/* For the next sandbox_run() of this process (either backend; the microVM
 * backend's pty is the guest's, vm/keeper-vm-tty.h): the
 * command gets a pty made inside the sandbox, and the caller's stdin (fd
 * 0, inherited by the sandbox's init) must be the channel of
 * sandbox/pty.h, which its relay holds the other end of. Not with an
 * output limit (its pipes are not the pty). */
void sandbox_set_command_tty(bool on);

/* Builds the command's environment: PATH, HOME, USER, HUTCH=1 and the
 * caller's TERM, LANG, LC_*, TZ, then @image_env (an image's Env, "K=V",
 * or NULL), then the names in policy->env_pass (when set in @caller_env),
 * then policy->env. Returns 0 and a new vector in @ret, or -ENOMEM. */
int sandbox_build_env(const Policy *policy, char *const *image_env, char *const *caller_env,
                      char ***ret);
