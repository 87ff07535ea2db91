/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdlib.h>

#include "e2b-connect.h"
#include "e2b-envd-form.h"
#include "macro.h"
#include "test.h"

TEST(code_strings) {
        for (int i = 0; i < _CONNECT_CODE_MAX; i++) {
                const char *s = connect_code_to_string((ConnectCode)i);

                ASSERT_NOT_NULL(s);
                ASSERT_EQ(connect_code_from_string(s), i);
        }
        ASSERT_NULL(connect_code_to_string(_CONNECT_CODE_MAX));
        ASSERT_NULL(connect_code_to_string(_CONNECT_CODE_INVALID));
        ASSERT_EQ(connect_code_from_string("cancelled"), _CONNECT_CODE_INVALID);
        ASSERT_EQ(connect_code_from_string(""), _CONNECT_CODE_INVALID);
        ASSERT_EQ(connect_code_from_string(NULL), _CONNECT_CODE_INVALID);
}

TEST(code_status) {
        /* The spec's table, after its 2023 update. */
        ASSERT_EQ(connect_code_to_http_status(CONNECT_CANCELED), 499);
        ASSERT_EQ(connect_code_to_http_status(CONNECT_INVALID_ARGUMENT), 400);
        ASSERT_EQ(connect_code_to_http_status(CONNECT_DEADLINE_EXCEEDED), 504);
        ASSERT_EQ(connect_code_to_http_status(CONNECT_NOT_FOUND), 404);
        ASSERT_EQ(connect_code_to_http_status(CONNECT_FAILED_PRECONDITION), 400);
        ASSERT_EQ(connect_code_to_http_status(CONNECT_UNIMPLEMENTED), 501);
        ASSERT_EQ(connect_code_to_http_status(CONNECT_UNAUTHENTICATED), 401);
        ASSERT_EQ(connect_code_to_http_status(CONNECT_RESOURCE_EXHAUSTED), 429);
        ASSERT_EQ(connect_code_to_http_status(_CONNECT_CODE_MAX), 500);
        ASSERT_EQ(connect_code_from_errno(ENOENT), CONNECT_NOT_FOUND);
        ASSERT_EQ(connect_code_from_errno(EEXIST), CONNECT_ALREADY_EXISTS);
        ASSERT_EQ(connect_code_from_errno(EACCES), CONNECT_PERMISSION_DENIED);
        ASSERT_EQ(connect_code_from_errno(EINVAL), CONNECT_INVALID_ARGUMENT);
        ASSERT_EQ(connect_code_from_errno(EIO), CONNECT_INTERNAL);
}

TEST(error_json) {
        char *s;

        s = connect_error_json(CONNECT_NOT_FOUND, "no \"x\"");
        ASSERT_STREQ(s, "{\"code\":\"not_found\",\"message\":\"no \\\"x\\\"\"}");
        free(s);
        s = connect_error_json(CONNECT_INTERNAL, NULL);
        ASSERT_STREQ(s, "{\"code\":\"internal\"}");
        free(s);
        ASSERT_NULL(connect_error_json(CONNECT_OK, "x"));
        ASSERT_NULL(connect_error_json(_CONNECT_CODE_MAX, "x"));

        s = connect_end_stream_json(CONNECT_OK, "ignored");
        ASSERT_STREQ(s, "{}");
        free(s);
        s = connect_end_stream_json(CONNECT_DEADLINE_EXCEEDED, "late");
        ASSERT_STREQ(s, "{\"error\":{\"code\":\"deadline_exceeded\",\"message\":\"late\"}}");
        free(s);
        ASSERT_NULL(connect_end_stream_json(_CONNECT_CODE_INVALID, NULL));
}

TEST(envelope_parse) {
        const uint8_t msg[] = {0, 0, 0, 0, 2, '{', '}', 0x02, 0, 0, 0, 0};
        ConnectEnvelope e = {};

        /* Short: nothing yet, at any cut. */
        for (size_t n = 0; n < 7; n++)
                ASSERT_EQ(connect_envelope_parse(msg, n, 16, &e), 0);
        ASSERT_EQ(connect_envelope_parse(msg, sizeof(msg), 16, &e), 7);
        ASSERT_EQ(e.flags, 0);
        ASSERT_EQ(e.len, 2);
        ASSERT_TRUE(e.data == msg + 5);
        ASSERT_EQ(connect_envelope_parse(msg + 7, 5, 16, &e), 5);
        ASSERT_EQ(e.flags, CONNECT_FLAG_END_STREAM);
        ASSERT_EQ(e.len, 0);
}

