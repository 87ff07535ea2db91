/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The run flags' door to the policy (hutch-ext.h, issue 16): the CLI's
 * flags fill a Policy only through these calls (docs/architecture.md §6). */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "api/hutch-ext.h"
#include "macro.h"
#include "policy/policy.h"
#include "strv.h"

Policy *hutch_ext_policy_new(void) {
        return policy_new();
}

Policy *hutch_ext_policy_free(Policy *p) {
        return policy_free(p);
}

int hutch_ext_policy_load_json(Policy *p, const char *json, HutchError *reterr) {
        if (!p || !json)
                return -EINVAL;
        return policy_load_json(p, json, strlen(json), reterr);
}

int hutch_ext_policy_load_file(Policy *p, const char *path, HutchError *reterr) {
        if (!p || !path)
                return -EINVAL;
        return policy_load_file(p, path, reterr);
}

int hutch_ext_policy_validate(const Policy *p, HutchError *reterr) {
        if (!p)
                return -EINVAL;
        return policy_validate(p, reterr);
}

int hutch_ext_policy_to_json(const Policy *p, char **ret) {
        if (!p || !ret)
                return -EINVAL;
        return policy_to_json(p, ret);
}

/* The limit flags, in the order of PolicyLimit. */
static const struct {
        HutchExtFlag flag;
        PolicyLimit limit;
        const char *name;
} limit_flags[] = {
        {HUTCH_EXT_FLAG_MEMORY, POLICY_LIMIT_MEMORY, "--memory"},
        {HUTCH_EXT_FLAG_MEMORY_SWAP, POLICY_LIMIT_MEMORY_SWAP, "--memory-swap"},
        {HUTCH_EXT_FLAG_CPUS, POLICY_LIMIT_CPUS, "--cpus"},
        {HUTCH_EXT_FLAG_PIDS, POLICY_LIMIT_PIDS, "--pids"},
        {HUTCH_EXT_FLAG_TIMEOUT, POLICY_LIMIT_TIMEOUT, "--timeout"},
        {HUTCH_EXT_FLAG_DISK, POLICY_LIMIT_DISK, "--disk"},
        {HUTCH_EXT_FLAG_OUTPUT_LIMIT, POLICY_LIMIT_OUTPUT, "--output-limit"},
};

/* --allow-host also takes a URL (http:// or https://) and uses its host
 * and port: "https://api.example.com/v1" is "api.example.com:443". Sets
 * *@ret to NULL when @value is not a URL. */
static int allow_host_from_url(const char *value, char **ret, HutchError *reterr) {
        const char *sep = strstr(value, "://"), *host, *end;
        const char *port = NULL;
        size_t len;

        *ret = NULL;
        if (!sep)
                return 0;
        if (strncasecmp(value, "https://", 8) == 0)
                port = "443";
        else if (strncasecmp(value, "http://", 7) == 0)
                port = "80";
        else
                return hutch_error_set(reterr, EINVAL,
                                       "invalid --allow-host '%s': give a host name (and a "
                                       "port), not a URL of scheme '%.*s'",
                                       value, (int)MIN((size_t)(sep - value), (size_t)16), value);
        host = sep + 3;
        if (strchr(host, '@'))
                return hutch_error_set(reterr, EINVAL,
                                       "invalid --allow-host '%s': give a host name, not a URL "
                                       "with a user name",
                                       value);
        len = strcspn(host, "/?#");
        end = host + len;
        if (len == 0)
                return hutch_error_set(reterr, EINVAL,
                                       "invalid --allow-host '%s': the URL has no host name",
                                       value);
        /* An explicit port stays; otherwise the scheme's. */
        if (memchr(host, ':', len)) {
                *ret = strndup(host, len);
                return *ret ? 0 : -ENOMEM;
        }
        if (asprintf(ret, "%.*s:%s", (int)(end - host), host, port) < 0) {
                *ret = NULL;
                return -ENOMEM;
        }
        return 0;
}

/* create: "--workspace DIR" without a mode means an overlay. */
static const char *workspace_default_overlay(const char *value, char **buf) {
        const char *colon = strrchr(value, ':');

        if (colon && workspace_mode_from_string(colon + 1) >= 0)
                return value;
        if (asprintf(buf, "%s:overlay", value) < 0) {
                *buf = NULL;
                return NULL;
        }
        return *buf;
}

