/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The keeper of a persistent microVM sandbox (`hutch create --backend vm`,
 * docs/vm.md "Persistent VM sandboxes"): the same control socket and
 * protocol as the namespace backend's keeper (keeper.h), holding one VM
 * between execs. The sandbox's layers are mounted on the host
 * (vm-layers.c) and shared with the guest; the guest's agent runs one
 * EXEC at a time, so execs wait here in a FIFO queue and the next starts
 * when the previous one's EXIT came. Each exec's streams are relayed
 * between the client's descriptors and the agent's frames without ever
 * blocking the loop (vm-run.c's session). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "sandbox/keeper-internal.h"
#include "sandbox/keeper.h"
#include "sandbox/vm-layers.h"
#include "sandbox/vm-run.h"
#include "strv.h"

/* The sandbox's files are shared over 9p; the command is root of them. */
#define KEEPER_VM_DETACH_REFUSED "detached execs are not supported on --backend vm yet"
#define KEEPER_VM_FILE_REFUSED                                                                     \
        "file operations are not supported on --backend vm sandboxes yet (use hutch exec)"

/* How long the agent has to end a command it was told to kill. */
#define VM_KILL_GRACE_MS 5000U

typedef struct VmExec {
        uint64_t id;
        int conn_fd; /* the client waiting for the outcome, or -EBADF once it went away */
        int fds[3];  /* the client's stdin, stdout, stderr (owned) */
        char *payload;
        size_t payload_len;
        char *argv_json;
        uint64_t timeout_ms, start_ms, deadline_ms, start_wall_ms;
        uint64_t kill_sent_ms; /* when the agent was told to kill it, or 0 */
        off_t audit_start;
        bool started, timed_out, killed;
        Supervision sup; /* relays, forwarded signal, times */
        VmSession ss;
} VmExec;

typedef struct VmKeeper {
        const KeeperConfig *cfg;
        VmRun v;
        VmLayers layers;
        int listen_fd;
        KeeperConns conns;
        VmExec *queue[KEEPER_MAX_EXECS]; /* FIFO; queue[0] runs once started */
        size_t n_queue;
        uint64_t next_id, idle_since_ms;
        bool stop, frozen;
        HutchError error;
} VmKeeper;

static VmExec *vm_exec_free(VmExec *e) {
        if (!e)
                return NULL;
        for (size_t i = 0; i < 3; i++)
                e->fds[i] = safe_close(e->fds[i]);
        free(e->payload);
        free(e->argv_json);
        free(e);
        return NULL;
}

/* Drops queue[@i]: its client's connection goes too. */
static void queue_drop(VmKeeper *k, size_t i) {
        VmExec *e = k->queue[i];
        KeeperConn *c = keeper_conn_find(&k->conns, e->conn_fd);

        if (c)
                keeper_conn_remove(&k->conns, c);
        vm_exec_free(e);
        memmove(k->queue + i, k->queue + i + 1, (k->n_queue - i - 1) * sizeof(VmExec *));
        if (--k->n_queue == 0)
                k->idle_since_ms = now_ms();
}

static size_t queue_find(VmKeeper *k, uint64_t id) {
        for (size_t i = 0; i < k->n_queue; i++)
                if (k->queue[i]->id == id)
                        return i;
        return SIZE_MAX;
}

/* The running exec's end: the outcome to its client, the history. */
static void exec_finished(VmKeeper *k) {
        _cleanup_(outcome_done) Outcome o = {};
        _cleanup_free_ char *json = NULL;
        VmExec *e = k->queue[0];

        o.wall_ms = now_ms() - e->start_ms;
        if (vm_exit_outcome(&e->ss, &o) < 0) {
                /* No EXIT: the VM went away under the command. */
                o.reason = OUTCOME_KILLED;
                o.signal = SIGKILL;
                o.exit_code = 128 + SIGKILL;
        }
        if (e->timed_out)
                o.reason = OUTCOME_TIMEOUT;
        else if (e->killed)
                o.reason = OUTCOME_KILLED;
        o.degraded = k->v.rc.degraded & (1U << POLICY_LIMIT_CPUS);
        o.denied = keeper_denials(k->cfg->policy, e->audit_start);
        if (outcome_to_json(&o, &json) < 0)
                json = NULL;
        if (e->conn_fd >= 0)
                (void)keeper_send_outcome(e->conn_fd, o.exit_code, json);
        keeper_history_append(k->cfg->history_path,
                              &(KeeperHistoryEntry){.id = e->id,
                                                    .argv_json = e->argv_json,
                                                    .start_wall_ms = e->start_wall_ms},
                              json ? json : "null");
        queue_drop(k, 0);
}

static void exec_started(VmKeeper *k, VmExec *e) {
        e->started = true;
        e->start_ms = e->sup.start_ms = now_ms();
        e->start_wall_ms = keeper_wall_ms();
        e->audit_start = keeper_audit_size(k->cfg->policy);
        if (e->timeout_ms)
                e->deadline_ms = e->start_ms + e->timeout_ms;
        if (e->conn_fd >= 0)
                (void)keeper_send_json(
                        e->conn_fd,
                        json_pack("{s:s,s:I}", "op", "started", "id", (json_int_t)e->id), NULL, 0);
}

/* Sends queue[0]'s EXEC and waits for STARTED; tells its client. */
static void exec_begin(VmKeeper *k) {
        VmExec *e = k->queue[0];
        HutchError err = {};
        char line[sizeof(err.msg) + 16];
        int r;

        r = vm_agent_request(k->v.vm, AGENT_MSG_EXEC, e->payload, e->payload_len, AGENT_MSG_STARTED,
                             &err);
        if (r == -ETIMEDOUT || r == -ECHILD || r == -EPIPE || r == -EBADMSG || r == -EPROTO) {
                /* The VM is gone or broken. */
                if (e->conn_fd >= 0)
                        keeper_send_error(e->conn_fd, err.msg);
                queue_drop(k, 0);
                if (k->error.errnum == 0)
                        k->error = err;
                k->stop = true;
                return;
        }
        exec_started(k, e);
        if (r >= 0)
                return;
        /* The agent could not start the command (not found, not
         * executable, a bad working directory): 127 or 126, with the
         * reason on its stderr, as the namespace backend does. */
        (void)snprintf(line, sizeof(line), "hutch: %s\n", err.msg);
        /* Never blocking the keeper on the client's stderr: a full pipe
         * loses the line (the exit status still tells); one that polls
         * writable has room for it (a page). */
        if (e->fds[2] >= 0) {
                struct pollfd p = {.fd = e->fds[2], .events = POLLOUT};

                if (poll(&p, 1, 0) == 1 && (p.revents & POLLOUT))
                        (void)write(e->fds[2], line, strlen(line));
        }
        e->ss.exited = true;
        e->ss.exit.status = (r == -ENOENT ? 127 : 126) << 8;
        exec_finished(k);
}

/* {"op":"exec",...}: checked and queued; the fds are taken. */
static int exec_queue(VmKeeper *k, KeeperConn *c, json_t *req, int *fds, size_t n_fds) {
        _cleanup_(keeper_exec_request_done) KeeperExecRequest q = {};
        _cleanup_strv_free_ char **env = NULL;
        const char *msg = NULL;
        VmExec *e;
        int r;

        if (k->stop) {
                (void)keeper_send_json(c->fd, json_pack("{s:s}", "op", "stopping"), NULL, 0);
                return -ECONNRESET;
        }
        r = keeper_exec_request_parse(req, k->cfg->policy, n_fds, &q, &msg);
        if (r < 0) {
                keeper_send_error(c->fd, msg);
                return r;
        }
        if (q.detach) {
                keeper_send_error(c->fd, KEEPER_VM_DETACH_REFUSED);
                return -EOPNOTSUPP;
        }
        if (k->n_queue >= KEEPER_MAX_EXECS) {
                keeper_send_error(c->fd, "too many commands waiting in this sandbox");
                return -EBUSY;
        }
        r = keeper_exec_env(k->v.env, q.extra, &env);
        if (r < 0) {
                keeper_send_error(c->fd, "invalid environment entry (want KEY=VALUE)");
                return r;
        }
        e = calloc(1, sizeof(VmExec));
        if (!e) {
                keeper_send_error(c->fd, "out of memory");
                return -ENOMEM;
        }
        *e = (VmExec){
                .id = ++k->next_id,
                .conn_fd = c->fd,
                .fds = {fds[0], fds[1], fds[2]},
                .timeout_ms = q.timeout_ms,
        };
        fds[0] = fds[1] = fds[2] = -EBADF;
        for (size_t i = 0; i < 2; i++)
                e->sup.relays[i] = (Relay){.in_fd = -EBADF,
                                           .out_fd = e->fds[1 + i],
                                           .limit = k->cfg->policy->output_limit};
        e->ss = (VmSession){.s = &e->sup, .in_fd = e->fds[0]};
        {
                json_t *a = keeper_strv_to_json(q.argv);

                e->argv_json = a ? json_dumps(a, JSON_COMPACT) : NULL;
                json_decref(a);
        }
        r = vm_run_build_exec(q.argv, env, q.cwd, &e->payload, &e->payload_len);
        if (r < 0 || e->payload_len > AGENT_FRAME_MAX) {
                vm_exec_free(e);
                keeper_send_error(c->fd, "the command line and environment are too long");
                return r < 0 ? r : -E2BIG;
        }
        k->queue[k->n_queue++] = e;
        c->kind = KEEPER_CONN_EXEC;
        c->exec_id = e->id;
        return 0;
}

/* Tells the agent to kill the running exec @e. SECURITY: if the guest has
 * not ended it within VM_KILL_GRACE_MS (an agent that does not answer),
 * the keeper stops the VM (keeper_loop()): a timeout is never left
 * unenforced. */
static void exec_kill(VmKeeper *k, VmExec *e) {
        if (!e->kill_sent_ms)
                e->kill_sent_ms = MAX(now_ms(), 1U);
        vm_session_signal(k->v.vm, &e->ss, SIGKILL);
}

/* The client of exec @id went away: a running command is killed, a
 * waiting one is dropped. */
static void exec_abandon(VmKeeper *k, uint64_t id) {
        size_t i = queue_find(k, id);

        if (i == SIZE_MAX)
                return;
        k->queue[i]->conn_fd = -EBADF;
        if (i > 0 || !k->queue[0]->started) {
                queue_drop(k, i);
                return;
        }
        k->queue[0]->killed = true;
        exec_kill(k, k->queue[0]);
}

static void conn_close(VmKeeper *k, KeeperConn *c) {
        if (c->kind == KEEPER_CONN_FREEZE && k->frozen && k->v.rc.cgroup) {
                (void)cgroup_set_frozen(k->v.rc.cgroup, false);
                k->frozen = false;
        }
        /* Its exec forgets the connection first, so that dropping it
         * leaves the connection alone. */
        if (c->kind == KEEPER_CONN_EXEC)
                exec_abandon(k, c->exec_id);
        keeper_conn_remove(&k->conns, c);
}

/* One message on a connection. Returns < 0 to close it. */
static int conn_handle(VmKeeper *k, KeeperConn *c) {
        int fds[3];
        json_t *req = NULL;
        const char *op;
        size_t n_fds = 0;
        int r;

        r = keeper_conn_recv(c, &req, &op, fds, &n_fds);
        if (r <= 0)
                return r;
        if (c->kind == KEEPER_CONN_EXEC && strcmp(op, "signal") == 0) {
                int sig = keeper_request_signal(req);

                /* A command that has not started yet gets nothing. */
                if (sig > 0 && queue_find(k, c->exec_id) == 0 && k->queue[0]->started)
                        vm_session_signal(k->v.vm, &k->queue[0]->ss, sig);
                r = 0;
        } else if (strcmp(op, "exec") == 0) {
                r = exec_queue(k, c, req, fds, n_fds);
        } else if (strcmp(op, "file") == 0) {
                keeper_send_error(c->fd, KEEPER_VM_FILE_REFUSED);
                r = -EOPNOTSUPP;
        } else if (strcmp(op, "ping") == 0) {
                r = keeper_send_ping(c->fd, k->n_queue);
        } else if (strcmp(op, "stop") == 0) {
                k->stop = true;
                c->kind = KEEPER_CONN_STOP; /* answered when everything is down */
                r = 0;
        } else if (strcmp(op, "freeze") == 0 || strcmp(op, "thaw") == 0) {
                /* QEMU's host cgroup: the guest stops as a whole. */
                r = keeper_freeze(c, k->v.rc.cgroup, op[0] == 'f', &k->frozen);
        } else {
                keeper_send_error(c->fd, "unknown request");
                r = -EINVAL;
        }
        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                fds[i] = safe_close(fds[i]);
        json_decref(req);
        return r;
}

static int poll_timeout(const VmKeeper *k, uint64_t idle_ms) {
        uint64_t now = now_ms(), next = UINT64_MAX;
        const VmExec *e = k->n_queue > 0 ? k->queue[0] : NULL;

        if (e && e->started && e->deadline_ms && !e->timed_out)
                next = e->deadline_ms;
        if (e && e->kill_sent_ms)
                next = MIN(next, e->kill_sent_ms + VM_KILL_GRACE_MS);
        if (k->n_queue == 0)
                next = k->idle_since_ms + idle_ms;
        return next == UINT64_MAX ? -1 : next <= now ? 0 : (int)MIN(next - now, (uint64_t)60000);
}

/* Starts the next exec, or ends the running one once its session ended.
 * Returns true when it did either (the loop then looks again). */
static bool queue_step(VmKeeper *k) {
        VmExec *e = k->n_queue > 0 ? k->queue[0] : NULL;

        /* A frozen VM starts nothing until the thaw. */
        if (e && !e->started && !k->frozen) {
                exec_begin(k);
                return true;
        }
        if (!e || !e->started)
                return false;
        vm_session_frames(k->v.vm, &e->ss);
        if (!vm_session_ended(&e->ss))
                return false;
        if (e->ss.qemu_gone || e->ss.error.errnum) {
                if (k->error.errnum == 0)
                        (void)hutch_error_set(&k->error, EPIPE, "the VM ended: %s",
                                              e->ss.error.errnum ? e->ss.error.msg
                                                                 : "QEMU is gone");
                k->stop = true;
        }
        e->sup.end_ms = now_ms();
        exec_finished(k);
        return true;
}

static void keeper_loop(VmKeeper *k) {
        uint64_t idle_ms =
                k->cfg->idle_timeout_ms ? k->cfg->idle_timeout_ms : KEEPER_DEFAULT_IDLE_MS;
        Vm *vm = k->v.vm;

        k->idle_since_ms = now_ms();
        while (!k->stop) {
                struct pollfd pfd[3 + VM_SESSION_NPOLL + KEEPER_MAX_CONNS];
                VmExec *e = k->n_queue > 0 ? k->queue[0] : NULL;
                size_t n = 0, n_fixed;

                if (queue_step(k))
                        continue;
                pfd[n++] = (struct pollfd){.fd = k->listen_fd, .events = POLLIN};
                pfd[n++] = (struct pollfd){.fd = vm->pidfd, .events = POLLIN};
                pfd[n++] = (struct pollfd){.fd = k->v.sigfd, .events = POLLIN};
                if (e && e->started)
                        vm_session_poll_fill(vm, &e->ss, pfd + n);
                else
                        for (size_t i = 0; i < VM_SESSION_NPOLL; i++)
                                pfd[n + i] = (struct pollfd){.fd = -1};
                n += VM_SESSION_NPOLL;
                n_fixed = n;
                for (size_t i = 0; i < k->conns.n; i++)
                        pfd[n++] = (struct pollfd){.fd = k->conns.conns[i].fd, .events = POLLIN};
                if (k->conns.n >= KEEPER_MAX_CONNS)
                        pfd[0].fd = -1; /* full: new clients wait in the backlog */

                if (poll(pfd, n, poll_timeout(k, idle_ms)) < 0 && errno != EINTR)
                        break;
                if (e && e->started && e->deadline_ms && !e->timed_out &&
                    now_ms() >= e->deadline_ms) {
                        /* The command's end, not the VM's: the agent kills
                         * its cgroup, and the EXIT follows. */
                        e->timed_out = true;
                        exec_kill(k, e);
                }
                if (e && e->kill_sent_ms && now_ms() >= e->kill_sent_ms + VM_KILL_GRACE_MS)
                        k->stop = true; /* the VM goes, and the command with it */
                if (k->n_queue == 0 && now_ms() >= k->idle_since_ms + idle_ms)
                        k->stop = true;
                if (pfd[2].revents) {
                        struct signalfd_siginfo si;

                        while (read(k->v.sigfd, &si, sizeof(si)) == sizeof(si))
                                if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT ||
                                    si.ssi_signo == SIGHUP)
                                        k->stop = true;
                }
                if (pfd[1].revents) {
                        if (e && e->started)
                                e->ss.qemu_gone = true;
                        if (k->error.errnum == 0)
                                (void)hutch_error_set(&k->error, EPIPE, "the VM ended");
                        k->stop = true;
                }
                if (e && e->started)
                        vm_session_poll_handle(vm, &e->ss, pfd + 3);
                for (size_t i = n_fixed; i < n; i++) {
                        KeeperConn *c;

                        if (!pfd[i].revents)
                                continue;
                        c = keeper_conn_find(&k->conns, pfd[i].fd);
                        if (c && conn_handle(k, c) < 0)
                                conn_close(k, c);
                }
                if (pfd[0].revents & POLLIN)
                        keeper_conn_accept(&k->conns, k->listen_fd);
        }
}

