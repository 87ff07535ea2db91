/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The registry client's HTTP/1.1 transport (registry-internal.h). */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <http_parser.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "fd-util.h"
#include "parse-util.h"
#include "registry-internal.h"

#define ERROR_BODY_MAX 4096
#define HEADER_VALUE_MAX 8192
/* An idle connection (no byte for this long) is given up. */
#define IO_TIMEOUT_SEC 60

void http_answer_done(HttpAnswer *a) {
        a->location = mfree(a->location);
        a->www_authenticate = mfree(a->www_authenticate);
        a->content_type = mfree(a->content_type);
        a->docker_digest = mfree(a->docker_digest);
        a->content_range = mfree(a->content_range);
        a->error_body = mfree(a->error_body);
}

void http_tls_done(HttpTls *t) {
        SSL_CTX_free(t->verify);
        SSL_CTX_free(t->noverify);
        t->verify = t->noverify = NULL;
}

static int tls_ctx(HttpTls *t, bool verify, SSL_CTX **ret, HutchError *reterr) {
        SSL_CTX **slot = verify ? &t->verify : &t->noverify;
        SSL_CTX *ctx = NULL;

        if (*slot) {
                *ret = *slot;
                return 0;
        }
        ctx = SSL_CTX_new(TLS_client_method());
        if (!ctx)
                return -ENOMEM;
        (void)SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
        /* A body cut short is found by http_parser (Content-Length or the
         * chunked framing) and by the blob's digest, never taken as EOF. */
        SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
        if (verify) {
                SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
                if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
                        SSL_CTX_free(ctx);
                        return hutch_error_set(reterr, EIO, "cannot load the system's CA store");
                }
                if (t->cert_dir) {
                        _cleanup_(closedirp) DIR *d = opendir(t->cert_dir);
                        struct dirent *de;

                        if (!d) {
                                int r = -errno;
                                SSL_CTX_free(ctx);
                                return hutch_error_set(reterr, -r,
                                                       "cannot open --cert-dir '%s': %s",
                                                       t->cert_dir, strerror(-r));
                        }
                        while ((de = readdir_no_dot(d))) {
                                _cleanup_free_ char *f = NULL;
                                size_t n = strlen(de->d_name);

                                if (n < 5 || strcmp(de->d_name + n - 4, ".crt") != 0)
                                        continue;
                                if (asprintf(&f, "%s/%s", t->cert_dir, de->d_name) < 0) {
                                        SSL_CTX_free(ctx);
                                        return -ENOMEM;
                                }
                                if (SSL_CTX_load_verify_locations(ctx, f, NULL) != 1) {
                                        SSL_CTX_free(ctx);
                                        ERR_clear_error();
                                        return hutch_error_set(reterr, EINVAL,
                                                               "cannot load the CA certificate "
                                                               "'%s'",
                                                               f);
                                }
                        }
                }
        } else {
                SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
        }
        *slot = ctx;
        *ret = ctx;
        return 0;
}

static int tcp_connect(const Url *url, HutchError *reterr) {
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_ADDRCONFIG};
        struct addrinfo *res = NULL;
        struct timeval tv = {.tv_sec = IO_TIMEOUT_SEC};
        char port[8];
        int r, fd = -EBADF, err = ECONNREFUSED;

        (void)snprintf(port, sizeof(port), "%u", url->port);
        r = getaddrinfo(url->host, port, &hints, &res);
        if (r != 0)
                return hutch_error_set(reterr, EHOSTUNREACH, "cannot resolve '%s': %s", url->host,
                                       gai_strerror(r));
        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
                fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
                if (fd < 0) {
                        err = errno;
                        continue;
                }
                /* Linux applies SO_SNDTIMEO to connect(2) too. */
                (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
                (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
                if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
                        break;
                err = errno;
                fd = safe_close(fd);
        }
        freeaddrinfo(res);
        if (fd < 0)
                return hutch_error_set(reterr, err, "cannot connect to %s port %u: %s", url->host,
                                       url->port, strerror(err));
        return fd;
}

/* Whether $no_proxy/$NO_PROXY exempts @host (port @port): "*", or an
 * entry equal to the host or a domain suffix of it ("example.test" and
 * ".example.test" both match "reg.example.test"), optionally with
 * ":PORT". */
