/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "parse-util.h"
#include "sandbox/copy.h"
#include "sandbox/file-op.h"
#include "strv.h"

static const char *const action_table[_FILE_OP_ACTION_MAX] = {
        [FILE_OP_READ] = "read", [FILE_OP_WRITE] = "write",   [FILE_OP_LIST] = "list",
        [FILE_OP_STAT] = "stat", [FILE_OP_REMOVE] = "remove",
};

const char *file_op_action_to_string(FileOpAction a) {
        if (a < 0 || a >= _FILE_OP_ACTION_MAX)
                return NULL;
        return action_table[a];
}

FileOpAction file_op_action_from_string(const char *s) {
        if (!s)
                return _FILE_OP_ACTION_INVALID;
        for (int i = 0; i < _FILE_OP_ACTION_MAX; i++)
                if (strcmp(action_table[i], s) == 0)
                        return (FileOpAction)i;
        return _FILE_OP_ACTION_INVALID;
}

/* The components of @path (from @cwd when relative) with "." and ".."
 * resolved lexically; none for "/". */
static int path_components(const char *cwd, const char *path, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        _cleanup_free_ char *full = NULL;
        size_t n = 0;
        char *save = NULL;

        if (!path || !path[0] || !cwd || cwd[0] != '/')
                return -EINVAL;
        if (strlen(path) >= PATH_MAX)
                return -ENAMETOOLONG;
        if (path[0] == '/')
                full = strdup(path);
        else if (asprintf(&full, "%s/%s", cwd, path) < 0)
                full = NULL;
        if (!full)
                return -ENOMEM;
        for (char *c = strtok_r(full, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
                int r;

                if (strcmp(c, ".") == 0)
                        continue;
                if (strcmp(c, "..") == 0) {
                        /* SECURITY: never above the sandbox's root. */
                        if (n == 0)
                                return -EXDEV;
                        free(l[--n]);
                        l[n] = NULL;
                        continue;
                }
                if (strlen(c) > NAME_MAX)
                        return -ENAMETOOLONG;
                r = strv_extend(&l, c);
                if (r < 0)
                        return r;
                n++;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

/* Opens directory @name of @dirfd without following a symlink: -ELOOP
 * for one, -ENOTDIR for another non-directory. */
static int open_dir_nofollow(int dirfd, const char *name, int flags) {
        struct stat st;
        int fd;

        fd = openat(dirfd, name, flags | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0)
                return fd;
        if (errno == ENOTDIR && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISLNK(st.st_mode))
                return -ELOOP;
        return negative_errno();
}

/* Opens the directory holding @path's last component (@ret_name; NULL
 * when @path is "/" itself, whose directory is the root). */
static int open_parent(int root_fd, const char *cwd, const char *path, int *ret_dirfd,
                       char **ret_name) {
        _cleanup_strv_free_ char **parts = NULL;
        _cleanup_close_ int fd = -EBADF;
        size_t n;
        int r;

        r = path_components(cwd, path, &parts);
        if (r < 0)
                return r;
        n = strv_length(parts);
        fd = openat(root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        for (size_t i = 0; i + 1 < n; i++) {
                int next = open_dir_nofollow(fd, parts[i], O_PATH);

                if (next < 0)
                        return next;
                (void)close(fd);
                fd = next;
        }
        if (n > 0) {
                *ret_name = parts[n - 1];
                parts[n - 1] = NULL;
        } else
                *ret_name = NULL;
        *ret_dirfd = TAKE_FD(fd);
        return 0;
}

static const char *type_of(mode_t m) {
        return S_ISREG(m) ? "file" : S_ISDIR(m) ? "dir" : S_ISLNK(m) ? "symlink" : "other";
}

static json_t *entry_json(const char *name, const struct stat *st) {
        json_t *o, *n = json_string(name);
        char hex[2 * NAME_MAX + 1];

        if (!n) {
                /* Not UTF-8: the raw bytes, in hex. */
                size_t len = strnlen(name, NAME_MAX);

                for (size_t i = 0; i < len; i++)
                        (void)snprintf(hex + 2 * i, 3, "%02x", (unsigned char)name[i]);
                hex[2 * len] = '\0';
        }
        o = json_pack("{s:o,s:s,s:I,s:i,s:I}", n ? "name" : "name_hex", n ? n : json_string(hex),
                      "type", type_of(st->st_mode), "size", (json_int_t)st->st_size, "mode",
                      (int)(st->st_mode & 07777), "mtime_ms",
                      (json_int_t)st->st_mtim.tv_sec * 1000 + st->st_mtim.tv_nsec / 1000000);
        return o;
}

static int write_json(int fd, json_t *j) {
        _cleanup_free_ char *text = NULL;

        if (!j)
                return -ENOMEM;
        text = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        if (!text)
                return -ENOMEM;
        return loop_write(fd, text, strlen(text));
}

static int op_read(int dirfd, const char *name, uint64_t max, int out_fd) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        int r;

        if (!name)
                return -EISDIR;
        /* Never blocking on a FIFO; O_NOFOLLOW: a symlink is -ELOOP. */
        fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (S_ISDIR(st.st_mode))
                return -EISDIR;
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        if ((uint64_t)st.st_size > max)
                return -EFBIG;
        r = copy_file_data(fd, out_fd);
        if (r < 0)
                return r;
        /* Grown meanwhile: the reader bounds what it takes too. */
        if (fstat(fd, &st) < 0)
                return negative_errno();
        return (uint64_t)st.st_size > max ? -EFBIG : 0;
}

static int op_write(int dirfd, const char *name, unsigned mode, int in_fd) {
        _cleanup_close_ int fd = -EBADF;
        char tmp[32];
        uint64_t rnd = 0;
        struct stat st;
        int r;

        if (!name)
                return -EBUSY;
        if (mode > 0777)
                return -EINVAL;
        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
                if (S_ISDIR(st.st_mode))
                        return -EISDIR;
                /* SECURITY: never set-user-id or set-group-id. */
                if (S_ISREG(st.st_mode))
                        mode = st.st_mode & 01777;
        } else if (errno != ENOENT)
                return negative_errno();
        if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
                return -EIO;
        (void)snprintf(tmp, sizeof(tmp), ".hutch-%016llx", (unsigned long long)rnd);
        fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return negative_errno();
        r = copy_file_data(in_fd, fd);
        if (r >= 0 && fchmod(fd, mode) < 0)
                r = negative_errno();
        if (r >= 0 && renameat(dirfd, tmp, dirfd, name) < 0)
                r = negative_errno();
        if (r < 0)
                (void)unlinkat(dirfd, tmp, 0);
        return r;
}

static int op_list(int dirfd, const char *name, int out_fd) {
        _cleanup_(closedirp) DIR *d = NULL;
        _cleanup_close_ int fd = -EBADF;
        json_t *arr;
        struct dirent *de;
        size_t n = 0;
        int r;

        fd = name ? open_dir_nofollow(dirfd, name, O_RDONLY)
                  : openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return name ? fd : negative_errno();
        r = opendir_fd(fd, &d);
        if (r < 0)
                return r;
        arr = json_array();
        if (!arr)
                return -ENOMEM;
        errno = 0;
        while ((de = readdir_no_dot(d))) {
                struct stat st;

                /* Gone since readdir: not an entry any more. */
                if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if (++n > FILE_OP_LIST_MAX) {
                        json_decref(arr);
                        return -E2BIG;
                }
                if (json_array_append_new(arr, entry_json(de->d_name, &st)) < 0) {
                        json_decref(arr);
                        return -ENOMEM;
                }
                errno = 0;
        }
        if (errno != 0) {
                r = negative_errno();
                json_decref(arr);
                return r;
        }
        return write_json(out_fd, arr);
}

static int op_stat(int dirfd, const char *name, int out_fd) {
        struct stat st;

        if (fstatat(dirfd, name ? name : "", &st, name ? AT_SYMLINK_NOFOLLOW : AT_EMPTY_PATH) < 0)
                return negative_errno();
        return write_json(out_fd, entry_json(name ? name : "/", &st));
}

static int op_remove(int dirfd, const char *name) {
        if (!name)
                return -EBUSY;
        if (unlinkat(dirfd, name, 0) >= 0)
                return 0;
        if (errno != EISDIR)
                return negative_errno();
        if (unlinkat(dirfd, name, AT_REMOVEDIR) >= 0)
                return 0;
        return errno == EEXIST ? -ENOTEMPTY : negative_errno();
}

int file_op_run(int root_fd, const char *cwd, FileOpAction action, const char *path, unsigned mode,
                uint64_t max, int in_fd, int out_fd) {
        _cleanup_free_ char *name = NULL;
        _cleanup_close_ int dirfd = -EBADF;
        int r;

        r = open_parent(root_fd, cwd, path, &dirfd, &name);
        if (r < 0)
                return r;
        switch (action) {
        case FILE_OP_READ:
                return op_read(dirfd, name, max, out_fd);
        case FILE_OP_WRITE:
                return op_write(dirfd, name, mode, in_fd);
        case FILE_OP_LIST:
                return op_list(dirfd, name, out_fd);
        case FILE_OP_STAT:
                return op_stat(dirfd, name, out_fd);
        case FILE_OP_REMOVE:
                return op_remove(dirfd, name);
        case _FILE_OP_ACTION_MAX:
        case _FILE_OP_ACTION_INVALID:
        default:
                return -EINVAL;
        }
}

int file_op_main(const char *cwd, char *const *argv) {
        _cleanup_close_ int root = -EBADF;
        FileOpAction action;
        uint64_t max;
        uint32_t mode;
        int r;

        if (strv_length(argv) != FILE_OP_ARGC)
                return EINVAL;
        action = file_op_action_from_string(argv[1]);
        if (action < 0 || safe_atou32(argv[3], &mode) < 0 || safe_atou64(argv[4], &max) < 0)
                return EINVAL;
        root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return errno > 0 && errno < 125 ? errno : EIO;
        r = file_op_run(root, cwd, action, argv[2], mode, max, STDIN_FILENO, STDOUT_FILENO);
        /* 125 and up mean "could not start" (exec_child); no errno this
         * returns is that large, but make sure. */
        if (r < 0)
                return -r < 125 ? -r : EIO;
        return 0;
}
