/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "parse-util.h"
#include "policy/policy-internal.h"
#include "policy/policy.h"
#include "string-table.h"
#include "strv.h"

/* Error messages name where a value came from: " in -v '/a:b'" after the
 * value when there is a context, nothing when there is none (JSON). */
#define CTX_FMT "%s%s"
#define CTX_ARGS(ctx) (ctx) ? " in " : "", (ctx) ? (ctx) : ""

#define HOSTNAME_MAX 63

static const char *const workspace_mode_table[_WORKSPACE_MODE_MAX] = {
        [WORKSPACE_MODE_MOUNT] = "mount",
        [WORKSPACE_MODE_COPY] = "copy",
        [WORKSPACE_MODE_OVERLAY] = "overlay",
};

static const char *const backend_table[_SANDBOX_BACKEND_MAX] = {
        [SANDBOX_BACKEND_NS] = "ns",
        [SANDBOX_BACKEND_VM] = "vm",
};

static const char *const vm_accel_table[_VM_ACCEL_MAX] = {
        [VM_ACCEL_KVM] = "kvm",
        [VM_ACCEL_TCG] = "tcg",
};

DEFINE_STRING_TABLE_LOOKUP(sandbox_backend, SandboxBackend, backend_table);

DEFINE_STRING_TABLE_LOOKUP(vm_accel, VmAccel, vm_accel_table);

static const char *const network_mode_table[_NETWORK_MODE_MAX] = {
        [NETWORK_MODE_NONE] = "none",
        [NETWORK_MODE_ALLOW] = "allow",
};

DEFINE_STRING_TABLE_LOOKUP(workspace_mode, WorkspaceMode, workspace_mode_table);

DEFINE_STRING_TABLE_LOOKUP(network_mode, NetworkMode, network_mode_table);

Policy *policy_new(void) {
        _cleanup_(policy_freep) Policy *p = NULL;

        p = calloc(1, sizeof(Policy));
        if (!p)
                return NULL;
        p->workspace_mode = WORKSPACE_MODE_MOUNT;
        p->network = NETWORK_MODE_NONE;
        p->hostname = strdup(POLICY_DEFAULT_HOSTNAME);
        if (!p->hostname)
                return NULL;
        p->memory_max = POLICY_DEFAULT_MEMORY;
        p->pids_max = POLICY_DEFAULT_PIDS;
        return TAKE_PTR(p);
}

Policy *policy_free(Policy *p) {
        if (!p)
                return NULL;
        free(p->workspace);
        for (size_t i = 0; i < p->n_binds; i++) {
                free(p->binds[i].source);
                free(p->binds[i].target);
        }
        free(p->binds);
        for (size_t i = 0; i < p->n_tmpfs; i++)
                free(p->tmpfs[i].path);
        free(p->tmpfs);
        strv_free(p->env);
        strv_free(p->env_pass);
        strv_free(p->allow_hosts);
        strv_free(p->deny_hosts);
        strv_free(p->allow_private);
        strv_free(p->resolve);
        free(p->audit_log);
        for (size_t i = 0; i < p->n_secrets; i++)
                policy_secret_done(&p->secrets[i]);
        free(p->secrets);
        strv_free(p->upstream_ca);
        free(p->workdir);
        free(p->hostname);
        free(p->vm_kernel);
        free(p->image);
        strv_free(p->ports);
        free(p->user);
        free(p);
        return NULL;
}

/* Collapses repeated slashes and drops a trailing one (except for "/"), in
 * place, so "/data//x/" and "/data/x" name the same target. */
static void path_simplify_slashes(char *path) {
        char *w = path;

        for (const char *r = path; *r; r++) {
                if (*r == '/' && w > path && w[-1] == '/')
                        continue;
                *w++ = *r;
        }
        if (w > path + 1 && w[-1] == '/')
                w--;
        *w = '\0';
}

