/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <jansson.h>
#include <openssl/evp.h>

#include "fd-util.h"
#include "store/archive.h"

/* Fuzzes snapshot import. The input is an uncompressed tar stream: the
 * target compresses it with zstd and appends the right checksum frame, so
 * mutations reach the manifest and entry checks instead of dying in zstd
 * or at the checksum. Invariants:
 *   - a failure fills the HutchError with its errno and a message;
 *   - a success returns the manifest, and the layers it made export again
 *     (what import accepts, export accepts: they share their rules). */

#define FUZZ_INPUT_MAX (256u * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Writes @data as one zstd frame to a new memfd, plus the checksum frame
 * (archive.h). Returns the fd at offset 0, or -1. */
static int archive_from_tar(const uint8_t *data, size_t size) {
        unsigned char frame[48] = {0x50, 0x2a, 0x4d, 0x18, 40,  0,   0,   0,
                                   'H',  'U',  'T',  'C',  'H', 'S', 'U', 'M'};
        struct archive *a = archive_write_new();
        struct archive_entry *e = archive_entry_new();
        int fd = memfd_create("fuzz", MFD_CLOEXEC);
        unsigned len = 0;
        struct stat st;
        void *p;
        bool ok;

        if (!a || !e || fd < 0)
                abort();
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_size(e, (la_int64_t)size);
        ok = archive_write_add_filter_zstd(a) == ARCHIVE_OK &&
             archive_write_set_format_raw(a) == ARCHIVE_OK &&
             archive_write_set_bytes_in_last_block(a, 1) == ARCHIVE_OK &&
             archive_write_open_fd(a, fd) == ARCHIVE_OK &&
             archive_write_header(a, e) == ARCHIVE_OK &&
             (size == 0 || archive_write_data(a, data, size) == (la_ssize_t)size) &&
             archive_write_close(a) == ARCHIVE_OK;
        archive_entry_free(e);
        (void)archive_write_free(a);
        if (!ok || fstat(fd, &st) < 0)
                abort();
        p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED ||
            EVP_Digest(p, (size_t)st.st_size, frame + 16, &len, EVP_sha256(), NULL) != 1)
                abort();
        (void)munmap(p, (size_t)st.st_size);
        if (loop_write(fd, frame, sizeof(frame)) < 0 || lseek(fd, 0, SEEK_SET) < 0)
                abort();
        return fd;
}

/* Exports what import made below @dest, per the manifest @text. */
static void export_again(int dest, const char *text) {
        json_t *root = json_loads(text, 0, NULL);
        size_t n = json_array_size(json_object_get(root, "layers"));
        int fds[SNAPSHOT_ARCHIVE_LAYERS_MAX], out = memfd_create("again", MFD_CLOEXEC);
        HutchError err = {};

        if (!root || n == 0 || n > SNAPSHOT_ARCHIVE_LAYERS_MAX || out < 0)
                abort();
        for (size_t i = 0; i < n; i++) {
                char path[32];

                (void)snprintf(path, sizeof(path), "layers/%zu", i);
                fds[i] = openat(dest, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fds[i] < 0)
                        abort();
        }
        if (snapshot_archive_export(text, fds, n, out, &err) < 0) {
                fprintf(stderr, "import accepted what export refuses: %s\n", err.msg);
                abort();
        }
        for (size_t i = 0; i < n; i++)
                (void)close(fds[i]);
        (void)close(out);
        json_decref(root);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char dest[] = "/tmp/fuzz-snapshot-XXXXXX";
        char *manifest = NULL;
        HutchError err = {};
        int fd, d, r;

        if (size > FUZZ_INPUT_MAX)
                return 0;
        fd = archive_from_tar(data, size);
        if (!mkdtemp(dest))
                abort();
        d = open(dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (d < 0)
                abort();
        r = snapshot_archive_import(fd, d, &manifest, &err);
        if (r < 0 && (err.errnum != -r || err.msg[0] == '\0' || manifest))
                abort();
        if (r >= 0) {
                if (!manifest)
                        abort();
                export_again(d, manifest);
        }
        if (snapshot_archive_clear(d) < 0 || rmdir(dest) < 0)
                abort();
        free(manifest);
        (void)close(d);
        (void)close(fd);
        return 0;
}
