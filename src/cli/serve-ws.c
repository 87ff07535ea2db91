/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* GET /v1/sandboxes/{name}/exec/ws with "Upgrade: websocket": an exec in a
 * persistent sandbox as a bidirectional stream (RFC 6455; docs/api.md "The
 * exec WebSocket"). The front (serve-front.c) hands over a connection whose
 * head it checked (syntax, token) and that asks for this upgrade; this file
 * answers the handshake and then runs the exec through hutch-ext.h's
 * streaming exec door (the keeper's protocol), from the event loop:
 *
 *   client -> server  the first message: a text frame, the exec request
 *                     {"argv":[...],"env":{...},"cwd":S,"timeout_ms":N,
 *                      "tty":B,"cols":N,"rows":N,"user":S}
 *                     then binary frames: stdin bytes; text frames:
 *                     {"type":"resize","cols":N,"rows":N} (tty),
 *                     {"type":"signal","signal":"INT"|N},
 *                     {"type":"close_stdin"}
 *   server -> client  {"type":"started","id":N}; binary frames whose first
 *                     byte is the stream (1 stdout or the pty, 2 stderr);
 *                     at the end {"type":"outcome","exit_code":N,
 *                     "outcome":{...}} and a close frame 1000; an error:
 *                     {"type":"error","message":S} and a close frame.
 *
 * With "tty", the command gets a pty made inside the sandbox
 * (hutch_ext_exec_stream_pty()) whose master this server holds. A client
 * that closes (or sends a close frame) before the outcome kills the
 * command, as with the other exec routes. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <openssl/evp.h>

#include "api/hutch-ext.h"
#include "base64.h"
#include "fd-util.h"
#include "log.h"
#include "serve.h"
#include "strv.h"
#include "websocket.h"

/* The largest message a client may send (stdin in one frame, or over its
 * fragments), and how much stdin may wait for the command before reading
 * from the client pauses. */
#define WS_MESSAGE_MAX (1U << 20)
#define WS_STDIN_PENDING_MAX (1U << 20)
#define WS_READ_SIZE 65536
/* After the outcome, how long the output may take to reach its end. */
#define WS_EOF_GRACE_MS 2000
/* Exec WebSockets open at once; more are answered 503. */
#define WS_CONNECTIONS_MAX 64

typedef enum WsState {
        WS_WAIT_REQUEST, /* upgraded; the first message is the exec request */
        WS_RUNNING,
        WS_CLOSING, /* a close frame sent: freed once it is written */
} WsState;

typedef struct WsOut {
        struct WsConn *ws;
        uint8_t stream; /* 1 stdout (or the pty), 2 stderr */
        int fd;         /* -EBADF at EOF */
        struct event *ev;
} WsOut;

typedef struct WsConn {
        Server *srv;
        struct bufferevent *bev;
        WsReader reader;
        WsState state;
        char *name; /* the sandbox's */
        bool tty, started, have_outcome, paused, stdin_eof;
        uint16_t cols, rows;
        /* The exec: closing it kills the command. */
        HutchExtStream *stream;
        struct event *sock_ev, *grace_ev;
        struct event *chan_ev; /* tty: the pty channel, until the master came */
        int in_fd;             /* stdin: the pipe's write end, or the pty master */
        struct event *in_ev;
        struct evbuffer *stdin_buf;
        WsOut out[2]; /* tty: out[0].fd is the master */
        int exit_code;
        char *outcome_json;
        struct WsConn *prev, *next;
} WsConn;

/* The open exec WebSockets, for the count and the server's shutdown
 * (serve_ws_abort_all()): the server is one process with one event loop,
 * and only the loop touches this. */
static WsConn *ws_conns;
static unsigned ws_count;

static void ws_free(WsConn *ws) {
        if (!ws)
                return;
        if (ws->prev)
                ws->prev->next = ws->next;
        else if (ws_conns == ws)
                ws_conns = ws->next;
        if (ws->next)
                ws->next->prev = ws->prev;
        ws_count--;
        if (ws->bev)
                bufferevent_free(ws->bev);
        ws_reader_done(&ws->reader);
        for (size_t i = 0; i < ELEMENTSOF(ws->out); i++) {
                if (ws->out[i].ev)
                        event_free(ws->out[i].ev);
                if (ws->out[i].fd != ws->in_fd)
                        safe_close(ws->out[i].fd);
        }
        if (ws->in_ev)
                event_free(ws->in_ev);
        safe_close(ws->in_fd);
        if (ws->stdin_buf)
                evbuffer_free(ws->stdin_buf);
        if (ws->chan_ev)
                event_free(ws->chan_ev);
        if (ws->sock_ev)
                event_free(ws->sock_ev);
        if (ws->grace_ev)
                event_free(ws->grace_ev);
        /* SECURITY: closing the stream (the keeper connection) before the
         * outcome kills the command and everything it started. */
        hutch_ext_exec_stream_close(ws->stream);
        free(ws->outcome_json);
        free(ws->name);
        free(ws);
}

/* ---- frames out ---- */

static void ws_send(WsConn *ws, WsOpcode op, uint8_t stream, const void *data, size_t len) {
        struct evbuffer *out = bufferevent_get_output(ws->bev);
        uint8_t h[WS_HEADER_MAX];
        size_t n = ws_frame_header(h, op, len + (stream ? 1 : 0));

        /* Nothing after our close frame (RFC 6455 §5.5.1). */
        if (ws->state == WS_CLOSING)
                return;
        (void)evbuffer_add(out, h, n);
        if (stream)
                (void)evbuffer_add(out, &stream, 1);
        if (len)
                (void)evbuffer_add(out, data, len);
}

static void ws_send_json(WsConn *ws, json_t *obj) {
        _cleanup_free_ char *text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;

        json_decref(obj);
        if (text)
                ws_send(ws, WS_OP_TEXT, 0, text, strlen(text));
}

static void outputs_enable(WsConn *ws, bool on);

/* Sends a close frame and frees the connection once it is written; the
 * command, if it still runs, is killed then (ws_free()). */
static void ws_close(WsConn *ws, uint16_t code, const char *reason) {
        uint8_t payload[WS_CONTROL_MAX];
        size_t n;

        if (ws->state == WS_CLOSING)
                return;
        n = ws_close_payload(payload, code, reason);
        ws_send(ws, WS_OP_CLOSE, 0, payload, n);
        ws->state = WS_CLOSING;
        outputs_enable(ws, false);
        bufferevent_disable(ws->bev, EV_READ);
        if (evbuffer_get_length(bufferevent_get_output(ws->bev)) == 0)
                ws_free(ws);
}

static void ws_fail(WsConn *ws, uint16_t code, const char *msg) {
        ws_send_json(ws, json_pack("{s:s,s:s}", "type", "error", "message", msg));
        ws_close(ws, code, msg);
}

/* ---- output ---- */

/* The output is read once "started" went to the client (docs/api.md: the
 * command's bytes come after it), and while the client takes it. */
static void outputs_enable(WsConn *ws, bool on) {
        for (size_t i = 0; i < ELEMENTSOF(ws->out); i++)
                if (ws->out[i].ev) {
                        if (on && !ws->paused && ws->state == WS_RUNNING &&
                            (ws->started || ws->have_outcome))
                                (void)event_add(ws->out[i].ev, NULL);
                        else
                                (void)event_del(ws->out[i].ev);
                }
}

/* Whether the pty's master is still to come. */
static bool ws_pty_waiting(const WsConn *ws) {
        return ws->tty && ws->stream && hutch_ext_exec_stream_pty_fd(ws->stream) >= 0;
}

static void ws_maybe_finish(WsConn *ws) {
        if (!ws->have_outcome || ws->state != WS_RUNNING)
                return;
        if (ws->out[0].fd >= 0 || ws->out[1].fd >= 0 || (ws_pty_waiting(ws) && !ws->grace_ev))
                return;
        ws_send_json(ws, json_pack("{s:s,s:i,s:o}", "type", "outcome", "exit_code", ws->exit_code,
                                   "outcome",
                                   json_loads(ws->outcome_json ? ws->outcome_json : "null",
                                              JSON_DECODE_ANY, NULL)));
        ws_close(ws, WS_CLOSE_NORMAL, "");
}

static void output_eof(WsOut *o) {
        if (o->ev) {
                event_free(o->ev);
                o->ev = NULL;
        }
        if (o->fd != o->ws->in_fd)
                safe_close(o->fd);
        o->fd = -EBADF;
}

static void on_output(evutil_socket_t fd, short what, void *arg) {
        WsOut *o = arg;
        WsConn *ws = o->ws;
        char buf[WS_READ_SIZE];
        ssize_t n;

        n = read(o->fd, buf, sizeof(buf));
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n <= 0) {
                /* EIO from a pty master: every slave descriptor closed. */
                output_eof(o);
                ws_maybe_finish(ws);
                return;
        }
        ws_send(ws, WS_OP_BINARY, o->stream, buf, (size_t)n);
        /* A client slower than the command: reading pauses (the command
         * blocks on its full pipe or pty) until the output drains. */
        if (evbuffer_get_length(bufferevent_get_output(ws->bev)) > SERVE_STREAM_HIGH_WATER) {
                ws->paused = true;
                outputs_enable(ws, false);
        }
}

static int output_watch(WsConn *ws, size_t i, int fd) {
        if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0)
                return negative_errno();
        ws->out[i].fd = fd;
        ws->out[i].ev = event_new(ws->srv->base, fd, EV_READ | EV_PERSIST, on_output, &ws->out[i]);
        if (!ws->out[i].ev)
                return -ENOMEM;
        outputs_enable(ws, true);
        return 0;
}

