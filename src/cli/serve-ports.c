/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* POST /v1/sandboxes/{name}/ports and DELETE .../ports/{port}: publish
 * and unpublish a port of a running or stopped sandbox, as `hutch port
 * NAME add|rm` (docs/api.md "Ports"; hutch_port_publish()). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <event2/http.h>
#include <jansson.h>

#include "api/hutch-ext.h"
#include "parse-util.h"
#include "serve.h"

typedef struct PublishArgs {
        uint64_t port;
        uint64_t host_port;
        const char *host_ip;
} PublishArgs;

static const ServeField publish_fields[] = {
        {"port", SERVE_FIELD_U64, offsetof(PublishArgs, port), true},
        {"host_port", SERVE_FIELD_U64, offsetof(PublishArgs, host_port), false},
        {"host_ip", SERVE_FIELD_STRING, offsetof(PublishArgs, host_ip), false},
};

/* {"port":N,"host_port":N?,"host_ip":S?} -> 201 with the entry as GET
 * .../ports lists it (host_port as bound while it runs). */
void serve_port_publish(ServeCtx *c) {
        _cleanup_free_ char *spec = NULL, *json = NULL;
        PublishArgs a = {};
        hutch_error err = {};
        json_t *root = NULL, *ports, *entry;
        int r;

        r = serve_body_object(c, publish_fields, ELEMENTSOF(publish_fields), &a, &root);
        if (r < 0)
                return;
        if (a.port < 1 || a.port > 65535) {
                serve_reply_status(c->req, 400, "invalid_argument", "/port",
                                   "invalid port %llu (expected 1 to 65535)",
                                   (unsigned long long)a.port);
                goto out;
        }
        if (a.host_port > 65535) {
                serve_reply_status(c->req, 400, "invalid_argument", "/host_port",
                                   "invalid host_port %llu (expected 0 to 65535; 0: a free one)",
                                   (unsigned long long)a.host_port);
                goto out;
        }
        /* docker's "[IP:][HOSTPORT:]PORT", which port_spec_parse() checks:
         * an IPv6 address goes in brackets. */
        if (a.host_ip &&
            (strlen(a.host_ip) == 0 || strlen(a.host_ip) > 45 || strpbrk(a.host_ip, "[]/ "))) {
                serve_reply_status(c->req, 400, "invalid_argument", "/host_ip",
                                   "invalid host_ip '%.48s' (an IPv4 or IPv6 address)", a.host_ip);
                goto out;
        }
        if (asprintf(&spec, "%s%s%s%s%llu:%llu", a.host_ip && strchr(a.host_ip, ':') ? "[" : "",
                     a.host_ip ? a.host_ip : "", a.host_ip && strchr(a.host_ip, ':') ? "]" : "",
                     a.host_ip ? ":" : "", (unsigned long long)a.host_port,
                     (unsigned long long)a.port) < 0) {
                spec = NULL;
                serve_reply_errno(c->req, ENOMEM, NULL, "out of memory");
                goto out;
        }
        r = hutch_port_publish(c->param, spec, &json, &err);
        if (r < 0) {
                serve_reply_api_error(c->req, r, &err, NULL);
                goto out;
        }
        ports = json ? json_loads(json, 0, NULL) : NULL;
        entry = json_is_array(ports) && json_array_size(ports) > 0
                        ? json_incref(json_array_get(ports, json_array_size(ports) - 1))
                        : NULL;
        json_decref(ports);
        if (!entry)
                serve_reply_errno(c->req, ENOMEM, NULL, "out of memory");
        else
                serve_reply_json(c->req, 201, entry);
out:
        json_decref(root);
}

/* DELETE .../ports/{port}: 204, or 404 when it was not published. The
 * front (serve-front.c) passes this one exact form here; every other
 * request under .../ports/{port} is the preview. */
void serve_port_unpublish(ServeCtx *c) {
        const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(c->req);
        const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
        const char *p = path ? path + strlen("/v1/sandboxes/") : NULL;
        size_t n = p ? strcspn(p, "/") : 0;
        char name[HUTCH_EXT_NAME_MAX + 1];
        hutch_error err = {};
        uint32_t port;
        int r;

        /* dispatch() matched the pattern: the name is the third part. */
        if (!p || n == 0 || n > HUTCH_EXT_NAME_MAX) {
                serve_reply_status(c->req, 400, "invalid_argument", NULL, "invalid sandbox name");
                return;
        }
        memcpy(name, p, n);
        name[n] = '\0';
        if (!hutch_ext_name_is_valid(name)) {
                serve_reply_status(c->req, 400, "invalid_argument", NULL,
                                   "invalid name '%s': it must match [a-z0-9][a-z0-9_.-]{0,62}",
                                   name);
                return;
        }
        if (safe_atou32(c->param, &port) < 0 || port < 1 || port > 65535) {
                serve_reply_status(c->req, 400, "invalid_argument", NULL,
                                   "invalid port '%.16s' (expected 1 to 65535)", c->param);
                return;
        }
        r = hutch_port_unpublish(name, port, &err);
        if (r < 0)
                serve_reply_api_error(c->req, r, &err, NULL);
        else
                serve_reply_no_content(c->req);
}
