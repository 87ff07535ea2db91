/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup/cgroup.h"
#include "exec-util.h"
#include "fd-util.h"
#include "file-op.h"
#include "macro.h"
#include "net/dns-table.h"
#include "ns/caps.h"
#include "ns/landlock.h"
#include "parse-util.h"
#include "sandbox/init.h"
#include "sandbox/proxy-spawn.h"
#include "sandbox/pty.h"
#include "sandbox/rootfs.h"
#include "sandbox/sandbox.h"
#include "sandbox/sync.h"
#include "seccomp/seccomp-filter.h"
#include "signal-util.h"
#include "strv.h"

#define INIT_MAX_FDS (1 + POLICY_MAX_BINDS)

static const int forwarded_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

_noreturn_ static void init_fail(int sync_fd, int err, const char *step, const char *msg) {
        (void)sync_send(sync_fd, SYNC_OP_ERROR, err, 0, step, msg ? msg : strerror(err), NULL, 0);
        _exit(125);
}

/* SECURITY: init is a clone of the supervisor, so the stack area holding
 * the caller's argv and environment is still mapped in it and would show in
 * /proc/1/cmdline and /proc/1/environ inside the sandbox. Wipe it; init
 * only uses the heap copies it was given. */
static int wipe_caller_strings(void) {
        _cleanup_free_ char *stat = NULL;
        unsigned long long v[4];
        const char *p;
        int field = 2, r;

        r = read_full_file("/proc/self/stat", 4096, &stat);
        if (r < 0)
                return r;
        p = strrchr(stat, ')');
        if (!p)
                return -EBADMSG;
        /* Fields 48-51: arg_start arg_end env_start env_end. */
        for (p++; *p && field < 48; p++)
                if (*p == ' ')
                        field++;
        if (sscanf(p, " %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3]) != 4)
                return -EBADMSG;
        if (v[1] > v[0])
                memset((void *)(uintptr_t)v[0], 0, (size_t)(v[1] - v[0]));
        if (v[3] > v[2])
                memset((void *)(uintptr_t)v[2], 0, (size_t)(v[3] - v[2]));
        return 0;
}

static int loopback_up(void) {
        _cleanup_close_ int fd = -EBADF;
        struct ifreq ifr = {};

        fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return negative_errno();
        (void)snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
        if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
                return negative_errno();
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
                return negative_errno();
        return 0;
}

/* Transparent DNS (docs/network.md, "Transparent DNS"): the resolver's
 * UDP socket at DNS_RESOLVER_ADDR and one listener per allowlisted name
 * and port at the name's synthetic address, appended to @fds. */
static int make_dns_sockets(const Policy *p, int *fds, size_t max, size_t *n) {
        _cleanup_(dns_table_done) DnsTable t = {};
        struct sockaddr_in sin = {.sin_family = AF_INET};
        int fd, r;

        r = dns_table_add_strv(&t, p->allow_hosts, NULL);
        for (size_t i = 0; r >= 0 && i < p->n_secrets; i++)
                r = dns_table_add_strv(&t, p->secrets[i].hosts, NULL);
        if (r < 0)
                return r;
        if (*n + 1 + t.n_listeners > max)
                return -E2BIG;

        fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return negative_errno();
        fds[(*n)++] = fd;
        sin.sin_addr.s_addr = htonl(DNS_RESOLVER_ADDR);
        sin.sin_port = htons(DNS_RESOLVER_PORT);
        if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
                return negative_errno();

        for (size_t i = 0; i < t.n_entries; i++)
                for (size_t j = 0; j < t.entries[i].n_ports; j++) {
                        int one = 1;

                        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                        if (fd < 0)
                                return negative_errno();
                        fds[(*n)++] = fd;
                        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
                        sin.sin_addr = t.entries[i].addr;
                        sin.sin_port = htons(t.entries[i].ports[j]);
                        if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
                                return negative_errno();
                        if (listen(fd, SOMAXCONN) < 0)
                                return negative_errno();
                }
        return 0;
}

/* Network mode allow: the proxy's listening sockets are made here, inside
 * the sandbox's network namespace, and handed to the supervisor, which
 * gives them to hutch-proxy outside. Init keeps no copy, so when the proxy
 * dies the sockets close and the sandbox's network fails closed. */
static int send_proxy_sockets(int sync_fd, const Policy *p) {
        int fds[SANDBOX_PROXY_SOCKETS_MAX];
        size_t n = 0;
        int r;

        r = proxy_listen_loopback(AF_INET, &fds[n]);
        if (r < 0)
                return r;
        n++;
        /* COMPAT(IPv6 disabled): ::1 is optional. */
        if (proxy_listen_loopback(AF_INET6, &fds[n]) >= 0)
                n++;
        r = p->dns_transparent ? make_dns_sockets(p, fds, ELEMENTSOF(fds), &n) : 0;
        if (r >= 0)
                r = sync_send(sync_fd, SYNC_OP_SOCKETS, 0, 0, NULL, NULL, fds, n);
        for (size_t i = 0; i < n; i++)
                fds[i] = safe_close(fds[i]);
        return r;
}

/* With secrets: after SYNC_OP_CONTINUE, the supervisor sends the sandbox
 * CA (the proxy made it while we built the filesystem). Any other answer
 * ends init. */
static void recv_ca_bundle(int sync_fd, int *ret_ca, uint64_t *ret_hash) {
        int fds[2] = {-EBADF, -EBADF};
        SyncMsg m;
        int r;

        r = sync_recv(sync_fd, &m, fds, ELEMENTSOF(fds));
        if (r <= 0)
                _exit(125);
        if (m.op != SYNC_OP_CA || m.n_fds != 1 || fds[0] < 0) {
                for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                        fds[i] = safe_close(fds[i]);
                init_fail(sync_fd, EPROTO, "receive the CA bundle", NULL);
        }
        *ret_ca = fds[0];
        *ret_hash = m.values[0];
}

static void forward_handler(int sig) {
        /* Never runs: the signals are blocked and read with sigwaitinfo().
         * A handler must exist because PID 1 drops default-action signals
         * sent from the parent namespace. */
        (void)sig;
}

/* We joined our cgroups first thing (sandbox_init_main()), and the
 * supervisor's old-way move, where clone3 could not join the v2 one, is
 * done by CONTINUE; nothing of the user's runs before. Then a cgroup
 * namespace rooted there, and the rlimits of a degraded run (SYNC_OP_CONTINUE's values). */
static void wait_for_cgroup(const InitArgs *a) {
        CgroupLimits rl;
        int fds[1];
        SyncMsg m;
        int r;

        r = sync_recv(a->sync_fd, &m, fds, 0);
        if (r <= 0 || m.op != SYNC_OP_CONTINUE)
                _exit(125); /* the supervisor failed or died: it reports why */
        if (unshare(CLONE_NEWCGROUP) < 0)
                init_fail(a->sync_fd, errno, "create the cgroup namespace", NULL);
        rl = (CgroupLimits){
                .memory_max = m.values[0],
                .memory_swap_max = m.values[1],
                .pids_max = m.values[2],
        };
        if (rl.memory_max || rl.pids_max) {
                r = rlimits_apply(&rl);
                if (r < 0)
                        init_fail(a->sync_fd, -r, "apply the resource rlimits", NULL);
        }
}

/* SECURITY: the order matters. no_new_privs first (landlock and seccomp
 * need it), then capabilities, then landlock (which needs the paths still
 * reachable), then seccomp last, since it forbids what the others use. */
static void confine_self(const InitArgs *a) {
        _cleanup_strv_free_ char **writable = NULL;
        int r;

        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                init_fail(a->sync_fd, errno, "set no_new_privs", NULL);
        /* SECURITY: only the sandbox's root keeps the package set; a
         * command that runs as another user (an image's User) keeps
         * nothing. */
        r = caps_drop_all_but(getuid() == 0 ? a->keep_caps : 0);
        if (r < 0)
                init_fail(a->sync_fd, -r, "drop capabilities", NULL);
        r = rootfs_writable_paths(a->policy, a->persistent, &writable);
        if (r < 0)
                init_fail(a->sync_fd, -r, "list writable paths", NULL);
        r = landlock_restrict_writes(writable);
        /* COMPAT(kernel < 5.13 or landlock disabled): landlock is defence in
         * depth over read-only mounts; `hutch doctor` reports its absence. */
        if (r < 0 && r != -EOPNOTSUPP)
                init_fail(a->sync_fd, -r, "apply landlock", NULL);
        r = seccomp_filter_load_default();
        if (r < 0)
                init_fail(a->sync_fd, -r, "load the seccomp filter", NULL);
}

/* Reads the image's @path (NULL when it has none). */
static char *read_image_file(const InitArgs *a, const char *path) {
        char *text = NULL;
        int r;

        r = read_full_file(path, IMAGE_USER_FILE_MAX, &text);
        if (r == -ENOENT)
                return NULL;
        if (r < 0)
                init_fail(a->sync_fd, -r, "read the image's user database", path);
        return text;
}

/* A one-shot run of an image whose config names a User: init becomes
 * that user (found in the image's own /etc/passwd and /etc/group) before
 * it confines itself, so that the command runs as it; HOME and USER
 * follow unless -e set them. SECURITY: only ids of the sandbox's own
 * user namespace can be taken (an unmapped one is refused by the
 * kernel), and every capability is dropped right after. */
static void become_image_user(InitArgs *a) {
        _cleanup_free_ char *passwd = NULL, *group = NULL;
        struct pollfd pfd = {.fd = a->sync_fd, .events = POLLRDHUP};
        const char *spec = a->image ? a->image->user : NULL;
        const char *what = "the image's User";
        HutchError err = {};
        ImageUser u;
        int r;

        /* --user (the policy's "user") over the image's User. */
        if (a->policy->user) {
                spec = a->policy->user;
                what = "the --user";
        }
        if (!spec || !spec[0] || a->persistent)
                return;
        passwd = read_image_file(a, "/etc/passwd");
        group = read_image_file(a, "/etc/group");
        r = image_user_resolve(spec, passwd, group, &u, &err);
        if (r < 0) {
                char msg[sizeof(err.msg) + 600];

                (void)snprintf(msg, sizeof(msg), "%s '%s': %s", what, spec, err.msg);
                init_fail(a->sync_fd, -r, "resolve the user", msg);
        }
        if (!strv_env_get(a->policy->env, "HOME")) {
                r = strv_env_set(&a->envp, "HOME", u.home);
                if (r < 0)
                        init_fail(a->sync_fd, -r, "set HOME", NULL);
        }
        if (u.name[0] && !strv_env_get(a->policy->env, "USER")) {
                r = strv_env_set(&a->envp, "USER", u.name);
                if (r < 0)
                        init_fail(a->sync_fd, -r, "set USER", NULL);
        }
        if (u.uid == 0 && u.gid == 0)
                return; /* init is that already */
        r = caps_become_user(u.uid, u.gid, u.groups, u.n_groups);
        /* EINVAL: an id the map lacks; EPERM: setgroups is denied (both:
         * the single-id map of an unprivileged caller). */
        if (r == -EINVAL || r == -EPERM) {
                char msg[256];

                (void)snprintf(msg, sizeof(msg),
                               "%s '%s' (uid %u, gid %u) is not mapped in this sandbox (as an "
                               "unprivileged caller its only id is root: --user root runs as it)",
                               what, spec, (unsigned)u.uid, (unsigned)u.gid);
                init_fail(a->sync_fd, -r, "become the user", msg);
        }
        if (r < 0)
                init_fail(a->sync_fd, -r, "become the user", spec);
        /* A change of credentials clears these; set them again, and make
         * sure the supervisor did not die in between. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || poll(&pfd, 1, 0) != 0)
                _exit(125);
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                init_fail(a->sync_fd, errno, "make init non-dumpable", NULL);
}

_noreturn_ static void exec_command(const InitArgs *a) {
        char msg[300];

        /* The command starts with default dispositions, whatever the caller
         * ignored (SIGPIPE in particular), and with no signal blocked. */
        signals_reset_default();

        /* SECURITY: a new session, so the command has no controlling
         * terminal to inject input into. */
        if (setsid() < 0)
                init_fail(a->sync_fd, errno, "create a session", NULL);
        /* -t: a pty of the sandbox's own, its master out over the channel
         * the caller gave as stdin (sandbox/pty.h). */
        if (a->tty) {
                int r = pty_attach_inside(STDIN_FILENO);

                if (r < 0)
                        init_fail(a->sync_fd, -r, "attach the terminal", NULL);
        }
        if (chdir(a->workdir) < 0) {
                int e = errno;

                (void)snprintf(msg, sizeof(msg), "working directory '%s': %s", a->workdir,
                               strerror(e));
                init_fail(a->sync_fd, e, "enter the working directory", msg);
        }
        /* SECURITY: only 0-2 survive exec; the sync socket stays usable for
         * error reports until then. */
        if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
                init_fail(a->sync_fd, errno, "close file descriptors", NULL);
        exec_or_exit(a->argv, a->envp);
}

/* ---- persistent sandboxes: serving exec requests ---- */

#define INIT_MAX_EXECS 256
/* Asks an exec's shim to kill everything below it (never sent to a
 * command: a shim only forwards the signals of shim_forwarded). */
#define SHIM_KILL_SIGNAL (SIGRTMIN + 1)

typedef struct ExecRequest {
        uint64_t id;
        char *cwd;
        char *user;          /* --user's spec, or "" for the sandbox's default */
        char **argv, **envp; /* point into the payload */
        int fds[SYNC_EXEC_FDS_MAX];
        size_t n_fds;
        bool tty; /* fds[0] is the channel of a pty (sandbox/pty.h) */
} ExecRequest;

/* Splits "cwd\0user\0argv...\0\0env...\0" (from the keeper, which built
 * it) into @req; the vectors point into @buf. */
static int payload_parse(char *buf, size_t len, ExecRequest *req) {
        size_t n = 0, i, k = 0;
        char **v;

        if (len == 0 || buf[len - 1] != '\0')
                return -EBADMSG;
        for (i = 0; i < len; i += strlen(buf + i) + 1)
                n++;
        v = calloc(n + 1, sizeof(char *));
        if (!v)
                return -ENOMEM;
        req->cwd = buf;
        i = strlen(buf) + 1;
        if (i >= len) {
                free(v);
                return -EBADMSG;
        }
        req->user = buf + i;
        i += strlen(buf + i) + 1;
        while (i < len && buf[i]) {
                v[k++] = buf + i;
                i += strlen(buf + i) + 1;
        }
        if (k == 0 || i >= len) {
                free(v);
                return -EBADMSG;
        }
        v[k++] = NULL;
        i++; /* the empty string that ends argv */
        req->argv = v;
        req->envp = v + k;
        while (i < len) {
                if (!buf[i]) {
                        free(v);
                        req->argv = req->envp = NULL;
                        return -EBADMSG;
                }
                v[k++] = buf + i;
                i += strlen(buf + i) + 1;
        }
        return 0;
}

/* Signals a shim passes on to the command (as a one-shot init does). */
static const int shim_forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

/* Kills every child of the calling subreaper (what an exec left running
 * was re-parented to it) and reaps them, until none is left. */
static void shim_kill_children(void) {
        for (unsigned pass = 0; pass < 1000; pass++) {
                _cleanup_free_ char *list = NULL;
                char path[64];
                bool any = false;

                (void)snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)getpid());
                if (read_full_file(path, 1U << 20, &list) >= 0)
                        for (char *p = list, *end; p && *p; p = end) {
                                uint64_t pid;

                                end = strchr(p, ' ');
                                if (end)
                                        *end++ = '\0';
                                if (safe_atou64(p, &pid) >= 0 && pid > 1 && pid < INT32_MAX) {
                                        (void)kill((pid_t)pid, SIGKILL);
                                        any = true;
                                }
                        }
                while (waitpid(-1, NULL, WNOHANG) > 0)
                        any = true;
                if (!any && waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD)
                        return;
                if (!any)
                        (void)usleep(1000);
        }
}

