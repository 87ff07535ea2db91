/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <linux/personality.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "macro.h"
#include "seccomp/seccomp-filter.h"
#include "test.h"

#define X32_SYSCALL_BIT 0x40000000UL

/* i386 syscall numbers (arch/x86/entry/syscalls/syscall_32.tbl). */
#define I386_NR_GETPID 20
#define I386_NR_MOUNT 21
#define I386_NR_UMOUNT 22
#define I386_NR_PTRACE 26
#define I386_NR_UNSHARE 310
#define I386_NR_SOCKETCALL 102
#define I386_NR_SOCKET 359
#define I386_NR_SOCKETPAIR 360
/* socketcall(2)'s sub-calls (linux/net.h). */
#define SYS_SOCKET_CALL 1
#define SYS_SOCKETPAIR_CALL 8
#define SYS_SHUTDOWN_CALL 13

/* In a child: reports a failed check on stderr and exits with 1. */
#define CHILD_CHECK(cond)                                                                          \
        do {                                                                                       \
                if (!(cond)) {                                                                     \
                        fprintf(stderr, "%s:%d: child check failed: %s\n", __FILE__, __LINE__,     \
                                #cond);                                                            \
                        _exit(1);                                                                  \
                }                                                                                  \
        } while (0)

/* Forks, runs @fn in the child (which exits with its return value, never
 * returning into cmocka) and returns the child's wait status. */
static int run_child(int (*fn)(const void *), const void *userdata) {
        int status = 0;
        pid_t pid;

        pid = fork();
        if (pid < 0)
                fail_msg("fork: %s", strerror(errno));
        if (pid == 0)
                _exit(fn(userdata));
        if (waitpid(pid, &status, 0) != pid)
                fail_msg("waitpid: %s", strerror(errno));
        return status;
}

#define ASSERT_CHILD_EXITED_OK(status)                                                             \
        do {                                                                                       \
                int _s_ = (status);                                                                \
                if (!WIFEXITED(_s_) || WEXITSTATUS(_s_) != 0)                                      \
                        fail_msg("%s:%d: child failed: %s %d", __FILE__, __LINE__,                 \
                                 WIFEXITED(_s_) ? "exit" : "signal",                               \
                                 WIFEXITED(_s_) ? WEXITSTATUS(_s_) : WTERMSIG(_s_));               \
        } while (0)

/* In a child: sets no_new_privs and loads the default filter. */
static void child_load_filter(void) {
        int r;

        CHILD_CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1UL, 0UL, 0UL, 0UL) == 0);
        r = seccomp_filter_load_default();
        if (r < 0) {
                fprintf(stderr, "seccomp_filter_load_default: %s\n", strerror(-r));
                _exit(2);
        }
}

static long raw_result(long r) {
        return r < 0 ? -errno : r;
}

/* The table */

static bool table_has(const char *name) {
        const SeccompRule *rules;
        size_t n;

        rules = seccomp_filter_default_rules(&n);
        for (size_t i = 0; i < n; i++)
                if (strcmp(rules[i].name, name) == 0)
                        return true;
        return false;
}

TEST(table_is_well_formed) {
        static const uint32_t arches[] = {SCMP_ARCH_X86_64, SCMP_ARCH_X86};
        const SeccompRule *rules;
        size_t n;

        rules = seccomp_filter_default_rules(&n);
        ASSERT_TRUE(n > 0);
        for (size_t i = 0; i < n; i++) {
                const SeccompRule *a = &rules[i];

                /* libseccomp knows the name (a pseudo number counts: the
                 * call exists on some architecture). */
                if (seccomp_syscall_resolve_name(a->name) == __NR_SCMP_ERROR)
                        fail_msg("unknown syscall name in table: %s", a->name);
                ASSERT_TRUE(a->error > 0 && a->error <= 4095);
                ASSERT_TRUE(a->arg >= -1 && a->arg <= 5);
                ASSERT_TRUE(a->reason && a->reason[0] != '\0');
                /* Not multiplexed through ipc on either architecture
                 * (libseccomp's pseudo numbers for those are -201..-299; a
                 * call that does not exist there is <= -10000): the filter
                 * skips such a name. One multiplexed through socketcall
                 * (-101..-199) is filtered twice, and its rules share one
                 * errno: they meet in one rule for the multiplexer. */
                for (size_t k = 0; k < ELEMENTSOF(arches); k++) {
                        int nr = seccomp_syscall_resolve_name_arch(arches[k], a->name);

                        if (nr < 0 && nr > -10000 && !seccomp_nr_is_socketcall(nr))
                                fail_msg("%s is multiplexed on arch 0x%x", a->name, arches[k]);
                        for (size_t j = 0; seccomp_nr_is_socketcall(nr) && j < n; j++)
                                if (strcmp(a->name, rules[j].name) == 0 &&
                                    a->error != rules[j].error)
                                        fail_msg("%s: rules with different errnos", a->name);
                }
                /* A value outside the mask could never match; a "greater
                 * than" rule has no mask. */
                if (a->arg >= 0 && !a->greater_than)
                        ASSERT_EQ(a->value & ~a->mask, 0);
                if (a->greater_than)
                        ASSERT_TRUE(a->arg >= 0 && a->mask == 0);
                for (size_t j = i + 1; j < n; j++) {
                        const SeccompRule *b = &rules[j];

                        if (strcmp(a->name, b->name) == 0 && a->arg == b->arg &&
                            a->mask == b->mask && a->value == b->value &&
                            a->greater_than == b->greater_than)
                                fail_msg("duplicate rule %zu and %zu: %s", i, j, a->name);
                        /* An unconditional rule makes any other rule of the
                         * same name dead weight. */
                        if (strcmp(a->name, b->name) == 0 && (a->arg < 0 || b->arg < 0))
                                fail_msg("unconditional rule for %s next to another", a->name);
                }
        }
}