/* Returns true if @path is @prefix or below it. Both are simplified. */
static bool path_is_at_or_below(const char *path, const char *prefix) {
        size_t n = strlen(prefix);

        if (strcmp(prefix, "/") == 0)
                return true;
        return strncmp(path, prefix, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* Makes @path absolute against the current directory, lexically: "."
 * components and repeated slashes are dropped, ".." is kept (resolving it
 * lexically would be wrong across symlinks). Then, if the path exists, it
 * is replaced by its canonical form. */
int policy_path_make_absolute(const char *path, char **ret) {
        _cleanup_free_ char *joined = NULL, *cwd = NULL, *canonical = NULL;
        char *w;

        if (path[0] == '/') {
                joined = strdup(path);
                if (!joined)
                        return -ENOMEM;
        } else {
                cwd = getcwd(NULL, 0);
                if (!cwd)
                        return negative_errno();
                /* getcwd() returns "(unreachable)/..." for a directory
                 * outside our root (old glibc); that is not a path. */
                if (cwd[0] != '/')
                        return -ENOENT;
                if (asprintf(&joined, "%s/%s", cwd, path) < 0)
                        return -ENOMEM;
        }

        /* Drop "." components: "/a/./b" and "/a/." become "/a/b" and "/a". */
        w = joined;
        for (const char *r = joined; *r;) {
                if (r[0] == '/' && r[1] == '.' && (r[2] == '/' || r[2] == '\0')) {
                        r += 2;
                        continue;
                }
                *w++ = *r++;
        }
        *w = '\0';
        if (joined[0] == '\0') {
                joined[0] = '/';
                joined[1] = '\0';
        }
        path_simplify_slashes(joined);

        canonical = realpath(joined, NULL);
        if (canonical)
                *ret = TAKE_PTR(canonical);
        else
                *ret = TAKE_PTR(joined);
        return 0;
}

int policy_set_workspace_path(Policy *p, const char *path, WorkspaceMode mode, const char *ctx,
                              HutchError *reterr) {
        _cleanup_free_ char *abs = NULL;
        int r;

        if (!p || mode < 0 || mode >= _WORKSPACE_MODE_MAX)
                return -EINVAL;
        if (!path || path[0] == '\0')
                return hutch_error_set(reterr, EINVAL, "workspace directory" CTX_FMT " is empty",
                                       CTX_ARGS(ctx));
        r = policy_path_make_absolute(path, &abs);
        if (r < 0)
                return hutch_error_set(reterr, -r,
                                       "cannot make workspace '%s'" CTX_FMT " absolute: %s", path,
                                       CTX_ARGS(ctx), strerror(-r));
        free(p->workspace);
        p->workspace = TAKE_PTR(abs);
        p->workspace_mode = mode;
        return 0;
}

int policy_set_workspace_spec_ctx(Policy *p, const char *spec, const char *ctx,
                                  HutchError *reterr) {
        _cleanup_free_ char *dir = NULL;
        WorkspaceMode mode;
        const char *colon;

        if (!p || !spec)
                return -EINVAL;
        mode = p->workspace_mode;
        /* Split on the last ':' only when a known mode follows, so a path
         * that contains ':' still works when no mode is given. */
        colon = strrchr(spec, ':');
        if (colon && workspace_mode_from_string(colon + 1) >= 0) {
                mode = workspace_mode_from_string(colon + 1);
                dir = strndup(spec, (size_t)(colon - spec));
        } else
                dir = strdup(spec);
        if (!dir)
                return -ENOMEM;
        return policy_set_workspace_path(p, dir, mode, ctx, reterr);
}

int policy_set_workspace_spec(Policy *p, const char *spec, HutchError *reterr) {
        _cleanup_free_ char *ctx = NULL;

        if (!spec)
                return -EINVAL;
        if (asprintf(&ctx, "--workspace '%s'", spec) < 0)
                return -ENOMEM;
        return policy_set_workspace_spec_ctx(p, spec, ctx, reterr);
}

int policy_check_target(const char *target, bool is_tmpfs, const char *ctx, HutchError *reterr) {
        /* SECURITY: these paths are the sandbox's own mounts. A bind or tmpfs
         * over them would replace hutch's fresh /proc and minimal /dev (and
         * with them the masking of host state), or hide the read-only system
         * directories under something writable. Binds below them are refused
         * too: the mount point would have to be created in a read-only host
         * directory, or would shadow part of it. */
        static const struct {
                const char *path;
                const char *why;
        } reserved[] = {
                {"/proc", "'/proc' is mounted by hutch"},
                {"/dev", "'/dev' is set up by hutch"},
                {"/usr", "'/usr' is a read-only host system directory"},
                {"/bin", "'/bin' is a read-only host system directory"},
                {"/sbin", "'/sbin' is a read-only host system directory"},
                {"/lib", "'/lib' is a read-only host system directory"},
                {"/lib32", "'/lib32' is a read-only host system directory"},
                {"/lib64", "'/lib64' is a read-only host system directory"},
                {"/libx32", "'/libx32' is a read-only host system directory"},
                {"/etc", "'/etc' is a read-only host system directory"},
        };
        const char *kind = is_tmpfs ? "tmpfs" : "bind";
        _cleanup_free_ char *simple = NULL;

        if (!target || target[0] != '/')
                return hutch_error_set(reterr, EINVAL,
                                       "%s target '%s'" CTX_FMT " must be an absolute path", kind,
                                       target ? target : "", CTX_ARGS(ctx));
        if (!path_is_safe_absolute(target))
                return hutch_error_set(reterr, EINVAL,
                                       "%s target '%s'" CTX_FMT
                                       " must not contain '.' or '..' components",
                                       kind, target, CTX_ARGS(ctx));
        if (strlen(target) >= PATH_MAX) /* the message leaves out @ctx, which holds it */
                return hutch_error_set(reterr, EINVAL, "%s target is longer than %d bytes", kind,
                                       PATH_MAX - 1);

        simple = strdup(target);
        if (!simple)
                return -ENOMEM;
        path_simplify_slashes(simple);
        if (strcmp(simple, "/") == 0)
                return hutch_error_set(reterr, EINVAL,
                                       "%s target '%s'" CTX_FMT
                                       " is reserved: it would replace the sandbox root",
                                       kind, target, CTX_ARGS(ctx));
        /* A tmpfs may replace the default /dev/shm (to change its size). */
        if (is_tmpfs && strcmp(simple, "/dev/shm") == 0)
                return 0;
        for (size_t i = 0; i < ELEMENTSOF(reserved); i++)
                if (path_is_at_or_below(simple, reserved[i].path))
                        return hutch_error_set(reterr, EINVAL,
                                               "%s target '%s'" CTX_FMT " is reserved: %s", kind,
                                               target, CTX_ARGS(ctx), reserved[i].why);
        return 0;
}

int policy_add_bind(Policy *p, const char *source, const char *target, bool read_only,
                    const char *ctx, HutchError *reterr) {
        _cleanup_free_ char *abs = NULL, *simple = NULL;
        BindMount *b;
        int r;

        if (!p)
                return -EINVAL;
        if (!source || source[0] == '\0')
                return hutch_error_set(reterr, EINVAL, "bind source" CTX_FMT " is empty",
                                       CTX_ARGS(ctx));
        r = policy_check_target(target, false, ctx, reterr);
        if (r < 0)
                return r;
        r = policy_path_make_absolute(source, &abs);
        if (r < 0)
                return hutch_error_set(reterr, -r,
                                       "cannot make bind source '%s'" CTX_FMT " absolute: %s",
                                       source, CTX_ARGS(ctx), strerror(-r));
        simple = strdup(target);
        if (!simple)
                return -ENOMEM;
        path_simplify_slashes(simple);

        for (size_t i = 0; i < p->n_binds; i++)
                if (strcmp(p->binds[i].target, simple) == 0) {
                        free(p->binds[i].source);
                        free(p->binds[i].target);
                        p->binds[i] = (BindMount){
                                .source = TAKE_PTR(abs),
                                .target = TAKE_PTR(simple),
                                .read_only = read_only,
                        };
                        return 0;
                }
        if (p->n_binds >= POLICY_MAX_BINDS)
                return hutch_error_set(reterr, E2BIG, "too many binds" CTX_FMT " (at most %d)",
                                       CTX_ARGS(ctx), POLICY_MAX_BINDS);
        b = reallocarray(p->binds, p->n_binds + 1, sizeof(BindMount));
        if (!b)
                return -ENOMEM;
        p->binds = b;
        p->binds[p->n_binds++] = (BindMount){
                .source = TAKE_PTR(abs),
                .target = TAKE_PTR(simple),
                .read_only = read_only,
        };
        return 0;
}

int policy_add_bind_spec(Policy *p, const char *spec, HutchError *reterr) {
        _cleanup_free_ char *ctx = NULL, *copy = NULL;
        bool read_only = false;
        char *colon;

        if (!p || !spec)
                return -EINVAL;
        if (asprintf(&ctx, "-v '%s'", spec) < 0)
                return -ENOMEM;
        copy = strdup(spec);
        if (!copy)
                return -ENOMEM;

        colon = strrchr(copy, ':');
        if (colon && (strcmp(colon + 1, "ro") == 0 || strcmp(colon + 1, "rw") == 0)) {
                read_only = strcmp(colon + 1, "ro") == 0;
                *colon = '\0';
                colon = strrchr(copy, ':');
        } else if (colon && colon[1] != '/') {
                /* "HOST:/target:rx": an option that is neither ro nor rw, rather
                 * than a relative target. */
                char *prev;

                *colon = '\0';
                prev = strrchr(copy, ':');
                *colon = ':';
                if (prev && prev[1] == '/')
                        return hutch_error_set(reterr, EINVAL,
                                               "unknown bind option '%s' in %s (expected 'ro' or "
                                               "'rw')",
                                               colon + 1, ctx);
        }
        if (!colon)
                return hutch_error_set(reterr, EINVAL, "%s must be HOST:SANDBOX[:ro|:rw]", ctx);
        *colon = '\0';
        if (copy[0] == '\0')
                return hutch_error_set(reterr, EINVAL, "empty host path in %s", ctx);
        return policy_add_bind(p, copy, colon + 1, read_only, ctx, reterr);
}

int policy_check_tmpfs_size(uint64_t size, const char *text, const char *ctx, HutchError *reterr) {
        if (size < POLICY_MIN_TMPFS_SIZE)
                return hutch_error_set(reterr, EINVAL,
                                       "tmpfs size '%s'" CTX_FMT " is below the minimum 4k", text,
                                       CTX_ARGS(ctx));
        return 0;
}

int policy_add_tmpfs(Policy *p, const char *path, uint64_t size, const char *ctx,
                     HutchError *reterr) {
        _cleanup_free_ char *simple = NULL;
        TmpfsMount *t;
        int r;

        if (!p)
                return -EINVAL;
        r = policy_check_target(path, true, ctx, reterr);
        if (r < 0)
                return r;
        if (size < POLICY_MIN_TMPFS_SIZE) {
                char text[32];

                (void)snprintf(text, sizeof(text), "%llu", (unsigned long long)size);
                return policy_check_tmpfs_size(size, text, ctx, reterr);
        }
        simple = strdup(path);
        if (!simple)
                return -ENOMEM;
        path_simplify_slashes(simple);

        for (size_t i = 0; i < p->n_tmpfs; i++)
                if (strcmp(p->tmpfs[i].path, simple) == 0) {
                        p->tmpfs[i].size = size;
                        return 0;
                }
        if (p->n_tmpfs >= POLICY_MAX_TMPFS)
                return hutch_error_set(reterr, E2BIG,
                                       "too many tmpfs mounts" CTX_FMT " (at most %d)",
                                       CTX_ARGS(ctx), POLICY_MAX_TMPFS);
        t = reallocarray(p->tmpfs, p->n_tmpfs + 1, sizeof(TmpfsMount));
        if (!t)
                return -ENOMEM;
        p->tmpfs = t;
        p->tmpfs[p->n_tmpfs++] = (TmpfsMount){.path = TAKE_PTR(simple), .size = size};
        return 0;
}

int policy_add_tmpfs_spec(Policy *p, const char *spec, HutchError *reterr) {
        _cleanup_free_ char *ctx = NULL, *path = NULL;
        uint64_t size = POLICY_DEFAULT_TMP_SIZE;
        const char *colon;
        int r;

        if (!p || !spec)
                return -EINVAL;
        if (asprintf(&ctx, "--tmpfs '%s'", spec) < 0)
                return -ENOMEM;
        colon = strchr(spec, ':');
        path = colon ? strndup(spec, (size_t)(colon - spec)) : strdup(spec);
        if (!path)
                return -ENOMEM;
        /* Check the path before the options, so a relative path is named
         * as such even when an option is also wrong. */
        r = policy_check_target(path, true, ctx, reterr);
        if (r < 0)
                return r;

        for (const char *o = colon ? colon + 1 : NULL; o;) {
                const char *comma = strchr(o, ',');
                size_t n = comma ? (size_t)(comma - o) : strlen(o);
                _cleanup_free_ char *opt = NULL;

                opt = strndup(o, n);
                if (!opt)
                        return -ENOMEM;
                if (opt[0] == '\0')
                        return hutch_error_set(reterr, EINVAL, "empty option in %s", ctx);
                if (strncmp(opt, "size=", 5) != 0)
                        return hutch_error_set(reterr, EINVAL,
                                               "unknown option '%s' in %s (only 'size=N' is "
                                               "supported)",
                                               opt, ctx);
                r = parse_size(opt + 5, &size);
                if (r < 0)
                        return hutch_error_set(reterr, EINVAL, "invalid size '%s' in %s", opt + 5,
                                               ctx);
                r = policy_check_tmpfs_size(size, opt + 5, ctx, reterr);
                if (r < 0)
                        return r;
                o = comma ? comma + 1 : NULL;
        }
        return policy_add_tmpfs(p, path, size, ctx, reterr);
}

static size_t policy_env_count(const Policy *p) {
        return strv_length(p->env) + strv_length(p->env_pass);
}

int policy_add_env(Policy *p, const char *key, const char *value, const char *ctx,
                   HutchError *reterr) {
        bool exists;

        if (!p)
                return -EINVAL;
        if (!env_name_is_valid(key))
                return hutch_error_set(reterr, EINVAL,
                                       "invalid environment variable name '%s'" CTX_FMT
                                       " (expected [A-Za-z_][A-Za-z0-9_]*)",
                                       key ? key : "", CTX_ARGS(ctx));
        /* Replacing (or repeating) an entry takes no new slot. */
        exists = value ? strv_env_get(p->env, key) != NULL : strv_contains(p->env_pass, key);
        if (!exists && policy_env_count(p) >= POLICY_MAX_ENV)
                return hutch_error_set(reterr, E2BIG,
                                       "too many environment variables" CTX_FMT " (at most %d)",
                                       CTX_ARGS(ctx), POLICY_MAX_ENV);
        if (value)
                return strv_env_set(&p->env, key, value);
        if (exists)
                return 0;
        return strv_extend(&p->env_pass, key);
}

int policy_add_env_spec(Policy *p, const char *spec, HutchError *reterr) {
        _cleanup_free_ char *ctx = NULL, *key = NULL;
        const char *eq;

        if (!p || !spec)
                return -EINVAL;
        if (asprintf(&ctx, "-e '%s'", spec) < 0)
                return -ENOMEM;
        eq = strchr(spec, '=');
        key = eq ? strndup(spec, (size_t)(eq - spec)) : strdup(spec);
        if (!key)
                return -ENOMEM;
        return policy_add_env(p, key, eq ? eq + 1 : NULL, ctx, reterr);
}

static bool hostname_is_valid(const char *s) {
        size_t n;

        if (!s)
                return false;
        n = strlen(s);
        if (n == 0 || n > HOSTNAME_MAX || s[0] == '-' || s[n - 1] == '-')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
                      (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
                        return false;
        return true;
}

static int hostname_error(HutchError *reterr, const char *hostname) {
        return hutch_error_set(reterr, EINVAL,
                               "invalid hostname '%s' (1-63 characters of A-Z, a-z, 0-9 and '-', "
                               "not starting or ending with '-')",
                               hostname ? hostname : "");
}

int policy_set_hostname(Policy *p, const char *hostname, HutchError *reterr) {
        char *copy;

        if (!p)
                return -EINVAL;
        if (!hostname_is_valid(hostname))
                return hostname_error(reterr, hostname);
        copy = strdup(hostname);
        if (!copy)
                return -ENOMEM;
        free(p->hostname);
        p->hostname = copy;
        return 0;
}

static int workdir_check(const char *workdir, HutchError *reterr) {
        if (!path_is_safe_absolute(workdir) || strlen(workdir) >= PATH_MAX)
                return hutch_error_set(reterr, EINVAL,
                                       "workdir '%s' must be an absolute path without '.' or '..' "
                                       "components",
                                       workdir ? workdir : "");
        return 0;
}

int policy_set_workdir(Policy *p, const char *workdir, HutchError *reterr) {
        char *copy;
        int r;

        if (!p)
                return -EINVAL;
        r = workdir_check(workdir, reterr);
        if (r < 0)
                return r;
        copy = strdup(workdir);
        if (!copy)
                return -ENOMEM;
        path_simplify_slashes(copy);
        free(p->workdir);
        p->workdir = copy;
        return 0;
}

int policy_set_network(Policy *p, const char *mode, HutchError *reterr) {
        NetworkMode m;

        if (!p)
                return -EINVAL;
        m = network_mode_from_string(mode);
        if (m < 0)
                return hutch_error_set(reterr, EINVAL,
                                       "unsupported network mode '%s' (expected 'none' or 'allow')",
                                       mode ? mode : "");
        p->network = m;
        p->network_set = true;
        return 0;
}

int policy_set_backend(Policy *p, const char *backend, HutchError *reterr) {
        SandboxBackend b;

        if (!p)
                return -EINVAL;
        b = sandbox_backend_from_string(backend);
        if (b < 0)
                return hutch_error_set(reterr, EINVAL,
                                       "unsupported backend '%s' (expected 'ns' or 'vm')",
                                       backend ? backend : "");
        p->backend = b;
        return 0;
}

int policy_set_vm_accel(Policy *p, const char *accel, HutchError *reterr) {
        VmAccel a;

        if (!p)
                return -EINVAL;
        a = vm_accel_from_string(accel);
        if (a < 0)
                return hutch_error_set(reterr, EINVAL,
                                       "unsupported VM accelerator '%s' (expected 'kvm' or 'tcg')",
                                       accel ? accel : "");
        p->vm_accel = a;
        return 0;
}

int policy_set_vm_kernel(Policy *p, const char *path, HutchError *reterr) {
        char *abs = NULL;
        int r;

        if (!p)
                return -EINVAL;
        if (!path || path[0] == '\0')
                return hutch_error_set(reterr, EINVAL, "the VM kernel path must not be empty");
        r = policy_path_make_absolute(path, &abs);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot make '%s' absolute: %s", path,
                                       strerror(-r));
        free(p->vm_kernel);
        p->vm_kernel = abs;
        return 0;
}

static bool image_name_is_valid(const char *s) {
        size_t n = s ? strlen(s) : 0;

        if (n == 0 || n > 255 || s[0] == '-' || s[0] == '.')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-:/@",
                            s[i]))
                        return false;
        return true;
}

