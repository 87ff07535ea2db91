/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Starting and stopping hutch-proxy for one run in network mode allow
 * (private to src/lib/sandbox; hutch-oci uses proxy_binary_find() and
 * starts its own daemon, src/oci/oci-net.c). The proxy is its own binary in the host's
 * network namespace (docs/architecture.md §2, §5; docs/network.md): it accepts on the listening
 * sockets init created inside the sandbox and is the only process that
 * reaches the network. It exits when the supervisor closes its watch pipe
 * (or dies), and writes a summary line with the denials on the way out. */

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hutch-error.h"
#include "policy/policy.h"

typedef struct ProxyProcess {
        pid_t pid;         /* 0 when not running */
        int pidfd;         /* owned */
        int watch_fd;      /* write end: closing it stops the proxy */
        int summary_fd;    /* read end of the summary pipe */
        int listen_socket; /* where the listening sockets go (proxy_hand_sockets()) */
} ProxyProcess;

#define PROXY_PROCESS_NULL                                                                         \
        ((ProxyProcess){.pid = 0,                                                                  \
                        .pidfd = -EBADF,                                                           \
                        .watch_fd = -EBADF,                                                        \
                        .summary_fd = -EBADF,                                                      \
                        .listen_socket = -EBADF})

/* A listening socket on the loopback address of @family (AF_INET or
 * AF_INET6, v6-only) at SANDBOX_PROXY_PORT, in the calling thread's
 * network namespace: where a sandbox's clients find hutch-proxy (made
 * by the sandbox's init, and by hutch-oci's container init). 0 or
 * -errno. */
int proxy_listen_loopback(int family, int *ret_fd);

/* Finds the hutch-proxy binary: $HUTCH_PROXY_PATH, else
 * ../libexec/hutch/hutch-proxy from the running hutch (installed), else next
 * to it, else ../proxy/hutch-proxy (the build tree). Returns 0 and a
 * new string, or -ENOENT with @reterr saying where it looked. */
int proxy_binary_find(char **ret, HutchError *reterr);

/* Appends to @argv the flags of hutch-proxy that carry @p's network
 * policy: --allow (with the secrets' hosts), --deny, --allow-private,
 * --resolve, --audit-log, --upstream-ca, and --dns-transparent with
 * transparent DNS. 0 or -ENOMEM. */
int proxy_argv_policy(char ***argv, const Policy *p);

/* Starts @binary for @p before the sandbox exists, so that its start-up
 * (OpenSSL's in particular) overlaps the sandbox's; the listening sockets
 * follow with proxy_hand_sockets(). With secrets, @config_fd is the
 * --config-fd document (secret_set_config_memfd()) and @ca_out_fd the
 * write end of the pipe the proxy writes its CA certificate to
 * (--ca-out-fd), before it waits for the sockets; both borrowed, else
 * -EBADF. Returns 0 or -errno with @reterr filled. */
int proxy_spawn(const char *binary, const Policy *p, const char *sandbox_id, int config_fd,
                int ca_out_fd, ProxyProcess *ret, HutchError *reterr);

/* Reads the proxy's CA from @ca_fd (bounded in size and time) into a
 * sealed memfd, with its OpenSSL subject hash (0 when the proxy sent
 * none). Used by the sandbox's supervisor and by hutch-oci. */
int sandbox_ca_receive(int ca_fd, int *ret_ca, uint64_t *ret_hash, HutchError *reterr);

/* Sends the listening sockets @fds (borrowed) to the proxy. 0 or -errno. */
int proxy_hand_sockets(ProxyProcess *pp, const int *fds, size_t n_fds);

/* Gives the running proxy @p's allowlist, deny list, private ranges and
 * resolve entries (a running sandbox's `hutch update`), over the socket
 * the listening sockets came by. Returns once the proxy confirmed (then
 * new connections use them and open ones they refuse are closed), or
 * -errno with @reterr saying why nothing changed. */
int proxy_set_policy(ProxyProcess *pp, const Policy *p, HutchError *reterr);

/* Stops the proxy (closes its watch pipe, waits up to a few seconds, then
 * kills it), and returns the "denied" array of its summary as compact JSON
 * text in @ret_denied ("[]" when it wrote none). Returns 0 or -errno; the
 * process is reaped and every fd closed in any case. */
int proxy_stop(ProxyProcess *pp, char **ret_denied);
