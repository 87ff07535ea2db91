/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>

#include "dns-server.h"
#include "exchange.h"
#include "http-message.h"
#include "intercept.h"
#include "log.h"
#include "proxy-request.h"
#include "proxy-server.h"
#include "secrets.h"
#include "tunnel.h"

/* Addresses tried per request, in resolver order. */
#define CANDIDATES_MAX 16
#define BEV_MAX_SINGLE_READ (64 * 1024)
#define REASON_MAX 1024
#define ACCEPT_RETRY_MS 500
/* After the last response: how long unread client bytes are discarded
 * before close(), so the kernel does not answer them with a reset that
 * could destroy the response in flight. */
#define LINGER_MS 2000

typedef struct Conn Conn;

typedef enum ConnState {
        CONN_HEAD,         /* reading a request head */
        CONN_RESOLVING,    /* allowed; waiting for DNS */
        CONN_CONNECTING,   /* waiting for the upstream connection */
        CONN_FORWARDING,   /* request and response of an absolute-URI exchange in flight */
        CONN_TUNNEL_FLUSH, /* CONNECT answered; waiting for the 200 to be written */
        CONN_TUNNEL,       /* splicing bytes both ways */
        CONN_INTERCEPT,    /* handed over to intercept.c (a secret's host) */
        CONN_CLOSING,      /* flushing a final response */
        CONN_LINGER,       /* response written and shut down; discarding input until EOF */
        CONN_DEAD,         /* released; the struct is freed by the reaper */
} ConnState;

typedef enum TimerKind {
        TIMER_NONE,
        TIMER_DNS,     /* resolution deadline */
        TIMER_CLOSING, /* the client must read our last response by then */
} TimerKind;

typedef struct DnsQuery {
        Conn *conn; /* NULL once the connection gave up on it */
        struct evdns_getaddrinfo_request *req;
        bool in_start;   /* inside evdns_getaddrinfo() */
        bool done_early; /* the callback ran inside evdns_getaddrinfo() */
        int result;
        struct evutil_addrinfo *res;
} DnsQuery;

struct Conn {
        Proxy *proxy;
        Conn *prev, *next;
        ConnState state;
        TimerKind timer_kind;
        int fd;
        struct bufferevent *bev;
        struct event *timer; /* the states' deadlines; exchange.c has the head's */

        /* The HTTP exchange machine (exchange.h): the request and response
         * messages, the head deadline, the audit line's shared part (method,
         * status, byte counts), the upstream's EOF. */
        Exchange ex;
        ProxyRequest target;
        bool keep_alive; /* the client keeps the connection after this exchange */

        /* The exchange being decided or served; an audit line is owed
         * while ex.in_exchange is set. */
        bool decided; /* the allowlist allowed it */
        char rule[HOST_PATTERN_STRING_MAX];
        char address[NET_ADDR_STRING_MAX];

        DnsQuery *dns;
        NetAddr candidates[CANDIDATES_MAX];
        size_t n_candidates, next_candidate;
        char connect_error[160];
        bool connect_timed_out;

        /* The upstream connection; it survives an exchange when both sides
         * keep alive and the next request is for the same host and port. */
        int up_fd;
        struct bufferevent *up_bev;
        Host up_host;
        uint16_t up_port;
        char up_address[NET_ADDR_STRING_MAX];
        bool up_idle;

        Tunnel tunnel; /* a CONNECT's opaque tunnel (tunnel.h) */

        /* Transparent DNS: a connection to a name's synthetic address,
         * served as a CONNECT to that name and port that was never written:
         * no HTTP from us either way (a refusal closes it). */
        bool transparent;

        /* Credential brokering: the CONNECT is for a secret's host. */
        bool intercept;
        Intercept *icpt;
        const char *secret; /* a tripwire's secret name, for the audit line */
};

struct Proxy {
        const ProxyConfig *config;
        struct event_base *base;
        struct evdns_base *dns;
        Audit *audit;
        TlsMint *mint; /* NULL without secrets */
        struct evconnlistener *listeners[PROXY_LISTEN_FDS_MAX];
        size_t n_listeners;
        bool listeners_paused;
        struct event *accept_retry;
        struct event *reaper;
        Conn *conns;
        Conn *dead;
        unsigned n_conns;
        bool audit_warned;
        /* --dns-transparent: the names as the proxy started (listeners
         * exist for these only), and the resolver. */
        DnsTable dns_table;
        DnsServer *dns_servers[PROXY_LISTEN_FDS_MAX];
        size_t n_dns_servers;
};

static void conn_connect_next(Conn *c);
static void conn_start_intercept(Conn *c);

static struct timeval ms_to_timeval(uint64_t ms) {
        return (struct timeval){.tv_sec = (time_t)(ms / 1000),
                                .tv_usec = (suseconds_t)((ms % 1000) * 1000)};
}

static void listeners_set(Proxy *p, bool enable) {
        if (p->listeners_paused == !enable)
                return;
        for (size_t i = 0; i < p->n_listeners; i++)
                (void)(enable ? evconnlistener_enable(p->listeners[i])
                              : evconnlistener_disable(p->listeners[i]));
        p->listeners_paused = !enable;
}

static void conn_arm_timer(Conn *c, TimerKind kind, uint64_t ms) {
        struct timeval tv = ms_to_timeval(ms);

        c->timer_kind = kind;
        (void)evtimer_add(c->timer, &tv);
}

static void conn_stop_timer(Conn *c) {
        if (c->timer_kind == TIMER_NONE)
                return;
        c->timer_kind = TIMER_NONE;
        (void)evtimer_del(c->timer);
}

