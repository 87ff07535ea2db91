/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

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

/* "/" + @key escaped as RFC 6901 says, plus "/@index" when @index >= 0. */
static void member_pointer(char *buf, size_t size, const char *key, long index) {
        size_t n = 0;

        if (size < 2)
                return;
        buf[n++] = '/';
        for (const char *k = key; *k && n + 3 < size; k++) {
                if (*k == '~' || *k == '/') {
                        buf[n++] = '~';
                        buf[n++] = *k == '~' ? '0' : '1';
                } else
                        buf[n++] = *k;
        }
        buf[n] = '\0';
        if (index >= 0)
                (void)snprintf(buf + n, size - n, "/%ld", index);
}

static const char *field_type_name(ServeFieldType t) {
        switch (t) {
        case SERVE_FIELD_STRING:
                return "a string";
        case SERVE_FIELD_STRV:
                return "an array of strings";
        case SERVE_FIELD_BOOL:
                return "a boolean";
        case SERVE_FIELD_U64:
                return "an integer >= 0";
        case SERVE_FIELD_OBJECT:
                return "an object";
        }
        return "?";
}

static bool json_string_is_clean(json_t *v) {
        return json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v);
}

/* Checks @v against @f's type. Returns -1 when it fits, else the index of
 * the bad array element, or -2 for the value itself. */
static long field_check(const ServeField *f, json_t *v) {
        size_t i;
        json_t *e;

        switch (f->type) {
        case SERVE_FIELD_STRING:
                return json_string_is_clean(v) ? -1 : -2;
        case SERVE_FIELD_STRV:
                if (!json_is_array(v))
                        return -2;
                json_array_foreach(v, i, e) if (!json_string_is_clean(e)) return (long)MIN(
                        i, (size_t)LONG_MAX);
                return -1;
        case SERVE_FIELD_BOOL:
                return json_is_boolean(v) ? -1 : -2;
        case SERVE_FIELD_U64:
                return json_is_integer(v) && json_integer_value(v) >= 0 ? -1 : -2;
        case SERVE_FIELD_OBJECT:
                return json_is_object(v) ? -1 : -2;
        }
        return -2;
}

static int field_store(const ServeField *f, json_t *v, void *dest) {
        char *at = (char *)dest + f->offset;
        size_t i;
        json_t *e;

        switch (f->type) {
        case SERVE_FIELD_STRING:
                *(const char **)(void *)at = json_string_value(v);
                return 0;
        case SERVE_FIELD_STRV: {
                char **l = calloc(json_array_size(v) + 1, sizeof(char *));

                if (!l)
                        return -ENOMEM;
                json_array_foreach(v, i, e) {
                        l[i] = strdup(json_string_value(e));
                        if (!l[i]) {
                                strv_free(l);
                                return -ENOMEM;
                        }
                }
                *(char ***)(void *)at = l;
                return 0;
        }
        case SERVE_FIELD_BOOL:
                *(bool *)(void *)at = json_is_true(v);
                return 0;
        case SERVE_FIELD_U64:
                *(uint64_t *)(void *)at = (uint64_t)json_integer_value(v);
                return 0;
        case SERVE_FIELD_OBJECT:
                *(json_t **)(void *)at = v;
                return 0;
        }
        return -EINVAL;
}

static const ServeField *field_find(const ServeField *fields, size_t n, const char *name) {
        for (size_t i = 0; i < n; i++)
                if (strcmp(fields[i].name, name) == 0)
                        return &fields[i];
        return NULL;
}

int serve_decode_object(json_t *obj, const ServeField *fields, size_t n_fields, void *dest,
                        HutchError *reterr) {
        char ptr[HUTCH_ERROR_POINTER_MAX];
        const char *key;
        json_t *v;
        int r = 0;

        if (!json_is_object(obj))
                return hutch_error_set(reterr, EINVAL, "the request body must be a JSON object");
        /* Everything is checked before anything is stored. */
        json_object_foreach(obj, key, v) {
                const ServeField *f = field_find(fields, n_fields, key);
                long bad;

                if (!f) {
                        member_pointer(ptr, sizeof(ptr), key, -1);
                        return hutch_error_set_pointer(reterr, EINVAL, ptr, "unknown field '%.64s'",
                                                       key);
                }
                if (json_is_null(v))
                        continue;
                bad = field_check(f, v);
                if (bad == -1)
                        continue;
                member_pointer(ptr, sizeof(ptr), key, bad >= 0 ? bad : -1);
                return hutch_error_set_pointer(
                        reterr, EINVAL, ptr, "'%s' must be %s%s", f->name, field_type_name(f->type),
                        f->type == SERVE_FIELD_STRING || f->type == SERVE_FIELD_STRV
                                ? " (without NUL characters)"
                                : "");
        }
        for (size_t i = 0; i < n_fields; i++) {
                v = json_object_get(obj, fields[i].name);
                if (fields[i].mandatory && (!v || json_is_null(v))) {
                        member_pointer(ptr, sizeof(ptr), fields[i].name, -1);
                        return hutch_error_set_pointer(reterr, EINVAL, ptr, "missing field '%s'",
                                                       fields[i].name);
                }
        }
        for (size_t i = 0; i < n_fields && r >= 0; i++) {
                v = json_object_get(obj, fields[i].name);
                if (v && !json_is_null(v))
                        r = field_store(&fields[i], v, dest);
        }
        if (r >= 0)
                return 0;
        for (size_t i = 0; i < n_fields; i++)
                if (fields[i].type == SERVE_FIELD_STRV) {
                        char ***l = (char ***)(void *)((char *)dest + fields[i].offset);

                        *l = strv_free(*l);
                }
        return hutch_error_set(reterr, -r, "out of memory");
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

int serve_base64_encode(const void *data, size_t len, char **ret) {
        char *out;

        if (len > (size_t)INT_MAX / 4 * 3)
                return -E2BIG;
        out = malloc(4 * ((len + 2) / 3) + 1);
        if (!out)
                return -ENOMEM;
        (void)EVP_EncodeBlock((unsigned char *)out, data, (int)len);
        *ret = out;
        return 0;
}

static bool base64_char(char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
               c == '+' || c == '/';
}

int serve_base64_decode(const char *s, size_t len, char **ret, size_t *ret_len) {
        size_t pad = 0;
        char *out;
        int n;

        if (len > INT_MAX)
                return -E2BIG;
        if (len % 4 != 0)
                return -EINVAL;
        if (len > 0 && s[len - 1] == '=')
                pad = s[len - 2] == '=' ? 2 : 1;
        for (size_t i = 0; i < len - pad; i++)
                if (!base64_char(s[i]))
                        return -EINVAL;
        out = malloc(len / 4 * 3 + 1);
        if (!out)
                return -ENOMEM;
        n = EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)s, (int)len);
        if (n < 0 || (size_t)n < pad) {
                free(out);
                return -EINVAL;
        }
        out[n - (int)pad] = '\0';
        *ret_len = (size_t)n - pad;
        *ret = out;
        return 0;
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
        if (serve_base64_encode(data, len, &b64) < 0)
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
