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

#include "api/persist.h"
#include "cli-util.h"
#include "cli.h"
#include "fd-util.h"
#include "log.h"
#include "parse-util.h"
#include "progress.h"
#include "rm-rf.h"
#include "store/archive.h"
#include "store/store.h"
#include "strv.h"

/* Every layer of @snap's chain, top first, as directory fds. */
static int open_chain(const Store *s, const char *snap, int **ret_fds, size_t *ret_n,
                      HutchError *reterr) {
        _cleanup_strv_free_ char **chain = NULL;
        _cleanup_free_ int *fds = NULL;
        size_t n;
        int r;

        r = store_snapshot_chain(s, snap, SIZE_MAX, &chain, reterr);
        if (r < 0)
                return r;
        n = strv_length(chain);
        fds = calloc(n ? n : 1, sizeof(int));
        if (!fds)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                fds[i] = open(chain[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fds[i] < 0) {
                        r = hutch_error_set(reterr, errno, "cannot open the layer %s: %m",
                                            chain[i]);
                        for (size_t j = 0; j < i; j++)
                                (void)close(fds[j]);
                        return r;
                }
        }
        *ret_fds = TAKE_PTR(fds);
        *ret_n = n;
        return 0;
}

static int snapshot_export(int argc, char **argv) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(snapshot_record_freep) SnapshotRecord *rec = NULL;
        _cleanup_free_ char *manifest = NULL, *tmp = NULL;
        _cleanup_free_ int *fds = NULL;
        _cleanup_close_ int out = -EBADF;
        _cleanup_free_ char *what = NULL, *done_what = NULL;
        const char *path = NULL, *name = NULL;
        Progress progress = PROGRESS_NULL;
        HutchError err = {};
        bool quiet = false;
        size_t n = 0;
        int r;

        for (int i = 1; i < argc; i++) {
                if ((strcmp(argv[i], "-o") == 0 || strcmp(argv[i], "--output") == 0) &&
                    i + 1 < argc)
                        path = argv[++i];
                else if (strcmp(argv[i], "-q") == 0 || strcmp(argv[i], "--quiet") == 0)
                        quiet = true;
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
        r = cli_store_open(NULL, &s, NULL);
        if (r != 0)
                return r;
        r = store_enter_range(s, &err);
        if (r < 0)
                return cli_fail(&err, r);
        r = store_snapshot_load(s, name, &rec, &err);
        if (r < 0)
                return cli_fail(&err, r);
        /* The export stands alone: the whole chain, no parent. */
        rec->parent = mfree(rec->parent);
        /* An imported snapshot passes on what its archive suggested (as
         * the policy: an importer treats it as a suggestion again). */
        if (rec->imported && rec->suggested_policy_json) {
                free(rec->policy_json);
                rec->policy_json = TAKE_PTR(rec->suggested_policy_json);
        }
        rec->imported = false;
        r = snapshot_record_to_json(rec, &manifest);
        if (r < 0) {
                log_error_errno(r, "cannot describe the snapshot: %m");
                return HUTCH_EXIT_FAILURE;
        }
        r = open_chain(s, name, &fds, &n, &err);
        if (r < 0)
                return cli_fail(&err, r);
        if (asprintf(&tmp, "%s.tmp-%d", path, (int)getpid()) < 0) {
                tmp = NULL;
                r = -ENOMEM;
                goto done;
        }
        out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (out < 0) {
                r = hutch_error_set(&err, errno, "cannot create %s: %m", tmp);
                goto done;
        }
        if (asprintf(&what, "exporting %s", name) < 0)
                what = NULL;
        if (asprintf(&done_what, "exported %s", name) < 0)
                done_what = NULL;
        progress_begin(&progress, what ? what : "exporting", out, PROGRESS_FILE_SIZE, 0,
                       quiet || !what);
        r = snapshot_archive_export_ids(manifest, fds, n,
                                        &(SnapshotArchiveIds){s->idmap.uid_base, s->idmap.gid_base,
                                                              s->idmap.count, s->idmap.sub_uid_base,
                                                              s->idmap.sub_gid_base,
                                                              s->idmap.sub_count},
                                        out, &err);
        progress_end(&progress, done_what ? done_what : "exported", r >= 0);
        if (r >= 0 && fsync(out) < 0)
                r = hutch_error_set(&err, errno, "cannot write %s: %m", tmp);
        if (r >= 0 && rename(tmp, path) < 0)
                r = hutch_error_set(&err, errno, "cannot create %s: %m", path);
        if (r < 0)
                (void)unlink(tmp);
done:
        for (size_t i = 0; i < n; i++)
                (void)close(fds[i]);
        if (r < 0)
                return cli_fail(&err, r);
        return 0;
}

/* An imported snapshot's policy is "{}" (the caller's is used), but for
 * the image its layers were made on: that is no authority (a root
 * filesystem, not a host path or a network permission), and its layers
 * mean nothing on another root. The archive names the image by digest
 * (the exported sandbox's policy pinned it); the store must have it, or
 * the import is refused naming it. */
