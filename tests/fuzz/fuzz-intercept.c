/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http-message.h"
#include "secrets.h"

/* Fuzzes what hutch-proxy does with bytes inside an intercepted TLS
 * connection (src/proxy/intercept.c, secrets.c): the request head read with
 * http_message_feed(), the tripwire scan, the head rebuilt with real values
 * for upstream, and the masking of an upstream's response body in pieces.
 * The first input byte picks the chunk size; the rest is the request, and
 * what follows its head is used as a response body.
 *
 * Invariants checked (abort() on violation):
 *   - a rebuilt request head parses again as exactly one complete head with
 *     the same method and target, and at most one field more (Accept-Encoding);
 *   - masked output never contains a real value, and it is the masking of
 *     the whole body however it was split. */

static const HttpLimits request_limits = {
        .line_max = HTTP_REQUEST_LINE_MAX,
        .head_max = HTTP_REQUEST_HEAD_MAX,
        .fields_max = HTTP_REQUEST_FIELDS_MAX,
};

static const HttpLimits reparse_limits = {
        .line_max = 4 * HTTP_REQUEST_HEAD_MAX,
        .head_max = 4 * HTTP_REQUEST_HEAD_MAX,
        .fields_max = 2 * HTTP_REQUEST_FIELDS_MAX,
};

static ProxySecret secrets[2];
static Host host;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void setup(void) {
        static bool done;
        HutchError e = {};

        if (done)
                return;
        done = true;
        secrets[0] = (ProxySecret){.name = (char *)"A",
                                   .placeholder = (char *)"PH-aaaa",
                                   .placeholder_len = 7,
                                   .hosts = allowlist_new()};
        secrets[1] = (ProxySecret){.name = (char *)"B",
                                   .placeholder = (char *)"PH-bbbbbb",
                                   .placeholder_len = 9,
                                   .hosts = allowlist_new(),
                                   .header = (char *)"X-Key"};
        if (!secrets[0].hosts || !secrets[1].hosts ||
            allowlist_add_allow(secrets[0].hosts, "api.test", &e) < 0 ||
            allowlist_add_allow(secrets[1].hosts, "api.test", &e) < 0 ||
            proxy_secret_set_value(&secrets[0], "VV-aaaa", 7) < 0 ||
            proxy_secret_set_value(&secrets[1], "VV-VV-bbb", 9) < 0 ||
            host_parse("api.test", 8, &host) < 0)
                abort();
}

static bool has_value(const char *s, size_t n) {
        for (size_t i = 0; i < ELEMENTSOF(secrets); i++)
                if (memmem(s, n, secrets[i].value, secrets[i].value_len))
                        return true;
        return false;
}

static void check_body(const char *body, size_t len, size_t chunk) {
        SecretFilter f = {};
        char *all = malloc(len + 1), *expect = malloc(len + 1);
        size_t off = 0, got = 0;
        const char *out;
        size_t n;

        if (!all || !expect)
                abort();
        memcpy(expect, body, len);
        (void)secrets_mask_values(secrets, ELEMENTSOF(secrets), expect, len);
        while (off < len) {
                size_t k = MIN(chunk, len - off);

                if (secret_filter_feed(&f, secrets, ELEMENTSOF(secrets), body + off, k, &out, &n) <
                    0)
                        abort();
                if (got + n > len)
                        abort();
                memcpy(all + got, out, n);
                got += n;
                off += k;
        }
        secret_filter_flush(&f, secrets, ELEMENTSOF(secrets), &out, &n);
        if (got + n != len)
                abort();
        memcpy(all + got, out, n);
        /* Masking at once and in pieces agree whenever the whole body has
         * no value left; the output must never hold one. */
        if (has_value(all, len))
                abort();
        if (!has_value(expect, len) && memcmp(all, expect, len) != 0)
                abort();
        secret_filter_done(&f);
        free(all);
        free(expect);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        HttpMessage m, again;
        size_t chunk, off = 0, len = 0;
        char *head = NULL;
        uint64_t used = 0;

        setup();
        if (size < 1)
                return 0;
        chunk = (size_t)(data[0] % 64) + 1;
        data++;
        size--;

        if (http_message_init(&m, HTTP_REQUEST, &request_limits) < 0)
                abort();
        while (off < size && m.state == HTTP_MESSAGE_HEAD) {
                ssize_t k = http_message_feed(&m, (const char *)data + off, MIN(chunk, size - off));

                if (k < 0)
                        break;
                off += (size_t)k;
        }
        if (m.state == HTTP_MESSAGE_BODY || m.state == HTTP_MESSAGE_DONE) {
                (void)secrets_find_tripwire(secrets, ELEMENTSOF(secrets), &host, 443, &m);
                if (secrets_build_request_head(secrets, ELEMENTSOF(secrets), &host, 443, &m, &head,
                                               &len, &used) >= 0) {
                        const char *t1, *t2;
                        size_t l1, l2;
                        ssize_t k;

                        if (http_message_init(&again, HTTP_REQUEST, &reparse_limits) < 0)
                                abort();
                        k = http_message_feed(&again, head, len);
                        if (k != (ssize_t)len || again.state == HTTP_MESSAGE_HEAD ||
                            again.state == HTTP_MESSAGE_FAILED)
                                abort();
                        t1 = http_message_target(&m, &l1);
                        t2 = http_message_target(&again, &l2);
                        if (l1 != l2 || memcmp(t1, t2, l1) != 0 ||
                            http_message_method(&m) != http_message_method(&again) ||
                            again.n_fields > m.n_fields + 1)
                                abort();
                        http_message_done(&again);
                        free(head);
                }
        }
        http_message_done(&m);
        check_body((const char *)data + off, size - off, chunk);
        return 0;
}
