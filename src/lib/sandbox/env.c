/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>
#include <string.h>

#include "agent-protocol.h"
#include "sandbox/sandbox.h"
#include "sandbox/secrets.h"
#include "strv.h"

#define SANDBOX_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* Caller variables that describe the terminal and locale, not the caller:
 * passed through by default. */
static const char *const passthrough[] = {"TERM", "LANG", "TZ", NULL};

int sandbox_build_env(const Policy *policy, char *const *image_env, char *const *caller_env,
                      char ***ret) {
        _cleanup_strv_free_ char **env = NULL;
        int r;

        env = calloc(1, sizeof(char *));
        if (!env)
                return -ENOMEM;

        r = strv_env_set(&env, "PATH", SANDBOX_PATH);
        if (r < 0)
                return r;
        r = strv_env_set(&env, "HOME", POLICY_SANDBOX_HOME);
        if (r < 0)
                return r;
        r = strv_env_set(&env, "USER", "root");
        if (r < 0)
                return r;
        r = strv_env_set(&env, "HUTCH", "1");
        if (r < 0)
                return r;

        for (size_t i = 0; passthrough[i]; i++) {
                const char *v = strv_env_get(caller_env, passthrough[i]);

                if (v) {
                        r = strv_env_set(&env, passthrough[i], v);
                        if (r < 0)
                                return r;
                }
        }
        for (size_t i = 0; caller_env && caller_env[i]; i++)
                if (strncmp(caller_env[i], "LC_", 3) == 0 && strchr(caller_env[i], '=')) {
                        r = strv_extend(&env, caller_env[i]);
                        if (r < 0)
                                return r;
                }

        if (policy_network_mode(policy) == NETWORK_MODE_ALLOW) {
                /* Every common client finds the proxy through these; the
                 * sandbox has no DNS and no other way out. */
                static const char *const proxy_vars[] = {
                        "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
                        "http_proxy", "https_proxy", "all_proxy",
                };
                char url[64];

                /* A microVM reaches the proxy through slirp's forward
                 * (docs/vm.md), not on its own loopback. */
                (void)snprintf(url, sizeof(url), "http://%s:%d",
                               policy->backend == SANDBOX_BACKEND_VM ? AGENT_PROXY_ADDR
                                                                     : "127.0.0.1",
                               SANDBOX_PROXY_PORT);
                for (size_t i = 0; i < ELEMENTSOF(proxy_vars); i++) {
                        r = strv_env_set(&env, proxy_vars[i], url);
                        if (r < 0)
                                return r;
                }
                r = strv_env_set(&env, "NO_PROXY", "localhost,127.0.0.1,::1");
                if (r >= 0)
                        r = strv_env_set(&env, "no_proxy", "localhost,127.0.0.1,::1");
                if (r >= 0)
                        r = strv_env_set(&env, "NODE_USE_ENV_PROXY", "1");
                if (r < 0)
                        return r;
        }
        if (policy->n_secrets > 0) {
                /* The proxy terminates TLS for the secrets' hosts with the
                 * sandbox's own CA: every common client must trust the
                 * bundle that holds it (docs/secrets.md). */
                for (size_t i = 0; secret_ca_env_vars[i]; i++) {
                        r = strv_env_set(&env, secret_ca_env_vars[i], SANDBOX_CA_BUNDLE_PATH);
                        if (r < 0)
                                return r;
                }
                /* Clients that look up hashed directories (OpenSSL's and Go's
                 * take a ':'-separated list): the sandbox CA, then the
                 * system's. */
                r = strv_env_set(&env, "SSL_CERT_DIR", SANDBOX_CA_DIR ":/etc/ssl/certs");
                if (r < 0)
                        return r;
        }

        /* The image's Env over the defaults, below -e and --env-pass
         * (docker's order). */
        for (size_t i = 0; image_env && image_env[i]; i++) {
                _cleanup_free_ char *key = NULL;
                const char *eq = strchr(image_env[i], '=');

                if (!eq)
                        continue;
                key = strndup(image_env[i], (size_t)(eq - image_env[i]));
                if (!key)
                        return -ENOMEM;
                if (!env_name_is_valid(key))
                        continue;
                r = strv_env_set(&env, key, eq + 1);
                if (r < 0)
                        return r;
        }
        STRV_FOREACH(name, policy->env_pass) {
                const char *v = strv_env_get(caller_env, *name);

                if (!v)
                        continue;
                r = strv_env_set(&env, *name, v);
                if (r < 0)
                        return r;
        }
        STRV_FOREACH(kv, policy->env) {
                _cleanup_free_ char *key = NULL;
                const char *eq = strchr(*kv, '=');

                if (!eq)
                        continue;
                key = strndup(*kv, (size_t)(eq - *kv));
                if (!key)
                        return -ENOMEM;
                r = strv_env_set(&env, key, eq + 1);
                if (r < 0)
                        return r;
        }

        *ret = TAKE_PTR(env);
        return 0;
}
