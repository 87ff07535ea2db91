/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The preview route of hutch serve (docs/api.md "Preview"):
 * ANY /v1/sandboxes/{name}/ports/{port}[/PATH][?QUERY] goes, as bytes, to
 * 127.0.0.1:{port} inside the running sandbox (hutch_port_connect()),
 * with the request target rewritten to /PATH[?QUERY]. The front
 * (serve-front.c) authenticates the head as any other, then the
 * connection becomes a tunnel: a WebSocket upgrade passes through as it
 * is. One target is not a preview: DELETE .../ports/{port} with nothing
 * after the port unpublishes the port (serve-ports.c); the front passes it
 * to the API. These are the pure parts, unit-tested (tests/unit/test-serve.c). */

#include <stdbool.h>
#include <stddef.h>

#include "hutch.h"

#define SERVE_PREVIEW_NAME_MAX 64

/* Whether the request target @target (@len bytes) is a preview one. On
 * true: the sandbox name (1-63 bytes of [A-Za-z0-9_.-]) in @ret_name,
 * the port (1-65535) in @ret_port, and the offset in @target of what goes
 * to the sandbox ("/PATH?QUERY"; == @len when nothing follows the port).
 * A target that starts like one but is malformed (a bad name or port) is
 * false too: it goes to the API, which answers 404. */
bool serve_preview_target(const char *target, size_t len, char ret_name[SERVE_PREVIEW_NAME_MAX],
                          unsigned *ret_port, size_t *ret_rest);

/* The head that goes to the sandbox: @head (@len bytes, checked by
 * serve_head_check(); its target at @target/@target_len) with the target
 * replaced by the rest (@rest: offset in the target; "/" when empty, a
 * query alone gets "/" before it). SECURITY: every Authorization header
 * is dropped (it carries the API's bearer token, which the sandbox must
 * never see). The other headers pass as they are (Connection and
 * Keep-Alive too: the front checks and rewrites each request of a kept
 * preview connection, serve-front.c). A new string in @ret (its length in
 * @ret_len), or -ENOMEM. */
int serve_preview_head(const char *head, size_t len, size_t target, size_t target_len, size_t rest,
                       char **ret, size_t *ret_len);

/* Whether the head @head (@len bytes) has an Upgrade header (WebSocket):
 * then the preview connection becomes a tunnel of bytes. */
bool serve_head_has_upgrade(const char *head, size_t len);
