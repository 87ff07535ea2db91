/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Policy: what a sandbox may see and do. The CLI flags and the JSON policy
 * file (docs/policy.md) fill the same struct; the sandbox code only reads
 * it. A Policy owns all its strings and arrays.
 *
 * Lifecycle: policy_new() gives the documented defaults; the parsers add to
 * it; policy_validate() runs once after all input was applied and before any
 * namespace is created, so every bad input is reported while nothing on the
 * host has changed yet.
 *
 * Merging (flags override the policy file): the file is loaded first, then
 * flags are applied on top. Scalars are replaced, list entries (binds, tmpfs,
 * env) are appended, and a later tmpfs/bind/env entry for the same target or
 * key replaces the earlier one. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hutch-error.h"
#include "macro.h"

typedef enum WorkspaceMode {
        WORKSPACE_MODE_MOUNT,   /* the real folder, read-write */
        WORKSPACE_MODE_COPY,    /* copied into a tmpfs before the command */
        WORKSPACE_MODE_OVERLAY, /* the lower layer of an overlay; changes stay in the sandbox */
        _WORKSPACE_MODE_MAX,
        _WORKSPACE_MODE_INVALID = -EINVAL,
} WorkspaceMode;

typedef enum NetworkMode {
        NETWORK_MODE_NONE,  /* loopback only */
        NETWORK_MODE_ALLOW, /* the allowlisted hosts, through hutch-proxy */
        _NETWORK_MODE_MAX,
        _NETWORK_MODE_INVALID = -EINVAL,
} NetworkMode;

/* Where the command runs (docs/vm.md). */
typedef enum SandboxBackend {
        SANDBOX_BACKEND_NS, /* Linux namespaces on the host kernel (default) */
        SANDBOX_BACKEND_VM, /* a microVM with a kernel of its own */
        _SANDBOX_BACKEND_MAX,
        _SANDBOX_BACKEND_INVALID = -EINVAL,
} SandboxBackend;

/* The microVM's accelerator. SECURITY: there is no automatic fallback from
 * kvm to tcg: software emulation is used only when asked for. */
typedef enum VmAccel {
        VM_ACCEL_KVM, /* hardware virtualisation (default) */
        VM_ACCEL_TCG, /* QEMU's software emulation: slow, works everywhere */
        _VM_ACCEL_MAX,
        _VM_ACCEL_INVALID = -EINVAL,
} VmAccel;

const char *sandbox_backend_to_string(SandboxBackend b);
SandboxBackend sandbox_backend_from_string(const char *s);
const char *vm_accel_to_string(VmAccel a);
VmAccel vm_accel_from_string(const char *s);

const char *workspace_mode_to_string(WorkspaceMode m);
WorkspaceMode workspace_mode_from_string(const char *s);
const char *network_mode_to_string(NetworkMode m);
NetworkMode network_mode_from_string(const char *s);

typedef struct BindMount {
        char *source; /* absolute host path */
        char *target; /* absolute sandbox path */
        bool read_only;
} BindMount;

typedef struct TmpfsMount {
        char *path;    /* absolute sandbox path */
        uint64_t size; /* bytes, > 0 */
} TmpfsMount;

/* Defaults, documented in docs/policy.md and README. */
#define POLICY_DEFAULT_TMP_SIZE (1024ULL << 20)
#define POLICY_DEFAULT_HOME_SIZE (1024ULL << 20)
#define POLICY_DEFAULT_SHM_SIZE (64ULL << 20)
#define POLICY_DEFAULT_COPY_SIZE (4096ULL << 20)
#define POLICY_DEFAULT_HOSTNAME "hutch"
#define POLICY_SANDBOX_HOME "/root"
#define POLICY_SANDBOX_WORKSPACE "/workspace"
/* The workspace and every bind travel to init in one SCM_RIGHTS message
 * of at most 16 descriptors (fd-util.c). */
#define POLICY_MAX_BINDS 15
#define POLICY_MAX_TMPFS 64
#define POLICY_MAX_ENV 1024
#define POLICY_MAX_FILE_SIZE (1U << 20)
#define POLICY_MAX_NET_ENTRIES 1024
#define POLICY_MAX_SECRETS 64
#define POLICY_MAX_SECRET_HOSTS 64
#define POLICY_MAX_PORTS 64