int policy_set_image(Policy *p, const char *image, HutchError *reterr) {
        char *copy;

        if (!p)
                return -EINVAL;
        if (!image_name_is_valid(image))
                return hutch_error_set(reterr, EINVAL,
                                       "invalid image name '%s' (1-255 characters of A-Z, a-z, "
                                       "0-9 and '._-:/@', not starting with '-' or '.')",
                                       image ? image : "");
        copy = strdup(image);
        if (!copy)
                return -ENOMEM;
        free(p->image);
        p->image = copy;
        return 0;
}

static bool user_part_is_valid(const char *s, size_t n) {
        if (n == 0 || n > 63 || s[0] == '-')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-$",
                            s[i]))
                        return false;
        return true;
}

bool user_spec_is_valid(const char *spec) {
        const char *colon;

        if (!spec)
                return false;
        colon = strchr(spec, ':');
        if (!colon)
                return user_part_is_valid(spec, strlen(spec));
        return user_part_is_valid(spec, (size_t)(colon - spec)) &&
               user_part_is_valid(colon + 1, strlen(colon + 1));
}

int policy_set_user(Policy *p, const char *user, HutchError *reterr) {
        char *copy;

        if (!p)
                return -EINVAL;
        if (!user_spec_is_valid(user))
                return hutch_error_set(reterr, EINVAL,
                                       "invalid user '%s' (want NAME, UID, NAME:GROUP or UID:GID)",
                                       user ? user : "");
        copy = strdup(user);
        if (!copy)
                return -ENOMEM;
        free(p->user);
        p->user = copy;
        return 0;
}

