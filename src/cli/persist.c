/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Persistent sandboxes: hutch create, exec, ls, stop, rm, logs, gc and the
 * keeper's own entry point (docs/persistent.md). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "api/hutch-ext.h"
#include "cli-util.h"
#include "cli.h"
#include "fd-util.h"
#include "log.h"
#include "parse-util.h"
#include "persist.h"
#include "port.h"
#include "refusals.h"
#include "run-flags.h"
#include "strv.h"
#include "terminal.h"

static int log_oom(void) {
        log_error("out of memory");
        return HUTCH_EXIT_FAILURE;
}

/* ---- create ---- */

static void create_usage(FILE *f) {
        (void)fprintf(f, "usage: hutch create NAME [--from SNAPSHOT] [--idle-timeout DURATION] "
                         "[POLICY FLAGS]\n\n"
                         "Creates a persistent sandbox. The policy flags are those of 'hutch "
                         "run' (see 'hutch run --help'),\nexcept --json and --output-limit; a "
                         "workspace without a mode is an overlay.\n"
                         "--disk SIZE limits everything the sandbox writes (default 10g, at "
                         "least 16m).\n");
}

/* ["disk", ...]: the limits a sandbox goes without. */
static json_t *degraded_json(char **degraded) {
        json_t *a = json_array();

        STRV_FOREACH(d, degraded)
                if (a)
                        (void)json_array_append_new(a, json_string(*d));
        return a;
}

int verb_create(int argc, char **argv) {
        _cleanup_(run_args_done) RunArgs args = {.json_fd = -EBADF};
        _cleanup_(hutch_ext_created_done) HutchExtCreated rec = {};
        HutchExtPolicyView view;
        HutchError err = {};
        const char *name;
        int r;

        /* "create NAME FLAGS..." or "create FLAGS... NAME". */
        if (argc > 1 && argv[1][0] != '-') {
                name = argv[1];
                argv[1] = argv[0];
                argc--;
                argv++;
        } else
                name = NULL;
        r = run_args_parse_mode(argc, argv, RUN_ARGS_CREATE, &args, &err);
        if (r < 0)
                return cli_fail(&err, r);
        if (args.help) {
                create_usage(stdout);
                return 0;
        }
        if (strv_length(args.command) != (name ? 0 : 1)) {
                log_error("usage: hutch create NAME [FLAGS]");
                return HUTCH_EXIT_FAILURE;
        }
        if (!name)
                name = args.command[0];
        hutch_ext_policy_view(args.policy, &view);
        ports_warn_exposed(view.ports);
        /* With --from and no policy flag, the snapshot's policy. */
        r = hutch_ext_create(name, args.from && !args.policy_given ? NULL : args.policy, args.from,
                             args.idle_timeout_ms, &rec, &err);
        if (r < 0)
                return cli_fail(&err, r);
        if (rec.no_disk_limit)
                log_warning("sandbox '%s' has no disk limit: %s (see 'hutch doctor')", rec.name,
                            rec.no_disk_limit);
        /* docs/persistent.md "Id range": said once, where it is decided. */
        if (rec.no_range)
                log_warning("sandbox '%s' maps only your own id: %s (see 'hutch doctor')", rec.name,
                            rec.no_range);
        (void)printf("%s\n", rec.id);
        return 0;
}

/* ---- update ---- */

static void update_usage(FILE *f) {
        (void)fprintf(f, "usage: hutch update NAME [POLICY FLAGS]\n\n"
                         "Changes the policy of the persistent sandbox NAME: the policy flags of "
                         "'hutch create' are applied\nover its policy. A running sandbox "
                         "takes new --allow-host, --deny-host, --allow-private\nand --resolve "
                         "at once (and a namespace sandbox new --memory, --memory-swap, --cpus "
                         "and\n--pids); any other change needs a stop. The workspace and the "
                         "backend never change.\n");
}

