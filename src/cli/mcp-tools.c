/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The tools of `hutch mcp` and the one sandbox they act on (mcp.h).
 *
 * Each tool's arguments are decoded by one table (name, JSON type,
 * required, the field it fills, its JSON Schema) of the one field-table
 * decoder (src/basic/json-fields.h), which also makes the
 * inputSchema that tools/list shows, so the two cannot disagree. A bad
 * argument is a result with isError, as MCP asks for input validation
 * errors (the model can read it and correct itself), and is found before
 * anything touches the store. */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "api/hutch-ext.h"
#include "capture.h"
#include "fd-util.h"
#include "hutch-error.h"
#include "json-fields.h"
#include "log.h"
#include "mcp-util.h"
#include "mcp.h"
#include "strv.h"
#include "utf8.h"

/* ---- arguments ---- */

/* An argument's JSON types, as ARG() below takes them. */
#define MCP_ARG_STRING JSON_TYPE_STRING
#define MCP_ARG_NUMBER (JSON_TYPE_INTEGER | JSON_TYPE_REAL)
#define MCP_ARG_STRING_MAP JSON_TYPE_OBJECT /* an object whose values are strings */
#define MCP_ARG_BOOL JSON_TYPE_BOOLEAN

/* The decoded arguments: borrowed from the request, NULL when not given. */
typedef struct McpArgs {
        json_t *command, *cwd, *timeout, *env, *path, *content, *name;
        json_t *parents, *recursive, *to, *replace;
        json_t *detach, *id, *signal, *grace; /* the processes' tools */
        json_t *port;                         /* expose_port, the ports' tools */
        json_t *host_port, *host_ip;          /* publish_port */
        json_t *stdin_open, *input, *close;   /* exec's stdin_open, write_stdin */
        json_t *user;                         /* exec's --user */
} McpArgs;

/* Each argument is a JSON_FIELD_CUSTOM field of the one field-table decoder
 * (json-fields.h) that borrows its json_t * into McpArgs; its data is the
 * property's JSON Schema. */
typedef JsonFieldDef McpArgSpec;

struct McpTool {
        const char *name;
        const char *title;
        const char *description;
        const McpArgSpec *args;
        size_t n_args;
        const char *output_schema;
        bool read_only;   /* annotations.readOnlyHint */
        bool destructive; /* annotations.destructiveHint */
        json_t *(*run)(McpServer *s, const McpArgs *a);
};

static int arg_borrow(const JsonFieldDef *f, json_t *v, void *dest, HutchError *reterr) {
        *(json_t **)((char *)dest + f->offset) = v;
        return 0;
}

/* Any argument but write_file's content: a string is without NUL bytes. */
static int arg_plain(const JsonFieldDef *f, json_t *v, void *dest, HutchError *reterr) {
        if (json_is_string(v) && !json_is_plain_string(v))
                return hutch_error_set(reterr, EINVAL,
                                       "argument '%s' must be a string without NUL bytes", f->name);
        return arg_borrow(f, v, dest, reterr);
}

#define ARG(n, t, req, field, sch)                                                                 \
        {                                                                                          \
                .name = n, .type = JSON_FIELD_CUSTOM, .offset = offsetof(McpArgs, field),          \
                .mandatory = req, .parse = arg_plain, .json_types = t, .data = sch                 \
        }

static const McpArgSpec exec_args[] = {
        ARG("command", MCP_ARG_STRING, true, command,
            "{\"type\":\"string\",\"minLength\":1,\"description\":\"The command line, run as "
            "/bin/sh -c COMMAND inside the sandbox with stdin from /dev/null\"}"),
        ARG("cwd", MCP_ARG_STRING, false, cwd,
            "{\"type\":\"string\",\"minLength\":1,\"description\":\"Working directory: absolute "
            "inside the sandbox, or relative to the workspace (default: the workspace)\"}"),
        ARG("timeout", MCP_ARG_NUMBER, false, timeout,
            "{\"type\":\"number\",\"exclusiveMinimum\":0,\"maximum\":86400,\"description\":"
            "\"Seconds (fractions allowed) after which the command and everything it started are "
            "killed (default: the policy's --timeout, else 300)\"}"),
        ARG("env", MCP_ARG_STRING_MAP, false, env,
            "{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"},"
            "\"propertyNames\":{\"pattern\":\"^[A-Za-z_][A-Za-z0-9_]*$\"},\"maxProperties\":256,"
            "\"description\":\"Environment variables for this command only, over the "
            "sandbox's\"}"),
        ARG("detach", MCP_ARG_BOOL, false, detach,
            "{\"type\":\"boolean\",\"description\":\"Run it in the background (a server): "
            "return at once with its id, for list_processes, read_output and kill_process "
            "(no timeout unless one is given)\"}"),
        ARG("stdin_open", MCP_ARG_BOOL, false, stdin_open,
            "{\"type\":\"boolean\",\"description\":\"With detach: its stdin stays open, "
            "for write_stdin (default: /dev/null)\"}"),
        ARG("user", MCP_ARG_STRING, false, user,
            "{\"type\":\"string\",\"minLength\":1,\"description\":\"Run as this user of the "
            "sandbox's /etc/passwd: NAME, UID, NAME:GROUP or UID:GID (default: the sandbox's "
            "user; root for apt-get in an image whose user is not root)\"}"),
};

#define PROCESS_ID_SCHEMA                                                                          \
        "{\"type\":\"integer\",\"minimum\":1,\"description\":\"The process's id (exec with "       \
        "detach, or list_processes)\"}"

static const McpArgSpec read_output_args[] = {
        ARG("id", MCP_ARG_NUMBER, true, id, PROCESS_ID_SCHEMA),
};

static const McpArgSpec write_stdin_args[] = {
        ARG("id", MCP_ARG_NUMBER, true, id, PROCESS_ID_SCHEMA),
        ARG("input", MCP_ARG_STRING, false, input,
            "{\"type\":\"string\",\"description\":\"Text written to its stdin (UTF-8)\"}"),
        ARG("close", MCP_ARG_BOOL, false, close,
            "{\"type\":\"boolean\",\"description\":\"Then close its stdin: it reads the "
            "end of its input\"}"),
};

static const McpArgSpec kill_process_args[] = {
        ARG("id", MCP_ARG_NUMBER, true, id, PROCESS_ID_SCHEMA),
        ARG("signal", MCP_ARG_STRING, false, signal,
            "{\"type\":\"string\",\"description\":\"The signal sent first: TERM (the default), "
            "INT, HUP, KILL, ...\"}"),
        ARG("grace", MCP_ARG_NUMBER, false, grace,
            "{\"type\":\"number\",\"minimum\":0,\"maximum\":300,\"description\":\"Seconds "
            "after which it and everything it started are killed (SIGKILL) if it still runs "
            "(default 10)\"}"),
};

#define PATH_SCHEMA(what)                                                                          \
        "{\"type\":\"string\",\"minLength\":1,\"description\":\"" what ": absolute inside the "    \
        "sandbox, or relative to the workspace; '..' may not climb above either\"}"

static const McpArgSpec read_file_args[] = {
        ARG("path", MCP_ARG_STRING, true, path, PATH_SCHEMA("The file")),
};

#define PARENTS_ARG(what)                                                                          \
        ARG("parents", MCP_ARG_BOOL, false, parents,                                               \
            "{\"type\":\"boolean\",\"description\":\"Make the missing directories of " what        \
            " (default: false)\"}")

static const McpArgSpec write_file_args[] = {
        ARG("path", MCP_ARG_STRING, true, path,
            PATH_SCHEMA("The file (created, or replaced atomically)")),
        {.name = "content",
         .type = JSON_FIELD_CUSTOM,
         .offset = offsetof(McpArgs, content),
         .mandatory = true,
         .parse = arg_borrow, /* NUL bytes and all */
         .json_types = MCP_ARG_STRING,
         .data = "{\"type\":\"string\",\"description\":\"The file's whole new content\"}"},
        PARENTS_ARG("the path"),
};

static const McpArgSpec list_files_args[] = {
        ARG("path", MCP_ARG_STRING, false, path,
            PATH_SCHEMA("The directory (default: the workspace)")),
        ARG("recursive", MCP_ARG_BOOL, false, recursive,
            "{\"type\":\"boolean\",\"description\":\"The whole tree below it, each name a "
            "path relative to it; symlinks are listed, never followed (default: false)\"}"),
};

static const McpArgSpec make_directory_args[] = {
        ARG("path", MCP_ARG_STRING, true, path, PATH_SCHEMA("The new directory")),
        PARENTS_ARG("the path, and accept an existing directory"),
};

static const McpArgSpec move_file_args[] = {
        ARG("path", MCP_ARG_STRING, true, path, PATH_SCHEMA("The file or directory to move")),
        ARG("to", MCP_ARG_STRING, true, to, PATH_SCHEMA("Its new path")),
        ARG("replace", MCP_ARG_BOOL, false, replace,
            "{\"type\":\"boolean\",\"description\":\"Replace an existing file at 'to' "
            "(default: false, an existing one is an error)\"}"),
        PARENTS_ARG("'to'"),
};

