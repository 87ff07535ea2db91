/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* E2B's network.rules as hutch secrets (docs/e2b.md "network.rules"). */

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/hutch-ext.h"
#include "e2b-internal.h"
#include "fd-util.h"
#include "macro.h"
#include "rm-rf.h"
#include "strv.h"

#define RULE_VALUE_MIN 8
#define RULE_VALUE_MAX (16U << 10)
#define RULE_NAME_MAX 200

static int fail(char *msg, size_t size, int r, const char *fmt, ...) _printf_(4, 5);
static int fail(char *msg, size_t size, int r, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        (void)vsnprintf(msg, size, fmt, ap);
        va_end(ap);
        return r;
}

/* E2B_RULE_<HOST>_<HEADER>: upper case, anything but [A-Z0-9] as '_',
 * a wildcard's '*' as "STAR". */
static int rule_var_name(const char *host, const char *header, char *ret, size_t size) {
        size_t n = 0;
        const char *parts[2] = {host, header};

        n = (size_t)snprintf(ret, size, "E2B_RULE");
        for (size_t k = 0; k < 2; k++) {
                if (n + 1 >= size)
                        return -ENAMETOOLONG;
                ret[n++] = '_';
                for (const char *p = parts[k]; *p; p++) {
                        const char *add = *p == '*' ? "STAR" : NULL;
                        char c =
                                isalnum((unsigned char)*p) ? (char)toupper((unsigned char)*p) : '_';

                        if (n + (add ? 4 : 1) >= size)
                                return -ENAMETOOLONG;
                        if (add) {
                                memcpy(ret + n, add, 4);
                                n += 4;
                        } else
                                ret[n++] = c;
                }
        }
        ret[n] = '\0';
        return 0;
}

static bool header_name_ok(const char *h) {
        if (!*h)
                return false;
        for (; *h; h++)
                if (!isalnum((unsigned char)*h) && !strchr("!#$%&'*+-.^_`|~", *h))
                        return false;
        return true;
}

/* The secret of a header value: "SCHEME TOKEN" (one space, as in
 * "Bearer sk-...") brokers TOKEN, the sandbox sending "SCHEME <its
 * placeholder>"; a value without a space is brokered whole. */
static int rule_secret_value(const char *value, const char **ret, const char **ret_scheme_end) {
        const char *sp = strchr(value, ' '), *v = sp ? sp + 1 : value;
        size_t len = strlen(v);

        if (sp) {
                for (const char *p = value; p < sp; p++)
                        if (!isalnum((unsigned char)*p) && !strchr("-._~+/", *p))
                                return -EINVAL;
                if (sp == value || strchr(v, ' '))
                        return -EINVAL;
        }
        if (len < RULE_VALUE_MIN || len > RULE_VALUE_MAX)
                return -EINVAL;
        for (const char *p = v; *p; p++)
                if (*p <= ' ' || *p > '~')
                        return -EINVAL;
        *ret = v;
        *ret_scheme_end = sp;
        return 0;
}

static int secrets_dir(const E2bServer *srv, const char *id, char **ret) {
        if (asprintf(ret, "%s/%s.secrets", srv->table_dir, id) < 0) {
                *ret = NULL;
                return -ENOMEM;
        }
        return 0;
}

void e2b_rules_remove(const E2bServer *srv, const char *id) {
        _cleanup_free_ char *dir = NULL;

        if (secrets_dir(srv, id, &dir) >= 0)
                (void)rm_rf_at(AT_FDCWD, dir);
}

/* One header of one rule: checks it, writes its value into the
 * sandbox's secrets folder and adds the secret to @secrets. */
static int rule_header(const E2bServer *srv, const char *id, const char *host, const char *where,
                       const char *header, json_t *value, json_t *secrets, char *msg, size_t size) {
        _cleanup_free_ char *dir = NULL, *path = NULL;
        char name[RULE_NAME_MAX];
        const char *secret, *scheme_end;
        json_t *s;
        int r;

        if (!header_name_ok(header))
                return fail(msg, size, -EINVAL, "%s.headers: '%.64s' is not a header name", where,
                            header);
        if (!json_is_string(value))
                return fail(msg, size, -EINVAL, "%s.headers.%s: not a string", where, header);
        if (rule_secret_value(json_string_value(value), &secret, &scheme_end) < 0)
                return fail(msg, size, -EINVAL,
                            "%s.headers.%s: the value must be 'SCHEME TOKEN' or 'TOKEN', the "
                            "token %d to %u visible ASCII characters",
                            where, header, RULE_VALUE_MIN, RULE_VALUE_MAX);
        if (rule_var_name(host, header, name, sizeof(name)) < 0)
                return fail(msg, size, -ENAMETOOLONG, "%s: the host and header are too long",
                            where);
        r = secrets_dir(srv, id, &dir);
        if (r < 0)
                return fail(msg, size, r, "out of memory");
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return fail(msg, size, -errno, "cannot create '%s': %s", dir, strerror(errno));
        r = write_file_atomic(dir, name, secret, strlen(secret));
        if (r < 0)
                return fail(msg, size, r, "cannot write '%s/%s': %s", dir, name, strerror(-r));
        if (asprintf(&path, "file:%s/%s", dir, name) < 0) {
                path = NULL;
                return fail(msg, size, -ENOMEM, "out of memory");
        }
        s = json_pack("{s:s,s:s,s:[s],s:s}", "name", name, "source", path, "hosts", host, "header",
                      header);
        if (!s || json_array_append_new(secrets, s) < 0)
                return fail(msg, size, -ENOMEM, "out of memory");
        return 0;
}

