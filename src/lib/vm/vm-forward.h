/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The published ports of a persistent microVM sandbox, and `hutch
 * serve`'s preview connections into it (docs/vm.md "Published ports and
 * terminals"): a forward over the guest agent's port.
 *
 * The keeper makes each listener in the host's network namespace before
 * the VM starts (port_forwards_bind(): a port in use is refused, nothing
 * is left), and accepts on it in its own loop; each connection becomes a
 * session of the VM's mux (vm_session_connect(): the agent connects to
 * 127.0.0.1:PORT in the guest and relays the bytes over the connection's
 * channel, flow-controlled as a command's streams are). No process of its
 * own: nothing outlives the keeper, and a listener closes with the VM.
 *
 * SECURITY: the guest gets no NIC for this (it works with --network none)
 * and never connects out: the agent only connects to the guest's own
 * loopback, to the port the host names, for a connection the host
 * accepted on a listener it was asked for. At most VM_FORWARD_MAX_CONNS
 * connections at once (half the agent's channels: the commands keep the
 * rest); more are closed as they come. Private to src/lib/sandbox. */

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>

#include "sandbox/port-forward.h"
#include "vm/vm-session.h"

#define VM_FORWARD_MAX_CONNS (AGENT_MAX_EXECS / 2)
/* How long a preview connection waits for the agent's answer (the
 * keeper's loop waits with it). */
#define VM_FORWARD_CONNECT_TIMEOUT_MS 5000
/* What vm_forwards_poll_fill() fills at most. */
#define VM_FORWARD_NPOLL (POLICY_MAX_PORTS + VM_SESSION_NPOLL * VM_FORWARD_MAX_CONNS)

typedef struct VmConn VmConn;

typedef struct VmForwards {
        PortForwards ports; /* the listeners (and the keeper's "ports" ops) */
        VmMux *mux;         /* borrowed; NULL until the VM is up */
        VmConn *conns[VM_FORWARD_MAX_CONNS];
        size_t n_conns;
        size_t n_listen_polled, n_conns_polled;
} VmForwards;

/* With the ports' connect hook set to vm_forwards_connect(). */
void vm_forwards_init(VmForwards *f);
/* Ends every connection and closes every listener. Idempotent. */
void vm_forwards_done(VmForwards *f);
/* The VM is up (or gone: NULL, and every connection ends). */
void vm_forwards_attach(VmForwards *f, VmMux *m);

/* Drops the connections that ended; ends those whose both sides are
 * done. */
void vm_forwards_step(VmForwards *f);
size_t vm_forwards_poll_fill(VmForwards *f, struct pollfd *pfd);
void vm_forwards_poll_handle(VmForwards *f, const struct pollfd *pfd);
