/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* hutch-oci: an OCI runtime with runc's command line (docs/oci.md).
 *
 * oci-main.c parses the command line, keeps each container's state in
 * "<root>/<id>/" (state.json, the exec.fifo that `start` releases) and runs
 * the subcommands. oci-init.c is the pre-exec child of `create`: it builds
 * the container from config.json (namespaces, mounts, pivot_root, masks,
 * sysctls), reports "ready" or its error to the parent, blocks until
 * `start`, then drops to the configured user and capabilities, loads
 * hutch's seccomp filter and the config's own, and execs the process.
 *
 * config.json is validated as a whole before anything is created
 * (oci_config_validate()): a field hutch does not implement is an error
 * naming its JSON pointer, never ignored. */

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cgroup/cgroup.h"
#include "hutch-error.h"

/* Checks @config (the parsed config.json) for fields and values hutch-oci
 * does not implement. Returns 0, or -EOPNOTSUPP / -EINVAL with @reterr
 * naming the field (a JSON pointer) and why. */
int oci_config_validate(json_t *config, HutchError *reterr);

/* The "process" object alone (config.json's, or `exec --process`'s). */
int oci_process_validate(json_t *process, HutchError *reterr);

/* linux.resources alone (config.json's, or `update --resources`'s). */
int oci_resources_validate(json_t *resources, HutchError *reterr);

/* What the child needs besides the config. */
typedef struct OciInit {
        json_t *config;     /* borrowed: the whole config.json */
        const char *bundle; /* absolute bundle directory */
        const char *fifo;   /* absolute path of "<state>/exec.fifo" */
        int sync_fd;        /* the child's end of the parent's socketpair */
        int ns_fds[8];      /* namespaces to join (setns), -EBADF when unused */
        int ns_types[8];    /* their CLONE_NEW* types */
        size_t n_ns;
        int preserve_fds; /* fds 3..3+N-1 stay open across exec */
        int console_fd;   /* connected console socket (process.terminal), or -EBADF */
        bool new_netns;   /* a network namespace was created for it */
        bool proxy;       /* io.hutch.allow-host: make hutch-proxy's listening sockets */
        /* Hooks (prestart, createRuntime, createContainer, startContainer) or
         * hutch-proxy: init stops before pivot_root with "H" and waits for
         * "h" + 16 hex digits (the CA's subject hash) + the state JSON, with
         * the proxy's CA as a memfd when there are secrets. */
        bool pre_pivot;
} OciInit;

/* The child's whole life: never returns. Reports setup errors on
 * @init->sync_fd as "E<message>" and exits 1; sends "R" when the container
 * is created, then waits for `start`. */
_Noreturn void oci_init_run(const OciInit *init);

/* The child of `exec`, already in the container's namespaces and
 * cgroups: waits for "G" on @init->sync_fd, applies @process (rlimits,
 * cwd, env, user, capabilities, hutch's seccomp filter and the config's)
 * and execs it. Never returns; errors go to @init->sync_fd as in
 * oci_init_run(). */
_Noreturn void oci_exec_run(const OciInit *init, json_t *process);

/* The CLONE_NEW* flag of an OCI namespace type ("pid", "network", ...),
 * or 0 for an unknown one. */
int oci_namespace_flag(const char *type);

/* Capability number from its name ("CAP_CHOWN"), or -EINVAL. */
int oci_cap_from_name(const char *name);

/* The name of capability number @cap ("CAP_CHOWN" for 0), or NULL past the
 * last one hutch-oci knows. */
const char *oci_cap_to_name(int cap);

/* ---- hooks (oci-hooks.c) ---- */

/* Whether config.json's @hooks has any hook for @stage ("poststart"). */
bool oci_hooks_any(json_t *hooks, const char *stage);

/* Runs @hooks' @stage hooks one after the other, in this process's
 * namespaces, each with the state JSON text @state on its stdin, its own
 * args and env, and its `timeout` (seconds; it is killed past it). Returns
 * 0, or -errno / -ECHILD (a hook failed, timed out or could not run) with
 * @what saying which. */
int oci_hooks_run(json_t *hooks, const char *stage, const char *state, char *what,
                  size_t what_size);

/* ---- the container's cgroups (oci-cgroup.c) ---- */

#define MAX_CGROUPS 8