TEST(envelope_parse_bad) {
        const uint8_t compressed[] = {0x01, 0, 0, 0, 0};
        const uint8_t unknown[] = {0x80, 0, 0, 0, 0};
        const uint8_t huge[] = {0, 0xff, 0xff, 0xff, 0xff};
        const uint8_t at_max[] = {0, 0, 0, 0, 16};
        ConnectEnvelope e = {};

        ASSERT_ERROR(connect_envelope_parse(compressed, sizeof(compressed), 16, &e), EBADMSG);
        ASSERT_ERROR(connect_envelope_parse(unknown, sizeof(unknown), 16, &e), EBADMSG);
        /* The length is refused from the head alone: no body is waited for. */
        ASSERT_ERROR(connect_envelope_parse(huge, sizeof(huge), CONNECT_MESSAGE_MAX, &e), EMSGSIZE);
        ASSERT_ERROR(connect_envelope_parse(at_max, sizeof(at_max), 15, &e), EMSGSIZE);
        /* Its negative twin: at the limit it only waits for the bytes. */
        ASSERT_EQ(connect_envelope_parse(at_max, sizeof(at_max), 16, &e), 0);
}

TEST(stream_request) {
        const uint8_t one[] = {0, 0, 0, 0, 2, '{', '}'};
        const uint8_t two[] = {0, 0, 0, 0, 2, '{', '}', 0, 0, 0, 0, 0};
        const uint8_t end[] = {0x02, 0, 0, 0, 2, '{', '}'};
        const uint8_t trunc[] = {0, 0, 0, 0, 3, '{', '}'};
        const uint8_t *d = NULL;
        size_t n = 0;

        ASSERT_OK(connect_stream_request(one, sizeof(one), 16, &d, &n));
        ASSERT_EQ(n, 2);
        ASSERT_TRUE(d == one + 5);
        ASSERT_ERROR(connect_stream_request(two, sizeof(two), 16, &d, &n), EBADMSG);
        ASSERT_ERROR(connect_stream_request(end, sizeof(end), 16, &d, &n), EBADMSG);
        ASSERT_ERROR(connect_stream_request(trunc, sizeof(trunc), 16, &d, &n), EBADMSG);
        ASSERT_ERROR(connect_stream_request(one, 0, 16, &d, &n), EBADMSG);
        ASSERT_ERROR(connect_stream_request(one, sizeof(one), 1, &d, &n), EMSGSIZE);
}

TEST(envelope_head) {
        uint8_t h[CONNECT_ENVELOPE_HEAD];
        ConnectEnvelope e = {};

        ASSERT_OK(connect_envelope_head(CONNECT_FLAG_END_STREAM, 0x01020304, h));
        ASSERT_EQ(h[0], 2);
        ASSERT_EQ(h[1], 1);
        ASSERT_EQ(h[2], 2);
        ASSERT_EQ(h[3], 3);
        ASSERT_EQ(h[4], 4);
        ASSERT_EQ(connect_envelope_parse(h, sizeof(h), UINT32_MAX, &e), 0);
        ASSERT_ERROR(connect_envelope_head(0, (size_t)UINT32_MAX + 1, h), EMSGSIZE);
}

TEST(content_type) {
        ASSERT_TRUE(connect_content_type_ok("application/json", CONNECT_SHAPE_UNARY));
        ASSERT_TRUE(
                connect_content_type_ok("Application/JSON; charset=utf-8", CONNECT_SHAPE_UNARY));
        ASSERT_TRUE(connect_content_type_ok("application/connect+json", CONNECT_SHAPE_STREAM));
        ASSERT_FALSE(connect_content_type_ok("application/connect+json", CONNECT_SHAPE_UNARY));
        ASSERT_FALSE(connect_content_type_ok("application/json", CONNECT_SHAPE_STREAM));
        ASSERT_FALSE(connect_content_type_ok("application/proto", CONNECT_SHAPE_UNARY));
        ASSERT_FALSE(connect_content_type_ok("application/connect+proto", CONNECT_SHAPE_STREAM));
        ASSERT_FALSE(connect_content_type_ok("application/jsonx", CONNECT_SHAPE_UNARY));
        ASSERT_FALSE(
                connect_content_type_ok("application/json; charset=latin1", CONNECT_SHAPE_UNARY));
        ASSERT_FALSE(connect_content_type_ok(NULL, CONNECT_SHAPE_UNARY));
        ASSERT_FALSE(connect_content_type_ok("application/json", _CONNECT_SHAPE_MAX));
}

TEST(timeout) {
        uint64_t t = 7;

        ASSERT_OK(connect_timeout_parse(NULL, &t));
        ASSERT_EQ(t, 0);
        ASSERT_OK(connect_timeout_parse("60000", &t));
        ASSERT_EQ(t, 60000);
        ASSERT_OK(connect_timeout_parse("9999999999", &t));
        ASSERT_EQ(t, 9999999999ULL);
        ASSERT_ERROR(connect_timeout_parse("12345678901", &t), EINVAL);
        ASSERT_ERROR(connect_timeout_parse("", &t), EINVAL);
        ASSERT_ERROR(connect_timeout_parse("-1", &t), EINVAL);
        ASSERT_ERROR(connect_timeout_parse("1s", &t), EINVAL);
}

