/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy/policy-internal.h"
#include "policy/policy.h"
#include "strv.h"
#include "test-util.h"
#include "test.h"

static void make_dir(const char *path) {
        if (mkdir(path, 0755) < 0)
                fail_msg("mkdir %s: %s", path, strerror(errno));
}

static void make_file(const char *path) {
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);

        if (fd < 0)
                fail_msg("create %s: %s", path, strerror(errno));
        (void)close(fd);
}

TEST(workspace_mode_strings) {
        for (int i = 0; i < _WORKSPACE_MODE_MAX; i++) {
                ASSERT_NOT_NULL(workspace_mode_to_string((WorkspaceMode)i));
                ASSERT_EQ(workspace_mode_from_string(workspace_mode_to_string((WorkspaceMode)i)),
                          i);
        }
        ASSERT_STREQ(workspace_mode_to_string(WORKSPACE_MODE_MOUNT), "mount");
        ASSERT_STREQ(workspace_mode_to_string(WORKSPACE_MODE_COPY), "copy");
        ASSERT_STREQ(workspace_mode_to_string(WORKSPACE_MODE_OVERLAY), "overlay");
        ASSERT_EQ(workspace_mode_from_string("overlay"), WORKSPACE_MODE_OVERLAY);
        ASSERT_NULL(workspace_mode_to_string(_WORKSPACE_MODE_MAX));
        ASSERT_NULL(workspace_mode_to_string(_WORKSPACE_MODE_INVALID));
        ASSERT_EQ(workspace_mode_from_string("overlayfs"), _WORKSPACE_MODE_INVALID);
        ASSERT_EQ(workspace_mode_from_string("Copy"), _WORKSPACE_MODE_INVALID);
        ASSERT_EQ(workspace_mode_from_string(""), _WORKSPACE_MODE_INVALID);
        ASSERT_EQ(workspace_mode_from_string(NULL), _WORKSPACE_MODE_INVALID);
        ASSERT_EQ(_WORKSPACE_MODE_INVALID, -EINVAL);
}

TEST(network_mode_strings) {
        for (int i = 0; i < _NETWORK_MODE_MAX; i++)
                ASSERT_EQ(network_mode_from_string(network_mode_to_string((NetworkMode)i)), i);
        ASSERT_STREQ(network_mode_to_string(NETWORK_MODE_NONE), "none");
        ASSERT_NULL(network_mode_to_string(_NETWORK_MODE_MAX));
        ASSERT_NULL(network_mode_to_string(_NETWORK_MODE_INVALID));
        ASSERT_EQ(network_mode_from_string("host"), _NETWORK_MODE_INVALID);
        ASSERT_EQ(network_mode_from_string(NULL), _NETWORK_MODE_INVALID);
        ASSERT_EQ(_NETWORK_MODE_INVALID, -EINVAL);
}

TEST(policy_new_defaults) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError e = {};

        ASSERT_NOT_NULL(p);
        ASSERT_NULL(p->workspace);
        ASSERT_EQ(p->workspace_mode, WORKSPACE_MODE_MOUNT);
        ASSERT_EQ(p->n_binds, 0);
        ASSERT_EQ(p->n_tmpfs, 0);
        ASSERT_NULL(p->env);
        ASSERT_NULL(p->env_pass);
        ASSERT_NULL(p->workdir);
        ASSERT_STREQ(p->hostname, POLICY_DEFAULT_HOSTNAME);
        ASSERT_STREQ(p->hostname, "hutch");
        ASSERT_FALSE(p->read_only);
        ASSERT_EQ(p->network, NETWORK_MODE_NONE);
        ASSERT_OK(policy_validate(p, &e));
        ASSERT_NULL(policy_free(NULL));
}

TEST(null_arguments) {
        _cleanup_(policy_freep) Policy *p = policy_new();

        ASSERT_ERROR(policy_set_workspace_spec(NULL, "/tmp", NULL), EINVAL);
        ASSERT_ERROR(policy_set_workspace_spec(p, NULL, NULL), EINVAL);
        ASSERT_ERROR(policy_add_bind_spec(NULL, "/a:/b", NULL), EINVAL);
        ASSERT_ERROR(policy_add_bind_spec(p, NULL, NULL), EINVAL);
        ASSERT_ERROR(policy_add_tmpfs_spec(NULL, "/x", NULL), EINVAL);
        ASSERT_ERROR(policy_add_tmpfs_spec(p, NULL, NULL), EINVAL);
        ASSERT_ERROR(policy_add_env_spec(NULL, "A=1", NULL), EINVAL);
        ASSERT_ERROR(policy_add_env_spec(p, NULL, NULL), EINVAL);
        ASSERT_ERROR(policy_set_hostname(NULL, "box", NULL), EINVAL);
        ASSERT_ERROR(policy_set_hostname(p, NULL, NULL), EINVAL);
        ASSERT_ERROR(policy_set_workdir(NULL, "/w", NULL), EINVAL);
        ASSERT_ERROR(policy_set_workdir(p, NULL, NULL), EINVAL);
        ASSERT_ERROR(policy_set_network(NULL, "none", NULL), EINVAL);
        ASSERT_ERROR(policy_set_network(p, NULL, NULL), EINVAL);
        ASSERT_ERROR(policy_validate(NULL, NULL), EINVAL);
        ASSERT_ERROR(policy_set_workspace_path(p, "/tmp", _WORKSPACE_MODE_MAX, NULL, NULL), EINVAL);
}

TEST(workspace_spec_absolute_and_modes) {
        _cleanup_tmpdir_ char *dir = make_tmpdir();
        _cleanup_(policy_freep) Policy *p = policy_new();
        _cleanup_free_ char *spec = NULL, *ws = path_join(dir, "ws");
        HutchError e = {};

        make_dir(ws);
        ASSERT_OK(policy_set_workspace_spec(p, ws, &e));
        ASSERT_STREQ(p->workspace, ws);
        ASSERT_EQ(p->workspace_mode, WORKSPACE_MODE_MOUNT);

        ASSERT_TRUE(asprintf(&spec, "%s:copy", ws) > 0);
        ASSERT_OK(policy_set_workspace_spec(p, spec, &e));
        ASSERT_STREQ(p->workspace, ws);
        ASSERT_EQ(p->workspace_mode, WORKSPACE_MODE_COPY);

        /* Without a mode, the mode already set is kept (a policy file's copy
         * is not silently turned into a read-write mount by a flag). */
        ASSERT_OK(policy_set_workspace_spec(p, ws, &e));
        ASSERT_EQ(p->workspace_mode, WORKSPACE_MODE_COPY);

        /* An overlay workspace passes the same host checks as the others. */
        free(spec);
        spec = NULL;
        ASSERT_TRUE(asprintf(&spec, "%s:overlay", ws) > 0);
        ASSERT_OK(policy_set_workspace_spec(p, spec, &e));
        ASSERT_STREQ(p->workspace, ws);
        ASSERT_EQ(p->workspace_mode, WORKSPACE_MODE_OVERLAY);
        ASSERT_OK(policy_validate(p, &e));
        ASSERT_OK(policy_set_workspace_spec(p, ws, &e));
        ASSERT_EQ(p->workspace_mode, WORKSPACE_MODE_OVERLAY);

        free(spec);
        spec = NULL;
        ASSERT_TRUE(asprintf(&spec, "%s/:mount", ws) > 0);
        ASSERT_OK(policy_set_workspace_spec(p, spec, &e));
        ASSERT_STREQ(p->workspace, ws);
        ASSERT_EQ(p->workspace_mode, WORKSPACE_MODE_MOUNT);
        ASSERT_OK(policy_validate(p, &e));
}

