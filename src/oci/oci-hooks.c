/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch-oci: config.json's hooks, run by `create`, `start` and `delete`
 * in the runtime's namespaces and by the container's init in the
 * container's (oci.h, docs/oci.md). */

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "oci.h"

bool oci_hooks_any(json_t *hooks, const char *stage) {
        return json_array_size(json_object_get(hooks, stage)) > 0;
}

/* Runs one hook @h with @state on its stdin and waits for it. 0, -errno,
 * or -ECHILD when it failed or ran past its timeout (then it is killed by
 * its alarm). */
static int hook_run(json_t *h, const char *state) {
        const char *path = json_string_value(json_object_get(h, "path"));
        json_t *args = json_object_get(h, "args"), *env = json_object_get(h, "env"), *v;
        long long timeout = json_integer_value(json_object_get(h, "timeout"));
        _cleanup_free_ char **argv = calloc(json_array_size(args) + 2, sizeof(char *));
        _cleanup_free_ char **envp = calloc(json_array_size(env) + 1, sizeof(char *));
        int p[2], status = 0;
        size_t k;
        pid_t pid;

        if (!argv || !envp)
                return -ENOMEM;
        json_array_foreach(args, k, v) argv[k] = (char *)json_string_value(v);
        if (!argv[0])
                argv[0] = (char *)path;
        json_array_foreach(env, k, v) envp[k] = (char *)json_string_value(v);
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        (void)fflush(NULL);
        pid = fork();
        if (pid < 0) {
                (void)close(p[0]);
                (void)close(p[1]);
                return -errno;
        }
        if (pid == 0) {
                if (dup2(p[0], STDIN_FILENO) < 0)
                        _exit(127);
                /* SIGALRM's default action ends the hook: an alarm
                 * survives execve(). */
                (void)signal(SIGALRM, SIG_DFL);
                if (timeout > 0)
                        (void)alarm((unsigned)timeout);
                execve(path, argv, envp);
                _exit(127);
        }
        (void)close(p[0]);
        (void)loop_write(p[1], state, strlen(state));
        (void)close(p[1]);
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -ECHILD;
}

int oci_hooks_run(json_t *hooks, const char *stage, const char *state, char *what,
                  size_t what_size) {
        json_t *h;
        size_t i;
        int r;

        json_array_foreach(json_object_get(hooks, stage), i, h) {
                r = hook_run(h, state);
                if (r < 0) {
                        (void)snprintf(what, what_size, "%s hook %zu ('%s') failed", stage, i,
                                       json_string_value(json_object_get(h, "path")));
                        return r;
                }
        }
        return 0;
}
