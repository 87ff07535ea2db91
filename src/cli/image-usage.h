/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The help of `hutch image`, shared by the hutch binary (which answers
 * --help itself, and is the man page's source) and hutch-image (which does
 * the work: it links libarchive). docs/images.md. */

static const char image_usage[] =
        "usage: hutch image import PATH|- [NAME[:TAG]] [-q]\n"
        "       hutch image pull [--tls-verify=false] [--platform OS/ARCH] REF [NAME]\n"
        "       hutch image ls [--json | -q]\n"
        "       hutch image inspect NAME\n"
        "       hutch image rm NAME...\n"
        "       hutch image gc\n\n"
        "Manages the images in the image store ($HUTCH_HOME/images): root filesystems\n"
        "for sandboxes, unpacked once into read-only layers shared by every image that\n"
        "has them (docs/images.md). NAME is NAME[:TAG] (TAG defaults to latest), a\n"
        "digest sha256:HEX, or at least 12 leading hex digits of one.\n"
        "  import   import an OCI image layout (directory or tar), a docker/podman save\n"
        "           archive, or a root filesystem tar (one layer); - reads stdin;\n"
        "           prints the image's digest\n"
        "  pull     download REF from its registry (HOST/NAME:TAG; a short name needs a\n"
        "           default registry) and import it; pull --help for more\n"
        "  ls       list the images: NAME, ID, LAYERS, SIZE, IMPORTED\n"
        "  inspect  the image as JSON: digest, names, layers with sizes, config\n"
        "  rm       remove an image name (the image with its last name), and its\n"
        "           layers no other image uses; refused while a sandbox or snapshot\n"
        "           uses it\n"
        "  gc       remove what interrupted imports left and unused layers\n"
        "  --json     (ls) one JSON array\n"
        "  -q, --quiet  (ls) the names only (the digest of an image without one);\n"
        "             (import) no summary on stderr\n";
