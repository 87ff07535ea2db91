/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* hutch-proxy's audit log: one JSON line per decision, written when the
 * tunnel or request ends (or at once for a denial), and a final summary
 * line with the denials counted by (host, port, reason), which the
 * supervisor turns into the outcome's `denied` list. docs/network.md shows
 * both line formats.
 *
 * Caps: AUDIT_DENIALS_MAX distinct denials are counted one by one; more
 * only raise the total and set "denied_truncated". */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macro.h"

#define AUDIT_DENIALS_MAX 256

typedef enum AuditDecision {
        AUDIT_ALLOW, /* the policy allowed it (the exchange may still have failed) */
        AUDIT_DENY,  /* the policy refused it: 403 */
        AUDIT_ERROR, /* no decision: the request was malformed or timed out */
        _AUDIT_DECISION_MAX,
        _AUDIT_DECISION_INVALID = -EINVAL,
} AuditDecision;

const char *audit_decision_to_string(AuditDecision d);
AuditDecision audit_decision_from_string(const char *s);

typedef struct AuditRecord {
        const char *method;  /* "CONNECT", "GET", ...; NULL if unknown */
        const char *host;    /* normalised host; NULL if unknown */
        uint16_t port;       /* 0 if unknown */
        const char *address; /* the address connected to or refused; NULL if none */
        AuditDecision decision;
        const char *rule;    /* the deciding allowlist entry; NULL if none */
        const char *reason;  /* why it was denied or failed; NULL if it went through */
        unsigned status;     /* HTTP status sent to the client; 0 if none */
        uint64_t bytes_up;   /* client to upstream, heads included */
        uint64_t bytes_down; /* upstream to client */
        uint64_t duration_ms;
        /* Credential brokering: a request read inside an intercepted TLS
         * connection ("intercepted": true), with the names of the secrets
         * substituted in it ("secrets"); a tripwire names its secret
         * ("secret"). Names only, never values. */
        bool intercepted;
        const char *const *secrets;
        size_t n_secrets;
        const char *secret;
} AuditRecord;

typedef struct AuditDenial {
        char *host;
        uint16_t port;
        char *reason;
        uint64_t count;
} AuditDenial;

typedef struct Audit {
        int fd; /* -EBADF: count only */
        char *sandbox_id;
        uint64_t n_allowed, n_denied, n_errors;
        AuditDenial *denials;
        size_t n_denials;
        bool denials_truncated;
        int last_error; /* the first write error, 0 if none */
} Audit;

/* Initialises @a; takes ownership of @fd (may be -EBADF: nothing is
 * written, decisions are only counted). Copies @sandbox_id (may be NULL).
 * Returns 0 or -ENOMEM (then @fd is closed). */
int audit_init(Audit *a, int fd, const char *sandbox_id);
void audit_done(Audit *a);

/* Counts @r and appends its line to the log. Returns 0, or -errno of a
 * failed write (the record is still counted; the caller decides whether
 * a lost line matters), or -ENOMEM. */
int audit_log(Audit *a, const AuditRecord *r);

/* Returns the summary document (one line, no newline) as a malloc'd
 * string, or NULL on OOM:
 * {"type":"summary","time":...,"sandbox":...,"allowed":N,"denied_total":N,
 *  "errors":N,"denied":[{"host","port","reason","count"}...],
 *  "denied_truncated":false} */
char *audit_summary(const Audit *a);

/* Writes audit_summary() plus a newline to the log and, when @fd >= 0, to
 * @fd as well. Returns 0 or the first -errno. */
int audit_write_summary(Audit *a, int fd);

/* Formats the current time as RFC 3339 UTC with milliseconds
 * ("2024-05-01T12:00:00.123Z") into @buf of at least 32 bytes. */
void audit_format_now(char *buf, size_t size);
