/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdlib.h>
#include <unistd.h>

#include "parse-util.h"
#include "sandbox/features.h"
#include "strv.h"
#include "test.h"

/* ---- enums ---- */

TEST(feature_status_strings) {
        for (int i = 0; i < _FEATURE_STATUS_MAX; i++) {
                const char *s = feature_status_to_string((FeatureStatus)i);

                ASSERT_NOT_NULL(s);
                ASSERT_EQ(feature_status_from_string(s), i);
        }
        ASSERT_STREQ(feature_status_to_string(FEATURE_OK), "ok");
        ASSERT_STREQ(feature_status_to_string(FEATURE_MISSING), "missing");
        ASSERT_STREQ(feature_status_to_string(FEATURE_DEGRADED), "degraded");
        ASSERT_NULL(feature_status_to_string(_FEATURE_STATUS_MAX));
        ASSERT_NULL(feature_status_to_string(_FEATURE_STATUS_INVALID));
        ASSERT_EQ(feature_status_from_string("OK"), _FEATURE_STATUS_INVALID);
        ASSERT_EQ(feature_status_from_string(""), _FEATURE_STATUS_INVALID);
        ASSERT_EQ(feature_status_from_string(NULL), _FEATURE_STATUS_INVALID);
}

TEST(feature_id_strings) {
        for (int i = 0; i < _FEATURE_ID_MAX; i++) {
                const char *s = feature_id_to_string((FeatureId)i);

                ASSERT_NOT_NULL(s);
                ASSERT_EQ(feature_id_from_string(s), i);
        }
        ASSERT_STREQ(feature_id_to_string(FEATURE_USER_NAMESPACES), "user_namespaces");
        ASSERT_STREQ(feature_id_to_string(FEATURE_KVM), "kvm");
        ASSERT_NULL(feature_id_to_string(_FEATURE_ID_MAX));
        ASSERT_NULL(feature_id_to_string(_FEATURE_ID_INVALID));
        ASSERT_EQ(feature_id_from_string("user-namespaces"), _FEATURE_ID_INVALID);
        ASSERT_EQ(feature_id_from_string(NULL), _FEATURE_ID_INVALID);
}

TEST(feature_required_and_impact) {
        int n_required = 0;

        for (int i = 0; i < _FEATURE_ID_MAX; i++) {
                n_required += feature_is_required((FeatureId)i);
                for (int s = 0; s < _FEATURE_STATUS_MAX; s++) {
                        const char *t = feature_impact((FeatureId)i, (FeatureStatus)s);

                        ASSERT_NOT_NULL(t);
                        ASSERT_TRUE(t[0] != '\0');
                }
        }
        ASSERT_EQ(n_required, 3);
        ASSERT_TRUE(feature_is_required(FEATURE_USER_NAMESPACES));
        ASSERT_TRUE(feature_is_required(FEATURE_MOUNT_IN_USERNS));
        ASSERT_TRUE(feature_is_required(FEATURE_SECCOMP));
        ASSERT_FALSE(feature_is_required(FEATURE_KVM));
        ASSERT_FALSE(feature_is_required(FEATURE_CGROUPS));
        ASSERT_NULL(feature_impact(_FEATURE_ID_MAX, FEATURE_OK));
        ASSERT_NULL(feature_impact(FEATURE_KVM, _FEATURE_STATUS_MAX));
        ASSERT_NULL(feature_impact(_FEATURE_ID_INVALID, FEATURE_OK));
        ASSERT_NULL(feature_impact(FEATURE_KVM, _FEATURE_STATUS_INVALID));
}

/* ---- the probes, on this machine ---- */

static void assert_valid_check(const FeatureCheck *c) {
        ASSERT_NOT_NULL(feature_status_to_string(c->status));
        ASSERT_NOT_NULL(c->detail);
        ASSERT_TRUE(c->detail[0] != '\0');
        ASSERT_NULL(strchr(c->detail, '\n'));
}

TEST(every_probe_returns_a_valid_check) {
        for (int i = 0; i < _FEATURE_ID_MAX; i++) {
                FeatureCheck c = {};

                ASSERT_OK(feature_probe((FeatureId)i, &c));
                assert_valid_check(&c);
                feature_check_done(&c);
                ASSERT_NULL(c.detail);
        }
        feature_check_done(NULL);
}

