/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <jansson.h>

#include "fd-util.h"
#include "store/archive-internal.h"

/* snapshot_archive_export(): two passes over the layers (archive.h says
 * why), one visitor each over the same walk. */

static inline void archive_write_freep(struct archive **a) {
        if (*a)
                (void)archive_write_free(*a);
        *a = NULL;
}

/* The same rules as jansson's, which refuses other keys: no overlong
 * forms, no surrogates, nothing above U+10FFFF. */
static bool utf8_is_valid(const char *s) {
        const unsigned char *p = (const unsigned char *)s;

        while (*p) {
                unsigned c = *p, n;
                uint32_t cp;

                if (c < 0x80) {
                        p++;
                        continue;
                }
                if (c >= 0xc2 && c <= 0xdf) {
                        n = 1;
                        cp = c & 0x1f;
                } else if (c >= 0xe0 && c <= 0xef) {
                        n = 2;
                        cp = c & 0x0f;
                } else if (c >= 0xf0 && c <= 0xf4) {
                        n = 3;
                        cp = c & 0x07;
                } else
                        return false;
                for (unsigned i = 1; i <= n; i++) {
                        if ((p[i] & 0xc0) != 0x80)
                                return false;
                        cp = (cp << 6) | (p[i] & 0x3f);
                }
                if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
                    (cp >= 0xd800 && cp <= 0xdfff))
                        return false;
                p += n + 1;
        }
        return true;
}

typedef enum NodeType {
        NODE_DIR,
        NODE_REG,
        NODE_LNK,
        NODE_WHITEOUT,
} NodeType;

typedef struct ExportNode {
        NodeType type;
        const struct stat *st;
        int fd;             /* NODE_DIR and NODE_REG: open for reading */
        const char *target; /* NODE_LNK */
} ExportNode;

typedef struct Export Export;
typedef int (*ExportVisit)(Export *x, const ExportNode *node);

struct Export {
        size_t layer;
        dev_t dev; /* of the layer's root: nothing below may be a mount point */
        char rel[SNAPSHOT_ARCHIVE_PATH_MAX + 1]; /* the node's path below the root, "" for it */
        size_t rel_len;
        ExportVisit visit;
        HutchError *reterr;
        const SnapshotArchiveIds *ids;
        char *buf;         /* IO_BUFFER_SIZE */
        char *xattr_names; /* SNAPSHOT_ARCHIVE_XATTR_MAX */
        char *xattr_value; /* SNAPSHOT_ARCHIVE_XATTR_MAX */
        EVP_MD_CTX *file_md;
        json_t *files;    /* the layer's "files" (pass 1 fills it, pass 2 checks against it) */
        uint64_t entries; /* of this layer so far */
        uint64_t entries_expected; /* pass 2: what pass 1 counted */
        uint64_t entries_total;
        uint64_t size_total;
        uint64_t manifest_size; /* pass 1: an upper bound of the manifest's size */
        struct archive *a;      /* pass 2 */
        int out_fd;
        EVP_MD_CTX *md; /* pass 2: of every byte written, for the checksum frame */
};

static void export_done(Export *x) {
        if (x->a) {
                /* Still open after a failure: the close that freeing implies
                 * drops what libarchive still holds (see export_write_cb());
                 * archive_write_fail() would leak libarchive's buffers. */
                x->out_fd = -EBADF;
                archive_write_freep(&x->a);
        }
        x->buf = mfree(x->buf);
        x->xattr_names = mfree(x->xattr_names);
        x->xattr_value = mfree(x->xattr_value);
        EVP_MD_CTX_freep(&x->file_md);
        EVP_MD_CTX_freep(&x->md);
}

_printf_(3, 4) static int export_fail(Export *x, int r, const char *fmt, ...) {
        char why[256];
        va_list ap;

        va_start(ap, fmt);
        (void)vsnprintf(why, sizeof(why), fmt, ap);
        va_end(ap);
        return hutch_error_set(x->reterr, -r, "cannot export '%s' in layer %zu: %s",
                               x->rel[0] ? x->rel : ".", x->layer, why);
}