TEST(table_covers_the_required_calls) {
        static const char *const required[] = {
                "mount",
                "umount2",
                "pivot_root",
                "chroot",
                "move_mount",
                "open_tree",
                "fsopen",
                "fsconfig",
                "fsmount",
                "fspick",
                "mount_setattr",
                "unshare",
                "setns",
                "clone",
                "clone3",
                "bpf",
                "perf_event_open",
                "userfaultfd",
                "io_uring_setup",
                "io_uring_enter",
                "io_uring_register",
                "keyctl",
                "add_key",
                "request_key",
                "kexec_load",
                "kexec_file_load",
                "init_module",
                "finit_module",
                "delete_module",
                "reboot",
                "swapon",
                "swapoff",
                "iopl",
                "ioperm",
                "open_by_handle_at",
                "name_to_handle_at",
                "ptrace",
                "process_vm_readv",
                "process_vm_writev",
                "personality",
                "ioctl",
                "acct",
                "quotactl",
                "settimeofday",
                "clock_settime",
                "adjtimex",
                "clock_adjtime",
                "syslog",
                "lookup_dcookie",
                "vhangup",
                "nfsservctl",
                "uselib",
                "pidfd_getfd",
                "fanotify_init",
                "umount",
                "socket",
                "socketpair",
        };

        for (size_t i = 0; i < ELEMENTSOF(required); i++)
                if (!table_has(required[i]))
                        fail_msg("required call missing from the deny table: %s", required[i]);
}

/* Evaluates the personality rules of the table on @v as the filter does. */
static bool personality_denied(uint64_t v) {
        const SeccompRule *rules;
        size_t n;

        rules = seccomp_filter_default_rules(&n);
        for (size_t i = 0; i < n; i++)
                if (strcmp(rules[i].name, "personality") == 0 && rules[i].arg == 0 &&
                    (v & rules[i].mask) == rules[i].value)
                        return true;
        return false;
}

TEST(table_personality_allows_exactly_linux_and_query) {
        static const uint64_t probes[] = {
                1,          8,          0x0008 | 0x0040000, 0x0040000,
                0x0400000,  0x0100000,  0x80000000,         0x7fffffff,
                0xfffffffe, 0xfffffff7, 0x100000008ULL,     0x5555555555555555ULL,
        };
        uint64_t x = 0x9e3779b97f4a7c15ULL;

        ASSERT_FALSE(personality_denied(0));
        ASSERT_FALSE(personality_denied(0xffffffff));
        /* The kernel truncates to unsigned int: high bits do not matter. */
        ASSERT_FALSE(personality_denied(0xdead00000000ULL));
        ASSERT_FALSE(personality_denied(0xdeadffffffffULL));
        for (size_t i = 0; i < ELEMENTSOF(probes); i++)
                if (!personality_denied(probes[i]))
                        fail_msg("personality 0x%llx allowed", (unsigned long long)probes[i]);
        /* And a deterministic pseudo-random sweep. */
        for (int i = 0; i < 100000; i++) {
                uint32_t v;

                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                v = (uint32_t)x;
                ASSERT_EQ(personality_denied(v), v != 0 && v != 0xffffffff);
        }
}

/* Evaluates the table's rules for @name on @v (argument 0) as the filter
 * does: returns the errno of a matching rule, or 0. */
static int family_denied(const char *name, uint64_t v) {
        const SeccompRule *rules;
        size_t n;

        rules = seccomp_filter_default_rules(&n);
        for (size_t i = 0; i < n; i++) {
                const SeccompRule *r = &rules[i];

                if (strcmp(r->name, name) != 0 || r->arg != 0)
                        continue;
                if (r->greater_than ? v > r->value : (v & r->mask) == r->value)
                        return r->error;
        }
        return 0;
}

TEST(table_socket_families_allow_exactly_unix_inet_inet6_netlink) {
        static const char *const calls[] = {"socket", "socketpair"};
        uint64_t x = 0x2545f4914f6cdd1dULL;

        for (size_t c = 0; c < ELEMENTSOF(calls); c++) {
                for (uint64_t v = 0; v < 4096; v++) {
                        bool allowed =
                                v == AF_UNIX || v == AF_INET || v == AF_INET6 || v == AF_NETLINK;

                        ASSERT_EQ(family_denied(calls[c], v), allowed ? 0 : EAFNOSUPPORT);
                }
                /* The kernel takes an int: high bits on an allowed family
                 * are refused, not truncated away. */
                ASSERT_EQ(family_denied(calls[c], (1ULL << 32) | AF_UNIX), EAFNOSUPPORT);
                ASSERT_EQ(family_denied(calls[c], 0xffffffff00000002ULL), EAFNOSUPPORT);
                ASSERT_EQ(family_denied(calls[c], UINT64_MAX), EAFNOSUPPORT);
                for (int i = 0; i < 100000; i++) {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        ASSERT_EQ(family_denied(calls[c], x), EAFNOSUPPORT);
                }
        }
}

/* The compiled program */

TEST(export_bad_fd) {
        ASSERT_ERROR(seccomp_filter_export_default(-1), EBADF);
}

