/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>

#include "parse-util.h"
#include "signal-util.h"

void signals_reset_dispositions(void) {
        struct sigaction dfl = {.sa_handler = SIG_DFL};

        for (int sig = 1; sig < NSIG; sig++)
                if (sig != SIGKILL && sig != SIGSTOP)
                        (void)sigaction(sig, &dfl, NULL);
}

void signals_reset_default(void) {
        sigset_t none;

        signals_reset_dispositions();
        sigemptyset(&none);
        (void)sigprocmask(SIG_SETMASK, &none, NULL);
}

bool name_pid_is_gone(const char *name, const char *prefix) {
        size_t lp = strlen(prefix), n;
        const char *dash;
        char pidtext[16];
        int pid;

        if (strncmp(name, prefix, lp) != 0)
                return false;
        dash = strchr(name + lp, '-');
        n = dash ? (size_t)(dash - name - lp) : 0;
        if (n == 0 || n >= sizeof(pidtext))
                return false;
        memcpy(pidtext, name + lp, n);
        pidtext[n] = '\0';
        if (safe_atoi(pidtext, &pid) < 0 || pid <= 0)
                return false;
        return kill(pid, 0) < 0 && errno == ESRCH;
}
