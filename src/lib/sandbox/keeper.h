/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The keeper: the detached supervisor of a running persistent sandbox
 * (docs/architecture.md §2, §9). It starts the sandbox (init serving exec
 * requests, or a microVM), listens on a unix control socket, runs one
 * command per `exec` request (in its own child cgroup, or on a channel of
 * the guest's agent), and stops itself when no command has run for the
 * idle timeout. One loop (keeper-loop.c) serves both backends through the
 * ops of backend.h.
 *
 * Control protocol (docs/persistent.md): SOCK_SEQPACKET, one JSON object
 * per message, at most KEEPER_MSG_MAX bytes; descriptors with SCM_RIGHTS.
 *   client -> keeper {"op":"exec","argv":[...],"env":["K=V",...],"cwd":S|null,
 *                     "timeout_ms":N,"detach":B,"tty":B}   + stdin, stdout, stderr
 *                    (with "tty": the three are one pty channel, sandbox/pty.h)
 *   keeper -> client {"op":"started","id":N}, later (not detached)
 *                    {"op":"outcome","exit_code":N,"outcome":{...}}
 *   client -> keeper {"op":"signal","signal":N}   (on an exec's connection)
 *   client -> keeper {"op":"stop"} | {"op":"ping"} -> {"op":"ok",...}
 *   client -> keeper {"op":"freeze"} -> {"op":"ok"}; the sandbox stays
 *                    frozen until {"op":"thaw"} on that connection or its
 *                    close; a "thaw" on any other is refused. A paused
 *                    sandbox's freeze is granted as it is (frozen already)
 *                    and its end leaves it paused; "unpause" is refused
 *                    while it is held
 *   client -> keeper {"op":"pause"} | {"op":"unpause"} -> {"op":"ok"}: frozen
 *                    until "unpause" on any connection or the keeper's end
 *                    (E2B's pause, issue 20); execs and files are refused
 *                    meanwhile
 *   client -> keeper {"op":"file","action":"read|write|list|stat|remove",
 *                     "path":S,"mode":N,"max":N[,"user":S]}   + one fd for the data
 *                    -> {"op":"started","id":N}, {"op":"outcome",...}: the
 *                    file operation of src/shared/file-op.h, run by a process
 *                    of the sandbox; its exit_code is 0 or the errno
 *   client -> keeper {"op":"list"} | {"op":"kill",...} | {"op":"wait",...} |
 *                    {"op":"output",...}: the running execs as processes
 *                    (sandbox/exec-table.h, docs/processes.md)
 *   client -> keeper {"op":"ports"} -> {"op":"ok","ports":[{"port":N,
 *                    "protocol":"tcp","host_ip":S,"host_port":N}...]}: the
 *                    published ports (sandbox/port-forward.h) as bound
 *   client -> keeper {"op":"port","action":"add","spec":S} -> {"op":"ok",
 *                    "ports":[the one added]}; {"op":"port","action":"rm",
 *                    "port":N} -> {"op":"ok","removed":0|1}
 *   client -> keeper {"op":"connect","port":N} -> {"op":"ok"} + one fd: a
 *                    socket connected (or connecting) to 127.0.0.1:N in
 *                    the sandbox's network namespace (any port, published
 *                    or not: hutch serve's preview route)
 *   keeper -> client {"op":"error","message":S} for a refused request
 *   keeper -> client {"op":"stopping"}: an exec that came while the keeper
 *                    stops; the command was not started
 * A client that closes an exec's connection before the outcome kills that
 * exec (a detached one is not tied to its connection).
 *
 * A policy with backend vm gets the microVM's keeper (keeper-vm.c, docs/vm.md
 * "Persistent VM sandboxes"): the same protocol, one VM held between execs.
 * Its guest runs up to AGENT_MAX_EXECS commands at once, one per channel
 * of the agent's port; an exec that arrives while all channels are busy
 * waits (FIFO) and gets "started" when it starts. "detach" and "file" work
 * as here (a file operation is an exec of the builtin of file-op.h in the
 * guest); freeze/thaw freeze QEMU's host cgroup. "tty" is refused; "limits",
 * "ports", "port" and "connect" are unknown requests to it. */

#include <jansson.h>
#include <stdint.h>

#include "file-op.h"
#include "hutch-error.h"
#include "policy/policy.h"
#include "sandbox/outcome.h"
#include "sandbox/sandbox.h"

#define KEEPER_MSG_MAX (64U << 10)
#define KEEPER_DEFAULT_IDLE_MS (15ULL * 60 * 1000)

typedef struct KeeperConfig {
        const Policy *policy;
        SandboxLayerPaths layers;
        const char *socket_path;  /* created by the keeper (and removed at the end) */
        const char *logs_dir;     /* detached execs' output: exec-<id>.{out,err} */
        const char *history_path; /* one JSON line per finished exec */
        uint64_t idle_timeout_ms; /* 0: KEEPER_DEFAULT_IDLE_MS */
        int ready_fd;             /* gets "ok\n" or "error: MESSAGE\n", then is closed */
        unsigned degraded;        /* 1 << PolicyLimit: limits the store does not enforce (disk) */
} KeeperConfig;

/* Runs the keeper until it is stopped (a "stop" request, SIGTERM/SIGINT,
 * the idle timeout) or the sandbox dies. The caller is single-threaded and
 * detached. Returns 0 after a clean stop, or -errno (before the sandbox
 * was ready, the message also went to @cfg->ready_fd). */
int sandbox_keep(const KeeperConfig *cfg, char *const *caller_env, HutchError *reterr);

/* ---- client side ---- */

typedef struct KeeperExec {
        char **argv;
        char **env;          /* "K=V" set over the sandbox's environment, or NULL */
        const char *cwd;     /* or NULL: the policy's working directory */
        uint64_t timeout_ms; /* 0: the policy's timeout (0 = none) */
        bool detach;
        bool tty;        /* a pty made inside: fds[0..2] are its channel (sandbox/pty.h); not with
                          * detach, and not in a microVM (-EPERM) */
        int fds[3];      /* the command's stdin, stdout, stderr (borrowed) */
        bool stdin_pipe; /* with detach: stdin is a pipe the keeper holds open ("stdin" op) */
        /* --user (NAME, UID, NAME:GROUP, UID:GID), or NULL: the sandbox's. */
        const char *user;
} KeeperExec;

/* Connects to the keeper's socket: a new fd, -ECONNREFUSED/-ENOENT when no
 * keeper listens there, or another -errno. */
int keeper_connect(const char *socket_path);

/* Sends @req on a connected socket; with @detach returns after "started"
 * with @ret_id set; otherwise waits for the outcome and fills @ret (its
 * JSON in @ret_json when non-NULL). @forward_sigfd (or -EBADF) is a
 * signalfd whose signals are passed on to the command. Returns 0, or
 * -errno with @reterr (the keeper's refusal message, or what failed):
 * -ECONNRESET when the keeper stopped (or was stopping) before it started
 * the command, which it then did not run. */
int keeper_exec(int sock, const KeeperExec *req, int forward_sigfd, uint64_t *ret_id,
                int *ret_exit_code, char **ret_json, HutchError *reterr);

/* The two halves of keeper_exec(), for a caller with its own event loop
 * (hutch serve). keeper_exec_send() sends @req (its fds included) on the
 * connected @sock. keeper_exec_answer() then reads one answer:
 * KEEPER_ANSWER_STARTED with @ret_id, or KEEPER_ANSWER_OUTCOME with
 * @ret_exit_code and (when @ret_json is non-NULL) the outcome's JSON, which
 * the caller frees. -EAGAIN when @sock is non-blocking and nothing waits;
 * -EPIPE when the keeper closed the connection; -ECONNRESET when it was
 * stopping and started nothing; -EPERM with the keeper's
 * refusal in @reterr; another -errno with @reterr. Closing @sock before
 * the outcome kills the command (unless detached). */
typedef enum KeeperAnswer {
        KEEPER_ANSWER_STARTED = 1,
        KEEPER_ANSWER_OUTCOME = 2,
} KeeperAnswer;

int keeper_exec_send(int sock, const KeeperExec *req, HutchError *reterr);
int keeper_exec_answer(int sock, uint64_t *ret_id, int *ret_exit_code, char **ret_json,
                       HutchError *reterr);

/* Passes signal @sig (1 to NSIG-1) on to the command of the exec running
 * on @sock ({"op":"signal"}): 0 or -errno. */
int keeper_exec_signal(int sock, int sig);

/* Sends {"op":@op} and waits for the answer ("ok"): for stop, ping,
 * freeze, thaw, pause, unpause. Returns 0, or -errno with @reterr: a
 * refusal is -EPERM, or the reason the keeper named: -EBUSY (frozen
 * already: another's freeze, a pause), -EOPNOTSUPP (no cgroup to freeze). */
int keeper_simple(int sock, const char *op, HutchError *reterr);

/* The wire, for a client's own requests (api/processes.c): sends @obj
 * (consumed) as one message with @fds. 0 or -errno. */
int keeper_send_json(int fd, json_t *obj, const int *fds, size_t n_fds);
/* Receives one JSON object (and up to @max_fds fds). Returns 1, 0 on EOF,
 * or -errno (-EBADMSG for anything but a JSON object). */
int keeper_recv_json(int fd, json_t **ret, int *fds, size_t max_fds);

/* Asks the keeper of a running sandbox to apply the memory, swap, cpus and
 * pids of @policy_json (the sandbox's policy as stored) to its cgroup.
 * Returns 0, or -errno with @reterr saying why not (-EPERM: the keeper
 * refused, naming the limit; the VM keeper refuses every request of this
 * kind). */
int keeper_limits(int sock, const char *policy_json, HutchError *reterr);
/* The same for the allowlist, deny list, private ranges and resolve
 * entries: the keeper hands them to the sandbox's hutch-proxy, which
 * confirms first (docs/persistent.md, "update"). */
int keeper_network(int sock, const char *policy_json, HutchError *reterr);

typedef struct KeeperFile {
        FileOpAction action;
        const char *path; /* inside the sandbox; relative: from the workspace, or $HOME */
        unsigned mode;    /* write, mkdir: for a new one (0-0777), with FILE_OP_* flags */
        uint64_t max;     /* read: the largest file accepted */
        int data_fd;      /* write: the bytes, from its offset to EOF; read, list, stat: where
                           * the result is written (borrowed) */
        const char *user; /* write, mkdir, move: who owns what they create (a --user spec,
                           * file-op.h's USER), or NULL: the keeper's identity (root) */
} KeeperFile;

/* Runs a file operation (src/shared/file-op.h) in the sandbox of the
 * connected keeper and waits for it. Returns 0 or the operation's -errno
 * (-ETIMEDOUT when the policy's timeout ended it, -EIO when it did not
 * finish), or -errno with @reterr when the keeper refused or failed. */
int keeper_file(int sock, const KeeperFile *req, HutchError *reterr);

/* The published ports of the connected keeper: @action NULL lists them,
 * "add" publishes @spec now, "rm" stops sandbox port @port. @ret_json
 * (may be NULL) gets the JSON array of the ports listed or added (see the
 * protocol above). Returns 0 (for "rm": 1 when one was stopped, 0 when
 * none was there), or -errno with @reterr (the keeper's refusal: "127.0.0.1:8080
 * is already in use"). */
/* Asks the connected keeper for a socket connected to 127.0.0.1:@port in
 * its sandbox ("connect" above): 0 with @ret_fd, -ECONNREFUSED with @reterr
 * naming why (nothing listens there), or another -errno with @reterr. */
int keeper_port_connect(int sock, uint16_t port, int *ret_fd, HutchError *reterr);
int keeper_ports(int sock, const char *action, const char *spec, uint16_t port, char **ret_json,
                 HutchError *reterr);
