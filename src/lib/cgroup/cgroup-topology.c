/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup/cgroup-internal.h"
#include "cgroup/cgroup.h"
#include "fd-util.h"
#include "macro.h"
#include "parse-util.h"

/* mountinfo grows with the number of mounts: 16 MiB is far above any real
 * system and still bounded. /proc/self/cgroup has one short line per
 * hierarchy. */
#define MOUNTINFO_MAX (16U * 1024U * 1024U)
#define PROC_CGROUP_MAX (64U * 1024U)

#define HUTCH_BASE_DIR "hutch"

static const char *const controller_table[_CGROUP_CONTROLLER_MAX] = {
        [CGROUP_MEMORY] = "memory",
        [CGROUP_PIDS] = "pids",
        [CGROUP_CPU] = "cpu",
};

const char *cgroup_controller_to_string(CgroupController c) {
        if (c < 0 || c >= _CGROUP_CONTROLLER_MAX)
                return NULL;
        return controller_table[c];
}

CgroupController cgroup_controller_from_string(const char *s) {
        if (!s)
                return _CGROUP_CONTROLLER_INVALID;
        for (int i = 0; i < _CGROUP_CONTROLLER_MAX; i++)
                if (strcmp(s, controller_table[i]) == 0)
                        return (CgroupController)i;
        return _CGROUP_CONTROLLER_INVALID;
}

static const char *const version_table[_CGROUP_VERSION_MAX] = {
        [CGROUP_VERSION_NONE] = "none",
        [CGROUP_VERSION_1] = "v1",
        [CGROUP_VERSION_2] = "v2",
};

const char *cgroup_version_to_string(CgroupVersion v) {
        if (v < 0 || v >= _CGROUP_VERSION_MAX)
                return NULL;
        return version_table[v];
}

CgroupVersion cgroup_version_from_string(const char *s) {
        if (!s)
                return _CGROUP_VERSION_INVALID;
        for (int i = 0; i < _CGROUP_VERSION_MAX; i++)
                if (strcmp(s, version_table[i]) == 0)
                        return (CgroupVersion)i;
        return _CGROUP_VERSION_INVALID;
}

static void place_done(CgroupPlace *p) {
        free(p->mount);
        free(p->base);
        *p = (CgroupPlace){};
}

void cgroup_topology_done(CgroupTopology *t) {
        if (!t)
                return;
        for (size_t i = 0; i < ELEMENTSOF(t->controllers); i++)
                place_done(t->controllers + i);
        place_done(&t->v2);
        place_done(&t->freezer);
        place_done(&t->cpuacct);
        *t = (CgroupTopology){};
}

static void cgroup_topology_donep(CgroupTopology *t) {
        cgroup_topology_done(t);
}

/* ---- parsing ---- */

typedef struct Span {
        const char *p;
        size_t n;
} Span;

static bool span_is(Span s, const char *w) {
        return s.n == strlen(w) && strncmp(s.p, w, s.n) == 0;
}

static int span_to_u32(Span s, uint32_t *ret) {
        char buf[16];

        if (s.n == 0 || s.n >= sizeof(buf))
                return -EBADMSG;
        memcpy(buf, s.p, s.n);
        buf[s.n] = '\0';
        return safe_atou32(buf, ret) < 0 ? -EBADMSG : 0;
}

/* Decodes mountinfo's octal escapes (\040 is a space) of @s. A backslash
 * not followed by three octal digits, or an escaped NUL, is -EBADMSG. */
static int unescape(Span s, char **ret) {
        _cleanup_free_ char *out = NULL;
        size_t j = 0;

        out = malloc(s.n + 1);
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < s.n; i++) {
                unsigned v = 0;

                if (s.p[i] != '\\') {
                        out[j++] = s.p[i];
                        continue;
                }
                if (s.n - i < 4)
                        return -EBADMSG;
                for (size_t k = 1; k <= 3; k++) {
                        if (s.p[i + k] < '0' || s.p[i + k] > '7')
                                return -EBADMSG;
                        v = v * 8 + (unsigned)(s.p[i + k] - '0');
                }
                if (v == 0 || v > 0377)
                        return -EBADMSG;
                out[j++] = (char)v;
                i += 3;
        }
        out[j] = '\0';
        *ret = TAKE_PTR(out);
        return 0;
}

/* The hierarchies the parser keeps: the v2 one and the v1 ones that serve
 * a controller hutch uses. */