static int validate_vm(const Policy *p, HutchError *reterr) {
        struct stat st;

        if (p->backend < 0 || p->backend >= _SANDBOX_BACKEND_MAX)
                return hutch_error_set(reterr, EINVAL, "invalid backend %d", (int)p->backend);
        if (p->vm_accel < 0 || p->vm_accel >= _VM_ACCEL_MAX)
                return hutch_error_set(reterr, EINVAL, "invalid VM accelerator %d",
                                       (int)p->vm_accel);
        if (p->image && !image_name_is_valid(p->image))
                return hutch_error_set(reterr, EINVAL, "invalid image name '%s'", p->image);
        if (p->user && !user_spec_is_valid(p->user))
                return hutch_error_set(reterr, EINVAL, "invalid user '%s'", p->user);
        if (p->backend != SANDBOX_BACKEND_VM || !p->vm_kernel)
                return 0;
        if (stat(p->vm_kernel, &st) < 0)
                return hutch_error_set(reterr, errno, "VM kernel '%s': %m", p->vm_kernel);
        if (!S_ISREG(st.st_mode))
                return hutch_error_set(reterr, EINVAL, "VM kernel '%s' is not a regular file",
                                       p->vm_kernel);
        return 0;
}

static int validate_workspace(const Policy *p, HutchError *reterr) {
        _cleanup_free_ char *canonical = NULL;
        struct stat st;

        if (p->workspace_mode < 0 || p->workspace_mode >= _WORKSPACE_MODE_MAX)
                return hutch_error_set(reterr, EINVAL, "invalid workspace mode %d",
                                       (int)p->workspace_mode);
        if (!p->workspace)
                return 0;
        if (p->workspace[0] != '/')
                return hutch_error_set(reterr, EINVAL, "workspace '%s' is not an absolute path",
                                       p->workspace);
        if (stat(p->workspace, &st) < 0) {
                int r = negative_errno();

                if (r == -ENOENT) {
                        /* The spec parser treats "DIR:ro" as a path, since ':'
                         * is valid in names; say so when that is the likely cause. */
                        if (strchr(p->workspace, ':'))
                                return hutch_error_set(reterr, ENOENT,
                                                       "workspace '%s' does not exist (the "
                                                       "workspace modes are 'mount', 'copy' "
                                                       "and 'overlay')",
                                                       p->workspace);
                        return hutch_error_set(reterr, ENOENT, "workspace '%s' does not exist",
                                               p->workspace);
                }
                return hutch_error_set(reterr, -r, "cannot access workspace '%s': %s", p->workspace,
                                       strerror(-r));
        }
        if (!S_ISDIR(st.st_mode))
                return hutch_error_set(reterr, ENOTDIR, "workspace '%s' is not a directory",
                                       p->workspace);
        /* The setter canonicalises a path that exists; one that appeared (or
         * changed into a symlink) since then is refused rather than followed
         * to somewhere the user did not name. */
        canonical = realpath(p->workspace, NULL);
        if (!canonical) {
                int r = negative_errno();

                return hutch_error_set(reterr, -r, "cannot resolve workspace '%s': %s",
                                       p->workspace, strerror(-r));
        }
        if (strcmp(canonical, p->workspace) != 0)
                return hutch_error_set(reterr, EINVAL,
                                       "workspace '%s' is not a canonical path (it resolves to "
                                       "'%s')",
                                       p->workspace, canonical);
        return 0;
}

