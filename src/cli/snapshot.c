/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch snapshot NAME [SNAP], snapshot ls / inspect / rm / export / import
 * (docs/persistent.md). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/hutch-ext.h"
#include "cli-util.h"
#include "cli.h"
#include "fd-util.h"
#include "log.h"
#include "persist.h"
#include "rm-rf.h"
#include "strv.h"

static void snapshot_usage(FILE *f) {
        (void)fprintf(f,
                      "usage: hutch snapshot NAME [SNAP]       freeze sandbox NAME into snapshot "
                      "SNAP (default NAME.N)\n"
                      "       hutch snapshot ls [--json | -q]\n"
                      "       hutch snapshot inspect SNAP\n"
                      "       hutch snapshot rm SNAP\n"
                      "       hutch snapshot export SNAP -o FILE.tar.zst [-q]\n"
                      "       hutch snapshot import FILE [--name SNAP] [-q]\n"
                      "\nexport and import show their progress on a terminal; -q, --quiet: "
                      "not\n");
}

static int snapshot_take(int argc, char **argv) {
        _cleanup_free_ char *snap = NULL, *sandbox = NULL;
        HutchError err = {};
        bool running = false;
        int r;

        if (argc < 2 || argc > 3) {
                snapshot_usage(stderr);
                return HUTCH_EXIT_FAILURE;
        }
        r = hutch_ext_snapshot(argv[1], argc == 3 ? argv[2] : NULL, &snap, &running, &sandbox,
                               &err);
        if (r < 0)
                return cli_fail(&err, r);
        if (running)
                /* By name, also when given its id. */
                log_info("snapshot '%s' of running sandbox '%s': its files, not its running "
                         "processes",
                         snap, sandbox ? sandbox : argv[1]);
        (void)printf("%s\n", snap);
        return 0;
}

static int snapshot_ls(int argc, char **argv) {
        _cleanup_strv_free_ char **names = NULL;
        HutchExtSnapshot *l = NULL;
        bool as_json = argc == 2 && strcmp(argv[1], "--json") == 0;
        bool quiet = argc == 2 && (strcmp(argv[1], "-q") == 0 || strcmp(argv[1], "--quiet") == 0);
        HutchError err = {};
        size_t n = 0;
        json_t *arr;
        int r;

        if (argc > 2 || (argc == 2 && !as_json && !quiet)) {
                log_error("usage: hutch snapshot ls [--json | -q]");
                return HUTCH_EXIT_FAILURE;
        }
        if (quiet) {
                r = hutch_ext_snapshot_names(&names, &err);
                if (r < 0)
                        return cli_fail(&err, r);
                STRV_FOREACH(name, names)
                        (void)printf("%s\n", *name);
                return 0;
        }
        r = hutch_ext_snapshot_list(&l, &n, &err);
        if (r < 0)
                return cli_fail(&err, r);
        arr = json_array();
        if (!as_json)
                (void)printf("%-24s %-19s  %10s  %-20s %s\n", "NAME", "CREATED", "SIZE", "FROM",
                             "PARENT");
        for (size_t i = 0; i < n; i++) {
                HutchExtSnapshot *rec = l + i;
                uint64_t size = rec->disk_bytes;
                char created[32];

                if (as_json) {
                        (void)json_array_append_new(
                                arr,
                                json_pack("{s:s,s:s,s:I,s:I,s:o,s:o}", "name", rec->name, "id",
                                          rec->id, "created_ms", (json_int_t)rec->created_ms,
                                          "disk_bytes", (json_int_t)size, "origin",
                                          rec->origin ? json_string(rec->origin) : json_null(),
                                          "parent",
                                          rec->parent ? json_string(rec->parent) : json_null()));
                        continue;
                }
                persist_format_time(rec->created_ms, created, sizeof(created));
                /* SECURITY: an imported snapshot's origin is the archive's
                 * text: no control byte of it reaches the terminal. */
                if (rec->origin)
                        for (char *p = rec->origin; *p; p++)
                                if ((unsigned char)*p < 0x20 || *p == 0x7f)
                                        *p = '?';
                (void)printf("%-24s %-19s  %9.1fM  %-20s %s\n", rec->name, created,
                             (double)size / (1024.0 * 1024.0), rec->origin ? rec->origin : "-",
                             rec->parent ? rec->parent : "-");
        }
        (void)hutch_ext_snapshots_free(l, n);
        if (as_json) {
                _cleanup_free_ char *text = json_dumps(arr, JSON_COMPACT);

                (void)printf("%s\n", text ? text : "[]");
        }
        json_decref(arr);
        return 0;
}