/* Without a cgroup for the exec, its first process is this shim: a child
 * subreaper that runs the command and, when the command ends or
 * SHIM_KILL_SIGNAL arrives, kills everything left below it, including
 * processes that left the command's session (a daemon's setsid()). The
 * shim then ends as the command did, so its wait status is the command's. */
_noreturn_ static void exec_shim(pid_t cmd) {
        int status = 0, sig;
        sigset_t mask;

        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        sigaddset(&mask, SHIM_KILL_SIGNAL);
        for (size_t i = 0; i < ELEMENTSOF(shim_forwarded); i++)
                sigaddset(&mask, shim_forwarded[i]);
        for (;;) {
                siginfo_t si;

                sig = sigwaitinfo(&mask, &si);
                if (sig == SHIM_KILL_SIGNAL) {
                        (void)kill(-cmd, SIGKILL);
                        shim_kill_children();
                        status = SIGKILL;
                        break;
                }
                if (sig != SIGCHLD) {
                        if (sig > 0)
                                (void)kill(cmd, sig);
                        continue;
                }
                if (waitpid(cmd, &status, WNOHANG) == cmd)
                        break;
                while (waitpid(-1, NULL, WNOHANG) > 0)
                        ;
        }
        shim_kill_children();
        if (WIFEXITED(status))
                _exit(WEXITSTATUS(status));
        sig = WTERMSIG(status);
        (void)signal(sig, SIG_DFL);
        (void)sigprocmask(SIG_UNBLOCK, &mask, NULL);
        sigemptyset(&mask);
        (void)sigprocmask(SIG_SETMASK, &mask, NULL);
        (void)raise(sig);
        _exit(128 + sig);
}

