/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch-oci: hutch's network wall for a container, from its io.hutch.*
 * annotations (oci.h, docs/oci.md "hutch's policy in annotations"). */

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "oci.h"
#include "parse-util.h"
#include "policy/policy.h"
#include "sandbox/proxy-spawn.h"
#include "sandbox/sandbox.h"
#include "sandbox/secrets.h"
#include "strv.h"

/* How long `create` waits for hutch-proxy to say it serves. */
#define PROXY_READY_TIMEOUT_MS 10000

typedef int (*AddFn)(Policy *p, const char *entry, const char *ctx, HutchError *reterr);

/* Adds each entry of the annotation @key's @value, split at @seps, with
 * @add. */
static int add_list(Policy *p, const char *key, const char *value, const char *seps, AddFn add,
                    HutchError *reterr) {
        _cleanup_free_ char *copy = strdup(value);
        char *save = NULL, *e;
        size_t n = 0;
        int r;

        if (!copy)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        for (e = strtok_r(copy, seps, &save); e; e = strtok_r(NULL, seps, &save), n++) {
                r = add(p, e, key, reterr);
                if (r < 0)
                        return r;
        }
        if (n == 0)
                return hutch_error_set_pointer(reterr, EINVAL, "/annotations",
                                               "annotation '%s' is empty", key);
        return 0;
}

/* io.hutch.upstream-ca: an AddFn taking only absolute paths (a relative
 * one would depend on where the engine runs hutch-oci). */
static int add_upstream_ca(Policy *p, const char *entry, const char *ctx, HutchError *reterr) {
        if (entry[0] != '/')
                return hutch_error_set_pointer(reterr, EINVAL, "/annotations",
                                               "annotation '%s': '%s' is not an absolute path", ctx,
                                               entry);
        return policy_add_upstream_ca(p, entry, ctx, reterr);
}

/* io.hutch.secret[.ANY]: one --secret spec (docs/secrets.md) whose value
 * comes from a file on the host: the engine's environment is not the
 * user's, and the value must never ride in the config itself. */
static int add_secret(Policy *p, const char *key, const char *value, HutchError *reterr) {
        const char *file = strstr(value, "=file:");
        int r;

        r = policy_add_secret_spec(p, value, reterr);
        if (r < 0)
                return r;
        if (!p->secrets[p->n_secrets - 1].file)
                return hutch_error_set_pointer(reterr, EINVAL, "/annotations",
                                               "annotation '%s': secret '%s' must take its value "
                                               "from a file on the host (NAME=file:/PATH@HOST): "
                                               "hutch-oci does not read the engine's environment",
                                               key, p->secrets[p->n_secrets - 1].name);
        /* A relative path would depend on where the engine runs us. */
        if (!file || file[6] != '/')
                return hutch_error_set_pointer(reterr, EINVAL, "/annotations",
                                               "annotation '%s': secret '%s': the file must be an "
                                               "absolute path",
                                               key, p->secrets[p->n_secrets - 1].name);
        return 0;
}

