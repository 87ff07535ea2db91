/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch-ext.h's door for hutch serve and its E2B server (issue 16, h16x):
 * the store's folders, a running sandbox's memory and cpu read from its
 * cgroup, and the allowlist's host patterns.
 *
 * The numbers come from the sandbox's cgroup, found from outside: the
 * keeper's pid (SO_PEERCRED of a connection to its socket, which is in the
 * store's own 0700 state folder), its child in a sandbox's "exec" leaf (the
 * sandbox's init, or QEMU), and that process's cgroup in the memory and v2
 * hierarchies. The sandbox's cgroup is the parent of the process's "exec"
 * leaf, so the numbers count every exec of the sandbox. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api/hutch-ext.h"
#include "api/persist.h"
#include "cgroup/cgroup.h"
#include "fd-util.h"
#include "net/allowlist.h"
#include "parse-util.h"
#include "store/store.h"

void hutch_ext_store_paths_done(HutchExtStorePaths *p) {
        if (!p)
                return;
        free(p->home);
        free(p->state);
        free(p->runtime);
        *p = (HutchExtStorePaths){};
}

int hutch_ext_store_paths(HutchExtStorePaths *ret, HutchError *reterr) {
        _cleanup_(store_freep) Store *s = NULL;
        int r;

        r = store_open(&s, reterr);
        if (r < 0)
                return r;
        *ret = (HutchExtStorePaths){
                .home = TAKE_PTR(s->home),
                .state = TAKE_PTR(s->state),
                .runtime = TAKE_PTR(s->runtime),
        };
        return 0;
}

/* ---- stats ---- */

/* The cgroup mounts, detected once: one server per process, and the
 * mounts of cgroup hierarchies do not move while it runs. */
static CgroupTopology topology;
static int topology_state; /* 0: not yet, 1: detected, < 0: failed */

/* The pid of the sandbox @name's keeper: > 0, 0 when it is not running. */
static pid_t keeper_pid(const char *name) {
        _cleanup_(store_freep) Store *store = NULL;
        _cleanup_close_ int sock = -EBADF;
        struct ucred cred;
        socklen_t len = sizeof(cred);

        if (store_open(&store, NULL) < 0)
                return 0;
        if (persist_connect(store, name, false, &sock, NULL) < 0)
                return 0;
        if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.pid <= 0)
                return 0;
        return cred.pid;
}

/* The /proc/PID/cgroup text of the first child of @pid that sits in a
 * sandbox's leaf (a path ending in "/exec": cgroup_new()'s name for it),
 * which is the sandbox's init (or QEMU): not hutch-proxy, which the keeper
 * starts too and which stays in the keeper's cgroup. NULL if none. */
static char *sandbox_child_cgroup(pid_t pid) {
        _cleanup_free_ char *path = NULL, *children = NULL;
        char *save = NULL;

        if (asprintf(&path, "/proc/%d/task/%d/children", (int)pid, (int)pid) < 0)
                return NULL;
        if (read_full_file(path, 64 << 10, &children) < 0)
                return NULL;
        for (char *tok = strtok_r(children, " \n", &save); tok;
             tok = strtok_r(NULL, " \n", &save)) {
                _cleanup_free_ char *cpath = NULL, *text = NULL;
                uint32_t child;

                if (safe_atou32(tok, &child) < 0 || child == 0 || child > INT32_MAX)
                        continue;
                if (asprintf(&cpath, "/proc/%u/cgroup", child) < 0)
                        return NULL;
                if (read_full_file(cpath, 64 << 10, &text) < 0)
                        continue;
                if (strstr(text, "/exec\n"))
                        return TAKE_PTR(text);
        }
        return NULL;
}

/* The path of @pid's cgroup in the hierarchy named by the /proc/PID/cgroup
 * @key ("" for v2, "memory", "cpuacct"), without its last component: new
 * string or NULL. Lines of other hierarchies are not judged. */
