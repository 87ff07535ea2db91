/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "tls-mint.h"

typedef struct LeafEntry {
        char host[HOST_NAME_MAX_LEN + 1];
        X509 *cert;
        time_t minted;
} LeafEntry;

struct TlsMint {
        EVP_PKEY *ca_key;
        X509 *ca;
        EVP_PKEY *leaf_key;
        LeafEntry *leaves;
        size_t n_leaves;
        size_t n_minted;
        SSL_CTX *server_ctx;
        SSL_CTX *client_ctx;
        X509_STORE *upstream_store; /* the --upstream-ca files, or NULL */
        bool system_trust_loaded;   /* see load_system_trust() */
};

static const unsigned char alpn_http11[] = "\x08http/1.1";

static void set_msg(char *buf, size_t size, const char *what) {
        unsigned long e = ERR_get_error();
        char detail[256];

        if (e != 0) {
                ERR_error_string_n(e, detail, sizeof(detail));
                (void)snprintf(buf, size, "%s: %s", what, detail);
        } else
                (void)snprintf(buf, size, "%s", what);
        ERR_clear_error();
}

static int random_serial(X509 *x) {
        BIGNUM *bn = BN_new();
        int ok;

        if (!bn)
                return -ENOMEM;
        /* 127 bits: positive, and never zero in practice. */
        ok = BN_rand(bn, 127, BN_RAND_TOP_ONE, BN_RAND_BOTTOM_ANY) &&
             BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x));
        BN_free(bn);
        return ok ? 0 : -ENOMEM;
}

static int add_ext(X509 *cert, X509 *issuer, int nid, const char *value) {
        X509V3_CTX ctx;
        X509_EXTENSION *ext;
        int ok;

        X509V3_set_ctx_nodb(&ctx);
        X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
        ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
        if (!ext)
                return -EINVAL;
        ok = X509_add_ext(cert, ext, -1);
        X509_EXTENSION_free(ext);
        return ok ? 0 : -ENOMEM;
}

/* A certificate skeleton: v3, random serial, validity, subject CN, and
 * @key unless NULL. */
static X509 *cert_new(EVP_PKEY *key, const char *cn, long from_s, long to_s) {
        X509 *x = X509_new();
        X509_NAME *name;

        if (!x)
                return NULL;
        if (!X509_set_version(x, X509_VERSION_3) || random_serial(x) < 0 ||
            !X509_gmtime_adj(X509_getm_notBefore(x), from_s) ||
            !X509_gmtime_adj(X509_getm_notAfter(x), to_s) || (key && !X509_set_pubkey(x, key)))
                goto fail;
        name = X509_get_subject_name(x);
        if (cn && !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn,
                                              -1, -1, 0))
                goto fail;
        return x;
fail:
        X509_free(x);
        return NULL;
}

/* The CA's subjectPublicKeyInfo, written directly: id-ecPublicKey with
 * the named curve P-256, and the uncompressed point. X509_set_pubkey()
 * builds the same bytes through OpenSSL's encoder framework, whose first
 * use constructs every encoder of the provider (about 0.5 ms that each
 * sandbox with a secret waits for). The certificate then has no cached
 * EVP_PKEY; nothing here needs one (signing takes m->ca_key). */
static int set_ec_p256_pubkey(X509 *x, EVP_PKEY *key) {
        unsigned char *point = NULL;
        size_t len;

        len = EVP_PKEY_get1_encoded_public_key(key, &point);
        /* 0x04 || X || Y for P-256. */
        if (len != 65 || point[0] != 0x04) {
                OPENSSL_free(point);
                return -EINVAL;
        }
        if (!X509_PUBKEY_set0_param(X509_get_X509_PUBKEY(x), OBJ_nid2obj(NID_X9_62_id_ecPublicKey),
                                    V_ASN1_OBJECT, OBJ_nid2obj(NID_X9_62_prime256v1), point,
                                    (int)len)) {
                OPENSSL_free(point);
                return -ENOMEM;
        }
        return 0;
}