/* Resource limits (docs/policy.md, README). A memory and a pids limit are
 * on by default; the others are off. */
#define POLICY_DEFAULT_MEMORY (2048ULL << 20)
#define POLICY_DEFAULT_PIDS 1024
#define POLICY_MIN_MEMORY (6ULL << 20)
#define POLICY_MAX_CPU_MILLIS (1024U * 1000U)

typedef enum PolicyLimit {
        POLICY_LIMIT_MEMORY,      /* --memory SIZE */
        POLICY_LIMIT_MEMORY_SWAP, /* --memory-swap SIZE: memory + swap, as docker */
        POLICY_LIMIT_CPUS,        /* --cpus N.NNN */
        POLICY_LIMIT_PIDS,        /* --pids N */
        POLICY_LIMIT_TIMEOUT,     /* --timeout DURATION */
        POLICY_LIMIT_DISK,        /* --disk SIZE: $HOME and a copied workspace */
        POLICY_LIMIT_OUTPUT,      /* --output-limit SIZE per stream */
        _POLICY_LIMIT_MAX,
        _POLICY_LIMIT_INVALID = -EINVAL,
} PolicyLimit;

/* The JSON field names: "memory", "memory_swap", "cpus", "pids", "timeout",
 * "disk", "output_limit". */
const char *policy_limit_to_string(PolicyLimit l);
PolicyLimit policy_limit_from_string(const char *s);

/* A credential brokered by hutch-proxy (docs/secrets.md): the sandbox
 * gets a placeholder in $name, the proxy swaps in the real value on
 * requests to @hosts. Only the source is kept here, never the value. */
typedef struct PolicySecret {
        char *name;        /* the sandbox's variable, [A-Za-z_][A-Za-z0-9_]* */
        char *env_var;     /* read from the caller's variable (default: name), or NULL */
        char *file;        /* or read from this host file (absolute), or NULL */
        char **hosts;      /* allowlist patterns "HOST[:PORT]", at least one */
        char *header;      /* substitute only in this request header, or NULL (the default set) */
        char *query;       /* also in this query parameter's value, or NULL */
        char *path_prefix; /* substitute only below this path ("/v1/"), or NULL */
        char **methods;    /* substitute only for these methods, or NULL for all */
} PolicySecret;

typedef struct Policy {
        char *workspace;              /* absolute host path, or NULL for none */
        WorkspaceMode workspace_mode; /* default WORKSPACE_MODE_MOUNT */
        BindMount *binds;             /* -v HOST:SANDBOX[:ro] */
        size_t n_binds;
        TmpfsMount *tmpfs; /* --tmpfs PATH[:size=N]; one for /tmp replaces the default */
        size_t n_tmpfs;
        char **env;      /* "KEY=VALUE" entries set with -e K=V */
        char **env_pass; /* names copied from the caller (-e K, --env-pass K) */
        char *workdir;   /* -w; NULL means /workspace with a workspace, else $HOME */
        char *hostname;  /* default POLICY_DEFAULT_HOSTNAME */
        bool read_only;  /* workspace, $HOME and binds read-only */
        NetworkMode network;
        bool network_set;      /* the mode was given explicitly (flag or file) */
        char **allow_hosts;    /* --allow-host PATTERN[:PORT]; implies NETWORK_MODE_ALLOW */
        char **deny_hosts;     /* --deny-host PATTERN[:PORT]; wins over allow */
        char **allow_private;  /* --allow-private CIDR: non-public ranges allowed names may use */
        char **resolve;        /* --resolve NAME:ADDR[,ADDR...]: instead of DNS */
        char *audit_log;       /* --audit-log FILE (absolute): the proxy's JSON-lines decisions */
        PolicySecret *secrets; /* --secret; implies NETWORK_MODE_ALLOW */
        size_t n_secrets;
        char **upstream_ca; /* --upstream-ca FILE: extra CAs for the proxy's upstream TLS */

        /* --dns transparent: a resolver for the allowlisted names. */
        bool dns_transparent;

        /* Resource limits; 0 means none. */
        uint64_t memory_max;      /* bytes; default POLICY_DEFAULT_MEMORY */
        uint64_t memory_swap_max; /* memory + swap; 0 = same as memory_max (no swap) */
        uint32_t cpu_millis;      /* 1000 = one CPU's time; 0 = no quota */
        uint64_t pids_max;        /* default POLICY_DEFAULT_PIDS */
        uint64_t timeout_ms;      /* wall clock; 0 = none */
        uint64_t disk_size;       /* $HOME and copied-workspace tmpfs size; 0 = their defaults */
        uint64_t output_limit;    /* bytes per stream (stdout, stderr); 0 = none */
        unsigned limits_explicit; /* 1 << PolicyLimit for each limit given by the user */
        bool allow_degraded;      /* run with rlimits when a limit cannot be a cgroup limit */

        SandboxBackend backend; /* --backend; default SANDBOX_BACKEND_NS */
        VmAccel vm_accel;       /* --vm-accel; default VM_ACCEL_KVM */
        char *vm_kernel;        /* --vm-kernel: absolute path of the guest kernel, or NULL */

        /* --image: the image whose layers are the root filesystem (a name of
         * the image store, NAME[:TAG] or sha256:HEX), or NULL for the host
         * base (docs/images-run.md). */
        char *image;
        char **ports; /* -p: published ports, each as port_spec_to_string() writes it */
        /* --user: the sandbox's default user ("NAME", "UID", "NAME:GROUP",
         * "UID:GID"), found in the sandbox's /etc/passwd and /etc/group when
         * a command starts; NULL: the image's User, else root. */
        char *user;
} Policy;

