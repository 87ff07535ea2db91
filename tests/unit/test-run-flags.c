/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* The test reads the Policy the flags filled (the CLI itself cannot). */
#include "policy/policy.h"
#include "run-flags.h"
#include "strv.h"
#include "test-util.h"
#include "test.h"

#define ARGV_MAX 32

/* Parses "run" plus the NULL-terminated arguments. @a is reset first and
 * must be released with run_args_done(). */
static int parse(RunArgs *a, HutchError *e, ...) {
        char *argv[ARGV_MAX + 2] = {(char *)"run"};
        int argc = 1;
        va_list ap;

        va_start(ap, e);
        for (const char *s; (s = va_arg(ap, const char *));) {
                if (argc > ARGV_MAX)
                        fail_msg("too many arguments");
                argv[argc++] = (char *)s;
        }
        va_end(ap);
        argv[argc] = NULL;
        *a = (RunArgs){.json_fd = -EBADF};
        *e = (HutchError){};
        return run_args_parse(argc, argv, a, e);
}

/* Expects -@err with the message @msg. */
#define ASSERT_PARSE_FAILS(err, expected, ...)                                                     \
        do {                                                                                       \
                RunArgs pa;                                                                        \
                HutchError pe;                                                                     \
                ASSERT_ERROR(parse(&pa, &pe, __VA_ARGS__, NULL), err);                             \
                ASSERT_STREQ(pe.msg, expected);                                                    \
                ASSERT_NULL(pa.policy);                                                            \
                ASSERT_NULL(pa.command);                                                           \
        } while (0)

TEST(minimal_and_defaults) {
        _cleanup_(run_args_done) RunArgs a = {};
        HutchError e;

        ASSERT_OK(parse(&a, &e, "true", NULL));
        ASSERT_EQ(strv_length(a.command), 1);
        ASSERT_STREQ(a.command[0], "true");
        ASSERT_NOT_NULL(a.policy);
        ASSERT_NULL(a.policy->workspace);
        ASSERT_STREQ(a.policy->hostname, "hutch");
        ASSERT_NULL(a.json_path);
        ASSERT_EQ(a.json_fd, -EBADF);
        ASSERT_FALSE(a.help);
}

TEST(every_flag) {
        _cleanup_tmpdir_ char *dir = make_tmpdir();
        _cleanup_(run_args_done) RunArgs a = {};
        _cleanup_free_ char *ws = NULL, *vol = NULL, *vol2 = NULL, *json = path_join(dir, "o.json");
        HutchError e;

        ASSERT_TRUE(asprintf(&ws, "%s:copy", dir) > 0);
        ASSERT_TRUE(asprintf(&vol, "%s:/data:ro", dir) > 0);
        ASSERT_TRUE(asprintf(&vol2, "%s:/more", dir) > 0);
        ASSERT_OK(parse(&a, &e, "-v", vol, "--volume", vol2, "-w", "/workspace/sub", "-e", "A=1",
                        "--env", "B=2", "-e", "PASSED", "--env-pass", "ALSO", "--workspace", ws,
                        "--tmpfs", "/tmp:size=64m", "--tmpfs=/cache", "--read-only", "--hostname",
                        "box", "--network", "none", "--json", json, "cmd", "arg", NULL));

        ASSERT_EQ(a.policy->n_binds, 2);
        ASSERT_STREQ(a.policy->binds[0].source, dir);
        ASSERT_STREQ(a.policy->binds[0].target, "/data");
        ASSERT_TRUE(a.policy->binds[0].read_only);
        ASSERT_STREQ(a.policy->binds[1].target, "/more");
        ASSERT_FALSE(a.policy->binds[1].read_only);
        ASSERT_STREQ(a.policy->workdir, "/workspace/sub");
        ASSERT_STREQ(strv_env_get(a.policy->env, "A"), "1");
        ASSERT_STREQ(strv_env_get(a.policy->env, "B"), "2");
        ASSERT_EQ(strv_length(a.policy->env_pass), 2);
        ASSERT_STREQ(a.policy->env_pass[0], "PASSED");
        ASSERT_STREQ(a.policy->env_pass[1], "ALSO");
        ASSERT_STREQ(a.policy->workspace, dir);
        ASSERT_EQ(a.policy->workspace_mode, WORKSPACE_MODE_COPY);
        ASSERT_EQ(a.policy->n_tmpfs, 2);
        ASSERT_STREQ(a.policy->tmpfs[0].path, "/tmp");
        ASSERT_EQ(a.policy->tmpfs[0].size, 64ULL << 20);
        ASSERT_STREQ(a.policy->tmpfs[1].path, "/cache");
        ASSERT_EQ(a.policy->tmpfs[1].size, POLICY_DEFAULT_TMP_SIZE);
        ASSERT_TRUE(a.policy->read_only);
        ASSERT_STREQ(a.policy->hostname, "box");
        ASSERT_EQ(a.policy->network, NETWORK_MODE_NONE);
        ASSERT_STREQ(a.json_path, json);
        ASSERT_EQ(strv_length(a.command), 2);
        ASSERT_STREQ(a.command[1], "arg");
}

