/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The keeper of a persistent microVM sandbox (`hutch create --backend vm`,
 * docs/vm.md "Persistent VM sandboxes"): the same control socket and
 * protocol as the namespace backend's keeper (keeper.h), holding one VM
 * between execs. The sandbox's layers are mounted on the host
 * (vm-layers.c) and shared with the guest. The guest's agent runs up to
 * AGENT_MAX_EXECS commands at once, one per channel of the agent's port
 * (vm-session.h); more wait here, in order, for a channel. Each exec's
 * streams are relayed between the client's descriptors (a detached one's:
 * /dev/null and its log file) and the agent's frames without ever
 * blocking the loop. The file operations of the C API run in the guest as
 * execs of the builtin of file-op.h. */
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
#include "file-op.h"
#include "macro.h"
#include "sandbox/backend.h"
#include "sandbox/deadline.h"
#include "sandbox/exec-table.h"
#include "sandbox/keeper-toolkit.h"
#include "sandbox/keeper.h"
#include "strv.h"
#include "time-util.h"
#include "vm/keeper-vm-tty.h"
#include "vm/vm-forward.h"
#include "vm/vm-image-root.h"
#include "vm/vm-layers.h"
#include "vm/vm-run.h"

typedef struct VmExec {
        uint64_t id;
        int conn_fd; /* the client waiting for the outcome, or -EBADF */
        int fds[3];  /* stdin, stdout, stderr: the client's, or a detached one's (owned) */
        char *payload;
        size_t payload_len;
        char *argv_json;
        uint64_t timeout_ms, start_ms, start_wall_ms;
        uint64_t sent_ms;   /* when its EXEC was sent, or 0: waiting for a channel */
        CommandDeadline dl; /* its --timeout, a kill's grace (deadline.h) */
        off_t audit_start;
        bool detached, builtin;
        /* A terminal (keeper-vm-tty.h): fds[0] is the host pty's slave (its
         * stdin and stdout), chan_fd the client's pty channel; its EXEC
         * waits for the client's go. */
        bool tty, go;
        int chan_fd;
        unsigned rows, cols; /* the window size the guest has */
        VmTtyWatch watch;    /* its window-size changes (keeper-vm-tty.h) */
        bool announced;      /* "started" was sent */
        /* A detached exec started with "stdin_pipe": the write end of the
         * pipe its session reads (fds[0]), for the "stdin" request
         * (exec-table.h), or -EBADF. */
        int stdin_w;
        bool discarded;
        Supervision sup; /* relays, forwarded signal, times */
        VmSession ss;
} VmExec;

typedef struct VmKeeper {
        KeeperCore core; /* first: the ops get the VmKeeper back by a cast */
        VmRun v;
        VmLayers layers;
        VmMux mux;
        VmForwards fwd;                  /* published ports, preview connections */
        VmExec *execs[KEEPER_MAX_EXECS]; /* in arrival order */
        size_t n_execs;
        size_t n_polled; /* execs whose sessions poll_fill() filled */
} VmKeeper;

_Static_assert(2 + VM_SESSION_NPOLL * KEEPER_MAX_EXECS + VM_FORWARD_NPOLL <=
                       KEEPER_BACKEND_NPOLL_MAX,
               "the keeper's poll holds the VM's descriptors");

static VmKeeper *keeper_of(KeeperCore *core) {
        return (VmKeeper *)core;
}

static VmExec *vm_exec_free(VmExec *e) {
        if (!e)
                return NULL;
        for (size_t i = 0; i < 3; i++)
                e->fds[i] = safe_close(e->fds[i]);
        e->chan_fd = safe_close(e->chan_fd);
        e->stdin_w = safe_close(e->stdin_w);
        vm_tty_watch_stop(&e->watch);
        free(e->payload);
        free(e->argv_json);
        free(e);
        return NULL;
}

/* Drops execs[@i]: its channel, and its client's connection. */
static void exec_drop(VmKeeper *k, size_t i) {
        VmExec *e = k->execs[i];
        KeeperConn *c = e->conn_fd >= 0 ? keeper_conn_find(&k->core.conns, e->conn_fd) : NULL;

        if (c)
                keeper_conn_remove(&k->core.conns, c);
        vm_session_release(&k->mux, &e->ss);
        vm_exec_free(e);
        memmove(k->execs + i, k->execs + i + 1, (k->n_execs - i - 1) * sizeof(VmExec *));
        if (--k->n_execs == 0)
                keeper_core_idle(&k->core);
}

