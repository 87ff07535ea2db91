/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Persistent sandboxes: hutch create, exec, ls, stop, rm, logs, gc and the
 * keeper's own entry point (docs/persistent.md). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "fd-util.h"
#include "log.h"
#include "parse-util.h"
#include "persist.h"
#include "run-flags.h"
#include "sandbox/keeper.h"
#include "store/diff.h"
#include "store/store.h"
#include "strv.h"

/* How long `hutch exec` waits for a keeper it started to be ready. */
#define KEEPER_START_TIMEOUT_MS 60000
/* How long a stopping keeper (its socket gone, its lock still held while
 * it cleans up) is waited for, by `stop` and by the next keeper. */
#define KEEPER_EXIT_TIMEOUT_MS 10000
#define KEEPER_EXIT_POLL_MS 10
/* How often `hutch exec` tries again when a keeper was stopping (idle)
 * as the command came, so that it did not start it. */
#define EXEC_ATTEMPTS 3

static int log_oom(void) {
        log_error("out of memory");
        return HUTCH_EXIT_FAILURE;
}

static int fail(const HutchError *err, int r) {
        log_error("%s", err->msg[0] ? err->msg : strerror(-r));
        return HUTCH_EXIT_FAILURE;
}

int persist_open(const char *name, Store **ret_store, SandboxRecord **ret_rec) {
        _cleanup_(store_freep) Store *s = NULL;
        HutchError err = {};
        int r;

        r = store_open(&s, &err);
        if (r < 0)
                return fail(&err, r);
        if (name) {
                r = store_sandbox_load(s, name, ret_rec, &err);
                if (r < 0)
                        return fail(&err, r);
        }
        *ret_store = TAKE_PTR(s);
        return 0;
}

/* ---- create ---- */

static void create_usage(FILE *f) {
        (void)fprintf(f, "usage: hutch create NAME [--from SNAPSHOT] [--idle-timeout DURATION] "
                         "[POLICY FLAGS]\n\n"
                         "Creates a persistent sandbox. The policy flags are those of 'hutch "
                         "run' (see 'hutch run --help'),\nexcept --json, --disk and "
                         "--output-limit; a workspace without a mode is an overlay.\n");
}

int verb_create(int argc, char **argv) {
        _cleanup_(run_args_done) RunArgs args = {.json_fd = -EBADF};
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        _cleanup_(snapshot_record_freep) SnapshotRecord *snap = NULL;
        _cleanup_strv_free_ char **chain = NULL;
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
                return fail(&err, r);
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
        if (!store_name_is_valid(name)) {
                log_error("invalid sandbox name '%s': it must match [a-z0-9][a-z0-9_.-]{0,62}",
                          name);
                return HUTCH_EXIT_FAILURE;
        }
        r = persist_open(NULL, &s, NULL);
        if (r != 0)
                return r;

        rec = calloc(1, sizeof(SandboxRecord));
        if (!rec)
                return log_oom();
        rec->name = strdup(name);
        rec->created_ms = store_now_ms();
        rec->gen = 1;
        rec->idle_timeout_ms = args.idle_timeout_ms;
        if (!rec->name || store_new_id(&rec->id) < 0)
                return log_oom();
        if (args.from) {
                r = store_snapshot_load(s, args.from, &snap, &err);
                if (r < 0)
                        return fail(&err, r);
                /* The chain must fit under the sandbox's own layer. */
                r = store_snapshot_chain(s, snap->name, SANDBOX_MAX_LAYERS, &chain, &err);
                if (r < 0)
                        return fail(&err, r);
                rec->parent = strdup(snap->name);
                if (!rec->parent)
                        return log_oom();
        }
        if (snap && !args.policy_given)
                rec->policy_json = strdup(snap->policy_json);
        else
                r = policy_to_json(args.policy, &rec->policy_json);
        if (r < 0 || !rec->policy_json) {
                log_error("cannot store this policy: %s",
                          r == -EILSEQ ? "a path or value is not valid UTF-8" : strerror(-r));
                return HUTCH_EXIT_FAILURE;
        }
        r = store_sandbox_create(s, rec, &err);
        if (r < 0)
                return fail(&err, r);
        r = persist_record_workspace(s, rec, snap, &err);
        if (r < 0) {
                HutchError ignored = {};

                (void)store_sandbox_remove(s, rec->name, &ignored);
                return fail(&err, r);
        }
        (void)printf("%s\n", rec->id);
        return 0;
}

/* ---- the keeper ---- */

