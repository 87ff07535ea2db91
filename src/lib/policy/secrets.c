/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "net/allowlist.h"
#include "policy/policy-internal.h"
#include "policy/policy.h"
#include "strv.h"

/* --secret specs and the "secrets" policy field (docs/secrets.md). Only
 * where a value comes from is kept in the policy; the value is read by the
 * supervisor right before the run (src/lib/sandbox/secrets.c). */

#define SECRET_OPTION_MAX 256

/* " in --secret 'SPEC'" after the message subject, or nothing. */
#define CTX_FMT "%s%s"
#define CTX_ARGS(ctx) (ctx) ? " in " : "", (ctx) ? (ctx) : ""

void policy_secret_done(PolicySecret *s) {
        if (!s)
                return;
        free(s->name);
        free(s->env_var);
        free(s->file);
        strv_free(s->hosts);
        free(s->header);
        free(s->query);
        free(s->path_prefix);
        strv_free(s->methods);
        *s = (PolicySecret){};
}

/* RFC 9110 tchar: what a header name or a method may be made of. */
static bool is_tchar(char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
               (c != '\0' && strchr("!#$%&'*+-.^_`|~", c));
}

static bool is_token(const char *s) {
        if (!s || s[0] == '\0')
                return false;
        for (; *s; s++)
                if (!is_tchar(*s))
                        return false;
        return true;
}

static bool is_method(const char *s) {
        if (!s || s[0] == '\0' || strlen(s) > 32)
                return false;
        for (; *s; s++)
                if (*s < 'A' || *s > 'Z')
                        return false;
        return true;
}

/* A query parameter name: RFC 3986 unreserved characters, nothing that
 * would need encoding or could end the parameter. */
static bool is_query_param(const char *s) {
        if (!s || s[0] == '\0' || strlen(s) > 128)
                return false;
        for (; *s; s++)
                if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
                      (*s >= '0' && *s <= '9') || strchr("-._~", *s)))
                        return false;
        return true;
}

/* A path prefix: "/" then visible ASCII, without a query or fragment. */
static bool is_path_prefix(const char *s) {
        if (!s || s[0] != '/' || strlen(s) > 1024)
                return false;
        for (; *s; s++)
                if (*s <= ' ' || *s >= 0x7f || *s == '?' || *s == '#')
                        return false;
        return true;
}

static int check_host(const char *name, const char *host, const char *ctx, HutchError *reterr) {
        _cleanup_(allowlist_freep) Allowlist *al = NULL;
        HutchError e = {};
        int r;

        al = allowlist_new();
        if (!al)
                return -ENOMEM;
        r = allowlist_add_allow(al, host, &e);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return hutch_error_set(reterr, -r, "secret '%s'" CTX_FMT ": %s", name,
                                       CTX_ARGS(ctx), e.msg);
        return 0;
}

static int secret_check(const PolicySecret *s, const char *ctx, HutchError *reterr) {
        const char *name = s->name ? s->name : "";
        int r;

        if (!env_name_is_valid(name))
                return hutch_error_set(reterr, EINVAL,
                                       "invalid secret name '%s'" CTX_FMT
                                       " (expected [A-Za-z_][A-Za-z0-9_]*)",
                                       name, CTX_ARGS(ctx));
        if (s->env_var && s->file)
                return hutch_error_set(reterr, EINVAL,
                                       "secret '%s'" CTX_FMT
                                       " has two sources: an environment variable and a file",
                                       name, CTX_ARGS(ctx));
        if (s->env_var && !env_name_is_valid(s->env_var))
                return hutch_error_set(reterr, EINVAL,
                                       "secret '%s'" CTX_FMT
                                       ": invalid environment variable name '%s'",
                                       name, CTX_ARGS(ctx), s->env_var);
        if (s->file && s->file[0] != '/')
                return hutch_error_set(reterr, EINVAL,
                                       "secret '%s'" CTX_FMT ": the file '%s' must be an "
                                       "absolute path",
                                       name, CTX_ARGS(ctx), s->file);
        if (strv_length(s->hosts) == 0)
                return hutch_error_set(reterr, EINVAL,
                                       "secret '%s'" CTX_FMT " names no host (expected "
                                       "NAME@HOST[:PORT])",
                                       name, CTX_ARGS(ctx));
        if (strv_length(s->hosts) > POLICY_MAX_SECRET_HOSTS)
                return hutch_error_set(reterr, E2BIG,
                                       "secret '%s'" CTX_FMT " has too many hosts (at most %d)",
                                       name, CTX_ARGS(ctx), POLICY_MAX_SECRET_HOSTS);
        STRV_FOREACH(h, s->hosts) {
                r = check_host(name, *h, ctx, reterr);
                if (r < 0)
                        return r;
        }
        if (s->header && !is_token(s->header))
                return hutch_error_set(reterr, EINVAL,
                                       "secret '%s'" CTX_FMT ": invalid header name '%s'", name,
                                       CTX_ARGS(ctx), s->header);
        if (s->query && !is_query_param(s->query))
                return hutch_error_set(reterr, EINVAL,
                                       "secret '%s'" CTX_FMT
                                       ": invalid query parameter name '%s' (expected letters, "
                                       "digits, '-', '.', '_' or '~')",
                                       name, CTX_ARGS(ctx), s->query);
        if (s->path_prefix && !is_path_prefix(s->path_prefix))
                return hutch_error_set(reterr, EINVAL,
                                       "secret '%s'" CTX_FMT
                                       ": invalid path prefix '%s' (expected '/' and visible "
                                       "characters, without '?' or '#')",
                                       name, CTX_ARGS(ctx), s->path_prefix);
        if (s->methods && strv_length(s->methods) == 0)
                return hutch_error_set(reterr, EINVAL, "secret '%s'" CTX_FMT ": empty method list",
                                       name, CTX_ARGS(ctx));
        STRV_FOREACH(m, s->methods)
                if (!is_method(*m))
                        return hutch_error_set(reterr, EINVAL,
                                               "secret '%s'" CTX_FMT
                                               ": invalid method '%s' (expected upper-case "
                                               "letters, e.g. GET)",
                                               name, CTX_ARGS(ctx), *m);
        return 0;
}

