/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* `hutch run --backend vm`: the policy as a microVM (docs/vm.md). The
 * supervisor's part: the directories, the host cgroup QEMU runs in, the
 * proxy, the guest's SETUP and EXEC, the command's streams, the timeout,
 * the signals and the outcome. The machine itself is src/lib/vm. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "ns/userns.h"
#include "parse-util.h"
#include "rm-rf.h"
#include "sandbox/cgroup-setup.h"
#include "sandbox/deadline.h"
#include "sandbox/host-setup.h"
#include "sandbox/proxy-spawn.h"
#include "sandbox/rootfs.h"
#include "sandbox/sandbox.h"
#include "sandbox/secrets.h"
#include "sandbox/supervise.h"
#include "signal-util.h"
#include "store/id-pool.h"
#include "store/store.h"
#include "strv.h"
#include "time-util.h"
#include "vm/keeper-vm-tty.h"
#include "vm/vm-forward.h"
#include "vm/vm-image-root.h"
#include "vm/vm-layers.h"
#include "vm/vm-run.h"
#include "vm/vm.h"

/* The guest kernel's own share of the guest RAM: the command's cgroup in
 * the guest gets --memory, the guest gets this much more. */
#define VM_KERNEL_RAM (128ULL << 20)
/* QEMU's own memory beyond the guest RAM (TCG's translation cache is
 * 128 MiB of it), capped by the host cgroup. */
#define VM_QEMU_OVERHEAD (512ULL << 20)
#define VM_QEMU_PIDS 512
#define VM_BOOT_TIMEOUT_MS 60000
#define VM_COPY_TIMEOUT_MS (10ULL * 60000)

static const int vm_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

void vm_run_done(VmRun *v) {
        v->vm = vm_free(v->vm);
        if (v->proxy.pid > 0) {
                _cleanup_free_ char *ignored = NULL;

                (void)proxy_stop(&v->proxy, &ignored);
        }
        run_cgroup_done(&v->rc);
        if (v->run_dir)
                (void)rm_rf_at(AT_FDCWD, v->run_dir);
        free(v->run_dir);
        free(v->template_dir);
        free(v->cache_dir);
        free(v->proxy_sock);
        free(v->helper);
        free(v->self);
        free(v->proxy_binary);
        free(v->ca_dir);
        for (size_t i = 0; i < ELEMENTSOF(v->share_names); i++)
                free(v->share_names[i]);
        v->secrets = secret_set_free(v->secrets);
        v->image = image_root_free(v->image);
        strv_free(v->env);
        v->store = store_free(v->store);
        v->sigfd = safe_close(v->sigfd);
        if (v->pipe_saved)
                (void)sigaction(SIGPIPE, &v->old_pipe, NULL);
        if (v->mask_saved)
                (void)sigprocmask(SIG_SETMASK, &v->orig_mask, NULL);
}

/* The run directories ("vm-run-<pid>-XXXXXX") of supervisors that died
 * without removing theirs (SIGKILL): their QEMU died with them (its death
 * signal). A pid in use, ours or anyone's, keeps its directory. */
static void gc_stale_run_dirs(const char *state) {
        _cleanup_(closedirp) DIR *d = opendir(state);
        struct dirent *de;

        while (d && (de = readdir(d)))
                if (name_pid_is_gone(de->d_name, "vm-run-"))
                        (void)rm_rf_at(dirfd(d), de->d_name);
}

static int pick_dirs(VmRun *v, HutchError *reterr) {
        int r;

        if (asprintf(&v->cache_dir, "%s/vm", v->store->home) < 0)
                return -ENOMEM;
        r = vm_template_dir(v->store->runtime, v->store->home, &v->template_dir);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot pick the VM template directory: %s",
                                       strerror(-r));
        gc_stale_run_dirs(v->store->state);
        if (asprintf(&v->run_dir, "%s/vm-run-%d-XXXXXX", v->store->state, (int)getpid()) < 0)
                return -ENOMEM;
        if (!mkdtemp(v->run_dir)) {
                r = errno;
                v->run_dir = mfree(v->run_dir);
                return hutch_error_set(reterr, r, "cannot create the VM's run directory: %s",
                                       strerror(r));
        }
        return 0;
}

/* Writes @name in @dirfd (0444): the host's system CAs first when
 * @with_system, then the sandbox CA from the memfd @ca. */
static int ca_file_write(int ca, bool with_system, int dirfd, const char *name) {
        _cleanup_free_ char *pem = NULL, *system = NULL;
        _cleanup_close_ int out = -EBADF;
        size_t len = 0;
        int r;

        if (lseek(ca, 0, SEEK_SET) < 0)
                return negative_errno();
        r = read_full_fd(ca, 1U << 20, &pem, &len);
        if (r < 0)
                return r;
        if (with_system) {
                r = read_full_file(SANDBOX_SYSTEM_CA_BUNDLE, 16U << 20, &system);
                if (r < 0 && r != -ENOENT)
                        return r;
        }
        out = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444);
        if (out < 0)
                return negative_errno();
        if (system) {
                size_t n = strlen(system);

                r = loop_write(out, system, n);
                if (r >= 0 && n > 0 && system[n - 1] != '\n')
                        r = loop_write(out, "\n", 1);
                if (r < 0)
                        return r;
        }
        return loop_write(out, pem, len);
}

/* With secrets: the proxy's CA, as the guest will find it at /run/hutch
 * (SANDBOX_CA_BUNDLE_PATH and SANDBOX_CA_DIR, as in the namespace
 * backend): ca-bundle.pem (the host's CAs and the sandbox CA; with an
 * image the sandbox CA alone, which the agent combines with the image's
 * own CAs: plan_ca()) and certs/HASH.0. The directory is shared
 * read-only. */
