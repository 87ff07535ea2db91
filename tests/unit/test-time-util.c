/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <time.h>

#include "test.h"
#include "time-util.h"

/* The monotonic readings never go back, and ms and us read one clock. */
TEST(monotonic_is_one_clock_that_never_goes_back) {
        uint64_t ms0, us, ms1;

        ms0 = time_monotonic_ms();
        us = time_monotonic_us();
        ms1 = time_monotonic_ms();
        ASSERT_TRUE(ms0 <= us / 1000);
        ASSERT_TRUE(us / 1000 <= ms1);
}

/* A sleep of 20 ms moves the monotonic clock by at least that much (a
 * lower bound only: the clock cannot run slow). */
TEST(monotonic_ns_is_the_same_clock) {
        uint64_t us, ns, us1;

        us = time_monotonic_us();
        ns = time_monotonic_ns();
        us1 = time_monotonic_us();
        ASSERT_TRUE(us <= ns / 1000);
        ASSERT_TRUE(ns / 1000 <= us1);
}

TEST(monotonic_advances_over_a_sleep) {
        struct timespec d = {.tv_nsec = 20 * 1000 * 1000};
        uint64_t ms0, us0;

        ms0 = time_monotonic_ms();
        us0 = time_monotonic_us();
        while (nanosleep(&d, &d) < 0)
                ;
        ASSERT_TRUE(time_monotonic_ms() >= ms0 + 20);
        ASSERT_TRUE(time_monotonic_us() >= us0 + 20000);
}

/* The realtime reading is time(2)'s clock in ms; the monotonic one is
 * not (it counts from boot, not from the epoch). */
TEST(realtime_is_the_epoch_clock) {
        time_t t0, t1;
        uint64_t ms;

        t0 = time(NULL);
        ms = time_realtime_ms();
        t1 = time(NULL);
        ASSERT_TRUE(ms >= (uint64_t)t0 * 1000);
        ASSERT_TRUE(ms < ((uint64_t)t1 + 1) * 1000);
        ASSERT_FALSE(time_monotonic_ms() >= (uint64_t)t0 * 1000);
}

DEFINE_TEST_MAIN