TEST(feature_probe_bad_id) {
        FeatureCheck c = {.status = FEATURE_DEGRADED};

        ASSERT_ERROR(feature_probe(_FEATURE_ID_MAX, &c), EINVAL);
        ASSERT_ERROR(feature_probe(_FEATURE_ID_INVALID, &c), EINVAL);
        /* ret_ is written only on success */
        ASSERT_EQ(c.status, FEATURE_DEGRADED);
        ASSERT_NULL(c.detail);
}

/* This machine (kernel 6.18) is known to have user namespaces, mounts in
 * them, seccomp and landlock: each must report "ok". */
static void assert_probe_ok(int (*probe)(FeatureCheck *)) {
        FeatureCheck c = {};

        ASSERT_OK(probe(&c));
        assert_valid_check(&c);
        if (c.status != FEATURE_OK)
                fail_msg("expected ok, got %s: %s", feature_status_to_string(c.status), c.detail);
        feature_check_done(&c);
}

TEST(user_namespaces_ok_here) {
        assert_probe_ok(feature_probe_user_namespaces);
}

TEST(mount_in_userns_ok_here) {
        assert_probe_ok(feature_probe_mount_in_userns);
}

TEST(seccomp_ok_here) {
        assert_probe_ok(feature_probe_seccomp);
}

TEST(landlock_ok_here) {
        FeatureCheck c = {};
        uint32_t abi = 0;

        assert_probe_ok(feature_probe_landlock);
        ASSERT_OK(feature_probe_landlock(&c));
        ASSERT_TRUE(strncmp(c.detail, "landlock ABI ", 13) == 0);
        ASSERT_OK(safe_atou32(c.detail + 13, &abi));
        ASSERT_TRUE(abi >= 1);
        feature_check_done(&c);
}

TEST(idmapped_mounts_depend_on_privilege) {
        FeatureCheck c = {};

        ASSERT_OK(feature_probe_idmapped_mounts(&c));
        assert_valid_check(&c);
        if (geteuid() != 0) {
                ASSERT_EQ(c.status, FEATURE_OK);
                ASSERT_STREQ(c.detail, "not needed (single-id map)");
        } else
                ASSERT_NULL(strstr(c.detail, "not needed"));
        feature_check_done(&c);
}

TEST(cgroups_probe_describes_a_layout) {
        FeatureCheck c = {};

        ASSERT_OK(feature_probe_cgroups(&c));
        assert_valid_check(&c);
        ASSERT_TRUE(strstr(c.detail, "cgroup v") || strstr(c.detail, "no cgroup filesystem"));
        if (c.status != FEATURE_OK)
                ASSERT_NOT_NULL(strstr(c.detail, "rlimits"));
        feature_check_done(&c);
}

/* ---- cgroup layout parser ---- */

static const char mountinfo_v2[] =
        "24 30 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
        "25 30 0:23 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n"
        "30 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro\n"
        "35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 "
        "rw,nsdelegate,memory_recursiveprot\n";

static const char mountinfo_v1[] =
        "25 18 0:21 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:8 - tmpfs tmpfs ro,mode=755\n"
        "26 25 0:22 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:9 - cgroup "
        "cgroup rw,xattr,release_agent=/usr/lib/systemd/systemd-cgroups-agent,name=systemd\n"
        "29 25 0:25 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:12 - "
        "cgroup cgroup rw,cpu,cpuacct\n"
        "30 25 0:26 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:13 - cgroup "
        "cgroup rw,memory\n"
        "31 25 0:27 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:14 - cgroup "
        "cgroup rw,pids\n";

/* Copied from this machine's /proc/self/mountinfo (hybrid: v1 controllers,
 * an empty v2 hierarchy at /sys/fs/cgroup/unified). */
static const char mountinfo_hybrid[] =
        "22 27 0:21 / /proc rw,relatime - proc proc rw\n"
        "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard,resv_strict,resuid=65534\n"
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

TEST(cgroup_layout_pure_v2) {
        CgroupLayout l = {};
        const CgroupMount *m;

        ASSERT_OK(cgroup_layout_parse(mountinfo_v2, &l));
        ASSERT_EQ(l.n_mounts, 1);
        m = cgroup_layout_find_v2(&l);
        ASSERT_NOT_NULL(m);
        ASSERT_TRUE(m->v2);
        ASSERT_STREQ(m->path, "/sys/fs/cgroup");
        ASSERT_STREQ(m->root, "/");
        ASSERT_NULL(m->controllers);
        ASSERT_NULL(m->name);
        ASSERT_NULL(cgroup_layout_find_v1(&l, "memory"));
        ASSERT_NULL(cgroup_layout_find_v1(&l, NULL));
        cgroup_layout_done(&l);
        ASSERT_EQ(l.n_mounts, 0);
        ASSERT_NULL(l.mounts);
}