#define SNAPSHOT_NAME_SCHEMA(what)                                                                 \
        "{\"type\":\"string\",\"pattern\":\"^[a-z0-9][a-z0-9_-]*$\",\"description\":\"" what       \
        " (kept in the store as SANDBOX.NAME)\"}"

static const McpArgSpec snapshot_args[] = {
        ARG("name", MCP_ARG_STRING, true, name, SNAPSHOT_NAME_SCHEMA("The new snapshot's name")),
};

static const McpArgSpec restore_args[] = {
        ARG("name", MCP_ARG_STRING, true, name,
            SNAPSHOT_NAME_SCHEMA("The name the snapshot was taken with")),
};

static const McpArgSpec expose_port_args[] = {
        ARG("port", MCP_ARG_NUMBER, true, port,
            "{\"type\":\"integer\",\"minimum\":1,\"maximum\":65535,\"description\":\"The "
            "TCP port a server listens on at 127.0.0.1 inside the sandbox\"}"),
};

#define PORT_INSIDE_SCHEMA(what)                                                                   \
        "{\"type\":\"integer\",\"minimum\":1,\"maximum\":65535,\"description\":\"" what "\"}"

static const McpArgSpec publish_port_args[] = {
        ARG("port", MCP_ARG_NUMBER, true, port,
            PORT_INSIDE_SCHEMA("The TCP port a server listens on (or will) at 127.0.0.1 "
                               "inside the sandbox")),
        ARG("host_port", MCP_ARG_NUMBER, false, host_port,
            "{\"type\":\"integer\",\"minimum\":0,\"maximum\":65535,\"description\":\"The "
            "port on the host (default 0: a free one, chosen each time the sandbox starts)\"}"),
        ARG("host_ip", MCP_ARG_STRING, false, host_ip,
            "{\"type\":\"string\",\"minLength\":1,\"description\":\"The host address it "
            "listens on: a loopback address, 127.0.0.0/8 or ::1 (default 127.0.0.1)\"}"),
};

static const McpArgSpec unpublish_port_args[] = {
        ARG("port", MCP_ARG_NUMBER, true, port,
            PORT_INSIDE_SCHEMA("The published port, inside the sandbox")),
};

static const char *arg_type_to_string(unsigned types) {
        if (types & JSON_TYPE_REAL)
                return "a number";
        if (types & JSON_TYPE_OBJECT)
                return "an object of strings";
        if (types & JSON_TYPE_BOOLEAN)
                return "a boolean";
        return "a string";
}

/* ---- results ---- */

static json_t *text_content(json_t *text) {
        return json_pack("[{s:s,s:o}]", "type", "text", "text", text);
}

static json_t *tool_error(const char *fmt, ...) _printf_(1, 2);
static json_t *tool_error(const char *fmt, ...) {
        char msg[1024];
        va_list ap;

        va_start(ap, fmt);
        (void)vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        return json_pack("{s:o,s:b}", "content", text_content(json_string_lossy(msg, strlen(msg))),
                         "isError", 1);
}

/* The result of a call that worked: @structured (taken) as structuredContent
 * (from 2025-06-18) and, as the text content, @text when not NULL, else
 * @structured serialized (MCP: for clients that do not read structured
 * results). */
static json_t *tool_result(const McpServer *s, json_t *structured, json_t *text) {
        json_auto_t *st = structured, *t = text;
        _cleanup_free_ char *dump = NULL;
        json_t *r;

        if (!st)
                return NULL;
        if (!t) {
                dump = json_dumps(st, JSON_COMPACT);
                if (!dump)
                        return NULL;
                t = json_string(dump);
                if (!t)
                        return NULL;
        }
        r = json_pack("{s:o,s:b}", "content", text_content(TAKE_PTR(t)), "isError", 0);
        if (r && mcp_version_at_least(s->version, "2025-06-18") &&
            json_object_set_new(r, "structuredContent", TAKE_PTR(st)) < 0) {
                json_decref(r);
                return NULL;
        }
        return r;
}

static const char *err_text(const hutch_error *e, int r) {
        return e->message[0] ? e->message : strerror(-r);
}

static int set_error(hutch_error *e, int code, const char *fmt, ...) _printf_(3, 4);
static int set_error(hutch_error *e, int code, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        (void)vsnprintf(e->message, sizeof(e->message), fmt, ap);
        va_end(ap);
        e->code = code;
        return -code;
}

/* ---- the managed sandbox ---- */

/* Reads what the tools need to know of the sandbox's policy: whether it
 * has a workspace (relative paths) and a timeout (exec's default). */
static int policy_facts(McpServer *s, const char *policy_json, hutch_error *err) {
        json_auto_t *p = json_loads(policy_json, 0, NULL);
        json_t *timeout;

        if (!json_is_object(p))
                return set_error(err, EINVAL, "the policy of sandbox '%s' is not a JSON object",
                                 s->name);
        s->has_workspace = json_object_get(p, "workspace") != NULL;
        timeout = json_object_get(json_object_get(p, "limits"), "timeout");
        s->has_timeout = timeout && !json_is_null(timeout) &&
                         !(json_is_integer(timeout) && json_integer_value(timeout) == 0) &&
                         !(json_is_string(timeout) && strcmp(json_string_value(timeout), "0") == 0);
        return 0;
}

/* Whether policy @have's published ports are @want's plus ports the agent
 * published with publish_port (saved in the policy, so a later session's
 * flags do not name them), less those it unpublished; then drops "ports"
 * from both for the comparison of the rest. SECURITY: the agent publishes
 * on loopback only, so an entry on another address ("0.0.0.0:80:80") must
 * be one the flags asked for: a sandbox opened to the network by someone
 * else is still another policy. The entries are policy_add_port()'s
 * normal form, "IP:HOSTPORT:PORT" with an IPv6 address in brackets. */
static bool ports_match(json_t *have, json_t *want) {
        json_t *h, *w;
        size_t i, j;

        json_array_foreach(json_object_get(have, "ports"), i, h) {
                const char *spec = json_string_value(h);
                bool asked = false;

                json_array_foreach(json_object_get(want, "ports"), j, w) {
                        if (json_equal(h, w))
                                asked = true;
                }
                if (!asked &&
                    !(spec && (strncmp(spec, "127.", 4) == 0 || strncmp(spec, "[::1]:", 6) == 0)))
                        return false;
        }
        (void)json_object_del(have, "ports");
        (void)json_object_del(want, "ports");
        return true;
}

/* Checks an existing sandbox against the policy wanted and learns its
 * facts. SECURITY: a sandbox made earlier with another policy (more
 * network, fewer limits) is refused, not used under the flags given now. */
static int sandbox_check(McpServer *s, bool created, hutch_error *err) {
        _cleanup_(hutch_sandbox_info_done) hutch_sandbox_info info = {};
        HutchError herr = {};
        int r;

        r = hutch_get(s->name, &info, err);
        if (r < 0)
                return r;
        if (!created && s->policy_json) {
                json_auto_t *have = json_loads(info.policy_json, 0, NULL),
                            *want = json_loads(s->policy_json, 0, NULL);
                json_t *image = want ? json_object_get(want, "image") : NULL;
                _cleanup_free_ char *digest = NULL;

                /* The sandbox recorded its image's digest (create pins
                 * it): compare with what the name given means now. */
                if (json_is_string(image) &&
                    hutch_ext_image_digest(json_string_value(image), &digest, &herr) >= 0)
                        (void)json_object_set_new(want, "image", json_string(digest));
                if (!have || !want || !ports_match(have, want) || !json_equal(have, want))
                        return set_error(err, EEXIST,
                                         "sandbox '%s' exists with another policy than the one "
                                         "'hutch mcp' was given: remove it ('hutch rm --force "
                                         "%s') or choose another one with --name",
                                         s->name, s->name);
        }
        /* As `hutch create` says it (docs/persistent.md "Disk limit"). */
        if (created && info.disk_limit_bytes == 0)
                log_warning("sandbox '%s' has no disk limit: it cannot be enforced here (see "
                            "'hutch doctor')",
                            s->name);
        return policy_facts(s, info.policy_json, err);
}

/* Creates the managed sandbox on first use, or takes the existing one. */
static int sandbox_ensure(McpServer *s, hutch_error *err) {
        _cleanup_(hutch_sandbox_info_done) hutch_sandbox_info info = {};
        bool created = false;
        int r;

        if (s->ready)
                return 0;
        r = hutch_get(s->name, &info, err);
        if (r == -ENOENT) {
                *err = (hutch_error){};
                r = hutch_create(s->name, s->policy, s->from, NULL, err);
                if (r == -EEXIST) /* another server made it meanwhile */
                        *err = (hutch_error){};
                else if (r < 0)
                        return r;
                else {
                        created = true;
                        log_info("created sandbox '%s'", s->name);
                }
        } else if (r < 0)
                return r;
        r = sandbox_check(s, created, err);
        if (r < 0)
                return r;
        s->ready = true;
        return 0;
}

