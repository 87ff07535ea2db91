/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "copy.h"
#include "fd-util.h"
#include "macro.h"
#include "store/diff.h"
#include "store/store-internal.h"

#define DIFF_BINARY "/usr/bin/diff"
/* Like git and diff: a NUL byte this early makes a file binary. */
#define BINARY_PROBE_BYTES 8192

int ws_path_escape(const char *path, char **ret) {
        static const char hex[] = "0123456789abcdef";
        size_t n = strlen(path);
        char *out, *o;

        if (n > (SIZE_MAX - 1) / 4)
                return -ENOMEM;
        out = malloc(n * 4 + 1);
        if (!out)
                return -ENOMEM;
        o = out;
        for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
                const char *named = *p == '\\'   ? "\\\\"
                                    : *p == '\n' ? "\\n"
                                    : *p == '\t' ? "\\t"
                                    : *p == '\r' ? "\\r"
                                                 : NULL;

                if (named) {
                        memcpy(o, named, 2);
                        o += 2;
                } else if (*p < 0x20 || *p >= 0x7f) {
                        *o++ = '\\';
                        *o++ = 'x';
                        *o++ = hex[*p >> 4];
                        *o++ = hex[*p & 0xf];
                } else
                        *o++ = (char)*p;
        }
        *o = '\0';
        *ret = out;
        return 0;
}

int ws_diff_print_stat(FILE *f, const WsChange *changes, size_t n) {
        static const char letters[_WS_CHANGE_KIND_MAX] = {
                [WS_CHANGE_ADDED] = 'A',
                [WS_CHANGE_MODIFIED] = 'M',
                [WS_CHANGE_DELETED] = 'D',
        };
        size_t count[_WS_CHANGE_KIND_MAX] = {};

        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *e = NULL;

                if (changes[i].kind < 0 || changes[i].kind >= _WS_CHANGE_KIND_MAX)
                        return -EINVAL;
                if (ws_path_escape(changes[i].path, &e) < 0)
                        return -ENOMEM;
                count[changes[i].kind]++;
                fprintf(f, "%c %s%s\n", letters[changes[i].kind], e,
                        changes[i].type == WS_ENTRY_DIR ? "/" : "");
        }
        if (n == 0)
                fputs("no changes\n", f);
        else
                fprintf(f, "%zu change%s: %zu added, %zu modified, %zu deleted\n", n,
                        n == 1 ? "" : "s", count[WS_CHANGE_ADDED], count[WS_CHANGE_MODIFIED],
                        count[WS_CHANGE_DELETED]);
        return fflush(f) == 0 && !ferror(f) ? 0 : -EIO;
}

static int path_to_json(json_t *o, const char *path) {
        static const char hex[] = "0123456789abcdef";
        _cleanup_free_ char *e = NULL, *h = NULL;
        size_t n = strlen(path);
        json_t *s;

        s = json_string(path);
        if (s)
                return json_object_set_new(o, "path", s) < 0 ? -ENOMEM : 0;
        /* Not UTF-8 (or out of memory): escaped, plus the raw bytes. */
        if (ws_path_escape(path, &e) < 0)
                return -ENOMEM;
        h = malloc(n * 2 + 1);
        if (!h)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                h[2 * i] = hex[(unsigned char)path[i] >> 4];
                h[2 * i + 1] = hex[(unsigned char)path[i] & 0xf];
        }
        h[2 * n] = '\0';
        if (json_object_set_new(o, "path", json_string(e)) < 0 ||
            json_object_set_new(o, "path_hex", json_string(h)) < 0)
                return -ENOMEM;
        return 0;
}

int ws_diff_to_json(const WsChange *changes, size_t n, json_t **ret) {
        json_t *a = json_array();

        if (!a)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const char *kind = ws_change_kind_to_string(changes[i].kind),
                           *type = ws_entry_type_to_string(changes[i].type);
                json_t *o = json_object();

                if (!o || json_array_append_new(a, o) < 0 || !kind || !type ||
                    path_to_json(o, changes[i].path) < 0 ||
                    json_object_set_new(o, "kind", json_string(kind)) < 0 ||
                    json_object_set_new(o, "type", json_string(type)) < 0) {
                        json_decref(a);
                        return !kind || !type ? -EINVAL : -ENOMEM;
                }
        }
        *ret = a;
        return 0;
}

/* Returns 1 if @fd (may be -EBADF: no file) starts with a NUL byte in its
 * first BINARY_PROBE_BYTES, 0 if not. */
static int looks_binary(int fd) {
        char buf[BINARY_PROBE_BYTES];
        ssize_t n;

        if (fd < 0)
                return 0;
        do
                n = pread(fd, buf, sizeof(buf), 0);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return negative_errno();
        return memchr(buf, '\0', (size_t)n) != NULL;
}