static int ca_files_write(VmRun *v, int ca_fd, HutchError *reterr) {
        _cleanup_close_ int ca = -EBADF, dir = -EBADF, certs = -EBADF;
        uint64_t hash = 0;
        char name[32];
        int r;

        r = sandbox_ca_receive(ca_fd, &ca, &hash, reterr);
        if (r < 0)
                return r;
        if (asprintf(&v->ca_dir, "%s/ca", v->run_dir) < 0)
                return -ENOMEM;
        if (mkdir(v->ca_dir, 0755) < 0)
                return hutch_error_set(reterr, errno, "cannot create '%s': %m", v->ca_dir);
        dir = open(v->ca_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (dir < 0)
                return hutch_error_set(reterr, errno, "cannot open '%s': %m", v->ca_dir);
        r = ca_file_write(ca, !v->image, dir, "ca-bundle.pem");
        if (r >= 0 && hash != 0) {
                if (mkdirat(dir, "certs", 0755) < 0)
                        r = negative_errno();
                certs = r >= 0 ? openat(dir, "certs", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -EBADF;
                if (r >= 0 && certs < 0)
                        r = negative_errno();
                (void)snprintf(name, sizeof(name), "%08llx.0", (unsigned long long)hash);
                if (r >= 0)
                        r = ca_file_write(ca, false, certs, name);
        }
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot write the CA bundle for the guest: %s",
                                       strerror(-r));
        return 0;
}

/* The proxy's socket in the run directory (0700), handed to hutch-proxy;
 * the guestfwd helper connects to it for each guest connection. In a
 * user namespace (a persistent sandbox, or a one-shot run as root hutch)
 * QEMU and the helper run as the sandbox's root (as root hutch, the host
 * uid of its id range), which cannot reach the run directory: there
 * QEMU's own mount namespace has the socket and the hutch binary at
 * VM_PRIVATE_DIR (VmConfig.files), and the socket is the sandbox root's,
 * 0600. */
static int proxy_setup(VmRun *v, VmConfig *c, HutchError *reterr) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        _cleanup_close_ int fd = -EBADF, ca_fd = -EBADF;
        char self[4096];
        ssize_t n;
        int r;

        if (asprintf(&v->proxy_sock, "%s/proxy.sock", v->run_dir) < 0)
                return -ENOMEM;
        if (strlen(v->proxy_sock) >= sizeof(sa.sun_path))
                return hutch_error_set(reterr, ENAMETOOLONG, "the proxy socket path is too long");
        memcpy(sa.sun_path, v->proxy_sock, strlen(v->proxy_sock) + 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0)
                return hutch_error_set(reterr, errno, "failed to create the proxy's socket: %m");
        if (v->in_userns) {
                if (chown(v->proxy_sock, (uid_t)v->idmap.uid_base, (gid_t)v->idmap.gid_base) < 0 ||
                    chmod(v->proxy_sock, 0600) < 0)
                        return hutch_error_set(reterr, errno,
                                               "failed to hand the proxy's socket to the "
                                               "sandbox: %m");
        }
        r = sandbox_proxy_start(v->proxy_binary, v->policy, v->name, &v->secrets, &ca_fd, &v->proxy,
                                reterr);
        if (r < 0)
                return r;
        r = proxy_hand_sockets(&v->proxy, &fd, 1);
        if (r < 0)
                return hutch_error_set(reterr, -r, "failed to hand the proxy its socket: %s",
                                       strerror(-r));
        n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n < 0)
                return hutch_error_set(reterr, errno, "failed to find the running hutch: %m");
        self[n] = '\0';
        v->self = strdup(self);
        if (!v->self)
                return -ENOMEM;
        if (v->in_userns) {
                c->files[c->n_files++] = (VmFile){.path = v->self, .name = "hutch"};
                c->files[c->n_files++] = (VmFile){.path = v->proxy_sock, .name = "proxy.sock"};
                v->helper = strdup("'" VM_PRIVATE_DIR "/hutch' __vm-fwd '" VM_PRIVATE_DIR
                                   "/proxy.sock'");
                r = v->helper ? 0 : -1;
        } else {
                /* slirp splits the command like a shell
                 * (g_shell_parse_argv): single quotes keep the paths
                 * whole. */
                if (strchr(self, '\'') || strchr(v->proxy_sock, '\''))
                        return hutch_error_set(reterr, EINVAL,
                                               "a quote in a path of the VM's helper");
                r = asprintf(&v->helper, "'%s' __vm-fwd '%s'", self, v->proxy_sock);
        }
        if (r < 0) {
                v->helper = NULL;
                return -ENOMEM;
        }
        if (v->policy->n_secrets > 0)
                return ca_files_write(v, ca_fd, reterr);
        return 0;
}

static int add_share(VmConfig *c, const char *path, bool read_only) {
        if (c->n_shares >= VM_MAX_SHARES)
                return -E2BIG;
        c->shares[c->n_shares++] = (VmShare){.path = path, .read_only = read_only};
        return 0;
}

static int kv(char **buf, size_t *len, const char *key, const char *fmt, ...) _printf_(4, 5);
static int kv(char **buf, size_t *len, const char *key, const char *fmt, ...) {
        _cleanup_free_ char *value = NULL;
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vasprintf(&value, fmt, ap);
        va_end(ap);
        if (n < 0)
                return -ENOMEM;
        return agent_payload_add(buf, len, key, value);
}

/* The host base (docs/architecture.md §3): /usr and /etc read-only, and /bin, /sbin,
 * /lib* as the host has them (links into /usr on a merged-/usr system, or
 * shares of their own). Then the workspace and the binds. Fills the shares
 * of @c and the SETUP entries. */
/* Whether -v @i is a read-only share (1) or not (0); -ENOTDIR for a
 * file. */
