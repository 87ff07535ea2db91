/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "base64.h"
#include "fd-util.h"
#include "log.h"
#include "macro.h"
#include "parse-util.h"
#include "serve-util.h"
#include "strv.h"

bool serve_path_match(const char *pattern, const char *path, const char **ret_param,
                      size_t *ret_param_len) {
        const char *p = pattern, *s = path, *param = NULL;
        size_t param_len = 0;

        if (!*p || !*s)
                return false;
        while (*p && *s) {
                size_t plen, slen;

                if (*p != '/' || *s != '/')
                        return false;
                p++;
                s++;
                plen = strcspn(p, "/");
                slen = strcspn(s, "/");
                if (*p == '{') {
                        if (slen == 0)
                                return false;
                        param = s;
                        param_len = slen;
                } else if (plen != slen || memcmp(p, s, plen) != 0)
                        return false;
                p += plen;
                s += slen;
        }
        if (*p || *s)
                return false;
        if (ret_param)
                *ret_param = param;
        if (ret_param_len)
                *ret_param_len = param_len;
        return true;
}

void serve_member_pointer(char *buf, size_t size, const char *key, long index) {
        json_member_pointer(buf, size, key, index);
}

int serve_decode_object(json_t *obj, const ServeField *fields, size_t n_fields, void *dest,
                        HutchError *reterr) {
        if (!json_is_object(obj))
                return hutch_error_set(reterr, EINVAL, "the request body must be a JSON object");
        return json_fields_decode(obj, fields, n_fields, dest, reterr);
}

