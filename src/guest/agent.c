/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch-agent: PID 1 of a hutch microVM (docs/vm.md, docs/architecture.md §2).
 *
 * Linked statically and put at /init of the initramfs hutch builds. It
 * mounts the kernel filesystems, loads the modules of /modules (in name
 * order, with their parameters from the kernel command line), opens the
 * virtio-serial port AGENT_PORT_NAME and says HELLO. From then on it only
 * answers the host (agent-protocol.h): SETUP builds the command's root
 * under /sbx (9p shares, tmpfs, a minimal /dev: agent-setup.c), EXEC runs
 * a command there
 * (any number at once, one per channel; or the file operation builtin of
 * src/shared/file-op.h, confined as a command is).
 *
 * SECURITY: the command runs behind the namespace backend's wall
 * (docs/vm.md, "The guest's own wall"): chrooted into /sbx, in the
 * sandbox's pid, mount, IPC and UTS namespaces (its /proc is the sandbox's,
 * /proc/sys read-only), as the root of the sandbox's user namespace, whose
 * ids are unprivileged guest ids the host names, with no capabilities
 * (bounding and ambient sets cleared), no_new_privs, the namespace
 * backend's seccomp program, and in a cgroup of its own with the memory
 * and pids limits. The kernel's usermode helpers are off from boot. It
 * never sees the agent's /dev (the virtio port) or /proc/1, and the agent
 * is not dumpable. A frame that breaks the protocol ends the agent, and
 * with it the VM (panic=-1 and -no-reboot). */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <linux/securebits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent-protocol.h"
#include "agent.h"
#include "exec-util.h"
#include "fd-util.h"
#include "file-op.h"
#include "macro.h"
#include "parse-util.h"
#include "seccomp/seccomp-bpf.h"
#include "signal-util.h"
#include "time-util.h"

#define PORT_WAIT_MS 20000
#define OUTPUT_DRAIN_MS 2000

static int port_fd = -EBADF; /* the virtio port: the agent's only peer */

void die(const char *what, int err) {
        (void)dprintf(STDERR_FILENO, "hutch-agent: %s: %s\n", what, strerror(err));
        (void)reboot(RB_POWER_OFF);
        _exit(1);
}

static void console_setup(void) {
        int fd = open("/dev/console", O_RDWR | O_NOCTTY | O_CLOEXEC);

        if (fd < 0)
                return;
        (void)dup2(fd, STDIN_FILENO);
        (void)dup2(fd, STDOUT_FILENO);
        (void)dup2(fd, STDERR_FILENO);
        (void)close(fd);
}

/* cgroup2's favordynmods (Linux 6.0): moving a process into a cgroup
 * (each EXEC) takes the cgroup threadgroup lock for writing, which by
 * default waits for an RCU grace period: 5-20 ms under TCG. With it, fork
 * and exit pay a little instead. Older kernels (--vm-kernel) refuse the
 * option: they mount without it. */
static void mount_kernel_filesystems(void) {
        static const struct {
                const char *fstype, *target, *options, *fallback;
        } m[] = {
                {"devtmpfs", "/dev", "mode=0755", NULL},
                {"proc", "/proc", NULL, NULL},
                {"sysfs", "/sys", NULL, NULL},
                {"cgroup2", "/sys/fs/cgroup", "favordynmods", ""},
                {"tmpfs", "/run", "mode=0700,size=64m", NULL},
        };

        for (size_t i = 0; i < ELEMENTSOF(m); i++) {
                int r;

                (void)mkdir(m[i].target, 0755);
                r = mount(m[i].fstype, m[i].target, m[i].fstype, MS_NOSUID | MS_NOEXEC,
                          m[i].options);
                if (r < 0 && errno == EINVAL && m[i].fallback)
                        r = mount(m[i].fstype, m[i].target, m[i].fstype, MS_NOSUID | MS_NOEXEC,
                                  m[i].fallback);
                if (r < 0 && errno != EBUSY)
                        die(m[i].target, errno);
        }
        console_setup();
}

/* "virtio_mmio.device=..." on the command line is for the module
 * virtio_mmio: collects "@mod.K=V" entries as "K=V K=V". */
static void module_params(const char *cmdline, const char *mod, char *out, size_t size) {
        size_t n = strlen(mod), used = 0;
        const char *p = cmdline;

        out[0] = '\0';
        while (*p) {
                size_t len = strcspn(p, " \n");

                if (len > n + 1 && strncmp(p, mod, n) == 0 && p[n] == '.' &&
                    used + (len - n - 1) + 2 < size) {
                        (void)snprintf(out + used, size - used, "%s%.*s", used ? " " : "",
                                       (int)(len - n - 1), p + n + 1);
                        used = strlen(out);
                }
                p += len;
                while (*p == ' ' || *p == '\n')
                        p++;
        }
}

/* Loads /modules/NN-name.ko in name order (hutch numbered them after
 * modules.dep, dependencies first). */
static void load_modules(void) {
        _cleanup_free_ char *cmdline = NULL;
        struct dirent **list = NULL;
        int n;

        if (read_full_file("/proc/cmdline", 65536, &cmdline) < 0)
                cmdline = NULL;
        n = scandir("/modules", &list, NULL, alphasort);
        for (int i = 0; i < n; i++) {
                char mod[256], params[1024], path[512];
                const char *name = list[i]->d_name, *dash = strchr(name, '-');
                size_t len;
                int fd;

                if (name[0] == '.' || !dash || !strstr(name, ".ko")) {
                        free(list[i]);
                        continue;
                }
                len = MIN((size_t)(strstr(name, ".ko") - dash - 1), sizeof(mod) - 1);
                memcpy(mod, dash + 1, len);
                mod[len] = '\0';
                for (char *c = mod; *c; c++)
                        if (*c == '-')
                                *c = '_';
                module_params(cmdline ? cmdline : "", mod, params, sizeof(params));
                (void)snprintf(path, sizeof(path), "/modules/%s", name);
                fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0 || (syscall(SYS_finit_module, fd, params, 0) < 0 && errno != EEXIST))
                        (void)dprintf(STDERR_FILENO, "hutch-agent: module %s: %s\n", mod,
                                      strerror(errno));
                (void)safe_close(fd);
                free(list[i]);
        }
        free(list);
}

