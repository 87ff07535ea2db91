/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "pty-fd.h"
#include "sandbox/pty.h"

int pty_attach_inside(int chan) {
        _cleanup_close_ int master = -EBADF, slave = -EBADF;
        char go;
        ssize_t n;
        int r;

        /* The sandbox's devpts (rootfs.c): /dev/ptmx is pts/ptmx there. */
        master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (master < 0)
                return negative_errno();
        if (unlockpt(master) < 0)
                return negative_errno();
        /* The peer of this very master, without a path lookup. */
        slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (slave < 0)
                return negative_errno();
        /* A shim's command (init.c, exec_child()) is not a session leader
         * yet: a controlling terminal needs one. */
        if (getsid(0) != getpid() && setsid() < 0)
                return negative_errno();
        if (ioctl(slave, TIOCSCTTY, 0) < 0)
                return negative_errno();

        r = pty_fd_send(chan, master);
        if (r < 0)
                return r;
        master = safe_close(master);
        do
                n = read(chan, &go, 1);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return negative_errno();
        if (n == 0)
                return -EPIPE;
        for (int fd = 0; fd < 3; fd++)
                if (dup2(slave, fd) < 0)
                        return negative_errno();
        return 0;
}

int pty_send_go(int chan) {
        if (send(chan, "g", 1, MSG_NOSIGNAL) < 0)
                return negative_errno();
        return 0;
}
