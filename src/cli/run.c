/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "fd-util.h"
#include "log.h"
#include "port.h"
#include "refusals.h"
#include "run-flags.h"
#include "sandbox/sandbox.h"
#include "time-util.h"
#include "vm/vm.h"

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

/* A limit above what the machine has is allowed (it is simply no limit)
 * but probably a mistake, so say so. */
static void warn_limits_beyond_machine(const Policy *p) {
        long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);

        if ((p->limits_explicit & (1U << POLICY_LIMIT_MEMORY)) && pages > 0 && page_size > 0 &&
            p->memory_max > (uint64_t)pages * (uint64_t)page_size)
                log_warning("--memory %llu bytes is more than this machine has (%llu bytes)",
                            (unsigned long long)p->memory_max,
                            (unsigned long long)pages * (unsigned long long)page_size);
        if (p->cpu_millis && cpus > 0 && p->cpu_millis > (uint64_t)cpus * 1000)
                log_warning("--cpus %u.%03u is more than this machine has (%ld)",
                            p->cpu_millis / 1000, p->cpu_millis % 1000, cpus);
}

/* Limits the user asked for that run as rlimits (--allow-degraded). */
static void warn_degraded(const Policy *p, const Outcome *o) {
        unsigned asked = o->degraded & p->limits_explicit;

        for (int i = 0; i < _POLICY_LIMIT_MAX; i++)
                if (asked & (1U << i))
                        log_warning("the %s limit was not enforced by a cgroup (degraded run, see "
                                    "'hutch doctor')",
                                    policy_limit_to_string(i));
}

/* The first start of a microVM of a given shape builds its template (a
 * cold boot of seconds): said on a terminal, with the time it took. */
static uint64_t template_build_start_ms;

static void template_build_notice(bool done, bool ok) {
        uint64_t now = time_monotonic_ms();

        if (!done) {
                template_build_start_ms = now;
                (void)fputs("hutch: building the microVM template (once per VM shape; later "
                            "starts restore it)...",
                            stderr);
        } else
                (void)fprintf(stderr, "\r\033[Khutch: %s the microVM template in %.1f s\n",
                              ok ? "built" : "could not build (booting cold)",
                              (double)(now - template_build_start_ms) / 1000.0);
        (void)fflush(stderr);
}

int verb_run(int argc, char **argv) {
        extern char **environ;
        _cleanup_(run_args_done) RunArgs args = {.json_fd = -EBADF};
        _cleanup_close_ int json_fd = -EBADF;
        HutchError err = {};
        _cleanup_(outcome_done) Outcome o = {};
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
        ports_warn_exposed(args.policy->ports);
        r = run_args_check_workdir(args.policy, &err);
        if (r < 0) {
                log_error("%s", err.msg[0] ? err.msg : strerror(-r));
                return HUTCH_EXIT_FAILURE;
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

        warn_limits_beyond_machine(args.policy);
        if (args.policy->workspace && args.policy->workspace_mode == WORKSPACE_MODE_MOUNT &&
            !args.policy->read_only)
                log_warning("workspace '%s' is mounted read-write: changes inside are live on "
                            "the host",
                            args.policy->workspace);

        if (args.policy->backend == SANDBOX_BACKEND_VM && isatty(STDERR_FILENO))
                vm_set_template_build_hook(template_build_notice);
        r = sandbox_run(args.policy, args.command, environ, &o, &err);
        if (r < 0) {
                log_error("%s", err.msg[0] ? err.msg : strerror(-r));
                return HUTCH_EXIT_FAILURE;
        }

        warn_degraded(args.policy, &o);
        if (o.exit_code == 127)
                command_not_found_hint(args.command);
        if (!args.quiet)
                refusals_print(o.denied);
        if (json_fd >= 0) {
                r = write_outcome(json_fd, &o);
                if (r < 0) {
                        log_error_errno(r, "failed to write the outcome: %m");
                        return HUTCH_EXIT_FAILURE;
                }
        }
        return o.exit_code;
}
