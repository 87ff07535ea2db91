/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch-ext.h's pty hand-over for the CLI's terminal relay. */
#include "api/hutch-ext.h"
#include "pty-fd.h"
#include "sandbox/pty.h"

int hutch_ext_pty_recv(int chan, int *ret_master) {
        return pty_fd_recv(chan, ret_master);
}

int hutch_ext_pty_go(int chan) {
        return pty_send_go(chan);
}
