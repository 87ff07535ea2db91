/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "ns/userns.h"
#include "parse-util.h"

/* Parses the u32 in the @n bytes at @p: 0, or -EINVAL. */
static int subid_parse_u32(const char *p, size_t n, uint32_t *ret) {
        _cleanup_free_ char *s = strndup(p, n);

        if (!s)
                return -ENOMEM;
        return safe_atou32(s, ret) < 0 ? -EINVAL : 0;
}

int subid_find_range(const char *text, const char *user, uid_t uid, uint32_t min_count,
                     uint32_t *ret_base) {
        char uidbuf[16];

        (void)snprintf(uidbuf, sizeof(uidbuf), "%u", (unsigned)uid);
        for (const char *line = text; line && *line;) {
                const char *end = strchrnul(line, '\n'), *c1, *c2;
                size_t len = (size_t)(end - line), k;
                uint32_t s, c;
                int r;

                if (len == 0 || line[0] == '#')
                        goto next;
                /* Only the lines of @user are read: any other line may
                 * hold anything (issue 24). */
                k = strcspn(line, ":\n");
                if (!((k == strlen(user) && strncmp(line, user, k) == 0) ||
                      (k == strlen(uidbuf) && strncmp(line, uidbuf, k) == 0)))
                        goto next;
                c1 = line + k;
                c2 = *c1 == ':' ? memchr(c1 + 1, ':', (size_t)(end - c1 - 1)) : NULL;
                if (!c2 || memchr(c2 + 1, ':', (size_t)(end - c2 - 1)))
                        return -EINVAL;
                r = subid_parse_u32(c1 + 1, (size_t)(c2 - c1 - 1), &s);
                if (r < 0)
                        return r;
                r = subid_parse_u32(c2 + 1, (size_t)(end - c2 - 1), &c);
                if (r < 0)
                        return r;
                if ((uint64_t)s + c > UINT32_MAX)
                        return -ERANGE;
                if (c >= min_count) {
                        *ret_base = s;
                        return 1;
                }
        next:
                line = *end ? end + 1 : NULL;
        }
        return 0;
}

static int subid_lookup(const char *path, const char *user, uid_t uid, uint32_t *ret_base,
                        bool *ret_found) {
        _cleanup_free_ char *text = NULL;
        int r;

        r = read_full_file(path, 1U << 20, &text);
        if (r == -ENOENT) {
                *ret_found = false;
                return 0;
        }
        if (r < 0)
                return r;
        r = subid_find_range(text, user, uid, USERNS_RANGE_SIZE, ret_base);
        if (r < 0)
                return r;
        *ret_found = r > 0;
        return 0;
}

int idmapping_for_caller(const char *subuid_path, const char *subgid_path, IdMapping *ret) {
        IdMapping m = {
                .caller_uid = geteuid(),
                .caller_gid = getegid(),
        };
        const char *name = "root";
        bool found_u = false, found_g = false;
        uint32_t ubase = 0, gbase = 0;
        int r;

        if (m.caller_uid != 0) {
                m.uid_base = (uint32_t)m.caller_uid;
                m.gid_base = (uint32_t)m.caller_gid;
                m.count = 1;
                (void)snprintf(m.uid_source, sizeof(m.uid_source), "caller");
                *ret = m;
                return 0;
        }

        r = subid_lookup(subuid_path ?: "/etc/subuid", name, 0, &ubase, &found_u);
        if (r < 0)
                return r;
        r = subid_lookup(subgid_path ?: "/etc/subgid", name, 0, &gbase, &found_g);
        if (r < 0)
                return r;

        m.privileged = true;
        m.count = USERNS_RANGE_SIZE;
        m.uid_base = found_u ? ubase : USERNS_DEFAULT_BASE;
        m.gid_base = found_g ? gbase : USERNS_DEFAULT_BASE;
        (void)snprintf(m.uid_source, sizeof(m.uid_source), "%s",
                       found_u ? (subuid_path ?: "/etc/subuid") : "default");
        /* SECURITY: a sub-id range that contains host id 0 would make the
         * sandbox's root the host's root. */
        if (m.uid_base == 0 || m.gid_base == 0)
                return -EINVAL;
        *ret = m;
        return 0;
}

