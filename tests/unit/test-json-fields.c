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

/* JSON_FIELD_CUSTOM: a parse per field, called in the document's order. */
typedef struct Custom {
        char order[8]; /* the fields parsed, by their first letter */
        uint64_t size;
        char **argv;
        bool got_null;
} Custom;

static int parse_record(const JsonFieldDef *f, json_t *v, void *dest, HutchError *reterr) {
        Custom *c = dest;
        size_t n = strlen(c->order);

        if (n + 1 < sizeof(c->order))
                c->order[n] = f->name[0];
        if (json_is_null(v))
                c->got_null = true;
        return 0;
}

/* "64k" or a number; anything else names the reason, and "deep" fails
 * inside the value with an errno of its own. */
static int parse_size_text(const JsonFieldDef *f, json_t *v, void *dest, HutchError *reterr) {
        Custom *c = (Custom *)((char *)dest + f->offset);

        if (json_is_integer(v)) {
                c->size = (uint64_t)json_integer_value(v);
                return 0;
        }
        if (strcmp(json_string_value(v), "64k") == 0) {
                c->size = 65536;
                return 0;
        }
        if (strcmp(json_string_value(v), "deep") == 0) {
                (void)hutch_error_set_pointer(reterr, ERANGE, "/0/x", "too deep");
                return -ERANGE;
        }
        if (strcmp(json_string_value(v), "quiet") == 0)
                return -EPERM; /* no message: the decoder says strerror()'s */
        if (strcmp(json_string_value(v), "oom") == 0)
                return -ENOMEM;
        return hutch_error_set(reterr, EINVAL, "invalid size '%s'", json_string_value(v));
}

static const JsonFieldDef custom_fields[] = {
        {"argv", JSON_FIELD_STRV, offsetof(Custom, argv), false},
        {"a/size", JSON_FIELD_CUSTOM, 0, false, parse_size_text,
         JSON_TYPE_STRING | JSON_TYPE_INTEGER},
        {"b", JSON_FIELD_CUSTOM, 0, true, parse_record, JSON_TYPE_BOOLEAN | JSON_TYPE_NULL},
        {"c", JSON_FIELD_CUSTOM, 0, false, parse_record, JSON_TYPE_OBJECT},
};

static int decode_custom(const char *text, unsigned flags, Custom *c, HutchError *err) {
        json_t *root = json_loads(text, 0, NULL);
        int r;

        assert_non_null(root);
        r = json_fields_decode_with(root, custom_fields, ELEMENTSOF(custom_fields), c,
                                    &(JsonFieldsOptions){.flags = flags}, err);
        json_decref(root);
        return r;
}

TEST(custom_parses_in_document_order) {
        HutchError err = {};
        Custom c = {};

        ASSERT_OK(decode_custom("{\"c\":{},\"a/size\":\"64k\",\"b\":true,\"argv\":[\"x\"]}", 0, &c,
                                &err));
        ASSERT_STREQ(c.order, "cb");
        ASSERT_EQ(c.size, 65536);
        ASSERT_STREQ(c.argv[0], "x");
        c.argv = strv_free(c.argv);
        c = (Custom){};
        ASSERT_OK(decode_custom("{\"b\":false,\"c\":{},\"a/size\":7}", 0, &c, &err));
        ASSERT_STREQ(c.order, "bc");
        ASSERT_EQ(c.size, 7);
}

TEST(custom_null_is_a_value) {
        HutchError err = {};
        Custom c = {};

        /* "b" takes null: its parse sees it; "c" does not: a type error. */
        ASSERT_OK(decode_custom("{\"b\":null}", 0, &c, &err));
        ASSERT_TRUE(c.got_null);
        ASSERT_ERROR(decode_custom("{\"b\":true,\"c\":null}", 0, &c, &err), EINVAL);
        ASSERT_STREQ(err.msg, "expected an object, got null");
        ASSERT_STREQ(err.pointer, "/c");
}

