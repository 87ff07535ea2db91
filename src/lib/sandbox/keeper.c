/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "parse-util.h"
#include "sandbox/exec-table.h"
#include "sandbox/file-op.h"
#include "sandbox/keeper-internal.h"
#include "sandbox/keeper.h"
#include "sandbox/sandbox-internal.h"
#include "sandbox/sync.h"
#include "strv.h"
#include "time-util.h"

/* How often a killed exec that has not ended is killed again. */
#define KEEPER_REKILL_MS 100U

typedef struct Exec {
        uint64_t id;
        int conn_fd; /* the client waiting for the outcome, or -EBADF */
        Cgroup *cgroup;
        uint64_t start_ms, deadline_ms, start_wall_ms;
        bool detached, builtin, timed_out, killed;
        CgroupStats before;
        char *argv_json;
        off_t audit_start; /* the audit log's size when the exec started */

        uint64_t pid;              /* its first process in the sandbox (SYNC_OP_STARTED), or 0 */
        uint64_t kill_deadline_ms; /* "kill"'s grace ends: SIGKILL then, or 0 */
        int kill_signal;           /* the signal "kill" sent, or 0 */
        uint64_t rekill_ms;        /* killed: when to kill again (keeper_loop()) */
        ExecLogPipe logs[2];       /* a detached exec's stdout, stderr (exec-table.h) */
} Exec;

typedef struct Keeper {
        const KeeperConfig *cfg;
        RunState *st;
        int listen_fd;
        KeeperConns conns;
        Exec execs[KEEPER_MAX_EXECS];
        size_t n_execs;
        uint64_t next_id, idle_since_ms;
        CgroupStats counters; /* the sandbox's, read at the last exec's end */
        Cgroup *stem_cgroup;  /* the next exec's, its process prepared (stem_prepare()) */
        uint64_t stem_id;
        bool stop, frozen;
        HutchError error;
} Keeper;

/* ---- keeper side ---- */

static Exec *exec_find(Keeper *k, uint64_t id) {
        for (size_t i = 0; i < k->n_execs; i++)
                if (k->execs[i].id == id)
                        return &k->execs[i];
        return NULL;
}

static void conn_close(Keeper *k, KeeperConn *c) {
        if (c->kind == KEEPER_CONN_FREEZE && k->frozen && k->st->rc.cgroup) {
                (void)cgroup_set_frozen(k->st->rc.cgroup, false);
                k->frozen = false;
        }
        if (c->kind == KEEPER_CONN_EXEC) {
                Exec *e = exec_find(k, c->exec_id);

                if (e)
                        e->conn_fd = -EBADF;
        }
        keeper_conn_remove(&k->conns, c);
}

/* Ends everything an exec started: its cgroup, or without one its main
 * process through init. */
static void exec_kill(Keeper *k, Exec *e) {
        if (e->cgroup)
                (void)cgroup_kill(e->cgroup);
        else
                (void)sync_send_values(k->st->sync_parent, SYNC_OP_SIGNAL,
                                       (uint64_t[3]){e->id, SIGKILL, 0}, NULL, 0);
}

static void exec_free(Keeper *k, Exec *e) {
        exec_log_pipe_done(&e->logs[0]);
        exec_log_pipe_done(&e->logs[1]);
        if (e->cgroup)
                (void)cgroup_destroy(e->cgroup);
        free(e->argv_json);
        *e = k->execs[--k->n_execs];
        if (k->n_execs == 0)
                k->idle_since_ms = time_monotonic_ms();
}

static void stem_prepare(Keeper *k);

static void exec_finished(Keeper *k, Exec *e, int status) {
        _cleanup_(outcome_done) Outcome o = {};
        _cleanup_free_ char *json = NULL;
        CgroupStats after = {}, mine = {};

        /* What it left behind goes with it. */
        if (e->cgroup) {
                (void)cgroup_kill(e->cgroup);
                (void)cgroup_stats(e->cgroup, &mine);
        }
        /* The sandbox's counters tell an OOM kill or a refused fork, which
         * only an exec that did not exit 0 can have met; reading them walks
         * the v1 hierarchies, so a clean exit reports the last ones read
         * (mem_peak_bytes is the sandbox's anyway). */
        after = k->counters;
        if (k->st->rc.cgroup && !(WIFEXITED(status) && WEXITSTATUS(status) == 0) &&
            cgroup_stats(k->st->rc.cgroup, &after) >= 0)
                k->counters = after;
        o.wall_ms = time_monotonic_ms() - e->start_ms;
        o.cpu_ms = mine.have_cpu ? mine.cpu_usec / 1000 : 0;
        o.mem_peak_bytes = after.have_mem_peak ? after.mem_peak_bytes : 0;
        o.degraded = k->st->rc.degraded | k->cfg->degraded;
        o.fallbacks = k->st->sup.fallbacks;
        if (WIFEXITED(status)) {
                o.reason = OUTCOME_EXITED;
                o.exit_code = WEXITSTATUS(status);
        } else {
                o.reason = OUTCOME_SIGNALED;
                o.signal = WTERMSIG(status);
                o.exit_code = 128 + o.signal;
        }
        o.denied = keeper_denials(k->cfg->policy, e->audit_start);
        /* Its log is whole before anyone hears it ended. */
        exec_log_pipe_done(&e->logs[0]);
        exec_log_pipe_done(&e->logs[1]);
        o.stdout_truncated = e->logs[0].truncated;
        o.stderr_truncated = e->logs[1].truncated;
        if (e->timed_out)
                o.reason = OUTCOME_TIMEOUT;
        else if (e->killed)
                o.reason = OUTCOME_KILLED;
        else if (o.reason == OUTCOME_SIGNALED && o.signal == e->kill_signal)
                o.reason = OUTCOME_KILLED; /* as a signal passed on (docs/cli-run.md) */
        else if (after.oom_kills > e->before.oom_kills && o.reason == OUTCOME_SIGNALED)
                o.reason = OUTCOME_OOM;
        else if (after.pids_max_events > e->before.pids_max_events && o.exit_code != 0)
                o.reason = OUTCOME_PIDS;

        if (outcome_to_json(&o, &json) < 0)
                json = NULL;
        /* The client first; the history and the exec's cgroup after. */
        if (e->conn_fd >= 0) {
                KeeperConn *c = keeper_conn_find(&k->conns, e->conn_fd);

                (void)keeper_send_outcome(e->conn_fd, o.exit_code, json);
                if (c)
                        conn_close(k, c);
        }
        exec_table_finished(&k->conns, e->id, o.exit_code, json);
        /* The next exec's process, while the client reads its answer (not
         * while this exec ran: moving a process into a cgroup holds up the
         * command's forks and exit). First: a client that calls again at
         * once must find it ready; the history and removing this exec's
         * cgroup can wait (while init forks the new process). */
        stem_prepare(k);
        if (!e->builtin)
                keeper_history_append(k->cfg->history_path,
                                      &(KeeperHistoryEntry){.id = e->id,
                                                            .argv_json = e->argv_json,
                                                            .detached = e->detached,
                                                            .start_wall_ms = e->start_wall_ms},
                                      json ? json : "null");
        exec_free(k, e);
}