int verb_update(int argc, char **argv) {
        _cleanup_(run_args_done) RunArgs args = {.json_fd = -EBADF};
        _cleanup_free_ char *rec_name = NULL, *policy_json = NULL;
        _cleanup_strv_free_ char **changed = NULL;
        HutchError err = {};
        const char *name;
        int r;

        if (argc < 2 || argv[1][0] == '-') {
                bool help =
                        argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0);

                update_usage(help ? stdout : stderr);
                return help ? 0 : HUTCH_EXIT_FAILURE;
        }
        name = argv[1];
        argv[1] = argv[0];
        argc--;
        argv++;
        r = hutch_ext_sandbox_policy(name, &rec_name, &policy_json, &err);
        if (r < 0)
                return cli_fail(&err, r);
        r = run_args_parse_update(argc, argv, policy_json, &args, &err);
        if (r < 0)
                return cli_fail(&err, r);
        if (args.help) {
                update_usage(stdout);
                return 0;
        }
        if (strv_length(args.command) != 0) {
                log_error("unexpected argument '%s' (usage: hutch update NAME [FLAGS])",
                          args.command[0]);
                return HUTCH_EXIT_FAILURE;
        }
        r = hutch_ext_update(rec_name, args.policy, &changed, &err);
        if (r < 0)
                return cli_fail(&err, r);
        STRV_FOREACH(f, changed)
                (void)printf("%s\n", *f);
        return 0;
}

/* ---- the keeper ---- */

/* hutch __keeper NAME READY_FD: the detached supervisor (started by the
 * library when a command finds the sandbox stopped). */
int verb_keeper(int argc, char **argv) {
        extern char **environ;
        HutchError err = {};
        int ready_fd, r;

        if (argc != 3 || safe_atoi(argv[2], &ready_fd) < 0 || ready_fd < 3)
                return HUTCH_EXIT_FAILURE;
        (void)fcntl(ready_fd, F_SETFD, FD_CLOEXEC);
        r = hutch_ext_keeper_main(argv[1], ready_fd, environ, &err);
        if (r < 0) {
                /* Not yet reported (to the starter) when err is empty. */
                if (err.errnum != 0)
                        log_error("%s", err.msg[0] ? err.msg : strerror(-r));
                return HUTCH_EXIT_FAILURE;
        }
        return 0;
}

/* ---- exec ---- */

static void exec_usage(FILE *f) {
        (void)fprintf(f, "usage: hutch exec NAME [-d] [-e K=V] [-w DIR] [--timeout DURATION] "
                         "[-u USER] [--json FILE] [-q] -- CMD [ARGS...]\n\n"
                         "Runs CMD in the persistent sandbox NAME (started on demand).\n"
                         "  -d, --detach        run in the background; output goes to 'hutch logs "
                         "NAME --exec ID'\n"
                         "  -t, --tty           a terminal for the command (a pty made in the "
                         "sandbox)\n"
                         "  -i, --interactive   with -t: stdin relayed to it, in raw mode\n"
                         "  -e, --env K=V       set a variable for this command (repeatable)\n"
                         "  -w, --workdir DIR   working directory (absolute)\n"
                         "  -u, --user USER     run as NAME, UID, NAME:GROUP or UID:GID of the "
                         "sandbox's /etc/passwd (default: the sandbox's user)\n"
                         "  --timeout DURATION  kill the command and everything it started after "
                         "this long\n"
                         "  --json FILE         write the outcome as JSON to FILE\n"
                         "  -q, --quiet         do not print what hutch-proxy refused after the "
                         "command\n");
}

/* The refusal lines of an exec's outcome (its "denied"). */
static void exec_print_refusals(const char *outcome) {
        json_t *o = json_loads(outcome, 0, NULL);
        json_t *d = json_is_object(o) ? json_object_get(o, "denied") : NULL;
        _cleanup_free_ char *denied = NULL;

        denied = json_is_array(d) ? json_dumps(d, JSON_COMPACT) : NULL;
        json_decref(o);
        refusals_print(denied);
}

/* Names the word getopt refused (@c is '?' or ':'), never the verb: in a
 * cluster ("-xd") optind has not moved, so a short option is named by
 * optopt. */