TEST(custom_wrong_type) {
        HutchError err = {};
        Custom c = {};

        ASSERT_ERROR(decode_custom("{\"b\":true,\"a/size\":[1]}", 0, &c, &err), EINVAL);
        ASSERT_STREQ(err.msg, "expected a string or an integer, got an array");
        ASSERT_STREQ(err.pointer, "/a~1size");
        ASSERT_FALSE(err.at_key);
        ASSERT_ERROR(decode_custom("{\"b\":1.5}", 0, &c, &err), EINVAL);
        ASSERT_STREQ(err.msg, "expected a boolean or null, got a real number");
}

TEST(custom_errors_keep_their_own_words) {
        HutchError err = {};
        Custom c = {};

        ASSERT_ERROR(decode_custom("{\"b\":true,\"a/size\":\"lots\"}", 0, &c, &err), EINVAL);
        ASSERT_STREQ(err.msg, "invalid size 'lots'");
        ASSERT_STREQ(err.pointer, "/a~1size");
        /* The parse's own errno, and its pointer behind the member's. */
        ASSERT_ERROR(decode_custom("{\"b\":true,\"a/size\":\"deep\"}", 0, &c, &err), ERANGE);
        ASSERT_STREQ(err.msg, "too deep");
        ASSERT_STREQ(err.pointer, "/a~1size/0/x");
        ASSERT_ERROR(decode_custom("{\"a/size\":\"quiet\"}", 0, &c, &err), EPERM);
        ASSERT_STREQ(err.msg, strerror(EPERM));
        ASSERT_ERROR(decode_custom("{\"a/size\":\"oom\"}", 0, &c, &err), ENOMEM);
        ASSERT_STREQ(err.msg, "out of memory");
        ASSERT_STREQ(err.pointer, "/a~1size");
        /* NULL @reterr: the errno alone. */
        ASSERT_ERROR(decode_custom("{\"a/size\":\"deep\"}", 0, &c, NULL), ERANGE);
}

TEST(custom_first_error_in_the_document_wins) {
        HutchError err = {};
        Custom c = {};

        ASSERT_ERROR(decode_custom("{\"a/size\":\"lots\",\"zz\":1}", 0, &c, &err), EINVAL);
        ASSERT_STREQ(err.msg, "invalid size 'lots'");
        ASSERT_ERROR(decode_custom("{\"zz\":1,\"a/size\":\"lots\"}", 0, &c, &err), EINVAL);
        ASSERT_STREQ(err.msg, "unknown field 'zz'");
        ASSERT_STREQ(err.pointer, "/zz");
        ASSERT_TRUE(err.at_key);
        /* A member of a built-in type is not stored when a later custom one fails. */
        ASSERT_ERROR(
                decode_custom("{\"argv\":[\"x\"],\"b\":true,\"a/size\":\"lots\"}", 0, &c, &err),
                EINVAL);
        ASSERT_NULL(c.argv);
}

TEST(custom_missing_mandatory) {
        HutchError err = {};
        Custom c = {};

        ASSERT_ERROR(decode_custom("{\"c\":{}}", 0, &c, &err), EINVAL);
        ASSERT_STREQ(err.msg, "missing field 'b'");
        ASSERT_STREQ(err.pointer, "/b");
        ASSERT_ERROR(decode_custom("{\"c\":{}}", JSON_FIELDS_MISSING_AT_OBJECT, &c, &err), EINVAL);
        ASSERT_STREQ(err.msg, "missing field 'b'");
        ASSERT_STREQ(err.pointer, "");
        /* Checked after every member: a bad member comes first. */
        ASSERT_ERROR(decode_custom("{\"a/size\":\"lots\"}", 0, &c, &err), EINVAL);
        ASSERT_STREQ(err.msg, "invalid size 'lots'");
}

