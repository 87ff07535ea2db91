/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "base64.h"
#include "parse-util.h"
#include "proxy-request.h"
#include "secrets.h"
#include "strv.h"

static const char b64_std[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char b64_url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static void forms_free(ProxySecret *s) {
        if (s->forms) {
                explicit_bzero(s->forms, s->forms_map_len);
                (void)munmap(s->forms, s->forms_map_len);
        }
        s->forms = NULL;
        s->forms_map_len = 0;
        s->n_b64 = 0;
}

/* The 6-bit value of character @j of base64(@offset zero bytes, @in of
 * @len bytes, zero bytes). */
static unsigned b64_sextet(const char *in, size_t len, size_t offset, size_t j) {
        size_t bit = 6 * j;
        unsigned v = 0;

        for (size_t b = 0; b < 6; b++, bit++) {
                size_t byte = bit / 8;
                unsigned char c = byte >= offset && byte < offset + len
                                          ? (unsigned char)in[byte - offset]
                                          : 0;

                v = (v << 1) | ((c >> (7 - bit % 8)) & 1U);
        }
        return v;
}

/* Writes to @out the characters of base64(@offset zero bytes, @in, two
 * zero bytes) that depend on the bytes of @in alone: the ones any encoder
 * emits for @in wherever it sits in a longer input with that alignment,
 * padded or not. Returns their number. */
static size_t b64_inner(const char *in, size_t len, size_t offset, const char *alphabet,
                        char *out) {
        size_t first = (8 * offset + 5) / 6, last = (8 * (offset + len)) / 6, n = 0;

        for (size_t j = first; j < last; j++)
                out[n++] = alphabet[b64_sextet(in, len, offset, j)];
        return n;
}

/* Rewrites the base64 character at @c: the bits in @mask become @bits,
 * the others (a neighbour's) stay; the alphabet stays the one @c is in. */
static void b64_patch(char *c, unsigned mask, unsigned bits) {
        int i = base64_value(*c);
        bool url = *c == '-' || *c == '_';

        if (i < 0)
                return;
        *c = (url ? b64_url : b64_std)[((unsigned)i & ~mask) | (bits & mask)];
}

/* The base64 forms of the value and the placeholder (ProxySecret.forms). */
static int forms_make(ProxySecret *s) {
        long page = sysconf(_SC_PAGESIZE);
        size_t per = s->value_len * 4 / 3 + 4, want = 12 * per, used = 0, std_len[3] = {};
        const char *std_value[3] = {};
        char *p;

        forms_free(s);
        if (page <= 0)
                page = 4096;
        want = (want + (size_t)page) / (size_t)page * (size_t)page;
        p = mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
                return -ENOMEM;
        (void)madvise(p, want, MADV_DONTDUMP);
        s->forms = p;
        s->forms_map_len = want;
        for (size_t a = 0; a < 2; a++)
                for (size_t o = 0; o < 3; o++) {
                        const char *alphabet = a == 0 ? b64_std : b64_url;
                        char *v = p + used, *ph = p + used + per;
                        size_t k = b64_inner(s->value, s->value_len, o, alphabet, v);

                        (void)b64_inner(s->placeholder, s->placeholder_len, o, alphabet, ph);
                        used += 2 * per;
                        /* URL-safe is the same as standard for most
                         * values: one needle is enough then. */
                        if (a == 0) {
                                std_value[o] = v;
                                std_len[o] = k;
                        }
                        if (k == 0 ||
                            (a == 1 && std_len[o] == k && memcmp(v, std_value[o], k) == 0))
                                continue;
                        s->b64_value[s->n_b64] = v;
                        s->b64_placeholder[s->n_b64] = ph;
                        s->b64_len[s->n_b64] = k;
                        /* The characters on either side of the needle hold
                         * a few bits of the first and last byte too. */
                        s->b64_lead_mask[s->n_b64] = 0;
                        s->b64_tail_mask[s->n_b64] = 0;
                        if ((8 * o) % 6 != 0) {
                                unsigned bits = 6 - (unsigned)((8 * o) % 6);

                                s->b64_lead_mask[s->n_b64] = (1U << bits) - 1;
                                s->b64_lead_bits[s->n_b64] = b64_sextet(
                                        s->placeholder, s->placeholder_len, o, (8 * o) / 6);
                        }
                        if ((8 * (o + s->value_len)) % 6 != 0) {
                                unsigned bits = (unsigned)((8 * (o + s->value_len)) % 6);

                                s->b64_tail_mask[s->n_b64] = ((1U << bits) - 1) << (6 - bits);
                                s->b64_tail_bits[s->n_b64] =
                                        b64_sextet(s->placeholder, s->placeholder_len, o,
                                                   (8 * (o + s->value_len)) / 6);
                        }
                        s->n_b64++;
                }
        return 0;
}

int proxy_secret_set_value(ProxySecret *s, const char *value, size_t len) {
        long page = sysconf(_SC_PAGESIZE);
        size_t map_len;
        char *p;

        if (len == 0 || len > PROXY_SECRET_VALUE_MAX)
                return -E2BIG;
        if (page <= 0)
                page = 4096;
        map_len = (len + (size_t)page) / (size_t)page * (size_t)page;
        p = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
                return -ENOMEM;
        /* SECURITY: never in a core dump, even if the process becomes
         * dumpable again; best effort, as is the lock. */
        (void)madvise(p, map_len, MADV_DONTDUMP);
        (void)mlock(p, map_len);
        memcpy(p, value, len);
        p[len] = '\0';
        if (s->value) {
                explicit_bzero(s->value, s->value_map_len);
                (void)munmap(s->value, s->value_map_len);
        }
        s->value = p;
        s->value_len = len;
        s->value_map_len = map_len;
        if (s->placeholder && s->placeholder_len == len)
                return forms_make(s);
        return 0;
}

void proxy_secret_done(ProxySecret *s) {
        if (!s)
                return;
        if (s->value) {
                explicit_bzero(s->value, s->value_map_len);
                (void)munmap(s->value, s->value_map_len);
        }
        forms_free(s);
        free(s->name);
        free(s->placeholder);
        allowlist_free(s->hosts);
        free(s->header);
        free(s->query);
        free(s->path_prefix);
        strv_free(s->methods);
        *s = (ProxySecret){};
}

bool proxy_secret_covers(const ProxySecret *s, const Host *h, uint16_t port) {
        return s->hosts && allowlist_check_host(s->hosts, h, port, NULL) == ALLOWLIST_ALLOW;
}

static bool contains(const char *hay, size_t hay_len, const char *needle, size_t needle_len) {
        return needle_len > 0 && hay_len >= needle_len && memmem(hay, hay_len, needle, needle_len);
}

/* SECURITY: the headers a key goes in by convention. Any other header is
 * one an upstream may echo (User-Agent, Referer, Cookie, X-Anything), so a
 * value never goes there unless the spec names it. */
static const char *const default_lanes[] = {"Authorization", "X-Api-Key", "Api-Key",
                                            "X-Goog-Api-Key"};

bool proxy_secret_header_in_lane(const ProxySecret *s, const char *name, size_t len) {
        if (s->header)
                return http_token_equal(name, len, s->header);
        for (size_t i = 0; i < ELEMENTSOF(default_lanes); i++)
                if (http_token_equal(name, len, default_lanes[i]))
                        return true;
        return false;
}

const ProxySecret *secrets_find_tripwire(const ProxySecret *secrets, size_t n, const Host *h,
                                         uint16_t port, const HttpMessage *m) {
        const char *target;
        size_t target_len;

        target = http_message_target(m, &target_len);
        for (size_t i = 0; i < n; i++) {
                const ProxySecret *s = &secrets[i];
                bool seen = contains(target, target_len, s->placeholder, s->placeholder_len);

                for (size_t f = 0; f < m->n_fields && !seen; f++) {
                        const char *name, *value;
                        size_t nl, vl;

                        http_message_field(m, f, &name, &nl, &value, &vl);
                        seen = contains(name, nl, s->placeholder, s->placeholder_len) ||
                               contains(value, vl, s->placeholder, s->placeholder_len);
                }
                if (seen && !proxy_secret_covers(s, h, port))
                        return s;
        }
        return NULL;
}

/* Calls @fn for the value of every parameter of the query in @target
 * (after the first '?') named @param exactly: the lane ";query=". The
 * value is given as an offset and length into @target. */
static void query_lane_foreach(const char *target, size_t len, const char *param,
                               void (*fn)(char *base, size_t off, size_t n, void *userdata),
                               char *base, void *userdata) {
        const char *q = memchr(target, '?', len);
        size_t plen = strlen(param);

        if (!q)
                return;
        for (size_t off = (size_t)(q - target) + 1; off <= len;) {
                const char *end = memchr(target + off, '&', len - off);
                size_t n = end ? (size_t)(end - target) - off : len - off;

                if (n > plen && target[off + plen] == '=' && memcmp(target + off, param, plen) == 0)
                        fn(base, off + plen + 1, n - plen - 1, userdata);
                off += n + 1;
        }
}

static void blank_cb(char *base, size_t off, size_t n, void *userdata) {
        memset(base + off, 0, n);
}

const ProxySecret *secrets_find_misplaced(const ProxySecret *secrets, size_t n,
                                          const HttpMessage *m, const char **ret_where) {
        const char *target, *where = NULL;
        size_t target_len;
        char *copy = NULL;
        const ProxySecret *found = NULL;

        target = http_message_target(m, &target_len);
        for (size_t i = 0; i < n && !found; i++) {
                const ProxySecret *s = &secrets[i];
                const char *q = memchr(target, '?', target_len);
                size_t path_len = q ? (size_t)(q - target) : target_len;

                if (contains(target, path_len, s->placeholder, s->placeholder_len)) {
                        found = s;
                        where = "the request path";
                        break;
                }
                if (contains(target, target_len, s->placeholder, s->placeholder_len)) {
                        /* In the query: only the value of the lane
                         * parameter may hold it. */
                        if (!s->query) {
                                found = s;
                                where = "the query";
                                break;
                        }
                        free(copy);
                        copy = malloc(target_len ? target_len : 1);
                        if (!copy) {
                                /* Out of memory: fail closed. */
                                found = s;
                                where = "the query";
                                break;
                        }
                        memcpy(copy, target, target_len);
                        query_lane_foreach(target, target_len, s->query, blank_cb, copy, NULL);
                        if (contains(copy, target_len, s->placeholder, s->placeholder_len)) {
                                found = s;
                                where = "the query";
                                break;
                        }
                }
                for (size_t f = 0; f < m->n_fields; f++) {
                        const char *name, *value;
                        size_t nl, vl;

                        http_message_field(m, f, &name, &nl, &value, &vl);
                        if (contains(name, nl, s->placeholder, s->placeholder_len) ||
                            (contains(value, vl, s->placeholder, s->placeholder_len) &&
                             !proxy_secret_header_in_lane(s, name, nl))) {
                                found = s;
                                where = "a header that is not one of its lanes";
                                break;
                        }
                }
        }
        free(copy);
        if (found && ret_where)
                *ret_where = where;
        return found;
}

/* A growable output buffer for building heads. */
typedef struct Out {
        char *buf;
        size_t len, alloc;
        bool oom;
} Out;

static void out_add(Out *o, const char *data, size_t len) {
        if (o->oom)
                return;
        if (o->len + len + 1 > o->alloc) {
                size_t want = MAX(o->alloc * 2, o->len + len + 256);
                char *grown = realloc(o->buf, want);

                if (!grown) {
                        o->oom = true;
                        return;
                }
                o->buf = grown;
                o->alloc = want;
        }
        memcpy(o->buf + o->len, data, len);
        o->len += len;
        o->buf[o->len] = '\0';
}

static void out_str(Out *o, const char *s) {
        out_add(o, s, strlen(s));
}

static int out_finish(Out *o, char **ret, size_t *ret_len) {
        if (o->oom) {
                if (o->buf)
                        explicit_bzero(o->buf, o->alloc);
                free(o->buf);
                return -ENOMEM;
        }
        *ret = o->buf;
        *ret_len = o->len;
        return 0;
}

/* Replaces @from by @to (same length) everywhere in @buf. */
static size_t replace_all(char *buf, size_t len, const char *from, const char *to, size_t n) {
        size_t count = 0;
        char *p = buf;

        if (n == 0)
                return 0;
        while ((size_t)(p - buf) + n <= len) {
                char *hit = memmem(p, len - (size_t)(p - buf), from, n);

                if (!hit)
                        break;
                memcpy(hit, to, n);
                p = hit + n;
                count++;
        }
        return count;
}

static bool method_in_scope(const ProxySecret *s, const char *method) {
        if (!s->methods)
                return true;
        STRV_FOREACH(m, s->methods)
                if (strcasecmp(*m, method) == 0)
                        return true;
        return false;
}

/* SECURITY: what could bring a value back in a form the masking cannot
 * read whole: a content coding, or a slice of it. */
static bool is_encoding_field(const char *name, size_t len) {
        return http_token_equal(name, len, "Accept-Encoding") ||
               http_token_equal(name, len, "TE") || http_token_equal(name, len, "Range") ||
               http_token_equal(name, len, "If-Range");
}

typedef struct QuerySubst {
        const ProxySecret *s;
        bool used;
} QuerySubst;

static void subst_cb(char *base, size_t off, size_t n, void *userdata) {
        QuerySubst *q = userdata;

        if (replace_all(base + off, n, q->s->placeholder, q->s->value, q->s->value_len) > 0)
                q->used = true;
}

/* The secrets (bit mask) whose host, method and path prefix the request
 * in @m to @h port @port is in. */
static uint64_t request_covers(const ProxySecret *secrets, size_t n, const Host *h, uint16_t port,
                               const HttpMessage *m) {
        const char *method = http_method_str(http_message_method(m)), *target;
        size_t target_len;
        uint64_t covers = 0;

        target = http_message_target(m, &target_len);
        for (size_t i = 0; i < n && i < PROXY_SECRETS_MAX; i++) {
                const ProxySecret *s = &secrets[i];

                if (s->placeholder_len != s->value_len || !proxy_secret_covers(s, h, port))
                        continue;
                if (!method_in_scope(s, method))
                        continue;
                if (s->path_prefix && (target_len < strlen(s->path_prefix) ||
                                       memcmp(target, s->path_prefix, strlen(s->path_prefix)) != 0))
                        continue;
                covers |= UINT64_C(1) << i;
        }
        return covers;
}

/* Of @covers, the secrets whose placeholder is in one of their header
 * lanes: known before the head is written, so the fields that ask for an
 * encoded answer can be left out. */
static uint64_t request_header_lanes_used(const ProxySecret *secrets, size_t n, uint64_t covers,
                                          const HttpMessage *m) {
        uint64_t used = 0;

        for (size_t f = 0; f < m->n_fields; f++) {
                const char *name, *value;
                size_t nl, vl;

                http_message_field(m, f, &name, &nl, &value, &vl);
                for (size_t i = 0; i < n && i < PROXY_SECRETS_MAX; i++)
                        if ((covers & (UINT64_C(1) << i)) &&
                            proxy_secret_header_in_lane(&secrets[i], name, nl) &&
                            contains(value, vl, secrets[i].placeholder, secrets[i].placeholder_len))
                                used |= UINT64_C(1) << i;
        }
        return used;
}

int secrets_build_request_head(const ProxySecret *secrets, size_t n, const Host *h, uint16_t port,
                               const HttpMessage *m, char **ret, size_t *ret_len,
                               uint64_t *ret_used) {
        const char *method = http_method_str(http_message_method(m)), *target;
        size_t target_len, target_start;
        uint64_t covers = 0, used = 0;
        ProxyHopFields hop;
        char version[32];
        Out o = {};
        int r;

        target = http_message_target(m, &target_len);
        if (target_len == 0 || target[0] != '/' || http_message_method(m) == HTTP_CONNECT)
                return -EBADMSG;
        /* The hop-by-hop fields go as on the plain path: the proxy keeps
         * its own connections. */
        if (proxy_hop_fields_init(&hop, m) < 0)
                return -E2BIG;
        covers = request_covers(secrets, n, h, port, m);
        used = request_header_lanes_used(secrets, n, covers, m);

        (void)snprintf(version, sizeof(version), " HTTP/%u.%u\r\n", (unsigned)m->parser.http_major,
                       (unsigned)m->parser.http_minor);
        out_str(&o, method);
        out_add(&o, " ", 1);
        target_start = o.len;
        out_add(&o, target, target_len);
        for (size_t i = 0; i < n && i < PROXY_SECRETS_MAX && !o.oom; i++) {
                QuerySubst q = {.s = &secrets[i]};

                if (!(covers & (UINT64_C(1) << i)) || !secrets[i].query)
                        continue;
                query_lane_foreach(target, target_len, secrets[i].query, subst_cb,
                                   o.buf + target_start, &q);
                if (q.used)
                        used |= UINT64_C(1) << i;
        }
        out_str(&o, version);
        for (size_t f = 0; f < m->n_fields; f++) {
                const char *name, *value;
                size_t nl, vl, start;

                http_message_field(m, f, &name, &nl, &value, &vl);
                if (proxy_hop_fields_has(&hop, name, nl) ||
                    (used != 0 && is_encoding_field(name, nl)))
                        continue;
                out_add(&o, name, nl);
                out_add(&o, ": ", 2);
                start = o.len;
                out_add(&o, value, vl);
                if (o.oom)
                        break;
                for (size_t i = 0; i < n && i < PROXY_SECRETS_MAX; i++) {
                        const ProxySecret *s = &secrets[i];

                        if (!(covers & (UINT64_C(1) << i)) ||
                            !proxy_secret_header_in_lane(s, name, nl))
                                continue;
                        (void)replace_all(o.buf + start, vl, s->placeholder, s->value,
                                          s->value_len);
                }
                out_add(&o, "\r\n", 2);
        }
        if (used != 0)
                out_str(&o, "Accept-Encoding: identity\r\n");
        out_add(&o, "\r\n", 2);
        r = out_finish(&o, ret, ret_len);
        if (r < 0)
                return r;
        *ret_used = used;
        return 0;
}

int secrets_build_response_head(const ProxySecret *secrets, size_t n, const HttpMessage *m,
                                unsigned flags, char **ret, size_t *ret_len) {
        char *head = NULL;
        size_t len = 0;
        int r;

        r = proxy_response_build_head(m, flags, &head, &len);
        if (r < 0)
                return r;
        /* Field names are tokens and cannot hold a value; masking the whole
         * head covers the reason phrase and every value at once. */
        (void)secrets_mask_values(secrets, n, head, len);
        *ret = head;
        *ret_len = len;
        return 0;
}

/* ---- masking: the value and its derived forms ---- */

typedef enum MatchResult {
        MATCH_NONE,
        MATCH_FOUND,
        MATCH_PARTIAL, /* consistent up to the end of the buffer */
} MatchResult;

/* How one character of a matched value was written. */
typedef enum CharStyle {
        STYLE_LITERAL,
        STYLE_PCT_UPPER, /* %2F */
        STYLE_PCT_LOWER, /* %2f */
        STYLE_PCT,       /* %20: no hex letter, the case of its neighbours */
        STYLE_U_UPPER,   /* \u002F */
        STYLE_U_LOWER,   /* \u002f */
        STYLE_U,         /* \u0020 */
        STYLE_ESCAPE,    /* \/ */
} CharStyle;

/* The case of the hex letters in @n bytes at @s: 1 lower, 0 upper, -1 no
 * letter. */
static int hex_case(const char *s, size_t n) {
        for (size_t i = 0; i < n; i++) {
                if (s[i] >= 'a' && s[i] <= 'f')
                        return 1;
                if (s[i] >= 'A' && s[i] <= 'F')
                        return 0;
        }
        return -1;
}

/* The style of an escape of kind @neutral (STYLE_PCT or STYLE_U) whose
 * @n hex digits are at @hex (all present and valid). */
static uint8_t escape_style(const char *hex, size_t n, CharStyle neutral) {
        int c = hex_case(hex, n);

        if (c < 0)
                return (uint8_t)neutral;
        if (neutral == STYLE_PCT)
                return c ? STYLE_PCT_LOWER : STYLE_PCT_UPPER;
        return c ? STYLE_U_LOWER : STYLE_U_UPPER;
}

/* Reads @want hex digits at @p (at most @avail there). Returns the value,
 * -1 if a character is no hex digit, -2 if the buffer ends first. */
static int read_hex(const char *p, size_t avail, size_t want) {
        int v = 0;

        for (size_t i = 0; i < want; i++) {
                int d;

                if (i >= avail)
                        return -2;
                d = hex_digit(p[i]);
                if (d < 0)
                        return -1;
                v = v * 16 + d;
        }
        return v;
}

/* Matches @v (@vlen bytes, from its character @k on) at @pos of @buf, each
 * character written literally, percent-encoded (either case) or
 * JSON-escaped (\uXXXX either case, \/ \" \\). On FOUND @ret_end is the end
 * of the match and @styles[k...] say how each character was written.
 * Ambiguity (a value holding '%' or '\') is explored depth first within
 * @budget branches. */
static MatchResult flex_match(const char *buf, size_t len, size_t pos, const char *v, size_t vlen,
                              size_t k, uint8_t *styles, unsigned *budget, size_t *ret_end) {
        while (k < vlen) {
                size_t esc_len = 0;
                int esc = -1;
                uint8_t style = STYLE_LITERAL;
                char c;

                if (pos >= len)
                        return MATCH_PARTIAL;
                c = buf[pos];
                if (c == '%') {
                        esc = read_hex(buf + pos + 1, len - pos - 1, 2);
                        if (esc == -2)
                                return MATCH_PARTIAL;
                        esc_len = 3;
                        if (esc >= 0)
                                style = escape_style(buf + pos + 1, 2, STYLE_PCT);
                } else if (c == '\\') {
                        if (pos + 1 >= len)
                                return MATCH_PARTIAL;
                        if (buf[pos + 1] == 'u') {
                                esc = read_hex(buf + pos + 2, len - pos - 2, 4);
                                if (esc == -2)
                                        return MATCH_PARTIAL;
                                esc_len = 6;
                                if (esc >= 0)
                                        style = escape_style(buf + pos + 2, 4, STYLE_U);
                        } else if (strchr("/\"\\", buf[pos + 1]) && buf[pos + 1] != '\0') {
                                esc = (unsigned char)buf[pos + 1];
                                esc_len = 2;
                                style = STYLE_ESCAPE;
                        }
                }
                if (esc >= 0 && esc == (unsigned char)v[k]) {
                        if (c == v[k]) {
                                /* Both readings fit: try the escape first. */
                                MatchResult r;

                                if (*budget == 0)
                                        return MATCH_NONE;
                                (*budget)--;
                                styles[k] = style;
                                r = flex_match(buf, len, pos + esc_len, v, vlen, k + 1, styles,
                                               budget, ret_end);
                                if (r != MATCH_NONE)
                                        return r;
                                styles[k] = STYLE_LITERAL;
                                pos++;
                                k++;
                                continue;
                        }
                        styles[k] = style;
                        pos += esc_len;
                        k++;
                        continue;
                }
                if (c != v[k])
                        return MATCH_NONE;
                styles[k] = STYLE_LITERAL;
                pos++;
                k++;
        }
        *ret_end = pos;
        return MATCH_FOUND;
}

static void put_hex(char *out, unsigned char c, bool lower) {
        const char *digits = lower ? "0123456789abcdef" : "0123456789ABCDEF";

        out[0] = digits[c >> 4];
        out[1] = digits[c & 15];
}

/* Rewrites the match at @pos with the placeholder @ph, each character in
 * the style its counterpart had, so the length stays the same. */
static void flex_rewrite(char *buf, size_t pos, const char *ph, size_t n, const uint8_t *styles) {
        bool lower = false;

        /* An escape without hex letters (%30) takes the case of the last
         * one with letters before it, or else of the first after it. */
        for (size_t k = 0; k < n; k++)
                if (styles[k] == STYLE_PCT_LOWER || styles[k] == STYLE_U_LOWER ||
                    styles[k] == STYLE_PCT_UPPER || styles[k] == STYLE_U_UPPER) {
                        lower = styles[k] == STYLE_PCT_LOWER || styles[k] == STYLE_U_LOWER;
                        break;
                }
        for (size_t k = 0; k < n; k++) {
                unsigned char c = (unsigned char)ph[k];

                switch ((CharStyle)styles[k]) {
                case STYLE_LITERAL:
                        buf[pos++] = (char)c;
                        break;
                case STYLE_PCT_UPPER:
                case STYLE_PCT_LOWER:
                case STYLE_PCT:
                        if (styles[k] != STYLE_PCT)
                                lower = styles[k] == STYLE_PCT_LOWER;
                        buf[pos] = '%';
                        put_hex(buf + pos + 1, c, lower);
                        pos += 3;
                        break;
                case STYLE_U_UPPER:
                case STYLE_U_LOWER:
                case STYLE_U:
                        if (styles[k] != STYLE_U)
                                lower = styles[k] == STYLE_U_LOWER;
                        memcpy(buf + pos, "\\u00", 4);
                        put_hex(buf + pos + 4, c, lower);
                        pos += 6;
                        break;
                case STYLE_ESCAPE:
                        /* Two bytes: the escape if the placeholder's
                         * character has one, else that character twice. */
                        if (strchr("/\"\\", (char)c) && c != '\0') {
                                buf[pos] = '\\';
                                buf[pos + 1] = (char)c;
                        } else
                                buf[pos] = buf[pos + 1] = (char)c;
                        pos += 2;
                        break;
                }
        }
}

static MatchResult literal_match(const char *buf, size_t len, size_t pos, const char *needle,
                                 size_t n) {
        size_t avail = len - pos;

        if (avail < n)
                return memcmp(buf + pos, needle, avail) == 0 ? MATCH_PARTIAL : MATCH_NONE;
        return memcmp(buf + pos, needle, n) == 0 ? MATCH_FOUND : MATCH_NONE;
}

#define BIGRAMS_SIZE (65536 / 8)

static void bigram_set(uint8_t *bg, unsigned char a, unsigned char b) {
        unsigned k = (unsigned)a << 8 | b;

        bg[k >> 3] |= (uint8_t)(1U << (k & 7));
}

static bool bigram_has(const uint8_t *bg, unsigned char a, unsigned char b) {
        unsigned k = (unsigned)a << 8 | b;

        return bg[k >> 3] & (1U << (k & 7));
}

/* Fills @bg (BIGRAMS_SIZE bytes, then 257) with every pair of bytes a form
 * of some secret's value can start with, and after the table their first
 * bytes (a count, then the bytes) for the scan. */
static void bigrams_build(const ProxySecret *secrets, size_t n, uint8_t *bg) {
        static const char hex[] = "0123456789abcdefABCDEF";
        unsigned char *starts = bg + BIGRAMS_SIZE;
        size_t k = 0;

        memset(bg, 0, BIGRAMS_SIZE + 257);
        for (size_t i = 0; i < n; i++) {
                const ProxySecret *s = &secrets[i];
                unsigned char v0;

                if (s->value_len != s->placeholder_len || s->value_len == 0)
                        continue;
                v0 = (unsigned char)s->value[0];
                if (s->value_len == 1)
                        for (unsigned b = 0; b < 256; b++)
                                bigram_set(bg, v0, (unsigned char)b);
                else {
                        bigram_set(bg, v0, (unsigned char)s->value[1]);
                        bigram_set(bg, v0, '%');
                        bigram_set(bg, v0, '\\');
                }
                for (size_t h = 0; h < sizeof(hex) - 1; h++)
                        bigram_set(bg, '%', (unsigned char)hex[h]);
                bigram_set(bg, '\\', 'u');
                bigram_set(bg, '\\', '/');
                bigram_set(bg, '\\', '"');
                bigram_set(bg, '\\', '\\');
                for (size_t b = 0; b < s->n_b64; b++)
                        bigram_set(bg, (unsigned char)s->b64_value[b][0],
                                   s->b64_len[b] > 1 ? (unsigned char)s->b64_value[b][1] : 0);
        }
        /* A first byte is one whose row of 256 bits is not all zero. */
        for (unsigned a = 0; a < 256; a++)
                for (unsigned w = 0; w < 32; w++)
                        if (bg[a * 32 + w] != 0) {
                                /* More than 16 only tells the scan to
                                 * use the table alone. */
                                if (k < 255)
                                        starts[1 + k++] = (unsigned char)a;
                                break;
                        }
        starts[0] = (unsigned char)k;
}

/* What the scan compares with: the first bytes, as SSE2 vectors. */
typedef struct Scan {
        const uint8_t *bg;
        const unsigned char *starts;
        size_t n_starts;
#ifdef __SSE2__
        __m128i want[16];
#endif
} Scan;

static void scan_init(Scan *sc, const uint8_t *bg) {
        sc->bg = bg;
        sc->starts = bg + BIGRAMS_SIZE + 1;
        sc->n_starts = bg[BIGRAMS_SIZE];
#ifdef __SSE2__
        for (size_t k = 0; k < sc->n_starts && k < 16; k++)
                sc->want[k] = _mm_set1_epi8((char)sc->starts[k]);
#endif
}

/* True if a form may start at @p: its pair is in the table, or it is the
 * last byte. */
static bool scan_candidate(const Scan *sc, const char *buf, size_t p, size_t len) {
        return p + 1 >= len || bigram_has(sc->bg, (unsigned char)buf[p], (unsigned char)buf[p + 1]);
}

/* The offset of the next candidate at or after @p (@len if none). With
 * SSE2 and at most 16 first bytes, 16 bytes of @buf are compared with each
 * at once; else a byte at a time. */
static size_t scan_next(const Scan *sc, const char *buf, size_t p, size_t len) {
#ifdef __SSE2__
        if (sc->n_starts <= 16)
                for (; p + 16 <= len; p += 16) {
                        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(buf + p));
                        __m128i hit = _mm_setzero_si128();
                        unsigned mask;

                        for (size_t k = 0; k < sc->n_starts; k++)
                                hit = _mm_or_si128(hit, _mm_cmpeq_epi8(v, sc->want[k]));
                        mask = (unsigned)_mm_movemask_epi8(hit);
                        while (mask != 0) {
                                size_t q = p + (size_t)__builtin_ctz(mask);

                                if (scan_candidate(sc, buf, q, len))
                                        return q;
                                mask &= mask - 1;
                        }
                }
#endif
        /* The table alone is exact: every byte is looked up. */
        for (; p < len; p++)
                if (scan_candidate(sc, buf, p, len))
                        return p;
        return len;
}

