/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdint.h>

#include "sandbox/deadline.h"
#include "test.h"

/* A --timeout is due once, at its end and not before; then it is over. */
TEST(timeout_is_due_once_at_its_end) {
        CommandDeadline d = {};

        command_deadline_start(&d, 1000, 500);
        ASSERT_EQ(command_deadline_next(&d, false), (uint64_t)1500);
        ASSERT_EQ(command_deadline_check(&d, 1499, false), COMMAND_DUE_NONE);
        ASSERT_FALSE(d.timed_out);
        ASSERT_EQ(command_deadline_check(&d, 1500, false), COMMAND_DUE_TIMEOUT);
        ASSERT_TRUE(d.timed_out);
        ASSERT_FALSE(d.killed);
        ASSERT_EQ(command_deadline_check(&d, 9999, false), COMMAND_DUE_NONE);
        ASSERT_EQ(command_deadline_next(&d, false), UINT64_MAX);
}

/* Without a --timeout nothing is ever due. */
TEST(no_timeout_is_never_due) {
        CommandDeadline d = {};

        command_deadline_start(&d, 1000, 0);
        ASSERT_EQ(command_deadline_next(&d, false), UINT64_MAX);
        ASSERT_EQ(command_deadline_check(&d, UINT64_MAX - 1, false), COMMAND_DUE_NONE);
        ASSERT_FALSE(d.timed_out);
}

/* A command that exited before its --timeout (its output still on its
 * way) did not time out. */
TEST(exited_command_does_not_time_out) {
        CommandDeadline d = {};

        command_deadline_start(&d, 0, 10);
        ASSERT_EQ(command_deadline_next(&d, true), UINT64_MAX);
        ASSERT_EQ(command_deadline_check(&d, 100, true), COMMAND_DUE_NONE);
        ASSERT_FALSE(d.timed_out);
}

/* A kill's grace ends in a kill, once; one that ended within its grace is
 * not killed. */
TEST(grace_ends_in_one_kill) {
        CommandDeadline d = {}, e = {};

        command_deadline_grace(&d, 100, 50);
        ASSERT_EQ(command_deadline_next(&d, false), (uint64_t)150);
        ASSERT_EQ(command_deadline_check(&d, 149, false), COMMAND_DUE_NONE);
        ASSERT_EQ(command_deadline_check(&d, 150, false), COMMAND_DUE_KILL);
        ASSERT_TRUE(d.killed);
        ASSERT_EQ(command_deadline_check(&d, 151, false), COMMAND_DUE_NONE);
        ASSERT_EQ(command_deadline_next(&d, false), UINT64_MAX);

        command_deadline_grace(&e, 100, 50);
        ASSERT_EQ(command_deadline_check(&e, 200, true), COMMAND_DUE_NONE);
        ASSERT_FALSE(e.killed);
        ASSERT_EQ(command_deadline_next(&e, true), UINT64_MAX);
}

/* Both due at once: the --timeout first, then the kill, each once. */
TEST(both_due_are_told_in_turn) {
        CommandDeadline d = {};

        command_deadline_start(&d, 0, 10);
        command_deadline_grace(&d, 0, 5);
        ASSERT_EQ(command_deadline_next(&d, false), (uint64_t)5);
        ASSERT_EQ(command_deadline_check(&d, 20, false), COMMAND_DUE_TIMEOUT);
        ASSERT_EQ(command_deadline_check(&d, 20, false), COMMAND_DUE_KILL);
        ASSERT_EQ(command_deadline_check(&d, 20, false), COMMAND_DUE_NONE);
        ASSERT_TRUE(d.timed_out && d.killed);
}

/* The poll timeout: -1 for none, 0 when due, capped at a minute. */
TEST(poll_timeout) {
        ASSERT_EQ(command_deadline_poll_timeout(UINT64_MAX, 5), -1);
        ASSERT_EQ(command_deadline_poll_timeout(5, 5), 0);
        ASSERT_EQ(command_deadline_poll_timeout(4, 5), 0);
        ASSERT_EQ(command_deadline_poll_timeout(105, 5), 100);
        ASSERT_EQ(command_deadline_poll_timeout(10000000, 5), 60000);
}

DEFINE_TEST_MAIN

/* A pause moves what is not due yet by the paused time: the --timeout
 * counts running time only; one already over stays over. */
TEST(shift_moves_what_is_not_due_yet) {
        CommandDeadline d = {};

        command_deadline_start(&d, 1000, 500);
        command_deadline_shift(&d, 60000);
        ASSERT_EQ(command_deadline_next(&d, false), (uint64_t)61500);
        ASSERT_EQ(command_deadline_check(&d, 61499, false), COMMAND_DUE_NONE);
        ASSERT_EQ(command_deadline_check(&d, 61500, false), COMMAND_DUE_TIMEOUT);
        command_deadline_shift(&d, 1000);
        ASSERT_EQ(command_deadline_next(&d, false), UINT64_MAX);
        command_deadline_grace(&d, 2000, 100);
        command_deadline_shift(&d, 50);
        ASSERT_EQ(command_deadline_check(&d, 2149, false), COMMAND_DUE_NONE);
        ASSERT_EQ(command_deadline_check(&d, 2150, false), COMMAND_DUE_KILL);
}

/* Without a --timeout a shift makes none; a shift never wraps. */
TEST(shift_makes_no_timeout_and_saturates) {
        CommandDeadline d = {};

        command_deadline_start(&d, 1000, 0);
        command_deadline_shift(&d, 5000);
        ASSERT_EQ(command_deadline_next(&d, false), UINT64_MAX);
        command_deadline_start(&d, 1000, 500);
        command_deadline_shift(&d, UINT64_MAX - 10);
        ASSERT_EQ(command_deadline_next(&d, false), UINT64_MAX);
}
