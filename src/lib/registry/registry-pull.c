/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* registry_pull(): the OCI distribution protocol's pull, into an OCI image
 * layout directory (registry.h, docs/images.md "Pulling"). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base64.h"
#include "fd-util.h"
#include "parse-util.h"
#include "registry-internal.h"
#include "registry.h"

#define REDIRECTS_MAX 5
#define DIGEST_LEN (7 + 64) /* "sha256:" + hex */

#define MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define MT_OCI_CONFIG "application/vnd.oci.image.config.v1+json"
#define MT_DOCKER_CONFIG "application/vnd.docker.container.image.v1+json"

static const char *const layer_types[] = {
        "application/vnd.oci.image.layer.v1.tar",
        "application/vnd.oci.image.layer.v1.tar+gzip",
        "application/vnd.oci.image.layer.v1.tar+zstd",
        "application/vnd.docker.image.rootfs.diff.tar.gzip",
        NULL,
};

typedef struct Registry {
        const PullOptions *o;
        const ImageRef *ref;
        HttpTls tls;
        Url base; /* the registry's origin; path "/" */
        bool explicit_port;
        bool scheme_known; /* the first answer came: no more fallback to http:// */
        char *authorization;
        char *auth_file;
        char *userpass;
        bool userpass_loaded;
} Registry;

typedef struct Buf {
        char *data;
        size_t len;
        size_t max;
} Buf;

typedef struct Descriptor {
        const char *media_type; /* borrowed from the JSON */
        const char *digest;
        uint64_t size;
} Descriptor;

static void registry_done(Registry *reg) {
        http_tls_done(&reg->tls);
        url_done(&reg->base);
        free(reg->authorization);
        free(reg->auth_file);
        if (reg->userpass)
                explicit_bzero(reg->userpass, strlen(reg->userpass));
        free(reg->userpass);
}

static int buf_append(void *userdata, const HttpAnswer *ans, const void *data, size_t len) {
        Buf *b = userdata;
        char *n;

        if (len > b->max - b->len)
                return -EFBIG;
        n = realloc(b->data, b->len + len + 1);
        if (!n)
                return -ENOMEM;
        memcpy(n + b->len, data, len);
        b->len += len;
        n[b->len] = '\0';
        b->data = n;
        return 0;
}

static void sha256_hex(const unsigned char md[32], char out[DIGEST_LEN + 1]) {
        memcpy(out, "sha256:", 7);
        for (int i = 0; i < 32; i++)
                (void)snprintf(out + 7 + 2 * i, 3, "%02x", md[i]);
}

static int digest_of(const void *data, size_t len, char out[DIGEST_LEN + 1]) {
        unsigned char md[32];

        if (EVP_Digest(data, len, md, NULL, EVP_sha256(), NULL) != 1)
                return -ENOMEM;
        sha256_hex(md, out);
        return 0;
}

static bool digest_is_sha256(const char *d) {
        if (strncmp(d, "sha256:", 7) != 0 || strlen(d) != DIGEST_LEN)
                return false;
        for (const char *c = d + 7; *c; c++)
                if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
                        return false;
        return true;
}

/* A short printable excerpt of an error body for a message: the first
 * "message" of the distribution spec's {"errors": [...]}, else the text;
 * control bytes become '?'. */
static char *error_excerpt(const char *body) {
        json_t *j = NULL, *m = NULL;
        const char *text = body;
        char *out;

        if (!body)
                return NULL;
        j = json_loads(body, 0, NULL);
        if (j) {
                json_t *first = json_array_get(json_object_get(j, "errors"), 0);
                m = json_object_get(first, "message");
                if (json_is_string(m))
                        text = json_string_value(m);
        }
        out = strndup(text, 200);
        json_decref(j);
        if (!out)
                return NULL;
        for (char *c = out; *c; c++)
                if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
                        *c = '?';
        return out;
}

static int answer_error(Registry *reg, const HttpAnswer *a, const char *what, HutchError *reterr) {
        _cleanup_free_ char *detail = error_excerpt(a->error_body);
        const char *d = detail && *detail ? detail : NULL;
        const char *dom = reg->ref->domain;

        if (a->status == 401 || a->status == 403)
                return hutch_error_set(reterr, EACCES,
                                       "registry %s refused access to %s (HTTP %d%s%s)", dom, what,
                                       a->status, d ? ": " : "", d ? d : "");
        if (a->status == 404)
                return hutch_error_set(reterr, ENOENT, "%s not found on registry %s (HTTP 404%s%s)",
                                       what, dom, d ? ": " : "", d ? d : "");
        return hutch_error_set(reterr, EPROTO, "registry %s answered HTTP %d for %s%s%s", dom,
                               a->status, what, d ? ": " : "", d ? d : "");
}