/* SECURITY (issue 26): the kernel runs its usermode helpers as full guest
 * root in the guest's first namespaces: a core_pattern pipe
 * ("|/proc/%P/root/tmp/x" ran a command's file so, and it read the
 * agent's port), modprobe on a request for a missing module, poweroff_cmd,
 * the uevent helper. All off before the first frame (so in every template
 * too): cores are plain files named "core" (and a command's RLIMIT_CORE is
 * 0), no module loads after the agent's own (modules_disabled, which
 * cannot be undone), and the helper paths are empty. What this kernel does
 * not have (no CONFIG_UEVENT_HELPER, no modules) is skipped; any other
 * failure ends the VM: this wall is never silently missing. */
static void usermode_helpers_off(void) {
        static const struct {
                const char *path, *value;
        } w[] = {
                {"/proc/sys/kernel/core_pattern", "core\n"},
                {"/proc/sys/fs/suid_dumpable", "0\n"},
                {"/proc/sys/kernel/poweroff_cmd", "\n"},
                {"/proc/sys/kernel/modprobe", "\n"},
                {"/sys/kernel/uevent_helper", "\n"},
                {"/proc/sys/kernel/modules_disabled", "1\n"},
        };

        for (size_t i = 0; i < ELEMENTSOF(w); i++) {
                int r = write_string_file(w[i].path, w[i].value);

                if (r < 0 && r != -ENOENT)
                        die(w[i].path, -r);
        }
}

void sleep_ms(long ms) {
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};

        (void)nanosleep(&ts, NULL);
}

/* The port's device node: /sys/class/virtio-ports/vportNpM/name holds
 * its name, devtmpfs makes /dev/vportNpM. */
static int open_port(void) {
        for (long waited = 0; waited < PORT_WAIT_MS; waited += 5) {
                _cleanup_(closedirp) DIR *d = opendir("/sys/class/virtio-ports");
                struct dirent *de;

                while (d && (de = readdir(d))) {
                        _cleanup_free_ char *name = NULL;
                        char path[300];
                        int fd;

                        if (de->d_name[0] == '.')
                                continue;
                        (void)snprintf(path, sizeof(path), "/sys/class/virtio-ports/%s/name",
                                       de->d_name);
                        if (read_full_file(path, 256, &name) < 0)
                                continue;
                        name[strcspn(name, "\n")] = '\0';
                        if (strcmp(name, AGENT_PORT_NAME) != 0)
                                continue;
                        (void)snprintf(path, sizeof(path), "/dev/%s", de->d_name);
                        fd = open(path, O_RDWR | O_CLOEXEC | O_NOCTTY);
                        if (fd >= 0)
                                return fd;
                }
                sleep_ms(5);
        }
        return -ETIMEDOUT;
}

static unsigned exec_count = 0;

/* ---- EXEC ---- */

typedef struct Buf {
        struct Buf *next;
        size_t len, off;
        unsigned char data[];
} Buf;

/* One command, on its channel (agent-protocol.h). */
typedef struct Exec {
        uint8_t chan;
        bool builtin;        /* the file operation builtin (file-op.h), not a program */
        bool conn;           /* a CONNECT's TCP connection, not a command: in and out[0] */
        bool connecting;     /* its STARTED or ERROR waits for the connect's end */
        int pty;             /* the master of its terminal (in and out[0]), or -EBADF */
        unsigned rows, cols; /* the terminal's size asked for ("t:" entry) */
        char user[256];      /* "u:" entry: the user to become (agent-user.c), or "" */
        /* "k:HOME", "k:USER": the policy sets them, the user does not */
        bool keep_home, keep_user;
        pid_t pid;
        int out[2]; /* read ends of stdout, stderr */
        int in;     /* write end of stdin, -EBADF once closed */
        bool in_eof;
        Buf *queue;
        size_t queued;        /* stdin bytes in the queue */
        uint64_t in_unacked;  /* stdin bytes passed on or dropped, not acknowledged yet */
        uint64_t out_unacked; /* output bytes sent, not acknowledged by the host yet */
        bool exited;
        int status;
        int64_t drain_deadline; /* once exited: when to give up on its output */
        char cgroup[96];        /* the cgroup.procs file of its cgroup */
} Exec;

/* The commands running, by channel. */
static Exec *execs[AGENT_MAX_EXECS];
/* The host's frames, as they come (64 KiB: not on the stack). */
static AgentReader host_reader;

/* Cgroups of ended commands still being emptied (the kill works
 * asynchronously), removed when they are: a directory and until when to
 * keep trying. */
static struct {
        char dir[64];
        int64_t until;
} doomed[AGENT_MAX_EXECS];
static size_t n_doomed;

static void send_frame(AgentMsg type, uint8_t chan, const void *payload, size_t len) {
        if (agent_frame_write(port_fd, type, chan, payload, len) < 0)
                die("write to the host", errno);
}

static void send_error(uint8_t chan, const Fail *f) {
        if (agent_frame_write_error(port_fd, chan, f->err, f->step, f->msg) < 0)
                die("write to the host", errno);
}

static void send_le32(AgentMsg type, uint8_t chan, uint32_t v) {
        unsigned char b[4];

        agent_put_le32(b, v);
        send_frame(type, chan, b, sizeof(b));
}

/* In the command's child (spawn_command()): reports @what on @errfd and
 * exits. */
_noreturn_ static void child_fail(int errfd, int err, const char *what) {
        unsigned char b[4];

        agent_put_le32(b, (uint32_t)err);
        /* Exiting either way: a lost report still reads as a failure
         * (the parent sees the pipe close early). */
        if (loop_write(errfd, b, sizeof(b)) >= 0)
                (void)loop_write(errfd, what, strlen(what));
        _exit(125);
}

/* child_fail() with the detail the ERROR says instead of the working
 * directory: "what NUL detail". */
