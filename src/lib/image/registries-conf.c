/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* containers-registries.conf(5), the subset hutch uses (registries-conf.h). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fd-util.h"
#include "image/registries-conf.h"
#include "strv.h"

#define CONF_FILE_MAX (1u << 20)
#define CONF_DROPINS_MAX 256
#define CONF_ENTRIES_MAX 4096
#define CONF_VALUE_MAX 4096

static void entry_done(RegistryEntry *e) {
        free(e->prefix);
        free(e->location);
        free(e->where);
        strv_free(e->mirrors);
        free(e->mirror_insecure);
}

RegistriesConf *registries_conf_free(RegistriesConf *c) {
        if (!c)
                return NULL;
        strv_free(c->search);
        free(c->search_where);
        for (size_t i = 0; i < c->n_entries; i++)
                entry_done(&c->entries[i]);
        free(c->entries);
        strv_free(c->alias_names);
        strv_free(c->alias_values);
        strv_free(c->alias_where);
        free(c->short_name_mode);
        free(c->short_name_mode_where);
        free(c);
        return NULL;
}

/* One TOML value as read: a string, a boolean, an integer (kept as its
 * text) or an array of strings. */
typedef struct ConfValue {
        enum { VALUE_STRING, VALUE_BOOL, VALUE_INT, VALUE_ARRAY } type;
        char *s;
        bool b;
        char **array;
} ConfValue;

static void value_done(ConfValue *v) {
        free(v->s);
        strv_free(v->array);
}

typedef struct ConfParser {
        const char *p;
        const char *path;
        unsigned line;
        HutchError *reterr;
} ConfParser;

static int conf_error(ConfParser *ps, const char *what) {
        return hutch_error_set(ps->reterr, EINVAL, "%s:%u: %s", ps->path, ps->line, what);
}

static void skip_blank(ConfParser *ps) {
        while (*ps->p == ' ' || *ps->p == '\t')
                ps->p++;
}

/* Blanks, newlines and comments (inside an array). */
static void skip_space(ConfParser *ps) {
        for (;;) {
                skip_blank(ps);
                if (*ps->p == '#')
                        ps->p += strcspn(ps->p, "\n");
                if (*ps->p == '\r' && ps->p[1] == '\n')
                        ps->p++;
                if (*ps->p != '\n')
                        return;
                ps->p++;
                ps->line++;
        }
}

/* After a value or a header: blanks, a comment, then the end of the line. */
static int end_of_line(ConfParser *ps) {
        skip_blank(ps);
        if (*ps->p == '#')
                ps->p += strcspn(ps->p, "\n");
        if (*ps->p == '\r')
                ps->p++;
        if (*ps->p == '\0')
                return 0;
        if (*ps->p != '\n')
                return conf_error(ps, "unexpected text after the value");
        ps->p++;
        ps->line++;
        return 0;
}

static int parse_string(ConfParser *ps, char **ret) {
        char quote = *ps->p++;
        _cleanup_free_ char *s = malloc(CONF_VALUE_MAX + 1);
        size_t n = 0;

        if (!s)
                return -ENOMEM;
        for (;; ps->p++) {
                char c = *ps->p;

                if (c == '\0' || c == '\n')
                        return conf_error(ps, "unterminated string");
                if (c == quote)
                        break;
                if (c == '\\' && quote == '"') {
                        c = *++ps->p;
                        switch (c) {
                        case '"':
                        case '\\':
                                break;
                        case 't':
                                c = '\t';
                                break;
                        case 'n':
                                c = '\n';
                                break;
                        default:
                                return conf_error(ps, "unsupported escape in a string");
                        }
                } else if ((unsigned char)c < 0x20 && c != '\t')
                        return conf_error(ps, "control character in a string");
                if (n == CONF_VALUE_MAX)
                        return conf_error(ps, "string too long");
                s[n++] = c;
        }
        ps->p++;
        s[n] = '\0';
        *ret = TAKE_PTR(s);
        return 0;
}

static bool is_bare_key_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '_';
}

/* A key: bare, quoted, or dotted ("registry.mirror"), returned joined with
 * '.' (quoted parts as they are). */
