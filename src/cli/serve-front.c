/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The front of hutch serve (serve.h): a gatekeeping relay between clients
 * (TCP, or the public unix socket) and evhttp's private unix socket. Per
 * connection:
 *
 *   client --(heads checked, bodies counted)--> inner (evhttp)
 *   client <------------(answers as they are)--- inner
 *
 * The inner connection is made when the first head passes, so a client
 * that never sends a good head never reaches evhttp at all. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <jansson.h>

#include "fd-util.h"
#include "macro.h"
#include "serve-preview.h"
#include "serve-ui.h"
#include "serve.h"

/* What a client's bufferevent reads ahead of the gate, and what may wait
 * in one direction before reading from the other side pauses. */
#define FRONT_READ_MAX (64U << 10)
#define FRONT_PENDING_MAX (256U << 10)

typedef enum FrontState {
        FRONT_HEAD,    /* reading a request head */
        FRONT_BODY,    /* passing the body announced by the last head */
        FRONT_REFUSED, /* answering an error; nothing more is read */
        FRONT_TUNNEL,  /* a preview's upgrade (serve-preview.h): bytes pass both ways as they are */
} FrontState;

typedef struct FrontConn {
        ServeFront *front;
        struct FrontConn *prev, *next;
        struct bufferevent *client, *inner; /* inner: NULL until a head passed */
        struct event *deadline;             /* armed while a head is being read */
        FrontState state;
        uint64_t body_left; /* FRONT_BODY: bytes still to pass */
        bool client_eof;    /* the client sent all it will */
        bool forbidden;     /* a peer of another uid: every head is refused */
        bool closing;       /* freed once the client's output is written */
        char *error;        /* FRONT_REFUSED: the answer, after the inner's */
        size_t len;         /* FRONT_HEAD: bytes of head[] so far */
        char head[SERVE_HEADERS_MAX];
        /* inner is this sandbox's port (conn_preview()) */
        bool preview;
        unsigned preview_port;
        char preview_name[SERVE_PREVIEW_NAME_MAX];
} FrontConn;

/* A connection that passed no head yet (it may hold no token): the one
 * kind front_evict_one() closes to make room. */
static bool conn_evictable(const FrontConn *c) {
        return !c->inner && !c->closing && c->state == FRONT_HEAD;
}

/* Listens while there is a free place, or one that a new connection can
 * take from a connection that passed no head yet; else new connections
 * wait in the kernel's listen queue. */
static void front_update_listener(ServeFront *f) {
        bool room = f->max == 0 || f->n < f->max;

        for (FrontConn *c = f->conns; !room && c; c = c->next)
                room = conn_evictable(c);
        if (!f->listener)
                return;
        if (room)
                (void)evconnlistener_enable(f->listener);
        else
                (void)evconnlistener_disable(f->listener);
}

static void conn_free(FrontConn *c) {
        ServeFront *f = c->front;

        if (c->prev)
                c->prev->next = c->next;
        else
                f->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        if (c->client)
                bufferevent_free(c->client);
        if (c->inner)
                bufferevent_free(c->inner);
        if (c->deadline)
                event_free(c->deadline);
        free(c->error);
        free(c);
        f->n--;
        front_update_listener(f);
}

/* Frees @c now when nothing waits for the client, else once written. */
static void conn_close(FrontConn *c) {
        c->closing = true;
        bufferevent_disable(c->client, EV_READ);
        if (c->inner)
                bufferevent_disable(c->inner, EV_READ);
        if (evbuffer_get_length(bufferevent_get_output(c->client)) == 0)
                conn_free(c);
}

static const char *reason(int status) {
        switch (status) {
        case 400:
                return "Bad Request";
        case 401:
                return "Unauthorized";
        case 405:
                return "Method Not Allowed";
        case 408:
                return "Request Timeout";
        case 411:
                return "Length Required";
        case 413:
                return "Payload Too Large";
        case 417:
                return "Expectation Failed";
        case 431:
                return "Request Header Fields Too Large";
        case 403:
                return "Forbidden";
        case 404:
                return "Not Found";
        case 409:
                return "Conflict";
        case 502:
                return "Bad Gateway";
        default:
                return "Service Unavailable";
        }
}

