/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "e2b-internal.h"
#include "net/allowlist.h"

/* Fuzzes what hutch serve --e2b parses of a client's bytes before any key
 * is checked (src/cli/e2b-util.c): the Host header that routes a
 * connection to a sandbox's port, a chunk-size line of a chunked body,
 * and the allowOut entries of a create checked against the ceiling
 * (host_pattern_within(), src/lib/net/allowlist.c).
 *
 * Invariants checked (abort() on violation):
 *   - a Host accepted names a port 1-65535 and a valid id, that appears
 *     (in any case) in the input;
 *   - a chunk size is accepted only from 1-16 hex digits;
 *   - an entry is within a ceiling that holds exactly that entry when it
 *     parses, and never within an empty ceiling. */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *s = malloc(size + 1);
        char id[E2B_ID_LEN + 1];
        unsigned port = 0;
        uint64_t n;
        char *empty[] = {NULL}, *self[] = {s, NULL};

        if (!s)
                return 0;
        memcpy(s, data, size);
        s[size] = '\0';

        if (e2b_host_parse(s, "e2b.localhost", &port, id)) {
                if (port < 1 || port > 65535 || !e2b_id_is_valid(id) || !strcasestr(s, id))
                        abort();
        }
        if (e2b_chunk_size_parse(s, &n) >= 0) {
                size_t digits = strcspn(s, "; \t");

                if (digits < 1 || digits > 16 || strspn(s, "0123456789abcdefABCDEF") < digits)
                        abort();
        }
        if (host_pattern_within(empty, s))
                abort();
        if (host_pattern_within(self, s) && strlen(s) == 0)
                abort();
        free(s);
        return 0;
}
