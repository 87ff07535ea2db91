/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The guest's images: finding the kernel, QEMU and the agent, the cached
 * vmlinux, the module list and the initramfs (see vm.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "strv.h"
#include "vm/vm-internal.h"
#include "vm/vm.h"

#define KERNEL_FILE_MAX (128U << 20)
#define VMLINUX_MAX (512U << 20)
#define MODULES_DEP_MAX (8U << 20)
#define MODULE_MAX (64U << 20)

#define APT_QEMU "apt-get install qemu-system-x86"
#define APT_KERNEL "apt-get install linux-image-amd64"

/* What the guest needs as modules; built in, they are simply absent from
 * modules.dep. virtio_mmio carries microvm's devices; overlay is for the
 * overlay workspace. */
static const char *const guest_modules[] = {
        "virtio_mmio", "virtio_console", "9pnet_virtio", "9p", "virtio_net", "overlay",
};

int vm_qemu_find(char **ret, HutchError *reterr) {
        const char *env = getenv("HUTCH_QEMU"), *path = getenv("PATH");
        _cleanup_free_ char *copy = NULL;
        char *save = NULL;

        if (env && env[0]) {
                if (access(env, X_OK) < 0)
                        return hutch_error_set(reterr, ENOENT,
                                               "$HUTCH_QEMU '%s' is not an executable", env);
                *ret = strdup(env);
                return *ret ? 0 : -ENOMEM;
        }
        copy = strdup(path && path[0] ? path : "/usr/bin");
        if (!copy)
                return -ENOMEM;
        for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
                char *cand = NULL;

                if (dir[0] != '/')
                        continue;
                if (asprintf(&cand, "%s/qemu-system-x86_64", dir) < 0)
                        return -ENOMEM;
                if (access(cand, X_OK) == 0) {
                        *ret = cand;
                        return 0;
                }
                free(cand);
        }
        return hutch_error_set(reterr, ENOENT,
                               "--backend vm needs QEMU (qemu-system-x86_64), which is not "
                               "installed; install it with: " APT_QEMU);
}

static int release_of(const char *path, char **ret) {
        _cleanup_free_ char *copy = strdup(path);
        const char *base;

        if (!copy)
                return -ENOMEM;
        base = basename(copy);
        *ret = NULL;
        if (strncmp(base, "vmlinuz-", 8) != 0 || !base[8])
                return 0;
        *ret = strdup(base + 8);
        return *ret ? 0 : -ENOMEM;
}

int vm_kernel_find(const char *explicit, char **ret_path, char **ret_release, HutchError *reterr) {
        _cleanup_(closedirp) DIR *d = NULL;
        _cleanup_free_ char *best = NULL, *path = NULL, *release = NULL;
        struct dirent *de;
        int r;

        if (explicit) {
                if (access(explicit, R_OK) < 0)
                        return hutch_error_set(reterr, errno, "cannot read the VM kernel '%s': %m",
                                               explicit);
                path = strdup(explicit);
                if (!path)
                        return -ENOMEM;
        } else {
                /* $HUTCH_VM_BOOT_DIR: where the kernels are (tests). */
                const char *boot = getenv("HUTCH_VM_BOOT_DIR");

                if (!boot || boot[0] != '/')
                        boot = "/boot";
                d = opendir(boot);
                while (d && (de = readdir(d))) {
                        if (strncmp(de->d_name, "vmlinuz-", 8) != 0 || !de->d_name[8])
                                continue;
                        if (!best || strverscmp(de->d_name, best) > 0) {
                                free(best);
                                best = strdup(de->d_name);
                                if (!best)
                                        return -ENOMEM;
                        }
                }
                if (!best)
                        return hutch_error_set(reterr, ENOENT,
                                               "--backend vm needs a guest kernel and %s has no "
                                               "vmlinuz-*; install one with: " APT_KERNEL
                                               " (or pass --vm-kernel)",
                                               boot);
                if (asprintf(&path, "%s/%s", boot, best) < 0)
                        return -ENOMEM;
                if (access(path, R_OK) < 0)
                        return hutch_error_set(reterr, errno,
                                               "cannot read the VM kernel '%s': %m (it is "
                                               "readable by root only on Debian; pass a "
                                               "readable copy with --vm-kernel)",
                                               path);
        }
        r = release_of(path, &release);
        if (r < 0)
                return r;
        *ret_path = TAKE_PTR(path);
        *ret_release = TAKE_PTR(release);
        return 0;
}