static size_t exec_find(VmKeeper *k, uint64_t id) {
        for (size_t i = 0; i < k->n_execs; i++)
                if (k->execs[i]->id == id)
                        return i;
        return SIZE_MAX;
}

/* The end of execs[@i]: the history, the outcome to its client. */
static void exec_finished(VmKeeper *k, size_t i) {
        _cleanup_(outcome_done) Outcome o = {};
        _cleanup_free_ char *json = NULL;
        VmExec *e = k->execs[i];

        e->sup.end_ms = time_monotonic_ms();
        o.wall_ms = e->sup.end_ms - e->start_ms;
        if (vm_session_outcome(&e->ss, &o) < 0) {
                /* No EXIT: the VM went away under the command. */
                o.reason = OUTCOME_KILLED;
                o.signal = SIGKILL;
                o.exit_code = 128 + SIGKILL;
        }
        if (e->dl.timed_out)
                o.reason = OUTCOME_TIMEOUT;
        else if (e->dl.killed)
                o.reason = OUTCOME_KILLED;
        o.degraded = (k->v.rc.degraded & (1U << POLICY_LIMIT_CPUS)) | k->core.cfg->degraded;
        o.denied = keeper_denials(k->core.cfg->policy, e->audit_start);
        if (outcome_to_json(&o, &json) < 0)
                json = NULL;
        /* The history first: whoever has the outcome finds its line. */
        if (!e->builtin)
                keeper_history_append(k->core.cfg->history_path,
                                      &(KeeperHistoryEntry){.id = e->id,
                                                            .argv_json = e->argv_json,
                                                            .detached = e->detached,
                                                            .start_wall_ms = e->start_wall_ms},
                                      json ? json : "null");
        if (e->conn_fd >= 0)
                (void)keeper_send_outcome(e->conn_fd, o.exit_code, json);
        exec_table_finished(&k->core.conns, e->id, o.exit_code, json);
        exec_drop(k, i);
}

/* The backend's one kill (vm_session_kill()). SECURITY: if the guest
 * has not ended it within VM_KILL_GRACE_MS (an agent that does not
 * answer, a frozen VM), the keeper stops the VM (vm_deadlines()): a
 * timeout is never left unenforced. Not started yet: exec_started() kills
 * it (e->dl.killed). */
static void exec_kill(VmKeeper *k, VmExec *e) {
        vm_session_kill(&k->mux, &e->ss);
}

/* STARTED (or ERROR) came for @e: its times start, its client hears of
 * it; a detached exec's client is done then. */
static void exec_started(VmKeeper *k, VmExec *e) {
        e->announced = true;
        e->start_ms = e->sup.start_ms = time_monotonic_ms();
        e->start_wall_ms = time_realtime_ms();
        command_deadline_start(&e->dl, e->start_ms, e->timeout_ms);
        if (e->conn_fd >= 0)
                (void)keeper_send_json(
                        e->conn_fd,
                        json_pack("{s:s,s:I}", "op", "started", "id", (json_int_t)e->id), NULL, 0);
        if (e->detached && e->conn_fd >= 0) {
                KeeperConn *c = keeper_conn_find(&k->core.conns, e->conn_fd);

                e->conn_fd = -EBADF;
                if (c)
                        keeper_conn_remove(&k->core.conns, c);
        }
        /* Its client went away while it was starting. */
        if (e->dl.killed && e->ss.started)
                exec_kill(k, e);
}

/* The agent could not start @e's command (not found, not executable, a
 * bad working directory): 127 or 126, with the reason on its stderr, as
 * the namespace backend does; 125 for a user it could not find or take,
 * as the namespace backend's exec_become_user(). */
static void exec_start_failed(VmKeeper *k, VmExec *e) {
        char line[sizeof(e->ss.error.msg) + 16];
        int efd = e->tty ? e->fds[0] : e->fds[2];

        exec_started(k, e);
        (void)snprintf(line, sizeof(line), "hutch: %s\n", e->ss.error.msg);
        /* Never blocking the keeper on the client's stderr: a full pipe
         * loses the line (the exit status still tells); one that polls
         * writable has room for it (a page). A terminal's is its slave
         * (fds[0]). */
        if (efd >= 0) {
                struct pollfd p = {.fd = efd, .events = POLLOUT};

                if (poll(&p, 1, 0) == 1 && (p.revents & POLLOUT))
                        (void)loop_write(efd, line, strlen(line));
        }
        e->ss.exited = true;
        e->ss.exit.status = (e->ss.user_failed              ? 125
                             : e->ss.error.errnum == ENOENT ? 127
                                                            : 126)
                            << 8;
}

