/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* `hutch serve` (docs/api.md, docs/api.yaml): HTTP/1.1 + JSON over a unix
 * socket, and over TCP with a bearer token when asked. One process, one
 * libevent loop (evhttp): serve.c listens, authenticates, routes and
 * answers errors; serve-exec.c runs execs without blocking the loop;
 * serve-routes.c has the other routes, which call the C API (hutch.h).
 *
 * A handler gets a ServeCtx that lives only for the call. It answers
 * exactly once, before it returns or (exec) later from the loop. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>

#include "api/hutch-ext.h"
#include "hutch-error.h"
#include "hutch.h"
#include "serve-util.h"

/* The HTTP API's version (GET /v1/version; docs/api.md "Versions"):
 * the minor grows with each compatible change of shapes or routes. */
#define SERVE_API_VERSION_MAJOR 1
#define SERVE_API_VERSION_MINOR 7

/* Caps on what a client can make the server hold (docs/api.md). */
#define SERVE_HEADERS_MAX (16U << 10)      /* request line + headers */
#define SERVE_BODY_MAX (16U << 20)         /* exec stdin, file writes */
#define SERVE_JSON_BODY_MAX (1U << 20)     /* every other JSON body */
#define SERVE_FILE_READ_MAX (16U << 20)    /* GET .../files */
#define SERVE_ARCHIVE_MAX (64U << 20)      /* GET .../files/archive */
#define SERVE_OUTPUT_DEFAULT (1U << 20)    /* captured stdout, stderr each */
#define SERVE_OUTPUT_MAX (16U << 20)       /* the most output_limit may ask */
#define SERVE_STREAM_HIGH_WATER (1U << 20) /* unsent stream output before reads pause */
#define SERVE_TIMEOUT_S 60                 /* reading a request, writing an answer */
#define SERVE_MAX_CONNECTIONS 64           /* TCP connections at once (--max-connections) */
#define SERVE_HEAD_DEADLINE_S 10           /* from a head's first byte (or accept) to its end */

typedef struct ExecJob ExecJob;
typedef struct StatsStream StatsStream;
typedef struct ServeUi ServeUi;

typedef struct Server {
        struct event_base *base;
        uint8_t token_sha[SERVE_SHA256_LEN]; /* of the TCP bearer token (--listen) */
        ExecJob *jobs;                       /* running execs, for shutdown */
        StatsStream *stats_streams;          /* open stats streams (serve-stats.c) */
        unsigned n_stats_streams;
        ServeUi *ui;    /* --ui: the dashboard (serve-ui.h), or NULL */
        bool has_token; /* --listen: token_sha is set */
} Server;

/* ---- the front (serve-front.c) ---- */

/* SECURITY: clients never reach evhttp directly. evhttp (libevent 2.1)
 * reads a whole request body before it calls the server, with no hook
 * before that on a server's requests, so an unauthenticated client could
 * make it hold 16 MiB per connection (issue 15 item 3), and it answers
 * framing errors with HTML. A front accepts the connections of each
 * listening socket (TCP, and the public unix socket) itself; on the unix
 * socket it first refuses a peer of another uid (403), and it reads each
 * request head (serve_head_check(): syntax, the bearer token on TCP, the
 * limits) before a byte of its body:
 *
 * - a refused head is answered with the API's JSON error (401 for a
 *   missing or wrong token, 400, 405, 411, 413, 417, 431) and the
 *   connection closed; nothing after the head is read beyond what the
 *   kernel and a 64 KiB buffer hold, and evhttp never hears of it;
 * - an accepted head, then exactly the body it announces, is passed on a
 *   connection of the front's own to evhttp's private unix socket (as the
 *   server's own user), and the answers are passed back, with both
 *   directions bounded (reading pauses while 256 KiB wait).
 *
 * At most @max connections are open at once (0: no cap); more wait in
 * the kernel's listen queue. */
typedef struct ServeFront {
        struct event_base *base;
        const uint8_t *token_sha; /* the bearer token's SHA-256, NULL: none needed */
        bool owner_only;          /* refuse peers of another uid (SO_PEERCRED) */
        const char *inner_path;   /* evhttp's private unix socket */
        unsigned max;             /* connections at once (0: no cap) */
        const ServeUi *ui;        /* --ui on TCP: the login gate (serve-ui.h), or NULL */
        /* Offered each accepted head first (NULL: none): 0 when it is not
         * the hook's, 1 when it answered it (the connection closes once
         * that is written), 2 when it took the connection (@client is
         * its own now, with what was read after the head), -errno to
         * answer 503. serve_ws_upgrade() is the one. */
        int (*upgrade)(void *userdata, struct bufferevent *client, const char *head, size_t len);
        void *upgrade_data;
        /* Private to serve-front.c. */
        struct evconnlistener *listener;
        unsigned n;
        struct FrontConn *conns;
} ServeFront;

/* Serves the connections accepted on the listening @fd (taken) through
 * @front, whose public fields are set. Returns 0 or -ENOMEM. */
int serve_front_listen(ServeFront *front, int fd);
/* Closes the listener and every connection. */
void serve_front_stop(ServeFront *front);

typedef struct ServeCtx {
        Server *srv;
        struct evhttp_request *req;
        const char *param; /* the route's {name} or {snapshot}, validated */
        struct evkeyvalq *query;
} ServeCtx;

/* ---- workers (serve-worker.c) ---- */

/* In a worker process: where its answer goes (-1 in the server). */
extern int serve_worker_fd;
/* In a worker: writes the answer for the server to send, and exits. */
_noreturn_ void serve_worker_answer(int status, const char *ctype, const void *data, size_t len);
/* Runs @handler for @c in a worker process and answers @c's request when
 * it is done; the event loop goes on meanwhile. */
