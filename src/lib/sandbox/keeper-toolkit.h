/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The keeper's toolkit for a backend (docs/architecture.md "The backend
 * seam"): what the keeper's loop (keeper-loop.c, backend.h) and the
 * backends' ops (src/lib/sandbox/keeper.c: namespaces,
 * src/lib/vm/keeper-vm.c: a microVM) share: the control socket's messages
 * and connections, the exec requests, the history and the denials. For
 * the keeper and the backends only, not the front ends; the protocol is
 * keeper.h's. */

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cgroup/cgroup.h"
#include "hutch-error.h"
#include "policy/policy.h"
#include "sandbox/image-root.h"
#include "sandbox/keeper.h"
#include "sandbox/port-forward.h"
#include "sandbox/proxy-spawn.h"

#define KEEPER_MAX_CONNS 64
/* Connections that only wait for an exec's end (KEEPER_CONN_WAIT: `logs
 * --follow`, wait, kill) have places of their own beyond
 * KEEPER_MAX_CONNS, so that followers never lock out control (issue 18):
 * at most this many; one more is refused (EAGAIN). */
#define KEEPER_MAX_WAITERS 256
#define KEEPER_MAX_EXECS 128

typedef enum KeeperConnKind {
        KEEPER_CONN_NEW,    /* waiting for its request */
        KEEPER_CONN_EXEC,   /* tied to an exec */
        KEEPER_CONN_FREEZE, /* holds the sandbox frozen */
        KEEPER_CONN_STOP,   /* asked for a stop; answered when everything is down */
        KEEPER_CONN_WAIT,   /* waits for exec_id's outcome (exec-table.h) */
} KeeperConnKind;

typedef struct KeeperConn {
        int fd;
        KeeperConnKind kind;
        uint64_t exec_id;
} KeeperConn;

typedef struct KeeperConns {
        KeeperConn conns[KEEPER_MAX_CONNS + KEEPER_MAX_WAITERS];
        size_t n;
} KeeperConns;

/* How many of @t's connections wait for an exec's end. */
size_t keeper_conns_waiting(const KeeperConns *t);
/* Whether @t has a place for a new connection: fewer than
 * KEEPER_MAX_CONNS that are not waiters. */
bool keeper_conns_have_room(const KeeperConns *t);

KeeperConn *keeper_conn_find(KeeperConns *t, int fd);
/* Closes @c's fd and drops it from @t (the last entry takes its place). */
void keeper_conn_remove(KeeperConns *t, KeeperConn *c);
/* Accepts one client (non-blocking) unless @t is full. */
void keeper_conn_accept(KeeperConns *t, int listen_fd);
/* SECURITY: only the sandbox's owner (the socket's directory is 0700
 * already) may drive it. */
bool keeper_peer_allowed(int fd);

/* Receives the next request on @c (up to three fds), checked: from the
 * sandbox's owner, and one that @c's state allows (anything on a new
 * connection, "signal" on an exec's, "thaw" on a freeze's). Returns 1 with
 * the request, its "op" ("" when missing) and its fds (the caller closes
 * them and frees the request), 0 when nothing was there, or -errno to
 * close @c (a refusal was answered). */
int keeper_conn_recv(const KeeperConn *c, json_t **ret_req, const char **ret_op, int fds[3],
                     size_t *ret_n_fds);

/* Answers "ping" ({"op":"ok","running":N,"pid":P}); returns -ECONNRESET:
 * the connection is done. */
int keeper_send_ping(int fd, size_t running);

/* The "signal" of a request on an exec's connection: 1 to NSIG-1, or 0
 * for a missing or invalid one (ignored). */
int keeper_request_signal(json_t *req);

/* {"op":"error","message":@msg} */
void keeper_send_error(int fd, const char *msg);
/* {"op":"error","message":@msg,"errno":@err}: a refusal whose reason a
 * client tells apart (keeper_simple() returns -EBUSY and -EOPNOTSUPP so;
 * the exec table's clients read theirs). */
void keeper_send_refusal(int fd, int err, const char *msg);

/* {"op":"network","policy":TEXT} (keeper-policy.c): the new policy's
 * allowlist, deny list, private ranges and resolve entries go to the
 * sandbox's running hutch-proxy (proxy_set_policy()); answered "ok" once
 * the proxy confirmed, else an error naming why. The rest of the policy is
 * not read here: the caller refuses other changes while it runs. Returns
 * < 0 only if the answer could not be sent. */
int keeper_network_update(ProxyProcess *proxy, int fd, json_t *req);
/* {"op":"outcome","exit_code":N,"outcome":@outcome_json} */
int keeper_send_outcome(int fd, int exit_code, const char *outcome_json);

