/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "ns/caps.h"
#include "sandbox/port-forward.h"
#include "sandbox/sandbox-internal.h"
#include "signal-util.h"

/* How long the owner waits for a new forwarder to be in the sandbox's
 * namespaces. */
#define PORT_FORWARD_READY_TIMEOUT_MS 10000
/* The pipe size a direction starts with, and what it grows to the first
 * time one splice() moves half of it (a bulk stream, issue 18's
 * throughput: each splice() then moves up to 1 MiB, so the peers are
 * woken less often).
 * The kernel holds an unprivileged forwarder to its user's pipe quota
 * (/proc/sys/fs/pipe-user-pages-soft): past it, a pipe stays the size it
 * has. At most 512 MiB of pipe buffers per port when every connection's
 * both directions are stalled full and the quota allows it. */
#define PORT_FORWARD_PIPE (256U << 10)
#define PORT_FORWARD_PIPE_BULK (1U << 20)

void port_forwards_init(PortForwards *t) {
        *t = (PortForwards){.userns_fd = -EBADF, .netns_fd = -EBADF};
}

int port_forwards_open_ns(PortForwards *t, pid_t pid) {
        char path[64];
        int fds[2];

        for (size_t i = 0; i < 2; i++) {
                (void)snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)pid, i ? "net" : "user");
                fds[i] = open(path, O_RDONLY | O_CLOEXEC);
                if (fds[i] < 0) {
                        int r = -errno;

                        if (i)
                                (void)close(fds[0]);
                        return r;
                }
        }
        safe_close(t->userns_fd);
        safe_close(t->netns_fd);
        t->userns_fd = fds[0];
        t->netns_fd = fds[1];
        return 0;
}

static void port_forward_stop(PortForward *f) {
        if (f->pid > 0) {
                if (f->pidfd >= 0)
                        (void)pidfd_send_signal(f->pidfd, SIGKILL, NULL, 0);
                else
                        (void)kill(f->pid, SIGKILL);
                (void)waitpid(f->pid, NULL, 0);
                f->pid = 0;
        }
        f->pidfd = safe_close(f->pidfd);
        f->listen_fd = safe_close(f->listen_fd);
}

void port_forwards_done(PortForwards *t) {
        for (size_t i = 0; i < t->n; i++)
                port_forward_stop(&t->items[i]);
        t->n = 0;
        t->userns_fd = safe_close(t->userns_fd);
        t->netns_fd = safe_close(t->netns_fd);
}

int port_forwards_add(PortForwards *t, const PortSpec *spec, HutchError *reterr) {
        char host[INET6_ADDRSTRLEN];
        struct sockaddr_storage ss = {};
        socklen_t len;
        _cleanup_close_ int fd = -EBADF;
        bool v6 = spec->family == AF_INET6;
        PortForward *f;

        port_spec_host_to_string(spec, host, sizeof(host));
        for (size_t i = 0; i < t->n; i++)
                if (t->items[i].spec.port == spec->port)
                        return hutch_error_set(reterr, EEXIST,
                                               "port %u of the sandbox is already published",
                                               (unsigned)spec->port);
        if (t->n >= ELEMENTSOF(t->items))
                return hutch_error_set(reterr, E2BIG, "too many published ports (at most %d)",
                                       POLICY_MAX_PORTS);
        if (spec->family == AF_INET6) {
                struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

                a->sin6_family = AF_INET6;
                a->sin6_port = htons(spec->host_port);
                memcpy(&a->sin6_addr, spec->host_ip, 16);
                len = sizeof(*a);
        } else {
                struct sockaddr_in *a = (struct sockaddr_in *)&ss;

                a->sin_family = AF_INET;
                a->sin_port = htons(spec->host_port);
                memcpy(&a->sin_addr, spec->host_ip, 4);
                len = sizeof(*a);
        }
        fd = socket(spec->family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return hutch_error_set(reterr, errno, "failed to make a socket for port %u: %m",
                                       (unsigned)spec->port);
        /* Binding over connections in TIME_WAIT, as every server does; a
         * second listener on the same address is still EADDRINUSE. */
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &(int){1}, sizeof(int));
        if (spec->family == AF_INET6)
                (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &(int){1}, sizeof(int));
        if (bind(fd, (struct sockaddr *)&ss, len) < 0) {
                char where[INET6_ADDRSTRLEN + 16];
                int e = errno;

                (void)snprintf(where, sizeof(where), "%s%s%s:%u", v6 ? "[" : "", host,
                               v6 ? "]" : "", (unsigned)spec->host_port);
                if (e == EADDRINUSE)
                        return hutch_error_set(reterr, e, "%s is already in use", where);
                if (e == EADDRNOTAVAIL)
                        return hutch_error_set(reterr, e,
                                               "cannot publish on %s: it is not an address of "
                                               "this machine",
                                               host);
                if (e == EACCES)
                        return hutch_error_set(reterr, e,
                                               "cannot publish on %s: a port below 1024 needs "
                                               "privilege",
                                               where);
                return hutch_error_set(reterr, e, "cannot publish on %s: %s", where, strerror(e));
        }
        if (listen(fd, 128) < 0)
                return hutch_error_set(reterr, errno, "failed to listen on %s: %m", host);
        if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
                return hutch_error_set(reterr, errno, "failed to read the port bound: %m");
        f = &t->items[t->n];
        *f = (PortForward){.spec = *spec, .listen_fd = TAKE_FD(fd), .pidfd = -EBADF};
        f->spec.host_port = ntohs(spec->family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                           : ((struct sockaddr_in *)&ss)->sin_port);
        t->n++;
        return 0;
}