/* Writes the audit line of the current exchange, once. */
static void conn_audit(Conn *c, AuditDecision decision, const char *reason) {
        Proxy *p = c->proxy;
        AuditRecord r;
        int k;

        r = (AuditRecord){
                .host = c->target.host.name[0] ? c->target.host.name : NULL,
                .port = c->target.port,
                .address = c->address[0] ? c->address : NULL,
                .decision = decision,
                .rule = c->rule[0] ? c->rule : NULL,
                .reason = reason,
                .intercepted = c->intercept,
                .secret = c->secret,
        };
        k = exchange_audit(&c->ex, p->audit, &r);
        if (k < 0 && !p->audit_warned) {
                p->audit_warned = true;
                log_warning_errno(k, "failed to write the audit log: %m");
        }
}

static void conn_begin_exchange(Conn *c) {
        exchange_begin(&c->ex);
        c->decided = false;
        c->rule[0] = c->address[0] = '\0';
        c->target = (ProxyRequest){};
        c->connect_error[0] = '\0';
        c->connect_timed_out = false;
        c->intercept = false;
        c->secret = NULL;
}

static void conn_cancel_dns(Conn *c) {
        DnsQuery *q = c->dns;

        if (!q)
                return;
        c->dns = NULL;
        /* The callback still runs (with EVUTIL_EAI_CANCEL) and frees @q. */
        q->conn = NULL;
        evdns_getaddrinfo_cancel(q->req);
}

static void conn_drop_upstream(Conn *c) {
        if (c->up_bev) {
                bufferevent_free(c->up_bev);
                c->up_bev = NULL;
        }
        c->ex.up = NULL;
        c->up_fd = safe_close(c->up_fd);
        c->up_idle = false;
        c->ex.up_eof = false;
}

static void reaper_cb(evutil_socket_t fd, short what, void *arg) {
        Proxy *p = arg;

        while (p->dead) {
                Conn *c = p->dead;

                p->dead = c->next;
                intercept_free(c->icpt);
                free(c);
        }
}

/* Releases everything @c holds and queues the struct for freeing, so
 * callers up the stack may still test c->state == CONN_DEAD. */
static void conn_close(Conn *c) {
        Proxy *p = c->proxy;

        if (c->state == CONN_DEAD)
                return;
        if (c->ex.in_exchange)
                conn_audit(c, c->decided ? AUDIT_ALLOW : AUDIT_ERROR,
                           "the connection closed before the exchange completed");
        conn_cancel_dns(c);
        /* The tunnel's events go before the fds they watch: freeing an event
         * on an already closed fd makes epoll complain (EBADF). */
        tunnel_release(&c->tunnel);
        conn_drop_upstream(c);
        if (c->bev) {
                bufferevent_free(c->bev);
                c->bev = NULL;
        }
        c->ex.cl = NULL;
        c->fd = safe_close(c->fd);
        if (c->timer) {
                event_free(c->timer);
                c->timer = NULL;
        }
        exchange_done(&c->ex);

        if (c->prev)
                c->prev->next = c->next;
        else
                p->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        p->n_conns--;
        if (p->n_conns < p->config->max_connections &&
            !event_pending(p->accept_retry, EV_TIMEOUT, NULL))
                listeners_set(p, true);

        c->state = CONN_DEAD;
        c->prev = NULL;
        c->next = p->dead;
        p->dead = c;
        event_active(p->reaper, 0, 0);
}

/* The final response is written: shut down our side and discard what the
 * client still sends, until its EOF or LINGER_MS. */
static void conn_linger(Conn *c) {
        struct evbuffer *in = bufferevent_get_input(c->bev);

        (void)shutdown(c->fd, SHUT_WR);
        (void)evbuffer_drain(in, evbuffer_get_length(in));
        c->state = CONN_LINGER;
        conn_stop_timer(c);
        conn_arm_timer(c, TIMER_CLOSING, LINGER_MS);
        (void)bufferevent_enable(c->bev, EV_READ);
}

/* Closes once the client output buffer is written (or the client stops
 * reading for the header timeout). */
static void conn_close_after_flush(Conn *c) {
        conn_cancel_dns(c);
        conn_drop_upstream(c);
        if (!c->bev) {
                conn_close(c);
                return;
        }
        if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0) {
                conn_linger(c);
                return;
        }
        c->state = CONN_CLOSING;
        (void)bufferevent_disable(c->bev, EV_READ);
        conn_stop_timer(c);
        conn_arm_timer(c, TIMER_CLOSING, c->proxy->config->header_timeout_ms);
}

/* Back to reading the next request on a kept-alive connection. */
static void conn_next_request(Conn *c) {
        c->state = CONN_HEAD;
        conn_stop_timer(c);
        exchange_await_request(&c->ex, c->proxy->config->idle_timeout_ms);
}

/* Ends the exchange with an answer of our own: audited, then either the
 * connection goes on (@keep) or closes after the answer is written. */
static void conn_answer(Conn *c, AuditDecision decision, unsigned status, const char *text,
                        const char *reason, bool keep) {
        if (c->transparent) {
                /* The client speaks its own protocol: no HTTP answer, the
                 * connection just closes (the audit line says why). */
                c->ex.status = status;
                conn_audit(c, decision, reason);
                conn_close(c);
                return;
        }
        (void)exchange_answer_text(&c->ex, status, text, keep);
        conn_audit(c, decision, reason);
        if (keep)
                conn_next_request(c);
        else
                conn_close_after_flush(c);
}

/* Refuses the request for @reason (audited as it is); the body adds @hint,
 * the flag that would allow it, as `hutch run` says it after the command
 * (docs/network.md, "Refusals"). */
static void conn_deny_hint(Conn *c, const char *reason, const char *hint) {
        _cleanup_free_ char *text = NULL;
        /* A denied absolute-URI request without a body leaves the
         * connection in a known state: the client may try another host. */
        bool keep = c->target.kind == PROXY_REQUEST_FORWARD &&
                    c->ex.req.state == HTTP_MESSAGE_DONE && c->keep_alive;

        if (asprintf(&text, "denied: %s%s%s", reason, hint ? "; allow it with " : "", hint ?: "") <
            0)
                text = NULL;
        conn_answer(c, AUDIT_DENY, 403, text ?: "denied", reason, keep);
}

