/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "audit.h"
#include "fd-util.h"
#include "log.h"
#include "proxy-config.h"
#include "proxy-server.h"
#include "tls-mint.h"

/* hutch-proxy: the egress proxy of one sandbox. It runs in the host's
 * network namespace and accepts on sockets the supervisor created inside
 * the sandbox's (docs/network.md has the interface). Exit codes: 0 after
 * SIGTERM/SIGINT/SIGHUP, the parent's death or the watch fd firing (the
 * summary line is written first); 125 for a bad configuration; 1 for a
 * failure to start. */

#define EXIT_CONFIG 125

static void stop_cb(evutil_socket_t fd, short what, void *arg) {
        struct event_base *base = arg;

        (void)event_base_loopbreak(base);
}

/* A listening socket, or with --dns-transparent also a datagram socket
 * (the sandbox's resolver). */
static int check_listen_fd(int fd, bool dgram_ok) {
        int listening = 0, type = 0, flags;
        socklen_t len = sizeof(listening), tlen = sizeof(type);

        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) < 0)
                return negative_errno();
        if (type == SOCK_DGRAM && !dgram_ok)
                return -EINVAL;
        if (type != SOCK_DGRAM) {
                if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) < 0)
                        return negative_errno();
                if (!listening)
                        return -EINVAL;
        }
        flags = fcntl(fd, F_GETFL);
        if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
                return negative_errno();
        return 0;
}

static void set_cloexec(int fd);

/* Each listening fd must be a listening socket; made non-blocking and
 * CLOEXEC. Logs and returns -errno otherwise. */
static int check_listen_fds(const ProxyConfig *cfg) {
        for (size_t i = 0; i < cfg->n_listen_fds; i++) {
                int r = check_listen_fd(cfg->listen_fds[i], cfg->dns_transparent);

                if (r < 0)
                        return log_error_errno(r, "--listen-fd %d is not a listening socket: %m",
                                               cfg->listen_fds[i]);
                set_cloexec(cfg->listen_fds[i]);
        }
        return 0;
}

static void set_cloexec(int fd) {
        int flags;

        if (fd < 0)
                return;
        flags = fcntl(fd, F_GETFD);
        if (flags >= 0)
                (void)fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

/* Every tunnel holds two sockets and four pipe ends. */
static void raise_nofile(void) {
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= rl.rlim_max)
                return;
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
}

static int open_audit(const ProxyConfig *cfg) {
        int fd;

        if (cfg->audit_fd >= 0)
                return cfg->audit_fd;
        if (!cfg->audit_path)
                return -EBADF;
        fd = open(cfg->audit_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600);
        if (fd < 0)
                return negative_errno();
        return fd;
}

/* After the PEM block in @pem (readers skip text outside it): the hash
 * name of the CA for an SSL_CERT_DIR-style directory. */
static int append_subject_hash(char **pem, size_t *len, unsigned long hash) {
        size_t room = 32;
        char *grown;
        int n;

        grown = realloc(*pem, *len + room);
        if (!grown)
                return -ENOMEM;
        *pem = grown;
        n = snprintf(grown + *len, room, "# subject-hash: %08lx\n", hash);
        if (n < 0 || (size_t)n >= room)
                return -EINVAL;
        *len += (size_t)n;
        return 0;
}

/* With secrets: the sandbox CA, whose certificate goes to --ca-out-fd
 * before anything is accepted. Without: --ca-out-fd is closed empty. */
static int setup_mint(const ProxyConfig *cfg, TlsMint **ret) {
        _cleanup_free_ char *pem = NULL;
        char msg[512];
        size_t len;
        int r;

        *ret = NULL;
        if (cfg->n_secrets == 0) {
                if (cfg->ca_out_fd >= 0)
                        (void)close(cfg->ca_out_fd);
                return 0;
        }
        r = tls_mint_new(cfg->sandbox_id, cfg->upstream_ca, ret, msg, sizeof(msg));
        if (r < 0)
                return log_error_errno(r, "%s", msg);
        if (cfg->ca_out_fd >= 0) {
                r = tls_mint_ca_pem(*ret, &pem, &len);
                if (r >= 0)
                        r = append_subject_hash(&pem, &len, tls_mint_ca_subject_hash(*ret));
                /* One write, which the sandbox's start waits for; then the
                 * TLS contexts. */
                if (r >= 0)
                        r = loop_write(cfg->ca_out_fd, pem, len);
                (void)close(cfg->ca_out_fd);
                if (r < 0)
                        return log_error_errno(
                                r, "failed to write the CA certificate to --ca-out-fd: %m");
        }
        r = tls_mint_prepare(*ret, msg, sizeof(msg));
        if (r < 0)
                return log_error_errno(r, "%s", msg);
        return 0;
}

