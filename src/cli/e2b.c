/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch serve --e2b (e2b.h, docs/e2b.md): flags, the two listeners, the
 * accept loop with one fork per connection, request heads, answers, the
 * relay to a sandbox's port by Host, lifetimes and shutdown. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "e2b-internal.h"
#include "fd-util.h"
#include "log.h"
#include "parse-util.h"
#include "run-flags.h"
#include "serve-util.h"
#include "strv.h"
#include "time-util.h"

static int log_oom(void) {
        return log_error_errno(-ENOMEM, "out of memory");
}

/* ---- one connection ---- */

ssize_t e2b_conn_read(E2bConn *c, void *p, size_t n) {
        ssize_t k;

        if (n == 0)
                return 0;
        if (c->off < c->len) {
                size_t m = MIN(n, c->len - c->off);

                memcpy(p, c->buf + c->off, m);
                c->off += m;
                return (ssize_t)m;
        }
        do
                k = read(c->fd, p, n);
        while (k < 0 && errno == EINTR);
        if (k < 0)
                return errno == EWOULDBLOCK ? -EAGAIN : negative_errno();
        return k;
}

int e2b_conn_read_exact(E2bConn *c, void *p, size_t n) {
        char *q = p;

        while (n > 0) {
                ssize_t k = e2b_conn_read(c, q, n);

                if (k < 0)
                        return (int)k;
                if (k == 0)
                        return -EPIPE;
                q += k;
                n -= (size_t)k;
        }
        return 0;
}

int e2b_conn_write(E2bConn *c, const void *p, size_t n) {
        return loop_write(c->fd, p, n);
}

/* Reads more into the read-ahead (compacting it first): > 0, 0 at EOF,
 * -ENOBUFS when it is full, -errno. */
static ssize_t conn_fill(E2bConn *c) {
        ssize_t k;

        if (c->off > 0) {
                memmove(c->buf, c->buf + c->off, c->len - c->off);
                c->len -= c->off;
                c->off = 0;
        }
        if (c->len == sizeof(c->buf))
                return -ENOBUFS;
        do
                k = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);
        while (k < 0 && errno == EINTR);
        if (k < 0)
                return errno == EWOULDBLOCK ? -EAGAIN : negative_errno();
        c->len += (size_t)k;
        return k;
}

const char *e2b_request_header(const E2bRequest *req, const char *name) {
        for (size_t i = 0; i < req->n_headers; i++)
                if (strcasecmp(req->headers[i].name, name) == 0)
                        return req->headers[i].value;
        return NULL;
}

/* Reads one line (through LF, at most @size - 1 bytes, CR LF dropped) of
 * a chunked body. */
static int conn_read_line(E2bConn *c, char *line, size_t size) {
        size_t n = 0;

        for (;;) {
                char ch;
                ssize_t k = e2b_conn_read(c, &ch, 1);

                if (k < 0)
                        return (int)k;
                if (k == 0)
                        return -EPIPE;
                if (ch == '\n')
                        break;
                if (n + 1 >= size)
                        return -EBADMSG;
                line[n++] = ch;
        }
        if (n > 0 && line[n - 1] == '\r')
                n--;
        line[n] = '\0';
        return 0;
}

/* The chunked body of @req (RFC 9112 7.1): chunk sizes in hex (extensions
 * ignored), at most @max bytes in all, trailers read and dropped. */
static int read_chunked(E2bRequest *req, uint64_t max, char **ret, size_t *ret_len) {
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        char line[256];
        int r;

        data = malloc(1);
        if (!data)
                return -ENOMEM;
        for (;;) {
                uint64_t size = 0;
                char *grown;

                r = conn_read_line(req->conn, line, sizeof(line));
                if (r < 0)
                        return r;
                r = e2b_chunk_size_parse(line, &size);
                if (r < 0)
                        return r;
                if (size == 0)
                        break;
                if (size > max || len + size > max)
                        return -E2BIG;
                grown = realloc(data, len + (size_t)size + 1);
                if (!grown)
                        return -ENOMEM;
                data = grown;
                r = e2b_conn_read_exact(req->conn, data + len, (size_t)size);
                if (r < 0)
                        return r;
                len += (size_t)size;
                r = conn_read_line(req->conn, line, sizeof(line));
                if (r < 0)
                        return r;
                if (line[0])
                        return -EBADMSG;
        }
        /* Trailers, up to the empty line. */
        for (unsigned i = 0;; i++) {
                if (i > E2B_HEADERS_MAX)
                        return -EBADMSG;
                r = conn_read_line(req->conn, line, sizeof(line));
                if (r < 0)
                        return r;
                if (!line[0])
                        break;
        }
        data[len] = '\0';
        req->body_done = true;
        *ret_len = len;
        *ret = TAKE_PTR(data);
        return 0;
}

