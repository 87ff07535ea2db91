/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "parse-util.h"
#include "run-flags.h"
#include "strv.h"

enum {
        ARG_ENV_PASS = 0x100,
        ARG_WORKSPACE,
        ARG_TMPFS,
        ARG_READ_ONLY,
        ARG_HOSTNAME,
        ARG_NETWORK,
        ARG_DNS,
        ARG_POLICY,
        ARG_JSON,
        ARG_JSON_FD,
        ARG_MEMORY,
        ARG_MEMORY_SWAP,
        ARG_CPUS,
        ARG_PIDS,
        ARG_TIMEOUT,
        ARG_DISK,
        ARG_OUTPUT_LIMIT,
        ARG_ALLOW_DEGRADED,
        ARG_ALLOW_HOST,
        ARG_DENY_HOST,
        ARG_ALLOW_PRIVATE,
        ARG_RESOLVE,
        ARG_AUDIT_LOG,
        ARG_SECRET,
        ARG_UPSTREAM_CA,
        ARG_FROM,
        ARG_IDLE_TIMEOUT,
        ARG_BACKEND,
        ARG_VM_ACCEL,
        ARG_VM_KERNEL,
        ARG_RM,
        ARG_CAP_DROP,
        ARG_CAP_ADD,
        ARG_IMAGE,
        ARG_TTY,
        ARG_INTERACTIVE,
};

/* The flags that set the policy, and what each sets (hutch-ext.h). */
static const struct {
        int arg;
        HutchExtFlag flag;
} policy_flags[] = {
        {'v', HUTCH_EXT_FLAG_VOLUME},
        {'w', HUTCH_EXT_FLAG_WORKDIR},
        {'u', HUTCH_EXT_FLAG_USER},
        {'e', HUTCH_EXT_FLAG_ENV},
        {ARG_ENV_PASS, HUTCH_EXT_FLAG_ENV_PASS},
        {ARG_WORKSPACE, HUTCH_EXT_FLAG_WORKSPACE},
        {ARG_TMPFS, HUTCH_EXT_FLAG_TMPFS},
        {ARG_READ_ONLY, HUTCH_EXT_FLAG_READ_ONLY},
        {ARG_HOSTNAME, HUTCH_EXT_FLAG_HOSTNAME},
        {ARG_NETWORK, HUTCH_EXT_FLAG_NETWORK},
        {ARG_DNS, HUTCH_EXT_FLAG_DNS},
        {ARG_ALLOW_DEGRADED, HUTCH_EXT_FLAG_ALLOW_DEGRADED},
        {ARG_ALLOW_HOST, HUTCH_EXT_FLAG_ALLOW_HOST},
        {'p', HUTCH_EXT_FLAG_PUBLISH},
        {ARG_DENY_HOST, HUTCH_EXT_FLAG_DENY_HOST},
        {ARG_ALLOW_PRIVATE, HUTCH_EXT_FLAG_ALLOW_PRIVATE},
        {ARG_RESOLVE, HUTCH_EXT_FLAG_RESOLVE},
        {ARG_AUDIT_LOG, HUTCH_EXT_FLAG_AUDIT_LOG},
        {ARG_SECRET, HUTCH_EXT_FLAG_SECRET},
        {ARG_UPSTREAM_CA, HUTCH_EXT_FLAG_UPSTREAM_CA},
        {ARG_BACKEND, HUTCH_EXT_FLAG_BACKEND},
        {ARG_VM_ACCEL, HUTCH_EXT_FLAG_VM_ACCEL},
        {ARG_VM_KERNEL, HUTCH_EXT_FLAG_VM_KERNEL},
        {ARG_IMAGE, HUTCH_EXT_FLAG_IMAGE},
        {ARG_MEMORY, HUTCH_EXT_FLAG_MEMORY},
        {ARG_MEMORY_SWAP, HUTCH_EXT_FLAG_MEMORY_SWAP},
        {ARG_CPUS, HUTCH_EXT_FLAG_CPUS},
        {ARG_PIDS, HUTCH_EXT_FLAG_PIDS},
        {ARG_TIMEOUT, HUTCH_EXT_FLAG_TIMEOUT},
        {ARG_DISK, HUTCH_EXT_FLAG_DISK},
        {ARG_OUTPUT_LIMIT, HUTCH_EXT_FLAG_OUTPUT_LIMIT},
};

