/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "parse-util.h"
#include "test.h"

TEST(safe_atou64) {
        uint64_t v = 7;

        ASSERT_OK(safe_atou64("0", &v));
        ASSERT_EQ(v, 0);
        ASSERT_OK(safe_atou64("18446744073709551615", &v));
        ASSERT_TRUE(v == UINT64_MAX);
        ASSERT_ERROR(safe_atou64("18446744073709551616", &v), ERANGE);
        ASSERT_ERROR(safe_atou64("", &v), EINVAL);
        ASSERT_ERROR(safe_atou64("-1", &v), EINVAL);
        ASSERT_ERROR(safe_atou64(" 1", &v), EINVAL);
        ASSERT_ERROR(safe_atou64("1 ", &v), EINVAL);
        ASSERT_ERROR(safe_atou64("0x10", &v), EINVAL);
        ASSERT_ERROR(safe_atou64(NULL, &v), EINVAL);
}

TEST(safe_atou32) {
        uint32_t v = 0;

        ASSERT_OK(safe_atou32("4294967295", &v));
        ASSERT_EQ(v, 4294967295U);
        ASSERT_ERROR(safe_atou32("4294967296", &v), ERANGE);
        ASSERT_ERROR(safe_atou32("abc", &v), EINVAL);
}

TEST(safe_atoi) {
        int v = 0;

        ASSERT_OK(safe_atoi("-2147483648", &v));
        ASSERT_EQ(v, INT32_MIN);
        ASSERT_OK(safe_atoi("2147483647", &v));
        ASSERT_EQ(v, INT32_MAX);
        ASSERT_ERROR(safe_atoi("2147483648", &v), ERANGE);
        ASSERT_ERROR(safe_atoi("-", &v), EINVAL);
        ASSERT_ERROR(safe_atoi(NULL, &v), EINVAL);
}

TEST(parse_size) {
        uint64_t v = 0;

        ASSERT_OK(parse_size("4096", &v));
        ASSERT_EQ(v, 4096);
        ASSERT_OK(parse_size("64m", &v));
        ASSERT_EQ(v, 64ULL << 20);
        ASSERT_OK(parse_size("1G", &v));
        ASSERT_EQ(v, 1ULL << 30);
        ASSERT_OK(parse_size("512KiB", &v));
        ASSERT_EQ(v, 512ULL << 10);
        ASSERT_OK(parse_size("2t", &v));
        ASSERT_EQ(v, 2ULL << 40);
        ASSERT_OK(parse_size("7b", &v));
        ASSERT_EQ(v, 7);
        ASSERT_ERROR(parse_size("12q", &v), EINVAL);
        ASSERT_ERROR(parse_size("", &v), EINVAL);
        ASSERT_ERROR(parse_size("-1", &v), EINVAL);
        ASSERT_OK(parse_size("1.5g", &v));
        ASSERT_EQ(v, 3ULL << 29);
        ASSERT_OK(parse_size("0.5K", &v));
        ASSERT_EQ(v, 512);
        ASSERT_OK(parse_size("0.001k", &v));
        ASSERT_EQ(v, 1);
        ASSERT_ERROR(parse_size("1.5", &v), EINVAL);
        ASSERT_ERROR(parse_size("1.5b", &v), EINVAL);
        ASSERT_ERROR(parse_size("1.g", &v), EINVAL);
        ASSERT_ERROR(parse_size(".5g", &v), EINVAL);
        ASSERT_ERROR(parse_size("1.5.5g", &v), EINVAL);
        ASSERT_ERROR(parse_size("1.0000000001g", &v), EINVAL);
        ASSERT_ERROR(parse_size("16777216.5t", &v), ERANGE);
        ASSERT_ERROR(parse_size("m", &v), EINVAL);
        ASSERT_ERROR(parse_size("99999999999999999t", &v), ERANGE);
        ASSERT_ERROR(parse_size("99999999999999999999", &v), ERANGE);
        ASSERT_ERROR(parse_size(NULL, &v), EINVAL);
}

TEST(parse_duration_ms) {
        uint64_t v = 1;

        ASSERT_OK(parse_duration_ms("0", &v));
        ASSERT_EQ(v, 0);
        ASSERT_OK(parse_duration_ms("1500ms", &v));
        ASSERT_EQ(v, 1500);
        ASSERT_OK(parse_duration_ms("30s", &v));
        ASSERT_EQ(v, 30000);
        ASSERT_OK(parse_duration_ms("2m", &v));
        ASSERT_EQ(v, 120000);
        ASSERT_OK(parse_duration_ms("1h", &v));
        ASSERT_EQ(v, 3600000);
        ASSERT_ERROR(parse_duration_ms("abc", &v), EINVAL);
        ASSERT_ERROR(parse_duration_ms("10", &v), EINVAL);
        ASSERT_ERROR(parse_duration_ms("10d", &v), EINVAL);
        ASSERT_ERROR(parse_duration_ms("", &v), EINVAL);
        ASSERT_ERROR(parse_duration_ms("18446744073709551615h", &v), ERANGE);
        ASSERT_ERROR(parse_duration_ms(NULL, &v), EINVAL);
}

TEST(parse_boolean) {
        bool b = false;

        ASSERT_OK(parse_boolean("yes", &b));
        ASSERT_TRUE(b);
        ASSERT_OK(parse_boolean("OFF", &b));
        ASSERT_FALSE(b);
        ASSERT_ERROR(parse_boolean("maybe", &b), EINVAL);
        ASSERT_ERROR(parse_boolean(NULL, &b), EINVAL);
}

TEST(hex_digit) {
        ASSERT_EQ(hex_digit('0'), 0);
        ASSERT_EQ(hex_digit('9'), 9);
        ASSERT_EQ(hex_digit('a'), 10);
        ASSERT_EQ(hex_digit('F'), 15);
        ASSERT_EQ(hex_digit('g'), -1);
        ASSERT_EQ(hex_digit('G'), -1);
        ASSERT_EQ(hex_digit('/'), -1);
        ASSERT_EQ(hex_digit('\0'), -1);
}

DEFINE_TEST_MAIN
