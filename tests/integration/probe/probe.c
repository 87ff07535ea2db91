/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* probe: runs inside a hutch sandbox and prints one fact per verb, so the
 * pytest suite can assert containment from the inside (docs/style.md §10).
 *
 * Usage: probe VERB [ARGS...]. Each verb prints its fact on stdout and exits
 * 0; a failed attempt that *is* the fact (can-open, create, syscall, connect,
 * tty) prints the errno name (EACCES, EROFS, ...) and still exits 0. Bad
 * usage exits 2; a failure of the probe's own machinery prints "probe: ..."
 * on stderr and exits 1.
 *
 * The probe is built static and without sanitizers: it runs under seccomp,
 * in a root that only has the host's read-only system directories, and must
 * not depend on anything but the kernel interface it is testing. */

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

/* A path that exists nowhere, so a call that the filter lets through fails
 * with ENOENT instead of changing anything. */
#define NOWHERE "/nonexistent-hutch-probe"

#ifndef CLONE_NEWUSER
#define CLONE_NEWUSER 0x10000000
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif
#ifndef PER_LINUX32
#define PER_LINUX32 0x0008
#endif
#define X32_SYSCALL_BIT 0x40000000L

extern char **environ;

static int fail(const char *what) {
        int e = errno;

        (void)fprintf(stderr, "probe: %s: %s\n", what, strerror(e));
        return 1;
}

static const char *errno_name(int e) {
        const char *n = strerrorname_np(e);

        return n ? n : "EUNKNOWN";
}

/* Prints "ok" for r >= 0, else the name of the errno in -r. */
static int print_result(long r) {
        if (r >= 0)
                (void)printf("ok\n");
        else
                (void)printf("%s\n", errno_name((int)-r));
        return 0;
}

/* Parses a decimal number without sign into @ret; no strtol (docs/style.md §5). */
static int parse_uint(const char *s, unsigned long max, unsigned long *ret) {
        unsigned long v = 0;

        if (!s || !*s)
                return -EINVAL;
        for (; *s; s++) {
                if (*s < '0' || *s > '9')
                        return -EINVAL;
                if (v > (max - (unsigned long)(*s - '0')) / 10)
                        return -ERANGE;
                v = v * 10 + (unsigned long)(*s - '0');
        }
        *ret = v;
        return 0;
}

/* Reads all of @path into a NUL-terminated malloc'd buffer. Returns the
 * length or -errno. */
static long read_file(const char *path, char **ret) {
        size_t len = 0, cap = 4096;
        char *buf;
        int fd;

        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        buf = malloc(cap + 1);
        if (!buf) {
                (void)close(fd);
                return -ENOMEM;
        }
        for (;;) {
                ssize_t n;

                if (len == cap) {
                        char *nbuf = realloc(buf, cap * 2 + 1);

                        if (!nbuf) {
                                free(buf);
                                (void)close(fd);
                                return -ENOMEM;
                        }
                        buf = nbuf;
                        cap *= 2;
                }
                n = read(fd, buf + len, cap - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        int e = errno;

                        free(buf);
                        (void)close(fd);
                        return -e;
                }
                if (n == 0)
                        break;
                len += (size_t)n;
        }
        (void)close(fd);
        buf[len] = '\0';
        *ret = buf;
        return (long)len;
}

/* uid-map / gid-map: each line of the map with its whitespace collapsed to
 * single spaces ("0 1879048192 65536"). */
static int verb_id_map(const char *path) {
        char *buf = NULL, *line, *save = NULL;
        long r;

        r = read_file(path, &buf);
        if (r < 0) {
                errno = (int)-r;
                return fail(path);
        }
        for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char *tok, *save2 = NULL;
                bool first = true;

                for (tok = strtok_r(line, " \t", &save2); tok;
                     tok = strtok_r(NULL, " \t", &save2)) {
                        (void)printf("%s%s", first ? "" : " ", tok);
                        first = false;
                }
                (void)printf("\n");
        }
        free(buf);
        return 0;
}

/* Looks up "NAME:" in /proc/self/status; prints the value without leading
 * whitespace, with the name too when @with_name. */
static int print_status_field(const char *name, bool with_name) {
        char *buf = NULL, *line, *save = NULL;
        size_t n = strlen(name);
        bool found = false;
        long r;

        r = read_file("/proc/self/status", &buf);
        if (r < 0) {
                errno = (int)-r;
                return fail("/proc/self/status");
        }
        for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                const char *v;

                if (strncmp(line, name, n) != 0 || line[n] != ':')
                        continue;
                v = line + n + 1;
                v += strspn(v, " \t");
                if (with_name)
                        (void)printf("%s: %s\n", name, v);
                else
                        (void)printf("%s\n", v);
                found = true;
                break;
        }
        free(buf);
        if (!found) {
                (void)fprintf(stderr, "probe: no field '%s' in /proc/self/status\n", name);
                return 1;
        }
        return 0;
}

