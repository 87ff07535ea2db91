/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A persistent sandbox's execs as processes: hutch ps, kill, wait and
 * `logs --exec ID --follow` (docs/processes.md); the work is the
 * library's (hutch-ext.h's hutch_ext_exec_*()). */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "api/hutch-ext.h"
#include "cli-util.h"
#include "cli.h"
#include "log.h"
#include "parse-util.h"
#include "persist.h"

static int parse_id(const char *text, uint64_t *ret) {
        uint64_t id;

        if (safe_atou64(text, &id) < 0 || id == 0 || id > INT64_MAX) {
                log_error("invalid exec id '%s' (want the number 'hutch exec -d' printed)", text);
                return HUTCH_EXIT_FAILURE;
        }
        *ret = id;
        return 0;
}

/* ---- ps ---- */

int verb_ps(int argc, char **argv) {
        _cleanup_free_ char *text = NULL;
        const char *name = NULL;
        bool as_json = false;
        HutchError err = {};
        json_t *arr, *x;
        size_t i;
        int r;

        for (int j = 1; j < argc; j++) {
                if (strcmp(argv[j], "--json") == 0)
                        as_json = true;
                else if (!name && argv[j][0] != '-')
                        name = argv[j];
                else {
                        log_error("usage: hutch ps NAME [--json]");
                        return HUTCH_EXIT_FAILURE;
                }
        }
        if (!name) {
                log_error("usage: hutch ps NAME [--json]");
                return HUTCH_EXIT_FAILURE;
        }
        r = hutch_ext_exec_list_json(name, &text, &err);
        if (r < 0)
                return cli_fail(&err, r);
        if (as_json) {
                (void)printf("%s\n", text);
                return 0;
        }
        arr = json_loads(text, 0, NULL);
        (void)printf("%-6s %-8s %-19s  %-8s  %s\n", "ID", "PID", "STARTED", "MODE", "COMMAND");
        json_array_foreach(arr, i, x) {
                _cleanup_free_ char *cmd = json_dumps(json_object_get(x, "argv"), JSON_COMPACT);
                char started[32];

                persist_format_time((uint64_t)json_integer_value(json_object_get(x, "start_ms")),
                                    started, sizeof(started));
                (void)printf("%-6lld %-8lld %-19s  %-8s  %s\n",
                             json_integer_value(json_object_get(x, "id")),
                             json_integer_value(json_object_get(x, "pid")), started,
                             json_is_true(json_object_get(x, "detached")) ? "detached" : "attached",
                             cmd ? cmd : "[]");
        }
        json_decref(arr);
        return 0;
}

/* ---- kill ---- */

static void kill_usage(FILE *f) {
        (void)fprintf(f, "usage: hutch kill NAME ID [SIGNAL] [-t SECONDS]\n\n"
                         "Ends the exec ID of the sandbox NAME ('hutch ps' lists them).\n"
                         "Without SIGNAL: SIGTERM, then SIGKILL to everything it started if it "
                         "still runs\n10 seconds later; returns once it ended.\n"
                         "With SIGNAL (TERM, HUP, USR1, 9, ...): sends it and returns.\n"
                         "  -t, --time SECONDS  the grace before SIGKILL (0: SIGKILL at once); "
                         "with SIGNAL too\n");
}

int verb_kill(int argc, char **argv) {
        static const struct option options[] = {
                {"time", required_argument, NULL, 't'}, {"help", no_argument, NULL, 'h'}, {}};
        uint64_t id, grace_ms = HUTCH_EXT_KILL_GRACE_DEFAULT_MS;
        bool have_time = false, have_sig;
        HutchError err = {};
        int c, r, sig = SIGTERM;

        optind = 0;
        opterr = 0;
        while ((c = getopt_long(argc, argv, ":t:h", options, NULL)) >= 0)
                switch (c) {
                case 't': {
                        uint32_t secs;

                        if (safe_atou32(optarg, &secs) < 0 ||
                            (uint64_t)secs * 1000 > HUTCH_EXT_KILL_GRACE_MAX_MS) {
                                log_error("invalid --time '%s' (whole seconds, at most a day)",
                                          optarg);
                                return HUTCH_EXIT_FAILURE;
                        }
                        grace_ms = (uint64_t)secs * 1000;
                        have_time = true;
                        break;
                }
                case 'h':
                        kill_usage(stdout);
                        return 0;
                default:
                        kill_usage(stderr);
                        return HUTCH_EXIT_FAILURE;
                }
        if (argc - optind < 2 || argc - optind > 3) {
                kill_usage(stderr);
                return HUTCH_EXIT_FAILURE;
        }
        r = parse_id(argv[optind + 1], &id);
        if (r != 0)
                return r;
        have_sig = argc - optind == 3;
        if (have_sig) {
                sig = hutch_ext_signal_parse(argv[optind + 2]);
                if (sig < 0) {
                        log_error("invalid signal '%s' (TERM, KILL, HUP, INT, USR1, 15, ...)",
                                  argv[optind + 2]);
                        return HUTCH_EXIT_FAILURE;
                }
        }
        /* A signal of its own is only sent (a server told to reload must
         * not be killed later), unless a grace was asked for. */
        if (have_sig && !have_time)
                grace_ms = 0;
        if (have_time && grace_ms == 0)
                sig = SIGKILL;
        r = hutch_ext_exec_kill(argv[optind], id, sig, grace_ms, !have_sig || have_time, &err);
        if (r < 0)
                return cli_fail(&err, r);
        return 0;
}

/* ---- wait ---- */

int verb_wait(int argc, char **argv) {
        _cleanup_free_ char *json = NULL;
        const char *args[2] = {};
        size_t n = 0;
        bool as_json = false;
        HutchError err = {};
        uint64_t id;
        int r, code = 0;

        for (int j = 1; j < argc; j++) {
                if (strcmp(argv[j], "--json") == 0)
                        as_json = true;
                else if (n < 2 && argv[j][0] != '-')
                        args[n++] = argv[j];
                else
                        n = 3;
                if (n > 2)
                        break;
        }
        if (n != 2) {
                log_error("usage: hutch wait NAME ID [--json]");
                return HUTCH_EXIT_FAILURE;
        }
        r = parse_id(args[1], &id);
        if (r != 0)
                return r;
        r = hutch_ext_exec_wait(args[0], id, &code, as_json ? &json : NULL, &err);
        if (r < 0)
                return cli_fail(&err, r);
        if (as_json)
                (void)printf("%s\n", json);
        else
                (void)printf("%d\n", code);
        return 0;
}

/* ---- logs --exec ID [--follow] ---- */

int procs_print_output(const char *name, const char *exec_id, bool follow) {
        HutchError err = {};
        uint64_t id;
        int r;

        r = parse_id(exec_id, &id);
        if (r != 0)
                return r;
        r = hutch_ext_exec_output(name, id, follow, STDOUT_FILENO, STDERR_FILENO, &err);
        if (r == -EPIPE)
                return 0; /* the reader is gone (| head) */
        if (r < 0)
                return cli_fail(&err, r);
        return 0;
}
