/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The parts of an image sandbox that need no kernel: the image's User
 * found in its /etc/passwd and /etc/group, docker's rules for the
 * command, and the policy field "image". Every error each can return. */
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"
#include "sandbox/image-root.h"
#include "strv.h"
#include "test.h"

static const char passwd[] = "root:x:0:0:root:/root:/bin/sh\n"
                             "# a comment\n"
                             "broken line without fields\n"
                             "bad:x:notanumber:1:bad:/bad:/bin/sh\n"
                             "app:x:1000:1001:app:/home/app:/bin/sh\n"
                             "nohome:x:1002:1002:nohome:relative:/bin/sh\n";
static const char group[] = "root:x:0:\n"
                            "app:x:1001:\n"
                            "wheel:x:10:root,app\n"
                            "audio:x:29:other,app\n"
                            "video:x:44:application\n"
                            "junk:x:nan:app\n";

TEST(user_by_name_takes_passwd_ids_and_member_groups) {
        HutchError e = {};
        ImageUser u;

        ASSERT_OK(image_user_resolve("app", passwd, group, &u, &e));
        ASSERT_EQ(u.uid, 1000);
        ASSERT_EQ(u.gid, 1001);
        ASSERT_STREQ(u.name, "app");
        ASSERT_STREQ(u.home, "/home/app");
        /* Its gid first, then the groups that list "app" (not
         * "application", not the malformed one). */
        ASSERT_EQ(u.n_groups, 3);
        ASSERT_EQ(u.groups[0], 1001);
        ASSERT_EQ(u.groups[1], 10);
        ASSERT_EQ(u.groups[2], 29);
}

TEST(user_with_group_takes_only_that_group) {
        HutchError e = {};
        ImageUser u;

        ASSERT_OK(image_user_resolve("app:wheel", passwd, group, &u, &e));
        ASSERT_EQ(u.uid, 1000);
        ASSERT_EQ(u.gid, 10);
        ASSERT_EQ(u.n_groups, 1);
        ASSERT_OK(image_user_resolve("app:4321", passwd, group, &u, &e));
        ASSERT_EQ(u.gid, 4321);
        ASSERT_OK(image_user_resolve("1000:audio", passwd, group, &u, &e));
        ASSERT_EQ(u.uid, 1000);
        ASSERT_EQ(u.gid, 29);
}

TEST(numeric_user_need_not_be_in_passwd) {
        HutchError e = {};
        ImageUser u;

        ASSERT_OK(image_user_resolve("1000", passwd, group, &u, &e));
        ASSERT_STREQ(u.name, "app");
        ASSERT_EQ(u.gid, 1001);
        ASSERT_OK(image_user_resolve("1234:4321", NULL, NULL, &u, &e));
        ASSERT_EQ(u.uid, 1234);
        ASSERT_EQ(u.gid, 4321);
        ASSERT_STREQ(u.name, "");
        ASSERT_STREQ(u.home, "/");
        ASSERT_OK(image_user_resolve("77", passwd, group, &u, &e));
        ASSERT_EQ(u.gid, 0);
        /* A relative home in the image's passwd is not used. */
        ASSERT_OK(image_user_resolve("nohome", passwd, group, &u, &e));
        ASSERT_STREQ(u.home, "/");
        /* root is always there (--user root in an image without passwd). */
        ASSERT_OK(image_user_resolve("root", NULL, NULL, &u, &e));
        ASSERT_EQ(u.uid, 0);
        ASSERT_EQ(u.gid, 0);
        ASSERT_STREQ(u.home, "/root");
        ASSERT_OK(image_user_resolve("0", NULL, NULL, &u, &e));
        ASSERT_EQ(u.uid, 0);
}

TEST(user_errors) {
        HutchError e = {};
        ImageUser u;

        ASSERT_ERROR(image_user_resolve("ghost", passwd, group, &u, &e), ENOENT);
        ASSERT_TRUE(strstr(e.msg, "'ghost'") != NULL);
        ASSERT_ERROR(image_user_resolve("app", NULL, group, &u, &e), ENOENT);
        ASSERT_ERROR(image_user_resolve("app:nogroup", passwd, group, &u, &e), ENOENT);
        ASSERT_TRUE(strstr(e.msg, "'nogroup'") != NULL);
        ASSERT_ERROR(image_user_resolve("bad", passwd, group, &u, &e), ENOENT);
        ASSERT_ERROR(image_user_resolve("", passwd, group, &u, &e), EINVAL);
        ASSERT_ERROR(image_user_resolve(NULL, passwd, group, &u, &e), EINVAL);
        ASSERT_ERROR(image_user_resolve(":1", passwd, group, &u, &e), EINVAL);
        ASSERT_ERROR(image_user_resolve("app:", passwd, group, &u, &e), EINVAL);
        ASSERT_ERROR(image_user_resolve("99999999999", passwd, group, &u, &e), EINVAL);
        ASSERT_ERROR(image_user_resolve("4294967295", passwd, group, &u, &e), EINVAL);
        ASSERT_ERROR(image_user_resolve("1:4294967295", passwd, group, &u, &e), EINVAL);
}