/* An answer with the API's JSON error (docs/api.md), closing. */
static char *json_answer(int status, const char *code, const char *msg) {
        _cleanup_free_ char *body = NULL, *text = NULL;
        json_t *j;

        j = json_pack("{s:{s:s,s:s,s:n}}", "error", "code", code, "message", msg, "field");
        body = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        if (!body)
                return NULL;
        if (asprintf(&text,
                     "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n%s\r\n%s\n",
                     status, reason(status), strlen(body) + 1,
                     status == 401 ? "WWW-Authenticate: Bearer\r\n" : "", body) < 0)
                return NULL;
        return TAKE_PTR(text);
}

/* A redirect of a browser without a session to the login page. */
static char *redirect_answer(const char *location) {
        char *text = NULL;

        if (asprintf(&text,
                     "HTTP/1.1 303 See Other\r\nLocation: %s\r\nContent-Length: 0\r\n"
                     "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
                     location) < 0)
                return NULL;
        return text;
}

/* The answer to a refused head. */
static char *error_answer(ServeHeadVerdict v) {
        const char *code, *msg;
        char buf[160];
        int status;

        switch (v) {
        case SERVE_HEAD_NO_TOKEN:
                status = 401, code = "unauthorized", msg = "a bearer token is required";
                break;
        case SERVE_HEAD_WRONG_TOKEN:
                status = 401, code = "unauthorized", msg = "wrong bearer token";
                break;
        case SERVE_HEAD_TOO_LARGE:
                (void)snprintf(buf, sizeof(buf),
                               "the request line and headers are larger than %u bytes",
                               SERVE_HEADERS_MAX);
                status = 431, code = "too_large", msg = buf;
                break;
        case SERVE_HEAD_BAD_METHOD:
                status = 405, code = "method_not_allowed", msg = "unknown method";
                break;
        case SERVE_HEAD_CHUNKED:
                status = 411, code = "length_required",
                msg = "a request body needs Content-Length (Transfer-Encoding is not supported)";
                break;
        case SERVE_HEAD_BODY_TOO_LARGE:
                (void)snprintf(buf, sizeof(buf), "the request body is larger than %u bytes",
                               SERVE_BODY_MAX);
                status = 413, code = "too_large", msg = buf;
                break;
        case SERVE_HEAD_EXPECTATION:
                status = 417, code = "expectation_failed",
                msg = "only 'Expect: 100-continue' is supported";
                break;
        case SERVE_HEAD_OK:
                status = 503, code = "unavailable", msg = "the server cannot take this request now";
                break;
        case SERVE_HEAD_MALFORMED:
        case _SERVE_HEAD_VERDICT_MAX:
        case _SERVE_HEAD_VERDICT_INVALID:
        default:
                status = 400, code = "invalid_argument", msg = "malformed request line or headers";
                break;
        }
        return json_answer(status, code, msg);
}