/* Prints the record as JSON: "policy" is what `create --from SNAP` without
 * policy flags runs under (null for an imported snapshot: the caller's or
 * the defaults), "suggested_policy" what an imported archive asked for,
 * shown and never applied. */
static int snapshot_inspect(int argc, char **argv) {
        _cleanup_(hutch_ext_snapshot_done) HutchExtSnapshot snap = {};
        const HutchExtSnapshot *rec = &snap;
        _cleanup_free_ char *text = NULL;
        HutchError err = {};
        json_t *j, *policy = NULL, *suggested = NULL;
        int r;

        if (argc != 2) {
                log_error("usage: hutch snapshot inspect SNAP");
                return HUTCH_EXIT_FAILURE;
        }
        r = hutch_ext_snapshot_get(argv[1], &snap, &err);
        if (r < 0)
                return cli_fail(&err, r);
        if (!rec->imported)
                policy = json_loads(rec->policy_json, 0, NULL);
        if (rec->suggested_policy_json)
                suggested = json_loads(rec->suggested_policy_json, 0, NULL);
        j = json_pack("{s:s,s:s,s:I,s:o,s:o,s:b,s:o,s:o}", "name", rec->name, "id", rec->id,
                      "created_ms", (json_int_t)rec->created_ms, "parent",
                      rec->parent ? json_string(rec->parent) : json_null(), "origin",
                      rec->origin ? json_string(rec->origin) : json_null(), "imported",
                      rec->imported, "policy", policy ? policy : json_null(), "suggested_policy",
                      suggested ? suggested : json_null());
        text = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
        json_decref(j);
        if (!text) {
                log_error("out of memory");
                return HUTCH_EXIT_FAILURE;
        }
        (void)printf("%s\n", text);
        return 0;
}

static int snapshot_rm(int argc, char **argv) {
        HutchError err = {};
        int r;

        if (argc != 2) {
                log_error("usage: hutch snapshot rm SNAP");
                return HUTCH_EXIT_FAILURE;
        }
        r = hutch_ext_snapshot_remove(argv[1], &err);
        if (r < 0)
                return cli_fail(&err, r);
        return 0;
}

/* export and import run in hutch-archive (snapshot-io.c): only that
 * program links libarchive, whose dependencies (libxml2, ICU, libstdc++)
 * would cost every other hutch command about 3 ms of start-up. */
static int snapshot_io(int argc, char **argv) {
        _cleanup_free_ char *helper = NULL;
        _cleanup_free_ char **args = NULL;
        int r;

        r = shipped_binary_find("HUTCH_ARCHIVE_PATH", "hutch-archive", "cli", X_OK, NULL, &helper);
        if (r < 0) {
                log_error("cannot find hutch-archive (set HUTCH_ARCHIVE_PATH): %s", strerror(-r));
                return HUTCH_EXIT_FAILURE;
        }
        args = calloc((size_t)argc + 2, sizeof(char *));
        if (!args) {
                log_error("out of memory");
                return HUTCH_EXIT_FAILURE;
        }
        args[0] = (char *)"hutch-archive";
        for (int i = 0; i < argc; i++)
                args[i + 1] = argv[i];
        args[argc + 1] = NULL;
        (void)execv(helper, args);
        log_error("cannot run %s: %m", helper);
        return HUTCH_EXIT_FAILURE;
}

int verb_snapshot(int argc, char **argv) {
        if (argc < 2) {
                snapshot_usage(stderr);
                return HUTCH_EXIT_FAILURE;
        }
        if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
                snapshot_usage(stdout);
                return 0;
        }
        if (strcmp(argv[1], "ls") == 0)
                return snapshot_ls(argc - 1, argv + 1);
        if (strcmp(argv[1], "inspect") == 0)
                return snapshot_inspect(argc - 1, argv + 1);
        if (strcmp(argv[1], "rm") == 0)
                return snapshot_rm(argc - 1, argv + 1);
        if (strcmp(argv[1], "export") == 0 || strcmp(argv[1], "import") == 0)
                return snapshot_io(argc - 1, argv + 1);
        return snapshot_take(argc, argv);
}