int hutch_ext_policy_flag(Policy *p, HutchExtFlag flag, const char *value, HutchError *reterr) {
        int r;

        if (!p)
                return -EINVAL;
        /* The two flags without a value. */
        if (flag == HUTCH_EXT_FLAG_READ_ONLY) {
                p->read_only = true;
                return 0;
        }
        if (flag == HUTCH_EXT_FLAG_ALLOW_DEGRADED) {
                p->allow_degraded = true;
                return 0;
        }
        if (!value)
                return -EINVAL;
        switch (flag) {
        case HUTCH_EXT_FLAG_VOLUME:
                return policy_add_bind_spec(p, value, reterr);
        case HUTCH_EXT_FLAG_WORKDIR:
                return policy_set_workdir(p, value, reterr);
        case HUTCH_EXT_FLAG_USER:
                return policy_set_user(p, value, reterr);
        case HUTCH_EXT_FLAG_ENV:
                return policy_add_env_spec(p, value, reterr);
        case HUTCH_EXT_FLAG_ENV_PASS:
                if (!env_name_is_valid(value))
                        return hutch_error_set(reterr, EINVAL,
                                               "invalid environment variable name '%s' in "
                                               "--env-pass (expected [A-Za-z_][A-Za-z0-9_]*)",
                                               value);
                return policy_add_env_spec(p, value, reterr);
        case HUTCH_EXT_FLAG_WORKSPACE:
                return policy_set_workspace_spec(p, value, reterr);
        case HUTCH_EXT_FLAG_WORKSPACE_OVERLAY: {
                _cleanup_free_ char *buf = NULL;
                const char *spec = workspace_default_overlay(value, &buf);

                if (!spec)
                        return -ENOMEM;
                return policy_set_workspace_spec(p, spec, reterr);
        }
        case HUTCH_EXT_FLAG_TMPFS:
                return policy_add_tmpfs_spec(p, value, reterr);
        case HUTCH_EXT_FLAG_HOSTNAME:
                return policy_set_hostname(p, value, reterr);
        case HUTCH_EXT_FLAG_NETWORK:
                return policy_set_network(p, value, reterr);
        case HUTCH_EXT_FLAG_DNS:
                return policy_set_dns(p, value, reterr);
        case HUTCH_EXT_FLAG_ALLOW_HOST: {
                _cleanup_free_ char *host = NULL;

                r = allow_host_from_url(value, &host, reterr);
                if (r < 0)
                        return r;
                return policy_add_allow_host(p, host ? host : value, "--allow-host", reterr);
        }
        case HUTCH_EXT_FLAG_PUBLISH:
                return policy_add_port(p, value, "--publish", reterr);
        case HUTCH_EXT_FLAG_DENY_HOST:
                return policy_add_deny_host(p, value, "--deny-host", reterr);
        case HUTCH_EXT_FLAG_ALLOW_PRIVATE:
                return policy_add_allow_private(p, value, "--allow-private", reterr);
        case HUTCH_EXT_FLAG_RESOLVE:
                return policy_add_resolve(p, value, "--resolve", reterr);
        case HUTCH_EXT_FLAG_AUDIT_LOG:
                return policy_set_audit_log(p, value, reterr);
        case HUTCH_EXT_FLAG_SECRET:
                return policy_add_secret_spec(p, value, reterr);
        case HUTCH_EXT_FLAG_UPSTREAM_CA:
                return policy_add_upstream_ca(p, value, "--upstream-ca", reterr);
        case HUTCH_EXT_FLAG_BACKEND:
                return policy_set_backend(p, value, reterr);
        case HUTCH_EXT_FLAG_VM_ACCEL:
                return policy_set_vm_accel(p, value, reterr);
        case HUTCH_EXT_FLAG_VM_KERNEL:
                return policy_set_vm_kernel(p, value, reterr);
        case HUTCH_EXT_FLAG_IMAGE:
                return policy_set_image(p, value, reterr);
        case HUTCH_EXT_FLAG_MEMORY:
        case HUTCH_EXT_FLAG_MEMORY_SWAP:
        case HUTCH_EXT_FLAG_CPUS:
        case HUTCH_EXT_FLAG_PIDS:
        case HUTCH_EXT_FLAG_TIMEOUT:
        case HUTCH_EXT_FLAG_DISK:
        case HUTCH_EXT_FLAG_OUTPUT_LIMIT:
                for (size_t i = 0; i < ELEMENTSOF(limit_flags); i++)
                        if (limit_flags[i].flag == flag)
                                return policy_set_limit(p, limit_flags[i].limit, value,
                                                        limit_flags[i].name, reterr);
                return -EINVAL;
        case HUTCH_EXT_FLAG_READ_ONLY:
        case HUTCH_EXT_FLAG_ALLOW_DEGRADED:
        case _HUTCH_EXT_FLAG_MAX:
        case _HUTCH_EXT_FLAG_INVALID:
                break;
        }
        return -EINVAL;
}

void hutch_ext_policy_view(const Policy *p, HutchExtPolicyView *ret) {
        assert(p);
        assert(ret);
        *ret = (HutchExtPolicyView){
                .image = p->image,
                .workspace = p->workspace,
                .workspace_mount = p->workspace && p->workspace_mode == WORKSPACE_MODE_MOUNT,
                .workspace_copy = p->workspace && p->workspace_mode == WORKSPACE_MODE_COPY,
                .read_only = p->read_only,
                .vm = p->backend == SANDBOX_BACKEND_VM,
                .output_limit = p->output_limit,
                .memory_explicit = (p->limits_explicit & (1U << POLICY_LIMIT_MEMORY)) != 0,
                .memory_max = p->memory_max,
                .cpu_millis = p->cpu_millis,
                .limits_explicit = p->limits_explicit,
                .ports = p->ports,
                .allow_hosts = p->allow_hosts,
        };
}

