/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "base64.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int base64_encode(const void *data, size_t len, char **ret) {
        const uint8_t *p = data;
        size_t o = 0;
        char *out;

        if (len > (SIZE_MAX - 1) / 4 * 3 - 2)
                return -ENOMEM;
        out = malloc((len + 2) / 3 * 4 + 1);
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < len; i += 3) {
                uint32_t q = (uint32_t)p[i] << 16;
                size_t k = len - i < 3 ? len - i : 3;

                if (k > 1)
                        q |= (uint32_t)p[i + 1] << 8;
                if (k > 2)
                        q |= p[i + 2];
                out[o++] = alphabet[q >> 18 & 63];
                out[o++] = alphabet[q >> 12 & 63];
                out[o++] = k > 1 ? alphabet[q >> 6 & 63] : '=';
                out[o++] = k > 2 ? alphabet[q & 63] : '=';
        }
        out[o] = '\0';
        *ret = out;
        return 0;
}

int base64_value(char c) {
        if (c >= 'A' && c <= 'Z')
                return c - 'A';
        if (c >= 'a' && c <= 'z')
                return c - 'a' + 26;
        if (c >= '0' && c <= '9')
                return c - '0' + 52;
        if (c == '+' || c == '-')
                return 62;
        if (c == '/' || c == '_')
                return 63;
        return -1;
}

int base64_decode(const char *s, size_t len, Base64Flags flags, uint8_t **ret, size_t *ret_len) {
        uint8_t *out;
        size_t n = len, o = 0;
        uint32_t acc = 0;
        int bits = 0;

        /* Padding: exactly what completes the last quantum, or (allowed)
         * none at all. */
        if (n > 0 && s[n - 1] == '=') {
                if (len % 4 != 0)
                        return -EINVAL;
                n--;
                if (n > 0 && s[n - 1] == '=')
                        n--;
        } else if (!(flags & BASE64_PAD_OPTIONAL) && len % 4 != 0)
                return -EINVAL;
        if (n % 4 == 1)
                return -EINVAL;
        out = malloc(n / 4 * 3 + 3);
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                int v = base64_value(s[i]);

                if (v < 0 || (!(flags & BASE64_URL_TOO) && (s[i] == '-' || s[i] == '_'))) {
                        free(out);
                        return -EINVAL;
                }
                acc = acc << 6 | (uint32_t)v;
                bits += 6;
                if (bits >= 8) {
                        bits -= 8;
                        out[o++] = (uint8_t)(acc >> bits);
                        acc &= (1U << bits) - 1;
                }
        }
        if (acc != 0) {
                free(out);
                return -EINVAL;
        }
        out[o] = 0;
        *ret = out;
        *ret_len = o;
        return 0;
}
