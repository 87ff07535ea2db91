/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* envd's process.Process service (e2b-envd.h, docs/e2b-envd.md).
 *
 * A process is a hutch exec; the "pid" E2B's SDK sees is the exec's id
 * (unique in its sandbox, > 0), which List, SendSignal and the others
 * take back. Start runs the command through the sandbox's keeper, as
 * `hutch serve`'s exec WebSocket does (serve-ws.c), in the fork that
 * serves the Start request: that fork, the process's "broker", holds the
 * keeper connection (closing it would kill the command), the command's
 * stdin pipe or pty master and its output, for as long as the command
 * runs, whether or not the client still listens (E2B's background
 * commands outlive their stream). The calls that come on other
 * connections (SendInput, CloseStdin, Update, Connect) reach the broker
 * through a unix socket of its own, "<table>/envd/<sandbox>-<id>.sock",
 * in the server's private folder (0700): one SOCK_SEQPACKET message per
 * request, the first byte its op. SendSignal and List use the C API's
 * process table (hutch_exec_signal(), hutch_exec_list()). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "api/hutch-ext.h"
#include "base64.h"
#include "e2b-envd.h"
#include "e2b-internal.h"
#include "fd-util.h"
#include "hutch.h"
#include "json-fields.h"
#include "macro.h"
#include "serve-util.h"
#include "strv.h"

/* The broker's ops (the first byte of a message on its socket). */
#define OP_INPUT 'i'     /* + bytes for stdin or the pty */
#define OP_CLOSE 'c'     /* close stdin */
#define OP_RESIZE 'r'    /* + cols, rows (2 bytes each, big-endian) */
#define OP_SUBSCRIBE 's' /* the events from now on, one message each */
/* What the broker sends a subscriber: 'e' + a ConnectResponse's JSON, and
 * last 'z' + the end-of-stream's JSON, then it closes. */
#define EV_MESSAGE 'e'
#define EV_END 'z'

/* Input bytes per broker message (under the socket's buffer). */
#define INPUT_CHUNK (32U << 10)
#define OUTPUT_CHUNK (32U << 10)
#define SUBSCRIBERS_MAX 16
#define CONTROLS_MAX 16
/* After the outcome, output still in the pipes is read for this long. */
#define EOF_GRACE_MS 200
#define PING_INTERVAL_MS 30000
/* How often a broker with listeners looks whether its sandbox was paused
 * (frozen: the keeper connection stays, issue 20). */
#define PAUSE_CHECK_MS 250

/* ---- the broker's socket ---- */

/* The folder of the brokers' sockets, opened O_PATH and made on first use,
 * then kept (issue 20: a mkdir() and an open() less per call): a borrowed
 * fd, never closed by the caller. Safe as a process-wide cache: a
 * connection's fork is single-threaded and its server's folder does not
 * move while it runs. */
static int broker_dir(const E2bServer *srv) {
        static int cached = -EBADF;
        _cleanup_free_ char *dir = NULL;
        int fd;

        if (cached >= 0)
                return cached;
        if (asprintf(&dir, "%s/envd", srv->table_dir) < 0)
                return -ENOMEM;
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return -errno;
        fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        cached = fd;
        return fd;
}

/* The socket's address, through /proc/self/fd so that a long store path
 * still fits sun_path. */
static int broker_addr(int dirfd, const char *sbx, uint64_t id, struct sockaddr_un *ret,
                       socklen_t *ret_len) {
        int n;

        *ret = (struct sockaddr_un){.sun_family = AF_UNIX};
        n = snprintf(ret->sun_path, sizeof(ret->sun_path), "/proc/self/fd/%d/%s-%" PRIu64 ".sock",
                     dirfd, sbx, id);
        if (n < 0 || (size_t)n >= sizeof(ret->sun_path))
                return -ENAMETOOLONG;
        *ret_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)n + 1);
        return 0;
}

/* Connects to the broker of process @id of @sbx: a new fd, -ENOENT when
 * there is none (the process ended, or was not started by envd). */
static int broker_connect(const EnvdCall *call, uint64_t id) {
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_un sa;
        socklen_t len;
        int dirfd, r;

        dirfd = broker_dir(call->req->srv);
        if (dirfd < 0)
                return dirfd;
        r = broker_addr(dirfd, call->sbx.name, id, &sa, &len);
        if (r < 0)
                return r;
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *)&sa, len) < 0)
                return errno == ECONNREFUSED ? -ENOENT : -errno;
        return TAKE_FD(fd);
}

/* Sends one op to the broker and waits for its one-byte answer (an errno
 * value, 0 for done). */
static int broker_op(int fd, const void *msg, size_t len) {
        uint8_t ans = 0;
        ssize_t n;

        if (send(fd, msg, len, MSG_NOSIGNAL) < 0)
                return -errno;
        n = recv(fd, &ans, 1, 0);
        if (n < 0)
                return -errno;
        if (n == 0)
                return -ENOENT; /* the process ended meanwhile */
        return -(int)ans;
}

/* ---- messages ---- */

static json_t *event_message(const char *kind, json_t *value) {
        if (!value)
                return NULL;
        return json_pack("{s:{s:o}}", "event", kind, value);
}

static json_t *data_event(const char *stream, const char *data, size_t len) {
        _cleanup_free_ char *b64 = NULL;

        if (base64_encode(data, len, &b64) < 0)
                return NULL;
        return event_message("data", json_pack("{s:s}", stream, b64));
}

