/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdlib.h>

#include "test.h"
#include "utf8.h"

TEST(utf8_sequence_length) {
        ASSERT_EQ(utf8_sequence_length("a", 1), 1);
        ASSERT_EQ(utf8_sequence_length("\xc3\xa9", 2), 2);         /* é */
        ASSERT_EQ(utf8_sequence_length("\xe2\x82\xac", 3), 3);     /* € */
        ASSERT_EQ(utf8_sequence_length("\xf0\x9f\x98\x80", 4), 4); /* U+1F600 */
        ASSERT_EQ(utf8_sequence_length("\xf4\x8f\xbf\xbf", 4), 4); /* U+10FFFF */
        ASSERT_EQ(utf8_sequence_length("", 0), 0);
        /* A cut-off sequence, a lone continuation byte, invalid leads. */
        ASSERT_EQ(utf8_sequence_length("\xe2\x82", 2), 0);
        ASSERT_EQ(utf8_sequence_length("\x80", 1), 0);
        ASSERT_EQ(utf8_sequence_length("\xff", 1), 0);
        ASSERT_EQ(utf8_sequence_length("\xc0\xaf", 2), 0);         /* overlong '/' */
        ASSERT_EQ(utf8_sequence_length("\xc1\xbf", 2), 0);         /* overlong */
        ASSERT_EQ(utf8_sequence_length("\xe0\x80\xaf", 3), 0);     /* overlong */
        ASSERT_EQ(utf8_sequence_length("\xf0\x80\x80\xaf", 4), 0); /* overlong */
        ASSERT_EQ(utf8_sequence_length("\xed\xa0\x80", 3), 0);     /* U+D800 */
        ASSERT_EQ(utf8_sequence_length("\xed\x9f\xbf", 3), 3);     /* U+D7FF */
        ASSERT_EQ(utf8_sequence_length("\xf4\x90\x80\x80", 4), 0); /* U+110000 */
        ASSERT_EQ(utf8_sequence_length("\xf5\x80\x80\x80", 4), 0);
        ASSERT_EQ(utf8_sequence_length("\xe2\x28\xa1", 3), 0); /* bad continuation */
}

TEST(utf8_is_valid_n) {
        ASSERT_TRUE(utf8_is_valid_n("", 0));
        ASSERT_TRUE(utf8_is_valid_n("h\xc3\xa9llo", 6));
        /* NUL is a character. */
        ASSERT_TRUE(utf8_is_valid_n("a\0b", 3));
        ASSERT_FALSE(utf8_is_valid_n("abc\xe2\x82", 5));
        ASSERT_FALSE(utf8_is_valid_n("\xfe", 1));
}

TEST(utf8_sanitize) {
        char *out = NULL;
        size_t len = 0;

        ASSERT_OK(utf8_sanitize("ok \xc3\xa9", 5, &out, &len));
        ASSERT_EQ(len, 5);
        ASSERT_STREQ(out, "ok \xc3\xa9");
        free(out);

        /* Each bad byte is one U+FFFD; what follows is kept. */
        ASSERT_OK(utf8_sanitize("a\xff\x80z\xe2\x82", 6, &out, &len));
        ASSERT_STREQ(out, "a\xef\xbf\xbd\xef\xbf\xbdz\xef\xbf\xbd\xef\xbf\xbd");
        ASSERT_EQ(len, strlen(out));
        ASSERT_TRUE(utf8_is_valid_n(out, len));
        free(out);

        ASSERT_OK(utf8_sanitize("", 0, &out, NULL));
        ASSERT_STREQ(out, "");
        free(out);
}

DEFINE_TEST_MAIN