typedef enum Hier {
        HIER_V2,
        HIER_MEMORY,
        HIER_PIDS,
        HIER_CPU,
        HIER_CPUACCT,
        HIER_FREEZER,
        _HIER_MAX,
} Hier;

static const char *const hier_v1_name[_HIER_MAX] = {
        [HIER_MEMORY] = "memory",   [HIER_PIDS] = "pids",       [HIER_CPU] = "cpu",
        [HIER_CPUACCT] = "cpuacct", [HIER_FREEZER] = "freezer",
};

typedef struct Found {
        char *mount; /* mount point */
        char *root;  /* the part of the hierarchy mounted there */
} Found;

static void found_done(Found *f) {
        free(f->mount);
        free(f->root);
        *f = (Found){};
}

/* Splits a mountinfo line into its fixed fields: 6 before the optional
 * fields and the "-" separator, 3 after it. */
static int mountinfo_split(Span line, Span head[static 6], Span tail[static 3]) {
        size_t n_head = 0, n_tail = 0;
        bool after_sep = false;
        const char *p = line.p, *end = line.p + line.n;

        while (p <= end) {
                const char *sp = memchr(p, ' ', (size_t)(end - p));
                Span f = {p, sp ? (size_t)(sp - p) : (size_t)(end - p)};

                p = sp ? sp + 1 : end + 1;
                if (f.n == 0)
                        return -EBADMSG;
                if (!after_sep) {
                        if (n_head < 6)
                                head[n_head++] = f;
                        else if (span_is(f, "-"))
                                after_sep = true;
                        /* else: an optional field (shared:N, master:N) */
                } else if (n_tail < 3)
                        tail[n_tail++] = f;
                /* else: more super options cannot contain spaces; the
                 * kernel escapes them, so an extra field is garbage */
                else
                        return -EBADMSG;
        }
        if (n_head < 6 || !after_sep || n_tail < 3)
                return -EBADMSG;
        return 0;
}

/* Checks the numeric fields of a split line: mount id, parent id, MAJ:MIN. */
static int mountinfo_check_ids(Span head[static 6]) {
        const char *colon;
        uint32_t u;

        if (span_to_u32(head[0], &u) < 0 || span_to_u32(head[1], &u) < 0)
                return -EBADMSG;
        colon = memchr(head[2].p, ':', head[2].n);
        if (!colon)
                return -EBADMSG;
        if (span_to_u32((Span){head[2].p, (size_t)(colon - head[2].p)}, &u) < 0 ||
            span_to_u32((Span){colon + 1, head[2].n - (size_t)(colon + 1 - head[2].p)}, &u) < 0)
                return -EBADMSG;
        return 0;
}

/* Keeps the mount of @line in @found[h] when it is the first of its
 * hierarchy, or the first whose root is "/". Takes nothing on failure. */
static int found_offer(Found *f, const char *mount, const char *root) {
        if (f->mount && (strcmp(f->root, "/") == 0 || strcmp(root, "/") != 0))
                return 0;
        found_done(f);
        f->mount = strdup(mount);
        f->root = strdup(root);
        if (!f->mount || !f->root)
                return -ENOMEM;
        return 0;
}

static int mountinfo_parse_line(Span line, Found found[static _HIER_MAX]) {
        _cleanup_free_ char *root = NULL, *mount = NULL;
        Span head[6], tail[3];
        bool v2;
        int r;

        r = mountinfo_split(line, head, tail);
        if (r < 0)
                return r;
        r = mountinfo_check_ids(head);
        if (r < 0)
                return r;
        /* Decode every line's paths, cgroup or not: garbage is garbage. */
        r = unescape(head[3], &root);
        if (r < 0)
                return r;
        r = unescape(head[4], &mount);
        if (r < 0)
                return r;
        if (mount[0] != '/')
                return -EBADMSG;

        v2 = span_is(tail[0], "cgroup2");
        if (!v2 && !span_is(tail[0], "cgroup"))
                return 0;
        /* Only here: another filesystem's root is what it shows, not
         * always a path (nsfs: "net:[4026532200]", the network namespace
         * files of docker and `ip netns`). */
        if (root[0] != '/')
                return -EBADMSG;
        if (!path_is_safe_absolute(mount))
                return -EBADMSG;
        /* In a cgroup namespace, a cgroupfs mounted from outside of it
         * shows a root such as "/../.."; our own cgroup is then not
         * reachable below that mount, so skip it rather than fail. */
        if (!path_is_safe_absolute(root))
                return 0;
        if (v2)
                return found_offer(found + HIER_V2, mount, root);

        for (const char *p = tail[2].p, *end = tail[2].p + tail[2].n; p < end;) {
                const char *comma = memchr(p, ',', (size_t)(end - p));
                Span o = {p, comma ? (size_t)(comma - p) : (size_t)(end - p)};

                p = comma ? comma + 1 : end;
                for (Hier h = HIER_MEMORY; h < _HIER_MAX; h++)
                        if (span_is(o, hier_v1_name[h])) {
                                r = found_offer(found + h, mount, root);
                                if (r < 0)
                                        return r;
                        }
        }
        return 0;
}