static int verb_caps(void) {
        static const char *const caps[] = {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"};

        for (size_t i = 0; i < ELEMENTSOF(caps); i++)
                if (print_status_field(caps[i], true) != 0)
                        return 1;
        return 0;
}

/* fds: the probe's open fds in ascending order on one line, without the
 * one used to list them. */
static int verb_fds(void) {
        bool open_fds[4096] = {false};
        struct dirent *de;
        DIR *d;

        d = opendir("/proc/self/fd");
        if (!d)
                return fail("/proc/self/fd");
        while ((de = readdir(d))) {
                unsigned long fd;

                if (parse_uint(de->d_name, INT_MAX, &fd) < 0)
                        continue;
                if ((int)fd == dirfd(d))
                        continue;
                if (fd >= ELEMENTSOF(open_fds)) {
                        (void)fprintf(stderr, "probe: fd %lu too large\n", fd);
                        (void)closedir(d);
                        return 1;
                }
                open_fds[fd] = true;
        }
        (void)closedir(d);

        bool first = true;
        for (size_t i = 0; i < ELEMENTSOF(open_fds); i++)
                if (open_fds[i]) {
                        (void)printf("%s%zu", first ? "" : " ", i);
                        first = false;
                }
        (void)printf("\n");
        return 0;
}

/* Undoes the octal escapes (\040 and friends) of /proc/self/mountinfo in
 * place. */
static void unescape_octal(char *s) {
        char *w = s;

        for (; *s; s++) {
                if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
                    s[3] >= '0' && s[3] <= '7') {
                        *w++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
                        s += 3;
                } else
                        *w++ = *s;
        }
        *w = '\0';
}

/* mountinfo PATH: "opts=... fstype=... source=... super=..." of the topmost
 * mount whose mount point is exactly PATH. */
static int verb_mountinfo(const char *path) {
        char *buf = NULL, *line, *save = NULL;
        const char *found_opts = NULL, *found_type = NULL, *found_src = NULL, *found_super = NULL;
        long r;

        r = read_file("/proc/self/mountinfo", &buf);
        if (r < 0) {
                errno = (int)-r;
                return fail("/proc/self/mountinfo");
        }
        for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char *f[6], *tok, *save2 = NULL, *dash, *type, *src, *super;
                size_t i = 0;

                /* The optional fields run up to " - "; split there first. */
                dash = strstr(line, " - ");
                if (!dash)
                        continue;
                *dash = '\0';
                for (tok = strtok_r(line, " ", &save2); tok && i < ELEMENTSOF(f);
                     tok = strtok_r(NULL, " ", &save2))
                        f[i++] = tok;
                if (i < 6)
                        continue;
                unescape_octal(f[4]);
                if (strcmp(f[4], path) != 0)
                        continue;
                type = strtok_r(dash + 3, " ", &save2);
                src = strtok_r(NULL, " ", &save2);
                super = strtok_r(NULL, " ", &save2);
                found_opts = f[5];
                found_type = type ? type : "?";
                found_src = src ? src : "?";
                found_super = super ? super : "?";
        }
        if (!found_opts) {
                free(buf);
                (void)printf("ENOENT\n");
                return 0;
        }
        (void)printf("opts=%s fstype=%s source=%s super=%s\n", found_opts, found_type, found_src,
                     found_super);
        free(buf);
        return 0;
}

/* statfs PATH: "type=0x... flags=ro,nosuid,... size=BYTES" or the errno
 * name. */
static int verb_statfs(const char *path) {
        struct statvfs sv;
        struct statfs sf;

        if (statfs(path, &sf) < 0 || statvfs(path, &sv) < 0)
                return print_result(-errno);
        (void)printf(
                "type=0x%lx flags=%s%s%s%s size=%llu\n", (unsigned long)sf.f_type,
                (sv.f_flag & ST_RDONLY) ? "ro" : "rw", (sv.f_flag & ST_NOSUID) ? ",nosuid" : "",
                (sv.f_flag & ST_NODEV) ? ",nodev" : "", (sv.f_flag & ST_NOEXEC) ? ",noexec" : "",
                (unsigned long long)sv.f_blocks * (unsigned long long)sv.f_frsize);
        return 0;
}

static int verb_can_open(const char *path, const char *mode) {
        int flags, fd;

        if (strcmp(mode, "r") == 0)
                flags = O_RDONLY;
        else if (strcmp(mode, "w") == 0)
                flags = O_WRONLY;
        else {
                (void)fprintf(stderr, "probe: mode must be r or w, not '%s'\n", mode);
                return 2;
        }
        fd = open(path, flags | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return print_result(-errno);
        (void)close(fd);
        return print_result(0);
}

static int verb_create(const char *path) {
        static const char data[] = "hutch-probe\n";
        ssize_t n;
        int fd;

        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0644);
        if (fd < 0)
                return print_result(-errno);
        n = write(fd, data, sizeof(data) - 1);
        if (n < 0) {
                int e = errno;

                (void)close(fd);
                return print_result(-e);
        }
        if (close(fd) < 0)
                return print_result(-errno);
        return print_result(0);
}

