/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch mcp: the Model Context Protocol server over stdio (docs/mcp.md). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "api/hutch-ext.h"
#include "cli.h"
#include "fd-util.h"
#include "log.h"
#include "mcp-util.h"
#include "mcp.h"
#include "run-flags.h"
#include "strv.h"

#define MCP_READ_CHUNK 65536

static void mcp_usage(FILE *f) {
        (void)fprintf(f,
                      "usage: hutch mcp [--name NAME] [--preview-url URL] [POLICY FLAGS]\n\n"
                      "Serves the Model Context Protocol on stdin and stdout (JSON-RPC 2.0, one "
                      "message a line;\nlogs go to stderr) with the tools exec, read_file, "
                      "write_file, list_files, diff,\nsnapshot, restore and expose_port. They all "
                      "act on one persistent sandbox, created on first use:\n"
                      "  --name NAME   the sandbox (default mcp-<folder>-<hash of its path>, "
                      "for the workspace folder);\n"
                      "                an existing one is used as it is when no policy flag is "
                      "given\n"
                      "  --preview-url URL  hutch serve's base URL: expose_port answers with its "
                      "preview route\n"
                      "                (else it publishes a port on the host's 127.0.0.1)\n"
                      "The policy flags are those of 'hutch create' (see 'hutch run --help'), "
                      "with --from;\nwithout --workspace the current directory is the "
                      "workspace, in overlay mode.\nSee docs/mcp.md for the client "
                      "configuration.\n");
}

/* Takes "@opt VALUE" / "@opt=VALUE" out of @argv (before any "--"). */
static int mcp_take_opt(int *argc, char **argv, const char *opt, const char **ret) {
        size_t len = strlen(opt);

        for (int i = 1; i < *argc; i++) {
                int n;

                if (strcmp(argv[i], "--") == 0)
                        break;
                if (strcmp(argv[i], opt) == 0) {
                        if (i + 1 >= *argc)
                                return -EINVAL;
                        *ret = argv[i + 1];
                        n = 2;
                } else if (strncmp(argv[i], opt, len) == 0 && argv[i][len] == '=') {
                        *ret = argv[i] + len + 1;
                        n = 1;
                } else
                        continue;
                memmove(argv + i, argv + i + n, sizeof(char *) * (size_t)(*argc - i - n + 1));
                *argc -= n;
                i--;
        }
        return 0;
}

/* The hutch_policy of the flags, with @cwd as an overlay workspace when
 * they name none; its JSON goes to @ret_json. */
static int mcp_policy(const RunArgs *args, const char *cwd, hutch_policy **ret, char **ret_json) {
        _cleanup_free_ char *json = NULL, *ws = NULL;
        hutch_policy *p;
        hutch_error err = {};
        HutchExtPolicyView view;
        int r;

        hutch_ext_policy_view(args->policy, &view);
        r = hutch_ext_policy_to_json(args->policy, &json);
        if (r < 0) {
                log_error("cannot use this policy: %s",
                          r == -EILSEQ ? "a path or value is not valid UTF-8" : strerror(-r));
                return r;
        }
        p = hutch_policy_new();
        if (!p)
                return log_error_errno(-ENOMEM, "out of memory");
        r = hutch_policy_load_json(p, json, &err);
        if (r >= 0 && !view.workspace) {
                if (asprintf(&ws, "%s:overlay", cwd) < 0)
                        r = -ENOMEM;
                else
                        r = hutch_policy_set_workspace(p, ws, &err);
        }
        if (r >= 0)
                r = hutch_policy_validate(p, &err);
        if (r >= 0)
                r = hutch_policy_to_json(p, ret_json, &err);
        if (r < 0) {
                log_error("%s", err.message[0] ? err.message : strerror(-r));
                hutch_policy_free(p);
                return r;
        }
        *ret = p;
        return 0;
}