/* What one exec asks for (a client's command, or a file operation). */
typedef struct VmExecSpec {
        char **argv; /* borrowed */
        char **env;  /* the whole environment (borrowed) */
        const char *cwd;
        const char *user; /* the user to run as, or NULL: the sandbox's root (borrowed) */
        uint64_t timeout_ms;
        bool detach, builtin, tty;
        bool stdin_pipe; /* with detach: stdin a pipe the keeper keeps ("stdin" request) */
} VmExecSpec;

/* A detached exec's stdin that takes input later (docs/processes.md): a
 * pipe whose read end is its session's stdin (non-blocking: the keeper's
 * loop never waits on it) and whose write end the keeper keeps, handing
 * copies out on the "stdin" request (table_stdin()); the clients' copies
 * block as a pipe's writer does, until the guest's command reads. The
 * agent sees a command's stdin as for any exec: EOF once every write end
 * is closed. 0 or -errno (fds[0] stays -EBADF then). */
static int detached_stdin_pipe(VmExec *e) {
        int p[2];

        if (pipe2(p, O_CLOEXEC) < 0)
                return negative_errno();
        if (fcntl(p[0], F_SETFL, O_NONBLOCK) < 0) {
                int r = negative_errno();

                (void)close(p[0]);
                (void)close(p[1]);
                return r;
        }
        e->fds[0] = p[0];
        e->stdin_w = p[1];
        return 0;
}

/* Queues @x for a channel; takes @fds (stdin, stdout, stderr; a detached
 * exec's are made here). Returns < 0 (answered) to close @c. */
static int exec_add(VmKeeper *k, KeeperConn *c, const VmExecSpec *x, int fds[3]) {
        VmExec *e;
        int r;

        r = keeper_exec_admit(c->fd, k->core.stop, k->n_execs);
        if (r < 0)
                return r;
        e = calloc(1, sizeof(VmExec));
        if (!e) {
                keeper_send_error(c->fd, "out of memory");
                return -ENOMEM;
        }
        *e = (VmExec){
                .id = ++k->core.next_id,
                .conn_fd = c->fd,
                .fds = {fds[0], fds[1], fds[2]},
                .timeout_ms = x->timeout_ms,
                .detached = x->detach,
                .builtin = x->builtin,
                .tty = x->tty,
                .chan_fd = -EBADF,
                .stdin_w = -EBADF,
                .watch = VM_TTY_WATCH_NULL,
        };
        fds[0] = fds[1] = fds[2] = -EBADF;
        if (x->tty) {
                /* One channel for stdin, stdout and stderr (pty.h). */
                e->chan_fd = TAKE_FD(e->fds[0]);
                e->fds[1] = safe_close(e->fds[1]);
                e->fds[2] = safe_close(e->fds[2]);
                r = vm_tty_open(e->chan_fd, &e->fds[0]);
                if (r >= 0)
                        r = vm_tty_watch_start(&e->watch, e->fds[0]);
                if (r < 0) {
                        vm_exec_free(e);
                        keeper_send_error(c->fd, "failed to open the command's terminal");
                        return r;
                }
        }
        /* SECURITY: the keeper's loop serves every client: a client's
         * blocking pipe or terminal (its stdio, shared with others) must
         * not stop it; it gets descriptions of its own that never block
         * (sockets use MSG_DONTWAIT; files do not block). */
        for (size_t i = 0; i < 3 && !x->detach && !x->tty; i++) {
                int fd = fd_reopen_nonblocking(e->fds[i], i == 0 ? O_RDONLY : O_WRONLY);

                if (fd >= 0) {
                        (void)safe_close(e->fds[i]);
                        e->fds[i] = fd;
                }
        }
        if (x->detach) {
                for (size_t i = 0; i < 3; i++)
                        e->fds[i] = safe_close(e->fds[i]);
                if (x->stdin_pipe)
                        (void)detached_stdin_pipe(e);
                else
                        e->fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
                /* stdout and stderr apart, each capped (exec-table.h). */
                r = exec_log_open_files(k->core.cfg->logs_dir, e->id, e->fds + 1);
                if (e->fds[0] < 0 || r < 0) {
                        vm_exec_free(e);
                        keeper_send_error(c->fd, "failed to open the exec's log file");
                        return -EIO;
                }
        }
        /* A file operation's data is whole: the read's size is its own
         * limit (file-op.h). */
        for (size_t i = 0; i < 2; i++)
                e->sup.relays[i] =
                        (Relay){.in_fd = -EBADF,
                                .out_fd = e->fds[1 + i],
                                .limit = x->builtin  ? 0
                                         : x->detach ? EXEC_LOG_STREAM_MAX
                                                     : k->core.cfg->policy->output_limit};
        if (x->tty)
                e->sup.relays[0].out_fd = e->fds[0];
        e->ss = (VmSession){.s = &e->sup, .in_fd = e->fds[0], .chan = -1};
        if (!x->builtin) {
                json_t *a = keeper_strv_to_json(x->argv);

                e->argv_json = a ? json_dumps(a, JSON_COMPACT) : NULL;
                json_decref(a);
        }
        r = vm_run_build_exec(x->argv, x->env, x->cwd, x->user, k->core.cfg->policy->env,
                              &e->payload, &e->payload_len);
        /* A terminal's "t:ROWS:COLS" comes with the go (tty_go()). */
        if (r < 0 || e->payload_len + (x->tty ? 16 : 0) > AGENT_FRAME_MAX) {
                vm_exec_free(e);
                keeper_send_error(c->fd, "the command line and environment are too long");
                return r < 0 ? r : -E2BIG;
        }
        k->execs[k->n_execs++] = e;
        c->kind = KEEPER_CONN_EXEC;
        c->exec_id = e->id;
        return 0;
}

