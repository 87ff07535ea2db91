/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The running execs of a keeper, as clients see them (docs/processes.md):
 * the "list", "kill", "wait" and "output" requests, answered the same way
 * for both backends (keeper.c, keeper-vm.c) through a small ops table
 * (SandboxBackendOps.table, backend.h), and
 * the bounded log files of detached execs. Private to src/lib/sandbox; the
 * protocol is keeper.h's.
 *
 * A detached exec's stdout and stderr are kept apart, in
 * LOGS/exec-<id>.out and LOGS/exec-<id>.err, each capped at
 * EXEC_LOG_STREAM_MAX: the head is kept (the first bytes of each stream),
 * the rest is read and dropped so the command never blocks. The keeper
 * writes them (the command writes to a pipe), so the cap holds whatever the
 * command does. They are in the sandbox's own folder and go with it. */

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "sandbox/keeper-toolkit.h"

#define EXEC_LOG_STREAM_MAX (8U << 20)
/* How long "kill" waits after its signal before SIGKILL, when not said. */
#define EXEC_KILL_GRACE_DEFAULT_MS 10000U
#define EXEC_KILL_GRACE_MAX_MS (24ULL * 3600 * 1000)

/* What a keeper tells of one running exec. */
typedef struct ExecRow {
        uint64_t id;
        const char *argv_json; /* a JSON array, or NULL: [] */
        uint64_t start_wall_ms;
        uint64_t pid; /* its first process, as the sandbox sees it; 0: not known yet */
        bool detached;
} ExecRow;

typedef struct ExecTableOps {
        /* The @i-th running client exec (file operations are not shown):
         * true with @ret filled, false past the last. */
        bool (*row)(void *keeper, size_t i, ExecRow *ret);
        /* Sends @sig to running exec @id now; with @grace_ms > 0, SIGKILL
         * to everything it started if it still runs that long after. */
        void (*kill)(void *keeper, uint64_t id, int sig, uint64_t grace_ms);
        /* Running exec @id's stdin pipe (started with "stdin_pipe"): a
         * copy of its write end in @ret_fd, or with @close the keeper's
         * end closed. -ENOTCONN when it has none (not asked for, or
         * closed). NULL: the backend has none (refused). */
        int (*stdin)(void *keeper, uint64_t id, bool close, int *ret_fd);
} ExecTableOps;

/* Whether @op is one of the requests exec_table_handle() answers. */
bool exec_table_op(const char *op);

/* Answers "list", "kill", "wait", "output" or "stdin" on @c:
 *   {"op":"list"} -> {"op":"ok","execs":[{id,argv,start_ms,pid,detached}]}
 *   {"op":"kill","id":N,"signal":S,"grace_ms":G} -> {"op":"ok"}, then the
 *       outcome when it ends (the client may close before)
 *   {"op":"wait","id":N} -> the outcome when it ends (at once for one that
 *       ended: from the history)
 *   {"op":"output","id":N,"follow":B} + -> {"op":"ok","running":B} with
 *       its two log files (stdout, stderr) opened for reading; following a
 *       running one, the outcome comes when it ends
 * Refusals are {"op":"error","message":S,"errno":E}: ENOENT for an exec
 * that never was, ESRCH for kill of one that ended ("exec 7 has already
 * ended (exit 0)"), EINVAL for a malformed request.
 *   {"op":"stdin","id":N,"close":B} -> {"op":"ok"} with a copy of the
 *       write end of its stdin pipe (the client writes, then closes it),
 *       or with "close", the keeper's end closed (EOF once the client's
 *       copies are closed too); ENOTCONN for an exec without one (it was
 *       not started with "stdin_pipe", or it was closed), ESRCH for one
 *       that ended. A connection left
 * waiting becomes KEEPER_CONN_WAIT with exec_id set; exec_table_finished()
 * answers it. Returns < 0 to close @c, 0 to keep it. */
int exec_table_handle(const ExecTableOps *ops, void *keeper, const KeeperConfig *cfg, KeeperConn *c,
                      json_t *req, const char *op);

/* The "stdin" op (ExecTableOps.stdin) on an exec's @stdin_w, the pipe's
 * write end its keeper holds (NULL or -EBADF: it has none, or it was
 * closed): a copy in @ret_fd, or with @close it closed. -ENOTCONN when
 * there is none. */
int exec_table_stdin_pipe(int *stdin_w, bool close, int *ret_fd);

/* Exec @id ended with @exit_code and @outcome_json: every connection
 * waiting for it gets the outcome and is closed. */
void exec_table_finished(KeeperConns *conns, uint64_t id, int exit_code, const char *outcome_json);

/* The outcome of finished exec @id in the history at @path: 0 with
 * @ret_exit_code and @ret_outcome_json (may be NULL; free()), -ENOENT when
 * it is not there, or another -errno. */
int exec_history_find(const char *path, uint64_t id, int *ret_exit_code, char **ret_outcome_json);

/* ---- the log files of detached execs ---- */

/* One stream of a detached exec on its way to its file. */
typedef struct ExecLogPipe {
        int in_fd;   /* owned: the pipe's read end (non-blocking), -EBADF at EOF */
        int file_fd; /* owned: the log file, -EBADF once closed */
        uint64_t written;
        bool truncated;
} ExecLogPipe;

#define EXEC_LOG_PIPE_NULL ((ExecLogPipe){.in_fd = -EBADF, .file_fd = -EBADF})

/* Creates exec @id's two log files in @logs_dir (0600, truncated) and a
 * pipe for each: @ret_pipes get the read ends and the files, @ret_write
 * the write ends for the command (owned by the caller). 0 or -errno
 * (nothing left open). */
int exec_log_create(const char *logs_dir, uint64_t id, ExecLogPipe ret_pipes[2], int ret_write[2]);

/* Opens exec @id's two log files in @logs_dir for writing (0600,
 * truncated), for a keeper that relays itself (the VM's). 0 or -errno. */
int exec_log_open_files(const char *logs_dir, uint64_t id, int ret_fds[2]);

/* Opens exec @id's two log files for reading (a log of an older hutch,
 * exec-<id>.log, as its stdout, with an empty stderr). -ENOENT when
 * there is none. */
int exec_log_open_read_at(int dir_fd, uint64_t id, int ret_fds[2]);

/* Moves what the pipe holds now into the file, up to the cap (the rest is
 * dropped). Returns 1 while the pipe is open, 0 once it reached EOF (its
 * read end is closed then). */
int exec_log_pump(ExecLogPipe *p);

/* Reads what is left (never blocking) and closes both ends. */
void exec_log_pipe_done(ExecLogPipe *p);