static bool bpf_has_ret(const struct sock_filter *insn, size_t n, uint32_t k) {
        for (size_t i = 0; i < n; i++)
                if (BPF_CLASS(insn[i].code) == BPF_RET && BPF_SRC(insn[i].code) == BPF_K &&
                    insn[i].k == k)
                        return true;
        return false;
}

static bool bpf_has_jump_k(const struct sock_filter *insn, size_t n, uint16_t op, uint32_t k) {
        for (size_t i = 0; i < n; i++)
                if (BPF_CLASS(insn[i].code) == BPF_JMP && BPF_OP(insn[i].code) == op &&
                    BPF_SRC(insn[i].code) == BPF_K && insn[i].k == k)
                        return true;
        return false;
}

/* The programs hutch loads are generated at build time; each must be
 * exactly what libseccomp compiles from its table now. */
static void check_embedded(int (*export)(int), const struct sock_filter *embedded, size_t m) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ struct sock_filter *insn = NULL;
        struct stat st;
        size_t n;

        fd = memfd_create("hutch-seccomp-bpf", MFD_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(export(fd));
        ASSERT_EQ(fstat(fd, &st), 0);
        n = (size_t)st.st_size / sizeof(struct sock_filter);
        insn = calloc(n, sizeof(struct sock_filter));
        ASSERT_NOT_NULL(insn);
        ASSERT_EQ(pread(fd, insn, (size_t)st.st_size, 0), st.st_size);
        ASSERT_EQ(m, n);
        ASSERT_EQ(memcmp(embedded, insn, n * sizeof(struct sock_filter)), 0);
}

TEST(embedded_program_matches_the_table) {
        const struct sock_filter *embedded;
        size_t m;

        embedded = seccomp_filter_default_program(&m);
        check_embedded(seccomp_filter_export_default, embedded, m);
        embedded = seccomp_filter_vmm_program(&m);
        check_embedded(seccomp_filter_export_vmm, embedded, m);
}

/* SECURITY: the VMM's table is the default table's set-id rules and its
 * rules on other processes, each of them also in the default table, and
 * nothing else (QEMU needs the rest). */
TEST(vmm_table_is_the_set_id_and_other_process_rules) {
        static const char *const other[] = {"ptrace", "process_vm_readv", "process_vm_writev",
                                            "pidfd_getfd", "kcmp"};
        size_t n_vmm, n_def, setid = 0, others = 0;
        const SeccompRule *vmm = seccomp_filter_vmm_rules(&n_vmm);
        const SeccompRule *def = seccomp_filter_default_rules(&n_def);

        for (size_t i = 0; i < n_vmm; i++) {
                bool found = false;

                for (size_t j = 0; j < n_def && !found; j++)
                        found = strcmp(vmm[i].name, def[j].name) == 0 && vmm[i].arg == def[j].arg &&
                                vmm[i].mask == def[j].mask && vmm[i].value == def[j].value &&
                                vmm[i].error == def[j].error &&
                                vmm[i].greater_than == def[j].greater_than;
                ASSERT_TRUE(found);
                if (vmm[i].arg >= 0 && (vmm[i].value & (S_ISUID | S_ISGID))) {
                        setid++;
                        continue;
                }
                found = false;
                for (size_t j = 0; j < ELEMENTSOF(other) && !found; j++)
                        found = vmm[i].arg < 0 && strcmp(vmm[i].name, other[j]) == 0;
                if (found) {
                        others++;
                        continue;
                }
                ASSERT_STREQ(vmm[i].name, "openat2");
        }
        /* chmod, fchmod, fchmodat, fchmodat2, open, openat, creat, mknod,
         * mknodat: each for S_ISUID and S_ISGID. */
        ASSERT_EQ(setid, 18);
        ASSERT_EQ(others, ELEMENTSOF(other));
}

TEST(export_shape) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ struct sock_filter *insn = NULL;
        struct stat st;
        size_t n;

        fd = memfd_create("hutch-seccomp-bpf", MFD_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(seccomp_filter_export_default(fd));
        ASSERT_EQ(fstat(fd, &st), 0);
        ASSERT_TRUE(st.st_size > 0);
        ASSERT_EQ((size_t)st.st_size % sizeof(struct sock_filter), 0);
        n = (size_t)st.st_size / sizeof(struct sock_filter);
        ASSERT_TRUE(n <= BPF_MAXINSNS);
        insn = calloc(n, sizeof(struct sock_filter));
        ASSERT_NOT_NULL(insn);
        ASSERT_EQ(pread(fd, insn, (size_t)st.st_size, 0), st.st_size);

        /* SECURITY: the architecture is checked before anything else: the
         * syscall number means nothing without it. */
        ASSERT_EQ(insn[0].code, BPF_LD | BPF_W | BPF_ABS);
        ASSERT_EQ(insn[0].k, offsetof(struct seccomp_data, arch));
        /* The program cannot fall off its end. */
        ASSERT_EQ(BPF_CLASS(insn[n - 1].code), BPF_RET);

        ASSERT_TRUE(bpf_has_ret(insn, n, SECCOMP_RET_ALLOW));
        ASSERT_TRUE(bpf_has_ret(insn, n, SECCOMP_RET_ERRNO | EPERM));
        ASSERT_TRUE(bpf_has_ret(insn, n, SECCOMP_RET_ERRNO | ENOSYS));
        ASSERT_TRUE(bpf_has_ret(insn, n, SECCOMP_RET_ERRNO | EAFNOSUPPORT));
        /* Bad architecture (and x32) kills the process. */
        ASSERT_TRUE(bpf_has_ret(insn, n, SECCOMP_RET_KILL_PROCESS));
        ASSERT_FALSE(bpf_has_ret(insn, n, SECCOMP_RET_KILL_THREAD));
        /* Both architectures have a section. */
        ASSERT_TRUE(bpf_has_jump_k(insn, n, BPF_JEQ, AUDIT_ARCH_X86_64));
        ASSERT_TRUE(bpf_has_jump_k(insn, n, BPF_JEQ, AUDIT_ARCH_I386));
        /* libseccomp's x32 guard in the x86_64 section: numbers >=
         * X32_SYSCALL_BIT go to the bad-arch action. */
        ASSERT_TRUE(bpf_has_jump_k(insn, n, BPF_JGE, X32_SYSCALL_BIT));

        /* Every jump stays inside the program, and every load reads
         * inside struct seccomp_data. */
        for (size_t i = 0; i < n; i++) {
                uint16_t code = insn[i].code;

                if (BPF_CLASS(code) == BPF_JMP) {
                        if (BPF_OP(code) == BPF_JA)
                                ASSERT_TRUE(i + 1 + insn[i].k < n);
                        else
                                ASSERT_TRUE(i + 1 + MAX(insn[i].jt, insn[i].jf) < n);
                }
                if (BPF_CLASS(code) == BPF_LD && BPF_MODE(code) == BPF_ABS)
                        ASSERT_TRUE(insn[i].k + 4 <= sizeof(struct seccomp_data));
        }
}

