/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdlib.h>

#include "mcp-util.h"
#include "store/store.h"
#include "test.h"

TEST(protocol_negotiate) {
        /* A version the server speaks is answered with itself. */
        ASSERT_STREQ(mcp_protocol_negotiate("2025-06-18"), "2025-06-18");
        ASSERT_STREQ(mcp_protocol_negotiate("2025-03-26"), "2025-03-26");
        ASSERT_STREQ(mcp_protocol_negotiate("2024-11-05"), "2024-11-05");
        ASSERT_STREQ(mcp_protocol_negotiate("2025-11-25"), "2025-11-25");
        /* Anything else with the newest. */
        ASSERT_STREQ(mcp_protocol_negotiate("2099-01-01"), mcp_protocol_versions[0]);
        ASSERT_STREQ(mcp_protocol_negotiate("1.0"), mcp_protocol_versions[0]);
        ASSERT_STREQ(mcp_protocol_negotiate(NULL), mcp_protocol_versions[0]);
        ASSERT_STREQ(mcp_protocol_versions[0], "2025-11-25");
}

TEST(version_at_least) {
        ASSERT_TRUE(mcp_version_at_least("2025-06-18", "2025-06-18"));
        ASSERT_TRUE(mcp_version_at_least("2025-11-25", "2025-06-18"));
        ASSERT_FALSE(mcp_version_at_least("2025-03-26", "2025-06-18"));
        ASSERT_FALSE(mcp_version_at_least(NULL, "2024-11-05"));
}

TEST(default_name) {
        char a[MCP_NAME_MAX + 1], b[MCP_NAME_MAX + 1];

        mcp_default_name("/home/me/My Project", a);
        ASSERT_TRUE(strncmp(a, "mcp-my-project-", 15) == 0);
        ASSERT_EQ(strlen(a), 15 + 8);
        ASSERT_TRUE(store_name_is_valid(a));

        /* Same folder name, another path: another sandbox. */
        mcp_default_name("/srv/My Project", b);
        ASSERT_TRUE(strncmp(b, "mcp-my-project-", 15) == 0);
        ASSERT_TRUE(strcmp(a, b) != 0);

        /* Stable. */
        mcp_default_name("/home/me/My Project", b);
        ASSERT_STREQ(a, b);

        mcp_default_name("/", a);
        ASSERT_TRUE(strncmp(a, "mcp-root-", 9) == 0);
        ASSERT_TRUE(store_name_is_valid(a));

        /* Long and non-ASCII names are cut and replaced, never invalid. */
        mcp_default_name("/x/\xc3\xa9t\xc3\xa9-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                         a);
        ASSERT_TRUE(store_name_is_valid(a));
        ASSERT_EQ(strlen(a), 4 + 24 + 1 + 8);
        ASSERT_TRUE(strncmp(a, "mcp---t---a", 11) == 0);
}

static void check_norm(const char *in, const char *base, const char *want) {
        char *out = NULL;

        ASSERT_OK(mcp_path_normalize(in, base, &out));
        ASSERT_STREQ(out, want);
        free(out);
}

TEST(path_normalize) {
        char *out = NULL;

        check_norm("a/b", NULL, "a/b");
        check_norm("./a//b/./", NULL, "a/b");
        check_norm("a/../b", NULL, "b");
        check_norm("a/..", NULL, ".");
        check_norm(".", NULL, ".");
        check_norm("/etc/../usr//lib", NULL, "/usr/lib");
        check_norm("/", NULL, "/");
        check_norm("/a/..", NULL, "/");
        check_norm("...", NULL, "...");
        check_norm("a/..b", NULL, "a/..b");
        /* Below a base. */
        check_norm("src/x", "/workspace", "/workspace/src/x");
        check_norm(".", "/workspace", "/workspace");
        check_norm("x", "/", "/x");
        check_norm("/abs", "/workspace", "/abs");

        /* Climbing above the start is refused. */
        ASSERT_ERROR(mcp_path_normalize("..", NULL, &out), EPERM);
        ASSERT_ERROR(mcp_path_normalize("../etc/passwd", NULL, &out), EPERM);
        ASSERT_ERROR(mcp_path_normalize("a/../../b", NULL, &out), EPERM);
        ASSERT_ERROR(mcp_path_normalize("/..", NULL, &out), EPERM);
        ASSERT_ERROR(mcp_path_normalize("/a/../../etc", NULL, &out), EPERM);
        ASSERT_ERROR(mcp_path_normalize("..", "/workspace", &out), EPERM);
        ASSERT_ERROR(mcp_path_normalize("", NULL, &out), EINVAL);
        ASSERT_ERROR(mcp_path_normalize(NULL, NULL, &out), EINVAL);
        ASSERT_NULL(out);
}

TEST(path_normalize_long) {
        char *p = malloc(5000), *out = NULL;

        ASSERT_NOT_NULL(p);
        memset(p, 'a', 4999);
        p[4999] = '\0';
        ASSERT_ERROR(mcp_path_normalize(p, NULL, &out), ENAMETOOLONG);
        p[4095] = '\0';
        ASSERT_OK(mcp_path_normalize(p, NULL, &out));
        ASSERT_EQ(strlen(out), 4095);
        free(out);
        free(p);
}

DEFINE_TEST_MAIN