/* ---- stdin ---- */

static void stdin_pump(WsConn *ws);

static void on_stdin_room(evutil_socket_t fd, short what, void *arg) {
        stdin_pump(arg);
}

/* Writes what waits to the command's stdin as far as it takes it. */
static void stdin_pump(WsConn *ws) {
        size_t len;

        if (ws->in_fd < 0)
                return;
        while ((len = evbuffer_get_length(ws->stdin_buf)) > 0) {
                ssize_t n = write(ws->in_fd, evbuffer_pullup(ws->stdin_buf, -1), len);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN) {
                        if (!ws->in_ev)
                                ws->in_ev = event_new(ws->srv->base, ws->in_fd, EV_WRITE,
                                                      on_stdin_room, ws);
                        if (ws->in_ev)
                                (void)event_add(ws->in_ev, NULL);
                        return;
                }
                if (n <= 0) {
                        /* The command closed its stdin: what waits goes. */
                        (void)evbuffer_drain(ws->stdin_buf, len);
                        break;
                }
                (void)evbuffer_drain(ws->stdin_buf, (size_t)n);
        }
        if (ws->state == WS_RUNNING)
                bufferevent_enable(ws->bev, EV_READ);
        if (ws->stdin_eof && !ws->tty && evbuffer_get_length(ws->stdin_buf) == 0) {
                if (ws->in_ev) {
                        event_free(ws->in_ev);
                        ws->in_ev = NULL;
                }
                ws->in_fd = safe_close(ws->in_fd);
        }
}

