/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch-ext.h's streaming exec door (issue 16): one exec through a
 * sandbox's keeper (sandbox/keeper.h's client side) with its stdio pipes
 * or its pty channel (sandbox/pty.h), for the front ends that relay it
 * themselves (serve-ws.c, e2b-envd-process.c; docs/architecture.md §6). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include "api/hutch-ext.h"
#include "api/persist.h"
#include "fd-util.h"
#include "pty-fd.h"
#include "sandbox/keeper.h"
#include "sandbox/pty.h"
#include "store/store.h"

struct HutchExtStream {
        int sock;   /* the keeper connection: closing it kills the command */
        int in_fd;  /* stdin's write end, or -EBADF */
        int out[2]; /* stdout's, stderr's read ends, or -EBADF */
        int chan;   /* tty: the pty channel until the master came */
};

HutchExtStream *hutch_ext_exec_stream_close(HutchExtStream *s) {
        if (!s)
                return NULL;
        safe_close(s->chan);
        safe_close(s->in_fd);
        safe_close(s->out[0]);
        safe_close(s->out[1]);
        /* SECURITY: before the outcome, this kills the command and
         * everything it started (the keeper's side of the connection). */
        safe_close(s->sock);
        free(s);
        return NULL;
}

/* The command's ends of the stdio pipes in @fds (stdin's read end or
 * /dev/null, stdout's and stderr's write ends: blocking, as a command
 * expects them), ours in @s (non-blocking). */
static int stream_pipes(HutchExtStream *s, bool stdin_pipe, int fds[3], HutchError *reterr) {
        int p[2];

        if (stdin_pipe) {
                if (pipe2(p, O_CLOEXEC) < 0)
                        return hutch_error_set(reterr, errno, "pipe: %m");
                fds[0] = p[0];
                s->in_fd = p[1];
                /* Its writer must not block on a command that does not
                 * read (the output would stop being drained). */
                if (fcntl(s->in_fd, F_SETFL, O_WRONLY | O_NONBLOCK) < 0)
                        return hutch_error_set(reterr, errno, "fcntl: %m");
        } else {
                fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (fds[0] < 0)
                        return hutch_error_set(reterr, errno, "cannot open /dev/null: %m");
        }
        for (size_t i = 0; i < 2; i++) {
                if (pipe2(p, O_CLOEXEC) < 0)
                        return hutch_error_set(reterr, errno, "pipe: %m");
                s->out[i] = p[0];
                fds[1 + i] = p[1];
                if (fcntl(s->out[i], F_SETFL, O_NONBLOCK) < 0)
                        return hutch_error_set(reterr, errno, "fcntl: %m");
        }
        return 0;
}

int hutch_ext_exec_stream_open(const char *name, const HutchExtStreamOpts *o, HutchExtStream **ret,
                               HutchError *reterr) {
        _cleanup_(hutch_ext_exec_stream_closep) HutchExtStream *s = NULL;
        _cleanup_(store_freep) Store *store = NULL;
        int fds[3] = {-EBADF, -EBADF, -EBADF};
        KeeperExec req;
        int r;

        if (!name || !o || !ret || !o->argv || !o->argv[0])
                return hutch_error_set(reterr, EINVAL, "an exec needs a sandbox and a command");
        s = malloc(sizeof(HutchExtStream));
        if (!s)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        *s = (HutchExtStream){
                .sock = -EBADF, .in_fd = -EBADF, .out = {-EBADF, -EBADF}, .chan = -EBADF};
        r = store_open(&store, reterr);
        if (r < 0)
                return r;
        r = persist_connect(store, name, true, &s->sock, reterr);
        if (r < 0)
                return r;
        if (o->tty) {
                int p[2];

                if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p) < 0)
                        return hutch_error_set(reterr, errno, "socketpair: %m");
                s->chan = p[0];
                /* One channel is the command's stdin, stdout and stderr. */
                fds[0] = fds[1] = fds[2] = p[1];
        } else {
                r = stream_pipes(s, o->stdin_pipe, fds, reterr);
        }
        if (r >= 0) {
                req = (KeeperExec){
                        .argv = o->argv,
                        .env = o->env,
                        .cwd = o->cwd,
                        .timeout_ms = o->timeout_ms,
                        .tty = o->tty,
                        .fds = {fds[0], fds[1], fds[2]},
                        .user = o->user,
                };
                r = keeper_exec_send(s->sock, &req, reterr);
        }
        /* The command's ends went with the request (or are not needed). */
        for (size_t i = 0; i < 3; i++)
                if (fds[i] >= 0 && (i == 0 || fds[i] != fds[i - 1]))
                        (void)close(fds[i]);
        if (r < 0)
                return r;
        if (o->nonblock && fcntl(s->sock, F_SETFL, O_NONBLOCK) < 0)
                return hutch_error_set(reterr, errno, "fcntl: %m");
        *ret = TAKE_PTR(s);
        return 0;
}

int hutch_ext_exec_stream_fd(const HutchExtStream *s) {
        return s->sock;
}

void hutch_ext_exec_stream_take_stdio(HutchExtStream *s, int *ret_in, int *ret_out, int *ret_err) {
        if (ret_in)
                *ret_in = TAKE_FD(s->in_fd);
        if (ret_out)
                *ret_out = TAKE_FD(s->out[0]);
        if (ret_err)
                *ret_err = TAKE_FD(s->out[1]);
}

int hutch_ext_exec_stream_pty_fd(const HutchExtStream *s) {
        return s->chan;
}

int hutch_ext_exec_stream_pty(HutchExtStream *s, uint16_t cols, uint16_t rows, int *ret_master) {
        _cleanup_close_ int master = -EBADF;
        int r;

        if (s->chan < 0)
                return -EBADF;
        r = pty_fd_recv(s->chan, &master);
        if (r >= 0 && cols && rows)
                r = hutch_ext_exec_stream_resize(master, cols, rows);
        if (r >= 0)
                r = pty_send_go(s->chan);
        if (r >= 0 && fcntl(master, F_SETFL, O_RDWR | O_NONBLOCK) < 0)
                r = -errno;
        s->chan = safe_close(s->chan);
        if (r < 0)
                return r;
        *ret_master = TAKE_FD(master);
        return 0;
}

void hutch_ext_exec_stream_pty_abandon(HutchExtStream *s) {
        if (s)
                s->chan = safe_close(s->chan);
}

int hutch_ext_exec_stream_resize(int master, uint16_t cols, uint16_t rows) {
        struct winsize w = {.ws_row = rows, .ws_col = cols};

        if (ioctl(master, TIOCSWINSZ, &w) < 0)
                return -errno;
        return 0;
}

int hutch_ext_exec_stream_answer(HutchExtStream *s, uint64_t *ret_id, int *ret_exit_code,
                                 char **ret_json, HutchError *reterr) {
        return hutch_ext_exec_answer(s->sock, ret_id, ret_exit_code, ret_json, reterr);
}

int hutch_ext_exec_stream_signal(HutchExtStream *s, int sig) {
        return keeper_exec_signal(s->sock, sig);
}