static void exec_option_error(int c, int argc, char **argv, const struct option *options) {
        const char *arg = optind >= 1 && optind <= argc ? argv[optind - 1] : "";
        const char *best;

        if (optopt > 0 && optopt < 0x80 && strncmp(arg, "--", 2) != 0) {
                log_error("%s option '-%c' (see 'hutch exec --help')",
                          c == ':' ? "missing value of" : "unknown", optopt);
                return;
        }
        if (c == ':') {
                log_error("option '%s' needs a value (see 'hutch exec --help')", arg);
                return;
        }
        best = option_nearest(arg, options);
        if (best)
                log_error("unknown option '%s': did you mean '--%s'? (see 'hutch exec --help')",
                          arg, best);
        else
                log_error("unknown option '%s' (see 'hutch exec --help')", arg);
}

int verb_exec(int argc, char **argv) {
        static const struct option options[] = {{"detach", no_argument, NULL, 'd'},
                                                {"env", required_argument, NULL, 'e'},
                                                {"workdir", required_argument, NULL, 'w'},
                                                {"user", required_argument, NULL, 'u'},
                                                {"timeout", required_argument, NULL, 'T'},
                                                {"tty", no_argument, NULL, 't'},
                                                {"interactive", no_argument, NULL, 'i'},
                                                {"json", required_argument, NULL, 'j'},
                                                {"quiet", no_argument, NULL, 'q'},
                                                {"help", no_argument, NULL, 'h'},
                                                {}};
        _cleanup_strv_free_ char **env = NULL;
        _cleanup_free_ char *json = NULL;
        _cleanup_close_ int sigfd = -EBADF, json_fd = -EBADF;
        HutchExtExec req = {.fds = {0, 1, 2}};
        const char *json_path = NULL, *name = NULL;
        HutchError err = {};
        sigset_t mask;
        uint64_t id = 0;
        _cleanup_(terminal_relay_finish) TerminalRelay term = TERMINAL_RELAY_NULL;
        bool quiet = false, interactive = false, tty = false;
        int c, r, exit_code = 0;

        /* "exec NAME [FLAGS] [--] CMD..." or "exec [FLAGS] NAME [--] CMD...". */
        if (argc > 1 && argv[1][0] != '-') {
                name = argv[1];
                argv[1] = argv[0];
                argc--;
                argv++;
        }
        optind = 0;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "+:de:w:u:hitq", options, NULL)) >= 0)
                switch (c) {
                case 'd':
                        req.detach = true;
                        break;
                case 'e':
                        if (!strchr(optarg, '=') || optarg[0] == '=') {
                                log_error("invalid -e '%s' (want KEY=VALUE)", optarg);
                                return HUTCH_EXIT_FAILURE;
                        }
                        if (strv_extend(&env, optarg) < 0)
                                return log_oom();
                        break;
                case 'w':
                        if (optarg[0] != '/') {
                                log_error("-w '%s': the working directory must be absolute",
                                          optarg);
                                return HUTCH_EXIT_FAILURE;
                        }
                        req.cwd = optarg;
                        break;
                case 'u':
                        if (!hutch_ext_user_spec_is_valid(optarg)) {
                                log_error("invalid --user '%s' (want NAME, UID, NAME:GROUP or "
                                          "UID:GID)",
                                          optarg);
                                return HUTCH_EXIT_FAILURE;
                        }
                        req.user = optarg;
                        break;
                case 't':
                        tty = true;
                        break;
                case 'i':
                        /* stdin is the command's anyway; with -t, it is
                         * relayed to the pty. */
                        interactive = true;
                        break;
                case 'T':
                        if (parse_duration_ms(optarg, &req.timeout_ms) < 0) {
                                log_error("invalid --timeout '%s' (500ms, 30s, 5m, 1h)", optarg);
                                return HUTCH_EXIT_FAILURE;
                        }
                        break;
                case 'j':
                        json_path = optarg;
                        break;
                case 'q':
                        quiet = true;
                        break;
                case 'h':
                        exec_usage(stdout);
                        return 0;
                default:
                        exec_option_error(c, argc, argv, options);
                        return HUTCH_EXIT_FAILURE;
                }
        if (!name && optind < argc)
                name = argv[optind++];
        if (optind < argc && strcmp(argv[optind], "--") == 0)
                optind++;
        if (!name || optind >= argc) {
                exec_usage(stderr);
                return HUTCH_EXIT_FAILURE;
        }
        req.argv = argv + optind;
        req.env = env;
        if (tty && req.detach) {
                log_error("-t and -d do not go together: a detached command has no terminal");
                return HUTCH_EXIT_FAILURE;
        }
        if (tty && !isatty(STDIN_FILENO)) {
                log_error("%s (-t needs a terminal on stdin)", TERMINAL_NOT_A_TTY);
                return HUTCH_EXIT_FAILURE;
        }
        if (json_path) {
                json_fd =
                        open(json_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0644);
                if (json_fd < 0) {
                        log_error("failed to open the --json file '%s': %m", json_path);
                        return HUTCH_EXIT_FAILURE;
                }
        }
        /* Ctrl-C and friends go to the command, not to us. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGHUP);
        sigaddset(&mask, SIGQUIT);
        if (!req.detach && sigprocmask(SIG_BLOCK, &mask, NULL) >= 0)
                sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (tty) {
                /* The command's stdin, stdout and stderr: the channel its
                 * pty's master comes out on (docs/terminal.md). */
                r = terminal_relay_start(&term, interactive);
                if (r < 0) {
                        log_error_errno(r, "failed to set up the terminal: %m");
                        return HUTCH_EXIT_FAILURE;
                }
                req.fds[0] = req.fds[1] = req.fds[2] = term.chan;
        }
        r = hutch_ext_exec_run(name, &req, tty, sigfd, &id, &exit_code, &json, &err);
        /* The last output, and the caller's terminal as it was, before
         * anything of ours is printed. */
        terminal_relay_finish(&term);
        if (r < 0)
                return cli_fail(&err, r);
        if (req.detach) {
                (void)printf("%llu\n", (unsigned long long)id);
                return 0;
        }
        if (exit_code == 127)
                command_not_found_hint(req.argv);
        if (!quiet && json)
                exec_print_refusals(json);
        if (json_fd >= 0 && json) {
                r = loop_write(json_fd, json, strlen(json));
                if (r >= 0)
                        r = loop_write(json_fd, "\n", 1);
                if (r < 0) {
                        log_error_errno(r, "failed to write the outcome: %m");
                        return HUTCH_EXIT_FAILURE;
                }
        }
        return exit_code;
}