static void exec_run(const ExecRequest *req) _noreturn_;

_noreturn_ static void exec_child(const ExecRequest *req) {
        sigset_t none;

        /* Every signal is blocked (serve_exec() forked with them so). */
        signals_reset_dispositions();
        /* SECURITY: a new session per exec, as for a one-shot run. */
        (void)setsid();
        if (req->n_fds == 3) {
                pid_t cmd;

                /* No cgroup: a subreaper shim stays between init and the
                 * command. Signals stay blocked from init's fork on, so
                 * none is lost, and SHIM_KILL_SIGNAL sent at once (a
                 * `hutch kill` right after the start) is the shim's to
                 * take, never the end of it before it could kill; the
                 * command unblocks them. */
                if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
                        _exit(125);
                cmd = fork();
                if (cmd < 0)
                        _exit(125);
                if (cmd > 0) {
                        for (int i = 0; i < 3; i++)
                                (void)close(req->fds[i]);
                        exec_shim(cmd);
                }
                (void)prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
        }
        sigemptyset(&none);
        (void)sigprocmask(SIG_SETMASK, &none, NULL);
        /* Into this exec's cgroup before anything of the user's runs. */
        for (size_t i = 3; i < req->n_fds; i++)
                if (write(req->fds[i], "0", 1) != 1) {
                        (void)dprintf(req->fds[2], "hutch: cannot join the exec's cgroup: %s\n",
                                      strerror(errno));
                        _exit(125);
                }
        exec_run(req);
}

