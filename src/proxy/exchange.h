/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* One HTTP/1.1 exchange in flight between a client connection and an
 * upstream connection: the request body out, the response (interim ones
 * included) back, flow control both ways, the end. hutch-proxy has one of
 * these machines for both of its HTTP paths (docs/network.md): the plain
 * forward proxy (proxy-server.c) moves bodies verbatim over plain sockets;
 * an intercepted tunnel (intercept.c) re-frames them through the messages'
 * on_body hooks, where secrets.h scans the request body and masks the
 * response. What differs between the two is in ExchangeOps; each check
 * lives in its owner, once.
 *
 * The phases, each in one place:
 *   1. exchange_await_request(): the request head is read from the client
 *      (one parser, one idle timer until its first byte, then one head
 *      deadline: a head trickled in slowly gets 408 on both paths);
 *      pipelined bytes are taken from the loop, never recursively.
 *      ops->request_head() gets a complete head, ops->request_refused() a
 *      malformed or late one, ops->idle() a connection that stayed silent.
 *   2. The owner decides, and sends the request head itself (only it knows
 *      how to build it: origin form on the plain path, real values on the
 *      intercepted one), then calls exchange_run().
 *   3. Bodies and the response move with flow control both ways (write
 *      low-watermarks on both paths), the owner's bufferevent callbacks
 *      handing their events to exchange_*() below, until ops->done().
 * Any op may end the exchange (answer, close, free the bufferevents); the
 * machine asks ops->forwarding() after each op and stops touching anything
 * once it says false.
 *
 * The exchange also keeps what the audit line of a request needs in both
 * paths (method, status, byte counts, duration; exchange_begin() and
 * exchange_audit()), and writes the proxy's own short answers
 * (exchange_answer_text()), so both paths say the same thing the same
 * way. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/bufferevent.h>
#include <event2/event.h>

#include "audit.h"
#include "http-message.h"

/* Forwarding stops reading one side while the other side's output buffer
 * holds more than HIGH bytes, and resumes below LOW: per exchange at most
 * about 2 x HIGH bytes are buffered. */
#define EXCHANGE_HIGH_WATER (256 * 1024)
#define EXCHANGE_LOW_WATER (64 * 1024)

typedef struct Exchange Exchange;

typedef struct ExchangeOps {
        /* A complete request head is in e->req; reading from the client is
         * off and the head deadline stopped. */
        void (*request_head)(Exchange *e);
        /* The request head is malformed (@status 400, 414, 431, ...) or did
         * not arrive within the head deadline (408): answer @status with
         * @reason (static or on the caller's stack) and close. */
        void (*request_refused)(Exchange *e, unsigned status, const char *reason);
        /* No byte of a next request came within the idle time: close,
         * without an answer (nothing was asked). */
        void (*idle)(Exchange *e);
        /* True while the owner is forwarding this exchange. */
        bool (*forwarding)(Exchange *e);
        /* A complete response head is in e->resp (status 1xx other than 101
         * included): pass it on to the client. Returns 0, or -errno after
         * ending the exchange. The machine re-arms the parser after an
         * interim head. */
        int (*response_head)(Exchange *e);
        /* The response is complete. */
        void (*done)(Exchange *e);
        /* The exchange ends with the proxy's own answer: @status and
         * @reason (exchange_answer_text(), "Connection: close"), audited as
         * @d with @secret (a tripwire's secret name, or NULL); the
         * connection closes once it is written. */
        void (*answer)(Exchange *e, AuditDecision d, unsigned status, const char *reason,
                       const char *secret);
        /* The exchange ends without an answer (part of a response is out
         * already): audited as @d, the connection closes at once. */
        void (*cut)(Exchange *e, AuditDecision d, const char *reason, const char *secret);
        /* Optional: the request body could not be parsed or its on_body
         * hook refused it. Returns true if the owner ended the exchange
         * itself (a reason of its own); else the machine fails it with 400
         * (exchange_fail()). */
        bool (*request_failed)(Exchange *e, const char *reason);
        /* Optional: the whole request body went through req.on_body (not
         * called in verbatim mode). */
        void (*request_done)(Exchange *e);
} ExchangeOps;

typedef enum ExchangeTimer {
        EXCHANGE_TIMER_NONE,
        EXCHANGE_TIMER_IDLE, /* no byte of the next request yet */
        EXCHANGE_TIMER_HEAD, /* the request head must be complete by then */
} ExchangeTimer;