int e2b_rules_to_secrets(const E2bServer *srv, const char *id, json_t *rules, json_t *policy,
                         char *msg, size_t size) {
        _cleanup_strv_free_ char **allow = NULL;
        json_t *secrets, *list, *item;
        const char *host;
        size_t k;
        int r;

        if (!json_is_object(rules))
                return fail(msg, size, -EINVAL, "network.rules: not an object");
        if (json_object_size(rules) == 0)
                return 0;
        if (json_is_string(json_object_get(policy, "network")) &&
            strcmp(json_string_value(json_object_get(policy, "network")), "none") == 0)
                return fail(msg, size, -EINVAL,
                            "network.rules: the sandbox has no network (allowInternetAccess "
                            "false, or denyOut of everything)");
        json_array_foreach(json_object_get(policy, "allow_hosts"), k,
                           item) if (json_is_string(item) &&
                                     strv_extend(&allow, json_string_value(item)) <
                                             0) return fail(msg, size, -ENOMEM, "out of memory");
        secrets = json_object_get(policy, "secrets");
        if (!secrets) {
                secrets = json_array();
                if (!secrets || json_object_set_new(policy, "secrets", secrets) < 0)
                        return fail(msg, size, -ENOMEM, "out of memory");
        }
        json_object_foreach(rules, host, list) {
                char where[320];
                bool within = false;
                json_t *rule;
                size_t i;

                /* SECURITY: a hutch secret allows its host, an E2B rule
                 * does not: the host must be one the sandbox may reach
                 * anyway (its allowlist: network.allowOut, else the serve
                 * flags'), so that a rule never widens the wall. */
                within = allow && hutch_ext_host_within(allow, host);
                if (!within)
                        return fail(msg, size, -EPERM,
                                    "network.rules: '%.200s' is not within the sandbox's "
                                    "allowlist (network.allowOut, or the server's --allow-host)",
                                    host);
                if (!json_is_array(list) || json_array_size(list) == 0)
                        return fail(msg, size, -EINVAL,
                                    "network.rules.%.200s: not a non-empty array", host);
                json_array_foreach(list, i, rule) {
                        json_t *transform, *headers, *value;
                        const char *key, *header;

                        (void)snprintf(where, sizeof(where), "network.rules.%.200s[%zu]", host, i);
                        if (!json_is_object(rule))
                                return fail(msg, size, -EINVAL, "%s: not an object", where);
                        json_object_foreach(
                                rule, key,
                                value) if (strcmp(key, "transform") !=
                                           0) return fail(msg, size, -EOPNOTSUPP,
                                                          "%s.%.64s: not supported by hutch", where,
                                                          key);
                        transform = json_object_get(rule, "transform");
                        if (!json_is_object(transform))
                                return fail(msg, size, -EINVAL, "%s.transform: not an object",
                                            where);
                        json_object_foreach(transform, key, value) if (
                                strcmp(key, "headers") !=
                                0) return fail(msg, size, -EOPNOTSUPP,
                                               "%s.transform.%.64s: not supported by hutch "
                                               "(only headers, as brokered secrets)",
                                               where, key);
                        headers = json_object_get(transform, "headers");
                        (void)snprintf(where, sizeof(where), "network.rules.%.200s[%zu].transform",
                                       host, i);
                        if (!json_is_object(headers) || json_object_size(headers) == 0)
                                return fail(msg, size, -EINVAL,
                                            "%s.headers: not a non-empty object", where);
                        json_object_foreach(headers, header, value) {
                                r = rule_header(srv, id, host, where, header, value, secrets, msg,
                                                size);
                                if (r < 0)
                                        return r;
                        }
                }
        }
        return 0;
}