static bool is_redirect(int status) {
        return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

/* One GET of @path on the registry, following redirects. SECURITY: the
 * Authorization header goes to the registry's own origin only (a
 * redirect to blob storage on another host gets none), and a redirect
 * from https:// to http:// is refused. */
static int registry_get_once(Registry *reg, const char *path, const char *accept,
                             uint64_t range_from, HttpBodyFn fn, void *userdata, HttpAnswer *ret,
                             HutchError *reterr) {
        _cleanup_(url_done) Url url = {};
        int r;

        url.https = reg->base.https;
        url.port = reg->base.port;
        url.host = strdup(reg->base.host);
        url.path = strdup(path);
        if (!url.host || !url.path)
                return -ENOMEM;

        for (unsigned hops = 0;;) {
                _cleanup_free_ char *headers = NULL;
                HttpAnswer ans = {};
                bool own = url_same_origin(&url, &reg->base);
                const char *auth = own ? reg->authorization : NULL;
                char range[48] = "";

                if (range_from > 0)
                        (void)snprintf(range, sizeof(range), "Range: bytes=%" PRIu64 "-\r\n",
                                       range_from);
                if (asprintf(&headers, "%s%s%s%s%s%s%s", accept ? "Accept: " : "",
                             accept ? accept : "", accept ? "\r\n" : "", range,
                             auth ? "Authorization: " : "", auth ? auth : "",
                             auth ? "\r\n" : "") < 0) {
                        headers = NULL;
                        return -ENOMEM;
                }
                r = http_get(&reg->tls, &url, reg->o->tls_verify, headers, fn, userdata, &ans,
                             reterr);
                if (r == -EPROTONOSUPPORT && !reg->o->tls_verify && !reg->scheme_known && own &&
                    url.https) {
                        /* --tls-verify=false: the registry may speak plain
                         * HTTP (podman's and skopeo's fallback). */
                        reg->base.https = url.https = false;
                        if (!reg->explicit_port)
                                reg->base.port = url.port = 80;
                        reg->scheme_known = true;
                        continue;
                }
                if (r == -EPROTONOSUPPORT && own && !reg->scheme_known) {
                        char msg[HUTCH_ERROR_MSG_MAX] = "the TLS handshake failed";
                        if (reterr)
                                (void)snprintf(msg, sizeof(msg), "%s", reterr->msg);
                        return hutch_error_set(reterr, EPROTONOSUPPORT,
                                               "%s (a plain-HTTP registry needs "
                                               "--tls-verify=false)",
                                               msg);
                }
                if (r < 0)
                        return r;
                if (own)
                        reg->scheme_known = true;
                if (!is_redirect(ans.status)) {
                        *ret = ans;
                        return 0;
                }
                {
                        Url next = {};
                        if (++hops > REDIRECTS_MAX) {
                                http_answer_done(&ans);
                                return hutch_error_set(reterr, EPROTO,
                                                       "more than %d redirects from registry %s",
                                                       REDIRECTS_MAX, reg->ref->domain);
                        }
                        r = ans.location ? url_resolve(&url, ans.location, &next) : -EINVAL;
                        if (r < 0) {
                                _cleanup_free_ char *loc = error_excerpt(ans.location);
                                http_answer_done(&ans);
                                return hutch_error_set(reterr, EPROTO,
                                                       "registry %s sent a bad redirect '%s'",
                                                       reg->ref->domain, loc ? loc : "");
                        }
                        http_answer_done(&ans);
                        if (url.https && !next.https) {
                                r = hutch_error_set(reterr, EPERM,
                                                    "refusing the redirect from https:// to "
                                                    "http://%s",
                                                    next.host);
                                url_done(&next);
                                return r;
                        }
                        url_done(&url);
                        url = next;
                }
        }
}

static int registry_load_credentials(Registry *reg) {
        int r;

        if (reg->userpass_loaded)
                return 0;
        reg->userpass_loaded = true;
        reg->auth_file = reg->o->auth_file ? strdup(reg->o->auth_file) : auth_file_default();
        if (!reg->auth_file)
                return 0;
        r = auth_file_lookup(reg->auth_file, reg->ref->domain, reg->ref->endpoint, &reg->userpass);
        return r < 0 ? r : 0;
}

static char *url_escape(const char *s) {
        char *out = malloc(3 * strlen(s) + 1), *o = out;

        if (!out)
                return NULL;
        for (; *s; s++) {
                unsigned char c = (unsigned char)*s;
                if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    strchr("-._~", c))
                        *o++ = (char)c;
                else
                        o += sprintf(o, "%%%02X", c);
        }
        *o = '\0';
        return out;
}

/* Gets a token from the Bearer challenge's realm (RFC 6750 as the
 * distribution spec's token authentication uses it). */
