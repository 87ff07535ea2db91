/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The microVM backend's pure parts: the agent's frames, the module
 * resolver, the cpio writer, QEMU's command line and the finders. */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent-protocol.h"
#include "crc32.h"
#include "fd-util.h"
#include "rm-rf.h"
#include "sha256.h"
#include "strv.h"
#include "test-util.h"
#include "test.h"
#include "vm/vm-internal.h"
#include "vm/vm.h"

TEST(crc32_known_value) {
        ASSERT_EQ(crc32_update(0, "123456789", 9), 0xcbf43926U);
        ASSERT_EQ(crc32_update(0, "", 0), 0U);
        /* Continuing equals computing at once. */
        ASSERT_EQ(crc32_update(crc32_update(0, "1234", 4), "56789", 5), 0xcbf43926U);
}

static void assert_sha256(const void *data, size_t len, const char *hex) {
        unsigned char md[SHA256_DIGEST_SIZE];
        char got[2 * SHA256_DIGEST_SIZE + 1];
        Sha256 s;

        sha256_init(&s);
        /* In uneven pieces: the block boundary must not matter. */
        for (size_t off = 0; off < len;) {
                size_t n = MIN(len - off, (size_t)7);

                sha256_update(&s, (const char *)data + off, n);
                off += n;
        }
        sha256_finish(&s, md);
        for (size_t i = 0; i < sizeof(md); i++)
                (void)snprintf(got + 2 * i, 3, "%02x", md[i]);
        ASSERT_STREQ(got, hex);
}

