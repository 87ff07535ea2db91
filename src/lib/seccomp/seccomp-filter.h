/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The sandbox's default seccomp filter: a deny-list in front of an ALLOW
 * default. It is installed by the pre-exec child (already inside its new
 * namespaces, after pivot_root, with every capability dropped) right before
 * execve() of the user's command, and it applies to the calling thread and
 * everything it later forks or execs.
 *
 * What the filter does:
 *
 *  - Every call that is not listed is allowed. A listed call fails with an
 *    errno (EPERM, ENOSYS for clone3, EAFNOSUPPORT for socket families)
 *    instead of killing the process, so programs print a clean error and
 *    may fall back.
 *  - The deny-list is the static table returned by
 *    seccomp_filter_default_rules(): mount and the new mount API, namespace
 *    creation and entry (unshare, setns, clone with any CLONE_NEW* flag),
 *    clone3 (ENOSYS: its flags sit in memory seccomp cannot read, and glibc
 *    falls back to clone), bpf, perf_event_open, userfaultfd, io_uring,
 *    the key management calls, kexec, kernel modules, reboot, swap,
 *    port I/O, file handles, ptrace and cross-process memory access,
 *    clock setting, syslog, ioctl(TIOCSTI/TIOCLINUX), personality values
 *    other than PER_LINUX (0) and the query 0xffffffff, socket(2) and
 *    socketpair(2) of any family but AF_UNIX, AF_INET, AF_INET6 and
 *    AF_NETLINK (the families a network namespace isolates or that stay
 *    inside the sandbox; AF_VSOCK, AF_PACKET, AF_ALG, AF_KEY and the rest
 *    fail with EAFNOSUPPORT, as on a kernel without them), and a few
 *    obsolete or rarely needed calls; each entry carries a one-line reason.
 *  - Calls that i386 multiplexes through socketcall(2) (socket and
 *    socketpair here) are filtered twice there: the direct i386 call
 *    (Linux 4.3+) compares its arguments like x86_64, and socketcall with
 *    that sub-call, whose arguments are in memory that seccomp cannot
 *    read, is denied whatever they are (SECURITY: an allow-list cannot be
 *    checked there, so it fails closed; 32-bit programs that create
 *    sockets through socketcall, as i386 glibc built for kernels before
 *    4.3 does, get EAFNOSUPPORT for every family). libseccomp makes both
 *    rules from one entry. All rules of such a name share one errno.
 *  - Architectures: the native one and, when native is x86_64, also i386,
 *    so a 64-bit process cannot slip past the list through `int $0x80`
 *    (those calls arrive with AUDIT_ARCH_I386 and i386 numbers). A name
 *    that does not exist on one of the two (umount, vm86 and stime only
 *    exist on i386; kexec_file_load only on x86_64) is skipped on that
 *    architecture alone. x32 calls (nr | 0x40000000 with AUDIT_ARCH_X86_64)
 *    are not a separate architecture of this filter. libseccomp 2.5.4
 *    opens the x86_64 section with "if nr >= 0x40000000 and nr != -1:
 *    bad-architecture action" (-1 is let through for tracers that skip a
 *    call; the kernel answers it with ENOSYS), and any other audit
 *    architecture gets the same action: SECCOMP_RET_KILL_PROCESS. The unit
 *    test checks both the generated jump and the kill.
 *  - SECURITY: loading always sets PR_SET_NO_NEW_PRIVS first
 *    (SCMP_FLTATR_CTL_NNP is left on). The sandbox sets it itself anyway;
 *    keeping the attribute on means the filter can never be in force on a
 *    process that could still gain privileges through a setuid exec, even
 *    when a caller holding CAP_SYS_ADMIN forgot to set it.
 *
 * None of these functions logs. */

#include <linux/filter.h>
#include <seccomp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One deny rule. With @arg < 0 the rule matches every call of @name; with
 * @arg in 0..5 it matches when (argument @arg & @mask) == @value, or with
 * @greater_than when argument @arg > @value (unsigned, all 64 bits; @mask
 * is 0). Several rules for one name are alternatives (any match denies). */
typedef struct SeccompRule {
        const char *name; /* syscall name as libseccomp spells it */
        int error;        /* the errno the call fails with (1..4095) */
        int arg;          /* argument compared, or -1 for every call */
        uint64_t mask;    /* with arg >= 0: (argument & mask) == value */
        uint64_t value;
        const char *reason; /* why it is denied, one line */
        bool greater_than;  /* with arg >= 0: argument > value instead */
} SeccompRule;

/* Returns the default deny table (static storage, never freed) and writes
 * its length to @ret_n. Exposed so tests and `hutch doctor` can inspect
 * exactly what seccomp_filter_new_default() compiles. */
const SeccompRule *seccomp_filter_default_rules(size_t *ret_n);

/* Builds the default deny-list filter, not loaded. Returns 0 and a filter
 * context the caller owns (release with seccomp_release()) in @ret, or
 * -errno: -ENOMEM, -ENOSYS if libseccomp does not know a name of the table
 * on any architecture (a libseccomp older than the table), or the error
 * libseccomp reported. */
int seccomp_filter_new_default(scmp_filter_ctx *ret);

/* Loads the default filter into the calling thread (no TSYNC: the
 * pre-exec child is single-threaded). The BPF program is the one
 * seccomp_filter_new_default() compiles, generated at build time by
 * seccomp-gen (so starting a sandbox costs no libseccomp work) for the
 * build host's architecture; a unit test checks the two stay identical.
 * Sets PR_SET_NO_NEW_PRIVS first (see above). Returns 0 or the kernel's
 * -errno (e.g. -EINVAL when the kernel lacks seccomp filters). */
int seccomp_filter_load_default(void);

/* The build-time program: returns it (static storage) and its length in
 * instructions in @ret_n. */
const struct sock_filter *seccomp_filter_default_program(size_t *ret_n);

/* Builds the default filter and writes its BPF program (an array of
 * struct sock_filter in host byte order, as seccomp_export_bpf() writes
 * it) to @fd. Returns 0 or -errno (-EBADF for a negative @fd). */
int seccomp_filter_export_default(int fd);

/* The VMM's filter: the set-id rules of the default table (chmod and the
 * creating calls with S_ISUID or S_ISGID, openat2), for QEMU, which
 * serves a microVM's 9p shares on host folders (vm.c loads it before it
 * execs QEMU). The same shape as the default: an ALLOW default, x86_64
 * with i386, other ABIs killed, NO_NEW_PRIVS. */
const SeccompRule *seccomp_filter_vmm_rules(size_t *ret_n);
int seccomp_filter_new_vmm(scmp_filter_ctx *ret);
int seccomp_filter_export_vmm(int fd);
int seccomp_filter_load_vmm(void);
const struct sock_filter *seccomp_filter_vmm_program(size_t *ret_n);

/* Whether @arch_nr, what seccomp_syscall_resolve_name_arch() answers for
 * a name on one architecture, is libseccomp's pseudo number of a call that
 * the architecture multiplexes through socketcall(2) (-101 for socket on
 * i386, up to -120). A rule for one is added as two (see above). Calls
 * that ipc(2) multiplexes (pseudo numbers from -201) have no place in a
 * table. */
static inline bool seccomp_nr_is_socketcall(int arch_nr) {
        return arch_nr <= -100 && arch_nr > -200;
}

/* Cleanup helper for scmp_filter_ctx variables. */
static inline void seccomp_releasep(scmp_filter_ctx *ctx) {
        if (*ctx) {
                seccomp_release(*ctx);
                *ctx = NULL;
        }
}