int passwd_name_of(const char *passwd_path, uid_t uid, char **ret) {
        _cleanup_free_ char *text = NULL;
        char uidbuf[16];
        int r;

        r = read_full_file(passwd_path ?: "/etc/passwd", 16U << 20, &text);
        if (r < 0)
                return r;
        (void)snprintf(uidbuf, sizeof(uidbuf), "%u", (unsigned)uid);
        for (const char *line = text; line && *line;) {
                const char *end = strchrnul(line, '\n'), *f = line;
                size_t nlen = strcspn(line, ":\n");

                /* NAME:PASSWORD:UID:...; other lines may hold anything. */
                for (int i = 0; i < 2 && f < end; i++) {
                        f = memchr(f, ':', (size_t)(end - f));
                        f = f ? f + 1 : end;
                }
                if (nlen > 0 && line[0] != '#' && f < end && (size_t)(end - f) > strlen(uidbuf) &&
                    strncmp(f, uidbuf, strlen(uidbuf)) == 0 && f[strlen(uidbuf)] == ':') {
                        char *name = strndup(line, nlen);

                        if (!name)
                                return -ENOMEM;
                        *ret = name;
                        return 0;
                }
                line = *end ? end + 1 : NULL;
        }
        return -ENOENT;
}

/* Is [@base, @base + @count) inside one extent of the map @path
 * ("/proc/self/uid_map": INSIDE OUTSIDE COUNT lines, as our own namespace
 * sees the ids)? In a container or under unshare the sub-ids of
 * /etc/subuid are often not mapped, and newuidmap then cannot map them.
 * Lines that do not parse are skipped. */
static bool range_mapped_here(const char *path, uint32_t base, uint32_t count) {
        _cleanup_free_ char *text = NULL;

        if (read_full_file(path, 1U << 16, &text) < 0)
                return false;
        for (char *line = text, *end; line && *line; line = end ? end + 1 : NULL) {
                unsigned long long in, out, n;

                end = strchr(line, '\n');
                if (end)
                        *end = 0;
                if (sscanf(line, "%llu %llu %llu", &in, &out, &n) != 3)
                        continue;
                if (base >= in && (unsigned long long)base + count <= in + n)
                        return true;
        }
        return false;
}

/* SECURITY: a range must hold neither host id 0 nor @own (the caller's
 * own id, which is mapped to 0 already; mapping it twice is refused by the
 * kernel, and it must not be a second sandbox id). */
static bool range_is_safe(uint32_t base, uint32_t own) {
        return base != 0 && !(own >= base && own - base < USERNS_RANGE_SIZE);
}

