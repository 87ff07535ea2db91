/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api/persist.h"
#include "fd-util.h"
#include "rm-rf.h"
#include "signal-util.h"
#include "store/disk-image.h"
#include "store/layers.h"
#include "strv.h"
#include "time-util.h"

#ifndef HUTCH_INSTALLED_BINARY
#define HUTCH_INSTALLED_BINARY "/usr/local/bin/hutch"
#endif

/* How long a keeper that is being started may take to be ready. */
#define KEEPER_START_TIMEOUT_MS 60000
/* How long a stopped keeper may take to clean up (cgroups, proxy) and
 * exit, and how often that is checked. */
#define KEEPER_EXIT_TIMEOUT_MS 10000
#define KEEPER_EXIT_POLL_MS 10
/* How often an exec tries again when a keeper was stopping (idle) as the
 * command came, so that it did not start it. */
#define EXEC_ATTEMPTS 3
/* Where the keeper finds its ready pipe. */
#define KEEPER_READY_FD 3

/* Takes the keeper's lock @fd. Our starter found no socket, so a keeper
 * still holding it is one that is stopping (idle, or a `stop` that raced
 * with this start): it is given the time to finish. */
static int keeper_lock_take(int fd) {
        for (unsigned waited = 0;; waited += KEEPER_EXIT_POLL_MS) {
                if (flock(fd, LOCK_EX | LOCK_NB) == 0)
                        return 0;
                if (errno != EWOULDBLOCK && errno != EINTR)
                        return negative_errno();
                if (waited >= KEEPER_EXIT_TIMEOUT_MS)
                        return -EBUSY;
                (void)usleep(KEEPER_EXIT_POLL_MS * 1000);
        }
}

/* ---- the keeper ---- */

int persist_binary_find(char **ret, HutchError *reterr) {
        const char *env = getenv("HUTCH_BINARY");
        char self[PATH_MAX];
        const char *base;
        ssize_t n;

        if (env && env[0]) {
                if (access(env, X_OK) < 0)
                        return hutch_error_set(reterr, ENOENT,
                                               "$HUTCH_BINARY '%s' is not an executable", env);
                *ret = strdup(env);
                return *ret ? 0 : -ENOMEM;
        }
        /* The CLI runs its own keepers, whatever else is installed. */
        n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n > 0) {
                self[n] = '\0';
                base = strrchr(self, '/');
                if (base &&
                    (strcmp(base + 1, "hutch") == 0 || strcmp(base + 1, "hutch (deleted)") == 0)) {
                        *ret = strdup("/proc/self/exe");
                        return *ret ? 0 : -ENOMEM;
                }
        }
        if (access(HUTCH_INSTALLED_BINARY, X_OK) == 0) {
                *ret = strdup(HUTCH_INSTALLED_BINARY);
                return *ret ? 0 : -ENOMEM;
        }
        return hutch_error_set(reterr, ENOENT,
                               "cannot find the hutch binary that runs persistent sandboxes (it "
                               "is not at %s): set $HUTCH_BINARY",
                               HUTCH_INSTALLED_BINARY);
}

/* Mounts @image, retrying while a process that looked at the stopped
 * sandbox's files still holds it (-EBUSY: see store/disk-image.h). */
static int disk_mount_retry(const char *image, const char *target, int *ret_mnt_fd,
                            HutchError *reterr) {
        for (unsigned waited = 0;; waited += KEEPER_EXIT_POLL_MS) {
                HutchError err = {};
                int r;

                r = target ? disk_image_mount_at(image, target, &err)
                           : disk_image_mount(image, false, ret_mnt_fd, &err);
                if (r != -EBUSY || waited >= KEEPER_EXIT_TIMEOUT_MS) {
                        if (r < 0 && reterr)
                                *reterr = err;
                        return r;
                }
                (void)usleep(KEEPER_EXIT_POLL_MS * 1000);
        }
}

/* In the keeper, before the sandbox is built: a private mount namespace
 * (host mounts still propagate in, none of ours out) with the sandbox's
 * disk image on its data/. */
static int keeper_mount_disk(const Store *s, const SandboxRecord *rec, const char *data,
                             HutchError *reterr) {
        _cleanup_free_ char *image = NULL;
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        char upper[64];
        int r;

        if (store_sandbox_path(s, rec->name, DISK_IMAGE_NAME, &image) < 0)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        if (unshare(CLONE_NEWNS) < 0)
                return hutch_error_set(reterr, errno, "cannot make a mount namespace: %m");
        if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
                return hutch_error_set(reterr, errno, "cannot make the mounts private: %m");
        r = disk_mount_retry(image, data, NULL, reterr);
        if (r < 0)
                return r;
        /* What `hutch gc` does in the store's folder: layers an
         * interrupted snapshot or restore left in the image go. */
        (void)snprintf(upper, sizeof(upper), "upper-%llu", (unsigned long long)rec->gen);
        d = opendir(data);
        while (d && (de = readdir(d)))
                if (strncmp(de->d_name, "upper-", 6) == 0 && strcmp(de->d_name, upper) != 0)
                        (void)rm_rf_at(dirfd(d), de->d_name);
        return 0;
}

static void report_early(int ready_fd, const HutchError *err, int r) {
        char line[600];

        (void)snprintf(line, sizeof(line), "error: %s\n", err->msg[0] ? err->msg : strerror(-r));
        (void)loop_write(ready_fd, line, strlen(line));
        (void)close(ready_fd);
}

