/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The command's user on the microVM backend (docs/vm.md, "Images"): an
 * EXEC's "u:SPEC" (--user, or the image's User) found in the command's
 * own root, the image's /etc/passwd and /etc/group as they are now, by the
 * parser the namespace backend uses (src/shared/image-user.h). */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "fd-util.h"
#include "image-user.h"
#include "macro.h"
#include "strv.h"

/* Reads @path of the command's root (the caller is chrooted there). NULL
 * in *@ret when there is no such regular file; -errno otherwise.
 * SECURITY: the file is the sandbox's, so only a regular file is read
 * (O_NONBLOCK: a FIFO there would hold the agent, which waits for its
 * command's start; anything else is as good as none: root still works),
 * and at most IMAGE_USER_FILE_MAX of it. */
static int read_user_db(const char *path, char **ret) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0 && errno == ENOENT) {
                *ret = NULL;
                return 0;
        }
        if (fd < 0)
                return negative_errno();
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode)) {
                *ret = NULL;
                return 0;
        }
        return read_full_fd(fd, IMAGE_USER_FILE_MAX, ret, NULL);
}

int agent_user_become(const char *spec, bool keep_home, bool keep_user, char ***envp,
                      uid_t *ret_uid, char *msg, size_t msg_size) {
        _cleanup_free_ char *passwd = NULL, *group = NULL;
        HutchError err = {};
        ImageUser u;
        int r;

        r = read_user_db("/etc/passwd", &passwd);
        if (r >= 0)
                r = read_user_db("/etc/group", &group);
        if (r < 0) {
                (void)snprintf(msg, msg_size, "'%s': read /etc/passwd and /etc/group", spec);
                return r;
        }
        r = image_user_resolve(spec, passwd, group, &u, &err);
        if (r < 0) {
                (void)snprintf(msg, msg_size, "'%s': %s", spec, err.msg);
                return r;
        }
        if ((!keep_home && strv_env_set(envp, "HOME", u.home) < 0) ||
            (u.name[0] && !keep_user && strv_env_set(envp, "USER", u.name) < 0)) {
                (void)snprintf(msg, msg_size, "'%s': set HOME and USER", spec);
                return -ENOMEM;
        }
        /* The command's stdio pipes are its root's (start_exec()): the
         * user's now, so that it may open them again (/dev/stderr). A
         * terminal is opened later, by the user. */
        for (int i = 0; i < 3; i++)
                if (fchown(i, u.uid, u.gid) < 0)
                        continue; /* not the root's to give: it stays as it was */
        /* SECURITY: ids of the sandbox's user namespace only (the kernel
         * refuses one its map lacks: EINVAL); a change from uid 0 clears
         * every capability (the securebits keep NO_SETUID_FIXUP off). */
        if (setgroups(u.n_groups, u.groups) < 0 || setresgid(u.gid, u.gid, u.gid) < 0 ||
            setresuid(u.uid, u.uid, u.uid) < 0) {
                r = negative_errno();
                (void)snprintf(msg, msg_size,
                               "'%s' (uid %u, gid %u): not an id of the sandbox (without a "
                               "range of ids, as a user's VM sandbox has, its only id is root: "
                               "--user root runs as it)",
                               spec, (unsigned)u.uid, (unsigned)u.gid);
                return r;
        }
        *ret_uid = u.uid;
        return 0;
}
