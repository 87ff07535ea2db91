/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The image store: OCI/Docker images unpacked once into read-only overlay
 * layers, content-addressed and shared by every image and sandbox that
 * uses them (docs/images.md, issue 17).
 *
 *   $HUTCH_HOME/images/               0700, the importer's (root: root's)
 *     lock                            flock: imports hold it shared, rm and
 *                                     gc exclusive (a layer an import has
 *                                     decided to reuse is never removed
 *                                     under it)
 *     tags.lock                       flock: one writer of tags.json
 *     tags.json                       {"NAME:TAG": "sha256:<hex>", ...}
 *     layers/<hex>/root/              a layer's tree in overlayfs format
 *                                     (store/layers.h: whiteouts are char
 *                                     0:0, opaque dirs carry
 *                                     user.overlay.opaque=y), <hex> the
 *                                     layer's diff id (the SHA-256 of its
 *                                     uncompressed tar)
 *     layers/<hex>/layer.json         {"diff_id", "size", "entries",
 *                                     "skipped_devices", "owners"}
 *     layers/<hex>/owners             user imports only: the image's own
 *                                     ids, records "UID:GID\0PATH\0" of
 *                                     every entry not owned by 0:0
 *     manifests/<hex>/manifest.json   the image manifest (<hex> its digest:
 *                                     the image's id)
 *     manifests/<hex>/config.json     the image config, as imported
 *     manifests/<hex>/image.json      the store's record (see Image)
 *     refs/<hex>/<KIND>:<NAME>        "in use" marks (image_store_use())
 *     .tmp-*                          being imported (held by a flock) or
 *                                     left by a crash: `hutch image gc`
 *
 * Crash safety: a layer is unpacked into a .tmp-* folder and renamed to
 * layers/<hex> whole; an image's manifests/<hex> folder is written under a
 * .tmp-* name and renamed after all its layers are in place; tags.json is
 * replaced atomically last. So a crashed import leaves only .tmp-* folders
 * (removed by gc) and maybe complete layers no image names (also removed by
 * gc): `image ls` never shows a half-imported image.
 *
 * Ownership: imported as root, files keep the image's uids/gids (a sandbox
 * maps them into its range with an idmapped mount or its own range);
 * imported as a user, every file is the user's (a single-id sandbox's
 * root), directories get u+rwx (harmless: a sandbox's root overrides
 * permissions anyway, and the user can remove them), and the image's own
 * ids are recorded in the layer's owners file for later use.
 *
 * STABLE (other parts of hutch build on it; add, never rename): every
 * function and type of this header, the layout above (layers/<hex>/root,
 * refs/), the digest and reference syntax. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hutch-error.h"
#include "macro.h"
#include "store/store.h"

#define IMAGE_STORE_DIR "images"
/* "sha256:" and 64 lowercase hex digits. */
#define IMAGE_DIGEST_PREFIX "sha256:"
#define IMAGE_DIGEST_HEX_LEN 64
#define IMAGE_DIGEST_LEN (sizeof(IMAGE_DIGEST_PREFIX) - 1 + IMAGE_DIGEST_HEX_LEN)

/* Bounds on what an image may make us allocate or create. */
#define IMAGE_LAYERS_MAX 127                 /* overlayfs stacks ~500; Docker allows 127 */
#define IMAGE_JSON_MAX (4u << 20)            /* a manifest, index or config */
#define IMAGE_ENTRIES_MAX (1u << 21)         /* entries of one layer */
#define IMAGE_SIZE_MAX (UINT64_C(256) << 30) /* unpacked bytes of one layer */
#define IMAGE_REF_MAX 255                    /* NAME[:TAG] */
#define IMAGE_HOLDER_MAX 64                  /* a holder's name (store_name_is_valid) */

typedef struct ImageStore {
        char *home; /* $HUTCH_HOME */
        char *dir;  /* $HUTCH_HOME/images */
        int dirfd;  /* of dir */
} ImageStore;

/* The image config's fields a sandbox honours. Every pointer may be NULL
 * (absent); the string vectors are NULL-terminated. */
typedef struct ImageConfig {
        char *architecture; /* "amd64" */
        char *os;           /* "linux" */
        char **env;         /* "KEY=VALUE" */
        char *working_dir;
        char *user; /* as the image says it: "name", "uid", "uid:gid", "name:group" */
        char **entrypoint;
        char **cmd;
} ImageConfig;

