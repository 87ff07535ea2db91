/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Captures a command's stdout and stderr while a blocking call (hutch_exec)
 * runs it: two pipes whose write ends go to the command, drained by a
 * forked helper process into two memfds, at most @max bytes each. The rest
 * is read and dropped, so the command never blocks on a full pipe and a
 * runaway writer costs no memory beyond the bound.
 *
 *   OutputCapture c;
 *   output_capture_start(max, &c);          forks the drainer
 *   ... run the command with c.out_fd, c.err_fd ...
 *   output_capture_finish(&c, &out, &err);  collects, reaps the drainer
 *   output_capture_done(&c);                always (cleanup attribute)
 *
 * The caller stays single-threaded (docs/style.md §2): the drainer is a process.
 * After the command ended, finish() tells the drainer to read what is left
 * in the pipes and stop, rather than wait for end-of-file: a process the
 * command left behind may still hold the pipes open. */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct OutputCapture {
        pid_t pid;   /* the drainer, or 0 */
        int out_fd;  /* write end of the stdout pipe, for the command */
        int err_fd;  /* write end of the stderr pipe */
        int done_fd; /* closed by finish(): the command is done */
        int out_mem, err_mem;
        size_t max;
} OutputCapture;

typedef struct CapturedStream {
        char *data; /* NUL-terminated (the data may hold NULs too); free() */
        size_t len;
        bool truncated; /* the command wrote more than the bound */
} CapturedStream;

void captured_stream_done(CapturedStream *s);

/* Sets up the pipes and memfds and forks the drainer. Returns 0 or -errno;
 * @ret is fully set up only on success. */
int output_capture_start(size_t max, OutputCapture *ret);

/* Closes the write ends, lets the drainer finish and reaps it, then reads
 * back what it kept. Returns 0 or -errno (-EIO when the drainer failed). */
int output_capture_finish(OutputCapture *c, CapturedStream *ret_out, CapturedStream *ret_err);

/* Closes every fd left and kills and reaps a drainer still running. */
void output_capture_done(OutputCapture *c);