/* Low memory for the arguments of the calls made through int $0x80, whose
 * pointers are 32 bits wide. */
typedef struct LowMem {
        char nowhere[64];
        char none[8];
        char tmpfs[8];
        char buf[256];
} LowMem;

/* An argument that is a pointer into LowMem carries this tag and the offset
 * of the field. */
#define LOW_TAG (1L << 48)
#define LOW(field) (LOW_TAG | (long)offsetof(LowMem, field))

typedef enum CallKind {
        CALL_PLAIN, /* the result is a status */
        CALL_FD,    /* a returned fd is closed */
        CALL_FORK,  /* a returned 0 is the child: it exits at once */
} CallKind;

/* The calls of the seccomp deny-list (and a few that must stay allowed),
 * with arguments chosen so that, should the filter let them through, they
 * change nothing of the host and mostly fail with an errno other than EPERM
 * (ENOENT, EBADF, EINVAL, EFAULT) or succeed harmlessly, so that a missing
 * filter rule shows up as a different answer. -1 marks a call that does not
 * exist on that ABI. */
typedef struct SyscallCase {
        const char *name;
        long nr64;
        long nr32;
        CallKind kind;
        long args[6];
} SyscallCase;

static const SyscallCase syscall_cases[] = {
        {"getpid", SYS_getpid, 20, CALL_PLAIN, {0}},
        {"mount", SYS_mount, 21, CALL_PLAIN, {LOW(none), LOW(nowhere), LOW(tmpfs), 0, 0}},
        {"umount2", SYS_umount2, 52, CALL_PLAIN, {LOW(nowhere), 0x100}},
        {"pivot_root", SYS_pivot_root, 217, CALL_PLAIN, {LOW(nowhere), LOW(nowhere)}},
        {"chroot", SYS_chroot, 61, CALL_PLAIN, {LOW(nowhere)}},
        {"unshare", SYS_unshare, 310, CALL_PLAIN, {CLONE_NEWUSER}},
        {"setns", SYS_setns, 346, CALL_PLAIN, {-1, 0}},
        {"clone", SYS_clone, 120, CALL_FORK, {CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0}},
        {"clone-plain", SYS_clone, 120, CALL_FORK, {SIGCHLD, 0, 0, 0, 0}},
        {"clone3", SYS_clone3, 435, CALL_PLAIN, {0, 0}},
        {"bpf", SYS_bpf, 357, CALL_PLAIN, {0x7fff, 0, 0}},
        {"perf_event_open", SYS_perf_event_open, 336, CALL_PLAIN, {0, 0, -1, -1, 0}},
        {"userfaultfd", SYS_userfaultfd, 374, CALL_FD, {UFFD_USER_MODE_ONLY | O_CLOEXEC}},
        {"io_uring_setup", SYS_io_uring_setup, 425, CALL_PLAIN, {1, 0}},
        {"io_uring_enter", SYS_io_uring_enter, 426, CALL_PLAIN, {-1, 0, 0, 0, 0, 0}},
        {"io_uring_register", SYS_io_uring_register, 427, CALL_PLAIN, {-1, 0, 0, 0}},
        {"keyctl", SYS_keyctl, 288, CALL_PLAIN, {0x7fff, 0, 0, 0, 0}},
        {"add_key", SYS_add_key, 286, CALL_PLAIN, {0, 0, 0, 0, 0}},
        {"request_key", SYS_request_key, 287, CALL_PLAIN, {0, 0, 0, 0}},
        {"kexec_load", SYS_kexec_load, 283, CALL_PLAIN, {0, 0, 0, 0}},
        {"kexec_file_load", SYS_kexec_file_load, -1, CALL_PLAIN, {-1, -1, 0, 0, 0}},
        {"init_module", SYS_init_module, 128, CALL_PLAIN, {0, 0, 0}},
        {"finit_module", SYS_finit_module, 350, CALL_PLAIN, {-1, 0, 0}},
        {"delete_module", SYS_delete_module, 129, CALL_PLAIN, {0, 0}},
        {"reboot", SYS_reboot, 88, CALL_PLAIN, {0, 0, 0, 0}},
        {"swapon", SYS_swapon, 87, CALL_PLAIN, {LOW(nowhere), 0}},
        {"swapoff", SYS_swapoff, 115, CALL_PLAIN, {LOW(nowhere)}},
        {"iopl", SYS_iopl, 110, CALL_PLAIN, {0}},
        {"ioperm", SYS_ioperm, 101, CALL_PLAIN, {0, 0, 0}},
        {"open_by_handle_at", SYS_open_by_handle_at, 342, CALL_PLAIN, {-1, 0, 0}},
        {"ptrace", SYS_ptrace, 26, CALL_PLAIN, {0x7fff, 1, 0, 0}},
        {"process_vm_readv", SYS_process_vm_readv, 347, CALL_PLAIN, {0, 0, 0, 0, 0, 0}},
        {"process_vm_writev", SYS_process_vm_writev, 348, CALL_PLAIN, {0, 0, 0, 0, 0, 0}},
        {"personality", SYS_personality, 136, CALL_PLAIN, {PER_LINUX32}},
        {"personality-query", SYS_personality, 136, CALL_PLAIN, {0xffffffffL}},
        {"personality-zero", SYS_personality, 136, CALL_PLAIN, {0}},
        {"tiocsti", SYS_ioctl, 54, CALL_PLAIN, {-1, TIOCSTI, LOW(buf)}},
        {"tiocsti-stdin", SYS_ioctl, 54, CALL_PLAIN, {0, TIOCSTI, LOW(buf)}},
        {"tioclinux", SYS_ioctl, 54, CALL_PLAIN, {-1, TIOCLINUX, LOW(buf)}},
        {"tiocgwinsz", SYS_ioctl, 54, CALL_PLAIN, {-1, TIOCGWINSZ, LOW(buf)}},
        {"fsopen", SYS_fsopen, 430, CALL_FD, {LOW(tmpfs), 0}},
        {"fsmount", SYS_fsmount, 432, CALL_FD, {-1, 0, 0}},
        {"move_mount", SYS_move_mount, 429, CALL_PLAIN, {-1, LOW(nowhere), -1, LOW(nowhere), 0}},
        {"open_tree", SYS_open_tree, 428, CALL_FD, {-1, LOW(nowhere), 1 /* OPEN_TREE_CLONE */}},
        {"mount_setattr", SYS_mount_setattr, 442, CALL_PLAIN, {-1, LOW(nowhere), 0, 0, 0}},
};

