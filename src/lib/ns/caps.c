/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "ns/caps.h"
#include "parse-util.h"

/* capset(2) v3 describes capabilities 0..63. */
#define CAP_NUMBER_MAX 63U

/* SECURITY: uid 0 gets nothing from exec (NOROOT), a setuid() to or from 0
 * does not touch the (empty) sets (NO_SETUID_FIXUP), no ambient raise, and
 * KEEP_CAPS is locked off; every one of them is locked. */
#define SECUREBITS_SET                                                                             \
        (SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |                           \
         SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |                             \
         SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED | SECBIT_KEEP_CAPS_LOCKED)
#define SECUREBITS_CLEAR SECBIT_KEEP_CAPS

/* With a kept set (caps_drop_all_but()): uid 0 keeps it across exec and a
 * setuid() away from 0 drops it, as for root anywhere; the bits are locked
 * in that state. */
#define SECUREBITS_KEEP_SET                                                                        \
        (SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |      \
         SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED | SECBIT_KEEP_CAPS_LOCKED)
#define SECUREBITS_KEEP_CLEAR (SECBIT_KEEP_CAPS | SECBIT_NOROOT | SECBIT_NO_SETUID_FIXUP)

/* Finds the highest capability number the running kernel knows. */
static int cap_last_cap(unsigned *ret) {
        _cleanup_free_ char *s = NULL;
        uint32_t v;
        size_t len;
        int r;

        r = read_full_file("/proc/sys/kernel/cap_last_cap", 32, &s);
        if (r < 0) {
                /* COMPAT(no /proc mounted): probe the bounding set, which
                 * rejects unknown numbers with EINVAL. */
                unsigned c;

                for (c = 0; c <= CAP_NUMBER_MAX; c++)
                        if (prctl(PR_CAPBSET_READ, (unsigned long)c, 0UL, 0UL, 0UL) < 0)
                                break;
                if (c == 0)
                        return errno == EINVAL ? -EINVAL : negative_errno();
                if (c > CAP_NUMBER_MAX)
                        return -ERANGE;
                *ret = c - 1;
                return 0;
        }

        len = strlen(s);
        if (len > 0 && s[len - 1] == '\n')
                s[len - 1] = '\0';
        r = safe_atou32(s, &v);
        if (r < 0)
                return r;
        if (v > CAP_NUMBER_MAX)
                return -ERANGE;
        *ret = v;
        return 0;
}

static int capset_keep(uint64_t keep) {
        struct __user_cap_header_struct header = {
                .version = _LINUX_CAPABILITY_VERSION_3,
                .pid = 0,
        };
        struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {
                {.effective = (uint32_t)keep, .permitted = (uint32_t)keep},
                {.effective = (uint32_t)(keep >> 32), .permitted = (uint32_t)(keep >> 32)},
        };

        if (syscall(SYS_capset, &header, data) < 0)
                return negative_errno();
        return 0;
}

int caps_become_user(uid_t uid, gid_t gid, const gid_t *groups, size_t n_groups) {
        struct __user_cap_header_struct header = {
                .version = _LINUX_CAPABILITY_VERSION_3,
                .pid = 0,
        };
        struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};

        if (prctl(PR_SET_KEEPCAPS, 1UL, 0UL, 0UL, 0UL) < 0)
                return negative_errno();
        if (setgroups(n_groups, groups) < 0 || setresgid(gid, gid, gid) < 0 ||
            setresuid(uid, uid, uid) < 0)
                return negative_errno();
        if (prctl(PR_SET_KEEPCAPS, 0UL, 0UL, 0UL, 0UL) < 0)
                return negative_errno();
        /* The switch emptied the effective set; caps_drop_all() needs
         * CAP_SETPCAP there once more to drop the rest. */
        if (syscall(SYS_capget, &header, data) < 0)
                return negative_errno();
        for (size_t i = 0; i < ELEMENTSOF(data); i++)
                data[i].effective = data[i].permitted;
        if (syscall(SYS_capset, &header, data) < 0)
                return negative_errno();
        return 0;
}

/* Returns 0 when nothing but @keep is left: the securebits are in place,
 * the effective, permitted and bounding sets are @keep, the inheritable
 * and ambient sets empty. Returns -EPERM otherwise. */
static int caps_verify_dropped(uint64_t keep) {
        int want_set = keep ? SECUREBITS_KEEP_SET : SECUREBITS_SET;
        int want_clear = keep ? SECUREBITS_KEEP_CLEAR : SECUREBITS_CLEAR;
        struct __user_cap_header_struct header = {
                .version = _LINUX_CAPABILITY_VERSION_3,
                .pid = 0,
        };
        struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
        int bits;

        bits = prctl(PR_GET_SECUREBITS, 0UL, 0UL, 0UL, 0UL);
        if (bits < 0)
                return negative_errno();
        if ((bits & want_set) != want_set || (bits & want_clear) != 0)
                return -EPERM;

        if (syscall(SYS_capget, &header, data) < 0)
                return negative_errno();
        for (size_t i = 0; i < ELEMENTSOF(data); i++) {
                uint32_t k = (uint32_t)(keep >> (32 * i));

                if (data[i].effective != k || data[i].permitted != k || data[i].inheritable != 0)
                        return -EPERM;
        }

        /* Walk until the kernel rejects the number, not only up to
         * cap_last_cap: a capability the file did not mention would still
         * be caught here. */
        for (unsigned long c = 0; c <= CAP_NUMBER_MAX; c++) {
                int in_bounding, in_ambient;

                in_bounding = prctl(PR_CAPBSET_READ, c, 0UL, 0UL, 0UL);
                if (in_bounding < 0) {
                        if (errno == EINVAL && c > 0)
                                return 0;
                        return negative_errno();
                }
                in_ambient =
                        prctl(PR_CAP_AMBIENT, (unsigned long)PR_CAP_AMBIENT_IS_SET, c, 0UL, 0UL);
                if (in_ambient < 0)
                        return negative_errno();
                if (in_bounding != !!(keep & (UINT64_C(1) << c)) || in_ambient != 0)
                        return -EPERM;
        }
        /* The kernel accepted every number up to 63: capset v3 cannot have
         * described all of them. */
        return -EPERM;
}

int caps_drop_all(void) {
        return caps_drop_all_but(0);
}

int caps_drop_all_but(uint64_t keep) {
        unsigned last;
        int bits;
        int r;

        r = cap_last_cap(&last);
        if (r < 0)
                return r;

        /* First, while CAP_SETPCAP is still there. */
        bits = prctl(PR_GET_SECUREBITS, 0UL, 0UL, 0UL, 0UL);
        if (bits < 0)
                return negative_errno();
        bits = keep ? (bits | SECUREBITS_KEEP_SET) & ~SECUREBITS_KEEP_CLEAR
                    : (bits | SECUREBITS_SET) & ~SECUREBITS_CLEAR;
        if (prctl(PR_SET_SECUREBITS, (unsigned long)bits, 0UL, 0UL, 0UL) < 0)
                return negative_errno();

        for (unsigned c = 0; c <= last; c++)
                if (!(keep & (UINT64_C(1) << c)) &&
                    prctl(PR_CAPBSET_DROP, (unsigned long)c, 0UL, 0UL, 0UL) < 0)
                        return negative_errno();

        if (prctl(PR_CAP_AMBIENT, (unsigned long)PR_CAP_AMBIENT_CLEAR_ALL, 0UL, 0UL, 0UL) < 0)
                return negative_errno();

        r = capset_keep(keep);
        if (r < 0)
                return r;

        return caps_verify_dropped(keep);
}
