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
 * The owner sends the request head itself (only it knows how to build it),
 * then calls exchange_run(). From then on the owner's bufferevent callbacks
 * hand their events to exchange_*() below. Any op may end the exchange
 * (answer, close, free the bufferevents); the machine asks ops->forwarding()
 * after each op and stops touching anything once it says false. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/bufferevent.h>

#include "http-message.h"

/* Forwarding stops reading one side while the other side's output buffer
 * holds more than HIGH bytes, and resumes below LOW: per exchange at most
 * about 2 x HIGH bytes are buffered. */
#define EXCHANGE_HIGH_WATER (256 * 1024)
#define EXCHANGE_LOW_WATER (64 * 1024)

typedef struct Exchange Exchange;

typedef struct ExchangeOps {
        /* True while the owner is forwarding this exchange. */
        bool (*forwarding)(Exchange *e);
        /* A complete response head is in e->resp (status 1xx other than 101
         * included): pass it on to the client. Returns 0, or -errno after
         * ending the exchange. The machine re-arms the parser after an
         * interim head. */
        int (*response_head)(Exchange *e);
        /* The response is complete. */
        void (*done)(Exchange *e);
        /* The upstream failed, closed early or sent something malformed. */
        void (*upstream_failed)(Exchange *e, const char *reason);
        /* The request body could not be parsed or its on_body hook refused
         * it (req.error, or what the owner recorded itself). */
        void (*request_failed)(Exchange *e, const char *reason);
        /* Optional: the whole request body went through req.on_body (not
         * called in verbatim mode). */
        void (*request_done)(Exchange *e);
} ExchangeOps;

struct Exchange {
        const ExchangeOps *ops;
        void *userdata;
        /* Borrowed; the owner keeps them up to date (NULL once dropped). */
        struct bufferevent *cl, *up;
        HttpMessage req, resp;
        /* Bodies are moved as they came, framing included, with direct
         * socket writes (plain sockets only); else they go through the
         * messages' on_body hooks, which write them out themselves. */
        bool verbatim;
        bool up_eof;
        /* 0, or the most response bytes parsed at once (a decoding
         * on_body hook keeps its output small this way). */
        size_t resp_feed_max;
        /* Static: why a response on_body hook failed. */
        const char *body_error;
        uint64_t bytes_up, bytes_down;
};

/* Sets up both messages. Returns 0 or -ENOMEM. */
int exchange_init(Exchange *e, const ExchangeOps *ops, void *userdata,
                  const HttpLimits *request_limits, const HttpLimits *response_limits);
void exchange_done(Exchange *e);

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

/* Writes @len bytes of @data to @bev's plain socket at once while nothing
 * is queued on it, and queues the rest: a bufferevent writes only on the
 * next loop iteration. Returns 0 or -ENOMEM. */
int exchange_send_now(struct bufferevent *bev, const char *data, size_t len);
