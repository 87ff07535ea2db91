/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fd-util.h"
#include "macro.h"
#include "parse-util.h"
#include "store/diff.h"
#include "store/store-internal.h"

#define MANIFEST_MAGIC "hutch-ws-manifest"
#define MANIFEST_VERSION_MAJOR 1
#define MANIFEST_VERSION_MINOR 0
#define MANIFEST_HEADER_MAX 128
/* A record's fields before the path: a type, a space and three numbers of
 * at most 20 characters each with a space after. */
#define MANIFEST_RECORD_FIELDS_MAX (2 + 3 * 21)
#define MANIFEST_PAYLOAD_MAX                                                                       \
        ((size_t)WS_MAX_PATH_BYTES + (size_t)WS_MAX_ENTRIES * MANIFEST_RECORD_FIELDS_MAX)
#define MANIFEST_CRC_LEN 9 /* "xxxxxxxx\n" */

struct WsManifest {
        WsManifestEntry *entries;
        size_t n, alloc;
};

static const char type_chars[_WS_ENTRY_TYPE_MAX] = {
        [WS_ENTRY_FILE] = 'f',
        [WS_ENTRY_DIR] = 'd',
        [WS_ENTRY_SYMLINK] = 'l',
        [WS_ENTRY_OTHER] = 'o',
};

WsManifest *ws_manifest_free(WsManifest *m) {
        if (!m)
                return NULL;
        for (size_t i = 0; i < m->n; i++)
                free((char *)m->entries[i].path);
        free(m->entries);
        return mfree(m);
}

size_t ws_manifest_size(const WsManifest *m) {
        return m ? m->n : 0;
}

const WsManifestEntry *ws_manifest_entry(const WsManifest *m, size_t i) {
        return m && i < m->n ? &m->entries[i] : NULL;
}

static int cmp_entries(const void *a, const void *b) {
        return strcmp(((const WsManifestEntry *)a)->path, ((const WsManifestEntry *)b)->path);
}

const WsManifestEntry *ws_manifest_lookup(const WsManifest *m, const char *path) {
        WsManifestEntry key = {.path = path};

        if (!m || m->n == 0)
                return NULL;
        return bsearch(&key, m->entries, m->n, sizeof(WsManifestEntry), cmp_entries);
}

/* Appends @e, taking ownership of its path (freed on failure too). */
static int manifest_push_take(WsManifest *m, WsManifestEntry e) {
        if (m->n >= WS_MAX_ENTRIES) {
                free((char *)e.path);
                return -EFBIG;
        }
        if (m->n == m->alloc) {
                size_t k = m->alloc ? m->alloc * 2 : 256;
                WsManifestEntry *c = reallocarray(m->entries, k, sizeof(WsManifestEntry));

                if (!c) {
                        free((char *)e.path);
                        return -ENOMEM;
                }
                m->entries = c;
                m->alloc = k;
        }
        m->entries[m->n++] = e;
        return 0;
}

static int scan_visit(const char *path, const WsEntry *merged, const WsEntry *host, void *userdata,
                      HutchError *reterr) {
        WsManifest *m = userdata;
        char *p;
        int r;

        if (!host->present)
                return 0;
        p = strdup(path);
        if (!p)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        r = manifest_push_take(m,
                               (WsManifestEntry){
                                       .path = p,
                                       .type = ws_entry_type_from_mode(host->st.st_mode),
                                       .mode = host->st.st_mode & 07777,
                                       .size = (uint64_t)host->st.st_size,
                                       .mtime_ns = (int64_t)host->st.st_mtim.tv_sec * 1000000000 +
                                                   host->st.st_mtim.tv_nsec,
                               });
        if (r < 0)
                return hutch_error_set(reterr, -r, "too many entries for a manifest");
        return S_ISDIR(host->st.st_mode);
}

int ws_manifest_scan(int host_dirfd, WsManifest **ret, HutchError *reterr) {
        _cleanup_(ws_manifest_freep) WsManifest *m = NULL;
        int r;

        m = calloc(1, sizeof(WsManifest));
        if (!m)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        r = ws_walk(NULL, 0, host_dirfd, scan_visit, m, reterr);
        if (r < 0)
                return r;
        if (m->n > 0)
                qsort(m->entries, m->n, sizeof(WsManifestEntry), cmp_entries);
        *ret = TAKE_PTR(m);
        return 0;
}

/* CRC-32 (IEEE 802.3, reflected, as zlib computes it). */
static uint32_t crc32_ieee(const char *buf, size_t len) {
        uint32_t crc = 0xffffffffu;

        for (size_t i = 0; i < len; i++) {
                crc ^= (uint8_t)buf[i];
                for (int k = 0; k < 8; k++)
                        crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
        }
        return ~crc;
}

