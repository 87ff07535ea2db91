/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fd-util.h"
#include "json-fields.h"
#include "parse-util.h"
#include "proxy-config.h"
#include "strv.h"

#ifndef HUTCH_VERSION
#define HUTCH_VERSION "unknown"
#endif

typedef int (*OptionSetter)(ProxyConfig *c, const char *value, HutchError *reterr);

/* How an option's value is spelled in JSON; on the command line every
 * value is a string and list options are repeated. */
typedef enum OptionType {
        OPT_STRING,      /* "x" */
        OPT_STRING_LIST, /* ["x", ...] */
        OPT_INT,         /* 3 */
        OPT_INT_LIST,    /* [3, 4] */
        OPT_BOOL,        /* true; a flag without argument on the command line */
} OptionType;

typedef struct ConfigOption {
        const char *flag; /* long option without "--" */
        const char *json; /* JSON key; NULL when command-line only */
        OptionType type;
        OptionSetter set;
        const char *arg; /* argument name for --help */
        const char *help;
} ConfigOption;

static int fd_arg(const char *value, int min, const char *what, int *ret, HutchError *reterr) {
        int fd, r;

        *ret = -EBADF;
        r = safe_atoi(value, &fd);
        if (r < 0 || fd < min)
                return hutch_error_set(reterr, EINVAL,
                                       "invalid %s '%s': not a file descriptor number >= %d", what,
                                       value, min);
        if (fcntl(fd, F_GETFD) < 0)
                return hutch_error_set(reterr, EBADF, "invalid %s '%s': the descriptor is not open",
                                       what, value);
        *ret = fd;
        return 0;
}

static int set_listen_fd(ProxyConfig *c, const char *value, HutchError *reterr) {
        int fd, r;

        r = fd_arg(value, 3, "--listen-fd", &fd, reterr);
        if (r < 0)
                return r;
        for (size_t i = 0; i < c->n_listen_fds; i++)
                if (c->listen_fds[i] == fd)
                        return 0;
        if (c->n_listen_fds >= PROXY_LISTEN_FDS_MAX)
                return hutch_error_set(reterr, E2BIG, "too many --listen-fd (at most %d)",
                                       PROXY_LISTEN_FDS_MAX);
        c->listen_fds[c->n_listen_fds++] = fd;
        return 0;
}

static int set_allow(ProxyConfig *c, const char *value, HutchError *reterr) {
        return allowlist_add_allow(c->allowlist, value, reterr);
}

static int set_deny(ProxyConfig *c, const char *value, HutchError *reterr) {
        return allowlist_add_deny(c->allowlist, value, reterr);
}

static int set_allow_private(ProxyConfig *c, const char *value, HutchError *reterr) {
        return allowlist_add_private(c->allowlist, value, reterr);
}

static int set_resolve(ProxyConfig *c, const char *value, HutchError *reterr) {
        const char *colon = strchr(value, ':'), *p;
        ResolveEntry e = {};
        Host h;
        int r;

        if (!colon || colon == value || colon[1] == '\0')
                return hutch_error_set(reterr, EINVAL,
                                       "invalid --resolve '%s': expected NAME:ADDR[,ADDR...]",
                                       value);
        r = host_parse(value, (size_t)(colon - value), &h);
        if (r < 0 || h.kind != HOST_KIND_NAME)
                return hutch_error_set(reterr, EINVAL,
                                       "invalid --resolve '%s': '%.*s' is not a DNS name", value,
                                       (int)(colon - value), value);
        memcpy(e.name, h.name, sizeof(e.name));

        for (p = colon + 1;;) {
                const char *comma = strchr(p, ',');
                size_t n = comma ? (size_t)(comma - p) : strlen(p);

                if (e.n_addrs >= PROXY_RESOLVE_ADDRS_MAX)
                        return hutch_error_set(reterr, E2BIG,
                                               "invalid --resolve '%s': more than %d addresses",
                                               value, PROXY_RESOLVE_ADDRS_MAX);
                r = net_addr_parse(p, n, &e.addrs[e.n_addrs]);
                if (r < 0)
                        return hutch_error_set(
                                reterr, EINVAL,
                                "invalid --resolve '%s': '%.*s' is not an IP address", value,
                                (int)n, p);
                e.n_addrs++;
                if (!comma)
                        break;
                p = comma + 1;
        }

        /* A later entry for the same name replaces the earlier one. */
        for (size_t i = 0; i < c->n_resolve; i++)
                if (strcmp(c->resolve[i].name, e.name) == 0) {
                        c->resolve[i] = e;
                        return 0;
                }
        if (c->n_resolve >= PROXY_RESOLVE_MAX)
                return hutch_error_set(reterr, E2BIG, "too many --resolve entries (at most %d)",
                                       PROXY_RESOLVE_MAX);
        {
                ResolveEntry *grown = reallocarray(c->resolve, c->n_resolve + 1, sizeof(*grown));

                if (!grown)
                        return hutch_error_set(reterr, ENOMEM, "out of memory");
                grown[c->n_resolve++] = e;
                c->resolve = grown;
        }
        return 0;
}