/* "cwd\0argv...\0\0env...\0" for init. */
static int build_payload(const char *cwd, char *const *argv, char *const *env, char **ret,
                         size_t *ret_len) {
        size_t len = strlen(cwd) + 2;
        char *buf, *p;

        STRV_FOREACH(a, (char **)argv)
                len += strlen(*a) + 1;
        STRV_FOREACH(e, (char **)env)
                len += strlen(*e) + 1;
        if (len > SYNC_EXEC_PAYLOAD_MAX)
                return -E2BIG;
        buf = p = malloc(len);
        if (!buf)
                return -ENOMEM;
        p = stpcpy(p, cwd) + 1;
        STRV_FOREACH(a, (char **)argv)
                p = stpcpy(p, *a) + 1;
        *p++ = '\0';
        STRV_FOREACH(e, (char **)env)
                p = stpcpy(p, *e) + 1;
        *ret = buf;
        *ret_len = (size_t)(p - buf);
        return 0;
}

/* What one exec request asks for, checked. */
typedef struct ExecSpec {
        char **argv;  /* borrowed */
        char **extra; /* "K=V" over the sandbox's environment (borrowed), or NULL */
        const char *cwd;
        uint64_t timeout_ms;
        bool detach;
        bool builtin;   /* a file operation: not in the history */
        bool tty;       /* fds[0] is a pty channel (sandbox/pty.h) */
        const int *fds; /* stdin, stdout, stderr (borrowed; unused when detached) */
} ExecSpec;

/* Starts @x: its cgroup, then SYNC_OP_EXEC to init. Answers "started" on
 * @c, which then waits for the outcome (unless detached). Returns < 0 to
 * close @c. */
/* Prepares the next exec's cgroup and has init fork the process that will
 * run it into it now (SYNC_OP_STEM): moving a process into a cgroup can
 * wait for an RCU grace period (~15 ms when no move happened lately), which
 * this keeps off the next request's path. Without cgroups there is nothing
 * to prepare. Best effort: on failure the next exec takes the usual path. */
static void stem_prepare(Keeper *k) {
        _cleanup_free_ char *name = NULL;
        int cg_fds[SYNC_EXEC_FDS_MAX - 3];
        size_t n_cg = 0;
        HutchError ignored = {};
        Cgroup *cg = NULL;
        uint64_t id;
        int r;

        if (!k->st->rc.cgroup || k->stem_cgroup || k->stop)
                return;
        id = ++k->next_id;
        if (asprintf(&name, "x-%llu", (unsigned long long)id) < 0) {
                name = NULL;
                return;
        }
        r = cgroup_new_child(k->st->rc.cgroup, name, &cg, &ignored);
        if (r >= 0)
                r = cgroup_open_procs(cg, cg_fds, ELEMENTSOF(cg_fds), &n_cg);
        if (r >= 0)
                r = sync_send_values(k->st->sync_parent, SYNC_OP_STEM, (uint64_t[3]){id, 0, 0},
                                     cg_fds, n_cg);
        for (size_t i = 0; i < n_cg; i++)
                cg_fds[i] = safe_close(cg_fds[i]);
        if (r < 0) {
                if (cg)
                        (void)cgroup_destroy(cg);
                return;
        }
        k->stem_cgroup = cg;
        k->stem_id = id;
}

/* Keeps the keeper and init (@init) on the CPU the keeper runs on: an exec
 * wakes them in turn (client, keeper, init, the command, init, keeper,
 * client), and waking a process on another CPU costs an interrupt, ~35 us
 * in a virtual machine (bench/README.md); both are idle otherwise. Every
 * command gets the sandbox's CPUs back before it execs (init.c, exec_run()).
 * Best effort: nothing is pinned when the CPUs cannot be read or there is
 * one. */
static void pin_to_one_cpu(pid_t init) {
        cpu_set_t all, one;
        int cpu = sched_getcpu();

        if (cpu < 0 || cpu >= CPU_SETSIZE || sched_getaffinity(0, sizeof(all), &all) < 0 ||
            !CPU_ISSET(cpu, &all) || CPU_COUNT(&all) < 2)
                return;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        if (sched_setaffinity(init, sizeof(one), &one) < 0)
                return;
        (void)sched_setaffinity(0, sizeof(one), &one);
}