static const struct option run_options[] = {
        {"volume", required_argument, NULL, 'v'},
        {"workdir", required_argument, NULL, 'w'},
        {"env", required_argument, NULL, 'e'},
        {"env-pass", required_argument, NULL, ARG_ENV_PASS},
        {"workspace", required_argument, NULL, ARG_WORKSPACE},
        {"tmpfs", required_argument, NULL, ARG_TMPFS},
        {"read-only", no_argument, NULL, ARG_READ_ONLY},
        {"hostname", required_argument, NULL, ARG_HOSTNAME},
        {"network", required_argument, NULL, ARG_NETWORK},
        {"dns", required_argument, NULL, ARG_DNS},
        {"policy", required_argument, NULL, ARG_POLICY},
        {"json", required_argument, NULL, ARG_JSON},
        {"json-fd", required_argument, NULL, ARG_JSON_FD},
        {"memory", required_argument, NULL, ARG_MEMORY},
        {"memory-swap", required_argument, NULL, ARG_MEMORY_SWAP},
        {"cpus", required_argument, NULL, ARG_CPUS},
        {"pids", required_argument, NULL, ARG_PIDS},
        {"timeout", required_argument, NULL, ARG_TIMEOUT},
        {"disk", required_argument, NULL, ARG_DISK},
        {"output-limit", required_argument, NULL, ARG_OUTPUT_LIMIT},
        {"allow-degraded", no_argument, NULL, ARG_ALLOW_DEGRADED},
        {"allow-host", required_argument, NULL, ARG_ALLOW_HOST},
        {"deny-host", required_argument, NULL, ARG_DENY_HOST},
        {"allow-private", required_argument, NULL, ARG_ALLOW_PRIVATE},
        {"resolve", required_argument, NULL, ARG_RESOLVE},
        {"audit-log", required_argument, NULL, ARG_AUDIT_LOG},
        {"secret", required_argument, NULL, ARG_SECRET},
        {"upstream-ca", required_argument, NULL, ARG_UPSTREAM_CA},
        {"from", required_argument, NULL, ARG_FROM},
        {"idle-timeout", required_argument, NULL, ARG_IDLE_TIMEOUT},
        {"backend", required_argument, NULL, ARG_BACKEND},
        {"vm-accel", required_argument, NULL, ARG_VM_ACCEL},
        {"vm-kernel", required_argument, NULL, ARG_VM_KERNEL},
        {"rm", no_argument, NULL, ARG_RM},
        {"cap-drop", required_argument, NULL, ARG_CAP_DROP},
        {"cap-add", required_argument, NULL, ARG_CAP_ADD},
        {"image", required_argument, NULL, ARG_IMAGE},
        {"publish", required_argument, NULL, 'p'},
        {"tty", no_argument, NULL, 't'},
        {"interactive", no_argument, NULL, 'i'},
        {"user", required_argument, NULL, 'u'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {}};

/* '+': stop at the first non-option, so the command's own flags are never
 * parsed ("hutch run ls -l"). ':': report a missing value as ':' rather
 * than '?', so the two errors get their own messages. */
static const char run_optstring[] = "+:v:w:e:p:u:hitq";

/* The reference printed by run_args_usage(); docs/cli-run.md has the same
 * table. */
static const struct {
        const char *flag;
        const char *help;
} run_usage_table[] = {
        {"-v, --volume HOST:SANDBOX[:ro|:rw]", "bind a host path into the sandbox (repeatable)"},
        {"-w, --workdir DIR",
         "working directory (default /workspace with a workspace, else $HOME)"},
        {"-e, --env KEY=VALUE|KEY", "set a variable, or pass the caller's KEY (repeatable)"},
        {"--env-pass KEY", "pass the caller's KEY through (repeatable)"},
        {"--workspace DIR[:mount|:copy|:overlay]",
         "the agent's folder at /workspace (default mode mount; copy: a 4g tmpfs; overlay: "
         "changes stay in the sandbox)"},
        {"--tmpfs PATH[:size=N]",
         "a tmpfs at PATH (default size 1g; defaults: /tmp 1g, $HOME 1g, /dev/shm 64m)"},
        {"--read-only", "make $HOME read-only (as docker's: binds, the workspace and --tmpfs keep "
                        "their own mode)"},
        {"--hostname NAME", "the sandbox's hostname (default hutch)"},
        {"--network MODE",
         "none (default: loopback only) or allow (the allowlisted hosts, through hutch-proxy)"},
        {"--allow-host PATTERN[:PORT]",
         "allow a host (exact or *.domain; ports 80,443 by default); implies --network allow"},
        {"--deny-host PATTERN[:PORT]", "deny a host even when an allow entry matches"},
        {"--allow-private CIDR", "let allowed names resolve into this non-public range"},
        {"--resolve NAME:ADDR[,ADDR]", "use these addresses for NAME instead of DNS"},
        {"--dns MODE", "proxy (default: names only through the proxy variables) or transparent (a "
                       "resolver for the allowed names, for tools that ignore the proxy)"},
        {"--audit-log FILE", "append the proxy's decisions to FILE as JSON lines"},
        {"--secret NAME[=file:PATH]@HOST[,HOST][;OPT=V]",
         "broker the caller's $NAME: the sandbox gets a placeholder, hutch-proxy sends the real "
         "value to HOST only (see docs/secrets.md; repeatable)"},
        {"--upstream-ca FILE", "also trust this CA for the proxy's upstream TLS (repeatable)"},
        {"-p, --publish [IP:][HOSTPORT:]PORT",
         "forward TCP on the host's IP:HOSTPORT (default 127.0.0.1, a free port) to PORT on the "
         "sandbox's loopback (repeatable; see docs/network.md)"},
        {"--policy FILE", "apply a JSON policy file first; flags override it"},
        {"--json FILE", "write the outcome as JSON to FILE after the command"},
        {"--json-fd N", "write the outcome as JSON to the open fd N (N >= 3)"},
        {"--memory SIZE", "memory limit (default 2g; minimum 6m)"},
        {"--memory-swap SIZE", "memory + swap limit, as docker (default: no swap)"},
        {"--cpus N", "CPU time limit in CPUs, e.g. 1.5 (default none)"},
        {"--pids N", "process/thread limit (default 1024)"},
        {"--timeout DURATION", "wall-clock limit: 500ms, 30s, 5m, 1h; 0 = none (default)"},
        {"--disk SIZE", "size of the writable $HOME and copied workspace"},
        {"--output-limit SIZE", "cut stdout and stderr after SIZE bytes each (default none)"},
        {"--allow-degraded",
         "run with rlimits when a limit cannot be a cgroup limit, and with the container's /proc "
         "where a new one is refused (docs/containers.md)"},
        {"--backend ns|vm", "namespaces on this kernel (default), or a microVM (docs/vm.md)"},
        {"--vm-accel kvm|tcg", "the microVM's accelerator (default kvm; tcg is slow emulation)"},
        {"--vm-kernel FILE", "the microVM's kernel (default: the newest /boot/vmlinuz-*)"},
        {"--image NAME", "the root filesystem is the image NAME of 'hutch image ls' (its "
                         "Env, WorkingDir, User, Entrypoint and Cmd honoured; docs/images-run.md)"},
        {"-u, --user NAME|UID[:GROUP|:GID]",
         "run as this user of the sandbox's /etc/passwd (default: the image's User, else root)"},
        {"--rm", "accepted for docker's sake: a run's sandbox is always removed"},
        {"--cap-drop ALL", "accepted: the sandbox holds no capability over the host"},
        {"--cap-add CAP", "refused: hutch grants no capability"},
        {"-q, --quiet", "do not print what hutch-proxy refused after the command"},
        {"-t, --tty", "a terminal for the command: a pty made in the sandbox (docs/terminal.md)"},
        {"-i, --interactive", "with -t: stdin relayed to the pty, the caller's terminal raw"},
        {"-h, --help", "show this help"},
};

void run_args_usage(FILE *f) {
        (void)fprintf(f, "usage: hutch run [FLAGS] [--] CMD [ARGS...]\n\n"
                         "run CMD in a fresh one-shot sandbox\n\nflags:\n");
        for (size_t i = 0; i < ELEMENTSOF(run_usage_table); i++)
                (void)fprintf(f, "  %-36s  %s\n", run_usage_table[i].flag, run_usage_table[i].help);
        (void)fprintf(f, "\nexit status: the command's, or 125 if hutch failed, 126 if CMD is not "
                         "executable,\n127 if it was not found, 128+N if it was killed by signal "
                         "N\n");
}

void run_args_done(RunArgs *a) {
        if (!a)
                return;
        a->policy = hutch_ext_policy_free(a->policy);
        a->command = strv_free(a->command);
        free(a->json_path);
        a->json_path = NULL;
        free(a->from);
        a->from = NULL;
        a->json_fd = -EBADF;
        a->help = false;
        a->quiet = false;
}

/* The optimal string alignment distance of @a and @b (an insertion, a
 * deletion, a change or a swap of two neighbours counts 1), or SIZE_MAX
 * when a word is too long to matter. */
static size_t word_distance(const char *a, const char *b) {
        enum { MAX = 40 };
        size_t la = strlen(a), lb = strlen(b), d[MAX + 1][MAX + 1];

        if (la > MAX || lb > MAX)
                return SIZE_MAX;
        for (size_t i = 0; i <= la; i++)
                d[i][0] = i;
        for (size_t j = 0; j <= lb; j++)
                d[0][j] = j;
        for (size_t i = 1; i <= la; i++)
                for (size_t j = 1; j <= lb; j++) {
                        size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
                        size_t v = d[i - 1][j - 1] + cost;

                        if (d[i - 1][j] + 1 < v)
                                v = d[i - 1][j] + 1;
                        if (d[i][j - 1] + 1 < v)
                                v = d[i][j - 1] + 1;
                        if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                            d[i - 2][j - 2] + 1 < v)
                                v = d[i - 2][j - 2] + 1;
                        d[i][j] = v;
                }
        return d[la][lb];
}