TEST(cgroup_layout_pure_v1) {
        CgroupLayout l = {};
        const CgroupMount *m;

        ASSERT_OK(cgroup_layout_parse(mountinfo_v1, &l));
        ASSERT_EQ(l.n_mounts, 4);
        ASSERT_NULL(cgroup_layout_find_v2(&l));

        /* named hierarchy: no controllers; xattr and release_agent= are not controllers */
        ASSERT_STREQ(l.mounts[0].name, "systemd");
        ASSERT_EQ(strv_length(l.mounts[0].controllers), 0);
        ASSERT_FALSE(l.mounts[0].v2);

        m = cgroup_layout_find_v1(&l, "cpuacct");
        ASSERT_NOT_NULL(m);
        ASSERT_STREQ(m->path, "/sys/fs/cgroup/cpu,cpuacct");
        ASSERT_EQ(strv_length(m->controllers), 2);
        ASSERT_STREQ(m->controllers[0], "cpu");
        ASSERT_STREQ(m->controllers[1], "cpuacct");
        ASSERT_TRUE(cgroup_layout_find_v1(&l, "cpu") == m);

        m = cgroup_layout_find_v1(&l, "memory");
        ASSERT_NOT_NULL(m);
        ASSERT_STREQ(m->path, "/sys/fs/cgroup/memory");
        m = cgroup_layout_find_v1(&l, "pids");
        ASSERT_NOT_NULL(m);
        ASSERT_STREQ(m->path, "/sys/fs/cgroup/pids");
        ASSERT_NULL(cgroup_layout_find_v1(&l, "freezer"));
        ASSERT_NULL(cgroup_layout_find_v1(&l, "rw"));
        ASSERT_NULL(cgroup_layout_find_v1(&l, "xattr"));
        cgroup_layout_done(&l);
}

TEST(cgroup_layout_hybrid) {
        static const char *const v1[] = {"cpu",     "cpuacct", "cpuset", "memory",
                                         "devices", "freezer", "blkio",  "pids"};
        CgroupLayout l = {};
        const CgroupMount *m;

        ASSERT_OK(cgroup_layout_parse(mountinfo_hybrid, &l));
        ASSERT_EQ(l.n_mounts, 10);
        m = cgroup_layout_find_v2(&l);
        ASSERT_NOT_NULL(m);
        ASSERT_STREQ(m->path, "/sys/fs/cgroup/unified");
        for (size_t i = 0; i < ELEMENTSOF(v1); i++) {
                char want[64];

                m = cgroup_layout_find_v1(&l, v1[i]);
                ASSERT_NOT_NULL(m);
                (void)snprintf(want, sizeof(want), "/sys/fs/cgroup/%s", v1[i]);
                ASSERT_STREQ(m->path, want);
                ASSERT_EQ(strv_length(m->controllers), 1);
        }
        ASSERT_STREQ(l.mounts[8].name, "systemd");
        ASSERT_NULL(cgroup_layout_find_v1(&l, "hugetlb"));
        cgroup_layout_done(&l);
}

TEST(cgroup_layout_escapes_and_optional_fields) {
        CgroupLayout l = {};

        ASSERT_OK(cgroup_layout_parse("40 31 0:37 /a\\040b /sys/fs/my\\040cg\\134x rw shared:1 "
                                      "master:2 propagate_from:3 - cgroup2 cgroup2 rw\n"
                                      "50 1 0:40 / /empty\\011src rw - tmpfs  rw",
                                      &l));
        ASSERT_EQ(l.n_mounts, 1);
        ASSERT_STREQ(l.mounts[0].root, "/a b");
        ASSERT_STREQ(l.mounts[0].path, "/sys/fs/my cg\\x");
        cgroup_layout_done(&l);
}

TEST(cgroup_layout_prefers_root_mount) {
        CgroupLayout l = {};
        const CgroupMount *m;

        /* a bind of a sub-hierarchy first (as in a container), the full one second */
        ASSERT_OK(cgroup_layout_parse(
                "60 1 0:32 /docker/abc /c/memory rw - cgroup cgroup rw,memory\n"
                "61 1 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
                "62 1 0:38 /sub /c/unified rw - cgroup2 cgroup2 rw\n",
                &l));
        ASSERT_EQ(l.n_mounts, 3);
        m = cgroup_layout_find_v1(&l, "memory");
        ASSERT_STREQ(m->path, "/sys/fs/cgroup/memory");
        /* only a sub-hierarchy of v2: it is still found */
        m = cgroup_layout_find_v2(&l);
        ASSERT_NOT_NULL(m);
        ASSERT_STREQ(m->root, "/sub");
        cgroup_layout_done(&l);
}

