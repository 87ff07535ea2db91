/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The dashboard's login gate (serve-ui.h, docs/ui.md): session cookies,
 * CSRF tokens, and which request heads pass without the bearer token. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "macro.h"
#include "serve-ui.h"

int serve_ui_init(ServeUi *ui) {
        size_t got = 0;

        *ui = (ServeUi){.session_s = SERVE_UI_SESSION_S};

        while (got < sizeof(ui->key)) {
                ssize_t n = getrandom(ui->key + got, sizeof(ui->key) - got, 0);

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                got += (size_t)n;
        }
        return 0;
}

static void hex(const uint8_t *b, size_t n, char *out) {
        static const char digits[] = "0123456789abcdef";

        for (size_t i = 0; i < n; i++) {
                out[2 * i] = digits[b[i] >> 4];
                out[2 * i + 1] = digits[b[i] & 15];
        }
        out[2 * n] = '\0';
}

/* HMAC-SHA256 under @ui's key of @label, then @len bytes of @data. */
static int mac(const ServeUi *ui, const char *label, const char *data, size_t len,
               uint8_t out[32]) {
        _cleanup_free_ char *msg = NULL;
        size_t llen = strlen(label);
        unsigned n = 0;

        msg = malloc(llen + len + 1);
        if (!msg)
                return -ENOMEM;
        memcpy(msg, label, llen);
        memcpy(msg + llen, data, len);
        if (!HMAC(EVP_sha256(), ui->key, sizeof(ui->key), (const unsigned char *)msg, llen + len,
                  out, &n) ||
            n != 32)
                return -EIO;
        return 0;
}

/* Parses @n lowercase hex digits of @s into *@ret; false on another char. */
static bool parse_hex(const char *s, size_t n, uint64_t *ret) {
        uint64_t v = 0;

        for (size_t i = 0; i < n; i++) {
                char c = s[i];

                if (c >= '0' && c <= '9')
                        v = v << 4 | (uint64_t)(c - '0');
                else if (c >= 'a' && c <= 'f')
                        v = v << 4 | (uint64_t)(c - 'a' + 10);
                else
                        return false;
        }
        *ret = v;
        return true;
}

/* The live session slot that @value (@len bytes) names, when its MAC is
 * @ui's and it has not expired at @now_s; else NULL. */
static ServeUiSession *session_find(const ServeUi *ui, const char *value, size_t len,
                                    uint64_t now_s) {
        char want[65];
        uint8_t m[32];
        uint64_t exp = 0, id = 0;

        if (!value || len != SERVE_UI_COOKIE_LEN || value[16] != '.' || value[33] != '.')
                return NULL;
        if (!parse_hex(value, 16, &exp) || !parse_hex(value + 17, 16, &id))
                return NULL;
        if (mac(ui, "session:", value, 33, m) < 0)
                return NULL;
        hex(m, sizeof(m), want);
        /* SECURITY: constant time in where the MACs differ. */
        if (CRYPTO_memcmp(want, value + 34, 64) != 0 || exp <= now_s || id == 0)
                return NULL;
        /* SECURITY: a signed cookie is a session only while the server
         * keeps it: sign-out (serve_ui_session_revoke()) ends a stolen
         * copy too. */
        for (size_t i = 0; i < SERVE_UI_SESSIONS_MAX; i++)
                if (ui->sessions[i].id == id && ui->sessions[i].expiry_s == exp)
                        return (ServeUiSession *)&ui->sessions[i];
        return NULL;
}

int serve_ui_session_mint(ServeUi *ui, uint64_t now_s, char buf[SERVE_UI_COOKIE_MAX]) {
        ServeUiSession *slot = NULL;
        uint64_t id = 0;
        uint8_t m[32];
        int r;

        while (id == 0) {
                ssize_t n = getrandom(&id, sizeof(id), 0);

                if (n < 0 && errno != EINTR)
                        return -errno;
                if (n >= 0 && n != (ssize_t)sizeof(id))
                        id = 0;
        }
        /* A free or expired slot; at the cap, the session that ends first
         * ends now (only a holder of the token signs in). */
        for (size_t i = 0; i < SERVE_UI_SESSIONS_MAX; i++) {
                ServeUiSession *c = &ui->sessions[i];

                if (c->id == 0 || c->expiry_s <= now_s) {
                        slot = c;
                        break;
                }
                if (!slot || c->expiry_s < slot->expiry_s)
                        slot = c;
        }
        *slot = (ServeUiSession){.id = id, .expiry_s = now_s + ui->session_s};
        (void)snprintf(buf, SERVE_UI_COOKIE_MAX, "%016llx.%016llx",
                       (unsigned long long)slot->expiry_s, (unsigned long long)id);
        r = mac(ui, "session:", buf, 33, m);
        if (r < 0) {
                *slot = (ServeUiSession){};
                return r;
        }
        buf[33] = '.';
        hex(m, sizeof(m), buf + 34);
        return 0;
}

