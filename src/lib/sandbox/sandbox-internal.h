/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The supervisor's state for one sandbox, shared by the one-shot run
 * (sandbox.c) and the keeper of a persistent sandbox (keeper.c). Private
 * to src/lib/sandbox; what the microVM driver shares is host-setup.h. */

#include <signal.h>
#include <stdbool.h>

#include "ns/userns.h"
#include "policy/policy.h"
#include "sandbox/cgroup-setup.h"
#include "sandbox/host-setup.h"
#include "sandbox/image-root.h"
#include "sandbox/port-forward.h"
#include "sandbox/proxy-spawn.h"
#include "sandbox/sandbox.h"
#include "sandbox/secrets.h"
#include "sandbox/supervise.h"

typedef struct RunState {
        const Policy *policy;
        char name[64]; /* "run-<pid>-<hex>": the cgroup's name and the proxy's sandbox id */
        char **env, **args;
        ImageRoot *image; /* the policy's image, resolved; or NULL */
        int *image_fds;   /* its layers as detached mounts (as root), for init */
        size_t n_image_fds;
        char *proxy_binary;
        SecretSet *secrets; /* the real values, until the proxy has them */
        ProxyProcess proxy;
        int ca_fd; /* read end of the proxy's CA pipe (secrets only) */
        int sync_parent, sync_child, pidfd, sigfd;
        int out_w[2];
        Prepared prep;
        RunCgroup rc;
        Supervision sup;
        struct sigaction old_pipe;
        bool pipe_saved;
        sigset_t orig_mask; /* restored by run_state_done() */
        bool mask_saved;
        pid_t pid;          /* the sandbox init, until reaped */
        PortForwards ports; /* the policy's published ports (port-forward.h) */
        int id_lease;       /* as root, one-shot: the lease of its range (store/id-pool.h) */
} RunState;

void run_state_init(RunState *st);

/* Releases everything the state holds (the proxy, the cgroup, fds) and
 * restores the signal mask. Idempotent. */
void run_state_done(RunState *st);

/* Everything up to the command: the proxy, the namespaces (init), the id
 * maps, the mounts, the cgroup, the CA. With @layers (a persistent
 * sandbox) @argv is NULL and init will serve exec requests. Returns 0
 * with st->pid running, or -errno with nothing left running (the state
 * still needs run_state_done()). */
int sandbox_start(const Policy *policy, const SandboxLayerPaths *layers, char *const *argv,
                  char *const *caller_env, RunState *st, HutchError *reterr);

/* Kills a started init (st->pid) and waits for it; an error init reported
 * replaces @reterr. */
void sandbox_abort(RunState *st, HutchError *reterr);

/* SupervisionSocketsFn: hands init's listening sockets to the proxy. */
int sandbox_on_proxy_sockets(Supervision *s, int *fds, size_t n_fds, HutchError *reterr);