/* Looks up our own cgroup in @text: the "0::PATH" line for @controller
 * NULL, else the v1 line whose controller list has @controller. Every
 * line is checked. Returns 1 and a borrowed span of PATH, 0 if there is no
 * such line, -EBADMSG. */
static int proc_cgroup_find(const char *text, const char *controller, Span *ret) {
        Span found = {};
        bool have = false;

        for (const char *p = text; *p;) {
                size_t n = strcspn(p, "\n");
                const char *end = p + n, *c1, *c2;
                uint32_t id;

                if (n > 0) {
                        Span list;

                        c1 = memchr(p, ':', n);
                        c2 = c1 ? memchr(c1 + 1, ':', (size_t)(end - c1 - 1)) : NULL;
                        if (!c2 || c2 + 1 >= end || c2[1] != '/' ||
                            span_to_u32((Span){p, (size_t)(c1 - p)}, &id) < 0)
                                return -EBADMSG;
                        list = (Span){c1 + 1, (size_t)(c2 - c1 - 1)};
                        if (!have) {
                                bool match = false;

                                if (!controller)
                                        match = id == 0 && list.n == 0;
                                else
                                        for (const char *q = list.p; q < list.p + list.n;) {
                                                const char *e = list.p + list.n;
                                                const char *cm = memchr(q, ',', (size_t)(e - q));
                                                Span w = {q,
                                                          cm ? (size_t)(cm - q) : (size_t)(e - q)};

                                                match = match || span_is(w, controller);
                                                q = cm ? cm + 1 : e;
                                        }
                                if (match) {
                                        found = (Span){c2 + 1, (size_t)(end - c2 - 1)};
                                        have = true;
                                }
                        }
                }
                p = end;
                if (*p == '\n')
                        p++;
        }
        if (!have)
                return 0;
        *ret = found;
        return 1;
}

/* The directory of cgroup @self (a path within the hierarchy) below the
 * mount of @f: -ENOENT when @self lies outside the mounted part. */
static int found_dir(const Found *f, const char *self, char **ret) {
        size_t k = strlen(f->root);
        const char *rel;
        char *d;

        if (strcmp(f->root, "/") == 0)
                rel = self;
        else if (strncmp(self, f->root, k) == 0 && (self[k] == '\0' || self[k] == '/'))
                rel = self + k;
        else
                return -ENOENT;
        while (*rel == '/')
                rel++;
        if (*rel == '\0')
                d = strdup(f->mount);
        else
                d = cg_path_join(strcmp(f->mount, "/") == 0 ? "" : f->mount, rel);
        if (!d)
                return -ENOMEM;
        *ret = d;
        return 0;
}

/* Strips trailing slashes of a path (keeping "/"). */
static void path_trim(char *p) {
        size_t n = strlen(p);

        while (n > 1 && p[n - 1] == '/')
                p[--n] = '\0';
}

