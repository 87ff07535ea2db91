/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image-user.h"
#include "macro.h"
#include "parse-util.h"

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
