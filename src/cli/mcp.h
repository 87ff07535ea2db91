/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* `hutch mcp`: a Model Context Protocol server over stdio (docs/mcp.md).
 *
 * mcp.c        the verb: flags, the stdio loop (one JSON-RPC message a line)
 * mcp-server.c JSON-RPC 2.0 and the MCP lifecycle: initialize (version
 *              negotiation), ping, tools/list, tools/call; error codes
 * mcp-tools.c  the tools, their JSON Schemas and the managed sandbox
 * mcp-util.c   pure helpers (versions, the default name, paths)
 *
 * The server is one thread serving one request at a time; a tool call
 * blocks it until the call is done. */

#include <stdbool.h>

#include <jansson.h>

#include "hutch.h"
#include "macro.h"

/* Caps: a message (one line) and a tool's bounded outputs. */
#define MCP_MESSAGE_MAX (16U << 20)
#define MCP_OUTPUT_MAX (1U << 20) /* exec: per stream */
#define MCP_READ_MAX (4U << 20)   /* read_file */
#define MCP_ENV_MAX 256           /* exec: variables */
#define MCP_TIMEOUT_MAX_S 86400   /* exec: 24 hours */
#define MCP_TIMEOUT_DEFAULT_S 300 /* exec, when neither the call nor the policy sets one */

/* JSON-RPC 2.0 error codes. */
#define JSONRPC_PARSE_ERROR -32700
#define JSONRPC_INVALID_REQUEST -32600
#define JSONRPC_METHOD_NOT_FOUND -32601
#define JSONRPC_INVALID_PARAMS -32602
#define JSONRPC_INTERNAL_ERROR -32603

typedef struct McpServer {
        /* The managed sandbox (filled by the verb; mcp-tools.c uses them). */
        char *name;
        hutch_policy *policy; /* the policy to create it with; NULL: --from's */
        char *from;           /* create it from this snapshot, or NULL */
        char *policy_json;    /* an existing sandbox must have this policy; NULL: any */
        bool ready;           /* it exists (with the policy wanted) */
        bool has_workspace;   /* its policy has a workspace (else relative is $HOME) */
        bool has_timeout;     /* its policy sets a timeout */
        char *preview_url;    /* --preview-url: hutch serve's base URL, or NULL */

        /* The session. */
        const char *version; /* the negotiated protocol version; NULL before initialize */
        bool initialized;    /* notifications/initialized came */
} McpServer;

void mcp_server_done(McpServer *s);

/* Handles one message (a line without its newline) and returns the
 * response to send, or NULL when there is none (a notification, or a
 * response from the client). Never fails: out of memory is an internal
 * error response, or NULL when even that cannot be made. */
json_t *mcp_server_handle(McpServer *s, const char *msg, size_t len);

/* A JSON-RPC error response; @id may be NULL (null). */
json_t *jsonrpc_error(json_t *id, int code, const char *fmt, ...) _printf_(3, 4);

/* A JSON string of the @n bytes at @s, invalid UTF-8 replaced by U+FFFD;
 * NULL on out of memory. */
json_t *json_string_lossy(const char *s, size_t n);

/* A string without NUL bytes (messages are parsed with JSON_ALLOW_NUL). */
bool json_is_plain_string(const json_t *j);

/* ---- mcp-tools.c ---- */

typedef struct McpTool McpTool;

const McpTool *mcp_tool_find(const char *name);

/* The tools/list array for the negotiated version (title and outputSchema
 * from 2025-06-18, annotations from 2025-03-26). */
json_t *mcp_tools_list(const McpServer *s);

/* Runs @tool with @arguments (an object) and returns the CallToolResult;
 * invalid arguments and failures are results with isError. NULL only on
 * out of memory. */
json_t *mcp_tool_call(McpServer *s, const McpTool *tool, json_t *arguments);
