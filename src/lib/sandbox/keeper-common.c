/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the keeper's loop (keeper-loop.c) and the two backends' ops
 * (keeper.c: namespaces; keeper-vm.c: a microVM) share: the control socket
 * and its messages, the exec requests, the history and the audit log's
 * denials. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "fd-util.h"
#include "file-op.h"
#include "macro.h"
#include "parse-util.h"
#include "sandbox/keeper-toolkit.h"
#include "sandbox/keeper.h"
#include "sandbox/sandbox-internal.h"
#include "strv.h"
#include "time-util.h"

/* What an exec's outcome reads of the audit log for its denials. */
#define KEEPER_AUDIT_READ_MAX (1U << 20)

int keeper_send_json(int fd, json_t *obj, const int *fds, size_t n_fds) {
        _cleanup_free_ char *text = json_dumps(obj, JSON_COMPACT);

        json_decref(obj);
        if (!text)
                return -ENOMEM;
        if (strlen(text) > KEEPER_MSG_MAX)
                return -EMSGSIZE;
        return send_with_fds(fd, text, strlen(text), fds, n_fds);
}

void keeper_send_error(int fd, const char *msg) {
        (void)keeper_send_json(fd, json_pack("{s:s,s:s}", "op", "error", "message", msg), NULL, 0);
}

void keeper_send_refusal(int fd, int err, const char *msg) {
        (void)keeper_send_json(
                fd, json_pack("{s:s,s:s,s:i}", "op", "error", "message", msg, "errno", err), NULL,
                0);
}

/* Receives one JSON object (and up to @max_fds fds). Returns 1, 0 on EOF,
 * or -errno (-EBADMSG for anything but a JSON object). */