static void conn_deny(Conn *c, const char *reason) {
        conn_deny_hint(c, reason, NULL);
}

static void conn_fail(Conn *c, unsigned status, const char *reason) {
        conn_answer(c, c->decided ? AUDIT_ALLOW : AUDIT_ERROR, status, reason, reason, false);
}

static void conn_exchange_done(Conn *c) {
        bool reusable = c->up_bev && !c->ex.up_eof && http_message_keep_alive(&c->ex.resp) &&
                        c->ex.req.state == HTTP_MESSAGE_DONE &&
                        evbuffer_get_length(bufferevent_get_input(c->up_bev)) == 0;
        struct timeval idle = ms_to_timeval(c->proxy->config->idle_timeout_ms);

        conn_audit(c, AUDIT_ALLOW, NULL);
        if (reusable) {
                /* Keep reading it so a close by the server is noticed. */
                c->up_idle = true;
                (void)bufferevent_set_timeouts(c->up_bev, &idle, NULL);
        } else
                conn_drop_upstream(c);

        if (c->ex.close_after) {
                conn_close_after_flush(c);
                return;
        }
        conn_next_request(c);
}

/* Sends a built head, or fails the exchange if it could not be built. */
static int conn_add_head(struct bufferevent *bev, int r, char *head, size_t len,
                         uint64_t *counter) {
        if (r < 0)
                return r;
        r = exchange_send_now(bev, head, len);
        free(head);
        if (r < 0)
                return r;
        *counter += len;
        return 0;
}

/* Passes a complete response head on to the client (the exchange machine
 * re-arms the parser after an interim one). Returns 0, or -EBADMSG after
 * failing the exchange. */
static int conn_response_head(Conn *c) {
        unsigned code = http_message_status_code(&c->ex.resp);
        bool interim = code < 200;
        char *head = NULL;
        size_t len = 0;
        int r;

        r = proxy_response_build_head(
                &c->ex.resp, !interim && c->ex.close_after ? RESPONSE_HEAD_CLOSE : 0, &head, &len);
        r = conn_add_head(c->bev, r, head, len, &c->ex.bytes_down);
        if (r < 0) {
                exchange_fail(&c->ex, AUDIT_ALLOW, 502,
                              "bad response head from the upstream server", NULL);
                return -EBADMSG;
        }
        return 0;
}

static bool ex_forwarding(Exchange *e) {
        Conn *c = e->userdata;

        return c->state == CONN_FORWARDING;
}

static int ex_response_head(Exchange *e) {
        return conn_response_head(e->userdata);
}

static void ex_done(Exchange *e) {
        conn_exchange_done(e->userdata);
}

static void ex_answer(Exchange *e, AuditDecision d, unsigned status, const char *reason,
                      const char *secret) {
        Conn *c = e->userdata;

        c->secret = secret;
        conn_answer(c, d, status, reason, reason, false);
}

static void ex_cut(Exchange *e, AuditDecision d, const char *reason, const char *secret) {
        Conn *c = e->userdata;

        /* Part of the response is out: all we can do is cut it short. */
        c->secret = secret;
        conn_audit(c, d, reason);
        conn_close(c);
}

static void conn_handle_head(Conn *c);

static void ex_request_head(Exchange *e) {
        conn_handle_head(e->userdata);
}

static void ex_request_refused(Exchange *e, unsigned status, const char *reason) {
        Conn *c = e->userdata;

        conn_stop_timer(c);
        conn_begin_exchange(c);
        conn_answer(c, AUDIT_ERROR, status, reason, reason, false);
}

static void ex_idle(Exchange *e) {
        conn_close(e->userdata);
}

/* The plain path: bodies pass verbatim; the checks were all made on the
 * head (conn_handle_head()). */
static const ExchangeOps conn_exchange_ops = {
        .request_head = ex_request_head,
        .request_refused = ex_request_refused,
        .idle = ex_idle,
        .forwarding = ex_forwarding,
        .response_head = ex_response_head,
        .done = ex_done,
        .answer = ex_answer,
        .cut = ex_cut,
};

static void conn_tunnel_end(void *userdata, int error) {
        Conn *c = userdata;
        char reason[REASON_MAX];

        if (error != 0) {
                (void)snprintf(reason, sizeof(reason), "the tunnel ended with an error: %s",
                               strerror(error));
                conn_audit(c, AUDIT_ALLOW, reason);
        } else
                conn_audit(c, AUDIT_ALLOW, NULL);
        conn_close(c);
}

/* The 200 is out: leave the bufferevents and splice from now on. Bytes the
 * client sent early (a TLS ClientHello right behind the CONNECT) go first. */
static void conn_start_tunnel(Conn *c) {
        struct evbuffer *early = bufferevent_get_input(c->bev);
        size_t n_early = evbuffer_get_length(early);
        _cleanup_free_ char *buf = NULL;
        int r;

        if (n_early > 0) {
                buf = malloc(n_early);
                if (!buf || evbuffer_remove(early, buf, n_early) != (int)n_early) {
                        conn_tunnel_end(c, ENOMEM);
                        return;
                }
        }
        bufferevent_free(c->bev);
        c->bev = NULL;
        bufferevent_free(c->up_bev);
        c->up_bev = NULL;
        conn_stop_timer(c);

        c->state = CONN_TUNNEL;
        r = tunnel_start(&c->tunnel, c->proxy->base, c->fd, c->up_fd, buf, n_early, &c->ex.bytes_up,
                         &c->ex.bytes_down, conn_tunnel_end, c);
        if (r < 0)
                conn_tunnel_end(c, -r);
}

static void intercept_done(void *userdata) {
        conn_close(userdata);
}

