/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The supervisor's side of credential brokering (docs/secrets.md;
 * private to src/lib/sandbox). The real values of a run's secrets are read
 * once, before anything is created, into a private mapping that is wiped in
 * every child the supervisor forks or clones (MADV_WIPEONFORK) and left out
 * of core dumps (MADV_DONTDUMP). They leave it only through the proxy's
 * configuration memfd, and the mapping is zeroed and unmapped as soon as
 * the proxy has that. The sandbox only ever gets the placeholders. */

#include <stddef.h>

#include "hutch-error.h"
#include "macro.h"
#include "policy/policy.h"

/* The longest secret value accepted, in bytes. */
#define SECRET_VALUE_MAX 16384
/* The shortest: a shorter placeholder would be too easy to find by chance
 * in other traffic (and too easy to guess). */
#define SECRET_VALUE_MIN 8
/* The prefix kept from the real value ends at a '-' or '_' within the
 * first this many characters. */
#define SECRET_PREFIX_SCAN 16

/* Where the combined CA bundle is inside a sandbox with secrets (it is also
 * bound over /etc/ssl/certs/ca-certificates.crt when the host has that). */
#define SANDBOX_CA_BUNDLE_DIR "/run/hutch"
#define SANDBOX_CA_BUNDLE_PATH "/run/hutch/ca-bundle.pem"
/* The sandbox CA as <subject-hash>.0, for SSL_CERT_DIR (with the system
 * directory after it). */
#define SANDBOX_CA_DIR "/run/hutch/certs"
#define SANDBOX_SYSTEM_CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"

/* The variables that name the CA bundle to common clients (OpenSSL, curl,
 * Python's requests, Node, git, pip, the AWS SDKs), each set to
 * SANDBOX_CA_BUNDLE_PATH where there are secrets; NULL-terminated. */
extern const char *const secret_ca_env_vars[];

typedef struct SecretValue {
        const PolicySecret *def; /* borrowed from the policy */
        char *value;             /* in the protected mapping, NUL-terminated */
        size_t len;
        char *placeholder; /* heap: not secret */
} SecretValue;

typedef struct SecretSet {
        SecretValue *items;
        size_t n;
        void *map; /* the protected mapping holding every value */
        size_t map_size;
} SecretSet;

/* Makes a placeholder for the @len bytes at @value: the same length, the
 * same prefix (up to and including the last '-' or '_' within the first
 * SECRET_PREFIX_SCAN characters, as long as at least SECRET_VALUE_MIN
 * characters follow it), the same run of trailing '=' (base64 padding), and
 * a body drawn with getrandom() from the real body's alphabet: digits when
 * it is all digits, hex of its case when it is all hex, else letters and
 * digits, plus each other visible character the body holds ('-', '_', '+',
 * '/', '.'...). Never equal to @value. Returns 0 and a new string, -EINVAL
 * for a value shorter than SECRET_VALUE_MIN or holding a byte outside
 * 0x21..0x7e, -ENOMEM, or getrandom()'s errno. */
int secret_placeholder_make(const char *value, size_t len, char **ret);

/* Reads the value of every secret of @p (from @caller_env or its file),
 * checks it (set and non-empty, SECRET_VALUE_MIN..SECRET_VALUE_MAX bytes,
 * no control characters or spaces; one trailing newline of a file is
 * dropped) and makes its placeholder. Messages name the secret, never the
 * value. Returns 0 and a new set (NULL when @p has no secrets), or -errno
 * with @reterr filled. */
int secret_set_load(const Policy *p, char *const *caller_env, SecretSet **ret, HutchError *reterr);

/* Zeroes and unmaps the values, frees the rest. */
SecretSet *secret_set_free(SecretSet *s);
DEFINE_POINTER_CLEANUP(SecretSet, secret_set_free)

/* Writes hutch-proxy's --config-fd document ({"secrets": [...]}, the
 * interface of docs/secrets.md) into a new sealed memfd positioned at 0.
 * The text is built in a wiped-on-fork mapping that is zeroed afterwards.
 * Returns the fd or -errno. */
int secret_set_config_memfd(const SecretSet *s);