TEST(json_fd) {
        _cleanup_(run_args_done) RunArgs a = {};
        _cleanup_close_ int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
        char num[16];
        HutchError e;

        ASSERT_TRUE(fd >= 3);
        (void)snprintf(num, sizeof(num), "%d", fd);
        ASSERT_OK(parse(&a, &e, "--json-fd", num, "true", NULL));
        ASSERT_EQ(a.json_fd, fd);
        run_args_done(&a);
        /* run_args_done() does not close it: the fd is the caller's. */
        ASSERT_TRUE(fcntl(fd, F_GETFD) >= 0);
        ASSERT_EQ(a.json_fd, -EBADF);

        ASSERT_PARSE_FAILS(EINVAL,
                           "--json-fd '1' must be 3 or higher (0, 1 and 2 are the command's stdio)",
                           "--json-fd", "1", "true");
        ASSERT_PARSE_FAILS(EINVAL,
                           "--json-fd '-4' must be 3 or higher (0, 1 and 2 are the "
                           "command's stdio)",
                           "--json-fd", "-4", "true");
        ASSERT_PARSE_FAILS(EINVAL, "invalid --json-fd 'x3'", "--json-fd", "x3", "true");
        ASSERT_PARSE_FAILS(EINVAL, "--json-fd '999999' is not an open file descriptor", "--json-fd",
                           "999999", "true");
        ASSERT_PARSE_FAILS(EINVAL, "--json and --json-fd cannot be combined", "--json", "/x",
                           "--json-fd", num, "true");
        ASSERT_PARSE_FAILS(EINVAL, "--json needs a file name", "--json", "", "true");
}

TEST(command_is_never_parsed) {
        _cleanup_(run_args_done) RunArgs a = {};
        HutchError e;

        ASSERT_OK(parse(&a, &e, "ls", "-l", "--tmpfs", "x", NULL));
        ASSERT_EQ(strv_length(a.command), 4);
        ASSERT_STREQ(a.command[0], "ls");
        ASSERT_STREQ(a.command[1], "-l");
        ASSERT_STREQ(a.command[2], "--tmpfs");
        ASSERT_EQ(a.policy->n_tmpfs, 0);
        run_args_done(&a);

        /* "--" ends the flags; a later "--" belongs to the command. */
        ASSERT_OK(parse(&a, &e, "--read-only", "--", "-v", "--", "x", NULL));
        ASSERT_TRUE(a.policy->read_only);
        ASSERT_EQ(a.policy->n_binds, 0);
        ASSERT_EQ(strv_length(a.command), 3);
        ASSERT_STREQ(a.command[0], "-v");
        ASSERT_STREQ(a.command[1], "--");
        run_args_done(&a);

        ASSERT_OK(parse(&a, &e, "--", "--help", NULL));
        ASSERT_FALSE(a.help);
        ASSERT_STREQ(a.command[0], "--help");
        run_args_done(&a);

        /* A lone "-" is a command, not a flag. */
        ASSERT_OK(parse(&a, &e, "-", NULL));
        ASSERT_STREQ(a.command[0], "-");
}

