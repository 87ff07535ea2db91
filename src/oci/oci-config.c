/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* config.json validation (oci.h): every field is either implemented or
 * refused by name. */

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "macro.h"
#include "oci.h"
#include "policy/policy.h"

static bool in_list(const char *key, const char *const *list) {
        for (; *list; list++)
                if (strcmp(*list, key) == 0)
                        return true;
        return false;
}

/* Asks for nothing: null, an empty array or string, false, or an object
 * whose members all ask for nothing, where a member may also be 0 (Docker
 * sends "blockIO": {"weight": 0}). */
static bool empty(json_t *v) {
        const char *key;
        json_t *m;

        if (!v || json_is_null(v) || json_is_false(v) ||
            (json_is_array(v) && json_array_size(v) == 0) ||
            (json_is_string(v) && json_string_length(v) == 0))
                return true;
        if (!json_is_object(v))
                return false;
        json_object_foreach(v, key, m) {
                if (!(empty(m) || (json_is_integer(m) && json_integer_value(m) == 0)))
                        return false;
        }
        return true;
}

/* Every key of @obj must be in @allowed; a null or empty value (an empty
 * object, array or string, false) asks for nothing and counts as absent. */
static int check_keys(json_t *obj, const char *ptr, const char *const *allowed,
                      HutchError *reterr) {
        const char *key;
        json_t *v;

        if (!obj || json_is_null(obj))
                return 0;
        if (!json_is_object(obj))
                return hutch_error_set_pointer(reterr, EINVAL, ptr, "%s must be an object", ptr);
        json_object_foreach(obj, key, v) {
                if (empty(v) || in_list(key, allowed))
                        continue;
                return hutch_error_set_pointer(reterr, EOPNOTSUPP, ptr,
                                               "%s/%s is not supported by hutch-oci", ptr, key);
        }
        return 0;
}

#define REFUSE_UNLESS_EMPTY(obj, key, ptr)                                                         \
        do {                                                                                       \
                if (!empty(json_object_get((obj), (key))))                                         \
                        return hutch_error_set_pointer(reterr, EOPNOTSUPP, ptr "/" key,            \
                                                       ptr "/" key                                 \
                                                           " is not supported by hutch-oci");      \
        } while (0)

int oci_process_validate(json_t *p, HutchError *reterr) {
        static const char *const keys[] = {"terminal",
                                           "consoleSize",
                                           "user",
                                           "args",
                                           "env",
                                           "cwd",
                                           "capabilities",
                                           "rlimits",
                                           "noNewPrivileges",
                                           "oomScoreAdj",
                                           "apparmorProfile",
                                           "selinuxLabel",
                                           NULL};
        static const char *const user_keys[] = {"uid", "gid", "umask", "additionalGids", NULL};
        static const char *const cap_keys[] = {"bounding",    "effective", "permitted",
                                               "inheritable", "ambient",   NULL};
        json_t *caps = json_object_get(p, "capabilities"), *v;
        const char *key;
        size_t i;
        int r;

        if (!json_is_object(p))
                return hutch_error_set_pointer(reterr, EINVAL, "/process", "/process is missing");
        r = check_keys(p, "/process", keys, reterr);
        if (r < 0)
                return r;
        REFUSE_UNLESS_EMPTY(p, "apparmorProfile", "/process");
        REFUSE_UNLESS_EMPTY(p, "selinuxLabel", "/process");
        r = check_keys(json_object_get(p, "user"), "/process/user", user_keys, reterr);
        if (r < 0)
                return r;
        if (!json_is_array(json_object_get(p, "args")) ||
            json_array_size(json_object_get(p, "args")) == 0)
                return hutch_error_set_pointer(reterr, EINVAL, "/process/args",
                                               "/process/args must be a non-empty array");
        json_array_foreach(
                json_object_get(p, "args"), i,
                v) if (!json_is_string(v)) return hutch_error_set_pointer(reterr, EINVAL,
                                                                          "/process/args",
                                                                          "args must be strings");
        json_array_foreach(
                json_object_get(p, "env"), i,
                v) if (!json_is_string(v) ||
                       !strchr(json_string_value(v),
                               '=')) return hutch_error_set_pointer(reterr, EINVAL, "/process/env",
                                                                    "bad /process/env/%zu", i);
        r = check_keys(caps, "/process/capabilities", cap_keys, reterr);
        if (r < 0)
                return r;
        json_object_foreach(caps, key, v) {
                json_t *c;
                size_t k;

                json_array_foreach(
                        v, k,
                        c) if (!json_is_string(c) ||
                               oci_cap_from_name(json_string_value(c)) <
                                       0) return hutch_error_set_pointer(reterr, EINVAL,
                                                                         "/process/capabilities",
                                                                         "unknown capability in "
                                                                         "/process/capabilities/%s",
                                                                         key);
        }
        return 0;
}

