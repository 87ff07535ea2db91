/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy/policy-internal.h"
#include "policy/policy.h"
#include "strv.h"
#include "test-util.h"
#include "test.h"

/* Loads @json into a fresh policy; the error (if any) lands in @e. */
static int load(const char *json, HutchError *e) {
        _cleanup_(policy_freep) Policy *p = policy_new();

        if (!p)
                return -ENOMEM;
        *e = (HutchError){};
        return policy_load_json(p, json, strlen(json), e);
}

/* A document with every local field; %s is the workspace directory. */
static const char full_document_fmt[] =
        "{\n"
        "  \"workspace\": {\"path\": \"%s\", \"mode\": \"copy\"},\n"
        "  \"binds\": [\n"
        "    {\"source\": \"/tmp\", \"target\": \"/data\", \"read_only\": "
        "true},\n"
        "    {\"source\": \"/tmp\", \"target\": \"/rw\"}\n"
        "  ],\n"
        "  \"tmpfs\": [{\"path\": \"/tmp\", \"size\": \"64m\"}, {\"path\": "
        "\"/cache\", \"size\": 8192}, {\"path\": \"/big\"}],\n"
        "  \"env\": {\"A\": \"1\", \"B\": \"two words\"},\n"
        "  \"env_pass\": [\"TERM\", \"LANG\"],\n"
        "  \"workdir\": \"/workspace/src\",\n"
        "  \"hostname\": \"box\",\n"
        "  \"read_only\": true,\n"
        "  \"network\": \"none\"\n"
        "}\n";

/* A document with the limits and every network field. */
static const char limits_network_document[] =
        "{\"limits\": {\"memory\": \"512m\", \"memory_swap\": 1073741824,"
        " \"cpus\": 1.5, \"pids\": 64, \"timeout\": \"30s\", \"disk\": \"1g\","
        " \"output_limit\": \"10m\"},"
        " \"allow_degraded\": true,"
        " \"network\": \"allow\","
        " \"allow_hosts\": [\"api.example.com\", \"*.registry.example:443\"],"
        " \"deny_hosts\": [\"evil.registry.example\"],"
        " \"allow_private\": [\"127.0.0.0/8\"],"
        " \"resolve\": [\"api.example.com:127.0.0.1\"],"
        " \"audit_log\": \"/tmp/a.jsonl\"}";

TEST(full_document) {
        _cleanup_tmpdir_ char *dir = make_tmpdir();
        _cleanup_(policy_freep) Policy *p = policy_new();
        _cleanup_free_ char *json = NULL;
        HutchError e = {};

        ASSERT_TRUE(asprintf(&json, full_document_fmt, dir) > 0);
        ASSERT_OK(policy_load_json(p, json, strlen(json), &e));

        ASSERT_STREQ(p->workspace, dir);
        ASSERT_EQ(p->workspace_mode, WORKSPACE_MODE_COPY);
        ASSERT_EQ(p->n_binds, 2);
        ASSERT_STREQ(p->binds[0].source, "/tmp");
        ASSERT_STREQ(p->binds[0].target, "/data");
        ASSERT_TRUE(p->binds[0].read_only);
        ASSERT_STREQ(p->binds[1].target, "/rw");
        ASSERT_FALSE(p->binds[1].read_only);
        ASSERT_EQ(p->n_tmpfs, 3);
        ASSERT_STREQ(p->tmpfs[0].path, "/tmp");
        ASSERT_EQ(p->tmpfs[0].size, 64ULL << 20);
        ASSERT_EQ(p->tmpfs[1].size, 8192);
        ASSERT_EQ(p->tmpfs[2].size, POLICY_DEFAULT_TMP_SIZE);
        ASSERT_STREQ(strv_env_get(p->env, "A"), "1");
        ASSERT_STREQ(strv_env_get(p->env, "B"), "two words");
        ASSERT_EQ(strv_length(p->env_pass), 2);
        ASSERT_STREQ(p->env_pass[1], "LANG");
        ASSERT_STREQ(p->workdir, "/workspace/src");
        ASSERT_STREQ(p->hostname, "box");
        ASSERT_TRUE(p->read_only);
        ASSERT_EQ(p->network, NETWORK_MODE_NONE);
        ASSERT_OK(policy_validate(p, &e));
}

TEST(empty_object_changes_nothing) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError e = {};

        ASSERT_OK(policy_load_json(p, " {\n}\n", 5, &e));
        ASSERT_NULL(p->workspace);
        ASSERT_EQ(p->n_binds, 0);
        ASSERT_STREQ(p->hostname, "hutch");
        ASSERT_FALSE(p->read_only);
}

TEST(workspace_forms) {
        _cleanup_tmpdir_ char *dir = make_tmpdir();
        _cleanup_(policy_freep) Policy *p = policy_new();
        _cleanup_free_ char *json = NULL, *old = getcwd(NULL, 0);
        HutchError e = {};

        ASSERT_TRUE(asprintf(&json, "{\"workspace\": \"%s:copy\"}", dir) > 0);
        ASSERT_OK(policy_load_json(p, json, strlen(json), &e));
        ASSERT_STREQ(p->workspace, dir);
        ASSERT_EQ(p->workspace_mode, WORKSPACE_MODE_COPY);

        /* The object without a mode keeps the mode already set. */
        ASSERT_OK(policy_load_json(p, "{\"workspace\": {\"path\": \"/tmp\"}}", 31, &e));
        ASSERT_EQ(p->workspace_mode, WORKSPACE_MODE_COPY);
        ASSERT_OK(policy_load_json(p, "{\"workspace\": {\"path\": \"/tmp\", \"mode\": \"mount\"}}",
                                   48, &e));
        ASSERT_EQ(p->workspace_mode, WORKSPACE_MODE_MOUNT);
        free(json);
        json = NULL;
        ASSERT_TRUE(asprintf(&json, "{\"workspace\": {\"path\": \"%s\", \"mode\": \"overlay\"}}",
                             dir) > 0);
        ASSERT_OK(policy_load_json(p, json, strlen(json), &e));
        ASSERT_STREQ(p->workspace, dir);
        ASSERT_EQ(p->workspace_mode, WORKSPACE_MODE_OVERLAY);
        ASSERT_OK(policy_validate(p, &e));
        free(json);
        json = NULL;
        ASSERT_TRUE(asprintf(&json, "{\"workspace\": \"%s:overlay\"}", dir) > 0);
        p->workspace_mode = WORKSPACE_MODE_MOUNT;
        ASSERT_OK(policy_load_json(p, json, strlen(json), &e));
        ASSERT_STREQ(p->workspace, dir);
        ASSERT_EQ(p->workspace_mode, WORKSPACE_MODE_OVERLAY);

        /* Relative paths are relative to the current directory. */
        ASSERT_NOT_NULL(old);
        ASSERT_OK(chdir(dir));
        ASSERT_OK(policy_load_json(p, "{\"workspace\": \".\"}", 18, &e));
        ASSERT_OK(chdir(old));
        ASSERT_STREQ(p->workspace, dir);
}

TEST(later_documents_merge) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError e = {};
        const char *a = "{\"hostname\": \"a\", \"binds\": [{\"source\": \"/tmp\", \"target\": "
                        "\"/x\"}], \"env\": {\"K\": \"1\"}}";
        const char *b = "{\"hostname\": \"b\", \"binds\": [{\"source\": \"/tmp\", \"target\": "
                        "\"/y\"}, {\"source\": \"/var\", \"target\": \"/x\", \"read_only\": "
                        "true}], \"env\": {\"K\": \"2\", \"L\": \"3\"}}";

        ASSERT_OK(policy_load_json(p, a, strlen(a), &e));
        ASSERT_OK(policy_load_json(p, b, strlen(b), &e));
        ASSERT_STREQ(p->hostname, "b");
        ASSERT_EQ(p->n_binds, 2);
        ASSERT_STREQ(p->binds[0].target, "/x");
        ASSERT_STREQ(p->binds[0].source, "/var");
        ASSERT_TRUE(p->binds[0].read_only);
        ASSERT_STREQ(p->binds[1].target, "/y");
        ASSERT_EQ(strv_length(p->env), 2);
        ASSERT_STREQ(strv_env_get(p->env, "K"), "2");
}

