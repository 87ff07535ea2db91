/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <jansson.h>

#include "fd-util.h"
#include "json-fields.h"
#include "macro.h"
#include "parse-util.h"
#include "store/archive-internal.h"

/* snapshot_archive_import(): every entry is checked, then created by hand
 * relative to the destination (archive.h). */

static inline void archive_read_freep(struct archive **a) {
        if (*a)
                (void)archive_read_free(*a);
        *a = NULL;
}

static bool sha256_hex_is_valid(const char *s) {
        return strlen(s) == SHA256_HEX_LEN && strspn(s, "0123456789abcdef") == SHA256_HEX_LEN;
}

typedef struct XattrRef {
        const char *name;
        const void *value;
        size_t size;
} XattrRef;

static int xattr_ref_compare(const void *a, const void *b) {
        return strcmp(((const XattrRef *)a)->name, ((const XattrRef *)b)->name);
}

/* Returns the xattrs of @e (borrowed from it) sorted by name in a new array:
 * sorting finds a name given twice (-EINVAL). -E2BIG past
 * SNAPSHOT_ARCHIVE_XATTR_MAX bytes. */
static int entry_xattrs_sorted(struct archive_entry *e, XattrRef **ret, size_t *ret_n) {
        _cleanup_free_ XattrRef *x = NULL;
        size_t n = 0, total = 0;
        int count;

        count = archive_entry_xattr_reset(e);
        if (count > 0) {
                x = calloc((size_t)count, sizeof(XattrRef));
                if (!x)
                        return -ENOMEM;
        }
        for (const char *name; n < (size_t)MAX(count, 0);) {
                const void *value;
                size_t size;

                if (archive_entry_xattr_next(e, &name, &value, &size) != ARCHIVE_OK)
                        break;
                if (!name || size > SNAPSHOT_ARCHIVE_XATTR_MAX)
                        return -E2BIG;
                total += strlen(name) + size;
                if (total > SNAPSHOT_ARCHIVE_XATTR_MAX)
                        return -E2BIG;
                x[n++] = (XattrRef){name, value, size};
        }
        if (n > 1)
                qsort(x, n, sizeof(XattrRef), xattr_ref_compare);
        for (size_t i = 1; i < n; i++)
                if (strcmp(x[i - 1].name, x[i].name) == 0)
                        return -EINVAL;
        *ret = TAKE_PTR(x);
        *ret_n = n;
        return 0;
}

static int openat2_beneath(int dirfd, const char *path, int flags) {
        /* SECURITY: no symlink is followed, in any component, and nothing
         * outside @dirfd is reachable: what an archive created earlier (a
         * symlink named like a later entry's parent) cannot redirect a
         * write. */
        struct open_how how = {
                .flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW),
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
                           RESOLVE_NO_XDEV,
        };
        int fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));

        return fd < 0 ? negative_errno() : fd;
}

typedef struct ImportLayer {
        int fd;           /* its root directory, once created */
        json_t *files;    /* "files" of the manifest (borrowed) */
        json_t *pending;  /* the listed files not seen yet */
        uint64_t entries; /* "entries" of the manifest */
        uint64_t seen;
} ImportLayer;

/* A directory's mode and mtime, applied once everything below it exists. */
typedef struct DirMeta {
        size_t layer;
        char *rel;
        mode_t mode;
        struct timespec mtime;
} DirMeta;

typedef struct Import {
        struct archive *a;
        int layers_fd;
        json_t *manifest;
        ImportLayer *layers;
        size_t n_layers;
        DirMeta *dirs;
        size_t n_dirs, n_dirs_alloc;
        uint64_t entries_total;
        uint64_t size_total;
        EVP_MD_CTX *file_md; /* the current regular file's */
        char *buf;           /* IO_BUFFER_SIZE */
        int in_fd;
        char *in_buf;                 /* IO_BUFFER_SIZE, what libarchive reads from */
        EVP_MD_CTX *md;               /* of what was read, but for the last SUM_FRAME_SIZE bytes */
        uint8_t tail[SUM_FRAME_SIZE]; /* the last bytes read */
        size_t tail_len;
        bool restore_ids;
        const SnapshotArchiveIds *ids;
        HutchError *reterr;
} Import;

static void import_done(Import *im) {
        archive_read_freep(&im->a);
        im->layers_fd = safe_close(im->layers_fd);
        for (size_t i = 0; im->layers && i < im->n_layers; i++) {
                (void)safe_close(im->layers[i].fd);
                json_decref(im->layers[i].pending);
        }
        im->layers = mfree(im->layers);
        for (size_t i = 0; i < im->n_dirs; i++)
                free(im->dirs[i].rel);
        im->dirs = mfree(im->dirs);
        json_decrefp(&im->manifest);
        EVP_MD_CTX_freep(&im->md);
        EVP_MD_CTX_freep(&im->file_md);
        im->buf = mfree(im->buf);
        im->in_buf = mfree(im->in_buf);
}

/* A libarchive read error: a corrupt, truncated or not zstd-compressed
 * stream is -EBADMSG; a failure to read is its errno. */
static int import_archive_fail(Import *im) {
        int e = archive_errno(im->a);
        const char *s = archive_error_string(im->a) ?: "unknown error";

        if (e == ENOMEM || e == EIO || e == EBADF || e == EISDIR || e == EAGAIN)
                return hutch_error_set(im->reterr, e, "failed to read the snapshot archive: %s", s);
        return hutch_error_set(im->reterr, EBADMSG,
                               "the snapshot archive is corrupt or truncated: %s", s);
}

/* Reads the next header into @ret: 1, or 0 at the end of the archive. */
static int import_next(Import *im, struct archive_entry **ret) {
        int r = archive_read_next_header(im->a, ret);

        if (r == ARCHIVE_EOF)
                return 0;
        if (r != ARCHIVE_OK) /* ARCHIVE_WARN too: a charset or header oddity */
                return import_archive_fail(im);
        return 1;
}