TEST(workspace_spec_relative_symlink_and_colon) {
        _cleanup_tmpdir_ char *dir = make_tmpdir();
        _cleanup_(policy_freep) Policy *p = policy_new();
        _cleanup_free_ char *ws = path_join(dir, "ws"), *link = path_join(dir, "link"),
                            *colon = path_join(dir, "a:b"), *old = getcwd(NULL, 0);
        HutchError e = {};

        ASSERT_NOT_NULL(old);
        make_dir(ws);
        make_dir(colon);
        ASSERT_OK(symlink("ws", link));
        ASSERT_OK(chdir(dir));

        ASSERT_OK(policy_set_workspace_spec(p, "./ws:copy", &e));
        ASSERT_STREQ(p->workspace, ws);
        ASSERT_EQ(p->workspace_mode, WORKSPACE_MODE_COPY);

        /* A symlink is resolved when the workspace is set. */
        ASSERT_OK(policy_set_workspace_spec(p, "link", &e));
        ASSERT_STREQ(p->workspace, ws);

        /* ':' followed by something that is not a mode is part of the path. */
        ASSERT_OK(policy_set_workspace_spec(p, "a:b", &e));
        ASSERT_STREQ(p->workspace, colon);
        ASSERT_OK(policy_validate(p, &e));

        /* A path that does not exist is made absolute lexically. */
        ASSERT_OK(policy_set_workspace_spec(p, "./nope/./x/", &e));
        ASSERT_TRUE(strncmp(p->workspace, dir, strlen(dir)) == 0);
        ASSERT_STREQ(p->workspace + strlen(dir), "/nope/x");

        ASSERT_OK(chdir(old));
}

TEST(workspace_spec_errors) {
        _cleanup_tmpdir_ char *dir = make_tmpdir();
        _cleanup_(policy_freep) Policy *p = policy_new();
        _cleanup_free_ char *gone = path_join(dir, "gone"), *old = getcwd(NULL, 0);
        HutchError e = {};

        ASSERT_ERROR(policy_set_workspace_spec(p, "", &e), EINVAL);
        ASSERT_STREQ(e.msg, "workspace directory in --workspace '' is empty");
        ASSERT_EQ(e.errnum, EINVAL);
        ASSERT_ERROR(policy_set_workspace_spec(p, ":copy", &e), EINVAL);
        ASSERT_STREQ(e.msg, "workspace directory in --workspace ':copy' is empty");
        ASSERT_NULL(p->workspace);

        /* A relative path when the current directory is gone: getcwd()'s
         * errno, and the policy is unchanged. */
        ASSERT_NOT_NULL(old);
        make_dir(gone);
        ASSERT_OK(chdir(gone));
        ASSERT_OK(rmdir(gone));
        ASSERT_ERROR(policy_set_workspace_spec(p, "x", &e), ENOENT);
        ASSERT_TRUE(strstr(e.msg, "cannot make workspace 'x' in --workspace 'x' absolute") ==
                    e.msg);
        ASSERT_ERROR(policy_add_bind_spec(p, "x:/data", &e), ENOENT);
        ASSERT_TRUE(strstr(e.msg, "cannot make bind source 'x'") == e.msg);
        ASSERT_OK(chdir(old));
        ASSERT_NULL(p->workspace);
        ASSERT_EQ(p->n_binds, 0);
}

TEST(bind_spec_valid) {
        _cleanup_tmpdir_ char *dir = make_tmpdir();
        _cleanup_(policy_freep) Policy *p = policy_new();
        _cleanup_free_ char *src = path_join(dir, "src"), *spec = NULL, *old = getcwd(NULL, 0);
        HutchError e = {};

        make_dir(src);
        ASSERT_TRUE(asprintf(&spec, "%s:/data", src) > 0);
        ASSERT_OK(policy_add_bind_spec(p, spec, &e));
        ASSERT_EQ(p->n_binds, 1);
        ASSERT_STREQ(p->binds[0].source, src);
        ASSERT_STREQ(p->binds[0].target, "/data");
        ASSERT_FALSE(p->binds[0].read_only);

        free(spec);
        spec = NULL;
        ASSERT_TRUE(asprintf(&spec, "%s:/ro//x/:ro", src) > 0);
        ASSERT_OK(policy_add_bind_spec(p, spec, &e));
        ASSERT_EQ(p->n_binds, 2);
        ASSERT_STREQ(p->binds[1].target, "/ro/x");
        ASSERT_TRUE(p->binds[1].read_only);

        /* Relative host path; ":rw" is explicit read-write; the same target
         * (after simplification) replaces the earlier bind. */
        ASSERT_OK(chdir(dir));
        ASSERT_OK(policy_add_bind_spec(p, "src:/ro/x:rw", &e));
        ASSERT_OK(chdir(old));
        ASSERT_EQ(p->n_binds, 2);
        ASSERT_STREQ(p->binds[1].source, src);
        ASSERT_FALSE(p->binds[1].read_only);

        /* Targets next to, not inside, reserved paths are fine. */
        ASSERT_OK(policy_add_bind_spec(p, "/tmp:/usrx", &e));
        ASSERT_OK(policy_add_bind_spec(p, "/tmp:/opt/tools", &e));
        ASSERT_OK(policy_add_bind_spec(p, "/tmp:/root/cache", &e));
        ASSERT_OK(policy_add_bind_spec(p, "/tmp:/tmp/x", &e));
        ASSERT_OK(policy_add_bind_spec(p, "/tmp:/devices", &e));
        ASSERT_OK(policy_add_bind_spec(p, "/tmp:/workspace", &e));
        ASSERT_EQ(p->n_binds, 8);
        ASSERT_OK(policy_validate(p, &e));
}

