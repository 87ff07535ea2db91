/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "image/image-layer.h"
#include "store/archive.h"

/* Fuzzes the layer reader (image-layer.h): the input is a layer blob (a
 * tar, or gzip/zstd of one), unpacked into root/ of a fresh folder.
 * Invariants: a failure fills the HutchError with its errno and a message;
 * nothing is ever created beside root/ (no escape); a success's digests
 * are well-formed. */

#define FUZZ_INPUT_MAX (256u * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char dir[] = "/tmp/fuzz-image-layer-XXXXXX";
        ImageLayerResult res;
        HutchError err = {};
        int fd, parent, root, r;
        struct stat st;

        if (size > FUZZ_INPUT_MAX)
                return 0;
        fd = memfd_create("layer", MFD_CLOEXEC);
        if (fd < 0 || (size && loop_write(fd, data, size) < 0) || lseek(fd, 0, SEEK_SET) < 0)
                abort();
        if (!mkdtemp(dir))
                abort();
        parent = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (parent < 0 || mkdirat(parent, "root", 0700) < 0)
                abort();
        root = openat(parent, "root", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                abort();
        r = image_layer_unpack(fd, root, IMAGE_LAYER_OWNERS_CALLER, -EBADF, &res, &err);
        if (r < 0 && (err.errnum != -r || err.msg[0] == '\0'))
                abort();
        if (r >= 0 && (strncmp(res.diff_id, "sha256:", 7) != 0 ||
                       strlen(res.blob_digest) != strlen(res.diff_id)))
                abort();
        /* The layer's parent holds root/ and nothing else. */
        if (fstatat(parent, "root", &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
                abort();
        {
                int dfd = dup(parent);
                DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
                struct dirent *de;
                unsigned n = 0;

                if (!d)
                        abort();
                while ((de = readdir_no_dot(d)))
                        n++;
                (void)closedir(d);
                if (n != 1)
                        abort();
        }
        if (snapshot_archive_clear(parent) < 0 || rmdir(dir) < 0)
                abort();
        (void)close(root);
        (void)close(parent);
        (void)close(fd);
        return 0;
}