/* Behaviour: forbidden calls */

typedef struct Probe {
        const char *name;
        long (*call)(void);
        int filtered_errno;   /* what the filter returns */
        bool twin_needs_root; /* unfiltered, the call may fail with EPERM unless root */
} Probe;

static long call_mount(void) {
        /* NULL target: unfiltered this is EFAULT, privileged or not. */
        return raw_result(syscall(SYS_mount, NULL, NULL, NULL, 0UL, NULL));
}

static long call_umount2(void) {
        return raw_result(syscall(SYS_umount2, NULL, 0));
}

static long call_unshare_newuser(void) {
        return raw_result(syscall(SYS_unshare, CLONE_NEWUSER));
}

static long call_setns(void) {
        return raw_result(syscall(SYS_setns, -1, 0));
}

static long call_clone_newnet(void) {
        long pid;

        /* fork-like: no CLONE_VM, so the child may run on the copied stack
         * and leaves at once. */
        pid = syscall(SYS_clone, (unsigned long)(CLONE_NEWNET | SIGCHLD), 0UL, NULL, NULL, 0UL);
        if (pid == 0)
                _exit(0);
        if (pid > 0)
                (void)waitpid((pid_t)pid, NULL, 0);
        return raw_result(pid);
}

static long call_bpf(void) {
        return raw_result(syscall(SYS_bpf, -1, NULL, 0));
}

static long call_ptrace_traceme(void) {
        return raw_result(syscall(SYS_ptrace, 0L /* PTRACE_TRACEME */, 0, NULL, NULL));
}

static long call_keyctl(void) {
        return raw_result(syscall(SYS_keyctl, 0x7fffffffL, 0L, 0L, 0L, 0L));
}

static long call_io_uring_setup(void) {
        return raw_result(syscall(SYS_io_uring_setup, 0U, NULL));
}

static long call_userfaultfd(void) {
        /* UFFD_USER_MODE_ONLY plus an undefined flag: EINVAL unfiltered,
         * whatever vm.unprivileged_userfaultfd says. */
        return raw_result(syscall(SYS_userfaultfd, 1 | (1 << 20)));
}

static long call_perf_event_open(void) {
        return raw_result(syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0UL));
}

static long call_personality_linux32(void) {
        return raw_result(syscall(SYS_personality, (unsigned long)PER_LINUX32));
}

static long call_personality_no_randomize(void) {
        return raw_result(syscall(SYS_personality, (unsigned long)ADDR_NO_RANDOMIZE));
}

static long call_personality_high_bits(void) {
        /* The kernel sees (unsigned int) 8. */
        return raw_result(syscall(SYS_personality, 0x100000000UL | PER_LINUX32));
}