TEST(bind_spec_errors) {
        static const struct {
                const char *spec;
                const char *msg;
        } cases[] = {
                {"/src:data", "bind target 'data' in -v '/src:data' must be an absolute path"},
                {"/src:data:ro",
                 "bind target 'data' in -v '/src:data:ro' must be an absolute path"},
                {"/src:/a/../etc",
                 "bind target '/a/../etc' in -v '/src:/a/../etc' must not contain '.' or '..' "
                 "components"},
                {"/src:/a/.", "bind target '/a/.' in -v '/src:/a/.' must not contain '.' or '..' "
                              "components"},
                {"/src", "-v '/src' must be HOST:SANDBOX[:ro|:rw]"},
                {"/src:ro", "-v '/src:ro' must be HOST:SANDBOX[:ro|:rw]"},
                {":/data", "empty host path in -v ':/data'"},
                {"/src:", "bind target '' in -v '/src:' must be an absolute path"},
                {"/src:/data:rx", "unknown bind option 'rx' in -v '/src:/data:rx' (expected 'ro' "
                                  "or 'rw')"},
                {"/src:/", "bind target '/' in -v '/src:/' is reserved: it would replace the "
                           "sandbox root"},
                {"/src://", "bind target '//' in -v '/src://' is reserved: it would replace the "
                            "sandbox root"},
                {"/src:/proc", "bind target '/proc' in -v '/src:/proc' is reserved: '/proc' is "
                               "mounted by hutch"},
                {"/src:/proc/sys/kernel",
                 "bind target '/proc/sys/kernel' in -v '/src:/proc/sys/kernel' is reserved: "
                 "'/proc' is mounted by hutch"},
                {"/src:/dev", "bind target '/dev' in -v '/src:/dev' is reserved: '/dev' is set up "
                              "by hutch"},
                {"/src:/dev/shm", "bind target '/dev/shm' in -v '/src:/dev/shm' is reserved: "
                                  "'/dev' is set up by hutch"},
                {"/src:/usr", "bind target '/usr' in -v '/src:/usr' is reserved: '/usr' is a "
                              "read-only host system directory"},
                {"/src:/usr/local/bin/",
                 "bind target '/usr/local/bin/' in -v '/src:/usr/local/bin/' is reserved: '/usr' "
                 "is a read-only host system directory"},
                {"/src:/etc/resolv.conf",
                 "bind target '/etc/resolv.conf' in -v '/src:/etc/resolv.conf' is reserved: "
                 "'/etc' is a read-only host system directory"},
                {"/src:/bin", "bind target '/bin' in -v '/src:/bin' is reserved: '/bin' is a "
                              "read-only host system directory"},
                {"/src:/sbin/x", "bind target '/sbin/x' in -v '/src:/sbin/x' is reserved: '/sbin' "
                                 "is a read-only host system directory"},
                {"/src:/lib", "bind target '/lib' in -v '/src:/lib' is reserved: '/lib' is a "
                              "read-only host system directory"},
                {"/src:/lib32", "bind target '/lib32' in -v '/src:/lib32' is reserved: '/lib32' "
                                "is a read-only host system directory"},
                {"/src:/lib64", "bind target '/lib64' in -v '/src:/lib64' is reserved: '/lib64' "
                                "is a read-only host system directory"},
                {"/src:/libx32", "bind target '/libx32' in -v '/src:/libx32' is reserved: "
                                 "'/libx32' is a read-only host system directory"},
        };
        _cleanup_(policy_freep) Policy *p = policy_new();

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                HutchError e = {};

                ASSERT_ERROR(policy_add_bind_spec(p, cases[i].spec, &e), EINVAL);
                ASSERT_EQ(e.errnum, EINVAL);
                ASSERT_STREQ(e.msg, cases[i].msg);
                ASSERT_STREQ(e.pointer, "");
        }
        ASSERT_EQ(p->n_binds, 0);
}

TEST(bind_target_too_long) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        _cleanup_free_ char *spec = malloc(PATH_MAX + 16);
        HutchError e = {};

        ASSERT_NOT_NULL(spec);
        memcpy(spec, "/src:/", 6);
        memset(spec + 6, 'a', PATH_MAX);
        spec[6 + PATH_MAX] = '\0';
        ASSERT_ERROR(policy_add_bind_spec(p, spec, &e), EINVAL);
        ASSERT_STREQ(e.msg, "bind target is longer than 4095 bytes");
}

TEST(bind_cap) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError e = {};
        char spec[64];

        for (int i = 0; i < POLICY_MAX_BINDS; i++) {
                (void)snprintf(spec, sizeof(spec), "/tmp:/b%d", i);
                ASSERT_OK(policy_add_bind_spec(p, spec, &e));
        }
        ASSERT_ERROR(policy_add_bind_spec(p, "/tmp:/one-too-many", &e), E2BIG);
        ASSERT_STREQ(e.msg, "too many binds in -v '/tmp:/one-too-many' (at most 15)");
        /* Replacing one at the cap is fine. */
        ASSERT_OK(policy_add_bind_spec(p, "/tmp:/b3:ro", &e));
        ASSERT_EQ(p->n_binds, POLICY_MAX_BINDS);
        ASSERT_TRUE(p->binds[3].read_only);
}

TEST(tmpfs_spec_valid) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError e = {};

        ASSERT_OK(policy_add_tmpfs_spec(p, "/tmp", &e));
        ASSERT_EQ(p->n_tmpfs, 1);
        ASSERT_STREQ(p->tmpfs[0].path, "/tmp");
        ASSERT_EQ(p->tmpfs[0].size, POLICY_DEFAULT_TMP_SIZE);

        ASSERT_OK(policy_add_tmpfs_spec(p, "/tmp/:size=64m", &e));
        ASSERT_EQ(p->n_tmpfs, 1);
        ASSERT_EQ(p->tmpfs[0].size, 64ULL << 20);

        ASSERT_OK(policy_add_tmpfs_spec(p, "/dev/shm:size=128m", &e));
        ASSERT_STREQ(p->tmpfs[1].path, "/dev/shm");
        ASSERT_EQ(p->tmpfs[1].size, 128ULL << 20);

        ASSERT_OK(policy_add_tmpfs_spec(p, "/cache:size=4k", &e));
        ASSERT_EQ(p->tmpfs[2].size, 4096);
        ASSERT_OK(policy_add_tmpfs_spec(p, "/cache:size=1m,size=2g", &e));
        ASSERT_EQ(p->n_tmpfs, 3);
        ASSERT_EQ(p->tmpfs[2].size, 2ULL << 30);
        ASSERT_OK(policy_add_tmpfs_spec(p, "/root", &e));
        ASSERT_OK(policy_validate(p, &e));
}

TEST(tmpfs_spec_errors) {
        static const struct {
                const char *spec;
                const char *msg;
        } cases[] = {
                {"/x:size=12q", "invalid size '12q' in --tmpfs '/x:size=12q'"},
                {"/x:size=", "invalid size '' in --tmpfs '/x:size='"},
                {"/x:size=-1", "invalid size '-1' in --tmpfs '/x:size=-1'"},
                {"/x:size=99999999999999999999",
                 "invalid size '99999999999999999999' in --tmpfs '/x:size=99999999999999999999'"},
                {"/x:size=1", "tmpfs size '1' in --tmpfs '/x:size=1' is below the minimum 4k"},
                {"/x:size=0", "tmpfs size '0' in --tmpfs '/x:size=0' is below the minimum 4k"},
                {"/x:size=4095",
                 "tmpfs size '4095' in --tmpfs '/x:size=4095' is below the minimum 4k"},
                {"/x:mode=1777", "unknown option 'mode=1777' in --tmpfs '/x:mode=1777' (only "
                                 "'size=N' is supported)"},
                {"/x:size=1m,uid=0", "unknown option 'uid=0' in --tmpfs '/x:size=1m,uid=0' (only "
                                     "'size=N' is supported)"},
                {"/x:", "empty option in --tmpfs '/x:'"},
                {"/x:size=1m,", "empty option in --tmpfs '/x:size=1m,'"},
                {"x:size=1m", "tmpfs target 'x' in --tmpfs 'x:size=1m' must be an absolute path"},
                {"", "tmpfs target '' in --tmpfs '' must be an absolute path"},
                {"/a/../b", "tmpfs target '/a/../b' in --tmpfs '/a/../b' must not contain '.' or "
                            "'..' components"},
                {"/", "tmpfs target '/' in --tmpfs '/' is reserved: it would replace the sandbox "
                      "root"},
                {"/proc", "tmpfs target '/proc' in --tmpfs '/proc' is reserved: '/proc' is "
                          "mounted by hutch"},
                {"/dev", "tmpfs target '/dev' in --tmpfs '/dev' is reserved: '/dev' is set up by "
                         "hutch"},
                {"/dev/pts", "tmpfs target '/dev/pts' in --tmpfs '/dev/pts' is reserved: '/dev' "
                             "is set up by hutch"},
                {"/dev/shm/x", "tmpfs target '/dev/shm/x' in --tmpfs '/dev/shm/x' is reserved: "
                               "'/dev' is set up by hutch"},
                {"/etc", "tmpfs target '/etc' in --tmpfs '/etc' is reserved: '/etc' is a "
                         "read-only host system directory"},
                {"/usr/lib", "tmpfs target '/usr/lib' in --tmpfs '/usr/lib' is reserved: '/usr' "
                             "is a read-only host system directory"},
        };
        _cleanup_(policy_freep) Policy *p = policy_new();

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                HutchError e = {};

                ASSERT_ERROR(policy_add_tmpfs_spec(p, cases[i].spec, &e), EINVAL);
                ASSERT_STREQ(e.msg, cases[i].msg);
        }
        ASSERT_EQ(p->n_tmpfs, 0);
}