/* After a failed call: if the sandbox is gone (removed behind our back),
 * the next call makes it again. */
static void sandbox_recheck(McpServer *s, int r) {
        _cleanup_(hutch_sandbox_info_done) hutch_sandbox_info info = {};
        hutch_error ignored = {};

        if (r == -ENOENT && hutch_get(s->name, &info, &ignored) == -ENOENT)
                s->ready = false;
}

/* A tool's path argument: checked, normalised, relative kept relative. */
static json_t *path_arg(const char *tool, json_t *arg, const char *dflt, char **ret) {
        const char *p = arg ? json_string_value(arg) : dflt;
        int r;

        r = mcp_path_normalize(p, NULL, ret);
        if (r == -EPERM)
                return tool_error("%s: path '%s' leaves the %s: '..' may not climb above it", tool,
                                  p, p[0] == '/' ? "sandbox's root" : "workspace");
        if (r == -ENAMETOOLONG)
                return tool_error("%s: the path is longer than 4095 bytes", tool);
        if (r == -EINVAL)
                return tool_error("%s: the path is empty", tool);
        if (r < 0)
                return tool_error("%s: %s", tool, strerror(-r));
        return NULL;
}

/* ---- exec ---- */

static json_t *exec_env(const McpArgs *a, char ***ret) {
        _cleanup_strv_free_ char **env = NULL;
        const char *key;
        json_t *v;

        if (!a->env)
                return NULL;
        if (json_object_size(a->env) > MCP_ENV_MAX)
                return tool_error("exec: at most %d variables in 'env'", MCP_ENV_MAX);
        json_object_foreach(a->env, key, v) {
                char *kv;

                if (!env_name_is_valid(key))
                        return tool_error("exec: invalid variable name '%s' in 'env' "
                                          "(expected [A-Za-z_][A-Za-z0-9_]*)",
                                          key);
                if (!json_is_plain_string(v))
                        return tool_error("exec: env.%s must be a string without NUL bytes", key);
                if (asprintf(&kv, "%s=%s", key, json_string_value(v)) < 0 ||
                    strv_push_take(&env, kv) < 0)
                        return tool_error("exec: out of memory");
        }
        *ret = TAKE_PTR(env);
        return NULL;
}

static json_t *exec_result(const McpServer *s, const hutch_outcome *o, const CapturedStream *out,
                           const CapturedStream *err) {
        json_t *r, *outcome = o->json ? json_loads(o->json, 0, NULL) : NULL;

        /* The signal is null when there was none, as in the outcome and
         * the HTTP API (docs/api.md, API 1.1). */
        r = json_pack("{s:i,s:o,s:s,s:o,s:o,s:b,s:b,s:I,s:I,s:I}", "exit_code", o->exit_code,
                      "signal", o->signal > 0 ? json_integer(o->signal) : json_null(), "reason",
                      o->reason, "stdout", json_string_lossy(out->data, out->len), "stderr",
                      json_string_lossy(err->data, err->len), "stdout_truncated", out->truncated,
                      "stderr_truncated", err->truncated, "wall_ms", (json_int_t)o->wall_ms,
                      "cpu_ms", (json_int_t)o->cpu_ms, "mem_peak_bytes",
                      (json_int_t)o->mem_peak_bytes);
        if (r && json_is_object(outcome))
                (void)json_object_set(r, "outcome", outcome);
        json_decref(outcome);
        return tool_result(s, r, NULL);
}

/* exec with detach: its id, at once. */
static json_t *exec_detached(McpServer *s, char **argv, char **env, const char *cwd,
                             uint64_t timeout_ms, bool stdin_open, const char *user) {
        hutch_exec_options opts = {
                .user = user,
                .argv = argv,
                .env = env,
                .cwd = cwd,
                .timeout_ms = timeout_ms,
                .stdin_fd = stdin_open ? HUTCH_EXEC_STDIN_KEEP : -1,
                .stdout_fd = -1,
                .stderr_fd = -1,
        };
        hutch_error herr = {};
        uint64_t id = 0;
        int r;

        r = hutch_exec_detached(s->name, &opts, &id, &herr);
        if (r < 0) {
                sandbox_recheck(s, r);
                return tool_error("exec: %s", err_text(&herr, r));
        }
        return tool_result(s, json_pack("{s:I,s:b}", "id", (json_int_t)id, "detached", 1), NULL);
}

static json_t *tool_exec(McpServer *s, const McpArgs *a) {
        _cleanup_free_ char *cwd = NULL, *abs_cwd = NULL;
        _cleanup_strv_free_ char **env = NULL;
        _cleanup_(output_capture_done) OutputCapture cap = {
                .out_fd = -EBADF,
                .err_fd = -EBADF,
                .done_fd = -EBADF,
                .out_mem = -EBADF,
                .err_mem = -EBADF,
        };
        CapturedStream out = {}, err = {};
        hutch_outcome o = {};
        hutch_error herr = {};
        uint64_t timeout_ms = 0;
        const char *command = json_string_value(a->command);
        const char *user = a->user ? json_string_value(a->user) : NULL;
        char *argv[] = {(char *)"/bin/sh", (char *)"-c", (char *)command, NULL};
        hutch_exec_options opts;
        json_t *res;
        int r, rc;

        if (!command[0])
                return tool_error("exec: 'command' is empty");
        if (a->cwd) {
                res = path_arg("exec", a->cwd, NULL, &cwd);
                if (res)
                        return res;
        }
        if (a->timeout) {
                double t = json_number_value(a->timeout);

                if (!(t > 0 && t <= MCP_TIMEOUT_MAX_S))
                        return tool_error("exec: 'timeout' must be above 0 and at most %d "
                                          "seconds",
                                          MCP_TIMEOUT_MAX_S);
                timeout_ms = MAX((uint64_t)(t * 1000.0), (uint64_t)1);
        }
        res = exec_env(a, &env);
        if (res)
                return res;

        r = sandbox_ensure(s, &herr);
        if (r < 0)
                return tool_error("exec: %s", err_text(&herr, r));
        if (cwd && cwd[0] != '/') {
                r = mcp_path_normalize(cwd, s->has_workspace ? "/workspace" : "/root", &abs_cwd);
                if (r < 0)
                        return tool_error("exec: %s", strerror(-r));
        }
        if (!timeout_ms && !s->has_timeout && !json_is_true(a->detach))
                timeout_ms = MCP_TIMEOUT_DEFAULT_S * 1000U;
        if (json_is_true(a->stdin_open) && !json_is_true(a->detach))
                return tool_error("exec: 'stdin_open' needs 'detach'");
        if (json_is_true(a->detach))
                return exec_detached(s, argv, env, abs_cwd ? abs_cwd : cwd, timeout_ms,
                                     json_is_true(a->stdin_open), user);

        r = output_capture_start(MCP_OUTPUT_MAX, &cap);
        if (r < 0)
                return tool_error("exec: cannot capture the output: %s", strerror(-r));
        opts = (hutch_exec_options){
                .argv = argv,
                .env = env,
                .cwd = abs_cwd ? abs_cwd : cwd,
                .timeout_ms = timeout_ms,
                .stdin_fd = -1,
                .stdout_fd = cap.out_fd,
                .stderr_fd = cap.err_fd,
                .user = user,
        };
        r = hutch_exec(s->name, &opts, &o, &herr);
        rc = output_capture_finish(&cap, &out, &err);
        if (r < 0) {
                sandbox_recheck(s, r);
                res = tool_error("exec: %s", err_text(&herr, r));
        } else if (rc < 0)
                res = tool_error("exec: cannot capture the output: %s", strerror(-rc));
        else
                res = exec_result(s, &o, &out, &err);
        if (r >= 0)
                hutch_outcome_done(&o);
        captured_stream_done(&out);
        captured_stream_done(&err);
        return res;
}

/* ---- files ---- */

static json_t *tool_read_file(McpServer *s, const McpArgs *a) {
        _cleanup_free_ char *path = NULL, *data = NULL;
        hutch_error herr = {};
        size_t len = 0;
        json_t *res;
        int r;

        res = path_arg("read_file", a->path, NULL, &path);
        if (res)
                return res;
        r = sandbox_ensure(s, &herr);
        if (r >= 0)
                r = hutch_file_read(s->name, path, MCP_READ_MAX, &data, &len, &herr);
        if (r == -EFBIG)
                return tool_error("read_file: '%s' is larger than %u MiB: read a part with exec "
                                  "(head, tail, sed -n)",
                                  path, MCP_READ_MAX >> 20);
        if (r < 0) {
                sandbox_recheck(s, r);
                return tool_error("read_file: %s", err_text(&herr, r));
        }
        if (!utf8_is_valid_n(data, len))
                return tool_error("read_file: '%s' is not UTF-8 text (%zu bytes): use exec, e.g. "
                                  "base64 or od",
                                  path, len);
        return tool_result(s,
                           json_pack("{s:s,s:I,s:s%}", "path", path, "size", (json_int_t)len,
                                     "content", data, len),
                           json_stringn(data, len));
}