/* @fd as diff can open it (/proc/self/fd/N opens the file again, with
 * diff's credentials, which have no capabilities): @fd itself, or, when
 * only our capabilities let us read it (a file of the user's sub-ids read
 * in the store's user namespace, store_enter_range()), a copy in a memfd
 * in *@ret_copy. */
static int diffable_fd(int fd, int *ret_copy) {
        _cleanup_close_ int copy = -EBADF;
        char path[64];
        int r;

        if (fd < 0)
                return fd;
        (void)snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        /* access() checks with the real ids and without capabilities. */
        if (access(path, R_OK) == 0 || errno != EACCES)
                return fd;
        copy = memfd_create("hutch-diff", MFD_CLOEXEC);
        if (copy < 0)
                return negative_errno();
        if (lseek(fd, 0, SEEK_SET) < 0)
                return negative_errno();
        r = copy_file_data(fd, copy);
        (void)lseek(fd, 0, SEEK_SET);
        if (r < 0)
                return r;
        *ret_copy = copy;
        return TAKE_FD(copy);
}

/* Runs diff -u of @old_fd and @new_fd (-EBADF: /dev/null) with the labels
 * @la and @lb, its output to @out_fd. */
static int run_diff(int old_fd, int new_fd, const char *la, const char *lb, int out_fd) {
        _cleanup_close_ int o = -EBADF, n = -EBADF, out = -EBADF, null_fd = -EBADF;
        _cleanup_close_ int old_copy = -EBADF, new_copy = -EBADF;
        char pa[64] = "/dev/null", pb[64] = "/dev/null";
        char *const envp[] = {"LC_ALL=C", "PATH=/usr/bin:/bin", NULL};
        const char *argv[] = {DIFF_BINARY, "-u", "--label", la, "--label", lb, pa, pb, NULL};
        int status;
        pid_t pid;

        old_fd = diffable_fd(old_fd, &old_copy);
        if (old_fd < 0 && old_fd != -EBADF)
                return old_fd;
        new_fd = diffable_fd(new_fd, &new_copy);
        if (new_fd < 0 && new_fd != -EBADF)
                return new_fd;
        /* Above 2, so that putting stdin and stdout in place in the child
         * cannot overwrite one of them. */
        null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC | O_NOCTTY);
        out = fcntl(out_fd, F_DUPFD_CLOEXEC, 3);
        o = old_fd >= 0 ? fcntl(old_fd, F_DUPFD_CLOEXEC, 3) : -EBADF;
        n = new_fd >= 0 ? fcntl(new_fd, F_DUPFD_CLOEXEC, 3) : -EBADF;
        if (null_fd < 0 || out < 0 || (old_fd >= 0 && o < 0) || (new_fd >= 0 && n < 0))
                return negative_errno();
        if (o >= 0)
                (void)snprintf(pa, sizeof(pa), "/proc/self/fd/%d", o);
        if (n >= 0)
                (void)snprintf(pb, sizeof(pb), "/proc/self/fd/%d", n);

        pid = fork();
        if (pid < 0)
                return negative_errno();
        if (pid == 0) {
                if (dup2(null_fd, STDIN_FILENO) < 0 || dup2(out, STDOUT_FILENO) < 0 ||
                    (o >= 0 && fcntl(o, F_SETFD, 0) < 0) || (n >= 0 && fcntl(n, F_SETFD, 0) < 0))
                        _exit(127);
                (void)execve(DIFF_BINARY, (char *const *)argv, envp);
                _exit(127);
        }
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return negative_errno();
        /* diff: 0 same, 1 different, 2 trouble. */
        if (!WIFEXITED(status) || WEXITSTATUS(status) > 1)
                return -EIO;
        return 0;
}

/* The mode as git writes it ("100644", "040755"): type and the
 * permission bits a diff compares (never setuid or setgid: diff.c). */
static unsigned git_mode(mode_t m) {
        return (unsigned)((m & S_IFMT) | (m & 01777));
}

/* git's extended header for @c: "diff --git a/P b/P", then "new file
 * mode", "deleted file mode", or "old mode" and "new mode" when the
 * permission bits differ. @old / @new are NULL for the side that does
 * not exist. */
static int write_git_header(const char *escaped, const struct stat *old, const struct stat *new,
                            int out_fd) {
        _cleanup_free_ char *text = NULL;
        int k;

        if (old && new &&git_mode(old->st_mode) != git_mode(new->st_mode))
                k = asprintf(&text, "diff --git a/%s b/%s\nold mode %06o\nnew mode %06o\n", escaped,
                             escaped, git_mode(old->st_mode), git_mode(new->st_mode));
        else if (old && new)
                k = asprintf(&text, "diff --git a/%s b/%s\n", escaped, escaped);
        else
                k = asprintf(&text, "diff --git a/%s b/%s\n%s file mode %06o\n", escaped, escaped,
                             new ? "new" : "deleted", git_mode(new ? new->st_mode : old->st_mode));
        if (k < 0)
                return -ENOMEM;
        return loop_write(out_fd, text, (size_t)k);
}

