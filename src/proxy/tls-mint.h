/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The per-sandbox certificate authority of hutch-proxy (docs/network.md,
 * "Secrets") and the TLS contexts of the intercepting path.
 *
 * The CA is generated at start: EC P-256, self-signed, CA:TRUE pathlen 0,
 * key usage keyCertSign and cRLSign, valid from now-1h to now+7d, random
 * 128-bit serial, subject CN "hutch sandbox CA <sandbox-id>". Its key never
 * leaves the process. Leaf certificates, one per host, are minted on first
 * use and cached: EC P-256 (one key shared by the leaves), subjectAltName
 * DNS:host or IP:address, extendedKeyUsage serverAuth, valid from now-1h
 * for TLS_MINT_LEAF_HOURS (re-minted at half their life).
 *
 * Towards the sandbox only "http/1.1" is offered in ALPN: a client that
 * offers ALPN without it fails the handshake (no_application_protocol).
 * Towards upstream servers the chain and the host name are verified
 * against the system trust store plus the extra CA files given. */

#include <stdbool.h>
#include <stddef.h>

#include <openssl/ssl.h>

#include "macro.h"
#include "net/allowlist.h"

#define TLS_MINT_CA_DAYS 7
#define TLS_MINT_LEAF_HOURS 24
#define TLS_MINT_CACHE_MAX 1024

typedef struct TlsMint TlsMint;

/* Creates the CA, and loads the @upstream_ca files (PEM; may be NULL) as
 * extra upstream trust, and nothing else: a sandbox with a secret waits for
 * the CA certificate. Called before anything else of OpenSSL draws random
 * bytes, it makes the process's DRBGs HASH-DRBG (SHA-256) rather than
 * CTR-DRBG (see tls-mint.c). Returns 0, -EINVAL for an unreadable
 * --upstream-ca, or -ENOMEM, with a static or OpenSSL message in
 * @reterr_msg (a buffer of @msg_size bytes). */
int tls_mint_new(const char *sandbox_id, char *const *upstream_ca, TlsMint **ret, char *reterr_msg,
                 size_t msg_size);

/* Makes the leaf key and the TLS contexts. Separate from tls_mint_new() so
 * the CA certificate can be handed out first: this costs about a
 * millisecond that the sandbox's start-up would otherwise wait for.
 * Returns 0 or -ENOMEM with a message. */
int tls_mint_prepare(TlsMint *m, char *reterr_msg, size_t msg_size);
TlsMint *tls_mint_free(TlsMint *m);
DEFINE_POINTER_CLEANUP(TlsMint, tls_mint_free)

/* The CA certificate as PEM (malloc'd, NUL-terminated). Returns 0 or
 * -ENOMEM. */
int tls_mint_ca_pem(const TlsMint *m, char **ret, size_t *ret_len);

/* OpenSSL's subject-name hash of the CA (what `openssl x509 -hash` and
 * c_rehash print), for a hashed certificate directory entry. */
unsigned long tls_mint_ca_subject_hash(const TlsMint *m);

/* A server-side SSL for a client that CONNECTed to @h, with the leaf for
 * @h (minted now if not cached). Returns 0 or -ENOMEM/-EINVAL. */
int tls_mint_server_ssl(TlsMint *m, const Host *h, SSL **ret);

/* A client-side SSL towards @h: SNI (names only), host name or IP address
 * verification, ALPN "http/1.1". Returns 0 or -ENOMEM. */
int tls_mint_client_ssl(TlsMint *m, const Host *h, SSL **ret);

/* Number of leaves minted so far (for tests and the debug log). */
size_t tls_mint_leaves_minted(const TlsMint *m);
