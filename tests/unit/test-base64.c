/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "macro.h"
#include "test.h"

static void check(const char *in, Base64Flags flags, const char *want, size_t want_len) {
        uint8_t *out = NULL;
        size_t n = 0;

        ASSERT_OK(base64_decode(in, strlen(in), flags, &out, &n));
        ASSERT_EQ(n, want_len);
        ASSERT_TRUE(memcmp(out, want, n) == 0);
        ASSERT_EQ(out[n], 0);
        free(out);
}

static void refused(const char *in, Base64Flags flags) {
        uint8_t *out = NULL;
        size_t n = 0;

        ASSERT_ERROR(base64_decode(in, strlen(in), flags, &out, &n), EINVAL);
        ASSERT_NULL(out);
}

static void round_trip(const char *plain, size_t len, const char *encoded) {
        _cleanup_free_ char *e = NULL;
        _cleanup_free_ uint8_t *d = NULL;
        size_t n = 0;

        ASSERT_OK(base64_encode(plain, len, &e));
        ASSERT_STREQ(e, encoded);
        ASSERT_OK(base64_decode(e, strlen(e), 0, &d, &n));
        ASSERT_EQ(n, len);
        ASSERT_TRUE(memcmp(d, plain, len) == 0);
}

TEST(encode) {
        round_trip("", 0, "");
        round_trip("f", 1, "Zg==");
        round_trip("fo", 2, "Zm8=");
        round_trip("foo", 3, "Zm9v");
        round_trip("foob", 4, "Zm9vYg==");
        round_trip("fooba", 5, "Zm9vYmE=");
        round_trip("foobar", 6, "Zm9vYmFy");
        round_trip("\0\xff\x10", 3, "AP8Q");
        round_trip("\xfb\xff", 2, "+/8=");
}

TEST(value) {
        ASSERT_EQ(base64_value('A'), 0);
        ASSERT_EQ(base64_value('z'), 51);
        ASSERT_EQ(base64_value('9'), 61);
        ASSERT_EQ(base64_value('+'), 62);
        ASSERT_EQ(base64_value('-'), 62);
        ASSERT_EQ(base64_value('/'), 63);
        ASSERT_EQ(base64_value('_'), 63);
        ASSERT_EQ(base64_value('='), -1);
        ASSERT_EQ(base64_value(' '), -1);
        ASSERT_EQ(base64_value('\0'), -1);
}

TEST(strict) {
        check("", 0, "", 0);
        check("aGk=", 0, "hi", 2);
        check("aGVsbG8K", 0, "hello\n", 6);
        check("+/8=", 0, "\xfb\xff", 2);
        check("AAAA", 0, "\0\0\0", 3);
        refused("aGk", 0);   /* the padding is required */
        refused("-_8=", 0);  /* the URL alphabet is not asked for */
        refused("aGk==", 0); /* one '=' too many */
        refused("aG k", 0);  /* whitespace */
        refused("aGl=", 0);  /* bits left over: "aGk=" is the one form */
        refused("====", 0);
        refused("a===", 0);
        refused("aGk=aGk=", 0); /* padding only at the end */
}

TEST(proto3) {
        Base64Flags f = BASE64_URL_TOO | BASE64_PAD_OPTIONAL;

        check("aGk=", f, "hi", 2);
        check("aGk", f, "hi", 2);
        check("-_8=", f, "\xfb\xff", 2);
        check("+/8", f, "\xfb\xff", 2);
        refused("a", f);
        refused("aGk==", f);
        refused("aGl", f);
        refused("aGk=x", f);
}

DEFINE_TEST_MAIN
