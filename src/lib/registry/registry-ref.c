/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Image references as Docker writes them (registry.h). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image/registries-conf.h"
#include "parse-util.h"
#include "registry.h"
#include "strv.h"

#define REF_NAME_MAX 255
#define REF_TAG_MAX 128

ImageRef *image_ref_free(ImageRef *ref) {
        if (!ref)
                return NULL;
        free(ref->domain);
        free(ref->endpoint);
        free(ref->repository);
        free(ref->tag);
        free(ref->digest);
        free(ref);
        return NULL;
}

static bool is_lower_alnum(char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* One path component: [a-z0-9]+ ((\.|_|__|-+)[a-z0-9]+)* */
static bool component_is_valid(const char *s, size_t n) {
        size_t i = 0;

        if (n == 0 || !is_lower_alnum(s[0]) || !is_lower_alnum(s[n - 1]))
                return false;
        while (i < n) {
                if (is_lower_alnum(s[i])) {
                        i++;
                        continue;
                }
                if (s[i] == '.' || s[i] == '_') {
                        size_t sep = s[i] == '_' && i + 1 < n && s[i + 1] == '_' ? 2 : 1;
                        if (!is_lower_alnum(s[i + sep]))
                                return false;
                        i += sep;
                        continue;
                }
                if (s[i] == '-') {
                        while (i < n && s[i] == '-')
                                i++;
                        if (i >= n || !is_lower_alnum(s[i]))
                                return false;
                        continue;
                }
                return false;
        }
        return true;
}

/* host[:port], where host is a DNS name (letters, digits, '.', '-') or a
 * bracketed IPv6 address. */
static bool domain_is_valid(const char *s) {
        const char *p = s, *port;
        uint32_t n;

        if (*p == '[') {
                const char *end = strchr(p, ']');
                if (!end || end == p + 1)
                        return false;
                for (const char *c = p + 1; c < end; c++)
                        if (!isxdigit((unsigned char)*c) && *c != ':' && *c != '.')
                                return false;
                port = end + 1;
        } else {
                const char *c = p;
                while (isalnum((unsigned char)*c) || *c == '.' || *c == '-')
                        c++;
                if (c == p || *p == '-' || *p == '.')
                        return false;
                port = c;
        }
        if (*port == '\0')
                return true;
        if (*port != ':' || port[1] == '\0' || strlen(port + 1) > 5)
                return false;
        for (const char *c = port + 1; *c; c++)
                if (!isdigit((unsigned char)*c))
                        return false;
        return safe_atou32(port + 1, &n) >= 0 && n >= 1 && n <= 65535;
}

static bool tag_is_valid(const char *s) {
        size_t n = strlen(s);

        if (n == 0 || n > REF_TAG_MAX || s[0] == '.' || s[0] == '-')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '.' && s[i] != '-')
                        return false;
        return true;
}

static int digest_check(const char *s, HutchError *reterr) {
        const char *colon = strchr(s, ':');

        if (!colon || colon == s)
                return hutch_error_set(reterr, EINVAL, "'%s' is not a digest (sha256:HEX)", s);
        if ((size_t)(colon - s) != 6 || strncmp(s, "sha256", 6) != 0)
                return hutch_error_set(reterr, EOPNOTSUPP,
                                       "digest '%s': only sha256 digests are supported", s);
        if (strlen(colon + 1) != 64)
                return hutch_error_set(reterr, EINVAL,
                                       "'%s' is not a sha256 digest (64 hex digits)", s);
        for (const char *c = colon + 1; *c; c++)
                if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
                        return hutch_error_set(reterr, EINVAL,
                                               "'%s' is not a sha256 digest (64 lower-case hex "
                                               "digits)",
                                               s);
        return 0;
}

/* Where @ref's registry is reached, from the machine's registries.conf:
 * refused when it is blocked there, its [[registry]] location when it has
 * one. */