int persist_keeper_main(const char *name, int ready_fd, char *const *env, HutchError *reterr) {
        _cleanup_(store_freep) Store *s = NULL;
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        _cleanup_(policy_freep) Policy *policy = NULL;
        _cleanup_strv_free_ char **chain = NULL;
        _cleanup_free_ char *state = NULL, *sock = NULL, *lockp = NULL, *data = NULL, *logs = NULL,
                            *history = NULL, *audit = NULL;
        _cleanup_close_ int lock = -EBADF, id_lease = -EBADF;
        char upper[64];
        KeeperConfig cfg;
        HutchError early = {};
        uint32_t id_base = 0;
        int r;

        r = store_open(&s, &early);
        if (r >= 0)
                r = store_sandbox_load(s, name, &rec, &early);
        if (r >= 0) {
                policy = policy_new();
                r = policy ? policy_load_json(policy, rec->policy_json, strlen(rec->policy_json),
                                              &early)
                           : -ENOMEM;
        }
        if (r >= 0)
                r = policy_validate(policy, &early);
        if (r >= 0)
                r = store_snapshot_chain(s, rec->parent, SANDBOX_MAX_LAYERS, &chain, &early);
        if (r >= 0 && (store_state_path(s, rec->name, NULL, &state) < 0 ||
                       store_state_path(s, rec->name, "keeper.sock", &sock) < 0 ||
                       store_state_path(s, rec->name, "keeper.lock", &lockp) < 0 ||
                       store_sandbox_path(s, rec->name, "data", &data) < 0 ||
                       store_sandbox_path(s, rec->name, "logs", &logs) < 0 ||
                       store_sandbox_path(s, rec->name, "history.jsonl", &history) < 0 ||
                       store_sandbox_path(s, rec->name, "audit.jsonl", &audit) < 0))
                r = hutch_error_set(&early, ENOMEM, "out of memory");
        if (r >= 0 && mkdir(state, 0700) < 0 && errno != EEXIST)
                r = hutch_error_set(&early, errno, "cannot create %s: %m", state);
        if (r >= 0) {
                lock = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
                if (lock < 0 || keeper_lock_take(lock) < 0)
                        r = hutch_error_set(&early, EBUSY,
                                            "another keeper runs sandbox '%s' already", rec->name);
        }
        /* SECURITY: the disk limit (store/disk-image.h) is mounted in a
         * mount namespace of the keeper's own, so that it goes away with
         * the keeper (and with the sandbox, whose namespaces are below
         * it), however it ends: no mount or loop device outlives it. */
        if (r >= 0 && rec->disk_limit != 0) {
                r = keeper_mount_disk(s, rec, data, &early);
                if (r >= 0) {
                        free(logs);
                        logs = NULL;
                        if (asprintf(&logs, "%s/logs", data) < 0)
                                r = hutch_error_set(&early, ENOMEM, "out of memory");
                }
        }
        /* SECURITY: as root, its own range of the machine's id pool (held
         * since create; claimed now by a sandbox made before the pool):
         * never the range of another sandbox (docs/persistent.md "Id
         * range"). Our spawner holds the sandbox's lock. The keeper holds
         * the range's running lease (id_lease) until it ends, so that no
         * claim hands it out while the sandbox runs, even after a lost
         * pool file (store/id-pool.h). */
        if (r >= 0)
                r = store_sandbox_id_range(s, rec, &id_base, &id_lease, &early);
        /* The network audit log of a persistent sandbox is kept with it. */
        if (r >= 0 && policy_network_mode(policy) == NETWORK_MODE_ALLOW && !policy->audit_log)
                r = policy_set_audit_log(policy, audit, &early);
        if (r < 0) {
                report_early(ready_fd, &early, r);
                return r;
        }
        (void)snprintf(upper, sizeof(upper), "upper-%llu", (unsigned long long)rec->gen);
        cfg = (KeeperConfig){
                .policy = policy,
                .layers = {.data_dir = data, .upper = upper, .layers = chain, .id_base = id_base},
                .socket_path = sock,
                .logs_dir = logs,
                .history_path = history,
                .idle_timeout_ms = rec->idle_timeout_ms,
                .ready_fd = ready_fd,
                .degraded = rec->disk_limit == 0 ? 1U << POLICY_LIMIT_DISK : 0,
        };
        return sandbox_keep(&cfg, env, reterr);
}

/* In the forked child: detached (new session, reparented by a second
 * fork), stdio on /dev/null and the keeper's log, the ready pipe at
 * KEEPER_READY_FD and nothing else of the caller's (the API may run in
 * any program): exec `hutch __keeper NAME 3`. Never returns. */
_noreturn_ static void keeper_exec_child(const char *binary, const char *name, const char *log_path,
                                         int ready_w) {
        int fds[3], high[3];
        char fd_arg[16];

        if (setsid() < 0 || fork() != 0)
                _exit(0);
        signals_reset_default();
        /* Up out of the way first: the caller may have closed its stdio,
         * so any of these may have been opened as 0, 1 or 2. */
        fds[0] = open("/dev/null", O_RDWR | O_CLOEXEC);
        fds[1] = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
        fds[2] = ready_w;
        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                if (fds[i] < 0 || (high[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 10)) < 0)
                        _exit(125);
        /* dup2() clears FD_CLOEXEC on the copies. */
        if (dup2(high[0], 0) < 0 || dup2(high[0], 1) < 0 || dup2(high[1], 2) < 0 ||
            dup2(high[2], KEEPER_READY_FD) < 0)
                _exit(125);
        (void)close_range(KEEPER_READY_FD + 1, ~0U, 0);
        if (chdir("/") < 0)
                _exit(125);
        (void)snprintf(fd_arg, sizeof(fd_arg), "%d", KEEPER_READY_FD);
        (void)execl(binary, "hutch", "__keeper", name, fd_arg, (char *)NULL);
        _exit(125);
}

/* Starts the keeper of @name, detached, and waits until it is ready or
 * reports why not. The caller holds the sandbox's lock. */
static int keeper_spawn(const Store *s, const char *name, HutchError *reterr) {
        _cleanup_free_ char *log_path = NULL, *state = NULL, *binary = NULL;
        char buf[1024];
        int pipes[2], status = 0, r;
        ssize_t n;
        pid_t pid;

        r = persist_binary_find(&binary, reterr);
        if (r < 0)
                return r;
        if (store_state_path(s, name, NULL, &state) < 0 ||
            store_state_path(s, name, "keeper.log", &log_path) < 0)
                return -ENOMEM;
        if (mkdir(state, 0700) < 0 && errno != EEXIST)
                return hutch_error_set(reterr, errno, "cannot create %s: %m", state);
        if (pipe2(pipes, O_CLOEXEC) < 0)
                return hutch_error_set(reterr, errno, "pipe: %m");
        pid = fork();
        if (pid < 0) {
                int e = errno;

                (void)close(pipes[0]);
                (void)close(pipes[1]);
                return hutch_error_set(reterr, e, "fork: %s", strerror(e));
        }
        if (pid == 0)
                keeper_exec_child(binary, name, log_path, pipes[1]);
        (void)close(pipes[1]);
        (void)waitpid(pid, &status, 0);
        n = read_until_eof(pipes[0], buf, sizeof(buf) - 1, KEEPER_START_TIMEOUT_MS);
        (void)close(pipes[0]);
        if (n < 0)
                return hutch_error_set(reterr, (int)-n, "the sandbox did not start: %s",
                                       strerror((int)-n));
        buf[n] = '\0';
        if (strncmp(buf, "ok\n", 3) == 0)
                return 0;
        buf[strcspn(buf, "\n")] = '\0';
        if (strncmp(buf, "error: ", 7) == 0)
                return hutch_error_set(reterr, EIO, "failed to start sandbox '%s': %s", name,
                                       buf + 7);
        return hutch_error_set(reterr, EIO, "failed to start sandbox '%s' (see %s)", name,
                               log_path);
}

int persist_connect(const Store *s, const char *name, bool start, int *ret_sock,
                    HutchError *reterr) {
        _cleanup_free_ char *sock_path = NULL;
        _cleanup_close_ int lock = -EBADF;
        int fd, r;

        if (store_state_path(s, name, "keeper.sock", &sock_path) < 0)
                return -ENOMEM;
        fd = keeper_connect(sock_path);
        if (fd >= 0 || !start) {
                if (fd < 0)
                        return fd;
                *ret_sock = fd;
                return 0;
        }
        /* One starter at a time; the others find it running. */
        r = store_lock_sandbox(s, name, &lock);
        if (r < 0)
                return hutch_error_set(reterr, -r, "no sandbox named '%s'", name);
        fd = keeper_connect(sock_path);
        if (fd < 0) {
                r = keeper_spawn(s, name, reterr);
                if (r < 0)
                        return r;
                fd = keeper_connect(sock_path);
                if (fd < 0)
                        return hutch_error_set(reterr, -fd, "cannot reach sandbox '%s': %s", name,
                                               strerror(-fd));
        }
        *ret_sock = fd;
        return 0;
}