/* A JSON array of strings, or NULL (out of memory, or not UTF-8). */
json_t *keeper_strv_to_json(char *const *l);
/* An array of strings into a new vector (NULL for a missing one when
 * @allow_missing). -EINVAL for anything else. */
int keeper_strings_from_json(json_t *arr, bool allow_missing, char ***ret);
/* @extra ("K=V") set over a copy of @base. -EINVAL for a bad entry. */
int keeper_exec_env(char *const *base, char *const *extra, char ***ret);

/* An exec request, checked: {"op":"exec","argv":[...],"env":[...],
 * "cwd":S|null,"timeout_ms":N,"detach":B[,"user":S]} with @n_fds
 * descriptors. */
typedef struct KeeperExecRequest {
        char **argv;
        char **extra;    /* "K=V" over the sandbox's environment, or NULL */
        const char *cwd; /* borrowed from the request or the policy */
        uint64_t timeout_ms;
        bool detach;
        bool tty;        /* the fds are one pty channel (sandbox/pty.h) */
        bool stdin_pipe; /* detached, stdin a pipe the keeper holds (exec-table.h "stdin") */
        /* --user (user_spec_is_valid(), borrowed from the request), or NULL:
         * the sandbox's default user. */
        const char *user;
} KeeperExecRequest;

/* -EINVAL with @ret_msg (the answer for the client) for a malformed one.
 * Without a cwd in the request: sandbox_workdir() of @p and @image (the
 * sandbox's image, or NULL). */
int keeper_exec_request_parse(json_t *req, const Policy *p, const ImageRoot *image, size_t n_fds,
                              KeeperExecRequest *ret, const char **ret_msg);
void keeper_exec_request_done(KeeperExecRequest *x);

/* Whether a keeper takes one more exec on @fd: not while it is
 * @stopping ("stopping": the client starts a new keeper for it), nor past
 * KEEPER_MAX_EXECS (@n_execs now; an error). 0, or < 0 with @fd answered
 * (the caller closes the connection). */
int keeper_exec_admit(int fd, bool stopping, size_t n_execs);

/* A file request, checked: {"op":"file","action":A,"path":P,"mode":N,
 * "max":N[,"user":S]} with one fd (the data), for the builtin of
 * file-op.h, whose argv is FILE_OP_ARGV0 @action @path @mode @max @user,
 * run in @cwd (the workspace, or $HOME). @user is NULL without one (the
 * argv ends before it), else a user_spec_is_valid() spec, only for write,
 * mkdir and move. The strings
 * are borrowed from the request. */
typedef struct KeeperFileRequest {
        const char *action, *path, *cwd, *user;
        char mode[24], max[24];
} KeeperFileRequest;

/* -EINVAL for a malformed one. */
int keeper_file_request_parse(json_t *req, const Policy *p, size_t n_fds, KeeperFileRequest *ret);

/* The audit log's size now (where an exec's denials start), and the
 * proxy's denials logged since @audit_start, as the proxy's summary
 * lists them ([{host, port, reason, count}]). */
off_t keeper_audit_size(const Policy *p);
char *keeper_denials(const Policy *p, off_t audit_start);

/* One finished exec, appended to the history as a JSON line. */
typedef struct KeeperHistoryEntry {
        uint64_t id;
        const char *argv_json; /* or NULL: [] */
        bool detached;
        uint64_t start_wall_ms;
} KeeperHistoryEntry;

void keeper_history_append(const char *path, const KeeperHistoryEntry *e, const char *outcome_json);
/* The last id in the history (exec ids go on across restarts), or 0. */
uint64_t keeper_history_last_id(const char *path);

/* Creates the listening socket @path (0600; it appears under its name
 * only once it accepts). A new fd, or -errno with @reterr. */
int keeper_listen_socket(const char *path, HutchError *reterr);
/* Writes "ok\n" or "error: MESSAGE\n" to the ready pipe @fd and closes it. */
void keeper_report_ready(int fd, const HutchError *err);
/* SECURITY: zeroes the real values of the secrets taken from variables in
 * the keeper's own environment @env, once the proxy has them. */
void keeper_scrub_secrets(const Policy *p, char *const *env);

/* The published ports' requests (keeper-ports.c, keeper.h): "ports" lists
 * @t; "port" with "action":"add" binds and starts spec "spec" into the
 * sandbox's namespaces, with "rm" stops sandbox port "port". Answers on
 * @fd and returns -ECONNRESET (the connection is done). */
int keeper_ports_handle(int fd, json_t *req, const char *op, PortForwards *t);
