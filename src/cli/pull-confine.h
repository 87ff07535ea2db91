/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* hutch-pull's download, confined (docs/images-pull.md, "Confinement"):
 * SECURITY: what a registry answers (headers, JSON, redirects, blobs) is
 * parsed by a child process that, before it opens a connection, sets
 * no_new_privs, restricts itself with Landlock to reading what a TLS
 * client needs (the libraries under /usr and /lib*, the CA certificates,
 * the resolver's files in /etc, the auth file, --cert-dir) and writing
 * only the layout folder, and loads the sandbox's seccomp filter (no
 * mount, namespaces, ptrace, bpf, ...). The network stays open (it is what
 * the child is for). The caller (the store's import) runs after the
 * child is gone, on the layout it left.
 * COMPAT(kernel < 5.13 or Landlock disabled): the Landlock part is left
 * out, as for the sandbox's own (`hutch doctor` reports it); the seccomp
 * filter is always loaded, and a failure to load it fails the pull. */

#include "registry/registry.h"

/* registry_pull() in a confined child. @layout_dir is made here (0755)
 * when missing. Returns what registry_pull() returns: 0, the digest in
 * @ret_digest and the layout's fd with its flock in @ret_layout_fd (each
 * may be NULL); or -errno with @reterr (the confinement's own failure
 * named as such). */
int registry_pull_confined(const ImageRef *ref, const PullOptions *o, const char *layout_dir,
                           char **ret_digest, int *ret_layout_fd, HutchError *reterr);
