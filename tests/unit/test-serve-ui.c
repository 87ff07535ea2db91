/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The dashboard's login gate (src/cli/serve-ui.h): session cookies, CSRF
 * tokens, and which request heads pass without the bearer token. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "serve-ui.h"
#include "test.h"

#define NOW 1800000000ULL

TEST(session_round_trip) {
        ServeUi ui, other;
        char c[SERVE_UI_COOKIE_MAX];

        ASSERT_OK(serve_ui_init(&ui));
        ASSERT_OK(serve_ui_init(&other));
        ASSERT_OK(serve_ui_session_mint(&ui, NOW, c));
        ASSERT_EQ(strlen(c), SERVE_UI_COOKIE_LEN);
        ASSERT_TRUE(serve_ui_session_check(&ui, c, strlen(c), NOW));
        ASSERT_TRUE(serve_ui_session_check(&ui, c, strlen(c), NOW + SERVE_UI_SESSION_S - 1));
        /* Expired, another server's key, changed, cut, empty. */
        ASSERT_FALSE(serve_ui_session_check(&ui, c, strlen(c), NOW + SERVE_UI_SESSION_S));
        ASSERT_FALSE(serve_ui_session_check(&other, c, strlen(c), NOW));
        ASSERT_FALSE(serve_ui_session_check(&ui, c, strlen(c) - 1, NOW));
        ASSERT_FALSE(serve_ui_session_check(&ui, "", 0, NOW));
        ASSERT_FALSE(serve_ui_session_check(&ui, NULL, 0, NOW));
        for (size_t i = 0; i < strlen(c); i++) {
                char bad[SERVE_UI_COOKIE_MAX];

                memcpy(bad, c, sizeof(bad));
                bad[i] = bad[i] == 'f' ? 'e' : bad[i] == '.' ? '0' : 'f';
                ASSERT_FALSE(serve_ui_session_check(&ui, bad, strlen(bad), NOW));
        }
        /* A later expiry with the old MAC is refused too. */
        {
                char bad[SERVE_UI_COOKIE_MAX];

                memcpy(bad, c, sizeof(bad));
                bad[0] = '1';
                ASSERT_FALSE(serve_ui_session_check(&ui, bad, strlen(bad), NOW));
        }
}

TEST(session_revoke) {
        ServeUi ui;
        char c1[SERVE_UI_COOKIE_MAX], c2[SERVE_UI_COOKIE_MAX], copy[SERVE_UI_COOKIE_MAX];

        ASSERT_OK(serve_ui_init(&ui));
        ASSERT_OK(serve_ui_session_mint(&ui, NOW, c1));
        ASSERT_OK(serve_ui_session_mint(&ui, NOW, c2));
        ASSERT_TRUE(strcmp(c1, c2) != 0);
        memcpy(copy, c1, sizeof(copy));
        ASSERT_TRUE(serve_ui_session_revoke(&ui, c1, strlen(c1), NOW));
        /* The cookie and its copy are no session; the other one still is. */
        ASSERT_FALSE(serve_ui_session_check(&ui, c1, strlen(c1), NOW));
        ASSERT_FALSE(serve_ui_session_check(&ui, copy, strlen(copy), NOW));
        ASSERT_TRUE(serve_ui_session_check(&ui, c2, strlen(c2), NOW));
        ASSERT_FALSE(serve_ui_session_revoke(&ui, copy, strlen(copy), NOW));
        /* Only a valid cookie ends a session. */
        {
                char bad[SERVE_UI_COOKIE_MAX];

                memcpy(bad, c2, sizeof(bad));
                bad[SERVE_UI_COOKIE_LEN - 1] = bad[SERVE_UI_COOKIE_LEN - 1] == '0' ? '1' : '0';
                ASSERT_FALSE(serve_ui_session_revoke(&ui, bad, strlen(bad), NOW));
                ASSERT_TRUE(serve_ui_session_check(&ui, c2, strlen(c2), NOW));
        }
        /* A restart (a new key, no sessions) ends them all. */
        ASSERT_OK(serve_ui_init(&ui));
        ASSERT_FALSE(serve_ui_session_check(&ui, c2, strlen(c2), NOW));
}

