/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capture.h"
#include "fd-util.h"

/* The drainer's exit status: a bit per truncated stream, or a failure. */
#define DRAIN_OUT_TRUNCATED 1
#define DRAIN_ERR_TRUNCATED 2
#define DRAIN_FAILED 64

void captured_stream_done(CapturedStream *s) {
        if (!s)
                return;
        s->data = mfree(s->data);
        s->len = 0;
        s->truncated = false;
}

typedef struct DrainStream {
        int fd;  /* read end, or -EBADF once at end-of-file */
        int mem; /* where the first @max bytes go */
        size_t kept;
        bool truncated;
} DrainStream;

/* Reads once from @d; returns 0, or 1 when nothing more can come now
 * (end-of-file, or EAGAIN while draining non-blocking), or -errno. */
static int drain_once(DrainStream *d, size_t max) {
        char buf[65536];
        ssize_t n;

        n = read(d->fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
                return 0;
        if (n < 0 && errno == EAGAIN)
                return 1;
        if (n < 0)
                return negative_errno();
        if (n == 0) {
                d->fd = safe_close(d->fd);
                return 1;
        }
        if (d->kept < max) {
                size_t take = MIN((size_t)n, max - d->kept);
                int r = loop_write(d->mem, buf, take);

                if (r < 0)
                        return r;
                d->kept += take;
                if (take < (size_t)n)
                        d->truncated = true;
        } else
                d->truncated = true;
        return 0;
}

/* The drainer's body; returns its exit status. */
static int drain(DrainStream s[2], int done_fd, size_t max) {
        bool done = false;

        while (s[0].fd >= 0 || s[1].fd >= 0) {
                struct pollfd p[3] = {
                        {.fd = s[0].fd, .events = POLLIN},
                        {.fd = s[1].fd, .events = POLLIN},
                        {.fd = done ? -1 : done_fd, .events = POLLIN},
                };

                if (poll(p, 3, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return DRAIN_FAILED;
                }
                for (size_t i = 0; i < 2; i++)
                        if (s[i].fd >= 0 && p[i].revents && drain_once(&s[i], max) < 0)
                                return DRAIN_FAILED;
                if (!done && p[2].revents) {
                        /* The command is done: what it wrote is in the
                         * pipes already. Take it without waiting for
                         * end-of-file. */
                        done = true;
                        for (size_t i = 0; i < 2; i++) {
                                int r = 0;

                                if (s[i].fd >= 0 && fcntl(s[i].fd, F_SETFL, O_NONBLOCK) < 0)
                                        return DRAIN_FAILED;
                                while (s[i].fd >= 0 && (r = drain_once(&s[i], max)) == 0)
                                        ;
                                if (r < 0)
                                        return DRAIN_FAILED;
                                s[i].fd = safe_close(s[i].fd);
                        }
                }
        }
        return (s[0].truncated ? DRAIN_OUT_TRUNCATED : 0) |
               (s[1].truncated ? DRAIN_ERR_TRUNCATED : 0);
}

int output_capture_start(size_t max, OutputCapture *ret) {
        OutputCapture c = {.out_fd = -EBADF,
                           .err_fd = -EBADF,
                           .done_fd = -EBADF,
                           .out_mem = -EBADF,
                           .err_mem = -EBADF,
                           .max = max};
        int out[2] = {-EBADF, -EBADF}, err[2] = {-EBADF, -EBADF}, done[2] = {-EBADF, -EBADF};
        int r = 0;

        if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 || pipe2(done, O_CLOEXEC) < 0)
                r = negative_errno();
        if (r >= 0) {
                c.out_mem = memfd_create("hutch-mcp-stdout", MFD_CLOEXEC);
                c.err_mem = memfd_create("hutch-mcp-stderr", MFD_CLOEXEC);
                if (c.out_mem < 0 || c.err_mem < 0)
                        r = negative_errno();
        }
        if (r >= 0) {
                c.pid = fork();
                if (c.pid < 0)
                        r = negative_errno();
        }
        if (r >= 0 && c.pid == 0) {
                DrainStream s[2] = {
                        {.fd = out[0], .mem = c.out_mem},
                        {.fd = err[0], .mem = c.err_mem},
                };

                /* Only the read ends: a write end kept here would hold
                 * off end-of-file for good. */
                (void)close(out[1]);
                (void)close(err[1]);
                (void)close(done[1]);
                _exit(drain(s, done[0], max));
        }
        (void)safe_close(out[0]);
        (void)safe_close(err[0]);
        (void)safe_close(done[0]);
        if (r < 0) {
                (void)safe_close(out[1]);
                (void)safe_close(err[1]);
                (void)safe_close(done[1]);
                c.pid = 0;
                output_capture_done(&c);
                return r;
        }
        c.out_fd = out[1];
        c.err_fd = err[1];
        c.done_fd = done[1];
        *ret = c;
        return 0;
}

static int capture_read(int mem, size_t max, CapturedStream *ret) {
        if (lseek(mem, 0, SEEK_SET) < 0)
                return negative_errno();
        return read_full_fd(mem, max, &ret->data, &ret->len);
}

int output_capture_finish(OutputCapture *c, CapturedStream *ret_out, CapturedStream *ret_err) {
        CapturedStream out = {}, err = {};
        int status = 0, r;
        pid_t pid;

        c->out_fd = safe_close(c->out_fd);
        c->err_fd = safe_close(c->err_fd);
        c->done_fd = safe_close(c->done_fd);
        do
                pid = waitpid(c->pid, &status, 0);
        while (pid < 0 && errno == EINTR);
        if (pid < 0)
                return negative_errno();
        c->pid = 0;
        if (!WIFEXITED(status) || (WEXITSTATUS(status) & DRAIN_FAILED))
                return -EIO;
        r = capture_read(c->out_mem, c->max, &out);
        if (r >= 0)
                r = capture_read(c->err_mem, c->max, &err);
        if (r < 0) {
                captured_stream_done(&out);
                return r;
        }
        out.truncated = WEXITSTATUS(status) & DRAIN_OUT_TRUNCATED;
        err.truncated = WEXITSTATUS(status) & DRAIN_ERR_TRUNCATED;
        *ret_out = out;
        *ret_err = err;
        return 0;
}

void output_capture_done(OutputCapture *c) {
        if (!c)
                return;
        c->out_fd = safe_close(c->out_fd);
        c->err_fd = safe_close(c->err_fd);
        c->done_fd = safe_close(c->done_fd);
        c->out_mem = safe_close(c->out_mem);
        c->err_mem = safe_close(c->err_mem);
        if (c->pid > 0) {
                (void)kill(c->pid, SIGKILL);
                while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
                        ;
                c->pid = 0;
        }
}