static int exec_launch(Keeper *k, KeeperConn *c, const ExecSpec *x) {
        bool use_stem = false;
        _cleanup_strv_free_ char **env = NULL;
        _cleanup_free_ char *payload = NULL, *name = NULL;
        _cleanup_close_ int null_fd = -EBADF, out_w = -EBADF, err_w = -EBADF;
        int cg_fds[SYNC_EXEC_FDS_MAX - 3], send_fds[SYNC_EXEC_FDS_MAX];
        size_t n_cg = 0, payload_len = 0;
        Exec *e;
        int r;

        /* Stopping (idle, or asked to): the command is not started. */
        r = keeper_exec_admit(c->fd, k->stop, k->n_execs);
        if (r < 0)
                return r;
        r = keeper_exec_env(k->st->env, x->extra, &env);
        if (r < 0) {
                keeper_send_error(c->fd, "invalid environment entry (want KEY=VALUE)");
                return r;
        }
        r = build_payload(x->cwd, x->argv, env, &payload, &payload_len);
        if (r < 0) {
                keeper_send_error(c->fd, "the command line and environment are too long");
                return r;
        }

        e = &k->execs[k->n_execs];
        *e = (Exec){
                .id = k->stem_cgroup ? k->stem_id : ++k->next_id,
                .conn_fd = x->detach ? -EBADF : c->fd,
                .detached = x->detach,
                .builtin = x->builtin,
                .start_ms = time_monotonic_ms(),
                .start_wall_ms = time_realtime_ms(),
                .audit_start = keeper_audit_size(k->cfg->policy),
                .logs = {EXEC_LOG_PIPE_NULL, EXEC_LOG_PIPE_NULL},
        };
        if (!x->builtin) {
                json_t *a = keeper_strv_to_json(x->argv);

                e->argv_json = a ? json_dumps(a, JSON_COMPACT) : NULL;
                json_decref(a);
        }
        /* The sandbox's counters as of the last exec's end: reading them
         * here would cost two cgroup walks per exec. */
        e->before = k->counters;
        if (k->stem_cgroup) {
                /* The prepared process is in this cgroup already. */
                e->cgroup = TAKE_PTR(k->stem_cgroup);
                use_stem = true;
        } else if (k->st->rc.cgroup) {
                HutchError ignored = {};

                if (asprintf(&name, "x-%llu", (unsigned long long)e->id) < 0) {
                        name = NULL;
                        r = -ENOMEM;
                } else
                        r = cgroup_new_child(k->st->rc.cgroup, name, &e->cgroup, &ignored);
                if (r >= 0)
                        r = cgroup_open_procs(e->cgroup, cg_fds, ELEMENTSOF(cg_fds), &n_cg);
                if (r < 0) {
                        if (e->cgroup)
                                (void)cgroup_destroy(e->cgroup);
                        free(e->argv_json);
                        keeper_send_error(c->fd, "failed to create the exec's cgroup");
                        return r;
                }
        }
        k->n_execs++;

        if (x->detach) {
                int w[2] = {-EBADF, -EBADF};

                /* Its output goes through the keeper, which keeps it
                 * bounded (exec-table.h). */
                r = exec_log_create(k->cfg->logs_dir, e->id, e->logs, w);
                out_w = w[0];
                err_w = w[1];
                null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (r < 0 || null_fd < 0) {
                        if (r >= 0)
                                r = negative_errno();
                        keeper_send_error(c->fd, "failed to open the exec's log file");
                        goto fail;
                }
                send_fds[0] = null_fd;
                send_fds[1] = out_w;
                send_fds[2] = err_w;
        } else
                memcpy(send_fds, x->fds, sizeof(int) * 3);
        memcpy(send_fds + 3, cg_fds, sizeof(int) * n_cg);
        r = sync_send_values(
                k->st->sync_parent, SYNC_OP_EXEC,
                (uint64_t[3]){e->id, payload_len,
                              (use_stem ? SYNC_EXEC_STEM : 0) | (x->tty ? SYNC_EXEC_TTY : 0)},
                send_fds, 3 + n_cg);
        if (r >= 0 && send(k->st->sync_parent, payload, payload_len, MSG_NOSIGNAL) < 0)
                r = negative_errno();
        for (size_t i = 0; i < n_cg; i++)
                cg_fds[i] = safe_close(cg_fds[i]);
        n_cg = 0;
        if (r < 0) {
                keeper_send_error(c->fd, "the sandbox is gone");
                goto fail;
        }
        if (x->timeout_ms)
                e->deadline_ms = e->start_ms + x->timeout_ms;
        r = keeper_send_json(
                c->fd, json_pack("{s:s,s:I}", "op", "started", "id", (json_int_t)e->id), NULL, 0);
        if (x->detach)
                return -ECONNRESET; /* done with this connection */
        c->kind = KEEPER_CONN_EXEC;
        c->exec_id = e->id;
        return 0;
fail:
        for (size_t i = 0; i < n_cg; i++)
                cg_fds[i] = safe_close(cg_fds[i]);
        e = &k->execs[k->n_execs - 1];
        e->conn_fd = -EBADF;
        exec_free(k, e);
        return r;
}

