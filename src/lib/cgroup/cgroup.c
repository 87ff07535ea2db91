/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cgroup/cgroup-internal.h"
#include "cgroup/cgroup.h"
#include "fd-util.h"
#include "macro.h"
#include "parse-util.h"
#include "time-util.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

#define LEAF_NAME "exec"
#define NAME_MAX_LEN 63U

/* How long kill, freeze and rmdir wait for the kernel: about one second
 * (docs/cgroups.md), so that a timeout ends within 1.5 s. */
#define SETTLE_TIMEOUT_MS 1000
/* v1 freezing can stall on a task in uninterruptible sleep; the kill goes
 * ahead after this long anyway (SIGKILL is delivered on thaw). */
#define FREEZE_WAIT_MS 250
/* Nesting below a leaf that cgroup_remove() and the kill walk follow. */
#define WALK_DEPTH_MAX 32
/* pidfds opened at once by a kill pass, well below RLIMIT_NOFILE. */
#define KILL_BATCH 128

#define CPU_PERIOD_DEFAULT_US 100000U
#define CPU_PERIOD_MIN_US 1000U
#define CPU_PERIOD_MAX_US 1000000U
#define CPU_QUOTA_MIN_US 1000U

/* What one hierarchy is used for. */
enum {
        ROLE_MEMORY = 1U << CGROUP_MEMORY,
        ROLE_PIDS = 1U << CGROUP_PIDS,
        ROLE_CPU = 1U << CGROUP_CPU,
        ROLE_KILL = 1U << 3,     /* v2: kill, freeze, cpu.stat */
        ROLE_FREEZER = 1U << 4,  /* v1 freezer */
        ROLE_CPUACCT = 1U << 5,  /* v1 cpuacct */
        ROLE_MEM_STATS = 1U << 6 /* memory counters only; optional */
};

typedef struct Hierarchy {
        CgroupVersion version;
        char *mount;
        char *base;
        bool create_base;
        unsigned roles;
        unsigned limits;   /* CgroupController bits this hierarchy enforces */
        unsigned optional; /* v2 controllers enabled if possible, for counters */
        char *dir;         /* "<base>/<name>" */
        char *leaf;        /* "<dir>/exec" */
        bool made_dir, made_leaf;
} Hierarchy;

/* v2, memory, pids, cpu, cpuacct, freezer: at most six distinct ones. */
#define HIERARCHY_MAX 6

struct Cgroup {
        char *name;
        Hierarchy h[HIERARCHY_MAX];
        size_t n;
        bool flat; /* cgroup_new_run(): leaves that are "<name>" itself */
};

static int hierarchy_remove(Hierarchy *h);

/* ---- small helpers ---- */

/* Sleeps a little longer each time (1, 2, 4, 8, 10, 10... ms). */
static void backoff(unsigned *step) {
        unsigned ms = *step < 10 ? (*step ? *step * 2 : 1) : 10;
        struct timespec ts = {.tv_nsec = (long)ms * 1000000L};

        *step = ms;
        (void)nanosleep(&ts, NULL);
}

static bool name_is_valid(const char *name) {
        size_t n;

        if (!name)
                return false;
        n = strlen(name);
        if (n == 0 || n > NAME_MAX_LEN)
                return false;
        for (size_t i = 0; i < n; i++) {
                char ch = name[i];
                bool ok = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');

                if (i > 0)
                        ok = ok || ch == '_' || ch == '.' || ch == '-';
                if (!ok)
                        return false;
        }
        return true;
}

static bool swap_active(void) {
        _cleanup_free_ char *s = NULL;
        const char *nl;

        /* SECURITY: unreadable means "maybe": fail closed. */
        if (read_full_file("/proc/swaps", CG_FILE_MAX, &s) < 0)
                return true;
        nl = strchr(s, '\n'); /* the header line */
        return nl && nl[1] != '\0';
}

static Hierarchy *cgroup_role(Cgroup *c, unsigned role) {
        for (size_t i = 0; i < c->n; i++)
                if (c->h[i].roles & role)
                        return c->h + i;
        return NULL;
}

static const Hierarchy *cgroup_role_const(const Cgroup *c, unsigned role) {
        for (size_t i = 0; i < c->n; i++)
                if (c->h[i].roles & role)
                        return c->h + i;
        return NULL;
}

/* ---- lifecycle of the object ---- */

static void hierarchy_done(Hierarchy *h) {
        free(h->mount);
        free(h->base);
        free(h->dir);
        free(h->leaf);
        *h = (Hierarchy){};
}

Cgroup *cgroup_free(Cgroup *c) {
        if (!c)
                return NULL;
        for (size_t i = 0; i < c->n; i++)
                hierarchy_done(c->h + i);
        free(c->name);
        free(c);
        return NULL;
}

const char *cgroup_name(const Cgroup *c) {
        return c ? c->name : NULL;
}

CgroupVersion cgroup_controller_version(const Cgroup *c, CgroupController controller) {
        const Hierarchy *h;

        if (!c || controller < 0 || controller >= _CGROUP_CONTROLLER_MAX)
                return CGROUP_VERSION_NONE;
        h = cgroup_role_const(c, 1U << controller);
        return h ? h->version : CGROUP_VERSION_NONE;
}

const char *cgroup_controller_path(const Cgroup *c, CgroupController controller) {
        const Hierarchy *h;

        if (!c || controller < 0 || controller >= _CGROUP_CONTROLLER_MAX)
                return NULL;
        h = cgroup_role_const(c, 1U << controller);
        return h ? h->dir : NULL;
}

const char *cgroup_leaf_path_v2(const Cgroup *c) {
        const Hierarchy *h = c ? cgroup_role_const(c, ROLE_KILL) : NULL;

        return h ? h->leaf : NULL;
}

/* Adds @p to the hierarchies of @c for @role (merging with one of the same
 * version and base: co-mounted v1 controllers, v2 controllers and kill). */
static int cgroup_add(Cgroup *c, const CgroupPlace *p, unsigned role, unsigned limit,
                      unsigned optional) {
        Hierarchy *h;

        for (size_t i = 0; i < c->n; i++) {
                h = c->h + i;
                if (h->version == p->version && strcmp(h->base, p->base) == 0) {
                        h->roles |= role;
                        h->limits |= limit;
                        h->optional |= optional;
                        return 0;
                }
        }
        assert(c->n < HIERARCHY_MAX);
        h = c->h + c->n;
        *h = (Hierarchy){.version = p->version,
                         .create_base = p->create_base,
                         .roles = role,
                         .limits = limit,
                         .optional = optional};
        h->mount = strdup(p->mount);
        h->base = strdup(p->base);
        h->dir = cg_path_join(p->base, c->name);
        if (c->flat && p->version == CGROUP_VERSION_1)
                h->leaf = h->dir ? strdup(h->dir) : NULL;
        else
                h->leaf = h->dir ? cg_path_join(h->dir, LEAF_NAME) : NULL;
        c->n++;
        if (!h->mount || !h->base || !h->dir || !h->leaf)
                return -ENOMEM;
        return 0;
}

/* ---- creation ---- */

