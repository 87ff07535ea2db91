/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The microVM of `--backend vm` (docs/vm.md, docs/architecture.md §2): one guest
 * booted (or restored from a template) by a VMM, with hutch-agent as its
 * PID 1. This layer knows machines, images and the agent's frames; the
 * policy, the proxy, the host cgroup and the outcome are the sandbox's
 * (src/lib/vm/vm-run.c).
 *
 * The VMM is QEMU's `microvm` machine, behind vm_start()/vm_free(): hutch
 * builds its argv, talks QMP over a socketpair, and passes the agent's
 * virtio-serial port as a connected socket (no socket in the file
 * system). Firecracker or cloud-hypervisor would be other implementations
 * of the same three calls.
 *
 * Images (vm-image.c): the guest kernel is Debian's own (the newest
 * /boot/vmlinuz-*, or an explicit path), decompressed once into a cached
 * vmlinux that QEMU boots directly (PVH entry); the initramfs is written by
 * hutch (cpio newc): the static hutch-agent as /init and the modules it
 * needs from /lib/modules/RELEASE, resolved through modules.dep. Both are
 * cached under @cache_dir by a key of their inputs.
 *
 * Templates (vm.c): a cold boot with the guest RAM in a file on tmpfs
 * (share=on), stopped right after the agent's HELLO and migrated to a
 * file with x-ignore-shared (so the RAM is not copied); later VMs of the
 * same shape map the same RAM file privately (share=off: copy on write,
 * SECURITY: nothing writable is shared between two VMs) and load the
 * device state with -incoming. The key covers everything that shapes the
 * guest (QEMU, kernel, initramfs, command line, RAM, vCPUs, shares, NIC):
 * a changed input is a new template, never a stale one. A missing template
 * is built on first use; a template that fails to build or restore falls
 * back to a cold boot.
 *
 * The calling process must be single-threaded (it forks QEMU). Nothing is
 * logged. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent-protocol.h"
#include "cgroup/cgroup.h"
#include "hutch-error.h"
#include "macro.h"
#include "policy/policy.h"

#define VM_MAX_SHARES 24

/* A host directory shared with the guest over virtio-9p as tag "h<i>". */
typedef struct VmShare {
        const char *path; /* absolute host directory */
        bool read_only;   /* SECURITY: enforced by QEMU (readonly=on), not only by the guest */
} VmShare;

#define VM_MAX_DIRS 32

/* Where QEMU's own mount namespace has VmConfig.files: a tmpfs over
 * the host's /tmp, seen by QEMU and its children only. */
#define VM_PRIVATE_DIR "/tmp"
#define VM_MAX_FILES 2

/* A host file QEMU's children reach by path (VmConfig.files). */
typedef struct VmFile {
        const char *path; /* absolute host path, reachable by the caller */
        const char *name; /* a single component: it appears as VM_PRIVATE_DIR/name */
} VmFile;

/* A host directory QEMU reaches through a descriptor (VmConfig.dirs). */
typedef struct VmDir {
        const char *path; /* how hutch names it (a host path, or a name of its own) */
        int fd;           /* borrowed: the directory, as QEMU may open it */
} VmDir;

/* The first guest id of the sandbox's ids when QEMU runs in a user
 * namespace (VmConfig.guest_id): the guest's command is the root of a user
 * namespace of its own that maps its 0.. onto VM_GUEST_ID_BASE.., and the
 * ids below it are nothing of the sandbox's. */
#define VM_GUEST_ID_BASE UINT32_C(100000)

