/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Outcome: the typed result of one command in a sandbox (docs/architecture.md §7),
 * printed with --json. Plain data except for the denied list, which
 * outcome_done() frees. */

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "macro.h"

typedef enum OutcomeReason {
        OUTCOME_EXITED,   /* the command exited; exit_code is its status */
        OUTCOME_SIGNALED, /* killed by a signal it did not get from hutch */
        OUTCOME_TIMEOUT,  /* wall-clock timeout */
        OUTCOME_OOM,      /* memory limit */
        OUTCOME_PIDS,     /* a fork failed against the pids limit */
        OUTCOME_KILLED,   /* hutch killed it (stop, signal to hutch) */
        _OUTCOME_REASON_MAX,
        _OUTCOME_REASON_INVALID = -EINVAL,
} OutcomeReason;

const char *outcome_reason_to_string(OutcomeReason r);
OutcomeReason outcome_reason_from_string(const char *s);

/* A wall the namespace backend built a weaker way, because the container
 * hutch runs in refused the usual one (docs/containers.md). */
typedef enum OutcomeFallback {
        OUTCOME_FALLBACK_PIVOT_ROOT, /* "pivot_root": root entered by move-mount + chroot */
        OUTCOME_FALLBACK_PROCFS,     /* "procfs": the container's /proc, bound read-only */
        _OUTCOME_FALLBACK_MAX,
        _OUTCOME_FALLBACK_INVALID = -EINVAL,
} OutcomeFallback;

/* "pivot_root", "procfs"; NULL for an out-of-range value. */
const char *outcome_fallback_to_string(OutcomeFallback f);
/* The inverse; _OUTCOME_FALLBACK_INVALID for an unknown or NULL string. */
OutcomeFallback outcome_fallback_from_string(const char *s);

typedef struct Outcome {
        OutcomeReason reason;
        int exit_code; /* shell convention: status, or 128+signal */
        int signal;    /* the terminating signal, 0 if none (null in JSON) */
        uint64_t wall_ms;
        uint64_t cpu_ms;
        uint64_t mem_peak_bytes;
        bool stdout_truncated;
        bool stderr_truncated;
        unsigned degraded;  /* 1 << PolicyLimit of limits no cgroup enforced */
        unsigned fallbacks; /* 1 << OutcomeFallback of walls built the weaker way */
        char *denied;       /* JSON array of the proxy's denials, or NULL for []; owned */
} Outcome;

/* Frees what @o owns (denied). */
void outcome_done(Outcome *o);

/* Formats @o as one JSON object (no trailing newline) into a malloc'd
 * string: {exit_code, signal (null when none), reason, wall_ms, cpu_ms,
 * mem_peak_bytes, stdout_truncated, stderr_truncated, denied, degraded
 * (the names of the limits no cgroup enforced, then of the fallbacks
 * taken)}. Returns 0 or -ENOMEM. */
int outcome_to_json(const Outcome *o, char **ret);
