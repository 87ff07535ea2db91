/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The host side of a sandbox's setup that both backends use
 * (docs/architecture.md "The backend seam"): the namespace runtime
 * (sandbox.c, keeper.c) and the microVM driver (src/lib/vm: vm-run.c,
 * vm-layers.c) open the host trees a sandbox gets as detached, idmapped
 * mounts, make its user namespace, put the secrets' placeholders in its
 * environment and start its hutch-proxy the same way. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hutch-error.h"
#include "ns/userns.h"
#include "policy/policy.h"
#include "sandbox/image-root.h"
#include "sandbox/proxy-spawn.h"
#include "sandbox/sandbox.h"
#include "sandbox/secrets.h"

typedef struct Prepared {
        int fds[1 + POLICY_MAX_BINDS]; /* [0] workspace, then one per bind */
        size_t n_fds;
        int layer_fds[1 + SANDBOX_MAX_LAYERS]; /* persistent: data dir, then layers */
        size_t n_layer_fds;
} Prepared;

/* clone3() with fork semantics (no new stack), the namespaces of @flags
 * (CLONE_NEW*, all below bit 32) and a pidfd in @ret_pidfd; clone() with
 * the same flags and CLONE_PIDFD where clone3 fails with ENOSYS or EPERM
 * (a container's seccomp filter). The caller is single-threaded, so no
 * lock can be held in the child. The child's 0, the pid, or -errno. */
pid_t sandbox_clone(uint64_t flags, int *ret_pidfd);

/* sandbox_clone() with CLONE_INTO_CGROUP: the child starts in the v2
 * cgroup open at @cgroup_fd, without the cgroup_threadgroup_rwsem write
 * (and its RCU wait) that moving it afterwards costs (issue 16).
 * @ret_joined tells whether it did; it is false after plain
 * sandbox_clone(), which follows @cgroup_fd < 0 and any failure of that
 * clone3 (ENOSYS, E2BIG or EPERM: an old kernel or a container's seccomp
 * filter; or the cgroup's refusal), and the caller must then move the
 * child itself, failing as it always did when the cgroup refuses. */
pid_t sandbox_clone_into(uint64_t flags, int cgroup_fd, int *ret_pidfd, bool *ret_joined);

/* Does hutch hold CAP_SYS_ADMIN (root, outside a container that took it
 * away)? Without it no tree can be idmapped: a persistent sandbox then
 * keeps the store's fixed range (docs/containers.md). */
bool sandbox_has_cap_sys_admin(void);

/* A detached copy (open_tree) of the host tree at @path (opened without
 * following symlinks), private, nosuid, nodev, read-only with
 * @read_only, and idmapped through @userns_fd when it is >= 0 (files of
 * the caller appear as the sandbox's root). 0 or -errno with @reterr. */
int sandbox_open_detached_tree(const char *path, int userns_fd, bool read_only, int *ret_fd,
                               HutchError *reterr);

/* As root (@m privileged): the host trees the sandbox of process @pid
 * gets, as detached mounts in @ret: the workspace and the -v binds
 * idmapped through @pid's user namespace (with @root_only, through a
 * namespace that maps the caller's id to the sandbox's root and nothing
 * else), and with @layers the data dir and the snapshot layers
 * (read-only) as they are. Unprivileged: nothing (every fd -EBADF; they
 * are bound by path). */
int sandbox_prepare_mounts(const Policy *p, const SandboxLayerPaths *layers, const IdMapping *m,
                           pid_t pid, bool root_only, Prepared *ret, HutchError *reterr);

/* A new user namespace with the maps @m, in @ret_fd (no process stays in
 * it). 0 or -errno with @reterr. */
int sandbox_userns_make(const IdMapping *m, int *ret_fd, HutchError *reterr);
/* Writes the id maps @m of @pid, a process in a new user namespace (a
 * ranged map through newuidmap/newgidmap), and opens that namespace in
 * @ret_fd. 0 or -errno with @reterr. */
int sandbox_userns_adopt(pid_t pid, const IdMapping *m, int *ret_fd, HutchError *reterr);
/* The workspace and the binds of sandbox_prepare_mounts() into @ret
 * (initialized), idmapped through @ro_userns_fd when read-only (a copied
 * or overlaid workspace always), else through @rw_userns_fd. */
int sandbox_prepare_trees(const Policy *p, int ro_userns_fd, int rw_userns_fd, Prepared *ret,
                          HutchError *reterr);
void prepared_done(Prepared *p);

/* Sets each secret's placeholder in @env (over -e and --env-pass of the
 * same name), and refuses (-EPERM, naming the variable) an environment
 * in which a real value would still reach the sandbox by another name.
 * @secrets may be NULL. */
int sandbox_env_add_placeholders(char ***env, const SecretSet *secrets, HutchError *reterr);

/* Starts hutch-proxy @binary for @p (proxy_spawn()). With secrets, hands
 * it the configuration memfd made from *@secrets, which is freed then
 * (SECURITY: the values leave this process's memory), and returns the
 * read end of its CA pipe in @ret_ca_fd. */
int sandbox_proxy_start(const char *binary, const Policy *p, const char *name, SecretSet **secrets,
                        int *ret_ca_fd, ProxyProcess *ret, HutchError *reterr);

/* The command's working directory: -w, else /workspace with a workspace,
 * else the image's WorkingDir ("/" without one), else $HOME (both
 * backends: the namespace runtime's init and the VM's EXEC). */
const char *sandbox_workdir(const Policy *policy, const ImageRoot *image);