int oci_net_from_annotations(json_t *annotations, Policy **ret, HutchError *reterr) {
        _cleanup_(policy_freep) Policy *p = NULL;
        bool any = false;
        const char *key;
        json_t *v;
        int r;

        json_object_foreach(annotations, key, v) {
                const char *s = json_string_value(v);

                /* io.hutch.timeout is the container's, not the wall's
                 * (oci_timeout_from_annotations()). */
                if (strncmp(key, "io.hutch.", 9) != 0 || strcmp(key, "io.hutch.timeout") == 0)
                        continue;
                if (!s)
                        return hutch_error_set_pointer(reterr, EINVAL, "/annotations",
                                                       "annotation '%s' must be a string", key);
                if (!p && !(p = policy_new()))
                        return hutch_error_set(reterr, ENOMEM, "out of memory");
                /* Hosts, CIDRs: comma-separated as engines' flags write
                 * lists; --resolve entries hold commas themselves, so they
                 * are separated by ';'. */
                if (strcmp(key, "io.hutch.allow-host") == 0) {
                        r = add_list(p, key, s, ", \t", policy_add_allow_host, reterr);
                        any = true;
                } else if (strcmp(key, "io.hutch.deny-host") == 0)
                        r = add_list(p, key, s, ", \t", policy_add_deny_host, reterr);
                else if (strcmp(key, "io.hutch.allow-private") == 0)
                        r = add_list(p, key, s, ", \t", policy_add_allow_private, reterr);
                else if (strcmp(key, "io.hutch.resolve") == 0)
                        r = add_list(p, key, s, "; \t", policy_add_resolve, reterr);
                else if (strcmp(key, "io.hutch.upstream-ca") == 0)
                        r = add_list(p, key, s, ", \t", add_upstream_ca, reterr);
                else if (strcmp(key, "io.hutch.secret") == 0 ||
                         strncmp(key, "io.hutch.secret.", 16) == 0) {
                        r = add_secret(p, key, s, reterr);
                        any = true;
                } else if (strcmp(key, "io.hutch.audit-log") == 0) {
                        r = s[0] == '/' ? policy_set_audit_log(p, s, reterr)
                                        : hutch_error_set_pointer(
                                                  reterr, EINVAL, "/annotations",
                                                  "annotation '%s' must be an absolute path", key);
                } else
                        /* A wall or a secret asked for and not there would
                         * be a silent downgrade. */
                        r = hutch_error_set_pointer(
                                reterr, EOPNOTSUPP, "/annotations",
                                "annotation '%s' is not supported by hutch-oci (docs/oci.md lists "
                                "the io.hutch.* annotations it applies)",
                                key);
                if (r < 0)
                        return r;
        }
        if (p && !any)
                return hutch_error_set_pointer(reterr, EINVAL, "/annotations",
                                               "the io.hutch.* network annotations need "
                                               "io.hutch.allow-host or io.hutch.secret (without "
                                               "them the container has no proxy to apply them to)");
        *ret = TAKE_PTR(p);
        return 0;
}

int oci_timeout_from_annotations(json_t *annotations, uint64_t *ret_ms, HutchError *reterr) {
        json_t *v = json_object_get(annotations, "io.hutch.timeout");

        *ret_ms = 0;
        if (!v)
                return 0;
        if (!json_is_string(v) || parse_duration_ms(json_string_value(v), ret_ms) < 0)
                return hutch_error_set_pointer(reterr, EINVAL, "/annotations",
                                               "annotation 'io.hutch.timeout' must be a duration "
                                               "(500ms, 30s, 5m, 1h; 0 = none)");
        return 0;
}

/* Appends "@key=@value" to @list. 0 or -ENOMEM. */
static int env_line(json_t *list, const char *key, const char *value) {
        _cleanup_free_ char *line = NULL;

        if (asprintf(&line, "%s=%s", key, value) < 0)
                return -ENOMEM;
        return json_array_append_new(list, json_string(line)) < 0 ? -ENOMEM : 0;
}

