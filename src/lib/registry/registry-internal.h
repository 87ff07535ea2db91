/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The registry client's HTTP/1.1 transport (registry-http.c): one request
 * per connection (Connection: close), TLS through OpenSSL with the
 * system's CA store (plus --cert-dir), answers parsed by http_parser.
 * Redirects, authentication and the plain-HTTP rule are the caller's
 * (registry-pull.c): this layer only fetches one URL. */

#include <openssl/ssl.h>
#include <stdbool.h>
#include <stdint.h>

#include "hutch-error.h"
#include "macro.h"

typedef struct Url {
        bool https;
        char *host; /* without the brackets of an IPv6 literal */
        uint16_t port;
        char *path; /* starts with '/', query included */
} Url;

void url_done(Url *u);

/* Parses an absolute http:// or https:// URL (no user info; the host is a
 * name or an IP literal). Returns 0, -EINVAL, -EPROTONOSUPPORT (another
 * scheme). */
int url_parse(const char *s, Url *ret);

/* @location (absolute, or a path starting with '/') relative to @base. */
int url_resolve(const Url *base, const char *location, Url *ret);

/* Same scheme, host and port. */
bool url_same_origin(const Url *a, const Url *b);

/* "localhost", 127.0.0.0/8, ::1. */
bool host_is_loopback(const char *host);

/* Whether @s may go into a request line or a header: visible ASCII and
 * spaces only (SECURITY: no CR/LF from a registry's answer reaches the
 * next request). */
bool http_value_is_safe(const char *s);

typedef struct HttpAnswer {
        int status;
        char *location;
        char *www_authenticate;
        char *content_type;
        char *docker_digest; /* Docker-Content-Digest */
        char *content_range;
        char *error_body; /* the first 4 KiB of a non-2xx answer's body */
} HttpAnswer;

void http_answer_done(HttpAnswer *a);

/* Receives the body of a 2xx answer, piece by piece, with the answer's
 * status and headers so far in @ans; a negative return stops the transfer
 * and is returned by http_get(). */
typedef int (*HttpBodyFn)(void *userdata, const HttpAnswer *ans, const void *data, size_t len);

typedef struct HttpTls {
        const char *cert_dir;
        SSL_CTX *verify;
        SSL_CTX *noverify;
} HttpTls;

void http_tls_done(HttpTls *t);

/* GETs @url with the extra header lines @headers ("Name: value\r\n"...,
 * or NULL). The body of a 2xx answer goes to @fn. Returns 0 and fills
 * @ret (any status) once the whole answer arrived, or -errno with
 * @reterr: -EPROTONOSUPPORT (the TLS handshake failed: the server may
 * speak plain HTTP), -EPERM (the certificate is not trusted), -EPROTO
 * (the connection ended before the answer did), -EBADMSG (not HTTP),
 * -ECONNREFUSED and the like from connect. */
int http_get(HttpTls *tls, const Url *url, bool verify, const char *headers, HttpBodyFn fn,
             void *userdata, HttpAnswer *ret, HutchError *reterr);