TEST(escaped_keys_are_decoded) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError e = {};
        const char *ok = "{\"host\\u006eame\": \"box\"}";
        const char *bad = "{\n\"read_only\": false,\n  \"host\\u006eame\": \"-x\"}";

        ASSERT_OK(policy_load_json(p, ok, strlen(ok), &e));
        ASSERT_STREQ(p->hostname, "box");
        ASSERT_ERROR(policy_load_json(p, bad, strlen(bad), &e), EINVAL);
        ASSERT_STREQ(e.pointer, "/hostname");
        ASSERT_EQ(e.line, 3);
        ASSERT_EQ(e.column, 20);
}

/* Every member with a value of the wrong type. */
TEST(wrong_types) {
        static const struct {
                const char *json;
                const char *msg;
        } cases[] = {
                {"{\"read_only\": \"yes\"}",
                 "policy: /read_only: expected a boolean, got a string"},
                {"{\"read_only\": 1}", "policy: /read_only: expected a boolean, got an integer"},
                {"{\"read_only\": null}", "policy: /read_only: expected a boolean, got null"},
                {"{\"hostname\": 5}", "policy: /hostname: expected a string, got an integer"},
                {"{\"workdir\": []}", "policy: /workdir: expected a string, got an array"},
                {"{\"network\": false}", "policy: /network: expected a string, got a boolean"},
                {"{\"workspace\": 1.5}",
                 "policy: /workspace: expected an object or a string, got a real number"},
                {"{\"workspace\": {\"path\": 1}}",
                 "policy: /workspace/path: expected a string, got an integer"},
                {"{\"workspace\": {\"path\": \"/tmp\", \"mode\": true}}",
                 "policy: /workspace/mode: expected a string, got a boolean"},
                {"{\"binds\": {}}", "policy: /binds: expected an array, got an object"},
                {"{\"binds\": [\"/a:/b\"]}", "policy: /binds/0: expected an object, got a string"},
                {"{\"binds\": [{\"source\": 1, \"target\": \"/b\"}]}",
                 "policy: /binds/0/source: expected a string, got an integer"},
                {"{\"binds\": [{\"source\": \"/a\", \"target\": [\"/b\"]}]}",
                 "policy: /binds/0/target: expected a string, got an array"},
                {"{\"binds\": [{\"source\": \"/a\", \"target\": \"/b\", \"read_only\": \"no\"}]}",
                 "policy: /binds/0/read_only: expected a boolean, got a string"},
                {"{\"tmpfs\": \"/tmp\"}", "policy: /tmpfs: expected an array, got a string"},
                {"{\"tmpfs\": [null]}", "policy: /tmpfs/0: expected an object, got null"},
                {"{\"tmpfs\": [{\"path\": null}]}",
                 "policy: /tmpfs/0/path: expected a string, got null"},
                {"{\"tmpfs\": [{\"path\": \"/t\", \"size\": 1.5}]}",
                 "policy: /tmpfs/0/size: expected a string or an integer, got a real number"},
                {"{\"env\": []}", "policy: /env: expected an object, got an array"},
                {"{\"env\": {\"A\": 1}}", "policy: /env/A: expected a string, got an integer"},
                {"{\"env\": {\"A\": null}}", "policy: /env/A: expected a string, got null"},
                {"{\"env_pass\": \"A\"}", "policy: /env_pass: expected an array, got a string"},
                {"{\"env_pass\": [\"A\", true]}",
                 "policy: /env_pass/1: expected a string, got a boolean"},
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                HutchError e = {};

                ASSERT_ERROR(load(cases[i].json, &e), EINVAL);
                ASSERT_EQ(e.errnum, EINVAL);
                ASSERT_STREQ(e.msg, cases[i].msg);
                ASSERT_EQ(e.line, 1);
                ASSERT_TRUE(e.pointer[0] == '/');
                ASSERT_TRUE(strstr(cases[i].msg, e.pointer) != NULL);
        }
}

TEST(unknown_fields) {
        static const struct {
                const char *json;
                const char *pointer;
                const char *msg;
                unsigned line, column;
        } cases[] = {
                {"{\"frob\": 1}", "/frob", "policy: /frob: unknown field 'frob'", 1, 2},
                {"{\"hostname\": \"a\",\n \"Hostname\": \"b\"}", "/Hostname",
                 "policy: /Hostname: unknown field 'Hostname'", 2, 2},
                {"{\"workspace\": {\"path\": \"/tmp\", \"pth\": \"/\"}}", "/workspace/pth",
                 "policy: /workspace/pth: unknown field 'pth'", 1, 32},
                {"{\"binds\": [\n  {\"source\": \"/a\", \"target\": \"/a\"},\n  {\"source\": "
                 "\"/b\", \"target\": \"/b\"},\n  {\"sourc\": \"/c\", \"target\": \"/c\"}\n]}",
                 "/binds/2/sourc", "policy: /binds/2/sourc: unknown field 'sourc'", 4, 4},
                {"{\"tmpfs\": [{\"path\": \"/t\", \"mode\": \"1777\"}]}", "/tmpfs/0/mode",
                 "policy: /tmpfs/0/mode: unknown field 'mode'", 1, 27},
                /* '/' and '~' in a key are escaped in the pointer. */
                {"{\"a/b~c\": 1}", "/a~1b~0c", "policy: /a~1b~0c: unknown field 'a/b~c'", 1, 2},
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                HutchError e = {};

                ASSERT_ERROR(load(cases[i].json, &e), EINVAL);
                ASSERT_STREQ(e.pointer, cases[i].pointer);
                ASSERT_STREQ(e.msg, cases[i].msg);
                ASSERT_EQ(e.line, cases[i].line);
                ASSERT_EQ(e.column, cases[i].column);
        }
}

TEST(syntax_errors) {
        static const struct {
                const char *json;
                const char *msg;
                unsigned line, column;
        } cases[] = {
                {"", "policy: line 1 column 0: '[' or '{' expected near end of file", 1, 0},
                {"{", "policy: line 1 column 1: string or '}' expected near end of file", 1, 1},
                {"{\"a\": 1,}", "policy: line 1 column 9: string or '}' expected near '}'", 1, 9},
                {"{\n  \"hostname\": \"a\"\n  \"workdir\": \"/\"\n}",
                 "policy: line 3 column 11: '}' expected near '\"workdir\"'", 3, 11},
                {"{\n \"read_only\": tru\n}", "policy: line 2 column 17: invalid token near 'tru'",
                 2, 17},
                {"{} x", "policy: line 1 column 4: end of file expected near 'x'", 1, 4},
                {"\"just a string\"",
                 "policy: line 1 column 15: '[' or '{' expected near '\"just a string\"'", 1, 15},
                /* Duplicate keys are refused by the parser, with the line. */
                {"{\n  \"hostname\": \"a\",\n  \"hostname\": \"b\"\n}",
                 "policy: line 3 column 12: duplicate object key near '\"hostname\"'", 3, 12},
                {"{\"env\": {\"A\": \"1\", \"A\": \"2\"}}",
                 "policy: line 1 column 22: duplicate object key near '\"A\"'", 1, 22},
                {"{\"hostname\": \"a\\u0000b\"}",
                 "policy: line 1 column 23: \\u0000 is not allowed without JSON_ALLOW_NUL near "
                 "'\"a\\u0000b\"'",
                 1, 23},
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                HutchError e = {};

                ASSERT_ERROR(load(cases[i].json, &e), EINVAL);
                ASSERT_STREQ(e.msg, cases[i].msg);
                ASSERT_EQ(e.line, cases[i].line);
                ASSERT_EQ(e.column, cases[i].column);
                ASSERT_STREQ(e.pointer, "");
        }
}

TEST(embedded_nul_is_refused) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError e = {};

        /* The length covers a NUL and garbage after a complete document: the
         * whole buffer is parsed, not just the C string. */
        ASSERT_ERROR(policy_load_json(p, "{}\0{\"x\":1}", 10, &e), EINVAL);
        ASSERT_EQ(e.line, 1);
}

TEST(top_level_must_be_an_object) {
        HutchError e = {};

        ASSERT_ERROR(load("\n [{\"hostname\": \"x\"}]", &e), EINVAL);
        ASSERT_STREQ(e.msg, "policy: the top level must be an object, not an array");
        ASSERT_EQ(e.line, 2);
        ASSERT_EQ(e.column, 2);
}