/* Checks one mount target against the other mounts and the workspace. */
static int validate_target_unique(const Policy *p, const char *kind, const char *target,
                                  size_t self_bind, size_t self_tmpfs, HutchError *reterr) {
        _cleanup_free_ char *simple = NULL;

        simple = strdup(target);
        if (!simple)
                return -ENOMEM;
        path_simplify_slashes(simple);
        if (p->workspace && path_is_at_or_below(simple, POLICY_SANDBOX_WORKSPACE)) {
                /* SECURITY: a mounted workspace is the user's real folder: a
                 * mount below it would create its mount point there, on the
                 * host. A copied one is a tmpfs: mounts below it are fine, and
                 * a tmpfs entry for /workspace itself sets that tmpfs's size.
                 * An overlay workspace creates mount points in its upper
                 * layer, never in the host folder (the lower layer), so it
                 * is treated as a copy. */
                if (p->workspace_mode != WORKSPACE_MODE_COPY &&
                    p->workspace_mode != WORKSPACE_MODE_OVERLAY)
                        return hutch_error_set(reterr, EINVAL,
                                               "%s target '%s' is inside the mounted workspace "
                                               "(" POLICY_SANDBOX_WORKSPACE
                                               "); use a copy or overlay workspace to mount "
                                               "below it",
                                               kind, target);
                if (strcmp(simple, POLICY_SANDBOX_WORKSPACE) == 0 && strcmp(kind, "tmpfs") != 0)
                        return hutch_error_set(reterr, EINVAL,
                                               "%s target '%s' would replace the workspace", kind,
                                               target);
        }
        for (size_t i = 0; i < p->n_binds; i++) {
                const BindMount *b = &p->binds[i];

                if (i == self_bind || !b->target)
                        continue;
                if (strcmp(b->target, simple) == 0)
                        return hutch_error_set(reterr, EINVAL,
                                               "%s target '%s' is also the target of the bind of "
                                               "'%s'",
                                               kind, target, b->source);
                /* SECURITY: as for a mounted workspace, a mount below a
                 * read-write bind would create its mount point in the host
                 * folder behind it (following whatever the sandbox left
                 * there on an earlier run). */
                if (!b->read_only && !p->read_only && path_is_at_or_below(simple, b->target))
                        return hutch_error_set(reterr, EINVAL,
                                               "%s target '%s' is inside the read-write bind of "
                                               "'%s' at '%s'; its mount point would be created "
                                               "in that host folder",
                                               kind, target, b->source, b->target);
        }
        for (size_t i = 0; i < p->n_tmpfs; i++)
                if (i != self_tmpfs && p->tmpfs[i].path && strcmp(p->tmpfs[i].path, simple) == 0)
                        return hutch_error_set(reterr, EINVAL,
                                               "%s target '%s' is also a tmpfs mount", kind,
                                               target);
        return 0;
}