int oci_net_env_plan(const SecretSet *secrets, json_t **ret) {
        static const char *const proxy_vars[] = {
                "HTTP_PROXY",  "HTTPS_PROXY", "ALL_PROXY", "http_proxy",
                "https_proxy", "all_proxy",   "NO_PROXY",  "no_proxy",
        };
        json_t *plan = json_pack("{s:[], s:[]}", "default", "set"), *def, *set;
        char url[64];
        int r = 0;

        if (!plan)
                return -ENOMEM;
        def = json_object_get(plan, "default");
        set = json_object_get(plan, "set");
        (void)snprintf(url, sizeof(url), "http://127.0.0.1:%d", SANDBOX_PROXY_PORT);
        for (size_t k = 0; r >= 0 && k < ELEMENTSOF(proxy_vars); k++)
                r = env_line(def, proxy_vars[k],
                             strncasecmp(proxy_vars[k], "no_", 3) == 0 ? "localhost,127.0.0.1,::1"
                                                                       : url);
        for (size_t k = 0; r >= 0 && secrets && secret_ca_env_vars[k]; k++)
                r = env_line(def, secret_ca_env_vars[k], SANDBOX_CA_BUNDLE_PATH);
        if (r >= 0 && secrets)
                r = env_line(def, "SSL_CERT_DIR", SANDBOX_CA_DIR ":/etc/ssl/certs");
        for (size_t k = 0; r >= 0 && secrets && k < secrets->n; k++)
                r = env_line(set, secrets->items[k].def->name, secrets->items[k].placeholder);
        if (r < 0) {
                json_decref(plan);
                return r;
        }
        *ret = plan;
        return 0;
}

/* The index in @env (an array of "K=V") of the entry for the variable of
 * @line ("K=..."), or -1. */
static ssize_t env_find(json_t *env, const char *line) {
        size_t n = strcspn(line, "="), i;
        json_t *e;

        json_array_foreach(env, i, e) {
                const char *s = json_string_value(e);

                if (s && strncmp(s, line, n) == 0 && s[n] == '=')
                        return (ssize_t)i;
        }
        return -1;
}

int oci_net_env_apply(json_t *process, json_t *plan) {
        json_t *env = json_object_get(process, "env"), *e;
        size_t i;

        if (!env) {
                env = json_array();
                if (!env || json_object_set_new(process, "env", env) < 0)
                        return -ENOMEM;
        }
        /* The config's own value wins for these: an engine or a user who
         * set one meant it (the wall holds either way: the proxy is the
         * only way out). */
        json_array_foreach(json_object_get(plan, "default"), i,
                           e) if (env_find(env, json_string_value(e)) < 0 &&
                                  json_array_append(env, e) < 0) return -ENOMEM;
        /* A secret's placeholder wins: a value of the config's under that
         * name would be what the proxy sees and sends. */
        json_array_foreach(json_object_get(plan, "set"), i, e) {
                ssize_t k = env_find(env, json_string_value(e));

                if (k >= 0 ? json_array_set(env, (size_t)k, e) < 0 : json_array_append(env, e) < 0)
                        return -ENOMEM;
        }
        return 0;
}

int oci_net_listen(int ret_fds[2], char *iface, size_t iface_size, char *what, size_t what_size) {
        _cleanup_close_ int v4 = -EBADF, v6 = -EBADF;
        struct if_nameindex *ifs;
        int r = 0;

        /* SECURITY: the proxy is the wall only if it is the only way out.
         * An interface the engine or a CNI plugin gave the namespace (a
         * bridge, slirp, pasta, a pod network) would let the container go
         * around it: it is reported, and `create` puts a netfilter wall
         * in front of it (oci_net_wall()) or refuses. */
        ifs = if_nameindex();
        if (!ifs) {
                (void)snprintf(what, what_size, "list the network interfaces");
                return negative_errno();
        }
        iface[0] = '\0';
        for (struct if_nameindex *i = ifs; i->if_index != 0; i++)
                if (strcmp(i->if_name, "lo") != 0) {
                        (void)snprintf(iface, iface_size, "%s", i->if_name);
                        break;
                }
        if_freenameindex(ifs);
        r = proxy_listen_loopback(AF_INET, &v4);
        if (r < 0) {
                (void)snprintf(what, what_size, "listen on 127.0.0.1:%d", SANDBOX_PROXY_PORT);
                return r;
        }
        /* A kernel without IPv6 (or with it disabled) has no ::1. */
        r = proxy_listen_loopback(AF_INET6, &v6);
        if (r < 0 && r != -EAFNOSUPPORT && r != -EADDRNOTAVAIL) {
                (void)snprintf(what, what_size, "listen on [::1]:%d", SANDBOX_PROXY_PORT);
                return r;
        }
        ret_fds[0] = TAKE_FD(v4);
        ret_fds[1] = TAKE_FD(v6);
        return 0;
}

