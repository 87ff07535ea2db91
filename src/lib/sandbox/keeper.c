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
#include "file-op.h"
#include "macro.h"
#include "parse-util.h"
#include "sandbox/backend.h"
#include "sandbox/deadline.h"
#include "sandbox/exec-table.h"
#include "sandbox/keeper-toolkit.h"
#include "sandbox/keeper.h"
#include "sandbox/sandbox-internal.h"
#include "sandbox/sync.h"
#include "strv.h"
#include "time-util.h"

/* How often a killed exec that has not ended is killed again. */
#define KEEPER_REKILL_MS 100U

typedef struct Exec {
        uint64_t id;
        int conn_fd;  /* the client waiting for the outcome, or -EBADF */
        int start_fd; /* the client waiting for "started" (exec_answer_started()), or -EBADF */
        Cgroup *cgroup;
        uint64_t start_ms, start_wall_ms;
        bool detached, builtin;
        CommandDeadline dl; /* its --timeout, a kill's grace (deadline.h) */
        CgroupStats before;
        char *argv_json;
        off_t audit_start; /* the audit log's size when the exec started */

        uint64_t pid;        /* its first process in the sandbox (SYNC_OP_STARTED), or 0 */
        int kill_signal;     /* the signal "kill" sent, or 0 */
        uint64_t rekill_ms;  /* killed: when to kill again (ns_deadlines()) */
        ExecLogPipe logs[2]; /* a detached exec's stdout, stderr (exec-table.h) */
        int stdin_w;         /* stdin_pipe: the write end of its stdin, or -EBADF */
} Exec;

/* Below this --pids limit the keeper prepares one exec process, not
 * SYNC_STEMS_MAX (stem_prepare()). */
#define KEEPER_STEMS_PIDS_MIN 64

typedef struct Keeper {
        KeeperCore core; /* first: the ops get the Keeper back by a cast */
        RunState st;
        Exec execs[KEEPER_MAX_EXECS];
        size_t n_execs;
        CgroupStats counters; /* the sandbox's, read at the last exec's end */
        /* The next execs' cgroups, their processes prepared
         * (stem_prepare()), oldest first. */
        Cgroup *stem_cgroup[SYNC_STEMS_MAX];
        uint64_t stem_id[SYNC_STEMS_MAX];
        size_t n_stems;
        uint64_t pipe_ids[2 * KEEPER_MAX_EXECS]; /* poll_fill(): whose log pipe each is */
        size_t n_pipes;
        /* The sandbox's mount namespace, held from its start until after
         * "stop" is answered (ns_start(), sandbox_keep_ns()), or -EBADF. */
        int mnt_ns_fd;
} Keeper;

static Keeper *keeper_of(KeeperCore *core) {
        return (Keeper *)core;
}

static Exec *exec_find(Keeper *k, uint64_t id) {
        for (size_t i = 0; i < k->n_execs; i++)
                if (k->execs[i].id == id)
                        return &k->execs[i];
        return NULL;
}

/* Ends everything an exec started (the backend's one kill,
 * supervise.h). */
static void exec_kill(Keeper *k, Exec *e) {
        ns_command_kill(&(NsCommand){.cgroup = e->cgroup,
                                     .init_pidfd = -EBADF,
                                     .sync_fd = k->st.sync_parent,
                                     .exec_id = e->id});
}

static void exec_free(Keeper *k, Exec *e) {
        (void)safe_close(e->stdin_w);
        exec_log_pipe_done(&e->logs[0]);
        exec_log_pipe_done(&e->logs[1]);
        if (e->cgroup)
                (void)cgroup_destroy(e->cgroup);
        free(e->argv_json);
        *e = k->execs[--k->n_execs];
        if (k->n_execs == 0)
                keeper_core_idle(&k->core);
}

static void stem_prepare(Keeper *k, size_t want);
static int stem_prepare_one(Keeper *k);

/* "started" goes to the client that asked for @e once init said it
 * started it, with its pid known (SYNC_OP_STARTED), or that it could not
 * (SYNC_OP_EXITED, before the outcome): so that `ps` never shows a pid 0
 * (issue 18). A detached exec's connection is done then. */