int port_forwards_bind(PortForwards *t, char *const *specs, HutchError *reterr) {
        int r;

        for (char *const *s = specs; s && *s; s++) {
                PortSpec spec;

                r = port_spec_parse(*s, &spec, reterr);
                if (r >= 0)
                        r = port_forwards_add(t, &spec, reterr);
                if (r < 0) {
                        for (size_t i = 0; i < t->n; i++)
                                port_forward_stop(&t->items[i]);
                        t->n = 0;
                        return r;
                }
        }
        return 0;
}

int port_forwards_remove(PortForwards *t, uint16_t port) {
        for (size_t i = 0; i < t->n; i++) {
                if (t->items[i].spec.port != port)
                        continue;
                port_forward_stop(&t->items[i]);
                t->items[i] = t->items[--t->n];
                return 1;
        }
        return 0;
}

/* ---- the forwarder process ---- */

typedef struct Flow {
        int src, dst;
        int pipe[2];
        size_t pending; /* bytes in the pipe */
        size_t size;    /* the pipe's size */
        bool eof;       /* src said EOF */
        bool shut;      /* passed on to dst */
} Flow;

typedef struct Conn {
        int fds[2]; /* [0] the client (host side), [1] the sandbox's server */
        bool used, connecting;
        Flow flow[2]; /* [0] client -> server, [1] server -> client */
} Conn;

/* Every forwarder holds PORT_FORWARD_MAX_CONNS of these; it is its own
 * process, so the table is its only state. */
static Conn conns[PORT_FORWARD_MAX_CONNS];

#define EV_LISTENER UINT64_MAX

static void conn_close(Conn *c) {
        for (size_t i = 0; i < 2; i++) {
                c->fds[i] = safe_close(c->fds[i]);
                c->flow[i].pipe[0] = safe_close(c->flow[i].pipe[0]);
                c->flow[i].pipe[1] = safe_close(c->flow[i].pipe[1]);
        }
        c->used = false;
}

/* A half-full pipe in one go: the stream is a bulk one, and gets the bigger pipe (when
 * the quota lets it; otherwise it keeps the one it has). */
static void flow_grow(Flow *f) {
        int sz = fcntl(f->pipe[1], F_SETPIPE_SZ, (int)PORT_FORWARD_PIPE_BULK);

        if (sz > 0)
                f->size = (size_t)sz;
}

/* Moves what can move now from @f->src to @f->dst. 0, or -errno (the
 * connection is over). */
