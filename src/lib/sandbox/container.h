/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Which container engine hutch itself runs in, and the one setting of that
 * engine that gives hutch a feature it lacks there (docs/containers.md).
 *
 * Detection only reads marker files and the environment; it never decides
 * what hutch may do (the probes and the run do, by trying). It is used to
 * turn "Operation not permitted" into the flag that fixes it:
 *
 *   Kubernetes      $KUBERNETES_SERVICE_HOST, /var/run/secrets/kubernetes.io
 *   Podman          /run/.containerenv
 *   Docker          /.dockerenv
 *   LXC, nspawn     $container or /run/systemd/container ("lxc",
 *                   "systemd-nspawn", also "docker" and "podman")
 *   any of them     /proc/self/cgroup paths (/docker/, /libpod-, /kubepods,
 *                   /lxc/, lxc.payload, /machine.slice/)
 *
 * in that order (a Kubernetes pod may run on Docker and has /.dockerenv).
 * The functions do not log and do not allocate. */

#include <stdbool.h>

#include "macro.h"

typedef enum ContainerEngine {
        CONTAINER_NONE,
        CONTAINER_DOCKER,
        CONTAINER_PODMAN,
        CONTAINER_KUBERNETES,
        CONTAINER_LXC,
        CONTAINER_NSPAWN,
        CONTAINER_OTHER, /* $container names an engine we have no advice for */
        _CONTAINER_ENGINE_MAX,
        _CONTAINER_ENGINE_INVALID = -EINVAL,
} ContainerEngine;

/* "none", "docker", "podman", "kubernetes", "lxc", "systemd-nspawn",
 * "other"; NULL for an out-of-range value. */
const char *container_engine_to_string(ContainerEngine e);
/* The inverse; _CONTAINER_ENGINE_INVALID for an unknown or NULL string. */
ContainerEngine container_engine_from_string(const char *s);

/* What a container can withhold from hutch. */
typedef enum ContainerNeed {
        CONTAINER_NEED_NAMESPACES, /* clone/unshare of user, mount, pid namespaces */
        CONTAINER_NEED_PROCFS,     /* a fresh procfs (refused under masked /proc paths) */
        CONTAINER_NEED_PIVOT_ROOT, /* pivot_root(2) (hutch falls back to move + chroot) */
        CONTAINER_NEED_CGROUPS,    /* a writable, delegated cgroup */
        _CONTAINER_NEED_MAX,
        _CONTAINER_NEED_INVALID = -EINVAL,
} ContainerNeed;

/* Detects the engine from the files under @root ("" or "/" for this
 * system; another directory in tests) and the given environment values
 * (NULL when unset): @env_container is $container, @env_kubernetes
 * $KUBERNETES_SERVICE_HOST. CONTAINER_NONE when nothing matches. */
ContainerEngine container_detect_at(const char *root, const char *env_container,
                                    const char *env_kubernetes);

/* container_detect_at("", getenv("container"),
 * getenv("KUBERNETES_SERVICE_HOST")). */
ContainerEngine container_detect(void);

/* The one setting of engine @e that provides @need, as a short phrase to
 * append to an error ("docker run --security-opt systempaths=unconfined");
 * NULL for CONTAINER_NONE or an out-of-range argument. */
const char *container_fix(ContainerEngine e, ContainerNeed need);
