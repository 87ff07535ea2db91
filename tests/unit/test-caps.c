/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "ns/caps.h"
#include "test.h"

/* In a child: reports a failed check on stderr and exits with 1. */
#define CHILD_CHECK(cond)                                                                          \
        do {                                                                                       \
                if (!(cond)) {                                                                     \
                        fprintf(stderr, "%s:%d: child check failed: %s (errno: %s)\n", __FILE__,   \
                                __LINE__, #cond, strerror(errno));                                 \
                        _exit(1);                                                                  \
                }                                                                                  \
        } while (0)

/* Exit codes of the children, beyond 0 (passed) and 1 (a check failed). */
#define EXIT_NO_USERNS 77

/* Checks that /proc/self/status has every capability set empty; run by the
 * shell after exec, so it sees the exec'd process. */
#define SHELL_CHECK_CAPS_ZERO                                                                      \
        "for f in CapInh CapPrm CapEff CapBnd CapAmb; do "                                         \
        "grep -q \"^$f:[[:space:]]*0000000000000000$\" /proc/self/status || exit 1; "              \
        "done; exit 0"

static int run_child(int (*fn)(void)) {
        int status = 0;
        pid_t pid;

        pid = fork();
        if (pid < 0)
                fail_msg("fork: %s", strerror(errno));
        if (pid == 0)
                _exit(fn());
        if (waitpid(pid, &status, 0) != pid)
                fail_msg("waitpid: %s", strerror(errno));
        return status;
}

/* Asserts a child's status; exit 77 means "no user namespaces here". */
static void assert_child_ok_or_skip(int status) {
        if (WIFEXITED(status) && WEXITSTATUS(status) == EXIT_NO_USERNS) {
                if (getenv("HUTCH_TEST_MUST_WORK"))
                        fail_msg("cannot create a user namespace and HUTCH_TEST_MUST_WORK is set");
                fprintf(stderr, "skip: cannot create a user namespace here\n");
                skip();
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                fail_msg("child failed: %s %d", WIFEXITED(status) ? "exit" : "signal",
                         WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

/* In a child: enters a new user namespace in which it is uid/gid 0 with
 * every capability, as the sandbox's pre-exec child is. */
static void child_enter_userns(void) {
        char map[64];
        uid_t uid = getuid();
        gid_t gid = getgid();
        int n;

        if (unshare(CLONE_NEWUSER) < 0)
                _exit(EXIT_NO_USERNS);
        n = snprintf(map, sizeof(map), "0 %u 1", (unsigned)uid);
        CHILD_CHECK(n > 0 && (size_t)n < sizeof(map));
        CHILD_CHECK(write_string_file("/proc/self/uid_map", map) == 0);
        CHILD_CHECK(write_string_file("/proc/self/setgroups", "deny") == 0);
        n = snprintf(map, sizeof(map), "0 %u 1", (unsigned)gid);
        CHILD_CHECK(n > 0 && (size_t)n < sizeof(map));
        CHILD_CHECK(write_string_file("/proc/self/gid_map", map) == 0);
        CHILD_CHECK(getuid() == 0);
}

/* Returns whether the /proc/self/status line @key has an all-zero mask. */
static bool status_caps_zero(const char *key) {
        _cleanup_free_ char *s = NULL;
        const char *p;
        size_t klen = strlen(key);

        if (read_full_file("/proc/self/status", 1 << 16, &s) < 0)
                return false;
        for (p = s; p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
                if (strncmp(p, key, klen) != 0 || p[klen] != ':')
                        continue;
                p += klen + 1;
                while (*p == ' ' || *p == '\t')
                        p++;
                return strncmp(p, "0000000000000000\n", 17) == 0;
        }
        return false;
}

/* Runs /bin/sh with SHELL_CHECK_CAPS_ZERO and returns its exit status
 * (0: every set empty after exec). */
static int exec_check_status(void) {
        int status = 0;
        pid_t pid;

        pid = fork();
        CHILD_CHECK(pid >= 0);
        if (pid == 0) {
                char *const argv[] = {"/bin/sh", "-c", SHELL_CHECK_CAPS_ZERO, NULL};
                char *const envp[] = {"PATH=/usr/bin:/bin", NULL};

                (void)execve(argv[0], argv, envp);
                _exit(127);
        }
        CHILD_CHECK(waitpid(pid, &status, 0) == pid);
        CHILD_CHECK(WIFEXITED(status));
        return WEXITSTATUS(status);
}

static int child_drop_in_userns(void) {
        static const char *const keys[] = {"CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb"};
        const int locked = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                           SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED;
        int bits, r;

        child_enter_userns();
        CHILD_CHECK(!status_caps_zero("CapEff"));

        r = caps_drop_all();
        if (r < 0) {
                fprintf(stderr, "caps_drop_all: %s\n", strerror(-r));
                return 2;
        }

        for (size_t i = 0; i < ELEMENTSOF(keys); i++)
                if (!status_caps_zero(keys[i])) {
                        fprintf(stderr, "%s not zero after caps_drop_all\n", keys[i]);
                        return 1;
                }
        bits = prctl(PR_GET_SECUREBITS, 0UL, 0UL, 0UL, 0UL);
        CHILD_CHECK(bits >= 0);
        CHILD_CHECK((bits & locked) == locked);
        CHILD_CHECK((bits & SECBIT_KEEP_CAPS) == 0);
        /* Locked: they cannot be switched off again. */
        CHILD_CHECK(prctl(PR_SET_SECUREBITS, 0UL, 0UL, 0UL, 0UL) == -1 && errno == EPERM);

        /* A privileged operation in our own user namespace now fails. */
        CHILD_CHECK(unshare(CLONE_NEWUTS) == -1 && errno == EPERM);
        CHILD_CHECK(sethostname("x", 1) == -1 && errno == EPERM);

        /* SECURITY: uid 0 execs a program and gets nothing back. */
        CHILD_CHECK(getuid() == 0);
        CHILD_CHECK(exec_check_status() == 0);
        return 0;
}

TEST(drop_all_in_user_namespace) {
        assert_child_ok_or_skip(run_child(child_drop_in_userns));
}

static int child_no_drop_in_userns(void) {
        child_enter_userns();
        /* Twin: uid 0 in the namespace keeps (and regains on exec) caps. */
        CHILD_CHECK(!status_caps_zero("CapEff"));
        CHILD_CHECK(exec_check_status() == 1);
        CHILD_CHECK(unshare(CLONE_NEWUTS) == 0);
        return 0;
}

TEST(without_drop_caps_survive_exec) {
        assert_child_ok_or_skip(run_child(child_no_drop_in_userns));
}

/* Runs /bin/sh -c @script (as the current ids) and returns its exit status. */
static int exec_sh_status(const char *script) {
        int status = 0;
        pid_t pid;

        pid = fork();
        CHILD_CHECK(pid >= 0);
        if (pid == 0) {
                char *const argv[] = {"/bin/sh", "-c", (char *)script, NULL};
                char *const envp[] = {"PATH=/usr/bin:/bin", NULL};

                (void)execve(argv[0], argv, envp);
                _exit(127);
        }
        CHILD_CHECK(waitpid(pid, &status, 0) == pid);
        CHILD_CHECK(WIFEXITED(status));
        return WEXITSTATUS(status);
}

#define SHELL_CHECK_PACKAGE_SET                                                                    \
        "grep -q '^CapEff:[[:space:]]*00000000000000fb$' /proc/self/status && "                    \
        "grep -q '^CapBnd:[[:space:]]*00000000000000fb$' /proc/self/status && "                    \
        "grep -q '^CapInh:[[:space:]]*0000000000000000$' /proc/self/status && "                    \
        "grep -q '^CapAmb:[[:space:]]*0000000000000000$' /proc/self/status"

static int child_keep_package_set(void) {
        const int locked = SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED |
                           SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
        int bits, r;

        child_enter_userns();
        r = caps_drop_all_but(CAPS_PACKAGE_SET);
        if (r < 0) {
                fprintf(stderr, "caps_drop_all_but: %s\n", strerror(-r));
                return 2;
        }
        bits = prctl(PR_GET_SECUREBITS, 0UL, 0UL, 0UL, 0UL);
        CHILD_CHECK(bits >= 0);
        CHILD_CHECK((bits & locked) == locked);
        CHILD_CHECK((bits & (SECBIT_NOROOT | SECBIT_NO_SETUID_FIXUP | SECBIT_KEEP_CAPS)) == 0);
        CHILD_CHECK(prctl(PR_SET_SECUREBITS, (unsigned long)(bits | SECBIT_KEEP_CAPS), 0UL, 0UL,
                          0UL) == -1);
        /* Exactly the set: uid 0 keeps it across exec. */
        CHILD_CHECK(exec_sh_status(SHELL_CHECK_PACKAGE_SET) == 0);
        /* Twin: nothing else, here or after exec (sys_admin, setpcap). */
        CHILD_CHECK(prctl(PR_CAPBSET_READ, (unsigned long)CAP_SYS_ADMIN, 0UL, 0UL, 0UL) == 0);
        CHILD_CHECK(prctl(PR_CAPBSET_READ, (unsigned long)CAP_SETPCAP, 0UL, 0UL, 0UL) == 0);
        CHILD_CHECK(unshare(CLONE_NEWUTS) == -1 && errno == EPERM);
        CHILD_CHECK(exec_sh_status("exec unshare -u true 2>/dev/null") != 0);
        /* A capability the set has works (chown to a mapped id). */
        {
                char path[] = "/tmp/hutch-test-caps-XXXXXX";
                int fd = mkstemp(path);

                CHILD_CHECK(fd >= 0);
                CHILD_CHECK(fchown(fd, 0, 0) == 0);
                (void)close(fd);
                (void)unlink(path);
        }
        /* Kept after the drop: a second call fails closed (no setpcap). */
        CHILD_CHECK(caps_drop_all_but(CAPS_PACKAGE_SET) == -EPERM);
        return 0;
}

TEST(drop_all_but_keeps_exactly_the_package_set) {
        assert_child_ok_or_skip(run_child(child_keep_package_set));
}

static int child_drop_twice(void) {
        child_enter_userns();
        CHILD_CHECK(caps_drop_all() == 0);
        /* Without CAP_SETPCAP now: fails closed, state unchanged. */
        CHILD_CHECK(caps_drop_all() == -EPERM);
        CHILD_CHECK(status_caps_zero("CapEff"));
        return 0;
}

TEST(drop_all_twice_fails_closed) {
        assert_child_ok_or_skip(run_child(child_drop_twice));
}

static int child_without_setpcap(void) {
        struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3};
        struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};

        /* Whatever we run as: no CAP_SETPCAP in the effective set. */
        CHILD_CHECK(syscall(SYS_capget, &header, data) == 0);
        data[CAP_SETPCAP / 32].effective &= ~(1U << (CAP_SETPCAP % 32));
        CHILD_CHECK(syscall(SYS_capset, &header, data) == 0);

        CHILD_CHECK(caps_drop_all() == -EPERM);
        return 0;
}

TEST(drop_all_without_setpcap_is_eperm) {
        assert_child_ok_or_skip(run_child(child_without_setpcap));
}

DEFINE_TEST_MAIN
