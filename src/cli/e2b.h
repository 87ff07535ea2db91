/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* `hutch serve --e2b` (docs/e2b.md): an E2B-compatible server, so that code
 * written for E2B's SDKs runs on local hutch sandboxes by setting
 * E2B_API_URL and E2B_SANDBOX_URL. Two TCP listeners on loopback:
 *
 * - the control plane (--e2b-listen, default 127.0.0.1:3000): E2B's REST
 *   API (POST /v2/sandboxes, GET /v2/sandboxes, ...), e2b-control.c, every
 *   request authenticated by X-API-Key against --api-key-file;
 * - envd (--e2b-envd-listen, default 127.0.0.1:49983): the in-sandbox
 *   service E2B's SDK talks to (Connect RPC process/filesystem, /health,
 *   /files), routed by the E2b-Sandbox-Id header. e2b.c reads each request
 *   head and hands it to e2b_envd_handle() (e2b-envd.c).
 *
 * On either listener a Host header "<port>-<sandboxID>.<domain>" (domain:
 * --e2b-domain) names a port of a sandbox: the connection is relayed as
 * bytes to that port inside the sandbox (hutch_port_connect()), WebSocket
 * upgrades included; port 49983 is envd itself.
 *
 * Processes, not threads (the C API is not thread-safe; STYLE.md 2): the
 * server process only accepts, reaps and keeps the lifetimes; every
 * accepted connection is served by a fork of it (blocking I/O, one request
 * after another on a keep-alive connection, streams as long as they last),
 * killed when the server ends (PR_SET_PDEATHSIG). State shared between the
 * forks is the table of E2B sandboxes (e2b-sandboxes.c): one small JSON
 * file per sandbox in a private folder of the store, written atomically,
 * each sandbox's changes serialised by a lock file of its own.
 *
 * The seam with envd (e2b-envd.c): e2b_envd_handle() gets an E2bRequest
 * whose head is parsed and whose body is unread (e2b_conn_read*()); it finds
 * its sandbox with e2b_sandbox_lookup() (or, for signed /files URLs,
 * e2b_sandbox_lookup_signature()) and answers with e2b_reply*() or by
 * writing to req->conn itself (streams). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "macro.h"

#define E2B_CONTROL_LISTEN_DEFAULT "127.0.0.1:3000"
#define E2B_ENVD_LISTEN_DEFAULT "127.0.0.1:49983"
#define E2B_ENVD_PORT 49983
#define E2B_DOMAIN_DEFAULT "e2b.localhost"

/* What envd reports in create/connect answers. The SDK switches features
 * off below 0.6.4 (docs/e2b.md "Versions"). */
#define E2B_ENVD_VERSION "0.6.4"

/* Caps (docs/e2b.md "Limits"). */
#define E2B_HEAD_MAX (16U << 10)              /* request line + headers */
#define E2B_HEADERS_MAX 100                   /* header lines in one head */
#define E2B_CONTROL_BODY_MAX (1U << 20)       /* a control-plane JSON body */
#define E2B_ENVD_BODY_MAX (UINT64_C(1) << 32) /* an envd body (file uploads) */
#define E2B_CONN_BUF (64U << 10)              /* read-ahead of one connection */
#define E2B_CONNECTIONS_MAX 256               /* connections served at once */
#define E2B_BACKGROUND_MAX 1024               /* dropped background commands' forks */
#define E2B_IDLE_TIMEOUT_S 60                 /* waiting for a request head */
#define E2B_HEAD_DEADLINE_S 10                /* from a head's first byte to its end */
#define E2B_TIMEOUT_DEFAULT_S 300             /* a sandbox's lifetime when none is asked */
#define E2B_TIMEOUT_MAX_S 86400               /* the longest lifetime one may ask */
#define E2B_METADATA_MAX 64                   /* metadata entries of one sandbox */
#define E2B_ID_LEN 20                         /* [a-z0-9]{20} */
#define E2B_TOKEN_LEN 43                      /* envdAccessToken: base64url of 32 random bytes */

typedef struct E2bServer {
        char *table_dir;      /* the table of E2B sandboxes (0700) */
        char *domain;         /* --e2b-domain */
        char *policy_json;    /* the serve flags' policy: every sandbox's default and ceiling */
        char **allow_ceiling; /* the serve flags' allow_hosts (owned), the widest a sandbox gets */
        uint8_t api_key_sha[32]; /* SHA-256 of --api-key-file's key */
        char control_addr[64];   /* as bound, "IP:PORT" */
        char envd_addr[64];
        int table_lock; /* held by the server process: one server per table */
        int release_fd; /* the forks' end of the slot-release socket (e2b_conn_release()) */
} E2bServer;

/* ---- one connection (e2b.c) ---- */

/* A client connection as a blocking fd with a read-ahead buffer. */
typedef struct E2bConn {
        int fd;
        size_t off, len; /* unread bytes: buf[off..len) */
        bool served;     /* a request was answered: idle between two may be evicted */
        char buf[E2B_CONN_BUF];
} E2bConn;

/* Reads up to @n bytes (the read-ahead first): > 0 bytes, 0 at EOF,
 * -errno (-EAGAIN when a receive timeout passed: the fd has SO_RCVTIMEO
 * of E2B_IDLE_TIMEOUT_S; a handler that waits longer for a client's
 * bytes, as a stream of stdin may, changes it). */
