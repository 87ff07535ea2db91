/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* hutch-proxy's configuration, from command-line flags and/or a JSON
 * document read from a file descriptor (--config-fd). Both are decoded
 * through one table of options (proxy-config.c), so every flag has a JSON
 * key of the same meaning and vice versa; docs/network.md lists them.
 * Input is applied in order, lists append, scalars are replaced.
 *
 * A ProxyConfig owns its strings, arrays and allowlist; it does not own the
 * file descriptors it names (main() does). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hutch-error.h"
#include "macro.h"
#include "net/allowlist.h"
#include "secrets.h"

#define PROXY_LISTEN_FDS_MAX 64
#define PROXY_RESOLVE_MAX 1024
#define PROXY_RESOLVE_ADDRS_MAX 16
#define PROXY_NAMESERVERS_MAX 8
#define PROXY_CONFIG_JSON_MAX (1U << 20)

#define PROXY_DEFAULT_HEADER_TIMEOUT_MS 10000
#define PROXY_DEFAULT_IDLE_TIMEOUT_MS 300000
#define PROXY_DEFAULT_CONNECT_TIMEOUT_MS 10000
#define PROXY_DEFAULT_DNS_TIMEOUT_MS 5000
#define PROXY_DEFAULT_MAX_CONNECTIONS 512
#define PROXY_MAX_CONNECTIONS_LIMIT 65536

/* --resolve NAME:ADDR[,ADDR...]: the addresses NAME stands for, instead
 * of asking DNS. */
typedef struct ResolveEntry {
        char name[HOST_NAME_MAX_LEN + 1]; /* normalised */
        NetAddr addrs[PROXY_RESOLVE_ADDRS_MAX];
        size_t n_addrs;
} ResolveEntry;

typedef struct ProxyConfig {
        int listen_fds[PROXY_LISTEN_FDS_MAX];
        size_t n_listen_fds;
        Allowlist *allowlist;
        ResolveEntry *resolve;
        size_t n_resolve;
        char **nameservers; /* "ADDR" or "ADDR:PORT" / "[ADDR]:PORT"; NULL: /etc/resolv.conf */
        char *audit_path;   /* --audit-log FILE */
        int audit_fd;       /* --audit-fd N; -EBADF if none */
        int summary_fd;     /* --summary-fd N; -EBADF if none */
        int watch_fd;       /* --watch-fd N; -EBADF if none */
        int ready_fd;       /* --ready-fd N; -EBADF if none */
        char *sandbox_id;
        ProxySecret *secrets; /* JSON "secrets" only, never a flag */
        size_t n_secrets;
        char **upstream_ca; /* extra CA files for upstream TLS */
        int ca_out_fd;      /* --ca-out-fd N; -EBADF if none */
        int listen_socket;  /* --listen-fds-socket N: the listening sockets arrive here
                             * (one SCM_RIGHTS message) after the CA is written; -EBADF */
        uint64_t header_timeout_ms;
        uint64_t idle_timeout_ms;
        uint64_t connect_timeout_ms;
        uint64_t dns_timeout_ms;
        unsigned max_connections;
        bool verbose;
        /* --dns-transparent: a datagram socket among the listening fds is
         * the sandbox's resolver, and connections to a synthetic address
         * are for its name (src/lib/net/dns-table.h). */
        bool dns_transparent;
} ProxyConfig;

/* Returns a configuration with the defaults, or NULL on OOM. */
ProxyConfig *proxy_config_new(void);
ProxyConfig *proxy_config_free(ProxyConfig *c);
DEFINE_POINTER_CLEANUP(ProxyConfig, proxy_config_free)

/* Parses the command line (argv[0] is skipped). --config-fd documents are
 * read and applied where the flag appears. Returns 0; 1 if --help or
 * --version was handled (printed to stdout); or -errno with @reterr
 * naming the flag and value. */
int proxy_config_parse_argv(ProxyConfig *c, int argc, char *argv[], HutchError *reterr);

/* Applies a JSON document of @len bytes. Unknown keys and wrong types are
 * -EINVAL with @reterr->pointer set. */
int proxy_config_load_json(ProxyConfig *c, const char *text, size_t len, HutchError *reterr);

/* Checks the whole configuration after all input: at least one listening
 * fd, not both --audit-log and --audit-fd. Returns 0 or -EINVAL. */
int proxy_config_validate(const ProxyConfig *c, HutchError *reterr);

/* The policy of a running proxy changes (a running sandbox's `hutch
 * update`, docs/network.md "Changing the policy live"): @text is a JSON
 * document with only the keys "allow", "deny", "allow_private" and
 * "resolve", the whole new policy (not a difference). Parsed into a new
 * configuration in @ret, or -EINVAL with @reterr naming the key or value;
 * then proxy_config_swap_policy() puts it in place (and @other gets the
 * old one, to free). */
int proxy_config_load_policy(const char *text, size_t len, ProxyConfig **ret, HutchError *reterr);
void proxy_config_swap_policy(ProxyConfig *c, ProxyConfig *other);

/* Returns the --resolve entry for the normalised @name, or NULL. */
const ResolveEntry *proxy_config_find_resolve(const ProxyConfig *c, const char *name);
