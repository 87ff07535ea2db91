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
        /* The lanes (docs/secrets.md): the one header the value goes in, or
         * NULL for the default set (Authorization, X-Api-Key, Api-Key,
         * X-Goog-Api-Key); the one query parameter, or NULL for none. */
        char *header;
        char *query;
        char *path_prefix; /* NULL: every path */
        char **methods;    /* NULL: every method */
        /* The derived forms masked in responses (secret_filter_feed()),
         * made by proxy_secret_set_value() once the placeholder is set: the
         * stable inner part of the base64 encoding (standard, URL-safe) of
         * the value and of the placeholder at each of the three alignments.
         * SECURITY: as sensitive as the value, in a mapping like it. */
        char *forms;
        size_t forms_map_len;
        const char *b64_value[6], *b64_placeholder[6];
        size_t b64_len[6];
        /* The bits of the characters just before and after a needle that
         * come from the value (mask, 0 for none) and the placeholder's. */
        unsigned b64_lead_mask[6], b64_lead_bits[6];
        unsigned b64_tail_mask[6], b64_tail_bits[6];
        size_t n_b64;
} ProxySecret;

/* Copies @len bytes of @value into a fresh non-dumpable mapping in @s and,
 * if @s has a placeholder of the same length, computes the derived forms
 * the masking looks for. Returns 0, -E2BIG or -ENOMEM. */
int proxy_secret_set_value(ProxySecret *s, const char *value, size_t len);
/* Wipes and frees what @s holds. */
void proxy_secret_done(ProxySecret *s);

/* True if @s is for @h port @port (its hosts allow it). */
bool proxy_secret_covers(const ProxySecret *s, const Host *h, uint16_t port);

/* True if a header named @name (@len bytes) is one of @s's header lanes. */
bool proxy_secret_header_in_lane(const ProxySecret *s, const char *name, size_t len);

/* Tripwire: returns the first secret whose placeholder appears in the
 * request target or a header (name or value) of the request head in @m
 * while @h port @port is not one of that secret's hosts, or NULL. */
const ProxySecret *secrets_find_tripwire(const ProxySecret *secrets, size_t n, const Host *h,
                                         uint16_t port, const HttpMessage *m);

/* Lanes: returns the first secret whose placeholder appears in the head in
 * @m outside the places a value may go (docs/secrets.md, "Lanes"): the
 * path, a query parameter other than its ;query=, a header name, or a
 * header that is not one of its lanes, or NULL. @ret_where (optional) gets
 * a static description of the place. Whatever the host. */
const ProxySecret *secrets_find_misplaced(const ProxySecret *secrets, size_t n,
                                          const HttpMessage *m, const char **ret_where);

/* Builds the head of an intercepted request (origin form, as received) to
 * send to @h port @port: every occurrence of the placeholder of a secret
 * that covers the host is replaced by its value in its lanes only (the
 * values of its header lanes, its query parameter), when method and path
 * are in its scope. The hop-by-hop fields are dropped as on the plain path
 * (proxy_hop_fields_has()).
 * SECURITY: when a value was substituted, Accept-Encoding, TE, Range and
 * If-Range are dropped too and "Accept-Encoding: identity" is sent, so the
 * answer comes back in a form the masking can read whole.
 * Returns 0 with a malloc'd head in @ret / @ret_len and the bit mask of the
 * secrets substituted in @ret_used, -EBADMSG if the target is not origin
 * form ("/...") or the method is CONNECT, -E2BIG for more Connection
 * options than PROXY_CONNECTION_TOKENS_MAX, or -ENOMEM. */
int secrets_build_request_head(const ProxySecret *secrets, size_t n, const Host *h, uint16_t port,
                               const HttpMessage *m, char **ret, size_t *ret_len,
                               uint64_t *ret_used);

/* Builds the head of an upstream response to send to the client as the
 * plain path does (proxy_response_build_head() with @flags: hop-by-hop
 * fields dropped, re-framing when decoded, "Connection: close"), with
 * every value (any secret, any derived form) then replaced by its
 * placeholder in the reason phrase and the header values. Returns 0,
 * -ENOMEM, or -EBADMSG (a head that cannot be passed on). */
int secrets_build_response_head(const ProxySecret *secrets, size_t n, const HttpMessage *m,
                                unsigned flags, char **ret, size_t *ret_len);

/* Replaces every occurrence of any secret's value in @buf of @len bytes, in
 * any of its derived forms (percent-encoded, JSON-escaped, base64 and
 * base64url at any alignment), by the same form of its placeholder, in
 * place; the length does not change. Returns the number of replacements. */
size_t secrets_mask_values(const ProxySecret *secrets, size_t n, char *buf, size_t len);

/* A streaming body filter: values split across calls are still found,
 * because from the byte before the first place where a value (in any
 * form) could start and run past the end, the rest is held back until the
 * next call (or secret_filter_flush()); a last byte that is a base64
 * character always is, since a base64 form changes the character before
 * it too. At most
 * PROXY_SECRET_HOLD_MAX bytes are held. */
#define PROXY_SECRET_HOLD_MAX (6 * PROXY_SECRET_VALUE_MAX + 8)
typedef struct SecretFilter {
        char *buf; /* the last output */
        size_t alloc;
        char *tail; /* held back, PROXY_SECRET_HOLD_MAX bytes */
        size_t tail_len;
        /* The pairs of bytes a form can start with, made on the first
         * feed: a filter is for one set of secrets. */
        uint8_t *bigrams;
} SecretFilter;

/* Feeds @len bytes. Returns 0 with @ret / @ret_len pointing at the bytes
 * that may be sent now (valid until the next call), or -ENOMEM. */
int secret_filter_feed(SecretFilter *f, const ProxySecret *secrets, size_t n, const char *data,
                       size_t len, const char **ret, size_t *ret_len);
/* Returns the held bytes (masked; valid until the next call) and empties
 * the filter. Also the end of a secret_scan_feed() stream (@n 0 then). */
void secret_filter_flush(SecretFilter *f, const ProxySecret *secrets, size_t n, const char **ret,
                         size_t *ret_len);
void secret_filter_done(SecretFilter *f);

/* The request body scan (lanes: a placeholder never goes in a body). The
 * same holding back as SecretFilter, over the placeholders: returns 0 with
 * the bytes that may be sent now, -EPERM with @ret_secret set when a
 * placeholder was found (nothing of it has been returned), or -ENOMEM. */
int secret_scan_feed(SecretFilter *f, const ProxySecret *secrets, size_t n, const char *data,
                     size_t len, const char **ret, size_t *ret_len, const ProxySecret **ret_secret);
