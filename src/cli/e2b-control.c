/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The control plane of hutch serve --e2b (docs/e2b.md "Control plane"):
 * E2B's REST routes over the table of sandboxes (e2b-sandboxes.c), each
 * E2B sandbox a persistent hutch sandbox made through the C API. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <time.h>
#include <unistd.h>

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "api/hutch-ext.h"
#include "e2b-internal.h"
#include "log.h"
#include "parse-util.h"
#include "serve-util.h"
#include "strv.h"
#include "time-util.h"

#define LIST_LIMIT_MAX 100

typedef struct Route {
        const char *method;
        const char *pattern;
        int (*handler)(E2bRequest *req, const char *id);
} Route;

/* ---- helpers ---- */

static json_t *iso_time(uint64_t ms) {
        time_t t = (time_t)(ms / 1000);
        struct tm tm;
        char buf[64];

        if (!gmtime_r(&t, &tm))
                return json_null();
        (void)snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03uZ", tm.tm_year + 1900,
                       tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                       (unsigned)(ms % 1000));
        return json_string(buf);
}

/* "2026-12-02T04:15:03[.123][Z]" as ms since the epoch. */
static int parse_iso_time(const char *s, uint64_t *ret) {
        struct tm tm = {};
        const char *end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
        uint64_t ms = 0, scale = 100;
        time_t t;

        if (!end)
                return -EINVAL;
        if (*end == '.')
                for (end++; *end >= '0' && *end <= '9'; end++) {
                        ms += (uint64_t)(*end - '0') * scale;
                        scale /= 10;
                }
        if (*end == 'Z')
                end++;
        if (*end)
                return -EINVAL;
        t = timegm(&tm);
        if (t < 0)
                return -EINVAL;
        *ret = (uint64_t)t * 1000 + ms;
        return 0;
}

static const char *rec_str(json_t *rec, const char *key) {
        return json_string_value(json_object_get(rec, key));
}

static uint64_t rec_u64(json_t *rec, const char *key) {
        json_int_t v = json_integer_value(json_object_get(rec, key));

        return v > 0 ? (uint64_t)v : 0;
}

/* The record's sandbox as E2B's answers show it. @detail: GET
 * /sandboxes/{id} (SandboxDetail), else a list entry (ListedSandbox). */
static json_t *sandbox_json(const E2bServer *srv, json_t *rec, bool detail) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        json_t *o, *net = json_object_get(rec, "network");

        o = json_pack("{s:s?,s:s?,s:s,s:o,s:o,s:s,s:O,s:s?,s:i,s:i,s:i,s:O,s:O,s:{s:s,s:b},s:[]}",
                      "templateID", rec_str(rec, "templateID"), "sandboxID",
                      rec_str(rec, "sandboxID"), "clientID", "hutch", "startedAt",
                      iso_time(rec_u64(rec, "startedAt")), "endAt", iso_time(rec_u64(rec, "endAt")),
                      "envdVersion", E2B_ENVD_VERSION, "metadata", json_object_get(rec, "metadata"),
                      "state", rec_str(rec, "state"), "cpuCount", (int)(cpus > 0 ? cpus : 1),
                      "memoryMB", 2048, "diskSizeMB", 10240, "allowInternetAccess",
                      json_object_get(rec, "allowInternetAccess"), "network",
                      net ? net : json_null(), "lifecycle", "onTimeout",
                      json_is_true(json_object_get(rec, "autoPause")) ? "pause" : "kill",
                      "autoResume", 0, "volumeMounts");
        if (!o)
                return NULL;
        if (detail) {
                json_t *tok = json_object_get(rec, "accessToken");

                if (json_object_set_new(o, "domain", json_string(srv->domain)) < 0 ||
                    json_object_set(o, "envdAccessToken", tok ? tok : json_null()) < 0) {
                        json_decref(o);
                        return NULL;
                }
        }
        return o;
}

/* The answer of create, connect and resume (E2B's Sandbox). */
static json_t *created_json(const E2bServer *srv, json_t *rec) {
        json_t *tok = json_object_get(rec, "accessToken");

        return json_pack("{s:s?,s:s?,s:s,s:s,s:O,s:n,s:s}", "templateID",
                         rec_str(rec, "templateID"), "sandboxID", rec_str(rec, "sandboxID"),
                         "clientID", "hutch", "envdVersion", E2B_ENVD_VERSION, "envdAccessToken",
                         tok ? tok : json_null(), "trafficAccessToken", "domain", srv->domain);
}

static int reply_hutch_error(E2bRequest *req, int r, const hutch_error *err, const char *what) {
        int e = err && err->code > 0 ? err->code : -r;
        const char *msg = err && err->message[0] ? err->message : strerror(e);
        int status;

        switch (e) {
        case ENOENT:
                status = 404;
                break;
        case EINVAL:
        case ENAMETOOLONG:
        case E2BIG:
                status = 400;
                break;
        case EEXIST:
        case EBUSY:
                status = 409;
                break;
        case EACCES:
        case EPERM:
                status = 403;
                break;
        default:
                status = 500;
        }
        return e2b_reply_error(req, status, "%s: %s", what, msg);
}

/* Reads the JSON body (empty: {}) and decodes it by @fields into @dest;
 * answers 400 itself. */
static int body_decode(E2bRequest *req, const ServeField *fields, size_t n, void *dest,
                       json_t **ret_root) {
        _cleanup_free_ char *text = NULL;
        HutchError err = {};
        json_error_t jerr;
        json_t *root;
        size_t len;
        int r;

        r = e2b_request_body(req, E2B_CONTROL_BODY_MAX, &text, &len);
        if (r < 0) {
                req->close = true;
                if (r == -E2BIG)
                        (void)e2b_reply_error(req, 413, "the request body is too large");
                return r;
        }
        root = len == 0 ? json_object() : json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!root) {
                (void)e2b_reply_error(req, 400, "the request body is not valid JSON: %s",
                                      len ? jerr.text : "out of memory");
                return -EINVAL;
        }
        r = serve_decode_object(root, fields, n, dest, &err);
        if (r < 0) {
                json_decref(root);
                (void)e2b_reply_error(req, 400, "%s%s%s", err.msg, err.pointer[0] ? " at " : "",
                                      err.pointer);
                return r;
        }
        *ret_root = root;
        return 0;
}