/* The user an exec without --user runs as: the policy's, else the
 * image's User, else NULL (root). */
static const char *exec_default_user(const VmKeeper *k) {
        const Policy *p = k->core.cfg->policy;

        if (p->user)
                return p->user;
        return k->v.image ? k->v.image->user : NULL;
}

/* {"op":"exec",...}: checked and queued; the fds are taken. */
static int exec_request(KeeperCore *core, KeeperConn *c, json_t *req, int fds[3], size_t n_fds) {
        VmKeeper *k = keeper_of(core);
        _cleanup_(keeper_exec_request_done) KeeperExecRequest q = {};
        _cleanup_strv_free_ char **env = NULL;
        const char *msg = NULL;
        int r;

        r = keeper_exec_request_parse(req, k->core.cfg->policy, k->v.image, n_fds, &q, &msg);
        if (r < 0) {
                keeper_send_error(c->fd, msg);
                return r;
        }
        r = keeper_exec_env(k->v.env, q.extra, &env);
        if (r < 0) {
                keeper_send_error(c->fd, "invalid environment entry (want KEY=VALUE)");
                return r;
        }
        /* --user, else the sandbox's user (the policy's, else its
         * image's User), as the namespace backend's exec_become_user();
         * the agent finds it in the sandbox's /etc/passwd as it is now. */
        return exec_add(k, c,
                        &(VmExecSpec){.argv = q.argv,
                                      .env = env,
                                      .cwd = q.cwd,
                                      .user = q.user ?: exec_default_user(k),
                                      .timeout_ms = q.timeout_ms,
                                      .detach = q.detach,
                                      .tty = q.tty,
                                      .stdin_pipe = q.stdin_pipe},
                        fds);
}

/* {"op":"file",...} with one fd: the builtin of file-op.h in the guest,
 * its stdin and stdout that fd. */
static int file_request(KeeperCore *core, KeeperConn *c, json_t *req, int fds[3], size_t n_fds) {
        VmKeeper *k = keeper_of(core);
        KeeperFileRequest f;
        int xfds[3] = {fds[0], -EBADF, -EBADF}, r;

        if (keeper_file_request_parse(req, k->core.cfg->policy, n_fds, &f) < 0) {
                keeper_send_error(c->fd, "malformed file request");
                return -EINVAL;
        }
        fds[0] = -EBADF;
        xfds[1] = fcntl(xfds[0], F_DUPFD_CLOEXEC, 3);
        xfds[2] = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (xfds[1] < 0 || xfds[2] < 0) {
                for (size_t i = 0; i < 3; i++)
                        xfds[i] = safe_close(xfds[i]);
                keeper_send_error(c->fd, "failed to open /dev/null");
                return -EIO;
        }
        r = exec_add(k, c,
                     &(VmExecSpec){.argv = (char *[]){(char *)FILE_OP_ARGV0, (char *)f.action,
                                                      (char *)f.path, f.mode, f.max, (char *)f.user,
                                                      NULL},
                                   .env = k->v.env,
                                   .cwd = f.cwd,
                                   .timeout_ms = k->core.cfg->policy->timeout_ms,
                                   .builtin = true},
                     xfds);
        for (size_t i = 0; i < 3; i++)
                xfds[i] = safe_close(xfds[i]);
        return r;
}