static int serialize(const WsManifest *m, char **ret, size_t *ret_len) {
        _cleanup_free_ char *buf = NULL;
        size_t len = 0, alloc = 0;

        for (size_t i = 0; i < m->n; i++) {
                const WsManifestEntry *e = &m->entries[i];
                size_t plen = strlen(e->path);
                char fields[MANIFEST_RECORD_FIELDS_MAX + 1];
                int k;

                k = snprintf(fields, sizeof(fields), "%c %" PRIu32 " %" PRIu64 " %" PRId64 " ",
                             type_chars[e->type], e->mode, e->size, e->mtime_ns);
                if (k < 0 || (size_t)k >= sizeof(fields))
                        return -EINVAL;
                if (len + (size_t)k + plen + 1 > alloc) {
                        size_t want = MAX(alloc * 2, len + (size_t)k + plen + 1 + 4096);
                        char *c = realloc(buf, want);

                        if (!c)
                                return -ENOMEM;
                        buf = c;
                        alloc = want;
                }
                memcpy(buf + len, fields, (size_t)k);
                memcpy(buf + len + (size_t)k, e->path, plen + 1);
                len += (size_t)k + plen + 1;
        }
        *ret = TAKE_PTR(buf);
        *ret_len = len;
        return 0;
}

int ws_manifest_write(int host_dirfd, int out_fd, HutchError *reterr) {
        _cleanup_(ws_manifest_freep) WsManifest *m = NULL;
        _cleanup_free_ char *payload = NULL;
        char head[MANIFEST_HEADER_MAX], tail[MANIFEST_CRC_LEN + 1];
        size_t len = 0;
        int k, r;

        r = ws_manifest_scan(host_dirfd, &m, reterr);
        if (r < 0)
                return r;
        r = serialize(m, &payload, &len);
        if (r < 0)
                return hutch_error_set(reterr, -r, "failed to build the manifest: %s",
                                       strerror(-r));
        k = snprintf(head, sizeof(head), MANIFEST_MAGIC " %d.%d %zu %zu\n", MANIFEST_VERSION_MAJOR,
                     MANIFEST_VERSION_MINOR, m->n, len);
        if (k < 0 || (size_t)k >= sizeof(head))
                return hutch_error_set(reterr, EINVAL, "failed to build the manifest header");
        (void)snprintf(tail, sizeof(tail), "%08" PRIx32 "\n", crc32_ieee(payload, len));
        r = loop_write(out_fd, head, (size_t)k);
        if (r >= 0 && len > 0)
                r = loop_write(out_fd, payload, len);
        if (r >= 0)
                r = loop_write(out_fd, tail, MANIFEST_CRC_LEN);
        if (r < 0)
                return hutch_error_set(reterr, -r, "failed to write the manifest: %s",
                                       strerror(-r));
        return 0;
}

/* Parses the space-terminated decimal at *@p (before @end) into @ret and
 * moves *@p past the space. A leading '-' is accepted when @neg is
 * non-NULL, which is then set. */
static int parse_field(const char **p, const char *end, uint64_t *ret, bool *neg) {
        const char *sp = memchr(*p, ' ', (size_t)(end - *p));
        char tok[24];
        size_t n;
        int r;

        if (!sp)
                return -EBADMSG;
        n = (size_t)(sp - *p);
        if (n == 0 || n >= sizeof(tok))
                return -EBADMSG;
        memcpy(tok, *p, n);
        tok[n] = '\0';
        if (neg)
                *neg = tok[0] == '-';
        r = safe_atou64(neg && *neg ? tok + 1 : tok, ret);
        if (r < 0)
                return -EBADMSG;
        *p = sp + 1;
        return 0;
}

static int parse_record(const char *rec, const char *end, WsManifestEntry *ret) {
        const char *p = rec, *t;
        uint64_t mode, size, mtime;
        bool neg;
        int r;

        if (end - p < 2 || p[1] != ' ')
                return -EBADMSG;
        t = memchr(type_chars, p[0], sizeof(type_chars));
        if (!t)
                return -EBADMSG;
        p += 2;
        r = parse_field(&p, end, &mode, NULL);
        if (r >= 0)
                r = parse_field(&p, end, &size, NULL);
        if (r >= 0)
                r = parse_field(&p, end, &mtime, &neg);
        if (r < 0)
                return r;
        if (mode > 07777 || size > INT64_MAX || mtime > (uint64_t)INT64_MAX)
                return -EBADMSG;
        /* The path runs to the record's NUL; ws_path_is_valid() checks it. */
        if (!ws_path_is_valid(p))
                return -EBADMSG;
        *ret = (WsManifestEntry){
                .path = p,
                .type = (WsEntryType)(t - type_chars),
                .mode = (uint32_t)mode,
                .size = size,
                .mtime_ns = neg ? -(int64_t)mtime : (int64_t)mtime,
        };
        return 0;
}