/* int $0x80 from 64-bit code: the i386 entry point with i386 numbers. The
 * sixth argument goes in %ebp, which is saved around the call; the red zone
 * is skipped first because the push writes below %rsp. Returns the raw
 * result (-errno on failure). */
static long syscall_i386(long nr, const long a[6]) {
        long ret;

        __asm__ volatile("sub $128, %%rsp\n\t"
                         "push %%rbp\n\t"
                         "mov %k[a6], %%ebp\n\t"
                         "int $0x80\n\t"
                         "pop %%rbp\n\t"
                         "add $128, %%rsp"
                         : "=a"(ret)
                         : "a"(nr), "b"(a[0]), "c"(a[1]), "d"(a[2]), "S"(a[3]),
                           "D"(a[4]), [a6] "r"(a[5])
                         : "r8", "r9", "r10", "r11", "memory", "cc");
        /* The i386 ABI returns a 32-bit value; sign-extend it. */
        return (long)(int)ret;
}

typedef enum Abi {
        ABI_NATIVE,
        ABI_I386,
        ABI_X32,
} Abi;

static int verb_syscall(const char *name, Abi abi) {
        const SyscallCase *c = NULL;
        long a[6], nr, r;
        LowMem *low;

        for (size_t i = 0; i < ELEMENTSOF(syscall_cases); i++)
                if (strcmp(syscall_cases[i].name, name) == 0)
                        c = &syscall_cases[i];
        if (!c) {
                (void)fprintf(stderr, "probe: unknown syscall case '%s'\n", name);
                return 2;
        }
        switch (abi) {
        case ABI_NATIVE:
                nr = c->nr64;
                break;
        case ABI_I386:
                nr = c->nr32;
                break;
        case ABI_X32:
                nr = c->nr64 | X32_SYSCALL_BIT;
                break;
        default:
                return 2;
        }
        if (nr < 0) {
                (void)fprintf(stderr, "probe: '%s' does not exist on this ABI\n", name);
                return 2;
        }

        low = mmap(NULL, sizeof(LowMem), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
        if (low == MAP_FAILED)
                return fail("mmap");
        (void)snprintf(low->nowhere, sizeof(low->nowhere), "%s", NOWHERE);
        (void)snprintf(low->none, sizeof(low->none), "none");
        (void)snprintf(low->tmpfs, sizeof(low->tmpfs), "tmpfs");

        for (size_t i = 0; i < ELEMENTSOF(a); i++) {
                long v = c->args[i];

                if ((v & LOW_TAG) && v > 0)
                        v = (long)((uintptr_t)low + (uintptr_t)(v & ~LOW_TAG));
                a[i] = v;
        }
        /* process_vm_readv/writev act on our own pid with empty vectors. */
        if (c->nr64 == SYS_process_vm_readv || c->nr64 == SYS_process_vm_writev)
                a[0] = getpid();

        (void)fflush(stdout);
        if (abi == ABI_I386)
                r = syscall_i386(nr, a);
        else {
                r = syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
                if (r < 0)
                        r = -errno;
        }

        if (r == 0 && c->kind == CALL_FORK)
                _exit(0);
        if (r > 0 && c->kind == CALL_FORK)
                (void)waitpid((pid_t)r, NULL, 0);
        if (r >= 0 && c->kind == CALL_FD)
                (void)close((int)r);
        return print_result(r);
}

/* socket HOW FAMILY TYPE: creates a socket (or with a "pair" HOW a socket
 * pair) of FAMILY and TYPE (numbers) and prints "ok" or the errno's name.
 * HOW: "native" and "native-pair" (x86_64 socket, socketpair), "i386" and
 * "i386-pair" (the direct i386 calls, 359 and 360, through int $0x80),
 * "socketcall" and "socketcall-pair" (i386 socketcall, 102, with
 * SYS_SOCKET (1) or SYS_SOCKETPAIR (8): its arguments in low memory). */
typedef struct SocketLowMem {
        uint32_t args[4]; /* socketcall's arguments: i386 longs */
        int pair[2];
} SocketLowMem;

static int verb_socket(const char *how, const char *family, const char *type) {
        SocketLowMem *low;
        unsigned long fam, typ;
        bool pair = strstr(how, "-pair") != NULL;
        long r, a[6] = {0};

        if (parse_uint(family, 0xffffffffUL, &fam) < 0 || parse_uint(type, 0xffffffffUL, &typ) < 0)
                return 2;
        low = mmap(NULL, sizeof(*low), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
        if (low == MAP_FAILED)
                return fail("mmap");
        low->pair[0] = low->pair[1] = -1;
        if (strncmp(how, "native", 6) == 0) {
                r = pair ? syscall(SYS_socketpair, fam, typ, 0, low->pair)
                         : syscall(SYS_socket, fam, typ, 0);
                if (r < 0)
                        r = -errno;
        } else if (strncmp(how, "i386", 4) == 0) {
                a[0] = (long)fam;
                a[1] = (long)typ;
                a[3] = (long)(uintptr_t)low->pair;
                r = syscall_i386(pair ? 360 : 359, a);
        } else if (strncmp(how, "socketcall", 10) == 0) {
                low->args[0] = (uint32_t)fam;
                low->args[1] = (uint32_t)typ;
                low->args[2] = 0;
                low->args[3] = (uint32_t)(uintptr_t)low->pair;
                a[0] = pair ? 8 : 1;
                a[1] = (long)(uintptr_t)low->args;
                r = syscall_i386(102, a);
        } else {
                (void)fprintf(stderr, "probe: unknown socket call '%s'\n", how);
                return 2;
        }
        if (r >= 0 && !pair)
                (void)close((int)r);
        if (r >= 0 && pair) {
                (void)close(low->pair[0]);
                (void)close(low->pair[1]);
        }
        return print_result(r);
}

static int verb_ns(const char *name) {
        char path[PATH_MAX], target[256];
        ssize_t n;

        (void)snprintf(path, sizeof(path), "/proc/self/ns/%s", name);
        n = readlink(path, target, sizeof(target) - 1);
        if (n < 0)
                return print_result(-errno);
        target[n] = '\0';
        (void)printf("%s\n", target);
        return 0;
}

static int verb_tty(void) {
        int fd;

        fd = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return print_result(-errno);
        (void)close(fd);
        return print_result(0);
}

static int verb_env(void) {
        for (char **e = environ; e && *e; e++)
                (void)printf("%s\n", *e);
        return 0;
}

static int verb_hostname(void) {
        char name[HOST_NAME_MAX + 1] = {0};

        if (gethostname(name, sizeof(name) - 1) < 0)
                return fail("gethostname");
        (void)printf("%s\n", name);
        return 0;
}

static int verb_cwd(void) {
        char buf[PATH_MAX];

        if (!getcwd(buf, sizeof(buf)))
                return print_result(-errno);
        (void)printf("%s\n", buf);
        return 0;
}

/* Connects a TCP socket to @sa, waiting at most @timeout_ms. Returns 0 and
 * the connected fd in @ret_fd, or -errno (-ETIMEDOUT on timeout). */
static int connect_timeout(const struct sockaddr *sa, socklen_t len, int timeout_ms, int *ret_fd) {
        struct pollfd p;
        socklen_t elen = sizeof(int);
        int fd, r, err = 0;

        fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, sa, len) < 0 && errno != EINPROGRESS) {
                r = -errno;
                (void)close(fd);
                return r;
        }
        p = (struct pollfd){.fd = fd, .events = POLLOUT};
        r = poll(&p, 1, timeout_ms);
        if (r < 0) {
                r = -errno;
                (void)close(fd);
                return r;
        }
        if (r == 0) {
                (void)close(fd);
                return -ETIMEDOUT;
        }
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0) {
                r = -errno;
                (void)close(fd);
                return r;
        }
        if (err != 0) {
                (void)close(fd);
                return -err;
        }
        *ret_fd = fd;
        return 0;
}

