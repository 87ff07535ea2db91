/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tests of src/lib/cgroup: the topology parser on sample texts (pure), and
 * the real thing as root: limits written and enforced (OOM kill, fork
 * refused at pids.max, cpu throttled), kill of a double-forked setsid
 * daemon, freeze, fail-closed paths, delegation to a normal user, and the
 * v2 controller paths after moving pids or cpu from v1 to v2.
 *
 * Every cgroup a test creates is named "t-..." (or "hutchcg..." for the
 * delegation tests). A teardown after each test kills and removes any
 * that is left, fails the test if it found one, and restores the host's
 * cgroup layout if a test changed it, also after a failed assertion
 * (cmocka jumps to the teardown) and on SIGTERM/SIGINT (meson's timeout). */

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <linux/sched.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup/cgroup.h"
#include "fd-util.h"
#include "macro.h"
#include "parse-util.h"
#include "test.h"

#define MiB (1024ULL * 1024ULL)
#define TEST_USER "hutchcg"

/* In a child: reports a failed check on stderr and exits with 1. */
#define CHILD_CHECK(cond)                                                                          \
        do {                                                                                       \
                if (!(cond)) {                                                                     \
                        fprintf(stderr, "%s:%d: child check failed: %s (errno: %s)\n", __FILE__,   \
                                __LINE__, #cond, strerror(errno));                                 \
                        _exit(1);                                                                  \
                }                                                                                  \
        } while (0)

/* ---- sample texts ---- */

/* systemd on pure cgroup v2. */
static const char mountinfo_v2[] =
        "22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n"
        "24 22 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
        "28 24 0:25 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 "
        "rw,nsdelegate,memory_recursiveprot\n";

/* An older distribution on pure v1, cpu and cpuacct co-mounted. */
static const char mountinfo_v1[] =
        "25 19 0:22 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755\n"
        "26 25 0:23 / /sys/fs/cgroup/systemd rw,nosuid shared:10 - cgroup cgroup "
        "rw,xattr,release_agent=/lib/systemd/systemd-cgroups-agent,name=systemd\n"
        "29 25 0:26 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:13 - cgroup cgroup "
        "rw,cpu,cpuacct\n"
        "30 25 0:27 / /sys/fs/cgroup/memory rw,nosuid shared:14 - cgroup cgroup rw,memory\n"
        "31 25 0:28 / /sys/fs/cgroup/pids rw,nosuid shared:15 - cgroup cgroup rw,pids\n"
        "32 25 0:29 / /sys/fs/cgroup/freezer rw,nosuid shared:16 - cgroup cgroup rw,freezer\n";

/* This machine: v1 controllers plus an (empty) v2 hierarchy. */
static const char mountinfo_hybrid[] =
        "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
        "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
        "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
        "34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
        "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
        "36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices\n"
        "37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer\n"
        "38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio\n"
        "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
        "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
        "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

static const char self_hybrid[] = "9:name=systemd:/\n"
                                  "8:pids:/\n"
                                  "7:blkio:/\n"
                                  "6:freezer:/\n"
                                  "5:devices:/\n"
                                  "4:memory:/process_api/f6a7\n"
                                  "3:cpuset:/\n"
                                  "2:cpuacct:/\n"
                                  "1:cpu:/\n"
                                  "0::/\n";

static void assert_place(const CgroupPlace *p, CgroupVersion v, const char *mount, const char *base,
                         bool create_base) {
        ASSERT_EQ(p->version, v);
        if (mount)
                ASSERT_STREQ(p->mount, mount);
        else
                ASSERT_NULL(p->mount);
        if (base)
                ASSERT_STREQ(p->base, base);
        else
                ASSERT_NULL(p->base);
        ASSERT_EQ(p->create_base, create_base);
        ASSERT_FALSE(p->writable); /* only the probe sets it */
}

/* ---- pure tests ---- */

TEST(controller_and_version_strings) {
        for (int i = 0; i < _CGROUP_CONTROLLER_MAX; i++)
                ASSERT_EQ(cgroup_controller_from_string(cgroup_controller_to_string(i)), i);
        ASSERT_STREQ(cgroup_controller_to_string(CGROUP_MEMORY), "memory");
        ASSERT_STREQ(cgroup_controller_to_string(CGROUP_PIDS), "pids");
        ASSERT_STREQ(cgroup_controller_to_string(CGROUP_CPU), "cpu");
        ASSERT_NULL(cgroup_controller_to_string(_CGROUP_CONTROLLER_MAX));
        ASSERT_NULL(cgroup_controller_to_string(_CGROUP_CONTROLLER_INVALID));
        ASSERT_EQ(cgroup_controller_from_string("cpuacct"), -EINVAL);
        ASSERT_EQ(cgroup_controller_from_string("Memory"), -EINVAL);
        ASSERT_EQ(cgroup_controller_from_string(NULL), -EINVAL);

        for (int i = 0; i < _CGROUP_VERSION_MAX; i++)
                ASSERT_EQ(cgroup_version_from_string(cgroup_version_to_string(i)), i);
        ASSERT_STREQ(cgroup_version_to_string(CGROUP_VERSION_NONE), "none");
        ASSERT_STREQ(cgroup_version_to_string(CGROUP_VERSION_1), "v1");
        ASSERT_STREQ(cgroup_version_to_string(CGROUP_VERSION_2), "v2");
        ASSERT_NULL(cgroup_version_to_string(_CGROUP_VERSION_MAX));
        ASSERT_NULL(cgroup_version_to_string(_CGROUP_VERSION_INVALID));
        ASSERT_EQ(cgroup_version_from_string("2"), -EINVAL);
        ASSERT_EQ(cgroup_version_from_string(NULL), -EINVAL);
}

TEST(parse_pure_v2_root) {
        static CgroupTopology t;

        ASSERT_OK(cgroup_topology_parse(mountinfo_v2, "0::/init.scope\n", true, &t, NULL));
        ASSERT_TRUE(t.privileged);
        assert_place(&t.v2, CGROUP_VERSION_2, "/sys/fs/cgroup", "/sys/fs/cgroup/hutch", true);
        for (int i = 0; i < _CGROUP_CONTROLLER_MAX; i++)
                assert_place(t.controllers + i, CGROUP_VERSION_2, "/sys/fs/cgroup",
                             "/sys/fs/cgroup/hutch", true);
        assert_place(&t.freezer, CGROUP_VERSION_NONE, NULL, NULL, false);
        assert_place(&t.cpuacct, CGROUP_VERSION_NONE, NULL, NULL, false);
        cgroup_topology_done(&t);
        ASSERT_NULL(t.v2.mount);
        cgroup_topology_done(&t); /* twice is fine */
        cgroup_topology_done(NULL);
}

TEST(parse_pure_v2_delegated_user) {
        static const char self[] =
                "0::/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope\n";
        static const char base[] =
                "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice";
        static CgroupTopology t;

        ASSERT_OK(cgroup_topology_parse(mountinfo_v2, self, false, &t, NULL));
        ASSERT_FALSE(t.privileged);
        assert_place(&t.v2, CGROUP_VERSION_2, "/sys/fs/cgroup", base, false);
        for (int i = 0; i < _CGROUP_CONTROLLER_MAX; i++)
                assert_place(t.controllers + i, CGROUP_VERSION_2, "/sys/fs/cgroup", base, false);
        cgroup_topology_done(&t);

        /* A trailing slash is the same cgroup. */
        ASSERT_OK(cgroup_topology_parse(mountinfo_v2, "0::/a/b/\n", false, &t, NULL));
        ASSERT_STREQ(t.v2.base, "/sys/fs/cgroup/a");
        cgroup_topology_done(&t);
        /* Directly below the root: the base is the mount point itself. */
        ASSERT_OK(cgroup_topology_parse(mountinfo_v2, "0::/a\n", false, &t, NULL));
        ASSERT_STREQ(t.v2.base, "/sys/fs/cgroup");
        cgroup_topology_done(&t);
}

TEST(parse_pure_v2_user_without_place) {
        static CgroupTopology t;

        /* In the root cgroup there is no parent to use. */
        ASSERT_OK(cgroup_topology_parse(mountinfo_v2, "0::/\n", false, &t, NULL));
        assert_place(&t.v2, CGROUP_VERSION_2, "/sys/fs/cgroup", NULL, false);
        assert_place(t.controllers + CGROUP_MEMORY, CGROUP_VERSION_2, "/sys/fs/cgroup", NULL,
                     false);
        cgroup_topology_done(&t);

        /* No "0::" line at all (a kernel without v2 support). */
        ASSERT_OK(cgroup_topology_parse(mountinfo_v2, "4:memory:/x\n", false, &t, NULL));
        assert_place(&t.v2, CGROUP_VERSION_2, "/sys/fs/cgroup", NULL, false);
        cgroup_topology_done(&t);

        /* No cgroup mounted at all. */
        ASSERT_OK(cgroup_topology_parse("22 1 254:1 / / rw - ext4 /dev/vda1 rw\n", "0::/a/b\n",
                                        false, &t, NULL));
        assert_place(&t.v2, CGROUP_VERSION_NONE, NULL, NULL, false);
        for (int i = 0; i < _CGROUP_CONTROLLER_MAX; i++)
                assert_place(t.controllers + i, CGROUP_VERSION_NONE, NULL, NULL, false);
        cgroup_topology_done(&t);
        ASSERT_OK(cgroup_topology_parse("", "", true, &t, NULL));
        assert_place(&t.v2, CGROUP_VERSION_NONE, NULL, NULL, false);
        cgroup_topology_done(&t);
}

TEST(parse_pure_v1) {
        static const char self[] = "5:freezer:/user/1000\n"
                                   "4:pids:/user.slice/user-1000.slice\n"
                                   "3:memory:/user.slice/user-1000.slice\n"
                                   "2:cpu,cpuacct:/user.slice\n"
                                   "1:name=systemd:/user.slice/user-1000.slice/session-2.scope\n";
        static CgroupTopology t;

        ASSERT_OK(cgroup_topology_parse(mountinfo_v1, self, true, &t, NULL));
        assert_place(&t.v2, CGROUP_VERSION_NONE, NULL, NULL, false);
        assert_place(t.controllers + CGROUP_MEMORY, CGROUP_VERSION_1, "/sys/fs/cgroup/memory",
                     "/sys/fs/cgroup/memory/hutch", true);
        assert_place(t.controllers + CGROUP_PIDS, CGROUP_VERSION_1, "/sys/fs/cgroup/pids",
                     "/sys/fs/cgroup/pids/hutch", true);
        assert_place(t.controllers + CGROUP_CPU, CGROUP_VERSION_1, "/sys/fs/cgroup/cpu,cpuacct",
                     "/sys/fs/cgroup/cpu,cpuacct/hutch", true);
        assert_place(&t.cpuacct, CGROUP_VERSION_1, "/sys/fs/cgroup/cpu,cpuacct",
                     "/sys/fs/cgroup/cpu,cpuacct/hutch", true);
        assert_place(&t.freezer, CGROUP_VERSION_1, "/sys/fs/cgroup/freezer",
                     "/sys/fs/cgroup/freezer/hutch", true);
        cgroup_topology_done(&t);

        /* A normal user: its own cgroup in each hierarchy. */
        ASSERT_OK(cgroup_topology_parse(mountinfo_v1, self, false, &t, NULL));
        assert_place(t.controllers + CGROUP_MEMORY, CGROUP_VERSION_1, "/sys/fs/cgroup/memory",
                     "/sys/fs/cgroup/memory/user.slice/user-1000.slice", false);
        assert_place(t.controllers + CGROUP_PIDS, CGROUP_VERSION_1, "/sys/fs/cgroup/pids",
                     "/sys/fs/cgroup/pids/user.slice/user-1000.slice", false);
        assert_place(t.controllers + CGROUP_CPU, CGROUP_VERSION_1, "/sys/fs/cgroup/cpu,cpuacct",
                     "/sys/fs/cgroup/cpu,cpuacct/user.slice", false);
        assert_place(&t.cpuacct, CGROUP_VERSION_1, "/sys/fs/cgroup/cpu,cpuacct",
                     "/sys/fs/cgroup/cpu,cpuacct/user.slice", false);
        assert_place(&t.freezer, CGROUP_VERSION_1, "/sys/fs/cgroup/freezer",
                     "/sys/fs/cgroup/freezer/user/1000", false);
        cgroup_topology_done(&t);

        /* A hierarchy without a line for us has no place. */
        ASSERT_OK(cgroup_topology_parse(mountinfo_v1, "3:memory:/m\n", false, &t, NULL));
        assert_place(t.controllers + CGROUP_MEMORY, CGROUP_VERSION_1, "/sys/fs/cgroup/memory",
                     "/sys/fs/cgroup/memory/m", false);
        assert_place(t.controllers + CGROUP_PIDS, CGROUP_VERSION_1, "/sys/fs/cgroup/pids", NULL,
                     false);
        cgroup_topology_done(&t);
}

TEST(parse_hybrid) {
        static CgroupTopology t;

        /* This machine, as root: v1 for every controller, v2 for kill. */
        ASSERT_OK(cgroup_topology_parse(mountinfo_hybrid, self_hybrid, true, &t, NULL));
        assert_place(&t.v2, CGROUP_VERSION_2, "/sys/fs/cgroup/unified",
                     "/sys/fs/cgroup/unified/hutch", true);
        assert_place(t.controllers + CGROUP_MEMORY, CGROUP_VERSION_1, "/sys/fs/cgroup/memory",
                     "/sys/fs/cgroup/memory/hutch", true);
        assert_place(t.controllers + CGROUP_PIDS, CGROUP_VERSION_1, "/sys/fs/cgroup/pids",
                     "/sys/fs/cgroup/pids/hutch", true);
        assert_place(t.controllers + CGROUP_CPU, CGROUP_VERSION_1, "/sys/fs/cgroup/cpu",
                     "/sys/fs/cgroup/cpu/hutch", true);
        assert_place(&t.cpuacct, CGROUP_VERSION_1, "/sys/fs/cgroup/cpuacct",
                     "/sys/fs/cgroup/cpuacct/hutch", true);
        assert_place(&t.freezer, CGROUP_VERSION_1, "/sys/fs/cgroup/freezer",
                     "/sys/fs/cgroup/freezer/hutch", true);
        cgroup_topology_done(&t);

        /* As a user: v1 places are our own cgroups, v2 has none ("0::/"). */
        ASSERT_OK(cgroup_topology_parse(mountinfo_hybrid, self_hybrid, false, &t, NULL));
        assert_place(&t.v2, CGROUP_VERSION_2, "/sys/fs/cgroup/unified", NULL, false);
        assert_place(t.controllers + CGROUP_MEMORY, CGROUP_VERSION_1, "/sys/fs/cgroup/memory",
                     "/sys/fs/cgroup/memory/process_api/f6a7", false);
        assert_place(t.controllers + CGROUP_PIDS, CGROUP_VERSION_1, "/sys/fs/cgroup/pids",
                     "/sys/fs/cgroup/pids", false);
        cgroup_topology_done(&t);

        /* pids moved to v2 (its v1 mount gone): v2 gets it, tentatively. */
        {
                char text[sizeof(mountinfo_hybrid)];
                char *line;

                memcpy(text, mountinfo_hybrid, sizeof(text));
                line = strstr(text, "39 31 0:36");
                ASSERT_NOT_NULL(line);
                memmove(line, strchr(line, '\n') + 1, strlen(strchr(line, '\n') + 1) + 1);
                ASSERT_OK(cgroup_topology_parse(text, self_hybrid, true, &t, NULL));
                assert_place(t.controllers + CGROUP_PIDS, CGROUP_VERSION_2,
                             "/sys/fs/cgroup/unified", "/sys/fs/cgroup/unified/hutch", true);
                assert_place(t.controllers + CGROUP_MEMORY, CGROUP_VERSION_1,
                             "/sys/fs/cgroup/memory", "/sys/fs/cgroup/memory/hutch", true);
                cgroup_topology_done(&t);
        }
}

TEST(parse_container_roots) {
        /* A container sees part of the hierarchy: mount root /docker/abc. */
        static const char mi[] = "50 40 0:40 /docker/abc /sys/fs/cgroup/memory rw - cgroup cgroup "
                                 "rw,memory\n"
                                 "51 40 0:41 /docker/abc /sys/fs/cgroup/pids rw - cgroup cgroup "
                                 "rw,pids\n"
                                 "52 40 0:42 /.. /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
        static CgroupTopology t;

        ASSERT_OK(cgroup_topology_parse(mi, "4:memory:/docker/abc/x\n3:pids:/elsewhere\n0::/y\n",
                                        false, &t, NULL));
        assert_place(t.controllers + CGROUP_MEMORY, CGROUP_VERSION_1, "/sys/fs/cgroup/memory",
                     "/sys/fs/cgroup/memory/x", false);
        /* Our pids cgroup is outside what is mounted: no place. */
        assert_place(t.controllers + CGROUP_PIDS, CGROUP_VERSION_1, "/sys/fs/cgroup/pids", NULL,
                     false);
        /* A "/.." root (cgroup namespace) is skipped, not an error. */
        assert_place(&t.v2, CGROUP_VERSION_NONE, NULL, NULL, false);
        cgroup_topology_done(&t);

        ASSERT_OK(cgroup_topology_parse(mi, "4:memory:/docker/abc\n", false, &t, NULL));
        assert_place(t.controllers + CGROUP_MEMORY, CGROUP_VERSION_1, "/sys/fs/cgroup/memory",
                     "/sys/fs/cgroup/memory", false);
        cgroup_topology_done(&t);
}

TEST(parse_prefers_root_mount_and_decodes_escapes) {
        static const char mi[] = "60 1 0:50 /sub /mnt/a rw - cgroup2 cgroup2 rw\n"
                                 "61 1 0:50 / /sys/fs/my\\040cg rw shared:3 master:1 - cgroup2 "
                                 "cgroup2 rw\n"
                                 "62 1 0:50 / /mnt/b rw - cgroup2 cgroup2 rw\n"
                                 "63 1 0:51 /x /mnt/m1 rw - cgroup cgroup rw,memory\n"
                                 "64 1 0:51 /y /mnt/m2 rw - cgroup cgroup rw,memory\n";
        static CgroupTopology t;

        ASSERT_OK(cgroup_topology_parse(mi, "0::/\n", true, &t, NULL));
        ASSERT_STREQ(t.v2.mount, "/sys/fs/my cg");
        ASSERT_STREQ(t.v2.base, "/sys/fs/my cg/hutch");
        /* Without a "/" root, the first one. */
        ASSERT_STREQ(t.controllers[CGROUP_MEMORY].mount, "/mnt/m1");
        cgroup_topology_done(&t);
}

static void assert_parse_error(const char *mountinfo, const char *self, int err) {
        CgroupTopology t = {.privileged = true};
        int r;

        r = cgroup_topology_parse(mountinfo, self, false, &t, NULL);
        if (r != -err)
                fail_msg("parse of \"%s\" / \"%s\": %d, expected %d", mountinfo, self, r, -err);
        /* @ret untouched on failure */
        ASSERT_TRUE(t.privileged);
        ASSERT_NULL(t.v2.mount);
}

/* Lines of other filesystems as real hosts have them (issue 24): `ip
 * netns add`, Docker and systemd's PrivateNetwork bind nsfs files whose
 * root is not a path; mount points with every escaped character; empty
 * sources; super options with spaces; many optional fields; pseudo
 * filesystems; deleted roots. */
static const char *const other_lines[] = {
        "50 46 0:4 net:[4026532178] /run/netns/demo rw shared:2 - nsfs nsfs rw",
        "51 22 0:4 uts:[4026531838] /tmp/h/uts rw,relatime - nsfs nsfs rw",
        "52 22 0:4 mnt:[4026531841] /tmp/h/mnt rw - nsfs nsfs rw",
        "53 22 0:4 cgroup:[4026531835] /tmp/h/cgroupns rw - nsfs nsfs rw",
        "54 22 0:51 / /tmp/h/a\\040b\\011c\\012d\\134e rw,relatime - tmpfs tmpfs rw",
        "55 22 0:52 / /tmp/h/empty-source rw - tmpfs  rw,size=4k",
        "56 22 0:53 / /tmp/h/fuse rw shared:5 master:3 propagate_from:2 unbindable - fuse.sshfs "
        "me@example.test:/a\\040b rw,user_id=0,group_id=0 and more words",
        "57 22 0:54 / /proc/sys/fs/binfmt_misc rw,relatime shared:9 - binfmt_misc binfmt_misc rw",
        "58 22 0:55 / /sys/fs/fuse/connections rw - fusectl fusectl rw",
        "59 22 0:56 / /proc/sys/fs/binfmt_misc rw shared:8 - autofs systemd-1 "
        "rw,fd=29,pgrp=1,timeout=0,minproto=5,maxproto=5,direct,pipe_ino=1234",
        "60 22 0:57 / /sys/fs/bpf rw - bpf bpf rw,mode=700",
        "61 22 0:58 anon_inode:[pidfd] /tmp/h/pidfd rw - pidfs pidfs rw",
        "62 22 254:1 /tmp/gone//deleted /tmp/h/deleted\\040(deleted) rw - ext4 /dev/vda1 rw",
        "63 22 0:59 / /var/lib/docker/overlay2/3f/merged rw,relatime - overlay overlay "
        "rw,lowerdir=/var/lib/docker/overlay2/l/A:/var/lib/docker/overlay2/l/B,upperdir=/u,"
        "workdir=/w",
        "64 22 0:60 relative-root /tmp/h/odd rw - pseudo none rw",
        "65 22 0:61 / /tmp/h/no-options rw - tmpfs tmpfs ",
};

TEST(parse_skips_lines_of_other_filesystems) {
        _cleanup_free_ char *text = NULL;
        static CgroupTopology want, t;
        size_t n = 0;

        ASSERT_OK(cgroup_topology_parse(mountinfo_v2, "0::/a/b\n", false, &want, NULL));
        /* Each line alone, before and after the cgroup2 line... */
        for (size_t i = 0; i < ELEMENTSOF(other_lines); i++) {
                _cleanup_free_ char *before = NULL, *after = NULL;

                ASSERT_TRUE(asprintf(&before, "%s\n%s", other_lines[i], mountinfo_v2) > 0);
                ASSERT_TRUE(asprintf(&after, "%s%s\n", mountinfo_v2, other_lines[i]) > 0);
                if (cgroup_topology_parse(after, "0::/a/b\n", true, &t, NULL) < 0)
                        fail_msg("refused: \"%s\"", other_lines[i]);
                ASSERT_STREQ(t.v2.base, "/sys/fs/cgroup/hutch");
                cgroup_topology_done(&t);
                ASSERT_OK(cgroup_topology_parse(before, "0::/a/b\n", false, &t, NULL));
                ASSERT_STREQ(t.v2.mount, want.v2.mount);
                ASSERT_STREQ(t.v2.base, want.v2.base);
                cgroup_topology_done(&t);
        }
        /* ...and all of them together. */
        for (size_t i = 0; i < ELEMENTSOF(other_lines); i++) {
                text = realloc(text, n + strlen(other_lines[i]) + 2);
                ASSERT_NOT_NULL(text);
                n += (size_t)sprintf(text + n, "%s\n", other_lines[i]);
        }
        text = realloc(text, n + sizeof(mountinfo_v2));
        ASSERT_NOT_NULL(text);
        memcpy(text + n, mountinfo_v2, sizeof(mountinfo_v2));
        ASSERT_OK(cgroup_topology_parse(text, "0::/a/b\n", false, &t, NULL));
        ASSERT_STREQ(t.v2.mount, "/sys/fs/cgroup");
        ASSERT_STREQ(t.v2.base, "/sys/fs/cgroup/a");
        cgroup_topology_done(&t);
        cgroup_topology_done(&want);
}

TEST(parse_decodes_every_escape_in_a_cgroup_mount_point) {
        static const char mi[] =
                "70 22 0:38 / /tmp/c\\040g\\011t\\012n\\134b rw shared:4 - cgroup2 "
                "cgroup2 rw,nsdelegate\n"
                "71 22 0:39 / /tmp/m\\040em rw - cgroup  rw,memory\n";
        static CgroupTopology t;

        ASSERT_OK(cgroup_topology_parse(mi, "0::/\n", true, &t, NULL));
        ASSERT_STREQ(t.v2.mount, "/tmp/c g\tt\nn\\b");
        ASSERT_STREQ(t.v2.base, "/tmp/c g\tt\nn\\b/hutch");
        /* An empty source is fine on a cgroup line too: it is not used. */
        ASSERT_STREQ(t.controllers[CGROUP_MEMORY].mount, "/tmp/m em");
        cgroup_topology_done(&t);
}

/* /proc/self/cgroup: only the line used is judged. */
TEST(parse_skips_proc_cgroup_lines_it_does_not_use) {
        static CgroupTopology t;

        /* Lines of other hierarchies with anything after the colons. */
        ASSERT_OK(cgroup_topology_parse(mountinfo_v2,
                                        "x:cpuset:relative\n12:name=systemd:\n"
                                        "5:devices:/a/../b\n0::/a/b\n",
                                        false, &t, NULL));
        ASSERT_STREQ(t.v2.base, "/sys/fs/cgroup/a");
        cgroup_topology_done(&t);
        /* The first line of a hierarchy is the one used. */
        ASSERT_OK(cgroup_topology_parse(mountinfo_v1, "3:memory:/m\n3:memory:bad\n", false, &t,
                                        NULL));
        ASSERT_STREQ(t.controllers[CGROUP_MEMORY].base, "/sys/fs/cgroup/memory/m");
        cgroup_topology_done(&t);
        /* Root uses none of it. */
        ASSERT_OK(cgroup_topology_parse(mountinfo_v2, "garbage\n", true, &t, NULL));
        ASSERT_STREQ(t.v2.base, "/sys/fs/cgroup/hutch");
        cgroup_topology_done(&t);
}

TEST(parse_errors) {
        static const char ok_line[] = "41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw";

        assert_parse_error(NULL, "0::/\n", EINVAL);
        assert_parse_error(ok_line, NULL, EINVAL);

        /* mountinfo: a line that is not one at all, whatever its type. */
        assert_parse_error("garbage", "", EBADMSG);
        assert_parse_error("41 31 0:38 / /x rw", "", EBADMSG);                   /* no " - " */
        assert_parse_error("41 31 0:38 / - cgroup2 cgroup2 rw", "", EBADMSG);    /* 5 fields */
        assert_parse_error("41 31 0:38 / /x rw - cgroup2 cgroup2", "", EBADMSG); /* 2 after */
        assert_parse_error("41 31 0:38 / /x rw - tmpfs tmpfs", "", EBADMSG);
        assert_parse_error("41 31 0:38 / /x rw -  tmpfs rw", "", EBADMSG); /* empty fstype */
        assert_parse_error("41 31 0:38 / /x rw -", "", EBADMSG);
        assert_parse_error("41  31 0:38 / /x rw - cgroup2 cgroup2 rw", "", EBADMSG);
        assert_parse_error("41  31 0:38 / /x rw - nsfs nsfs rw", "", EBADMSG);
        assert_parse_error("41 31 0:38 / /x rw  - nsfs nsfs rw", "", EBADMSG);
        assert_parse_error("x1 31 0:38 / /x rw - cgroup2 cgroup2 rw", "", EBADMSG);
        assert_parse_error("x1 31 0:4 net:[1] /x rw - nsfs nsfs rw", "", EBADMSG);
        assert_parse_error("41 -1 0:38 / /x rw - cgroup2 cgroup2 rw", "", EBADMSG);
        assert_parse_error("41 31 0-38 / /x rw - cgroup2 cgroup2 rw", "", EBADMSG);
        assert_parse_error("41 31 a:38 / /x rw - cgroup2 cgroup2 rw", "", EBADMSG);
        assert_parse_error("41 31 0: / /x rw - cgroup2 cgroup2 rw", "", EBADMSG);
        assert_parse_error("41 31 0:38 / /x\\04 rw - cgroup2 cgroup2 rw", "", EBADMSG);
        assert_parse_error("41 31 0:38 / /x\\000 rw - cgroup2 cgroup2 rw", "", EBADMSG);
        assert_parse_error("41 31 0:38 / /x\\08y rw - cgroup2 cgroup2 rw", "", EBADMSG);
        assert_parse_error("22 1 254:1 / /x\\1 rw - ext4 /dev/vda1 rw", "", EBADMSG);
        assert_parse_error("22 1 0:4 net:\\9 /x rw - nsfs nsfs rw", "", EBADMSG);
        assert_parse_error("41 31 0:38 / x rw - cgroup2 cgroup2 rw", "", EBADMSG);
        assert_parse_error("41 31 0:4 net:[1] x rw - nsfs nsfs rw", "", EBADMSG);
        /* A bad line after good ones. */
        assert_parse_error("41 31 0:38 / /x rw - cgroup2 cgroup2 rw\nbroken\n", "", EBADMSG);

        /* mountinfo: a cgroup line hutch would use is judged in full. */
        assert_parse_error("41 31 0:38 x /x rw - cgroup2 cgroup2 rw", "", EBADMSG);
        assert_parse_error("41 31 0:38 net:[1] /x rw - cgroup2 cgroup2 rw", "", EBADMSG);
        assert_parse_error("41 31 0:38 x /x rw - cgroup cgroup rw,memory", "", EBADMSG);
        assert_parse_error("41 31 0:38 / /a/../b rw - cgroup2 cgroup2 rw", "", EBADMSG);
        assert_parse_error("41 31 0:38 / /a/./b rw - cgroup cgroup rw,pids", "", EBADMSG);
        assert_parse_error("41 31 0:38 / /x rw - cgroup2 a rw more", "", EBADMSG);
        assert_parse_error("41 31 0:38 / /x rw - cgroup2 cgroup2 rw ", "", EBADMSG);
        assert_parse_error("41 31 0:38 / /x rw - cgroup cgroup ", "", EBADMSG);

        /* /proc/self/cgroup: lines without the two colons... */
        assert_parse_error(ok_line, "garbage", EBADMSG);
        assert_parse_error(ok_line, "0:/", EBADMSG);
        assert_parse_error(ok_line, "0::/\nbroken\n", EBADMSG);
        assert_parse_error(mountinfo_v1, "3:memory:/m\nbroken\n", EBADMSG);
        /* ...and the line used, which must be clean. */
        assert_parse_error(ok_line, "0::", EBADMSG);
        assert_parse_error(ok_line, "0::relative", EBADMSG);
        assert_parse_error(ok_line, "x::/", EBADMSG);
        assert_parse_error(ok_line, "1::/", EBADMSG);
        assert_parse_error(ok_line, "0::/a/../b\n", EBADMSG);
        assert_parse_error(mountinfo_v1, ":memory:/", EBADMSG);
        assert_parse_error(mountinfo_v1, "3:memory:/./m\n", EBADMSG);
        assert_parse_error(mountinfo_v1, "3:cpu,memory:rel\n", EBADMSG);
}

static void assert_parse_error_names(const char *mountinfo, const char *self, const char *want,
                                     unsigned line) {
        CgroupTopology t = {};
        HutchError e = {};

        ASSERT_ERROR(cgroup_topology_parse(mountinfo, self, false, &t, &e), EBADMSG);
        ASSERT_EQ(e.errnum, EBADMSG);
        ASSERT_EQ(e.line, line);
        if (!strstr(e.msg, want))
                fail_msg("\"%s\" is not in \"%s\"", want, e.msg);
}

/* What `hutch doctor` and `hutch run` show: the file, the line, what is
 * wrong and the line itself, in printable ASCII. */
TEST(parse_error_names_the_line) {
        _cleanup_free_ char *long_line = NULL, *text = NULL;

        assert_parse_error_names(
                "22 1 254:1 / / rw - ext4 /dev/vda1 rw\n\n"
                "41 31 0:4 net:[1] /x rw - cgroup2 cgroup2 rw\n",
                "0::/\n",
                "/proc/self/mountinfo line 3 is malformed (a cgroup mount whose root is not a "
                "path): '41 31 0:4 net:[1] /x rw - cgroup2 cgroup2 rw'",
                3);
        assert_parse_error_names("22 1 254:1 / /x\\1 rw - ext4 /dev/vda1 rw\n", "0::/\n",
                                 "line 1 is malformed (a bad octal escape in the root or the "
                                 "mount point): '22 1 254:1 / /x\\1 rw - ext4 /dev/vda1 rw'",
                                 1);
        assert_parse_error_names("1 2 3\x1b[31m'\xff\n", "", "'1 2 3\\x1b[31m\\x27\\xff'", 1);
        assert_parse_error_names(mountinfo_v2, "1:cpu:/\n0::/a/../b\n",
                                 "/proc/self/cgroup line 2 is malformed (our own cgroup is not "
                                 "an absolute path without \".\" or \"..\" components): "
                                 "'0::/a/../b'",
                                 2);

        /* A long line is cut. */
        long_line = malloc(5000);
        ASSERT_NOT_NULL(long_line);
        memset(long_line, 'a', 4999);
        long_line[4999] = '\0';
        ASSERT_TRUE(asprintf(&text, "%s\n", long_line) > 0);
        assert_parse_error_names(text, "",
                                 "(fewer than 6 fields before the separator, or an "
                                 "empty one): 'aaaa",
                                 1);
        assert_parse_error_names(text, "", "aaa'...", 1);
}

/* ---- small helpers ---- */

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        (void)st;
        (void)flag;
        (void)ftw;
        return remove(path) < 0 ? -1 : 0;
}

static void rm_rf(const char *path) {
        (void)nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void touch(const char *dir, const char *file, const char *content) {
        _cleanup_free_ char *p = NULL;
        _cleanup_close_ int fd = -EBADF;

        ASSERT_TRUE(asprintf(&p, "%s/%s", dir, file) > 0);
        fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(loop_write(fd, content, strlen(content)));
}

static bool path_exists(const char *path) {
        struct stat st;

        return path && stat(path, &st) >= 0;
}

/* Reads @file in @dir and strips one trailing newline; NULL if unreadable. */
static char *read_value(const char *dir, const char *file) {
        _cleanup_free_ char *p = NULL;
        char *s = NULL;
        size_t n;

        if (asprintf(&p, "%s/%s", dir, file) < 0)
                return NULL;
        if (read_full_file(p, 1 << 20, &s) < 0)
                return NULL;
        n = strlen(s);
        if (n > 0 && s[n - 1] == '\n')
                s[n - 1] = '\0';
        return s;
}

static void assert_file_value(const char *dir, const char *file, const char *want) {
        _cleanup_free_ char *v = read_value(dir, file);

        if (!v || strcmp(v, want) != 0)
                fail_msg("%s/%s is \"%s\", expected \"%s\"", dir, file, v ? v : "(unreadable)",
                         want);
}

/* A topology of a plain directory tree at @root posing as a cgroup2 mount
 * (and, with @v1_memory, a v1 memory mount below it). */
static void fake_topology(const char *root, bool v1_memory, bool privileged, const char *self,
                          CgroupTopology *t) {
        _cleanup_free_ char *mi = NULL;

        ASSERT_TRUE(asprintf(&mi,
                             "1 1 0:1 / %s rw - cgroup2 cgroup2 rw\n"
                             "%s%s%s",
                             root, v1_memory ? "2 1 0:2 / " : "", v1_memory ? root : "",
                             v1_memory ? "/v1mem rw - cgroup cgroup rw,memory\n" : "") > 0);
        ASSERT_OK(cgroup_topology_parse(mi, self, privileged, t, NULL));
        ASSERT_OK(cgroup_topology_probe(t));
}

TEST(probe_on_a_plain_tree) {
        char root[] = "/tmp/hutch-test-cgroup-XXXXXX";
        _cleanup_free_ char *hutch = NULL, *u = NULL, *v1 = NULL, *v1self = NULL;
        static CgroupTopology t;

        ASSERT_NOT_NULL(mkdtemp(root));
        touch(root, "cgroup.controllers", "memory pids\n");
        touch(root, "cgroup.subtree_control", "");
        touch(root, "cgroup.procs", "");

        /* Root, base created on demand: writable through the mount point;
         * cpu is not offered by the v2 hierarchy, so nothing serves it. */
        fake_topology(root, false, true, "0::/\n", &t);
        ASSERT_TRUE(t.v2.writable);
        ASSERT_TRUE(t.v2.create_base);
        ASSERT_EQ(t.controllers[CGROUP_MEMORY].version, CGROUP_VERSION_2);
        ASSERT_TRUE(t.controllers[CGROUP_MEMORY].writable);
        ASSERT_EQ(t.controllers[CGROUP_PIDS].version, CGROUP_VERSION_2);
        ASSERT_TRUE(t.controllers[CGROUP_PIDS].writable);
        ASSERT_EQ(t.controllers[CGROUP_CPU].version, CGROUP_VERSION_NONE);
        ASSERT_NULL(t.controllers[CGROUP_CPU].base);
        ASSERT_FALSE(t.controllers[CGROUP_CPU].writable);
        cgroup_topology_done(&t);

        /* An existing base without cgroup.procs is not a cgroup we can use. */
        ASSERT_TRUE(asprintf(&hutch, "%s/hutch", root) > 0);
        ASSERT_OK(mkdir(hutch, 0755));
        fake_topology(root, false, true, "0::/\n", &t);
        ASSERT_FALSE(t.v2.writable);
        ASSERT_FALSE(t.controllers[CGROUP_MEMORY].writable);
        cgroup_topology_done(&t);
        touch(hutch, "cgroup.procs", "");
        touch(hutch, "cgroup.subtree_control", "");
        fake_topology(root, false, true, "0::/\n", &t);
        ASSERT_TRUE(t.v2.writable);
        cgroup_topology_done(&t);
        /* A base that is not a directory. */
        rm_rf(hutch);
        touch(root, "hutch", "");
        fake_topology(root, false, true, "0::/\n", &t);
        ASSERT_FALSE(t.v2.writable);
        cgroup_topology_done(&t);

        /* A user: the parent of its cgroup, offering only what its parent
         * handed down (cgroup.controllers of the base, not the root). */
        ASSERT_TRUE(asprintf(&u, "%s/u", root) > 0);
        ASSERT_OK(mkdir(u, 0755));
        touch(u, "cgroup.controllers", "pids\n");
        touch(u, "cgroup.subtree_control", "");
        fake_topology(root, false, false, "0::/u/session.scope\n", &t);
        ASSERT_STREQ(t.v2.base, u);
        ASSERT_FALSE(t.v2.writable); /* no cgroup.procs yet */
        ASSERT_EQ(t.controllers[CGROUP_MEMORY].version, CGROUP_VERSION_NONE);
        ASSERT_EQ(t.controllers[CGROUP_PIDS].version, CGROUP_VERSION_2);
        ASSERT_FALSE(t.controllers[CGROUP_PIDS].writable);
        cgroup_topology_done(&t);
        touch(u, "cgroup.procs", "");
        fake_topology(root, false, false, "0::/u/session.scope\n", &t);
        ASSERT_TRUE(t.v2.writable);
        ASSERT_TRUE(t.controllers[CGROUP_PIDS].writable);
        ASSERT_FALSE(t.v2.create_base);
        cgroup_topology_done(&t);

        /* v1: created on demand needs a writable mount point; a user's own
         * cgroup must exist with cgroup.procs. */
        ASSERT_TRUE(asprintf(&v1, "%s/v1mem", root) > 0);
        ASSERT_OK(mkdir(v1, 0755));
        fake_topology(root, true, true, "0::/\n", &t);
        ASSERT_EQ(t.controllers[CGROUP_MEMORY].version, CGROUP_VERSION_1);
        ASSERT_TRUE(t.controllers[CGROUP_MEMORY].writable);
        cgroup_topology_done(&t);
        ASSERT_TRUE(asprintf(&v1self, "%s/me", v1) > 0);
        ASSERT_OK(mkdir(v1self, 0755));
        fake_topology(root, true, false, "4:memory:/me\n0::/\n", &t);
        ASSERT_STREQ(t.controllers[CGROUP_MEMORY].base, v1self);
        ASSERT_FALSE(t.controllers[CGROUP_MEMORY].writable);
        cgroup_topology_done(&t);
        touch(v1self, "cgroup.procs", "");
        fake_topology(root, true, false, "4:memory:/me\n0::/\n", &t);
        ASSERT_TRUE(t.controllers[CGROUP_MEMORY].writable);
        cgroup_topology_done(&t);

        ASSERT_ERROR(cgroup_topology_probe(NULL), EINVAL);
        rm_rf(root);
}

/* Runs unprivileged too: on a plain tree the kernel's files are missing,
 * so cgroup_new() fails after creating "<name>", and must remove it. */
TEST(new_fails_closed_and_cleans_up_on_a_plain_tree) {
        char root[] = "/tmp/hutch-test-cgroup-XXXXXX";
        _cleanup_free_ char *hutch = NULL, *dir = NULL;
        CgroupLimits lim = {.memory_max = 32 * MiB};
        HutchError e = {};
        static CgroupTopology t;
        Cgroup *c = NULL;

        ASSERT_NOT_NULL(mkdtemp(root));
        touch(root, "cgroup.controllers", "memory pids\n");
        touch(root, "cgroup.subtree_control", "");
        touch(root, "cgroup.procs", "");
        ASSERT_TRUE(asprintf(&hutch, "%s/hutch", root) > 0);
        ASSERT_OK(mkdir(hutch, 0755));
        touch(hutch, "cgroup.procs", "");
        touch(hutch, "cgroup.subtree_control", "");
        ASSERT_TRUE(asprintf(&dir, "%s/t-plain", hutch) > 0);

        fake_topology(root, false, true, "0::/\n", &t);
        ASSERT_ERROR(cgroup_new(&t, "t-plain", &lim, &c, &e), ENOENT);
        ASSERT_NULL(c);
        ASSERT_EQ(e.errnum, ENOENT);
        ASSERT_NOT_NULL(strstr(e.msg, "memory limit requested"));
        ASSERT_FALSE(path_exists(dir));
        /* The controller was enabled on the way down (the plain file now
         * holds what was written). */
        assert_file_value(root, "cgroup.subtree_control", "+memory");
        assert_file_value(hutch, "cgroup.subtree_control", "+memory");
        cgroup_topology_done(&t);
        rm_rf(root);
}

TEST(new_rejects_bad_input) {
        static const char *const bad[] = {
                "",
                "-a",
                "_a",
                ".a",
                "A",
                "a/b",
                "a b",
                "..",
                "a\n",
                "aB",
                "a:b",
                "\xc3\xa9",
                "0123456789012345678901234567890123456789012345678901234567890123", /* 64 */
        };
        static const char *const good[] = {
                "a",
                "0",
                "a-b_c.d",
                "012345678901234567890123456789012345678901234567890123456789012",
        };
        CgroupTopology t = {}; /* nothing serves anything */
        CgroupLimits none = {}, lim;
        HutchError e = {};
        Cgroup *c = NULL;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                e = (HutchError){};
                if (cgroup_new(&t, bad[i], &none, &c, &e) != -EINVAL)
                        fail_msg("name \"%s\" accepted", bad[i]);
                ASSERT_NOT_NULL(strstr(e.msg, "invalid cgroup name"));
        }
        ASSERT_ERROR(cgroup_new(&t, NULL, &none, &c, NULL), EINVAL);
        /* A good name gets past validation and fails for lack of a cgroup. */
        for (size_t i = 0; i < ELEMENTSOF(good); i++) {
                e = (HutchError){};
                ASSERT_ERROR(cgroup_new(&t, good[i], &none, &c, &e), EOPNOTSUPP);
                ASSERT_NOT_NULL(strstr(e.msg, "no writable cgroup"));
        }
        ASSERT_ERROR(cgroup_new(NULL, "a", &none, &c, NULL), EINVAL);
        ASSERT_ERROR(cgroup_new(&t, "a", NULL, &c, NULL), EINVAL);
        ASSERT_ERROR(cgroup_new(&t, "a", &none, NULL, NULL), EINVAL);

        lim = (CgroupLimits){.memory_swap_max = MiB};
        ASSERT_ERROR(cgroup_new(&t, "a", &lim, &c, &e), EINVAL);
        ASSERT_NOT_NULL(strstr(e.msg, "swap limit needs a memory limit"));
        lim = (CgroupLimits){.cpu_period_us = 100000};
        ASSERT_ERROR(cgroup_new(&t, "a", &lim, &c, &e), EINVAL);
        lim = (CgroupLimits){.cpu_quota_us = 999};
        ASSERT_ERROR(cgroup_new(&t, "a", &lim, &c, &e), EINVAL);
        lim = (CgroupLimits){.cpu_quota_us = 50000, .cpu_period_us = 999};
        ASSERT_ERROR(cgroup_new(&t, "a", &lim, &c, &e), EINVAL);
        lim = (CgroupLimits){.cpu_quota_us = 50000, .cpu_period_us = 1000001};
        ASSERT_ERROR(cgroup_new(&t, "a", &lim, &c, &e), EINVAL);
        lim = (CgroupLimits){.memory_max = UINT64_MAX, .memory_swap_max = 1};
        ASSERT_ERROR(cgroup_new(&t, "a", &lim, &c, &e), EINVAL);
        /* Valid limits on a topology that serves none of them. */
        for (int k = 0; k < _CGROUP_CONTROLLER_MAX; k++) {
                lim = (CgroupLimits){};
                if (k == CGROUP_MEMORY)
                        lim.memory_max = 32 * MiB;
                if (k == CGROUP_PIDS)
                        lim.pids_max = 10;
                if (k == CGROUP_CPU)
                        lim.cpu_quota_us = 50000;
                e = (HutchError){};
                ASSERT_ERROR(cgroup_new(&t, "a", &lim, &c, &e), EOPNOTSUPP);
                ASSERT_TRUE(strncmp(e.msg, cgroup_controller_to_string(k),
                                    strlen(cgroup_controller_to_string(k))) == 0);
                ASSERT_NOT_NULL(strstr(e.msg, "--allow-degraded"));
        }
        ASSERT_NULL(c);

        /* NULL objects */
        ASSERT_NULL(cgroup_free(NULL));
        ASSERT_EQ(cgroup_destroy(NULL), 0);
        ASSERT_ERROR(cgroup_remove(NULL), EINVAL);
        ASSERT_ERROR(cgroup_kill(NULL), EINVAL);
        ASSERT_ERROR(cgroup_set_frozen(NULL, true), EINVAL);
        ASSERT_ERROR(cgroup_attach(NULL, 1), EINVAL);
        ASSERT_ERROR(cgroup_stats(NULL, &(CgroupStats){}), EINVAL);
        ASSERT_ERROR(cgroup_leaf_fd_v2(NULL), EOPNOTSUPP);
        ASSERT_NULL(cgroup_name(NULL));
        ASSERT_NULL(cgroup_leaf_path_v2(NULL));
        ASSERT_NULL(cgroup_controller_path(NULL, CGROUP_MEMORY));
        ASSERT_EQ(cgroup_controller_version(NULL, CGROUP_MEMORY), CGROUP_VERSION_NONE);
        ASSERT_ERROR(cgroup_topology_detect(NULL, NULL), EINVAL);
}

/* ---- children ---- */

typedef int (*ChildFn)(int res_fd, void *arg);

typedef struct Child {
        pid_t pid;
        int go_fd;  /* write a byte to let the child run */
        int res_fd; /* what the child reports */
} Child;

/* Forks a child that waits for child_go() and then runs @fn. */
static Child child_start(ChildFn fn, void *arg) {
        int go[2], res[2];
        pid_t pid;

        ASSERT_OK(pipe2(go, O_CLOEXEC));
        ASSERT_OK(pipe2(res, O_CLOEXEC));
        pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                char ch;

                (void)close(go[1]);
                (void)close(res[0]);
                if (read(go[0], &ch, 1) != 1)
                        _exit(99); /* the test gave up */
                (void)close(go[0]);
                _exit(fn(res[1], arg));
        }
        (void)close(go[0]);
        (void)close(res[1]);
        return (Child){.pid = pid, .go_fd = go[1], .res_fd = res[0]};
}