/* A pidfd of the keeper at the other end of @sock, or -EBADF: taken while
 * the connection is open, so the pid is the keeper's (it has not exited:
 * it answered the connect). */
static int keeper_pidfd(int sock) {
        struct ucred uc;
        socklen_t len = sizeof(uc);
        int fd;

        if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0 || uc.pid <= 0)
                return -EBADF;
        fd = pidfd_open(uc.pid, 0);
        return fd < 0 ? -EBADF : fd;
}

/* Sends "stop" to @name's keeper and reads its answer. 0 when none runs
 * (no socket); 1 when it answered: the sandbox is down (its execs, init
 * and with it every process of its pid namespace ended, its cgroups and
 * proxy removed: keeper-loop.c), the keeper exiting; 2 when it closed
 * without an answer: it was stopping already (idle) as we came, and is
 * down only once it has exited. @ret_pidfd: the keeper's pidfd (taken
 * while the connection is open), or -EBADF, on 1 and 2. */
static int stop_request(const Store *s, const char *name, int *ret_pidfd, HutchError *reterr) {
        _cleanup_close_ int sock = -EBADF, pidfd = -EBADF;
        int r;

        r = persist_connect(s, name, false, &sock, reterr);
        if (r < 0)
                return 0; /* not running */
        pidfd = keeper_pidfd(sock);
        r = keeper_simple(sock, "stop", reterr);
        /* A keeper that exits with our request still unread resets the
         * connection (ECONNRESET) rather than closing it (EPIPE). */
        if (r == -EPIPE || r == -ECONNRESET) {
                if (reterr)
                        *reterr = (HutchError){};
                r = 2;
        } else if (r < 0)
                return r;
        else
                r = 1;
        *ret_pidfd = TAKE_FD(pidfd);
        return r;
}

/* Waits for the keeper of @name, which was told to stop, to exit, and for
 * its disk image to be released: stopped means that is done too. Its exit
 * is awaited on @pidfd where there is one (issue 20: the 10 ms poll below
 * cost a stop up to that much); the check after it stays the judge (and
 * the only wait without a pidfd). Returns 1 or -errno. */
static int stop_wait(const Store *s, const char *name, int pidfd, HutchError *reterr) {
        _cleanup_free_ char *image = NULL;

        if (pidfd >= 0)
                (void)poll(&(struct pollfd){.fd = pidfd, .events = POLLIN}, 1,
                           KEEPER_EXIT_TIMEOUT_MS);
        for (unsigned waited = 0; store_keeper_running(s, name); waited += KEEPER_EXIT_POLL_MS) {
                if (waited >= KEEPER_EXIT_TIMEOUT_MS)
                        return hutch_error_set(reterr, ETIMEDOUT,
                                               "sandbox '%s' was stopped, but its keeper did not "
                                               "exit",
                                               name);
                (void)usleep(KEEPER_EXIT_POLL_MS * 1000);
        }
        /* Its disk image goes with its mount namespace, a moment later:
         * stopped means the loop device is gone too. */
        if (store_sandbox_path(s, name, DISK_IMAGE_NAME, &image) >= 0 &&
            disk_image_wait_free(image, KEEPER_EXIT_TIMEOUT_MS) < 0)
                return hutch_error_set(reterr, EBUSY,
                                       "sandbox '%s' was stopped, but its disk image is still in "
                                       "use",
                                       name);
        return 1;
}

int persist_stop(const Store *s, const char *name, HutchError *reterr) {
        _cleanup_close_ int pidfd = -EBADF;
        int r;

        r = stop_request(s, name, &pidfd, reterr);
        if (r <= 0)
                return r;
        return stop_wait(s, name, pidfd, reterr);
}

int persist_halt(const Store *s, const char *name, int *ret_pidfd, HutchError *reterr) {
        _cleanup_close_ int pidfd = -EBADF;
        int r;

        r = stop_request(s, name, &pidfd, reterr);
        /* Not answered: down only once the keeper has exited. */
        if (r == 2)
                r = stop_wait(s, name, pidfd, reterr);
        if (r < 0)
                return r;
        *ret_pidfd = TAKE_FD(pidfd);
        return r;
}

/* A running sandbox's data/ (@data, its path in the store) as its keeper
 * has it mounted: "/proc/<keeper>/root<data>" into @ret_dir, and the
 * connection to the keeper that pins that pid into @ret_sock. -ENOTCONN
 * when it is not running. Never mounts anything. */
static int keeper_data_dir(const Store *s, const char *name, const char *data, char **ret_dir,
                           int *ret_sock) {
        _cleanup_close_ int sock = -EBADF;
        struct ucred uc;
        socklen_t len = sizeof(uc);

        if (persist_connect(s, name, false, &sock, NULL) < 0)
                return -ENOTCONN;
        if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0)
                return -errno;
        if (asprintf(ret_dir, "/proc/%d/root%s", (int)uc.pid, data) < 0) {
                *ret_dir = NULL;
                return -ENOMEM;
        }
        *ret_sock = TAKE_FD(sock);
        return 0;
}

int persist_data_open(const Store *s, SandboxRecord *rec, bool writable, int *ret_fd,
                      HutchError *reterr) {
        _cleanup_free_ char *data = NULL, *image = NULL;

        *ret_fd = -EBADF;
        if (rec->disk_limit == 0 || rec->data_dir)
                return 0;
        if (store_sandbox_path(s, rec->name, "data", &data) < 0 ||
            store_sandbox_path(s, rec->name, DISK_IMAGE_NAME, &image) < 0)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        for (unsigned waited = 0;; waited += KEEPER_EXIT_POLL_MS) {
                _cleanup_close_ int sock = -EBADF, mnt = -EBADF;
                HutchError err = {};
                int r;

                /* Running: data/ is mounted in the keeper's namespace
                 * (its socket exists only once it is). */
                r = keeper_data_dir(s, rec->name, data, &rec->data_dir, &sock);
                if (r == -ENOMEM)
                        return hutch_error_set(reterr, ENOMEM, "out of memory");
                if (r < 0 && r != -ENOTCONN)
                        return hutch_error_set(reterr, -r, "cannot find sandbox '%s''s keeper: %s",
                                               rec->name, strerror(-r));
                if (r >= 0) {
                        *ret_fd = TAKE_FD(sock);
                        return 0;
                }
                /* Stopped: a mount of our own, detached (it goes when the
                 * fd is closed). */
                r = disk_image_mount(image, !writable, &mnt, &err);
                if (r >= 0) {
                        if (asprintf(&rec->data_dir, "/proc/self/fd/%d/.", mnt) < 0) {
                                rec->data_dir = NULL;
                                return hutch_error_set(reterr, ENOMEM, "out of memory");
                        }
                        *ret_fd = TAKE_FD(mnt);
                        return 0;
                }
                /* -EBUSY: a keeper starting or stopping, or another
                 * command looking: wait for it. */
                if (r != -EBUSY || waited >= KEEPER_EXIT_TIMEOUT_MS) {
                        if (reterr)
                                *reterr = err;
                        return r;
                }
                (void)usleep(KEEPER_EXIT_POLL_MS * 1000);
        }
}

