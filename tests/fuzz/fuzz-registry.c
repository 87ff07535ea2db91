/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image/registries-conf.h"
#include "registry/registry-internal.h"
#include "registry/registry.h"

/* Fuzzes what `hutch image pull` parses from the user and from a registry
 * (src/lib/registry) with the same bytes, and checks:
 *   - an image reference prints (image_ref_to_string) to text that parses
 *     back to the same domain, repository, tag and digest;
 *   - a WWW-Authenticate challenge has a non-empty scheme, and its values
 *     carry no control byte (they go into the next request);
 *   - a URL (a redirect's Location, a token realm) has a host, a path
 *     starting with '/' and nothing that could split a request line;
 *   - a registries.conf that parses has search registries without a '/'
 *     and a prefix in every [[registry]].
 * Short names resolve under a fixed default registry, and the machine's
 * registries.conf is not read (the same result on every machine). */

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

static void check_conf(const char *text) {
        RegistriesConf *c = calloc(1, sizeof(*c));

        if (!c)
                return;
        if (registries_conf_parse(c, text, "fuzz.conf", NULL) >= 0) {
                for (char **s = c->search; s && *s; s++)
                        if (strchr(*s, '/') || !**s)
                                abort();
                for (size_t i = 0; i < c->n_entries; i++)
                        if (!c->entries[i].prefix || !c->entries[i].where)
                                abort();
        }
        registries_conf_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *text;

        (void)setenv("CONTAINERS_REGISTRIES_CONF", "/dev/null", 1);
        (void)setenv("HUTCH_REGISTRY_DEFAULT", "registry.example.test", 1);

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
        check_conf(text);

        free(text);
        return 0;
}
