/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

size_t utf8_sequence_length(const char *s, size_t n) {
        const unsigned char *p = (const unsigned char *)s;
        unsigned char lo = 0x80, hi = 0xbf;
        size_t len;

        if (n == 0)
                return 0;
        if (p[0] < 0x80)
                return 1;
        /* The second byte's range narrows for the lead bytes that could
         * otherwise start an overlong form (E0, F0), a surrogate (ED) or a
         * code point above U+10FFFF (F4) (RFC 3629 section 4). */
        if (p[0] >= 0xc2 && p[0] <= 0xdf)
                len = 2;
        else if (p[0] >= 0xe0 && p[0] <= 0xef) {
                len = 3;
                if (p[0] == 0xe0)
                        lo = 0xa0;
                else if (p[0] == 0xed)
                        hi = 0x9f;
        } else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
                len = 4;
                if (p[0] == 0xf0)
                        lo = 0x90;
                else if (p[0] == 0xf4)
                        hi = 0x8f;
        } else
                return 0;
        if (n < len || p[1] < lo || p[1] > hi)
                return 0;
        for (size_t i = 2; i < len; i++)
                if (p[i] < 0x80 || p[i] > 0xbf)
                        return 0;
        return len;
}

bool utf8_is_valid_n(const char *s, size_t n) {
        size_t i = 0;

        while (i < n) {
                size_t len = utf8_sequence_length(s + i, n - i);

                if (len == 0)
                        return false;
                i += len;
        }
        return true;
}

int utf8_sanitize(const char *s, size_t n, char **ret, size_t *ret_len) {
        size_t i = 0, o = 0;
        char *out;

        /* At worst every byte becomes the 3 bytes of U+FFFD. */
        if (n > (SIZE_MAX - 1) / 3)
                return -ENOMEM;
        out = malloc(n * 3 + 1);
        if (!out)
                return -ENOMEM;
        while (i < n) {
                size_t len = utf8_sequence_length(s + i, n - i);

                if (len == 0) {
                        memcpy(out + o, "\xef\xbf\xbd", 3);
                        o += 3;
                        i++;
                        continue;
                }
                memcpy(out + o, s + i, len);
                o += len;
                i += len;
        }
        out[o] = '\0';
        *ret = out;
        if (ret_len)
                *ret_len = o;
        return 0;
}
