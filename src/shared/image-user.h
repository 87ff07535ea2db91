/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A user spec (an image's Config.User, or --user) resolved against a
 * root's /etc/passwd and /etc/group, by docker's rules, on both backends:
 * the namespace backend's init reads the files inside the sandbox after
 * its root is built (src/lib/sandbox/init.c), the microVM guest's agent in
 * the command's root before it execs it (src/guest/agent-user.c). Both
 * files are the image's (untrusted) text: every line is bounded, a
 * malformed one is skipped, and only the fields used are parsed. */

#include <stddef.h>
#include <sys/types.h>

#include "hutch-error.h"

/* The most supplementary groups the image's User gets. */
#define IMAGE_USER_MAX_GROUPS 64
/* How much of /etc/passwd or /etc/group is read. */
#define IMAGE_USER_FILE_MAX (1U << 20)

typedef struct ImageUser {
        uid_t uid;
        gid_t gid;
        gid_t groups[IMAGE_USER_MAX_GROUPS]; /* supplementary, @gid first */
        size_t n_groups;
        char name[64]; /* the passwd name, or "" for a numeric uid it lacks */
        char home[256];
} ImageUser;

/* Resolves @spec (Config.User or --user: "user", "uid", "user:group", "uid:gid",
 * "user:gid", "uid:group") against @passwd and @group (the image's files'
 * text, NUL-terminated, either may be NULL). A name must be found, but
 * "root" (uid 0, gid 0, home /root when @passwd lacks it); a
 * number need not be (docker's rule), in which case its gid is the
 * uid's passwd gid, else 0 for an unknown uid, and its home "/". The
 * supplementary groups are the gid and every group of @group listing the
 * user's name. Returns 0, or -ENOENT / -EINVAL with @reterr naming what
 * was not found or not valid. */
int image_user_resolve(const char *spec, const char *passwd, const char *group, ImageUser *ret,
                       HutchError *reterr);
