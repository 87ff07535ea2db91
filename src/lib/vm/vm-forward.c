/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Published ports and preview connections of a VM sandbox
 * (vm-forward.h). */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "sandbox/supervise.h"
#include "time-util.h"
#include "vm/vm-forward.h"

struct VmConn {
        int fd;       /* the host side: an accepted socket, or a preview's socketpair end */
        bool closing; /* told the agent to close it */
        Supervision sup;
        VmSession ss;
};

static VmConn *vm_conn_free(VmForwards *f, VmConn *c) {
        if (!c)
                return NULL;
        if (f->mux)
                vm_session_release(f->mux, &c->ss);
        c->fd = safe_close(c->fd);
        free(c);
        return NULL;
}

/* A connection of @fd (taken) to @port in the guest. -EBUSY when there
 * are VM_FORWARD_MAX_CONNS, or no channel is free; -ENOTCONN before the
 * VM is up. */
static int conn_open(VmForwards *f, int fd, uint16_t port) {
        VmConn *c;
        int r;

        if (!f->mux || f->mux->gone || f->mux->error.errnum) {
                (void)safe_close(fd);
                return -ENOTCONN;
        }
        if (f->n_conns >= VM_FORWARD_MAX_CONNS) {
                (void)safe_close(fd);
                return -EBUSY;
        }
        c = calloc(1, sizeof(VmConn));
        if (!c) {
                (void)safe_close(fd);
                return -ENOMEM;
        }
        c->fd = fd;
        /* Both directions whole: no output limit. */
        c->sup.relays[0] = (Relay){.in_fd = -EBADF, .out_fd = fd};
        c->sup.relays[1] = (Relay){.in_fd = -EBADF, .out_fd = -EBADF};
        c->ss = (VmSession){.s = &c->sup, .in_fd = fd, .chan = -1};
        r = vm_session_connect(f->mux, &c->ss, port);
        if (r < 0) {
                (void)vm_conn_free(f, c);
                return r;
        }
        f->conns[f->n_conns++] = c;
        return 0;
}

/* The agent's answer to the last connection's CONNECT: frames move (to
 * their sessions, which only buffer them) until it came, within
 * VM_FORWARD_CONNECT_TIMEOUT_MS. 0, -ECONNREFUSED or the agent's other
 * error, -ETIMEDOUT, -EPIPE when the VM went. */
static int connect_wait(VmForwards *f, VmConn *c) {
        uint64_t deadline = time_monotonic_ms() + VM_FORWARD_CONNECT_TIMEOUT_MS;

        for (;;) {
                uint64_t now = time_monotonic_ms();
                struct pollfd p;

                if (c->ss.started)
                        return 0;
                if (c->ss.failed)
                        return -(c->ss.error.errnum ?: EIO);
                if (f->mux->gone || f->mux->error.errnum)
                        return -EPIPE;
                if (now >= deadline)
                        return -ETIMEDOUT;
                vm_mux_poll_fill(f->mux, &p);
                if (poll(&p, 1, (int)(deadline - now)) < 0 && errno != EINTR)
                        return -errno;
                vm_mux_poll_handle(f->mux, &p);
        }
}

/* The preview route's connection: its answer is waited for, so that
 * "nothing listens there" is said as with the namespace backend. */
static int forwards_connect(void *userdata, uint16_t port, int *ret_fd) {
        VmForwards *f = userdata;
        int sv[2], r;

        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        r = conn_open(f, sv[1], port);
        if (r >= 0)
                r = connect_wait(f, f->conns[f->n_conns - 1]);
        if (r < 0) {
                /* Its connection (if any) ends by itself: this side is
                 * closed. */
                (void)close(sv[0]);
                return r;
        }
        *ret_fd = sv[0];
        return 0;
}

void vm_forwards_init(VmForwards *f) {
        *f = (VmForwards){};
        port_forwards_init(&f->ports);
        f->ports.connect = forwards_connect;
        f->ports.userdata = f;
}

static void conns_drop(VmForwards *f) {
        while (f->n_conns > 0) {
                f->n_conns--;
                f->conns[f->n_conns] = vm_conn_free(f, f->conns[f->n_conns]);
        }
}

void vm_forwards_done(VmForwards *f) {
        conns_drop(f);
        port_forwards_done(&f->ports);
}

void vm_forwards_attach(VmForwards *f, VmMux *m) {
        if (!m)
                conns_drop(f);
        f->mux = m;
}

void vm_forwards_step(VmForwards *f) {
        if (!f->mux)
                return;
        for (size_t i = 0; i < f->n_conns;) {
                VmConn *c = f->conns[i];

                /* The host side is gone both ways: the guest side ends. */
                if (!c->closing && c->ss.started && c->ss.stdin_eof &&
                    c->sup.relays[0].out_fd < 0) {
                        c->closing = true;
                        vm_session_signal(f->mux, &c->ss, SIGKILL);
                }
                if (!vm_session_ended(f->mux, &c->ss)) {
                        i++;
                        continue;
                }
                (void)vm_conn_free(f, c);
                f->conns[i] = f->conns[--f->n_conns];
        }
}

size_t vm_forwards_poll_fill(VmForwards *f, struct pollfd *pfd) {
        size_t n = 0;

        f->n_listen_polled = f->ports.n;
        for (size_t i = 0; i < f->ports.n; i++)
                pfd[n++] = (struct pollfd){.fd = f->mux ? f->ports.items[i].listen_fd : -1,
                                           .events = POLLIN};
        f->n_conns_polled = f->mux ? f->n_conns : 0;
        for (size_t i = 0; i < f->n_conns_polled; i++, n += VM_SESSION_NPOLL)
                vm_session_poll_fill(f->mux, &f->conns[i]->ss, pfd + n);
        return n;
}

void vm_forwards_poll_handle(VmForwards *f, const struct pollfd *pfd) {
        size_t n_conns = f->n_conns_polled;

        /* The sessions first: a connection accepted below was not polled. */
        for (size_t i = 0; i < n_conns; i++)
                vm_session_poll_handle(f->mux, &f->conns[i]->ss,
                                       pfd + f->n_listen_polled + i * VM_SESSION_NPOLL);
        for (size_t i = 0; i < f->n_listen_polled && i < f->ports.n; i++) {
                int fd;

                if (!(pfd[i].revents & POLLIN))
                        continue;
                fd = accept4(f->ports.items[i].listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                /* Too many, or no channel: closed as it came. */
                if (fd >= 0)
                        (void)conn_open(f, fd, f->ports.items[i].spec.port);
        }
}
