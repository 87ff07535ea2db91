/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* envd of `hutch serve --e2b` (docs/e2b-envd.md): what E2B's SDK calls
 * inside a sandbox, answered by hutch's C API on the hutch sandbox that
 * the E2B sandbox names. e2b.c calls e2b_envd_handle() (e2b.h) for each
 * request on the envd listener, in the fork that serves the connection;
 * e2b-envd.c routes it:
 *
 * - GET /health, GET and POST /files (REST, E2B's envd.yaml);
 * - POST /filesystem.Filesystem/<Method> and /process.Process/<Method>
 *   (Connect, e2b-connect.h), the process service in e2b-envd-process.c.
 *
 * The contract between those two files follows. Every handler has the
 * sandbox resolved and the request's message decoded (a JSON object)
 * and writes the whole answer. */

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "e2b-connect.h"
#include "e2b.h"
#include "hutch.h"

/* The most bytes GET /files reads and POST /files takes for one file. */
#define ENVD_FILE_MAX (UINT64_C(256) << 20)

/* The user E2B names on a call (docs/e2b-envd.md "Users"). */
typedef enum EnvdUser {
        ENVD_USER_DEFAULT, /* none named: the sandbox's default user */
        ENVD_USER_USER,    /* "user": the template's account "user" */
        ENVD_USER_ROOT,    /* "root" */
} EnvdUser;

/* The `hutch exec --user` spec that @user of sandbox @sandbox maps to:
 * NULL for ENVD_USER_DEFAULT, "root" for ENVD_USER_ROOT, and for
 * ENVD_USER_USER "user", or NULL on the host base (no image), which has
 * no such account and whose own user plays it. 0, or -errno (reading the
 * sandbox's policy). */
int envd_user_spec(const char *sandbox, EnvdUser user, const char **ret_spec);

/* The `--user` spec whose files a creating file call (POST /files,
 * MakeDir, Move) of @user makes in sandbox @sandbox, in @ret_spec (owned
 * by the caller; NULL: the sandbox's root): envd_user_spec()'s for a
 * named user; for ENVD_USER_DEFAULT the user a command without a user
 * runs as (the policy's user, else the image's User, else root). 0, or
 * -errno (reading the sandbox's policy or its image). */
int envd_file_owner(const char *sandbox, EnvdUser user, char **ret_spec);

/* A Connect call being answered. */
typedef struct EnvdCall {
        E2bRequest *req;
        E2bSandboxRef sbx;
        json_t *msg;         /* the request message (an object), borrowed */
        uint64_t timeout_ms; /* Connect-Timeout-Ms, 0: none */
        bool stream;         /* a server stream: errors go in its end-of-stream frame */
        bool head_pending;   /* envd_stream_begin_with_next(): the head goes with the next frame */
        EnvdUser user;       /* the user the call names */
} EnvdCall;

/* Unary answers: the message @obj (taken; NULL: out of memory), or the
 * Connect error @code with @message (for a stream not begun yet: the
 * stream with only its end-of-stream frame). Return
 * e2b_envd_handle()'s codes. */
int envd_reply_message(EnvdCall *call, json_t *obj);
int envd_reply_code(EnvdCall *call, ConnectCode code, const char *fmt, ...) _printf_(3, 4);
/* The Connect error of a failed C API call (-errno @r, @err's message). */
int envd_reply_hutch_error(EnvdCall *call, int r, const hutch_error *err);

/* Server streams: the HTTP head (200, application/connect+json, chunked),
 * then messages, then the end-of-stream frame (which ends the chunked
 * body). Each returns 0 or -errno (a write error: the client is gone). */
int envd_stream_begin(EnvdCall *call);
/* As envd_stream_begin(), but the head is written with the next message
 * or end frame, in one segment (for a caller that sends one at once). */
void envd_stream_begin_with_next(EnvdCall *call);
int envd_stream_message(EnvdCall *call, json_t *obj); /* @obj taken */
int envd_stream_end(EnvdCall *call, ConnectCode code, const char *message);
/* The last message @obj (taken) and the end-of-stream frame in one write
 * (one segment: the client wakes once, issue 20); -ENOMEM without @obj. */
int envd_stream_last(EnvdCall *call, json_t *obj, ConnectCode code, const char *message);

/* The process service: Start, Connect, List, SendInput, SendSignal,
 * CloseStdin, Update, StreamInput (e2b-envd-process.c). @method is the
 * part after "/process.Process/". Returns e2b_envd_handle()'s codes, or
 * -ENOENT (nothing answered) for an unknown method. */
int envd_process_call(EnvdCall *call, const char *method);
/* Whether @method of the process service is a server stream; -ENOENT
 * for an unknown one. */
int envd_process_method_shape(const char *method);
