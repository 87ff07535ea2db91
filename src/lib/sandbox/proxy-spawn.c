/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "sandbox/proxy-spawn.h"
#include "sandbox/sandbox.h"
#include "strv.h"

#ifndef HUTCH_INSTALLED_PROXY
#define HUTCH_INSTALLED_PROXY "/usr/local/libexec/hutch/hutch-proxy"
#endif

#define PROXY_STOP_TIMEOUT_MS 3000
#define PROXY_SUMMARY_MAX (1U << 20)
/* Where the proxy finds its descriptors: listening sockets from 3 on,
 * then the watch and summary pipes. */
#define PROXY_FIRST_FD 3

int proxy_listen_loopback(int family, int *ret_fd) {
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_storage ss = {};
        socklen_t len;
        int one = 1;

        fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return negative_errno();
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (family == AF_INET6) {
                struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

                (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
                sin6->sin6_family = AF_INET6;
                sin6->sin6_port = htons(SANDBOX_PROXY_PORT);
                sin6->sin6_addr = in6addr_loopback;
                len = sizeof(*sin6);
        } else {
                struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

                sin->sin_family = AF_INET;
                sin->sin_port = htons(SANDBOX_PROXY_PORT);
                sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                len = sizeof(*sin);
        }
        if (bind(fd, (struct sockaddr *)&ss, len) < 0)
                return negative_errno();
        if (listen(fd, SOMAXCONN) < 0)
                return negative_errno();
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int proxy_binary_find(char **ret, HutchError *reterr) {
        int r = shipped_binary_find("HUTCH_PROXY_PATH", "hutch-proxy", "proxy", X_OK,
                                    HUTCH_INSTALLED_PROXY, ret);

        if (r == -EACCES)
                return hutch_error_set(reterr, ENOENT,
                                       "$HUTCH_PROXY_PATH '%s' is not an executable",
                                       getenv("HUTCH_PROXY_PATH"));
        if (r == -ENOENT)
                return hutch_error_set(reterr, ENOENT,
                                       "network mode allow needs hutch-proxy, which is not next "
                                       "to hutch (install it there or set $HUTCH_PROXY_PATH)");
        if (r < 0)
                return hutch_error_set(reterr, -r, "failed to find hutch-proxy: %s", strerror(-r));
        return 0;
}

static int argv_add(char ***argv, const char *flag, const char *value) {
        int r = strv_extend(argv, flag);

        if (r < 0 || !value)
                return r;
        return strv_extend(argv, value);
}

static int argv_add_list(char ***argv, const char *flag, char **values) {
        STRV_FOREACH(v, values) {
                int r = argv_add(argv, flag, *v);

                if (r < 0)
                        return r;
        }
        return 0;
}

static int argv_add_fd(char ***argv, const char *flag, size_t fd) {
        char num[16];

        (void)snprintf(num, sizeof(num), "%zu", fd);
        return argv_add(argv, flag, num);
}

int proxy_argv_policy(char ***argv, const Policy *p) {
        int r;

        r = argv_add_list(argv, "--allow", p->allow_hosts);
        if (r >= 0)
                r = argv_add_list(argv, "--deny", p->deny_hosts);
        if (r >= 0)
                r = argv_add_list(argv, "--allow-private", p->allow_private);
        if (r >= 0)
                r = argv_add_list(argv, "--resolve", p->resolve);
        if (r >= 0 && p->audit_log)
                r = argv_add(argv, "--audit-log", p->audit_log);
        /* A secret's hosts are allowed; its value travels only in the
         * configuration memfd, never in argv. */
        for (size_t i = 0; r >= 0 && i < p->n_secrets; i++)
                r = argv_add_list(argv, "--allow", p->secrets[i].hosts);
        if (r >= 0)
                r = argv_add_list(argv, "--upstream-ca", p->upstream_ca);
        if (r >= 0 && p->dns_transparent)
                r = argv_add(argv, "--dns-transparent", NULL);
        return r;
}

/* The proxy's descriptors, from PROXY_FIRST_FD on: the listen-fds socket,
 * the watch pipe, the summary pipe, then with secrets the config memfd and
 * the CA pipe. */
static int proxy_argv(const char *binary, const Policy *p, const char *sandbox_id, bool secrets,
                      char ***ret) {
        _cleanup_strv_free_ char **argv = NULL;
        int r;

        r = strv_extend(&argv, binary);
        if (r >= 0)
                r = argv_add_fd(&argv, "--listen-fds-socket", PROXY_FIRST_FD);
        if (r >= 0)
                r = argv_add_fd(&argv, "--watch-fd", PROXY_FIRST_FD + 1);
        if (r >= 0)
                r = argv_add_fd(&argv, "--summary-fd", PROXY_FIRST_FD + 2);
        if (r >= 0)
                r = argv_add(&argv, "--sandbox-id", sandbox_id);
        if (r >= 0)
                r = proxy_argv_policy(&argv, p);
        if (r >= 0 && secrets)
                r = argv_add_fd(&argv, "--config-fd", PROXY_FIRST_FD + 3);
        if (r >= 0 && secrets)
                r = argv_add_fd(&argv, "--ca-out-fd", PROXY_FIRST_FD + 4);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(argv);
        return 0;
}

/* In the forked child: put @src[i] at PROXY_FIRST_FD + i, close the rest,
 * and exec. Never returns. */
_noreturn_ static void proxy_exec(char **argv, const int *src, size_t n) {
        int high[8];
        int devnull;

        /* The proxy dies with the supervisor, like the sandbox. */
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        for (size_t i = 0; i < n; i++) {
                high[i] = fcntl(src[i], F_DUPFD, 100);
                if (high[i] < 0)
                        _exit(127);
        }
        for (size_t i = 0; i < n; i++)
                if (dup2(high[i], PROXY_FIRST_FD + (int)i) < 0)
                        _exit(127);
        (void)close_range(PROXY_FIRST_FD + (unsigned)n, ~0U, 0);
        /* The proxy writes nothing to stdout; keep the command's output
         * clean whatever it does. */
        devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (devnull >= 0) {
                (void)dup2(devnull, STDIN_FILENO);
                (void)dup2(devnull, STDOUT_FILENO);
        }
        (void)execv(argv[0], argv);
        (void)dprintf(STDERR_FILENO, "hutch: failed to run '%s': %s\n", argv[0], strerror(errno));
        _exit(127);
}

int proxy_spawn(const char *binary, const Policy *p, const char *sandbox_id, int config_fd,
                int ca_out_fd, ProxyProcess *ret, HutchError *reterr) {
        bool secrets = config_fd >= 0 && ca_out_fd >= 0;
        _cleanup_strv_free_ char **argv = NULL;
        _cleanup_close_ int watch_r = -EBADF, watch_w = -EBADF, sum_r = -EBADF, sum_w = -EBADF,
                            sock_parent = -EBADF, sock_child = -EBADF, pidfd = -EBADF;
        int pipes[2], all[5];
        pid_t pid;
        int r;

        r = proxy_argv(binary, p, sandbox_id, secrets, &argv);
        if (r < 0)
                return hutch_error_set(reterr, -r, "out of memory");
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pipes) < 0)
                return hutch_error_set(reterr, errno, "failed to create the proxy's socket: %m");
        sock_parent = pipes[0];
        sock_child = pipes[1];
        if (pipe2(pipes, O_CLOEXEC) < 0)
                return hutch_error_set(reterr, errno, "failed to create the proxy's pipes: %m");
        watch_r = pipes[0];
        watch_w = pipes[1];
        if (pipe2(pipes, O_CLOEXEC) < 0)
                return hutch_error_set(reterr, errno, "failed to create the proxy's pipes: %m");
        sum_r = pipes[0];
        sum_w = pipes[1];
        all[0] = sock_child;
        all[1] = watch_r;
        all[2] = sum_w;
        all[3] = config_fd;
        all[4] = ca_out_fd;

        pid = fork();
        if (pid < 0)
                return hutch_error_set(reterr, errno, "failed to start hutch-proxy: %m");
        if (pid == 0)
                proxy_exec(argv, all, secrets ? 5 : 3);

        pidfd = pidfd_open(pid, 0);
        if (pidfd < 0) {
                r = errno;
                (void)kill(pid, SIGKILL);
                (void)waitpid(pid, NULL, 0);
                return hutch_error_set(reterr, r, "failed to watch hutch-proxy: %s", strerror(r));
        }
        *ret = (ProxyProcess){
                .pid = pid,
                .pidfd = TAKE_FD(pidfd),
                .watch_fd = TAKE_FD(watch_w),
                .summary_fd = TAKE_FD(sum_r),
                .listen_socket = TAKE_FD(sock_parent),
        };
        return 0;
}

