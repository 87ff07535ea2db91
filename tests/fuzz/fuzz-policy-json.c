/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"

/* Fuzzes the policy document's decoder (src/lib/policy/policy-json.c: its
 * own field tables, decoded by src/basic/json-fields.c), as the API's
 * create body, `hutch create --policy` and a stored policy reach it, and
 * checks its invariants:
 *   - a refusal is -errno with that errno, a message that names the
 *     policy, and a JSON pointer that is "" or starts with '/';
 *   - a document it accepts is written back (policy_to_json()) as one
 *     that it accepts again and writes back the same. */

#define FUZZ_INPUT_MAX (64U << 10)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_round_trip(const Policy *p) {
        char *json = NULL, *again = NULL;
        Policy *q;

        if (policy_to_json(p, &json) < 0)
                return; /* a field the format cannot hold: refused, not written */
        q = policy_new();
        if (!q)
                abort();
        if (policy_load_json(q, json, strlen(json), NULL) < 0)
                abort();
        if (policy_to_json(q, &again) < 0 || strcmp(json, again) != 0)
                abort();
        free(again);
        free(json);
        policy_free(q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        HutchError err = {};
        Policy *p;
        int r;

        if (size > FUZZ_INPUT_MAX)
                return 0;
        p = policy_new();
        if (!p)
                abort();
        r = policy_load_json(p, (const char *)data, size, &err);
        if (r < 0) {
                if (r != -err.errnum || err.errnum <= 0 || strncmp(err.msg, "policy", 6) != 0 ||
                    (err.pointer[0] && err.pointer[0] != '/'))
                        abort();
        } else
                check_round_trip(p);
        policy_free(p);
        return 0;
}