int vm_agent_binary_find(char **ret, HutchError *reterr) {
        int r = shipped_binary_find("HUTCH_AGENT_PATH", "hutch-agent", "guest", R_OK, NULL, ret);

        if (r == -EACCES)
                return hutch_error_set(reterr, ENOENT, "$HUTCH_AGENT_PATH '%s' cannot be read",
                                       getenv("HUTCH_AGENT_PATH"));
        if (r == -ENOENT)
                return hutch_error_set(reterr, ENOENT,
                                       "--backend vm needs hutch-agent, which is not next to "
                                       "hutch (install it there or set $HUTCH_AGENT_PATH)");
        if (r < 0)
                return hutch_error_set(reterr, -r, "failed to find hutch-agent: %s", strerror(-r));
        return 0;
}

/* ---- hashing and the cache ---- */

void vm_key_init(VmKey *k) {
        sha256_init(&k->sha);
}

void vm_key_add(VmKey *k, const void *data, size_t len) {
        uint64_t n = len;

        /* Length-prefixed: ("ab","c") and ("a","bc") differ. */
        sha256_update(&k->sha, &n, sizeof(n));
        sha256_update(&k->sha, data, len);
}

void vm_key_add_str(VmKey *k, const char *s) {
        vm_key_add(k, s ? s : "", s ? strlen(s) : 0);
}

/* A file by identity (path, size, change time, inode): cheap, and any
 * replacement of the file changes it. */
int vm_key_add_file_id(VmKey *k, const char *path) {
        struct stat st;
        uint64_t v[4];

        if (stat(path, &st) < 0)
                return negative_errno();
        v[0] = (uint64_t)st.st_size;
        v[1] = (uint64_t)st.st_mtim.tv_sec * 1000000000ULL + (uint64_t)st.st_mtim.tv_nsec;
        v[2] = (uint64_t)st.st_ino;
        v[3] = (uint64_t)st.st_dev;
        vm_key_add_str(k, path);
        vm_key_add(k, v, sizeof(v));
        return 0;
}

void vm_key_finish(VmKey *k, char out[VM_KEY_HEX + 1]) {
        unsigned char md[SHA256_DIGEST_SIZE];

        sha256_finish(&k->sha, md);
        for (size_t i = 0; i < VM_KEY_HEX / 2; i++)
                (void)snprintf(out + 2 * i, 3, "%02x", md[i]);
        out[VM_KEY_HEX] = '\0';
}

#ifndef HUTCH_INSTALLED_ARCHIVE
#define HUTCH_INSTALLED_ARCHIVE "/usr/local/libexec/hutch/hutch-archive"
#endif

/* Decompresses @len bytes at @data in whatever format libarchive's
 * filters know (gzip, xz, lzma, zstd, lz4, bzip2) into a new buffer of at
 * most @max bytes, by running `hutch-archive decompress`: only that
 * program links libarchive, so that hutch itself links nothing (its
 * start-up is on the path of every command). Needed once per kernel or
 * module: the result is cached. -ENOPKG without hutch-archive, -EINVAL
 * for data in no known format, -EFBIG past @max. */