_noreturn_ static void child_fail_detail(int errfd, int err, const char *what, const char *detail) {
        unsigned char b[4];

        agent_put_le32(b, (uint32_t)err);
        if (loop_write(errfd, b, sizeof(b)) >= 0 && loop_write(errfd, what, strlen(what) + 1) >= 0)
                (void)loop_write(errfd, detail, strlen(detail));
        _exit(125);
}

/* SECURITY (issue 15, item 5; issue 26): the command's wall in the guest,
 * what the namespace backend's init applies. It joins the sandbox's
 * namespaces (agent-setup.c's setup_namespaces(): its pid namespace is
 * the agent's children's already), enters its root, and becomes the root
 * of the sandbox's user namespace: guest ids setup.uid and setup.gid,
 * never 0, so that nothing the guest kernel checks against uid 0 (the
 * writable files of /proc/sys among them) is the command's. Then no
 * capability (bounding and ambient sets empty; a persistent image
 * sandbox's root keeps AGENT_PACKAGE_CAPS over its own namespace's ids),
 * no_new_privs, no core dump. The seccomp filter comes last, in child_main(). */
static void enter_sandbox(const Exec *x, int errfd, char ***envp) {
        struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
        struct __user_cap_data_struct data[2] = {};
        const struct rlimit no_core = {};
        uint64_t keep = setup.package_caps ? AGENT_PACKAGE_CAPS : 0;

        if (setns(sandbox_ns.ipc, CLONE_NEWIPC) < 0 || setns(sandbox_ns.uts, CLONE_NEWUTS) < 0 ||
            setns(sandbox_ns.mnt, CLONE_NEWNS) < 0)
                child_fail(errfd, errno, "enter the sandbox's namespaces");
        if (chroot(SBX) < 0 || chdir("/") < 0)
                child_fail(errfd, errno, "enter the sandbox root");
        if (setrlimit(RLIMIT_CORE, &no_core) < 0)
                child_fail(errfd, errno, "set the core size limit");
        if (setgroups(0, NULL) < 0)
                child_fail(errfd, errno, "drop the supplementary groups");
        if (setns(sandbox_ns.user, CLONE_NEWUSER) < 0)
                child_fail(errfd, errno, "enter the sandbox's user namespace");
        if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
                child_fail(errfd, errno, "change to the command's uid");
        /* With the package set kept (caps_drop_all_but()'s securebits):
         * uid 0 keeps it across exec, a setuid() away from 0 (apt's drop
         * to _apt) loses it, no ambient raise; locked. */
        if (keep && prctl(PR_SET_SECUREBITS,
                          SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED |
                                  SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED |
                                  SECBIT_KEEP_CAPS_LOCKED,
                          0, 0, 0) < 0)
                child_fail(errfd, errno, "lock the securebits");
        for (int c = 0; c <= CAP_LAST_CAP; c++)
                if (!(keep & (UINT64_C(1) << c)) && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 &&
                    errno != EINVAL)
                        child_fail(errfd, errno, "drop the bounding set");
        (void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
        /* --user or the image's User (docs/vm.md, "Images"): while the
         * command is still its namespace's root with the bounding set
         * dropped. A uid other than 0 has no capability left after it. */
        if (x->user[0]) {
                char msg[512];
                uid_t uid = 0;
                int r = agent_user_become(x->user, x->keep_home, x->keep_user, envp, &uid, msg,
                                          sizeof(msg));

                if (r < 0)
                        child_fail_detail(errfd, -r, AGENT_STEP_USER, msg);
                if (uid != 0)
                        keep = 0;
        }
        data[0].effective = data[0].permitted = (uint32_t)keep;
        data[1].effective = data[1].permitted = (uint32_t)(keep >> 32);
        if (syscall(SYS_capset, &hdr, data) < 0)
                child_fail(errfd, errno, "drop the capabilities");
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                child_fail(errfd, errno, "set no_new_privs");
}

/* The namespace backend's seccomp program (src/lib/seccomp, generated at
 * build time into seccomp-bpf.h and embedded here as data), loaded as its
 * seccomp_filter_load_default() loads it: no_new_privs is set already. */
static int seccomp_load(void) {
        struct sock_fprog prog = {
                .len = (unsigned short)ELEMENTSOF(seccomp_default_bpf),
                .filter = (struct sock_filter *)seccomp_default_bpf,
        };

        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
                return negative_errno();
        return 0;
}

/* In a fork()ed child that runs the agent's code: the other commands'
 * stdin (queued, and in the host's frames not yet handled) is not its
 * business. */
static void scrub_commands_data(void) {
        explicit_bzero(&host_reader, sizeof(host_reader));
        for (size_t c = 0; c < AGENT_MAX_EXECS; c++)
                for (Buf *b = execs[c] ? execs[c]->queue : NULL; b; b = b->next)
                        explicit_bzero(b->data, b->len);
}

_noreturn_ static void child_main(Exec *x, char **argv, char **envp, const char *cwd,
                                  int pipes[3][2], int errfd, int ptyfd) {
        char pid[32];
        int r;

        signals_reset_default();
        if (setsid() < 0)
                child_fail(errfd, errno, "create a session");
        (void)snprintf(pid, sizeof(pid), "%d", (int)getpid());
        r = write_string_file(x->cgroup, pid);
        if (r < 0)
                child_fail(errfd, -r, "enter the command's cgroup");
        if (dup2(pipes[0][0], STDIN_FILENO) < 0 || dup2(pipes[1][1], STDOUT_FILENO) < 0 ||
            dup2(pipes[2][1], STDERR_FILENO) < 0)
                child_fail(errfd, errno, "set up stdio");
        enter_sandbox(x, errfd, &envp);
        if (chdir(cwd) < 0)
                child_fail(errfd, errno, "enter the working directory");
        if (x->rows > 0) {
                r = agent_pty_attach(ptyfd, x->rows, x->cols);
                if (r < 0)
                        child_fail(errfd, -r, "open the command's terminal");
        }
        r = seccomp_load();
        if (r < 0)
                child_fail(errfd, -r, "load the seccomp filter");
        if (x->builtin) {
                /* Confined as a command is; its status is its errno. It
                 * runs without an exec: the agent's descriptors (the port,
                 * the other commands' pipes, its own stdin's write end)
                 * and its memory's copy of the other commands' data would
                 * stay in it but for this. */
                if (close_range(3, ~0U, 0) < 0)
                        _exit(EIO);
                scrub_commands_data();
                _exit(file_op_main(cwd, argv));
        }
        exec_or_exit(argv, envp);
}

/* Starts child_main() with fork(). Not vfork(), which saved 0.5-1 ms of
 * an exec under TCG: a process that shares its memory with another may not
 * enter a user namespace (setns() fails with EINVAL), and the command's
 * user namespace is the sandbox's (enter_sandbox()). The child lands in the
 * sandbox's pid namespace (the agent's children's). */
static pid_t spawn_command(Exec *x, char **argv, char **envp, const char *cwd, int pipes[3][2],
                           int errfd, int ptyfd) {
        pid_t pid = fork();

        if (pid == 0)
                child_main(x, argv, envp, cwd, pipes, errfd, ptyfd);
        return pid;
}

/* A command's cgroup, empty, with the limits of @memory and @pids (0: none). */
typedef struct Cgroup {
        char dir[48];
        uint64_t memory, pids;
} Cgroup;

/* The next command's cgroup, made after a command's EXIT was sent ("" when
 * there is none).
 * SECURITY: it is a new cgroup, never used: its counters (oom_kill, pids
 * max, usage_usec, memory.peak) start at zero, so an EXIT reports its own
 * command only. Nothing joins it before its command: the commands do not
 * see /sys/fs/cgroup. */
static Cgroup next_cgroup;

static int cgroup_make(Cgroup *c, Fail *f) {
        char path[96], val[32];
        int r;

        *c = (Cgroup){.memory = setup.memory, .pids = setup.pids};
        (void)snprintf(c->dir, sizeof(c->dir), "/sys/fs/cgroup/cmd-%u", ++exec_count);
        if (mkdir(c->dir, 0755) < 0)
                return fail(f, errno, "create the command's cgroup", c->dir);
        if (c->memory) {
                (void)snprintf(path, sizeof(path), "%s/memory.max", c->dir);
                (void)snprintf(val, sizeof(val), "%llu", (unsigned long long)c->memory);
                r = write_string_file(path, val);
                if (r < 0) {
                        (void)rmdir(c->dir);
                        return fail(f, -r, "set the memory limit", NULL);
                }
                (void)snprintf(path, sizeof(path), "%s/memory.swap.max", c->dir);
                (void)write_string_file(path, "0");
        }
        if (c->pids) {
                (void)snprintf(path, sizeof(path), "%s/pids.max", c->dir);
                (void)snprintf(val, sizeof(val), "%llu", (unsigned long long)c->pids);
                r = write_string_file(path, val);
                if (r < 0) {
                        (void)rmdir(c->dir);
                        return fail(f, -r, "set the pids limit", NULL);
                }
        }
        return 0;
}

/* Makes next_cgroup ready; a failure is left for cgroup_create() to
 * report. */
static void cgroup_prepare(void) {
        Fail f = {};

        if (!next_cgroup.dir[0] && cgroup_make(&next_cgroup, &f) < 0)
                next_cgroup.dir[0] = '\0';
}

/* The prepared cgroup when its limits are still the sandbox's, else a new
 * one: 0.5 ms less between EXEC and the command's start. */
static int cgroup_create(Exec *x, Fail *f) {
        Cgroup c = next_cgroup;
        int r;

        next_cgroup.dir[0] = '\0';
        if (c.dir[0] && (c.memory != setup.memory || c.pids != setup.pids)) {
                (void)rmdir(c.dir);
                c.dir[0] = '\0';
        }
        if (!c.dir[0]) {
                r = cgroup_make(&c, f);
                if (r < 0)
                        return r;
        }
        (void)snprintf(x->cgroup, sizeof(x->cgroup), "%s/cgroup.procs", c.dir);
        return 0;
}

/* "KEY VALUE" lines of a cgroup file: the value of @key, or 0. */
static uint64_t cgroup_key(const char *file, const char *key) {
        _cleanup_free_ char *text = NULL;
        size_t n = strlen(key);

        if (read_full_file(file, 65536, &text) < 0)
                return 0;
        for (char *line = text; line && *line;
             line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
                uint64_t v;
                char num[32];

                if (strncmp(line, key, n) != 0 || line[n] != ' ')
                        continue;
                (void)snprintf(num, sizeof(num), "%.*s", (int)strcspn(line + n + 1, "\n"),
                               line + n + 1);
                return safe_atou64(num, &v) < 0 ? 0 : v;
        }
        return 0;
}

/* The directory of @x's cgroup into @dir. */
static void exec_cgroup_dir(const Exec *x, char *dir, size_t size) {
        (void)snprintf(dir, size, "%.*s", (int)(strlen(x->cgroup) - strlen("/cgroup.procs")),
                       x->cgroup);
}

/* Removes the cgroups of ended commands that have emptied; gives up on
 * one after its time (it stays, empty or not). */
static void doomed_sweep(void) {
        int64_t now = (int64_t)time_monotonic_ms();

        for (size_t i = 0; i < n_doomed;) {
                if ((rmdir(doomed[i].dir) < 0 && errno == EBUSY) && now < doomed[i].until) {
                        i++;
                        continue;
                }
                doomed[i] = doomed[--n_doomed];
        }
}

static void stdin_drop_queue(Exec *x) {
        while (x->queue) {
                Buf *b = x->queue;

                x->queue = b->next;
                x->in_unacked += b->len - b->off;
                free(b);
        }
        x->queued = 0;
}

/* The end of @x: its EXIT (after all its output), then its cgroup and
 * the channel are freed. */
static void exec_finish(Exec *x) {
        char dir[64], path[96];
        AgentExit e = {.status = x->status};
        unsigned char buf[AGENT_EXIT_SIZE];
        _cleanup_free_ char *peak = NULL;
        uint64_t v;

        for (int i = 0; i < 2; i++)
                x->out[i] = safe_close(x->out[i]);
        x->in = safe_close(x->in);
        x->pty = safe_close(x->pty);
        stdin_drop_queue(x);
        if (x->conn) {
                /* No process, no cgroup. */
                agent_exit_encode(&e, buf);
                send_frame(AGENT_MSG_EXIT, x->chan, buf, sizeof(buf));
                execs[x->chan] = NULL;
                free(x);
                return;
        }
        exec_cgroup_dir(x, dir, sizeof(dir));
        (void)snprintf(path, sizeof(path), "%s/memory.events", dir);
        if (cgroup_key(path, "oom_kill") > 0)
                e.flags |= AGENT_EXIT_OOM;
        (void)snprintf(path, sizeof(path), "%s/pids.events", dir);
        if (cgroup_key(path, "max") > 0)
                e.flags |= AGENT_EXIT_PIDS;
        (void)snprintf(path, sizeof(path), "%s/cpu.stat", dir);
        e.cpu_usec = cgroup_key(path, "usage_usec");
        (void)snprintf(path, sizeof(path), "%s/memory.peak", dir);
        if (read_full_file(path, 64, &peak) >= 0) {
                peak[strcspn(peak, "\n")] = '\0';
                if (safe_atou64(peak, &v) >= 0)
                        e.mem_peak_bytes = v;
        }
        agent_exit_encode(&e, buf);
        send_frame(AGENT_MSG_EXIT, x->chan, buf, sizeof(buf));
        /* Removing the cgroup and making the next one need not delay the
         * EXIT. cgroup.kill works asynchronously: the killed may still be
         * exiting, and rmdir refuses a populated cgroup (they would pile
         * up): retried for 1 s. */
        if (rmdir(dir) < 0 && errno == EBUSY && n_doomed < ELEMENTSOF(doomed)) {
                (void)snprintf(doomed[n_doomed].dir, sizeof(doomed[n_doomed].dir), "%s", dir);
                doomed[n_doomed++].until = (int64_t)time_monotonic_ms() + 1000;
        }
        execs[x->chan] = NULL;
        free(x);
        cgroup_prepare();
}

/* Kills everything left in the command's cgroup (daemons it started), as
 * the end of a pid namespace does in the namespace backend. */
static void exec_kill_all(Exec *x) {
        char dir[64], path[96];

        exec_cgroup_dir(x, dir, sizeof(dir));
        (void)snprintf(path, sizeof(path), "%s/cgroup.kill", dir);
        (void)write_string_file(path, "1");
}

/* Acknowledges the stdin taken, once there is enough of it to matter
 * (agent-protocol.h). */
static void stdin_ack(Exec *x) {
        if (x->in_unacked < AGENT_ACK_MIN)
                return;
        send_le32(AGENT_MSG_ACK, x->chan, (uint32_t)x->in_unacked);
        x->in_unacked = 0;
}

/* The end of @x's input: a connection's half-close goes on to its peer
 * (its other direction is out[0], a descriptor of its own). */
static void stdin_close(Exec *x) {
        if (x->conn && x->in >= 0)
                (void)shutdown(x->in, SHUT_WR);
        x->in = safe_close(x->in);
}

static void stdin_push(Exec *x, const void *data, size_t len) {
        Buf *b, **tail;

        if (len == 0) {
                /* A terminal has no end of input. */
                if (x->pty >= 0)
                        return;
                x->in_eof = true;
                if (!x->queue)
                        stdin_close(x);
                return;
        }
        /* The host keeps to the window: this is bounded. */
        if (x->queued + len > AGENT_WINDOW)
                die("the host overran a command's stdin window", EPROTO);
        if (x->in < 0) {
                /* Nobody reads it any more: dropped, and acknowledged. */
                x->in_unacked += len;
                stdin_ack(x);
                return;
        }
        b = malloc(sizeof(Buf) + len);
        if (!b) {
                /* The guest's memory is short (a command took it): this
                 * command's stdin loses a piece, nothing else does. */
                x->in_unacked += len;
                stdin_ack(x);
                return;
        }
        *b = (Buf){.len = len};
        memcpy(b->data, data, len);
        for (tail = &x->queue; *tail; tail = &(*tail)->next)
                ;
        *tail = b;
        x->queued += len;
}

static void stdin_flush(Exec *x) {
        while (x->queue) {
                Buf *b = x->queue;
                ssize_t n = x->conn ? send(x->in, b->data + b->off, b->len - b->off, MSG_NOSIGNAL)
                                    : write(x->in, b->data + b->off, b->len - b->off);

                if (n < 0) {
                        if (errno == EAGAIN || errno == EINTR)
                                break;
                        /* EPIPE: the command closed its stdin. */
                        stdin_drop_queue(x);
                        stdin_close(x);
                        break;
                }
                b->off += (size_t)n;
                x->in_unacked += (size_t)n;
                if (b->off < b->len)
                        break;
                x->queue = b->next;
                x->queued -= b->len;
                free(b);
        }
        if (!x->queue && x->in_eof)
                stdin_close(x);
        stdin_ack(x);
}

/* One read of output stream @i, within the window. */
static void relay_output(Exec *x, int i) {
        unsigned char buf[AGENT_CHUNK];
        size_t room = (size_t)MIN((uint64_t)sizeof(buf), AGENT_WINDOW - x->out_unacked);
        ssize_t n;

        /* The other stream, read in the same round, may have filled the
         * window (and a read of 0 bytes would look like the end). */
        if (room == 0)
                return;
        n = read(x->out[i], buf, room);

        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n <= 0) {
                x->out[i] = safe_close(x->out[i]);
                /* A connection's guest side half-closed (or broke): an
                 * empty STDOUT says so (protocol 1.4); the host's bytes
                 * still go the other way until the host's own end. */
                if (x->conn)
                        send_frame(AGENT_MSG_STDOUT, x->chan, NULL, 0);
                return;
        }
        x->out_unacked += (uint64_t)n;
        /* Output still coming: the drain's bound counts from the last. */
        if (x->exited)
                x->drain_deadline = (int64_t)time_monotonic_ms() + OUTPUT_DRAIN_MS;
        send_frame(i == 0 ? AGENT_MSG_STDOUT : AGENT_MSG_STDERR, x->chan, buf, (size_t)n);
}