/* Takes the keeper's lock @fd. Our starter found no socket, so a keeper
 * still holding it is one that is stopping (idle, or a `stop` that raced
 * with this start): it is given the time to finish. */
static int keeper_lock_take(int fd) {
        for (unsigned waited = 0;; waited += KEEPER_EXIT_POLL_MS) {
                if (flock(fd, LOCK_EX | LOCK_NB) == 0)
                        return 0;
                if (errno != EWOULDBLOCK && errno != EINTR)
                        return negative_errno();
                if (waited >= KEEPER_EXIT_TIMEOUT_MS)
                        return -EBUSY;
                (void)usleep(KEEPER_EXIT_POLL_MS * 1000);
        }
}

/* hutch __keeper NAME READY_FD: the detached supervisor (started by exec). */
int verb_keeper(int argc, char **argv) {
        extern char **environ;
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        _cleanup_(policy_freep) Policy *policy = NULL;
        _cleanup_strv_free_ char **chain = NULL;
        _cleanup_free_ char *state = NULL, *sock = NULL, *lockp = NULL, *data = NULL, *logs = NULL,
                            *history = NULL, *audit = NULL;
        _cleanup_close_ int lock = -EBADF;
        char upper[64];
        HutchError err = {};
        KeeperConfig cfg;
        int ready_fd, r;

        if (argc != 3 || safe_atoi(argv[2], &ready_fd) < 0 || ready_fd < 3)
                return HUTCH_EXIT_FAILURE;
        (void)fcntl(ready_fd, F_SETFD, FD_CLOEXEC);

        r = store_open(&s, &err);
        if (r >= 0)
                r = store_sandbox_load(s, argv[1], &rec, &err);
        if (r >= 0) {
                policy = policy_new();
                r = policy ? policy_load_json(policy, rec->policy_json, strlen(rec->policy_json),
                                              &err)
                           : -ENOMEM;
        }
        if (r >= 0)
                r = policy_validate(policy, &err);
        if (r >= 0)
                r = store_snapshot_chain(s, rec->parent, SANDBOX_MAX_LAYERS, &chain, &err);
        if (r >= 0 && (store_state_path(s, rec->name, NULL, &state) < 0 ||
                       store_state_path(s, rec->name, "keeper.sock", &sock) < 0 ||
                       store_state_path(s, rec->name, "keeper.lock", &lockp) < 0 ||
                       store_sandbox_path(s, rec->name, "data", &data) < 0 ||
                       store_sandbox_path(s, rec->name, "logs", &logs) < 0 ||
                       store_sandbox_path(s, rec->name, "history.jsonl", &history) < 0 ||
                       store_sandbox_path(s, rec->name, "audit.jsonl", &audit) < 0))
                r = hutch_error_set(&err, ENOMEM, "out of memory");
        if (r >= 0 && mkdir(state, 0700) < 0 && errno != EEXIST)
                r = hutch_error_set(&err, errno, "cannot create %s: %m", state);
        if (r >= 0) {
                lock = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
                if (lock < 0 || keeper_lock_take(lock) < 0)
                        r = hutch_error_set(&err, EBUSY, "another keeper runs sandbox '%s' already",
                                            rec->name);
        }
        /* The network audit log of a persistent sandbox is kept with it. */
        if (r >= 0 && policy_network_mode(policy) == NETWORK_MODE_ALLOW && !policy->audit_log)
                r = policy_set_audit_log(policy, audit, &err);
        if (r < 0) {
                char line[600];

                (void)snprintf(line, sizeof(line), "error: %s\n",
                               err.msg[0] ? err.msg : strerror(-r));
                (void)loop_write(ready_fd, line, strlen(line));
                return HUTCH_EXIT_FAILURE;
        }
        (void)snprintf(upper, sizeof(upper), "upper-%llu", (unsigned long long)rec->gen);
        cfg = (KeeperConfig){
                .policy = policy,
                .layers = {.data_dir = data, .upper = upper, .layers = chain},
                .socket_path = sock,
                .logs_dir = logs,
                .history_path = history,
                .idle_timeout_ms = rec->idle_timeout_ms,
                .ready_fd = ready_fd,
        };
        r = sandbox_keep(&cfg, environ, &err);
        if (r < 0) {
                log_error("%s", err.msg[0] ? err.msg : strerror(-r));
                return HUTCH_EXIT_FAILURE;
        }
        return 0;
}

/* Starts the keeper of @name, detached (double fork, new session), and
 * waits until it is ready or reports why not. The caller holds the
 * sandbox's lock. */
