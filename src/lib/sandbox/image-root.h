/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* An image as the root filesystem of a sandbox (docs/images-run.md).
 *
 * image_root_resolve() turns the policy's "image" name into what the
 * sandbox needs of it: the unpacked layers' host directories, top first
 * (the overlay's lowerdir order), and the fields of the image's config
 * that hutch honours (Env, WorkingDir, User, Entrypoint, Cmd). The layers
 * belong to the image store (lib/image): they are only ever mounted
 * read-only, as overlay lower layers, below a writable upper of the
 * sandbox's own.
 *
 * The image's User is resolved by image_user_resolve() (src/shared's
 * image-user.h, which the microVM guest's agent links too). */

#include <stddef.h>
#include <sys/types.h>

#include "hutch-error.h"
#include "image-user.h"
#include "macro.h"

/* The most layers an image may have here: the image store's own cap
 * (IMAGE_LAYERS_MAX, Docker's 127). One descriptor each travels to the
 * sandbox's init, FD_MESSAGE_MAX per message (send_fds_batched()). */
#define IMAGE_ROOT_MAX_LAYERS 127

typedef struct ImageRoot {
        char *name;        /* as the policy gave it */
        char *digest;      /* the image's id, "sha256:<hex>" */
        char **layers;     /* host directories of the unpacked layers, top first */
        char **env;        /* Config.Env, "KEY=VALUE" (may be NULL) */
        char *workdir;     /* Config.WorkingDir, absolute, or NULL */
        char *user;        /* Config.User, or NULL (root) */
        char **entrypoint; /* Config.Entrypoint, or NULL */
        char **cmd;        /* Config.Cmd, or NULL */
        char *run_mark;    /* the in-use mark image_root_mark_run() took, or NULL */
} ImageRoot;

ImageRoot *image_root_free(ImageRoot *img);
DEFINE_POINTER_CLEANUP(ImageRoot, image_root_free)

/* Looks @name up in the image store of the caller ($HUTCH_HOME) and
 * returns what the sandbox needs of it in @ret. -ENOENT with @reterr
 * naming the image and the fix ('hutch image import' / 'pull') when the
 * store has no such image, -E2BIG past IMAGE_ROOT_MAX_LAYERS layers, or
 * the store's error. */
int image_root_resolve(const char *name, ImageRoot **ret, HutchError *reterr);

/* A one-shot run's in-use mark on @img's image (image_store_use(), kind
 * "run", this process as the holder), so that `hutch image rm` refuses it
 * while the run lasts; image_root_free() removes it, and a run killed
 * before that leaves a mark rm and gc see is stale. Returns 0 or -errno
 * with @reterr (-ENOENT: the image was removed since it was resolved). */
int image_root_mark_run(ImageRoot *img, HutchError *reterr);

/* The command of a run, by docker's rules: Entrypoint followed by @argv
 * when @argv has words, else Entrypoint followed by Cmd. A new vector in
 * @ret; -EINVAL with @reterr when that is empty (no command given and the
 * image has neither), -ENOMEM. */
int image_root_command(const ImageRoot *img, char *const *argv, char ***ret, HutchError *reterr);
