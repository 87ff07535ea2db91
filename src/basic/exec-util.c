/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "exec-util.h"

void exec_or_exit(char **argv, char **envp) {
        extern char **environ;

        environ = envp;
        (void)execvp(argv[0], argv);
        if (errno == ENOENT) {
                (void)dprintf(STDERR_FILENO, "hutch: %s: command not found\n", argv[0]);
                _exit(127);
        }
        (void)dprintf(STDERR_FILENO, "hutch: %s: %s\n", argv[0], strerror(errno));
        _exit(126);
}
