/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* include/hutch.h over the core: the policy, the one-shot run, and the
 * persistent sandboxes of api/persist.h. Every function converts the
 * core's HutchError into the caller's hutch_error at its end, and only on
 * failure. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/persist.h"
#include "api/processes.h"
#include "fd-util.h"
#include "file-op.h"
#include "file-tar.h"
#include "hutch.h"
#include "parse-util.h"
#include "sandbox/sandbox.h"
#include "strv.h"

struct hutch_policy {
        Policy *p;
};

/* Copies @src into the fixed-size @dst, cut to fit, NUL-terminated. */
static void copy_str(char *dst, size_t size, const char *src) {
        size_t n = strnlen(src, size - 1);

        memcpy(dst, src, n);
        dst[n] = '\0';
}

/* ---- errors ---- */

/* Fills @err from @e (or from @r alone) and returns @r (< 0). */
static int fail(hutch_error *err, const HutchError *e, int r) {
        if (!err)
                return r;
        *err = (hutch_error){.code = e && e->errnum > 0 ? e->errnum : -r};
        copy_str(err->message, sizeof(err->message), e && e->msg[0] ? e->msg : strerror(-r));
        if (e && e->pointer[0])
                copy_str(err->field, sizeof(err->field), e->pointer);
        /* One line. */
        for (char *c = err->message; *c; c++)
                if (*c == '\n' || *c == '\r')
                        *c = ' ';
        return r;
}

static int fail_msg(hutch_error *err, int errnum, const char *msg) {
        HutchError e = {};

        (void)hutch_error_set(&e, errnum, "%s", msg);
        return fail(err, &e, -errnum);
}

/* The shape of the wrappers that only forward to the core: opens the
 * store as `s`, evaluates @call (which may use `s` and the core's error
 * `e`) and hands a failure to @err as fail() does. An int expression: 0,
 * or what @call returned on failure. */
#define STORE_CALL(err, call)                                                                      \
        ({                                                                                         \
                _cleanup_(store_freep) Store *s = NULL;                                            \
                HutchError e = {};                                                                 \
                int r_ = store_open(&s, &e);                                                       \
                                                                                                   \
                if (r_ >= 0)                                                                       \
                        r_ = (call);                                                               \
                r_ < 0 ? fail((err), &e, r_) : 0;                                                  \
        })

/* ---- policies ---- */

_public_ hutch_policy *hutch_policy_new(void) {
        hutch_policy *p = calloc(1, sizeof(hutch_policy));

        if (!p)
                return NULL;
        p->p = policy_new();
        if (!p->p) {
                free(p);
                return NULL;
        }
        return p;
}

_public_ void hutch_policy_free(hutch_policy *p) {
        if (!p)
                return;
        policy_free(p->p);
        free(p);
}

_public_ int hutch_policy_load_json(hutch_policy *p, const char *json, hutch_error *err) {
        _cleanup_(policy_freep) Policy *copy = NULL;
        _cleanup_free_ char *now = NULL;
        HutchError e = {};
        int r;

        if (!p || !json)
                return fail_msg(err, EINVAL, "no policy or no JSON given");
        /* Onto a copy, so that a bad document leaves @p as it was. */
        copy = policy_new();
        if (!copy)
                return fail(err, NULL, -ENOMEM);
        r = policy_to_json(p->p, &now);
        if (r >= 0)
                r = policy_load_json(copy, now, strlen(now), &e);
        if (r < 0)
                return fail(err, NULL, r);
        r = policy_load_json(copy, json, strlen(json), &e);
        if (r < 0)
                return fail(err, &e, r);
        policy_free(p->p);
        p->p = TAKE_PTR(copy);
        return 0;
}

_public_ int hutch_policy_to_json(const hutch_policy *p, char **ret_json, hutch_error *err) {
        int r;

        if (!p || !ret_json)
                return fail_msg(err, EINVAL, "no policy given");
        r = policy_to_json(p->p, ret_json);
        if (r == -EILSEQ)
                return fail_msg(err, EILSEQ, "a path or value of the policy is not valid UTF-8");
        return r < 0 ? fail(err, NULL, r) : 0;
}

/* A setter's failure names the JSON field it would have filled. */
static int setter_done(hutch_error *err, HutchError *e, int r, const char *field) {
        if (r >= 0)
                return 0;
        if (!e->pointer[0])
                (void)snprintf(e->pointer, sizeof(e->pointer), "%s", field);
        return fail(err, e, r);
}

#define SETTER_BEGIN(p, value)                                                                     \
        HutchError e = {};                                                                         \
        if (!(p) || !(value))                                                                      \
        return fail_msg(err, EINVAL, "no policy or no value given")

_public_ int hutch_policy_set_workspace(hutch_policy *p, const char *spec, hutch_error *err) {
        SETTER_BEGIN(p, spec);
        return setter_done(err, &e, policy_set_workspace_spec(p->p, spec, &e), "/workspace");
}

_public_ int hutch_policy_add_bind(hutch_policy *p, const char *spec, hutch_error *err) {
        SETTER_BEGIN(p, spec);
        return setter_done(err, &e, policy_add_bind_spec(p->p, spec, &e), "/binds");
}

_public_ int hutch_policy_add_env(hutch_policy *p, const char *spec, hutch_error *err) {
        SETTER_BEGIN(p, spec);
        return setter_done(err, &e, policy_add_env_spec(p->p, spec, &e),
                           strchr(spec, '=') ? "/env" : "/env_pass");
}

_public_ int hutch_policy_set_workdir(hutch_policy *p, const char *dir, hutch_error *err) {
        SETTER_BEGIN(p, dir);
        return setter_done(err, &e, policy_set_workdir(p->p, dir, &e), "/workdir");
}

_public_ int hutch_policy_set_network(hutch_policy *p, const char *mode, hutch_error *err) {
        SETTER_BEGIN(p, mode);
        return setter_done(err, &e, policy_set_network(p->p, mode, &e), "/network");
}

