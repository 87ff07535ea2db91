/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* User-namespace id mapping.
 *
 * SECURITY: the sandbox's uid 0 must never be host root. When hutch runs as
 * host root, sandbox ids 0..65535 map to an unprivileged host range: the
 * first range of "root" in /etc/subuid and /etc/subgid with at least 65536
 * ids, else the documented default base USERNS_DEFAULT_BASE. When hutch runs
 * as an ordinary user, the sandbox's uid 0 maps to that user alone (the only
 * map an unprivileged process may write), so nothing can be more privileged
 * inside than the caller is outside. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define USERNS_DEFAULT_BASE UINT32_C(0x70000000)
#define USERNS_RANGE_SIZE UINT32_C(65536)

typedef struct IdMapping {
        uint32_t uid_base; /* host uid of sandbox uid 0 */
        uint32_t gid_base; /* host gid of sandbox gid 0 */
        uint32_t count;    /* ids mapped (1 for an unprivileged caller) */
        bool privileged;   /* hutch runs as host root: ranges and idmapped mounts */
        uid_t caller_uid;  /* the caller's host uid/gid */
        gid_t caller_gid;
        char uid_source[64]; /* where uid_base came from: "/etc/subuid", "default", "caller" */
} IdMapping;

/* Picks the mapping for the calling process as described above. Reads
 * @subuid_path and @subgid_path (NULL for the system files). Returns 0, or
 * -EINVAL when a sub-id file has a malformed line for root. A missing file
 * or no entry for root means the default. */
int idmapping_for_caller(const char *subuid_path, const char *subgid_path, IdMapping *ret);

/* Parses one /etc/subuid-style text and returns the first range for @user
 * (by name, or by its numeric @uid) with at least @min_count ids. Only the
 * lines of @user ("NAME:START:COUNT") are judged, up to the first that
 * fits; lines of other users, comments and empty lines may hold anything.
 * Returns 1 and @ret_base when found, 0 when not, -EINVAL on a malformed
 * line for that user, -ERANGE if the range overflows 32 bits, -ENOMEM. */
int subid_find_range(const char *text, const char *user, uid_t uid, uint32_t min_count,
                     uint32_t *ret_base);

/* Writes setgroups ("deny" when unprivileged), gid_map and uid_map of the
 * process @pid, which must be in a new user namespace. Returns 0 or -errno. */
int userns_write_maps(pid_t pid, const IdMapping *m);