const char *word_nearest(const char *word, const char *const *candidates) {
        const char *best = NULL;
        size_t best_d = SIZE_MAX, limit;

        if (!word || !candidates)
                return NULL;
        limit = MAX(strlen(word) / 3, (size_t)1);
        for (const char *const *c = candidates; *c; c++) {
                size_t d = word_distance(word, *c);

                if (d <= limit && d < best_d) {
                        best = *c;
                        best_d = d;
                }
        }
        return best;
}

const char *option_nearest(const char *arg, const struct option *options) {
        const char *names[128];
        char word[64];
        size_t n = 0, len;

        if (!arg || !options)
                return NULL;
        arg += strspn(arg, "-");
        len = strcspn(arg, "=");
        if (len == 0 || len >= sizeof(word))
                return NULL;
        memcpy(word, arg, len);
        word[len] = '\0';
        for (const struct option *o = options; o->name && n + 1 < ELEMENTSOF(names); o++)
                names[n++] = o->name;
        names[n] = NULL;
        return word_nearest(word, names);
}

/* Describes a getopt failure: @c is '?' (unknown option, or a value given
 * to a flag that takes none) or ':' (missing value). */
static int run_args_option_error(int c, int argc, char **argv, HutchError *reterr) {
        const char *arg = optind >= 1 && optind <= argc ? argv[optind - 1] : "";
        bool long_form = strncmp(arg, "--", 2) == 0;
        int n = (int)MIN(strcspn(arg, "="), (size_t)INT32_MAX);

        if (c == ':') {
                /* A missing value is always at the end of argv, so
                 * argv[optind - 1] is the flag itself. */
                if (long_form)
                        return hutch_error_set(reterr, EINVAL, "option '%.*s' needs a value", n,
                                               arg);
                return hutch_error_set(reterr, EINVAL, "option '-%c' needs a value", optopt);
        }
        /* glibc sets optopt to 0 for an unknown or ambiguous long option,
         * to the option's value for "--flag=VALUE" of a flag without a value,
         * and to the character for an unknown short option. In a cluster
         * ("-hq") optind may not have moved, so only trust argv[optind - 1]
         * for the long cases. */
        if (long_form && (optopt == 0 || optopt >= 0x100 || optopt == 'h')) {
                if (optopt == 0) {
                        const char *best = option_nearest(arg, run_options);

                        if (best)
                                return hutch_error_set(reterr, EINVAL,
                                                       "unknown option '%.*s': did you mean "
                                                       "'--%s'?",
                                                       n, arg, best);
                        return hutch_error_set(reterr, EINVAL, "unknown option '%.*s'", n, arg);
                }
                return hutch_error_set(reterr, EINVAL, "option '%.*s' does not take a value", n,
                                       arg);
        }
        if (optopt > 0 && optopt < 0x80)
                return hutch_error_set(reterr, EINVAL, "unknown option '-%c'", optopt);
        return hutch_error_set(reterr, EINVAL, "unknown option '%s'", arg);
}

