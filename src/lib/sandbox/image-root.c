/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "image/image-store.h"
#include "parse-util.h"
#include "sandbox/image-root.h"
#include "store/store.h"
#include "strv.h"

/* Removes the run's mark, in the process that took it only (a forked
 * child freeing its copy leaves it). */
static void image_root_unmark_run(ImageRoot *img) {
        _cleanup_(store_freep) Store *store = NULL;
        _cleanup_(image_store_freep) ImageStore *is = NULL;
        HutchError ignored = {};
        int pid = 0;

        if (!img->run_mark)
                return;
        if (sscanf(img->run_mark, "%d-", &pid) == 1 && pid == (int)getpid() &&
            store_open(&store, &ignored) >= 0 && image_store_open(store, &is, &ignored) >= 0)
                (void)image_store_unuse(is, img->digest, "run", img->run_mark, &ignored);
        img->run_mark = mfree(img->run_mark);
}

ImageRoot *image_root_free(ImageRoot *img) {
        if (!img)
                return NULL;
        image_root_unmark_run(img);
        free(img->name);
        free(img->digest);
        strv_free(img->layers);
        strv_free(img->env);
        free(img->workdir);
        free(img->user);
        strv_free(img->entrypoint);
        strv_free(img->cmd);
        free(img);
        return NULL;
}

int image_root_mark_run(ImageRoot *img, HutchError *reterr) {
        _cleanup_(store_freep) Store *store = NULL;
        _cleanup_(image_store_freep) ImageStore *is = NULL;
        _cleanup_free_ char *holder = NULL;
        int r;

        r = image_store_run_holder(getpid(), &holder);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot name this run: %s", strerror(-r));
        r = store_open(&store, reterr);
        if (r < 0)
                return r;
        r = image_store_open(store, &is, reterr);
        if (r < 0)
                return r;
        r = image_store_use(is, img->digest, "run", holder, reterr);
        if (r < 0)
                return r;
        img->run_mark = TAKE_PTR(holder);
        return 0;
}

int image_root_command(const ImageRoot *img, char *const *argv, char ***ret, HutchError *reterr) {
        _cleanup_strv_free_ char **l = NULL;
        char *const *tail = argv && argv[0] ? argv : img->cmd;
        int r;

        for (size_t i = 0; img->entrypoint && img->entrypoint[i]; i++) {
                r = strv_extend(&l, img->entrypoint[i]);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; tail && tail[i]; i++) {
                r = strv_extend(&l, tail[i]);
                if (r < 0)
                        return r;
        }
        if (!l || !l[0])
                return hutch_error_set(reterr, EINVAL,
                                       "missing command: the image '%s' has no Entrypoint or Cmd "
                                       "(usage: hutch run --image %s [FLAGS] -- CMD [ARGS...])",
                                       img->name, img->name);
        *ret = TAKE_PTR(l);
        return 0;
}

/* One line of an /etc/passwd- or /etc/group-style text, split at ':' into
 * at most @max fields (the last keeps the rest). Returns the number of
 * fields. @line is modified. */
static size_t split_fields(char *line, char **fields, size_t max) {
        size_t n = 0;

        while (n + 1 < max) {
                char *c = strchr(line, ':');

                fields[n++] = line;
                if (!c)
                        return n;
                *c = '\0';
                line = c + 1;
        }
        fields[n++] = line;
        return n;
}

/* Calls @fn on each line of @text (a copy), split into @want fields; lines
 * with fewer fields are skipped. Stops at the first @fn that returns
 * non-zero and returns that. */
static int for_each_entry(const char *text, size_t want, int (*fn)(char **fields, void *userdata),
                          void *userdata) {
        _cleanup_free_ char *copy = NULL;
        char *save = NULL;

        if (!text)
                return 0;
        copy = strndup(text, IMAGE_USER_FILE_MAX);
        if (!copy)
                return -ENOMEM;
        for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char *fields[8];
                int r;

                if (line[0] == '#' || line[0] == '+' || line[0] == '-')
                        continue;
                if (split_fields(line, fields, want) < want)
                        continue;
                r = fn(fields, userdata);
                if (r != 0)
                        return r;
        }
        return 0;
}

