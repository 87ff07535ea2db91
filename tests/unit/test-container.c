/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "sandbox/container.h"
#include "sandbox/outcome.h"
#include "test.h"

TEST(container_engine_strings) {
        for (int i = 0; i < _CONTAINER_ENGINE_MAX; i++) {
                const char *s = container_engine_to_string((ContainerEngine)i);

                ASSERT_NOT_NULL(s);
                ASSERT_EQ(container_engine_from_string(s), i);
        }
        ASSERT_STREQ(container_engine_to_string(CONTAINER_NSPAWN), "systemd-nspawn");
        ASSERT_NULL(container_engine_to_string(_CONTAINER_ENGINE_MAX));
        ASSERT_NULL(container_engine_to_string(_CONTAINER_ENGINE_INVALID));
        ASSERT_EQ(container_engine_from_string("Docker"), _CONTAINER_ENGINE_INVALID);
        ASSERT_EQ(container_engine_from_string(NULL), _CONTAINER_ENGINE_INVALID);
}

TEST(container_fix_every_engine_names_every_need) {
        for (int e = CONTAINER_DOCKER; e < _CONTAINER_ENGINE_MAX; e++)
                for (int n = 0; n < _CONTAINER_NEED_MAX; n++)
                        ASSERT_NOT_NULL(container_fix((ContainerEngine)e, (ContainerNeed)n));
        ASSERT_STREQ(container_fix(CONTAINER_DOCKER, CONTAINER_NEED_PROCFS),
                     "docker run --security-opt systempaths=unconfined");
        ASSERT_STREQ(container_fix(CONTAINER_PODMAN, CONTAINER_NEED_NAMESPACES),
                     "podman run --security-opt seccomp=unconfined");
        ASSERT_TRUE(strstr(container_fix(CONTAINER_KUBERNETES, CONTAINER_NEED_PROCFS),
                           "procMount: Unmasked") != NULL);
        /* Negative twins: no advice outside a container or out of range. */
        ASSERT_NULL(container_fix(CONTAINER_NONE, CONTAINER_NEED_PROCFS));
        ASSERT_NULL(container_fix(_CONTAINER_ENGINE_MAX, CONTAINER_NEED_PROCFS));
        ASSERT_NULL(container_fix(CONTAINER_DOCKER, _CONTAINER_NEED_MAX));
        ASSERT_NULL(container_fix(CONTAINER_DOCKER, _CONTAINER_NEED_INVALID));
}

/* A fake root with @files (paths below it; "path=content"). */
static void make_root(char *root, const char *const *files) {
        char path[512];

        strcpy(root, "/tmp/hutch-test-container-XXXXXX");
        ASSERT_NOT_NULL(mkdtemp(root));
        for (size_t i = 0; files && files[i]; i++) {
                const char *eq = strchr(files[i], '=');
                size_t n = eq ? (size_t)(eq - files[i]) : strlen(files[i]);
                FILE *f;

                (void)snprintf(path, sizeof(path), "%s%.*s", root, (int)n, files[i]);
                for (char *p = path + strlen(root) + 1; (p = strchr(p, '/')); p++) {
                        *p = '\0';
                        (void)mkdir(path, 0755);
                        *p = '/';
                }
                f = fopen(path, "we");
                ASSERT_NOT_NULL(f);
                if (eq)
                        (void)fputs(eq + 1, f);
                (void)fclose(f);
        }
}

static void remove_root(const char *root) {
        char cmd[600];

        (void)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
        ASSERT_EQ(system(cmd), 0);
}

static ContainerEngine detect_with(const char *const *files, const char *env_container,
                                   const char *env_k8s) {
        char root[64];
        ContainerEngine e;

        make_root(root, files);
        e = container_detect_at(root, env_container, env_k8s);
        remove_root(root);
        return e;
}