bool serve_ui_session_check(const ServeUi *ui, const char *value, size_t len, uint64_t now_s) {
        return session_find(ui, value, len, now_s) != NULL;
}

bool serve_ui_session_revoke(ServeUi *ui, const char *value, size_t len, uint64_t now_s) {
        ServeUiSession *slot = session_find(ui, value, len, now_s);

        if (!slot)
                return false;
        *slot = (ServeUiSession){};
        return true;
}

int serve_ui_csrf(const ServeUi *ui, const char *value, size_t len,
                  char buf[SERVE_UI_CSRF_LEN + 1]) {
        uint8_t m[32];
        int r;

        r = mac(ui, "csrf:", value, len, m);
        if (r < 0)
                return r;
        hex(m, sizeof(m), buf);
        return 0;
}

/* One header line: the value without surrounding spaces and tabs. */
typedef struct HeaderLine {
        const char *name, *value;
        size_t name_len, value_len;
} HeaderLine;

/* The next header line from *@p (up to @end) into @h; false at the end
 * of the head or on a line without a colon. */
static bool next_header(const char **p, const char *end, HeaderLine *h) {
        const char *eol, *colon;
        size_t n;

        eol = *p < end ? memchr(*p, '\n', (size_t)(end - *p)) : NULL;
        if (!eol)
                return false;
        n = (size_t)(eol - *p);
        if (n > 0 && (*p)[n - 1] == '\r')
                n--;
        if (n == 0)
                return false;
        colon = memchr(*p, ':', n);
        if (!colon)
                return false;
        h->name = *p;
        h->name_len = (size_t)(colon - *p);
        h->value = colon + 1;
        h->value_len = n - h->name_len - 1;
        while (h->value_len > 0 && (*h->value == ' ' || *h->value == '\t')) {
                h->value++;
                h->value_len--;
        }
        while (h->value_len > 0 &&
               (h->value[h->value_len - 1] == ' ' || h->value[h->value_len - 1] == '\t'))
                h->value_len--;
        *p = eol + 1;
        return true;
}

static bool name_is(const HeaderLine *h, const char *want) {
        return strlen(want) == h->name_len && strncasecmp(h->name, want, h->name_len) == 0;
}

/* Past the request line of @head, or NULL. */
static const char *headers_start(const char *head, size_t len) {
        const char *eol = memchr(head, '\n', len);

        return eol ? eol + 1 : NULL;
}

const char *serve_ui_cookie_in_value(const char *value, size_t len, const char *name,
                                     size_t *ret_len) {
        const char *v = value, *vend = value + len;
        size_t nlen = strlen(name);

        /* "a=1; b=2": pairs separated by ";" and spaces. */
        while (v < vend) {
                const char *semi = memchr(v, ';', (size_t)(vend - v));
                const char *pend = semi ? semi : vend;

                while (v < pend && (*v == ' ' || *v == '\t'))
                        v++;
                if ((size_t)(pend - v) > nlen && memcmp(v, name, nlen) == 0 && v[nlen] == '=') {
                        *ret_len = (size_t)(pend - v) - nlen - 1;
                        return v + nlen + 1;
                }
                v = semi ? semi + 1 : vend;
        }
        return NULL;
}

const char *serve_ui_cookie_find(const char *head, size_t head_len, const char *name,
                                 size_t *ret_len) {
        const char *p = headers_start(head, head_len), *end = head + head_len, *found;
        HeaderLine h;

        if (!p)
                return NULL;
        while (next_header(&p, end, &h)) {
                if (!name_is(&h, "Cookie"))
                        continue;
                found = serve_ui_cookie_in_value(h.value, h.value_len, name, ret_len);
                if (found)
                        return found;
        }
        return NULL;
}

static const char *const gate_verdicts[_SERVE_UI_GATE_VERDICT_MAX] = {
        [SERVE_UI_GATE_TOKEN] = "token",     [SERVE_UI_GATE_PUBLIC] = "public",
        [SERVE_UI_GATE_SESSION] = "session", [SERVE_UI_GATE_LOGIN] = "login",
        [SERVE_UI_GATE_NO_CSRF] = "no-csrf",
};

const char *serve_ui_gate_verdict_to_string(ServeUiGateVerdict v) {
        return v >= 0 && v < _SERVE_UI_GATE_VERDICT_MAX ? gate_verdicts[v] : NULL;
}