static json_t *tool_write_file(McpServer *s, const McpArgs *a) {
        _cleanup_free_ char *path = NULL;
        hutch_error herr = {};
        size_t len = json_string_length(a->content);
        json_t *res;
        int r;

        res = path_arg("write_file", a->path, NULL, &path);
        if (res)
                return res;
        r = sandbox_ensure(s, &herr);
        if (r >= 0)
                r = hutch_file_write(s->name, path, json_string_value(a->content), len,
                                     0644 | (json_is_true(a->parents) ? HUTCH_FILE_PARENTS : 0),
                                     &herr);
        if (r < 0) {
                sandbox_recheck(s, r);
                return tool_error("write_file: %s", err_text(&herr, r));
        }
        return tool_result(s, json_pack("{s:s,s:I}", "path", path, "size", (json_int_t)len), NULL);
}

/* One entry of list_files: the HTTP API's FileInfo shape. */
static json_t *file_entry_json(const char *name, size_t name_len, const char *type, uint64_t size,
                               unsigned mode, int64_t mtime_ms) {
        char m[8];

        /* An octal string, as the HTTP API's FileInfo ("0644"). */
        (void)snprintf(m, sizeof(m), "%04o", mode & 07777U);
        return json_pack("{s:o,s:s,s:I,s:s,s:I}", "name", json_string_lossy(name, name_len), "type",
                         type, "size", (json_int_t)size, "mode", m, "mtime_ms",
                         (json_int_t)mtime_ms);
}

static json_t *list_files_walk(McpServer *s, const char *path) {
        hutch_file_entry *l = NULL;
        hutch_error herr = {};
        size_t n = 0;
        json_t *arr;
        int r;

        r = sandbox_ensure(s, &herr);
        if (r >= 0)
                r = hutch_file_walk(s->name, path, 0, &l, &n, &herr);
        if (r < 0) {
                sandbox_recheck(s, r);
                return tool_error("list_files: %s", err_text(&herr, r));
        }
        arr = json_array();
        for (size_t i = 0; arr && i < n; i++)
                if (json_array_append_new(arr, file_entry_json(l[i].path, strlen(l[i].path),
                                                               l[i].type, l[i].size, l[i].mode,
                                                               l[i].mtime_ms)) < 0) {
                        json_decref(arr);
                        arr = NULL;
                }
        hutch_file_entries_free(l, n);
        return arr ? tool_result(s, json_pack("{s:s,s:o}", "path", path, "entries", arr), NULL)
                   : NULL;
}

static json_t *tool_list_files(McpServer *s, const McpArgs *a) {
        _cleanup_free_ char *path = NULL;
        _cleanup_free_ hutch_file_info *entries = NULL;
        hutch_error herr = {};
        size_t n = 0;
        json_t *res, *arr;
        int r;

        res = path_arg("list_files", a->path, ".", &path);
        if (res)
                return res;
        if (json_is_true(a->recursive))
                return list_files_walk(s, path);
        r = sandbox_ensure(s, &herr);
        if (r >= 0)
                r = hutch_file_list(s->name, path, &entries, &n, &herr);
        if (r < 0) {
                sandbox_recheck(s, r);
                return tool_error("list_files: %s", err_text(&herr, r));
        }
        arr = json_array();
        for (size_t i = 0; arr && i < n; i++) {
                const hutch_file_info *e = &entries[i];

                if (json_array_append_new(
                            arr, file_entry_json(e->name, strnlen(e->name, sizeof(e->name)),
                                                 e->type, e->size, e->mode, e->mtime_ms)) < 0) {
                        json_decref(arr);
                        return NULL;
                }
        }
        return tool_result(s, json_pack("{s:s,s:o}", "path", path, "entries", arr), NULL);
}

static json_t *tool_make_directory(McpServer *s, const McpArgs *a) {
        _cleanup_free_ char *path = NULL;
        hutch_error herr = {};
        json_t *res;
        int r;

        res = path_arg("make_directory", a->path, NULL, &path);
        if (res)
                return res;
        r = sandbox_ensure(s, &herr);
        if (r >= 0)
                r = hutch_file_mkdir(s->name, path,
                                     0755 | (json_is_true(a->parents) ? HUTCH_FILE_PARENTS : 0),
                                     &herr);
        if (r < 0) {
                sandbox_recheck(s, r);
                return tool_error("make_directory: %s", err_text(&herr, r));
        }
        return tool_result(s, json_pack("{s:s}", "path", path), NULL);
}

static json_t *tool_move_file(McpServer *s, const McpArgs *a) {
        _cleanup_free_ char *from = NULL, *to = NULL;
        hutch_error herr = {};
        json_t *res;
        int r;

        res = path_arg("move_file", a->path, NULL, &from);
        if (!res)
                res = path_arg("move_file", a->to, NULL, &to);
        if (res)
                return res;
        r = sandbox_ensure(s, &herr);
        if (r >= 0)
                r = hutch_file_move(s->name, from, to,
                                    (json_is_true(a->replace) ? HUTCH_FILE_REPLACE : 0) |
                                            (json_is_true(a->parents) ? HUTCH_FILE_PARENTS : 0),
                                    &herr);
        if (r < 0) {
                sandbox_recheck(s, r);
                return tool_error("move_file: %s", err_text(&herr, r));
        }
        return tool_result(s, json_pack("{s:s,s:s}", "path", from, "to", to), NULL);
}

/* ---- the workspace and snapshots ---- */

static json_t *tool_diff(McpServer *s, const McpArgs *a) {
        _cleanup_free_ char *text = NULL;
        json_auto_t *changes = NULL;
        hutch_error herr = {};
        json_int_t count[3] = {};
        json_t *c;
        size_t i;
        int r;

        r = sandbox_ensure(s, &herr);
        if (r >= 0)
                r = hutch_diff_json(s->name, &text, &herr);
        if (r < 0) {
                sandbox_recheck(s, r);
                return tool_error("diff: %s", err_text(&herr, r));
        }
        changes = json_loads(text, 0, NULL);
        if (!json_is_array(changes))
                return tool_error("diff: the sandbox's changes are not a JSON array");
        json_array_foreach(changes, i, c) {
                const char *kind = json_string_value(json_object_get(c, "kind"));

                if (kind && strcmp(kind, "added") == 0)
                        count[0]++;
                else if (kind && strcmp(kind, "modified") == 0)
                        count[1]++;
                else if (kind && strcmp(kind, "deleted") == 0)
                        count[2]++;
        }
        return tool_result(s,
                           json_pack("{s:O,s:I,s:I,s:I}", "changes", changes, "added", count[0],
                                     "modified", count[1], "deleted", count[2]),
                           NULL);
}

/* The store name of the agent's snapshot @name: "<sandbox>.<name>", so
 * that the agents of different folders never see (or restore) each
 * other's snapshots. SECURITY: @name holds no '.', so the last '.' of the
 * store name is the separator and no two (sandbox, name) pairs meet:
 * "proj" restoring "v2.s2" would be sandbox "proj.v2"'s "s2" (issue 15). */
static json_t *snapshot_name(const McpServer *s, const char *tool, json_t *arg, char **ret) {
        const char *name = json_string_value(arg);
        char *full;

        if (asprintf(&full, "%s.%s", s->name, name) < 0)
                return tool_error("%s: out of memory", tool);
        if (!name[0] || name[0] == '_' || name[0] == '-' || strchr(name, '.') ||
            !hutch_ext_name_is_valid(full)) {
                size_t room = HUTCH_EXT_NAME_MAX > strlen(s->name) + 1
                                      ? HUTCH_EXT_NAME_MAX - strlen(s->name) - 1
                                      : 0;

                free(full);
                return tool_error("%s: invalid snapshot name '%s': it must match "
                                  "[a-z0-9][a-z0-9_-]* (no '.') and be at most %zu bytes long",
                                  tool, name, room);
        }
        *ret = full;
        return NULL;
}