static int decompress(const void *data, size_t len, size_t max, char **ret, size_t *ret_len) {
        _cleanup_free_ char *helper = NULL, *out = NULL;
        _cleanup_close_ int in = -EBADF, plain = -EBADF, null = -EBADF;
        posix_spawn_file_actions_t fa;
        char max_str[32];
        size_t out_len = 0;
        pid_t pid;
        int r, status;

        r = shipped_binary_find("HUTCH_ARCHIVE_PATH", "hutch-archive", "cli", X_OK,
                                HUTCH_INSTALLED_ARCHIVE, &helper);
        if (r == -ENOENT || r == -EACCES)
                return -ENOPKG;
        if (r < 0)
                return r;
        in = memfd_create("hutch-compressed", MFD_CLOEXEC);
        plain = memfd_create("hutch-plain", MFD_CLOEXEC);
        null = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (in < 0 || plain < 0 || null < 0)
                return negative_errno();
        r = loop_write(in, data, len);
        if (r < 0)
                return r;
        if (lseek(in, 0, SEEK_SET) < 0)
                return negative_errno();
        (void)snprintf(max_str, sizeof(max_str), "%zu", max);
        r = posix_spawn_file_actions_init(&fa);
        if (r != 0)
                return -r;
        r = posix_spawn_file_actions_adddup2(&fa, in, STDIN_FILENO);
        if (r == 0)
                r = posix_spawn_file_actions_adddup2(&fa, plain, STDOUT_FILENO);
        /* Library code says nothing: the exit status tells what failed. */
        if (r == 0)
                r = posix_spawn_file_actions_adddup2(&fa, null, STDERR_FILENO);
        if (r == 0)
                r = posix_spawn(
                        &pid, helper, &fa, NULL,
                        (char *[]){(char *)"hutch-archive", (char *)"decompress", max_str, NULL},
                        (char *[]){NULL});
        (void)posix_spawn_file_actions_destroy(&fa);
        if (r != 0)
                return -r;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return negative_errno();
        if (!WIFEXITED(status))
                return -EIO;
        switch (WEXITSTATUS(status)) {
        case 0:
                break;
        case 2:
                return -EINVAL;
        case 3:
                return -EFBIG;
        default:
                return -EIO;
        }
        if (lseek(plain, 0, SEEK_SET) < 0)
                return negative_errno();
        r = read_full_fd(plain, max, &out, &out_len);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(out);
        *ret_len = out_len;
        return 0;
}

static bool is_elf(const void *p, size_t len) {
        return len >= 4 && memcmp(p, "\177ELF", 4) == 0;
}

static uint32_t get_le32(const unsigned char *p) {
        return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int vm_vmlinux_prepare(const char *kernel, const char *cache_dir, char **ret, HutchError *reterr) {
        _cleanup_free_ char *image = NULL, *out = NULL, *path = NULL;
        const unsigned char *b;
        size_t size = 0, out_len = 0, setup, off, len;
        char key[VM_KEY_HEX + 1], name[VM_KEY_HEX + 16];
        VmKey k = {};
        int r;

        vm_key_init(&k);
        r = vm_key_add_file_id(&k, kernel);
        vm_key_finish(&k, key);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot read the VM kernel '%s': %s", kernel,
                                       strerror(-r));
        (void)snprintf(name, sizeof(name), "vmlinux-%s", key);
        if (asprintf(&path, "%s/%s", cache_dir, name) < 0)
                return -ENOMEM;
        if (access(path, R_OK) == 0) {
                *ret = TAKE_PTR(path);
                return 0;
        }

        r = read_full_file(kernel, KERNEL_FILE_MAX, &image);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot read the VM kernel '%s': %s", kernel,
                                       strerror(-r));
        {
                struct stat st;

                if (stat(kernel, &st) < 0)
                        return hutch_error_set(reterr, errno, "cannot read '%s': %m", kernel);
                size = (size_t)st.st_size;
        }
        b = (const unsigned char *)image;
        if (is_elf(b, size)) {
                /* Already a vmlinux: QEMU boots it as it is. */
                *ret = strdup(kernel);
                return *ret ? 0 : -ENOMEM;
        }
        /* The x86 boot protocol (Documentation/arch/x86/boot.rst): "HdrS"
         * at 0x202, version >= 2.08 for payload_offset/payload_length,
         * the protected-mode code after (setup_sects + 1) sectors. */
        if (size < 0x250 || memcmp(b + 0x202, "HdrS", 4) != 0 || (b[0x206] | b[0x207] << 8) < 0x208)
                return hutch_error_set(reterr, EINVAL,
                                       "'%s' is not a bzImage or vmlinux kernel (boot protocol "
                                       "2.08 or later)",
                                       kernel);
        setup = (size_t)(b[0x1f1] ? b[0x1f1] : 4) + 1;
        off = setup * 512 + get_le32(b + 0x248);
        len = get_le32(b + 0x24c);
        if (off > size || len > size - off || len < 8)
                return hutch_error_set(reterr, EINVAL, "'%s': payload outside the file", kernel);
        /* Every compressor of arch/x86/boot/compressed appends the
         * decompressed size (le32) after its stream: not part of it. */
        len -= 4;
        r = decompress(b + off, len, VMLINUX_MAX, &out, &out_len);
        if (r == -ENOPKG)
                return hutch_error_set(reterr, ENOPKG,
                                       "decompressing the kernel '%s' needs hutch-archive, "
                                       "which is not next to hutch (install it there or set "
                                       "$HUTCH_ARCHIVE_PATH)",
                                       kernel);
        if (r < 0 || !is_elf(out, out_len))
                return hutch_error_set(reterr, r < 0 ? -r : EINVAL,
                                       "cannot decompress the kernel '%s'%s", kernel,
                                       r == -EFBIG ? " (larger than 512 MiB)" : "");
        r = mkdir_private(cache_dir);
        if (r >= 0)
                r = write_file_atomic(cache_dir, name, out, out_len);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot cache the VM kernel in '%s': %s",
                                       cache_dir, strerror(-r));
        *ret = TAKE_PTR(path);
        return 0;
}