static int verb_connect(const char *host, const char *port_s) {
        struct sockaddr_storage ss = {0};
        unsigned long port;
        socklen_t len;
        int fd = -1, r;

        if (parse_uint(port_s, 65535, &port) < 0) {
                (void)fprintf(stderr, "probe: invalid port '%s'\n", port_s);
                return 2;
        }
        if (inet_pton(AF_INET, host, &((struct sockaddr_in *)&ss)->sin_addr) == 1) {
                ((struct sockaddr_in *)&ss)->sin_family = AF_INET;
                ((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)port);
                len = sizeof(struct sockaddr_in);
        } else if (inet_pton(AF_INET6, host, &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1) {
                ((struct sockaddr_in6 *)&ss)->sin6_family = AF_INET6;
                ((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)port);
                len = sizeof(struct sockaddr_in6);
        } else {
                (void)fprintf(stderr, "probe: not a numeric address: '%s'\n", host);
                return 2;
        }
        r = connect_timeout((struct sockaddr *)&ss, len, 3000, &fd);
        if (r >= 0)
                (void)close(fd);
        return print_result(r);
}

/* listen-connect: a server and a client on 127.0.0.1 inside the sandbox;
 * one byte goes from the client to the server. */
static int verb_listen_connect(void) {
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof(sa);
        int srv, cli = -1, acc, r;
        char c = 'x';

        srv = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (srv < 0)
                return print_result(-errno);
        if (bind(srv, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(srv, 1) < 0 ||
            getsockname(srv, (struct sockaddr *)&sa, &len) < 0) {
                r = -errno;
                (void)close(srv);
                return print_result(r);
        }
        r = connect_timeout((struct sockaddr *)&sa, sizeof(sa), 3000, &cli);
        if (r < 0) {
                (void)close(srv);
                return print_result(r);
        }
        acc = accept4(srv, NULL, NULL, SOCK_CLOEXEC);
        if (acc < 0) {
                r = -errno;
                goto out;
        }
        if (send(cli, &c, 1, MSG_NOSIGNAL) != 1 || recv(acc, &c, 1, 0) != 1)
                r = -EIO;
        else
                r = 0;
        (void)close(acc);
out:
        (void)close(cli);
        (void)close(srv);
        return print_result(r);
}

static int verb_resolve(const char *name) {
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
        struct addrinfo *res = NULL;
        char addr[INET6_ADDRSTRLEN] = "?";
        int r;

        r = getaddrinfo(name, NULL, &hints, &res);
        if (r != 0) {
                (void)printf("error %s\n", gai_strerror(r));
                return 0;
        }
        if (res->ai_family == AF_INET)
                (void)inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr, addr,
                                sizeof(addr));
        else if (res->ai_family == AF_INET6)
                (void)inet_ntop(AF_INET6, &((struct sockaddr_in6 *)res->ai_addr)->sin6_addr, addr,
                                sizeof(addr));
        (void)printf("%s\n", addr);
        freeaddrinfo(res);
        return 0;
}

/* ifaces: "NAME up|down" for every interface, each once. */
static int verb_ifaces(void) {
        struct ifaddrs *ifa = NULL;
        char seen[64][IF_NAMESIZE + 1];
        size_t n_seen = 0;

        if (getifaddrs(&ifa) < 0)
                return fail("getifaddrs");
        for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
                bool dup = false;

                for (size_t j = 0; j < n_seen; j++)
                        if (strcmp(seen[j], i->ifa_name) == 0)
                                dup = true;
                if (dup || n_seen == ELEMENTSOF(seen))
                        continue;
                (void)snprintf(seen[n_seen++], sizeof(seen[0]), "%s", i->ifa_name);
                (void)printf("%s %s\n", i->ifa_name, (i->ifa_flags & IFF_UP) ? "up" : "down");
        }
        freeifaddrs(ifa);
        return 0;
}

