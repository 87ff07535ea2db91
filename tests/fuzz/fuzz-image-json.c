/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image/image-oci.h"

/* Fuzzes the image store's JSON parsers (image-oci.h): the first byte picks
 * the parser (index, manifest, config, docker save manifest.json, the
 * config fields alone), the rest is the document. Invariants: a failure
 * fills the HutchError with its errno and a message; a success gives a
 * result whose digests are valid and whose index pick is in range. */

#define FUZZ_INPUT_MAX (256u * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int r, const HutchError *err) {
        if (r < 0 && (err->errnum != -r || err->msg[0] == '\0'))
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *text = (const char *)data + 1;
        HutchError err = {};
        size_t len;
        int r;

        if (size < 1 || size > FUZZ_INPUT_MAX)
                return 0;
        len = size - 1;
        switch (data[0] % 5) {
        case 0: {
                OciIndex ix = {};

                r = oci_index_parse(text, len, &ix, &err);
                check(r, &err);
                if (r >= 0) {
                        HutchError e2 = {};
                        int i = oci_index_pick(&ix, &e2);

                        check(i, &e2);
                        if (i >= 0 && (size_t)i >= ix.n_manifests)
                                abort();
                        for (size_t k = 0; k < ix.n_manifests; k++)
                                if (!oci_digest_is_valid(ix.manifests[k].digest))
                                        abort();
                }
                oci_index_done(&ix);
                break;
        }
        case 1: {
                OciManifest m = {};

                r = oci_manifest_parse(text, len, &m, &err);
                check(r, &err);
                if (r >= 0) {
                        if (!oci_digest_is_valid(m.config.digest) || m.n_layers > IMAGE_LAYERS_MAX)
                                abort();
                        for (size_t k = 0; k < m.n_layers; k++)
                                if (oci_layer_media_type_compression(m.layers[k].media_type) < 0)
                                        abort();
                }
                oci_manifest_done(&m);
                break;
        }
        case 2: {
                OciConfig c = {};

                r = oci_config_parse(text, len, &c, &err);
                check(r, &err);
                if (r >= 0)
                        for (char **d = c.diff_ids; d && *d; d++)
                                if (!oci_digest_is_valid(*d))
                                        abort();
                oci_config_done(&c);
                break;
        }
        case 3: {
                DockerSave d = {};

                r = docker_save_parse(text, len, &d, &err);
                check(r, &err);
                if (r >= 0 && d.n_images == 0)
                        abort();
                docker_save_done(&d);
                break;
        }
        default: {
                ImageConfig c = {};

                r = image_config_parse(text, len, &c, &err);
                check(r, &err);
                image_config_done(&c);
                break;
        }
        }
        return 0;
}
