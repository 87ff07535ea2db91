/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The dashboard's requests (docs/ui.md): its static files, the login
 * form's POST, logout, and the session's CSRF token. Which requests reach
 * here without the bearer token is decided by the front (serve-ui.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/queue.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "serve-ui.h"
#include "serve.h"

/* SECURITY: nothing but the dashboard's own files run or load: no inline
 * script or style, no other origin, no framing, forms post only here. */
#define UI_CSP                                                                                     \
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "                \
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

static void add_headers(struct evhttp_request *req) {
        struct evkeyvalq *h = evhttp_request_get_output_headers(req);

        (void)evhttp_add_header(h, "Content-Security-Policy", UI_CSP);
        (void)evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
        (void)evhttp_add_header(h, "X-Frame-Options", "DENY");
        (void)evhttp_add_header(h, "Referrer-Policy", "no-referrer");
        (void)evhttp_add_header(h, "Cache-Control", "no-store");
}

static void redirect(struct evhttp_request *req, const char *location, const char *cookie) {
        struct evkeyvalq *h = evhttp_request_get_output_headers(req);

        add_headers(req);
        (void)evhttp_add_header(h, "Location", location);
        if (cookie)
                (void)evhttp_add_header(h, "Set-Cookie", cookie);
        evhttp_send_reply(req, 303, "See Other", NULL);
}

/* The session cookie of @req when it is valid, with its length; NULL. */
static const char *request_session(const Server *srv, struct evhttp_request *req, size_t *ret_len) {
        struct evkeyvalq *in = evhttp_request_get_input_headers(req);
        struct evkeyval *kv;

        TAILQ_FOREACH(kv, in, next) {
                const char *v;
                size_t len = 0;

                if (strcasecmp(kv->key, "Cookie") != 0)
                        continue;
                v = serve_ui_cookie_in_value(kv->value, strlen(kv->value), SERVE_UI_COOKIE, &len);
                if (v && serve_ui_session_check(srv->ui, v, len, (uint64_t)time(NULL))) {
                        *ret_len = len;
                        return v;
                }
        }
        return NULL;
}

/* POST /ui/login: the form's "token"; a session cookie when it is the
 * bearer token, else back to the form. */
static void ui_login(Server *srv, struct evhttp_request *req) {
        struct evbuffer *in = evhttp_request_get_input_buffer(req);
        size_t len = evbuffer_get_length(in);
        _cleanup_free_ char *body = NULL, *bearer = NULL, *cookie = NULL;
        struct evkeyvalq q;
        char value[SERVE_UI_COOKIE_MAX];
        const char *token;
        bool ok;

        if (!srv->has_token) {
                serve_reply_status(req, 404, "not_found", NULL,
                                   "no login here: the unix socket needs none (docs/ui.md)");
                return;
        }
        if (len > SERVE_UI_LOGIN_BODY_MAX) {
                serve_reply_status(req, 413, "too_large", NULL, "the login form is too large");
                return;
        }
        body = malloc(len + 1);
        if (!body || evbuffer_copyout(in, body, len) != (ev_ssize_t)len) {
                serve_reply_errno(req, ENOMEM, NULL, "out of memory");
                return;
        }
        body[len] = '\0';
        TAILQ_INIT(&q);
        if (memchr(body, '\0', len) || strstr(body, "%00") ||
            evhttp_parse_query_str(body, &q) < 0) {
                evhttp_clear_headers(&q);
                redirect(req, "/ui/login#failed", NULL);
                return;
        }
        token = evhttp_find_header(&q, "token");
        ok = token && asprintf(&bearer, "Bearer %s", token) >= 0 &&
             serve_token_check(bearer, srv->token_sha);
        evhttp_clear_headers(&q);
        if (!ok) {
                redirect(req, "/ui/login#failed", NULL);
                return;
        }
        if (serve_ui_session_mint(srv->ui, (uint64_t)time(NULL), value) < 0 ||
            asprintf(&cookie, "%s=%s; Path=/; HttpOnly; SameSite=Strict; Max-Age=%llu",
                     SERVE_UI_COOKIE, value, (unsigned long long)srv->ui->session_s) < 0) {
                cookie = NULL;
                serve_reply_errno(req, ENOMEM, NULL, "out of memory");
                return;
        }
        redirect(req, "/ui/", cookie);
}

/* POST /ui/logout: ends the request's sessions on the server, so that a
 * copy of the cookie is refused from now on (serve-ui.h). */
static void ui_logout(Server *srv, struct evhttp_request *req) {
        struct evkeyvalq *in = evhttp_request_get_input_headers(req);
        struct evkeyval *kv;

        TAILQ_FOREACH(kv, in, next) {
                const char *v;
                size_t len = 0;

                if (strcasecmp(kv->key, "Cookie") != 0)
                        continue;
                v = serve_ui_cookie_in_value(kv->value, strlen(kv->value), SERVE_UI_COOKIE, &len);
                if (v)
                        (void)serve_ui_session_revoke(srv->ui, v, len, (uint64_t)time(NULL));
        }
}

/* GET /ui/session: {csrf, login}: the session's CSRF token and whether
 * the request came with a session (null and false without one: on the
 * unix socket, or with the bearer token). */
static void ui_session(Server *srv, struct evhttp_request *req) {
        char csrf[SERVE_UI_CSRF_LEN + 1];
        const char *v;
        size_t len = 0;

        add_headers(req);
        v = request_session(srv, req, &len);
        if (v && serve_ui_csrf(srv->ui, v, len, csrf) < 0) {
                serve_reply_errno(req, ENOMEM, NULL, "out of memory");
                return;
        }
        serve_reply_json(req, 200,
                         json_pack("{s:o,s:b}", "csrf", v ? json_string(csrf) : json_null(),
                                   "login", v != NULL));
}

bool serve_ui_dispatch(Server *srv, struct evhttp_request *req, const char *path) {
        enum evhttp_cmd_type method = evhttp_request_get_command(req);
        bool get = method == EVHTTP_REQ_GET || method == EVHTTP_REQ_HEAD;
        const ServeUiFile *f;

        if (strcmp(path, "/ui") == 0) {
                redirect(req, "/ui/", NULL);
                return true;
        }
        if (strncmp(path, "/ui/", 4) != 0)
                return false;
        if (strcmp(path, "/ui/login") == 0 && method == EVHTTP_REQ_POST) {
                ui_login(srv, req);
                return true;
        }
        if (strcmp(path, "/ui/logout") == 0 && method == EVHTTP_REQ_POST) {
                ui_logout(srv, req);
                redirect(req, "/ui/login",
                         SERVE_UI_COOKIE "=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
                return true;
        }
        if (strcmp(path, "/ui/session") == 0 && get) {
                ui_session(srv, req);
                return true;
        }
        f = get ? serve_ui_file_find(path) : NULL;
        if (!f) {
                serve_reply_status(req, get ? 404 : 405,
                                   get ? "no_such_route" : "method_not_allowed", NULL,
                                   "no dashboard page %s", get ? path : "for this method");
                return true;
        }
        add_headers(req);
        serve_reply_bytes(req, 200, f->ctype, f->data, f->len);
        return true;
}