static int bind_read_only(const Policy *p, size_t i) {
        struct stat st;

        if (stat(p->binds[i].source, &st) < 0)
                return -errno;
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR; /* NEEDSWORK: 9p shares directories only */
        /* --read-only leaves a bind its own mode, as docker's. */
        return p->binds[i].read_only;
}

/* The binds' shares (VmRun.share_names from @k on), each a name the
 * keeper or the helper binds to the bind's source. */
static int plan_binds(VmRun *v, VmConfig *c, char **buf, size_t *len, size_t k) {
        const Policy *p = v->policy;
        int r = 0;

        for (size_t i = 0; r >= 0 && i < p->n_binds; i++, k++) {
                int ro = bind_read_only(p, i);

                if (ro < 0)
                        return ro;
                if (asprintf(&v->share_names[k], "%s/b%zu", v->run_dir, i) < 0) {
                        v->share_names[k] = NULL;
                        return -ENOMEM;
                }
                r = kv(buf, len, "mount=", "h%zu:%s:%s", c->n_shares, ro ? "ro" : "rw",
                       p->binds[i].target);
                if (r >= 0)
                        r = add_share(c, v->share_names[k], ro);
        }
        return r;
}

/* A persistent sandbox's shares (VmRun.share_names): the merged
 * persistent directories, the workspace, the binds; each is a name that
 * the keeper binds to a directory (VmConfig.dirs) and QEMU opens through
 * its descriptor. */
static int plan_persistent(VmRun *v, VmConfig *c, char **buf, size_t *len) {
        const Policy *p = v->policy;
        const char *mode = p->read_only ? "ro" : "rw";
        size_t k = 0;
        int r = 0;

        for (size_t i = 0; r >= 0 && rootfs_persistent_dirs[i]; i++, k++) {
                if (asprintf(&v->share_names[k], "%s/p%s", v->run_dir, rootfs_persistent_dirs[i]) <
                    0) {
                        v->share_names[k] = NULL;
                        return -ENOMEM;
                }
                r = kv(buf, len, "mount=", "h%zu:%s:%s", c->n_shares, mode,
                       rootfs_persistent_dirs[i]);
                if (r >= 0)
                        r = add_share(c, v->share_names[k], p->read_only);
        }
        if (r >= 0 && p->workspace) {
                if (asprintf(&v->share_names[k], "%s/ws", v->run_dir) < 0) {
                        v->share_names[k] = NULL;
                        return -ENOMEM;
                }
                r = kv(buf, len, "mount=", "h%zu:%s:%s", c->n_shares, mode,
                       POLICY_SANDBOX_WORKSPACE);
                if (r >= 0)
                        r = add_share(c, v->share_names[k], p->read_only);
                k++;
        }
        return r >= 0 ? plan_binds(v, c, buf, len, k) : r;
}

/* With secrets: the proxy's CA (ca_files_write()), shared read-only; in
 * a persistent sandbox QEMU reaches it through the run directory's
 * descriptor, as the other shares. */
static int plan_ca(VmRun *v, VmConfig *c, char **buf, size_t *len) {
        struct stat st;
        int r;

        if (!v->ca_dir)
                return 0;
        r = kv(buf, len, "mount=", "h%zu:ro:%s", c->n_shares, SANDBOX_CA_BUNDLE_DIR);
        if (r >= 0)
                r = add_share(c, v->ca_dir, true);
        /* Clients that read the system bundle trust the proxy's CA too,
         * as in the namespace backend. An image's bundle is where its
         * distribution keeps it: the agent looks for it in the image's
         * root, the namespace backend's table and rule (the first regular
         * file), and binds its CAs and the sandbox CA over it and over
         * the share's bundle (agent-setup.c's setup_ca_bind()). */
        for (size_t i = 0; r >= 0 && v->image && rootfs_image_ca_bundles[i]; i++)
                r = kv(buf, len, "cabind=", "%s:%s", SANDBOX_CA_BUNDLE_PATH,
                       rootfs_image_ca_bundles[i]);
        if (r >= 0 && !v->image && stat(SANDBOX_SYSTEM_CA_BUNDLE, &st) == 0 && S_ISREG(st.st_mode))
                r = kv(buf, len, "bind=", "%s:%s", SANDBOX_CA_BUNDLE_PATH,
                       SANDBOX_SYSTEM_CA_BUNDLE);
        return r;
}

/* An image's root (docs/vm.md, "Images"): one share of the tree the
 * helper built (vm-layers.c), the command's root ("root="); then the
 * workspace and the binds as the helper attached them: a persistent
 * sandbox's as plan_persistent() has them, a one-shot run's as without an
 * image (copied or overlaid in the guest). */
static int plan_image(VmRun *v, VmConfig *c, char **buf, size_t *len) {
        const Policy *p = v->policy;
        bool mounted = v->persistent || p->workspace_mode == WORKSPACE_MODE_MOUNT;
        size_t k = 0;
        int r;

        if (asprintf(&v->share_names[k], "%s/root", v->run_dir) < 0) {
                v->share_names[k] = NULL;
                return -ENOMEM;
        }
        r = kv(buf, len, "root=", "h%zu", c->n_shares);
        if (r >= 0)
                r = add_share(c, v->share_names[k++], p->read_only);
        if (r >= 0 && p->workspace) {
                const char *mode = mounted ? (p->read_only ? "ro" : "rw")
                                   : p->workspace_mode == WORKSPACE_MODE_COPY ? "copy"
                                                                              : "overlay";

                if (asprintf(&v->share_names[k], "%s/ws", v->run_dir) < 0) {
                        v->share_names[k] = NULL;
                        return -ENOMEM;
                }
                r = kv(buf, len, "mount=", "h%zu:%s:%s", c->n_shares, mode,
                       POLICY_SANDBOX_WORKSPACE);
                /* SECURITY: a copy's source and an overlay's lower layer are
                 * read-only at the host end too. */
                if (r >= 0)
                        r = add_share(c, v->share_names[k], p->read_only || !mounted);
                k++;
        }
        if (r >= 0)
                r = plan_binds(v, c, buf, len, k);
        return r >= 0 ? plan_ca(v, c, buf, len) : r;
}

