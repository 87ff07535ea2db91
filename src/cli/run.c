/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "fd-util.h"
#include "log.h"
#include "run-flags.h"
#include "sandbox/sandbox.h"

static int write_outcome(int fd, const Outcome *o) {
        _cleanup_free_ char *json = NULL;
        int r;

        r = outcome_to_json(o, &json);
        if (r < 0)
                return r;
        r = loop_write(fd, json, strlen(json));
        if (r < 0)
                return r;
        return loop_write(fd, "\n", 1);
}

int verb_run(int argc, char **argv) {
        extern char **environ;
        _cleanup_(run_args_done) RunArgs args = {.json_fd = -EBADF};
        _cleanup_close_ int json_fd = -EBADF;
        HutchError err = {};
        Outcome o = {};
        int r;

        r = run_args_parse(argc, argv, &args, &err);
        if (r < 0) {
                log_error("%s", err.msg[0] ? err.msg : strerror(-r));
                return HUTCH_EXIT_FAILURE;
        }
        if (args.help) {
                run_args_usage(stdout);
                return 0;
        }

        /* Open the outcome file before anything runs: a bad path is a
         * failure of hutch, reported before the command starts. */
        if (args.json_path) {
                json_fd = open(args.json_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY,
                               0644);
                if (json_fd < 0) {
                        log_error("failed to open the --json file '%s': %m", args.json_path);
                        return HUTCH_EXIT_FAILURE;
                }
        } else if (args.json_fd >= 0) {
                json_fd = fcntl(args.json_fd, F_DUPFD_CLOEXEC, 3);
                if (json_fd < 0) {
                        log_error("failed to use --json-fd %d: %m", args.json_fd);
                        return HUTCH_EXIT_FAILURE;
                }
        }

        if (args.policy->workspace && args.policy->workspace_mode == WORKSPACE_MODE_MOUNT &&
            !args.policy->read_only)
                log_warning("workspace '%s' is mounted read-write: changes inside are live on "
                            "the host",
                            args.policy->workspace);

        r = sandbox_run(args.policy, args.command, environ, &o, &err);
        if (r < 0) {
                log_error("%s", err.msg[0] ? err.msg : strerror(-r));
                return HUTCH_EXIT_FAILURE;
        }

        if (json_fd >= 0) {
                r = write_outcome(json_fd, &o);
                if (r < 0) {
                        log_error_errno(r, "failed to write the outcome: %m");
                        return HUTCH_EXIT_FAILURE;
                }
        }
        return o.exit_code;
}