static int image_ref_route(ImageRef *ref, HutchError *reterr) {
        const RegistriesConf *c;
        const RegistryEntry *e;
        int r;

        r = registries_conf_get(&c, reterr);
        if (r < 0)
                return r;
        r = registries_conf_lookup(c, ref->domain, &e, reterr);
        if (r <= 0)
                return r;
        if (e->blocked)
                return hutch_error_set(reterr, EACCES, "registry '%s' is blocked (%s)", ref->domain,
                                       e->where);
        ref->insecure = e->insecure;
        if (!e->location || strcmp(e->location, ref->domain) == 0)
                return 0;
        if (!domain_is_valid(e->location))
                return hutch_error_set(reterr, EOPNOTSUPP,
                                       "%s: location '%s' of '%s': hutch applies only a "
                                       "location that is a registry HOST[:PORT]",
                                       e->where, e->location, ref->domain);
        ref->endpoint = strdup(e->location);
        return ref->endpoint ? 0 : -ENOMEM;
}

/* image_ref_parse() with @default_domain (may be NULL) as the registry of
 * a short name. */
static int ref_parse_default(const char *s, const char *default_domain, ImageRef **ret,
                             HutchError *reterr) {
        _cleanup_(image_ref_freep) ImageRef *ref = NULL;
        _cleanup_free_ char *name = NULL;
        const char *slash, *rest, *last;
        char *at, *colon;
        int r;

        if (!s || !*s)
                return hutch_error_set(reterr, EINVAL, "empty image reference");
        if (strlen(s) > 4096)
                return hutch_error_set(reterr, EINVAL, "image reference too long");
        ref = calloc(1, sizeof(*ref));
        name = strdup(s);
        if (!ref || !name)
                return -ENOMEM;

        at = strchr(name, '@');
        if (at) {
                *at = '\0';
                r = digest_check(at + 1, reterr);
                if (r < 0)
                        return r;
                ref->digest = strdup(at + 1);
                if (!ref->digest)
                        return -ENOMEM;
        }
        /* The tag is after the last ':' of the last component (a ':'
         * before the first '/' is the domain's port). */
        last = strrchr(name, '/');
        colon = strrchr(last ? last : name, ':');
        if (colon) {
                *colon = '\0';
                if (!tag_is_valid(colon + 1))
                        return hutch_error_set(reterr, EINVAL, "invalid tag '%s' in '%s'",
                                               colon + 1, s);
                ref->tag = strdup(colon + 1);
                if (!ref->tag)
                        return -ENOMEM;
        }

        slash = strchr(name, '/');
        if (slash) {
                size_t n = (size_t)(slash - name);
                bool is_domain = memchr(name, '.', n) || memchr(name, ':', n) ||
                                 (n == 9 && strncmp(name, "localhost", 9) == 0);
                for (size_t i = 0; i < n && !is_domain; i++)
                        if (isupper((unsigned char)name[i]))
                                is_domain = true;
                if (is_domain) {
                        ref->domain = strndup(name, n);
                        rest = slash + 1;
                } else
                        rest = name;
        } else
                rest = name;
        if (!ref->domain) {
                if (!default_domain)
                        return hutch_error_set(
                                reterr, EINVAL,
                                "'%s' names no registry; give HOST/NAME:TAG or set "
                                "unqualified-search-registries in "
                                "/etc/containers/registries.conf (docs/images-pull.md)",
                                s);
                ref->domain = strdup(default_domain);
        }
        if (!ref->domain)
                return -ENOMEM;
        if (!domain_is_valid(ref->domain))
                return hutch_error_set(reterr, EINVAL, "invalid registry '%s' in '%s'", ref->domain,
                                       s);
        /* As Docker writes references, a one-component name under the
         * default registry is in its "library/" namespace. */
        if (default_domain && strcmp(ref->domain, default_domain) == 0 && !strchr(rest, '/')) {
                if (asprintf(&ref->repository, "library/%s", rest) < 0) {
                        ref->repository = NULL;
                        return -ENOMEM;
                }
        } else {
                ref->repository = strdup(rest);
                if (!ref->repository)
                        return -ENOMEM;
        }
        r = image_ref_route(ref, reterr);
        if (r < 0)
                return r;
        for (const char *c = ref->repository;;) {
                const char *end = strchrnul(c, '/');
                if (!component_is_valid(c, (size_t)(end - c)))
                        return hutch_error_set(reterr, EINVAL,
                                               "invalid repository name '%s' in '%s' (lower-case "
                                               "letters, digits and . _ - between them)",
                                               ref->repository, s);
                if (*end == '\0')
                        break;
                c = end + 1;
        }
        if (strlen(ref->domain) + 1 + strlen(ref->repository) > REF_NAME_MAX)
                return hutch_error_set(reterr, EINVAL, "image name '%s' longer than %d characters",
                                       s, REF_NAME_MAX);
        if (!ref->tag && !ref->digest) {
                ref->tag = strdup("latest");
                if (!ref->tag)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(ref);
        return 0;
}

/* Whether the name part of @s (before its tag or digest) has no registry
 * host: Docker's rule as ref_parse_default() applies it. Returns it in
 * @ret_name (new) and where the tag or digest starts in @ret_suffix. */
static int ref_short_name(const char *s, char **ret_name, const char **ret_suffix) {
        size_t n = strcspn(s, "@"), first;
        const char *last, *colon;

        last = memrchr(s, '/', n);
        colon = memchr(last ? last : s, ':', n - (size_t)((last ? last : s) - s));
        if (colon)
                n = (size_t)(colon - s);
        first = strcspn(s, "/");
        if (first < n) {
                if (memchr(s, '.', first) || memchr(s, ':', first) ||
                    (first == 9 && strncmp(s, "localhost", 9) == 0))
                        return 0;
                for (size_t i = 0; i < first; i++)
                        if (isupper((unsigned char)s[i]))
                                return 0;
        }
        *ret_name = strndup(s, n);
        if (!*ret_name)
                return -ENOMEM;
        *ret_suffix = s + n;
        return 1;
}

int image_ref_parse(const char *s, ImageRef **ret, HutchError *reterr) {
        _cleanup_free_ char *name = NULL, *aliased = NULL;
        const char *default_domain, *suffix, *value, *where;
        const RegistriesConf *c;
        ImageRef *ref;
        int r;

        r = registry_default_domain(&default_domain, reterr);
        if (r < 0)
                return r;
        if (!s || strlen(s) > 4096)
                return ref_parse_default(s, default_domain, ret, reterr);
        r = registries_conf_get(&c, reterr);
        if (r < 0)
                return r;
        r = ref_short_name(s, &name, &suffix);
        if (r < 0)
                return r;
        /* $HUTCH_REGISTRY_DEFAULT says alone what a short name means. */
        if (r == 0 || (getenv("HUTCH_REGISTRY_DEFAULT") && *getenv("HUTCH_REGISTRY_DEFAULT")) ||
            !registries_conf_alias(c, name, &value, &where))
                return ref_parse_default(s, default_domain, ret, reterr);
        /* An alias names the image of a short name: its value, with the
         * name's tag or digest. */
        if (asprintf(&aliased, "%s%s", value, suffix) < 0) {
                aliased = NULL;
                return -ENOMEM;
        }
        r = ref_parse_default(aliased, default_domain, &ref, reterr);
        if (r < 0)
                return r;
        ref->alias_where = where;
        *ret = ref;
        return 0;
}

ImageRef **image_refs_free(ImageRef **refs) {
        for (ImageRef **p = refs; p && *p; p++)
                image_ref_free(*p);
        free(refs);
        return NULL;
}

/* A copy of @ref pulled from @mirror instead. */
static ImageRef *ref_at_mirror(const ImageRef *ref, const char *mirror, bool insecure) {
        _cleanup_(image_ref_freep) ImageRef *m = calloc(1, sizeof(*m));

        if (!m)
                return NULL;
        m->domain = strdup(ref->domain);
        m->endpoint = strdup(mirror);
        m->repository = strdup(ref->repository);
        m->tag = ref->tag ? strdup(ref->tag) : NULL;
        m->digest = ref->digest ? strdup(ref->digest) : NULL;
        if (!m->domain || !m->endpoint || !m->repository || (ref->tag && !m->tag) ||
            (ref->digest && !m->digest))
                return NULL;
        m->insecure = insecure;
        m->alias_where = ref->alias_where;
        m->mirror = true;
        return TAKE_PTR(m);
}

/* @refs (NULL-terminated, taken) with each one's mirrors before it. */
static int refs_with_mirrors(const RegistriesConf *c, ImageRef **refs, ImageRef ***ret,
                             HutchError *reterr) {
        ImageRef **out = NULL;
        size_t n = 0;
        int r = 0;

        for (size_t i = 0; refs[i] && r >= 0; i++) {
                const RegistryEntry *e = NULL;
                size_t k = 0;
                ImageRef **grown;

                r = registries_conf_lookup(c, refs[i]->domain, &e, reterr);
                if (r < 0)
                        break;
                if (e && (!e->mirror_by_digest_only || refs[i]->digest))
                        k = strv_length(e->mirrors);
                grown = reallocarray(out, n + k + 2, sizeof(ImageRef *));
                if (!grown) {
                        r = -ENOMEM;
                        break;
                }
                out = grown;
                for (size_t j = 0; j < k && r >= 0; j++) {
                        out[n] = ref_at_mirror(refs[i], e->mirrors[j], e->mirror_insecure[j]);
                        if (out[n])
                                n++;
                        else
                                r = -ENOMEM;
                }
                out[n++] = TAKE_PTR(refs[i]);
                out[n] = NULL;
        }
        if (r < 0) {
                if (out)
                        out[n] = NULL;
                image_refs_free(out);
                image_refs_free(refs);
                return r;
        }
        free(refs);
        *ret = out;
        return (int)n;
}

int image_ref_candidates(const char *s, ImageRef ***ret, HutchError *reterr) {
        _cleanup_free_ char *name = NULL, *list = NULL;
        const char *env = getenv("HUTCH_REGISTRY_DEFAULT"), *suffix, *value, *where, *mode;
        const RegistriesConf *c;
        ImageRef **refs;
        size_t n;
        int r;

        r = registries_conf_get(&c, reterr);
        if (r < 0)
                return r;
        n = strv_length(c->search);
        r = s && strlen(s) <= 4096 ? ref_short_name(s, &name, &suffix) : 0;
        if (r < 0)
                return r;
        if (r == 0 || (env && *env) || n <= 1 || registries_conf_alias(c, name, &value, &where))
                n = 1;
        refs = calloc(n + 1, sizeof(ImageRef *));
        if (!refs)
                return -ENOMEM;
        if (n == 1) {
                r = image_ref_parse(s, &refs[0], reterr);
                if (r < 0) {
                        image_refs_free(refs);
                        return r;
                }
                return refs_with_mirrors(c, refs, ret, reterr);
        }
        for (size_t i = 0; i < n; i++) {
                r = ref_parse_default(s, c->search[i], &refs[i], reterr);
                if (r < 0) {
                        image_refs_free(refs);
                        return r;
                }
        }
        mode = c->short_name_mode ?: "enforcing";
        if (strcmp(mode, "enforcing") != 0)
                return refs_with_mirrors(c, refs, ret, reterr);
        /* SECURITY: which registry an ambiguous short name comes from is
         * the user's choice, never the first that answers (a squatted name
         * on another registry): hutch cannot prompt as podman does. */
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *one = image_ref_to_string(refs[i]);
                char *next;

                if (!one || asprintf(&next, "%s%s%s", list ?: "", list ? ", " : "", one) < 0) {
                        image_refs_free(refs);
                        return -ENOMEM;
                }
                free(list);
                list = next;
        }
        image_refs_free(refs);
        return hutch_error_set(reterr, EINVAL,
                               "'%s' is a short name that %zu registries could serve (%s), and "
                               "short-name-mode is enforcing (%s): hutch cannot ask which, so "
                               "name the registry (HOST/NAME:TAG), add an [aliases] entry, or set "
                               "short-name-mode = \"permissive\" to try them in order",
                               s, n, list,
                               c->short_name_mode_where ?: "the default when it is unset");
}

char *image_ref_to_string(const ImageRef *ref) {
        char *s;

        if (asprintf(&s, "%s/%s%s%s%s%s", ref->domain, ref->repository, ref->tag ? ":" : "",
                     ref->tag ? ref->tag : "", ref->digest ? "@" : "",
                     ref->digest ? ref->digest : "") < 0)
                return NULL;
        return s;
}

const char *image_ref_endpoint(const ImageRef *ref) {
        return ref->endpoint ? ref->endpoint : ref->domain;
}