static long ioctl_devnull(unsigned long request) {
        _cleanup_close_ int fd = -EBADF;
        char c = 'x';

        /* SECURITY: never a real terminal: if the filter failed, a test
         * must not type into the developer's shell. /dev/null is ENOTTY. */
        fd = open("/dev/null", O_RDWR | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        return raw_result(syscall(SYS_ioctl, fd, request, &c));
}

static long call_ioctl_tiocsti(void) {
        return ioctl_devnull(TIOCSTI);
}

static long call_ioctl_tiocsti_high_bits(void) {
        return ioctl_devnull(0xdead00000000UL | TIOCSTI);
}

static long call_ioctl_tioclinux(void) {
        return ioctl_devnull(TIOCLINUX);
}

static long call_clone3(void) {
        return raw_result(syscall(SYS_clone3, NULL, 0UL));
}

static long call_open_by_handle_at(void) {
        return raw_result(syscall(SYS_open_by_handle_at, -1, NULL, 0));
}

static long call_process_vm_readv(void) {
        return raw_result(syscall(SYS_process_vm_readv, 0, NULL, 0UL, NULL, 0UL, 1UL));
}

static const Probe probes[] = {
        {"mount", call_mount, EPERM, false},
        {"umount2", call_umount2, EPERM, false},
        {"unshare(CLONE_NEWUSER)", call_unshare_newuser, EPERM, true},
        {"setns", call_setns, EPERM, false},
        {"clone(CLONE_NEWNET)", call_clone_newnet, EPERM, true},
        {"bpf", call_bpf, EPERM, true},
        {"ptrace(PTRACE_TRACEME)", call_ptrace_traceme, EPERM, false},
        {"keyctl", call_keyctl, EPERM, false},
        {"io_uring_setup", call_io_uring_setup, EPERM, true},
        {"userfaultfd", call_userfaultfd, EPERM, false},
        {"perf_event_open", call_perf_event_open, EPERM, false},
        {"personality(PER_LINUX32)", call_personality_linux32, EPERM, false},
        {"personality(ADDR_NO_RANDOMIZE)", call_personality_no_randomize, EPERM, false},
        {"personality(1<<32|PER_LINUX32)", call_personality_high_bits, EPERM, false},
        {"ioctl(TIOCSTI)", call_ioctl_tiocsti, EPERM, false},
        {"ioctl(high bits|TIOCSTI)", call_ioctl_tiocsti_high_bits, EPERM, false},
        {"ioctl(TIOCLINUX)", call_ioctl_tioclinux, EPERM, false},
        {"clone3", call_clone3, ENOSYS, false},
        {"open_by_handle_at", call_open_by_handle_at, EPERM, false},
        {"process_vm_readv", call_process_vm_readv, EPERM, false},
};

static int child_probe_filtered(const void *userdata) {
        const Probe *p = userdata;
        long r;

        child_load_filter();
        r = p->call();
        if (r != -p->filtered_errno) {
                fprintf(stderr, "%s under the filter: %ld, expected %d\n", p->name, r,
                        -p->filtered_errno);
                return 1;
        }
        return 0;
}

static int child_probe_unfiltered(const void *userdata) {
        const Probe *p = userdata;
        long r;

        r = p->call();
        if (r == -p->filtered_errno) {
                fprintf(stderr, "%s without a filter: %ld, the errno the filter would give\n",
                        p->name, r);
                return 1;
        }
        return 0;
}

TEST(forbidden_calls_fail_with_the_filter_errno) {
        for (size_t i = 0; i < ELEMENTSOF(probes); i++) {
                int status = run_child(child_probe_filtered, &probes[i]);

                if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                        fail_msg("probe %s failed (status 0x%x)", probes[i].name, status);
        }
}

/* Negative twin: the same calls without the filter do not produce that
 * errno, so the test above really measures the filter. */
TEST(forbidden_calls_without_filter_differ) {
        size_t skipped = 0;

        for (size_t i = 0; i < ELEMENTSOF(probes); i++) {
                int status;

                if (probes[i].twin_needs_root && geteuid() != 0) {
                        skipped++;
                        continue;
                }
                status = run_child(child_probe_unfiltered, &probes[i]);
                if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                        fail_msg("unfiltered probe %s failed (status 0x%x)", probes[i].name,
                                 status);
        }
        if (skipped > 0)
                fprintf(stderr, "note: %zu twin probes need root and were not run\n", skipped);
}

/* Behaviour: what must keep working */

static void *thread_main(void *arg) {
        return (void *)((uintptr_t)arg + 1);
}

static int child_normal_work(const void *userdata) {
        _cleanup_close_ int fd = -EBADF;
        int pipefd[2], avail = -1, status = 0;
        void *thread_ret = NULL;
        pthread_t thread;
        char buf[64];
        pid_t pid;

        child_load_filter();

        /* fork (glibc: clone with SIGCHLD and tid flags) */
        pid = fork();
        CHILD_CHECK(pid >= 0);
        if (pid == 0)
                _exit(42);
        CHILD_CHECK(waitpid(pid, &status, 0) == pid);
        CHILD_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 42);

        /* threads: glibc tries clone3, gets ENOSYS, falls back to clone */
        CHILD_CHECK(pthread_create(&thread, NULL, thread_main, (void *)41) == 0);
        CHILD_CHECK(pthread_join(thread, &thread_ret) == 0);
        CHILD_CHECK((uintptr_t)thread_ret == 42);

        /* open/read */
        fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
        CHILD_CHECK(fd >= 0);
        CHILD_CHECK(read(fd, buf, sizeof(buf)) > 0);

        /* personality: the query and PER_LINUX */
        CHILD_CHECK(syscall(SYS_personality, 0xffffffffUL) >= 0);
        CHILD_CHECK(syscall(SYS_personality, (unsigned long)PER_LINUX) >= 0);

        /* ioctl with another request */
        CHILD_CHECK(pipe2(pipefd, O_CLOEXEC) == 0);
        CHILD_CHECK(ioctl(pipefd[0], FIONREAD, &avail) == 0);
        CHILD_CHECK(avail == 0);

        /* a plain raw syscall */
        CHILD_CHECK(syscall(SYS_getpid) == getpid());
        return 0;
}

TEST(normal_calls_work_under_the_filter) {
        ASSERT_CHILD_EXITED_OK(run_child(child_normal_work, NULL));
}

/* Behaviour: socket families */

typedef struct FamilyCase {
        const char *name;
        uint64_t family; /* as the register carries it */
        int type;
        int protocol;
} FamilyCase;