static int registry_bearer(Registry *reg, const AuthChallenge *c, HutchError *reterr) {
        _cleanup_(url_done) Url realm = {};
        _cleanup_free_ char *scope_own = NULL, *service = NULL, *scope = NULL, *headers = NULL,
                            *basic = NULL;
        _cleanup_free_ char *path = NULL;
        HttpAnswer ans = {};
        Buf b = {.max = REGISTRY_TOKEN_MAX};
        json_t *j = NULL, *tok;
        const char *token;
        int r;

        if (!c->realm || url_parse(c->realm, &realm) < 0)
                return hutch_error_set(reterr, EBADMSG,
                                       "registry %s sent a Bearer challenge without a valid realm",
                                       reg->ref->domain);
        /* SECURITY: credentials and tokens never travel in plain HTTP
         * unless the user said --tls-verify=false. */
        if (!realm.https && reg->o->tls_verify)
                return hutch_error_set(reterr, EPERM,
                                       "refusing the plain-HTTP token server http://%s of registry "
                                       "%s (--tls-verify=false allows it)",
                                       realm.host, reg->ref->domain);
        if (asprintf(&scope_own, "repository:%s:pull", reg->ref->repository) < 0)
                return -ENOMEM;
        service = url_escape(c->service ? c->service : "");
        scope = url_escape(c->scope ? c->scope : scope_own);
        if (!service || !scope)
                return -ENOMEM;
        if (asprintf(&path, "%s%s%s%s%sscope=%s", realm.path, strchr(realm.path, '?') ? "&" : "?",
                     c->service ? "service=" : "", c->service ? service : "", c->service ? "&" : "",
                     scope) < 0)
                return -ENOMEM;
        free(realm.path);
        realm.path = TAKE_PTR(path);

        r = registry_load_credentials(reg);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot read the credentials in '%s': %s",
                                       reg->auth_file, strerror(-r));
        if (reg->userpass) {
                if (base64_encode(reg->userpass, strlen(reg->userpass), &basic) < 0 ||
                    asprintf(&headers, "Authorization: Basic %s\r\n", basic) < 0)
                        return -ENOMEM;
                explicit_bzero(basic, strlen(basic));
        }
        r = http_get(&reg->tls, &realm, reg->o->tls_verify, headers, buf_append, &b, &ans, reterr);
        if (headers)
                explicit_bzero(headers, strlen(headers));
        if (r == -EFBIG)
                r = hutch_error_set(reterr, EFBIG, "the token answer of %s is larger than %u KiB",
                                    realm.host, REGISTRY_TOKEN_MAX >> 10);
        if (r < 0)
                goto out;
        if (ans.status != 200) {
                _cleanup_free_ char *detail = error_excerpt(ans.error_body);
                r = hutch_error_set(
                        reterr, EACCES, "the token server %s of registry %s answered HTTP %d%s%s%s",
                        realm.host, reg->ref->domain, ans.status, detail && *detail ? ": " : "",
                        detail ? detail : "", reg->userpass ? "" : " (no credentials for it)");
                goto out;
        }
        j = b.data ? json_loadb(b.data, b.len, 0, NULL) : NULL;
        tok = json_object_get(j, "token");
        if (!json_is_string(tok))
                tok = json_object_get(j, "access_token");
        token = json_string_value(tok);
        /* SECURITY: the token goes into a header line; it must not carry
         * a line break (or anything but visible ASCII). */
        if (!token || !*token || !http_value_is_safe(token) || strchr(token, ' ')) {
                r = hutch_error_set(reterr, EBADMSG, "the token server %s sent no valid token",
                                    realm.host);
                goto out;
        }
        free(reg->authorization);
        if (asprintf(&reg->authorization, "Bearer %s", token) < 0) {
                reg->authorization = NULL;
                r = -ENOMEM;
                goto out;
        }
        r = 0;
out:
        json_decref(j);
        free(b.data);
        http_answer_done(&ans);
        return r;
}

static int registry_authenticate(Registry *reg, const char *www, HutchError *reterr) {
        AuthChallenge c = {};
        int r;

        if (!www)
                return hutch_error_set(reterr, EACCES,
                                       "registry %s answered 401 without a WWW-Authenticate "
                                       "challenge",
                                       reg->ref->domain);
        r = auth_challenge_parse(www, &c);
        if (r < 0)
                return hutch_error_set(reterr, EBADMSG,
                                       "registry %s sent a malformed WWW-Authenticate challenge",
                                       reg->ref->domain);
        if (strcasecmp(c.scheme, "Bearer") == 0) {
                r = registry_bearer(reg, &c, reterr);
        } else if (strcasecmp(c.scheme, "Basic") == 0) {
                r = registry_load_credentials(reg);
                if (r < 0)
                        r = hutch_error_set(reterr, -r, "cannot read the credentials in '%s': %s",
                                            reg->auth_file, strerror(-r));
                else if (!reg->userpass)
                        r = hutch_error_set(reterr, EACCES,
                                            "registry %s needs a user name and password (none "
                                            "for it in %s)",
                                            reg->ref->domain,
                                            reg->auth_file ? reg->auth_file : "an auth file");
                else if (!reg->base.https && reg->o->tls_verify)
                        r = hutch_error_set(reterr, EPERM,
                                            "refusing to send a password in plain "
                                            "HTTP");
                else {
                        _cleanup_free_ char *b = NULL;

                        free(reg->authorization);
                        reg->authorization = NULL;
                        if (base64_encode(reg->userpass, strlen(reg->userpass), &b) < 0 ||
                            asprintf(&reg->authorization, "Basic %s", b) < 0) {
                                reg->authorization = NULL;
                                r = -ENOMEM;
                        }
                }
        } else {
                r = hutch_error_set(reterr, EOPNOTSUPP,
                                    "registry %s asks for the unsupported authentication scheme "
                                    "'%s'",
                                    reg->ref->domain, c.scheme);
        }
        auth_challenge_done(&c);
        return r;
}