TEST(cgroup_layout_empty_and_no_cgroups) {
        CgroupLayout l = {};

        ASSERT_OK(cgroup_layout_parse("", &l));
        ASSERT_EQ(l.n_mounts, 0);
        ASSERT_NULL(cgroup_layout_find_v2(&l));
        cgroup_layout_done(&l);

        ASSERT_OK(cgroup_layout_parse("\n\n22 27 0:21 / /proc rw - proc proc rw\n\n", &l));
        ASSERT_EQ(l.n_mounts, 0);
        ASSERT_NULL(cgroup_layout_find_v1(&l, "memory"));
        cgroup_layout_done(&l);
}

static void assert_parse_fails(const char *text, int err) {
        CgroupLayout l = {.n_mounts = 4242};
        int r = cgroup_layout_parse(text, &l);

        if (r != -err)
                fail_msg("parsing \"%s\" gave %d, expected %d", text ? text : "(null)", r, -err);
        /* ret_ is written only on success */
        ASSERT_EQ(l.n_mounts, 4242);
        ASSERT_NULL(l.mounts);
}

TEST(cgroup_layout_errors) {
        /* NULL input */
        assert_parse_fails(NULL, EINVAL);
        /* garbage */
        assert_parse_fails("hello world", EBADMSG);
        assert_parse_fails("\x01\x02\x03 \xff\xfe", EBADMSG);
        assert_parse_fails("-", EBADMSG);
        /* fewer than six fields before the separator */
        assert_parse_fails("1 2 0:1 /", EBADMSG);
        assert_parse_fails("1 2 0:1 / /x - cgroup2 cgroup2 rw", EBADMSG);
        /* no separator */
        assert_parse_fails("1 2 0:1 / /x rw cgroup2 cgroup2 rw", EBADMSG);
        /* fewer than three fields after it */
        assert_parse_fails("1 2 0:1 / /x rw - cgroup2 cgroup2", EBADMSG);
        assert_parse_fails("1 2 0:1 / /x rw -", EBADMSG);
        /* an empty mandatory field (two spaces) */
        assert_parse_fails("1  2 0:1 / /x rw - cgroup2 cgroup2 rw", EBADMSG);
        /* non-numeric or overflowing mount id / parent id */
        assert_parse_fails("a 2 0:1 / /x rw - cgroup2 cgroup2 rw", EBADMSG);
        assert_parse_fails("-1 2 0:1 / /x rw - cgroup2 cgroup2 rw", EBADMSG);
        assert_parse_fails("99999999999 2 0:1 / /x rw - cgroup2 cgroup2 rw", EBADMSG);
        assert_parse_fails("12345678901234567890 2 0:1 / /x rw - cgroup2 cgroup2 rw", EBADMSG);
        assert_parse_fails("1 b 0:1 / /x rw - cgroup2 cgroup2 rw", EBADMSG);
        /* bad MAJ:MIN */
        assert_parse_fails("1 2 01 / /x rw - cgroup2 cgroup2 rw", EBADMSG);
        assert_parse_fails("1 2 x:1 / /x rw - cgroup2 cgroup2 rw", EBADMSG);
        assert_parse_fails("1 2 0: / /x rw - cgroup2 cgroup2 rw", EBADMSG);
        assert_parse_fails("1 2 :1 / /x rw - cgroup2 cgroup2 rw", EBADMSG);
        /* bad escapes, in a cgroup line and in another line */
        assert_parse_fails("1 2 0:1 / /x\\04 rw - cgroup2 cgroup2 rw", EBADMSG);
        assert_parse_fails("1 2 0:1 / /x\\ rw - cgroup2 cgroup2 rw", EBADMSG);
        assert_parse_fails("1 2 0:1 / /x\\089 rw - cgroup2 cgroup2 rw", EBADMSG);
        assert_parse_fails("1 2 0:1 / /x\\000 rw - cgroup2 cgroup2 rw", EBADMSG);
        assert_parse_fails("1 2 0:1 / /x\\400 rw - cgroup2 cgroup2 rw", EBADMSG);
        assert_parse_fails("1 2 0:1 /\\9 /x rw - cgroup cgroup rw,memory", EBADMSG);
        assert_parse_fails("1 2 0:1 /\\9 /x rw - ext4 /dev/sda rw", EBADMSG);
        assert_parse_fails("1 2 0:1 / /x\\12 rw - ext4 /dev/sda rw", EBADMSG);
        /* a bad line after good cgroup lines: nothing leaks (LSan), error returned */
        assert_parse_fails("35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
                           "41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
                           "garbage\n",
                           EBADMSG);
}