static void reap(void) {
        int status;
        pid_t p;

        while ((p = waitpid(-1, &status, WNOHANG)) > 0)
                for (size_t c = 0; c < AGENT_MAX_EXECS; c++) {
                        Exec *x = execs[c];

                        if (!x || x->pid != p || x->exited)
                                continue;
                        x->exited = true;
                        x->status = status;
                        x->drain_deadline = (int64_t)time_monotonic_ms() + OUTPUT_DRAIN_MS;
                        exec_kill_all(x);
                        break;
                }
}

static void strv_free_simple(char **l) {
        for (char **p = l; p && *p; p++)
                free(*p);
        free(l);
}

static int start_exec(Exec *x, const void *payload, size_t len, Fail *f) {
        char **argv = NULL, **envp = NULL, *cwd = NULL;
        size_t na = 0, ne = 0, pos = 0;
        int pipes[3][2] = {{-1, -1}, {-1, -1}, {-1, -1}}, err[2] = {-1, -1}, pty[2] = {-1, -1};
        const char *s;
        unsigned char ebuf[4 + 1024];
        ssize_t n;
        int r = 0;

        if (!setup.done)
                return fail(f, EPROTO, "run the command", "EXEC before SETUP");
        while ((s = agent_payload_next(payload, len, &pos))) {
                char ***v = s[0] == 'a' ? &argv : s[0] == 'e' ? &envp : NULL;
                size_t *c = s[0] == 'a' ? &na : &ne;

                if (strncmp(s, "c:", 2) == 0) {
                        free(cwd);
                        cwd = strdup(s + 2);
                        continue;
                }
                if (strncmp(s, "u:", 2) == 0) {
                        if (!s[2] || strlen(s + 2) >= sizeof(x->user)) {
                                r = fail(f, EINVAL, "parse the command", "the user");
                                goto out;
                        }
                        (void)snprintf(x->user, sizeof(x->user), "%s", s + 2);
                        continue;
                }
                if (strcmp(s, "k:HOME") == 0 || strcmp(s, "k:USER") == 0) {
                        *(s[2] == 'H' ? &x->keep_home : &x->keep_user) = true;
                        continue;
                }
                if (strncmp(s, "t:", 2) == 0) {
                        if (sscanf(s + 2, "%u:%u", &x->rows, &x->cols) != 2 || x->rows == 0 ||
                            x->rows > 65535 || x->cols == 0 || x->cols > 65535) {
                                r = fail(f, EINVAL, "parse the command", s);
                                goto out;
                        }
                        continue;
                }
                if (!v || s[1] != ':') {
                        r = fail(f, EINVAL, "parse the command", s);
                        goto out;
                }
                char **nv = realloc(*v, (*c + 2) * sizeof(char *));
                if (!nv || !(nv[*c] = strdup(s + 2))) {
                        *v = nv ? nv : *v;
                        r = fail(f, ENOMEM, "parse the command", NULL);
                        goto out;
                }
                nv[++*c] = NULL;
                *v = nv;
        }
        if (!argv || !cwd) {
                r = fail(f, EINVAL, "parse the command", "no argv or working directory");
                goto out;
        }
        if (!envp)
                envp = calloc(1, sizeof(char *));
        x->builtin = strcmp(argv[0], FILE_OP_ARGV0) == 0;
        r = cgroup_create(x, f);
        if (r < 0)
                goto out;
        /* The command's, as pipes it made itself would be: it may open
         * them again (/dev/stderr is /proc/self/fd/2), which their mode
         * (0600) allows their owner only. */
        for (int i = 0; i < 3; i++)
                if (pipe2(pipes[i], O_CLOEXEC) < 0 ||
                    fchown(pipes[i][0], setup.uid, setup.gid) < 0) {
                        r = fail(f, errno, "create the command's pipes", NULL);
                        goto out;
                }
        if (pipe2(err, O_CLOEXEC) < 0) {
                r = fail(f, errno, "create the command's pipes", NULL);
                goto out;
        }
        if (x->rows > 0 && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pty) < 0) {
                r = fail(f, errno, "create the command's terminal channel", NULL);
                goto out;
        }
        x->pid = spawn_command(x, argv, envp, cwd, pipes, err[1], pty[1]);
        if (x->pid < 0) {
                r = fail(f, errno, "fork the command", NULL);
                goto out;
        }
        err[1] = safe_close(err[1]);
        pty[1] = safe_close(pty[1]);
        /* Before the command execs (its child sends the master first);
         * one that failed before that closed the channel. */
        if (x->rows > 0 && agent_pty_recv(pty[0], &x->pty) < 0)
                x->pty = -EBADF;
        n = loop_read(err[0], ebuf, sizeof(ebuf) - 1);
        if (n >= 4) {
                size_t what_len;

                ebuf[n] = '\0';
                (void)waitpid(x->pid, NULL, 0);
                x->pid = 0;
                /* "what", or "what NUL detail" (child_fail_detail()). */
                what_len = strlen((const char *)ebuf + 4);
                r = fail(f, (int)agent_get_le32(ebuf), (const char *)ebuf + 4,
                         4 + what_len < (size_t)n ? (const char *)ebuf + 5 + what_len : cwd);
                goto out;
        }
        if (x->rows > 0) {
                /* The master is the terminal's both directions. */
                if (x->pty < 0) {
                        r = fail(f, EPROTO, "open the command's terminal", NULL);
                        (void)kill(x->pid, SIGKILL);
                        (void)waitpid(x->pid, NULL, 0);
                        x->pid = 0;
                        goto out;
                }
                x->in = fcntl(x->pty, F_DUPFD_CLOEXEC, 3);
                x->out[0] = fcntl(x->pty, F_DUPFD_CLOEXEC, 3);
                if (x->in < 0 || x->out[0] < 0) {
                        r = fail(f, errno, "open the command's terminal", NULL);
                        (void)kill(x->pid, SIGKILL);
                        (void)waitpid(x->pid, NULL, 0);
                        x->pid = 0;
                        goto out;
                }
                goto out;
        }
        x->in = pipes[0][1];
        pipes[0][1] = -1;
        for (int i = 0; i < 2; i++) {
                x->out[i] = pipes[1 + i][0];
                pipes[1 + i][0] = -1;
                (void)fcntl(x->out[i], F_SETFL, O_NONBLOCK);
        }
        (void)fcntl(x->in, F_SETFL, O_NONBLOCK);
