/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What the two parts of hutch-agent share: agent.c (the boot, the port and
 * the commands) and agent-setup.c (SETUP: the command's root). Private to
 * src/guest. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "macro.h"

/* The command's root. */
#define SBX "/sbx"

/* What SETUP said (agent-protocol.h's keys), with their defaults. */
typedef struct Setup {
        /* SECURITY: the guest ids the command's user namespace maps its ids
         * 0..ids-1 onto; never 0 (issue 26): the guest kernel does not
         * treat the command as privileged. */
        uid_t uid;
        gid_t gid;
        uint32_t ids;
        uint64_t memory, pids;
        uint64_t size_tmp, size_home, size_shm, size_workspace;
        bool net, read_only, done;
        /* An image's root (docs/vm.md, "Images"): the 9p tag of the share
         * that is the command's root, or "": the host base. */
        char root_tag[32];
        /* SETUP's "caps=package": the command keeps AGENT_PACKAGE_CAPS
         * over its user namespace's ids (docs/vm.md, "Images"). */
        bool package_caps;
} Setup;

/* What dpkg and apt need as the root of a persistent image sandbox with a
 * range of ids: the namespace backend's CAPS_PACKAGE_SET (src/lib/ns/caps.h;
 * the guest links src/basic only), chown, dac_override, fowner, fsetid,
 * kill, setgid, setuid, only ever over the command's own user namespace. */
#define AGENT_PACKAGE_CAPS                                                                         \
        ((UINT64_C(1) << CAP_CHOWN) | (UINT64_C(1) << CAP_DAC_OVERRIDE) |                          \
         (UINT64_C(1) << CAP_FOWNER) | (UINT64_C(1) << CAP_FSETID) | (UINT64_C(1) << CAP_KILL) |   \
         (UINT64_C(1) << CAP_SETGID) | (UINT64_C(1) << CAP_SETUID))

extern Setup setup;

/* The sandbox's namespaces, made at the end of SETUP (agent-setup.c) and
 * joined by every command: its user namespace (setup.uid's map), and the
 * mount, IPC and UTS namespaces of the sandbox's init (pid 1 of the
 * sandbox's pid namespace, which the agent makes its children's). -EBADF
 * before SETUP. */
typedef struct SandboxNs {
        int user, mnt, ipc, uts;
} SandboxNs;

extern SandboxNs sandbox_ns;

/* Why a step failed, as an ERROR frame says it. */
typedef struct Fail {
        int err;
        char step[128];
        char msg[512];
} Fail;

/* Fills @f (@err, positive; EIO when it is not) and returns -@err. */
int fail(Fail *f, int err, const char *step, const char *detail);

/* Says why the agent gives up on the console (the host shows its last
 * lines) and ends the VM: PID 1 exiting panics the kernel. */
_noreturn_ void die(const char *what, int err);

void sleep_ms(long ms);

/* SETUP's payload: builds the command's root under SBX. 0, or -errno with
 * @f. */
int do_setup(const void *payload, size_t len, Fail *f);

/* agent-pty.c. In the command's child (a session leader, in its root):
 * opens a pty of the sandbox's devpts with the window size @rows x @cols,
 * makes the slave the controlling terminal and fds 0-2, and sends the
 * master to the agent over @chan ("pty" with SCM_RIGHTS). 0 or -errno. */
int agent_pty_attach(int chan, unsigned rows, unsigned cols);
/* The agent's side: the master from @chan, non-blocking. -EPIPE when the
 * child ended without sending one, -EBADMSG for anything but a pty
 * master. */
int agent_pty_recv(int chan, int *ret_master);
int agent_pty_resize(int master, unsigned rows, unsigned cols);
/* A non-blocking TCP socket connecting (or connected) to 127.0.0.1:@port
 * in the guest: a published port's connection. 0 or -errno
 * (-ECONNREFUSED: nothing listens there). */
int agent_forward_connect(uint16_t port, int *ret_fd);

/* agent-user.c. In the command's child, chrooted into its root and root of
 * the sandbox's user namespace (enter_sandbox()): resolves @spec in that
 * root's /etc/passwd and /etc/group (src/shared/image-user.h), sets HOME
 * and USER in *@envp (unless @keep_home, @keep_user: the policy sets them),
 * and becomes that user (groups, gid, uid). Returns 0 with the uid in
 * @ret_uid, or -errno with what went wrong in @msg. */
int agent_user_become(const char *spec, bool keep_home, bool keep_user, char ***envp,
                      uid_t *ret_uid, char *msg, size_t msg_size);