void serve_errno_to_status(int errnum, int *ret_status, const char **ret_code) {
        static const struct {
                int errnum;
                int status;
                const char *code;
        } table[] = {
                {EINVAL, 400, "invalid_argument"},
                {EBADMSG, 400, "invalid_argument"},
                {EILSEQ, 400, "invalid_argument"},
                {ENAMETOOLONG, 400, "invalid_argument"},
                {ELOOP, 400, "invalid_path"},
                {EXDEV, 400, "invalid_path"},
                {EACCES, 403, "permission_denied"},
                {EPERM, 403, "permission_denied"},
                {EROFS, 403, "read_only"},
                {ENOENT, 404, "not_found"},
                {ESRCH, 404, "not_found"},
                {EEXIST, 409, "conflict"},
                {EADDRINUSE, 409, "conflict"},
                {ENOTCONN, 409, "conflict"},
                {EADDRNOTAVAIL, 400, "invalid_argument"},
                {EBUSY, 409, "busy"},
                {ENOTEMPTY, 409, "not_empty"},
                {EISDIR, 409, "is_a_directory"},
                {ENOTDIR, 409, "not_a_directory"},
                {EFBIG, 413, "too_large"},
                {E2BIG, 413, "too_large"},
                {EMSGSIZE, 413, "too_large"},
                {EOPNOTSUPP, 501, "not_supported"},
                {ENOSYS, 501, "not_supported"},
                {ECONNREFUSED, 503, "unavailable"},
                {ECONNRESET, 503, "unavailable"},
                {EPIPE, 503, "unavailable"},
                {EAGAIN, 503, "unavailable"},
                {ENOMEM, 503, "out_of_memory"},
                {ETIMEDOUT, 504, "timeout"},
                {ENOSPC, 507, "insufficient_storage"},
                {EDQUOT, 507, "insufficient_storage"},
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (table[i].errnum == errnum) {
                        *ret_status = table[i].status;
                        *ret_code = table[i].code;
                        return;
                }
        *ret_status = 500;
        *ret_code = "internal";
}

size_t serve_utf8_incomplete_tail(const char *s, size_t len) {
        const unsigned char *p = (const unsigned char *)s;

        for (size_t k = 1; k <= 3 && k <= len; k++) {
                unsigned c = p[len - k];
                size_t need;

                if ((c & 0xc0) == 0x80)
                        continue; /* a continuation byte: look further back */
                if (c >= 0xc2 && c <= 0xdf)
                        need = 2;
                else if (c >= 0xe0 && c <= 0xef)
                        need = 3;
                else if (c >= 0xf0 && c <= 0xf4)
                        need = 4;
                else
                        return 0; /* ASCII, or not UTF-8 at all */
                return k < need ? k : 0;
        }
        return 0;
}

json_t *serve_output_string(const char *data, size_t len, const char **ret_encoding) {
        _cleanup_free_ char *b64 = NULL;
        json_t *s;

        /* jansson refuses what is not UTF-8 (overlong forms, surrogates
         * and all), which is exactly the test wanted. */
        s = json_stringn(len ? data : "", len);
        if (s) {
                *ret_encoding = "utf-8";
                return s;
        }
        if (base64_encode(data, len, &b64) < 0)
                return NULL;
        *ret_encoding = "base64";
        return json_string(b64);
}

int serve_parse_listen(const char *s, struct sockaddr_storage *ret, socklen_t *ret_len) {
        char host[INET6_ADDRSTRLEN + 1];
        const char *port_s, *end;
        struct sockaddr_storage ss = {};
        uint32_t port;
        size_t hlen;

        if (s[0] == '[') {
                end = strchr(s, ']');
                if (!end || end[1] != ':')
                        return -EINVAL;
                hlen = (size_t)(end - s - 1);
                port_s = end + 2;
                s++;
        } else {
                end = strrchr(s, ':');
                if (!end)
                        return -EINVAL;
                hlen = (size_t)(end - s);
                port_s = end + 1;
        }
        if (hlen == 0 || hlen >= sizeof(host))
                return -EINVAL;
        memcpy(host, s, hlen);
        host[hlen] = '\0';
        if (safe_atou32(port_s, &port) < 0 || port > 65535)
                return -EINVAL;
        if (end[0] == ']') {
                struct sockaddr_in6 *sa = (struct sockaddr_in6 *)&ss;

                sa->sin6_family = AF_INET6;
                sa->sin6_port = htons((uint16_t)port);
                if (inet_pton(AF_INET6, host, &sa->sin6_addr) != 1)
                        return -EINVAL;
                *ret_len = sizeof(*sa);
        } else {
                struct sockaddr_in *sa = (struct sockaddr_in *)&ss;

                sa->sin_family = AF_INET;
                sa->sin_port = htons((uint16_t)port);
                if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
                        return -EINVAL;
                *ret_len = sizeof(*sa);
        }
        *ret = ss;
        return 0;
}

static int sha256(const void *data, size_t len, uint8_t out[SERVE_SHA256_LEN]) {
        unsigned n = 0;

        if (EVP_Digest(data, len, out, &n, EVP_sha256(), NULL) != 1 || n != SERVE_SHA256_LEN)
                return -EIO;
        return 0;
}

static bool token_chars_valid(const char *s, size_t len) {
        for (size_t i = 0; i < len; i++)
                if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
                        return false;
        return true;
}

int serve_token_load(const char *text, uint8_t ret_sha[SERVE_SHA256_LEN]) {
        size_t len = strlen(text);

        if (len > 0 && text[len - 1] == '\n')
                len--;
        if (len > 0 && text[len - 1] == '\r')
                len--;
        if (len < SERVE_TOKEN_MIN || len > SERVE_TOKEN_MAX || !token_chars_valid(text, len))
                return -EINVAL;
        return sha256(text, len, ret_sha);
}

int serve_token_file_load(const char *path, const char *what, uint8_t ret_sha[SERVE_SHA256_LEN]) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        _cleanup_free_ char *text = NULL;
        struct stat st;
        int r;

        if (fd < 0)
                return log_error_errno(negative_errno(), "cannot open the %s file '%s': %m", what,
                                       path);
        if (fstat(fd, &st) < 0)
                return log_error_errno(negative_errno(), "cannot stat '%s': %m", path);
        if (!S_ISREG(st.st_mode))
                return log_error_errno(-EINVAL, "the %s file '%s' is not a regular file", what,
                                       path);
        /* SECURITY: a token everyone can read protects nothing. */
        if (st.st_mode & 0007)
                return log_error_errno(-EPERM,
                                       "the %s file '%s' is accessible to other users "
                                       "(chmod o-rwx it)",
                                       what, path);
        r = read_full_fd(fd, SERVE_TOKEN_MAX + 2, &text, NULL);
        if (r < 0)
                return log_error_errno(r, "cannot read the %s file '%s': %m", what, path);
        r = serve_token_load(text, ret_sha);
        if (r < 0)
                return log_error_errno(r,
                                       "the %s file '%s' must hold one %s of %d to %d "
                                       "visible ASCII characters",
                                       what, path, what, SERVE_TOKEN_MIN, SERVE_TOKEN_MAX);
        return 0;
}

