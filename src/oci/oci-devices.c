/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch-oci: linux.resources.devices on cgroup v2, where there is no
 * devices controller: the rules become one eBPF program of type
 * BPF_PROG_TYPE_CGROUP_DEVICE attached to the container's cgroup (oci.h,
 * docs/oci.md). */

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/bpf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "oci.h"

/* One rule: type 0 for all ('a'), else BPF_DEVCG_DEV_BLOCK/_CHAR; -1 for
 * any major or minor; access bits BPF_DEVCG_ACC_*. */
typedef struct DevRule {
        int type;
        long long major, minor;
        int access;
        bool allow;
} DevRule;

#define ACC_ALL (BPF_DEVCG_ACC_MKNOD | BPF_DEVCG_ACC_READ | BPF_DEVCG_ACC_WRITE)

const OciDefaultDevice oci_default_devices[OCI_N_DEFAULT_DEVICES] = {
        {1, 3}, {1, 5}, {1, 7}, {1, 8}, {1, 9}, {5, 0}, {5, 2}, {136, -1},
};

static int rule_from_json(json_t *v, DevRule *ret) {
        const char *type = json_string_value(json_object_get(v, "type"));
        const char *access = json_string_value(json_object_get(v, "access"));
        json_t *maj = json_object_get(v, "major"), *min = json_object_get(v, "minor");

        *ret = (DevRule){
                .major = -1, .minor = -1, .allow = json_is_true(json_object_get(v, "allow"))};
        if (!type || strcmp(type, "a") == 0)
                ret->type = 0;
        else if (strcmp(type, "b") == 0)
                ret->type = BPF_DEVCG_DEV_BLOCK;
        else if (strcmp(type, "c") == 0)
                ret->type = BPF_DEVCG_DEV_CHAR;
        else
                return -EINVAL;
        if (json_is_integer(maj) && json_integer_value(maj) >= 0)
                ret->major = json_integer_value(maj);
        if (json_is_integer(min) && json_integer_value(min) >= 0)
                ret->minor = json_integer_value(min);
        if (ret->major > INT32_MAX || ret->minor > INT32_MAX)
                return -EINVAL;
        if (!access)
                access = "rwm";
        for (const char *a = access; *a; a++) {
                if (*a == 'r')
                        ret->access |= BPF_DEVCG_ACC_READ;
                else if (*a == 'w')
                        ret->access |= BPF_DEVCG_ACC_WRITE;
                else if (*a == 'm')
                        ret->access |= BPF_DEVCG_ACC_MKNOD;
                else
                        return -EINVAL;
        }
        return 0;
}

#define INSN(c, d, s, o, i)                                                                        \
        ((struct bpf_insn){.code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i)})

typedef struct Prog {
        struct bpf_insn *insns;
        size_t n, size;
} Prog;

static int emit(Prog *p, struct bpf_insn insn) {
        if (p->n == p->size) {
                size_t size = p->size ? p->size * 2 : 64;
                struct bpf_insn *n = reallocarray(p->insns, size, sizeof(*n));

                if (!n)
                        return -ENOMEM;
                p->insns = n;
                p->size = size;
        }
        p->insns[p->n++] = insn;
        return 0;
}

/* One rule's block: each test jumps to the block's end ("next rule") when
 * it does not match; a match returns the rule's verdict. Registers (set
 * by the prologue): r3 the device type, r2 the access asked for, r4 the
 * major, r5 the minor. */
static bool rule_matches_all(const DevRule *r) {
        return r->type == 0 && r->access == ACC_ALL && r->major < 0 && r->minor < 0;
}

