/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <string.h>
#include <sys/utsname.h>

#include "image/image-store.h"
#include "macro.h"

/* uname(2)'s machine to the OCI (GOARCH) name an image config uses. */
static const struct {
        const char *machine, *oci;
} arch_names[] = {
        {"x86_64", "amd64"},       {"aarch64", "arm64"},
        {"aarch64_be", "arm64be"}, {"i386", "386"},
        {"i486", "386"},           {"i586", "386"},
        {"i686", "386"},           {"armv6l", "arm"},
        {"armv7l", "arm"},         {"armv8l", "arm"},
        {"ppc64le", "ppc64le"},    {"ppc64", "ppc64"},
        {"s390x", "s390x"},        {"riscv64", "riscv64"},
        {"mips64", "mips64"},      {"loongarch64", "loong64"},
};

int image_host_architecture(char *buf, size_t size) {
        struct utsname u;
        const char *name;

        if (uname(&u) < 0)
                return negative_errno();
        name = u.machine;
        for (size_t i = 0; i < ELEMENTSOF(arch_names); i++)
                if (strcmp(u.machine, arch_names[i].machine) == 0) {
                        name = arch_names[i].oci;
                        break;
                }
        if (strlen(name) >= size)
                return -ENAMETOOLONG;
        memcpy(buf, name, strlen(name) + 1);
        return 0;
}

int image_check_platform(const Image *im, const char *name, HutchError *reterr) {
        const char *os = im->config.os, *arch = im->config.architecture;
        char host[sizeof(((struct utsname *)NULL)->machine)];
        int r;

        r = image_host_architecture(host, sizeof(host));
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot tell the host's architecture: %s",
                                       strerror(-r));
        /* SECURITY (fail closed): a program of another architecture would
         * not run (exec fails with ENOEXEC), or would run emulated where
         * binfmt_misc registers an interpreter (a host program, qemu-user,
         * that the sandbox did not ask for); neither is what was asked
         * for. A config that names no platform is taken as the host's. */
        if ((os && os[0] && strcmp(os, "linux") != 0) ||
            (arch && arch[0] && strcmp(arch, host) != 0))
                return hutch_error_set(reterr, ENOEXEC,
                                       "the image '%s' is for %.32s/%.32s, but this host is "
                                       "linux/%s: hutch runs images of the host's platform only",
                                       name, os && os[0] ? os : "linux",
                                       arch && arch[0] ? arch : host, host);
        return 0;
}
