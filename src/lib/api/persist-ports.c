/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "api/persist.h"
#include "fd-util.h"
#include "strv.h"

/* The sandbox's record, loaded under its lock (held in @ret_lock), and
 * its policy. */
static int load_locked(Store *s, const char *name, SandboxRecord **ret_rec, Policy **ret_policy,
                       int *ret_lock, HutchError *reterr) {
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        _cleanup_(policy_freep) Policy *p = NULL;
        _cleanup_free_ char *real = NULL;
        _cleanup_close_ int lock = -EBADF;
        int r;

        r = store_sandbox_load(s, name, &rec, reterr);
        if (r < 0)
                return r;
        real = strdup(rec->name);
        if (!real)
                return -ENOMEM;
        r = store_lock_sandbox(s, real, &lock);
        if (r < 0)
                return hutch_error_set(reterr, ENOENT, "no sandbox named '%s'", name);
        rec = sandbox_record_free(rec);
        r = store_sandbox_load_locked(s, real, &rec, reterr);
        if (r < 0)
                return r;
        p = policy_new();
        if (!p)
                return -ENOMEM;
        r = policy_load_json(p, rec->policy_json, strlen(rec->policy_json), reterr);
        if (r < 0)
                return r;
        *ret_rec = TAKE_PTR(rec);
        *ret_policy = TAKE_PTR(p);
        *ret_lock = TAKE_FD(lock);
        return 0;
}

static int save_policy(Store *s, SandboxRecord *rec, const Policy *p, HutchError *reterr) {
        _cleanup_free_ char *text = NULL;
        int r;

        r = policy_to_json(p, &text);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot store this policy: %s", strerror(-r));
        free(rec->policy_json);
        rec->policy_json = TAKE_PTR(text);
        return store_sandbox_save(s, rec, reterr);
}

/* The policy's entries in the shape of the keeper's list (host_port 0: a
 * free one, chosen when the sandbox starts). */
static int policy_ports_json(const Policy *p, char **ret) {
        _cleanup_(json_decrefp) json_t *arr = json_array();
        char *text;

        if (!arr)
                return -ENOMEM;
        STRV_FOREACH(e, p->ports) {
                char host[PORT_SPEC_STRING_MAX];
                PortSpec spec;

                if (port_spec_parse(*e, &spec, NULL) < 0)
                        continue;
                port_spec_host_to_string(&spec, host, sizeof(host));
                if (json_array_append_new(arr,
                                          json_pack("{s:i,s:s,s:s,s:i}", "port", (int)spec.port,
                                                    "protocol", "tcp", "host_ip", host, "host_port",
                                                    (int)spec.host_port)) < 0)
                        return -ENOMEM;
        }
        text = json_dumps(arr, JSON_COMPACT);
        if (!text)
                return -ENOMEM;
        *ret = text;
        return 0;
}

int persist_ports_list(Store *s, const char *name, char **ret_json, bool *ret_running,
                       HutchError *reterr) {
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        _cleanup_(policy_freep) Policy *p = NULL;
        _cleanup_close_ int sock = -EBADF;
        int r;

        r = store_sandbox_load(s, name, &rec, reterr);
        if (r < 0)
                return r;
        p = policy_new();
        if (!p)
                return -ENOMEM;
        r = policy_load_json(p, rec->policy_json, strlen(rec->policy_json), reterr);
        if (r < 0)
                return r;
        r = persist_connect(s, rec->name, false, &sock, NULL);
        if (r >= 0) {
                r = keeper_ports(sock, NULL, NULL, 0, ret_json, reterr);
                if (r < 0)
                        return r == -ENOMEM ? hutch_error_set(reterr, ENOMEM, "out of memory") : r;
                *ret_running = true;
                return 0;
        }
        r = policy_ports_json(p, ret_json);
        if (r < 0)
                return hutch_error_set(reterr, -r, "out of memory");
        *ret_running = false;
        return 0;
}

int persist_port_add(Store *s, const char *name, const char *spec, char **ret_json,
                     HutchError *reterr) {
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        _cleanup_(policy_freep) Policy *p = NULL;
        _cleanup_close_ int lock = -EBADF, sock = -EBADF;
        _cleanup_free_ char *json = NULL;
        PortSpec parsed;
        int r;

        r = port_spec_parse(spec, &parsed, reterr);
        if (r < 0)
                return r;
        r = load_locked(s, name, &rec, &p, &lock, reterr);
        if (r < 0)
                return r;
        r = policy_add_port(p, spec, NULL, reterr);
        if (r >= 0)
                r = policy_validate(p, reterr);
        if (r < 0)
                return r;
        /* A running sandbox gets it now (the listener is made first: a port
         * in use is refused with nothing saved). */
        if (persist_connect(s, rec->name, false, &sock, NULL) >= 0) {
                r = keeper_ports(sock, "add", spec, 0, &json, reterr);
                if (r < 0)
                        return r;
                sock = safe_close(sock);
        } else {
                char *last = p->ports[strv_length(p->ports) - 1];
                PortSpec saved;

                /* Stopped: the entry as saved. */
                if (port_spec_parse(last, &saved, NULL) >= 0) {
                        _cleanup_(policy_freep) Policy *one = policy_new();

                        if (!one || policy_add_port(one, last, NULL, NULL) < 0 ||
                            policy_ports_json(one, &json) < 0)
                                return hutch_error_set(reterr, ENOMEM, "out of memory");
                }
        }
        r = save_policy(s, rec, p, reterr);
        if (r < 0) {
                if (persist_connect(s, rec->name, false, &sock, NULL) >= 0)
                        (void)keeper_ports(sock, "rm", NULL, parsed.port, NULL, NULL);
                return r;
        }
        if (ret_json)
                *ret_json = TAKE_PTR(json);
        return 0;
}

int persist_port_remove(Store *s, const char *name, uint16_t port, HutchError *reterr) {
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        _cleanup_(policy_freep) Policy *p = NULL;
        _cleanup_close_ int lock = -EBADF, sock = -EBADF;
        int removed, r;

        if (port == 0)
                return hutch_error_set(reterr, EINVAL, "invalid port 0");
        r = load_locked(s, name, &rec, &p, &lock, reterr);
        if (r < 0)
                return r;
        removed = policy_remove_port(p, port);
        if (persist_connect(s, rec->name, false, &sock, NULL) >= 0) {
                r = keeper_ports(sock, "rm", NULL, port, NULL, reterr);
                if (r < 0)
                        return r;
                removed += r;
        }
        if (removed == 0)
                return hutch_error_set(reterr, ENOENT, "port %u of sandbox '%s' is not published",
                                       (unsigned)port, rec->name);
        return save_policy(s, rec, p, reterr);
}

int persist_port_connect(Store *s, const char *name, uint16_t port, int *ret_fd,
                         HutchError *reterr) {
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        _cleanup_close_ int sock = -EBADF;
        int r;

        r = store_sandbox_load(s, name, &rec, reterr);
        if (r < 0)
                return r;
        r = persist_connect(s, rec->name, false, &sock, NULL);
        if (r < 0)
                return hutch_error_set(reterr, ENOTCONN, "sandbox '%s' is not running", rec->name);
        return keeper_port_connect(sock, port, ret_fd, reterr);
}
