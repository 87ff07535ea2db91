/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The execs of a persistent sandbox as processes (processes.h). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "api/persist.h"
#include "api/processes.h"
#include "fd-util.h"
#include "macro.h"
#include "parse-util.h"
#include "sandbox/exec-table.h"
#include "sandbox/keeper.h"

/* How often a follower looks at the log files when inotify says nothing
 * (it cannot watch them, or a write it missed): a safety net only. */
#define FOLLOW_POLL_MS 1000

int persist_signal_parse(const char *s) {
        uint32_t u;

        if (!s || !*s)
                return -EINVAL;
        if (safe_atou32(s, &u) >= 0)
                return u > 0 && u < (unsigned)NSIG ? (int)u : -EINVAL;
        if (strncasecmp(s, "SIG", 3) == 0)
                s += 3;
        for (int i = 1; i < NSIG; i++) {
                const char *n = sigabbrev_np(i);

                if (n && strcasecmp(n, s) == 0)
                        return i;
        }
        return -EINVAL;
}

/* The sandbox's record (a name or an id) and a connection to its running
 * keeper (-EBADF in @ret_sock when it is stopped). */
static int open_sandbox(Store *s, const char *name, SandboxRecord **ret_rec, int *ret_sock,
                        HutchError *reterr) {
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        int r, sock = -EBADF;

        r = store_sandbox_load(s, name, &rec, reterr);
        if (r < 0)
                return r;
        r = persist_connect(s, rec->name, false, &sock, NULL);
        if (r < 0 && r != -ENOENT && r != -ECONNREFUSED)
                return hutch_error_set(reterr, -r, "cannot reach sandbox '%s': %s", rec->name,
                                       strerror(-r));
        *ret_rec = TAKE_PTR(rec);
        *ret_sock = r < 0 ? -EBADF : sock;
        return 0;
}

/* A keeper's {"op":"error","message":S,"errno":E}: its errno with its
 * message, naming the sandbox. */
static int refusal(json_t *ans, const char *sandbox, HutchError *reterr) {
        json_t *e = json_object_get(ans, "errno");
        const char *msg = json_string_value(json_object_get(ans, "message"));
        int err = json_is_integer(e) && json_integer_value(e) > 0 && json_integer_value(e) < 4096
                          ? (int)json_integer_value(e)
                          : EPERM;

        return hutch_error_set(reterr, err, "sandbox '%s': %s", sandbox, msg ? msg : "refused");
}

/* Sends @req (consumed) and reads the first answer (and up to two fds).
 * A refusal is its errno with its message, naming the sandbox. */
static int ask(int sock, const char *sandbox, json_t *req, json_t **ret, int fds[2],
               HutchError *reterr) {
        json_t *ans = NULL;
        const char *op;
        int r;

        r = keeper_send_json(sock, req, NULL, 0);
        if (r < 0)
                return hutch_error_set(reterr, -r, "failed to talk to sandbox '%s''s keeper: %s",
                                       sandbox, strerror(-r));
        r = keeper_recv_json(sock, &ans, fds, fds ? 2 : 0);
        if (r <= 0)
                return hutch_error_set(reterr, r == 0 ? EPIPE : -r,
                                       "sandbox '%s''s keeper did not answer", sandbox);
        op = json_string_value(json_object_get(ans, "op"));
        if (op && strcmp(op, "error") == 0) {
                r = refusal(ans, sandbox, reterr);
                json_decref(ans);
                return r;
        }
        *ret = ans;
        return 0;
}

/* Reads an outcome message on @sock (blocking): 0 with its exit code and
 * JSON, or -errno (a refusal's). */
static int read_outcome(int sock, const char *sandbox, int *ret_exit_code, char **ret_json,
                        HutchError *reterr) {
        json_t *ans = NULL, *code;
        const char *op;
        int r;

        r = keeper_recv_json(sock, &ans, NULL, 0);
        if (r <= 0)
                return hutch_error_set(reterr, r == 0 ? EPIPE : -r,
                                       "sandbox '%s' stopped before the exec ended", sandbox);
        op = json_string_value(json_object_get(ans, "op"));
        code = json_object_get(ans, "exit_code");
        r = 0;
        if (op && strcmp(op, "error") == 0)
                r = refusal(ans, sandbox, reterr);
        else if (!op || strcmp(op, "outcome") != 0 || !json_is_integer(code))
                r = hutch_error_set(reterr, EPROTO, "unexpected answer from sandbox '%s''s keeper",
                                    sandbox);
        else if (ret_json && !(*ret_json = json_dumps(json_object_get(ans, "outcome"),
                                                      JSON_COMPACT | JSON_ENCODE_ANY)))
                r = hutch_error_set(reterr, ENOMEM, "out of memory");
        else if (ret_exit_code)
                *ret_exit_code = (int)json_integer_value(code);
        json_decref(ans);
        return r;
}

