/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Parsers of the JSON documents of an image (the OCI image spec v1.1 and
 * Docker's image manifest v2 schema 2, which has the same shape): the
 * index (and manifest list), the manifest, the config, and the
 * manifest.json of a `docker save` archive. They read untrusted bytes (an
 * archive, a registry) and are fuzzed (tests/fuzz/fuzz-image-json.c).
 *
 * Each parser takes @text of @len bytes (at most IMAGE_JSON_MAX, else
 * -E2BIG), fills *@ret only on success (the caller frees it with the
 * matching _done()), and on failure returns -errno with @reterr naming the
 * member: -EINVAL for malformed JSON or a member of the wrong type or
 * value, -EPROTONOSUPPORT for an unknown media type, schema version or
 * digest algorithm. As the OCI spec requires, unknown members are ignored
 * (they are extensions), but every member read is type-checked. Internal
 * to src/lib/image/. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hutch-error.h"
#include "image/image-store.h"

#define OCI_MT_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define OCI_MT_INDEX "application/vnd.oci.image.index.v1+json"
#define OCI_MT_CONFIG "application/vnd.oci.image.config.v1+json"
#define DOCKER_MT_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define DOCKER_MT_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define DOCKER_MT_CONFIG "application/vnd.docker.container.image.v1+json"

typedef enum OciCompression {
        OCI_COMPRESSION_NONE,
        OCI_COMPRESSION_GZIP,
        OCI_COMPRESSION_ZSTD,
        _OCI_COMPRESSION_MAX,
        _OCI_COMPRESSION_INVALID = -EINVAL,
} OciCompression;

const char *oci_compression_to_string(OciCompression c);
OciCompression oci_compression_from_string(const char *s);

/* The compression of a layer of media type @mt, or -EPROTONOSUPPORT when
 * @mt is not a layer type hutch knows. */
int oci_layer_media_type_compression(const char *mt);

typedef struct OciDescriptor {
        char *media_type; /* may be NULL where the spec allows it */
        char *digest;     /* "sha256:<hex>", checked */
        uint64_t size;
        char *os, *architecture, *variant; /* "platform", or NULL */
        char *ref_name;                    /* annotation org.opencontainers.image.ref.name */
        char *image_name;                  /* annotation io.containerd.image.name */
} OciDescriptor;

void oci_descriptor_done(OciDescriptor *d);

typedef struct OciIndex {
        OciDescriptor *manifests;
        size_t n_manifests;
} OciIndex;

void oci_index_done(OciIndex *ix);

typedef struct OciManifest {
        char *media_type;
        OciDescriptor config;
        OciDescriptor *layers; /* lowest first */
        size_t n_layers;
} OciManifest;

void oci_manifest_done(OciManifest *m);

typedef struct OciConfig {
        ImageConfig config;
        char **diff_ids; /* "sha256:<hex>", lowest first */
} OciConfig;

void oci_config_done(OciConfig *c);

/* One image of a `docker save` manifest.json: paths inside the archive. */
typedef struct DockerSaveImage {
        char *config;
        char **repo_tags;
        char **layers;
} DockerSaveImage;

typedef struct DockerSave {
        DockerSaveImage *images;
        size_t n_images;
} DockerSave;

void docker_save_done(DockerSave *d);

/* Whether @s is "sha256:" and 64 lowercase hex digits. */
bool oci_digest_is_valid(const char *s);

/* What kind of document a descriptor's media type names: 1 a manifest,
 * 2 an index, -EPROTONOSUPPORT otherwise. */
int oci_media_type_kind(const char *mt);

int oci_index_parse(const char *text, size_t len, OciIndex *ret, HutchError *reterr);
int oci_manifest_parse(const char *text, size_t len, OciManifest *ret, HutchError *reterr);
/* Also checks that rootfs.type is "layers" and diff_ids are digests (at
 * most IMAGE_LAYERS_MAX). */
int oci_config_parse(const char *text, size_t len, OciConfig *ret, HutchError *reterr);
int docker_save_parse(const char *text, size_t len, DockerSave *ret, HutchError *reterr);

/* Picks the manifest of @ix for linux/amd64: a descriptor with that
 * platform, or, when no descriptor has a platform and there is exactly
 * one, that one. Returns its index, or -ENXIO (@reterr lists the
 * platforms there are). */
int oci_index_pick(const OciIndex *ix, HutchError *reterr);

/* Reads the config document @text into @ret (for a stored image). */
int image_config_parse(const char *text, size_t len, ImageConfig *ret, HutchError *reterr);
