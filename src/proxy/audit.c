/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "audit.h"
#include "fd-util.h"
#include "time-util.h"

static const char *const audit_decision_table[_AUDIT_DECISION_MAX] = {
        [AUDIT_ALLOW] = "allow",
        [AUDIT_DENY] = "deny",
        [AUDIT_ERROR] = "error",
};

const char *audit_decision_to_string(AuditDecision d) {
        if (d < 0 || d >= _AUDIT_DECISION_MAX)
                return NULL;
        return audit_decision_table[d];
}

AuditDecision audit_decision_from_string(const char *s) {
        if (!s)
                return _AUDIT_DECISION_INVALID;
        for (size_t i = 0; i < ELEMENTSOF(audit_decision_table); i++)
                if (strcmp(audit_decision_table[i], s) == 0)
                        return (AuditDecision)i;
        return _AUDIT_DECISION_INVALID;
}

int audit_init(Audit *a, int fd, const char *sandbox_id) {
        *a = (Audit){.fd = fd};
        if (sandbox_id) {
                a->sandbox_id = strdup(sandbox_id);
                if (!a->sandbox_id) {
                        a->fd = safe_close(fd);
                        return -ENOMEM;
                }
        }
        return 0;
}

void audit_done(Audit *a) {
        if (!a)
                return;
        a->fd = safe_close(a->fd);
        free(a->sandbox_id);
        a->sandbox_id = NULL;
        for (size_t i = 0; i < a->n_denials; i++) {
                free(a->denials[i].host);
                free(a->denials[i].reason);
        }
        free(a->denials);
        a->denials = NULL;
        a->n_denials = 0;
}

void audit_format_now(char *buf, size_t size) {
        uint64_t ms = time_realtime_ms();
        time_t sec = (time_t)(ms / 1000);
        struct tm tm;
        char base[24];

        if (!gmtime_r(&sec, &tm) || strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm) == 0)
                base[0] = '\0';
        (void)snprintf(buf, size, "%s.%03uZ", base, (unsigned)(ms % 1000));
}

static json_t *string_or_null(const char *s) {
        return s ? json_string(s) : json_null();
}

/* Serialises @obj (stolen) as one line and writes it. */
static int write_line(Audit *a, json_t *obj, int extra_fd) {
        char *text;
        size_t len;
        int r = 0, k;

        if (!obj)
                return -ENOMEM;
        /* JSON_ENSURE_ASCII: hosts are ASCII already; reasons quote what a
         * client sent, which must not break the line-per-record format. */
        text = json_dumps(obj, JSON_COMPACT | JSON_ENSURE_ASCII);
        json_decref(obj);
        if (!text)
                return -ENOMEM;
        len = strlen(text);
        text[len] = '\n';
        if (a->fd >= 0) {
                k = loop_write(a->fd, text, len + 1);
                if (k < 0) {
                        r = k;
                        if (a->last_error == 0)
                                a->last_error = k;
                }
        }
        if (extra_fd >= 0) {
                k = loop_write(extra_fd, text, len + 1);
                if (k < 0 && r == 0)
                        r = k;
        }
        free(text);
        return r;
}

static int count_denial(Audit *a, const AuditRecord *r) {
        const char *host = r->host ? r->host : "";
        const char *reason = r->reason ? r->reason : "";
        AuditDenial *grown;

        for (size_t i = 0; i < a->n_denials; i++) {
                AuditDenial *d = &a->denials[i];

                if (d->port == r->port && strcmp(d->host, host) == 0 &&
                    strcmp(d->reason, reason) == 0) {
                        d->count++;
                        return 0;
                }
        }
        if (a->n_denials >= AUDIT_DENIALS_MAX) {
                a->denials_truncated = true;
                return 0;
        }
        grown = reallocarray(a->denials, a->n_denials + 1, sizeof(AuditDenial));
        if (!grown)
                return -ENOMEM;
        a->denials = grown;
        grown[a->n_denials] = (AuditDenial){
                .host = strdup(host),
                .port = r->port,
                .reason = strdup(reason),
                .count = 1,
        };
        if (!grown[a->n_denials].host || !grown[a->n_denials].reason) {
                free(grown[a->n_denials].host);
                free(grown[a->n_denials].reason);
                return -ENOMEM;
        }
        a->n_denials++;
        return 0;
}