TEST(invalid_values) {
        static const struct {
                const char *json;
                const char *pointer;
                const char *msg;
        } cases[] = {
                {"{\"workspace\": \"\"}", "/workspace",
                 "policy: /workspace: workspace directory is empty"},
                {"{\"workspace\": \":copy\"}", "/workspace",
                 "policy: /workspace: workspace directory is empty"},
                {"{\"workspace\": {\"path\": \"\"}}", "/workspace/path",
                 "policy: /workspace/path: path must not be empty"},
                {"{\"workspace\": {\"mode\": \"copy\"}}", "/workspace",
                 "policy: /workspace: missing field 'path'"},
                {"{\"workspace\": {\"path\": \"/tmp\", \"mode\": \"snapshot\"}}", "/workspace/mode",
                 "policy: /workspace/mode: unknown workspace mode 'snapshot' (expected 'mount', "
                 "'copy' or 'overlay')"},
                {"{\"binds\": [{\"source\": \"/a\", \"target\": \"rel\"}]}", "/binds/0/target",
                 "policy: /binds/0/target: bind target 'rel' must be an absolute path"},
                {"{\"binds\": [{\"source\": \"/a\", \"target\": \"/usr/x\"}]}", "/binds/0/target",
                 "policy: /binds/0/target: bind target '/usr/x' is reserved: '/usr' is a "
                 "read-only host system directory"},
                {"{\"binds\": [{\"source\": \"/a\", \"target\": \"/a/../etc\"}]}",
                 "/binds/0/target",
                 "policy: /binds/0/target: bind target '/a/../etc' must not contain '.' or '..' "
                 "components"},
                {"{\"binds\": [{\"source\": \"\", \"target\": \"/b\"}]}", "/binds/0/source",
                 "policy: /binds/0/source: source must not be empty"},
                {"{\"binds\": [{\"source\": \"/a\"}]}", "/binds/0",
                 "policy: /binds/0: missing field 'target'"},
                {"{\"binds\": [{}]}", "/binds/0", "policy: /binds/0: missing field 'source'"},
                {"{\"tmpfs\": [{\"size\": \"1m\"}]}", "/tmpfs/0",
                 "policy: /tmpfs/0: missing field 'path'"},
                {"{\"tmpfs\": [{\"path\": \"tmp\"}]}", "/tmpfs/0/path",
                 "policy: /tmpfs/0/path: tmpfs target 'tmp' must be an absolute path"},
                {"{\"tmpfs\": [{\"path\": \"/dev/pts\"}]}", "/tmpfs/0/path",
                 "policy: /tmpfs/0/path: tmpfs target '/dev/pts' is reserved: '/dev' is set up "
                 "by hutch"},
                {"{\"tmpfs\": [{\"path\": \"/t\", \"size\": \"12q\"}]}", "/tmpfs/0/size",
                 "policy: /tmpfs/0/size: invalid size '12q'"},
                {"{\"tmpfs\": [{\"path\": \"/t\", \"size\": -5}]}", "/tmpfs/0/size",
                 "policy: /tmpfs/0/size: invalid size -5"},
                {"{\"tmpfs\": [{\"path\": \"/t\", \"size\": 1}]}", "/tmpfs/0/size",
                 "policy: /tmpfs/0/size: tmpfs size '1' is below the minimum 4k"},
                {"{\"tmpfs\": [{\"path\": \"/t\", \"size\": \"1k\"}]}", "/tmpfs/0/size",
                 "policy: /tmpfs/0/size: tmpfs size '1k' is below the minimum 4k"},
                {"{\"env\": {\"1X\": \"a\"}}", "/env/1X",
                 "policy: /env/1X: invalid environment variable name '1X' (expected "
                 "[A-Za-z_][A-Za-z0-9_]*)"},
                {"{\"env\": {\"\": \"a\"}}", "/env/",
                 "policy: /env/: invalid environment variable name '' (expected "
                 "[A-Za-z_][A-Za-z0-9_]*)"},
                {"{\"env_pass\": [\"OK\", \"A=B\"]}", "/env_pass/1",
                 "policy: /env_pass/1: invalid environment variable name 'A=B' (expected "
                 "[A-Za-z_][A-Za-z0-9_]*)"},
                {"{\"hostname\": \"-x\"}", "/hostname",
                 "policy: /hostname: invalid hostname '-x' (1-63 characters of A-Z, a-z, 0-9 and "
                 "'-', not starting or ending with '-')"},
                {"{\"workdir\": \"rel\"}", "/workdir",
                 "policy: /workdir: workdir 'rel' must be an absolute path without '.' or '..' "
                 "components"},
                {"{\"network\": \"host\"}", "/network",
                 "policy: /network: unsupported network mode 'host' (expected 'none' or 'allow')"},
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                HutchError e = {};

                ASSERT_ERROR(load(cases[i].json, &e), EINVAL);
                ASSERT_EQ(e.errnum, EINVAL);
                ASSERT_STREQ(e.pointer, cases[i].pointer);
                ASSERT_STREQ(e.msg, cases[i].msg);
                ASSERT_EQ(e.line, 1);
                ASSERT_TRUE(e.column > 1);
        }
}

TEST(semantic_error_deep_in_a_document) {
        const char *json = "{\n"
                           "  \"hostname\": \"box\",\n"
                           "  \"binds\": [\n"
                           "    {\"source\": \"/tmp\", \"target\": \"/a\"},\n"
                           "    {\n"
                           "      \"source\": \"/tmp\",\n"
                           "      \"read_only\": true,\n"
                           "      \"target\": \"rel\"\n"
                           "    }\n"
                           "  ],\n"
                           "  \"env\": {\"K\": \"v\"}\n"
                           "}\n";
        HutchError e = {};

        ASSERT_ERROR(load(json, &e), EINVAL);
        ASSERT_STREQ(e.pointer, "/binds/1/target");
        ASSERT_STREQ(e.msg, "policy: /binds/1/target: bind target 'rel' must be an absolute path");
        ASSERT_EQ(e.line, 8);
        ASSERT_EQ(e.column, 17);
}

TEST(missing_field_points_at_the_object) {
        const char *json = "{\"binds\": [\n"
                           "  {\"source\": \"/a\", \"target\": \"/a\"},\n"
                           "  {\"source\": \"/b\"}\n"
                           "]}";
        HutchError e = {};

        ASSERT_ERROR(load(json, &e), EINVAL);
        ASSERT_STREQ(e.pointer, "/binds/1");
        ASSERT_EQ(e.line, 3);
        ASSERT_EQ(e.column, 3);
}

TEST(env_error_points_at_the_key) {
        const char *json = "{\"env\": {\n  \"GOOD\": \"1\",\n  \"B-AD\":\n    \"2\"}}";
        HutchError e = {};

        ASSERT_ERROR(load(json, &e), EINVAL);
        ASSERT_STREQ(e.pointer, "/env/B-AD");
        ASSERT_EQ(e.line, 3);
        ASSERT_EQ(e.column, 3);

        /* A wrong type points at the value. */
        ASSERT_ERROR(load("{\"env\": {\n  \"A\":\n    7}}", &e), EINVAL);
        ASSERT_EQ(e.line, 3);
        ASSERT_EQ(e.column, 5);
}

/* Builds @head, @n items "@before<i>@after" separated by commas, @tail. */
static char *repeat_json(const char *head, const char *before, const char *after, int n,
                         const char *tail) {
        char *s = strdup(head);

        for (int i = 0; s && i < n; i++) {
                char *item = NULL, *t = NULL;

                if (asprintf(&item, "%s%d%s", before, i, after) < 0)
                        fail_msg("asprintf failed");
                if (asprintf(&t, "%s%s%s", s, i > 0 ? "," : "", item) < 0)
                        fail_msg("asprintf failed");
                free(item);
                free(s);
                s = t;
        }
        if (s) {
                char *t = NULL;

                if (asprintf(&t, "%s%s", s, tail) < 0)
                        fail_msg("asprintf failed");
                free(s);
                s = t;
        }
        return s;
}

TEST(caps) {
        _cleanup_free_ char *binds = NULL, *tmpfs = NULL, *env = NULL, *pass = NULL;
        HutchError e = {};

        binds = repeat_json("{\"binds\": [", "\n{\"source\": \"/tmp\", \"target\": \"/b", "\"}",
                            POLICY_MAX_BINDS + 1, "]}");
        ASSERT_ERROR(load(binds, &e), E2BIG);
        ASSERT_STREQ(e.pointer, "/binds/15");
        ASSERT_STREQ(e.msg, "policy: /binds/15: too many binds (at most 15)");
        ASSERT_EQ(e.line, 17);

        tmpfs = repeat_json("{\"tmpfs\": [", "{\"path\": \"/t", "\"}", POLICY_MAX_TMPFS + 1, "]}");
        ASSERT_ERROR(load(tmpfs, &e), E2BIG);
        ASSERT_STREQ(e.pointer, "/tmpfs/64");

        env = repeat_json("{\"env\": {", "\"K", "\": \"v\"", POLICY_MAX_ENV + 1, "}}");
        ASSERT_ERROR(load(env, &e), E2BIG);
        ASSERT_STREQ(e.pointer, "/env/K1024");
        ASSERT_STREQ(e.msg, "policy: /env/K1024: too many environment variables (at most 1024)");

        pass = repeat_json("{\"env_pass\": [", "\"K", "\"", POLICY_MAX_ENV + 1, "]}");
        ASSERT_ERROR(load(pass, &e), E2BIG);
        ASSERT_STREQ(e.pointer, "/env_pass/1024");
}

