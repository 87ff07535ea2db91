/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/hutch-ext.h"
#include "cli.h"
#include "fd-util.h"
#include "log.h"
#include "port.h"
#include "refusals.h"
#include "run-flags.h"
#include "terminal.h"
#include "time-util.h"

static int write_outcome(int fd, const HutchExtOutcome *o) {
        const char *json = o->json;
        int r;

        if (!json)
                return -ENOMEM;
        r = loop_write(fd, json, strlen(json));
        if (r < 0)
                return r;
        return loop_write(fd, "\n", 1);
}

/* A limit above what the machine has is allowed (it is simply no limit)
 * but probably a mistake, so say so. */
static void warn_limits_beyond_machine(const HutchExtPolicyView *p) {
        long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);

        if (p->memory_explicit && pages > 0 && page_size > 0 &&
            p->memory_max > (uint64_t)pages * (uint64_t)page_size)
                log_warning("--memory %llu bytes is more than this machine has (%llu bytes)",
                            (unsigned long long)p->memory_max,
                            (unsigned long long)pages * (unsigned long long)page_size);
        if (p->cpu_millis && cpus > 0 && p->cpu_millis > (uint64_t)cpus * 1000)
                log_warning("--cpus %u.%03u is more than this machine has (%ld)",
                            p->cpu_millis / 1000, p->cpu_millis % 1000, cpus);
}

/* Limits the user asked for that run as rlimits (--allow-degraded). */
static void warn_degraded(const HutchExtPolicyView *p, const HutchExtOutcome *o) {
        unsigned asked = o->degraded & p->limits_explicit;

        for (unsigned i = 0; hutch_ext_policy_limit_name(i); i++)
                if (asked & (1U << i))
                        log_warning("the %s limit was not enforced by a cgroup (degraded run, see "
                                    "'hutch doctor')",
                                    hutch_ext_policy_limit_name(i));
}

/* The first start of a microVM of a given shape builds its template (a
 * cold boot of seconds): said on a terminal, with the time it took. */
static uint64_t template_build_start_ms;
/* Where the notice goes: the caller's stderr, also while a run -t has its
 * fds 0-2 on the terminal relay's channel (a stray message there is not
 * the pty the relay waits for). One thread, one run. */
static int template_notice_fd = STDERR_FILENO;

static void template_build_notice(bool done, bool ok) {
        uint64_t now = time_monotonic_ms();

        if (!done) {
                template_build_start_ms = now;
                (void)dprintf(template_notice_fd,
                              "hutch: building the microVM template (once per VM shape; later "
                              "starts restore it)...");
        } else
                (void)dprintf(template_notice_fd,
                              "\r\033[Khutch: %s the microVM template in %.1f s\n",
                              ok ? "built" : "could not build (booting cold)",
                              (double)(now - template_build_start_ms) / 1000.0);
}

/* -t: why this run cannot have a terminal, or NULL. */
static const char *run_tty_refusal(const HutchExtPolicyView *view) {
        if (!isatty(STDIN_FILENO))
                return TERMINAL_NOT_A_TTY " (-t needs a terminal on stdin)";
        if (view->output_limit)
                return "-t and --output-limit do not go together: a terminal's output is not cut";
        return NULL;
}

/* hutch_ext_run() with a pty made inside: the sandbox's init inherits this
 * process's fds 0-2, which are the relay's channel meanwhile (and the
 * caller's own again after). */
static int run_with_terminal(const RunArgs *args, char *const *env, HutchExtOutcome *o,
                             HutchError *reterr) {
        _cleanup_(terminal_relay_finish) TerminalRelay term = TERMINAL_RELAY_NULL;
        int saved[3] = {-EBADF, -EBADF, -EBADF};
        int r;

        r = terminal_relay_start(&term, args->interactive);
        if (r < 0)
                return hutch_error_set(reterr, -r, "failed to set up the terminal: %s",
                                       strerror(-r));
        for (int i = 0; i < 3; i++) {
                saved[i] = fcntl(i, F_DUPFD_CLOEXEC, 3);
                if (saved[i] < 0 || dup2(term.chan, i) < 0) {
                        r = hutch_error_set(reterr, errno, "failed to set up the terminal: %m");
                        goto restore;
                }
        }
        terminal_relay_close_chan(&term);
        template_notice_fd = saved[2];
        r = hutch_ext_run(args->policy, args->command, env, true, o, reterr);
        template_notice_fd = STDERR_FILENO;
restore:
        for (int i = 0; i < 3; i++)
                if (saved[i] >= 0) {
                        (void)dup2(saved[i], i);
                        saved[i] = safe_close(saved[i]);
                }
        return r;
}

int verb_run(int argc, char **argv) {
        extern char **environ;
        _cleanup_(run_args_done) RunArgs args = {.json_fd = -EBADF};
        _cleanup_close_ int json_fd = -EBADF;
        HutchError err = {};
        _cleanup_(hutch_ext_outcome_done) HutchExtOutcome o = HUTCH_EXT_OUTCOME_NULL;
        HutchExtPolicyView view;
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
        hutch_ext_policy_view(args.policy, &view);
        ports_warn_exposed(view.ports);
        r = run_args_check_workdir(args.policy, &err);
        if (r < 0) {
                log_error("%s", err.msg[0] ? err.msg : strerror(-r));
                return HUTCH_EXIT_FAILURE;
        }
        if (args.tty && run_tty_refusal(&view)) {
                log_error("%s", run_tty_refusal(&view));
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

        warn_limits_beyond_machine(&view);
        if (view.workspace_mount && !view.read_only)
                log_warning("workspace '%s' is mounted read-write: changes inside are live on "
                            "the host",
                            view.workspace);

        if (view.vm && isatty(STDERR_FILENO))
                hutch_ext_vm_template_hook(template_build_notice);
        if (args.tty)
                r = run_with_terminal(&args, environ, &o, &err);
        else
                r = hutch_ext_run(args.policy, args.command, environ, false, &o, &err);
        if (r < 0) {
                log_error("%s", err.msg[0] ? err.msg : strerror(-r));
                return HUTCH_EXIT_FAILURE;
        }

        warn_degraded(&view, &o);
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