int audit_log(Audit *a, const AuditRecord *r) {
        char now[32];
        json_t *obj;
        int k = 0;

        switch (r->decision) {
        case AUDIT_ALLOW:
                a->n_allowed++;
                break;
        case AUDIT_DENY:
                a->n_denied++;
                k = count_denial(a, r);
                break;
        case AUDIT_ERROR:
                a->n_errors++;
                break;
        case _AUDIT_DECISION_MAX:
        case _AUDIT_DECISION_INVALID:
                return -EINVAL;
        }

        audit_format_now(now, sizeof(now));
        obj = json_pack("{s:s, s:s, s:o, s:o, s:o, s:o, s:o, s:s, s:o, s:o, s:i, s:I, s:I, s:I}",
                        "type", "decision", "time", now, "sandbox", string_or_null(a->sandbox_id),
                        "method", string_or_null(r->method), "host", string_or_null(r->host),
                        "port", r->port ? json_integer(r->port) : json_null(), "address",
                        string_or_null(r->address), "decision",
                        audit_decision_to_string(r->decision), "rule", string_or_null(r->rule),
                        "reason", string_or_null(r->reason), "status", (int)r->status, "bytes_up",
                        (json_int_t)r->bytes_up, "bytes_down", (json_int_t)r->bytes_down,
                        "duration_ms", (json_int_t)r->duration_ms);
        if (k < 0) {
                json_decref(obj);
                return k;
        }
        if (obj && r->intercepted) {
                json_t *names = json_array();

                for (size_t i = 0; names && i < r->n_secrets; i++)
                        (void)json_array_append_new(names, json_string(r->secrets[i]));
                (void)json_object_set_new(obj, "intercepted", json_true());
                if (names)
                        (void)json_object_set_new(obj, "secrets", names);
        }
        if (obj && r->secret)
                (void)json_object_set_new(obj, "secret", json_string(r->secret));
        return write_line(a, obj, -EBADF);
}

static json_t *summary_object(const Audit *a) {
        json_t *denied, *obj;
        char now[32];

        denied = json_array();
        if (!denied)
                return NULL;
        for (size_t i = 0; i < a->n_denials; i++) {
                const AuditDenial *d = &a->denials[i];

                if (json_array_append_new(denied,
                                          json_pack("{s:s, s:o, s:s, s:I}", "host", d->host, "port",
                                                    d->port ? json_integer(d->port) : json_null(),
                                                    "reason", d->reason, "count",
                                                    (json_int_t)d->count)) < 0) {
                        json_decref(denied);
                        return NULL;
                }
        }
        audit_format_now(now, sizeof(now));
        obj = json_pack("{s:s, s:s, s:o, s:I, s:I, s:I, s:o, s:b}", "type", "summary", "time", now,
                        "sandbox", string_or_null(a->sandbox_id), "allowed",
                        (json_int_t)a->n_allowed, "denied_total", (json_int_t)a->n_denied, "errors",
                        (json_int_t)a->n_errors, "denied", denied, "denied_truncated",
                        (int)a->denials_truncated);
        return obj;
}

char *audit_summary(const Audit *a) {
        json_t *obj = summary_object(a);
        char *text;

        if (!obj)
                return NULL;
        text = json_dumps(obj, JSON_COMPACT | JSON_ENSURE_ASCII);
        json_decref(obj);
        return text;
}

int audit_write_summary(Audit *a, int fd) {
        return write_line(a, summary_object(a), fd);
}