/* The client of exec @id went away: a running command is killed, a
 * waiting one is dropped, a detached one goes on. */
static void exec_abandon(KeeperCore *core, uint64_t id) {
        VmKeeper *k = keeper_of(core);
        size_t i = exec_find(k, id);
        VmExec *e;

        if (i == SIZE_MAX)
                return;
        e = k->execs[i];
        e->conn_fd = -EBADF;
        if (e->detached)
                return;
        if (!e->sent_ms) {
                exec_drop(k, i);
                return;
        }
        e->dl.killed = true;
        exec_kill(k, e);
}

/* ---- the exec table (exec-table.h) ---- */

static bool table_row(void *userdata, size_t i, ExecRow *ret) {
        VmKeeper *k = userdata;

        /* Started and not ended: those waiting for a channel do not run
         * yet. */
        for (size_t j = 0; j < k->n_execs; j++) {
                const VmExec *e = k->execs[j];

                if (e->builtin || !e->announced || e->ss.exited)
                        continue;
                if (i-- > 0)
                        continue;
                *ret = (ExecRow){.id = e->id,
                                 .argv_json = e->argv_json,
                                 .start_wall_ms = e->start_wall_ms,
                                 .pid = e->ss.pid,
                                 .detached = e->detached};
                return true;
        }
        return false;
}

static void table_kill(void *userdata, uint64_t id, int sig, uint64_t grace_ms) {
        VmKeeper *k = userdata;
        size_t i = exec_find(k, id);
        VmExec *e;

        if (i == SIZE_MAX)
                return;
        e = k->execs[i];
        if (sig == SIGKILL) {
                e->dl.killed = true;
                exec_kill(k, e);
                return;
        }
        vm_session_signal(&k->mux, &e->ss, sig);
        command_deadline_grace(&e->dl, time_monotonic_ms(), grace_ms);
}

/* The "stdin" request: a copy of exec @id's stdin pipe, or (@close) the
 * keeper's end closed (exec-table.h), as the namespace backend's. */
static int table_stdin(void *userdata, uint64_t id, bool close_it, int *ret_fd) {
        VmKeeper *k = userdata;
        size_t i = exec_find(k, id);

        return exec_table_stdin_pipe(i == SIZE_MAX ? NULL : &k->execs[i]->stdin_w, close_it,
                                     ret_fd);
}

/* The VM is lost (gone, broken, or not answering): the keeper stops, and
 * says why. */
static void vm_lost(VmKeeper *k, int err, const char *why) {
        if (k->core.error.errnum == 0)
                (void)hutch_error_set(&k->core.error, err, "the VM ended: %s", why);
        k->core.stop = true;
}

/* Sends the EXECs that wait (in order, while channels are free and the
 * VM is not frozen), announces the started, and ends the ended. Returns
 * true when it changed the list (the caller looks again). */
static bool execs_step(VmKeeper *k) {
        bool blocked = k->core.frozen || k->mux.gone || k->mux.error.errnum;

        for (size_t i = 0; i < k->n_execs; i++) {
                VmExec *e = k->execs[i];

                if (!e->sent_ms && !blocked && (!e->tty || e->go)) {
                        int r = vm_session_start(&k->mux, &e->ss, e->payload, e->payload_len);

                        if (r == -EBUSY)
                                blocked = true;
                        else if (r < 0) {
                                vm_lost(k, -r, "out of memory");
                                return false;
                        } else
                                e->sent_ms = MAX(time_monotonic_ms(), 1U);
                }
                if (e->ss.failed && !e->announced) {
                        exec_start_failed(k, e);
                        exec_finished(k, i);
                        return true;
                }
                if (e->ss.started && !e->announced)
                        exec_started(k, e);
                if (e->announced && vm_session_ended(&k->mux, &e->ss)) {
                        exec_finished(k, i);
                        return true;
                }
        }
        return false;
}

/* The window size of @e's host pty, passed on when it changed. */
static void tty_sync_size(VmKeeper *k, VmExec *e) {
        unsigned rows, cols;

        if (!e->ss.started || e->ss.exited)
                return;
        vm_tty_size(e->fds[0], &rows, &cols);
        if (rows == e->rows && cols == e->cols)
                return;
        e->rows = rows;
        e->cols = cols;
        vm_session_resize(&k->mux, &e->ss, rows, cols);
}

