/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* GET and PUT/POST /v1/sandboxes/{name}/files/archive?path=DIR: a tree
 * inside a sandbox as a tar stream, both ways (docs/api.md). The tar is
 * written and read by the sandbox's file builtin (src/lib/sandbox/
 * file-tar.h), inside the sandbox; here only bytes pass. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include <event2/http.h>

#include "serve.h"

/* The path parameter, or NULL after answering 400. */
static const char *archive_path(const ServeCtx *c) {
        const char *path = serve_query(c, "path");

        if (!path || !path[0])
                serve_reply_status(c->req, 400, "invalid_argument", NULL,
                                   "the query parameter 'path' is required");
        return path && path[0] ? path : NULL;
}

void serve_file_archive_get(ServeCtx *c) {
        _cleanup_free_ char *data = NULL;
        const char *path = archive_path(c);
        hutch_error err = {};
        size_t len = 0;
        int r;

        if (!path)
                return;
        r = hutch_file_archive_get(c->param, path, SERVE_ARCHIVE_MAX, &data, &len, &err);
        if (r < 0) {
                serve_reply_api_error(c->req, r, &err, NULL);
                return;
        }
        serve_reply_bytes(c->req, 200, "application/x-tar", data, len);
}

/* The body, a tar stream, extracted into ?path; ?parents=true makes it
 * and its missing parents. */
void serve_file_archive_put(ServeCtx *c) {
        _cleanup_free_ char *data = NULL;
        const char *path = archive_path(c), *parents_s = serve_query(c, "parents");
        hutch_error err = {};
        bool parents = false;
        size_t len = 0;
        int r;

        if (!path)
                return;
        if (parents_s) {
                if (strcmp(parents_s, "1") == 0 || strcmp(parents_s, "true") == 0)
                        parents = true;
                else if (strcmp(parents_s, "0") != 0 && strcmp(parents_s, "false") != 0) {
                        serve_reply_status(c->req, 400, "invalid_argument", NULL,
                                           "invalid parents '%.16s' (want true or false)",
                                           parents_s);
                        return;
                }
        }
        r = serve_body(c, &data, &len);
        if (r >= 0)
                r = hutch_file_archive_put(c->param, path, data, len,
                                           parents ? HUTCH_FILE_PARENTS : 0, &err);
        if (r < 0) {
                serve_reply_api_error(c->req, r, &err, NULL);
                return;
        }
        serve_reply_json(c->req, 200,
                         json_pack("{s:s,s:I}", "path", path, "size", (json_int_t)len));
}
