/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "sandbox/deadline.h"
#include "macro.h"

void command_deadline_start(CommandDeadline *d, uint64_t now, uint64_t timeout_ms) {
        d->timeout_end_ms = timeout_ms ? MAX(now + timeout_ms, 1U) : 0;
}

void command_deadline_grace(CommandDeadline *d, uint64_t now, uint64_t grace_ms) {
        if (grace_ms > 0)
                d->grace_end_ms = MAX(now + grace_ms, 1U);
}

void command_deadline_shift(CommandDeadline *d, uint64_t by) {
        if (d->timeout_end_ms && !d->timed_out)
                d->timeout_end_ms =
                        d->timeout_end_ms > UINT64_MAX - by ? UINT64_MAX : d->timeout_end_ms + by;
        if (d->grace_end_ms)
                d->grace_end_ms =
                        d->grace_end_ms > UINT64_MAX - by ? UINT64_MAX : d->grace_end_ms + by;
}

uint64_t command_deadline_next(const CommandDeadline *d, bool exited) {
        uint64_t next = UINT64_MAX;

        if (d->timeout_end_ms && !d->timed_out && !exited)
                next = d->timeout_end_ms;
        if (d->grace_end_ms)
                next = MIN(next, d->grace_end_ms);
        return next;
}

CommandDue command_deadline_check(CommandDeadline *d, uint64_t now, bool exited) {
        if (d->timeout_end_ms && !d->timed_out && !exited && now >= d->timeout_end_ms) {
                d->timed_out = true;
                return COMMAND_DUE_TIMEOUT;
        }
        if (d->grace_end_ms && now >= d->grace_end_ms) {
                d->grace_end_ms = 0;
                /* It ended within its grace. */
                if (exited)
                        return COMMAND_DUE_NONE;
                d->killed = true;
                return COMMAND_DUE_KILL;
        }
        return COMMAND_DUE_NONE;
}

int command_deadline_poll_timeout(uint64_t next, uint64_t now) {
        if (next == UINT64_MAX)
                return -1;
        return next <= now ? 0 : (int)MIN(next - now, (uint64_t)60000);
}