/* Reads exactly @size bytes of the current entry's data into @buf. */
static int import_read_exact(Import *im, void *buf, size_t size) {
        for (size_t got = 0; got < size;) {
                la_ssize_t n = archive_read_data(im->a, (char *)buf + got, size - got);

                if (n < 0)
                        return import_archive_fail(im);
                if (n == 0)
                        return hutch_error_set(im->reterr, EBADMSG,
                                               "the snapshot archive is truncated");
                got += (size_t)n;
        }
        return 0;
}

/* An error about layer @i of the manifest, or its member @field (one of
 * ours, which needs no escaping in a JSON pointer), named in the message;
 * @reterr's pointer is left "" for the decoder to fill in. */
_printf_(5, 6) static int layer_fail(HutchError *reterr, int errnum, size_t i, const char *field,
                                     const char *fmt, ...) {
        char what[256];
        va_list ap;

        va_start(ap, fmt);
        (void)vsnprintf(what, sizeof(what), fmt, ap);
        va_end(ap);
        return hutch_error_set(reterr, errnum, "snapshot manifest: /layers/%zu%s%s: %s", i,
                               field ? "/" : "", field ?: "", what);
}

/* One element of "layers" as decoded (its fields in the table's order: each
 * is checked against the ones before it). */
typedef struct LayerDecode {
        size_t index;
        uint64_t *total; /* the entries of the layers so far */
        uint64_t entries;
        json_t *files;
} LayerDecode;

static int parse_layer_dir(const JsonFieldDef *f, json_t *v, void *dest, HutchError *reterr) {
        LayerDecode *d = dest;
        char want[LAYER_PREFIX_MAX];

        (void)snprintf(want, sizeof(want), LAYERS_DIR "/%zu", d->index);
        if (strcmp(json_string_value(v), want) != 0)
                return layer_fail(reterr, EINVAL, d->index, "dir",
                                  "must be the string \"layers/<index>\"");
        return 0;
}

static int parse_layer_entries(const JsonFieldDef *f, json_t *v, void *dest, HutchError *reterr) {
        LayerDecode *d = dest;
        json_int_t count = json_integer_value(v);

        if (count < 1 || count > (json_int_t)SNAPSHOT_ARCHIVE_ENTRIES_MAX)
                return layer_fail(reterr, EINVAL, d->index, "entries",
                                  "must be an integer from 1 to SNAPSHOT_ARCHIVE_ENTRIES_MAX");
        *d->total += (uint64_t)count;
        if (*d->total > SNAPSHOT_ARCHIVE_ENTRIES_MAX)
                return layer_fail(reterr, E2BIG, d->index, "entries",
                                  "more entries in all than SNAPSHOT_ARCHIVE_ENTRIES_MAX");
        d->entries = (uint64_t)count;
        return 0;
}

/* "files": keys are paths below the layer, values SHA-256 hex strings, and
 * fewer of them than the layer's entries (checked before: table order). */
static int parse_layer_files(const JsonFieldDef *f, json_t *v, void *dest, HutchError *reterr) {
        LayerDecode *d = dest;
        const char *key;
        json_t *value;

        if (json_object_size(v) >= d->entries)
                return layer_fail(reterr, EINVAL, d->index, "files",
                                  "lists more files than the layer has entries besides its root");
        json_object_foreach(v, key, value) {
                const char *why;
                int r;

                r = snapshot_archive_relpath_check(key, &why);
                if (r < 0)
                        return layer_fail(reterr, -r, d->index, "files", "a file has %s: '%s'", why,
                                          key);
                if (!json_is_string(value) || !sha256_hex_is_valid(json_string_value(value)))
                        return layer_fail(reterr, EINVAL, d->index, "files",
                                          "the checksum of '%s' must be 64 lowercase hex digits",
                                          key);
        }
        d->files = v;
        return 0;
}

/* The decoder's refusals of a layer's members, in the manifest's words. */
static int layer_refusal(JsonFieldsRefusal what, const char *key, const JsonFieldDef *f, json_t *v,
                         const void *userdata, HutchError *reterr) {
        const LayerDecode *d = userdata;

        switch (what) {
        case JSON_FIELDS_UNKNOWN:
                return layer_fail(reterr, EINVAL, d->index, NULL, "unknown key '%s'", key);
        case JSON_FIELDS_WRONG_TYPE:
        case JSON_FIELDS_MISSING:
                return layer_fail(reterr, EINVAL, d->index, f->name, "%s", (const char *)f->data);
        }
        return -EINVAL;
}

/* A layer's members, in the order they are checked; JsonFieldDef.data is
 * what a value of another type (or none) is told. */
static const JsonFieldDef layer_fields[] = {
        {"dir", JSON_FIELD_CUSTOM, 0, true, parse_layer_dir, JSON_TYPE_STRING,
         "must be the string \"layers/<index>\""},
        {"entries", JSON_FIELD_CUSTOM, 0, true, parse_layer_entries, JSON_TYPE_INTEGER,
         "must be an integer from 1 to SNAPSHOT_ARCHIVE_ENTRIES_MAX"},
        {"files", JSON_FIELD_CUSTOM, 0, true, parse_layer_files, JSON_TYPE_OBJECT,
         "must be an object"},
};

/* "layers": sets up im->layers from it. */
static int parse_layers(const JsonFieldDef *f, json_t *v, void *dest, HutchError *reterr) {
        size_t n = json_array_size(v);
        Import *im = dest;
        uint64_t total = 0;

        if (n == 0 || n > SNAPSHOT_ARCHIVE_LAYERS_MAX)
                return hutch_error_set(reterr, EINVAL,
                                       "snapshot manifest: a snapshot has 1 to %d layers, not %zu",
                                       SNAPSHOT_ARCHIVE_LAYERS_MAX, n);
        im->layers = calloc(n, sizeof(ImportLayer));
        if (!im->layers)
                return -ENOMEM;
        im->n_layers = n;
        for (size_t i = 0; i < n; i++)
                im->layers[i].fd = -EBADF;

        for (size_t i = 0; i < n; i++) {
                json_t *layer = json_array_get(v, i);
                LayerDecode d = {.index = i, .total = &total};
                /* Unknown keys first, then dir, entries and files. */
                JsonFieldsOptions o = {
                        .flags = JSON_FIELDS_TABLE_ORDER, .message = layer_refusal, .userdata = &d};
                ImportLayer *l = &im->layers[i];
                int r;

                if (!json_is_object(layer))
                        r = layer_fail(reterr, EINVAL, i, NULL, "must be an object");
                else
                        r = json_fields_decode_with(layer, layer_fields, ELEMENTSOF(layer_fields),
                                                    &d, &o, reterr);
                if (r < 0) {
                        json_error_prefix_index(reterr, i);
                        return r;
                }
                l->files = d.files;
                l->entries = d.entries;
                l->pending = json_copy(d.files);
                if (!l->pending)
                        return -ENOMEM;
        }
        return 0;
}

