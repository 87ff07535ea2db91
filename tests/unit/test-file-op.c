/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The file builtin of persistent sandboxes (src/shared/file-op.h), run here
 * on a temporary directory standing in for the sandbox's "/": every errno
 * it documents, and that no path leaves the root. */
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "file-op.h"
#include "rm-rf.h"
#include "test.h"

typedef struct Fx {
        char root[64];
        int root_fd;
        char outside[64]; /* a sibling of the root, holding "secret" */
} Fx;

static void fx_init(Fx *f) {
        int fd;

        (void)snprintf(f->root, sizeof(f->root), "/tmp/test-file-op-XXXXXX");
        (void)snprintf(f->outside, sizeof(f->outside), "/tmp/test-file-op-out-XXXXXX");
        ASSERT_NOT_NULL(mkdtemp(f->root));
        ASSERT_NOT_NULL(mkdtemp(f->outside));
        f->root_fd = open(f->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(f->root_fd >= 0);
        {
                char p[128];

                (void)snprintf(p, sizeof(p), "%s/secret", f->outside);
                fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
                ASSERT_TRUE(fd >= 0);
        }
        ASSERT_OK(loop_write(fd, "SECRET", 6));
        (void)close(fd);
        ASSERT_OK(mkdirat(f->root_fd, "ws", 0755));
        ASSERT_OK(mkdirat(f->root_fd, "ws/sub", 0755));
        fd = openat(f->root_fd, "ws/hello", O_WRONLY | O_CREAT | O_CLOEXEC, 0640);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(loop_write(fd, "hello\n", 6));
        (void)close(fd);
        /* Symlinks out: absolute to the real /, relative up, and to the
         * outside file by its host path. */
        ASSERT_OK(symlinkat("/", f->root_fd, "ws/to-root"));
        ASSERT_OK(symlinkat("../../..", f->root_fd, "ws/up"));
        ASSERT_OK(symlinkat(f->outside, f->root_fd, "ws/to-outside"));
        ASSERT_OK(mkfifoat(f->root_fd, "ws/fifo", 0644));
}

static void fx_done(Fx *f) {
        (void)close(f->root_fd);
        ASSERT_OK(rm_rf_at(AT_FDCWD, f->root));
        ASSERT_OK(rm_rf_at(AT_FDCWD, f->outside));
}

static int out_new(void) {
        int fd = memfd_create("test-file-op", MFD_CLOEXEC);

        ASSERT_TRUE(fd >= 0);
        return fd;
}

/* What @fd holds, from its start, as a string. */
static char *out_take(int fd) {
        char *s = NULL;

        ASSERT_TRUE(lseek(fd, 0, SEEK_SET) == 0);
        ASSERT_OK(read_full_fd(fd, 1 << 20, &s, NULL));
        (void)close(fd);
        return s;
}

static int run(const Fx *f, FileOpAction a, const char *path, unsigned mode, uint64_t max,
               int in_fd, int out_fd) {
        return file_op_run(f->root_fd, "/ws", a, path, mode, max, NULL, in_fd, out_fd);
}

TEST(action_strings) {
        for (int i = 0; i < _FILE_OP_ACTION_MAX; i++)
                ASSERT_EQ(file_op_action_from_string(file_op_action_to_string(i)), i);
        ASSERT_STREQ(file_op_action_to_string(FILE_OP_REMOVE), "remove");
        ASSERT_NULL(file_op_action_to_string(_FILE_OP_ACTION_MAX));
        ASSERT_NULL(file_op_action_to_string(-1));
        ASSERT_ERROR(file_op_action_from_string("delete"), EINVAL);
        ASSERT_ERROR(file_op_action_from_string(NULL), EINVAL);
}

TEST(read) {
        Fx f;
        int out;
        char *s;

        fx_init(&f);
        out = out_new();
        ASSERT_OK(run(&f, FILE_OP_READ, "hello", 0, 6, -EBADF, out)); /* relative: from /ws */
        s = out_take(out);
        ASSERT_STREQ(s, "hello\n");
        free(s);
        out = out_new();
        ASSERT_OK(run(&f, FILE_OP_READ, "/ws/./sub/../hello", 0, 100, -EBADF, out));
        s = out_take(out);
        ASSERT_STREQ(s, "hello\n");
        free(s);
        out = out_new();
        ASSERT_ERROR(run(&f, FILE_OP_READ, "hello", 0, 5, -EBADF, out), EFBIG);
        ASSERT_ERROR(run(&f, FILE_OP_READ, "sub", 0, 5, -EBADF, out), EISDIR);
        ASSERT_ERROR(run(&f, FILE_OP_READ, "/", 0, 5, -EBADF, out), EISDIR);
        /* Never blocks on a FIFO. */
        ASSERT_ERROR(run(&f, FILE_OP_READ, "fifo", 0, 5, -EBADF, out), EINVAL);
        ASSERT_ERROR(run(&f, FILE_OP_READ, "none", 0, 5, -EBADF, out), ENOENT);
        ASSERT_ERROR(run(&f, FILE_OP_READ, "hello/x", 0, 5, -EBADF, out), ENOTDIR);
        ASSERT_ERROR(run(&f, FILE_OP_READ, "", 0, 5, -EBADF, out), EINVAL);
        ASSERT_ERROR(file_op_run(f.root_fd, "ws", FILE_OP_READ, "hello", 0, 5, NULL, -EBADF, out),
                     EINVAL);
        s = out_take(out);
        ASSERT_STREQ(s, "");
        free(s);
        fx_done(&f);
}

TEST(no_path_leaves_the_root) {
        char path[256], *s;
        Fx f;
        int out;

        fx_init(&f);
        out = out_new();
        /* ".." never above the root. */
        (void)snprintf(path, sizeof(path), "../../..%s/secret", f.outside);
        ASSERT_ERROR(run(&f, FILE_OP_READ, path, 0, 100, -EBADF, out), EXDEV);
        ASSERT_ERROR(run(&f, FILE_OP_READ, "/..", 0, 100, -EBADF, out), EXDEV);
        /* No symlink is followed, anywhere in the path. */
        (void)snprintf(path, sizeof(path), "to-root%s/secret", f.outside);
        ASSERT_ERROR(run(&f, FILE_OP_READ, path, 0, 100, -EBADF, out), ELOOP);
        ASSERT_ERROR(run(&f, FILE_OP_READ, "to-outside/secret", 0, 100, -EBADF, out), ELOOP);
        ASSERT_ERROR(run(&f, FILE_OP_READ, "up/etc/passwd", 0, 100, -EBADF, out), ELOOP);
        ASSERT_ERROR(run(&f, FILE_OP_LIST, "to-root", 0, 0, -EBADF, out), ELOOP);
        ASSERT_ERROR(run(&f, FILE_OP_READ, "to-root", 0, 100, -EBADF, out), ELOOP);
        ASSERT_ERROR(run(&f, FILE_OP_REMOVE, "to-root/tmp", 0, 0, -EBADF, out), ELOOP);
        ASSERT_ERROR(run(&f, FILE_OP_STAT, "to-outside/secret", 0, 0, -EBADF, out), ELOOP);
        /* The host path itself is just a path below the root. */
        (void)snprintf(path, sizeof(path), "%s/secret", f.outside);
        ASSERT_ERROR(run(&f, FILE_OP_READ, path, 0, 100, -EBADF, out), ENOENT);
        s = out_take(out);
        ASSERT_STREQ(s, "");
        free(s);
        fx_done(&f);
}

TEST(write) {
        int in, out;
        struct stat st;
        char *s;
        Fx f;

        fx_init(&f);
        in = out_new();
        ASSERT_OK(loop_write(in, "new data", 8));
        ASSERT_TRUE(lseek(in, 0, SEEK_SET) == 0);
        ASSERT_OK(run(&f, FILE_OP_WRITE, "sub/new", 0600, 0, in, -EBADF));
        ASSERT_OK(fstatat(f.root_fd, "ws/sub/new", &st, AT_SYMLINK_NOFOLLOW));
        ASSERT_EQ(st.st_mode & 07777, 0600);
        ASSERT_EQ(st.st_size, 8);
        /* An existing file keeps its mode. */
        ASSERT_TRUE(lseek(in, 0, SEEK_SET) == 0);
        ASSERT_OK(run(&f, FILE_OP_WRITE, "hello", 0777, 0, in, -EBADF));
        ASSERT_OK(fstatat(f.root_fd, "ws/hello", &st, AT_SYMLINK_NOFOLLOW));
        ASSERT_EQ(st.st_mode & 07777, 0640);
        out = out_new();
        ASSERT_OK(run(&f, FILE_OP_READ, "hello", 0, 100, -EBADF, out));
        s = out_take(out);
        ASSERT_STREQ(s, "new data");
        free(s);
        /* A symlink is replaced, its target untouched. */
        ASSERT_TRUE(lseek(in, 0, SEEK_SET) == 0);
        ASSERT_OK(run(&f, FILE_OP_WRITE, "to-outside", 0644, 0, in, -EBADF));
        ASSERT_OK(fstatat(f.root_fd, "ws/to-outside", &st, AT_SYMLINK_NOFOLLOW));
        ASSERT_TRUE(S_ISREG(st.st_mode));
        {
                char p[128], *secret = NULL;

                (void)snprintf(p, sizeof(p), "%s/secret", f.outside);
                ASSERT_OK(read_full_file(p, 100, &secret));
                ASSERT_STREQ(secret, "SECRET");
                free(secret);
        }
        ASSERT_ERROR(run(&f, FILE_OP_WRITE, "sub", 0644, 0, in, -EBADF), EISDIR);
        ASSERT_ERROR(run(&f, FILE_OP_WRITE, "/", 0644, 0, in, -EBADF), EBUSY);
        ASSERT_ERROR(run(&f, FILE_OP_WRITE, "x", 01000, 0, in, -EBADF), EINVAL);
        ASSERT_ERROR(run(&f, FILE_OP_WRITE, "none/x", 0644, 0, in, -EBADF), ENOENT);
        ASSERT_ERROR(run(&f, FILE_OP_WRITE, "to-root/x", 0644, 0, in, -EBADF), ELOOP);
        (void)close(in);
        /* No temporary file is left behind. */
        out = out_new();
        ASSERT_OK(run(&f, FILE_OP_LIST, "/ws/sub", 0, 0, -EBADF, out));
        s = out_take(out);
        ASSERT_NULL(strstr(s, ".hutch-"));
        free(s);
        fx_done(&f);
}

TEST(list_and_stat) {
        char *s;
        int out;
        Fx f;

        fx_init(&f);
        ASSERT_OK(mknodat(f.root_fd, "ws/sub/\xff\xfe", S_IFREG | 0600, 0));
        out = out_new();
        ASSERT_OK(run(&f, FILE_OP_LIST, "sub", 0, 0, -EBADF, out));
        s = out_take(out);
        /* A name that is not UTF-8 comes in hex. */
        ASSERT_NOT_NULL(strstr(s, "\"name_hex\":\"fffe\""));
        ASSERT_NOT_NULL(strstr(s, "\"type\":\"file\""));
        ASSERT_NOT_NULL(strstr(s, "\"mode\":384"));
        free(s);
        out = out_new();
        ASSERT_OK(run(&f, FILE_OP_STAT, "to-root", 0, 0, -EBADF, out));
        s = out_take(out);
        ASSERT_NOT_NULL(strstr(s, "\"name\":\"to-root\""));
        ASSERT_NOT_NULL(strstr(s, "\"type\":\"symlink\""));
        free(s);
        out = out_new();
        ASSERT_OK(run(&f, FILE_OP_STAT, "/", 0, 0, -EBADF, out));
        s = out_take(out);
        ASSERT_NOT_NULL(strstr(s, "\"name\":\"/\""));
        ASSERT_NOT_NULL(strstr(s, "\"type\":\"dir\""));
        free(s);
        out = out_new();
        ASSERT_OK(run(&f, FILE_OP_LIST, "/", 0, 0, -EBADF, out));
        s = out_take(out);
        ASSERT_NOT_NULL(strstr(s, "\"name\":\"ws\""));
        free(s);
        out = out_new();
        ASSERT_ERROR(run(&f, FILE_OP_LIST, "hello", 0, 0, -EBADF, out), ENOTDIR);
        ASSERT_ERROR(run(&f, FILE_OP_STAT, "none", 0, 0, -EBADF, out), ENOENT);
        (void)close(out);
        fx_done(&f);
}

TEST(remove) {
        struct stat st;
        Fx f;

        fx_init(&f);
        ASSERT_OK(run(&f, FILE_OP_REMOVE, "hello", 0, 0, -EBADF, -EBADF));
        ASSERT_TRUE(fstatat(f.root_fd, "ws/hello", &st, AT_SYMLINK_NOFOLLOW) < 0);
        /* A symlink itself, not what it points to. */
        ASSERT_OK(run(&f, FILE_OP_REMOVE, "to-outside", 0, 0, -EBADF, -EBADF));
        ASSERT_OK(access(f.outside, F_OK));
        ASSERT_ERROR(run(&f, FILE_OP_REMOVE, "/ws", 0, 0, -EBADF, -EBADF), ENOTEMPTY);
        ASSERT_OK(run(&f, FILE_OP_REMOVE, "sub", 0, 0, -EBADF, -EBADF));
        ASSERT_ERROR(run(&f, FILE_OP_REMOVE, "sub", 0, 0, -EBADF, -EBADF), ENOENT);
        ASSERT_ERROR(run(&f, FILE_OP_REMOVE, "/", 0, 0, -EBADF, -EBADF), EBUSY);
        fx_done(&f);
}

/* A memfd holding @s, at offset 0: the destination of a move. */
static int in_str(const char *s) {
        int fd = out_new();

        ASSERT_OK(loop_write(fd, s, strlen(s)));
        ASSERT_TRUE(lseek(fd, 0, SEEK_SET) == 0);
        return fd;
}

TEST(mkdir_and_parents) {
        struct stat st;
        Fx f;
        int in;

        fx_init(&f);
        ASSERT_OK(run(&f, FILE_OP_MKDIR, "new", 0700, 0, -EBADF, -EBADF));
        ASSERT_OK(fstatat(f.root_fd, "ws/new", &st, 0));
        ASSERT_TRUE(S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700);
        ASSERT_ERROR(run(&f, FILE_OP_MKDIR, "new", 0700, 0, -EBADF, -EBADF), EEXIST);
        ASSERT_OK(run(&f, FILE_OP_MKDIR, "new", 0700 | FILE_OP_PARENTS, 0, -EBADF, -EBADF));
        ASSERT_ERROR(run(&f, FILE_OP_MKDIR, "hello", 0755 | FILE_OP_PARENTS, 0, -EBADF, -EBADF),
                     EEXIST);
        ASSERT_ERROR(run(&f, FILE_OP_MKDIR, "a/b/c", 0755, 0, -EBADF, -EBADF), ENOENT);
        ASSERT_OK(run(&f, FILE_OP_MKDIR, "a/b/c", 0755 | FILE_OP_PARENTS, 0, -EBADF, -EBADF));
        ASSERT_OK(fstatat(f.root_fd, "ws/a/b/c", &st, 0));
        ASSERT_ERROR(run(&f, FILE_OP_MKDIR, "x", 01755, 0, -EBADF, -EBADF), EINVAL);
        /* SECURITY: parents never go through a symlink, to the root or out. */
        ASSERT_ERROR(
                run(&f, FILE_OP_MKDIR, "to-root/tmp/x", 0755 | FILE_OP_PARENTS, 0, -EBADF, -EBADF),
                ELOOP);
        ASSERT_ERROR(
                run(&f, FILE_OP_MKDIR, "to-outside/x", 0755 | FILE_OP_PARENTS, 0, -EBADF, -EBADF),
                ELOOP);
        ASSERT_ERROR(run(&f, FILE_OP_MKDIR, "/../../x", 0755 | FILE_OP_PARENTS, 0, -EBADF, -EBADF),
                     EXDEV);
        /* A write with parents likewise. */
        in = in_str("data");
        ASSERT_OK(run(&f, FILE_OP_WRITE, "p/q/file", 0644 | FILE_OP_PARENTS, 0, in, -EBADF));
        (void)close(in);
        ASSERT_OK(fstatat(f.root_fd, "ws/p/q/file", &st, 0));
        in = in_str("data");
        ASSERT_ERROR(
                run(&f, FILE_OP_WRITE, "to-outside/y/file", 0644 | FILE_OP_PARENTS, 0, in, -EBADF),
                ELOOP);
        (void)close(in);
        ASSERT_TRUE(faccessat(AT_FDCWD, f.outside, F_OK, 0) == 0);
        fx_done(&f);
}

TEST(move) {
        struct stat st;
        Fx f;
        int in;

        fx_init(&f);
        in = in_str("moved");
        ASSERT_OK(run(&f, FILE_OP_MOVE, "hello", 0, 0, in, -EBADF));
        (void)close(in);
        ASSERT_OK(fstatat(f.root_fd, "ws/moved", &st, 0));
        ASSERT_TRUE(fstatat(f.root_fd, "ws/hello", &st, 0) < 0 && errno == ENOENT);
        /* No replacing without the flag. */
        ASSERT_OK(mkdirat(f.root_fd, "ws/d", 0755));
        in = in_str("");
        ASSERT_OK(run(&f, FILE_OP_WRITE, "d/other", 0644, 0, in, -EBADF));
        (void)close(in);
        in = in_str("d/other");
        ASSERT_ERROR(run(&f, FILE_OP_MOVE, "moved", 0, 0, in, -EBADF), EEXIST);
        (void)close(in);
        in = in_str("d/other");
        ASSERT_OK(run(&f, FILE_OP_MOVE, "moved", FILE_OP_REPLACE, 0, in, -EBADF));
        (void)close(in);
        /* The destination is resolved as a path is: no symlink, no way up. */
        in = in_str("to-outside/stolen");
        ASSERT_ERROR(run(&f, FILE_OP_MOVE, "d/other", 0, 0, in, -EBADF), ELOOP);
        (void)close(in);
        in = in_str("/../../../stolen");
        ASSERT_ERROR(run(&f, FILE_OP_MOVE, "d/other", 0, 0, in, -EBADF), EXDEV);
        (void)close(in);
        in = in_str("new/dir/other");
        ASSERT_ERROR(run(&f, FILE_OP_MOVE, "d/other", 0, 0, in, -EBADF), ENOENT);
        (void)close(in);
        in = in_str("new/dir/other");
        ASSERT_OK(run(&f, FILE_OP_MOVE, "d/other", FILE_OP_PARENTS, 0, in, -EBADF));
        (void)close(in);
        ASSERT_OK(fstatat(f.root_fd, "ws/new/dir/other", &st, 0));
        in = in_str("");
        ASSERT_ERROR(run(&f, FILE_OP_MOVE, "d", 0, 0, in, -EBADF), EINVAL);
        (void)close(in);
        in = in_str("x");
        ASSERT_ERROR(run(&f, FILE_OP_MOVE, "/", 0, 0, in, -EBADF), EBUSY);
        (void)close(in);
        fx_done(&f);
}

TEST(walk) {
        char *s;
        Fx f;
        int out;

        fx_init(&f);
        ASSERT_OK(mkdirat(f.root_fd, "ws/sub/deeper", 0755));
        out = out_new();
        ASSERT_OK(run(&f, FILE_OP_WALK, "/ws", 0, 0, -EBADF, out));
        s = out_take(out);
        ASSERT_NOT_NULL(strstr(s, "\"name\":\"sub/deeper\""));
        ASSERT_NOT_NULL(strstr(s, "\"name\":\"hello\""));
        /* SECURITY: symlinks are entries, never walked into. */
        ASSERT_NOT_NULL(strstr(s, "\"name\":\"to-outside\",\"type\":\"symlink\""));
        ASSERT_NULL(strstr(s, "secret"));
        ASSERT_NULL(strstr(s, "to-root/"));
        free(s);
        out = out_new();
        ASSERT_OK(run(&f, FILE_OP_WALK, "/ws", 0, 1, -EBADF, out));
        s = out_take(out);
        ASSERT_NOT_NULL(strstr(s, "\"name\":\"sub\""));
        ASSERT_NULL(strstr(s, "sub/deeper"));
        free(s);
        out = out_new();
        ASSERT_ERROR(run(&f, FILE_OP_WALK, "to-outside", 0, 0, -EBADF, out), ELOOP);
        ASSERT_ERROR(run(&f, FILE_OP_WALK, "hello", 0, 0, -EBADF, out), ENOTDIR);
        (void)close(out);
        fx_done(&f);
}

TEST(long_paths) {
        char name[NAME_MAX + 2];
        char *path;
        Fx f;

        fx_init(&f);
        memset(name, 'a', sizeof(name) - 1);
        name[sizeof(name) - 1] = '\0';
        ASSERT_ERROR(run(&f, FILE_OP_STAT, name, 0, 0, -EBADF, -EBADF), ENAMETOOLONG);
        path = malloc(PATH_MAX + 1);
        ASSERT_NOT_NULL(path);
        memset(path, 'b', PATH_MAX);
        path[PATH_MAX] = '\0';
        ASSERT_ERROR(run(&f, FILE_OP_STAT, path, 0, 0, -EBADF, -EBADF), ENAMETOOLONG);
        free(path);
        fx_done(&f);
}

/* The owner of what write, mkdir and move create (issue 20). Unit tests
 * run unprivileged: the caller's own ids can be given, another uid is
 * -EPERM (the kernel's answer without CAP_CHOWN, or for an unmapped id);
 * the integration tests (test_e2b_file_owner.py) give other users. */
TEST(owner) {
        FileOpOwner me = {.uid = geteuid(), .gid = getegid()};
        FileOpOwner other = {.uid = geteuid() + 1, .gid = getegid()};
        struct stat st;
        Fx f;
        int in;

        fx_init(&f);
        in = out_new();
        ASSERT_OK(loop_write(in, "x", 1));
        ASSERT_TRUE(lseek(in, 0, SEEK_SET) == 0);
        ASSERT_OK(file_op_run(f.root_fd, "/ws", FILE_OP_WRITE, "new/a", 0644 | FILE_OP_PARENTS, 0,
                              &me, in, -EBADF));
        ASSERT_OK(fstatat(f.root_fd, "ws/new/a", &st, AT_SYMLINK_NOFOLLOW));
        ASSERT_EQ(st.st_uid, me.uid);
        ASSERT_EQ(st.st_mode & 07777, 0644U);
        ASSERT_OK(file_op_run(f.root_fd, "/ws", FILE_OP_MKDIR, "d1/d2", 0700 | FILE_OP_PARENTS, 0,
                              &me, -EBADF, -EBADF));
        ASSERT_OK(fstatat(f.root_fd, "ws/d1/d2", &st, AT_SYMLINK_NOFOLLOW));
        ASSERT_EQ(st.st_mode & 07777, 0700U);
        /* Only what creates has an owner. */
        ASSERT_ERROR(file_op_run(f.root_fd, "/ws", FILE_OP_READ, "hello", 0, 10, &me, -EBADF, in),
                     EINVAL);
        ASSERT_ERROR(
                file_op_run(f.root_fd, "/ws", FILE_OP_REMOVE, "hello", 0, 0, &me, -EBADF, -EBADF),
                EINVAL);
        /* SECURITY: a symlink in the way is never followed, owner or not;
         * nothing is made or given outside. */
        ASSERT_ERROR(file_op_run(f.root_fd, "/ws", FILE_OP_MKDIR, "to-outside/x",
                                 0755 | FILE_OP_PARENTS, 0, &me, -EBADF, -EBADF),
                     ELOOP);
        ASSERT_ERROR(file_op_run(f.root_fd, "/ws", FILE_OP_WRITE, "to-outside/secret", 0644, 0, &me,
                                 in, -EBADF),
                     ELOOP);
        if (geteuid() != 0) {
                ASSERT_TRUE(lseek(in, 0, SEEK_SET) == 0);
                ASSERT_ERROR(file_op_run(f.root_fd, "/ws", FILE_OP_WRITE, "b", 0644, 0, &other, in,
                                         -EBADF),
                             EPERM);
                /* Not left behind half-made. */
                ASSERT_ERROR(fstatat(f.root_fd, "ws/b", &st, AT_SYMLINK_NOFOLLOW), ENOENT);
                ASSERT_ERROR(file_op_run(f.root_fd, "/ws", FILE_OP_MKDIR, "c", 0755, 0, &other,
                                         -EBADF, -EBADF),
                             EPERM);
        }
        (void)close(in);
        fx_done(&f);
}

TEST(main_resolves_the_user) {
        /* The test's own "/": a name no /etc/passwd has is FILE_OP_NO_USER;
         * a known one ("root" needs no file) gets to the operation. */
        char *unknown[] = {(char *)FILE_OP_ARGV0,     "mkdir", "/nonexistent-dir/x", "493", "0",
                           "no-such-user-hutch-test", NULL};
        char *root[] = {
                (char *)FILE_OP_ARGV0, "mkdir", "/nonexistent-dir/x", "493", "0", "root", NULL};

        ASSERT_EQ(file_op_main("/", unknown), FILE_OP_NO_USER);
        ASSERT_EQ(file_op_main("/", root), ENOENT);
}

TEST(main_parses_argv) {
        char *bad_action[] = {(char *)FILE_OP_ARGV0, "copy", "/x", "0", "0", NULL};
        char *bad_mode[] = {(char *)FILE_OP_ARGV0, "stat", "/x", "-1", "0", NULL};
        char *empty_user[] = {(char *)FILE_OP_ARGV0, "mkdir", "/x", "493", "0", "", NULL};
        char *short_argv[] = {(char *)FILE_OP_ARGV0, "stat", "/x", NULL};

        ASSERT_EQ(file_op_main("/", bad_action), EINVAL);
        ASSERT_EQ(file_op_main("/", bad_mode), EINVAL);
        ASSERT_EQ(file_op_main("/", short_argv), EINVAL);
        ASSERT_EQ(file_op_main("/", empty_user), EINVAL);
}

DEFINE_TEST_MAIN