/* The sandbox @id locked and loaded; answers 404 itself. */
static int load_locked(E2bRequest *req, const char *id, int *ret_lock, json_t **ret) {
        _cleanup_close_ int lock = -EBADF;
        json_t *rec = NULL;
        const char *state;
        int r;

        lock = e2b_table_lock(req->srv, id);
        if (lock < 0) {
                (void)e2b_reply_error(req, lock == -ENOENT ? 404 : 500, "sandbox '%s' not found",
                                      id);
                return lock;
        }
        r = e2b_table_load(req->srv, id, &rec);
        state = r >= 0 ? rec_str(rec, "state") : NULL;
        if (r >= 0 && (!state || strcmp(state, "creating") == 0 || strcmp(state, "killing") == 0)) {
                json_decref(rec);
                r = -ENOENT;
        }
        if (r < 0) {
                (void)e2b_reply_error(req, 404, "sandbox '%s' not found", id);
                return r;
        }
        *ret_lock = TAKE_FD(lock);
        *ret = rec;
        return 0;
}

/* ---- the policy of a new sandbox ---- */

static bool is_everything(const char *s) {
        return strcmp(s, "0.0.0.0/0") == 0 || strcmp(s, "::/0") == 0;
}

typedef struct NetworkBody {
        char **allow_out;
        char **deny_out;
        bool allow_public_traffic;
        const char *mask_request_host;
        json_t *rules;
        json_t *egress_proxy;
        char **https_ports;
} NetworkBody;

static const ServeField network_fields[] = {
        {"allowOut", SERVE_FIELD_STRV, offsetof(NetworkBody, allow_out), false},
        {"denyOut", SERVE_FIELD_STRV, offsetof(NetworkBody, deny_out), false},
        {"allowPublicTraffic", SERVE_FIELD_BOOL, offsetof(NetworkBody, allow_public_traffic),
         false},
        {"maskRequestHost", SERVE_FIELD_STRING, offsetof(NetworkBody, mask_request_host), false},
        {"rules", SERVE_FIELD_OBJECT, offsetof(NetworkBody, rules), false},
        {"egressProxy", SERVE_FIELD_OBJECT, offsetof(NetworkBody, egress_proxy), false},
};

static void network_body_done(NetworkBody *n) {
        n->allow_out = strv_free(n->allow_out);
        n->deny_out = strv_free(n->deny_out);
}

/* Narrows @policy (the serve flags' policy as JSON) by the create request:
 * @internet false (allow_internet_access) or a denyOut of everything
 * without allowOut: no network; allowOut: exactly those hosts, each
 * within the serve flags' allowlist (else 400: refused, never widened);
 * denyOut: deny entries on top. Answers the error itself. */
static int narrow_network(E2bRequest *req, json_t *policy, bool internet, json_t *network) {
        NetworkBody nb = {.allow_public_traffic = true};
        HutchError err = {};
        bool deny_all = false, none;
        json_t *deny;
        int r;

        if (network && !json_is_null(network)) {
                r = serve_decode_object(network, network_fields, ELEMENTSOF(network_fields), &nb,
                                        &err);
                if (r < 0) {
                        (void)e2b_reply_error(req, 400, "network: %s%s%s", err.msg,
                                              err.pointer[0] ? " at /network" : "", err.pointer);
                        return r;
                }
        }
        /* network.rules: e2b_rules_to_secrets(), once the id is drawn. */
        if (nb.egress_proxy || nb.mask_request_host || !nb.allow_public_traffic) {
                network_body_done(&nb);
                (void)e2b_reply_error(req, 400,
                                      "network: egressProxy, maskRequestHost and "
                                      "allowPublicTraffic=false are not supported by hutch "
                                      "(docs/e2b.md)");
                return -EOPNOTSUPP;
        }
        STRV_FOREACH(d, nb.deny_out)
                deny_all = deny_all || is_everything(*d);
        none = !internet || (deny_all && !nb.allow_out);
        if (none) {
                (void)json_object_del(policy, "allow_hosts");
                (void)json_object_del(policy, "secrets");
                r = json_object_set_new(policy, "network", json_string("none"));
                network_body_done(&nb);
                return r < 0 ? -ENOMEM : 0;
        }
        if (nb.allow_out) {
                json_t *allow = json_array();

                STRV_FOREACH(a, nb.allow_out) {
                        if (!hutch_ext_host_within(req->srv->allow_ceiling, *a)) {
                                json_decref(allow);
                                (void)e2b_reply_error(
                                        req, 400,
                                        "network.allowOut: '%s' is not within the server's "
                                        "allowlist (hutch serve --e2b --allow-host)",
                                        *a);
                                network_body_done(&nb);
                                return -EPERM;
                        }
                        (void)json_array_append_new(allow, json_string(*a));
                }
                if (json_object_set_new(policy, "allow_hosts", allow) < 0) {
                        network_body_done(&nb);
                        return -ENOMEM;
                }
        }
        deny = json_object_get(policy, "deny_hosts");
        if (!deny) {
                deny = json_array();
                if (json_object_set_new(policy, "deny_hosts", deny) < 0) {
                        network_body_done(&nb);
                        return -ENOMEM;
                }
        }
        STRV_FOREACH(d, nb.deny_out) {
                if (is_everything(*d))
                        continue;
                if (hutch_ext_host_pattern_check(*d, &err) < 0) {
                        (void)e2b_reply_error(req, 400, "network.denyOut: %s", err.msg);
                        network_body_done(&nb);
                        return -EINVAL;
                }
                (void)json_array_append_new(deny, json_string(*d));
        }
        if (json_array_size(deny) == 0)
                (void)json_object_del(policy, "deny_hosts");
        network_body_done(&nb);
        return 0;
}