static int import_image_policy(Store *s, SnapshotRecord *rec, HutchError *reterr) {
        json_t *suggested =
                rec->suggested_policy_json ? json_loads(rec->suggested_policy_json, 0, NULL) : NULL;
        json_t *image = suggested ? json_object_get(suggested, "image") : NULL;
        _cleanup_free_ char *digest = NULL;
        int r = 0;

        if (json_is_string(image)) {
                HutchError ignored = {};

                r = persist_image_digest(s, json_string_value(image), &digest, &ignored);
                if (r == -ENOENT)
                        r = hutch_error_set(reterr, ENOENT,
                                            "the snapshot was made on the image %s, which is not "
                                            "in the image store: import or pull it first (hutch "
                                            "image import, hutch image pull)",
                                            json_string_value(image));
                else if (r < 0)
                        r = hutch_error_set(reterr, -r, "%s", ignored.msg);
        }
        json_decref(suggested);
        if (r < 0)
                return r;
        free(rec->policy_json);
        if (digest)
                r = asprintf(&rec->policy_json, "{\"image\": \"%s\"}", digest) < 0 ? -ENOMEM : 0;
        else
                rec->policy_json = strdup("{}");
        if (r < 0 || !rec->policy_json) {
                rec->policy_json = NULL;
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        }
        return 0;
}

static int snapshot_import(int argc, char **argv) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(snapshot_record_freep) SnapshotRecord *rec = NULL;
        _cleanup_free_ char *tmp = NULL, *manifest = NULL;
        _cleanup_close_ int in = -EBADF, dfd = -EBADF, hold = -EBADF;
        const char *path = NULL, *name = NULL;
        Progress progress = PROGRESS_NULL;
        json_t *j = NULL;
        HutchError err = {};
        bool quiet = false;
        struct stat st;
        size_t n_layers;
        int r;

        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--name") == 0 && i + 1 < argc)
                        name = argv[++i];
                else if (strcmp(argv[i], "-q") == 0 || strcmp(argv[i], "--quiet") == 0)
                        quiet = true;
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
        if (name && !store_name_is_valid(name)) {
                log_error("invalid snapshot name '%s'", name);
                return HUTCH_EXIT_FAILURE;
        }
        r = cli_store_open(NULL, &s, NULL);
        if (r != 0)
                return r;
        r = store_enter_range(s, &err);
        if (r < 0)
                return cli_fail(&err, r);
        in = open(path, O_RDONLY | O_CLOEXEC);
        if (in < 0) {
                log_error("cannot open '%s': %m", path);
                return HUTCH_EXIT_FAILURE;
        }
        r = store_snapshot_begin(s, &tmp, &err);
        if (r < 0)
                return cli_fail(&err, r);
        dfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) {
                r = hutch_error_set(&err, errno, "cannot open %s: %m", tmp);
                goto fail;
        }
        /* gc removes temp folders nobody holds; this one is held until it
         * is renamed into place. */
        r = store_temp_hold(tmp, &hold, &err);
        if (r < 0)
                goto fail;
        progress_begin(&progress, "importing", in, PROGRESS_FILE_OFFSET,
                       fstat(in, &st) >= 0 && S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0,
                       quiet);
        r = snapshot_archive_import_ids(in, dfd,
                                        &(SnapshotArchiveIds){s->idmap.uid_base, s->idmap.gid_base,
                                                              s->idmap.count, s->idmap.sub_uid_base,
                                                              s->idmap.sub_gid_base,
                                                              s->idmap.sub_count},
                                        &manifest, &err);
        progress_end(&progress, "imported", r >= 0);
        if (r < 0)
                goto fail;
        /* Its layers are the archive's, in its own folder ("layers/<i>",
         * which the manifest lists with their checksums); nothing below. */
        j = json_loads(manifest, 0, NULL);
        n_layers = json_array_size(json_object_get(j, "layers"));
        if (!json_is_object(j) || n_layers == 0) {
                json_decref(j);
                r = hutch_error_set(&err, EBADMSG, "the archive holds no layer");
                goto fail;
        }
        {
                json_t *layers = json_array();

                for (size_t i = 0; i < n_layers; i++) {
                        char layer[32];

                        (void)snprintf(layer, sizeof(layer), "layers/%zu", i);
                        (void)json_array_append_new(layers, json_string(layer));
                }
                (void)json_object_set_new(j, "layers", layers);
                free(manifest);
                manifest = json_dumps(j, JSON_COMPACT);
                json_decref(j);
        }
        if (!manifest) {
                r = -ENOMEM;
                goto fail;
        }
        r = snapshot_record_from_json(manifest, &rec, &err);
        if (r < 0)
                goto fail;
        rec->parent = mfree(rec->parent);
        rec->origin_upper = mfree(rec->origin_upper);
        rec->has_manifest = false;
        /* SECURITY: a snapshot is data, never authority (issue 26). Anyone
         * can write a manifest (the checksums are recomputed as easily), so
         * its policy (binds of host folders, env_pass, secrets, audit_log,
         * allowlist, limits) is kept only as a suggestion that `hutch
         * snapshot inspect` shows; `create --from` takes the caller's. */
        free(rec->suggested_policy_json);
        rec->suggested_policy_json = TAKE_PTR(rec->policy_json);
        rec->imported = true;
        r = import_image_policy(s, rec, &err);
        if (r < 0)
                goto fail;
        if (name) {
                free(rec->name);
                rec->name = strdup(name);
                if (!rec->name) {
                        r = -ENOMEM;
                        goto fail;
                }
        }
        free(rec->id);
        r = store_new_id(&rec->id);
        if (r < 0)
                goto fail;
        r = store_snapshot_commit(s, tmp, rec, &err);
        if (r < 0)
                goto fail;
        r = persist_image_mark(s, rec->policy_json, "snapshot", rec->name, &err);
        if (r < 0)
                return cli_fail(&err, r);
        (void)printf("%s\n", rec->name);
        return 0;
fail:
        (void)rm_rf_at(AT_FDCWD, tmp);
        return cli_fail(&err, r);
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