static int parse_format(const JsonFieldDef *f, json_t *v, void *dest, HutchError *reterr) {
        if (strcmp(json_string_value(v), SNAPSHOT_ARCHIVE_FORMAT) != 0)
                return hutch_error_set(reterr, EINVAL, "%s", (const char *)f->data);
        return 0;
}

static int parse_format_version(const JsonFieldDef *f, json_t *v, void *dest, HutchError *reterr) {
        json_int_t version = json_integer_value(v);

        if (version > SNAPSHOT_ARCHIVE_FORMAT_VERSION)
                return hutch_error_set(reterr, EPROTONOSUPPORT,
                                       "snapshot format_version %lld is not supported: "
                                       "this hutch reads format_version %d",
                                       (long long)version, SNAPSHOT_ARCHIVE_FORMAT_VERSION);
        if (version != SNAPSHOT_ARCHIVE_FORMAT_VERSION)
                return hutch_error_set(reterr, EINVAL, "snapshot format_version %lld is not valid",
                                       (long long)version);
        return 0;
}

/* The manifest's own members, in the order they are checked: the format
 * and its version first, since a later version may change everything else.
 * Its other members are the exporter's caller's (archive.h). .data is what
 * a value of another type (or none) is told. */
static const JsonFieldDef manifest_fields[] = {
        {"format", JSON_FIELD_CUSTOM, 0, true, parse_format, JSON_TYPE_STRING,
         "not a hutch snapshot: the manifest's \"format\" is not \"" SNAPSHOT_ARCHIVE_FORMAT "\""},
        {"format_version", JSON_FIELD_CUSTOM, 0, true, parse_format_version, JSON_TYPE_INTEGER,
         "snapshot manifest: \"format_version\" must be an integer"},
        {"layers", JSON_FIELD_CUSTOM, 0, true, parse_layers, JSON_TYPE_ARRAY,
         "snapshot manifest: \"layers\" must be an array"},
};

static int manifest_refusal(JsonFieldsRefusal what, const char *key, const JsonFieldDef *f,
                            json_t *v, const void *userdata, HutchError *reterr) {
        switch (what) {
        case JSON_FIELDS_WRONG_TYPE:
        case JSON_FIELDS_MISSING:
                return hutch_error_set(reterr, EINVAL, "%s", (const char *)f->data);
        case JSON_FIELDS_UNKNOWN: /* not with JSON_FIELDS_OPEN */
                break;
        }
        return -EINVAL;
}

/* Checks the manifest @root and sets up im->layers from it. */
static int manifest_check(Import *im, json_t *root) {
        static const JsonFieldsOptions o = {.flags = JSON_FIELDS_TABLE_ORDER | JSON_FIELDS_OPEN,
                                            .message = manifest_refusal};

        if (!json_is_object(root))
                return hutch_error_set(im->reterr, EINVAL,
                                       "snapshot manifest: the top level must be an object");
        return json_fields_decode_with(root, manifest_fields, ELEMENTSOF(manifest_fields), im, &o,
                                       im->reterr);
}

/* Reads and checks the first entry, manifest.json; returns its text. */
static int import_manifest(Import *im, char **ret) {
        _cleanup_free_ XattrRef *xattrs = NULL;
        _cleanup_free_ char *text = NULL;
        struct archive_entry *e;
        const char *path;
        json_error_t jerr;
        size_t n_xattrs;
        la_int64_t size;
        int r;

        r = import_next(im, &e);
        if (r < 0)
                return r;
        if (r == 0)
                return hutch_error_set(im->reterr, EBADMSG, "the snapshot archive is empty");
        /* libarchive has chosen the filter by now: a plain tar would read
         * just as well, but it is not what export writes. */
        if (archive_filter_count(im->a) != 2 ||
            archive_filter_code(im->a, 0) != ARCHIVE_FILTER_ZSTD)
                return hutch_error_set(im->reterr, EBADMSG,
                                       "the snapshot archive is not zstd-compressed");
        /* SECURITY: nothing may come before the manifest: every later
         * entry is checked against it. */
        path = archive_entry_pathname(e);
        if (!path || strcmp(path, MANIFEST_NAME) != 0)
                return hutch_error_set(
                        im->reterr, EINVAL,
                        "the first entry of a snapshot archive must be '" MANIFEST_NAME
                        "', not '%s'",
                        path ?: "");
        if (archive_entry_filetype(e) != AE_IFREG || archive_entry_hardlink(e))
                return hutch_error_set(im->reterr, EINVAL,
                                       "'" MANIFEST_NAME "' is not a regular file");
        size = archive_entry_size(e);
        if (!archive_entry_size_is_set(e) || size < 0)
                return hutch_error_set(im->reterr, EINVAL, "'" MANIFEST_NAME "' has no size");
        if (size > (la_int64_t)SNAPSHOT_ARCHIVE_MANIFEST_MAX)
                return hutch_error_set(im->reterr, EFBIG,
                                       "'" MANIFEST_NAME "' is larger than %u bytes",
                                       SNAPSHOT_ARCHIVE_MANIFEST_MAX);
        r = entry_xattrs_sorted(e, &xattrs, &n_xattrs);
        if (r < 0 || n_xattrs > 0)
                return hutch_error_set(im->reterr, EINVAL,
                                       "'" MANIFEST_NAME "' must not carry xattrs");
        text = malloc((size_t)size + 1);
        if (!text)
                return -ENOMEM;
        r = import_read_exact(im, text, (size_t)size);
        if (r < 0)
                return r;
        text[size] = '\0';
        if (memchr(text, '\0', (size_t)size))
                return hutch_error_set(im->reterr, EINVAL, "'" MANIFEST_NAME "' holds a NUL byte");

        im->manifest = json_loadb(text, (size_t)size, JSON_REJECT_DUPLICATES, &jerr);
        if (!im->manifest)
                return hutch_error_set(im->reterr, EINVAL,
                                       "'" MANIFEST_NAME "' is not JSON: line %d column %d: %s",
                                       jerr.line, jerr.column, jerr.text);
        r = manifest_check(im, im->manifest);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(text);
        return 0;
}