int idmapping_for_caller_ranged(const char *subuid_path, const char *subgid_path,
                                const char *helper_dir, IdMapping *ret) {
        const char *upath = subuid_path ?: "/etc/subuid", *gpath = subgid_path ?: "/etc/subgid";
        _cleanup_free_ char *nu = NULL, *ng = NULL, *pwname = NULL;
        const char *name;
        bool found_u = false, found_g = false;
        uint32_t ubase = 0, gbase = 0;
        IdMapping m;
        int r;

        r = idmapping_for_caller(subuid_path, subgid_path, &m);
        if (r < 0)
                return r;
        if (m.privileged) {
                *ret = m;
                return 0;
        }
        r = passwd_name_of(NULL, m.caller_uid, &pwname);
        if (r < 0 && r != -ENOENT)
                return r;
        name = pwname ?: "";
        r = subid_lookup(upath, name, m.caller_uid, &ubase, &found_u);
        if (r < 0)
                return r;
        r = subid_lookup(gpath, name, m.caller_uid, &gbase, &found_g);
        if (r < 0)
                return r;
#if HUTCH_TEST_HOOKS
        /* Tests point hutch at helpers of their own (one that refuses: the
         * fail-closed test). A helper the user wrote runs as the user and
         * maps nothing the kernel would not let the user map anyway. */
        if (!helper_dir)
                helper_dir = getenv("HUTCH_TEST_IDMAP_HELPERS");
#endif
        if (!found_u || !found_g) {
                (void)snprintf(m.no_range, sizeof(m.no_range),
                               "no range of %u sub-ids for '%s' in %s: installing packages as "
                               "another user (apt's _apt) fails in the sandbox; add one with "
                               "'usermod --add-subuids 100000-165535 --add-subgids 100000-165535 "
                               "%s'",
                               (unsigned)USERNS_RANGE_SIZE, pwname ? name : "(no name)",
                               !found_u ? upath : gpath, pwname ? name : "USER");
                *ret = m;
                return 0;
        }
        if (!range_is_safe(ubase, (uint32_t)m.caller_uid) ||
            !range_is_safe(gbase, (uint32_t)m.caller_gid))
                return -ERANGE;
        /* Under no_new_privs (a container's runtime, a seccomp wrapper) the
         * setuid helpers run without their privilege and fail. */
        if (prctl(PR_GET_NO_NEW_PRIVS, 0UL, 0UL, 0UL, 0UL) == 1) {
                (void)snprintf(m.no_range, sizeof(m.no_range),
                               "hutch runs with no_new_privs, so the setuid newuidmap cannot map "
                               "the sub-ids of '%s': installing packages as another user (apt's "
                               "_apt) fails in the sandbox",
                               name);
                *ret = m;
                return 0;
        }
        if (!range_mapped_here("/proc/self/uid_map", ubase, USERNS_RANGE_SIZE) ||
            !range_mapped_here("/proc/self/gid_map", gbase, USERNS_RANGE_SIZE)) {
                (void)snprintf(m.no_range, sizeof(m.no_range),
                               "the sub-ids of '%s' are not mapped where hutch runs (a container "
                               "or a user namespace): installing packages as another user (apt's "
                               "_apt) fails in the sandbox",
                               name);
                *ret = m;
                return 0;
        }
        if (asprintf(&nu, "%s/newuidmap", helper_dir ?: "/usr/bin") < 0 ||
            asprintf(&ng, "%s/newgidmap", helper_dir ?: "/usr/bin") < 0)
                return -ENOMEM;
        if (access(nu, X_OK) < 0 || access(ng, X_OK) < 0) {
                (void)snprintf(m.no_range, sizeof(m.no_range),
                               "%s is missing (package uidmap): the sub-ids of '%s' cannot be "
                               "mapped, installing packages as another user (apt's _apt) fails "
                               "in the sandbox",
                               access(nu, X_OK) < 0 ? nu : ng, name);
                *ret = m;
                return 0;
        }
        /* SECURITY: never a truncated helper path (another program). */
        if ((size_t)snprintf(m.helpers, sizeof(m.helpers), "%s", helper_dir ?: "/usr/bin") >=
            sizeof(m.helpers))
                return -ENAMETOOLONG;
        m.ranged = true;
        m.sub_uid_base = ubase;
        m.sub_gid_base = gbase;
        m.sub_count = USERNS_RANGE_SIZE;
        (void)snprintf(m.uid_source, sizeof(m.uid_source), "newuidmap");
        *ret = m;
        return 0;
}

/* Runs the helper @helper (newuidmap or newgidmap) with @args, its
 * stderr captured into @reterr on failure. */
