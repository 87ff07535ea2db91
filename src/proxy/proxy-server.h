/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The event-driven proxy server: libevent listeners on the given sockets,
 * one Conn per client connection, evdns for names, splice(2) for CONNECT
 * tunnels. Single-threaded; no thread or process per connection, so a slow
 * or hostile client only costs its own buffers (bounded, see
 * docs/network.md) and one slot of --max-connections.
 *
 * Lifecycle: proxy_new() starts accepting on the config's listening fds
 * (they stay owned by the caller) inside @base; the caller runs the loop;
 * proxy_free() closes every connection, writing an audit line for each
 * exchange still in flight, and returns NULL. */

#include <event2/event.h>

#include "audit.h"
#include "proxy-config.h"
#include "tls-mint.h"

typedef struct Proxy Proxy;

/* Borrows @config, @base, @audit and @mint (NULL without secrets: no
 * interception) for its whole life. Returns 0 or -errno (-ENOMEM, or the
 * error of creating a listener or the resolver). */
int proxy_new(const ProxyConfig *config, struct event_base *base, Audit *audit, TlsMint *mint,
              Proxy **ret);
Proxy *proxy_free(Proxy *p);
DEFINE_POINTER_CLEANUP(Proxy, proxy_free)

/* The configuration's policy (allowlist, deny list, private ranges,
 * resolve entries) was replaced: every open connection is checked again,
 * and one the new policy refuses is closed with an audit line ("denied",
 * "no longer allowed (the policy changed)"): a request waiting for DNS or
 * its connection is answered 403, a request in flight, a tunnel or an
 * intercepted connection is cut. New connections use the new policy. */
void proxy_policy_changed(Proxy *p);

/* The number of client connections open right now. */
unsigned proxy_connections(const Proxy *p);