/* {"op":"exec",...} with stdin, stdout and stderr. */
static int exec_start(Keeper *k, KeeperConn *c, json_t *req, int *fds, size_t n_fds) {
        _cleanup_(keeper_exec_request_done) KeeperExecRequest q = {};
        const char *msg = NULL;
        int r;

        r = keeper_exec_request_parse(req, k->cfg->policy, k->st->image, n_fds, &q, &msg);
        if (r < 0) {
                keeper_send_error(c->fd, msg);
                return r;
        }
        return exec_launch(k, c,
                           &(ExecSpec){
                                   .argv = q.argv,
                                   .extra = q.extra,
                                   .cwd = q.cwd,
                                   .timeout_ms = q.timeout_ms,
                                   .detach = q.detach,
                                   .tty = q.tty,
                                   .fds = fds,
                           });
}

/* {"op":"file","action":A,"path":P,"mode":N,"max":N} with one fd: the
 * builtin of sandbox/file-op.h, run as an exec whose stdin and stdout are
 * that fd. A relative path is taken from the workspace, or $HOME. */
static int file_start(Keeper *k, KeeperConn *c, json_t *req, int *fds, size_t n_fds) {
        _cleanup_close_ int null_fd = -EBADF;
        KeeperFileRequest f;

        if (keeper_file_request_parse(req, k->cfg->policy, n_fds, &f) < 0) {
                keeper_send_error(c->fd, "malformed file request");
                return -EINVAL;
        }
        null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null_fd < 0) {
                keeper_send_error(c->fd, "failed to open /dev/null");
                return negative_errno();
        }
        return exec_launch(k, c,
                           &(ExecSpec){
                                   .argv = (char *[]){(char *)FILE_OP_ARGV0, (char *)f.action,
                                                      (char *)f.path, f.mode, f.max, NULL},
                                   .cwd = f.cwd,
                                   .timeout_ms = k->cfg->policy->timeout_ms,
                                   .builtin = true,
                                   .fds = (int[3]){fds[0], fds[0], null_fd},
                           });
}

/* {"op":"limits","policy":TEXT}: the new policy's memory, swap, cpus and
 * pids on the running sandbox's cgroup (hutch update). The rest of the
 * policy is not read here: the caller refuses other changes while it
 * runs. */
static int limits_update(Keeper *k, KeeperConn *c, json_t *req) {
        const char *text = json_string_value(json_object_get(req, "policy"));
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError e = {};
        int r;

        if (!p)
                r = hutch_error_set(&e, ENOMEM, "out of memory");
        else if (!text)
                r = hutch_error_set(&e, EINVAL, "malformed limits request");
        else
                r = policy_load_json(p, text, strlen(text), &e);
        if (r >= 0)
                r = run_cgroup_update(&k->st->rc, p, &e);
        if (r < 0) {
                keeper_send_error(c->fd, e.msg);
                return 0;
        }
        return keeper_send_json(c->fd, json_pack("{s:s}", "op", "ok"), NULL, 0);
}

/* ---- the exec table (exec-table.h) ---- */

static bool table_row(void *userdata, size_t i, ExecRow *ret) {
        Keeper *k = userdata;

        for (size_t j = 0; j < k->n_execs; j++) {
                const Exec *e = &k->execs[j];

                if (e->builtin)
                        continue;
                if (i-- > 0)
                        continue;
                *ret = (ExecRow){.id = e->id,
                                 .argv_json = e->argv_json,
                                 .start_wall_ms = e->start_wall_ms,
                                 .pid = e->pid,
                                 .detached = e->detached};
                return true;
        }
        return false;
}

static void table_kill(void *userdata, uint64_t id, int sig, uint64_t grace_ms) {
        Keeper *k = userdata;
        Exec *e = exec_find(k, id);

        if (!e)
                return;
        if (sig == SIGKILL) {
                e->killed = true;
                exec_kill(k, e);
                return;
        }
        (void)sync_send_values(k->st->sync_parent, SYNC_OP_SIGNAL,
                               (uint64_t[3]){id, (uint64_t)sig, 0}, NULL, 0);
        e->kill_signal = sig;
        if (grace_ms > 0)
                e->kill_deadline_ms = time_monotonic_ms() + grace_ms;
}

static const ExecTableOps table_ops = {.row = table_row, .kill = table_kill};

/* One message on a connection. Returns < 0 to close it. */
static int conn_handle(Keeper *k, KeeperConn *c) {
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

                if (sig > 0)
                        (void)sync_send_values(k->st->sync_parent, SYNC_OP_SIGNAL,
                                               (uint64_t[3]){c->exec_id, (uint64_t)sig, 0}, NULL,
                                               0);
                r = 0;
        } else if (strcmp(op, "exec") == 0) {
                r = exec_start(k, c, req, fds, n_fds);
        } else if (strcmp(op, "file") == 0) {
                r = file_start(k, c, req, fds, n_fds);
        } else if (exec_table_op(op)) {
                r = exec_table_handle(&table_ops, k, k->cfg, c, req, op);
        } else if (strcmp(op, "ping") == 0) {
                r = keeper_send_ping(c->fd, k->n_execs);
        } else if (strcmp(op, "stop") == 0) {
                k->stop = true;
                /* The answer goes out when everything is down. */
                r = 0;
                c->kind = KEEPER_CONN_STOP;
        } else if (strcmp(op, "freeze") == 0 || strcmp(op, "thaw") == 0) {
                r = keeper_freeze(c, k->st->rc.cgroup, op[0] == 'f', &k->frozen);
        } else if (strcmp(op, "limits") == 0) {
                r = limits_update(k, c, req);
        } else if (strcmp(op, "network") == 0) {
                r = keeper_network_update(&k->st->proxy, c->fd, req);
        } else if (strcmp(op, "ports") == 0 || strcmp(op, "port") == 0 ||
                   strcmp(op, "connect") == 0) {
                r = keeper_ports_handle(c->fd, req, op, &k->st->ports);
        } else {
                keeper_send_error(c->fd, "unknown request");
                r = -EINVAL;
        }
        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                fds[i] = safe_close(fds[i]);
        json_decref(req);
        return r;
}

