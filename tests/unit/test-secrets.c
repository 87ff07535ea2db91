/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd-util.h"
#include "policy/policy.h"
#include "sandbox/secrets.h"
#include "strv.h"
#include "test.h"

/* --- spec parsing --- */

TEST(spec_plain) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError e = {};

        ASSERT_OK(policy_add_secret_spec(p, "OPENAI_API_KEY@api.openai.com", &e));
        ASSERT_EQ(p->n_secrets, 1);
        ASSERT_STREQ(p->secrets[0].name, "OPENAI_API_KEY");
        ASSERT_NULL(p->secrets[0].env_var);
        ASSERT_NULL(p->secrets[0].file);
        ASSERT_EQ(strv_length(p->secrets[0].hosts), 1);
        ASSERT_STREQ(p->secrets[0].hosts[0], "api.openai.com");
        ASSERT_NULL(p->secrets[0].header);
        ASSERT_NULL(p->secrets[0].path_prefix);
        ASSERT_NULL(p->secrets[0].methods);
        ASSERT_EQ(policy_network_mode(p), NETWORK_MODE_ALLOW);
        ASSERT_OK(policy_validate(p, &e));
}

TEST(spec_full) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError e = {};

        ASSERT_OK(policy_add_secret_spec(
                p,
                "GH=env:GITHUB_TOKEN@api.github.com/repos/org/,[::1]:8443/repos/org/,"
                "127.0.0.1:9000/repos/org/;header=Authorization;methods=GET,POST",
                &e));
        ASSERT_STREQ(p->secrets[0].name, "GH");
        ASSERT_STREQ(p->secrets[0].env_var, "GITHUB_TOKEN");
        ASSERT_EQ(strv_length(p->secrets[0].hosts), 3);
        ASSERT_STREQ(p->secrets[0].hosts[0], "api.github.com");
        ASSERT_STREQ(p->secrets[0].hosts[1], "[::1]:8443");
        ASSERT_STREQ(p->secrets[0].hosts[2], "127.0.0.1:9000");
        ASSERT_STREQ(p->secrets[0].path_prefix, "/repos/org/");
        ASSERT_STREQ(p->secrets[0].header, "Authorization");
        ASSERT_EQ(strv_length(p->secrets[0].methods), 2);
        ASSERT_STREQ(p->secrets[0].methods[0], "GET");
        ASSERT_STREQ(p->secrets[0].methods[1], "POST");
}

TEST(spec_file_source) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        _cleanup_free_ char *cwd = getcwd(NULL, 0);
        char want[4096];
        HutchError e = {};

        ASSERT_OK(policy_add_secret_spec(p, "A=file:/etc/a@b/key@x.example", &e));
        /* The source ends at the last '@'. */
        ASSERT_STREQ(p->secrets[0].file, "/etc/a@b/key");
        ASSERT_STREQ(p->secrets[0].hosts[0], "x.example");
        ASSERT_OK(policy_add_secret_spec(p, "B=file:rel/key@x.example", &e));
        (void)snprintf(want, sizeof(want), "%s/rel/key", cwd);
        ASSERT_STREQ(p->secrets[1].file, want);
}

