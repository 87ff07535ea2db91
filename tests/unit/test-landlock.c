/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "ns/landlock.h"
#include "test.h"

/* In a child: reports a failed check on stderr and exits with 1. */
#define CHILD_CHECK(cond)                                                                          \
        do {                                                                                       \
                if (!(cond)) {                                                                     \
                        fprintf(stderr, "%s:%d: child check failed: %s (errno: %s)\n", __FILE__,   \
                                __LINE__, #cond, strerror(errno));                                 \
                        _exit(1);                                                                  \
                }                                                                                  \
        } while (0)

/* In a child: @expr must fail with -1 and errno @err. */
#define CHILD_CHECK_ERRNO(expr, err)                                                               \
        do {                                                                                       \
                errno = 0;                                                                         \
                long _r_ = (long)(expr);                                                           \
                if (_r_ != -1 || errno != (err)) {                                                 \
                        fprintf(stderr,                                                            \
                                "%s:%d: child check failed: %s = %ld (errno: %s), "                \
                                "expected -1 with %s\n",                                           \
                                __FILE__, __LINE__, #expr, _r_, strerror(errno), #err);            \
                        _exit(1);                                                                  \
                }                                                                                  \
        } while (0)

#define ASSERT_CHILD_EXITED_OK(status)                                                             \
        do {                                                                                       \
                int _s_ = (status);                                                                \
                if (!WIFEXITED(_s_) || WEXITSTATUS(_s_) != 0)                                      \
                        fail_msg("%s:%d: child failed: %s %d", __FILE__, __LINE__,                 \
                                 WIFEXITED(_s_) ? "exit" : "signal",                               \
                                 WIFEXITED(_s_) ? WEXITSTATUS(_s_) : WTERMSIG(_s_));               \
        } while (0)

/* Skips when Landlock is missing, but only when the kernel says so: with
 * "landlock" in the LSM list, or when the list cannot be read, -EOPNOTSUPP
 * is a failure (as is any skip under HUTCH_TEST_MUST_WORK). */
static void require_landlock(void) {
        _cleanup_free_ char *lsm = NULL;
        int abi = landlock_get_abi();

        if (abi > 0)
                return;
        ASSERT_ERROR(abi, EOPNOTSUPP);
        if (read_full_file("/sys/kernel/security/lsm", 4096, &lsm) < 0)
                fail_msg("landlock_get_abi() = -EOPNOTSUPP and /sys/kernel/security/lsm "
                         "is unreadable: cannot tell whether that is expected");
        if (strstr(lsm, "landlock"))
                fail_msg("landlock is in the LSM list (%s) but landlock_get_abi() failed", lsm);
        if (getenv("HUTCH_TEST_MUST_WORK"))
                fail_msg("landlock is not enabled and HUTCH_TEST_MUST_WORK is set");
        fprintf(stderr, "skip: landlock is not enabled in this kernel (lsm=%s)\n", lsm);
        skip();
}

TEST(get_abi) {
        int abi;

        require_landlock();
        abi = landlock_get_abi();
        ASSERT_TRUE(abi >= 1);
        fprintf(stderr, "landlock ABI %d\n", abi);
}

/* A temporary tree, used through relative paths from its top:
 *   A/            writable
 *   A/moveme      to be moved around
 *   B/            not writable
 *   B/existing    "hello"
 *   file-w        a writable regular file */
typedef struct Tree {
        char base[64];
        int fd;
} Tree;

static void tree_write(int dirfd, const char *path, const char *content) {
        _cleanup_close_ int fd = -EBADF;

        fd = openat(dirfd, path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(loop_write(fd, content, strlen(content)));
}

static void tree_make(Tree *t) {
        strcpy(t->base, "/tmp/hutch-test-landlock-XXXXXX");
        ASSERT_NOT_NULL(mkdtemp(t->base));
        t->fd = open(t->base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(t->fd >= 0);
        ASSERT_EQ(mkdirat(t->fd, "A", 0755), 0);
        ASSERT_EQ(mkdirat(t->fd, "B", 0755), 0);
        tree_write(t->fd, "B/existing", "hello");
        tree_write(t->fd, "A/moveme", "move");
        tree_write(t->fd, "file-w", "w");
}

/* Removes what tree_make() and the children may have created. */
static void tree_remove(Tree *t) {
        static const char *const files[] = {
                "A/new", "A/moveme", "A/renamed", "A/link", "A/sub/moveme", "A/fifo", "B/existing",
                "B/new", "B/moveme", "B/fifo",    "B/link", "new",          "file-w",
        };
        static const char *const dirs[] = {"A/sub", "B/sub", "A", "B"};

        for (size_t i = 0; i < ELEMENTSOF(files); i++)
                (void)unlinkat(t->fd, files[i], 0);
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++)
                (void)unlinkat(t->fd, dirs[i], AT_REMOVEDIR);
        t->fd = safe_close(t->fd);
        ASSERT_EQ(rmdir(t->base), 0);
}

typedef int (*ChildFn)(const Tree *t);

/* Makes a tree, runs @fn in a forked child whose cwd is the tree's top,
 * removes the tree, and then asserts that the child exited with 0 (so a
 * failing child leaves nothing behind in /tmp). */
static void run_child_in_tree(ChildFn fn) {
        int status = 0;
        pid_t pid;
        Tree t;

        tree_make(&t);
        pid = fork();
        if (pid == 0) {
                if (fchdir(t.fd) < 0)
                        _exit(3);
                _exit(fn(&t));
        }
        if (pid > 0 && waitpid(pid, &status, 0) != pid)
                status = -1;
        tree_remove(&t);
        ASSERT_TRUE(pid > 0);
        ASSERT_CHILD_EXITED_OK(status);
}

static void child_set_nnp(void) {
        CHILD_CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1UL, 0UL, 0UL, 0UL) == 0);
}

static int child_create_write(const char *path) {
        _cleanup_close_ int fd = -EBADF;

        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
                return -1;
        if (write(fd, "x", 1) != 1)
                return -1;
        return 0;
}

static int child_restricted(const Tree *t) {
        char *const writable[] = {"A", "file-w", NULL};
        _cleanup_close_ int before = -EBADF, fd = -EBADF;
        char buf[16] = {};
        DIR *d;
        int r;

        /* Opened for writing before the restriction: stays usable. */
        before = open("B/existing", O_WRONLY | O_APPEND | O_CLOEXEC);
        CHILD_CHECK(before >= 0);

        child_set_nnp();
        r = landlock_restrict_writes(writable);
        if (r < 0) {
                fprintf(stderr, "landlock_restrict_writes: %s\n", strerror(-r));
                return 2;
        }

        /* Writable beneath A: create, write, truncate, mkdir, rename across
         * directories (REFER), symlink, fifo, unlink, rmdir. */
        CHILD_CHECK(child_create_write("A/new") == 0);
        CHILD_CHECK(truncate("A/new", 0) == 0);
        CHILD_CHECK(mkdir("A/sub", 0755) == 0);
        CHILD_CHECK(rename("A/moveme", "A/sub/moveme") == 0);
        CHILD_CHECK(rename("A/sub/moveme", "A/moveme") == 0);
        CHILD_CHECK(symlink("new", "A/link") == 0);
        CHILD_CHECK(mkfifo("A/fifo", 0600) == 0);
        CHILD_CHECK(unlink("A/link") == 0);
        CHILD_CHECK(unlink("A/fifo") == 0);
        CHILD_CHECK(unlink("A/new") == 0);
        CHILD_CHECK(rmdir("A/sub") == 0);

        /* A writable regular file: write and truncate, nothing more. */
        CHILD_CHECK(child_create_write("file-w") == 0);
        CHILD_CHECK(truncate("file-w", 0) == 0);

        /* Not writable: B, and the tree's top. */
        CHILD_CHECK_ERRNO(open("B/new", O_WRONLY | O_CREAT | O_CLOEXEC, 0644), EACCES);
        CHILD_CHECK_ERRNO(open("B/existing", O_WRONLY | O_CLOEXEC), EACCES);
        CHILD_CHECK_ERRNO(open("B/existing", O_RDONLY | O_TRUNC | O_CLOEXEC), EACCES);
        CHILD_CHECK_ERRNO(truncate("B/existing", 0), EACCES);
        CHILD_CHECK_ERRNO(unlink("B/existing"), EACCES);
        CHILD_CHECK_ERRNO(mkdir("B/sub", 0755), EACCES);
        CHILD_CHECK_ERRNO(mkfifo("B/fifo", 0600), EACCES);
        CHILD_CHECK_ERRNO(symlink("existing", "B/link"), EACCES);
        CHILD_CHECK_ERRNO(rename("A/moveme", "B/moveme"), EACCES);
        CHILD_CHECK_ERRNO(link("A/moveme", "B/moveme"), EACCES);
        CHILD_CHECK_ERRNO(rename("B/existing", "A/renamed"), EACCES);
        CHILD_CHECK_ERRNO(open("new", O_WRONLY | O_CREAT | O_CLOEXEC, 0644), EACCES);
        /* A device is a path too: /dev/null was not listed. */
        CHILD_CHECK_ERRNO(open("/dev/null", O_WRONLY | O_CLOEXEC), EACCES);

        /* Reads stay allowed everywhere. */
        fd = open("B/existing", O_RDONLY | O_CLOEXEC);
        CHILD_CHECK(fd >= 0);
        CHILD_CHECK(read(fd, buf, sizeof(buf) - 1) == 5);
        CHILD_CHECK(strcmp(buf, "hello") == 0);
        d = opendir("B");
        CHILD_CHECK(d != NULL);
        CHILD_CHECK(readdir(d) != NULL);
        (void)closedir(d);
        CHILD_CHECK(access("/bin/sh", X_OK) == 0);

        /* The fd opened before is not affected. */
        CHILD_CHECK(write(before, "!", 1) == 1);
        return 0;
}

TEST(restrict_writes) {
        require_landlock();
        run_child_in_tree(child_restricted);
}

static int child_restricted_paths(const Tree *t) {
        _cleanup_close_ int b = open("B", O_PATH | O_DIRECTORY | O_CLOEXEC), fd = -EBADF;
        const LandlockPath paths[] = {
                {.path = "A", .write = true},
                {.path = NULL, .fd = b},
                {.path = "/nonexistent-hutch-test", .optional = true},
        };
        char buf[16] = {};
        int r;

        CHILD_CHECK(b >= 0);
        child_set_nnp();
        /* A missing path that is not optional: nothing is restricted. */
        CHILD_CHECK(landlock_restrict_paths((LandlockPath[]){{.path = "/nonexistent-hutch-test"}},
                                            1) == -ENOENT);
        CHILD_CHECK(child_create_write("file-w") == 0);
        r = landlock_restrict_paths(paths, ELEMENTSOF(paths));
        if (r < 0) {
                fprintf(stderr, "landlock_restrict_paths: %s\n", strerror(-r));
                return 2;
        }
        /* A: read and write. */
        CHILD_CHECK(child_create_write("A/new") == 0);
        CHILD_CHECK(unlink("A/new") == 0);
        /* B (a descriptor's rule): read and list only. */
        fd = open("B/existing", O_RDONLY | O_CLOEXEC);
        CHILD_CHECK(fd >= 0);
        CHILD_CHECK(read(fd, buf, sizeof(buf) - 1) == 5);
        CHILD_CHECK_ERRNO(open("B/new", O_WRONLY | O_CREAT | O_CLOEXEC, 0644), EACCES);
        /* Anything else: not even read, listed or executed. */
        CHILD_CHECK_ERRNO(open("file-w", O_RDONLY | O_CLOEXEC), EACCES);
        CHILD_CHECK_ERRNO(open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), EACCES);
        CHILD_CHECK_ERRNO(open("/etc/hostname", O_RDONLY | O_CLOEXEC), EACCES);
        CHILD_CHECK_ERRNO(open("/bin/sh", O_RDONLY | O_CLOEXEC), EACCES);
        /* From ABI 6: no signal out of the domain (the test, its parent,
         * has the same uid). */
        if (landlock_get_abi() >= 6)
                CHILD_CHECK_ERRNO(kill(getppid(), 0), EPERM);
        return 0;
}

