/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The running execs of a keeper as clients see them, and the bounded log
 * files of detached execs (exec-table.h, docs/processes.md). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "sandbox/exec-table.h"
#include "sandbox/keeper-toolkit.h"

/* The history is read whole; it grows by a line per exec. */
#define EXEC_HISTORY_READ_MAX (256U << 20)

bool exec_table_op(const char *op) {
        return strcmp(op, "list") == 0 || strcmp(op, "kill") == 0 || strcmp(op, "wait") == 0 ||
               strcmp(op, "output") == 0 || strcmp(op, "stdin") == 0;
}

static void send_refusal(int fd, int err, const char *fmt, ...) _printf_(3, 4);
static void send_refusal(int fd, int err, const char *fmt, ...) {
        char msg[256];
        va_list ap;

        va_start(ap, fmt);
        (void)vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        keeper_send_refusal(fd, err, msg);
}

int exec_history_find(const char *path, uint64_t id, int *ret_exit_code, char **ret_outcome_json) {
        _cleanup_free_ char *text = NULL;
        int r;

        if (!path)
                return -ENOENT;
        r = read_full_file(path, EXEC_HISTORY_READ_MAX, &text);
        if (r < 0)
                return r;
        /* The last line of that id wins (ids are never reused; a damaged
         * line is skipped). */
        for (char *line = text, *next; line && *line; line = next) {
                json_t *j, *o, *code;

                next = strchr(line, '\n');
                if (next)
                        *next++ = '\0';
                j = json_loads(line, 0, NULL);
                if (!json_is_object(j) || !json_is_integer(json_object_get(j, "id")) ||
                    (uint64_t)json_integer_value(json_object_get(j, "id")) != id) {
                        json_decref(j);
                        continue;
                }
                o = json_object_get(j, "outcome");
                code = json_object_get(o, "exit_code");
                if (ret_outcome_json) {
                        char *s = json_dumps(o, JSON_COMPACT | JSON_ENCODE_ANY);

                        if (!s) {
                                json_decref(j);
                                return -ENOMEM;
                        }
                        *ret_outcome_json = s;
                }
                if (ret_exit_code)
                        *ret_exit_code = json_is_integer(code) ? (int)json_integer_value(code) : -1;
                json_decref(j);
                return 0;
        }
        return -ENOENT;
}

static bool find_row(const ExecTableOps *ops, void *keeper, uint64_t id, ExecRow *ret) {
        ExecRow row;

        for (size_t i = 0; ops->row(keeper, i, &row); i++)
                if (row.id == id) {
                        if (ret)
                                *ret = row;
                        return true;
                }
        return false;
}

static int answer_list(const ExecTableOps *ops, void *keeper, KeeperConn *c) {
        json_t *arr = json_array();
        ExecRow row;

        if (!arr) {
                send_refusal(c->fd, ENOMEM, "out of memory");
                return -ENOMEM;
        }
        for (size_t i = 0; ops->row(keeper, i, &row); i++) {
                json_t *argv = row.argv_json ? json_loads(row.argv_json, 0, NULL) : json_array();

                (void)json_array_append_new(
                        arr, json_pack("{s:I,s:o,s:I,s:I,s:b}", "id", (json_int_t)row.id, "argv",
                                       argv ? argv : json_array(), "start_ms",
                                       (json_int_t)row.start_wall_ms, "pid", (json_int_t)row.pid,
                                       "detached", row.detached));
        }
        (void)keeper_send_json(c->fd, json_pack("{s:s,s:o}", "op", "ok", "execs", arr), NULL, 0);
        return -ECONNRESET; /* done with this connection */
}