static void handle_sync(Keeper *k) {
        int fds[2] = {-EBADF, -EBADF};
        SyncMsg m;
        Exec *e;
        int r;

        r = sync_recv(k->st->sync_parent, &m, fds, ELEMENTSOF(fds));
        if (r <= 0) {
                if (r != -EAGAIN) {
                        if (k->error.errnum == 0)
                                (void)hutch_error_set(&k->error, EPIPE, "the sandbox init is gone");
                        k->stop = true;
                }
                return;
        }
        switch ((SyncOp)m.op) {
        case SYNC_OP_SOCKETS:
                r = sandbox_on_proxy_sockets(&k->st->sup, fds, m.n_fds, &k->error);
                if (r < 0)
                        k->stop = true; /* fail closed: no wall, no sandbox */
                return;
        case SYNC_OP_ERROR:
                if (k->error.errnum == 0)
                        (void)hutch_error_set(&k->error, m.err > 0 && m.err < 4096 ? m.err : EIO,
                                              "sandbox setup failed: %s: %s", m.step, m.msg);
                k->stop = true;
                break;
        case SYNC_OP_STARTED:
                /* values[1]: its pid in the sandbox, for "list" only. */
                e = exec_find(k, m.values[0]);
                if (e && m.values[1] <= INT32_MAX)
                        e->pid = m.values[1];
                break;
        case SYNC_OP_EXITED:
                e = exec_find(k, m.values[0]);
                if (e)
                        exec_finished(k, e, m.status);
                break;
        case SYNC_OP_READY:
        case SYNC_OP_GO:
        case SYNC_OP_CONTINUE:
        case SYNC_OP_CA:
        case SYNC_OP_LAYERS:
        case SYNC_OP_EXEC:
        case SYNC_OP_SIGNAL:
        case SYNC_OP_STEM:
        case SYNC_OP_IMAGE:
        case _SYNC_OP_MAX:
        case _SYNC_OP_INVALID:
        default:
                break;
        }
        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                fds[i] = safe_close(fds[i]);
}