static bool snapshot_exists(const char *name) {
        char **snaps = NULL;
        bool found;

        if (hutch_snapshot_list(&snaps, NULL) < 0)
                return false;
        found = strv_contains(snaps, name);
        hutch_strv_free(snaps);
        return found;
}

/* ---- routes ---- */

typedef struct CreateBody {
        const char *template_id;
        uint64_t timeout;
        bool auto_pause;
        bool secure;
        bool internet;
        json_t *metadata;
        char **env;
        json_t *network;
        json_t *mcp;
        char **volume_mounts;
        json_t *iam;
        json_t *auto_resume;
        bool auto_pause_memory;
        const char *alias;
} CreateBody;

static const ServeField create_fields[] = {
        {"templateID", SERVE_FIELD_STRING, offsetof(CreateBody, template_id), true},
        {"timeout", SERVE_FIELD_U64, offsetof(CreateBody, timeout), false},
        {"autoPause", SERVE_FIELD_BOOL, offsetof(CreateBody, auto_pause), false},
        {"secure", SERVE_FIELD_BOOL, offsetof(CreateBody, secure), false},
        {"allow_internet_access", SERVE_FIELD_BOOL, offsetof(CreateBody, internet), false},
        {"metadata", SERVE_FIELD_OBJECT, offsetof(CreateBody, metadata), false},
        {"envVars", SERVE_FIELD_ENV, offsetof(CreateBody, env), false},
        {"network", SERVE_FIELD_OBJECT, offsetof(CreateBody, network), false},
        {"mcp", SERVE_FIELD_OBJECT, offsetof(CreateBody, mcp), false},
        {"volumeMounts", SERVE_FIELD_STRV, offsetof(CreateBody, volume_mounts), false},
        {"iam", SERVE_FIELD_OBJECT, offsetof(CreateBody, iam), false},
        {"autoResume", SERVE_FIELD_OBJECT, offsetof(CreateBody, auto_resume), false},
        {"autoPauseMemory", SERVE_FIELD_BOOL, offsetof(CreateBody, auto_pause_memory), false},
};

static int check_metadata(E2bRequest *req, json_t *metadata) {
        const char *k;
        json_t *v;

        if (!metadata)
                return 0;
        if (json_object_size(metadata) > E2B_METADATA_MAX) {
                (void)e2b_reply_error(req, 400, "metadata: more than %d entries", E2B_METADATA_MAX);
                return -E2BIG;
        }
        json_object_foreach(metadata, k, v) {
                if (!json_is_string(v) || strlen(k) > 256 || json_string_length(v) > 4096) {
                        (void)e2b_reply_error(req, 400,
                                              "metadata: '%.64s' must be a string of at most "
                                              "4096 bytes (keys at most 256)",
                                              k);
                        return -EINVAL;
                }
        }
        return 0;
}

/* E2B's base template works in /home/user (docs/e2b.md "Templates"): on
 * the host base, with no workdir or workspace from the serve flags, it is
 * the policy's working directory and $HOME, and the folder is made in the
 * sandbox's own layer right after the create. An image keeps its own
 * WorkingDir and HOME. */
static bool base_home_wanted(json_t *policy) {
        return !json_object_get(policy, "image") && !json_object_get(policy, "workdir") &&
               !json_object_get(policy, "workspace") &&
               !json_object_get(json_object_get(policy, "env"), "HOME");
}

/* Sets the base template's working directory and $HOME in @policy, before
 * the sandbox is made. */
static int base_home_policy(json_t *policy) {
        if (json_object_set_new(policy, "workdir", json_string("/home/user")) < 0 ||
            json_object_set_new(json_object_get(policy, "env"), "HOME", json_string("/home/user")) <
                    0)
                return -ENOMEM;
        return 0;
}

/* Makes the folder in the new sandbox's own layer (a file operation: the
 * sandbox starts, ready for its first command). */
static int base_home(const char *name, hutch_error *err) {
        return hutch_file_mkdir(name, "/home/user", 0755 | HUTCH_FILE_PARENTS, err);
}

/* Makes the hutch sandbox of record @rec from @policy and @template. */
static int create_hutch(E2bRequest *req, json_t *rec, json_t *policy, const char *template_id) {
        _cleanup_free_ char *text = NULL;
        const char *from = NULL;
        bool home;
        hutch_policy *p = NULL;
        hutch_error err = {};
        int r;

        if (strcmp(template_id, "base") != 0) {
                if (!hutch_ext_name_is_valid(template_id) && strchr(template_id, ':') == NULL) {
                        (void)e2b_reply_error(req, 400, "invalid templateID '%.64s'", template_id);
                        return -EINVAL;
                }
                if (hutch_ext_name_is_valid(template_id) && snapshot_exists(template_id))
                        from = template_id;
                else if (json_object_set_new(policy, "image", json_string(template_id)) < 0)
                        return -ENOMEM;
        }
        home = !from && base_home_wanted(policy);
        if (home && base_home_policy(policy) < 0) {
                (void)e2b_reply_error(req, 500, "out of memory");
                return -ENOMEM;
        }
        text = json_dumps(policy, JSON_COMPACT);
        p = hutch_policy_new();
        if (!text || !p) {
                hutch_policy_free(p);
                (void)e2b_reply_error(req, 500, "out of memory");
                return -ENOMEM;
        }
        r = hutch_policy_load_json(p, text, &err);
        if (r >= 0)
                r = hutch_create(rec_str(rec, "name"), p, from, NULL, &err);
        hutch_policy_free(p);
        if (r >= 0 && home)
                r = base_home(rec_str(rec, "name"), &err);
        if (r < 0) {
                if (-r == ENOENT || (err.code == ENOENT))
                        (void)e2b_reply_error(req, 404, "template '%s' not found: %s", template_id,
                                              err.message);
                else
                        (void)reply_hutch_error(req, r, &err, "cannot create the sandbox");
                return r;
        }
        return 0;
}

