/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What every verb of the CLI shares (hutch, hutch-archive, hutch-image).
 * Unlike the library's -errno functions, these return the process exit
 * status to hand back from a verb: 0, or HUTCH_EXIT_FAILURE (cli.h) once
 * the failure is logged. */

#include "hutch-error.h"

/* Logs @err's message (strerror(-@r) when it has none) and returns
 * HUTCH_EXIT_FAILURE. */
int cli_fail(const HutchError *err, int r);
