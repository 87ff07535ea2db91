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

/* The command-line spelling of the JSON scalar @v (a string, an integer
 * or a boolean: its field's json_types), in @buf if it needs one. */
static const char *json_value_string(json_t *v, char *buf, size_t size) {
        if (json_is_integer(v)) {
                (void)snprintf(buf, size, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
                return buf;
        }
        if (json_is_boolean(v))
                return json_is_true(v) ? "true" : "false";
        return json_string_value(v);
}

/* The JSON types option @o's member takes (JsonTypeMask). */
static unsigned option_json_types(const ConfigOption *o) {
        switch (o->type) {
        case OPT_STRING:
                return JSON_TYPE_STRING;
        case OPT_INT:
                return JSON_TYPE_INTEGER;
        case OPT_BOOL:
                return JSON_TYPE_BOOLEAN;
        case OPT_STRING_LIST:
        case OPT_INT_LIST:
                return JSON_TYPE_ARRAY;
        }
        return 0;
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

/* Applies the member @v of the option in @f->data to the ProxyConfig
 * @dest: a scalar directly, an array element by element, each through the
 * option's setter as its command-line spelling. */
static int parse_option(const JsonFieldDef *f, json_t *v, void *dest, HutchError *reterr) {
        const ConfigOption *o = f->data;
        char num[32], pointer[32];
        HutchError e = {};
        size_t i;
        json_t *item;
        int r;

        if (o->type != OPT_STRING_LIST && o->type != OPT_INT_LIST) {
                r = o->set(dest, json_value_string(v, num, sizeof(num)), &e);
                if (r < 0)
                        return hutch_error_set(reterr, -r, "%s", e.msg);
                return 0;
        }
        json_array_foreach(v, i, item) {
                (void)snprintf(pointer, sizeof(pointer), "/%zu", i);
                if ((o->type == OPT_STRING_LIST && !json_is_string(item)) ||
                    (o->type == OPT_INT_LIST && !json_is_integer(item)))
                        return hutch_error_set_pointer(reterr, EINVAL, pointer, "'%s' must be %s",
                                                       o->json, json_type_expected(o));
                r = o->set(dest, json_value_string(item, num, sizeof(num)), &e);
                if (r < 0)
                        return hutch_error_set_pointer(reterr, -r, pointer, "%s", e.msg);
        }
        return 0;
}

static bool printable_token(const char *s) {
        for (; *s; s++)
                if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f)
                        return false;
        return true;
}

/* One element of "secrets" as decoded: its strings (the value apart) and
 * its lists, borrowed, which are read once the strings are checked. */
typedef struct SecretDecode {
        ProxySecret s;
        char *value;
        json_t *hosts;
        json_t *methods;
} SecretDecode;

/* A string member of a secret: non-empty, without NUL, copied. */
static int parse_secret_string(const JsonFieldDef *f, json_t *v, void *dest, HutchError *reterr) {
        char **field = (char **)(void *)((char *)dest + f->offset);

        if (json_string_length(v) == 0)
                return hutch_error_set(reterr, EINVAL,
                                       "'%s' of a secret must be a non-empty string", f->name);
        if (strlen(json_string_value(v)) != json_string_length(v))
                return hutch_error_set(reterr, EINVAL, "'%s' of a secret must not contain NUL",
                                       f->name);
        *field = strdup(json_string_value(v));
        if (!*field)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        return 0;
}

static int parse_secret_list(const JsonFieldDef *f, json_t *v, void *dest, HutchError *reterr) {
        *(json_t **)(void *)((char *)dest + f->offset) = v;
        return 0;
}

#define SECRET_STRING(name, member, mandatory)                                                     \
        {                                                                                          \
                name, JSON_FIELD_CUSTOM, offsetof(SecretDecode, member), mandatory,                \
                        parse_secret_string, JSON_TYPE_STRING                                      \
        }

/* docs/network.md's members of a secret, in the order they are checked.
 * "hosts" takes any type here: that it is a non-empty array is checked
 * with the secret's name, once the strings are (secret_load_hosts()). */
static const JsonFieldDef secret_fields[] = {
        SECRET_STRING("name", s.name, true),
        SECRET_STRING("placeholder", s.placeholder, true),
        SECRET_STRING("value", value, true),
        SECRET_STRING("header", s.header, false),
        SECRET_STRING("query", s.query, false),
        SECRET_STRING("path_prefix", s.path_prefix, false),
        {"hosts", JSON_FIELD_CUSTOM, offsetof(SecretDecode, hosts), false, parse_secret_list,
         JSON_TYPE_OBJECT | JSON_TYPE_ARRAY | JSON_TYPE_STRING | JSON_TYPE_INTEGER |
                 JSON_TYPE_REAL | JSON_TYPE_BOOLEAN | JSON_TYPE_NULL},
        {"methods", JSON_FIELD_CUSTOM, offsetof(SecretDecode, methods), false, parse_secret_list,
         JSON_TYPE_ARRAY},
};

/* The decoder's refusals, in the words a secret's errors have always had. */
static int secret_refusal(JsonFieldsRefusal what, const char *key, const JsonFieldDef *f, json_t *v,
                          const void *userdata, HutchError *reterr) {
        switch (what) {
        case JSON_FIELDS_UNKNOWN:
                return hutch_error_set(reterr, EINVAL, "unknown key '%s' in a secret", key);
        case JSON_FIELDS_WRONG_TYPE:
        case JSON_FIELDS_MISSING:
                if (f->parse == parse_secret_list)
                        return hutch_error_set(reterr, EINVAL, "'%s' must be a non-empty array",
                                               f->name);
                return hutch_error_set(reterr, EINVAL,
                                       "'%s' of a secret must be a non-empty string", f->name);
        }
        return -EINVAL;
}

/* Checks the strings of secret @s (its @value apart); errors point at the
 * secret. */
static int secret_check_strings(const ProxySecret *s, const char *value, HutchError *reterr) {
        /* SECURITY: a value is spliced into header lines; a placeholder is
         * searched for in them. Both must be printable without spaces, and
         * of one length so a body keeps its Content-Length. */
        if (!printable_token(value) || !printable_token(s->placeholder))
                return hutch_error_set(reterr, EINVAL,
                                       "secret '%s': the value and the placeholder must be "
                                       "printable ASCII without spaces",
                                       s->name);
        if (strlen(value) != s->placeholder_len || strcmp(value, s->placeholder) == 0)
                return hutch_error_set(reterr, EINVAL,
                                       "secret '%s': the placeholder must differ from the "
                                       "value and have the same length",
                                       s->name);
        if (s->placeholder_len > PROXY_SECRET_VALUE_MAX)
                return hutch_error_set(reterr, E2BIG, "secret '%s': longer than %d bytes", s->name,
                                       PROXY_SECRET_VALUE_MAX);
        if (s->header && !printable_token(s->header))
                return hutch_error_set(reterr, EINVAL, "secret '%s': invalid header name", s->name);
        /* SECURITY: the query lane is matched as "NAME=" at a parameter's
         * start: a name holding '=', '&' or '#' could split a parameter. */
        if (s->query && (!printable_token(s->query) || strpbrk(s->query, "=&#?%")))
                return hutch_error_set(reterr, EINVAL, "secret '%s': invalid query parameter name",
                                       s->name);
        if (s->path_prefix && s->path_prefix[0] != '/')
                return hutch_error_set(reterr, EINVAL,
                                       "secret '%s': path_prefix must start with '/'", s->name);
        return 0;
}

/* The secret's "hosts" @v (NULL when absent): its own list, and allowed
 * like --allow. */
static int secret_load_hosts(ProxyConfig *c, ProxySecret *s, json_t *v, HutchError *reterr) {
        char pointer[HUTCH_ERROR_POINTER_MAX];
        json_t *item;
        size_t i;
        int r;

        if (!json_is_array(v) || json_array_size(v) == 0)
                return hutch_error_set(reterr, EINVAL,
                                       "secret '%s': 'hosts' must be a non-empty array", s->name);
        s->hosts = allowlist_new();
        if (!s->hosts)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        json_array_foreach(v, i, item) {
                HutchError e = {};

                (void)snprintf(pointer, sizeof(pointer), "/hosts/%zu", i);
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

/* The secret's optional "methods" array @v (NULL: any method). */
static int secret_load_methods(ProxySecret *s, json_t *v, HutchError *reterr) {
        json_t *item;
        size_t i;

        if (!v)
                return 0;
        if (json_array_size(v) == 0)
                return hutch_error_set_pointer(reterr, EINVAL, "/methods",
                                               "'methods' must be a non-empty array");
        json_array_foreach(v, i, item) {
                if (!json_is_string(item) || !printable_token(json_string_value(item)) ||
                    json_string_length(item) == 0)
                        return hutch_error_set_pointer(reterr, EINVAL, "/methods",
                                                       "'methods' must hold method names");
                if (strv_extend(&s->methods, json_string_value(item)) < 0)
                        return hutch_error_set(reterr, ENOMEM, "out of memory");
        }
        return 0;
}

/* Adds @s to @c, taking it over on success; a placeholder used twice is
 * refused. */
static int secret_append(ProxyConfig *c, ProxySecret *s, HutchError *reterr) {
        ProxySecret *grown;

        for (size_t i = 0; i < c->n_secrets; i++)
                if (strcmp(c->secrets[i].placeholder, s->placeholder) == 0)
                        return hutch_error_set(reterr, EINVAL,
                                               "secret '%s': the placeholder is used twice",
                                               s->name);
        grown = reallocarray(c->secrets, c->n_secrets + 1, sizeof(*grown));
        if (!grown)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        grown[c->n_secrets++] = *s;
        c->secrets = grown;
        *s = (ProxySecret){};
        return 0;
}

/* One element @obj of "secrets" (docs/network.md), added to @c; errors
 * point below the element. */
static int load_secret(ProxyConfig *c, json_t *obj, HutchError *reterr) {
        /* In the table's order: unknown keys first, then the strings,
         * which the checks of the lists name. */
        static const JsonFieldsOptions decode_options = {.flags = JSON_FIELDS_TABLE_ORDER,
                                                         .message = secret_refusal};
        SecretDecode d = {};
        int r;

        if (!json_is_object(obj))
                return hutch_error_set(reterr, EINVAL, "a secret must be an object");
        if (c->n_secrets >= PROXY_SECRETS_MAX)
                return hutch_error_set(reterr, E2BIG, "too many secrets (at most %d)",
                                       PROXY_SECRETS_MAX);
        r = json_fields_decode_with(obj, secret_fields, ELEMENTSOF(secret_fields), &d,
                                    &decode_options, reterr);
        if (r >= 0) {
                d.s.placeholder_len = strlen(d.s.placeholder);
                r = secret_check_strings(&d.s, d.value, reterr);
        }
        if (r >= 0) {
                r = proxy_secret_set_value(&d.s, d.value, strlen(d.value));
                if (r < 0)
                        r = hutch_error_set(reterr, -r, "out of memory");
        }
        if (r >= 0)
                r = secret_load_hosts(c, &d.s, d.hosts, reterr);
        if (r >= 0)
                r = secret_load_methods(&d.s, d.methods, reterr);
        if (r >= 0)
                r = secret_append(c, &d.s, reterr);
        /* SECURITY: the value's copy outside its guarded mapping. */
        if (d.value)
                explicit_bzero(d.value, strlen(d.value));
        free(d.value);
        proxy_secret_done(&d.s);
        return r;
}

/* "secrets": JSON only, since a value never travels in argv. */
static int parse_secrets(const JsonFieldDef *f, json_t *v, void *dest, HutchError *reterr) {
        json_t *item;
        size_t i;
        int r;

        json_array_foreach(v, i, item) {
                r = load_secret(dest, item, reterr);
                if (r < 0) {
                        json_error_prefix_index(reterr, i);
                        return r;
                }
        }
        return 0;
}

/* The decoder's refusals, in the words the configuration's errors have
 * always had. */
static int config_refusal(JsonFieldsRefusal what, const char *key, const JsonFieldDef *f, json_t *v,
                          const void *userdata, HutchError *reterr) {
        switch (what) {
        case JSON_FIELDS_UNKNOWN:
                return hutch_error_set(reterr, EINVAL, "unknown configuration key '%s'", key);
        case JSON_FIELDS_WRONG_TYPE:
        case JSON_FIELDS_MISSING:
                if (!f->data)
                        return hutch_error_set(reterr, EINVAL, "'%s' must be an array of objects",
                                               f->name);
                return hutch_error_set(reterr, EINVAL, "'%s' must be %s", f->name,
                                       json_type_expected(f->data));
        }
        return -EINVAL;
}

/* Fills @fields (room for ELEMENTSOF(options) + 1) with the configuration
 * document's members: "secrets" and each option's JSON name, so that the
 * document and the command line share the options' table. Returns their
 * number. */
static size_t config_fields(JsonFieldDef *fields) {
        size_t n = 0;

        fields[n++] = (JsonFieldDef){.name = "secrets",
                                     .type = JSON_FIELD_CUSTOM,
                                     .parse = parse_secrets,
                                     .json_types = JSON_TYPE_ARRAY};
        for (size_t i = 0; i < ELEMENTSOF(options); i++)
                if (options[i].json)
                        fields[n++] = (JsonFieldDef){.name = options[i].json,
                                                     .type = JSON_FIELD_CUSTOM,
                                                     .parse = parse_option,
                                                     .json_types = option_json_types(&options[i]),
                                                     .data = &options[i]};
        return n;
}

int proxy_config_load_json(ProxyConfig *c, const char *text, size_t len, HutchError *reterr) {
        static const JsonFieldsOptions decode_options = {.message = config_refusal};
        JsonFieldDef fields[ELEMENTSOF(options) + 1];
        json_error_t jerr;
        json_t *root;
        int r;

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
        /* In the document's order, each member applied as it is met. */
        r = json_fields_decode_with(root, fields, config_fields(fields), c, &decode_options,
                                    reterr);
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