static const FamilyCase refused_families[] = {
        {"AF_UNSPEC", AF_UNSPEC, SOCK_DGRAM, 0},
        {"AF_AX25", AF_AX25, SOCK_SEQPACKET, 0},
        {"AF_BRIDGE", AF_BRIDGE, SOCK_DGRAM, 0},
        {"AF_X25", AF_X25, SOCK_SEQPACKET, 0},
        {"AF_ROSE", AF_ROSE, SOCK_SEQPACKET, 0},
        {"AF_KEY", AF_KEY, SOCK_RAW, 2 /* PF_KEY_V2 */},
        {"AF_PACKET", AF_PACKET, SOCK_RAW, 0},
        {"AF_ALG", AF_ALG, SOCK_SEQPACKET, 0},
        {"AF_VSOCK", AF_VSOCK, SOCK_STREAM, 0},
        {"AF_XDP", AF_XDP, SOCK_RAW, 0},
        {"AF_MCTP", 45, SOCK_DGRAM, 0},
        {"255", 255, SOCK_DGRAM, 0},
        /* The kernel reads an int: this is AF_UNIX to it. */
        {"AF_UNIX with bit 32", (1ULL << 32) | AF_UNIX, SOCK_STREAM, 0},
        {"0xffffffff", 0xffffffffULL, SOCK_DGRAM, 0},
};

static const FamilyCase allowed_families[] = {
        {"AF_UNIX", AF_UNIX, SOCK_STREAM, 0},
        {"AF_INET", AF_INET, SOCK_DGRAM, 0},
        {"AF_INET6", AF_INET6, SOCK_DGRAM, 0},
        {"AF_NETLINK", AF_NETLINK, SOCK_RAW, NETLINK_ROUTE},
};

/* What each call gave (-errno, or 0 for a socket), filled by a child. */
typedef struct FamilyResults {
        bool filtered;
        long socket[ELEMENTSOF(refused_families) + ELEMENTSOF(allowed_families)];
        long pair[ELEMENTSOF(refused_families) + ELEMENTSOF(allowed_families)];
} FamilyResults;

static const FamilyCase *family_case(size_t i) {
        return i < ELEMENTSOF(refused_families)
                       ? &refused_families[i]
                       : &allowed_families[i - ELEMENTSOF(refused_families)];
}

static long fd_result(long r, int *sv) {
        if (r < 0)
                return -errno;
        if (sv) {
                (void)close(sv[0]);
                (void)close(sv[1]);
        } else
                (void)close((int)r);
        return 0;
}

static int child_socket_families(const void *userdata) {
        FamilyResults *res = (FamilyResults *)userdata;

        if (res->filtered)
                child_load_filter();
        for (size_t i = 0; i < ELEMENTSOF(res->socket); i++) {
                const FamilyCase *c = family_case(i);
                int sv[2] = {-1, -1};

                res->socket[i] =
                        fd_result(syscall(SYS_socket, c->family, c->type, c->protocol), NULL);
                res->pair[i] =
                        fd_result(syscall(SYS_socketpair, c->family, SOCK_STREAM, 0, sv), sv);
        }
        return 0;
}

/* Runs the family cases in a child, with or without the filter, into
 * shared memory. */
static FamilyResults *family_results(bool filtered) {
        FamilyResults *res =
                mmap(NULL, sizeof(*res), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

        ASSERT_TRUE(res != MAP_FAILED);
        res->filtered = filtered;
        ASSERT_CHILD_EXITED_OK(run_child(child_socket_families, res));
        return res;
}

TEST(socket_families_outside_the_allow_list_fail_with_eafnosupport) {
        FamilyResults *with = family_results(true), *without = family_results(false);
        size_t reached = 0;

        for (size_t i = 0; i < ELEMENTSOF(refused_families); i++) {
                if (with->socket[i] != -EAFNOSUPPORT || with->pair[i] != -EAFNOSUPPORT)
                        fail_msg("%s under the filter: socket %ld, socketpair %ld",
                                 refused_families[i].name, with->socket[i], with->pair[i]);
                /* Twin: without the filter the kernel answers, unless it
                 * lacks the family (then both say EAFNOSUPPORT). */
                if (without->socket[i] != -EAFNOSUPPORT)
                        reached++;
                else
                        fprintf(stderr, "note: no %s in this kernel: no twin\n",
                                refused_families[i].name);
        }
        /* AF_PACKET is in every kernel hutch supports (CONFIG_PACKET), and
         * AF_UNIX with bit 32 is AF_UNIX to the kernel. */
        for (size_t i = 0; i < ELEMENTSOF(refused_families); i++)
                if (strcmp(refused_families[i].name, "AF_PACKET") == 0 ||
                    strcmp(refused_families[i].name, "AF_UNIX with bit 32") == 0)
                        ASSERT_TRUE(without->socket[i] != -EAFNOSUPPORT);
        ASSERT_TRUE(reached >= 2);
        (void)munmap(with, sizeof(*with));
        (void)munmap(without, sizeof(*without));
}

/* The allowed families give what they give without the filter (AF_INET6
 * where IPv6 is off, say, its EAFNOSUPPORT), and AF_UNIX works. */
TEST(socket_families_on_the_allow_list_are_untouched) {
        FamilyResults *with = family_results(true), *without = family_results(false);

        for (size_t i = 0; i < ELEMENTSOF(allowed_families); i++) {
                size_t k = ELEMENTSOF(refused_families) + i;

                if (with->socket[k] != without->socket[k] || with->pair[k] != without->pair[k])
                        fail_msg("%s: socket %ld (unfiltered %ld), socketpair %ld (unfiltered %ld)",
                                 allowed_families[i].name, with->socket[k], without->socket[k],
                                 with->pair[k], without->pair[k]);
        }
        ASSERT_EQ(with->socket[ELEMENTSOF(refused_families)], 0);
        ASSERT_EQ(with->pair[ELEMENTSOF(refused_families)], 0);
        ASSERT_EQ(with->socket[ELEMENTSOF(refused_families) + 3], 0); /* AF_NETLINK */
        (void)munmap(with, sizeof(*with));
        (void)munmap(without, sizeof(*without));
}

static int child_load_twice(const void *userdata) {
        child_load_filter();
        /* Stacking the filter a second time is allowed (seccomp(2) itself
         * is not on the list). */
        CHILD_CHECK(seccomp_filter_load_default() == 0);
        CHILD_CHECK(syscall(SYS_setns, -1, 0) == -1 && errno == EPERM);
        return 0;
}

TEST(load_sets_no_new_privs_and_stacks) {
        ASSERT_CHILD_EXITED_OK(run_child(child_load_twice, NULL));
}

static int child_load_without_nnp(const void *userdata) {
        /* SCMP_FLTATR_CTL_NNP is on: loading sets no_new_privs itself. */
        CHILD_CHECK(prctl(PR_GET_NO_NEW_PRIVS, 0UL, 0UL, 0UL, 0UL) == 0);
        CHILD_CHECK(seccomp_filter_load_default() == 0);
        CHILD_CHECK(prctl(PR_GET_NO_NEW_PRIVS, 0UL, 0UL, 0UL, 0UL) == 1);
        return 0;
}

TEST(load_without_no_new_privs_sets_it) {
        ASSERT_CHILD_EXITED_OK(run_child(child_load_without_nnp, NULL));
}

/* x32 */

static int child_x32(const void *userdata) {
        bool filtered = *(const bool *)userdata;
        long r;

        if (filtered)
                child_load_filter();
        r = syscall(X32_SYSCALL_BIT | SYS_getpid);
        /* Unfiltered: x32 is not configured in this kernel. */
        if (r < 0 && errno == ENOSYS)
                return 3;
        return r == getpid() ? 4 : 5;
}

TEST(x32_numbers_kill_the_process) {
        bool filtered = true, unfiltered = false;
        int status;

        status = run_child(child_x32, &filtered);
        if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGSYS)
                fail_msg("x32 getpid under the filter: status 0x%x, expected SIGSYS", status);

        /* Twin: without the filter the kernel answers (ENOSYS, or the pid
         * on a kernel with x32). */
        status = run_child(child_x32, &unfiltered);
        ASSERT_TRUE(WIFEXITED(status));
        ASSERT_TRUE(WEXITSTATUS(status) == 3 || WEXITSTATUS(status) == 4);
}