TEST(spec_errors) {
        static const struct {
                const char *spec;
                int err;
                const char *needle;
        } cases[] = {
                {"", EINVAL, "expected NAME@HOST"},
                {"@host.example", EINVAL, "expected NAME@HOST"},
                {"NAME", EINVAL, "expected NAME@HOST"},
                {"NA-ME@host.example", EINVAL, "expected NAME@HOST"},
                {"1NAME@host.example", EINVAL, "invalid secret name '1NAME'"},
                {"NAME=", EINVAL, "missing '@HOST'"},
                {"NAME@", EINVAL, "empty host"},
                {"NAME@a.example,", EINVAL, "empty host"},
                {"NAME@,a.example", EINVAL, "empty host"},
                {"NAME@a..example", EINVAL, "invalid host pattern 'a..example'"},
                {"NAME@a.example:0", EINVAL, "a.example:0"},
                {"NAME@a.example:70000", EINVAL, "a.example:70000"},
                {"NAME@::1", EINVAL, "::1"},
                {"NAME@*", EINVAL, "'*'"},
                {"NAME=vault:x@a.example", EINVAL, "file:PATH or env:VARIABLE"},
                {"NAME=file:@a.example", EINVAL, "file:PATH or env:VARIABLE"},
                {"NAME=env:1BAD@a.example", EINVAL, "invalid environment variable name '1BAD'"},
                {"NAME@a.example/v1/,b.example/v2/", EINVAL, "different path prefixes"},
                {"NAME@a.example/v1/,b.example", EINVAL, "must follow every host or none"},
                {"NAME@a.example/v1?x", EINVAL, "invalid path prefix '/v1?x'"},
                {"NAME@a.example/v 1", EINVAL, "invalid path prefix"},
                {"NAME@a.example;", EINVAL, "empty option"},
                {"NAME@a.example;header", EINVAL, "option 'header' needs a value"},
                {"NAME@a.example;header=", EINVAL, "option 'header' needs a value"},
                {"NAME@a.example;color=red", EINVAL, "unknown option 'color'"},
                {"NAME@a.example;header=A;header=B", EINVAL, "option 'header' is given twice"},
                {"NAME@a.example;header=Bad Header", EINVAL, "invalid header name 'Bad Header'"},
                {"NAME@a.example;header=X:Y", EINVAL, "invalid header name 'X:Y'"},
                {"NAME@a.example;methods=get", EINVAL, "invalid method 'get'"},
                {"NAME@a.example;methods=GET,", EINVAL, "invalid method ''"},
                {"NAME@a.example;methods=GET;methods=PUT", EINVAL,
                 "option 'methods' is given twice"},
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_(policy_freep) Policy *p = policy_new();
                HutchError e = {};

                ASSERT_ERROR(policy_add_secret_spec(p, cases[i].spec, &e), cases[i].err);
                if (!strstr(e.msg, cases[i].needle))
                        fail_msg("spec '%s': message '%s' lacks '%s'", cases[i].spec, e.msg,
                                 cases[i].needle);
                ASSERT_EQ(p->n_secrets, 0);
        }
}

TEST(spec_duplicate_and_network_none) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError e = {};

        ASSERT_OK(policy_add_secret_spec(p, "K@a.example", &e));
        ASSERT_ERROR(policy_add_secret_spec(p, "K@b.example", &e), EEXIST);
        ASSERT_TRUE(strstr(e.msg, "secret 'K'") && strstr(e.msg, "twice"));
        ASSERT_OK(policy_set_network(p, "none", &e));
        ASSERT_ERROR(policy_validate(p, &e), EINVAL);
        ASSERT_TRUE(strstr(e.msg, "needs network mode 'allow'") != NULL);
}

TEST(upstream_ca) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError e = {};

        ASSERT_ERROR(policy_add_upstream_ca(p, "", "--upstream-ca", &e), EINVAL);
        ASSERT_OK(policy_add_upstream_ca(p, "/nonexistent/ca.pem", "--upstream-ca", &e));
        ASSERT_ERROR(policy_validate(p, &e), ENOENT);
        ASSERT_TRUE(strstr(e.msg, "/nonexistent/ca.pem") != NULL);
}

/* --- the JSON "secrets" field --- */

static int load(const char *json, Policy **ret, HutchError *e) {
        Policy *p = policy_new();
        int r;

        r = policy_load_json(p, json, strlen(json), e);
        *ret = p;
        return r;
}