static const char oom_answer[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                                 "Connection: close\r\n\r\n";

/* Refuses the current head with @answer (taken; NULL: out of memory):
 * it goes after whatever the inner connection still sends (answers to
 * earlier requests), then the connection closes. May free @c. */
static void conn_refuse_with(FrontConn *c, char *answer) {
        c->state = FRONT_REFUSED;
        c->error = answer;
        bufferevent_disable(c->client, EV_READ);
        if (!c->inner) {
                const char *a = c->error ? c->error : oom_answer;

                (void)bufferevent_write(c->client, a, strlen(a));
                conn_close(c);
                return;
        }
        /* evhttp finishes what it was sent, sees the end and closes. */
        if (evbuffer_get_length(bufferevent_get_output(c->inner)) == 0)
                (void)shutdown(bufferevent_getfd(c->inner), SHUT_WR);
}

static void conn_refuse(FrontConn *c, ServeHeadVerdict v) {
        conn_refuse_with(c, error_answer(v));
}

static void inner_read_cb(struct bufferevent *bev, void *arg);
static void inner_write_cb(struct bufferevent *bev, void *arg);
static void inner_event_cb(struct bufferevent *bev, short what, void *arg);

/* The connection to evhttp, as this server's own user. */
static int conn_connect_inner(FrontConn *c) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        _cleanup_close_ int fd = -EBADF;

        if (strlen(c->front->inner_path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, c->front->inner_path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return negative_errno();
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                return negative_errno();
        c->inner = bufferevent_socket_new(c->front->base, fd, BEV_OPT_CLOSE_ON_FREE);
        if (!c->inner)
                return -ENOMEM;
        TAKE_FD(fd);
        bufferevent_setcb(c->inner, inner_read_cb, inner_write_cb, inner_event_cb, c);
        /* The write callback runs when what waits for evhttp fell below half. */
        bufferevent_setwatermark(c->inner, EV_WRITE, FRONT_PENDING_MAX / 2, 0);
        return bufferevent_enable(c->inner, EV_READ | EV_WRITE) < 0 ? -EIO : 0;
}

/* A preview head (serve-preview.h) that passed the checks: the
 * connection goes to the sandbox's port, with the rewritten head. The
 * connection stays the sandbox port's (keep-alive): each later request on
 * it is a head checked as any other (the token, the limits), for the same
 * sandbox and port, rewritten and passed on, its body counted; the
 * answers pass back as bytes, in order. A head with an upgrade makes it a
 * tunnel of bytes both ways. A preview is the first request of its
 * connection (the answers of evhttp and of the sandbox would otherwise
 * interleave). Returns 1 when it passed the head on, 2 when it refused
 * (@c may be freed), -errno.
 * NEEDSWORK: hutch_port_connect() asks the keeper, which forks a child
 * into the sandbox's namespaces: a few milliseconds during which this loop
 * waits. */
static int conn_preview(FrontConn *c, size_t end, const ServeHead *h, const char *name,
                        unsigned port, size_t rest) {
        _cleanup_free_ char *head = NULL;
        _cleanup_close_ int fd = -EBADF;
        hutch_error err = {};
        size_t head_len;
        int r;

        if (c->inner && !c->preview) {
                conn_refuse_with(c, json_answer(400, "invalid_argument",
                                                "a preview request must be the first of its "
                                                "connection"));
                return 2;
        }
        if (c->preview) {
                if (strcmp(name, c->preview_name) != 0 || port != c->preview_port) {
                        conn_refuse_with(c, json_answer(400, "invalid_argument",
                                                        "a preview connection carries the "
                                                        "requests of one sandbox port only"));
                        return 2;
                }
                r = serve_preview_head(c->head, end, h->target, h->target_len, rest, &head,
                                       &head_len);
                if (r < 0)
                        return r;
                if (bufferevent_write(c->inner, head, head_len) < 0)
                        return -ENOMEM;
                (void)evtimer_del(c->deadline);
                goto passed;
        }
        r = hutch_port_connect(name, port, &fd, &err);
        if (r < 0) {
                int status = err.code == ENOENT         ? 404
                             : err.code == ENOTCONN     ? 409
                             : err.code == ECONNREFUSED ? 502
                                                        : 503;
                const char *code = status == 404   ? "not_found"
                                   : status == 409 ? "conflict"
                                   : status == 502 ? "bad_gateway"
                                                   : "unavailable";

                conn_refuse_with(c, json_answer(status, code, err.message));
                return 2;
        }
        r = serve_preview_head(c->head, end, h->target, h->target_len, rest, &head, &head_len);
        if (r < 0)
                return r;
        c->inner = bufferevent_socket_new(c->front->base, fd, BEV_OPT_CLOSE_ON_FREE);
        if (!c->inner)
                return -ENOMEM;
        TAKE_FD(fd);
        bufferevent_setcb(c->inner, inner_read_cb, inner_write_cb, inner_event_cb, c);
        bufferevent_setwatermark(c->inner, EV_WRITE, FRONT_PENDING_MAX / 2, 0);
        if (bufferevent_enable(c->inner, EV_READ | EV_WRITE) < 0 ||
            bufferevent_write(c->inner, head, head_len) < 0)
                return -EIO;
        (void)evtimer_del(c->deadline);
        c->preview = true;
        c->preview_port = port;
        (void)snprintf(c->preview_name, sizeof(c->preview_name), "%s", name);
        front_update_listener(c->front);
        /* An open WebSocket, a long poll or a stream of events may be
         * quiet for long: only writes time out (the server inside ends
         * an idle connection). */
        {
                struct timeval tv = {.tv_sec = SERVE_TIMEOUT_S};

                bufferevent_set_timeouts(c->client, NULL, &tv);
        }
passed:
        if (serve_head_has_upgrade(c->head, end)) {
                c->state = FRONT_TUNNEL;
                return 1;
        }
        c->body_left = h->body_len;
        c->state = h->body_len > 0 ? FRONT_BODY : FRONT_HEAD;
        return 1;
}

/* SECURITY: a head must arrive whole within SERVE_HEAD_DEADLINE_S of its
 * first byte (of the accept, for the first one), however slowly it
 * trickles in: otherwise clients without a token could hold every slot of
 * --max-connections with a byte now and then (the idle timeout alone
 * restarts at each byte). Answered 408, then closed. */
static void deadline_cb(evutil_socket_t fd, short what, void *arg) {
        FrontConn *c = arg;

        if (c->closing || c->state != FRONT_HEAD)
                return;
        conn_refuse_with(
                c, json_answer(408, "request_timeout", "the request head did not arrive in time"));
}

/* Arms @c's head deadline unless it is armed already. */
static void conn_arm_deadline(FrontConn *c) {
        struct timeval tv = {.tv_sec = SERVE_HEAD_DEADLINE_S};

        if (!evtimer_pending(c->deadline, NULL))
                (void)evtimer_add(c->deadline, &tv);
}

/* At the connection cap: closes the oldest connection that has not yet
 * passed a head (one that may hold no token), so that a client with the
 * token always gets a slot. Returns true when one was closed. */
static bool front_evict_one(ServeFront *f, const FrontConn *keep) {
        FrontConn *oldest = NULL;

        for (FrontConn *c = f->conns; c; c = c->next)
                if (c != keep && conn_evictable(c))
                        oldest = c; /* the list is newest first */
        if (!oldest)
                return false;
        conn_refuse_with(oldest,
                         json_answer(503, "unavailable", "too many connections; try again"));
        return true;
}

/* Reads head bytes; once the head is whole, checks it and passes it on or
 * refuses it. Returns 1 when it passed a head, 0 when it needs more bytes,
 * 2 when it refused it (@c may be freed), -errno on failure. */
static int conn_head(FrontConn *c, struct evbuffer *in) {
        size_t avail = evbuffer_get_length(in), room = sizeof(c->head) - c->len;
        size_t n = MIN(avail, room), from = c->len >= 2 ? c->len - 2 : 0, end;
        const uint8_t *token_sha;
        uint64_t body_max;
        bool by_session;
        ServeHead h;

        if (c->len == 0)
                conn_arm_deadline(c);
        if (evbuffer_copyout(in, c->head + c->len, n) != (ev_ssize_t)n)
                return -EIO;
        end = serve_head_end(c->head + from, c->len + n - from);
        if (end == 0) {
                if (evbuffer_drain(in, n) < 0)
                        return -EIO;
                c->len += n;
                if (c->len < sizeof(c->head))
                        return 0;
                conn_refuse(c, SERVE_HEAD_TOO_LARGE);
                return 2;
        }
        end += from;
        if (evbuffer_drain(in, end - c->len) < 0)
                return -EIO;
        c->len = 0;
        if (c->forbidden) {
                conn_refuse_with(c, json_answer(403, "permission_denied",
                                                "only the server's owner may use this socket"));
                return 2;
        }
        token_sha = c->front->token_sha;
        body_max = SERVE_BODY_MAX;
        by_session = false;
        if (c->front->ui && token_sha) {
                /* The dashboard's login gate (serve-ui.h). */
                switch (serve_ui_gate(c->front->ui, c->head, end, (uint64_t)time(NULL))) {
                case SERVE_UI_GATE_PUBLIC:
                        token_sha = NULL;
                        body_max = SERVE_UI_LOGIN_BODY_MAX;
                        break;
                case SERVE_UI_GATE_SESSION:
                        token_sha = NULL;
                        by_session = true;
                        break;
                case SERVE_UI_GATE_LOGIN:
                        conn_refuse_with(c, redirect_answer("/ui/login"));
                        return 2;
                case SERVE_UI_GATE_NO_CSRF:
                        conn_refuse_with(c, json_answer(403, "permission_denied",
                                                        "a change needs the session's CSRF token "
                                                        "(X-Hutch-CSRF)"));
                        return 2;
                case SERVE_UI_GATE_TOKEN:
                case _SERVE_UI_GATE_VERDICT_MAX:
                case _SERVE_UI_GATE_VERDICT_INVALID:
                        break;
                }
        }
        serve_head_check(c->head, end, token_sha, body_max, &h);
        if (h.verdict != SERVE_HEAD_OK) {
                conn_refuse(c, h.verdict);
                return 2;
        }
        {
                char name[SERVE_PREVIEW_NAME_MAX];
                unsigned port;
                size_t rest;

                /* DELETE .../ports/{port} itself (no path, no query after
                 * the port) unpublishes the port (serve-ports.c). */
                if (serve_preview_target(c->head + h.target, h.target_len, name, &port, &rest) &&
                    !(rest == h.target_len && end > 7 && memcmp(c->head, "DELETE ", 7) == 0)) {
                        /* SECURITY: a preview answered on the dashboard's
                         * origin would run the sandbox's pages with the
                         * operator's session (its cookie, /ui/session's
                         * CSRF token): the whole API. Through the
                         * dashboard's session, never (docs/ui.md). */
                        if (by_session) {
                                conn_refuse_with(
                                        c, json_answer(403, "permission_denied",
                                                       "a preview is not served to the "
                                                       "dashboard's session (it would run the "
                                                       "sandbox's pages on the dashboard's "
                                                       "origin): use the token, or the "
                                                       "published port"));
                                return 2;
                        }
                        return conn_preview(c, end, &h, name, port, rest);
                }
        }
        if (c->preview) {
                conn_refuse_with(c, json_answer(400, "invalid_argument",
                                                "this connection carries a preview: an API "
                                                "request needs a connection of its own"));
                return 2;
        }
        if (c->front->upgrade && !c->inner) {
                int u = c->front->upgrade(c->front->upgrade_data, c->client, c->head, end);

                if (u == 2) {
                        /* The hook's connection now (serve-ws.c). */
                        c->client = NULL;
                        conn_free(c);
                        return 2;
                }
                if (u == 1) {
                        c->state = FRONT_REFUSED;
                        conn_close(c);
                        return 2;
                }
                if (u < 0) {
                        conn_refuse(c, SERVE_HEAD_OK); /* 503 */
                        return 2;
                }
        }
        if (!c->inner && conn_connect_inner(c) < 0) {
                conn_refuse(c, SERVE_HEAD_OK); /* 503: evhttp cannot be reached */
                return 2;
        }
        if (bufferevent_write(c->inner, c->head, end) < 0)
                return -ENOMEM;
        (void)evtimer_del(c->deadline);
        front_update_listener(c->front);
        c->body_left = h.body_len;
        c->state = h.body_len > 0 ? FRONT_BODY : FRONT_HEAD;
        return 1;
}

/* Moves what the client sent through the gate, as far as the inner
 * connection takes it. May free @c. */
static void conn_pump_client(FrontConn *c) {
        struct evbuffer *in = bufferevent_get_input(c->client);

        while (!c->closing && c->state != FRONT_REFUSED && evbuffer_get_length(in) > 0) {
                if (c->inner &&
                    evbuffer_get_length(bufferevent_get_output(c->inner)) >= FRONT_PENDING_MAX) {
                        /* inner_write_cb() goes on. */
                        bufferevent_disable(c->client, EV_READ);
                        return;
                }
                if (c->state == FRONT_TUNNEL) {
                        if (bufferevent_write_buffer(c->inner, in) < 0) {
                                conn_close(c);
                                return;
                        }
                        continue;
                }
                if (c->state == FRONT_HEAD) {
                        int r = conn_head(c, in);

                        if (r < 0) {
                                conn_close(c);
                                return;
                        }
                        if (r == 2)
                                return;
                        if (r == 0)
                                break;
                        continue;
                }
                {
                        size_t n = (size_t)MIN((uint64_t)evbuffer_get_length(in), c->body_left);

                        if (evbuffer_remove_buffer(in, bufferevent_get_output(c->inner), n) !=
                            (int)n) {
                                conn_close(c);
                                return;
                        }
                        c->body_left -= n;
                        if (c->body_left == 0)
                                c->state = FRONT_HEAD;
                }
        }
        if (c->client_eof && c->state != FRONT_REFUSED && !c->closing) {
                /* The client is done: so is evhttp, once it answered. */
                if (!c->inner) {
                        conn_close(c);
                        return;
                }
                if (evbuffer_get_length(bufferevent_get_output(c->inner)) == 0)
                        (void)shutdown(bufferevent_getfd(c->inner), SHUT_WR);
                return;
        }
        if (!c->closing && c->state != FRONT_REFUSED)
                bufferevent_enable(c->client, EV_READ);
}

static void client_read_cb(struct bufferevent *bev, void *arg) {
        conn_pump_client(arg);
}

static void client_write_cb(struct bufferevent *bev, void *arg) {
        FrontConn *c = arg;

        if (c->closing) {
                if (evbuffer_get_length(bufferevent_get_output(c->client)) == 0)
                        conn_free(c);
                return;
        }
        /* The client took what waited: evhttp's answers may go on. */
        if (c->inner)
                bufferevent_enable(c->inner, EV_READ);
}

static void client_event_cb(struct bufferevent *bev, short what, void *arg) {
        FrontConn *c = arg;

        /* Idle while evhttp works on a request or keeps the connection
         * (its own timeouts close it): only a client that never sent a
         * good head is timed out here. */
        if ((what & BEV_EVENT_TIMEOUT) && (what & BEV_EVENT_READING) && c->inner &&
            c->state == FRONT_HEAD && c->len == 0 && !c->closing) {
                bufferevent_enable(c->client, EV_READ);
                return;
        }

        if ((what & BEV_EVENT_EOF) && !(what & BEV_EVENT_ERROR) && !c->closing) {
                c->client_eof = true;
                bufferevent_disable(c->client, EV_READ);
                conn_pump_client(c);
                return;
        }
        /* A reset, or an error: nothing can be delivered any more. */
        conn_free(c);
}

static void inner_read_cb(struct bufferevent *bev, void *arg) {
        FrontConn *c = arg;
        struct evbuffer *out = bufferevent_get_output(c->client);

        if (evbuffer_add_buffer(out, bufferevent_get_input(bev)) < 0) {
                conn_free(c);
                return;
        }
        /* client_write_cb() resumes once the client took it. */
        if (evbuffer_get_length(out) >= FRONT_PENDING_MAX)
                bufferevent_disable(bev, EV_READ);
}

static void inner_write_cb(struct bufferevent *bev, void *arg) {
        FrontConn *c = arg;

        if (c->closing)
                return;
        if (c->state == FRONT_REFUSED || c->client_eof) {
                if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
                        (void)shutdown(bufferevent_getfd(bev), SHUT_WR);
                if (c->state == FRONT_REFUSED)
                        return;
        }
        conn_pump_client(c);
}

static void inner_event_cb(struct bufferevent *bev, short what, void *arg) {
        FrontConn *c = arg;
        struct evbuffer *out = bufferevent_get_output(c->client);

        /* evhttp closed (after an answer with "Connection: close", a
         * timeout, or our end): what it sent goes to the client, then the
         * refusal if there is one, then the connection closes. */
        (void)evbuffer_add_buffer(out, bufferevent_get_input(bev));
        if (c->state == FRONT_REFUSED && c->error)
                (void)evbuffer_add(out, c->error, strlen(c->error));
        c->error = mfree(c->error);
        bufferevent_free(c->inner);
        c->inner = NULL;
        conn_close(c);
}

static void accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
                      void *arg) {
        ServeFront *f = arg;
        FrontConn *c;

        c = malloc(sizeof(FrontConn));
        if (!c) {
                (void)close(fd);
                return;
        }
        *c = (FrontConn){.front = f, .state = FRONT_HEAD, .next = f->conns};
        c->client = bufferevent_socket_new(f->base, fd, BEV_OPT_CLOSE_ON_FREE);
        if (!c->client) {
                (void)close(fd);
                free(c);
                return;
        }
        if (f->conns)
                f->conns->prev = c;
        f->conns = c;
        f->n++;
        c->deadline = evtimer_new(f->base, deadline_cb, c);
        if (!c->deadline) {
                conn_free(c);
                return;
        }
        /* Over the cap, the oldest connection that passed no head yet
         * makes room; when every place holds a passed head, new
         * connections wait in the kernel's listen queue until one closes
         * (front_update_listener()). Connections accepted in one burst
         * before the listener stopped may pass the cap by those few. */
        if (f->max > 0 && f->n > f->max)
                (void)front_evict_one(f, c);
        front_update_listener(f);
        if (f->owner_only) {
                struct ucred cred;
                socklen_t clen = sizeof(cred);

                /* SECURITY: the socket is 0600 in a 0700 directory already;
                 * the peer's uid is checked as well, as the keeper does: its
                 * head is read (to answer it) and refused. */
                c->forbidden = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0 ||
                               cred.uid != geteuid();
        }
        bufferevent_setcb(c->client, client_read_cb, client_write_cb, client_event_cb, c);
        /* SECURITY: what is read ahead of the gate is bounded: reading
         * stops when this much waits. */
        bufferevent_setwatermark(c->client, EV_READ, 0, FRONT_READ_MAX);
        {
                struct timeval tv = {.tv_sec = SERVE_TIMEOUT_S};

                /* A client that sends or takes nothing for this long goes. */
                bufferevent_set_timeouts(c->client, &tv, &tv);
        }
        conn_arm_deadline(c);
        if (bufferevent_enable(c->client, EV_READ | EV_WRITE) < 0)
                conn_free(c);
}

int serve_front_listen(ServeFront *f, int fd) {
        f->listener = evconnlistener_new(f->base, accept_cb, f,
                                         LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fd);
        if (!f->listener) {
                (void)close(fd);
                return -ENOMEM;
        }
        return 0;
}

void serve_front_stop(ServeFront *f) {
        if (f->listener)
                evconnlistener_free(f->listener);
        f->listener = NULL;
        while (f->conns)
                conn_free(f->conns);
}