TEST(table_order_takes_the_fields_in_the_tables_order) {
        HutchError err = {};
        Custom c = {};

        ASSERT_OK(decode_custom("{\"c\":{},\"b\":true}", JSON_FIELDS_TABLE_ORDER, &c, &err));
        ASSERT_STREQ(c.order, "bc");
        c = (Custom){};
        ASSERT_OK(decode_custom("{\"c\":{},\"b\":true}", 0, &c, &err));
        ASSERT_STREQ(c.order, "cb");
        /* A missing mandatory field fails in its turn, before a later bad one. */
        ASSERT_ERROR(decode_custom("{\"c\":1}", JSON_FIELDS_TABLE_ORDER, &c, &err), EINVAL);
        ASSERT_STREQ(err.msg, "missing field 'b'");
        ASSERT_STREQ(err.pointer, "/b");
        ASSERT_ERROR(decode_custom("{\"c\":1}", 0, &c, &err), EINVAL);
        ASSERT_STREQ(err.msg, "expected an object, got an integer");
        ASSERT_STREQ(err.pointer, "/c");
        /* Unknown members first, wherever they are in the document. */
        ASSERT_ERROR(
                decode_custom("{\"a/size\":\"lots\",\"zz\":1}", JSON_FIELDS_TABLE_ORDER, &c, &err),
                EINVAL);
        ASSERT_STREQ(err.msg, "unknown field 'zz'");
        ASSERT_STREQ(err.pointer, "/zz");
        ASSERT_TRUE(err.at_key);
        /* The built-in types are checked in turn too, and stored. */
        ASSERT_ERROR(decode_custom("{\"b\":true,\"argv\":[1]}", JSON_FIELDS_TABLE_ORDER, &c, &err),
                     EINVAL);
        ASSERT_STREQ(err.pointer, "/argv/0");
        ASSERT_OK(
                decode_custom("{\"b\":true,\"argv\":[\"x\"]}", JSON_FIELDS_TABLE_ORDER, &c, &err));
        ASSERT_STREQ(c.argv[0], "x");
        c.argv = strv_free(c.argv);
}

TEST(open_leaves_unnamed_members_alone) {
        HutchError err = {};
        Custom c = {};

        ASSERT_OK(decode_custom("{\"zz\":1,\"b\":true}", JSON_FIELDS_OPEN, &c, &err));
        ASSERT_STREQ(c.order, "b");
        ASSERT_ERROR(decode_custom("{\"zz\":1,\"b\":true}", 0, &c, &err), EINVAL);
        ASSERT_STREQ(err.msg, "unknown field 'zz'");
        /* Open still checks the members it names, and their presence. */
        ASSERT_ERROR(
                decode_custom("{\"zz\":1}", JSON_FIELDS_OPEN | JSON_FIELDS_TABLE_ORDER, &c, &err),
                EINVAL);
        ASSERT_STREQ(err.msg, "missing field 'b'");
        ASSERT_ERROR(decode_custom("{\"zz\":1,\"b\":2}", JSON_FIELDS_OPEN, &c, &err), EINVAL);
        ASSERT_STREQ(err.pointer, "/b");
}

TEST(error_prefix) {
        HutchError e = {};
        char key[400];

        (void)hutch_error_set_pointer(&e, EINVAL, "/x", "bad");
        json_error_prefix_index(&e, 12);
        json_error_prefix(&e, "a~b");
        ASSERT_STREQ(e.pointer, "/a~0b/12/x");
        ASSERT_STREQ(e.msg, "bad");
        /* Too long: cut, still terminated. */
        memset(key, 'k', sizeof(key) - 1);
        key[sizeof(key) - 1] = '\0';
        json_error_prefix(&e, key);
        ASSERT_EQ(strlen(e.pointer), HUTCH_ERROR_POINTER_MAX - 1);
        ASSERT_TRUE(e.pointer[0] == '/' && e.pointer[1] == 'k');
}