TEST(missing_command) {
        ASSERT_PARSE_FAILS(EINVAL, "missing command (usage: hutch run [FLAGS] -- CMD [ARGS...])",
                           "--read-only");
        ASSERT_PARSE_FAILS(EINVAL, "missing command (usage: hutch run [FLAGS] -- CMD [ARGS...])",
                           "--");

        RunArgs a;
        HutchError e;
        char *argv[] = {(char *)"run", NULL};

        ASSERT_ERROR(run_args_parse(1, argv, &a, &e), EINVAL);
        ASSERT_ERROR(run_args_parse(0, argv, &a, &e), EINVAL);
        ASSERT_ERROR(run_args_parse(1, NULL, &a, &e), EINVAL);
        ASSERT_ERROR(run_args_parse(1, argv, NULL, &e), EINVAL);
}

TEST(option_errors) {
        ASSERT_PARSE_FAILS(EINVAL, "unknown option '--zzzzz'", "--zzzzz", "true");
        ASSERT_PARSE_FAILS(EINVAL, "unknown option '--zzzzz'", "--zzzzz=1", "true");
        /* The nearest flag is suggested (a swap of neighbours is one edit). */
        ASSERT_PARSE_FAILS(EINVAL, "unknown option '--frob': did you mean '--from'?", "--frob",
                           "true");
        ASSERT_PARSE_FAILS(EINVAL, "unknown option '--memroy': did you mean '--memory'?",
                           "--memroy=1g", "true");
        ASSERT_PARSE_FAILS(EINVAL, "unknown option '--alow-host': did you mean '--allow-host'?",
                           "--alow-host", "x", "true");
        ASSERT_PARSE_FAILS(EINVAL, "unknown option '-x'", "-x", "true");
        ASSERT_PARSE_FAILS(EINVAL, "unknown option '-z'", "--read-only", "-hz", "true");
        ASSERT_PARSE_FAILS(EINVAL, "option '--tmpfs' needs a value", "--tmpfs");
        ASSERT_PARSE_FAILS(EINVAL, "option '--workspace' needs a value", "--workspace");
        ASSERT_PARSE_FAILS(EINVAL, "option '-v' needs a value", "-v");
        ASSERT_PARSE_FAILS(EINVAL, "option '-e' needs a value", "--read-only", "-e");
        ASSERT_PARSE_FAILS(EINVAL, "option '--read-only' does not take a value", "--read-only=1",
                           "true");
        ASSERT_PARSE_FAILS(EINVAL, "option '--help' does not take a value", "--help=1");
        /* An ambiguous abbreviation (--workdir or --workspace) is refused. */
        ASSERT_PARSE_FAILS(EINVAL, "unknown option '--work'", "--work", "/x", "true");
}

TEST(docker_flags) {
        _cleanup_(run_args_done) RunArgs a = {};
        HutchError e;

        ASSERT_OK(parse(&a, &e, "--rm", "--cap-drop", "ALL", "--cap-drop=NET_RAW", "true", NULL));
        ASSERT_EQ(strv_length(a.command), 1);
        ASSERT_PARSE_FAILS(EINVAL,
                           "--cap-add NET_ADMIN is refused: hutch grants the sandbox no "
                           "capability (every one is dropped and the command runs without "
                           "privileges; see docs/threat-model.md)",
                           "--cap-add", "NET_ADMIN", "true");
        {
                _cleanup_(run_args_done) RunArgs img = {};
                _cleanup_(run_args_done) RunArgs nocmd = {};

                /* --image sets the policy's image; with it the command may
                 * be left out (the image's Entrypoint/Cmd). */
                ASSERT_OK(parse(&img, &e, "--image", "debian:12", "true", NULL));
                ASSERT_STREQ(img.policy->image, "debian:12");
                ASSERT_OK(parse(&nocmd, &e, "--image", "debian:12", NULL));
                ASSERT_NULL(nocmd.command);
        }
        ASSERT_PARSE_FAILS(EINVAL,
                           "invalid image name 'a b' (1-255 characters of A-Z, a-z, 0-9 and "
                           "'._-:/@', not starting with '-' or '.')",
                           "--image", "a b", "true");
        ASSERT_PARSE_FAILS(EINVAL,
                           "invalid --memory '512': that is in bytes (a size without a unit is, "
                           "as docker's), below the minimum of 6m: give a unit, as 512m",
                           "--memory", "512", "true");
        ASSERT_PARSE_FAILS(EINVAL,
                           "invalid --allow-host 'ftp://files.example.com/': give a host name "
                           "(and a port), not a URL of scheme 'ftp'",
                           "--allow-host", "ftp://files.example.com/", "true");
}