/* The 200 is out and the host has secrets: terminate TLS (intercept.c).
 * The CONNECT's own audit line is written now; every request inside gets
 * one of its own. */
static void conn_start_intercept(Conn *c) {
        Proxy *p = c->proxy;
        InterceptParams ip;
        int r;

        if (evbuffer_get_length(bufferevent_get_input(c->bev)) > 0) {
                /* NEEDSWORK: a client that sends its ClientHello before the
                 * 200 arrives; libevent's socket TLS cannot take bytes
                 * already read. No common client does. */
                conn_audit(c, AUDIT_ERROR, "the client sent TLS data before the 200 of CONNECT");
                conn_close(c);
                return;
        }
        conn_audit(c, AUDIT_ALLOW, NULL);
        conn_stop_timer(c);
        bufferevent_free(c->bev);
        c->bev = NULL;
        bufferevent_free(c->up_bev);
        c->up_bev = NULL;
        ip = (InterceptParams){
                .base = p->base,
                .config = p->config,
                .audit = p->audit,
                .mint = p->mint,
                .host = c->target.host,
                .port = c->target.port,
                .address = c->address,
                .rule = c->rule,
                .done = intercept_done,
                .userdata = c,
        };
        c->state = CONN_INTERCEPT;
        r = intercept_start(&ip, TAKE_FD(c->fd), TAKE_FD(c->up_fd), &c->icpt);
        if (r < 0) {
                log_warning_errno(r, "failed to intercept a connection: %m");
                conn_close(c);
        }
}

/* The upstream connection is there (new or reused): answer a CONNECT or
 * send the request on. */
static void conn_upstream_ready(Conn *c) {
        static const char established[] = "HTTP/1.1 200 Connection established\r\n\r\n";
        struct timeval idle = ms_to_timeval(c->proxy->config->idle_timeout_ms);
        char *head = NULL;
        size_t len = 0;
        int r;

        c->up_idle = false;
        if (c->transparent) {
                c->ex.status = 200;
                if (c->intercept)
                        conn_start_intercept(c);
                else
                        conn_start_tunnel(c);
                return;
        }
        if (c->target.kind == PROXY_REQUEST_CONNECT) {
                c->ex.status = 200;
                c->state = CONN_TUNNEL_FLUSH;
                if (evbuffer_add(bufferevent_get_output(c->bev), established,
                                 sizeof(established) - 1) < 0) {
                        conn_fail(c, 500, "out of memory");
                        return;
                }
                /* client_write_cb() starts the tunnel once it is written. */
                return;
        }

        r = proxy_request_build_head(&c->ex.req, &c->target, !c->keep_alive, &head, &len);
        r = conn_add_head(c->up_bev, r, head, len, &c->ex.bytes_up);
        if (r < 0) {
                conn_fail(c, 400, "the request head cannot be forwarded");
                return;
        }
        c->state = CONN_FORWARDING;
        c->ex.cl = c->bev;
        c->ex.up = c->up_bev;
        (void)bufferevent_set_timeouts(c->up_bev, &idle, NULL);
        (void)bufferevent_enable(c->up_bev, EV_READ);
        exchange_run(&c->ex);
}

static void up_read_cb(struct bufferevent *bev, void *arg) {
        Conn *c = arg;

        if (c->state == CONN_FORWARDING) {
                exchange_forward_response(&c->ex);
                return;
        }
        /* An idle upstream that talks out of turn cannot be reused. */
        conn_drop_upstream(c);
}

static void up_write_cb(struct bufferevent *bev, void *arg) {
        Conn *c = arg;

        if (c->state == CONN_FORWARDING)
                exchange_upstream_writable(&c->ex);
}

static void conn_connect_failed(Conn *c, short what) {
        char addr[NET_ADDR_STRING_MAX];
        int err = EVUTIL_SOCKET_ERROR();

        if (net_addr_to_string(&c->candidates[c->next_candidate - 1], addr, sizeof(addr)) < 0)
                addr[0] = '\0';
        if (what & BEV_EVENT_TIMEOUT) {
                c->connect_timed_out = true;
                (void)snprintf(c->connect_error, sizeof(c->connect_error), "%s: timed out", addr);
        } else
                (void)snprintf(c->connect_error, sizeof(c->connect_error), "%s: %s", addr,
                               strerror(err != 0 ? err : ECONNREFUSED));
        conn_drop_upstream(c);
        conn_connect_next(c);
}

