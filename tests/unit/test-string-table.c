/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* DEFINE_STRING_TABLE_LOOKUP (src/basic/string-table.h), both ways, and
 * the enums of the core that use it. */
#include "net/addr.h"
#include "policy/policy.h"
#include "sandbox/outcome.h"
#include "string-table.h"
#include "test.h"

typedef enum Color {
        COLOR_RED,
        COLOR_GAP, /* no name */
        COLOR_BLUE,
        _COLOR_MAX,
        _COLOR_INVALID = -EINVAL,
} Color;

static const char *const color_table[_COLOR_MAX] = {
        [COLOR_RED] = "red",
        [COLOR_BLUE] = "blue",
};

const char *color_to_string(Color c);
Color color_from_string(const char *s);
DEFINE_STRING_TABLE_LOOKUP(color, Color, color_table);

TEST(both_ways) {
        for (Color c = 0; c < _COLOR_MAX; c++) {
                const char *s = color_to_string(c);

                if (c == COLOR_GAP)
                        ASSERT_NULL(s);
                else
                        ASSERT_EQ(color_from_string(s), c);
        }
}

TEST(out_of_range_and_unknown) {
        ASSERT_NULL(color_to_string(_COLOR_MAX));
        ASSERT_NULL(color_to_string(_COLOR_INVALID));
        ASSERT_EQ(color_from_string("green"), _COLOR_INVALID);
        ASSERT_EQ(color_from_string(""), _COLOR_INVALID);
        ASSERT_EQ(color_from_string(NULL), _COLOR_INVALID);
        ASSERT_EQ(color_from_string("RED"), _COLOR_INVALID); /* exact, case and all */
}

TEST(core_enums_round_trip) {
        for (int i = 0; i < _WORKSPACE_MODE_MAX; i++)
                ASSERT_EQ(workspace_mode_from_string(workspace_mode_to_string(i)), i);
        for (int i = 0; i < _NETWORK_MODE_MAX; i++)
                ASSERT_EQ(network_mode_from_string(network_mode_to_string(i)), i);
        for (int i = 0; i < _OUTCOME_REASON_MAX; i++)
                ASSERT_EQ(outcome_reason_from_string(outcome_reason_to_string(i)), i);
        for (int i = 0; i < _NET_ADDR_CLASS_MAX; i++)
                ASSERT_EQ(net_addr_class_from_string(net_addr_class_to_string(i)), i);
        ASSERT_EQ(sandbox_backend_from_string("nope"), -EINVAL);
}

DEFINE_TEST_MAIN