static int keeper_spawn(const Store *s, const char *name, HutchError *reterr) {
        _cleanup_free_ char *log_path = NULL, *state = NULL;
        char buf[1024];
        int pipes[2], status = 0;
        ssize_t n;
        pid_t pid;

        if (store_state_path(s, name, NULL, &state) < 0 ||
            store_state_path(s, name, "keeper.log", &log_path) < 0)
                return -ENOMEM;
        if (mkdir(state, 0700) < 0 && errno != EEXIST)
                return hutch_error_set(reterr, errno, "cannot create %s: %m", state);
        if (pipe2(pipes, O_CLOEXEC) < 0)
                return hutch_error_set(reterr, errno, "pipe: %m");
        pid = fork();
        if (pid < 0) {
                int e = errno;

                (void)close(pipes[0]);
                (void)close(pipes[1]);
                return hutch_error_set(reterr, e, "fork: %s", strerror(e));
        }
        if (pid == 0) {
                char fd_arg[16];
                int null_fd, log_fd;
                sigset_t none;

                (void)close(pipes[0]);
                /* Not the signals a retrying `exec` blocks for its command. */
                sigemptyset(&none);
                (void)sigprocmask(SIG_SETMASK, &none, NULL);
                if (setsid() < 0 || fork() != 0)
                        _exit(0);
                null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
                log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW,
                              0600);
                if (null_fd < 0 || log_fd < 0 || dup2(null_fd, 0) < 0 || dup2(null_fd, 1) < 0 ||
                    dup2(log_fd, 2) < 0)
                        _exit(125);
                if (chdir("/") < 0)
                        _exit(125);
                (void)fcntl(pipes[1], F_SETFD, 0);
                (void)snprintf(fd_arg, sizeof(fd_arg), "%d", pipes[1]);
                (void)execl("/proc/self/exe", "hutch", "__keeper", name, fd_arg, (char *)NULL);
                _exit(125);
        }
        (void)close(pipes[1]);
        (void)waitpid(pid, &status, 0);
        n = read_until_eof(pipes[0], buf, sizeof(buf) - 1, KEEPER_START_TIMEOUT_MS);
        (void)close(pipes[0]);
        if (n < 0)
                return hutch_error_set(reterr, -n, "the sandbox did not start: %s",
                                       strerror((int)-n));
        buf[n] = '\0';
        if (strncmp(buf, "ok\n", 3) == 0)
                return 0;
        buf[strcspn(buf, "\n")] = '\0';
        if (strncmp(buf, "error: ", 7) == 0)
                return hutch_error_set(reterr, EIO, "failed to start sandbox '%s': %s", name,
                                       buf + 7);
        return hutch_error_set(reterr, EIO, "failed to start sandbox '%s' (see %s)", name,
                               log_path);
}

int persist_connect(const Store *s, const char *name, bool start, int *ret_sock,
                    HutchError *reterr) {
        _cleanup_free_ char *sock_path = NULL;
        _cleanup_close_ int lock = -EBADF;
        int fd, r;

        if (store_state_path(s, name, "keeper.sock", &sock_path) < 0)
                return -ENOMEM;
        fd = keeper_connect(sock_path);
        if (fd >= 0 || !start) {
                if (fd < 0)
                        return fd;
                *ret_sock = fd;
                return 0;
        }
        /* One starter at a time; the others find it running. */
        r = store_lock_sandbox(s, name, &lock);
        if (r < 0)
                return hutch_error_set(reterr, -r, "no sandbox named '%s'", name);
        fd = keeper_connect(sock_path);
        if (fd < 0) {
                r = keeper_spawn(s, name, reterr);
                if (r < 0)
                        return r;
                fd = keeper_connect(sock_path);
                if (fd < 0)
                        return hutch_error_set(reterr, -fd, "cannot reach sandbox '%s': %s", name,
                                               strerror(-fd));
        }
        *ret_sock = fd;
        return 0;
}

/* ---- exec ---- */

static void exec_usage(FILE *f) {
        (void)fprintf(f, "usage: hutch exec NAME [-d] [-e K=V] [-w DIR] [--timeout DURATION] "
                         "[--json FILE] -- CMD [ARGS...]\n\n"
                         "Runs CMD in the persistent sandbox NAME (started on demand).\n"
                         "  -d, --detach        run in the background; output goes to 'hutch logs "
                         "NAME --exec ID'\n"
                         "  -e, --env K=V       set a variable for this command (repeatable)\n"
                         "  -w, --workdir DIR   working directory (absolute)\n"
                         "  --timeout DURATION  kill the command and everything it started after "
                         "this long\n"
                         "  --json FILE         write the outcome as JSON to FILE\n");
}

