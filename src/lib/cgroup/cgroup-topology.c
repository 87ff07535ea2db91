/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
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

/* The fields of one mountinfo line (proc_pid_mountinfo(5)), as spans of
 * the line: the six before the optional fields, then, after the "-"
 * separator, the filesystem type, the source and the super options. */
typedef struct MountinfoLine {
        Span id, parent, dev, root, mount;
        Span fstype, source, options;
} MountinfoLine;

/* Takes the next field of @s, up to a space or the end; false when @s is
 * empty. Moves @s past the field and its space. */
static bool span_next_field(Span *s, Span *ret) {
        const char *sp;

        if (s->n == 0)
                return false;
        sp = memchr(s->p, ' ', s->n);
        *ret = (Span){s->p, sp ? (size_t)(sp - s->p) : s->n};
        *s = sp ? (Span){sp + 1, s->n - ret->n - 1} : (Span){s->p + s->n, 0};
        return true;
}

/* Splits @line into its fields. The head fields are never empty (the
 * kernel escapes spaces in paths as \040); the optional fields ("shared:2",
 * "master:1", "unbindable", any future one) are skipped up to the field
 * "-". After it, the source may be empty (a mount whose source is the
 * empty string), and the super options are the rest of the line: each
 * filesystem prints its own, and nothing makes every one escape a space.
 * On failure *@ret_why says what is wrong. */
static int mountinfo_split(Span line, MountinfoLine *ret, const char **ret_why) {
        Span *head[] = {&ret->id, &ret->parent, &ret->dev, &ret->root, &ret->mount};
        Span rest = line, f;

        for (size_t i = 0; i < ELEMENTSOF(head); i++) {
                if (!span_next_field(&rest, head[i]) || head[i]->n == 0) {
                        *ret_why = "fewer than 6 fields before the separator, or an empty one";
                        return -EBADMSG;
                }
        }
        /* The mount options, then the optional fields. */
        for (size_t i = 0;; i++) {
                if (!span_next_field(&rest, &f) || f.n == 0) {
                        *ret_why = "no \" - \" separator";
                        return -EBADMSG;
                }
                if (i > 0 && span_is(f, "-"))
                        break;
        }
        if (!span_next_field(&rest, &ret->fstype) || ret->fstype.n == 0 || rest.n == 0) {
                *ret_why = "no filesystem type, source and super options after the separator";
                return -EBADMSG;
        }
        /* The source may be empty: "- tmpfs  rw". */
        {
                const char *sp = memchr(rest.p, ' ', rest.n);

                if (!sp) {
                        *ret_why = "no super options after the source";
                        return -EBADMSG;
                }
                ret->source = (Span){rest.p, (size_t)(sp - rest.p)};
                ret->options = (Span){sp + 1, rest.n - ret->source.n - 1};
        }
        return 0;
}