static int set_nameserver(ProxyConfig *c, const char *value, HutchError *reterr) {
        const char *addr = value, *port_text = NULL, *colon = strchr(value, ':');
        char canon[NET_ADDR_STRING_MAX], out[NET_ADDR_STRING_MAX + 16];
        size_t addr_len = strlen(value);
        uint32_t port = 53;
        NetAddr a;
        int r;

        if (value[0] == '[') {
                const char *close = strchr(value, ']');

                if (!close || (close[1] != '\0' && close[1] != ':'))
                        return hutch_error_set(reterr, EINVAL, "invalid --nameserver '%s'", value);
                addr_len = (size_t)(close - value) + 1;
                if (close[1] == ':')
                        port_text = close + 2;
        } else if (colon && !strchr(colon + 1, ':')) {
                addr_len = (size_t)(colon - value);
                port_text = colon + 1;
        }
        r = net_addr_parse(addr, addr_len, &a);
        if (r < 0)
                return hutch_error_set(reterr, EINVAL,
                                       "invalid --nameserver '%s': not an IP address", value);
        if (port_text) {
                r = safe_atou32(port_text, &port);
                if (r < 0 || port == 0 || port > 65535)
                        return hutch_error_set(reterr, EINVAL,
                                               "invalid --nameserver '%s': bad port", value);
        }
        if (strv_length(c->nameservers) >= PROXY_NAMESERVERS_MAX)
                return hutch_error_set(reterr, E2BIG, "too many --nameserver (at most %d)",
                                       PROXY_NAMESERVERS_MAX);
        r = net_addr_to_string(&a, canon, sizeof(canon));
        if (r < 0)
                return hutch_error_set(reterr, -r, "invalid --nameserver '%s'", value);
        (void)snprintf(out, sizeof(out), a.family == AF_INET6 ? "[%s]:%u" : "%s:%u", canon,
                       (unsigned)port);
        if (strv_extend(&c->nameservers, out) < 0)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        return 0;
}

static int set_string(char **field, const char *value, const char *what, HutchError *reterr) {
        char *copy;

        if (value[0] == '\0')
                return hutch_error_set(reterr, EINVAL, "invalid %s '': empty", what);
        copy = strdup(value);
        if (!copy)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        free(*field);
        *field = copy;
        return 0;
}

static int set_audit_log(ProxyConfig *c, const char *value, HutchError *reterr) {
        return set_string(&c->audit_path, value, "--audit-log", reterr);
}

static int set_sandbox_id(ProxyConfig *c, const char *value, HutchError *reterr) {
        if (strlen(value) > 256)
                return hutch_error_set(reterr, EINVAL,
                                       "invalid --sandbox-id: longer than 256 bytes");
        return set_string(&c->sandbox_id, value, "--sandbox-id", reterr);
}

static int set_audit_fd(ProxyConfig *c, const char *value, HutchError *reterr) {
        return fd_arg(value, 1, "--audit-fd", &c->audit_fd, reterr);
}

static int set_summary_fd(ProxyConfig *c, const char *value, HutchError *reterr) {
        return fd_arg(value, 1, "--summary-fd", &c->summary_fd, reterr);
}

static int set_watch_fd(ProxyConfig *c, const char *value, HutchError *reterr) {
        return fd_arg(value, 3, "--watch-fd", &c->watch_fd, reterr);
}

static int set_ready_fd(ProxyConfig *c, const char *value, HutchError *reterr) {
        return fd_arg(value, 3, "--ready-fd", &c->ready_fd, reterr);
}

static int set_duration(uint64_t *field, const char *value, const char *what, HutchError *reterr) {
        uint64_t ms;
        int r;

        r = parse_duration_ms(value, &ms);
        if (r < 0 || ms == 0 || ms > 24ULL * 3600 * 1000)
                return hutch_error_set(reterr, EINVAL,
                                       "invalid %s '%s': expected a duration from 1ms to 24h, "
                                       "such as 10s or 500ms",
                                       what, value);
        *field = ms;
        return 0;
}

static int set_header_timeout(ProxyConfig *c, const char *value, HutchError *reterr) {
        return set_duration(&c->header_timeout_ms, value, "--header-timeout", reterr);
}

static int set_idle_timeout(ProxyConfig *c, const char *value, HutchError *reterr) {
        return set_duration(&c->idle_timeout_ms, value, "--idle-timeout", reterr);
}

static int set_connect_timeout(ProxyConfig *c, const char *value, HutchError *reterr) {
        return set_duration(&c->connect_timeout_ms, value, "--connect-timeout", reterr);
}

