/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The one keeper loop (backend.h): the control socket's connections and
 * requests, the idle timeout, the keeper's own signals and its start and
 * stop, over the backend's ops. */
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "sandbox/backend.h"
#include "time-util.h"

void keeper_core_idle(KeeperCore *k) {
        k->idle_since_ms = time_monotonic_ms();
}

/* Thaws the sandbox if it is frozen (a freeze connection that closed, or
 * the keeper's end: the v1 freezer holds SIGKILL until then). */
static void core_thaw(KeeperCore *k) {
        Cgroup *cg = k->ops->freeze_cgroup(k);

        if (k->frozen && cg) {
                (void)cgroup_set_frozen(cg, false);
                k->frozen = false;
        }
}

void keeper_core_conn_close(KeeperCore *k, KeeperConn *c) {
        /* A freeze of a paused sandbox ends with it still paused. */
        if (c->kind == KEEPER_CONN_FREEZE) {
                k->freeze_held = false;
                if (!k->paused)
                        core_thaw(k);
        }
        /* Its exec forgets the connection first, so that ending it leaves
         * the connection alone. */
        if (c->kind == KEEPER_CONN_EXEC)
                k->ops->abandon(k, c->exec_id);
        keeper_conn_remove(&k->conns, c);
}

static bool op_is(const char *op, const char *name) {
        return strcmp(op, name) == 0;
}

/* Freezes (@on) or thaws the whole sandbox (backend.h's freeze_cgroup),
 * the step that "pause"/"unpause" and "freeze"/"thaw" share, and records
 * it in k->frozen. A freeze of a frozen sandbox is refused with @busy. A
 * freeze that fails is undone: half-frozen is no state to leave it in. 0,
 * or < 0 with @c answered: -EBUSY, -EOPNOTSUPP without a cgroup, else the
 * freezer's -errno. */
static int core_set_frozen(KeeperCore *k, KeeperConn *c, bool on, const char *busy) {
        Cgroup *cg = k->ops->freeze_cgroup(k);
        int r;

        if (on && k->frozen) {
                keeper_send_refusal(c->fd, EBUSY, busy);
                return -EBUSY;
        }
        if (!cg) {
                keeper_send_refusal(c->fd, EOPNOTSUPP, "no cgroup: this sandbox cannot be frozen");
                return -EOPNOTSUPP;
        }
        r = cgroup_set_frozen(cg, on);
        if (r < 0) {
                if (on)
                        (void)cgroup_set_frozen(cg, false);
                keeper_send_error(c->fd, on ? "failed to freeze the sandbox"
                                            : "failed to thaw the sandbox");
                return r;
        }
        k->frozen = on;
        return 0;
}

/* {"op":"freeze"} (@on) or "thaw" on @c: a snapshot's freeze, held while
 * @c lives as a freeze connection (keeper_core_conn_close() thaws). Only
 * the connection that froze thaws: a "thaw" from any other would undo a
 * pause, or another's snapshot freeze, behind its back. A paused sandbox
 * is frozen already: its freeze is granted as it is and its end leaves it
 * paused ("unpause" waits for it), so that a snapshot of it keeps its
 * processes (refused, the E2B snapshot stopped it: they ended). Returns
 * < 0 (answered) to close @c. */
static int freeze_handle(KeeperCore *k, KeeperConn *c, bool on) {
        int r = 0;

        if (!on && c->kind != KEEPER_CONN_FREEZE) {
                keeper_send_error(c->fd, "nothing to thaw: this connection holds no freeze");
                return -EINVAL;
        }
        if (!k->paused || (on && k->freeze_held))
                r = core_set_frozen(k, c, on, "the sandbox is already frozen");
        if (r < 0)
                return r;
        k->freeze_held = on;
        c->kind = on ? KEEPER_CONN_FREEZE : KEEPER_CONN_NEW;
        (void)keeper_send_json(c->fd, json_pack("{s:s}", "op", "ok"), NULL, 0);
        return 0;
}

/* {"op":"pause"} (@on) or {"op":"unpause"}: the whole sandbox frozen
 * until "unpause" from any connection or the keeper's end, not while a
 * connection lives as "freeze" holds it: E2B's pause, whose sandbox
 * outlives the request (issue 20). Idempotent. The keeper refuses execs
 * and file operations meanwhile (they would wait in the frozen cgroup).
 * Returns < 0 (answered) to close @c. */
