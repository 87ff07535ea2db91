/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup/cgroup.h"
#include "doctor/features.h"
#include "fd-util.h"
#include "parse-util.h"
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
        ASSERT_STREQ(feature_id_to_string(FEATURE_MICROVM), "microvm");
        ASSERT_FALSE(feature_is_required(FEATURE_MICROVM));
        ASSERT_STREQ(feature_id_to_string(FEATURE_DISK_LIMIT), "disk_limit");
        ASSERT_FALSE(feature_is_required(FEATURE_DISK_LIMIT));
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

/* ---- cgroups: the doctor says what `hutch run` would do ---- */

static void skip_because(const char *why) {
        if (getenv("HUTCH_TEST_MUST_WORK"))
                fail_msg("cannot run: %s, and HUTCH_TEST_MUST_WORK is set", why);
        fprintf(stderr, "skip: %s\n", why);
        skip();
}

static bool place_usable(const CgroupPlace *p) {
        return p->version != CGROUP_VERSION_NONE && p->writable;
}

static void assert_detail_has(const FeatureCheck *c, const char *want) {
        if (!strstr(c->detail, want))
                fail_msg("\"%s\" is not in the detail: %s", want, c->detail);
}

/* The detail names, per controller, the place the cgroup library picked,
 * and the status follows memory and pids being usable. Works as any user
 * on any layout. */
TEST(cgroups_probe_matches_the_topology) {
        _cleanup_(cgroup_topology_done) CgroupTopology t = {};
        FeatureCheck c = {};
        bool ok;

        ASSERT_OK(cgroup_topology_detect(&t, NULL));
        ASSERT_OK(feature_probe_cgroups(&c));
        assert_valid_check(&c);
        ASSERT_TRUE(strncmp(c.detail, "memory: ", 8) == 0);
        for (CgroupController k = 0; k < _CGROUP_CONTROLLER_MAX; k++) {
                const CgroupPlace *p = t.controllers + k;
                _cleanup_free_ char *want = NULL;

                if (p->version == CGROUP_VERSION_NONE)
                        ASSERT_TRUE(asprintf(&want, "%s: no hierarchy offers it",
                                             cgroup_controller_to_string(k)) > 0);
                else if (!p->base)
                        ASSERT_TRUE(asprintf(&want, "%s: %s at %s with no base for this user",
                                             cgroup_controller_to_string(k),
                                             cgroup_version_to_string(p->version), p->mount) > 0);
                else
                        ASSERT_TRUE(asprintf(&want, "%s: %s %s (%s)",
                                             cgroup_controller_to_string(k),
                                             cgroup_version_to_string(p->version), p->base,
                                             p->writable ? "writable" : "not writable") > 0);
                assert_detail_has(&c, want);
                if (!place_usable(p))
                        assert_detail_has(&c, k == CGROUP_MEMORY ? "--memory"
                                              : k == CGROUP_PIDS ? "--pids"
                                                                 : "--cpus");
        }
        assert_detail_has(&c, "kill/freeze: ");

        ok = place_usable(t.controllers + CGROUP_MEMORY) &&
             place_usable(t.controllers + CGROUP_PIDS);
        ASSERT_EQ(c.status, ok ? FEATURE_OK : FEATURE_DEGRADED);
        if (ok)
                ASSERT_NULL(strstr(c.detail, "not enforced"));
        else {
                assert_detail_has(&c, "will need --allow-degraded");
                assert_detail_has(&c, "not enforced");
        }
        feature_check_done(&c);
}

/* As root this machine (hybrid: v1 memory, pids and cpu, an empty v2
 * hierarchy) gives hutch writable memory and pids cgroups. */
TEST(cgroups_ok_as_root) {
        FeatureCheck c = {};

        if (geteuid() != 0)
                skip_because("needs root: the root cgroups are writable only by root");

        ASSERT_OK(feature_probe_cgroups(&c));
        assert_valid_check(&c);
        if (c.status != FEATURE_OK)
                fail_msg("expected ok, got %s: %s", feature_status_to_string(c.status), c.detail);
        assert_detail_has(&c, "memory: ");
        assert_detail_has(&c, "pids: ");
        assert_detail_has(&c, "/hutch (writable)");
        ASSERT_NULL(strstr(c.detail, "--allow-degraded"));
        feature_check_done(&c);
}

