/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "macro.h"
#include "serve-preview.h"

static const char preview_prefix[] = "/v1/sandboxes/";

bool serve_preview_target(const char *target, size_t len, char ret_name[SERVE_PREVIEW_NAME_MAX],
                          unsigned *ret_port, size_t *ret_rest) {
        size_t i = sizeof(preview_prefix) - 1, name_start, name_len, digits = 0;
        unsigned port = 0;

        if (len <= i || memcmp(target, preview_prefix, i) != 0)
                return false;
        name_start = i;
        while (i < len && target[i] != '/' && target[i] != '?')
                i++;
        name_len = i - name_start;
        if (name_len == 0 || name_len >= SERVE_PREVIEW_NAME_MAX)
                return false;
        for (size_t k = name_start; k < i; k++) {
                char ch = target[k];

                if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                      (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-'))
                        return false;
        }
        if (len - i < 7 || memcmp(target + i, "/ports/", 7) != 0)
                return false;
        i += 7;
        while (i < len && target[i] >= '0' && target[i] <= '9') {
                if (++digits > 5)
                        return false;
                port = port * 10 + (unsigned)(target[i] - '0');
                i++;
        }
        if (digits == 0 || port < 1 || port > 65535)
                return false;
        if (i < len && target[i] != '/' && target[i] != '?')
                return false;
        memcpy(ret_name, target + name_start, name_len);
        ret_name[name_len] = '\0';
        *ret_port = port;
        *ret_rest = i;
        return true;
}

/* Whether the header line @line (@n bytes, no CRLF) is named @name. */
static bool header_is(const char *line, size_t n, const char *name) {
        size_t k = strlen(name);

        return n > k && line[k] == ':' && strncasecmp(line, name, k) == 0;
}

bool serve_head_has_upgrade(const char *head, size_t len) {
        const char *line_end = memchr(head, '\n', len);

        for (size_t pos = line_end ? (size_t)(line_end - head) + 1 : len; pos < len;) {
                const char *l = head + pos, *e = memchr(l, '\n', len - pos);
                size_t n = e ? (size_t)(e - l) : len - pos;

                if (n > 0 && l[n - 1] == '\r')
                        n--;
                if (header_is(l, n, "upgrade"))
                        return true;
                pos += e ? (size_t)(e - l) + 1 : len - pos;
        }
        return false;
}

int serve_preview_head(const char *head, size_t len, size_t target, size_t target_len, size_t rest,
                       char **ret, size_t *ret_len) {
        const char *line_end = memchr(head, '\n', len);
        size_t pos, out_len = 0, rest_len = target_len - rest;
        char *out;

        if (!line_end)
                return -EINVAL;
        /* The rewritten head is never longer than the head plus "/". */
        out = malloc(len + 32);
        if (!out)
                return -ENOMEM;
        /* The request line: METHOD SP /REST SP VERSION. */
        memcpy(out, head, target);
        out_len = target;
        if (rest_len == 0 || head[target + rest] == '?')
                out[out_len++] = '/';
        memcpy(out + out_len, head + target + rest, rest_len);
        out_len += rest_len;
        memcpy(out + out_len, head + target + target_len,
               (size_t)(line_end - head) + 1 - target - target_len);
        out_len += (size_t)(line_end - head) + 1 - target - target_len;
        for (pos = (size_t)(line_end - head) + 1; pos < len;) {
                const char *l = head + pos, *e = memchr(l, '\n', len - pos);
                size_t full = e ? (size_t)(e - l) + 1 : len - pos, n = full;

                while (n > 0 && (l[n - 1] == '\n' || l[n - 1] == '\r'))
                        n--;
                pos += full;
                if (n == 0) {
                        /* The empty line that ends the head. */
                        memcpy(out + out_len, l, full);
                        out_len += full;
                        break;
                }
                if (header_is(l, n, "authorization"))
                        continue;
                memcpy(out + out_len, l, full);
                out_len += full;
        }
        out[out_len] = '\0';
        *ret = out;
        *ret_len = out_len;
        return 0;
}