static json_t *tool_snapshot(McpServer *s, const McpArgs *a) {
        _cleanup_free_ char *full = NULL;
        _cleanup_(hutch_sandbox_info_done) hutch_sandbox_info info = {};
        hutch_error herr = {}, ignored = {};
        bool stopped = false;
        json_t *res;
        int r;

        res = snapshot_name(s, "snapshot", a->name, &full);
        if (res)
                return res;
        r = sandbox_ensure(s, &herr);
        if (r >= 0)
                r = hutch_snapshot(s->name, full, &herr);
        if ((r == -EOPNOTSUPP || r == -EPERM) && hutch_get(s->name, &info, &ignored) >= 0 &&
            info.running) {
                /* The running sandbox refused to be frozen (an unprivileged
                 * user without a delegated cgroup has nothing to freeze it
                 * with): every exec of this server has ended, so stop it
                 * and take the snapshot of its files at rest. */
                herr = (hutch_error){};
                r = hutch_stop(s->name, &herr);
                if (r >= 0)
                        r = hutch_snapshot(s->name, full, &herr);
                stopped = r >= 0;
        }
        if (r < 0) {
                sandbox_recheck(s, r);
                return tool_error("snapshot: %s", err_text(&herr, r));
        }
        return tool_result(
                s,
                json_pack("{s:O,s:s,s:b}", "name", a->name, "snapshot", full, "stopped", stopped),
                NULL);
}

static json_t *tool_restore(McpServer *s, const McpArgs *a) {
        _cleanup_free_ char *full = NULL;
        hutch_error herr = {};
        json_t *res;
        int r;

        res = snapshot_name(s, "restore", a->name, &full);
        if (res)
                return res;
        r = sandbox_ensure(s, &herr);
        if (r >= 0)
                r = hutch_restore(s->name, full, &herr);
        if (r < 0) {
                sandbox_recheck(s, r);
                return tool_error("restore: %s", err_text(&herr, r));
        }
        return tool_result(s, json_pack("{s:O,s:s}", "name", a->name, "snapshot", full), NULL);
}

/* ---- processes (docs/processes.md) ---- */

/* The process id argument: a whole number >= 1. */
static json_t *id_arg(const char *tool, json_t *v, uint64_t *ret) {
        double d = json_number_value(v);

        if (!(d >= 1 && d <= 9007199254740991.0) || d != (double)(uint64_t)d)
                return tool_error("%s: 'id' must be a whole number of at least 1", tool);
        *ret = (uint64_t)d;
        return NULL;
}

static json_t *tool_list_processes(McpServer *s, const McpArgs *a) {
        hutch_exec_info *l = NULL;
        hutch_error herr = {};
        json_t *arr;
        size_t n = 0;
        int r;

        (void)a;
        r = hutch_exec_list(s->name, &l, &n, &herr);
        if (r < 0)
                return tool_error("list_processes: %s", err_text(&herr, r));
        arr = json_array();
        for (size_t i = 0; arr && i < n; i++) {
                json_t *argv = json_array();

                for (size_t j = 0; argv && l[i].argv[j]; j++)
                        (void)json_array_append_new(
                                argv, json_string_lossy(l[i].argv[j], strlen(l[i].argv[j])));
                (void)json_array_append_new(
                        arr, json_pack("{s:I,s:o,s:i,s:I,s:b}", "id", (json_int_t)l[i].id, "argv",
                                       argv ? argv : json_array(), "pid", l[i].pid, "start_ms",
                                       (json_int_t)l[i].start_ms, "detached", l[i].detached));
        }
        hutch_exec_list_free(l, n);
        return tool_result(s, arr ? json_pack("{s:o}", "processes", arr) : NULL, NULL);
}

/* The last @max bytes of memfd @fd; @ret_cut: bytes before them were
 * left out. NULL on failure. */
static char *memfd_tail(int fd, size_t max, size_t *ret_len, bool *ret_cut) {
        off_t size = lseek(fd, 0, SEEK_END);
        off_t from = size > (off_t)max ? size - (off_t)max : 0;
        size_t len = size > 0 ? (size_t)(size - from) : 0;
        char *buf = size >= 0 ? malloc(len + 1) : NULL;
        ssize_t n;

        if (!buf)
                return NULL;
        n = len ? pread(fd, buf, len, from) : 0;
        if (n < 0) {
                free(buf);
                return NULL;
        }
        buf[n] = '\0';
        *ret_len = (size_t)n;
        *ret_cut = from > 0;
        return buf;
}

static json_t *tool_read_output(McpServer *s, const McpArgs *a) {
        _cleanup_close_ int out_fd = -EBADF, err_fd = -EBADF;
        _cleanup_free_ char *out = NULL, *err = NULL;
        hutch_exec_info *l = NULL;
        hutch_error herr = {};
        size_t out_len = 0, err_len = 0, n = 0;
        bool out_cut = false, err_cut = false, running = false;
        hutch_outcome o = {.exit_code = -1};
        uint64_t id = 0;
        json_t *res;
        int r;

        res = id_arg("read_output", a->id, &id);
        if (res)
                return res;
        out_fd = memfd_create("hutch-output", MFD_CLOEXEC);
        err_fd = memfd_create("hutch-output", MFD_CLOEXEC);
        if (out_fd < 0 || err_fd < 0)
                return tool_error("read_output: %s", strerror(errno));
        /* Whether it runs, before its output is read: one seen ended has
         * written all it will. */
        r = hutch_exec_list(s->name, &l, &n, &herr);
        for (size_t i = 0; r >= 0 && i < n; i++)
                running = running || l[i].id == id;
        hutch_exec_list_free(l, n);
        if (r >= 0)
                r = hutch_exec_output(s->name, id, false, out_fd, err_fd, &herr);
        if (r < 0)
                return tool_error("read_output: %s", err_text(&herr, r));
        out = memfd_tail(out_fd, MCP_OUTPUT_MAX, &out_len, &out_cut);
        err = memfd_tail(err_fd, MCP_OUTPUT_MAX, &err_len, &err_cut);
        if (!out || !err)
                return tool_error("read_output: out of memory");
        if (!running && hutch_exec_wait(s->name, id, &o, &herr) < 0)
                o = (hutch_outcome){.exit_code = -1};
        res = json_pack("{s:I,s:b,s:o,s:o,s:b,s:b,s:o}", "id", (json_int_t)id, "running", running,
                        "stdout", json_string_lossy(out, out_len), "stderr",
                        json_string_lossy(err, err_len), "stdout_cut", out_cut, "stderr_cut",
                        err_cut, "exit_code",
                        running || o.exit_code < 0 ? json_null() : json_integer(o.exit_code));
        hutch_outcome_done(&o);
        return tool_result(s, res, NULL);
}

static json_t *tool_write_stdin(McpServer *s, const McpArgs *a) {
        const char *input = a->input ? json_string_value(a->input) : "";
        size_t len = a->input ? json_string_length(a->input) : 0;
        bool close_it = json_is_true(a->close);
        hutch_error herr = {};
        uint64_t id = 0;
        json_t *res;
        int r;

        res = id_arg("write_stdin", a->id, &id);
        if (res)
                return res;
        r = hutch_exec_stdin(s->name, id, input, len, close_it, &herr);
        if (r < 0)
                return tool_error("write_stdin: %s", err_text(&herr, r));
        return tool_result(s,
                           json_pack("{s:I,s:I,s:b}", "id", (json_int_t)id, "written",
                                     (json_int_t)len, "closed", close_it),
                           NULL);
}

static json_t *tool_kill_process(McpServer *s, const McpArgs *a) {
        const char *sig_name = a->signal ? json_string_value(a->signal) : "TERM";
        double grace = a->grace ? json_number_value(a->grace) : 10.0;
        hutch_outcome o = {};
        hutch_error herr = {};
        uint64_t id = 0;
        json_t *res;
        int r, sig;

        res = id_arg("kill_process", a->id, &id);
        if (res)
                return res;
        sig = hutch_ext_signal_parse(sig_name);
        if (sig < 0)
                return tool_error("kill_process: invalid signal '%s' (TERM, INT, HUP, KILL, ...)",
                                  sig_name);
        if (!(grace >= 0 && grace <= 300))
                return tool_error("kill_process: 'grace' must be 0 to 300 seconds");
        /* No grace: SIGKILL at once. */
        if (grace == 0)
                sig = SIGKILL;
        r = hutch_exec_signal(s->name, id, sig, sig == SIGKILL ? 0 : (uint64_t)(grace * 1000.0),
                              &herr);
        if (r >= 0)
                r = hutch_exec_wait(s->name, id, &o, &herr);
        if (r < 0)
                return tool_error("kill_process: %s", err_text(&herr, r));
        res = json_pack("{s:I,s:i,s:o,s:s}", "id", (json_int_t)id, "exit_code", o.exit_code,
                        "signal", o.signal > 0 ? json_integer(o.signal) : json_null(), "reason",
                        o.reason);
        hutch_outcome_done(&o);
        return tool_result(s, res, NULL);
}

/* The URL of a ports entry ({port, host_ip, host_port}) on a loopback
 * host address and a bound host port, or NULL. */