static bool no_proxy_matches(const char *host, uint16_t port) {
        const char *list = getenv("no_proxy");
        _cleanup_free_ char *copy = NULL;
        char *save = NULL;

        if (!list || !*list)
                list = getenv("NO_PROXY");
        if (!list || !*list)
                return false;
        copy = strdup(list);
        if (!copy)
                return false;
        for (char *e = strtok_r(copy, ", \t", &save); e; e = strtok_r(NULL, ", \t", &save)) {
                char *colon = strrchr(e, ':');
                size_t hl = strlen(host), el;
                uint32_t p;

                if (strcmp(e, "*") == 0)
                        return true;
                if (colon && !strchr(colon, ']') && e[0] != '[' && strchr(e, ':') == colon) {
                        if (safe_atou32(colon + 1, &p) < 0 || p != port)
                                continue;
                        *colon = '\0';
                }
                if (e[0] == '[' && e[strlen(e) - 1] == ']') {
                        e[strlen(e) - 1] = '\0';
                        e++;
                }
                while (*e == '*' || *e == '.')
                        e++;
                el = strlen(e);
                if (el == 0)
                        continue;
                if (strcasecmp(host, e) == 0)
                        return true;
                if (hl > el && host[hl - el - 1] == '.' && strcasecmp(host + hl - el, e) == 0)
                        return true;
        }
        return false;
}

/* An https:// URL through $https_proxy/$HTTPS_PROXY (an http:// proxy,
 * no credentials in it) unless $no_proxy exempts its host: a CONNECT
 * tunnel, so TLS still runs end to end with the registry. Plain-HTTP
 * registries are always reached directly. */
static int connect_maybe_proxied(const Url *url, HutchError *reterr) {
        _cleanup_(url_done) Url proxy = {};
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *req = NULL, *with_scheme = NULL;
        const char *env = getenv("https_proxy");
        bool v6 = strchr(url->host, ':') != NULL;
        char head[8192];
        size_t n = 0;
        int r;

        if (!env || !*env)
                env = getenv("HTTPS_PROXY");
        if (!url->https || !env || !*env || no_proxy_matches(url->host, url->port))
                return tcp_connect(url, reterr);
        if (!strstr(env, "://") && asprintf(&with_scheme, "http://%s", env) < 0)
                return -ENOMEM;
        r = url_parse(with_scheme ? with_scheme : env, &proxy);
        if (r < 0 || proxy.https)
                return hutch_error_set(reterr, EINVAL,
                                       "cannot use the proxy in $HTTPS_PROXY (an http://HOST:PORT "
                                       "proxy without credentials is supported)");
        fd = tcp_connect(&proxy, reterr);
        if (fd < 0)
                return fd;
        if (asprintf(&req, "CONNECT %s%s%s:%u HTTP/1.1\r\nHost: %s%s%s:%u\r\n\r\n", v6 ? "[" : "",
                     url->host, v6 ? "]" : "", url->port, v6 ? "[" : "", url->host, v6 ? "]" : "",
                     url->port) < 0) {
                req = NULL;
                return -ENOMEM;
        }
        r = loop_write(fd, req, strlen(req));
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot talk to the proxy %s: %s", proxy.host,
                                       strerror(-r));
        /* The proxy's answer, a byte at a time: nothing of the tunnel is
         * read here. */
        while (n < sizeof(head) - 1) {
                ssize_t k = read(fd, head + n, 1);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return hutch_error_set(reterr, EPROTO, "the proxy %s closed the connection",
                                               proxy.host);
                n++;
                if (n >= 4 && memcmp(head + n - 4, "\r\n\r\n", 4) == 0)
                        break;
        }
        head[n] = '\0';
        if (strncmp(head, "HTTP/1.", 7) != 0 || strlen(head) < 12 ||
            strncmp(head + 9, "200", 3) != 0) {
                head[strcspn(head, "\r\n")] = '\0';
                for (char *c = head; *c; c++)
                        if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
                                *c = '?';
                return hutch_error_set(reterr, ECONNREFUSED,
                                       "the proxy %s refused the tunnel to %s: '%.80s'", proxy.host,
                                       url->host, head);
        }
        return TAKE_FD(fd);
}

typedef struct Exchange {
        HttpAnswer *ans;
        HttpBodyFn fn;
        void *userdata;
        int fn_error;
        char *field;
        char *value;
        bool in_value;
        bool complete;
        size_t error_len;
} Exchange;

static int append(char **s, const char *at, size_t len) {
        size_t old = *s ? strlen(*s) : 0;
        char *n;

        if (old + len > HEADER_VALUE_MAX)
                return -E2BIG;
        n = realloc(*s, old + len + 1);
        if (!n)
                return -ENOMEM;
        memcpy(n + old, at, len);
        n[old + len] = '\0';
        *s = n;
        return 0;
}