_public_ int hutch_policy_allow_host(hutch_policy *p, const char *pattern, hutch_error *err) {
        SETTER_BEGIN(p, pattern);
        return setter_done(err, &e, policy_add_allow_host(p->p, pattern, "--allow-host", &e),
                           "/allow_hosts");
}

_public_ int hutch_policy_add_secret(hutch_policy *p, const char *spec, hutch_error *err) {
        SETTER_BEGIN(p, spec);
        return setter_done(err, &e, policy_add_secret_spec(p->p, spec, &e), "/secrets");
}

_public_ int hutch_policy_set_limit(hutch_policy *p, const char *name, const char *value,
                                    hutch_error *err) {
        char key[32], flag[40], field[48];
        PolicyLimit l;
        int r;

        SETTER_BEGIN(p, value);
        /* "memory-swap" as the flag, "memory_swap" as the JSON field. */
        if (!name || strlen(name) >= sizeof(key))
                l = _POLICY_LIMIT_INVALID;
        else {
                (void)snprintf(key, sizeof(key), "%s", name);
                for (char *c = key; *c; c++)
                        if (*c == '-')
                                *c = '_';
                l = policy_limit_from_string(key);
        }
        if (l < 0) {
                (void)hutch_error_set_pointer(&e, EINVAL, "/limits",
                                              "unknown limit '%s' (memory, memory-swap, cpus, "
                                              "pids, timeout, disk, output-limit)",
                                              name ? name : "");
                return fail(err, &e, -EINVAL);
        }
        (void)snprintf(flag, sizeof(flag), "--%s", name);
        (void)snprintf(field, sizeof(field), "/limits/%s", policy_limit_to_string(l));
        r = policy_set_limit(p->p, l, value, flag, &e);
        return setter_done(err, &e, r, field);
}

_public_ int hutch_policy_validate(const hutch_policy *p, hutch_error *err) {
        HutchError e = {};
        int r;

        if (!p)
                return fail_msg(err, EINVAL, "no policy given");
        r = policy_validate(p->p, &e);
        return r < 0 ? fail(err, &e, r) : 0;
}

/* ---- outcomes ---- */

_public_ void hutch_outcome_done(hutch_outcome *o) {
        if (!o)
                return;
        free(o->json);
        o->json = NULL;
}

static uint64_t json_u64(json_t *o, const char *key) {
        json_int_t v = json_integer_value(json_object_get(o, key));

        return v > 0 ? (uint64_t)v : 0;
}

/* Fills @ret from an outcome's JSON (outcome_to_json()), which it takes. */
static int outcome_take_json(char *json, hutch_outcome *ret) {
        json_t *o = json ? json_loads(json, 0, NULL) : NULL;
        json_t *code = json_object_get(o, "exit_code"), *sig = json_object_get(o, "signal");
        const char *reason = json_string_value(json_object_get(o, "reason"));

        if (!json_is_object(o) || !json_is_integer(code) || !reason ||
            outcome_reason_from_string(reason) < 0) {
                json_decref(o);
                free(json);
                return -EPROTO;
        }
        *ret = (hutch_outcome){
                .exit_code = (int)json_integer_value(code),
                .signal = json_is_integer(sig) ? (int)json_integer_value(sig) : 0,
                .wall_ms = json_u64(o, "wall_ms"),
                .cpu_ms = json_u64(o, "cpu_ms"),
                .mem_peak_bytes = json_u64(o, "mem_peak_bytes"),
                .stdout_truncated = json_is_true(json_object_get(o, "stdout_truncated")),
                .stderr_truncated = json_is_true(json_object_get(o, "stderr_truncated")),
                .json = json,
        };
        copy_str(ret->reason, sizeof(ret->reason), reason);
        json_decref(o);
        return 0;
}

/* ---- one-shot ---- */

_public_ int hutch_run(const hutch_policy *p, char *const argv[], hutch_outcome *ret,
                       hutch_error *err) {
        extern char **environ;
        _cleanup_(outcome_done) Outcome o = {};
        char *json = NULL;
        HutchError e = {};
        int r;

        if (!p || !argv || !argv[0] || !ret)
                return fail_msg(err, EINVAL, "no policy, command or outcome given");
        r = policy_validate(p->p, &e);
        if (r >= 0)
                r = sandbox_run(p->p, argv, environ, &o, &e);
        if (r < 0)
                return fail(err, &e, r);
        r = outcome_to_json(&o, &json);
        if (r >= 0)
                r = outcome_take_json(json, ret);
        return r < 0 ? fail(err, NULL, r) : 0;
}

/* ---- persistent sandboxes ---- */

_public_ int hutch_create(const char *name, const hutch_policy *p, const char *from_snapshot,
                          char ret_id[17], hutch_error *err) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        HutchError e = {};
        int r;

        if (!name)
                return fail_msg(err, EINVAL, "no sandbox name given");
        r = store_open(&s, &e);
        if (r >= 0)
                r = persist_create(s, name, p ? p->p : NULL, from_snapshot, 0, &rec, &e);
        if (r < 0)
                return fail(err, &e, r);
        if (ret_id)
                copy_str(ret_id, 17, rec->id);
        return 0;
}

_public_ int hutch_update(const char *name, const hutch_policy *p, hutch_error *err) {
        if (!name || !p)
                return fail_msg(err, EINVAL, "no sandbox name or policy given");
        return STORE_CALL(err, persist_update(s, name, p->p, NULL, &e));
}

/* hutch_exec() and hutch_exec_detached(): with @detach, @ret_id gets the
 * exec's id and @ret nothing. */