ssize_t e2b_conn_read(E2bConn *c, void *p, size_t n);
/* Reads exactly @n bytes into @p: 0, -EPIPE at EOF before them, -errno. */
int e2b_conn_read_exact(E2bConn *c, void *p, size_t n);
/* Writes all of @p: 0 or -errno. */
int e2b_conn_write(E2bConn *c, const void *p, size_t n);

/* In a connection's fork whose client went away while its work goes on
 * (the broker of a background command, e2b-envd-process.c): gives the
 * fork's connection slot back. The server then counts the fork apart (at
 * most E2B_BACKGROUND_MAX; beyond, it keeps its slot) and still ends it
 * with itself. Called once, after which the fork serves no request. */
void e2b_conn_release(const E2bServer *srv);

typedef struct E2bHeader {
        const char *name;  /* as sent; compare case-insensitively */
        const char *value; /* without surrounding spaces */
} E2bHeader;

/* A request whose head was read and checked (serve_head_check()). */
typedef struct E2bRequest {
        E2bServer *srv;
        E2bConn *conn;
        const char *method; /* "GET", "POST", ... */
        const char *target; /* as sent: "/path?query" */
        const char *path;   /* the target up to '?', not decoded */
        const char *query;  /* after '?', not decoded, or "" */
        E2bHeader headers[E2B_HEADERS_MAX];
        size_t n_headers;
        uint64_t body_len; /* Content-Length (0 when none) */
        bool chunked;      /* envd only: "Transfer-Encoding: chunked"; body_len is 0 */
        bool close;        /* the client asked for "Connection: close" (or HTTP/1.0) */
        bool answered;     /* set by e2b_reply*() */
        const char *raw;   /* the head as received (through its empty line) */
        size_t raw_len;
        const char *extra_header; /* one more header line (no CRLF) for e2b_reply(), or NULL */
        bool body_done; /* the body was read (e2b_request_body(), or the handler says so) */
        /* Private: the copies the pointers above point into. */
        char *storage, *path_storage, *storage_raw;
} E2bRequest;

/* The value of header @name (case-insensitive; the first one), or NULL. */
const char *e2b_request_header(const E2bRequest *req, const char *name);

/* Reads the whole body (Content-Length bytes, or a chunked body) as a new
 * NUL-terminated buffer: at most @max bytes (-E2BIG beyond; the connection
 * must close then), -EBADMSG for bad chunk framing, -EPIPE at an early
 * EOF. */
int e2b_request_body(E2bRequest *req, uint64_t max, char **ret, size_t *ret_len);

/* Answers @status with @len bytes of @ctype (NULL: none), Content-Length
 * framed, keep-alive unless the request said close. 0 or -errno. */
int e2b_reply(E2bRequest *req, int status, const char *ctype, const void *body, size_t len);
/* Answers @status with the JSON @obj (taken; NULL: 500 out of memory). */
int e2b_reply_json(E2bRequest *req, int status, json_t *obj);
/* Answers E2B's error shape {"code": @status, "message": ...}. */
int e2b_reply_error(E2bRequest *req, int status, const char *fmt, ...) _printf_(3, 4);

/* ---- envd (e2b-envd.c, helper h20b) ---- */

/* Answers one request on the envd listener (every request there but those
 * for a sandbox port by Host). @req's body is unread: the handler reads
 * exactly @req->body_len bytes of it (or the chunked body) before it
 * answers, unless it returns 1. It may write the answer itself (streams,
 * any framing) to @req->conn->fd; then it sets @req->answered.
 * Returns 0 when the connection can serve the next request, 1 when it must
 * be closed (a stream ended without framing, a body left unread), -errno
 * on a write error (closed too). Until e2b-envd.c defines it, a weak
 * placeholder in e2b.c answers 501. */
int e2b_envd_handle(E2bRequest *req);

/* ---- the table of E2B sandboxes (e2b-sandboxes.c) ---- */

typedef struct E2bSandboxRef {
        char id[E2B_ID_LEN + 1];
        char name[64]; /* the hutch sandbox: "e2b-" + id */
        bool paused;
} E2bSandboxRef;

/* Finds sandbox @sandbox_id for envd: 0 and @out filled; -ENOENT for an
 * unknown id (or a malformed one); -EACCES when the sandbox is secure and
 * @access_token (X-Access-Token, may be NULL) is missing or wrong (compared
 * in constant time); -EAGAIN when it is paused (envd answers 502, as for a
 * killed one: -ENOENT). @srv is the request's. */
int e2b_sandbox_lookup(const E2bServer *srv, const char *sandbox_id, const char *access_token,
                       E2bSandboxRef *out);

/* Finds the sandbox a signed /files URL is for, which carries no id: the
 * one whose access token makes @signature ("v1_" + unpadded base64 of
 * SHA-256 over "PATH:OPERATION:USER:TOKEN[:EXPIRATION]", the SDK's scheme)
 * with @expiration (0: none; else seconds since the epoch, not past).
 * 0 and @out; -EACCES when none matches or it expired; -EAGAIN paused. */
int e2b_sandbox_lookup_signature(const E2bServer *srv, const char *path, const char *operation,
                                 const char *user, const char *signature, uint64_t expiration,
                                 E2bSandboxRef *out);

/* ---- entry point (e2b.c) ---- */

/* `hutch serve --e2b ...` (serve.c hands over when argv holds --e2b). */
int e2b_serve_main(int argc, char **argv);