/* int $0x80 */

#if defined(__x86_64__)
static long int80(long nr, long a, long b, long c, long d, long e) {
        long ret;

        /* The kernel clears r8-r11 on return from a compat call made from a
         * 64-bit task. Pointers would be truncated to 32 bits: only NULL and
         * plain numbers are passed. */
        __asm__ volatile("int $0x80"
                         : "=a"(ret)
                         : "a"(nr), "b"(a), "c"(b), "d"(c), "S"(d), "D"(e)
                         : "memory", "r8", "r9", "r10", "r11");
        return (long)(int)ret;
}

static int child_int80_probe(const void *userdata) {
        long r = int80(I386_NR_GETPID, 0, 0, 0, 0, 0);

        if (r == -ENOSYS)
                return 3;
        return r == getpid() ? 0 : 4;
}

/* Returns true when the kernel runs i386 calls from a 64-bit task, false
 * when IA32 emulation is compiled out (int $0x80 gives -ENOSYS) or switched
 * off at boot (no int $0x80 gate: the probe dies of SIGSEGV), and fails the
 * test on any other outcome. */
static bool have_ia32(void) {
        int status = run_child(child_int80_probe, NULL);

        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
                return true;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 3)
                return false;
        if (WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV)
                return false;
        fail_msg("int $0x80 getpid probe: unexpected status 0x%x", status);
        return false;
}

static int child_int80_filtered(const void *userdata) {
        long r;

        child_load_filter();

        r = int80(I386_NR_MOUNT, 0, 0, 0, 0, 0);
        CHILD_CHECK(r == -EPERM);
        /* oldumount exists on i386 only: its rule is in the i386 section */
        r = int80(I386_NR_UMOUNT, 0, 0, 0, 0, 0);
        CHILD_CHECK(r == -EPERM);
        r = int80(I386_NR_UNSHARE, CLONE_NEWUSER, 0, 0, 0, 0);
        CHILD_CHECK(r == -EPERM);
        r = int80(I386_NR_PTRACE, 0 /* PTRACE_TRACEME */, 0, 0, 0, 0);
        CHILD_CHECK(r == -EPERM);
        /* an allowed call still works through the same gate */
        r = int80(I386_NR_GETPID, 0, 0, 0, 0, 0);
        CHILD_CHECK(r == getpid());
        return 0;
}

static int child_int80_unfiltered(const void *userdata) {
        long r;

        r = int80(I386_NR_MOUNT, 0, 0, 0, 0, 0);
        CHILD_CHECK(r == -EFAULT);
        r = int80(I386_NR_UMOUNT, 0, 0, 0, 0, 0);
        CHILD_CHECK(r == -EFAULT);
        r = int80(I386_NR_PTRACE, 0 /* PTRACE_TRACEME */, 0, 0, 0, 0);
        CHILD_CHECK(r == 0);
        return 0;
}

/* Memory below 4 GiB for the i386 calls' pointers. */
typedef struct LowSocketArgs {
        uint32_t args[4]; /* socketcall's arguments: i386 longs */
        int sv[2];
} LowSocketArgs;