TEST(tmpfs_cap) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError e = {};
        char spec[64];

        for (int i = 0; i < POLICY_MAX_TMPFS; i++) {
                (void)snprintf(spec, sizeof(spec), "/t%d", i);
                ASSERT_OK(policy_add_tmpfs_spec(p, spec, &e));
        }
        ASSERT_ERROR(policy_add_tmpfs_spec(p, "/more", &e), E2BIG);
        ASSERT_STREQ(e.msg, "too many tmpfs mounts in --tmpfs '/more' (at most 64)");
        ASSERT_OK(policy_add_tmpfs_spec(p, "/t0:size=8k", &e));
        ASSERT_EQ(p->tmpfs[0].size, 8192);
}

TEST(tmpfs_add_direct_size) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError e = {};

        ASSERT_ERROR(policy_add_tmpfs(p, "/x", 100, NULL, &e), EINVAL);
        ASSERT_STREQ(e.msg, "tmpfs size '100' is below the minimum 4k");
        ASSERT_ERROR(policy_add_tmpfs(NULL, "/x", 8192, NULL, &e), EINVAL);
        ASSERT_OK(policy_add_tmpfs(p, "/x", 8192, NULL, &e));
}

TEST(env_spec) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError e = {};

        ASSERT_OK(policy_add_env_spec(p, "A=1", &e));
        ASSERT_OK(policy_add_env_spec(p, "B=x=y", &e));
        ASSERT_OK(policy_add_env_spec(p, "EMPTY=", &e));
        ASSERT_OK(policy_add_env_spec(p, "A=2", &e));
        ASSERT_EQ(strv_length(p->env), 3);
        ASSERT_STREQ(strv_env_get(p->env, "A"), "2");
        ASSERT_STREQ(strv_env_get(p->env, "B"), "x=y");
        ASSERT_STREQ(strv_env_get(p->env, "EMPTY"), "");

        ASSERT_OK(policy_add_env_spec(p, "TERM", &e));
        ASSERT_OK(policy_add_env_spec(p, "TERM", &e));
        ASSERT_OK(policy_add_env_spec(p, "_x1", &e));
        ASSERT_EQ(strv_length(p->env_pass), 2);
        ASSERT_STREQ(p->env_pass[0], "TERM");
        ASSERT_STREQ(p->env_pass[1], "_x1");
        ASSERT_OK(policy_validate(p, &e));
}

TEST(env_spec_errors) {
        static const struct {
                const char *spec;
                const char *msg;
        } cases[] = {
                {"1X=2", "invalid environment variable name '1X' in -e '1X=2' (expected "
                         "[A-Za-z_][A-Za-z0-9_]*)"},
                {"=x", "invalid environment variable name '' in -e '=x' (expected "
                       "[A-Za-z_][A-Za-z0-9_]*)"},
                {"", "invalid environment variable name '' in -e '' (expected "
                     "[A-Za-z_][A-Za-z0-9_]*)"},
                {"A-B", "invalid environment variable name 'A-B' in -e 'A-B' (expected "
                        "[A-Za-z_][A-Za-z0-9_]*)"},
                {"A B=1", "invalid environment variable name 'A B' in -e 'A B=1' (expected "
                          "[A-Za-z_][A-Za-z0-9_]*)"},
        };
        _cleanup_(policy_freep) Policy *p = policy_new();

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                HutchError e = {};

                ASSERT_ERROR(policy_add_env_spec(p, cases[i].spec, &e), EINVAL);
                ASSERT_STREQ(e.msg, cases[i].msg);
        }
        ASSERT_NULL(p->env);
        ASSERT_NULL(p->env_pass);
}

TEST(env_cap) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError e = {};
        char spec[64];

        /* The cap counts set and passed names together. */
        for (int i = 0; i < POLICY_MAX_ENV; i++) {
                (void)snprintf(spec, sizeof(spec), i % 2 ? "V%d=x" : "P%d", i);
                ASSERT_OK(policy_add_env_spec(p, spec, &e));
        }
        ASSERT_ERROR(policy_add_env_spec(p, "NEW=1", &e), E2BIG);
        ASSERT_STREQ(e.msg, "too many environment variables in -e 'NEW=1' (at most 1024)");
        ASSERT_ERROR(policy_add_env_spec(p, "NEWPASS", &e), E2BIG);
        /* Replacing and repeating take no new slot. */
        ASSERT_OK(policy_add_env_spec(p, "V1=changed", &e));
        ASSERT_STREQ(strv_env_get(p->env, "V1"), "changed");
        ASSERT_OK(policy_add_env_spec(p, "P0", &e));
        ASSERT_EQ(strv_length(p->env) + strv_length(p->env_pass), POLICY_MAX_ENV);
        ASSERT_OK(policy_validate(p, &e));
}