TEST(json_secrets) {
        _cleanup_(policy_freep) Policy *p = NULL;
        HutchError e = {};

        ASSERT_OK(load("{\"secrets\": [{\"name\": \"A\", \"hosts\": [\"a.example\", "
                       "\"b.example:8443\"], \"header\": \"X-Api-Key\", \"path_prefix\": "
                       "\"/v1/\", \"methods\": [\"GET\"]},\n {\"name\": \"B\", \"source\": "
                       "\"file:/run/key\", \"hosts\": [\"c.example\"]},\n {\"name\": \"C\", "
                       "\"source\": \"env:OTHER\", \"hosts\": [\"c.example\"]}],\n "
                       "\"upstream_ca\": [\"/etc/hostname\"]}",
                       &p, &e));
        ASSERT_EQ(p->n_secrets, 3);
        ASSERT_STREQ(p->secrets[0].hosts[1], "b.example:8443");
        ASSERT_STREQ(p->secrets[0].header, "X-Api-Key");
        ASSERT_STREQ(p->secrets[0].path_prefix, "/v1/");
        ASSERT_STREQ(p->secrets[0].methods[0], "GET");
        ASSERT_STREQ(p->secrets[1].file, "/run/key");
        ASSERT_STREQ(p->secrets[2].env_var, "OTHER");
        ASSERT_STREQ(p->upstream_ca[0], "/etc/hostname");
        ASSERT_EQ(policy_network_mode(p), NETWORK_MODE_ALLOW);
}

TEST(json_secret_errors) {
        static const struct {
                const char *json;
                const char *pointer;
                unsigned line;
                const char *needle;
        } cases[] = {
                {"{\"secrets\": [{\"hosts\": [\"a.example\"]}]}", "/secrets/0", 1,
                 "missing field 'name'"},
                {"{\"secrets\": [{\"name\": \"A\"}]}", "/secrets/0", 1, "missing field 'hosts'"},
                {"{\"secrets\": [{\"name\": \"A\", \"hosts\": []}]}", "/secrets/0", 1,
                 "names no host"},
                {"{\"secrets\": [\n{\"name\": \"A\", \"hosts\": [\"ok.example\",\n 7]}]}",
                 "/secrets/0/hosts/1", 3, "expected a string"},
                {"{\"secrets\": [\n{\"name\": \"A\", \"hosts\": [\"a..example\"]}]}", "/secrets/0",
                 2, "invalid host pattern 'a..example'"},
                {"{\"secrets\": [{\"name\": \"A\", \"hosts\": [\"a.example\"], \"source\": "
                 "\"vault:x\"}]}",
                 "/secrets/0/source", 1, "invalid source 'vault:x'"},
                {"{\"secrets\": [{\"name\": \"A\", \"hosts\": [\"a.example\"], \"colour\": 1}]}",
                 "/secrets/0/colour", 1, "unknown field 'colour'"},
                {"{\"secrets\": [{\"name\": \"A\", \"hosts\": [\"a.example\"], \"methods\": "
                 "[\"get\"]}]}",
                 "/secrets/0", 1, "invalid method 'get'"},
                {"{\"secrets\": [{\"name\": \"A-B\", \"hosts\": [\"a.example\"]}]}", "/secrets/0",
                 1, "invalid secret name 'A-B'"},
                {"{\"secrets\": [{\"name\": \"A\", \"hosts\": [\"a.example\"]},\n {\"name\": "
                 "\"A\", \"hosts\": [\"b.example\"]}]}",
                 "/secrets/1", 2, "given twice"},
                {"{\"secrets\": {\"name\": \"A\"}}", "/secrets", 1, "expected an array"},
                {"{\"upstream_ca\": [\"\"]}", "/upstream_ca/0", 1, "needs a file name"},
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_(policy_freep) Policy *p = NULL;
                HutchError e = {};

                ASSERT_TRUE(load(cases[i].json, &p, &e) < 0);
                if (strcmp(e.pointer, cases[i].pointer) != 0 || e.line != cases[i].line ||
                    !strstr(e.msg, cases[i].needle))
                        fail_msg("case %zu: pointer '%s' line %u message '%s'", i, e.pointer,
                                 e.line, e.msg);
        }
}

/* --- placeholders --- */

