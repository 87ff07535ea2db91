/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <string.h>
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
        (void)snprintf(map, sizeof(map), "0 %u %u\n", m->gid_base, m->count);
        r = write_string_file(path, map);
        if (r < 0)
                return r;
        (void)snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
        (void)snprintf(map, sizeof(map), "0 %u %u\n", m->uid_base, m->count);
        return write_string_file(path, map);
}