static int parse_key(ConfParser *ps, char **ret) {
        _cleanup_free_ char *key = NULL;
        int r;

        for (;;) {
                _cleanup_free_ char *part = NULL;
                char *joined;

                skip_blank(ps);
                if (*ps->p == '"' || *ps->p == '\'') {
                        r = parse_string(ps, &part);
                        if (r < 0)
                                return r;
                } else {
                        size_t n = 0;

                        while (is_bare_key_char(ps->p[n]))
                                n++;
                        if (n == 0)
                                return conf_error(ps, "expected a key");
                        part = strndup(ps->p, n);
                        if (!part)
                                return -ENOMEM;
                        ps->p += n;
                }
                if (asprintf(&joined, "%s%s%s", key ? key : "", key ? "." : "", part) < 0)
                        return -ENOMEM;
                free(key);
                key = joined;
                skip_blank(ps);
                if (*ps->p != '.')
                        break;
                ps->p++;
        }
        *ret = TAKE_PTR(key);
        return 0;
}

static int parse_value(ConfParser *ps, ConfValue *v) {
        int r;

        *v = (ConfValue){};
        if (*ps->p == '"' || *ps->p == '\'') {
                if (ps->p[1] == ps->p[0] && ps->p[2] == ps->p[0])
                        return conf_error(ps, "multi-line strings are not supported");
                v->type = VALUE_STRING;
                return parse_string(ps, &v->s);
        }
        if (*ps->p == '[') {
                v->type = VALUE_ARRAY;
                v->array = calloc(1, sizeof(char *));
                if (!v->array)
                        return -ENOMEM;
                ps->p++;
                for (;;) {
                        char *s;

                        skip_space(ps);
                        if (*ps->p == ']')
                                break;
                        if (*ps->p != '"' && *ps->p != '\'')
                                return conf_error(ps, "only arrays of strings are supported");
                        r = parse_string(ps, &s);
                        if (r < 0)
                                return r;
                        if (strv_length(v->array) >= CONF_ENTRIES_MAX) {
                                free(s);
                                return conf_error(ps, "array too long");
                        }
                        r = strv_push_take(&v->array, s);
                        if (r < 0)
                                return r;
                        skip_space(ps);
                        if (*ps->p == ',') {
                                ps->p++;
                                continue;
                        }
                        if (*ps->p != ']')
                                return conf_error(ps, "expected ',' or ']' in an array");
                        break;
                }
                ps->p++;
                return 0;
        }
        if (strncmp(ps->p, "true", 4) == 0 && !is_bare_key_char(ps->p[4])) {
                v->type = VALUE_BOOL;
                v->b = true;
                ps->p += 4;
                return 0;
        }
        if (strncmp(ps->p, "false", 5) == 0 && !is_bare_key_char(ps->p[5])) {
                v->type = VALUE_BOOL;
                ps->p += 5;
                return 0;
        }
        if ((*ps->p >= '0' && *ps->p <= '9') || *ps->p == '-' || *ps->p == '+') {
                size_t n = 1;

                while ((ps->p[n] >= '0' && ps->p[n] <= '9') || ps->p[n] == '_')
                        n++;
                v->type = VALUE_INT;
                v->s = strndup(ps->p, n);
                if (!v->s)
                        return -ENOMEM;
                ps->p += n;
                return 0;
        }
        return conf_error(ps, "unsupported value (strings, booleans, integers and arrays of "
                              "strings are)");
}

/* The registry names hutch keeps: host[:port] and optionally a path, no
 * blanks or control characters. */
static bool conf_name_is_valid(const char *s) {
        if (!*s || strlen(s) > 255)
                return false;
        for (const char *c = s; *c; c++)
                if ((unsigned char)*c <= 0x20 || *c == 0x7f || *c == '"' || *c == '\\')
                        return false;
        return true;
}

static int conf_set_entry(RegistriesConf *c, ConfParser *ps, const char *key, ConfValue *v) {
        RegistryEntry *e = &c->entries[c->n_entries - 1];

        if (strcmp(key, "prefix") == 0 || strcmp(key, "location") == 0) {
                char **dst = key[0] == 'p' ? &e->prefix : &e->location;

                if (v->type != VALUE_STRING)
                        return conf_error(ps, "a registry's prefix and location are strings");
                if (*v->s && !conf_name_is_valid(v->s))
                        return conf_error(ps, "invalid registry name");
                free(*dst);
                *dst = *v->s ? TAKE_PTR(v->s) : NULL;
                return 0;
        }
        if (strcmp(key, "blocked") == 0) {
                if (v->type != VALUE_BOOL)
                        return conf_error(ps, "blocked is true or false");
                e->blocked = v->b;
        }
        if (strcmp(key, "insecure") == 0) {
                if (v->type != VALUE_BOOL)
                        return conf_error(ps, "insecure is true or false");
                e->insecure = v->b;
        }
        if (strcmp(key, "mirror-by-digest-only") == 0) {
                if (v->type != VALUE_BOOL)
                        return conf_error(ps, "mirror-by-digest-only is true or false");
                e->mirror_by_digest_only = v->b;
        }
        /* mirror-by-digest-only, ...: not acted on. */
        return 0;
}