TEST(size_limit) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        _cleanup_free_ char *big = malloc(POLICY_MAX_FILE_SIZE + 1);
        HutchError e = {};

        ASSERT_NOT_NULL(big);
        memset(big, ' ', POLICY_MAX_FILE_SIZE + 1);
        big[0] = '{';
        big[POLICY_MAX_FILE_SIZE - 1] = '}';
        /* Exactly at the limit: fine. One byte more: -EFBIG. */
        ASSERT_OK(policy_load_json(p, big, POLICY_MAX_FILE_SIZE, &e));
        ASSERT_ERROR(policy_load_json(p, big, POLICY_MAX_FILE_SIZE + 1, &e), EFBIG);
        ASSERT_STREQ(e.msg, "policy is larger than the limit of 1048576 bytes");
}

TEST(current_directory_gone) {
        _cleanup_tmpdir_ char *dir = make_tmpdir();
        _cleanup_free_ char *gone = path_join(dir, "gone"), *old = getcwd(NULL, 0);
        HutchError e = {};

        ASSERT_NOT_NULL(old);
        ASSERT_OK(mkdir(gone, 0755));
        ASSERT_OK(chdir(gone));
        ASSERT_OK(rmdir(gone));
        ASSERT_ERROR(load("{\"workspace\": \"x\"}", &e), ENOENT);
        ASSERT_STREQ(e.pointer, "/workspace");
        ASSERT_ERROR(load("{\"workspace\": {\"path\": \"x\"}}", &e), ENOENT);
        ASSERT_STREQ(e.pointer, "/workspace");
        ASSERT_ERROR(load("{\"binds\": [{\"source\": \"x\", \"target\": \"/x\"}]}", &e), ENOENT);
        ASSERT_STREQ(e.pointer, "/binds/0");
        ASSERT_OK(chdir(old));
}

TEST(bad_arguments) {
        _cleanup_(policy_freep) Policy *p = policy_new();

        ASSERT_ERROR(policy_load_json(NULL, "{}", 2, NULL), EINVAL);
        ASSERT_ERROR(policy_load_json(p, NULL, 0, NULL), EINVAL);
        ASSERT_ERROR(policy_load_file(NULL, "/x", NULL), EINVAL);
        ASSERT_ERROR(policy_load_file(p, NULL, NULL), EINVAL);
        /* The error detail is optional. */
        ASSERT_ERROR(policy_load_json(p, "{\"x\": 1}", 8, NULL), EINVAL);
        ASSERT_ERROR(policy_load_json(p, "{", 1, NULL), EINVAL);
        ASSERT_ERROR(policy_load_json(p, "[]", 2, NULL), EINVAL);
}

TEST(load_file) {
        _cleanup_tmpdir_ char *dir = make_tmpdir();
        _cleanup_(policy_freep) Policy *p = policy_new();
        _cleanup_free_ char *good = path_join(dir, "good.json"), *bad = path_join(dir, "bad.json"),
                            *syntax = path_join(dir, "syntax.json"),
                            *big = path_join(dir, "big.json"),
                            *missing = path_join(dir, "missing.json"), *msg = NULL,
                            *filler = malloc(POLICY_MAX_FILE_SIZE + 2);
        const char *good_json = "{\"hostname\": \"filebox\", \"read_only\": true}\n";
        const char *bad_json = "{\n  \"hostname\": \"ok\",\n  \"binds\": [\n    {\"source\": "
                               "\"/tmp\", \"target\": \"rel\"}\n  ]\n}\n";
        HutchError e = {};

        write_file(good, good_json, strlen(good_json));
        ASSERT_OK(policy_load_file(p, good, &e));
        ASSERT_STREQ(p->hostname, "filebox");
        ASSERT_TRUE(p->read_only);

        /* Semantic errors name the file, the line and the pointer. */
        write_file(bad, bad_json, strlen(bad_json));
        ASSERT_ERROR(policy_load_file(p, bad, &e), EINVAL);
        ASSERT_TRUE(asprintf(&msg,
                             "policy file '%s' line 4: /binds/0/target: bind target 'rel' must be "
                             "an absolute path",
                             bad) > 0);
        ASSERT_STREQ(e.msg, msg);
        ASSERT_STREQ(e.pointer, "/binds/0/target");
        ASSERT_EQ(e.line, 4);
        ASSERT_EQ(e.column, 34);

        write_file(syntax, "{\n  \"a\": 1,\n}", 13);
        ASSERT_ERROR(policy_load_file(p, syntax, &e), EINVAL);
        free(msg);
        msg = NULL;
        ASSERT_TRUE(asprintf(&msg,
                             "policy file '%s' line 3 column 1: string or '}' expected near '}'",
                             syntax) > 0);
        ASSERT_STREQ(e.msg, msg);
        ASSERT_EQ(e.line, 3);
        ASSERT_EQ(e.column, 1);

        ASSERT_ERROR(policy_load_file(p, missing, &e), ENOENT);
        free(msg);
        msg = NULL;
        ASSERT_TRUE(asprintf(&msg, "cannot open policy file '%s': No such file or directory",
                             missing) > 0);
        ASSERT_STREQ(e.msg, msg);

        ASSERT_ERROR(policy_load_file(p, dir, &e), EISDIR);
        ASSERT_TRUE(strstr(e.msg, "cannot read policy file") == e.msg);

        /* One byte over the limit, whitespace after a valid document. */
        ASSERT_NOT_NULL(filler);
        memset(filler, ' ', POLICY_MAX_FILE_SIZE + 1);
        filler[0] = '{';
        filler[1] = '}';
        write_file(big, filler, POLICY_MAX_FILE_SIZE + 1);
        ASSERT_ERROR(policy_load_file(p, big, &e), EFBIG);
        free(msg);
        msg = NULL;
        ASSERT_TRUE(asprintf(&msg, "policy file '%s' is larger than the limit of 1048576 bytes",
                             big) > 0);
        ASSERT_STREQ(e.msg, msg);
        write_file(big, filler, POLICY_MAX_FILE_SIZE);
        ASSERT_OK(policy_load_file(p, big, &e));

        /* An empty file is a syntax error, not an empty policy. */
        write_file(big, "", 0);
        ASSERT_ERROR(policy_load_file(p, big, &e), EINVAL);
}