/* A persistent sandbox's default user, which an exec without --user
 * runs as (docs/images-run.md): the policy's user, else its image's User,
 * else NULL (root); and whether the policy's environment sets HOME and
 * USER itself. Set by serve() before it forks anything; init is
 * single-threaded, so the globals are safe. */
static const char *exec_default_user;
static bool exec_policy_home, exec_policy_user;

/* In an exec's process, before its command: becomes @spec (--user, or
 * the sandbox's default user when empty), found in the sandbox's
 * /etc/passwd and /etc/group as they are now, with HOME and USER following
 * unless the policy's environment sets them; @env is the command's
 * environment (a new vector in *@env when changed). SECURITY: only ids of
 * the sandbox's own user namespace can be taken, and a change from uid 0
 * to another uid clears every capability init kept (its securebits keep
 * NO_SETUID_FIXUP off). Exits 125 naming the problem. */
static void exec_become_user(const char *spec, char ***env) {
        _cleanup_free_ char *passwd = NULL, *group = NULL;
        const char *what = "the --user";
        HutchError err = {};
        ImageUser u;
        int pdeath = 0, r;

        if (!spec || !spec[0]) {
                spec = exec_default_user;
                what = "the sandbox's user";
        }
        if (!spec || !spec[0])
                return;
        (void)read_full_file("/etc/passwd", IMAGE_USER_FILE_MAX, &passwd);
        (void)read_full_file("/etc/group", IMAGE_USER_FILE_MAX, &group);
        r = image_user_resolve(spec, passwd, group, &u, &err);
        if (r < 0) {
                (void)dprintf(STDERR_FILENO, "hutch: cannot resolve %s '%s': %s\n", what, spec,
                              err.msg);
                _exit(125);
        }
        *env = strv_copy(*env);
        if (!*env || (!exec_policy_home && strv_env_set(env, "HOME", u.home) < 0) ||
            (u.name[0] && !exec_policy_user && strv_env_set(env, "USER", u.name) < 0))
                _exit(125);
        if (u.uid == 0 && u.gid == 0)
                return;
        (void)prctl(PR_GET_PDEATHSIG, &pdeath, 0, 0, 0);
        if (setgroups(u.n_groups, u.groups) < 0 || setresgid(u.gid, u.gid, u.gid) < 0 ||
            setresuid(u.uid, u.uid, u.uid) < 0) {
                (void)dprintf(STDERR_FILENO,
                              "hutch: cannot become %s '%s' (uid %u, gid %u): %s (without a "
                              "range of ids, as an unprivileged caller without sub-ids has, the "
                              "sandbox's only id is root: 'hutch exec --user root' runs as it)\n",
                              what, spec, (unsigned)u.uid, (unsigned)u.gid, strerror(errno));
                _exit(125);
        }
        /* A change of credentials clears it. */
        if (pdeath > 0)
                (void)prctl(PR_SET_PDEATHSIG, pdeath, 0, 0, 0);
}

/* The CPUs the sandbox may use, as init found them when it started: the
 * keeper then keeps itself and init on one CPU (keeper.c, pin_to_one_cpu()),
 * and each command gets these back before it execs. */
static cpu_set_t command_cpus;
static bool command_cpus_saved;

/* The command's side of an exec, in its cgroup already. */
_noreturn_ static void exec_run(const ExecRequest *req) {
        char **env = req->envp;

        for (int i = 0; i < 3; i++)
                if (dup2(req->fds[i], i) < 0)
                        _exit(125);
        if (req->tty) {
                int r = pty_attach_inside(STDIN_FILENO);

                if (r < 0) {
                        (void)dprintf(STDERR_FILENO, "hutch: cannot attach the terminal: %s\n",
                                      strerror(-r));
                        _exit(125);
                }
        }
        /* A file operation (hutch_file_*()): done by this process of the
         * sandbox, confined as any command. */
        if (req->argv[0][0] == FILE_OP_ARGV0_PREFIX)
                _exit(file_op_main(req->cwd, req->argv));
        exec_become_user(req->user, &env);
        if (chdir(req->cwd) < 0) {
                (void)dprintf(STDERR_FILENO, "hutch: working directory '%s': %s\n", req->cwd,
                              strerror(errno));
                _exit(125);
        }
        if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
                _exit(125);
        /* Only a slower command if this fails, no weaker one. */
        if (command_cpus_saved)
                (void)sched_setaffinity(0, sizeof(command_cpus), &command_cpus);
        exec_or_exit(req->argv, env);
}