TEST(cgroup_layout_too_many_mounts) {
        _cleanup_free_ char *text = NULL;
        static const char line[] = "41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
        size_t n = sizeof(line) - 1;
        CgroupLayout l = {};

        text = malloc(n * (CGROUP_LAYOUT_MOUNTS_MAX + 1) + 1);
        ASSERT_NOT_NULL(text);
        for (size_t i = 0; i < CGROUP_LAYOUT_MOUNTS_MAX; i++)
                memcpy(text + i * n, line, n);
        text[n * CGROUP_LAYOUT_MOUNTS_MAX] = '\0';

        /* exactly the cap: fine */
        ASSERT_OK(cgroup_layout_parse(text, &l));
        ASSERT_EQ(l.n_mounts, CGROUP_LAYOUT_MOUNTS_MAX);
        cgroup_layout_done(&l);

        /* one more: -E2BIG */
        memcpy(text + n * CGROUP_LAYOUT_MOUNTS_MAX, line, n + 1);
        assert_parse_fails(text, E2BIG);
}

/* ---- /proc/self/cgroup ---- */

/* Copied from this machine. */
static const char self_cgroup_hybrid[] = "9:name=systemd:/\n"
                                         "8:pids:/\n"
                                         "7:blkio:/\n"
                                         "6:freezer:/\n"
                                         "5:devices:/\n"
                                         "4:memory:/process_api/1a2a11713e38acc5ee609ca65ab74974\n"
                                         "3:cpuset:/\n"
                                         "2:cpuacct:/\n"
                                         "1:cpu:/\n"
                                         "0::/\n";

TEST(cgroup_self_path_lookups) {
        _cleanup_free_ char *a = NULL, *b = NULL, *c = NULL, *d = NULL, *e = NULL;

        ASSERT_OK(cgroup_self_path(self_cgroup_hybrid, NULL, &a));
        ASSERT_STREQ(a, "/");
        ASSERT_OK(cgroup_self_path(self_cgroup_hybrid, "memory", &b));
        ASSERT_STREQ(b, "/process_api/1a2a11713e38acc5ee609ca65ab74974");
        ASSERT_OK(cgroup_self_path(self_cgroup_hybrid, "name=systemd", &c));
        ASSERT_STREQ(c, "/");
        ASSERT_OK(cgroup_self_path("3:cpu,cpuacct:/x\n0::/user.slice/a:b.scope", "cpuacct", &d));
        ASSERT_STREQ(d, "/x");
        ASSERT_OK(cgroup_self_path("3:cpu,cpuacct:/x\n0::/user.slice/a:b.scope", NULL, &e));
        ASSERT_STREQ(e, "/user.slice/a:b.scope");
}

TEST(cgroup_self_path_errors) {
        char *s = (char *)"untouched";

        ASSERT_ERROR(cgroup_self_path(NULL, NULL, &s), EINVAL);
        /* no such line: pure v1 has no 0:: line; an unmounted controller */
        ASSERT_ERROR(cgroup_self_path("4:memory:/a\n", NULL, &s), ENOENT);
        ASSERT_ERROR(cgroup_self_path(self_cgroup_hybrid, "rdma", &s), ENOENT);
        ASSERT_ERROR(cgroup_self_path("", NULL, &s), ENOENT);
        /* "cpu" must not match "cpuacct" */
        ASSERT_ERROR(cgroup_self_path("2:cpuacct:/\n", "cpu", &s), ENOENT);
        /* malformed lines */
        ASSERT_ERROR(cgroup_self_path("garbage", NULL, &s), EBADMSG);
        ASSERT_ERROR(cgroup_self_path("0:/", NULL, &s), EBADMSG);
        ASSERT_ERROR(cgroup_self_path("0::", NULL, &s), EBADMSG);
        ASSERT_ERROR(cgroup_self_path("0::relative", NULL, &s), EBADMSG);
        ASSERT_ERROR(cgroup_self_path("x::/", NULL, &s), EBADMSG);
        ASSERT_ERROR(cgroup_self_path(":memory:/", "memory", &s), EBADMSG);
        /* a malformed line after the match still fails */
        ASSERT_ERROR(cgroup_self_path("0::/\nbroken\n", NULL, &s), EBADMSG);
        ASSERT_STREQ(s, "untouched");
}

DEFINE_TEST_MAIN