/* --listen-fds-socket: the supervisor starts the proxy before the sandbox
 * exists (its OpenSSL start-up then overlaps the sandbox's), and sends the
 * listening sockets once the sandbox made them. They come after the CA
 * certificate was written, which the supervisor reads first. */
static int receive_listen_fds(ProxyConfig *cfg) {
        int fds[PROXY_LISTEN_FDS_MAX];
        char byte;
        ssize_t n;

        if (cfg->listen_socket < 0)
                return 0;
        n = recv_with_fds(cfg->listen_socket, &byte, 1, fds, ELEMENTSOF(fds));
        /* The socket stays open: policy changes come over it (control_cb()). */
        if (n <= 0)
                return log_error_errno(n < 0 ? (int)n : -EPIPE,
                                       "no listening sockets arrived on --listen-fds-socket: %m");
        for (size_t i = 0; i < ELEMENTSOF(fds) && fds[i] >= 0; i++) {
                if (cfg->n_listen_fds >= PROXY_LISTEN_FDS_MAX) {
                        (void)close(fds[i]);
                        continue;
                }
                cfg->listen_fds[cfg->n_listen_fds++] = fds[i];
        }
        if (cfg->n_listen_fds == 0)
                return log_error_errno(-EINVAL, "no listening sockets arrived on "
                                                "--listen-fds-socket");
        return check_listen_fds(cfg);
}

/* The control channel: --listen-fds-socket, once the listening sockets
 * came over it. A running sandbox's `hutch update` sends a message with a
 * memfd holding the new policy (proxy_config_load_policy()); the answer is
 * "ok", or "error: WHY" and nothing changed. Its hang-up only ends the
 * channel (the watch fd ends the proxy). */
typedef struct Control {
        ProxyConfig *cfg;
        Proxy *proxy;
        struct event *ev;
} Control;

static int control_policy(Control *ctl, int fd, char *why, size_t size) {
        _cleanup_(proxy_config_freep) ProxyConfig *next = NULL;
        _cleanup_free_ char *text = NULL;
        HutchError err = {};
        size_t len = 0;
        int r;

        if (fd < 0 || lseek(fd, 0, SEEK_SET) < 0) {
                (void)snprintf(why, size, "no policy document came with the request");
                return -EINVAL;
        }
        r = read_full_fd(fd, PROXY_CONFIG_JSON_MAX, &text, &len);
        if (r < 0) {
                (void)snprintf(why, size, "cannot read the policy document: %s", strerror(-r));
                return r;
        }
        r = proxy_config_load_policy(text, len, &next, &err);
        if (r < 0) {
                (void)snprintf(why, size, "%s", err.msg[0] ? err.msg : strerror(-r));
                return r;
        }
        proxy_config_swap_policy(ctl->cfg, next);
        log_debug("the policy changed");
        proxy_policy_changed(ctl->proxy);
        return 0;
}

static void control_cb(evutil_socket_t sock, short what, void *arg) {
        Control *ctl = arg;
        char msg[16], reply[600] = "ok", why[512];
        int fds[1];
        ssize_t n;

        n = recv_with_fds(sock, msg, sizeof(msg), fds, ELEMENTSOF(fds));
        if (n == -EAGAIN)
                return;
        if (n <= 0) {
                (void)event_del(ctl->ev);
                (void)safe_close(fds[0]);
                return;
        }
        if ((size_t)n != strlen("policy") || memcmp(msg, "policy", (size_t)n) != 0)
                (void)snprintf(reply, sizeof(reply), "error: unknown request");
        else if (control_policy(ctl, fds[0], why, sizeof(why)) < 0)
                (void)snprintf(reply, sizeof(reply), "error: %s", why);
        (void)safe_close(fds[0]);
        (void)send(sock, reply, strlen(reply), MSG_NOSIGNAL | MSG_DONTWAIT);
}

