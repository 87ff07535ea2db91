/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include "fd-util.h"
#include "sandbox/secrets.h"
#include "strv.h"

#define ALNUM "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
/* Room per value in the protected mapping: the value, a "\r\n" a file may
 * end with, and a NUL. */
#define SLOT_SIZE (SECRET_VALUE_MAX + 3)

static bool is_visible(char c) {
        return c > ' ' && c < 0x7f;
}

static bool all_in(const char *s, size_t n, const char *set) {
        for (size_t i = 0; i < n; i++)
                if (!strchr(set, s[i]))
                        return false;
        return true;
}

/* The alphabet of the random body, from the real body's characters. */
static void body_alphabet(const char *body, size_t n, char alphabet[128]) {
        size_t k;

        if (all_in(body, n, "0123456789")) {
                strcpy(alphabet, "0123456789");
                return;
        }
        if (all_in(body, n, "0123456789abcdef")) {
                strcpy(alphabet, "0123456789abcdef");
                return;
        }
        if (all_in(body, n, "0123456789ABCDEF")) {
                strcpy(alphabet, "0123456789ABCDEF");
                return;
        }
        strcpy(alphabet, ALNUM);
        k = strlen(alphabet);
        /* Every other visible character the body holds ('-', '_', '+', '/',
         * '.', ...), once each. */
        for (size_t i = 0; i < n && k < 127; i++)
                if (!memchr(alphabet, body[i], k)) {
                        alphabet[k++] = body[i];
                        alphabet[k] = '\0';
                }
}