static char *entry_url(json_t *e) {
        const char *ip = json_string_value(json_object_get(e, "host_ip"));
        json_int_t hp = json_integer_value(json_object_get(e, "host_port"));
        char *url = NULL;

        if (!ip || hp <= 0 || (strcmp(ip, "::1") != 0 && strncmp(ip, "127.", 4) != 0))
                return NULL;
        if (asprintf(&url, strchr(ip, ':') ? "http://[%s]:%d/" : "http://%s:%d/", ip, (int)hp) < 0)
                return NULL;
        return url;
}

/* The URL of @port_json's entry for @port with a loopback host address,
 * or NULL. */
static char *published_url(const char *ports_json, unsigned port) {
        json_auto_t *arr = json_loads(ports_json, 0, NULL);
        json_t *e;
        size_t i;

        json_array_foreach(arr, i, e) {
                char *url;

                if (json_integer_value(json_object_get(e, "port")) != (json_int_t)port)
                        continue;
                url = entry_url(e);
                if (url)
                        return url;
        }
        return NULL;
}

/* A published port for @port on the running (started here) sandbox, for
 * its keeper's life: the existing one when there is one, else a new one
 * on 127.0.0.1 and a free port (not saved in the policy, so the sandbox
 * still matches the policy 'hutch mcp' was given). */
static int expose_published(McpServer *s, unsigned port, char **ret_url, hutch_error *err) {
        _cleanup_free_ char *json = NULL;
        char spec[32];
        HutchError e = {};
        int r = 0;

        for (int attempt = 0; r >= 0 && attempt < 2; attempt++) {
                json = mfree(json);
                if (attempt == 0)
                        r = hutch_ext_ports(s->name, NULL, NULL, &json, &e);
                else {
                        (void)snprintf(spec, sizeof(spec), "127.0.0.1:0:%u", port);
                        r = hutch_ext_ports(s->name, "add", spec, &json, &e);
                }
                if (r < 0)
                        break;
                *ret_url = published_url(json, port);
                if (*ret_url)
                        return 0;
        }
        if (r >= 0)
                return set_error(err, EIO, "port %u was published, but not on loopback", port);
        return set_error(err, -r, "%s", e.msg[0] ? e.msg : strerror(-r));
}

/* @tool's port argument @what, an integer from @min to 65535, in @ret; an
 * error result otherwise. */
static json_t *port_arg(const char *tool, const char *what, json_t *v, unsigned min,
                        unsigned *ret) {
        double d = json_number_value(v);

        if (!(d >= min && d <= 65535) || d != (double)(unsigned)d)
                return tool_error("%s: invalid %s %g (expected an integer from %u to 65535)", tool,
                                  what, d, min);
        *ret = (unsigned)d;
        return NULL;
}

static json_t *tool_expose_port(McpServer *s, const McpArgs *a) {
        _cleanup_free_ char *url = NULL;
        hutch_error herr = {};
        unsigned port = 0;
        json_t *bad;
        int r;

        bad = port_arg("expose_port", "port", a->port, 1, &port);
        if (bad)
                return bad;
        r = sandbox_ensure(s, &herr);
        if (r >= 0 && s->preview_url) {
                size_t n = strlen(s->preview_url);

                while (n > 0 && s->preview_url[n - 1] == '/')
                        n--;
                if (asprintf(&url, "%.*s/v1/sandboxes/%s/ports/%u/", (int)n, s->preview_url,
                             s->name, port) < 0)
                        return tool_error("expose_port: out of memory");
                return tool_result(
                        s,
                        json_pack("{s:i,s:s,s:s}", "port", (int)port, "url", url, "via", "preview"),
                        NULL);
        }
        if (r >= 0)
                r = expose_published(s, port, &url, &herr);
        if (r < 0) {
                sandbox_recheck(s, r);
                return tool_error("expose_port: %s", err_text(&herr, r));
        }
        return tool_result(
                s, json_pack("{s:i,s:s,s:s}", "port", (int)port, "url", url, "via", "published"),
                NULL);
}

/* publish_port's host_ip as docker's spec writes it ("[::1]" for IPv6) in
 * @buf, or an error result. SECURITY: the agent may open its sandbox to
 * the host's own processes only: an address other than loopback (0.0.0.0,
 * a LAN address) would open it to the network, which only the user's
 * flags (-p, `hutch port NAME add`) may do. */
static json_t *host_ip_arg(const char *ip, char *buf, size_t size) {
        struct in6_addr a6;
        struct in_addr a4;

        if (inet_pton(AF_INET, ip, &a4) == 1) {
                if ((ntohl(a4.s_addr) >> 24) != 127)
                        return tool_error("publish_port: host_ip '%s' is not a loopback address "
                                          "(127.0.0.0/8 or ::1): an agent publishes ports to "
                                          "the host only",
                                          ip);
                (void)snprintf(buf, size, "%s", ip);
                return NULL;
        }
        if (inet_pton(AF_INET6, ip, &a6) == 1) {
                if (!IN6_IS_ADDR_LOOPBACK(&a6))
                        return tool_error("publish_port: host_ip '%s' is not a loopback address "
                                          "(127.0.0.0/8 or ::1): an agent publishes ports to "
                                          "the host only",
                                          ip);
                (void)snprintf(buf, size, "[%s]", ip);
                return NULL;
        }
        return tool_error("publish_port: invalid host_ip '%.64s' (expected an IPv4 or IPv6 "
                          "address)",
                          ip);
}

/* The tool's result for a ports entry: the entry (taken) with its url,
 * null while no host port is bound. */
static json_t *port_entry_result(const McpServer *s, json_t *entry) {
        _cleanup_free_ char *url = entry_url(entry);

        if (!entry || json_object_set_new(entry, "url", url ? json_string(url) : json_null()) < 0) {
                json_decref(entry);
                return tool_error("publish_port: out of memory");
        }
        return tool_result(s, entry, NULL);
}

/* As POST .../ports (docs/api.md): saved in the sandbox's policy, bound
 * now when it runs, else at its next start. */
static json_t *tool_publish_port(McpServer *s, const McpArgs *a) {
        _cleanup_free_ char *json = NULL;
        char host[INET6_ADDRSTRLEN + 2] = "127.0.0.1", spec[INET6_ADDRSTRLEN + 16];
        unsigned port = 0, host_port = 0;
        hutch_error herr = {};
        json_auto_t *ports = NULL;
        json_t *bad;
        int r;

        bad = port_arg("publish_port", "port", a->port, 1, &port);
        if (!bad && a->host_port)
                bad = port_arg("publish_port", "host_port", a->host_port, 0, &host_port);
        if (!bad && a->host_ip)
                bad = host_ip_arg(json_string_value(a->host_ip), host, sizeof(host));
        if (bad)
                return bad;
        (void)snprintf(spec, sizeof(spec), "%s:%u:%u", host, host_port, port);
        r = sandbox_ensure(s, &herr);
        if (r >= 0)
                r = hutch_port_publish(s->name, spec, &json, &herr);
        if (r < 0) {
                sandbox_recheck(s, r);
                return tool_error("publish_port: %s%s", r == -EADDRINUSE ? "host_port: " : "",
                                  err_text(&herr, r));
        }
        ports = json ? json_loads(json, 0, NULL) : NULL;
        if (json_array_size(ports) == 0)
                return tool_error("publish_port: the keeper gave no entry for port %u", port);
        return port_entry_result(s, json_incref(json_array_get(ports, json_array_size(ports) - 1)));
}

/* As DELETE .../ports/{port}. */
static json_t *tool_unpublish_port(McpServer *s, const McpArgs *a) {
        hutch_error herr = {};
        unsigned port = 0;
        json_t *bad;
        int r;

        bad = port_arg("unpublish_port", "port", a->port, 1, &port);
        if (bad)
                return bad;
        r = sandbox_ensure(s, &herr);
        if (r >= 0)
                r = hutch_port_unpublish(s->name, port, &herr);
        if (r < 0) {
                sandbox_recheck(s, r);
                return tool_error("unpublish_port: %s", err_text(&herr, r));
        }
        return tool_result(s, json_pack("{s:i}", "port", (int)port), NULL);
}

/* As GET .../ports, each entry with its url. */
static json_t *tool_list_ports(McpServer *s, const McpArgs *a) {
        _cleanup_free_ char *json = NULL;
        hutch_error herr = {};
        bool running = false;
        json_t *ports, *e;
        size_t i;
        int r;

        r = sandbox_ensure(s, &herr);
        if (r >= 0)
                r = hutch_ports(s->name, &json, &running, &herr);
        if (r < 0) {
                sandbox_recheck(s, r);
                return tool_error("list_ports: %s", err_text(&herr, r));
        }
        ports = json_loads(json, 0, NULL);
        if (!json_is_array(ports)) {
                json_decref(ports);
                return tool_error("list_ports: the ports of sandbox '%s' are not a JSON array",
                                  s->name);
        }
        json_array_foreach(ports, i, e) {
                _cleanup_free_ char *url = entry_url(e);

                (void)json_object_set_new(e, "url", url ? json_string(url) : json_null());
        }
        return tool_result(s, json_pack("{s:b,s:o}", "running", running, "ports", ports), NULL);
}