static void exec_answer_started(Keeper *k, Exec *e) {
        KeeperConn *c;

        if (e->start_fd < 0)
                return;
        (void)keeper_send_json(e->start_fd,
                               json_pack("{s:s,s:I}", "op", "started", "id", (json_int_t)e->id),
                               NULL, 0);
        c = e->detached ? keeper_conn_find(&k->core.conns, e->start_fd) : NULL;
        e->start_fd = -EBADF;
        if (c)
                keeper_conn_remove(&k->core.conns, c);
}

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
        if (k->st.rc.cgroup && !(WIFEXITED(status) && WEXITSTATUS(status) == 0) &&
            cgroup_stats(k->st.rc.cgroup, &after) >= 0)
                k->counters = after;
        o.wall_ms = time_monotonic_ms() - e->start_ms;
        o.cpu_ms = mine.have_cpu ? mine.cpu_usec / 1000 : 0;
        o.mem_peak_bytes = after.have_mem_peak ? after.mem_peak_bytes : 0;
        o.degraded = k->st.rc.degraded | k->core.cfg->degraded;
        o.fallbacks = k->st.sup.fallbacks;
        if (WIFEXITED(status)) {
                o.reason = OUTCOME_EXITED;
                o.exit_code = WEXITSTATUS(status);
        } else {
                o.reason = OUTCOME_SIGNALED;
                o.signal = WTERMSIG(status);
                o.exit_code = 128 + o.signal;
        }
        o.denied = keeper_denials(k->core.cfg->policy, e->audit_start);
        /* Its log is whole before anyone hears it ended. */
        exec_log_pipe_done(&e->logs[0]);
        exec_log_pipe_done(&e->logs[1]);
        o.stdout_truncated = e->logs[0].truncated;
        o.stderr_truncated = e->logs[1].truncated;
        if (e->dl.timed_out)
                o.reason = OUTCOME_TIMEOUT;
        else if (e->dl.killed)
                o.reason = OUTCOME_KILLED;
        else if (o.reason == OUTCOME_SIGNALED && o.signal == e->kill_signal)
                o.reason = OUTCOME_KILLED; /* as a signal passed on (docs/cli-run.md) */
        else if (after.oom_kills > e->before.oom_kills && o.reason == OUTCOME_SIGNALED)
                o.reason = OUTCOME_OOM;
        else if (after.pids_max_events > e->before.pids_max_events && o.exit_code != 0)
                o.reason = OUTCOME_PIDS;

        if (outcome_to_json(&o, &json) < 0)
                json = NULL;
        /* The history first, so that whoever has the outcome finds its
         * line (a client that reads the history right after its exec);
         * then the client; the exec's cgroup after. */
        if (!e->builtin)
                keeper_history_append(k->core.cfg->history_path,
                                      &(KeeperHistoryEntry){.id = e->id,
                                                            .argv_json = e->argv_json,
                                                            .detached = e->detached,
                                                            .start_wall_ms = e->start_wall_ms},
                                      json ? json : "null");
        exec_answer_started(k, e);
        if (e->conn_fd >= 0) {
                KeeperConn *c = keeper_conn_find(&k->core.conns, e->conn_fd);

                (void)keeper_send_outcome(e->conn_fd, o.exit_code, json);
                /* Done with it: nothing to abandon. */
                e->conn_fd = -EBADF;
                if (c)
                        keeper_conn_remove(&k->core.conns, c);
        }
        exec_table_finished(&k->core.conns, e->id, o.exit_code, json);
        /* The next exec's process, while the client reads its answer (not
         * while this exec ran: moving a process into a cgroup holds up the
         * command's forks and exit). First: a client that calls again at
         * once must find one ready; removing this exec's cgroup can wait
         * (while init forks the new process). */
        stem_prepare(k, SYNC_STEMS_MAX);
        exec_free(k, e);
}

/* "cwd\0user\0argv...\0\0env...\0" for init (user "": the sandbox's
 * default). */
static int build_payload(const char *cwd, const char *user, char *const *argv, char *const *env,
                         char **ret, size_t *ret_len) {
        size_t len = strlen(cwd) + strlen(user ?: "") + 3;
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
        p = stpcpy(p, user ?: "") + 1;
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
        const char *user; /* --user, or NULL: the sandbox's default */
        uint64_t timeout_ms;
        bool detach;
        bool builtin;    /* a file operation: not in the history */
        bool tty;        /* fds[0] is a pty channel (sandbox/pty.h) */
        bool stdin_pipe; /* detached: stdin a pipe kept open (Exec.stdin_w) */
        const int *fds;  /* stdin, stdout, stderr (borrowed; unused when detached) */
} ExecSpec;

