/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <linux/limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fd-util.h"
#include "macro.h"
#include "store/diff.h"
#include "store/store-internal.h"
#include "string-table.h"

static const char *const change_kind_table[_WS_CHANGE_KIND_MAX] = {
        [WS_CHANGE_ADDED] = "added",
        [WS_CHANGE_MODIFIED] = "modified",
        [WS_CHANGE_DELETED] = "deleted",
};

static const char *const entry_type_table[_WS_ENTRY_TYPE_MAX] = {
        [WS_ENTRY_FILE] = "file",
        [WS_ENTRY_DIR] = "dir",
        [WS_ENTRY_SYMLINK] = "symlink",
        [WS_ENTRY_OTHER] = "other",
};

DEFINE_STRING_TABLE_LOOKUP(ws_change_kind, WsChangeKind, change_kind_table);

DEFINE_STRING_TABLE_LOOKUP(ws_entry_type, WsEntryType, entry_type_table);

WsChange *ws_changes_free(WsChange *changes, size_t n) {
        for (size_t i = 0; changes && i < n; i++)
                free(changes[i].path);
        return mfree(changes);
}

static int cmp_changes(const void *a, const void *b) {
        const WsChange *x = a, *y = b;
        int c = strcmp(x->path, y->path);

        if (c != 0)
                return c;
        /* One path twice is a type change: the old entry goes first. */
        return (x->kind != WS_CHANGE_DELETED) - (y->kind != WS_CHANGE_DELETED);
}

void ws_changes_sort(WsChange *changes, size_t n) {
        if (n > 0)
                qsort(changes, n, sizeof(WsChange), cmp_changes);
}

typedef struct DiffState {
        size_t n_layers;
        WsChange *changes;
        size_t n, alloc;
} DiffState;

static int add_change(DiffState *s, const char *path, WsChangeKind kind, WsEntryType type,
                      size_t layer) {
        char *p;

        if (s->n == s->alloc) {
                size_t k = s->alloc ? s->alloc * 2 : 64;
                WsChange *c = reallocarray(s->changes, k, sizeof(WsChange));

                if (!c)
                        return -ENOMEM;
                s->changes = c;
                s->alloc = k;
        }
        p = strdup(path);
        if (!p)
                return -ENOMEM;
        s->changes[s->n++] = (WsChange){.path = p, .kind = kind, .type = type, .layer = layer};
        return 0;
}

static const char *path_basename(const char *path) {
        const char *slash = strrchr(path, '/');

        return slash ? slash + 1 : path;
}

/* Returns 1 if the regular files @a and @b hold the same bytes, else 0. */
static int same_data(const WsEntry *a, const WsEntry *b, const char *name) {
        _cleanup_close_ int fa = -EBADF, fb = -EBADF;
        _cleanup_free_ char *buf = NULL;
        const size_t chunk = 65536;

        fa = open_regular_at(a->dirfd, name, &a->st);
        if (fa < 0)
                return fa;
        fb = open_regular_at(b->dirfd, name, &b->st);
        if (fb < 0)
                return fb;
        buf = malloc(2 * chunk);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t na = loop_read(fa, buf, chunk), nb;

                if (na < 0)
                        return (int)na;
                nb = loop_read(fb, buf + chunk, chunk);
                if (nb < 0)
                        return (int)nb;
                if (na != nb || memcmp(buf, buf + chunk, (size_t)na) != 0)
                        return 0;
                if (na == 0)
                        return 1;
        }
}

static int same_target(const WsEntry *a, const WsEntry *b, const char *name) {
        _cleanup_free_ char *ta = NULL, *tb = NULL;
        ssize_t na, nb;

        ta = malloc(PATH_MAX);
        tb = malloc(PATH_MAX);
        if (!ta || !tb)
                return -ENOMEM;
        na = readlinkat(a->dirfd, name, ta, PATH_MAX);
        if (na < 0)
                return negative_errno();
        nb = readlinkat(b->dirfd, name, tb, PATH_MAX);
        if (nb < 0)
                return negative_errno();
        return na == nb && memcmp(ta, tb, (size_t)na) == 0;
}

/* Returns 1 if the merged entry @m is the same as the host's @h, both of
 * @type: what the header of diff.h calls no change. */
static int same_entry(const WsEntry *m, const WsEntry *h, WsEntryType type, const char *name) {
        if (type == WS_ENTRY_SYMLINK)
                return same_target(m, h, name);
        /* setuid and setgid are never applied (see ws_apply()): no change. */
        if ((m->st.st_mode & 01777) != (h->st.st_mode & 01777))
                return 0;
        if (type != WS_ENTRY_FILE)
                return 1;
        if (m->st.st_size != h->st.st_size)
                return 0;
        return same_data(m, h, name);
}

static WsEntryType content_type(const WsEntry *e) {
        WsEntryType t;

        if (!e->present)
                return _WS_ENTRY_TYPE_INVALID;
        t = ws_entry_type_from_mode(e->st.st_mode);
        return t == WS_ENTRY_OTHER ? _WS_ENTRY_TYPE_INVALID : t;
}

static int diff_visit(const char *path, const WsEntry *merged, const WsEntry *host, void *userdata,
                      HutchError *reterr) {
        DiffState *s = userdata;
        WsEntryType mt = content_type(merged), ht = content_type(host);
        int r;

        /* No layer has it: the host's own entry shows, unchanged, and so
         * does everything below it. */
        if (merged->present && merged->layer == s->n_layers)
                return 0;
        if (mt >= 0 && mt == ht) {
                r = same_entry(merged, host, mt, path_basename(path));
                if (r < 0)
                        return ws_fail(reterr, r, "compare", path);
                if (r == 0 && add_change(s, path, WS_CHANGE_MODIFIED, mt, merged->layer) < 0)
                        return hutch_error_set(reterr, ENOMEM, "out of memory");
                return mt == WS_ENTRY_DIR;
        }
        if (ht >= 0 && add_change(s, path, WS_CHANGE_DELETED, ht, 0) < 0)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        if (mt >= 0 && add_change(s, path, WS_CHANGE_ADDED, mt, merged->layer) < 0)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        return mt == WS_ENTRY_DIR || ht == WS_ENTRY_DIR;
}

int ws_diff(const int *layer_dirfds, size_t n_layers, int host_dirfd, WsChange **ret, size_t *ret_n,
            HutchError *reterr) {
        DiffState s = {.n_layers = n_layers};
        int r;

        r = ws_walk(layer_dirfds, n_layers, host_dirfd, diff_visit, &s, reterr);
        if (r < 0) {
                ws_changes_free(s.changes, s.n);
                return r;
        }
        ws_changes_sort(s.changes, s.n);
        *ret = s.changes;
        *ret_n = s.n;
        return 0;
}