/* [[registry.mirror]]: one more mirror of this file's last [[registry]]. */
static int conf_add_mirror(RegistriesConf *c, size_t first, ConfParser *ps) {
        RegistryEntry *e;
        bool *b;
        size_t n;
        int r;

        if (c->n_entries <= first)
                return conf_error(ps, "a [[registry.mirror]] belongs to a [[registry]] above it");
        e = &c->entries[c->n_entries - 1];
        n = strv_length(e->mirrors);
        if (n >= 64)
                return conf_error(ps, "more than 64 mirrors of one registry");
        r = strv_extend(&e->mirrors, "");
        if (r < 0)
                return r;
        b = reallocarray(e->mirror_insecure, n + 1, sizeof(bool));
        if (!b)
                return -ENOMEM;
        b[n] = false;
        e->mirror_insecure = b;
        return 0;
}

static int conf_set_mirror(RegistriesConf *c, ConfParser *ps, const char *key, ConfValue *v) {
        RegistryEntry *e = &c->entries[c->n_entries - 1];
        size_t n = strv_length(e->mirrors) - 1;

        if (strcmp(key, "location") == 0) {
                if (v->type != VALUE_STRING || !conf_name_is_valid(v->s) || strchr(v->s, '/'))
                        return conf_error(ps, "a mirror's location is a registry HOST[:PORT]");
                free(e->mirrors[n]);
                e->mirrors[n] = TAKE_PTR(v->s);
                return 0;
        }
        if (strcmp(key, "insecure") == 0) {
                if (v->type != VALUE_BOOL)
                        return conf_error(ps, "insecure is true or false");
                e->mirror_insecure[n] = v->b;
        }
        return 0;
}

/* Whether the first component of @s is a registry host (Docker's rule: a
 * '.' or a ':' in it, or "localhost", and a '/' after it). */
static bool name_is_qualified(const char *s) {
        size_t n = strcspn(s, "/");

        return s[n] == '/' && (memchr(s, '.', n) || memchr(s, ':', n) ||
                               (n == 9 && strncmp(s, "localhost", 9) == 0));
}

/* One [aliases] line: "SHORT" = "HOST/REPO". A later one for the same name
 * (of this file or a later one) replaces it. */
static int conf_set_alias(RegistriesConf *c, ConfParser *ps, const char *key, ConfValue *v) {
        _cleanup_free_ char *where = NULL;
        size_t i, n = strv_length(c->alias_names);
        int r;

        if (v->type != VALUE_STRING)
                return conf_error(ps, "an alias is a string");
        if (!conf_name_is_valid(key) || name_is_qualified(key) || strpbrk(key, ":@"))
                return conf_error(ps, "an alias's name is a short name (NAME or NS/NAME, no "
                                      "registry, tag or digest)");
        if (!conf_name_is_valid(v->s) || !name_is_qualified(v->s) ||
            strchr(strchr(v->s, '/'), ':') || strchr(v->s, '@'))
                return conf_error(ps, "an alias's value is HOST/REPO (a registry, no tag or "
                                      "digest)");
        if (asprintf(&where, "%s:%u", ps->path, ps->line) < 0) {
                where = NULL;
                return -ENOMEM;
        }
        for (i = 0; i < n; i++)
                if (strcmp(c->alias_names[i], key) == 0)
                        break;
        if (i < n) {
                free(c->alias_values[i]);
                c->alias_values[i] = TAKE_PTR(v->s);
                free(c->alias_where[i]);
                c->alias_where[i] = TAKE_PTR(where);
                return 0;
        }
        if (n >= CONF_ENTRIES_MAX)
                return conf_error(ps, "too many aliases");
        r = strv_extend(&c->alias_names, key);
        if (r >= 0)
                r = strv_extend(&c->alias_values, v->s);
        if (r >= 0)
                r = strv_extend(&c->alias_where, where);
        return r;
}