/* The probe only reads, so a forked child can drop to nobody after the
 * test is set up; it sends back "<status> <detail>". */
TEST(cgroups_degraded_as_nobody) {
        _cleanup_free_ char *out = NULL;
        int fds[2], status;
        size_t n = 0, cap = 65536;
        ssize_t k;
        pid_t pid;

        if (geteuid() != 0)
                skip_because("needs root to switch to uid 65534");

        ASSERT_OK(pipe2(fds, O_CLOEXEC));
        pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                FeatureCheck c = {};
                char *msg = NULL;
                int r;

                (void)close(fds[0]);
                if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
                    setresuid(65534, 65534, 65534) < 0)
                        _exit(2);
                r = feature_probe_cgroups(&c);
                if (r < 0)
                        _exit(3);
                if (asprintf(&msg, "%s %s", feature_status_to_string(c.status), c.detail) < 0)
                        _exit(4);
                if (loop_write(fds[1], msg, strlen(msg)) < 0)
                        _exit(5);
                _exit(0);
        }
        (void)close(fds[1]);
        out = malloc(cap + 1);
        ASSERT_NOT_NULL(out);
        while ((k = loop_read(fds[0], out + n, cap - n)) > 0)
                n += (size_t)k;
        out[n] = '\0';
        (void)close(fds[0]);
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFEXITED(status));
        ASSERT_EQ(WEXITSTATUS(status), 0);

        if (strncmp(out, "degraded ", 9) != 0)
                fail_msg("expected degraded as uid 65534, got: %s", out);
        ASSERT_NOT_NULL(strstr(out, "memory: "));
        ASSERT_NOT_NULL(strstr(out, "pids: "));
        /* why: nothing is writable for nobody, and what that means */
        ASSERT_TRUE(strstr(out, "not writable") || strstr(out, "no base for this user"));
        ASSERT_NULL(strstr(out, "(writable)"));
        ASSERT_NOT_NULL(strstr(out, "--memory/--pids"));
        ASSERT_NOT_NULL(strstr(out, "will need --allow-degraded"));
        ASSERT_NOT_NULL(strstr(out, "the default memory and pids limits are not enforced"));
}

/* A bad $HUTCH_CGROUP_BASE_V2 makes detection fail: "missing" with the
 * error, not a failed probe. */
TEST(cgroups_missing_when_detection_fails) {
        _cleanup_free_ char *saved = NULL;
        const char *old = getenv("HUTCH_CGROUP_BASE_V2");
        FeatureCheck c = {};
        int r;

        if (old) {
                saved = strdup(old);
                ASSERT_NOT_NULL(saved);
        }
        ASSERT_OK(setenv("HUTCH_CGROUP_BASE_V2", "relative/path", 1));
        r = feature_probe_cgroups(&c);
        if (saved)
                ASSERT_OK(setenv("HUTCH_CGROUP_BASE_V2", saved, 1));
        else
                ASSERT_OK(unsetenv("HUTCH_CGROUP_BASE_V2"));

        ASSERT_OK(r);
        assert_valid_check(&c);
        ASSERT_EQ(c.status, FEATURE_MISSING);
        assert_detail_has(&c, "detecting the cgroup layout failed: ");
        assert_detail_has(&c, strerror(EINVAL));
        assert_detail_has(&c, "'relative/path'");
        assert_detail_has(&c, "hutch run and hutch create refuse to start");
        feature_check_done(&c);
}

