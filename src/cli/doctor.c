/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch doctor: which kernel features work here, and what is degraded.
 *
 * Exit status: 0 when `hutch run` can work here (every required check of
 * feature_is_required() is not "missing"), 1 when it cannot, 125 for
 * hutch's own failures (bad flags, a probe that could not run). */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "api/hutch-ext.h"
#include "cli.h"
#include "doctor/features.h"
#include "log.h"

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

static void checks_done(FeatureCheck *checks, size_t n) {
        for (size_t i = 0; i < n; i++)
                feature_check_done(checks + i);
}

static int print_json(const FeatureCheck *checks, const char *engine) {
        json_t *o = json_object(), *c;
        int r = 0;

        if (!o)
                return -ENOMEM;
        c = json_pack("{s:s}", "engine", engine);
        if (!c || json_object_set_new(o, "container", c) < 0) {
                json_decref(o);
                return -ENOMEM;
        }
        for (FeatureId id = 0; id < _FEATURE_ID_MAX; id++) {
                c = json_pack("{s:s, s:s}", "status", feature_status_to_string(checks[id].status),
                              "detail", checks[id].detail);
                if (!c || json_object_set_new(o, feature_id_to_string(id), c) < 0) {
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

static void print_text(const FeatureCheck *checks, bool usable, const char *engine) {
        size_t w = 0;

        for (FeatureId id = 0; id < _FEATURE_ID_MAX; id++)
                w = MAX(w, strlen(feature_id_to_string(id)));
        if (strcmp(engine, "none") != 0)
                (void)printf("%-*s  %-8s  %s (the fixes below are its settings; "
                             "docs/containers.md)\n",
                             (int)w, "container", "", engine);

        for (FeatureId id = 0; id < _FEATURE_ID_MAX; id++) {
                (void)printf("%-*s  %-8s  %s\n", (int)w, feature_id_to_string(id),
                             feature_status_to_string(checks[id].status), checks[id].detail);
                (void)printf("%-*s  %-8s  -> %s\n", (int)w, "", "",
                             feature_impact(id, checks[id].status));
        }
        (void)printf("\nhutch run %s work here\n", usable ? "can" : "cannot");
}

int verb_doctor(int argc, char **argv) {
        FeatureCheck checks[_FEATURE_ID_MAX] = {};
        const char *engine = hutch_ext_container_engine();
        bool usable = true;
        int r;

        r = doctor_parse_argv(argc, argv);
        if (r <= 0)
                return r < 0 ? HUTCH_EXIT_FAILURE : 0;

        for (FeatureId id = 0; id < _FEATURE_ID_MAX; id++) {
                r = feature_probe(id, checks + id);
                if (r < 0) {
                        checks_done(checks, _FEATURE_ID_MAX);
                        log_error_errno(r, "failed to probe '%s': %m", feature_id_to_string(id));
                        return HUTCH_EXIT_FAILURE;
                }
                if (feature_is_required(id) && checks[id].status == FEATURE_MISSING)
                        usable = false;
        }

        if (arg_json) {
                r = print_json(checks, engine);
                if (r < 0) {
                        checks_done(checks, _FEATURE_ID_MAX);
                        log_error_errno(r, "failed to print the report: %m");
                        return HUTCH_EXIT_FAILURE;
                }
        } else
                print_text(checks, usable, engine);

        checks_done(checks, _FEATURE_ID_MAX);
        return usable ? 0 : 1;
}