static int verb_owner(const char *path) {
        struct stat st;

        if (stat(path, &st) < 0)
                return print_result(-errno);
        (void)printf("%u:%u\n", (unsigned)st.st_uid, (unsigned)st.st_gid);
        return 0;
}

static const char *file_type(mode_t m) {
        switch (m & S_IFMT) {
        case S_IFREG:
                return "reg";
        case S_IFDIR:
                return "dir";
        case S_IFLNK:
                return "lnk";
        case S_IFCHR:
                return "chr";
        case S_IFBLK:
                return "blk";
        case S_IFIFO:
                return "fifo";
        case S_IFSOCK:
                return "sock";
        default:
                return "unknown";
        }
}

/* lstat PATH: "type=reg nlink=1 owner=0:0 mode=0644 dev=0:42". */
static int verb_lstat(const char *path) {
        struct stat st;

        if (lstat(path, &st) < 0)
                return print_result(-errno);
        (void)printf("type=%s nlink=%lu owner=%u:%u mode=%04o dev=%u:%u\n", file_type(st.st_mode),
                     (unsigned long)st.st_nlink, (unsigned)st.st_uid, (unsigned)st.st_gid,
                     (unsigned)(st.st_mode & 07777), major(st.st_dev), minor(st.st_dev));
        return 0;
}