/* Enables @controller in @dir's cgroup.subtree_control unless it is on. */
static int subtree_enable(const char *dir, const char *controller) {
        _cleanup_free_ char *cur = NULL, *cmd = NULL;
        int r;

        r = cg_read(dir, "cgroup.subtree_control", &cur);
        if (r < 0)
                return r;
        if (cg_word_in_list(cur, controller, " \n"))
                return 0;
        if (asprintf(&cmd, "+%s", controller) < 0)
                return -ENOMEM;
        return cg_write(dir, "cgroup.subtree_control", cmd);
}

static int subtree_enable_all(const char *dir, unsigned limits, HutchError *reterr) {
        int r;

        for (CgroupController k = 0; k < _CGROUP_CONTROLLER_MAX; k++) {
                if (!(limits & (1U << k)))
                        continue;
                r = subtree_enable(dir, cgroup_controller_to_string(k));
                if (r < 0)
                        return hutch_error_set(
                                reterr, -r,
                                "%s limit requested but the %s controller cannot be enabled in "
                                "%s/cgroup.subtree_control: %s",
                                cgroup_controller_to_string(k), cgroup_controller_to_string(k), dir,
                                strerror(-r));
        }
        return 0;
}

/* Enables the optional controllers of @h in @dir, ignoring failures: only
 * counters depend on them. */
static void subtree_enable_optional(const Hierarchy *h, const char *dir) {
        for (CgroupController k = 0; k < _CGROUP_CONTROLLER_MAX; k++)
                if ((h->optional & ~h->limits) & (1U << k))
                        (void)subtree_enable(dir, cgroup_controller_to_string(k));
}

/* How many times the processes of a namespace root are moved before
 * giving up on one that keeps forking into it. */
#define EVACUATE_ROUNDS 10

/* Inside a container with its own cgroup namespace, the mount point is
 * the container's cgroup, which holds the container's processes (hutch
 * among them); v2 enables no controller below a cgroup with processes
 * but the real root (EBUSY). As docker-in-docker does, those processes
 * move into its child "init" (still the container's cgroup, under the
 * same limits), a few rounds for the ones forked meanwhile. */
static int evacuate_to_init(const char *dir) {
        _cleanup_free_ char *init = cg_path_join(dir, "init");

        if (!init)
                return -ENOMEM;
        if (mkdir(init, 0755) < 0 && errno != EEXIST)
                return negative_errno();
        for (unsigned round = 0; round < EVACUATE_ROUNDS; round++) {
                _cleanup_free_ char *procs = NULL;
                char *save = NULL;
                int r = cg_read(dir, "cgroup.procs", &procs);

                if (r < 0)
                        return r;
                if (!procs[0])
                        return 0;
                for (char *p = strtok_r(procs, "\n", &save); p; p = strtok_r(NULL, "\n", &save)) {
                        r = cg_write(init, "cgroup.procs", p);
                        if (r < 0 && r != -ESRCH)
                                return r;
                }
        }
        return -EBUSY;
}

/* Enables @h's controllers at its mount point, for a base created there. */
static int mount_enable(Hierarchy *h, HutchError *reterr) {
        HutchError first = {};
        int r;

        r = subtree_enable_all(h->mount, h->limits, &first);
        if (r == -EBUSY && evacuate_to_init(h->mount) >= 0)
                r = subtree_enable_all(h->mount, h->limits, reterr);
        else if (r < 0 && reterr)
                *reterr = first;
        if (r < 0)
                return r;
        subtree_enable_optional(h, h->mount);
        return 0;
}

static int hierarchy_create(Hierarchy *h, HutchError *reterr) {
        bool v2 = h->version == CGROUP_VERSION_2;
        int r;

        if (h->create_base) {
                if (v2) {
                        r = mount_enable(h, reterr);
                        if (r < 0)
                                return r;
                }
                if (mkdir(h->base, 0755) < 0 && errno != EEXIST) {
                        r = negative_errno();
                        return hutch_error_set(reterr, -r, "cannot create the cgroup %s: %s",
                                               h->base, strerror(-r));
                }
        }
        if (v2) {
                r = subtree_enable_all(h->base, h->limits, reterr);
                if (r < 0)
                        return r;
                subtree_enable_optional(h, h->base);
        }

        if (mkdir(h->dir, 0755) < 0) {
                r = negative_errno();
                if (r == -EEXIST)
                        return hutch_error_set(reterr, EEXIST,
                                               "the cgroup %s already exists; is another sandbox "
                                               "of that name running?",
                                               h->dir);
                return hutch_error_set(reterr, -r, "cannot create the cgroup %s: %s", h->dir,
                                       strerror(-r));
        }
        h->made_dir = true;

        /* memory.oom.group lives on the leaf, which needs the memory
         * controller handed down to it. */
        if (v2 && (h->limits & ROLE_MEMORY)) {
                r = subtree_enable_all(h->dir, ROLE_MEMORY, reterr);
                if (r < 0)
                        return r;
        }
        if (strcmp(h->leaf, h->dir) != 0 && mkdir(h->leaf, 0755) < 0) {
                r = negative_errno();
                return hutch_error_set(reterr, -r, "cannot create the cgroup %s: %s", h->leaf,
                                       strerror(-r));
        }
        h->made_leaf = true;
        return 0;
}

static int limit_write(const char *dir, const char *file, uint64_t value, const char *what,
                       HutchError *reterr) {
        char buf[32];
        int r;

        (void)snprintf(buf, sizeof(buf), "%" PRIu64, value);
        r = cg_write(dir, file, buf);
        if (r < 0)
                return hutch_error_set(reterr, -r,
                                       "%s limit requested but writing %s to %s/%s failed: %s",
                                       what, buf, dir, file, strerror(-r));
        return 0;
}

/* The swap part of a memory limit when the kernel has no per-cgroup swap
 * file (no swap accounting): fine only while no swap is active. */
static int swap_unaccounted(const char *dir, const char *file, HutchError *reterr) {
        if (!swap_active())
                return 0;
        return hutch_error_set(reterr, EOPNOTSUPP,
                               "memory limit requested but %s/%s does not exist (the kernel does "
                               "not account swap per cgroup) while swap is active, so the limit "
                               "could be bypassed by swapping; boot with swapaccount=1 or disable "
                               "swap, or pass --allow-degraded",
                               dir, file);
}

static int memory_apply_v2(Hierarchy *h, const CgroupLimits *lim, HutchError *reterr) {
        char buf[32];
        int r;

        r = limit_write(h->dir, "memory.max", lim->memory_max, "memory", reterr);
        if (r < 0)
                return r;
        (void)snprintf(buf, sizeof(buf), "%" PRIu64, lim->memory_swap_max);
        r = cg_write(h->dir, "memory.swap.max", buf);
        if (r == -ENOENT)
                r = swap_unaccounted(h->dir, "memory.swap.max", reterr);
        else if (r < 0)
                r = hutch_error_set(reterr, -r,
                                    "memory limit requested but writing %s to %s/%s "
                                    "failed: %s",
                                    buf, h->dir, "memory.swap.max", strerror(-r));
        if (r < 0)
                return r;
        /* An OOM kills the whole leaf, not one process of it: a command
         * that lost a worker to the OOM killer would otherwise go on half
         * dead, and the outcome would not be a clean "oom". The limit
         * stays on "<name>", so the leaf is what the OOM killer sees. */
        r = cg_write(h->leaf, "memory.oom.group", "1");
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot write %s/memory.oom.group: %s", h->leaf,
                                       strerror(-r));
        return 0;
}