/* A stopped sandbox's exec @id, from its history: 0 with its outcome, or
 * -ENOENT named. */
static int history_outcome(Store *s, const SandboxRecord *rec, uint64_t id, int *ret_exit_code,
                           char **ret_json, HutchError *reterr) {
        _cleanup_free_ char *path = NULL;
        int r;

        if (store_sandbox_path(s, rec->name, "history.jsonl", &path) < 0)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        r = exec_history_find(path, id, ret_exit_code, ret_json);
        if (r == -ENOENT)
                return hutch_error_set(reterr, ENOENT, "sandbox '%s': there is no exec %llu",
                                       rec->name, (unsigned long long)id);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot read sandbox '%s''s history: %s",
                                       rec->name, strerror(-r));
        return 0;
}

int persist_exec_list(Store *s, const char *name, char **ret_json, HutchError *reterr) {
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        _cleanup_close_ int sock = -EBADF;
        json_t *ans = NULL;
        char *text;
        int r;

        r = open_sandbox(s, name, &rec, &sock, reterr);
        if (r < 0)
                return r;
        if (sock < 0)
                text = strdup("[]");
        else {
                r = ask(sock, rec->name, json_pack("{s:s}", "op", "list"), &ans, NULL, reterr);
                if (r < 0)
                        return r;
                text = json_dumps(json_object_get(ans, "execs"), JSON_COMPACT | JSON_ENCODE_ANY);
                json_decref(ans);
        }
        if (!text)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        *ret_json = text;
        return 0;
}

/* A stopped sandbox runs nothing: exec @id ended (ESRCH naming its exit
 * status), or is unknown (history_outcome()'s error). */
static int exec_ended(Store *s, const SandboxRecord *rec, uint64_t id, HutchError *reterr) {
        int code = 0, r;

        r = history_outcome(s, rec, id, &code, NULL, reterr);
        if (r < 0)
                return r;
        return hutch_error_set(reterr, ESRCH, "sandbox '%s': exec %llu has already ended (exit %d)",
                               rec->name, (unsigned long long)id, code);
}

int persist_exec_kill(Store *s, const char *name, uint64_t id, int sig, uint64_t grace_ms,
                      bool wait, int *ret_exit_code, char **ret_json, HutchError *reterr) {
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        _cleanup_close_ int sock = -EBADF;
        json_t *ans = NULL;
        int r;

        if (sig <= 0 || sig >= NSIG || grace_ms > EXEC_KILL_GRACE_MAX_MS || id == 0 ||
            id > INT64_MAX)
                return hutch_error_set(reterr, EINVAL, "invalid kill request");
        r = open_sandbox(s, name, &rec, &sock, reterr);
        if (r < 0)
                return r;
        if (sock < 0) {
                return exec_ended(s, rec, id, reterr);
        }
        r = ask(sock, rec->name,
                json_pack("{s:s,s:I,s:i,s:I}", "op", "kill", "id", (json_int_t)id, "signal", sig,
                          "grace_ms", (json_int_t)grace_ms),
                &ans, NULL, reterr);
        if (r < 0)
                return r;
        json_decref(ans);
        if (!wait)
                return 0;
        return read_outcome(sock, rec->name, ret_exit_code, ret_json, reterr);
}

/* Writes all of @data to the pipe @fd (non-blocking), waiting for room up
 * to PERSIST_STDIN_TIMEOUT_MS in all. SIGPIPE is blocked meanwhile (and
 * one it raised is taken): a command that closed its end is -EPIPE, not
 * the end of the caller. */
