/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Credential brokering (docs/network.md, "Secrets"): what hutch-proxy does
 * with the secrets it was given, on parsed messages. No I/O here (the
 * intercepting path, intercept.c, and tests/fuzz drive it).
 *
 * A secret has a name (for messages and the audit log), the placeholder
 * the sandbox holds, the real value, the hosts it is for (allowlist
 * patterns) and an optional scope: one request header, a path prefix, a
 * list of methods. Placeholder and value have the same length, so a
 * substitution never changes a Content-Length.
 *
 * SECURITY: the real value is only ever copied into heads and bodies that
 * go to one of the secret's hosts over verified TLS; what goes back to the
 * sandbox has every occurrence replaced by the placeholder. Messages name
 * secrets by name only. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http-message.h"
#include "macro.h"
#include "net/allowlist.h"

/* At most this many secrets (a used-set is a 64-bit mask). */
#define PROXY_SECRETS_MAX 64
#define PROXY_SECRET_VALUE_MAX 8192

typedef struct ProxySecret {
        char *name;
        char *placeholder;
        size_t placeholder_len;
        /* SECURITY: in its own anonymous mapping, excluded from core dumps
         * (MADV_DONTDUMP) and wiped when freed. */
        char *value;
        size_t value_len;
        size_t value_map_len;
        Allowlist *hosts;
        char *header;      /* NULL: every header value */
        char *path_prefix; /* NULL: every path */
        char **methods;    /* NULL: every method */
} ProxySecret;

/* Copies @len bytes of @value into a fresh non-dumpable mapping in @s.
 * Returns 0, -E2BIG or -ENOMEM. */
int proxy_secret_set_value(ProxySecret *s, const char *value, size_t len);
/* Wipes and frees what @s holds. */
void proxy_secret_done(ProxySecret *s);

/* True if @s is for @h port @port (its hosts allow it). */
bool proxy_secret_covers(const ProxySecret *s, const Host *h, uint16_t port);

/* Tripwire: returns the first secret whose placeholder appears in the
 * request target or a header (name or value) of the request head in @m
 * while @h port @port is not one of that secret's hosts, or NULL. */
const ProxySecret *secrets_find_tripwire(const ProxySecret *secrets, size_t n, const Host *h,
                                         uint16_t port, const HttpMessage *m);

/* Builds the head of an intercepted request (origin form, as received) to
 * send to @h port @port: every occurrence of the placeholder of a secret
 * that covers the host is replaced by its value in header values within
 * the secret's scope. Proxy-Connection and Proxy-Authorization are dropped.
 * Returns 0 with a malloc'd head in @ret / @ret_len and the bit mask of the
 * secrets substituted in @ret_used, -EBADMSG if the target is not origin
 * form ("/...") or the method is CONNECT, or -ENOMEM. */
int secrets_build_request_head(const ProxySecret *secrets, size_t n, const Host *h, uint16_t port,
                               const HttpMessage *m, char **ret, size_t *ret_len,
                               uint64_t *ret_used);

/* Builds the head of an upstream response to send to the client, with
 * every occurrence of a secret's value (any secret) replaced by its
 * placeholder in the reason phrase and the header values. Same returns
 * as above (no mask). */
int secrets_build_response_head(const ProxySecret *secrets, size_t n, const HttpMessage *m,
                                char **ret, size_t *ret_len);

/* Replaces every occurrence of any secret's value in @buf of @len bytes by
 * its placeholder, in place. Returns the number of replacements. */
size_t secrets_mask_values(const ProxySecret *secrets, size_t n, char *buf, size_t len);

/* A streaming body filter: values split across calls are still found,
 * because the longest tail that could start a value is held back until the
 * next call (or secret_filter_flush()). */
typedef struct SecretFilter {
        char *buf; /* the last output */
        size_t alloc;
        char *tail; /* held back, PROXY_SECRET_VALUE_MAX bytes */
        size_t tail_len;
} SecretFilter;

/* Feeds @len bytes. Returns 0 with @ret / @ret_len pointing at the bytes
 * that may be sent now (valid until the next call), or -ENOMEM. */
int secret_filter_feed(SecretFilter *f, const ProxySecret *secrets, size_t n, const char *data,
                       size_t len, const char **ret, size_t *ret_len);
/* Returns the held bytes (already masked; valid until the next call) and
 * empties the filter. */
void secret_filter_flush(SecretFilter *f, const char **ret, size_t *ret_len);
void secret_filter_done(SecretFilter *f);
