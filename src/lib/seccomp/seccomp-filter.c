/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "macro.h"
#include "seccomp/seccomp-filter.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080 /* COMPAT(glibc < 2.36): not in <sched.h> */
#endif

/* Denies every call of @nr (a syscall name, not quoted). */
#define DENY(nr, err, why)                                                                         \
        { #nr, (err), -1, 0, 0, (why), false }
/* Denies @nr when (argument @a & @m) == @v. */
#define DENY_ARG(nr, err, a, m, v, why)                                                            \
        { #nr, (err), (a), (m), (v), (why), false }
/* Denies @nr when argument @a > @v (unsigned, all 64 bits). */
#define DENY_ARG_GT(nr, err, a, v, why)                                                            \
        { #nr, (err), (a), 0, (v), (why), true }

/* clone() with the namespace flag @flag in arg0 (the flags on x86_64 and
 * i386; only s390 swaps the first two arguments). */
#define DENY_CLONE_NS(flag)                                                                        \
        DENY_ARG(clone, EPERM, 0, (flag), (flag), "clone into a new namespace: " #flag)

/* personality(): allowed only for PER_LINUX (0) and the query 0xffffffff.
 * A rule may compare an argument only once, so "v is neither 0 nor all
 * ones" is written as 32 alternatives, one per bit i: "bit i is set and bit
 * i+1 (mod 32) is clear". Such a pair exists exactly when v has both a set
 * and a clear bit: walk cyclically from any set bit and the walk must step
 * onto a clear bit somewhere. The mask keeps to the low 32 bits because the
 * kernel takes the argument as unsigned int. This refuses PER_LINUX32 and
 * the flags (ADDR_NO_RANDOMIZE weakens ASLR, READ_IMPLIES_EXEC and
 * MMAP_PAGE_ZERO help exploits): gdb's "disable-randomization" and
 * `setarch` then fail with EPERM. */
#define PERSONALITY_BIT(i)                                                                         \
        DENY_ARG(personality, EPERM, 0, (1ULL << (i)) | (1ULL << (((i) + 1) % 32)), 1ULL << (i),   \
                 "personality other than PER_LINUX or the query")
#define PERSONALITY_BITS_4(i)                                                                      \
        PERSONALITY_BIT(i), PERSONALITY_BIT((i) + 1), PERSONALITY_BIT((i) + 2),                    \
                PERSONALITY_BIT((i) + 3)

/* SECURITY: no set-user-id or set-group-id files. What the sandbox
 * creates in a mounted workspace or a read-write bind belongs to the
 * caller on the host (host root when hutch runs as root): a set-id bit
 * there would hand the caller's identity to anyone who can run the file
 * outside. nosuid only protects the sandbox's own mounts. In both tables:
 * a microVM's files reach the host through QEMU's 9p server. */
/* Other processes: their memory, their descriptors. */
#define OTHER_PROCESS_RULES                                                                        \
        DENY(ptrace, EPERM, "debugging; also PTRACE_TRACEME"),                                     \
                DENY(process_vm_readv, EPERM, "reads another process's memory"),                   \
                DENY(process_vm_writev, EPERM, "writes another process's memory"),                 \
                DENY(pidfd_getfd, EPERM, "steals another process's fds"),                          \
                DENY(kcmp, EPERM, "compares kernel objects across processes: exploit aid")

#define SETID_RULES                                                                                \
        DENY_ARG(chmod, EPERM, 1, S_ISUID, S_ISUID, "set-user-id bit"),                            \
                DENY_ARG(chmod, EPERM, 1, S_ISGID, S_ISGID, "set-group-id bit"),                   \
                DENY_ARG(fchmod, EPERM, 1, S_ISUID, S_ISUID, "set-user-id bit"),                   \
                DENY_ARG(fchmod, EPERM, 1, S_ISGID, S_ISGID, "set-group-id bit"),                  \
                DENY_ARG(fchmodat, EPERM, 2, S_ISUID, S_ISUID, "set-user-id bit"),                 \
                DENY_ARG(fchmodat, EPERM, 2, S_ISGID, S_ISGID, "set-group-id bit"),                \
                DENY_ARG(fchmodat2, EPERM, 2, S_ISUID, S_ISUID, "set-user-id bit"),                \
                DENY_ARG(fchmodat2, EPERM, 2, S_ISGID, S_ISGID, "set-group-id bit"),               \
                DENY_ARG(open, EPERM, 2, S_ISUID, S_ISUID, "creates a set-user-id file"),          \
                DENY_ARG(open, EPERM, 2, S_ISGID, S_ISGID, "creates a set-group-id file"),         \
                DENY_ARG(openat, EPERM, 3, S_ISUID, S_ISUID, "creates a set-user-id file"),        \
                DENY_ARG(openat, EPERM, 3, S_ISGID, S_ISGID, "creates a set-group-id file"),       \
                DENY_ARG(creat, EPERM, 1, S_ISUID, S_ISUID, "creates a set-user-id file"),         \
                DENY_ARG(creat, EPERM, 1, S_ISGID, S_ISGID, "creates a set-group-id file"),        \
                DENY_ARG(mknod, EPERM, 1, S_ISUID, S_ISUID, "creates a set-user-id file"),         \
                DENY_ARG(mknod, EPERM, 1, S_ISGID, S_ISGID, "creates a set-group-id file"),        \
                DENY_ARG(mknodat, EPERM, 2, S_ISUID, S_ISUID, "creates a set-user-id file"),       \
                DENY_ARG(mknodat, EPERM, 2, S_ISGID, S_ISGID, "creates a set-group-id file"),      \
                DENY(openat2, ENOSYS,                                                              \
                     "its mode lives in a struct seccomp cannot read; libc falls back to openat")

/* SECURITY: socket families, an allow-list written as deny rules on the
 * family (argument 0, compared in all 64 bits: exactly the values 1, 2, 10
 * and 16 pass). A network namespace isolates AF_INET, AF_INET6 and
 * AF_NETLINK (the sandbox's own lo and routes) and AF_UNIX (abstract
 * names; paths are the filesystem's); other families reach what it does
 * not isolate: AF_VSOCK the host's vsock space (on a VM with virtio-vsock,
 * the hypervisor's side), AF_PACKET, AF_ALG, AF_KEY, and rarely used
 * protocol families with a long history of kernel bugs. EAFNOSUPPORT is
 * what a kernel without the family answers, which programs handle. On
 * i386 the socketcall(2) path is denied whole (see the header). */
#define DENY_SOCKET_FAMILIES(nr)                                                                   \
        DENY_ARG(nr, EAFNOSUPPORT, 0, ~0ULL, 0, "family 0 (AF_UNSPEC)"),                           \
                DENY_ARG(nr, EAFNOSUPPORT, 0, ~0ULL, 3, "family 3 (AF_AX25)"),                     \
                DENY_ARG(nr, EAFNOSUPPORT, 0, ~3ULL, 4,                                            \
                         "families 4-7 (AF_IPX, AF_APPLETALK, AF_NETROM, AF_BRIDGE)"),             \
                DENY_ARG(nr, EAFNOSUPPORT, 0, ~1ULL, 8, "families 8-9 (AF_ATMPVC, AF_X25)"),       \
                DENY_ARG(nr, EAFNOSUPPORT, 0, ~0ULL, 11, "family 11 (AF_ROSE)"),                   \
                DENY_ARG(nr, EAFNOSUPPORT, 0, ~3ULL, 12,                                           \
                         "families 12-15 (AF_DECnet, AF_NETBEUI, AF_SECURITY, AF_KEY)"),           \
                DENY_ARG_GT(nr, EAFNOSUPPORT, 0, 16,                                               \
                            "families above 16 (AF_PACKET, AF_ALG, AF_VSOCK, AF_XDP, ...)")

/* SECURITY: the deny list. Keep one reason per line; the unit test rejects
 * duplicates and names libseccomp does not know. A call that i386
 * multiplexes through socketcall(2) is filtered there twice (see the
 * header); none may be one that it multiplexes through ipc(2). */
static const SeccompRule default_rules[] = {
        /* Mounts: the sandbox's mount tree is final once the command runs. */
        DENY(mount, EPERM, "changes the mount tree"),
        DENY(umount, EPERM, "i386 oldumount: changes the mount tree"),
        DENY(umount2, EPERM, "changes the mount tree, may uncover hidden paths"),
        DENY(pivot_root, EPERM, "changes the root"),
        DENY(chroot, EPERM, "changes the root; classic escape with an open dir fd"),
        DENY(move_mount, EPERM, "new mount API"),
        DENY(open_tree, EPERM, "new mount API: clones mount trees"),
        DENY(fsopen, EPERM, "new mount API"),
        DENY(fsconfig, EPERM, "new mount API"),
        DENY(fsmount, EPERM, "new mount API"),
        DENY(fspick, EPERM, "new mount API: reconfigures existing mounts"),
        DENY(mount_setattr, EPERM, "new mount API: changes mount flags, idmaps"),
        /* NEEDSWORK: open_tree_attr (Linux 6.15) is unknown to libseccomp
         * 2.5.4, so it cannot be named here and stays allowed. Cloning a
         * tree with it needs CAP_SYS_ADMIN, which caps_drop_all() removed;
         * add it once the build requires a libseccomp that knows it. */

        /* Namespaces: a fresh user namespace hands out full capabilities
         * again, which is the door to most kernel bugs reachable by users. */
        DENY(unshare, EPERM, "creates namespaces (any flags: unshare(0) is a no-op)"),
        DENY(setns, EPERM, "enters other namespaces"),
        DENY_CLONE_NS(CLONE_NEWNS),
        DENY_CLONE_NS(CLONE_NEWCGROUP),
        DENY_CLONE_NS(CLONE_NEWUTS),
        DENY_CLONE_NS(CLONE_NEWIPC),
        DENY_CLONE_NS(CLONE_NEWUSER),
        DENY_CLONE_NS(CLONE_NEWPID),
        DENY_CLONE_NS(CLONE_NEWNET),
        /* For clone() the bit 0x80 is inside CSIGNAL (an exit signal >= 128,
         * which the kernel rejects); denying it too costs nothing. */
        DENY_CLONE_NS(CLONE_NEWTIME),
        DENY(clone3, ENOSYS,
             "flags live in a struct seccomp cannot read; libc falls back to clone"),

        /* Kernel attack surface with a history of privilege escalations. */
        DENY(bpf, EPERM, "eBPF verifier and maps: large attack surface"),
        DENY(perf_event_open, EPERM, "perf: attack surface, side channels"),
        DENY(userfaultfd, EPERM, "freezes kernel threads mid-copy: exploit primitive"),
        DENY(io_uring_setup, EPERM, "io_uring: bypasses seccomp for its ops, many CVEs"),
        DENY(io_uring_enter, EPERM, "io_uring"),
        DENY(io_uring_register, EPERM, "io_uring"),
        DENY(keyctl, EPERM, "keyrings are not namespaced"),
        DENY(add_key, EPERM, "keyrings are not namespaced"),
        DENY(request_key, EPERM, "keyrings are not namespaced; may upcall to the host"),
        DENY(modify_ldt, EPERM, "LDT changes: past kernel bugs, unused by normal programs"),
        DENY(vm86, EPERM, "i386 virtual 8086 mode: past kernel bugs"),
        DENY(vm86old, EPERM, "i386 virtual 8086 mode: past kernel bugs"),

        /* Whole-machine state. */
        DENY(kexec_load, EPERM, "loads a new kernel"),
        DENY(kexec_file_load, EPERM, "loads a new kernel"),
        DENY(init_module, EPERM, "loads kernel code"),
        DENY(finit_module, EPERM, "loads kernel code"),
        DENY(delete_module, EPERM, "unloads kernel code"),
        DENY(reboot, EPERM, "reboots the machine (or the pid namespace)"),
        DENY(swapon, EPERM, "changes host swap"),
        DENY(swapoff, EPERM, "changes host swap"),
        DENY(iopl, EPERM, "raw port I/O"),
        DENY(ioperm, EPERM, "raw port I/O"),
        DENY(acct, EPERM, "process accounting to a file"),
        DENY(quotactl, EPERM, "filesystem quotas"),
        DENY(quotactl_fd, EPERM, "filesystem quotas"),
        DENY(settimeofday, EPERM, "sets the host clock"),
        DENY(stime, EPERM, "i386: sets the host clock"),
        DENY(clock_settime, EPERM, "sets the host clock"),
        DENY(clock_settime64, EPERM, "i386 time64: sets the host clock"),
        DENY(adjtimex, EPERM, "tunes the host clock"),
        DENY(clock_adjtime, EPERM, "tunes the host clock"),
        DENY(clock_adjtime64, EPERM, "i386 time64: tunes the host clock"),
        DENY(syslog, EPERM, "kernel log: leaks kernel addresses"),
        DENY(lookup_dcookie, EPERM, "oprofile leftover, removed from recent kernels"),
        DENY(vhangup, EPERM, "hangs up the terminal"),
        DENY(nfsservctl, EPERM, "removed in Linux 3.1"),
        DENY(uselib, EPERM, "obsolete a.out loader"),
        DENY(fanotify_init, EPERM, "filesystem-wide event monitoring"),

        /* File handles: open_by_handle_at reaches files outside the mount
         * tree (the 2014 "shocker" docker escape). */
        DENY(open_by_handle_at, EPERM, "opens files by handle, bypassing the mount tree"),
        DENY(name_to_handle_at, EPERM, "produces the handles open_by_handle_at consumes"),

        OTHER_PROCESS_RULES,

        SETID_RULES,

        /* Terminal injection: TIOCSTI pushes input into a shared terminal's
         * input queue (CVE-2017-5226 in bubblewrap); TIOCLINUX can do the
         * same through the console selection. The request is an unsigned
         * int in the kernel, so only the low 32 bits are compared. */
        DENY_ARG(ioctl, EPERM, 1, 0xffffffffULL, TIOCSTI, "TIOCSTI: types into the terminal"),
        DENY_ARG(ioctl, EPERM, 1, 0xffffffffULL, TIOCLINUX, "TIOCLINUX: console selection paste"),

        PERSONALITY_BITS_4(0),
        PERSONALITY_BITS_4(4),
        PERSONALITY_BITS_4(8),
        PERSONALITY_BITS_4(12),
        PERSONALITY_BITS_4(16),
        PERSONALITY_BITS_4(20),
        PERSONALITY_BITS_4(24),
        PERSONALITY_BITS_4(28),

        DENY_SOCKET_FAMILIES(socket),
        DENY_SOCKET_FAMILIES(socketpair),
};

/* SECURITY: QEMU's own filter (on top of its -sandbox): it serves the
 * guest's 9p requests on host folders as whoever runs it (host root for a
 * one-shot run as root, the sandbox's root behind an idmapped workspace),
 * so a guest's chmod u+s would become a set-id file on the host; and a
 * compromised QEMU must not reach into the processes its uid may debug
 * (the caller's, other sandboxes' QEMUs). Only what QEMU never needs is
 * here. */
static const SeccompRule vmm_rules[] = {
        OTHER_PROCESS_RULES,
        SETID_RULES,
};

const SeccompRule *seccomp_filter_default_rules(size_t *ret_n) {
        *ret_n = ELEMENTSOF(default_rules);
        return default_rules;
}

const SeccompRule *seccomp_filter_vmm_rules(size_t *ret_n) {
        *ret_n = ELEMENTSOF(vmm_rules);
        return vmm_rules;
}

/* Returns a context with the default action ALLOW and the attributes of the
 * default filter, holding only @arch. Every per-arch context must carry the
 * same attributes, else seccomp_merge() refuses them. */
static int filter_ctx_new(uint32_t arch, scmp_filter_ctx *ret) {
        _cleanup_(seccomp_releasep) scmp_filter_ctx ctx = NULL;
        uint32_t native = seccomp_arch_native();
        int r;

        ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx)
                return -ENOMEM;
        /* SECURITY: calls from any other audit arch (and x32 numbers on
         * x86_64) kill the whole process, not just the thread. */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
        if (r < 0)
                return r;
        /* SECURITY: NNP on: see the header. */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 1);
        if (r < 0)
                return r;
        /* Raw kernel errnos from seccomp_load() instead of -ECANCELED. */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_API_SYSRAWRC, 1);
        if (r < 0)
                return r;
        /* A binary search over syscall numbers: every allowed call, i.e.
         * nearly all of them, pays O(log n) instead of walking the list. */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
        if (r < 0)
                return r;
        if (arch != native) {
                r = seccomp_arch_add(ctx, arch);
                if (r < 0)
                        return r;
                r = seccomp_arch_remove(ctx, native);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(ctx);
        return 0;
}

/* Adds every rule of @rules that exists on @arch to @ctx (which holds
 * only @arch). */
static int filter_add_rules(scmp_filter_ctx ctx, uint32_t arch, const SeccompRule *rules,
                            size_t n_rules) {
        int r;

        for (size_t i = 0; i < n_rules; i++) {
                const SeccompRule *rule = &rules[i];
                struct scmp_arg_cmp cmp;
                bool multiplexed;
                int nr, arch_nr;

                /* Rule numbers are read in the native numbering (a
                 * negative pseudo number when the call is not native);
                 * libseccomp translates them to @arch. __NR_SCMP_ERROR
                 * means libseccomp knows the name on no architecture at
                 * all: a misspelt name, or a libseccomp older than the
                 * table. Fail rather than silently drop the rule. */
                nr = seccomp_syscall_resolve_name(rule->name);
                if (nr == __NR_SCMP_ERROR)
                        return -ENOSYS;
                arch_nr = seccomp_syscall_resolve_name_arch(arch, rule->name);
                multiplexed = seccomp_nr_is_socketcall(arch_nr);
                /* SECURITY: skipped only where the call does not exist
                 * (umount, vm86 and stime on x86_64, kexec_file_load on
                 * i386, iopl wherever there is no port I/O): nothing can invoke it
                 * there. */
                if (arch_nr < 0 && !multiplexed)
                        continue;
                if (rule->arg < 0)
                        cmp = (struct scmp_arg_cmp){};
                else if (rule->greater_than)
                        cmp = SCMP_CMP64((unsigned)rule->arg, SCMP_CMP_GT, rule->value);
                else
                        cmp = SCMP_CMP64((unsigned)rule->arg, SCMP_CMP_MASKED_EQ, rule->mask,
                                         rule->value);
                /* SECURITY: a multiplexed call goes through libseccomp's
                 * rewriting (seccomp_rule_add, not _exact): a rule for the
                 * direct call with the comparison, and one for the
                 * multiplexer with that sub-call and no other comparison
                 * (its arguments are in memory), which denies it whole. */
                if (multiplexed)
                        r = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO((uint32_t)rule->error), nr,
                                                   rule->arg < 0 ? 0 : 1, &cmp);
                else
                        r = seccomp_rule_add_exact_array(ctx, SCMP_ACT_ERRNO((uint32_t)rule->error),
                                                         nr, rule->arg < 0 ? 0 : 1, &cmp);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int filter_new(const SeccompRule *rules, size_t n_rules, scmp_filter_ctx *ret) {
        _cleanup_(seccomp_releasep) scmp_filter_ctx ctx = NULL;
        uint32_t arches[2];
        size_t n_arches = 0;
        int r;

        arches[n_arches++] = seccomp_arch_native();
        /* SECURITY: an x86_64 process can still make i386 calls with
         * `int $0x80`; they carry AUDIT_ARCH_I386 and their own numbers. */
        if (arches[0] == SCMP_ARCH_X86_64)
                arches[n_arches++] = SCMP_ARCH_X86;

        /* One context per architecture, merged at the end: rules can then
         * be added to exactly the architectures on which the call exists,
         * which a multi-arch context cannot express. */
        for (size_t a = 0; a < n_arches; a++) {
                _cleanup_(seccomp_releasep) scmp_filter_ctx one = NULL;

                r = filter_ctx_new(arches[a], &one);
                if (r < 0)
                        return r;
                r = filter_add_rules(one, arches[a], rules, n_rules);
                if (r < 0)
                        return r;
                if (!ctx) {
                        ctx = TAKE_PTR(one);
                        continue;
                }
                r = seccomp_merge(ctx, one);
                if (r < 0)
                        return r;
                one = NULL; /* released by a successful merge */
        }

        *ret = TAKE_PTR(ctx);
        return 0;
}

int seccomp_filter_new_default(scmp_filter_ctx *ret) {
        return filter_new(default_rules, ELEMENTSOF(default_rules), ret);
}

int seccomp_filter_new_vmm(scmp_filter_ctx *ret) {
        return filter_new(vmm_rules, ELEMENTSOF(vmm_rules), ret);
}

static int export(int (*make)(scmp_filter_ctx *), int fd) {
        _cleanup_(seccomp_releasep) scmp_filter_ctx ctx = NULL;
        int r;

        if (fd < 0)
                return -EBADF;
        r = make(&ctx);
        if (r < 0)
                return r;
        return seccomp_export_bpf(ctx, fd);
}

int seccomp_filter_export_default(int fd) {
        return export(seccomp_filter_new_default, fd);
}

int seccomp_filter_export_vmm(int fd) {
        return export(seccomp_filter_new_vmm, fd);
}