static int set_dns_timeout(ProxyConfig *c, const char *value, HutchError *reterr) {
        return set_duration(&c->dns_timeout_ms, value, "--dns-timeout", reterr);
}

static int set_max_connections(ProxyConfig *c, const char *value, HutchError *reterr) {
        uint32_t v;
        int r;

        r = safe_atou32(value, &v);
        if (r < 0 || v == 0 || v > PROXY_MAX_CONNECTIONS_LIMIT)
                return hutch_error_set(reterr, EINVAL,
                                       "invalid --max-connections '%s': expected 1 to %d", value,
                                       PROXY_MAX_CONNECTIONS_LIMIT);
        c->max_connections = v;
        return 0;
}

static int set_verbose(ProxyConfig *c, const char *value, HutchError *reterr) {
        return parse_boolean(value, &c->verbose) < 0
                       ? hutch_error_set(reterr, EINVAL, "invalid verbose '%s'", value)
                       : 0;
}

static int set_ca_out_fd(ProxyConfig *c, const char *value, HutchError *reterr) {
        return fd_arg(value, 3, "--ca-out-fd", &c->ca_out_fd, reterr);
}

static int set_upstream_ca(ProxyConfig *c, const char *value, HutchError *reterr) {
        if (value[0] == '\0')
                return hutch_error_set(reterr, EINVAL, "invalid --upstream-ca '': empty");
        if (strv_extend(&c->upstream_ca, value) < 0)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        return 0;
}

static int set_dns_transparent(ProxyConfig *c, const char *value, HutchError *reterr) {
        return parse_boolean(value, &c->dns_transparent) < 0
                       ? hutch_error_set(reterr, EINVAL, "invalid dns_transparent '%s'", value)
                       : 0;
}

static int set_config_fd(ProxyConfig *c, const char *value, HutchError *reterr);

static int set_listen_socket(ProxyConfig *c, const char *value, HutchError *reterr) {
        return fd_arg(value, 3, "--listen-fds-socket", &c->listen_socket, reterr);
}

static const ConfigOption options[] = {
        {"listen-fd", "listen_fds", OPT_INT_LIST, set_listen_fd, "FD",
         "accept proxy clients on this listening socket (repeatable)"},
        {"listen-fds-socket", "listen_fds_socket", OPT_INT, set_listen_socket, "FD",
         "receive the listening sockets over this unix socket once the CA is written"},
        {"allow", "allow", OPT_STRING_LIST, set_allow, "PATTERN[:PORT]",
         "allow a host: NAME, *.DOMAIN or an IP; ports 80 and 443 by default"},
        {"deny", "deny", OPT_STRING_LIST, set_deny, "PATTERN[:PORT]",
         "deny a host (wins over --allow; every port by default)"},
        {"allow-private", "allow_private", OPT_STRING_LIST, set_allow_private, "CIDR",
         "allow connecting to these non-public addresses"},
        {"resolve", "resolve", OPT_STRING_LIST, set_resolve, "NAME:ADDR[,ADDR]",
         "use these addresses for NAME instead of DNS"},
        {"nameserver", "nameservers", OPT_STRING_LIST, set_nameserver, "ADDR[:PORT]",
         "ask this DNS server instead of /etc/resolv.conf's"},
        {"audit-log", "audit_log", OPT_STRING, set_audit_log, "FILE",
         "append the JSON-lines audit log to FILE"},
        {"audit-fd", "audit_fd", OPT_INT, set_audit_fd, "FD", "write the audit log to FD"},
        {"summary-fd", "summary_fd", OPT_INT, set_summary_fd, "FD",
         "write the summary line to FD too when exiting"},
        {"watch-fd", "watch_fd", OPT_INT, set_watch_fd, "FD",
         "exit when FD becomes readable or hangs up (a pipe or pidfd of the parent)"},
        {"ready-fd", "ready_fd", OPT_INT, set_ready_fd, "FD",
         "write \"ready\\n\" to FD and close it once serving"},
        {"sandbox-id", "sandbox_id", OPT_STRING, set_sandbox_id, "ID",
         "the sandbox named in every audit line"},
        {"header-timeout", "header_timeout", OPT_STRING, set_header_timeout, "DURATION",
         "time allowed to send a request head (default 10s)"},
        {"idle-timeout", "idle_timeout", OPT_STRING, set_idle_timeout, "DURATION",
         "close keep-alive connections idle this long (default 300s)"},
        {"connect-timeout", "connect_timeout", OPT_STRING, set_connect_timeout, "DURATION",
         "time allowed to connect upstream (default 10s)"},
        {"dns-timeout", "dns_timeout", OPT_STRING, set_dns_timeout, "DURATION",
         "time allowed to resolve a name (default 5s)"},
        {"max-connections", "max_connections", OPT_INT, set_max_connections, "N",
         "serve at most N client connections at once (default 512)"},
        {"verbose", "verbose", OPT_BOOL, set_verbose, NULL, "log debug messages to stderr"},
        {"dns-transparent", "dns_transparent", OPT_BOOL, set_dns_transparent, NULL,
         "answer DNS on a datagram listening fd for the exact allowed names, and serve "
         "connections to their synthetic addresses (docs/network.md)"},
        {"ca-out-fd", "ca_out_fd", OPT_INT, set_ca_out_fd, "FD",
         "write the sandbox CA certificate (PEM) to FD and close it (empty without secrets)"},
        {"upstream-ca", "upstream_ca", OPT_STRING_LIST, set_upstream_ca, "FILE",
         "also trust the CAs in FILE for upstream TLS of intercepted hosts"},
        {"config-fd", NULL, OPT_INT, set_config_fd, "FD",
         "read a JSON configuration document from FD"},
};