/* Starts the VM with the sandbox's layers and sends its SETUP. */
static int vm_up(VmKeeper *k, char *const *caller_env, HutchError *reterr) {
        _cleanup_free_ char *setup = NULL;
        size_t setup_len = 0;
        VmConfig c;
        int r;

        r = vm_run_prepare(&k->v, &c, caller_env, &setup, &setup_len, reterr);
        if (r < 0)
                return r;
        r = vm_layers_open(&k->v, &k->cfg->layers, &k->layers, reterr);
        if (r < 0)
                return r;
        vm_layers_configure(&k->layers, &k->v, &c);
        r = vm_start(&c, &k->v.vm, reterr);
        if (r < 0)
                return r;
        return vm_agent_request(k->v.vm, AGENT_MSG_SETUP, setup, setup_len, AGENT_MSG_READY,
                                reterr);
}

int sandbox_keep_vm(const KeeperConfig *cfg, char *const *caller_env, HutchError *reterr) {
        VmKeeper k = {
                .cfg = cfg,
                .v = {.policy = cfg->policy,
                      .persistent = true,
                      .sigfd = -EBADF,
                      .timerfd = -EBADF,
                      .proxy = PROXY_PROCESS_NULL},
                .layers = VM_LAYERS_NULL,
                .listen_fd = -EBADF,
                .next_id = keeper_history_last_id(cfg->history_path),
        };
        HutchError err = {};
        int r;

        r = vm_up(&k, caller_env, &err);
        if (r >= 0) {
                r = keeper_listen_socket(cfg->socket_path, &err);
                k.listen_fd = r;
        }
        if (r < 0) {
                vm_layers_done(&k.layers);
                vm_run_done(&k.v);
                keeper_report_ready(cfg->ready_fd, &err);
                if (reterr)
                        *reterr = err;
                return r;
        }
        keeper_scrub_secrets(cfg->policy, caller_env);
        keeper_report_ready(cfg->ready_fd, NULL);

        keeper_loop(&k);

        /* A frozen QEMU (v1 freezer) would not die of SIGKILL. */
        if (k.frozen && k.v.rc.cgroup) {
                (void)cgroup_set_frozen(k.v.rc.cgroup, false);
                k.frozen = false;
        }
        /* Down: the running command dies with the VM (its client gets the
         * outcome); one that did not start was not run ("stopping"). */
        if (k.n_queue > 0 && k.queue[0]->started) {
                k.queue[0]->killed = true;
                k.v.vm = vm_free(k.v.vm);
                exec_finished(&k);
        }
        while (k.n_queue > 0) {
                if (k.queue[0]->conn_fd >= 0)
                        (void)keeper_send_json(k.queue[0]->conn_fd,
                                               json_pack("{s:s}", "op", "stopping"), NULL, 0);
                queue_drop(&k, 0);
        }
        (void)unlink(cfg->socket_path);
        k.listen_fd = safe_close(k.listen_fd);
        /* QEMU, the mounts (with the last descriptor), the cgroup, the run
         * directory: gone before "stop" is answered. */
        k.v.vm = vm_free(k.v.vm);
        vm_layers_done(&k.layers);
        vm_run_done(&k.v);
        while (k.conns.n > 0) {
                KeeperConn *c = &k.conns.conns[0];

                if (c->kind == KEEPER_CONN_STOP)
                        (void)keeper_send_json(c->fd, json_pack("{s:s}", "op", "ok"), NULL, 0);
                keeper_conn_remove(&k.conns, c);
        }
        if (k.error.errnum != 0) {
                if (reterr)
                        *reterr = k.error;
                return -k.error.errnum;
        }
        return 0;
}
