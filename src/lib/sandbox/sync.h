/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The supervisor <-> sandbox init protocol (docs/style.md §2): fixed-size,
 * versioned SOCK_SEQPACKET messages with a closed op enum. Descriptors
 * travel with SCM_RIGHTS. The supervisor validates every field it reads and
 * never trusts a length or an index from the sandbox side.
 *
 *   supervisor -> init  SYNC_OP_GO      after the id maps are written; carries
 *                                       the detached (idmapped) mounts, in the
 *                                       order of SandboxMounts
 *   supervisor -> init  SYNC_OP_CONTINUE init is in its cgroup (made before
 *                                       init, which joined it at birth and
 *                                       through "tasks" fds); values[]
 *                                       carry the rlimits of a degraded run:
 *                                       memory, swap, pids (0 = none)
 *   init -> supervisor  SYNC_OP_ERROR   a setup step failed: {err, step, msg};
 *                                       init then _exit()s
 *   init -> supervisor  SYNC_OP_SOCKETS the proxy's listening sockets, created
 *                                       in the sandbox's network namespace
 *                                       (network mode allow only)
 *   supervisor -> init  SYNC_OP_CA      (policies with secrets only, after
 *                                       SYNC_OP_CONTINUE; 1 fd: a sealed memfd
 *                                       with the sandbox CA, PEM, which init
 *                                       appends to the bundle it made from the
 *                                       host's system CAs; values[0]: the CA's
 *                                       subject hash for SSL_CERT_DIR)
 *   init -> supervisor  SYNC_OP_STARTED the command was forked (values[0]: the
 *                                       exec id, 0 for a one-shot run; a one-shot
 *                                       run's values[1]: 1 << OutcomeFallback of
 *                                       the walls built the weaker way; an
 *                                       exec's values[1]: its pid in the
 *                                       sandbox)
 *   init -> supervisor  SYNC_OP_EXITED  the command's wait status (values[0]:
 *                                       the exec id)
 *
 * Persistent sandboxes (the keeper is the supervisor):
 *   keeper -> init      SYNC_OP_LAYERS  right after GO: the data dir and the
 *                                       snapshot layers (values[0]: how many
 *                                       layers follow the data dir)
 *
 * Image sandboxes (both kinds):
 *   supervisor -> init  SYNC_OP_IMAGE   after GO (and LAYERS): the image's
 *                                       layers, top first, as detached
 *                                       idmapped mounts (as root) or none
 *                                       (init binds the paths); values[0]:
 *                                       how many layers the image has
 *   init -> keeper      SYNC_OP_READY   confined, serving exec requests
 *                                       (values[1]: as SYNC_OP_STARTED's)
 *   keeper -> init      SYNC_OP_EXEC    values[0]: exec id, values[1]: payload
 *                                       length; fds: stdin, stdout, stderr,
 *                                       then the exec cgroup's cgroup.procs
 *                                       files; followed by one datagram, the
 *                                       payload: "cwd\0argv...\0\0env...\0".
 *                                       values[2]: SYNC_EXEC_STEM (the
 *                                       prepared process runs it), and
 *                                       SYNC_EXEC_TTY (stdin is the channel
 *                                       of a pty made inside, sandbox/pty.h)
 *                                       An argv[0] starting with the byte
 *                                       0x01 (FILE_OP_ARGV0, file-op.h)
 *                                       names a builtin: the forked child
 *                                       runs it itself instead of exec'ing,
 *                                       and its exit status is 0 or an errno
 *   keeper -> init      SYNC_OP_SIGNAL  values[0]: exec id, values[1]: signal
 *   keeper -> init      SYNC_OP_STEM    values[0]: the next exec's id; fds: its
 *                                       cgroup's cgroup.procs files. init forks
 *                                       a process that moves itself there now
 *                                       (off the request's path: a cgroup move
 *                                       can wait for an RCU grace period) and
 *                                       waits; an SYNC_OP_EXEC with values[2]
 *                                       = 1 and that id is run by it. Up to
 *                                       SYNC_STEMS_MAX wait at once (a new one
 *                                       beyond replaces the oldest)
 */

#include <stdint.h>

#define SYNC_MAGIC UINT32_C(0x68757463) /* "hutc" */
#define SYNC_VERSION_MAJOR 1
#define SYNC_VERSION_MINOR 6
/* An exec request's payload (cwd, argv, environment). */
#define SYNC_EXEC_PAYLOAD_MAX (128U << 10)
/* SYNC_OP_EXEC's values[2] flags. */
#define SYNC_EXEC_STEM UINT64_C(1)
#define SYNC_EXEC_TTY UINT64_C(2)
/* Descriptors of one exec request: stdio and up to six cgroup.procs. */
#define SYNC_EXEC_FDS_MAX 9
/* Prepared processes (SYNC_OP_STEM) init keeps at once. */
#define SYNC_STEMS_MAX 2

typedef enum SyncOp {
        SYNC_OP_GO = 1,
        SYNC_OP_ERROR,
        SYNC_OP_STARTED,
        SYNC_OP_EXITED,
        SYNC_OP_SOCKETS,
        SYNC_OP_CONTINUE,
        SYNC_OP_CA,
        SYNC_OP_LAYERS,
        SYNC_OP_READY,
        SYNC_OP_EXEC,
        SYNC_OP_SIGNAL,
        SYNC_OP_STEM,
        SYNC_OP_IMAGE,
        _SYNC_OP_MAX,
        _SYNC_OP_INVALID = -22,
} SyncOp;

typedef struct SyncMsg {
        uint32_t magic;
        uint16_t version_major;
        uint16_t version_minor;
        uint32_t op;        /* SyncOp */
        int32_t err;        /* positive errno for SYNC_OP_ERROR */
        int32_t status;     /* wait status for SYNC_OP_EXITED */
        uint32_t n_fds;     /* descriptors attached */
        uint64_t values[3]; /* op-specific numbers (SYNC_OP_CONTINUE) */
        char step[64];      /* NUL-terminated; SYNC_OP_ERROR only */
        char msg[256];      /* NUL-terminated; SYNC_OP_ERROR only */
} SyncMsg;

/* Sends one message (@n_fds descriptors attached). Returns 0 or -errno. */
int sync_send(int sock, SyncOp op, int err, int status, const char *step, const char *msg,
              const int *fds, size_t n_fds);

/* Sends a message carrying three numbers and @n_fds descriptors. */
int sync_send_values(int sock, SyncOp op, const uint64_t values[3], const int *fds, size_t n_fds);

/* Sends a message carrying a wait status, three numbers and @n_fds
 * descriptors. */
int sync_send_status(int sock, SyncOp op, int status, const uint64_t values[3], const int *fds,
                     size_t n_fds);

/* Receives one message and checks magic, major version and op range;
 * returns 1 with @ret filled, 0 on EOF, -EBADMSG on a malformed message,
 * -errno otherwise. Received fds go to @fds (up to @max_fds). A peer that
 * closed with a message of ours unread does not hide what it sent before:
 * the ECONNRESET the kernel reports first is passed over once. */
int sync_recv(int sock, SyncMsg *ret, int *fds, size_t max_fds);