int persist_disk_supported(HutchError *reterr) {
        return disk_image_supported(reterr);
}

/* Loads sandbox @name and connects to its keeper, started on demand. */
static int connect_started(Store *s, const char *name, SandboxRecord **ret, int *ret_sock,
                           HutchError *reterr) {
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        int r;

        r = store_sandbox_load(s, name, &rec, reterr);
        if (r < 0)
                return r;
        r = persist_connect(s, rec->name, true, ret_sock, reterr);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(rec);
        return 0;
}

int persist_exec(Store *s, const char *name, const KeeperExec *req, int forward_sigfd,
                 uint64_t *ret_id, int *ret_exit_code, char **ret_json, HutchError *reterr) {
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        _cleanup_close_ int sock = -EBADF;
        int r;

        r = connect_started(s, name, &rec, &sock, reterr);
        for (unsigned attempt = 1; r >= 0; attempt++) {
                r = keeper_exec(sock, req, forward_sigfd, ret_id, ret_exit_code, ret_json, reterr);
                /* The keeper went away before it started the command (it
                 * stopped for idleness or a `stop` as we came): it did not
                 * run, so a new keeper can run it. */
                if (r != -ECONNRESET || attempt >= EXEC_ATTEMPTS)
                        break;
                sock = safe_close(sock);
                if (reterr)
                        *reterr = (HutchError){};
                r = persist_connect(s, rec->name, true, &sock, reterr);
        }
        return r;
}

int persist_file(Store *s, const char *name, const KeeperFile *req, HutchError *reterr) {
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        _cleanup_close_ int sock = -EBADF;
        HutchError err = {};
        int r;

        r = connect_started(s, name, &rec, &sock, reterr);
        if (r < 0)
                return r;
        r = keeper_file(sock, req, &err);
        if (r >= 0)
                return r;
        if (err.errnum != 0) {
                if (reterr)
                        *reterr = err;
                return r;
        }
        return hutch_error_set(reterr, -r, "cannot %s '%s' in sandbox '%s': %s",
                               file_op_action_to_string(req->action), req->path, rec->name,
                               strerror(-r));
}

/* ---- create, destroy, info ---- */

/* Loads sandbox @name and takes its lock, then loads it again under the
 * lock (another command may have changed it meanwhile). */
static int lock_sandbox(Store *s, const char *name, SandboxRecord **ret, int *ret_lock,
                        HutchError *reterr) {
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        _cleanup_free_ char *real = NULL;
        _cleanup_close_ int lock = -EBADF;
        int r;

        r = store_sandbox_load(s, name, &rec, reterr);
        if (r < 0)
                return r;
        r = store_lock_sandbox(s, rec->name, &lock);
        if (r < 0)
                return hutch_error_set(reterr, ENOENT, "no sandbox named '%s'", name);
        real = strdup(rec->name);
        if (!real)
                return -ENOMEM;
        rec = sandbox_record_free(rec);
        r = store_sandbox_load_locked(s, real, &rec, reterr);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(rec);
        *ret_lock = TAKE_FD(lock);
        return 0;
}

/* Adds to @changed the keys whose values differ between the objects @a and
 * @b (either may lack a key), as PREFIX.KEY; "limits" is compared key by
 * key inside. */
static int policy_json_diff(json_t *a, json_t *b, const char *prefix, char ***changed) {
        const char *key;
        json_t *v;
        int r;

        for (int side = 0; side < 2; side++)
                json_object_foreach(side ? b : a, key, v) {
                        json_t *other = json_object_get(side ? a : b, key);
                        _cleanup_free_ char *name = NULL;

                        if (side && other)
                                continue; /* compared from @a's side */
                        if (json_equal(v, other))
                                continue;
                        if (asprintf(&name, "%s%s%s", prefix ?: "", prefix ? "." : "", key) < 0)
                                return -ENOMEM;
                        if (!prefix && strcmp(key, "limits") == 0 && json_is_object(v) &&
                            (!other || json_is_object(other))) {
                                json_t *none = json_object();

                                r = none ? policy_json_diff(v, other ?: none, name, changed)
                                         : -ENOMEM;
                                json_decref(none);
                                if (r < 0)
                                        return r;
                                continue;
                        }
                        if (strv_contains(*changed, name))
                                continue;
                        r = strv_extend(changed, name);
                        if (r < 0)
                                return r;
                }
        return 0;
}

/* A running sandbox's policy change (hutch update): the cgroup limits go
 * to its keeper, which applies them now (a namespace sandbox's only), and
 * the network policy to its hutch-proxy through the keeper (either
 * backend's), which answers once the proxy confirmed; anything else needs
 * a stop. */
static int update_running(Store *s, const SandboxRecord *rec, const Policy *policy, char **changed,
                          const char *text, HutchError *reterr) {
        static const char *const limits[] = {"limits.memory", "limits.memory_swap", "limits.cpus",
                                             "limits.pids", NULL};
        static const char *const network[] = {"allow_hosts", "deny_hosts", "allow_private",
                                              "resolve", NULL};
        bool any_limits = false, any_network = false;
        _cleanup_close_ int sock = -EBADF;
        int r;

        STRV_FOREACH(f, changed) {
                bool vm = policy->backend == SANDBOX_BACKEND_VM;
                bool lim = strv_contains((char **)limits, *f) && !vm;
                bool net = strv_contains((char **)network, *f);

                if (!lim && !net)
                        return hutch_error_set(reterr, EBUSY,
                                               "cannot change %s of sandbox '%s' while it runs "
                                               "(stop it first: 'hutch stop %s'; %sallow_hosts, "
                                               "deny_hosts, allow_private and resolve change "
                                               "live)",
                                               *f, rec->name, rec->name,
                                               vm ? "in a microVM only "
                                                  : "memory, memory_swap, cpus, pids, ");
                any_limits = any_limits || lim;
                any_network = any_network || net;
        }
        r = persist_connect(s, rec->name, false, &sock, reterr);
        if (r < 0)
                /* Stopped meanwhile: the next start reads the new policy. */
                return 0;
        if (any_network) {
                r = keeper_network(sock, text, reterr);
                if (r < 0)
                        return r;
        }
        if (any_limits) {
                r = keeper_limits(sock, text, reterr);
                if (r < 0 && any_network)
                        /* The record keeps the old policy: so does the
                         * proxy (best effort; it confirmed the new one). */
                        (void)keeper_network(sock, rec->policy_json, NULL);
                if (r < 0)
                        return r;
        }
        return 0;
}