/* The container's cgroup directories, one per hierarchy hutch uses. */
typedef struct Cgroups {
        char *paths[MAX_CGROUPS];
        size_t n;
        char *memory, *pids, *cpu, *freezer, *devices, *v2;
        CgroupVersion memory_v, pids_v, cpu_v;
        /* The systemd form: the scope unit and its slice (no paths until
         * systemd made the scope: cgroups_plan_at()). */
        char *systemd_slice, *systemd_unit;
} Cgroups;

/* mkdir -p @path, each directory 0755. 0 or -errno. */
int oci_mkdir_p(const char *path);

void cgroups_done(Cgroups *c);

/* Where the container's cgroups go: cgroupsPath (default
 * "/hutch-oci/<id>") below every hierarchy hutch uses. Creates nothing.
 * The systemd form ("slice:prefix:name", or any path with @systemd, the
 * --systemd-cgroup flag) fills only @ret's systemd_slice and systemd_unit,
 * after oci_systemd_check_host(). Returns 0, or -errno with @reterr naming
 * the field. */
int cgroups_plan(const char *id, json_t *linux_obj, bool systemd, Cgroups *ret, HutchError *reterr);

/* The paths of @c for the cgroup @rel ("/system.slice/x.scope") below
 * every hierarchy hutch uses. 0 or -errno with @reterr filled. */
int cgroups_plan_at(Cgroups *c, const char *rel, HutchError *reterr);

/* Creates the directories and writes linux.resources @res (may be NULL);
 * @update: for `update` of a created container. Returns 0, or -errno with
 * @reterr naming the field. */
int cgroups_apply(Cgroups *c, json_t *res, bool update, HutchError *reterr);

/* ---- the systemd form of cgroupsPath (oci-systemd.c) ---- */

/* Whether hutch-oci was built with sd-bus (libsystemd). */
bool oci_systemd_built(void);

/* Splits the systemd form "slice:prefix:name" (@cgroups_path NULL or "":
 * "system.slice:hutch-oci:<@id>") into the slice ("system.slice" when
 * empty) and the scope unit "prefix-name.scope" ("name.scope" without a
 * prefix), both newly allocated. A path of another shape, a part with
 * ".." or "/" or a character no unit name has, a slice name without
 * ".slice", or a name that is a slice: -EINVAL / -EOPNOTSUPP with @reterr
 * naming /linux/cgroupsPath. */
int oci_systemd_path_parse(const char *cgroups_path, const char *id, char **ret_slice,
                           char **ret_unit, HutchError *reterr);

/* Whether this host can serve the systemd form: built with sd-bus, run
 * as root, systemd running as init, pure cgroup v2. 0, or -EOPNOTSUPP
 * with @reterr saying what is missing (fail closed: never a cgroupfs
 * fallback). */
int oci_systemd_check_host(HutchError *reterr);

/* Starts the transient scope @unit in @slice over D-Bus
 * (StartTransientUnit) with @pid in it, Delegate=yes and the limits of
 * linux.resources @res (may be NULL) as unit properties, waits for its
 * job, and returns its control group ("/system.slice/x.scope", newly
 * allocated) in @ret_cgroup. An existing unit is -EEXIST. On any error
 * after systemd started it, the scope is stopped again. -errno with
 * @reterr filled. */
int oci_systemd_scope_start(const char *slice, const char *unit, const char *id, pid_t pid,
                            json_t *res, char **ret_cgroup, HutchError *reterr);

/* `update`: linux.resources @res as @unit's properties (runtime). */
int oci_systemd_scope_set(const char *unit, json_t *res, HutchError *reterr);

/* Stops @unit (waiting for the job) and resets it if it failed (an OOM
 * kill), so that no unit is left. A unit already gone is success. */
int oci_systemd_scope_stop(const char *unit);

/* ---- devices on cgroup v2 (oci-devices.c) ---- */

/* The runtime-spec's default devices, which every container gets
 * (oci-init.c binds them): null, zero, full, random, urandom, tty, ptmx
 * and pts, each a character device with rwm access (@minor -1: any). They
 * stay usable after the config's linux.resources.devices rules, on the v1
 * devices controller (oci-cgroup.c) and in the eBPF program
 * (oci-devices.c): this one table serves both. */
typedef struct OciDefaultDevice {
        unsigned major;
        int minor;
} OciDefaultDevice;

#define OCI_N_DEFAULT_DEVICES 8
extern const OciDefaultDevice oci_default_devices[OCI_N_DEFAULT_DEVICES];