/* Splits the archive path @path of an entry into its layer index and its
 * path below the layer's root (a new string, "" for the root itself,
 * without the trailing '/' a directory may have). */
static int entry_path_parse(Import *im, const char *path, bool is_dir, size_t *ret_layer,
                            char **ret_rel) {
        _cleanup_free_ char *copy = NULL;
        char index[11];
        const char *why, *p, *rel;
        size_t len = strlen(path), n;
        unsigned components;
        uint32_t layer;
        int r;

        if (len > LAYER_PREFIX_MAX + SNAPSHOT_ARCHIVE_PATH_MAX)
                return hutch_error_set(im->reterr, ENAMETOOLONG,
                                       "snapshot archive entry has a path longer than %u bytes: "
                                       "'%.64s...'",
                                       SNAPSHOT_ARCHIVE_PATH_MAX, path);
        copy = strdup(path);
        if (!copy)
                return -ENOMEM;
        if (is_dir && len > 1 && copy[len - 1] == '/')
                copy[--len] = '\0';
        r = snapshot_archive_path_check(copy, &why, &components);
        if (r < 0)
                return hutch_error_set(im->reterr, -r, "snapshot archive entry has %s: '%s'", why,
                                       path);
        if (strncmp(copy, LAYERS_PREFIX, strlen(LAYERS_PREFIX)) != 0)
                return hutch_error_set(im->reterr, EINVAL,
                                       "snapshot archive entry '%s' is not below '" LAYERS_PREFIX
                                       "<index>/'",
                                       path);
        p = copy + strlen(LAYERS_PREFIX);
        n = strcspn(p, "/");
        if (n == 0 || n >= sizeof(index) || (n > 1 && p[0] == '0'))
                return hutch_error_set(im->reterr, EINVAL,
                                       "snapshot archive entry '%s' is not below '" LAYERS_PREFIX
                                       "<index>/'",
                                       path);
        memcpy(index, p, n);
        index[n] = '\0';
        if (safe_atou32(index, &layer) < 0 || layer >= im->n_layers)
                return hutch_error_set(im->reterr, EINVAL,
                                       "snapshot archive entry '%s' is not in a layer the "
                                       "manifest lists",
                                       path);
        rel = p[n] ? p + n + 1 : "";
        if (rel[0]) {
                r = snapshot_archive_relpath_check(rel, &why);
                if (r < 0)
                        return hutch_error_set(im->reterr, -r,
                                               "snapshot archive entry has %s: '%s'", why, path);
        }
        *ret_rel = strdup(rel);
        if (!*ret_rel)
                return -ENOMEM;
        *ret_layer = layer;
        return 0;
}

/* Checks the type, ownership, times and xattrs of @e, whatever it is. */
static int entry_check(Import *im, struct archive_entry *e, const char *path, const XattrRef *x,
                       size_t n_x) {
        mode_t type = archive_entry_filetype(e);
        la_int64_t uid = archive_entry_uid(e), gid = archive_entry_gid(e);
        long nsec = archive_entry_mtime_nsec(e);

        if (archive_entry_hardlink(e))
                return hutch_error_set(im->reterr, EPERM,
                                       "snapshot archive entry '%s' is a hard link, which a "
                                       "snapshot never holds",
                                       path);
        switch (type) {
        case AE_IFREG:
        case AE_IFDIR:
        case AE_IFLNK:
                break;
        case AE_IFCHR:
                if (archive_entry_rdevmajor(e) != 0 || archive_entry_rdevminor(e) != 0)
                        return hutch_error_set(im->reterr, EPERM,
                                               "snapshot archive entry '%s' is a character "
                                               "device other than a whiteout (0:0)",
                                               path);
                break;
        case AE_IFBLK:
                return hutch_error_set(im->reterr, EPERM,
                                       "snapshot archive entry '%s' is a block device", path);
        case AE_IFIFO:
                return hutch_error_set(im->reterr, EPERM, "snapshot archive entry '%s' is a fifo",
                                       path);
        case AE_IFSOCK:
                return hutch_error_set(im->reterr, EPERM, "snapshot archive entry '%s' is a socket",
                                       path);
        default:
                return hutch_error_set(im->reterr, EINVAL,
                                       "snapshot archive entry '%s' has an unknown type", path);
        }
        /* (uid_t)-1 means "unchanged" to chown(). */
        if (uid < 0 || uid >= UINT32_MAX || gid < 0 || gid >= UINT32_MAX)
                return hutch_error_set(im->reterr, EINVAL,
                                       "snapshot archive entry '%s' has a bad owner", path);
        if (nsec < 0 || nsec >= 1000000000L)
                return hutch_error_set(im->reterr, EINVAL,
                                       "snapshot archive entry '%s' has a bad mtime", path);
        if (n_x > 0 && type != AE_IFREG && type != AE_IFDIR)
                return hutch_error_set(im->reterr, EINVAL,
                                       "snapshot archive entry '%s' carries xattrs, which only "
                                       "directories and regular files may",
                                       path);
        for (size_t i = 0; i < n_x; i++) {
                /* SECURITY: only user.*, and of user.overlay.* only opaque and
                 * whiteout: trusted.overlay.*, security.capability and (with
                 * userxattr) the other user.overlay.* from an archive would be
                 * obeyed by the kernel. */
                if (!snapshot_archive_xattr_allowed(x[i].name))
                        return hutch_error_set(im->reterr, EPERM,
                                               "snapshot archive entry '%s' carries xattr '%s': "
                                               "only user.* xattrs are allowed, and of "
                                               "user.overlay.* only opaque and whiteout",
                                               path, x[i].name);
                if (strlen(x[i].name) > XATTR_NAME_MAX)
                        return hutch_error_set(im->reterr, ENAMETOOLONG,
                                               "snapshot archive entry '%s' carries an xattr "
                                               "name longer than %d bytes",
                                               path, XATTR_NAME_MAX);
        }
        return 0;
}