static int run_args_parse_json_fd(const char *s, int *ret, HutchError *reterr) {
        int fd, r;

        r = safe_atoi(s, &fd);
        if (r < 0)
                return hutch_error_set(reterr, EINVAL, "invalid --json-fd '%s'", s);
        if (fd < 3)
                return hutch_error_set(reterr, EINVAL,
                                       "--json-fd '%s' must be 3 or higher (0, 1 and 2 are the "
                                       "command's stdio)",
                                       s);
        if (fcntl(fd, F_GETFD) < 0)
                return hutch_error_set(reterr, EINVAL,
                                       "--json-fd '%s' is not an open file descriptor", s);
        *ret = fd;
        return 0;
}

/* The flags only `hutch create` takes, and the ones it cannot honour (a
 * persistent sandbox's $HOME is not a tmpfs, its execs have no output
 * relay, and a copy would have to be made at every start). */
static int run_args_check_mode(RunArgs *a, RunArgsMode mode, int c, const char *value,
                               HutchError *reterr) {
        switch (c) {
        case ARG_RM:
                if (mode != RUN_ARGS_RUN)
                        return hutch_error_set(reterr, EINVAL,
                                               "--rm is for 'hutch run' (whose sandbox is always "
                                               "removed); a persistent sandbox stays until 'hutch "
                                               "rm'");
                return 0;
        case ARG_CAP_DROP:
                /* Every capability is already dropped: any name is moot. */
                return 0;
        case ARG_CAP_ADD:
                return hutch_error_set(reterr, EINVAL,
                                       "--cap-add %s is refused: hutch grants the sandbox no "
                                       "capability (every one is dropped and the command runs "
                                       "without privileges; see docs/threat-model.md)",
                                       value);
        case 't':
        case 'i':
                /* docs/terminal.md; the checks that need the caller's
                 * stdin are run.c's. */
                if (mode != RUN_ARGS_RUN)
                        return hutch_error_set(reterr, EINVAL,
                                               "%s is a flag of 'hutch run' and 'hutch exec'",
                                               c == 't' ? "-t/--tty" : "-i/--interactive");
                if (c == 't')
                        a->tty = true;
                else
                        a->interactive = true;
                return 0;
        default:
                break;
        }
        if (mode != RUN_ARGS_CREATE && (c == ARG_FROM || c == ARG_IDLE_TIMEOUT))
                return hutch_error_set(reterr, EINVAL, "%s is a flag of 'hutch create'",
                                       c == ARG_FROM ? "--from" : "--idle-timeout");
        if (mode == RUN_ARGS_RUN)
                return 0;
        switch (c) {
        case ARG_JSON:
        case ARG_JSON_FD:
                return hutch_error_set(reterr, EINVAL,
                                       "--json and --json-fd are flags of 'hutch exec'");
        case 'q':
                return hutch_error_set(reterr, EINVAL,
                                       "--quiet is a flag of 'hutch run' and 'hutch exec'");
        case ARG_DISK:
                if (mode == RUN_ARGS_UPDATE)
                        return hutch_error_set(reterr, EINVAL,
                                               "--disk cannot change: a sandbox's disk image "
                                               "keeps the size it was created with");
                a->policy_given = true;
                return 0;
        case ARG_OUTPUT_LIMIT:
                return hutch_error_set(reterr, EINVAL,
                                       "--output-limit cannot be enforced for a persistent "
                                       "sandbox (its execs' output is not relayed; see "
                                       "docs/persistent.md)");
        case ARG_FROM:
                free(a->from);
                a->from = strdup(value);
                return a->from ? 0 : -ENOMEM;
        case ARG_IDLE_TIMEOUT:
                if (parse_duration_ms(value, &a->idle_timeout_ms) < 0 || a->idle_timeout_ms == 0)
                        return hutch_error_set(reterr, EINVAL,
                                               "invalid --idle-timeout '%s' (a duration above "
                                               "0: 30s, 15m, 1h)",
                                               value);
                return 0;
        case 'h':
                return 0;
        default:
                a->policy_given = true;
                return 0;
        }
}