static int exec_common(const char *name, const hutch_exec_options *o, bool detach, uint64_t *ret_id,
                       hutch_outcome *ret, hutch_error *err) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_close_ int null_in = -EBADF, null_out = -EBADF;
        char *json = NULL;
        KeeperExec req;
        HutchError e = {};
        int exit_code = 0, r;

        if (!name || !o || !o->argv || !o->argv[0] || (!ret && !detach))
                return fail_msg(err, EINVAL, "no sandbox name, command or outcome given");
        if (o->cwd && o->cwd[0] != '/')
                return fail_msg(err, EINVAL, "the working directory must be absolute");
        if (o->stdin_fd == HUTCH_EXEC_STDIN_KEEP && !detach)
                return fail_msg(err, EINVAL, "only a detached command takes its stdin later");
        if (o->user && !user_spec_is_valid(o->user))
                return fail_msg(err, EINVAL,
                                "invalid user (want NAME, UID, NAME:GROUP or UID:GID)");
        null_in = open("/dev/null", O_RDONLY | O_CLOEXEC);
        null_out = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (null_in < 0 || null_out < 0)
                return fail(err, NULL, negative_errno());
        req = (KeeperExec){
                .argv = (char **)o->argv,
                .env = (char **)o->env,
                .cwd = o->cwd,
                .timeout_ms = o->timeout_ms,
                .detach = detach,
                .stdin_pipe = detach && o->stdin_fd == HUTCH_EXEC_STDIN_KEEP,
                .user = o->user,
                .fds = {o->stdin_fd >= 0 ? o->stdin_fd : null_in,
                        o->stdout_fd >= 0 ? o->stdout_fd : null_out,
                        o->stderr_fd >= 0 ? o->stderr_fd : null_out},
        };
        r = store_open(&s, &e);
        if (r >= 0)
                r = persist_exec(s, name, &req, -EBADF, ret_id, &exit_code, detach ? NULL : &json,
                                 &e);
        if (r < 0)
                return fail(err, &e, r);
        if (detach)
                return 0;
        r = outcome_take_json(json, ret);
        if (r < 0)
                return fail_msg(err, EPROTO, "malformed outcome from the sandbox's keeper");
        return 0;
}

_public_ int hutch_exec(const char *name, const hutch_exec_options *o, hutch_outcome *ret,
                        hutch_error *err) {
        return exec_common(name, o, o && o->detach, NULL, ret, err);
}

/* ---- the execs as processes (docs/processes.md) ---- */

_public_ int hutch_exec_detached(const char *name, const hutch_exec_options *o, uint64_t *ret_id,
                                 hutch_error *err) {
        uint64_t id = 0;
        int r;

        r = exec_common(name, o, true, &id, NULL, err);
        if (r < 0)
                return r;
        if (ret_id)
                *ret_id = id;
        return 0;
}

_public_ void hutch_exec_list_free(hutch_exec_info *l, size_t n) {
        for (size_t i = 0; l && i < n; i++)
                strv_free(l[i].argv);
        free(l);
}

static int exec_info_from_json(json_t *x, hutch_exec_info *ret) {
        json_t *a = json_object_get(x, "argv"), *v;
        char **argv = NULL;
        size_t i;

        if (!json_is_array(a))
                return -EPROTO;
        json_array_foreach(a, i, v) {
                if (!json_is_string(v) || strv_extend(&argv, json_string_value(v)) < 0) {
                        strv_free(argv);
                        return -EPROTO;
                }
        }
        *ret = (hutch_exec_info){
                .id = json_u64(x, "id"),
                .argv = argv,
                .start_ms = json_u64(x, "start_ms"),
                .pid = (int)json_u64(x, "pid"),
                .detached = json_is_true(json_object_get(x, "detached")),
        };
        return 0;
}

_public_ int hutch_exec_list(const char *name, hutch_exec_info **ret, size_t *ret_n,
                             hutch_error *err) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_free_ char *text = NULL;
        hutch_exec_info *l = NULL;
        HutchError e = {};
        json_t *arr, *x;
        size_t i, n = 0;
        int r;

        if (!name || !ret || !ret_n)
                return fail_msg(err, EINVAL, "no sandbox name or result given");
        r = store_open(&s, &e);
        if (r >= 0)
                r = persist_exec_list(s, name, &text, &e);
        if (r < 0)
                return fail(err, &e, r);
        arr = json_loads(text, 0, NULL);
        if (!json_is_array(arr)) {
                json_decref(arr);
                return fail_msg(err, EPROTO, "malformed list from the sandbox's keeper");
        }
        l = calloc(json_array_size(arr) + 1, sizeof(hutch_exec_info));
        if (!l) {
                json_decref(arr);
                return fail(err, NULL, -ENOMEM);
        }
        json_array_foreach(arr, i, x) {
                r = exec_info_from_json(x, &l[n]);
                if (r < 0)
                        break;
                n++;
        }
        json_decref(arr);
        if (r < 0) {
                hutch_exec_list_free(l, n);
                return fail_msg(err, EPROTO, "malformed list from the sandbox's keeper");
        }
        *ret = l;
        *ret_n = n;
        return 0;
}

_public_ int hutch_exec_signal(const char *name, uint64_t id, int sig, uint64_t grace_ms,
                               hutch_error *err) {
        if (!name)
                return fail_msg(err, EINVAL, "no sandbox name given");
        return STORE_CALL(err,
                          persist_exec_kill(s, name, id, sig, grace_ms, false, NULL, NULL, &e));
}

_public_ int hutch_exec_stdin(const char *name, uint64_t id, const void *data, size_t len,
                              bool close, hutch_error *err) {
        if (!name || (!data && len > 0))
                return fail_msg(err, EINVAL, "no sandbox name or data given");
        return STORE_CALL(err, persist_exec_stdin(s, name, id, data, len, close, &e));
}

_public_ int hutch_exec_wait(const char *name, uint64_t id, hutch_outcome *ret, hutch_error *err) {
        _cleanup_(store_freep) Store *s = NULL;
        char *json = NULL;
        HutchError e = {};
        int r;

        if (!name || !ret)
                return fail_msg(err, EINVAL, "no sandbox name or outcome given");
        r = store_open(&s, &e);
        if (r >= 0)
                r = persist_exec_wait(s, name, id, NULL, &json, &e);
        if (r < 0)
                return fail(err, &e, r);
        r = outcome_take_json(json, ret);
        if (r < 0)
                return fail_msg(err, EPROTO, "malformed outcome in the sandbox's history");
        return 0;
}