/* ---- modules ---- */

/* "kernel/fs/9p/9p.ko" (or .ko.xz, ...) -> "9p"; dashes count as
 * underscores, as module names do. */
static void module_name(const char *path, char *out, size_t size) {
        const char *base = strrchr(path, '/');
        size_t n;

        base = base ? base + 1 : path;
        n = strcspn(base, ".");
        (void)snprintf(out, size, "%.*s", (int)n, base);
        for (char *c = out; *c; c++)
                if (*c == '-')
                        *c = '_';
}

typedef struct DepLine {
        char *path;
        char **deps;
        int state; /* 0 new, 1 visiting, 2 done */
} DepLine;

static DepLine *dep_find(DepLine *lines, size_t n, const char *name_or_path, bool by_path) {
        for (size_t i = 0; i < n; i++) {
                char m[256];

                if (by_path) {
                        if (strcmp(lines[i].path, name_or_path) == 0)
                                return &lines[i];
                        continue;
                }
                module_name(lines[i].path, m, sizeof(m));
                if (strcmp(m, name_or_path) == 0)
                        return &lines[i];
        }
        return NULL;
}

static int dep_visit(DepLine *lines, size_t n, DepLine *l, unsigned depth, char ***out) {
        int r;

        if (l->state == 2)
                return 0;
        if (l->state == 1 || depth > 64)
                return -ELOOP;
        l->state = 1;
        STRV_FOREACH(d, l->deps) {
                DepLine *dl = dep_find(lines, n, *d, true);

                if (!dl)
                        return -EINVAL;
                r = dep_visit(lines, n, dl, depth + 1, out);
                if (r < 0)
                        return r;
        }
        l->state = 2;
        return strv_extend(out, l->path);
}

static void dep_lines_free(DepLine *lines, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(lines[i].path);
                strv_free(lines[i].deps);
        }
        free(lines);
}