/* Starts @x: its cgroup, then SYNC_OP_EXEC to init. Answers "started" on
 * @c, which then waits for the outcome (unless detached). Returns < 0 to
 * close @c. */
/* Prepares an exec's cgroup and has init fork the process that will run
 * it into it now (SYNC_OP_STEM), until @want are: moving a process
 * into a cgroup can wait for an RCU grace period (~15 ms when no move
 * happened lately), which this keeps off the request's path. There are two
 * (issue 20): a client that calls again as soon as an exec ended (E2B's
 * commands.run in a loop) takes the one prepared at the end of the exec
 * before, whose move is over, not the one whose move has just begun. An
 * exec takes the oldest. Without cgroups there is nothing to prepare. Best
 * effort: on failure an exec takes the usual path. */
static void stem_prepare(Keeper *k, size_t want) {
        uint64_t pids = k->st.rc.limits.pids_max;

        /* The prepared processes count towards --pids: under a small limit
         * a second one would leave the next exec's command a process fewer
         * than the first exec's had (and at 2, init's fork of it fails
         * where the keeper counts it prepared: the exec that takes it ends
         * with "the prepared process is gone"). One there, as before. */
        if (pids > 0 && pids < KEEPER_STEMS_PIDS_MIN)
                want = MIN(want, (size_t)1);
        while (k->n_stems < MIN(want, (size_t)SYNC_STEMS_MAX) && stem_prepare_one(k) >= 0)
                ;
}

