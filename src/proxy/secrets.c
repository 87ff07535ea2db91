/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#include "secrets.h"
#include "strv.h"

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
        return 0;
}

void proxy_secret_done(ProxySecret *s) {
        if (!s)
                return;
        if (s->value) {
                explicit_bzero(s->value, s->value_map_len);
                (void)munmap(s->value, s->value_map_len);
        }
        free(s->name);
        free(s->placeholder);
        allowlist_free(s->hosts);
        free(s->header);
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

size_t secrets_mask_values(const ProxySecret *secrets, size_t n, char *buf, size_t len) {
        size_t count = 0;

        for (size_t i = 0; i < n; i++)
                if (secrets[i].value_len == secrets[i].placeholder_len)
                        count += replace_all(buf, len, secrets[i].value, secrets[i].placeholder,
                                             secrets[i].value_len);
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

static bool is_hop_field(const char *name, size_t len) {
        return http_token_equal(name, len, "Proxy-Connection") ||
               http_token_equal(name, len, "Proxy-Authorization");
}

int secrets_build_request_head(const ProxySecret *secrets, size_t n, const Host *h, uint16_t port,
                               const HttpMessage *m, char **ret, size_t *ret_len,
                               uint64_t *ret_used) {
        const char *method = http_method_str(http_message_method(m)), *target;
        size_t target_len;
        uint64_t covers = 0, used = 0;
        char version[32];
        Out o = {};
        int r;

        target = http_message_target(m, &target_len);
        if (target_len == 0 || target[0] != '/' || http_message_method(m) == HTTP_CONNECT)
                return -EBADMSG;
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

        (void)snprintf(version, sizeof(version), " HTTP/%u.%u\r\n", (unsigned)m->parser.http_major,
                       (unsigned)m->parser.http_minor);
        out_str(&o, method);
        out_add(&o, " ", 1);
        out_add(&o, target, target_len);
        out_str(&o, version);
        for (size_t f = 0; f < m->n_fields; f++) {
                const char *name, *value;
                size_t nl, vl, start;

                http_message_field(m, f, &name, &nl, &value, &vl);
                if (is_hop_field(name, nl))
                        continue;
                out_add(&o, name, nl);
                out_add(&o, ": ", 2);
                start = o.len;
                out_add(&o, value, vl);
                if (o.oom)
                        break;
                for (size_t i = 0; i < n && i < PROXY_SECRETS_MAX; i++) {
                        const ProxySecret *s = &secrets[i];

                        if (!(covers & (UINT64_C(1) << i)))
                                continue;
                        if (s->header && !http_token_equal(name, nl, s->header))
                                continue;
                        if (replace_all(o.buf + start, vl, s->placeholder, s->value, s->value_len) >
                            0)
                                used |= UINT64_C(1) << i;
                }
                out_add(&o, "\r\n", 2);
        }
        out_add(&o, "\r\n", 2);
        r = out_finish(&o, ret, ret_len);
        if (r < 0)
                return r;
        *ret_used = used;
        return 0;
}

int secrets_build_response_head(const ProxySecret *secrets, size_t n, const HttpMessage *m,
                                char **ret, size_t *ret_len) {
        const char *reason;
        size_t reason_len;
        char line[48];
        Out o = {};

        reason = http_message_target(m, &reason_len);
        (void)snprintf(line, sizeof(line), "HTTP/%u.%u %u ", (unsigned)m->parser.http_major,
                       (unsigned)m->parser.http_minor, http_message_status_code(m));
        out_str(&o, line);
        out_add(&o, reason, reason_len);
        out_add(&o, "\r\n", 2);
        for (size_t f = 0; f < m->n_fields; f++) {
                const char *name, *value;
                size_t nl, vl;

                http_message_field(m, f, &name, &nl, &value, &vl);
                out_add(&o, name, nl);
                out_add(&o, ": ", 2);
                out_add(&o, value, vl);
                out_add(&o, "\r\n", 2);
        }
        out_add(&o, "\r\n", 2);
        /* Field names are tokens and cannot hold a value; masking the whole
         * head covers the reason phrase and every value at once. */
        if (!o.oom)
                (void)secrets_mask_values(secrets, n, o.buf, o.len);
        return out_finish(&o, ret, ret_len);
}

/* The length of the longest suffix of @buf that is a proper prefix of
 * some secret's value. */
static size_t tail_to_hold(const ProxySecret *secrets, size_t n, const char *buf, size_t len) {
        size_t hold = 0;

        for (size_t i = 0; i < n; i++) {
                const ProxySecret *s = &secrets[i];
                size_t k = MIN(len, s->value_len > 0 ? s->value_len - 1 : 0);

                for (; k > hold; k--)
                        if (memcmp(buf + len - k, s->value, k) == 0) {
                                hold = k;
                                break;
                        }
        }
        return hold;
}

int secret_filter_feed(SecretFilter *f, const ProxySecret *secrets, size_t n, const char *data,
                       size_t len, const char **ret, size_t *ret_len) {
        size_t total = f->tail_len + len, hold;

        if (f->alloc < total) {
                size_t want = MAX(f->alloc * 2, total);
                char *grown = realloc(f->buf, want);

                if (!grown)
                        return -ENOMEM;
                f->buf = grown;
                f->alloc = want;
        }
        if (!f->tail) {
                f->tail = malloc(PROXY_SECRET_VALUE_MAX);
                if (!f->tail)
                        return -ENOMEM;
        }
        memcpy(f->buf, f->tail, f->tail_len);
        if (len > 0)
                memcpy(f->buf + f->tail_len, data, len);
        (void)secrets_mask_values(secrets, n, f->buf, total);
        hold = tail_to_hold(secrets, n, f->buf, total);
        memcpy(f->tail, f->buf + total - hold, hold);
        f->tail_len = hold;
        *ret = f->buf;
        *ret_len = total - hold;
        return 0;
}

void secret_filter_flush(SecretFilter *f, const char **ret, size_t *ret_len) {
        *ret = f->tail ? f->tail : "";
        *ret_len = f->tail_len;
        f->tail_len = 0;
}

void secret_filter_done(SecretFilter *f) {
        if (f->buf)
                explicit_bzero(f->buf, f->alloc);
        if (f->tail)
                explicit_bzero(f->tail, PROXY_SECRET_VALUE_MAX);
        free(f->buf);
        free(f->tail);
        *f = (SecretFilter){};
}