static char *placeholder(const char *value) {
        char *ph = NULL;

        ASSERT_OK(secret_placeholder_make(value, strlen(value), &ph));
        ASSERT_NOT_NULL(ph);
        ASSERT_EQ(strlen(ph), strlen(value));
        ASSERT_TRUE(strcmp(ph, value) != 0);
        return ph;
}

static bool only_from(const char *s, const char *set) {
        return strspn(s, set) == strlen(s);
}

#define ALNUM "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

TEST(placeholder_prefixes) {
        static const struct {
                const char *value;
                const char *prefix;
        } cases[] = {
                {"sk-ant-api03-Abcdefghijklmnopqrstuvwxyz0123456789", "sk-ant-api03-"},
                {"ghp_0123456789abcdefghijABCDEFGHIJ123456", "ghp_"},
                {"sk-proj-AbCdEfGhIjKlMnOpQrStUvWx", "sk-proj-"},
                {"xoxb-1234-5678-abcdefABCDEF", "xoxb-1234-5678-"},
                /* The last separator within the first 16 characters. */
                {"abcdefghijklmn_opqrstuvwxyz0123", "abcdefghijklmn_"},
                /* A separator after the 16th character is body. */
                {"abcdefghijklmnopq_rstuvwxyz0123", ""},
                /* No separator: no prefix. */
                {"AbCdEfGhIjKlMnOp", ""},
                /* A separator that would leave fewer than 8 characters of
                 * body is not a prefix end. */
                {"sk-abcdefg", ""},
                {"sk-abcdefgh", "sk-"},
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *ph = placeholder(cases[i].value);
                size_t n = strlen(cases[i].prefix);

                if (strncmp(ph, cases[i].prefix, n) != 0)
                        fail_msg("'%s' -> '%s': prefix '%s' not kept", cases[i].value, ph,
                                 cases[i].prefix);
                /* The body is random: it differs from the real one. */
                if (strcmp(ph + n, cases[i].value + n) == 0)
                        fail_msg("'%s' -> '%s': body not replaced", cases[i].value, ph);
        }
}

