/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/pidfd.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "ns/caps.h"
#include "ns/userns.h"
#include "sandbox/backend.h"
#include "sandbox/cgroup-setup.h"
#include "sandbox/container.h"
#include "sandbox/init.h"
#include "sandbox/proxy-spawn.h"
#include "sandbox/sandbox-internal.h"
#include "sandbox/sandbox.h"
#include "sandbox/secrets.h"
#include "sandbox/supervise.h"
#include "sandbox/sync.h"
#include "store/id-pool.h"
#include "strv.h"
#include "time-util.h"

#define SANDBOX_NS_FLAGS                                                                           \
        (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | \
         CLONE_NEWCGROUP)

/* How long hutch-proxy may take to send its CA certificate. */
#define SANDBOX_CA_TIMEOUT_MS 10000
#define SANDBOX_CA_PEM_MAX (64U << 10)

static const int supervisor_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

pid_t sandbox_clone(uint64_t flags, int *ret_pidfd) {
        struct clone_args args = {
                .flags = flags | CLONE_PIDFD,
                .pidfd = (uint64_t)(uintptr_t)ret_pidfd,
                .exit_signal = SIGCHLD,
        };
        unsigned long legacy = (unsigned long)(flags | CLONE_PIDFD) | SIGCHLD;
        int pidfd = -EBADF;
        long pid;

        pid = syscall(SYS_clone3, &args, sizeof(args));
        if (pid >= 0 || (errno != ENOSYS && errno != EPERM))
                return pid < 0 ? (pid_t)negative_errno() : (pid_t)pid;

        /* COMPAT(container seccomp profiles): Docker's and Podman's default
         * profiles answer clone3 with ENOSYS (seccomp cannot read its flags)
         * so that runtimes fall back to clone(); other filters answer EPERM.
         * clone() takes the same namespace flags (all below bit 32) and
         * writes the CLONE_PIDFD descriptor through its parent_tid argument,
         * the third on every architecture but s390 (not built). A real EPERM
         * (no user namespaces) fails the same way here. */
        pid = syscall(SYS_clone, legacy, NULL, &pidfd, NULL, NULL);
        if (pid < 0)
                return (pid_t)negative_errno();
        if (pid > 0)
                *ret_pidfd = pidfd;
        return (pid_t)pid;
}

pid_t sandbox_clone_into(uint64_t flags, int cgroup_fd, int *ret_pidfd, bool *ret_joined) {
        struct clone_args args = {
                .flags = flags | CLONE_PIDFD | CLONE_INTO_CGROUP,
                .pidfd = (uint64_t)(uintptr_t)ret_pidfd,
                .exit_signal = SIGCHLD,
                .cgroup = (uint64_t)cgroup_fd,
        };
        long pid;

        *ret_joined = false;
        if (cgroup_fd < 0)
                return sandbox_clone(flags, ret_pidfd);
        pid = syscall(SYS_clone3, &args, sizeof(args));
        if (pid >= 0) {
                *ret_joined = true;
                return (pid_t)pid;
        }
        /* COMPAT(kernel < 5.7: E2BIG for the longer clone_args; container
         * seccomp profiles: ENOSYS or EPERM): the clone without the
         * cgroup, which the caller then attaches the old way. So does a
         * refusal of the cgroup (EACCES, EBUSY, ...): the old attach then
         * fails with the same error, in the words it always used, and a
         * failure to make the namespaces is reported as such. */
        return sandbox_clone(flags, ret_pidfd);
}

/* Makes a detached copy of the host tree at @path for the sandbox. When the
 * mapping is privileged (hutch runs as root), the copy is idmapped through the
 * sandbox's user namespace so that files of the caller appear as the
 * sandbox's root and files the sandbox creates belong to the caller on the
 * host. A read-only bind on a filesystem without idmap support falls back to
 * a plain copy (its files then show as nobody, readable where the modes
 * allow). */
