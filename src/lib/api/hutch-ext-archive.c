/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch-ext.h's snapshot export and import: the store's records and
 * layers as one archive (store/archive.h). Only hutch-archive calls these
 * (it alone links libarchive). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/hutch-ext.h"
#include "api/persist.h"
#include "fd-util.h"
#include "rm-rf.h"
#include "store/archive.h"
#include "store/store.h"
#include "strv.h"

static void progress_begin(const HutchExtProgress *p, const char *what, int fd, bool by_offset,
                           uint64_t total) {
        if (p && p->begin)
                p->begin(p->userdata, what, fd, by_offset, total);
}

static void progress_end(const HutchExtProgress *p, const char *done, bool ok) {
        if (p && p->end)
                p->end(p->userdata, done, ok);
}

static SnapshotArchiveIds archive_ids(const Store *s) {
        return (SnapshotArchiveIds){s->idmap.uid_base,     s->idmap.gid_base,
                                    s->idmap.count,        s->idmap.sub_uid_base,
                                    s->idmap.sub_gid_base, s->idmap.sub_count};
}

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

int hutch_ext_snapshot_export(const char *name, const char *path, const HutchExtProgress *p,
                              HutchError *reterr) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(snapshot_record_freep) SnapshotRecord *rec = NULL;
        _cleanup_free_ char *manifest = NULL, *tmp = NULL;
        _cleanup_free_ int *fds = NULL;
        _cleanup_close_ int out = -EBADF;
        _cleanup_free_ char *what = NULL, *done_what = NULL;
        SnapshotArchiveIds ids;
        size_t n = 0;
        int r;

        r = store_open(&s, reterr);
        if (r < 0)
                return r;
        r = store_enter_range(s, reterr);
        if (r < 0)
                return r;
        r = store_snapshot_load(s, name, &rec, reterr);
        if (r < 0)
                return r;
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
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot describe the snapshot: %s",
                                       strerror(-r));
        r = open_chain(s, name, &fds, &n, reterr);
        if (r < 0)
                return r;
        if (asprintf(&tmp, "%s.tmp-%d", path, (int)getpid()) < 0) {
                tmp = NULL;
                r = -ENOMEM;
                goto done;
        }
        out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (out < 0) {
                r = hutch_error_set(reterr, errno, "cannot create %s: %m", tmp);
                goto done;
        }
        if (asprintf(&what, "exporting %s", name) < 0)
                what = NULL;
        if (asprintf(&done_what, "exported %s", name) < 0)
                done_what = NULL;
        /* Without its text, no progress at all. */
        if (what)
                progress_begin(p, what, out, false, 0);
        ids = archive_ids(s);
        r = snapshot_archive_export_ids(manifest, fds, n, &ids, out, reterr);
        if (what)
                progress_end(p, done_what ? done_what : "exported", r >= 0);
        if (r >= 0 && fsync(out) < 0)
                r = hutch_error_set(reterr, errno, "cannot write %s: %m", tmp);
        if (r >= 0 && rename(tmp, path) < 0)
                r = hutch_error_set(reterr, errno, "cannot create %s: %m", path);
        if (r < 0)
                (void)unlink(tmp);
done:
        for (size_t i = 0; i < n; i++)
                (void)close(fds[i]);
        return r < 0 ? r : 0;
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

/* The manifest of an imported archive with its layers named as they lie
 * in the snapshot's own folder ("layers/<i>"). -EBADMSG when it has none. */
static int import_manifest_layers(char **manifest, HutchError *reterr) {
        json_t *j = json_loads(*manifest, 0, NULL), *layers;
        size_t n_layers = json_array_size(json_object_get(j, "layers"));

        if (!json_is_object(j) || n_layers == 0) {
                json_decref(j);
                return hutch_error_set(reterr, EBADMSG, "the archive holds no layer");
        }
        layers = json_array();
        for (size_t i = 0; i < n_layers; i++) {
                char layer[32];

                (void)snprintf(layer, sizeof(layer), "layers/%zu", i);
                (void)json_array_append_new(layers, json_string(layer));
        }
        (void)json_object_set_new(j, "layers", layers);
        free(*manifest);
        *manifest = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        return *manifest ? 0 : -ENOMEM;
}

int hutch_ext_snapshot_import(const char *path, const char *name, const HutchExtProgress *p,
                              char **ret_name, HutchError *reterr) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(snapshot_record_freep) SnapshotRecord *rec = NULL;
        _cleanup_free_ char *tmp = NULL, *manifest = NULL;
        _cleanup_close_ int in = -EBADF, dfd = -EBADF, hold = -EBADF;
        SnapshotArchiveIds ids;
        struct stat st;
        int r;

        r = store_open(&s, reterr);
        if (r < 0)
                return r;
        r = store_enter_range(s, reterr);
        if (r < 0)
                return r;
        in = open(path, O_RDONLY | O_CLOEXEC);
        if (in < 0)
                return hutch_error_set(reterr, errno, "cannot open '%s': %m", path);
        r = store_snapshot_begin(s, &tmp, reterr);
        if (r < 0)
                return r;
        dfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) {
                r = hutch_error_set(reterr, errno, "cannot open %s: %m", tmp);
                goto fail;
        }
        /* gc removes temp folders nobody holds; this one is held until it
         * is renamed into place. */
        r = store_temp_hold(tmp, &hold, reterr);
        if (r < 0)
                goto fail;
        progress_begin(p, "importing", in, true,
                       fstat(in, &st) >= 0 && S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0);
        ids = archive_ids(s);
        r = snapshot_archive_import_ids(in, dfd, &ids, &manifest, reterr);
        progress_end(p, "imported", r >= 0);
        if (r < 0)
                goto fail;
        /* Its layers are the archive's, in its own folder ("layers/<i>",
         * which the manifest lists with their checksums); nothing below. */
        r = import_manifest_layers(&manifest, reterr);
        if (r < 0)
                goto fail;
        r = snapshot_record_from_json(manifest, &rec, reterr);
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
        r = import_image_policy(s, rec, reterr);
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
        r = store_snapshot_commit(s, tmp, rec, reterr);
        if (r < 0)
                goto fail;
        r = persist_image_mark(s, rec->policy_json, "snapshot", rec->name, reterr);
        if (r < 0)
                return r;
        *ret_name = TAKE_PTR(rec->name);
        return 0;
fail:
        (void)rm_rf_at(AT_FDCWD, tmp);
        return r;
}