static int route_create(E2bRequest *req, const char *unused) {
        CreateBody b = {.timeout = E2B_TIMEOUT_DEFAULT_S, .secure = true, .internet = true};
        json_t *root = NULL, *policy = NULL, *rec = NULL, *env, *rules, *net_rec;
        _cleanup_close_ int lock = -EBADF;
        char id[E2B_ID_LEN + 1], token[E2B_TOKEN_LEN + 1], name[64];
        uint64_t now;
        int r;

        (void)unused;
        r = body_decode(req, create_fields, ELEMENTSOF(create_fields), &b, &root);
        if (r < 0)
                return req->close ? 1 : 0;
        if (b.mcp || b.iam || strv_length(b.volume_mounts) > 0 ||
            json_is_true(json_object_get(b.auto_resume, "enabled")) || b.auto_pause_memory) {
                (void)e2b_reply_error(req, 400,
                                      "mcp, iam, volumeMounts, autoResume and autoPauseMemory "
                                      "are not supported by hutch (docs/e2b.md)");
                goto out;
        }
        if (b.timeout == 0 || b.timeout > E2B_TIMEOUT_MAX_S) {
                (void)e2b_reply_error(req, 400, "timeout must be 1 to %d seconds",
                                      E2B_TIMEOUT_MAX_S);
                goto out;
        }
        if (check_metadata(req, b.metadata) < 0)
                goto out;
        policy = json_loads(req->srv->policy_json, 0, NULL);
        if (!policy) {
                (void)e2b_reply_error(req, 500, "out of memory");
                goto out;
        }
        env = json_object_get(policy, "env");
        if (!env) {
                env = json_object();
                (void)json_object_set_new(policy, "env", env);
        }
        STRV_FOREACH(e, b.env) {
                const char *eq = strchr(*e, '=');
                _cleanup_free_ char *k = eq ? strndup(*e, (size_t)(eq - *e)) : NULL;

                if (k)
                        (void)json_object_set_new(env, k, json_string(eq + 1));
        }
        if (narrow_network(req, policy, b.internet, b.network) < 0) {
                if (!req->answered)
                        (void)e2b_reply_error(req, 500, "out of memory");
                goto out;
        }
        r = e2b_id_new(id);
        if (r >= 0 && b.secure)
                r = e2b_token_new(token);
        if (r < 0) {
                (void)e2b_reply_error(req, 500, "cannot draw random bytes: %s", strerror(-r));
                goto out;
        }
        (void)snprintf(name, sizeof(name), "e2b-%s", id);
        rules = json_object_get(b.network, "rules");
        if (rules && !json_is_null(rules)) {
                char msg[512];

                r = e2b_rules_to_secrets(req->srv, id, rules, policy, msg, sizeof(msg));
                if (r < 0) {
                        e2b_rules_remove(req->srv, id);
                        (void)e2b_reply_error(req, r == -ENOMEM ? 500 : 400, "%s", msg);
                        goto out;
                }
        }
        /* The record keeps the network as asked but the rules, whose
         * values are secrets (they live in the secrets folder only). */
        net_rec = b.network ? json_deep_copy(b.network) : json_null();
        if (net_rec && json_is_object(net_rec))
                (void)json_object_del(net_rec, "rules");
        now = time_realtime_ms();
        rec = json_pack("{s:s,s:s,s:s,s:O,s:s?,s:I,s:I,s:s,s:b,s:b,s:o}", "sandboxID", id,
                        "templateID", b.template_id, "name", name, "metadata",
                        b.metadata ? b.metadata : json_object(), "accessToken",
                        b.secure ? token : NULL, "startedAt", (json_int_t)now, "endAt",
                        (json_int_t)(now + b.timeout * 1000), "state", "creating", "autoPause",
                        b.auto_pause, "allowInternetAccess", b.internet, "network", net_rec);
        if (!rec) {
                (void)e2b_reply_error(req, 500, "out of memory");
                goto out;
        }
        /* Recorded before the hutch sandbox exists, so that a server that
         * ends meanwhile destroys it too. */
        lock = e2b_table_lock(req->srv, id);
        r = lock < 0 ? lock : e2b_table_save(req->srv, rec);
        if (r < 0) {
                (void)e2b_reply_error(req, 500, "cannot record the sandbox: %s", strerror(-r));
                goto out;
        }
        r = create_hutch(req, rec, policy, b.template_id);
        if (r < 0) {
                e2b_table_remove(req->srv, id);
                goto out;
        }
        now = time_realtime_ms();
        (void)json_object_set_new(rec, "state", json_string("running"));
        (void)json_object_set_new(rec, "startedAt", json_integer((json_int_t)now));
        (void)json_object_set_new(rec, "endAt", json_integer((json_int_t)(now + b.timeout * 1000)));
        /* The durable "creating" record above is what a crash needs (the
         * server's next start destroys its sandbox); this one need not
         * wait for the disk. */
        r = e2b_table_save_volatile(req->srv, rec);
        if (r < 0) {
                (void)hutch_destroy(name, NULL);
                e2b_table_remove(req->srv, id);
                (void)e2b_reply_error(req, 500, "cannot record the sandbox: %s", strerror(-r));
                goto out;
        }
        log_info("E2B sandbox %s created (template '%s', %llu s)", id, b.template_id,
                 (unsigned long long)b.timeout);
        (void)e2b_reply_json(req, 201, created_json(req->srv, rec));
out:
        strv_free(b.env);
        strv_free(b.volume_mounts);
        json_decref(rec);
        json_decref(policy);
        json_decref(root);
        return 0;
}

static int route_get(E2bRequest *req, const char *id) {
        json_t *rec = NULL;
        int r;

        r = e2b_table_load(req->srv, id, &rec);
        if (r >= 0 && (strcmp(rec_str(rec, "state") ?: "", "creating") == 0 ||
                       strcmp(rec_str(rec, "state") ?: "", "killing") == 0)) {
                json_decref(rec);
                r = -ENOENT;
        }
        if (r < 0) {
                (void)e2b_reply_error(req, 404, "sandbox '%s' not found", id);
                return 0;
        }
        (void)e2b_reply_json(req, 200, sandbox_json(req->srv, rec, true));
        json_decref(rec);
        return 0;
}