int persist_update(Store *s, const char *name, const Policy *policy, char ***ret_changed,
                   HutchError *reterr) {
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        _cleanup_strv_free_ char **changed = NULL;
        _cleanup_free_ char *text = NULL;
        _cleanup_close_ int lock = -EBADF;
        json_t *old_json, *new_json;
        int r;

        r = policy_validate(policy, reterr);
        if (r < 0)
                return r;
        r = policy_to_json(policy, &text);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot store this policy: %s", strerror(-r));
        r = lock_sandbox(s, name, &rec, &lock, reterr);
        if (r < 0)
                return r;
        old_json = json_loads(rec->policy_json, 0, NULL);
        new_json = json_loads(text, 0, NULL);
        if (policy->image && new_json) {
                /* Compared (and stored) as create pins it: by digest. */
                _cleanup_free_ char *digest = NULL;

                r = persist_image_digest(s, policy->image, &digest, reterr);
                if (r < 0) {
                        json_decref(old_json);
                        json_decref(new_json);
                        return r;
                }
                (void)json_object_set_new(new_json, "image", json_string(digest));
                text = mfree(text);
                text = json_dumps(new_json, JSON_COMPACT);
                if (!text) {
                        json_decref(old_json);
                        json_decref(new_json);
                        return hutch_error_set(reterr, ENOMEM, "out of memory");
                }
        }
        changed = strv_copy(NULL);
        r = json_is_object(old_json) && json_is_object(new_json) && changed
                    ? policy_json_diff(old_json, new_json, NULL, &changed)
                    : -ENOMEM;
        json_decref(old_json);
        json_decref(new_json);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot compare the policies of '%s': %s",
                                       rec->name, strerror(-r));
        /* SECURITY: the workspace's changes are kept against the folder it
         * was made from, and the backend's files differ: neither moves.
         * Nor does the image below the sandbox's layer (its changes are
         * to that image's files). */
        STRV_FOREACH(f, changed)
                if (strcmp(*f, "workspace") == 0 || strcmp(*f, "backend") == 0 ||
                    strcmp(*f, "image") == 0)
                        return hutch_error_set(reterr, EINVAL,
                                               "the %s of sandbox '%s' cannot change (create "
                                               "another sandbox)",
                                               *f, rec->name);
        if (strv_length(changed) > 0 && store_keeper_running(s, rec->name)) {
                r = update_running(s, rec, policy, changed, text, reterr);
                if (r < 0)
                        return r;
        }
        if (strv_length(changed) > 0) {
                free(rec->policy_json);
                rec->policy_json = TAKE_PTR(text);
                r = store_sandbox_save(s, rec, reterr);
                if (r < 0)
                        return r;
        }
        if (ret_changed)
                *ret_changed = TAKE_PTR(changed);
        return 0;
}

/* Loads snapshot @snap, whose chain must fit below a sandbox's own layer. */
static int snapshot_load_fitting(Store *s, const char *snap, SnapshotRecord **ret,
                                 HutchError *reterr) {
        _cleanup_(snapshot_record_freep) SnapshotRecord *rec = NULL;
        _cleanup_strv_free_ char **chain = NULL;
        int r;

        r = store_snapshot_load(s, snap, &rec, reterr);
        if (r < 0)
                return r;
        r = store_snapshot_chain(s, rec->name, SANDBOX_MAX_LAYERS, &chain, reterr);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(rec);
        return 0;
}

/* Records the host folder's current state as apply's baseline. */
static int write_manifest(const Store *s, const char *name, int host_fd, HutchError *reterr) {
        _cleanup_free_ char *path = NULL, *tmp = NULL;
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (store_sandbox_path(s, name, "ws-manifest", &path) < 0 ||
            asprintf(&tmp, "%s.tmp", path) < 0)
                return -ENOMEM;
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return hutch_error_set(reterr, errno, "cannot create %s: %m", tmp);
        r = ws_manifest_write(host_fd, fd, reterr);
        if (r >= 0 && fsync(fd) < 0)
                r = hutch_error_set(reterr, errno, "cannot write %s: %m", tmp);
        if (r >= 0 && rename(tmp, path) < 0)
                r = hutch_error_set(reterr, errno, "cannot create %s: %m", path);
        if (r < 0)
                (void)unlink(tmp);
        return r;
}

/* After create: record the host workspace (overlay mode) for apply's
 * conflict check, or take the snapshot's record when @snap has one. */