typedef struct PasswdQuery {
        const char *name; /* by name, or */
        uid_t uid;        /* by uid when name is NULL */
        ImageUser *out;
} PasswdQuery;

static int passwd_match(char **f, void *userdata) {
        PasswdQuery *q = userdata;
        uint32_t uid, gid;

        /* name:x:uid:gid:gecos:home:shell */
        if (safe_atou32(f[2], &uid) < 0 || safe_atou32(f[3], &gid) < 0)
                return 0;
        if (q->name ? strcmp(f[0], q->name) != 0 : uid != q->uid)
                return 0;
        if (strlen(f[0]) >= sizeof(q->out->name) || strlen(f[5]) >= sizeof(q->out->home))
                return 0;
        q->out->uid = uid;
        q->out->gid = gid;
        (void)snprintf(q->out->name, sizeof(q->out->name), "%s", f[0]);
        (void)snprintf(q->out->home, sizeof(q->out->home), "%s", f[5][0] == '/' ? f[5] : "/");
        return 1;
}

typedef struct GroupQuery {
        const char *name; /* a group's name to find, or NULL */
        gid_t gid;        /* its gid, when found */
        ImageUser *out;   /* else: collect the groups listing out->name */
} GroupQuery;

static bool user_in_list(const char *list, const char *user) {
        size_t n = strlen(user);

        for (const char *p = list; *p;) {
                size_t len = strcspn(p, ",");

                if (len == n && strncmp(p, user, n) == 0)
                        return true;
                p += len;
                if (*p == ',')
                        p++;
        }
        return false;
}

static int group_match(char **f, void *userdata) {
        GroupQuery *q = userdata;
        uint32_t gid;

        /* name:x:gid:member,member */
        if (safe_atou32(f[2], &gid) < 0)
                return 0;
        if (q->name) {
                if (strcmp(f[0], q->name) != 0)
                        return 0;
                q->gid = gid;
                return 1;
        }
        if (q->out->name[0] == '\0' || !user_in_list(f[3], q->out->name))
                return 0;
        for (size_t i = 0; i < q->out->n_groups; i++)
                if (q->out->groups[i] == gid)
                        return 0;
        if (q->out->n_groups >= IMAGE_USER_MAX_GROUPS)
                return 1;
        q->out->groups[q->out->n_groups++] = gid;
        return 0;
}

static bool is_number(const char *s) {
        return s[0] && strspn(s, "0123456789") == strlen(s);
}

