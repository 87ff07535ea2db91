/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/hutch-ext.h"
#include "cli.h"
#include "fd-util.h"
#include "log.h"
#include "macro.h"
#include "run-flags.h"

/* `hutch serve` runs hutch-serve (serve-main.c), which alone links
 * libevent and libcrypto; it starts keepers with this very binary. */
static int verb_serve_exec(int argc, char **argv) {
        _cleanup_free_ char *helper = NULL, *self = NULL;
        int r;

        r = shipped_binary_find("HUTCH_SERVE_PATH", "hutch-serve", "cli", X_OK, NULL, &helper);
        if (r < 0) {
                log_error("cannot find hutch-serve (set HUTCH_SERVE_PATH): %s", strerror(-r));
                return HUTCH_EXIT_FAILURE;
        }
        self = realpath("/proc/self/exe", NULL);
        if (!getenv("HUTCH_BINARY") && self && setenv("HUTCH_BINARY", self, 1) < 0) {
                log_error("out of memory");
                return HUTCH_EXIT_FAILURE;
        }
        argv[0] = (char *)"hutch-serve";
        (void)argc;
        (void)execv(helper, argv);
        log_error("cannot run %s: %m", helper);
        return HUTCH_EXIT_FAILURE;
}

/* The usage of the verbs that do not print their own (NULL: the verb
 * answers --help itself). Also the source of the man pages
 * (tools/gen-man.sh). */
static const char usage_ls[] =
        "usage: hutch ls [--json | -q]\n\n"
        "Lists the persistent sandboxes: NAME, STATE, BACKEND, CREATED, LAST USED, DISK (the\n"
        "sandbox's own writable layer) and FROM (the snapshot it was created from, or -).\n"
        "  --json      one JSON array\n"
        "  -q, --quiet the names only, one a line\n";
static const char usage_stop[] = "usage: hutch stop NAME\n\n"
                                 "Stops the sandbox NAME: its processes end, its files stay.\n";
static const char usage_rm[] = "usage: hutch rm [--force] NAME\n\n"
                               "Removes the sandbox NAME and its files.\n"
                               "  --force  also when it is running (it is stopped first)\n";
static const char usage_logs[] = "usage: hutch logs NAME [--json | --exec ID [--follow] | "
                                 "--audit]\n\n"
                                 "Shows the sandbox's exec history.\n"
                                 "  --json     the history as JSON\n"
                                 "  --exec ID  the output of the detached exec ID (its stdout "
                                 "to stdout,\n"
                                 "             its stderr to stderr)\n"
                                 "  -f, --follow  with --exec: go on printing until it ends\n"
                                 "  --audit    the proxy's decisions (JSON lines)\n";
static const char usage_diff[] =
        "usage: hutch diff NAME [--stat | --name-status | --json] [PATH...]\n\n"
        "Shows what the sandbox NAME changed in its overlay workspace, as a unified diff.\n"
        "  --stat         a summary per file and in total, as git's\n"
        "  --name-status  one line per changed file: A, M or D and its path\n"
        "  --json         the changes as JSON\n";
static const char usage_apply[] =
        "usage: hutch apply NAME [--force] [--modes] [PATH...]\n\n"
        "Writes the sandbox NAME's workspace changes back to the host folder.\n"
        "  --force  also over host files that changed since the sandbox was created\n"
        "  --modes  also add group/other write and the sticky bit the sandbox set\n"
        "           (without it they are kept as on the host, and each is said)\n";
static const char usage_ps[] =
        "usage: hutch ps NAME [--json]\n\n"
        "Lists the execs running in the sandbox NAME: ID, PID (inside the sandbox), STARTED,\n"
        "MODE (detached or attached) and COMMAND.\n"
        "  --json  one JSON array of {id, argv, start_ms, pid, detached}\n";
static const char usage_wait[] =
        "usage: hutch wait NAME ID [--json]\n\n"
        "Waits for the exec ID of the sandbox NAME to end (at once for one that ended)\n"
        "and prints its exit code (128+N for signal N).\n"
        "  --json  the whole outcome as JSON instead\n";
static const char usage_gc[] = "usage: hutch gc\n\n"
                               "Removes the leftovers of interrupted commands (cgroups, mounts, "
                               "temporary directories).\n";