_public_ int hutch_exec_output(const char *name, uint64_t id, bool follow, int stdout_fd,
                               int stderr_fd, hutch_error *err) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_close_ int null_out = -EBADF;
        HutchError e = {};
        int r;

        if (!name)
                return fail_msg(err, EINVAL, "no sandbox name given");
        null_out = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (null_out < 0)
                return fail(err, NULL, negative_errno());
        r = store_open(&s, &e);
        if (r >= 0)
                r = persist_exec_output(s, name, id, follow, stdout_fd >= 0 ? stdout_fd : null_out,
                                        stderr_fd >= 0 ? stderr_fd : null_out, &e);
        if (r < 0)
                return fail(err, &e, r);
        return 0;
}

static void info_fill(const Store *s, const SandboxRecord *rec, hutch_sandbox_info *ret) {
        PersistInfo pi;

        persist_info(s, rec, &pi);
        *ret = (hutch_sandbox_info){
                .running = pi.running,
                .created_ms = rec->created_ms,
                .last_used_ms = pi.last_used_ms,
                .disk_bytes = pi.disk_bytes,
        };
        copy_str(ret->name, sizeof(ret->name), rec->name);
        copy_str(ret->id, sizeof(ret->id), rec->id);
        copy_str(ret->parent, sizeof(ret->parent), rec->parent ? rec->parent : "");
}

_public_ int hutch_sandbox_describe(const char *name, hutch_sandbox_desc **ret, hutch_error *err) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        _cleanup_free_ hutch_sandbox_desc *d = NULL;
        PersistInfo pd = {};
        HutchError e = {};
        int r;

        if (!name || !ret)
                return fail_msg(err, EINVAL, "no sandbox name or output given");
        r = store_open_sandbox(&s, name, &rec, &e);
        if (r < 0)
                return fail(err, &e, r);
        d = calloc(1, sizeof(*d));
        if (!d)
                return fail(err, NULL, -ENOMEM);
        persist_describe(rec, &pd);
        copy_str(d->backend, sizeof(d->backend), sandbox_backend_to_string(pd.backend));
        copy_str(d->image, sizeof(d->image), pd.image);
        if (pd.image[0]) {
                _cleanup_free_ char *image_name = NULL;

                /* The name is for showing: an image store it cannot be read
                 * from gives none, not an error. */
                if (persist_image_name(s, pd.image, &image_name) >= 0 && image_name)
                        copy_str(d->image_name, sizeof(d->image_name), image_name);
        }
        d->n_ports = pd.n_ports;
        for (size_t i = 0; i < MIN((size_t)pd.n_ports, ELEMENTSOF(d->ports)); i++)
                d->ports[i] = pd.ports[i];
        *ret = TAKE_PTR(d);
        return 0;
}

_public_ void hutch_sandbox_info_done(hutch_sandbox_info *i) {
        if (i)
                i->policy_json = mfree(i->policy_json);
}

_public_ int hutch_list(hutch_sandbox_info **ret, size_t *ret_n, hutch_error *err) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_strv_free_ char **names = NULL;
        _cleanup_free_ hutch_sandbox_info *l = NULL;
        HutchError e = {};
        size_t n = 0;
        int r;

        if (!ret || !ret_n)
                return fail_msg(err, EINVAL, "no output given");
        r = store_open(&s, &e);
        if (r < 0)
                return fail(err, &e, r);
        r = store_list(s, "sandboxes", &names);
        if (r < 0)
                return fail_msg(err, -r, "cannot list the sandboxes");
        l = calloc(strv_length(names) + 1, sizeof(hutch_sandbox_info));
        if (!l)
                return fail(err, NULL, -ENOMEM);
        STRV_FOREACH(name, names) {
                _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;

                /* A damaged one (`hutch ls` says so) is left out. */
                if (store_sandbox_load(s, *name, &rec, NULL) < 0)
                        continue;
                info_fill(s, rec, &l[n++]);
        }
        *ret = TAKE_PTR(l);
        *ret_n = n;
        return 0;
}

_public_ int hutch_get(const char *name, hutch_sandbox_info *ret, hutch_error *err) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        _cleanup_free_ char *policy = NULL;
        HutchError e = {};
        int r;

        if (!name || !ret)
                return fail_msg(err, EINVAL, "no sandbox name or output given");
        r = store_open_sandbox(&s, name, &rec, &e);
        if (r < 0)
                return fail(err, &e, r);
        policy = strdup(rec->policy_json ? rec->policy_json : "{}");
        if (!policy)
                return fail(err, NULL, -ENOMEM);
        info_fill(s, rec, ret);
        ret->policy_json = TAKE_PTR(policy);
        ret->disk_limit_bytes = rec->disk_limit;
        return 0;
}

_public_ int hutch_get_policy(const char *name, char **ret_json, hutch_error *err) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        HutchError e = {};
        int r;

        if (!name || !ret_json)
                return fail_msg(err, EINVAL, "no sandbox name or output given");
        r = store_open_sandbox(&s, name, &rec, &e);
        if (r < 0)
                return fail(err, &e, r);
        *ret_json = TAKE_PTR(rec->policy_json);
        return 0;
}

_public_ int hutch_stop(const char *name, hutch_error *err) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        HutchError e = {};
        int r;

        if (!name)
                return fail_msg(err, EINVAL, "no sandbox name given");
        r = store_open_sandbox(&s, name, &rec, &e);
        if (r >= 0)
                r = persist_stop(s, rec->name, &e);
        return r < 0 ? fail(err, &e, r) : 0;
}

_public_ int hutch_destroy(const char *name, hutch_error *err) {
        if (!name)
                return fail_msg(err, EINVAL, "no sandbox name given");
        return STORE_CALL(err, persist_destroy(s, name, true, &e));
}