TEST(locate) {
        const char *text = "{\n"
                           "  \"a\": [1, {\"b\\/c\": \"x\"}, [true, null]],\n"
                           "  \"k~\": {\"\\u00e9t\\u00e9\": 2, \"\\ud83d\\ude00\": 3},\n"
                           "  \"\xc3\xa9\xc3\xa9\": \"v\", \"s\": \"q\\\"}\"\n"
                           "}";
        size_t len = strlen(text);
        unsigned line = 0, column = 0;

        ASSERT_OK(json_locate(text, len, "", false, &line, &column));
        ASSERT_EQ(line, 1);
        ASSERT_EQ(column, 1);
        ASSERT_OK(json_locate(text, len, "/a", false, &line, &column));
        ASSERT_EQ(line, 2);
        ASSERT_EQ(column, 8);
        ASSERT_OK(json_locate(text, len, "/a", true, &line, &column));
        ASSERT_EQ(column, 3);
        ASSERT_OK(json_locate(text, len, "/a/0", false, &line, &column));
        ASSERT_EQ(column, 9);
        /* An escaped '/' in the text, "~1" in the pointer. */
        ASSERT_OK(json_locate(text, len, "/a/1/b~1c", false, &line, &column));
        ASSERT_EQ(column, 21);
        ASSERT_OK(json_locate(text, len, "/a/2/1", false, &line, &column));
        ASSERT_EQ(column, 34);
        /* "~0" and \u escapes, including a surrogate pair. */
        ASSERT_OK(json_locate(text, len, "/k~0/\xc3\xa9t\xc3\xa9", false, &line, &column));
        ASSERT_EQ(line, 3);
        ASSERT_EQ(column, 27);
        ASSERT_OK(json_locate(text, len, "/k~0/\xf0\x9f\x98\x80", false, &line, &column));
        ASSERT_EQ(column, 46);
        /* Columns count characters: the two-byte key counts as two. */
        ASSERT_OK(json_locate(text, len, "/\xc3\xa9\xc3\xa9", false, &line, &column));
        ASSERT_EQ(line, 4);
        ASSERT_EQ(column, 9);
        /* A string with an escaped quote and a brace is skipped correctly. */
        ASSERT_OK(json_locate(text, len, "/s", false, &line, &column));
        ASSERT_EQ(column, 19);

        ASSERT_ERROR(json_locate(text, len, "/nope", false, &line, &column), ENOENT);
        ASSERT_ERROR(json_locate(text, len, "/a/3", false, &line, &column), ENOENT);
        ASSERT_ERROR(json_locate(text, len, "/a/x", false, &line, &column), ENOENT);
        ASSERT_ERROR(json_locate(text, len, "/a/0/x", false, &line, &column), ENOENT);
        ASSERT_ERROR(json_locate("{}", 2, "/x", false, &line, &column), ENOENT);
        ASSERT_ERROR(json_locate("[]", 2, "/0", false, &line, &column), ENOENT);
        ASSERT_ERROR(json_locate(text, len, "a", false, &line, &column), EINVAL);
        ASSERT_ERROR(json_locate(text, len, "/k~2", false, &line, &column), EINVAL);
        ASSERT_ERROR(json_locate(text, len, "/k~", false, &line, &column), EINVAL);
        ASSERT_ERROR(json_locate(NULL, 0, "", false, &line, &column), EINVAL);
        /* Malformed text: never read past the end. */
        ASSERT_ERROR(json_locate("{\"a", 3, "/a", false, &line, &column), EINVAL);
        ASSERT_ERROR(json_locate("{\"a\" 1}", 7, "/a", false, &line, &column), EINVAL);
        ASSERT_ERROR(json_locate("{\"x\": [1, 2", 11, "/y", false, &line, &column), EINVAL);
        ASSERT_ERROR(json_locate("{\"x\\q\": 1}", 10, "/y", false, &line, &column), EINVAL);
        ASSERT_ERROR(json_locate("{\"\\u12\": 1}", 11, "/y", false, &line, &column), EINVAL);
        ASSERT_ERROR(json_locate("{\"x\": @}", 8, "/y", false, &line, &column), EINVAL);
        ASSERT_EQ(line, 4); /* untouched by failures */
}

TEST(limits_and_network_fields) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError e = {};
        const char *json = limits_network_document;

        ASSERT_OK(policy_load_json(p, json, strlen(json), &e));
        ASSERT_EQ(p->memory_max, 512ULL << 20);
        ASSERT_EQ(p->memory_swap_max, 1ULL << 30);
        ASSERT_EQ(p->cpu_millis, 1500);
        ASSERT_EQ(p->pids_max, 64);
        ASSERT_EQ(p->timeout_ms, 30000);
        ASSERT_EQ(p->disk_size, 1ULL << 30);
        ASSERT_EQ(p->output_limit, 10ULL << 20);
        ASSERT_TRUE(p->allow_degraded);
        ASSERT_EQ(p->network, NETWORK_MODE_ALLOW);
        ASSERT_EQ(strv_length(p->allow_hosts), 2);
        ASSERT_STREQ(p->deny_hosts[0], "evil.registry.example");
        ASSERT_STREQ(p->allow_private[0], "127.0.0.0/8");
        ASSERT_STREQ(p->resolve[0], "api.example.com:127.0.0.1");
        ASSERT_STREQ(p->audit_log, "/tmp/a.jsonl");
        ASSERT_OK(policy_validate(p, &e));
}

TEST(limits_and_network_errors) {
        static const struct {
                const char *json;
                const char *pointer;
        } cases[] = {
                {"{\"limits\": {\"pids\": 0}}", "/limits/pids"},
                {"{\"limits\": {\"bogus\": 1}}", "/limits/bogus"},
                {"{\"limits\": {\"memory\": -1}}", "/limits/memory"},
                {"{\"limits\": {\"memory\": true}}", "/limits/memory"},
                {"{\"limits\": {\"timeout\": 10}}", "/limits/timeout"},
                {"{\"limits\": {\"cpus\": 2000.5}}", "/limits/cpus"},
                {"{\"limits\": {\"cpus\": \"abc\"}}", "/limits/cpus"},
                {"{\"limits\": []}", "/limits"},
                {"{\"allow_degraded\": \"yes\"}", "/allow_degraded"},
                {"{\"allow_hosts\": [\"*.\"]}", "/allow_hosts/0"},
                {"{\"allow_hosts\": [\"ok.com\", 7]}", "/allow_hosts/1"},
                {"{\"deny_hosts\": \"x.com\"}", "/deny_hosts"},
                {"{\"allow_private\": [\"10.0.0.0/99\"]}", "/allow_private/0"},
                {"{\"resolve\": [\"nope\"]}", "/resolve/0"},
                {"{\"audit_log\": \"\"}", "/audit_log"},
                {"{\"network\": \"host\"}", "/network"},
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_(policy_freep) Policy *p = policy_new();
                HutchError e = {};

                ASSERT_ERROR(policy_load_json(p, cases[i].json, strlen(cases[i].json), &e), EINVAL);
                ASSERT_STREQ(e.pointer, cases[i].pointer);
                ASSERT_EQ(e.line, 1);
        }
}

/* The writer: policy_to_json() and back. */

static void assert_str_or_null_equal(const char *a, const char *b) {
        if (!a || !b)
                ASSERT_TRUE(a == b);
        else
                ASSERT_STREQ(a, b);
}

/* Equal lists; NULL and empty are the same list. */
static void assert_strv_equal(char *const *a, char *const *b) {
        ASSERT_EQ(strv_length(a), strv_length(b));
        for (size_t i = 0; i < strv_length(a); i++)
                ASSERT_STREQ(a[i], b[i]);
}

static void assert_secret_equal(const PolicySecret *a, const PolicySecret *b) {
        ASSERT_STREQ(a->name, b->name);
        assert_str_or_null_equal(a->env_var, b->env_var);
        assert_str_or_null_equal(a->file, b->file);
        assert_strv_equal(a->hosts, b->hosts);
        assert_str_or_null_equal(a->header, b->header);
        assert_str_or_null_equal(a->query, b->query);
        assert_str_or_null_equal(a->path_prefix, b->path_prefix);
        /* No methods (all of them) is not an empty list. */
        ASSERT_EQ(a->methods == NULL, b->methods == NULL);
        assert_strv_equal(a->methods, b->methods);
}

/* Every field of Policy, in the order of its declaration. */
static void assert_policy_equal(const Policy *a, const Policy *b) {
        assert_str_or_null_equal(a->workspace, b->workspace);
        ASSERT_EQ(a->workspace_mode, b->workspace_mode);
        ASSERT_EQ(a->n_binds, b->n_binds);
        for (size_t i = 0; i < a->n_binds; i++) {
                ASSERT_STREQ(a->binds[i].source, b->binds[i].source);
                ASSERT_STREQ(a->binds[i].target, b->binds[i].target);
                ASSERT_EQ(a->binds[i].read_only, b->binds[i].read_only);
        }
        ASSERT_EQ(a->n_tmpfs, b->n_tmpfs);
        for (size_t i = 0; i < a->n_tmpfs; i++) {
                ASSERT_STREQ(a->tmpfs[i].path, b->tmpfs[i].path);
                ASSERT_EQ(a->tmpfs[i].size, b->tmpfs[i].size);
        }
        assert_strv_equal(a->env, b->env);
        assert_strv_equal(a->env_pass, b->env_pass);
        assert_str_or_null_equal(a->workdir, b->workdir);
        assert_str_or_null_equal(a->hostname, b->hostname);
        ASSERT_EQ(a->read_only, b->read_only);
        ASSERT_EQ(a->network, b->network);
        ASSERT_EQ(a->network_set, b->network_set);
        assert_strv_equal(a->allow_hosts, b->allow_hosts);
        assert_strv_equal(a->deny_hosts, b->deny_hosts);
        assert_strv_equal(a->allow_private, b->allow_private);
        assert_strv_equal(a->resolve, b->resolve);
        assert_str_or_null_equal(a->audit_log, b->audit_log);
        ASSERT_EQ(a->n_secrets, b->n_secrets);
        for (size_t i = 0; i < a->n_secrets; i++)
                assert_secret_equal(&a->secrets[i], &b->secrets[i]);
        assert_strv_equal(a->upstream_ca, b->upstream_ca);
        ASSERT_EQ(a->memory_max, b->memory_max);
        ASSERT_EQ(a->memory_swap_max, b->memory_swap_max);
        ASSERT_EQ(a->cpu_millis, b->cpu_millis);
        ASSERT_EQ(a->pids_max, b->pids_max);
        ASSERT_EQ(a->timeout_ms, b->timeout_ms);
        ASSERT_EQ(a->disk_size, b->disk_size);
        ASSERT_EQ(a->output_limit, b->output_limit);
        ASSERT_EQ(a->limits_explicit, b->limits_explicit);
        ASSERT_EQ(a->allow_degraded, b->allow_degraded);
        ASSERT_EQ(a->backend, b->backend);
        ASSERT_EQ(a->vm_accel, b->vm_accel);
        assert_str_or_null_equal(a->vm_kernel, b->vm_kernel);
}