static int open_detached_tree(const char *path, int userns_fd, bool read_only, bool must_idmap,
                              int *ret_fd, HutchError *reterr) {
        _cleanup_close_ int fd = -EBADF, pathfd = -EBADF;
        /* SECURITY: the clone must not stay in the host mount's peer group,
         * or mounts would propagate between the sandbox and the host. */
        struct mount_attr attr = {
                .attr_set = (userns_fd >= 0 ? MOUNT_ATTR_IDMAP : 0) | MOUNT_ATTR_NOSUID |
                            MOUNT_ATTR_NODEV | (read_only ? MOUNT_ATTR_RDONLY : 0),
                .propagation = MS_PRIVATE,
                .userns_fd = userns_fd >= 0 ? (uint64_t)userns_fd : 0,
        };
        struct open_how how = {
                .flags = O_PATH | O_CLOEXEC,
                .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };

        /* SECURITY: @path was validated (canonical, no symlinks); opening it
         * again without following symlinks means a component swapped for a
         * symlink since then (to "/", say) fails instead of being mounted
         * into the sandbox with the caller's ownership. */
        pathfd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
        if (pathfd < 0)
                return hutch_error_set(reterr, errno,
                                       "failed to open '%s' for the sandbox (a symlink in the path "
                                       "is refused): %m",
                                       path);
        fd = open_tree(pathfd, "",
                       OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH);
        if (fd < 0)
                return hutch_error_set(reterr, errno, "failed to open '%s' for the sandbox: %m",
                                       path);
        if (mount_setattr(fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) < 0) {
                int e = errno;

                if (!read_only || must_idmap || userns_fd < 0 || (e != EINVAL && e != EOPNOTSUPP))
                        return hutch_error_set(
                                reterr, e,
                                "failed to map ownership of '%s' into the sandbox "
                                "(its filesystem may not support idmapped mounts): %s",
                                path, strerror(e));
                attr.attr_set &= ~(uint64_t)MOUNT_ATTR_IDMAP;
                attr.userns_fd = 0;
                if (mount_setattr(fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) < 0)
                        return hutch_error_set(reterr, errno, "failed to make '%s' read-only: %m",
                                               path);
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int sandbox_open_detached_tree(const char *path, int userns_fd, bool read_only, int *ret_fd,
                               HutchError *reterr) {
        return open_detached_tree(path, userns_fd, read_only, false, ret_fd, reterr);
}

/* A persistent sandbox's layers: with a range of the pool, idmapped from
 * the store's fixed range onto the sandbox's through @layer_userns_fd.
 * SECURITY: refused, never a plain mount, where the idmap cannot be
 * made: the sandbox would see its files as nobody, or (a read-only
 * fallback) write nothing but read with the wrong owners. */
static int open_layer_trees(const SandboxLayerPaths *layers, int layer_userns_fd, Prepared *ret,
                            HutchError *reterr) {
        bool must = layer_userns_fd >= 0;
        int r;

        r = open_detached_tree(layers->data_dir, layer_userns_fd, false, must, &ret->layer_fds[0],
                               reterr);
        if (r < 0)
                return r;
        ret->n_layer_fds = 1;
        STRV_FOREACH(l, layers->layers) {
                if (ret->n_layer_fds >= ELEMENTSOF(ret->layer_fds))
                        return hutch_error_set(reterr, E2BIG, "too many layers");
                r = open_detached_tree(*l, layer_userns_fd, true, must,
                                       &ret->layer_fds[ret->n_layer_fds], reterr);
                if (r < 0)
                        return r;
                ret->n_layer_fds++;
        }
        return 0;
}

void prepared_done(Prepared *p) {
        for (size_t i = 0; i < ELEMENTSOF(p->fds); i++)
                p->fds[i] = safe_close(p->fds[i]);
        for (size_t i = 0; i < ELEMENTSOF(p->layer_fds); i++)
                p->layer_fds[i] = safe_close(p->layer_fds[i]);
}

bool sandbox_has_cap_sys_admin(void) {
        struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
        struct __user_cap_data_struct d[2] = {};

        if (syscall(SYS_capget, &h, d) < 0)
                return false;
        return d[CAP_SYS_ADMIN / 32].effective & (1U << (CAP_SYS_ADMIN % 32));
}

/* As root, the supervisor prepares every host tree the sandbox gets (the
 * workspace and -v binds) as idmapped detached mounts; unprivileged, init
 * binds them by path itself and the fds stay -EBADF. */
int sandbox_prepare_mounts(const Policy *p, const SandboxLayerPaths *layers, const IdMapping *m,
                           pid_t pid, bool root_only, Prepared *ret, HutchError *reterr) {
        _cleanup_close_ int userns_fd = -EBADF;
        char path[64];
        int r;

        for (size_t i = 0; i < ELEMENTSOF(ret->fds); i++)
                ret->fds[i] = -EBADF;
        for (size_t i = 0; i < ELEMENTSOF(ret->layer_fds); i++)
                ret->layer_fds[i] = -EBADF;
        ret->n_fds = 1 + p->n_binds;
        ret->n_layer_fds = 0;
        /* COMPAT(containers): root of a container without CAP_SYS_ADMIN
         * (Docker's default capabilities) cannot clone mount trees; init
         * then binds the host paths itself, as for an unprivileged caller,
         * and the caller's files show as nobody inside (docs/containers.md). */
        if (!m->privileged || !sandbox_has_cap_sys_admin())
                return 0;

        /* A persistent sandbox's own directories belong to the store's
         * fixed range (the store made them so). Without a range of the
         * pool that is the sandbox's root: no idmap. With one, they are
         * idmapped onto the sandbox's range (docs/persistent.md "Id
         * range"), so that its files on the host keep the store's owner
         * and a snapshot serves any sandbox. */
        if (layers) {
                _cleanup_close_ int layer_userns_fd = -EBADF;

                if (m->layer_uid_base != 0 &&
                    (m->layer_uid_base != m->uid_base || m->layer_gid_base != m->gid_base)) {
                        IdMapping shift = *m;

                        shift.inside_uid = m->layer_uid_base;
                        shift.inside_gid = m->layer_gid_base;
                        r = sandbox_userns_make(&shift, &layer_userns_fd, reterr);
                        if (r < 0)
                                return r;
                }
                r = open_layer_trees(layers, layer_userns_fd, ret, reterr);
                if (r < 0)
                        return r;
        }

        /* SECURITY: a sandbox whose root keeps capabilities over its range
         * (a persistent one: CAPS_PACKAGE_SET) must not see host files of
         * other ids as its own ids through the idmap (host uid 1000's
         * files as sandbox uid 1000, open to its dac_override): the trees
         * are mapped through a namespace of the sandbox's root alone, and
         * every other owner is unmapped (nobody) there. */
        if (root_only) {
                IdMapping one = *m;

                one.count = 1;
                r = sandbox_userns_make(&one, &userns_fd, reterr);
                if (r < 0)
                        return r;
                return sandbox_prepare_trees(p, userns_fd, userns_fd, ret, reterr);
        }
        (void)snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
        userns_fd = open(path, O_RDONLY | O_CLOEXEC);
        if (userns_fd < 0)
                return hutch_error_set(reterr, errno,
                                       "failed to open the sandbox's user "
                                       "namespace: %m");
        return sandbox_prepare_trees(p, userns_fd, userns_fd, ret, reterr);
}

int sandbox_prepare_trees(const Policy *p, int ro_userns_fd, int rw_userns_fd, Prepared *ret,
                          HutchError *reterr) {
        int r;

        if (p->workspace) {
                /* SECURITY: a copy's source and an overlay's lower layer are
                 * never written through this mount. */
                bool ro = p->read_only || p->workspace_mode == WORKSPACE_MODE_COPY ||
                          p->workspace_mode == WORKSPACE_MODE_OVERLAY;

                r = sandbox_open_detached_tree(p->workspace, ro ? ro_userns_fd : rw_userns_fd, ro,
                                               &ret->fds[0], reterr);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < p->n_binds; i++) {
                bool ro = p->binds[i].read_only; /* --read-only leaves binds alone */

                r = sandbox_open_detached_tree(p->binds[i].source, ro ? ro_userns_fd : rw_userns_fd,
                                               ro, &ret->fds[1 + i], reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int fill_outcome(const Supervision *s, const struct rusage *ru, const CgroupStats *st,
                        unsigned degraded, Outcome *ret) {
        Outcome o = {
                .wall_ms = s->end_ms - (s->start_ms ? s->start_ms : s->end_ms),
                .cpu_ms =
                        st->have_cpu
                                ? st->cpu_usec / 1000
                                : (uint64_t)(ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1000 +
                                          (uint64_t)(ru->ru_utime.tv_usec + ru->ru_stime.tv_usec) /
                                                  1000,
                .mem_peak_bytes =
                        st->have_mem_peak ? st->mem_peak_bytes : (uint64_t)ru->ru_maxrss * 1024,
                .stdout_truncated = s->relays[0].truncated,
                .stderr_truncated = s->relays[1].truncated,
                .degraded = degraded,
                .fallbacks = s->fallbacks,
        };

        if (s->exited && WIFEXITED(s->status)) {
                o.reason = OUTCOME_EXITED;
                o.exit_code = WEXITSTATUS(s->status);
        } else if (s->exited && WIFSIGNALED(s->status)) {
                o.reason = OUTCOME_SIGNALED;
                o.signal = WTERMSIG(s->status);
                o.exit_code = 128 + o.signal;
        } else if (s->timed_out || st->oom_kills > 0) {
                /* Init itself was killed: by the timeout, or by the OOM
                 * killer, which takes the whole exec cgroup on v2. */
                o.signal = SIGKILL;
                o.exit_code = 128 + SIGKILL;
        } else
                return -EPROTO;

        /* Which limit ended the command, read from the kernel's counters,
         * never guessed from the signal. */
        if (s->timed_out)
                o.reason = OUTCOME_TIMEOUT;
        else if (st->oom_kills > 0)
                o.reason = OUTCOME_OOM;
        else if (st->pids_max_events > 0 && o.exit_code != 0)
                o.reason = OUTCOME_PIDS;
        else if (o.reason == OUTCOME_SIGNALED && o.signal == s->forwarded_signal)
                o.reason = OUTCOME_KILLED;
        *ret = o;
        return 0;
}

/* With an output limit, the command writes into pipes that the supervisor
 * relays; without one it writes to the caller's stdout/stderr directly. */
static int relays_open(const Policy *p, Supervision *s, int write_ends[2]) {
        for (size_t i = 0; i < 2; i++) {
                int fds[2];

                s->relays[i] =
                        (Relay){.in_fd = -EBADF, .out_fd = (int)i + 1, .limit = p->output_limit};
                write_ends[i] = -EBADF;
                if (!p->output_limit)
                        continue;
                s->relays[i].buf = malloc(RELAY_BUF_SIZE);
                if (!s->relays[i].buf)
                        return -ENOMEM;
                if (pipe2(fds, O_CLOEXEC) < 0)
                        return negative_errno();
                s->relays[i].in_fd = fds[0];
                write_ends[i] = fds[1];
        }
        return 0;
}

void run_state_done(RunState *st) {
        port_forwards_done(&st->ports);
        if (st->proxy.pid > 0) {
                _cleanup_free_ char *ignored = NULL;

                (void)proxy_stop(&st->proxy, &ignored);
        }
        st->proxy_binary = mfree(st->proxy_binary);
        st->ca_fd = safe_close(st->ca_fd);
        st->secrets = secret_set_free(st->secrets);
        st->env = strv_free(st->env);
        st->args = strv_free(st->args);
        st->image = image_root_free(st->image);
        for (size_t i = 0; i < st->n_image_fds; i++)
                st->image_fds[i] = safe_close(st->image_fds[i]);
        st->image_fds = mfree(st->image_fds);
        st->n_image_fds = 0;
        st->sync_parent = safe_close(st->sync_parent);
        st->sync_child = safe_close(st->sync_child);
        st->pidfd = safe_close(st->pidfd);
        st->sigfd = safe_close(st->sigfd);
        for (size_t i = 0; i < 2; i++)
                st->out_w[i] = safe_close(st->out_w[i]);
        prepared_done(&st->prep);
        supervision_done(&st->sup);
        run_cgroup_done(&st->rc);
        if (st->pipe_saved)
                (void)sigaction(SIGPIPE, &st->old_pipe, NULL);
        if (st->mask_saved)
                (void)sigprocmask(SIG_SETMASK, &st->orig_mask, NULL);
        st->mask_saved = false;
        /* Last: the sandbox (init, reaped) and its cgroup are gone. */
        st->id_lease = safe_close(st->id_lease);
}

static int start_proxy(RunState *st, HutchError *reterr);

/* Reads what init already sent without waiting; an ERROR replaces @reterr. */
static void prefer_init_error(int sync_fd, HutchError *reterr) {
        for (;;) {
                struct pollfd pfd = {.fd = sync_fd, .events = POLLIN};
                int fds[2] = {-EBADF, -EBADF};
                SyncMsg m;

                if (sync_fd < 0 || poll(&pfd, 1, 0) <= 0 || !(pfd.revents & POLLIN))
                        return;
                if (sync_recv(sync_fd, &m, fds, ELEMENTSOF(fds)) <= 0)
                        return;
                for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                        fds[i] = safe_close(fds[i]);
                if (m.op == SYNC_OP_ERROR) {
                        (void)hutch_error_set(reterr, m.err > 0 && m.err < 4096 ? m.err : EIO,
                                              "sandbox setup failed: %s: %s", m.step, m.msg);
                        return;
                }
        }
}

int sandbox_env_add_placeholders(char ***env, const SecretSet *secrets, HutchError *reterr) {
        int r;

        /* The placeholders win over -e and --env-pass of the same name: the
         * real value must never be passed in. */
        for (size_t i = 0; secrets && i < secrets->n; i++) {
                r = strv_env_set(env, secrets->items[i].def->name, secrets->items[i].placeholder);
                if (r < 0)
                        return hutch_error_set(reterr, -r, "failed to build the environment");
        }
        /* SECURITY: no real value may reach the environment by another name
         * (--env-pass of the variable it came from, an LC_* variable, -e):
         * refuse the run rather than hand it in. */
        for (size_t i = 0; secrets && i < secrets->n; i++)
                STRV_FOREACH(e, *env)
                        if (memmem(*e, strlen(*e), secrets->items[i].value, secrets->items[i].len))
                                return hutch_error_set(
                                        reterr, EPERM,
                                        "secret '%s': its real value would reach the sandbox "
                                        "through the environment variable '%.*s' (drop that "
                                        "-e/--env-pass)",
                                        secrets->items[i].def->name, (int)strcspn(*e, "="), *e);
        return 0;
}

/* Everything up to the clone: nothing here creates a namespace, so a
 * failure leaves nothing behind but what run_state_done() releases. */
static int run_prepare(const Policy *policy, char *const *argv, char *const *caller_env,
                       RunState *st, HutchError *reterr) {
        struct sigaction ign = {.sa_handler = SIG_IGN};
        uint32_t salt = 0;
        int socks[2], r;

        st->policy = policy;
        /* Best effort: the pid alone names it among live runs. */
        if (getrandom(&salt, sizeof(salt), GRND_NONBLOCK) != (ssize_t)sizeof(salt))
                salt = 0;
        (void)snprintf(st->name, sizeof(st->name), "run-%d-%08x", (int)getpid(), salt);
        if (policy_network_mode(policy) == NETWORK_MODE_ALLOW) {
                /* Before anything is created: no proxy, no network wall. */
                r = proxy_binary_find(&st->proxy_binary, reterr);
                if (r < 0)
                        return r;
        }
        /* Before anything is created: a secret that cannot be read is bad
         * input, reported with nothing to undo. */
        r = secret_set_load(policy, caller_env, &st->secrets, reterr);
        if (r < 0)
                return r;

        r = sandbox_build_env(policy, st->image ? st->image->env : NULL, caller_env, &st->env);
        if (r < 0)
                return hutch_error_set(reterr, -r, "failed to build the environment");
        r = sandbox_env_add_placeholders(&st->env, st->secrets, reterr);
        if (r < 0)
                return r;
        if (argv) {
                st->args = strv_copy(argv);
                if (!st->args)
                        return hutch_error_set(reterr, ENOMEM, "out of memory");
        }

        r = run_cgroup_plan(policy, &st->rc, reterr);
        if (r < 0)
                return r;
        r = start_proxy(st, reterr);
        if (r < 0)
                return r;

        r = relays_open(policy, &st->sup, st->out_w);
        if (r < 0)
                return hutch_error_set(reterr, -r, "failed to create the output pipes: %s",
                                       strerror(-r));
        if (policy->output_limit) {
                /* A reader of our stdout that goes away must not kill the
                 * supervisor; init gives the command default dispositions. */
                if (sigaction(SIGPIPE, &ign, &st->old_pipe) == 0)
                        st->pipe_saved = true;
        }

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, socks) < 0)
                return hutch_error_set(reterr, errno, "failed to create the sync socket: %m");
        st->sync_parent = socks[0];
        st->sync_child = socks[1];
        return 0;
}

/* Reads the proxy's CA certificate (PEM, EOF-terminated) from @fd, within
 * SANDBOX_CA_TIMEOUT_MS. */
static int read_ca_pem(int fd, char **ret, size_t *ret_len, HutchError *reterr) {
        _cleanup_free_ char *pem = NULL;
        ssize_t len;

        pem = malloc(SANDBOX_CA_PEM_MAX + 1);
        if (!pem)
                return -ENOMEM;
        len = read_until_eof(fd, pem, SANDBOX_CA_PEM_MAX, SANDBOX_CA_TIMEOUT_MS);
        if (len == -ETIMEDOUT)
                return hutch_error_set(reterr, ETIMEDOUT,
                                       "hutch-proxy did not send its CA certificate within %d ms",
                                       SANDBOX_CA_TIMEOUT_MS);
        if (len == -EFBIG)
                return hutch_error_set(reterr, EFBIG, "hutch-proxy's CA certificate is too large");
        if (len < 0)
                return hutch_error_set(reterr, (int)-len,
                                       "failed to read hutch-proxy's CA certificate: %s",
                                       strerror((int)-len));
        pem[len] = '\0';
        if (len == 0 || !strstr(pem, "-----BEGIN CERTIFICATE-----") ||
            !strstr(pem, "-----END CERTIFICATE-----"))
                return hutch_error_set(reterr, EPROTO,
                                       "hutch-proxy sent no CA certificate (its own error, if "
                                       "any, is above)");
        *ret = TAKE_PTR(pem);
        *ret_len = (size_t)len;
        return 0;
}

/* The sandbox's CA certificate in a sealed memfd, for init to append to
 * the bundle it made from the host's system CAs while the proxy made the
 * CA (rootfs_install_ca_bundle()). */
static int make_ca_memfd(const char *pem, size_t pem_len, HutchError *reterr) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        fd = memfd_create("hutch-ca-bundle", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return hutch_error_set(reterr, errno, "failed to create the CA bundle: %m");
        r = loop_write(fd, pem, pem_len);
        if (r < 0)
                return hutch_error_set(reterr, -r, "failed to write the CA bundle: %s",
                                       strerror(-r));
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
                return hutch_error_set(reterr, errno, "failed to seal the CA bundle: %m");
        return TAKE_FD(fd);
}

/* Network mode allow: hutch-proxy starts before the sandbox exists, so
 * that its start-up (OpenSSL's, with secrets) overlaps the sandbox's; it
 * gets the listening sockets when init has made them. With secrets it gets
 * its configuration memfd and writes the CA certificate to a pipe whose
 * read end stays in st->ca_fd. */
int sandbox_proxy_start(const char *binary, const Policy *p, const char *name, SecretSet **secrets,
                        int *ret_ca_fd, ProxyProcess *ret, HutchError *reterr) {
        _cleanup_close_ int config = -EBADF, ca_w = -EBADF, ca_r = -EBADF;
        int pipes[2], r;

        if (p->n_secrets > 0) {
                config = secret_set_config_memfd(*secrets);
                if (config < 0)
                        return hutch_error_set(reterr, -config,
                                               "failed to write hutch-proxy's configuration: %s",
                                               strerror(-config));
                /* SECURITY: from here on only the memfd (and then the proxy)
                 * holds the real values; the sandbox is started later. */
                *secrets = secret_set_free(*secrets);
                if (pipe2(pipes, O_CLOEXEC) < 0)
                        return hutch_error_set(reterr, errno, "failed to create the CA pipe: %m");
                ca_r = pipes[0];
                ca_w = pipes[1];
        }
        r = proxy_spawn(binary, p, name, config, ca_w, ret, reterr);
        if (r < 0)
                return r;
        if (ret_ca_fd)
                *ret_ca_fd = TAKE_FD(ca_r);
        return 0;
}

static int start_proxy(RunState *st, HutchError *reterr) {
        if (!st->proxy_binary)
                return 0;
        return sandbox_proxy_start(st->proxy_binary, st->policy, st->name, &st->secrets, &st->ca_fd,
                                   &st->proxy, reterr);
}

/* With secrets: the proxy's CA, which init adds to the sandbox's bundle
 * before the command runs (SYNC_OP_CA), or the VM finds in its share. */
int sandbox_ca_receive(int ca_fd, int *ret_ca, uint64_t *ret_hash, HutchError *reterr) {
        _cleanup_close_ int ca = -EBADF;
        _cleanup_free_ char *pem = NULL;
        const char *tag;
        uint64_t hash = 0;
        size_t pem_len = 0;
        int r;

        r = read_ca_pem(ca_fd, &pem, &pem_len, reterr);
        if (r < 0)
                return r;
        /* "# subject-hash: 8 hex digits" after the PEM block (0 = none). */
        tag = strstr(pem, "# subject-hash: ");
        for (size_t i = 0; tag && i < 8; i++) {
                char ch = tag[16 + i];
                int d = ch >= '0' && ch <= '9'   ? ch - '0'
                        : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                                                 : -1;

                if (d < 0) {
                        hash = 0;
                        break;
                }
                hash = hash << 4 | (uint64_t)d;
        }
        ca = make_ca_memfd(pem, pem_len, reterr);
        if (ca < 0)
                return ca;
        *ret_ca = TAKE_FD(ca);
        *ret_hash = hash;
        return 0;
}

static int send_ca_bundle(RunState *st, HutchError *reterr) {
        _cleanup_close_ int ca = -EBADF;
        uint64_t hash = 0;
        int r;

        r = sandbox_ca_receive(st->ca_fd, &ca, &hash, reterr);
        if (r < 0)
                return r;
        st->ca_fd = safe_close(st->ca_fd);
        r = sync_send_values(st->sync_parent, SYNC_OP_CA, (uint64_t[3]){hash, 0, 0}, &ca, 1);
        if (r < 0)
                return hutch_error_set(reterr, -r, "failed to send the CA bundle: %s",
                                       strerror(-r));
        return 0;
}

/* The proxy's listening sockets arrived from init: hand them to the
 * running proxy. They are closed here either way; the proxy holds the only
 * other copies. */
int sandbox_on_proxy_sockets(Supervision *s, int *fds, size_t n_fds, HutchError *reterr) {
        RunState *st = s->userdata;
        int r = -EPROTO;

        if (st->proxy.pid > 0 && n_fds > 0)
                r = proxy_hand_sockets(&st->proxy, fds, n_fds);
        for (size_t i = 0; i < n_fds; i++)
                fds[i] = safe_close(fds[i]);
        if (r < 0)
                return hutch_error_set(reterr, -r, "failed to hand the sockets to hutch-proxy: %s",
                                       strerror(-r));
        return 0;
}

void run_state_init(RunState *st) {
        *st = (RunState){
                .sync_parent = -EBADF,
                .sync_child = -EBADF,
                .pidfd = -EBADF,
                .sigfd = -EBADF,
                .out_w = {-EBADF, -EBADF},
                .proxy = PROXY_PROCESS_NULL,
                .ca_fd = -EBADF,
                .sup.relays = {{.in_fd = -EBADF}, {.in_fd = -EBADF}},
                .id_lease = -EBADF,
        };
        for (size_t i = 0; i < ELEMENTSOF(st->prep.fds); i++)
                st->prep.fds[i] = -EBADF;
        for (size_t i = 0; i < ELEMENTSOF(st->prep.layer_fds); i++)
                st->prep.layer_fds[i] = -EBADF;
        port_forwards_init(&st->ports);
}

void sandbox_abort(RunState *st, HutchError *reterr) {
        /* Undo: the half-started sandbox dies with its namespaces. If init
         * failed first (our send then saw EPIPE), its own error says more. */
        prefer_init_error(st->sync_parent, reterr);
        if (st->pid > 0) {
                (void)pidfd_send_signal(st->pidfd, SIGKILL, NULL, 0);
                (void)waitpid(st->pid, NULL, 0);
                st->pid = 0;
        }
}

const char *sandbox_workdir(const Policy *policy, const ImageRoot *image) {
        if (policy->workdir)
                return policy->workdir;
        if (policy->workspace)
                return POLICY_SANDBOX_WORKSPACE;
        if (image)
                return image->workdir ? image->workdir : "/";
        return POLICY_SANDBOX_HOME;
}

/* As root, an image's layers travel to init as detached read-only mounts
 * idmapped through the sandbox's user namespace: a file the image gives
 * to uid N is the sandbox's uid N, and the image's uid 0 is the sandbox's
 * root, never the host's (the layers are the store's files, owned on the
 * host by the image's own ids). Unprivileged, the layers are the
 * caller's files, which the single-id map makes the sandbox root's, and
 * init binds them by path. */
static int prepare_image_layers(RunState *st, const IdMapping *m, pid_t pid, HutchError *reterr) {
        _cleanup_close_ int userns_fd = -EBADF;
        size_t n;
        char path[64];
        int r;

        /* COMPAT(containers): without CAP_SYS_ADMIN, as for the binds
         * (sandbox_prepare_mounts()). */
        if (!st->image || !m->privileged || !sandbox_has_cap_sys_admin())
                return 0;
        n = strv_length(st->image->layers);
        st->image_fds = calloc(n ? n : 1, sizeof(int));
        if (!st->image_fds)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        (void)snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
        userns_fd = open(path, O_RDONLY | O_CLOEXEC);
        if (userns_fd < 0)
                return hutch_error_set(reterr, errno,
                                       "failed to open the sandbox's user "
                                       "namespace: %m");
        for (size_t i = 0; i < n; i++) {
                r = sandbox_open_detached_tree(st->image->layers[i], userns_fd, true,
                                               &st->image_fds[i], reterr);
                if (r < 0)
                        return r;
                st->n_image_fds++;
        }
        return 0;
}

/* Set by the CLI before its one sandbox_run() (`hutch run -t`), read by the
 * clone's child: a process runs one command, from one thread. */
static bool command_tty;

int sandbox_start(const Policy *policy, const SandboxLayerPaths *layers, char *const *argv,
                  char *const *caller_env, RunState *st, HutchError *reterr) {
        ContainerEngine container = container_detect();
        sigset_t mask;
        IdMapping idmap;
        uint64_t keep_caps;
        const char *workdir;
        int cg_fds[INIT_CGROUP_FDS_MAX], cg_v2_fd = -EBADF;
        size_t n_cg_fds = 0, n_cg_tasks = 0;
        bool cg_joined = false;
        pid_t pid;
        int r;

        if (!layers && !policy->image && (!argv || !argv[0]))
                return hutch_error_set(reterr, EINVAL, "missing command");

        /* A persistent sandbox of a user with sub-ids gets the ranged map
         * (docs/persistent.md "Id range"); a one-shot run keeps the
         * single-id map: nothing it installs would outlive it. */
        r = layers ? idmapping_for_caller_ranged(NULL, NULL, NULL, &idmap)
                   : idmapping_for_caller(NULL, NULL, &idmap);
        if (r < 0)
                return hutch_error_set(reterr, -r, "failed to pick the sandbox's id range: %s",
                                       strerror(-r));
        /* SECURITY: as root, a persistent sandbox's ids are its own range
         * of the pool, never another sandbox's (docs/persistent.md "Id
         * range"). */
        /* COMPAT(containers): without CAP_SYS_ADMIN no tree is idmapped
         * (sandbox_prepare_mounts()), so the layers could not follow: the
         * store's range, as the binds fall back (docs/containers.md). */
        if (layers && sandbox_has_cap_sys_admin())
                idmapping_use_pool_range(&idmap, layers->id_base);
        /* SECURITY: as root, a one-shot run's ids are a range of the pool
         * leased for its lifetime, never another sandbox's (issue 15;
         * docs/persistent.md "Id range"): the lease goes when this process
         * ends, however it ends. Its host trees are idmapped through its
         * user namespace, so what it writes there is owned as before. */
        if (!layers && idmap.privileged && sandbox_has_cap_sys_admin()) {
                uint32_t base = 0;

                r = id_pool_lease(&base, &st->id_lease, reterr);
                if (r < 0)
                        return r;
                idmapping_use_pool_range(&idmap, base);
        }
        /* SECURITY: a persistent sandbox whose user namespace holds a range
         * keeps what apt and dpkg need over that range's ids
         * (docs/persistent.md "Id range"); every other sandbox keeps
         * nothing. */
        keep_caps = layers && (idmap.ranged || idmap.privileged) ? CAPS_PACKAGE_SET : 0;
        if (policy->image) {
                r = image_root_resolve(policy->image, &st->image, reterr);
                /* A one-shot run holds its image for its lifetime (a
                 * persistent sandbox's mark is its record's). */
                if (r >= 0 && !layers)
                        r = image_root_mark_run(st->image, reterr);
                if (r < 0)
                        return r;
        }
        r = run_prepare(policy, layers ? NULL : argv, caller_env, st, reterr);
        if (r < 0)
                return r;
        /* Before the sandbox exists: a host port in use is bad input with
         * nothing to undo. Init closes every fd it inherits but its sync
         * socket, so the listeners never reach the sandbox. */
        r = port_forwards_bind(&st->ports, policy->ports, reterr);
        if (r < 0)
                return r;
        if (st->image && !layers) {
                /* Docker's rules: Entrypoint, then the command or Cmd. */
                st->args = strv_free(st->args);
                r = image_root_command(st->image, argv, &st->args, reterr);
                if (r < 0)
                        return r;
        }
        workdir = sandbox_workdir(policy, st->image);

        sigemptyset(&mask);
        for (size_t i = 0; i < ELEMENTSOF(supervisor_signals); i++)
                sigaddset(&mask, supervisor_signals[i]);
        if (sigprocmask(SIG_BLOCK, &mask, &st->orig_mask) < 0)
                return hutch_error_set(reterr, errno, "failed to block signals: %m");
        st->mask_saved = true;
        st->sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (st->sigfd < 0)
                return hutch_error_set(reterr, errno, "failed to create a signalfd: %m");

        /* Issue 16: the cgroups exist before init, which starts in the v2
         * leaf (clone3 CLONE_INTO_CGROUP) and, as its first action, moves
         * itself into the v1 ones through "tasks" files opened here (see
         * cgroup_open_join()): moving another process's pid instead takes
         * the kernel's cgroup_threadgroup_rwsem for writing, which waits
         * for an RCU grace period (6-20 ms on a loaded host). The old move
         * remains only where clone3 cannot do it (joined stays false). */
        st->rc.one_shot = !layers; /* a keeper's execs get child cgroups */
        r = run_cgroup_create(policy, &st->rc, st->name, reterr);
        if (r < 0)
                return r;
        if (st->rc.cgroup) {
                r = cgroup_open_join(st->rc.cgroup, &cg_v2_fd, cg_fds, ELEMENTSOF(cg_fds) - 1,
                                     &n_cg_tasks);
                if (r < 0)
                        return hutch_error_set(reterr, -r,
                                               "failed to move the sandbox into its cgroup: %s",
                                               strerror(-r));
        }
        n_cg_fds = n_cg_tasks;
        if (cg_v2_fd >= 0)
                cg_fds[n_cg_fds++] = cg_v2_fd;

        pid = sandbox_clone_into(SANDBOX_NS_FLAGS, cg_v2_fd, &st->pidfd, &cg_joined);
        for (size_t i = 0; pid != 0 && i < n_cg_fds; i++)
                cg_fds[i] = safe_close(cg_fds[i]);
        if (pid < 0) {
                const char *fix = container_fix(container, CONTAINER_NEED_NAMESPACES);

                return hutch_error_set(reterr, -pid,
                                       "failed to create the sandbox namespaces: %s (%s%s%s'hutch "
                                       "doctor' says more)",
                                       strerror(-pid), fix ? "in this container: " : "", fix ?: "",
                                       fix ? "; " : "");
        }
        if (pid == 0) {
                InitArgs a = {
                        .policy = policy,
                        .argv = st->args,
                        .envp = st->env,
                        .workdir = workdir,
                        .sync_fd = st->sync_child,
                        .stdout_fd = st->out_w[0],
                        .stderr_fd = st->out_w[1],
                        .tty = command_tty && !layers,
                        .persistent = layers != NULL,
                        .upper = layers ? layers->upper : NULL,
                        .data_dir = layers ? layers->data_dir : NULL,
                        .layer_paths = layers ? layers->layers : NULL,
                        .image = st->image,
                        .container = container,
                        .keep_caps = keep_caps,
                        .n_cgroup_fds = n_cg_fds,
                        .n_cgroup_tasks = n_cg_tasks,
                };

                memcpy(a.cgroup_fds, cg_fds, n_cg_fds * sizeof(int));
                sandbox_init_main(&a);
        }
        st->pid = pid;
        if (n_cg_fds > n_cg_tasks && !cg_joined) {
                /* The old way, before init runs anything of the user's
                 * (it waits for GO): also into the v1 leaves, where init
                 * moves itself too, which does no harm. */
                r = cgroup_attach(st->rc.cgroup, pid);
                if (r < 0) {
                        (void)hutch_error_set(reterr, -r,
                                              "failed to move the sandbox into its cgroup: %s",
                                              strerror(-r));
                        goto kill_child;
                }
        }
        st->sync_child = safe_close(st->sync_child);
        for (size_t i = 0; i < 2; i++)
                st->out_w[i] = safe_close(st->out_w[i]);

        /* A one-shot run's --timeout counts from here (supervise()); a
         * keeper's execs have their own (keeper.c). */
        if (!layers)
                command_deadline_start(&st->sup.deadline, time_monotonic_ms(), policy->timeout_ms);

        /* SECURITY: fail closed: a configured sub-id range that the
         * helpers refuse is an error, never a fallback to one id. */
        {
                HutchError maperr = {};

                r = userns_write_maps_full(pid, &idmap, &maperr);
                if (r < 0) {
                        (void)hutch_error_set(reterr, -r,
                                              "failed to write the sandbox's id maps: %s",
                                              maperr.msg[0] ? maperr.msg : strerror(-r));
                        goto kill_child;
                }
        }
        /* While init waits for GO it is still dumpable (its namespace
         * files ours to open); published ports need them later. */
        r = port_forwards_open_ns(&st->ports, pid);
        if (r < 0) {
                (void)hutch_error_set(reterr, -r, "failed to open the sandbox's namespaces: %s",
                                      strerror(-r));
                goto kill_child;
        }
        r = sandbox_prepare_mounts(policy, layers, &idmap, pid, keep_caps != 0, &st->prep, reterr);
        if (r < 0)
                goto kill_child;
        r = prepare_image_layers(st, &idmap, pid, reterr);
        if (r < 0)
                goto kill_child;
        {
                int fds[ELEMENTSOF(st->prep.fds)];
                size_t n = 0;

                /* Only the prepared trees travel, in order (workspace first,
                 * then the binds); init maps them back positionally. */
                for (size_t i = 0; i < st->prep.n_fds; i++)
                        if (st->prep.fds[i] >= 0)
                                fds[n++] = st->prep.fds[i];
                r = sync_send(st->sync_parent, SYNC_OP_GO, 0, 0, NULL, NULL, fds, n);
        }
        if (r >= 0 && layers)
                r = sync_send_values(st->sync_parent, SYNC_OP_LAYERS,
                                     (uint64_t[3]){strv_length(layers->layers), 0, 0},
                                     st->prep.layer_fds, st->prep.n_layer_fds);
        /* The image's layers: the first FD_MESSAGE_MAX with the message,
         * the rest in batches (an image may have IMAGE_ROOT_MAX_LAYERS). */
        if (r >= 0 && st->image)
                r = sync_send_values(st->sync_parent, SYNC_OP_IMAGE,
                                     (uint64_t[3]){strv_length(st->image->layers), 0, 0},
                                     st->image_fds, MIN(st->n_image_fds, (size_t)FD_MESSAGE_MAX));
        if (r >= 0 && st->image && st->n_image_fds > FD_MESSAGE_MAX)
                r = send_fds_batched(st->sync_parent, st->image_fds + FD_MESSAGE_MAX,
                                     st->n_image_fds - FD_MESSAGE_MAX);
        prepared_done(&st->prep);
        for (size_t i = 0; i < st->n_image_fds; i++)
                st->image_fds[i] = safe_close(st->image_fds[i]);
        st->n_image_fds = 0;
        if (r < 0) {
                (void)hutch_error_set(reterr, -r, "failed to start the sandbox: %s", strerror(-r));
                goto kill_child;
        }

        /* Init is in its cgroups (it joined the v1 ones before reading
         * GO); CONTINUE lets it run the user's command. */
        r = sync_send_values(st->sync_parent, SYNC_OP_CONTINUE,
                             (uint64_t[3]){st->rc.rlimits.memory_max,
                                           st->rc.rlimits.memory_swap_max, st->rc.rlimits.pids_max},
                             NULL, 0);
        if (r < 0) {
                (void)hutch_error_set(reterr, -r, "failed to start the sandbox: %s", strerror(-r));
                goto kill_child;
        }
        if (policy->n_secrets > 0) {
                r = send_ca_bundle(st, reterr);
                if (r < 0)
                        goto kill_child;
        }
        r = port_forwards_start(&st->ports, reterr);
        if (r < 0)
                goto kill_child;
        /* Off the start's path (issue 16): the command runs meanwhile. */
        run_cgroup_gc(&st->rc);
        return 0;

kill_child:
        sandbox_abort(st, reterr);
        return r;
}

static int sandbox_run_ns(const Policy *policy, char *const *argv, char *const *caller_env,
                          Outcome *ret_outcome, HutchError *reterr) {
        _cleanup_(run_state_done) RunState st;
        struct rusage ru = {};
        CgroupStats stats = {};
        _cleanup_free_ char *denied = NULL;
        int status = 0, r;

        run_state_init(&st);
        r = sandbox_start(policy, NULL, argv, caller_env, &st, reterr);
        if (r < 0)
                return r;

        st.sup.sync_fd = st.sync_parent;
        st.sup.pidfd = st.pidfd;
        st.sup.sigfd = st.sigfd;
        st.sup.cgroup = st.rc.cgroup;
        st.sup.on_sockets = sandbox_on_proxy_sockets;
        st.sup.userdata = &st;
        supervise(&st.sup);

        if (wait4(st.pid, &status, 0, &ru) < 0)
                return hutch_error_set(reterr, errno, "failed to wait for the sandbox: %m");
        st.pid = 0;
        if (st.sup.error.errnum != 0) {
                if (reterr)
                        *reterr = st.sup.error;
                return -st.sup.error.errnum;
        }
        run_cgroup_stats(&st.rc, &stats);
        if (policy_network_mode(policy) == NETWORK_MODE_ALLOW && st.proxy.pid <= 0)
                return hutch_error_set(reterr, EPROTO, "the sandbox's proxy never started");
        if (st.proxy.pid > 0) {
                r = proxy_stop(&st.proxy, &denied);
                if (r < 0)
                        return hutch_error_set(reterr, -r, "failed to read the proxy's summary: %s",
                                               strerror(-r));
        }
        r = fill_outcome(&st.sup, &ru, &stats, st.rc.degraded, ret_outcome);
        if (r < 0)
                return hutch_error_set(reterr, -r,
                                       "the sandbox init ended before the command finished "
                                       "(wait status 0x%x)",
                                       (unsigned)status);
        ret_outcome->denied = TAKE_PTR(denied);
        return 0;
}

void sandbox_set_command_tty(bool on) {
        command_tty = on;
}

int sandbox_run(const Policy *policy, char *const *argv, char *const *caller_env,
                Outcome *ret_outcome, HutchError *reterr) {
        if (policy->backend == SANDBOX_BACKEND_VM)
                return sandbox_run_vm(policy, argv, caller_env, command_tty, ret_outcome, reterr);
        return sandbox_run_ns(policy, argv, caller_env, ret_outcome, reterr);
}
