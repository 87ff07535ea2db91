/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"
#include "serve-preview.h"
#include "serve-util.h"

/* Fuzzes the published ports' parsers and checks their invariants:
 *   - a port spec that parses has a sandbox port in 1-65535, and its
 *     canonical text parses back to the same spec (and text);
 *   - a request head that the front accepts and whose target is a preview
 *     one gets a rewritten head that starts with the same method, holds no
 *     Authorization header, and is never longer than the head plus the
 *     "/" it may add. */

#define FUZZ_INPUT_MAX (64U << 10)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_spec(const char *text) {
        char canon[PORT_SPEC_STRING_MAX], again[PORT_SPEC_STRING_MAX];
        PortSpec a, b;

        if (port_spec_parse(text, &a, NULL) < 0)
                return;
        if (a.port == 0)
                abort();
        port_spec_to_string(&a, canon, sizeof(canon));
        if (port_spec_parse(canon, &b, NULL) < 0 || memcmp(&a, &b, sizeof(a)) != 0)
                abort();
        port_spec_to_string(&b, again, sizeof(again));
        if (strcmp(canon, again) != 0)
                abort();
}

static void check_preview(const char *head, size_t len) {
        char name[SERVE_PREVIEW_NAME_MAX];
        unsigned port;
        size_t rest, out_len;
        char *out = NULL;
        ServeHead h;

        serve_head_check(head, len, NULL, 1U << 20, &h);
        if (h.verdict != SERVE_HEAD_OK ||
            !serve_preview_target(head + h.target, h.target_len, name, &port, &rest))
                return;
        if (port < 1 || port > 65535 || strlen(name) == 0)
                abort();
        if (serve_preview_head(head, len, h.target, h.target_len, rest, &out, &out_len) < 0)
                return;
        if (out_len > len + 20 || strlen(out) != out_len || memcmp(out, head, h.target) != 0)
                abort();
        for (const char *l = strstr(out, "\r\n"); l; l = strstr(l + 2, "\r\n"))
                if (strncasecmp(l + 2, "authorization:", 14) == 0)
                        abort();
        free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *text;

        if (size > FUZZ_INPUT_MAX)
                return 0;
        text = malloc(size + 1);
        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = '\0';
        if (strlen(text) == size) {
                check_spec(text);
                check_preview(text, size);
        }
        free(text);
        return 0;
}