TEST(session_cap_ends_the_first_to_expire) {
        ServeUi ui;
        char first[SERVE_UI_COOKIE_MAX], c[SERVE_UI_COOKIE_MAX];

        ASSERT_OK(serve_ui_init(&ui));
        ASSERT_OK(serve_ui_session_mint(&ui, NOW, first));
        for (unsigned i = 1; i < SERVE_UI_SESSIONS_MAX; i++)
                ASSERT_OK(serve_ui_session_mint(&ui, NOW + i, c));
        ASSERT_TRUE(serve_ui_session_check(&ui, first, strlen(first), NOW + 100));
        ASSERT_OK(serve_ui_session_mint(&ui, NOW + 100, c));
        ASSERT_FALSE(serve_ui_session_check(&ui, first, strlen(first), NOW + 100));
        ASSERT_TRUE(serve_ui_session_check(&ui, c, strlen(c), NOW + 100));
        /* An expired one's slot is taken first. */
        ASSERT_OK(serve_ui_session_mint(&ui, NOW + SERVE_UI_SESSION_S + 1, first));
        ASSERT_TRUE(serve_ui_session_check(&ui, c, strlen(c), NOW + SERVE_UI_SESSION_S + 1));
        ASSERT_TRUE(
                serve_ui_session_check(&ui, first, strlen(first), NOW + SERVE_UI_SESSION_S + 1));
}

TEST(csrf_depends_on_session_and_key) {
        ServeUi ui, other;
        char c1[SERVE_UI_COOKIE_MAX], c2[SERVE_UI_COOKIE_MAX];
        char t1[SERVE_UI_CSRF_LEN + 1], t2[SERVE_UI_CSRF_LEN + 1], t3[SERVE_UI_CSRF_LEN + 1];

        ASSERT_OK(serve_ui_init(&ui));
        ASSERT_OK(serve_ui_init(&other));
        ASSERT_OK(serve_ui_session_mint(&ui, NOW, c1));
        ASSERT_OK(serve_ui_session_mint(&ui, NOW + 1, c2));
        ASSERT_OK(serve_ui_csrf(&ui, c1, strlen(c1), t1));
        ASSERT_OK(serve_ui_csrf(&ui, c2, strlen(c2), t2));
        ASSERT_OK(serve_ui_csrf(&other, c1, strlen(c1), t3));
        ASSERT_EQ(strlen(t1), SERVE_UI_CSRF_LEN);
        ASSERT_TRUE(strcmp(t1, t2) != 0);
        ASSERT_TRUE(strcmp(t1, t3) != 0);
        /* The CSRF token is not a session cookie. */
        ASSERT_FALSE(serve_ui_session_check(&ui, t1, strlen(t1), NOW));
}

TEST(cookie_find) {
        static const char head[] = "GET / HTTP/1.1\r\nHost: x\r\nCookie: a=1; hutch_uix=2\r\n"
                                   "Cookie:  b=3;hutch_ui=v4 ; c=5\r\n\r\n";
        const char *v;
        size_t len = 0;

        v = serve_ui_cookie_find(head, strlen(head), "hutch_ui", &len);
        ASSERT_NOT_NULL(v);
        ASSERT_EQ(len, 3);
        ASSERT_TRUE(strncmp(v, "v4 ", 3) == 0);
        v = serve_ui_cookie_find(head, strlen(head), "a", &len);
        ASSERT_NOT_NULL(v);
        ASSERT_EQ(len, 1);
        ASSERT_NULL(serve_ui_cookie_find(head, strlen(head), "hutch", &len));
        ASSERT_NULL(serve_ui_cookie_find(head, strlen(head), "x", &len));
        /* Only Cookie headers count, and only before the empty line. */
        ASSERT_NULL(serve_ui_cookie_find("GET / HTTP/1.1\r\nX-Cookie: hutch_ui=1\r\n\r\n", 40,
                                         "hutch_ui", &len));
        ASSERT_NULL(serve_ui_cookie_find("GET / HTTP/1.1\r\n\r\nCookie: hutch_ui=1\r\n", 38,
                                         "hutch_ui", &len));
}

