/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch-image: the `hutch image` verbs (image-usage.h, docs/images.md), in
 * a program of their own so that only it links libarchive. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <locale.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/hutch-ext.h"
#include "cli-util.h"
#include "cli.h"
#include "fd-util.h"
#include "image-usage.h"
#include "log.h"
#include "strv.h"

static int open_images(HutchExtImages **ret) {
        HutchError err = {};
        int r;

        r = hutch_ext_images_open(ret, &err);
        if (r < 0)
                return cli_fail(&err, r);
        return 0;
}

static bool is_help(const char *a) {
        return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0;
}

static void format_size(uint64_t n, char *buf, size_t size) {
        static const char units[] = "BKMGT";
        double v = (double)n;
        size_t u = 0;

        while (v >= 1024 && u < sizeof(units) - 2) {
                v /= 1024;
                u++;
        }
        if (u == 0)
                (void)snprintf(buf, size, "%" PRIu64 "B", n);
        else
                (void)snprintf(buf, size, "%.1f%c", v, units[u]);
}

static int image_import(int argc, char **argv) {
        _cleanup_(hutch_ext_images_freep) HutchExtImages *s = NULL;
        _cleanup_(hutch_ext_image_done) HutchExtImage image = {};
        const HutchExtImage *im = &image;
        const char *path = NULL, *name = NULL;
        HutchError err = {};
        bool quiet = false;
        int r;

        for (int i = 1; i < argc; i++) {
                if (is_help(argv[i])) {
                        (void)fputs(image_usage, stdout);
                        return 0;
                }
                if (strcmp(argv[i], "-q") == 0 || strcmp(argv[i], "--quiet") == 0)
                        quiet = true;
                else if (argv[i][0] == '-' && argv[i][1] != '\0') {
                        log_error("unknown option '%s' of hutch image import", argv[i]);
                        return HUTCH_EXIT_FAILURE;
                } else if (!path)
                        path = argv[i];
                else if (!name)
                        name = argv[i];
                else {
                        log_error("usage: hutch image import PATH|- [NAME[:TAG]] [-q]");
                        return HUTCH_EXIT_FAILURE;
                }
        }
        if (!path) {
                log_error("usage: hutch image import PATH|- [NAME[:TAG]] [-q]");
                return HUTCH_EXIT_FAILURE;
        }
        r = open_images(&s);
        if (r != 0)
                return r;
        r = hutch_ext_image_import(s, path, name, STDIN_FILENO, &image, &err);
        if (r < 0) {
                log_error("cannot import '%s': %s", path, err.msg[0] ? err.msg : strerror(-r));
                return HUTCH_EXIT_FAILURE;
        }
        if (!quiet) {
                char size[32];

                format_size(im->size, size, sizeof(size));
                (void)fprintf(stderr, "imported %s: %zu layer%s, %s%s%s\n",
                              name                        ? name
                              : im->names && im->names[0] ? im->names[0]
                                                          : "(no name)",
                              im->n_layers, im->n_layers == 1 ? "" : "s", size,
                              im->skipped_devices ? ", device nodes left out: " : "",
                              im->skipped_devices ? "yes" : "");
        }
        (void)printf("%s\n", im->digest);
        return 0;
}

static int image_ls(int argc, char **argv) {
        _cleanup_(hutch_ext_images_freep) HutchExtImages *s = NULL;
        HutchExtImage *l = NULL;
        size_t n = 0;
        HutchError err = {};
        bool as_json = false, quiet = false;
        int r;

        for (int i = 1; i < argc; i++) {
                if (is_help(argv[i])) {
                        (void)fputs(image_usage, stdout);
                        return 0;
                }
                if (strcmp(argv[i], "--json") == 0)
                        as_json = true;
                else if (strcmp(argv[i], "-q") == 0 || strcmp(argv[i], "--quiet") == 0)
                        quiet = true;
                else {
                        log_error("usage: hutch image ls [--json | -q]");
                        return HUTCH_EXIT_FAILURE;
                }
        }
        r = open_images(&s);
        if (r != 0)
                return r;
        r = hutch_ext_image_list(s, &l, &n, &err);
        if (r < 0)
                return cli_fail(&err, r);
        if (as_json) {
                (void)fputs("[", stdout);
                for (size_t i = 0; i < n; i++) {
                        if (!l[i].json) {
                                (void)hutch_ext_images_list_free(l, n);
                                log_error("out of memory");
                                return HUTCH_EXIT_FAILURE;
                        }
                        (void)printf("%s%s", i ? ",\n" : "\n", l[i].json);
                }
                (void)fputs("\n]\n", stdout);
        } else if (quiet) {
                /* Each name, or the digest of an image without one: what
                 * inspect and rm take (the shell completion's source). */
                for (size_t i = 0; i < n; i++) {
                        if (strv_length(l[i].names) == 0)
                                (void)printf("%s\n", l[i].digest);
                        STRV_FOREACH(name, l[i].names)
                                (void)printf("%s\n", *name);
                }
        } else {
                (void)printf("%-40s %-12s %6s %9s %s\n", "NAME", "ID", "LAYERS", "SIZE",
                             "IMPORTED");
                for (size_t i = 0; i < n; i++) {
                        time_t t = (time_t)(l[i].imported_ms / 1000);
                        char size[32], when[32] = "-";
                        struct tm tm;

                        format_size(l[i].size, size, sizeof(size));
                        if (localtime_r(&t, &tm))
                                (void)strftime(when, sizeof(when), "%Y-%m-%d %H:%M", &tm);
                        if (strv_length(l[i].names) == 0)
                                (void)printf("%-40s %.12s %6zu %9s %s\n", "<none>", l[i].digest + 7,
                                             l[i].n_layers, size, when);
                        STRV_FOREACH(name, l[i].names)
                                (void)printf("%-40s %.12s %6zu %9s %s\n", *name, l[i].digest + 7,
                                             l[i].n_layers, size, when);
                }
        }
        (void)hutch_ext_images_list_free(l, n);
        return 0;
}