static ImageRoot *image_with(char **entrypoint, char **cmd) {
        ImageRoot *img = calloc(1, sizeof(ImageRoot));

        if (!img)
                return NULL;
        img->name = strdup("img");
        img->entrypoint = entrypoint ? strv_copy(entrypoint) : NULL;
        img->cmd = cmd ? strv_copy(cmd) : NULL;
        return img;
}

TEST(command_follows_dockers_rules) {
        _cleanup_(image_root_freep) ImageRoot *both = NULL, *cmd_only = NULL, *ep_only = NULL;
        _cleanup_strv_free_ char **a = NULL, **b = NULL, **c = NULL, **d = NULL;
        HutchError e = {};

        both = image_with((char *[]){"/bin/echo", "ep", NULL}, (char *[]){"c1", NULL});
        cmd_only = image_with(NULL, (char *[]){"sh", "-c", "x", NULL});
        ep_only = image_with((char *[]){"/bin/tini", NULL}, NULL);
        ASSERT_NOT_NULL(both);
        ASSERT_NOT_NULL(cmd_only);
        ASSERT_NOT_NULL(ep_only);

        ASSERT_OK(image_root_command(both, NULL, &a, &e));
        ASSERT_EQ(strv_length(a), 3);
        ASSERT_STREQ(a[2], "c1");
        ASSERT_OK(image_root_command(both, (char *[]){"given", NULL}, &b, &e));
        ASSERT_EQ(strv_length(b), 3);
        ASSERT_STREQ(b[2], "given");
        ASSERT_OK(image_root_command(cmd_only, (char *[]){"ls", NULL}, &c, &e));
        ASSERT_EQ(strv_length(c), 1);
        ASSERT_STREQ(c[0], "ls");
        ASSERT_OK(image_root_command(ep_only, (char *[]){NULL}, &d, &e));
        ASSERT_EQ(strv_length(d), 1);
}

TEST(command_without_any_is_einval) {
        _cleanup_(image_root_freep) ImageRoot *none = image_with(NULL, NULL);
        _cleanup_strv_free_ char **a = NULL;
        HutchError e = {};

        ASSERT_NOT_NULL(none);
        ASSERT_ERROR(image_root_command(none, NULL, &a, &e), EINVAL);
        ASSERT_TRUE(strstr(e.msg, "no Entrypoint or Cmd") != NULL);
        ASSERT_NULL(a);
}

TEST(policy_image_field) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        _cleanup_free_ char *json = NULL;
        HutchError e = {};

        ASSERT_NOT_NULL(p);
        ASSERT_OK(policy_set_image(p, "localhost:5000/x/y:2", &e));
        ASSERT_OK(policy_set_image(p, "sha256:0123abcd", &e));
        ASSERT_ERROR(policy_set_image(p, "", &e), EINVAL);
        ASSERT_ERROR(policy_set_image(p, NULL, &e), EINVAL);
        ASSERT_ERROR(policy_set_image(p, "-rf", &e), EINVAL);
        ASSERT_ERROR(policy_set_image(p, "a b", &e), EINVAL);
        ASSERT_ERROR(policy_set_image(p, "../x", &e), EINVAL);
        ASSERT_STREQ(p->image, "sha256:0123abcd");
        ASSERT_OK(policy_validate(p, &e));
        ASSERT_OK(policy_to_json(p, &json));
        ASSERT_TRUE(strstr(json, "\"image\": \"sha256:0123abcd\"") != NULL ||
                    strstr(json, "\"image\":\"sha256:0123abcd\"") != NULL);
        /* The microVM backend takes it too (docs/vm.md, "Images"). */
        ASSERT_OK(policy_set_backend(p, "vm", &e));
        ASSERT_OK(policy_validate(p, &e));
}

TEST(policy_image_from_json) {
        _cleanup_(policy_freep) Policy *p = policy_new();
        const char *ok = "{\"image\": \"busybox:latest\"}";
        const char *bad = "{\"image\": \"no spaces\"}";
        HutchError e = {};

        ASSERT_NOT_NULL(p);
        ASSERT_OK(policy_load_json(p, ok, strlen(ok), &e));
        ASSERT_STREQ(p->image, "busybox:latest");
        ASSERT_ERROR(policy_load_json(p, bad, strlen(bad), &e), EINVAL);
}

DEFINE_TEST_MAIN
