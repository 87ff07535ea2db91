/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
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
#include "sandbox/file-op.h"
#include "sandbox/keeper.h"
#include "sandbox/sandbox-internal.h"
#include "sandbox/sync.h"
#include "strv.h"

#define KEEPER_MAX_CONNS 64
#define KEEPER_MAX_EXECS 128
/* What an exec's outcome reads of the audit log for its denials. */
#define KEEPER_AUDIT_READ_MAX (1U << 20)

typedef enum ConnKind {
        CONN_NEW,    /* waiting for its request */
        CONN_EXEC,   /* tied to a running exec */
        CONN_FREEZE, /* holds the sandbox frozen */
        CONN_STOP,   /* asked for a stop; answered when everything is down */
} ConnKind;

typedef struct Conn {
        int fd;
        ConnKind kind;
        uint64_t exec_id;
} Conn;

typedef struct Exec {
        uint64_t id;
        int conn_fd; /* the client waiting for the outcome, or -EBADF */
        Cgroup *cgroup;
        uint64_t start_ms, deadline_ms, start_wall_ms;
        bool detached, builtin, timed_out, killed;
        CgroupStats before;
        char *argv_json;
        off_t audit_start; /* the audit log's size when the exec started */
} Exec;

typedef struct Keeper {
        const KeeperConfig *cfg;
        RunState *st;
        int listen_fd;
        Conn conns[KEEPER_MAX_CONNS];
        size_t n_conns;
        Exec execs[KEEPER_MAX_EXECS];
        size_t n_execs;
        uint64_t next_id, idle_since_ms;
        CgroupStats counters; /* the sandbox's, read at the last exec's end */
        Cgroup *stem_cgroup;  /* the next exec's, its process prepared (stem_prepare()) */
        uint64_t stem_id;
        bool stop, frozen;
        HutchError error;
} Keeper;

static uint64_t wall_ms(void) {
        struct timespec ts;

        (void)clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000U + (uint64_t)ts.tv_nsec / 1000000U;
}

static int send_json(int fd, json_t *obj, const int *fds, size_t n_fds) {
        _cleanup_free_ char *text = json_dumps(obj, JSON_COMPACT);

        json_decref(obj);
        if (!text)
                return -ENOMEM;
        if (strlen(text) > KEEPER_MSG_MAX)
                return -EMSGSIZE;
        return send_with_fds(fd, text, strlen(text), fds, n_fds);
}

static void send_error(int fd, const char *msg) {
        (void)send_json(fd, json_pack("{s:s,s:s}", "op", "error", "message", msg), NULL, 0);
}

/* Receives one JSON object (and up to @max_fds fds). Returns 1, 0 on EOF,
 * or -errno (-EBADMSG for anything but a JSON object). */
static int recv_json(int fd, json_t **ret, int *fds, size_t max_fds) {
        _cleanup_free_ char *buf = malloc(KEEPER_MSG_MAX + 1);
        json_t *obj;
        ssize_t n;

        if (!buf)
                return -ENOMEM;
        n = recv_with_fds(fd, buf, KEEPER_MSG_MAX, fds, max_fds);
        if (n <= 0)
                return (int)n;
        obj = json_loadb(buf, (size_t)n, JSON_REJECT_DUPLICATES, NULL);
        if (!json_is_object(obj)) {
                json_decref(obj);
                return -EBADMSG;
        }
        *ret = obj;
        return 1;
}

/* ---- keeper side ---- */

static Exec *exec_find(Keeper *k, uint64_t id) {
        for (size_t i = 0; i < k->n_execs; i++)
                if (k->execs[i].id == id)
                        return &k->execs[i];
        return NULL;
}

static Conn *conn_find(Keeper *k, int fd) {
        for (size_t i = 0; fd >= 0 && i < k->n_conns; i++)
                if (k->conns[i].fd == fd)
                        return &k->conns[i];
        return NULL;
}

