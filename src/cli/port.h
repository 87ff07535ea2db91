/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* `hutch port` (port.c) and what run and create share of it. */

/* Warns, once per entry of @ports (a policy's "ports"), about a published
 * port bound to an address other than loopback: the network can reach
 * the sandbox's port through it. */
void ports_warn_exposed(char *const *ports);