TEST(container_detect_markers) {
        ASSERT_EQ(detect_with(NULL, NULL, NULL), CONTAINER_NONE);
        ASSERT_EQ(detect_with((const char *const[]){"/.dockerenv", NULL}, NULL, NULL),
                  CONTAINER_DOCKER);
        ASSERT_EQ(detect_with((const char *const[]){"/run/.containerenv", NULL}, NULL, NULL),
                  CONTAINER_PODMAN);
        ASSERT_EQ(detect_with((const char *const[]){"/var/run/secrets/kubernetes.io/x", NULL}, NULL,
                              NULL),
                  CONTAINER_KUBERNETES);
        /* A pod on Docker has /.dockerenv too: Kubernetes wins. */
        ASSERT_EQ(detect_with((const char *const[]){"/.dockerenv", NULL}, NULL, "10.0.0.1"),
                  CONTAINER_KUBERNETES);
        ASSERT_EQ(detect_with(NULL, "lxc", NULL), CONTAINER_LXC);
        ASSERT_EQ(detect_with(NULL, "systemd-nspawn", NULL), CONTAINER_NSPAWN);
        ASSERT_EQ(detect_with(NULL, "wsl", NULL), CONTAINER_OTHER);
        ASSERT_EQ(detect_with(NULL, "", NULL), CONTAINER_NONE);
        ASSERT_EQ(detect_with(NULL, NULL, ""), CONTAINER_NONE);
        ASSERT_EQ(detect_with((const char *const[]){"/run/systemd/container=lxc-libvirt\n", NULL},
                              NULL, NULL),
                  CONTAINER_LXC);
        ASSERT_EQ(
                detect_with((const char *const[]){"/run/systemd/container=systemd-nspawn\n", NULL},
                            NULL, NULL),
                CONTAINER_NSPAWN);
}

TEST(container_detect_cgroup_paths) {
        ASSERT_EQ(detect_with((const char *const[]){"/proc/self/cgroup=12:pids:/docker/0123abc\n",
                                                    NULL},
                              NULL, NULL),
                  CONTAINER_DOCKER);
        ASSERT_EQ(detect_with((const char *const[]){"/proc/self/cgroup=0::/machine.slice/"
                                                    "libpod-0123.scope\n",
                                                    NULL},
                              NULL, NULL),
                  CONTAINER_PODMAN);
        ASSERT_EQ(detect_with((const char *const[]){"/proc/self/cgroup=0::/kubepods/burstable/"
                                                    "pod1/abc\n",
                                                    NULL},
                              NULL, NULL),
                  CONTAINER_KUBERNETES);
        /* Negative twins: a host's own paths and lines of no engine. */
        ASSERT_EQ(detect_with((const char *const[]){"/proc/self/cgroup=0::/user.slice/"
                                                    "user-1000.slice/session-2.scope\n"
                                                    "garbage without colons\n",
                                                    NULL},
                              NULL, NULL),
                  CONTAINER_NONE);
}

TEST(outcome_fallback_strings_and_json) {
        Outcome o = {.fallbacks =
                             1U << OUTCOME_FALLBACK_PIVOT_ROOT | 1U << OUTCOME_FALLBACK_PROCFS};
        char *s = NULL;

        for (int i = 0; i < _OUTCOME_FALLBACK_MAX; i++)
                ASSERT_EQ(outcome_fallback_from_string(
                                  outcome_fallback_to_string((OutcomeFallback)i)),
                          i);
        ASSERT_NULL(outcome_fallback_to_string(_OUTCOME_FALLBACK_MAX));
        ASSERT_EQ(outcome_fallback_from_string("pivot-root"), _OUTCOME_FALLBACK_INVALID);
        ASSERT_EQ(outcome_fallback_from_string(NULL), _OUTCOME_FALLBACK_INVALID);

        ASSERT_OK(outcome_to_json(&o, &s));
        ASSERT_TRUE(strstr(s, "\"degraded\":[\"pivot_root\",\"procfs\"]") != NULL);
        free(s);
        o.fallbacks = 0;
        ASSERT_OK(outcome_to_json(&o, &s));
        ASSERT_TRUE(strstr(s, "\"degraded\":[]") != NULL);
        free(s);
}

DEFINE_TEST_MAIN
