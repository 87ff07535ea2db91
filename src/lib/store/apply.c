/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <linux/limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "copy.h"
#include "fd-util.h"
#include "macro.h"
#include "store/diff.h"
#include "store/store-internal.h"
#include "strv.h"

#define TEMP_PREFIX ".hutch-apply-"
#define TEMP_NAME_MAX (sizeof(TEMP_PREFIX) + 16)
#define TEMP_ATTEMPTS 16

typedef struct Apply {
        const int *layer_dirfds;
        size_t n_layers;
        int host_dirfd;
        WsChange *changes;
        size_t n;
        bool *selected;
        WsApplyFlags flags;
        WsApplyResult *result;
        HutchError *reterr;
} Apply;

void ws_apply_result_done(WsApplyResult *r) {
        if (!r)
                return;
        strv_free(r->conflicts);
        strv_free(r->modes_kept);
        *r = (WsApplyResult){};
}

/* Returns true if @path is @prefix or below it. */
static bool path_has_prefix(const char *path, const char *prefix) {
        size_t n = strlen(prefix);

        return strncmp(path, prefix, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* The index of the first change at exactly @path (of length @len), or @a->n. */
static size_t find_path(const Apply *a, const char *path, size_t len) {
        size_t lo = 0, hi = a->n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int c = strncmp(a->changes[mid].path, path, len);

                if (c == 0 && a->changes[mid].path[len] != '\0')
                        c = 1;
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        if (lo < a->n && strncmp(a->changes[lo].path, path, len) == 0 &&
            a->changes[lo].path[len] == '\0')
                return lo;
        return a->n;
}

/* Selects the changes at exactly the first @len bytes of @path when one of
 * them creates that directory (with what it replaces). */
static void select_creator(Apply *a, const char *path, size_t len) {
        size_t first = find_path(a, path, len), end = first;
        bool adds = false;

        for (; end < a->n && strncmp(a->changes[end].path, path, len) == 0 &&
               a->changes[end].path[len] == '\0';
             end++)
                adds = adds || a->changes[end].kind == WS_CHANGE_ADDED;
        for (size_t k = first; adds && k < end; k++)
                a->selected[k] = true;
}

static int select_changes(Apply *a, const char *const *paths) {
        for (size_t i = 0; i < a->n; i++)
                a->selected[i] = !paths;
        for (const char *const *p = paths; p && *p; p++) {
                bool any = false;

                for (size_t i = 0; i < a->n; i++)
                        if (path_has_prefix(a->changes[i].path, *p))
                                any = a->selected[i] = true;
                if (!any) {
                        _cleanup_free_ char *e = NULL;

                        if (ws_path_escape(*p, &e) < 0)
                                return hutch_error_set(a->reterr, ENOMEM, "out of memory");
                        return hutch_error_set(a->reterr, ENOENT, "no change at or below '%s'", e);
                }
        }
        /* A selected change needs the directories above it that the apply
         * creates. */
        for (size_t i = 0; paths && i < a->n; i++) {
                const char *path = a->changes[i].path;

                if (!a->selected[i])
                        continue;
                for (const char *s = strchr(path, '/'); s; s = strchr(s + 1, '/'))
                        select_creator(a, path, (size_t)(s - path));
        }
        return 0;
}

/* Returns 1 if the host's entry at @path is not what @manifest recorded. */
static int host_conflicts(const Apply *a, const WsManifest *manifest, const char *path) {
        const WsManifestEntry *e = ws_manifest_lookup(manifest, path);
        _cleanup_close_ int dirfd = -EBADF;
        const char *name;
        struct stat st;
        WsEntryType t;
        int r;

        r = ws_open_parent(a->host_dirfd, path, &dirfd, &name);
        if (r >= 0 && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                r = negative_errno();
        /* Not there, or not reachable without a symlink: no entry at @path. */
        if (r == -ENOENT || r == -ENOTDIR || r == -ELOOP || r == -EXDEV)
                return e != NULL;
        if (r < 0)
                return r;
        if (!e)
                return 1;
        t = ws_entry_type_from_mode(st.st_mode);
        if (t != e->type || (st.st_mode & 07777) != e->mode)
                return 1;
        if (t == WS_ENTRY_DIR)
                return 0;
        return (uint64_t)st.st_size != e->size ||
               (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec != e->mtime_ns;
}

static int check_conflicts(Apply *a, const WsManifest *manifest) {
        for (size_t i = 0; i < a->n; i++) {
                const char *path = a->changes[i].path;
                int r;

                if (!a->selected[i] || (i > 0 && strcmp(a->changes[i - 1].path, path) == 0))
                        continue;
                r = host_conflicts(a, manifest, path);
                if (r < 0)
                        return ws_fail(a->reterr, r, "inspect the host's", path);
                if (r > 0 && strv_extend(&a->result->conflicts, path) < 0)
                        return hutch_error_set(a->reterr, ENOMEM, "out of memory");
        }
        return 0;
}

/* The bits a sandbox may not add to the user's files without --modes. */
#define MODE_UNSAFE_BITS (S_ISVTX | S_IWGRP | S_IWOTH)

/* The permission bits to write for an entry the sandbox gave @want (never
 * setuid or setgid) where the host's had @host (0: none): without
 * WS_APPLY_MODES, no group/other write or sticky bit the host's did not
 * have (diff.h). Lists the path in modes_kept when that drops bits. */
static int safe_mode(const Apply *a, const char *path, mode_t want, mode_t host, mode_t *ret_mode) {
        _cleanup_free_ char *e = NULL, *line = NULL;
        mode_t m = want & 01777;

        if (!(a->flags & WS_APPLY_MODES))
                m &= ~(MODE_UNSAFE_BITS & ~host);
        if (m != (want & 01777)) {
                if (ws_path_escape(path, &e) < 0 ||
                    asprintf(&line, "'%s': mode %04o kept as %04o", e, (unsigned)(want & 01777),
                             (unsigned)m) < 0 ||
                    strv_extend(&a->result->modes_kept, line) < 0)
                        return -ENOMEM;
        }
        *ret_mode = m;
        return 0;
}

/* Creates a new entry with a free temporary name in @dirfd: a regular file
 * (returning its fd) or, with @target, a symlink (returning 0). */
static int create_temp(int dirfd, const char *target, char ret_name[static TEMP_NAME_MAX]) {
        for (int attempt = 0; attempt < TEMP_ATTEMPTS; attempt++) {
                uint64_t rnd;
                int fd;

                if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
                        return errno > 0 ? -errno : -EIO;
                (void)snprintf(ret_name, TEMP_NAME_MAX, TEMP_PREFIX "%016llx",
                               (unsigned long long)rnd);
                if (target)
                        fd = symlinkat(target, dirfd, ret_name);
                else
                        fd = openat(dirfd, ret_name,
                                    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (fd >= 0)
                        return fd;
                if (errno != EEXIST)
                        return negative_errno();
        }
        return -EEXIST;
}

/* Writes the regular file or symlink of change @c to a temporary name in
 * its host directory, then renames it over the old entry. */
static int write_entry(const Apply *a, const WsChange *c) {
        _cleanup_close_ int src = -EBADF, dirfd = -EBADF, tmp = -EBADF, src_dir = -EBADF;
        _cleanup_free_ char *target = NULL;
        char tmp_name[TEMP_NAME_MAX];
        const char *name, *src_name;
        struct stat st;
        mode_t mode = 0;
        int r;

        if (c->type == WS_ENTRY_FILE) {
                src = ws_open_regular(a->layer_dirfds[c->layer], c->path);
                if (src < 0)
                        return src;
                if (fstat(src, &st) < 0)
                        return negative_errno();
        } else {
                ssize_t n;

                r = ws_open_parent(a->layer_dirfds[c->layer], c->path, &src_dir, &src_name);
                if (r < 0)
                        return r;
                target = malloc(PATH_MAX);
                if (!target)
                        return -ENOMEM;
                n = readlinkat(src_dir, src_name, target, PATH_MAX - 1);
                if (n < 0)
                        return errno == EINVAL ? -ESTALE : negative_errno();
                target[n] = '\0';
        }

        r = ws_open_parent(a->host_dirfd, c->path, &dirfd, &name);
        if (r < 0)
                return r;
        if (c->type == WS_ENTRY_FILE) {
                struct stat old;

                /* The entry it replaces: a regular file's bits stay allowed. */
                if (fstatat(dirfd, name, &old, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(old.st_mode))
                        old.st_mode = 0;
                r = safe_mode(a, c->path, st.st_mode, old.st_mode, &mode);
                if (r < 0)
                        return r;
        }
        r = create_temp(dirfd, target, tmp_name);
        if (r < 0)
                return r;
        if (c->type == WS_ENTRY_FILE) {
                struct timespec times[2] = {st.st_atim, st.st_mtim};

                tmp = r;
                r = copy_file_data(src, tmp);
                if (r >= 0 && fchmod(tmp, mode) < 0)
                        r = negative_errno();
                if (r >= 0 && futimens(tmp, times) < 0)
                        r = negative_errno();
        }
        if (r >= 0 && renameat(dirfd, tmp_name, dirfd, name) < 0)
                r = negative_errno();
        if (r < 0)
                (void)unlinkat(dirfd, tmp_name, 0);
        return r;
}

static int make_dir(const Apply *a, const WsChange *c) {
        _cleanup_close_ int dirfd = -EBADF;
        const char *name;
        struct stat st;
        int r;

        r = ws_open_parent(a->host_dirfd, c->path, &dirfd, &name);
        if (r < 0)
                return r;
        /* Owner-writable until its contents are in (set_dir_mode()). */
        if (mkdirat(dirfd, name, 0700) >= 0)
                return 0;
        if (errno != EEXIST)
                return negative_errno();
        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return negative_errno();
        /* Something else appeared there since the diff: not ours to remove. */
        return S_ISDIR(st.st_mode) ? 0 : -EEXIST;
}

static int set_dir_mode(const Apply *a, const WsChange *c) {
        _cleanup_close_ int src = -EBADF, dst = -EBADF;
        struct stat st, old;
        mode_t mode;
        int r;

        src = openat_beneath(a->layer_dirfds[c->layer], c->path,
                             O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
        if (src < 0)
                return src;
        if (fstat(src, &st) < 0)
                return negative_errno();
        dst = openat_beneath(a->host_dirfd, c->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
        if (dst < 0)
                return dst;
        if (fstat(dst, &old) < 0)
                return negative_errno();
        /* A directory this apply created (0700) had no bits of the host's. */
        r = safe_mode(a, c->path, st.st_mode, c->kind == WS_CHANGE_ADDED ? 0 : old.st_mode, &mode);
        if (r < 0)
                return r;
        return fchmod(dst, mode) < 0 ? negative_errno() : 0;
}

static int delete_entry(const Apply *a, const WsChange *c) {
        _cleanup_close_ int dirfd = -EBADF;
        const char *name;
        int r;

        r = ws_open_parent(a->host_dirfd, c->path, &dirfd, &name);
        if (r == -ENOENT)
                return 0; /* its directory went first */
        if (r < 0)
                return r;
        return ws_remove_at(dirfd, name);
}

static int apply_changes(Apply *a) {
        int r;

        /* Deletions first, contents before their directory; then the rest in
         * path order, directories before their contents; directory modes
         * last, so that a read-only directory is filled first. */
        for (size_t i = a->n; i-- > 0;) {
                if (!a->selected[i] || a->changes[i].kind != WS_CHANGE_DELETED)
                        continue;
                r = delete_entry(a, &a->changes[i]);
                if (r < 0)
                        return ws_fail(a->reterr, r, "delete", a->changes[i].path);
                a->result->n_applied++;
        }
        for (size_t i = 0; i < a->n; i++) {
                const WsChange *c = &a->changes[i];

                if (!a->selected[i] || c->kind == WS_CHANGE_DELETED)
                        continue;
                if (c->type == WS_ENTRY_DIR)
                        r = c->kind == WS_CHANGE_ADDED ? make_dir(a, c) : 0;
                else
                        r = write_entry(a, c);
                if (r < 0)
                        return ws_fail(a->reterr, r, "write", c->path);
                if (c->type != WS_ENTRY_DIR)
                        a->result->n_applied++;
        }
        for (size_t i = a->n; i-- > 0;) {
                const WsChange *c = &a->changes[i];

                if (!a->selected[i] || c->kind == WS_CHANGE_DELETED || c->type != WS_ENTRY_DIR)
                        continue;
                r = set_dir_mode(a, c);
                if (r < 0)
                        return ws_fail(a->reterr, r, "set the mode of", c->path);
                a->result->n_applied++;
        }
        return 0;
}

int ws_apply(const int *layer_dirfds, size_t n_layers, int host_dirfd, const WsManifest *manifest,
             const char *const *paths, WsApplyFlags flags, WsApplyResult *result,
             HutchError *reterr) {
        bool force = flags & WS_APPLY_FORCE;
        _cleanup_free_ bool *selected = NULL;
        WsChange *changes = NULL;
        size_t n = 0;
        Apply a;
        int r;

        *result = (WsApplyResult){};
        if (!manifest && !force)
                return hutch_error_set(reterr, EINVAL, "applying without a manifest needs force");
        for (const char *const *p = paths; p && *p; p++)
                if (!ws_path_is_valid(*p)) {
                        _cleanup_free_ char *e = NULL;

                        if (ws_path_escape(*p, &e) < 0)
                                return hutch_error_set(reterr, ENOMEM, "out of memory");
                        return hutch_error_set(reterr, EINVAL,
                                               "not a relative path in the workspace: '%s'", e);
                }

        r = ws_diff(layer_dirfds, n_layers, host_dirfd, &changes, &n, reterr);
        if (r < 0)
                return r;
        selected = calloc(n + 1, sizeof(bool));
        if (!selected) {
                ws_changes_free(changes, n);
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        }
        a = (Apply){
                .layer_dirfds = layer_dirfds,
                .n_layers = n_layers,
                .host_dirfd = host_dirfd,
                .changes = changes,
                .n = n,
                .selected = selected,
                .flags = flags,
                .result = result,
                .reterr = reterr,
        };
        r = select_changes(&a, paths);
        if (r >= 0 && manifest)
                r = check_conflicts(&a, manifest);
        if (r >= 0 && result->conflicts && !force) {
                _cleanup_free_ char *e = NULL;

                r = ws_path_escape(result->conflicts[0], &e) < 0
                            ? hutch_error_set(reterr, ENOMEM, "out of memory")
                            : hutch_error_set(reterr, EEXIST,
                                              "'%s' changed on the host since the sandbox was "
                                              "created (%zu conflicting path%s)",
                                              e, strv_length(result->conflicts),
                                              strv_length(result->conflicts) == 1 ? "" : "s");
        }
        if (r >= 0)
                r = apply_changes(&a);
        ws_changes_free(changes, n);
        return r;
}
