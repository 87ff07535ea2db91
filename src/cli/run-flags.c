/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

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
};

/* The limit flags, in the order of PolicyLimit. */
static const struct {
        int arg;
        PolicyLimit limit;
        const char *flag;
} limit_flags[] = {
        {ARG_MEMORY, POLICY_LIMIT_MEMORY, "--memory"},
        {ARG_MEMORY_SWAP, POLICY_LIMIT_MEMORY_SWAP, "--memory-swap"},
        {ARG_CPUS, POLICY_LIMIT_CPUS, "--cpus"},
        {ARG_PIDS, POLICY_LIMIT_PIDS, "--pids"},
        {ARG_TIMEOUT, POLICY_LIMIT_TIMEOUT, "--timeout"},
        {ARG_DISK, POLICY_LIMIT_DISK, "--disk"},
        {ARG_OUTPUT_LIMIT, POLICY_LIMIT_OUTPUT, "--output-limit"},
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
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {}};

/* '+': stop at the first non-option, so the command's own flags are never
 * parsed ("hutch run ls -l"). ':': report a missing value as ':' rather
 * than '?', so the two errors get their own messages. */
static const char run_optstring[] = "+:v:w:e:hq";

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
        {"--read-only", "make the workspace, $HOME and binds read-only"},
        {"--hostname NAME", "the sandbox's hostname (default hutch)"},
        {"--network MODE",
         "none (default: loopback only) or allow (the allowlisted hosts, through hutch-proxy)"},
        {"--allow-host PATTERN[:PORT]",
         "allow a host (exact or *.domain; ports 80,443 by default); implies --network allow"},
        {"--deny-host PATTERN[:PORT]", "deny a host even when an allow entry matches"},
        {"--allow-private CIDR", "let allowed names resolve into this non-public range"},
        {"--resolve NAME:ADDR[,ADDR]", "use these addresses for NAME instead of DNS"},
        {"--audit-log FILE", "append the proxy's decisions to FILE as JSON lines"},
        {"--secret NAME[=file:PATH]@HOST[,HOST][;OPT=V]",
         "broker the caller's $NAME: the sandbox gets a placeholder, hutch-proxy sends the real "
         "value to HOST only (see docs/secrets.md; repeatable)"},
        {"--upstream-ca FILE", "also trust this CA for the proxy's upstream TLS (repeatable)"},
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
        {"-q, --quiet", "do not print what hutch-proxy refused after the command"},
        {"-h, --help", "show this help"},
};

void run_args_usage(FILE *f) {
        (void)fprintf(f, "usage: hutch run [FLAGS] [--] CMD [ARGS...]\n\n"
                         "run CMD in a fresh one-shot sandbox\n\nflags:\n");
        for (size_t i = 0; i < ELEMENTSOF(run_usage_table); i++)
                (void)fprintf(f, "  %-36s %s\n", run_usage_table[i].flag, run_usage_table[i].help);
        (void)fprintf(f, "\nexit status: the command's, or 125 if hutch failed, 126 if CMD is not "
                         "executable,\n127 if it was not found, 128+N if it was killed by signal "
                         "N\n");
}