static void child_go(Child *ch) {
        ASSERT_EQ(write(ch->go_fd, "g", 1), 1);
        ch->go_fd = safe_close(ch->go_fd);
}

/* Reads exactly @n bytes the child reported, waiting at most @ms. */
static void child_read(Child *ch, void *buf, size_t n, int ms) {
        size_t done = 0;

        while (done < n) {
                struct pollfd p = {.fd = ch->res_fd, .events = POLLIN};
                ssize_t k;

                if (poll(&p, 1, ms) != 1)
                        fail_msg("child %d reported nothing within %d ms", (int)ch->pid, ms);
                k = read(ch->res_fd, (char *)buf + done, n - done);
                if (k <= 0)
                        fail_msg("child %d closed its report early", (int)ch->pid);
                done += (size_t)k;
        }
}

/* Waits at most @ms for @pid; SIGKILLs it and fails on timeout. */
static int wait_pid(pid_t pid, int ms) {
        int status = 0;

        for (int i = 0; i < ms; i++) {
                pid_t r = waitpid(pid, &status, WNOHANG);

                if (r == pid)
                        return status;
                if (r < 0)
                        fail_msg("waitpid(%d): %s", (int)pid, strerror(errno));
                (void)usleep(1000);
        }
        (void)kill(pid, SIGKILL);
        (void)waitpid(pid, &status, 0);
        fail_msg("process %d did not end within %d ms", (int)pid, ms);
        return -1;
}