/* ---- snapshots ---- */

_public_ int hutch_snapshot(const char *name, const char *snap, hutch_error *err) {
        if (!name || !snap)
                return fail_msg(err, EINVAL, "no sandbox or snapshot name given");
        return STORE_CALL(err, persist_snapshot(s, name, snap, NULL, NULL, &e));
}

_public_ int hutch_restore(const char *name, const char *snap, hutch_error *err) {
        if (!name || !snap)
                return fail_msg(err, EINVAL, "no sandbox or snapshot name given");
        return STORE_CALL(err, persist_restore(s, name, snap, &e));
}

_public_ int hutch_snapshot_remove(const char *snap, hutch_error *err) {
        if (!snap)
                return fail_msg(err, EINVAL, "no snapshot name given");
        return STORE_CALL(err, persist_snapshot_remove(s, snap, &e));
}

_public_ int hutch_snapshot_list(char ***ret, hutch_error *err) {
        _cleanup_(store_freep) Store *s = NULL;
        char **names = NULL;
        HutchError e = {};
        int r;

        if (!ret)
                return fail_msg(err, EINVAL, "no output given");
        r = store_open(&s, &e);
        if (r < 0)
                return fail(err, &e, r);
        r = store_list(s, "snapshots", &names);
        if (r < 0)
                return fail_msg(err, -r, "cannot list the snapshots");
        /* None: an empty list, not NULL. */
        if (!names)
                names = calloc(1, sizeof(char *));
        if (!names)
                return fail(err, NULL, -ENOMEM);
        *ret = names;
        return 0;
}

_public_ void hutch_strv_free(char **l) {
        strv_free(l);
}

/* ---- files inside a sandbox ---- */

/* Runs @req with a new memfd as its data fd (filled with @data first),
 * returned in @ret_fd at offset 0. */
static int file_request(const char *name, KeeperFile *req, const void *data, size_t len,
                        int *ret_fd, hutch_error *err) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_close_ int fd = -EBADF;
        HutchError e = {};
        int r;

        if (!name || !req->path || !req->path[0])
                return fail_msg(err, EINVAL, "no sandbox name or path given");
        if (strlen(req->path) >= PATH_MAX)
                return fail_msg(err, ENAMETOOLONG, "the path is too long");
        fd = memfd_create("hutch-file", MFD_CLOEXEC);
        if (fd < 0)
                return fail(err, NULL, negative_errno());
        if (len > 0) {
                r = loop_write(fd, data, len);
                if (r < 0 || lseek(fd, 0, SEEK_SET) < 0)
                        return fail(err, NULL, r < 0 ? r : negative_errno());
        }
        req->data_fd = fd;
        r = store_open(&s, &e);
        if (r >= 0)
                r = persist_file(s, name, req, &e);
        if (r < 0)
                return fail(err, &e, r);
        if (lseek(fd, 0, SEEK_SET) < 0)
                return fail(err, NULL, negative_errno());
        if (ret_fd)
                *ret_fd = TAKE_FD(fd);
        return 0;
}

_public_ int hutch_file_read(const char *name, const char *path, size_t max, char **ret_data,
                             size_t *ret_len, hutch_error *err) {
        _cleanup_close_ int fd = -EBADF;
        KeeperFile req = {.action = FILE_OP_READ, .path = path, .max = MIN(max, (size_t)INT64_MAX)};
        char *data = NULL;
        size_t len = 0;
        int r;

        if (!ret_data)
                return fail_msg(err, EINVAL, "no output given");
        r = file_request(name, &req, NULL, 0, &fd, err);
        if (r < 0)
                return r;
        /* Bounded again here: the bytes come from inside the sandbox. */
        r = read_full_fd(fd, req.max, &data, &len);
        if (r < 0)
                return r == -EFBIG ? fail_msg(err, EFBIG, "the file is larger than the limit given")
                                   : fail(err, NULL, r);
        *ret_data = data;
        if (ret_len)
                *ret_len = len;
        return 0;
}

_public_ int hutch_file_write(const char *name, const char *path, const void *data, size_t len,
                              unsigned mode, hutch_error *err) {
        KeeperFile req = {.action = FILE_OP_WRITE, .path = path, .mode = mode};

        if (!data && len > 0)
                return fail_msg(err, EINVAL, "no data given");
        if ((mode & ~HUTCH_FILE_PARENTS) > 0777)
                return fail_msg(err, EINVAL, "the mode must be permission bits (0 to 0777)");
        return file_request(name, &req, data, len, NULL, err);
}

_public_ int hutch_file_mkdir(const char *name, const char *path, unsigned mode, hutch_error *err) {
        KeeperFile req = {.action = FILE_OP_MKDIR, .path = path, .mode = mode};

        if ((mode & ~HUTCH_FILE_PARENTS) > 0777)
                return fail_msg(err, EINVAL, "the mode must be permission bits (0 to 0777)");
        return file_request(name, &req, NULL, 0, NULL, err);
}

_public_ int hutch_file_move(const char *name, const char *from, const char *to, unsigned flags,
                             hutch_error *err) {
        KeeperFile req = {.action = FILE_OP_MOVE, .path = from, .mode = flags};

        if (flags & ~(HUTCH_FILE_PARENTS | HUTCH_FILE_REPLACE))
                return fail_msg(err, EINVAL, "unknown flags");
        if (!to || !to[0])
                return fail_msg(err, EINVAL, "no destination given");
        if (strlen(to) >= PATH_MAX)
                return fail_msg(err, ENAMETOOLONG, "the destination is too long");
        return file_request(name, &req, to, strlen(to), NULL, err);
}

static int hex_decode(const char *hex, char *buf, size_t size) {
        size_t n = strlen(hex);

        if (n % 2 != 0 || n / 2 >= size)
                return -EBADMSG;
        for (size_t i = 0; i < n / 2; i++) {
                unsigned v = 0;

                for (size_t k = 0; k < 2; k++) {
                        char c = hex[2 * i + k];

                        v = v * 16 + (c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                                      : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                                                             : 256U);
                }
                if (v == 0 || v > 255)
                        return -EBADMSG;
                buf[i] = (char)v;
        }
        buf[n / 2] = '\0';
        return 0;
}

