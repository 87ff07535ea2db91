/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "tunnel.h"

/* A larger pipe means fewer system calls. Falls back to the default pipe
 * size if the kernel refuses (fs.pipe-max-size, per-user pipe limits). */
#define TUNNEL_PIPE_SIZE (1024 * 1024)
/* splice() rounds per callback before yielding to other connections. */
#define TUNNEL_ROUNDS 16

void tunnel_init(Tunnel *t) {
        *t = (Tunnel){};
        for (size_t i = 0; i < ELEMENTSOF(t->pumps); i++)
                t->pumps[i].pipe_r = t->pumps[i].pipe_w = -EBADF;
}

static void pump_release(TunnelPump *pm) {
        if (pm->src_ev)
                event_free(pm->src_ev);
        if (pm->dst_ev)
                event_free(pm->dst_ev);
        pm->src_ev = pm->dst_ev = NULL;
        pm->pipe_r = safe_close(pm->pipe_r);
        pm->pipe_w = safe_close(pm->pipe_w);
}

void tunnel_release(Tunnel *t) {
        for (size_t i = 0; i < ELEMENTSOF(t->pumps); i++)
                pump_release(&t->pumps[i]);
}

/* Tunnel events are edge-triggered and stay registered for the tunnel's
 * life: pump_run() always goes on until a side would block (EAGAIN), so
 * the next edge wakes it, and no epoll_ctl() is spent per wait. */
static void pump_stop(TunnelPump *pm) {
        if (pm->src_ev)
                (void)event_del(pm->src_ev);
        if (pm->dst_ev)
                (void)event_del(pm->dst_ev);
}

static void tunnel_end(Tunnel *t, int error) {
        if (t->ended)
                return;
        t->ended = true;
        t->end(t->userdata, error);
}

/* Moves bytes src -> pipe -> dst until one side would block. */
static void pump_run(TunnelPump *pm) {
        Tunnel *t = pm->tunnel;

        for (unsigned round = 0; round < TUNNEL_ROUNDS; round++) {
                ssize_t n;

                if (pm->pending > 0) {
                        n = splice(pm->pipe_r, NULL, pm->dst, NULL, pm->pending,
                                   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n < 0 && errno == EAGAIN)
                                return; /* the next writable edge resumes */
                        if (n <= 0) {
                                tunnel_end(t, n < 0 ? errno : EPIPE);
                                return;
                        }
                        pm->pending -= (size_t)n;
                        continue;
                }
                if (pm->src_eof) {
                        /* Pass the half-close on; the other direction goes on. */
                        (void)shutdown(pm->dst, SHUT_WR);
                        pm->done = true;
                        pump_stop(pm);
                        if (t->pumps[0].done && t->pumps[1].done)
                                tunnel_end(t, 0);
                        return;
                }
                /* The pipe is empty here, so EAGAIN means the socket is. */
                n = splice(pm->src, NULL, pm->pipe_w, NULL, pm->pipe_size,
                           SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                if (n == 0) {
                        pm->src_eof = true;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return; /* the next readable edge resumes */
                if (n < 0) {
                        tunnel_end(t, errno);
                        return;
                }
                pm->pending += (size_t)n;
                *pm->bytes += (uint64_t)n;
        }
        /* Out of rounds with neither side blocked, so no edge will come:
         * yield to other connections and resume from the loop. */
        event_active(pm->src_ev, EV_READ, 0);
}

static void pump_cb(evutil_socket_t fd, short what, void *arg) {
        pump_run(arg);
}

static int pump_setup(Tunnel *t, TunnelPump *pm, struct event_base *base, int src, int dst,
                      uint64_t *bytes) {
        int fds[2], size;

        *pm = (TunnelPump){.tunnel = t,
                           .src = src,
                           .dst = dst,
                           .pipe_r = -EBADF,
                           .pipe_w = -EBADF,
                           .bytes = bytes};
        if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) < 0)
                return negative_errno();
        pm->pipe_r = fds[0];
        pm->pipe_w = fds[1];
        (void)fcntl(pm->pipe_w, F_SETPIPE_SZ, TUNNEL_PIPE_SIZE);
        size = fcntl(pm->pipe_w, F_GETPIPE_SZ);
        if (size <= 0)
                return negative_errno();
        pm->pipe_size = (size_t)size;
        pm->src_ev = event_new(base, src, EV_READ | EV_PERSIST | EV_ET, pump_cb, pm);
        pm->dst_ev = event_new(base, dst, EV_WRITE | EV_PERSIST | EV_ET, pump_cb, pm);
        if (!pm->src_ev || !pm->dst_ev)
                return -ENOMEM;
        if (event_add(pm->src_ev, NULL) < 0 || event_add(pm->dst_ev, NULL) < 0)
                return -ENOMEM;
        return 0;
}

int tunnel_start(Tunnel *t, struct event_base *base, int a, int b, const void *early,
                 size_t n_early, uint64_t *bytes_ab, uint64_t *bytes_ba,
                 void (*end)(void *userdata, int error), void *userdata) {
        int r;

        t->end = end;
        t->userdata = userdata;
        t->ended = false;
        r = pump_setup(t, &t->pumps[0], base, a, b, bytes_ab);
        if (r >= 0)
                r = pump_setup(t, &t->pumps[1], base, b, a, bytes_ba);
        if (r < 0)
                return r;
        if (n_early > 0) {
                ssize_t w = write(t->pumps[0].pipe_w, early, n_early);

                if (w < 0)
                        return negative_errno();
                if ((size_t)w != n_early)
                        return -ENOBUFS;
                t->pumps[0].pending = n_early;
                *bytes_ab += n_early;
        }
        pump_run(&t->pumps[0]);
        if (!t->ended)
                pump_run(&t->pumps[1]);
        return 0;
}
