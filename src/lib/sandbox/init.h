/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The sandbox init: PID 1 of the new namespaces (docs/architecture.md §2).
 *
 * It waits for the supervisor's GO (the id maps are written by then), builds
 * the filesystem, confines itself (no capabilities, no_new_privs, landlock,
 * seccomp), forks the command, reaps every zombie, forwards SIGINT, SIGTERM,
 * SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 to the command, and reports the
 * command's wait status over the sync socket. A failing step is reported as
 * SYNC_OP_ERROR {errno, step, message} and ends init. */

#include "policy/policy.h"
#include "sandbox/container.h"
#include "sandbox/image-root.h"

/* The v1 hierarchies hutch uses (memory, pids, cpu, cpuacct, freezer) and
 * the v2 one. */
#define INIT_CGROUP_FDS_MAX 6

typedef struct InitArgs {
        const Policy *policy;
        char **argv; /* heap copies: the caller's argv/env memory is wiped */
        char **envp;
        const char *workdir; /* absolute path inside the sandbox */
        int sync_fd;
        int stdout_fd;        /* pipe for the command's stdout, or -EBADF to inherit */
        int stderr_fd;        /* same for stderr */
        bool tty;             /* stdin is the channel of a pty made inside (sandbox/pty.h) */
        CgroupLimits rlimits; /* applied before the fork when non-zero (degraded run) */
        /* Persistent sandbox: init receives the layers (SYNC_OP_LAYERS) and,
         * instead of running argv, serves SYNC_OP_EXEC requests. */
        bool persistent;
        const char *upper; /* the data dir's current upper, "upper-<gen>" */
        /* Unprivileged (no detached mounts): the host paths init binds. */
        const char *data_dir;
        char **layer_paths;
        /* An image sandbox: init receives the layers (SYNC_OP_IMAGE); the
         * command of a one-shot run becomes the image's User. */
        const ImageRoot *image;
        ContainerEngine container; /* where hutch runs, to name fixes in errors */
        uint64_t keep_caps;        /* caps_drop_all_but(): 0, or CAPS_PACKAGE_SET */
        /* Issue 16: descriptors of the sandbox's cgroup leaves that init
         * inherited. The first n_cgroup_tasks are the v1 leaves' "tasks"
         * files, where init's first action writes "0" (a failed write is
         * fatal); any after them (the v2 leaf clone3 put init in) are only
         * closed. */
        int cgroup_fds[INIT_CGROUP_FDS_MAX];
        size_t n_cgroup_fds;
        size_t n_cgroup_tasks;
} InitArgs;

/* Never returns: _exit()s when the command has ended or setup failed. */
_noreturn_ void sandbox_init_main(const InitArgs *a);