static int pause_handle(KeeperCore *k, KeeperConn *c, bool on) {
        int r;

        if (on != k->paused) {
                if (!on && k->freeze_held) {
                        keeper_send_refusal(c->fd, EBUSY, "the sandbox is frozen for a snapshot");
                        return -EBUSY;
                }
                r = core_set_frozen(k, c, on, "the sandbox is frozen for a snapshot");
                if (r < 0)
                        return r;
                k->paused = on;
                /* The frozen time does not count against the execs'
                 * --timeout (deadline.h's command_deadline_shift()). */
                if (on)
                        k->paused_ms = time_monotonic_ms();
                else
                        k->ops->deadlines_shift(k, time_monotonic_ms() - k->paused_ms);
        }
        return keeper_send_json(c->fd, json_pack("{s:s}", "op", "ok"), NULL, 0);
}

/* One message on a connection. Returns < 0 to close it. */
static int conn_handle(KeeperCore *k, KeeperConn *c) {
        const SandboxBackendOps *ops = k->ops;
        int fds[3] = {-EBADF, -EBADF, -EBADF};
        json_t *req = NULL;
        const char *op;
        size_t n_fds = 0;
        int r;

        r = keeper_conn_recv(c, &req, &op, fds, &n_fds);
        if (r <= 0)
                return r;
        if (c->kind == KEEPER_CONN_EXEC && op_is(op, "signal")) {
                int sig = keeper_request_signal(req);

                if (sig > 0)
                        ops->signal(k, c->exec_id, sig);
                r = 0;
        } else if (k->paused && (op_is(op, "exec") || op_is(op, "file"))) {
                keeper_send_error(c->fd, "the sandbox is paused");
                r = -EBUSY;
        } else if (op_is(op, "exec")) {
                r = ops->exec(k, c, req, fds, n_fds);
        } else if (op_is(op, "file")) {
                r = ops->file(k, c, req, fds, n_fds);
        } else if (exec_table_op(op) && !op_is(op, "list") && !op_is(op, "stdin") &&
                   keeper_conns_waiting(&k->conns) >= KEEPER_MAX_WAITERS) {
                /* The waiters' places are bounded (keeper-toolkit.h). */
                keeper_send_refusal(c->fd, EAGAIN,
                                    "too many connections wait for execs in this sandbox");
                r = -ECONNRESET;
        } else if (exec_table_op(op)) {
                r = exec_table_handle(&ops->table, k, k->cfg, c, req, op);
        } else if (op_is(op, "ping")) {
                r = keeper_send_ping(c->fd, ops->running(k));
        } else if (op_is(op, "stop")) {
                k->stop = true;
                c->kind = KEEPER_CONN_STOP; /* answered when everything is down */
                r = 0;
        } else if (op_is(op, "pause") || op_is(op, "unpause")) {
                r = pause_handle(k, c, op_is(op, "pause"));
        } else if (op_is(op, "freeze") || op_is(op, "thaw")) {
                r = freeze_handle(k, c, op[0] == 'f');
        } else if (op_is(op, "limits") && ops->limits) {
                r = ops->limits(k, c, req);
        } else if (op_is(op, "network") && ops->proxy) {
                r = keeper_network_update(ops->proxy(k), c->fd, req);
        } else if ((op_is(op, "ports") || op_is(op, "port") || op_is(op, "connect")) &&
                   ops->ports) {
                r = keeper_ports_handle(c->fd, req, op, ops->ports(k));
        } else {
                keeper_send_error(c->fd, "unknown request");
                r = -EINVAL;
        }
        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                fds[i] = safe_close(fds[i]);
        json_decref(req);
        return r;
}

static int poll_timeout(KeeperCore *k, uint64_t idle_ms) {
        uint64_t now = time_monotonic_ms();
        uint64_t next = k->paused ? UINT64_MAX : k->ops->next_deadline(k);

        if (k->ops->running(k) == 0)
                next = MIN(next, k->idle_since_ms + idle_ms);
        return next == UINT64_MAX ? -1 : next <= now ? 0 : (int)MIN(next - now, (uint64_t)60000);
}