TEST(tty_flags) {
        _cleanup_(run_args_done) RunArgs a = {}, b = {}, c = {};
        char *create[] = {(char *)"create", (char *)"-t", (char *)"box", NULL};
        HutchError e;

        ASSERT_OK(parse(&a, &e, "-it", "sh", NULL));
        ASSERT_TRUE(a.tty);
        ASSERT_TRUE(a.interactive);
        ASSERT_OK(parse(&b, &e, "--tty", "sh", NULL));
        ASSERT_TRUE(b.tty);
        ASSERT_FALSE(b.interactive);
        /* A persistent sandbox has no command of its own to give one to. */
        c = (RunArgs){.json_fd = -EBADF};
        e = (HutchError){};
        ASSERT_ERROR(run_args_parse_mode(3, create, RUN_ARGS_CREATE, &c, &e), EINVAL);
        ASSERT_STREQ(e.msg, "-t/--tty is a flag of 'hutch run' and 'hutch exec'");
}

TEST(allow_host_url) {
        _cleanup_(run_args_done) RunArgs a = {};
        HutchError e;

        ASSERT_OK(parse(&a, &e, "--allow-host", "https://api.example.com/v1?x=1", "--allow-host",
                        "http://example.com:8080/", "--allow-host", "HTTP://example.org", "true",
                        NULL));
        ASSERT_EQ(strv_length(a.policy->allow_hosts), 3);
        ASSERT_STREQ(a.policy->allow_hosts[0], "api.example.com:443");
        ASSERT_STREQ(a.policy->allow_hosts[1], "example.com:8080");
        ASSERT_STREQ(a.policy->allow_hosts[2], "example.org:80");
}

TEST(abbreviations_and_clusters) {
        _cleanup_(run_args_done) RunArgs a = {};
        HutchError e;

        ASSERT_OK(parse(&a, &e, "--host", "box", "-eA=1", "-w/w", "true", NULL));
        ASSERT_STREQ(a.policy->hostname, "box");
        ASSERT_STREQ(strv_env_get(a.policy->env, "A"), "1");
        ASSERT_STREQ(a.policy->workdir, "/w");
}

TEST(bad_values) {
        _cleanup_tmpdir_ char *dir = make_tmpdir();
        _cleanup_free_ char *missing = path_join(dir, "missing"), *msg = NULL,
                            *file = path_join(dir, "file"), *vol = NULL;

        ASSERT_PARSE_FAILS(EINVAL, "invalid size '12q' in --tmpfs '/x:size=12q'", "--tmpfs",
                           "/x:size=12q", "true");
        ASSERT_PARSE_FAILS(EINVAL, "invalid size '12q' in --tmpfs '/tmp:size=12q'", "--tmpfs",
                           "/tmp:size=12q", "true");
        ASSERT_PARSE_FAILS(EINVAL, "bind target 'data' in -v '/tmp:data' must be an absolute path",
                           "-v", "/tmp:data", "true");
        ASSERT_PARSE_FAILS(EINVAL, "unsupported network mode 'host' (expected 'none' or 'allow')",
                           "--network", "host", "true");
        ASSERT_PARSE_FAILS(EINVAL,
                           "invalid hostname 'a.b' (1-63 characters of A-Z, a-z, 0-9 and '-', not "
                           "starting or ending with '-')",
                           "--hostname", "a.b", "true");
        ASSERT_PARSE_FAILS(EINVAL,
                           "workdir 'w' must be an absolute path without '.' or '..' "
                           "components",
                           "-w", "w", "true");
        ASSERT_PARSE_FAILS(EINVAL,
                           "invalid environment variable name '1A' in -e '1A=x' (expected "
                           "[A-Za-z_][A-Za-z0-9_]*)",
                           "-e", "1A=x", "true");
        ASSERT_PARSE_FAILS(EINVAL,
                           "invalid environment variable name 'A=x' in --env-pass (expected "
                           "[A-Za-z_][A-Za-z0-9_]*)",
                           "--env-pass", "A=x", "true");
        ASSERT_PARSE_FAILS(EINVAL, "workspace directory in --workspace ':copy' is empty",
                           "--workspace", ":copy", "true");

        /* Host checks (policy_validate()) run too. */
        ASSERT_TRUE(asprintf(&msg, "workspace '%s' does not exist", missing) > 0);
        ASSERT_PARSE_FAILS(ENOENT, msg, "--workspace", missing, "true");
        write_text(file, "");
        free(msg);
        msg = NULL;
        ASSERT_TRUE(asprintf(&msg, "workspace '%s' is not a directory", file) > 0);
        ASSERT_PARSE_FAILS(ENOTDIR, msg, "--workspace", file, "true");
        free(msg);
        msg = NULL;
        ASSERT_TRUE(asprintf(&msg, "bind source '%s' does not exist", missing) > 0);
        ASSERT_TRUE(asprintf(&vol, "%s:/x", missing) > 0);
        ASSERT_PARSE_FAILS(ENOENT, msg, "-v", "/tmp:/ok", "--volume", vol, "true");
}