static int run(ProxyConfig *cfg, Audit *audit) {
        _cleanup_(tls_mint_freep) TlsMint *mint = NULL;
        _cleanup_(proxy_freep) Proxy *proxy = NULL;
        struct event *signals[3] = {}, *watch = NULL;
        Control ctl = {.cfg = cfg};
        static const int stop_signals[3] = {SIGTERM, SIGINT, SIGHUP};
        struct event_base *base;
        int r;

        r = setup_mint(cfg, &mint);
        if (r < 0)
                return r;
        r = receive_listen_fds(cfg);
        if (r < 0)
                return r;

        base = event_base_new();
        if (!base)
                return log_error_errno(-ENOMEM, "failed to create the event loop: %m");

        r = proxy_new(cfg, base, audit, mint, &proxy);
        if (r < 0) {
                log_error_errno(r, "failed to start serving: %m");
                event_base_free(base);
                return r;
        }
        for (size_t i = 0; i < ELEMENTSOF(stop_signals); i++) {
                signals[i] = evsignal_new(base, stop_signals[i], stop_cb, base);
                if (signals[i])
                        (void)event_add(signals[i], NULL);
        }
        if (cfg->watch_fd >= 0) {
                /* A pipe whose write end only the parent holds, or a pidfd:
                 * either becomes readable when the parent is gone. */
                watch = event_new(base, cfg->watch_fd, EV_READ, stop_cb, base);
                if (watch)
                        (void)event_add(watch, NULL);
        }
        if (cfg->listen_socket >= 0) {
                ctl.proxy = proxy;
                ctl.ev =
                        event_new(base, cfg->listen_socket, EV_READ | EV_PERSIST, control_cb, &ctl);
                if (ctl.ev)
                        (void)event_add(ctl.ev, NULL);
        }
        if (cfg->ready_fd >= 0) {
                (void)loop_write(cfg->ready_fd, "ready\n", 6);
                (void)close(cfg->ready_fd);
        }
        log_debug("serving on %zu socket(s)", cfg->n_listen_fds);

        (void)event_base_dispatch(base);

        proxy = proxy_free(proxy);
        if (ctl.ev)
                event_free(ctl.ev);
        if (watch)
                event_free(watch);
        for (size_t i = 0; i < ELEMENTSOF(signals); i++)
                if (signals[i])
                        event_free(signals[i]);
        event_base_free(base);
        return 0;
}

int main(int argc, char *argv[]) {
        _cleanup_(proxy_config_freep) ProxyConfig *cfg = NULL;
        HutchError err = {};
        Audit audit;
        pid_t ppid;
        int r, fd;

        log_setup("hutch-proxy", LOG_LEVEL_INFO);

        /* Die with the supervisor. getppid() is re-checked because the
         * parent may have died before prctl() took effect. */
        ppid = getppid();
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0) {
                log_error_errno(negative_errno(), "failed to set the parent death signal: %m");
                return 1;
        }
        if (getppid() != ppid)
                return 0;
        /* SECURITY: secret values live in this process: no core dumps, no
         * ptrace or /proc/PID/mem by the same user. */
        if (prctl(PR_SET_DUMPABLE, 0) < 0) {
                log_error_errno(negative_errno(), "failed to make the process non-dumpable: %m");
                return 1;
        }

        cfg = proxy_config_new();
        if (!cfg) {
                log_error_errno(-ENOMEM, "failed to allocate the configuration: %m");
                return 1;
        }
        r = proxy_config_parse_argv(cfg, argc, argv, &err);
        if (r > 0)
                return 0;
        if (r >= 0)
                r = proxy_config_validate(cfg, &err);
        if (r < 0) {
                if (err.pointer[0])
                        log_error("%s (at %s)", err.msg, err.pointer);
                else
                        log_error("%s", err.msg[0] ? err.msg : strerror(-r));
                return EXIT_CONFIG;
        }
        if (cfg->verbose)
                log_setup("hutch-proxy", LOG_LEVEL_DEBUG);

        r = check_listen_fds(cfg);
        if (r < 0)
                return EXIT_CONFIG;
        set_cloexec(cfg->audit_fd);
        set_cloexec(cfg->summary_fd);
        set_cloexec(cfg->watch_fd);
        set_cloexec(cfg->ready_fd);
        set_cloexec(cfg->ca_out_fd);
        set_cloexec(cfg->listen_socket);
        raise_nofile();
        /* Writes to a closed socket or pipe fail with EPIPE instead. */
        (void)signal(SIGPIPE, SIG_IGN);

        fd = open_audit(cfg);
        if (fd < 0 && fd != -EBADF) {
                log_error_errno(fd, "failed to open the audit log '%s': %m", cfg->audit_path);
                return EXIT_CONFIG;
        }
        r = audit_init(&audit, fd, cfg->sandbox_id);
        if (r < 0) {
                log_error_errno(r, "failed to set up the audit log: %m");
                return 1;
        }

        r = run(cfg, &audit);

        if (audit_write_summary(&audit, cfg->summary_fd) < 0)
                log_warning("failed to write the summary line");
        if (cfg->summary_fd >= 0)
                (void)close(cfg->summary_fd);
        audit_done(&audit);
        return r < 0 ? 1 : 0;
}
