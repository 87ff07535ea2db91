/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The execs of a persistent sandbox as processes (docs/processes.md): what
 * `hutch ps`, `kill`, `wait` and `logs --exec [--follow]`, the C API's
 * hutch_exec_*() and `hutch serve`'s /execs routes all do, written once
 * over the keeper's "list", "kill", "wait" and "output" requests
 * (sandbox/exec-table.h). None of them starts a stopped sandbox: a stopped
 * one runs nothing, and what its execs did is read from its history and
 * its log files.
 *
 * Errors (with a one-line message in @reterr): -ENOENT for a sandbox or an
 * exec that does not exist ("there is no exec 7 in sandbox 'box'"), -ESRCH
 * for killing an exec that ended ("exec 7 has already ended (exit 0)"),
 * -EINVAL for a bad argument, another -errno otherwise. */

#include <stdbool.h>
#include <stdint.h>

#include "hutch-error.h"
#include "store/store.h"

/* The running execs (file operations are not shown) as a JSON array of
 * {id, argv, start_ms, pid, detached}, "[]" for a stopped sandbox; free(). */
int persist_exec_list(Store *s, const char *name, char **ret_json, HutchError *reterr);

/* Writes @len bytes of @data into the stdin pipe of running exec @id
 * (started with its stdin kept; the keeper passes a copy of the pipe's
 * write end), waiting up to PERSIST_STDIN_TIMEOUT_MS for the command to
 * take them; with @close, then has the keeper close its end. -ENOTCONN
 * when it has no stdin to feed, -ESRCH when it ended, -ENOENT when it
 * never was, -EPIPE when the command closed its stdin, -ETIMEDOUT. */
#define PERSIST_STDIN_TIMEOUT_MS 30000
int persist_exec_stdin(Store *s, const char *name, uint64_t id, const void *data, size_t len,
                       bool close, HutchError *reterr);

/* Sends @sig to exec @id; unless @sig is SIGKILL, everything the exec
 * started is killed @grace_ms later if it still runs (0: never). With
 * @wait, returns once it ended (its outcome then in @ret_exit_code and
 * @ret_json when non-NULL; free()). */
int persist_exec_kill(Store *s, const char *name, uint64_t id, int sig, uint64_t grace_ms,
                      bool wait, int *ret_exit_code, char **ret_json, HutchError *reterr);

/* Waits for exec @id to end (at once for one that ended) and returns its
 * outcome: @ret_exit_code, and the outcome's JSON in @ret_json when
 * non-NULL (free()). */
int persist_exec_wait(Store *s, const char *name, uint64_t id, int *ret_exit_code, char **ret_json,
                      HutchError *reterr);

/* Writes detached exec @id's output so far (its stdout to @out_fd, its
 * stderr to @err_fd; blocking writes); with @follow, goes on writing what
 * it writes until it ends. -ENOENT for an exec without a log (one that
 * was not detached). -EPIPE when @out_fd or @err_fd is closed. */
int persist_exec_output(Store *s, const char *name, uint64_t id, bool follow, int out_fd,
                        int err_fd, HutchError *reterr);

/* A signal by name ("TERM", "SIGTERM", "term") or number ("15"): 1 to
 * NSIG-1, or -EINVAL. */
int persist_signal_parse(const char *s);