/* Returns a policy with the defaults, or NULL on OOM. */
Policy *policy_new(void);
Policy *policy_free(Policy *p);
DEFINE_POINTER_CLEANUP(Policy, policy_free)

/* Parses "DIR[:mount|:copy|:overlay]" and sets the workspace. DIR is made absolute
 * against the current directory (it is not resolved or checked here; that is
 * policy_validate()'s job). -EINVAL with @reterr naming the value for an
 * unknown mode or an empty DIR. */
int policy_set_workspace_spec(Policy *p, const char *spec, HutchError *reterr);

/* Parses "HOST:SANDBOX[:ro|:rw]" and appends a bind. HOST is made absolute
 * against the current directory; SANDBOX must be absolute (-EINVAL naming it
 * otherwise). */
int policy_add_bind_spec(Policy *p, const char *spec, HutchError *reterr);

/* Parses "PATH[:size=N]" (N as parse_size()) and appends a tmpfs; without a
 * size the default for /tmp is used. */
int policy_add_tmpfs_spec(Policy *p, const char *spec, HutchError *reterr);

/* Parses "KEY=VALUE" (sets) or "KEY" (passes the caller's KEY through).
 * -EINVAL for an invalid name. */
int policy_add_env_spec(Policy *p, const char *spec, HutchError *reterr);

/* Sets a scalar string field; -EINVAL naming the value if it is invalid
 * (hostname: 1-63 chars [A-Za-z0-9-], not starting with '-'; workdir:
 * absolute without "." or ".." components). */
int policy_set_hostname(Policy *p, const char *hostname, HutchError *reterr);
int policy_set_workdir(Policy *p, const char *workdir, HutchError *reterr);
int policy_set_network(Policy *p, const char *mode, HutchError *reterr);
/* --dns MODE, policy field "dns": "proxy" (the default: only the proxy
 * variables) or "transparent" (docs/network.md, "Transparent DNS").
 * -EINVAL naming the value otherwise. */
int policy_set_dns(Policy *p, const char *mode, HutchError *reterr);

/* "ns" or "vm"; "kvm" or "tcg"; -EINVAL naming the value otherwise. */
int policy_set_backend(Policy *p, const char *backend, HutchError *reterr);
int policy_set_vm_accel(Policy *p, const char *accel, HutchError *reterr);

/* Sets the guest kernel, made absolute against the current directory (as
 * policy_path_make_absolute()); its existence is checked by
 * policy_validate() only with backend vm. -EINVAL for an empty path. */
int policy_set_vm_kernel(Policy *p, const char *path, HutchError *reterr);

