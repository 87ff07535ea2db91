/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* bench-api: one exec round trip, N times, three ways (bench/README.md):
 *
 *   bench-api capi NAME N           hutch_exec() of libhutch, in process
 *   bench-api http SOCKET NAME N    POST /v1/sandboxes/NAME/exec to `hutch
 *                                   serve` over one keep-alive connection
 *   bench-api cli HUTCH NAME N      fork + exec of `HUTCH exec NAME -- true`
 *
 * Each runs `true` in the running sandbox NAME and prints the wall time of
 * every call in microseconds, one per line; bench-api.sh makes the table.
 * Only the public API (hutch.h) and libc: an outside client's view. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hutch.h>

static long long now_us(void) {
        struct timespec ts;

        (void)clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long)ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

/* Decimal digits only (libc and the public API only: no parse-util.h). */
static int parse_digits(const char *s, size_t max, size_t *ret) {
        size_t n = 0;

        if (!*s)
                return -EINVAL;
        for (; *s >= '0' && *s <= '9'; s++) {
                n = n * 10 + (size_t)(*s - '0');
                if (n > max)
                        return -ERANGE;
        }
        *ret = n;
        return 0;
}

static int parse_count(const char *s, int *ret) {
        size_t n;

        if (parse_digits(s, 1000000, &n) < 0 || n == 0 || s[strspn(s, "0123456789")])
                return -EINVAL;
        *ret = (int)n;
        return 0;
}

static int bench_capi(const char *name, int n) {
        char *argv[] = {(char *)"true", NULL};
        hutch_exec_options o = {.argv = argv, .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1};

        for (int i = 0; i < n; i++) {
                hutch_outcome out = {};
                hutch_error err = {};
                long long t0 = now_us();
                int r = hutch_exec(name, &o, &out, &err);
                long long t1 = now_us();

                if (r < 0 || out.exit_code != 0) {
                        (void)fprintf(stderr, "bench-api: hutch_exec: %s (exit %d)\n",
                                      r < 0 ? err.message : "command failed", out.exit_code);
                        hutch_outcome_done(&out);
                        return 1;
                }
                hutch_outcome_done(&out);
                (void)printf("%lld\n", t1 - t0);
        }
        return 0;
}

/* Reads one HTTP/1.1 answer with a Content-Length from @fd into @buf;
 * returns its status, or -1. */
static int read_answer(int fd, char *buf, size_t size) {
        size_t have = 0, need = 0;
        char *head_end = NULL;
        int status;

        for (;;) {
                ssize_t k;

                if (head_end && have >= need)
                        break;
                if (have + 1 >= size)
                        return -1;
                k = read(fd, buf + have, size - have - 1);
                if (k <= 0)
                        return -1;
                have += (size_t)k;
                buf[have] = '\0';
                if (!head_end && (head_end = strstr(buf, "\r\n\r\n"))) {
                        const char *cl = strcasestr(buf, "\r\nContent-Length:");
                        size_t body;

                        if (!cl || cl > head_end)
                                return -1;
                        cl += 17;
                        cl += strspn(cl, " ");
                        if (parse_digits(cl, size, &body) < 0)
                                return -1;
                        need = (size_t)(head_end + 4 - buf) + body;
                }
        }
        if (sscanf(buf, "HTTP/1.1 %d", &status) != 1)
                return -1;
        return status;
}

static int bench_http(const char *path, const char *name, int n) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        static const char body[] = "{\"argv\":[\"true\"]}";
        char req[512], ans[65536];
        int fd, len;

        if (strlen(path) >= sizeof(sa.sun_path))
                return 1;
        strcpy(sa.sun_path, path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                (void)fprintf(stderr, "bench-api: cannot connect to %s: %m\n", path);
                return 1;
        }
        len = snprintf(req, sizeof(req),
                       "POST /v1/sandboxes/%s/exec HTTP/1.1\r\nHost: localhost\r\n"
                       "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                       name, strlen(body), body);
        if (len < 0 || (size_t)len >= sizeof(req))
                return 1;
        for (int i = 0; i < n; i++) {
                long long t0 = now_us(), t1;
                int status;

                if (write(fd, req, (size_t)len) != len) {
                        (void)fprintf(stderr, "bench-api: write: %m\n");
                        return 1;
                }
                status = read_answer(fd, ans, sizeof(ans));
                t1 = now_us();
                if (status != 200 || !strstr(ans, "\"exit_code\":0")) {
                        (void)fprintf(stderr, "bench-api: unexpected answer: %.300s\n", ans);
                        return 1;
                }
                (void)printf("%lld\n", t1 - t0);
        }
        (void)close(fd);
        return 0;
}

static int bench_cli(const char *hutch, const char *name, int n) {
        int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);

        if (null_fd < 0)
                return 1;
        for (int i = 0; i < n; i++) {
                long long t0 = now_us(), t1;
                int status = 0;
                pid_t pid = fork();

                if (pid < 0)
                        return 1;
                if (pid == 0) {
                        if (dup2(null_fd, 0) < 0 || dup2(null_fd, 1) < 0)
                                _exit(127);
                        (void)execl(hutch, "hutch", "exec", name, "--", "true", (char *)NULL);
                        _exit(127);
                }
                if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
                    WEXITSTATUS(status) != 0) {
                        (void)fprintf(stderr, "bench-api: '%s exec %s -- true' failed\n", hutch,
                                      name);
                        return 1;
                }
                t1 = now_us();
                (void)printf("%lld\n", t1 - t0);
        }
        return 0;
}

int main(int argc, char **argv) {
        int n;

        if (argc == 4 && strcmp(argv[1], "capi") == 0 && parse_count(argv[3], &n) == 0)
                return bench_capi(argv[2], n);
        if (argc == 5 && strcmp(argv[1], "http") == 0 && parse_count(argv[4], &n) == 0)
                return bench_http(argv[2], argv[3], n);
        if (argc == 5 && strcmp(argv[1], "cli") == 0 && parse_count(argv[4], &n) == 0)
                return bench_cli(argv[2], argv[3], n);
        (void)fprintf(stderr,
                      "usage: bench-api capi NAME N | http SOCKET NAME N | cli HUTCH NAME N\n");
        return 2;
}