/* registry_get_once(), authenticating on a 401 and trying once more. */
static int registry_get(Registry *reg, const char *path, const char *accept, uint64_t range_from,
                        HttpBodyFn fn, void *userdata, HttpAnswer *ret, HutchError *reterr) {
        for (unsigned attempt = 0;; attempt++) {
                HttpAnswer ans = {};
                int r;

                r = registry_get_once(reg, path, accept, range_from, fn, userdata, &ans, reterr);
                if (r < 0)
                        return r;
                if (ans.status == 401 && attempt == 0) {
                        r = registry_authenticate(reg, ans.www_authenticate, reterr);
                        http_answer_done(&ans);
                        if (r < 0)
                                return r;
                        continue;
                }
                *ret = ans;
                return 0;
        }
}

static bool media_type_in(const char *mt, const char *const *list) {
        for (; *list; list++)
                if (strcmp(mt, *list) == 0)
                        return true;
        return false;
}

static int descriptor_parse(json_t *j, const char *what, Descriptor *ret, HutchError *reterr) {
        json_t *mt = json_object_get(j, "mediaType"), *dg = json_object_get(j, "digest"),
               *sz = json_object_get(j, "size");

        if (!json_is_string(mt) || !json_is_string(dg) || !json_is_integer(sz) ||
            json_integer_value(sz) < 0)
                return hutch_error_set(reterr, EBADMSG,
                                       "%s is not a descriptor (mediaType, digest, size)", what);
        if (!digest_is_sha256(json_string_value(dg)))
                return hutch_error_set(reterr, EOPNOTSUPP,
                                       "%s has the digest '%.80s': only sha256 is supported", what,
                                       json_string_value(dg));
        ret->media_type = json_string_value(mt);
        ret->digest = json_string_value(dg);
        ret->size = (uint64_t)json_integer_value(sz);
        return 0;
}

/* A manifest or an index by @reference (a tag or a digest) into @ret, its
 * media type (borrowed from a static table) and digest. */
static int fetch_manifest(Registry *reg, const char *reference, const char *expect_digest, Buf *ret,
                          const char **ret_type, char ret_digest[DIGEST_LEN + 1],
                          HutchError *reterr) {
        static const char *const types[] = {MT_OCI_INDEX, MT_OCI_MANIFEST, MT_DOCKER_LIST,
                                            MT_DOCKER_MANIFEST, NULL};
        _cleanup_free_ char *path = NULL, *what = NULL, *ct = NULL;
        HttpAnswer ans = {};
        Buf b = {.max = REGISTRY_MANIFEST_MAX};
        json_t *j = NULL;
        const char *type = NULL;
        int r;

        if (asprintf(&path, "/v2/%s/manifests/%s", reg->ref->repository, reference) < 0 ||
            asprintf(&what, "the manifest %s:%s", reg->ref->repository, reference) < 0)
                return -ENOMEM;
        r = registry_get(reg, path,
                         MT_OCI_INDEX ", " MT_OCI_MANIFEST ", " MT_DOCKER_LIST
                                      ", " MT_DOCKER_MANIFEST,
                         0, buf_append, &b, &ans, reterr);
        if (r == -EFBIG)
                r = hutch_error_set(reterr, EFBIG, "%s is larger than %u MiB", what,
                                    REGISTRY_MANIFEST_MAX >> 20);
        if (r < 0)
                goto out;
        if (ans.status != 200) {
                r = answer_error(reg, &ans, what, reterr);
                goto out;
        }
        r = digest_of(b.data ? b.data : "", b.len, ret_digest);
        if (r < 0)
                goto out;
        if (expect_digest && strcmp(expect_digest, ret_digest) != 0) {
                r = hutch_error_set(reterr, EBADMSG, "%s does not match its digest (it is %s)",
                                    what, ret_digest);
                goto out;
        }
        if (!expect_digest && ans.docker_digest && digest_is_sha256(ans.docker_digest) &&
            strcmp(ans.docker_digest, ret_digest) != 0) {
                r = hutch_error_set(reterr, EBADMSG,
                                    "%s does not match the Docker-Content-Digest the registry "
                                    "sent",
                                    what);
                goto out;
        }
        j = b.data ? json_loadb(b.data, b.len, 0, NULL) : NULL;
        if (!json_is_object(j)) {
                r = hutch_error_set(reterr, EBADMSG, "%s is not JSON", what);
                goto out;
        }
        if (ans.content_type) {
                ct = strndup(ans.content_type, strcspn(ans.content_type, "; \t"));
                if (!ct) {
                        r = -ENOMEM;
                        goto out;
                }
        }
        for (const char *const *t = types; *t; t++)
                if (ct && strcmp(ct, *t) == 0)
                        type = *t;
        if (!type) {
                const char *mt = json_string_value(json_object_get(j, "mediaType"));
                for (const char *const *t = types; *t; t++)
                        if (mt && strcmp(mt, *t) == 0)
                                type = *t;
        }
        if (!type) {
                _cleanup_free_ char *shown = error_excerpt(ct ? ct : "");
                r = hutch_error_set(reterr, EMEDIUMTYPE,
                                    "%s has the unknown media type '%s' (schema 1 manifests "
                                    "are not supported)",
                                    what, shown ? shown : "");
                goto out;
        }
        *ret_type = type;
        *ret = b;
        b.data = NULL;
        r = 0;
out:
        json_decref(j);
        free(b.data);
        http_answer_done(&ans);
        return r;
}