static int strdup_or_null(const char *s, char **ret) {
        *ret = NULL;
        if (!s)
                return 0;
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

static int secret_copy(const PolicySecret *s, PolicySecret *ret) {
        _cleanup_(policy_secret_done) PolicySecret c = {};

        if (strdup_or_null(s->name, &c.name) < 0 || strdup_or_null(s->env_var, &c.env_var) < 0 ||
            strdup_or_null(s->file, &c.file) < 0 || strdup_or_null(s->header, &c.header) < 0 ||
            strdup_or_null(s->query, &c.query) < 0 ||
            strdup_or_null(s->path_prefix, &c.path_prefix) < 0)
                return -ENOMEM;
        c.hosts = strv_copy(s->hosts);
        if (!c.hosts)
                return -ENOMEM;
        if (s->methods) {
                c.methods = strv_copy(s->methods);
                if (!c.methods)
                        return -ENOMEM;
        }
        *ret = c;
        c = (PolicySecret){};
        return 0;
}

int policy_add_secret(Policy *p, const PolicySecret *s, const char *ctx, HutchError *reterr) {
        PolicySecret *n;
        int r;

        r = secret_check(s, ctx, reterr);
        if (r < 0)
                return r;
        for (size_t i = 0; i < p->n_secrets; i++)
                if (strcmp(p->secrets[i].name, s->name) == 0)
                        return hutch_error_set(reterr, EEXIST,
                                               "secret '%s'" CTX_FMT " is given twice", s->name,
                                               CTX_ARGS(ctx));
        if (p->n_secrets >= POLICY_MAX_SECRETS)
                return hutch_error_set(reterr, E2BIG, "too many secrets (at most %d)",
                                       POLICY_MAX_SECRETS);
        n = reallocarray(p->secrets, p->n_secrets + 1, sizeof(PolicySecret));
        if (!n)
                return -ENOMEM;
        p->secrets = n;
        r = secret_copy(s, &p->secrets[p->n_secrets]);
        if (r < 0)
                return r;
        p->n_secrets++;
        return 0;
}

/* Splits "HOST[:PORT][/PREFIX],..." into @s->hosts and @s->path_prefix. A
 * secret has one path prefix: when several hosts carry one it must be the
 * same, and either every host carries it or none does. */
static int parse_hosts(PolicySecret *s, const char *text, size_t len, const char *ctx,
                       HutchError *reterr) {
        size_t n_with = 0, n_hosts = 0;
        const char *p = text, *end = text + len;

        for (;;) {
                const char *comma = memchr(p, ',', (size_t)(end - p));
                size_t n = (size_t)((comma ? comma : end) - p);
                const char *slash = memchr(p, '/', n);
                size_t hn = slash ? (size_t)(slash - p) : n;
                _cleanup_free_ char *host = NULL;
                int r;

                if (hn == 0)
                        return hutch_error_set(reterr, EINVAL, "secret '%s'" CTX_FMT ": empty host",
                                               s->name, CTX_ARGS(ctx));
                host = strndup(p, hn);
                if (!host)
                        return -ENOMEM;
                r = strv_push_take(&s->hosts, TAKE_PTR(host));
                if (r < 0)
                        return r;
                n_hosts++;
                if (slash) {
                        _cleanup_free_ char *prefix = strndup(slash, n - hn);

                        if (!prefix)
                                return -ENOMEM;
                        if (s->path_prefix && strcmp(s->path_prefix, prefix) != 0)
                                return hutch_error_set(
                                        reterr, EINVAL,
                                        "secret '%s'" CTX_FMT ": the hosts name different path "
                                        "prefixes ('%s' and '%s'); a secret has "
                                        "one",
                                        s->name, CTX_ARGS(ctx), s->path_prefix, prefix);
                        if (!s->path_prefix)
                                s->path_prefix = TAKE_PTR(prefix);
                        n_with++;
                }
                p += n;
                if (p >= end)
                        break;
                p++; /* the comma */
                if (p >= end)
                        return hutch_error_set(reterr, EINVAL, "secret '%s'" CTX_FMT ": empty host",
                                               s->name, CTX_ARGS(ctx));
        }
        if (n_with > 0 && n_with != n_hosts)
                return hutch_error_set(reterr, EINVAL,
                                       "secret '%s'" CTX_FMT
                                       ": the path prefix '%s' must follow every host or none",
                                       s->name, CTX_ARGS(ctx), s->path_prefix);
        return 0;
}

static int split_list(const char *text, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        const char *p = text;

        for (;;) {
                size_t n = strcspn(p, ",");
                char *item = strndup(p, n);
                int r;

                if (!item)
                        return -ENOMEM;
                r = strv_push_take(&l, item);
                if (r < 0)
                        return r;
                p += n;
                if (*p == '\0')
                        break;
                p++;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

/* ";header=Authorization;methods=GET,POST" */
static int parse_options(PolicySecret *s, const char *text, const char *ctx, HutchError *reterr) {
        const char *p = text;

        while (*p == ';') {
                size_t n = strcspn(p + 1, ";");
                char opt[SECRET_OPTION_MAX];
                char *eq;
                int r;

                if (n == 0 || n >= sizeof(opt))
                        return hutch_error_set(reterr, EINVAL, "secret '%s'" CTX_FMT ": %s option",
                                               s->name, CTX_ARGS(ctx),
                                               n == 0 ? "empty" : "too long an");
                memcpy(opt, p + 1, n);
                opt[n] = '\0';
                p += n + 1;
                eq = strchr(opt, '=');
                if (eq && eq[1] == '\0')
                        *eq = '\0';
                if (!eq || eq[1] == '\0')
                        return hutch_error_set(reterr, EINVAL,
                                               "secret '%s'" CTX_FMT
                                               ": option '%s' needs a value (KEY=VALUE)",
                                               s->name, CTX_ARGS(ctx), opt);
                *eq = '\0';
                if (strcmp(opt, "header") == 0) {
                        if (s->header)
                                goto twice;
                        s->header = strdup(eq + 1);
                        if (!s->header)
                                return -ENOMEM;
                } else if (strcmp(opt, "query") == 0) {
                        if (s->query)
                                goto twice;
                        s->query = strdup(eq + 1);
                        if (!s->query)
                                return -ENOMEM;
                } else if (strcmp(opt, "methods") == 0) {
                        if (s->methods)
                                goto twice;
                        r = split_list(eq + 1, &s->methods);
                        if (r < 0)
                                return r;
                } else
                        return hutch_error_set(reterr, EINVAL,
                                               "secret '%s'" CTX_FMT
                                               ": unknown option '%s' (expected header, "
                                               "query or methods)",
                                               s->name, CTX_ARGS(ctx), opt);
                continue;
        twice:
                return hutch_error_set(reterr, EINVAL,
                                       "secret '%s'" CTX_FMT ": option '%s' is given twice",
                                       s->name, CTX_ARGS(ctx), opt);
        }
        return 0;
}

int policy_add_secret_spec(Policy *p, const char *spec, HutchError *reterr) {
        _cleanup_(policy_secret_done) PolicySecret s = {};
        _cleanup_free_ char *ctx = NULL;
        const char *at, *rest, *semi;
        size_t n;
        int r;

        if (asprintf(&ctx, "--secret '%s'", spec) < 0)
                return -ENOMEM;
        n = strspn(spec, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_");
        if (n == 0 || (spec[n] != '@' && spec[n] != '='))
                return hutch_error_set(reterr, EINVAL,
                                       "invalid %s: expected NAME@HOST[:PORT] or "
                                       "NAME=file:PATH@HOST[:PORT]",
                                       ctx);
        s.name = strndup(spec, n);
        if (!s.name)
                return -ENOMEM;
        if (!env_name_is_valid(s.name))
                return hutch_error_set(reterr, EINVAL,
                                       "invalid secret name '%s' in %s (expected "
                                       "[A-Za-z_][A-Za-z0-9_]*)",
                                       s.name, ctx);
        /* A file path may hold '@': the source ends at the last one. */
        at = strrchr(spec, '@');
        if (!at || at < spec + n)
                return hutch_error_set(reterr, EINVAL, "invalid %s: missing '@HOST'", ctx);
        if (spec[n] == '=') {
                const char *src = spec + n + 1;
                size_t len = (size_t)(at - src);

                if (len > 5 && strncmp(src, "file:", 5) == 0) {
                        _cleanup_free_ char *path = strndup(src + 5, len - 5);

                        if (!path)
                                return -ENOMEM;
                        r = policy_path_make_absolute(path, &s.file);
                        if (r < 0)
                                return hutch_error_set(reterr, -r,
                                                       "secret '%s' in %s: cannot make '%s' "
                                                       "absolute: %s",
                                                       s.name, ctx, path, strerror(-r));
                } else if (len > 4 && strncmp(src, "env:", 4) == 0) {
                        s.env_var = strndup(src + 4, len - 4);
                        if (!s.env_var)
                                return -ENOMEM;
                } else
                        return hutch_error_set(reterr, EINVAL,
                                               "secret '%s' in %s: the source must be "
                                               "file:PATH or env:VARIABLE",
                                               s.name, ctx);
        }
        rest = at + 1;
        semi = strchr(rest, ';');
        r = parse_hosts(&s, rest, semi ? (size_t)(semi - rest) : strlen(rest), ctx, reterr);
        if (r < 0)
                return r;
        if (semi) {
                r = parse_options(&s, semi, ctx, reterr);
                if (r < 0)
                        return r;
        }
        return policy_add_secret(p, &s, ctx, reterr);
}

int policy_add_upstream_ca(Policy *p, const char *path, const char *ctx, HutchError *reterr) {
        _cleanup_free_ char *abs = NULL;
        int r;

        if (!path || path[0] == '\0')
                return hutch_error_set(reterr, EINVAL, "%s needs a file name",
                                       ctx ? ctx : "upstream CA");
        r = policy_path_make_absolute(path, &abs);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot make '%s' absolute: %s", path,
                                       strerror(-r));
        if (strv_contains(p->upstream_ca, abs))
                return 0;
        if (strv_length(p->upstream_ca) >= POLICY_MAX_NET_ENTRIES)
                return hutch_error_set(reterr, E2BIG, "too many upstream CAs");
        return strv_push_take(&p->upstream_ca, TAKE_PTR(abs));
}

int policy_validate_secrets(const Policy *p, HutchError *reterr) {
        int r;

        if (p->n_secrets > POLICY_MAX_SECRETS)
                return hutch_error_set(reterr, E2BIG, "too many secrets (at most %d)",
                                       POLICY_MAX_SECRETS);
        for (size_t i = 0; i < p->n_secrets; i++) {
                r = secret_check(&p->secrets[i], NULL, reterr);
                if (r < 0)
                        return r;
                for (size_t j = 0; j < i; j++)
                        if (strcmp(p->secrets[i].name, p->secrets[j].name) == 0)
                                return hutch_error_set(reterr, EEXIST, "secret '%s' is given twice",
                                                       p->secrets[i].name);
        }
        if (p->n_secrets > 0 && p->network_set && p->network == NETWORK_MODE_NONE)
                return hutch_error_set(reterr, EINVAL,
                                       "secret '%s' needs network mode 'allow', but '--network "
                                       "none' was given",
                                       p->secrets[0].name);
        STRV_FOREACH(f, p->upstream_ca) {
                struct stat st;

                if (stat(*f, &st) < 0)
                        return hutch_error_set(reterr, errno, "upstream CA file '%s': %m", *f);
                if (!S_ISREG(st.st_mode))
                        return hutch_error_set(reterr, EINVAL,
                                               "upstream CA file '%s' is not a regular file", *f);
        }
        return 0;
}