static int export_archive_fail(Export *x, const char *what) {
        int e = archive_errno(x->a);
        const char *s = archive_error_string(x->a);

        return hutch_error_set(x->reterr, e > 0 ? e : EIO,
                               "failed to write %s to the snapshot archive: %s", what,
                               s ?: "unknown error");
}

/* Opens @name below @dirfd without following a symlink, and checks that it
 * still is the inode @st describes. Returns the fd, -ESTALE if it changed. */
static int open_checked(int dirfd, const char *name, int flags, const struct stat *st) {
        _cleanup_close_ int fd = -EBADF;
        struct stat opened;

        /* SECURITY: O_NONBLOCK: a FIFO swapped in since the fstatat() must
         * not block the export; the check below refuses it. */
        fd = openat(dirfd, name, flags | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return negative_errno();
        if (fstat(fd, &opened) < 0)
                return negative_errno();
        if (((opened.st_mode ^ st->st_mode) & S_IFMT) != 0 || opened.st_dev != st->st_dev ||
            opened.st_ino != st->st_ino)
                return -ESTALE;
        return TAKE_FD(fd);
}

/* The length of @s once jansson has escaped it, or more. */
static uint64_t json_escaped_len(const char *s) {
        uint64_t n = 0;

        for (const unsigned char *p = (const unsigned char *)s; *p; p++)
                n += *p < 0x20 ? 6 : (*p == '"' || *p == '\\') ? 2 : 1;
        return n;
}

/* Reads the regular file @fd (of @size bytes) to its end, feeding
 * x->file_md and, with @a, the archive entry just started. -ESTALE when
 * the size is not @size any more. */
static int export_stream_file(Export *x, int fd, uint64_t size, struct archive *a) {
        uint64_t done = 0;
        int r;

        for (;;) {
                ssize_t n = read(fd, x->buf, IO_BUFFER_SIZE);

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return export_fail(x, negative_errno(), "read: %m");
                }
                if (n == 0)
                        break;
                if ((uint64_t)n > size - done)
                        return export_fail(x, -ESTALE, "the file grew while being exported");
                done += (uint64_t)n;
                r = sha256_update(x->file_md, x->buf, (size_t)n);
                if (r < 0)
                        return export_fail(x, r, "SHA-256 failed");
                for (size_t off = 0; a && off < (size_t)n;) {
                        la_ssize_t w = archive_write_data(a, x->buf + off, (size_t)n - off);

                        if (w <= 0)
                                return export_archive_fail(x, "file data");
                        off += (size_t)w;
                }
        }
        if (done != size)
                return export_fail(x, -ESTALE, "the file shrank while being exported");
        return 0;
}

/* Pass 1: counts the node and hashes regular files into x->files. */
static int export_scan(Export *x, const ExportNode *node) {
        char hex[SHA256_HEX_LEN + 1];
        uint64_t size;
        int r;

        if (++x->entries_total > SNAPSHOT_ARCHIVE_ENTRIES_MAX)
                return export_fail(x, -E2BIG, "a snapshot holds at most %u entries",
                                   SNAPSHOT_ARCHIVE_ENTRIES_MAX);
        x->entries++;
        if (node->type != NODE_REG)
                return 0;

        if (!utf8_is_valid(x->rel))
                return export_fail(x, -EILSEQ,
                                   "the path of a regular file must be UTF-8 (it "
                                   "is a key of the manifest)");
        size = (uint64_t)node->st->st_size;
        if (size > SNAPSHOT_ARCHIVE_SIZE_MAX - x->size_total)
                return export_fail(x, -EFBIG, "a snapshot holds at most %" PRIu64 " bytes of files",
                                   SNAPSHOT_ARCHIVE_SIZE_MAX);
        x->size_total += size;
        x->manifest_size += json_escaped_len(x->rel) + SHA256_HEX_LEN + 6;
        if (x->manifest_size > SNAPSHOT_ARCHIVE_MANIFEST_MAX)
                return export_fail(x, -EFBIG, "the manifest would exceed %u bytes",
                                   SNAPSHOT_ARCHIVE_MANIFEST_MAX);

        r = export_stream_file(x, node->fd, size, NULL);
        if (r < 0)
                return r;
        r = snapshot_archive_sha256_hex(x->file_md, hex);
        if (r < 0)
                return export_fail(x, r, "SHA-256 failed");
        if (json_object_set_new(x->files, x->rel, json_string(hex)) < 0)
                return -ENOMEM;
        return 0;
}

