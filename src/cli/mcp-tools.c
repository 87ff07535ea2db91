/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The tools of `hutch mcp` and the one sandbox they act on (mcp.h).
 *
 * Each tool's arguments are decoded by one table (name, JSON type,
 * required, the field it fills, its JSON Schema), which also makes the
 * inputSchema that tools/list shows, so the two cannot disagree. A bad
 * argument is a result with isError, as MCP asks for input validation
 * errors (the model can read it and correct itself), and is found before
 * anything touches the store. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "api/persist.h"
#include "capture.h"
#include "hutch-error.h"
#include "log.h"
#include "mcp-util.h"
#include "mcp.h"
#include "store/store.h"
#include "strv.h"
#include "utf8.h"

/* ---- arguments ---- */

typedef enum McpArgType {
        MCP_ARG_STRING,
        MCP_ARG_NUMBER,
        MCP_ARG_STRING_MAP, /* an object whose values are strings */
        _MCP_ARG_TYPE_MAX,
        _MCP_ARG_TYPE_INVALID = -EINVAL,
} McpArgType;

/* The decoded arguments: borrowed from the request, NULL when not given. */
typedef struct McpArgs {
        json_t *command, *cwd, *timeout, *env, *path, *content, *name;
} McpArgs;

typedef struct McpArgSpec {
        const char *name;
        McpArgType type;
        bool required;
        bool nul_ok;        /* a string that may hold NUL bytes */
        size_t offset;      /* of its json_t * in McpArgs */
        const char *schema; /* the property's JSON Schema */
} McpArgSpec;

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

#define ARG(n, t, req, field, sch)                                                                 \
        { .name = n, .type = t, .required = req, .offset = offsetof(McpArgs, field), .schema = sch }

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
};

#define PATH_SCHEMA(what)                                                                          \
        "{\"type\":\"string\",\"minLength\":1,\"description\":\"" what ": absolute inside the "    \
        "sandbox, or relative to the workspace; '..' may not climb above either\"}"

static const McpArgSpec read_file_args[] = {
        ARG("path", MCP_ARG_STRING, true, path, PATH_SCHEMA("The file")),
};

static const McpArgSpec write_file_args[] = {
        ARG("path", MCP_ARG_STRING, true, path,
            PATH_SCHEMA("The file (created, or replaced atomically; its directory must exist)")),
        {.name = "content",
         .type = MCP_ARG_STRING,
         .required = true,
         .nul_ok = true,
         .offset = offsetof(McpArgs, content),
         .schema = "{\"type\":\"string\",\"description\":\"The file's whole new content\"}"},
};