TEST(placeholder_alphabets) {
        static const struct {
                const char *value;
                size_t prefix;
                const char *alphabet;
        } cases[] = {
                {"12345678901234567890", 0, "0123456789"},
                {"deadbeef0123456789abcdef01234567", 0, "0123456789abcdef"},
                {"DEADBEEF0123456789ABCDEF01234567", 0, "0123456789ABCDEF"},
                {"ghp_0123456789abcdefghijABCDEFGHIJ123456", 4, ALNUM},
                {"sk-ant-api03-abc_DEF-ghi_JKL-mno_PQR", 13, ALNUM "-_"},
                {"AKIAabcdefgh+/ijklmnopQRSTUV", 0, ALNUM "+/"},
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                for (int round = 0; round < 50; round++) {
                        _cleanup_free_ char *ph = placeholder(cases[i].value);

                        if (!only_from(ph + cases[i].prefix, cases[i].alphabet))
                                fail_msg("'%s' -> '%s': body outside '%s'", cases[i].value, ph,
                                         cases[i].alphabet);
                }
}

TEST(placeholder_hex_body_uses_full_hex) {
        /* Over many draws every hex digit shows up, and nothing else. */
        bool seen[256] = {};
        size_t distinct = 0;

        for (int round = 0; round < 64; round++) {
                _cleanup_free_ char *ph = placeholder("0123456789abcdef0123456789abcdef");

                for (const char *c = ph; *c; c++)
                        seen[(unsigned char)*c] = true;
        }
        for (size_t c = 0; c < 256; c++)
                if (seen[c]) {
                        ASSERT_TRUE(strchr("0123456789abcdef", (int)c) != NULL);
                        distinct++;
                }
        ASSERT_EQ(distinct, 16);
}

TEST(placeholder_padding_kept) {
        _cleanup_free_ char *ph = placeholder("QUJDREVGR0hJSktMTU5PUA==");

        ASSERT_TRUE(ph[22] == '=' && ph[23] == '=');
        ASSERT_TRUE(only_from(ph, ALNUM "="));
        ASSERT_TRUE(strchr(ph, '=') == ph + 22);
}

TEST(placeholder_random_across_calls) {
        const char *v = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx";
        char *seen[32];

        for (size_t i = 0; i < ELEMENTSOF(seen); i++) {
                seen[i] = placeholder(v);
                for (size_t j = 0; j < i; j++)
                        ASSERT_TRUE(strcmp(seen[i], seen[j]) != 0);
        }
        for (size_t i = 0; i < ELEMENTSOF(seen); i++)
                free(seen[i]);
}

TEST(placeholder_short_and_invalid_values) {
        char *ph = NULL;

        ASSERT_ERROR(secret_placeholder_make("", 0, &ph), EINVAL);
        ASSERT_ERROR(secret_placeholder_make("1234567", 7, &ph), EINVAL);
        ASSERT_ERROR(secret_placeholder_make("abcd efgh", 9, &ph), EINVAL);
        ASSERT_ERROR(secret_placeholder_make("abcdefgh\n", 9, &ph), EINVAL);
        ASSERT_ERROR(secret_placeholder_make("abcdéfgh", strlen("abcdéfgh"), &ph), EINVAL);
        ASSERT_NULL(ph);
        /* Exactly the minimum: a fully random value of 8 digits. */
        ph = placeholder("12345678");
        ASSERT_TRUE(only_from(ph, "0123456789"));
        free(ph);
}

/* --- loading the values --- */

static Policy *policy_with(const char *spec) {
        Policy *p = policy_new();
        HutchError e = {};

        ASSERT_OK(policy_add_secret_spec(p, spec, &e));
        return p;
}

TEST(load_from_env) {
        _cleanup_(policy_freep) Policy *p = policy_with("TOKEN@a.example;header=Authorization");
        _cleanup_(secret_set_freep) SecretSet *s = NULL;
        char *env[] = {(char *)"TOKEN=ghp_realvalue0123456789", NULL};
        HutchError e = {};

        ASSERT_OK(secret_set_load(p, env, &s, &e));
        ASSERT_EQ(s->n, 1);
        ASSERT_STREQ(s->items[0].value, "ghp_realvalue0123456789");
        ASSERT_EQ(strlen(s->items[0].placeholder), strlen("ghp_realvalue0123456789"));
        ASSERT_TRUE(strncmp(s->items[0].placeholder, "ghp_", 4) == 0);
}

TEST(load_errors_name_the_secret_not_the_value) {
        static const struct {
                const char *spec;
                const char *env;
                const char *needle;
        } cases[] = {
                {"TOKEN@a.example", "OTHER=x",
                 "secret 'TOKEN': environment variable TOKEN is not set"},
                {"TOKEN@a.example",
                 "TOKEN=", "secret 'TOKEN': environment variable TOKEN is empty"},
                {"TOKEN=env:SRC@a.example", "TOKEN=abcdefghijk",
                 "environment variable SRC is not set"},
                {"TOKEN@a.example", "TOKEN=seven77", "shorter than 8"},
                {"TOKEN@a.example", "TOKEN=has space inside", "space or a control character"},
                {"TOKEN=file:/nonexistent/key@a.example", "UNUSED=qqqqqqqqqq",
                 "cannot read the file '/nonexistent/key'"},
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_(policy_freep) Policy *p = policy_with(cases[i].spec);
                SecretSet *s = NULL;
                char *env[] = {(char *)cases[i].env, NULL};
                HutchError e = {};

                ASSERT_TRUE(secret_set_load(p, env, &s, &e) < 0);
                ASSERT_NULL(s);
                if (!strstr(e.msg, cases[i].needle))
                        fail_msg("case %zu: message '%s' lacks '%s'", i, e.msg, cases[i].needle);
                if (strchr(cases[i].env, '=')[1] && strstr(e.msg, strchr(cases[i].env, '=') + 1))
                        fail_msg("case %zu: message '%s' holds the value", i, e.msg);
        }
}

static void write_file(const char *path, const char *text) {
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(loop_write(fd, text, strlen(text)));
}

TEST(load_from_file) {
        char dir[] = "/tmp/test-secrets-XXXXXX", path[128], spec[256];
        HutchError e = {};

        ASSERT_NOT_NULL(mkdtemp(dir));
        (void)snprintf(path, sizeof(path), "%s/key", dir);
        (void)snprintf(spec, sizeof(spec), "K=file:%s@a.example", path);

        /* One trailing newline (or CRLF) is dropped. */
        {
                _cleanup_(policy_freep) Policy *p = policy_with(spec);
                _cleanup_(secret_set_freep) SecretSet *s = NULL;

                write_file(path, "sk-filevalue-0123456789\r\n");
                ASSERT_OK(secret_set_load(p, NULL, &s, &e));
                ASSERT_STREQ(s->items[0].value, "sk-filevalue-0123456789");
        }
        /* An empty file (or only a newline) is refused. */
        {
                _cleanup_(policy_freep) Policy *p = policy_with(spec);
                SecretSet *s = NULL;

                write_file(path, "\n");
                ASSERT_ERROR(secret_set_load(p, NULL, &s, &e), EINVAL);
                ASSERT_TRUE(strstr(e.msg, "is empty") != NULL);
        }
        (void)unlink(path);
        (void)rmdir(dir);
}

TEST(values_are_wiped_in_children) {
        _cleanup_(policy_freep) Policy *p = policy_with("TOKEN@a.example");
        _cleanup_(secret_set_freep) SecretSet *s = NULL;
        char *env[] = {(char *)"TOKEN=sk-wipe-me-0123456789", NULL};
        HutchError e = {};
        int status = 0;
        pid_t pid;

        ASSERT_OK(secret_set_load(p, env, &s, &e));
        pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0)
                _exit(s->items[0].value[0] == '\0' ? 0 : 1);
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        ASSERT_STREQ(s->items[0].value, "sk-wipe-me-0123456789");
}