static int stem_prepare_one(Keeper *k) {
        _cleanup_free_ char *name = NULL;
        int cg_fds[SYNC_EXEC_FDS_MAX - 3];
        size_t n_cg = 0;
        HutchError ignored = {};
        Cgroup *cg = NULL;
        uint64_t id;
        int r;

        if (!k->st.rc.cgroup || k->core.stop)
                return -ECANCELED;
        id = ++k->core.next_id;
        if (asprintf(&name, "x-%llu", (unsigned long long)id) < 0) {
                name = NULL;
                return -ENOMEM;
        }
        r = cgroup_new_child(k->st.rc.cgroup, name, &cg, &ignored);
        if (r >= 0)
                r = cgroup_open_procs(cg, cg_fds, ELEMENTSOF(cg_fds), &n_cg);
        if (r >= 0)
                r = sync_send_values(k->st.sync_parent, SYNC_OP_STEM, (uint64_t[3]){id, 0, 0},
                                     cg_fds, n_cg);
        for (size_t i = 0; i < n_cg; i++)
                cg_fds[i] = safe_close(cg_fds[i]);
        if (r < 0) {
                if (cg)
                        (void)cgroup_destroy(cg);
                return r;
        }
        k->stem_cgroup[k->n_stems] = cg;
        k->stem_id[k->n_stems++] = id;
        return 0;
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
        r = keeper_exec_admit(c->fd, k->core.stop, k->n_execs);
        if (r < 0)
                return r;
        r = keeper_exec_env(k->st.env, x->extra, &env);
        if (r < 0) {
                keeper_send_error(c->fd, "invalid environment entry (want KEY=VALUE)");
                return r;
        }
        r = build_payload(x->cwd, x->user, x->argv, env, &payload, &payload_len);
        if (r < 0) {
                keeper_send_error(c->fd, "the command line and environment are too long");
                return r;
        }

        e = &k->execs[k->n_execs];
        *e = (Exec){
                .id = k->n_stems > 0 ? k->stem_id[0] : ++k->core.next_id,
                .conn_fd = x->detach ? -EBADF : c->fd,
                .start_fd = -EBADF,
                .stdin_w = -EBADF,
                .detached = x->detach,
                .builtin = x->builtin,
                .start_ms = time_monotonic_ms(),
                .start_wall_ms = time_realtime_ms(),
                .audit_start = keeper_audit_size(k->core.cfg->policy),
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
        if (k->n_stems > 0) {
                /* The prepared process is in this cgroup already. */
                e->cgroup = k->stem_cgroup[0];
                k->n_stems--;
                memmove(k->stem_cgroup, k->stem_cgroup + 1, sizeof(Cgroup *) * k->n_stems);
                memmove(k->stem_id, k->stem_id + 1, sizeof(uint64_t) * k->n_stems);
                use_stem = true;
        } else if (k->st.rc.cgroup) {
                HutchError ignored = {};

                if (asprintf(&name, "x-%llu", (unsigned long long)e->id) < 0) {
                        name = NULL;
                        r = -ENOMEM;
                } else
                        r = cgroup_new_child(k->st.rc.cgroup, name, &e->cgroup, &ignored);
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
                r = exec_log_create(k->core.cfg->logs_dir, e->id, e->logs, w);
                out_w = w[0];
                err_w = w[1];
                if (x->stdin_pipe) {
                        int p[2];

                        /* Its stdin: a pipe whose write end the keeper
                         * keeps, for the "stdin" request (exec-table.h). */
                        if (r >= 0 && pipe2(p, O_CLOEXEC) >= 0) {
                                null_fd = p[0];
                                e->stdin_w = p[1];
                        }
                } else
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
                k->st.sync_parent, SYNC_OP_EXEC,
                (uint64_t[3]){e->id, payload_len,
                              (use_stem ? SYNC_EXEC_STEM : 0) | (x->tty ? SYNC_EXEC_TTY : 0)},
                send_fds, 3 + n_cg);
        if (r >= 0 && send(k->st.sync_parent, payload, payload_len, MSG_NOSIGNAL) < 0)
                r = negative_errno();
        for (size_t i = 0; i < n_cg; i++)
                cg_fds[i] = safe_close(cg_fds[i]);
        n_cg = 0;
        if (r < 0) {
                keeper_send_error(c->fd, "the sandbox is gone");
                goto fail;
        }
        command_deadline_start(&e->dl, e->start_ms, x->timeout_ms);
        /* "started" is answered when init says it started it, its pid
         * known (exec_answer_started()). A detached exec's connection is
         * tied to it until then; closing it does not end the exec
         * (ns_abandon()). */
        e->start_fd = c->fd;
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
static int exec_start(KeeperCore *core, KeeperConn *c, json_t *req, int fds[3], size_t n_fds) {
        Keeper *k = keeper_of(core);
        _cleanup_(keeper_exec_request_done) KeeperExecRequest q = {};
        const char *msg = NULL;
        int r;

        r = keeper_exec_request_parse(req, k->core.cfg->policy, k->st.image, n_fds, &q, &msg);
        if (r < 0) {
                keeper_send_error(c->fd, msg);
                return r;
        }
        return exec_launch(k, c,
                           &(ExecSpec){
                                   .argv = q.argv,
                                   .extra = q.extra,
                                   .cwd = q.cwd,
                                   .user = q.user,
                                   .timeout_ms = q.timeout_ms,
                                   .detach = q.detach,
                                   .tty = q.tty,
                                   .stdin_pipe = q.stdin_pipe,
                                   .fds = fds,
                           });
}

/* {"op":"file","action":A,"path":P,"mode":N,"max":N} with one fd: the
 * builtin of src/shared/file-op.h, run as an exec whose stdin and stdout are
 * that fd. A relative path is taken from the workspace, or $HOME. */
static int file_start(KeeperCore *core, KeeperConn *c, json_t *req, int fds[3], size_t n_fds) {
        Keeper *k = keeper_of(core);
        _cleanup_close_ int null_fd = -EBADF;
        KeeperFileRequest f;

        if (keeper_file_request_parse(req, k->core.cfg->policy, n_fds, &f) < 0) {
                keeper_send_error(c->fd, "malformed file request");
                return -EINVAL;
        }
        null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null_fd < 0) {
                keeper_send_error(c->fd, "failed to open /dev/null");
                return negative_errno();
        }
        return exec_launch(
                k, c,
                &(ExecSpec){
                        .argv = (char *[]){(char *)FILE_OP_ARGV0, (char *)f.action, (char *)f.path,
                                           f.mode, f.max, (char *)f.user, NULL},
                        .cwd = f.cwd,
                        .timeout_ms = k->core.cfg->policy->timeout_ms,
                        .builtin = true,
                        .fds = (int[3]){fds[0], fds[0], null_fd},
                });
}

/* {"op":"limits","policy":TEXT}: the new policy's memory, swap, cpus and
 * pids on the running sandbox's cgroup (hutch update). The rest of the
 * policy is not read here: the caller refuses other changes while it
 * runs. */
static int limits_update(KeeperCore *core, KeeperConn *c, json_t *req) {
        Keeper *k = keeper_of(core);
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
                r = run_cgroup_update(&k->st.rc, p, &e);
        if (r < 0) {
                keeper_send_error(c->fd, e.msg);
                return 0;
        }
        /* Lowered under KEEPER_STEMS_PIDS_MIN: the prepared processes
         * beyond one go (their cgroups' removal kills them; init forks
         * an exec that names one afresh), or the next exec would have a
         * process fewer (stem_prepare()). */
        if (k->st.rc.limits.pids_max > 0 && k->st.rc.limits.pids_max < KEEPER_STEMS_PIDS_MIN)
                while (k->n_stems > 1)
                        (void)cgroup_destroy(k->stem_cgroup[--k->n_stems]);
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
                e->dl.killed = true;
                exec_kill(k, e);
                return;
        }
        (void)sync_send_values(k->st.sync_parent, SYNC_OP_SIGNAL,
                               (uint64_t[3]){id, (uint64_t)sig, 0}, NULL, 0);
        e->kill_signal = sig;
        command_deadline_grace(&e->dl, time_monotonic_ms(), grace_ms);
}