void serve_in_worker(ServeCtx *c, void (*handler)(ServeCtx *c));

/* ---- answers (serve.c) ---- */

/* Answers @status with @len bytes of type @ctype (NULL: no type). */
void serve_reply_bytes(struct evhttp_request *req, int status, const char *ctype, const void *data,
                       size_t len);

/* Answers @status with the JSON @obj (taken; NULL means out of memory). */
void serve_reply_json(struct evhttp_request *req, int status, json_t *obj);
/* Answers an empty 204. */
void serve_reply_no_content(struct evhttp_request *req);
/* Answers {"error":{"code","message","field"}} with @status and @code;
 * @field is a JSON pointer into the request body, or NULL. */
void serve_reply_status(struct evhttp_request *req, int status, const char *code, const char *field,
                        const char *fmt, ...) _printf_(5, 6);
/* The same with status and code derived from the positive @errnum. */
void serve_reply_errno(struct evhttp_request *req, int errnum, const char *field, const char *fmt,
                       ...) _printf_(4, 5);
/* The same from a failed call: @r < 0 with its HutchError. */
void serve_reply_hutch_error(struct evhttp_request *req, int r, const HutchError *err);
/* The same from a failed C API call; @field_prefix goes before the
 * error's field (the policy's pointer is relative to "/policy"). */
void serve_reply_api_error(struct evhttp_request *req, int r, const hutch_error *err,
                           const char *field_prefix);

/* ---- requests (serve.c) ---- */

/* The request body as a new NUL-terminated buffer (it may hold NULs). */
int serve_body(const ServeCtx *c, char **ret, size_t *ret_len);

/* Decodes the request body (empty means {}) as a JSON object by @fields
 * into @dest (serve_decode_object()); @ret_root keeps the borrowed strings
 * alive and is json_decref()'d by the caller. On failure the error is
 * already answered and -errno returned. */
int serve_body_object(const ServeCtx *c, const ServeField *fields, size_t n_fields, void *dest,
                      json_t **ret_root);

/* The value of query parameter @key, or NULL. */
const char *serve_query(const ServeCtx *c, const char *key);

/* ---- handlers ---- */

/* serve-exec.c */
void serve_exec(ServeCtx *c);
void serve_exec_stream(ServeCtx *c);
/* Ends every running exec (their commands are killed): at shutdown. */
void serve_exec_abort_all(Server *srv);

/* ---- the exec WebSocket (serve-ws.c) ---- */

/* ServeFront's upgrade hook (@userdata: the Server) for GET
 * /v1/sandboxes/{name}/exec/ws with "Upgrade: websocket" (docs/api.md
 * "The exec WebSocket"). */
int serve_ws_upgrade(void *userdata, struct bufferevent *client, const char *head, size_t len);
/* The same route without an upgrade: 426. */
void serve_exec_ws_plain(ServeCtx *c);
/* Closes every exec WebSocket (their commands are killed). */
void serve_ws_abort_all(void);

/* serve-routes.c */
void serve_sandbox_list(ServeCtx *c);
void serve_sandbox_create(ServeCtx *c);
void serve_sandbox_get(ServeCtx *c);
void serve_sandbox_delete(ServeCtx *c);
void serve_sandbox_stop(ServeCtx *c);
/* serve-update.c */
void serve_sandbox_update(ServeCtx *c);
void serve_file_read(ServeCtx *c);
void serve_file_write(ServeCtx *c);
void serve_file_remove(ServeCtx *c);
void serve_file_list(ServeCtx *c);
void serve_file_stat(ServeCtx *c);
void serve_file_mkdir(ServeCtx *c);
void serve_file_move(ServeCtx *c);
/* serve-archive.c */
void serve_file_archive_get(ServeCtx *c);
void serve_file_archive_put(ServeCtx *c);
void serve_snapshot_create(ServeCtx *c);
void serve_snapshot_restore(ServeCtx *c);
void serve_snapshot_list(ServeCtx *c);
void serve_snapshot_delete(ServeCtx *c);
void serve_diff(ServeCtx *c);
void serve_apply(ServeCtx *c);
void serve_audit(ServeCtx *c);

/* serve-execs.c: the execs as processes (docs/processes.md) */
void serve_execs_list(ServeCtx *c);
void serve_exec_get(ServeCtx *c);
void serve_exec_signal(ServeCtx *c);
void serve_exec_output(ServeCtx *c);
void serve_exec_stdin(ServeCtx *c);
/* GET /v1/sandboxes/{name}/ports (hutch_ports()) */
void serve_sandbox_ports(ServeCtx *c);
/* serve-ports.c: POST .../ports, DELETE .../ports/{port} */
void serve_port_publish(ServeCtx *c);
void serve_port_unpublish(ServeCtx *c);
/* The last @max JSON-object lines of the JSONL file @fd into @arr. */
int serve_jsonl_tail(int fd, unsigned max, json_t *arr);

/* serve-stats.c */
void serve_history(ServeCtx *c);
void serve_stats(ServeCtx *c);
/* {running, memory_bytes, cpu_usec, sampled_ms} of sandbox @name of
 * the store, from its cgroup (docs/ui.md): the counters are null when it is
 * stopped or no cgroup serves them; NULL when out of memory. Also used by
 * hutch serve --e2b's metrics (e2b-metrics.c). */
json_t *serve_stats_sample(const char *name);
void serve_stats_stream(ServeCtx *c);
void serve_diff_patch(ServeCtx *c);
/* Ends every open stats stream and frees what the stats kept: at
 * shutdown. */
void serve_stats_abort_all(Server *srv);

/* serve-ui.c: answers the dashboard's requests (paths under /ui); false
 * when @req is not one (the route table decides). */
bool serve_ui_dispatch(Server *srv, struct evhttp_request *req, const char *path);
