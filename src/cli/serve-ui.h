/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The web dashboard of `hutch serve --ui` (docs/ui.md): its login gate on
 * TCP and its static files.
 *
 * On TCP every request needs the bearer token (docs/api.md). A browser
 * cannot send one on its own, so with --ui the token is typed once into
 * a login form; POST /ui/login checks it and answers with a session
 * cookie (HttpOnly, SameSite=Strict, Path=/). The front (serve-front.c)
 * then lets a request through without the token when:
 *
 * - it is one of the few public requests the login page needs
 *   (serve_ui_gate() lists them), with a body of at most
 *   SERVE_UI_LOGIN_BODY_MAX bytes;
 * - or it carries a valid session cookie and, unless it is a GET or a
 *   HEAD, the session's CSRF token in the X-Hutch-CSRF header.
 *
 * The session cookie is "<expiry, hex seconds>.<id, 64 random bits in
 * hex>.<HMAC-SHA256 of the two>" under a key drawn at random when the
 * server starts (a restart ends every session). The server keeps each live
 * session's id and expiry, at most SERVE_UI_SESSIONS_MAX of them (a sign-in
 * beyond that ends the session that would expire first): a cookie is a
 * session only while its id is kept, so sign-out (POST /ui/logout) ends it
 * on the server, for a copy of the cookie too, and every session ends
 * its lifetime after its sign-in (12 h, or `hutch serve --ui-session`; the
 * expiry is inside the signed value). The CSRF token is another HMAC of
 * the cookie, which the page fetches from GET /ui/session: another site can
 * neither read it nor (SameSite=Strict) make the browser send the cookie.
 *
 * The pure parts here (minting and checking, the gate) are covered by
 * tests/unit/test-serve-ui.c. */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SERVE_UI_KEY_LEN 32
#define SERVE_UI_COOKIE "hutch_ui"
#define SERVE_UI_CSRF_HEADER "X-Hutch-CSRF"
#define SERVE_UI_SESSION_MAX_S (7U * 24U * 3600U)  /* --ui-session's maximum */
#define SERVE_UI_SESSION_S (12U * 3600U)           /* a session's lifetime */
#define SERVE_UI_LOGIN_BODY_MAX 8192U              /* POST /ui/login, before any token */
#define SERVE_UI_COOKIE_LEN (16 + 1 + 16 + 1 + 64) /* "<16 hex>.<16 hex>.<64 hex>" */
#define SERVE_UI_COOKIE_MAX (SERVE_UI_COOKIE_LEN + 1)
#define SERVE_UI_CSRF_LEN 64      /* hex */
#define SERVE_UI_SESSIONS_MAX 64U /* live sessions kept at once */

typedef struct ServeUiSession {
        uint64_t id; /* 0: a free slot */
        uint64_t expiry_s;
} ServeUiSession;

typedef struct ServeUi {
        uint8_t key[SERVE_UI_KEY_LEN];                  /* the sessions' HMAC key */
        ServeUiSession sessions[SERVE_UI_SESSIONS_MAX]; /* the live ones (signed in, not out) */
        uint64_t session_s; /* a session's lifetime: SERVE_UI_SESSION_S, or --ui-session */
} ServeUi;

/* Draws a new random key into @ui, with no session kept and the default
 * lifetime (SERVE_UI_SESSION_S). Returns 0 or -errno (getrandom). */
int serve_ui_init(ServeUi *ui);

/* A new session, kept in @ui, and its cookie value, valid until @now_s +
 * @ui->session_s, into @buf (SERVE_UI_COOKIE_MAX bytes, NUL-terminated).
 * When SERVE_UI_SESSIONS_MAX live sessions are kept, the one that expires
 * first is ended. Returns 0, -EIO or -errno (getrandom). */
int serve_ui_session_mint(ServeUi *ui, uint64_t now_s, char buf[SERVE_UI_COOKIE_MAX]);

/* Whether @value (@len bytes, not NUL-terminated) is the cookie of a
 * session @ui keeps that has not expired at @now_s. Constant time in the
 * MAC. */
bool serve_ui_session_check(const ServeUi *ui, const char *value, size_t len, uint64_t now_s);

/* Ends the session of cookie @value (@len bytes) when it is one
 * (serve_ui_session_check()): that cookie, and any copy of it, is none
 * from now on. Returns whether it ended one. */
bool serve_ui_session_revoke(ServeUi *ui, const char *value, size_t len, uint64_t now_s);

/* The CSRF token of the session cookie @value (@len bytes) into @buf
 * (SERVE_UI_CSRF_LEN hex digits and a NUL). Returns 0 or -EIO. */
int serve_ui_csrf(const ServeUi *ui, const char *value, size_t len,
                  char buf[SERVE_UI_CSRF_LEN + 1]);

/* The value of the cookie @name in the Cookie header value @value (@len
 * bytes): pointing into @value, or NULL. */
const char *serve_ui_cookie_in_value(const char *value, size_t len, const char *name,
                                     size_t *ret_len);

/* The value of the cookie @name in the Cookie header values of @head
 * (@head_len bytes, a whole request head): the first one found, pointing
 * into @head; NULL when there is none. */
const char *serve_ui_cookie_find(const char *head, size_t head_len, const char *name,
                                 size_t *ret_len);

typedef enum ServeUiGateVerdict {
        SERVE_UI_GATE_TOKEN,   /* not the gate's business: the bearer token decides */
        SERVE_UI_GATE_PUBLIC,  /* a public request of the login page */
        SERVE_UI_GATE_SESSION, /* a valid session (and CSRF token when needed) */
        SERVE_UI_GATE_LOGIN,   /* a page of the dashboard without a session: redirect
                                * to /ui/login */
        SERVE_UI_GATE_NO_CSRF, /* a valid session, a change without the CSRF token:
                                * 403 */
        _SERVE_UI_GATE_VERDICT_MAX,
        _SERVE_UI_GATE_VERDICT_INVALID = -EINVAL,
} ServeUiGateVerdict;

/* "token", "public", "session", "login", "no-csrf"; NULL when out of range. */
const char *serve_ui_gate_verdict_to_string(ServeUiGateVerdict v);
ServeUiGateVerdict serve_ui_gate_verdict_from_string(const char *s);

/* Judges the request head @head (@len bytes, through the empty line) at
 * @now_s, before serve_head_check() checks it (which it does whatever the
 * verdict: with no token needed for PUBLIC and SESSION).
 * PUBLIC: exactly "GET /ui/login", "HEAD /ui/login", "POST /ui/login",
 * "GET /ui/login.js", "GET /ui/style.css", "GET /ui/icon.svg" (no query).
 * SESSION: a valid session cookie, and for a method other than GET and
 * HEAD exactly one X-Hutch-CSRF header with its CSRF token (else NO_CSRF);
 * with an Origin header, or an Upgrade one, also exactly one Origin that
 * is "http://" and the Host header (else NO_CSRF).
 * LOGIN: a GET of a path under /ui without a session nor an Authorization
 * header. TOKEN otherwise, also for a head it cannot read (serve_head_check()
 * then refuses it). */
ServeUiGateVerdict serve_ui_gate(const ServeUi *ui, const char *head, size_t len, uint64_t now_s);

/* ---- the static files (ui-files.c, generated from ui/ by tools/embed-ui.py) ---- */

typedef struct ServeUiFile {
        const char *path; /* "/ui/app.js" */
        const char *ctype;
        const unsigned char *data;
        size_t len;
} ServeUiFile;

/* The file served at @path, or NULL. */
const ServeUiFile *serve_ui_file_find(const char *path);
