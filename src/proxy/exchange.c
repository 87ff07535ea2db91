/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "exchange.h"
#include "macro.h"
#include "time-util.h"

#define REASON_MAX 1024

static const HttpLimits request_limits = {
        .line_max = HTTP_REQUEST_LINE_MAX,
        .head_max = HTTP_REQUEST_HEAD_MAX,
        .fields_max = HTTP_REQUEST_FIELDS_MAX,
};

static const HttpLimits response_limits = {
        .line_max = HTTP_RESPONSE_LINE_MAX,
        .head_max = HTTP_RESPONSE_HEAD_MAX,
        .fields_max = HTTP_RESPONSE_FIELDS_MAX,
};

static bool ex_forwarding(Exchange *e) {
        return e->ops->forwarding(e);
}

void exchange_fail(Exchange *e, AuditDecision d, unsigned status, const char *reason,
                   const char *secret) {
        if (e->resp_head_sent)
                e->ops->cut(e, d, reason, secret);
        else
                e->ops->answer(e, d, status, reason, secret);
}

static void upstream_failed(Exchange *e, const char *reason) {
        exchange_fail(e, AUDIT_ALLOW, 502, reason, NULL);
}

static void timer_cb(evutil_socket_t fd, short what, void *arg);
static void kick_cb(evutil_socket_t fd, short what, void *arg);

int exchange_init(Exchange *e, const ExchangeOps *ops, void *userdata, struct event_base *base,
                  uint64_t head_timeout_ms) {
        *e = (Exchange){.ops = ops, .userdata = userdata, .head_timeout_ms = head_timeout_ms};
        e->timer = evtimer_new(base, timer_cb, e);
        e->kick = event_new(base, -1, 0, kick_cb, e);
        if (!e->timer || !e->kick ||
            http_message_init(&e->req, HTTP_REQUEST, &request_limits) < 0 ||
            http_message_init(&e->resp, HTTP_RESPONSE, &response_limits) < 0) {
                exchange_done(e);
                return -ENOMEM;
        }
        return 0;
}

void exchange_done(Exchange *e) {
        if (e->timer)
                event_free(e->timer);
        if (e->kick)
                event_free(e->kick);
        e->timer = e->kick = NULL;
        e->awaiting = false;
        e->timer_kind = EXCHANGE_TIMER_NONE;
        http_message_done(&e->req);
        http_message_done(&e->resp);
}

static void arm_timer(Exchange *e, ExchangeTimer kind, uint64_t ms) {
        struct timeval tv = {.tv_sec = (time_t)(ms / 1000),
                             .tv_usec = (suseconds_t)((ms % 1000) * 1000)};

        e->timer_kind = kind;
        (void)evtimer_add(e->timer, &tv);
}

void exchange_stop_timer(Exchange *e) {
        if (e->timer_kind == EXCHANGE_TIMER_NONE)
                return;
        e->timer_kind = EXCHANGE_TIMER_NONE;
        (void)evtimer_del(e->timer);
}

void exchange_await_request(Exchange *e, uint64_t idle_ms) {
        http_message_reset(&e->req);
        e->awaiting = true;
        exchange_stop_timer(e);
        arm_timer(e, EXCHANGE_TIMER_IDLE, idle_ms);
        (void)bufferevent_enable(e->cl, EV_READ);
        /* A request already buffered (pipelined) is processed from the
         * loop, not from here, so a burst of them cannot recurse. */
        if (evbuffer_get_length(bufferevent_get_input(e->cl)) > 0)
                event_active(e->kick, 0, 0);
}

