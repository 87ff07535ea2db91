/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The keepers' exec table (sandbox/exec-table.h) without a keeper: the
 * history lookup, the bounded log files of detached execs, and the signal
 * names of api/processes.h. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/processes.h"
#include "fd-util.h"
#include "rm-rf.h"
#include "sandbox/exec-table.h"
#include "test.h"

static void tmpdir(char dir[64]) {
        (void)snprintf(dir, 64, "/tmp/test-exec-table-XXXXXX");
        ASSERT_NOT_NULL(mkdtemp(dir));
}

static void write_text(const char *dir, const char *name, const char *text) {
        char path[128];
        int fd;

        (void)snprintf(path, sizeof(path), "%s/%s", dir, name);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(loop_write(fd, text, strlen(text)));
        (void)close(fd);
}

TEST(history_find_takes_the_exec_and_skips_damaged_lines) {
        char dir[64], path[128];
        char *json = NULL;
        int code = 0;

        tmpdir(dir);
        (void)snprintf(path, sizeof(path), "%s/history.jsonl", dir);
        ASSERT_ERROR(exec_history_find(path, 1, &code, &json), ENOENT);
        write_text(dir, "history.jsonl",
                   "{\"id\":1,\"outcome\":{\"exit_code\":3,\"reason\":\"exited\"}}\n"
                   "not json\n"
                   "{\"id\":\"2\"}\n"
                   "{\"id\":2,\"outcome\":{\"exit_code\":143,\"reason\":\"killed\"}}\n"
                   "{\"id\":4,\"outcome\":null}");
        ASSERT_OK(exec_history_find(path, 2, &code, &json));
        ASSERT_EQ(code, 143);
        ASSERT_STREQ(json, "{\"exit_code\":143,\"reason\":\"killed\"}");
        free(json);
        json = NULL;
        ASSERT_OK(exec_history_find(path, 1, &code, NULL));
        ASSERT_EQ(code, 3);
        /* A line of its own without an exit code: -1. */
        ASSERT_OK(exec_history_find(path, 4, &code, NULL));
        ASSERT_EQ(code, -1);
        /* The twin: ids not there. */
        ASSERT_ERROR(exec_history_find(path, 3, &code, NULL), ENOENT);
        ASSERT_ERROR(exec_history_find(NULL, 1, &code, NULL), ENOENT);
        ASSERT_OK(rm_rf_at(AT_FDCWD, dir));
}

/* Pumps @len bytes through exec @id's stdout log. */
static void pump(const char *dir, uint64_t id, size_t len, ExecLogPipe p[2]) {
        int w[2];
        char buf[65536];

        memset(buf, 'a', sizeof(buf));
        ASSERT_OK(exec_log_create(dir, id, p, w));
        (void)close(w[1]);
        for (size_t done = 0; done < len;) {
                size_t n = len - done < sizeof(buf) ? len - done : sizeof(buf);

                ASSERT_OK(loop_write(w[0], buf, n));
                done += n;
                while (exec_log_pump(&p[0]) == 1) {
                        int avail = 0;

                        if (ioctl(p[0].in_fd, FIONREAD, &avail) < 0 || avail == 0)
                                break;
                }
        }
        (void)close(w[0]);
        while (exec_log_pump(&p[0]) == 1)
                ;
        ASSERT_EQ(exec_log_pump(&p[1]), 0); /* stderr: EOF, nothing */
}

static off_t size_of(const char *dir, const char *name) {
        char path[128];
        struct stat st;

        (void)snprintf(path, sizeof(path), "%s/%s", dir, name);
        ASSERT_OK(stat(path, &st));
        return st.st_size;
}

TEST(log_keeps_the_head_up_to_the_cap) {
        ExecLogPipe p[2];
        char dir[64];

        tmpdir(dir);
        pump(dir, 7, EXEC_LOG_STREAM_MAX + 100000, p);
        ASSERT_TRUE(p[0].truncated);
        ASSERT_EQ(size_of(dir, "exec-7.out"), (off_t)EXEC_LOG_STREAM_MAX);
        ASSERT_EQ(size_of(dir, "exec-7.err"), 0);
        /* The twin: under the cap, all of it and no truncation. */
        pump(dir, 8, 1000, p);
        ASSERT_FALSE(p[0].truncated);
        ASSERT_EQ(size_of(dir, "exec-8.out"), 1000);
        ASSERT_OK(rm_rf_at(AT_FDCWD, dir));
}

TEST(log_read_opens_both_streams_or_an_old_log) {
        char dir[64], buf[16];
        int dfd, fds[2];

        tmpdir(dir);
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(dfd >= 0);
        ASSERT_ERROR(exec_log_open_read_at(dfd, 1, fds), ENOENT);
        write_text(dir, "exec-1.out", "out");
        write_text(dir, "exec-1.err", "err");
        ASSERT_OK(exec_log_open_read_at(dfd, 1, fds));
        ASSERT_EQ(read(fds[1], buf, sizeof(buf)), 3);
        (void)close(fds[0]);
        (void)close(fds[1]);
        /* An older hutch's single log: stdout, and an empty stderr. */
        write_text(dir, "exec-2.log", "both");
        ASSERT_OK(exec_log_open_read_at(dfd, 2, fds));
        ASSERT_EQ(read(fds[0], buf, sizeof(buf)), 4);
        ASSERT_EQ(read(fds[1], buf, sizeof(buf)), 0);
        (void)close(fds[0]);
        (void)close(fds[1]);
        /* A log file that is a symlink is not followed: no log. */
        ASSERT_OK(symlinkat("/etc/passwd", dfd, "exec-3.out"));
        write_text(dir, "exec-3.err", "");
        ASSERT_ERROR(exec_log_open_read_at(dfd, 3, fds), ENOENT);
        (void)close(dfd);
        ASSERT_OK(rm_rf_at(AT_FDCWD, dir));
}

TEST(signal_names_both_ways) {
        ASSERT_EQ(persist_signal_parse("TERM"), SIGTERM);
        ASSERT_EQ(persist_signal_parse("SIGTERM"), SIGTERM);
        ASSERT_EQ(persist_signal_parse("sighup"), SIGHUP);
        ASSERT_EQ(persist_signal_parse("kill"), SIGKILL);
        ASSERT_EQ(persist_signal_parse("9"), SIGKILL);
        ASSERT_EQ(persist_signal_parse("USR1"), SIGUSR1);
        ASSERT_ERROR(persist_signal_parse("0"), EINVAL);
        ASSERT_ERROR(persist_signal_parse("65"), EINVAL);
        ASSERT_ERROR(persist_signal_parse("NOPE"), EINVAL);
        ASSERT_ERROR(persist_signal_parse("SIG"), EINVAL);
        ASSERT_ERROR(persist_signal_parse(""), EINVAL);
        ASSERT_ERROR(persist_signal_parse(NULL), EINVAL);
        ASSERT_ERROR(persist_signal_parse("-9"), EINVAL);
}

DEFINE_TEST_MAIN