/* Fills @out with @n characters drawn uniformly from @alphabet. */
static int random_fill(char *out, size_t n, const char *alphabet) {
        size_t k = strlen(alphabet), limit = 256 - 256 % k, i = 0;
        uint8_t buf[256];

        while (i < n) {
                ssize_t got = getrandom(buf, sizeof(buf), 0);

                if (got < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                for (ssize_t j = 0; j < got && i < n; j++)
                        /* Rejection sampling: no bias towards the first
                         * characters of the alphabet. */
                        if (buf[j] < limit)
                                out[i++] = alphabet[buf[j] % k];
        }
        return 0;
}

const char *const secret_ca_env_vars[] = {
        "SSL_CERT_FILE",  "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
        "GIT_SSL_CAINFO", "PIP_CERT",           "AWS_CA_BUNDLE",  NULL,
};

int secret_placeholder_make(const char *value, size_t len, char **ret) {
        _cleanup_free_ char *ph = NULL;
        size_t prefix = 0, end = len, pad = 0;
        char alphabet[128];
        int r;

        if (!value || len < SECRET_VALUE_MIN)
                return -EINVAL;
        for (size_t i = 0; i < len; i++)
                if (!is_visible(value[i]))
                        return -EINVAL;

        /* Base64 padding stays padding. */
        while (pad < len && value[len - 1 - pad] == '=')
                pad++;
        if (len - pad >= SECRET_VALUE_MIN)
                end = len - pad;
        else
                pad = 0;
        /* The prefix names the kind of key ("sk-ant-api03-", "ghp_"): keep
         * it, so that clients that check the shape still accept the
         * placeholder, but never at the cost of a short random body. */
        for (size_t i = 0; i < MIN(end, (size_t)SECRET_PREFIX_SCAN); i++)
                if ((value[i] == '-' || value[i] == '_') && end - (i + 1) >= SECRET_VALUE_MIN)
                        prefix = i + 1;
        body_alphabet(value + prefix, end - prefix, alphabet);

        ph = malloc(len + 1);
        if (!ph)
                return -ENOMEM;
        memcpy(ph, value, prefix);
        memcpy(ph + end, value + end, len - end);
        ph[len] = '\0';
        for (unsigned tries = 0;; tries++) {
                r = random_fill(ph + prefix, end - prefix, alphabet);
                if (r < 0)
                        return r;
                if (memcmp(ph, value, len) != 0)
                        break;
                if (tries > 64) /* cannot happen with a working RNG */
                        return -EIO;
        }
        *ret = TAKE_PTR(ph);
        return 0;
}

SecretSet *secret_set_free(SecretSet *s) {
        if (!s)
                return NULL;
        if (s->map) {
                explicit_bzero(s->map, s->map_size);
                (void)munmap(s->map, s->map_size);
        }
        for (size_t i = 0; i < s->n; i++)
                free(s->items[i].placeholder);
        free(s->items);
        free(s);
        return NULL;
}

/* SECURITY: a mapping for secret material: zero in every child of a fork
 * or clone (the sandbox init is one), and not in core dumps. */
static void *protected_map(size_t size) {
        void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

        if (m == MAP_FAILED)
                return NULL;
        if (madvise(m, size, MADV_WIPEONFORK) < 0 || madvise(m, size, MADV_DONTDUMP) < 0) {
                (void)munmap(m, size);
                return NULL;
        }
        return m;
}

static int read_value_file(const PolicySecret *d, char *slot, size_t *ret_len, HutchError *reterr) {
        _cleanup_close_ int fd = -EBADF;
        size_t len = 0;

        fd = open(d->file, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return hutch_error_set(reterr, errno, "secret '%s': cannot read the file '%s': %m",
                                       d->name, d->file);
        for (;;) {
                ssize_t n = read(fd, slot + len, SLOT_SIZE - 1 - len);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return hutch_error_set(reterr, errno,
                                               "secret '%s': cannot read the file '%s': %m",
                                               d->name, d->file);
                if (n == 0)
                        break;
                len += (size_t)n;
                if (len >= SLOT_SIZE - 1)
                        return hutch_error_set(reterr, EFBIG,
                                               "secret '%s': the file '%s' is larger than %d "
                                               "bytes",
                                               d->name, d->file, SECRET_VALUE_MAX);
        }
        if (len > 0 && slot[len - 1] == '\n')
                len--;
        if (len > 0 && slot[len - 1] == '\r')
                len--;
        if (len == 0)
                return hutch_error_set(reterr, EINVAL, "secret '%s': the file '%s' is empty",
                                       d->name, d->file);
        *ret_len = len;
        return 0;
}

static int read_value(const PolicySecret *d, char *const *caller_env, char *slot, size_t *ret_len,
                      HutchError *reterr) {
        const char *var = d->env_var ? d->env_var : d->name;
        const char *v;
        size_t len;

        if (d->file)
                return read_value_file(d, slot, ret_len, reterr);
        v = strv_env_get(caller_env, var);
        if (!v)
                return hutch_error_set(reterr, EINVAL,
                                       "secret '%s': environment variable %s is not set", d->name,
                                       var);
        if (v[0] == '\0')
                return hutch_error_set(reterr, EINVAL,
                                       "secret '%s': environment variable %s is empty", d->name,
                                       var);
        len = strlen(v);
        if (len > SECRET_VALUE_MAX)
                return hutch_error_set(reterr, EFBIG,
                                       "secret '%s': the value is longer than %d bytes", d->name,
                                       SECRET_VALUE_MAX);
        memcpy(slot, v, len);
        *ret_len = len;
        return 0;
}

int secret_set_load(const Policy *p, char *const *caller_env, SecretSet **ret, HutchError *reterr) {
        _cleanup_(secret_set_freep) SecretSet *s = NULL;
        long page = sysconf(_SC_PAGESIZE);
        int r;

        if (p->n_secrets == 0) {
                *ret = NULL;
                return 0;
        }
        s = calloc(1, sizeof(SecretSet));
        if (!s)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        s->items = calloc(p->n_secrets, sizeof(SecretValue));
        if (!s->items)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        s->map_size = p->n_secrets * SLOT_SIZE;
        if (page > 0)
                s->map_size = (s->map_size + (size_t)page - 1) / (size_t)page * (size_t)page;
        s->map = protected_map(s->map_size);
        if (!s->map)
                return hutch_error_set(reterr, errno,
                                       "failed to set up protected memory for the secrets: %m");

        for (size_t i = 0; i < p->n_secrets; i++) {
                const PolicySecret *d = &p->secrets[i];
                SecretValue *v = &s->items[s->n++];

                v->def = d;
                v->value = (char *)s->map + i * SLOT_SIZE;
                r = read_value(d, caller_env, v->value, &v->len, reterr);
                if (r < 0)
                        return r;
                v->value[v->len] = '\0';
                for (size_t j = 0; j < v->len; j++)
                        if (!is_visible(v->value[j]))
                                return hutch_error_set(reterr, EINVAL,
                                                       "secret '%s': the value holds a space or "
                                                       "a control character (a header value "
                                                       "takes visible ASCII only)",
                                                       d->name);
                if (v->len < SECRET_VALUE_MIN)
                        return hutch_error_set(reterr, EINVAL,
                                               "secret '%s': the value is shorter than %d "
                                               "characters, too short for a safe placeholder",
                                               d->name, SECRET_VALUE_MIN);
                r = secret_placeholder_make(v->value, v->len, &v->placeholder);
                if (r < 0)
                        return hutch_error_set(reterr, -r,
                                               "secret '%s': failed to make a placeholder: %s",
                                               d->name, strerror(-r));
        }
        *ret = TAKE_PTR(s);
        return 0;
}

/* A writer into a fixed buffer; strings are visible ASCII (checked when
 * they entered the policy or the set), so only '"' and '\\' need escaping. */
typedef struct Writer {
        char *buf;
        size_t size, len;
        bool overflow;
} Writer;

static void w_raw(Writer *w, const char *s) {
        size_t n = strlen(s);

        if (w->len + n >= w->size) {
                w->overflow = true;
                return;
        }
        memcpy(w->buf + w->len, s, n);
        w->len += n;
}

static void w_str(Writer *w, const char *s) {
        w_raw(w, "\"");
        for (; *s && !w->overflow; s++) {
                char one[3] = {*s, '\0', '\0'};

                if (*s == '"' || *s == '\\') {
                        one[0] = '\\';
                        one[1] = *s;
                } else if ((unsigned char)*s < 0x20) {
                        one[0] = '?'; /* never: checked on the way in */
                }
                w_raw(w, one);
        }
        w_raw(w, "\"");
}

static void w_member(Writer *w, const char *key, const char *value) {
        w_raw(w, ",");
        w_str(w, key);
        w_raw(w, ":");
        w_str(w, value);
}

static void w_list(Writer *w, const char *key, char **l) {
        bool first = true;

        w_raw(w, ",");
        w_str(w, key);
        w_raw(w, ":[");
        STRV_FOREACH(e, l) {
                if (!first)
                        w_raw(w, ",");
                w_str(w, *e);
                first = false;
        }
        w_raw(w, "]");
}

int secret_set_config_memfd(const SecretSet *s) {
        _cleanup_close_ int fd = -EBADF;
        size_t size = 64;
        Writer w = {};
        int r = 0;

        for (size_t i = 0; i < s->n; i++) {
                const PolicySecret *d = s->items[i].def;

                size += 256 + 2 * (s->items[i].len + strlen(s->items[i].placeholder) +
                                   strlen(d->name) + (d->header ? strlen(d->header) : 0) +
                                   (d->query ? strlen(d->query) : 0) +
                                   (d->path_prefix ? strlen(d->path_prefix) : 0));
                STRV_FOREACH(h, d->hosts)
                        size += 4 + 2 * strlen(*h);
                STRV_FOREACH(m, d->methods)
                        size += 4 + 2 * strlen(*m);
        }
        w.size = size;
        w.buf = protected_map(size);
        if (!w.buf)
                return negative_errno();

        w_raw(&w, "{\"secrets\":[");
        for (size_t i = 0; i < s->n; i++) {
                const SecretValue *v = &s->items[i];

                w_raw(&w, i > 0 ? ",{" : "{");
                w_str(&w, "name");
                w_raw(&w, ":");
                w_str(&w, v->def->name);
                w_member(&w, "placeholder", v->placeholder);
                w_member(&w, "value", v->value);
                w_list(&w, "hosts", v->def->hosts);
                if (v->def->header)
                        w_member(&w, "header", v->def->header);
                if (v->def->query)
                        w_member(&w, "query", v->def->query);
                if (v->def->path_prefix)
                        w_member(&w, "path_prefix", v->def->path_prefix);
                if (v->def->methods)
                        w_list(&w, "methods", v->def->methods);
                w_raw(&w, "}");
        }
        w_raw(&w, "]}\n");
        if (w.overflow) {
                r = -ENOBUFS;
                goto finish;
        }

        fd = memfd_create("hutch-proxy-config", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0) {
                r = negative_errno();
                goto finish;
        }
        r = loop_write(fd, w.buf, w.len);
        if (r < 0)
                goto finish;
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0 ||
            lseek(fd, 0, SEEK_SET) < 0) {
                r = negative_errno();
                goto finish;
        }
        r = TAKE_FD(fd);
finish:
        explicit_bzero(w.buf, w.size);
        (void)munmap(w.buf, w.size);
        return r;
}