/* Writes @p and loads the document into a fresh policy from another
 * directory (/), as a persistent sandbox's start does. Returns the loaded
 * policy and, with @ret_json, the document. */
static Policy *write_and_reload(const Policy *p, char **ret_json) {
        _cleanup_free_ char *json = NULL, *old = getcwd(NULL, 0);
        Policy *q = policy_new();
        HutchError e = {};
        int r;

        ASSERT_NOT_NULL(q);
        ASSERT_NOT_NULL(old);
        ASSERT_OK(policy_to_json(p, &json));
        ASSERT_OK(chdir("/"));
        r = policy_load_json(q, json, strlen(json), &e);
        ASSERT_OK(chdir(old));
        if (r < 0)
                fail_msg("reloading %s: %s", json, e.msg);
        if (ret_json)
                *ret_json = TAKE_PTR(json);
        return q;
}

/* The round trip gives an equal policy, which writes the same document
 * again, and which validates exactly as the original does. */
static void assert_round_trip(const Policy *p) {
        _cleanup_(policy_freep) Policy *q = NULL;
        _cleanup_free_ char *json = NULL, *again = NULL;
        HutchError e1 = {}, e2 = {};
        int r1, r2;

        q = write_and_reload(p, &json);
        assert_policy_equal(p, q);
        ASSERT_OK(policy_to_json(q, &again));
        ASSERT_STREQ(again, json);

        r1 = policy_validate(p, &e1);
        r2 = policy_validate(q, &e2);
        ASSERT_EQ(r1, r2);
        ASSERT_STREQ(e1.msg, e2.msg);
}

TEST(write_defaults) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        _cleanup_free_ char *json = NULL;

        /* Only the hostname: every other default is left to the reader. */
        ASSERT_OK(policy_to_json(p, &json));
        ASSERT_STREQ(json, "{\"hostname\":\"hutch\"}");
        assert_round_trip(p);
}

TEST(write_key_order_is_fixed) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        _cleanup_free_ char *json = NULL;
        HutchError e = {};

        /* Set in another order than the document's; env keeps its own. */
        p->allow_degraded = true;
        ASSERT_OK(policy_set_limit(p, POLICY_LIMIT_PIDS, "64", NULL, &e));
        ASSERT_OK(policy_set_limit(p, POLICY_LIMIT_MEMORY, "8m", NULL, &e));
        ASSERT_OK(policy_set_network(p, "none", &e));
        p->read_only = true;
        ASSERT_OK(policy_set_hostname(p, "box", &e));
        ASSERT_OK(policy_set_workdir(p, "/w", &e));
        ASSERT_OK(policy_add_env_spec(p, "B=2", &e));
        ASSERT_OK(policy_add_env_spec(p, "A=1", &e));
        ASSERT_OK(policy_to_json(p, &json));
        ASSERT_STREQ(json, "{\"env\":{\"B\":\"2\",\"A\":\"1\"},\"workdir\":\"/w\",\"hostname\":"
                           "\"box\",\"read_only\":true,\"network\":\"none\",\"limits\":{"
                           "\"memory\":8388608,\"pids\":64},\"allow_degraded\":true}");
        assert_round_trip(p);
}

TEST(write_every_field) {
        _cleanup_tmpdir_ char *dir = make_tmpdir();
        _cleanup_(policy_freep) Policy *p = policy_new();
        _cleanup_free_ char *ws = path_join(dir, "ws:1"), *data = path_join(dir, "data"),
                            *key = path_join(dir, "key"), *ca = path_join(dir, "ca.pem"),
                            *ws_spec = NULL, *bind_ro = NULL, *bind_rw = NULL, *file_secret = NULL,
                            *audit = path_join(dir, "audit.jsonl"), *json = NULL;
        _cleanup_(policy_freep) Policy *q = NULL;
        HutchError e = {};

        ASSERT_OK(mkdir(ws, 0755));
        ASSERT_OK(mkdir(data, 0755));
        write_file(key, "k\n", 2);
        write_file(ca, "ca\n", 3);
        ASSERT_OK(setenv("HUTCH_TEST_WRITE_TOKEN", "s3cr3t-value-never-written", 1));

        ASSERT_TRUE(asprintf(&ws_spec, "%s:overlay", ws) > 0);
        ASSERT_TRUE(asprintf(&bind_ro, "%s:/data:ro", data) > 0);
        ASSERT_TRUE(asprintf(&bind_rw, "%s:/srv/rw", data) > 0);
        ASSERT_TRUE(asprintf(&file_secret, "KEY=file:%s@x.example:8443", key) > 0);
        ASSERT_OK(policy_set_workspace_spec(p, ws_spec, &e));
        ASSERT_OK(policy_add_bind_spec(p, bind_ro, &e));
        ASSERT_OK(policy_add_bind_spec(p, bind_rw, &e));
        ASSERT_OK(policy_add_tmpfs_spec(p, "/tmp:size=64m", &e));
        ASSERT_OK(policy_add_tmpfs_spec(p, "/workspace:size=8g", &e));
        ASSERT_OK(policy_add_tmpfs_spec(p, "/cache", &e));
        ASSERT_OK(policy_add_env_spec(p, "A=1", &e));
        ASSERT_OK(policy_add_env_spec(p, "EMPTY=", &e));
        ASSERT_OK(policy_add_env_spec(p, "Q=\"quoted\" \\ a=b\nnew line, caf\xc3\xa9", &e));
        ASSERT_OK(policy_add_env_spec(p, "TERM", &e));
        ASSERT_OK(policy_add_env_spec(p, "A", &e)); /* set and passed */
        ASSERT_OK(policy_set_workdir(p, "/workspace/src", &e));
        ASSERT_OK(policy_set_hostname(p, "box", &e));
        p->read_only = true;
        ASSERT_OK(policy_set_network(p, "allow", &e));
        ASSERT_OK(policy_add_allow_host(p, "api.example.com", NULL, &e));
        ASSERT_OK(policy_add_allow_host(p, "*.registry.example:443", NULL, &e));
        ASSERT_OK(policy_add_deny_host(p, "evil.registry.example", NULL, &e));
        ASSERT_OK(policy_add_allow_private(p, "127.0.0.0/8", NULL, &e));
        ASSERT_OK(policy_add_resolve(p, "api.example.com:127.0.0.1,::1", NULL, &e));
        ASSERT_OK(policy_set_audit_log(p, audit, &e));
        ASSERT_OK(policy_add_secret_spec(p, "OPENAI_API_KEY@api.openai.com", &e));
        ASSERT_OK(policy_add_secret_spec(p,
                                         "GH=env:HUTCH_TEST_WRITE_TOKEN@api.github.com/repos/o/,"
                                         "[::1]:8443/repos/o/;header=Authorization;query=key;"
                                         "methods=GET,POST",
                                         &e));
        ASSERT_OK(policy_add_secret_spec(p, file_secret, &e));
        ASSERT_OK(policy_add_upstream_ca(p, ca, NULL, &e));
        for (int i = 0; i < _POLICY_LIMIT_MAX; i++) {
                static const char *const values[_POLICY_LIMIT_MAX] = {
                        [POLICY_LIMIT_MEMORY] = "512m", [POLICY_LIMIT_MEMORY_SWAP] = "1g",
                        [POLICY_LIMIT_CPUS] = "1.5",    [POLICY_LIMIT_PIDS] = "64",
                        [POLICY_LIMIT_TIMEOUT] = "90s", [POLICY_LIMIT_DISK] = "2g",
                        [POLICY_LIMIT_OUTPUT] = "10m",
                };

                ASSERT_OK(policy_set_limit(p, (PolicyLimit)i, values[i], NULL, &e));
        }
        p->allow_degraded = true;
        ASSERT_OK(policy_validate(p, &e));

        /* Spot checks that each field really is in the document (so the
         * round trip below is not trivially equal). */
        q = write_and_reload(p, &json);
        ASSERT_EQ(q->workspace_mode, WORKSPACE_MODE_OVERLAY);
        ASSERT_STREQ(q->workspace, ws);
        ASSERT_EQ(q->n_binds, 2);
        ASSERT_TRUE(q->binds[0].read_only);
        ASSERT_EQ(q->n_tmpfs, 3);
        ASSERT_EQ(q->tmpfs[1].size, 8ULL << 30);
        ASSERT_STREQ(strv_env_get(q->env, "Q"), "\"quoted\" \\ a=b\nnew line, caf\xc3\xa9");
        ASSERT_STREQ(strv_env_get(q->env, "EMPTY"), "");
        ASSERT_EQ(strv_length(q->env_pass), 2);
        ASSERT_TRUE(q->network_set);
        ASSERT_EQ(q->network, NETWORK_MODE_ALLOW);
        ASSERT_STREQ(q->audit_log, audit);
        ASSERT_EQ(q->n_secrets, 3);
        ASSERT_NULL(q->secrets[0].env_var);
        ASSERT_NULL(q->secrets[0].file);
        ASSERT_NULL(q->secrets[0].methods);
        ASSERT_STREQ(q->secrets[1].env_var, "HUTCH_TEST_WRITE_TOKEN");
        ASSERT_STREQ(q->secrets[1].path_prefix, "/repos/o/");
        ASSERT_STREQ(q->secrets[1].header, "Authorization");
        ASSERT_STREQ(q->secrets[1].query, "key");
        ASSERT_STREQ(q->secrets[1].methods[1], "POST");
        ASSERT_STREQ(q->secrets[2].file, key);
        ASSERT_EQ(q->limits_explicit, (1U << _POLICY_LIMIT_MAX) - 1);
        ASSERT_EQ(q->cpu_millis, 1500);
        ASSERT_EQ(q->timeout_ms, 90000);
        ASSERT_TRUE(q->allow_degraded);
        /* SECURITY: only where a secret comes from is written, never its value. */
        ASSERT_NULL(strstr(json, "s3cr3t"));
        ASSERT_NOT_NULL(strstr(json, "\"source\":\"env:HUTCH_TEST_WRITE_TOKEN\""));

        assert_round_trip(p);
        ASSERT_OK(policy_validate(q, &e));
        ASSERT_OK(unsetenv("HUTCH_TEST_WRITE_TOKEN"));
}