/* Loads an eBPF device program for linux.resources.devices @rules (in
 * order, the last matching rule deciding, the default devices allowed
 * after them, anything else denied) and attaches it to the cgroup v2
 * directory @cgroup_dir (BPF_F_ALLOW_MULTI: it holds for the cgroups
 * below it too). 0 or -errno with @reterr naming the field. */
int oci_devices_bpf_attach(const char *cgroup_dir, json_t *rules, HutchError *reterr);

/* Moves @pid into every cgroup of @c. 0 or -errno. */
int cgroups_attach(Cgroups *c, pid_t pid);

/* Signals every process of the cgroups listed in @state's "cgroups". */
int cgroup_signal_all(json_t *state, int sig);

/* Whether none of @state's cgroups holds a process. */
bool cgroups_empty(json_t *state);

/* Removes @state's cgroups. 0 or the first -errno. */
int cgroups_remove(json_t *state);

/* ---- hutch's network wall from io.hutch.* annotations (oci-net.c) ---- */

typedef struct Policy Policy;

/* The network policy of config.json's @annotations: *@ret stays NULL when
 * there is no io.hutch.* annotation; an unknown io.hutch.* key, a bad
 * entry, or network annotations without io.hutch.allow-host are -errno
 * with @reterr naming the annotation. */
int oci_net_from_annotations(json_t *annotations, Policy **ret, HutchError *reterr);

/* io.hutch.timeout of config.json's @annotations in milliseconds (0: none
 * given, or "0"). A value that is not a duration is -EINVAL with @reterr
 * naming the annotation. */
int oci_timeout_from_annotations(json_t *annotations, uint64_t *ret_ms, HutchError *reterr);

typedef struct SecretSet SecretSet;

/* The variables a container behind hutch-proxy gets, as a JSON object
 * kept in the state for `exec`: "default" (the proxy's HTTP_PROXY,
 * https_proxy, NO_PROXY...; with @secrets, the CA bundle's SSL_CERT_FILE,
 * NODE_EXTRA_CA_CERTS, ... and SSL_CERT_DIR), which the config's own
 * values override, and "set" (each secret's placeholder), which override
 * the config's. 0 or -ENOMEM. */
int oci_net_env_plan(const SecretSet *secrets, json_t **ret);

/* Applies oci_net_env_plan()'s @plan to @process's env. 0 or -ENOMEM. */
int oci_net_env_apply(json_t *process, json_t *plan);

/* In the container's network namespace: listens on 127.0.0.1 and ::1 at
 * SANDBOX_PROXY_PORT, and names in @iface the first interface besides lo
 * ("" when there is none). @ret_fds[1] is -EBADF without IPv6. Returns 0,
 * or -errno with @what saying what failed. */
int oci_net_listen(int ret_fds[2], char *iface, size_t iface_size, char *what, size_t what_size);

/* A network namespace with an interface besides lo (@iface: a pod's CNI
 * network): hutch's wall in front of it, an nftables table in the
 * namespace of @init_pid that drops everything leaving by any interface
 * but lo except answers to connections that came in. Refused when
 * @process (config.json's) holds CAP_NET_ADMIN or CAP_SYS_ADMIN, or there
 * is no nft. 0 or -errno with @reterr filled. */
int oci_net_wall(pid_t init_pid, const char *iface, json_t *process, HutchError *reterr);

/* recvmsg() of one message into @buf with up to @max_fds descriptors
 * (CLOEXEC) into @fds. Returns the byte count or -errno. */
int oci_recv_fds(int sock, char *buf, size_t size, int *fds, size_t max_fds, size_t *ret_n_fds);

/* Starts hutch-proxy for @p as a daemon of its own session, serving the
 * listening sockets @fds (borrowed; fds[1] may be -EBADF) until the
 * container's init @init_pid exits; its stderr goes to @log_fd (borrowed,
 * or -EBADF). With secrets, @config_fd is the --config-fd document
 * (secret_set_config_memfd()) and @ca_out_fd the write end of the pipe
 * the proxy writes its CA to, both borrowed (else -EBADF). Waits until it
 * serves. 0, or -errno with @reterr filled. */
int oci_net_proxy_start(const Policy *p, const char *id, pid_t init_pid, const int fds[2],
                        int log_fd, int config_fd, int ca_out_fd, HutchError *reterr);
