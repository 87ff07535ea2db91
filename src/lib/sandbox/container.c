/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandbox/container.h"

static const char *const container_engine_table[_CONTAINER_ENGINE_MAX] = {
        [CONTAINER_NONE] = "none",     [CONTAINER_DOCKER] = "docker",
        [CONTAINER_PODMAN] = "podman", [CONTAINER_KUBERNETES] = "kubernetes",
        [CONTAINER_LXC] = "lxc",       [CONTAINER_NSPAWN] = "systemd-nspawn",
        [CONTAINER_OTHER] = "other",
};

const char *container_engine_to_string(ContainerEngine e) {
        if (e < 0 || e >= _CONTAINER_ENGINE_MAX)
                return NULL;
        return container_engine_table[e];
}

ContainerEngine container_engine_from_string(const char *s) {
        if (!s)
                return _CONTAINER_ENGINE_INVALID;
        for (int i = 0; i < _CONTAINER_ENGINE_MAX; i++)
                if (strcmp(s, container_engine_table[i]) == 0)
                        return (ContainerEngine)i;
        return _CONTAINER_ENGINE_INVALID;
}

/* The settings, one per engine and need. Docker and Podman share theirs
 * (`podman run` takes the same --security-opt values). Kept in step with
 * docs/containers.md. NEEDSWORK: the Docker and Podman rows are tested
 * (tests/integration/test_in_container.py); the LXC, systemd-nspawn and
 * Kubernetes rows come from their documentation only. */
static const char *const container_fix_table[_CONTAINER_ENGINE_MAX][_CONTAINER_NEED_MAX] = {
        [CONTAINER_DOCKER] =
                {
                        [CONTAINER_NEED_NAMESPACES] =
                                "docker run --security-opt seccomp=unconfined",
                        [CONTAINER_NEED_PROCFS] =
                                "docker run --security-opt systempaths=unconfined",
                        [CONTAINER_NEED_PIVOT_ROOT] =
                                "docker run --security-opt seccomp=unconfined",
                        [CONTAINER_NEED_CGROUPS] = "Docker mounts the container's cgroup "
                                                   "read-only unless docker run --privileged",
                },
        [CONTAINER_PODMAN] =
                {
                        [CONTAINER_NEED_NAMESPACES] =
                                "podman run --security-opt seccomp=unconfined",
                        [CONTAINER_NEED_PROCFS] =
                                "podman run --security-opt systempaths=unconfined",
                        [CONTAINER_NEED_PIVOT_ROOT] =
                                "podman run --security-opt seccomp=unconfined",
                        [CONTAINER_NEED_CGROUPS] = "Podman mounts the container's cgroup "
                                                   "read-only unless podman run --privileged",
                },
        [CONTAINER_KUBERNETES] =
                {
                        [CONTAINER_NEED_NAMESPACES] = "securityContext.seccompProfile.type: "
                                                      "Unconfined",
                        [CONTAINER_NEED_PROCFS] = "securityContext.procMount: Unmasked (with the "
                                                  "pod's hostUsers: false)",
                        [CONTAINER_NEED_PIVOT_ROOT] = "securityContext.seccompProfile.type: "
                                                      "Unconfined",
                        [CONTAINER_NEED_CGROUPS] = "Kubernetes mounts the container's cgroup "
                                                   "read-only (the pod's own limits still apply)",
                },
        [CONTAINER_LXC] =
                {
                        [CONTAINER_NEED_NAMESPACES] = "LXD/Incus: security.nesting=true",
                        [CONTAINER_NEED_PROCFS] = "LXD/Incus: security.nesting=true",
                        [CONTAINER_NEED_PIVOT_ROOT] = "LXD/Incus: security.nesting=true",
                        [CONTAINER_NEED_CGROUPS] = "a cgroup v2 delegated to the container "
                                                   "(LXD/Incus do this by default)",
                },
        [CONTAINER_NSPAWN] =
                {
                        [CONTAINER_NEED_NAMESPACES] = "systemd-nspawn --system-call-filter='@mount "
                                                      "unshare setns'",
                        [CONTAINER_NEED_PROCFS] = "systemd-nspawn keeps parts of /proc read-only; "
                                                  "see docs/containers.md",
                        [CONTAINER_NEED_PIVOT_ROOT] = "systemd-nspawn "
                                                      "--system-call-filter=pivot_root",
                        [CONTAINER_NEED_CGROUPS] = "systemd-nspawn --property=Delegate=yes",
                },
        [CONTAINER_OTHER] =
                {
                        [CONTAINER_NEED_NAMESPACES] = "allow user namespaces in the container's "
                                                      "seccomp profile",
                        [CONTAINER_NEED_PROCFS] = "unmask /proc in the container's settings",
                        [CONTAINER_NEED_PIVOT_ROOT] = "allow pivot_root in the container's seccomp "
                                                      "profile",
                        [CONTAINER_NEED_CGROUPS] = "a writable cgroup delegated to the container",
                },
};