/* ---- ls, stop, rm, logs, gc ---- */

void persist_format_time(uint64_t ms, char *buf, size_t size) {
        time_t t = (time_t)(ms / 1000);
        struct tm tm;

        if (!ms || !localtime_r(&t, &tm) || strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm) == 0)
                (void)snprintf(buf, size, "-");
}

int verb_ls(int argc, char **argv) {
        _cleanup_strv_free_ char **names = NULL;
        HutchExtLsEntry *l = NULL;
        bool as_json = argc == 2 && strcmp(argv[1], "--json") == 0;
        bool quiet = argc == 2 && (strcmp(argv[1], "-q") == 0 || strcmp(argv[1], "--quiet") == 0);
        HutchError err = {};
        size_t n = 0;
        json_t *arr;
        int r;

        if (argc > 1 && !as_json && !quiet) {
                log_error("usage: hutch ls [--json | -q]");
                return HUTCH_EXIT_FAILURE;
        }
        if (quiet) {
                r = hutch_ext_sandbox_names(&names, &err);
                if (r < 0)
                        return cli_fail(&err, r);
                STRV_FOREACH(name, names)
                        (void)printf("%s\n", *name);
                return 0;
        }
        r = hutch_ext_ls(as_json, &l, &n, &err);
        if (r == -ENOMEM && !err.msg[0])
                return log_oom();
        if (r < 0)
                return cli_fail(&err, r);
        arr = json_array();
        if (!as_json)
                (void)printf("%-24s %-8s %-7s %-19s  %-19s  %10s  %s\n", "NAME", "STATE", "BACKEND",
                             "CREATED", "LAST USED", "DISK", "FROM");
        for (size_t i = 0; i < n; i++) {
                const HutchExtLsEntry *e = l + i;
                char created[32], used[32];

                if (e->damaged) {
                        if (!as_json)
                                (void)printf("%-24s %-8s\n", e->name, "damaged");
                        continue;
                }
                if (as_json) {
                        json_t *ports = json_loads(e->ports_json, 0, NULL);

                        (void)json_array_append_new(
                                arr, json_pack("{s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:o,s:o}", "name",
                                               e->name, "id", e->id, "state",
                                               e->running ? "running" : "stopped", "backend",
                                               e->backend, "created_ms", (json_int_t)e->created_ms,
                                               "last_used_ms", (json_int_t)e->last_used_ms,
                                               "disk_bytes", (json_int_t)e->disk_bytes,
                                               "disk_limit_bytes", (json_int_t)e->disk_limit,
                                               "degraded", degraded_json(e->degraded), "parent",
                                               e->parent ? json_string(e->parent) : json_null()));
                        (void)json_object_set_new(json_array_get(arr, json_array_size(arr) - 1),
                                                  "from",
                                                  e->from ? json_string(e->from) : json_null());
                        (void)json_object_set_new(json_array_get(arr, json_array_size(arr) - 1),
                                                  "usage_bytes",
                                                  json_integer((json_int_t)e->usage));
                        (void)json_object_set_new(
                                json_array_get(arr, json_array_size(arr) - 1), "image",
                                e->image[0] ? json_string(e->image) : json_null());
                        (void)json_object_set_new(json_array_get(arr, json_array_size(arr) - 1),
                                                  "ports", ports ? ports : json_array());
                        continue;
                }
                persist_format_time(e->created_ms, created, sizeof(created));
                persist_format_time(e->last_used_ms, used, sizeof(used));
                (void)printf("%-24s %-8s %-7s %-19s  %-19s  %9.1fM  %s\n", e->name,
                             e->running ? "running" : "stopped", e->backend, created, used,
                             (double)e->usage / (1024.0 * 1024.0), e->from ? e->from : "-");
        }
        (void)hutch_ext_ls_free(l, n);
        if (as_json) {
                _cleanup_free_ char *text = json_dumps(arr, JSON_COMPACT);

                (void)printf("%s\n", text ? text : "[]");
        }
        json_decref(arr);
        return 0;
}