static const McpArgSpec list_files_args[] = {
        ARG("path", MCP_ARG_STRING, false, path,
            PATH_SCHEMA("The directory (default: the workspace)")),
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

static const char *arg_type_to_string(McpArgType t) {
        switch (t) {
        case MCP_ARG_STRING:
                return "a string";
        case MCP_ARG_NUMBER:
                return "a number";
        case MCP_ARG_STRING_MAP:
                return "an object of strings";
        case _MCP_ARG_TYPE_MAX:
        case _MCP_ARG_TYPE_INVALID:
                break;
        }
        return NULL;
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

/* Checks an existing sandbox against the policy wanted and learns its
 * facts. SECURITY: a sandbox made earlier with another policy (more
 * network, fewer limits) is refused, not used under the flags given now. */
static int sandbox_check(McpServer *s, bool created, hutch_error *err) {
        _cleanup_(store_freep) Store *store = NULL;
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        HutchError herr = {};
        int r;

        r = store_open(&store, &herr);
        if (r >= 0)
                r = store_sandbox_load(store, s->name, &rec, &herr);
        if (r < 0)
                return set_error(err, -r, "%s", herr.msg[0] ? herr.msg : strerror(-r));
        if (!created && s->policy_json) {
                json_auto_t *have = json_loads(rec->policy_json, 0, NULL),
                            *want = json_loads(s->policy_json, 0, NULL);
                json_t *image = want ? json_object_get(want, "image") : NULL;
                _cleanup_free_ char *digest = NULL;

                /* The sandbox recorded its image's digest (create pins
                 * it): compare with what the name given means now. */
                if (json_is_string(image) &&
                    persist_image_digest(store, json_string_value(image), &digest, &herr) >= 0)
                        (void)json_object_set_new(want, "image", json_string(digest));
                if (!have || !want || !json_equal(have, want))
                        return set_error(err, EEXIST,
                                         "sandbox '%s' exists with another policy than the one "
                                         "'hutch mcp' was given: remove it ('hutch rm --force "
                                         "%s') or choose another one with --name",
                                         s->name, s->name);
        }
        /* As `hutch create` says it (docs/persistent.md "Disk limit"). */
        if (created && rec->disk_limit == 0)
                log_warning("sandbox '%s' has no disk limit: it cannot be enforced here (see "
                            "'hutch doctor')",
                            s->name);
        return policy_facts(s, rec->policy_json, err);
}

/* Creates the managed sandbox on first use, or takes the existing one. */
static int sandbox_ensure(McpServer *s, hutch_error *err) {
        hutch_sandbox_info info;
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
        hutch_sandbox_info info;
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
        if (!timeout_ms && !s->has_timeout)
                timeout_ms = MCP_TIMEOUT_DEFAULT_S * 1000U;

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
                r = hutch_file_write(s->name, path, json_string_value(a->content), len, 0644,
                                     &herr);
        if (r < 0) {
                sandbox_recheck(s, r);
                return tool_error("write_file: %s", err_text(&herr, r));
        }
        return tool_result(s, json_pack("{s:s,s:I}", "path", path, "size", (json_int_t)len), NULL);
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
                size_t nlen = strnlen(e->name, sizeof(e->name));
                char mode[8];

                /* An octal string, as the HTTP API's FileInfo ("0644"). */
                (void)snprintf(mode, sizeof(mode), "%04o", e->mode & 07777U);
                if (json_array_append_new(arr, json_pack("{s:o,s:s,s:I,s:s,s:I}", "name",
                                                         json_string_lossy(e->name, nlen), "type",
                                                         e->type, "size", (json_int_t)e->size,
                                                         "mode", mode, "mtime_ms",
                                                         (json_int_t)e->mtime_ms)) < 0) {
                        json_decref(arr);
                        return NULL;
                }
        }
        return tool_result(s, json_pack("{s:s,s:o}", "path", path, "entries", arr), NULL);
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
            !store_name_is_valid(full)) {
                size_t room = STORE_NAME_MAX > strlen(s->name) + 1
                                      ? STORE_NAME_MAX - strlen(s->name) - 1
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
        hutch_sandbox_info info;
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
        if (r == -EPERM && hutch_get(s->name, &info, &ignored) >= 0 && info.running) {
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
        "\"outcome\":{\"type\":\"object\",\"description\":\"hutch's whole outcome record\"}},"
        "\"required\":[\"exit_code\",\"signal\",\"reason\",\"stdout\",\"stderr\","
        "\"stdout_truncated\",\"stderr_truncated\",\"wall_ms\",\"cpu_ms\",\"mem_peak_bytes\"]}";

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
                        "(atomically; an existing file keeps its mode, a new one gets 0644).",
         ARGS(write_file_args),
         .output_schema = write_file_output,
         .destructive = true,
         .run = tool_write_file},
        {.name = "list_files",
         .title = "List a directory in the sandbox",
         .description = "Lists the entries of a directory inside the sandbox, sorted by name, "
                        "with their type, size, mode and modification time.",
         ARGS(list_files_args),
         .output_schema = list_files_output,
         .read_only = true,
         .run = tool_list_files},
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
                json_t *p = json_loads(t->args[i].schema, 0, NULL);

                if (!p || json_object_set_new(props, t->args[i].name, p) < 0 ||
                    (t->args[i].required &&
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

/* Decodes @arguments by @t's table into @ret; an error result otherwise. */
static json_t *args_decode(const McpTool *t, json_t *arguments, McpArgs *ret) {
        McpArgs a = {};
        const char *key;
        json_t *v;

        json_object_foreach(arguments, key, v) {
                const McpArgSpec *spec = NULL;
                bool ok;

                for (size_t i = 0; i < t->n_args && !spec; i++)
                        if (strcmp(t->args[i].name, key) == 0)
                                spec = &t->args[i];
                if (!spec) {
                        char names[256] = "";

                        for (size_t i = 0; i < t->n_args; i++)
                                (void)snprintf(names + strlen(names), sizeof(names) - strlen(names),
                                               "%s%s", i ? ", " : "", t->args[i].name);
                        return tool_error("%s: unknown argument '%s' (it takes %s)", t->name, key,
                                          t->n_args ? names : "none");
                }
                switch (spec->type) {
                case MCP_ARG_STRING:
                        ok = spec->nul_ok ? json_is_string(v) : json_is_plain_string(v);
                        break;
                case MCP_ARG_NUMBER:
                        ok = json_is_number(v);
                        break;
                case MCP_ARG_STRING_MAP:
                        ok = json_is_object(v);
                        break;
                case _MCP_ARG_TYPE_MAX:
                case _MCP_ARG_TYPE_INVALID:
                default:
                        ok = false;
                        break;
                }
                if (!ok)
                        return tool_error("%s: argument '%s' must be %s%s", t->name, key,
                                          arg_type_to_string(spec->type),
                                          spec->type == MCP_ARG_STRING && !spec->nul_ok &&
                                                          json_is_string(v)
                                                  ? " without NUL bytes"
                                                  : "");
                *(json_t **)((char *)&a + spec->offset) = v;
        }
        for (size_t i = 0; i < t->n_args; i++)
                if (t->args[i].required && !*(json_t **)((char *)&a + t->args[i].offset))
                        return tool_error("%s: missing argument '%s'", t->name, t->args[i].name);
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