typedef struct VmConfig {
        VmAccel accel;
        const char *kernel;       /* or NULL: the newest /boot/vmlinuz-* */
        const char *cache_dir;    /* vmlinux and initramfs cache (created 0700) */
        const char *template_dir; /* on tmpfs: templates (created 0700) */
        const char *run_dir;      /* this VM's private directory: logs, empty share */
        uint64_t ram_bytes;       /* guest RAM, a multiple of 1 MiB */
        unsigned vcpus;
        VmShare shares[VM_MAX_SHARES];
        size_t n_shares;
        const char *net_helper;   /* guestfwd command to the proxy, or NULL: no NIC */
        bool use_template;        /* false: always a cold boot */
        uint64_t boot_timeout_ms; /* bound on the agent's first answer */
        Cgroup *cgroup;           /* borrowed: QEMU runs in it, or NULL */
        /* A persistent sandbox: QEMU joins the user namespace @userns_fd
         * (the sandbox's id mapping) as its uid and gid 0, so that what it
         * writes to a share is owned as the namespace backend's files are.
         * There the host's paths may be out of its reach: it inherits each
         * of @dirs as a descriptor, and every path of its command line
         * (kernel, initramfs, console, template RAM, shares) at or below
         * dirs[i].path becomes /proc/self/fd/N/... */
        bool in_userns;
        int userns_fd; /* borrowed, with in_userns */
        /* With in_userns: QEMU does not stay that namespace's root. It
         * moves on into a namespace nested in it that maps
         * @guest_id..@guest_id+@userns_count-1 to that namespace's
         * 0..@userns_count-1, and takes uid and gid @guest_id there (the
         * same host ids as before, with the namespace's capabilities kept
         * as ambient ones). So the ids QEMU's 9p server reports to the
         * guest start at @guest_id, an id the guest kernel does not treat
         * as privileged: the guest runs the command as the root of a user
         * namespace of its own mapped onto them (docs/vm.md, "The guest's
         * own wall"). 0: QEMU stays the namespace's root. */
        uint32_t guest_id;
        uint32_t userns_count;
        /* The namespace holds the ranged map of a user with sub-ids (its 0
         * the user, 1.. the sub-ids: two extents), so the nested map is
         * written in the same two (docs/vm.md, "Images"). */
        bool userns_ranged;
        VmDir dirs[VM_MAX_DIRS];
        size_t n_dirs;
        /* With in_userns: files bound into a mount namespace of QEMU's
         * own, a copy of the caller's with a tmpfs on VM_PRIVATE_DIR, at
         * VM_PRIVATE_DIR/name (the guestfwd helper, which slirp starts
         * with no descriptor of QEMU's, runs and connects to them by
         * path). Bound by their host paths: as root before QEMU joins the
         * user namespace (so the mounts are the host root's and QEMU
         * cannot change them), as a user after (the user's own
         * namespace may make mounts). */
        VmFile files[VM_MAX_FILES];
        size_t n_files;
} VmConfig;

typedef enum VmStart {
        VM_START_COLD,     /* booted; no template was wanted or usable */
        VM_START_TEMPLATE, /* restored from an existing template */
        VM_START_BUILT,    /* a template was built (one cold boot), then restored */
} VmStart;

typedef struct Vm {
        pid_t pid; /* QEMU, until reaped */
        int pidfd;
        int agent_fd; /* the host end of the agent's port */
        int qmp_fd;
        char *console_path; /* the guest's serial console */
        char *log_path;     /* QEMU's stderr */
        VmStart start;
        uint64_t boot_timeout_ms;
        AgentReader *reader;
} Vm;

/* Finds QEMU and the kernel, prepares (or finds cached) images and a
 * template, and starts the VM. Returns 0 with the agent ready for SETUP,
 * or -errno with nothing left running and @reterr saying why:
 * -ENOENT when QEMU or the kernel is missing (the message has the
 * apt-get line), -EOPNOTSUPP for an accelerator that cannot work here
 * (kvm on a PVM host), -ETIMEDOUT (with the last console lines) for a guest
 * that did not come up within the bound. */
int vm_start(const VmConfig *c, Vm **ret, HutchError *reterr);

/* Sets a function vm_start() calls before it builds a template (@done
 * false: a cold boot of seconds) and after (@done true, @ok whether it
 * worked), so that a command line program can say so on its terminal; the
 * library itself logs nothing. NULL (the default): none. */
void vm_set_template_build_hook(void (*hook)(bool done, bool ok));

/* Where the templates go (they hold guest RAM: on tmpfs): @runtime_dir/
 * vm-templates when @runtime_dir (the caller's runtime folder) is on
 * tmpfs, else a folder /dev/shm/hutch-vm-UID-XXXXXX made by mkdtemp() and
 * recorded in @record_dir/vm-templates.path (SECURITY: never a name
 * another user can make first; a planted template would run in the next
 * VM). vm_start() checks that the folder is private and ours. 0, -ENOMEM,
 * or the -errno of the record or of mkdtemp(). */
int vm_template_dir(const char *runtime_dir, const char *record_dir, char **ret);

/* Frees the guest RAM of removed stores: removes the caller's folders
 * /dev/shm/hutch-vm-UID-XXXXXX (private and its own, checked through an
 * fd opened without following links) whose owner file names a record
 * (a store's vm-templates.path) that is gone or names another folder
 * now, each checked under that record's lock. A folder that cannot be
 * proven orphaned (no owner file: an older hutch's; a record another user
 * owns; a store handing out a folder right now) is left alone, and so is
 * every live store's. vm_template_dir() calls it before each VM's start on
 * /dev/shm, `hutch gc` too. Best effort: returns how many it removed. */