typedef struct ImageLayer {
        char *diff_id;      /* "sha256:<hex>" of the uncompressed tar */
        char *path;         /* absolute: $HUTCH_HOME/images/layers/<hex>/root */
        uint64_t size;      /* bytes of regular file data unpacked */
        uint64_t blob_size; /* the (compressed) blob's size, 0 when unknown */
        char *media_type;   /* of the blob as imported */
} ImageLayer;

typedef struct Image {
        char *digest;        /* "sha256:<hex>" of manifest.json: the image's id */
        char *config_digest; /* "sha256:<hex>" of config.json */
        char **names;        /* canonical "NAME:TAG"s that point at it, sorted; may be empty */
        ImageLayer *layers;  /* lowest first */
        size_t n_layers;
        ImageConfig config;
        uint64_t imported_ms;     /* wall clock, ms since the epoch */
        char *format;             /* what it came from: "oci-layout", "oci-archive",
                                   * "docker-archive", "rootfs-tar" */
        uint64_t skipped_devices; /* device nodes left out (docs/images.md) */
        bool user_owned;          /* imported as a user: files are the user's,
                                   * the image's ids are in each layer's owners */
} Image;

Image *image_free(Image *im);
DEFINE_POINTER_CLEANUP(Image, image_free)
void image_config_done(ImageConfig *c);

/* Opens (creating, 0700 and private like the store's own folders) the
 * image store of @store (borrowed: only its home is used and copied).
 * Returns 0, or -errno with @reterr naming the folder. */
int image_store_open(const Store *store, ImageStore **ret, HutchError *reterr);
ImageStore *image_store_free(ImageStore *s);
DEFINE_POINTER_CLEANUP(ImageStore, image_store_free)

/* Whether @ref is a valid image reference as this store spells them:
 * NAME[:TAG] with NAME lowercase [a-z0-9._/-] components (optionally a
 * registry host[:port] first, as Docker writes it) and TAG [A-Za-z0-9_.-]
 * up to 128 characters; or a digest "sha256:<64 hex>"; or at least 12
 * leading hex digits of one (an id prefix). */
bool image_ref_is_valid(const char *ref);

/* Writes the canonical "NAME:TAG" of @ref to @ret, as Docker reads
 * references: ":latest" added when no tag is given, and a name without a
 * registry host is the configured default registry's
 * (registry_default_domain(): with D, "busybox" is
 * "D/library/busybox:latest", "me/box" "D/me/box:latest"; with none, the
 * name stays without a host); a first component with a '.' or ':', or
 * "localhost", is a host. The store keeps canonical names. -EINVAL for a
 * digest or an invalid name, or the error of a registries.conf that does
 * not parse. */
int image_ref_normalize(const char *ref, char **ret);

/* The short form of the canonical @name to show people: without the
 * default registry's "D/library/" or "D/" (borrowed from @name). */
const char *image_ref_familiar(const char *name);

/* Resolves @ref (NAME[:TAG], a digest, or an unambiguous id prefix of at
 * least 12 hex digits) to the image: its layers (lowest first, absolute
 * paths to read-only directories), config and digest. Returns 0, -ENOENT
 * when no image has that name (@reterr names it), -EINVAL for an invalid
 * @ref, -ENOTUNIQ for an ambiguous id prefix, -EBADMSG for a damaged
 * record, or -errno. The caller frees *@ret with image_free(). */
int image_store_resolve(ImageStore *s, const char *ref, Image **ret, HutchError *reterr);

/* Every complete image in the store, sorted by digest. */
int image_store_list(ImageStore *s, Image ***ret, size_t *ret_n, HutchError *reterr);
void image_list_free(Image **l, size_t n);

/* Marks the image @digest as used by @kind ("sandbox" or "snapshot") named
 * @holder (store_name_is_valid()), or by a one-shot run ("run", @holder
 * from image_store_run_holder()), so that image_store_remove() refuses to
 * remove it; idempotent. A mark whose sandbox/snapshot no longer exists in
 * the store, or whose run's process (the pid with that start time) is
 * gone, is stale: rm ignores it and gc removes it. -ENOENT when there is
 * no such image, -EINVAL for a bad @kind/@holder/@digest. */
