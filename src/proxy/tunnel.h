/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* An opaque tunnel between two connected sockets (a CONNECT that is not
 * intercepted, or a transparent connection): bytes move socket -> pipe ->
 * socket with splice(2), both ways, and never pass through user space.
 * A half-close is passed on; the tunnel ends when both directions are
 * done or either fails.
 *
 * The Tunnel lives inside its owner (proxy-server.c's Conn) and borrows
 * the two fds: the owner releases the tunnel (tunnel_release()) before it
 * closes them, since an event freed on an already closed fd makes epoll
 * complain. The owner's end callback runs at most once; the tunnel touches
 * nothing of itself after it, so the callback may release it. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>

typedef struct Tunnel Tunnel;

/* One direction of a tunnel: src -> pipe -> dst. */
typedef struct TunnelPump {
        Tunnel *tunnel;
        int src, dst;
        int pipe_r, pipe_w;
        size_t pipe_size;
        size_t pending; /* bytes in the pipe */
        bool src_eof, done;
        struct event *src_ev, *dst_ev;
        uint64_t *bytes;
} TunnelPump;

struct Tunnel {
        TunnelPump pumps[2]; /* 0: a to b, 1: b to a */
        bool ended;
        /* @error is 0 for an orderly end (both sides closed), else the
         * errno that ended it. */
        void (*end)(void *userdata, int error);
        void *userdata;
};

/* Makes @t empty (no pipes, no events): tunnel_release() is then a no-op. */
void tunnel_init(Tunnel *t);

/* Starts moving bytes between @a and @b, counting them in @bytes_ab and
 * @bytes_ba. @early (@n_early bytes, may be 0) was read from @a already
 * and goes to @b first. Returns 0 (the tunnel may already have ended, its
 * callback run) or -errno (pipes or events could not be made; the callback
 * is not run; release the tunnel). */
int tunnel_start(Tunnel *t, struct event_base *base, int a, int b, const void *early,
                 size_t n_early, uint64_t *bytes_ab, uint64_t *bytes_ba,
                 void (*end)(void *userdata, int error), void *userdata);

/* Frees the events and pipes; the fds stay the owner's. */
void tunnel_release(Tunnel *t);