TEST(config_memfd) {
        _cleanup_(policy_freep) Policy *p = policy_with(
                "TOKEN@a.example/v1/,[::1]:8443/v1/;header=Authorization;methods=GET,POST");
        _cleanup_(secret_set_freep) SecretSet *s = NULL;
        char *env[] = {(char *)"TOKEN=sk-\"quo\\te\"-0123456789", NULL};
        _cleanup_close_ int fd = -EBADF;
        char buf[4096];
        json_t *root, *sec;
        ssize_t n;
        HutchError e = {};

        ASSERT_OK(secret_set_load(p, env, &s, &e));
        fd = secret_set_config_memfd(s);
        ASSERT_OK(fd);
        /* Sealed against writes. */
        ASSERT_TRUE(write(fd, "x", 1) < 0);
        n = read(fd, buf, sizeof(buf) - 1);
        ASSERT_TRUE(n > 0);
        buf[n] = '\0';
        root = json_loads(buf, 0, NULL);
        ASSERT_NOT_NULL(root);
        sec = json_array_get(json_object_get(root, "secrets"), 0);
        ASSERT_STREQ(json_string_value(json_object_get(sec, "name")), "TOKEN");
        ASSERT_STREQ(json_string_value(json_object_get(sec, "value")), "sk-\"quo\\te\"-0123456789");
        ASSERT_STREQ(json_string_value(json_object_get(sec, "placeholder")),
                     s->items[0].placeholder);
        ASSERT_STREQ(json_string_value(json_array_get(json_object_get(sec, "hosts"), 1)),
                     "[::1]:8443");
        ASSERT_STREQ(json_string_value(json_object_get(sec, "header")), "Authorization");
        ASSERT_STREQ(json_string_value(json_object_get(sec, "path_prefix")), "/v1/");
        ASSERT_STREQ(json_string_value(json_array_get(json_object_get(sec, "methods"), 1)), "POST");
        json_decref(root);
}

DEFINE_TEST_MAIN