static void keeper_loop(KeeperCore *k) {
        const SandboxBackendOps *ops = k->ops;
        uint64_t idle_ms =
                k->cfg->idle_timeout_ms ? k->cfg->idle_timeout_ms : KEEPER_DEFAULT_IDLE_MS;

        k->idle_since_ms = time_monotonic_ms();
        while (!k->stop) {
                struct pollfd pfd[2 + KEEPER_BACKEND_NPOLL_MAX + ELEMENTSOF(k->conns.conns)];
                size_t n = 0, n_fixed;
                uint64_t now;

                if (ops->step && ops->step(k))
                        continue;
                if (k->stop)
                        break;
                pfd[n++] = (struct pollfd){.fd = k->listen_fd, .events = POLLIN};
                pfd[n++] = (struct pollfd){.fd = k->sigfd, .events = POLLIN};
                n += ops->poll_fill(k, pfd + n);
                n_fixed = n;
                for (size_t i = 0; i < k->conns.n; i++)
                        pfd[n++] = (struct pollfd){.fd = k->conns.conns[i].fd, .events = POLLIN};
                if (!keeper_conns_have_room(&k->conns))
                        pfd[0].fd = -1; /* full: new clients wait in the backlog */

                if (poll(pfd, n, poll_timeout(k, idle_ms)) < 0 && errno != EINTR)
                        break;
                now = time_monotonic_ms();
                if (!k->paused)
                        ops->deadlines(k, now);
                if (ops->running(k) == 0 && now >= k->idle_since_ms + idle_ms)
                        k->stop = true;
                if (pfd[1].revents) {
                        struct signalfd_siginfo si;

                        while (read(k->sigfd, &si, sizeof(si)) == sizeof(si))
                                if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT ||
                                    si.ssi_signo == SIGHUP)
                                        k->stop = true;
                }
                ops->poll_handle(k, pfd + 2);
                /* Connections: walk a copy of the fds, since handling one
                 * may close others. */
                for (size_t i = n_fixed; i < n; i++) {
                        KeeperConn *c;

                        if (!pfd[i].revents)
                                continue;
                        c = keeper_conn_find(&k->conns, pfd[i].fd);
                        if (c && conn_handle(k, c) < 0)
                                keeper_core_conn_close(k, c);
                }
                if (pfd[0].revents & POLLIN)
                        keeper_conn_accept(&k->conns, k->listen_fd);
        }
}

int keeper_core_run(KeeperCore *k, char *const *caller_env, HutchError *reterr) {
        const KeeperConfig *cfg = k->cfg;
        HutchError err = {};
        int r;

        k->listen_fd = k->sigfd = -EBADF;
        r = k->ops->start(k, caller_env, &err);
        if (r >= 0) {
                r = keeper_listen_socket(cfg->socket_path, &err);
                k->listen_fd = r;
        }
        if (r < 0) {
                k->ops->abort(k, &err);
                keeper_report_ready(cfg->ready_fd, &err);
                if (reterr)
                        *reterr = err;
                return r;
        }
        keeper_scrub_secrets(cfg->policy, caller_env);
        keeper_report_ready(cfg->ready_fd, NULL);
        if (k->ops->ready)
                k->ops->ready(k);

        keeper_loop(k);

        /* A paused (or frozen) sandbox is thawed to be stopped. */
        core_thaw(k);
        k->frozen = k->paused = false;
        k->ops->halt(k);
        (void)unlink(cfg->socket_path);
        k->listen_fd = safe_close(k->listen_fd);
        /* What is left goes before "stop" is answered, so that a stopped
         * sandbox has nothing left when `hutch stop` returns. */
        k->ops->release(k);
        while (k->conns.n > 0) {
                KeeperConn *c = &k->conns.conns[0];

                if (c->kind == KEEPER_CONN_STOP)
                        (void)keeper_send_json(c->fd, json_pack("{s:s}", "op", "ok"), NULL, 0);
                keeper_conn_remove(&k->conns, c);
        }
        if (k->error.errnum != 0) {
                if (reterr)
                        *reterr = k->error;
                return -k->error.errnum;
        }
        return 0;
}

int sandbox_keep(const KeeperConfig *cfg, char *const *caller_env, HutchError *reterr) {
        if (cfg->policy->backend == SANDBOX_BACKEND_VM)
                return sandbox_keep_vm(cfg, caller_env, reterr);
        return sandbox_keep_ns(cfg, caller_env, reterr);
}