/* ---- the pty ---- */

static void apply_size(WsConn *ws) {
        if (ws->tty && ws->in_fd >= 0 && ws->rows && ws->cols)
                (void)hutch_ext_exec_stream_resize(ws->in_fd, ws->cols, ws->rows);
}

/* The master arrives on the channel when the command started inside. */
static void on_chan(evutil_socket_t fd, short what, void *arg) {
        WsConn *ws = arg;
        int master = -EBADF, r;

        /* The size as the client last set it, then the command's go. */
        r = hutch_ext_exec_stream_pty(ws->stream, ws->cols, ws->rows, &master);
        event_free(ws->chan_ev);
        ws->chan_ev = NULL;
        if (r < 0) {
                /* The command did not start (its outcome says why). */
                ws_maybe_finish(ws);
                return;
        }
        ws->in_fd = master;
        r = output_watch(ws, 0, master);
        if (r < 0) {
                ws_fail(ws, WS_CLOSE_INTERNAL, "cannot watch the terminal");
                return;
        }
        stdin_pump(ws);
}

/* ---- the keeper ---- */

static void on_grace(evutil_socket_t fd, short what, void *arg) {
        WsConn *ws = arg;

        for (size_t i = 0; i < ELEMENTSOF(ws->out); i++)
                if (ws->out[i].fd >= 0)
                        output_eof(&ws->out[i]);
        if (ws->chan_ev) {
                event_free(ws->chan_ev);
                ws->chan_ev = NULL;
        }
        hutch_ext_exec_stream_pty_abandon(ws->stream);
        ws_maybe_finish(ws);
}