TEST(gate_verdict_names) {
        for (int i = 0; i < _SERVE_UI_GATE_VERDICT_MAX; i++)
                ASSERT_EQ(serve_ui_gate_verdict_from_string(serve_ui_gate_verdict_to_string(i)), i);
        ASSERT_NULL(serve_ui_gate_verdict_to_string(_SERVE_UI_GATE_VERDICT_MAX));
        ASSERT_NULL(serve_ui_gate_verdict_to_string(-1));
        ASSERT_EQ(serve_ui_gate_verdict_from_string("nope"), _SERVE_UI_GATE_VERDICT_INVALID);
        ASSERT_EQ(serve_ui_gate_verdict_from_string(NULL), _SERVE_UI_GATE_VERDICT_INVALID);
}

/* @tmpl with each "%N$s" (N from 1 to 4) replaced by @v[N - 1]. Not
 * asprintf(): a format that skips a position (a case using %4$s but not
 * %3$s) aborts under _FORTIFY_SOURCE, as in the release build. */
static char *expand(const char *tmpl, const char *const v[4]) {
        char *out = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&out, &len);

        if (!f)
                return NULL;
        for (const char *p = tmpl; *p; p++)
                if (p[0] == '%' && p[1] >= '1' && p[1] <= '4' && p[2] == '$' && p[3] == 's') {
                        (void)fputs(v[p[1] - '1'], f);
                        p += 3;
                } else
                        (void)fputc(*p, f);
        if (fclose(f) != 0) {
                free(out);
                return NULL;
        }
        return out;
}

