/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <linux/capability.h>
#include <stdint.h>

/* Capabilities, dropped for good by the pre-exec child before it execs the
 * user's command. Raw prctl(2)/capset(2), no libcap. Nothing here logs.
 *
 * In the sandbox the caller is uid 0 of a user namespace in which it holds
 * every capability. Dropping the sets alone is not enough there: an exec by
 * uid 0 would grant the full set again. The securebits below switch that
 * rule off and lock it, and the empty bounding set makes sure no file
 * capability can bring anything back either. */

#include <stddef.h>
#include <sys/types.h>

/* Drops every capability of the calling thread (and so of everything it
 * forks and execs), in this order:
 *
 *  1. securebits: sets SECBIT_NOROOT (exec as uid 0 grants nothing),
 *     SECBIT_NO_SETUID_FIXUP, SECBIT_NO_CAP_AMBIENT_RAISE, clears
 *     SECBIT_KEEP_CAPS, and sets the _LOCKED bit of all four so they can
 *     never change again. Other bits already set are kept. This needs
 *     CAP_SETPCAP; without it the function fails closed (-EPERM) rather
 *     than skipping the step;
 *  2. the bounding set: drops every capability from 0 to the value of
 *     /proc/sys/kernel/cap_last_cap (or, when that file cannot be read,
 *     to the last one PR_CAPBSET_READ accepts); also needs CAP_SETPCAP;
 *  3. the ambient set: cleared;
 *  4. effective, permitted and inheritable: emptied with capset(2) v3;
 *  5. SECURITY: reads everything back (securebits, the three sets, the
 *     ambient and bounding sets, up to the first number the kernel rejects)
 *     and fails with -EPERM if anything is left.
 *
 * Returns 0, or -EPERM (no CAP_SETPCAP, a locked SECBIT_KEEP_CAPS, or a
 * capability left after the drop), -ERANGE when cap_last_cap is above 63,
 * -EINVAL when it is malformed, or another -errno from the calls above.
 * On failure some steps may already have happened; the caller must treat
 * the process as unusable (the pre-exec child reports and exits). */
int caps_drop_all(void);

/* The capabilities a persistent sandbox's root keeps when its user
 * namespace holds a range of ids (docs/persistent.md "Id range"): what
 * dpkg and apt need to own files by other ids and to drop to _apt
 * (chown, fowner, fsetid, dac_override, setuid, setgid, kill), all of them
 * only over the ids of the sandbox's own user namespace. Not setpcap,
 * setfcap, sys_admin, net_*, dac_read_search or anything else. */
#define CAPS_PACKAGE_SET                                                                           \
        ((UINT64_C(1) << CAP_CHOWN) | (UINT64_C(1) << CAP_DAC_OVERRIDE) |                          \
         (UINT64_C(1) << CAP_FOWNER) | (UINT64_C(1) << CAP_FSETID) | (UINT64_C(1) << CAP_KILL) |   \
         (UINT64_C(1) << CAP_SETGID) | (UINT64_C(1) << CAP_SETUID))

/* As caps_drop_all(), but the effective, permitted and bounding sets keep
 * @keep (0: caps_drop_all()), and the securebits are locked with NOROOT
 * and NO_SETUID_FIXUP off: uid 0 keeps @keep across exec, and a change to
 * a non-zero uid (apt's drop to _apt) loses it, as for root anywhere.
 * Returns as caps_drop_all(). */
int caps_drop_all_but(uint64_t keep);

/* Makes the calling process (uid 0 of its user namespace, holding
 * CAP_SETUID, CAP_SETGID and CAP_SETPCAP) @uid and @gid with the
 * supplementary @groups, keeping its permitted capabilities in the
 * effective set for caps_drop_all(), which must follow. Returns 0 or
 * -errno (-EINVAL: an id the namespace does not map; -EPERM: setgroups
 * is denied in this namespace). */
int caps_become_user(uid_t uid, gid_t gid, const gid_t *groups, size_t n_groups);