TEST(hostname) {
        static const char *const bad[] = {
                "",     "-box",
                "box-", "a_b",
                "a.b",  "b\xc3\xa4r",
                "a b",  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", /* 64 */
        };
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError e = {};

        ASSERT_OK(policy_set_hostname(p, "box", &e));
        ASSERT_STREQ(p->hostname, "box");
        ASSERT_OK(policy_set_hostname(p, "a", &e));
        ASSERT_OK(policy_set_hostname(p, "My-Box-01", &e));
        ASSERT_OK(policy_set_hostname(
                p, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", &e)); /* 63 */
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                ASSERT_ERROR(policy_set_hostname(p, bad[i], &e), EINVAL);
        ASSERT_STREQ(e.msg,
                     "invalid hostname "
                     "'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa' (1-63 "
                     "characters of A-Z, a-z, 0-9 and '-', not starting or ending with '-')");
        ASSERT_ERROR(policy_set_hostname(p, "-x", &e), EINVAL);
        ASSERT_STREQ(e.msg, "invalid hostname '-x' (1-63 characters of A-Z, a-z, 0-9 and '-', not "
                            "starting or ending with '-')");
        ASSERT_EQ(strlen(p->hostname), 63);
}

TEST(workdir) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError e = {};

        ASSERT_OK(policy_set_workdir(p, "/workspace/sub", &e));
        ASSERT_STREQ(p->workdir, "/workspace/sub");
        ASSERT_OK(policy_set_workdir(p, "//a//b/", &e));
        ASSERT_STREQ(p->workdir, "/a/b");
        ASSERT_OK(policy_set_workdir(p, "/", &e));
        ASSERT_STREQ(p->workdir, "/");

        ASSERT_ERROR(policy_set_workdir(p, "work", &e), EINVAL);
        ASSERT_STREQ(e.msg, "workdir 'work' must be an absolute path without '.' or '..' "
                            "components");
        ASSERT_ERROR(policy_set_workdir(p, "/a/../b", &e), EINVAL);
        ASSERT_ERROR(policy_set_workdir(p, "/a/.", &e), EINVAL);
        ASSERT_ERROR(policy_set_workdir(p, "", &e), EINVAL);
        ASSERT_STREQ(p->workdir, "/");
}

TEST(network) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError e = {};

        ASSERT_OK(policy_set_network(p, "none", &e));
        ASSERT_EQ(p->network, NETWORK_MODE_NONE);
        ASSERT_ERROR(policy_set_network(p, "host", &e), EINVAL);
        ASSERT_STREQ(e.msg, "unsupported network mode 'host' (expected 'none' or 'allow')");
        ASSERT_ERROR(policy_set_network(p, "", &e), EINVAL);
}

TEST(error_detail_is_optional) {
        _cleanup_(policy_freep) Policy *p = policy_new();

        ASSERT_ERROR(policy_add_bind_spec(p, "/a:b", NULL), EINVAL);
        ASSERT_ERROR(policy_add_tmpfs_spec(p, "/x:size=1", NULL), EINVAL);
        ASSERT_ERROR(policy_add_env_spec(p, "1=1", NULL), EINVAL);
        ASSERT_ERROR(policy_set_hostname(p, "-", NULL), EINVAL);
        ASSERT_ERROR(policy_set_workspace_spec(p, "", NULL), EINVAL);
        ASSERT_OK(policy_set_workspace_spec(p, "/nonexistent-hutch-ws", NULL));
        ASSERT_ERROR(policy_validate(p, NULL), ENOENT);
}

TEST(validate_workspace) {
        _cleanup_tmpdir_ char *dir = make_tmpdir();
        _cleanup_(policy_freep) Policy *p = policy_new();
        _cleanup_free_ char *ws = path_join(dir, "ws"), *file = path_join(dir, "file"),
                            *missing = path_join(dir, "missing"),
                            *colon = path_join(dir, "ws:snapshot"), *link = path_join(dir, "link"),
                            *msg = NULL;
        HutchError e = {};

        make_dir(ws);
        make_file(file);

        ASSERT_OK(policy_set_workspace_spec(p, missing, &e));
        ASSERT_ERROR(policy_validate(p, &e), ENOENT);
        ASSERT_EQ(e.errnum, ENOENT);
        ASSERT_TRUE(asprintf(&msg, "workspace '%s' does not exist", missing) > 0);
        ASSERT_STREQ(e.msg, msg);

        /* An unknown mode makes the whole spec a path: say what the modes are. */
        ASSERT_OK(policy_set_workspace_spec(p, colon, &e));
        ASSERT_ERROR(policy_validate(p, &e), ENOENT);
        ASSERT_TRUE(strstr(e.msg, "(the workspace modes are 'mount', 'copy' and 'overlay')") !=
                    NULL);

        ASSERT_OK(policy_set_workspace_spec(p, file, &e));
        ASSERT_ERROR(policy_validate(p, &e), ENOTDIR);
        free(msg);
        msg = NULL;
        ASSERT_TRUE(asprintf(&msg, "workspace '%s' is not a directory", file) > 0);
        ASSERT_STREQ(e.msg, msg);

        /* Below a file: stat() fails with ENOTDIR, reported as such. */
        free(p->workspace);
        p->workspace = path_join(file, "x");
        ASSERT_ERROR(policy_validate(p, &e), ENOTDIR);
        ASSERT_TRUE(strstr(e.msg, "cannot access workspace") == e.msg);

        /* A struct filled directly: not absolute, not canonical. */
        free(p->workspace);
        p->workspace = strdup("rel");
        ASSERT_ERROR(policy_validate(p, &e), EINVAL);
        ASSERT_STREQ(e.msg, "workspace 'rel' is not an absolute path");
        ASSERT_OK(symlink(ws, link));
        free(p->workspace);
        p->workspace = strdup(link);
        ASSERT_ERROR(policy_validate(p, &e), EINVAL);
        ASSERT_TRUE(strstr(e.msg, "is not a canonical path (it resolves to") != NULL);

        free(p->workspace);
        p->workspace = strdup(ws);
        p->workspace_mode = _WORKSPACE_MODE_MAX;
        ASSERT_ERROR(policy_validate(p, &e), EINVAL);
        p->workspace_mode = WORKSPACE_MODE_COPY;
        ASSERT_OK(policy_validate(p, &e));
}

TEST(validate_binds) {
        _cleanup_tmpdir_ char *dir = make_tmpdir();
        _cleanup_(policy_freep) Policy *p = policy_new();
        _cleanup_free_ char *ws = path_join(dir, "ws"), *file = path_join(dir, "file"),
                            *missing = path_join(dir, "missing"), *spec = NULL, *msg = NULL;
        HutchError e = {};

        make_dir(ws);
        make_file(file);

        ASSERT_TRUE(asprintf(&spec, "%s:/data", missing) > 0);
        ASSERT_OK(policy_add_bind_spec(p, spec, &e));
        ASSERT_ERROR(policy_validate(p, &e), ENOENT);
        ASSERT_TRUE(asprintf(&msg, "bind source '%s' does not exist", missing) > 0);
        ASSERT_STREQ(e.msg, msg);

        /* A file is a fine bind source; a path below one is not. */
        free(spec);
        spec = NULL;
        ASSERT_TRUE(asprintf(&spec, "%s:/data", file) > 0);
        ASSERT_OK(policy_add_bind_spec(p, spec, &e));
        ASSERT_OK(policy_validate(p, &e));
        free(p->binds[0].source);
        p->binds[0].source = path_join(file, "x");
        ASSERT_ERROR(policy_validate(p, &e), ENOTDIR);
        ASSERT_TRUE(strstr(e.msg, "cannot access bind source") == e.msg);
        free(p->binds[0].source);
        p->binds[0].source = strdup("relative");
        ASSERT_ERROR(policy_validate(p, &e), EINVAL);
        ASSERT_STREQ(e.msg, "bind source 'relative' is not an absolute path");
        free(p->binds[0].source);
        p->binds[0].source = strdup(file);

        /* Inside a mounted workspace, once there is one: refused (the mount
         * point would be created in the real folder). */
        ASSERT_OK(policy_add_bind_spec(p, "/tmp:/workspace/sub", &e));
        ASSERT_OK(policy_validate(p, &e));
        ASSERT_OK(policy_set_workspace_spec(p, ws, &e));
        ASSERT_ERROR(policy_validate(p, &e), EINVAL);
        ASSERT_STREQ(e.msg, "bind target '/workspace/sub' is inside the mounted workspace "
                            "(/workspace); use a copy or overlay workspace to mount below it");
        /* Below a copied workspace (a tmpfs) it is fine, and below an
         * overlay one (its upper layer is not the host folder) too. */
        p->workspace_mode = WORKSPACE_MODE_COPY;
        ASSERT_OK(policy_validate(p, &e));
        p->workspace_mode = WORKSPACE_MODE_OVERLAY;
        ASSERT_OK(policy_validate(p, &e));
        free(p->workspace);
        p->workspace = NULL;

        /* Both a bind and a tmpfs at one path. */
        ASSERT_OK(policy_add_tmpfs_spec(p, "/data", &e));
        ASSERT_ERROR(policy_validate(p, &e), EINVAL);
        ASSERT_TRUE(strstr(e.msg, "bind target '/data' is also a tmpfs mount") == e.msg);
}

