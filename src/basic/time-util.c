/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <time.h>

#include "time-util.h"

static struct timespec now(clockid_t clock) {
        struct timespec ts;

        (void)clock_gettime(clock, &ts);
        return ts;
}

uint64_t time_monotonic_ms(void) {
        struct timespec ts = now(CLOCK_MONOTONIC);

        return (uint64_t)ts.tv_sec * 1000U + (uint64_t)ts.tv_nsec / 1000000U;
}

uint64_t time_monotonic_us(void) {
        struct timespec ts = now(CLOCK_MONOTONIC);

        return (uint64_t)ts.tv_sec * 1000000U + (uint64_t)ts.tv_nsec / 1000U;
}

uint64_t time_monotonic_ns(void) {
        struct timespec ts = now(CLOCK_MONOTONIC);

        return (uint64_t)ts.tv_sec * 1000000000U + (uint64_t)ts.tv_nsec;
}

uint64_t time_realtime_ms(void) {
        struct timespec ts = now(CLOCK_REALTIME);

        return (uint64_t)ts.tv_sec * 1000U + (uint64_t)ts.tv_nsec / 1000000U;
}
