/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The body of the exec routes (POST /v1/sandboxes/{name}/exec and
 * .../exec/stream, docs/api.md): its struct and its field table, apart
 * from the event loop so that tests/fuzz/fuzz-api-request.c decodes with
 * the route's own table. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "serve-util.h"

typedef struct ExecArgs {
        char **argv;
        char **env;
        const char *cwd;
        const char *stdin_text;
        const char *stdin_base64;
        const char *user; /* --user, or NULL: the sandbox's */
        uint64_t timeout_ms;
        uint64_t output_limit;
        bool detach;
        bool stdin_open; /* with detach: POST .../execs/{exec}/stdin feeds it */
} ExecArgs;

/* The exec route's fields; the stream route takes all but the last
 * SERVE_EXEC_FIELDS_NOT_STREAMED (output_limit, detach, stdin_open). */
extern const ServeField serve_exec_fields[];
extern const size_t serve_exec_n_fields;
#define SERVE_EXEC_FIELDS_NOT_STREAMED 3
