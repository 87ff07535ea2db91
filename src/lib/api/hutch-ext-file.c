/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch-ext.h's file operations with an owner (issue 20): hutch.h's
 * write, mkdir and move with the keeper's "user" (sandbox/keeper.h). */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "api/hutch-ext.h"
#include "api/persist.h"
#include "fd-util.h"
#include "file-op.h"
#include "policy/policy.h"
#include "sandbox/keeper.h"
#include "store/store.h"

/* Runs @req (its data fd a new memfd holding @data) as @user. */
static int file_as(const char *name, KeeperFile *req, const void *data, size_t len,
                   const char *user, HutchError *reterr) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (!name || !req->path || !req->path[0])
                return hutch_error_set(reterr, EINVAL, "no sandbox name or path given");
        if (strlen(req->path) >= PATH_MAX)
                return hutch_error_set(reterr, ENAMETOOLONG, "the path is too long");
        if (user && !user_spec_is_valid(user))
                return hutch_error_set(
                        reterr, EINVAL,
                        "invalid user '%.64s' (want NAME, UID, NAME:GROUP or UID:GID)", user);
        if ((req->mode & ~(0777U | FILE_OP_FLAGS)) != 0)
                return hutch_error_set(reterr, EINVAL,
                                       "the mode must be permission bits (0 to 0777)");
        fd = memfd_create("hutch-file", MFD_CLOEXEC);
        if (fd < 0)
                return hutch_error_set(reterr, errno, "cannot make a memfd: %s", strerror(errno));
        if (len > 0) {
                r = loop_write(fd, data, len);
                if (r < 0 || lseek(fd, 0, SEEK_SET) < 0)
                        return hutch_error_set(reterr, r < 0 ? -r : errno,
                                               "cannot fill a memfd: %s",
                                               strerror(r < 0 ? -r : errno));
        }
        req->data_fd = fd;
        req->user = user;
        r = store_open(&s, reterr);
        if (r < 0)
                return r;
        r = persist_file(s, name, req, reterr);
        if (r == -FILE_OP_NO_USER && user)
                return hutch_error_set(reterr, EINVAL,
                                       "no user '%s' in sandbox '%s' (its /etc/passwd and "
                                       "/etc/group)",
                                       user, name);
        if (r == -EPERM && user)
                return hutch_error_set(reterr, EPERM,
                                       "cannot %s '%s' as user '%s' in sandbox '%s': the "
                                       "sandbox cannot hand out that user's ids there (a "
                                       "sandbox without a range of ids has only root, and a "
                                       "host directory bound into it by root only its root)",
                                       file_op_action_to_string(req->action), req->path, user,
                                       name);
        return r;
}

int hutch_ext_file_write(const char *name, const char *path, const void *data, size_t len,
                         unsigned mode, const char *user, HutchError *reterr) {
        KeeperFile req = {.action = FILE_OP_WRITE, .path = path, .mode = mode};

        if (!data && len > 0)
                return hutch_error_set(reterr, EINVAL, "no data given");
        if ((mode & ~HUTCH_FILE_PARENTS) > 0777)
                return hutch_error_set(reterr, EINVAL,
                                       "the mode must be permission bits (0 to 0777)");
        return file_as(name, &req, data, len, user, reterr);
}

int hutch_ext_file_mkdir(const char *name, const char *path, unsigned mode, const char *user,
                         HutchError *reterr) {
        KeeperFile req = {.action = FILE_OP_MKDIR, .path = path, .mode = mode};

        if ((mode & ~HUTCH_FILE_PARENTS) > 0777)
                return hutch_error_set(reterr, EINVAL,
                                       "the mode must be permission bits (0 to 0777)");
        return file_as(name, &req, NULL, 0, user, reterr);
}

int hutch_ext_file_move(const char *name, const char *from, const char *to, unsigned flags,
                        const char *user, HutchError *reterr) {
        KeeperFile req = {.action = FILE_OP_MOVE, .path = from, .mode = flags};

        if (flags & ~(HUTCH_FILE_PARENTS | HUTCH_FILE_REPLACE))
                return hutch_error_set(reterr, EINVAL, "unknown flags");
        if (!to || !to[0])
                return hutch_error_set(reterr, EINVAL, "no destination given");
        if (strlen(to) >= PATH_MAX)
                return hutch_error_set(reterr, ENAMETOOLONG, "the destination is too long");
        return file_as(name, &req, to, strlen(to), user, reterr);
}