/* Masks @buf in place. With @hold, stops at the first place where a form
 * could start and run past the end and returns its offset (@len if there
 * is none); without, such a partial form is no value and is left alone.
 * @bg is bigrams_build()'s table for the same secrets. */
/* Which form matched where (match_at()). */
typedef struct Match {
        const ProxySecret *s;
        int b64;    /* the needle, or -1 for the value (styles say how) */
        size_t end; /* just after the match */
} Match;

/* Tries every form of every secret at @p, in order; the first that is
 * FOUND (or, with @hold, PARTIAL) decides. Nothing is written but
 * @styles. */
static MatchResult match_at(const ProxySecret *secrets, size_t n, const char *buf, size_t len,
                            size_t p, bool hold, uint8_t *styles, Match *ret) {
        unsigned char c = (unsigned char)buf[p];

        for (size_t i = 0; i < n; i++) {
                const ProxySecret *s = &secrets[i];
                MatchResult r;

                if (s->value_len != s->placeholder_len || s->value_len == 0)
                        continue;
                if (c == (unsigned char)s->value[0] || c == '%' || c == '\\') {
                        unsigned budget = 256;
                        size_t end = 0;

                        r = flex_match(buf, len, p, s->value, s->value_len, 0, styles, &budget,
                                       &end);
                        if (r == MATCH_FOUND) {
                                *ret = (Match){.s = s, .b64 = -1, .end = end};
                                return r;
                        }
                        if (r == MATCH_PARTIAL && hold)
                                return r;
                }
                for (size_t b = 0; b < s->n_b64; b++) {
                        if (c != (unsigned char)s->b64_value[b][0])
                                continue;
                        r = literal_match(buf, len, p, s->b64_value[b], s->b64_len[b]);
                        /* The character after it is needed too. */
                        if (r == MATCH_FOUND && hold && s->b64_tail_mask[b] != 0 &&
                            p + s->b64_len[b] >= len)
                                r = MATCH_PARTIAL;
                        if (r == MATCH_FOUND) {
                                *ret = (Match){.s = s, .b64 = (int)b, .end = p + s->b64_len[b]};
                                return r;
                        }
                        if (r == MATCH_PARTIAL && hold)
                                return r;
                }
        }
        return MATCH_NONE;
}