static int verb_readlink(const char *path) {
        char target[PATH_MAX];
        ssize_t n;

        n = readlink(path, target, sizeof(target) - 1);
        if (n < 0)
                return print_result(-errno);
        target[n] = '\0';
        (void)printf("%s\n", target);
        return 0;
}

/* read PATH: the file's bytes with NULs turned into newlines (for
 * /proc/PID/environ and cmdline); on failure the errno name and exit 1. */
static int verb_read(const char *path) {
        char *buf = NULL;
        long n;

        n = read_file(path, &buf);
        if (n < 0) {
                (void)printf("%s\n", errno_name((int)-n));
                return 1;
        }
        for (long i = 0; i < n; i++)
                if (buf[i] == '\0')
                        buf[i] = '\n';
        (void)fwrite(buf, 1, (size_t)n, stdout);
        free(buf);
        return 0;
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ls PATH: the names in PATH except "." and "..", sorted, one per line. */
static int verb_ls(const char *path) {
        char **names = NULL;
        size_t n = 0, cap = 0;
        struct dirent *de;
        DIR *d;

        d = opendir(path);
        if (!d)
                return print_result(-errno);
        while ((de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (n == cap) {
                        char **nn = realloc(names, (cap ? cap * 2 : 64) * sizeof(char *));

                        if (!nn) {
                                (void)closedir(d);
                                errno = ENOMEM;
                                return fail("ls");
                        }
                        names = nn;
                        cap = cap ? cap * 2 : 64;
                }
                names[n] = strdup(de->d_name);
                if (!names[n]) {
                        (void)closedir(d);
                        errno = ENOMEM;
                        return fail("ls");
                }
                n++;
        }
        (void)closedir(d);
        if (n > 0)
                qsort(names, n, sizeof(char *), cmp_str);
        for (size_t i = 0; i < n; i++) {
                (void)printf("%s\n", names[i]);
                free(names[i]);
        }
        free(names);
        return 0;
}

/* ps: "PID COMM" for every process visible in /proc. */
static int verb_ps(void) {
        struct dirent *de;
        DIR *d;

        d = opendir("/proc");
        if (!d)
                return fail("/proc");
        while ((de = readdir(d))) {
                char path[PATH_MAX], *comm = NULL;
                unsigned long pid;

                if (parse_uint(de->d_name, INT_MAX, &pid) < 0)
                        continue;
                (void)snprintf(path, sizeof(path), "/proc/%lu/comm", pid);
                if (read_file(path, &comm) < 0)
                        continue;
                comm[strcspn(comm, "\n")] = '\0';
                (void)printf("%lu %s\n", pid, comm);
                free(comm);
        }
        (void)closedir(d);
        return 0;
}

/* sleep-marker MARKER: prints "ready PID" and waits forever; MARKER is only
 * there so the test can find this process in the host's /proc. */
_Noreturn static void verb_sleep_marker(void) {
        (void)printf("ready %d\n", (int)getpid());
        (void)fflush(stdout);
        for (;;)
                (void)pause();
}

/* The classic chroot escape: chroot into a new directory below @dir while
 * the cwd stays outside it, walk up with "..", chroot there. Prints the
 * errno of the first step that fails, or "escaped" and whether the root
 * that was reached holds something the sandbox's root does not (/oldroot,
 * the staging tmpfs's mount point, or @marker). */
static int verb_chroot_escape(const char *dir, const char *marker) {
        char sub[PATH_MAX];
        struct stat st;

        (void)snprintf(sub, sizeof(sub), "%s/hutch-escape", dir);
        if (mkdir(sub, 0700) < 0 && errno != EEXIST)
                return print_result(-errno);
        if (chroot(sub) < 0)
                return print_result(-errno);
        for (int i = 0; i < 64; i++)
                if (chdir("..") < 0)
                        return print_result(-errno);
        if (chroot(".") < 0)
                return print_result(-errno);
        (void)printf("escaped %s\n", stat(marker, &st) == 0 ? "found-marker" : "no-marker");
        return 0;
}

static void usage(FILE *f) {
        (void)fprintf(f, "usage: probe VERB [ARGS]\n"
                         "verbs: uid-map gid-map caps status-field NAME fds mountinfo PATH\n"
                         "       statfs PATH can-open PATH r|w create PATH syscall NAME\n"
                         "       syscall32 NAME syscallx32 NAME ns NAME pid ppid sid tty env\n"
                         "       hostname cwd connect HOST PORT listen-connect resolve NAME\n"
                         "       ifaces owner PATH lstat PATH readlink PATH read PATH ls PATH\n"
                         "       ps sleep-marker MARKER chroot-escape DIR MARKER\n"
                         "       socket HOW FAMILY TYPE\n");
}

int main(int argc, char **argv) {
        const char *verb;

        if (argc < 2) {
                usage(stderr);
                return 2;
        }
        verb = argv[1];

#define ARGS(n)                                                                                    \
        do {                                                                                       \
                if (argc != 2 + (n)) {                                                             \
                        usage(stderr);                                                             \
                        return 2;                                                                  \
                }                                                                                  \
        } while (0)

        if (strcmp(verb, "chroot-escape") == 0) {
                ARGS(2);
                return verb_chroot_escape(argv[2], argv[3]);
        }
        if (strcmp(verb, "uid-map") == 0) {
                ARGS(0);
                return verb_id_map("/proc/self/uid_map");
        }
        if (strcmp(verb, "gid-map") == 0) {
                ARGS(0);
                return verb_id_map("/proc/self/gid_map");
        }
        if (strcmp(verb, "caps") == 0) {
                ARGS(0);
                return verb_caps();
        }
        if (strcmp(verb, "status-field") == 0) {
                ARGS(1);
                return print_status_field(argv[2], false);
        }
        if (strcmp(verb, "fds") == 0) {
                ARGS(0);
                return verb_fds();
        }
        if (strcmp(verb, "mountinfo") == 0) {
                ARGS(1);
                return verb_mountinfo(argv[2]);
        }
        if (strcmp(verb, "statfs") == 0) {
                ARGS(1);
                return verb_statfs(argv[2]);
        }
        if (strcmp(verb, "can-open") == 0) {
                ARGS(2);
                return verb_can_open(argv[2], argv[3]);
        }
        if (strcmp(verb, "create") == 0) {
                ARGS(1);
                return verb_create(argv[2]);
        }
        if (strcmp(verb, "syscall") == 0) {
                ARGS(1);
                return verb_syscall(argv[2], ABI_NATIVE);
        }
        if (strcmp(verb, "syscall32") == 0) {
                ARGS(1);
                return verb_syscall(argv[2], ABI_I386);
        }
        if (strcmp(verb, "syscallx32") == 0) {
                ARGS(1);
                return verb_syscall(argv[2], ABI_X32);
        }
        if (strcmp(verb, "socket") == 0) {
                ARGS(3);
                return verb_socket(argv[2], argv[3], argv[4]);
        }
        if (strcmp(verb, "ns") == 0) {
                ARGS(1);
                return verb_ns(argv[2]);
        }
        if (strcmp(verb, "pid") == 0) {
                ARGS(0);
                (void)printf("%d\n", (int)getpid());
                return 0;
        }
        if (strcmp(verb, "ppid") == 0) {
                ARGS(0);
                (void)printf("%d\n", (int)getppid());
                return 0;
        }
        if (strcmp(verb, "sid") == 0) {
                ARGS(0);
                (void)printf("%d\n", (int)getsid(0));
                return 0;
        }
        if (strcmp(verb, "tty") == 0) {
                ARGS(0);
                return verb_tty();
        }
        if (strcmp(verb, "env") == 0) {
                ARGS(0);
                return verb_env();
        }
        if (strcmp(verb, "hostname") == 0) {
                ARGS(0);
                return verb_hostname();
        }
        if (strcmp(verb, "cwd") == 0) {
                ARGS(0);
                return verb_cwd();
        }
        if (strcmp(verb, "connect") == 0) {
                ARGS(2);
                return verb_connect(argv[2], argv[3]);
        }
        if (strcmp(verb, "listen-connect") == 0) {
                ARGS(0);
                return verb_listen_connect();
        }
        if (strcmp(verb, "resolve") == 0) {
                ARGS(1);
                return verb_resolve(argv[2]);
        }
        if (strcmp(verb, "ifaces") == 0) {
                ARGS(0);
                return verb_ifaces();
        }
        if (strcmp(verb, "owner") == 0) {
                ARGS(1);
                return verb_owner(argv[2]);
        }
        if (strcmp(verb, "lstat") == 0) {
                ARGS(1);
                return verb_lstat(argv[2]);
        }
        if (strcmp(verb, "readlink") == 0) {
                ARGS(1);
                return verb_readlink(argv[2]);
        }
        if (strcmp(verb, "read") == 0) {
                ARGS(1);
                return verb_read(argv[2]);
        }
        if (strcmp(verb, "ls") == 0) {
                ARGS(1);
                return verb_ls(argv[2]);
        }
        if (strcmp(verb, "ps") == 0) {
                ARGS(0);
                return verb_ps();
        }
        if (strcmp(verb, "sleep-marker") == 0) {
                ARGS(1);
                verb_sleep_marker();
        }
#undef ARGS

        (void)fprintf(stderr, "probe: unknown verb '%s'\n", verb);
        usage(stderr);
        return 2;
}
