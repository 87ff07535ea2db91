/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The OCI distribution client behind `hutch image pull` (docs/images.md,
 * "Pulling"): image references as Docker writes them, the registry's
 * WWW-Authenticate challenge and bearer tokens, credentials from a
 * docker-style auth file, and the pull itself, which writes an OCI image
 * layout directory (the same thing `skopeo copy docker://REF oci:DIR`
 * writes) that the image store then imports.
 *
 * Everything here is library code: it returns -errno and, at the
 * boundaries (a reference, a registry's answer), fills a HutchError with a
 * message that names the problem. Nothing is logged.
 *
 * Caps (every size a registry can make us allocate): a manifest or an
 * index 4 MiB, an image config 16 MiB, a token answer 256 KiB, an error
 * body kept for the message 4 KiB, a header block 80 KiB (http_parser's),
 * 127 layers, 5 redirects per request. */

#include <stdbool.h>
#include <stdint.h>

#include "hutch-error.h"
#include "macro.h"

#define REGISTRY_MANIFEST_MAX (4u << 20)
#define REGISTRY_CONFIG_MAX (16u << 20)
#define REGISTRY_TOKEN_MAX (256u << 10)
#define REGISTRY_LAYERS_MAX 127u /* Docker's limit, and the image store's */

/* An image reference: "python:3.12" is DEFAULT/library/python:3.12 where
 * DEFAULT is the configured default registry (image/registries-conf.h),
 * "localhost:5000/x:y" names the registry localhost:5000,
 * "name@sha256:HEX" pins a manifest by digest. */
typedef struct ImageRef {
        char *domain;     /* "registry.example.test", "localhost:5000", "[::1]:5000" */
        char *endpoint;   /* its [[registry]] location, or NULL: the domain */
        char *repository; /* "library/python" */
        char *tag;        /* "3.12"; "latest" when neither a tag nor a digest was given */
        char *digest;     /* "sha256:<64 hex>", or NULL */
        bool insecure;    /* its [[registry]] says insecure = true: plain HTTP allowed */
        /* The [aliases] line ("FILE:LINE", borrowed, valid until exit) the
         * short name was resolved by, or NULL. */
        const char *alias_where;
        bool mirror; /* the endpoint is a [[registry.mirror]] of the domain's */
} ImageRef;

ImageRef *image_ref_free(ImageRef *ref);
DEFINE_POINTER_CLEANUP(ImageRef, image_ref_free);

/* Parses @s as Docker does (the domain is the first component when it has
 * a '.' or a ':', is "localhost", or has an upper-case letter; else the
 * default registry of registry_default_domain(), with "library/" for a
 * one-component name, and -EINVAL naming the configuration when there is
 * none). The domain's [[registry]] of registries.conf gives the endpoint
 * (-EACCES when it is blocked). The repository's components are lower-case letters and
 * digits with '.', '_', '__' or '-'s between them, a tag is at most 128 of
 * [A-Za-z0-9_.-] not starting with '.' or '-', a digest is sha256 only
 * (-EOPNOTSUPP for another algorithm), the name at most 255 characters.
 * Returns 0 and a new ImageRef, or -EINVAL (-EOPNOTSUPP) with @reterr. */
int image_ref_parse(const char *s, ImageRef **ret, HutchError *reterr);

/* What a pull of @s tries, in order: @s qualified (a registry host first),
 * a short name with an [aliases] entry (its value, the tag or digest kept;
 * ImageRef.alias_where says so), $HUTCH_REGISTRY_DEFAULT, or at most one
 * unqualified-search-registries entry: that one image_ref_parse() gives.
 * A short name with several search registries: with short-name-mode
 * "permissive" or "disabled", one candidate per registry in the file's
 * order; "enforcing" (podman's default, and hutch's when unset) refuses it
 * with -EINVAL naming the candidates, since hutch never prompts. Each
 * candidate whose [[registry]] has mirrors comes after a copy of it per
 * [[registry.mirror]], in order (ImageRef.mirror, the mirror as the
 * endpoint, its insecure), unless mirror-by-digest-only and no digest was
 * given. Returns
 * the number of candidates (>= 1) and a new NULL-terminated array in @ret
 * (free with image_refs_free()), or -errno with @reterr. */
int image_ref_candidates(const char *s, ImageRef ***ret, HutchError *reterr);
ImageRef **image_refs_free(ImageRef **refs);
static inline void image_refs_freep(ImageRef ***p) {
        *p = image_refs_free(*p);
}

/* "registry.example.test/library/python:3.12", "...@sha256:..." (with the tag too when
 * both were given). Returns a new string or NULL (OOM). */
char *image_ref_to_string(const ImageRef *ref);

/* The host[:port] to connect to for @ref's domain: the location of its
 * [[registry]] in registries.conf, or the domain. Borrowed from @ref. */
const char *image_ref_endpoint(const ImageRef *ref);

/* One challenge of a WWW-Authenticate header (RFC 9110 §11.6.1): the
 * scheme ("Bearer", "Basic"; compared case-insensitively) and the
 * parameters a registry uses. */
typedef struct AuthChallenge {
        char *scheme;
        char *realm;
        char *service;
        char *scope;
} AuthChallenge;

void auth_challenge_done(AuthChallenge *c);

/* Parses the first challenge of @header: `scheme param=value, ...` with
 * token or quoted-string values (backslash escapes); unknown parameters
 * are skipped, a repeated one is an error. The header is at most 8 KiB.
 * Returns 0 and fills @ret, -EINVAL for a malformed header (-E2BIG: too
 * long). */
int auth_challenge_parse(const char *header, AuthChallenge *ret);

/* The "user:password" stored for @domain (or for @endpoint, its API host,
 * when not NULL; a key may carry a scheme and a path, as
 * "https://registry.example.test/v1/" does) in the docker-style auth file @path:
 * {"auths": {"KEY": {"auth": base64("user:password")}}}. Returns 1 and a
 * new string, 0 when the file or the entry does not exist, -EINVAL for a
 * file that is not such JSON or an entry that is not base64 of
 * "user:password" (credential helpers are not run: docs/images.md). */
int auth_file_lookup(const char *path, const char *domain, const char *endpoint,
                     char **ret_userpass);

/* The first auth file that exists: $REGISTRY_AUTH_FILE,
 * $XDG_RUNTIME_DIR/containers/auth.json, $HOME/.docker/config.json.
 * Returns a new path, or NULL when none exists. */
char *auth_file_default(void);

/* Called around each blob's download, so the caller can show progress on
 * the file the bytes go to. */
typedef struct PullProgressOps {
        void (*begin)(void *userdata, const char *what, int fd, uint64_t size);
        void (*end)(void *userdata, bool ok);
        void *userdata;
} PullProgressOps;

typedef struct PullOptions {
        /* false: the registry may answer TLS with any certificate, or
         * plain HTTP (only then is http:// ever used) */
        bool tls_verify;
        const char *os;                  /* "linux" */
        const char *arch;                /* "amd64" */
        const char *variant;             /* NULL: any */
        const char *cert_dir;            /* extra CA certificates (*.crt), or NULL */
        const char *auth_file;           /* NULL: auth_file_default() */
        const PullProgressOps *progress; /* or NULL */
} PullOptions;

/* Downloads @ref's manifest (an index resolved to @o's platform), config
 * and layers into the OCI image layout directory @layout_dir (created if
 * missing), verifying every blob against its digest and size while it
 * streams, and names the manifest in its index.json with @ref's tag.
 * A blob that was cut off stays as blobs/sha256/HEX.partial and is
 * continued with a Range request next time; a complete blob already
 * there is re-hashed and reused. Only one pull writes @layout_dir at a
 * time: it holds an exclusive flock on the directory itself (-EBUSY when
 * another does), which is how the image store's gc knows a .tmp-*
 * folder is in use. Returns 0, the manifest's digest in @ret_digest (may
 * be NULL) and, in @ret_layout_fd (may be NULL), the directory's fd with
 * the flock still held; or -errno with @reterr naming the problem:
 * -EACCES (401/403), -ENOENT (404, no manifest for the platform),
 * -EBADMSG (digest or size mismatch, garbage JSON), -EPROTO (a truncated
 * or malformed answer, another HTTP status), -EMEDIUMTYPE (an unknown
 * media type), -EFBIG (over a cap), -EPERM (plain HTTP refused). */
int registry_pull(const ImageRef *ref, const PullOptions *o, const char *layout_dir,
                  char **ret_digest, int *ret_layout_fd, HutchError *reterr);

/* ---- the download, confined (registry-confine.c) ---- */

/* hutch-pull's download, confined (docs/images-pull.md, "Confinement"):
 * SECURITY: what a registry answers (headers, JSON, redirects, blobs) is
 * parsed by a child process that, before it opens a connection, sets
 * no_new_privs, restricts itself with Landlock to reading what a TLS
 * client needs (the libraries under /usr and /lib*, the CA certificates,
 * the resolver's files in /etc, the auth file, --cert-dir) and writing
 * only the layout folder, and loads the sandbox's seccomp filter (no
 * mount, namespaces, ptrace, bpf, ...). The network stays open (it is what
 * the child is for). The caller (the store's import) runs after the
 * child is gone, on the layout it left.
 * COMPAT(kernel < 5.13 or Landlock disabled): the Landlock part is left
 * out, as for the sandbox's own (`hutch doctor` reports it); the seccomp
 * filter is always loaded, and a failure to load it fails the pull. */

/* registry_pull() in a confined child. @layout_dir is made here (0755)
 * when missing. Returns what registry_pull() returns: 0, the digest in
 * @ret_digest and the layout's fd with its flock in @ret_layout_fd (each
 * may be NULL); or -errno with @reterr (the confinement's own failure
 * named as such). */
int registry_pull_confined(const ImageRef *ref, const PullOptions *o, const char *layout_dir,
                           char **ret_digest, int *ret_layout_fd, HutchError *reterr);
