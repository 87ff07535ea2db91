/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The disk limit of a persistent sandbox (docs/persistent.md "Disk
 * limit"): as root, everything a sandbox writes (its own layer, overlayfs
 * work dirs, detached execs' logs) lives in a sparse ext4 image file in
 * its folder, `disk.img`, whose size is the limit. The kernel enforces it:
 * writing past it is ENOSPC inside the sandbox and the host file system
 * never holds more than the image's size for it.
 *
 * The image is mounted through a loop device with LO_FLAGS_AUTOCLEAR and
 * the new mount API (fsmount()): the mount is either detached (an fd, for
 * a short look at a stopped sandbox's files) or moved into a private mount
 * namespace (the keeper's), so it disappears, and the loop device with it,
 * when the fd closes or the namespace dies: there is no host mount to leak,
 * whatever way the process ends.
 *
 * SECURITY: mounting one ext4 image twice (two loop devices over one file)
 * would corrupt it. The open file that backs the loop device carries an
 * exclusive flock, so the lock lives exactly as long as the loop device
 * holds the image: a second mount while the first (or its last, lazily
 * released, user) exists is -EBUSY. */

#include <stdbool.h>
#include <stdint.h>

#include "hutch-error.h"

#define DISK_IMAGE_NAME "disk.img"
/* The default limit of a persistent sandbox (docs/persistent.md). */
#define DISK_IMAGE_DEFAULT_SIZE (10ULL << 30)
/* ext4 with its journal needs a few MiB of its own. */
#define DISK_IMAGE_MIN_SIZE (16ULL << 20)
#define DISK_IMAGE_MAX_SIZE (16ULL << 40)
/* mkfs.ext4 (e2fsprogs) is looked for here. */
#define DISK_IMAGE_MKFS_PATH "/usr/sbin/mkfs.ext4:/sbin/mkfs.ext4"

/* Whether this process can make and mount disk images: root in the
 * initial user namespace, /dev/loop-control, ext4 in /proc/filesystems
 * and mkfs.ext4. Returns 0, or -errno with @reterr saying why not and
 * what would make it work. */
int disk_image_supported(HutchError *reterr);

/* Creates @image (must not exist; mode 0600), a sparse ext4 file system of
 * @size bytes holding a copy of the folder @src with its owners, modes and
 * extended attributes (mkfs.ext4 -d). The caller removes @image on
 * failure. Returns 0 or -errno with @reterr. */
int disk_image_make(const char *image, uint64_t size, const char *src, HutchError *reterr);

/* Creates @image (must not exist; mode 0600) as a copy of the image
 * @template (made by disk_image_make()), in place of a new mkfs.ext4 run:
 * the same size, the template's data copied (copy_file_range() over its
 * SEEK_DATA extents) and its holes left holes, so the copy is as sparse
 * as the template; then flushed to disk (fdatasync), as mkfs.ext4 flushes
 * what it makes. The copy has the template's file system UUID. The caller
 * removes @image on failure. Returns 0 or -errno with @reterr. */
int disk_image_copy(const char *template, const char *image, HutchError *reterr);

/* Attaches @image to a free loop device (autoclear) and mounts its ext4
 * (nosuid, nodev; with @read_only the loop device, the file system and the
 * mount are read-only, and the image file is not written at all) as a
 * detached mount: @ret_mnt_fd is the fsmount() fd (O_CLOEXEC), to be used
 * as a directory fd or moved with move_mount(). -EBUSY when the image is
 * attached already (see above). */
int disk_image_mount(const char *image, bool read_only, int *ret_mnt_fd, HutchError *reterr);

/* Waits up to @timeout_ms for @image to be attached to no loop device (a
 * mount goes a moment after its last user: the kernel detaches the loop
 * device then). 0 when it is free or missing, -EBUSY after the timeout. */
int disk_image_wait_free(const char *image, unsigned timeout_ms);

/* disk_image_mount() and then the mount moved onto the directory @target,
 * in the caller's mount namespace (the caller made it private). */
int disk_image_mount_at(const char *image, const char *target, HutchError *reterr);