static void on_keeper(evutil_socket_t fd, short what, void *arg) {
        WsConn *ws = arg;

        for (;;) {
                HutchError err = {};
                char *json = NULL;
                uint64_t id = 0;
                int code = 0, r;

                r = hutch_ext_exec_stream_answer(ws->stream, &id, &code, &json, &err);
                if (r == -EAGAIN)
                        return;
                if (r < 0) {
                        ws_fail(ws, WS_CLOSE_INTERNAL, err.msg[0] ? err.msg : strerror(-r));
                        return;
                }
                if (r == HUTCH_EXT_ANSWER_STARTED && !ws->started) {
                        ws->started = true;
                        ws_send_json(ws, json_pack("{s:s,s:I}", "type", "started", "id",
                                                   (json_int_t)id));
                        outputs_enable(ws, true);
                        continue;
                }
                if (r != HUTCH_EXT_ANSWER_OUTCOME) {
                        free(json);
                        ws_fail(ws, WS_CLOSE_INTERNAL, "unexpected answer from the keeper");
                        return;
                }
                ws->outcome_json = json;
                ws->exit_code = code;
                ws->have_outcome = true;
                outputs_enable(ws, true);
                (void)event_del(ws->sock_ev);
                {
                        struct timeval tv = {.tv_sec = WS_EOF_GRACE_MS / 1000,
                                             .tv_usec = (WS_EOF_GRACE_MS % 1000) * 1000};

                        ws->grace_ev = evtimer_new(ws->srv->base, on_grace, ws);
                        if (ws->grace_ev)
                                (void)evtimer_add(ws->grace_ev, &tv);
                }
                ws_maybe_finish(ws);
                return;
        }
}

/* ---- the request ---- */

typedef struct WsExecArgs {
        char **argv, **env;
        const char *cwd;
        uint64_t timeout_ms, cols, rows;
        bool tty;
        const char *user;
} WsExecArgs;

static const ServeField ws_exec_fields[] = {
        {"argv", SERVE_FIELD_STRV, offsetof(WsExecArgs, argv), true},
        {"env", SERVE_FIELD_ENV, offsetof(WsExecArgs, env), false},
        {"cwd", SERVE_FIELD_STRING, offsetof(WsExecArgs, cwd), false},
        {"timeout_ms", SERVE_FIELD_U64, offsetof(WsExecArgs, timeout_ms), false},
        {"tty", SERVE_FIELD_BOOL, offsetof(WsExecArgs, tty), false},
        {"cols", SERVE_FIELD_U64, offsetof(WsExecArgs, cols), false},
        {"rows", SERVE_FIELD_U64, offsetof(WsExecArgs, rows), false},
        {"user", SERVE_FIELD_STRING, offsetof(WsExecArgs, user), false},
};

static int ws_exec_args_validate(const WsExecArgs *a, HutchError *reterr) {
        if (!a->argv[0] || !a->argv[0][0])
                return hutch_error_set_pointer(reterr, EINVAL, "/argv",
                                               "'argv' must name a command");
        if (a->cwd && a->cwd[0] != '/')
                return hutch_error_set_pointer(reterr, EINVAL, "/cwd",
                                               "the working directory must be absolute");
        if (a->user && !hutch_ext_user_spec_is_valid(a->user))
                return hutch_error_set_pointer(reterr, EINVAL, "/user",
                                               "invalid user '%s' (want NAME, UID, NAME:GROUP or "
                                               "UID:GID)",
                                               a->user);
        if (a->cols > UINT16_MAX || a->rows > UINT16_MAX)
                return hutch_error_set_pointer(reterr, EINVAL,
                                               a->cols > UINT16_MAX ? "/cols" : "/rows",
                                               "a terminal is at most 65535 columns and rows");
        if (!a->tty && (a->cols || a->rows))
                return hutch_error_set_pointer(reterr, EINVAL, a->cols ? "/cols" : "/rows",
                                               "a size is for a terminal (\"tty\": true)");
        return 0;
}