typedef struct SnapshotBody {
        const char *name;
} SnapshotBody;

static const ServeField snapshot_fields[] = {
        {"name", SERVE_FIELD_STRING, offsetof(SnapshotBody, name), false},
};

/* The sandbox's files as a hutch snapshot (hutch_snapshot(), running or
 * not; processes are not captured), named by the request or
 * "e2b-<random id>": a later create's templateID starts from it. */
static int route_snapshot(E2bRequest *req, const char *id) {
        SnapshotBody b = {};
        _cleanup_close_ int lock = -EBADF;
        json_t *root = NULL, *rec = NULL;
        char name[64], rnd[E2B_ID_LEN + 1];
        hutch_error err = {};
        int r;

        r = body_decode(req, snapshot_fields, ELEMENTSOF(snapshot_fields), &b, &root);
        if (r < 0)
                return req->close ? 1 : 0;
        if (b.name && (!hutch_ext_name_is_valid(b.name) || strcmp(b.name, "base") == 0)) {
                (void)e2b_reply_error(req, 400,
                                      "invalid snapshot name '%.64s': it must match "
                                      "[a-z0-9][a-z0-9_.-]{0,62} and not be 'base'",
                                      b.name);
                goto out;
        }
        if (!b.name) {
                r = e2b_id_new(rnd);
                if (r < 0) {
                        (void)e2b_reply_error(req, 500, "cannot draw random bytes");
                        goto out;
                }
        }
        (void)snprintf(name, sizeof(name), "%s", b.name ? b.name : "");
        if (!b.name)
                (void)snprintf(name, sizeof(name), "e2b-%s", rnd);
        if (load_locked(req, id, &lock, &rec) < 0)
                goto out;
        r = hutch_snapshot(rec_str(rec, "name"), name, &err);
        if (r == -EPERM || r == -EOPNOTSUPP || r == -EACCES) {
                /* A running sandbox that cannot be frozen here (no cgroup
                 * of its own, as a user): E2B pauses a sandbox for its
                 * snapshot; hutch stops it (its processes end, as at a
                 * pause), and its next command starts it again. */
                err = (hutch_error){};
                r = hutch_stop(rec_str(rec, "name"), &err);
                if (r >= 0)
                        r = hutch_snapshot(rec_str(rec, "name"), name, &err);
        }
        if (r < 0)
                (void)reply_hutch_error(req, r, &err, "cannot snapshot the sandbox");
        else
                (void)e2b_reply_json(req, 201,
                                     json_pack("{s:s,s:[s]}", "snapshotID", name, "names", name));
out:
        json_decref(rec);
        json_decref(root);
        return 0;
}

/* One sample of a running sandbox's cgroup (e2b-metrics.c); none for a
 * paused one. */
static int route_metrics(E2bRequest *req, const char *id) {
        json_t *rec = NULL, *arr = NULL, *m;
        hutch_error err = {};
        const char *state;
        int r;

        r = e2b_table_load(req->srv, id, &rec);
        state = r >= 0 ? rec_str(rec, "state") : NULL;
        if (r < 0 || !state || strcmp(state, "creating") == 0 || strcmp(state, "killing") == 0) {
                json_decref(rec);
                (void)e2b_reply_error(req, 404, "sandbox '%s' not found", id);
                return 0;
        }
        /* One sample, now (E2B's start and end select from its series:
         * hutch keeps none); none for a paused sandbox. */
        if (strcmp(state, "running") != 0)
                r = (arr = json_array()) ? 0 : -ENOMEM;
        else
                r = e2b_metrics_sample(rec_str(rec, "name"), &arr, &err);
        json_decref(rec);
        if (r < 0) {
                (void)reply_hutch_error(req, r, &err, "cannot sample the sandbox");
                return 0;
        }
        m = json_array_get(arr, 0);
        if (m) {
                uint64_t now = time_realtime_ms();

                (void)json_object_set_new(m, "timestamp", iso_time(now));
                (void)json_object_set_new(m, "timestampUnix",
                                          json_integer((json_int_t)(now / 1000)));
        }
        return e2b_reply_json(req, 200, arr);
}

static int route_delete(E2bRequest *req, const char *id) {
        hutch_error err = {};
        int lock = -EBADF, keeper = -EBADF, r;

        r = e2b_sandbox_kill_begin(req->srv, id, &lock, &keeper, &err);
        if (r == -ENOENT) {
                (void)e2b_reply_error(req, 404, "sandbox '%s' not found", id);
                return 0;
        }
        if (r < 0) {
                (void)reply_hutch_error(req, r, &err, "cannot kill the sandbox");
                return 0;
        }
        /* Its processes are gone: the client is answered now, and its
         * files are removed after the answer (this connection then ends,
         * so that the client's next request does not wait on it). */
        req->close = true;
        (void)e2b_reply(req, 204, NULL, NULL, 0);
        (void)shutdown(req->conn->fd, SHUT_WR);
        r = e2b_sandbox_kill_end(req->srv, id, lock, keeper, &err);
        if (r < 0 && r != -ENOENT)
                log_error("cannot remove the files of E2B sandbox '%s': %s", id,
                          err.message[0] ? err.message : strerror(-r));
        else
                log_info("E2B sandbox %s killed", id);
        return 1;
}

typedef struct TimeoutBody {
        uint64_t timeout;
        uint64_t duration;
        bool auto_pause;
        bool memory;
} TimeoutBody;

static const ServeField timeout_fields[] = {
        {"timeout", SERVE_FIELD_U64, offsetof(TimeoutBody, timeout), true},
};
static const ServeField refresh_fields[] = {
        {"duration", SERVE_FIELD_U64, offsetof(TimeoutBody, duration), false},
};
static const ServeField connect_fields[] = {
        {"timeout", SERVE_FIELD_U64, offsetof(TimeoutBody, timeout), false},
        {"memory", SERVE_FIELD_BOOL, offsetof(TimeoutBody, memory), false},
        {"autoPause", SERVE_FIELD_BOOL, offsetof(TimeoutBody, auto_pause), false},
};
static const ServeField pause_fields[] = {
        {"memory", SERVE_FIELD_BOOL, offsetof(TimeoutBody, memory), false},
};

