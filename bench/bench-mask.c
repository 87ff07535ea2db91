/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "secrets.h"

/* bench/bench-intercept.py's filter row: 64 MiB through hutch-proxy's
 * response masking (secret_filter_feed(), src/proxy/secrets.c) in 16 KiB
 * reads, as intercept.c feeds it, with one secret. Three bodies: JSON-like
 * text, random base64 (the densest in characters that can start a form)
 * and the JSON-like text with an echo of the value, in a different form
 * each time, every 4 KiB. Prints one tab-separated line per body: name,
 * MB/s (10^6) by the wall clock, MB/s by the process's CPU time (what a
 * machine shared with other load still says about the code), replacements;
 * first a plain copy of the same reads, for the machine's own speed. The
 * best of three passes counts. */

#define VALUE "sk-proj-benchREALvalue0123456789abcdef"
#define PLACEHOLDER "sk-proj-benchPLACEHOLDER0123456789abcd"
#define TOTAL ((size_t)64 << 20)
#define READ_SIZE 16384

static double clock_s(clockid_t id) {
        struct timespec ts;

        (void)clock_gettime(id, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double now_s(void) {
        return clock_s(CLOCK_MONOTONIC);
}

static double cpu_s(void) {
        return clock_s(CLOCK_PROCESS_CPUTIME_ID);
}

static void fill_text(char *buf, size_t len, unsigned seed) {
        static const char *const words[] = {
                "{\"id\": ",
                "\"model\": ",
                "\"content\": \"",
                "the ",
                "quick ",
                "brown ",
                "fox\\n",
                "jumps ",
                "over ",
                "12345, ",
                "\"role\": \"user\"}, ",
                "lazy ",
                "dog. ",
                "https:\\/\\/example.test\\/v1 ",
                "\\u00e9t\\u00e9 ",
                "100% ",
        };
        size_t off = 0;

        while (off < len) {
                const char *w;
                size_t n;

                seed = seed * 1103515245U + 12345U;
                w = words[(seed >> 16) % (sizeof(words) / sizeof(words[0]))];
                n = strlen(w) < len - off ? strlen(w) : len - off;
                memcpy(buf + off, w, n);
                off += n;
        }
}

static void fill_base64(char *buf, size_t len, unsigned seed) {
        static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

        for (size_t i = 0; i < len; i++) {
                seed = seed * 1103515245U + 12345U;
                buf[i] = a[(seed >> 16) & 63];
        }
}

static void add_echoes(char *buf, size_t len) {
        static const char *const forms[] = {
                VALUE,
                "c2stcHJvai1iZW5jaFJFQUx2YWx1ZTAxMjM0NTY3ODlhYmNkZW",
                "sk-proj-bench%52EALvalue0123456789abcdef",
                "\\u0073k-proj-benchREALvalue0123456789abcdef",
        };

        for (size_t off = 1000, k = 0; off + 512 < len; off += 4096, k++)
                memcpy(buf + off, forms[k % 4], strlen(forms[k % 4]));
}

int main(void) {
        static const char *const names[] = {"json-like text", "random base64",
                                            "text, an echo per 4 KiB"};
        ProxySecret s = {.name = strdup("TOKEN"),
                         .placeholder = strdup(PLACEHOLDER),
                         .placeholder_len = strlen(PLACEHOLDER)};
        char *body = malloc(TOTAL);

        if (!body || !s.name || !s.placeholder || strlen(VALUE) != strlen(PLACEHOLDER) ||
            proxy_secret_set_value(&s, VALUE, strlen(VALUE)) < 0) {
                fprintf(stderr, "bench-mask: set-up failed\n");
                return 1;
        }
        /* The machine's own speed on the same reads: a copy of each. */
        {
                char *copy = malloc(READ_SIZE);
                double best = 0, best_cpu = 0;

                if (!copy)
                        return 1;
                fill_text(body, TOTAL, 7);
                for (int pass = 0; pass < 3; pass++) {
                        double t0 = now_s(), c0 = cpu_s(), t, c;

                        for (size_t off = 0; off < TOTAL; off += READ_SIZE)
                                memcpy(copy, body + off, READ_SIZE);
                        t = now_s() - t0;
                        c = cpu_s() - c0;
                        if (copy[0] == 1)
                                return 1;
                        if (TOTAL / t / 1e6 > best)
                                best = TOTAL / t / 1e6;
                        if (c > 0 && TOTAL / c / 1e6 > best_cpu)
                                best_cpu = TOTAL / c / 1e6;
                }
                printf("memcpy (reference)\t%.0f\t%.0f\t0\n", best, best_cpu);
                (void)fflush(stdout);
                free(copy);
        }
        for (int kind = 0; kind < 3; kind++) {
                double best = 0, best_cpu = 0;
                size_t count = 0;

                for (int pass = 0; pass < 3; pass++) {
                        SecretFilter f = {};
                        const char *out;
                        size_t n, sum = 0;
                        double t0, c0, t, c;

                        if (kind == 1)
                                fill_base64(body, TOTAL, 7);
                        else
                                fill_text(body, TOTAL, 7);
                        if (kind == 2)
                                add_echoes(body, TOTAL);
                        t0 = now_s();
                        c0 = cpu_s();
                        for (size_t off = 0; off < TOTAL; off += READ_SIZE) {
                                if (secret_filter_feed(&f, &s, 1, body + off, READ_SIZE, &out, &n) <
                                    0)
                                        return 1;
                                sum += n;
                        }
                        secret_filter_flush(&f, &s, 1, &out, &n);
                        sum += n;
                        t = now_s() - t0;
                        c = cpu_s() - c0;
                        if (sum != TOTAL)
                                return 1;
                        if (TOTAL / t / 1e6 > best)
                                best = TOTAL / t / 1e6;
                        if (c > 0 && TOTAL / c / 1e6 > best_cpu)
                                best_cpu = TOTAL / c / 1e6;
                        secret_filter_done(&f);
                }
                /* What was replaced: the echoes, counted on a final pass. */
                count = secrets_mask_values(&s, 1, body, TOTAL);
                printf("%s\t%.0f\t%.0f\t%zu\n", names[kind], best, best_cpu, count);
                (void)fflush(stdout);
        }
        proxy_secret_done(&s);
        free(body);
        return 0;
}