/* Starts the exec of @a: stdio or the pty channel, the request, the
 * events. -errno with @reterr. */
static int ws_start(WsConn *ws, const WsExecArgs *a, HutchError *reterr) {
        HutchExtStreamOpts o = {
                .argv = a->argv,
                .env = a->env,
                .cwd = a->cwd,
                .timeout_ms = a->timeout_ms,
                .user = a->user,
                .tty = a->tty,
                .stdin_pipe = true,
                .nonblock = true,
        };
        int r;

        r = hutch_ext_exec_stream_open(ws->name, &o, &ws->stream, reterr);
        if (r < 0)
                return r;
        ws->tty = a->tty;
        ws->cols = (uint16_t)a->cols;
        ws->rows = (uint16_t)a->rows;
        if (a->tty) {
                ws->chan_ev = event_new(ws->srv->base, hutch_ext_exec_stream_pty_fd(ws->stream),
                                        EV_READ, on_chan, ws);
                if (!ws->chan_ev || event_add(ws->chan_ev, NULL) < 0)
                        return hutch_error_set(reterr, ENOMEM, "out of memory");
        } else {
                /* The ends are the connection's now (ws_free()). */
                hutch_ext_exec_stream_take_stdio(ws->stream, &ws->in_fd, &ws->out[0].fd,
                                                 &ws->out[1].fd);
                for (size_t i = 0; i < 2; i++) {
                        r = output_watch(ws, i, ws->out[i].fd);
                        if (r < 0)
                                return hutch_error_set(reterr, -r, "cannot watch the output");
                }
        }
        ws->sock_ev = event_new(ws->srv->base, hutch_ext_exec_stream_fd(ws->stream),
                                EV_READ | EV_PERSIST, on_keeper, ws);
        if (!ws->sock_ev || event_add(ws->sock_ev, NULL) < 0)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        return 0;
}

static void ws_on_request(WsConn *ws, const WsMessage *m) {
        _cleanup_strv_free_ char **argv = NULL, **env = NULL;
        WsExecArgs a = {};
        HutchError err = {};
        json_t *root;
        int r;

        if (m->op != WS_OP_TEXT) {
                ws_fail(ws, WS_CLOSE_UNSUPPORTED, "the first message is the exec request (text)");
                return;
        }
        root = json_loadb((const char *)m->data, m->len, 0, NULL);
        if (!json_is_object(root)) {
                json_decref(root);
                ws_fail(ws, WS_CLOSE_INVALID_DATA, "the exec request is not a JSON object");
                return;
        }
        r = serve_decode_object(root, ws_exec_fields, ELEMENTSOF(ws_exec_fields), &a, &err);
        argv = a.argv;
        env = a.env;
        if (r >= 0)
                r = ws_exec_args_validate(&a, &err);
        if (r >= 0) {
                ws->state = WS_RUNNING;
                r = ws_start(ws, &a, &err);
        }
        json_decref(root);
        if (r < 0)
                ws_fail(ws, WS_CLOSE_POLICY, err.msg[0] ? err.msg : strerror(-r));
}

/* "INT", "SIGINT" or a number's text for the signals a client may send. */
static int ws_signal_from_name(const char *s) {
        static const struct {
                const char *name;
                int sig;
        } table[] = {
                {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT},   {"KILL", SIGKILL},
                {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM},   {"CONT", SIGCONT},
                {"STOP", SIGSTOP}, {"TSTP", SIGTSTP}, {"WINCH", SIGWINCH}, {"ALRM", SIGALRM},
        };

        if (strncmp(s, "SIG", 3) == 0)
                s += 3;
        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (strcmp(s, table[i].name) == 0)
                        return table[i].sig;
        return -EINVAL;
}