/* Fills @place for hierarchy @h found at @f. */
static int place_fill(CgroupPlace *place, Hier h, const Found *f, const char *proc_self_cgroup,
                      bool privileged) {
        _cleanup_free_ char *self = NULL, *dir = NULL;
        Span s;
        int r;

        if (!f->mount)
                return 0;
        *place = (CgroupPlace){.version = h == HIER_V2 ? CGROUP_VERSION_2 : CGROUP_VERSION_1};
        place->mount = strdup(f->mount);
        if (!place->mount)
                return -ENOMEM;

        if (privileged) {
                place->base =
                        cg_path_join(strcmp(f->mount, "/") == 0 ? "" : f->mount, HUTCH_BASE_DIR);
                if (!place->base)
                        return -ENOMEM;
                place->create_base = true;
                return 0;
        }

        r = proc_cgroup_find(proc_self_cgroup, h == HIER_V2 ? NULL : hier_v1_name[h], &s);
        if (r <= 0)
                return r;
        self = strndup(s.p, s.n);
        if (!self)
                return -ENOMEM;
        if (!path_is_safe_absolute(self))
                return -EBADMSG;
        path_trim(self);
        r = found_dir(f, self, &dir);
        if (r == -ENOENT)
                return 0; /* our cgroup is not visible through this mount */
        if (r < 0)
                return r;
        if (h == HIER_V2) {
                /* systemd delegates a subtree the user owns, and the
                 * user's scope sits in it: hutch creates its cgroups next
                 * to the scope. Never go above the mount point. */
                char *slash = strrchr(dir, '/');

                if (strcmp(dir, f->mount) == 0 || !slash ||
                    (size_t)(slash - dir) < strlen(f->mount))
                        return 0;
                *slash = '\0';
                if (dir[0] == '\0')
                        return 0;
        }
        place->base = TAKE_PTR(dir);
        return 0;
}

static int place_copy(CgroupPlace *dst, const CgroupPlace *src) {
        *dst = (CgroupPlace){.version = src->version,
                             .create_base = src->create_base,
                             .writable = src->writable};
        if (src->mount && !(dst->mount = strdup(src->mount)))
                return -ENOMEM;
        if (src->base && !(dst->base = strdup(src->base)))
                return -ENOMEM;
        return 0;
}

int cgroup_topology_parse(const char *mountinfo, const char *proc_self_cgroup, bool privileged,
                          CgroupTopology *ret) {
        _cleanup_(cgroup_topology_donep) CgroupTopology t = {.privileged = privileged};
        CgroupPlace v1[_HIER_MAX] = {};
        Found found[_HIER_MAX] = {};
        Span dummy;
        int r = 0;

        if (!mountinfo || !proc_self_cgroup)
                return -EINVAL;

        /* Validate all of /proc/self/cgroup up front, whoever we are. */
        r = proc_cgroup_find(proc_self_cgroup, NULL, &dummy);
        if (r < 0)
                return r;

        for (const char *p = mountinfo; *p;) {
                size_t n = strcspn(p, "\n");

                if (n > 0) {
                        r = mountinfo_parse_line((Span){p, n}, found);
                        if (r < 0)
                                goto finish;
                }
                p += n;
                if (*p == '\n')
                        p++;
        }

        r = place_fill(&t.v2, HIER_V2, found + HIER_V2, proc_self_cgroup, privileged);
        for (Hier h = HIER_MEMORY; r >= 0 && h < _HIER_MAX; h++)
                r = place_fill(v1 + h, h, found + h, proc_self_cgroup, privileged);
        if (r < 0)
                goto finish;

        /* Per controller: the v1 hierarchy mounted for it, else (to be
         * confirmed by the probe) the v2 one. */
        static const Hier ctrl_hier[_CGROUP_CONTROLLER_MAX] = {
                [CGROUP_MEMORY] = HIER_MEMORY,
                [CGROUP_PIDS] = HIER_PIDS,
                [CGROUP_CPU] = HIER_CPU,
        };
        for (CgroupController c = 0; r >= 0 && c < _CGROUP_CONTROLLER_MAX; c++)
                r = place_copy(t.controllers + c, v1[ctrl_hier[c]].version != CGROUP_VERSION_NONE
                                                          ? v1 + ctrl_hier[c]
                                                          : &t.v2);
        if (r < 0)
                goto finish;
        t.freezer = v1[HIER_FREEZER];
        v1[HIER_FREEZER] = (CgroupPlace){};
        t.cpuacct = v1[HIER_CPUACCT];
        v1[HIER_CPUACCT] = (CgroupPlace){};

        *ret = t;
        t = (CgroupTopology){};
        r = 0;
finish:
        for (Hier h = 0; h < _HIER_MAX; h++) {
                found_done(found + h);
                place_done(v1 + h);
        }
        return r;
}

/* ---- probing ---- */