/* Parses "MAGIC MAJOR.MINOR COUNT LENGTH" (the header line without its
 * newline). */
static int parse_header(char *line, uint64_t *ret_count, uint64_t *ret_len) {
        char *f[4], *save = NULL, *dot;
        uint32_t major, minor;
        size_t n = 0;

        for (char *tok = strtok_r(line, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
                if (n == ELEMENTSOF(f))
                        return -EBADMSG;
                f[n++] = tok;
        }
        if (n != ELEMENTSOF(f) || strcmp(f[0], MANIFEST_MAGIC) != 0)
                return -EBADMSG;
        dot = strchr(f[1], '.');
        if (!dot)
                return -EBADMSG;
        *dot = '\0';
        if (safe_atou32(f[1], &major) < 0 || safe_atou32(dot + 1, &minor) < 0)
                return -EBADMSG;
        if (major != MANIFEST_VERSION_MAJOR)
                return -EPROTONOSUPPORT;
        if (safe_atou64(f[2], ret_count) < 0 || safe_atou64(f[3], ret_len) < 0)
                return -EBADMSG;
        return 0;
}

static int load_fail(HutchError *reterr, int r, const char *what) {
        return hutch_error_set(reterr, -r, "invalid workspace manifest: %s", what);
}

int ws_manifest_load(int fd, WsManifest **ret, HutchError *reterr) {
        _cleanup_(ws_manifest_freep) WsManifest *m = NULL;
        _cleanup_free_ char *data = NULL;
        char line[MANIFEST_HEADER_MAX], crc[MANIFEST_CRC_LEN + 1];
        const char *nl, *payload, *p, *end;
        uint64_t count, len;
        size_t size = 0, head_len;
        int r;

        r = read_full_fd(fd, MANIFEST_HEADER_MAX + MANIFEST_PAYLOAD_MAX + MANIFEST_CRC_LEN, &data,
                         &size);
        if (r == -EFBIG)
                return load_fail(reterr, r, "larger than the caps allow");
        if (r < 0)
                return hutch_error_set(reterr, -r, "failed to read the workspace manifest: %s",
                                       strerror(-r));
        nl = memchr(data, '\n', MIN(size, (size_t)MANIFEST_HEADER_MAX));
        if (!nl)
                return load_fail(reterr, -EBADMSG, "no header line");
        head_len = (size_t)(nl - data);
        memcpy(line, data, head_len);
        line[head_len] = '\0';
        r = parse_header(line, &count, &len);
        if (r == -EPROTONOSUPPORT)
                return load_fail(reterr, r, "unsupported major version");
        if (r < 0)
                return load_fail(reterr, r, "bad header line");
        if (count > WS_MAX_ENTRIES || len > MANIFEST_PAYLOAD_MAX)
                return load_fail(reterr, -EFBIG, "larger than the caps allow");
        if (size - head_len - 1 != len + MANIFEST_CRC_LEN)
                return load_fail(reterr, -EBADMSG, "wrong length");
        payload = nl + 1;
        (void)snprintf(crc, sizeof(crc), "%08" PRIx32 "\n", crc32_ieee(payload, (size_t)len));
        if (memcmp(payload + len, crc, MANIFEST_CRC_LEN) != 0)
                return load_fail(reterr, -EBADMSG, "checksum mismatch");

        m = calloc(1, sizeof(WsManifest));
        if (!m)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        end = payload + len;
        for (p = payload; p < end;) {
                const char *nul = memchr(p, '\0', (size_t)(end - p));
                WsManifestEntry e;
                char *path;

                if (!nul)
                        return load_fail(reterr, -EBADMSG, "unterminated record");
                r = parse_record(p, nul, &e);
                if (r < 0)
                        return load_fail(reterr, r, "bad record");
                if (m->n > 0 && strcmp(m->entries[m->n - 1].path, e.path) >= 0)
                        return load_fail(reterr, -EBADMSG, "records out of order");
                if (m->n >= count)
                        return load_fail(reterr, -EBADMSG, "more records than counted");
                path = strdup(e.path);
                if (!path)
                        return hutch_error_set(reterr, ENOMEM, "out of memory");
                e.path = path;
                r = manifest_push_take(m, e);
                if (r < 0)
                        return hutch_error_set(reterr, -r, "out of memory");
                p = nul + 1;
        }
        if (m->n != count)
                return load_fail(reterr, -EBADMSG, "fewer records than counted");
        *ret = TAKE_PTR(m);
        return 0;
}