TEST(restrict_paths) {
        require_landlock();
        run_child_in_tree(child_restricted_paths);
}

static int child_unrestricted(const Tree *t) {
        /* Twin: without the restriction the same writes to B succeed. */
        CHILD_CHECK(child_create_write("B/new") == 0);
        CHILD_CHECK(unlink("B/new") == 0);
        CHILD_CHECK(rename("A/moveme", "B/moveme") == 0);
        CHILD_CHECK(rename("B/moveme", "A/moveme") == 0);
        CHILD_CHECK(mkdir("B/sub", 0755) == 0);
        CHILD_CHECK(rmdir("B/sub") == 0);
        return 0;
}

TEST(without_restriction_writes_succeed) {
        run_child_in_tree(child_unrestricted);
}

static int child_device_rule(const Tree *t) {
        char *const writable[] = {"/dev/null", NULL};
        _cleanup_close_ int fd = -EBADF;

        child_set_nnp();
        CHILD_CHECK(landlock_restrict_writes(writable) == 0);
        /* A char device gets the file rights: writing works. */
        fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
        CHILD_CHECK(fd >= 0);
        CHILD_CHECK(write(fd, "x", 1) == 1);
        CHILD_CHECK_ERRNO(open("A/new", O_WRONLY | O_CREAT | O_CLOEXEC, 0644), EACCES);
        return 0;
}

