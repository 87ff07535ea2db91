/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A progress line on stderr for a long operation on one file: the bytes
 * done, the total when known, and the rate, redrawn four times a second,
 * then one closing line. Shown only when stderr is a terminal and the
 * caller was not asked to be quiet; otherwise every call is a no-op. */

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

typedef enum ProgressSource {
        PROGRESS_FILE_SIZE,   /* the bytes written: the size of the file @fd */
        PROGRESS_FILE_OFFSET, /* the bytes read: the offset of @fd (shared with the reader) */
} ProgressSource;

typedef struct Progress {
        bool on;
        int fd;
        ProgressSource source;
        uint64_t total; /* 0: unknown */
        uint64_t start_ns;
        const char *what; /* "exporting box.1" */
        int stop_fd;      /* eventfd that ends the thread */
        pthread_t thread;
} Progress;

#define PROGRESS_NULL ((Progress){.fd = -1, .stop_fd = -1})

/* Starts showing the progress of @what on @fd (not owned; it must stay
 * open until progress_end()). Failure to show progress is never an error
 * of the operation: @p is then simply off. */
void progress_begin(Progress *p, const char *what, int fd, ProgressSource source, uint64_t total,
                    bool quiet);

/* Stops the display and prints the closing line ("@done: N MiB in T s
 * (R MiB/s)") when @ok, else clears the line. */
void progress_end(Progress *p, const char *done, bool ok);
