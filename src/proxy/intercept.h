/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The intercepting path of hutch-proxy (docs/network.md, "Secrets"): a
 * CONNECT to a host some secret is for is answered 200 by proxy-server.c,
 * which then hands both sockets over here. TLS is terminated towards the
 * client with a leaf of the sandbox CA (tls-mint.h); HTTP/1.1 requests are
 * read with the same HttpMessage limits as plain ones, checked for
 * tripwires, given their real values (secrets.h) and sent over a new,
 * verified TLS connection to the upstream; responses come back with every
 * value masked. One audit line per request ("intercepted": true).
 *
 * An upstream that closes ends the client connection after the response
 * in flight (the client reconnects); a failed upstream handshake answers
 * the first request with 502 and the reason. */

#include <stdint.h>

#include <event2/event.h>

#include "audit.h"
#include "net/allowlist.h"
#include "proxy-config.h"
#include "tls-mint.h"

typedef struct Intercept Intercept;

typedef struct InterceptParams {
        struct event_base *base;
        const ProxyConfig *config;
        Audit *audit;
        TlsMint *mint;
        Host host;
        uint16_t port;
        const char *address; /* the upstream address, for the audit log */
        const char *rule;    /* the allowlist entry that allowed it */
        /* Called once, as the very last thing, when the connection is over
         * (both sockets are closed by then); the Intercept must then only be
         * freed, from a later loop iteration. */
        void (*done)(void *userdata);
        void *userdata;
} InterceptParams;

/* Takes ownership of @client_fd and @up_fd (a connected TCP socket to the
 * checked address) whatever the outcome. Returns 0 or -ENOMEM (both fds
 * closed, @done not called). */
int intercept_start(const InterceptParams *p, int client_fd, int up_fd, Intercept **ret);
/* Closes both connections without calling @done (if still open) and frees. */
Intercept *intercept_free(Intercept *i);
/* The same, for a connection the policy no longer allows: a request in
 * flight is audited as denied for @reason. */
Intercept *intercept_end(Intercept *i, const char *reason);