void exchange_read_request(Exchange *e) {
        while (e->awaiting) {
                struct evbuffer *in = bufferevent_get_input(e->cl);
                struct evbuffer_iovec vec;
                ssize_t n;

                if (evbuffer_get_length(in) == 0)
                        return;
                /* SECURITY: the first byte of a request: from now on the
                 * head has head_timeout_ms to arrive, however slowly it
                 * trickles in (slowloris), inside a tunnel too. */
                if (e->timer_kind == EXCHANGE_TIMER_IDLE) {
                        exchange_stop_timer(e);
                        arm_timer(e, EXCHANGE_TIMER_HEAD, e->head_timeout_ms);
                }
                if (evbuffer_peek(in, -1, NULL, &vec, 1) < 1)
                        return;
                n = http_message_feed(&e->req, vec.iov_base, vec.iov_len);
                if (n < 0) {
                        e->awaiting = false;
                        exchange_stop_timer(e);
                        e->ops->request_refused(e, (unsigned)e->req.status,
                                                e->req.error ? e->req.error : "malformed request");
                        return;
                }
                (void)evbuffer_drain(in, (size_t)n);
                if (e->req.state != HTTP_MESSAGE_HEAD) {
                        e->awaiting = false;
                        exchange_stop_timer(e);
                        (void)bufferevent_disable(e->cl, EV_READ);
                        e->ops->request_head(e);
                        return;
                }
        }
}

static void kick_cb(evutil_socket_t fd, short what, void *arg) {
        exchange_read_request(arg);
}

static void timer_cb(evutil_socket_t fd, short what, void *arg) {
        Exchange *e = arg;
        ExchangeTimer kind = e->timer_kind;
        char reason[REASON_MAX];

        e->timer_kind = EXCHANGE_TIMER_NONE;
        if (!e->awaiting)
                return;
        e->awaiting = false;
        if (kind == EXCHANGE_TIMER_IDLE) {
                e->ops->idle(e);
                return;
        }
        (void)snprintf(reason, sizeof(reason),
                       "the request head did not arrive within %" PRIu64 " ms", e->head_timeout_ms);
        e->ops->request_refused(e, 408, reason);
}

void exchange_begin(Exchange *e) {
        e->in_exchange = true;
        e->started_us = time_monotonic_us();
        e->method[0] = '\0';
        if (e->req.state != HTTP_MESSAGE_HEAD && e->req.state != HTTP_MESSAGE_FAILED)
                (void)snprintf(e->method, sizeof(e->method), "%s",
                               http_method_str(http_message_method(&e->req)));
        e->status = 0;
        e->resp_head_sent = false;
        e->bytes_up = e->bytes_down = 0;
}

int exchange_audit(Exchange *e, Audit *audit, AuditRecord *r) {
        if (!e->in_exchange)
                return 0;
        e->in_exchange = false;
        r->method = e->method[0] ? e->method : NULL;
        r->status = e->status;
        r->bytes_up = e->bytes_up;
        r->bytes_down = e->bytes_down;
        r->duration_ms = (time_monotonic_us() - e->started_us) / 1000;
        return audit_log(audit, r);
}

int exchange_answer_text(Exchange *e, unsigned status, const char *text, bool keep) {
        struct evbuffer *out = bufferevent_get_output(e->cl);
        size_t before = evbuffer_get_length(out);
        int r;

        r = evbuffer_add_printf(out,
                                "HTTP/1.1 %u %s\r\n"
                                "Content-Type: text/plain; charset=utf-8\r\n"
                                "Content-Length: %zu\r\n"
                                "Connection: %s\r\n"
                                "\r\n"
                                "hutch-proxy: %s\n",
                                status, http_status_str((enum http_status)status),
                                strlen("hutch-proxy: ") + strlen(text) + 1,
                                keep ? "keep-alive" : "close", text);
        e->status = status;
        e->bytes_down += evbuffer_get_length(out) - before;
        return r < 0 ? -ENOMEM : 0;
}

