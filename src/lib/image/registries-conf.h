/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Which registry a short image name ("python:3.12") means, and where a
 * registry's API is reached, read at run time from the machine's
 * configuration (docs/images-pull.md, "Which registry"): hutch names no
 * registry in its code.
 *
 * The configuration is containers-registries.conf(5), the file podman,
 * buildah and skopeo read: $CONTAINERS_REGISTRIES_CONF alone (no drop-ins
 * then), or else (for a user other than root) $XDG_CONFIG_HOME/containers/registries.conf
 * (~/.config/...) when it exists, or else /etc/containers/registries.conf;
 * then the drop-ins /etc/containers/registries.conf.d/ *.conf and the
 * user's registries.conf.d/ *.conf in name order, a later file's
 * unqualified-search-registries replacing an earlier one's and a later
 * [[registry]] replacing one with the same prefix. Of that file hutch uses:
 *   unqualified-search-registries = ["HOST", ...]   the first is the default
 *   [[registry]] prefix = "HOST" location = "HOST2" the API of HOST is at HOST2
 *   [[registry]] prefix = "HOST" blocked = true     refuse pulls from HOST
 *   [[registry]] prefix = "HOST" insecure = true    plain HTTP allowed for HOST
 *   [[registry.mirror]] location = "HOST" [insecure = B]
 *                                  tried before the [[registry]]'s location
 *   [aliases] "NAME" = "HOST/REPO"                  a short name's image
 *   short-name-mode = "enforcing"|"permissive"|"disabled"
 *                                  several search registries: refused, or
 *                                  each tried in order (registry.h)
 * and reads (to check their syntax) but does not act on the rest
 * (credential-helpers, pull-from-mirror). $HUTCH_REGISTRY_DEFAULT overrides the
 * default registry.
 *
 * The TOML read is the subset those files use: comments, [table] and
 * [[array.of.tables]] headers, bare and quoted keys, and string (basic and
 * literal), boolean, integer and string-array values (an array may span
 * lines). Anything else is an error naming the file and the line. A file
 * is at most 1 MiB, a drop-in folder at most 256 files. */

#include <stdbool.h>

#include "hutch-error.h"
#include "macro.h"

typedef struct RegistryEntry {
        char *prefix;   /* "registry.example.test", "localhost:5000" */
        char *location; /* or NULL: the prefix itself */
        bool blocked;
        char *where; /* "FILE:LINE" of its [[registry]], for messages */
        bool insecure;
        /* [[registry.mirror]]: tried in order before the location (only for
         * a pull by digest with mirror-by-digest-only = true). */
        char **mirrors;
        bool *mirror_insecure;
        bool mirror_by_digest_only;
} RegistryEntry;

typedef struct RegistriesConf {
        char **search; /* unqualified-search-registries, NULL when unset */
        char *search_where;
        RegistryEntry *entries;
        size_t n_entries;
        /* [aliases]: alias_names[i] (a short name, "NAME" or "NS/NAME") is
         * alias_values[i] ("HOST/REPO"), set at alias_where[i] ("FILE:LINE"). */
        char **alias_names, **alias_values, **alias_where;
        char *short_name_mode; /* "enforcing", "permissive", "disabled", or NULL */
        char *short_name_mode_where;
} RegistriesConf;

RegistriesConf *registries_conf_free(RegistriesConf *c);
DEFINE_POINTER_CLEANUP(RegistriesConf, registries_conf_free);

/* Parses the registries.conf text @text (named @path in messages) into @c,
 * merging as a later file does. Returns 0, or -EINVAL with @reterr naming
 * @path and the line, -ENOMEM. */
int registries_conf_parse(RegistriesConf *c, const char *text, const char *path,
                          HutchError *reterr);

/* Reads @main (may be missing) and then the *.conf files of each folder of
 * the NULL-terminated @dropin_dirs (each may be missing) into a new
 * RegistriesConf. Returns 0, or -errno with @reterr naming the file. */
int registries_conf_load_from(const char *main, char *const *dropin_dirs, RegistriesConf **ret,
                              HutchError *reterr);

/* The machine's configuration, read once per process from the paths in the
 * contract above. Returns 0 and a pointer valid until exit, or -errno with
 * @reterr (a file that does not parse). */
int registries_conf_get(const RegistriesConf **ret, HutchError *reterr);

/* The registry a name without one ("busybox", "me/box") belongs to:
 * $HUTCH_REGISTRY_DEFAULT, or the first unqualified-search-registries
 * entry. Returns 1 and the host (borrowed, valid until exit), 0 and NULL
 * when none is configured, or -errno with @reterr. */
int registry_default_domain(const char **ret, HutchError *reterr);

/* The [aliases] entry of the short name @name (without tag or digest):
 * returns 1 with its value and "FILE:LINE" (borrowed from @c), else 0. */
int registries_conf_alias(const RegistriesConf *c, const char *name, const char **ret_value,
                          const char **ret_where);

/* The [[registry]] entry whose prefix is @domain: returns 1 and it in @ret
 * (borrowed from @c), 0 and NULL when there is none, -EOPNOTSUPP with
 * @reterr when an entry hutch does not apply (a "*.HOST" wildcard, a
 * "HOST/PATH" prefix) concerns @domain: it might block or redirect it. */
int registries_conf_lookup(const RegistriesConf *c, const char *domain, const RegistryEntry **ret,
                           HutchError *reterr);