TEST(type_names) {
        static const struct {
                const char *json;
                unsigned mask;
                const char *name;
        } cases[] = {
                {"{}", JSON_TYPE_OBJECT, "an object"},    {"[]", JSON_TYPE_ARRAY, "an array"},
                {"\"s\"", JSON_TYPE_STRING, "a string"},  {"1", JSON_TYPE_INTEGER, "an integer"},
                {"1.5", JSON_TYPE_REAL, "a real number"}, {"true", JSON_TYPE_BOOLEAN, "a boolean"},
                {"null", JSON_TYPE_NULL, "null"},
        };
        HutchError e = {};

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                json_t *v = json_loads(cases[i].json, JSON_DECODE_ANY, NULL);

                ASSERT_NOT_NULL(v);
                ASSERT_EQ(json_type_mask(v), cases[i].mask);
                ASSERT_STREQ(json_type_name(v), cases[i].name);
                json_decref(v);
        }
        ASSERT_ERROR(json_type_error(&e, JSON_TYPE_STRING | JSON_TYPE_OBJECT, json_null()), EINVAL);
        ASSERT_STREQ(e.msg, "expected an object or a string, got null");
        ASSERT_STREQ(e.pointer, "");
}

/* A caller's own words for the decoder's refusals (MCP's "argument"s). */
static int argument_words(JsonFieldsRefusal what, const char *key, const JsonFieldDef *f, json_t *v,
                          const void *userdata, HutchError *reterr) {
        const char *tool = userdata;

        switch (what) {
        case JSON_FIELDS_UNKNOWN:
                assert_null(f);
                return hutch_error_set(reterr, EINVAL, "%s: unknown argument '%s'", tool, key);
        case JSON_FIELDS_WRONG_TYPE:
                if (f->type != JSON_FIELD_CUSTOM)
                        return 0; /* not filled: the default words */
                return hutch_error_set(reterr, EPROTO, "%s: argument '%s' is %s", tool, key,
                                       json_type_name(v));
        case JSON_FIELDS_MISSING:
                assert_null(v);
                return hutch_error_set(reterr, EINVAL, "%s: missing argument '%s'", tool, key);
        }
        return 0;
}

TEST(message_hook_words_the_refusals) {
        const JsonFieldsOptions words = {.message = argument_words, .userdata = "exec"};
        HutchError err = {};
        Custom c = {};
        json_t *root;

        root = json_loads("{\"b\":true,\"zz\":1}", 0, NULL);
        ASSERT_ERROR(json_fields_decode_with(root, custom_fields, ELEMENTSOF(custom_fields), &c,
                                             &words, &err),
                     EINVAL);
        ASSERT_STREQ(err.msg, "exec: unknown argument 'zz'");
        ASSERT_STREQ(err.pointer, "/zz");
        ASSERT_TRUE(err.at_key);
        json_decref(root);

        root = json_loads("{\"b\":\"yes\"}", 0, NULL);
        ASSERT_ERROR(json_fields_decode_with(root, custom_fields, ELEMENTSOF(custom_fields), &c,
                                             &words, &err),
                     EPROTO);
        ASSERT_STREQ(err.msg, "exec: argument 'b' is a string");
        ASSERT_STREQ(err.pointer, "/b");
        ASSERT_FALSE(err.at_key);
        json_decref(root);

        root = json_loads("{}", 0, NULL);
        ASSERT_ERROR(json_fields_decode_with(root, custom_fields, ELEMENTSOF(custom_fields), &c,
                                             &words, &err),
                     EINVAL);
        ASSERT_STREQ(err.msg, "exec: missing argument 'b'");
        ASSERT_STREQ(err.pointer, "/b");
        json_decref(root);

        /* A hook that leaves it: the decoder's words. */
        root = json_loads("{\"b\":true,\"argv\":\"x\"}", 0, NULL);
        ASSERT_ERROR(json_fields_decode_with(root, custom_fields, ELEMENTSOF(custom_fields), &c,
                                             &words, &err),
                     EINVAL);
        ASSERT_STREQ(err.msg, "'argv' must be an array of strings (without NUL characters)");
        ASSERT_STREQ(err.pointer, "/argv");
        json_decref(root);

        /* A parse's own error is not the hook's. */
        root = json_loads("{\"b\":true,\"a/size\":\"lots\"}", 0, NULL);
        ASSERT_ERROR(json_fields_decode_with(root, custom_fields, ELEMENTSOF(custom_fields), &c,
                                             &words, &err),
                     EINVAL);
        ASSERT_STREQ(err.msg, "invalid size 'lots'");
        json_decref(root);
}

DEFINE_TEST_MAIN