/* Masks @buf in place. With @hold, stops at the first place where a form
 * could start and run past the end and returns the offset of the byte
 * before it (@len if there is none); without, such a partial form is no
 * value and is left alone. @bg is bigrams_build()'s table for the same
 * secrets. */
static size_t mask_core(const ProxySecret *secrets, size_t n, const uint8_t *bg, char *buf,
                        size_t len, bool hold, size_t *count) {
        uint8_t styles[PROXY_SECRET_VALUE_MAX];
        size_t p = 0;
        Scan sc;

        scan_init(&sc, bg);
        while (p < len) {
                const ProxySecret *s;
                MatchResult r;
                bool tail;
                Match m;
                size_t b;

                p = scan_next(&sc, buf, p, len);
                if (p >= len)
                        break;
                r = match_at(secrets, n, buf, len, p, hold, styles, &m);
                if (r == MATCH_PARTIAL)
                        return p > 0 ? p - 1 : 0;
                if (r == MATCH_NONE) {
                        p++;
                        continue;
                }
                s = m.s;
                (*count)++;
                if (m.b64 < 0) {
                        flex_rewrite(buf, p, s->placeholder, s->placeholder_len, styles);
                        p = m.end;
                        continue;
                }
                b = (size_t)m.b64;
                /* SECURITY: the character after a base64 form holds bits
                 * of the value's last byte, unless another form starts
                 * there (the input need not be one base64 stream): that
                 * one is masked whole, next. */
                tail = s->b64_tail_mask[b] != 0 && m.end < len;
                if (tail) {
                        Match next;

                        r = match_at(secrets, n, buf, len, m.end, hold, styles, &next);
                        if (r == MATCH_PARTIAL)
                                return p > 0 ? p - 1 : 0;
                        tail = r == MATCH_NONE;
                }
                memcpy(buf + p, s->b64_placeholder[b], s->b64_len[b]);
                if (s->b64_lead_mask[b] != 0 && p > 0)
                        b64_patch(buf + p - 1, s->b64_lead_mask[b], s->b64_lead_bits[b]);
                if (tail)
                        b64_patch(buf + m.end, s->b64_tail_mask[b], s->b64_tail_bits[b]);
                p = m.end;
        }
        return len;
}