static int flow_pump(Flow *f) {
        for (;;) {
                bool progress = false;
                ssize_t n;

                if (!f->eof && f->pending < f->size) {
                        n = splice(f->src, NULL, f->pipe[1], NULL, f->size - f->pending,
                                   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                        if (n > 0) {
                                f->pending += (size_t)n;
                                progress = true;
                                if ((size_t)n >= f->size / 2 && f->size < PORT_FORWARD_PIPE_BULK)
                                        flow_grow(f);
                        } else if (n == 0) {
                                f->eof = true;
                                progress = true;
                        } else if (errno != EAGAIN && errno != EINTR)
                                return -errno;
                }
                if (f->pending > 0) {
                        n = splice(f->pipe[0], NULL, f->dst, NULL, f->pending,
                                   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                        if (n > 0) {
                                f->pending -= (size_t)n;
                                progress = true;
                        } else if (n < 0 && errno != EAGAIN && errno != EINTR)
                                return -errno;
                }
                if (f->eof && f->pending == 0 && !f->shut) {
                        (void)shutdown(f->dst, SHUT_WR);
                        f->shut = true;
                }
                if (!progress)
                        return 0;
        }
}

static void conn_event(Conn *c) {
        int r;

        if (c->connecting) {
                int err = 0;
                socklen_t len = sizeof(err);

                if (getsockopt(c->fds[1], SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err != 0) {
                        conn_close(c);
                        return;
                }
                /* Still in progress (an event of the client's side): the
                 * EPOLLOUT edge of the connect comes later. */
                {
                        struct sockaddr_storage ss;
                        socklen_t sl = sizeof(ss);

                        if (getpeername(c->fds[1], (struct sockaddr *)&ss, &sl) < 0)
                                return;
                }
                c->connecting = false;
        }
        for (size_t i = 0; i < 2; i++) {
                r = flow_pump(&c->flow[i]);
                if (r < 0) {
                        conn_close(c);
                        return;
                }
        }
        if (c->flow[0].shut && c->flow[1].shut)
                conn_close(c);
}

static int make_pipe(Flow *f) {
        int sz;

        if (pipe2(f->pipe, O_CLOEXEC | O_NONBLOCK) < 0)
                return -errno;
        /* A bigger pipe moves more per splice(); the default is fine too
         * (an unprivileged caller may be held to /proc/sys/fs/pipe-max-size). */
        sz = fcntl(f->pipe[1], F_SETPIPE_SZ, (int)PORT_FORWARD_PIPE);
        if (sz <= 0)
                sz = fcntl(f->pipe[1], F_GETPIPE_SZ);
        if (sz <= 0)
                return -EIO;
        f->size = (size_t)sz;
        return 0;
}

/* A new client on @lfd: a socket in this (the sandbox's) namespace,
 * connected to 127.0.0.1:@port. A client past the cap is closed. Returns
 * false when there was none to accept. */
static bool accept_one(int epfd, int lfd, uint16_t port) {
        struct sockaddr_in to = {.sin_family = AF_INET,
                                 .sin_port = htons(port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        Conn *c = NULL;
        int fd;

        fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
                return errno == EINTR || errno == ECONNABORTED;
        for (size_t i = 0; i < ELEMENTSOF(conns); i++)
                if (!conns[i].used) {
                        c = &conns[i];
                        break;
                }
        if (!c) {
                (void)close(fd); /* full: refused */
                return true;
        }
        *c = (Conn){.used = true,
                    .fds = {fd, -EBADF},
                    .flow = {{.pipe = {-EBADF, -EBADF}}, {.pipe = {-EBADF, -EBADF}}}};
        c->fds[1] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (c->fds[1] < 0 || make_pipe(&c->flow[0]) < 0 || make_pipe(&c->flow[1]) < 0) {
                conn_close(c);
                return true;
        }
        (void)setsockopt(c->fds[0], IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
        (void)setsockopt(c->fds[1], IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
        c->flow[0].src = c->fds[0];
        c->flow[0].dst = c->fds[1];
        c->flow[1].src = c->fds[1];
        c->flow[1].dst = c->fds[0];
        if (connect(c->fds[1], (struct sockaddr *)&to, sizeof(to)) < 0) {
                if (errno != EINPROGRESS) {
                        conn_close(c);
                        return true;
                }
                c->connecting = true;
        }
        for (size_t i = 0; i < 2; i++) {
                struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
                                         .data.u64 = (uint64_t)(c - conns)};

                if (epoll_ctl(epfd, EPOLL_CTL_ADD, c->fds[i], &ev) < 0) {
                        conn_close(c);
                        return true;
                }
        }
        if (!c->connecting)
                conn_event(c);
        return true;
}

_noreturn_ static void forwarder_loop(int lfd, uint16_t port) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = EV_LISTENER};
        int epfd;

        epfd = epoll_create1(EPOLL_CLOEXEC);
        if (epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &ev) < 0)
                _exit(1);
        for (;;) {
                struct epoll_event evs[64];
                int n;

                n = epoll_wait(epfd, evs, (int)ELEMENTSOF(evs), -1);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        _exit(1);
                }
                for (int i = 0; i < n; i++) {
                        if (evs[i].data.u64 == EV_LISTENER) {
                                for (size_t k = 0; k < 64 && accept_one(epfd, lfd, port); k++)
                                        ;
                                continue;
                        }
                        if (evs[i].data.u64 < ELEMENTSOF(conns) && conns[evs[i].data.u64].used)
                                conn_event(&conns[evs[i].data.u64]);
                }
        }
}

/* In the forked child: into the sandbox's namespaces, no privilege, then
 * the loop. Reports 0 or the errno of the step that failed on @ready_fd. */
_noreturn_ static void forwarder_child(pid_t parent, const PortForwards *t, int lfd, int ready_fd,
                                       uint16_t port) {
        struct rlimit rl;
        int err = 0;

        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
                _exit(1);
        /* Named for ps and the tests that look for leftovers. */
        (void)prctl(PR_SET_NAME, "hutch-port", 0, 0, 0);
        /* The keeper keeps itself to one CPU; its forwarders take any
         * (the kernel keeps them to the cgroup's cpuset). */
        {
                cpu_set_t all;

                memset(&all, 0xff, sizeof(all));
                (void)sched_setaffinity(0, sizeof(all), &all);
        }
        signals_reset_default();
        /* A peer that goes away is an EPIPE to handle, not a death. */
        (void)signal(SIGPIPE, SIG_IGN);
        /* Two sockets and two pipes per connection. */
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 8 * PORT_FORWARD_MAX_CONNS) {
                rl.rlim_cur = MIN(rl.rlim_max, (rlim_t)8 * PORT_FORWARD_MAX_CONNS);
                (void)setrlimit(RLIMIT_NOFILE, &rl);
        }
        /* SECURITY: the user namespace first, so the forwarder holds
         * capabilities only there (and then none); the network namespace
         * is the one every socket made from here on belongs to. */
        if (setns(t->userns_fd, CLONE_NEWUSER) < 0 || setns(t->netns_fd, CLONE_NEWNET) < 0)
                err = errno;
        if (!err && caps_drop_all() < 0)
                err = EPERM;
        if (!err && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                err = errno;
        (void)loop_write(ready_fd, &err, sizeof(err));
        if (err)
                _exit(1);
        /* Nothing of the owner's but the listener stays open. */
        if (dup3(lfd, 3, O_CLOEXEC) < 0)
                _exit(1);
        (void)close_range(4, ~0U, 0);
        forwarder_loop(3, port);
}

static int forwarder_spawn(const PortForwards *t, PortForward *f, HutchError *reterr) {
        _cleanup_close_ int ready_r = -EBADF, ready_w = -EBADF, pidfd = -EBADF;
        struct pollfd pfd;
        pid_t parent = getpid(), pid;
        int fds[2], err = 0;
        ssize_t n;

        if (pipe2(fds, O_CLOEXEC) < 0)
                return hutch_error_set(reterr, errno, "failed to make a pipe: %m");
        ready_r = fds[0];
        ready_w = fds[1];
        pid = sandbox_clone(0, &pidfd);
        if (pid < 0)
                return hutch_error_set(reterr, (int)-pid,
                                       "failed to start the forwarder of port %u: %s",
                                       (unsigned)f->spec.port, strerror((int)-pid));
        if (pid == 0) {
                /* The listener is moved out of the way of dup3()'s 3. */
                int lfd = fcntl(f->listen_fd, F_DUPFD_CLOEXEC, 10);

                if (lfd < 0)
                        _exit(1);
                forwarder_child(parent, t, lfd, ready_w, f->spec.port);
        }
        f->pid = pid;
        f->pidfd = TAKE_FD(pidfd);
        ready_w = safe_close(ready_w);
        pfd = (struct pollfd){.fd = ready_r, .events = POLLIN};
        n = poll(&pfd, 1, PORT_FORWARD_READY_TIMEOUT_MS) == 1 ? read(ready_r, &err, sizeof(err))
                                                              : -1;
        if (n != sizeof(err) || err != 0) {
                port_forward_stop(f);
                if (n != sizeof(err))
                        err = ETIMEDOUT;
                return hutch_error_set(reterr, err,
                                       "the forwarder of port %u could not enter the sandbox: %s",
                                       (unsigned)f->spec.port, strerror(err));
        }
        /* The forwarder has the listener; the owner keeps no copy, so a
         * dead forwarder leaves nothing listening. */
        f->listen_fd = safe_close(f->listen_fd);
        return 0;
}

/* In the forked child of port_forwards_connect(): the socket, made and
 * connected in the sandbox's namespace, goes to @sock; an errno instead
 * when that failed. Never returns. */
_noreturn_ static void connect_child(pid_t parent, const PortForwards *t, int sock, uint16_t port) {
        struct sockaddr_in to = {.sin_family = AF_INET,
                                 .sin_port = htons(port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int err = 0, fd = -EBADF;

        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
                _exit(1);
        if (setns(t->userns_fd, CLONE_NEWUSER) < 0 || setns(t->netns_fd, CLONE_NEWNET) < 0)
                err = errno;
        if (!err && caps_drop_all() < 0)
                err = EPERM;
        if (!err) {
                fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
                if (fd < 0 ||
                    (connect(fd, (struct sockaddr *)&to, sizeof(to)) < 0 && errno != EINPROGRESS))
                        err = errno;
        }
        if (!err) {
                /* Loopback answers at once; a refusal is the caller's to
                 * report (502), so it is waited for here. */
                struct pollfd pfd = {.fd = fd, .events = POLLOUT};
                socklen_t len = sizeof(err);

                if (poll(&pfd, 1, PORT_FORWARD_READY_TIMEOUT_MS / 2) != 1)
                        err = ETIMEDOUT;
                else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                        err = errno;
        }
        if (err)
                (void)send(sock, &err, sizeof(err), MSG_NOSIGNAL);
        else {
                (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
                (void)send_with_fds(sock, &err, sizeof(err), &fd, 1);
        }
        _exit(0);
}

int port_forwards_connect(const PortForwards *t, uint16_t port, int *ret_fd) {
        _cleanup_close_ int parent_end = -EBADF, child_end = -EBADF, pidfd = -EBADF;
        pid_t parent = getpid(), pid;
        struct pollfd pfd;
        int socks[2], fd = -EBADF, err = 0;
        ssize_t n;

        if (port == 0)
                return -EINVAL;
        if (t->connect)
                return t->connect(t->userdata, port, ret_fd);
        if (t->userns_fd < 0 || t->netns_fd < 0)
                return -EBADF;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, socks) < 0)
                return -errno;
        parent_end = socks[0];
        child_end = socks[1];
        pid = sandbox_clone(0, &pidfd);
        if (pid < 0)
                return (int)pid;
        if (pid == 0)
                connect_child(parent, t, child_end, port);
        child_end = safe_close(child_end);
        pfd = (struct pollfd){.fd = parent_end, .events = POLLIN};
        n = poll(&pfd, 1, PORT_FORWARD_READY_TIMEOUT_MS) == 1
                    ? recv_with_fds(parent_end, &err, sizeof(err), &fd, 1)
                    : -ETIMEDOUT;
        (void)pidfd_send_signal(pidfd, SIGKILL, NULL, 0);
        (void)waitpid(pid, NULL, 0);
        if (n < 0) {
                safe_close(fd);
                return (int)n;
        }
        if (n != sizeof(err) || (err == 0 && fd < 0)) {
                safe_close(fd);
                return err ? -err : -EIO;
        }
        if (err) {
                safe_close(fd);
                return -err;
        }
        *ret_fd = fd;
        return 0;
}

int port_forwards_start(PortForwards *t, HutchError *reterr) {
        int r;

        if (t->connect)
                return 0;
        if (t->n > 0 && (t->userns_fd < 0 || t->netns_fd < 0))
                return hutch_error_set(reterr, EBADF,
                                       "the sandbox's namespaces are not open for its ports");
        for (size_t i = 0; i < t->n; i++) {
                if (t->items[i].pid > 0)
                        continue;
                r = forwarder_spawn(t, &t->items[i], reterr);
                if (r < 0) {
                        t->items[i] = t->items[--t->n];
                        return r;
                }
        }
        return 0;
}