const char *hutch_ext_policy_limit_name(unsigned limit) {
        if (limit >= _POLICY_LIMIT_MAX)
                return NULL;
        return policy_limit_to_string((PolicyLimit)limit);
}

/* Whether @path is @dir or below it ("/" is above everything). */
static bool path_is_below(const char *path, const char *dir) {
        size_t n = strlen(dir);

        if (strcmp(dir, "/") == 0)
                return true;
        return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* One mount point of a one-shot namespace sandbox: what is at @target
 * when the command starts. @source: the host directory shown there, or
 * NULL for an empty tmpfs (and the root). */
typedef struct WorkdirMount {
        const char *target;
        const char *source;
} WorkdirMount;

/* -w DIR must exist when the command starts: for a one-shot sandbox of the
 * namespace backend this is known before anything is created (the root is
 * empty but for the mount points; the system directories, the workspace
 * and the binds show host directories; tmpfs mounts start empty). What
 * cannot be told from here (a host directory hutch may not read) is left
 * to the sandbox. */
int hutch_ext_policy_check_workdir(const Policy *p, HutchError *reterr) {
        static const char *const fixed[] = {"/tmp", "/dev/shm", POLICY_SANDBOX_HOME, "/proc",
                                            "/dev"};
        static const char *const system[] = {"/usr",   "/bin",   "/sbin",   "/lib",
                                             "/lib32", "/lib64", "/libx32", "/etc"};
        _cleanup_free_ WorkdirMount *m = NULL;
        _cleanup_free_ char *host = NULL;
        const WorkdirMount *best = NULL;
        size_t n = 0, max;
        struct stat st;

        /* An image's root is known only when the sandbox starts. */
        if (!p->workdir || p->backend != SANDBOX_BACKEND_NS || p->image)
                return 0;
        max = ELEMENTSOF(fixed) + ELEMENTSOF(system) + 2 + p->n_tmpfs + p->n_binds;
        m = calloc(max, sizeof(*m));
        if (!m)
                return -ENOMEM;
        m[n++] = (WorkdirMount){"/", NULL};
        for (size_t i = 0; i < ELEMENTSOF(fixed); i++)
                m[n++] = (WorkdirMount){fixed[i], NULL};
        for (size_t i = 0; i < ELEMENTSOF(system); i++)
                m[n++] = (WorkdirMount){system[i], system[i]};
        if (p->workspace)
                m[n++] = (WorkdirMount){POLICY_SANDBOX_WORKSPACE, p->workspace};
        for (size_t i = 0; i < p->n_tmpfs; i++)
                if (!p->workspace || strcmp(p->tmpfs[i].path, POLICY_SANDBOX_WORKSPACE) != 0)
                        m[n++] = (WorkdirMount){p->tmpfs[i].path, NULL};
        for (size_t i = 0; i < p->n_binds; i++)
                m[n++] = (WorkdirMount){p->binds[i].target, p->binds[i].source};

        /* /proc, /dev and /run have contents of their own; a mount point
         * and its parents always exist. */
        if (path_is_below(p->workdir, "/proc") || path_is_below(p->workdir, "/dev") ||
            path_is_below(p->workdir, "/run"))
                return 0;
        for (size_t i = 0; i < n; i++)
                if (path_is_below(m[i].target, p->workdir))
                        return 0;
        /* The deepest mount at or above the working directory; the last of
         * equals (a later bind replaces an earlier one). */
        for (size_t i = 0; i < n; i++)
                if (path_is_below(p->workdir, m[i].target) &&
                    (!best || strlen(m[i].target) >= strlen(best->target)))
                        best = &m[i];
        if (best && best->source) {
                const char *rest =
                        p->workdir + (strcmp(best->target, "/") == 0 ? 0 : strlen(best->target));

                if (asprintf(&host, "%s%s", best->source, rest) < 0) {
                        host = NULL;
                        return -ENOMEM;
                }
                if (stat(host, &st) >= 0) {
                        if (S_ISDIR(st.st_mode))
                                return 0;
                        return hutch_error_set(reterr, ENOTDIR,
                                               "-w '%s': not a directory in the sandbox (it is "
                                               "the host's '%s')",
                                               p->workdir, host);
                }
                if (errno != ENOENT && errno != ENOTDIR)
                        return 0;
                return hutch_error_set(reterr, ENOENT,
                                       "-w '%s': no such directory in the sandbox (it would be "
                                       "the host's '%s')",
                                       p->workdir, host);
        }
        if (!best || strcmp(best->target, "/") == 0)
                return hutch_error_set(reterr, ENOENT,
                                       "-w '%s': no such directory in the sandbox (its root "
                                       "holds only the system directories and the mounts; see "
                                       "'Defaults' in docs/cli-run.md)",
                                       p->workdir);
        return hutch_error_set(reterr, ENOENT,
                               "-w '%s': no such directory in the sandbox (the tmpfs at '%s' "
                               "starts empty)",
                               p->workdir, best->target);
}