int image_user_resolve(const char *spec, const char *passwd, const char *group, ImageUser *ret,
                       HutchError *reterr) {
        _cleanup_free_ char *user = NULL;
        ImageUser u = {.home = "/"};
        const char *grp = NULL;
        char *colon;
        int r;

        if (!spec || !spec[0] || strlen(spec) > 255)
                return hutch_error_set(reterr, EINVAL, "invalid user '%s'", spec ?: "");
        user = strdup(spec);
        if (!user)
                return -ENOMEM;
        colon = strchr(user, ':');
        if (colon) {
                *colon = '\0';
                grp = colon + 1;
                if (!grp[0])
                        return hutch_error_set(reterr, EINVAL, "invalid user '%s'", spec);
        }
        if (!user[0])
                return hutch_error_set(reterr, EINVAL, "invalid user '%s'", spec);

        if (is_number(user)) {
                uint32_t uid;
                PasswdQuery q = {.out = &u};

                if (safe_atou32(user, &uid) < 0 || uid == UINT32_MAX)
                        return hutch_error_set(reterr, EINVAL, "invalid uid in the user '%s'",
                                               spec);
                q.uid = uid;
                r = for_each_entry(passwd, 7, passwd_match, &q);
                if (r < 0)
                        return r;
                if (r == 0)
                        u = (ImageUser){.uid = uid, .gid = 0, .home = "/"};
        } else {
                PasswdQuery q = {.name = user, .out = &u};

                r = for_each_entry(passwd, 7, passwd_match, &q);
                if (r < 0)
                        return r;
                /* root is always there, as docker has it: an image
                 * without /etc/passwd can still be entered as root. */
                if (r == 0 && strcmp(user, "root") == 0)
                        u = (ImageUser){.uid = 0, .gid = 0, .name = "root", .home = "/root"};
                else if (r == 0)
                        return hutch_error_set(reterr, ENOENT, "user '%s' is not in /etc/passwd",
                                               user);
        }

        if (grp) {
                if (is_number(grp)) {
                        uint32_t gid;

                        if (safe_atou32(grp, &gid) < 0 || gid == UINT32_MAX)
                                return hutch_error_set(reterr, EINVAL,
                                                       "invalid gid in the user '%s'", spec);
                        u.gid = gid;
                } else {
                        GroupQuery q = {.name = grp};

                        r = for_each_entry(group, 4, group_match, &q);
                        if (r < 0)
                                return r;
                        if (r == 0)
                                return hutch_error_set(reterr, ENOENT,
                                                       "group '%s' (of the user '%s') is not in "
                                                       "/etc/group",
                                                       grp, spec);
                        u.gid = q.gid;
                }
        }

        u.groups[0] = u.gid;
        u.n_groups = 1;
        /* An explicit group is the only one (docker's rule); a user alone
         * gets the groups that list it too. */
        if (!grp) {
                GroupQuery q = {.out = &u};

                r = for_each_entry(group, 4, group_match, &q);
                if (r < 0)
                        return r;
        }
        *ret = u;
        return 0;
}

int image_root_resolve(const char *name, ImageRoot **ret, HutchError *reterr) {
        _cleanup_(store_freep) Store *store = NULL;
        _cleanup_(image_store_freep) ImageStore *is = NULL;
        _cleanup_(image_freep) Image *im = NULL;
        _cleanup_(image_root_freep) ImageRoot *img = NULL;
        HutchError err = {};
        int r;

        r = store_open(&store, reterr);
        if (r < 0)
                return r;
        r = image_store_open(store, &is, reterr);
        if (r < 0)
                return r;
        r = image_store_resolve(is, name, &im, &err);
        if (r == -ENOENT)
                return hutch_error_set(reterr, ENOENT,
                                       "no image '%s' in the image store (hutch image ls lists "
                                       "them; hutch image import or pull adds one)",
                                       name);
        if (r < 0) {
                if (reterr)
                        *reterr = err;
                return r;
        }
        if (im->n_layers == 0 || im->n_layers > IMAGE_ROOT_MAX_LAYERS)
                return hutch_error_set(reterr, E2BIG,
                                       "the image '%s' has %zu layers (1 to %d can be a sandbox's "
                                       "root)",
                                       name, im->n_layers, IMAGE_ROOT_MAX_LAYERS);

        img = calloc(1, sizeof(*img));
        if (!img)
                return -ENOMEM;
        img->layers = calloc(im->n_layers + 1, sizeof(char *));
        img->name = strdup(name);
        if (!img->layers || !img->name)
                return -ENOMEM;
        /* The store lists them lowest first; the overlay wants the top first. */
        for (size_t i = 0; i < im->n_layers; i++)
                img->layers[i] = TAKE_PTR(im->layers[im->n_layers - 1 - i].path);
        img->digest = TAKE_PTR(im->digest);
        img->env = TAKE_PTR(im->config.env);
        img->user = TAKE_PTR(im->config.user);
        img->entrypoint = TAKE_PTR(im->config.entrypoint);
        img->cmd = TAKE_PTR(im->config.cmd);
        if (im->config.working_dir && im->config.working_dir[0] == '/')
                img->workdir = TAKE_PTR(im->config.working_dir);
        *ret = TAKE_PTR(img);
        return 0;
}
