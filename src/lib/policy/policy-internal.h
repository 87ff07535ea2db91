/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Private to src/lib/policy/ (and its unit tests): the building blocks the
 * flag-style spec parsers of policy.h and the JSON decoder of policy-json.c
 * share, so both apply exactly the same rules.
 *
 * @ctx names where a value came from for error messages, e.g. "-v '/a:b'";
 * a message then reads "bind target 'b' in -v '/a:b' must be ...". With a
 * NULL @ctx the message names only the value ("bind target 'b' must be
 * ..."), and the JSON decoder puts the JSON pointer in front. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hutch-error.h"
#include "policy/policy.h"

/* The smallest tmpfs size accepted: one page on every architecture. */
#define POLICY_MIN_TMPFS_SIZE 4096ULL

/* Sets the workspace to @path (made absolute against the current directory
 * and canonicalised with realpath() when it exists) with @mode.
 * -EINVAL for an empty @path, -ENOENT (or another getcwd() errno) when
 * @path is relative and the current directory is gone, -ENOMEM. */
int policy_set_workspace_path(Policy *p, const char *path, WorkspaceMode mode, const char *ctx,
                              HutchError *reterr);

/* Parses "DIR[:mount|:copy|:overlay]" (see policy_set_workspace_spec()). */
int policy_set_workspace_spec_ctx(Policy *p, const char *spec, const char *ctx, HutchError *reterr);

/* Checks that @target can be a bind (@is_tmpfs false) or tmpfs target:
 * absolute, without "." or ".." components, and not one of the paths the
 * sandbox sets up itself (/, /proc, /dev, /usr, /etc, ... and below; a
 * tmpfs may replace /dev/shm). -EINVAL otherwise. */
int policy_check_target(const char *target, bool is_tmpfs, const char *ctx, HutchError *reterr);

/* Appends a bind, replacing an earlier one for the same target. @source is
 * made absolute (and canonical when it exists); @target is checked with
 * policy_check_target() and stored without repeated or trailing slashes.
 * -EINVAL, -E2BIG past POLICY_MAX_BINDS, -ENOMEM, or getcwd()'s errno. */
int policy_add_bind(Policy *p, const char *source, const char *target, bool read_only,
                    const char *ctx, HutchError *reterr);

/* Checks a tmpfs size: -EINVAL below POLICY_MIN_TMPFS_SIZE. @text is the
 * size as the user wrote it, for the message. */
int policy_check_tmpfs_size(uint64_t size, const char *text, const char *ctx, HutchError *reterr);

/* Appends a tmpfs, replacing an earlier one for the same path. -EINVAL,
 * -E2BIG past POLICY_MAX_TMPFS, -ENOMEM. */
int policy_add_tmpfs(Policy *p, const char *path, uint64_t size, const char *ctx,
                     HutchError *reterr);

/* Sets KEY=@value, or with a NULL @value passes KEY through from the
 * caller. -EINVAL for an invalid name, -E2BIG past POLICY_MAX_ENV entries
 * (set and passed together), -ENOMEM. */
int policy_add_env(Policy *p, const char *key, const char *value, const char *ctx,
                   HutchError *reterr);

/* Finds the value named by the JSON pointer @pointer in the JSON text
 * @text of @len bytes, which must already have been accepted by a JSON
 * parser. With @want_key and a pointer whose last segment is an object
 * member, the position of that member's key is returned instead of its
 * value's. Writes the 1-based line and column (in characters, as jansson
 * counts them) and returns 0; -ENOENT if the pointer names nothing in the
 * text, -EINVAL if the text or the pointer is malformed, -ENOMEM. */
int json_locate(const char *text, size_t len, const char *pointer, bool want_key,
                unsigned *ret_line, unsigned *ret_column);

/* Checks the limits of a policy filled in any way: ranges as
 * policy_set_limit() and memory + swap at least memory. -EINVAL. */
int policy_validate_limits(const Policy *p, HutchError *reterr);

/* Checks the network fields of a policy filled in any way: every entry as
 * the policy_add_*() functions check it, and no --allow-host together with
 * an explicit --network none. -EINVAL or -E2BIG. */
int policy_validate_network(const Policy *p, HutchError *reterr);

/* Checks the published ports of a policy filled in any way: each entry as
 * policy_add_port() checks it, within POLICY_MAX_PORTS, and none with
 * backend vm (-EOPNOTSUPP: not supported there yet, docs/vm.md). */
int policy_validate_ports(const Policy *p, HutchError *reterr);

/* Makes @path absolute against the current directory (lexically, then
 * canonical when it exists). Returns 0 and a new string, or -errno. */
int policy_path_make_absolute(const char *path, char **ret);

/* Checks the secrets and upstream CAs of a policy filled in any way: each
 * secret as policy_add_secret() checks it, no two of the same name, no
 * secret together with an explicit --network none, and every upstream CA
 * file exists. -EINVAL, -EEXIST, -ENOENT or -E2BIG. */
int policy_validate_secrets(const Policy *p, HutchError *reterr);
