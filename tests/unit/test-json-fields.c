/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The one field-table decoder (src/basic/json-fields.h): what decodes,
 * and, each with its error and JSON pointer, what does not. */
#include <stdint.h>
#include <string.h>

#include "json-fields.h"
#include "strv.h"
#include "test.h"

typedef struct Args {
        char **argv;
        char **env;
        const char *cwd;
        uint64_t n;
        bool flag;
        json_t *any;
} Args;

static const JsonFieldDef fields[] = {
        {"argv", JSON_FIELD_STRV, offsetof(Args, argv), true},
        {"env", JSON_FIELD_ENV, offsetof(Args, env), false},
        {"cwd", JSON_FIELD_STRING, offsetof(Args, cwd), false},
        {"n", JSON_FIELD_U64, offsetof(Args, n), false},
        {"flag", JSON_FIELD_BOOL, offsetof(Args, flag), false},
        {"any", JSON_FIELD_ANY, offsetof(Args, any), false},
};

static int decode(const char *text, Args *a, HutchError *err) {
        json_t *root = json_loads(text, 0, NULL);
        int r;

        assert_non_null(root);
        r = json_fields_decode(root, fields, ELEMENTSOF(fields), a, err);
        json_decref(root);
        return r;
}

TEST(decodes_every_type) {
        json_t *root = json_loads("{\"argv\":[\"a\",\"b\"],\"env\":{\"K\":\"V\"},\"cwd\":\"/w\","
                                  "\"n\":7,\"flag\":true,\"any\":[1]}",
                                  0, NULL);
        HutchError err = {};
        Args a = {.n = 3};

        ASSERT_NOT_NULL(root);
        ASSERT_OK(json_fields_decode(root, fields, ELEMENTSOF(fields), &a, &err));
        ASSERT_EQ(strv_length(a.argv), 2);
        ASSERT_STREQ(a.env[0], "K=V");
        ASSERT_STREQ(a.cwd, "/w");
        ASSERT_EQ(a.n, 7);
        ASSERT_TRUE(a.flag);
        ASSERT_TRUE(json_is_array(a.any));
        strv_free(a.argv);
        strv_free(a.env);
        json_decref(root);
}

TEST(null_is_absent) {
        HutchError err = {};
        Args a = {.n = 3};

        ASSERT_OK(decode("{\"argv\":[],\"n\":null}", &a, &err));
        ASSERT_EQ(a.n, 3);
        strv_free(a.argv);
}

TEST(unknown_field) {
        HutchError err = {};
        Args a = {};

        ASSERT_ERROR(decode("{\"argv\":[],\"a/b\":1}", &a, &err), EINVAL);
        ASSERT_STREQ(err.msg, "unknown field 'a/b'");
        ASSERT_STREQ(err.pointer, "/a~1b");
        ASSERT_NULL(a.argv);
}

TEST(wrong_type_names_the_element) {
        HutchError err = {};
        Args a = {};

        ASSERT_ERROR(decode("{\"argv\":[\"a\",2]}", &a, &err), EINVAL);
        ASSERT_STREQ(err.pointer, "/argv/1");
        ASSERT_NOT_NULL(strstr(err.msg, "'argv' must be an array of strings"));
        ASSERT_ERROR(decode("{\"argv\":[],\"n\":-1}", &a, &err), EINVAL);
        ASSERT_STREQ(err.pointer, "/n");
        ASSERT_NULL(a.argv);
}

TEST(missing_mandatory) {
        HutchError err = {};
        Args a = {};

        ASSERT_ERROR(decode("{\"cwd\":\"/\"}", &a, &err), EINVAL);
        ASSERT_STREQ(err.msg, "missing field 'argv'");
        ASSERT_STREQ(err.pointer, "/argv");
        ASSERT_NULL(a.cwd); /* nothing stored on failure */
}

TEST(unknown_by_name_only) {
        json_t *o = json_loads("{\"argv\":1,\"cwd\":2,\"x\":3}", 0, NULL);

        ASSERT_NOT_NULL(o);
        ASSERT_STREQ(json_fields_unknown(o, fields, ELEMENTSOF(fields)), "x");
        ASSERT_OK(json_object_del(o, "x"));
        ASSERT_NULL(json_fields_unknown(o, fields, ELEMENTSOF(fields)));
        ASSERT_NULL(json_fields_find(fields, ELEMENTSOF(fields), "nope"));
        ASSERT_STREQ(json_fields_find(fields, ELEMENTSOF(fields), "n")->name, "n");
        json_decref(o);
}

DEFINE_TEST_MAIN