static int header_finish(Exchange *x) {
        static const struct {
                const char *name;
                size_t offset;
        } wanted[] = {
                {"location", offsetof(HttpAnswer, location)},
                {"www-authenticate", offsetof(HttpAnswer, www_authenticate)},
                {"content-type", offsetof(HttpAnswer, content_type)},
                {"docker-content-digest", offsetof(HttpAnswer, docker_digest)},
                {"content-range", offsetof(HttpAnswer, content_range)},
        };

        if (!x->field)
                return 0;
        for (size_t i = 0; i < ELEMENTSOF(wanted); i++) {
                char **slot = (char **)((char *)x->ans + wanted[i].offset);
                if (strcasecmp(x->field, wanted[i].name) != 0 || *slot)
                        continue;
                *slot = x->value ? TAKE_PTR(x->value) : strdup("");
                if (!*slot)
                        return -ENOMEM;
        }
        x->field = mfree(x->field);
        x->value = mfree(x->value);
        x->in_value = false;
        return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t len) {
        Exchange *x = p->data;

        if (x->in_value && header_finish(x) < 0)
                return 1;
        return append(&x->field, at, len) < 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len) {
        Exchange *x = p->data;

        x->in_value = true;
        return append(&x->value, at, len) < 0;
}

static int on_headers_complete(http_parser *p) {
        Exchange *x = p->data;

        if (header_finish(x) < 0)
                return -1;
        x->ans->status = (int)p->status_code;
        return 0;
}

static int on_body(http_parser *p, const char *at, size_t len) {
        Exchange *x = p->data;

        if (x->ans->status >= 200 && x->ans->status < 300) {
                int r = x->fn ? x->fn(x->userdata, x->ans, at, len) : 0;
                if (r < 0) {
                        x->fn_error = r;
                        return 1;
                }
                return 0;
        }
        if (x->error_len < ERROR_BODY_MAX) {
                size_t n = MIN(len, ERROR_BODY_MAX - x->error_len);
                char *e = realloc(x->ans->error_body, x->error_len + n + 1);
                if (!e)
                        return 1;
                memcpy(e + x->error_len, at, n);
                x->error_len += n;
                e[x->error_len] = '\0';
                x->ans->error_body = e;
        }
        return 0;
}

static int on_message_complete(http_parser *p) {
        Exchange *x = p->data;

        x->complete = true;
        /* Stop: nothing after the answer is read (Connection: close). */
        http_parser_pause(p, 1);
        return 0;
}

static void ssl_freep(SSL **s) {
        if (*s) {
                (void)SSL_shutdown(*s);
                SSL_free(*s);
        }
}

static int tls_start(HttpTls *tls, int fd, const Url *url, bool verify, SSL **ret,
                     HutchError *reterr) {
        SSL *ssl = NULL;
        SSL_CTX *ctx = NULL;
        struct in6_addr a;
        bool is_ip =
                inet_pton(AF_INET, url->host, &a) == 1 || inet_pton(AF_INET6, url->host, &a) == 1;
        int r;

        r = tls_ctx(tls, verify, &ctx, reterr);
        if (r < 0)
                return r;
        ssl = SSL_new(ctx);
        if (!ssl || SSL_set_fd(ssl, fd) != 1) {
                SSL_free(ssl);
                return -ENOMEM;
        }
        if (!is_ip)
                (void)SSL_set_tlsext_host_name(ssl, url->host);
        if (verify) {
                /* SECURITY: the certificate must name the host we asked for. */
                if (is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), url->host) != 1
                          : SSL_set1_host(ssl, url->host) != 1) {
                        SSL_free(ssl);
                        return -ENOMEM;
                }
        }
        if (SSL_connect(ssl) != 1) {
                long v = SSL_get_verify_result(ssl);
                unsigned long e = ERR_peek_last_error();
                char buf[256] = "";

                if (e)
                        ERR_error_string_n(e, buf, sizeof(buf));
                ERR_clear_error();
                SSL_free(ssl);
                if (verify && v != X509_V_OK)
                        return hutch_error_set(reterr, EPERM,
                                               "the certificate of %s is not trusted: %s "
                                               "(--cert-dir adds a CA)",
                                               url->host, X509_verify_cert_error_string(v));
                return hutch_error_set(reterr, EPROTONOSUPPORT,
                                       "the TLS handshake with %s port %u failed%s%s", url->host,
                                       url->port, *buf ? ": " : "", buf);
        }
        *ret = ssl;
        return 0;
}

static int conn_write(int fd, SSL *ssl, const char *data, size_t len) {
        if (!ssl)
                return loop_write(fd, data, len);
        while (len > 0) {
                int n = SSL_write(ssl, data, (int)MIN(len, (size_t)INT32_MAX));
                if (n <= 0) {
                        ERR_clear_error();
                        return -EIO;
                }
                data += n;
                len -= (size_t)n;
        }
        return 0;
}

