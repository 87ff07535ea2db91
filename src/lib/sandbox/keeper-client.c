/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The client side of the keeper's control protocol (keeper.h): what
 * `hutch exec`, the C API, `hutch serve` and `hutch mcp` send to the
 * keeper of a running persistent sandbox, whatever its backend. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fd-util.h"
#include "file-op.h"
#include "macro.h"
#include "sandbox/keeper-toolkit.h"
#include "sandbox/keeper.h"

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
        json_int_t e = json_integer_value(json_object_get(ans, "errno"));

        /* A refusal is -EPERM unless the keeper named its reason
         * (keeper_send_refusal(): busy, or no freezer). */
        if (op && strcmp(op, "error") == 0)
                return hutch_error_set(reterr, e == EBUSY || e == EOPNOTSUPP ? (int)e : EPERM,
                                       "the sandbox refused: %s", msg ? msg : "no reason given");
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
        if (o && req->stdin_pipe && json_object_set_new(o, "stdin_pipe", json_true()) < 0) {
                json_decref(o);
                return NULL;
        }
        if (o && req->tty && json_object_set_new(o, "tty", json_true()) < 0) {
                json_decref(o);
                return NULL;
        }
        if (o && req->user && json_object_set_new(o, "user", json_string(req->user)) < 0) {
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
        if (obj && req->user && json_object_set_new(obj, "user", json_string(req->user)) < 0) {
                json_decref(obj);
                obj = NULL;
        }
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