TEST(write_rich_documents) {
        _cleanup_tmpdir_ char *dir = make_tmpdir();
        _cleanup_free_ char *full = NULL, *secrets = NULL, *key = path_join(dir, "key");
        HutchError e = {};

        write_file(key, "k\n", 2);
        ASSERT_TRUE(asprintf(&full, full_document_fmt, dir) > 0);
        ASSERT_TRUE(asprintf(&secrets,
                             "{\"secrets\": [{\"name\": \"A\", \"hosts\": [\"a.example\"]},"
                             " {\"name\": \"B\", \"source\": \"env:B_SRC\", \"hosts\":"
                             " [\"b.example:8443\", \"[::1]\"], \"header\": \"X-Api-Key\","
                             " \"query\": \"k\","
                             " \"path_prefix\": \"/v1/\", \"methods\": [\"GET\"]},"
                             " {\"name\": \"C\", \"source\": \"file:%s\", \"hosts\":"
                             " [\"c.example\"]}],"
                             " \"upstream_ca\": [\"%s\"], \"limits\": {\"timeout\": 0}}",
                             key, key) > 0);

        const char *const docs[] = {full, limits_network_document, secrets};
        for (size_t i = 0; i < ELEMENTSOF(docs); i++) {
                _cleanup_(policy_freep) Policy *p = policy_new();

                ASSERT_OK(policy_load_json(p, docs[i], strlen(docs[i]), &e));
                ASSERT_OK(policy_validate(p, &e));
                assert_round_trip(p);
        }
}

TEST(write_workspace_modes) {
        _cleanup_tmpdir_ char *dir = make_tmpdir();
        /* A name ending in ":copy" would be a mode in the string form. */
        _cleanup_free_ char *ws = path_join(dir, "a dir:copy");

        ASSERT_OK(mkdir(ws, 0755));
        for (int m = 0; m < _WORKSPACE_MODE_MAX; m++) {
                _cleanup_(policy_freep) Policy *p = policy_new();
                _cleanup_(policy_freep) Policy *q = NULL;
                HutchError e = {};

                ASSERT_OK(policy_set_workspace_path(p, ws, (WorkspaceMode)m, NULL, &e));
                ASSERT_OK(policy_validate(p, &e));
                assert_round_trip(p);
                q = write_and_reload(p, NULL);
                ASSERT_STREQ(q->workspace, ws);
                ASSERT_EQ(q->workspace_mode, m);
        }
}

TEST(write_limits_only_explicit) {
        static const struct {
                PolicyLimit which;
                const char *set;     /* as the flag takes it */
                const char *written; /* the member of "limits" */
        } cases[] = {
                {POLICY_LIMIT_CPUS, "0.001", "\"cpus\":\"0.001\""},
                {POLICY_LIMIT_CPUS, "2", "\"cpus\":\"2\""},
                {POLICY_LIMIT_CPUS, "1.500", "\"cpus\":\"1.5\""},
                {POLICY_LIMIT_CPUS, "1.25", "\"cpus\":\"1.25\""},
                {POLICY_LIMIT_CPUS, "1024", "\"cpus\":\"1024\""},
                {POLICY_LIMIT_TIMEOUT, "0", "\"timeout\":\"0\""},
                {POLICY_LIMIT_TIMEOUT, "1500ms", "\"timeout\":\"1500ms\""},
                {POLICY_LIMIT_TIMEOUT, "90s", "\"timeout\":\"90s\""},
                {POLICY_LIMIT_TIMEOUT, "120s", "\"timeout\":\"2m\""},
                {POLICY_LIMIT_TIMEOUT, "2h", "\"timeout\":\"2h\""},
                {POLICY_LIMIT_MEMORY, "6m", "\"memory\":6291456"},
                {POLICY_LIMIT_MEMORY, "9223372036854775807", "\"memory\":9223372036854775807"},
                {POLICY_LIMIT_MEMORY, "18446744073709551615",
                 "\"memory\":\"18446744073709551615\""},
                {POLICY_LIMIT_MEMORY_SWAP, "1g", "\"memory_swap\":1073741824"},
                {POLICY_LIMIT_PIDS, "1", "\"pids\":1"},
                {POLICY_LIMIT_PIDS, "9223372036854775808", "\"pids\":\"9223372036854775808\""},
                {POLICY_LIMIT_DISK, "4k", "\"disk\":4096"},
                {POLICY_LIMIT_OUTPUT, "1", "\"output_limit\":1"},
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_(policy_freep) Policy *p = policy_new();
                _cleanup_(policy_freep) Policy *q = NULL;
                _cleanup_free_ char *json = NULL;
                HutchError e = {};

                ASSERT_OK(policy_set_limit(p, cases[i].which, cases[i].set, NULL, &e));
                q = write_and_reload(p, &json);
                if (!strstr(json, cases[i].written))
                        fail_msg("%s: %s not in %s", cases[i].set, cases[i].written, json);
                ASSERT_EQ(q->limits_explicit, 1U << cases[i].which);
                assert_round_trip(p);
        }

        /* A limit changed without its explicit bit is not the user's: it
         * comes back as the default, and no "limits" is written at all. */
        _cleanup_(policy_freep) Policy *p = policy_new();
        _cleanup_(policy_freep) Policy *q = NULL;
        _cleanup_free_ char *json = NULL;

        p->pids_max = 7;
        p->memory_max = 64ULL << 20;
        q = write_and_reload(p, &json);
        ASSERT_NULL(strstr(json, "limits"));
        ASSERT_EQ(q->pids_max, POLICY_DEFAULT_PIDS);
        ASSERT_EQ(q->memory_max, POLICY_DEFAULT_MEMORY);
        ASSERT_EQ(q->limits_explicit, 0);
}