int e2b_request_body(E2bRequest *req, uint64_t max, char **ret, size_t *ret_len) {
        _cleanup_free_ char *data = NULL;
        int r;

        if (req->chunked)
                return read_chunked(req, max, ret, ret_len);
        if (req->body_len > max)
                return -E2BIG;
        data = malloc((size_t)req->body_len + 1);
        if (!data)
                return -ENOMEM;
        r = e2b_conn_read_exact(req->conn, data, (size_t)req->body_len);
        if (r < 0)
                return r;
        data[req->body_len] = '\0';
        req->body_done = true;
        *ret_len = (size_t)req->body_len;
        *ret = TAKE_PTR(data);
        return 0;
}

static const char *status_reason(int status) {
        static const struct {
                int status;
                const char *reason;
        } reasons[] = {
                {200, "OK"},
                {201, "Created"},
                {204, "No Content"},
                {400, "Bad Request"},
                {401, "Unauthorized"},
                {403, "Forbidden"},
                {404, "Not Found"},
                {405, "Method Not Allowed"},
                {409, "Conflict"},
                {411, "Length Required"},
                {413, "Payload Too Large"},
                {417, "Expectation Failed"},
                {429, "Too Many Requests"},
                {431, "Request Header Fields Too Large"},
                {500, "Internal Server Error"},
                {501, "Not Implemented"},
                {502, "Bad Gateway"},
                {503, "Service Unavailable"},
        };

        for (size_t i = 0; i < ELEMENTSOF(reasons); i++)
                if (reasons[i].status == status)
                        return reasons[i].reason;
        return "Status";
}

int e2b_reply(E2bRequest *req, int status, const char *ctype, const void *body, size_t len) {
        _cleanup_free_ char *head = NULL;
        int n, r;

        /* A body the handler did not read cannot be told from the next
         * request: the connection ends after this answer. */
        if (!req->body_done && (req->body_len > 0 || req->chunked))
                req->close = true;
        n = asprintf(&head, "HTTP/1.1 %d %s\r\nContent-Length: %zu\r\n%s%s%s%s%s%s\r\n", status,
                     status_reason(status), len, ctype ? "Content-Type: " : "", ctype ? ctype : "",
                     ctype ? "\r\n" : "", req->extra_header ? req->extra_header : "",
                     req->extra_header ? "\r\n" : "", req->close ? "Connection: close\r\n" : "");
        if (n < 0) {
                head = NULL;
                return -ENOMEM;
        }
        req->answered = true;
        r = e2b_conn_write(req->conn, head, (size_t)n);
        if (r >= 0 && len > 0)
                r = e2b_conn_write(req->conn, body, len);
        return r;
}

int e2b_reply_json(E2bRequest *req, int status, json_t *obj) {
        _cleanup_free_ char *text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;

        json_decref(obj);
        if (!text)
                return e2b_reply_error(req, 500, "out of memory");
        return e2b_reply(req, status, "application/json", text, strlen(text));
}

int e2b_reply_error(E2bRequest *req, int status, const char *fmt, ...) {
        char msg[512];
        va_list ap;

        va_start(ap, fmt);
        (void)vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (status >= 500)
                log_error("%s %.200s: %s", req->method ? req->method : "?",
                          req->target ? req->target : "?", msg);
        return e2b_reply_json(req, status, json_pack("{s:i,s:s}", "code", status, "message", msg));
}

/* Until e2b-envd.c is linked in: envd is not there. */
__attribute__((weak)) int e2b_envd_handle(E2bRequest *req) {
        (void)e2b_reply_error(req, 501, "envd is not built into this hutch");
        return 1;
}

/* ---- request heads ---- */

static char *trim(char *s) {
        char *e;

        s += strspn(s, " \t");
        e = s + strlen(s);
        while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
                *--e = '\0';
        return s;
}