int verb_stop(int argc, char **argv) {
        _cleanup_free_ char *name = NULL;
        HutchError err = {};
        int r;

        if (argc != 2) {
                log_error("usage: hutch stop NAME");
                return HUTCH_EXIT_FAILURE;
        }
        r = hutch_ext_stop(argv[1], &name, &err);
        if (r < 0)
                return cli_fail(&err, r);
        if (r == 0)
                log_info("sandbox '%s' is not running", name);
        return 0;
}

int verb_rm(int argc, char **argv) {
        bool force = false;
        const char *name = NULL;
        HutchError err = {};
        int r;

        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--force") == 0 || strcmp(argv[i], "-f") == 0)
                        force = true;
                else if (!name && argv[i][0] != '-')
                        name = argv[i];
                else {
                        log_error("usage: hutch rm [--force] NAME");
                        return HUTCH_EXIT_FAILURE;
                }
        }
        if (!name) {
                log_error("usage: hutch rm [--force] NAME");
                return HUTCH_EXIT_FAILURE;
        }
        r = hutch_ext_destroy(name, force, &err);
        if (r < 0)
                return cli_fail(&err, r);
        return 0;
}

static int cat_file(const char *path) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        char buf[65536];
        ssize_t n;

        if (fd < 0)
                return negative_errno();
        while ((n = read(fd, buf, sizeof(buf))) > 0)
                if (loop_write(STDOUT_FILENO, buf, (size_t)n) < 0)
                        return -EIO;
        return n < 0 ? negative_errno() : 0;
}