static int mcp_send(int fd, json_t *msg) {
        _cleanup_free_ char *text = json_dumps(msg, JSON_COMPACT);
        size_t n;

        if (!text)
                return -ENOMEM;
        /* One write per message: the newline is its delimiter, and JSON_COMPACT
         * output never holds one (newlines in strings are escaped). */
        n = strlen(text);
        text[n] = '\n';
        return loop_write(fd, text, n + 1);
}

static int mcp_handle_line(McpServer *s, int out, char *line, size_t len) {
        json_auto_t *resp = NULL;

        if (len > 0 && line[len - 1] == '\r')
                len--;
        if (strspn(line, " \t\r") >= len)
                return 0; /* a blank line is no message */
        resp = mcp_server_handle(s, line, len);
        if (!resp)
                return 0;
        return mcp_send(out, resp);
}

/* Reads newline-delimited messages from @in until end-of-file and answers
 * each on @out. A line longer than MCP_MESSAGE_MAX is answered with a parse
 * error and skipped; the server keeps serving. */
static int mcp_serve(McpServer *s, int in, int out) {
        _cleanup_free_ char *buf = NULL;
        size_t len = 0, scanned = 0;
        bool skipping = false;
        int r;

        buf = malloc(MCP_MESSAGE_MAX + MCP_READ_CHUNK + 1);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                size_t start = 0;
                ssize_t n;

                n = read(in, buf + len, MCP_READ_CHUNK);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return negative_errno();
                if (n == 0) {
                        /* A last message without its newline is taken too. */
                        if (len > 0 && !skipping) {
                                buf[len] = '\0';
                                return mcp_handle_line(s, out, buf, len);
                        }
                        return 0;
                }
                len += (size_t)n;
                for (;;) {
                        char *nl = memchr(buf + scanned, '\n', len - scanned);
                        size_t l;

                        if (!nl) {
                                scanned = len;
                                break;
                        }
                        l = (size_t)(nl - (buf + start));
                        *nl = '\0';
                        if (skipping)
                                skipping = false;
                        else {
                                r = mcp_handle_line(s, out, buf + start, l);
                                if (r < 0)
                                        return r;
                        }
                        start += l + 1;
                        scanned = start;
                }
                memmove(buf, buf + start, len - start);
                len -= start;
                scanned -= start;
                if (skipping) {
                        len = scanned = 0;
                } else if (len > MCP_MESSAGE_MAX) {
                        json_auto_t *e =
                                jsonrpc_error(NULL, JSONRPC_PARSE_ERROR,
                                              "message longer than %u bytes", MCP_MESSAGE_MAX);

                        r = e ? mcp_send(out, e) : -ENOMEM;
                        if (r < 0)
                                return r;
                        skipping = true;
                        len = scanned = 0;
                }
        }
}

/* Keeps the protocol's fds to ourselves: fd 1 becomes a copy of stderr and
 * fd 0 /dev/null, so nothing we start (the keeper, a stray write) can
 * write into the protocol stream or read from it. */