/* The digest of the manifest for the wanted platform in the index @j. */
static int index_select(Registry *reg, json_t *j, Descriptor *ret, HutchError *reterr) {
        _cleanup_free_ char *seen = NULL;
        json_t *ms = json_object_get(j, "manifests"), *m;
        size_t i, seen_len = 0;
        int r;

        if (!json_is_array(ms))
                return hutch_error_set(reterr, EBADMSG, "the index of %s has no manifests",
                                       reg->ref->repository);
        json_array_foreach(ms, i, m) {
                json_t *p = json_object_get(m, "platform");
                const char *os = json_string_value(json_object_get(p, "os"));
                const char *arch = json_string_value(json_object_get(p, "architecture"));
                const char *variant = json_string_value(json_object_get(p, "variant"));
                Descriptor d = {};

                if (!os || !arch)
                        continue;
                if (strcmp(os, reg->o->os) == 0 && strcmp(arch, reg->o->arch) == 0 &&
                    (!reg->o->variant || (variant && strcmp(variant, reg->o->variant) == 0))) {
                        r = descriptor_parse(m, "a manifest of the index", &d, reterr);
                        if (r < 0)
                                return r;
                        if (strcmp(d.media_type, MT_OCI_MANIFEST) != 0 &&
                            strcmp(d.media_type, MT_DOCKER_MANIFEST) != 0)
                                continue;
                        *ret = d;
                        return 0;
                }
                if (seen_len < 512) {
                        char *n = NULL;
                        if (asprintf(&n, "%s%s%s/%s%s%s", seen ? seen : "", seen ? ", " : "", os,
                                     arch, variant ? "/" : "", variant ? variant : "") < 0)
                                return -ENOMEM;
                        free(seen);
                        seen = n;
                        seen_len = strlen(n);
                }
        }
        {
                _cleanup_free_ char *shown = error_excerpt(seen);
                return hutch_error_set(
                        reterr, ENOENT, "%s/%s has no image for %s/%s%s%s (it has: %s)",
                        reg->ref->domain, reg->ref->repository, reg->o->os, reg->o->arch,
                        reg->o->variant ? "/" : "", reg->o->variant ? reg->o->variant : "",
                        shown && *shown ? shown : "none");
        }
}

typedef struct BlobSink {
        int fd;
        EVP_MD_CTX *md;
        uint64_t written;
        uint64_t size;
        bool started;
        const char *digest;
        HutchError *reterr;
} BlobSink;

static int blob_restart(BlobSink *s) {
        if (ftruncate(s->fd, 0) < 0 || lseek(s->fd, 0, SEEK_SET) < 0)
                return -errno;
        s->written = 0;
        return EVP_DigestInit_ex(s->md, EVP_sha256(), NULL) == 1 ? 0 : -ENOMEM;
}

static int blob_write(void *userdata, const HttpAnswer *ans, const void *data, size_t len) {
        BlobSink *s = userdata;
        int r;

        if (!s->started) {
                s->started = true;
                if (ans->status == 206) {
                        uint64_t start;
                        _cleanup_free_ char *num = NULL;
                        const char *cr = ans->content_range;

                        if (!cr || strncmp(cr, "bytes ", 6) != 0)
                                return hutch_error_set(s->reterr, EPROTO,
                                                       "blob %s: a partial answer without a "
                                                       "Content-Range",
                                                       s->digest);
                        num = strndup(cr + 6, strcspn(cr + 6, "-"));
                        if (!num || safe_atou64(num, &start) < 0 || start != s->written)
                                return hutch_error_set(s->reterr, EPROTO,
                                                       "blob %s: the registry resumed at the "
                                                       "wrong offset",
                                                       s->digest);
                } else if (s->written > 0) {
                        /* A 200 to our Range request: the whole blob again. */
                        r = blob_restart(s);
                        if (r < 0)
                                return r;
                }
        }
        if (len > s->size - s->written)
                return hutch_error_set(s->reterr, EFBIG,
                                       "blob %s is larger than its descriptor's %" PRIu64 " bytes",
                                       s->digest, s->size);
        r = loop_write(s->fd, data, len);
        if (r < 0)
                return hutch_error_set(s->reterr, -r, "cannot write blob %s: %s", s->digest,
                                       strerror(-r));
        if (EVP_DigestUpdate(s->md, data, len) != 1)
                return -ENOMEM;
        s->written += len;
        return 0;
}

static void md_freep(EVP_MD_CTX **m) {
        EVP_MD_CTX_free(*m);
}

/* Hashes the first @len bytes of @fd into @md. */
static int hash_fd(int fd, uint64_t len, EVP_MD_CTX *md) {
        _cleanup_free_ char *buf = malloc(1u << 16);
        uint64_t done = 0;

        if (!buf)
                return -ENOMEM;
        if (lseek(fd, 0, SEEK_SET) < 0)
                return -errno;
        while (done < len) {
                ssize_t n = read(fd, buf, (size_t)MIN((uint64_t)(1u << 16), len - done));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return n < 0 ? -errno : -EIO;
                if (EVP_DigestUpdate(md, buf, (size_t)n) != 1)
                        return -ENOMEM;
                done += (uint64_t)n;
        }
        return 0;
}