ProxyConfig *proxy_config_new(void) {
        ProxyConfig *c = calloc(1, sizeof(ProxyConfig));

        if (!c)
                return NULL;
        c->allowlist = allowlist_new();
        if (!c->allowlist) {
                free(c);
                return NULL;
        }
        c->audit_fd = c->summary_fd = c->watch_fd = c->ready_fd = c->ca_out_fd = -EBADF;
        c->listen_socket = -EBADF;
        c->header_timeout_ms = PROXY_DEFAULT_HEADER_TIMEOUT_MS;
        c->idle_timeout_ms = PROXY_DEFAULT_IDLE_TIMEOUT_MS;
        c->connect_timeout_ms = PROXY_DEFAULT_CONNECT_TIMEOUT_MS;
        c->dns_timeout_ms = PROXY_DEFAULT_DNS_TIMEOUT_MS;
        c->max_connections = PROXY_DEFAULT_MAX_CONNECTIONS;
        return c;
}

ProxyConfig *proxy_config_free(ProxyConfig *c) {
        if (!c)
                return NULL;
        allowlist_free(c->allowlist);
        free(c->resolve);
        strv_free(c->nameservers);
        free(c->audit_path);
        free(c->sandbox_id);
        for (size_t i = 0; i < c->n_secrets; i++)
                proxy_secret_done(&c->secrets[i]);
        free(c->secrets);
        strv_free(c->upstream_ca);
        free(c);
        return NULL;
}

static int json_value_string(json_t *v, char *buf, size_t size, const char **ret) {
        if (json_is_string(v)) {
                *ret = json_string_value(v);
                return 0;
        }
        if (json_is_integer(v)) {
                (void)snprintf(buf, size, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
                *ret = buf;
                return 0;
        }
        if (json_is_boolean(v)) {
                *ret = json_is_true(v) ? "true" : "false";
                return 0;
        }
        return -EINVAL;
}

static bool json_type_ok(const ConfigOption *o, json_t *v) {
        switch (o->type) {
        case OPT_STRING:
                return json_is_string(v);
        case OPT_INT:
                return json_is_integer(v);
        case OPT_BOOL:
                return json_is_boolean(v);
        case OPT_STRING_LIST:
        case OPT_INT_LIST:
                return json_is_array(v);
        }
        return false;
}

static const char *json_type_expected(const ConfigOption *o) {
        switch (o->type) {
        case OPT_STRING:
                return "a string";
        case OPT_INT:
                return "an integer";
        case OPT_BOOL:
                return "a boolean";
        case OPT_STRING_LIST:
                return "an array of strings";
        case OPT_INT_LIST:
                return "an array of integers";
        }
        return "?";
}

/* Applies one member: scalars directly, arrays element by element, each
 * through the option's setter; errors carry the member's JSON pointer. */
static int json_apply(ProxyConfig *c, const ConfigOption *o, json_t *v, HutchError *reterr) {
        char num[32], pointer[HUTCH_ERROR_POINTER_MAX];
        const char *s;
        HutchError e = {};
        size_t i;
        json_t *item;
        int r;

        if (!json_type_ok(o, v)) {
                (void)snprintf(pointer, sizeof(pointer), "/%s", o->json);
                return hutch_error_set_pointer(reterr, EINVAL, pointer, "'%s' must be %s", o->json,
                                               json_type_expected(o));
        }
        if (o->type != OPT_STRING_LIST && o->type != OPT_INT_LIST) {
                r = json_value_string(v, num, sizeof(num), &s);
                if (r >= 0)
                        r = o->set(c, s, &e);
                else
                        (void)hutch_error_set(&e, -r, "'%s' must be %s", o->json,
                                              json_type_expected(o));
                if (r < 0) {
                        (void)snprintf(pointer, sizeof(pointer), "/%s", o->json);
                        return hutch_error_set_pointer(reterr, -r, pointer, "%s", e.msg);
                }
                return 0;
        }
        json_array_foreach(v, i, item) {
                (void)snprintf(pointer, sizeof(pointer), "/%s/%zu", o->json, i);
                if ((o->type == OPT_STRING_LIST && !json_is_string(item)) ||
                    (o->type == OPT_INT_LIST && !json_is_integer(item)))
                        return hutch_error_set_pointer(reterr, EINVAL, pointer, "'%s' must be %s",
                                                       o->json, json_type_expected(o));
                r = json_value_string(item, num, sizeof(num), &s);
                if (r < 0)
                        return hutch_error_set_pointer(reterr, -r, pointer, "'%s' must be %s",
                                                       o->json, json_type_expected(o));
                r = o->set(c, s, &e);
                if (r < 0)
                        return hutch_error_set_pointer(reterr, -r, pointer, "%s", e.msg);
        }
        return 0;
}

static int secret_string(json_t *obj, const char *key, bool required, size_t index, char **ret,
                         HutchError *reterr) {
        char pointer[HUTCH_ERROR_POINTER_MAX];
        json_t *v = json_object_get(obj, key);

        (void)snprintf(pointer, sizeof(pointer), "/secrets/%zu/%s", index, key);
        if (!v && !required) {
                *ret = NULL;
                return 0;
        }
        if (!json_is_string(v) || json_string_length(v) == 0)
                return hutch_error_set_pointer(reterr, EINVAL, pointer,
                                               "'%s' of a secret must be a non-empty string", key);
        if (strlen(json_string_value(v)) != json_string_length(v))
                return hutch_error_set_pointer(reterr, EINVAL, pointer,
                                               "'%s' of a secret must not contain NUL", key);
        *ret = strdup(json_string_value(v));
        if (!*ret)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        return 0;
}

static bool printable_token(const char *s) {
        for (; *s; s++)
                if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f)
                        return false;
        return true;
}