static char *proc_cgroup_parent(const char *text, const char *key) {
        for (const char *line = text; line && *line;) {
                const char *eol = strchrnul(line, '\n'), *c1 = memchr(line, ':', eol - line);
                const char *c2 = c1 ? memchr(c1 + 1, ':', eol - c1 - 1) : NULL;

                if (c2) {
                        bool match = false;

                        /* "4:memory:/p", "2:cpu,cpuacct:/p" or "0::/p". */
                        if (!key[0])
                                match = c2 == c1 + 1 && line[0] == '0' && c1 == line + 1;
                        else
                                for (const char *k = c1 + 1; k < c2;) {
                                        const char *comma = memchr(k, ',', c2 - k);
                                        const char *kend = comma ? comma : c2;

                                        if ((size_t)(kend - k) == strlen(key) &&
                                            memcmp(k, key, kend - k) == 0)
                                                match = true;
                                        k = comma ? comma + 1 : c2;
                                }
                        if (match && c2[1] == '/') {
                                const char *slash = c2 + 1, *p;

                                for (p = c2 + 1; p < eol; p++)
                                        if (*p == '/')
                                                slash = p;
                                if (slash == c2 + 1 || memmem(c2 + 1, eol - c2 - 1, "/..", 3))
                                        return NULL;
                                return strndup(c2 + 1, slash - c2 - 1);
                        }
                }
                line = *eol ? eol + 1 : NULL;
        }
        return NULL;
}

/* A number (the first of the file, or of the line starting with @key). */
static int read_counter(const char *mount, const char *dir, const char *file, const char *key,
                        uint64_t *ret) {
        _cleanup_free_ char *path = NULL, *text = NULL;
        const char *p;
        char *end;

        if (!mount || asprintf(&path, "%s%s/%s", mount, dir, file) < 0)
                return -ENOENT;
        if (read_full_file(path, 64 << 10, &text) < 0)
                return -ENOENT;
        p = text;
        if (key) {
                size_t klen = strlen(key);

                for (p = text; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
                        if (strncmp(p, key, klen) == 0 && p[klen] == ' ') {
                                p += klen + 1;
                                break;
                        }
                if (!p)
                        return -ENOENT;
        }
        end = strchrnul(p, '\n');
        *end = '\0';
        return safe_atou64(p, ret);
}

void hutch_ext_stats_sample(const char *name, HutchExtStats *ret) {
        _cleanup_free_ char *text = NULL, *v2 = NULL, *mem = NULL, *acct = NULL;
        const CgroupPlace *mp = &topology.controllers[CGROUP_MEMORY];
        pid_t kpid;
        uint64_t n;

        *ret = (HutchExtStats){};
        kpid = keeper_pid(name);
        ret->running = kpid > 0;
        text = kpid > 0 ? sandbox_child_cgroup(kpid) : NULL;
        if (text && topology_state == 0)
                topology_state = cgroup_topology_detect(&topology, NULL) < 0 ? -1 : 1;
        if (!text || topology_state <= 0)
                return;
        v2 = proc_cgroup_parent(text, "");
        mem = proc_cgroup_parent(text, "memory");
        acct = proc_cgroup_parent(text, "cpuacct");
        if (mp->version == CGROUP_VERSION_2 && v2)
                ret->has_memory = read_counter(topology.v2.mount, v2, "memory.current", NULL,
                                               &ret->memory_bytes) >= 0;
        else if (mp->version == CGROUP_VERSION_1 && mem)
                ret->has_memory = read_counter(mp->mount, mem, "memory.usage_in_bytes", NULL,
                                               &ret->memory_bytes) >= 0;
        if (v2 && read_counter(topology.v2.mount, v2, "cpu.stat", "usage_usec", &n) >= 0) {
                ret->has_cpu = true;
                ret->cpu_usec = n;
        } else if (acct &&
                   read_counter(topology.cpuacct.mount, acct, "cpuacct.usage", NULL, &n) >= 0) {
                ret->has_cpu = true;
                ret->cpu_usec = n / 1000;
        }
}

void hutch_ext_stats_reset(void) {
        cgroup_topology_done(&topology);
        topology_state = 0;
}

/* ---- the allowlist's host patterns ---- */

int hutch_ext_host_pattern_check(const char *pattern, HutchError *reterr) {
        HostPattern hp;

        return host_pattern_parse(pattern, &hp, reterr);
}

bool hutch_ext_host_within(char **ceiling, const char *entry) {
        return host_pattern_within(ceiling, entry);
}