static int conf_set_short_name_mode(RegistriesConf *c, ConfParser *ps, ConfValue *v) {
        if (v->type != VALUE_STRING ||
            (strcmp(v->s, "enforcing") != 0 && strcmp(v->s, "permissive") != 0 &&
             strcmp(v->s, "disabled") != 0))
                return conf_error(ps, "short-name-mode is \"enforcing\", \"permissive\" or "
                                      "\"disabled\"");
        free(c->short_name_mode);
        c->short_name_mode = TAKE_PTR(v->s);
        free(c->short_name_mode_where);
        if (asprintf(&c->short_name_mode_where, "%s:%u", ps->path, ps->line) < 0) {
                c->short_name_mode_where = NULL;
                return -ENOMEM;
        }
        return 0;
}

static int conf_add_entry(RegistriesConf *c, ConfParser *ps) {
        RegistryEntry *n;

        if (c->n_entries >= CONF_ENTRIES_MAX)
                return conf_error(ps, "too many [[registry]] tables");
        n = reallocarray(c->entries, c->n_entries + 1, sizeof(*n));
        if (!n)
                return -ENOMEM;
        c->entries = n;
        n[c->n_entries] = (RegistryEntry){};
        if (asprintf(&n[c->n_entries].where, "%s:%u", ps->path, ps->line) < 0) {
                n[c->n_entries].where = NULL;
                return -ENOMEM;
        }
        c->n_entries++;
        return 0;
}

/* The [[registry]] tables of one file are read into @c after its earlier
 * entries; a later one with the same prefix replaces the earlier (and an
 * entry without a prefix is its location's). */
static int conf_finish_entries(RegistriesConf *c, size_t first, ConfParser *ps) {
        for (size_t i = first; i < c->n_entries; i++) {
                RegistryEntry *e = &c->entries[i];

                if (!e->prefix && !e->location) {
                        ps->line = 0;
                        return hutch_error_set(ps->reterr, EINVAL,
                                               "%s: a [[registry]] with neither prefix nor "
                                               "location",
                                               e->where);
                }
                if (!e->prefix) {
                        e->prefix = strdup(e->location);
                        if (!e->prefix)
                                return -ENOMEM;
                }
                for (char **m = e->mirrors; m && *m; m++)
                        if (!**m) {
                                ps->line = 0;
                                return hutch_error_set(ps->reterr, EINVAL,
                                                       "%s: a [[registry.mirror]] without a "
                                                       "location",
                                                       e->where);
                        }
        }
        for (size_t i = 0; i < c->n_entries; i++)
                for (size_t j = i + 1; j < c->n_entries; j++)
                        if (strcmp(c->entries[i].prefix, c->entries[j].prefix) == 0) {
                                entry_done(&c->entries[i]);
                                memmove(&c->entries[i], &c->entries[i + 1],
                                        (c->n_entries - i - 1) * sizeof(c->entries[0]));
                                c->n_entries--;
                                i--;
                                break;
                        }
        return 0;
}

