/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* SHA-256 (FIPS 180-4), for names of cached files derived from their
 * inputs (the microVM's images and templates) without linking a crypto
 * library into hutch. Not constant-time: never for secrets. */

#include <stddef.h>
#include <stdint.h>

#define SHA256_DIGEST_SIZE 32

typedef struct Sha256 {
        uint32_t h[8];
        uint64_t len; /* bytes hashed so far */
        unsigned char buf[64];
        size_t used; /* bytes in buf */
} Sha256;

void sha256_init(Sha256 *s);
void sha256_update(Sha256 *s, const void *data, size_t len);
void sha256_finish(Sha256 *s, unsigned char out[SHA256_DIGEST_SIZE]);