static void child_done(Child *ch) {
        ch->go_fd = safe_close(ch->go_fd);
        ch->res_fd = safe_close(ch->res_fd);
}

/* This process is a child subreaper (see main): orphans of the tests'
 * children come back to it and are reaped here. */
static void reap_orphans(void) {
        for (int i = 0; i < 200; i++) {
                pid_t r = waitpid(-1, NULL, WNOHANG);

                if (r < 0)
                        return; /* ECHILD */
                if (r == 0)
                        (void)usleep(5000);
        }
}

static bool killed_by(int status, int sig) {
        return WIFSIGNALED(status) && WTERMSIG(status) == sig;
}

static bool exited_ok(int status) {
        return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* ---- rlimits ---- */

static int child_rlimits(int res, void *arg) {
        CgroupLimits lim = {.memory_max = 64 * MiB, .memory_swap_max = 16 * MiB, .pids_max = 7};
        struct rlimit rl;
        void *p;

        (void)res;
        (void)arg;
        CHILD_CHECK(rlimits_apply(&lim) == 0);
        CHILD_CHECK(getrlimit(RLIMIT_AS, &rl) == 0);
        CHILD_CHECK(rl.rlim_cur == 80 * MiB && rl.rlim_max == 80 * MiB);
        CHILD_CHECK(getrlimit(RLIMIT_NPROC, &rl) == 0);
        CHILD_CHECK(rl.rlim_cur == 7 && rl.rlim_max == 7);
        /* The address space limit bites (mmap, not malloc: a sanitizer's
         * allocator aborts instead of returning NULL). */
        p = mmap(NULL, 200 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CHILD_CHECK(p == MAP_FAILED && errno == ENOMEM);
        /* Never raised: a bigger request keeps the lower hard limit. */
        lim = (CgroupLimits){.memory_max = 512 * MiB, .pids_max = 100};
        CHILD_CHECK(rlimits_apply(&lim) == 0);
        CHILD_CHECK(getrlimit(RLIMIT_AS, &rl) == 0);
        CHILD_CHECK(rl.rlim_max == 80 * MiB);
        CHILD_CHECK(getrlimit(RLIMIT_NPROC, &rl) == 0);
        CHILD_CHECK(rl.rlim_max == 7);
        /* No limit: nothing changes. */
        lim = (CgroupLimits){};
        CHILD_CHECK(rlimits_apply(&lim) == 0);
        CHILD_CHECK(getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_max == 80 * MiB);
        lim = (CgroupLimits){.memory_max = UINT64_MAX, .memory_swap_max = 2};
        CHILD_CHECK(rlimits_apply(&lim) == -EINVAL);
        CHILD_CHECK(rlimits_apply(NULL) == -EINVAL);
        return 0;
}

TEST(rlimits_apply_lowers_and_never_raises) {
        Child ch = child_start(child_rlimits, NULL);

        child_go(&ch);
        ASSERT_TRUE(exited_ok(wait_pid(ch.pid, 5000)));
        child_done(&ch);
}

/* ---- the real thing (root) ---- */

/* Host state, for the teardown and the signal handler. Written by main()
 * before any test runs and by the tests, all on the one thread; the
 * handler only reads it. */
#define WATCH_MAX 8
static char watch_mount[WATCH_MAX][PATH_MAX]; /* hierarchy mount points */
static bool watch_base_existed[WATCH_MAX];    /* "<mount>/hutch" before we ran */
static size_t n_watch;
static char host_v2_mount[PATH_MAX];
static bool user_created;

/* A v1 controller hierarchy this process unmounted to release the
 * controller to v2. */
typedef struct Moved {
        bool active;
        char ctrl[16];
        char v1_mount[PATH_MAX];
} Moved;
static Moved moved[2];

static void skip_because(const char *why) {
        if (getenv("HUTCH_TEST_MUST_WORK"))
                fail_msg("cannot run: %s, and HUTCH_TEST_MUST_WORK is set", why);
        fprintf(stderr, "skip: %s\n", why);
        skip();
}

/* For a test that does not apply to this host's layout (a v1 path on a
 * pure v2 host, and the reverse): a plain skip even under
 * HUTCH_TEST_MUST_WORK, which is about privileges and kernel features. */
static void skip_not_here(const char *why) {
        fprintf(stderr, "skip: %s\n", why);
        skip();
}

#define REQUIRE_ROOT()                                                                             \
        do {                                                                                       \
                if (geteuid() != 0)                                                                \
                        skip_because("needs root: creates cgroups below the hierarchies' roots");  \
        } while (0)

/* The topologies of the running test, freed by the teardown even when the
 * test skips or fails (cmocka jumps out of it). They must be static. */
static CgroupTopology *tracked[4];
static size_t n_tracked;

static void track(CgroupTopology *t) {
        for (size_t i = 0; i < n_tracked; i++)
                if (tracked[i] == t)
                        return;
        assert_true(n_tracked < ELEMENTSOF(tracked));
        tracked[n_tracked++] = t;
}

static void real_topology(CgroupTopology *t) {
        REQUIRE_ROOT();
        track(t);
        ASSERT_OK(cgroup_topology_detect(t, NULL));
        ASSERT_TRUE(t->privileged);
}

static void require_writable(const CgroupTopology *t, CgroupController k) {
        if (!t->controllers[k].writable) {
                char why[128];

                (void)snprintf(why, sizeof(why), "no writable %s cgroup here",
                               cgroup_controller_to_string(k));
                skip_because(why);
        }
}

static bool v1_line_has(const char *line, size_t n, const char *ctrl) {
        const char *sep = strstr(line, " - cgroup ");
        const char *opts, *end = line + n;
        size_t k = strlen(ctrl);

        if (!sep || sep >= end)
                return false;
        opts = memrchr(line, ' ', n);
        if (!opts)
                return false;
        for (const char *p = opts + 1; p < end;) {
                const char *comma = memchr(p, ',', (size_t)(end - p));
                size_t len = comma ? (size_t)(comma - p) : (size_t)(end - p);

                if (len == k && strncmp(p, ctrl, k) == 0)
                        return true;
                p += len + 1;
        }
        return false;
}

/* This machine's topology, as root, as if the v2 hierarchy (@drop_v2) or
 * the v1 hierarchies of the controllers in @drop_v1 were not mounted. */
static void filtered_topology(bool drop_v2, const char *const *drop_v1, CgroupTopology *t) {
        _cleanup_free_ char *mi = NULL, *self = NULL, *out = NULL;
        size_t o = 0;

        REQUIRE_ROOT();
        ASSERT_OK(read_full_file("/proc/self/mountinfo", 1 << 24, &mi));
        ASSERT_OK(read_full_file("/proc/self/cgroup", 1 << 16, &self));
        out = malloc(strlen(mi) + 1);
        ASSERT_NOT_NULL(out);
        for (const char *p = mi; *p;) {
                size_t n = strcspn(p, "\n");
                bool drop = drop_v2 && memmem(p, n, " - cgroup2 ", 11);

                for (const char *const *c = drop_v1; c && *c; c++)
                        drop = drop || v1_line_has(p, n, *c);
                if (!drop) {
                        memcpy(out + o, p, n);
                        o += n;
                        out[o++] = '\n';
                }
                p += n;
                if (*p == '\n')
                        p++;
        }
        out[o] = '\0';
        track(t);
        ASSERT_OK(cgroup_topology_parse(out, self, true, t, NULL));
        ASSERT_OK(cgroup_topology_probe(t));
}

/* Kills whatever runs in @path and below and removes it, deepest first.
 * For the teardown: does not use the library under test. */
static void force_remove_cgroup(const char *path, unsigned depth) {
        _cleanup_(closedirp) DIR *d = NULL;
        _cleanup_free_ char *procs = NULL;

        if (depth > 16)
                return;
        d = opendir(path);
        if (!d)
                return;
        for (struct dirent *de; (de = readdir(d));) {
                _cleanup_free_ char *sub = NULL;

                if (de->d_type != DT_DIR || de->d_name[0] == '.')
                        continue;
                if (asprintf(&sub, "%s/%s", path, de->d_name) > 0)
                        force_remove_cgroup(sub, depth + 1);
        }
        for (int i = 0; i < 200; i++) {
                _cleanup_free_ char *kill_path = NULL;

                free(procs);
                procs = read_value(path, "cgroup.procs");
                if (!procs || !procs[0])
                        break;
                if (asprintf(&kill_path, "%s/cgroup.kill", path) > 0 &&
                    write_string_file(kill_path, "1") >= 0) {
                        (void)usleep(5000);
                        continue;
                }
                for (char *p = procs; *p;) {
                        int pid;
                        size_t n = strcspn(p, "\n");

                        p[n] = '\0';
                        if (safe_atoi(p, &pid) >= 0 && pid > 0)
                                (void)kill(pid, SIGKILL);
                        p += n + 1;
                        if (p > procs + strlen(procs))
                                break;
                }
                (void)usleep(5000);
        }
        for (int i = 0; i < 200 && rmdir(path) < 0 && errno == EBUSY; i++)
                (void)usleep(5000);
}

/* Removes what a test left behind; returns how many cgroups it found. */
static int cleanup_leftovers(void) {
        static const char *const extra[] = {"hutchcg.slice", "hutchcg", "t-envbase"};
        int found = 0;

        for (size_t i = 0; i < n_watch; i++) {
                _cleanup_(closedirp) DIR *d = NULL;
                _cleanup_free_ char *base = NULL;

                for (size_t k = 0; k < ELEMENTSOF(extra); k++) {
                        _cleanup_free_ char *p = NULL;

                        if (asprintf(&p, "%s/%s", watch_mount[i], extra[k]) > 0 && path_exists(p)) {
                                fprintf(stderr, "leftover cgroup %s\n", p);
                                found++;
                                force_remove_cgroup(p, 0);
                        }
                }
                if (asprintf(&base, "%s/hutch", watch_mount[i]) < 0)
                        continue;
                d = opendir(base);
                if (!d)
                        continue;
                for (struct dirent *de; (de = readdir(d));) {
                        _cleanup_free_ char *p = NULL;

                        if (de->d_type != DT_DIR || strncmp(de->d_name, "t-", 2) != 0)
                                continue;
                        if (asprintf(&p, "%s/%s", base, de->d_name) < 0)
                                continue;
                        fprintf(stderr, "leftover cgroup %s\n", p);
                        found++;
                        force_remove_cgroup(p, 0);
                }
        }
        return found;
}

/* Writes without allocating: also used from the signal handler. */
static void write_quiet(const char *dir, const char *file, const char *value) {
        char p[PATH_MAX + 64];
        int fd;

        (void)snprintf(p, sizeof(p), "%s/%s", dir, file);
        fd = open(p, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return;
        (void)!write(fd, value, strlen(value));
        (void)close(fd);
}

/* Puts every v1 hierarchy this process unmounted back where it was.
 * Allocation-free: also runs from the SIGTERM handler. */
static void layout_restore(void) {
        for (size_t i = 0; i < ELEMENTSOF(moved); i++) {
                Moved *m = moved + i;
                char minus[32], hutch[PATH_MAX + 8];

                if (!m->active)
                        continue;
                (void)snprintf(minus, sizeof(minus), "-%s", m->ctrl);
                (void)snprintf(hutch, sizeof(hutch), "%s/hutch", host_v2_mount);
                /* The controller must leave v2 before v1 can have it. */
                write_quiet(hutch, "cgroup.subtree_control", minus);
                write_quiet(host_v2_mount, "cgroup.subtree_control", minus);
                for (int k = 0; k < 500; k++) {
                        if (mount("cgroup", m->v1_mount, "cgroup", 0, m->ctrl) >= 0) {
                                m->active = false;
                                break;
                        }
                        if (errno != EBUSY)
                                break;
                        (void)usleep(10000);
                }
                if (m->active)
                        dprintf(STDERR_FILENO,
                                "CRITICAL: could not mount the v1 %s hierarchy back at %s (%s); "
                                "run: mount -t cgroup -o %s cgroup %s\n",
                                m->ctrl, m->v1_mount, strerror(errno), m->ctrl, m->v1_mount);
        }
}

static void on_fatal_signal(int sig) {
        layout_restore();
        _exit(128 + sig);
}

/* Returns num_cgroups of @ctrl in /proc/cgroups (cgroups being destroyed
 * included), or -1. */
static int proc_cgroups_count(const char *ctrl) {
        _cleanup_free_ char *s = NULL;
        size_t k = strlen(ctrl);

        if (read_full_file("/proc/cgroups", 1 << 16, &s) < 0)
                return -1;
        for (char *p = s; *p;) {
                size_t n = strcspn(p, "\n");

                if (strncmp(p, ctrl, k) == 0 && p[k] == '\t') {
                        /* "NAME\tHIERARCHY\tNUM_CGROUPS\tENABLED" */
                        char *f = strchr(p + k + 1, '\t');
                        uint32_t count;
                        size_t len;

                        if (!f)
                                return -1;
                        f++;
                        len = strcspn(f, "\t\n");
                        f[len] = '\0';
                        return safe_atou32(f, &count) < 0 ? -1 : (int)count;
                }
                p += n;
                if (*p)
                        p++;
        }
        return -1;
}

/* Whether @dir has a child cgroup (cgroups being destroyed do not count:
 * the kernel releases the hierarchy once they are gone). */
static bool has_child_cgroups(const char *dir) {
        _cleanup_(closedirp) DIR *d = opendir(dir);

        if (!d)
                return true;
        for (struct dirent *de; (de = readdir(d));)
                if (de->d_type == DT_DIR && de->d_name[0] != '.')
                        return true;
        return false;
}

static bool v2_offers(const char *ctrl) {
        _cleanup_free_ char *s = read_value(host_v2_mount, "cgroup.controllers");

        if (!s)
                return false;
        for (char *tok = strtok(s, " \n"); tok; tok = strtok(NULL, " \n"))
                if (strcmp(tok, ctrl) == 0)
                        return true;
        return false;
}

/* Removes "<mount>/hutch" if it is empty. The hierarchy is about to be
 * unmounted anyway, which disturbs a concurrent hutch run far more. */
static void remove_empty_base(const char *mount) {
        char p[PATH_MAX + 8];

        (void)snprintf(p, sizeof(p), "%s/hutch", mount);
        (void)rmdir(p);
}

/* CHANGES THE HOST'S CGROUP LAYOUT: unmounts the v1 hierarchy of @k so
 * that the kernel hands the controller to the v2 hierarchy, where the
 * tests then use it. The teardown (or the signal handler) mounts it back.
 * Skips when that cannot be done safely: not root, no v2 hierarchy, the
 * controller not alone on a v1 mount of its own, child cgroups in it, or
 * the mount pinned by another process (umount: EBUSY). */
static void layout_move_to_v2(CgroupController k) {
        const char *ctrl = cgroup_controller_to_string(k);
        static CgroupTopology t;
        Moved *m = moved + (k == CGROUP_PIDS ? 0 : 1);
        char why[PATH_MAX + 128];
        int r = 0;

        /* Opt-in: for the seconds the v1 hierarchy is away, hutch runs
         * and other instances of this test on the host see no pids (or
         * cpu) cgroup at all. */
        if (!getenv("HUTCH_TEST_CGROUP_LAYOUT"))
                skip_not_here("changes the host's cgroup layout for a few seconds; set "
                              "HUTCH_TEST_CGROUP_LAYOUT=1 to run it");
        real_topology(&t);
        if (t.v2.version != CGROUP_VERSION_2 || !t.v2.writable) {
                cgroup_topology_done(&t);
                skip_not_here("no writable v2 hierarchy to move a controller to");
        }
        if (t.controllers[k].version != CGROUP_VERSION_1 ||
            (k == CGROUP_CPU && t.cpuacct.mount &&
             strcmp(t.cpuacct.mount, t.controllers[k].mount) == 0)) {
                (void)snprintf(why, sizeof(why), "%s is not on a v1 mount of its own here", ctrl);
                cgroup_topology_done(&t);
                skip_not_here(why);
        }
        /* Earlier tests (or hutch runs) may have created the base. */
        remove_empty_base(t.controllers[k].mount);
        if (has_child_cgroups(t.controllers[k].mount)) {
                (void)snprintf(why, sizeof(why), "the v1 %s hierarchy has child cgroups", ctrl);
                cgroup_topology_done(&t);
                skip_because(why);
        }
        /* Cgroups being destroyed still hang below the root: unmounting
         * then would keep the hierarchy (the kernel only releases one that
         * has no children at that moment). Give them time to go. */
        for (int i = 0; i < 300 && proc_cgroups_count(ctrl) != 1; i++)
                (void)usleep(10000);
        (void)snprintf(m->ctrl, sizeof(m->ctrl), "%s", ctrl);
        (void)snprintf(m->v1_mount, sizeof(m->v1_mount), "%s", t.controllers[k].mount);
        cgroup_topology_done(&t);

        for (int i = 0; i < 100; i++) {
                r = umount2(m->v1_mount, 0) < 0 ? -errno : 0;
                if (r != -EBUSY)
                        break;
                (void)usleep(10000);
        }
        if (r < 0) {
                /* Not turned into a failure by HUTCH_TEST_MUST_WORK: whether
                 * another process on the host holds the mount is outside the
                 * test's control. docs/cgroups.md says how these paths are
                 * also run in a throwaway kernel (user-mode Linux). */
                fprintf(stderr,
                        "skip: cannot unmount the v1 %s hierarchy at %s (%s): another process "
                        "pins it, so the v2 %s path cannot be exercised on this host\n",
                        ctrl, m->v1_mount, strerror(-r), ctrl);
                skip();
        }
        m->active = true;
        /* The kernel releases the controller once the hierarchy's
         * superblock goes away, after its dying cgroups are freed. */
        for (int i = 0; i < 300 && !v2_offers(ctrl); i++)
                (void)usleep(10000);
        if (!v2_offers(ctrl)) {
                layout_restore();
                /* Not a failure either: a mount namespace elsewhere on the
                 * host (a copy of this mount) keeps the superblock, and with
                 * it the v1 hierarchy, alive. */
                fprintf(stderr,
                        "skip: the v1 %s hierarchy was unmounted but the kernel did not release "
                        "%s to v2 within 3 s (another mount namespace still holds it); layout "
                        "restored\n",
                        ctrl, ctrl);
                skip();
        }
}

/* ---- what runs in the cgroups ---- */

static int child_alloc(int res, void *arg) {
        (void)res;
        (void)arg;
        /* 100 MiB, every page touched: far beyond a 32 MiB limit. */
        for (int i = 0; i < 100; i++) {
                char *p = malloc(MiB);

                if (!p)
                        return 2;
                memset(p, 0x5a, MiB);
        }
        return 0; /* survived: the limit did not work */
}

static int child_fork_loop(int res, void *arg) {
        int block[2], n = 0;

        (void)arg;
        CHILD_CHECK(pipe(block) == 0);
        for (int i = 0; i < 1000; i++) {
                pid_t p = fork();

                if (p < 0) {
                        CHILD_CHECK(errno == EAGAIN);
                        break;
                }
                if (p == 0) {
                        char ch;

                        (void)!read(block[0], &ch, 1); /* never written */
                        _exit(0);
                }
                n++;
        }
        CHILD_CHECK(write(res, &n, sizeof(n)) == sizeof(n));
        for (;;)
                pause();
}

static int64_t elapsed_ns(clockid_t clock, const struct timespec *a) {
        struct timespec b;

        (void)clock_gettime(clock, &b);
        return (b.tv_sec - a->tv_sec) * 1000000000L + (b.tv_nsec - a->tv_nsec);
}

/* Spins until it has used SPIN_CPU_NS of cpu time or SPIN_WALL_NS have
 * passed: without a quota it stops on the first (unless the machine gives
 * it under 2.5% of a core), under a 1% quota on the second. */
#define SPIN_CPU_NS 50000000L
#define SPIN_WALL_NS 2000000000L
static int child_spin(int res, void *arg) {
        struct timespec wall, cpu;
        volatile uint64_t x = 0;

        (void)res;
        (void)arg;
        (void)clock_gettime(CLOCK_MONOTONIC, &wall);
        (void)clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
        do {
                for (int i = 0; i < 100000; i++)
                        x = x + (uint64_t)i;
        } while (elapsed_ns(CLOCK_PROCESS_CPUTIME_ID, &cpu) < SPIN_CPU_NS &&
                 elapsed_ns(CLOCK_MONOTONIC, &wall) < SPIN_WALL_NS);
        return 0;
}

static int child_double_fork(int res, void *arg) {
        pid_t gc;
        int st;

        (void)arg;
        gc = fork();
        CHILD_CHECK(gc >= 0);
        if (gc == 0) {
                pid_t ggc;

                CHILD_CHECK(setsid() >= 0);
                ggc = fork();
                CHILD_CHECK(ggc >= 0);
                if (ggc == 0) {
                        pid_t me = getpid();

                        CHILD_CHECK(write(res, &me, sizeof(me)) == sizeof(me));
                        for (;;)
                                pause();
                }
                _exit(0);
        }
        CHILD_CHECK(waitpid(gc, &st, 0) == gc);
        for (;;)
                pause();
}

static int child_ticker(int res, void *arg) {
        (void)arg;
        for (;;) {
                if (write(res, "t", 1) != 1)
                        return 1;
                (void)usleep(2000);
        }
}

/* ---- checks shared by several tests ---- */

/* A child in @c forks until refused: exactly @max - 1 forks succeed (the
 * child counts too), pids.events records it, and the kill ends them all. */
static void check_fork_limit(Cgroup *c, int max) {
        CgroupStats st;
        Child ch;
        int n = -1;

        ch = child_start(child_fork_loop, NULL);
        ASSERT_OK(cgroup_attach(c, ch.pid));
        child_go(&ch);
        child_read(&ch, &n, sizeof(n), 5000);
        ASSERT_EQ(n, max - 1);
        ASSERT_OK(cgroup_stats(c, &st));
        ASSERT_TRUE(st.pids_max_events >= 1);
        ASSERT_OK(cgroup_kill(c));
        ASSERT_TRUE(killed_by(wait_pid(ch.pid, 2000), SIGKILL));
        child_done(&ch);
        reap_orphans();
}

/* The kernel's count of the periods in which @c was throttled (cpu.stat's
 * nr_throttled, v1 and v2 alike), or 0 when no cpu controller serves @c. */
static uint64_t nr_throttled(const Cgroup *c) {
        _cleanup_free_ char *text = NULL, *num = NULL;
        const char *dir = cgroup_controller_path(c, CGROUP_CPU), *p;
        char path[PATH_MAX];
        uint64_t n;

        if (!dir)
                return 0;
        (void)snprintf(path, sizeof(path), "%s/cpu.stat", dir);
        ASSERT_OK(read_full_file(path, 1U << 16, &text));
        p = strstr(text, "nr_throttled ");
        ASSERT_NOT_NULL(p);
        p += strlen("nr_throttled ");
        num = strndup(p, strcspn(p, "\n"));
        ASSERT_NOT_NULL(num);
        ASSERT_OK(safe_atou64(num, &n));
        return n;
}

/* The spinner under a 1% quota is throttled by the kernel and stays far
 * below the cpu time it wants; without a limit it gets it, unthrottled.
 * Counted by the kernel, not timed: a loaded machine only slows the
 * spinner, and neither claim depends on how much of a core it gets above
 * 2.5%. */
static void check_cpu_use(Cgroup *c, bool limited) {
        CgroupStats st;
        Child ch;

        ch = child_start(child_spin, NULL);
        ASSERT_OK(cgroup_attach(c, ch.pid));
        child_go(&ch);
        ASSERT_TRUE(exited_ok(wait_pid(ch.pid, 10000)));
        child_done(&ch);
        ASSERT_OK(cgroup_stats(c, &st));
        ASSERT_TRUE(st.have_cpu);
        fprintf(stderr, "cpu used (%s): %llu us, throttled %llu times\n",
                limited ? "1% quota" : "no limit", (unsigned long long)st.cpu_usec,
                (unsigned long long)nr_throttled(c));
        ASSERT_TRUE(st.cpu_usec > 1000);
        if (limited) {
                /* 1 ms per 100 ms period over 2 s: about 20 ms. */
                ASSERT_TRUE(st.cpu_usec < SPIN_CPU_NS / 1000 * 4 / 5);
                ASSERT_TRUE(nr_throttled(c) > 0);
        } else {
                ASSERT_TRUE(st.cpu_usec >= SPIN_CPU_NS / 1000);
                ASSERT_TRUE(nr_throttled(c) == 0);
        }
}

/* A setsid double-forked daemon in @c dies with the kill. */
static void check_kill_double_fork(Cgroup *c) {
        pid_t daemon = 0;
        Child ch;

        ch = child_start(child_double_fork, NULL);
        ASSERT_OK(cgroup_attach(c, ch.pid));
        child_go(&ch);
        child_read(&ch, &daemon, sizeof(daemon), 5000);
        ASSERT_TRUE(daemon > 0);
        /* It really left our session, and is alive. */
        ASSERT_TRUE(getsid(daemon) != getsid(0));
        ASSERT_OK(kill(daemon, 0));

        ASSERT_OK(cgroup_kill(c));
        /* This process is a subreaper, so the daemon is our child now. */
        ASSERT_TRUE(killed_by(wait_pid(daemon, 2000), SIGKILL));
        ASSERT_TRUE(kill(daemon, 0) < 0 && errno == ESRCH);
        ASSERT_TRUE(killed_by(wait_pid(ch.pid, 2000), SIGKILL));
        child_done(&ch);
        reap_orphans();
}

/* A ticking child in @c stops while frozen and ticks again once thawed. */
static void check_freeze(Cgroup *c) {
        struct pollfd p;
        char buf[256], ch1;
        Child ch;

        ch = child_start(child_ticker, NULL);
        ASSERT_OK(cgroup_attach(c, ch.pid));
        child_go(&ch);
        child_read(&ch, &ch1, 1, 5000);

        ASSERT_OK(cgroup_set_frozen(c, true));
        ASSERT_OK(fcntl(ch.res_fd, F_SETFL, O_NONBLOCK));
        while (read(ch.res_fd, buf, sizeof(buf)) > 0)
                ;
        p = (struct pollfd){.fd = ch.res_fd, .events = POLLIN};
        ASSERT_EQ(poll(&p, 1, 300), 0); /* frozen: not a tick in 300 ms */

        ASSERT_OK(cgroup_set_frozen(c, false));
        p = (struct pollfd){.fd = ch.res_fd, .events = POLLIN};
        ASSERT_EQ(poll(&p, 1, 2000), 1); /* thawed: ticking again */

        ASSERT_OK(cgroup_kill(c));
        ASSERT_TRUE(killed_by(wait_pid(ch.pid, 2000), SIGKILL));
        child_done(&ch);
}

/* Collects the directories of @c, to check after destroy. */
typedef struct Paths {
        char *p[8];
        size_t n;
} Paths;

static void paths_collect(const Cgroup *c, Paths *ps) {
        *ps = (Paths){};
        for (int k = 0; k < _CGROUP_CONTROLLER_MAX; k++)
                if (cgroup_controller_path(c, k))
                        ps->p[ps->n++] = strdup(cgroup_controller_path(c, k));
        if (cgroup_leaf_path_v2(c))
                ps->p[ps->n++] = strdup(cgroup_leaf_path_v2(c));
        for (size_t i = 0; i < ps->n; i++) {
                ASSERT_NOT_NULL(ps->p[i]);
                ASSERT_TRUE(path_exists(ps->p[i]));
        }
}

static void paths_assert_gone(Paths *ps) {
        for (size_t i = 0; i < ps->n; i++) {
                if (path_exists(ps->p[i]))
                        fail_msg("%s still exists", ps->p[i]);
                free(ps->p[i]);
        }
        *ps = (Paths){};
}

static void destroy_and_check(Cgroup *c) {
        Paths ps;

        paths_collect(c, &ps);
        ASSERT_OK(cgroup_destroy(c));
        paths_assert_gone(&ps);
}

/* ---- real tests ---- */

TEST(real_topology_is_detected) {
        static CgroupTopology t, again;

        real_topology(&t);
        for (int k = 0; k < _CGROUP_CONTROLLER_MAX; k++)
                fprintf(stderr, "%s: %s at %s (%s)\n", cgroup_controller_to_string(k),
                        cgroup_version_to_string(t.controllers[k].version),
                        t.controllers[k].base ? t.controllers[k].base : "-",
                        t.controllers[k].writable ? "writable" : "not writable");
        fprintf(stderr, "v2: %s (%s); freezer: %s; cpuacct: %s\n", t.v2.base ? t.v2.base : "-",
                t.v2.writable ? "writable" : "not writable", t.freezer.base ? t.freezer.base : "-",
                t.cpuacct.base ? t.cpuacct.base : "-");
        if (t.v2.version == CGROUP_VERSION_2) {
                _cleanup_free_ char *want = NULL;

                ASSERT_TRUE(asprintf(&want, "%s/hutch", t.v2.mount) > 0);
                ASSERT_STREQ(t.v2.base, want);
        }
        /* Per controller: a v2 place is only kept when v2 offers it. */
        for (int k = 0; k < _CGROUP_CONTROLLER_MAX; k++)
                if (t.controllers[k].version == CGROUP_VERSION_2) {
                        _cleanup_free_ char *offered =
                                read_value(t.controllers[k].mount, "cgroup.controllers");

                        ASSERT_NOT_NULL(offered);
                        ASSERT_NOT_NULL(strstr(offered, cgroup_controller_to_string(k)));
                }
        /* Detection creates nothing and is stable. */
        track(&again);
        ASSERT_OK(cgroup_topology_detect(&again, NULL));
        ASSERT_EQ(again.v2.writable, t.v2.writable);
        for (int k = 0; k < _CGROUP_CONTROLLER_MAX; k++)
                ASSERT_EQ(again.controllers[k].version, t.controllers[k].version);
        cgroup_topology_done(&again);
        cgroup_topology_done(&t);
}

TEST(real_limits_are_written) {
        CgroupLimits lim = {.memory_max = 32 * MiB,
                            .cpu_quota_us = 20000,
                            .cpu_period_us = 100000,
                            .pids_max = 16};
        HutchError e = {};
        static CgroupTopology t;
        Cgroup *c = NULL;
        const char *d;

        real_topology(&t);
        require_writable(&t, CGROUP_MEMORY);
        require_writable(&t, CGROUP_PIDS);
        require_writable(&t, CGROUP_CPU);
        if (cgroup_new(&t, "t-files", &lim, &c, &e) < 0)
                fail_msg("cgroup_new: %s", e.msg);
        ASSERT_STREQ(cgroup_name(c), "t-files");
        for (int k = 0; k < _CGROUP_CONTROLLER_MAX; k++) {
                _cleanup_free_ char *want = NULL;

                ASSERT_EQ(cgroup_controller_version(c, k), t.controllers[k].version);
                ASSERT_TRUE(asprintf(&want, "%s/t-files", t.controllers[k].base) > 0);
                ASSERT_STREQ(cgroup_controller_path(c, k), want);
        }

        d = cgroup_controller_path(c, CGROUP_MEMORY);
        if (cgroup_controller_version(c, CGROUP_MEMORY) == CGROUP_VERSION_1) {
                _cleanup_free_ char *oom = read_value(d, "memory.oom_control");

                assert_file_value(d, "memory.limit_in_bytes", "33554432");
                assert_file_value(d, "memory.memsw.limit_in_bytes", "33554432");
                ASSERT_NOT_NULL(oom);
                ASSERT_NOT_NULL(strstr(oom, "oom_kill_disable 0"));
        } else {
                _cleanup_free_ char *leaf = NULL;

                assert_file_value(d, "memory.max", "33554432");
                assert_file_value(d, "memory.swap.max", "0");
                ASSERT_TRUE(asprintf(&leaf, "%s/exec", d) > 0);
                assert_file_value(leaf, "memory.oom.group", "1");
        }
        assert_file_value(cgroup_controller_path(c, CGROUP_PIDS), "pids.max", "16");
        d = cgroup_controller_path(c, CGROUP_CPU);
        if (cgroup_controller_version(c, CGROUP_CPU) == CGROUP_VERSION_1) {
                assert_file_value(d, "cpu.cfs_quota_us", "20000");
                assert_file_value(d, "cpu.cfs_period_us", "100000");
        } else
                assert_file_value(d, "cpu.max", "20000 100000");
        if (t.v2.writable) {
                _cleanup_free_ char *leaf = NULL;

                ASSERT_TRUE(asprintf(&leaf, "%s/t-files/exec", t.v2.base) > 0);
                ASSERT_STREQ(cgroup_leaf_path_v2(c), leaf);
        } else
                ASSERT_NULL(cgroup_leaf_path_v2(c));

        destroy_and_check(c);
        cgroup_topology_done(&t);
}

TEST(real_memory_bomb_is_oom_killed) {
        CgroupLimits lim = {.memory_max = 32 * MiB};
        static CgroupTopology t;
        CgroupStats st;
        Cgroup *c = NULL;
        Child ch;

        real_topology(&t);
        require_writable(&t, CGROUP_MEMORY);
        ASSERT_OK(cgroup_new(&t, "t-oom", &lim, &c, NULL));
        ASSERT_OK(cgroup_stats(c, &st));
        ASSERT_EQ(st.oom_kills, 0);

        ch = child_start(child_alloc, NULL);
        ASSERT_OK(cgroup_attach(c, ch.pid));
        child_go(&ch);
        ASSERT_TRUE(killed_by(wait_pid(ch.pid, 10000), SIGKILL));
        child_done(&ch);

        ASSERT_OK(cgroup_stats(c, &st));
        fprintf(stderr, "oom_kills %llu, peak %llu bytes\n", (unsigned long long)st.oom_kills,
                (unsigned long long)st.mem_peak_bytes);
        ASSERT_TRUE(st.oom_kills >= 1);
        if (st.have_mem_peak) {
                ASSERT_TRUE(st.mem_peak_bytes >= 16 * MiB);
                ASSERT_TRUE(st.mem_peak_bytes <= 36 * MiB);
        }
        destroy_and_check(c);
        cgroup_topology_done(&t);
}

TEST(real_fork_loop_stops_at_pids_max) {
        CgroupLimits lim = {.pids_max = 16};
        static CgroupTopology t;
        Cgroup *c = NULL;

        real_topology(&t);
        require_writable(&t, CGROUP_PIDS);
        ASSERT_OK(cgroup_new(&t, "t-pids", &lim, &c, NULL));
        check_fork_limit(c, 16);
        destroy_and_check(c);
        cgroup_topology_done(&t);
}

TEST(real_cpu_quota_throttles) {
        CgroupLimits lim = {.cpu_quota_us = 1000, .cpu_period_us = 100000};
        CgroupLimits none = {};
        static CgroupTopology t;
        Cgroup *c = NULL;

        real_topology(&t);
        require_writable(&t, CGROUP_CPU);
        ASSERT_OK(cgroup_new(&t, "t-cpu", &lim, &c, NULL));
        check_cpu_use(c, true);
        destroy_and_check(c);
        /* The negative twin: the same spinner without a quota. */
        ASSERT_OK(cgroup_new(&t, "t-cpu-free", &none, &c, NULL));
        check_cpu_use(c, false);
        destroy_and_check(c);
        cgroup_topology_done(&t);
}

TEST(real_kill_v2_double_fork) {
        CgroupLimits none = {};
        CgroupStats st;
        static CgroupTopology t;
        Cgroup *c = NULL;

        real_topology(&t);
        if (!t.v2.writable)
                skip_because("no writable v2 hierarchy here");
        /* No limit at all: on a hybrid host this is v2 without any
         * controller, which still has cgroup.kill. */
        ASSERT_OK(cgroup_new(&t, "t-kill-v2", &none, &c, NULL));
        ASSERT_NOT_NULL(cgroup_leaf_path_v2(c));
        /* Counters without any limit: cpu from v2, memory wherever it is. */
        ASSERT_OK(cgroup_stats(c, &st));
        ASSERT_TRUE(st.have_cpu);
        if (t.controllers[CGROUP_MEMORY].writable)
                ASSERT_TRUE(st.have_mem_peak);
        check_kill_double_fork(c);
        check_freeze(c);
        destroy_and_check(c);
        cgroup_topology_done(&t);
}

TEST(real_kill_v1_freezer_double_fork) {
        static const char *const no[] = {NULL};
        CgroupLimits lim = {.pids_max = 64};
        static CgroupTopology t;
        Cgroup *c = NULL;

        filtered_topology(true, no, &t);
        if (t.freezer.version != CGROUP_VERSION_1 ||
            t.controllers[CGROUP_PIDS].version != CGROUP_VERSION_1)
                skip_not_here("no v1 freezer and pids hierarchies here");
        ASSERT_TRUE(t.freezer.writable);
        require_writable(&t, CGROUP_PIDS);
        ASSERT_OK(cgroup_new(&t, "t-kill-v1", &lim, &c, NULL));
        ASSERT_NULL(cgroup_leaf_path_v2(c));
        ASSERT_ERROR(cgroup_leaf_fd_v2(c), EOPNOTSUPP);
        check_kill_double_fork(c);
        check_freeze(c);
        destroy_and_check(c);
        cgroup_topology_done(&t);
}

TEST(real_kill_v1_without_freezer) {
        static const char *const no[] = {"freezer", NULL};
        CgroupLimits lim = {.pids_max = 64};
        static CgroupTopology t;
        Cgroup *c = NULL;

        filtered_topology(true, no, &t);
        ASSERT_EQ(t.freezer.version, CGROUP_VERSION_NONE);
        if (t.controllers[CGROUP_PIDS].version != CGROUP_VERSION_1)
                skip_not_here("no v1 pids hierarchy here");
        require_writable(&t, CGROUP_PIDS);
        ASSERT_OK(cgroup_new(&t, "t-kill-loop", &lim, &c, NULL));
        check_kill_double_fork(c);
        /* Nothing can freeze this one. */
        ASSERT_ERROR(cgroup_set_frozen(c, true), EOPNOTSUPP);
        destroy_and_check(c);
        cgroup_topology_done(&t);
}

static int child_pause(int res, void *arg) {
        (void)res;
        (void)arg;
        for (;;)
                (void)pause();
        return 0;
}

/* cgroup_remove() kills and removes while the killed process is still an
 * unreaped zombie of ours, as when the supervisor tears down before it
 * reaps the sandbox init. */
static void check_remove_with_zombie(const CgroupTopology *t, const char *name) {
        CgroupLimits lim = {.pids_max = 16};
        Cgroup *c = NULL;
        Paths ps;
        Child ch;

        ASSERT_OK(cgroup_new(t, name, &lim, &c, NULL));
        paths_collect(c, &ps);
        ch = child_start(child_pause, NULL);
        ASSERT_OK(cgroup_attach(c, ch.pid));
        child_go(&ch);
        ASSERT_OK(cgroup_remove(c));
        paths_assert_gone(&ps);
        ASSERT_TRUE(killed_by(wait_pid(ch.pid, 2000), SIGKILL));
        child_done(&ch);
        ASSERT_OK(cgroup_destroy(c));
}

TEST(real_remove_kills_and_removes_with_zombies_around) {
        static const char *const no[] = {NULL};
        static CgroupTopology t;

        real_topology(&t);
        require_writable(&t, CGROUP_PIDS);
        check_remove_with_zombie(&t, "t-zombie");
        cgroup_topology_done(&t);
        /* And through v1 only (freezer, or the kill loop). */
        filtered_topology(true, no, &t);
        if (t.controllers[CGROUP_PIDS].version == CGROUP_VERSION_1)
                check_remove_with_zombie(&t, "t-zombie-v1");
        cgroup_topology_done(&t);
}

/* Whether cgroup_new_run()'s @c (with a memory limit) has no leaf of its
 * own in the hierarchy of @k: v1, or v2 when the memory limit is not there
 * (docs/cgroups.md). */
static bool run_is_flat(const Cgroup *c, CgroupVersion v) {
        return v == CGROUP_VERSION_1 ||
               cgroup_controller_version(c, CGROUP_MEMORY) != CGROUP_VERSION_2;
}

/* cgroup_remove() first tries a plain rmdir of each hierarchy (the usual
 * end, where everything has exited). A process left in one hierarchy only
 * (a half-failed attach) makes that rmdir fail: the empty hierarchies go at
 * once, and the full path still kills the process and removes the rest.
 * With @run, the cgroup is cgroup_new_run()'s. */
static void check_remove_with_one_hierarchy_populated(const CgroupTopology *t, const char *name,
                                                      CgroupController k, bool run) {
        CgroupLimits lim = {.memory_max = 64 * MiB, .pids_max = 16};
        _cleanup_free_ char *procs = NULL;
        Cgroup *c = NULL;
        char pid[16];
        bool flat;
        Paths ps;
        Child ch;

        if (run)
                ASSERT_OK(cgroup_new_run(t, name, &lim, &c, NULL));
        else
                ASSERT_OK(cgroup_new(t, name, &lim, &c, NULL));
        paths_collect(c, &ps);
        ch = child_start(child_pause, NULL);
        flat = run && run_is_flat(c, cgroup_controller_version(c, k));
        ASSERT_TRUE(asprintf(&procs, "%s%s/cgroup.procs", cgroup_controller_path(c, k),
                             flat ? "" : "/exec") > 0);
        (void)snprintf(pid, sizeof(pid), "%d", (int)ch.pid);
        ASSERT_OK(write_string_file(procs, pid));
        child_go(&ch);
        ASSERT_OK(cgroup_remove(c));
        paths_assert_gone(&ps);
        ASSERT_TRUE(killed_by(wait_pid(ch.pid, 2000), SIGKILL));
        child_done(&ch);
        ASSERT_OK(cgroup_destroy(c));
}

TEST(real_remove_kills_a_process_left_in_one_hierarchy) {
        static CgroupTopology t;

        real_topology(&t);
        require_writable(&t, CGROUP_PIDS);
        require_writable(&t, CGROUP_MEMORY);
        /* Whichever hierarchy it is left in, with either layout. */
        check_remove_with_one_hierarchy_populated(&t, "t-half-pids", CGROUP_PIDS, false);
        check_remove_with_one_hierarchy_populated(&t, "t-half-mem", CGROUP_MEMORY, false);
        check_remove_with_one_hierarchy_populated(&t, "t-half-run-pids", CGROUP_PIDS, true);
        check_remove_with_one_hierarchy_populated(&t, "t-half-run-mem", CGROUP_MEMORY, true);
        cgroup_topology_done(&t);
}

/* @pid is the only process in the cgroup @dir. */
static void assert_in(const char *dir, pid_t pid) {
        _cleanup_free_ char *procs = NULL, *in = NULL;

        ASSERT_TRUE(asprintf(&procs, "%s/cgroup.procs", dir) > 0);
        ASSERT_OK(read_full_file(procs, 1 << 16, &in));
        ASSERT_EQ(strtol(in, NULL, 10), (long)pid);
}

/* cgroup_new_run(): no "exec" leaf where run_is_flat() says so, an
 * attached process sits in "<name>" itself there; cgroup_new() (the twin)
 * keeps "exec" everywhere. */
static void check_run_layout(const CgroupTopology *t, const char *name, bool run) {
        CgroupLimits lim = {.memory_max = 64 * MiB, .pids_max = 16};
        _cleanup_free_ char *v2_dir = NULL;
        const char *v2_leaf;
        Cgroup *c = NULL;
        Child ch;

        if (run)
                ASSERT_OK(cgroup_new_run(t, name, &lim, &c, NULL));
        else
                ASSERT_OK(cgroup_new(t, name, &lim, &c, NULL));
        ch = child_start(child_pause, NULL);
        ASSERT_OK(cgroup_attach(c, ch.pid));
        for (CgroupController k = 0; k < _CGROUP_CONTROLLER_MAX; k++) {
                _cleanup_free_ char *leaf = NULL;
                const char *dir = cgroup_controller_path(c, k);
                bool flat = run && run_is_flat(c, cgroup_controller_version(c, k));

                if (!dir)
                        continue;
                ASSERT_TRUE(asprintf(&leaf, "%s/exec", dir) > 0);
                ASSERT_EQ(path_exists(leaf), !flat);
                assert_in(flat ? dir : leaf, ch.pid);
        }
        v2_leaf = cgroup_leaf_path_v2(c);
        if (v2_leaf) {
                bool flat = run && run_is_flat(c, CGROUP_VERSION_2);

                ASSERT_TRUE(asprintf(&v2_dir, "/%s%s", name, flat ? "" : "/exec") > 0);
                ASSERT_TRUE(strlen(v2_leaf) > strlen(v2_dir));
                ASSERT_STREQ(v2_leaf + strlen(v2_leaf) - strlen(v2_dir), v2_dir);
                assert_in(v2_leaf, ch.pid);
        }
        child_go(&ch);
        destroy_and_check(c);
        ASSERT_TRUE(killed_by(wait_pid(ch.pid, 2000), SIGKILL));
        child_done(&ch);
}

TEST(real_run_has_no_leaf_where_it_needs_none) {
        static CgroupTopology t;

        real_topology(&t);
        require_writable(&t, CGROUP_PIDS);
        require_writable(&t, CGROUP_MEMORY);
        check_run_layout(&t, "t-layout-run", true);
        check_run_layout(&t, "t-layout-new", false);
        cgroup_topology_done(&t);
}

TEST(real_fails_closed_without_a_memory_cgroup) {
        CgroupLimits lim = {.memory_max = 32 * MiB, .pids_max = 16};
        HutchError e = {};
        static CgroupTopology t;
        Cgroup *c = NULL;
        _cleanup_free_ char *pids_dir = NULL, *v2_dir = NULL;

        real_topology(&t);
        require_writable(&t, CGROUP_PIDS);
        /* Simulate a host where nothing serves memory. */
        free(t.controllers[CGROUP_MEMORY].mount);
        free(t.controllers[CGROUP_MEMORY].base);
        t.controllers[CGROUP_MEMORY] = (CgroupPlace){};
        ASSERT_TRUE(asprintf(&pids_dir, "%s/t-nomem", t.controllers[CGROUP_PIDS].base) > 0);
        if (t.v2.base)
                ASSERT_TRUE(asprintf(&v2_dir, "%s/t-nomem", t.v2.base) > 0);

        ASSERT_ERROR(cgroup_new(&t, "t-nomem", &lim, &c, &e), EOPNOTSUPP);
        ASSERT_NULL(c);
        ASSERT_EQ(e.errnum, EOPNOTSUPP);
        ASSERT_STREQ(e.msg, "memory limit requested but no writable memory cgroup (v2 or v1) is "
                            "available here; see 'hutch doctor' or pass --allow-degraded");
        ASSERT_FALSE(path_exists(pids_dir));
        ASSERT_FALSE(path_exists(v2_dir));

        /* A hierarchy that exists but is not writable fails the same way. */
        t.controllers[CGROUP_PIDS].writable = false;
        lim = (CgroupLimits){.pids_max = 16};
        ASSERT_ERROR(cgroup_new(&t, "t-nomem", &lim, &c, &e), EOPNOTSUPP);
        ASSERT_NOT_NULL(strstr(e.msg, "pids limit requested but the"));
        ASSERT_NOT_NULL(strstr(e.msg, "is not writable here"));
        ASSERT_FALSE(path_exists(pids_dir));
        cgroup_topology_done(&t);
}

TEST(real_fails_closed_when_a_write_is_refused) {
        /* The kernel refuses a quota above 2^44 us, after memory and pids
         * were applied: everything created must go. */
        CgroupLimits lim = {.memory_max = 32 * MiB, .pids_max = 16, .cpu_quota_us = 1ULL << 60};
        HutchError e = {};
        static CgroupTopology t;
        Cgroup *c = NULL;
        char *dirs[4] = {};

        real_topology(&t);
        require_writable(&t, CGROUP_MEMORY);
        require_writable(&t, CGROUP_PIDS);
        require_writable(&t, CGROUP_CPU);
        for (int k = 0; k < _CGROUP_CONTROLLER_MAX; k++)
                ASSERT_TRUE(asprintf(dirs + k, "%s/t-refused", t.controllers[k].base) > 0);
        if (t.v2.base)
                ASSERT_TRUE(asprintf(dirs + 3, "%s/t-refused", t.v2.base) > 0);

        ASSERT_ERROR(cgroup_new(&t, "t-refused", &lim, &c, &e), EINVAL);
        ASSERT_NULL(c);
        ASSERT_TRUE(strncmp(e.msg, "cpu limit requested but writing", 31) == 0);
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                if (dirs[i] && path_exists(dirs[i]))
                        fail_msg("%s was left behind", dirs[i]);
                free(dirs[i]);
        }
        cgroup_topology_done(&t);
}

TEST(real_existing_name_is_not_touched) {
        CgroupLimits lim = {.pids_max = 8};
        HutchError e = {};
        static CgroupTopology t;
        Cgroup *c = NULL, *c2 = NULL;

        real_topology(&t);
        require_writable(&t, CGROUP_PIDS);
        ASSERT_OK(cgroup_new(&t, "t-dup", &lim, &c, NULL));
        ASSERT_ERROR(cgroup_new(&t, "t-dup", &lim, &c2, &e), EEXIST);
        ASSERT_NULL(c2);
        ASSERT_NOT_NULL(strstr(e.msg, "already exists"));
        /* The first one is intact. */
        assert_file_value(cgroup_controller_path(c, CGROUP_PIDS), "pids.max", "8");
        destroy_and_check(c);
        cgroup_topology_done(&t);
}

TEST(real_remove_is_idempotent) {
        CgroupLimits none = {};
        static CgroupTopology t;
        CgroupStats st;
        Cgroup *c = NULL;
        Paths ps;

        real_topology(&t);
        ASSERT_OK(cgroup_new(&t, "t-twice", &none, &c, NULL));
        paths_collect(c, &ps);
        ASSERT_TRUE(ps.n > 0 || cgroup_leaf_path_v2(c) == NULL);
        ASSERT_OK(cgroup_remove(c));
        paths_assert_gone(&ps);
        ASSERT_OK(cgroup_remove(c));
        ASSERT_OK(cgroup_kill(c));
        ASSERT_OK(cgroup_stats(c, &st));
        ASSERT_ERROR(cgroup_attach(c, getpid()), ENOENT);
        ASSERT_ERROR(cgroup_attach(c, 0), EINVAL);
        ASSERT_OK(cgroup_destroy(c));
        cgroup_topology_done(&t);
}

static int clone_into(int cgroup_fd) {
        struct clone_args args = {
                .flags = CLONE_INTO_CGROUP,
                .exit_signal = SIGCHLD,
                .cgroup = (uint64_t)cgroup_fd,
        };

        return (int)syscall(SYS_clone3, &args, sizeof(args));
}

TEST(real_clone_into_the_v2_leaf) {
        CgroupLimits none = {};
        static CgroupTopology t;
        Cgroup *c = NULL;
        _cleanup_free_ char *want = NULL;
        struct stat st;
        int fd, pid;

        real_topology(&t);
        if (!t.v2.writable)
                skip_because("no writable v2 hierarchy here");
        ASSERT_OK(cgroup_new(&t, "t-clone", &none, &c, NULL));
        ASSERT_TRUE(asprintf(&want, "0::%s\n", cgroup_leaf_path_v2(c) + strlen(t.v2.mount)) > 0);

        fd = cgroup_leaf_fd_v2(c);
        ASSERT_OK(fd);
        ASSERT_OK(fstat(fd, &st));
        ASSERT_TRUE(S_ISDIR(st.st_mode));
        ASSERT_TRUE(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        pid = clone_into(fd);
        if (pid == 0) {
                _cleanup_free_ char *self = NULL;

                (void)close(fd);
                CHILD_CHECK(read_full_file("/proc/self/cgroup", 1 << 16, &self) >= 0);
                CHILD_CHECK(strstr(self, want) != NULL);
                _exit(0);
        }
        (void)close(fd);
        ASSERT_TRUE(pid > 0);
        ASSERT_TRUE(exited_ok(wait_pid(pid, 5000)));
        destroy_and_check(c);
        cgroup_topology_done(&t);
}

TEST(real_env_base_v2) {
        _cleanup_free_ char *base = NULL, *missing = NULL, *dotdot = NULL;
        CgroupLimits none = {};
        static CgroupTopology t;
        Cgroup *c = NULL;

        real_topology(&t);
        if (!t.v2.writable)
                skip_because("no writable v2 hierarchy here");
        ASSERT_TRUE(asprintf(&base, "%s/t-envbase", t.v2.mount) > 0);
        ASSERT_TRUE(asprintf(&missing, "%s/t-envbase-missing", t.v2.mount) > 0);
        ASSERT_TRUE(asprintf(&dotdot, "%s/../x", t.v2.mount) > 0);
        cgroup_topology_done(&t);
        ASSERT_OK(mkdir(base, 0755));

        ASSERT_OK(setenv("HUTCH_CGROUP_BASE_V2", base, 1));
        track(&t);
        ASSERT_OK(cgroup_topology_detect(&t, NULL));
        ASSERT_STREQ(t.v2.base, base);
        ASSERT_FALSE(t.v2.create_base);
        ASSERT_TRUE(t.v2.writable);
        ASSERT_OK(cgroup_new(&t, "t-env", &none, &c, NULL));
        ASSERT_TRUE(strncmp(cgroup_leaf_path_v2(c), base, strlen(base)) == 0);
        destroy_and_check(c);
        cgroup_topology_done(&t);

        for (const char *const *bad = (const char *const[]){"relative", "/tmp", NULL}; *bad;
             bad++) {
                ASSERT_OK(setenv("HUTCH_CGROUP_BASE_V2", *bad, 1));
                ASSERT_ERROR(cgroup_topology_detect(&t, NULL), EINVAL);
        }
        ASSERT_OK(setenv("HUTCH_CGROUP_BASE_V2", missing, 1));
        ASSERT_ERROR(cgroup_topology_detect(&t, NULL), EINVAL);
        ASSERT_OK(setenv("HUTCH_CGROUP_BASE_V2", dotdot, 1));
        ASSERT_ERROR(cgroup_topology_detect(&t, NULL), EINVAL);
        ASSERT_OK(unsetenv("HUTCH_CGROUP_BASE_V2"));
        ASSERT_OK(rmdir(base));
}

/* ---- delegation to a normal user ---- */

static void run_cmd(char *const argv[]) {
        int status;
        pid_t pid = fork();

        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

                if (null >= 0)
                        (void)dup2(null, STDOUT_FILENO);
                (void)execv(argv[0], argv);
                _exit(127);
        }
        status = wait_pid(pid, 10000);
        if (!exited_ok(status))
                fail_msg("%s failed (status 0x%x)", argv[0], status);
}

/* The test user: created once (and deleted at the end) if missing. */
static void test_user(uid_t *ret_uid, gid_t *ret_gid) {
        struct passwd *pw = getpwnam(TEST_USER);

        if (!pw) {
                if (access("/usr/sbin/useradd", X_OK) < 0)
                        skip_because("no useradd to create the test user");
                run_cmd((char *const[]){"/usr/sbin/useradd", "-M", "-s", "/usr/sbin/nologin",
                                        TEST_USER, NULL});
                user_created = true;
                pw = getpwnam(TEST_USER);
                ASSERT_NOT_NULL(pw);
        }
        *ret_uid = pw->pw_uid;
        *ret_gid = pw->pw_gid;
}

/* Makes @dir (a new cgroup) and the files a delegate writes owned by the
 * user, as systemd does for a unit with Delegate=yes. */
static void delegate_dir(const char *dir, uid_t uid, gid_t gid) {
        static const char *const files[] = {"cgroup.procs", "cgroup.subtree_control",
                                            "cgroup.threads", "tasks"};

        ASSERT_OK(mkdir(dir, 0755));
        ASSERT_OK(chown(dir, uid, gid));
        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                _cleanup_free_ char *p = NULL;

                ASSERT_TRUE(asprintf(&p, "%s/%s", dir, files[i]) > 0);
                if (chown(p, uid, gid) < 0)
                        ASSERT_EQ(errno, ENOENT); /* v1 or v2 only */
        }
}

static void move_pid(const char *dir, pid_t pid) {
        _cleanup_free_ char *p = NULL;
        char buf[32];

        (void)snprintf(buf, sizeof(buf), "%d", (int)pid);
        ASSERT_TRUE(asprintf(&p, "%s/cgroup.procs", dir) > 0);
        ASSERT_OK(write_string_file(p, buf));
}

typedef struct UserArgs {
        uid_t uid;
        gid_t gid;
        const char *base;    /* expected v2 base, or v1 pids base */
        const char *freezer; /* v1: expected freezer base, or NULL */
        const char *v2_mount;
} UserArgs;

static void child_drop_to(const UserArgs *a) {
        CHILD_CHECK(setgroups(0, NULL) == 0);
        CHILD_CHECK(setresgid(a->gid, a->gid, a->gid) == 0);
        CHILD_CHECK(setresuid(a->uid, a->uid, a->uid) == 0);
        CHILD_CHECK(geteuid() == a->uid && getuid() == a->uid);
}

/* In a child: forks a process that waits for a byte on a pipe, attaches it
 * to @c, then lets it go. The process runs @fn (if any) then pauses. */
static pid_t child_spawn_attached(Cgroup *c, void (*fn)(int), int res) {
        int go[2];
        pid_t pid;
        char ch = 'g';

        CHILD_CHECK(pipe(go) == 0);
        pid = fork();
        CHILD_CHECK(pid >= 0);
        if (pid == 0) {
                (void)close(go[1]);
                CHILD_CHECK(read(go[0], &ch, 1) == 1);
                if (fn)
                        fn(res);
                for (;;)
                        pause();
        }
        (void)close(go[0]);
        CHILD_CHECK(cgroup_attach(c, pid) == 0);
        CHILD_CHECK(write(go[1], &ch, 1) == 1);
        (void)close(go[1]);
        return pid;
}

static void fork_until_refused(int res) {
        int block[2], n = 0;

        CHILD_CHECK(pipe(block) == 0);
        for (int i = 0; i < 1000; i++) {
                pid_t p = fork();

                if (p < 0)
                        break;
                if (p == 0) {
                        char ch;

                        (void)!read(block[0], &ch, 1);
                        _exit(0);
                }
                n++;
        }
        CHILD_CHECK(write(res, &n, sizeof(n)) == sizeof(n));
}

static int child_user_v2(int res, void *arg) {
        const UserArgs *a = arg;
        CgroupLimits none = {}, pids = {.pids_max = 8};
        _cleanup_free_ char *self = NULL, *want = NULL, *dir = NULL;
        HutchError e = {};
        static CgroupTopology t;
        Cgroup *c = NULL;
        pid_t pid;
        int st;

        (void)res;
        child_drop_to(a);
        CHILD_CHECK(cgroup_topology_detect(&t, NULL) == 0);
        CHILD_CHECK(!t.privileged);
        CHILD_CHECK(t.v2.base && strcmp(t.v2.base, a->base) == 0);
        CHILD_CHECK(!t.v2.create_base);
        CHILD_CHECK(t.v2.writable);
        /* Controllers come with the delegated subtree only if its parent
         * handed them down (v2), else the limit fails closed. */
        if (t.controllers[CGROUP_PIDS].version == CGROUP_VERSION_2 &&
            t.controllers[CGROUP_PIDS].writable) {
                _cleanup_free_ char *max = NULL;
                int p[2], n = -1;

                fprintf(stderr, "the delegated subtree has the pids controller\n");
                CHILD_CHECK(cgroup_new(&t, "t-user", &pids, &c, &e) == 0);
                CHILD_CHECK(cgroup_controller_version(c, CGROUP_PIDS) == CGROUP_VERSION_2);
                max = read_value(cgroup_controller_path(c, CGROUP_PIDS), "pids.max");
                CHILD_CHECK(max && strcmp(max, "8") == 0);
                CHILD_CHECK(pipe(p) == 0);
                pid = child_spawn_attached(c, fork_until_refused, p[1]);
                CHILD_CHECK(read(p[0], &n, sizeof(n)) == sizeof(n));
                CHILD_CHECK(n == 7);
                CHILD_CHECK(cgroup_kill(c) == 0);
                CHILD_CHECK(waitpid(pid, &st, 0) == pid);
                CHILD_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
                CHILD_CHECK(cgroup_destroy(c) == 0);
        } else {
                CHILD_CHECK(cgroup_new(&t, "t-user", &pids, &c, &e) == -EOPNOTSUPP);
                CHILD_CHECK(strncmp(e.msg, "pids limit requested", 20) == 0);
        }

        CHILD_CHECK(cgroup_new(&t, "t-user", &none, &c, &e) == 0);
        CHILD_CHECK(asprintf(&dir, "%s/t-user", a->base) > 0);
        CHILD_CHECK(asprintf(&want, "0::%s/t-user/exec\n", a->base + strlen(a->v2_mount)) > 0);
        pid = child_spawn_attached(c, NULL, -1);
        {
                char p[64];

                (void)snprintf(p, sizeof(p), "/proc/%d/cgroup", (int)pid);
                CHILD_CHECK(read_full_file(p, 1 << 16, &self) == 0);
                CHILD_CHECK(strstr(self, want) != NULL);
        }
        CHILD_CHECK(cgroup_kill(c) == 0);
        CHILD_CHECK(waitpid(pid, &st, 0) == pid);
        CHILD_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        CHILD_CHECK(cgroup_destroy(c) == 0);
        CHILD_CHECK(!path_exists(dir));
        cgroup_topology_done(&t);
        return 0;
}

TEST(user_delegated_v2) {
        _cleanup_free_ char *slice = NULL, *scope = NULL;
        static CgroupTopology t;
        UserArgs a = {};
        Child ch;

        real_topology(&t);
        if (t.v2.version != CGROUP_VERSION_2 || !t.v2.writable)
                skip_because("no writable v2 hierarchy here");
        test_user(&a.uid, &a.gid);
        ASSERT_TRUE(asprintf(&slice, "%s/" TEST_USER ".slice", t.v2.mount) > 0);
        ASSERT_TRUE(asprintf(&scope, "%s/session.scope", slice) > 0);
        delegate_dir(slice, a.uid, a.gid);
        delegate_dir(scope, a.uid, a.gid);
        a.base = slice;
        a.v2_mount = t.v2.mount;

        ch = child_start(child_user_v2, &a);
        move_pid(scope, ch.pid);
        child_go(&ch);
        ASSERT_TRUE(exited_ok(wait_pid(ch.pid, 10000)));
        child_done(&ch);
        reap_orphans();
        ASSERT_OK(rmdir(scope));
        ASSERT_OK(rmdir(slice));
        cgroup_topology_done(&t);
}

static int child_user_v1(int res, void *arg) {
        const UserArgs *a = arg;
        CgroupLimits lim = {.pids_max = 8};
        _cleanup_free_ char *dir = NULL, *max = NULL;
        HutchError e = {};
        static CgroupTopology t;
        CgroupStats st;
        Cgroup *c = NULL;
        int p[2], n = -1, status;
        pid_t pid;

        (void)res;
        child_drop_to(a);
        CHILD_CHECK(cgroup_topology_detect(&t, NULL) == 0);
        CHILD_CHECK(!t.privileged);
        CHILD_CHECK(t.controllers[CGROUP_PIDS].version == CGROUP_VERSION_1);
        CHILD_CHECK(strcmp(t.controllers[CGROUP_PIDS].base, a->base) == 0);
        CHILD_CHECK(t.controllers[CGROUP_PIDS].writable);
        if (a->freezer) {
                CHILD_CHECK(strcmp(t.freezer.base, a->freezer) == 0);
                CHILD_CHECK(t.freezer.writable);
        }
        CHILD_CHECK(!t.v2.writable); /* we sit in the v2 root */

        CHILD_CHECK(cgroup_new(&t, "t-user", &lim, &c, &e) == 0);
        CHILD_CHECK(asprintf(&dir, "%s/t-user", a->base) > 0);
        CHILD_CHECK(strcmp(cgroup_controller_path(c, CGROUP_PIDS), dir) == 0);
        max = read_value(dir, "pids.max");
        CHILD_CHECK(max && strcmp(max, "8") == 0);

        CHILD_CHECK(pipe(p) == 0);
        pid = child_spawn_attached(c, fork_until_refused, p[1]);
        CHILD_CHECK(read(p[0], &n, sizeof(n)) == sizeof(n));
        CHILD_CHECK(n == 7);
        CHILD_CHECK(cgroup_stats(c, &st) == 0);
        CHILD_CHECK(st.pids_max_events >= 1);
        CHILD_CHECK(cgroup_kill(c) == 0);
        CHILD_CHECK(waitpid(pid, &status, 0) == pid);
        CHILD_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        CHILD_CHECK(cgroup_destroy(c) == 0);
        CHILD_CHECK(!path_exists(dir));
        cgroup_topology_done(&t);
        return 0;
}

TEST(user_delegated_v1) {
        _cleanup_free_ char *pids = NULL, *freezer = NULL;
        static CgroupTopology t;
        UserArgs a = {};
        Child ch;

        real_topology(&t);
        if (t.controllers[CGROUP_PIDS].version != CGROUP_VERSION_1)
                skip_not_here("no v1 pids hierarchy here");
        test_user(&a.uid, &a.gid);
        ASSERT_TRUE(asprintf(&pids, "%s/" TEST_USER, t.controllers[CGROUP_PIDS].mount) > 0);
        delegate_dir(pids, a.uid, a.gid);
        if (t.freezer.version == CGROUP_VERSION_1) {
                ASSERT_TRUE(asprintf(&freezer, "%s/" TEST_USER, t.freezer.mount) > 0);
                delegate_dir(freezer, a.uid, a.gid);
        }
        a.base = pids;
        a.freezer = freezer;

        ch = child_start(child_user_v1, &a);
        move_pid(pids, ch.pid);
        if (freezer)
                move_pid(freezer, ch.pid);
        child_go(&ch);
        ASSERT_TRUE(exited_ok(wait_pid(ch.pid, 10000)));
        child_done(&ch);
        reap_orphans();
        ASSERT_OK(rmdir(pids));
        if (freezer)
                ASSERT_OK(rmdir(freezer));
        cgroup_topology_done(&t);
}

/* ---- v2 controller paths, after moving a controller off v1 ---- */

TEST(layout_pids_on_v2) {
        /* CHANGES THE HOST'S CGROUP LAYOUT (restored by the teardown). */
        CgroupLimits lim = {.pids_max = 16};
        _cleanup_free_ char *ctl = NULL, *hutch = NULL;
        static CgroupTopology t;
        Cgroup *c = NULL;

        layout_move_to_v2(CGROUP_PIDS);
        real_topology(&t);
        ASSERT_EQ(t.controllers[CGROUP_PIDS].version, CGROUP_VERSION_2);
        ASSERT_TRUE(t.controllers[CGROUP_PIDS].writable);
        /* Mixed: memory stays wherever it is (v1 here). */
        if (t.controllers[CGROUP_MEMORY].writable)
                lim.memory_max = 64 * MiB;
        ASSERT_OK(cgroup_new(&t, "t-v2pids", &lim, &c, NULL));
        ASSERT_EQ(cgroup_controller_version(c, CGROUP_PIDS), CGROUP_VERSION_2);
        assert_file_value(cgroup_controller_path(c, CGROUP_PIDS), "pids.max", "16");
        ctl = read_value(t.v2.mount, "cgroup.subtree_control");
        ASSERT_NOT_NULL(ctl);
        ASSERT_NOT_NULL(strstr(ctl, "pids"));
        ASSERT_TRUE(asprintf(&hutch, "%s/hutch", t.v2.mount) > 0);
        free(ctl);
        ctl = read_value(hutch, "cgroup.subtree_control");
        ASSERT_NOT_NULL(ctl);
        ASSERT_NOT_NULL(strstr(ctl, "pids"));

        check_fork_limit(c, 16);
        check_kill_double_fork(c);
        destroy_and_check(c);
        cgroup_topology_done(&t);
}

TEST(layout_cpu_on_v2) {
        /* CHANGES THE HOST'S CGROUP LAYOUT (restored by the teardown). */
        CgroupLimits lim = {.cpu_quota_us = 1000, .cpu_period_us = 100000};
        static CgroupTopology t;
        Cgroup *c = NULL;

        layout_move_to_v2(CGROUP_CPU);
        real_topology(&t);
        ASSERT_EQ(t.controllers[CGROUP_CPU].version, CGROUP_VERSION_2);
        ASSERT_OK(cgroup_new(&t, "t-v2cpu", &lim, &c, NULL));
        ASSERT_EQ(cgroup_controller_version(c, CGROUP_CPU), CGROUP_VERSION_2);
        assert_file_value(cgroup_controller_path(c, CGROUP_CPU), "cpu.max", "10000 100000");
        check_cpu_use(c, true);
        destroy_and_check(c);
        cgroup_topology_done(&t);
}

/* ---- harness ---- */

/* After every test: removes leftovers (failing the test if there were
 * any), restores the layout, and clears the environment it may set. */
static int test_teardown(void **state) {
        int found;

        (void)state;
        (void)unsetenv("HUTCH_CGROUP_BASE_V2");
        for (size_t i = 0; i < n_tracked; i++)
                cgroup_topology_done(tracked[i]);
        n_tracked = 0;
        reap_orphans();
        if (geteuid() != 0)
                return 0;
        found = cleanup_leftovers();
        layout_restore();
        for (size_t i = 0; i < ELEMENTSOF(moved); i++)
                if (moved[i].active)
                        return -1;
        if (found > 0) {
                fprintf(stderr, "the test left %d cgroup(s) behind\n", found);
                return -1;
        }
        return 0;
}

/* At the end: removes the bases this run created and the test user. */
static void final_cleanup(void) {
        layout_restore();
        for (size_t i = 0; i < n_watch; i++) {
                char p[PATH_MAX + 8];

                if (watch_base_existed[i])
                        continue;
                if (snprintf(p, sizeof(p), "%s/hutch", watch_mount[i]) < (int)sizeof(p))
                        (void)rmdir(p);
        }
        if (user_created) {
                pid_t pid = fork();

                if (pid == 0) {
                        (void)execl("/usr/sbin/userdel", "userdel", TEST_USER, (char *)NULL);
                        _exit(127);
                }
                if (pid > 0)
                        (void)waitpid(pid, NULL, 0);
                user_created = false;
        }
}

static void watch_add(const char *mount) {
        char p[PATH_MAX + 8];

        if (!mount || n_watch >= WATCH_MAX)
                return;
        for (size_t i = 0; i < n_watch; i++)
                if (strcmp(watch_mount[i], mount) == 0)
                        return;
        (void)snprintf(watch_mount[n_watch], sizeof(watch_mount[n_watch]), "%s", mount);
        (void)snprintf(p, sizeof(p), "%s/hutch", mount);
        watch_base_existed[n_watch] = path_exists(p);
        n_watch++;
}

struct CMUnitTest test_registry[TEST_MAX];
size_t test_registry_n;

int main(void) {
        static CgroupTopology t;
        int r;

        /* Orphans of the tests' children (the double-forked daemons) come
         * back to this process, so the tests can wait for them. */
        (void)prctl(PR_SET_CHILD_SUBREAPER, 1);
        if (geteuid() == 0) {
                /* Instances of this test in several build directories run
                 * one at a time: each cleans up "t-*" cgroups everywhere. */
                int lock = open("/tmp/hutch-test-cgroup.lock",
                                O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);

                if (lock >= 0)
                        (void)flock(lock, LOCK_EX); /* held until exit */
        }
        if (geteuid() == 0 && cgroup_topology_detect(&t, NULL) >= 0) {
                watch_add(t.v2.mount);
                for (int k = 0; k < _CGROUP_CONTROLLER_MAX; k++)
                        watch_add(t.controllers[k].mount);
                watch_add(t.freezer.mount);
                watch_add(t.cpuacct.mount);
                if (t.v2.mount)
                        (void)snprintf(host_v2_mount, sizeof(host_v2_mount), "%s", t.v2.mount);
                cgroup_topology_done(&t);
                /* A run killed before its teardown left these behind. */
                (void)cleanup_leftovers();
        }
        (void)signal(SIGTERM, on_fatal_signal);
        (void)signal(SIGINT, on_fatal_signal);
        (void)signal(SIGHUP, on_fatal_signal);

        for (size_t i = 0; i < test_registry_n; i++)
                test_registry[i].teardown_func = test_teardown;
        r = _cmocka_run_group_tests("test-cgroup", test_registry, test_registry_n, NULL, NULL);
        final_cleanup();
        return r;
}
