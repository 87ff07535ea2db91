/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "log.h"

/* Written once by log_setup() before any fork or clone; read-only after. */
static const char *log_program = "hutch";
static LogLevel log_max_level = LOG_LEVEL_INFO;

void log_setup(const char *program, LogLevel max_level) {
        if (program)
                log_program = program;
        log_max_level = max_level;
}

LogLevel log_get_max_level(void) {
        return log_max_level;
}

int log_full_errno(LogLevel level, int error, const char *fmt, ...) {
        static const char *const prefix[_LOG_LEVEL_MAX] = {
                [LOG_LEVEL_ERROR] = "",
                [LOG_LEVEL_WARNING] = "warning: ",
                [LOG_LEVEL_INFO] = "",
                [LOG_LEVEL_DEBUG] = "debug: ",
        };
        char buf[4096];
        va_list ap;
        int saved = errno;

        if (level > log_max_level || level < 0)
                return error < 0 ? error : -abs(error);

        if (error != 0)
                errno = error < 0 ? -error : error;
        va_start(ap, fmt);
        (void)vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        (void)fprintf(stderr, "%s: %s%s\n", log_program, prefix[level], buf);
        errno = saved;
        return error < 0 ? error : -abs(error);
}
