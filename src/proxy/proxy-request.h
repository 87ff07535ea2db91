/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What a parsed request head asks the proxy to do, and the heads the proxy
 * sends on. This is the part of hutch-proxy that takes bytes from inside
 * the sandbox and decides; it does no I/O (tests/fuzz drives it directly).
 *
 * Accepted: "CONNECT host:port" (authority form, port required) and
 * absolute-URI requests "METHOD http://host[:port]/path" for any method.
 * Refused with 400 and a static reason: origin-form targets ("/path"),
 * "*", schemes other than http (https must use CONNECT), userinfo
 * ("http://user@host/"), fragments, invalid hosts or ports, more than one
 * Host header, a Host header that names another host or port, and HTTP
 * versions other than 1.0 and 1.1. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http-message.h"
#include "net/allowlist.h"

typedef enum ProxyRequestKind {
        PROXY_REQUEST_CONNECT, /* an opaque tunnel */
        PROXY_REQUEST_FORWARD, /* an absolute-URI request, forwarded in origin form */
        _PROXY_REQUEST_KIND_MAX,
        _PROXY_REQUEST_KIND_INVALID = -EINVAL,
} ProxyRequestKind;

typedef struct ProxyRequest {
        ProxyRequestKind kind;
        Host host;     /* normalised */
        uint16_t port; /* explicit, or 80 for http:// */
        /* FORWARD: the origin-form target ("/path?query"), borrowed from the
         * HttpMessage; "/" when the URI had no path. */
        const char *path;
        size_t path_len;
        bool path_needs_slash; /* the URI had "?query" and no path: prefix "/" */
} ProxyRequest;

/* Analyses the complete request head in @m. Writes @ret only on success.
 * Returns 0, or -EBADMSG with @reterr_status (an HTTP status, 400) and
 * @reterr_reason (a static string) set. */
int proxy_request_analyze(const HttpMessage *m, ProxyRequest *ret, int *reterr_status,
                          const char **reterr_reason);

/* Target binding inside an intercepted tunnel to @h port @port (https,
 * docs/secrets.md): the request in @m must have exactly one Host, naming
 * that host (case-folded, the port written or elided when it is 443), and
 * an absolute-form target must name it too (no userinfo).
 * SECURITY: front ends route on Host; without this a request carrying a
 * real value could be routed to whatever site the sandbox names.
 * Returns 0, or -EBADMSG with @reterr_reason (a static string) set. */
int proxy_request_check_bound(const HttpMessage *m, const Host *h, uint16_t port,
                              const char **reterr_reason);

/* Parses an authority "host[:port]" of @n bytes (brackets for IPv6), as in
 * CONNECT targets, URIs and Host headers. Writes @ret_host and @ret_port (0
 * when no port is given) only on success. Returns 0 or -EINVAL (bad host,
 * empty, non-numeric, 0 or > 65535 port, trailing text). */
int proxy_authority_parse(const char *s, size_t n, Host *ret_host, uint16_t *ret_port);

/* The hop-by-hop fields of the request in @m, which neither of the
 * proxy's paths sends upstream (the plain one through
 * proxy_request_build_head(), the intercepted one through
 * secrets_build_request_head()): Connection and the fields it names
 * (never Content-Length or Transfer-Encoding: the body's framing),
 * Proxy-Connection, Keep-Alive, Proxy-Authorization, TE, Trailer,
 * Upgrade. */
#define PROXY_CONNECTION_TOKENS_MAX 32

typedef struct ProxyToken {
        const char *s; /* borrowed from the HttpMessage */
        size_t n;
} ProxyToken;

typedef struct ProxyHopFields {
        ProxyToken tokens[PROXY_CONNECTION_TOKENS_MAX];
        size_t n_tokens;
} ProxyHopFields;

/* Collects the options of every Connection field of @m into @ret.
 * Returns 0, or -EBADMSG for more than PROXY_CONNECTION_TOKENS_MAX. */
int proxy_hop_fields_init(ProxyHopFields *ret, const HttpMessage *m);
/* True if the request field @name (@nl bytes) is hop-by-hop. */
bool proxy_hop_fields_has(const ProxyHopFields *h, const char *name, size_t nl);

/* Builds the head to send upstream for a FORWARD request: the request line
 * in origin form with the client's HTTP version, "Host" from @req, then
 * the client's fields except Host and the hop-by-hop ones (Connection and
 * the fields it names, Proxy-Connection, Keep-Alive, Proxy-Authorization,
 * TE, Trailer, Upgrade), plus "Connection: close" when @close. Returns 0
 * with a malloc'd buffer in @ret and its length in @ret_len, -ENOMEM, or
 * -EBADMSG if a field could not be emitted on one line. */
int proxy_request_build_head(const HttpMessage *m, const ProxyRequest *req, bool close, char **ret,
                             size_t *ret_len);

typedef enum ResponseHeadFlags {
        RESPONSE_HEAD_CLOSE = 1 << 0,   /* add "Connection: close" */
        RESPONSE_HEAD_DECODED = 1 << 1, /* the body goes on decoded and re-framed */
        RESPONSE_HEAD_CHUNKED = 1 << 2, /* with DECODED: re-framed chunked */
} ResponseHeadFlags;

/* Builds the head to send to the client for the upstream response in @m,
 * on both of the proxy's paths (the intercepted one masks it afterwards,
 * secrets_build_response_head()): "HTTP/1.1 CODE REASON", the fields minus
 * the hop-by-hop ones (Connection and the fields it names,
 * Proxy-Connection, Keep-Alive, Upgrade, Proxy-Authenticate;
 * Transfer-Encoding and Trailer stay because the body is forwarded
 * verbatim), plus "Connection: close" with RESPONSE_HEAD_CLOSE. With
 * RESPONSE_HEAD_DECODED, Content-Encoding, Content-Length and
 * Transfer-Encoding go too, and with RESPONSE_HEAD_CHUNKED
 * "Transfer-Encoding: chunked" is added. @flags is a ResponseHeadFlags
 * mask. Same returns as proxy_request_build_head(). */
int proxy_response_build_head(const HttpMessage *m, unsigned flags, char **ret, size_t *ret_len);