/* One entry of the builtin's JSON (file-op.h), checked: it comes from
 * inside the sandbox. */
static int file_info_from_json(json_t *o, hutch_file_info *ret) {
        const char *name = json_string_value(json_object_get(o, "name"));
        const char *hex = json_string_value(json_object_get(o, "name_hex"));
        const char *type = json_string_value(json_object_get(o, "type"));
        json_t *size = json_object_get(o, "size"), *mode = json_object_get(o, "mode");
        json_t *mtime = json_object_get(o, "mtime_ms");

        if (!json_is_object(o) || !type || !json_is_integer(size) || json_integer_value(size) < 0 ||
            !json_is_integer(mode) || json_integer_value(mode) < 0 ||
            json_integer_value(mode) > 07777 || !json_is_integer(mtime) || (!name == !hex))
                return -EBADMSG;
        if (strcmp(type, "file") != 0 && strcmp(type, "dir") != 0 && strcmp(type, "symlink") != 0 &&
            strcmp(type, "other") != 0)
                return -EBADMSG;
        *ret = (hutch_file_info){
                .size = (uint64_t)json_integer_value(size),
                .mode = (unsigned)json_integer_value(mode),
                .mtime_ms = (int64_t)json_integer_value(mtime),
        };
        copy_str(ret->type, sizeof(ret->type), type);
        if (hex)
                return hex_decode(hex, ret->name, sizeof(ret->name));
        if (strlen(name) >= sizeof(ret->name))
                return -EBADMSG;
        copy_str(ret->name, sizeof(ret->name), name);
        return 0;
}

/* Runs a list, stat or walk @req and parses its JSON. */
static int file_json(const char *name, KeeperFile *req, json_t **ret, hutch_error *err) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        json_t *j;
        int r;

        r = file_request(name, req, NULL, 0, &fd, err);
        if (r < 0)
                return r;
        r = read_full_fd(fd, FILE_OP_JSON_MAX, &text, &len);
        if (r < 0)
                return fail(err, NULL, r);
        j = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
        if (!j)
                return fail_msg(err, EBADMSG, "malformed answer from inside the sandbox");
        *ret = j;
        return 0;
}

static int file_info_compare(const void *a, const void *b) {
        return strcmp(((const hutch_file_info *)a)->name, ((const hutch_file_info *)b)->name);
}

_public_ int hutch_file_list(const char *name, const char *path, hutch_file_info **ret,
                             size_t *ret_n, hutch_error *err) {
        _cleanup_free_ hutch_file_info *l = NULL;
        json_t *arr = NULL, *v;
        size_t n, i;
        int r = 0;

        if (!ret || !ret_n)
                return fail_msg(err, EINVAL, "no output given");
        r = file_json(name, &(KeeperFile){.action = FILE_OP_LIST, .path = path}, &arr, err);
        if (r < 0)
                return r;
        n = json_array_size(arr);
        if (!json_is_array(arr) || n > FILE_OP_LIST_MAX) {
                json_decref(arr);
                return fail_msg(err, EBADMSG, "malformed answer from inside the sandbox");
        }
        l = calloc(n + 1, sizeof(hutch_file_info));
        if (!l) {
                json_decref(arr);
                return fail(err, NULL, -ENOMEM);
        }
        json_array_foreach(arr, i, v) {
                r = file_info_from_json(v, &l[i]);
                if (r < 0)
                        break;
        }
        json_decref(arr);
        if (r < 0)
                return fail_msg(err, EBADMSG, "malformed answer from inside the sandbox");
        qsort(l, n, sizeof(hutch_file_info), file_info_compare);
        *ret = TAKE_PTR(l);
        *ret_n = n;
        return 0;
}

_public_ int hutch_file_stat(const char *name, const char *path, hutch_file_info *ret,
                             hutch_error *err) {
        hutch_file_info info;
        json_t *o = NULL;
        int r;

        if (!ret)
                return fail_msg(err, EINVAL, "no output given");
        r = file_json(name, &(KeeperFile){.action = FILE_OP_STAT, .path = path}, &o, err);
        if (r < 0)
                return r;
        r = file_info_from_json(o, &info);
        json_decref(o);
        if (r < 0)
                return fail_msg(err, EBADMSG, "malformed answer from inside the sandbox");
        *ret = info;
        return 0;
}

_public_ void hutch_file_entries_free(hutch_file_entry *l, size_t n) {
        for (size_t i = 0; l && i < n; i++)
                free(l[i].path);
        free(l);
}

static int file_entry_compare(const void *a, const void *b) {
        return strcmp(((const hutch_file_entry *)a)->path, ((const hutch_file_entry *)b)->path);
}

