/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Logging for the binaries' top levels (library code logs only at debug
 * level). Messages go to stderr prefixed with the program name, so they are
 * never mixed into a sandboxed command's stdout.
 *
 * log_*_errno(r, ...) sets errno to -r for the duration of the call, so a
 * format may use %m, and returns r (still negative) for `return log_...`. */

#include <stdarg.h>

#include "macro.h"

typedef enum LogLevel {
        LOG_LEVEL_ERROR,
        LOG_LEVEL_WARNING,
        LOG_LEVEL_INFO,
        LOG_LEVEL_DEBUG,
        _LOG_LEVEL_MAX,
        _LOG_LEVEL_INVALID = -EINVAL,
} LogLevel;

/* Sets the prefix ("hutch") and the highest level printed. Global state:
 * written once at startup by main(), before any fork. */
void log_setup(const char *program, LogLevel max_level);
LogLevel log_get_max_level(void);

int log_full_errno(LogLevel level, int error, const char *fmt, ...) _printf_(3, 4);

#define log_error(...) log_full_errno(LOG_LEVEL_ERROR, 0, __VA_ARGS__)
#define log_warning(...) log_full_errno(LOG_LEVEL_WARNING, 0, __VA_ARGS__)
#define log_info(...) log_full_errno(LOG_LEVEL_INFO, 0, __VA_ARGS__)
#define log_debug(...) log_full_errno(LOG_LEVEL_DEBUG, 0, __VA_ARGS__)
#define log_error_errno(r, ...) log_full_errno(LOG_LEVEL_ERROR, (r), __VA_ARGS__)
#define log_warning_errno(r, ...) log_full_errno(LOG_LEVEL_WARNING, (r), __VA_ARGS__)
#define log_debug_errno(r, ...) log_full_errno(LOG_LEVEL_DEBUG, (r), __VA_ARGS__)