/* A directory whose permission bits changed: git's header and mode lines
 * only (git has no directories; its format for a file is used). */
static int write_dir_patch(const int *layer_dirfds, int host_dirfd, const WsChange *c, int out_fd,
                           HutchError *reterr) {
        _cleanup_close_ int old_fd = -EBADF, new_fd = -EBADF;
        _cleanup_free_ char *e = NULL;
        struct stat old, new;
        int r;

        if (c->kind != WS_CHANGE_MODIFIED)
                return 0;
        old_fd = openat_beneath(host_dirfd, c->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
        if (old_fd < 0)
                return ws_fail(reterr, old_fd, "open the host's", c->path);
        new_fd = openat_beneath(layer_dirfds[c->layer], c->path,
                                O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
        if (new_fd < 0)
                return ws_fail(reterr, new_fd, "open the sandbox's", c->path);
        if (fstat(old_fd, &old) < 0 || fstat(new_fd, &new) < 0)
                return ws_fail(reterr, negative_errno(), "inspect", c->path);
        if (git_mode(old.st_mode) == git_mode(new.st_mode))
                return 0;
        if (ws_path_escape(c->path, &e) < 0)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        r = write_git_header(e, &old, &new, out_fd);
        if (r < 0)
                return ws_fail(reterr, r, "diff", c->path);
        return 0;
}

static int write_file_patch(const int *layer_dirfds, int host_dirfd, const WsChange *c, int out_fd,
                            HutchError *reterr) {
        _cleanup_close_ int old_fd = -EBADF, new_fd = -EBADF;
        _cleanup_free_ char *e = NULL, *la = NULL, *lb = NULL;
        struct stat old, new;
        int r;

        if (c->kind != WS_CHANGE_ADDED) {
                old_fd = ws_open_regular(host_dirfd, c->path);
                if (old_fd < 0)
                        return ws_fail(reterr, old_fd, "open the host's", c->path);
        }
        if (c->kind != WS_CHANGE_DELETED) {
                new_fd = ws_open_regular(layer_dirfds[c->layer], c->path);
                if (new_fd < 0)
                        return ws_fail(reterr, new_fd, "open the sandbox's", c->path);
        }
        if (ws_path_escape(c->path, &e) < 0 ||
            asprintf(&la, "%s%s", old_fd >= 0 ? "a/" : "/dev/null", old_fd >= 0 ? e : "") < 0 ||
            asprintf(&lb, "%s%s", new_fd >= 0 ? "b/" : "/dev/null", new_fd >= 0 ? e : "") < 0)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        if ((old_fd >= 0 && fstat(old_fd, &old) < 0) || (new_fd >= 0 && fstat(new_fd, &new) < 0))
                return ws_fail(reterr, negative_errno(), "inspect", c->path);
        r = write_git_header(e, old_fd >= 0 ? &old : NULL, new_fd >= 0 ? &new : NULL, out_fd);
        if (r < 0)
                return ws_fail(reterr, r, "diff", c->path);

        r = looks_binary(old_fd);
        if (r == 0)
                r = looks_binary(new_fd);
        if (r < 0)
                return ws_fail(reterr, r, "read", c->path);
        if (r > 0) {
                _cleanup_free_ char *line = NULL;
                int k = asprintf(&line, "Binary files %s and %s differ\n", la, lb);

                if (k < 0)
                        return hutch_error_set(reterr, ENOMEM, "out of memory");
                r = loop_write(out_fd, line, (size_t)k);
        } else
                r = run_diff(old_fd, new_fd, la, lb, out_fd);
        if (r < 0)
                return ws_fail(reterr, r, "diff", c->path);
        return 0;
}

int ws_diff_write_patch(const int *layer_dirfds, size_t n_layers, int host_dirfd,
                        const WsChange *changes, size_t n, int out_fd, HutchError *reterr) {
        for (size_t i = 0; i < n; i++) {
                int r;

                if (changes[i].type != WS_ENTRY_FILE && changes[i].type != WS_ENTRY_DIR)
                        continue;
                if (changes[i].kind != WS_CHANGE_DELETED && changes[i].layer >= n_layers)
                        return hutch_error_set(reterr, EINVAL, "change names layer %zu of %zu",
                                               changes[i].layer, n_layers);
                if (changes[i].type == WS_ENTRY_DIR)
                        r = write_dir_patch(layer_dirfds, host_dirfd, &changes[i], out_fd, reterr);
                else
                        r = write_file_patch(layer_dirfds, host_dirfd, &changes[i], out_fd, reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}