/* Go's names of the signals (os.ProcessState.String(), what envd says). */
static const char *signal_text(int sig) {
        switch (sig) {
        case SIGKILL:
                return "killed";
        case SIGTERM:
                return "terminated";
        case SIGINT:
                return "interrupt";
        case SIGHUP:
                return "hangup";
        case SIGQUIT:
                return "quit";
        case SIGPIPE:
                return "broken pipe";
        case SIGABRT:
                return "aborted";
        case SIGSEGV:
                return "segmentation fault";
        default:
                return NULL;
        }
}

/* The EndEvent of an outcome: exited with its code, or killed by a
 * signal (exitCode -1, exited false), as envd reports them. */
static json_t *end_event(int exit_code, const char *outcome_json) {
        json_t *o = outcome_json ? json_loads(outcome_json, 0, NULL) : NULL;
        const char *reason = json_string_value(json_object_get(o, "reason"));
        int sig = (int)json_integer_value(json_object_get(o, "signal"));
        char status[64];
        json_t *end;

        if (!reason || strcmp(reason, "exited") == 0) {
                (void)snprintf(status, sizeof(status), "exit status %d", exit_code);
                end = json_pack("{s:b,s:s}", "exited", 1, "status", status);
                if (end && exit_code != 0)
                        (void)json_object_set_new(end, "exitCode", json_integer(exit_code));
        } else {
                const char *t = signal_text(sig ? sig : SIGKILL);

                if (t)
                        (void)snprintf(status, sizeof(status), "signal: %s", t);
                else
                        (void)snprintf(status, sizeof(status), "signal: %d", sig);
                end = json_pack("{s:i,s:s,s:s}", "exitCode", -1, "status", status, "error", status);
                if (end && reason && strcmp(reason, "signaled") != 0 &&
                    strcmp(reason, "killed") != 0) {
                        /* timeout, oom, pids: hutch's reason says why. */
                        char why[96];

                        (void)snprintf(why, sizeof(why), "%s (%s)", status, reason);
                        (void)json_object_set_new(end, "error", json_string(why));
                }
        }
        json_decref(o);
        return event_message("end", end);
}

/* ---- decoding ---- */

/* Each method's members (json-fields.h's tables, as the filesystem
 * service's in e2b-envd.c): a member not named is refused, deny by
 * default; each handler then checks the values it reads. */
#define MEMBER(name)                                                                               \
        { name, JSON_FIELD_ANY, 0, false }

static const JsonFieldDef start_fields[] = {MEMBER("process"), MEMBER("pty"), MEMBER("tag"),
                                            MEMBER("stdin")};
static const JsonFieldDef start_process_fields[] = {MEMBER("cmd"), MEMBER("args"), MEMBER("envs"),
                                                    MEMBER("cwd")};
static const JsonFieldDef selector_fields[] = {MEMBER("process")};
static const JsonFieldDef signal_fields[] = {MEMBER("process"), MEMBER("signal")};
static const JsonFieldDef input_fields[] = {MEMBER("process"), MEMBER("input")};
static const JsonFieldDef update_fields[] = {MEMBER("process"), MEMBER("pty")};

static int bad(EnvdCall *call, const char *what, const char *why) {
        (void)envd_reply_code(call, CONNECT_INVALID_ARGUMENT, "'%s' %s", what, why);
        return -EINVAL;
}

/* ProcessSelector {pid} (tags are not served: docs/e2b-envd.md). */
static int selector(EnvdCall *call, json_t *sel, uint64_t *ret) {
        json_t *pid;

        if (!json_is_object(sel))
                return bad(call, "process", "is required");
        if (json_object_get(sel, "tag"))
                return envd_reply_code(call, CONNECT_UNIMPLEMENTED,
                                       "selecting a process by tag is not supported"),
                       -EOPNOTSUPP;
        pid = json_object_get(sel, "pid");
        if (json_object_size(sel) != 1 || !pid)
                return bad(call, "process", "must be {\"pid\": N}");
        if (json_is_string(pid)) {
                uint64_t v = 0;
                const char *s = json_string_value(pid);

                if (!s[0] || strlen(s) > 10)
                        return bad(call, "process.pid", "is not a pid");
                for (; *s; s++) {
                        if (*s < '0' || *s > '9')
                                return bad(call, "process.pid", "is not a pid");
                        v = v * 10 + (uint64_t)(*s - '0');
                }
                *ret = v;
        } else if (json_is_integer(pid) && json_integer_value(pid) > 0 &&
                   json_integer_value(pid) <= UINT32_MAX)
                *ret = (uint64_t)json_integer_value(pid);
        else
                return bad(call, "process.pid", "is not a pid");
        if (*ret == 0 || *ret > UINT32_MAX)
                return bad(call, "process.pid", "is not a pid");
        return 0;
}

/* PTY {size {cols, rows}}: 1 to 65535 each. */
static int pty_size(EnvdCall *call, json_t *pty, uint16_t *ret_cols, uint16_t *ret_rows) {
        json_t *size = json_object_get(pty, "size");
        json_int_t c = json_integer_value(json_object_get(size, "cols"));
        json_int_t rw = json_integer_value(json_object_get(size, "rows"));

        if (!json_is_object(pty) || !json_is_object(size) || c <= 0 || rw <= 0 || c > UINT16_MAX ||
            rw > UINT16_MAX)
                return bad(call, "pty", "must have a size of 1-65535 cols and rows");
        *ret_cols = (uint16_t)c;
        *ret_rows = (uint16_t)rw;
        return 0;
}

/* ---- Start: the broker ---- */