static int plan_filesystem(VmRun *v, VmConfig *c, char **buf, size_t *len) {
        const Policy *p = v->policy;
        static const char *const base[] = {"/usr", "/etc",   "/bin",   "/sbin",
                                           "/lib", "/lib32", "/lib64", "/libx32"};
        int r = 0;

        if (v->image)
                return plan_image(v, c, buf, len);

        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(base); i++) {
                struct stat st;

                if (lstat(base[i], &st) < 0)
                        continue;
                if (S_ISLNK(st.st_mode)) {
                        char target[4096];
                        ssize_t n = readlink(base[i], target, sizeof(target) - 1);

                        if (n <= 0)
                                continue;
                        target[n] = '\0';
                        r = kv(buf, len, "link=", "%s:%s", base[i], target);
                        continue;
                }
                if (!S_ISDIR(st.st_mode))
                        continue;
                r = kv(buf, len, "mount=", "h%zu:ro:%s", c->n_shares, base[i]);
                if (r >= 0)
                        r = add_share(c, base[i], true);
        }
        if (r >= 0 && v->persistent) {
                r = plan_persistent(v, c, buf, len);
                return r >= 0 ? plan_ca(v, c, buf, len) : r;
        }
        if (r >= 0 && p->workspace) {
                const char *mode = p->workspace_mode == WORKSPACE_MODE_COPY      ? "copy"
                                   : p->workspace_mode == WORKSPACE_MODE_OVERLAY ? "overlay"
                                   : p->read_only                                ? "ro"
                                                                                 : "rw";

                r = kv(buf, len, "mount=", "h%zu:%s:%s", c->n_shares, mode,
                       POLICY_SANDBOX_WORKSPACE);
                /* SECURITY: only a mounted, writable workspace is writable
                 * through QEMU; a copy's source and an overlay's lower
                 * layer are read-only at the host end too. */
                if (r >= 0)
                        r = add_share(c, p->workspace,
                                      p->read_only || p->workspace_mode != WORKSPACE_MODE_MOUNT);
        }
        for (size_t i = 0; r >= 0 && i < p->n_binds; i++) {
                int ro = bind_read_only(p, i);

                if (ro < 0)
                        return ro;
                r = kv(buf, len, "mount=", "h%zu:%s:%s", c->n_shares, ro ? "ro" : "rw",
                       p->binds[i].target);
                if (r >= 0)
                        r = add_share(c, p->binds[i].source, ro);
        }
        return r >= 0 ? plan_ca(v, c, buf, len) : r;
}

static int build_setup(VmRun *v, VmConfig *c, char **ret, size_t *ret_len) {
        const Policy *p = v->policy;
        _cleanup_free_ char *buf = NULL;
        unsigned char seed[64];
        char hex[129];
        struct timespec ts;
        uint64_t home = p->disk_size ? p->disk_size : POLICY_DEFAULT_HOME_SIZE;
        uint64_t ws = p->disk_size ? p->disk_size : POLICY_DEFAULT_COPY_SIZE;
        uint64_t tmp = POLICY_DEFAULT_TMP_SIZE, shm = POLICY_DEFAULT_SHM_SIZE;
        size_t len = 0;
        int r;

        if (getrandom(seed, sizeof(seed), 0) != (ssize_t)sizeof(seed))
                return -EIO;
        for (size_t i = 0; i < sizeof(seed); i++)
                (void)snprintf(hex + 2 * i, 3, "%02x", seed[i]);
        (void)clock_gettime(CLOCK_REALTIME, &ts);
        for (size_t i = 0; i < p->n_tmpfs; i++) {
                if (strcmp(p->tmpfs[i].path, "/tmp") == 0)
                        tmp = p->tmpfs[i].size;
                else if (strcmp(p->tmpfs[i].path, "/dev/shm") == 0)
                        shm = p->tmpfs[i].size;
                else if (strcmp(p->tmpfs[i].path, POLICY_SANDBOX_WORKSPACE) == 0)
                        ws = p->tmpfs[i].size;
                else if (strcmp(p->tmpfs[i].path, POLICY_SANDBOX_HOME) == 0)
                        home = p->tmpfs[i].size;
        }
        r = kv(&buf, &len, "time=", "%lld.%09ld", (long long)ts.tv_sec, ts.tv_nsec);
        if (r >= 0)
                r = agent_payload_add(&buf, &len, "seed=", hex);
        if (r >= 0)
                r = agent_payload_add(&buf, &len, "hostname=", p->hostname);
        /* SECURITY: the command is the root of a user namespace in the
         * guest whose ids map onto the guest ids its files have: those QEMU
         * reports, VM_GUEST_ID_BASE.. when QEMU runs in the sandbox's user
         * namespace (vm_layers_configure()), else the caller's own uid and
         * gid (QEMU runs as the caller). Never a guest id 0 (issue 26). */
        if (r >= 0)
                r = kv(&buf, &len, "uid=", "%u",
                       v->in_userns ? VM_GUEST_ID_BASE : (unsigned)getuid());
        if (r >= 0)
                r = kv(&buf, &len, "gid=", "%u",
                       v->in_userns ? VM_GUEST_ID_BASE : (unsigned)getgid());
        if (r >= 0)
                r = kv(&buf, &len, "ids=", "%u", v->in_userns ? vm_run_ids(v) : 1U);
        if (r >= 0)
                r = kv(&buf, &len, "memory=", "%" PRIu64, p->memory_max);
        if (r >= 0)
                r = kv(&buf, &len, "pids=", "%" PRIu64, p->pids_max);
        if (r >= 0)
                r = kv(&buf, &len, "size.tmp=", "%" PRIu64, tmp);
        if (r >= 0)
                r = kv(&buf, &len, "size.home=", "%" PRIu64, home);
        if (r >= 0)
                r = kv(&buf, &len, "size.shm=", "%" PRIu64, shm);
        if (r >= 0)
                r = kv(&buf, &len, "size.workspace=", "%" PRIu64, ws);
        if (r >= 0 && c->net_helper)
                r = agent_payload_add(&buf, &len, "net=", "1");
        if (r >= 0 && p->read_only)
                r = agent_payload_add(&buf, &len, "readonly=", "1");
        /* SECURITY: what apt and dpkg need (docs/vm.md, "Images"), as the
         * namespace backend's persistent sandboxes with a range keep it:
         * a persistent image sandbox whose guest namespace maps a range;
         * over those ids only. */
        if (r >= 0 && v->image && v->persistent && v->in_userns && vm_run_ids(v) > 1)
                r = agent_payload_add(&buf, &len, "caps=", "package");
        for (size_t i = 0; r >= 0 && i < p->n_tmpfs; i++) {
                const char *path = p->tmpfs[i].path;

                if (strcmp(path, "/tmp") != 0 && strcmp(path, "/dev/shm") != 0 &&
                    strcmp(path, POLICY_SANDBOX_WORKSPACE) != 0 &&
                    strcmp(path, POLICY_SANDBOX_HOME) != 0)
                        r = kv(&buf, &len, "tmpfs=", "%" PRIu64 ":%s", p->tmpfs[i].size, path);
        }
        if (r >= 0)
                r = plan_filesystem(v, c, &buf, &len);
        /* SECURITY: last, over the shares: what no sandbox may read of the
         * host's /etc (QEMU as a user may read what that user may), hidden
         * as the namespace backend hides it. An image's /etc is its own. */
        if (r >= 0 && !v->image) {
                _cleanup_strv_free_ char **masks = NULL;

                r = rootfs_masked_paths(&masks);
                STRV_FOREACH(m, masks) {
                        if (r < 0)
                                break;
                        r = agent_payload_add(&buf, &len, "mask=", *m);
                }
        }
        if (r < 0)
                return r;
        *ret = TAKE_PTR(buf);
        *ret_len = len;
        return 0;
}