static int validate_binds(const Policy *p, HutchError *reterr) {
        int r;

        for (size_t i = 0; i < p->n_binds; i++) {
                const BindMount *b = p->binds + i;
                struct stat st;

                r = policy_check_target(b->target, false, NULL, reterr);
                if (r < 0)
                        return r;
                r = validate_target_unique(p, "bind", b->target, i, SIZE_MAX, reterr);
                if (r < 0)
                        return r;
                if (!b->source || b->source[0] != '/')
                        return hutch_error_set(reterr, EINVAL,
                                               "bind source '%s' is not an absolute path",
                                               b->source ? b->source : "");
                if (stat(b->source, &st) < 0) {
                        r = negative_errno();
                        if (r == -ENOENT)
                                return hutch_error_set(reterr, ENOENT,
                                                       "bind source '%s' does not exist",
                                                       b->source);
                        return hutch_error_set(reterr, -r, "cannot access bind source '%s': %s",
                                               b->source, strerror(-r));
                }
        }
        return 0;
}

static int validate_tmpfs(const Policy *p, HutchError *reterr) {
        int r;

        for (size_t i = 0; i < p->n_tmpfs; i++) {
                const TmpfsMount *t = p->tmpfs + i;

                r = policy_check_target(t->path, true, NULL, reterr);
                if (r < 0)
                        return r;
                r = validate_target_unique(p, "tmpfs", t->path, SIZE_MAX, i, reterr);
                if (r < 0)
                        return r;
                if (t->size < POLICY_MIN_TMPFS_SIZE)
                        return hutch_error_set(reterr, EINVAL,
                                               "tmpfs size %llu of '%s' is below the minimum 4k",
                                               (unsigned long long)t->size, t->path);
        }
        return 0;
}

