/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fd-util.h"
#include "macro.h"
#include "store/layers.h"
#include "store/store-internal.h"

typedef struct Walk {
        size_t n_layers;
        WsWalkFunc f;
        void *userdata;
        HutchError *reterr;
        size_t n_entries;
        size_t path_bytes;
        char path[WS_PATH_MAX + 1];
} Walk;

/* One directory of the walk. fds[i] (i < n_layers) is the directory in
 * layer i when that layer takes part in the merged view here, else -EBADF;
 * fds[n_layers] is the host folder's directory at this path (compared
 * with, and part of the merged view when @host_merged), else -EBADF. */
typedef struct Level {
        int *fds;
        bool host_merged;
} Level;

int ws_fail(HutchError *reterr, int r, const char *what, const char *path) {
        _cleanup_free_ char *e = NULL;

        if (ws_path_escape(path, &e) < 0)
                return hutch_error_set(reterr, -r, "failed to %s a path: %s", what, strerror(-r));
        return hutch_error_set(reterr, -r, "failed to %s '%s': %s", what, e, strerror(-r));
}

WsEntryType ws_entry_type_from_mode(mode_t mode) {
        if (S_ISREG(mode))
                return WS_ENTRY_FILE;
        if (S_ISDIR(mode))
                return WS_ENTRY_DIR;
        if (S_ISLNK(mode))
                return WS_ENTRY_SYMLINK;
        return WS_ENTRY_OTHER;
}

static void level_close(Level *lv, size_t n) {
        for (size_t i = 0; i < n; i++)
                lv->fds[i] = safe_close(lv->fds[i]);
        lv->host_merged = false;
}

static int cmp_names(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static void names_free(char **names, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);
}

/* Appends the names in the directory @fd to @names. */
static int read_names(int fd, char ***names, size_t *n, size_t *alloc) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        int r;

        r = opendir_fd(fd, &d);
        if (r < 0)
                return r;
        while ((de = readdir_no_dot(d))) {
                if (*n >= WS_MAX_ENTRIES)
                        return -E2BIG;
                if (*n == *alloc) {
                        size_t k = *alloc ? *alloc * 2 : 64;
                        char **c = reallocarray(*names, k, sizeof(char *));

                        if (!c)
                                return -ENOMEM;
                        *names = c;
                        *alloc = k;
                }
                (*names)[*n] = strdup(de->d_name);
                if (!(*names)[*n])
                        return -ENOMEM;
                (*n)++;
        }
        return errno != 0 ? negative_errno() : 0;
}

/* Finds the merged view's entry for @name in @lv (layers top first, then
 * the host folder when it shows through) and the host folder's own entry.
 * The directories that make up the merged entry, when it is one, are
 * opened into @child. */