static int emit_rule(Prog *p, const DevRule *r) {
        size_t n_jumps = 0, jumps[4];
        int k = 0;

        if (r->type != 0) {
                jumps[n_jumps++] = p->n;
                k = k ?: emit(p, INSN(BPF_JMP | BPF_JNE | BPF_K, 3, 0, 0, r->type));
        }
        if (r->access != ACC_ALL) {
                /* Anything asked for beyond the rule's access: no match. */
                k = k ?: emit(p, INSN(BPF_ALU | BPF_MOV | BPF_X, 0, 2, 0, 0));
                k = k ?: emit(p, INSN(BPF_ALU | BPF_AND | BPF_K, 0, 0, 0, ~r->access & ACC_ALL));
                jumps[n_jumps++] = p->n;
                k = k ?: emit(p, INSN(BPF_JMP | BPF_JNE | BPF_K, 0, 0, 0, 0));
        }
        if (r->major >= 0) {
                jumps[n_jumps++] = p->n;
                k = k ?: emit(p, INSN(BPF_JMP | BPF_JNE | BPF_K, 4, 0, 0, (int32_t)r->major));
        }
        if (r->minor >= 0) {
                jumps[n_jumps++] = p->n;
                k = k ?: emit(p, INSN(BPF_JMP | BPF_JNE | BPF_K, 5, 0, 0, (int32_t)r->minor));
        }
        k = k ?: emit(p, INSN(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, r->allow ? 1 : 0));
        k = k ?: emit(p, INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
        if (k < 0)
                return k;
        for (size_t i = 0; i < n_jumps; i++)
                p->insns[jumps[i]].off = (int16_t)(p->n - jumps[i] - 1);
        return 0;
}

/* The program for @rules (the config's, in order) with the default
 * devices after them. The last matching rule decides, as the v1
 * controller's rules do when written in order; nothing matching is
 * denied. */
static int build(json_t *rules, Prog *p, HutchError *reterr) {
        size_t n = json_array_size(rules);
        int k = 0;

        /* r2 = access_type; r3 = its low 16 bits (the type); r2 >>= 16
         * (the access); r4 = major; r5 = minor. */
        k = k ?: emit(p, INSN(BPF_LDX | BPF_MEM | BPF_W, 2, 1, 0, 0));
        k = k ?: emit(p, INSN(BPF_ALU | BPF_MOV | BPF_X, 3, 2, 0, 0));
        k = k ?: emit(p, INSN(BPF_ALU | BPF_AND | BPF_K, 3, 0, 0, 0xffff));
        k = k ?: emit(p, INSN(BPF_ALU | BPF_RSH | BPF_K, 2, 0, 0, 16));
        k = k ?: emit(p, INSN(BPF_LDX | BPF_MEM | BPF_W, 4, 1, 4, 0));
        k = k ?: emit(p, INSN(BPF_LDX | BPF_MEM | BPF_W, 5, 1, 8, 0));
        /* The default devices (oci.h) stay usable after the config's
         * rules, as with the v1 controller (oci-cgroup.c). */
        for (size_t i = ELEMENTSOF(oci_default_devices); k >= 0 && i > 0; i--)
                k = emit_rule(p, &(DevRule){.type = BPF_DEVCG_DEV_CHAR,
                                            .major = oci_default_devices[i - 1].major,
                                            .minor = oci_default_devices[i - 1].minor,
                                            .access = ACC_ALL,
                                            .allow = true});
        for (size_t i = n; k >= 0 && i > 0; i--) {
                DevRule r;

                if (rule_from_json(json_array_get(rules, i - 1), &r) < 0)
                        return hutch_error_set_pointer(reterr, EINVAL, "/linux/resources/devices",
                                                       "/linux/resources/devices/%zu is not a "
                                                       "valid rule",
                                                       i - 1);
                k = emit_rule(p, &r);
                /* A rule for every device decides for all: the verifier
                 * refuses the unreachable rest. */
                if (k >= 0 && rule_matches_all(&r))
                        return 0;
        }
        k = k ?: emit(p, INSN(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 0));
        k = k ?: emit(p, INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
        if (k < 0)
                return hutch_error_set(reterr, -k, "out of memory");
        return 0;
}

/* BPF_PROG_LOAD of @p; with @log, the verifier's log goes there. */
static int prog_load(const Prog *p, char *log, size_t log_size) {
        union bpf_attr attr;

        memset(&attr, 0, sizeof(attr));
        attr.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
        attr.insns = (uint64_t)(uintptr_t)p->insns;
        attr.insn_cnt = (uint32_t)p->n;
        attr.license = (uint64_t)(uintptr_t) "LGPL";
        if (log) {
                attr.log_buf = (uint64_t)(uintptr_t)log;
                attr.log_size = (uint32_t)log_size;
                attr.log_level = 1;
        }
        return (int)syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof(attr));
}

int oci_devices_bpf_attach(const char *cgroup_dir, json_t *rules, HutchError *reterr) {
        _cleanup_close_ int prog = -EBADF, dir = -EBADF;
        _cleanup_free_ struct bpf_insn *insns = NULL;
        union bpf_attr attr;
        Prog p = {};
        int r;

        r = build(rules, &p, reterr);
        insns = p.insns;
        if (r < 0)
                return r;
        prog = prog_load(&p, NULL, 0);
        if (prog < 0) {
                /* Once more with the verifier's log, for the message. */
                _cleanup_free_ char *log = calloc(1, 65536);
                int err = errno;

                if (log && prog_load(&p, log, 65536) < 0 && log[0])
                        log[strcspn(log, "\n")] = '\0';
                return hutch_error_set_pointer(reterr, err, "/linux/resources/devices",
                                               "cannot load the cgroup v2 device program: %s%s%s",
                                               strerror(err), log && log[0] ? ": " : "",
                                               log ? log : "");
        }
        dir = open(cgroup_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir < 0)
                return hutch_error_set_pointer(reterr, errno, "/linux/resources/devices",
                                               "cannot open the cgroup '%s': %m", cgroup_dir);
        memset(&attr, 0, sizeof(attr));
        attr.target_fd = (uint32_t)dir;
        attr.attach_bpf_fd = (uint32_t)prog;
        attr.attach_type = BPF_CGROUP_DEVICE;
        attr.attach_flags = BPF_F_ALLOW_MULTI;
        if (syscall(SYS_bpf, BPF_PROG_ATTACH, &attr, sizeof(attr)) < 0)
                return hutch_error_set_pointer(reterr, errno, "/linux/resources/devices",
                                               "cannot attach the device program to '%s': %m",
                                               cgroup_dir);
        /* The attachment holds the program for as long as the cgroup
         * lives; our fds go. */
        return 0;
}