/* The process prepared for the next exec (SYNC_OP_STEM), in its cgroup
 * already, waiting on @sock for the request. */
typedef struct Stem {
        uint64_t id;
        pid_t pid; /* 0: none (gone, or never forked) */
        int sock;
        /* Its cgroup.procs (the keeper's SYNC_OP_STEM), kept: when the
         * process is gone the exec is forked afresh into them. */
        int cg_fds[SYNC_EXEC_FDS_MAX - 3];
        size_t n_cg;
} Stem;

/* The stem's life: into the cgroup (the slow part, done while nobody
 * waits), then the request, then exec_run(). */
_noreturn_ static void stem_main(int sock, int *cg_fds, size_t n_cg, char *buf) {
        ExecRequest req = {};
        int fds[3] = {-EBADF, -EBADF, -EBADF};
        SyncMsg m;
        ssize_t len;

        signals_reset_default();
        /* SECURITY: a new session per exec, as for a one-shot run. */
        (void)setsid();
        for (size_t i = 0; i < n_cg; i++)
                if (write(cg_fds[i], "0", 1) != 1)
                        _exit(125);
        for (size_t i = 0; i < n_cg; i++)
                (void)close(cg_fds[i]);
        if (sync_recv(sock, &m, fds, ELEMENTSOF(fds)) <= 0 || m.op != SYNC_OP_EXEC || m.n_fds != 3)
                _exit(125);
        len = recv(sock, buf, SYNC_EXEC_PAYLOAD_MAX, 0);
        if (len <= 0 || (uint64_t)len != m.values[1])
                _exit(125);
        req.id = m.values[0];
        req.n_fds = 3;
        req.tty = m.values[2] & SYNC_EXEC_TTY;
        memcpy(req.fds, fds, sizeof(fds));
        if (payload_parse(buf, (size_t)len, &req) < 0) {
                (void)dprintf(fds[2], "hutch: cannot start the command: malformed exec request\n");
                _exit(125);
        }
        exec_run(&req);
}

/* The prepared processes, oldest first (SYNC_STEMS_MAX, sync.h). */
typedef struct Stems {
        Stem s[SYNC_STEMS_MAX];
        size_t n;
} Stems;

/* Forgets @stems->s[@i] (killing it with @kill), keeping the order. */
static void stem_remove(Stems *stems, size_t i, bool kill_it) {
        Stem *stem = stems->s + i;

        stem->sock = safe_close(stem->sock);
        if (kill_it && stem->pid > 0)
                (void)kill(stem->pid, SIGKILL); /* reaped by serve_reap() */
        for (size_t j = 0; j < stem->n_cg; j++)
                stem->cg_fds[j] = safe_close(stem->cg_fds[j]);
        memmove(stems->s + i, stems->s + i + 1, sizeof(Stem) * (stems->n - i - 1));
        stems->n--;
}

/* SYNC_OP_STEM: a new prepared process (the oldest, when SYNC_STEMS_MAX
 * wait already, goes: the keeper replaced it). Takes @fds (its
 * cgroup.procs). The keeper counts it prepared whatever happens here, so
 * it is recorded even when it cannot be forked (--pids reached): the exec
 * that takes it is then forked afresh (serve_exec()). */
static void stem_fork(const SyncMsg *m, int *fds, char *buf, Stems *stems) {
        Stem *stem;
        int pair[2] = {-EBADF, -EBADF};
        pid_t pid = -1;

        if (stems->n == SYNC_STEMS_MAX)
                stem_remove(stems, 0, true);
        stem = stems->s + stems->n++;
        *stem = (Stem){.id = m->values[0], .sock = -EBADF, .n_cg = m->n_fds};
        for (size_t j = 0; j < m->n_fds && j < ELEMENTSOF(stem->cg_fds); j++) {
                stem->cg_fds[j] = fds[j];
                fds[j] = -EBADF;
        }
        stem->n_cg = MIN(stem->n_cg, ELEMENTSOF(stem->cg_fds));
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) >= 0)
                pid = fork();
        if (pid == 0) {
                (void)close(pair[0]);
                stem_main(pair[1], stem->cg_fds, stem->n_cg, buf);
        }
        (void)safe_close(pair[1]);
        if (pid < 0) {
                (void)safe_close(pair[0]);
                return;
        }
        stem->pid = pid;
        stem->sock = pair[0];
}

typedef struct RunningExec {
        uint64_t id;
        pid_t pid;
        bool shim; /* pid is exec_shim(), which kills on SHIM_KILL_SIGNAL */
} RunningExec;

static void exec_request_done(ExecRequest *req) {
        for (size_t i = 0; i < req->n_fds; i++)
                req->fds[i] = safe_close(req->fds[i]);
        free(req->argv);
        *req = (ExecRequest){};
}

/* One SYNC_OP_EXEC: fork the command, or report why not (the exec ends
 * with status 125 and a line on its stderr). */