int vm_run_build_exec(char *const *argv, char *const *env, const char *cwd, const char *user,
                      char *const *policy_env, char **ret, size_t *ret_len) {
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        int r = 0;

        for (size_t i = 0; r >= 0 && argv[i]; i++)
                r = agent_payload_add(&buf, &len, "a:", argv[i]);
        STRV_FOREACH(e, (char **)env) {
                if (r < 0)
                        break;
                r = agent_payload_add(&buf, &len, "e:", *e);
        }
        if (r >= 0)
                r = agent_payload_add(&buf, &len, "c:", cwd);
        if (r >= 0 && user && user[0]) {
                r = agent_payload_add(&buf, &len, "u:", user);
                if (r >= 0 && strv_env_get(policy_env, "HOME"))
                        r = agent_payload_add(&buf, &len, "k:", "HOME");
                if (r >= 0 && strv_env_get(policy_env, "USER"))
                        r = agent_payload_add(&buf, &len, "k:", "USER");
        }
        if (r < 0)
                return r;
        *ret = TAKE_PTR(buf);
        *ret_len = len;
        return 0;
}

/* The host cgroup for QEMU: the guest RAM plus QEMU's overhead, a pids cap
 * for its threads, and --cpus as a quota. The guest enforces --memory and
 * --pids itself; only --cpus needs the host. */
static int cgroup_setup(VmRun *v, uint64_t ram, HutchError *reterr) {
        Policy hp = *v->policy; /* shallow: only read, never freed */
        int r;

        hp.memory_max = ram + VM_QEMU_OVERHEAD;
        hp.memory_swap_max = 0;
        hp.pids_max = VM_QEMU_PIDS;
        hp.limits_explicit = v->policy->limits_explicit & (1U << POLICY_LIMIT_CPUS);
        r = run_cgroup_plan(&hp, &v->rc, reterr);
        if (r < 0)
                return r;
        run_cgroup_gc(&v->rc);
        return run_cgroup_create(&hp, &v->rc, v->name, reterr);
}

/* `hutch run -t` (docs/vm.md "Published ports and terminals"): the
 * caller's relay holds a host pty's master (keeper-vm-tty.h), this
 * process its slave, raw, as the command's stdin and stdout; the command's
 * own pty is the guest's. */
typedef struct RunTty {
        int slave;
        unsigned rows, cols; /* the window size the guest has */
        VmTtyWatch watch;    /* its changes */
} RunTty;

/* How long the relay has to say go once it has the master. */
#define VM_RUN_TTY_GO_TIMEOUT_MS 10000
static void run_tty_done(RunTty *t) {
        vm_tty_watch_stop(&t->watch);
        t->slave = safe_close(t->slave);
}

/* The pty for the relay's channel, which is this process's stdin
 * (sandbox_set_command_tty()): its master goes to the relay, which sets
 * its window size and says go. */
static int run_tty_open(RunTty *t, HutchError *reterr) {
        int r;

        r = vm_tty_open(STDIN_FILENO, &t->slave);
        if (r >= 0)
                r = vm_tty_watch_start(&t->watch, t->slave);
        if (r >= 0)
                r = vm_tty_wait_go(STDIN_FILENO, VM_RUN_TTY_GO_TIMEOUT_MS);
        if (r < 0)
                return hutch_error_set(reterr, -r, "failed to set up the terminal: %s",
                                       strerror(-r));
        vm_tty_size(t->slave, &t->rows, &t->cols);
        return 0;
}