/* Adds the user.* xattrs of @fd to @e. */
static int export_xattrs(Export *x, int fd, struct archive_entry *e) {
        size_t total = 0;
        ssize_t len;

        len = flistxattr(fd, x->xattr_names, SNAPSHOT_ARCHIVE_XATTR_MAX);
        if (len < 0) {
                if (errno == ENOTSUP)
                        return 0;
                if (errno == ERANGE)
                        return export_fail(x, -E2BIG, "more xattr names than %u bytes",
                                           SNAPSHOT_ARCHIVE_XATTR_MAX);
                return export_fail(x, negative_errno(), "list xattrs: %m");
        }
        for (const char *name = x->xattr_names; name < x->xattr_names + len;
             name += strlen(name) + 1) {
                ssize_t size;

                /* Only user.* (archive.h), and of overlayfs's own markers
                 * only opaque and whiteout (the layer's content): the rest
                 * (origin, impure, ...) describe this host's files, and an
                 * import refuses them; security.* and trusted.* belong to
                 * the host that wrote the layer. */
                if (!snapshot_archive_xattr_allowed(name))
                        continue;
                if (strpbrk(name, "=\n"))
                        return export_fail(x, -EINVAL,
                                           "xattr name '%s' holds '=' or a newline, which a "
                                           "pax record cannot",
                                           name);
                size = fgetxattr(fd, name, x->xattr_value, SNAPSHOT_ARCHIVE_XATTR_MAX);
                if (size < 0)
                        return export_fail(x, errno == ENODATA ? -ESTALE : negative_errno(),
                                           "read xattr '%s': %m", name);
                total += strlen(name) + (size_t)size;
                if (total > SNAPSHOT_ARCHIVE_XATTR_MAX)
                        return export_fail(x, -E2BIG, "more than %u bytes of xattrs",
                                           SNAPSHOT_ARCHIVE_XATTR_MAX);
                archive_entry_xattr_add_entry(e, name, x->xattr_value, (size_t)size);
        }
        return 0;
}

/* Pass 2: writes the node's entry (and a regular file's data). */
/* A layer's owner, relative to the sandbox's id base (archive.h). */
static la_int64_t id_out(uint32_t id, uint32_t base, uint32_t sub_base,
                         const SnapshotArchiveIds *ids) {
        if (!ids)
                return id;
        if (id >= base && id - base < ids->count)
                return id - base;
        if (ids->sub_count > 0 && id >= sub_base && id - sub_base < ids->sub_count)
                return (la_int64_t)ids->count + (id - sub_base);
        return 0;
}