static int make_ca(TlsMint *m, const char *sandbox_id) {
        char cn[320];

        m->ca_key = EVP_EC_gen("P-256");
        if (!m->ca_key)
                return -ENOMEM;
        if (sandbox_id)
                (void)snprintf(cn, sizeof(cn), "hutch sandbox CA %s", sandbox_id);
        else
                (void)snprintf(cn, sizeof(cn), "hutch sandbox CA");
        /* A CN is at most 64 characters. */
        cn[64] = '\0';
        m->ca = cert_new(NULL, cn, -3600, (long)TLS_MINT_CA_DAYS * 24 * 3600);
        if (!m->ca)
                return -ENOMEM;
        if (set_ec_p256_pubkey(m->ca, m->ca_key) < 0)
                return -EINVAL;
        if (!X509_set_issuer_name(m->ca, X509_get_subject_name(m->ca)) ||
            add_ext(m->ca, m->ca, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") < 0 ||
            add_ext(m->ca, m->ca, NID_key_usage, "critical,keyCertSign,cRLSign") < 0 ||
            add_ext(m->ca, m->ca, NID_subject_key_identifier, "hash") < 0 ||
            !X509_sign(m->ca, m->ca_key, EVP_sha256()))
                return -EINVAL;
        return 0;
}

static X509 *mint_leaf(TlsMint *m, const Host *h) {
        char san[HOST_NAME_MAX_LEN + 8];
        X509 *x;

        /* A CN is at most 64 characters; the SAN is what clients check. */
        x = cert_new(m->leaf_key, strlen(h->name) <= 64 ? h->name : NULL, -3600,
                     (long)TLS_MINT_LEAF_HOURS * 3600);
        if (!x)
                return NULL;
        (void)snprintf(san, sizeof(san), "%s:%s", h->kind == HOST_KIND_ADDRESS ? "IP" : "DNS",
                       h->name);
        if (!X509_set_issuer_name(x, X509_get_subject_name(m->ca)) ||
            add_ext(x, m->ca, NID_basic_constraints, "critical,CA:FALSE") < 0 ||
            add_ext(x, m->ca, NID_key_usage, "critical,digitalSignature") < 0 ||
            add_ext(x, m->ca, NID_ext_key_usage, "serverAuth") < 0 ||
            add_ext(x, m->ca, NID_subject_alt_name, san) < 0 ||
            add_ext(x, m->ca, NID_authority_key_identifier, "keyid:always") < 0 ||
            !X509_sign(x, m->ca_key, EVP_sha256())) {
                X509_free(x);
                ERR_clear_error();
                return NULL;
        }
        m->n_minted++;
        return x;
}

static X509 *leaf_for(TlsMint *m, const Host *h) {
        time_t now = time(NULL);
        LeafEntry *e = NULL;
        X509 *x;

        for (size_t i = 0; i < m->n_leaves; i++)
                if (strcmp(m->leaves[i].host, h->name) == 0) {
                        e = &m->leaves[i];
                        break;
                }
        if (e && now - e->minted < (time_t)TLS_MINT_LEAF_HOURS * 3600 / 2)
                return e->cert;
        x = mint_leaf(m, h);
        if (!x)
                return NULL;
        if (e) {
                X509_free(e->cert);
                e->cert = x;
                e->minted = now;
                return x;
        }
        if (m->n_leaves >= TLS_MINT_CACHE_MAX) {
                /* Rare: evict the oldest slot (0) and reuse it. */
                X509_free(m->leaves[0].cert);
                e = &m->leaves[0];
        } else {
                LeafEntry *grown = reallocarray(m->leaves, m->n_leaves + 1, sizeof(LeafEntry));

                if (!grown) {
                        X509_free(x);
                        return NULL;
                }
                m->leaves = grown;
                e = &m->leaves[m->n_leaves++];
        }
        (void)snprintf(e->host, sizeof(e->host), "%s", h->name);
        e->cert = x;
        e->minted = now;
        return x;
}

static int alpn_select_cb(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                          const unsigned char *in, unsigned int inlen, void *arg) {
        unsigned char *sel = NULL;

        if (SSL_select_next_proto(&sel, outlen, alpn_http11, sizeof(alpn_http11) - 1, in, inlen) !=
            OPENSSL_NPN_NEGOTIATED)
                /* The client offered protocols, none of them HTTP/1.1 (h2
                 * only): refuse rather than speak something we cannot
                 * parse. */
                return SSL_TLSEXT_ERR_ALERT_FATAL;
        *out = sel;
        return SSL_TLSEXT_ERR_OK;
}

/* The --upstream-ca files, loaded before the CA certificate goes out: one
 * that cannot be loaded then fails the sandbox's start (the supervisor
 * gets no certificate) rather than leaving a sandbox whose proxy is gone. */
static int load_upstream_ca(TlsMint *m, char *const *upstream_ca, char *msg, size_t msg_size) {
        if (!upstream_ca || !upstream_ca[0])
                return 0;
        m->upstream_store = X509_STORE_new();
        if (!m->upstream_store) {
                set_msg(msg, msg_size, "failed to create the upstream trust store");
                return -ENOMEM;
        }
        for (char *const *f = upstream_ca; *f; f++)
                if (!X509_STORE_load_file(m->upstream_store, *f)) {
                        char what[512];

                        (void)snprintf(what, sizeof(what), "failed to load --upstream-ca '%s'", *f);
                        set_msg(msg, msg_size, what);
                        return -EINVAL;
                }
        return 0;
}

static int make_contexts(TlsMint *m, char *msg, size_t msg_size) {
        m->server_ctx = SSL_CTX_new(TLS_server_method());
        m->client_ctx = SSL_CTX_new(TLS_client_method());
        if (!m->server_ctx || !m->client_ctx) {
                set_msg(msg, msg_size, "failed to create the TLS contexts");
                return -ENOMEM;
        }
        (void)SSL_CTX_set_min_proto_version(m->server_ctx, TLS1_2_VERSION);
        (void)SSL_CTX_set_min_proto_version(m->client_ctx, TLS1_2_VERSION);
        SSL_CTX_set_alpn_select_cb(m->server_ctx, alpn_select_cb, NULL);
        /* Partial writes: the bufferevents hand over what they have. */
        SSL_CTX_set_mode(m->server_ctx,
                         SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
        SSL_CTX_set_mode(m->client_ctx,
                         SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);

        /* SECURITY: the upstream must prove it is the host the request
         * named, to the system's CAs (or the extra ones given). */
        SSL_CTX_set_verify(m->client_ctx, SSL_VERIFY_PEER, NULL);
        /* The --upstream-ca files; the system's CAs join this store on the
         * first intercepted connection (load_system_trust()). */
        if (m->upstream_store)
                SSL_CTX_set1_cert_store(m->client_ctx, m->upstream_store);
        if (SSL_CTX_set_alpn_protos(m->client_ctx, alpn_http11, sizeof(alpn_http11) - 1) != 0) {
                set_msg(msg, msg_size, "failed to set ALPN");
                return -ENOMEM;
        }
        return 0;
}

int tls_mint_new(const char *sandbox_id, char *const *upstream_ca, TlsMint **ret, char *reterr_msg,
                 size_t msg_size) {
        _cleanup_(tls_mint_freep) TlsMint *m = NULL;
        int r;

        m = calloc(1, sizeof(TlsMint));
        if (!m) {
                (void)snprintf(reterr_msg, msg_size, "out of memory");
                return -ENOMEM;
        }
        /* The first random bytes instantiate the DRBGs. OpenSSL's default,
         * CTR-DRBG, fetches AES-256-CTR, whose first fetch constructs every
         * cipher of the provider (about 0.4 ms before the CA exists);
         * HASH-DRBG over SHA-256, the digest the CA is signed with, is an
         * SP 800-90A DRBG of the same 256-bit strength. The ciphers are
         * then constructed by tls_mint_prepare(), after the CA went out.
         * A failure (the DRBGs already exist) keeps the default. */
        if (!RAND_set_DRBG_type(NULL, "HASH-DRBG", NULL, NULL, "SHA256"))
                ERR_clear_error();
        r = make_ca(m, sandbox_id);
        if (r < 0) {
                set_msg(reterr_msg, msg_size, "failed to create the sandbox CA");
                return r;
        }
        r = load_upstream_ca(m, upstream_ca, reterr_msg, msg_size);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(m);
        return 0;
}

int tls_mint_prepare(TlsMint *m, char *reterr_msg, size_t msg_size) {
        /* After the CA certificate went out: nothing of this is needed
         * before the first intercepted connection. */
        m->leaf_key = EVP_EC_gen("P-256");
        if (!m->leaf_key) {
                set_msg(reterr_msg, msg_size, "failed to create the leaf key");
                return -ENOMEM;
        }
        return make_contexts(m, reterr_msg, msg_size);
}

TlsMint *tls_mint_free(TlsMint *m) {
        if (!m)
                return NULL;
        for (size_t i = 0; i < m->n_leaves; i++)
                X509_free(m->leaves[i].cert);
        free(m->leaves);
        SSL_CTX_free(m->server_ctx);
        SSL_CTX_free(m->client_ctx);
        X509_STORE_free(m->upstream_store);
        X509_free(m->ca);
        EVP_PKEY_free(m->ca_key);
        EVP_PKEY_free(m->leaf_key);
        free(m);
        return NULL;
}

unsigned long tls_mint_ca_subject_hash(const TlsMint *m) {
        return X509_NAME_hash_ex(X509_get_subject_name(m->ca), NULL, NULL, NULL);
}

int tls_mint_ca_pem(const TlsMint *m, char **ret, size_t *ret_len) {
        BIO *bio = BIO_new(BIO_s_mem());
        char *data, *copy;
        long len;

        if (!bio)
                return -ENOMEM;
        if (!PEM_write_bio_X509(bio, m->ca)) {
                BIO_free(bio);
                return -ENOMEM;
        }
        len = BIO_get_mem_data(bio, &data);
        copy = len > 0 ? strndup(data, (size_t)len) : NULL;
        BIO_free(bio);
        if (!copy)
                return -ENOMEM;
        *ret = copy;
        *ret_len = (size_t)len;
        return 0;
}

int tls_mint_server_ssl(TlsMint *m, const Host *h, SSL **ret) {
        X509 *leaf = leaf_for(m, h);
        SSL *ssl;

        if (!leaf)
                return -ENOMEM;
        ssl = SSL_new(m->server_ctx);
        if (!ssl)
                return -ENOMEM;
        if (SSL_use_certificate(ssl, leaf) != 1 || SSL_use_PrivateKey(ssl, m->leaf_key) != 1) {
                SSL_free(ssl);
                ERR_clear_error();
                return -EINVAL;
        }
        *ret = ssl;
        return 0;
}

/* The system trust store (a bundle of ~150 certificates) takes tens of
 * milliseconds to parse: it is loaded on the first intercepted connection,
 * not at startup, where it would delay every sandbox with a secret. The
 * --upstream-ca files are loaded at startup, so a bad one is a config
 * error. */
static int load_system_trust(TlsMint *m) {
        if (m->system_trust_loaded)
                return 0;
        if (!SSL_CTX_set_default_verify_paths(m->client_ctx)) {
                ERR_clear_error();
                return -EINVAL;
        }
        m->system_trust_loaded = true;
        return 0;
}

int tls_mint_client_ssl(TlsMint *m, const Host *h, SSL **ret) {
        SSL *ssl;
        bool ok;
        int r;

        r = load_system_trust(m);
        if (r < 0)
                return r;
        ssl = SSL_new(m->client_ctx);
        if (!ssl)
                return -ENOMEM;
        if (h->kind == HOST_KIND_ADDRESS)
                ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), h->name) == 1;
        else {
                SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
                ok = SSL_set_tlsext_host_name(ssl, h->name) == 1 &&
                     SSL_set1_host(ssl, h->name) == 1;
        }
        if (!ok) {
                SSL_free(ssl);
                ERR_clear_error();
                return -ENOMEM;
        }
        *ret = ssl;
        return 0;
}

size_t tls_mint_leaves_minted(const TlsMint *m) {
        return m->n_minted;
}