/* The window size of the slave, passed on when it changed. */
static void run_tty_sync(RunTty *t, VmMux *m, VmSession *ss) {
        unsigned rows, cols;

        vm_tty_size(t->slave, &rows, &cols);
        if (rows == t->rows && cols == t->cols)
                return;
        t->rows = rows;
        t->cols = cols;
        vm_session_resize(m, ss, rows, cols);
}

static void session_loop(VmRun *v, VmMux *m, VmSession *ss, CommandDeadline *deadline,
                         VmForwards *fwd, RunTty *tty) {
        for (;;) {
                struct pollfd p[1 + VM_SESSION_NPOLL + 2 + VM_FORWARD_NPOLL];
                struct pollfd *extra = p + 1 + VM_SESSION_NPOLL;
                size_t n = 1 + VM_SESSION_NPOLL + 2;
                int timeout;

                if (vm_session_ended(m, ss))
                        return;
                /* The published ports' connections (vm-forward.h). */
                vm_forwards_step(fwd);
                n += vm_forwards_poll_fill(fwd, p + n);
                vm_mux_poll_fill(m, p);
                vm_session_poll_fill(m, ss, p + 1);
                /* A terminal has no stderr: that slot is its window-size
                 * changes'. */
                if (tty->slave >= 0)
                        p[3] = (struct pollfd){.fd = tty->watch.fd, .events = POLLIN};
                extra[0] = (struct pollfd){.fd = v->vm->pidfd, .events = POLLIN};
                extra[1] = (struct pollfd){.fd = v->sigfd, .events = POLLIN};
                timeout = command_deadline_poll_timeout(command_deadline_next(deadline, ss->exited),
                                                        time_monotonic_ms());
                if (poll(p, n, timeout) < 0) {
                        if (errno == EINTR)
                                continue;
                        (void)hutch_error_set(&ss->error, errno, "poll failed: %m");
                        return;
                }
                vm_mux_poll_handle(m, p);
                /* A resize comes before the keys typed after it. */
                if (tty->slave >= 0) {
                        if ((p[3].revents && vm_tty_watch_drain(&tty->watch)) || p[1].revents)
                                run_tty_sync(tty, m, ss);
                        p[3].revents = 0;
                }
                vm_session_poll_handle(m, ss, p + 1);
                vm_forwards_poll_handle(fwd, extra + 2);
                if (extra[0].revents && !ss->exited)
                        m->gone = true;
                if (extra[1].revents & POLLIN) {
                        struct signalfd_siginfo si;

                        if (read(v->sigfd, &si, sizeof(si)) == sizeof(si))
                                vm_session_signal(m, ss, (int)si.ssi_signo);
                }
                if (command_deadline_check(deadline, time_monotonic_ms(), ss->exited) ==
                    COMMAND_DUE_TIMEOUT) {
                        /* The timeout: the backend's kill, and then the
                         * whole VM dies (the caller's vm_free()), whatever
                         * runs in it: a one-shot run does not wait for the
                         * guest. */
                        vm_session_kill(m, ss);
                        ss->timed_out = true;
                        ss->s->end_ms = time_monotonic_ms();
                        return;
                }
        }
}

static int fill_outcome(const VmRun *v, const VmSession *ss, Outcome *ret) {
        CgroupStats st = {};
        Outcome o = {
                .wall_ms = ss->s->end_ms - ss->s->start_ms,
                .degraded = v->rc.degraded & (1U << POLICY_LIMIT_CPUS),
        };
        int r;

        run_cgroup_stats((RunCgroup *)&v->rc, &st);
        if (ss->timed_out || (!ss->exited && st.oom_kills > 0)) {
                /* The VM was killed: by the timeout, or (QEMU over its cap)
                 * by the host's OOM killer. */
                o.reason = ss->timed_out ? OUTCOME_TIMEOUT : OUTCOME_OOM;
                o.signal = SIGKILL;
                o.exit_code = 128 + SIGKILL;
                o.stdout_truncated = ss->s->relays[0].truncated;
                o.stderr_truncated = ss->s->relays[1].truncated;
                *ret = o;
                return 0;
        }
        r = vm_session_outcome(ss, &o);
        if (r < 0)
                return r;
        *ret = o;
        return 0;
}

static int signals_setup(VmRun *v, HutchError *reterr) {
        struct sigaction ign = {.sa_handler = SIG_IGN};
        sigset_t mask;

        sigemptyset(&mask);
        for (size_t i = 0; i < ELEMENTSOF(vm_signals); i++)
                sigaddset(&mask, vm_signals[i]);
        if (sigprocmask(SIG_BLOCK, &mask, &v->orig_mask) < 0)
                return hutch_error_set(reterr, errno, "failed to block signals: %m");
        v->mask_saved = true;
        v->sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (v->sigfd < 0)
                return hutch_error_set(reterr, errno, "failed to create a signalfd: %m");
        /* A caller that stops reading our stdout must not kill us before
         * the VM is cleaned up. */
        if (sigaction(SIGPIPE, &ign, &v->old_pipe) < 0)
                return hutch_error_set(reterr, errno, "failed to ignore SIGPIPE: %m");
        v->pipe_saved = true;
        return 0;
}