static void handle_sync(Keeper *k) {
        int fds[SANDBOX_PROXY_SOCKETS_MAX];
        SyncMsg m;
        Exec *e;
        int r;

        r = sync_recv(k->st.sync_parent, &m, fds, ELEMENTSOF(fds));
        if (r <= 0) {
                if (r != -EAGAIN) {
                        if (k->core.error.errnum == 0)
                                (void)hutch_error_set(&k->core.error, EPIPE,
                                                      "the sandbox init is gone");
                        k->core.stop = true;
                }
                return;
        }
        switch ((SyncOp)m.op) {
        case SYNC_OP_SOCKETS:
                r = sandbox_on_proxy_sockets(&k->st.sup, fds, m.n_fds, &k->core.error);
                if (r < 0)
                        k->core.stop = true; /* fail closed: no wall, no sandbox */
                return;
        case SYNC_OP_ERROR:
                if (k->core.error.errnum == 0)
                        (void)hutch_error_set(&k->core.error,
                                              m.err > 0 && m.err < 4096 ? m.err : EIO,
                                              "sandbox setup failed: %s: %s", m.step, m.msg);
                k->core.stop = true;
                break;
        case SYNC_OP_STARTED:
                /* values[1]: its pid in the sandbox, for "list" only. */
                e = exec_find(k, m.values[0]);
                if (e && m.values[1] <= INT32_MAX)
                        e->pid = m.values[1];
                if (e)
                        exec_answer_started(k, e);
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
                struct pollfd pfd[2] = {{.fd = k->st.sync_parent, .events = POLLIN},
                                        {.fd = k->st.pidfd, .events = POLLIN}};
                int fds[SANDBOX_PROXY_SOCKETS_MAX];
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
                r = sync_recv(k->st.sync_parent, &m, fds, ELEMENTSOF(fds));
                if (r <= 0)
                        return hutch_error_set(reterr, EPIPE,
                                               "the sandbox init ended during setup");
                if (m.op == SYNC_OP_READY) {
                        k->st.sup.fallbacks =
                                (unsigned)(m.values[1] & ((1U << _OUTCOME_FALLBACK_MAX) - 1));
                        return 0;
                }
                if (m.op == SYNC_OP_SOCKETS) {
                        r = sandbox_on_proxy_sockets(&k->st.sup, fds, m.n_fds, reterr);
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

/* ---- the backend's ops (backend.h) ---- */

static int ns_start(KeeperCore *core, char *const *caller_env, HutchError *reterr) {
        Keeper *k = keeper_of(core);
        int r;

        k->st.sup.userdata = &k->st; /* for sandbox_on_proxy_sockets() */
        r = sandbox_start(core->cfg->policy, &core->cfg->layers, NULL, caller_env, &k->st, reterr);
        if (r >= 0)
                r = wait_ready(k, reterr);
        if (r < 0)
                return r;
        core->sigfd = k->st.sigfd;
        /* Issue 20: init's exit tears down the mount namespace it is the
         * last user of (its overlays, /proc, tmpfs: umounts that wait for
         * an RCU grace period, ~8 ms a stop), and only then are the other
         * processes of its pid namespace killed and is init reaped.
         * Holding the namespace here makes init's exit, and so the end of
         * every process of the sandbox, quick; the mounts go when the
         * keeper lets go of it, after "stop" is answered: nothing runs in
         * them then, and `hutch stop` waits for the keeper's exit all the
         * same. Best effort: without it the teardown is init's, as
         * before. Init is alive (unreaped: ours), so the pid is its. */
        {
                char path[64];

                (void)snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)k->st.pid);
                k->mnt_ns_fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        }
        pin_to_one_cpu(k->st.pid);
        return 0;
}

static void ns_abort(KeeperCore *core, HutchError *err) {
        Keeper *k = keeper_of(core);

        if (k->st.pid > 0)
                sandbox_abort(&k->st, err);
}

static void ns_ready(KeeperCore *core) {
        Keeper *k = keeper_of(core);

        if (k->st.rc.cgroup)
                (void)cgroup_stats(k->st.rc.cgroup, &k->counters);
        /* One: the first exec, which may follow at once, need not wait
         * for a second; the first exec's end prepares the other. */
        stem_prepare(k, 1);
}

/* Down: every exec, init (and with it the pid namespace). */
static void ns_halt(KeeperCore *core) {
        Keeper *k = keeper_of(core);

        while (k->n_execs > 0) {
                Exec *e = &k->execs[0];

                e->dl.killed = true;
                exec_kill(k, e);
                exec_finished(k, e, SIGKILL);
        }
        if (k->st.pid > 0) {
                (void)pidfd_send_signal(k->st.pidfd, SIGKILL, NULL, 0);
                (void)waitpid(k->st.pid, NULL, 0);
                k->st.pid = 0;
        }
        /* The prepared processes died with init; their cgroups go. */
        while (k->n_stems > 0)
                (void)cgroup_destroy(k->stem_cgroup[--k->n_stems]);
}

/* The cgroups and the proxy. */
static void ns_release(KeeperCore *core) {
        run_state_done(&keeper_of(core)->st);
}

/* The fixed descriptors first: init's sync socket and pidfd; then the
 * detached execs' output on its way to their logs. */
static size_t ns_poll_fill(KeeperCore *core, struct pollfd *pfd) {
        Keeper *k = keeper_of(core);
        size_t n = 0;

        pfd[n++] = (struct pollfd){.fd = k->st.sync_parent, .events = POLLIN};
        pfd[n++] = (struct pollfd){.fd = k->st.pidfd, .events = POLLIN};
        k->n_pipes = 0;
        for (size_t i = 0; i < k->n_execs; i++)
                for (size_t j = 0; j < 2; j++)
                        if (k->execs[i].logs[j].in_fd >= 0) {
                                k->pipe_ids[k->n_pipes++] = k->execs[i].id;
                                pfd[n++] = (struct pollfd){.fd = k->execs[i].logs[j].in_fd,
                                                           .events = POLLIN};
                        }
        return n;
}

static void ns_poll_handle(KeeperCore *core, const struct pollfd *pfd) {
        Keeper *k = keeper_of(core);

        /* Output first, so that an exec's end finds its log whole. */
        for (size_t i = 0; i < k->n_pipes; i++) {
                Exec *e;

                if (!pfd[2 + i].revents)
                        continue;
                e = exec_find(k, k->pipe_ids[i]);
                for (size_t j = 0; e && j < 2; j++)
                        if (e->logs[j].in_fd == pfd[2 + i].fd)
                                (void)exec_log_pump(&e->logs[j]);
        }
        if (pfd[0].revents)
                handle_sync(k);
        if (pfd[1].revents) {
                if (core->error.errnum == 0)
                        (void)hutch_error_set(&core->error, EPIPE, "the sandbox init died");
                core->stop = true;
        }
}

static uint64_t ns_next_deadline(KeeperCore *core) {
        Keeper *k = keeper_of(core);
        uint64_t next = UINT64_MAX;

        for (size_t i = 0; i < k->n_execs; i++) {
                const Exec *e = &k->execs[i];

                next = MIN(next, command_deadline_next(&e->dl, false));
                if (e->dl.timed_out || e->dl.killed)
                        next = MIN(next, e->rekill_ms);
        }
        return next;
}

static void ns_deadlines_shift(KeeperCore *core, uint64_t by) {
        Keeper *k = keeper_of(core);

        for (size_t i = 0; i < k->n_execs; i++)
                command_deadline_shift(&k->execs[i].dl, by);
}

static void ns_deadlines(KeeperCore *core, uint64_t now) {
        Keeper *k = keeper_of(core);

        for (size_t i = 0; i < k->n_execs; i++) {
                Exec *e = &k->execs[i];

                /* Its --timeout, or "kill"'s grace, is over: everything
                 * it started. */
                while (command_deadline_check(&e->dl, now, false) != COMMAND_DUE_NONE)
                        exec_kill(k, e);
                /* SECURITY: a kill can miss the exec's first process while
                 * it is not in the exec's cgroup yet (it joins it after its
                 * fork): again, until it ended, so a timeout or a kill
                 * right after the start holds. */
                if ((e->dl.timed_out || e->dl.killed) && now >= e->rekill_ms) {
                        if (e->rekill_ms)
                                exec_kill(k, e);
                        e->rekill_ms = now + KEEPER_REKILL_MS;
                }
        }
}

static size_t ns_running(KeeperCore *core) {
        return keeper_of(core)->n_execs;
}

static void ns_signal(KeeperCore *core, uint64_t id, int sig) {
        (void)sync_send_values(keeper_of(core)->st.sync_parent, SYNC_OP_SIGNAL,
                               (uint64_t[3]){id, (uint64_t)sig, 0}, NULL, 0);
}

/* A client that went away ends its exec. */
static void ns_abandon(KeeperCore *core, uint64_t id) {
        Keeper *k = keeper_of(core);
        Exec *e = exec_find(k, id);

        if (!e)
                return;
        e->conn_fd = -EBADF;
        e->start_fd = -EBADF;
        if (!e->detached) {
                e->dl.killed = true;
                exec_kill(k, e);
        }
}

static PortForwards *ns_ports(KeeperCore *core) {
        return &keeper_of(core)->st.ports;
}

static ProxyProcess *ns_proxy(KeeperCore *core) {
        return &keeper_of(core)->st.proxy;
}

static Cgroup *ns_freeze_cgroup(KeeperCore *core) {
        return keeper_of(core)->st.rc.cgroup;
}

/* The "stdin" request: a copy of exec @id's stdin pipe, or (@close) the
 * keeper's end closed so that the command reads its end once every copy
 * is closed. */
static int table_stdin(void *userdata, uint64_t id, bool close_it, int *ret_fd) {
        Keeper *k = userdata;
        Exec *e = exec_find(k, id);

        return exec_table_stdin_pipe(e ? &e->stdin_w : NULL, close_it, ret_fd);
}

static const SandboxBackendOps ns_ops = {
        .start = ns_start,
        .abort = ns_abort,
        .ready = ns_ready,
        .halt = ns_halt,
        .release = ns_release,
        .poll_fill = ns_poll_fill,
        .poll_handle = ns_poll_handle,
        .next_deadline = ns_next_deadline,
        .deadlines = ns_deadlines,
        .deadlines_shift = ns_deadlines_shift,
        .running = ns_running,
        .exec = exec_start,
        .file = file_start,
        .signal = ns_signal,
        .abandon = ns_abandon,
        .limits = limits_update,
        .ports = ns_ports,
        .proxy = ns_proxy,
        .freeze_cgroup = ns_freeze_cgroup,
        .table = {.row = table_row, .kill = table_kill, .stdin = table_stdin},
};

int sandbox_keep_ns(const KeeperConfig *cfg, char *const *caller_env, HutchError *reterr) {
        _cleanup_free_ Keeper *k = calloc(1, sizeof(Keeper));
        int r;

        if (!k) {
                HutchError err = {};

                r = hutch_error_set(&err, ENOMEM, "out of memory");
                keeper_report_ready(cfg->ready_fd, &err);
                if (reterr)
                        *reterr = err;
                return r;
        }
        k->core = (KeeperCore){
                .cfg = cfg, .ops = &ns_ops, .next_id = keeper_history_last_id(cfg->history_path)};
        run_state_init(&k->st);
        k->mnt_ns_fd = -EBADF;
        r = keeper_core_run(&k->core, caller_env, reterr);
        run_state_done(&k->st);
        /* "stop" is answered: the sandbox's mounts go now (ns_start()). */
        k->mnt_ns_fd = safe_close(k->mnt_ns_fd);
        return r;
}
