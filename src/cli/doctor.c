/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch doctor: which kernel features work here, and what is degraded.
 *
 * Exit status: 0 when `hutch run` can work here (no check that
 * hutch_ext_doctor_probe() marks required is "missing"), 1 when it cannot, 125 for
 * hutch's own failures (bad flags, a probe that could not run). */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "api/hutch-ext.h"
#include "cli.h"
#include "log.h"
#include "macro.h"

static bool arg_json = false;

static void doctor_help(void) {
        (void)printf("usage: hutch doctor [--json]\n\n"
                     "Probes the kernel features hutch uses and says what each means here.\n"
                     "Exits 0 when 'hutch run' can work on this machine, 1 otherwise.\n\n"
                     "  --json     print one JSON object: {\"CHECK\": {\"status\", \"detail\"}}\n"
                     "  -h --help  show this help\n");
}

/* Returns 1 to go on, 0 when done (help printed), -EINVAL after logging. */
static int doctor_parse_argv(int argc, char **argv) {
        for (int i = 1; i < argc; i++) {
                const char *a = argv[i];

                if (strcmp(a, "--json") == 0)
                        arg_json = true;
                else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
                        doctor_help();
                        return 0;
                } else if (a[0] == '-') {
                        log_error("unknown option '%s'", a);
                        return -EINVAL;
                } else {
                        log_error("unexpected argument '%s' (hutch doctor takes no arguments)", a);
                        return -EINVAL;
                }
        }
        return 1;
}

static int print_json(const HutchExtCheck *checks, size_t n, const char *engine) {
        json_t *o = json_object(), *c;
        int r = 0;

        if (!o)
                return -ENOMEM;
        c = json_pack("{s:s}", "engine", engine);
        if (!c || json_object_set_new(o, "container", c) < 0) {
                json_decref(o);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                c = json_pack("{s:s, s:s}", "status", checks[i].status, "detail", checks[i].detail);
                if (!c || json_object_set_new(o, checks[i].name, c) < 0) {
                        r = -ENOMEM;
                        break;
                }
        }
        if (r >= 0 && json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) < 0)
                r = -EIO;
        if (r >= 0 && fputc('\n', stdout) == EOF)
                r = -EIO;
        json_decref(o);
        return r;
}

static void print_text(const HutchExtCheck *checks, size_t n, bool usable, const char *engine) {
        size_t w = 0;

        for (size_t i = 0; i < n; i++)
                w = MAX(w, strlen(checks[i].name));
        if (strcmp(engine, "none") != 0)
                (void)printf("%-*s  %-8s  %s (the fixes below are its settings; "
                             "docs/containers.md)\n",
                             (int)w, "container", "", engine);

        for (size_t i = 0; i < n; i++) {
                (void)printf("%-*s  %-8s  %s\n", (int)w, checks[i].name, checks[i].status,
                             checks[i].detail);
                (void)printf("%-*s  %-8s  -> %s\n", (int)w, "", "", checks[i].impact);
        }
        (void)printf("\nhutch run %s work here\n", usable ? "can" : "cannot");
}

int verb_doctor(int argc, char **argv) {
        HutchExtCheck *checks = NULL;
        const char *engine = hutch_ext_container_engine(), *failed = NULL;
        bool usable = true;
        size_t n = 0;
        int r;

        r = doctor_parse_argv(argc, argv);
        if (r <= 0)
                return r < 0 ? HUTCH_EXIT_FAILURE : 0;

        r = hutch_ext_doctor_probe(&checks, &n, &failed);
        if (r < 0) {
                log_error_errno(r, "failed to probe '%s': %m", failed);
                return HUTCH_EXIT_FAILURE;
        }
        for (size_t i = 0; i < n; i++)
                if (checks[i].required && checks[i].missing)
                        usable = false;

        if (arg_json) {
                r = print_json(checks, n, engine);
                if (r < 0) {
                        (void)hutch_ext_checks_free(checks, n);
                        log_error_errno(r, "failed to print the report: %m");
                        return HUTCH_EXIT_FAILURE;
                }
        } else
                print_text(checks, n, usable, engine);

        (void)hutch_ext_checks_free(checks, n);
        return usable ? 0 : 1;
}
