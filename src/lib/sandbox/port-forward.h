/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Published ports (-p, docs/network.md "Published ports"): TCP on a host
 * address forwarded to 127.0.0.1:PORT inside a sandbox's network
 * namespace.
 *
 * The owner (the supervisor of `hutch run`, or the keeper of a persistent
 * sandbox) makes each listening socket in its own, the host's, network
 * namespace (port_forwards_bind()), so that a port in use or an address
 * the machine does not have is refused before the sandbox starts. Once the
 * sandbox's init runs, port_forwards_start() forks one forwarder process
 * per port. SECURITY: the forwarder enters the sandbox's user and network
 * namespaces (setns() into the namespace files port_forwards_open_ns()
 * opened while init was still the caller's to open, before it made itself
 * non-dumpable), drops every capability and sets
 * no_new_privs; it keeps the listener it inherited (a socket stays in the
 * namespace it was made in), and each connection it accepts gets a new
 * socket made in the sandbox's namespace, connected to 127.0.0.1:PORT
 * there. It never listens on anything but the asked address, opens nothing
 * outbound from the sandbox (so it works with --network none and adds no
 * way out), and takes at most PORT_FORWARD_MAX_CONNS connections at once
 * (more are closed as they come). Bytes move with splice() through a pipe
 * in each direction; a half-close is passed on with shutdown(SHUT_WR).
 *
 * No forwarder outlives its owner: it has PR_SET_PDEATHSIG SIGKILL, and
 * port_forwards_done() kills and reaps each one. */

#include <stdint.h>
#include <sys/types.h>

#include "hutch-error.h"
#include "policy/policy.h"

#define PORT_FORWARD_MAX_CONNS 256

typedef struct PortForward {
        PortSpec spec; /* host_port: the one bound (the chosen one for 0) */
        int listen_fd; /* until the forwarder has it, else -EBADF */
        pid_t pid;     /* the forwarder, or 0 */
        int pidfd;
} PortForward;

typedef struct PortForwards {
        PortForward items[POLICY_MAX_PORTS];
        size_t n;
        int userns_fd, netns_fd; /* the sandbox's, or -EBADF */
        /* Set by an owner that relays the connections itself (a VM's
         * keeper, vm-forward.h): port_forwards_start() forks nothing, and
         * port_forwards_connect() is this. */
        int (*connect)(void *userdata, uint16_t port, int *ret_fd);
        void *userdata;
} PortForwards;

void port_forwards_init(PortForwards *t);
/* Kills and reaps every forwarder and closes every listener. Idempotent. */
void port_forwards_done(PortForwards *t);

/* Makes the listener of @spec in the caller's network namespace and
 * appends it (not started). -EADDRINUSE ("127.0.0.1:8080 is already in
 * use"), -EADDRNOTAVAIL (an address the machine does not have), -EEXIST
 * for a sandbox port already there, -E2BIG when full, another -errno; each
 * with @reterr. */
int port_forwards_add(PortForwards *t, const PortSpec *spec, HutchError *reterr);
/* port_forwards_add() for every entry of @specs (a policy's "ports"); on
 * failure the ones made before are closed again. */
int port_forwards_bind(PortForwards *t, char *const *specs, HutchError *reterr);
/* Opens the user and network namespaces of the sandbox's init @pid (the
 * caller's child, not reaped, still dumpable: before SYNC_OP_GO). 0 or
 * -errno. */
int port_forwards_open_ns(PortForwards *t, pid_t pid);
/* Forks the forwarder of every entry not started yet, into the namespaces
 * port_forwards_open_ns() opened, and waits until each is in them. 0, or
 * -errno with @reterr (the entry that failed is dropped; -EBADF when no
 * namespaces were opened). */
int port_forwards_start(PortForwards *t, HutchError *reterr);
/* A new TCP socket made in the sandbox's network namespace (by a short-
 * lived child that enters it as a forwarder does and passes the socket
 * back), connected to 127.0.0.1:@port there: for `hutch serve`'s preview
 * route, which needs no published port. Non-blocking, connected.
 * -ECONNREFUSED when nothing listens there, -ETIMEDOUT, -EBADF
 * when no namespaces were opened, another -errno. */
int port_forwards_connect(const PortForwards *t, uint16_t port, int *ret_fd);
/* Stops the forwarder of sandbox port @port and closes its listener (open
 * connections end). 1 when there was one, 0 when not. */
int port_forwards_remove(PortForwards *t, uint16_t port);