static int memory_apply_v1(Hierarchy *h, const CgroupLimits *lim, HutchError *reterr) {
        _cleanup_free_ char *oom = NULL;
        uint64_t v = 1, memsw;
        char buf[32];
        int r;

        /* SECURITY: with the OOM killer disabled, a cgroup at its limit
         * hangs instead of killing: the sandbox would never end. */
        r = cg_read(h->dir, "memory.oom_control", &oom);
        if (r >= 0)
                r = cg_keyed_value(oom, "oom_kill_disable", &v);
        if (r >= 0 && v != 0)
                r = cg_write(h->dir, "memory.oom_control", "0");
        if (r < 0)
                return hutch_error_set(reterr, -r,
                                       "memory limit requested but the OOM killer of %s cannot be "
                                       "checked or enabled: %s",
                                       h->dir, strerror(-r));

        r = limit_write(h->dir, "memory.limit_in_bytes", lim->memory_max, "memory", reterr);
        if (r < 0)
                return r;
        if (lim->memory_swap_max > UINT64_MAX - lim->memory_max)
                return hutch_error_set(reterr, EINVAL, "memory plus swap limit overflows");
        memsw = lim->memory_max + lim->memory_swap_max;
        (void)snprintf(buf, sizeof(buf), "%" PRIu64, memsw);
        r = cg_write(h->dir, "memory.memsw.limit_in_bytes", buf);
        if (r == -ENOENT)
                return swap_unaccounted(h->dir, "memory.memsw.limit_in_bytes", reterr);
        if (r < 0)
                return hutch_error_set(reterr, -r,
                                       "memory limit requested but writing %s to "
                                       "%s/memory.memsw.limit_in_bytes failed: %s",
                                       buf, h->dir, strerror(-r));
        return 0;
}

static int cpu_apply(Hierarchy *h, const CgroupLimits *lim, HutchError *reterr) {
        uint64_t period = lim->cpu_period_us ? lim->cpu_period_us : CPU_PERIOD_DEFAULT_US;
        char buf[64];
        int r;

        if (h->version == CGROUP_VERSION_2) {
                (void)snprintf(buf, sizeof(buf), "%" PRIu64 " %" PRIu64, lim->cpu_quota_us, period);
                r = cg_write(h->dir, "cpu.max", buf);
                if (r < 0)
                        return hutch_error_set(reterr, -r,
                                               "cpu limit requested but writing '%s' to %s/cpu.max "
                                               "failed: %s",
                                               buf, h->dir, strerror(-r));
                return 0;
        }
        r = limit_write(h->dir, "cpu.cfs_period_us", period, "cpu", reterr);
        if (r < 0)
                return r;
        return limit_write(h->dir, "cpu.cfs_quota_us", lim->cpu_quota_us, "cpu", reterr);
}