static void conn_close(Keeper *k, Conn *c) {
        if (c->kind == CONN_FREEZE && k->frozen && k->st->rc.cgroup) {
                (void)cgroup_set_frozen(k->st->rc.cgroup, false);
                k->frozen = false;
        }
        if (c->kind == CONN_EXEC) {
                Exec *e = exec_find(k, c->exec_id);

                if (e)
                        e->conn_fd = -EBADF;
        }
        (void)close(c->fd);
        *c = k->conns[--k->n_conns];
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
        if (e->cgroup)
                (void)cgroup_destroy(e->cgroup);
        free(e->argv_json);
        *e = k->execs[--k->n_execs];
        if (k->n_execs == 0)
                k->idle_since_ms = now_ms();
}

static void history_append(Keeper *k, const Exec *e, const char *outcome_json) {
        _cleanup_free_ char *line = NULL;
        _cleanup_close_ int fd = -EBADF;
        int n;

        if (!k->cfg->history_path || e->builtin)
                return;
        n = asprintf(&line,
                     "{\"id\":%llu,\"argv\":%s,\"detached\":%s,\"start_ms\":%llu,"
                     "\"end_ms\":%llu,\"outcome\":%s}\n",
                     (unsigned long long)e->id, e->argv_json ? e->argv_json : "[]",
                     e->detached ? "true" : "false", (unsigned long long)e->start_wall_ms,
                     (unsigned long long)wall_ms(), outcome_json);
        if (n < 0) {
                line = NULL;
                return;
        }
        fd = open(k->cfg->history_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW,
                  0600);
        if (fd >= 0)
                (void)loop_write(fd, line, (size_t)n);
}

static off_t audit_size(const Keeper *k) {
        struct stat st;

        if (!k->cfg->policy->audit_log || stat(k->cfg->policy->audit_log, &st) < 0)
                return 0;
        return st.st_size;
}

/* The proxy's denials logged while the exec ran, as the proxy's summary
 * lists them ([{host, port, reason, count}]): the keeper's proxy outlives
 * each exec, so they come from the audit log (bounded read). Execs that ran
 * at the same time share what was logged meanwhile. */