size_t secrets_mask_values(const ProxySecret *secrets, size_t n, char *buf, size_t len) {
        uint8_t bg[BIGRAMS_SIZE + 257];
        size_t count = 0;

        bigrams_build(secrets, n, bg);
        (void)mask_core(secrets, n, bg, buf, len, false, &count);
        return count;
}

static int filter_grow(SecretFilter *f, size_t total) {
        if (f->alloc < total || !f->buf) {
                size_t want = MAX(f->alloc * 2, total);
                char *grown;

                want = MAX(want, (size_t)256);
                grown = malloc(want);
                if (!grown)
                        return -ENOMEM;
                /* SECURITY: the old buffer held unmasked bytes. */
                if (f->buf)
                        explicit_bzero(f->buf, f->alloc);
                free(f->buf);
                f->buf = grown;
                f->alloc = want;
        }
        if (!f->tail) {
                f->tail = malloc(PROXY_SECRET_HOLD_MAX);
                if (!f->tail)
                        return -ENOMEM;
        }
        return 0;
}

/* Puts the held bytes and then @data (@len bytes) in f->buf, whose length
 * is then f->tail_len + @len. 0 or -ENOMEM. */
static int filter_join(SecretFilter *f, const char *data, size_t len) {
        int r;

        r = filter_grow(f, f->tail_len + len);
        if (r < 0)
                return r;
        memcpy(f->buf, f->tail, f->tail_len);
        if (len > 0)
                memcpy(f->buf + f->tail_len, data, len);
        return 0;
}

