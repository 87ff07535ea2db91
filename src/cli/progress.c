/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "progress.h"
#include "time-util.h"

static uint64_t progress_done(const Progress *p) {
        struct stat st;
        off_t off;

        if (p->source == PROGRESS_FILE_SIZE)
                return fstat(p->fd, &st) >= 0 && st.st_size > 0 ? (uint64_t)st.st_size : 0;
        off = lseek(p->fd, 0, SEEK_CUR);
        return off > 0 ? (uint64_t)off : 0;
}

static double mib(uint64_t bytes) {
        return (double)bytes / (1024.0 * 1024.0);
}

static double rate_mib_s(uint64_t bytes, uint64_t ns) {
        return ns ? mib(bytes) / ((double)ns / 1e9) : 0.0;
}

static void progress_draw(const Progress *p) {
        uint64_t done = progress_done(p), ns = time_monotonic_ns() - p->start_ns;

        if (p->total)
                (void)fprintf(stderr, "\r\033[K%s: %.1f of %.1f MiB (%d%%), %.1f MiB/s", p->what,
                              mib(done), mib(p->total),
                              (int)(done >= p->total ? 100 : done * 100 / p->total),
                              rate_mib_s(done, ns));
        else
                (void)fprintf(stderr, "\r\033[K%s: %.1f MiB, %.1f MiB/s", p->what, mib(done),
                              rate_mib_s(done, ns));
        (void)fflush(stderr);
}

static void *progress_thread(void *arg) {
        Progress *p = arg;

        for (;;) {
                struct pollfd pfd = {.fd = p->stop_fd, .events = POLLIN};
                int r = poll(&pfd, 1, 250);

                if (r > 0 || (r < 0 && errno != EINTR))
                        return NULL;
                if (r == 0)
                        progress_draw(p);
        }
}

void progress_begin(Progress *p, const char *what, int fd, ProgressSource source, uint64_t total,
                    bool quiet) {
        *p = PROGRESS_NULL;
        if (quiet || fd < 0 || !isatty(STDERR_FILENO))
                return;
        p->fd = fd;
        p->source = source;
        p->total = total;
        p->what = what;
        p->start_ns = time_monotonic_ns();
        p->stop_fd = eventfd(0, EFD_CLOEXEC);
        if (p->stop_fd < 0)
                return;
        if (pthread_create(&p->thread, NULL, progress_thread, p) != 0) {
                (void)close(p->stop_fd);
                p->stop_fd = -1;
                return;
        }
        p->on = true;
}

void progress_end(Progress *p, const char *done, bool ok) {
        uint64_t bytes, ns;

        if (!p->on)
                return;
        (void)eventfd_write(p->stop_fd, 1);
        (void)pthread_join(p->thread, NULL);
        (void)close(p->stop_fd);
        p->stop_fd = -1;
        p->on = false;
        if (!ok) {
                (void)fputs("\r\033[K", stderr);
                return;
        }
        bytes = p->total && p->source == PROGRESS_FILE_OFFSET ? p->total : progress_done(p);
        ns = time_monotonic_ns() - p->start_ns;
        (void)fprintf(stderr, "\r\033[K%s: %.1f MiB in %.1f s (%.1f MiB/s)\n", done, mib(bytes),
                      (double)ns / 1e9, rate_mib_s(bytes, ns));
}
