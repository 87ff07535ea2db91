/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "secrets.h"

/* Fuzzes the response masking of hutch-proxy (src/proxy/secrets.c,
 * secret_filter_feed(), docs/secrets.md "Masking"). The input is a small
 * program: the first four bytes seed the split points; after them a byte
 * below FORM_MAX inserts that derived form of the value (raw, base64 and
 * base64url at three alignments, percent-encoded, JSON-escaped), any other
 * byte is itself. The body so made is fed to the filter in pieces of
 * random length (1 to 64 bytes).
 *
 * Invariants checked (abort() on violation):
 *   - the output has the body's length;
 *   - it holds none of the forms of the value, whole;
 *   - it is what masking the whole body at once gives. */

#define VALUE "sk-live-REAL/value+0123456789abcdefXYZ"
#define PLACEHOLDER "sk-live-PLCE/holdr+qqqqqqqqqqqqqqqqqqq"

enum {
        FORM_RAW,
        FORM_B64_0,
        FORM_B64_1,
        FORM_B64_2,
        FORM_B64URL_0,
        FORM_B64URL_1,
        FORM_B64URL_2,
        FORM_PCT_UPPER,
        FORM_PCT_LOWER,
        FORM_PCT_QUOTE,
        FORM_JSON_U,
        FORM_JSON_SLASH,
        FORM_MAX,
};

static ProxySecret secret;
static char *forms[FORM_MAX];
/* What a form must never leave in the output: the whole form, or for
 * base64 its part that depends on the value alone. */
static char *needles[FORM_MAX];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *b64_form(size_t offset, bool url, bool inner) {
        const char *a = url ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
                            : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        size_t vl = strlen(VALUE), n = offset + vl, k = 0;
        unsigned char in[64] = {};
        char *out = calloc(1, 128);

        if (!out)
                abort();
        memcpy(in + offset, VALUE, vl);
        for (size_t i = 0; i < n; i += 3) {
                unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8 | in[i + 2];

                out[k++] = a[v >> 18 & 63];
                out[k++] = a[v >> 12 & 63];
                out[k++] = a[v >> 6 & 63];
                out[k++] = a[v & 63];
        }
        if (inner) {
                size_t first = (8 * offset + 5) / 6, last = 8 * n / 6;

                memmove(out, out + first, last - first);
                out[last - first] = '\0';
        } else {
                /* As an encoder writes it after @offset bytes of its own:
                 * from the first character that has a bit of the value. */
                size_t first = 8 * offset / 6;

                memmove(out, out + first, k - first);
                out[k - first] = '\0';
        }
        return out;
}

typedef enum Escape {
        ESC_NONE,
        ESC_PCT_UPPER,
        ESC_PCT_LOWER,
        ESC_U_UPPER,
        ESC_U_LOWER,
} Escape;

/* VALUE with '/' and '+' written as @special and the rest as @other. */
static char *escaped(Escape special, Escape other) {
        char *out = calloc(1, 512), *p = out;

        if (!out)
                abort();
        for (const char *v = VALUE; *v; v++) {
                unsigned char c = (unsigned char)*v;

                switch (*v == '/' || *v == '+' ? special : other) {
                case ESC_NONE:
                        *p++ = *v;
                        break;
                case ESC_PCT_UPPER:
                        p += sprintf(p, "%%%02X", c);
                        break;
                case ESC_PCT_LOWER:
                        p += sprintf(p, "%%%02x", c);
                        break;
                case ESC_U_UPPER:
                        p += sprintf(p, "\\u%04X", c);
                        break;
                case ESC_U_LOWER:
                        p += sprintf(p, "\\u%04x", c);
                        break;
                }
        }
        return out;
}

static void setup(void) {
        static bool done;
        HutchError e = {};

        if (done)
                return;
        done = true;
        secret = (ProxySecret){.name = (char *)"T",
                               .placeholder = (char *)PLACEHOLDER,
                               .placeholder_len = strlen(PLACEHOLDER),
                               .hosts = allowlist_new()};
        if (!secret.hosts || allowlist_add_allow(secret.hosts, "api.test", &e) < 0 ||
            proxy_secret_set_value(&secret, VALUE, strlen(VALUE)) < 0)
                abort();
        forms[FORM_RAW] = strdup(VALUE);
        for (size_t o = 0; o < 3; o++) {
                forms[FORM_B64_0 + o] = b64_form(o, false, false);
                forms[FORM_B64URL_0 + o] = b64_form(o, true, false);
                needles[FORM_B64_0 + o] = b64_form(o, false, true);
                needles[FORM_B64URL_0 + o] = b64_form(o, true, true);
        }
        forms[FORM_PCT_UPPER] = escaped(ESC_PCT_UPPER, ESC_PCT_UPPER);
        forms[FORM_PCT_LOWER] = escaped(ESC_PCT_LOWER, ESC_PCT_LOWER);
        forms[FORM_PCT_QUOTE] = escaped(ESC_PCT_UPPER, ESC_NONE);
        forms[FORM_JSON_U] = escaped(ESC_U_LOWER, ESC_U_UPPER);
        forms[FORM_JSON_SLASH] = strdup("sk-live-REAL\\/value+0123456789abcdefXYZ");
        for (size_t f = 0; f < FORM_MAX; f++) {
                if (!forms[f])
                        abort();
                if (!needles[f])
                        needles[f] = strdup(forms[f]);
        }
}

static bool holds_a_form(const char *buf, size_t len) {
        for (size_t f = 0; f < FORM_MAX; f++)
                if (memmem(buf, len, needles[f], strlen(needles[f])))
                        return true;
        return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        SecretFilter filter = {};
        char *body, *whole, *got;
        size_t len = 0, off = 0, n_got = 0, n;
        uint32_t seed;
        const char *out;

        setup();
        if (size < 4 || size > 4096)
                return 0;
        seed = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 |
               (uint32_t)data[3] << 24;
        body = malloc((size - 4) * 256 + 1);
        if (!body)
                abort();
        for (size_t i = 4; i < size; i++) {
                if (data[i] < FORM_MAX) {
                        memcpy(body + len, forms[data[i]], strlen(forms[data[i]]));
                        len += strlen(forms[data[i]]);
                } else
                        body[len++] = (char)data[i];
        }
        whole = malloc(len + 1);
        got = malloc(len + 1);
        if (!whole || !got)
                abort();
        memcpy(whole, body, len);
        (void)secrets_mask_values(&secret, 1, whole, len);
        while (off < len) {
                size_t k;

                seed = seed * 1103515245U + 12345U;
                k = MIN((size_t)(seed >> 16) % 64 + 1, len - off);
                if (secret_filter_feed(&filter, &secret, 1, body + off, k, &out, &n) < 0)
                        abort();
                if (n_got + n > len)
                        abort();
                memcpy(got + n_got, out, n);
                n_got += n;
                off += k;
        }
        secret_filter_flush(&filter, &secret, 1, &out, &n);
        if (n_got + n != len)
                abort();
        memcpy(got + n_got, out, n);
        if (holds_a_form(got, len) || holds_a_form(whole, len) || memcmp(got, whole, len) != 0)
                abort();
        secret_filter_done(&filter);
        free(body);
        free(whole);
        free(got);
        return 0;
}
