/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/pidfd.h>
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
#include "ns/userns.h"
#include "sandbox/init.h"
#include "sandbox/sandbox.h"
#include "sandbox/sync.h"
#include "strv.h"

#define SANDBOX_NS_FLAGS                                                                           \
        (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | \
         CLONE_NEWCGROUP)

static const int supervisor_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

static uint64_t now_ms(void) {
        struct timespec ts;

        (void)clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* clone3() with fork semantics (no new stack) and a pidfd. The caller is
 * single-threaded, so no lock can be held in the child. */
static pid_t clone_sandbox(int *ret_pidfd) {
        struct clone_args args = {
                .flags = SANDBOX_NS_FLAGS | CLONE_PIDFD,
                .pidfd = (uint64_t)(uintptr_t)ret_pidfd,
                .exit_signal = SIGCHLD,
        };
        long pid = syscall(SYS_clone3, &args, sizeof(args));

        if (pid < 0)
                return (pid_t)negative_errno();
        return (pid_t)pid;
}

/* Makes a detached copy of the host tree at @path for the sandbox. When the
 * mapping is privileged (hutch runs as root), the copy is idmapped through the
 * sandbox's user namespace so that files of the caller appear as the
 * sandbox's root and files the sandbox creates belong to the caller on the
 * host. A read-only bind on a filesystem without idmap support falls back to
 * a plain copy (its files then show as nobody, readable where the modes
 * allow). */
static int open_detached_tree(const char *path, int userns_fd, bool read_only, int *ret_fd,
                              HutchError *reterr) {
        _cleanup_close_ int fd = -EBADF;
        struct mount_attr attr = {
                .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                            (read_only ? MOUNT_ATTR_RDONLY : 0),
                .userns_fd = (uint64_t)userns_fd,
        };

        fd = open_tree(AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
        if (fd < 0)
                return hutch_error_set(reterr, errno, "failed to open '%s' for the sandbox: %m",
                                       path);
        if (mount_setattr(fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) < 0) {
                int e = errno;

                if (!read_only || (e != EINVAL && e != EOPNOTSUPP))
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

typedef struct Prepared {
        int fds[1 + POLICY_MAX_BINDS]; /* [0] workspace, then one per bind */
        size_t n_fds;
} Prepared;

static void prepared_done(Prepared *p) {
        for (size_t i = 0; i < ELEMENTSOF(p->fds); i++)
                p->fds[i] = safe_close(p->fds[i]);
}

/* As root, the supervisor prepares every host tree the sandbox gets (the
 * workspace and -v binds) as idmapped detached mounts; unprivileged, init
 * binds them by path itself and the fds stay -EBADF. */
static int prepare_mounts(const Policy *p, const IdMapping *m, pid_t pid, Prepared *ret,
                          HutchError *reterr) {
        _cleanup_close_ int userns_fd = -EBADF;
        char path[64];
        int r;

        for (size_t i = 0; i < ELEMENTSOF(ret->fds); i++)
                ret->fds[i] = -EBADF;
        ret->n_fds = 1 + p->n_binds;
        if (!m->privileged)
                return 0;

        (void)snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
        userns_fd = open(path, O_RDONLY | O_CLOEXEC);
        if (userns_fd < 0)
                return hutch_error_set(reterr, errno,
                                       "failed to open the sandbox's user "
                                       "namespace: %m");
        if (p->workspace) {
                r = open_detached_tree(p->workspace, userns_fd,
                                       p->read_only || p->workspace_mode == WORKSPACE_MODE_COPY,
                                       &ret->fds[0], reterr);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < p->n_binds; i++) {
                r = open_detached_tree(p->binds[i].source, userns_fd,
                                       p->read_only || p->binds[i].read_only, &ret->fds[1 + i],
                                       reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int fill_outcome(int status, const struct rusage *ru, uint64_t wall_ms, Outcome *ret) {
        Outcome o = {
                .wall_ms = wall_ms,
                .cpu_ms = (uint64_t)(ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1000 +
                          (uint64_t)(ru->ru_utime.tv_usec + ru->ru_stime.tv_usec) / 1000,
                .mem_peak_bytes = (uint64_t)ru->ru_maxrss * 1024,
        };

        if (WIFEXITED(status)) {
                o.reason = OUTCOME_EXITED;
                o.exit_code = WEXITSTATUS(status);
        } else if (WIFSIGNALED(status)) {
                o.reason = OUTCOME_SIGNALED;
                o.signal = WTERMSIG(status);
                o.exit_code = 128 + o.signal;
        } else
                return -EBADMSG;
        *ret = o;
        return 0;
}

typedef struct Supervision {
        int sync_fd;
        int pidfd;
        int sigfd;
        bool started, exited;
        int status;
        uint64_t start_ms, end_ms;
        HutchError error; /* errnum != 0 once init reported a failure */
} Supervision;

static void handle_sync_message(Supervision *s) {
        int fds[1];
        SyncMsg m;
        int r;

        r = sync_recv(s->sync_fd, &m, fds, ELEMENTSOF(fds));
        if (r <= 0) {
                /* EOF or garbage: stop reading; the pidfd ends the loop. */
                if (r < 0 && s->error.errnum == 0)
                        (void)hutch_error_set(&s->error, EBADMSG,
                                              "malformed message from the sandbox init");
                s->sync_fd = -EBADF;
                return;
        }
        (void)safe_close(fds[0]);
        switch ((SyncOp)m.op) {
        case SYNC_OP_ERROR:
                if (s->error.errnum == 0)
                        (void)hutch_error_set(&s->error, m.err > 0 && m.err < 4096 ? m.err : EIO,
                                              "sandbox setup failed: %s: %s", m.step, m.msg);
                break;
        case SYNC_OP_STARTED:
                s->started = true;
                s->start_ms = now_ms();
                break;
        case SYNC_OP_EXITED:
                s->exited = true;
                s->status = m.status;
                s->end_ms = now_ms();
                break;
        case SYNC_OP_GO:
        case _SYNC_OP_MAX:
        case _SYNC_OP_INVALID:
        default:
                (void)hutch_error_set(&s->error, EBADMSG,
                                      "unexpected message from the sandbox init");
                break;
        }
}

static void supervise(Supervision *s) {
        for (;;) {
                struct pollfd pfd[3] = {
                        {.fd = s->sync_fd, .events = POLLIN},
                        {.fd = s->sigfd, .events = POLLIN},
                        {.fd = s->pidfd, .events = POLLIN},
                };

                if (poll(pfd, ELEMENTSOF(pfd), -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return;
                }
                if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR))
                        handle_sync_message(s);
                if (pfd[1].revents & POLLIN) {
                        struct signalfd_siginfo si;

                        if (read(s->sigfd, &si, sizeof(si)) == sizeof(si))
                                (void)pidfd_send_signal(s->pidfd, (int)si.ssi_signo, NULL, 0);
                }
                if ((pfd[2].revents & POLLIN) && !(pfd[0].revents & POLLIN)) {
                        /* Init is gone; read what it sent before it went. */
                        while (s->sync_fd >= 0) {
                                struct pollfd q = {.fd = s->sync_fd, .events = POLLIN};

                                if (poll(&q, 1, 0) <= 0 || !(q.revents & POLLIN))
                                        break;
                                handle_sync_message(s);
                        }
                        return;
                }
        }
}

int sandbox_run(const Policy *policy, char *const *argv, char *const *caller_env,
                Outcome *ret_outcome, HutchError *reterr) {
        _cleanup_strv_free_ char **env = NULL, **args = NULL;
        _cleanup_close_ int sync_parent = -EBADF, sync_child = -EBADF, pidfd = -EBADF,
                            sigfd = -EBADF;
        _cleanup_(prepared_done) Prepared prep = {};
        Supervision sup = {};
        sigset_t mask, orig_mask;
        struct rusage ru = {};
        IdMapping idmap;
        int socks[2], status = 0, r;
        const char *workdir;
        pid_t pid;

        for (size_t i = 0; i < ELEMENTSOF(prep.fds); i++)
                prep.fds[i] = -EBADF;
        if (!argv || !argv[0])
                return hutch_error_set(reterr, EINVAL, "missing command");

        r = idmapping_for_caller(NULL, NULL, &idmap);
        if (r < 0)
                return hutch_error_set(reterr, -r, "failed to pick the sandbox's id range: %s",
                                       strerror(-r));
        r = sandbox_build_env(policy, caller_env, &env);
        if (r < 0)
                return hutch_error_set(reterr, -r, "failed to build the environment");
        args = strv_copy(argv);
        if (!args)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        workdir = policy->workdir     ? policy->workdir
                  : policy->workspace ? POLICY_SANDBOX_WORKSPACE
                                      : POLICY_SANDBOX_HOME;

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, socks) < 0)
                return hutch_error_set(reterr, errno, "failed to create the sync socket: %m");
        sync_parent = socks[0];
        sync_child = socks[1];

        sigemptyset(&mask);
        for (size_t i = 0; i < ELEMENTSOF(supervisor_signals); i++)
                sigaddset(&mask, supervisor_signals[i]);
        if (sigprocmask(SIG_BLOCK, &mask, &orig_mask) < 0)
                return hutch_error_set(reterr, errno, "failed to block signals: %m");
        sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (sigfd < 0) {
                r = hutch_error_set(reterr, errno, "failed to create a signalfd: %m");
                goto restore_mask;
        }

        pid = clone_sandbox(&pidfd);
        if (pid < 0) {
                r = hutch_error_set(reterr, -pid,
                                    "failed to create the sandbox namespaces: %s (see 'hutch "
                                    "doctor')",
                                    strerror(-pid));
                goto restore_mask;
        }
        if (pid == 0) {
                InitArgs a = {
                        .policy = policy,
                        .argv = args,
                        .envp = env,
                        .workdir = workdir,
                        .sync_fd = sync_child,
                };

                (void)safe_close(sync_parent);
                sandbox_init_main(&a);
        }
        sync_child = safe_close(sync_child);

        r = userns_write_maps(pid, &idmap);
        if (r < 0) {
                (void)hutch_error_set(reterr, -r, "failed to write the sandbox's id maps: %s",
                                      strerror(-r));
                goto kill_child;
        }
        r = prepare_mounts(policy, &idmap, pid, &prep, reterr);
        if (r < 0)
                goto kill_child;
        {
                int fds[ELEMENTSOF(prep.fds)];
                size_t n = 0;

                /* Only the prepared trees travel, in order (workspace first,
                 * then the binds); init maps them back positionally. */
                for (size_t i = 0; i < prep.n_fds; i++)
                        if (prep.fds[i] >= 0)
                                fds[n++] = prep.fds[i];
                r = sync_send(sync_parent, SYNC_OP_GO, 0, 0, NULL, NULL, fds, n);
        }
        prepared_done(&prep);
        if (r < 0) {
                (void)hutch_error_set(reterr, -r, "failed to start the sandbox: %s", strerror(-r));
                goto kill_child;
        }

        sup = (Supervision){.sync_fd = sync_parent, .pidfd = pidfd, .sigfd = sigfd};
        supervise(&sup);

        if (wait4(pid, &status, 0, &ru) < 0) {
                r = hutch_error_set(reterr, errno, "failed to wait for the sandbox: %m");
                goto restore_mask;
        }
        if (sup.error.errnum != 0) {
                if (reterr)
                        *reterr = sup.error;
                r = -sup.error.errnum;
                goto restore_mask;
        }
        if (!sup.exited) {
                r = hutch_error_set(reterr, EPROTO,
                                    "the sandbox init ended before the command finished "
                                    "(wait status 0x%x)",
                                    (unsigned)status);
                goto restore_mask;
        }
        r = fill_outcome(sup.status, &ru, sup.end_ms - sup.start_ms, ret_outcome);
        if (r < 0)
                (void)hutch_error_set(reterr, -r, "unexpected wait status 0x%x",
                                      (unsigned)sup.status);
        goto restore_mask;

kill_child:
        /* Undo: the half-started sandbox dies with its namespaces. */
        (void)pidfd_send_signal(pidfd, SIGKILL, NULL, 0);
        (void)waitpid(pid, NULL, 0);
restore_mask:
        (void)sigprocmask(SIG_SETMASK, &orig_mask, NULL);
        return r;
}