static void serve_exec(const InitArgs *a, const SyncMsg *m, int *fds, char *buf, RunningExec *execs,
                       size_t *n_execs, Stems *stems) {
        ExecRequest req = {
                .id = m->values[0], .n_fds = m->n_fds, .tty = m->values[2] & SYNC_EXEC_TTY};
        const char *why = NULL;
        ssize_t len;
        pid_t pid;

        memcpy(req.fds, fds, sizeof(int) * m->n_fds);
        len = recv(a->sync_fd, buf, SYNC_EXEC_PAYLOAD_MAX, MSG_CMSG_CLOEXEC);
        if (len <= 0)
                _exit(0); /* the keeper is gone */
        if (req.n_fds < 3 || (uint64_t)len != m->values[1] ||
            payload_parse(buf, (size_t)len, &req) < 0)
                why = "malformed exec request";
        else if (*n_execs >= INIT_MAX_EXECS)
                why = "too many commands running in this sandbox";
        pid = 0;
        if (!why && (m->values[2] & SYNC_EXEC_STEM)) {
                size_t i = 0;
                Stem *stem;

                /* The prepared process runs it: it sits in its cgroup. */
                while (i < stems->n && stems->s[i].id != req.id)
                        i++;
                stem = i < stems->n ? stems->s + i : &(Stem){.sock = -EBADF};
                if (stem->pid > 0 && req.n_fds == 3 &&
                    sync_send_values(
                            stem->sock, SYNC_OP_EXEC,
                            (uint64_t[3]){req.id, m->values[1], m->values[2] & SYNC_EXEC_TTY},
                            req.fds, 3) >= 0 &&
                    send(stem->sock, buf, (size_t)len, MSG_NOSIGNAL) >= 0) {
                        pid = stem->pid;
                        execs[(*n_execs)++] = (RunningExec){.id = req.id, .pid = stem->pid};
                } else if (req.n_fds == 3 && stem->n_cg > 0) {
                        /* Gone (killed inside the sandbox, or never forked
                         * under --pids): forked afresh below, into the
                         * same cgroup (never the shim's way: that is for a
                         * sandbox without cgroups). */
                        for (size_t j = 0; j < stem->n_cg; j++)
                                req.fds[req.n_fds++] = TAKE_FD(stem->cg_fds[j]);
                        stem->n_cg = 0;
                } else
                        why = "the prepared process is gone";
                if (i < stems->n)
                        stem_remove(stems, i, pid == 0);
        }
        if (!why && pid == 0) {
                sigset_t all, old;

                /* Blocked in the child until it can take them (exec_child()). */
                sigfillset(&all);
                (void)sigprocmask(SIG_SETMASK, &all, &old);
                pid = fork();
                if (pid == 0)
                        exec_child(&req);
                (void)sigprocmask(SIG_SETMASK, &old, NULL);
                if (pid < 0)
                        why = strerror(errno);
                else
                        execs[(*n_execs)++] =
                                (RunningExec){.id = req.id, .pid = pid, .shim = req.n_fds == 3};
        }
        if (why) {
                if (req.n_fds >= 3)
                        (void)dprintf(req.fds[2], "hutch: cannot start the command: %s\n", why);
                (void)sync_send_status(a->sync_fd, SYNC_OP_EXITED, 125 << 8,
                                       (uint64_t[3]){req.id, 0, 0}, NULL, 0);
        } else
                (void)sync_send_values(a->sync_fd, SYNC_OP_STARTED,
                                       (uint64_t[3]){req.id, (uint64_t)pid, 0}, NULL, 0);
        exec_request_done(&req);
}

static void serve_reap(const InitArgs *a, RunningExec *execs, size_t *n_execs, Stems *stems) {
        for (;;) {
                int st;
                pid_t p = waitpid(-1, &st, WNOHANG);

                if (p <= 0)
                        return;
                /* A prepared process that died unused: forget its pid
                 * before it can be reused by another process. */
                for (size_t i = 0; i < stems->n; i++)
                        if (stems->s[i].pid == p) {
                                /* Its cgroup stays the next exec's. */
                                stems->s[i].pid = 0;
                                stems->s[i].sock = safe_close(stems->s[i].sock);
                                break;
                        }
                for (size_t i = 0; i < *n_execs; i++)
                        if (execs[i].pid == p) {
                                /* What it left running goes with it. The
                                 * keeper kills the exec's cgroup; without
                                 * one (degraded) this is the process group
                                 * (exec_child's setsid made it), which a
                                 * process that left it escapes. */
                                (void)kill(-p, SIGKILL);
                                (void)sync_send_status(a->sync_fd, SYNC_OP_EXITED, st,
                                                       (uint64_t[3]){execs[i].id, 0, 0}, NULL, 0);
                                execs[i] = execs[--*n_execs];
                                break;
                        }
        }
}

/* Persistent sandbox: init stays, forks one command per SYNC_OP_EXEC and
 * reports each exit; orphans re-parented to it are reaped silently. Ends
 * when the keeper closes the socket (or, with the keeper, by SIGKILL). */
_noreturn_ static void serve(const InitArgs *a, const sigset_t *mask, unsigned fallbacks) {
        static RunningExec execs[INIT_MAX_EXECS];
        Stems stems = {};
        size_t n_execs = 0;
        _cleanup_free_ char *buf = NULL;
        int sigfd;

        buf = malloc(SYNC_EXEC_PAYLOAD_MAX);
        if (!buf)
                init_fail(a->sync_fd, ENOMEM, "serve commands", NULL);
        if (a->image)
                exec_default_user = a->image->user;
        if (a->policy->user)
                exec_default_user = a->policy->user;
        exec_policy_home = strv_env_get(a->policy->env, "HOME") != NULL;
        exec_policy_user = strv_env_get(a->policy->env, "USER") != NULL;
        /* Each exec brings its own stdio; init keeps none of the keeper's
         * (its log file). */
        for (int i = 0; i < 3; i++) {
                int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);

                if (null_fd < 0 || (null_fd != i && dup2(null_fd, i) < 0))
                        init_fail(a->sync_fd, errno, "attach /dev/null", NULL);
                if (null_fd != i)
                        (void)close(null_fd);
        }
        sigfd = signalfd(-1, mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (sigfd < 0)
                init_fail(a->sync_fd, errno, "create a signalfd", NULL);
        if (sync_send_values(a->sync_fd, SYNC_OP_READY, (uint64_t[3]){0, fallbacks, 0}, NULL, 0) <
            0)
                _exit(0);
        for (;;) {
                struct pollfd pfd[2] = {{.fd = a->sync_fd, .events = POLLIN},
                                        {.fd = sigfd, .events = POLLIN}};
                int fds[SYNC_EXEC_FDS_MAX];
                SyncMsg m;
                int r;

                if (poll(pfd, 2, -1) < 0)
                        continue;
                if (pfd[1].revents) {
                        struct signalfd_siginfo si;

                        while (read(sigfd, &si, sizeof(si)) == sizeof(si))
                                ;
                        serve_reap(a, execs, &n_execs, &stems);
                }
                if (!pfd[0].revents)
                        continue;
                for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                        fds[i] = -EBADF;
                r = sync_recv(a->sync_fd, &m, fds, ELEMENTSOF(fds));
                if (r <= 0)
                        _exit(0);
                if (m.op == SYNC_OP_EXEC) {
                        serve_exec(a, &m, fds, buf, execs, &n_execs, &stems);
                        continue;
                }
                if (m.op == SYNC_OP_STEM) {
                        stem_fork(&m, fds, buf, &stems);
                        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                                fds[i] = safe_close(fds[i]);
                        continue;
                }
                for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                        fds[i] = safe_close(fds[i]);
                /* SIGKILL (a timeout or a client gone, without a cgroup to
                 * kill) goes to the exec's whole process group: it has its
                 * own session. Other signals are the client's, for the
                 * command itself. */
                if (m.op == SYNC_OP_SIGNAL && m.values[1] > 0 && m.values[1] < (uint64_t)NSIG)
                        for (size_t i = 0; i < n_execs; i++)
                                if (execs[i].id == m.values[0])
                                        (void)kill(m.values[1] != SIGKILL ? execs[i].pid
                                                   : execs[i].shim        ? execs[i].pid
                                                                          : -execs[i].pid,
                                                   m.values[1] == SIGKILL && execs[i].shim
                                                           ? SHIM_KILL_SIGNAL
                                                           : (int)m.values[1]);
        }
}

