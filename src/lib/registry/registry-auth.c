/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The registry's WWW-Authenticate challenge and the docker-style auth file
 * (registry.h). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base64.h"
#include "fd-util.h"
#include "registry.h"

#define CHALLENGE_MAX 8192
#define AUTH_FILE_MAX (1u << 20)

void auth_challenge_done(AuthChallenge *c) {
        c->scheme = mfree(c->scheme);
        c->realm = mfree(c->realm);
        c->service = mfree(c->service);
        c->scope = mfree(c->scope);
}

/* RFC 9110 tchar */
static bool is_tchar(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               (c && strchr("!#$%&'*+-.^_`|~", c));
}

static void skip_ows(const char **p) {
        while (**p == ' ' || **p == '\t')
                (*p)++;
}

/* A token or a quoted-string at *@p, into a new string. */
static int parse_value(const char **p, char **ret) {
        const char *s = *p;
        char *out, *o;

        if (*s != '"') {
                const char *start = s;
                while (is_tchar(*s) || *s == '/' || *s == ':' || *s == '=')
                        s++;
                if (s == start)
                        return -EINVAL;
                out = strndup(start, (size_t)(s - start));
                if (!out)
                        return -ENOMEM;
                *p = s;
                *ret = out;
                return 0;
        }
        s++;
        out = o = malloc(strlen(s) + 1);
        if (!out)
                return -ENOMEM;
        for (;;) {
                char c = *s++;
                if (c == '"')
                        break;
                if (c == '\\') {
                        c = *s++;
                        if (c == '\0')
                                break;
                }
                /* SECURITY: the values go into a URL we request; no control
                 * byte (nor anything but ASCII) gets that far. */
                if (c == '\0' || (unsigned char)c < 0x20 || (unsigned char)c >= 0x7f) {
                        free(out);
                        return -EINVAL;
                }
                *o++ = c;
        }
        if (s[-1] != '"') {
                free(out);
                return -EINVAL;
        }
        *o = '\0';
        *p = s;
        *ret = out;
        return 0;
}

int auth_challenge_parse(const char *header, AuthChallenge *ret) {
        AuthChallenge c = {};
        const char *p = header, *start;
        int r = 0;

        if (strlen(header) > CHALLENGE_MAX)
                return -E2BIG;
        skip_ows(&p);
        start = p;
        while (is_tchar(*p))
                p++;
        if (p == start)
                return -EINVAL;
        c.scheme = strndup(start, (size_t)(p - start));
        if (!c.scheme)
                return -ENOMEM;
        if (*p != '\0' && *p != ' ' && *p != '\t') {
                r = -EINVAL;
                goto fail;
        }
        skip_ows(&p);
        while (*p) {
                _cleanup_free_ char *name = NULL, *value = NULL;
                char **slot = NULL;

                start = p;
                while (is_tchar(*p))
                        p++;
                if (p == start) {
                        r = -EINVAL;
                        goto fail;
                }
                name = strndup(start, (size_t)(p - start));
                if (!name) {
                        r = -ENOMEM;
                        goto fail;
                }
                skip_ows(&p);
                if (*p != '=') {
                        /* "Bearer realm=..., Basic realm=...": a second
                         * challenge starts; only the first is ours. */
                        if (c.realm || c.service || c.scope)
                                break;
                        r = -EINVAL;
                        goto fail;
                }
                p++;
                skip_ows(&p);
                r = parse_value(&p, &value);
                if (r < 0)
                        goto fail;
                if (strcasecmp(name, "realm") == 0)
                        slot = &c.realm;
                else if (strcasecmp(name, "service") == 0)
                        slot = &c.service;
                else if (strcasecmp(name, "scope") == 0)
                        slot = &c.scope;
                if (slot) {
                        if (*slot) {
                                r = -EINVAL;
                                goto fail;
                        }
                        *slot = TAKE_PTR(value);
                }
                skip_ows(&p);
                if (*p == '\0')
                        break;
                if (*p != ',') {
                        r = -EINVAL;
                        goto fail;
                }
                p++;
                skip_ows(&p);
        }
        *ret = c;
        return 0;
fail:
        auth_challenge_done(&c);
        return r;
}

/* Whether the auth file's @key names @host: "https://HOST/v1/" and
 * "HOST/path" are HOST's. */
static bool auth_key_matches(const char *key, const char *host) {
        const char *k = key;
        size_t n;

        if (!host)
                return false;
        if (strncmp(k, "https://", 8) == 0)
                k += 8;
        else if (strncmp(k, "http://", 7) == 0)
                k += 7;
        n = strcspn(k, "/");
        return strlen(host) == n && strncmp(k, host, n) == 0;
}

static int base64_userpass(const char *b64, char **ret) {
        _cleanup_free_ uint8_t *out = NULL;
        size_t len = strlen(b64), n;

        if (len == 0 || len > 8192 || base64_decode(b64, len, 0, &out, &n) < 0)
                return -EINVAL;
        if (strlen((char *)out) != n || !strchr((char *)out, ':'))
                return -EINVAL;
        for (size_t i = 0; i < n; i++)
                if (out[i] < 0x20 || out[i] == 0x7f)
                        return -EINVAL;
        *ret = (char *)TAKE_PTR(out);
        return 0;
}

int auth_file_lookup(const char *path, const char *domain, const char *endpoint,
                     char **ret_userpass) {
        _cleanup_free_ char *text = NULL;
        json_t *root, *auths, *entry;
        const char *key;
        int r;

        r = read_full_file(path, AUTH_FILE_MAX, &text);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        root = json_loads(text, 0, NULL);
        if (!root || !json_is_object(root)) {
                json_decref(root);
                return -EINVAL;
        }
        auths = json_object_get(root, "auths");
        if (auths && !json_is_object(auths)) {
                json_decref(root);
                return -EINVAL;
        }
        r = 0;
        json_object_foreach(auths, key, entry) {
                json_t *auth;

                if (!auth_key_matches(key, domain) && !auth_key_matches(key, endpoint))
                        continue;
                auth = json_object_get(entry, "auth");
                if (!json_is_string(auth))
                        continue;
                r = base64_userpass(json_string_value(auth), ret_userpass);
                if (r >= 0)
                        r = 1;
                break;
        }
        json_decref(root);
        return r;
}

char *auth_file_default(void) {
        const char *env;
        char *p = NULL;

        env = getenv("REGISTRY_AUTH_FILE");
        if (env && *env)
                return strdup(env);
        env = getenv("XDG_RUNTIME_DIR");
        if (env && *env && asprintf(&p, "%s/containers/auth.json", env) >= 0) {
                if (access(p, F_OK) == 0)
                        return p;
                p = mfree(p);
        }
        env = getenv("HOME");
        if (env && *env && asprintf(&p, "%s/.docker/config.json", env) >= 0) {
                if (access(p, F_OK) == 0)
                        return p;
                p = mfree(p);
        }
        return NULL;
}