/* Splits the checked head @req->raw into @req's fields (in a copy). */
static int request_parse(E2bRequest *req) {
        char *s, *line, *next, *sp;

        req->storage = strndup(req->raw, req->raw_len);
        if (!req->storage)
                return -ENOMEM;
        s = req->storage;
        next = strchr(s, '\n');
        if (!next)
                return -EINVAL;
        *next++ = '\0';
        line = trim(s);
        sp = strchr(line, ' ');
        if (!sp)
                return -EINVAL;
        *sp++ = '\0';
        req->method = line;
        req->target = sp;
        sp = strchr(sp, ' ');
        if (!sp)
                return -EINVAL;
        *sp++ = '\0';
        if (strcmp(sp, "HTTP/1.0") == 0)
                req->close = true;
        for (line = next; line && *line; line = next) {
                char *colon;

                next = strchr(line, '\n');
                if (next)
                        *next++ = '\0';
                line = trim(line);
                if (!*line)
                        break;
                colon = strchr(line, ':');
                if (!colon)
                        return -EINVAL;
                if (req->n_headers >= E2B_HEADERS_MAX)
                        return -E2BIG;
                *colon = '\0';
                req->headers[req->n_headers++] =
                        (E2bHeader){.name = line, .value = trim(colon + 1)};
        }
        /* The path and the query point into a second copy of the target. */
        req->path_storage = strdup(req->target);
        if (!req->path_storage)
                return -ENOMEM;
        req->path = req->path_storage;
        sp = strchr(req->path_storage, '?');
        if (sp) {
                *sp = '\0';
                req->query = sp + 1;
        } else
                req->query = "";
        s = (char *)e2b_request_header(req, "connection");
        if (s && strcasecmp(s, "close") == 0)
                req->close = true;
        if (s && strcasecmp(s, "keep-alive") == 0)
                req->close = false;
        return 0;
}

static void request_done(E2bRequest *req) {
        free(req->storage);
        free(req->path_storage);
        *req = (E2bRequest){};
}

/* An error answer to a head that is refused, after which the connection
 * closes. */
static void refuse_head(E2bConn *c, int status, const char *msg) {
        E2bRequest req = {.conn = c, .close = true};

        (void)e2b_reply_error(&req, status, "%s", msg);
}