TEST(policy_file_merges_under_flags) {
        _cleanup_tmpdir_ char *dir = make_tmpdir();
        _cleanup_(run_args_done) RunArgs a = {};
        _cleanup_free_ char *pf = path_join(dir, "p.json");
        HutchError e;

        write_text(pf, "{\n"
                       "  \"hostname\": \"filebox\",\n"
                       "  \"workdir\": \"/from-file\",\n"
                       "  \"binds\": [{\"source\": \"/tmp\", \"target\": \"/file\"}],\n"
                       "  \"tmpfs\": [{\"path\": \"/tmp\", \"size\": \"64m\"}],\n"
                       "  \"env\": {\"A\": \"file\", \"B\": \"file\"}\n"
                       "}\n");
        /* --policy comes after the flags on the command line and is still
         * applied first: the flags win for scalars, lists merge, and an entry
         * for the same target or key replaces the file's. */
        ASSERT_OK(parse(&a, &e, "--hostname", "flagbox", "-v", "/tmp:/flag", "--tmpfs",
                        "/tmp:size=128m", "-e", "A=flag", "--policy", pf, "true", NULL));
        ASSERT_STREQ(a.policy->hostname, "flagbox");
        ASSERT_STREQ(a.policy->workdir, "/from-file");
        ASSERT_EQ(a.policy->n_binds, 2);
        ASSERT_STREQ(a.policy->binds[0].target, "/file");
        ASSERT_STREQ(a.policy->binds[1].target, "/flag");
        ASSERT_EQ(a.policy->n_tmpfs, 1);
        ASSERT_EQ(a.policy->tmpfs[0].size, 128ULL << 20);
        ASSERT_STREQ(strv_env_get(a.policy->env, "A"), "flag");
        ASSERT_STREQ(strv_env_get(a.policy->env, "B"), "file");
}

TEST(policy_file_errors) {
        _cleanup_tmpdir_ char *dir = make_tmpdir();
        _cleanup_free_ char *pf = path_join(dir, "p.json"), *missing = path_join(dir, "no.json"),
                            *msg = NULL;

        write_text(pf, "{\n  \"hostname\": \"ok\",\n  \"tmpfs\": [\n    {\"path\": \"/t\", "
                       "\"size\": \"12q\"}\n  ]\n}\n");
        ASSERT_TRUE(asprintf(&msg, "policy file '%s' line 4: /tmpfs/0/size: invalid size '12q'",
                             pf) > 0);
        ASSERT_PARSE_FAILS(EINVAL, msg, "--policy", pf, "true");

        RunArgs a;
        HutchError e;

        ASSERT_ERROR(parse(&a, &e, "--policy", pf, "true", NULL), EINVAL);
        ASSERT_STREQ(e.pointer, "/tmpfs/0/size");
        ASSERT_EQ(e.line, 4);

        free(msg);
        msg = NULL;
        ASSERT_TRUE(asprintf(&msg, "cannot open policy file '%s': No such file or directory",
                             missing) > 0);
        ASSERT_PARSE_FAILS(ENOENT, msg, "--policy", missing, "true");
}