int exchange_send_now(struct bufferevent *bev, const char *data, size_t len) {
        struct evbuffer *out = bufferevent_get_output(bev);
        ssize_t n = 0;

        if (evbuffer_get_length(out) == 0) {
                n = send(bufferevent_getfd(bev), data, len, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (n < 0)
                        n = 0;
        }
        /* A write error is left for the bufferevent to meet and report. */
        if ((size_t)n < len && evbuffer_add(out, data + n, len - (size_t)n) < 0)
                return -ENOMEM;
        return 0;
}

/* Moves @len bytes from @from to @bev's plain socket, the same way. */
static int move_now(struct bufferevent *bev, struct evbuffer *from, size_t len) {
        struct evbuffer *out = bufferevent_get_output(bev);
        int n = 0;

        if (evbuffer_get_length(out) == 0) {
                n = evbuffer_write_atmost(from, bufferevent_getfd(bev), (ev_ssize_t)len);
                if (n < 0)
                        n = 0;
        }
        if ((size_t)n < len &&
            evbuffer_remove_buffer(from, out, len - (size_t)n) != (int)(len - (size_t)n))
                return -ENOMEM;
        return 0;
}

bool exchange_request_keeps_alive(const Exchange *e) {
        return http_message_keep_alive(&e->req) && e->req.parser.http_major == 1 &&
               e->req.parser.http_minor == 1;
}

void exchange_run(Exchange *e) {
        e->close_after = !exchange_request_keeps_alive(e);
        http_message_reset(&e->resp);
        e->resp.skip_body = http_message_method(&e->req) == HTTP_HEAD;
        e->resp_feed_max = 0;
        e->body_error = NULL;
        exchange_forward_request_body(e);
        if (ex_forwarding(e) && evbuffer_get_length(bufferevent_get_input(e->up)) > 0)
                exchange_forward_response(e);
}

void exchange_forward_request_body(Exchange *e) {
        while (ex_forwarding(e) && e->req.state == HTTP_MESSAGE_BODY) {
                struct evbuffer *in = bufferevent_get_input(e->cl);
                struct evbuffer *out = bufferevent_get_output(e->up);
                struct evbuffer_iovec vec;
                ssize_t n;

                if (evbuffer_get_length(in) == 0) {
                        (void)bufferevent_enable(e->cl, EV_READ);
                        return;
                }
                if (evbuffer_get_length(out) >= EXCHANGE_HIGH_WATER) {
                        /* exchange_upstream_writable() resumes below LOW. */
                        (void)bufferevent_disable(e->cl, EV_READ);
                        bufferevent_setwatermark(e->up, EV_WRITE, EXCHANGE_LOW_WATER, 0);
                        return;
                }
                if (evbuffer_peek(in, -1, NULL, &vec, 1) < 1)
                        return;
                n = http_message_feed(&e->req, vec.iov_base, vec.iov_len);
                if (n < 0) {
                        char reason[REASON_MAX];

                        (void)snprintf(reason, sizeof(reason), "malformed request body: %s",
                                       e->req.error ? e->req.error : "?");
                        if (!e->ops->request_failed || !e->ops->request_failed(e, reason))
                                exchange_fail(e, AUDIT_ALLOW, 400, reason, NULL);
                        return;
                }
                if (e->verbatim) {
                        if (move_now(e->up, in, (size_t)n) < 0) {
                                upstream_failed(e, "out of memory");
                                return;
                        }
                        e->bytes_up += (uint64_t)n;
                        continue;
                }
                /* The body went out through req.on_body, re-framed. */
                (void)evbuffer_drain(in, (size_t)n);
                if (e->req.state == HTTP_MESSAGE_DONE && e->ops->request_done)
                        e->ops->request_done(e);
        }
        /* The whole request is out. Pipelined requests wait in the kernel
         * until this response is done. */
        if (ex_forwarding(e))
                (void)bufferevent_disable(e->cl, EV_READ);
}

/* A complete response head: checked, passed on by the owner, and after an
 * interim one the parser re-armed for the final one. */
static int ex_response_head(Exchange *e) {
        unsigned code = http_message_status_code(&e->resp);
        int r;

        if (code < 100 || code == 101) {
                upstream_failed(e, code == 101 ? "the upstream server switched protocols unasked"
                                               : "bad status from the upstream server");
                return -EBADMSG;
        }
        if (code >= 200)
                e->close_after = e->close_after || !http_message_keep_alive(&e->resp) ||
                                 e->req.state != HTTP_MESSAGE_DONE;
        r = e->ops->response_head(e);
        if (r < 0)
                return r;
        if (code < 200) {
                bool skip = e->resp.skip_body;

                http_message_reset(&e->resp);
                e->resp.skip_body = skip;
                return 0;
        }
        /* From here a failure can only cut the response short. */
        e->status = code;
        e->resp_head_sent = true;
        return 0;
}

void exchange_forward_response(Exchange *e) {
        while (ex_forwarding(e)) {
                struct evbuffer *in = bufferevent_get_input(e->up);
                struct evbuffer *out = bufferevent_get_output(e->cl);
                struct evbuffer_iovec vec;
                HttpMessageState before;
                size_t feed;
                ssize_t n;

                if (e->resp.state == HTTP_MESSAGE_DONE) {
                        /* The rest of the request would be taken for the
                         * next one. */
                        if (e->req.state != HTTP_MESSAGE_DONE)
                                e->close_after = true;
                        e->ops->done(e);
                        return;
                }
                if (evbuffer_get_length(in) == 0) {
                        if (!e->up_eof)
                                return;
                        if (http_message_finish(&e->resp) < 0) {
                                upstream_failed(e, "the upstream server closed the "
                                                   "connection before the response ended");
                                return;
                        }
                        continue;
                }
                if (e->resp.state == HTTP_MESSAGE_BODY &&
                    evbuffer_get_length(out) >= EXCHANGE_HIGH_WATER) {
                        /* exchange_client_writable() resumes below LOW. */
                        (void)bufferevent_disable(e->up, EV_READ);
                        bufferevent_setwatermark(e->cl, EV_WRITE, EXCHANGE_LOW_WATER, 0);
                        return;
                }
                if (evbuffer_peek(in, -1, NULL, &vec, 1) < 1)
                        return;
                before = e->resp.state;
                feed = vec.iov_len;
                if (e->resp_feed_max > 0)
                        feed = MIN(feed, e->resp_feed_max);
                n = http_message_feed(&e->resp, vec.iov_base, feed);
                if (n < 0) {
                        char reason[REASON_MAX];

                        (void)snprintf(reason, sizeof(reason),
                                       "bad response from the upstream server: %s",
                                       e->body_error   ? e->body_error
                                       : e->resp.error ? e->resp.error
                                                       : "malformed");
                        upstream_failed(e, reason);
                        return;
                }
                if (before == HTTP_MESSAGE_BODY && e->verbatim) {
                        /* Body bytes travel verbatim, chunked framing included. */
                        if (move_now(e->cl, in, (size_t)n) < 0) {
                                upstream_failed(e, "out of memory");
                                return;
                        }
                        e->bytes_down += (uint64_t)n;
                        continue;
                }
                (void)evbuffer_drain(in, (size_t)n);
                if (before == HTTP_MESSAGE_HEAD && e->resp.state != HTTP_MESSAGE_HEAD &&
                    ex_response_head(e) < 0)
                        return;
        }
}

void exchange_client_writable(Exchange *e) {
        /* The response backlog drained: read the upstream again. */
        bufferevent_setwatermark(e->cl, EV_WRITE, 0, 0);
        if (!e->up)
                return;
        (void)bufferevent_enable(e->up, EV_READ);
        exchange_forward_response(e);
}

void exchange_upstream_writable(Exchange *e) {
        bufferevent_setwatermark(e->up, EV_WRITE, 0, 0);
        if (e->req.state == HTTP_MESSAGE_BODY)
                exchange_forward_request_body(e);
}

void exchange_upstream_event(Exchange *e, short what) {
        if (what & BEV_EVENT_EOF) {
                e->up_eof = true;
                exchange_forward_response(e);
                return;
        }
        upstream_failed(e, what & BEV_EVENT_TIMEOUT ? "the upstream server did not answer in time"
                                                    : "the upstream connection failed");
}
