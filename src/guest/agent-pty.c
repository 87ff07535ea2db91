/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A command's terminal in the guest (`hutch exec -t` on a VM sandbox,
 * docs/vm.md "Published ports and terminals"), and the published ports'
 * connections. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <termios.h>
#include <unistd.h>

#include "agent.h"
#include "fd-util.h"
#include "macro.h"

/* /dev/pts/ptmx: char 5:2. */
#define PTMX_MAJOR 5
#define PTMX_MINOR 2

int agent_pty_attach(int chan, unsigned rows, unsigned cols) {
        _cleanup_close_ int master = -EBADF, slave = -EBADF;
        char cbuf[CMSG_SPACE(sizeof(int))] = {};
        struct iovec iov = {.iov_base = (void *)"pty", .iov_len = 3};
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = cbuf,
                            .msg_controllen = sizeof(cbuf)};
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};

        /* The sandbox's devpts (agent-setup.c): /dev/ptmx is pts/ptmx. */
        master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (master < 0)
                return negative_errno();
        if (unlockpt(master) < 0)
                return negative_errno();
        slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (slave < 0)
                return negative_errno();
        if (ioctl(slave, TIOCSWINSZ, &ws) < 0)
                return negative_errno();
        /* The caller is a session leader already (child_main()). */
        if (ioctl(slave, TIOCSCTTY, 0) < 0)
                return negative_errno();
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &master, sizeof(int));
        if (sendmsg(chan, &mh, MSG_NOSIGNAL) < 0)
                return negative_errno();
        for (int fd = 0; fd < 3; fd++)
                if (dup2(slave, fd) < 0)
                        return negative_errno();
        return 0;
}

int agent_pty_recv(int chan, int *ret_master) {
        char cbuf[CMSG_SPACE(sizeof(int))] = {}, tag[8];
        struct iovec iov = {.iov_base = tag, .iov_len = sizeof(tag)};
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = cbuf,
                            .msg_controllen = sizeof(cbuf)};
        struct cmsghdr *cm;
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        ssize_t n;

        do
                n = recvmsg(chan, &mh, MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return negative_errno();
        cm = CMSG_FIRSTHDR(&mh);
        if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
            cm->cmsg_len == CMSG_LEN(sizeof(int)))
                memcpy(&fd, CMSG_DATA(cm), sizeof(int));
        if (n == 0 && fd < 0)
                return -EPIPE;
        /* SECURITY: the command's process sent this: a pty master, nothing
         * else. */
        if (fd < 0 || n != 3 || memcmp(tag, "pty", 3) != 0 || (mh.msg_flags & MSG_CTRUNC))
                return -EBADMSG;
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISCHR(st.st_mode) || major(st.st_rdev) != PTMX_MAJOR ||
            minor(st.st_rdev) != PTMX_MINOR)
                return -EBADMSG;
        if (fcntl(fd, F_SETFL, O_NONBLOCK) < 0)
                return negative_errno();
        *ret_master = TAKE_FD(fd);
        return 0;
}

int agent_pty_resize(int master, unsigned rows, unsigned cols) {
        struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};

        if (ioctl(master, TIOCSWINSZ, &ws) < 0)
                return negative_errno();
        return 0;
}

int agent_forward_connect(uint16_t port, int *ret_fd) {
        _cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port = htons(port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};

        if (fd < 0)
                return negative_errno();
        /* On loopback the answer is immediate but for a full backlog: then
         * the connection completes (or fails) later, and the relay sees
         * that as its first event. */
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS)
                return negative_errno();
        *ret_fd = TAKE_FD(fd);
        return 0;
}