/* Waits for init's READY, handing the proxy its sockets on the way. */
static int wait_ready(Keeper *k, HutchError *reterr) {
        for (;;) {
                struct pollfd pfd[2] = {{.fd = k->st->sync_parent, .events = POLLIN},
                                        {.fd = k->st->pidfd, .events = POLLIN}};
                int fds[2] = {-EBADF, -EBADF};
                SyncMsg m;
                int r;

                if (poll(pfd, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return hutch_error_set(reterr, errno, "poll: %m");
                }
                if (!(pfd[0].revents & POLLIN))
                        return hutch_error_set(reterr, EPIPE,
                                               "the sandbox init ended during setup");
                r = sync_recv(k->st->sync_parent, &m, fds, ELEMENTSOF(fds));
                if (r <= 0)
                        return hutch_error_set(reterr, EPIPE,
                                               "the sandbox init ended during setup");
                if (m.op == SYNC_OP_READY) {
                        k->st->sup.fallbacks =
                                (unsigned)(m.values[1] & ((1U << _OUTCOME_FALLBACK_MAX) - 1));
                        return 0;
                }
                if (m.op == SYNC_OP_SOCKETS) {
                        r = sandbox_on_proxy_sockets(&k->st->sup, fds, m.n_fds, reterr);
                        if (r < 0)
                                return r;
                        continue;
                }
                for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                        fds[i] = safe_close(fds[i]);
                if (m.op == SYNC_OP_ERROR)
                        return hutch_error_set(reterr, m.err > 0 && m.err < 4096 ? m.err : EIO,
                                               "sandbox setup failed: %s: %s", m.step, m.msg);
                return hutch_error_set(reterr, EPROTO, "unexpected message from the sandbox init");
        }
}

static void keeper_loop(Keeper *k) {
        uint64_t idle_ms =
                k->cfg->idle_timeout_ms ? k->cfg->idle_timeout_ms : KEEPER_DEFAULT_IDLE_MS;

        k->idle_since_ms = time_monotonic_ms();
        while (!k->stop) {
                struct pollfd pfd[4 + KEEPER_MAX_CONNS + 2 * KEEPER_MAX_EXECS];
                uint64_t pipe_ids[2 * KEEPER_MAX_EXECS];
                uint64_t now = time_monotonic_ms(), next = UINT64_MAX;
                size_t n = 0, n_fixed, n_conns, n_pipes = 0;
                int timeout;

                pfd[n++] = (struct pollfd){.fd = k->listen_fd, .events = POLLIN};
                pfd[n++] = (struct pollfd){.fd = k->st->sync_parent, .events = POLLIN};
                pfd[n++] = (struct pollfd){.fd = k->st->pidfd, .events = POLLIN};
                pfd[n++] = (struct pollfd){.fd = k->st->sigfd, .events = POLLIN};
                n_fixed = n;
                for (size_t i = 0; i < k->conns.n; i++)
                        pfd[n++] = (struct pollfd){.fd = k->conns.conns[i].fd, .events = POLLIN};
                n_conns = n;
                /* Detached execs' output on its way to their logs. */
                for (size_t i = 0; i < k->n_execs; i++)
                        for (size_t j = 0; j < 2; j++)
                                if (k->execs[i].logs[j].in_fd >= 0) {
                                        pipe_ids[n_pipes++] = k->execs[i].id;
                                        pfd[n++] = (struct pollfd){.fd = k->execs[i].logs[j].in_fd,
                                                                   .events = POLLIN};
                                }
                if (k->conns.n >= KEEPER_MAX_CONNS)
                        pfd[0].fd = -1; /* full: new clients wait in the backlog */

                for (size_t i = 0; i < k->n_execs; i++) {
                        if (k->execs[i].deadline_ms && k->execs[i].deadline_ms < next)
                                next = k->execs[i].deadline_ms;
                        if (k->execs[i].kill_deadline_ms && k->execs[i].kill_deadline_ms < next)
                                next = k->execs[i].kill_deadline_ms;
                        if ((k->execs[i].timed_out || k->execs[i].killed) &&
                            k->execs[i].rekill_ms < next)
                                next = k->execs[i].rekill_ms;
                }
                if (k->n_execs == 0 && k->idle_since_ms + idle_ms < next)
                        next = k->idle_since_ms + idle_ms;
                timeout = next == UINT64_MAX ? -1
                          : next <= now      ? 0
                                             : (int)MIN(next - now, (uint64_t)60000);
                if (poll(pfd, n, timeout) < 0 && errno != EINTR)
                        break;
                now = time_monotonic_ms();

                for (size_t i = 0; i < k->n_execs; i++) {
                        Exec *e = &k->execs[i];

                        if (e->deadline_ms && now >= e->deadline_ms && !e->timed_out) {
                                e->timed_out = true;
                                exec_kill(k, e);
                        }
                        /* "kill"'s grace is over: everything it started. */
                        if (e->kill_deadline_ms && now >= e->kill_deadline_ms) {
                                e->kill_deadline_ms = 0;
                                e->killed = true;
                                exec_kill(k, e);
                        }
                        /* SECURITY: a kill can miss the exec's first process
                         * while it is not in the exec's cgroup yet (it joins
                         * it after its fork): again, until it ended, so a
                         * timeout or a kill right after the start holds. */
                        if ((e->timed_out || e->killed) && now >= e->rekill_ms) {
                                if (e->rekill_ms)
                                        exec_kill(k, e);
                                e->rekill_ms = now + KEEPER_REKILL_MS;
                        }
                }
                /* Output first, so that an exec's end finds its log whole. */
                for (size_t i = n_conns; i < n; i++) {
                        Exec *e;

                        if (!pfd[i].revents)
                                continue;
                        e = exec_find(k, pipe_ids[i - n_conns]);
                        for (size_t j = 0; e && j < 2; j++)
                                if (e->logs[j].in_fd == pfd[i].fd)
                                        (void)exec_log_pump(&e->logs[j]);
                }
                if (k->n_execs == 0 && now >= k->idle_since_ms + idle_ms)
                        k->stop = true;
                if (pfd[3].revents) {
                        struct signalfd_siginfo si;

                        while (read(k->st->sigfd, &si, sizeof(si)) == sizeof(si))
                                if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT ||
                                    si.ssi_signo == SIGHUP)
                                        k->stop = true;
                }
                if (pfd[1].revents)
                        handle_sync(k);
                if (pfd[2].revents) {
                        if (k->error.errnum == 0)
                                (void)hutch_error_set(&k->error, EPIPE, "the sandbox init died");
                        k->stop = true;
                }
                /* Connections, newest state first: walk a copy of the fds,
                 * since handling one may close others. */
                for (size_t i = n_fixed; i < n_conns; i++) {
                        KeeperConn *c;

                        if (!pfd[i].revents)
                                continue;
                        c = keeper_conn_find(&k->conns, pfd[i].fd);
                        if (!c)
                                continue;
                        if (conn_handle(k, c) < 0) {
                                Exec *e = c->kind == KEEPER_CONN_EXEC ? exec_find(k, c->exec_id)
                                                                      : NULL;

                                /* A client that went away ends its exec. */
                                if (e && !e->detached) {
                                        e->killed = true;
                                        exec_kill(k, e);
                                }
                                conn_close(k, c);
                        }
                }
                if (pfd[0].revents & POLLIN)
                        keeper_conn_accept(&k->conns, k->listen_fd);
        }
}

static int keep_ns(const KeeperConfig *cfg, char *const *caller_env, HutchError *reterr) {
        _cleanup_(run_state_done) RunState st;
        Keeper k = {.cfg = cfg,
                    .st = &st,
                    .listen_fd = -EBADF,
                    .next_id = keeper_history_last_id(cfg->history_path)};
        HutchError err = {};
        int r;

        run_state_init(&st);
        st.sup.userdata = &st; /* for sandbox_on_proxy_sockets() */
        r = sandbox_start(cfg->policy, &cfg->layers, NULL, caller_env, &st, &err);
        if (r >= 0)
                r = wait_ready(&k, &err);
        if (r >= 0) {
                r = keeper_listen_socket(cfg->socket_path, &err);
                k.listen_fd = r;
        }
        if (r < 0) {
                if (st.pid > 0)
                        sandbox_abort(&st, &err);
                keeper_report_ready(cfg->ready_fd, &err);
                if (reterr)
                        *reterr = err;
                return r;
        }
        keeper_scrub_secrets(cfg->policy, caller_env);
        pin_to_one_cpu(st.pid);
        keeper_report_ready(cfg->ready_fd, NULL);
        if (st.rc.cgroup)
                (void)cgroup_stats(st.rc.cgroup, &k.counters);
        stem_prepare(&k);

        keeper_loop(&k);

        /* Down: every exec, init (and with it the pid namespace), the
         * cgroups (run_state_done), the proxy. */
        while (k.n_execs > 0) {
                Exec *e = &k.execs[0];

                e->killed = true;
                exec_kill(&k, e);
                exec_finished(&k, e, SIGKILL);
        }
        if (st.pid > 0) {
                (void)pidfd_send_signal(st.pidfd, SIGKILL, NULL, 0);
                (void)waitpid(st.pid, NULL, 0);
                st.pid = 0;
        }
        /* The prepared process died with init; its cgroup goes. */
        if (k.stem_cgroup)
                (void)cgroup_destroy(TAKE_PTR(k.stem_cgroup));
        (void)unlink(cfg->socket_path);
        k.listen_fd = safe_close(k.listen_fd);
        /* The cgroups and the proxy go before "stop" is answered, so that
         * a stopped sandbox has nothing left when `hutch stop` returns. */
        run_state_done(&st);
        while (k.conns.n > 0) {
                KeeperConn *c = &k.conns.conns[0];

                if (c->kind == KEEPER_CONN_STOP)
                        (void)keeper_send_json(c->fd, json_pack("{s:s}", "op", "ok"), NULL, 0);
                conn_close(&k, c);
        }
        if (k.error.errnum != 0) {
                if (reterr)
                        *reterr = k.error;
                return -k.error.errnum;
        }
        return 0;
}

