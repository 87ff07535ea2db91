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
#include "pty-fd.h"

int agent_pty_attach(int chan, unsigned rows, unsigned cols) {
        _cleanup_close_ int master = -EBADF, slave = -EBADF;
        struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
        int r;

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
        r = pty_fd_send(chan, master);
        if (r < 0)
                return r;
        for (int fd = 0; fd < 3; fd++)
                if (dup2(slave, fd) < 0)
                        return negative_errno();
        return 0;
}

int agent_pty_recv(int chan, int *ret_master) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        r = pty_fd_recv(chan, &fd);
        if (r < 0)
                return r;
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
