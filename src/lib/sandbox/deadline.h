/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* When a command's time is up (docs/architecture.md "The backend seam"):
 * its --timeout, and the grace of a "kill" (exec-table.h) after which it
 * gets SIGKILL. One path for both backends and both drivers: the one-shot
 * run (supervise.c, vm-run.c) and the keeper (keeper.c, keeper-vm.c) ask
 * these functions, and each backend then ends the command with its own
 * one kill function (ns_command_kill() in supervise.h,
 * vm_session_kill() in vm-session.h). Times are time_monotonic_ms(). */

#include <stdbool.h>
#include <stdint.h>

typedef struct CommandDeadline {
        uint64_t timeout_end_ms; /* the --timeout ends then, or 0: none */
        uint64_t grace_end_ms;   /* a "kill"'s grace ends then, or 0 */
        bool timed_out;          /* the --timeout ended it */
        bool killed;             /* a kill ended it (its grace, SIGKILL, its client gone) */
} CommandDeadline;

typedef enum CommandDue {
        COMMAND_DUE_NONE,
        COMMAND_DUE_TIMEOUT, /* its --timeout is over: timed_out is set */
        COMMAND_DUE_KILL,    /* a kill's grace is over: killed is set */
} CommandDue;

/* The command started at @now with @timeout_ms (0: none). */
void command_deadline_start(CommandDeadline *d, uint64_t now, uint64_t timeout_ms);

/* A kill's grace of @grace_ms from @now (0: none). */
void command_deadline_grace(CommandDeadline *d, uint64_t now, uint64_t grace_ms);

/* The command's clock stood still for @by ms (its sandbox was paused,
 * frozen: issue 20): what is not due yet, its --timeout and a kill's
 * grace, moves @by later, so frozen time does not count. */
void command_deadline_shift(CommandDeadline *d, uint64_t by);

/* The earliest time something is due, or UINT64_MAX. A command that
 * @exited (its output may still be on its way) has no --timeout left. */
uint64_t command_deadline_next(const CommandDeadline *d, bool exited);

/* What is due at @now, each at most once: the --timeout first. The caller
 * kills the command when it is not COMMAND_DUE_NONE (and asks again: both
 * may be due). A command that @exited is neither timed out nor killed. */
CommandDue command_deadline_check(CommandDeadline *d, uint64_t now, bool exited);

/* The poll() timeout until @next (UINT64_MAX: -1, none), at most a
 * minute. */
int command_deadline_poll_timeout(uint64_t next, uint64_t now);
