/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "e2b-connect.h"
#include "e2b-envd-form.h"

/* Fuzzes the Connect envelope reader of hutch serve's E2B envd
 * (src/cli/e2b-connect.c): the input is a client's request body.
 *
 * Invariants checked (abort() on violation):
 *   - the reader never takes more bytes than it was given, and a message
 *     it hands out lies inside them and is at most the maximum;
 *   - it refuses only with -EBADMSG or -EMSGSIZE, and waits (0) only when
 *     fewer bytes than the envelope's head says are there;
 *   - a server-stream request accepted is one envelope of flags 0 that
 *     spans the whole body;
 *   - proto3 bytes that decode are no longer than 3/4 of the text;
 *   - a Content-Type or timeout value never crashes the checks;
 *   - a query parameter decoded is no longer than its text and holds no
 *     NUL; a multipart body split has its parts inside it, in order, each
 *     with a filename (envd's POST /files, e2b-envd-form.c). */

#define MAX_MSG 4096U

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_envelopes(const uint8_t *data, size_t size) {
        size_t pos = 0;

        while (pos < size) {
                ConnectEnvelope e = {};
                int r = connect_envelope_parse(data + pos, size - pos, MAX_MSG, &e);

                if (r < 0) {
                        if (r != -EBADMSG && r != -EMSGSIZE)
                                abort();
                        return;
                }
                if (r == 0) {
                        if (size - pos >= CONNECT_ENVELOPE_HEAD) {
                                uint32_t n = (uint32_t)data[pos + 1] << 24 |
                                             (uint32_t)data[pos + 2] << 16 |
                                             (uint32_t)data[pos + 3] << 8 | data[pos + 4];
                                if (size - pos - CONNECT_ENVELOPE_HEAD >= n)
                                        abort();
                        }
                        return;
                }
                if ((size_t)r > size - pos || e.len > MAX_MSG ||
                    (size_t)r != CONNECT_ENVELOPE_HEAD + e.len ||
                    e.data != data + pos + CONNECT_ENVELOPE_HEAD ||
                    (e.flags & ~CONNECT_FLAG_END_STREAM))
                        abort();
                pos += (size_t)r;
        }
}

static void check_stream_request(const uint8_t *data, size_t size) {
        const uint8_t *d = NULL;
        size_t n = 0;
        int r = connect_stream_request(data, size, MAX_MSG, &d, &n);

        if (r < 0) {
                if (r != -EBADMSG && r != -EMSGSIZE)
                        abort();
                return;
        }
        if (size < CONNECT_ENVELOPE_HEAD || data[0] != 0 || n + CONNECT_ENVELOPE_HEAD != size ||
            d != data + CONNECT_ENVELOPE_HEAD)
                abort();
}

static void check_text(const uint8_t *data, size_t size) {
        char *s = malloc(size + 1);
        uint8_t *out = NULL;
        uint64_t t = 0;
        size_t n = 0;

        if (!s)
                return;
        memcpy(s, data, size);
        s[size] = 0;
        if (base64_decode(s, size, BASE64_URL_TOO | BASE64_PAD_OPTIONAL, &out, &n) == 0) {
                if (n > size / 4 * 3 + 2)
                        abort();
                free(out);
        }
        {
                char *v = NULL;

                if (envd_query_get(s, "path", &v) == 0 && v && strlen(v) > size)
                        abort();
                free(v);
        }
        {
                EnvdFormPart *parts = calloc(ENVD_FORM_PARTS_MAX, sizeof(*parts));
                const char *end = s + size;
                size_t np = 0;

                if (parts && envd_form_parse(s, size, "XB", parts, &np) == 0) {
                        const char *prev = s;

                        for (size_t i = 0; i < np; i++) {
                                if (!parts[i].filename || parts[i].data < prev ||
                                    parts[i].data + parts[i].len > end)
                                        abort();
                                prev = parts[i].data + parts[i].len;
                        }
                }
                for (size_t i = 0; parts && i < ENVD_FORM_PARTS_MAX; i++)
                        free(parts[i].filename);
                free(parts);
        }
        (void)connect_content_type_ok(s, CONNECT_SHAPE_UNARY);
        (void)connect_content_type_ok(s, CONNECT_SHAPE_STREAM);
        if (connect_timeout_parse(s, &t) == 0 && t > 9999999999ULL)
                abort();
        free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size > (64U << 10))
                return 0;
        check_envelopes(data, size);
        check_stream_request(data, size);
        check_text(data, size);
        return 0;
}