void run_args_done(RunArgs *a) {
        if (!a)
                return;
        a->policy = policy_free(a->policy);
        a->command = strv_free(a->command);
        free(a->json_path);
        a->json_path = NULL;
        free(a->from);
        a->from = NULL;
        a->json_fd = -EBADF;
        a->help = false;
        a->quiet = false;
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
                if (optopt == 0)
                        return hutch_error_set(reterr, EINVAL, "unknown option '%.*s'", n, arg);
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
                return hutch_error_set(reterr, EINVAL, "--quiet is a flag of 'hutch exec'");
        case ARG_DISK:
        case ARG_OUTPUT_LIMIT:
                return hutch_error_set(reterr, EINVAL,
                                       "%s cannot be enforced for a persistent sandbox (its "
                                       "layer lives on the host's disk; see docs/persistent.md)",
                                       c == ARG_DISK ? "--disk" : "--output-limit");
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

/* Applies one flag of the second pass to @a. */
static int run_args_apply(RunArgs *a, int c, const char *value, HutchError *reterr) {
        switch (c) {
        case 'v':
                return policy_add_bind_spec(a->policy, value, reterr);
        case 'w':
                return policy_set_workdir(a->policy, value, reterr);
        case 'e':
                return policy_add_env_spec(a->policy, value, reterr);
        case ARG_ENV_PASS:
                if (!env_name_is_valid(value))
                        return hutch_error_set(reterr, EINVAL,
                                               "invalid environment variable name '%s' in "
                                               "--env-pass (expected [A-Za-z_][A-Za-z0-9_]*)",
                                               value);
                return policy_add_env_spec(a->policy, value, reterr);
        case ARG_WORKSPACE:
                return policy_set_workspace_spec(a->policy, value, reterr);
        case ARG_TMPFS:
                return policy_add_tmpfs_spec(a->policy, value, reterr);
        case ARG_READ_ONLY:
                a->policy->read_only = true;
                return 0;
        case ARG_HOSTNAME:
                return policy_set_hostname(a->policy, value, reterr);
        case ARG_NETWORK:
                return policy_set_network(a->policy, value, reterr);
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
        case ARG_ALLOW_DEGRADED:
                a->policy->allow_degraded = true;
                return 0;
        case ARG_ALLOW_HOST:
                return policy_add_allow_host(a->policy, value, "--allow-host", reterr);
        case ARG_DENY_HOST:
                return policy_add_deny_host(a->policy, value, "--deny-host", reterr);
        case ARG_ALLOW_PRIVATE:
                return policy_add_allow_private(a->policy, value, "--allow-private", reterr);
        case ARG_RESOLVE:
                return policy_add_resolve(a->policy, value, "--resolve", reterr);
        case ARG_AUDIT_LOG:
                return policy_set_audit_log(a->policy, value, reterr);
        case ARG_SECRET:
                return policy_add_secret_spec(a->policy, value, reterr);
        case ARG_UPSTREAM_CA:
                return policy_add_upstream_ca(a->policy, value, "--upstream-ca", reterr);
        case ARG_BACKEND:
                return policy_set_backend(a->policy, value, reterr);
        case ARG_VM_ACCEL:
                return policy_set_vm_accel(a->policy, value, reterr);
        case ARG_VM_KERNEL:
                return policy_set_vm_kernel(a->policy, value, reterr);
        case ARG_FROM:
        case ARG_IDLE_TIMEOUT:
                return 0; /* run_args_check_mode() */
        case ARG_MEMORY:
        case ARG_MEMORY_SWAP:
        case ARG_CPUS:
        case ARG_PIDS:
        case ARG_TIMEOUT:
        case ARG_DISK:
        case ARG_OUTPUT_LIMIT:
                for (size_t i = 0; i < ELEMENTSOF(limit_flags); i++)
                        if (limit_flags[i].arg == c)
                                return policy_set_limit(a->policy, limit_flags[i].limit, value,
                                                        limit_flags[i].flag, reterr);
                return -EINVAL;
        default:
                return 0; /* --policy and --help: handled by the first pass */
        }
}

int run_args_parse(int argc, char **argv, RunArgs *ret, HutchError *reterr) {
        return run_args_parse_mode(argc, argv, RUN_ARGS_RUN, ret, reterr);
}

/* create: "--workspace DIR" without a mode means an overlay. */
static const char *workspace_default_overlay(const char *value, char **buf) {
        const char *colon = strrchr(value, ':');

        if (colon && workspace_mode_from_string(colon + 1) >= 0)
                return value;
        if (asprintf(buf, "%s:overlay", value) < 0) {
                *buf = NULL;
                return NULL;
        }
        return *buf;
}

static int run_args_parse_full(int argc, char **argv, RunArgsMode mode, const char *base_json,
                               RunArgs *ret, HutchError *reterr) {
        _cleanup_(run_args_done) RunArgs a = {.json_fd = -EBADF};
        _cleanup_strv_free_ char **policy_files = NULL;
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

        a.policy = policy_new();
        if (!a.policy)
                return -ENOMEM;
        if (base_json) {
                r = policy_load_json(a.policy, base_json, strlen(base_json), reterr);
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
                r = policy_load_file(a.policy, *f, reterr);
                if (r < 0)
                        return r;
        }

        optind = 0;
        while ((c = getopt_long(argc, argv, run_optstring, run_options, NULL)) >= 0) {
                _cleanup_free_ char *buf = NULL;
                const char *value = optarg;

                if (mode != RUN_ARGS_RUN && c == ARG_WORKSPACE) {
                        value = workspace_default_overlay(optarg, &buf);
                        if (!value)
                                return -ENOMEM;
                }
                r = run_args_apply(&a, c, value, reterr);
                if (r < 0)
                        return r;
        }

        if (a.json_path && a.json_fd >= 0)
                return hutch_error_set(reterr, EINVAL, "--json and --json-fd cannot be combined");
        if (first >= argc && mode == RUN_ARGS_RUN)
                return hutch_error_set(reterr, EINVAL,
                                       "missing command (usage: hutch run [FLAGS] -- CMD "
                                       "[ARGS...])");
        if (mode != RUN_ARGS_RUN && a.policy->workspace &&
            a.policy->workspace_mode == WORKSPACE_MODE_COPY)
                return hutch_error_set(reterr, EINVAL,
                                       "a persistent sandbox cannot copy its workspace at every "
                                       "start: use ':overlay' (the default) or ':mount'");
        for (int i = first; i < argc; i++) {
                r = strv_extend(&a.command, argv[i]);
                if (r < 0)
                        return r;
        }

        r = policy_validate(a.policy, reterr);
        if (r < 0)
                return r;

        *ret = a;
        a = (RunArgs){.json_fd = -EBADF}; /* the caller owns it now */
        return 0;
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