static int record_workspace(const Store *s, const SandboxRecord *rec, const Policy *p,
                            const SnapshotRecord *snap, HutchError *reterr) {
        _cleanup_close_ int host = -EBADF;
        int r;

        if (!p->workspace || p->workspace_mode != WORKSPACE_MODE_OVERLAY)
                return 0;
        if (snap) {
                /* The snapshot's layers sit on the host folder as it was
                 * when its first sandbox was created: keep that record. */
                _cleanup_free_ char *from = NULL, *to = NULL;

                if (!snap->has_manifest)
                        return 0;
                if (store_snapshot_path(s, snap->name, "ws-manifest", &from) < 0 ||
                    store_sandbox_path(s, rec->name, NULL, &to) < 0)
                        return -ENOMEM;
                r = store_file_copy(from, to, "ws-manifest");
                if (r < 0)
                        return hutch_error_set(reterr, -r, "cannot copy %s: %s", from,
                                               strerror(-r));
                return 0;
        }
        host = open(p->workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (host < 0)
                return hutch_error_set(reterr, errno, "cannot open the workspace '%s': %m",
                                       p->workspace);
        return write_manifest(s, rec->name, host, reterr);
}

/* The disk limit a new sandbox gets: its policy's --disk, or the default;
 * 0 where it cannot be enforced (and that is allowed: not for an explicit
 * --disk without --allow-degraded). */
static int disk_limit_pick(const Policy *p, uint64_t *ret, HutchError *reterr) {
        bool explicit = p->limits_explicit & (1U << POLICY_LIMIT_DISK);
        HutchError why = {};

        if (explicit && (p->disk_size < DISK_IMAGE_MIN_SIZE || p->disk_size > DISK_IMAGE_MAX_SIZE))
                return hutch_error_set(reterr, EINVAL,
                                       "the disk limit of a persistent sandbox (--disk) must be "
                                       "between 16m and 16t");
        if (disk_image_supported(&why) < 0) {
                if (explicit && !p->allow_degraded)
                        return hutch_error_set(reterr, why.errnum,
                                               "--disk cannot be enforced here: %s (or use "
                                               "--allow-degraded to create the sandbox without a "
                                               "disk limit)",
                                               why.msg);
                *ret = 0;
                return 0;
        }
        *ret = explicit ? p->disk_size : DISK_IMAGE_DEFAULT_SIZE;
        return 0;
}

int persist_create(Store *s, const char *name, const Policy *policy, const char *from,
                   uint64_t idle_timeout_ms, SandboxRecord **ret, HutchError *reterr) {
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        _cleanup_(snapshot_record_freep) SnapshotRecord *snap = NULL;
        _cleanup_(policy_freep) Policy *stored = NULL;
        int r = 0;

        if (!store_name_is_valid(name))
                return hutch_error_set(reterr, EINVAL,
                                       "invalid sandbox name '%s': it must match "
                                       "[a-z0-9][a-z0-9_.-]{0,62}",
                                       name ? name : "");
        if (!policy && !from)
                return hutch_error_set(reterr, EINVAL, "a sandbox needs a policy or a snapshot");
        if (policy) {
                r = policy_validate(policy, reterr);
                if (r < 0)
                        return r;
                if (policy->workspace && policy->workspace_mode == WORKSPACE_MODE_COPY)
                        return hutch_error_set(reterr, EINVAL,
                                               "a persistent sandbox cannot copy its workspace at "
                                               "every start: use ':overlay' (the default) or "
                                               "':mount'");
        }
        rec = calloc(1, sizeof(SandboxRecord));
        if (!rec)
                return -ENOMEM;
        rec->name = strdup(name);
        rec->created_ms = time_realtime_ms();
        rec->gen = 1;
        rec->idle_timeout_ms = idle_timeout_ms;
        if (!rec->name || store_new_id(&rec->id) < 0)
                return -ENOMEM;
        if (from) {
                r = snapshot_load_fitting(s, from, &snap, reterr);
                if (r < 0)
                        return r;
                rec->parent = strdup(snap->name);
                if (!rec->parent)
                        return -ENOMEM;
        }
        if (!policy && snap->imported) {
                /* SECURITY: a snapshot is data, never authority (issue 26):
                 * one from an archive brings no policy; without the
                 * caller's, the defaults (deny by default). */
                _cleanup_(policy_freep) Policy *dflt = policy_new();

                /* Its record's policy is "{}" or names the image its
                 * layers were made on (hutch-archive's import). */
                r = dflt ? policy_load_json(dflt, snap->policy_json, strlen(snap->policy_json),
                                            reterr)
                         : -ENOMEM;
                if (r >= 0)
                        r = policy_to_json(dflt, &rec->policy_json);
        } else if (!policy)
                rec->policy_json = strdup(snap->policy_json);
        else
                r = policy_to_json(policy, &rec->policy_json);
        if (r < 0 || !rec->policy_json)
                return hutch_error_set(reterr, r < 0 ? -r : ENOMEM, "cannot store this policy: %s",
                                       r == -EILSEQ ? "a path or value is not valid UTF-8"
                                                    : strerror(r < 0 ? -r : ENOMEM));
        /* What the sandbox will run with (a snapshot's policy is loaded). */
        stored = policy_new();
        if (!stored)
                return -ENOMEM;
        r = policy_load_json(stored, rec->policy_json, strlen(rec->policy_json), reterr);
        if (r < 0)
                return r;
        if (stored->image) {
                r = persist_image_pin(s, stored, reterr);
                if (r < 0)
                        return r;
                rec->policy_json = mfree(rec->policy_json);
                r = policy_to_json(stored, &rec->policy_json);
                if (r < 0)
                        return hutch_error_set(reterr, -r, "cannot store this policy: %s",
                                               strerror(-r));
                /* NEEDSWORK: an `image rm` between this mark and the
                 * record's creation sees a stale mark and may go ahead;
                 * the sandbox then fails to start naming the image. */
                r = persist_image_mark(s, rec->policy_json, "sandbox", name, reterr);
                if (r < 0)
                        return r;
        }
        r = disk_limit_pick(stored, &rec->disk_limit, reterr);
        if (r < 0)
                return r;
        r = store_sandbox_create(s, rec, reterr);
        if (r < 0)
                return r;
        r = record_workspace(s, rec, stored, snap, reterr);
        if (r < 0) {
                HutchError ignored = {};

                (void)store_sandbox_remove(s, rec->name, &ignored);
                return r;
        }
        if (ret)
                *ret = TAKE_PTR(rec);
        return 0;
}

int persist_destroy(Store *s, const char *name, bool force, HutchError *reterr) {
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        _cleanup_free_ char *image = NULL;
        _cleanup_close_ int lock = -EBADF;
        int r;

        r = lock_sandbox(s, name, &rec, &lock, reterr);
        if (r < 0)
                return r;
        if (store_keeper_running(s, rec->name)) {
                if (!force)
                        return hutch_error_set(reterr, EBUSY,
                                               "sandbox '%s' is running; stop it first or use "
                                               "--force",
                                               rec->name);
                r = persist_stop(s, rec->name, reterr);
                /* No socket, and its lock still held: a keeper on its way
                 * out (persist_halt() does not wait for its exit). */
                if (r == 0)
                        r = stop_wait(s, rec->name, -EBADF, reterr);
                if (r < 0)
                        return r;
        }
        /* A command that looked at its files may have had its image
         * mounted a moment ago: removed, it would linger on a loop device. */
        if (rec->disk_limit != 0 && store_sandbox_path(s, rec->name, DISK_IMAGE_NAME, &image) >= 0)
                (void)disk_image_wait_free(image, KEEPER_EXIT_TIMEOUT_MS);
        r = store_sandbox_remove(s, rec->name, reterr);
        if (r < 0)
                return r;
        /* Best effort: a mark left behind is stale (image rm and gc know). */
        (void)persist_image_unmark(s, rec->policy_json, "sandbox", rec->name);
        return 0;
}

void persist_describe(const SandboxRecord *rec, PersistInfo *ret) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError ignored = {};

        ret->backend = SANDBOX_BACKEND_NS;
        ret->image[0] = '\0';
        ret->n_ports = 0;
        if (p && policy_load_json(p, rec->policy_json, strlen(rec->policy_json), &ignored) >= 0) {
                ret->backend = p->backend;
                if (p->image)
                        (void)snprintf(ret->image, sizeof(ret->image), "%s", p->image);
                STRV_FOREACH(spec, p->ports) {
                        PortSpec ps;

                        if (port_spec_parse(*spec, &ps, NULL) < 0)
                                continue;
                        if (ret->n_ports < PERSIST_INFO_PORTS_MAX)
                                ret->ports[ret->n_ports] = ps.port;
                        ret->n_ports++;
                }
        }
}