int keeper_recv_json(int fd, json_t **ret, int *fds, size_t max_fds) {
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

off_t keeper_audit_size(const Policy *p) {
        struct stat st;

        if (!p->audit_log || stat(p->audit_log, &st) < 0)
                return 0;
        return st.st_size;
}

/* The proxy's denials logged while the exec ran, as the proxy's summary
 * lists them ([{host, port, reason, count}]): the keeper's proxy outlives
 * each exec, so they come from the audit log (bounded read). Execs that ran
 * at the same time share what was logged meanwhile. */
char *keeper_denials(const Policy *p, off_t audit_start) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        json_t *denied = json_array();
        char *out;
        ssize_t n;

        if (!denied)
                return NULL;
        if (p->audit_log)
                fd = open(p->audit_log, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        buf = fd >= 0 ? malloc(KEEPER_AUDIT_READ_MAX + 1) : NULL;
        n = buf ? pread(fd, buf, KEEPER_AUDIT_READ_MAX, audit_start) : 0;
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

int keeper_strings_from_json(json_t *arr, bool allow_missing, char ***ret) {
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
int keeper_exec_env(char *const *base, char *const *extra, char ***ret) {
        _cleanup_strv_free_ char **env = strv_copy((char **)base);
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

json_t *keeper_strv_to_json(char *const *l) {
        json_t *arr = json_array();

        STRV_FOREACH(s, (char **)l)
                if (arr && json_array_append_new(arr, json_string(*s)) < 0) {
                        json_decref(arr);
                        return NULL;
                }
        return arr;
}

int keeper_listen_socket(const char *path, HutchError *reterr) {
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

void keeper_report_ready(int fd, const HutchError *err) {
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

/* Exec ids go on from the history's last line across restarts. */
uint64_t keeper_history_last_id(const char *path) {
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
void keeper_scrub_secrets(const Policy *p, char *const *env) {
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

void keeper_history_append(const char *path, const KeeperHistoryEntry *e,
                           const char *outcome_json) {
        _cleanup_free_ char *line = NULL;
        _cleanup_close_ int fd = -EBADF;
        int n;

        if (!path)
                return;
        n = asprintf(&line,
                     "{\"id\":%llu,\"argv\":%s,\"detached\":%s,\"start_ms\":%llu,"
                     "\"end_ms\":%llu,\"outcome\":%s}\n",
                     (unsigned long long)e->id, e->argv_json ? e->argv_json : "[]",
                     e->detached ? "true" : "false", (unsigned long long)e->start_wall_ms,
                     (unsigned long long)time_realtime_ms(), outcome_json);
        if (n < 0) {
                line = NULL;
                return;
        }
        fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd >= 0)
                (void)loop_write(fd, line, (size_t)n);
}

int keeper_exec_request_parse(json_t *req, const Policy *p, const ImageRoot *image, size_t n_fds,
                              KeeperExecRequest *ret, const char **ret_msg) {
        _cleanup_strv_free_ char **argv = NULL, **extra = NULL;
        json_t *cwd_j = json_object_get(req, "cwd");
        json_t *timeout_j = json_object_get(req, "timeout_ms");
        json_t *tty_j = json_object_get(req, "tty");
        json_t *user_j = json_object_get(req, "user");
        const char *cwd;

        /* SECURITY: argv[0] 0x01... is a builtin's (sync.h), never a
         * client's command. */
        if (keeper_strings_from_json(json_object_get(req, "argv"), false, &argv) < 0 || !argv ||
            !argv[0] || argv[0][0] == FILE_OP_ARGV0_PREFIX ||
            keeper_strings_from_json(json_object_get(req, "env"), true, &extra) < 0 ||
            (cwd_j && !json_is_null(cwd_j) && !json_is_string(cwd_j)) ||
            (timeout_j && !json_is_integer(timeout_j)) || (tty_j && !json_is_boolean(tty_j)) ||
            n_fds != 3) {
                *ret_msg = "malformed exec request";
                return -EINVAL;
        }
        /* SECURITY: the spec reaches init's resolver only in the shape
         * --user takes (policy.h). */
        if (user_j && !json_is_null(user_j) &&
            (!json_is_string(user_j) || !user_spec_is_valid(json_string_value(user_j)))) {
                *ret_msg = "invalid user (want NAME, UID, NAME:GROUP or UID:GID)";
                return -EINVAL;
        }
        if (json_is_true(tty_j) && json_is_true(json_object_get(req, "detach"))) {
                *ret_msg = "a detached command has no terminal";
                return -EINVAL;
        }
        if (json_is_true(json_object_get(req, "stdin_pipe")) &&
            !json_is_true(json_object_get(req, "detach"))) {
                *ret_msg = "only a detached command takes its stdin later";
                return -EINVAL;
        }
        cwd = json_is_string(cwd_j) ? json_string_value(cwd_j) : sandbox_workdir(p, image);
        if (cwd[0] != '/') {
                *ret_msg = "the working directory must be an absolute path";
                return -EINVAL;
        }
        *ret = (KeeperExecRequest){
                .argv = TAKE_PTR(argv),
                .extra = TAKE_PTR(extra),
                .cwd = cwd,
                .timeout_ms = timeout_j && json_integer_value(timeout_j) > 0
                                      ? (uint64_t)json_integer_value(timeout_j)
                                      : p->timeout_ms,
                .detach = json_is_true(json_object_get(req, "detach")),
                .tty = json_is_true(tty_j),
                .stdin_pipe = json_is_true(json_object_get(req, "stdin_pipe")),
                .user = json_is_string(user_j) ? json_string_value(user_j) : NULL,
        };
        return 0;
}

int keeper_exec_admit(int fd, bool stopping, size_t n_execs) {
        if (stopping) {
                (void)keeper_send_json(fd, json_pack("{s:s}", "op", "stopping"), NULL, 0);
                return -ECONNRESET;
        }
        if (n_execs >= KEEPER_MAX_EXECS) {
                keeper_send_error(fd, "too many commands running in this sandbox");
                return -EBUSY;
        }
        return 0;
}

int keeper_file_request_parse(json_t *req, const Policy *p, size_t n_fds, KeeperFileRequest *ret) {
        json_t *mode_j = json_object_get(req, "mode"), *max_j = json_object_get(req, "max");
        const char *action = json_string_value(json_object_get(req, "action"));
        const char *path = json_string_value(json_object_get(req, "path"));
        json_t *user_j = json_object_get(req, "user");
        FileOpAction a = file_op_action_from_string(action);

        /* The owner of what the operation creates (file-op.h): only
         * write, mkdir and move create anything. */
        if (user_j && (!json_is_string(user_j) || !user_spec_is_valid(json_string_value(user_j)) ||
                       (a != FILE_OP_WRITE && a != FILE_OP_MKDIR && a != FILE_OP_MOVE)))
                return -EINVAL;
        if (a < 0 || !path || !path[0] || strlen(path) >= PATH_MAX || !json_is_integer(mode_j) ||
            json_integer_value(mode_j) < 0 ||
            (json_integer_value(mode_j) & ~(json_int_t)(0777 | FILE_OP_FLAGS)) != 0 ||
            !json_is_integer(max_j) || json_integer_value(max_j) < 0 || n_fds != 1)
                return -EINVAL;
        *ret = (KeeperFileRequest){
                .action = action,
                .path = path,
                .cwd = p->workspace ? POLICY_SANDBOX_WORKSPACE : POLICY_SANDBOX_HOME,
                .user = user_j ? json_string_value(user_j) : NULL,
        };
        (void)snprintf(ret->mode, sizeof(ret->mode), "%lld", (long long)json_integer_value(mode_j));
        (void)snprintf(ret->max, sizeof(ret->max), "%lld", (long long)json_integer_value(max_j));
        return 0;
}

void keeper_exec_request_done(KeeperExecRequest *x) {
        x->argv = strv_free(x->argv);
        x->extra = strv_free(x->extra);
}

int keeper_send_outcome(int fd, int exit_code, const char *outcome_json) {
        _cleanup_free_ char *msg = NULL;
        /* outcome_to_json() wrote JSON: put in as it is, not parsed and
         * written again (every exec's answer). */
        int n = asprintf(&msg, "{\"op\":\"outcome\",\"exit_code\":%d,\"outcome\":%s}", exit_code,
                         outcome_json ? outcome_json : "null");

        if (n < 0) {
                msg = NULL;
                return -ENOMEM;
        }
        if ((size_t)n > KEEPER_MSG_MAX)
                return -EMSGSIZE;
        return send_with_fds(fd, msg, (size_t)n, NULL, 0);
}

bool keeper_peer_allowed(int fd) {
        struct ucred cred;
        socklen_t len = sizeof(cred);

        return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.uid == getuid();
}

KeeperConn *keeper_conn_find(KeeperConns *t, int fd) {
        for (size_t i = 0; fd >= 0 && i < t->n; i++)
                if (t->conns[i].fd == fd)
                        return &t->conns[i];
        return NULL;
}

void keeper_conn_remove(KeeperConns *t, KeeperConn *c) {
        (void)close(c->fd);
        *c = t->conns[--t->n];
}

size_t keeper_conns_waiting(const KeeperConns *t) {
        size_t n = 0;

        for (size_t i = 0; i < t->n; i++)
                n += t->conns[i].kind == KEEPER_CONN_WAIT;
        return n;
}

bool keeper_conns_have_room(const KeeperConns *t) {
        return t->n < ELEMENTSOF(t->conns) && t->n - keeper_conns_waiting(t) < KEEPER_MAX_CONNS;
}

void keeper_conn_accept(KeeperConns *t, int listen_fd) {
        int fd;

        if (!keeper_conns_have_room(t))
                return;
        fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0)
                t->conns[t->n++] = (KeeperConn){.fd = fd, .kind = KEEPER_CONN_NEW};
}

int keeper_conn_recv(const KeeperConn *c, json_t **ret_req, const char **ret_op, int fds[3],
                     size_t *ret_n_fds) {
        json_t *req = NULL;
        const char *op, *refusal = NULL;
        size_t n = 0;
        int r;

        fds[0] = fds[1] = fds[2] = -EBADF;
        r = keeper_recv_json(c->fd, &req, fds, 3);
        for (size_t i = 0; i < 3; i++)
                if (fds[i] >= 0)
                        n = i + 1;
        if (r <= 0) {
                if (r < 0 && r != -EAGAIN)
                        refusal = "malformed request (want one JSON object)";
                r = r == -EAGAIN ? 0 : -ECONNRESET;
        } else {
                op = json_string_value(json_object_get(req, "op"));
                if (!op)
                        op = "";
                if (!keeper_peer_allowed(c->fd)) {
                        refusal = "permission denied";
                        r = -EPERM;
                } else if (c->kind != KEEPER_CONN_NEW &&
                           !(c->kind == KEEPER_CONN_EXEC && strcmp(op, "signal") == 0) &&
                           !(c->kind == KEEPER_CONN_FREEZE && strcmp(op, "thaw") == 0)) {
                        refusal = "unexpected request on this connection";
                        r = -EPROTO;
                }
        }
        if (r <= 0) {
                for (size_t i = 0; i < 3; i++)
                        fds[i] = safe_close(fds[i]);
                json_decref(req);
                if (refusal)
                        keeper_send_error(c->fd, refusal);
                return r;
        }
        *ret_req = req;
        *ret_op = op;
        *ret_n_fds = n;
        return 1;
}

int keeper_send_ping(int fd, size_t running) {
        (void)keeper_send_json(fd,
                               json_pack("{s:s,s:i,s:i}", "op", "ok", "running", (int)running,
                                         "pid", (int)getpid()),
                               NULL, 0);
        return -ECONNRESET; /* done with this connection */
}

int keeper_request_signal(json_t *req) {
        json_t *sig = json_object_get(req, "signal");

        if (!json_is_integer(sig) || json_integer_value(sig) <= 0 ||
            json_integer_value(sig) >= NSIG)
                return 0;
        return (int)json_integer_value(sig);
}