struct Exchange {
        const ExchangeOps *ops;
        void *userdata;
        /* Phase 1: reading a request head (exchange_await_request()). */
        bool awaiting;
        uint64_t head_timeout_ms;
        ExchangeTimer timer_kind;
        struct event *timer;
        struct event *kick; /* processes buffered pipelined input */
        /* The audit line's part both paths share; owed while in_exchange. */
        bool in_exchange;
        uint64_t started_us;
        char method[24];
        unsigned status;     /* the status the client got, 0 if none yet */
        bool resp_head_sent; /* a final response head went to the client */
        /* Borrowed; the owner keeps them up to date (NULL once dropped). */
        struct bufferevent *cl, *up;
        HttpMessage req, resp;
        /* Bodies are moved as they came, framing included, with direct
         * socket writes (plain sockets only); else they go through the
         * messages' on_body hooks, which write them out themselves. */
        bool verbatim;
        bool up_eof;
        /* The client connection closes once this response is out: the
         * request or the response did not keep alive (HTTP/1.1 only), or
         * the response came before the whole request. The owner may add
         * reasons of its own before the response head goes out; the head
         * then says "Connection: close". */
        bool close_after;
        /* 0, or the most response bytes parsed at once (a decoding
         * on_body hook keeps its output small this way). */
        size_t resp_feed_max;
        /* Static: why a response on_body hook failed. */
        const char *body_error;
        uint64_t bytes_up, bytes_down;
};

/* Sets up both messages (the HTTP_REQUEST_* and HTTP_RESPONSE_* limits of
 * http-message.h) and the events on @base; a request head must be complete
 * @head_timeout_ms after its first byte. Returns 0 or -ENOMEM. */
int exchange_init(Exchange *e, const ExchangeOps *ops, void *userdata, struct event_base *base,
                  uint64_t head_timeout_ms);
void exchange_done(Exchange *e);

/* Phase 1: waits for the next request head on e->cl (reading enabled),
 * for at most @idle_ms before its first byte (then ops->idle()). Bytes
 * already buffered are processed from the event loop. */
void exchange_await_request(Exchange *e, uint64_t idle_ms);
/* The client is readable while awaiting a head: parses what is there. */
void exchange_read_request(Exchange *e);
/* Stops the idle/head timer (when the owner leaves phase 1 itself). */
void exchange_stop_timer(Exchange *e);

/* Starts the audit record of a new exchange: the clock, the method of the
 * head in e->req (empty if it did not parse), no status, no bytes. */
void exchange_begin(Exchange *e);
/* Writes the audit line of the current exchange once (nothing if none is
 * owed): @r holds the owner's part; the method, status, byte counts and
 * duration are filled in here. Returns audit_log()'s result, or 0. */
int exchange_audit(Exchange *e, Audit *audit, AuditRecord *r);
/* Queues the proxy's own answer to the client: @status with the text
 * "hutch-proxy: @text", "Connection: keep-alive" if @keep, else "close".
 * Sets e->status and counts the bytes. Returns 0 or -ENOMEM. */
int exchange_answer_text(Exchange *e, unsigned status, const char *text, bool keep);

/* True if the request in e->req lets the client connection go on after
 * this exchange: HTTP/1.1 and no "Connection: close". */
bool exchange_request_keeps_alive(const Exchange *e);

/* The request head is sent: forward the body, and the response if some of
 * it is already buffered (a reused connection). */
void exchange_run(Exchange *e);

/* Event hand-overs from the owner's bufferevent callbacks, in the
 * forwarding state only. */
void exchange_forward_request_body(Exchange *e); /* client readable */
void exchange_forward_response(Exchange *e);     /* upstream readable */
void exchange_client_writable(Exchange *e);
void exchange_upstream_writable(Exchange *e);
void exchange_upstream_event(Exchange *e, short what);

/* Ends the exchange: with ops->answer() (@status) while no response head
 * went to the client, else with ops->cut(). An upstream that fails, closes
 * early or sends something malformed ends it this way with 502 (allow: the
 * policy allowed it), a bad request body with 400. */
void exchange_fail(Exchange *e, AuditDecision d, unsigned status, const char *reason,
                   const char *secret);

/* Writes @len bytes of @data to @bev's plain socket at once while nothing
 * is queued on it, and queues the rest: a bufferevent writes only on the
 * next loop iteration. Returns 0 or -ENOMEM. */
int exchange_send_now(struct bufferevent *bev, const char *data, size_t len);