int secret_filter_feed(SecretFilter *f, const ProxySecret *secrets, size_t n, const char *data,
                       size_t len, const char **ret, size_t *ret_len) {
        size_t total = f->tail_len + len, keep, count = 0;
        int r;

        r = filter_join(f, data, len);
        if (r < 0)
                return r;
        if (!f->bigrams) {
                f->bigrams = malloc(BIGRAMS_SIZE + 257);
                if (!f->bigrams)
                        return -ENOMEM;
                bigrams_build(secrets, n, f->bigrams);
        }
        keep = mask_core(secrets, n, f->bigrams, f->buf, total, true, &count);
        /* A base64 form starting in the next feed may need to change the
         * last byte, if that is a base64 character (a line end, as at the
         * end of an event of a stream, is not, and goes at once). */
        if (keep == total && total > 0 && base64_value(f->buf[total - 1]) >= 0)
                keep--;
        /* A partial form is never longer than six bytes a character (and
         * the byte before it). */
        assert(total - keep <= PROXY_SECRET_HOLD_MAX);
        memcpy(f->tail, f->buf + keep, total - keep);
        f->tail_len = total - keep;
        *ret = f->buf;
        *ret_len = keep;
        return 0;
}

void secret_filter_flush(SecretFilter *f, const ProxySecret *secrets, size_t n, const char **ret,
                         size_t *ret_len) {
        /* The held bytes start a partial form; one of another secret may
         * still lie whole inside them. */
        if (f->tail)
                (void)secrets_mask_values(secrets, n, f->tail, f->tail_len);
        *ret = f->tail ? f->tail : "";
        *ret_len = f->tail_len;
        f->tail_len = 0;
}