/* A malformed kernel table: the doctor names the line (issue 24). */
TEST(cgroups_missing_names_the_malformed_line) {
        CgroupTopology t = {};
        HutchError e = {};
        FeatureCheck c = {};
        int r;

        r = cgroup_topology_parse("22 1 254:1 / / rw - ext4 /dev/vda1 rw\n"
                                  "41 31 0:4 net:[1] /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
                                  "0::/\n", true, &t, &e);
        ASSERT_ERROR(r, EBADMSG);
        ASSERT_OK(feature_cgroups_from_error(r, &e, &c));
        assert_valid_check(&c);
        ASSERT_EQ(c.status, FEATURE_MISSING);
        assert_detail_has(&c, "detecting the cgroup layout failed: ");
        assert_detail_has(&c, strerror(EBADMSG));
        assert_detail_has(&c, "/proc/self/mountinfo line 2 is malformed (a cgroup mount whose "
                              "root is not a path): '41 31 0:4 net:[1] /sys/fs/cgroup rw - "
                              "cgroup2 cgroup2 rw'");
        feature_check_done(&c);

        /* Without the detail (or with one about another error): the errno. */
        ASSERT_OK(feature_cgroups_from_error(-EIO, &e, &c));
        assert_detail_has(&c, strerror(EIO));
        ASSERT_NULL(strstr(c.detail, "mountinfo"));
        feature_check_done(&c);
        ASSERT_OK(feature_cgroups_from_error(-EBADMSG, NULL, &c));
        ASSERT_NULL(strstr(c.detail, "mountinfo"));
        feature_check_done(&c);

        ASSERT_ERROR(feature_cgroups_from_error(0, NULL, &c), EINVAL);
        ASSERT_ERROR(feature_cgroups_from_error(-EIO, NULL, NULL), EINVAL);
}

/* $HUTCH_CGROUP_BASE_V2 moves the v2 base, for `hutch run` and so for the
 * doctor: kill/freeze names it. */
TEST(cgroups_probe_follows_the_v2_base_variable) {
        _cleanup_(cgroup_topology_done) CgroupTopology t = {};
        _cleanup_free_ char *dir = NULL, *want = NULL;
        FeatureCheck c = {};
        int r;

        if (getenv("HUTCH_CGROUP_BASE_V2"))
                skip_because("$HUTCH_CGROUP_BASE_V2 is already set");
        ASSERT_OK(cgroup_topology_detect(&t, NULL));
        if (t.v2.version != CGROUP_VERSION_2 || !t.v2.writable)
                skip_because("needs a writable v2 hierarchy (root on this machine)");

        ASSERT_TRUE(asprintf(&dir, "%s/hutch-test-doctor-%d", t.v2.mount, (int)getpid()) > 0);
        ASSERT_TRUE(mkdir(dir, 0755) >= 0);
        ASSERT_OK(setenv("HUTCH_CGROUP_BASE_V2", dir, 1));
        r = feature_probe_cgroups(&c);
        (void)unsetenv("HUTCH_CGROUP_BASE_V2");
        (void)rmdir(dir);

        ASSERT_OK(r);
        ASSERT_TRUE(asprintf(&want, "kill/freeze: v2 %s (writable)", dir) > 0);
        assert_detail_has(&c, want);
        feature_check_done(&c);
}

/* ---- cgroups: the detail for a given topology (pure) ---- */

/* A place with borrowed strings: never passed to cgroup_topology_done(). */
#define PLACE(v, m, b, w)                                                                          \
        ((CgroupPlace){.version = (v), .mount = (char *)(m), .base = (char *)(b), .writable = (w)})

static void assert_cgroups_check(const CgroupTopology *t, FeatureStatus status,
                                 const char *detail) {
        FeatureCheck c = {};

        ASSERT_OK(feature_cgroups_from_topology(t, &c));
        assert_valid_check(&c);
        ASSERT_STREQ(c.detail, detail);
        if (c.status != status)
                fail_msg("expected %s, got %s: %s", feature_status_to_string(status),
                         feature_status_to_string(c.status), c.detail);
        feature_check_done(&c);
}