/* {"type":"resize"|"signal"|"close_stdin",...} while the command runs. */
static void ws_on_control(WsConn *ws, const WsMessage *m) {
        json_t *o = json_loadb((const char *)m->data, m->len, 0, NULL);
        const char *type = json_string_value(json_object_get(o, "type"));

        if (!type) {
                json_decref(o);
                ws_fail(ws, WS_CLOSE_INVALID_DATA, "a message is {\"type\":...}");
                return;
        }
        if (strcmp(type, "resize") == 0) {
                json_int_t c = json_integer_value(json_object_get(o, "cols"));
                json_int_t rws = json_integer_value(json_object_get(o, "rows"));

                if (!ws->tty || c <= 0 || rws <= 0 || c > UINT16_MAX || rws > UINT16_MAX) {
                        json_decref(o);
                        ws_fail(ws, WS_CLOSE_POLICY,
                                "resize needs a terminal and 1-65535 cols and rows");
                        return;
                }
                ws->cols = (uint16_t)c;
                ws->rows = (uint16_t)rws;
                apply_size(ws);
        } else if (strcmp(type, "signal") == 0) {
                json_t *s = json_object_get(o, "signal");
                int sig = json_is_integer(s)  ? (int)json_integer_value(s)
                          : json_is_string(s) ? ws_signal_from_name(json_string_value(s))
                                              : -EINVAL;

                if (sig <= 0 || sig >= NSIG || !ws->stream ||
                    hutch_ext_exec_stream_signal(ws->stream, sig) < 0) {
                        json_decref(o);
                        ws_fail(ws, WS_CLOSE_POLICY, "invalid signal");
                        return;
                }
        } else if (strcmp(type, "close_stdin") == 0) {
                ws->stdin_eof = true;
                /* A terminal's end of input is its EOF character. */
                if (ws->tty)
                        (void)evbuffer_add(ws->stdin_buf, "\x04", 1);
                stdin_pump(ws);
        } else {
                json_decref(o);
                ws_fail(ws, WS_CLOSE_POLICY, "unknown message type");
                return;
        }
        json_decref(o);
}

/* ---- the client ---- */

static void ws_on_message(WsConn *ws, const WsMessage *m) {
        switch (m->op) {
        case WS_OP_PING:
                ws_send(ws, WS_OP_PONG, 0, m->data, m->len);
                return;
        case WS_OP_PONG:
                return;
        case WS_OP_CLOSE:
                /* Echo its code (§5.5.1); the command goes with us. */
                ws_close(ws, m->len >= 2 ? (uint16_t)(m->data[0] << 8 | m->data[1]) : 1000, "");
                return;
        case WS_OP_TEXT:
        case WS_OP_BINARY:
        case WS_OP_CONTINUATION:
                break;
        }
        if (ws->state == WS_WAIT_REQUEST) {
                ws_on_request(ws, m);
                return;
        }
        if (m->op == WS_OP_TEXT) {
                ws_on_control(ws, m);
                return;
        }
        if (ws->stdin_eof) {
                ws_fail(ws, WS_CLOSE_POLICY, "stdin is closed");
                return;
        }
        (void)evbuffer_add(ws->stdin_buf, m->data, m->len);
        stdin_pump(ws);
}

static void ws_read_cb(struct bufferevent *bev, void *arg) {
        WsConn *ws = arg;
        struct evbuffer *in = bufferevent_get_input(bev);

        while (ws->state != WS_CLOSING) {
                size_t len = evbuffer_get_length(in), used = 0;
                uint16_t code = 0;
                WsMessage m;
                int r;

                if (len == 0)
                        return;
                /* Stdin the command does not take yet: wait (stdin_pump()
                 * reads on). */
                if (evbuffer_get_length(ws->stdin_buf) >= WS_STDIN_PENDING_MAX) {
                        bufferevent_disable(bev, EV_READ);
                        return;
                }
                r = ws_reader_feed(&ws->reader, evbuffer_pullup(in, -1), len, &used, &m, &code);
                if (r < 0) {
                        ws_close(ws, code, r == -EMSGSIZE ? "message too big" : "protocol error");
                        return;
                }
                if (r == 1)
                        ws_on_message(ws, &m);
                /* ws_on_message() may have freed @ws: only a used count
                 * of 0 or a closing state is looked at after. */
                if (used == 0)
                        return;
                if (ws->state == WS_CLOSING)
                        return;
                (void)evbuffer_drain(in, used);
        }
}