int sandbox_keep(const KeeperConfig *cfg, char *const *caller_env, HutchError *reterr) {
        if (cfg->policy->backend == SANDBOX_BACKEND_VM)
                return sandbox_keep_vm(cfg, caller_env, reterr);
        return keep_ns(cfg, caller_env, reterr);
}

/* ---- client side ---- */

int keeper_connect(const char *socket_path) {
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_un sa = {.sun_family = AF_UNIX};

        if (strlen(socket_path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, socket_path);
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return negative_errno();
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                return negative_errno();
        return TAKE_FD(fd);
}

static int answer_error(json_t *ans, HutchError *reterr) {
        const char *op = json_string_value(json_object_get(ans, "op"));
        const char *msg = json_string_value(json_object_get(ans, "message"));

        if (op && strcmp(op, "error") == 0)
                return hutch_error_set(reterr, EPERM, "the sandbox refused: %s",
                                       msg ? msg : "no reason given");
        return hutch_error_set(reterr, EPROTO, "unexpected answer from the sandbox's keeper");
}

int keeper_exec_signal(int sock, int sig) {
        if (sig <= 0 || sig >= NSIG)
                return -EINVAL;
        return keeper_send_json(sock, json_pack("{s:s,s:i}", "op", "signal", "signal", sig), NULL,
                                0);
}

/* Sends @req and reads an "ok" or an error. */
static int request_ok(int sock, json_t *req, HutchError *reterr) {
        json_t *ans = NULL;
        const char *aop;
        int r;

        if (!req)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        r = keeper_send_json(sock, req, NULL, 0);
        if (r < 0)
                return hutch_error_set(reterr, -r, "failed to talk to the sandbox's keeper: %s",
                                       strerror(-r));
        r = keeper_recv_json(sock, &ans, NULL, 0);
        if (r <= 0)
                return hutch_error_set(reterr, r == 0 ? EPIPE : -r,
                                       "the sandbox's keeper did not answer");
        aop = json_string_value(json_object_get(ans, "op"));
        r = aop && strcmp(aop, "ok") == 0 ? 0 : answer_error(ans, reterr);
        json_decref(ans);
        return r;
}

int keeper_simple(int sock, const char *op, HutchError *reterr) {
        return request_ok(sock, json_pack("{s:s}", "op", op), reterr);
}

int keeper_limits(int sock, const char *policy_json, HutchError *reterr) {
        return request_ok(sock, json_pack("{s:s,s:s}", "op", "limits", "policy", policy_json),
                          reterr);
}

int keeper_network(int sock, const char *policy_json, HutchError *reterr) {
        return request_ok(sock, json_pack("{s:s,s:s}", "op", "network", "policy", policy_json),
                          reterr);
}

static int request_send(int sock, json_t *obj, const int *fds, size_t n_fds, HutchError *reterr) {
        int r;

        r = keeper_send_json(sock, obj, fds, n_fds);
        /* -ECONNRESET: the command was not started (the client may start a
         * new keeper and try again). */
        if (r == -EPIPE || r == -ECONNRESET)
                return hutch_error_set(reterr, ECONNRESET,
                                       "the sandbox stopped before the command started");
        if (r < 0)
                return hutch_error_set(reterr, -r, "failed to send the command: %s", strerror(-r));
        return 0;
}

static json_t *exec_request_json(const KeeperExec *req) {
        json_t *o = json_pack("{s:s,s:o,s:o,s:o,s:I,s:b}", "op", "exec", "argv",
                              keeper_strv_to_json(req->argv), "env", keeper_strv_to_json(req->env),
                              "cwd", req->cwd ? json_string(req->cwd) : json_null(), "timeout_ms",
                              (json_int_t)req->timeout_ms, "detach", req->detach);

        /* Only when asked: a request without a terminal stays what it
         * was. */
        if (o && req->tty && json_object_set_new(o, "tty", json_true()) < 0) {
                json_decref(o);
                return NULL;
        }
        return o;
}

int keeper_exec_send(int sock, const KeeperExec *req, HutchError *reterr) {
        json_t *obj = exec_request_json(req);

        if (!obj)
                return hutch_error_set(reterr, EINVAL,
                                       "the command line is not valid UTF-8 (or out of memory)");
        return request_send(sock, obj, req->fds, 3, reterr);
}

int keeper_exec_answer(int sock, uint64_t *ret_id, int *ret_exit_code, char **ret_json,
                       HutchError *reterr) {
        json_t *ans = NULL;
        const char *op;
        int r;

        r = keeper_recv_json(sock, &ans, NULL, 0);
        if (r == -EAGAIN)
                return r;
        if (r <= 0)
                return hutch_error_set(reterr, r == 0 ? EPIPE : -r,
                                       "the sandbox stopped before the command ended");
        op = json_string_value(json_object_get(ans, "op"));
        /* A keeper that is stopping starts nothing. */
        if (op && strcmp(op, "stopping") == 0) {
                json_decref(ans);
                return hutch_error_set(reterr, ECONNRESET,
                                       "the sandbox stopped before the command started");
        }
        if (op && strcmp(op, "started") == 0) {
                *ret_id = (uint64_t)json_integer_value(json_object_get(ans, "id"));
                json_decref(ans);
                return KEEPER_ANSWER_STARTED;
        }
        if (op && strcmp(op, "outcome") == 0) {
                json_t *code = json_object_get(ans, "exit_code");
                char *text = NULL;

                if (!json_is_integer(code)) {
                        json_decref(ans);
                        return hutch_error_set(reterr, EPROTO, "malformed outcome");
                }
                if (ret_json) {
                        text = json_dumps(json_object_get(ans, "outcome"), JSON_COMPACT);
                        if (!text) {
                                json_decref(ans);
                                return hutch_error_set(reterr, ENOMEM, "out of memory");
                        }
                        *ret_json = text;
                }
                *ret_exit_code = (int)json_integer_value(code);
                json_decref(ans);
                return KEEPER_ANSWER_OUTCOME;
        }
        r = answer_error(ans, reterr);
        json_decref(ans);
        return r;
}

/* Sends @obj (consumed) with @fds, then waits for "started" and, unless
 * @detach, the outcome; passes @forward_sigfd's signals on meanwhile. */
static int request_wait(int sock, json_t *obj, const int *fds, size_t n_fds, bool detach,
                        int forward_sigfd, uint64_t *ret_id, int *ret_exit_code, char **ret_json,
                        HutchError *reterr) {
        bool started = false;
        int r;

        r = request_send(sock, obj, fds, n_fds, reterr);
        if (r < 0)
                return r;
        for (;;) {
                struct pollfd pfd[2] = {{.fd = sock, .events = POLLIN},
                                        {.fd = forward_sigfd, .events = POLLIN}};
                uint64_t id = 0;

                if (poll(pfd, forward_sigfd >= 0 ? 2 : 1, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return hutch_error_set(reterr, errno, "poll: %m");
                }
                if (forward_sigfd >= 0 && (pfd[1].revents & POLLIN)) {
                        struct signalfd_siginfo si;

                        while (read(forward_sigfd, &si, sizeof(si)) == sizeof(si))
                                (void)keeper_send_json(sock,
                                                       json_pack("{s:s,s:i}", "op", "signal",
                                                                 "signal", (int)si.ssi_signo),
                                                       NULL, 0);
                }
                if (!pfd[0].revents)
                        continue;
                r = keeper_exec_answer(sock, &id, ret_exit_code, ret_json, reterr);
                if (r == -EAGAIN)
                        continue;
                /* Gone before "started": the command did not run (the
                 * caller may start a new keeper and try again). */
                if ((r == -EPIPE || r == -ECONNRESET) && !started)
                        return hutch_error_set(reterr, ECONNRESET,
                                               "the sandbox stopped before the command started");
                if (r < 0 || r == KEEPER_ANSWER_OUTCOME)
                        return r < 0 ? r : 0;
                started = true;
                if (ret_id)
                        *ret_id = id;
                if (detach)
                        return 0;
        }
}

int keeper_exec(int sock, const KeeperExec *req, int forward_sigfd, uint64_t *ret_id,
                int *ret_exit_code, char **ret_json, HutchError *reterr) {
        json_t *obj = exec_request_json(req);

        if (!obj)
                return hutch_error_set(reterr, EINVAL,
                                       "the command line is not valid UTF-8 (or out of memory)");
        return request_wait(sock, obj, req->fds, 3, req->detach, forward_sigfd, ret_id,
                            ret_exit_code, ret_json, reterr);
}

int keeper_file(int sock, const KeeperFile *req, HutchError *reterr) {
        const char *action = file_op_action_to_string(req->action);
        _cleanup_free_ char *json = NULL;
        int exit_code = 0, r;
        json_t *obj, *o;
        const char *reason;

        if (!action || (req->mode & ~(0777U | FILE_OP_FLAGS)) != 0 || req->max > INT64_MAX)
                return hutch_error_set(reterr, EINVAL, "invalid file request");
        obj = json_pack("{s:s,s:s,s:s,s:I,s:I}", "op", "file", "action", action, "path", req->path,
                        "mode", (json_int_t)req->mode, "max", (json_int_t)req->max);
        if (!obj)
                return hutch_error_set(reterr, EINVAL,
                                       "the path is not valid UTF-8 (or out of memory)");
        r = request_wait(sock, obj, &req->data_fd, 1, false, -EBADF, NULL, &exit_code, &json,
                         reterr);
        if (r < 0)
                return r;
        /* The builtin's status is its errno (file-op.h); anything else
         * (a timeout, a kill, 125 when it could not start) is not. */
        o = json ? json_loads(json, 0, NULL) : NULL;
        reason = json_string_value(json_object_get(o, "reason"));
        if (reason && strcmp(reason, "timeout") == 0)
                r = -ETIMEDOUT;
        else if (!reason || strcmp(reason, "exited") != 0 || exit_code < 0 || exit_code >= 125)
                r = -EIO;
        else
                r = -exit_code;
        json_decref(o);
        return r;
}