static int md_finish(EVP_MD_CTX *md, char out[DIGEST_LEN + 1]) {
        unsigned char v[32];

        if (EVP_DigestFinal_ex(md, v, NULL) != 1)
                return -ENOMEM;
        sha256_hex(v, out);
        return 0;
}

/* An existing complete blob that still matches @d: 1; 0 when absent or
 * not matching (then removed). */
static int blob_reuse(int blobs_fd, const Descriptor *d) {
        _cleanup_(md_freep) EVP_MD_CTX *md = EVP_MD_CTX_new();
        _cleanup_close_ int fd = -EBADF;
        char got[DIGEST_LEN + 1];
        struct stat st;
        int r;

        if (!md)
                return -ENOMEM;
        fd = openat(blobs_fd, d->digest + 7, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (S_ISREG(st.st_mode) && (uint64_t)st.st_size == d->size &&
            EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1) {
                r = hash_fd(fd, d->size, md);
                if (r < 0)
                        return r;
                r = md_finish(md, got);
                if (r < 0)
                        return r;
                if (strcmp(got, d->digest) == 0)
                        return 1;
        }
        if (unlinkat(blobs_fd, d->digest + 7, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0)
                return -errno;
        return 0;
}

static int fetch_blob(Registry *reg, int blobs_fd, const Descriptor *d, const char *what,
                      HutchError *reterr) {
        _cleanup_(md_freep) EVP_MD_CTX *md = EVP_MD_CTX_new();
        _cleanup_free_ char *partial = NULL, *path = NULL;
        _cleanup_close_ int fd = -EBADF;
        const PullProgressOps *p = reg->o->progress;
        BlobSink s = {.md = md, .size = d->size, .digest = d->digest, .reterr = reterr};
        char got[DIGEST_LEN + 1];
        struct stat st;
        int r;

        if (!md)
                return -ENOMEM;
        r = blob_reuse(blobs_fd, d);
        if (r != 0)
                return r < 0 ? hutch_error_set(reterr, -r, "cannot read blob %s: %s", d->digest,
                                               strerror(-r))
                             : 0;
        if (asprintf(&partial, "%s.partial", d->digest + 7) < 0 ||
            asprintf(&path, "/v2/%s/blobs/%s", reg->ref->repository, d->digest) < 0)
                return -ENOMEM;
        fd = openat(blobs_fd, partial, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return hutch_error_set(reterr, fd < 0 ? errno : EEXIST,
                                       "cannot open the partial blob %s", partial);
        s.fd = fd;
        if (EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1)
                return -ENOMEM;
        if ((uint64_t)st.st_size > d->size) {
                r = blob_restart(&s);
                if (r < 0)
                        return r;
        } else if (st.st_size > 0) {
                /* Resume: what is there counts into the digest again. */
                r = hash_fd(fd, (uint64_t)st.st_size, md);
                if (r < 0)
                        return hutch_error_set(reterr, -r, "cannot read the partial blob %s",
                                               partial);
                s.written = (uint64_t)st.st_size;
        }
        if (p && p->begin)
                p->begin(p->userdata, what, fd, d->size);
        if (s.written < d->size) {
                HttpAnswer ans = {};

                r = registry_get(reg, path, NULL, s.written, blob_write, &s, &ans, reterr);
                if (r >= 0 && ans.status == 416 && s.written > 0) {
                        /* The registry will not resume: start over. */
                        http_answer_done(&ans);
                        r = blob_restart(&s);
                        if (r >= 0)
                                r = registry_get(reg, path, NULL, 0, blob_write, &s, &ans, reterr);
                }
                if (r >= 0 && ans.status != 200 && ans.status != 206)
                        r = answer_error(reg, &ans, what, reterr);
                http_answer_done(&ans);
                if (r == -EPROTO && s.written > 0) {
                        /* The connection broke mid-blob: say what stays. */
                        char msg[HUTCH_ERROR_MSG_MAX] = "";
                        if (reterr)
                                (void)snprintf(msg, sizeof(msg), "%s", reterr->msg);
                        r = hutch_error_set(reterr, EPROTO,
                                            "%s was cut off at %" PRIu64 " of %" PRIu64
                                            " bytes (a pull again continues it): %s",
                                            what, s.written, d->size, msg);
                }
        }
        if (r >= 0 && s.written != d->size)
                r = hutch_error_set(reterr, EPROTO,
                                    "%s was cut off at %" PRIu64 " of %" PRIu64
                                    " bytes (a pull again continues it)",
                                    what, s.written, d->size);
        if (r >= 0)
                r = md_finish(md, got);
        if (r >= 0 && strcmp(got, d->digest) != 0) {
                /* Never resumed: the bytes so far are wrong. */
                (void)unlinkat(blobs_fd, partial, 0);
                r = hutch_error_set(reterr, EBADMSG, "%s does not match its digest (it is %s)",
                                    what, got);
        }
        if (r == -EFBIG)
                (void)unlinkat(blobs_fd, partial, 0);
        if (r >= 0 && fsync(fd) < 0)
                r = -errno;
        if (r >= 0 && renameat(blobs_fd, partial, blobs_fd, d->digest + 7) < 0)
                r = hutch_error_set(reterr, errno, "cannot store blob %s: %m", d->digest);
        if (p && p->end)
                p->end(p->userdata, r >= 0);
        return r;
}

static int layout_open(const char *dir, int *ret_fd, int *ret_blobs, HutchError *reterr) {
        _cleanup_close_ int fd = -EBADF, sha = -EBADF;
        _cleanup_free_ char *layout = NULL;
        static const char oci_layout[] = "{\"imageLayoutVersion\":\"1.0.0\"}";
        int r;

        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                return hutch_error_set(reterr, errno, "cannot create the layout directory '%s': %m",
                                       dir);
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return hutch_error_set(reterr, errno, "cannot open '%s': %m", dir);
        if (flock(fd, LOCK_EX | LOCK_NB) < 0)
                return hutch_error_set(reterr, errno == EWOULDBLOCK ? EBUSY : errno,
                                       "another pull is writing '%s'", dir);
        r = read_full_file_at(fd, "oci-layout", 0, 4096, &layout);
        if (r == -ENOENT) {
                _cleanup_(closedirp) DIR *d = NULL;
                r = opendir_fd(fd, &d);
                if (r < 0)
                        return r;
                if (readdir_no_dot(d))
                        return hutch_error_set(reterr, EEXIST,
                                               "'%s' is neither empty nor an OCI image layout",
                                               dir);
                r = write_file_atomic(dir, "oci-layout", oci_layout, strlen(oci_layout));
        }
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot use '%s' as an OCI image layout: %s",
                                       dir, strerror(-r));
        if (mkdirat(fd, "blobs", 0755) < 0 && errno != EEXIST)
                return hutch_error_set(reterr, errno, "cannot create '%s/blobs': %m", dir);
        if (mkdirat(fd, "blobs/sha256", 0755) < 0 && errno != EEXIST)
                return hutch_error_set(reterr, errno, "cannot create '%s/blobs/sha256': %m", dir);
        sha = openat(fd, "blobs/sha256", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (sha < 0)
                return hutch_error_set(reterr, errno, "cannot open '%s/blobs/sha256': %m", dir);
        *ret_fd = TAKE_FD(fd);
        *ret_blobs = TAKE_FD(sha);
        return 0;
}

/* Names the manifest in @dir/index.json (other names there stay). */
static int layout_name(const char *dir, int fd, const char *media_type, const char *digest,
                       size_t size, const char *tag, HutchError *reterr) {
        _cleanup_free_ char *text = NULL, *out = NULL;
        json_t *index = NULL, *ms, *m, *keep;
        size_t i;
        int r;

        r = read_full_file_at(fd, "index.json", 0, REGISTRY_MANIFEST_MAX, &text);
        if (r < 0 && r != -ENOENT)
                return hutch_error_set(reterr, -r, "cannot read '%s/index.json': %s", dir,
                                       strerror(-r));
        index = text ? json_loads(text, 0, NULL)
                     : json_pack("{s:i, s:s}", "schemaVersion", 2, "mediaType", MT_OCI_INDEX);
        ms = json_object_get(index, "manifests");
        if (!json_is_object(index) || (ms && !json_is_array(ms))) {
                json_decref(index);
                return hutch_error_set(reterr, EBADMSG, "'%s/index.json' is not an OCI index", dir);
        }
        keep = json_array();
        json_array_foreach(ms, i, m) {
                const char *n = json_string_value(json_object_get(
                        json_object_get(m, "annotations"), "org.opencontainers.image.ref.name"));
                if (tag && n && strcmp(n, tag) == 0)
                        continue;
                (void)json_array_append(keep, m);
        }
        m = json_pack("{s:s, s:s, s:I}", "mediaType", media_type, "digest", digest, "size",
                      (json_int_t)size);
        if (m && tag)
                (void)json_object_set_new(
                        m, "annotations",
                        json_pack("{s:s}", "org.opencontainers.image.ref.name", tag));
        if (!keep || !m || json_array_append_new(keep, m) < 0 ||
            json_object_set_new(index, "manifests", keep) < 0) {
                json_decref(index);
                return -ENOMEM;
        }
        out = json_dumps(index, JSON_COMPACT);
        json_decref(index);
        if (!out)
                return -ENOMEM;
        r = write_file_atomic(dir, "index.json", out, strlen(out));
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot write '%s/index.json': %s", dir,
                                       strerror(-r));
        return 0;
}

static int pull_image(Registry *reg, const char *dir, int dir_fd, int blobs_fd, char **ret_digest,
                      HutchError *reterr) {
        _cleanup_free_ char *blobs_dir = NULL;
        Buf man = {}, top = {};
        const char *type = NULL;
        char digest[DIGEST_LEN + 1];
        json_t *j = NULL, *layers, *l;
        Descriptor cfg = {};
        size_t i;
        int r;

        r = fetch_manifest(reg, reg->ref->digest ? reg->ref->digest : reg->ref->tag,
                           reg->ref->digest, &top, &type, digest, reterr);
        if (r < 0)
                return r;
        if (strcmp(type, MT_OCI_INDEX) == 0 || strcmp(type, MT_DOCKER_LIST) == 0) {
                Descriptor d = {};
                j = json_loadb(top.data, top.len, 0, NULL);
                r = index_select(reg, j, &d, reterr);
                if (r >= 0) {
                        _cleanup_free_ char *want = strdup(d.digest);
                        json_decref(j);
                        j = NULL;
                        r = want ? fetch_manifest(reg, want, want, &man, &type, digest, reterr)
                                 : -ENOMEM;
                        if (r >= 0 && (strcmp(type, MT_OCI_MANIFEST) != 0 &&
                                       strcmp(type, MT_DOCKER_MANIFEST) != 0))
                                r = hutch_error_set(reterr, EMEDIUMTYPE,
                                                    "the index of %s names an index, not a "
                                                    "manifest",
                                                    reg->ref->repository);
                }
                free(top.data);
                top.data = NULL;
                if (r < 0)
                        goto out;
        } else {
                man = top;
                top.data = NULL;
        }

        j = json_loadb(man.data, man.len, 0, NULL);
        r = descriptor_parse(json_object_get(j, "config"), "the manifest's config", &cfg, reterr);
        if (r < 0)
                goto out;
        if (strcmp(cfg.media_type, MT_OCI_CONFIG) != 0 &&
            strcmp(cfg.media_type, MT_DOCKER_CONFIG) != 0) {
                _cleanup_free_ char *shown = error_excerpt(cfg.media_type);
                r = hutch_error_set(reterr, EMEDIUMTYPE,
                                    "%s/%s is not a container image (its config has the unknown "
                                    "media type '%s')",
                                    reg->ref->domain, reg->ref->repository, shown ? shown : "");
                goto out;
        }
        if (cfg.size > REGISTRY_CONFIG_MAX) {
                r = hutch_error_set(reterr, EFBIG, "the image config is larger than %u MiB",
                                    REGISTRY_CONFIG_MAX >> 20);
                goto out;
        }
        layers = json_object_get(j, "layers");
        if (!json_is_array(layers)) {
                r = hutch_error_set(reterr, EBADMSG, "the manifest of %s has no layers",
                                    reg->ref->repository);
                goto out;
        }
        if (json_array_size(layers) > REGISTRY_LAYERS_MAX) {
                r = hutch_error_set(reterr, EFBIG, "the image has more than %u layers",
                                    REGISTRY_LAYERS_MAX);
                goto out;
        }
        /* Every descriptor is checked before the first byte is fetched. */
        json_array_foreach(layers, i, l) {
                Descriptor d = {};
                r = descriptor_parse(l, "a layer", &d, reterr);
                if (r < 0)
                        goto out;
                if (!media_type_in(d.media_type, layer_types)) {
                        _cleanup_free_ char *shown = error_excerpt(d.media_type);
                        r = hutch_error_set(reterr, EMEDIUMTYPE,
                                            "layer %s has the unknown media type '%s'", d.digest,
                                            shown ? shown : "");
                        goto out;
                }
        }
        r = fetch_blob(reg, blobs_fd, &cfg, "config", reterr);
        if (r < 0)
                goto out;
        json_array_foreach(layers, i, l) {
                Descriptor d = {};
                char what[64];
                (void)descriptor_parse(l, "a layer", &d, NULL);
                (void)snprintf(what, sizeof(what), "layer %.19s", d.digest);
                r = fetch_blob(reg, blobs_fd, &d, what, reterr);
                if (r < 0)
                        goto out;
        }
        if (asprintf(&blobs_dir, "%s/blobs/sha256", dir) < 0) {
                r = -ENOMEM;
                goto out;
        }
        r = write_file_atomic(blobs_dir, digest + 7, man.data, man.len);
        if (r < 0) {
                r = hutch_error_set(reterr, -r, "cannot store the manifest: %s", strerror(-r));
                goto out;
        }
        r = layout_name(dir, dir_fd, type, digest, man.len, reg->ref->tag, reterr);
        if (r < 0)
                goto out;
        if (ret_digest) {
                *ret_digest = strdup(digest);
                if (!*ret_digest)
                        r = -ENOMEM;
        }
out:
        json_decref(j);
        free(man.data);
        free(top.data);
        return r;
}

int registry_pull(const ImageRef *ref, const PullOptions *o, const char *layout_dir,
                  char **ret_digest, int *ret_layout_fd, HutchError *reterr) {
        _cleanup_close_ int dir_fd = -EBADF, blobs_fd = -EBADF;
        _cleanup_free_ char *base = NULL;
        Registry reg = {.o = o, .ref = ref, .tls = {.cert_dir = o->cert_dir}};
        const char *endpoint = image_ref_endpoint(ref);
        int r;

        if (asprintf(&base, "https://%s/", endpoint) < 0)
                return -ENOMEM;
        r = url_parse(base, &reg.base);
        if (r < 0)
                return hutch_error_set(reterr, EINVAL, "invalid registry '%s'", endpoint);
        reg.explicit_port = endpoint[strlen(endpoint) - 1] != ']' && strrchr(endpoint, ':') &&
                            (endpoint[0] != '[' || strstr(endpoint, "]:"));
        r = layout_open(layout_dir, &dir_fd, &blobs_fd, reterr);
        if (r >= 0)
                r = pull_image(&reg, layout_dir, dir_fd, blobs_fd, ret_digest, reterr);
        registry_done(&reg);
        if (r >= 0 && ret_layout_fd)
                *ret_layout_fd = TAKE_FD(dir_fd);
        return r;
}