int verb_exec(int argc, char **argv) {
        static const struct option options[] = {{"detach", no_argument, NULL, 'd'},
                                                {"env", required_argument, NULL, 'e'},
                                                {"workdir", required_argument, NULL, 'w'},
                                                {"timeout", required_argument, NULL, 't'},
                                                {"json", required_argument, NULL, 'j'},
                                                {"help", no_argument, NULL, 'h'},
                                                {}};
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        _cleanup_strv_free_ char **env = NULL;
        _cleanup_free_ char *json = NULL;
        _cleanup_close_ int sock = -EBADF, sigfd = -EBADF, json_fd = -EBADF;
        KeeperExec req = {.fds = {0, 1, 2}};
        const char *json_path = NULL, *name = NULL;
        HutchError err = {};
        sigset_t mask;
        uint64_t id = 0;
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
        while ((c = getopt_long(argc, argv, "+de:w:h", options, NULL)) >= 0)
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
                case 't':
                        if (parse_duration_ms(optarg, &req.timeout_ms) < 0) {
                                log_error("invalid --timeout '%s' (500ms, 30s, 5m, 1h)", optarg);
                                return HUTCH_EXIT_FAILURE;
                        }
                        break;
                case 'j':
                        json_path = optarg;
                        break;
                case 'h':
                        exec_usage(stdout);
                        return 0;
                default:
                        log_error("unknown or incomplete option '%s' (see 'hutch exec --help')",
                                  argv[optind - 1]);
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
        if (json_path) {
                json_fd =
                        open(json_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0644);
                if (json_fd < 0) {
                        log_error("failed to open the --json file '%s': %m", json_path);
                        return HUTCH_EXIT_FAILURE;
                }
        }
        r = persist_open(name, &s, &rec);
        if (r != 0)
                return r;
        r = persist_connect(s, rec->name, true, &sock, &err);
        if (r < 0)
                return fail(&err, r);

        /* Ctrl-C and friends go to the command, not to us. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGHUP);
        sigaddset(&mask, SIGQUIT);
        if (!req.detach && sigprocmask(SIG_BLOCK, &mask, NULL) >= 0)
                sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        for (unsigned attempt = 1;; attempt++) {
                r = keeper_exec(sock, &req, sigfd, &id, &exit_code, &json, &err);
                /* The keeper went away before it started the command (it
                 * stopped for idleness or a `stop` as we came): it did
                 * not run, so a new keeper can run it. */
                if (r != -ECONNRESET || attempt >= EXEC_ATTEMPTS)
                        break;
                sock = safe_close(sock);
                err = (HutchError){};
                r = persist_connect(s, rec->name, true, &sock, &err);
                if (r < 0)
                        break;
        }
        if (r < 0)
                return fail(&err, r);
        if (req.detach) {
                (void)printf("%llu\n", (unsigned long long)id);
                return 0;
        }
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

static void format_time(uint64_t ms, char *buf, size_t size) {
        time_t t = (time_t)(ms / 1000);
        struct tm tm;

        if (!ms || !localtime_r(&t, &tm) || strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm) == 0)
                (void)snprintf(buf, size, "-");
}

static uint64_t last_used_ms(const Store *s, const SandboxRecord *rec) {
        _cleanup_free_ char *path = NULL;
        struct stat st;

        if (store_sandbox_path(s, rec->name, "history.jsonl", &path) >= 0 && stat(path, &st) == 0)
                return (uint64_t)st.st_mtim.tv_sec * 1000U +
                       (uint64_t)st.st_mtim.tv_nsec / 1000000U;
        return rec->created_ms;
}