ServeUiGateVerdict serve_ui_gate_verdict_from_string(const char *s) {
        for (int i = 0; s && i < _SERVE_UI_GATE_VERDICT_MAX; i++)
                if (strcmp(gate_verdicts[i], s) == 0)
                        return (ServeUiGateVerdict)i;
        return _SERVE_UI_GATE_VERDICT_INVALID;
}

static bool is(const char *s, size_t n, const char *want) {
        return strlen(want) == n && memcmp(s, want, n) == 0;
}

/* Whether the one Origin header is "http://" and the one Host header. */
static bool origin_is_host(const char *origin, size_t origin_len, unsigned n_origin,
                           const char *host, size_t host_len, unsigned n_host) {
        if (n_origin != 1 || n_host != 1 || host_len == 0)
                return false;
        return origin_len == strlen("http://") + host_len &&
               strncasecmp(origin, "http://", 7) == 0 &&
               strncasecmp(origin + 7, host, host_len) == 0;
}

ServeUiGateVerdict serve_ui_gate(const ServeUi *ui, const char *head, size_t len, uint64_t now_s) {
        static const char *const public_gets[] = {"/ui/login", "/ui/login.js", "/ui/style.css",
                                                  "/ui/icon.svg"};
        const char *line_end = memchr(head, '\n', len), *sp1, *sp2, *p, *end = head + len;
        const char *cookie, *csrf = NULL, *host = NULL, *origin = NULL;
        size_t mlen, tlen, clen = 0, csrf_len = 0, host_len = 0, origin_len = 0;
        unsigned n_csrf = 0, n_host = 0, n_origin = 0;
        bool auth = false, upgrade = false, get, ui_path;
        HeaderLine h;

        if (!line_end)
                return SERVE_UI_GATE_TOKEN;
        sp1 = memchr(head, ' ', (size_t)(line_end - head));
        if (!sp1)
                return SERVE_UI_GATE_TOKEN;
        sp2 = memchr(sp1 + 1, ' ', (size_t)(line_end - sp1 - 1));
        if (!sp2)
                return SERVE_UI_GATE_TOKEN;
        mlen = (size_t)(sp1 - head);
        tlen = (size_t)(sp2 - sp1 - 1);
        get = is(head, mlen, "GET") || is(head, mlen, "HEAD");
        if (get)
                for (size_t i = 0; i < ELEMENTSOF(public_gets); i++)
                        if (is(sp1 + 1, tlen, public_gets[i]))
                                return SERVE_UI_GATE_PUBLIC;
        if (is(head, mlen, "POST") && is(sp1 + 1, tlen, "/ui/login"))
                return SERVE_UI_GATE_PUBLIC;

        p = headers_start(head, len);
        while (p && next_header(&p, end, &h)) {
                if (name_is(&h, "Authorization"))
                        auth = true;
                else if (name_is(&h, SERVE_UI_CSRF_HEADER)) {
                        csrf = h.value;
                        csrf_len = h.value_len;
                        n_csrf++;
                } else if (name_is(&h, "Host")) {
                        host = h.value;
                        host_len = h.value_len;
                        n_host++;
                } else if (name_is(&h, "Origin")) {
                        origin = h.value;
                        origin_len = h.value_len;
                        n_origin++;
                } else if (name_is(&h, "Upgrade"))
                        upgrade = true;
        }
        cookie = serve_ui_cookie_find(head, len, SERVE_UI_COOKIE, &clen);
        if (cookie && serve_ui_session_check(ui, cookie, clen, now_s)) {
                char want[SERVE_UI_CSRF_LEN + 1];

                /* SECURITY: cookies are not isolated by port, and a page on
                 * another port of the same host is the same site, so
                 * SameSite=Strict lets its requests carry the cookie. What a
                 * browser sends with an Origin (fetch, forms, WebSocket
                 * handshakes, which are GETs that no CSRF header can
                 * protect) must come from this very origin; an upgrade
                 * must say where it comes from. */
                if ((n_origin > 0 || upgrade) &&
                    !origin_is_host(origin, origin_len, n_origin, host, host_len, n_host))
                        return SERVE_UI_GATE_NO_CSRF;
                if (get)
                        return SERVE_UI_GATE_SESSION;
                if (n_csrf != 1 || csrf_len != SERVE_UI_CSRF_LEN ||
                    serve_ui_csrf(ui, cookie, clen, want) < 0 ||
                    CRYPTO_memcmp(want, csrf, SERVE_UI_CSRF_LEN) != 0)
                        return SERVE_UI_GATE_NO_CSRF;
                return SERVE_UI_GATE_SESSION;
        }
        ui_path = is(sp1 + 1, tlen, "/ui") || (tlen >= 4 && memcmp(sp1 + 1, "/ui/", 4) == 0);
        if (get && ui_path && !auth)
                return SERVE_UI_GATE_LOGIN;
        return SERVE_UI_GATE_TOKEN;
}