static int write_stdin(int fd, const char *data, size_t len) {
        uint64_t waited = 0;
        sigset_t pipe_set, old;
        int r = 0;

        sigemptyset(&pipe_set);
        sigaddset(&pipe_set, SIGPIPE);
        (void)pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
        while (len > 0) {
                ssize_t n = write(fd, data, len);

                if (n > 0) {
                        data += n;
                        len -= (size_t)n;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN && waited < PERSIST_STDIN_TIMEOUT_MS) {
                        struct pollfd p = {.fd = fd, .events = POLLOUT};

                        if (poll(&p, 1, 100) < 0 && errno != EINTR) {
                                r = -errno;
                                break;
                        }
                        waited += 100;
                        continue;
                }
                r = n < 0 && errno != EAGAIN ? -errno : -ETIMEDOUT;
                break;
        }
        if (r == -EPIPE && !sigismember(&old, SIGPIPE)) {
                struct timespec zero = {};

                (void)sigtimedwait(&pipe_set, NULL, &zero);
        }
        (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
        return r;
}

int persist_exec_stdin(Store *s, const char *name, uint64_t id, const void *data, size_t len,
                       bool close_it, HutchError *reterr) {
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        _cleanup_close_ int sock = -EBADF, pipe_fd = -EBADF;
        int fds[2] = {-EBADF, -EBADF}, r;
        json_t *ans = NULL;

        if (id == 0 || id > INT64_MAX)
                return hutch_error_set(reterr, EINVAL, "invalid exec id");
        r = open_sandbox(s, name, &rec, &sock, reterr);
        if (r < 0)
                return r;
        if (sock < 0) {
                return exec_ended(s, rec, id, reterr);
        }
        if (len > 0 || !close_it) {
                r = ask(sock, rec->name,
                        json_pack("{s:s,s:I}", "op", "stdin", "id", (json_int_t)id), &ans, fds,
                        reterr);
                if (r < 0)
                        return r;
                json_decref(ans);
                pipe_fd = fds[0];
                (void)safe_close(fds[1]);
                if (pipe_fd < 0)
                        return hutch_error_set(reterr, EPROTO,
                                               "sandbox '%s''s keeper sent no stdin pipe",
                                               rec->name);
                if (fcntl(pipe_fd, F_SETFL, O_NONBLOCK) < 0)
                        return hutch_error_set(reterr, errno, "fcntl: %m");
                r = write_stdin(pipe_fd, data, len);
                if (r == -EPIPE)
                        return hutch_error_set(reterr, EPIPE,
                                               "sandbox '%s': exec %llu closed its input",
                                               rec->name, (unsigned long long)id);
                if (r < 0)
                        return hutch_error_set(reterr, -r,
                                               "sandbox '%s': exec %llu did not take its input: %s",
                                               rec->name, (unsigned long long)id, strerror(-r));
                pipe_fd = safe_close(pipe_fd);
        }
        if (!close_it)
                return 0;
        /* One request per connection: a new one for the close. */
        sock = safe_close(sock);
        r = persist_connect(s, rec->name, false, &sock, NULL);
        if (r < 0)
                return hutch_error_set(reterr, ESRCH, "sandbox '%s': exec %llu has already ended",
                                       rec->name, (unsigned long long)id);
        r = ask(sock, rec->name,
                json_pack("{s:s,s:I,s:b}", "op", "stdin", "id", (json_int_t)id, "close", true),
                &ans, NULL, reterr);
        if (r < 0)
                return r;
        json_decref(ans);
        return 0;
}

int persist_exec_wait(Store *s, const char *name, uint64_t id, int *ret_exit_code, char **ret_json,
                      HutchError *reterr) {
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        _cleanup_close_ int sock = -EBADF;
        int r;

        if (id == 0 || id > INT64_MAX)
                return hutch_error_set(reterr, EINVAL, "invalid exec id");
        r = open_sandbox(s, name, &rec, &sock, reterr);
        if (r < 0)
                return r;
        if (sock < 0)
                return history_outcome(s, rec, id, ret_exit_code, ret_json, reterr);
        r = keeper_send_json(sock, json_pack("{s:s,s:I}", "op", "wait", "id", (json_int_t)id), NULL,
                             0);
        if (r < 0)
                return hutch_error_set(reterr, -r, "failed to talk to sandbox '%s''s keeper: %s",
                                       rec->name, strerror(-r));
        return read_outcome(sock, rec->name, ret_exit_code, ret_json, reterr);
}

/* Copies what @from has past its offset to @to. 0, or -EPIPE when @to
 * took no more. */
static int copy_new(int from, int to) {
        char buf[65536];

        for (;;) {
                ssize_t n = read(from, buf, sizeof(buf));

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return 0;
                if (loop_write(to, buf, (size_t)n) < 0)
                        return -EPIPE;
        }
}

static int copy_both(const int fds[2], int out_fd, int err_fd) {
        int r = copy_new(fds[0], out_fd);

        if (r >= 0)
                r = copy_new(fds[1], err_fd);
        return r;
}

/* Follows the log files @fds until the outcome comes on @sock (or it
 * closes). */
static int follow(int sock, const int fds[2], int out_fd, int err_fd) {
        _cleanup_close_ int ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
        int r;

        for (size_t i = 0; ino >= 0 && i < 2; i++) {
                char path[64];

                (void)snprintf(path, sizeof(path), "/proc/self/fd/%d", fds[i]);
                (void)inotify_add_watch(ino, path, IN_MODIFY);
        }
        for (;;) {
                struct pollfd p[2] = {{.fd = sock, .events = POLLIN},
                                      {.fd = ino, .events = POLLIN}};

                if (poll(p, 2, FOLLOW_POLL_MS) < 0 && errno != EINTR)
                        return -errno;
                if (p[1].revents) {
                        char buf[4096];

                        while (read(ino, buf, sizeof(buf)) > 0)
                                ;
                }
                r = copy_both(fds, out_fd, err_fd);
                if (r < 0)
                        return r;
                /* The outcome (or a keeper gone): the logs are whole. */
                if (p[0].revents)
                        return copy_both(fds, out_fd, err_fd);
        }
}

/* A stopped sandbox's log files of exec @id. */
static int open_stopped_logs(Store *s, SandboxRecord *rec, uint64_t id, int fds[2],
                             HutchError *reterr) {
        _cleanup_free_ char *dir = NULL;
        _cleanup_close_ int hold = -EBADF, dir_fd = -EBADF;
        int r;

        if (rec->disk_limit != 0) {
                /* In its disk image, with data/. */
                r = persist_data_open(s, rec, false, &hold, reterr);
                if (r < 0)
                        return r;
                r = store_sandbox_data_path(s, rec, "logs", &dir);
        } else
                r = store_sandbox_path(s, rec->name, "logs", &dir);
        if (r < 0)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        r = dir_fd < 0 ? -errno : exec_log_open_read_at(dir_fd, id, fds);
        if (r >= 0)
                return 0;
        r = history_outcome(s, rec, id, NULL, NULL, reterr);
        if (r < 0)
                return r;
        return hutch_error_set(reterr, ENOENT,
                               "sandbox '%s': exec %llu has no output log (it was not detached)",
                               rec->name, (unsigned long long)id);
}

int persist_exec_output(Store *s, const char *name, uint64_t id, bool follow_it, int out_fd,
                        int err_fd, HutchError *reterr) {
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        _cleanup_close_ int sock = -EBADF;
        int fds[2] = {-EBADF, -EBADF};
        bool running = false;
        int r;

        if (id == 0 || id > INT64_MAX)
                return hutch_error_set(reterr, EINVAL, "invalid exec id");
        r = open_sandbox(s, name, &rec, &sock, reterr);
        if (r < 0)
                return r;
        if (sock >= 0) {
                json_t *ans = NULL;

                r = ask(sock, rec->name,
                        json_pack("{s:s,s:I,s:b}", "op", "output", "id", (json_int_t)id, "follow",
                                  follow_it),
                        &ans, fds, reterr);
                if (r < 0)
                        return r;
                running = json_is_true(json_object_get(ans, "running"));
                json_decref(ans);
                if (fds[0] < 0 || fds[1] < 0) {
                        (void)safe_close(fds[0]);
                        (void)safe_close(fds[1]);
                        return hutch_error_set(reterr, EPROTO,
                                               "sandbox '%s''s keeper sent no log files",
                                               rec->name);
                }
        } else {
                r = open_stopped_logs(s, rec, id, fds, reterr);
                if (r < 0)
                        return r;
        }
        r = copy_both(fds, out_fd, err_fd);
        if (r >= 0 && follow_it && running)
                r = follow(sock, fds, out_fd, err_fd);
        (void)safe_close(fds[0]);
        (void)safe_close(fds[1]);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot write exec %llu's output: %s",
                                       (unsigned long long)id, strerror(-r));
        return 0;
}