TEST(restrict_writes_char_device) {
        require_landlock();
        run_child_in_tree(child_device_rule);
}

static int child_nothing_writable(const Tree *t) {
        child_set_nnp();
        CHILD_CHECK(landlock_restrict_writes(NULL) == 0);
        CHILD_CHECK_ERRNO(open("A/new", O_WRONLY | O_CREAT | O_CLOEXEC, 0644), EACCES);
        CHILD_CHECK(access("B/existing", R_OK) == 0);
        return 0;
}

TEST(restrict_writes_null_means_nothing_writable) {
        require_landlock();
        run_child_in_tree(child_nothing_writable);
}

static int child_missing_path(const Tree *t) {
        char *const writable[] = {"A", "does-not-exist", NULL};
        int r;

        child_set_nnp();
        r = landlock_restrict_writes(writable);
        CHILD_CHECK(r == -ENOENT);
        /* Nothing was restricted. */
        CHILD_CHECK(child_create_write("B/new") == 0);
        CHILD_CHECK(unlink("B/new") == 0);
        return 0;
}

TEST(restrict_writes_missing_path_is_enoent) {
        require_landlock();
        run_child_in_tree(child_missing_path);
}

static int child_no_nnp(const Tree *t) {
        char *const writable[] = {"A", NULL};
        struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3};
        struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};

        /* Neither no_new_privs nor an effective CAP_SYS_ADMIN. */
        CHILD_CHECK(syscall(SYS_capget, &header, data) == 0);
        for (size_t i = 0; i < ELEMENTSOF(data); i++)
                data[i].effective = 0;
        CHILD_CHECK(syscall(SYS_capset, &header, data) == 0);
        CHILD_CHECK(prctl(PR_GET_NO_NEW_PRIVS, 0UL, 0UL, 0UL, 0UL) == 0);

        CHILD_CHECK(landlock_restrict_writes(writable) == -EPERM);
        CHILD_CHECK(child_create_write("B/new") == 0);
        CHILD_CHECK(unlink("B/new") == 0);
        return 0;
}

TEST(restrict_writes_without_no_new_privs_is_eperm) {
        require_landlock();
        run_child_in_tree(child_no_nnp);
}

static int child_too_deep(const Tree *t) {
        char *const writable[] = {"A", NULL};
        int r;

        child_set_nnp();
        /* The kernel allows 16 nested domains (LANDLOCK_MAX_NUM_LAYERS). */
        for (int i = 0; i < 16; i++) {
                r = landlock_restrict_writes(writable);
                CHILD_CHECK(r == 0);
        }
        CHILD_CHECK(landlock_restrict_writes(writable) == -E2BIG);
        return 0;
}

TEST(restrict_writes_nesting_limit_is_e2big) {
        require_landlock();
        run_child_in_tree(child_too_deep);
}

DEFINE_TEST_MAIN
