/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* bench/bench-ports.sh's server and client, so that neither is what the
 * numbers measure:
 *   port-echo serve ADDR PORT      one process per connection: the first
 *                                  byte 'e' echoes 64-byte requests, 's'
 *                                  swallows the stream and answers its
 *                                  length at EOF
 *   port-echo client PORT N MIB    N requests on one connection, N/10 with
 *                                  a connection each, MIB MiB in one
 *                                  connection; prints p50 p90 (us) of both,
 *                                  and GB/s */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void) {
        struct timespec ts;

        (void)clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int full_read(int fd, char *buf, size_t n) {
        while (n > 0) {
                ssize_t k = read(fd, buf, n);

                if (k <= 0)
                        return -1;
                buf += k;
                n -= (size_t)k;
        }
        return 0;
}

static int full_write(int fd, const char *buf, size_t n) {
        while (n > 0) {
                ssize_t k = write(fd, buf, n);

                if (k <= 0)
                        return -1;
                buf += k;
                n -= (size_t)k;
        }
        return 0;
}

static void serve_one(int c) {
        static char buf[1 << 20];
        char kind;

        if (read(c, &kind, 1) != 1)
                return;
        if (kind == 'e') {
                while (full_read(c, buf, 64) == 0)
                        if (full_write(c, buf, 64) < 0)
                                return;
        } else if (kind == 's') {
                unsigned long long total = 0;
                char ans[32];
                ssize_t k;

                while ((k = read(c, buf, sizeof(buf))) > 0)
                        total += (unsigned long long)k;
                (void)full_write(c, ans, (size_t)snprintf(ans, sizeof(ans), "%llu", total));
        }
}

static int serve(const char *addr, int port) {
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

        if (s < 0 || inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
                return 1;
        (void)setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s, 128) < 0) {
                perror("port-echo: bind");
                return 1;
        }
        (void)signal(SIGCHLD, SIG_IGN);
        for (;;) {
                int c = accept(s, NULL, NULL);

                if (c < 0)
                        continue;
                if (fork() == 0) {
                        (void)close(s);
                        (void)setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                        serve_one(c);
                        _exit(0);
                }
                (void)close(c);
        }
}

static int dial(int port) {
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port = htons((uint16_t)port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

        if (c < 0 || connect(c, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                if (c >= 0)
                        (void)close(c);
                return -1;
        }
        (void)setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        return c;
}

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

        return x < y ? -1 : x > y;
}

static double pct(uint64_t *v, size_t n, double p) {
        qsort(v, n, sizeof(*v), cmp_u64);
        return (double)v[(size_t)((double)n * p)] / 1000.0;
}

static int fail(const char *what) {
        perror(what);
        return 1;
}

static int client(int port, size_t n, size_t mib) {
        static char chunk[1 << 20];
        size_t n_new = n / 10 < 100 ? 100 : n / 10;
        uint64_t *lat = calloc(n, sizeof(uint64_t)), *lat_new = calloc(n_new, sizeof(uint64_t));
        char msg[65], ans[32] = {};
        uint64_t t;
        int c = -1;

        memset(msg, 'x', sizeof(msg));
        msg[0] = 'e';
        /* The server may still be starting: a forwarder accepts before
         * anything listens behind it, so the first answer is waited for. */
        for (int i = 0; i < 400 && c < 0; i++) {
                c = dial(port);
                if (c >= 0 && (full_write(c, msg, 65) < 0 || full_read(c, msg + 1, 64) < 0)) {
                        (void)close(c);
                        c = -1;
                }
                if (c < 0)
                        (void)usleep(50000);
        }
        if (!lat || !lat_new || c < 0)
                return fail("connect");
        for (size_t i = 0; i < n; i++) {
                t = now_ns();
                if (full_write(c, msg + 1, 64) < 0 || full_read(c, msg + 1, 64) < 0)
                        return fail("request");
                lat[i] = now_ns() - t;
        }
        (void)close(c);
        for (size_t i = 0; i < n_new; i++) {
                t = now_ns();
                c = dial(port);
                if (c < 0 || full_write(c, msg, 65) < 0 || full_read(c, msg + 1, 64) < 0)
                        return fail("request on a new connection");
                (void)close(c);
                lat_new[i] = now_ns() - t;
        }
        c = dial(port);
        if (c < 0 || full_write(c, "s", 1) < 0)
                return fail("connect for the stream");
        t = now_ns();
        for (size_t i = 0; i < mib; i++)
                if (full_write(c, chunk, sizeof(chunk)) < 0)
                        return fail("stream");
        (void)shutdown(c, SHUT_WR);
        if (read(c, ans, sizeof(ans) - 1) <= 0 || strtoull(ans, NULL, 10) != (mib << 20))
                return fail("the stream's count");
        t = now_ns() - t;
        printf("%9.1f %9.1f %9.1f %9.1f %8.2f\n", pct(lat, n, 0.5), pct(lat, n, 0.9),
               pct(lat_new, n_new, 0.5), pct(lat_new, n_new, 0.9), (double)(mib << 20) / (double)t);
        free(lat);
        free(lat_new);
        return 0;
}

int main(int argc, char **argv) {
        (void)signal(SIGPIPE, SIG_IGN);
        if (argc == 4 && strcmp(argv[1], "serve") == 0)
                return serve(argv[2], atoi(argv[3]));
        if (argc == 5 && strcmp(argv[1], "client") == 0)
                return client(atoi(argv[2]), (size_t)atol(argv[3]), (size_t)atol(argv[4]));
        fprintf(stderr, "usage: port-echo serve ADDR PORT | client PORT N MIB\n");
        return 2;
}