int verb_ls(int argc, char **argv) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_strv_free_ char **names = NULL;
        bool as_json = argc == 2 && strcmp(argv[1], "--json") == 0;
        json_t *arr = json_array();
        int r;

        if (argc > 1 && !as_json) {
                log_error("usage: hutch ls [--json]");
                json_decref(arr);
                return HUTCH_EXIT_FAILURE;
        }
        r = persist_open(NULL, &s, NULL);
        if (r != 0) {
                json_decref(arr);
                return r;
        }
        r = store_list(s, "sandboxes", &names);
        if (r < 0) {
                json_decref(arr);
                log_error_errno(r, "cannot list the sandboxes: %m");
                return HUTCH_EXIT_FAILURE;
        }
        if (!as_json)
                (void)printf("%-24s %-8s %-19s  %-19s  %10s  %s\n", "NAME", "STATE", "CREATED",
                             "LAST USED", "DISK", "FROM");
        STRV_FOREACH(n, names) {
                _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
                _cleanup_free_ char *data = NULL;
                HutchError ignored = {};
                char created[32], used[32];
                uint64_t disk, last;
                bool running;

                if (store_sandbox_load(s, *n, &rec, &ignored) < 0) {
                        if (!as_json)
                                (void)printf("%-24s %-8s\n", *n, "damaged");
                        continue;
                }
                running = store_keeper_running(s, rec->name);
                disk = store_sandbox_path(s, rec->name, "data", &data) >= 0 ? store_disk_usage(data)
                                                                            : 0;
                last = last_used_ms(s, rec);
                if (as_json) {
                        (void)json_array_append_new(
                                arr,
                                json_pack("{s:s,s:s,s:s,s:I,s:I,s:I,s:o}", "name", rec->name, "id",
                                          rec->id, "state", running ? "running" : "stopped",
                                          "created_ms", (json_int_t)rec->created_ms, "last_used_ms",
                                          (json_int_t)last, "disk_bytes", (json_int_t)disk,
                                          "parent",
                                          rec->parent ? json_string(rec->parent) : json_null()));
                        continue;
                }
                format_time(rec->created_ms, created, sizeof(created));
                format_time(last, used, sizeof(used));
                (void)printf("%-24s %-8s %-19s  %-19s  %9.1fM  %s\n", rec->name,
                             running ? "running" : "stopped", created, used,
                             (double)disk / (1024.0 * 1024.0), rec->parent ? rec->parent : "-");
        }
        if (as_json) {
                _cleanup_free_ char *text = json_dumps(arr, JSON_COMPACT);

                (void)printf("%s\n", text ? text : "[]");
        }
        json_decref(arr);
        return 0;
}

int persist_stop(const Store *s, const char *name, HutchError *reterr) {
        _cleanup_close_ int sock = -EBADF;
        int r;

        r = persist_connect(s, name, false, &sock, reterr);
        if (r < 0)
                return 0; /* not running */
        r = keeper_simple(sock, "stop", reterr);
        if (r < 0)
                return r;
        /* The keeper answers once the sandbox is down, then removes its
         * cgroups and proxy and exits: stopped means that is done too. */
        for (unsigned waited = 0; store_keeper_running(s, name); waited += KEEPER_EXIT_POLL_MS) {
                if (waited >= KEEPER_EXIT_TIMEOUT_MS)
                        return hutch_error_set(reterr, ETIMEDOUT,
                                               "sandbox '%s' was stopped, but its keeper did not "
                                               "exit",
                                               name);
                (void)usleep(KEEPER_EXIT_POLL_MS * 1000);
        }
        return 1;
}

int verb_stop(int argc, char **argv) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        HutchError err = {};
        int r;

        if (argc != 2) {
                log_error("usage: hutch stop NAME");
                return HUTCH_EXIT_FAILURE;
        }
        r = persist_open(argv[1], &s, &rec);
        if (r != 0)
                return r;
        r = persist_stop(s, rec->name, &err);
        if (r < 0)
                return fail(&err, r);
        if (r == 0)
                log_info("sandbox '%s' is not running", rec->name);
        return 0;
}

