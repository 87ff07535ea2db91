/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <string.h>
#include <sys/socket.h>

#include "fd-util.h"
#include "macro.h"
#include "sandbox/keeper-toolkit.h"
#include "sandbox/keeper.h"
#include "sandbox/port-forward.h"

static json_t *port_forward_json(const PortForward *f) {
        char host[INET6_ADDRSTRLEN + 2];

        port_spec_host_to_string(&f->spec, host, sizeof(host));
        return json_pack("{s:i,s:s,s:s,s:i}", "port", (int)f->spec.port, "protocol", "tcp",
                         "host_ip", host, "host_port", (int)f->spec.host_port);
}

static json_t *port_forwards_json(const PortForwards *t, int only_port) {
        json_t *arr = json_array();

        for (size_t i = 0; arr && i < t->n; i++) {
                if (only_port > 0 && t->items[i].spec.port != only_port)
                        continue;
                if (json_array_append_new(arr, port_forward_json(&t->items[i])) < 0) {
                        json_decref(arr);
                        return NULL;
                }
        }
        return arr;
}

static int answer_ports(int fd, json_t *ports) {
        if (!ports) {
                keeper_send_error(fd, "out of memory");
                return -ECONNRESET;
        }
        (void)keeper_send_json(fd, json_pack("{s:s,s:o}", "op", "ok", "ports", ports), NULL, 0);
        return -ECONNRESET;
}

int keeper_ports_handle(int fd, json_t *req, const char *op, PortForwards *t) {
        const char *action = json_string_value(json_object_get(req, "action"));
        HutchError e = {};
        PortSpec spec;
        int r;

        if (strcmp(op, "ports") == 0)
                return answer_ports(fd, port_forwards_json(t, 0));
        if (strcmp(op, "connect") == 0) {
                json_t *port = json_object_get(req, "port");
                _cleanup_close_ int sock = -EBADF;

                if (!json_is_integer(port) || json_integer_value(port) < 1 ||
                    json_integer_value(port) > 65535) {
                        keeper_send_error(fd, "invalid port");
                        return -ECONNRESET;
                }
                r = port_forwards_connect(t, (uint16_t)json_integer_value(port), &sock);
                if (r < 0) {
                        char msg[128];

                        (void)snprintf(msg, sizeof(msg),
                                       "cannot connect to port %d in the sandbox: %s",
                                       (int)json_integer_value(port),
                                       r == -ECONNREFUSED ? "nothing listens there" : strerror(-r));
                        keeper_send_error(fd, msg);
                        return -ECONNRESET;
                }
                (void)keeper_send_json(fd, json_pack("{s:s}", "op", "ok"), &sock, 1);
                return -ECONNRESET;
        }
        if (action && strcmp(action, "add") == 0) {
                const char *text = json_string_value(json_object_get(req, "spec"));

                r = port_spec_parse(text, &spec, &e);
                if (r >= 0)
                        r = port_forwards_add(t, &spec, &e);
                if (r >= 0)
                        r = port_forwards_start(t, &e);
                if (r < 0) {
                        /* With its errno: a host port in use is EADDRINUSE
                         * (the API's 409). */
                        (void)keeper_send_json(fd,
                                               json_pack("{s:s,s:s,s:i}", "op", "error", "message",
                                                         e.msg, "errno",
                                                         e.errnum > 0 ? e.errnum : -r),
                                               NULL, 0);
                        return -ECONNRESET;
                }
                return answer_ports(fd, port_forwards_json(t, spec.port));
        }
        if (action && strcmp(action, "rm") == 0) {
                json_t *port = json_object_get(req, "port");

                if (!json_is_integer(port) || json_integer_value(port) < 1 ||
                    json_integer_value(port) > 65535) {
                        keeper_send_error(fd, "invalid port");
                        return -ECONNRESET;
                }
                r = port_forwards_remove(t, (uint16_t)json_integer_value(port));
                (void)keeper_send_json(fd, json_pack("{s:s,s:i}", "op", "ok", "removed", r), NULL,
                                       0);
                return -ECONNRESET;
        }
        keeper_send_error(fd, "unknown port action");
        return -ECONNRESET;
}

/* ---- client side ---- */

int keeper_port_connect(int sock, uint16_t port, int *ret_fd, HutchError *reterr) {
        _cleanup_(json_decrefp) json_t *ans = NULL;
        int fds[1] = {-EBADF};
        const char *op;
        int r;

        r = keeper_send_json(sock, json_pack("{s:s,s:i}", "op", "connect", "port", (int)port), NULL,
                             0);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot reach the keeper: %s", strerror(-r));
        r = keeper_recv_json(sock, &ans, fds, 1);
        if (r <= 0)
                return hutch_error_set(reterr, r < 0 ? -r : EPIPE,
                                       "the keeper did not answer the connect request");
        op = json_string_value(json_object_get(ans, "op"));
        if (op && strcmp(op, "ok") == 0 && fds[0] >= 0) {
                *ret_fd = fds[0];
                return 0;
        }
        safe_close(fds[0]);
        if (op && strcmp(op, "error") == 0)
                return hutch_error_set(reterr, ECONNREFUSED, "%s",
                                       json_string_value(json_object_get(ans, "message"))
                                               ?: "refused");
        return hutch_error_set(reterr, EBADMSG, "unexpected answer from the keeper");
}

int keeper_ports(int sock, const char *action, const char *spec, uint16_t port, char **ret_json,
                 HutchError *reterr) {
        _cleanup_(json_decrefp) json_t *ans = NULL;
        _cleanup_free_ char *text = NULL;
        json_t *req, *ports;
        const char *op;
        int r;

        if (!action)
                req = json_pack("{s:s}", "op", "ports");
        else if (strcmp(action, "add") == 0)
                req = json_pack("{s:s,s:s,s:s}", "op", "port", "action", "add", "spec", spec);
        else
                req = json_pack("{s:s,s:s,s:i}", "op", "port", "action", "rm", "port", (int)port);
        if (!req)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        r = keeper_send_json(sock, req, NULL, 0);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot reach the keeper: %s", strerror(-r));
        r = keeper_recv_json(sock, &ans, NULL, 0);
        if (r <= 0)
                return hutch_error_set(reterr, r < 0 ? -r : EPIPE,
                                       "the keeper did not answer the port request");
        op = json_string_value(json_object_get(ans, "op"));
        if (op && strcmp(op, "error") == 0) {
                json_int_t e = json_integer_value(json_object_get(ans, "errno"));

                return hutch_error_set(reterr, e > 0 && e < 4096 ? (int)e : EINVAL, "%s",
                                       json_string_value(json_object_get(ans, "message"))
                                               ?: "refused");
        }
        if (!op || strcmp(op, "ok") != 0)
                return hutch_error_set(reterr, EBADMSG, "unexpected answer from the keeper");
        ports = json_object_get(ans, "ports");
        if (ret_json) {
                text = json_dumps(ports ? ports : json_array(), JSON_COMPACT);
                if (!text)
                        return hutch_error_set(reterr, ENOMEM, "out of memory");
                *ret_json = TAKE_PTR(text);
        }
        return json_is_integer(json_object_get(ans, "removed"))
                       ? (int)json_integer_value(json_object_get(ans, "removed"))
                       : 0;
}