static int resolve(Walk *w, const Level *lv, const char *name, WsEntry *merged, WsEntry *host,
                   Level *child) {
        const size_t n = w->n_layers;
        bool stop = false;
        int r;

        *merged = (WsEntry){};
        *host = (WsEntry){};
        for (size_t i = 0; i < n && !stop; i++) {
                struct stat st;

                if (lv->fds[i] < 0)
                        continue;
                if (fstatat(lv->fds[i], name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        if (errno == ENOENT)
                                continue;
                        return negative_errno();
                }
                /* Below a directory only directories merge: a whiteout or
                 * any other entry ends the lookup, as in overlayfs. */
                stop = true;
                if (merged->present && !S_ISDIR(st.st_mode))
                        break;
                if (!merged->present) {
                        r = layer_entry_is_whiteout(lv->fds[i], name, &st);
                        if (r < 0)
                                return r;
                        if (r > 0)
                                break;
                        *merged = (WsEntry){
                                .present = true, .st = st, .dirfd = lv->fds[i], .layer = i};
                        if (!S_ISDIR(st.st_mode))
                                break;
                }
                r = open_directory_at(lv->fds[i], name, &st);
                if (r < 0)
                        return r;
                child->fds[i] = r;
                r = layer_dir_is_opaque(child->fds[i]);
                if (r < 0)
                        return r;
                stop = r > 0;
        }
        if (lv->fds[n] >= 0) {
                struct stat st;

                if (fstatat(lv->fds[n], name, &st, AT_SYMLINK_NOFOLLOW) == 0)
                        *host = (WsEntry){
                                .present = true, .st = st, .dirfd = lv->fds[n], .layer = n};
                else if (errno != ENOENT)
                        return negative_errno();
        }
        if (stop || !lv->host_merged || !host->present)
                return 0;
        /* The lookup went past all layers (or none had @name): the host
         * folder's entry shows, alone or merged below a directory. */
        if (!merged->present)
                *merged = *host;
        child->host_merged = S_ISDIR(merged->st.st_mode) && S_ISDIR(host->st.st_mode);
        return 0;
}

static int walk_dir(Walk *w, const Level *lv, size_t path_len, unsigned depth);

static int walk_name(Walk *w, const Level *lv, const char *name, size_t path_len, Level *child,
                     unsigned depth) {
        size_t len = strlen(name), new_len = path_len + (path_len > 0) + len;
        WsEntry merged, host;
        int r;

        if (new_len > WS_PATH_MAX) {
                w->path[path_len] = '\0';
                return ws_fail(w->reterr, -ENAMETOOLONG, "walk below", w->path);
        }
        if (path_len > 0)
                w->path[path_len] = '/';
        memcpy(w->path + new_len - len, name, len + 1);
        if (++w->n_entries > WS_MAX_ENTRIES || (w->path_bytes += new_len + 1) > WS_MAX_PATH_BYTES)
                return hutch_error_set(w->reterr, E2BIG,
                                       "the workspace has more than %u entries or %u bytes of "
                                       "paths",
                                       WS_MAX_ENTRIES, WS_MAX_PATH_BYTES);

        r = resolve(w, lv, name, &merged, &host, child);
        if (r < 0)
                return ws_fail(w->reterr, r, "inspect", w->path);
        r = w->f(w->path, &merged, &host, w->userdata, w->reterr);
        if (r <= 0)
                return r;
        if (!(merged.present && S_ISDIR(merged.st.st_mode)) &&
            !(host.present && S_ISDIR(host.st.st_mode)))
                return 0;
        if (host.present && S_ISDIR(host.st.st_mode)) {
                r = open_directory_at(lv->fds[w->n_layers], name, &host.st);
                if (r < 0)
                        return ws_fail(w->reterr, r, "open", w->path);
                child->fds[w->n_layers] = r;
        }
        if (depth + 1 > WS_MAX_DEPTH)
                return hutch_error_set(w->reterr, ELOOP,
                                       "the workspace is nested deeper than %d directories",
                                       WS_MAX_DEPTH);
        return walk_dir(w, child, new_len, depth + 1);
}

static int walk_dir(Walk *w, const Level *lv, size_t path_len, unsigned depth) {
        _cleanup_free_ int *child_fds = NULL;
        char **names = NULL;
        size_t n = 0, alloc = 0;
        Level child;
        int r = 0;

        child_fds = reallocarray(NULL, w->n_layers + 1, sizeof(int));
        if (!child_fds)
                return hutch_error_set(w->reterr, ENOMEM, "out of memory");
        child = (Level){.fds = child_fds};
        for (size_t i = 0; i <= w->n_layers; i++)
                child.fds[i] = -EBADF;

        for (size_t i = 0; i <= w->n_layers && r >= 0; i++)
                if (lv->fds[i] >= 0)
                        r = read_names(lv->fds[i], &names, &n, &alloc);
        if (r < 0) {
                names_free(names, n);
                w->path[path_len] = '\0';
                return ws_fail(w->reterr, r, "read", path_len > 0 ? w->path : ".");
        }
        if (n > 0)
                qsort(names, n, sizeof(char *), cmp_names);

        for (size_t i = 0; i < n && r >= 0; i++) {
                if (i > 0 && strcmp(names[i], names[i - 1]) == 0)
                        continue; /* in more than one layer */
                r = walk_name(w, lv, names[i], path_len, &child, depth);
                level_close(&child, w->n_layers + 1);
        }
        names_free(names, n);
        return r;
}

int ws_walk(const int *layer_dirfds, size_t n_layers, int host_dirfd, WsWalkFunc f, void *userdata,
            HutchError *reterr) {
        _cleanup_free_ int *fds = NULL;
        _cleanup_free_ Walk *w = NULL;

        if (n_layers > WS_MAX_LAYERS)
                return hutch_error_set(reterr, E2BIG, "more than %d layers", WS_MAX_LAYERS);
        w = calloc(1, sizeof(Walk));
        fds = reallocarray(NULL, n_layers + 1, sizeof(int));
        if (!w || !fds)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        *w = (Walk){.n_layers = n_layers, .f = f, .userdata = userdata, .reterr = reterr};
        for (size_t i = 0; i < n_layers; i++)
                fds[i] = layer_dirfds[i];
        fds[n_layers] = host_dirfd;
        return walk_dir(w, &(Level){.fds = fds, .host_merged = true}, 0, 0);
}

bool ws_path_is_valid(const char *path) {
        const char *p = path;

        if (!path || *path == '\0' || *path == '/' || strlen(path) > WS_PATH_MAX)
                return false;
        for (;;) {
                size_t k = strcspn(p, "/");

                if (k == 0 || (k == 1 && p[0] == '.') || (k == 2 && p[0] == '.' && p[1] == '.'))
                        return false;
                if (p[k] == '\0')
                        return true;
                p += k + 1;
        }
}

int ws_open_parent(int root_fd, const char *path, int *ret_dirfd, const char **ret_name) {
        _cleanup_free_ char *dir = NULL;
        const char *slash = strrchr(path, '/');
        int fd;

        if (!slash) {
                fd = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);
                if (fd < 0)
                        return negative_errno();
                *ret_dirfd = fd;
                *ret_name = path;
                return 0;
        }
        dir = strndup(path, (size_t)(slash - path));
        if (!dir)
                return -ENOMEM;
        fd = openat_beneath(root_fd, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
        if (fd < 0)
                return fd;
        *ret_dirfd = fd;
        *ret_name = slash + 1;
        return 0;
}

int ws_open_regular(int root_fd, const char *path) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        fd = openat_beneath(root_fd, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0);
        if (fd < 0)
                return fd;
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode))
                return -ESTALE;
        return TAKE_FD(fd);
}

static int remove_at(int parent_fd, const char *name, unsigned depth) {
        _cleanup_(closedirp) DIR *d = NULL;
        _cleanup_close_ int fd = -EBADF;
        struct dirent *de;
        struct stat st;
        int r;

        if (fstatat(parent_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : negative_errno();
        if (!S_ISDIR(st.st_mode)) {
                if (unlinkat(parent_fd, name, 0) < 0 && errno != ENOENT)
                        return negative_errno();
                return 0;
        }
        if (depth > WS_MAX_DEPTH)
                return -ELOOP;
        fd = open_directory_at(parent_fd, name, &st);
        if (fd < 0)
                return fd;
        r = opendir_fd(fd, &d);
        if (r < 0)
                return r;
        while ((de = readdir_no_dot(d))) {
                r = remove_at(fd, de->d_name, depth + 1);
                if (r < 0)
                        return r;
        }
        if (errno != 0)
                return negative_errno();
        if (unlinkat(parent_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                return negative_errno();
        return 0;
}

int ws_remove_at(int dirfd, const char *name) {
        return remove_at(dirfd, name, 0);
}