TEST(help) {
        _cleanup_(run_args_done) RunArgs a = {};
        HutchError e;

        ASSERT_OK(parse(&a, &e, "--help", NULL));
        ASSERT_TRUE(a.help);
        ASSERT_NOT_NULL(a.policy);
        ASSERT_NULL(a.command);
        run_args_done(&a);

        /* Help wins over bad values and a missing policy file. */
        ASSERT_OK(parse(&a, &e, "--network", "host", "--policy", "/nonexistent.json", "-h", NULL));
        ASSERT_TRUE(a.help);
}

TEST(parse_twice) {
        _cleanup_(run_args_done) RunArgs a = {}, b = {};
        HutchError e;

        /* getopt's state is reset, so a second parse sees every flag again. */
        ASSERT_OK(parse(&a, &e, "--hostname", "one", "-e", "A=1", "x", NULL));
        ASSERT_OK(parse(&b, &e, "--hostname", "two", "-e", "A=2", "y", NULL));
        ASSERT_STREQ(a.policy->hostname, "one");
        ASSERT_STREQ(b.policy->hostname, "two");
        ASSERT_STREQ(strv_env_get(b.policy->env, "A"), "2");
        ASSERT_STREQ(b.command[0], "y");
}

TEST(usage) {
        static const char *const flags[] = {
                "--volume",    "--workdir",  "--env ",    "--env-pass", "--workspace", "--tmpfs",
                "--read-only", "--hostname", "--network", "--policy",   "--json ",     "--json-fd",
                "--help",      "1g",         "64m",       "4g",         "125",
        };
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);

        ASSERT_NOT_NULL(f);
        run_args_usage(f);
        ASSERT_OK(fclose(f));
        ASSERT_TRUE(strncmp(buf, "usage: hutch run", 16) == 0);
        for (size_t i = 0; i < ELEMENTSOF(flags); i++)
                if (!strstr(buf, flags[i]))
                        fail_msg("usage lacks '%s'", flags[i]);
}

TEST(backend_flags) {
        _cleanup_tmpdir_ char *dir = make_tmpdir();
        _cleanup_free_ char *kernel = path_join(dir, "vmlinuz-1");
        _cleanup_(run_args_done) RunArgs a = {};
        _cleanup_(run_args_done) RunArgs c = {};
        char *create[] = {(char *)"create",     (char *)"--backend", (char *)"vm",
                          (char *)"--vm-accel", (char *)"tcg",       NULL};
        HutchError e;

        write_text(kernel, "x");
        ASSERT_OK(parse(&a, &e, "--backend", "vm", "--vm-accel", "tcg", "--vm-kernel", kernel,
                        "true", NULL));
        ASSERT_EQ(a.policy->backend, SANDBOX_BACKEND_VM);
        ASSERT_EQ(a.policy->vm_accel, VM_ACCEL_TCG);
        ASSERT_STREQ(a.policy->vm_kernel, kernel);
        ASSERT_PARSE_FAILS(EINVAL, "unsupported backend 'docker' (expected 'ns' or 'vm')",
                           "--backend", "docker", "true");
        ASSERT_PARSE_FAILS(EINVAL, "unsupported VM accelerator 'xen' (expected 'kvm' or 'tcg')",
                           "--vm-accel", "xen", "true");
        ASSERT_PARSE_FAILS(ENOENT, "VM kernel '/nonexistent/vmlinuz': No such file or directory",
                           "--backend", "vm", "--vm-kernel", "/nonexistent/vmlinuz", "true");
        /* A persistent microVM keeps both in its policy. */
        e = (HutchError){};
        c = (RunArgs){.json_fd = -EBADF};
        ASSERT_OK(run_args_parse_mode(5, create, RUN_ARGS_CREATE, &c, &e));
        ASSERT_EQ(c.policy->backend, SANDBOX_BACKEND_VM);
        ASSERT_EQ(c.policy->vm_accel, VM_ACCEL_TCG);
}

/* create takes --disk (the persistent sandbox's disk limit, issue 15),
 * still not --output-limit (its execs' output is not relayed). */
