/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The backend seam of a keeper (docs/architecture.md "The backend seam").
 * One keeper (keeper-loop.c) serves the control socket of keeper.h for
 * every backend: it accepts the connections, reads and checks the
 * requests, answers what needs no sandbox (ping, stop, the exec table's
 * requests through ExecTableOps), tracks the idle time and the keeper's
 * own signals, and stops. What touches the sandbox goes through a
 * SandboxBackendOps table: the namespace backend's (keeper.c: init in
 * new namespaces, one child cgroup per exec) and the microVM's
 * (src/lib/vm/keeper-vm.c: one QEMU guest, the agent's channels). For the
 * keeper and the backends only, not the front ends. */

#include <jansson.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>

#include "cgroup/cgroup.h"
#include "hutch-error.h"
#include "policy/policy.h"
#include "sandbox/exec-table.h"
#include "sandbox/keeper-toolkit.h"
#include "sandbox/keeper.h"
#include "sandbox/outcome.h"
#include "sandbox/port-forward.h"

/* The most descriptors a backend adds to the keeper's poll (with a VM
 * keeper's published ports' listeners and connections, vm-forward.h). */
#define KEEPER_PORTS_NPOLL (POLICY_MAX_PORTS + 3 * 32)
#define KEEPER_BACKEND_NPOLL_MAX (4 + 3 * KEEPER_MAX_EXECS + KEEPER_PORTS_NPOLL)

typedef struct SandboxBackendOps SandboxBackendOps;

/* What the keeper holds whatever the backend; a backend's own keeper
 * struct has it as its first member (the ops get it back by a cast). */
typedef struct KeeperCore {
        const KeeperConfig *cfg;
        const SandboxBackendOps *ops;
        int listen_fd;
        int sigfd; /* the keeper's SIGTERM, SIGINT, SIGHUP (the backend's; borrowed) */
        KeeperConns conns;
        uint64_t next_id;       /* the last exec id given */
        uint64_t idle_since_ms; /* when the last exec ended (keeper_core_idle()) */
        bool stop, frozen;
        bool paused;        /* frozen by "pause" (E2B's pause, issue 20): held by no connection */
        uint64_t paused_ms; /* paused: since then (time_monotonic_ms()) */
        bool freeze_held;   /* a connection holds a "freeze" (a snapshot's) */
        HutchError error;   /* why the keeper stopped, when it was not asked to */
} KeeperCore;

struct SandboxBackendOps {
        /* Brings the sandbox up, before the control socket listens; sets
         * @k->sigfd. 0, or -errno with @reterr (then abort() follows). */
        int (*start)(KeeperCore *k, char *const *caller_env, HutchError *reterr);
        /* Undoes a start() that failed, or one whose socket could not be
         * made; @err says why (it may name what the sandbox said). */
        void (*abort)(KeeperCore *k, HutchError *err);
        /* Once the caller heard "ok": anything prepared ahead (NULL: none). */
        void (*ready)(KeeperCore *k);
        /* After the loop: every exec and the sandbox itself end (their
         * clients and the history get the outcomes). The control socket
         * is still there. */
        void (*halt)(KeeperCore *k);
        /* Then, the socket gone: what is left (cgroups, proxy, mounts,
         * the run folder) goes, before "stop" is answered. */
        void (*release)(KeeperCore *k);

        /* Before each poll: true to look again at once (NULL: never). May
         * set @k->stop. */
        bool (*step)(KeeperCore *k);
        /* Fills up to KEEPER_BACKEND_NPOLL_MAX entries; returns how many.
         * poll_handle() gets the same entries back after the poll. */
        size_t (*poll_fill)(KeeperCore *k, struct pollfd *pfd);
        void (*poll_handle)(KeeperCore *k, const struct pollfd *pfd);
        /* The one deadline path of the backend's execs: the earliest
         * deadline (a --timeout, a kill's grace, a kill to repeat) as
         * time_monotonic_ms(), or UINT64_MAX; deadlines() acts on those
         * that are due at @now. */
        uint64_t (*next_deadline)(KeeperCore *k);
        void (*deadlines)(KeeperCore *k, uint64_t now);
        /* The sandbox was paused for @by ms (issue 20): every exec's
         * deadlines move @by later, so a --timeout counts running time
         * only (E2B's VM stops whole). The keeper checks no deadline
         * while paused. */
        void (*deadlines_shift)(KeeperCore *k, uint64_t by);
        /* The execs the keeper holds (running, or waiting to run). */
        size_t (*running)(KeeperCore *k);

        /* {"op":"exec"} and {"op":"file"} on @c with @fds (the op may take
         * them, leaving -EBADF): answered on @c; < 0 to close @c. */
        int (*exec)(KeeperCore *k, KeeperConn *c, json_t *req, int fds[3], size_t n_fds);
        int (*file)(KeeperCore *k, KeeperConn *c, json_t *req, int fds[3], size_t n_fds);
        /* Passes @sig on to exec @id's command (one not started gets
         * nothing). */
        void (*signal)(KeeperCore *k, uint64_t id, int sig);
        /* Exec @id's client went away: it ends, unless detached. */
        void (*abandon)(KeeperCore *k, uint64_t id);
        /* {"op":"limits"} (NULL: an unknown request to this backend). */
        int (*limits)(KeeperCore *k, KeeperConn *c, json_t *req);
        /* The published ports (NULL: "ports", "port", "connect" are
         * unknown to this backend). */
        PortForwards *(*ports)(KeeperCore *k);
        /* The sandbox's hutch-proxy, whose network policy {"op":"network"}
         * changes live (keeper-policy.c); NULL: unknown to this backend. */
        ProxyProcess *(*proxy)(KeeperCore *k);
        /* The cgroup that freeze/thaw freeze whole, or NULL (refused). */
        Cgroup *(*freeze_cgroup)(KeeperCore *k);
        /* "list" and "kill" of the exec table (exec-table.h); the keeper
         * argument is @k. */
        ExecTableOps table;
};

/* Runs the keeper of @k (cfg and ops set, the backend's own part
 * initialised): start, listen, serve until stopped, and down, as
 * sandbox_keep() says. */
int keeper_core_run(KeeperCore *k, char *const *caller_env, HutchError *reterr);

/* The keeper's last exec ended: its idle time starts now. */
void keeper_core_idle(KeeperCore *k);

/* Closes @c: a freeze it held is thawed, an exec tied to it is
 * abandoned (ops->abandon), and it is dropped. */
void keeper_core_conn_close(KeeperCore *k, KeeperConn *c);

/* sandbox_keep() for the namespace backend (keeper.c) and for a policy
 * with backend vm (keeper-vm.c): their ops over keeper_core_run(). */
int sandbox_keep_ns(const KeeperConfig *cfg, char *const *caller_env, HutchError *reterr);
int sandbox_keep_vm(const KeeperConfig *cfg, char *const *caller_env, HutchError *reterr);

/* `hutch run --backend vm` (docs/vm.md), implemented in src/lib/vm
 * (vm-run.c): sandbox_run() hands a policy with backend vm to
 * sandbox_run_vm(), which has the same contract: @argv runs in a fresh
 * microVM under @policy (validated), the caller's SIGINT, SIGTERM,
 * SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 are passed to it, its stdin is the
 * caller's, and its end is an Outcome. -errno with @reterr for hutch's
 * own failures: QEMU or the kernel missing (-ENOENT, with the apt-get
 * line), an accelerator that cannot work here (-EOPNOTSUPP), a guest that
 * did not come up in time (-ETIMEDOUT, with the last console lines);
 * nothing is left running then. With @tty (`hutch run -t`,
 * sandbox_set_command_tty()), stdin is the pty channel of sandbox/pty.h:
 * the command gets a pty of the guest's, bridged through a host pty whose
 * master goes to the relay (vm/keeper-vm-tty.h). */
int sandbox_run_vm(const Policy *policy, char *const *argv, char *const *caller_env, bool tty,
                   Outcome *ret_outcome, HutchError *reterr);