out:
        if (r < 0 && x->cgroup[0]) {
                char dir[64];

                /* Empty: the child, if there was one, is reaped. */
                exec_cgroup_dir(x, dir, sizeof(dir));
                (void)rmdir(dir);
        }
        for (int i = 0; i < 3; i++)
                for (int j = 0; j < 2; j++)
                        (void)safe_close(pipes[i][j]);
        (void)safe_close(err[0]);
        (void)safe_close(err[1]);
        (void)safe_close(pty[0]);
        (void)safe_close(pty[1]);
        strv_free_simple(argv);
        strv_free_simple(envp);
        free(cwd);
        return r;
}

/* EXEC on @chan: STARTED, or ERROR. */
static void handle_exec(uint8_t chan, const void *payload, size_t len) {
        Fail f = {};
        Exec *x;

        if (execs[chan]) {
                (void)fail(&f, EBUSY, "run the command", "its channel is in use");
                send_error(chan, &f);
                return;
        }
        x = malloc(sizeof(Exec));
        if (!x) {
                (void)fail(&f, ENOMEM, "run the command", NULL);
                send_error(chan, &f);
                return;
        }
        *x = (Exec){.chan = chan, .out = {-EBADF, -EBADF}, .in = -EBADF, .pty = -EBADF};
        if (start_exec(x, payload, len, &f) < 0) {
                (void)safe_close(x->pty);
                (void)safe_close(x->in);
                (void)safe_close(x->out[0]);
                free(x);
                send_error(chan, &f);
                return;
        }
        execs[chan] = x;
        send_le32(AGENT_MSG_STARTED, chan, (uint32_t)x->pid);
}