_public_ int hutch_file_walk(const char *name, const char *path, unsigned max_depth,
                             hutch_file_entry **ret, size_t *ret_n, hutch_error *err) {
        KeeperFile req = {.action = FILE_OP_WALK, .path = path, .max = max_depth};
        hutch_file_entry *l = NULL;
        json_t *arr = NULL, *v;
        size_t n, i;
        int r = 0;

        if (!ret || !ret_n)
                return fail_msg(err, EINVAL, "no output given");
        r = file_json(name, &req, &arr, err);
        if (r < 0)
                return r;
        n = json_array_size(arr);
        l = json_is_array(arr) && n <= FILE_OP_LIST_MAX ? calloc(n + 1, sizeof(*l)) : NULL;
        json_array_foreach(l ? arr : NULL, i, v) {
                hutch_file_info info;
                const char *p = json_string_value(json_object_get(v, "name"));
                const char *hex = json_string_value(json_object_get(v, "name_hex"));
                _cleanup_free_ char *raw = NULL;

                /* Checked as a list's entry, with a whole relative path as
                 * its name: it comes from inside the sandbox. */
                if (hex && !(raw = malloc(strlen(hex) / 2 + 2))) {
                        r = -ENOMEM;
                        break;
                }
                r = json_object_size(v) > 0 ? 0 : -EBADMSG;
                if (r >= 0 && hex)
                        r = hex_decode(hex, raw, strlen(hex) / 2 + 2);
                if (r >= 0) {
                        json_t *o = json_deep_copy(v);

                        /* The checks of file_info_from_json() on a stand-in name. */
                        r = o && json_object_del(o, hex ? "name_hex" : "name") == 0 &&
                                            json_object_set_new(o, "name", json_string("x")) == 0
                                    ? file_info_from_json(o, &info)
                                    : -EBADMSG;
                        json_decref(o);
                }
                if (r >= 0 &&
                    (!(p || raw) || strlen(p ? p : raw) >= PATH_MAX || (p ? p : raw)[0] == '/'))
                        r = -EBADMSG;
                if (r < 0)
                        break;
                l[i] = (hutch_file_entry){
                        .path = raw ? TAKE_PTR(raw) : strdup(p),
                        .size = info.size,
                        .mode = info.mode,
                        .mtime_ms = info.mtime_ms,
                };
                copy_str(l[i].type, sizeof(l[i].type), info.type);
                if (!l[i].path) {
                        r = -ENOMEM;
                        break;
                }
        }
        json_decref(arr);
        if (!l || r < 0) {
                hutch_file_entries_free(l, n);
                return r == -ENOMEM
                               ? fail(err, NULL, r)
                               : fail_msg(err, EBADMSG, "malformed answer from inside the sandbox");
        }
        qsort(l, n, sizeof(*l), file_entry_compare);
        *ret = l;
        *ret_n = n;
        return 0;
}

_public_ int hutch_file_remove(const char *name, const char *path, hutch_error *err) {
        KeeperFile req = {.action = FILE_OP_REMOVE, .path = path};

        return file_request(name, &req, NULL, 0, NULL, err);
}

/* ---- trees as tar (sandbox/file-tar.h) ---- */

_public_ int hutch_file_archive_get(const char *name, const char *path, size_t max, char **ret_data,
                                    size_t *ret_len, hutch_error *err) {
        _cleanup_close_ int fd = -EBADF;
        KeeperFile req = {.action = FILE_OP_PACK, .path = path, .max = MIN(max, (size_t)INT64_MAX)};
        char *data = NULL;
        size_t len = 0;
        int r;

        if (!ret_data || max == 0)
                return fail_msg(err, EINVAL, "no output or no limit given");
        r = file_request(name, &req, NULL, 0, &fd, err);
        if (r == -EFBIG || r == -E2BIG)
                return fail_msg(err, -r,
                                r == -EFBIG ? "the tree's archive is larger than the limit given"
                                            : "the tree has more than 100000 entries");
        if (r < 0)
                return r;
        /* Bounded again here: the bytes come from inside the sandbox. */
        r = read_full_fd(fd, req.max, &data, &len);
        if (r < 0)
                return r == -EFBIG ? fail_msg(err, EFBIG,
                                              "the tree's archive is larger than the limit given")
                                   : fail(err, NULL, r);
        *ret_data = data;
        if (ret_len)
                *ret_len = len;
        return 0;
}

_public_ int hutch_file_archive_put(const char *name, const char *path, const void *data,
                                    size_t len, unsigned flags, hutch_error *err) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_close_ int fd = -EBADF;
        /* The file data in it cannot exceed the archive's own size. */
        KeeperFile req = {
                .action = FILE_OP_UNPACK, .path = path, .mode = flags, .max = MAX(len, (size_t)1)};
        char msg[FILE_TAR_MSG_MAX + 1] = "";
        HutchError e = {};
        ssize_t n;
        int r;

        if (!name || !path || !path[0])
                return fail_msg(err, EINVAL, "no sandbox name or path given");
        if (!data && len > 0)
                return fail_msg(err, EINVAL, "no data given");
        if (flags & ~HUTCH_FILE_PARENTS)
                return fail_msg(err, EINVAL, "unknown flags");
        if (strlen(path) >= PATH_MAX)
                return fail_msg(err, ENAMETOOLONG, "the path is too long");
        fd = memfd_create("hutch-archive", MFD_CLOEXEC);
        if (fd < 0)
                return fail(err, NULL, negative_errno());
        if (len > 0) {
                r = loop_write(fd, data, len);
                if (r < 0 || lseek(fd, 0, SEEK_SET) < 0)
                        return fail(err, NULL, r < 0 ? r : negative_errno());
        }
        req.data_fd = fd;
        r = store_open(&s, &e);
        if (r >= 0)
                r = persist_file(s, name, &req, &e);
        if (r >= 0)
                return 0;
        /* The builtin's message follows the archive (sandbox/file-tar.h);
         * it comes from inside the sandbox: one line of printable ASCII. */
        n = pread(fd, msg, FILE_TAR_MSG_MAX, (off_t)len);
        if (n > 0 && e.errnum == -r) {
                msg[n] = '\0';
                for (char *c = msg; *c; c++)
                        if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
                                *c = '?';
                (void)hutch_error_set(&e, -r, "cannot unpack the archive into '%s': %s", path, msg);
        }
        return fail(err, &e, r);
}

/* ---- the workspace ---- */

/* The diff as JSON text. */
static int diff_json_text(Store *s, const char *name, char **ret, HutchError *e) {
        _cleanup_(ws_view_done) WsView v = WS_VIEW_NULL;
        WsChange *changes = NULL;
        size_t n = 0, n_all = 0;
        json_t *j = NULL;
        char *text;
        int r;

        r = persist_diff(s, name, NULL, &v, &changes, &n, &n_all, e);
        if (r < 0)
                return r;
        r = ws_diff_to_json(changes, n, &j);
        (void)ws_changes_free(changes, n_all);
        if (r < 0)
                return r;
        text = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        if (!text)
                return -ENOMEM;
        *ret = text;
        return 0;
}