static const struct {
        const char *name;
        int (*fn)(int argc, char **argv);
        const char *summary;
        const char *usage;
        bool takes_command; /* a command follows the flags: only a first --help is ours */
} verbs[] = {
        {"run", verb_run, "run a command in a fresh one-shot sandbox", NULL, true},
        {"create", verb_create, "create a persistent sandbox", NULL, false},
        {"update", verb_update, "change a stopped sandbox's policy", NULL, false},
        {"exec", verb_exec, "run a command in a persistent sandbox (starts it on demand)", NULL,
         true},
        {"ls", verb_ls, "list the persistent sandboxes", usage_ls, false},
        {"stop", verb_stop, "stop a sandbox (its files stay)", usage_stop, false},
        {"rm", verb_rm, "remove a sandbox", usage_rm, false},
        {"port", verb_port, "list or change a sandbox's published ports", NULL, false},
        {"logs", verb_logs, "a sandbox's exec history, detached output and audit log", usage_logs,
         false},
        {"snapshot", verb_snapshot, "snapshot a sandbox; snapshot ls/rm/export/import", NULL,
         false},
        {"diff", verb_diff, "what a sandbox changed in its overlay workspace", usage_diff, false},
        {"apply", verb_apply, "write a sandbox's workspace changes back to the host", usage_apply,
         false},
        {"ps", verb_ps, "list the running execs of a sandbox", usage_ps, false},
        {"kill", verb_kill, "end (or signal) an exec of a sandbox", NULL, false},
        {"wait", verb_wait, "wait for an exec of a sandbox to end and print its exit code",
         usage_wait, false},
        {"gc", verb_gc, "remove leftovers of interrupted commands", usage_gc, false},
        {"mcp", verb_mcp, "serve one sandbox's tools over the Model Context Protocol (stdio)", NULL,
         false},
        {"serve", verb_serve_exec, "serve the HTTP API on a unix socket (and TCP with a token)",
         NULL, false},
        {"doctor", verb_doctor, "report which kernel features work here", NULL, false},
        {"image", verb_image, "images: import, ls, inspect, rm, gc (docs/images.md)", NULL, false},
};

static void usage(FILE *f) {
        (void)fprintf(f, "usage: hutch COMMAND [ARGS...]\n\ncommands:\n");
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                (void)fprintf(f, "  %-8s %s\n", verbs[i].name, verbs[i].summary);
        (void)fprintf(f, "\nrun 'hutch COMMAND --help' or 'hutch help COMMAND' for the flags of "
                         "a command\n");
}

static bool is_help(const char *a) {
        return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0;
}

/* Whether the arguments of verb @i ask for its help: the first one, or
 * any before "--" for a verb that takes no command. */
static bool wants_help(size_t i, int argc, char **argv) {
        for (int k = 1; k < argc; k++) {
                if (strcmp(argv[k], "--") == 0)
                        return false;
                if (is_help(argv[k]))
                        return true;
                if (verbs[i].takes_command)
                        return false;
        }
        return false;
}

static int run_verb(size_t i, int argc, char **argv) {
        if (verbs[i].usage && wants_help(i, argc, argv)) {
                (void)fputs(verbs[i].usage, stdout);
                return 0;
        }
        return verbs[i].fn(argc, argv);
}

static int find_verb(const char *name, size_t *ret) {
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                if (strcmp(name, verbs[i].name) == 0) {
                        *ret = i;
                        return 0;
                }
        return -ENOENT;
}

/* hutch help [VERB] */
static int verb_help(int argc, char **argv) {
        char *args[] = {argv[1], (char *)"--help", NULL};
        size_t i;

        if (argc < 2) {
                usage(stdout);
                return 0;
        }
        if (argc > 2 || find_verb(argv[1], &i) < 0) {
                log_error("unknown command '%s' (see 'hutch --help')", argv[1]);
                return HUTCH_EXIT_FAILURE;
        }
        return run_verb(i, 2, args);
}

/* The verb nearest to a mistyped @name, or NULL. */
static const char *verb_nearest(const char *name) {
        const char *names[ELEMENTSOF(verbs) + 1];

        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                names[i] = verbs[i].name;
        names[ELEMENTSOF(verbs)] = NULL;
        return word_nearest(name, names);
}

int main(int argc, char **argv) {
        const char *best;
        size_t verb;

        log_setup("hutch", LOG_LEVEL_INFO);

        if (argc < 2) {
                usage(stderr);
                return HUTCH_EXIT_FAILURE;
        }
        if (is_help(argv[1])) {
                usage(stdout);
                return 0;
        }
        if (strcmp(argv[1], "help") == 0)
                return verb_help(argc - 1, argv + 1);
        if (strcmp(argv[1], "--version") == 0) {
                (void)printf("hutch %s\n", HUTCH_VERSION);
                return 0;
        }
        /* The keeper's entry point (started by exec; not for users). */
        if (strcmp(argv[1], "__keeper") == 0)
                return verb_keeper(argc - 1, argv + 1);
        /* The microVM's guestfwd helper (started by QEMU; not for users):
         * connects the guest's connection on stdin/stdout to the proxy. */
        if (strcmp(argv[1], "__vm-fwd") == 0)
                return argc == 3 && hutch_ext_vm_forward(argv[2]) >= 0 ? 0 : 1;
        if (find_verb(argv[1], &verb) >= 0)
                return run_verb(verb, argc - 1, argv + 1);

        best = verb_nearest(argv[1]);
        if (best)
                log_error("unknown command '%s': did you mean '%s'? (see 'hutch --help')", argv[1],
                          best);
        else
                log_error("unknown command '%s' (see 'hutch --help')", argv[1]);
        return HUTCH_EXIT_FAILURE;
}