/* Refuses a key of secret @obj that is not one of docs/network.md's. */
static int secret_check_keys(json_t *obj, size_t index, HutchError *reterr) {
        /* Names only: load_secret() reads each member itself. */
        static const JsonFieldDef known[] = {
                {"name", JSON_FIELD_ANY},        {"placeholder", JSON_FIELD_ANY},
                {"value", JSON_FIELD_ANY},       {"hosts", JSON_FIELD_ANY},
                {"header", JSON_FIELD_ANY},      {"query", JSON_FIELD_ANY},
                {"path_prefix", JSON_FIELD_ANY}, {"methods", JSON_FIELD_ANY},
        };
        char pointer[HUTCH_ERROR_POINTER_MAX];
        const char *key;

        key = json_fields_unknown(obj, known, ELEMENTSOF(known));
        if (key) {
                (void)snprintf(pointer, sizeof(pointer), "/secrets/%zu/%s", index, key);
                return hutch_error_set_pointer(reterr, EINVAL, pointer,
                                               "unknown key '%s' in a secret", key);
        }
        return 0;
}

/* Checks the strings of secret @s (its @value apart) at @pointer. */
static int secret_check_strings(const ProxySecret *s, const char *value, const char *pointer,
                                HutchError *reterr) {
        /* SECURITY: a value is spliced into header lines; a placeholder is
         * searched for in them. Both must be printable without spaces, and
         * of one length so a body keeps its Content-Length. */
        if (!printable_token(value) || !printable_token(s->placeholder))
                return hutch_error_set_pointer(reterr, EINVAL, pointer,
                                               "secret '%s': the value and the placeholder must be "
                                               "printable ASCII without spaces",
                                               s->name);
        if (strlen(value) != s->placeholder_len || strcmp(value, s->placeholder) == 0)
                return hutch_error_set_pointer(reterr, EINVAL, pointer,
                                               "secret '%s': the placeholder must differ from the "
                                               "value and have the same length",
                                               s->name);
        if (s->placeholder_len > PROXY_SECRET_VALUE_MAX)
                return hutch_error_set_pointer(reterr, E2BIG, pointer,
                                               "secret '%s': longer than %d bytes", s->name,
                                               PROXY_SECRET_VALUE_MAX);
        if (s->header && !printable_token(s->header))
                return hutch_error_set_pointer(reterr, EINVAL, pointer,
                                               "secret '%s': invalid header name", s->name);
        /* SECURITY: the query lane is matched as "NAME=" at a parameter's
         * start: a name holding '=', '&' or '#' could split a parameter. */
        if (s->query && (!printable_token(s->query) || strpbrk(s->query, "=&#?%")))
                return hutch_error_set_pointer(reterr, EINVAL, pointer,
                                               "secret '%s': invalid query parameter name",
                                               s->name);
        if (s->path_prefix && s->path_prefix[0] != '/')
                return hutch_error_set_pointer(reterr, EINVAL, pointer,
                                               "secret '%s': path_prefix must start with '/'",
                                               s->name);
        return 0;
}