TEST(write_network_explicit_or_implied) {
        static const char *const modes[] = {NULL, "none", "allow"};

        for (size_t i = 0; i < ELEMENTSOF(modes); i++) {
                _cleanup_(policy_freep) Policy *p = policy_new();
                _cleanup_(policy_freep) Policy *q = NULL;
                _cleanup_free_ char *json = NULL;
                HutchError e = {};

                if (modes[i])
                        ASSERT_OK(policy_set_network(p, modes[i], &e));
                if (!modes[i] || strcmp(modes[i], "allow") == 0)
                        ASSERT_OK(policy_add_allow_host(p, "example.com", NULL, &e));
                q = write_and_reload(p, &json);
                ASSERT_EQ(q->network_set, modes[i] != NULL);
                ASSERT_EQ(strstr(json, "\"network\"") != NULL, modes[i] != NULL);
                ASSERT_EQ(policy_network_mode(q), policy_network_mode(p));
                assert_round_trip(p);
        }
}

TEST(write_validates_as_the_original) {
        _cleanup_tmpdir_ char *dir = make_tmpdir();
        _cleanup_free_ char *ws = path_join(dir, "ws"), *src = path_join(dir, "src");
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError e = {};

        ASSERT_OK(mkdir(ws, 0755));
        ASSERT_OK(mkdir(src, 0755));
        ASSERT_OK(policy_set_workspace_path(p, ws, WORKSPACE_MODE_COPY, NULL, &e));
        ASSERT_OK(policy_add_bind(p, src, "/workspace/src", true, NULL, &e));
        ASSERT_OK(policy_validate(p, &e));
        assert_round_trip(p); /* both pass */

        /* Negative twins: what the original fails, the reloaded policy
         * fails the same way (assert_round_trip() compares the errors). */
        p->workspace_mode = WORKSPACE_MODE_MOUNT; /* a bind inside a mounted workspace */
        ASSERT_ERROR(policy_validate(p, &e), EINVAL);
        assert_round_trip(p);
        p->workspace_mode = WORKSPACE_MODE_COPY;
        ASSERT_OK(rmdir(src));
        ASSERT_ERROR(policy_validate(p, &e), ENOENT);
        assert_round_trip(p);
        ASSERT_OK(mkdir(src, 0755));
        ASSERT_OK(policy_set_network(p, "none", &e));
        ASSERT_OK(policy_add_secret_spec(p, "T@api.example.com", &e));
        ASSERT_ERROR(policy_validate(p, &e), EINVAL);
        assert_round_trip(p);
}

TEST(write_errors) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        _cleanup_free_ char *big = malloc(POLICY_MAX_FILE_SIZE / 2 + 1);
        char *json = (char *)"untouched";
        HutchError e = {};

        ASSERT_ERROR(policy_to_json(NULL, &json), EINVAL);
        ASSERT_ERROR(policy_to_json(p, NULL), EINVAL);

        /* Out-of-range modes cannot be named. */
        ASSERT_OK(policy_set_workspace_path(p, "/tmp", WORKSPACE_MODE_COPY, NULL, &e));
        p->workspace_mode = _WORKSPACE_MODE_MAX;
        ASSERT_ERROR(policy_to_json(p, &json), EINVAL);
        p->workspace_mode = WORKSPACE_MODE_COPY;
        p->network = _NETWORK_MODE_MAX;
        p->network_set = true;
        ASSERT_ERROR(policy_to_json(p, &json), EINVAL);
        p->network = NETWORK_MODE_NONE;

        /* An env entry that is not KEY=VALUE (filled directly). */
        ASSERT_OK(strv_extend(&p->env, "NOEQUALS"));
        ASSERT_ERROR(policy_to_json(p, &json), EINVAL);
        p->env = strv_free(p->env);
        ASSERT_OK(strv_extend(&p->env, "\xff=1"));
        ASSERT_ERROR(policy_to_json(p, &json), EINVAL);
        p->env = strv_free(p->env);

        /* A secret with two sources has no "source" to write. */
        ASSERT_OK(policy_add_secret_spec(p, "T=env:X@api.example.com", &e));
        p->secrets[0].file = strdup("/k");
        ASSERT_NOT_NULL(p->secrets[0].file);
        ASSERT_ERROR(policy_to_json(p, &json), EINVAL);
        free(p->secrets[0].file);
        p->secrets[0].file = NULL;

        /* JSON holds only UTF-8. */
        ASSERT_OK(policy_add_env_spec(p, "BIN=\xff\xfe", &e));
        ASSERT_ERROR(policy_to_json(p, &json), EILSEQ);
        p->env = strv_free(p->env);
        ASSERT_OK(policy_set_workspace_spec(p, "/tmp/\xc3(", &e));
        ASSERT_ERROR(policy_to_json(p, &json), EILSEQ);
        ASSERT_OK(policy_set_workspace_spec(p, "/tmp", &e));

        /* A document the reader would refuse as too large. */
        ASSERT_NOT_NULL(big);
        memset(big, 'x', POLICY_MAX_FILE_SIZE / 2);
        big[POLICY_MAX_FILE_SIZE / 2] = '\0';
        ASSERT_OK(policy_add_env(p, "A", big, NULL, &e));
        ASSERT_OK(policy_to_json(p, &json)); /* half the limit: fine */
        free(json);
        json = (char *)"untouched";
        ASSERT_OK(policy_add_env(p, "B", big, NULL, &e));
        ASSERT_ERROR(policy_to_json(p, &json), EFBIG);

        ASSERT_STREQ(json, "untouched"); /* never written on failure */
}

/* The microVM fields: written only when not the default, and back. */
TEST(vm_fields_round_trip) {
        static const char doc[] = "{\"backend\":\"vm\",\"vm_accel\":\"tcg\",\"vm_kernel\":"
                                  "\"/boot/nonexistent-vmlinuz\"}";
        _cleanup_(policy_freep) Policy *p = policy_new();
        _cleanup_free_ char *json = NULL;
        HutchError e = {};

        ASSERT_OK(policy_load_json(p, doc, strlen(doc), &e));
        ASSERT_EQ(p->backend, SANDBOX_BACKEND_VM);
        ASSERT_EQ(p->vm_accel, VM_ACCEL_TCG);
        ASSERT_STREQ(p->vm_kernel, "/boot/nonexistent-vmlinuz");
        ASSERT_OK(policy_to_json(p, &json));
        ASSERT_NOT_NULL(strstr(json, "\"backend\":\"vm\",\"vm_accel\":\"tcg\","
                                     "\"vm_kernel\":\"/boot/nonexistent-vmlinuz\""));
        /* A kernel that does not exist is refused for backend vm only. */
        ASSERT_ERROR(policy_validate(p, &e), ENOENT);
        ASSERT_NOT_NULL(strstr(e.msg, "/boot/nonexistent-vmlinuz"));
        ASSERT_OK(policy_set_backend(p, "ns", &e));
        ASSERT_OK(policy_validate(p, &e));
        assert_round_trip(p);
}

TEST(vm_fields_bad_values) {
        HutchError e = {};

        ASSERT_ERROR(load("{\"backend\":\"vz\"}", &e), EINVAL);
        ASSERT_STREQ(e.pointer, "/backend");
        ASSERT_NOT_NULL(strstr(e.msg, "'vz'"));
        ASSERT_ERROR(load("{\"vm_accel\":\"hvf\"}", &e), EINVAL);
        ASSERT_STREQ(e.pointer, "/vm_accel");
        ASSERT_ERROR(load("{\"vm_kernel\":\"\"}", &e), EINVAL);
        ASSERT_ERROR(load("{\"backend\":1}", &e), EINVAL);
}

TEST(vm_enums_both_ways) {
        for (int i = 0; i < _SANDBOX_BACKEND_MAX; i++)
                ASSERT_EQ(sandbox_backend_from_string(sandbox_backend_to_string(i)), i);
        for (int i = 0; i < _VM_ACCEL_MAX; i++)
                ASSERT_EQ(vm_accel_from_string(vm_accel_to_string(i)), i);
        ASSERT_EQ(sandbox_backend_from_string("VM"), _SANDBOX_BACKEND_INVALID);
        ASSERT_EQ(sandbox_backend_from_string(NULL), _SANDBOX_BACKEND_INVALID);
        ASSERT_NULL(sandbox_backend_to_string(_SANDBOX_BACKEND_MAX));
        ASSERT_EQ(vm_accel_from_string("kqemu"), _VM_ACCEL_INVALID);
        ASSERT_NULL(vm_accel_to_string(-1));
}

DEFINE_TEST_MAIN