TEST(cgroups_check_pure_v2_as_root) {
        CgroupPlace v2 = PLACE(CGROUP_VERSION_2, "/sys/fs/cgroup", "/sys/fs/cgroup/hutch", true);
        CgroupTopology t = {.privileged = true, .controllers = {v2, v2, v2}, .v2 = v2};

        assert_cgroups_check(&t, FEATURE_OK,
                             "memory: v2 /sys/fs/cgroup/hutch (writable); pids: v2 "
                             "/sys/fs/cgroup/hutch (writable); cpu: v2 /sys/fs/cgroup/hutch "
                             "(writable); kill/freeze: v2 /sys/fs/cgroup/hutch (writable)");
}

TEST(cgroups_check_hybrid_as_root) {
        CgroupTopology t = {
                .controllers =
                        {
                                PLACE(CGROUP_VERSION_1, "/sys/fs/cgroup/memory",
                                      "/sys/fs/cgroup/memory/hutch", true),
                                PLACE(CGROUP_VERSION_1, "/sys/fs/cgroup/pids",
                                      "/sys/fs/cgroup/pids/hutch", true),
                                PLACE(CGROUP_VERSION_1, "/sys/fs/cgroup/cpu",
                                      "/sys/fs/cgroup/cpu/hutch", true),
                        },
                .v2 = PLACE(CGROUP_VERSION_2, "/sys/fs/cgroup/unified",
                            "/sys/fs/cgroup/unified/hutch", true),
                .freezer = PLACE(CGROUP_VERSION_1, "/sys/fs/cgroup/freezer",
                                 "/sys/fs/cgroup/freezer/hutch", true),
        };

        assert_cgroups_check(&t, FEATURE_OK,
                             "memory: v1 /sys/fs/cgroup/memory/hutch (writable); pids: v1 "
                             "/sys/fs/cgroup/pids/hutch (writable); cpu: v1 "
                             "/sys/fs/cgroup/cpu/hutch (writable); kill/freeze: v2 "
                             "/sys/fs/cgroup/unified/hutch (writable)");

        /* without a writable v2, the v1 freezer kills and freezes */
        t.v2.writable = false;
        assert_cgroups_check(&t, FEATURE_OK,
                             "memory: v1 /sys/fs/cgroup/memory/hutch (writable); pids: v1 "
                             "/sys/fs/cgroup/pids/hutch (writable); cpu: v1 "
                             "/sys/fs/cgroup/cpu/hutch (writable); kill/freeze: freezer v1 "
                             "/sys/fs/cgroup/freezer/hutch (writable)");

        /* without either, SIGKILL passes over the memory and pids cgroups */
        t.freezer = PLACE(CGROUP_VERSION_NONE, NULL, NULL, false);
        assert_cgroups_check(
                &t, FEATURE_OK,
                "memory: v1 /sys/fs/cgroup/memory/hutch (writable); pids: v1 "
                "/sys/fs/cgroup/pids/hutch (writable); cpu: v1 /sys/fs/cgroup/cpu/hutch "
                "(writable); kill/freeze: no writable v2 or v1 freezer cgroup (v2 "
                "/sys/fs/cgroup/unified/hutch (not writable), freezer not mounted); kill falls "
                "back to SIGKILL passes over the sandbox's cgroups, freeze is unavailable");
}

