/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "strv.h"
#include "test.h"

TEST(strv_extend_and_copy) {
        _cleanup_strv_free_ char **l = NULL, **c = NULL;

        ASSERT_EQ(strv_length(l), 0);
        ASSERT_OK(strv_extend(&l, "a"));
        ASSERT_OK(strv_extend(&l, "b"));
        ASSERT_EQ(strv_length(l), 2);
        ASSERT_TRUE(strv_contains(l, "b"));
        ASSERT_FALSE(strv_contains(l, "c"));
        c = strv_copy(l);
        ASSERT_NOT_NULL(c);
        ASSERT_STREQ(c[1], "b");
        ASSERT_NULL(c[2]);
}

TEST(strv_push_take_null_is_enomem) {
        _cleanup_strv_free_ char **l = NULL;

        ASSERT_ERROR(strv_push_take(&l, NULL), ENOMEM);
        ASSERT_EQ(strv_length(l), 0);
}

TEST(strv_env) {
        _cleanup_strv_free_ char **l = NULL;

        ASSERT_OK(strv_env_set(&l, "A", "1"));
        ASSERT_OK(strv_env_set(&l, "AB", "2"));
        ASSERT_OK(strv_env_set(&l, "A", "3"));
        ASSERT_EQ(strv_length(l), 2);
        ASSERT_STREQ(strv_env_get(l, "A"), "3");
        ASSERT_STREQ(strv_env_get(l, "AB"), "2");
        ASSERT_NULL(strv_env_get(l, "B"));
}

TEST(env_name_is_valid) {
        ASSERT_TRUE(env_name_is_valid("PATH"));
        ASSERT_TRUE(env_name_is_valid("_x1"));
        ASSERT_FALSE(env_name_is_valid("1X"));
        ASSERT_FALSE(env_name_is_valid("A=B"));
        ASSERT_FALSE(env_name_is_valid(""));
        ASSERT_FALSE(env_name_is_valid(NULL));
}

DEFINE_TEST_MAIN