/* The answer for exec @id that does not run (@op: kill, wait or output). */
static int answer_not_running(const KeeperConfig *cfg, KeeperConn *c, uint64_t id, const char *op) {
        _cleanup_free_ char *outcome = NULL;
        int exit_code = 0, r;

        r = exec_history_find(cfg->history_path, id, &exit_code, &outcome);
        if (r < 0 && strcmp(op, "output") != 0) {
                send_refusal(c->fd, ENOENT, "there is no exec %llu", (unsigned long long)id);
                return -ECONNRESET;
        }
        if (strcmp(op, "kill") == 0 || strcmp(op, "stdin") == 0) {
                send_refusal(c->fd, ESRCH, "exec %llu has already ended (exit %d)",
                             (unsigned long long)id, exit_code);
                return -ECONNRESET;
        }
        if (strcmp(op, "wait") == 0) {
                (void)keeper_send_outcome(c->fd, exit_code, outcome);
                return -ECONNRESET;
        }
        /* output */
        {
                _cleanup_close_ int dir = open(cfg->logs_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                int fds[2];

                r = dir < 0 ? -errno : exec_log_open_read_at(dir, id, fds);
                if (r < 0) {
                        if (outcome)
                                send_refusal(c->fd, ENOENT,
                                             "exec %llu has no output log (it was not detached)",
                                             (unsigned long long)id);
                        else
                                send_refusal(c->fd, ENOENT, "there is no exec %llu",
                                             (unsigned long long)id);
                        return -ECONNRESET;
                }
                (void)keeper_send_json(c->fd, json_pack("{s:s,s:b}", "op", "ok", "running", false),
                                       fds, 2);
                (void)close(fds[0]);
                (void)close(fds[1]);
                return -ECONNRESET;
        }
}

int exec_table_handle(const ExecTableOps *ops, void *keeper, const KeeperConfig *cfg, KeeperConn *c,
                      json_t *req, const char *op) {
        json_t *id_j = json_object_get(req, "id");
        bool follow = json_is_true(json_object_get(req, "follow"));
        ExecRow row;
        uint64_t id;

        if (strcmp(op, "list") == 0)
                return answer_list(ops, keeper, c);
        if (!json_is_integer(id_j) || json_integer_value(id_j) <= 0) {
                send_refusal(c->fd, EINVAL, "malformed %s request (want an exec id)", op);
                return -EINVAL;
        }
        id = (uint64_t)json_integer_value(id_j);
        if (!find_row(ops, keeper, id, &row))
                return answer_not_running(cfg, c, id, op);

        if (strcmp(op, "stdin") == 0) {
                bool close_it = json_is_true(json_object_get(req, "close"));
                int fd = -EBADF, r;

                r = ops->stdin ? ops->stdin(keeper, id, close_it, &fd) : -EOPNOTSUPP;
                if (r == -ENOTCONN)
                        send_refusal(c->fd, ENOTCONN,
                                     "exec %llu takes no input (it was not started with its "
                                     "stdin open, or its stdin was closed)",
                                     (unsigned long long)id);
                else if (r < 0)
                        send_refusal(c->fd, -r, "cannot give exec %llu its input: %s",
                                     (unsigned long long)id, strerror(-r));
                else
                        (void)keeper_send_json(c->fd, json_pack("{s:s}", "op", "ok"),
                                               fd >= 0 ? &fd : NULL, fd >= 0 ? 1 : 0);
                (void)safe_close(fd);
                return -ECONNRESET;
        }
        if (strcmp(op, "kill") == 0) {
                json_t *sig_j = json_object_get(req, "signal");
                json_t *grace_j = json_object_get(req, "grace_ms");
                int sig = keeper_request_signal(req);
                uint64_t grace = EXEC_KILL_GRACE_DEFAULT_MS;

                if (!sig_j)
                        sig = SIGTERM;
                if (grace_j && (!json_is_integer(grace_j) || json_integer_value(grace_j) < 0 ||
                                (uint64_t)json_integer_value(grace_j) > EXEC_KILL_GRACE_MAX_MS))
                        sig = 0;
                if (sig <= 0) {
                        send_refusal(c->fd, EINVAL, "malformed kill request");
                        return -EINVAL;
                }
                if (grace_j)
                        grace = (uint64_t)json_integer_value(grace_j);
                ops->kill(keeper, id, sig, sig == SIGKILL ? 0 : grace);
                (void)keeper_send_json(c->fd, json_pack("{s:s}", "op", "ok"), NULL, 0);
        } else if (strcmp(op, "output") == 0) {
                _cleanup_close_ int dir = open(cfg->logs_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                int fds[2], r;

                r = dir < 0 ? -errno : exec_log_open_read_at(dir, id, fds);
                if (r < 0 || !row.detached) {
                        if (r >= 0) {
                                (void)close(fds[0]);
                                (void)close(fds[1]);
                        }
                        send_refusal(c->fd, ENOENT,
                                     "exec %llu has no output log (it was not detached)",
                                     (unsigned long long)id);
                        return -ECONNRESET;
                }
                (void)keeper_send_json(c->fd, json_pack("{s:s,s:b}", "op", "ok", "running", true),
                                       fds, 2);
                (void)close(fds[0]);
                (void)close(fds[1]);
                if (!follow)
                        return -ECONNRESET;
        }
        /* kill, wait, output with follow: the outcome comes when it ends. */
        c->kind = KEEPER_CONN_WAIT;
        c->exec_id = id;
        return 0;
}

void exec_table_finished(KeeperConns *conns, uint64_t id, int exit_code, const char *outcome_json) {
        for (size_t i = 0; i < conns->n;) {
                KeeperConn *c = &conns->conns[i];

                if (c->kind != KEEPER_CONN_WAIT || c->exec_id != id) {
                        i++;
                        continue;
                }
                (void)keeper_send_outcome(c->fd, exit_code, outcome_json);
                keeper_conn_remove(conns, c); /* the last one takes its place */
        }
}

/* ---- log files ---- */

int exec_table_stdin_pipe(int *stdin_w, bool close, int *ret_fd) {
        int fd;

        if (!stdin_w || *stdin_w < 0)
                return -ENOTCONN;
        if (close) {
                *stdin_w = safe_close(*stdin_w);
                return 0;
        }
        fd = fcntl(*stdin_w, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
                return negative_errno();
        *ret_fd = fd;
        return 0;
}

static int log_path(const char *logs_dir, uint64_t id, const char *ext, char *buf, size_t size) {
        int n = snprintf(buf, size, "%s/exec-%llu.%s", logs_dir, (unsigned long long)id, ext);

        return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

int exec_log_open_files(const char *logs_dir, uint64_t id, int ret_fds[2]) {
        static const char *const ext[2] = {"out", "err"};
        int fds[2] = {-EBADF, -EBADF};
        char path[4096];
        int r = 0;

        for (size_t i = 0; i < 2 && r >= 0; i++) {
                r = log_path(logs_dir, id, ext[i], path, sizeof(path));
                if (r < 0)
                        break;
                fds[i] = open(path,
                              O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW |
                                      O_NOCTTY,
                              0600);
                if (fds[i] < 0)
                        r = -errno;
        }
        if (r < 0) {
                (void)safe_close(fds[0]);
                (void)safe_close(fds[1]);
                return r;
        }
        ret_fds[0] = fds[0];
        ret_fds[1] = fds[1];
        return 0;
}

int exec_log_create(const char *logs_dir, uint64_t id, ExecLogPipe ret_pipes[2], int ret_write[2]) {
        int files[2], p[2][2] = {{-EBADF, -EBADF}, {-EBADF, -EBADF}};
        int r;

        r = exec_log_open_files(logs_dir, id, files);
        if (r < 0)
                return r;
        for (size_t i = 0; i < 2 && r >= 0; i++) {
                if (pipe2(p[i], O_CLOEXEC) < 0 ||
                    fcntl(p[i][0], F_SETFL, fcntl(p[i][0], F_GETFL) | O_NONBLOCK) < 0)
                        r = -errno;
        }
        if (r < 0) {
                for (size_t i = 0; i < 2; i++) {
                        (void)safe_close(files[i]);
                        (void)safe_close(p[i][0]);
                        (void)safe_close(p[i][1]);
                }
                return r;
        }
        for (size_t i = 0; i < 2; i++) {
                ret_pipes[i] = (ExecLogPipe){.in_fd = p[i][0], .file_fd = files[i]};
                ret_write[i] = p[i][1];
        }
        return 0;
}

int exec_log_open_read_at(int dir_fd, uint64_t id, int ret_fds[2]) {
        static const char *const ext[2] = {"out", "err"};
        int fds[2] = {-EBADF, -EBADF};
        char name[64];

        for (size_t i = 0; i < 2; i++) {
                (void)snprintf(name, sizeof(name), "exec-%llu.%s", (unsigned long long)id, ext[i]);
                fds[i] = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
                if (fds[i] < 0)
                        break;
        }
        if (fds[0] < 0 || fds[1] < 0) {
                (void)safe_close(fds[0]);
                (void)safe_close(fds[1]);
                /* COMPAT(hutch < processes): one log of both streams. */
                (void)snprintf(name, sizeof(name), "exec-%llu.log", (unsigned long long)id);
                fds[0] = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
                if (fds[0] < 0)
                        return -errno;
                fds[1] = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (fds[1] < 0) {
                        (void)safe_close(fds[0]);
                        return -errno;
                }
        }
        ret_fds[0] = fds[0];
        ret_fds[1] = fds[1];
        return 0;
}

int exec_log_pump(ExecLogPipe *p) {
        char buf[65536];
        ssize_t n;

        if (p->in_fd < 0)
                return 0;
        n = read(p->in_fd, buf, sizeof(buf));
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 1;
        if (n <= 0) {
                p->in_fd = safe_close(p->in_fd);
                p->file_fd = safe_close(p->file_fd);
                return 0;
        }
        if (p->file_fd >= 0 && p->written < EXEC_LOG_STREAM_MAX) {
                size_t keep = MIN((size_t)n, (size_t)(EXEC_LOG_STREAM_MAX - p->written));

                /* A full disk (the sandbox's limit) loses the rest, as the
                 * command's own writes there would. */
                if (loop_write(p->file_fd, buf, keep) < 0)
                        p->file_fd = safe_close(p->file_fd);
                p->written += keep;
                if (keep < (size_t)n)
                        p->truncated = true;
        } else
                p->truncated = true;
        return 1;
}

void exec_log_pipe_done(ExecLogPipe *p) {
        /* Bounded: a writer still alive (it is being killed) cannot keep
         * the keeper here; what the pipe holds now is kept. */
        for (unsigned i = 0; i < 256 && p->in_fd >= 0; i++) {
                int avail = 0;

                if (ioctl(p->in_fd, FIONREAD, &avail) < 0 || avail == 0)
                        break;
                if (exec_log_pump(p) == 0)
                        break;
        }
        p->in_fd = safe_close(p->in_fd);
        p->file_fd = safe_close(p->file_fd);
}