TEST(validate_workspace_targets) {
        _cleanup_tmpdir_ char *dir = make_tmpdir();
        _cleanup_(policy_freep) Policy *p = policy_new();
        _cleanup_free_ char *spec = NULL;
        HutchError e = {};

        ASSERT_TRUE(asprintf(&spec, "%s:copy", dir) > 0);
        ASSERT_OK(policy_set_workspace_spec(p, spec, &e));

        /* A tmpfs entry for /workspace sizes the copied workspace's tmpfs. */
        ASSERT_OK(policy_add_tmpfs_spec(p, "/workspace:size=8g", &e));
        ASSERT_OK(policy_add_tmpfs_spec(p, "/workspace/node_modules", &e));
        ASSERT_OK(policy_validate(p, &e));

        /* ... but with a mounted workspace it would hide the real folder. */
        p->workspace_mode = WORKSPACE_MODE_MOUNT;
        ASSERT_ERROR(policy_validate(p, &e), EINVAL);
        ASSERT_STREQ(e.msg, "tmpfs target '/workspace' is inside the mounted workspace "
                            "(/workspace); use a copy or overlay workspace to mount below it");
        p->workspace_mode = WORKSPACE_MODE_COPY;

        /* A bind can never replace the workspace itself. */
        ASSERT_OK(policy_add_bind_spec(p, "/tmp:/workspace/", &e));
        ASSERT_ERROR(policy_validate(p, &e), EINVAL);
        ASSERT_STREQ(e.msg, "bind target '/workspace' would replace the workspace");
}

TEST(validate_direct_fills) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError e = {};

        /* The struct may be filled without the setters (the API does): the
         * validator repeats every check. */
        ASSERT_OK(policy_add_bind_spec(p, "/tmp:/a", &e));
        ASSERT_OK(policy_add_bind_spec(p, "/tmp:/b", &e));
        free(p->binds[1].target);
        p->binds[1].target = strdup("/a");
        ASSERT_ERROR(policy_validate(p, &e), EINVAL);
        ASSERT_STREQ(e.msg, "bind target '/a' is also the target of the bind of '/tmp'");
        free(p->binds[1].target);
        p->binds[1].target = strdup("/etc/passwd");
        ASSERT_ERROR(policy_validate(p, &e), EINVAL);
        ASSERT_STREQ(e.msg, "bind target '/etc/passwd' is reserved: '/etc' is a read-only host "
                            "system directory");
        free(p->binds[1].target);
        p->binds[1].target = strdup("/b");
        ASSERT_OK(policy_validate(p, &e));

        ASSERT_OK(policy_add_tmpfs_spec(p, "/t", &e));
        p->tmpfs[0].size = 1;
        ASSERT_ERROR(policy_validate(p, &e), EINVAL);
        ASSERT_STREQ(e.msg, "tmpfs size 1 of '/t' is below the minimum 4k");
        p->tmpfs[0].size = 4096;
        free(p->tmpfs[0].path);
        p->tmpfs[0].path = strdup("/proc/x");
        ASSERT_ERROR(policy_validate(p, &e), EINVAL);
        free(p->tmpfs[0].path);
        p->tmpfs[0].path = strdup("/t");
        ASSERT_OK(policy_validate(p, &e));

        ASSERT_OK(strv_extend(&p->env, "NOEQUALS"));
        ASSERT_ERROR(policy_validate(p, &e), EINVAL);
        ASSERT_STREQ(e.msg, "environment entry 'NOEQUALS' is not KEY=VALUE");
        free(p->env[0]);
        p->env[0] = strdup("1A=x");
        ASSERT_ERROR(policy_validate(p, &e), EINVAL);
        ASSERT_STREQ(e.msg, "invalid environment variable name '1A'");
        p->env = strv_free(p->env);
        ASSERT_OK(strv_extend(&p->env_pass, "A=B"));
        ASSERT_ERROR(policy_validate(p, &e), EINVAL);
        p->env_pass = strv_free(p->env_pass);

        p->workdir = strdup("rel");
        ASSERT_ERROR(policy_validate(p, &e), EINVAL);
        free(p->workdir);
        p->workdir = NULL;

        free(p->hostname);
        p->hostname = NULL;
        ASSERT_ERROR(policy_validate(p, &e), EINVAL);
        p->hostname = strdup("ok");

        p->network = _NETWORK_MODE_MAX;
        ASSERT_ERROR(policy_validate(p, &e), EINVAL);
        ASSERT_STREQ(e.msg, "invalid network mode 2");
        p->network = NETWORK_MODE_NONE;
        ASSERT_OK(policy_validate(p, &e));
}

TEST(validate_caps) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError e = {};
        char spec[64];

        /* Over the caps by direct fill: -E2BIG from the validator. */
        for (int i = 0; i < POLICY_MAX_BINDS; i++) {
                (void)snprintf(spec, sizeof(spec), "/tmp:/b%d", i);
                ASSERT_OK(policy_add_bind_spec(p, spec, &e));
        }
        ASSERT_OK(policy_validate(p, &e));
        p->n_binds++; /* one past: the validator refuses before reading it */
        ASSERT_ERROR(policy_validate(p, &e), E2BIG);
        ASSERT_STREQ(e.msg, "too many binds: 16 (at most 15)");
        p->n_binds--;

        for (int i = 0; i < POLICY_MAX_TMPFS; i++) {
                (void)snprintf(spec, sizeof(spec), "/t%d", i);
                ASSERT_OK(policy_add_tmpfs_spec(p, spec, &e));
        }
        p->n_tmpfs++;
        ASSERT_ERROR(policy_validate(p, &e), E2BIG);
        ASSERT_STREQ(e.msg, "too many tmpfs mounts: 65 (at most 64)");
        p->n_tmpfs--;

        for (int i = 0; i <= POLICY_MAX_ENV; i++) {
                (void)snprintf(spec, sizeof(spec), "P%d", i);
                ASSERT_OK(strv_extend(&p->env_pass, spec));
        }
        ASSERT_ERROR(policy_validate(p, &e), E2BIG);
        ASSERT_STREQ(e.msg, "too many environment variables: 1025 (at most 1024)");
}