/* Where nft may be: engines run runtimes with a short PATH, and hutch-oci
 * runs it as root, so never from a directory the caller names. */
static const char *const nft_paths[] = {"/usr/sbin/nft", "/sbin/nft", "/usr/bin/nft", NULL};

/* Whether @process (config.json's) holds @cap in any capability set. */
static bool process_has_cap(json_t *process, const char *cap) {
        static const char *const sets[] = {"bounding", "effective", "inheritable", "permitted",
                                           "ambient"};
        json_t *caps = json_object_get(process, "capabilities"), *v;
        size_t i;

        for (size_t k = 0; k < ELEMENTSOF(sets); k++)
                json_array_foreach(json_object_get(caps, sets[k]), i, v) {
                        const char *s = json_string_value(v);

                        if (s && strcmp(s, cap) == 0)
                                return true;
                }
        return false;
}

/* The wall: in the container's network namespace, everything leaving by
 * any interface but lo is dropped, except the answers of connections that
 * came in (a pod's probes and services keep working). The table is
 * replaced whole, in one transaction, if a container of the same pod made
 * it before. */
static const char wall_ruleset[] = "table inet hutch_oci_wall\n"
                                   "delete table inet hutch_oci_wall\n"
                                   "table inet hutch_oci_wall {\n"
                                   "\tchain output {\n"
                                   "\t\ttype filter hook output priority filter; policy drop;\n"
                                   "\t\toifname \"lo\" accept\n"
                                   "\t\tct state established,related accept\n"
                                   "\t}\n"
                                   "}\n";

int oci_net_wall(pid_t init_pid, const char *iface, json_t *process, HutchError *reterr) {
        _cleanup_close_ int netns = -EBADF;
        const char *nft = NULL;
        char path[64], err[512] = "";
        int in[2], out[2], status;
        ssize_t n;
        pid_t pid;

        /* SECURITY: these would let the container take the wall down. */
        if (process_has_cap(process, "CAP_NET_ADMIN") || process_has_cap(process, "CAP_SYS_ADMIN"))
                return hutch_error_set_pointer(reterr, EPERM, "/process/capabilities",
                                               "io.hutch.allow-host in a network namespace with "
                                               "'%s' needs the container without CAP_NET_ADMIN "
                                               "and CAP_SYS_ADMIN (they could lift hutch's wall "
                                               "in front of it)",
                                               iface);
        for (size_t i = 0; nft_paths[i] && !nft; i++)
                if (access(nft_paths[i], X_OK) == 0)
                        nft = nft_paths[i];
        if (!nft)
                return hutch_error_set(reterr, ENOENT,
                                       "io.hutch.allow-host in a network namespace with '%s' "
                                       "needs nft (Debian's package nftables) for hutch's wall "
                                       "in front of it",
                                       iface);
        (void)snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)init_pid);
        netns = open(path, O_RDONLY | O_CLOEXEC);
        if (netns < 0)
                return hutch_error_set(reterr, errno, "cannot open %s: %m", path);
        if (pipe2(in, O_CLOEXEC) < 0)
                return hutch_error_set(reterr, errno, "pipe: %m");
        if (pipe2(out, O_CLOEXEC) < 0) {
                (void)close(in[0]);
                (void)close(in[1]);
                return hutch_error_set(reterr, errno, "pipe: %m");
        }
        pid = fork();
        if (pid == 0) {
                char *argv[] = {(char *)"nft", (char *)"-f", (char *)"-", NULL};
                char *envp[] = {NULL};

                if (setns(netns, CLONE_NEWNET) < 0 || dup2(in[0], STDIN_FILENO) < 0 ||
                    dup2(out[1], STDOUT_FILENO) < 0 || dup2(out[1], STDERR_FILENO) < 0)
                        _exit(127);
                execve(nft, argv, envp);
                _exit(127);
        }
        (void)close(in[0]);
        (void)close(out[1]);
        if (pid > 0)
                (void)loop_write(in[1], wall_ruleset, sizeof(wall_ruleset) - 1);
        (void)close(in[1]);
        n = pid > 0 ? read(out[0], err, sizeof(err) - 1) : 0;
        (void)close(out[0]);
        if (pid < 0)
                return hutch_error_set(reterr, errno, "fork: %m");
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return hutch_error_set(reterr, errno, "waitpid: %m");
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                err[n > 0 ? n : 0] = '\0';
                err[strcspn(err, "\n")] = '\0';
                return hutch_error_set(reterr, EIO,
                                       "cannot put hutch's wall in front of '%s' (%s: %s)", iface,
                                       nft, err[0] ? err : "failed");
        }
        return 0;
}