/* The client's go on @e's pty channel (pty.h): the window size is set,
 * the EXEC may go, with it. A channel closed first is the client going
 * away (its connection follows: exec_abandon()). */
static void tty_go(VmExec *e) {
        char go, size[32];
        ssize_t n = recv(e->chan_fd, &go, 1, MSG_DONTWAIT);

        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n <= 0) {
                e->chan_fd = safe_close(e->chan_fd);
                return;
        }
        vm_tty_size(e->fds[0], &e->rows, &e->cols);
        (void)snprintf(size, sizeof(size), "%u:%u", e->rows, e->cols);
        if (agent_payload_add(&e->payload, &e->payload_len, "t:", size) < 0) {
                e->chan_fd = safe_close(e->chan_fd);
                return;
        }
        e->go = true;
}

/* Waiting for its client's go. */
static bool tty_waits(const VmExec *e) {
        return e->tty && !e->go && !e->sent_ms && e->chan_fd >= 0;
}

/* Timeouts, kill graces and start bounds, as of now. */
static void vm_deadlines(KeeperCore *core, uint64_t now) {
        VmKeeper *k = keeper_of(core);

        for (size_t i = 0; i < k->n_execs; i++) {
                VmExec *e = k->execs[i];

                /* Its --timeout, or "kill"'s grace, is over: the command's
                 * end, not the VM's: the agent kills its cgroup, and the
                 * EXIT follows. One that exited before (its output waits
                 * for its client) did not time out. */
                while (command_deadline_check(&e->dl, now, e->ss.exited) != COMMAND_DUE_NONE)
                        exec_kill(k, e);
                if (e->ss.kill_sent_ms && now >= e->ss.kill_sent_ms + VM_KILL_GRACE_MS) {
                        /* Its EXIT may wait for its client to read its
                         * output: drop that once. Past that, the guest does
                         * not answer: the VM goes, and the command with it. */
                        if (!e->discarded && vm_session_output_pending(&e->ss)) {
                                e->discarded = true;
                                e->ss.kill_sent_ms = now;
                                vm_session_discard_output(&k->mux, &e->ss);
                        } else
                                vm_lost(k, ETIMEDOUT, "the guest did not end a killed command");
                }
                /* A frozen VM starts nothing: the bound counts from the
                 * thaw. */
                if (e->sent_ms && !e->ss.started && !e->ss.failed && k->core.frozen)
                        e->sent_ms = now;
                else if (e->sent_ms && !e->ss.started && !e->ss.failed &&
                         now >= e->sent_ms + k->v.vm->boot_timeout_ms)
                        vm_lost(k, ETIMEDOUT, "the guest did not start a command");
        }
}

/* Starts the VM with the sandbox's layers and sends its SETUP. */
static int vm_up(VmKeeper *k, char *const *caller_env, HutchError *reterr) {
        _cleanup_free_ char *setup = NULL;
        size_t setup_len = 0;
        VmConfig c;
        int r;

        /* An image's root (vm-image.h): the sandbox's record holds its
         * mark. */
        if (k->core.cfg->policy->image && !k->v.image) {
                r = vm_image_resolve(k->core.cfg->policy, false, &k->v.image, reterr);
                if (r < 0)
                        return r;
        }
        r = vm_run_prepare(&k->v, &c, caller_env, &setup, &setup_len, reterr);
        if (r < 0)
                return r;
        r = vm_layers_open(&k->v, &k->core.cfg->layers, &k->layers, reterr);
        if (r < 0)
                return r;
        /* The listeners before the VM: a port in use fails the start. */
        r = port_forwards_bind(&k->fwd.ports, k->core.cfg->policy->ports, reterr);
        if (r < 0)
                return r;
        vm_layers_configure(&k->layers, &k->v, &c);
        r = vm_start(&c, &k->v.vm, reterr);
        if (r < 0)
                return r;
        r = vm_agent_request(k->v.vm, AGENT_MSG_SETUP, 0, setup, setup_len, AGENT_MSG_READY,
                             reterr);
        if (r < 0)
                return r;
        vm_mux_init(&k->mux, k->v.vm);
        vm_forwards_attach(&k->fwd, &k->mux);
        return 0;
}

/* ---- the backend's ops (backend.h) ---- */

static int vm_keeper_start(KeeperCore *core, char *const *caller_env, HutchError *reterr) {
        VmKeeper *k = keeper_of(core);
        int r;

        r = vm_up(k, caller_env, reterr);
        if (r < 0)
                return r;
        core->sigfd = k->v.sigfd;
        return 0;
}

