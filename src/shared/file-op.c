/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "copy.h"
#include "fd-util.h"
#include "file-op.h"
#include "file-tar.h"
#include "image-user.h"
#include "parse-util.h"
#include "strv.h"

static const char *const action_table[_FILE_OP_ACTION_MAX] = {
        [FILE_OP_READ] = "read",     [FILE_OP_WRITE] = "write",   [FILE_OP_LIST] = "list",
        [FILE_OP_STAT] = "stat",     [FILE_OP_REMOVE] = "remove", [FILE_OP_MKDIR] = "mkdir",
        [FILE_OP_MOVE] = "move",     [FILE_OP_WALK] = "walk",     [FILE_OP_PACK] = "pack",
        [FILE_OP_UNPACK] = "unpack",
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

/* Gives @fd (any descriptor, O_PATH too) to @owner (NULL: nothing to
 * do). SECURITY: on the descriptor, never by a path. The kernel refuses
 * an id its user namespace does not map with EINVAL, and one the mount's
 * idmap cannot store with EOVERFLOW (a host tree bound into a sandbox of
 * root maps the sandbox's root alone: sandbox.c open_detached_tree()):
 * both -EPERM here, as for a caller without CAP_CHOWN. */
static int give_owner(int fd, const FileOpOwner *owner) {
        if (!owner)
                return 0;
        if (fchownat(fd, "", owner->uid, owner->gid, AT_EMPTY_PATH) >= 0)
                return 0;
        return errno == EINVAL || errno == EOVERFLOW ? -EPERM : negative_errno();
}

/* Opens directory @name of @dirfd like open_dir_nofollow(), creating it
 * (0755, given to @owner) first when it does not exist and @create is
 * set. */
static int open_or_make_dir(int dirfd, const char *name, bool create, const FileOpOwner *owner) {
        _cleanup_close_ int fd = open_dir_nofollow(dirfd, name, O_PATH);
        bool made;
        int r;

        if (fd != -ENOENT || !create)
                return TAKE_FD(fd);
        made = mkdirat(dirfd, name, 0755) >= 0;
        if (!made && errno != EEXIST)
                return negative_errno();
        /* SECURITY: opened again without following: a symlink that took
         * its place meanwhile is -ELOOP. */
        fd = open_dir_nofollow(dirfd, name, O_PATH);
        if (fd < 0 || !made)
                return TAKE_FD(fd);
        r = give_owner(fd, owner);
        if (r < 0) {
                /* Not left behind as root's (empty: just made). */
                (void)unlinkat(dirfd, name, AT_REMOVEDIR);
                return r;
        }
        return TAKE_FD(fd);
}

/* Opens the directory holding @path's last component (@ret_name; NULL
 * when @path is "/" itself, whose directory is the root), creating the
 * missing directories on the way with @parents (given to @owner). */
static int open_parent(int root_fd, const char *cwd, const char *path, bool parents,
                       const FileOpOwner *owner, int *ret_dirfd, char **ret_name) {
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
                int next = open_or_make_dir(fd, parts[i], parents, owner);

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
        _cleanup_free_ char *hex = NULL;
        json_t *n = json_string(name);

        if (!n) {
                /* Not UTF-8: the raw bytes, in hex. */
                size_t len = strnlen(name, PATH_MAX);

                hex = malloc(2 * len + 1);
                if (!hex)
                        return NULL;
                for (size_t i = 0; i < len; i++)
                        (void)snprintf(hex + 2 * i, 3, "%02x", (unsigned char)name[i]);
                hex[2 * len] = '\0';
        }
        return json_pack("{s:o,s:s,s:I,s:i,s:I}", n ? "name" : "name_hex", n ? n : json_string(hex),
                         "type", type_of(st->st_mode), "size", (json_int_t)st->st_size, "mode",
                         (int)(st->st_mode & 07777), "mtime_ms",
                         (json_int_t)st->st_mtim.tv_sec * 1000 + st->st_mtim.tv_nsec / 1000000);
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

/* Writes @in_fd's data to @name of @dirfd through a temp file renamed
 * over it, given to @owner, with @mode, or with the mode of the regular
 * file it replaces when @keep_mode (a write keeps a file's mode, a move
 * brings its own). */
static int write_file_as(int dirfd, const char *name, unsigned mode, bool keep_mode,
                         const FileOpOwner *owner, int in_fd) {
        _cleanup_close_ int fd = -EBADF;
        char tmp[32];
        uint64_t rnd = 0;
        struct stat st;
        int r;

        if (!name)
                return -EBUSY;
        mode &= ~FILE_OP_FLAGS;
        if (mode > 0777)
                return -EINVAL;
        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
                if (S_ISDIR(st.st_mode))
                        return -EISDIR;
                /* SECURITY: never set-user-id or set-group-id. */
                if (S_ISREG(st.st_mode) && keep_mode)
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
        /* Before fchmod(): a chown clears set-group-id bits. */
        if (r >= 0)
                r = give_owner(fd, owner);
        if (r >= 0 && fchmod(fd, mode) < 0)
                r = negative_errno();
        if (r >= 0 && renameat(dirfd, tmp, dirfd, name) < 0)
                r = negative_errno();
        if (r < 0)
                (void)unlinkat(dirfd, tmp, 0);
        return r;
}

static int op_write(int dirfd, const char *name, unsigned mode, const FileOpOwner *owner,
                    int in_fd) {
        return write_file_as(dirfd, name, mode, true, owner, in_fd);
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

static int op_mkdir(int dirfd, const char *name, unsigned mode, const FileOpOwner *owner) {
        struct stat st;
        bool parents = mode & FILE_OP_PARENTS;
        int r;

        mode &= ~FILE_OP_FLAGS;
        if (mode > 0777)
                return -EINVAL;
        if (!name)
                return parents ? 0 : -EEXIST;
        if (mkdirat(dirfd, name, mode) >= 0) {
                _cleanup_close_ int fd = -EBADF;

                if (!owner)
                        return 0;
                /* SECURITY: the directory made, opened without following
                 * (a symlink that took its place is -ELOOP). */
                fd = open_dir_nofollow(dirfd, name, O_PATH);
                if (fd < 0)
                        return fd;
                r = give_owner(fd, owner);
                if (r < 0)
                        (void)unlinkat(dirfd, name, AT_REMOVEDIR);
                return r;
        }
        if (errno != EEXIST || !parents)
                return negative_errno();
        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return negative_errno();
        return S_ISDIR(st.st_mode) ? 0 : -EEXIST;
}

/* renameat2() without replacing unless @replace. A file system without
 * RENAME_NOREPLACE (9p, a guest's shared folders: EINVAL) gets a check
 * first: only the sandbox's own processes could race it. */
static int rename_noreplace(int dirfd, const char *name, int to_dirfd, const char *to_name,
                            bool replace) {
        struct stat st;

        if (renameat2(dirfd, name, to_dirfd, to_name, replace ? 0 : RENAME_NOREPLACE) >= 0)
                return 0;
        if (replace || errno != EINVAL)
                return negative_errno();
        if (fstatat(to_dirfd, to_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
                return -EEXIST;
        if (errno != ENOENT)
                return negative_errno();
        return renameat(dirfd, name, to_dirfd, to_name) < 0 ? negative_errno() : 0;
}

/* A move between two file systems of the sandbox (the workspace and
 * /tmp): a regular file is copied as op_write() writes one, with the
 * source's owner and mode as a rename keeps them (where the target file
 * system cannot hold that owner, -EPERM and the source stays), then the
 * source removed; anything else stays -EXDEV. */
static int move_file_across(int dirfd, const char *name, int to_dirfd, const char *to_name,
                            bool replace) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        int r;

        fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
                return errno == ELOOP ? -EXDEV : negative_errno();
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode))
                return -EXDEV;
        if (fstatat(to_dirfd, to_name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
                if (!replace)
                        return -EEXIST;
                if (S_ISDIR(st.st_mode))
                        return -EISDIR;
        } else if (errno != ENOENT)
                return negative_errno();
        if (fstat(fd, &st) < 0)
                return negative_errno();
        r = write_file_as(to_dirfd, to_name, st.st_mode & 0777, false,
                          &(FileOpOwner){.uid = st.st_uid, .gid = st.st_gid}, fd);
        if (r < 0)
                return r;
        return unlinkat(dirfd, name, 0) < 0 ? negative_errno() : 0;
}

static int op_move(int root_fd, const char *cwd, int dirfd, const char *name, unsigned mode,
                   const FileOpOwner *owner, int in_fd) {
        _cleanup_free_ char *to = NULL, *to_name = NULL;
        _cleanup_close_ int to_dirfd = -EBADF;
        size_t len = 0;
        int r;

        if (!name)
                return -EBUSY;
        r = read_full_fd(in_fd, PATH_MAX, &to, &len);
        if (r < 0)
                return r == -EFBIG ? -ENAMETOOLONG : r;
        if (len == 0 || strlen(to) != len)
                return -EINVAL;
        r = open_parent(root_fd, cwd, to, mode & FILE_OP_PARENTS, owner, &to_dirfd, &to_name);
        if (r < 0)
                return r;
        if (!to_name)
                return -EBUSY;
        r = rename_noreplace(dirfd, name, to_dirfd, to_name, mode & FILE_OP_REPLACE);
        if (r != -EXDEV)
                return r;
        return move_file_across(dirfd, name, to_dirfd, to_name, mode & FILE_OP_REPLACE);
}

/* The walk's state: the entries so far and their count. */
typedef struct Walk {
        json_t *entries;
        size_t n;
} Walk;

/* Adds the entries of directory @fd (@prefix: its path relative to the
 * walk's top, "" for the top) and walks its subdirectories while @depth
 * levels remain. */
static int walk_dir(Walk *w, int fd, const char *prefix, unsigned depth) {
        _cleanup_(closedirp) DIR *d = NULL;
        _cleanup_close_ int dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        struct dirent *de;
        int r;

        if (dup_fd < 0)
                return negative_errno();
        r = opendir_fd(TAKE_FD(dup_fd), &d);
        if (r < 0)
                return r;
        errno = 0;
        while ((de = readdir_no_dot(d))) {
                _cleanup_free_ char *rel = NULL;
                struct stat st;

                if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        errno = 0;
                        continue;
                }
                if (++w->n > FILE_OP_LIST_MAX)
                        return -E2BIG;
                if (asprintf(&rel, "%s%s%s", prefix, prefix[0] ? "/" : "", de->d_name) < 0)
                        return -ENOMEM;
                if (strlen(rel) >= PATH_MAX)
                        return -ENAMETOOLONG;
                if (json_array_append_new(w->entries, entry_json(rel, &st)) < 0)
                        return -ENOMEM;
                if (S_ISDIR(st.st_mode) && depth > 1) {
                        _cleanup_close_ int sub = open_dir_nofollow(fd, de->d_name, O_RDONLY);

                        /* Replaced by a symlink since the stat: not
                         * followed, and not listed deeper. */
                        if (sub == -ELOOP || sub == -ENOENT || sub == -ENOTDIR) {
                                errno = 0;
                                continue;
                        }
                        if (sub < 0)
                                return sub;
                        r = walk_dir(w, sub, rel, depth - 1);
                        if (r < 0)
                                return r;
                }
                errno = 0;
        }
        return errno != 0 ? negative_errno() : 0;
}

static int op_walk(int dirfd, const char *name, uint64_t max, int out_fd) {
        _cleanup_close_ int fd = -EBADF;
        Walk w = {};
        int r;

        fd = name ? open_dir_nofollow(dirfd, name, O_RDONLY)
                  : openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return name ? fd : negative_errno();
        w.entries = json_array();
        if (!w.entries)
                return -ENOMEM;
        r = walk_dir(&w, fd, "",
                     max == 0 || max > FILE_OP_WALK_DEPTH_MAX ? FILE_OP_WALK_DEPTH_MAX
                                                              : (unsigned)max);
        if (r < 0) {
                json_decref(w.entries);
                return r;
        }
        return write_json(out_fd, w.entries);
}

int file_op_run(int root_fd, const char *cwd, FileOpAction action, const char *path, unsigned mode,
                uint64_t max, const FileOpOwner *owner, int in_fd, int out_fd) {
        _cleanup_free_ char *name = NULL;
        _cleanup_close_ int dirfd = -EBADF;
        bool parents =
                (mode & FILE_OP_PARENTS) &&
                (action == FILE_OP_WRITE || action == FILE_OP_MKDIR || action == FILE_OP_UNPACK);
        int r;

        if (mode & ~(FILE_OP_FLAGS | 0777))
                return -EINVAL;
        if (owner && action != FILE_OP_WRITE && action != FILE_OP_MKDIR && action != FILE_OP_MOVE)
                return -EINVAL;
        r = open_parent(root_fd, cwd, path, parents, owner, &dirfd, &name);
        if (r < 0)
                return r;
        switch (action) {
        case FILE_OP_READ:
                return op_read(dirfd, name, max, out_fd);
        case FILE_OP_WRITE:
                return op_write(dirfd, name, mode, owner, in_fd);
        case FILE_OP_LIST:
                return op_list(dirfd, name, out_fd);
        case FILE_OP_STAT:
                return op_stat(dirfd, name, out_fd);
        case FILE_OP_REMOVE:
                return op_remove(dirfd, name);
        case FILE_OP_MKDIR:
                return op_mkdir(dirfd, name, mode, owner);
        case FILE_OP_MOVE:
                return op_move(root_fd, cwd, dirfd, name, mode, owner, in_fd);
        case FILE_OP_WALK:
                return op_walk(dirfd, name, max, out_fd);
        case FILE_OP_PACK:
                return file_tar_pack(dirfd, name, max, out_fd);
        case FILE_OP_UNPACK:
                return file_tar_unpack(dirfd, name, mode & FILE_OP_PARENTS, max, in_fd, out_fd);
        case _FILE_OP_ACTION_MAX:
        case _FILE_OP_ACTION_INVALID:
        default:
                return -EINVAL;
        }
}

/* The text of the sandbox's @path (/etc/passwd, /etc/group) in @ret, NULL
 * when it has none; opened below @root_fd without following a symlink. */
static int read_user_db(int root_fd, const char *path, char **ret) {
        _cleanup_free_ char *name = NULL, *text = NULL;
        _cleanup_close_ int dirfd = -EBADF, fd = -EBADF;
        struct stat st;
        int r;

        r = open_parent(root_fd, "/", path, false, NULL, &dirfd, &name);
        if (r == -ENOENT) {
                *ret = NULL;
                return 0;
        }
        if (r < 0)
                return r;
        fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT) {
                *ret = NULL;
                return 0;
        }
        if (fd < 0)
                return negative_errno();
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        r = read_full_fd(fd, IMAGE_USER_FILE_MAX, &text, NULL);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(text);
        return 0;
}

/* Resolves @spec (NULL for none: @ret_set false) in the sandbox's user
 * database. -FILE_OP_NO_USER for a name it lacks. */
static int owner_resolve(int root_fd, const char *spec, FileOpOwner *ret, bool *ret_set) {
        _cleanup_free_ char *passwd = NULL, *group = NULL;
        HutchError err = {};
        ImageUser u;
        int r;

        if (!spec) {
                *ret_set = false;
                return 0;
        }
        if (!spec[0])
                return -EINVAL;
        r = read_user_db(root_fd, "/etc/passwd", &passwd);
        if (r >= 0)
                r = read_user_db(root_fd, "/etc/group", &group);
        if (r < 0)
                return r;
        r = image_user_resolve(spec, passwd, group, &u, &err);
        if (r < 0)
                return r == -ENOENT ? -FILE_OP_NO_USER : r;
        *ret = (FileOpOwner){.uid = u.uid, .gid = u.gid};
        /* Already ours: nothing to give (a sandbox whose only id is root
         * writes "as root" without CAP_CHOWN). */
        *ret_set = u.uid != geteuid() || u.gid != getegid();
        return 0;
}

int file_op_main(const char *cwd, char *const *argv) {
        _cleanup_close_ int root = -EBADF;
        FileOpAction action;
        FileOpOwner owner = {};
        bool owned = false;
        uint64_t max;
        uint32_t mode;
        size_t n = strv_length(argv);
        int r;

        if (n != FILE_OP_ARGC && n != FILE_OP_ARGC - 1)
                return EINVAL;
        action = file_op_action_from_string(argv[1]);
        if (action < 0 || safe_atou32(argv[3], &mode) < 0 || safe_atou64(argv[4], &max) < 0)
                return EINVAL;
        root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return errno > 0 && errno < 125 ? errno : EIO;
        r = owner_resolve(root, n == FILE_OP_ARGC ? argv[5] : NULL, &owner, &owned);
        if (r >= 0)
                r = file_op_run(root, cwd, action, argv[2], mode, max, owned ? &owner : NULL,
                                STDIN_FILENO, STDOUT_FILENO);
        /* 125 and up mean "could not start" (exec_child); no errno this
         * returns is that large, but make sure. */
        if (r < 0)
                return -r < 125 ? -r : EIO;
        return 0;
}