int verb_logs(int argc, char **argv) {
        _cleanup_free_ char *path = NULL, *text = NULL, *rec_name = NULL;
        const char *name = NULL, *exec_id = NULL;
        HutchError err = {};
        bool as_json = false, audit = false, follow = false;
        int r;

        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--json") == 0)
                        as_json = true;
                else if (strcmp(argv[i], "--audit") == 0)
                        audit = true;
                else if (strcmp(argv[i], "--exec") == 0 && i + 1 < argc)
                        exec_id = argv[++i];
                else if (strcmp(argv[i], "--follow") == 0 || strcmp(argv[i], "-f") == 0)
                        follow = true;
                else if (!name && argv[i][0] != '-')
                        name = argv[i];
                else {
                        log_error("usage: hutch logs NAME [--json | --exec ID [--follow] | "
                                  "--audit]");
                        return HUTCH_EXIT_FAILURE;
                }
        }
        if (!name || (follow && !exec_id)) {
                log_error("usage: hutch logs NAME [--json | --exec ID [--follow] | --audit]");
                return HUTCH_EXIT_FAILURE;
        }
        /* A detached exec's output: stdout to stdout, stderr to stderr
         * (docs/processes.md). */
        if (exec_id)
                return procs_print_output(name, exec_id, follow);
        r = hutch_ext_sandbox_file(name, audit ? "audit.jsonl" : "history.jsonl", &rec_name, &path,
                                   &err);
        if (r < 0)
                return cli_fail(&err, r);
        if (audit) {
                r = cat_file(path);
                if (r == -ENOENT)
                        return 0; /* no network requests yet */
                if (r < 0) {
                        log_error("no audit log for sandbox '%s'", rec_name);
                        return HUTCH_EXIT_FAILURE;
                }
                return 0;
        }
        r = read_full_file(path, 256U << 20, &text);
        if (r == -ENOENT)
                return 0;
        if (r < 0) {
                log_error_errno(r, "cannot read %s: %m", path);
                return HUTCH_EXIT_FAILURE;
        }
        if (as_json) {
                (void)fputs(text, stdout);
                return 0;
        }
        (void)printf("%-6s %-19s  %8s  %-8s %4s  %s\n", "ID", "STARTED", "WALL", "REASON", "EXIT",
                     "COMMAND");
        for (char *line = text, *next; line && *line; line = next) {
                json_t *j, *o;
                char started[32];
                _cleanup_free_ char *cmd = NULL;

                next = strchr(line, '\n');
                if (next)
                        *next++ = '\0';
                j = json_loads(line, 0, NULL);
                if (!json_is_object(j)) {
                        json_decref(j);
                        continue;
                }
                o = json_object_get(j, "outcome");
                cmd = json_dumps(json_object_get(j, "argv"), JSON_COMPACT);
                persist_format_time((uint64_t)json_integer_value(json_object_get(j, "start_ms")),
                                    started, sizeof(started));
                (void)printf("%-6lld %-19s  %6lldms  %-8s %4lld  %s%s\n",
                             json_integer_value(json_object_get(j, "id")), started,
                             json_integer_value(json_object_get(o, "wall_ms")),
                             json_string_value(json_object_get(o, "reason"))
                                     ? json_string_value(json_object_get(o, "reason"))
                                     : "-",
                             json_integer_value(json_object_get(o, "exit_code")), cmd ? cmd : "[]",
                             json_is_true(json_object_get(j, "detached")) ? " (detached)" : "");
                json_decref(j);
        }
        return 0;
}

int verb_gc(int argc, char **argv) {
        HutchError err = {};
        unsigned n = 0;
        int r;

        if (argc != 1) {
                log_error("usage: hutch gc");
                return HUTCH_EXIT_FAILURE;
        }
        r = hutch_ext_gc(&n, &err);
        if (r < 0)
                return cli_fail(&err, r);
        (void)printf("removed %u leftover%s\n", n, n == 1 ? "" : "s");
        return 0;
}