/* Applies one flag of the second pass to @a: in @mode, a workspace
 * without a mode is an overlay but for hutch run. */
static int run_args_apply(RunArgs *a, RunArgsMode mode, int c, const char *value,
                          HutchError *reterr) {
        switch (c) {
        case ARG_JSON: {
                char *copy;

                if (value[0] == '\0')
                        return hutch_error_set(reterr, EINVAL, "--json needs a file name");
                copy = strdup(value);
                if (!copy)
                        return -ENOMEM;
                free(a->json_path);
                a->json_path = copy;
                return 0;
        }
        case 'q':
                a->quiet = true;
                return 0;
        case ARG_JSON_FD:
                return run_args_parse_json_fd(value, &a->json_fd, reterr);
        case ARG_WORKSPACE:
                return hutch_ext_policy_flag(a->policy,
                                             mode == RUN_ARGS_RUN
                                                     ? HUTCH_EXT_FLAG_WORKSPACE
                                                     : HUTCH_EXT_FLAG_WORKSPACE_OVERLAY,
                                             value, reterr);
        default:
                break;
        }
        for (size_t i = 0; i < ELEMENTSOF(policy_flags); i++)
                if (policy_flags[i].arg == c)
                        return hutch_ext_policy_flag(a->policy, policy_flags[i].flag, value,
                                                     reterr);
        return 0; /* --policy, --help, --from, --idle-timeout: the first pass */
}