static int validate_env(const Policy *p, HutchError *reterr) {
        STRV_FOREACH(e, p->env) {
                const char *eq = strchr(*e, '=');
                _cleanup_free_ char *key = NULL;

                if (!eq)
                        return hutch_error_set(reterr, EINVAL,
                                               "environment entry '%s' is not KEY=VALUE", *e);
                key = strndup(*e, (size_t)(eq - *e));
                if (!key)
                        return -ENOMEM;
                if (!env_name_is_valid(key))
                        return hutch_error_set(reterr, EINVAL,
                                               "invalid environment variable name '%s'", key);
        }
        STRV_FOREACH(e, p->env_pass)
                if (!env_name_is_valid(*e))
                        return hutch_error_set(reterr, EINVAL,
                                               "invalid environment variable name '%s'", *e);
        return 0;
}

/* The caps come first: every later check walks the arrays. */
static int validate_caps(const Policy *p, HutchError *reterr) {
        if (p->n_binds > POLICY_MAX_BINDS)
                return hutch_error_set(reterr, E2BIG, "too many binds: %zu (at most %d)",
                                       p->n_binds, POLICY_MAX_BINDS);
        if (p->n_tmpfs > POLICY_MAX_TMPFS)
                return hutch_error_set(reterr, E2BIG, "too many tmpfs mounts: %zu (at most %d)",
                                       p->n_tmpfs, POLICY_MAX_TMPFS);
        if (policy_env_count(p) > POLICY_MAX_ENV)
                return hutch_error_set(reterr, E2BIG,
                                       "too many environment variables: %zu (at most %d)",
                                       policy_env_count(p), POLICY_MAX_ENV);
        return 0;
}

int policy_validate(const Policy *p, HutchError *reterr) {
        int r;

        if (!p)
                return -EINVAL;
        r = validate_caps(p, reterr);
        if (r < 0)
                return r;
        r = validate_workspace(p, reterr);
        if (r < 0)
                return r;
        r = validate_binds(p, reterr);
        if (r < 0)
                return r;
        r = validate_tmpfs(p, reterr);
        if (r < 0)
                return r;
        r = validate_env(p, reterr);
        if (r < 0)
                return r;
        if (p->workdir) {
                r = workdir_check(p->workdir, reterr);
                if (r < 0)
                        return r;
        }
        if (!hostname_is_valid(p->hostname))
                return hostname_error(reterr, p->hostname);
        if (p->network < 0 || p->network >= _NETWORK_MODE_MAX)
                return hutch_error_set(reterr, EINVAL, "invalid network mode %d", (int)p->network);
        r = policy_validate_network(p, reterr);
        if (r < 0)
                return r;
        r = policy_validate_secrets(p, reterr);
        if (r < 0)
                return r;
        r = validate_vm(p, reterr);
        if (r < 0)
                return r;
        r = policy_validate_ports(p, reterr);
        if (r < 0)
                return r;
        return policy_validate_limits(p, reterr);
}