int image_store_use(ImageStore *s, const char *digest, const char *kind, const char *holder,
                    HutchError *reterr);
/* The "run" holder name of the process @pid: "PID-STARTTIME" (its start
 * time from /proc/PID/stat, so that a reused pid is another holder).
 * Returns 0 and a new string, or -errno (-ENOENT: no such process). */
int image_store_run_holder(pid_t pid, char **ret);

/* Removes that mark (none: success). */
int image_store_unuse(ImageStore *s, const char *digest, const char *kind, const char *holder,
                      HutchError *reterr);

/* The first live holder of image @digest as "KIND NAME" in @ret (a new
 * string), or NULL in @ret when there is none. */
int image_store_holder(ImageStore *s, const char *digest, char **ret);

/* Removes @ref: a NAME:TAG removes that tag, and the image with it when it
 * was its last name; a digest or id removes the image and all its names.
 * The image's layers that no other image uses are removed too. -ENOENT
 * when there is no such image, -EBUSY (with @reterr naming the holder)
 * while a sandbox or snapshot uses it. *@ret_removed_image (may be NULL)
 * says whether the image itself went. */
int image_store_remove(ImageStore *s, const char *ref, bool *ret_removed_image, HutchError *reterr);

/* Removes what no complete image needs: .tmp-* folders nobody holds (an
 * interrupted import), layers no image names, stale "in use" marks.
 * Returns 0 and the count in *@ret_removed, or 1 (and 0 removed) when an
 * import is running: gc does not wait for it, and removes nothing
 * meanwhile. */
int image_store_gc(ImageStore *s, unsigned *ret_removed, HutchError *reterr);

/* The JSON `hutch image inspect` prints (a new string): digest, names,
 * format, imported, config digest, layers [{diff_id, path, size,
 * blob_size, media_type}], config {Env, WorkingDir, User, Entrypoint, Cmd,
 * architecture, os}, skipped_devices, user_owned. */
int image_to_json(const Image *im, char **ret);

/* ---- Import (image-import.c; links libarchive: only hutch-image uses it) ---- */

/* Imports the image at @path: an OCI image layout directory, a tar of one
 * (optionally gzip/zstd-compressed), a `docker save`/`podman save`
 * archive, or a plain root filesystem tar (`docker import`'s input: one
 * layer, an empty config). "-" reads a tar from @stdin_fd. An index or
 * manifest list is resolved to linux/amd64. @name (NAME[:TAG], may be NULL)
 * tags the image; without it the archive's own name is used when it has
 * one (docker save's RepoTags, the OCI ref annotations).
 *
 * Every blob is checked against its descriptor (digest and size), every
 * layer's uncompressed tar against the config's rootfs.diff_ids, and every
 * entry's path (no "..", no absolute path, hard links only to earlier
 * entries of the same layer, no symlink ever followed). On any failure
 * nothing new is visible in the store (leftovers are .tmp-* folders gc
 * removes), and @reterr names the problem: -EBADMSG for a digest or size
 * mismatch or a corrupt/truncated archive, -EPERM for an entry that
 * leaves its layer, -EPROTONOSUPPORT for an unknown media type or schema,
 * -ENOENT for a missing blob, -ENXIO when no manifest is for linux/amd64,
 * -EINVAL for malformed JSON, -E2BIG past the bounds above.
 * On success *@ret (may be NULL) is the image as image_store_resolve()
 * returns it. */
int image_store_import(ImageStore *s, const char *path, const char *name, int stdin_fd, Image **ret,
                       HutchError *reterr);

/* Image platform (issue 17): an image imports whatever its architecture
 * (as podman does), but runs only where it can (image-platform.c). */

/* The host's architecture as image configs name it (GOARCH: "amd64",
 * "arm64", ...; uname(2)'s machine when hutch knows no other name) into
 * @buf. 0, -ENAMETOOLONG, or -errno. */
int image_host_architecture(char *buf, size_t size);

/* Whether the image @im (called @name in the error) can run on this host:
 * its config's "os", when set, is linux and its "architecture", when set,
 * the host's. 0, or -ENOEXEC with @reterr naming the image's platform and
 * the host's. */
int image_check_platform(const Image *im, const char *name, HutchError *reterr);
