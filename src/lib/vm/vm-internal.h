/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Private to src/lib/vm: the cache keys, the directories, and the QEMU
 * command line. */

#include <stdbool.h>
#include <stddef.h>

#include "hutch-error.h"
#include "sha256.h"
#include "vm/vm.h"

/* A SHA-256 over length-prefixed inputs, shown as VM_KEY_HEX hex digits:
 * the name of a cached image or template. */
#define VM_KEY_HEX 32

typedef struct VmKey {
        Sha256 sha;
} VmKey;

void vm_key_init(VmKey *k);
void vm_key_add(VmKey *k, const void *data, size_t len);
void vm_key_add_str(VmKey *k, const char *s);
int vm_key_add_file_id(VmKey *k, const char *path);
/* Writes the first VM_KEY_HEX hex digits of the digest. */
void vm_key_finish(VmKey *k, char out[VM_KEY_HEX + 1]);

/* Finds a binary shipped with hutch: $@env_name, else
 * ../libexec/hutch/@name from the running binary, else next to it, else
 * ../@build_subdir/@name. */
int helper_binary_find(const char *env_name, const char *name, const char *build_subdir, char **ret,
                       HutchError *reterr);

/* The inputs of one QEMU command line. */
typedef struct QemuArgs {
        const char *qemu, *vmlinux, *initramfs, *cmdline;
        const VmConfig *config;
        const char *console_path;
        const char *ram_path;  /* the template's RAM file, or NULL: anonymous RAM */
        bool ram_shared;       /* share=on (building a template) */
        bool incoming;         /* -incoming fd:QEMU_FD_INCOMING */
        const char *empty_dir; /* what the shares point at while a template is built */
} QemuArgs;

/* The descriptors QEMU finds at fixed numbers. */
#define QEMU_FD_AGENT 3
#define QEMU_FD_QMP 4
#define QEMU_FD_INCOMING 5
#define QEMU_FD_DIRS 6 /* then VmConfig.dirs, in order */

/* @path as QEMU finds it: below VmConfig.dirs[i].path, through its
 * descriptor (/proc/self/fd/N/...); otherwise unchanged. 0 or -ENOMEM. */
int qemu_path(const VmConfig *c, const char *path, char **ret);

/* Builds QEMU's argv for @a. 0 or -ENOMEM. */
int qemu_argv(const QemuArgs *a, char ***ret);
