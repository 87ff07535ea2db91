/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fd-util.h"
#include "sandbox/sync.h"

int sync_send(int sock, SyncOp op, int err, int status, const char *step, const char *msg,
              const int *fds, size_t n_fds) {
        SyncMsg m = {
                .magic = SYNC_MAGIC,
                .version_major = SYNC_VERSION_MAJOR,
                .version_minor = SYNC_VERSION_MINOR,
                .op = (uint32_t)op,
                .err = err,
                .status = status,
                .n_fds = (uint32_t)n_fds,
        };

        if (step)
                (void)snprintf(m.step, sizeof(m.step), "%s", step);
        if (msg)
                (void)snprintf(m.msg, sizeof(m.msg), "%s", msg);
        return send_with_fds(sock, &m, sizeof(m), fds, n_fds);
}

int sync_send_values(int sock, SyncOp op, const uint64_t values[3], const int *fds, size_t n_fds) {
        SyncMsg m = {
                .magic = SYNC_MAGIC,
                .version_major = SYNC_VERSION_MAJOR,
                .version_minor = SYNC_VERSION_MINOR,
                .op = (uint32_t)op,
                .values = {values[0], values[1], values[2]},
                .n_fds = (uint32_t)n_fds,
        };

        return send_with_fds(sock, &m, sizeof(m), fds, n_fds);
}

int sync_send_status(int sock, SyncOp op, int status, const uint64_t values[3], const int *fds,
                     size_t n_fds) {
        SyncMsg m = {
                .magic = SYNC_MAGIC,
                .version_major = SYNC_VERSION_MAJOR,
                .version_minor = SYNC_VERSION_MINOR,
                .op = (uint32_t)op,
                .status = status,
                .values = {values[0], values[1], values[2]},
                .n_fds = (uint32_t)n_fds,
        };

        return send_with_fds(sock, &m, sizeof(m), fds, n_fds);
}

int sync_recv(int sock, SyncMsg *ret, int *fds, size_t max_fds) {
        SyncMsg m;
        ssize_t n;

        n = recv_with_fds(sock, &m, sizeof(m), fds, max_fds);
        /* The peer closed with a message of ours unread (init failed
         * before it read SYNC_OP_CONTINUE): the kernel reports that once,
         * ahead of what the peer sent before it closed, which is still
         * queued (its SYNC_OP_ERROR). */
        if (n == -ECONNRESET)
                n = recv_with_fds(sock, &m, sizeof(m), fds, max_fds);
        if (n < 0)
                return (int)n;
        if (n == 0)
                return 0;
        if ((size_t)n != sizeof(m) || m.magic != SYNC_MAGIC ||
            m.version_major != SYNC_VERSION_MAJOR || m.op < SYNC_OP_GO || m.op >= _SYNC_OP_MAX ||
            m.n_fds > max_fds) {
                for (size_t i = 0; i < max_fds; i++)
                        fds[i] = safe_close(fds[i]);
                return -EBADMSG;
        }
        m.step[sizeof(m.step) - 1] = '\0';
        m.msg[sizeof(m.msg) - 1] = '\0';
        *ret = m;
        return 1;
}
