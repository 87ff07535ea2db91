/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "e2b-envd-form.h"
#include "macro.h"

int envd_hexval(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

int envd_query_get(const char *query, const char *name, char **ret) {
        size_t nlen = strlen(name);

        *ret = NULL;
        for (const char *p = query; p && *p;) {
                const char *end = strchr(p, '&');
                size_t len = end ? (size_t)(end - p) : strlen(p);

                if (len > nlen && strncmp(p, name, nlen) == 0 && p[nlen] == '=') {
                        char *out = malloc(len - nlen), *o = out;

                        if (!out)
                                return -ENOMEM;
                        for (const char *s = p + nlen + 1; s < p + len; s++) {
                                if (*s == '%') {
                                        int hi = s + 2 < p + len ? envd_hexval(s[1]) : -1;
                                        int lo = hi >= 0 ? envd_hexval(s[2]) : -1;

                                        if (lo < 0 || (hi == 0 && lo == 0)) {
                                                free(out);
                                                return -EINVAL;
                                        }
                                        *o++ = (char)(hi << 4 | lo);
                                        s += 2;
                                } else
                                        *o++ = *s == '+' ? ' ' : *s;
                        }
                        *o = '\0';
                        *ret = out;
                        return 0;
                }
                p = end ? end + 1 : NULL;
        }
        return 0;
}

static const char *memmem_str(const char *h, size_t hlen, const char *n, size_t nlen) {
        return memmem(h, hlen, n, nlen);
}

int envd_form_boundary(const char *ct, char **ret) {
        const char *b;
        size_t n;

        if (strncasecmp(ct, "multipart/form-data", 19) != 0)
                return -EINVAL;
        b = strcasestr(ct, "boundary=");
        if (!b)
                return -EINVAL;
        b += 9;
        if (*b == '"') {
                b++;
                n = strcspn(b, "\"");
        } else
                n = strcspn(b, "; \t");
        if (n == 0 || n > 70)
                return -EINVAL;
        *ret = strndup(b, n);
        return *ret ? 0 : -ENOMEM;
}

/* The filename="..." of a part's headers (@h, @hlen bytes), new. */
static int part_filename(const char *h, size_t hlen, char **ret) {
        const char *f = NULL;

        for (const char *p = h; p + 10 <= h + hlen; p++)
                if (strncasecmp(p, "filename=\"", 10) == 0 && (p == h || p[-1] != '*')) {
                        f = p + 10;
                        break;
                }
        if (!f)
                return -EINVAL;
        {
                const char *e = memchr(f, '"', (size_t)(h + hlen - f));
                _cleanup_free_ char *out = NULL;
                size_t n, o = 0;

                if (!e)
                        return -EINVAL;
                n = (size_t)(e - f);
                out = malloc(n + 1);
                if (!out)
                        return -ENOMEM;
                /* Browsers and undici escape '"', CR and LF as %22, %0D, %0A. */
                for (size_t i = 0; i < n; i++) {
                        if (f[i] == '%' && i + 2 < n + 1 && envd_hexval(f[i + 1]) >= 0 &&
                            envd_hexval(f[i + 2]) >= 0 &&
                            (strncasecmp(f + i, "%22", 3) == 0 ||
                             strncasecmp(f + i, "%0A", 3) == 0 ||
                             strncasecmp(f + i, "%0D", 3) == 0)) {
                                out[o++] =
                                        (char)(envd_hexval(f[i + 1]) << 4 | envd_hexval(f[i + 2]));
                                i += 2;
                        } else
                                out[o++] = f[i];
                }
                out[o] = '\0';
                *ret = TAKE_PTR(out);
        }
        return 0;
}

int envd_form_parse(const char *body, size_t len, const char *boundary, EnvdFormPart *parts,
                    size_t *ret_n) {
        _cleanup_free_ char *delim = NULL;
        const char *p, *end = body + len;
        size_t dlen, n = 0;
        int r;

        if (asprintf(&delim, "\r\n--%s", boundary) < 0)
                return -ENOMEM;
        dlen = strlen(delim);
        /* The first delimiter has no CRLF before it. */
        if (len < dlen - 2 || memcmp(body, delim + 2, dlen - 2) != 0)
                return -EINVAL;
        p = body + dlen - 2;
        for (;;) {
                const char *hend, *next;

                if (end - p >= 2 && p[0] == '-' && p[1] == '-')
                        break; /* the closing delimiter */
                if (end - p < 2 || p[0] != '\r' || p[1] != '\n')
                        return -EINVAL;
                p += 2;
                hend = memmem_str(p, (size_t)(end - p), "\r\n\r\n", 4);
                if (!hend)
                        return -EINVAL;
                next = memmem_str(hend + 4, (size_t)(end - hend - 4), delim, dlen);
                if (!next)
                        return -EINVAL;
                if (n >= ENVD_FORM_PARTS_MAX)
                        return -E2BIG;
                r = part_filename(p, (size_t)(hend - p), &parts[n].filename);
                if (r < 0)
                        return r;
                parts[n].data = hend + 4;
                parts[n].len = (size_t)(next - hend - 4);
                n++;
                p = next + dlen;
        }
        *ret_n = n;
        return 0;
}