int proxy_hand_sockets(ProxyProcess *pp, const int *fds, size_t n_fds) {
        char byte = 0;
        int r;

        if (pp->listen_socket < 0)
                return -EBADF;
        r = send_with_fds(pp->listen_socket, &byte, 1, fds, n_fds);
        /* The socket stays: proxy_set_policy() uses it. */
        if (r < 0)
                pp->listen_socket = safe_close(pp->listen_socket);
        return r;
}

/* The proxy's live policy document (its "allow", "deny", "allow_private"
 * and "resolve" keys), as proxy_argv_policy() gives them at start. */
static int policy_document(const Policy *p, char **ret) {
        json_t *doc =
                json_pack("{s:[],s:[],s:[],s:[]}", "allow", "deny", "allow_private", "resolve");
        int r = doc ? 0 : -ENOMEM;
        char *text;

#define ADD_ALL(key, list)                                                                         \
        STRV_FOREACH(v, list)                                                                      \
                if (r >= 0 &&                                                                      \
                    json_array_append_new(json_object_get(doc, key), json_string(*v)) < 0)         \
                        r = -ENOMEM;
        if (r >= 0) {
                ADD_ALL("allow", p->allow_hosts)
                for (size_t i = 0; i < p->n_secrets; i++) {
                        ADD_ALL("allow", p->secrets[i].hosts)
                }
                ADD_ALL("deny", p->deny_hosts)
                ADD_ALL("allow_private", p->allow_private)
                ADD_ALL("resolve", p->resolve)
        }
#undef ADD_ALL
        text = r >= 0 ? json_dumps(doc, JSON_COMPACT) : NULL;
        json_decref(doc);
        if (!text)
                return -ENOMEM;
        *ret = text;
        return 0;
}