/* The host owner of entry @e: the archive's ids shifted by the importer's
 * base (archive.h). -EPERM beyond the importer's range. */
static int entry_owner(Import *im, struct archive_entry *e, const char *path, uid_t *ret_uid,
                       gid_t *ret_gid) {
        uint64_t uid = (uint64_t)archive_entry_uid(e), gid = (uint64_t)archive_entry_gid(e);

        /* On failure too: -1 is chown(2)'s "leave it". */
        *ret_uid = (uid_t)-1;
        *ret_gid = (gid_t)-1;
        if (im->ids) {
                uint64_t total = (uint64_t)im->ids->count + im->ids->sub_count;

                if (uid >= total || gid >= total)
                        return hutch_error_set(im->reterr, EPERM,
                                               "snapshot archive entry '%s' belongs to id "
                                               "%llu:%llu, outside the sandbox's %llu ids",
                                               path, (unsigned long long)uid,
                                               (unsigned long long)gid, (unsigned long long)total);
                uid = uid < im->ids->count ? uid + im->ids->uid_base
                                           : uid - im->ids->count + im->ids->sub_uid_base;
                gid = gid < im->ids->count ? gid + im->ids->gid_base
                                           : gid - im->ids->count + im->ids->sub_gid_base;
        }
        *ret_uid = (uid_t)uid;
        *ret_gid = (gid_t)gid;
        return 0;
}

/* Sets the xattrs and (as root) the owner of the new file or directory @fd. */
static int import_fd_meta(Import *im, int fd, struct archive_entry *e, const char *path,
                          const XattrRef *x, size_t n_x) {
        for (size_t i = 0; i < n_x; i++)
                if (fsetxattr(fd, x[i].name, x[i].value, x[i].size, 0) < 0)
                        return hutch_error_set(im->reterr, errno,
                                               "failed to set xattr '%s' of '%s': %m", x[i].name,
                                               path);
        if (im->restore_ids) {
                uid_t uid;
                gid_t gid;
                int r = entry_owner(im, e, path, &uid, &gid);

                if (r < 0)
                        return r;
                if (fchown(fd, uid, gid) < 0)
                        return hutch_error_set(im->reterr, errno, "failed to chown '%s': %m", path);
        }
        return 0;
}

static struct timespec entry_mtime(struct archive_entry *e) {
        return (struct timespec){.tv_sec = archive_entry_mtime(e),
                                 .tv_nsec = archive_entry_mtime_nsec(e)};
}

/* Records the mode and mtime of the directory @rel of @layer for
 * import_apply_dirs(). */
static int import_defer_dir(Import *im, size_t layer, const char *rel, struct archive_entry *e) {
        char *copy;

        if (im->n_dirs == im->n_dirs_alloc) {
                size_t alloc = im->n_dirs_alloc ? im->n_dirs_alloc * 2 : 64;
                DirMeta *dirs = reallocarray(im->dirs, alloc, sizeof(DirMeta));

                if (!dirs)
                        return -ENOMEM;
                im->dirs = dirs;
                im->n_dirs_alloc = alloc;
        }
        copy = strdup(rel);
        if (!copy)
                return -ENOMEM;
        /* SECURITY: setuid/setgid bits are dropped (archive.h). */
        im->dirs[im->n_dirs++] = (DirMeta){
                .layer = layer,
                .rel = copy,
                .mode = archive_entry_perm(e) & 01777,
                .mtime = entry_mtime(e),
        };
        return 0;
}

/* Writes the data of the regular file entry @e into @fd, checking it
 * against the manifest's checksum @want. */
static int import_file_data(Import *im, struct archive_entry *e, int fd, const char *path,
                            const char *want) {
        la_int64_t size = archive_entry_size(e);
        char hex[SHA256_HEX_LEN + 1];
        uint64_t got = 0;
        int r;

        if (size < 0)
                return hutch_error_set(im->reterr, EINVAL,
                                       "snapshot archive entry '%s' has no size", path);
        if ((uint64_t)size > SNAPSHOT_ARCHIVE_SIZE_MAX - im->size_total)
                return hutch_error_set(im->reterr, EFBIG,
                                       "the snapshot archive holds more than %" PRIu64
                                       " bytes of files",
                                       SNAPSHOT_ARCHIVE_SIZE_MAX);
        im->size_total += (uint64_t)size;
        for (;;) {
                la_ssize_t n = archive_read_data(im->a, im->buf, IO_BUFFER_SIZE);

                if (n < 0)
                        return import_archive_fail(im);
                if (n == 0)
                        break;
                got += (uint64_t)n;
                r = sha256_update(im->file_md, im->buf, (size_t)n);
                if (r < 0)
                        return hutch_error_set(im->reterr, -r, "SHA-256 failed");
                r = loop_write(fd, im->buf, (size_t)n);
                if (r < 0)
                        return hutch_error_set(im->reterr, -r, "failed to write '%s': %s", path,
                                               strerror(-r));
        }
        if (got != (uint64_t)size)
                return hutch_error_set(im->reterr, EBADMSG,
                                       "snapshot archive entry '%s' is truncated", path);
        r = snapshot_archive_sha256_hex(im->file_md, hex);
        if (r < 0)
                return hutch_error_set(im->reterr, -r, "SHA-256 failed");
        if (strcmp(hex, want) != 0)
                return hutch_error_set(im->reterr, EBADMSG,
                                       "checksum mismatch for '%s': the manifest says %s, the "
                                       "data hashes to %s",
                                       path, want, hex);
        return 0;
}

