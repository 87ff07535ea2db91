/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The pure parts of `hutch mcp` (mcp.c), apart so unit tests can cover
 * them: protocol version negotiation, the managed sandbox's default name
 * and the paths the tools take. */

#include <stdbool.h>
#include <stddef.h>

/* The protocol revisions the server speaks, newest first (NULL-ended). */
extern const char *const mcp_protocol_versions[];

/* The version to answer an initialize request asking for @requested: the
 * same when the server speaks it, else the newest the server speaks (the
 * client then decides whether it can go on; MCP lifecycle). */
const char *mcp_protocol_negotiate(const char *requested);

/* Whether negotiated version @v is @min or later (versions are dates). */
bool mcp_version_at_least(const char *v, const char *min);

#define MCP_NAME_MAX 63

/* The managed sandbox's default name for the workspace folder @cwd (absolute):
 * "mcp-<base>-<hash>", <base> the last component of @cwd lowercased, with
 * anything outside [a-z0-9_.-] turned into '-' and cut at 24 bytes ("root"
 * for "/"), <hash> 8 hex digits of a 64-bit FNV-1a hash of the whole path,
 * so that two folders with one name get two sandboxes. Always a valid
 * store name. Writes @ret (MCP_NAME_MAX + 1 bytes). */
void mcp_default_name(const char *cwd, char ret[MCP_NAME_MAX + 1]);

/* Normalises a path a tool was given: "." and empty components are
 * dropped, ".." removes the component before it. A relative path stays
 * relative (to the workspace: "." for the workspace itself); an absolute
 * one stays absolute (inside the sandbox). When @base (absolute and
 * normalised) is not NULL, a relative result is put below it.
 * Returns 0 with a new string in @ret, -EINVAL for an empty path,
 * -ENAMETOOLONG beyond 4095 bytes, and -EPERM when ".." climbs above the
 * start: above the workspace for a relative path, above "/" for an absolute
 * one. SECURITY: this is a clear refusal of an attempt to leave, not the
 * containment itself, which the sandbox's own path resolution provides
 * (hutch.h: files inside a sandbox). */
int mcp_path_normalize(const char *path, const char *base, char **ret);