static int check_timeout(E2bRequest *req, uint64_t t) {
        if (t == 0 || t > E2B_TIMEOUT_MAX_S) {
                (void)e2b_reply_error(req, 400, "timeout must be 1 to %d seconds",
                                      E2B_TIMEOUT_MAX_S);
                return -EINVAL;
        }
        return 0;
}

static int route_timeout(E2bRequest *req, const char *id) {
        TimeoutBody b = {};
        _cleanup_close_ int lock = -EBADF;
        json_t *root = NULL, *rec = NULL;
        int r;

        r = body_decode(req, timeout_fields, ELEMENTSOF(timeout_fields), &b, &root);
        if (r < 0)
                return req->close ? 1 : 0;
        json_decref(root);
        if (check_timeout(req, b.timeout) < 0 || load_locked(req, id, &lock, &rec) < 0)
                return 0;
        /* E2B's meaning: the sandbox ends @timeout seconds from now. */
        (void)json_object_set_new(
                rec, "endAt", json_integer((json_int_t)(time_realtime_ms() + b.timeout * 1000)));
        r = e2b_table_save(req->srv, rec);
        json_decref(rec);
        if (r < 0)
                (void)e2b_reply_error(req, 500, "cannot record the timeout: %s", strerror(-r));
        else
                (void)e2b_reply(req, 204, NULL, NULL, 0);
        return 0;
}

static int route_refresh(E2bRequest *req, const char *id) {
        TimeoutBody b = {.duration = 60};
        _cleanup_close_ int lock = -EBADF;
        json_t *root = NULL, *rec = NULL;
        uint64_t end;
        int r;

        r = body_decode(req, refresh_fields, ELEMENTSOF(refresh_fields), &b, &root);
        if (r < 0)
                return req->close ? 1 : 0;
        json_decref(root);
        if (b.duration > 3600) {
                (void)e2b_reply_error(req, 400, "duration must be at most 3600 seconds");
                return 0;
        }
        if (load_locked(req, id, &lock, &rec) < 0)
                return 0;
        end = time_realtime_ms() + b.duration * 1000;
        if (end > rec_u64(rec, "endAt"))
                (void)json_object_set_new(rec, "endAt", json_integer((json_int_t)end));
        r = e2b_table_save(req->srv, rec);
        json_decref(rec);
        if (r < 0)
                (void)e2b_reply_error(req, 500, "cannot record the refresh: %s", strerror(-r));
        else
                (void)e2b_reply(req, 204, NULL, NULL, 0);
        return 0;
}

static int route_pause(E2bRequest *req, const char *id) {
        TimeoutBody b = {};
        _cleanup_close_ int lock = -EBADF;
        json_t *root = NULL, *rec = NULL;
        hutch_error err = {};
        int r;

        r = body_decode(req, pause_fields, ELEMENTSOF(pause_fields), &b, &root);
        if (r < 0)
                return req->close ? 1 : 0;
        json_decref(root);
        if (load_locked(req, id, &lock, &rec) < 0)
                return 0;
        if (strcmp(rec_str(rec, "state"), "paused") == 0) {
                (void)e2b_reply_error(req, 409, "sandbox '%s' is already paused", id);
                json_decref(rec);
                return 0;
        }
        r = e2b_sandbox_pause_locked(req->srv, rec, &err);
        json_decref(rec);
        if (r < 0)
                (void)reply_hutch_error(req, r, &err, "cannot pause the sandbox");
        else {
                log_info("E2B sandbox %s paused", id);
                (void)e2b_reply(req, 204, NULL, NULL, 0);
        }
        return 0;
}

/* connect (@resume false): a running sandbox 200, a paused one resumed
 * 201; resume (@resume true): a running one 409. */
static int connect_or_resume(E2bRequest *req, const char *id, bool resume) {
        TimeoutBody b = {.timeout = 0};
        _cleanup_close_ int lock = -EBADF;
        json_t *root = NULL, *rec = NULL;
        hutch_error err = {};
        bool paused, auto_pause_given;
        uint64_t end;
        int r, status;

        r = body_decode(req, connect_fields, ELEMENTSOF(connect_fields), &b, &root);
        if (r < 0)
                return req->close ? 1 : 0;
        auto_pause_given = json_is_boolean(json_object_get(root, "autoPause"));
        json_decref(root);
        if (b.timeout == 0)
                b.timeout = E2B_TIMEOUT_DEFAULT_S;
        if (check_timeout(req, b.timeout) < 0 || load_locked(req, id, &lock, &rec) < 0)
                return 0;
        paused = strcmp(rec_str(rec, "state"), "paused") == 0;
        if (resume && !paused) {
                (void)e2b_reply_error(req, 409, "sandbox '%s' is already running", id);
                json_decref(rec);
                return 0;
        }
        /* A frozen sandbox is thawed, its processes go on; a stopped
         * one's files are kept and its processes start again on demand
         * (hutch starts a stopped sandbox with its next exec). */
        if (paused && e2b_sandbox_unpause_locked(rec, &err) < 0) {
                (void)reply_hutch_error(req, -err.code, &err, "cannot resume the sandbox");
                json_decref(rec);
                return 0;
        }
        end = time_realtime_ms() + b.timeout * 1000;
        if (paused || end > rec_u64(rec, "endAt"))
                (void)json_object_set_new(rec, "endAt", json_integer((json_int_t)end));
        (void)json_object_set_new(rec, "state", json_string("running"));
        if (resume && auto_pause_given)
                (void)json_object_set_new(rec, "autoPause", json_boolean(b.auto_pause));
        r = e2b_table_save(req->srv, rec);
        status = paused ? 201 : 200;
        if (r < 0)
                (void)e2b_reply_error(req, 500, "cannot record the sandbox: %s", strerror(-r));
        else {
                if (paused)
                        log_info("E2B sandbox %s resumed", id);
                (void)e2b_reply_json(req, status, created_json(req->srv, rec));
        }
        json_decref(rec);
        return 0;
}