TEST(timestamp) {
        char b[40];

        ASSERT_OK(connect_timestamp_format(0, 0, b, sizeof(b)));
        ASSERT_STREQ(b, "1970-01-01T00:00:00Z");
        ASSERT_OK(connect_timestamp_format(1700000000, 500000000, b, sizeof(b)));
        ASSERT_STREQ(b, "2023-11-14T22:13:20.500Z");
        ASSERT_OK(connect_timestamp_format(1700000000, 1000, b, sizeof(b)));
        ASSERT_STREQ(b, "2023-11-14T22:13:20.000001Z");
        ASSERT_OK(connect_timestamp_format(1700000000, 1, b, sizeof(b)));
        ASSERT_STREQ(b, "2023-11-14T22:13:20.000000001Z");
        ASSERT_ERROR(connect_timestamp_format(1700000000, 1000000000, b, sizeof(b)), EINVAL);
        ASSERT_ERROR(connect_timestamp_format(253402300800LL, 0, b, sizeof(b)), EINVAL);
        ASSERT_ERROR(connect_timestamp_format(0, 0, b, 20), EINVAL);
}

TEST(query) {
        char *v = NULL;

        ASSERT_OK(envd_query_get("path=%2Ftmp%2Fa%20b&username=user", "path", &v));
        ASSERT_STREQ(v, "/tmp/a b");
        free(v);
        ASSERT_OK(envd_query_get("path=a+b&pathx=1", "pathx", &v));
        ASSERT_STREQ(v, "1");
        free(v);
        ASSERT_OK(envd_query_get("path=a+b", "path", &v));
        ASSERT_STREQ(v, "a b");
        free(v);
        ASSERT_OK(envd_query_get("xpath=1&pat=2", "path", &v));
        ASSERT_NULL(v);
        ASSERT_OK(envd_query_get("", "path", &v));
        ASSERT_NULL(v);
        ASSERT_OK(envd_query_get("path=", "path", &v)); /* present, empty */
        ASSERT_STREQ(v, "");
        free(v);
        ASSERT_ERROR(envd_query_get("path=%2", "path", &v), EINVAL);
        ASSERT_ERROR(envd_query_get("path=%zz", "path", &v), EINVAL);
        ASSERT_ERROR(envd_query_get("path=a%00b", "path", &v), EINVAL); /* no NUL inside */
        ASSERT_NULL(v);
}

TEST(form_boundary) {
        char *b = NULL;

        ASSERT_OK(envd_form_boundary("multipart/form-data; boundary=----x1", &b));
        ASSERT_STREQ(b, "----x1");
        free(b);
        ASSERT_OK(envd_form_boundary("multipart/form-data; boundary=\"a b\"", &b));
        ASSERT_STREQ(b, "a b");
        free(b);
        ASSERT_ERROR(envd_form_boundary("multipart/mixed; boundary=x", &b), EINVAL);
        ASSERT_ERROR(envd_form_boundary("multipart/form-data", &b), EINVAL);
        ASSERT_ERROR(envd_form_boundary("multipart/form-data; boundary=", &b), EINVAL);
}

static void parts_free(EnvdFormPart *p) {
        for (size_t i = 0; i < ENVD_FORM_PARTS_MAX; i++)
                free(p[i].filename);
        free(p);
}

TEST(form_parse) {
        static const char body[] =
                "--XB\r\n"
                "Content-Disposition: form-data; name=\"file\"; "
                "filename=\"/tmp/a%22b\"\r\n"
                "Content-Type: application/octet-stream\r\n\r\n"
                "one\r\n--XB\r\n"
                "Content-Disposition: form-data; name=\"file\"; filename=\"b\"\r\n"
                "\r\n"
                "\r\n--X\r\n--XB--\r\n";
        static const char nameless[] = "--XB\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\n"
                                       "x\r\n--XB--";
        EnvdFormPart *p = calloc(ENVD_FORM_PARTS_MAX, sizeof(*p));
        size_t n = 0;

        ASSERT_NOT_NULL(p);
        ASSERT_OK(envd_form_parse(body, sizeof(body) - 1, "XB", p, &n));
        ASSERT_EQ(n, 2);
        ASSERT_STREQ(p[0].filename, "/tmp/a\"b");
        ASSERT_EQ(p[0].len, 3);
        ASSERT_TRUE(memcmp(p[0].data, "one", 3) == 0);
        ASSERT_STREQ(p[1].filename, "b");
        ASSERT_EQ(p[1].len, 5); /* a delimiter-like line inside is data */
        ASSERT_TRUE(memcmp(p[1].data, "\r\n--X", 5) == 0);
        parts_free(p);

        /* Negative twins: no closing delimiter, no filename, no first one. */
        p = calloc(ENVD_FORM_PARTS_MAX, sizeof(*p));
        ASSERT_NOT_NULL(p);
        ASSERT_ERROR(envd_form_parse(body, sizeof(body) - 9, "XB", p, &n), EINVAL);
        parts_free(p);
        p = calloc(ENVD_FORM_PARTS_MAX, sizeof(*p));
        ASSERT_NOT_NULL(p);
        ASSERT_ERROR(envd_form_parse(nameless, sizeof(nameless) - 1, "XB", p, &n), EINVAL);
        ASSERT_ERROR(envd_form_parse("junk--XB--", 10, "XB", p, &n), EINVAL);
        parts_free(p);
}

DEFINE_TEST_MAIN