static void set_receive_timeout(int fd, uint64_t ms) {
        struct timeval tv = {.tv_sec = (time_t)(ms / 1000),
                             .tv_usec = (suseconds_t)(ms % 1000) * 1000};

        if (ms == 0)
                tv.tv_usec = 1000;
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

/* Reads and checks the next request head on @c: 1 and @req filled, 0 at a
 * clean EOF (or idle timeout) before a head, < 0 after answering an error
 * (the connection closes). */
/* Eviction (docs/e2b.md "Limits"): with every connection slot taken, the
 * server sends SIGUSR1 to the connections' forks; one that waits idle
 * between two requests of a keep-alive connection ends (its client opens
 * a new one, as after the idle timeout), the others ignore it. Set only
 * around that wait; one connection per process, so a plain global. */
static volatile sig_atomic_t conn_idle;

static void on_evict(int sig) {
        (void)sig;
        if (conn_idle)
                _exit(0);
}

static int read_head(E2bServer *srv, E2bConn *c, bool envd, E2bRequest *req) {
        uint64_t deadline = 0;
        ServeHead h;
        size_t end;
        int r;

        for (;;) {
                uint64_t now = time_monotonic_ms(), left;

                end = serve_head_end(c->buf + c->off, c->len - c->off);
                if (end > 0)
                        break;
                if (c->len - c->off >= E2B_HEAD_MAX) {
                        refuse_head(c, 431, "the request head is too large");
                        return -E2BIG;
                }
                /* SECURITY: a connection may wait idle for its next
                 * request, but a head that started must end within
                 * E2B_HEAD_DEADLINE_S however slowly it trickles, so
                 * that slow heads cannot hold the forks (slowloris). */
                if (c->len > c->off && deadline == 0)
                        deadline = now + E2B_HEAD_DEADLINE_S * 1000;
                if (deadline > 0 && now >= deadline)
                        return 0;
                left = deadline > 0 ? deadline - now : E2B_IDLE_TIMEOUT_S * 1000;
                set_receive_timeout(c->fd, left);
                /* Idle: answered at least once, nothing of the next head. */
                conn_idle = c->served && c->len == c->off;
                r = (int)conn_fill(c);
                conn_idle = 0;
                if (r == 0 || r == -EAGAIN || r == -ECONNRESET)
                        return 0;
                if (r < 0)
                        return r;
        }
        set_receive_timeout(c->fd, E2B_IDLE_TIMEOUT_S * 1000);
        if (end > E2B_HEAD_MAX) {
                refuse_head(c, 431, "the request head is too large");
                return -E2BIG;
        }
        serve_head_check(c->buf + c->off, end, NULL,
                         envd ? E2B_ENVD_BODY_MAX : E2B_CONTROL_BODY_MAX, &h);
        *req = (E2bRequest){.srv = srv, .conn = c, .raw = c->buf + c->off, .raw_len = end};
        switch (h.verdict) {
        case SERVE_HEAD_OK:
                req->body_len = h.body_len;
                break;
        case SERVE_HEAD_CHUNKED:
                /* Node's fetch sends JSON bodies chunked: read by
                 * e2b_request_body(), within the same caps. */
                req->chunked = true;
                break;
        case SERVE_HEAD_BODY_TOO_LARGE:
                refuse_head(c, 413, "the request body is too large");
                return -E2BIG;
        case SERVE_HEAD_TOO_LARGE:
                refuse_head(c, 431, "the request head is too large");
                return -E2BIG;
        case SERVE_HEAD_BAD_METHOD:
                refuse_head(c, 405, "unknown method");
                return -EINVAL;
        case SERVE_HEAD_EXPECTATION:
                refuse_head(c, 417, "only Expect: 100-continue is understood");
                return -EINVAL;
        case SERVE_HEAD_MALFORMED:
        case SERVE_HEAD_NO_TOKEN:
        case SERVE_HEAD_WRONG_TOKEN:
        case _SERVE_HEAD_VERDICT_MAX:
        case _SERVE_HEAD_VERDICT_INVALID:
        default:
                refuse_head(c, 400, "malformed request head");
                return -EINVAL;
        }
        r = request_parse(req);
        if (r < 0) {
                request_done(req);
                refuse_head(c, r == -E2BIG ? 431 : 400, "malformed request head");
                return r;
        }
        /* SECURITY: only "chunked" alone, and never with a Content-Length
         * (RFC 9112 6.3: a request that has both is how bodies are
         * smuggled past a reader). */
        if (req->chunked) {
                const char *te = e2b_request_header(req, "transfer-encoding");

                if (!te || strcasecmp(te, "chunked") != 0 ||
                    e2b_request_header(req, "content-length")) {
                        request_done(req);
                        refuse_head(c, 400, "only Transfer-Encoding: chunked alone is understood");
                        return -EINVAL;
                }
        }
        /* The raw head stays valid until the next read: keep a copy. */
        req->raw = req->storage_raw = strndup(c->buf + c->off, end);
        if (!req->storage_raw) {
                request_done(req);
                refuse_head(c, 503, "out of memory");
                return -ENOMEM;
        }
        c->off += end;
        /* A client waiting for "100 Continue" gets it: the body is read
         * only by a handler that wants it. */
        if (e2b_request_header(req, "expect") && req->body_len > 0)
                (void)e2b_conn_write(c, "HTTP/1.1 100 Continue\r\n\r\n", 25);
        return 1;
}

/* ---- a sandbox's port by Host ---- */

/* Copies bytes both ways between @a and @b until both sides ended. */
static void relay(int a, int b) {
        struct pollfd p[2] = {{.fd = a, .events = POLLIN}, {.fd = b, .events = POLLIN}};
        bool open_in[2] = {true, true};
        char buf[65536];

        while (open_in[0] || open_in[1]) {
                if (poll(p, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return;
                }
                for (int i = 0; i < 2; i++) {
                        ssize_t k;

                        if (!open_in[i] || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                                continue;
                        k = read(p[i].fd, buf, sizeof(buf));
                        if (k < 0 && (errno == EINTR || errno == EAGAIN))
                                continue;
                        if (k <= 0) {
                                open_in[i] = false;
                                p[i].fd = -1;
                                (void)shutdown(i == 0 ? b : a, SHUT_WR);
                                continue;
                        }
                        if (loop_write(i == 0 ? b : a, buf, (size_t)k) < 0)
                                return;
                }
        }
}

/* Relays the connection of @req to @port of sandbox @id; the connection
 * ends with it. */
static void port_proxy(E2bRequest *req, unsigned port, const char *id) {
        E2bSandboxRef ref;
        hutch_error err = {};
        _cleanup_close_ int fd = -EBADF;
        int r, flags;

        req->close = true;
        r = e2b_sandbox_find(req->srv, id, &ref);
        if (r == -ENOENT) {
                (void)e2b_reply_error(req, 502, "sandbox '%s' not found", id);
                return;
        }
        if (r >= 0 && ref.paused) {
                (void)e2b_reply_error(req, 502, "sandbox '%s' is paused", id);
                return;
        }
        if (r >= 0)
                r = hutch_port_connect(ref.name, port, &fd, &err);
        if (r < 0) {
                (void)e2b_reply_error(req, 502, "cannot reach port %u of sandbox '%s': %s", port,
                                      id, err.message[0] ? err.message : strerror(-r));
                return;
        }
        flags = fcntl(fd, F_GETFL);
        if (flags >= 0)
                (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
        /* The head as it came, then what was read after it. */
        if (loop_write(fd, req->raw, req->raw_len) < 0 ||
            (req->conn->len > req->conn->off &&
             loop_write(fd, req->conn->buf + req->conn->off, req->conn->len - req->conn->off) < 0))
                return;
        req->conn->off = req->conn->len;
        req->answered = true;
        relay(req->conn->fd, fd);
}

/* ---- a connection's fork ---- */

static _noreturn_ void serve_connection(E2bServer *srv, int fd, bool envd) {
        static E2bConn conn; /* 64 KiB: not on the stack; one per process */
        struct timeval tv = {.tv_sec = E2B_IDLE_TIMEOUT_S};

        conn = (E2bConn){.fd = fd};
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        for (;;) {
                E2bRequest req;
                char id[E2B_ID_LEN + 1];
                unsigned port;
                int r;

                r = read_head(srv, &conn, envd, &req);
                if (r <= 0)
                        break;
                if (e2b_host_parse(e2b_request_header(&req, "host"), srv->domain, &port, id) &&
                    port != E2B_ENVD_PORT) {
                        port_proxy(&req, port, id);
                        request_done(&req);
                        break;
                }
                if (envd)
                        r = e2b_envd_handle(&req);
                else
                        r = e2b_control_handle(&req);
                if (r >= 0 && !req.answered) {
                        req.close = true;
                        (void)e2b_reply_error(&req, 500, "no answer");
                }
                if (r != 0 || req.close) {
                        request_done(&req);
                        break;
                }
                request_done(&req);
                conn.served = true;
        }
        (void)shutdown(fd, SHUT_WR);
        _exit(0);
}

/* ---- listening ---- */

static int tcp_listen(const char *spec, const char *flag, char *ret_addr, size_t size) {
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_storage ss;
        socklen_t len;
        char host[INET6_ADDRSTRLEN];
        int one = 1;

        if (serve_parse_listen(spec, &ss, &len) < 0)
                return log_error_errno(-EINVAL,
                                       "invalid %s '%s' (want IPV4:PORT or [IPV6]:PORT, numeric)",
                                       flag, spec);
        fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return log_error_errno(negative_errno(), "socket: %m");
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (ss.ss_family == AF_INET6)
                (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
        if (bind(fd, (struct sockaddr *)&ss, len) < 0)
                return log_error_errno(negative_errno(), "cannot bind %s '%s': %m", flag, spec);
        if (listen(fd, 128) < 0)
                return log_error_errno(negative_errno(), "listen: %m");
        len = sizeof(ss);
        if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
                return log_error_errno(negative_errno(), "getsockname: %m");
        if (ss.ss_family == AF_INET6) {
                const struct sockaddr_in6 *sa = (const struct sockaddr_in6 *)&ss;

                (void)inet_ntop(AF_INET6, &sa->sin6_addr, host, sizeof(host));
                (void)snprintf(ret_addr, size, "[%s]:%u", host, ntohs(sa->sin6_port));
                if (!IN6_IS_ADDR_LOOPBACK(&sa->sin6_addr))
                        log_warning("listening on %s, which is not a loopback address", ret_addr);
        } else {
                const struct sockaddr_in *sa = (const struct sockaddr_in *)&ss;

                (void)inet_ntop(AF_INET, &sa->sin_addr, host, sizeof(host));
                (void)snprintf(ret_addr, size, "%s:%u", host, ntohs(sa->sin_port));
                if ((ntohl(sa->sin_addr.s_addr) >> 24) != 127)
                        log_warning("listening on %s, which is not a loopback address", ret_addr);
        }
        return TAKE_FD(fd);
}

static void e2b_usage(FILE *f) {
        (void)fprintf(f,
                      "usage: hutch serve --e2b --api-key-file FILE [--e2b-listen ADDR]\n"
                      "                   [--e2b-envd-listen ADDR] [--e2b-domain DOMAIN] "
                      "[POLICY FLAGS]\n\n"
                      "Serves E2B's API (docs/e2b.md), so that E2B's SDKs use local hutch "
                      "sandboxes.\n"
                      "  --api-key-file FILE     the key clients send as X-API-Key "
                      "(E2B_API_KEY)\n"
                      "  --e2b-listen ADDR       the control plane (default %s;\n"
                      "                          E2B_API_URL)\n"
                      "  --e2b-envd-listen ADDR  envd (default %s; E2B_SANDBOX_URL)\n"
                      "  --e2b-domain DOMAIN     the domain of sandbox hosts "
                      "<port>-<id>.DOMAIN\n"
                      "                          (default %s; E2B_DOMAIN)\n"
                      "The policy flags of 'hutch create' (limits, --allow-host, --secret, "
                      "--image...)\n"
                      "are every E2B sandbox's policy; a client can narrow it, never widen "
                      "it.\n",
                      E2B_CONTROL_LISTEN_DEFAULT, E2B_ENVD_LISTEN_DEFAULT, E2B_DOMAIN_DEFAULT);
}

typedef struct E2bArgs {
        const char *listen, *envd_listen, *key_file, *domain;
        char **policy_argv; /* "create" + the policy flags */
        bool help;
} E2bArgs;

/* Takes this server's own flags out of @argv; the others are the policy's. */
static int parse_args(int argc, char **argv, E2bArgs *a) {
        static const struct {
                const char *name;
                size_t offset;
        } own[] = {
                {"--e2b-listen", offsetof(E2bArgs, listen)},
                {"--e2b-envd-listen", offsetof(E2bArgs, envd_listen)},
                {"--api-key-file", offsetof(E2bArgs, key_file)},
                {"--e2b-domain", offsetof(E2bArgs, domain)},
        };
        int r;

        r = strv_extend(&a->policy_argv, "create");
        if (r < 0)
                return log_oom();
        for (int i = 1; i < argc; i++) {
                bool taken = false;

                if (strcmp(argv[i], "--e2b") == 0)
                        continue;
                if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
                        a->help = true;
                        return 0;
                }
                for (size_t k = 0; k < ELEMENTSOF(own); k++) {
                        size_t n = strlen(own[k].name);
                        const char **dest = (const char **)((char *)a + own[k].offset);

                        if (strncmp(argv[i], own[k].name, n) != 0 ||
                            (argv[i][n] != '\0' && argv[i][n] != '='))
                                continue;
                        if (argv[i][n] == '=')
                                *dest = argv[i] + n + 1;
                        else if (i + 1 < argc)
                                *dest = argv[++i];
                        else {
                                log_error("%s needs a value (see 'hutch serve --e2b --help')",
                                          own[k].name);
                                return -EINVAL;
                        }
                        taken = true;
                        break;
                }
                if (taken)
                        continue;
                if (strcmp(argv[i], "--from") == 0 || strncmp(argv[i], "--from=", 7) == 0 ||
                    strncmp(argv[i], "--idle-timeout", 14) == 0) {
                        log_error("'%s' is not a policy flag: E2B sandboxes take their template "
                                  "and lifetime from each request",
                                  argv[i]);
                        return -EINVAL;
                }
                r = strv_extend(&a->policy_argv, argv[i]);
                if (r < 0)
                        return log_oom();
        }
        if (!a->key_file) {
                log_error("--e2b needs --api-key-file: refusing to serve without a key");
                return -EINVAL;
        }
        return 0;
}

void e2b_conn_release(const E2bServer *srv) {
        pid_t self = getpid();

        /* A datagram of our pid; the server checks it is one of its
         * connections' forks. Lost (a full queue): the slot stays taken. */
        if (srv->release_fd >= 0)
                (void)send(srv->release_fd, &self, sizeof(self), MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* ---- the server ---- */

typedef struct Children {
        pid_t *pids;
        size_t n, size;
} Children;

static int children_add(Children *c, pid_t pid) {
        if (c->n == c->size) {
                size_t size = c->size ? c->size * 2 : 16;
                pid_t *p = reallocarray(c->pids, size, sizeof(pid_t));

                if (!p)
                        return -ENOMEM;
                c->pids = p;
                c->size = size;
        }
        c->pids[c->n++] = pid;
        return 0;
}

static void children_remove(Children *c, pid_t pid) {
        for (size_t i = 0; i < c->n; i++)
                if (c->pids[i] == pid) {
                        c->pids[i] = c->pids[--c->n];
                        return;
                }
}

/* Forks: 0 in the child (the server's fds in @close_fds closed, the
 * signals the server blocks unblocked), the child's pid in the server,
 * or -errno. */
static pid_t spawn(const sigset_t *old_mask, int close_fds[], size_t n_close) {
        pid_t parent = getpid(), pid = fork();

        if (pid < 0)
                return negative_errno();
        if (pid == 0) {
                /* SECURITY: nothing the server started outlives it (and
                 * a server that ended before the prctl() is seen). */
                (void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
                if (getppid() != parent)
                        _exit(1);
                for (size_t i = 0; i < n_close; i++)
                        if (close_fds[i] >= 0)
                                (void)close(close_fds[i]);
                /* SIGUSR1 (blocked in the server) is eviction here. */
                (void)sigaction(SIGUSR1, &(struct sigaction){.sa_handler = on_evict}, NULL);
                (void)sigprocmask(SIG_SETMASK, old_mask, NULL);
        }
        return pid;
}

static int build_server(E2bServer *srv, const E2bArgs *a) {
        _cleanup_(run_args_done) RunArgs args = {.json_fd = -EBADF};
        HutchExtPolicyView view;
        HutchError err = {};
        int r;

        r = run_args_parse_mode((int)strv_length(a->policy_argv), a->policy_argv, RUN_ARGS_CREATE,
                                &args, &err);
        if (r < 0) {
                log_error("%s", err.msg[0] ? err.msg : strerror(-r));
                return r;
        }
        if (strv_length(args.command) > 0) {
                log_error("unexpected argument '%s' (see 'hutch serve --e2b --help')",
                          args.command[0]);
                return -EINVAL;
        }
        if (args.json_path || args.json_fd >= 0) {
                log_error("--json is not a flag of hutch serve --e2b");
                return -EINVAL;
        }
        r = hutch_ext_policy_to_json(args.policy, &srv->policy_json);
        if (r < 0)
                return log_error_errno(r, "cannot write the policy: %m");
        hutch_ext_policy_view(args.policy, &view);
        if (view.allow_hosts) {
                srv->allow_ceiling = strv_copy(view.allow_hosts);
                if (!srv->allow_ceiling)
                        return log_oom();
        }
        srv->domain = strdup(a->domain ? a->domain : E2B_DOMAIN_DEFAULT);
        if (!srv->domain)
                return log_oom();
        if (!srv->domain[0] || strlen(srv->domain) > 200 ||
            strspn(srv->domain, "abcdefghijklmnopqrstuvwxyz0123456789.-") != strlen(srv->domain) ||
            srv->domain[0] == '.' || srv->domain[strlen(srv->domain) - 1] == '.') {
                log_error("invalid --e2b-domain '%s' (want a lowercase DNS name such as %s)",
                          srv->domain, E2B_DOMAIN_DEFAULT);
                return -EINVAL;
        }
        return 0;
}

int e2b_serve_main(int argc, char **argv) {
        E2bArgs a = {};
        E2bServer srv = {.release_fd = -EBADF};
        Children kids = {};
        Children background = {}; /* forks that gave their slot back (e2b_conn_release()) */
        sigset_t mask, old_mask;
        _cleanup_close_ int sfd = -EBADF, cfd = -EBADF, efd = -EBADF, rfd = -EBADF;
        pid_t sweeper = 0;
        bool evicting = false; /* SIGUSR1 sent; listeners wait for a fork to end */
        uint64_t next_sweep = 0;
        int r;

        r = parse_args(argc, argv, &a);
        if (r < 0 || a.help) {
                if (a.help)
                        e2b_usage(stdout);
                strv_free(a.policy_argv);
                return r < 0 ? HUTCH_EXIT_FAILURE : 0;
        }
        r = serve_token_file_load(a.key_file, "API key", srv.api_key_sha);
        if (r >= 0)
                r = build_server(&srv, &a);
        strv_free(a.policy_argv);
        if (r >= 0)
                r = e2b_table_open(&srv);
        if (r < 0)
                goto finish;
        /* Sandboxes a server that was killed left: each is destroyed. */
        e2b_table_destroy_all(&srv);

        (void)signal(SIGPIPE, SIG_IGN);
        sigemptyset(&mask);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGHUP);
        sigaddset(&mask, SIGCHLD);
        if (sigprocmask(SIG_BLOCK, &mask, &old_mask) < 0) {
                r = log_error_errno(negative_errno(), "sigprocmask: %m");
                goto finish;
        }
        sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (sfd < 0) {
                r = log_error_errno(negative_errno(), "signalfd: %m");
                goto finish;
        }
        /* Not for the server: its forks take it (on_evict()), and must
         * not die of it before they set their handler (spawn()). */
        {
                sigset_t usr1;

                sigemptyset(&usr1);
                sigaddset(&usr1, SIGUSR1);
                (void)sigprocmask(SIG_BLOCK, &usr1, NULL);
        }
        {
                int rel[2];

                if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, rel) < 0) {
                        r = log_error_errno(negative_errno(), "socketpair: %m");
                        goto finish;
                }
                rfd = rel[0];
                srv.release_fd = rel[1];
        }
        cfd = tcp_listen(a.listen ? a.listen : E2B_CONTROL_LISTEN_DEFAULT, "--e2b-listen",
                         srv.control_addr, sizeof(srv.control_addr));
        if (cfd < 0) {
                r = cfd;
                goto finish;
        }
        efd = tcp_listen(a.envd_listen ? a.envd_listen : E2B_ENVD_LISTEN_DEFAULT,
                         "--e2b-envd-listen", srv.envd_addr, sizeof(srv.envd_addr));
        if (efd < 0) {
                r = efd;
                goto finish;
        }
        /* The readiness lines: tests and scripts wait for them. */
        (void)printf("e2b api on http://%s\n", srv.control_addr);
        (void)printf("e2b envd on http://%s\n", srv.envd_addr);
        (void)fflush(stdout);

        for (;;) {
                struct pollfd p[4] = {
                        {.fd = sfd, .events = POLLIN},
                        {.fd = !evicting ? cfd : -1, .events = POLLIN},
                        {.fd = !evicting ? efd : -1, .events = POLLIN},
                        {.fd = rfd, .events = POLLIN},
                };
                struct signalfd_siginfo si;
                bool stop = false;
                pid_t released;
                uint64_t now;

                if (poll(p, 4, 500) < 0 && errno != EINTR) {
                        r = log_error_errno(negative_errno(), "poll: %m");
                        break;
                }
                while (read(sfd, &si, sizeof(si)) == sizeof(si))
                        if (si.ssi_signo != SIGCHLD)
                                stop = true;
                /* Forks whose client went while their command goes on:
                 * off the connection slots (before the reaping below, so
                 * that a fork's message is seen while it is still ours). */
                while (recv(rfd, &released, sizeof(released), MSG_DONTWAIT) ==
                       (ssize_t)sizeof(released)) {
                        bool ours = false;

                        for (size_t k = 0; k < kids.n; k++)
                                ours = ours || kids.pids[k] == released;
                        if (!ours || background.n >= E2B_BACKGROUND_MAX ||
                            children_add(&background, released) < 0)
                                continue;
                        children_remove(&kids, released);
                        evicting = false;
                }
                for (;;) {
                        pid_t pid = waitpid(-1, NULL, WNOHANG);

                        if (pid <= 0)
                                break;
                        if (pid == sweeper)
                                sweeper = 0;
                        else {
                                children_remove(&kids, pid);
                                children_remove(&background, pid);
                                evicting = false;
                        }
                }
                if (stop)
                        break;
                /* Every slot taken and a client waiting: the idle
                 * keep-alive connections make room (on_evict()); until
                 * one of the forks ends, the listeners are not polled. */
                if (kids.n >= E2B_CONNECTIONS_MAX && !evicting &&
                    ((p[1].revents | p[2].revents) & POLLIN)) {
                        for (size_t k = 0; k < kids.n; k++)
                                (void)kill(kids.pids[k], SIGUSR1);
                        evicting = true;
                }
                for (int i = 1; i < 3 && kids.n < E2B_CONNECTIONS_MAX; i++) {
                        int closing[4] = {sfd, cfd, efd, rfd}, fd;
                        pid_t pid;

                        if (!(p[i].revents & POLLIN))
                                continue;
                        fd = accept4(p[i].fd, NULL, NULL, SOCK_CLOEXEC);
                        if (fd < 0)
                                continue;
                        pid = spawn(&old_mask, closing, ELEMENTSOF(closing));
                        if (pid == 0)
                                serve_connection(&srv, fd, i == 2);
                        (void)close(fd);
                        if (pid < 0) {
                                log_error_errno((int)pid, "cannot fork for a connection: %m");
                                continue;
                        }
                        if (children_add(&kids, pid) < 0) {
                                (void)kill(pid, SIGKILL);
                                (void)waitpid(pid, NULL, 0);
                        }
                }
                /* Lifetimes: the sweep runs in a fork of its own (it
                 * stops and destroys sandboxes, which takes a while). */
                now = time_realtime_ms();
                if (sweeper == 0 && now >= next_sweep) {
                        next_sweep = now + 250;
                        if (e2b_table_expired(&srv, now)) {
                                int closing[4] = {sfd, cfd, efd, rfd};
                                pid_t pid = spawn(&old_mask, closing, ELEMENTSOF(closing));

                                if (pid == 0) {
                                        e2b_table_sweep(&srv, now);
                                        _exit(0);
                                }
                                if (pid > 0)
                                        sweeper = pid;
                        }
                }
        }
        /* Shutdown (docs/e2b.md "When the server ends"): the connections'
         * forks end, then every E2B sandbox is destroyed. */
        for (size_t i = 0; i < kids.n; i++)
                (void)kill(kids.pids[i], SIGKILL);
        for (size_t i = 0; i < background.n; i++)
                (void)kill(background.pids[i], SIGKILL);
        if (sweeper > 0)
                (void)kill(sweeper, SIGKILL);
        while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
                ;
        e2b_table_destroy_all(&srv);
finish:
        e2b_table_close(&srv);
        free(kids.pids);
        free(background.pids);
        srv.release_fd = safe_close(srv.release_fd);
        free(srv.domain);
        free(srv.policy_json);
        strv_free(srv.allow_ceiling);
        free(srv.table_dir);
        return r < 0 ? HUTCH_EXIT_FAILURE : 0;
}
