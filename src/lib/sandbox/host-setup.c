/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The user namespaces of a sandbox's host setup (host-setup.h), for both
 * backends. */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "ns/userns.h"
#include "sandbox/host-setup.h"

int sandbox_userns_adopt(pid_t pid, const IdMapping *m, int *ret_fd, HutchError *reterr) {
        char path[64];
        int fd, r;

        /* A ranged map (a user's sub-ids) is written by newuidmap and
         * newgidmap, which say themselves what failed. */
        r = m->ranged ? userns_write_maps_full(pid, m, reterr) : userns_write_maps(pid, m);
        if (r < 0)
                return m->ranged && reterr && reterr->errnum
                               ? r
                               : hutch_error_set(reterr, -r,
                                                 "failed to write the sandbox's id maps: %s",
                                                 strerror(-r));
        (void)snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return hutch_error_set(reterr, errno,
                                       "failed to open the sandbox's user namespace: %m");
        *ret_fd = fd;
        return 0;
}

int sandbox_userns_make(const IdMapping *m, int *ret_fd, HutchError *reterr) {
        _cleanup_close_ int pidfd = -EBADF;
        int hold[2], status = 0, r;
        pid_t pid;

        if (pipe2(hold, O_CLOEXEC) < 0)
                return hutch_error_set(reterr, errno, "pipe: %m");
        pid = sandbox_clone(CLONE_NEWUSER, &pidfd);
        if (pid == 0) {
                char c;

                /* Keeps the namespace until the pipe's end. */
                (void)close(hold[1]);
                (void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
                (void)loop_read(hold[0], &c, 1);
                _exit(0);
        }
        (void)close(hold[0]);
        if (pid < 0) {
                (void)close(hold[1]);
                return hutch_error_set(reterr, -pid,
                                       "failed to create the sandbox's user namespace: %s (see "
                                       "'hutch doctor')",
                                       strerror(-pid));
        }
        r = sandbox_userns_adopt(pid, m, ret_fd, reterr);
        (void)close(hold[1]);
        (void)waitpid(pid, &status, 0);
        return r;
}
