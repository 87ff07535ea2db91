/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The unit-test harness over cmocka. A test file defines tests with
 * TEST(name) { ... } and ends with DEFINE_TEST_MAIN; each TEST registers
 * itself from a constructor, so nothing else lists it.
 *
 * ASSERT_OK(expr): expr >= 0. ASSERT_ERROR(expr, EINVAL): expr == -EINVAL.
 * ASSERT_EQ(a, b), ASSERT_STREQ(a, b), ASSERT_TRUE(x), ASSERT_FALSE(x),
 * ASSERT_NULL(p), ASSERT_NOT_NULL(p): each prints the expression and both
 * values on failure. */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#define TEST_MAX 512

/* Filled by constructors before main() runs; read-only afterwards. */
extern struct CMUnitTest test_registry[TEST_MAX];
extern size_t test_registry_n;

#define TEST(tname)                                                                                \
        static void test_##tname(void **state);                                                    \
        __attribute__((constructor)) static void test_register_##tname(void) {                     \
                if (test_registry_n < TEST_MAX)                                                    \
                        test_registry[test_registry_n++] =                                         \
                                (struct CMUnitTest){.name = #tname, .test_func = test_##tname};    \
        }                                                                                          \
        static void test_##tname(void **state __attribute__((unused)))

#define DEFINE_TEST_MAIN                                                                           \
        struct CMUnitTest test_registry[TEST_MAX];                                                 \
        size_t test_registry_n;                                                                    \
        int main(void) {                                                                           \
                return _cmocka_run_group_tests(__FILE__, test_registry, test_registry_n, NULL,     \
                                               NULL);                                              \
        }

#define ASSERT_OK(expr)                                                                            \
        do {                                                                                       \
                long long _r_ = (long long)(expr);                                                 \
                if (_r_ < 0)                                                                       \
                        fail_msg("%s:%d: %s failed: %lld (%s)", __FILE__, __LINE__, #expr, _r_,    \
                                 strerror((int)-_r_));                                             \
        } while (0)

#define ASSERT_ERROR(expr, err)                                                                    \
        do {                                                                                       \
                long long _r_ = (long long)(expr);                                                 \
                if (_r_ != -(long long)(err))                                                      \
                        fail_msg("%s:%d: %s = %lld, expected -%s (%d)", __FILE__, __LINE__, #expr, \
                                 _r_, #err, (int)(err));                                           \
        } while (0)

#define ASSERT_EQ(a, b)                                                                            \
        do {                                                                                       \
                long long _a_ = (long long)(a), _b_ = (long long)(b);                              \
                if (_a_ != _b_)                                                                    \
                        fail_msg("%s:%d: %s == %s failed: %lld != %lld", __FILE__, __LINE__, #a,   \
                                 #b, _a_, _b_);                                                    \
        } while (0)

#define ASSERT_STREQ(a, b)                                                                         \
        do {                                                                                       \
                const char *_a_ = (a), *_b_ = (b);                                                 \
                if (!_a_ || !_b_ || strcmp(_a_, _b_) != 0)                                         \
                        fail_msg("%s:%d: %s == %s failed: \"%s\" != \"%s\"", __FILE__, __LINE__,   \
                                 #a, #b, _a_ ? _a_ : "(null)", _b_ ? _b_ : "(null)");              \
        } while (0)

#define ASSERT_TRUE(x)                                                                             \
        do {                                                                                       \
                if (!(x))                                                                          \
                        fail_msg("%s:%d: expected true: %s", __FILE__, __LINE__, #x);              \
        } while (0)

#define ASSERT_FALSE(x)                                                                            \
        do {                                                                                       \
                if (x)                                                                             \
                        fail_msg("%s:%d: expected false: %s", __FILE__, __LINE__, #x);             \
        } while (0)

#define ASSERT_NULL(p) ASSERT_TRUE((p) == NULL)
#define ASSERT_NOT_NULL(p) ASSERT_TRUE((p) != NULL)