_noreturn_ static void supervise(const InitArgs *a, pid_t cmd, const sigset_t *mask,
                                 unsigned fallbacks) {
        int status = 0;

        (void)sync_send_values(a->sync_fd, SYNC_OP_STARTED, (uint64_t[3]){0, fallbacks, 0}, NULL,
                               0);
        for (;;) {
                siginfo_t si;
                int sig = sigwaitinfo(mask, &si);

                if (sig < 0)
                        continue;
                if (sig != SIGCHLD) {
                        (void)kill(cmd, sig);
                        continue;
                }
                for (;;) {
                        int st;
                        pid_t p = waitpid(-1, &st, WNOHANG);

                        if (p <= 0)
                                break;
                        if (p == cmd) {
                                status = st;
                                /* The command is done: whatever it left
                                 * behind dies with this pid namespace. */
                                (void)sync_send(a->sync_fd, SYNC_OP_EXITED, 0, status, NULL, NULL,
                                                NULL, 0);
                                _exit(0);
                        }
                }
        }
}

void sandbox_init_main(const InitArgs *a) {
        int fds[INIT_MAX_FDS], layer_fds[1 + SANDBOX_MAX_LAYERS], image_fds[IMAGE_ROOT_MAX_LAYERS];
        RootfsLayers layers = {};
        RootfsImage image = {};
        InitArgs args = *a;

        /* SECURITY: before anything else runs, join the sandbox's v1
         * cgroups (the v2 one, clone3 gave at birth): what init and the
         * command do from here on is counted and limited. Fail closed.
         * "tasks" moves the writing thread only: init has no other. */
        {
                int join_err = 0;

                for (size_t i = 0; i < a->n_cgroup_fds; i++) {
                        if (i < a->n_cgroup_tasks && join_err == 0 &&
                            write(a->cgroup_fds[i], "0", 1) != 1)
                                join_err = errno ?: EIO;
                        (void)close(a->cgroup_fds[i]);
                }
                if (join_err != 0)
                        init_fail(a->sync_fd, join_err, "move the sandbox into its cgroup", NULL);
        }

        /* Before the keeper can pin init to one CPU (it does so once init
         * said it is ready). */
        command_cpus_saved = sched_getaffinity(0, sizeof(command_cpus), &command_cpus) == 0;
        for (size_t i = 0; i < ELEMENTSOF(layer_fds); i++)
                layer_fds[i] = -EBADF;
        for (size_t i = 0; i < ELEMENTSOF(image_fds); i++)
                image_fds[i] = -EBADF;
        struct sigaction sa = {.sa_handler = forward_handler};
        sigset_t mask;
        RootfsConfig rc;
        unsigned fallbacks = 0;
        HutchError err = {};
        SyncMsg go;
        pid_t cmd;
        int r;

        /* SECURITY: if the supervisor dies, so does init, and with it the
         * whole pid namespace. The GO handshake below closes the race where
         * the supervisor died before this prctl(): its socket end is then
         * closed and recv sees EOF. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
                _exit(125);
        (void)setsid();

        r = sync_recv(a->sync_fd, &go, fds, ELEMENTSOF(fds));
        if (r <= 0 || go.op != SYNC_OP_GO)
                _exit(125);

        /* As host root, init starts with host uid 0, which the sandbox's
         * range does not map; become the namespace's root (an unprivileged
         * host id). Changing credentials clears the death signal, so set it
         * again and make sure the supervisor did not die in between. */
        if (getuid() != 0 || getgid() != 0) {
                struct pollfd pfd = {.fd = a->sync_fd, .events = POLLRDHUP};

                if (setgroups(0, NULL) < 0 || setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
                        init_fail(a->sync_fd, errno, "become root of the user namespace", NULL);
                if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
                        _exit(125);
                if (poll(&pfd, 1, 0) != 0)
                        _exit(125);
        }

        r = wipe_caller_strings();
        if (r < 0)
                init_fail(a->sync_fd, -r, "wipe the caller's argv and environment", NULL);
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                init_fail(a->sync_fd, errno, "make init non-dumpable", NULL);

        /* The supervisor sends the detached trees (as root) for the
         * workspace, then one per bind; or none (unprivileged). */
        if (go.n_fds > 0 && go.n_fds != (a->policy->workspace ? 1 : 0) + a->policy->n_binds)
                init_fail(a->sync_fd, EPROTO, "receive the workspace and bind mounts", NULL);

        if (a->persistent) {
                SyncMsg lm;

                r = sync_recv(a->sync_fd, &lm, layer_fds, ELEMENTSOF(layer_fds));
                /* Detached mounts (as root), or none: init binds the paths. */
                if (r <= 0 || lm.op != SYNC_OP_LAYERS ||
                    lm.values[0] != strv_length(a->layer_paths) ||
                    (lm.n_fds != 0 && lm.n_fds != lm.values[0] + 1))
                        init_fail(a->sync_fd, EPROTO, "receive the sandbox's layers", NULL);
                layers = (RootfsLayers){
                        .data_fd = layer_fds[0],
                        .data_path = a->data_dir,
                        .upper = a->upper,
                        .layer_fds = layer_fds + 1,
                        .layer_paths = a->layer_paths,
                        .n_layers = lm.values[0],
                };
        }

        if (a->image) {
                SyncMsg im;

                r = sync_recv(a->sync_fd, &im, image_fds, FD_MESSAGE_MAX);
                /* Detached mounts (as root), or none: init binds the paths.
                 * Past FD_MESSAGE_MAX layers the rest come in batches. */
                if (r <= 0 || im.op != SYNC_OP_IMAGE ||
                    im.values[0] != strv_length(a->image->layers) ||
                    im.values[0] > ELEMENTSOF(image_fds) ||
                    (im.n_fds != 0 && im.n_fds != MIN(im.values[0], (uint64_t)FD_MESSAGE_MAX)))
                        init_fail(a->sync_fd, EPROTO, "receive the image's layers", NULL);
                if (im.n_fds == FD_MESSAGE_MAX && im.values[0] > FD_MESSAGE_MAX) {
                        r = recv_fds_batched(a->sync_fd, image_fds + FD_MESSAGE_MAX,
                                             im.values[0] - FD_MESSAGE_MAX);
                        if (r < 0)
                                init_fail(a->sync_fd, -r, "receive the image's layers", NULL);
                }
                image = (RootfsImage){
                        .layer_fds = image_fds,
                        .layer_paths = a->image->layers,
                        .n_layers = im.values[0],
                };
        }

        /* The network comes first: the network namespace exists since the
         * clone, and the proxy (already started by the supervisor) can take
         * its listening sockets while the filesystem is built. */
        r = loopback_up();
        if (r < 0)
                init_fail(a->sync_fd, -r, "bring up the loopback interface", NULL);
        if (policy_network_mode(a->policy) == NETWORK_MODE_ALLOW) {
                r = send_proxy_sockets(a->sync_fd, a->policy);
                if (r < 0)
                        init_fail(a->sync_fd, -r, "create the proxy's listening sockets", NULL);
        }

        rc = (RootfsConfig){
                .policy = a->policy,
                .workspace_fd = go.n_fds > 0 && a->policy->workspace ? fds[0] : -EBADF,
                .bind_fds = go.n_fds > 0 ? fds + (a->policy->workspace ? 1 : 0) : NULL,
                .ca_bundle = a->policy->n_secrets > 0,
                .layers = a->persistent ? &layers : NULL,
                .image = a->image ? &image : NULL,
                .allow_host_proc = a->policy->allow_degraded,
                .container = a->container,
        };
        r = rootfs_setup(&rc, &fallbacks, &err);
        if (r < 0)
                init_fail(a->sync_fd, err.errnum, "build the sandbox filesystem", err.msg);
        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                fds[i] = safe_close(fds[i]);
        for (size_t i = 0; i < ELEMENTSOF(layer_fds); i++)
                layer_fds[i] = safe_close(layer_fds[i]);
        for (size_t i = 0; i < ELEMENTSOF(image_fds); i++)
                image_fds[i] = safe_close(image_fds[i]);

        if (sethostname(a->policy->hostname, strlen(a->policy->hostname)) < 0)
                init_fail(a->sync_fd, errno, "set the hostname", NULL);

        /* With an output limit the command's stdout/stderr are the
         * supervisor's relay pipes. */
        if (a->stdout_fd >= 0 && dup2(a->stdout_fd, STDOUT_FILENO) < 0)
                init_fail(a->sync_fd, errno, "attach the stdout pipe", NULL);
        if (a->stderr_fd >= 0 && dup2(a->stderr_fd, STDERR_FILENO) < 0)
                init_fail(a->sync_fd, errno, "attach the stderr pipe", NULL);

        /* SECURITY: nothing of the supervisor's descriptors reaches init's
         * children except stdio and the sync socket. */
        if (a->sync_fd > 3)
                (void)close_range(3, (unsigned)a->sync_fd - 1, 0);
        (void)close_range((unsigned)a->sync_fd + 1, ~0U, 0);

        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        for (size_t i = 0; i < ELEMENTSOF(forwarded_signals); i++) {
                sigaddset(&mask, forwarded_signals[i]);
                (void)sigaction(forwarded_signals[i], &sa, NULL);
        }
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                init_fail(a->sync_fd, errno, "block signals", NULL);

        wait_for_cgroup(a);
        if (a->policy->n_secrets > 0) {
                _cleanup_close_ int ca = -EBADF;
                uint64_t hash = 0;

                recv_ca_bundle(a->sync_fd, &ca, &hash);
                r = rootfs_install_ca_bundle(ca, hash, &err);
                if (r < 0)
                        init_fail(a->sync_fd, err.errnum, "install the CA bundle", err.msg);
        }
        become_image_user(&args);
        a = &args;
        confine_self(a);
        if (a->persistent)
                serve(a, &mask, fallbacks);

        cmd = fork();
        if (cmd < 0)
                init_fail(a->sync_fd, errno, "fork the command", NULL);
        if (cmd == 0)
                exec_command(a);
        supervise(a, cmd, &mask, fallbacks);
}