/* CONNECT on @chan (agent-protocol.h): a connection to 127.0.0.1:PORT in
 * the guest, relayed as a command's stdin and stdout are. The agent makes
 * it in its own network namespace, which is the commands' (the VM is the
 * sandbox's network boundary). */
static void handle_connect(uint8_t chan, const void *payload, size_t len) {
        uint32_t port = len == 4 ? agent_get_le32(payload) : 0;
        char what[64];
        Fail f = {};
        Exec *x;
        int fd = -EBADF, r;

        if (!setup.done || execs[chan] || port < 1 || port > 65535) {
                (void)fail(&f, execs[chan] ? EBUSY : EINVAL, "connect",
                           !setup.done   ? "CONNECT before SETUP"
                           : execs[chan] ? "its channel is in use"
                                         : "invalid port");
                send_error(chan, &f);
                return;
        }
        (void)snprintf(what, sizeof(what), "connect to port %u in the guest", (unsigned)port);
        r = agent_forward_connect((uint16_t)port, &fd);
        x = r < 0 ? NULL : malloc(sizeof(Exec));
        if (!x) {
                (void)safe_close(fd);
                (void)fail(&f, r < 0 ? -r : ENOMEM, what, NULL);
                send_error(chan, &f);
                return;
        }
        *x = (Exec){.chan = chan,
                    .conn = true,
                    .connecting = true,
                    .in = fd,
                    .out = {fcntl(fd, F_DUPFD_CLOEXEC, 3), -EBADF},
                    .pty = -EBADF,
                    .exited = true};
        if (x->out[0] < 0) {
                (void)fail(&f, errno, what, NULL);
                (void)safe_close(fd);
                free(x);
                send_error(chan, &f);
                return;
        }
        execs[chan] = x;
}

