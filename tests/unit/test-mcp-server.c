/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The JSON-RPC and MCP layer of `hutch mcp` (src/cli/mcp-server.c and the
 * argument checks of mcp-tools.c), driven message by message without a
 * sandbox: nothing here may reach the store, which HUTCH_HOME points at a
 * path that must still not exist at the end. */
#include <stdlib.h>
#include <sys/stat.h>

#include "mcp.h"
#include "test.h"

#define HOME_PATH "/nonexistent/hutch-test-mcp-server"

static json_t *rpc(McpServer *s, const char *line) {
        return mcp_server_handle(s, line, strlen(line));
}

static int error_code(json_t *resp) {
        return (int)json_integer_value(json_object_get(json_object_get(resp, "error"), "code"));
}

static void server_init(McpServer *s, const char *version) {
        char line[512];
        json_t *r;

        *s = (McpServer){};
        s->name = strdup("unit");
        ASSERT_NOT_NULL(s->name);
        ASSERT_OK(setenv("HUTCH_HOME", HOME_PATH, 1));
        (void)snprintf(line, sizeof(line),
                       "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
                       "\"protocolVersion\":\"%s\",\"capabilities\":{},\"clientInfo\":{\"name\":"
                       "\"unit\",\"version\":\"0\"}}}",
                       version);
        r = rpc(s, line);
        ASSERT_NOT_NULL(json_object_get(r, "result"));
        json_decref(r);
        ASSERT_NULL(rpc(s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"));
        ASSERT_TRUE(s->initialized);
}

TEST(initialize_negotiates) {
        static const struct {
                const char *asked, *answered;
        } cases[] = {
                {"2025-06-18", "2025-06-18"},
                {"2024-11-05", "2024-11-05"},
                {"2025-11-25", "2025-11-25"},
                {"2030-01-01", "2025-11-25"},
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_(mcp_server_done) McpServer s = {};

                server_init(&s, cases[i].asked);
                ASSERT_STREQ(s.version, cases[i].answered);
        }
}

TEST(before_initialize) {
        _cleanup_(mcp_server_done) McpServer s = {};
        json_t *r;

        r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
        ASSERT_EQ(error_code(r), JSONRPC_INVALID_REQUEST);
        json_decref(r);
        r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\"}");
        ASSERT_TRUE(json_is_object(json_object_get(r, "result")));
        ASSERT_STREQ(json_string_value(json_object_get(r, "id")), "p");
        json_decref(r);
        /* Missing or mistyped initialize parameters. */
        r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\",\"params\":{"
                    "\"protocolVersion\":1,\"capabilities\":{},\"clientInfo\":{\"name\":\"x\"}}}");
        ASSERT_EQ(error_code(r), JSONRPC_INVALID_PARAMS);
        json_decref(r);
        r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\",\"params\":{"
                    "\"protocolVersion\":\"2025-06-18\",\"clientInfo\":{\"name\":\"x\"}}}");
        ASSERT_EQ(error_code(r), JSONRPC_INVALID_PARAMS);
        json_decref(r);
        ASSERT_NULL(s.version);
}

/* Every tool's schemas parse and are what tools/list shows, per version. */
TEST(tools_list_by_version) {
        static const char *const versions[] = {"2024-11-05", "2025-03-26", "2025-06-18",
                                               "2025-11-25"};

        for (size_t v = 0; v < ELEMENTSOF(versions); v++) {
                _cleanup_(mcp_server_done) McpServer s = {};
                json_t *r, *tools, *t;
                size_t i;

                server_init(&s, versions[v]);
                r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}");
                tools = json_object_get(json_object_get(r, "result"), "tools");
                /* 9, the processes, expose_port, write_stdin, the ports' 3 */
                ASSERT_EQ(json_array_size(tools), 17);
                json_array_foreach(tools, i, t) {
                        json_t *in = json_object_get(t, "inputSchema");
                        const char *key;
                        json_t *prop;

                        ASSERT_NOT_NULL(
                                mcp_tool_find(json_string_value(json_object_get(t, "name"))));
                        ASSERT_STREQ(json_string_value(json_object_get(in, "type")), "object");
                        ASSERT_TRUE(json_is_false(json_object_get(in, "additionalProperties")));
                        json_object_foreach(json_object_get(in, "properties"), key, prop)
                                ASSERT_NOT_NULL(json_string_value(json_object_get(prop, "type")));
                        ASSERT_EQ(json_object_get(t, "outputSchema") != NULL, v >= 2);
                        ASSERT_EQ(json_object_get(t, "title") != NULL, v >= 2);
                        ASSERT_EQ(json_object_get(t, "annotations") != NULL, v >= 1);
                }
                json_decref(r);
        }
}

