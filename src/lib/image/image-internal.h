/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What image-store.c and image-import.c share: the store's locks, its
 * records and tags. Internal to src/lib/image/. */

#include <stdbool.h>

#include "image/image-store.h"

#define IMAGE_RECORD_VERSION 1
#define IMAGE_RECORD_NAME "image.json"
#define IMAGE_MANIFEST_NAME "manifest.json"
#define IMAGE_CONFIG_NAME "config.json"
#define IMAGE_LAYER_ROOT "root"
#define IMAGE_LAYER_RECORD "layer.json"
#define IMAGE_LAYER_OWNERS "owners"

/* Takes the store's lock (images/lock), LOCK_SH or LOCK_EX, blocking. */
int image_store_lock(ImageStore *s, int how, int *ret_fd);

/* A new .tmp-* folder in the store, held (store_temp_hold()) by *@ret_hold
 * until it is closed: gc leaves it alone meanwhile. */
int image_store_temp(ImageStore *s, char **ret_name, int *ret_hold, HutchError *reterr);

/* Writes the record of @im (no names, no config: those are tags.json's
 * and config.json's) as image.json in the directory @dirfd. */
int image_record_write(int dirfd, const Image *im);

/* Points the names @names at @digest in tags.json (taking them from any
 * other image), under tags.lock. */
int image_store_tag(ImageStore *s, char *const *names, const char *digest, HutchError *reterr);

/* Whether layers/<@hex> exists (complete). */
bool image_store_has_layer(ImageStore *s, const char *hex);
