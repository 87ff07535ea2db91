/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <string.h>

#include "sandbox/keeper-toolkit.h"
#include "sandbox/keeper.h"
#include "sandbox/proxy-spawn.h"

int keeper_network_update(ProxyProcess *proxy, int fd, json_t *req) {
        const char *text = json_string_value(json_object_get(req, "policy"));
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError e = {};
        int r;

        if (!p)
                r = hutch_error_set(&e, ENOMEM, "out of memory");
        else if (!text)
                r = hutch_error_set(&e, EINVAL, "malformed network request");
        else
                r = policy_load_json(p, text, strlen(text), &e);
        if (r >= 0 && proxy->pid <= 0)
                r = hutch_error_set(&e, EOPNOTSUPP,
                                    "the sandbox runs without hutch-proxy (its network mode is "
                                    "not allow)");
        if (r >= 0)
                r = proxy_set_policy(proxy, p, &e);
        if (r < 0) {
                keeper_send_error(fd, e.msg);
                return 0;
        }
        return keeper_send_json(fd, json_pack("{s:s}", "op", "ok"), NULL, 0);
}
