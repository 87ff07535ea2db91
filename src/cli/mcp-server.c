/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* JSON-RPC 2.0 and the MCP lifecycle for `hutch mcp` (mcp.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "mcp-util.h"
#include "mcp.h"
#include "utf8.h"

#ifndef HUTCH_VERSION
#define HUTCH_VERSION "0"
#endif

void mcp_server_done(McpServer *s) {
        if (!s)
                return;
        s->name = mfree(s->name);
        hutch_policy_free(s->policy);
        s->policy = NULL;
        s->from = mfree(s->from);
        s->policy_json = mfree(s->policy_json);
        s->preview_url = mfree(s->preview_url);
}

json_t *jsonrpc_error(json_t *id, int code, const char *fmt, ...) {
        char msg[1024];
        va_list ap;

        va_start(ap, fmt);
        (void)vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        /* A message quoting the client's input may not be UTF-8. */
        return json_pack("{s:s,s:O,s:{s:i,s:o}}", "jsonrpc", "2.0", "id", id ? id : json_null(),
                         "error", "code", code, "message", json_string_lossy(msg, strlen(msg)));
}

json_t *json_string_lossy(const char *s, size_t n) {
        _cleanup_free_ char *clean = NULL;
        size_t len;

        if (utf8_is_valid_n(s, n))
                return json_stringn(s, n);
        if (utf8_sanitize(s, n, &clean, &len) < 0)
                return NULL;
        return json_stringn(clean, len);
}

bool json_is_plain_string(const json_t *j) {
        return json_is_string(j) && strlen(json_string_value(j)) == json_string_length(j);
}

static json_t *jsonrpc_result(json_t *id, json_t *result) {
        if (!result)
                return jsonrpc_error(id, JSONRPC_INTERNAL_ERROR, "out of memory");
        return json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", id, "result", result);
}

/* ---- the methods ---- */

static json_t *method_initialize(McpServer *s, json_t *id, json_t *params) {
        json_t *version = json_object_get(params, "protocolVersion"),
               *caps = json_object_get(params, "capabilities"),
               *client = json_object_get(params, "clientInfo"), *result;
        char instructions[1024];

        if (s->version)
                return jsonrpc_error(id, JSONRPC_INVALID_REQUEST,
                                     "the session is initialized already (protocol version %s)",
                                     s->version);
        if (!json_is_string(version))
                return jsonrpc_error(id, JSONRPC_INVALID_PARAMS,
                                     "initialize: params.protocolVersion must be a string");
        if (!json_is_object(caps))
                return jsonrpc_error(id, JSONRPC_INVALID_PARAMS,
                                     "initialize: params.capabilities must be an object");
        if (!json_is_object(client) || !json_is_string(json_object_get(client, "name")))
                return jsonrpc_error(id, JSONRPC_INVALID_PARAMS,
                                     "initialize: params.clientInfo must be an object with a "
                                     "string 'name'");
        s->version = mcp_protocol_negotiate(json_string_value(version));
        (void)snprintf(instructions, sizeof(instructions),
                       "Every tool of this server runs inside the hutch sandbox '%s': commands "
                       "(exec), files (read_file, write_file, list_files) and the snapshot tools "
                       "act on that sandbox, never on the host directly. Relative paths are "
                       "relative to the sandbox's workspace (/workspace). In overlay mode the "
                       "host folder is not changed: 'diff' lists the sandbox's changes and the "
                       "user applies them with 'hutch apply %s'.",
                       s->name ? s->name : "", s->name ? s->name : "NAME");
        result = json_pack("{s:s,s:{s:{s:b}},s:{s:s,s:s},s:s}", "protocolVersion", s->version,
                           "capabilities", "tools", "listChanged", 0, "serverInfo", "name", "hutch",
                           "version", HUTCH_VERSION, "instructions", instructions);
        if (result && mcp_version_at_least(s->version, "2025-06-18"))
                (void)json_object_set_new(json_object_get(result, "serverInfo"), "title",
                                          json_string("hutch sandbox"));
        return jsonrpc_result(id, result);
}

static json_t *method_tools_list(McpServer *s, json_t *id, json_t *params) {
        json_t *cursor = json_object_get(params, "cursor");

        /* One page: there is no cursor to continue from. */
        if (cursor && !json_is_null(cursor))
                return jsonrpc_error(id, JSONRPC_INVALID_PARAMS,
                                     "tools/list: there is no page after the first (unknown "
                                     "cursor)");
        return jsonrpc_result(id, json_pack("{s:o}", "tools", mcp_tools_list(s)));
}

static json_t *method_tools_call(McpServer *s, json_t *id, json_t *params) {
        json_t *name = json_object_get(params, "name"),
               *args = json_object_get(params, "arguments");
        const McpTool *tool;
        json_auto_t *empty = NULL;

        if (!json_is_plain_string(name))
                return jsonrpc_error(id, JSONRPC_INVALID_PARAMS,
                                     "tools/call: params.name must be a string");
        tool = mcp_tool_find(json_string_value(name));
        if (!tool)
                return jsonrpc_error(id, JSONRPC_INVALID_PARAMS,
                                     "unknown tool '%s' (see tools/list)", json_string_value(name));
        if (args && !json_is_null(args) && !json_is_object(args))
                return jsonrpc_error(id, JSONRPC_INVALID_PARAMS,
                                     "tools/call: params.arguments must be an object");
        if (!json_is_object(args)) {
                empty = json_object();
                args = empty;
        }
        return jsonrpc_result(id, mcp_tool_call(s, tool, args));
}

static json_t *method_ping(McpServer *s, json_t *id, json_t *params) {
        return jsonrpc_result(id, json_object());
}

static const struct {
        const char *name;
        json_t *(*fn)(McpServer *s, json_t *id, json_t *params);
        bool before_initialize; /* allowed before initialize */
} methods[] = {
        {"initialize", method_initialize, true},
        {"ping", method_ping, true},
        {"tools/list", method_tools_list, false},
        {"tools/call", method_tools_call, false},
};

/* Notifications get no response, whatever happens (JSON-RPC 2.0 §4.1). */
static void handle_notification(McpServer *s, const char *method) {
        if (strcmp(method, "notifications/initialized") == 0)
                s->initialized = true;
        /* notifications/cancelled: requests are served one at a time, so
         * the one it names has been answered already. Others (progress,
         * roots/list_changed, ...) are not for this server. */
}

/* Whether @id is a valid request id: MCP wants a string or an integer. */
static bool id_is_valid(json_t *id) {
        return json_is_string(id) || json_is_integer(id);
}

static json_t *handle_one(McpServer *s, json_t *msg) {
        json_t *id, *method, *params, *version;

        if (!json_is_object(msg))
                return jsonrpc_error(NULL, JSONRPC_INVALID_REQUEST,
                                     "a message must be a JSON object");
        id = json_object_get(msg, "id");
        method = json_object_get(msg, "method");
        params = json_object_get(msg, "params");
        version = json_object_get(msg, "jsonrpc");
        /* A response to us: this server sends no requests, so it answers
         * nothing (and a response must never be answered). */
        if (!method && (json_object_get(msg, "result") || json_object_get(msg, "error")))
                return NULL;
        if (id && !id_is_valid(id))
                return jsonrpc_error(NULL, JSONRPC_INVALID_REQUEST,
                                     "'id' must be a string or an integer");
        if (!json_is_string(version) || strcmp(json_string_value(version), "2.0") != 0)
                return id ? jsonrpc_error(id, JSONRPC_INVALID_REQUEST, "'jsonrpc' must be \"2.0\"")
                          : NULL;
        if (!json_is_plain_string(method))
                return id ? jsonrpc_error(id, JSONRPC_INVALID_REQUEST, "'method' must be a string")
                          : NULL;
        if (params && !json_is_object(params))
                return id ? jsonrpc_error(id, JSONRPC_INVALID_PARAMS, "'params' must be an object")
                          : NULL;
        if (!id) {
                handle_notification(s, json_string_value(method));
                return NULL;
        }
        for (size_t i = 0; i < ELEMENTSOF(methods); i++) {
                if (strcmp(json_string_value(method), methods[i].name) != 0)
                        continue;
                if (!s->version && !methods[i].before_initialize)
                        return jsonrpc_error(id, JSONRPC_INVALID_REQUEST,
                                             "'%s' before 'initialize': initialize the session "
                                             "first",
                                             methods[i].name);
                return methods[i].fn(s, id, params);
        }
        return jsonrpc_error(id, JSONRPC_METHOD_NOT_FOUND, "unknown method '%s'",
                             json_string_value(method));
}

/* A batch (JSON-RPC 2.0 §6): only protocol revision 2025-03-26 has them
 * (2025-06-18 took them out again). */
static json_t *handle_batch(McpServer *s, json_t *batch) {
        json_t *responses, *m;
        size_t i;

        if (!s->version || strcmp(s->version, "2025-03-26") != 0)
                return jsonrpc_error(NULL, JSONRPC_INVALID_REQUEST,
                                     "batches are not part of protocol version %s",
                                     s->version ? s->version : "(none yet: initialize first)");
        if (json_array_size(batch) == 0)
                return jsonrpc_error(NULL, JSONRPC_INVALID_REQUEST, "an empty batch");
        responses = json_array();
        if (!responses)
                return NULL;
        json_array_foreach(batch, i, m) {
                json_t *r;

                /* The initialize request must not be part of a batch. */
                if (json_is_object(m) && json_is_string(json_object_get(m, "method")) &&
                    strcmp(json_string_value(json_object_get(m, "method")), "initialize") == 0)
                        r = jsonrpc_error(json_object_get(m, "id"), JSONRPC_INVALID_REQUEST,
                                          "initialize cannot be part of a batch");
                else
                        r = handle_one(s, m);
                if (r && json_array_append_new(responses, r) < 0) {
                        json_decref(responses);
                        return NULL;
                }
        }
        if (json_array_size(responses) == 0) {
                json_decref(responses);
                return NULL;
        }
        return responses;
}

json_t *mcp_server_handle(McpServer *s, const char *msg, size_t len) {
        json_auto_t *j = NULL;
        json_error_t error;

        /* Duplicate keys are refused rather than one silently winning; NULs
         * inside strings are taken and refused by the fields that cannot
         * hold them. */
        j = json_loadb(msg, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &error);
        if (!j)
                return jsonrpc_error(NULL, JSONRPC_PARSE_ERROR,
                                     "parse error at line %d column %d: %s", error.line,
                                     error.column, error.text);
        if (json_is_array(j))
                return handle_batch(s, j);
        return handle_one(s, j);
}
