/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <jansson.h>

#include "e2b-connect.h"
#include "macro.h"

static const struct {
        const char *name;
        int status;
} codes[_CONNECT_CODE_MAX] = {
        [CONNECT_OK] = {"ok", 200},
        [CONNECT_CANCELED] = {"canceled", 499},
        [CONNECT_UNKNOWN] = {"unknown", 500},
        [CONNECT_INVALID_ARGUMENT] = {"invalid_argument", 400},
        [CONNECT_DEADLINE_EXCEEDED] = {"deadline_exceeded", 504},
        [CONNECT_NOT_FOUND] = {"not_found", 404},
        [CONNECT_ALREADY_EXISTS] = {"already_exists", 409},
        [CONNECT_PERMISSION_DENIED] = {"permission_denied", 403},
        [CONNECT_RESOURCE_EXHAUSTED] = {"resource_exhausted", 429},
        [CONNECT_FAILED_PRECONDITION] = {"failed_precondition", 400},
        [CONNECT_ABORTED] = {"aborted", 409},
        [CONNECT_OUT_OF_RANGE] = {"out_of_range", 400},
        [CONNECT_UNIMPLEMENTED] = {"unimplemented", 501},
        [CONNECT_INTERNAL] = {"internal", 500},
        [CONNECT_UNAVAILABLE] = {"unavailable", 503},
        [CONNECT_DATA_LOSS] = {"data_loss", 500},
        [CONNECT_UNAUTHENTICATED] = {"unauthenticated", 401},
};

const char *connect_code_to_string(ConnectCode c) {
        if (c < 0 || c >= _CONNECT_CODE_MAX)
                return NULL;
        return codes[c].name;
}

ConnectCode connect_code_from_string(const char *s) {
        if (!s)
                return _CONNECT_CODE_INVALID;
        for (int i = 0; i < _CONNECT_CODE_MAX; i++)
                if (strcmp(codes[i].name, s) == 0)
                        return (ConnectCode)i;
        return _CONNECT_CODE_INVALID;
}

int connect_code_to_http_status(ConnectCode c) {
        if (c < 0 || c >= _CONNECT_CODE_MAX)
                return 500;
        return codes[c].status;
}

ConnectCode connect_code_from_errno(int errnum) {
        switch (errnum) {
        case 0:
                return CONNECT_OK;
        case ENOENT:
        case ESRCH:
                return CONNECT_NOT_FOUND;
        case EEXIST:
        case ENOTEMPTY:
                return CONNECT_ALREADY_EXISTS;
        case EACCES:
        case EPERM:
        case EROFS:
                return CONNECT_PERMISSION_DENIED;
        case EINVAL:
        case ENOTDIR:
        case EISDIR:
        case ENAMETOOLONG:
        case ELOOP:
        case EXDEV:
                return CONNECT_INVALID_ARGUMENT;
        case E2BIG:
        case EMSGSIZE:
        case EFBIG:
                return CONNECT_OUT_OF_RANGE;
        case ENOSPC:
        case EDQUOT:
        case ENOMEM:
        case EMFILE:
        case EAGAIN:
                return CONNECT_RESOURCE_EXHAUSTED;
        case EBUSY:
                return CONNECT_FAILED_PRECONDITION;
        case ETIMEDOUT:
                return CONNECT_DEADLINE_EXCEEDED;
        case EOPNOTSUPP:
        case ENOSYS:
                return CONNECT_UNIMPLEMENTED;
        case ECANCELED:
                return CONNECT_CANCELED;
        case ECONNREFUSED:
        case EHOSTDOWN:
        case ESHUTDOWN:
                return CONNECT_UNAVAILABLE;
        case EBADMSG:
        case EPROTO:
                return CONNECT_INVALID_ARGUMENT;
        default:
                return CONNECT_INTERNAL;
        }
}

static json_t *error_object(ConnectCode c, const char *message) {
        json_t *o;

        if (c <= CONNECT_OK || c >= _CONNECT_CODE_MAX)
                return NULL;
        o = json_object();
        if (!o)
                return NULL;
        if (json_object_set_new(o, "code", json_string(codes[c].name)) < 0 ||
            (message && message[0] &&
             json_object_set_new(o, "message", json_stringn(message, strlen(message))) < 0)) {
                json_decref(o);
                return NULL;
        }
        return o;
}

char *connect_error_json(ConnectCode c, const char *message) {
        json_t *o = error_object(c, message);
        char *s;

        if (!o)
                return NULL;
        s = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        return s;
}

char *connect_end_stream_json(ConnectCode c, const char *message) {
        json_t *o, *e;
        char *s;

        if (c == CONNECT_OK)
                return strdup("{}");
        e = error_object(c, message);
        if (!e)
                return NULL;
        o = json_object();
        if (!o || json_object_set_new(o, "error", e) < 0) {
                if (!o)
                        json_decref(e);
                json_decref(o);
                return NULL;
        }
        s = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        return s;
}