TEST(check_target_direct) {
        HutchError e = {};

        ASSERT_OK(policy_check_target("/dev/shm", true, NULL, &e));
        ASSERT_ERROR(policy_check_target("/dev/shm", false, NULL, &e), EINVAL);
        ASSERT_ERROR(policy_check_target(NULL, false, NULL, &e), EINVAL);
        ASSERT_STREQ(e.msg, "bind target '' must be an absolute path");
        ASSERT_OK(policy_check_target("/tmp", true, NULL, &e));
        ASSERT_OK(policy_check_target("/tmp", false, NULL, &e));
}

TEST(limit_strings) {
        for (int i = 0; i < _POLICY_LIMIT_MAX; i++)
                ASSERT_EQ(policy_limit_from_string(policy_limit_to_string(i)), i);
        ASSERT_NULL(policy_limit_to_string(_POLICY_LIMIT_MAX));
        ASSERT_NULL(policy_limit_to_string(-1));
        ASSERT_EQ(policy_limit_from_string("bogus"), _POLICY_LIMIT_INVALID);
        ASSERT_EQ(policy_limit_from_string(NULL), _POLICY_LIMIT_INVALID);
}

TEST(limit_defaults) {
        _cleanup_(policy_freep) Policy *p = policy_new();

        ASSERT_EQ(p->memory_max, POLICY_DEFAULT_MEMORY);
        ASSERT_EQ(p->pids_max, POLICY_DEFAULT_PIDS);
        ASSERT_EQ(p->timeout_ms, 0);
        ASSERT_EQ(p->cpu_millis, 0);
        ASSERT_EQ(p->output_limit, 0);
        ASSERT_EQ(p->limits_explicit, 0);
}

TEST(limit_values) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError e = {};

        ASSERT_OK(policy_set_limit(p, POLICY_LIMIT_MEMORY, "512m", "--memory", &e));
        ASSERT_EQ(p->memory_max, 512ULL << 20);
        ASSERT_TRUE(p->limits_explicit & (1U << POLICY_LIMIT_MEMORY));
        ASSERT_OK(policy_set_limit(p, POLICY_LIMIT_MEMORY_SWAP, "1g", "--memory-swap", &e));
        ASSERT_EQ(p->memory_swap_max, 1ULL << 30);
        ASSERT_OK(policy_set_limit(p, POLICY_LIMIT_CPUS, "1.5", "--cpus", &e));
        ASSERT_EQ(p->cpu_millis, 1500);
        ASSERT_OK(policy_set_limit(p, POLICY_LIMIT_CPUS, "0.25", "--cpus", &e));
        ASSERT_EQ(p->cpu_millis, 250);
        ASSERT_OK(policy_set_limit(p, POLICY_LIMIT_CPUS, "2", "--cpus", &e));
        ASSERT_EQ(p->cpu_millis, 2000);
        ASSERT_OK(policy_set_limit(p, POLICY_LIMIT_PIDS, "64", "--pids", &e));
        ASSERT_EQ(p->pids_max, 64);
        ASSERT_OK(policy_set_limit(p, POLICY_LIMIT_TIMEOUT, "1500ms", "--timeout", &e));
        ASSERT_EQ(p->timeout_ms, 1500);
        ASSERT_OK(policy_set_limit(p, POLICY_LIMIT_TIMEOUT, "0", "--timeout", &e));
        ASSERT_EQ(p->timeout_ms, 0);
        ASSERT_OK(policy_set_limit(p, POLICY_LIMIT_DISK, "8m", "--disk", &e));
        ASSERT_EQ(p->disk_size, 8ULL << 20);
        ASSERT_OK(policy_set_limit(p, POLICY_LIMIT_OUTPUT, "10k", "--output-limit", &e));
        ASSERT_EQ(p->output_limit, 10ULL << 10);
        ASSERT_OK(policy_validate_limits(p, &e));
}

TEST(limit_errors) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError e = {};

        ASSERT_ERROR(policy_set_limit(p, POLICY_LIMIT_MEMORY, "0", "--memory", &e), EINVAL);
        ASSERT_STREQ(e.msg, "invalid --memory '0': must be greater than 0");
        ASSERT_ERROR(policy_set_limit(p, POLICY_LIMIT_MEMORY, "1k", "--memory", &e), EINVAL);
        ASSERT_STREQ(e.msg, "invalid --memory '1k': below the minimum of 6m");
        ASSERT_ERROR(policy_set_limit(p, POLICY_LIMIT_MEMORY, "12q", NULL, &e), EINVAL);
        ASSERT_STREQ(e.msg, "invalid memory limit '12q': expected a size like 512m or 2g");
        ASSERT_ERROR(policy_set_limit(p, POLICY_LIMIT_MEMORY, "99999999999999999t", NULL, &e),
                     ERANGE);
        ASSERT_ERROR(policy_set_limit(p, POLICY_LIMIT_CPUS, "-1", "--cpus", &e), EINVAL);
        ASSERT_ERROR(policy_set_limit(p, POLICY_LIMIT_CPUS, "0", "--cpus", &e), EINVAL);
        ASSERT_ERROR(policy_set_limit(p, POLICY_LIMIT_CPUS, "0.0001", "--cpus", &e), EINVAL);
        ASSERT_ERROR(policy_set_limit(p, POLICY_LIMIT_CPUS, "1.", "--cpus", &e), EINVAL);
        ASSERT_ERROR(policy_set_limit(p, POLICY_LIMIT_CPUS, ".5", "--cpus", &e), EINVAL);
        ASSERT_ERROR(policy_set_limit(p, POLICY_LIMIT_CPUS, "abc", "--cpus", &e), EINVAL);
        ASSERT_ERROR(policy_set_limit(p, POLICY_LIMIT_CPUS, "1025", "--cpus", &e), ERANGE);
        ASSERT_ERROR(policy_set_limit(p, POLICY_LIMIT_CPUS, "9999999999", "--cpus", &e), EINVAL);
        ASSERT_ERROR(policy_set_limit(p, POLICY_LIMIT_PIDS, "0", "--pids", &e), EINVAL);
        ASSERT_STREQ(e.msg, "invalid --pids '0': must be at least 1");
        ASSERT_ERROR(policy_set_limit(p, POLICY_LIMIT_PIDS, "-5", "--pids", &e), EINVAL);
        ASSERT_ERROR(policy_set_limit(p, POLICY_LIMIT_TIMEOUT, "abc", "--timeout", &e), EINVAL);
        ASSERT_ERROR(policy_set_limit(p, POLICY_LIMIT_TIMEOUT, "10", "--timeout", &e), EINVAL);
        ASSERT_ERROR(policy_set_limit(p, POLICY_LIMIT_DISK, "1", "--disk", &e), EINVAL);
        ASSERT_ERROR(policy_set_limit(p, POLICY_LIMIT_OUTPUT, "0", NULL, &e), EINVAL);
        ASSERT_ERROR(policy_set_limit(p, _POLICY_LIMIT_MAX, "1", NULL, &e), EINVAL);
        ASSERT_ERROR(policy_set_limit(NULL, POLICY_LIMIT_PIDS, "1", NULL, &e), EINVAL);
        /* Nothing was set by the failures. */
        ASSERT_EQ(p->limits_explicit, 0);
}

