/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "fd-util.h"
#include "log.h"
#include "macro.h"
#include "vm/vm.h"

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

static const struct {
        const char *name;
        int (*fn)(int argc, char **argv);
        const char *summary;
} verbs[] = {
        {"run", verb_run, "run a command in a fresh one-shot sandbox"},
        {"create", verb_create, "create a persistent sandbox"},
        {"update", verb_update, "change a stopped sandbox's policy"},
        {"exec", verb_exec, "run a command in a persistent sandbox (starts it on demand)"},
        {"ls", verb_ls, "list the persistent sandboxes"},
        {"stop", verb_stop, "stop a sandbox (its files stay)"},
        {"rm", verb_rm, "remove a sandbox"},
        {"logs", verb_logs, "a sandbox's exec history, detached output and audit log"},
        {"snapshot", verb_snapshot, "snapshot a sandbox; snapshot ls/rm/export/import"},
        {"diff", verb_diff, "what a sandbox changed in its overlay workspace"},
        {"apply", verb_apply, "write a sandbox's workspace changes back to the host"},
        {"gc", verb_gc, "remove leftovers of interrupted commands"},
        {"mcp", verb_mcp, "serve one sandbox's tools over the Model Context Protocol (stdio)"},
        {"serve", verb_serve_exec, "serve the HTTP API on a unix socket (and TCP with a token)"},
        {"doctor", verb_doctor, "report which kernel features work here"},
};

static void usage(FILE *f) {
        (void)fprintf(f, "usage: hutch COMMAND [ARGS...]\n\ncommands:\n");
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                (void)fprintf(f, "  %-8s %s\n", verbs[i].name, verbs[i].summary);
        (void)fprintf(f, "\nrun 'hutch COMMAND --help' for the flags of a command\n");
}

int main(int argc, char **argv) {
        log_setup("hutch", LOG_LEVEL_INFO);

        if (argc < 2) {
                usage(stderr);
                return HUTCH_EXIT_FAILURE;
        }
        if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
            strcmp(argv[1], "help") == 0) {
                usage(stdout);
                return 0;
        }
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
                return argc == 3 && vm_forward_run(argv[2]) >= 0 ? 0 : 1;
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                if (strcmp(argv[1], verbs[i].name) == 0)
                        return verbs[i].fn(argc - 1, argv + 1);

        log_error("unknown command '%s' (see 'hutch --help')", argv[1]);
        return HUTCH_EXIT_FAILURE;
}