int registries_conf_parse(RegistriesConf *c, const char *text, const char *path,
                          HutchError *reterr) {
        ConfParser ps = {.p = text, .path = path, .line = 1, .reterr = reterr};
        _cleanup_free_ char *table = NULL;
        size_t first = c->n_entries;
        int r;

        for (;;) {
                _cleanup_free_ char *key = NULL;
                ConfValue v;

                skip_space(&ps);
                if (*ps.p == '\0')
                        break;
                if (*ps.p == '[') {
                        bool array = ps.p[1] == '[';

                        ps.p += array ? 2 : 1;
                        free(table);
                        table = NULL;
                        r = parse_key(&ps, &table);
                        if (r < 0)
                                return r;
                        if (*ps.p != ']' || (array && ps.p[1] != ']'))
                                return conf_error(&ps, "expected ']' after a table name");
                        ps.p += array ? 2 : 1;
                        if (array && strcmp(table, "registry") == 0) {
                                r = conf_add_entry(c, &ps);
                                if (r < 0)
                                        return r;
                        } else if (array && strcmp(table, "registry.mirror") == 0) {
                                r = conf_add_mirror(c, first, &ps);
                                if (r < 0)
                                        return r;
                        } else if (!array && strcmp(table, "registry") == 0)
                                return conf_error(&ps, "registry is an array of tables "
                                                       "([[registry]])");
                        r = end_of_line(&ps);
                        if (r < 0)
                                return r;
                        continue;
                }
                r = parse_key(&ps, &key);
                if (r < 0)
                        return r;
                if (*ps.p != '=')
                        return conf_error(&ps, "expected '=' after a key");
                ps.p++;
                skip_blank(&ps);
                r = parse_value(&ps, &v);
                if (r >= 0 && !table && strcmp(key, "unqualified-search-registries") == 0) {
                        if (v.type != VALUE_ARRAY)
                                r = conf_error(&ps, "unqualified-search-registries is an "
                                                    "array of strings");
                        for (char **s = v.array; r >= 0 && s && *s; s++)
                                if (!conf_name_is_valid(*s) || strchr(*s, '/'))
                                        r = conf_error(&ps, "invalid registry in "
                                                            "unqualified-search-registries");
                        if (r >= 0) {
                                strv_free(c->search);
                                c->search = TAKE_PTR(v.array);
                                free(c->search_where);
                                if (asprintf(&c->search_where, "%s", path) < 0)
                                        c->search_where = NULL, r = -ENOMEM;
                        }
                } else if (r >= 0 && !table && strcmp(key, "short-name-mode") == 0)
                        r = conf_set_short_name_mode(c, &ps, &v);
                else if (r >= 0 && table && strcmp(table, "aliases") == 0)
                        r = conf_set_alias(c, &ps, key, &v);
                else if (r >= 0 && table && strcmp(table, "registry") == 0)
                        r = conf_set_entry(c, &ps, key, &v);
                else if (r >= 0 && table && strcmp(table, "registry.mirror") == 0)
                        r = conf_set_mirror(c, &ps, key, &v);
                if (r >= 0)
                        r = end_of_line(&ps);
                value_done(&v);
                if (r < 0)
                        return r;
        }
        return conf_finish_entries(c, first, &ps);
}

static int conf_read_file(RegistriesConf *c, const char *path, HutchError *reterr) {
        _cleanup_free_ char *text = NULL;
        int r;

        r = read_full_file(path, CONF_FILE_MAX, &text);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot read %s: %s", path, strerror(-r));
        return registries_conf_parse(c, text, path, reterr);
}