TEST(limit_validation) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError e = {};

        ASSERT_OK(policy_set_limit(p, POLICY_LIMIT_MEMORY_SWAP, "1g", NULL, &e));
        ASSERT_ERROR(policy_validate_limits(p, &e), EINVAL);
        ASSERT_STREQ(e.msg, "memory+swap limit (--memory-swap) must be at least the memory "
                            "limit (--memory, 2048 MiB by default)");
        p->memory_max = 0;
        ASSERT_ERROR(policy_validate_limits(p, &e), EINVAL);
        p->memory_max = 1024;
        p->memory_swap_max = 0;
        ASSERT_ERROR(policy_validate_limits(p, &e), EINVAL);
        p->memory_max = POLICY_MIN_MEMORY;
        p->cpu_millis = POLICY_MAX_CPU_MILLIS + 1;
        ASSERT_ERROR(policy_validate_limits(p, &e), ERANGE);
        p->cpu_millis = 0;
        p->disk_size = 1;
        ASSERT_ERROR(policy_validate_limits(p, &e), EINVAL);
        p->disk_size = 0;
        ASSERT_OK(policy_validate_limits(p, &e));
}

TEST(network_entries) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError e = {};

        ASSERT_EQ(policy_network_mode(p), NETWORK_MODE_NONE);
        ASSERT_OK(policy_add_allow_host(p, "api.example.com", "--allow-host", &e));
        ASSERT_OK(policy_add_allow_host(p, "api.example.com", "--allow-host", &e));
        ASSERT_EQ(strv_length(p->allow_hosts), 1); /* duplicates kept once */
        ASSERT_EQ(policy_network_mode(p), NETWORK_MODE_ALLOW);
        ASSERT_OK(policy_add_allow_host(p, "*.registry.example:443", "--allow-host", &e));
        ASSERT_OK(policy_add_deny_host(p, "evil.registry.example", "--deny-host", &e));
        ASSERT_OK(policy_add_allow_private(p, "127.0.0.0/8", "--allow-private", &e));
        ASSERT_OK(policy_add_resolve(p, "api.example.com:127.0.0.1", "--resolve", &e));
        ASSERT_OK(policy_add_resolve(p, "b.example.com:127.0.0.1,::1", "--resolve", &e));
        ASSERT_OK(policy_set_audit_log(p, "/tmp/audit.jsonl", &e));
        ASSERT_STREQ(p->audit_log, "/tmp/audit.jsonl");
        ASSERT_OK(policy_validate_network(p, &e));

        ASSERT_ERROR(policy_add_allow_host(p, "*.", "--allow-host", &e), EINVAL);
        ASSERT_TRUE(strstr(e.msg, "--allow-host") && strstr(e.msg, "*."));
        ASSERT_ERROR(policy_add_allow_host(p, "a..b", NULL, &e), EINVAL);
        ASSERT_ERROR(policy_add_allow_host(p, "*foo.com", NULL, &e), EINVAL);
        ASSERT_ERROR(policy_add_allow_host(p, "x.com:0", NULL, &e), EINVAL);
        ASSERT_ERROR(policy_add_deny_host(p, "foo.*.com", NULL, &e), EINVAL);
        ASSERT_ERROR(policy_add_allow_private(p, "10.0.0.0/33", "--allow-private", &e), EINVAL);
        ASSERT_ERROR(policy_add_resolve(p, "noaddress", "--resolve", &e), EINVAL);
        ASSERT_STREQ(e.msg, "invalid --resolve 'noaddress': expected NAME:ADDR[,ADDR...] with a "
                            "host name and IP addresses");
        ASSERT_ERROR(policy_add_resolve(p, "1.2.3.4:1.2.3.4", NULL, &e), EINVAL);
        ASSERT_ERROR(policy_add_resolve(p, "a.com:1.2.3.4,", NULL, &e), EINVAL);
        ASSERT_ERROR(policy_add_resolve(p, "a.com:nope", "--resolve", &e), EINVAL);
        ASSERT_STREQ(e.msg, "invalid --resolve 'a.com:nope': 'nope' is not an IP address");
        ASSERT_ERROR(policy_set_audit_log(p, "", &e), EINVAL);
        ASSERT_STREQ(p->audit_log, "/tmp/audit.jsonl"); /* unchanged by the failure */
}

TEST(audit_log_is_made_absolute) {
        _cleanup_tmpdir_ char *dir = make_tmpdir();
        _cleanup_(policy_freep) Policy *p = policy_new();
        _cleanup_free_ char *old = getcwd(NULL, 0), *want = path_join(dir, "logs/a.jsonl");
        HutchError e = {};

        ASSERT_NOT_NULL(old);
        ASSERT_OK(chdir(dir));
        ASSERT_OK(policy_set_audit_log(p, "./logs//a.jsonl", &e));
        ASSERT_OK(chdir(old));
        ASSERT_STREQ(p->audit_log, want);
}

TEST(network_entries_cap) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError e = {};
        char name[64];

        for (int i = 0; i < POLICY_MAX_NET_ENTRIES; i++) {
                (void)snprintf(name, sizeof(name), "h%d.example.com", i);
                ASSERT_OK(policy_add_allow_host(p, name, NULL, &e));
        }
        ASSERT_ERROR(policy_add_allow_host(p, "one-more.example.com", NULL, &e), E2BIG);
}

TEST(network_none_conflicts_with_allow_host) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError e = {};

        ASSERT_OK(policy_set_network(p, "none", &e));
        ASSERT_OK(policy_add_allow_host(p, "example.com", NULL, &e));
        ASSERT_ERROR(policy_validate(p, &e), EINVAL);
        ASSERT_STREQ(e.msg, "--allow-host 'example.com' needs network mode 'allow', but "
                            "'--network none' was given");
        ASSERT_OK(policy_set_network(p, "allow", &e));
        ASSERT_OK(policy_validate(p, &e));

        /* An entry put in directly is checked by validate too. */
        ASSERT_OK(strv_extend(&p->deny_hosts, "*foo.com"));
        ASSERT_ERROR(policy_validate(p, &e), EINVAL);
}

TEST(no_mount_below_a_read_write_bind) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        HutchError e = {};

        ASSERT_OK(policy_add_bind_spec(p, "/tmp:/data", &e));
        ASSERT_OK(policy_add_bind_spec(p, "/usr/share:/data/sub:ro", &e));
        ASSERT_ERROR(policy_validate(p, &e), EINVAL);
        ASSERT_STREQ(e.msg, "bind target '/data/sub' is inside the read-write bind of '/tmp' at "
                            "'/data'; its mount point would be created in that host folder");

        /* Twin: below a read-only bind is fine (nothing is created there). */
        _cleanup_(policy_freep) Policy *q = policy_new();

        ASSERT_OK(policy_add_bind_spec(q, "/tmp:/data:ro", &e));
        ASSERT_OK(policy_add_bind_spec(q, "/usr/share:/data/sub:ro", &e));
        ASSERT_OK(policy_add_tmpfs_spec(q, "/data/t:size=1m", &e));
        ASSERT_OK(policy_validate(q, &e));
}

DEFINE_TEST_MAIN
