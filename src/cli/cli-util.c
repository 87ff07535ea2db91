/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <string.h>

#include "cli-util.h"
#include "cli.h"
#include "log.h"

int cli_fail(const HutchError *err, int r) {
        log_error("%s", err && err->msg[0] ? err->msg : strerror(-r));
        return HUTCH_EXIT_FAILURE;
}