int oci_resources_validate(json_t *res, HutchError *reterr) {
        static const char *const keys[] = {"memory", "cpu", "pids", "devices", NULL};
        static const char *const mem_keys[] = {"limit", "swap", "disableOOMKiller", NULL};
        static const char *const cpu_keys[] = {"quota", "period", "shares", NULL};
        static const char *const pid_keys[] = {"limit", NULL};
        static const char *const dev_keys[] = {"allow", "type", "major", "minor", "access", NULL};
        json_t *v;
        size_t i;
        int r;

        r = check_keys(res, "/linux/resources", keys, reterr);
        if (r >= 0)
                r = check_keys(json_object_get(res, "memory"), "/linux/resources/memory", mem_keys,
                               reterr);
        if (r >= 0)
                r = check_keys(json_object_get(res, "cpu"), "/linux/resources/cpu", cpu_keys,
                               reterr);
        if (r >= 0)
                r = check_keys(json_object_get(res, "pids"), "/linux/resources/pids", pid_keys,
                               reterr);
        if (r < 0)
                return r;
        if (json_is_true(json_object_get(json_object_get(res, "memory"), "disableOOMKiller")))
                return hutch_error_set_pointer(
                        reterr, EOPNOTSUPP, "/linux/resources/memory/disableOOMKiller",
                        "/linux/resources/memory/disableOOMKiller is not supported by hutch-oci");
        json_array_foreach(json_object_get(res, "devices"), i, v) {
                r = check_keys(v, "/linux/resources/devices", dev_keys, reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int validate_seccomp(json_t *sc, HutchError *reterr) {
        static const char *const keys[] = {"defaultAction", "defaultErrnoRet", "architectures",
                                           "syscalls",      "flags",           NULL};
        static const char *const sys_keys[] = {"names", "action", "errnoRet", "args", NULL};
        static const char *const arg_keys[] = {"index", "value", "valueTwo", "op", NULL};
        static const char *const actions[] = {
                "SCMP_ACT_ALLOW",        "SCMP_ACT_ERRNO", "SCMP_ACT_KILL", "SCMP_ACT_KILL_THREAD",
                "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_TRAP",  "SCMP_ACT_LOG",  NULL};
        json_t *v, *a;
        size_t i, k;
        int r;

        r = check_keys(sc, "/linux/seccomp", keys, reterr);
        if (r < 0)
                return r;
        REFUSE_UNLESS_EMPTY(sc, "flags", "/linux/seccomp");
        if (!json_is_string(json_object_get(sc, "defaultAction")) ||
            !in_list(json_string_value(json_object_get(sc, "defaultAction")), actions))
                return hutch_error_set_pointer(reterr, EOPNOTSUPP, "/linux/seccomp/defaultAction",
                                               "unsupported /linux/seccomp/defaultAction");
        json_array_foreach(json_object_get(sc, "syscalls"), i, v) {
                r = check_keys(v, "/linux/seccomp/syscalls", sys_keys, reterr);
                if (r < 0)
                        return r;
                if (!json_is_string(json_object_get(v, "action")) ||
                    !in_list(json_string_value(json_object_get(v, "action")), actions))
                        return hutch_error_set_pointer(
                                reterr, EOPNOTSUPP, "/linux/seccomp/syscalls",
                                "unsupported action in /linux/seccomp/syscalls/%zu", i);
                json_array_foreach(json_object_get(v, "args"), k, a) {
                        r = check_keys(a, "/linux/seccomp/syscalls/args", arg_keys, reterr);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

static bool has_namespace(json_t *l, const char *type) {
        json_t *v;
        size_t i;

        json_array_foreach(json_object_get(l, "namespaces"), i, v) {
                if (json_is_string(json_object_get(v, "type")) &&
                    strcmp(json_string_value(json_object_get(v, "type")), type) == 0)
                        return true;
        }
        return false;
}

/* SECURITY: the child writes sysctls through /proc/sys, which is the
 * host's for anything that is not namespaced. Only keys of a namespace
 * the container has are accepted, and a key is letters, digits, '_', '-'
 * and '.' (no '/', so no path can leave /proc/sys/<namespace part>). */
static int validate_sysctls(json_t *l, HutchError *reterr) {
        static const char *const ipc[] = {
                "kernel.msgmax", "kernel.msgmnb",          "kernel.msgmni",
                "kernel.sem",    "kernel.shmall",          "kernel.shmmax",
                "kernel.shmmni", "kernel.shm_rmid_forced", NULL};
        static const char *const uts[] = {"kernel.hostname", "kernel.domainname", NULL};
        const char *key;
        json_t *v;

        json_object_foreach(json_object_get(l, "sysctl"), key, v) {
                const char *ns = NULL;

                for (const char *c = key; *c; c++)
                        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                              (*c >= '0' && *c <= '9') || strchr("_-.", *c)))
                                return hutch_error_set_pointer(reterr, EINVAL, "/linux/sysctl",
                                                               "bad sysctl name '%s'", key);
                if (!json_is_string(v))
                        return hutch_error_set_pointer(reterr, EINVAL, "/linux/sysctl",
                                                       "sysctl '%s' needs a string value", key);
                if (strncmp(key, "net.", 4) == 0)
                        ns = "network";
                else if (strncmp(key, "fs.mqueue.", 10) == 0 || in_list(key, ipc))
                        ns = "ipc";
                else if (in_list(key, uts))
                        ns = "uts";
                if (!ns)
                        return hutch_error_set_pointer(
                                reterr, EOPNOTSUPP, "/linux/sysctl",
                                "sysctl '%s' is not namespaced: hutch-oci refuses it", key);
                if (!has_namespace(l, ns))
                        return hutch_error_set_pointer(reterr, EOPNOTSUPP, "/linux/sysctl",
                                                       "sysctl '%s' needs a %s namespace", key, ns);
        }
        return 0;
}

static int validate_linux(json_t *l, HutchError *reterr) {
        static const char *const keys[] = {
                "namespaces", "uidMappings",       "gidMappings", "cgroupsPath",   "resources",
                "sysctl",     "seccomp",           "maskedPaths", "readonlyPaths", "devices",
                "mountLabel", "rootfsPropagation", NULL};
        json_t *v;
        size_t i;
        int r;

        r = check_keys(l, "/linux", keys, reterr);
        if (r < 0)
                return r;
        REFUSE_UNLESS_EMPTY(l, "devices", "/linux");
        REFUSE_UNLESS_EMPTY(l, "mountLabel", "/linux");
        REFUSE_UNLESS_EMPTY(l, "rootfsPropagation", "/linux");
        json_array_foreach(json_object_get(l, "namespaces"), i, v) {
                const char *type = json_string_value(json_object_get(v, "type"));
                const char *path = json_string_value(json_object_get(v, "path"));

                if (!type || oci_namespace_flag(type) == 0)
                        return hutch_error_set_pointer(
                                reterr, EOPNOTSUPP, "/linux/namespaces",
                                "namespace type '%s' is not supported by hutch-oci",
                                type ? type : "");
                if (path && path[0] && strcmp(type, "mount") == 0)
                        return hutch_error_set_pointer(
                                reterr, EOPNOTSUPP, "/linux/namespaces",
                                "joining a mount namespace by path is not supported");
        }
        r = validate_sysctls(l, reterr);
        if (r < 0)
                return r;
        r = oci_resources_validate(json_object_get(l, "resources"), reterr);
        if (r < 0)
                return r;
        if (json_is_object(json_object_get(l, "seccomp")))
                return validate_seccomp(json_object_get(l, "seccomp"), reterr);
        return 0;
}

int oci_config_validate(json_t *config, HutchError *reterr) {
        static const char *const keys[] = {"ociVersion",  "process", "root",  "hostname", "mounts",
                                           "annotations", "linux",   "hooks", NULL};
        static const char *const root_keys[] = {"path", "readonly", NULL};
        static const char *const mount_keys[] = {"destination", "type", "source", "options", NULL};
        static const char *const hook_keys[] = {"prestart",
                                                "createRuntime",
                                                "createContainer",
                                                "startContainer",
                                                "poststart",
                                                "poststop",
                                                NULL};
        json_t *root = json_object_get(config, "root"), *hooks = json_object_get(config, "hooks"),
               *v;
        const char *key;
        size_t i;
        int r;

        r = check_keys(config, "", keys, reterr);
        if (r < 0)
                return r;
        r = check_keys(root, "/root", root_keys, reterr);
        if (r < 0)
                return r;
        if (!json_is_string(json_object_get(root, "path")))
                return hutch_error_set_pointer(reterr, EINVAL, "/root/path",
                                               "/root/path is missing");
        r = check_keys(hooks, "/hooks", hook_keys, reterr);
        if (r < 0)
                return r;
        json_object_foreach(hooks, key, v) {
                static const char *const hk[] = {"path", "args", "env", "timeout", NULL};
                json_t *h;
                size_t k;

                json_array_foreach(v, k, h) {
                        r = check_keys(h, "/hooks/*", hk, reterr);
                        if (r < 0)
                                return r;
                        if (!json_is_string(json_object_get(h, "path")) ||
                            json_string_value(json_object_get(h, "path"))[0] != '/')
                                return hutch_error_set_pointer(
                                        reterr, EINVAL, "/hooks",
                                        "/hooks/%s/%zu/path must be an absolute path", key, k);
                }
        }
        json_array_foreach(json_object_get(config, "mounts"), i, v) {
                const char *dest = json_string_value(json_object_get(v, "destination"));
                json_t *o;
                size_t k;

                r = check_keys(v, "/mounts", mount_keys, reterr);
                if (r < 0)
                        return r;
                if (!dest || dest[0] != '/')
                        return hutch_error_set_pointer(
                                reterr, EINVAL, "/mounts",
                                "/mounts/%zu/destination must be an absolute path", i);
                json_array_foreach(json_object_get(v, "options"), k, o) {
                        const char *s = json_string_value(o);
                        if (!s || strcmp(s, "idmap") == 0 || strcmp(s, "ridmap") == 0 ||
                            strcmp(s, "remount") == 0)
                                return hutch_error_set_pointer(
                                        reterr, EOPNOTSUPP, "/mounts",
                                        "/mounts/%zu/options: '%s' is not supported", i,
                                        s ? s : "");
                }
        }
        /* hutch's own policy annotations: the network wall, or an error
         * naming what is not applied (oci-net.c). */
        {
                Policy *p = NULL;
                json_t *namespaces =
                        json_object_get(json_object_get(config, "linux"), "namespaces");
                bool netns = false;

                uint64_t timeout_ms;

                r = oci_net_from_annotations(json_object_get(config, "annotations"), &p, reterr);
                if (r >= 0)
                        r = oci_timeout_from_annotations(json_object_get(config, "annotations"),
                                                         &timeout_ms, reterr);
                if (r < 0) {
                        policy_free(p);
                        return r;
                }
                json_array_foreach(namespaces, i, v) {
                        const char *type = json_string_value(json_object_get(v, "type"));

                        netns = netns || (type && strcmp(type, "network") == 0);
                }
                policy_free(p);
                if (p && !netns)
                        return hutch_error_set_pointer(
                                reterr, EINVAL, "/annotations",
                                "io.hutch.allow-host needs the container in a network namespace "
                                "of its own (linux.namespaces has none)");
        }
        r = oci_process_validate(json_object_get(config, "process"), reterr);
        if (r < 0)
                return r;
        return validate_linux(json_object_get(config, "linux"), reterr);
}
