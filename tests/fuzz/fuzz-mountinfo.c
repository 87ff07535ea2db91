/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cgroup/cgroup.h"
#include "hutch-error.h"
#include "macro.h"

/* Fuzzes the cgroup topology parser (src/lib/cgroup/cgroup-topology.c)
 * with the texts of /proc/self/mountinfo and /proc/self/cgroup: the input
 * up to its first NUL is the mountinfo, the rest the cgroup file. Both the
 * root and the normal-user computations run. Invariants:
 *   - the result does not change when a well-formed line of another
 *     filesystem is added, whatever its root (issue 24: an nsfs bind of
 *     `ip netns add` must never be fatal);
 *   - a failure leaves the topology untouched, and an -EBADMSG names the
 *     line in a message of printable ASCII with the line number set;
 *   - a success gives absolute mount points, and every base lies below its
 *     mount point. */

#define FUZZ_INPUT_MAX (64u * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char nsfs_line[] = "\n4242 1 0:4 net:[4026532178] /run/netns/f\\040z rw shared:2 - "
                                "nsfs nsfs rw\n";

static bool str_eq(const char *a, const char *b) {
        return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool place_eq(const CgroupPlace *a, const CgroupPlace *b) {
        return a->version == b->version && str_eq(a->mount, b->mount) && str_eq(a->base, b->base) &&
               a->create_base == b->create_base;
}

static bool topology_eq(const CgroupTopology *a, const CgroupTopology *b) {
        for (size_t i = 0; i < ELEMENTSOF(a->controllers); i++)
                if (!place_eq(a->controllers + i, b->controllers + i))
                        return false;
        return place_eq(&a->v2, &b->v2) && place_eq(&a->freezer, &b->freezer) &&
               place_eq(&a->cpuacct, &b->cpuacct);
}

static void check_place(const CgroupPlace *p) {
        size_t n;

        if (p->version == CGROUP_VERSION_NONE) {
                if (p->mount || p->base)
                        abort();
                return;
        }
        if (!p->mount || p->mount[0] != '/')
                abort();
        if (!p->base)
                return;
        n = strlen(p->mount);
        if (strcmp(p->mount, "/") != 0 &&
            (strncmp(p->base, p->mount, n) != 0 || (p->base[n] != '/' && p->base[n] != '\0')))
                abort();
}

static void check_error(const HutchError *e) {
        if (e->errnum != EBADMSG || e->line == 0 || e->msg[0] == '\0')
                abort();
        for (const char *p = e->msg; *p; p++)
                if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
                        abort();
}

static void check(const char *mountinfo, const char *self, bool privileged) {
        CgroupTopology t = {.privileged = !privileged}, u = {};
        HutchError e = {};
        char *more;
        size_t n = strlen(mountinfo);
        int r, r2;

        r = cgroup_topology_parse(mountinfo, self, privileged, &t, &e);
        if (r < 0) {
                if (t.privileged != !privileged || t.v2.mount)
                        abort();
                if (r == -EBADMSG)
                        check_error(&e);
                else if (r != -ENOMEM)
                        abort();
                t = (CgroupTopology){};
        } else {
                if (t.privileged != privileged)
                        abort();
                for (size_t i = 0; i < ELEMENTSOF(t.controllers); i++)
                        check_place(t.controllers + i);
                check_place(&t.v2);
                check_place(&t.freezer);
                check_place(&t.cpuacct);
        }

        more = malloc(n + sizeof(nsfs_line));
        if (!more)
                goto done;
        memcpy(more, mountinfo, n);
        memcpy(more + n, nsfs_line, sizeof(nsfs_line));
        r2 = cgroup_topology_parse(more, self, privileged, &u, NULL);
        free(more);
        if (r2 == -ENOMEM || r == -ENOMEM)
                goto done;
        if (r2 != r || (r >= 0 && !topology_eq(&t, &u)))
                abort();
done:
        cgroup_topology_done(&t);
        cgroup_topology_done(&u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *text;
        size_t k;

        if (size > FUZZ_INPUT_MAX)
                return 0;
        text = malloc(size + 2);
        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = '\0';
        text[size + 1] = '\0';
        k = strlen(text);

        check(text, text + k + (k < size ? 1 : 0), true);
        check(text, text + k + (k < size ? 1 : 0), false);

        free(text);
        return 0;
}