static int name_cmp(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static int conf_read_dropins(RegistriesConf *c, const char *dir, HutchError *reterr) {
        _cleanup_strv_free_ char **names = NULL;
        DIR *d = opendir(dir);
        struct dirent *de;
        size_t n;
        int r = 0;

        if (!d)
                return errno == ENOENT || errno == ENOTDIR
                               ? 0
                               : hutch_error_set(reterr, errno, "cannot read %s: %m", dir);
        while ((de = readdir(d))) {
                size_t len = strlen(de->d_name);

                if (de->d_name[0] == '.' || len < 6 || strcmp(de->d_name + len - 5, ".conf") != 0)
                        continue;
                if (strv_length(names) >= CONF_DROPINS_MAX) {
                        r = hutch_error_set(reterr, E2BIG, "%s: more than %d drop-ins", dir,
                                            CONF_DROPINS_MAX);
                        break;
                }
                r = strv_extend(&names, de->d_name);
                if (r < 0)
                        break;
        }
        (void)closedir(d);
        if (r < 0)
                return r;
        n = strv_length(names);
        if (n > 1)
                qsort(names, n, sizeof(char *), name_cmp);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *path = NULL;

                if (asprintf(&path, "%s/%s", dir, names[i]) < 0)
                        return -ENOMEM;
                r = conf_read_file(c, path, reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}

int registries_conf_load_from(const char *main, char *const *dropin_dirs, RegistriesConf **ret,
                              HutchError *reterr) {
        _cleanup_(registries_conf_freep) RegistriesConf *c = calloc(1, sizeof(*c));
        int r;

        if (!c)
                return -ENOMEM;
        if (main) {
                r = conf_read_file(c, main, reterr);
                if (r < 0)
                        return r;
        }
        for (char *const *d = dropin_dirs; d && *d; d++) {
                r = conf_read_dropins(c, *d, reterr);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(c);
        return 0;
}

/* The user's folder for containers' configuration, or NULL. */
static char *user_conf_dir(void) {
        const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
        char *s;

        if (xdg && xdg[0] == '/') {
                if (asprintf(&s, "%s/containers", xdg) < 0)
                        return NULL;
        } else if (home && home[0] == '/') {
                if (asprintf(&s, "%s/.config/containers", home) < 0)
                        return NULL;
        } else
                return NULL;
        return s;
}

/* Read once per process (SECURITY: not a cache across processes; every
 * hutch process reads the files again). Safe as a global: the processes
 * that use it (the CLI, hutch-pull, hutch-image, hutch serve's workers)
 * read it before they start threads, if they ever do. */
static RegistriesConf *the_conf;

int registries_conf_get(const RegistriesConf **ret, HutchError *reterr) {
        _cleanup_free_ char *user = NULL, *user_main = NULL, *user_dropins = NULL;
        const char *env = getenv("CONTAINERS_REGISTRIES_CONF"), *main;
        char *dirs[3] = {};
        int r;

        if (the_conf) {
                *ret = the_conf;
                return 0;
        }
        main = "/etc/containers/registries.conf";
        dirs[0] = (char *)"/etc/containers/registries.conf.d";
        if (geteuid() != 0) {
                user = user_conf_dir();
                if (user && (asprintf(&user_main, "%s/registries.conf", user) < 0 ||
                             asprintf(&user_dropins, "%s/registries.conf.d", user) < 0))
                        return -ENOMEM;
                if (user_main && access(user_main, F_OK) == 0)
                        main = user_main;
                dirs[1] = user_dropins;
        }
        /* $CONTAINERS_REGISTRIES_CONF names the whole configuration: no
         * drop-ins then (a test's, or a one-off's, own file). */
        if (env && *env) {
                main = env;
                dirs[0] = NULL;
        }
        r = registries_conf_load_from(main, dirs, &the_conf, reterr);
        if (r < 0)
                return r;
        *ret = the_conf;
        return 0;
}

int registry_default_domain(const char **ret, HutchError *reterr) {
        const char *env = getenv("HUTCH_REGISTRY_DEFAULT");
        const RegistriesConf *c;
        int r;

        if (env && *env) {
                if (!conf_name_is_valid(env) || strchr(env, '/'))
                        return hutch_error_set(reterr, EINVAL,
                                               "invalid HUTCH_REGISTRY_DEFAULT '%s' (a registry "
                                               "HOST[:PORT])",
                                               env);
                *ret = env;
                return 1;
        }
        r = registries_conf_get(&c, reterr);
        if (r < 0)
                return r;
        if (!c->search || !c->search[0]) {
                *ret = NULL;
                return 0;
        }
        *ret = c->search[0];
        return 1;
}

int registries_conf_alias(const RegistriesConf *c, const char *name, const char **ret_value,
                          const char **ret_where) {
        for (size_t i = 0; c && c->alias_names && c->alias_names[i]; i++)
                if (strcmp(c->alias_names[i], name) == 0) {
                        *ret_value = c->alias_values[i];
                        *ret_where = c->alias_where[i];
                        return 1;
                }
        return 0;
}

int registries_conf_lookup(const RegistriesConf *c, const char *domain, const RegistryEntry **ret,
                           HutchError *reterr) {
        size_t n = strlen(domain);

        *ret = NULL;
        for (size_t i = 0; c && i < c->n_entries; i++) {
                const RegistryEntry *e = &c->entries[i];
                const char *p = e->prefix;
                size_t pn = strlen(p);

                if (strcmp(p, domain) == 0) {
                        *ret = e;
                        continue;
                }
                /* SECURITY: an entry hutch cannot apply exactly (a
                 * wildcard, a repository path) that may concern @domain is
                 * an error, never skipped: it may block or redirect it. */
                if ((strncmp(p, domain, n) == 0 && p[n] == '/') ||
                    (p[0] == '*' && p[1] == '.' && n > pn - 1 &&
                     strcmp(domain + n - (pn - 1), p + 1) == 0))
                        return hutch_error_set(reterr, EOPNOTSUPP,
                                               "%s: [[registry]] prefix '%s' concerns '%s', and "
                                               "hutch applies only prefixes that are a whole "
                                               "registry HOST[:PORT]",
                                               e->where, p, domain);
        }
        return *ret ? 1 : 0;
}