static int run_map_helper(const char *helper, char *const *args, HutchError *reterr) {
        _cleanup_close_ int rfd = -EBADF, wfd = -EBADF;
        char out[256] = "";
        int fds[2], status = 0;
        ssize_t n = 0, k;
        pid_t pid;

        if (pipe2(fds, O_CLOEXEC) < 0)
                return hutch_error_set(reterr, errno, "failed to run %s: %m", helper);
        rfd = fds[0];
        wfd = fds[1];
        pid = fork();
        if (pid < 0)
                return hutch_error_set(reterr, errno, "failed to run %s: %m", helper);
        if (pid == 0) {
                static char *const envp[] = {(char *)"PATH=/usr/bin:/bin", NULL};

                (void)dup2(wfd, STDERR_FILENO);
                (void)dup2(wfd, STDOUT_FILENO);
                (void)execve(helper, args, envp);
                _exit(127);
        }
        wfd = safe_close(wfd);
        while ((size_t)n < sizeof(out) - 1) {
                k = read(rfd, out + n, sizeof(out) - 1 - (size_t)n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                n += k;
        }
        out[n] = 0;
        out[strcspn(out, "\n")] = 0;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return hutch_error_set(reterr, errno, "failed to wait for %s: %m", helper);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return hutch_error_set(reterr, EPERM, "%s refused the sub-id map (%s)", helper,
                                       out[0] ? out : "no reason given");
        return 0;
}

/* newuidmap/newgidmap PID 0 OWN 1 1 SUB COUNT, or, @identity, OWN OWN 1
 * SUB SUB COUNT. */
static int write_ranged_map(pid_t pid, const IdMapping *m, bool gid, bool identity,
                            HutchError *reterr) {
        _cleanup_free_ char *helper = NULL;
        char spid[16], own[16], sub[16], count[16], one[] = "1";
        uint32_t o = gid ? (uint32_t)m->caller_gid : (uint32_t)m->caller_uid;
        uint32_t b = gid ? m->sub_gid_base : m->sub_uid_base;

        if (asprintf(&helper, "%s/%s", m->helpers, gid ? "newgidmap" : "newuidmap") < 0)
                return -ENOMEM;
        (void)snprintf(spid, sizeof(spid), "%d", (int)pid);
        (void)snprintf(own, sizeof(own), "%u", o);
        (void)snprintf(sub, sizeof(sub), "%u", b);
        (void)snprintf(count, sizeof(count), "%u", m->sub_count);
        {
                char *args[] = {
                        (char *)(gid ? "newgidmap" : "newuidmap"),
                        spid,
                        identity ? own : (char *)"0",
                        own,
                        one,
                        identity ? sub : one,
                        sub,
                        count,
                        NULL,
                };

                return run_map_helper(helper, args, reterr);
        }
}

int userns_write_maps_full(pid_t pid, const IdMapping *m, HutchError *reterr) {
        int r;

        if (m->ranged) {
                r = write_ranged_map(pid, m, true, false, reterr);
                if (r < 0)
                        return r;
                return write_ranged_map(pid, m, false, false, reterr);
        }
        r = userns_write_maps(pid, m);
        if (r < 0)
                return hutch_error_set(reterr, -r, "failed to write the id maps: %s", strerror(-r));
        return 0;
}

int userns_enter_ranged(const IdMapping *m, HutchError *reterr) {
        _cleanup_close_ int go_r = -EBADF, go_w = -EBADF, res_r = -EBADF, res_w = -EBADF;
        HutchError err = {};
        pid_t self = getpid(), helper;
        int fds[2], status = 0;
        char c = 0;
        ssize_t n;

        if (!m->ranged)
                return 0;
        if (pipe2(fds, O_CLOEXEC) < 0)
                return hutch_error_set(reterr, errno, "failed to make a pipe: %m");
        go_r = fds[0];
        go_w = fds[1];
        if (pipe2(fds, O_CLOEXEC) < 0)
                return hutch_error_set(reterr, errno, "failed to make a pipe: %m");
        res_r = fds[0];
        res_w = fds[1];
        /* The helper stays in the caller's user namespace: the setuid
         * newuidmap works only from there. */
        helper = fork();
        if (helper < 0)
                return hutch_error_set(reterr, errno, "failed to fork: %m");
        if (helper == 0) {
                int r;

                go_w = safe_close(go_w);
                res_r = safe_close(res_r);
                (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (read(go_r, &c, 1) != 1)
                        _exit(1);
                r = write_ranged_map(self, m, true, true, &err);
                if (r >= 0)
                        r = write_ranged_map(self, m, false, true, &err);
                if (r < 0)
                        (void)!write(res_w, &err, sizeof(err));
                _exit(r < 0 ? 1 : 0);
        }
        go_r = safe_close(go_r);
        res_w = safe_close(res_w);
        if (unshare(CLONE_NEWUSER) < 0) {
                int e = errno;

                go_w = safe_close(go_w);
                (void)waitpid(helper, NULL, 0);
                return hutch_error_set(reterr, e, "failed to make a user namespace: %s",
                                       strerror(e));
        }
        (void)!write(go_w, &c, 1);
        go_w = safe_close(go_w);
        n = read(res_r, &err, sizeof(err));
        while (waitpid(helper, &status, 0) < 0)
                if (errno != EINTR)
                        return hutch_error_set(reterr, errno, "failed to wait: %m");
        if (n == (ssize_t)sizeof(err) && err.errnum > 0) {
                err.msg[sizeof(err.msg) - 1] = 0;
                return hutch_error_set(reterr, err.errnum, "%s", err.msg);
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return hutch_error_set(reterr, EPERM, "failed to map the sub-ids");
        return 0;
}

int userns_run_ranged(const IdMapping *m, int (*fn)(void *userdata, HutchError *reterr),
                      void *userdata, HutchError *reterr) {
        _cleanup_close_ int res_r = -EBADF, res_w = -EBADF;
        HutchError err = {};
        int fds[2], status = 0;
        ssize_t n;
        pid_t pid;

        if (pipe2(fds, O_CLOEXEC) < 0)
                return hutch_error_set(reterr, errno, "failed to make a pipe: %m");
        res_r = fds[0];
        res_w = fds[1];
        pid = fork();
        if (pid < 0)
                return hutch_error_set(reterr, errno, "failed to fork: %m");
        if (pid == 0) {
                int r;

                res_r = safe_close(res_r);
                (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
                r = userns_enter_ranged(m, &err);
                if (r >= 0)
                        r = fn(userdata, &err);
                if (r < 0 && err.errnum == 0)
                        err.errnum = -r;
                if (r < 0)
                        (void)!write(res_w, &err, sizeof(err));
                _exit(r < 0 ? 1 : 0);
        }
        res_w = safe_close(res_w);
        do
                n = read(res_r, &err, sizeof(err));
        while (n < 0 && errno == EINTR);
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return hutch_error_set(reterr, errno, "failed to wait: %m");
        if (n == (ssize_t)sizeof(err) && err.errnum > 0) {
                err.msg[sizeof(err.msg) - 1] = 0;
                if (reterr)
                        *reterr = err;
                return -err.errnum;
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return hutch_error_set(reterr, EPROTO, "the store's helper process died");
        return 0;
}

int userns_write_maps(pid_t pid, const IdMapping *m) {
        char path[64], map[64];
        int r;

        if (!m->privileged) {
                (void)snprintf(path, sizeof(path), "/proc/%d/setgroups", (int)pid);
                r = write_string_file(path, "deny");
                if (r < 0 && r != -ENOENT)
                        return r;
        }
        (void)snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)pid);
        (void)snprintf(map, sizeof(map), "%u %u %u\n", m->inside_gid, m->gid_base, m->count);
        r = write_string_file(path, map);
        if (r < 0)
                return r;
        (void)snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
        (void)snprintf(map, sizeof(map), "%u %u %u\n", m->inside_uid, m->uid_base, m->count);
        return write_string_file(path, map);
}

void idmapping_use_pool_range(IdMapping *m, uint32_t base) {
        if (base == 0 || !m->privileged)
                return;
        m->layer_uid_base = m->uid_base;
        m->layer_gid_base = m->gid_base;
        m->uid_base = base;
        m->gid_base = base;
        (void)snprintf(m->uid_source, sizeof(m->uid_source), "pool");
}