TEST(bad_messages) {
        static const struct {
                const char *msg;
                int code;
        } cases[] = {
                {"{", JSONRPC_PARSE_ERROR},
                {"{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":1,\"method\":\"ping\"}",
                 JSONRPC_PARSE_ERROR},
                {"null", JSONRPC_INVALID_REQUEST},
                {"{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}", JSONRPC_INVALID_REQUEST},
                {"{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"ping\"}", JSONRPC_INVALID_REQUEST},
                {"{\"jsonrpc\":2,\"id\":1,\"method\":\"ping\"}", JSONRPC_INVALID_REQUEST},
                {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\\u0000\"}",
                 JSONRPC_INVALID_REQUEST},
                {"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", JSONRPC_INVALID_REQUEST},
                {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"prompts/list\"}",
                 JSONRPC_METHOD_NOT_FOUND},
                {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":[1]}",
                 JSONRPC_INVALID_PARAMS},
                {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
                 "\"rm\"}}",
                 JSONRPC_INVALID_PARAMS},
                {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
                 "\"exec\",\"arguments\":\"echo\"}}",
                 JSONRPC_INVALID_PARAMS},
        };
        _cleanup_(mcp_server_done) McpServer s = {};

        server_init(&s, "2025-06-18");
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                json_t *r = rpc(&s, cases[i].msg);

                if (error_code(r) != cases[i].code)
                        fail_msg("%s: code %d, want %d", cases[i].msg, error_code(r),
                                 cases[i].code);
                ASSERT_NOT_NULL(
                        json_string_value(json_object_get(json_object_get(r, "error"), "message")));
                json_decref(r);
        }
        /* Notifications and responses are never answered, even when bad. */
        ASSERT_NULL(rpc(&s, "{\"jsonrpc\":\"2.0\",\"method\":\"nope\"}"));
        ASSERT_NULL(rpc(&s, "{\"jsonrpc\":\"2.0\",\"method\":\"nope\",\"params\":5}"));
        ASSERT_NULL(rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{}}"));
        ASSERT_NULL(rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":9,\"error\":{\"code\":1}}"));
}

TEST(tool_argument_errors_do_not_reach_the_store) {
        static const char *const calls[] = {
                "\"exec\",\"arguments\":{}",
                "\"exec\",\"arguments\":{\"command\":[\"ls\"]}",
                "\"exec\",\"arguments\":{\"command\":\"ls\",\"timeout\":0}",
                "\"exec\",\"arguments\":{\"command\":\"ls\",\"env\":{\"A-B\":\"x\"}}",
                "\"exec\",\"arguments\":{\"command\":\"ls\",\"cwd\":\"..\"}",
                "\"read_file\",\"arguments\":{\"path\":\"../../etc/shadow\"}",
                "\"read_file\",\"arguments\":{\"path\":\"/../../etc/shadow\"}",
                "\"write_file\",\"arguments\":{\"path\":\"a\",\"content\":5}",
                "\"list_files\",\"arguments\":{\"path\":\"\"}",
                "\"snapshot\",\"arguments\":{\"name\":\"UPPER\"}",
                "\"restore\",\"arguments\":{\"name\":\"\"}",
                "\"diff\",\"arguments\":{\"all\":true}",
        };
        _cleanup_(mcp_server_done) McpServer s = {};
        struct stat st;

        server_init(&s, "2025-06-18");
        for (size_t i = 0; i < ELEMENTSOF(calls); i++) {
                char line[512];
                json_t *r, *res;

                (void)snprintf(line, sizeof(line),
                               "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\","
                               "\"params\":{\"name\":%s}}",
                               calls[i]);
                r = rpc(&s, line);
                res = json_object_get(r, "result");
                if (!json_is_true(json_object_get(res, "isError")))
                        fail_msg("%s: not a tool error", calls[i]);
                ASSERT_NULL(json_object_get(res, "structuredContent"));
                ASSERT_NOT_NULL(json_string_value(json_object_get(
                        json_array_get(json_object_get(res, "content"), 0), "text")));
                json_decref(r);
        }
        ASSERT_FALSE(s.ready);
        ASSERT_TRUE(stat(HOME_PATH, &st) < 0);
}

TEST(batches_in_2025_03_26) {
        _cleanup_(mcp_server_done) McpServer s = {};
        json_t *r;

        server_init(&s, "2025-03-26");
        r = rpc(&s, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"},"
                    "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"},5]");
        ASSERT_EQ(json_array_size(r), 2);
        ASSERT_EQ(json_integer_value(json_object_get(json_array_get(r, 0), "id")), 1);
        ASSERT_EQ(error_code(json_array_get(r, 1)), JSONRPC_INVALID_REQUEST);
        json_decref(r);
        /* Only notifications: no answer at all. */
        ASSERT_NULL(rpc(&s, "[{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}]"));
        r = rpc(&s, "[]");
        ASSERT_EQ(error_code(r), JSONRPC_INVALID_REQUEST);
        json_decref(r);
}

DEFINE_TEST_MAIN
