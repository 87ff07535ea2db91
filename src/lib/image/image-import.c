/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>

#include "image/image-internal.h"

int image_store_import(ImageStore *s, const char *path, const char *name, int stdin_fd, Image **ret,
                       HutchError *reterr) {
        (void)s;
        (void)path;
        (void)name;
        (void)stdin_fd;
        (void)ret;
        return hutch_error_set(reterr, EOPNOTSUPP, "image import is not implemented yet");
}
