/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch-oci's config.json validation (src/oci/oci-config.c): each
 * refusal names its field, and the configs Podman and Docker send pass. */
#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "oci.h"
#include "test.h"

#define BASE                                                                                       \
        "\"ociVersion\": \"1.0.2\", \"root\": {\"path\": \"rootfs\"},"                             \
        "\"process\": {\"args\": [\"sh\"], \"env\": [\"PATH=/bin\"], \"cwd\": \"/\","              \
        "\"user\": {\"uid\": 0, \"gid\": 0}}"

static int validate(const char *text, HutchError *e) {
        json_error_t jerr;
        json_t *j = json_loads(text, 0, &jerr);
        int r;

        if (!j)
                fail_msg("bad test JSON: %s: %s", jerr.text, text);
        *e = (HutchError){};
        r = oci_config_validate(j, e);
        json_decref(j);
        return r;
}

TEST(minimal_config_passes) {
        HutchError e;

        ASSERT_OK(validate("{" BASE ", \"linux\": {\"namespaces\": [{\"type\": \"mount\"}]}}", &e));
}

TEST(docker_zero_fields_ask_for_nothing) {
        HutchError e;

        ASSERT_OK(validate("{" BASE ", \"linux\": {\"resources\": {\"blockIO\": {\"weight\": 0},"
                           "\"cpu\": {\"shares\": 0}}}}",
                           &e));
        /* Twin: a real blockIO weight is refused by name. */
        ASSERT_ERROR(validate("{" BASE ", \"linux\": {\"resources\": {\"blockIO\": {\"weight\": "
                              "10}}}}",
                              &e),
                     EOPNOTSUPP);
        ASSERT_TRUE(strstr(e.msg, "/linux/resources/blockIO") != NULL);
}

TEST(unknown_fields_are_refused_by_pointer) {
        HutchError e;

        ASSERT_ERROR(validate("{" BASE ", \"linux\": {\"intelRdt\": {\"closID\": \"x\"}}}", &e),
                     EOPNOTSUPP);
        ASSERT_TRUE(strstr(e.msg, "/linux/intelRdt") != NULL);
        ASSERT_ERROR(validate("{" BASE ", \"solaris\": {\"milestone\": \"x\"}}", &e), EOPNOTSUPP);
        ASSERT_TRUE(strstr(e.msg, "/solaris") != NULL);
        ASSERT_ERROR(
                validate("{" BASE ", \"linux\": {\"namespaces\": [{\"type\": \"time\"}]}}", &e),
                EOPNOTSUPP);
        ASSERT_ERROR(validate("{" BASE ", \"annotations\": {\"io.hutch.colour\": \"red\"}}", &e),
                     EOPNOTSUPP);
}

TEST(bad_values_are_einval) {
        HutchError e;

        ASSERT_ERROR(validate("{\"root\": {\"path\": \"r\"}, \"process\": {\"args\": []}}", &e),
                     EINVAL);
        ASSERT_ERROR(validate("{" BASE ", \"mounts\": [{\"destination\": \"rel\"}]}", &e), EINVAL);
        ASSERT_ERROR(validate("{" BASE ", \"hooks\": {\"prestart\": [{\"path\": \"rel\"}]}}", &e),
                     EINVAL);
        ASSERT_ERROR(
                validate("{" BASE ", \"hooks\": {\"startContainer\": [{\"path\": \"x\"}]}}", &e),
                EINVAL);
        ASSERT_ERROR(
                validate("{" BASE ", \"annotations\": {\"io.hutch.secret\": \"T@x.test\"}}", &e),
                EINVAL);
        ASSERT_TRUE(strstr(e.msg, "from a file on the host") != NULL);
        ASSERT_ERROR(validate("{" BASE ", \"annotations\": {\"io.hutch.timeout\": \"soon\"}}", &e),
                     EINVAL);
        ASSERT_TRUE(strstr(e.msg, "io.hutch.timeout") != NULL);
        ASSERT_ERROR(validate("{\"root\": {}, \"process\": {\"args\": [\"sh\"]}}", &e), EINVAL);
}

TEST(sysctls_must_be_namespaced_and_plain) {
        HutchError e;

        ASSERT_OK(validate("{" BASE ", \"linux\": {\"namespaces\": [{\"type\": \"network\"}],"
                           "\"sysctl\": {\"net.ipv4.ping_group_range\": \"0 0\"}}}",
                           &e));
        /* Twin: the same key without a network namespace is the host's. */
        ASSERT_ERROR(validate("{" BASE ", \"linux\": {\"sysctl\": "
                              "{\"net.ipv4.ping_group_range\": \"0 0\"}}}",
                              &e),
                     EOPNOTSUPP);
        ASSERT_ERROR(validate("{" BASE ", \"linux\": {\"namespaces\": [{\"type\": \"ipc\"}],"
                              "\"sysctl\": {\"kernel.panic\": \"0\"}}}",
                              &e),
                     EOPNOTSUPP);
        ASSERT_ERROR(validate("{" BASE ", \"linux\": {\"namespaces\": [{\"type\": \"network\"}],"
                              "\"sysctl\": {\"net/../../kernel/panic\": \"0\"}}}",
                              &e),
                     EINVAL);
}

TEST(seccomp_profile_shape) {
        HutchError e;

        ASSERT_OK(validate("{" BASE ", \"linux\": {\"seccomp\": {\"defaultAction\": "
                           "\"SCMP_ACT_ERRNO\", \"syscalls\": [{\"names\": [\"read\"], \"action\": "
                           "\"SCMP_ACT_ALLOW\"}]}}}",
                           &e));
        ASSERT_ERROR(validate("{" BASE ", \"linux\": {\"seccomp\": {\"defaultAction\": "
                              "\"SCMP_ACT_NOTIFY\"}}}",
                              &e),
                     EOPNOTSUPP);
        ASSERT_ERROR(validate("{" BASE ", \"linux\": {\"seccomp\": {\"defaultAction\": "
                              "\"SCMP_ACT_ALLOW\", \"listenerPath\": \"/x\"}}}",
                              &e),
                     EOPNOTSUPP);
}

TEST(capability_names) {
        ASSERT_EQ(oci_cap_from_name("CAP_CHOWN"), 0);
        ASSERT_EQ(oci_cap_from_name("CAP_CHECKPOINT_RESTORE"), 40);
        ASSERT_ERROR(oci_cap_from_name("CAP_NOPE"), EINVAL);
        ASSERT_EQ(oci_namespace_flag("time"), 0);
}

DEFINE_TEST_MAIN