int oci_recv_fds(int sock, char *buf, size_t size, int *fds, size_t max_fds, size_t *ret_n_fds) {
        char control[CMSG_SPACE(sizeof(int) * 4)] = {};
        struct iovec iov = {.iov_base = buf, .iov_len = size};
        struct msghdr mh = {.msg_iov = &iov,
                            .msg_iovlen = 1,
                            .msg_control = control,
                            .msg_controllen = sizeof(control)};
        ssize_t n;

        *ret_n_fds = 0;
        n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
        if (n < 0)
                return negative_errno();
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
                size_t k;

                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < k; i++) {
                        int fd;

                        memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                        if (*ret_n_fds < max_fds)
                                fds[(*ret_n_fds)++] = fd;
                        else
                                (void)close(fd);
                }
        }
        if (mh.msg_flags & MSG_CTRUNC)
                return -EMSGSIZE;
        return (int)n;
}

/* Appends @a and, when not NULL, @b. */
static int argv_add(char ***argv, const char *a, const char *b) {
        int r = strv_extend(argv, a);

        if (r < 0 || !b)
                return r;
        return strv_extend(argv, b);
}

/* Appends "--FLAG N" for the proxy's fd at @index of its fd list (the
 * daemon puts the list at 3, 4, ...). */
static int argv_add_fd(char ***argv, const char *flag, size_t index) {
        char n[12];

        (void)snprintf(n, sizeof(n), "%zu", 3 + index);
        return argv_add(argv, flag, n);
}

/* hutch-proxy's command line for the fd list @src of @n_src entries: the
 * listening sockets first (@two: both), then the watch pidfd and the
 * ready pipe, then (@secrets) the --config-fd document and the
 * --ca-out-fd pipe. */
static int proxy_argv(const char *binary, const Policy *p, const char *id, bool two, bool secrets,
                      char ***ret) {
        _cleanup_strv_free_ char **argv = NULL;
        size_t k = two ? 2 : 1;
        int r;

        r = argv_add(&argv, binary, NULL);
        if (r >= 0)
                r = argv_add_fd(&argv, "--listen-fd", 0);
        if (r >= 0 && two)
                r = argv_add_fd(&argv, "--listen-fd", 1);
        if (r >= 0)
                r = argv_add_fd(&argv, "--watch-fd", k);
        if (r >= 0)
                r = argv_add_fd(&argv, "--ready-fd", k + 1);
        if (r >= 0)
                r = argv_add(&argv, "--sandbox-id", id);
        if (r >= 0)
                r = proxy_argv_policy(&argv, p);
        if (r >= 0 && secrets)
                r = argv_add_fd(&argv, "--config-fd", k + 2);
        if (r >= 0 && secrets)
                r = argv_add_fd(&argv, "--ca-out-fd", k + 3);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(argv);
        return 0;
}

/* In the daemon: the fds in @src go to 3, 4, ...; stdin and stdout to
 * /dev/null, stderr to @log_fd (or /dev/null); then hutch-proxy. */