int vm_run_prepare(VmRun *v, VmConfig *c, char *const *caller_env, char **setup, size_t *setup_len,
                   HutchError *reterr) {
        uint32_t salt = 0;
        int r;

        /* Best effort: the pid alone names it among live runs. */
        if (getrandom(&salt, sizeof(salt), GRND_NONBLOCK) != (ssize_t)sizeof(salt))
                salt = 0;
        (void)snprintf(v->name, sizeof(v->name), "vm-%d-%08x", (int)getpid(), salt);
        if (policy_network_mode(v->policy) == NETWORK_MODE_ALLOW) {
                r = proxy_binary_find(&v->proxy_binary, reterr);
                if (r < 0)
                        return r;
        }
        /* Before anything is created: a secret that cannot be read is bad
         * input, reported with nothing to undo. */
        r = secret_set_load(v->policy, caller_env, &v->secrets, reterr);
        if (r < 0)
                return r;
        r = sandbox_build_env(v->policy, v->image ? v->image->env : NULL, caller_env, &v->env);
        if (r < 0)
                return hutch_error_set(reterr, -r, "failed to build the environment");
        /* SECURITY: the guest gets the placeholders only; the real values
         * go to the proxy (sandbox_proxy_start()) and never into the VM. */
        r = sandbox_env_add_placeholders(&v->env, v->secrets, reterr);
        if (r < 0)
                return r;
        /* A user's persistent image sandbox with sub-ids gets the ranged
         * map, as on the namespace backend (docs/persistent.md "Id
         * range"): its QEMU and the guest see 65536 ids, so the image's
         * other users (apt's _apt) exist (docs/vm.md "Images"). Every
         * other run keeps the single-id map as a user. */
        r = v->persistent && v->image ? idmapping_for_caller_ranged(NULL, NULL, NULL, &v->idmap)
                                      : idmapping_for_caller(NULL, NULL, &v->idmap);
        if (r < 0)
                return hutch_error_set(reterr, -r, "failed to pick the sandbox's id range: %s",
                                       strerror(-r));
        /* SECURITY: as root, a persistent sandbox's QEMU runs as its own
         * range of the id pool, never as another sandbox's; its layers
         * are idmapped from the store's fixed range onto it
         * (vm_layers_open(), docs/vm.md "Id ranges"). COMPAT(containers):
         * without CAP_SYS_ADMIN nothing can be idmapped: the fixed range,
         * as for the namespace backend. */
        if (v->persistent && sandbox_has_cap_sys_admin())
                idmapping_use_pool_range(&v->idmap, v->id_base);
        /* SECURITY: as root, a one-shot run's QEMU runs as a range of the
         * pool leased for the run's lifetime, never as another sandbox's
         * (issue 15); its trees are idmapped through its namespace
         * (vm_oneshot_open()), so they do not depend on the range. */
        if (!v->persistent && v->id_lease && v->idmap.privileged && sandbox_has_cap_sys_admin()) {
                uint32_t base = 0;

                r = id_pool_lease(&base, v->id_lease, reterr);
                if (r < 0)
                        return r;
                idmapping_use_pool_range(&v->idmap, base);
        }
        /* SECURITY: as root hutch, QEMU is never host root. */
        /* An image's root is built by vm-layers.c's helper, whose user
         * namespace QEMU joins. */
        v->in_userns = v->persistent || v->idmap.privileged || v->image;
        r = store_open(&v->store, reterr);
        if (r < 0)
                return r;
        r = pick_dirs(v, reterr);
        if (r < 0)
                return r;

        *c = (VmConfig){
                .accel = v->policy->vm_accel,
                .kernel = v->policy->vm_kernel,
                .cache_dir = v->cache_dir,
                .template_dir = v->template_dir,
                .run_dir = v->run_dir,
                .ram_bytes = ((v->policy->memory_max + VM_KERNEL_RAM + (1ULL << 20) - 1) >> 20)
                             << 20,
                .vcpus = v->policy->cpu_millis ? (v->policy->cpu_millis + 999) / 1000 : 1,
                .use_template = !getenv("HUTCH_VM_COLD"),
                .boot_timeout_ms = VM_BOOT_TIMEOUT_MS,
        };
        {
                /* $HUTCH_VM_BOOT_TIMEOUT_MS: a shorter bound (tests). */
                const char *t = getenv("HUTCH_VM_BOOT_TIMEOUT_MS");
                uint64_t ms;

                if (t && safe_atou64(t, &ms) >= 0 && ms > 0)
                        c->boot_timeout_ms = ms;
        }
        if (!v->policy->memory_max)
                c->ram_bytes = POLICY_DEFAULT_MEMORY + VM_KERNEL_RAM;
        {
                /* A limit above what the machine has is no limit (as in the
                 * namespace backend): the guest gets at most the host's RAM. */
                long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
                uint64_t phys = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;

                if (phys && (v->policy->memory_max > phys || c->ram_bytes > phys))
                        c->ram_bytes = (phys >> 20) << 20;
        }
        {
                long cpus = sysconf(_SC_NPROCESSORS_ONLN);

                if (cpus > 0 && c->vcpus > (unsigned)cpus)
                        c->vcpus = (unsigned)cpus;
        }
        if (policy_network_mode(v->policy) == NETWORK_MODE_ALLOW) {
                r = proxy_setup(v, c, reterr);
                if (r < 0)
                        return r;
                c->net_helper = v->helper;
        }
        r = build_setup(v, c, setup, setup_len);
        if (r == -E2BIG)
                return hutch_error_set(reterr, E2BIG, "too many shares for the VM (at most %d)",
                                       VM_MAX_SHARES);
        if (r == -ENOTDIR)
                return hutch_error_set(reterr, ENOTDIR,
                                       "--backend vm can bind directories only (-v of a file)");
        if (r < 0)
                return hutch_error_set(reterr, -r, "failed to plan the VM: %s", strerror(-r));
        r = cgroup_setup(v, c->ram_bytes, reterr);
        if (r < 0)
                return r;
        c->cgroup = v->rc.cgroup;
        return signals_setup(v, reterr);
}

/* Sends EXEC (with a terminal of @tty's size, when it has one) and waits
 * for STARTED. */