static int route_connect(E2bRequest *req, const char *id) {
        return connect_or_resume(req, id, false);
}

static int route_resume(E2bRequest *req, const char *id) {
        return connect_or_resume(req, id, true);
}

/* ---- listing ---- */

typedef struct ListQuery {
        struct evkeyvalq metadata;
        bool has_metadata;
        bool want_running, want_paused;
        uint64_t started_after;
        const char *template_id;
        bool ascending;
        unsigned limit;
        uint64_t next_started;
        char next_id[E2B_ID_LEN + 1];
        bool has_next;
} ListQuery;

static int compare_desc(const void *a, const void *b) {
        json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
        uint64_t sx = rec_u64(x, "startedAt"), sy = rec_u64(y, "startedAt");

        if (sx != sy)
                return sx < sy ? 1 : -1;
        return strcmp(rec_str(y, "sandboxID"), rec_str(x, "sandboxID"));
}

static bool query_match(const ListQuery *q, json_t *rec) {
        const char *state = rec_str(rec, "state");
        json_t *md = json_object_get(rec, "metadata");
        struct evkeyval *kv;

        if (!state || strcmp(state, "creating") == 0 || strcmp(state, "killing") == 0)
                return false;
        if (strcmp(state, "running") == 0 ? !q->want_running : !q->want_paused)
                return false;
        if (q->started_after && rec_u64(rec, "startedAt") <= q->started_after)
                return false;
        if (q->template_id && strcmp(q->template_id, rec_str(rec, "templateID") ?: "") != 0)
                return false;
        if (q->has_metadata)
                TAILQ_FOREACH(kv, &q->metadata, next) {
                        const char *v = json_string_value(json_object_get(md, kv->key));

                        if (!v || strcmp(v, kv->value) != 0)
                                return false;
                }
        return true;
}

/* Whether @rec comes after the page cursor in the order. */
static bool after_cursor(const ListQuery *q, json_t *rec) {
        uint64_t s = rec_u64(rec, "startedAt");
        int c;

        if (!q->has_next)
                return true;
        if (s != q->next_started)
                return q->ascending ? s > q->next_started : s < q->next_started;
        c = strcmp(rec_str(rec, "sandboxID"), q->next_id);
        return q->ascending ? c > 0 : c < 0;
}

static int parse_list_query(E2bRequest *req, bool v2, ListQuery *q) {
        struct evkeyvalq params;
        struct evkeyval *kv;
        int r = 0;

        TAILQ_INIT(&params);
        TAILQ_INIT(&q->metadata);
        q->want_running = true;
        q->want_paused = v2;
        q->limit = LIST_LIMIT_MAX;
        if (strstr(req->query, "%00") ||
            (req->query[0] && evhttp_parse_query_str(req->query, &params) < 0)) {
                (void)e2b_reply_error(req, 400, "malformed query string");
                return -EINVAL;
        }
        TAILQ_FOREACH(kv, &params, next) {
                if (strcmp(kv->key, "metadata") == 0) {
                        if (q->has_metadata || evhttp_parse_query_str(kv->value, &q->metadata) < 0)
                                r = -EINVAL;
                        q->has_metadata = true;
                } else if (v2 && strcmp(kv->key, "state") == 0) {
                        _cleanup_free_ char *copy = strdup(kv->value);
                        char *save = NULL;

                        q->want_running = q->want_paused = false;
                        for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t;
                             t = strtok_r(NULL, ",", &save)) {
                                if (strcmp(t, "running") == 0)
                                        q->want_running = true;
                                else if (strcmp(t, "paused") == 0)
                                        q->want_paused = true;
                                else
                                        r = -EINVAL;
                        }
                } else if (v2 && strcmp(kv->key, "startedAfter") == 0) {
                        if (parse_iso_time(kv->value, &q->started_after) < 0)
                                r = -EINVAL;
                } else if (v2 && strcmp(kv->key, "template") == 0) {
                        /* route_list() keeps a copy. */
                } else if (v2 && strcmp(kv->key, "order") == 0) {
                        if (strcasecmp(kv->value, "asc") == 0)
                                q->ascending = true;
                        else if (strcasecmp(kv->value, "desc") != 0)
                                r = -EINVAL;
                } else if (v2 && strcmp(kv->key, "limit") == 0) {
                        uint32_t n;

                        if (safe_atou32(kv->value, &n) < 0 || n == 0 || n > LIST_LIMIT_MAX)
                                r = -EINVAL;
                        else
                                q->limit = n;
                } else if (v2 && strcmp(kv->key, "nextToken") == 0) {
                        const char *dash = strchr(kv->value, '-');
                        _cleanup_free_ char *num =
                                dash ? strndup(kv->value, (size_t)(dash - kv->value)) : NULL;

                        if (!num || safe_atou64(num, &q->next_started) < 0 ||
                            !e2b_id_is_valid(dash + 1))
                                r = -EINVAL;
                        else {
                                strcpy(q->next_id, dash + 1);
                                q->has_next = true;
                        }
                } else
                        r = -EINVAL;
                if (r < 0) {
                        (void)e2b_reply_error(req, 400, "invalid query parameter '%.64s'", kv->key);
                        break;
                }
        }
        evhttp_clear_headers(&params);
        return r;
}