TEST(gate) {
        ServeUi ui, other;
        char c[SERVE_UI_COOKIE_MAX], oc[SERVE_UI_COOKIE_MAX], t[SERVE_UI_CSRF_LEN + 1];
        char ot[SERVE_UI_CSRF_LEN + 1];
        struct {
                const char *line;    /* request line */
                const char *headers; /* with %1$s: the cookie, %2$s: the CSRF token, %3$s:
                                      * another server's cookie, %4$s: its token */
                ServeUiGateVerdict want;
        } cases[] = {
                /* The login page's own requests. */
                {"GET /ui/login HTTP/1.1", "", SERVE_UI_GATE_PUBLIC},
                {"HEAD /ui/login HTTP/1.1", "", SERVE_UI_GATE_PUBLIC},
                {"POST /ui/login HTTP/1.1", "", SERVE_UI_GATE_PUBLIC},
                {"GET /ui/login.js HTTP/1.1", "", SERVE_UI_GATE_PUBLIC},
                {"GET /ui/style.css HTTP/1.1", "", SERVE_UI_GATE_PUBLIC},
                {"GET /ui/icon.svg HTTP/1.1", "", SERVE_UI_GATE_PUBLIC},
                /* ...exactly. */
                {"GET /ui/login?x=1 HTTP/1.1", "", SERVE_UI_GATE_LOGIN},
                {"GET /ui/login/ HTTP/1.1", "", SERVE_UI_GATE_LOGIN},
                {"GET /ui/login.js/../app.js HTTP/1.1", "", SERVE_UI_GATE_LOGIN},
                {"PUT /ui/login HTTP/1.1", "", SERVE_UI_GATE_TOKEN},
                {"POST /ui/logout HTTP/1.1", "", SERVE_UI_GATE_TOKEN},
                {"GET /ui/%6cogin HTTP/1.1", "", SERVE_UI_GATE_LOGIN},
                {"GET /v1/../ui/login HTTP/1.1", "", SERVE_UI_GATE_TOKEN},
                /* Pages without a session go to the login; the API needs the token. */
                {"GET /ui/ HTTP/1.1", "", SERVE_UI_GATE_LOGIN},
                {"GET /ui HTTP/1.1", "", SERVE_UI_GATE_LOGIN},
                {"GET /ui/app.js HTTP/1.1", "", SERVE_UI_GATE_LOGIN},
                {"GET /ui/ HTTP/1.1", "Authorization: Bearer x\r\n", SERVE_UI_GATE_TOKEN},
                {"GET /v1/sandboxes HTTP/1.1", "", SERVE_UI_GATE_TOKEN},
                {"GET /uix HTTP/1.1", "", SERVE_UI_GATE_TOKEN},
                {"POST /ui/session HTTP/1.1", "", SERVE_UI_GATE_TOKEN},
                /* A session: reads pass, changes need the CSRF token. */
                {"GET /v1/sandboxes HTTP/1.1", "Cookie: hutch_ui=%1$s\r\n", SERVE_UI_GATE_SESSION},
                {"GET /ui/ HTTP/1.1", "Cookie: a=b; hutch_ui=%1$s\r\n", SERVE_UI_GATE_SESSION},
                {"POST /v1/sandboxes/a/stop HTTP/1.1", "Cookie: hutch_ui=%1$s\r\n",
                 SERVE_UI_GATE_NO_CSRF},
                {"POST /v1/sandboxes/a/stop HTTP/1.1",
                 "Cookie: hutch_ui=%1$s\r\nX-Hutch-CSRF: %2$s\r\n", SERVE_UI_GATE_SESSION},
                {"DELETE /v1/sandboxes/a HTTP/1.1",
                 "x-hutch-csrf:%2$s\r\ncookie: hutch_ui=%1$s\r\n", SERVE_UI_GATE_SESSION},
                {"DELETE /v1/sandboxes/a HTTP/1.1",
                 "Cookie: hutch_ui=%1$s\r\nX-Hutch-CSRF: %2$s\r\nX-Hutch-CSRF: %2$s\r\n",
                 SERVE_UI_GATE_NO_CSRF},
                {"POST /v1/sandboxes/a/stop HTTP/1.1",
                 "Cookie: hutch_ui=%1$s\r\nX-Hutch-CSRF: %4$s\r\n", SERVE_UI_GATE_NO_CSRF},
                {"POST /v1/sandboxes/a/stop HTTP/1.1",
                 "Cookie: hutch_ui=%1$s\r\nX-Hutch-CSRF: %1$s\r\n", SERVE_UI_GATE_NO_CSRF},
                /* From another origin (another port of the same host is the
                 * same site): refused, also a GET that upgrades. */
                {"GET /v1/sandboxes HTTP/1.1", "Cookie: hutch_ui=%1$s\r\nOrigin: http://x\r\n",
                 SERVE_UI_GATE_SESSION},
                {"GET /v1/sandboxes HTTP/1.1", "Cookie: hutch_ui=%1$s\r\nOrigin: http://x:8080\r\n",
                 SERVE_UI_GATE_NO_CSRF},
                {"POST /v1/sandboxes/a/stop HTTP/1.1",
                 "Cookie: hutch_ui=%1$s\r\nX-Hutch-CSRF: %2$s\r\nOrigin: http://x\r\n",
                 SERVE_UI_GATE_SESSION},
                {"POST /v1/sandboxes/a/stop HTTP/1.1",
                 "Cookie: hutch_ui=%1$s\r\nX-Hutch-CSRF: %2$s\r\nOrigin: https://x\r\n",
                 SERVE_UI_GATE_NO_CSRF},
                {"POST /v1/sandboxes/a/stop HTTP/1.1",
                 "Cookie: hutch_ui=%1$s\r\nX-Hutch-CSRF: %2$s\r\nOrigin: http://x.evil\r\n",
                 SERVE_UI_GATE_NO_CSRF},
                {"POST /v1/sandboxes/a/stop HTTP/1.1",
                 "Cookie: hutch_ui=%1$s\r\nX-Hutch-CSRF: %2$s\r\nOrigin: null\r\n",
                 SERVE_UI_GATE_NO_CSRF},
                {"POST /v1/sandboxes/a/stop HTTP/1.1",
                 "Cookie: hutch_ui=%1$s\r\nX-Hutch-CSRF: %2$s\r\nOrigin: http://x\r\n"
                 "Origin: http://x\r\n",
                 SERVE_UI_GATE_NO_CSRF},
                {"GET /v1/sandboxes/a/exec/ws HTTP/1.1",
                 "Cookie: hutch_ui=%1$s\r\nUpgrade: websocket\r\n", SERVE_UI_GATE_NO_CSRF},
                {"GET /v1/sandboxes/a/exec/ws HTTP/1.1",
                 "Cookie: hutch_ui=%1$s\r\nUpgrade: websocket\r\nOrigin: http://y\r\n",
                 SERVE_UI_GATE_NO_CSRF},
                {"GET /v1/sandboxes/a/exec/ws HTTP/1.1",
                 "Cookie: hutch_ui=%1$s\r\nUpgrade: websocket\r\nOrigin: http://x\r\n",
                 SERVE_UI_GATE_SESSION},
                /* Another server's session is none. */
                {"GET /v1/sandboxes HTTP/1.1", "Cookie: hutch_ui=%3$s\r\n", SERVE_UI_GATE_TOKEN},
                {"POST /v1/sandboxes/a/stop HTTP/1.1",
                 "Cookie: hutch_ui=%3$s\r\nX-Hutch-CSRF: %4$s\r\n", SERVE_UI_GATE_TOKEN},
                {"GET /ui/ HTTP/1.1", "Cookie: hutch_ui=%3$s\r\n", SERVE_UI_GATE_LOGIN},
                /* Heads it cannot read are left to serve_head_check(). */
                {"GET", "", SERVE_UI_GATE_TOKEN},
                {"GET /ui/login", "", SERVE_UI_GATE_TOKEN},
        };

        ASSERT_OK(serve_ui_init(&ui));
        ASSERT_OK(serve_ui_init(&other));
        ASSERT_OK(serve_ui_session_mint(&ui, NOW, c));
        ASSERT_OK(serve_ui_csrf(&ui, c, strlen(c), t));
        ASSERT_OK(serve_ui_session_mint(&other, NOW, oc));
        ASSERT_OK(serve_ui_csrf(&other, oc, strlen(oc), ot));
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char *headers = NULL, *head = NULL;
                ServeUiGateVerdict got;

                headers = expand(cases[i].headers, (const char *const[]){c, t, oc, ot});
                ASSERT_NOT_NULL(headers);
                ASSERT_TRUE(asprintf(&head, "%s\r\nHost: x\r\n%s\r\n", cases[i].line, headers) >=
                            0);
                got = serve_ui_gate(&ui, head, strlen(head), NOW);
                if (got != cases[i].want)
                        fail_msg("case %zu (%s): got %s, want %s", i, cases[i].line,
                                 serve_ui_gate_verdict_to_string(got),
                                 serve_ui_gate_verdict_to_string(cases[i].want));
                /* The session expires. */
                if (cases[i].want == SERVE_UI_GATE_SESSION)
                        ASSERT_TRUE(
                                serve_ui_gate(&ui, head, strlen(head), NOW + SERVE_UI_SESSION_S) !=
                                SERVE_UI_GATE_SESSION);
                free(headers);
                free(head);
        }
}

DEFINE_TEST_MAIN