/* ---- the table ---- */

static const char exec_output[] =
        "{\"type\":\"object\",\"properties\":{"
        "\"exit_code\":{\"type\":\"integer\",\"description\":\"the status; 126, 127, or 128+N "
        "for signal N\"},"
        "\"signal\":{\"type\":[\"integer\",\"null\"],\"description\":\"the terminating "
        "signal, null if none\"},"
        "\"reason\":{\"type\":\"string\",\"description\":\"exited, signaled, timeout, oom, pids "
        "or killed\"},"
        "\"stdout\":{\"type\":\"string\"},\"stderr\":{\"type\":\"string\"},"
        "\"stdout_truncated\":{\"type\":\"boolean\",\"description\":\"stdout was cut after "
        "1 MiB\"},"
        "\"stderr_truncated\":{\"type\":\"boolean\"},"
        "\"wall_ms\":{\"type\":\"integer\"},\"cpu_ms\":{\"type\":\"integer\"},"
        "\"mem_peak_bytes\":{\"type\":\"integer\"},"
        "\"outcome\":{\"type\":\"object\",\"description\":\"hutch's whole outcome record\"},"
        "\"id\":{\"type\":\"integer\",\"description\":\"detach: the process's id\"},"
        "\"detached\":{\"type\":\"boolean\"}},"
        "\"anyOf\":[{\"required\":[\"exit_code\",\"signal\",\"reason\",\"stdout\",\"stderr\","
        "\"stdout_truncated\",\"stderr_truncated\",\"wall_ms\",\"cpu_ms\",\"mem_peak_bytes\"]},"
        "{\"required\":[\"id\",\"detached\"]}]}";

static const char list_processes_output[] =
        "{\"type\":\"object\",\"properties\":{\"processes\":{\"type\":\"array\",\"items\":"
        "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},\"argv\":"
        "{\"type\":\"array\",\"items\":{\"type\":\"string\"}},\"pid\":{\"type\":\"integer\"},"
        "\"start_ms\":{\"type\":\"integer\"},\"detached\":{\"type\":\"boolean\"}},"
        "\"required\":[\"id\",\"argv\",\"pid\",\"start_ms\",\"detached\"]}}},"
        "\"required\":[\"processes\"]}";

static const char read_output_output[] =
        "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},"
        "\"running\":{\"type\":\"boolean\"},\"stdout\":{\"type\":\"string\"},"
        "\"stderr\":{\"type\":\"string\"},\"stdout_cut\":{\"type\":\"boolean\","
        "\"description\":\"only the last 1 MiB is shown\"},\"stderr_cut\":{\"type\":"
        "\"boolean\"},\"exit_code\":{\"type\":[\"integer\",\"null\"],\"description\":"
        "\"null while it runs\"}},"
        "\"required\":[\"id\",\"running\",\"stdout\",\"stderr\",\"stdout_cut\",\"stderr_cut\","
        "\"exit_code\"]}";

static const char write_stdin_output[] =
        "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},"
        "\"written\":{\"type\":\"integer\"},\"closed\":{\"type\":\"boolean\"}},"
        "\"required\":[\"id\",\"written\",\"closed\"]}";

static const char kill_process_output[] =
        "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},"
        "\"exit_code\":{\"type\":\"integer\"},\"signal\":{\"type\":[\"integer\",\"null\"]},"
        "\"reason\":{\"type\":\"string\"}},\"required\":[\"id\",\"exit_code\",\"signal\","
        "\"reason\"]}";

static const char read_file_output[] =
        "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
        "\"size\":{\"type\":\"integer\"},\"content\":{\"type\":\"string\"}},"
        "\"required\":[\"path\",\"size\",\"content\"]}";

static const char write_file_output[] =
        "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
        "\"size\":{\"type\":\"integer\"}},\"required\":[\"path\",\"size\"]}";

static const char list_files_output[] =
        "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
        "\"entries\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"
        "\"name\":{\"type\":\"string\"},"
        "\"type\":{\"type\":\"string\",\"enum\":[\"file\",\"dir\",\"symlink\",\"other\"]},"
        "\"size\":{\"type\":\"integer\"},"
        "\"mode\":{\"type\":\"string\",\"description\":\"octal permission bits, e.g. 0644\"},"
        "\"mtime_ms\":{\"type\":\"integer\"}},"
        "\"required\":[\"name\",\"type\",\"size\",\"mode\",\"mtime_ms\"]}}},"
        "\"required\":[\"path\",\"entries\"]}";

static const char make_directory_output[] =
        "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}},"
        "\"required\":[\"path\"]}";

static const char move_file_output[] =
        "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
        "\"to\":{\"type\":\"string\"}},\"required\":[\"path\",\"to\"]}";

static const char diff_output[] =
        "{\"type\":\"object\",\"properties\":{"
        "\"changes\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"
        "\"path\":{\"type\":\"string\"},"
        "\"kind\":{\"type\":\"string\",\"enum\":[\"added\",\"modified\",\"deleted\"]},"
        "\"type\":{\"type\":\"string\"}},\"required\":[\"path\",\"kind\",\"type\"]}},"
        "\"added\":{\"type\":\"integer\"},\"modified\":{\"type\":\"integer\"},"
        "\"deleted\":{\"type\":\"integer\"}},"
        "\"required\":[\"changes\",\"added\",\"modified\",\"deleted\"]}";

static const char snapshot_output[] =
        "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
        "\"snapshot\":{\"type\":\"string\",\"description\":\"its name in the store "
        "('hutch snapshot ls')\"},"
        "\"stopped\":{\"type\":\"boolean\",\"description\":\"the sandbox could not be "
        "frozen, so it was stopped first: /tmp is empty again\"}},"
        "\"required\":[\"name\",\"snapshot\",\"stopped\"]}";

static const char expose_port_output[] =
        "{\"type\":\"object\",\"properties\":{\"port\":{\"type\":\"integer\"},"
        "\"url\":{\"type\":\"string\",\"description\":\"where the port is reached from the "
        "host\"},\"via\":{\"type\":\"string\",\"enum\":[\"preview\",\"published\"],"
        "\"description\":\"preview: hutch serve's preview route (--preview-url); published: "
        "a port on the host's loopback for as long as the sandbox runs\"}},"
        "\"required\":[\"port\",\"url\",\"via\"]}";

#define PORT_ENTRY_SCHEMA                                                                          \
        "{\"type\":\"object\",\"properties\":{\"port\":{\"type\":\"integer\"},"                    \
        "\"protocol\":{\"type\":\"string\"},\"host_ip\":{\"type\":\"string\"},"                    \
        "\"host_port\":{\"type\":\"integer\",\"description\":\"0 while the sandbox is "            \
        "stopped and the port is a free one chosen at each start\"},"                              \
        "\"url\":{\"type\":[\"string\",\"null\"],\"description\":\"where the port is reached "     \
        "from the host; null while no host port is bound\"}},"                                     \
        "\"required\":[\"port\",\"protocol\",\"host_ip\",\"host_port\",\"url\"]}"

static const char publish_port_output[] = PORT_ENTRY_SCHEMA;

static const char unpublish_port_output[] =
        "{\"type\":\"object\",\"properties\":{\"port\":{\"type\":\"integer\"}},"
        "\"required\":[\"port\"]}";

static const char list_ports_output[] =
        "{\"type\":\"object\",\"properties\":{\"running\":{\"type\":\"boolean\"},"
        "\"ports\":{\"type\":\"array\",\"items\":" PORT_ENTRY_SCHEMA "}},"
        "\"required\":[\"running\",\"ports\"]}";

static const char restore_output[] =
        "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
        "\"snapshot\":{\"type\":\"string\"}},\"required\":[\"name\",\"snapshot\"]}";

#define ARGS(a) .args = a, .n_args = ELEMENTSOF(a)