static char *exec_denials(const Keeper *k, const Exec *e) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        json_t *denied = json_array();
        char *out;
        ssize_t n;

        if (!denied)
                return NULL;
        if (k->cfg->policy->audit_log)
                fd = open(k->cfg->policy->audit_log, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        buf = fd >= 0 ? malloc(KEEPER_AUDIT_READ_MAX + 1) : NULL;
        n = buf ? pread(fd, buf, KEEPER_AUDIT_READ_MAX, e->audit_start) : 0;
        for (char *line = buf, *next; n > 0 && line && line < buf + n; line = next) {
                json_t *j, *d;
                size_t i;
                bool merged = false;

                buf[n] = '\0';
                next = strchr(line, '\n');
                if (!next)
                        break; /* a line being written */
                *next++ = '\0';
                j = json_loads(line, 0, NULL);
                if (!json_is_object(j) || !json_is_string(json_object_get(j, "decision")) ||
                    strcmp(json_string_value(json_object_get(j, "decision")), "deny") != 0) {
                        json_decref(j);
                        continue;
                }
                json_array_foreach(
                        denied, i,
                        d) if (json_equal(json_object_get(d, "host"), json_object_get(j, "host")) &&
                               json_equal(json_object_get(d, "port"), json_object_get(j, "port")) &&
                               json_equal(json_object_get(d, "reason"),
                                          json_object_get(j, "reason"))) {
                        (void)json_object_set_new(
                                d, "count",
                                json_integer(json_integer_value(json_object_get(d, "count")) + 1));
                        merged = true;
                        break;
                }
                if (!merged)
                        (void)json_array_append_new(
                                denied,
                                json_pack("{s:O,s:O,s:O,s:i}", "host", json_object_get(j, "host"),
                                          "port", json_object_get(j, "port"), "reason",
                                          json_object_get(j, "reason"), "count", 1));
                json_decref(j);
        }
        out = json_dumps(denied, JSON_COMPACT);
        json_decref(denied);
        return out;
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
        o.wall_ms = now_ms() - e->start_ms;
        o.cpu_ms = mine.have_cpu ? mine.cpu_usec / 1000 : 0;
        o.mem_peak_bytes = after.have_mem_peak ? after.mem_peak_bytes : 0;
        o.degraded = k->st->rc.degraded;
        if (WIFEXITED(status)) {
                o.reason = OUTCOME_EXITED;
                o.exit_code = WEXITSTATUS(status);
        } else {
                o.reason = OUTCOME_SIGNALED;
                o.signal = WTERMSIG(status);
                o.exit_code = 128 + o.signal;
        }
        o.denied = exec_denials(k, e);
        if (e->timed_out)
                o.reason = OUTCOME_TIMEOUT;
        else if (e->killed)
                o.reason = OUTCOME_KILLED;
        else if (after.oom_kills > e->before.oom_kills && o.reason == OUTCOME_SIGNALED)
                o.reason = OUTCOME_OOM;
        else if (after.pids_max_events > e->before.pids_max_events && o.exit_code != 0)
                o.reason = OUTCOME_PIDS;

        if (outcome_to_json(&o, &json) < 0)
                json = NULL;
        /* The client first; the history and the exec's cgroup after. */
        if (e->conn_fd >= 0) {
                _cleanup_free_ char *msg = NULL;
                Conn *c = conn_find(k, e->conn_fd);
                /* outcome_to_json() wrote JSON: put in as it is, not parsed
                 * and written again. */
                int n = asprintf(&msg, "{\"op\":\"outcome\",\"exit_code\":%d,\"outcome\":%s}",
                                 o.exit_code, json ? json : "null");

                if (n < 0)
                        msg = NULL;
                else if ((size_t)n <= KEEPER_MSG_MAX)
                        (void)send_with_fds(e->conn_fd, msg, (size_t)n, NULL, 0);
                if (c)
                        conn_close(k, c);
        }
        /* The next exec's process, while the client reads its answer (not
         * while this exec ran: moving a process into a cgroup holds up the
         * command's forks and exit). First: a client that calls again at
         * once must find it ready; the history and removing this exec's
         * cgroup can wait (while init forks the new process). */
        stem_prepare(k);
        history_append(k, e, json ? json : "null");
        exec_free(k, e);
}