int run_args_check_workdir(const struct Policy *p, HutchError *reterr) {
        return hutch_ext_policy_check_workdir(p, reterr);
}

int run_args_parse(int argc, char **argv, RunArgs *ret, HutchError *reterr) {
        return run_args_parse_mode(argc, argv, RUN_ARGS_RUN, ret, reterr);
}

static int run_args_parse_full(int argc, char **argv, RunArgsMode mode, const char *base_json,
                               RunArgs *ret, HutchError *reterr) {
        _cleanup_(run_args_done) RunArgs a = {.json_fd = -EBADF};
        _cleanup_strv_free_ char **policy_files = NULL;
        HutchExtPolicyView view;
        bool help = false;
        int c, first, r;

        if (argc < 1 || !argv || !ret)
                return -EINVAL;

        /* First pass: the flags' syntax, --help, and the policy files, which
         * are applied before every other flag wherever they appear. optind = 0
         * makes glibc reinitialise its state, so parsing can run again. */
        optind = 0;
        opterr = 0;
        while ((c = getopt_long(argc, argv, run_optstring, run_options, NULL)) >= 0) {
                if (c == '?' || c == ':')
                        return run_args_option_error(c, argc, argv, reterr);
                if (c == 'h')
                        help = true;
                if (c == ARG_POLICY) {
                        r = strv_extend(&policy_files, optarg);
                        if (r < 0)
                                return r;
                }
                r = run_args_check_mode(&a, mode, c, optarg, reterr);
                if (r < 0)
                        return r;
        }
        first = optind;

        a.policy = hutch_ext_policy_new();
        if (!a.policy)
                return -ENOMEM;
        if (base_json) {
                r = hutch_ext_policy_load_json(a.policy, base_json, reterr);
                if (r < 0)
                        return r;
        }
        if (help) {
                /* Nothing else is checked: help must work whatever else is
                 * on the command line. */
                a.help = true;
                *ret = a;
                a = (RunArgs){.json_fd = -EBADF};
                return 0;
        }

        STRV_FOREACH(f, policy_files) {
                r = hutch_ext_policy_load_file(a.policy, *f, reterr);
                if (r < 0)
                        return r;
        }

        optind = 0;
        while ((c = getopt_long(argc, argv, run_optstring, run_options, NULL)) >= 0) {
                r = run_args_apply(&a, mode, c, optarg, reterr);
                if (r < 0)
                        return r;
        }

        hutch_ext_policy_view(a.policy, &view);
        if (a.json_path && a.json_fd >= 0)
                return hutch_error_set(reterr, EINVAL, "--json and --json-fd cannot be combined");
        /* With an image, no command means its Entrypoint and Cmd. */
        if (first >= argc && mode == RUN_ARGS_RUN && !view.image)
                return hutch_error_set(reterr, EINVAL,
                                       "missing command (usage: hutch run [FLAGS] -- CMD "
                                       "[ARGS...])");
        if (mode != RUN_ARGS_RUN && view.workspace_copy)
                return hutch_error_set(reterr, EINVAL,
                                       "a persistent sandbox cannot copy its workspace at every "
                                       "start: use ':overlay' (the default) or ':mount'");
        for (int i = first; i < argc; i++) {
                r = strv_extend(&a.command, argv[i]);
                if (r < 0)
                        return r;
        }

        r = hutch_ext_policy_validate(a.policy, reterr);
        if (r < 0)
                return r;

        *ret = a;
        a = (RunArgs){.json_fd = -EBADF}; /* the caller owns it now */
        return 0;
}