/* Reads the string fields of secret @obj into @s and its value into
 * @ret_value. */
static int secret_load_strings(json_t *obj, size_t index, ProxySecret *s, char **ret_value,
                               HutchError *reterr) {
        int r;

        r = secret_string(obj, "name", true, index, &s->name, reterr);
        if (r >= 0)
                r = secret_string(obj, "placeholder", true, index, &s->placeholder, reterr);
        if (r >= 0)
                r = secret_string(obj, "value", true, index, ret_value, reterr);
        if (r >= 0)
                r = secret_string(obj, "header", false, index, &s->header, reterr);
        if (r >= 0)
                r = secret_string(obj, "query", false, index, &s->query, reterr);
        if (r >= 0)
                r = secret_string(obj, "path_prefix", false, index, &s->path_prefix, reterr);
        if (r < 0)
                return r;
        s->placeholder_len = strlen(s->placeholder);
        return 0;
}

/* The secret's "hosts" @v: its own list, and allowed like --allow. */
static int secret_load_hosts(ProxyConfig *c, ProxySecret *s, json_t *v, size_t index,
                             HutchError *reterr) {
        char pointer[HUTCH_ERROR_POINTER_MAX];
        json_t *item;
        size_t i;
        int r;

        if (!json_is_array(v) || json_array_size(v) == 0) {
                (void)snprintf(pointer, sizeof(pointer), "/secrets/%zu", index);
                return hutch_error_set_pointer(reterr, EINVAL, pointer,
                                               "secret '%s': 'hosts' must be a non-empty array",
                                               s->name);
        }
        s->hosts = allowlist_new();
        if (!s->hosts)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        json_array_foreach(v, i, item) {
                HutchError e = {};

                (void)snprintf(pointer, sizeof(pointer), "/secrets/%zu/hosts/%zu", index, i);
                if (!json_is_string(item))
                        return hutch_error_set_pointer(reterr, EINVAL, pointer,
                                                       "a host of a secret must be a string");
                r = allowlist_add_allow(s->hosts, json_string_value(item), &e);
                if (r >= 0)
                        r = allowlist_add_allow(c->allowlist, json_string_value(item), &e);
                if (r < 0)
                        return hutch_error_set_pointer(reterr, -r, pointer, "secret '%s': %s",
                                                       s->name, e.msg);
        }
        return 0;
}

/* The secret's optional "methods" @v (NULL: any method). */
static int secret_load_methods(ProxySecret *s, json_t *v, size_t index, HutchError *reterr) {
        char pointer[HUTCH_ERROR_POINTER_MAX];
        json_t *item;
        size_t i;

        if (!v)
                return 0;
        (void)snprintf(pointer, sizeof(pointer), "/secrets/%zu/methods", index);
        if (!json_is_array(v) || json_array_size(v) == 0)
                return hutch_error_set_pointer(reterr, EINVAL, pointer,
                                               "'methods' must be a non-empty array");
        json_array_foreach(v, i, item) {
                if (!json_is_string(item) || !printable_token(json_string_value(item)) ||
                    json_string_length(item) == 0)
                        return hutch_error_set_pointer(reterr, EINVAL, pointer,
                                                       "'methods' must hold method names");
                if (strv_extend(&s->methods, json_string_value(item)) < 0)
                        return hutch_error_set(reterr, ENOMEM, "out of memory");
        }
        return 0;
}

/* Adds @s to @c, taking it over on success; a placeholder used twice is
 * refused. */
static int secret_append(ProxyConfig *c, ProxySecret *s, size_t index, HutchError *reterr) {
        char pointer[HUTCH_ERROR_POINTER_MAX];
        ProxySecret *grown;

        for (size_t i = 0; i < c->n_secrets; i++)
                if (strcmp(c->secrets[i].placeholder, s->placeholder) == 0) {
                        (void)snprintf(pointer, sizeof(pointer), "/secrets/%zu", index);
                        return hutch_error_set_pointer(reterr, EINVAL, pointer,
                                                       "secret '%s': the placeholder is used twice",
                                                       s->name);
                }
        grown = reallocarray(c->secrets, c->n_secrets + 1, sizeof(*grown));
        if (!grown)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        grown[c->n_secrets++] = *s;
        c->secrets = grown;
        *s = (ProxySecret){};
        return 0;
}