static int mcp_stdio(int *ret_in, int *ret_out) {
        _cleanup_close_ int in = -EBADF, out = -EBADF, null_fd = -EBADF;

        in = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
        out = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
        null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (in < 0 || out < 0 || null_fd < 0)
                return negative_errno();
        if (dup2(null_fd, STDIN_FILENO) < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
                return negative_errno();
        *ret_in = TAKE_FD(in);
        *ret_out = TAKE_FD(out);
        return 0;
}

int verb_mcp(int argc, char **argv) {
        _cleanup_(run_args_done) RunArgs args = {.json_fd = -EBADF};
        _cleanup_(mcp_server_done) McpServer s = {};
        _cleanup_free_ char *cwd = NULL;
        _cleanup_close_ int in = -EBADF, out = -EBADF;
        const char *name = NULL, *preview_url = NULL;
        HutchError err = {};
        char dflt[MCP_NAME_MAX + 1];
        int r;

        if (mcp_take_opt(&argc, argv, "--name", &name) < 0) {
                log_error("option '--name' needs a value");
                return HUTCH_EXIT_FAILURE;
        }
        if (mcp_take_opt(&argc, argv, "--preview-url", &preview_url) < 0) {
                log_error("option '--preview-url' needs a value");
                return HUTCH_EXIT_FAILURE;
        }
        if (preview_url && strncmp(preview_url, "http://", 7) != 0 &&
            strncmp(preview_url, "https://", 8) != 0) {
                log_error("invalid --preview-url '%s': give hutch serve's base URL "
                          "(http://HOST:PORT)",
                          preview_url);
                return HUTCH_EXIT_FAILURE;
        }
        r = run_args_parse_mode(argc, argv, RUN_ARGS_CREATE, &args, &err);
        if (r < 0) {
                log_error("%s", err.msg[0] ? err.msg : strerror(-r));
                return HUTCH_EXIT_FAILURE;
        }
        if (args.help) {
                mcp_usage(stdout);
                return 0;
        }
        if (strv_length(args.command) > 0) {
                log_error("'mcp' takes flags only (got '%s'); the sandbox is named with "
                          "--name",
                          args.command[0]);
                return HUTCH_EXIT_FAILURE;
        }
        /* NEEDSWORK: hutch_create() has no idle timeout; until it has, such
         * a sandbox is made with 'hutch create' and served with --name. */
        if (args.idle_timeout_ms) {
                log_error("'mcp' cannot set --idle-timeout: create the sandbox with 'hutch "
                          "create NAME --idle-timeout ...' and serve it with 'hutch mcp --name "
                          "NAME'");
                return HUTCH_EXIT_FAILURE;
        }
        cwd = getcwd(NULL, 0);
        if (!cwd) {
                log_error_errno(negative_errno(), "cannot get the current directory: %m");
                return HUTCH_EXIT_FAILURE;
        }
        if (name && !hutch_ext_name_is_valid(name)) {
                log_error("invalid sandbox name '%s': it must match [a-z0-9][a-z0-9_.-]{0,62}",
                          name);
                return HUTCH_EXIT_FAILURE;
        }
        if (!name) {
                /* Named after the workspace: a client that starts servers
                 * elsewhere than in the project can pass --workspace. */
                HutchExtPolicyView view;

                hutch_ext_policy_view(args.policy, &view);
                mcp_default_name(view.workspace ? view.workspace : cwd, dflt);
                name = dflt;
        }
        s.name = strdup(name);
        if (preview_url) {
                s.preview_url = strdup(preview_url);
                if (!s.preview_url)
                        return HUTCH_EXIT_FAILURE;
        }
        if (!s.name)
                return HUTCH_EXIT_FAILURE;
        if (args.from) {
                s.from = strdup(args.from);
                if (!s.from)
                        return HUTCH_EXIT_FAILURE;
        }
        /* Without policy flags, --from takes the snapshot's policy (the
         * defaults for an imported one) and --name
         * an existing sandbox's: only the policy that was asked for is
         * checked against an existing sandbox. */
        if (args.policy_given || !args.from) {
                r = mcp_policy(&args, cwd, &s.policy, &s.policy_json);
                if (r < 0)
                        return HUTCH_EXIT_FAILURE;
                if (!args.policy_given && name != dflt)
                        s.policy_json = mfree(s.policy_json);
        }

        r = mcp_stdio(&in, &out);
        if (r < 0) {
                log_error_errno(r, "cannot set up stdin and stdout: %m");
                return HUTCH_EXIT_FAILURE;
        }
        /* A client that went away is end-of-file on stdin, or EPIPE here. */
        (void)signal(SIGPIPE, SIG_IGN);
        log_info("serving sandbox '%s' (created on first use)", s.name);
        r = mcp_serve(&s, in, out);
        if (r < 0 && r != -EPIPE) {
                log_error_errno(r, "the MCP session failed: %m");
                return HUTCH_EXIT_FAILURE;
        }
        return 0;
}