static int start_command(VmRun *v, char *const *argv, const RunTty *tty, HutchError *reterr) {
        _cleanup_free_ char *exec = NULL;
        size_t elen = 0;
        int r;

        /* --user over the image's User (docs/vm.md, "Images"). */
        r = vm_run_build_exec(argv, v->env, sandbox_workdir(v->policy, v->image),
                              v->policy->user ?: (v->image ? v->image->user : NULL), v->policy->env,
                              &exec, &elen);
        if (r >= 0 && tty->slave >= 0) {
                char size[32];

                (void)snprintf(size, sizeof(size), "%u:%u", tty->rows, tty->cols);
                r = agent_payload_add(&exec, &elen, "t:", size);
        }
        if (r < 0)
                return hutch_error_set(reterr, -r,
                                       "the command and environment are too large for the guest "
                                       "(%s)",
                                       strerror(-r));
        return vm_agent_request(v->vm, AGENT_MSG_EXEC, 0, exec, elen, AGENT_MSG_STARTED, reterr);
}

int sandbox_run_vm(const Policy *policy, char *const *argv, char *const *caller_env, bool tty,
                   Outcome *ret_outcome, HutchError *reterr) {
        /* Released after the VM (declared before it): the run's range. */
        _cleanup_close_ int id_lease = -EBADF;
        _cleanup_(run_tty_done) RunTty t = {.slave = -EBADF, .watch = VM_TTY_WATCH_NULL};
        _cleanup_(vm_run_done) VmRun v = {
                .policy = policy,
                .sigfd = -EBADF,
                .proxy = PROXY_PROCESS_NULL,
                .id_lease = &id_lease,
        };
        _cleanup_(vm_layers_done) VmLayers layers = VM_LAYERS_NULL;
        _cleanup_(vm_forwards_done) VmForwards fwd;
        _cleanup_free_ char *setup = NULL, *denied = NULL;
        _cleanup_strv_free_ char **image_argv = NULL;
        Supervision sup = {};
        CommandDeadline deadline = {};
        VmSession ss = {.s = &sup, .in_fd = STDIN_FILENO, .chan = -1};
        VmMux m = {};
        VmConfig c;
        size_t setup_len = 0;
        int r;

        vm_forwards_init(&fwd);
        if (policy->image) {
                /* Docker's rules: Entrypoint, then the command or Cmd. */
                r = vm_image_resolve(policy, true, &v.image, reterr);
                if (r >= 0)
                        r = image_root_command(v.image, argv, &image_argv, reterr);
                if (r < 0)
                        return r;
                argv = image_argv;
        }
        if (!argv || !argv[0])
                return hutch_error_set(reterr, EINVAL, "missing command");
        r = vm_run_prepare(&v, &c, caller_env, &setup, &setup_len, reterr);
        if (r < 0)
                return r;
        if (v.image) {
                r = vm_layers_open(&v, NULL, &layers, reterr);
                if (r < 0)
                        return r;
                vm_layers_configure(&layers, &v, &c);
        } else if (v.in_userns) {
                r = vm_oneshot_open(&v, &layers, reterr);
                if (r < 0)
                        return r;
                vm_layers_configure(&layers, &v, &c);
        }
        /* The published ports' listeners before the VM (vm-forward.h). */
        r = port_forwards_bind(&fwd.ports, policy->ports, reterr);
        if (r < 0)
                return r;
        r = vm_start(&c, &v.vm, reterr);
        if (r < 0)
                return r;
        /* A copied workspace is copied during SETUP: give it the time. */
        if (policy->workspace && policy->workspace_mode == WORKSPACE_MODE_COPY)
                v.vm->boot_timeout_ms = MAX(v.vm->boot_timeout_ms, VM_COPY_TIMEOUT_MS);
        r = vm_agent_request(v.vm, AGENT_MSG_SETUP, 0, setup, setup_len, AGENT_MSG_READY, reterr);
        if (r < 0)
                return r;
        command_deadline_start(&deadline, time_monotonic_ms(), policy->timeout_ms);
        for (size_t i = 0; i < 2; i++)
                sup.relays[i] = (Relay){
                        .in_fd = -EBADF, .out_fd = (int)i + 1, .limit = policy->output_limit};
        if (tty) {
                r = run_tty_open(&t, reterr);
                if (r < 0)
                        return r;
                /* The terminal is stdin and stdout; it has no stderr. */
                ss.in_fd = sup.relays[0].out_fd = t.slave;
                sup.relays[1].out_fd = -EBADF;
        }
        r = start_command(&v, argv, &t, reterr);
        if (r < 0)
                return r;
        sup.start_ms = time_monotonic_ms();
        vm_mux_init(&m, v.vm);
        vm_session_attach(&m, &ss, 0);
        vm_forwards_attach(&fwd, &m);
        session_loop(&v, &m, &ss, &deadline, &fwd, &t);
        vm_forwards_attach(&fwd, NULL);
        vm_forwards_done(&fwd);
        vm_session_release(&m, &ss);
        vm_mux_done(&m);
        if (m.error.errnum && !ss.error.errnum)
                ss.error = m.error;
        if (ss.error.errnum) {
                if (reterr)
                        *reterr = ss.error;
                return -ss.error.errnum;
        }
        if (m.gone && !ss.timed_out && !ss.exited) {
                CgroupStats st = {};

                run_cgroup_stats(&v.rc, &st);
                if (st.oom_kills == 0) {
                        (void)hutch_error_set(reterr, EPROTO,
                                              "the VM ended before the command finished");
                        vm_error_add_console(v.vm, reterr);
                        return -EPROTO;
                }
        }
        /* Whatever the command left running dies with its VM. */
        v.vm = vm_free(v.vm);
        if (v.proxy.pid > 0) {
                r = proxy_stop(&v.proxy, &denied);
                if (r < 0)
                        return hutch_error_set(reterr, -r, "failed to read the proxy's summary: %s",
                                               strerror(-r));
        }
        r = fill_outcome(&v, &ss, ret_outcome);
        if (r < 0)
                return hutch_error_set(reterr, -r, "the VM ended before the command finished");
        ret_outcome->denied = TAKE_PTR(denied);
        return 0;
}