unsigned vm_templates_reclaim(void);

/* Kills QEMU (if running), waits for it, and frees @vm. Returns NULL. */
Vm *vm_free(Vm *vm);
DEFINE_POINTER_CLEANUP(Vm, vm_free)

/* Waits up to @timeout_ms for the next frame from the agent. Returns 1 with
 * the frame (payload valid until the next call), -ETIMEDOUT, -ECHILD when
 * QEMU ended, -EBADMSG for a malformed frame, -EPIPE at EOF. */
int vm_agent_recv(Vm *vm, uint64_t timeout_ms, AgentFrame *ret);

/* Sends a @type frame with @payload on channel @chan and waits (the boot
 * bound) for the answer @want: SETUP for READY, EXEC for STARTED; only
 * before any other frame is on its way (a VmMux owns the port after). An
 * ERROR from the agent
 * becomes @reterr ("sandbox setup failed in the guest: STEP: MESSAGE",
 * for EXEC "the command could not start in the guest: ...",
 * with its errno); -ETIMEDOUT and a VM that went away come with the last
 * console lines. */
int vm_agent_request(Vm *vm, AgentMsg type, uint8_t chan, const void *payload, size_t len,
                     AgentMsg want, HutchError *reterr);

/* @reterr from an ERROR frame's @payload ("@what: STEP: MESSAGE");
 * returns minus its errno (-EIO when it has none that makes sense). */
int vm_agent_error_decode(const void *payload, size_t len, const char *what, HutchError *reterr);

/* The last @max_lines lines of the guest console and QEMU's stderr, one
 * string ("" when both are empty). */
int vm_console_tail(const Vm *vm, size_t max_lines, char **ret);

/* Appends "; guest console: ..." with the console's tail to @e's message. */
void vm_error_add_console(const Vm *vm, HutchError *e);

/* The pieces, for tests and `hutch doctor`. */

/* The kernel: @explicit (checked), or the newest /boot/vmlinuz-* by
 * version. Writes its path and release (the part after "vmlinuz-", or
 * NULL when the name does not tell). -ENOENT with the apt-get line. */
int vm_kernel_find(const char *explicit, char **ret_path, char **ret_release, HutchError *reterr);

/* QEMU: $HUTCH_QEMU, else qemu-system-x86_64 in $PATH or /usr/bin.
 * -ENOENT with the apt-get line. */
int vm_qemu_find(char **ret, HutchError *reterr);

/* hutch-agent: $HUTCH_AGENT_PATH, else ../libexec/hutch/hutch-agent from
 * the running binary, else next to it, else ../guest/hutch-agent (the
 * build tree). -ENOENT naming where it looked. */
int vm_agent_binary_find(char **ret, HutchError *reterr);

/* The decompressed vmlinux of the bzImage @kernel, cached in @cache_dir
 * (an ELF @kernel is used as it is). -EINVAL for a file that is neither,
 * -EFBIG past 512 MiB decompressed. */
int vm_vmlinux_prepare(const char *kernel, const char *cache_dir, char **ret, HutchError *reterr);

/* The initramfs for @agent and the modules of /lib/modules/@release (none
 * when @release is NULL or has no modules.dep), cached in @cache_dir. */
int vm_initramfs_prepare(const char *agent, const char *release, const char *cache_dir, char **ret,
                         HutchError *reterr);

/* The modules the guest needs from the modules.dep text @dep, dependencies
 * first, as paths relative to the modules directory. A module missing
 * from @dep is left out (it may be built in). -EINVAL for a malformed
 * line, -ELOOP for a cycle. */
int vm_modules_resolve(const char *dep, char ***ret);

/* Writes a cpio "newc" archive to @fd: the directories @dirs (mode 0755),
 * then each @names[i] (a path inside the archive) with the bytes of the
 * host file @files[i] and mode @modes[i], then the trailer. */
int vm_cpio_write(int fd, char *const *dirs, char *const *names, char *const *files,
                  const unsigned *modes);

/* The guest's serial console fd-free helper for tests: the TSC rate hints
 * of the kernel command line ("tsc_early_khz=N lpj=M no_timer_check"), or
 * "" when the rate is unknown. */
int vm_tsc_hints(char **ret);

/* The hutch-side end of the guest's proxy connection (the guestfwd helper,
 * `hutch __vm-fwd SOCKET`): connects to the unix socket @path and copies
 * stdin to it and it to stdout until both sides ended. Returns 0 or
 * -errno. */
int vm_forward_run(const char *path);