/* Sets the image (--image, policy field "image"): 1-255 characters of
 * A-Z, a-z, 0-9 and "._-:/@", not starting with '-' or '.'. Whether the
 * store has it is checked when the sandbox starts. -EINVAL naming the
 * value otherwise. */
int policy_set_image(Policy *p, const char *image, HutchError *reterr);

/* Whether @spec is a user as --user takes it: "USER" or "USER:GROUP",
 * each 1-63 characters of A-Z, a-z, 0-9 and "._-$", not starting with '-'
 * (a name or a number; found or not only inside the sandbox). */
bool user_spec_is_valid(const char *spec);

/* Sets the sandbox's default user (--user, policy field "user"); -EINVAL
 * naming the value when !user_spec_is_valid(). */
int policy_set_user(Policy *p, const char *user, HutchError *reterr);

/* The network mode in force: NETWORK_MODE_ALLOW when set so or when any
 * --allow-host or --secret was given, else NETWORK_MODE_NONE. */
NetworkMode policy_network_mode(const Policy *p);

/* Appends a network list entry; @ctx names the source in messages
 * ("--allow-host"). Entries are checked here (pattern, CIDR, NAME:ADDR),
 * so a bad one is refused before anything runs: -EINVAL naming it, -E2BIG
 * past POLICY_MAX_NET_ENTRIES, -ENOMEM. */
int policy_add_allow_host(Policy *p, const char *pattern, const char *ctx, HutchError *reterr);
int policy_add_deny_host(Policy *p, const char *pattern, const char *ctx, HutchError *reterr);
int policy_add_allow_private(Policy *p, const char *cidr, const char *ctx, HutchError *reterr);
int policy_add_resolve(Policy *p, const char *entry, const char *ctx, HutchError *reterr);

/* Sets the audit log file, made absolute against the current directory (as
 * policy_path_make_absolute()). -EINVAL for an empty path, getcwd()'s errno,
 * -ENOMEM. */
int policy_set_audit_log(Policy *p, const char *path, HutchError *reterr);

/* Parses a --secret spec (docs/secrets.md):
 *   NAME[=file:PATH|=env:VAR]@HOST[:PORT][/PREFIX][,HOST[:PORT][/PREFIX]...][;OPTION=VALUE...]
 * with the options header=NAME, query=PARAM and methods=M1,M2. A relative PATH is made
 * absolute against the current directory. Every host is checked as an
 * --allow-host entry. -EINVAL naming the spec and what is wrong; -EEXIST
 * for a second secret of the same name; -E2BIG past POLICY_MAX_SECRETS;
 * -ENOMEM. The value itself is not read here: the supervisor reads it right before
 * the run (src/lib/sandbox/secrets.h). */
int policy_add_secret_spec(Policy *p, const char *spec, HutchError *reterr);

/* Checks @s (every field as policy_add_secret_spec() checks it) and
 * appends a deep copy. @ctx names the source in messages, or NULL. */
int policy_add_secret(Policy *p, const PolicySecret *s, const char *ctx, HutchError *reterr);
void policy_secret_done(PolicySecret *s);

/* Appends an --upstream-ca file (made absolute; existence is checked by
 * policy_validate()). -EINVAL for an empty path. */
int policy_add_upstream_ca(Policy *p, const char *path, const char *ctx, HutchError *reterr);

/* Parses @text as the value of limit @which and sets it, marking it
 * explicit: sizes as parse_size() (memory at least POLICY_MIN_MEMORY,
 * others > 0), cpus a decimal with up to three fractional digits in
 * (0, 1024], pids an integer >= 1, timeout as parse_duration_ms() ("0" =
 * none). @ctx names the source in messages ("--memory"); with NULL the
 * message names the limit ("memory limit"). -EINVAL for a bad value,
 * -ERANGE for one that overflows. */
int policy_set_limit(Policy *p, PolicyLimit which, const char *text, const char *ctx,
                     HutchError *reterr);

/* Checks the whole policy against the host, before anything is created:
 * the workspace and every bind source exist (-ENOENT naming the path), the
 * workspace is a directory (-ENOTDIR), bind targets do not replace the
 * sandbox's own mounts (/, /proc, /dev, /usr, /etc, ...: -EINVAL), counts
 * are within the POLICY_MAX_* caps (-E2BIG), and with backend vm the
 * --vm-kernel file exists (-ENOENT). Returns 0 or -errno with
 * @reterr filled. */