TEST(cgroups_check_degraded_says_what_it_means) {
        CgroupPlace v2 =
                PLACE(CGROUP_VERSION_2, "/sys/fs/cgroup", "/sys/fs/cgroup/user.slice", true);
        CgroupTopology t = {.controllers = {v2, v2, v2}, .v2 = v2};

        /* cpu alone missing: still ok, but --cpus needs --allow-degraded */
        t.controllers[CGROUP_CPU] = PLACE(CGROUP_VERSION_NONE, NULL, NULL, false);
        assert_cgroups_check(&t, FEATURE_OK,
                             "memory: v2 /sys/fs/cgroup/user.slice (writable); pids: v2 "
                             "/sys/fs/cgroup/user.slice (writable); cpu: no hierarchy offers "
                             "it; kill/freeze: v2 /sys/fs/cgroup/user.slice (writable); --cpus "
                             "will need --allow-degraded");

        /* memory not offered by v2 */
        t.controllers[CGROUP_MEMORY] = PLACE(CGROUP_VERSION_NONE, NULL, NULL, false);
        assert_cgroups_check(&t, FEATURE_DEGRADED,
                             "memory: no hierarchy offers it; pids: v2 /sys/fs/cgroup/user.slice "
                             "(writable); cpu: no hierarchy offers it; kill/freeze: v2 "
                             "/sys/fs/cgroup/user.slice (writable); --memory/--cpus will need "
                             "--allow-degraded; the default memory limit is not enforced");

        /* pids served but not writable */
        t.controllers[CGROUP_MEMORY] = v2;
        t.controllers[CGROUP_PIDS].writable = false;
        assert_cgroups_check(&t, FEATURE_DEGRADED,
                             "memory: v2 /sys/fs/cgroup/user.slice (writable); pids: v2 "
                             "/sys/fs/cgroup/user.slice (not writable); cpu: no hierarchy offers "
                             "it; kill/freeze: v2 /sys/fs/cgroup/user.slice (writable); "
                             "--pids/--cpus will need --allow-degraded; the default pids limit "
                             "is not enforced");
}

TEST(cgroups_check_nothing_usable) {
        CgroupPlace nobase = PLACE(CGROUP_VERSION_2, "/sys/fs/cgroup", NULL, false);
        CgroupTopology t = {.controllers = {nobase, nobase, nobase}, .v2 = nobase};

        assert_cgroups_check(
                &t, FEATURE_DEGRADED,
                "memory: v2 at /sys/fs/cgroup with no base for this user; pids: v2 at "
                "/sys/fs/cgroup with no base for this user; cpu: v2 at /sys/fs/cgroup with no "
                "base for this user; kill/freeze: no writable v2 or v1 freezer cgroup (v2 at "
                "/sys/fs/cgroup with no base for this user, freezer not mounted); nothing can "
                "kill by cgroup, the pid namespace still ends everything when the run ends; "
                "--memory/--pids/--cpus will need --allow-degraded; the default memory and pids "
                "limits are not enforced");

        /* no cgroup filesystem at all */
        t = (CgroupTopology){};
        assert_cgroups_check(
                &t, FEATURE_DEGRADED,
                "memory: no hierarchy offers it; pids: no hierarchy offers it; cpu: no hierarchy "
                "offers it; kill/freeze: no writable v2 or v1 freezer cgroup (no v2 mounted, "
                "freezer not mounted); nothing can kill by cgroup, the pid namespace still ends "
                "everything when the run ends; --memory/--pids/--cpus will need "
                "--allow-degraded; the default memory and pids limits are not enforced");

        /* a writable cpuacct alone (no limit) still gives the SIGKILL passes */
        t.cpuacct = PLACE(CGROUP_VERSION_1, "/sys/fs/cgroup/cpuacct",
                          "/sys/fs/cgroup/cpuacct/hutch", true);
        assert_cgroups_check(
                &t, FEATURE_DEGRADED,
                "memory: no hierarchy offers it; pids: no hierarchy offers it; cpu: no hierarchy "
                "offers it; kill/freeze: no writable v2 or v1 freezer cgroup (no v2 mounted, "
                "freezer not mounted); kill falls back to SIGKILL passes over the sandbox's "
                "cgroups, freeze is unavailable; --memory/--pids/--cpus will need "
                "--allow-degraded; the default memory and pids limits are not enforced");
}

TEST(cgroups_check_bad_arguments) {
        CgroupTopology t = {};
        FeatureCheck c = {.status = FEATURE_MISSING};

        ASSERT_ERROR(feature_cgroups_from_topology(NULL, &c), EINVAL);
        ASSERT_ERROR(feature_cgroups_from_topology(&t, NULL), EINVAL);
        /* ret_ is written only on success */
        ASSERT_EQ(c.status, FEATURE_MISSING);
        ASSERT_NULL(c.detail);
}

DEFINE_TEST_MAIN