static int open_log(Keeper *k, uint64_t id) {
        char path[4096];
        int n;

        n = snprintf(path, sizeof(path), "%s/exec-%llu.log", k->cfg->logs_dir,
                     (unsigned long long)id);
        if (n < 0 || (size_t)n >= sizeof(path))
                return -ENAMETOOLONG;
        n = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
        return n < 0 ? negative_errno() : n;
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

static int strings_from_json(json_t *arr, bool allow_missing, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        size_t i;
        json_t *v;
        int r;

        if (!arr && allow_missing) {
                *ret = NULL;
                return 0;
        }
        if (!json_is_array(arr))
                return -EINVAL;
        json_array_foreach(arr, i, v) {
                if (!json_is_string(v))
                        return -EINVAL;
                r = strv_extend(&l, json_string_value(v));
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

/* The request's environment over the sandbox's. */
static int exec_env(Keeper *k, char *const *extra, char ***ret) {
        _cleanup_strv_free_ char **env = strv_copy(k->st->env);
        int r;

        if (!env)
                return -ENOMEM;
        STRV_FOREACH(e, (char **)extra) {
                _cleanup_free_ char *key = strndup(*e, strcspn(*e, "="));

                if (!key)
                        return -ENOMEM;
                if (!strchr(*e, '=') || !env_name_is_valid(key))
                        return -EINVAL;
                r = strv_env_set(&env, key, strchr(*e, '=') + 1);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(env);
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
        const int *fds; /* stdin, stdout, stderr (borrowed; unused when detached) */
} ExecSpec;

static json_t *strv_to_json(char *const *l) {
        json_t *arr = json_array();

        STRV_FOREACH(s, (char **)l)
                if (arr && json_array_append_new(arr, json_string(*s)) < 0) {
                        json_decref(arr);
                        return NULL;
                }
        return arr;
}

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

static int exec_launch(Keeper *k, Conn *c, const ExecSpec *x) {
        bool use_stem = false;
        _cleanup_strv_free_ char **env = NULL;
        _cleanup_free_ char *payload = NULL, *name = NULL;
        _cleanup_close_ int log_fd = -EBADF, null_fd = -EBADF;
        int cg_fds[SYNC_EXEC_FDS_MAX - 3], send_fds[SYNC_EXEC_FDS_MAX];
        size_t n_cg = 0, payload_len = 0;
        Exec *e;
        int r;

        /* Stopping (idle, or asked to): the command is not started; the
         * client starts a new keeper for it. */
        if (k->stop) {
                (void)send_json(c->fd, json_pack("{s:s}", "op", "stopping"), NULL, 0);
                return -ECONNRESET;
        }
        if (k->n_execs >= KEEPER_MAX_EXECS) {
                send_error(c->fd, "too many commands running in this sandbox");
                return -EBUSY;
        }
        r = exec_env(k, x->extra, &env);
        if (r < 0) {
                send_error(c->fd, "invalid environment entry (want KEY=VALUE)");
                return r;
        }
        r = build_payload(x->cwd, x->argv, env, &payload, &payload_len);
        if (r < 0) {
                send_error(c->fd, "the command line and environment are too long");
                return r;
        }

        e = &k->execs[k->n_execs];
        *e = (Exec){
                .id = k->stem_cgroup ? k->stem_id : ++k->next_id,
                .conn_fd = x->detach ? -EBADF : c->fd,
                .detached = x->detach,
                .builtin = x->builtin,
                .start_ms = now_ms(),
                .start_wall_ms = wall_ms(),
                .audit_start = audit_size(k),
        };
        if (!x->builtin) {
                json_t *a = strv_to_json(x->argv);

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
                        send_error(c->fd, "failed to create the exec's cgroup");
                        return r;
                }
        }
        k->n_execs++;

        if (x->detach) {
                log_fd = open_log(k, e->id);
                null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (log_fd < 0 || null_fd < 0) {
                        r = log_fd < 0 ? log_fd : negative_errno();
                        send_error(c->fd, "failed to open the exec's log file");
                        goto fail;
                }
                send_fds[0] = null_fd;
                send_fds[1] = send_fds[2] = log_fd;
        } else
                memcpy(send_fds, x->fds, sizeof(int) * 3);
        memcpy(send_fds + 3, cg_fds, sizeof(int) * n_cg);
        r = sync_send_values(k->st->sync_parent, SYNC_OP_EXEC,
                             (uint64_t[3]){e->id, payload_len, use_stem ? 1 : 0}, send_fds,
                             3 + n_cg);
        if (r >= 0 && send(k->st->sync_parent, payload, payload_len, MSG_NOSIGNAL) < 0)
                r = negative_errno();
        for (size_t i = 0; i < n_cg; i++)
                cg_fds[i] = safe_close(cg_fds[i]);
        n_cg = 0;
        if (r < 0) {
                send_error(c->fd, "the sandbox is gone");
                goto fail;
        }
        if (x->timeout_ms)
                e->deadline_ms = e->start_ms + x->timeout_ms;
        r = send_json(c->fd, json_pack("{s:s,s:I}", "op", "started", "id", (json_int_t)e->id), NULL,
                      0);
        if (x->detach)
                return -ECONNRESET; /* done with this connection */
        c->kind = CONN_EXEC;
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
static int exec_start(Keeper *k, Conn *c, json_t *req, int *fds, size_t n_fds) {
        _cleanup_strv_free_ char **argv = NULL, **extra = NULL;
        const Policy *p = k->cfg->policy;
        json_t *cwd_j = json_object_get(req, "cwd");
        json_t *timeout_j = json_object_get(req, "timeout_ms");
        ExecSpec x = {
                .detach = json_is_true(json_object_get(req, "detach")),
                .timeout_ms = p->timeout_ms,
                .fds = fds,
        };

        /* SECURITY: argv[0] 0x01... is a builtin's (sync.h), never a
         * client's command. */
        if (strings_from_json(json_object_get(req, "argv"), false, &argv) < 0 || !argv ||
            !argv[0] || argv[0][0] == FILE_OP_ARGV0_PREFIX ||
            strings_from_json(json_object_get(req, "env"), true, &extra) < 0 ||
            (cwd_j && !json_is_null(cwd_j) && !json_is_string(cwd_j)) ||
            (timeout_j && !json_is_integer(timeout_j)) || n_fds != 3) {
                send_error(c->fd, "malformed exec request");
                return -EINVAL;
        }
        if (timeout_j && json_integer_value(timeout_j) > 0)
                x.timeout_ms = (uint64_t)json_integer_value(timeout_j);
        x.cwd = json_is_string(cwd_j) ? json_string_value(cwd_j)
                : p->workdir          ? p->workdir
                : p->workspace        ? POLICY_SANDBOX_WORKSPACE
                                      : POLICY_SANDBOX_HOME;
        if (x.cwd[0] != '/') {
                send_error(c->fd, "the working directory must be an absolute path");
                return -EINVAL;
        }
        x.argv = argv;
        x.extra = extra;
        return exec_launch(k, c, &x);
}

/* {"op":"file","action":A,"path":P,"mode":N,"max":N} with one fd: the
 * builtin of sandbox/file-op.h, run as an exec whose stdin and stdout are
 * that fd. A relative path is taken from the workspace, or $HOME. */
static int file_start(Keeper *k, Conn *c, json_t *req, int *fds, size_t n_fds) {
        _cleanup_close_ int null_fd = -EBADF;
        json_t *mode_j = json_object_get(req, "mode"), *max_j = json_object_get(req, "max");
        const char *action = json_string_value(json_object_get(req, "action"));
        const char *path = json_string_value(json_object_get(req, "path"));
        char mode[24], max[24];
        int data_fd = fds[0];

        if (file_op_action_from_string(action) < 0 || !path || !path[0] ||
            strlen(path) >= PATH_MAX || !json_is_integer(mode_j) ||
            json_integer_value(mode_j) < 0 || json_integer_value(mode_j) > 0777 ||
            !json_is_integer(max_j) || json_integer_value(max_j) < 0 || n_fds != 1) {
                send_error(c->fd, "malformed file request");
                return -EINVAL;
        }
        null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null_fd < 0) {
                send_error(c->fd, "failed to open /dev/null");
                return negative_errno();
        }
        (void)snprintf(mode, sizeof(mode), "%lld", (long long)json_integer_value(mode_j));
        (void)snprintf(max, sizeof(max), "%lld", (long long)json_integer_value(max_j));
        return exec_launch(k, c,
                           &(ExecSpec){
                                   .argv = (char *[]){(char *)FILE_OP_ARGV0, (char *)action,
                                                      (char *)path, mode, max, NULL},
                                   .cwd = k->cfg->policy->workspace ? POLICY_SANDBOX_WORKSPACE
                                                                    : POLICY_SANDBOX_HOME,
                                   .timeout_ms = k->cfg->policy->timeout_ms,
                                   .builtin = true,
                                   .fds = (int[3]){data_fd, data_fd, null_fd},
                           });
}

/* One message on a connection. Returns < 0 to close it. */
static int conn_handle(Keeper *k, Conn *c) {
        int fds[3] = {-EBADF, -EBADF, -EBADF};
        json_t *req = NULL;
        const char *op;
        struct ucred cred;
        socklen_t len = sizeof(cred);
        size_t n_fds = 0;
        int r;

        r = recv_json(c->fd, &req, fds, ELEMENTSOF(fds));
        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                if (fds[i] >= 0)
                        n_fds = i + 1;
        if (r <= 0) {
                for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                        fds[i] = safe_close(fds[i]);
                if (r < 0 && r != -EAGAIN)
                        send_error(c->fd, "malformed request (want one JSON object)");
                return r == -EAGAIN ? 0 : -ECONNRESET;
        }
        op = json_string_value(json_object_get(req, "op"));
        if (!op)
                op = "";
        /* SECURITY: only the sandbox's owner (the socket's directory is
         * 0700 already) may drive it. */
        if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != getuid()) {
                send_error(c->fd, "permission denied");
                r = -EPERM;
        } else if (c->kind == CONN_EXEC && strcmp(op, "signal") == 0) {
                json_t *sig = json_object_get(req, "signal");

                if (json_is_integer(sig) && json_integer_value(sig) > 0 &&
                    json_integer_value(sig) < NSIG)
                        (void)sync_send_values(
                                k->st->sync_parent, SYNC_OP_SIGNAL,
                                (uint64_t[3]){c->exec_id, (uint64_t)json_integer_value(sig), 0},
                                NULL, 0);
                r = 0;
        } else if (c->kind != CONN_NEW && !(c->kind == CONN_FREEZE && strcmp(op, "thaw") == 0)) {
                send_error(c->fd, "unexpected request on this connection");
                r = -EPROTO;
        } else if (strcmp(op, "exec") == 0) {
                r = exec_start(k, c, req, fds, n_fds);
        } else if (strcmp(op, "file") == 0) {
                r = file_start(k, c, req, fds, n_fds);
        } else if (strcmp(op, "ping") == 0) {
                (void)send_json(c->fd,
                                json_pack("{s:s,s:i,s:i}", "op", "ok", "running", (int)k->n_execs,
                                          "pid", (int)getpid()),
                                NULL, 0);
                r = -ECONNRESET;
        } else if (strcmp(op, "stop") == 0) {
                k->stop = true;
                /* The answer goes out when everything is down. */
                r = 0;
                c->kind = CONN_STOP;
        } else if (strcmp(op, "freeze") == 0 || strcmp(op, "thaw") == 0) {
                bool freeze = op[0] == 'f';

                if (freeze && k->frozen) {
                        send_error(c->fd, "the sandbox is already frozen");
                        r = -EBUSY;
                } else if (!k->st->rc.cgroup) {
                        send_error(c->fd, "no cgroup: this sandbox cannot be frozen");
                        r = -EOPNOTSUPP;
                } else {
                        r = cgroup_set_frozen(k->st->rc.cgroup, freeze);
                        if (r < 0)
                                send_error(c->fd, "failed to freeze the sandbox");
                        else {
                                k->frozen = freeze;
                                c->kind = freeze ? CONN_FREEZE : CONN_NEW;
                                (void)send_json(c->fd, json_pack("{s:s}", "op", "ok"), NULL, 0);
                        }
                }
        } else {
                send_error(c->fd, "unknown request");
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
                if (m.op == SYNC_OP_READY)
                        return 0;
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

static int listen_socket(const char *path, HutchError *reterr) {
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        char tmp[sizeof(sa.sun_path)];
        int n;

        n = snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid());
        if (n < 0 || (size_t)n >= sizeof(tmp))
                return hutch_error_set(reterr, ENAMETOOLONG, "socket path too long: %s", path);
        memcpy(sa.sun_path, tmp, (size_t)n + 1);
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return hutch_error_set(reterr, errno, "socket: %m");
        (void)unlink(tmp);
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(tmp, 0600) < 0 ||
            listen(fd, 64) < 0)
                return hutch_error_set(reterr, errno, "failed to listen on %s: %m", tmp);
        /* Appears under its name only once it accepts. */
        if (rename(tmp, path) < 0) {
                (void)unlink(tmp);
                return hutch_error_set(reterr, errno, "failed to create %s: %m", path);
        }
        return TAKE_FD(fd);
}

static void report_ready(int fd, const HutchError *err) {
        char line[600];
        int n;

        if (fd < 0)
                return;
        n = err ? snprintf(line, sizeof(line), "error: %s\n", err->msg)
                : snprintf(line, sizeof(line), "ok\n");
        if (n > 0)
                (void)loop_write(fd, line, strlen(line));
        (void)close(fd);
}

static void keeper_loop(Keeper *k) {
        uint64_t idle_ms =
                k->cfg->idle_timeout_ms ? k->cfg->idle_timeout_ms : KEEPER_DEFAULT_IDLE_MS;

        k->idle_since_ms = now_ms();
        while (!k->stop) {
                struct pollfd pfd[4 + KEEPER_MAX_CONNS];
                uint64_t now = now_ms(), next = UINT64_MAX;
                size_t n = 0, n_fixed;
                int timeout;

                pfd[n++] = (struct pollfd){.fd = k->listen_fd, .events = POLLIN};
                pfd[n++] = (struct pollfd){.fd = k->st->sync_parent, .events = POLLIN};
                pfd[n++] = (struct pollfd){.fd = k->st->pidfd, .events = POLLIN};
                pfd[n++] = (struct pollfd){.fd = k->st->sigfd, .events = POLLIN};
                n_fixed = n;
                for (size_t i = 0; i < k->n_conns; i++)
                        pfd[n++] = (struct pollfd){.fd = k->conns[i].fd, .events = POLLIN};
                if (k->n_conns >= KEEPER_MAX_CONNS)
                        pfd[0].fd = -1; /* full: new clients wait in the backlog */

                for (size_t i = 0; i < k->n_execs; i++)
                        if (k->execs[i].deadline_ms && k->execs[i].deadline_ms < next)
                                next = k->execs[i].deadline_ms;
                if (k->n_execs == 0 && k->idle_since_ms + idle_ms < next)
                        next = k->idle_since_ms + idle_ms;
                timeout = next == UINT64_MAX ? -1
                          : next <= now      ? 0
                                             : (int)MIN(next - now, (uint64_t)60000);
                if (poll(pfd, n, timeout) < 0 && errno != EINTR)
                        break;
                now = now_ms();

                for (size_t i = 0; i < k->n_execs; i++) {
                        Exec *e = &k->execs[i];

                        if (e->deadline_ms && now >= e->deadline_ms && !e->timed_out) {
                                e->timed_out = true;
                                exec_kill(k, e);
                        }
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
                for (size_t i = n_fixed; i < n; i++) {
                        Conn *c;

                        if (!pfd[i].revents)
                                continue;
                        c = conn_find(k, pfd[i].fd);
                        if (!c)
                                continue;
                        if (conn_handle(k, c) < 0) {
                                Exec *e = c->kind == CONN_EXEC ? exec_find(k, c->exec_id) : NULL;

                                /* A client that went away ends its exec. */
                                if (e && !e->detached) {
                                        e->killed = true;
                                        exec_kill(k, e);
                                }
                                conn_close(k, c);
                        }
                }
                if (pfd[0].revents & POLLIN) {
                        int fd = accept4(k->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

                        if (fd >= 0)
                                k->conns[k->n_conns++] = (Conn){.fd = fd, .kind = CONN_NEW};
                }
        }
}

/* Exec ids go on from the history's last line across restarts. */
static uint64_t history_last_id(const char *path) {
        _cleanup_close_ int fd = -EBADF;
        char buf[4097], *line;
        uint64_t id;
        off_t size;
        ssize_t n;

        if (!path)
                return 0;
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return 0;
        size = lseek(fd, 0, SEEK_END);
        if (size <= 0)
                return 0;
        n = pread(fd, buf, sizeof(buf) - 1, size > 4096 ? size - 4096 : 0);
        if (n <= 0)
                return 0;
        buf[n] = '\0';
        if (buf[n - 1] == '\n')
                buf[--n] = '\0';
        line = strrchr(buf, '\n');
        line = line ? line + 1 : buf;
        if (strncmp(line, "{\"id\":", 6) != 0)
                return 0;
        line += 6;
        line[strspn(line, "0123456789")] = '\0';
        return safe_atou64(line, &id) < 0 ? 0 : id;
}

/* SECURITY: the keeper lives long, and the environment it was started
 * with (readable in /proc/PID/environ by the user's other processes) holds
 * the real values of the secrets taken from variables. Once the proxy has
 * them, they are zeroed in place; nothing else here needs them. */
static void scrub_secret_values(const Policy *p, char *const *env) {
        for (size_t i = 0; i < p->n_secrets; i++) {
                const PolicySecret *sec = &p->secrets[i];
                const char *var = sec->env_var ? sec->env_var : sec->name;
                size_t len = strlen(var);

                if (sec->file)
                        continue;
                for (size_t j = 0; env && env[j]; j++)
                        if (strncmp(env[j], var, len) == 0 && env[j][len] == '=')
                                explicit_bzero(env[j] + len + 1, strlen(env[j] + len + 1));
        }
}

int sandbox_keep(const KeeperConfig *cfg, char *const *caller_env, HutchError *reterr) {
        _cleanup_(run_state_done) RunState st;
        Keeper k = {.cfg = cfg,
                    .st = &st,
                    .listen_fd = -EBADF,
                    .next_id = history_last_id(cfg->history_path)};
        HutchError err = {};
        int r;

        run_state_init(&st);
        st.sup.userdata = &st; /* for sandbox_on_proxy_sockets() */
        r = sandbox_start(cfg->policy, &cfg->layers, NULL, caller_env, &st, &err);
        if (r >= 0)
                r = wait_ready(&k, &err);
        if (r >= 0) {
                r = listen_socket(cfg->socket_path, &err);
                k.listen_fd = r;
        }
        if (r < 0) {
                if (st.pid > 0)
                        sandbox_abort(&st, &err);
                report_ready(cfg->ready_fd, &err);
                if (reterr)
                        *reterr = err;
                return r;
        }
        scrub_secret_values(cfg->policy, caller_env);
        report_ready(cfg->ready_fd, NULL);
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
        while (k.n_conns > 0) {
                Conn *c = &k.conns[0];

                if (c->kind == CONN_STOP)
                        (void)send_json(c->fd, json_pack("{s:s}", "op", "ok"), NULL, 0);
                conn_close(&k, c);
        }
        if (k.error.errnum != 0) {
                if (reterr)
                        *reterr = k.error;
                return -k.error.errnum;
        }
        return 0;
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

int keeper_simple(int sock, const char *op, HutchError *reterr) {
        json_t *ans = NULL;
        const char *aop;
        int r;

        r = send_json(sock, json_pack("{s:s}", "op", op), NULL, 0);
        if (r < 0)
                return hutch_error_set(reterr, -r, "failed to talk to the sandbox's keeper: %s",
                                       strerror(-r));
        r = recv_json(sock, &ans, NULL, 0);
        if (r <= 0)
                return hutch_error_set(reterr, r == 0 ? EPIPE : -r,
                                       "the sandbox's keeper did not answer");
        aop = json_string_value(json_object_get(ans, "op"));
        r = aop && strcmp(aop, "ok") == 0 ? 0 : answer_error(ans, reterr);
        json_decref(ans);
        return r;
}

static int request_send(int sock, json_t *obj, const int *fds, size_t n_fds, HutchError *reterr) {
        int r;

        r = send_json(sock, obj, fds, n_fds);
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
        return json_pack("{s:s,s:o,s:o,s:o,s:I,s:b}", "op", "exec", "argv", strv_to_json(req->argv),
                         "env", strv_to_json(req->env), "cwd",
                         req->cwd ? json_string(req->cwd) : json_null(), "timeout_ms",
                         (json_int_t)req->timeout_ms, "detach", req->detach);
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

        r = recv_json(sock, &ans, NULL, 0);
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
                                (void)send_json(sock,
                                                json_pack("{s:s,s:i}", "op", "signal", "signal",
                                                          (int)si.ssi_signo),
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

        if (!action || req->mode > 0777 || req->max > INT64_MAX)
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
