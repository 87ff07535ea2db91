/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "macro.h"
#include "seccomp/seccomp-bpf.h"
#include "seccomp/seccomp-filter.h"

const struct sock_filter *seccomp_filter_default_program(size_t *ret_n) {
        *ret_n = ELEMENTSOF(seccomp_default_bpf);
        return seccomp_default_bpf;
}

const struct sock_filter *seccomp_filter_vmm_program(size_t *ret_n) {
        *ret_n = ELEMENTSOF(seccomp_vmm_bpf);
        return seccomp_vmm_bpf;
}

static int load(const struct sock_filter *insn, size_t n) {
        struct sock_fprog prog = {
                .len = (unsigned short)n,
                .filter = (struct sock_filter *)insn,
        };

        /* SECURITY: the filter is never in force on a process that could
         * still gain privileges through a setuid exec. */
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return negative_errno();
        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
                return negative_errno();
        return 0;
}

int seccomp_filter_load_default(void) {
        return load(seccomp_default_bpf, ELEMENTSOF(seccomp_default_bpf));
}

int seccomp_filter_load_vmm(void) {
        return load(seccomp_vmm_bpf, ELEMENTSOF(seccomp_vmm_bpf));
}