static void ws_write_cb(struct bufferevent *bev, void *arg) {
        WsConn *ws = arg;

        if (ws->state == WS_CLOSING) {
                ws_free(ws);
                return;
        }
        if (ws->paused) {
                ws->paused = false;
                outputs_enable(ws, true);
        }
}

static void ws_event_cb(struct bufferevent *bev, short what, void *arg) {
        /* The client went away (or stopped reading for too long): the
         * command goes with the connection. */
        log_debug("exec websocket client went away");
        ws_free(arg);
}

/* ---- the handshake ---- */

/* The value of header @name in @head (the request line and headers), or
 * NULL; written into @buf. A header given twice is refused (NULL). */
static const char *head_header(const char *head, size_t len, const char *name, char *buf,
                               size_t size) {
        const char *p = memchr(head, '\n', len), *end = head + len, *found = NULL;
        size_t nlen = strlen(name), flen = 0;

        while (p && ++p < end) {
                const char *eol = memchr(p, '\n', (size_t)(end - p)), *v;
                size_t l = eol ? (size_t)(eol - p) : (size_t)(end - p);

                if (l > nlen && p[nlen] == ':' && strncasecmp(p, name, nlen) == 0) {
                        if (found)
                                return NULL;
                        v = p + nlen + 1;
                        while (v < p + l && (*v == ' ' || *v == '\t'))
                                v++;
                        flen = (size_t)(p + l - v);
                        while (flen > 0 &&
                               (v[flen - 1] == '\r' || v[flen - 1] == ' ' || v[flen - 1] == '\t'))
                                flen--;
                        found = v;
                }
                p = eol;
        }
        if (!found || flen >= size)
                return NULL;
        memcpy(buf, found, flen);
        buf[flen] = '\0';
        return buf;
}

/* Whether the comma-separated @list holds @token (case-insensitive). */
static bool list_has_token(const char *list, const char *token) {
        size_t n = strlen(token);

        for (const char *p = list; p && *p;) {
                size_t l;

                p += strspn(p, " \t,");
                l = strcspn(p, ",");
                while (l > 0 && (p[l - 1] == ' ' || p[l - 1] == '\t'))
                        l--;
                if (l == n && strncasecmp(p, token, n) == 0)
                        return true;
                p = strchr(p, ',');
        }
        return false;
}

static void reply_and_close(struct bufferevent *bev, int status, const char *code, const char *msg,
                            const char *extra) {
        _cleanup_free_ char *body = NULL;
        json_t *o = json_pack("{s:{s:s,s:s,s:n}}", "error", "code", code, "message", msg, "field");

        body = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        (void)evbuffer_add_printf(bufferevent_get_output(bev),
                                  "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
                                  "Content-Length: %zu\r\nConnection: close\r\n%s\r\n%s\n",
                                  status,
                                  status == 400   ? "Bad Request"
                                  : status == 404 ? "Not Found"
                                  : status == 426 ? "Upgrade Required"
                                                  : "Service Unavailable",
                                  body ? strlen(body) + 1 : 1, extra ? extra : "",
                                  body ? body : "");
}

