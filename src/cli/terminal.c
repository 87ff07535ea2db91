/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api/hutch-ext.h"
#include "fd-util.h"
#include "macro.h"
#include "terminal.h"

/* How long terminal_relay_finish() lets the relay copy what the command
 * wrote last once the command has ended (its pty closes then; this only
 * bounds a pty that something else inside still holds). */
#define RELAY_DRAIN_MS 2000
#define RELAY_BUF 16384

static void relay_resize(int tty_fd, int master) {
        struct winsize ws;

        if (ioctl(tty_fd, TIOCGWINSZ, &ws) == 0)
                (void)ioctl(master, TIOCSWINSZ, &ws);
}

static void relay_restore(const TerminalRelay *t) {
        if (t->raw)
                (void)tcsetattr(t->tty_fd, TCSADRAIN, &t->saved);
}

/* The relay process: gets the master, sets its size, lets the command go,
 * then copies until the command's end. Input waits in @in while the master
 * is full, so output keeps flowing whatever the command reads.
 *
 * The master stays open until hutch says the exec is over (SIGUSR1, from
 * terminal_relay_finish()), also once the pty reported its other side
 * closed: closing it hangs the pty up, and a command that closed its
 * stdio before it exits (GNU cat does) would die of that SIGHUP. */
_noreturn_ static void relay_main(const TerminalRelay *t, int chan, bool interactive) {
        _cleanup_close_ int master = -EBADF, sigfd = -EBADF;
        char out[RELAY_BUF], in[RELAY_BUF];
        size_t in_len = 0, in_off = 0;
        bool in_open = interactive, master_open = true, ending = false;
        sigset_t mask;
        int r;

        sigemptyset(&mask);
        sigaddset(&mask, SIGWINCH);
        sigaddset(&mask, SIGHUP);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGUSR1);
        (void)sigprocmask(SIG_SETMASK, &mask, NULL);
        /* Ctrl-C without raw mode is hutch's to forward, not ours to die of. */
        (void)signal(SIGINT, SIG_IGN);
        (void)signal(SIGQUIT, SIG_IGN);
        (void)signal(SIGPIPE, SIG_IGN);
        sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        /* hutch killed: the terminal is still restored. */
        (void)prctl(PR_SET_PDEATHSIG, SIGHUP, 0, 0, 0);
        if (getppid() == 1 || sigfd < 0) {
                relay_restore(t);
                _exit(1);
        }

        for (;;) {
                struct pollfd pfd[2] = {{.fd = chan, .events = POLLIN},
                                        {.fd = sigfd, .events = POLLIN}};

                if (poll(pfd, 2, -1) < 0 && errno != EINTR)
                        _exit(1);
                if (pfd[1].revents) {
                        struct signalfd_siginfo si;

                        while (read(sigfd, &si, sizeof(si)) == sizeof(si)) {
                                if (si.ssi_signo == SIGUSR1)
                                        _exit(0); /* the command never started */
                                if (si.ssi_signo != SIGWINCH) {
                                        relay_restore(t);
                                        _exit(1);
                                }
                        }
                }
                if (pfd[0].revents)
                        break;
        }
        r = hutch_ext_pty_recv(chan, &master);
        if (r < 0)
                _exit(r == -EPIPE ? 0 : 1);
        /* Ours alone now (the inside closed its copy): never block on it. */
        if (fcntl(master, F_SETFL, O_RDWR | O_NONBLOCK) < 0)
                _exit(1);
        relay_resize(t->tty_fd, master);
        if (hutch_ext_pty_go(chan) < 0)
                _exit(0);

        for (;;) {
                struct pollfd pfd[3] = {
                        {.fd = master_open ? master : -1,
                         .events = POLLIN | (in_len > in_off ? POLLOUT : 0)},
                        {.fd = sigfd, .events = POLLIN},
                        {.fd = master_open && in_open && in_len == in_off ? STDIN_FILENO : -1,
                         .events = POLLIN},
                };
                ssize_t n;

                if (!master_open && ending)
                        break;
                if (poll(pfd, 3, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                if (pfd[1].revents) {
                        struct signalfd_siginfo si;

                        while (read(sigfd, &si, sizeof(si)) == sizeof(si)) {
                                if (si.ssi_signo == SIGWINCH)
                                        relay_resize(t->tty_fd, master);
                                else if (si.ssi_signo == SIGUSR1)
                                        ending = true;
                                else {
                                        relay_restore(t);
                                        _exit(1);
                                }
                        }
                }
                if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
                        n = read(master, out, sizeof(out));
                        if (n > 0 && loop_write(STDOUT_FILENO, out, (size_t)n) < 0)
                                break;
                        /* EIO: every slave descriptor is closed (the
                         * command's end, or a command that closed its
                         * stdio): output is over, the master stays. */
                        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
                                master_open = false;
                }
                if ((pfd[0].revents & POLLOUT) && in_len > in_off) {
                        n = write(master, in + in_off, in_len - in_off);
                        if (n > 0)
                                in_off += (size_t)n;
                        else if (n < 0 && errno != EINTR && errno != EAGAIN)
                                in_len = in_off = 0;
                }
                if (pfd[2].revents) {
                        n = read(STDIN_FILENO, in, sizeof(in));
                        if (n > 0) {
                                in_len = (size_t)n;
                                in_off = 0;
                        } else if (n == 0 || (errno != EINTR && errno != EAGAIN))
                                in_open = false;
                }
        }
        _exit(0);
}

int terminal_relay_start(TerminalRelay *t, bool interactive) {
        int pair[2];
        pid_t pid;

        *t = TERMINAL_RELAY_NULL;
        if (!isatty(STDIN_FILENO))
                return -ENOTTY;
        t->tty_fd = STDIN_FILENO;
        if (tcgetattr(t->tty_fd, &t->saved) < 0)
                return negative_errno();
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
                return negative_errno();
        /* Raw before the fork: the relay restores the same modes if hutch
         * dies. */
        if (interactive) {
                struct termios raw = t->saved;

                cfmakeraw(&raw);
                if (tcsetattr(t->tty_fd, TCSADRAIN, &raw) < 0) {
                        int r = negative_errno();

                        (void)close(pair[0]);
                        (void)close(pair[1]);
                        return r;
                }
                t->raw = true;
        }
        pid = fork();
        if (pid < 0) {
                int r = negative_errno();

                relay_restore(t);
                t->raw = false;
                (void)close(pair[0]);
                (void)close(pair[1]);
                return r;
        }
        if (pid == 0) {
                (void)close(pair[0]);
                relay_main(t, pair[1], interactive);
        }
        (void)close(pair[1]);
        t->pid = pid;
        t->chan = pair[0];
        return 0;
}

void terminal_relay_close_chan(TerminalRelay *t) {
        t->chan = safe_close(t->chan);
}

void terminal_relay_finish(TerminalRelay *t) {
        terminal_relay_close_chan(t);
        if (t->pid > 0) {
                /* The exec is over: the relay copies what is left, then
                 * ends. */
                (void)kill(t->pid, SIGUSR1);
                _cleanup_close_ int pidfd = pidfd_open(t->pid, 0);
                struct pollfd pfd = {.fd = pidfd, .events = POLLIN};

                if (pidfd < 0 || poll(&pfd, 1, RELAY_DRAIN_MS) <= 0)
                        (void)kill(t->pid, SIGKILL);
                while (waitpid(t->pid, NULL, 0) < 0 && errno == EINTR)
                        ;
                t->pid = 0;
        }
        relay_restore(t);
        t->raw = false;
}
