/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "pty-fd.h"

/* /dev/ptmx, /dev/pts/ptmx: char 5:2. */
#define PTMX_MAJOR 5
#define PTMX_MINOR 2

int pty_fd_send(int chan, int master) {
        char cbuf[CMSG_SPACE(sizeof(int))] = {};
        struct iovec iov = {.iov_base = (void *)"pty", .iov_len = 3};
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = cbuf,
                            .msg_controllen = sizeof(cbuf)};
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &master, sizeof(int));
        if (sendmsg(chan, &mh, MSG_NOSIGNAL) < 0)
                return negative_errno();
        return 0;
}

int pty_fd_recv(int chan, int *ret_master) {
        char cbuf[CMSG_SPACE(sizeof(int) * 2)] = {}, tag[8];
        struct iovec iov = {.iov_base = tag, .iov_len = sizeof(tag)};
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = cbuf,
                            .msg_controllen = sizeof(cbuf)};
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        size_t n_fds = 0;
        ssize_t n;

        do
                n = recvmsg(chan, &mh, MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return negative_errno();
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
                size_t k;

                if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
                        continue;
                k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < k; i++) {
                        int x;

                        memcpy(&x, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
                        n_fds++;
                        if (fd < 0)
                                fd = x;
                        else
                                (void)close(x);
                }
        }
        if (n == 0 && fd < 0)
                return -EPIPE;
        /* SECURITY: the sandbox sent this; it must be a pty master (the
         * receiver only reads, writes and resizes it), nothing else. */
        if (fd < 0 || n_fds != 1 || n != 3 || memcmp(tag, "pty", 3) != 0 ||
            (mh.msg_flags & MSG_CTRUNC))
                return -EBADMSG;
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISCHR(st.st_mode) || major(st.st_rdev) != PTMX_MAJOR ||
            minor(st.st_rdev) != PTMX_MINOR)
                return -EBADMSG;
        *ret_master = TAKE_FD(fd);
        return 0;
}
