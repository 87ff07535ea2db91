/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "macro.h"
#include "parse-util.h"

/* Parses the leading decimal digits of @s into @ret_value and returns the
 * number of characters used; -EINVAL if there are none, -ERANGE on
 * overflow. */
static int parse_digits(const char *s, uint64_t *ret_value) {
        uint64_t v = 0;
        size_t i;

        for (i = 0; s[i] >= '0' && s[i] <= '9'; i++) {
                unsigned d = (unsigned)(s[i] - '0');

                if (v > (UINT64_MAX - d) / 10)
                        return -ERANGE;
                v = v * 10 + d;
        }
        if (i == 0)
                return -EINVAL;
        *ret_value = v;
        return (int)MIN(i, (size_t)INT32_MAX);
}

int safe_atou64(const char *s, uint64_t *ret) {
        uint64_t v;
        int n;

        if (!s)
                return -EINVAL;
        n = parse_digits(s, &v);
        if (n < 0)
                return n;
        if (s[n] != '\0')
                return -EINVAL;
        *ret = v;
        return 0;
}

int safe_atou32(const char *s, uint32_t *ret) {
        uint64_t v;
        int r;

        r = safe_atou64(s, &v);
        if (r < 0)
                return r;
        if (v > UINT32_MAX)
                return -ERANGE;
        *ret = (uint32_t)v;
        return 0;
}

int safe_atoi(const char *s, int *ret) {
        bool negative = false;
        uint64_t v;
        int r;

        if (!s)
                return -EINVAL;
        if (*s == '-') {
                negative = true;
                s++;
        }
        r = safe_atou64(s, &v);
        if (r < 0)
                return r;
        if (negative ? v > (uint64_t)INT32_MAX + 1 : v > (uint64_t)INT32_MAX)
                return -ERANGE;
        *ret = negative ? (int)(-(int64_t)v) : (int)v;
        return 0;
}

static int mul_checked(uint64_t a, uint64_t b, uint64_t *ret) {
        if (b != 0 && a > UINT64_MAX / b)
                return -ERANGE;
        *ret = a * b;
        return 0;
}

int parse_size(const char *s, uint64_t *ret) {
        static const struct {
                const char *suffix;
                uint64_t factor;
        } table[] = {
                {"", 1},
                {"b", 1},
                {"k", 1ULL << 10},
                {"kb", 1ULL << 10},
                {"kib", 1ULL << 10},
                {"m", 1ULL << 20},
                {"mb", 1ULL << 20},
                {"mib", 1ULL << 20},
                {"g", 1ULL << 30},
                {"gb", 1ULL << 30},
                {"gib", 1ULL << 30},
                {"t", 1ULL << 40},
                {"tb", 1ULL << 40},
                {"tib", 1ULL << 40},
        };
        uint64_t v;
        int n;
        uint64_t frac = 0, frac_div = 1;
        const char *unit;
        int r;

        if (!s)
                return -EINVAL;
        n = parse_digits(s, &v);
        if (n < 0)
                return n;
        unit = s + n;
        /* A fraction, as docker's "1.5g": up to 9 digits, rounded down to
         * a whole byte. */
        if (*unit == '.') {
                unit++;
                if (*unit < '0' || *unit > '9')
                        return -EINVAL;
                for (; *unit >= '0' && *unit <= '9'; unit++) {
                        if (frac_div == 1000000000)
                                return -EINVAL;
                        frac = frac * 10 + (uint64_t)(*unit - '0');
                        frac_div *= 10;
                }
        }
        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (strcasecmp(unit, table[i].suffix) == 0) {
                        uint64_t whole, part;

                        /* A fraction of a byte is no size. */
                        if (frac_div > 1 && table[i].factor == 1)
                                return -EINVAL;
                        r = mul_checked(v, table[i].factor, &whole);
                        if (r < 0)
                                return r;
                        part = (uint64_t)(((unsigned __int128)frac * table[i].factor) / frac_div);
                        if (whole > UINT64_MAX - part)
                                return -ERANGE;
                        *ret = whole + part;
                        return 0;
                }
        return -EINVAL;
}

int parse_duration_ms(const char *s, uint64_t *ret) {
        static const struct {
                const char *unit;
                uint64_t factor;
        } table[] = {
                {"ms", 1},
                {"s", 1000},
                {"m", 60 * 1000},
                {"h", 60 * 60 * 1000},
        };
        uint64_t v;
        int n;

        if (!s)
                return -EINVAL;
        n = parse_digits(s, &v);
        if (n < 0)
                return n;
        if (s[n] == '\0') {
                if (v != 0)
                        return -EINVAL;
                *ret = 0;
                return 0;
        }
        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (strcmp(s + n, table[i].unit) == 0)
                        return mul_checked(v, table[i].factor, ret);
        return -EINVAL;
}

int parse_boolean(const char *s, bool *ret) {
        static const char *const yes[] = {"1", "yes", "true", "on"};
        static const char *const no[] = {"0", "no", "false", "off"};

        if (!s)
                return -EINVAL;
        for (size_t i = 0; i < ELEMENTSOF(yes); i++)
                if (strcasecmp(s, yes[i]) == 0) {
                        *ret = true;
                        return 0;
                }
        for (size_t i = 0; i < ELEMENTSOF(no); i++)
                if (strcasecmp(s, no[i]) == 0) {
                        *ret = false;
                        return 0;
                }
        return -EINVAL;
}

int hex_digit(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}