static int image_inspect(int argc, char **argv) {
        _cleanup_(hutch_ext_images_freep) HutchExtImages *s = NULL;
        _cleanup_(hutch_ext_image_done) HutchExtImage im = {};
        HutchError err = {};
        int r;

        if (argc == 2 && is_help(argv[1])) {
                (void)fputs(image_usage, stdout);
                return 0;
        }
        if (argc != 2) {
                log_error("usage: hutch image inspect NAME");
                return HUTCH_EXIT_FAILURE;
        }
        r = open_images(&s);
        if (r != 0)
                return r;
        r = hutch_ext_image_get(s, argv[1], &im, &err);
        if (r < 0)
                return cli_fail(&err, r);
        if (!im.json)
                return log_error("out of memory"), HUTCH_EXIT_FAILURE;
        (void)printf("%s\n", im.json);
        return 0;
}

static int image_rm(int argc, char **argv) {
        _cleanup_(hutch_ext_images_freep) HutchExtImages *s = NULL;
        int r, ret = 0;

        if (argc == 2 && is_help(argv[1])) {
                (void)fputs(image_usage, stdout);
                return 0;
        }
        if (argc < 2) {
                log_error("usage: hutch image rm NAME...");
                return HUTCH_EXIT_FAILURE;
        }
        r = open_images(&s);
        if (r != 0)
                return r;
        for (int i = 1; i < argc; i++) {
                HutchError err = {};
                bool gone = false;

                r = hutch_ext_image_remove(s, argv[i], &gone, &err);
                if (r < 0) {
                        log_error("cannot remove image '%s': %s", argv[i],
                                  err.msg[0] ? err.msg : strerror(-r));
                        ret = HUTCH_EXIT_FAILURE;
                        continue;
                }
                (void)printf("%s %s\n", gone ? "removed" : "untagged", argv[i]);
        }
        return ret;
}

static int image_gc(int argc, char **argv) {
        _cleanup_(hutch_ext_images_freep) HutchExtImages *s = NULL;
        HutchError err = {};
        unsigned n = 0;
        int r;

        if (argc == 2 && is_help(argv[1])) {
                (void)fputs(image_usage, stdout);
                return 0;
        }
        if (argc != 1) {
                log_error("usage: hutch image gc");
                return HUTCH_EXIT_FAILURE;
        }
        r = open_images(&s);
        if (r != 0)
                return r;
        r = hutch_ext_image_gc(s, &n, &err);
        if (r < 0)
                return cli_fail(&err, r);
        if (r > 0)
                log_info("an import is running: nothing removed, run gc again after it");
        (void)printf("removed %u\n", n);
        return 0;
}

int main(int argc, char **argv) {
        static const struct {
                const char *name;
                int (*fn)(int argc, char **argv);
        } verbs[] = {
                {"import", image_import}, {"ls", image_ls}, {"inspect", image_inspect},
                {"rm", image_rm},         {"gc", image_gc},
        };

        log_setup("hutch", LOG_LEVEL_INFO);
        /* libarchive converts a pax header's UTF-8 names to the locale's
         * charset, and in the C locale a name outside ASCII fails
         * (mmdebstrap's Debian tar: ca-certificates' "...Főtanúsítvány.crt").
         * C.UTF-8 makes that the identity; names stay the archive's bytes. */
        (void)setlocale(LC_CTYPE, "C.UTF-8");
        if (argc >= 2 && is_help(argv[1])) {
                (void)fputs(image_usage, stdout);
                return 0;
        }
        for (size_t i = 0; argc >= 2 && i < ELEMENTSOF(verbs); i++)
                if (strcmp(argv[1], verbs[i].name) == 0)
                        return verbs[i].fn(argc - 1, argv + 1);
        if (argc >= 2)
                log_error("unknown command 'image %s'", argv[1]);
        (void)fputs(image_usage, stderr);
        return HUTCH_EXIT_FAILURE;
}