/* One element of "secrets" (docs/network.md). */
static int load_secret(ProxyConfig *c, json_t *obj, size_t index, HutchError *reterr) {
        char pointer[HUTCH_ERROR_POINTER_MAX];
        _cleanup_free_ char *value = NULL;
        ProxySecret s = {};
        int r;

        (void)snprintf(pointer, sizeof(pointer), "/secrets/%zu", index);
        if (!json_is_object(obj))
                return hutch_error_set_pointer(reterr, EINVAL, pointer,
                                               "a secret must be an object");
        if (c->n_secrets >= PROXY_SECRETS_MAX)
                return hutch_error_set_pointer(reterr, E2BIG, pointer,
                                               "too many secrets (at most %d)", PROXY_SECRETS_MAX);
        r = secret_check_keys(obj, index, reterr);
        if (r >= 0)
                r = secret_load_strings(obj, index, &s, &value, reterr);
        if (r >= 0)
                r = secret_check_strings(&s, value, pointer, reterr);
        if (r >= 0) {
                r = proxy_secret_set_value(&s, value, strlen(value));
                if (r < 0)
                        r = hutch_error_set(reterr, -r, "out of memory");
        }
        if (r >= 0)
                r = secret_load_hosts(c, &s, json_object_get(obj, "hosts"), index, reterr);
        if (r >= 0)
                r = secret_load_methods(&s, json_object_get(obj, "methods"), index, reterr);
        if (r >= 0)
                r = secret_append(c, &s, index, reterr);
        if (value)
                explicit_bzero(value, strlen(value));
        proxy_secret_done(&s);
        return r;
}

