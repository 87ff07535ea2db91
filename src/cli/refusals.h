/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The lines `hutch run` and `hutch exec` print to stderr after the command
 * when hutch-proxy refused something (docs/network.md, "Refusals"). */

#include <stddef.h>

/* Writes into @buf the line for one refusal of @host:@port with the proxy's
 * @reason, without the "hutch: " prefix and without a newline, e.g.
 * "refused files.example.org:443 (not in the allowlist; --allow-host
 * files.example.org)": the reason in short and the flag that would allow it
 * (none for a deny rule or a secret's tripwire). @count above 1 is said.
 * Cut to @size. */
void refusal_format(const char *host, long long port, const char *reason, long long count,
                    char *buf, size_t size);

/* Logs one such line per entry of @denied_json, a JSON array of
 * {host, port, reason, count} as the outcome's "denied" has it. Text that
 * is not such an array prints nothing. */
void refusals_print(const char *denied_json);