bool serve_token_check(const char *header, const uint8_t sha[SERVE_SHA256_LEN]) {
        uint8_t given[SERVE_SHA256_LEN];
        size_t len;

        if (!header || strncasecmp(header, "Bearer ", 7) != 0)
                return false;
        header += 7;
        header += strspn(header, " ");
        len = strlen(header);
        if (len == 0 || len > SERVE_TOKEN_MAX || !token_chars_valid(header, len))
                return false;
        /* SECURITY: both sides are hashed first, so the comparison below
         * runs over 32 bytes whatever the lengths, and CRYPTO_memcmp()
         * takes the same time wherever the first difference is. */
        if (sha256(header, len, given) < 0)
                return false;
        return CRYPTO_memcmp(given, sha, SERVE_SHA256_LEN) == 0;
}

/* ---- request heads ---- */

static const char *const head_verdicts[_SERVE_HEAD_VERDICT_MAX] = {
        [SERVE_HEAD_OK] = "ok",
        [SERVE_HEAD_MALFORMED] = "malformed",
        [SERVE_HEAD_TOO_LARGE] = "too-large",
        [SERVE_HEAD_BAD_METHOD] = "bad-method",
        [SERVE_HEAD_NO_TOKEN] = "no-token",
        [SERVE_HEAD_WRONG_TOKEN] = "wrong-token",
        [SERVE_HEAD_CHUNKED] = "chunked",
        [SERVE_HEAD_BODY_TOO_LARGE] = "body-too-large",
        [SERVE_HEAD_EXPECTATION] = "expectation",
};

const char *serve_head_verdict_to_string(ServeHeadVerdict v) {
        return v >= 0 && v < _SERVE_HEAD_VERDICT_MAX ? head_verdicts[v] : NULL;
}

ServeHeadVerdict serve_head_verdict_from_string(const char *s) {
        for (int i = 0; s && i < _SERVE_HEAD_VERDICT_MAX; i++)
                if (strcmp(head_verdicts[i], s) == 0)
                        return (ServeHeadVerdict)i;
        return _SERVE_HEAD_VERDICT_INVALID;
}

size_t serve_head_end(const char *buf, size_t len) {
        for (size_t i = 0; i < len; i++) {
                if (buf[i] != '\n')
                        continue;
                if (i + 1 < len && buf[i + 1] == '\n')
                        return i + 2;
                if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n')
                        return i + 3;
        }
        return 0;
}

