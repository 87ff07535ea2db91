/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "strv.h"

char **strv_free(char **l) {
        STRV_FOREACH(s, l)
                free(*s);
        free(l);
        return NULL;
}

size_t strv_length(char *const *l) {
        size_t n = 0;

        if (!l)
                return 0;
        while (l[n])
                n++;
        return n;
}

int strv_push_take(char ***l, char *s) {
        size_t n = strv_length(*l);
        char **c;

        if (!s)
                return -ENOMEM;
        if (n > SIZE_MAX / sizeof(char *) - 2) {
                free(s);
                return -ENOMEM;
        }
        c = realloc(*l, sizeof(char *) * (n + 2));
        if (!c) {
                free(s);
                return -ENOMEM;
        }
        c[n] = s;
        c[n + 1] = NULL;
        *l = c;
        return 0;
}

int strv_extend(char ***l, const char *s) {
        return strv_push_take(l, strdup(s));
}

char **strv_copy(char *const *l) {
        _cleanup_strv_free_ char **c = NULL;

        c = calloc(1, sizeof(char *));
        if (!c)
                return NULL;
        for (size_t i = 0; l && l[i]; i++)
                if (strv_extend(&c, l[i]) < 0)
                        return NULL;
        return TAKE_PTR(c);
}

bool strv_contains(char *const *l, const char *s) {
        for (size_t i = 0; l && l[i]; i++)
                if (strcmp(l[i], s) == 0)
                        return true;
        return false;
}

const char *strv_env_get(char *const *l, const char *key) {
        size_t k = strlen(key);

        for (size_t i = 0; l && l[i]; i++)
                if (strncmp(l[i], key, k) == 0 && l[i][k] == '=')
                        return l[i] + k + 1;
        return NULL;
}

int strv_env_set(char ***l, const char *key, const char *value) {
        size_t k = strlen(key);
        char *entry = NULL;

        if (asprintf(&entry, "%s=%s", key, value) < 0)
                return -ENOMEM;
        for (size_t i = 0; *l && (*l)[i]; i++)
                if (strncmp((*l)[i], key, k) == 0 && (*l)[i][k] == '=') {
                        free((*l)[i]);
                        (*l)[i] = entry;
                        return 0;
                }
        return strv_push_take(l, entry);
}

bool env_name_is_valid(const char *key) {
        if (!key || !*key)
                return false;
        if (!(key[0] == '_' || (key[0] >= 'A' && key[0] <= 'Z') ||
              (key[0] >= 'a' && key[0] <= 'z')))
                return false;
        for (const char *p = key + 1; *p; p++)
                if (!(*p == '_' || (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
                      (*p >= '0' && *p <= '9')))
                        return false;
        return true;
}