int vm_modules_resolve(const char *dep, char ***ret) {
        _cleanup_strv_free_ char **out = NULL;
        DepLine *lines = NULL;
        size_t n = 0;
        int r = 0;

        for (const char *p = dep; *p;) {
                size_t len = strcspn(p, "\n");
                const char *colon = memchr(p, ':', len);
                DepLine *nl;

                if (len == 0) {
                        p++;
                        continue;
                }
                if (!colon || colon == p) {
                        r = -EINVAL;
                        goto out;
                }
                nl = realloc(lines, (n + 1) * sizeof(DepLine));
                if (!nl) {
                        r = -ENOMEM;
                        goto out;
                }
                lines = nl;
                lines[n] = (DepLine){.path = strndup(p, (size_t)(colon - p))};
                if (!lines[n].path) {
                        r = -ENOMEM;
                        goto out;
                }
                n++;
                for (const char *q = colon + 1; q < p + len;) {
                        size_t w;

                        while (q < p + len && *q == ' ')
                                q++;
                        w = strcspn(q, " \n");
                        if (w == 0)
                                break;
                        {
                                _cleanup_free_ char *d = strndup(q, w);

                                if (!d) {
                                        r = -ENOMEM;
                                        goto out;
                                }
                                r = strv_extend(&lines[n - 1].deps, d);
                                if (r < 0)
                                        goto out;
                        }
                        q += w;
                }
                p += len;
        }
        for (size_t i = 0; i < ELEMENTSOF(guest_modules); i++) {
                DepLine *l = dep_find(lines, n, guest_modules[i], false);

                if (!l)
                        continue; /* built in, or not in this kernel */
                r = dep_visit(lines, n, l, 0, &out);
                if (r < 0)
                        goto out;
        }
        if (!out) {
                out = calloc(1, sizeof(char *));
                if (!out) {
                        r = -ENOMEM;
                        goto out;
                }
        }
        *ret = TAKE_PTR(out);
out:
        dep_lines_free(lines, n);
        return r;
}

/* ---- cpio ---- */

static int cpio_header(int fd, const char *name, unsigned mode, uint64_t size, unsigned ino) {
        char hdr[111];
        size_t nlen = strlen(name) + 1, pad;
        static const char zeros[4] = {};
        int r;

        if (size > UINT32_MAX)
                return -EFBIG;
        (void)snprintf(hdr, sizeof(hdr),
                       "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X", ino, mode, 0U,
                       0U, 1U, 0U, (unsigned)size, 0U, 0U, 0U, 0U, (unsigned)nlen, 0U);
        r = loop_write(fd, hdr, 110);
        if (r >= 0)
                r = loop_write(fd, name, nlen);
        pad = (4 - (110 + nlen) % 4) % 4;
        if (r >= 0 && pad)
                r = loop_write(fd, zeros, pad);
        return r;
}

static int cpio_file(int fd, const char *name, const char *file, unsigned mode, unsigned ino) {
        _cleanup_free_ char *data = NULL, *plain = NULL;
        static const char zeros[4] = {};
        size_t len = 0, plain_len = 0;
        int r;

        r = read_full_file(file, MODULE_MAX, &data);
        if (r < 0)
                return r;
        {
                struct stat st;

                if (stat(file, &st) < 0)
                        return negative_errno();
                len = (size_t)st.st_size;
        }
        /* A compressed module (.ko.xz, .ko.zst) goes in decompressed: the
         * agent loads plain ELF objects only. */
        if (!is_elf(data, len) && decompress(data, len, MODULE_MAX, &plain, &plain_len) >= 0) {
                free(data);
                data = TAKE_PTR(plain);
                len = plain_len;
        }
        r = cpio_header(fd, name, 0100000 | mode, len, ino);
        if (r >= 0)
                r = loop_write(fd, data, len);
        if (r >= 0 && len % 4)
                r = loop_write(fd, zeros, 4 - len % 4);
        return r;
}

int vm_cpio_write(int fd, char *const *dirs, char *const *names, char *const *files,
                  const unsigned *modes) {
        unsigned ino = 1;
        int r;

        STRV_FOREACH(d, (char **)dirs) {
                r = cpio_header(fd, *d, 040755, 0, ino++);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; names && names[i]; i++) {
                r = cpio_file(fd, names[i], files[i], modes[i], ino++);
                if (r < 0)
                        return r;
        }
        return cpio_header(fd, "TRAILER!!!", 0, 0, 0);
}

