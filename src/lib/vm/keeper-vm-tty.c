/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The host side of a VM exec's terminal (keeper-vm-tty.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
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

/* How long vm_tty_watch_start() waits for its helper to hold the pty. */
#define VM_TTY_WATCH_READY_MS 5000

/* The helper: a session of its own with the pty as its controlling
 * terminal (so the kernel's SIGWINCH of each resize reaches it), one byte
 * on @out per signal. Never returns. */
_noreturn_ static void watch_child(pid_t parent, int slave, int out) {
        sigset_t mask;
        int sig;

        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
                _exit(1);
        (void)prctl(PR_SET_NAME, "hutch-winch", 0, 0, 0);
        sigemptyset(&mask);
        sigaddset(&mask, SIGWINCH);
        if (sigprocmask(SIG_SETMASK, &mask, NULL) < 0)
                _exit(1);
        /* The pty's hangup (its master closed) ends it; a parent that
         * stopped reading (EPIPE) too. */
        (void)signal(SIGHUP, SIG_DFL);
        (void)signal(SIGPIPE, SIG_DFL);
        if (setsid() < 0 || ioctl(slave, TIOCSCTTY, 0) < 0)
                _exit(1);
        /* Nothing of the parent's stays open, the pty's slave included. */
        if (dup3(out, 3, O_CLOEXEC) < 0)
                _exit(1);
        (void)close_range(0, 2, 0);
        (void)close_range(4, ~0U, 0);
        /* A full pipe loses nothing: one byte waiting is news enough. */
        if (fcntl(3, F_SETFL, O_NONBLOCK) < 0)
                _exit(1);
        if (write(3, "r", 1) != 1)
                _exit(1);
        for (;;)
                if (sigwait(&mask, &sig) == 0 && write(3, "w", 1) < 0 && errno != EAGAIN)
                        _exit(0);
}

int vm_tty_watch_start(VmTtyWatch *w, int slave) {
        _cleanup_close_ int rd = -EBADF, wr = -EBADF;
        struct pollfd p;
        pid_t parent = getpid(), pid;
        int fds[2];
        char c = 0;

        if (pipe2(fds, O_CLOEXEC) < 0)
                return negative_errno();
        rd = fds[0];
        wr = fds[1];
        pid = fork();
        if (pid < 0)
                return negative_errno();
        if (pid == 0) {
                /* Out of the way of dup3()'s 3. */
                int out = fcntl(wr, F_DUPFD_CLOEXEC, 10), s = fcntl(slave, F_DUPFD_CLOEXEC, 10);

                if (out < 0 || s < 0)
                        _exit(1);
                watch_child(parent, s, out);
        }
        wr = safe_close(wr);
        p = (struct pollfd){.fd = rd, .events = POLLIN};
        if (poll(&p, 1, VM_TTY_WATCH_READY_MS) != 1 || read(rd, &c, 1) != 1 || c != 'r') {
                (void)kill(pid, SIGKILL);
                (void)waitpid(pid, NULL, 0);
                return -EIO;
        }
        if (fcntl(rd, F_SETFL, O_NONBLOCK) < 0) {
                (void)kill(pid, SIGKILL);
                (void)waitpid(pid, NULL, 0);
                return negative_errno();
        }
        *w = (VmTtyWatch){.pid = pid, .fd = TAKE_FD(rd)};
        return 0;
}

bool vm_tty_watch_drain(VmTtyWatch *w) {
        char buf[64];
        bool any = false;
        ssize_t n;

        if (w->fd < 0)
                return false;
        while ((n = read(w->fd, buf, sizeof(buf))) > 0)
                any = true;
        /* The helper is gone (the pty hung up): no more to come. */
        if (n == 0)
                w->fd = safe_close(w->fd);
        return any;
}

void vm_tty_watch_stop(VmTtyWatch *w) {
        if (w->pid > 0) {
                (void)kill(w->pid, SIGKILL);
                (void)waitpid(w->pid, NULL, 0);
                w->pid = 0;
        }
        w->fd = safe_close(w->fd);
}