_Noreturn static void proxy_exec(char **argv, const int *src, size_t n, int log_fd) {
        int high[6], devnull;

        for (size_t i = 0; i < n; i++) {
                high[i] = fcntl(src[i], F_DUPFD, 100);
                if (high[i] < 0)
                        _exit(127);
        }
        for (size_t i = 0; i < n; i++)
                if (dup2(high[i], 3 + (int)i) < 0)
                        _exit(127);
        devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (devnull < 0 || dup2(devnull, STDIN_FILENO) < 0 || dup2(devnull, STDOUT_FILENO) < 0 ||
            dup2(log_fd >= 0 ? log_fd : devnull, STDERR_FILENO) < 0)
                _exit(127);
        (void)close_range(3 + (unsigned)n, ~0U, 0);
        (void)execv(argv[0], argv);
        _exit(127);
}

int oci_net_proxy_start(const Policy *p, const char *id, pid_t init_pid, const int fds[2],
                        int log_fd, int config_fd, int ca_out_fd, HutchError *reterr) {
        _cleanup_free_ char *binary = NULL;
        _cleanup_strv_free_ char **argv = NULL;
        _cleanup_close_ int pidfd = -EBADF, ready_r = -EBADF, ready_w = -EBADF;
        bool two = fds[1] >= 0, secrets = config_fd >= 0 && ca_out_fd >= 0;
        int pipefd[2], src[6], status, r;
        size_t n_src = 0;
        struct pollfd pfd;
        char buf[16] = {};
        ssize_t n;
        pid_t pid;

        r = proxy_binary_find(&binary, reterr);
        if (r < 0)
                return r;
        r = proxy_argv(binary, p, id, two, secrets, &argv);
        if (r < 0)
                return hutch_error_set(reterr, -r, "out of memory");
        pidfd = (int)syscall(SYS_pidfd_open, init_pid, 0);
        if (pidfd < 0)
                return hutch_error_set(reterr, errno, "cannot watch the container's init: %m");
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return hutch_error_set(reterr, errno, "pipe: %m");
        ready_r = pipefd[0];
        ready_w = pipefd[1];
        src[n_src++] = fds[0];
        if (two)
                src[n_src++] = fds[1];
        src[n_src++] = pidfd;
        src[n_src++] = ready_w;
        if (secrets) {
                src[n_src++] = config_fd;
                src[n_src++] = ca_out_fd;
        }

        /* The proxy outlives `create` (the engine's shim, not hutch-oci,
         * waits for the container): a daemon of its own session, which
         * exits when the container's init does (its watch fd is the
         * init's pidfd) and holds none of the engine's pipes. */
        pid = fork();
        if (pid < 0)
                return hutch_error_set(reterr, errno, "fork: %m");
        if (pid == 0) {
                if (setsid() < 0)
                        _exit(127);
                pid = fork();
                if (pid < 0)
                        _exit(127);
                if (pid == 0)
                        proxy_exec(argv, src, n_src, log_fd);
                _exit(0);
        }
        if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return hutch_error_set(reterr, ECHILD, "failed to start hutch-proxy");
        ready_w = safe_close(ready_w);
        pfd = (struct pollfd){.fd = ready_r, .events = POLLIN};
        r = poll(&pfd, 1, PROXY_READY_TIMEOUT_MS);
        if (r <= 0)
                return hutch_error_set(reterr, ETIMEDOUT,
                                       "hutch-proxy did not get ready within %d s",
                                       PROXY_READY_TIMEOUT_MS / 1000);
        n = read(ready_r, buf, sizeof(buf) - 1);
        if (n <= 0 || strncmp(buf, "ready", 5) != 0)
                return hutch_error_set(reterr, EIO,
                                       "hutch-proxy exited before serving (its error is in the "
                                       "--log file, if the engine gave one)");
        return 0;
}
