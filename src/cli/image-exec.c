/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "fd-util.h"
#include "image-usage.h"
#include "log.h"

/* `hutch image` runs in hutch-image (image.c): only that program links
 * libarchive, whose start-up cost every other command would pay. The help
 * is answered here, where the man page is made from. */
int verb_image(int argc, char **argv) {
        _cleanup_free_ char *helper = NULL;
        _cleanup_free_ char **args = NULL;
        int r;

        if (argc < 2) {
                (void)fputs(image_usage, stderr);
                return HUTCH_EXIT_FAILURE;
        }
        if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
            strcmp(argv[1], "help") == 0) {
                (void)fputs(image_usage, stdout);
                return 0;
        }
        r = shipped_binary_find("HUTCH_IMAGE_PATH", "hutch-image", "cli", X_OK, NULL, &helper);
        if (r < 0) {
                log_error("cannot find hutch-image (set HUTCH_IMAGE_PATH): %s", strerror(-r));
                return HUTCH_EXIT_FAILURE;
        }
        args = calloc((size_t)argc + 1, sizeof(char *));
        if (!args) {
                log_error("out of memory");
                return HUTCH_EXIT_FAILURE;
        }
        args[0] = (char *)"hutch-image";
        for (int i = 1; i < argc; i++)
                args[i] = argv[i];
        (void)execv(helper, args);
        log_error("cannot run %s: %m", helper);
        return HUTCH_EXIT_FAILURE;
}
