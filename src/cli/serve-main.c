/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch-serve: `hutch serve` (serve.c) as a program of its own, started by
 * hutch, so that only it links libevent and libcrypto. */
#include "cli.h"
#include "log.h"

int main(int argc, char **argv) {
        log_setup("hutch", LOG_LEVEL_INFO);
        return verb_serve(argc, argv); /* argv[0] stands for the verb */
}