/* The failure to create @path: a name already taken means the archive
 * lists it twice (the destination started empty). */
static int import_create_fail(Import *im, int errnum, const char *path) {
        if (errnum == EEXIST)
                return hutch_error_set(im->reterr, EEXIST,
                                       "snapshot archive entry '%s' is there twice", path);
        return hutch_error_set(im->reterr, errnum, "failed to create '%s': %s", path,
                               strerror(errnum));
}

/* The owner (as root) and mtime of the symlink or whiteout @name in @pfd. */
static int import_meta_at(Import *im, struct archive_entry *e, int pfd, const char *name,
                          const char *path) {
        struct timespec times[2] = {{.tv_nsec = UTIME_OMIT}, entry_mtime(e)};

        if (im->restore_ids) {
                uid_t uid;
                gid_t gid;
                int r = entry_owner(im, e, path, &uid, &gid);

                if (r < 0)
                        return r;
                if (fchownat(pfd, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
                        return hutch_error_set(im->reterr, errno, "failed to chown '%s': %m", path);
        }
        if (utimensat(pfd, name, times, AT_SYMLINK_NOFOLLOW) < 0)
                return hutch_error_set(im->reterr, errno, "failed to set the mtime of '%s': %m",
                                       path);
        return 0;
}

/* Where an entry goes: @name in the directory @pfd, @rel below the root
 * of layer @layer; @path is the entry's path in the archive, for messages. */
typedef struct Target {
        size_t layer;
        const char *rel;
        int pfd;
        const char *name;
        const char *path;
} Target;

static int import_dir(Import *im, struct archive_entry *e, const Target *t, const XattrRef *x,
                      size_t n_x) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        /* 0700 until import_apply_dirs(): the entries below must be
         * creatable even when the directory is read-only. */
        if (mkdirat(t->pfd, t->name, 0700) < 0)
                return import_create_fail(im, errno, t->path);
        fd = openat(t->pfd, t->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return hutch_error_set(im->reterr, errno, "failed to open '%s': %m", t->path);
        r = import_fd_meta(im, fd, e, t->path, x, n_x);
        if (r < 0)
                return r;
        return import_defer_dir(im, t->layer, t->rel, e);
}

static int import_file(Import *im, struct archive_entry *e, const Target *t, const XattrRef *x,
                       size_t n_x) {
        struct timespec times[2] = {{.tv_nsec = UTIME_OMIT}, entry_mtime(e)};
        ImportLayer *l = &im->layers[t->layer];
        _cleanup_close_ int fd = -EBADF;
        const char *want;
        int r;

        want = json_string_value(json_object_get(l->files, t->rel));
        if (!want)
                return hutch_error_set(im->reterr, EINVAL,
                                       "snapshot archive entry '%s' is a file the manifest does "
                                       "not list",
                                       t->path);
        fd = openat(t->pfd, t->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return import_create_fail(im, errno, t->path);
        r = import_file_data(im, e, fd, t->path, want);
        if (r < 0)
                return r;
        (void)json_object_del(l->pending, t->rel);
        r = import_fd_meta(im, fd, e, t->path, x, n_x);
        if (r < 0)
                return r;
        /* SECURITY: setuid/setgid bits are dropped (archive.h). */
        if (fchmod(fd, archive_entry_perm(e) & 01777) < 0 || futimens(fd, times) < 0)
                return hutch_error_set(im->reterr, errno,
                                       "failed to set the mode or mtime of '%s': %m", t->path);
        return 0;
}

static int import_symlink(Import *im, struct archive_entry *e, const Target *t) {
        const char *target = archive_entry_symlink(e);

        /* SECURITY: lexical, as nothing here follows the link (later
         * entries are created with RESOLVE_NO_SYMLINKS). An absolute target
         * is the sandbox's path, kept as it is, as a sandbox's own layer
         * holds it. */
        if (!target || !snapshot_archive_symlink_is_contained(t->rel, target))
                return hutch_error_set(im->reterr, EPERM,
                                       "snapshot archive entry '%s' is a symlink to '%s', which "
                                       "leaves its layer (or, absolute, the sandbox's root)",
                                       t->path, target ?: "");
        if (symlinkat(target, t->pfd, t->name) < 0)
                return import_create_fail(im, errno, t->path);
        return import_meta_at(im, e, t->pfd, t->name, t->path);
}

/* A whiteout: entry_check() made sure it is a character device 0:0. */
static int import_whiteout(Import *im, struct archive_entry *e, const Target *t) {
        if (mknodat(t->pfd, t->name, S_IFCHR | 0600, makedev(0, 0)) < 0)
                return import_create_fail(im, errno, t->path);
        if (fchmodat(t->pfd, t->name, archive_entry_perm(e) & 0777, AT_SYMLINK_NOFOLLOW) < 0)
                return hutch_error_set(im->reterr, errno, "failed to set the mode of '%s': %m",
                                       t->path);
        return import_meta_at(im, e, t->pfd, t->name, t->path);
}

/* Creates the root directory of @layer from its entry @e. */
static int import_layer_root(Import *im, struct archive_entry *e, size_t layer, const char *path,
                             const XattrRef *x, size_t n_x) {
        ImportLayer *l = &im->layers[layer];
        char name[16];
        int r;

        if (archive_entry_filetype(e) != AE_IFDIR)
                return hutch_error_set(im->reterr, EINVAL,
                                       "snapshot archive entry '%s' (a layer's root) is not a "
                                       "directory",
                                       path);
        (void)snprintf(name, sizeof(name), "%zu", layer);
        if (l->fd >= 0)
                return hutch_error_set(im->reterr, EEXIST,
                                       "snapshot archive entry '%s' is there twice", path);
        if (mkdirat(im->layers_fd, name, 0700) < 0)
                return hutch_error_set(im->reterr, errno, "failed to create '%s': %m", path);
        l->fd = openat(im->layers_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (l->fd < 0)
                return hutch_error_set(im->reterr, errno, "failed to open '%s': %m", path);
        r = import_fd_meta(im, l->fd, e, path, x, n_x);
        if (r < 0)
                return r;
        return import_defer_dir(im, layer, "", e);
}

/* Checks the layer entry @e and creates it. */
static int import_entry(Import *im, struct archive_entry *e) {
        _cleanup_close_ int pfd = -EBADF;
        _cleanup_free_ XattrRef *xattrs = NULL;
        _cleanup_free_ char *rel = NULL;
        const char *path = archive_entry_pathname(e);
        size_t layer = 0, n_xattrs = 0;
        ImportLayer *l;
        char *slash;
        Target t;
        int r;

        if (!path)
                return hutch_error_set(im->reterr, EBADMSG, "a snapshot archive entry has no path");
        r = entry_path_parse(im, path, archive_entry_filetype(e) == AE_IFDIR, &layer, &rel);
        if (r < 0)
                return r;
        r = entry_xattrs_sorted(e, &xattrs, &n_xattrs);
        if (r < 0)
                return hutch_error_set(im->reterr, -r, "snapshot archive entry has %s: '%s'",
                                       r == -E2BIG ? "too many xattrs" : "an xattr twice", path);
        r = entry_check(im, e, path, xattrs, n_xattrs);
        if (r < 0)
                return r;
        l = &im->layers[layer];
        if (++im->entries_total > SNAPSHOT_ARCHIVE_ENTRIES_MAX)
                return hutch_error_set(im->reterr, E2BIG,
                                       "the snapshot archive has more than %u entries",
                                       SNAPSHOT_ARCHIVE_ENTRIES_MAX);
        if (++l->seen > l->entries)
                return hutch_error_set(im->reterr, EINVAL,
                                       "layer %zu has more entries than the %" PRIu64
                                       " its manifest lists",
                                       layer, l->entries);

        if (rel[0] == '\0')
                return import_layer_root(im, e, layer, path, xattrs, n_xattrs);
        if (l->fd < 0)
                return hutch_error_set(im->reterr, EINVAL,
                                       "snapshot archive entry '%s' comes before its layer's "
                                       "root directory",
                                       path);
        slash = strrchr(rel, '/');
        if (slash) {
                *slash = '\0';
                pfd = openat2_beneath(l->fd, rel, O_PATH | O_DIRECTORY);
                *slash = '/';
                if (pfd < 0)
                        return hutch_error_set(
                                im->reterr,
                                pfd == -ENOENT || pfd == -ENOTDIR || pfd == -ELOOP ? EINVAL : -pfd,
                                "the parent of snapshot archive entry '%s' is not a directory "
                                "that came before it: %s",
                                path, strerror(-pfd));
        }
        t = (Target){
                .layer = layer,
                .rel = rel,
                .pfd = slash ? pfd : l->fd,
                .name = slash ? slash + 1 : rel,
                .path = path,
        };
        switch (archive_entry_filetype(e)) {
        case AE_IFDIR:
                return import_dir(im, e, &t, xattrs, n_xattrs);
        case AE_IFREG:
                return import_file(im, e, &t, xattrs, n_xattrs);
        case AE_IFLNK:
                return import_symlink(im, e, &t);
        default: /* AE_IFCHR: entry_check() allows no other type */
                return import_whiteout(im, e, &t);
        }
}

/* At the end of the tar stream: every layer is complete. */
static int import_check_complete(Import *im) {
        for (size_t i = 0; i < im->n_layers; i++) {
                ImportLayer *l = &im->layers[i];
                void *missing = json_object_iter(l->pending);

                if (missing)
                        return hutch_error_set(im->reterr, EINVAL,
                                               "file '%s' of layer %zu, listed in the manifest, "
                                               "is missing from the snapshot archive",
                                               json_object_iter_key(missing), i);
                if (l->seen != l->entries)
                        return hutch_error_set(im->reterr, EINVAL,
                                               "layer %zu has %" PRIu64
                                               " entries in the snapshot archive, its manifest "
                                               "lists %" PRIu64,
                                               i, l->seen, l->entries);
        }
        return 0;
}

/* Feeds the @n bytes just read at @p to im->md, except the last
 * SUM_FRAME_SIZE bytes of all read so far, which are kept in im->tail:
 * at the end of the file they are the checksum frame. */
static int import_hash_input(Import *im, const uint8_t *p, size_t n) {
        size_t total = im->tail_len + n, out, from_tail;
        int r;

        if (total <= SUM_FRAME_SIZE) {
                memcpy(im->tail + im->tail_len, p, n);
                im->tail_len = total;
                return 0;
        }
        out = total - SUM_FRAME_SIZE; /* bytes that leave the tail window */
        from_tail = MIN(out, im->tail_len);
        r = sha256_update(im->md, im->tail, from_tail);
        if (r >= 0)
                r = sha256_update(im->md, p, out - from_tail);
        if (r < 0)
                return r;
        /* The new window: what is left of the tail, then the end of @p. */
        memmove(im->tail, im->tail + from_tail, im->tail_len - from_tail);
        memcpy(im->tail + im->tail_len - from_tail, p + (out - from_tail), n - (out - from_tail));
        im->tail_len = SUM_FRAME_SIZE;
        return 0;
}

static ssize_t import_read_input(Import *im) {
        ssize_t n;
        int r;

        do
                n = read(im->in_fd, im->in_buf, IO_BUFFER_SIZE);
        while (n < 0 && errno == EINTR);
        if (n <= 0)
                return n < 0 ? negative_errno() : 0;
        r = import_hash_input(im, (const uint8_t *)im->in_buf, (size_t)n);
        return r < 0 ? r : n;
}

/* libarchive's input. */
static la_ssize_t import_read_cb(struct archive *a, void *userdata, const void **ret_buf) {
        Import *im = userdata;
        ssize_t n = import_read_input(im);

        if (n < 0) {
                archive_set_error(a, (int)-n, "%s", strerror((int)-n));
                return -1;
        }
        *ret_buf = im->in_buf;
        return (la_ssize_t)n;
}

/* After the end of the tar stream: reads the rest of the input and checks
 * the checksum frame against it. */
static int import_check_sum_frame(Import *im) {
        uint8_t sum[SHA256_LEN];
        uint32_t magic, len;
        int r;

        for (;;) {
                ssize_t n = import_read_input(im);

                if (n < 0)
                        return hutch_error_set(im->reterr, (int)-n,
                                               "failed to read the snapshot archive: %s",
                                               strerror((int)-n));
                if (n == 0)
                        break;
        }
        memcpy(&magic, im->tail, 4);
        memcpy(&len, im->tail + 4, 4);
        if (im->tail_len != SUM_FRAME_SIZE || le32toh(magic) != SUM_FRAME_MAGIC ||
            le32toh(len) != SUM_FRAME_SIZE - 8 ||
            memcmp(im->tail + 8, SUM_FRAME_TAG, SUM_FRAME_TAG_LEN) != 0)
                return hutch_error_set(im->reterr, EBADMSG,
                                       "the snapshot archive is truncated or corrupt: it does not "
                                       "end with its checksum");
        r = sha256_final(im->md, sum);
        if (r < 0)
                return hutch_error_set(im->reterr, -r, "SHA-256 failed");
        if (memcmp(sum, im->tail + 8 + SUM_FRAME_TAG_LEN, SHA256_LEN) != 0)
                return hutch_error_set(im->reterr, EBADMSG,
                                       "the snapshot archive is corrupt: its checksum does not "
                                       "match");
        return 0;
}

/* Applies the directories' modes and mtimes, deepest first (the reverse of
 * the archive's order, parents before children), so that a directory
 * without search permission is done after what it holds. */
static int import_apply_dirs(Import *im) {
        for (size_t i = im->n_dirs; i-- > 0;) {
                const DirMeta *d = &im->dirs[i];
                struct timespec times[2] = {{.tv_nsec = UTIME_OMIT}, d->mtime};
                _cleanup_close_ int fd = -EBADF;

                fd = openat2_beneath(im->layers[d->layer].fd, d->rel[0] ? d->rel : ".",
                                     O_RDONLY | O_DIRECTORY);
                if (fd < 0)
                        return hutch_error_set(im->reterr, -fd,
                                               "failed to open '" LAYERS_PREFIX "%zu/%s': %s",
                                               d->layer, d->rel, strerror(-fd));
                if (fchmod(fd, d->mode) < 0 || futimens(fd, times) < 0)
                        return hutch_error_set(im->reterr, errno,
                                               "failed to set the mode or mtime of "
                                               "'" LAYERS_PREFIX "%zu/%s': %m",
                                               d->layer, d->rel);
        }
        return 0;
}

/* -EEXIST unless the directory @dirfd is empty. */
static int dir_check_empty(int dirfd) {
        _cleanup_(snapshot_names_done) SnapshotNames l = {};
        int r;

        r = snapshot_names_list(dirfd, &l);
        if (r < 0)
                return r;
        return l.n > 0 ? -EEXIST : 0;
}

int snapshot_archive_import(int in_fd, int dest_dirfd, char **ret_manifest_json,
                            HutchError *reterr) {
        return snapshot_archive_import_ids(in_fd, dest_dirfd, NULL, ret_manifest_json, reterr);
}

int snapshot_archive_import_ids(int in_fd, int dest_dirfd, const SnapshotArchiveIds *ids,
                                char **ret_manifest_json, HutchError *reterr) {
        _cleanup_(import_done) Import im = {
                .layers_fd = -EBADF,
                .in_fd = in_fd,
                .reterr = reterr,
                .ids = ids,
        };
        _cleanup_free_ char *text = NULL;
        int r;

        if (in_fd < 0 || dest_dirfd < 0)
                return hutch_error_set(reterr, EINVAL, "bad arguments to snapshot import");
        r = dir_check_empty(dest_dirfd);
        if (r < 0)
                return hutch_error_set(reterr, -r,
                                       "the destination of a snapshot import must be an empty "
                                       "directory: %s",
                                       strerror(-r));
        /* With sub-ids, owners are restored in the store's user namespace
         * (userns_enter_ranged()), where the caller may chown to them. */
        im.restore_ids = geteuid() == 0 || (ids && ids->sub_count > 0);
        im.buf = malloc(IO_BUFFER_SIZE);
        im.in_buf = malloc(IO_BUFFER_SIZE);
        if (!im.buf || !im.in_buf)
                return -ENOMEM;
        r = sha256_new(&im.md);
        if (r < 0)
                return r;
        r = sha256_new(&im.file_md);
        if (r < 0)
                return r;
        im.a = archive_read_new();
        if (!im.a)
                return -ENOMEM;
        /* Only what export writes: tar (pax) in zstd. */
        if (archive_read_support_filter_zstd(im.a) != ARCHIVE_OK ||
            archive_read_support_format_tar(im.a) != ARCHIVE_OK ||
            archive_read_open(im.a, &im, NULL, import_read_cb, NULL) != ARCHIVE_OK)
                return import_archive_fail(&im);

        r = import_manifest(&im, &text);
        if (r < 0)
                return r;
        if (mkdirat(dest_dirfd, LAYERS_DIR, 0755) < 0)
                return hutch_error_set(reterr, errno, "failed to create '" LAYERS_DIR "': %m");
        im.layers_fd =
                openat(dest_dirfd, LAYERS_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (im.layers_fd < 0 || fchmod(im.layers_fd, 0755) < 0)
                return hutch_error_set(reterr, errno, "failed to open '" LAYERS_DIR "': %m");

        for (;;) {
                struct archive_entry *e;

                r = import_next(&im, &e);
                if (r < 0)
                        return r;
                if (r == 0)
                        break;
                r = import_entry(&im, e);
                if (r < 0)
                        return r;
        }
        r = import_check_complete(&im);
        if (r < 0)
                return r;
        r = import_check_sum_frame(&im);
        if (r < 0)
                return r;
        r = import_apply_dirs(&im);
        if (r < 0)
                return r;
        if (ret_manifest_json)
                *ret_manifest_json = TAKE_PTR(text);
        return 0;
}