static int route_list(E2bRequest *req, bool v2) {
        ListQuery q = {};
        json_t *all = NULL, *out = NULL, *rec;
        json_t **items = NULL;
        _cleanup_free_ char *next = NULL, *head = NULL, *template_id = NULL;
        struct evkeyvalq params;
        size_t n = 0, i;
        int r;

        /* The template filter, read apart (parse_list_query() keeps no
         * pointer into its parameters). */
        TAILQ_INIT(&params);
        if (req->query[0] && !strstr(req->query, "%00") &&
            evhttp_parse_query_str(req->query, &params) == 0) {
                const char *t = evhttp_find_header(&params, "template");

                template_id = t ? strdup(t) : NULL;
        }
        evhttp_clear_headers(&params);
        if (parse_list_query(req, v2, &q) < 0)
                goto out;
        q.template_id = template_id;
        r = e2b_table_list(req->srv, &all);
        if (r < 0) {
                (void)e2b_reply_error(req, 500, "cannot list the sandboxes: %s", strerror(-r));
                goto out;
        }
        items = calloc(json_array_size(all) + 1, sizeof(json_t *));
        out = json_array();
        if (!items || !out) {
                (void)e2b_reply_error(req, 500, "out of memory");
                goto out;
        }
        json_array_foreach(all, i, rec) if (query_match(&q, rec)) items[n++] = rec;
        qsort(items, n, sizeof(json_t *), compare_desc);
        if (q.ascending)
                for (i = 0; i < n / 2; i++) {
                        json_t *t = items[i];

                        items[i] = items[n - 1 - i];
                        items[n - 1 - i] = t;
                }
        for (i = 0; i < n; i++) {
                if (!after_cursor(&q, items[i]))
                        continue;
                if (v2 && json_array_size(out) == q.limit) {
                        json_t *last = items[i - 1];

                        if (asprintf(&next, "%llu-%s",
                                     (unsigned long long)rec_u64(last, "startedAt"),
                                     rec_str(last, "sandboxID")) < 0)
                                next = NULL;
                        break;
                }
                (void)json_array_append_new(out, sandbox_json(req->srv, items[i], false));
        }
        if (next) {
                _cleanup_free_ char *text = json_dumps(out, JSON_COMPACT);

                if (!text || asprintf(&head, "x-next-token: %s", next) < 0) {
                        head = NULL;
                        (void)e2b_reply_error(req, 500, "out of memory");
                        goto out;
                }
                req->extra_header = head;
                (void)e2b_reply(req, 200, "application/json", text, strlen(text));
                req->extra_header = NULL;
        } else {
                (void)e2b_reply_json(req, 200, out);
                out = NULL;
        }
out:
        if (q.has_metadata)
                evhttp_clear_headers(&q.metadata);
        free(items);
        json_decref(out);
        json_decref(all);
        return 0;
}

static int route_list_v1(E2bRequest *req, const char *unused) {
        (void)unused;
        return route_list(req, false);
}

static int route_list_v2(E2bRequest *req, const char *unused) {
        (void)unused;
        return route_list(req, true);
}

static int route_health(E2bRequest *req, const char *unused) {
        (void)unused;
        return e2b_reply(req, 200, NULL, NULL, 0);
}

static const Route routes[] = {
        {"GET", "/health", route_health},
        {"POST", "/sandboxes", route_create},
        {"POST", "/v2/sandboxes", route_create},
        {"GET", "/sandboxes", route_list_v1},
        {"GET", "/v2/sandboxes", route_list_v2},
        {"GET", "/sandboxes/{id}", route_get},
        {"GET", "/sandboxes/{id}/metrics", route_metrics},
        {"DELETE", "/sandboxes/{id}", route_delete},
        {"POST", "/sandboxes/{id}/timeout", route_timeout},
        {"POST", "/sandboxes/{id}/refreshes", route_refresh},
        {"POST", "/sandboxes/{id}/pause", route_pause},
        {"POST", "/sandboxes/{id}/snapshots", route_snapshot},
        {"POST", "/sandboxes/{id}/resume", route_resume},
        {"POST", "/sandboxes/{id}/connect", route_connect},
        {"POST", "/v2/sandboxes/{id}/connect", route_connect},
};

/* SECURITY: X-API-Key against --api-key-file's key, both hashed first so
 * that the comparison takes the same time wherever they differ. */
static bool api_key_ok(const E2bRequest *req) {
        const char *key = e2b_request_header(req, "x-api-key");
        uint8_t given[32];
        unsigned n = 0;

        if (!key || !key[0] || strlen(key) > SERVE_TOKEN_MAX)
                return false;
        if (EVP_Digest(key, strlen(key), given, &n, EVP_sha256(), NULL) != 1)
                return false;
        return CRYPTO_memcmp(given, req->srv->api_key_sha, sizeof(given)) == 0;
}

int e2b_control_handle(E2bRequest *req) {
        const Route *route = NULL;
        bool path_known = false;
        char id[E2B_ID_LEN + 1] = "";

        for (size_t i = 0; i < ELEMENTSOF(routes); i++) {
                const char *p;
                size_t plen;

                if (!serve_path_match(routes[i].pattern, req->path, &p, &plen))
                        continue;
                path_known = true;
                if (strcmp(routes[i].method, req->method) != 0)
                        continue;
                route = &routes[i];
                if (p) {
                        /* An id of another shape is no sandbox of ours. */
                        if (plen != E2B_ID_LEN) {
                                if (!api_key_ok(req))
                                        break;
                                (void)e2b_reply_error(req, 404, "sandbox '%.*s' not found",
                                                      (int)MIN(plen, (size_t)64), p);
                                return req->close ? 1 : 0;
                        }
                        memcpy(id, p, E2B_ID_LEN);
                        id[E2B_ID_LEN] = '\0';
                }
                break;
        }
        if (route != &routes[0] && !api_key_ok(req)) {
                (void)e2b_reply_error(req, 401, "invalid or missing X-API-Key");
                return req->close ? 1 : 0;
        }
        if (!route) {
                (void)e2b_reply_error(req, path_known ? 405 : 404, "no route %s %.128s",
                                      req->method, req->path);
                return req->close ? 1 : 0;
        }
        if (route->pattern[strlen(route->pattern) - 1] == '}' || strchr(route->pattern, '{'))
                if (!e2b_id_is_valid(id)) {
                        (void)e2b_reply_error(req, 404, "sandbox '%s' not found", id);
                        return req->close ? 1 : 0;
                }
        (void)route->handler(req, id[0] ? id : NULL);
        return req->close ? 1 : 0;
}