/* The end of @x's connect (its socket polled writable): STARTED, or the
 * ERROR that frees its channel (ECONNREFUSED: nothing listens). */
static void connect_done(Exec *x) {
        socklen_t len = sizeof(int);
        int err = 0;
        Fail f = {};

        x->connecting = false;
        if (getsockopt(x->in, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                err = errno;
        if (err == 0) {
                send_le32(AGENT_MSG_STARTED, x->chan, 0);
                return;
        }
        (void)fail(&f, err, "connect to a port in the guest", NULL);
        send_error(x->chan, &f);
        x->in = safe_close(x->in);
        x->out[0] = safe_close(x->out[0]);
        execs[x->chan] = NULL;
        free(x);
}

static void handle_host_frame(const AgentFrame *fr) {
        Exec *x = execs[fr->chan];
        Fail f = {};

        switch ((AgentMsg)fr->type) {
        case AGENT_MSG_SETUP:
                if (do_setup(fr->payload, fr->len, &f) < 0)
                        send_error(fr->chan, &f);
                else
                        send_frame(AGENT_MSG_READY, fr->chan, NULL, 0);
                return;
        case AGENT_MSG_EXEC:
                handle_exec(fr->chan, fr->payload, fr->len);
                return;
        case AGENT_MSG_CONNECT:
                handle_connect(fr->chan, fr->payload, fr->len);
                return;
        case AGENT_MSG_RESIZE:
                if (x && x->pty >= 0 && fr->len == 8)
                        (void)agent_pty_resize(
                                x->pty, agent_get_le32(fr->payload),
                                agent_get_le32((const unsigned char *)fr->payload + 4));
                return;
        case AGENT_MSG_STDIN:
                /* Frames for a channel whose EXIT is on its way: dropped. */
                if (x)
                        stdin_push(x, fr->payload, fr->len);
                return;
        case AGENT_MSG_ACK:
                if (x && fr->len == 4)
                        x->out_unacked -=
                                MIN(x->out_unacked, (uint64_t)agent_get_le32(fr->payload));
                return;
        case AGENT_MSG_PING:
                send_frame(AGENT_MSG_PONG, fr->chan, fr->payload, fr->len);
                return;
        case AGENT_MSG_SIGNAL:
                /* A connection's end: both directions. */
                if (x && x->conn && !x->connecting && fr->len == 4) {
                        (void)shutdown(x->out[0], SHUT_RDWR);
                        x->out[0] = safe_close(x->out[0]);
                        stdin_drop_queue(x);
                        stdin_close(x);
                        return;
                }
                if (x && x->pid > 0 && !x->exited && fr->len == 4) {
                        int sig = (int)agent_get_le32(fr->payload);

                        if (sig > 0 && sig < NSIG)
                                (void)kill(-x->pid, sig);
                }
                return;
        case AGENT_MSG_HELLO:
        case AGENT_MSG_READY:
        case AGENT_MSG_ERROR:
        case AGENT_MSG_STARTED:
        case AGENT_MSG_STDOUT:
        case AGENT_MSG_STDERR:
        case AGENT_MSG_EXIT:
        case AGENT_MSG_PONG:
        case _AGENT_MSG_MAX:
        case _AGENT_MSG_INVALID:
        default:
                die("an unexpected frame from the host", EPROTO);
        }
}

/* Whether @x is over: exited, and its output read to the end (or given up
 * on: held open by something that escaped the kill). Its output waiting
 * for the host's acknowledgement does not count against it. */
static bool exec_over(Exec *x, int64_t now) {
        /* A connection: once both directions ended, each on its own
         * (protocol 1.4): the guest side's stream, and the host's (its
         * half-close passed on, or the guest side no longer taking it). */
        if (x->conn)
                return !x->connecting && x->out[0] < 0 && x->in < 0;
        if (!x->exited)
                return false;
        if (x->out[0] < 0 && x->out[1] < 0)
                return true;
        if (x->out_unacked >= AGENT_WINDOW)
                x->drain_deadline = now + OUTPUT_DRAIN_MS;
        return now >= x->drain_deadline;
}

/* The whole frames @rd holds. */
static void handle_host_frames(AgentReader *rd) {
        AgentFrame fr;
        int r;

        while ((r = agent_reader_next(rd, &fr)) > 0)
                handle_host_frame(&fr);
        if (r < 0)
                die("a malformed frame from the host", EBADMSG);
}

/* Serves the host for good: its frames, and every command's streams. */
_noreturn_ static void serve(AgentReader *rd, int sigfd) {
        for (;;) {
                struct pollfd p[2 + 3 * AGENT_MAX_EXECS];
                uint8_t chan[ELEMENTSOF(p)], what[ELEMENTSOF(p)];
                int64_t now = (int64_t)time_monotonic_ms(), wait = -1;
                size_t n = 0;

                for (size_t c = 0; c < AGENT_MAX_EXECS; c++)
                        if (execs[c] && exec_over(execs[c], now))
                                exec_finish(execs[c]);
                p[n++] = (struct pollfd){.fd = port_fd, .events = POLLIN};
                p[n++] = (struct pollfd){.fd = sigfd, .events = POLLIN};
                for (size_t c = 0; c < AGENT_MAX_EXECS; c++) {
                        Exec *x = execs[c];

                        if (!x)
                                continue;
                        if (x->connecting) {
                                chan[n] = (uint8_t)c;
                                what[n] = 3;
                                p[n++] = (struct pollfd){.fd = x->in, .events = POLLOUT};
                                continue;
                        }
                        for (uint8_t i = 0; i < 2; i++)
                                if (x->out[i] >= 0 && x->out_unacked < AGENT_WINDOW) {
                                        chan[n] = (uint8_t)c;
                                        what[n] = i;
                                        p[n++] = (struct pollfd){.fd = x->out[i], .events = POLLIN};
                                }
                        if (x->queue && x->in >= 0) {
                                chan[n] = (uint8_t)c;
                                what[n] = 2;
                                p[n++] = (struct pollfd){.fd = x->in, .events = POLLOUT};
                        }
                        if (x->exited && !x->conn && (wait < 0 || x->drain_deadline - now < wait))
                                wait = MAX(x->drain_deadline - now, 0);
                }
                if (n_doomed > 0 && (wait < 0 || wait > 10))
                        wait = 10;
                if (poll(p, n, (int)wait) < 0) {
                        if (errno == EINTR)
                                continue;
                        die("poll", errno);
                }
                if (p[1].revents & POLLIN) {
                        struct signalfd_siginfo si;

                        while (read(sigfd, &si, sizeof(si)) == sizeof(si))
                                ;
                        reap();
                }
                for (size_t i = 2; i < n; i++) {
                        Exec *x = execs[chan[i]];

                        if (!p[i].revents || !x)
                                continue;
                        if (what[i] == 3)
                                connect_done(x);
                        else if (what[i] < 2)
                                relay_output(x, what[i]);
                        else
                                stdin_flush(x);
                }
                if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
                        ssize_t r = agent_reader_fill(rd, port_fd);

                        if (r == 0)
                                die("the host closed the port", EPIPE);
                        if (r < 0 && r != -EAGAIN)
                                die("read from the host", (int)-r);
                        handle_host_frames(rd);
                }
                doomed_sweep();
        }
}

int main(int argc, char **argv) {
        AgentReader *rd = &host_reader;
        struct utsname u;
        sigset_t mask;
        int sigfd;

        if (getpid() != 1) {
                (void)fprintf(stderr,
                              "hutch-agent is the init of a hutch microVM, not a command\n");
                return 1;
        }
        mount_kernel_filesystems();
        (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        load_modules();
        usermode_helpers_off();
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        (void)sigprocmask(SIG_BLOCK, &mask, NULL);
        sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (sigfd < 0)
                die("signalfd", errno);
        port_fd = open_port();
        if (port_fd < 0)
                die("open the virtio port " AGENT_PORT_NAME, -port_fd);
        (void)uname(&u);
        send_frame(AGENT_MSG_HELLO, 0, u.release, strlen(u.release));

        /* No host on the other end (a template waiting to be saved sees
         * none after it): wait for one. */
        for (;;) {
                struct pollfd p = {.fd = port_fd, .events = POLLIN};
                ssize_t n;

                if (poll(&p, 1, -1) < 0 && errno != EINTR)
                        die("poll", errno);
                n = agent_reader_fill(rd, port_fd);
                if (n > 0)
                        break;
                if (n < 0 && n != -EAGAIN)
                        die("read from the host", (int)-n);
                if (n == 0)
                        sleep_ms(5);
        }
        handle_host_frames(rd);
        serve(rd, sigfd);
}