int policy_validate(const Policy *p, HutchError *reterr);

/* Applies a JSON policy document (docs/policy.md) from @text of @len bytes
 * onto @p. Unknown fields, wrong types and invalid values fail with
 * -EINVAL; @reterr then holds the JSON pointer of the field and its line
 * (and column for syntax errors). */
int policy_load_json(Policy *p, const char *text, size_t len, HutchError *reterr);

/* Reads @path (at most POLICY_MAX_FILE_SIZE bytes) and applies it with
 * policy_load_json(). */
int policy_load_file(Policy *p, const char *path, HutchError *reterr);

/* A published port (-p, docs/policy.md "ports"): TCP to @host_ip:@host_port
 * on the host is forwarded to 127.0.0.1:@port inside the sandbox. */
typedef struct PortSpec {
        int family;          /* AF_INET or AF_INET6 */
        uint8_t host_ip[16]; /* network byte order; IPv4 uses the first 4 bytes */
        uint16_t host_port;  /* 0: a free one, chosen when the listener is made */
        uint16_t port;       /* 1-65535, in the sandbox */
} PortSpec;

/* Long enough for "[IPV6]:65535:65535/tcp" plus the NUL. */
#define PORT_SPEC_STRING_MAX 72

/* Parses docker's "[IP:][HOSTPORT:]PORT[/tcp]": IP a dotted quad or an
 * IPv6 address in brackets ("[::1]:8080:80"), default 127.0.0.1; HOSTPORT
 * 0-65535 or empty (0: a free one); PORT 1-65535. Writes @ret only on
 * success. -EINVAL with @reterr naming the spec and what is wrong
 * (-EPROTONOSUPPORT for "/udp" or another protocol). */
int port_spec_parse(const char *text, PortSpec *ret, HutchError *reterr);
/* The canonical text, "IP:HOSTPORT:PORT" ("[IP]:..." for IPv6), into @buf
 * of at least PORT_SPEC_STRING_MAX bytes. The host address alone
 * ("127.0.0.1", "::1") with port_spec_host_to_string(). */
void port_spec_to_string(const PortSpec *s, char *buf, size_t size);
void port_spec_host_to_string(const PortSpec *s, char *buf, size_t size);
/* Whether the host address is a loopback one (127/8, ::1). */
bool port_spec_is_loopback(const PortSpec *s);

/* Parses @spec and appends it in canonical form. -EINVAL (naming it) for a
 * bad spec, -EEXIST when another entry already uses the same sandbox port
 * or the same host address and (non-zero) host port, -E2BIG past
 * POLICY_MAX_PORTS, -ENOMEM. @ctx names the source ("--publish"), or NULL. */
int policy_add_port(Policy *p, const char *spec, const char *ctx, HutchError *reterr);
/* Removes the entries for sandbox port @port. Returns how many went (0:
 * none was there). */
int policy_remove_port(Policy *p, uint16_t port);

/* Writes @p as a compact JSON policy document (docs/policy.md, "Written
 * policies") that policy_load_json() applied to policy_new() turns back into
 * a policy equal to @p in every field, for a @p filled by the setters and
 * loaders above. Keys come in a fixed order; fields at their default (empty
 * lists, unset strings, false) are left out, the network mode is written only
 * when it was set explicitly (network_set) and a limit only when its
 * limits_explicit bit is set, so the others come back as defaults. Secrets
 * are written as their sources, never a value. The paths are written as they
 * are: they are absolute already, so the document reads the same from any
 * current directory.
 *
 * Returns 0 and a NUL-terminated string in @ret that the caller free()s.
 * -EINVAL for a NULL argument or a field the format cannot hold (a workspace
 * or network mode out of range, an env entry without '=' or with an invalid
 * name, a secret with both an env and a file source), -EILSEQ for a string
 * that is not valid UTF-8 (JSON has no way to hold it), -EFBIG when the
 * document would be larger than POLICY_MAX_FILE_SIZE (the loader would
 * refuse it), -ENOMEM. */
int policy_to_json(const Policy *p, char **ret);