typedef struct Broker {
        EnvdCall *call;
        /* The exec (hutch-ext.h): closing it kills the command. */
        HutchExtStream *stream;
        int in_fd;  /* stdin's write end, or -EBADF */
        int out[2]; /* stdout, stderr read ends (or out[0] the pty master) */
        int master; /* the pty master, or -EBADF */
        int listen; /* the broker socket */
        int dirfd;  /* its folder (broker_dir(): borrowed) */
        char sock_name[128];
        bool client;   /* the Start client still listens */
        bool released; /* its connection slot was given back (e2b_conn_release()) */
        int subs[SUBSCRIBERS_MAX];
        int ctls[CONTROLS_MAX];
        uint64_t id;
} Broker;

/* Sends @msg (borrowed) to the broker's subscribers. */
static void broker_send_subs(Broker *b, const json_t *msg) {
        _cleanup_free_ char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
        _cleanup_free_ char *wire = NULL;
        size_t len;

        if (!text)
                return;
        len = strlen(text);
        for (size_t i = 0; i < SUBSCRIBERS_MAX; i++) {
                if (b->subs[i] < 0)
                        continue;
                if (!wire) {
                        wire = malloc(len + 1);
                        if (!wire)
                                break;
                        wire[0] = EV_MESSAGE;
                        memcpy(wire + 1, text, len);
                }
                if (send(b->subs[i], wire, len + 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
                        b->subs[i] = safe_close(b->subs[i]); /* too slow or gone */
        }
}

/* Sends @msg (taken) to the subscribers and the Start client. */
static void broker_send_all(Broker *b, json_t *msg) {
        if (!msg)
                return;
        broker_send_subs(b, msg);
        if (b->client && envd_stream_message(b->call, msg) < 0)
                b->client = false;
        else if (!b->client)
                json_decref(msg);
}

/* How long input waits for a command that does not read it. */
#define INPUT_WAIT_MS 5000

/* Writes @len bytes of input to the non-blocking @fd, waiting for room
 * at most INPUT_WAIT_MS in all: 0, -EAGAIN when the command did not read
 * them in time, -EPIPE when its input is gone. */
static int input_write(int fd, const uint8_t *p, size_t len) {
        uint64_t end = 0;

        while (len > 0) {
                ssize_t n = write(fd, p, len);

                if (n > 0) {
                        p += n;
                        len -= (size_t)n;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN) {
                        struct pollfd pf = {.fd = fd, .events = POLLOUT};
                        struct timespec ts;
                        uint64_t now;

                        (void)clock_gettime(CLOCK_MONOTONIC, &ts);
                        now = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
                        if (!end)
                                end = now + INPUT_WAIT_MS;
                        if (now >= end)
                                return -EAGAIN;
                        (void)poll(&pf, 1, (int)(end - now));
                        continue;
                }
                return -EPIPE;
        }
        return 0;
}

static void broker_ctl(Broker *b, size_t i) {
        uint8_t buf[INPUT_CHUNK + 8], ans = 0;
        ssize_t n = recv(b->ctls[i], buf, sizeof(buf), MSG_DONTWAIT);
        int r = 0;

        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n <= 0) {
                b->ctls[i] = safe_close(b->ctls[i]);
                return;
        }
        switch (buf[0]) {
        case OP_INPUT: {
                int fd = b->master >= 0 ? b->master : b->in_fd;

                if (fd < 0)
                        r = EPIPE;
                else if (n > 1)
                        r = -input_write(fd, buf + 1, (size_t)n - 1);
                break;
        }
        case OP_CLOSE:
                if (b->master >= 0)
                        r = EINVAL;
                else
                        b->in_fd = safe_close(b->in_fd);
                break;
        case OP_RESIZE:
                if (b->master < 0 || n != 5)
                        r = EINVAL;
                else {
                        struct winsize ws = {.ws_col = (unsigned short)(buf[1] << 8 | buf[2]),
                                             .ws_row = (unsigned short)(buf[3] << 8 | buf[4])};

                        if (ioctl(b->master, TIOCSWINSZ, &ws) < 0)
                                r = errno;
                }
                break;
        case OP_SUBSCRIBE:
                for (size_t k = 0; k < SUBSCRIBERS_MAX; k++)
                        if (b->subs[k] < 0) {
                                b->subs[k] = b->ctls[i];
                                b->ctls[i] = -EBADF;
                                return;
                        }
                r = EBUSY;
                break;
        default:
                r = EINVAL;
        }
        ans = (uint8_t)r;
        if (send(b->ctls[i], &ans, 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
                b->ctls[i] = safe_close(b->ctls[i]);
}

static void broker_accept(Broker *b) {
        int fd = accept4(b->listen, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        struct ucred cred;
        socklen_t cl = sizeof(cred);

        if (fd < 0)
                return;
        /* SECURITY: only this server's own forks talk to a broker (the
         * folder is 0700 already; this holds if it ever is not). */
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0 || cred.uid != geteuid()) {
                (void)close(fd);
                return;
        }
        for (size_t i = 0; i < CONTROLS_MAX; i++)
                if (b->ctls[i] < 0) {
                        b->ctls[i] = fd;
                        return;
                }
        (void)close(fd);
}

static uint64_t now_ms(void) {
        struct timespec ts;

        (void)clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Reads what one output fd has; false at its end. */
static bool broker_output(Broker *b, size_t k) {
        static char buf[OUTPUT_CHUNK];
        ssize_t n = read(b->out[k], buf, sizeof(buf));

        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return true;
        if (n <= 0)
                return false; /* EOF, or EIO from a pty master whose slave closed */
        broker_send_all(b, data_event(b->master >= 0 ? "pty"
                                      : k == 0       ? "stdout"
                                                     : "stderr",
                                      buf, (size_t)n));
        return true;
}

/* Runs the broker until the exec's outcome and its output's end. */
/* Whether the broker's sandbox is paused now (its record says so). */
static bool broker_paused(const Broker *b) {
        json_t *rec = NULL;
        bool paused;

        if (e2b_table_load(b->call->req->srv, b->call->sbx.id, &rec) < 0)
                return false;
        paused = json_is_string(json_object_get(rec, "state")) &&
                 strcmp(json_string_value(json_object_get(rec, "state")), "paused") == 0;
        json_decref(rec);
        return paused;
}

/* A pause that froze the sandbox (issue 20) ends the streams, as E2B's
 * does (its envd is paused with the sandbox), and the Start client's
 * with them; the command goes on when it is resumed, and Connect finds it
 * again by its pid. */
static void broker_end_listeners(Broker *b) {
        _cleanup_free_ char *end =
                connect_end_stream_json(CONNECT_UNAVAILABLE, "the sandbox was paused");
        _cleanup_free_ char *wire = NULL;

        if (end && asprintf(&wire, "%c%s", EV_END, end) < 0)
                wire = NULL;
        for (size_t i = 0; i < SUBSCRIBERS_MAX; i++) {
                if (b->subs[i] < 0)
                        continue;
                if (wire)
                        (void)send(b->subs[i], wire, strlen(wire), MSG_NOSIGNAL);
                b->subs[i] = safe_close(b->subs[i]);
        }
        if (b->client) {
                (void)envd_stream_end(b->call, CONNECT_UNAVAILABLE, "the sandbox was paused");
                /* The broker goes on with the command and never reads
                 * this connection again: closed, so that the client does
                 * not send its next request on it. */
                (void)shutdown(b->call->req->conn->fd, SHUT_RDWR);
        }
        b->client = false;
}

static bool broker_listened(const Broker *b) {
        if (b->client)
                return true;
        for (size_t i = 0; i < SUBSCRIBERS_MAX; i++)
                if (b->subs[i] >= 0)
                        return true;
        return false;
}

static int broker_run(Broker *b, uint64_t timeout_ms) {
        _cleanup_free_ char *outcome = NULL;
        uint64_t start = now_ms(), deadline = timeout_ms ? start + timeout_ms : 0;
        uint64_t drain_until = 0, last_ping = start, paused_since = 0, pause_checked = start;
        bool have_outcome = false, timed_out = false, paused = false;
        int exit_code = 0, r;
        ConnectCode code = CONNECT_OK;
        const char *why;
        json_t *last = NULL;

        for (;;) {
                struct pollfd p[5 + CONTROLS_MAX];
                size_t np = 0, ictl;
                int wait = PING_INTERVAL_MS;
                uint64_t now;

                for (size_t k = 0; k < 2; k++)
                        p[np++] = (struct pollfd){.fd = b->out[k], .events = POLLIN};
                p[np++] = (struct pollfd){.fd = have_outcome ? -1
                                                             : hutch_ext_exec_stream_fd(b->stream),
                                          .events = POLLIN};
                p[np++] = (struct pollfd){.fd = b->listen, .events = POLLIN};
                ictl = np;
                for (size_t i = 0; i < CONTROLS_MAX; i++)
                        p[np++] = (struct pollfd){.fd = b->ctls[i], .events = POLLIN};
                /* The Start client hanging up (nothing else comes on its
                 * connection while the stream is open). */
                p[np++] = (struct pollfd){.fd = b->client ? b->call->req->conn->fd : -1,
                                          .events = POLLRDHUP};
                now = now_ms();
                if (deadline && !timed_out && !paused_since)
                        wait = deadline > now ? (int)MIN(deadline - now, (uint64_t)wait) : 0;
                if (have_outcome)
                        wait = drain_until > now ? (int)(drain_until - now) : 0;
                else if (broker_listened(b) || (deadline && !timed_out))
                        wait = MIN(wait, pause_checked + PAUSE_CHECK_MS > now
                                                 ? (int)(pause_checked + PAUSE_CHECK_MS - now)
                                                 : 0);
                if (b->out[0] < 0 && b->out[1] < 0 && have_outcome)
                        break;
                r = poll(p, np, wait);
                if (r < 0 && errno != EINTR)
                        return -errno;
                now = now_ms();
                /* The record is read every PAUSE_CHECK_MS, not at each
                 * wake-up (issue 20: each output or outcome would read
                 * it); at each wake-up while it was last seen paused (a
                 * resume is seen before a new listener is ended), and
                 * always before a deadline kills the command. */
                if (!have_outcome && (broker_listened(b) || (deadline && !timed_out)) &&
                    (paused || now - pause_checked >= PAUSE_CHECK_MS ||
                     (deadline && !timed_out && !paused_since && now >= deadline))) {
                        paused = broker_paused(b);
                        pause_checked = now;
                }
                /* The time the sandbox was paused (frozen) does not count
                 * against timeoutMs, as E2B's whole VM stops: the deadline
                 * moves on by it at the resume (docs/e2b.md "Pause"). */
                if (deadline && !timed_out && paused && !paused_since)
                        paused_since = now;
                else if (deadline && !timed_out && !paused && paused_since) {
                        deadline += now - paused_since;
                        paused_since = 0;
                }
                if (deadline && !timed_out && !paused_since && now >= deadline) {
                        /* The call's deadline (timeoutMs): the command is
                         * killed, as its stream ends. */
                        timed_out = true;
                        (void)hutch_ext_exec_stream_signal(b->stream, SIGKILL);
                }
                if (have_outcome && now >= drain_until)
                        break;
                for (size_t k = 0; k < 2; k++)
                        if (p[k].revents && !broker_output(b, k))
                                b->out[k] = safe_close(b->out[k]);
                if (p[2].revents) {
                        HutchError err = {};
                        uint64_t id = 0;
                        char *json = NULL;

                        r = hutch_ext_exec_stream_answer(b->stream, &id, &exit_code, &json, &err);
                        if (r == HUTCH_EXT_ANSWER_OUTCOME) {
                                outcome = json;
                                have_outcome = true;
                                drain_until = now + EOF_GRACE_MS;
                        } else if (r < 0 && r != -EAGAIN) {
                                /* The keeper went away: the sandbox was
                                 * killed, paused or stopped. unavailable
                                 * is what the SDK reads as "the sandbox
                                 * is gone" (its TimeoutError). */
                                free(json);
                                have_outcome = true;
                                drain_until = now + EOF_GRACE_MS;
                                code = CONNECT_UNAVAILABLE;
                        } else
                                free(json);
                }
                if (p[3].revents)
                        broker_accept(b);
                for (size_t i = 0; i < CONTROLS_MAX; i++)
                        if (p[ictl + i].revents)
                                broker_ctl(b, i);
                if (p[ictl + CONTROLS_MAX].revents)
                        b->client = false;
                if (!have_outcome && broker_listened(b) && paused)
                        broker_end_listeners(b);
                if (b->client && now - last_ping >= PING_INTERVAL_MS) {
                        last_ping = now;
                        broker_send_all(b, event_message("keepalive", json_object()));
                }
                if (!b->client && !b->released) {
                        /* The command goes on (E2B's background commands
                         * run until killed or the sandbox ends; Connect
                         * finds it by pid), but holds no connection slot
                         * of the server's any more. */
                        b->released = true;
                        e2b_conn_release(b->call->req->srv);
                }
        }
        if (timed_out)
                code = CONNECT_DEADLINE_EXCEEDED;
        if (code == CONNECT_OK)
                last = end_event(exit_code, outcome);
        why = code == CONNECT_DEADLINE_EXCEEDED ? "the command's timeout passed"
              : code == CONNECT_OK              ? NULL
                                                : "the sandbox was stopped or killed";
        broker_send_subs(b, last);
        {
                _cleanup_free_ char *end = connect_end_stream_json(code, why);

                for (size_t i = 0; end && i < SUBSCRIBERS_MAX; i++) {
                        _cleanup_free_ char *wire = NULL;

                        if (b->subs[i] < 0)
                                continue;
                        if (asprintf(&wire, "%c%s", EV_END, end) >= 0)
                                (void)send(b->subs[i], wire, strlen(wire), MSG_NOSIGNAL);
                }
        }
        /* The end event and the end-of-stream frame in one write (issue
         * 20: the client wakes once for them). */
        if (b->client && last)
                (void)envd_stream_last(b->call, TAKE_PTR(last), code, why);
        else if (b->client)
                (void)envd_stream_end(b->call, code, why);
        json_decref(last);
        return 0;
}

static void broker_done(Broker *b) {
        if (b->listen >= 0 && b->dirfd >= 0 && b->sock_name[0])
                (void)unlinkat(b->dirfd, b->sock_name, 0);
        b->listen = safe_close(b->listen);
        b->dirfd = -EBADF;
        b->stream = hutch_ext_exec_stream_close(b->stream);
        b->in_fd = safe_close(b->in_fd);
        if (b->master < 0)
                b->out[0] = safe_close(b->out[0]);
        b->out[1] = safe_close(b->out[1]);
        b->master = safe_close(b->master);
        for (size_t i = 0; i < SUBSCRIBERS_MAX; i++)
                b->subs[i] = safe_close(b->subs[i]);
        for (size_t i = 0; i < CONTROLS_MAX; i++)
                b->ctls[i] = safe_close(b->ctls[i]);
}

static int broker_listen(Broker *b) {
        struct sockaddr_un sa;
        socklen_t len;
        int r;

        b->dirfd = broker_dir(b->call->req->srv);
        if (b->dirfd < 0)
                return b->dirfd;
        (void)snprintf(b->sock_name, sizeof(b->sock_name), "%s-%" PRIu64 ".sock", b->call->sbx.name,
                       b->id);
        r = broker_addr(b->dirfd, b->call->sbx.name, b->id, &sa, &len);
        if (r < 0)
                return r;
        b->listen = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (b->listen < 0)
                return -errno;
        r = bind(b->listen, (struct sockaddr *)&sa, len);
        if (r < 0 && errno == EADDRINUSE) {
                /* A socket left by a broker of an earlier server with the
                 * same id (ids are unique in a server's sandbox). */
                (void)unlinkat(b->dirfd, b->sock_name, 0);
                r = bind(b->listen, (struct sockaddr *)&sa, len);
        }
        if (r < 0 || listen(b->listen, 16) < 0)
                return -errno;
        return 0;
}

/* The StartRequest's command: argv (cmd + args) and env ("K=V"). */
static int start_decode(EnvdCall *call, char ***ret_argv, char ***ret_env, const char **ret_cwd) {
        _cleanup_strv_free_ char **argv = NULL, **env = NULL;
        json_t *p = json_object_get(call->msg, "process"), *v;
        const char *bad_name, *key;
        size_t i;

        bad_name = json_fields_unknown(call->msg, start_fields, ELEMENTSOF(start_fields));
        if (bad_name)
                return bad(call, bad_name, "is an unknown field");
        if (!json_is_object(p))
                return bad(call, "process", "is required");
        bad_name = json_fields_unknown(p, start_process_fields, ELEMENTSOF(start_process_fields));
        if (bad_name)
                return bad(call, bad_name, "is an unknown field of process");
        v = json_object_get(p, "cmd");
        if (!json_is_string(v) || json_string_length(v) == 0 ||
            strlen(json_string_value(v)) != json_string_length(v))
                return bad(call, "process.cmd", "must name a command");
        if (strv_extend(&argv, json_string_value(v)) < 0)
                return -ENOMEM;
        v = json_object_get(p, "args");
        if (v && !json_is_null(v) && !json_is_array(v))
                return bad(call, "process.args", "must be an array of strings");
        json_array_foreach(v, i, p) {
                if (!json_is_string(p) || strlen(json_string_value(p)) != json_string_length(p))
                        return bad(call, "process.args", "must be an array of strings");
                if (strv_extend(&argv, json_string_value(p)) < 0)
                        return -ENOMEM;
        }
        p = json_object_get(call->msg, "process");
        v = json_object_get(p, "envs");
        if (v && !json_is_null(v) && !json_is_object(v))
                return bad(call, "process.envs", "must be an object of strings");
        json_object_foreach(v, key, p) {
                _cleanup_free_ char *kv = NULL;

                if (!json_is_string(p) || !key[0] || strchr(key, '=') ||
                    strlen(json_string_value(p)) != json_string_length(p))
                        return bad(call, "process.envs", "must be an object of strings");
                if (asprintf(&kv, "%s=%s", key, json_string_value(p)) < 0)
                        return -ENOMEM;
                if (strv_extend(&env, kv) < 0)
                        return -ENOMEM;
        }
        p = json_object_get(call->msg, "process");
        v = json_object_get(p, "cwd");
        *ret_cwd = NULL;
        if (v && !json_is_null(v)) {
                if (!json_is_string(v) || json_string_value(v)[0] != '/')
                        return bad(call, "process.cwd", "must be an absolute path");
                *ret_cwd = json_string_value(v);
        }
        v = json_object_get(call->msg, "tag");
        if (v && !json_is_null(v)) {
                /* Tags are not kept (nor selectable): refused, not dropped. */
                (void)envd_reply_code(call, CONNECT_UNIMPLEMENTED,
                                      "process tags are not supported");
                return -EOPNOTSUPP;
        }
        v = json_object_get(call->msg, "stdin");
        if (v && !json_is_null(v) && !json_is_boolean(v))
                return bad(call, "stdin", "must be a boolean");
        *ret_argv = TAKE_PTR(argv);
        *ret_env = TAKE_PTR(env);
        return 0;
}

/* An error of Start before its stream began: the stream is its carrier. */
static int start_fail(EnvdCall *call, ConnectCode code, const char *msg) {
        int r;

        envd_stream_begin_with_next(call);
        r = envd_stream_end(call, code, msg);
        return r < 0 ? r : 1;
}

static int proc_start(EnvdCall *call) {
        _cleanup_strv_free_ char **argv = NULL, **env = NULL;
        Broker b = {.call = call,
                    .in_fd = -EBADF,
                    .out = {-EBADF, -EBADF},
                    .master = -EBADF,
                    .listen = -EBADF,
                    .dirfd = -EBADF,
                    .client = true};
        json_t *pty = json_object_get(call->msg, "pty");
        uint16_t cols = 80, rows = 24;
        HutchError err = {};
        HutchExtStreamOpts o;
        const char *cwd = NULL, *user = NULL;
        bool want_stdin = json_is_true(json_object_get(call->msg, "stdin"));
        int code = 0, r;

        for (size_t i = 0; i < SUBSCRIBERS_MAX; i++)
                b.subs[i] = -EBADF;
        for (size_t i = 0; i < CONTROLS_MAX; i++)
                b.ctls[i] = -EBADF;
        r = start_decode(call, &argv, &env, &cwd);
        if (r < 0)
                return r == -ENOMEM ? start_fail(call, CONNECT_RESOURCE_EXHAUSTED, "out of memory")
                                    : 1;
        if (pty && !json_is_null(pty) && pty_size(call, pty, &cols, &rows) < 0)
                return 1;
        if (pty && json_is_null(pty))
                pty = NULL;
        r = envd_user_spec(call->sbx.name, call->user, &user);
        if (r < 0)
                return start_fail(call, connect_code_from_errno(-r), strerror(-r));
        o = (HutchExtStreamOpts){
                .argv = argv,
                .env = env,
                .cwd = cwd,
                .user = user,
                .tty = pty != NULL,
                .stdin_pipe = want_stdin,
        };
        r = hutch_ext_exec_stream_open(call->sbx.name, &o, &b.stream, &err);
        if (r < 0)
                return start_fail(call, connect_code_from_errno(-r),
                                  err.msg[0] ? err.msg : strerror(-r));
        /* Without a pty: stdin's write end (the broker must not block on a
         * command that does not read: its output would stop being
         * drained), stdout's and stderr's read ends, all non-blocking. */
        hutch_ext_exec_stream_take_stdio(b.stream, &b.in_fd, &b.out[0], &b.out[1]);
        r = hutch_ext_exec_stream_answer(b.stream, &b.id, &code, NULL, &err);
        if (r < 0)
                goto fail;
        if (r != HUTCH_EXT_ANSWER_STARTED) {
                r = -EPROTO;
                goto fail;
        }
        if (pty) {
                r = hutch_ext_exec_stream_pty(b.stream, cols, rows, &b.master);
                if (r < 0)
                        goto fail;
                b.out[0] = b.master;
        }
        r = broker_listen(&b);
        if (r < 0)
                goto fail;
        envd_stream_begin_with_next(call);
        r = envd_stream_message(
                call, event_message("start", json_pack("{s:I}", "pid", (json_int_t)b.id)));
        if (r < 0)
                b.client = false;
        (void)broker_run(&b, call->timeout_ms);
        broker_done(&b);
        return 1;

fail:
        broker_done(&b);
        return start_fail(call, connect_code_from_errno(-r), err.msg[0] ? err.msg : strerror(-r));
}

/* ---- Connect: a subscriber of the broker ---- */

static int proc_connect(EnvdCall *call) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        const char *bad_name =
                json_fields_unknown(call->msg, selector_fields, ELEMENTSOF(selector_fields));
        uint8_t op = OP_SUBSCRIBE;
        uint64_t id = 0;
        int r;

        if (bad_name)
                return bad(call, bad_name, "is an unknown field"), 1;
        if (selector(call, json_object_get(call->msg, "process"), &id) < 0)
                return 1;
        fd = broker_connect(call, id);
        if (fd < 0)
                return start_fail(call, CONNECT_NOT_FOUND, "no such running process");
        if (send(fd, &op, 1, MSG_NOSIGNAL) < 0)
                return start_fail(call, CONNECT_NOT_FOUND, "no such running process");
        envd_stream_begin_with_next(call);
        r = envd_stream_message(call,
                                event_message("start", json_pack("{s:I}", "pid", (json_int_t)id)));
        buf = malloc(OUTPUT_CHUNK * 2 + 1024);
        while (r >= 0 && buf) {
                struct pollfd pf[2] = {{.fd = fd, .events = POLLIN},
                                       {.fd = call->req->conn->fd, .events = POLLRDHUP}};
                ssize_t n;

                if (poll(pf, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                if (pf[1].revents)
                        return 1; /* the client went away; the process goes on */
                n = recv(fd, buf, OUTPUT_CHUNK * 2 + 1023, 0);
                if (n <= 0) {
                        (void)envd_stream_end(call, CONNECT_OK, NULL);
                        return 1;
                }
                buf[n] = '\0';
                if (buf[0] == EV_END) {
                        json_t *o = json_loads(buf + 1, 0, NULL);
                        json_t *e = json_object_get(o, "error");

                        (void)envd_stream_end(call,
                                              e ? connect_code_from_string(json_string_value(
                                                          json_object_get(e, "code")))
                                                : CONNECT_OK,
                                              json_string_value(json_object_get(e, "message")));
                        json_decref(o);
                        return 1;
                }
                if (buf[0] != EV_MESSAGE)
                        continue;
                {
                        json_t *o = json_loads(buf + 1, 0, NULL);

                        r = envd_stream_message(call, o);
                }
        }
        return 1;
}

/* ---- unary calls ---- */

static int proc_list(EnvdCall *call) {
        hutch_exec_info *l = NULL;
        /* ListRequest has no member. */
        const char *bad_name = json_fields_unknown(call->msg, NULL, 0);
        hutch_error err = {};
        json_t *arr;
        size_t n = 0;
        int r;

        if (bad_name)
                return bad(call, bad_name, "is an unknown field"), 0;
        r = hutch_exec_list(call->sbx.name, &l, &n, &err);
        if (r < 0)
                return envd_reply_hutch_error(call, r, &err);
        arr = json_array();
        for (size_t i = 0; arr && i < n; i++) {
                json_t *args = json_array(), *cfg;

                for (size_t k = 1; args && l[i].argv && l[i].argv[0] && l[i].argv[k]; k++)
                        (void)json_array_append_new(args, json_string(l[i].argv[k]));
                cfg = json_pack("{s:s,s:o}", "cmd", l[i].argv && l[i].argv[0] ? l[i].argv[0] : "",
                                "args", args);
                (void)json_array_append_new(
                        arr, json_pack("{s:o,s:I}", "config", cfg, "pid", (json_int_t)l[i].id));
        }
        hutch_exec_list_free(l, n);
        if (!arr)
                return envd_reply_code(call, CONNECT_RESOURCE_EXHAUSTED, "out of memory");
        return envd_reply_message(call, json_pack("{s:o}", "processes", arr));
}

/* Waits up to @ms for exec @id to leave the sandbox's list (its keeper
 * reaps it on its own time after the kill): the SDK's kill() and the List
 * that follows see one order. */
static void exec_gone_wait(const char *name, uint64_t id, uint64_t ms) {
        uint64_t end = now_ms() + ms;

        for (;;) {
                hutch_exec_info *l = NULL;
                hutch_error err = {};
                bool listed = false;
                size_t n = 0;

                if (hutch_exec_list(name, &l, &n, &err) < 0)
                        return;
                for (size_t i = 0; i < n; i++)
                        listed = listed || l[i].id == id;
                hutch_exec_list_free(l, n);
                if (!listed || now_ms() >= end)
                        return;
                (void)poll(NULL, 0, 5);
        }
}

static int proc_send_signal(EnvdCall *call) {
        const char *s = json_string_value(json_object_get(call->msg, "signal"));
        const char *bad_name =
                json_fields_unknown(call->msg, signal_fields, ELEMENTSOF(signal_fields));
        hutch_error err = {};
        uint64_t id = 0;
        int sig, r;

        if (bad_name)
                return bad(call, bad_name, "is an unknown field"), 0;
        if (selector(call, json_object_get(call->msg, "process"), &id) < 0)
                return 0;
        if (s && strcmp(s, "SIGNAL_SIGKILL") == 0)
                sig = SIGKILL;
        else if (s && strcmp(s, "SIGNAL_SIGTERM") == 0)
                sig = SIGTERM;
        else if (json_integer_value(json_object_get(call->msg, "signal")) == 9)
                sig = SIGKILL;
        else if (json_integer_value(json_object_get(call->msg, "signal")) == 15)
                sig = SIGTERM;
        else
                return bad(call, "signal", "must be SIGNAL_SIGKILL or SIGNAL_SIGTERM"), 0;
        /* SIGKILL reaches everything the exec started, at once; SIGTERM's
         * stragglers get SIGKILL 10 s later, as `hutch kill`. */
        r = hutch_exec_signal(call->sbx.name, id, sig, sig == SIGKILL ? 0 : 10000, &err);
        if (r == -ESRCH)
                return envd_reply_code(call, CONNECT_NOT_FOUND, "process %" PRIu64 " has ended",
                                       id);
        if (r < 0)
                return envd_reply_hutch_error(call, r, &err);
        /* A SIGKILL ends it at once: answer once it is gone (bounded; a
         * process stuck in the kernel is answered for after 2 s). */
        if (sig == SIGKILL)
                exec_gone_wait(call->sbx.name, id, 2000);
        return envd_reply_message(call, json_object());
}

/* SendInput, CloseStdin, Update: an op for the process's broker. */
static int proc_broker_call(EnvdCall *call, const char *method) {
        const JsonFieldDef *names = strcmp(method, "SendInput") == 0    ? input_fields
                                    : strcmp(method, "CloseStdin") == 0 ? selector_fields
                                                                        : update_fields;
        _cleanup_free_ uint8_t *data = NULL;
        _cleanup_close_ int fd = -EBADF;
        size_t n_names = names == selector_fields ? ELEMENTSOF(selector_fields)
                         : names == input_fields  ? ELEMENTSOF(input_fields)
                                                  : ELEMENTSOF(update_fields);
        const char *bad_name = json_fields_unknown(call->msg, names, n_names);
        uint8_t msg[5];
        size_t len = 0;
        uint64_t id = 0;
        int r;

        if (bad_name)
                return bad(call, bad_name, "is an unknown field"), 0;
        if (selector(call, json_object_get(call->msg, "process"), &id) < 0)
                return 0;
        if (names == input_fields) {
                json_t *in = json_object_get(call->msg, "input");
                json_t *v = json_object_get(in, "stdin") ? json_object_get(in, "stdin")
                                                         : json_object_get(in, "pty");

                if (!json_is_object(in) || json_object_size(in) != 1 || !json_is_string(v) ||
                    base64_decode(json_string_value(v), json_string_length(v),
                                  BASE64_URL_TOO | BASE64_PAD_OPTIONAL, &data, &len) < 0)
                        return bad(call, "input", "must be {\"stdin\"|\"pty\": base64}"), 0;
        }
        fd = broker_connect(call, id);
        if (fd < 0)
                return envd_reply_code(call, CONNECT_NOT_FOUND,
                                       "process %" PRIu64 " is not running (or has no input)", id);
        if (names == input_fields) {
                _cleanup_free_ uint8_t *chunk = malloc(INPUT_CHUNK + 1);

                if (!chunk)
                        return envd_reply_code(call, CONNECT_RESOURCE_EXHAUSTED, "out of memory");
                r = 0;
                for (size_t off = 0; r >= 0 && (off < len || len == 0);) {
                        size_t n = MIN(len - off, (size_t)INPUT_CHUNK);

                        chunk[0] = OP_INPUT;
                        memcpy(chunk + 1, data + off, n);
                        r = broker_op(fd, chunk, n + 1);
                        off += n;
                        if (len == 0)
                                break;
                }
        } else if (names == selector_fields) {
                msg[0] = OP_CLOSE;
                r = broker_op(fd, msg, 1);
        } else {
                uint16_t cols = 0, rows = 0;

                if (pty_size(call, json_object_get(call->msg, "pty"), &cols, &rows) < 0)
                        return 0;
                msg[0] = OP_RESIZE;
                msg[1] = (uint8_t)(cols >> 8);
                msg[2] = (uint8_t)cols;
                msg[3] = (uint8_t)(rows >> 8);
                msg[4] = (uint8_t)rows;
                r = broker_op(fd, msg, 5);
        }
        if (r == -EINVAL)
                return envd_reply_code(call, CONNECT_FAILED_PRECONDITION,
                                       names == update_fields
                                               ? "process %" PRIu64 " has no terminal"
                                               : "process %" PRIu64 " has a terminal, not stdin",
                                       id);
        if (r == -EAGAIN)
                return envd_reply_code(call, CONNECT_RESOURCE_EXHAUSTED,
                                       "process %" PRIu64 " does not read its input", id);
        if (r == -EPIPE)
                return envd_reply_code(call, CONNECT_FAILED_PRECONDITION,
                                       "process %" PRIu64 "'s stdin is closed (start it with "
                                       "stdin: true)",
                                       id);
        if (r < 0)
                return envd_reply_code(call, connect_code_from_errno(-r), "%s", strerror(-r));
        return envd_reply_message(call, json_object());
}

int envd_process_method_shape(const char *method) {
        static const char *const unary[] = {"List",       "SendInput", "SendSignal",
                                            "CloseStdin", "Update",    NULL};

        if (strcmp(method, "Start") == 0 || strcmp(method, "Connect") == 0)
                return 1;
        for (size_t i = 0; unary[i]; i++)
                if (strcmp(unary[i], method) == 0)
                        return 0;
        /* StreamInput is a client stream: the SDK does not call it, and
         * HTTP/1.1 cannot carry it; unknown like any other method. */
        return -ENOENT;
}

int envd_process_call(EnvdCall *call, const char *method) {
        if (strcmp(method, "Start") == 0)
                return proc_start(call);
        if (strcmp(method, "Connect") == 0)
                return proc_connect(call);
        if (strcmp(method, "List") == 0)
                return proc_list(call);
        if (strcmp(method, "SendSignal") == 0)
                return proc_send_signal(call);
        if (strcmp(method, "SendInput") == 0 || strcmp(method, "CloseStdin") == 0 ||
            strcmp(method, "Update") == 0)
                return proc_broker_call(call, method);
        return -ENOENT;
}