static const McpTool tools[] = {
        {.name = "exec",
         .title = "Run a shell command in the sandbox",
         .description = "Runs COMMAND with /bin/sh -c inside the hutch sandbox (its files "
                        "persist between calls) and returns its stdout, stderr (each cut after "
                        "1 MiB) and outcome. A failing command is a normal result with its "
                        "exit_code; a timeout kills the command and everything it started.",
         ARGS(exec_args),
         .output_schema = exec_output,
         .destructive = true,
         .run = tool_exec},
        {.name = "read_file",
         .title = "Read a file in the sandbox",
         .description = "Returns the content of a UTF-8 text file inside the sandbox (at most "
                        "4 MiB).",
         ARGS(read_file_args),
         .output_schema = read_file_output,
         .read_only = true,
         .run = tool_read_file},
        {.name = "write_file",
         .title = "Write a file in the sandbox",
         .description = "Creates or replaces a file inside the sandbox with the content given "
                        "(atomically; an existing file keeps its mode, a new one gets 0644; "
                        "with parents, its missing directories are made).",
         ARGS(write_file_args),
         .output_schema = write_file_output,
         .destructive = true,
         .run = tool_write_file},
        {.name = "list_files",
         .title = "List a directory in the sandbox",
         .description = "Lists the entries of a directory inside the sandbox (with recursive, "
                        "its whole tree), sorted by name, with their type, size, mode and "
                        "modification time.",
         ARGS(list_files_args),
         .output_schema = list_files_output,
         .read_only = true,
         .run = tool_list_files},
        {.name = "make_directory",
         .title = "Make a directory in the sandbox",
         .description = "Makes a directory inside the sandbox (0755); with parents, its missing "
                        "parents too, and an existing directory is not an error.",
         ARGS(make_directory_args),
         .output_schema = make_directory_output,
         .run = tool_make_directory},
        {.name = "move_file",
         .title = "Move or rename a file in the sandbox",
         .description = "Renames a file or directory inside the sandbox; an existing "
                        "destination is an error unless replace is true.",
         ARGS(move_file_args),
         .output_schema = move_file_output,
         .destructive = true,
         .run = tool_move_file},
        {.name = "diff",
         .title = "The sandbox's changes to the workspace",
         .description = "Lists what the sandbox added, modified and deleted in its overlay "
                        "workspace compared with the host folder (which it never writes; the "
                        "user applies changes with 'hutch apply').",
         .output_schema = diff_output,
         .read_only = true,
         .run = tool_diff},
        {.name = "snapshot",
         .title = "Snapshot the sandbox's files",
         .description = "Freezes the sandbox's files (not its running processes) into a named "
                        "snapshot that 'restore' can go back to.",
         ARGS(snapshot_args),
         .output_schema = snapshot_output,
         .run = tool_snapshot},
        {.name = "restore",
         .title = "Restore the sandbox to a snapshot",
         .description = "Puts the sandbox's files back to a snapshot taken with 'snapshot': "
                        "every change since is discarded and running commands are stopped.",
         ARGS(restore_args),
         .output_schema = restore_output,
         .destructive = true,
         .run = tool_restore},
        {.name = "list_processes",
         .title = "List the processes running in the sandbox",
         .description = "Lists the commands running in the sandbox (those started with exec's "
                        "detach, and others running now) with their id, argv, pid and start "
                        "time.",
         .output_schema = list_processes_output,
         .read_only = true,
         .run = tool_list_processes},
        {.name = "read_output",
         .title = "Read a background process's output",
         .description = "Returns what a process started with exec's detach wrote so far (the "
                        "last 1 MiB of its stdout and of its stderr), whether it still runs, and "
                        "its exit code once it ended.",
         ARGS(read_output_args),
         .output_schema = read_output_output,
         .read_only = true,
         .run = tool_read_output},
        {.name = "write_stdin",
         .title = "Give a background process input",
         .description = "Writes text to the stdin of a process started with exec's detach and "
                        "stdin_open (a REPL, a program that asks questions); with close, then "
                        "closes it. Read what it answers with read_output.",
         ARGS(write_stdin_args),
         .output_schema = write_stdin_output,
         .run = tool_write_stdin},
        {.name = "kill_process",
         .title = "End a process in the sandbox",
         .description = "Sends the process a signal (TERM by default) and, if it still runs "
                        "after the grace (10 s by default), kills it and everything it started; "
                        "returns once it ended, with its exit code.",
         ARGS(kill_process_args),
         .output_schema = kill_process_output,
         .destructive = true,
         .run = tool_kill_process},
        {.name = "expose_port",
         .title = "Reach a server in the sandbox from the host",
         .description = "Returns a URL on the host for a TCP port a server listens on at "
                        "127.0.0.1 inside the sandbox: hutch serve's preview route when the "
                        "server was started with --preview-url, else a port published on the "
                        "host's 127.0.0.1 (a free one) while the sandbox runs.",
         ARGS(expose_port_args),
         .output_schema = expose_port_output,
         .run = tool_expose_port},
        {.name = "publish_port",
         .title = "Publish a port of the sandbox on the host",
         .description = "Publishes a TCP port a server listens on at 127.0.0.1 inside the "
                        "sandbox on the host's loopback (host_ip 127.0.0.0/8 or ::1; host_port "
                        "0, the default, a free one), as 'hutch port NAME add': saved in the "
                        "sandbox's policy, bound now when it runs, else at its next start. "
                        "Returns the entry with its url. A host port in use is refused.",
         ARGS(publish_port_args),
         .output_schema = publish_port_output,
         .run = tool_publish_port},
        {.name = "unpublish_port",
         .title = "Stop publishing a port of the sandbox",
         .description = "Stops publishing a port published with publish_port (or the "
                        "sandbox's policy), as 'hutch port NAME rm PORT': dropped from the "
                        "policy and its host listener closed.",
         ARGS(unpublish_port_args),
         .output_schema = unpublish_port_output,
         .destructive = true,
         .run = tool_unpublish_port},
        {.name = "list_ports",
         .title = "List the sandbox's published ports",
         .description = "Lists the sandbox's published ports (port inside, host_ip, host_port, "
                        "url) and whether it runs: while it runs, the host ports bound; else "
                        "its policy's entries.",
         .output_schema = list_ports_output,
         .read_only = true,
         .run = tool_list_ports},
};

const McpTool *mcp_tool_find(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(tools); i++)
                if (strcmp(tools[i].name, name) == 0)
                        return &tools[i];
        return NULL;
}

static json_t *input_schema(const McpTool *t) {
        json_t *props = json_object(), *req = json_array();

        for (size_t i = 0; props && req && i < t->n_args; i++) {
                json_t *p = json_loads(t->args[i].data, 0, NULL);

                if (!p || json_object_set_new(props, t->args[i].name, p) < 0 ||
                    (t->args[i].mandatory &&
                     json_array_append_new(req, json_string(t->args[i].name)) < 0)) {
                        json_decref(props);
                        json_decref(req);
                        return NULL;
                }
        }
        return json_pack("{s:s,s:o,s:o,s:b}", "type", "object", "properties", props, "required",
                         req, "additionalProperties", 0);
}

json_t *mcp_tools_list(const McpServer *s) {
        json_t *arr = json_array();

        for (size_t i = 0; arr && i < ELEMENTSOF(tools); i++) {
                const McpTool *t = &tools[i];
                json_t *o = json_pack("{s:s,s:s,s:o}", "name", t->name, "description",
                                      t->description, "inputSchema", input_schema(t));

                if (o && mcp_version_at_least(s->version, "2025-03-26"))
                        (void)json_object_set_new(o, "annotations",
                                                  json_pack("{s:s,s:b,s:b}", "title", t->title,
                                                            "readOnlyHint", t->read_only,
                                                            "destructiveHint", t->destructive));
                if (o && mcp_version_at_least(s->version, "2025-06-18")) {
                        (void)json_object_set_new(o, "title", json_string(t->title));
                        (void)json_object_set_new(o, "outputSchema",
                                                  json_loads(t->output_schema, 0, NULL));
                }
                if (!o || json_array_append_new(arr, o) < 0) {
                        json_decref(arr);
                        return NULL;
                }
        }
        return arr;
}

/* The decoder's refusals in MCP's words ("argument", the names it takes). */
static int args_refusal(JsonFieldsRefusal what, const char *key, const JsonFieldDef *f, json_t *v,
                        const void *userdata, HutchError *reterr) {
        const McpTool *t = userdata;
        char names[256] = "";

        switch (what) {
        case JSON_FIELDS_UNKNOWN:
                for (size_t i = 0; i < t->n_args; i++)
                        (void)snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
                                       i ? ", " : "", t->args[i].name);
                return hutch_error_set(reterr, EINVAL, "unknown argument '%s' (it takes %s)", key,
                                       t->n_args ? names : "none");
        case JSON_FIELDS_WRONG_TYPE:
                return hutch_error_set(reterr, EINVAL, "argument '%s' must be %s", key,
                                       arg_type_to_string(f->json_types));
        case JSON_FIELDS_MISSING:
                return hutch_error_set(reterr, EINVAL, "missing argument '%s'", key);
        }
        return 0;
}

/* Decodes @arguments by @t's table into @ret; an error result otherwise. */
static json_t *args_decode(const McpTool *t, json_t *arguments, McpArgs *ret) {
        const JsonFieldsOptions options = {.message = args_refusal, .userdata = t};
        HutchError e = {};
        McpArgs a = {};

        if (json_fields_decode_with(arguments, t->args, t->n_args, &a, &options, &e) < 0)
                return tool_error("%s: %s", t->name, e.msg);
        *ret = a;
        return NULL;
}

json_t *mcp_tool_call(McpServer *s, const McpTool *tool, json_t *arguments) {
        McpArgs a;
        json_t *err;

        err = args_decode(tool, arguments, &a);
        if (err)
                return err;
        return tool->run(s, &a);
}