TEST(create_takes_disk_not_output_limit) {
        char *disk[] = {(char *)"create", (char *)"--disk", (char *)"64m", NULL};
        char *out[] = {(char *)"create", (char *)"--output-limit", (char *)"1m", NULL};
        RunArgs c = {.json_fd = -EBADF};
        HutchError e = {};

        ASSERT_OK(run_args_parse_mode(3, disk, RUN_ARGS_CREATE, &c, &e));
        ASSERT_EQ(c.policy->disk_size, 64ULL << 20);
        ASSERT_TRUE(c.policy->limits_explicit & (1U << POLICY_LIMIT_DISK));
        ASSERT_TRUE(c.policy_given);
        run_args_done(&c);
        c = (RunArgs){.json_fd = -EBADF};
        ASSERT_ERROR(run_args_parse_mode(3, out, RUN_ARGS_CREATE, &c, &e), EINVAL);
        ASSERT_NOT_NULL(strstr(e.msg, "--output-limit cannot be enforced"));
        run_args_done(&c);
}

TEST(quiet) {
        _cleanup_(run_args_done) RunArgs a = {};
        _cleanup_(run_args_done) RunArgs c = {};
        char *create[] = {(char *)"create", (char *)"--quiet", NULL};
        HutchError e;

        ASSERT_OK(parse(&a, &e, "true", NULL));
        ASSERT_FALSE(a.quiet);
        run_args_done(&a);
        ASSERT_OK(parse(&a, &e, "-q", "true", NULL));
        ASSERT_TRUE(a.quiet);
        run_args_done(&a);
        ASSERT_OK(parse(&a, &e, "--quiet", "true", NULL));
        ASSERT_TRUE(a.quiet);
        /* Nothing runs after `hutch create`: no refusals to quiet. */
        e = (HutchError){};
        c = (RunArgs){.json_fd = -EBADF};
        ASSERT_ERROR(run_args_parse_mode(2, create, RUN_ARGS_CREATE, &c, &e), EINVAL);
        ASSERT_STREQ(e.msg, "--quiet is a flag of 'hutch run' and 'hutch exec'");
}

TEST(run_args_done_is_idempotent) {
        RunArgs a = {.json_fd = -EBADF};

        run_args_done(&a);
        run_args_done(&a);
        run_args_done(NULL);
        ASSERT_NULL(a.policy);
}

/* The door (hutch-ext.h): every flag with a value refuses a bad one
 * with an error naming it, the valueless ones set the policy, and the
 * view shows what the verbs read. */
TEST(ext_policy_door) {
        _cleanup_(hutch_ext_policy_freep) struct Policy *p = hutch_ext_policy_new();
        HutchExtPolicyView v;
        HutchError e;

        ASSERT_NOT_NULL(p);
        hutch_ext_policy_view(p, &v);
        ASSERT_FALSE(v.read_only);
        ASSERT_FALSE(v.vm);
        ASSERT_NULL(v.workspace);
        ASSERT_OK(hutch_ext_policy_flag(p, HUTCH_EXT_FLAG_READ_ONLY, NULL, &e));
        ASSERT_OK(hutch_ext_policy_flag(p, HUTCH_EXT_FLAG_MEMORY, "1g", &e));
        ASSERT_OK(hutch_ext_policy_flag(p, HUTCH_EXT_FLAG_PUBLISH, "8080", &e));
        hutch_ext_policy_view(p, &v);
        ASSERT_TRUE(v.read_only);
        ASSERT_TRUE(v.memory_explicit);
        ASSERT_EQ(v.memory_max, 1ULL << 30);
        ASSERT_EQ(strv_length((char **)v.ports), 1);
        ASSERT_STREQ(hutch_ext_policy_limit_name(POLICY_LIMIT_MEMORY), "memory");
        ASSERT_NULL(hutch_ext_policy_limit_name(_POLICY_LIMIT_MAX));
        for (int f = 0; f < _HUTCH_EXT_FLAG_MAX; f++) {
                if (f == HUTCH_EXT_FLAG_READ_ONLY || f == HUTCH_EXT_FLAG_ALLOW_DEGRADED)
                        continue;
                e = (HutchError){};
                ASSERT_TRUE(hutch_ext_policy_flag(p, f, f == HUTCH_EXT_FLAG_BACKEND ? "nope" : "",
                                                  &e) < 0);
        }
        ASSERT_ERROR(hutch_ext_policy_flag(p, _HUTCH_EXT_FLAG_MAX, "x", &e), EINVAL);
        ASSERT_ERROR(hutch_ext_policy_flag(p, HUTCH_EXT_FLAG_MEMORY, NULL, &e), EINVAL);
}

DEFINE_TEST_MAIN