static void vm_keeper_abort(KeeperCore *core, HutchError *err) {
        VmKeeper *k = keeper_of(core);

        (void)err;
        vm_forwards_done(&k->fwd);
        vm_layers_done(&k->layers);
        vm_run_done(&k->v);
}

/* Down: the commands that run die with the VM (their clients, and the
 * history, get the outcome; one whose EXEC was sent counts as run: it may
 * have started); those that waited for a channel were not run
 * ("stopping": the client starts the sandbox again). */
static void vm_keeper_halt(KeeperCore *core) {
        VmKeeper *k = keeper_of(core);

        /* A frozen QEMU (v1 freezer) would not die of SIGKILL. */
        if (core->frozen && k->v.rc.cgroup) {
                (void)cgroup_set_frozen(k->v.rc.cgroup, false);
                core->frozen = false;
        }
        k->mux.gone = true; /* nothing more is sent to the VM */
        k->v.vm = vm_free(k->v.vm);
        /* The published ports close with the VM. */
        vm_forwards_attach(&k->fwd, NULL);
        vm_forwards_done(&k->fwd);
        while (k->n_execs > 0) {
                VmExec *e = k->execs[0];

                if (!e->sent_ms) {
                        if (e->conn_fd >= 0)
                                (void)keeper_send_json(
                                        e->conn_fd, json_pack("{s:s}", "op", "stopping"), NULL, 0);
                        exec_drop(k, 0);
                        continue;
                }
                if (!e->announced)
                        exec_started(k, e);
                if (!e->ss.exited)
                        e->dl.killed = true;
                exec_finished(k, 0);
        }
        vm_mux_done(&k->mux);
}

/* QEMU, the mounts (with the last descriptor), the cgroup, the run
 * directory. */
static void vm_keeper_release(KeeperCore *core) {
        VmKeeper *k = keeper_of(core);

        k->v.vm = vm_free(k->v.vm);
        vm_forwards_done(&k->fwd);
        vm_layers_done(&k->layers);
        vm_run_done(&k->v);
}

static bool vm_keeper_step(KeeperCore *core) {
        VmKeeper *k = keeper_of(core);

        if (execs_step(k))
                return true;
        vm_forwards_step(&k->fwd);
        if (k->mux.gone || k->mux.error.errnum)
                vm_lost(k, k->mux.error.errnum ? k->mux.error.errnum : EPIPE,
                        k->mux.error.errnum ? k->mux.error.msg : "QEMU is gone");
        return false;
}

/* QEMU's pidfd, the agent's port, then each exec's session. */
static size_t vm_keeper_poll_fill(KeeperCore *core, struct pollfd *pfd) {
        VmKeeper *k = keeper_of(core);
        size_t n = 0;

        pfd[n++] = (struct pollfd){.fd = k->v.vm->pidfd, .events = POLLIN};
        vm_mux_poll_fill(&k->mux, &pfd[n++]);
        k->n_polled = k->n_execs;
        for (size_t i = 0; i < k->n_polled; i++, n += VM_SESSION_NPOLL) {
                vm_session_poll_fill(&k->mux, &k->execs[i]->ss, pfd + n);
                /* Its session polls nothing before its EXEC. */
                if (tty_waits(k->execs[i]))
                        pfd[n] = (struct pollfd){.fd = k->execs[i]->chan_fd, .events = POLLIN};
                /* A terminal has no stderr: that slot is its window-size
                 * changes'. */
                else if (k->execs[i]->tty)
                        pfd[n + 2] = (struct pollfd){.fd = k->execs[i]->watch.fd, .events = POLLIN};
        }
        n += vm_forwards_poll_fill(&k->fwd, pfd + n);
        return n;
}

static void vm_keeper_poll_handle(KeeperCore *core, const struct pollfd *pfd) {
        VmKeeper *k = keeper_of(core);

        if (pfd[0].revents) {
                k->mux.gone = true; /* every session ends with it */
                vm_lost(k, EPIPE, "QEMU is gone");
        }
        vm_mux_poll_handle(&k->mux, &pfd[1]);
        /* The list is as it was filled: only connections change it. */
        for (size_t i = 0; i < k->n_polled; i++) {
                VmExec *e = k->execs[i];
                const struct pollfd *p = pfd + 2 + i * VM_SESSION_NPOLL;

                if (tty_waits(e)) {
                        if (p[0].revents)
                                tty_go(e);
                        continue;
                }
                if (e->tty) {
                        struct pollfd q[VM_SESSION_NPOLL];

                        /* A resize comes before the keys typed after it. */
                        if ((p[2].revents && vm_tty_watch_drain(&e->watch)) || p[0].revents)
                                tty_sync_size(k, e);
                        memcpy(q, p, sizeof(q));
                        q[2].revents = 0;
                        vm_session_poll_handle(&k->mux, &e->ss, q);
                        continue;
                }
                vm_session_poll_handle(&k->mux, &e->ss, p);
        }
        vm_forwards_poll_handle(&k->fwd, pfd + 2 + k->n_polled * VM_SESSION_NPOLL);
}