/* Whether @place's base can be used: see cgroup_topology_probe(). */
static bool place_probe_writable(const CgroupPlace *place) {
        bool v2 = place->version == CGROUP_VERSION_2;
        struct stat st;

        if (!place->base)
                return false;
        if (stat(place->base, &st) >= 0) {
                if (!S_ISDIR(st.st_mode))
                        return false;
                return cg_writable(place->base, NULL) && cg_writable(place->base, "cgroup.procs") &&
                       (!v2 || cg_writable(place->base, "cgroup.subtree_control"));
        }
        if (!place->create_base || errno != ENOENT)
                return false;
        /* Created on first use below the mount point. */
        return cg_writable(place->mount, NULL) &&
               (!v2 || cg_writable(place->mount, "cgroup.subtree_control"));
}

int cgroup_topology_probe(CgroupTopology *t) {
        _cleanup_free_ char *offered = NULL;

        if (!t)
                return -EINVAL;

        t->v2.writable = t->v2.version == CGROUP_VERSION_2 && place_probe_writable(&t->v2);
        if (t->v2.version == CGROUP_VERSION_2) {
                /* A created-on-demand base gets its controllers from the
                 * mount point, where hutch enables them itself; any other
                 * base can only hand out what its parent gave it. */
                const char *from = t->v2.create_base ? t->v2.mount : t->v2.base;
                int r = from ? cg_read(from, "cgroup.controllers", &offered) : -ENOENT;

                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        offered = NULL;
        }

        for (CgroupController c = 0; c < _CGROUP_CONTROLLER_MAX; c++) {
                CgroupPlace *p = t->controllers + c;

                if (p->version == CGROUP_VERSION_2) {
                        if (!cg_word_in_list(offered, cgroup_controller_to_string(c), " \n")) {
                                place_done(p);
                                continue;
                        }
                        p->writable = t->v2.writable;
                } else
                        p->writable = p->version == CGROUP_VERSION_1 && place_probe_writable(p);
        }
        t->freezer.writable =
                t->freezer.version == CGROUP_VERSION_1 && place_probe_writable(&t->freezer);
        t->cpuacct.writable =
                t->cpuacct.version == CGROUP_VERSION_1 && place_probe_writable(&t->cpuacct);
        return 0;
}

/* Applies $HUTCH_CGROUP_BASE_V2 to the v2 place. */
static int topology_apply_env(CgroupTopology *t, const char *env) {
        _cleanup_free_ char *base = NULL;
        size_t k;
        struct stat st;

        if (t->v2.version != CGROUP_VERSION_2)
                return -EINVAL;
        if (!path_is_safe_absolute(env))
                return -EINVAL;
        base = strdup(env);
        if (!base)
                return -ENOMEM;
        path_trim(base);
        k = strlen(t->v2.mount);
        if (strncmp(base, t->v2.mount, k) != 0 || base[k] != '/')
                return -EINVAL;
        if (stat(base, &st) < 0 || !S_ISDIR(st.st_mode))
                return -EINVAL;
        free(t->v2.base);
        t->v2.base = TAKE_PTR(base);
        t->v2.create_base = false;
        for (CgroupController c = 0; c < _CGROUP_CONTROLLER_MAX; c++) {
                CgroupPlace *p = t->controllers + c;

                if (p->version != CGROUP_VERSION_2)
                        continue;
                free(p->base);
                p->base = strdup(t->v2.base);
                if (!p->base)
                        return -ENOMEM;
                p->create_base = false;
        }
        return 0;
}

int cgroup_topology_detect(CgroupTopology *ret) {
        _cleanup_(cgroup_topology_donep) CgroupTopology t = {};
        _cleanup_free_ char *mountinfo = NULL, *self = NULL;
        const char *env;
        int r;

        if (!ret)
                return -EINVAL;
        r = read_full_file("/proc/self/mountinfo", MOUNTINFO_MAX, &mountinfo);
        if (r < 0)
                return r;
        r = read_full_file("/proc/self/cgroup", PROC_CGROUP_MAX, &self);
        if (r < 0)
                return r;
        r = cgroup_topology_parse(mountinfo, self, geteuid() == 0, &t);
        if (r < 0)
                return r;
        env = secure_getenv("HUTCH_CGROUP_BASE_V2");
        if (env && *env) {
                r = topology_apply_env(&t, env);
                if (r < 0)
                        return r;
        }
        r = cgroup_topology_probe(&t);
        if (r < 0)
                return r;
        *ret = t;
        t = (CgroupTopology){};
        return 0;
}