int proxy_set_policy(ProxyProcess *pp, const Policy *p, HutchError *reterr) {
        _cleanup_free_ char *text = NULL;
        _cleanup_close_ int fd = -EBADF;
        struct pollfd pfd;
        char reply[640];
        ssize_t n;
        int r;

        if (pp->pid <= 0 || pp->listen_socket < 0)
                return hutch_error_set(reterr, ENOTCONN,
                                       "the sandbox's hutch-proxy takes no policy changes");
        r = policy_document(p, &text);
        if (r < 0)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        fd = memfd_create("hutch-proxy-policy", MFD_CLOEXEC);
        if (fd < 0)
                return hutch_error_set(reterr, errno, "failed to create a memfd: %m");
        r = loop_write(fd, text, strlen(text));
        if (r < 0)
                return hutch_error_set(reterr, -r, "failed to write the policy: %s", strerror(-r));
        r = send_with_fds(pp->listen_socket, "policy", strlen("policy"), &fd, 1);
        if (r < 0)
                return hutch_error_set(reterr, -r, "failed to send hutch-proxy its policy: %s",
                                       strerror(-r));
        /* The proxy answers at once (it only parses and swaps). */
        pfd = (struct pollfd){.fd = pp->listen_socket, .events = POLLIN};
        do
                r = poll(&pfd, 1, PROXY_STOP_TIMEOUT_MS);
        while (r < 0 && errno == EINTR);
        if (r <= 0)
                return hutch_error_set(reterr, ETIMEDOUT,
                                       "hutch-proxy did not confirm the new policy");
        n = recv(pp->listen_socket, reply, sizeof(reply) - 1, 0);
        if (n <= 0)
                return hutch_error_set(reterr, EPIPE, "hutch-proxy did not confirm the new policy");
        reply[n] = '\0';
        if (strcmp(reply, "ok") == 0)
                return 0;
        return hutch_error_set(reterr, EINVAL, "hutch-proxy refused the new policy: %s",
                               strncmp(reply, "error: ", 7) == 0 ? reply + 7 : reply);
}

/* Extracts the compact "denied" array from the summary line. */
static int summary_denied(const char *text, char **ret) {
        json_t *root, *denied;
        char *s;

        root = json_loads(text, JSON_DISABLE_EOF_CHECK, NULL);
        denied = root ? json_object_get(root, "denied") : NULL;
        s = json_is_array(denied) ? json_dumps(denied, JSON_COMPACT) : strdup("[]");
        json_decref(root);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

int proxy_stop(ProxyProcess *pp, char **ret_denied) {
        _cleanup_free_ char *summary = NULL;
        ssize_t n = -ENOMEM;

        if (pp->pid <= 0)
                return -ESRCH;
        pp->watch_fd = safe_close(pp->watch_fd);
        pp->listen_socket = safe_close(pp->listen_socket);

        /* The summary is the proxy's last act (the audit log is written
         * unbuffered before it): read it to EOF, then end the process rather
         * than wait for its library teardown. A summary that did not come
         * whole (time out, too large) counts as no denials. */
        summary = malloc(PROXY_SUMMARY_MAX + 1);
        if (summary)
                n = read_until_eof(pp->summary_fd, summary, PROXY_SUMMARY_MAX,
                                   PROXY_STOP_TIMEOUT_MS);
        pp->summary_fd = safe_close(pp->summary_fd);
        (void)pidfd_send_signal(pp->pidfd, SIGKILL, NULL, 0);
        (void)waitpid(pp->pid, NULL, 0);
        pp->pid = 0;
        pp->pidfd = safe_close(pp->pidfd);
        if (!summary)
                return -ENOMEM;
        summary[n < 0 ? 0 : n] = '\0';
        return summary_denied(summary, ret_denied);
}