void persist_info(const Store *s, const SandboxRecord *rec, PersistInfo *ret) {
        _cleanup_free_ char *history = NULL, *data = NULL;
        struct stat st;

        *ret = (PersistInfo){
                .running = store_keeper_running(s, rec->name),
                .last_used_ms = rec->created_ms,
        };
        persist_describe(rec, ret);
        if (store_sandbox_path(s, rec->name, "history.jsonl", &history) >= 0 &&
            stat(history, &st) == 0)
                ret->last_used_ms = (uint64_t)st.st_mtim.tv_sec * 1000U +
                                    (uint64_t)st.st_mtim.tv_nsec / 1000000U;
        ret->disk_limit = rec->disk_limit;
        if (rec->disk_limit != 0) {
                _cleanup_free_ char *image = NULL, *dir = NULL;
                _cleanup_close_ int hold = -EBADF;
                struct statvfs vfs;

                /* Listing never mounts an image: that cost 60-200 ms a
                 * sandbox (issue 23). Running: the blocks its file system
                 * uses, as its keeper has it mounted (what is still in the
                 * page cache counted too). Stopped: the blocks its image
                 * file has allocated on the host (the file system's own
                 * metadata and journal included; a deleted file's blocks
                 * are given back, the mount says discard). */
                if (ret->running && store_sandbox_path(s, rec->name, "data", &data) >= 0 &&
                    keeper_data_dir(s, rec->name, data, &dir, &hold) >= 0 &&
                    statvfs(dir, &vfs) == 0 && vfs.f_blocks >= vfs.f_bfree)
                        ret->disk_bytes = (uint64_t)(vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize;
                else if (store_sandbox_path(s, rec->name, DISK_IMAGE_NAME, &image) >= 0 &&
                         stat(image, &st) == 0)
                        ret->disk_bytes = (uint64_t)st.st_blocks * 512U;
        } else {
                ret->degraded |= 1U << POLICY_LIMIT_DISK;
                if (store_sandbox_path(s, rec->name, "data", &data) >= 0)
                        ret->disk_bytes = store_disk_usage(data);
        }
}

/* ---- snapshots ---- */

/* "<sandbox>.<n>", the first that is free. */
static int default_snapshot_name(const Store *s, const char *sandbox, char **ret) {
        for (unsigned n = 1; n < 100000; n++) {
                _cleanup_free_ char *name = NULL, *path = NULL;
                struct stat st;

                if (asprintf(&name, "%s.%u", sandbox, n) < 0)
                        return -ENOMEM;
                if (!store_name_is_valid(name))
                        return -ENAMETOOLONG;
                if (store_snapshot_path(s, name, NULL, &path) < 0)
                        return -ENOMEM;
                if (lstat(path, &st) < 0 && errno == ENOENT) {
                        *ret = TAKE_PTR(name);
                        return 0;
                }
        }
        return -EEXIST;
}

int persist_snapshot(Store *s, const char *name, const char *snap, char **ret_snap,
                     bool *ret_running, HutchError *reterr) {
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        _cleanup_strv_free_ char **chain = NULL;
        _cleanup_free_ char *target = NULL;
        _cleanup_close_ int lock = -EBADF, sock = -EBADF, hold = -EBADF;
        bool running;
        int r;

        r = lock_sandbox(s, name, &rec, &lock, reterr);
        if (r < 0)
                return r;
        if (snap) {
                if (!store_name_is_valid(snap))
                        return hutch_error_set(reterr, EINVAL,
                                               "invalid snapshot name '%s': it must match "
                                               "[a-z0-9][a-z0-9_.-]{0,62}",
                                               snap);
                target = strdup(snap);
                if (!target)
                        return hutch_error_set(reterr, ENOMEM, "out of memory");
        } else {
                r = default_snapshot_name(s, rec->name, &target);
                if (r < 0)
                        return hutch_error_set(reterr, -r,
                                               "cannot pick a snapshot name for '%s'; give one",
                                               rec->name);
        }

        running = persist_connect(s, rec->name, false, &sock, reterr) >= 0;
        if (running) {
                /* Running: frozen while its layer is copied; the keeper
                 * thaws it when this connection closes, whatever happens
                 * to us. */
                r = keeper_simple(sock, "freeze", reterr);
                if (r < 0)
                        return r;
                /* With a disk image: the layer as the keeper has it. */
                r = persist_data_open(s, rec, false, &hold, reterr);
                if (r < 0)
                        return r;
                r = store_snapshot_copy(s, rec, target, layer_copy, reterr);
                sock = safe_close(sock);
                if (r < 0)
                        return r;
        } else {
                /* Stopped: the sandbox's own layer becomes the snapshot's
                 * and the sandbox gets a new one on top, so its chain grows. */
                r = store_snapshot_chain(s, rec->parent, SANDBOX_MAX_LAYERS - 1, &chain, reterr);
                if (r < 0)
                        return r;
                /* With a disk image: mounted here, for the copy. */
                r = persist_data_open(s, rec, true, &hold, reterr);
                if (r < 0)
                        return r;
                r = store_snapshot_stopped(s, rec, target, reterr);
                if (r < 0)
                        return r;
        }
        /* The snapshot's layers need the sandbox's image below them. */
        r = persist_image_mark(s, rec->policy_json, "snapshot", target, reterr);
        if (r < 0)
                return r;
        if (ret_snap)
                *ret_snap = TAKE_PTR(target);
        if (ret_running)
                *ret_running = running;
        return 0;
}

int persist_restore(Store *s, const char *name, const char *snap, HutchError *reterr) {
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        _cleanup_(snapshot_record_freep) SnapshotRecord *target = NULL;
        _cleanup_close_ int lock = -EBADF, hold = -EBADF;
        int r;

        if (!snap)
                return hutch_error_set(reterr, EINVAL, "no snapshot given");
        /* Both are checked before the sandbox is stopped (the snapshot
         * again, under the store's lock, by store_sandbox_reset()). */
        r = store_sandbox_load(s, name, &rec, reterr);
        if (r < 0)
                return r;
        rec = sandbox_record_free(rec);
        r = snapshot_load_fitting(s, snap, &target, reterr);
        if (r < 0)
                return r;
        r = lock_sandbox(s, name, &rec, &lock, reterr);
        if (r < 0)
                return r;
        /* Under the lock nothing starts it again. */
        r = persist_stop(s, rec->name, reterr);
        if (r < 0)
                return r;
        r = persist_data_open(s, rec, true, &hold, reterr);
        if (r < 0)
                return r;
        return store_sandbox_reset(s, rec, target->name, SANDBOX_MAX_LAYERS, reterr);
}

int persist_snapshot_remove(Store *s, const char *snap, HutchError *reterr) {
        _cleanup_(snapshot_record_freep) SnapshotRecord *rec = NULL;
        int r;

        r = store_snapshot_load(s, snap, &rec, reterr);
        if (r < 0)
                return r;
        r = store_snapshot_remove(s, rec->name, reterr);
        if (r < 0)
                return r;
        (void)persist_image_unmark(s, rec->policy_json, "snapshot", rec->name);
        return 0;
}

/* ---- the overlay workspace ---- */

void ws_view_done(WsView *v) {
        for (size_t i = 0; i < v->n_layers; i++)
                (void)close(v->layer_fds[i]);
        free(v->layer_fds);
        v->host_fd = safe_close(v->host_fd);
        v->policy = policy_free(v->policy);
        *v = WS_VIEW_NULL;
}

/* Opens the workspace's layers (top first) and the host folder. */
static int ws_view_open(const Store *s, SandboxRecord *rec, WsView *v, HutchError *reterr) {
        _cleanup_strv_free_ char **chain = NULL, **dirs = NULL;
        _cleanup_free_ char *own = NULL;
        /* The layer's fd keeps a stopped sandbox's image mounted. */
        _cleanup_close_ int hold = -EBADF;
        char sub[96];
        int r;

        v->policy = policy_new();
        if (!v->policy)
                return -ENOMEM;
        r = policy_load_json(v->policy, rec->policy_json, strlen(rec->policy_json), reterr);
        if (r < 0)
                return r;
        if (!v->policy->workspace || v->policy->workspace_mode != WORKSPACE_MODE_OVERLAY)
                return hutch_error_set(reterr, EINVAL,
                                       "sandbox '%s' has no overlay workspace (diff and apply "
                                       "work on --workspace DIR:overlay)",
                                       rec->name);
        r = persist_data_open(s, rec, false, &hold, reterr);
        if (r < 0)
                return r;
        (void)snprintf(sub, sizeof(sub), "data/upper-%llu/ws", (unsigned long long)rec->gen);
        r = store_sandbox_data_path(s, rec, sub, &own);
        if (r < 0)
                return r;
        r = strv_extend(&dirs, own);
        if (r < 0)
                return r;
        r = store_snapshot_chain(s, rec->parent, SIZE_MAX, &chain, reterr);
        if (r < 0)
                return r;
        STRV_FOREACH(l, chain) {
                _cleanup_free_ char *p = NULL;

                if (asprintf(&p, "%s/ws", *l) < 0)
                        return -ENOMEM;
                r = strv_push_take(&dirs, TAKE_PTR(p));
                if (r < 0)
                        return r;
        }
        v->layer_fds = calloc(strv_length(dirs), sizeof(int));
        if (!v->layer_fds)
                return -ENOMEM;
        STRV_FOREACH(d, dirs) {
                int fd = open(*d, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

                if (fd < 0)
                        return hutch_error_set(reterr, errno, "cannot open the layer %s: %m", *d);
                v->layer_fds[v->n_layers++] = fd;
        }
        v->host_fd = open(v->policy->workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (v->host_fd < 0)
                return hutch_error_set(reterr, errno, "cannot open the workspace '%s': %m",
                                       v->policy->workspace);
        return 0;
}

int persist_paths_normalize(char **paths, HutchError *reterr) {
        STRV_FOREACH(p, paths) {
                char *s = *p;

                if (strncmp(s, POLICY_SANDBOX_WORKSPACE "/",
                            strlen(POLICY_SANDBOX_WORKSPACE) + 1) == 0)
                        s += strlen(POLICY_SANDBOX_WORKSPACE) + 1;
                while (strncmp(s, "./", 2) == 0)
                        s += 2;
                memmove(*p, s, strlen(s) + 1);
                while (strlen(*p) > 0 && (*p)[strlen(*p) - 1] == '/')
                        (*p)[strlen(*p) - 1] = '\0';
                /* Whole components: "v1..2.txt" is a name, "a/../b" is not. */
                if ((*p)[0] != '\0' && !ws_path_is_valid(*p))
                        return hutch_error_set(reterr, EINVAL,
                                               "path '%s' must be relative to the workspace (no "
                                               "'.' or '..' components)",
                                               *p);
        }
        return 0;
}

/* Moves the changes under one of @paths to the front; returns how many. */
static size_t filter_paths(WsChange *changes, size_t n, char **paths) {
        size_t kept = 0;

        if (strv_length(paths) == 0)
                return n;
        for (size_t i = 0; i < n; i++) {
                bool keep = false;

                STRV_FOREACH(p, paths) {
                        size_t len = strlen(*p);

                        if (strncmp(changes[i].path, *p, len) == 0 &&
                            (changes[i].path[len] == '\0' || changes[i].path[len] == '/' ||
                             len == 0))
                                keep = true;
                }
                if (keep) {
                        WsChange tmp = changes[kept];

                        changes[kept++] = changes[i];
                        changes[i] = tmp;
                }
        }
        return kept;
}

int persist_diff(Store *s, const char *name, char **paths, WsView *v, WsChange **ret_changes,
                 size_t *ret_n, size_t *ret_n_all, HutchError *reterr) {
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        WsChange *changes = NULL;
        size_t n = 0;
        int r;

        r = store_sandbox_load(s, name, &rec, reterr);
        if (r < 0)
                return r;
        r = ws_view_open(s, rec, v, reterr);
        if (r < 0)
                return r;
        r = ws_diff(v->layer_fds, v->n_layers, v->host_fd, &changes, &n, reterr);
        if (r < 0)
                return r;
        *ret_n = filter_paths(changes, n, paths);
        *ret_n_all = n;
        *ret_changes = changes;
        return 0;
}

static int load_manifest(const Store *s, const SandboxRecord *rec, WsManifest **ret,
                         HutchError *reterr) {
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -EBADF;
        int r;

        r = store_sandbox_path(s, rec->name, "ws-manifest", &path);
        if (r < 0)
                return r;
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0 && errno == ENOENT) {
                *ret = NULL;
                return 0;
        }
        if (fd < 0)
                return hutch_error_set(reterr, errno, "cannot open %s: %m", path);
        return ws_manifest_load(fd, ret, reterr);
}

void persist_apply_done(PersistApply *a) {
        ws_apply_result_done(&a->res);
        a->workspace = mfree(a->workspace);
        a->applied = false;
}

int persist_apply(Store *s, const char *name, char **paths, WsApplyFlags flags, PersistApply *ret,
                  HutchError *reterr) {
        _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
        _cleanup_(ws_view_done) WsView v = WS_VIEW_NULL;
        _cleanup_(ws_manifest_freep) WsManifest *m = NULL;
        _cleanup_close_ int lock = -EBADF;
        int r;

        *ret = (PersistApply){};
        r = lock_sandbox(s, name, &rec, &lock, reterr);
        if (r < 0)
                return r;
        r = ws_view_open(s, rec, &v, reterr);
        if (r < 0)
                return r;
        r = load_manifest(s, rec, &m, reterr);
        if (r < 0)
                return r;
        if (!m && !(flags & WS_APPLY_FORCE))
                return hutch_error_set(reterr, EINVAL,
                                       "sandbox '%s' has no record of the host folder as it was "
                                       "(it comes from an imported snapshot): host changes cannot "
                                       "be detected; use --force to apply anyway",
                                       rec->name);
        r = ws_apply(v.layer_fds, v.n_layers, v.host_fd, m,
                     strv_length(paths) ? (const char *const *)paths : NULL, flags, &ret->res,
                     reterr);
        if (r < 0)
                return r;
        ret->applied = true;
        ret->workspace = strdup(v.policy->workspace);
        if (!ret->workspace)
                return -ENOMEM;
        /* The host folder now holds these changes: they are the new
         * baseline for the next apply's check. */
        r = write_manifest(s, rec->name, v.host_fd, reterr);
        if (r < 0)
                return r;
        return (int)MIN(ret->res.n_applied, (size_t)INT32_MAX);
}