static int export_write(Export *x, const ExportNode *node) {
        _cleanup_(archive_entry_freep) struct archive_entry *e = NULL;
        _cleanup_free_ char *path = NULL;
        const struct stat *st = node->st;
        char hex[SHA256_HEX_LEN + 1];
        const char *want;
        int r;

        if (++x->entries > x->entries_expected)
                return export_fail(x, -ESTALE, "the layer changed while being exported");
        e = archive_entry_new();
        if (!e)
                return -ENOMEM;
        /* Directories end in '/', as the pax writer would make them anyway;
         * the layer's root is "layers/<i>/". */
        if (asprintf(&path, LAYERS_PREFIX "%zu/%s%s", x->layer, x->rel,
                     node->type == NODE_DIR && x->rel[0] ? "/" : "") < 0)
                return -ENOMEM;
        archive_entry_set_pathname(e, path);
        archive_entry_set_uid(e, id_out(st->st_uid, x->ids ? x->ids->uid_base : 0,
                                        x->ids ? x->ids->sub_uid_base : 0, x->ids));
        archive_entry_set_gid(e, id_out(st->st_gid, x->ids ? x->ids->gid_base : 0,
                                        x->ids ? x->ids->sub_gid_base : 0, x->ids));
        archive_entry_set_mtime(e, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
        switch (node->type) {
        case NODE_DIR:
        case NODE_REG:
                archive_entry_set_filetype(e, node->type == NODE_DIR ? AE_IFDIR : AE_IFREG);
                archive_entry_set_perm(e, st->st_mode & 07777);
                if (node->type == NODE_REG)
                        archive_entry_set_size(e, st->st_size);
                r = export_xattrs(x, node->fd, e);
                if (r < 0)
                        return r;
                break;
        case NODE_LNK:
                archive_entry_set_filetype(e, AE_IFLNK);
                archive_entry_set_perm(e, 0777);
                archive_entry_set_symlink(e, node->target);
                break;
        case NODE_WHITEOUT:
                archive_entry_set_filetype(e, AE_IFCHR);
                archive_entry_set_perm(e, st->st_mode & 07777);
                archive_entry_set_rdev(e, makedev(0, 0));
                break;
        }
        if (archive_write_header(x->a, e) != ARCHIVE_OK)
                return export_archive_fail(x, path);
        if (node->type != NODE_REG)
                return 0;

        r = export_stream_file(x, node->fd, (uint64_t)st->st_size, x->a);
        if (r < 0)
                return r;
        r = snapshot_archive_sha256_hex(x->file_md, hex);
        if (r < 0)
                return export_fail(x, r, "SHA-256 failed");
        want = json_string_value(json_object_get(x->files, x->rel));
        if (!want || strcmp(want, hex) != 0)
                return export_fail(x, -ESTALE, "the file changed while being exported");
        return 0;
}

static int export_dir(Export *x, int dirfd, unsigned depth);

/* Inspects @name in @dirfd (the node at x->rel), refuses what a snapshot
 * cannot hold, visits it and, for a directory, what is below. */
static int export_node(Export *x, int dirfd, const char *name, unsigned depth) {
        _cleanup_close_ int fd = -EBADF;
        ExportNode node = {.fd = -EBADF};
        char target[PATH_MAX];
        const char *why;
        struct stat st;
        int r;

        r = snapshot_archive_relpath_check(x->rel, &why);
        if (r < 0)
                return export_fail(x, r, "%s", why);
        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return export_fail(x, negative_errno(), "inspect: %m");
        if (st.st_dev != x->dev)
                return export_fail(x, -EXDEV, "a mount point");
        node.st = &st;
        switch (st.st_mode & S_IFMT) {
        case S_IFDIR:
        case S_IFREG:
                node.type = S_ISDIR(st.st_mode) ? NODE_DIR : NODE_REG;
                fd = open_checked(dirfd, name, O_RDONLY | (node.type == NODE_DIR ? O_DIRECTORY : 0),
                                  &st);
                if (fd < 0)
                        return export_fail(x, fd, "open: %s", strerror(-fd));
                node.fd = fd;
                break;
        case S_IFLNK: {
                ssize_t n = readlinkat(dirfd, name, target, sizeof(target));

                if (n < 0)
                        return export_fail(x, negative_errno(), "read the symlink: %m");
                if ((size_t)n >= sizeof(target))
                        return export_fail(x, -ENAMETOOLONG, "the symlink target is too long");
                target[n] = '\0';
                if (!snapshot_archive_symlink_is_contained(x->rel, target))
                        return export_fail(x, -EPERM,
                                           "symlink target '%s' leaves the layer (or, "
                                           "absolute, the sandbox's root), which import "
                                           "refuses",
                                           target);
                node.type = NODE_LNK;
                node.target = target;
                break;
        }
        case S_IFCHR:
                if (st.st_rdev != makedev(0, 0))
                        return export_fail(x, -EPERM,
                                           "a character device other than a whiteout "
                                           "(0:0) is not allowed in a snapshot");
                node.type = NODE_WHITEOUT;
                break;
        case S_IFBLK:
                return export_fail(x, -EPERM, "a block device is not allowed in a snapshot");
        case S_IFIFO:
                return export_fail(x, -EPERM, "a fifo is not allowed in a snapshot");
        case S_IFSOCK:
                return export_fail(x, -EPERM, "a socket is not allowed in a snapshot");
        default:
                return export_fail(x, -EPERM, "a file of unknown type");
        }
        r = x->visit(x, &node);
        if (r < 0)
                return r;
        if (node.type == NODE_DIR)
                return export_dir(x, fd, depth);
        return 0;
}

/* Visits the entries of the directory @dirfd (at x->rel, @depth components
 * below the root), in name order. */
static int export_dir(Export *x, int dirfd, unsigned depth) {
        _cleanup_(snapshot_names_done) SnapshotNames l = {};
        size_t saved = x->rel_len;
        int r;

        r = snapshot_names_list(dirfd, &l);
        if (r < 0)
                return export_fail(x, r, "list the directory: %s", strerror(-r));
        for (size_t i = 0; i < l.n; i++) {
                size_t len = strlen(l.names[i]), sep = saved > 0;

                if (saved + sep + len > SNAPSHOT_ARCHIVE_PATH_MAX)
                        return export_fail(x, -ENAMETOOLONG,
                                           "an entry's path is longer than %u bytes",
                                           SNAPSHOT_ARCHIVE_PATH_MAX);
                if (sep)
                        x->rel[saved] = '/';
                memcpy(x->rel + saved + sep, l.names[i], len + 1);
                x->rel_len = saved + sep + len;
                r = export_node(x, dirfd, l.names[i], depth + 1);
                x->rel_len = saved;
                x->rel[saved] = '\0';
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Visits the layer open at @layer_fd (x->layer), its root first. */
static int export_layer(Export *x, int layer_fd) {
        _cleanup_close_ int fd = -EBADF;
        ExportNode node = {.type = NODE_DIR};
        struct stat st;
        int r;

        x->rel[0] = '\0';
        x->rel_len = 0;
        x->entries = 0;
        /* The caller's fd may be O_PATH: reading a directory needs more. */
        fd = openat(layer_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return export_fail(x, negative_errno(), "open the layer: %m");
        if (fstat(fd, &st) < 0)
                return export_fail(x, negative_errno(), "inspect the layer: %m");
        x->dev = st.st_dev;
        node.st = &st;
        node.fd = fd;
        r = x->visit(x, &node);
        if (r < 0)
                return r;
        return export_dir(x, fd, 0);
}

/* Writes the regular file entry @name holding @data, owned by 0:0, mode
 * 0644, mtime 0 (fixed, for reproducible archives). */
static int export_write_blob(Export *x, const char *name, const char *data, size_t size) {
        _cleanup_(archive_entry_freep) struct archive_entry *e = archive_entry_new();

        if (!e)
                return -ENOMEM;
        archive_entry_set_pathname(e, name);
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_size(e, (la_int64_t)size);
        archive_entry_set_mtime(e, 0, 0);
        if (archive_write_header(x->a, e) != ARCHIVE_OK)
                return export_archive_fail(x, name);
        for (size_t off = 0; off < size;) {
                la_ssize_t w = archive_write_data(x->a, data + off, size - off);

                if (w <= 0)
                        return export_archive_fail(x, name);
                off += (size_t)w;
        }
        return 0;
}

/* libarchive's output: hashed for the checksum frame, then written. */
static la_ssize_t export_write_cb(struct archive *a, void *userdata, const void *buf, size_t len) {
        Export *x = userdata;
        int r;

        if (x->out_fd < 0) /* export failed: nothing more is written */
                return (la_ssize_t)len;
        r = sha256_update(x->md, buf, len);
        if (r >= 0)
                r = loop_write(x->out_fd, buf, len);
        if (r < 0) {
                archive_set_error(a, -r, "%s", strerror(-r));
                return -1;
        }
        return (la_ssize_t)len;
}

/* Appends the checksum frame (archive.h) after libarchive's output. */
static int export_write_sum_frame(Export *x) {
        uint8_t frame[SUM_FRAME_SIZE];
        uint32_t magic = htole32(SUM_FRAME_MAGIC), len = htole32(SUM_FRAME_SIZE - 8);
        int r;

        memcpy(frame, &magic, 4);
        memcpy(frame + 4, &len, 4);
        memcpy(frame + 8, SUM_FRAME_TAG, SUM_FRAME_TAG_LEN);
        r = sha256_final(x->md, frame + 8 + SUM_FRAME_TAG_LEN);
        if (r < 0)
                return hutch_error_set(x->reterr, -r, "SHA-256 failed");
        r = loop_write(x->out_fd, frame, sizeof(frame));
        if (r < 0)
                return hutch_error_set(x->reterr, -r,
                                       "failed to write the end of the snapshot archive: %s",
                                       strerror(-r));
        return 0;
}

/* Pass 1 over every layer: returns the manifest text in @ret_text and its
 * "layers" in @ret_layers (a new reference), which pass 2 checks against. */
static int export_manifest(Export *x, const char *manifest_json, const int *layer_dirfds,
                           size_t n_layers, char **ret_text, json_t **ret_layers) {
        _cleanup_(json_decrefp) json_t *root = NULL, *layers = NULL;
        _cleanup_free_ char *text = NULL;
        json_error_t jerr;
        int r;

        root = json_loads(manifest_json, JSON_REJECT_DUPLICATES, &jerr);
        if (!root)
                return hutch_error_set(x->reterr, EINVAL,
                                       "the snapshot manifest is not JSON: line %d column %d: %s",
                                       jerr.line, jerr.column, jerr.text);
        if (!json_is_object(root))
                return hutch_error_set(x->reterr, EINVAL,
                                       "the snapshot manifest must be a JSON object");
        layers = json_array();
        if (!layers)
                return -ENOMEM;

        x->visit = export_scan;
        x->manifest_size = strlen(manifest_json) + 256;
        for (size_t i = 0; i < n_layers; i++) {
                _cleanup_(json_decrefp) json_t *files = json_object();
                char dir[LAYER_PREFIX_MAX];
                json_t *layer;

                if (!files)
                        return -ENOMEM;
                x->layer = i;
                x->files = files;
                r = export_layer(x, layer_dirfds[i]);
                x->files = NULL;
                if (r < 0)
                        return r;
                (void)snprintf(dir, sizeof(dir), LAYERS_DIR "/%zu", i);
                layer = json_pack("{s:s, s:I, s:O}", "dir", dir, "entries", (json_int_t)x->entries,
                                  "files", files);
                if (!layer || json_array_append_new(layers, layer) < 0)
                        return -ENOMEM;
                x->manifest_size += 64;
        }
        if (json_object_set_new(root, "format", json_string(SNAPSHOT_ARCHIVE_FORMAT)) < 0 ||
            json_object_set_new(root, "format_version",
                                json_integer(SNAPSHOT_ARCHIVE_FORMAT_VERSION)) < 0 ||
            json_object_set(root, "layers", layers) < 0)
                return -ENOMEM;
        text = json_dumps(root, JSON_COMPACT);
        if (!text)
                return -ENOMEM;
        if (strlen(text) > SNAPSHOT_ARCHIVE_MANIFEST_MAX)
                return hutch_error_set(x->reterr, EFBIG,
                                       "the snapshot manifest would exceed %u bytes",
                                       SNAPSHOT_ARCHIVE_MANIFEST_MAX);
        *ret_text = TAKE_PTR(text);
        *ret_layers = TAKE_PTR(layers);
        return 0;
}

int snapshot_archive_export(const char *manifest_json, const int *layer_dirfds, size_t n_layers,
                            int out_fd, HutchError *reterr) {
        return snapshot_archive_export_ids(manifest_json, layer_dirfds, n_layers, NULL, out_fd,
                                           reterr);
}

int snapshot_archive_export_ids(const char *manifest_json, const int *layer_dirfds, size_t n_layers,
                                const SnapshotArchiveIds *ids, int out_fd, HutchError *reterr) {
        _cleanup_(export_done) Export x = {.reterr = reterr, .out_fd = out_fd, .ids = ids};
        _cleanup_(json_decrefp) json_t *layers = NULL;
        _cleanup_free_ char *text = NULL;
        int r;

        if (!manifest_json || !layer_dirfds || out_fd < 0)
                return hutch_error_set(reterr, EINVAL, "bad arguments to snapshot export");
        if (n_layers == 0 || n_layers > SNAPSHOT_ARCHIVE_LAYERS_MAX)
                return hutch_error_set(reterr, EINVAL, "a snapshot has 1 to %d layers, not %zu",
                                       SNAPSHOT_ARCHIVE_LAYERS_MAX, n_layers);
        x.buf = malloc(IO_BUFFER_SIZE);
        x.xattr_names = malloc(SNAPSHOT_ARCHIVE_XATTR_MAX);
        x.xattr_value = malloc(SNAPSHOT_ARCHIVE_XATTR_MAX);
        if (!x.buf || !x.xattr_names || !x.xattr_value)
                return -ENOMEM;
        r = sha256_new(&x.file_md);
        if (r < 0)
                return r;
        r = sha256_new(&x.md);
        if (r < 0)
                return r;

        r = export_manifest(&x, manifest_json, layer_dirfds, n_layers, &text, &layers);
        if (r < 0)
                return r;

        x.a = archive_write_new();
        if (!x.a)
                return -ENOMEM;
        /* SCHILY.xattr records hold the value as it is (LIBARCHIVE.xattr
         * would base64 it, and both would be written by default);
         * hdrcharset=BINARY keeps names as bytes whatever the locale; no
         * padding after the zstd frame, the checksum frame follows it. */
        if (archive_write_add_filter_zstd(x.a) != ARCHIVE_OK ||
            archive_write_set_format_pax(x.a) != ARCHIVE_OK ||
            archive_write_set_format_option(x.a, "pax", "hdrcharset", "BINARY") != ARCHIVE_OK ||
            archive_write_set_format_option(x.a, "pax", "xattrheader", "SCHILY") != ARCHIVE_OK ||
            archive_write_set_bytes_in_last_block(x.a, 1) != ARCHIVE_OK ||
            archive_write_open2(x.a, &x, NULL, export_write_cb, NULL, NULL) != ARCHIVE_OK)
                return export_archive_fail(&x, "the header");

        r = export_write_blob(&x, MANIFEST_NAME, text, strlen(text));
        if (r < 0)
                return r;
        x.visit = export_write;
        for (size_t i = 0; i < n_layers; i++) {
                json_t *layer = json_array_get(layers, i);

                x.layer = i;
                x.files = json_object_get(layer, "files");
                x.entries_expected =
                        (uint64_t)json_integer_value(json_object_get(layer, "entries"));
                r = export_layer(&x, layer_dirfds[i]);
                if (r < 0)
                        return r;
                if (x.entries != x.entries_expected)
                        return export_fail(&x, -ESTALE, "the layer changed while being exported");
        }
        if (archive_write_close(x.a) != ARCHIVE_OK)
                return export_archive_fail(&x, "the end");
        archive_write_freep(&x.a);
        return export_write_sum_frame(&x);
}