/* Paused for @by ms: the VM stood still (QEMU's cgroup frozen), so its
 * commands' timeouts, kill graces and start bounds move on by that. */
static void vm_deadlines_shift(KeeperCore *core, uint64_t by) {
        VmKeeper *k = keeper_of(core);

        for (size_t i = 0; i < k->n_execs; i++) {
                VmExec *e = k->execs[i];

                command_deadline_shift(&e->dl, by);
                if (e->ss.kill_sent_ms)
                        e->ss.kill_sent_ms += by;
                if (e->sent_ms)
                        e->sent_ms += by;
        }
}

static uint64_t vm_next_deadline(KeeperCore *core) {
        VmKeeper *k = keeper_of(core);
        uint64_t next = UINT64_MAX;

        for (size_t i = 0; i < k->n_execs; i++) {
                const VmExec *e = k->execs[i];

                next = MIN(next, command_deadline_next(&e->dl, e->ss.exited));
                if (e->ss.kill_sent_ms)
                        next = MIN(next, e->ss.kill_sent_ms + VM_KILL_GRACE_MS);
                if (e->sent_ms && !e->ss.started)
                        next = MIN(next, e->sent_ms + k->v.vm->boot_timeout_ms);
        }
        return next;
}

static size_t vm_running(KeeperCore *core) {
        return keeper_of(core)->n_execs;
}

/* A command that has not started yet gets nothing. */
static void vm_signal(KeeperCore *core, uint64_t id, int sig) {
        VmKeeper *k = keeper_of(core);
        size_t i = exec_find(k, id);

        if (i != SIZE_MAX)
                vm_session_signal(&k->mux, &k->execs[i]->ss, sig);
}

/* QEMU's host cgroup: the guest stops as a whole. */
static ProxyProcess *vm_proxy(KeeperCore *core) {
        return &keeper_of(core)->v.proxy;
}

static PortForwards *vm_ports(KeeperCore *core) {
        return &keeper_of(core)->fwd.ports;
}

static Cgroup *vm_freeze_cgroup(KeeperCore *core) {
        return keeper_of(core)->v.rc.cgroup;
}

static const SandboxBackendOps vm_ops = {
        .start = vm_keeper_start,
        .abort = vm_keeper_abort,
        .halt = vm_keeper_halt,
        .release = vm_keeper_release,
        .step = vm_keeper_step,
        .poll_fill = vm_keeper_poll_fill,
        .poll_handle = vm_keeper_poll_handle,
        .next_deadline = vm_next_deadline,
        .deadlines = vm_deadlines,
        .deadlines_shift = vm_deadlines_shift,
        .running = vm_running,
        .exec = exec_request,
        .file = file_request,
        .signal = vm_signal,
        .abandon = exec_abandon,
        .proxy = vm_proxy,
        .ports = vm_ports,
        .freeze_cgroup = vm_freeze_cgroup,
        .table = {.row = table_row, .kill = table_kill, .stdin = table_stdin},
};

int sandbox_keep_vm(const KeeperConfig *cfg, char *const *caller_env, HutchError *reterr) {
        _cleanup_free_ VmKeeper *k = calloc(1, sizeof(VmKeeper));

        if (!k) {
                HutchError err = {};
                int r = hutch_error_set(&err, ENOMEM, "out of memory");

                keeper_report_ready(cfg->ready_fd, &err);
                if (reterr)
                        *reterr = err;
                return r;
        }
        k->core = (KeeperCore){
                .cfg = cfg, .ops = &vm_ops, .next_id = keeper_history_last_id(cfg->history_path)};
        k->v = (VmRun){.policy = cfg->policy,
                       .persistent = true,
                       .id_base = cfg->layers.id_base,
                       .sigfd = -EBADF,
                       .proxy = PROXY_PROCESS_NULL};
        k->layers = VM_LAYERS_NULL;
        vm_forwards_init(&k->fwd);
        return keeper_core_run(&k->core, caller_env, reterr);
}