typedef struct InRange {
        Store *s;
        const char *name;
        char **paths;
        bool force;
        int out_fd; /* diff: the JSON goes here */
} InRange;

static int diff_in_range(void *userdata, HutchError *reterr) {
        InRange *a = userdata;
        _cleanup_free_ char *text = NULL;
        int r;

        r = diff_json_text(a->s, a->name, &text, reterr);
        if (r < 0)
                return r;
        return loop_write(a->out_fd, text, strlen(text));
}

static int apply_in_range(void *userdata, HutchError *reterr) {
        InRange *a = userdata;
        PersistApply pa = {};
        int r;

        r = persist_apply(a->s, a->name, a->paths, a->force ? WS_APPLY_FORCE : 0, &pa, reterr);
        persist_apply_done(&pa);
        if (r < 0)
                return r;
        /* The count of changes applied, for the parent. */
        {
                char buf[16];

                (void)snprintf(buf, sizeof(buf), "%d", r);
                return loop_write(a->out_fd, buf, strlen(buf));
        }
}

/* SECURITY/correctness: with a user's sub-id range (ns/userns.h), the
 * sandbox's files of sub-ids can be read and written only in the store's
 * user namespace, as the CLI does (store_enter_range()); a library caller
 * (hutch serve, hutch mcp, a program) must not be moved there for good,
 * so the call runs in a forked child that enters it (userns_run_ranged())
 * and hands its answer back through a memfd. */
static int run_in_range(Store *s, int (*fn)(void *, HutchError *), InRange *a, char **ret_text,
                        size_t max, HutchError *e) {
        _cleanup_close_ int fd = memfd_create("hutch-in-range", MFD_CLOEXEC);
        size_t len = 0;
        int r;

        if (fd < 0)
                return negative_errno();
        a->out_fd = fd;
        r = userns_run_ranged(&s->idmap, fn, a, e);
        if (r < 0)
                return r;
        if (lseek(fd, 0, SEEK_SET) < 0)
                return negative_errno();
        return read_full_fd(fd, max, ret_text, &len);
}

_public_ int hutch_diff_json(const char *name, char **ret_json, hutch_error *err) {
        _cleanup_(store_freep) Store *s = NULL;
        char *text = NULL;
        HutchError e = {};
        int r;

        if (!name || !ret_json)
                return fail_msg(err, EINVAL, "no sandbox name or output given");
        r = store_open(&s, &e);
        if (r >= 0 && s->idmap.ranged)
                r = run_in_range(s, diff_in_range, &(InRange){.s = s, .name = name}, &text,
                                 64U << 20, &e);
        else if (r >= 0)
                r = diff_json_text(s, name, &text, &e);
        if (r < 0)
                return fail(err, &e, r);
        *ret_json = text;
        return 0;
}

_public_ int hutch_apply(const char *name, char *const *paths, bool force, hutch_error *err) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_strv_free_ char **l = NULL;
        PersistApply a = {};
        HutchError e = {};
        int r;

        if (!name)
                return fail_msg(err, EINVAL, "no sandbox name given");
        if (paths) {
                l = strv_copy(paths);
                if (!l)
                        return fail(err, NULL, -ENOMEM);
        }
        r = persist_paths_normalize(l, &e);
        if (r >= 0)
                r = store_open(&s, &e);
        if (r >= 0 && s->idmap.ranged) {
                _cleanup_free_ char *count = NULL;

                r = run_in_range(s, apply_in_range,
                                 &(InRange){.s = s, .name = name, .paths = l, .force = force},
                                 &count, 16, &e);
                if (r >= 0 && safe_atoi(count, &r) < 0)
                        r = hutch_error_set(&e, EPROTO, "the store's helper gave no count");
                return r < 0 ? fail(err, &e, r) : r;
        }
        if (r >= 0)
                r = persist_apply(s, name, l, force ? WS_APPLY_FORCE : 0, &a, &e);
        persist_apply_done(&a);
        return r < 0 ? fail(err, &e, r) : r;
}

/* ---- published ports ---- */

_public_ int hutch_ports(const char *name, char **ret_json, bool *ret_running, hutch_error *err) {
        _cleanup_(store_freep) Store *s = NULL;
        bool running = false;
        char *json = NULL;
        HutchError e = {};
        int r;

        if (!name || !ret_json)
                return fail_msg(err, EINVAL, "no sandbox name given");
        r = store_open(&s, &e);
        if (r >= 0)
                r = persist_ports_list(s, name, &json, &running, &e);
        if (r < 0)
                return fail(err, &e, r);
        *ret_json = json;
        if (ret_running)
                *ret_running = running;
        return 0;
}

_public_ int hutch_port_connect(const char *name, unsigned port, int *ret_fd, hutch_error *err) {
        if (!name || !ret_fd || port < 1 || port > 65535)
                return fail_msg(err, EINVAL, "a sandbox name and a port (1-65535) are needed");
        return STORE_CALL(err, persist_port_connect(s, name, (uint16_t)port, ret_fd, &e));
}

_public_ int hutch_port_publish(const char *name, const char *spec, char **ret_json,
                                hutch_error *err) {
        _cleanup_free_ char *json = NULL;
        int r;

        if (!name || !spec)
                return fail_msg(err, EINVAL, "a sandbox name and a port are needed");
        r = STORE_CALL(err, persist_port_add(s, name, spec, &json, &e));
        if (r < 0)
                return r;
        if (ret_json)
                *ret_json = TAKE_PTR(json);
        return 0;
}

_public_ int hutch_port_unpublish(const char *name, unsigned port, hutch_error *err) {
        if (!name || port < 1 || port > 65535)
                return fail_msg(err, EINVAL, "a sandbox name and a port (1-65535) are needed");
        return STORE_CALL(err, persist_port_remove(s, name, (uint16_t)port, &e));
}