void command_not_found_hint(char *const *command) {
        const char *a = command ? command[0] : NULL;

        if (!a)
                return;
        if (strchr(a, ' ')) {
                (void)fprintf(stderr,
                              "hutch: hint: '%s' is one word with spaces, not a command and its "
                              "arguments: give them as separate words, or run it through a "
                              "shell: sh -c '%s'\n",
                              a, a);
                return;
        }
        if ((strchr(a, ':') || strchr(a, '/')) && a[0] != '/' && a[0] != '.' && access(a, F_OK) < 0)
                (void)fprintf(stderr,
                              "hutch: hint: '%s' looks like an image name: without --image "
                              "hutch runs the command on the host's system (read-only); an "
                              "image is named with --image NAME (hutch image ls), and the "
                              "command is the first word after the flags\n",
                              a);
}

int run_args_parse_mode(int argc, char **argv, RunArgsMode mode, RunArgs *ret, HutchError *reterr) {
        return run_args_parse_full(argc, argv, mode, NULL, ret, reterr);
}

int run_args_parse_update(int argc, char **argv, const char *policy_json, RunArgs *ret,
                          HutchError *reterr) {
        if (!policy_json)
                return -EINVAL;
        return run_args_parse_full(argc, argv, RUN_ARGS_UPDATE, policy_json, ret, reterr);
}