void secret_filter_done(SecretFilter *f) {
        if (f->buf)
                explicit_bzero(f->buf, f->alloc);
        if (f->tail)
                explicit_bzero(f->tail, PROXY_SECRET_HOLD_MAX);
        free(f->buf);
        free(f->tail);
        free(f->bigrams);
        *f = (SecretFilter){};
}

/* The length of the longest suffix of @buf that is a proper prefix of
 * some secret's placeholder. */
static size_t placeholder_tail(const ProxySecret *secrets, size_t n, const char *buf, size_t len) {
        size_t hold = 0;

        for (size_t i = 0; i < n; i++) {
                const ProxySecret *s = &secrets[i];
                size_t k = MIN(len, s->placeholder_len > 0 ? s->placeholder_len - 1 : 0);

                for (; k > hold; k--)
                        if (memcmp(buf + len - k, s->placeholder, k) == 0) {
                                hold = k;
                                break;
                        }
        }
        return hold;
}

int secret_scan_feed(SecretFilter *f, const ProxySecret *secrets, size_t n, const char *data,
                     size_t len, const char **ret, size_t *ret_len,
                     const ProxySecret **ret_secret) {
        size_t total = f->tail_len + len, hold;
        int r;

        r = filter_join(f, data, len);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++)
                if (contains(f->buf, total, secrets[i].placeholder, secrets[i].placeholder_len)) {
                        *ret_secret = &secrets[i];
                        return -EPERM;
                }
        hold = placeholder_tail(secrets, n, f->buf, total);
        memcpy(f->tail, f->buf + total - hold, hold);
        f->tail_len = hold;
        *ret = f->buf;
        *ret_len = total - hold;
        return 0;
}
