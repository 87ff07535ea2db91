/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* run-command: run one command in a hutch sandbox and print its outcome.
 * A starting point to copy: build a policy (from a JSON document, or with
 * the setters), call hutch_run() instead of fork()+exec(), and read the
 * typed outcome.
 *
 *   cc run-command.c $(pkg-config --cflags --libs hutch) -o run-command
 *   ./run-command --memory 256m --timeout 10s -- python3 -c 'print(1 + 1)'
 *   ./run-command --policy '{"limits": {"memory": "256m"}}' -- id
 *
 * The command's output goes to this program's stdout and stderr; then the
 * outcome is printed as one JSON line on stdout, and the exit status is
 * the command's (125 when hutch itself failed). */
#include <stdio.h>
#include <string.h>

#include <hutch.h>

static int usage(void) {
        fprintf(stderr,
                "usage: run-command [--policy JSON] [--workspace DIR[:mount|copy|overlay]]\n"
                "                   [--memory SIZE] [--timeout DURATION]\n"
                "                   [--allow-host PATTERN] -- CMD [ARGS...]\n");
        return 125;
}

/* hutch's own failures: the message, and for a policy error the field. */
static int failed(const char *what, const hutch_error *err) {
        fprintf(stderr, "run-command: %s: %s", what, err->message);
        if (err->field[0])
                fprintf(stderr, " (policy field %s)", err->field);
        fprintf(stderr, "\n");
        return 125;
}

int main(int argc, char **argv) {
        hutch_error err = {0};
        hutch_outcome outcome = {0};
        hutch_policy *policy;
        int i, r = 0;

        /* Defaults: no network, 2g of memory, 1024 processes, an empty
         * $HOME, the host's /usr read-only (docs/policy.md). */
        policy = hutch_policy_new();
        if (!policy) {
                fprintf(stderr, "run-command: out of memory\n");
                return 125;
        }
        for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i += 2) {
                const char *flag = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;

                if (!value) {
                        hutch_policy_free(policy);
                        return usage();
                }
                if (strcmp(flag, "--policy") == 0)
                        r = hutch_policy_load_json(policy, value, &err);
                else if (strcmp(flag, "--workspace") == 0)
                        r = hutch_policy_set_workspace(policy, value, &err);
                else if (strcmp(flag, "--memory") == 0)
                        r = hutch_policy_set_limit(policy, "memory", value, &err);
                else if (strcmp(flag, "--timeout") == 0)
                        r = hutch_policy_set_limit(policy, "timeout", value, &err);
                else if (strcmp(flag, "--allow-host") == 0)
                        r = hutch_policy_allow_host(policy, value, &err);
                else {
                        hutch_policy_free(policy);
                        return usage();
                }
                if (r < 0) {
                        hutch_policy_free(policy);
                        return failed("bad policy", &err);
                }
        }
        if (i + 1 >= argc) {
                hutch_policy_free(policy);
                return usage();
        }

        /* The sandbox runs with our stdin, stdout and stderr; a command
         * that fails is an outcome, not an error. */
        r = hutch_run(policy, argv + i + 1, &outcome, &err);
        hutch_policy_free(policy);
        if (r < 0)
                return failed("cannot run the command", &err);

        fflush(stdout);
        printf("%s\n", outcome.json);
        if (strcmp(outcome.reason, "exited") != 0)
                fprintf(stderr, "run-command: %s (exit code %d, %llu ms)\n", outcome.reason,
                        outcome.exit_code, (unsigned long long)outcome.wall_ms);
        r = outcome.exit_code;
        hutch_outcome_done(&outcome);
        return r;
}
