/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What the two parts of hutch-agent share: agent.c (the boot, the port and
 * the commands) and agent-setup.c (SETUP: the command's root). Private to
 * src/guest. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "macro.h"

/* The command's root. */
#define SBX "/sbx"

/* What SETUP said (agent-protocol.h's keys), with their defaults. */
typedef struct Setup {
        uid_t uid;
        gid_t gid;
        uint64_t memory, pids;
        uint64_t size_tmp, size_home, size_shm, size_workspace;
        bool net, read_only, done;
} Setup;

extern Setup setup;

/* Why a step failed, as an ERROR frame says it. */
typedef struct Fail {
        int err;
        char step[128];
        char msg[512];
} Fail;

/* Fills @f (@err, positive; EIO when it is not) and returns -@err. */
int fail(Fail *f, int err, const char *step, const char *detail);

/* Says why the agent gives up on the console (the host shows its last
 * lines) and ends the VM: PID 1 exiting panics the kernel. */
_noreturn_ void die(const char *what, int err);

void sleep_ms(long ms);

/* SETUP's payload: builds the command's root under SBX. 0, or -errno with
 * @f. */
int do_setup(const void *payload, size_t len, Fail *f);
