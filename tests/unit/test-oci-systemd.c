/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch-oci's reading of the systemd form of cgroupsPath
 * (src/oci/oci-systemd.c): the paths engines send give the scope runc
 * would make, and each bad shape is refused naming the field. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "oci.h"
#include "test.h"

static int parse(const char *path, char **slice, char **unit, HutchError *e) {
        *slice = *unit = NULL;
        *e = (HutchError){};
        return oci_systemd_path_parse(path, "ctr1", slice, unit, e);
}

static void assert_parses(const char *path, const char *want_slice, const char *want_unit) {
        char *slice, *unit;
        HutchError e;

        ASSERT_OK(parse(path, &slice, &unit, &e));
        ASSERT_STREQ(slice, want_slice);
        ASSERT_STREQ(unit, want_unit);
        free(slice);
        free(unit);
}

static void assert_refused(const char *path, int err, const char *named) {
        char *slice, *unit;
        HutchError e;

        ASSERT_ERROR(parse(path, &slice, &unit, &e), err);
        ASSERT_STREQ(e.pointer, "/linux/cgroupsPath");
        ASSERT_TRUE(strstr(e.msg, named) != NULL);
        /* Written only on success. */
        ASSERT_TRUE(slice == NULL && unit == NULL);
}

TEST(engines_paths_give_runcs_scopes) {
        assert_parses("system.slice:docker:abc", "system.slice", "docker-abc.scope");
        assert_parses("machine.slice:libpod:0123", "machine.slice", "libpod-0123.scope");
        assert_parses("kubepods-burstable-pod1_2.slice:cri-containerd:f00",
                      "kubepods-burstable-pod1_2.slice", "cri-containerd-f00.scope");
        /* An empty slice is system.slice; no prefix, no dash. */
        assert_parses(":libpod:x", "system.slice", "libpod-x.scope");
        assert_parses("user.slice::x", "user.slice", "x.scope");
        assert_parses("-.slice:p:x", "-.slice", "p-x.scope");
        /* No path with --systemd-cgroup: runc's default, with our name. */
        assert_parses(NULL, "system.slice", "hutch-oci-ctr1.scope");
        assert_parses("", "system.slice", "hutch-oci-ctr1.scope");
}

TEST(bad_shapes_are_refused_naming_them) {
        assert_refused("a:b", EINVAL, "'a:b'");
        assert_refused("a.slice:b:c:d", EINVAL, "'a.slice:b:c:d'");
        assert_refused("system.slice:p:..", EINVAL, "'..'");
        assert_refused("system.slice:../p:x", EINVAL, "'../p'");
        assert_refused("system.slice:p:a/b", EINVAL, "'a/b'");
        assert_refused("system.slice:p:a b", EINVAL, "'a b'");
        assert_refused("system.slice:p:", EINVAL, "no name");
        assert_refused("notaslice:p:x", EINVAL, "'notaslice'");
        assert_refused(".slice:p:x", EINVAL, "'.slice'");
        assert_refused("-a.slice:p:x", EINVAL, "'-a.slice'");
        assert_refused("a-.slice:p:x", EINVAL, "'a-.slice'");
        assert_refused("a--b.slice:p:x", EINVAL, "'a--b.slice'");
        /* A slice as the container's own unit: runc's case, not ours. */
        assert_refused("system.slice:p:inner.slice", EOPNOTSUPP, "slice");
}

DEFINE_TEST_MAIN