int serve_ws_upgrade(void *userdata, struct bufferevent *bev, const char *head, size_t len) {
        static const char pattern[] = "/v1/sandboxes/{name}/exec/ws";
        Server *srv = userdata;
        char path[512], upgrade[64], connection[256], version[16], key[64];
        uint8_t digest[20];
        unsigned dlen = 0;
        _cleanup_free_ char *accept = NULL, *to_hash = NULL, *canonical = NULL;
        const char *sp, *sp2, *param = NULL;
        size_t param_len = 0;
        HutchError err = {};
        WsConn *ws;

        /* "GET /v1/sandboxes/NAME/exec/ws HTTP/1.1" with an Upgrade
         * header: ours; anything else is evhttp's (its 426 says how). */
        if (len < 4 || strncmp(head, "GET ", 4) != 0 ||
            !head_header(head, len, "Upgrade", upgrade, sizeof(upgrade)))
                return 0;
        sp = head + 4;
        sp2 = memchr(sp, ' ', len - 4);
        if (!sp2 || (size_t)(sp2 - sp) >= sizeof(path))
                return 0;
        memcpy(path, sp, (size_t)(sp2 - sp));
        path[sp2 - sp] = '\0';
        if (!serve_path_match(pattern, path, &param, &param_len))
                return 0;

        if (!list_has_token(upgrade, "websocket") ||
            !head_header(head, len, "Connection", connection, sizeof(connection)) ||
            !list_has_token(connection, "upgrade") ||
            !ws_key_is_valid(head_header(head, len, "Sec-WebSocket-Key", key, sizeof(key)))) {
                reply_and_close(bev, 400, "invalid_argument",
                                "a WebSocket handshake (RFC 6455 §4.2.1) was expected", NULL);
                return 1;
        }
        if (!head_header(head, len, "Sec-WebSocket-Version", version, sizeof(version)) ||
            strcmp(version, "13") != 0) {
                reply_and_close(bev, 426, "invalid_argument", "WebSocket version 13 only",
                                "Sec-WebSocket-Version: 13\r\n");
                return 1;
        }
        if (ws_count >= WS_CONNECTIONS_MAX) {
                reply_and_close(bev, 503, "busy", "too many exec WebSockets at once", NULL);
                return 1;
        }
        {
                _cleanup_free_ char *name = strndup(param, param_len);

                if (!name || hutch_ext_sandbox_name(name, &canonical, &err) < 0) {
                        reply_and_close(bev, 404, "not_found",
                                        err.msg[0] ? err.msg : "no such sandbox", NULL);
                        return 1;
                }
        }
        if (asprintf(&to_hash, "%s%s", key, WS_ACCEPT_GUID) < 0) {
                to_hash = NULL;
                return -ENOMEM;
        }
        if (EVP_Digest(to_hash, strlen(to_hash), digest, &dlen, EVP_sha1(), NULL) != 1 ||
            dlen != sizeof(digest) || base64_encode(digest, sizeof(digest), &accept) < 0)
                return -ENOMEM;

        ws = calloc(1, sizeof(WsConn));
        if (!ws)
                return -ENOMEM;
        *ws = (WsConn){
                .srv = srv,
                .reader = WS_READER_INIT(WS_MESSAGE_MAX),
                .in_fd = -EBADF,
                .name = TAKE_PTR(canonical),
                .stdin_buf = evbuffer_new(),
                .next = ws_conns,
        };
        for (size_t i = 0; i < ELEMENTSOF(ws->out); i++)
                ws->out[i] = (WsOut){.ws = ws, .stream = (uint8_t)(i + 1), .fd = -EBADF};
        if (ws_conns)
                ws_conns->prev = ws;
        ws_conns = ws;
        ws_count++;
        if (!ws->name || !ws->stdin_buf) {
                ws_free(ws);
                return -ENOMEM;
        }
        ws->bev = bev;
        bufferevent_setcb(bev, ws_read_cb, ws_write_cb, ws_event_cb, ws);
        {
                /* An interactive session may be silent for long: no read
                 * timeout; a client that stops taking output still goes. */
                struct timeval tv = {.tv_sec = SERVE_TIMEOUT_S};

                bufferevent_set_timeouts(bev, NULL, &tv);
        }
        bufferevent_setwatermark(bev, EV_READ, 0, WS_MESSAGE_MAX + WS_HEADER_MAX);
        (void)evbuffer_add_printf(bufferevent_get_output(bev),
                                  "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                                  "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
                                  accept);
        (void)bufferevent_enable(bev, EV_READ | EV_WRITE);
        /* Frames an eager client sent right after its head. */
        if (evbuffer_get_length(bufferevent_get_input(bev)) > 0)
                ws_read_cb(bev, ws);
        return 2;
}

void serve_exec_ws_plain(ServeCtx *c) {
        serve_reply_status(c->req, 426, "invalid_argument", NULL,
                           "this route is a WebSocket: send 'Connection: Upgrade' and 'Upgrade: "
                           "websocket' (docs/api.md)");
}

void serve_ws_abort_all(void) {
        while (ws_conns)
                ws_free(ws_conns);
}
