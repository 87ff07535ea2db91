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
 * inside than the caller is outside.
 *
 * The ranged map (idmapping_for_caller_ranged(), persistent sandboxes): an
 * ordinary user with a range of at least 65536 ids of its own in both
 * /etc/subuid and /etc/subgid and the setuid newuidmap/newgidmap (package
 * uidmap) gets podman's rootless map: sandbox id 0 is the caller, ids
 * 1..65536 are the caller's sub-ids, setgroups is allowed inside. The
 * helpers check the ranges against the same files, as root; hutch reads
 * them only to know what to ask for. SECURITY: the map never holds host id
 * 0 or another id of the caller's (its groups), only what the
 * administrator gave this user. docs/persistent.md "Id range". */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "hutch-error.h"

#define USERNS_DEFAULT_BASE UINT32_C(0x70000000)
#define USERNS_RANGE_SIZE UINT32_C(65536)

typedef struct IdMapping {
        uint32_t uid_base; /* host uid of sandbox uid 0 */
        uint32_t gid_base; /* host gid of sandbox gid 0 */
        uint32_t count;    /* ids mapped (1 for an unprivileged caller) */
        bool privileged;   /* hutch runs as host root: ranges and idmapped mounts */
        uid_t caller_uid;  /* the caller's host uid/gid */
        gid_t caller_gid;
        char uid_source[64]; /* where uid_base came from: "/etc/subuid", "default", "caller",
                              * "newuidmap" (ranged) */
        /* The ranged map (unprivileged with sub-ids): sandbox ids
         * 1..sub_count are host ids sub_uid_base.. and sub_gid_base..;
         * written by newuidmap/newgidmap. */
        bool ranged;
        uint32_t sub_uid_base;
        uint32_t sub_gid_base;
        uint32_t sub_count;
        char helpers[256]; /* the folder of newuidmap and newgidmap */
        /* Unprivileged without the ranged map: why not, one line naming
         * the fix ("" when the range is there or hutch runs as root). */
        char no_range[256];
        /* As root with a range of the pool (store/id-pool.h): the host ids
         * that own the sandbox's layers in the store (the store's fixed
         * range), idmapped onto uid_base/gid_base when it starts; 0: the
         * layers are owned by uid_base/gid_base themselves. */
        uint32_t layer_uid_base;
        uint32_t layer_gid_base;
        /* The first id inside of the map userns_write_maps() writes: 0, or
         * the layers' owner for the namespace that idmaps them. */
        uint32_t inside_uid;
        uint32_t inside_gid;
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

/* As idmapping_for_caller(), and for an unprivileged caller the ranged
 * map when its name (or uid) has a range of at least USERNS_RANGE_SIZE ids
 * in both @subuid_path and @subgid_path (NULL: the system files), neither
 * holding host id 0 nor the caller's own uid/gid, and the helpers
 * (@helper_dir/newuidmap and newgidmap; NULL: /usr/bin) exist. Otherwise
 * the single-id map with @ret->no_range saying why. Returns 0, -EINVAL on
 * a malformed line of the caller's, -ERANGE on a range that overflows or
 * holds host id 0 or the caller's own id, -ENAMETOOLONG for a
 * @helper_dir longer than IdMapping.helpers holds. In builds with test
 * hooks, $HUTCH_TEST_IDMAP_HELPERS stands for a NULL @helper_dir. */
int idmapping_for_caller_ranged(const char *subuid_path, const char *subgid_path,
                                const char *helper_dir, IdMapping *ret);

/* The name of @uid in @passwd_path (NULL: /etc/passwd), read without NSS
 * (hutch is linked statically). Lines of other users may hold anything.
 * Returns 0 and a new string, -ENOENT when there is none, -errno. */
int passwd_name_of(const char *passwd_path, uid_t uid, char **ret);

/* As root, moves @m onto the range of the pool that starts at @base
 * (store/id-pool.h): sandbox ids 0..count-1 become host ids @base.., and
 * the range @m had becomes the layers' owner (layer_uid_base), to be
 * idmapped onto the new one. Nothing is done when @base is 0 or @m is not
 * privileged. */
void idmapping_use_pool_range(IdMapping *m, uint32_t base);

/* Writes setgroups ("deny" when unprivileged and not ranged), gid_map and
 * uid_map of the process @pid, which must be in a new user namespace. The
 * ranged map is written by running newgidmap and newuidmap (which leave
 * setgroups allowed). Returns 0 or -errno; @reterr (may be NULL) says what
 * a helper answered when it failed. */
int userns_write_maps_full(pid_t pid, const IdMapping *m, HutchError *reterr);
int userns_write_maps(pid_t pid, const IdMapping *m);

/* Moves the calling process, which must be single-threaded, into a new
 * user namespace that maps the caller's own uid/gid and its sub-ids
 * (@m->ranged) to themselves, with every capability there: as podman
 * unshare does, so that the store's files owned by the sub-ids can be
 * read, copied, chowned and removed by the user's own hutch. Ids read the
 * same inside as outside. Nothing is done (0) when @m is not ranged.
 * Returns 0 or -errno (@reterr says why). */
int userns_enter_ranged(const IdMapping *m, HutchError *reterr);

/* Runs @fn(@userdata, reterr) in a forked child that did
 * userns_enter_ranged(@m) and returns its result (its HutchError is
 * carried back). The child shares the caller's fds and mounts; data it
 * allocates stays there. Returns @fn's return value or -errno. */
int userns_run_ranged(const IdMapping *m, int (*fn)(void *userdata, HutchError *reterr),
                      void *userdata, HutchError *reterr);