const char *container_fix(ContainerEngine e, ContainerNeed need) {
        if (e <= CONTAINER_NONE || e >= _CONTAINER_ENGINE_MAX || need < 0 ||
            need >= _CONTAINER_NEED_MAX)
                return NULL;
        return container_fix_table[e][need];
}

static bool exists_under(const char *root, const char *path) {
        char p[4096];
        int n = snprintf(p, sizeof(p), "%s%s", root, path);

        return n > 0 && (size_t)n < sizeof(p) && access(p, F_OK) == 0;
}

static ContainerEngine engine_from_name(const char *s) {
        if (!s || !*s)
                return CONTAINER_NONE;
        if (strncmp(s, "lxc", 3) == 0) /* "lxc", "lxc-libvirt" */
                return CONTAINER_LXC;
        if (strcmp(s, "systemd-nspawn") == 0)
                return CONTAINER_NSPAWN;
        if (strcmp(s, "docker") == 0)
                return CONTAINER_DOCKER;
        if (strcmp(s, "podman") == 0)
                return CONTAINER_PODMAN;
        return CONTAINER_OTHER;
}

/* The first line of the small file @path under @root into @buf ("" when
 * it cannot be read). */
static void read_line_under(const char *root, const char *path, char *buf, size_t size) {
        char p[4096];
        FILE *f;
        int n = snprintf(p, sizeof(p), "%s%s", root, path);

        buf[0] = '\0';
        if (n <= 0 || (size_t)n >= sizeof(p))
                return;
        f = fopen(p, "re");
        if (!f)
                return;
        if (!fgets(buf, (int)size, f))
                buf[0] = '\0';
        (void)fclose(f);
        buf[strcspn(buf, "\n")] = '\0';
}

/* Looks for an engine's cgroup path in @root/proc/self/cgroup; lines it
 * does not recognise are skipped. */
static ContainerEngine engine_from_cgroup(const char *root) {
        static const struct {
                const char *needle;
                ContainerEngine engine;
        } table[] = {
                {"/kubepods", CONTAINER_KUBERNETES},
                {"/libpod-", CONTAINER_PODMAN},
                {"/docker/", CONTAINER_DOCKER},
                {"/docker-", CONTAINER_DOCKER},
                {"/lxc/", CONTAINER_LXC},
                {"/lxc.payload", CONTAINER_LXC},
                {"/machine.slice/systemd-nspawn", CONTAINER_NSPAWN},
        };
        ContainerEngine found = CONTAINER_NONE;
        char p[4096], line[1024];
        FILE *f;
        int n = snprintf(p, sizeof(p), "%s/proc/self/cgroup", root);

        if (n <= 0 || (size_t)n >= sizeof(p))
                return CONTAINER_NONE;
        f = fopen(p, "re");
        if (!f)
                return CONTAINER_NONE;
        while (found == CONTAINER_NONE && fgets(line, sizeof(line), f))
                for (size_t i = 0; i < ELEMENTSOF(table); i++)
                        if (strstr(line, table[i].needle)) {
                                found = table[i].engine;
                                break;
                        }
        (void)fclose(f);
        return found;
}

ContainerEngine container_detect_at(const char *root, const char *env_container,
                                    const char *env_kubernetes) {
        char name[64];
        ContainerEngine e;

        if (!root || strcmp(root, "/") == 0)
                root = "";
        if ((env_kubernetes && *env_kubernetes) ||
            exists_under(root, "/var/run/secrets/kubernetes.io") ||
            exists_under(root, "/run/secrets/kubernetes.io"))
                return CONTAINER_KUBERNETES;
        if (exists_under(root, "/run/.containerenv"))
                return CONTAINER_PODMAN;
        if (exists_under(root, "/.dockerenv"))
                return CONTAINER_DOCKER;
        e = engine_from_name(env_container);
        if (e != CONTAINER_NONE)
                return e;
        read_line_under(root, "/run/systemd/container", name, sizeof(name));
        e = engine_from_name(name);
        if (e != CONTAINER_NONE)
                return e;
        return engine_from_cgroup(root);
}

ContainerEngine container_detect(void) {
        return container_detect_at("", getenv("container"), getenv("KUBERNETES_SERVICE_HOST"));
}
