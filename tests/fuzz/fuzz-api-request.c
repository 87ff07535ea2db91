/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "macro.h"
#include "serve-exec-args.h"
#include "serve-util.h"
#include "strv.h"

/* Fuzzes what `hutch serve` does with a client's bytes before any C API
 * call (src/cli/serve-util.c), and checks its invariants:
 *   - a body decodes by the exec route's own table (serve-exec-args.c) or fails with EINVAL and a
 *     JSON pointer ("" or "/..."), leaving no array behind;
 *   - base64 that decodes re-encodes to something that decodes the same;
 *   - the UTF-8 tail held back is at most 3 bytes, none for valid UTF-8,
 *     and text output keeps every byte;
 *   - a path that matches a route has a non-empty parameter inside it,
 *     without '/';
 *   - a request head (the front, serve-front.c) gets a verdict in range,
 *     and an accepted one a target inside it starting with '/' and a body
 *     within the limit. */

#define FUZZ_INPUT_MAX (64U << 10)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_body(const char *text, size_t len) {
        json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
        HutchError err = {};
        ExecArgs a = {};
        int r;

        if (!root)
                return;
        r = serve_decode_object(root, serve_exec_fields, serve_exec_n_fields, &a, &err);
        if (r < 0) {
                if (r != -EINVAL || err.errnum != EINVAL || a.argv || a.env ||
                    (err.pointer[0] && err.pointer[0] != '/'))
                        abort();
        } else {
                if (!a.argv)
                        abort();
                STRV_FOREACH(s, a.argv)
                        if (strlen(*s) > len)
                                abort();
                strv_free(a.argv);
                strv_free(a.env);
        }
        json_decref(root);
}

static void check_base64(const char *text, size_t len) {
        _cleanup_free_ uint8_t *dec = NULL;
        _cleanup_free_ char *enc = NULL;
        size_t n = 0;

        if (base64_decode(text, len, 0, &dec, &n) < 0)
                return;
        /* Strict decoding: what decodes is the one encoding of its bytes. */
        if (n > len || base64_encode(dec, n, &enc) < 0)
                abort();
        if (strlen(enc) != len || memcmp(enc, text, len) != 0)
                abort();
}

static void check_output(const char *text, size_t len) {
        size_t tail = serve_utf8_incomplete_tail(text, len);
        const char *enc = NULL;
        json_t *s;

        if (tail > 3 || tail > len)
                abort();
        s = serve_output_string(text, len, &enc);
        if (!s)
                return;
        if (strcmp(enc, "utf-8") == 0) {
                if (tail != 0 || json_string_length(s) != len ||
                    memcmp(json_string_value(s), text, len) != 0)
                        abort();
        } else if (strcmp(enc, "base64") != 0)
                abort();
        json_decref(s);
}

static void check_path(const char *path) {
        static const char *const patterns[] = {"/v1/sandboxes", "/v1/sandboxes/{name}",
                                               "/v1/sandboxes/{name}/exec/stream",
                                               "/v1/snapshots/{snapshot}"};

        for (size_t i = 0; i < ELEMENTSOF(patterns); i++) {
                const char *p = NULL;
                size_t n = 0;

                if (!serve_path_match(patterns[i], path, &p, &n))
                        continue;
                if (strchr(patterns[i], '{') &&
                    (!p || n == 0 || p < path || p + n > path + strlen(path) || memchr(p, '/', n)))
                        abort();
        }
}

static void check_head(const char *text, size_t len) {
        size_t end = serve_head_end(text, len);
        ServeHead h;

        if (end > len)
                abort();
        if (end == 0)
                return;
        serve_head_check(text, end, NULL, 1U << 20, &h);
        if (h.verdict < 0 || h.verdict >= _SERVE_HEAD_VERDICT_MAX)
                abort();
        if (h.verdict == SERVE_HEAD_OK && (h.body_len > (1U << 20) || h.target_len == 0 ||
                                           h.target + h.target_len > end || text[h.target] != '/'))
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *text = NULL;

        if (size > FUZZ_INPUT_MAX)
                return 0;
        text = malloc(size + 1);
        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = '\0';
        check_body(text, size);
        check_base64(text, size);
        check_output(text, size);
        check_path(text);
        check_head(text, size);
        return 0;
}