int connect_envelope_parse(const uint8_t *buf, size_t len, uint32_t max, ConnectEnvelope *ret) {
        uint32_t n;

        if (len < CONNECT_ENVELOPE_HEAD)
                return 0;
        /* Compression is never negotiated (no Connect-Content-Encoding is
         * accepted), so the compressed bit is as bad as an unknown one. */
        if (buf[0] & ~CONNECT_FLAG_END_STREAM)
                return -EBADMSG;
        n = (uint32_t)buf[1] << 24 | (uint32_t)buf[2] << 16 | (uint32_t)buf[3] << 8 | buf[4];
        if (n > max)
                return -EMSGSIZE;
        if (len - CONNECT_ENVELOPE_HEAD < n)
                return 0;
        *ret = (ConnectEnvelope){.flags = buf[0], .data = buf + CONNECT_ENVELOPE_HEAD, .len = n};
        return (int)(CONNECT_ENVELOPE_HEAD + n);
}

int connect_stream_request(const uint8_t *body, size_t len, uint32_t max, const uint8_t **ret_data,
                           size_t *ret_len) {
        ConnectEnvelope e;
        int r;

        r = connect_envelope_parse(body, len, max, &e);
        if (r < 0)
                return r;
        if (r == 0 || (size_t)r != len || e.flags != 0)
                return -EBADMSG;
        *ret_data = e.data;
        *ret_len = e.len;
        return 0;
}

int connect_envelope_head(uint8_t flags, size_t len, uint8_t head[CONNECT_ENVELOPE_HEAD]) {
        if (len > UINT32_MAX)
                return -EMSGSIZE;
        head[0] = flags;
        head[1] = (uint8_t)(len >> 24);
        head[2] = (uint8_t)(len >> 16);
        head[3] = (uint8_t)(len >> 8);
        head[4] = (uint8_t)len;
        return 0;
}

static const char *skip_ws(const char *p) {
        while (*p == ' ' || *p == '\t')
                p++;
        return p;
}

bool connect_content_type_ok(const char *ct, ConnectShape shape) {
        const char *want, *p;
        size_t n;

        if (!ct)
                return false;
        switch (shape) {
        case CONNECT_SHAPE_UNARY:
                want = "application/json";
                break;
        case CONNECT_SHAPE_STREAM:
                want = "application/connect+json";
                break;
        case _CONNECT_SHAPE_MAX:
        case _CONNECT_SHAPE_INVALID:
        default:
                return false;
        }
        n = strlen(want);
        p = skip_ws(ct);
        if (strncasecmp(p, want, n) != 0)
                return false;
        p = skip_ws(p + n);
        while (*p == ';') {
                p = skip_ws(p + 1);
                if (strncasecmp(p, "charset=", 8) != 0)
                        return false;
                p += 8;
                if (strncasecmp(p, "utf-8", 5) == 0)
                        p += 5;
                else if (strncasecmp(p, "\"utf-8\"", 7) == 0)
                        p += 7;
                else
                        return false;
                p = skip_ws(p);
        }
        return *p == '\0';
}

int connect_timeout_parse(const char *s, uint64_t *ret) {
        uint64_t v = 0;
        size_t i;

        if (!s) {
                *ret = 0;
                return 0;
        }
        for (i = 0; s[i]; i++) {
                if (i >= 10 || s[i] < '0' || s[i] > '9')
                        return -EINVAL;
                v = v * 10 + (uint64_t)(s[i] - '0');
        }
        if (i == 0)
                return -EINVAL;
        *ret = v;
        return 0;
}

int connect_timestamp_format(int64_t sec, uint32_t nsec, char *buf, size_t size) {
        struct tm tm;
        time_t t = (time_t)sec;
        size_t n;
        int w;

        /* 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59Z, as protobuf's
         * Timestamp allows. */
        if (sec < -62135596800LL || sec > 253402300799LL || nsec > 999999999U)
                return -EINVAL;
        if (!gmtime_r(&t, &tm))
                return -EINVAL;
        n = strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm);
        if (n == 0)
                return -EINVAL;
        if (nsec == 0)
                w = snprintf(buf + n, size - n, "Z");
        else if (nsec % 1000000 == 0)
                w = snprintf(buf + n, size - n, ".%03uZ", nsec / 1000000);
        else if (nsec % 1000 == 0)
                w = snprintf(buf + n, size - n, ".%06uZ", nsec / 1000);
        else
                w = snprintf(buf + n, size - n, ".%09uZ", nsec);
        if (w < 0 || (size_t)w >= size - n)
                return -EINVAL;
        return 0;
}