TEST(sha256_known_vectors) {
        static char million[1000000];

        assert_sha256("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_sha256("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56,
                      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
        memset(million, 'a', sizeof(million));
        assert_sha256(million, sizeof(million),
                      "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

/* A frame as bytes, through a socketpair: what agent_frame_write() puts
 * on the wire. */
static size_t frame_bytes(AgentMsg type, uint8_t chan, const void *payload, size_t len,
                          unsigned char *out, size_t size) {
        int sv[2];
        ssize_t n;

        ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
        ASSERT_OK(agent_frame_write(sv[0], type, chan, payload, len));
        (void)close(sv[0]);
        n = loop_read(sv[1], out, size);
        (void)close(sv[1]);
        ASSERT_TRUE(n >= AGENT_HEADER_SIZE);
        return (size_t)n;
}

static void reader_feed(AgentReader *r, const unsigned char *b, size_t len) {
        int p[2];

        ASSERT_OK(pipe2(p, O_CLOEXEC));
        ASSERT_OK(loop_write(p[1], b, len));
        (void)close(p[1]);
        ASSERT_EQ(agent_reader_fill(r, p[0]), (ssize_t)len);
        (void)close(p[0]);
}

TEST(frame_round_trip_and_pieces) {
        static AgentReader r;
        unsigned char b[256];
        size_t n = frame_bytes(AGENT_MSG_STDOUT, 7, "hello", 5, b, sizeof(b));
        AgentFrame f;

        ASSERT_EQ(n, (size_t)AGENT_HEADER_SIZE + 5);
        ASSERT_EQ(agent_get_le32(b), AGENT_MAGIC);
        /* Byte by byte: nothing until the frame is whole. */
        r = (AgentReader){};
        for (size_t i = 0; i < n; i++) {
                ASSERT_EQ(agent_reader_next(&r, &f), 0);
                reader_feed(&r, b + i, 1);
        }
        ASSERT_EQ(agent_reader_next(&r, &f), 1);
        ASSERT_EQ(f.type, AGENT_MSG_STDOUT);
        ASSERT_EQ(f.chan, 7U);
        ASSERT_EQ(f.len, 5U);
        ASSERT_TRUE(memcmp(f.payload, "hello", 5) == 0);
        ASSERT_EQ(agent_reader_next(&r, &f), 0);

        /* Two frames in one read: both come out, in order. */
        {
                unsigned char two[512];
                size_t m = frame_bytes(AGENT_MSG_PING, 0, NULL, 0, two, sizeof(two));

                memcpy(two + m, b, n);
                r = (AgentReader){};
                reader_feed(&r, two, m + n);
                ASSERT_EQ(agent_reader_next(&r, &f), 1);
                ASSERT_EQ(f.type, AGENT_MSG_PING);
                ASSERT_EQ(f.chan, 0U);
                ASSERT_EQ(f.len, 0U);
                ASSERT_EQ(agent_reader_next(&r, &f), 1);
                ASSERT_EQ(f.type, AGENT_MSG_STDOUT);
                ASSERT_EQ(f.chan, 7U);
                ASSERT_EQ(agent_reader_next(&r, &f), 0);
        }
}

/* Each broken header or payload is -EBADMSG, and the reader stays broken. */
TEST(frame_rejects_what_breaks_the_rules) {
        static const struct {
                size_t offset;
                unsigned char value;
        } flips[] = {
                {0, 'X'},             /* magic */
                {4, 2},               /* major version */
                {6, 0},               /* type 0 */
                {6, 200},             /* unknown type */
                {7, AGENT_MAX_EXECS}, /* a channel past the last */
                {11, 0x7f},           /* length far over AGENT_FRAME_MAX */
                {12, 0},              /* crc */
                {16, 'H'},            /* payload: crc no longer matches */
        };
        static AgentReader r;

        for (size_t i = 0; i < ELEMENTSOF(flips); i++) {
                unsigned char b[256];
                size_t n = frame_bytes(AGENT_MSG_STDERR, 3, "hello", 5, b, sizeof(b));
                AgentFrame f;

                if (b[flips[i].offset] == flips[i].value)
                        b[flips[i].offset] ^= 1;
                else
                        b[flips[i].offset] = flips[i].value;
                r = (AgentReader){};
                reader_feed(&r, b, n);
                ASSERT_ERROR(agent_reader_next(&r, &f), EBADMSG);
                ASSERT_ERROR(agent_reader_next(&r, &f), EBADMSG);
                ASSERT_EQ(agent_reader_fill(&r, -1), -EBADMSG);
        }
}

TEST(frame_write_size_cap) {
        static char big[AGENT_FRAME_MAX + 1];
        int sv[2];

        ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
        ASSERT_ERROR(agent_frame_write(sv[0], AGENT_MSG_STDIN, 0, big, sizeof(big)), EMSGSIZE);
        (void)close(sv[0]);
        (void)close(sv[1]);
}

TEST(payload_strings) {
        _cleanup_free_ char *buf = NULL;
        static char huge[AGENT_FRAME_MAX];
        size_t len = 0, pos = 0;

        ASSERT_OK(agent_payload_add(&buf, &len, "a:", "ls"));
        ASSERT_OK(agent_payload_add(&buf, &len, "c:", "/"));
        ASSERT_EQ(len, strlen("a:ls") + 1 + strlen("c:/") + 1);
        ASSERT_STREQ(agent_payload_next(buf, len, &pos), "a:ls");
        ASSERT_STREQ(agent_payload_next(buf, len, &pos), "c:/");
        ASSERT_NULL(agent_payload_next(buf, len, &pos));
        /* An unterminated last string is not returned. */
        pos = 0;
        ASSERT_NULL(agent_payload_next("abc", 3, &pos));
        memset(huge, 'x', sizeof(huge) - 1);
        ASSERT_ERROR(agent_payload_add(&buf, &len, "e:", huge), E2BIG);
}

TEST(exit_encoding) {
        AgentExit e = {.status = 137 << 8,
                       .flags = AGENT_EXIT_OOM,
                       .cpu_usec = 1ULL << 40,
                       .mem_peak_bytes = 123456789};
        unsigned char b[AGENT_EXIT_SIZE];
        AgentExit d;

        agent_exit_encode(&e, b);
        ASSERT_OK(agent_exit_decode(b, sizeof(b), &d));
        ASSERT_EQ(d.status, e.status);
        ASSERT_EQ(d.flags, e.flags);
        ASSERT_EQ(d.cpu_usec, e.cpu_usec);
        ASSERT_EQ(d.mem_peak_bytes, e.mem_peak_bytes);
        ASSERT_ERROR(agent_exit_decode(b, sizeof(b) - 1, &d), EBADMSG);
}

static const char modules_dep[] =
        "kernel/fs/netfs/netfs.ko:\n"
        "kernel/fs/fscache/fscache.ko: kernel/fs/netfs/netfs.ko\n"
        "kernel/fs/9p/9p.ko: kernel/net/9p/9pnet.ko kernel/fs/fscache/fscache.ko "
        "kernel/fs/netfs/netfs.ko\n"
        "kernel/net/9p/9pnet.ko:\n"
        "kernel/net/9p/9pnet_virtio.ko: kernel/net/9p/9pnet.ko kernel/drivers/virtio/virtio.ko "
        "kernel/drivers/virtio/virtio_ring.ko\n"
        "kernel/drivers/virtio/virtio.ko: kernel/drivers/virtio/virtio_ring.ko\n"
        "kernel/drivers/virtio/virtio_ring.ko:\n"
        "kernel/drivers/virtio/virtio_mmio.ko: kernel/drivers/virtio/virtio.ko "
        "kernel/drivers/virtio/virtio_ring.ko\n"
        "kernel/drivers/net/virtio_net.ko: kernel/drivers/net/net_failover.ko "
        "kernel/net/core/failover.ko kernel/drivers/virtio/virtio.ko "
        "kernel/drivers/virtio/virtio_ring.ko\n"
        "kernel/drivers/net/net_failover.ko: kernel/net/core/failover.ko\n"
        "kernel/net/core/failover.ko:\n"
        "kernel/fs/nfs/nfs.ko: kernel/fs/netfs/netfs.ko\n";

static ssize_t index_of(char **l, const char *suffix) {
        for (size_t i = 0; l[i]; i++) {
                size_t a = strlen(l[i]), b = strlen(suffix);

                if (a >= b && strcmp(l[i] + a - b, suffix) == 0)
                        return (ssize_t)i;
        }
        return -1;
}

TEST(modules_dependencies_first) {
        _cleanup_strv_free_ char **l = NULL;

        ASSERT_OK(vm_modules_resolve(modules_dep, &l));
        /* virtio_console and overlay are not in this modules.dep (built
         * in): left out. nfs is not needed: left out. */
        ASSERT_EQ(strv_length(l), 11U);
        ASSERT_EQ(index_of(l, "/nfs.ko"), -1);
        ASSERT_TRUE(index_of(l, "/virtio_ring.ko") < index_of(l, "/virtio.ko"));
        ASSERT_TRUE(index_of(l, "/virtio.ko") < index_of(l, "/virtio_mmio.ko"));
        ASSERT_TRUE(index_of(l, "/netfs.ko") < index_of(l, "/fscache.ko"));
        ASSERT_TRUE(index_of(l, "/fscache.ko") < index_of(l, "/9p.ko"));
        ASSERT_TRUE(index_of(l, "/9pnet.ko") < index_of(l, "/9pnet_virtio.ko"));
        ASSERT_TRUE(index_of(l, "/failover.ko") < index_of(l, "/net_failover.ko"));
        ASSERT_TRUE(index_of(l, "/net_failover.ko") < index_of(l, "/virtio_net.ko"));
}

TEST(modules_bad_input) {
        char **l = NULL;

        ASSERT_ERROR(vm_modules_resolve("no colon here\n", &l), EINVAL);
        ASSERT_ERROR(vm_modules_resolve(": kernel/a.ko\n", &l), EINVAL);
        /* A dependency without a line of its own. */
        ASSERT_ERROR(vm_modules_resolve("kernel/9p.ko: kernel/missing.ko\n", &l), EINVAL);
        ASSERT_ERROR(
                vm_modules_resolve("kernel/9p.ko: kernel/x.ko\nkernel/x.ko: kernel/9p.ko\n", &l),
                ELOOP);
        ASSERT_NULL(l);
        ASSERT_OK(vm_modules_resolve("", &l));
        ASSERT_EQ(strv_length(l), 0U);
        l = strv_free(l);
}

/* The newc header fields at @h as numbers. */
static unsigned cpio_field(const char *h, int i) {
        char hex[9];
        unsigned v = 0;

        memcpy(hex, h + 6 + 8 * i, 8);
        hex[8] = '\0';
        for (int k = 0; k < 8; k++)
                v = v * 16 + (unsigned)(hex[k] <= '9' ? hex[k] - '0' : hex[k] - 'A' + 10);
        return v;
}

TEST(cpio_newc_layout) {
        _cleanup_free_ char *dir = make_tmpdir(), *f = path_join(dir, "agent"),
                            *out = path_join(dir, "out.cpio"), *data = NULL;
        char *dirs[] = {"dev", NULL};
        char *names[] = {"init", NULL};
        char *files[] = {f, NULL};
        unsigned modes[] = {0755};
        size_t len = 0, pos = 0;
        const char *expect_names[] = {"dev", "init", "TRAILER!!!"};
        int fd;

        write_file_mode(f, "12345", 5, 0644);
        fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(vm_cpio_write(fd, dirs, names, files, modes));
        (void)close(fd);
        fd = open(out, O_RDONLY | O_CLOEXEC);
        ASSERT_OK(read_full_fd(fd, 1 << 20, &data, &len));
        (void)close(fd);
        for (size_t i = 0; i < ELEMENTSOF(expect_names); i++) {
                const char *h = data + pos;
                unsigned namesize, filesize;

                ASSERT_TRUE(pos + 110 <= len);
                ASSERT_TRUE(memcmp(h, "070701", 6) == 0);
                namesize = cpio_field(h, 11);
                filesize = cpio_field(h, 6);
                ASSERT_STREQ(h + 110, expect_names[i]);
                ASSERT_EQ(namesize, strlen(expect_names[i]) + 1);
                if (i == 0)
                        ASSERT_EQ(cpio_field(h, 1), 040755U);
                if (i == 1) {
                        ASSERT_EQ(cpio_field(h, 1), 0100755U);
                        ASSERT_EQ(filesize, 5U);
                }
                pos += (110 + namesize + 3) & ~3U;
                if (filesize)
                        ASSERT_TRUE(memcmp(data + pos, "12345", 5) == 0);
                pos += (filesize + 3) & ~3U;
        }
        ASSERT_EQ(pos, len);
        (void)unlink(f);
        (void)unlink(out);
        (void)rmdir(dir);
}

TEST(cpio_missing_file) {
        _cleanup_free_ char *dir = make_tmpdir(), *out = path_join(dir, "out.cpio");
        char *dirs[] = {NULL};
        char *names[] = {"init", NULL};
        char *files[] = {"/nonexistent/agent", NULL};
        unsigned modes[] = {0755};
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

        ASSERT_TRUE(fd >= 0);
        ASSERT_ERROR(vm_cpio_write(fd, dirs, names, files, modes), ENOENT);
        (void)close(fd);
        (void)unlink(out);
        (void)rmdir(dir);
}

static bool argv_has(char **argv, const char *s) {
        return strv_contains(argv, s);
}

static bool argv_has_sub(char **argv, const char *sub) {
        STRV_FOREACH(a, argv)
                if (strstr(*a, sub))
                        return true;
        return false;
}

TEST(qemu_argv_shape) {
        VmConfig c = {.accel = VM_ACCEL_TCG, .ram_bytes = 256ULL << 20, .vcpus = 2};
        QemuArgs a = {.qemu = "/usr/bin/qemu-system-x86_64",
                      .vmlinux = "/c/vmlinux",
                      .initramfs = "/c/initramfs",
                      .cmdline = "console=ttyS0",
                      .config = &c,
                      .console_path = "/run/x,y/console.log"};
        _cleanup_strv_free_ char **argv = NULL, **net = NULL, **tpl = NULL, **in = NULL;

        c.shares[0] = (VmShare){.path = "/usr", .read_only = true};
        c.shares[1] = (VmShare){.path = "/ws", .read_only = false};
        c.n_shares = 2;
        ASSERT_OK(qemu_argv(&a, &argv));
        ASSERT_STREQ(argv[0], "/usr/bin/qemu-system-x86_64");
        ASSERT_TRUE(argv_has(argv, "-nodefaults") && argv_has(argv, "-no-user-config"));
        /* No NIC: no spawn, no privilege changes. */
        ASSERT_TRUE(argv_has_sub(argv, "spawn=deny") &&
                    argv_has_sub(argv, "elevateprivileges=deny"));
        ASSERT_FALSE(argv_has_sub(argv, "netdev") || argv_has(argv, "-netdev"));
        ASSERT_TRUE(argv_has(argv, "local,id=fs0,path=/usr,security_model=none,readonly=on"));
        ASSERT_TRUE(argv_has(argv, "local,id=fs1,path=/ws,security_model=none"));
        ASSERT_TRUE(argv_has(argv, "virtio-9p-device,fsdev=fs1,mount_tag=h1"));
        /* A comma in a path is doubled, not an option separator. */
        ASSERT_TRUE(argv_has(argv, "file,id=con,path=/run/x,,y/console.log"));
        ASSERT_TRUE(argv_has(argv, "tcg,tb-size=128") && argv_has(argv, "256") &&
                    argv_has(argv, "2"));
        ASSERT_FALSE(argv_has(argv, "-incoming"));

        c.net_helper = "'/bin/hutch' __vm-fwd '/run/p.sock'";
        ASSERT_OK(qemu_argv(&a, &net));
        ASSERT_TRUE(argv_has_sub(net, "restrict=on,ipv6=off,guestfwd=tcp:10.0.2.100:3128-cmd:"));
        ASSERT_TRUE(argv_has_sub(net, "spawn=allow"));

        /* A template: shares at the empty dir, RAM in a shared file, NIC
         * without a forward. */
        a.ram_path = "/shm/t/ram";
        a.ram_shared = true;
        a.empty_dir = "/shm/t/empty";
        ASSERT_OK(qemu_argv(&a, &tpl));
        ASSERT_TRUE(argv_has(tpl, "local,id=fs1,path=/shm/t/empty,security_model=none"));
        ASSERT_TRUE(argv_has_sub(tpl, "mem-path=/shm/t/ram,share=on"));
        ASSERT_TRUE(argv_has_sub(tpl, "memory-backend=ram0"));
        ASSERT_FALSE(argv_has_sub(tpl, "guestfwd"));

        /* A restore: the same file, private. */
        a.ram_shared = false;
        a.empty_dir = NULL;
        a.incoming = true;
        ASSERT_OK(qemu_argv(&a, &in));
        ASSERT_TRUE(argv_has_sub(in, "mem-path=/shm/t/ram,share=off"));
        ASSERT_TRUE(argv_has(in, "-incoming") && argv_has(in, "defer"));
        ASSERT_TRUE(argv_has_sub(in, "guestfwd"));
}

TEST(qemu_and_kernel_finders) {
        _cleanup_free_ char *dir = make_tmpdir(), *q = path_join(dir, "qemu-system-x86_64"),
                            *k1 = path_join(dir, "vmlinuz-6.1.0-9-amd64"),
                            *k2 = path_join(dir, "vmlinuz-6.1.0-10-amd64"), *found = NULL,
                            *release = NULL, *old_path = NULL;
        HutchError e = {};

        old_path = getenv("PATH") ? strdup(getenv("PATH")) : NULL;
        ASSERT_OK(setenv("PATH", "/nonexistent", 1));
        ASSERT_OK(unsetenv("HUTCH_QEMU"));
        ASSERT_ERROR(vm_qemu_find(&found, &e), ENOENT);
        ASSERT_NOT_NULL(strstr(e.msg, "apt-get install qemu-system-x86"));
        write_file_mode(q, "#!/bin/sh\n", 10, 0755);
        ASSERT_OK(setenv("PATH", dir, 1));
        ASSERT_OK(vm_qemu_find(&found, &e));
        ASSERT_STREQ(found, q);
        found = mfree(found);
        ASSERT_OK(setenv("HUTCH_QEMU", "/nonexistent/qemu", 1));
        ASSERT_ERROR(vm_qemu_find(&found, &e), ENOENT);
        ASSERT_OK(unsetenv("HUTCH_QEMU"));
        if (old_path)
                ASSERT_OK(setenv("PATH", old_path, 1));

        ASSERT_OK(setenv("HUTCH_VM_BOOT_DIR", dir, 1));
        ASSERT_ERROR(vm_kernel_find(NULL, &found, &release, &e), ENOENT);
        ASSERT_NOT_NULL(strstr(e.msg, "apt-get install linux-image-amd64"));
        write_file_mode(k1, "x", 1, 0644);
        write_file_mode(k2, "x", 1, 0644);
        /* By version: 10 is newer than 9. */
        ASSERT_OK(vm_kernel_find(NULL, &found, &release, &e));
        ASSERT_STREQ(found, k2);
        ASSERT_STREQ(release, "6.1.0-10-amd64");
        found = mfree(found);
        release = mfree(release);
        ASSERT_OK(unsetenv("HUTCH_VM_BOOT_DIR"));
        ASSERT_OK(vm_kernel_find(q, &found, &release, &e));
        ASSERT_STREQ(found, q);
        ASSERT_NULL(release); /* the name does not tell */
        found = mfree(found);
        ASSERT_ERROR(vm_kernel_find("/nonexistent/vmlinuz-1", &found, &release, &e), ENOENT);
        (void)unlink(q);
        (void)unlink(k1);
        (void)unlink(k2);
        (void)rmdir(dir);
}

TEST(vmlinux_prepare_refuses_what_is_no_kernel) {
        _cleanup_free_ char *dir = make_tmpdir(), *f = path_join(dir, "vmlinuz-x"),
                            *elf = path_join(dir, "vmlinux"), *cache = path_join(dir, "cache"),
                            *out = NULL;
        static unsigned char img[0x400];
        HutchError e = {};

        write_file_mode(f, "not a kernel at all", 19, 0644);
        ASSERT_ERROR(vm_vmlinux_prepare(f, cache, &out, &e), EINVAL);
        /* A bzImage header whose payload points past the file. */
        memcpy(img + 0x202, "HdrS", 4);
        img[0x206] = 0x0f;
        img[0x207] = 0x02;
        img[0x1f1] = 1;
        img[0x24b] = 0x7f;
        img[0x24c] = 0x10;
        write_file_mode(f, img, sizeof(img), 0644);
        ASSERT_ERROR(vm_vmlinux_prepare(f, cache, &out, &e), EINVAL);
        ASSERT_NOT_NULL(strstr(e.msg, "payload outside the file"));
        /* An ELF is already a vmlinux: used as it is. */
        write_file_mode(elf, "\177ELF\2\1\1", 7, 0644);
        ASSERT_OK(vm_vmlinux_prepare(elf, cache, &out, &e));
        ASSERT_STREQ(out, elf);
        (void)unlink(f);
        (void)unlink(elf);
        (void)rmdir(cache);
        (void)rmdir(dir);
}

TEST(template_dir_on_tmpfs_only) {
        _cleanup_free_ char *a = NULL, *b = NULL, *c = NULL, *d = NULL, *predictable = NULL,
                            *rec = NULL;
        char t[] = "/tmp/hutch-test-vm-tdir-XXXXXX";
        struct stat st;

        ASSERT_NOT_NULL(mkdtemp(t));
        /* /proc is never tmpfs: the templates go to /dev/shm, in a folder
         * with a random name (never /dev/shm/hutch-vm-UID, which another
         * user could make first), recorded in the store for the next VMs. */
        ASSERT_OK(vm_template_dir("/proc", t, &a));
        ASSERT_TRUE(asprintf(&predictable, "/dev/shm/hutch-vm-%u", (unsigned)geteuid()) >= 0);
        ASSERT_TRUE(strncmp(a, predictable, strlen(predictable)) == 0);
        ASSERT_EQ(strlen(a), strlen(predictable) + 7);
        ASSERT_OK(lstat(a, &st));
        ASSERT_EQ(st.st_mode & 07777, 0700);
        ASSERT_OK(vm_template_dir("/proc", t, &c));
        ASSERT_STREQ(c, a);
        /* One that is no longer private is replaced, never used. */
        ASSERT_OK(chmod(a, 0777));
        ASSERT_OK(vm_template_dir("/proc", t, &d));
        ASSERT_TRUE(strcmp(d, a) != 0);
        ASSERT_OK(rm_rf_at(AT_FDCWD, a));
        ASSERT_OK(rm_rf_at(AT_FDCWD, d));
        ASSERT_TRUE(asprintf(&rec, "%s/vm-templates.path", t) >= 0);
        (void)unlink(rec);
        (void)rmdir(t);
        /* /dev/shm is tmpfs (Debian mounts it so). */
        ASSERT_OK(vm_template_dir("/dev/shm", "/nonexistent", &b));
        ASSERT_STREQ(b, "/dev/shm/vm-templates");
}

/* A store of its own for template_dirs_*: a folder under /tmp (never tmpfs
 * here: /proc stands in for a runtime folder that is not). */
static char *shm_store_new(void) {
        char *t = strdup("/tmp/hutch-test-vm-store-XXXXXX");

        ASSERT_NOT_NULL(t);
        ASSERT_NOT_NULL(mkdtemp(t));
        return t;
}

static bool dir_exists(const char *path) {
        struct stat st;

        return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

TEST(template_dirs_of_a_removed_store_are_reclaimed) {
        _cleanup_free_ char *gone = shm_store_new(), *live = shm_store_new();
        _cleanup_free_ char *a = NULL, *b = NULL, *b2 = NULL, *owner = NULL, *text = NULL;

        ASSERT_OK(vm_template_dir("/proc", gone, &a));
        ASSERT_OK(vm_template_dir("/proc", live, &b));
        /* Each folder names the record that gave it out. */
        ASSERT_TRUE(asprintf(&owner, "%s/store", a) >= 0);
        ASSERT_OK(read_full_file(owner, 4096, &text));
        ASSERT_TRUE(strstr(text, "/vm-templates.path") != NULL);
        /* The store is removed: the next VM start of any store frees its
         * folder, and leaves the live store's alone (the twin). */
        ASSERT_OK(rm_rf_at(AT_FDCWD, gone));
        ASSERT_OK(vm_template_dir("/proc", live, &b2));
        ASSERT_FALSE(dir_exists(a));
        ASSERT_STREQ(b2, b);
        ASSERT_TRUE(dir_exists(b));
        ASSERT_OK(rm_rf_at(AT_FDCWD, b));
        ASSERT_OK(rm_rf_at(AT_FDCWD, live));
}

TEST(template_dirs_not_proven_orphaned_are_left) {
        _cleanup_free_ char *s1 = shm_store_new(), *s2 = shm_store_new();
        _cleanup_free_ char *a = NULL, *b = NULL, *x = NULL, *rec = NULL, *plain = NULL;
        _cleanup_close_ int fd = -EBADF;

        ASSERT_OK(vm_template_dir("/proc", s1, &a));
        /* A folder without an owner file (an older hutch's) proves
         * nothing: it stays. */
        ASSERT_TRUE(asprintf(&plain, "/dev/shm/hutch-vm-%u-XXXXXX", (unsigned)geteuid()) >= 0);
        ASSERT_NOT_NULL(mkdtemp(plain));
        /* A store handing out a folder holds its record's lock: its folder
         * is left even when the record does not name it yet. */
        ASSERT_TRUE(asprintf(&rec, "%s/vm-templates.path", s1) >= 0);
        fd = open(rec, O_RDWR | O_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(ftruncate(fd, 0));
        ASSERT_OK(flock(fd, LOCK_EX));
        ASSERT_OK(vm_template_dir("/proc", s2, &b));
        ASSERT_TRUE(dir_exists(a));
        ASSERT_TRUE(dir_exists(plain));
        /* Unlocked, a record that names no folder (or another one) no
         * longer owns it: reclaimed. */
        ASSERT_OK(flock(fd, LOCK_UN));
        ASSERT_OK(vm_template_dir("/proc", s2, &x));
        ASSERT_STREQ(x, b);
        ASSERT_FALSE(dir_exists(a));
        ASSERT_TRUE(dir_exists(plain));
        ASSERT_OK(rm_rf_at(AT_FDCWD, plain));
        ASSERT_OK(rm_rf_at(AT_FDCWD, b));
        ASSERT_OK(rm_rf_at(AT_FDCWD, s1));
        ASSERT_OK(rm_rf_at(AT_FDCWD, s2));
}

TEST(tsc_hints_format) {
        _cleanup_free_ char *s = NULL;

        ASSERT_OK(vm_tsc_hints(&s));
        if (s[0])
                ASSERT_TRUE(strncmp(s, "tsc_early_khz=", 14) == 0 && strstr(s, " lpj=") &&
                            strstr(s, " no_timer_check"));
}

DEFINE_TEST_MAIN