/* Returns the bytes read, 0 at the end, -errno. */
static ssize_t conn_read(int fd, SSL *ssl, char *buf, size_t len) {
        if (!ssl) {
                ssize_t n;
                do
                        n = read(fd, buf, len);
                while (n < 0 && errno == EINTR);
                return n < 0 ? -errno : n;
        }
        for (;;) {
                size_t got = 0;
                int e;

                if (SSL_read_ex(ssl, buf, len, &got) == 1)
                        return (ssize_t)got;
                e = SSL_get_error(ssl, 0);
                ERR_clear_error();
                if (e == SSL_ERROR_ZERO_RETURN)
                        return 0;
                if (e == SSL_ERROR_SYSCALL && errno == EINTR)
                        continue;
                if (e == SSL_ERROR_SYSCALL && (errno == EAGAIN || errno == EWOULDBLOCK))
                        return -ETIMEDOUT;
                return e == SSL_ERROR_SYSCALL && errno ? -errno : -EIO;
        }
}

int http_get(HttpTls *tls, const Url *url, bool verify, const char *headers, HttpBodyFn fn,
             void *userdata, HttpAnswer *ret, HutchError *reterr) {
        _cleanup_(ssl_freep) SSL *ssl = NULL;
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *req = NULL, *buf = NULL;
        HttpAnswer ans = {};
        Exchange x = {.ans = &ans, .fn = fn, .userdata = userdata};
        http_parser_settings settings = {
                .on_header_field = on_header_field,
                .on_header_value = on_header_value,
                .on_headers_complete = on_headers_complete,
                .on_body = on_body,
                .on_message_complete = on_message_complete,
        };
        http_parser parser;
        bool v6 = strchr(url->host, ':') != NULL;
        bool default_port = url->port == (url->https ? 443 : 80);
        char port[8] = "";
        int r;

        fd = connect_maybe_proxied(url, reterr);
        if (fd < 0)
                return fd;
        if (url->https) {
                r = tls_start(tls, fd, url, verify, &ssl, reterr);
                if (r < 0)
                        return r;
        }
        if (!default_port)
                (void)snprintf(port, sizeof(port), ":%u", url->port);
        if (asprintf(&req,
                     "GET %s HTTP/1.1\r\nHost: %s%s%s%s\r\nUser-Agent: hutch\r\n"
                     "Connection: close\r\n%s\r\n",
                     url->path, v6 ? "[" : "", url->host, v6 ? "]" : "", port,
                     headers ? headers : "") < 0) {
                req = NULL;
                return -ENOMEM;
        }
        r = conn_write(fd, ssl, req, strlen(req));
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot send the request to %s: %s", url->host,
                                       strerror(-r));

        buf = malloc(1u << 16);
        if (!buf)
                return -ENOMEM;
        http_parser_init(&parser, HTTP_RESPONSE);
        parser.data = &x;
        while (!x.complete) {
                ssize_t n = conn_read(fd, ssl, buf, 1u << 16);
                size_t done;

                if (n < 0) {
                        r = hutch_error_set(reterr, EPROTO, "reading the answer of %s failed: %s",
                                            url->host, strerror((int)-n));
                        goto fail;
                }
                done = http_parser_execute(&parser, &settings, buf, (size_t)n);
                if (x.fn_error < 0) {
                        r = x.fn_error;
                        goto fail;
                }
                if (HTTP_PARSER_ERRNO(&parser) == HPE_PAUSED)
                        break;
                if (HTTP_PARSER_ERRNO(&parser) != HPE_OK || (n > 0 && done != (size_t)n)) {
                        if (HTTP_PARSER_ERRNO(&parser) == HPE_INVALID_EOF_STATE)
                                r = hutch_error_set(reterr, EPROTO, "the answer of %s was cut off",
                                                    url->host);
                        else
                                r = hutch_error_set(
                                        reterr, EBADMSG, "%s did not answer in HTTP: %s", url->host,
                                        http_errno_description(HTTP_PARSER_ERRNO(&parser)));
                        goto fail;
                }
                if (n == 0) {
                        if (!x.complete) {
                                r = hutch_error_set(reterr, EPROTO, "the answer of %s was cut off",
                                                    url->host);
                                goto fail;
                        }
                        break;
                }
        }
        x.field = mfree(x.field);
        x.value = mfree(x.value);
        *ret = ans;
        return 0;
fail:
        free(x.field);
        free(x.value);
        http_answer_done(&ans);
        return r;
}