static int limits_apply(Cgroup *c, const CgroupLimits *lim, HutchError *reterr) {
        int r;

        for (size_t i = 0; i < c->n; i++) {
                Hierarchy *h = c->h + i;
                bool v2 = h->version == CGROUP_VERSION_2;

                if (h->limits & ROLE_MEMORY) {
                        r = v2 ? memory_apply_v2(h, lim, reterr) : memory_apply_v1(h, lim, reterr);
                        if (r < 0)
                                return r;
                }
                if (h->limits & ROLE_PIDS) {
                        r = limit_write(h->dir, "pids.max", lim->pids_max, "pids", reterr);
                        if (r < 0)
                                return r;
                }
                if (h->limits & ROLE_CPU) {
                        r = cpu_apply(h, lim, reterr);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

static int limits_validate(const CgroupLimits *lim, HutchError *reterr) {
        if (lim->memory_swap_max > 0 && lim->memory_max == 0)
                return hutch_error_set(reterr, EINVAL, "a swap limit needs a memory limit");
        if (lim->cpu_period_us > 0 && lim->cpu_quota_us == 0)
                return hutch_error_set(reterr, EINVAL, "a cpu period needs a cpu quota");
        if (lim->cpu_quota_us > 0 && lim->cpu_quota_us < CPU_QUOTA_MIN_US)
                return hutch_error_set(reterr, EINVAL, "cpu quota %" PRIu64 "us is below %uus",
                                       lim->cpu_quota_us, CPU_QUOTA_MIN_US);
        if (lim->cpu_period_us > 0 &&
            (lim->cpu_period_us < CPU_PERIOD_MIN_US || lim->cpu_period_us > CPU_PERIOD_MAX_US))
                return hutch_error_set(reterr, EINVAL,
                                       "cpu period %" PRIu64 "us is outside %u..%uus",
                                       lim->cpu_period_us, CPU_PERIOD_MIN_US, CPU_PERIOD_MAX_US);
        if (lim->memory_swap_max > UINT64_MAX - lim->memory_max)
                return hutch_error_set(reterr, EINVAL, "memory plus swap limit overflows");
        return 0;
}

/* Picks the hierarchies of a new Cgroup from @t for @lim. */
static int cgroup_plan(Cgroup *c, const CgroupTopology *t, const CgroupLimits *lim,
                       HutchError *reterr) {
        const bool want[_CGROUP_CONTROLLER_MAX] = {
                [CGROUP_MEMORY] = lim->memory_max > 0,
                [CGROUP_PIDS] = lim->pids_max > 0,
                [CGROUP_CPU] = lim->cpu_quota_us > 0,
        };
        int r;

        for (CgroupController k = 0; k < _CGROUP_CONTROLLER_MAX; k++) {
                const CgroupPlace *p = t->controllers + k;
                const char *s = cgroup_controller_to_string(k);

                if (!want[k])
                        continue;
                if (p->version == CGROUP_VERSION_NONE || !p->base)
                        return hutch_error_set(reterr, EOPNOTSUPP,
                                               "%s limit requested but no writable %s cgroup (v2 "
                                               "or v1) is available here; see 'hutch doctor' or "
                                               "pass --allow-degraded",
                                               s, s);
                if (!p->writable)
                        return hutch_error_set(reterr, EOPNOTSUPP,
                                               "%s limit requested but the %s %s cgroup at %s is "
                                               "not writable here; see 'hutch doctor' or pass "
                                               "--allow-degraded",
                                               s, cgroup_version_to_string(p->version), s, p->base);
                r = cgroup_add(c, p, 1U << k, 1U << k, 0);
                if (r < 0)
                        return r;
        }

        if (t->v2.version == CGROUP_VERSION_2 && t->v2.writable && t->v2.base)
                r = cgroup_add(c, &t->v2, ROLE_KILL, 0, 0);
        else {
                r = 0;
                if (t->freezer.writable && t->freezer.base)
                        r = cgroup_add(c, &t->freezer, ROLE_FREEZER, 0, 0);
                if (r >= 0 && t->cpuacct.writable && t->cpuacct.base)
                        r = cgroup_add(c, &t->cpuacct, ROLE_CPUACCT, 0, 0);
        }
        if (r < 0)
                return r;
        if (!want[CGROUP_MEMORY] && t->controllers[CGROUP_MEMORY].writable &&
            t->controllers[CGROUP_MEMORY].base) {
                const CgroupPlace *m = t->controllers + CGROUP_MEMORY;

                /* On v2 the counters need the controller enabled above. */
                r = cgroup_add(c, m, ROLE_MEM_STATS, 0,
                               m->version == CGROUP_VERSION_2 ? ROLE_MEMORY : 0);
                if (r < 0)
                        return r;
        }
        if (c->n == 0)
                return hutch_error_set(reterr, EOPNOTSUPP,
                                       "no writable cgroup (v2 or v1) is available here, so "
                                       "nothing could limit or kill the sandbox as a whole; see "
                                       "'hutch doctor' or pass --allow-degraded");
        return 0;
}

static int cgroup_new_full(const CgroupTopology *t, const char *name, const CgroupLimits *lim,
                           bool flat, Cgroup **ret, HutchError *reterr) {
        _cleanup_(cgroup_freep) Cgroup *c = NULL;
        int r;

        if (!t || !lim || !ret)
                return -EINVAL;
        if (!name_is_valid(name))
                return hutch_error_set(reterr, EINVAL,
                                       "invalid cgroup name '%s': it must match "
                                       "[a-z0-9][a-z0-9_.-]{0,62}",
                                       name ? name : "");
        r = limits_validate(lim, reterr);
        if (r < 0)
                return r;

        c = calloc(1, sizeof(Cgroup));
        if (!c)
                return -ENOMEM;
        c->name = strdup(name);
        if (!c->name)
                return -ENOMEM;
        c->flat = flat;
        r = cgroup_plan(c, t, lim, reterr);
        if (r < 0)
                return r;
        /* A v2 leaf is needed below enabled controllers ("no internal
         * processes") and for memory.oom.group, both only with a memory
         * limit on "<name>" (the other limits are enabled on the base):
         * without one, a run's v2 processes sit in "<name>" too. */
        for (size_t i = 0; flat && i < c->n; i++) {
                Hierarchy *h = c->h + i;

                if (h->version != CGROUP_VERSION_2 || (h->limits & ROLE_MEMORY))
                        continue;
                free(h->leaf);
                h->leaf = strdup(h->dir);
                if (!h->leaf)
                        return -ENOMEM;
        }

        for (size_t i = 0; i < c->n; i++) {
                Hierarchy *h = c->h + i;
                HutchError ignored;

                if (h->roles != ROLE_MEM_STATS) {
                        r = hierarchy_create(h, reterr);
                        if (r < 0)
                                goto fail;
                        continue;
                }
                /* Counters only: a failure just means no counters, and
                 * a hierarchy without roles is skipped from now on. */
                if (hierarchy_create(h, &ignored) < 0) {
                        (void)hierarchy_remove(h);
                        h->roles = 0;
                }
        }
        r = limits_apply(c, lim, reterr);
        if (r < 0)
                goto fail;

        *ret = TAKE_PTR(c);
        return 0;
fail:
        (void)cgroup_remove(c);
        return r;
}

int cgroup_new(const CgroupTopology *t, const char *name, const CgroupLimits *lim, Cgroup **ret,
               HutchError *reterr) {
        return cgroup_new_full(t, name, lim, false, ret, reterr);
}

int cgroup_new_run(const CgroupTopology *t, const char *name, const CgroupLimits *lim, Cgroup **ret,
                   HutchError *reterr) {
        /* v1 lets processes sit next to child cgroups and counts limits
         * hierarchically, so a run needs no v1 leaf: a v1 memory and a
         * pids cgroup less to create and remove (about 0.3 ms of every
         * run, issue 16), and v2 needs its leaf only with a memory limit
         * (cgroup_new_full()). */
        return cgroup_new_full(t, name, lim, true, ret, reterr);
}

int cgroup_new_child(Cgroup *parent, const char *child, Cgroup **ret, HutchError *reterr) {
        _cleanup_(cgroup_freep) Cgroup *c = NULL;
        unsigned want = 0; /* 0: every hierarchy */
        int r;

        if (!parent || !ret)
                return -EINVAL;
        if (!name_is_valid(child) || strcmp(child, LEAF_NAME) == 0)
                return hutch_error_set(reterr, EINVAL, "invalid child cgroup name '%s'",
                                       child ? child : "");
        c = calloc(1, sizeof(Cgroup));
        if (!c)
                return -ENOMEM;
        c->name = strdup(child);
        if (!c->name)
                return -ENOMEM;
        /* Only what kills and counts the child: the v2 hierarchy
         * (cgroup.kill, cpu.stat) when the parent uses it, else the v1
         * freezer and cpuacct, else (nothing that can kill) all of them.
         * Elsewhere the child's processes stay in the parent's leaf, under
         * the parent's limits. Fewer directories make an exec cheaper (a v1
         * memory cgroup costs about a millisecond to create). */
        for (size_t i = 0; i < parent->n; i++) {
                const Hierarchy *ph = parent->h + i;

                if (ph->roles && ph->made_dir && ph->version == CGROUP_VERSION_2 &&
                    (ph->roles & ROLE_KILL))
                        want = ROLE_KILL;
                else if (ph->roles && ph->made_dir && (ph->roles & ROLE_FREEZER) &&
                         want != ROLE_KILL)
                        want = ROLE_FREEZER | ROLE_CPUACCT;
        }
        for (size_t i = 0; i < parent->n; i++) {
                const Hierarchy *ph = parent->h + i;
                bool oom_group = ph->version == CGROUP_VERSION_2 && (ph->limits & ROLE_MEMORY);
                CgroupPlace p = {.version = ph->version, .mount = ph->mount, .base = ph->dir};

                if (!ph->roles || !ph->made_dir || (want && !(ph->roles & want)))
                        continue;
                /* No limits of its own: the parent's count for it. v2
                 * with a memory limit: the leaf gets memory.oom.group. */
                r = cgroup_add(c, &p, ph->roles, oom_group ? ROLE_MEMORY : 0, 0);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < c->n; i++) {
                Hierarchy *h = c->h + i;

                r = hierarchy_create(h, reterr);
                if (r >= 0 && (h->limits & ROLE_MEMORY)) {
                        r = cg_write(h->leaf, "memory.oom.group", "1");
                        if (r < 0)
                                (void)hutch_error_set(reterr, -r,
                                                      "cannot write %s/memory.oom.group: %s",
                                                      h->leaf, strerror(-r));
                }
                if (r < 0) {
                        (void)cgroup_remove(c);
                        return r;
                }
        }
        *ret = TAKE_PTR(c);
        return 0;
}

int cgroup_open_procs(Cgroup *c, int *fds, size_t max_fds, size_t *ret_n) {
        size_t n = 0;

        if (!c || !fds || !ret_n)
                return -EINVAL;
        for (size_t i = 0; i < c->n; i++) {
                const Hierarchy *h = c->h + i;
                _cleanup_close_ int dfd = -EBADF;
                int fd;

                if (!h->roles || !h->made_leaf)
                        continue;
                if (n >= max_fds) {
                        fd = -E2BIG;
                        goto fail;
                }
                dfd = cg_open_dir(h->leaf);
                if (dfd < 0) {
                        fd = dfd;
                        goto fail;
                }
                fd = openat(dfd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
                if (fd < 0) {
                        fd = negative_errno();
                        goto fail;
                }
                fds[n++] = fd;
                continue;
        fail:
                for (size_t j = 0; j < n; j++)
                        fds[j] = safe_close(fds[j]);
                return fd;
        }
        *ret_n = n;
        return 0;
}

/* ---- attaching ---- */

int cgroup_open_join(Cgroup *c, int *ret_v2_fd, int *tasks_fds, size_t max_fds, size_t *ret_n) {
        _cleanup_close_ int v2 = -EBADF;
        size_t n = 0;
        int r;

        if (!c || !ret_v2_fd || !tasks_fds || !ret_n)
                return -EINVAL;
        for (size_t i = 0; i < c->n; i++) {
                const Hierarchy *h = c->h + i;
                _cleanup_close_ int dfd = -EBADF;

                if (!h->roles || !h->made_leaf)
                        continue;
                dfd = cg_open_dir(h->leaf);
                if (dfd < 0) {
                        r = dfd;
                        goto fail;
                }
                if (h->version == CGROUP_VERSION_2) {
                        /* There is one unified hierarchy. */
                        if (v2 >= 0) {
                                r = -EBADMSG;
                                goto fail;
                        }
                        v2 = TAKE_FD(dfd);
                        continue;
                }
                if (n >= max_fds) {
                        r = -E2BIG;
                        goto fail;
                }
                tasks_fds[n] = openat(dfd, "tasks", O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
                if (tasks_fds[n] < 0) {
                        r = negative_errno();
                        goto fail;
                }
                n++;
        }
        *ret_v2_fd = TAKE_FD(v2);
        *ret_n = n;
        return 0;

fail:
        for (size_t j = 0; j < n; j++)
                tasks_fds[j] = safe_close(tasks_fds[j]);
        return r;
}

int cgroup_attach(Cgroup *c, pid_t pid) {
        bool attached = false;
        char buf[32];
        int r;

        if (!c || pid <= 0)
                return -EINVAL;
        (void)snprintf(buf, sizeof(buf), "%d", (int)pid);
        for (size_t i = 0; i < c->n; i++) {
                Hierarchy *h = c->h + i;

                if (!h->roles || !h->made_leaf)
                        continue;
                r = cg_write(h->leaf, "cgroup.procs", buf);
                if (r < 0)
                        return r;
                attached = true;
        }
        /* After cgroup_remove() there is nothing to attach to. */
        return attached ? 0 : -ENOENT;
}

int cgroup_leaf_fd_v2(Cgroup *c) {
        const char *leaf = cgroup_leaf_path_v2(c);

        if (!leaf)
                return -EOPNOTSUPP;
        return cg_open_dir(leaf);
}

/* ---- killing ---- */

static int pid_compare(const void *a, const void *b) {
        pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

        return x < y ? -1 : x > y;
}

/* A cgroup cannot hold more processes than the kernel has pids (pid_max
 * is at most 2^22), which bounds what procs_read() allocates. */
#define PROCS_MAX (1U << 22)

/* Reads cgroup.procs of the cgroup open at @dfd into a new sorted array. */
static int procs_read(int dfd, pid_t **ret, size_t *ret_n) {
        _cleanup_free_ pid_t *pids = NULL;
        _cleanup_free_ char *line = NULL;
        size_t n = 0, alloc = 0, linesz = 0;
        FILE *f;
        int fd, r = 0;

        fd = openat(dfd, "cgroup.procs", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return negative_errno();
        f = fdopen(fd, "re");
        if (!f) {
                r = negative_errno();
                (void)close(fd);
                return r;
        }
        for (;;) {
                ssize_t k;
                int v;

                errno = 0;
                k = getline(&line, &linesz, f);
                if (k < 0) {
                        r = errno ? negative_errno() : 0;
                        break;
                }
                if (k > 0 && line[k - 1] == '\n')
                        line[k - 1] = '\0';
                if (safe_atoi(line, &v) < 0 || v <= 0) {
                        r = -EBADMSG;
                        break;
                }
                if (n >= PROCS_MAX) {
                        r = -E2BIG;
                        break;
                }
                if (n == alloc) {
                        size_t na = alloc ? alloc * 2 : 64;
                        pid_t *np = reallocarray(pids, na, sizeof(pid_t));

                        if (!np) {
                                r = -ENOMEM;
                                break;
                        }
                        pids = np;
                        alloc = na;
                }
                pids[n++] = (pid_t)v;
        }
        (void)fclose(f);
        if (r < 0)
                return r;
        if (n > 0)
                qsort(pids, n, sizeof(pid_t), pid_compare);
        *ret = TAKE_PTR(pids);
        *ret_n = n;
        return 0;
}

/* SIGKILLs the processes @pids of the cgroup open at @dfd.
 *
 * SECURITY: a pid read from cgroup.procs may belong to another process by
 * the time it is signalled (the process exited and was reaped, and the
 * number was reused). So each pid is pinned with a pidfd first, then
 * cgroup.procs is read again, and only pidfds whose pid is still listed
 * are signalled: a pidfd whose process is still alive at the signal held
 * its pid all along, so it is the process listed by the second read. A
 * dead one just fails with ESRCH. */
static int kill_batch(int dfd, const pid_t *pids, size_t n) {
        _cleanup_free_ pid_t *again = NULL;
        int fds[KILL_BATCH];
        bool no_pidfd = false;
        size_t n_again = 0;
        int r;

        assert(n <= KILL_BATCH);
        for (size_t i = 0; i < n; i++) {
                long fd = syscall(SYS_pidfd_open, pids[i], 0);

                fds[i] = fd < 0 ? -EBADF : (int)fd;
                no_pidfd = no_pidfd || (fd < 0 && errno == ENOSYS);
        }
        r = procs_read(dfd, &again, &n_again);
        for (size_t i = 0; r >= 0 && i < n; i++) {
                if (n_again == 0 || !bsearch(pids + i, again, n_again, sizeof(pid_t), pid_compare))
                        continue;
                if (fds[i] >= 0)
                        (void)syscall(SYS_pidfd_send_signal, fds[i], SIGKILL, NULL, 0);
                else if (no_pidfd)
                        /* COMPAT(kernel < 5.3): no pidfds. Still listed a
                         * moment ago; the window for a reuse is tiny, and
                         * none at all under the freezer. */
                        (void)kill(pids[i], SIGKILL);
        }
        for (size_t i = 0; i < n; i++)
                (void)safe_close(fds[i]);
        return r;
}

/* Takes @fd (a directory) and returns it as a DIR stream in @ret; @fd is
 * closed on failure too. */
static int dir_stream_take(int fd, DIR **ret) {
        DIR *d = fdopendir(fd);

        if (!d) {
                int r = negative_errno();

                (void)close(fd);
                return r;
        }
        *ret = d;
        return 0;
}

/* True for the entry of a child cgroup (a directory, not "." or ".."). */
static bool is_child_cgroup(const struct dirent *de) {
        return de->d_type == DT_DIR && strcmp(de->d_name, ".") != 0 &&
               strcmp(de->d_name, "..") != 0;
}

/* Counts (and with @do_kill, SIGKILLs) the processes in the cgroup open at
 * @dfd and in every cgroup below it; adds the count to @found. */
static int procs_walk(int dfd, bool do_kill, unsigned depth, size_t *found) {
        _cleanup_free_ pid_t *pids = NULL;
        _cleanup_(closedirp) DIR *d = NULL;
        size_t n = 0;
        int fd, r;

        if (depth > WALK_DEPTH_MAX)
                return -ELOOP;
        r = procs_read(dfd, &pids, &n);
        if (r < 0)
                return r;
        *found += n;
        for (size_t i = 0; do_kill && i < n; i += KILL_BATCH) {
                r = kill_batch(dfd, pids + i, MIN(n - i, (size_t)KILL_BATCH));
                if (r < 0)
                        return r;
        }

        fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        r = dir_stream_take(fd, &d);
        if (r < 0)
                return r;
        for (struct dirent *de; (de = readdir(d));) {
                _cleanup_close_ int sub = -EBADF;

                if (!is_child_cgroup(de))
                        continue;
                sub = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
                if (sub < 0) {
                        if (errno == ENOENT)
                                continue; /* removed meanwhile */
                        return negative_errno();
                }
                r = procs_walk(sub, do_kill, depth + 1, found);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int walk_path(const char *dir, bool do_kill, size_t *found) {
        _cleanup_close_ int dfd = -EBADF;

        dfd = cg_open_dir(dir);
        if (dfd < 0)
                return dfd == -ENOENT ? 0 : dfd;
        return procs_walk(dfd, do_kill, 0, found);
}

/* Waits until cgroup.events of @dir says "@key @want", or @deadline. */
static int events_wait(const char *dir, const char *key, uint64_t want, uint64_t deadline) {
        _cleanup_close_ int dfd = -EBADF, fd = -EBADF;

        dfd = cg_open_dir(dir);
        if (dfd < 0)
                return dfd;
        fd = openat(dfd, "cgroup.events", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return negative_errno();
        for (;;) {
                char buf[256];
                uint64_t v, now;
                ssize_t n;
                int r;

                n = pread(fd, buf, sizeof(buf) - 1, 0);
                if (n < 0)
                        return negative_errno();
                buf[n] = '\0';
                r = cg_keyed_value(buf, key, &v);
                if (r < 0)
                        return r;
                if (v == want)
                        return 0;
                now = time_monotonic_ms();
                if (now >= deadline)
                        return -ETIMEDOUT;
                /* kernfs signals a change of cgroup.events with POLLPRI;
                 * the 50 ms cap only guards against a missed wakeup. */
                (void)poll(&(struct pollfd){.fd = fd, .events = POLLPRI}, 1,
                           (int)MIN(deadline - now, (uint64_t)50));
        }
}

/* v1 freezer (or the v2 tree of a kernel without cgroup.kill). */
static int freezer_v1_set(const char *dir, bool frozen, uint64_t deadline) {
        const char *want = frozen ? "FROZEN" : "THAWED";
        unsigned step = 0;
        int r;

        r = cg_write(dir, "freezer.state", want);
        if (r < 0)
                return r;
        for (;;) {
                _cleanup_free_ char *s = NULL;

                r = cg_read(dir, "freezer.state", &s);
                if (r < 0)
                        return r;
                if (strncmp(s, want, strlen(want)) == 0 &&
                    (s[strlen(want)] == '\n' || s[strlen(want)] == '\0'))
                        return 0;
                if (time_monotonic_ms() >= deadline)
                        return -ETIMEDOUT;
                backoff(&step);
        }
}

/* Kills everything in the v1 hierarchies of @c (and, with @v2_fallback,
 * in its v2 tree), freezing first when a freezer is there. */
static int kill_by_walking(Cgroup *c, bool v2_fallback, uint64_t deadline) {
        Hierarchy *fz = cgroup_role(c, ROLE_FREEZER);
        Hierarchy *v2 = cgroup_role(c, ROLE_KILL);
        unsigned step = 0;
        size_t found;
        int r;

        if (fz && fz->made_dir) {
                /* Frozen tasks cannot fork or exit, so one pass over a
                 * frozen tree gets them all; SIGKILL acts on thaw. */
                (void)freezer_v1_set(fz->dir, true,
                                     MIN(deadline, time_monotonic_ms() + FREEZE_WAIT_MS));
                found = 0;
                r = walk_path(fz->dir, true, &found);
                (void)freezer_v1_set(fz->dir, false, deadline);
                if (r < 0)
                        return r;
        } else if (v2_fallback && v2 && v2->made_dir &&
                   cg_write(v2->dir, "cgroup.freeze", "1") >= 0) {
                (void)events_wait(v2->dir, "frozen", 1,
                                  MIN(deadline, time_monotonic_ms() + FREEZE_WAIT_MS));
                found = 0;
                r = walk_path(v2->dir, true, &found);
                (void)cg_write(v2->dir, "cgroup.freeze", "0");
                if (r < 0)
                        return r;
        }

        /* Without a freezer, or for what is still dying: kill passes until
         * every tree is empty. */
        for (;;) {
                found = 0;
                for (size_t i = 0; i < c->n; i++) {
                        Hierarchy *h = c->h + i;

                        if (!h->roles || !h->made_dir)
                                continue;
                        if (h->version == CGROUP_VERSION_2 && !v2_fallback)
                                continue;
                        r = walk_path(h->dir, true, &found);
                        if (r < 0)
                                return r;
                }
                if (found == 0)
                        return 0;
                if (time_monotonic_ms() >= deadline)
                        return -ETIMEDOUT;
                backoff(&step);
        }
}

int cgroup_kill(Cgroup *c) {
        uint64_t deadline = time_monotonic_ms() + SETTLE_TIMEOUT_MS;
        Hierarchy *v2;
        bool fallback = false;
        int r;

        if (!c)
                return -EINVAL;
        v2 = cgroup_role(c, ROLE_KILL);
        /* An empty cgroup needs no kill, and writing cgroup.kill takes the
         * threadgroup rwsem for writing, which waits for an RCU grace
         * period (~10 ms) unless one passed lately: a finished exec's
         * cgroup is checked first (a deadline of 0: one read). */
        if (v2 && v2->made_dir && events_wait(v2->dir, "populated", 0, 0) == 0)
                v2 = NULL;
        if (v2 && v2->made_dir) {
                r = cg_write(v2->dir, "cgroup.kill", "1");
                if (r == -ENOENT)
                        fallback = true; /* COMPAT(kernel < 5.14): no cgroup.kill */
                else if (r < 0)
                        return r;
                else {
                        r = events_wait(v2->dir, "populated", 0, deadline);
                        if (r < 0)
                                return r;
                }
        }
        /* Also sweeps v1 hierarchies after a v2 kill: a process attached
         * to v1 only (a half-failed attach) must not survive either. */
        return kill_by_walking(c, fallback, deadline);
}

static int counter_read(const char *dir, const char *file, const char *key, uint64_t *ret);

int cgroup_update_limits(Cgroup *c, const CgroupLimits *lim, HutchError *reterr) {
        static const struct {
                unsigned role;
                const char *what;
        } roles[] = {
                {ROLE_MEMORY, "memory"},
                {ROLE_PIDS, "pids"},
                {ROLE_CPU, "cpu"},
        };
        unsigned have = 0, want;
        char buf[32];
        int r;

        r = limits_validate(lim, reterr);
        if (r < 0)
                return r;
        for (size_t i = 0; i < c->n; i++)
                have |= c->h[i].limits;
        want = (lim->memory_max ? ROLE_MEMORY : 0) | (lim->pids_max ? ROLE_PIDS : 0) |
               (lim->cpu_quota_us ? ROLE_CPU : 0);
        for (size_t i = 0; i < ELEMENTSOF(roles); i++) {
                if ((want & roles[i].role) && !(have & roles[i].role))
                        return hutch_error_set(
                                reterr, EOPNOTSUPP,
                                "the sandbox runs without a %s limit, so none can be "
                                "added while it runs (stop it first)",
                                roles[i].what);
                if ((have & roles[i].role) && !(want & roles[i].role))
                        return hutch_error_set(reterr, EOPNOTSUPP,
                                               "the %s limit of a running sandbox cannot be lifted "
                                               "(stop it first)",
                                               roles[i].what);
        }
        for (size_t i = 0; i < c->n; i++) {
                Hierarchy *h = c->h + i;
                uint64_t old = 0;

                /* v1 wants memory <= memory+swap at every step. */
                if (!(h->limits & ROLE_MEMORY) || h->version == CGROUP_VERSION_2 ||
                    counter_read(h->dir, "memory.limit_in_bytes", NULL, &old) < 0 ||
                    lim->memory_max <= old)
                        continue;
                (void)snprintf(buf, sizeof(buf), "%" PRIu64,
                               lim->memory_max + lim->memory_swap_max);
                r = cg_write(h->dir, "memory.memsw.limit_in_bytes", buf);
                if (r < 0 && r != -ENOENT)
                        return hutch_error_set(reterr, -r,
                                               "cannot raise %s/memory.memsw.limit_in_bytes to %s: "
                                               "%s",
                                               h->dir, buf, strerror(-r));
        }
        return limits_apply(c, lim, reterr);
}

int cgroup_set_frozen(Cgroup *c, bool frozen) {
        uint64_t deadline = time_monotonic_ms() + SETTLE_TIMEOUT_MS;
        Hierarchy *h;
        int r;

        if (!c)
                return -EINVAL;
        h = cgroup_role(c, ROLE_KILL);
        if (h && h->made_dir) {
                r = cg_write(h->dir, "cgroup.freeze", frozen ? "1" : "0");
                if (r < 0)
                        return r == -ENOENT ? -EOPNOTSUPP : r;
                return events_wait(h->dir, "frozen", frozen ? 1 : 0, deadline);
        }
        h = cgroup_role(c, ROLE_FREEZER);
        if (h && h->made_dir)
                return freezer_v1_set(h->dir, frozen, deadline);
        return -EOPNOTSUPP;
}

/* ---- counters ---- */

/* Reads the counter @key of @file in @dir; a missing key reads as 0. */
static int counter_read(const char *dir, const char *file, const char *key, uint64_t *ret) {
        _cleanup_free_ char *s = NULL;
        int r;

        r = cg_read(dir, file, &s);
        if (r < 0)
                return r;
        if (!key) {
                size_t n = strlen(s);

                if (n > 0 && s[n - 1] == '\n')
                        s[n - 1] = '\0';
                return safe_atou64(s, ret) < 0 ? -EBADMSG : 0;
        }
        r = cg_keyed_value(s, key, ret);
        if (r == -ENOENT) {
                *ret = 0;
                return 0;
        }
        return r;
}

/* Adds the counter @key of @file in @dir to @sum (saturating). */
static int counter_add(const char *dir, const char *file, const char *key, uint64_t *sum) {
        uint64_t v;
        int r;

        r = counter_read(dir, file, key, &v);
        if (r < 0)
                return r;
        *sum = UINT64_MAX - *sum < v ? UINT64_MAX : *sum + v;
        return 0;
}

/* True when the cgroup directory open at @fd has no child cgroup: kernfs
 * gives a directory 2 + its subdirectories as link count. False (list it)
 * when unsure. */
static bool cg_dir_is_leaf(int fd) {
        struct stat st;

        return fstat(fd, &st) >= 0 && S_ISDIR(st.st_mode) && st.st_nlink == 2;
}

/* Sums the counter @key of @file over the leaf cgroups of the tree at
 * @dir (the cgroups without children, where processes live).
 *
 * v1 keeps memory.oom_control "oom_kill" and pids.events "max" per cgroup
 * where the event happened (the forking or OOM-killed task's cgroup, so
 * our leaf), while a v2 hierarchy counts them at the limited cgroup and up.
 * Processes only ever sit in leaves, so the sum over leaves is the total
 * with either rule. */
static int counter_sum_leaves(const char *dir, const char *file, const char *key, unsigned depth,
                              uint64_t *sum) {
        _cleanup_(closedirp) DIR *d = NULL;
        bool has_children = false;
        int fd, r;

        if (depth > WALK_DEPTH_MAX)
                return -ELOOP;
        fd = cg_open_dir(dir);
        if (fd < 0)
                return fd;
        /* kernfs counts a directory's subdirectories in its link count
         * (2 + children): a leaf needs no listing (issue 16). */
        if (cg_dir_is_leaf(fd)) {
                (void)close(fd);
                return counter_add(dir, file, key, sum);
        }
        r = dir_stream_take(fd, &d);
        if (r < 0)
                return r;
        for (struct dirent *de; (de = readdir(d));) {
                _cleanup_free_ char *sub = NULL;

                if (!is_child_cgroup(de))
                        continue;
                sub = cg_path_join(dir, de->d_name);
                if (!sub)
                        return -ENOMEM;
                r = counter_sum_leaves(sub, file, key, depth + 1, sum);
                if (r == -ENOENT)
                        continue; /* removed meanwhile */
                if (r < 0)
                        return r;
                has_children = true;
        }
        if (has_children)
                return 0;
        return counter_add(dir, file, key, sum);
}

int cgroup_stats(Cgroup *c, CgroupStats *ret) {
        CgroupStats st = {};
        const Hierarchy *h;
        uint64_t v;
        int r;

        if (!c || !ret)
                return -EINVAL;

        h = cgroup_role(c, ROLE_MEMORY | ROLE_MEM_STATS);
        if (h && h->made_dir) {
                bool v2 = h->version == CGROUP_VERSION_2;

                if (v2)
                        r = counter_read(h->dir, "memory.events", "oom_kill", &st.oom_kills);
                else
                        r = counter_sum_leaves(h->dir, "memory.oom_control", "oom_kill", 0,
                                               &st.oom_kills);
                /* A v2 cgroup kept for counters only may lack the memory
                 * controller (enabling it is best effort): no counters. */
                if (r < 0 && !(r == -ENOENT && !(h->limits & ROLE_MEMORY)))
                        return r;
                if (r >= 0) {
                        r = counter_read(h->dir, v2 ? "memory.peak" : "memory.max_usage_in_bytes",
                                         NULL, &st.mem_peak_bytes);
                        if (r >= 0)
                                st.have_mem_peak = true;
                        else if (r != -ENOENT) /* COMPAT(kernel < 5.19): no memory.peak */
                                return r;
                }
        }
        h = cgroup_role(c, ROLE_PIDS);
        if (h && h->made_dir) {
                if (h->version == CGROUP_VERSION_2)
                        r = counter_read(h->dir, "pids.events", "max", &st.pids_max_events);
                else
                        r = counter_sum_leaves(h->dir, "pids.events", "max", 0,
                                               &st.pids_max_events);
                if (r < 0)
                        return r;
        }
        h = cgroup_role(c, ROLE_KILL);
        if (h && h->made_dir) {
                r = counter_read(h->dir, "cpu.stat", "usage_usec", &st.cpu_usec);
                if (r < 0)
                        return r;
                st.have_cpu = true;
        } else if ((h = cgroup_role(c, ROLE_CPUACCT)) && h->made_dir) {
                r = counter_read(h->dir, "cpuacct.usage", NULL, &v);
                if (r < 0)
                        return r;
                st.cpu_usec = v / 1000U;
                st.have_cpu = true;
        }
        *ret = st;
        return 0;
}

/* ---- removal ---- */

static int rmdir_retry(const char *path, uint64_t deadline) {
        unsigned step = 0;

        for (;;) {
                if (rmdir(path) >= 0 || errno == ENOENT)
                        return 0;
                if (errno != EBUSY)
                        return negative_errno();
                if (time_monotonic_ms() >= deadline)
                        return -EBUSY;
                backoff(&step);
        }
}

/* Removes @path and every cgroup below it, deepest first. */
static int rmdir_tree(const char *path, unsigned depth, uint64_t deadline) {
        _cleanup_(closedirp) DIR *d = NULL;
        int fd, r = 0;

        if (depth > WALK_DEPTH_MAX)
                return -ELOOP;
        fd = cg_open_dir(path);
        if (fd == -ENOENT)
                return 0;
        if (fd < 0)
                return fd;
        r = dir_stream_take(fd, &d);
        if (r < 0)
                return r;
        for (struct dirent *de; (de = readdir(d));) {
                _cleanup_free_ char *sub = NULL;
                int k;

                if (!is_child_cgroup(de))
                        continue;
                sub = cg_path_join(path, de->d_name);
                if (!sub)
                        return -ENOMEM;
                k = rmdir_tree(sub, depth + 1, deadline);
                if (k < 0 && r >= 0)
                        r = k;
        }
        closedirp(&d);
        {
                int k = rmdir_retry(path, deadline);

                if (k < 0 && r >= 0)
                        r = k;
        }
        return r;
}

int cgroup_remove_tree(const char *path) {
        if (!path)
                return -EINVAL;
        /* A deadline that has passed: one rmdir each, no retry. */
        return rmdir_tree(path, 0, time_monotonic_ms());
}

static int hierarchy_remove(Hierarchy *h) {
        uint64_t deadline = time_monotonic_ms() + SETTLE_TIMEOUT_MS;
        int r = 0;

        if (h->made_dir) {
                r = rmdir_tree(h->dir, 0, deadline);
                if (r >= 0)
                        h->made_dir = h->made_leaf = false;
        } else if (h->made_leaf) {
                r = rmdir_tree(h->leaf, 0, deadline);
                if (r >= 0)
                        h->made_leaf = false;
        }
        return r;
}

/* Removes what cgroup_new() made of @h, the leaf then its parent, with
 * one rmdir each and no walk. The kernel refuses to remove a cgroup that
 * holds a process or has a child (EBUSY), so success proves that nothing
 * was left there to kill. Returns false at the first refusal, with what
 * is left still marked for the full path. */
static bool hierarchy_remove_empty(Hierarchy *h) {
        if (h->made_leaf && strcmp(h->leaf, h->dir) != 0) {
                if (rmdir(h->leaf) < 0 && errno != ENOENT)
                        return false;
                h->made_leaf = false;
        }
        if (h->made_dir) {
                if (rmdir(h->dir) < 0 && errno != ENOENT)
                        return false;
                h->made_dir = h->made_leaf = false;
        }
        return true;
}

int cgroup_remove(Cgroup *c) {
        bool any = false, all = true;
        int r = 0;

        if (!c)
                return -EINVAL;
        for (size_t i = 0; i < c->n; i++)
                any = any || c->h[i].made_dir || c->h[i].made_leaf;
        if (!any)
                return 0;

        /* The usual end (issue 16): everything already exited, so plain
         * rmdirs do it without the kill's and the removal's walks. A
         * hierarchy that refuses goes the full way below: the kill walks
         * what is still there, and a process can only be in a cgroup that
         * is still there. */
        for (size_t i = 0; i < c->n; i++)
                if (c->h[i].made_dir || c->h[i].made_leaf)
                        all = hierarchy_remove_empty(c->h + i) && all;
        if (all)
                return 0;

        r = cgroup_kill(c);
        for (size_t i = 0; i < c->n; i++) {
                int k = hierarchy_remove(c->h + i);

                if (k < 0 && r >= 0)
                        r = k;
        }
        return r;
}

int cgroup_destroy(Cgroup *c) {
        int r;

        if (!c)
                return 0;
        r = cgroup_remove(c);
        cgroup_free(c);
        return r;
}

/* ---- rlimits ---- */

/* Lowers the soft and hard limit of @resource to @value (never raises:
 * the hard limit caps it). */
static int rlimit_lower(int resource, uint64_t value) {
        struct rlimit rl;
        rlim_t v = value >= (uint64_t)RLIM_INFINITY ? RLIM_INFINITY : (rlim_t)value;

        if (getrlimit(resource, &rl) < 0)
                return negative_errno();
        if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < v)
                v = rl.rlim_max;
        rl.rlim_cur = rl.rlim_max = v;
        if (setrlimit(resource, &rl) < 0)
                return negative_errno();
        return 0;
}

int rlimits_apply(const CgroupLimits *lim) {
        int r;

        if (!lim)
                return -EINVAL;
        if (lim->memory_max > 0) {
                if (lim->memory_swap_max > UINT64_MAX - lim->memory_max)
                        return -EINVAL;
                r = rlimit_lower(RLIMIT_AS, lim->memory_max + lim->memory_swap_max);
                if (r < 0)
                        return r;
        }
        if (lim->pids_max > 0) {
                r = rlimit_lower(RLIMIT_NPROC, lim->pids_max);
                if (r < 0)
                        return r;
        }
        return 0;
}
