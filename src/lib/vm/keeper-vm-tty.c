/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The host side of a VM exec's terminal (keeper-vm-tty.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "vm/keeper-vm-tty.h"

int vm_tty_open(int chan, int *ret_slave) {
        _cleanup_close_ int master = -EBADF, slave = -EBADF;
        char cbuf[CMSG_SPACE(sizeof(int))] = {};
        struct iovec iov = {.iov_base = (void *)"pty", .iov_len = 3};
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = cbuf,
                            .msg_controllen = sizeof(cbuf)};
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        struct termios t;

        master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (master < 0)
                return negative_errno();
        if (unlockpt(master) < 0)
                return negative_errno();
        slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
        if (slave < 0)
                return negative_errno();
        if (tcgetattr(slave, &t) < 0)
                return negative_errno();
        cfmakeraw(&t);
        if (tcsetattr(slave, TCSANOW, &t) < 0)
                return negative_errno();
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &master, sizeof(int));
        if (sendmsg(chan, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
                return negative_errno();
        *ret_slave = TAKE_FD(slave);
        return 0;
}

void vm_tty_size(int slave, unsigned *ret_rows, unsigned *ret_cols) {
        struct winsize ws = {};

        if (ioctl(slave, TIOCGWINSZ, &ws) < 0 || ws.ws_row == 0 || ws.ws_col == 0)
                ws = (struct winsize){.ws_row = 24, .ws_col = 80};
        *ret_rows = ws.ws_row;
        *ret_cols = ws.ws_col;
}

int vm_tty_wait_go(int chan, int timeout_ms) {
        struct pollfd p = {.fd = chan, .events = POLLIN};
        char go;
        ssize_t n;
        int r;

        for (;;) {
                r = poll(&p, 1, timeout_ms);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        return negative_errno();
                if (r == 0)
                        return -ETIMEDOUT;
                n = recv(chan, &go, 1, MSG_DONTWAIT);
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        continue;
                return n == 1 ? 0 : -EPIPE;
        }
}