/* Checks the numeric fields: mount id, parent id, MAJ:MIN. */
static int mountinfo_check_ids(const MountinfoLine *l) {
        const char *colon;
        uint32_t u;

        if (span_to_u32(l->id, &u) < 0 || span_to_u32(l->parent, &u) < 0)
                return -EBADMSG;
        colon = memchr(l->dev.p, ':', l->dev.n);
        if (!colon)
                return -EBADMSG;
        if (span_to_u32((Span){l->dev.p, (size_t)(colon - l->dev.p)}, &u) < 0 ||
            span_to_u32((Span){colon + 1, l->dev.n - (size_t)(colon + 1 - l->dev.p)}, &u) < 0)
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

/* Reads one mountinfo line. Every line must have the shape of one (the
 * fields split, numeric ids, valid escapes in root and mount point, an
 * absolute mount point): otherwise the text is not mountinfo. Only the
 * cgroup and cgroup2 lines are judged further, since only they are used;
 * the root of any other line may be anything, such as "net:[4026532178]"
 * for the nsfs bind mount `ip netns add` makes (issue 24). On -EBADMSG,
 * *@ret_why says what is wrong. */
static int mountinfo_parse_line(Span line, Found found[static _HIER_MAX], const char **ret_why) {
        _cleanup_free_ char *root = NULL, *mount = NULL;
        MountinfoLine l = {};
        bool v2;
        int r;

        r = mountinfo_split(line, &l, ret_why);
        if (r < 0)
                return r;
        if (mountinfo_check_ids(&l) < 0) {
                *ret_why = "a mount id, parent id or MAJ:MIN that is not a number";
                return -EBADMSG;
        }
        r = unescape(l.root, &root);
        if (r >= 0)
                r = unescape(l.mount, &mount);
        if (r == -EBADMSG) {
                *ret_why = "a bad octal escape in the root or the mount point";
                return r;
        }
        if (r < 0)
                return r;
        if (mount[0] != '/') {
                *ret_why = "a mount point that is not an absolute path";
                return -EBADMSG;
        }

        v2 = span_is(l.fstype, "cgroup2");
        if (!v2 && !span_is(l.fstype, "cgroup"))
                return 0;

        /* SECURITY: from here on the line decides where hutch writes
         * limits, so nothing in it may be unexpected. */
        if (root[0] != '/') {
                *ret_why = "a cgroup mount whose root is not a path";
                return -EBADMSG;
        }
        if (!path_is_safe_absolute(mount)) {
                *ret_why = "a cgroup mount point with a \".\" or \"..\" component";
                return -EBADMSG;
        }
        if (l.options.n == 0 || memchr(l.options.p, ' ', l.options.n)) {
                *ret_why = "a cgroup mount whose super options are empty or hold a space";
                return -EBADMSG;
        }
        /* In a cgroup namespace, a cgroupfs mounted from outside of it
         * shows a root such as "/../.."; our own cgroup is then not
         * reachable below that mount, so skip it rather than fail. */
        if (!path_is_safe_absolute(root))
                return 0;
        if (v2)
                return found_offer(found + HIER_V2, mount, root);

        for (const char *p = l.options.p, *end = l.options.p + l.options.n; p < end;) {
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

/* Where a text hutch read is malformed: the file, the 1-based line, the
 * line itself and what is wrong with it. */
typedef struct LineError {
        const char *file;
        unsigned line;
        Span text;
        const char *why;
} LineError;

/* Sets @reterr to name the line of @e, quoted with every byte outside
 * printable ASCII (and the quote) as \xNN and cut after about 300
 * characters, so that `hutch doctor` can show it (as text or JSON).
 * Returns -EBADMSG. */
static int line_error_report(const LineError *e, HutchError *reterr) {
        char quoted[300];
        size_t j = 0, i;

        for (i = 0; i < e->text.n && j + 5 <= sizeof(quoted); i++) {
                unsigned char c = (unsigned char)e->text.p[i];

                if (c >= 0x20 && c < 0x7f && c != '\'')
                        quoted[j++] = (char)c;
                else
                        j += (size_t)snprintf(quoted + j, sizeof(quoted) - j, "\\x%02x", c);
        }
        quoted[j] = '\0';
        (void)hutch_error_set(reterr, EBADMSG, "%s line %u is malformed (%s): '%s'%s", e->file,
                              e->line, e->why, quoted, i < e->text.n ? "..." : "");
        if (reterr)
                reterr->line = e->line;
        return -EBADMSG;
}

/* Looks up our own cgroup in @text (/proc/self/cgroup, lines
 * "ID:CONTROLLERS:PATH"): the v2 line ("0::PATH") for @controller NULL,
 * else the first v1 line whose controller list has @controller. Every line
 * must have the two colons (else the text is not /proc/self/cgroup); only
 * the line used is judged further (its ID a number, 0 for v2, and PATH
 * absolute without "." or ".." components): the others may hold anything. Returns 1 and a new
 * string with PATH, 0 if there is no such line, -ENOMEM, or -EBADMSG with @ret_err filled. */
static int proc_cgroup_find(const char *text, const char *controller, char **ret,
                            LineError *ret_err) {
        _cleanup_free_ char *found = NULL;
        unsigned line = 0;

        for (const char *p = text; *p;) {
                size_t n = strcspn(p, "\n");
                const char *end = p + n, *c1, *c2;
                LineError e = {"/proc/self/cgroup", ++line, {p, n}, NULL};
                bool match = false;
                Span list;
                uint32_t id;

                p = *end == '\n' ? end + 1 : end;
                if (n == 0)
                        continue;
                c1 = memchr(e.text.p, ':', n);
                c2 = c1 ? memchr(c1 + 1, ':', (size_t)(end - c1 - 1)) : NULL;
                if (!c2) {
                        e.why = "not ID:CONTROLLERS:PATH";
                        *ret_err = e;
                        return -EBADMSG;
                }
                if (found)
                        continue;
                list = (Span){c1 + 1, (size_t)(c2 - c1 - 1)};
                if (!controller)
                        match = list.n == 0;
                else
                        for (const char *q = list.p, *le = list.p + list.n; q < le;) {
                                const char *cm = memchr(q, ',', (size_t)(le - q));
                                Span w = {q, cm ? (size_t)(cm - q) : (size_t)(le - q)};

                                match = match || span_is(w, controller);
                                q = cm ? cm + 1 : le;
                        }
                if (!match)
                        continue;

                if (span_to_u32((Span){e.text.p, (size_t)(c1 - e.text.p)}, &id) < 0 ||
                    (!controller && id != 0)) {
                        e.why = controller ? "the hierarchy ID is not a number"
                                           : "the v2 line's hierarchy ID is not 0";
                        *ret_err = e;
                        return -EBADMSG;
                }
                found = strndup(c2 + 1, (size_t)(end - c2 - 1));
                if (!found)
                        return -ENOMEM;
                if (!path_is_safe_absolute(found)) {
                        e.why = "our own cgroup is not an absolute path without \".\" or \"..\" "
                                "components";
                        *ret_err = e;
                        return -EBADMSG;
                }
        }
        if (!found)
                return 0;
        *ret = TAKE_PTR(found);
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
                      bool privileged, LineError *ret_err) {
        _cleanup_free_ char *self = NULL, *dir = NULL;
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

        r = proc_cgroup_find(proc_self_cgroup, h == HIER_V2 ? NULL : hier_v1_name[h], &self,
                             ret_err);
        if (r <= 0)
                return r;
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
                          CgroupTopology *ret, HutchError *reterr) {
        _cleanup_(cgroup_topology_donep) CgroupTopology t = {.privileged = privileged};
        CgroupPlace v1[_HIER_MAX] = {};
        Found found[_HIER_MAX] = {};
        LineError e = {};
        unsigned line = 0;
        int r = 0;

        if (!mountinfo || !proc_self_cgroup)
                return -EINVAL;

        for (const char *p = mountinfo; *p;) {
                size_t n = strcspn(p, "\n");

                line++;
                if (n > 0) {
                        e = (LineError){"/proc/self/mountinfo", line, {p, n}, NULL};
                        r = mountinfo_parse_line(e.text, found, &e.why);
                        if (r < 0)
                                goto finish;
                }
                p += n;
                if (*p == '\n')
                        p++;
        }

        r = place_fill(&t.v2, HIER_V2, found + HIER_V2, proc_self_cgroup, privileged, &e);
        for (Hier h = HIER_MEMORY; r >= 0 && h < _HIER_MAX; h++)
                r = place_fill(v1 + h, h, found + h, proc_self_cgroup, privileged, &e);
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
        if (r == -EBADMSG && e.why)
                return line_error_report(&e, reterr);
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

int cgroup_topology_detect(CgroupTopology *ret, HutchError *reterr) {
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
        r = cgroup_topology_parse(mountinfo, self, geteuid() == 0, &t, reterr);
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
