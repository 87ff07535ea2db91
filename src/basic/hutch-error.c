/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>
#include <string.h>

#include "hutch-error.h"

_printf_(4, 0) static int hutch_error_vset(HutchError *reterr, int errnum, const char *pointer,
                                           const char *fmt, va_list ap) {
        if (reterr) {
                *reterr = (HutchError){.errnum = errnum};
                (void)vsnprintf(reterr->msg, sizeof(reterr->msg), fmt, ap);
                if (pointer)
                        (void)snprintf(reterr->pointer, sizeof(reterr->pointer), "%s", pointer);
        }
        return -errnum;
}

int hutch_error_set(HutchError *reterr, int errnum, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = hutch_error_vset(reterr, errnum, NULL, fmt, ap);
        va_end(ap);
        return r;
}

int hutch_error_set_pointer(HutchError *reterr, int errnum, const char *pointer, const char *fmt,
                            ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = hutch_error_vset(reterr, errnum, pointer, fmt, ap);
        va_end(ap);
        return r;
}
