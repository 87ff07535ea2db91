/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <signal.h>
#include <stddef.h>

#include "signal-util.h"

void signals_reset_default(void) {
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        sigset_t none;

        for (int sig = 1; sig < NSIG; sig++)
                if (sig != SIGKILL && sig != SIGSTOP)
                        (void)sigaction(sig, &dfl, NULL);
        sigemptyset(&none);
        (void)sigprocmask(SIG_SETMASK, &none, NULL);
}