int verb_rm(int argc, char **argv) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        _cleanup_close_ int lock = -EBADF;
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
        r = persist_open(name, &s, &rec);
        if (r != 0)
                return r;
        r = store_lock_sandbox(s, rec->name, &lock);
        if (r < 0) {
                log_error("no sandbox named '%s'", name);
                return HUTCH_EXIT_FAILURE;
        }
        if (store_keeper_running(s, rec->name)) {
                if (!force) {
                        log_error("sandbox '%s' is running; stop it first or use --force",
                                  rec->name);
                        return HUTCH_EXIT_FAILURE;
                }
                r = persist_stop(s, rec->name, &err);
                if (r < 0)
                        return fail(&err, r);
        }
        r = store_sandbox_remove(s, rec->name, &err);
        if (r < 0)
                return fail(&err, r);
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
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        _cleanup_free_ char *path = NULL, *text = NULL;
        const char *name = NULL, *exec_id = NULL;
        bool as_json = false, audit = false;
        int r;

        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--json") == 0)
                        as_json = true;
                else if (strcmp(argv[i], "--audit") == 0)
                        audit = true;
                else if (strcmp(argv[i], "--exec") == 0 && i + 1 < argc)
                        exec_id = argv[++i];
                else if (!name && argv[i][0] != '-')
                        name = argv[i];
                else {
                        log_error("usage: hutch logs NAME [--json | --exec ID | --audit]");
                        return HUTCH_EXIT_FAILURE;
                }
        }
        if (!name) {
                log_error("usage: hutch logs NAME [--json | --exec ID | --audit]");
                return HUTCH_EXIT_FAILURE;
        }
        r = persist_open(name, &s, &rec);
        if (r != 0)
                return r;
        if (exec_id || audit) {
                char sub[64];
                uint64_t id;

                if (exec_id && safe_atou64(exec_id, &id) < 0) {
                        log_error("invalid exec id '%s'", exec_id);
                        return HUTCH_EXIT_FAILURE;
                }
                if (exec_id)
                        (void)snprintf(sub, sizeof(sub), "logs/exec-%llu.log",
                                       (unsigned long long)id);
                else
                        (void)snprintf(sub, sizeof(sub), "audit.jsonl");
                if (store_sandbox_path(s, rec->name, sub, &path) < 0)
                        return log_oom();
                r = cat_file(path);
                if (r == -ENOENT && audit)
                        return 0; /* no network requests yet */
                if (r < 0) {
                        log_error("no %s for sandbox '%s'", exec_id ? "such exec log" : "audit log",
                                  rec->name);
                        return HUTCH_EXIT_FAILURE;
                }
                return 0;
        }
        if (store_sandbox_path(s, rec->name, "history.jsonl", &path) < 0)
                return log_oom();
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
                format_time((uint64_t)json_integer_value(json_object_get(j, "start_ms")), started,
                            sizeof(started));
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
        _cleanup_(store_freep) Store *s = NULL;
        HutchError err = {};
        unsigned n = 0;
        int r;

        if (argc != 1) {
                log_error("usage: hutch gc");
                return HUTCH_EXIT_FAILURE;
        }
        r = persist_open(NULL, &s, NULL);
        if (r != 0)
                return r;
        r = store_gc(s, &n, &err);
        if (r < 0)
                return fail(&err, r);
        (void)printf("removed %u leftover%s\n", n, n == 1 ? "" : "s");
        return 0;
}

int persist_write_manifest(const Store *s, const SandboxRecord *rec, int host_fd,
                           HutchError *reterr) {
        _cleanup_free_ char *path = NULL, *tmp = NULL;
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (store_sandbox_path(s, rec->name, "ws-manifest", &path) < 0 ||
            asprintf(&tmp, "%s.tmp", path) < 0)
                return -ENOMEM;
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return hutch_error_set(reterr, errno, "cannot create %s: %m", tmp);
        r = ws_manifest_write(host_fd, fd, reterr);
        if (r >= 0 && fsync(fd) < 0)
                r = hutch_error_set(reterr, errno, "cannot write %s: %m", tmp);
        if (r >= 0 && rename(tmp, path) < 0)
                r = hutch_error_set(reterr, errno, "cannot create %s: %m", path);
        if (r < 0)
                (void)unlink(tmp);
        return r;
}

int persist_record_workspace(const Store *s, const SandboxRecord *rec, const SnapshotRecord *snap,
                             HutchError *reterr) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        _cleanup_close_ int host = -EBADF;
        int r;

        if (!p)
                return -ENOMEM;
        r = policy_load_json(p, rec->policy_json, strlen(rec->policy_json), reterr);
        if (r < 0)
                return r;
        if (!p->workspace || p->workspace_mode != WORKSPACE_MODE_OVERLAY)
                return 0;
        if (snap) {
                /* The snapshot's layers sit on the host folder as it was
                 * when its first sandbox was created: keep that record. */
                _cleanup_free_ char *from = NULL, *to = NULL;

                if (!snap->has_manifest)
                        return 0;
                if (store_snapshot_path(s, snap->name, "ws-manifest", &from) < 0 ||
                    store_sandbox_path(s, rec->name, NULL, &to) < 0)
                        return -ENOMEM;
                r = store_file_copy(from, to, "ws-manifest");
                if (r < 0)
                        return hutch_error_set(reterr, -r, "cannot copy %s: %s", from,
                                               strerror(-r));
                return 0;
        }
        host = open(p->workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (host < 0)
                return hutch_error_set(reterr, errno, "cannot open the workspace '%s': %m",
                                       p->workspace);
        return persist_write_manifest(s, rec, host, reterr);
}