/* RFC 9110 tchar. */
static bool is_tchar(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* The methods evhttp knows and dispatch() routes (CONNECT is not one). */
static bool method_is_known(const char *m, size_t n) {
        static const char *const known[] = {"GET",    "POST",  "HEAD",  "PUT",
                                            "DELETE", "PATCH", "TRACE", "OPTIONS"};

        for (size_t i = 0; i < ELEMENTSOF(known); i++)
                if (strlen(known[i]) == n && memcmp(known[i], m, n) == 0)
                        return true;
        return false;
}

/* @s (@n bytes) without leading and trailing spaces and tabs, as evhttp
 * trims header values. */
static void trim_lws(const char **s, size_t *n) {
        while (*n > 0 && (**s == ' ' || **s == '\t')) {
                (*s)++;
                (*n)--;
        }
        while (*n > 0 && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t'))
                (*n)--;
}

static bool name_is(const char *name, size_t n, const char *want) {
        return strlen(want) == n && strncasecmp(name, want, n) == 0;
}

void serve_head_check(const char *head, size_t len, const uint8_t *token_sha, uint64_t body_max,
                      ServeHead *ret) {
        const char *p = head, *end = head + len, *auth = NULL, *cl = NULL, *expect = NULL;
        size_t auth_len = 0, cl_len = 0, expect_len = 0, mlen;
        unsigned n_auth = 0, n_cl = 0;
        bool chunked = false, bodyless;
        const char *sp1, *sp2, *eol;
        uint64_t body = 0;

        *ret = (ServeHead){.verdict = SERVE_HEAD_MALFORMED};
        /* The request line. */
        eol = memchr(p, '\n', len);
        if (!eol)
                return;
        if (eol > p && eol[-1] == '\r')
                eol--;
        sp1 = memchr(p, ' ', (size_t)(eol - p));
        if (!sp1)
                return;
        sp2 = memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1));
        if (!sp2 || sp2 == sp1 + 1)
                return;
        if ((size_t)(eol - sp2 - 1) != strlen("HTTP/1.1") ||
            (memcmp(sp2 + 1, "HTTP/1.1", 8) != 0 && memcmp(sp2 + 1, "HTTP/1.0", 8) != 0))
                return;
        for (const char *c = sp1 + 1; c < sp2; c++)
                if (*c <= 0x20 || *c >= 0x7f)
                        return;
        if (sp1[1] != '/')
                return;
        mlen = (size_t)(sp1 - p);
        for (size_t i = 0; i < mlen; i++)
                if (!is_tchar(p[i]))
                        return;
        bodyless = (mlen == 4 && memcmp(p, "HEAD", 4) == 0) ||
                   (mlen == 5 && memcmp(p, "TRACE", 5) == 0);
        ret->target = (size_t)(sp1 + 1 - head);
        ret->target_len = (size_t)(sp2 - sp1 - 1);
        p = memchr(p, '\n', len) + 1;

        /* The header lines, up to the empty one. */
        for (;;) {
                const char *colon, *value;
                size_t n, vlen;

                eol = p < end ? memchr(p, '\n', (size_t)(end - p)) : NULL;
                if (!eol)
                        return;
                n = (size_t)(eol - p);
                if (n > 0 && p[n - 1] == '\r')
                        n--;
                if (n == 0)
                        break;
                colon = memchr(p, ':', n);
                /* No folding (a line starting with a space or tab), a token
                 * for a name, no control character but tab in a value. */
                if (!colon || colon == p)
                        return;
                for (const char *c = p; c < colon; c++)
                        if (!is_tchar(*c))
                                return;
                value = colon + 1;
                vlen = n - (size_t)(value - p);
                for (size_t i = 0; i < vlen; i++)
                        if ((value[i] < 0x20 && value[i] != '\t') || value[i] == 0x7f)
                                return;
                trim_lws(&value, &vlen);
                if (name_is(p, (size_t)(colon - p), "Authorization")) {
                        auth = value;
                        auth_len = vlen;
                        n_auth++;
                } else if (name_is(p, (size_t)(colon - p), "Content-Length")) {
                        cl = value;
                        cl_len = vlen;
                        n_cl++;
                } else if (name_is(p, (size_t)(colon - p), "Transfer-Encoding"))
                        chunked = true;
                else if (name_is(p, (size_t)(colon - p), "Expect")) {
                        if (expect)
                                return;
                        expect = value;
                        expect_len = vlen;
                }
                p = eol + 1;
        }
        if (n_cl > 1 || n_auth > 1)
                return;
        if (cl) {
                if (cl_len == 0 || cl_len > 19)
                        return;
                for (size_t i = 0; i < cl_len; i++) {
                        if (cl[i] < '0' || cl[i] > '9')
                                return;
                        body = body * 10 + (uint64_t)(cl[i] - '0');
                }
                /* evhttp reads no body for these: none may be announced. */
                if (bodyless && body > 0)
                        return;
        }
        if (!method_is_known(head, mlen)) {
                ret->verdict = SERVE_HEAD_BAD_METHOD;
                return;
        }
        if (token_sha) {
                char value[SERVE_TOKEN_MAX + 16];

                if (!auth) {
                        ret->verdict = SERVE_HEAD_NO_TOKEN;
                        return;
                }
                if (auth_len >= sizeof(value)) {
                        ret->verdict = SERVE_HEAD_WRONG_TOKEN;
                        return;
                }
                memcpy(value, auth, auth_len);
                value[auth_len] = '\0';
                if (!serve_token_check(value, token_sha)) {
                        ret->verdict = SERVE_HEAD_WRONG_TOKEN;
                        return;
                }
        }
        if (chunked) {
                ret->verdict = SERVE_HEAD_CHUNKED;
                return;
        }
        if (body > body_max) {
                ret->verdict = SERVE_HEAD_BODY_TOO_LARGE;
                return;
        }
        if (expect && !(expect_len == strlen("100-continue") &&
                        strncasecmp(expect, "100-continue", expect_len) == 0)) {
                ret->verdict = SERVE_HEAD_EXPECTATION;
                return;
        }
        ret->verdict = SERVE_HEAD_OK;
        ret->body_len = body;
}
