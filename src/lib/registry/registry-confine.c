/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch-pull's confined download (registry.h, registry_pull_confined()). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd-util.h"
#include "ns/landlock.h"
#include "registry/registry.h"
#include "seccomp/seccomp-filter.h"

/* What the child reads: its libraries (and the NSS modules glibc loads
 * for name lookups), the CA certificates and the resolver's files. Not
 * the rest of /etc (shadow, keys), not $HOME, not $HUTCH_HOME. */
static const char *const pull_read_paths[] = {
        "/usr",
        "/lib",
        "/lib64",
        "/lib32",
        "/etc/ssl",
        "/etc/pki",
        "/etc/ca-certificates",
        "/etc/ld.so.cache",
        "/etc/resolv.conf",
        "/etc/hosts",
        "/etc/nsswitch.conf",
        "/etc/host.conf",
        "/etc/gai.conf",
        "/etc/services",
        "/etc/protocols",
        "/etc/localtime",
        "/dev/urandom",
        "/dev/random",
};

/* The child's answer: registry_pull()'s result, with the layout's fd
 * attached on success. */
typedef struct PullAnswer {
        int r;
        HutchError err;
        char digest[80];
} PullAnswer;

static int pull_confine(const PullOptions *o, const char *layout_dir) {
        LandlockPath p[ELEMENTSOF(pull_read_paths) + 9];
        const char *cert_file = getenv("SSL_CERT_FILE"), *cert_dir = getenv("SSL_CERT_DIR"),
                   *ssl_conf = getenv("OPENSSL_CONF");
        size_t k = 0;
        int r;

        for (size_t i = 0; i < ELEMENTSOF(pull_read_paths); i++)
                p[k++] = (LandlockPath){.path = pull_read_paths[i], .optional = true};
        p[k++] = (LandlockPath){.path = "/dev/null", .write = true, .optional = true};
        if (cert_file && cert_file[0] == '/')
                p[k++] = (LandlockPath){.path = cert_file, .optional = true};
        if (cert_dir && cert_dir[0] == '/')
                p[k++] = (LandlockPath){.path = cert_dir, .optional = true};
        if (ssl_conf && ssl_conf[0] == '/')
                p[k++] = (LandlockPath){.path = ssl_conf, .optional = true};
        if (o->cert_dir)
                p[k++] = (LandlockPath){.path = o->cert_dir, .optional = true};
        if (o->auth_file)
                p[k++] = (LandlockPath){.path = o->auth_file, .optional = true};
        p[k++] = (LandlockPath){.path = layout_dir, .write = true};

        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return -errno;
        r = landlock_restrict_paths(p, k);
        /* COMPAT(kernel < 5.13 or Landlock disabled): see registry.h. */
        if (r < 0 && r != -EOPNOTSUPP)
                return r;
        return seccomp_filter_load_default();
}

/* Test hook: with HUTCH_TEST_PULL_PROBE=PATH, the confined child says on
 * stderr whether it runs under a seccomp filter and whether it can read
 * PATH and create PATH.probe, as a parser taken over by a hostile answer
 * would try. Compiled only with -Dtest_hooks (on unless
 * buildtype=release). */
static void pull_probe(void) {
#if HUTCH_TEST_HOOKS
        const char *path = getenv("HUTCH_TEST_PULL_PROBE");
        _cleanup_free_ char *w = NULL;
        int fd, rd, wr;

        if (!path || asprintf(&w, "%s.probe", path) < 0)
                return;
        fd = open(path, O_RDONLY | O_CLOEXEC);
        rd = fd < 0 ? errno : 0;
        if (fd >= 0)
                (void)close(fd);
        fd = open(w, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        wr = fd < 0 ? errno : 0;
        if (fd >= 0) {
                (void)close(fd);
                (void)unlink(w);
        }
        (void)fprintf(stderr, "pull probe: seccomp=%d read=%s write=%s\n",
                      prctl(PR_GET_SECCOMP, 0, 0, 0, 0), rd ? strerrorname_np(rd) : "ok",
                      wr ? strerrorname_np(wr) : "ok");
#endif
}

_noreturn_ static void pull_child(int sock, const ImageRef *ref, const PullOptions *o,
                                  const char *layout_dir) {
        _cleanup_free_ char *digest = NULL;
        PullAnswer a = {};
        int fd = -EBADF;

        a.r = pull_confine(o, layout_dir);
        if (a.r < 0)
                (void)hutch_error_set(&a.err, -a.r, "cannot confine the download: %s",
                                      strerror(-a.r));
        else {
                pull_probe();
                a.r = registry_pull(ref, o, layout_dir, &digest, &fd, &a.err);
        }
        if (a.r >= 0)
                (void)snprintf(a.digest, sizeof(a.digest), "%s", digest);
        (void)send_with_fds(sock, &a, sizeof(a), &fd, a.r >= 0 ? 1 : 0);
        _exit(0);
}

int registry_pull_confined(const ImageRef *ref, const PullOptions *o, const char *layout_dir,
                           char **ret_digest, int *ret_layout_fd, HutchError *reterr) {
        _cleanup_free_ char *auth = NULL;
        _cleanup_close_ int fd = -EBADF;
        PullOptions co = *o;
        PullAnswer a = {};
        int sv[2], status = 0;
        ssize_t n;
        pid_t pid;

        /* Found here: the confined child could not look. */
        auth = o->auth_file ? strdup(o->auth_file) : auth_file_default();
        co.auth_file = auth;
        if (mkdir(layout_dir, 0755) < 0 && errno != EEXIST)
                return hutch_error_set(reterr, errno, "cannot create the layout directory '%s': %m",
                                       layout_dir);
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return hutch_error_set(reterr, errno, "cannot make a socket pair: %m");
        (void)fflush(NULL);
        pid = fork();
        if (pid < 0) {
                int e = errno;

                (void)close(sv[0]);
                (void)close(sv[1]);
                return hutch_error_set(reterr, e, "cannot fork: %s", strerror(e));
        }
        if (pid == 0) {
                (void)close(sv[0]);
                pull_child(sv[1], ref, &co, layout_dir);
        }
        (void)close(sv[1]);
        n = recv_with_fds(sv[0], &a, sizeof(a), &fd, 1);
        (void)close(sv[0]);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        if (n != (ssize_t)sizeof(a))
                return hutch_error_set(reterr, EPROTO, "the download process died (status %d)",
                                       status);
        a.err.msg[sizeof(a.err.msg) - 1] = '\0';
        a.digest[sizeof(a.digest) - 1] = '\0';
        if (a.r < 0) {
                if (reterr)
                        *reterr = a.err;
                return a.r < -4095 ? -EPROTO : a.r;
        }
        if (fd < 0)
                return hutch_error_set(reterr, EPROTO, "the download process sent no layout");
        if (ret_digest) {
                *ret_digest = strdup(a.digest);
                if (!*ret_digest)
                        return -ENOMEM;
        }
        if (ret_layout_fd)
                *ret_layout_fd = TAKE_FD(fd);
        return 0;
}
