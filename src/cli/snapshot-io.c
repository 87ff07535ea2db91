/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch-archive: `hutch snapshot export` and `import`, and the VM
 * kernel's decompression, in a program of their own so that only it links
 * libarchive (docs/persistent.md, docs/vm.md).
 *   hutch-archive export SNAP -o FILE.tar.zst [-q]
 *   hutch-archive import FILE [--name SNAP] [-q]
 *   hutch-archive decompress MAX_BYTES  < compressed > plain */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/hutch-ext.h"
#include "cli-util.h"
#include "cli.h"
#include "fd-util.h"
#include "log.h"
#include "parse-util.h"
#include "progress.h"
#include "strv.h"

/* HutchExtProgress over progress.h: the line on stderr (off with -q). */
typedef struct IoProgress {
        Progress p;
        bool quiet;
} IoProgress;

static void io_progress_begin(void *userdata, const char *what, int fd, bool by_offset,
                              uint64_t total) {
        IoProgress *io = userdata;

        progress_begin(&io->p, what, fd, by_offset ? PROGRESS_FILE_OFFSET : PROGRESS_FILE_SIZE,
                       total, io->quiet);
}

static void io_progress_end(void *userdata, const char *done, bool ok) {
        IoProgress *io = userdata;

        progress_end(&io->p, done, ok);
}

static int snapshot_export(int argc, char **argv) {
        IoProgress io = {.p = PROGRESS_NULL};
        HutchExtProgress progress = {io_progress_begin, io_progress_end, &io};
        const char *path = NULL, *name = NULL;
        HutchError err = {};
        int r;

        for (int i = 1; i < argc; i++) {
                if ((strcmp(argv[i], "-o") == 0 || strcmp(argv[i], "--output") == 0) &&
                    i + 1 < argc)
                        path = argv[++i];
                else if (strcmp(argv[i], "-q") == 0 || strcmp(argv[i], "--quiet") == 0)
                        io.quiet = true;
                else if (!name && argv[i][0] != '-')
                        name = argv[i];
                else {
                        log_error("usage: hutch snapshot export SNAP -o FILE.tar.zst [-q]");
                        return HUTCH_EXIT_FAILURE;
                }
        }
        if (!name || !path) {
                log_error("usage: hutch snapshot export SNAP -o FILE.tar.zst [-q]");
                return HUTCH_EXIT_FAILURE;
        }
        r = hutch_ext_snapshot_export(name, path, &progress, &err);
        if (r < 0)
                return cli_fail(&err, r);
        return 0;
}

static int snapshot_import(int argc, char **argv) {
        IoProgress io = {.p = PROGRESS_NULL};
        HutchExtProgress progress = {io_progress_begin, io_progress_end, &io};
        _cleanup_free_ char *imported = NULL;
        const char *path = NULL, *name = NULL;
        HutchError err = {};
        int r;

        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--name") == 0 && i + 1 < argc)
                        name = argv[++i];
                else if (strcmp(argv[i], "-q") == 0 || strcmp(argv[i], "--quiet") == 0)
                        io.quiet = true;
                else if (!path && argv[i][0] != '-')
                        path = argv[i];
                else {
                        log_error("usage: hutch snapshot import FILE [--name SNAP] [-q]");
                        return HUTCH_EXIT_FAILURE;
                }
        }
        if (!path) {
                log_error("usage: hutch snapshot import FILE [--name SNAP] [-q]");
                return HUTCH_EXIT_FAILURE;
        }
        if (name && !hutch_ext_name_is_valid(name)) {
                log_error("invalid snapshot name '%s'", name);
                return HUTCH_EXIT_FAILURE;
        }
        r = hutch_ext_snapshot_import(path, name, &progress, &imported, &err);
        if (r < 0)
                return cli_fail(&err, r);
        (void)printf("%s\n", imported);
        return 0;
}

/* `decompress MAX`: stdin, compressed in any format of libarchive's
 * filters (gzip, xz, lzma, zstd, lz4, bzip2), to stdout. Exit 0, 2 for
 * input in no known format, 3 past MAX bytes, 1 for anything else (said on
 * stderr). The caller is src/lib/vm/vm-image.c. */
static int decompress_main(int argc, char **argv) {
        struct archive *a = NULL;
        struct archive_entry *e;
        static char buf[1U << 16];
        uint64_t max, total = 0;
        int rc = 1;

        if (argc != 2 || safe_atou64(argv[1], &max) < 0) {
                log_error("usage: hutch-archive decompress MAX_BYTES");
                return 1;
        }
        a = archive_read_new();
        if (!a) {
                log_error("decompress: out of memory");
                return 1;
        }
        if (archive_read_support_filter_all(a) != ARCHIVE_OK ||
            archive_read_support_format_raw(a) != ARCHIVE_OK ||
            archive_read_open_fd(a, STDIN_FILENO, sizeof(buf)) != ARCHIVE_OK ||
            archive_read_next_header(a, &e) != ARCHIVE_OK) {
                log_error("decompress: %s", archive_error_string(a) ?: "unknown format");
                rc = 2;
                goto out;
        }
        for (;;) {
                la_ssize_t n = archive_read_data(a, buf, sizeof(buf));
                int r;

                if (n < 0) {
                        log_error("decompress: %s", archive_error_string(a) ?: "read error");
                        rc = 2;
                        goto out;
                }
                if (n == 0)
                        break;
                total += (uint64_t)n;
                if (total > max) {
                        log_error("decompress: larger than %" PRIu64 " bytes", max);
                        rc = 3;
                        goto out;
                }
                r = loop_write(STDOUT_FILENO, buf, (size_t)n);
                if (r < 0) {
                        log_error("decompress: cannot write: %s", strerror(-r));
                        goto out;
                }
        }
        rc = 0;
out:
        (void)archive_read_free(a);
        return rc;
}

int main(int argc, char **argv) {
        log_setup("hutch", LOG_LEVEL_INFO);
        if (argc >= 2 && strcmp(argv[1], "decompress") == 0)
                return decompress_main(argc - 1, argv + 1);
        if (argc >= 2 && strcmp(argv[1], "export") == 0)
                return snapshot_export(argc - 1, argv + 1);
        if (argc >= 2 && strcmp(argv[1], "import") == 0)
                return snapshot_import(argc - 1, argv + 1);
        log_error("usage: hutch snapshot export SNAP -o FILE.tar.zst [-q] | import FILE [--name "
                  "SNAP] [-q]");
        return HUTCH_EXIT_FAILURE;
}