static void up_event_cb(struct bufferevent *bev, short what, void *arg) {
        Conn *c = arg;

        if (c->state == CONN_CONNECTING) {
                if (what & BEV_EVENT_CONNECTED) {
                        int one = 1;

                        (void)setsockopt(c->up_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                        (void)bufferevent_set_timeouts(bev, NULL, NULL);
                        (void)bufferevent_set_max_single_read(bev, BEV_MAX_SINGLE_READ);
                        conn_upstream_ready(c);
                        return;
                }
                conn_connect_failed(c, what);
                return;
        }
        if (c->state == CONN_FORWARDING) {
                exchange_upstream_event(&c->ex, what);
                return;
        }
        /* An idle upstream closed, failed or timed out. */
        conn_drop_upstream(c);
}

static void conn_connect_next(Conn *c) {
        Proxy *p = c->proxy;
        struct timeval tv = ms_to_timeval(p->config->connect_timeout_ms);
        char reason[REASON_MAX];

        while (c->next_candidate < c->n_candidates) {
                const NetAddr *a = &c->candidates[c->next_candidate++];
                struct sockaddr_storage ss;
                socklen_t len;
                int fd;

                if (net_addr_to_string(a, c->address, sizeof(c->address)) < 0)
                        c->address[0] = '\0';
                if (net_addr_to_sockaddr(a, c->target.port, &ss, &len) < 0)
                        continue;
                fd = socket(a->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
                if (fd < 0) {
                        (void)snprintf(c->connect_error, sizeof(c->connect_error), "%s: %s",
                                       c->address, strerror(errno));
                        continue;
                }
                c->up_bev = bufferevent_socket_new(p->base, fd, 0);
                if (!c->up_bev) {
                        (void)close(fd);
                        break;
                }
                c->up_fd = fd;
                memcpy(c->up_address, c->address, sizeof(c->up_address));
                c->up_host = c->target.host;
                c->up_port = c->target.port;
                c->ex.up_eof = false;
                c->state = CONN_CONNECTING;
                bufferevent_setcb(c->up_bev, up_read_cb, up_write_cb, up_event_cb, c);
                (void)bufferevent_set_timeouts(c->up_bev, NULL, &tv);
                /* May call up_event_cb() before returning; nothing of @c is
                 * touched after it. */
                if (bufferevent_socket_connect(c->up_bev, (struct sockaddr *)&ss, (int)len) < 0) {
                        (void)snprintf(c->connect_error, sizeof(c->connect_error), "%s: %s",
                                       c->address, strerror(errno));
                        conn_drop_upstream(c);
                        continue;
                }
                return;
        }

        (void)snprintf(reason, sizeof(reason), "cannot connect to host '%s' port %u (%s)",
                       c->target.host.name, (unsigned)c->target.port,
                       c->connect_error[0] ? c->connect_error : "no usable address");
        conn_fail(c, c->connect_timed_out ? 504 : 502, reason);
}

/* Keeps the addresses a connection may go to and starts connecting; if
 * there are none, denies naming the first one refused. */
static void conn_use_addresses(Conn *c, const NetAddr *addrs, size_t n) {
        const NetAddr *refused = NULL;

        c->n_candidates = c->next_candidate = 0;
        for (size_t i = 0; i < n; i++) {
                bool dup = false;

                if (allowlist_check_address(c->proxy->config->allowlist, &addrs[i], NULL) <= 0) {
                        if (!refused)
                                refused = &addrs[i];
                        continue;
                }
                for (size_t j = 0; j < c->n_candidates; j++)
                        dup = dup || net_addr_equal(&c->candidates[j], &addrs[i]);
                if (!dup && c->n_candidates < CANDIDATES_MAX)
                        c->candidates[c->n_candidates++] = addrs[i];
        }

        if (c->n_candidates == 0 && refused) {
                const char *cls = net_addr_class_to_string(net_addr_classify(refused));
                char reason[REASON_MAX];

                if (net_addr_to_string(refused, c->address, sizeof(c->address)) < 0)
                        c->address[0] = '\0';
                /* SECURITY: the check is on the address the connection
                 * would use, so DNS answers and IP spellings cannot reach
                 * loopback, the LAN or the metadata service. */
                if (c->target.host.kind == HOST_KIND_ADDRESS)
                        (void)snprintf(reason, sizeof(reason),
                                       "address %s port %u is a private address (%s); it needs "
                                       "--allow-private",
                                       c->address, (unsigned)c->target.port, cls);
                else
                        (void)snprintf(reason, sizeof(reason),
                                       "host '%s' port %u resolves to a private address %s (%s); "
                                       "it needs --allow-private",
                                       c->target.host.name, (unsigned)c->target.port, c->address,
                                       cls);
                conn_deny(c, reason);
                return;
        }
        conn_connect_next(c);
}

static void conn_dns_done(Conn *c, int result, struct evutil_addrinfo *res) {
        NetAddr addrs[CANDIDATES_MAX];
        char reason[REASON_MAX];
        size_t n = 0;

        conn_stop_timer(c);
        for (struct evutil_addrinfo *ai = res; ai && n < ELEMENTSOF(addrs); ai = ai->ai_next)
                if (net_addr_from_sockaddr(ai->ai_addr, (socklen_t)ai->ai_addrlen, &addrs[n],
                                           NULL) >= 0)
                        n++;
        if (res)
                evutil_freeaddrinfo(res);
        if (result != 0 || n == 0) {
                (void)snprintf(reason, sizeof(reason), "cannot resolve host '%s': %s",
                               c->target.host.name,
                               result != 0 ? evutil_gai_strerror(result) : "no address");
                conn_fail(c, 502, reason);
                return;
        }
        conn_use_addresses(c, addrs, n);
}

static void dns_cb(int result, struct evutil_addrinfo *res, void *arg) {
        DnsQuery *q = arg;
        Conn *c = q->conn;

        if (q->in_start) {
                q->done_early = true;
                q->result = result;
                q->res = res;
                return;
        }
        free(q);
        if (!c) {
                if (res)
                        evutil_freeaddrinfo(res);
                return;
        }
        c->dns = NULL;
        conn_dns_done(c, result, res);
}

static void conn_start_dns(Conn *c) {
        struct evutil_addrinfo hints = {
                .ai_family = AF_UNSPEC,
                .ai_socktype = SOCK_STREAM,
                .ai_protocol = IPPROTO_TCP,
        };
        struct evdns_getaddrinfo_request *req;
        DnsQuery *q;

        q = calloc(1, sizeof(DnsQuery));
        if (!q) {
                conn_fail(c, 500, "out of memory");
                return;
        }
        q->conn = c;
        q->in_start = true;
        req = evdns_getaddrinfo(c->proxy->dns, c->target.host.name, NULL, &hints, dns_cb, q);
        q->in_start = false;
        if (q->done_early || !req) {
                int result = q->done_early ? q->result : EVUTIL_EAI_FAIL;
                struct evutil_addrinfo *res = q->res;

                free(q);
                conn_dns_done(c, result, res);
                return;
        }
        q->req = req;
        c->dns = q;
        c->state = CONN_RESOLVING;
        conn_arm_timer(c, TIMER_DNS, c->proxy->config->dns_timeout_ms);
}

static void conn_decide(Conn *c);

static void conn_handle_head(Conn *c) {
        const char *reason = NULL;
        int status = 400;

        conn_stop_timer(c);
        conn_begin_exchange(c);
        if (proxy_request_analyze(&c->ex.req, &c->target, &status, &reason) < 0) {
                conn_answer(c, AUDIT_ERROR, (unsigned)status, reason, reason, false);
                return;
        }
        c->keep_alive =
                c->target.kind == PROXY_REQUEST_FORWARD && exchange_request_keeps_alive(&c->ex);
        conn_decide(c);
}

/* The same rules for every target, whether a request named it or a
 * transparent connection's address did: tripwire, allowlist, then the
 * addresses. */
static void conn_decide(Conn *c) {
        const ProxyConfig *cfg = c->proxy->config;
        const HostPattern *rule = NULL;
        const ResolveEntry *e;
        char text[REASON_MAX];
        int v;

        if (cfg->n_secrets > 0) {
                /* SECURITY: a placeholder in the URL or a header of a
                 * request to a host its secret is not for is a leak
                 * attempt (or a bug): refused and named, never valued. */
                const ProxySecret *trip =
                        c->transparent ? NULL
                                       : secrets_find_tripwire(cfg->secrets, cfg->n_secrets,
                                                               &c->target.host, c->target.port,
                                                               &c->ex.req);

                if (trip) {
                        (void)snprintf(text, sizeof(text), "tripwire: placeholder of %s sent to %s",
                                       trip->name, c->target.host.name);
                        c->secret = trip->name;
                        conn_deny(c, text);
                        return;
                }
                if (c->target.kind == PROXY_REQUEST_CONNECT && c->proxy->mint)
                        for (size_t i = 0; i < cfg->n_secrets; i++)
                                if (proxy_secret_covers(&cfg->secrets[i], &c->target.host,
                                                        c->target.port))
                                        c->intercept = true;
        }

        v = allowlist_check_host(cfg->allowlist, &c->target.host, c->target.port, &rule);
        if (rule)
                (void)snprintf(c->rule, sizeof(c->rule), "%s", rule->text);
        if (v == ALLOWLIST_DENY_RULE) {
                (void)snprintf(text, sizeof(text), "host '%s' port %u matches deny rule '%s'",
                               c->target.host.name, (unsigned)c->target.port, c->rule);
                conn_deny(c, text);
                return;
        }
        if (v != ALLOWLIST_ALLOW) {
                char hint[REASON_MAX];
                bool v6 = strchr(c->target.host.name, ':');

                (void)snprintf(text, sizeof(text), "host '%s' port %u is not in the allowlist",
                               c->target.host.name, (unsigned)c->target.port);
                /* --allow-host's default ports are 80 and 443. */
                if (c->target.port == 80 || c->target.port == 443)
                        (void)snprintf(hint, sizeof(hint), "--allow-host %s", c->target.host.name);
                else
                        (void)snprintf(hint, sizeof(hint), "--allow-host %s%s%s:%u", v6 ? "[" : "",
                                       c->target.host.name, v6 ? "]" : "",
                                       (unsigned)c->target.port);
                conn_deny_hint(c, text, hint);
                return;
        }
        c->decided = true;

        if (c->target.kind == PROXY_REQUEST_FORWARD && c->up_bev && c->up_idle &&
            c->up_port == c->target.port && c->up_host.kind == c->target.host.kind &&
            strcmp(c->up_host.name, c->target.host.name) == 0) {
                /* The address was checked when this connection was made. */
                memcpy(c->address, c->up_address, sizeof(c->address));
                conn_upstream_ready(c);
                return;
        }
        conn_drop_upstream(c);

        if (c->target.host.kind == HOST_KIND_ADDRESS) {
                conn_use_addresses(c, &c->target.host.addr, 1);
                return;
        }
        e = proxy_config_find_resolve(cfg, c->target.host.name);
        if (e) {
                conn_use_addresses(c, e->addrs, e->n_addrs);
                return;
        }
        conn_start_dns(c);
}

static void client_read_cb(struct bufferevent *bev, void *arg) {
        Conn *c = arg;

        if (c->state == CONN_HEAD)
                exchange_read_request(&c->ex);
        else if (c->state == CONN_FORWARDING && c->ex.req.state == HTTP_MESSAGE_BODY)
                exchange_forward_request_body(&c->ex);
        else if (c->state == CONN_LINGER)
                (void)evbuffer_drain(bufferevent_get_input(bev),
                                     evbuffer_get_length(bufferevent_get_input(bev)));
}

static void client_write_cb(struct bufferevent *bev, void *arg) {
        Conn *c = arg;

        switch (c->state) {
        case CONN_TUNNEL_FLUSH:
                if (evbuffer_get_length(bufferevent_get_output(bev)) == 0) {
                        if (c->intercept)
                                conn_start_intercept(c);
                        else
                                conn_start_tunnel(c);
                }
                return;
        case CONN_CLOSING:
                if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
                        conn_linger(c);
                return;
        case CONN_FORWARDING:
                exchange_client_writable(&c->ex);
                return;
        case CONN_HEAD:
        case CONN_RESOLVING:
        case CONN_CONNECTING:
        case CONN_TUNNEL:
        case CONN_INTERCEPT:
        case CONN_LINGER:
        case CONN_DEAD:
                return;
        }
}

static void client_event_cb(struct bufferevent *bev, short what, void *arg) {
        Conn *c = arg;

        /* EOF or an error: the client is gone (or half-gone, which HTTP/1.1
         * clients do not do while they still want an answer). */
        if (c->ex.in_exchange)
                conn_audit(c, c->decided ? AUDIT_ALLOW : AUDIT_ERROR,
                           "the client closed the connection");
        conn_close(c);
}

static void conn_timer_cb(evutil_socket_t fd, short what, void *arg) {
        Conn *c = arg;
        TimerKind kind = c->timer_kind;
        char reason[REASON_MAX];

        c->timer_kind = TIMER_NONE;
        switch (kind) {
        case TIMER_DNS:
                conn_cancel_dns(c);
                (void)snprintf(reason, sizeof(reason),
                               "resolving host '%s' timed out after %" PRIu64 " ms",
                               c->target.host.name, c->proxy->config->dns_timeout_ms);
                conn_fail(c, 504, reason);
                return;
        case TIMER_CLOSING:
                conn_close(c);
                return;
        case TIMER_NONE:
                return;
        }
}

static int conn_new(Proxy *p, int fd, bool transparent) {
        Conn *c;
        int one = 1, r;

        c = calloc(1, sizeof(Conn));
        if (!c)
                return -ENOMEM;
        c->proxy = p;
        c->fd = fd;
        c->up_fd = -EBADF;
        tunnel_init(&c->tunnel);
        c->state = CONN_HEAD;

        /* Linked first, so conn_close() can undo everything below. */
        c->next = p->conns;
        if (p->conns)
                p->conns->prev = c;
        p->conns = c;
        p->n_conns++;

        r = exchange_init(&c->ex, &conn_exchange_ops, c, p->base, p->config->header_timeout_ms);
        c->ex.verbatim = true;
        c->bev = r >= 0 ? bufferevent_socket_new(p->base, fd, 0) : NULL;
        c->ex.cl = c->bev;
        c->timer = c->bev ? evtimer_new(p->base, conn_timer_cb, c) : NULL;
        if (!c->timer) {
                conn_close(c);
                return -ENOMEM;
        }
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        bufferevent_setcb(c->bev, client_read_cb, client_write_cb, client_event_cb, c);
        (void)bufferevent_set_max_single_read(c->bev, BEV_MAX_SINGLE_READ);
        /* A transparent connection's bytes (a TLS ClientHello) stay in the
         * socket for the tunnel or the TLS interception to read. */
        c->transparent = transparent;
        if (transparent)
                return 0;
        /* Silence until the first byte is not slowloris, just idle: it
         * ends without a 408; the head then has header_timeout again. */
        exchange_await_request(&c->ex, p->config->header_timeout_ms);
        return 0;
}

/* Transparent DNS: which name and port a connection was for, from the
 * local address it reached (a synthetic address of the table); NULL for
 * the proxy port's own connections. */
static const DnsTableEntry *transparent_target(const Proxy *p, int fd, uint16_t *ret_port) {
        struct sockaddr_in sin = {};
        socklen_t len = sizeof(sin);
        const DnsTableEntry *e;

        if (p->dns_table.n_entries == 0)
                return NULL;
        if (getsockname(fd, (struct sockaddr *)&sin, &len) < 0 || sin.sin_family != AF_INET)
                return NULL;
        e = dns_table_find_addr(&p->dns_table, sin.sin_addr);
        if (!e || !dns_table_entry_has_port(e, ntohs(sin.sin_port)))
                return NULL;
        *ret_port = ntohs(sin.sin_port);
        return e;
}

/* A transparent connection: decided as a CONNECT to its name and port
 * would be, with the same rules and audit line (method "TCP"). */
static void conn_start_transparent(Conn *c, const DnsTableEntry *e, uint16_t port) {
        conn_stop_timer(c);
        conn_begin_exchange(c);
        (void)snprintf(c->ex.method, sizeof(c->ex.method), "TCP");
        c->target.kind = PROXY_REQUEST_CONNECT;
        c->target.port = port;
        if (host_parse(e->name, strlen(e->name), &c->target.host) < 0) {
                conn_answer(c, AUDIT_ERROR, 400, "invalid host", "invalid host", false);
                return;
        }
        c->keep_alive = false;
        conn_decide(c);
}

static void accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
                      void *arg) {
        Proxy *p = arg;
        const DnsTableEntry *e;
        uint16_t port = 0;

        e = transparent_target(p, fd, &port);
        if (conn_new(p, fd, e != NULL) < 0) {
                log_warning("out of memory for a new connection, closing it");
                return;
        }
        if (e)
                conn_start_transparent(p->conns, e, port);
        if (p->n_conns >= p->config->max_connections)
                listeners_set(p, false);
}

static void accept_retry_cb(evutil_socket_t fd, short what, void *arg) {
        Proxy *p = arg;

        if (p->n_conns < p->config->max_connections)
                listeners_set(p, true);
}

static void accept_error_cb(struct evconnlistener *l, void *arg) {
        Proxy *p = arg;
        int err = EVUTIL_SOCKET_ERROR();
        struct timeval tv = ms_to_timeval(ACCEPT_RETRY_MS);

        /* Out of fds or memory: stop accepting for a moment rather than
         * spin; queued clients wait in the backlog. */
        log_warning_errno(-err, "accept failed: %m");
        listeners_set(p, false);
        (void)evtimer_add(p->accept_retry, &tv);
}

static int proxy_setup_dns(Proxy *p) {
        const ProxyConfig *cfg = p->config;
        char timeout[32];

        if (cfg->nameservers) {
                p->dns = evdns_base_new(p->base, EVDNS_BASE_DISABLE_WHEN_INACTIVE);
                if (!p->dns)
                        return -ENOMEM;
                STRV_FOREACH(ns, cfg->nameservers)
                        if (evdns_base_nameserver_ip_add(p->dns, *ns) != 0)
                                return -EINVAL;
        } else {
                p->dns = evdns_base_new(p->base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
                                                         EVDNS_BASE_DISABLE_WHEN_INACTIVE);
                if (!p->dns)
                        return -ENOMEM;
        }
        /* SECURITY: the allowlist matched the name as written; search-list
         * expansion would resolve a different one. */
        evdns_base_search_clear(p->dns);
        (void)snprintf(timeout, sizeof(timeout), "%" PRIu64 ".%03" PRIu64,
                       cfg->dns_timeout_ms / 2000, (cfg->dns_timeout_ms / 2) % 1000);
        (void)evdns_base_set_option(p->dns, "timeout", timeout);
        (void)evdns_base_set_option(p->dns, "attempts", "2");
        return 0;
}

int proxy_new(const ProxyConfig *config, struct event_base *base, Audit *audit, TlsMint *mint,
              Proxy **ret) {
        _cleanup_(proxy_freep) Proxy *p = NULL;
        int r;

        p = calloc(1, sizeof(Proxy));
        if (!p)
                return -ENOMEM;
        p->config = config;
        p->base = base;
        p->audit = audit;
        p->mint = mint;
        p->reaper = event_new(base, -1, 0, reaper_cb, p);
        p->accept_retry = evtimer_new(base, accept_retry_cb, p);
        if (!p->reaper || !p->accept_retry)
                return -ENOMEM;
        r = proxy_setup_dns(p);
        if (r < 0)
                return r;

        if (config->dns_transparent) {
                r = dns_table_add(&p->dns_table, config->allowlist->allow,
                                  config->allowlist->n_allow, NULL);
                if (r < 0)
                        return r;
        }

        for (size_t i = 0; i < config->n_listen_fds; i++) {
                int type = 0;
                socklen_t tlen = sizeof(type);

                /* A datagram socket (only with --dns-transparent, main.c
                 * checked) is the sandbox's resolver. */
                if (getsockopt(config->listen_fds[i], SOL_SOCKET, SO_TYPE, &type, &tlen) == 0 &&
                    type == SOCK_DGRAM) {
                        r = dns_server_new(base, config->listen_fds[i], config, &p->dns_table,
                                           audit, &p->dns_servers[p->n_dns_servers]);
                        if (r < 0)
                                return r;
                        p->n_dns_servers++;
                        continue;
                }
                /* -1: the socket is already listening; the caller owns it. */
                p->listeners[p->n_listeners] = evconnlistener_new(
                        base, accept_cb, p, LEV_OPT_CLOSE_ON_EXEC, -1, config->listen_fds[i]);
                if (!p->listeners[p->n_listeners])
                        return -ENOMEM;
                evconnlistener_set_error_cb(p->listeners[p->n_listeners], accept_error_cb);
                p->n_listeners++;
        }

        *ret = TAKE_PTR(p);
        return 0;
}

Proxy *proxy_free(Proxy *p) {
        if (!p)
                return NULL;
        while (p->conns) {
                Conn *c = p->conns;

                if (c->ex.in_exchange)
                        conn_audit(c, c->decided ? AUDIT_ALLOW : AUDIT_ERROR,
                                   "the proxy shut down");
                conn_close(c);
        }
        reaper_cb(-1, 0, p);
        for (size_t i = 0; i < p->n_listeners; i++)
                evconnlistener_free(p->listeners[i]);
        for (size_t i = 0; i < p->n_dns_servers; i++)
                dns_server_free(p->dns_servers[i]);
        dns_table_done(&p->dns_table);
        if (p->dns)
                evdns_base_free(p->dns, 1);
        if (p->reaper)
                event_free(p->reaper);
        if (p->accept_retry)
                event_free(p->accept_retry);
        free(p);
        return NULL;
}

unsigned proxy_connections(const Proxy *p) {
        return p->n_conns;
}

/* Whether @host port @port at @address (may be empty) is still allowed by
 * the (new) policy; if not, @why says so. */
static bool still_allowed(const Proxy *p, const Host *host, uint16_t port, const char *address,
                          char *why, size_t size) {
        const Allowlist *al = p->config->allowlist;
        NetAddr a;

        if (host->name[0] && allowlist_check_host(al, host, port, NULL) != ALLOWLIST_ALLOW) {
                (void)snprintf(why, size,
                               "host '%s' port %u is no longer allowed (the policy changed)",
                               host->name, (unsigned)port);
                return false;
        }
        if (address[0] && net_addr_parse(address, strlen(address), &a) >= 0 &&
            allowlist_check_address(al, &a, NULL) <= 0) {
                (void)snprintf(why, size,
                               "address %s of host '%s' port %u is no longer allowed (the policy "
                               "changed)",
                               address, host->name, (unsigned)port);
                return false;
        }
        return true;
}

void proxy_policy_changed(Proxy *p) {
        Conn *next;

        for (Conn *c = p->conns; c; c = next) {
                char why[REASON_MAX];

                next = c->next;
                switch (c->state) {
                case CONN_HEAD:
                        /* A kept upstream is checked again when used; drop
                         * one that could not be. */
                        if (c->up_bev && c->up_idle &&
                            !still_allowed(p, &c->up_host, c->up_port, c->up_address, why,
                                           sizeof(why)))
                                conn_drop_upstream(c);
                        break;
                case CONN_RESOLVING:
                case CONN_CONNECTING:
                        if (still_allowed(p, &c->target.host, c->target.port, "", why, sizeof(why)))
                                break;
                        conn_cancel_dns(c);
                        conn_drop_upstream(c);
                        conn_deny(c, why);
                        break;
                case CONN_FORWARDING:
                case CONN_TUNNEL_FLUSH:
                case CONN_TUNNEL:
                case CONN_INTERCEPT:
                        if (still_allowed(p, &c->target.host, c->target.port, c->address, why,
                                          sizeof(why)))
                                break;
                        /* SECURITY: what the new policy refuses ends now,
                         * open tunnels included, with an audit line. */
                        c->ex.in_exchange = true;
                        conn_audit(c, AUDIT_DENY, why);
                        c->icpt = intercept_end(c->icpt, why);
                        conn_close(c);
                        break;
                case CONN_CLOSING:
                case CONN_LINGER:
                case CONN_DEAD:
                        break;
                }
        }
}
