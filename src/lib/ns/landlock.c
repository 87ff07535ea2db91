/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "macro.h"
#include "ns/landlock.h"

/* COMPAT(linux-libc-dev < 6.2): the rights newer than the installed
 * headers. The values are kernel ABI and never change. */
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif

/* The write-type rights of ABI 1. */
#define ACCESS_FS_WRITE_V1                                                                         \
        (LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |                           \
         LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR |                           \
         LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |                               \
         LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |                             \
         LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM)

/* The rights the kernel accepts on a rule for a non-directory, restricted
 * to the write-type ones (EXECUTE and READ_FILE are never handled here). */
#define ACCESS_FS_WRITE_FILE_ONLY (LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE)

int landlock_get_abi(void) {
        long abi;

        abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
        if (abi < 0) {
                if (errno == ENOSYS || errno == EOPNOTSUPP)
                        return -EOPNOTSUPP;
                return negative_errno();
        }
        if (abi == 0 || abi > INT32_MAX)
                return -EOPNOTSUPP;
        return (int)abi;
}

/* Returns the write-type rights ABI @abi knows. */
static uint64_t write_access_for_abi(int abi) {
        uint64_t access = ACCESS_FS_WRITE_V1;

        if (abi >= 2)
                access |= LANDLOCK_ACCESS_FS_REFER;
        if (abi >= 3)
                access |= LANDLOCK_ACCESS_FS_TRUNCATE;
        return access;
}

/* COMPAT(linux-libc-dev < 6.12): the ruleset's attribute with its fields
 * of ABI 4 (network) and 6 (scopes), and the scopes. Kernel ABI: never
 * changes. */
typedef struct RulesetAttr {
        uint64_t handled_access_fs;
        uint64_t handled_access_net;
        uint64_t scoped;
} RulesetAttr;
#define SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define SCOPE_SIGNAL (1ULL << 1)

/* The read-type rights, of every ABI. */
#define ACCESS_FS_READ                                                                             \
        (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
/* Of those, what applies to a non-directory. */
#define ACCESS_FS_READ_FILE_ONLY (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE)

/* Grants @access beneath @fd (or only the rights that apply to files when
 * it is not a directory) in the ruleset @ruleset_fd. */
static int ruleset_allow_fd(int ruleset_fd, int fd, uint64_t access) {
        struct landlock_path_beneath_attr rule = {.parent_fd = fd};
        struct stat st;

        if (fstat(fd, &st) < 0)
                return negative_errno();
        rule.allowed_access =
                S_ISDIR(st.st_mode)
                        ? access
                        : access & (ACCESS_FS_WRITE_FILE_ONLY | ACCESS_FS_READ_FILE_ONLY);
        if (syscall(SYS_landlock_add_rule, ruleset_fd, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) < 0)
                return negative_errno();
        return 0;
}

static int ruleset_allow_path(int ruleset_fd, const char *path, uint64_t access) {
        _cleanup_close_ int fd = open(path, O_PATH | O_CLOEXEC);

        if (fd < 0)
                return negative_errno();
        return ruleset_allow_fd(ruleset_fd, fd, access);
}

/* A ruleset handling @handled, and the scopes @scoped (0 before ABI 6);
 * the ruleset's fd or -errno. */
static int ruleset_new(uint64_t handled, uint64_t scoped) {
        RulesetAttr attr = {.handled_access_fs = handled, .scoped = scoped};
        /* Only the fields the kernel may not know are left out. */
        size_t size = scoped ? sizeof(attr) : sizeof(attr.handled_access_fs);
        /* The ruleset fd is born O_CLOEXEC (the kernel always sets it). */
        long fd = syscall(SYS_landlock_create_ruleset, &attr, size, 0);

        return fd < 0 ? negative_errno() : (int)fd;
}

int landlock_restrict_writes(char *const *writable) {
        _cleanup_close_ int ruleset_fd = -EBADF;
        uint64_t handled;
        int abi;
        int r;

        abi = landlock_get_abi();
        if (abi < 0)
                return abi;

        /* SECURITY: only the rights named here are restricted; a right the
         * ruleset does not handle stays allowed everywhere. Handling every
         * write-type right this ABI knows is what makes "write only beneath
         * @writable" hold. Rights of later ABIs are not write-type (IOCTL_DEV
         * is deliberately not handled, see the header). */
        handled = write_access_for_abi(abi);
        ruleset_fd = ruleset_new(handled, 0);
        if (ruleset_fd < 0)
                return ruleset_fd;

        for (char *const *p = writable; p && *p; p++) {
                r = ruleset_allow_path(ruleset_fd, *p, handled);
                if (r < 0)
                        return r;
        }

        if (syscall(SYS_landlock_restrict_self, ruleset_fd, 0) < 0)
                return negative_errno();
        return 0;
}

int landlock_restrict_paths(const LandlockPath *paths, size_t n) {
        _cleanup_close_ int ruleset_fd = -EBADF;
        uint64_t write;
        int abi, r;

        abi = landlock_get_abi();
        if (abi < 0)
                return abi;
        /* SECURITY: every read-type and write-type right this ABI knows
         * is handled: what no rule grants is denied. From ABI 6, signals
         * and abstract unix sockets stay inside the domain too. */
        write = write_access_for_abi(abi);
        ruleset_fd = ruleset_new(ACCESS_FS_READ | write,
                                 abi >= 6 ? SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET : 0);
        if (ruleset_fd < 0)
                return ruleset_fd;
        for (size_t i = 0; i < n; i++) {
                uint64_t access = ACCESS_FS_READ | (paths[i].write ? write : 0);

                r = paths[i].path ? ruleset_allow_path(ruleset_fd, paths[i].path, access)
                                  : ruleset_allow_fd(ruleset_fd, paths[i].fd, access);
                if ((r == -ENOENT || r == -EACCES) && paths[i].optional)
                        continue;
                if (r < 0)
                        return r;
        }
        if (syscall(SYS_landlock_restrict_self, ruleset_fd, 0) < 0)
                return negative_errno();
        return 0;
}