int vm_initramfs_prepare(const char *agent, const char *release, const char *cache_dir, char **ret,
                         HutchError *reterr) {
        _cleanup_free_ char *moddir = NULL, *dep = NULL, *path = NULL, *tmp = NULL;
        _cleanup_strv_free_ char **mods = NULL, **names = NULL, **files = NULL;
        _cleanup_free_ unsigned *modes = NULL;
        _cleanup_close_ int fd = -EBADF;
        char *const dirs[] = {"dev", "proc", "sys", "run", "sbx", "modules", NULL};
        char key[VM_KEY_HEX + 1];
        size_t n;
        VmKey k = {};
        int r;

        if (release) {
                if (asprintf(&moddir, "/lib/modules/%s", release) < 0 ||
                    asprintf(&path, "%s/modules.dep", moddir) < 0)
                        return -ENOMEM;
                r = read_full_file(path, MODULES_DEP_MAX, &dep);
                if (r < 0 && r != -ENOENT)
                        return hutch_error_set(reterr, -r, "cannot read '%s': %s", path,
                                               strerror(-r));
                path = mfree(path);
        }
        if (dep) {
                r = vm_modules_resolve(dep, &mods);
                if (r < 0)
                        return hutch_error_set(reterr, -r,
                                               "cannot resolve the guest's modules from "
                                               "%s/modules.dep: %s",
                                               moddir, strerror(-r));
        }
        n = strv_length(mods);
        modes = calloc(n + 2, sizeof(unsigned));
        if (!modes)
                return -ENOMEM;
        r = strv_extend(&names, "init");
        if (r >= 0)
                r = strv_extend(&files, agent);
        modes[0] = 0755;
        for (size_t i = 0; r >= 0 && i < n; i++) {
                char m[256], *name = NULL, *file = NULL;

                module_name(mods[i], m, sizeof(m));
                if (asprintf(&name, "modules/%03zu-%s.ko", i, m) < 0)
                        return -ENOMEM;
                r = strv_push_take(&names, name);
                if (r < 0)
                        break;
                if (asprintf(&file, "%s/%s", moddir, mods[i]) < 0)
                        return -ENOMEM;
                r = strv_push_take(&files, file);
                modes[i + 1] = 0644;
        }
        if (r < 0)
                return r;

        /* The key: the agent's bytes (it changes with every build), each
         * module file's identity, and the list itself. */
        vm_key_init(&k);
        {
                _cleanup_free_ char *bytes = NULL;
                size_t len = 0;
                _cleanup_close_ int afd = open(agent, O_RDONLY | O_CLOEXEC);

                r = afd < 0 ? negative_errno() : read_full_fd(afd, 64U << 20, &bytes, &len);
                if (r >= 0)
                        vm_key_add(&k, bytes, len);
        }
        for (size_t i = 0; r >= 0 && files[i]; i++) {
                vm_key_add_str(&k, names[i]);
                if (i > 0)
                        r = vm_key_add_file_id(&k, files[i]);
        }
        vm_key_finish(&k, key);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot read the guest's files: %s",
                                       strerror(-r));
        if (asprintf(&path, "%s/initramfs-%s.cpio", cache_dir, key) < 0)
                return -ENOMEM;
        if (access(path, R_OK) == 0) {
                *ret = TAKE_PTR(path);
                return 0;
        }

        r = mkdir_private(cache_dir);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot use the VM cache '%s': %s", cache_dir,
                                       strerror(-r));
        if (asprintf(&tmp, "%s.tmp-%d", path, (int)getpid()) < 0)
                return -ENOMEM;
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return hutch_error_set(reterr, errno, "cannot write '%s': %m", tmp);
        r = vm_cpio_write(fd, dirs, names, files, modes);
        if (r >= 0 && fsync(fd) < 0)
                r = negative_errno();
        if (r >= 0 && rename(tmp, path) < 0)
                r = negative_errno();
        if (r < 0) {
                (void)unlink(tmp);
                return hutch_error_set(reterr, -r, "cannot build the guest's initramfs: %s",
                                       strerror(-r));
        }
        *ret = TAKE_PTR(path);
        return 0;
}
