/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Clock readings. Monotonic ones measure durations and deadlines (never
 * step back, not affected by setting the clock); realtime ones are
 * timestamps a person or a record reads (milliseconds since the epoch).
 * clock_gettime() of these clocks cannot fail, so neither can these. */

#include <stdint.h>

/* CLOCK_MONOTONIC in milliseconds. */
uint64_t time_monotonic_ms(void);

/* CLOCK_MONOTONIC in microseconds. */
uint64_t time_monotonic_us(void);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t time_monotonic_ns(void);

/* CLOCK_REALTIME in milliseconds since the epoch. */
uint64_t time_realtime_ms(void);