/* socket (@pair: socketpair) of @family through the direct i386 call
 * (@via_socketcall false) or socketcall(2); a socket made is closed.
 * Returns 0 or -errno. */
static long int80_socket(LowSocketArgs *low, bool via_socketcall, bool pair, uint32_t family,
                         int type) {
        long r;

        low->sv[0] = low->sv[1] = -1;
        if (via_socketcall) {
                low->args[0] = family;
                low->args[1] = (uint32_t)type;
                low->args[2] = 0;
                low->args[3] = (uint32_t)(uintptr_t)low->sv;
                r = int80(I386_NR_SOCKETCALL, pair ? SYS_SOCKETPAIR_CALL : SYS_SOCKET_CALL,
                          (long)(uintptr_t)low->args, 0, 0, 0);
        } else
                r = int80(pair ? I386_NR_SOCKETPAIR : I386_NR_SOCKET, family, type, 0,
                          (long)(uintptr_t)low->sv, 0);
        if (r < 0)
                return r;
        if (pair) {
                (void)close(low->sv[0]);
                (void)close(low->sv[1]);
        } else
                (void)close((int)r);
        return 0;
}

static LowSocketArgs *low_socket_args(void) {
        LowSocketArgs *low = mmap(NULL, sizeof(*low), PROT_READ | PROT_WRITE,
                                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);

        CHILD_CHECK(low != MAP_FAILED);
        return low;
}

static int child_int80_sockets_filtered(const void *userdata) {
        LowSocketArgs *low = low_socket_args();

        child_load_filter();
        /* The direct calls compare the family as x86_64 does. */
        for (size_t i = 0; i < ELEMENTSOF(refused_families); i++) {
                uint32_t f = (uint32_t)refused_families[i].family;

                if (refused_families[i].family > UINT32_MAX)
                        continue; /* i386 registers hold 32 bits */
                CHILD_CHECK(int80_socket(low, false, false, f, refused_families[i].type) ==
                            -EAFNOSUPPORT);
                CHILD_CHECK(int80_socket(low, false, true, f, SOCK_STREAM) == -EAFNOSUPPORT);
                /* socketcall: denied whatever the family (its arguments
                 * are in memory). */
                CHILD_CHECK(int80_socket(low, true, false, f, refused_families[i].type) ==
                            -EAFNOSUPPORT);
                CHILD_CHECK(int80_socket(low, true, true, f, SOCK_STREAM) == -EAFNOSUPPORT);
        }
        CHILD_CHECK(int80_socket(low, true, false, AF_UNIX, SOCK_STREAM) == -EAFNOSUPPORT);
        CHILD_CHECK(int80_socket(low, true, true, AF_UNIX, SOCK_STREAM) == -EAFNOSUPPORT);
        /* Twins: the allowed families through the direct calls, and
         * socketcall's other sub-calls. */
        CHILD_CHECK(int80_socket(low, false, false, AF_UNIX, SOCK_STREAM) == 0);
        CHILD_CHECK(int80_socket(low, false, true, AF_UNIX, SOCK_STREAM) == 0);
        CHILD_CHECK(int80_socket(low, false, false, AF_INET, SOCK_DGRAM) == 0);
        CHILD_CHECK(int80_socket(low, false, false, AF_NETLINK, SOCK_RAW) == 0);
        low->args[0] = (uint32_t)-1;
        low->args[1] = 0;
        CHILD_CHECK(int80(I386_NR_SOCKETCALL, SYS_SHUTDOWN_CALL, (long)(uintptr_t)low->args, 0, 0,
                          0) == -EBADF);
        return 0;
}

static int child_int80_sockets_unfiltered(const void *userdata) {
        LowSocketArgs *low = low_socket_args();

        CHILD_CHECK(int80_socket(low, true, false, AF_UNIX, SOCK_STREAM) == 0);
        CHILD_CHECK(int80_socket(low, true, true, AF_UNIX, SOCK_STREAM) == 0);
        CHILD_CHECK(int80_socket(low, true, false, AF_PACKET, SOCK_RAW) != -EAFNOSUPPORT);
        CHILD_CHECK(int80_socket(low, false, false, AF_PACKET, SOCK_RAW) != -EAFNOSUPPORT);
        return 0;
}

TEST(int80_socket_families) {
        if (!have_ia32()) {
                if (getenv("HUTCH_TEST_MUST_WORK"))
                        fail_msg("no IA32 emulation and HUTCH_TEST_MUST_WORK is set");
                fprintf(stderr, "skip: the kernel does not run i386 syscalls\n");
                skip();
        }
        ASSERT_CHILD_EXITED_OK(run_child(child_int80_sockets_filtered, NULL));
        /* Twin: without the filter socketcall makes sockets, and AF_PACKET
         * reaches the kernel both ways. */
        ASSERT_CHILD_EXITED_OK(run_child(child_int80_sockets_unfiltered, NULL));
}

TEST(int80_calls_are_filtered) {
        if (!have_ia32()) {
                if (getenv("HUTCH_TEST_MUST_WORK"))
                        fail_msg("no IA32 emulation and HUTCH_TEST_MUST_WORK is set");
                fprintf(stderr, "skip: the kernel does not run i386 syscalls (IA32 emulation "
                                "off), int $0x80 cannot bypass anything\n");
                skip();
        }
        ASSERT_CHILD_EXITED_OK(run_child(child_int80_filtered, NULL));
        /* Twin: the same calls without the filter reach the kernel. */
        ASSERT_CHILD_EXITED_OK(run_child(child_int80_unfiltered, NULL));
}
#endif

DEFINE_TEST_MAIN