static int load_secrets(ProxyConfig *c, json_t *v, HutchError *reterr) {
        json_t *item;
        size_t i;
        int r;

        if (!json_is_array(v))
                return hutch_error_set_pointer(reterr, EINVAL, "/secrets",
                                               "'secrets' must be an array of objects");
        json_array_foreach(v, i, item) {
                r = load_secret(c, item, i, reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}

int proxy_config_load_json(ProxyConfig *c, const char *text, size_t len, HutchError *reterr) {
        json_error_t jerr;
        const char *key;
        json_t *root, *v;
        int r = 0;

        root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!root) {
                r = hutch_error_set(reterr, EINVAL, "invalid JSON configuration: %s", jerr.text);
                if (reterr) {
                        reterr->line = jerr.line > 0 ? (unsigned)jerr.line : 0;
                        reterr->column = jerr.column > 0 ? (unsigned)jerr.column : 0;
                }
                return r;
        }
        if (!json_is_object(root)) {
                json_decref(root);
                return hutch_error_set_pointer(reterr, EINVAL, "",
                                               "the configuration must be a JSON object");
        }
        json_object_foreach(root, key, v) {
                const ConfigOption *o = NULL;

                if (strcmp(key, "secrets") == 0) {
                        /* JSON only: a value never travels in argv. */
                        r = load_secrets(c, v, reterr);
                        if (r < 0)
                                break;
                        continue;
                }

                for (size_t i = 0; i < ELEMENTSOF(options); i++)
                        if (options[i].json && strcmp(options[i].json, key) == 0)
                                o = &options[i];
                if (!o) {
                        char pointer[HUTCH_ERROR_POINTER_MAX];

                        (void)snprintf(pointer, sizeof(pointer), "/%s", key);
                        r = hutch_error_set_pointer(reterr, EINVAL, pointer,
                                                    "unknown configuration key '%s'", key);
                        break;
                }
                r = json_apply(c, o, v, reterr);
                if (r < 0)
                        break;
        }
        json_decref(root);
        return r;
}

static int set_config_fd(ProxyConfig *c, const char *value, HutchError *reterr) {
        _cleanup_free_ char *text = NULL;
        _cleanup_close_ int fd = -EBADF;
        size_t len = 0, alloc = 0;
        int r;

        r = fd_arg(value, 3, "--config-fd", &fd, reterr);
        if (r < 0)
                return r;
        for (;;) {
                ssize_t n;

                if (alloc - len < 4096) {
                        char *grown;

                        if (alloc >= PROXY_CONFIG_JSON_MAX)
                                return hutch_error_set(reterr, EFBIG,
                                                       "the --config-fd document is larger than "
                                                       "%u bytes",
                                                       PROXY_CONFIG_JSON_MAX);
                        alloc = alloc ? alloc * 2 : 16384;
                        grown = realloc(text, alloc);
                        if (!grown)
                                return hutch_error_set(reterr, ENOMEM, "out of memory");
                        text = grown;
                }
                n = loop_read(fd, text + len, alloc - len);
                if (n < 0)
                        return hutch_error_set(reterr, (int)-n, "failed to read --config-fd %d: %s",
                                               fd, strerror((int)-n));
                if (n == 0)
                        break;
                len += (size_t)n;
        }
        fd = safe_close(fd);
        r = proxy_config_load_json(c, text, len, reterr);
        /* SECURITY: the document may hold secret values. */
        explicit_bzero(text, alloc);
        return r;
}

static void print_help(void) {
        printf("hutch-proxy: the egress proxy of a hutch sandbox (see docs/network.md)\n\n"
               "usage: hutch-proxy --listen-fd FD [OPTIONS]\n\n");
        for (size_t i = 0; i < ELEMENTSOF(options); i++) {
                char left[64];

                (void)snprintf(left, sizeof(left), "--%s%s%s", options[i].flag,
                               options[i].arg ? " " : "", options[i].arg ? options[i].arg : "");
                printf("  %-34s %s\n", left, options[i].help);
        }
        printf("  %-34s %s\n  %-34s %s\n", "-h, --help", "show this help", "--version",
               "show the version");
}

int proxy_config_parse_argv(ProxyConfig *c, int argc, char *argv[], HutchError *reterr) {
        enum { ARG_HELP = 'h', ARG_VERSION = 1, ARG_OPTION_BASE = 256 };
        struct option longopts[ELEMENTSOF(options) + 3];
        size_t n = 0;
        int opt, r;

        for (size_t i = 0; i < ELEMENTSOF(options); i++)
                longopts[n++] = (struct option){options[i].flag,
                                                options[i].type == OPT_BOOL ? no_argument
                                                                            : required_argument,
                                                NULL, ARG_OPTION_BASE + (int)i};
        longopts[n++] = (struct option){"help", no_argument, NULL, ARG_HELP};
        longopts[n++] = (struct option){"version", no_argument, NULL, ARG_VERSION};
        longopts[n] = (struct option){};

        optind = 0;
        opterr = 0;
        while ((opt = getopt_long(argc, argv, "+hv", longopts, NULL)) >= 0) {
                const ConfigOption *o;

                switch (opt) {
                case ARG_HELP:
                        print_help();
                        return 1;
                case ARG_VERSION:
                        printf("hutch-proxy %s\n", HUTCH_VERSION);
                        return 1;
                case 'v':
                        c->verbose = true;
                        continue;
                case '?':
                        if (optopt >= ARG_OPTION_BASE)
                                return hutch_error_set(reterr, EINVAL,
                                                       "option '--%s' needs a value",
                                                       options[optopt - ARG_OPTION_BASE].flag);
                        return hutch_error_set(reterr, EINVAL, "unknown option '%s'",
                                               argv[optind - 1]);
                default:
                        break;
                }
                if (opt < ARG_OPTION_BASE || opt >= ARG_OPTION_BASE + (int)ELEMENTSOF(options))
                        return hutch_error_set(reterr, EINVAL, "unknown option");
                o = &options[opt - ARG_OPTION_BASE];
                r = o->set(c, o->type == OPT_BOOL ? "true" : optarg, reterr);
                if (r < 0)
                        return r;
        }
        if (optind < argc)
                return hutch_error_set(reterr, EINVAL, "unexpected argument '%s'", argv[optind]);
        return 0;
}

int proxy_config_validate(const ProxyConfig *c, HutchError *reterr) {
        if (c->n_listen_fds == 0 && c->listen_socket < 0)
                return hutch_error_set(reterr, EINVAL,
                                       "no --listen-fd or --listen-fds-socket given");
        if (c->audit_path && c->audit_fd >= 0)
                return hutch_error_set(reterr, EINVAL,
                                       "--audit-log and --audit-fd cannot be used together");
        return 0;
}

const ResolveEntry *proxy_config_find_resolve(const ProxyConfig *c, const char *name) {
        for (size_t i = 0; i < c->n_resolve; i++)
                if (strcmp(c->resolve[i].name, name) == 0)
                        return &c->resolve[i];
        return NULL;
}

int proxy_config_load_policy(const char *text, size_t len, ProxyConfig **ret, HutchError *reterr) {
        static const char *const live[] = {"allow", "deny", "allow_private", "resolve"};
        _cleanup_(proxy_config_freep) ProxyConfig *c = NULL;
        json_error_t jerr;
        const char *key;
        json_t *root, *v;
        int r;

        root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!json_is_object(root)) {
                json_decref(root);
                return hutch_error_set(reterr, EINVAL, "invalid policy document");
        }
        json_object_foreach(root, key, v) {
                bool ok = false;

                for (size_t i = 0; i < ELEMENTSOF(live); i++)
                        ok = ok || strcmp(key, live[i]) == 0;
                if (!ok) {
                        r = hutch_error_set(reterr, EINVAL,
                                            "'%s' cannot change while the proxy serves", key);
                        json_decref(root);
                        return r;
                }
        }
        json_decref(root);
        c = proxy_config_new();
        if (!c)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        r = proxy_config_load_json(c, text, len, reterr);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(c);
        return 0;
}

void proxy_config_swap_policy(ProxyConfig *c, ProxyConfig *other) {
        Allowlist *al = c->allowlist;
        ResolveEntry *res = c->resolve;
        size_t n_res = c->n_resolve;

        c->allowlist = other->allowlist;
        c->resolve = other->resolve;
        c->n_resolve = other->n_resolve;
        other->allowlist = al;
        other->resolve = res;
        other->n_resolve = n_res;
}
