/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "registry/registry-internal.h"
#include "registry/registry.h"

/* Fuzzes what `hutch image pull` parses from the user and from a registry
 * (src/lib/registry) with the same bytes, and checks:
 *   - an image reference prints (image_ref_to_string) to text that parses
 *     back to the same domain, repository, tag and digest;
 *   - a WWW-Authenticate challenge has a non-empty scheme, and its values
 *     carry no control byte (they go into the next request);
 *   - a URL (a redirect's Location, a token realm) has a host, a path
 *     starting with '/' and nothing that could split a request line. */

#define FUZZ_INPUT_MAX 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool same(const char *a, const char *b) {
        return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static void check_ref(const char *text) {
        _cleanup_(image_ref_freep) ImageRef *a = NULL, *b = NULL;
        _cleanup_free_ char *s = NULL;

        if (image_ref_parse(text, &a, NULL) < 0)
                return;
        s = image_ref_to_string(a);
        if (!s)
                return;
        if (image_ref_parse(s, &b, NULL) < 0 || !same(a->domain, b->domain) ||
            !same(a->repository, b->repository) || !same(a->tag, b->tag) ||
            !same(a->digest, b->digest) || !image_ref_endpoint(a))
                abort();
}

static void check_value(const char *v) {
        if (v && !http_value_is_safe(v))
                abort();
}

static void check_challenge(const char *text) {
        AuthChallenge c = {};

        if (auth_challenge_parse(text, &c) < 0)
                return;
        if (!c.scheme || !*c.scheme)
                abort();
        check_value(c.realm);
        check_value(c.service);
        check_value(c.scope);
        auth_challenge_done(&c);
}

static void check_url(const char *text) {
        Url base = {.https = true,
                    .host = (char *)"reg.example.test",
                    .port = 443,
                    .path = (char *)"/"};
        Url u = {};

        if (url_resolve(&base, text, &u) < 0)
                return;
        if (!u.host || !*u.host || !u.path || u.path[0] != '/' || !http_value_is_safe(u.path) ||
            strchr(u.path, ' ') || !http_value_is_safe(u.host) || u.port == 0)
                abort();
        url_done(&u);
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

        check_ref(text);
        check_challenge(text);
        check_url(text);

        free(text);
        return 0;
}
