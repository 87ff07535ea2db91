/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch-vm-bench: what bench/bench-vm.sh cannot see from outside one
 * `hutch run`. Starts one microVM the way `hutch run --backend vm` does
 * (template restore, or a cold boot with --cold), then measures:
 *
 *   start_ms    launch to the agent's first answer (READY to SETUP)
 *   ping_ms     the port's round trip (PING/PONG), median of N
 *   exec_ms     EXEC of `true` (or --cmd PATH) to its EXIT, median of N
 *   rss_kib     QEMU's resident memory, idle, after the execs
 *
 * and prints them as "key value" lines. Usage:
 *   hutch-vm-bench [--cold] [--accel kvm|tcg] [--memory MIB] [--cmd PATH] [-n N]
 * (it finds hutch-agent through $HUTCH_AGENT_PATH). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "parse-util.h"
#include "rm-rf.h"
#include "store/store.h"
#include "vm/vm.h"

static uint64_t now_us(void) {
        struct timespec ts;

        (void)clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

        return x < y ? -1 : x > y;
}

static double median_ms(uint64_t *v, size_t n) {
        qsort(v, n, sizeof(*v), cmp_u64);
        return (double)v[n / 2] / 1000.0;
}

/* Waits for a frame of @want; stdout/stderr frames are skipped (and
 * acknowledged, so that the command's output never waits for the window). */
static int wait_for(Vm *vm, uint8_t want) {
        for (;;) {
                unsigned char ack[4];
                AgentFrame fr;
                int r = vm_agent_recv(vm, 60000, &fr);

                if (r < 0)
                        return r;
                if (fr.type == want)
                        return 0;
                if (fr.type != AGENT_MSG_STDOUT && fr.type != AGENT_MSG_STDERR &&
                    fr.type != AGENT_MSG_STARTED)
                        return -EPROTO;
                if (fr.type == AGENT_MSG_STARTED)
                        continue;
                agent_put_le32(ack, (uint32_t)fr.len);
                r = agent_frame_write(vm->agent_fd, AGENT_MSG_ACK, 0, ack, sizeof(ack));
                if (r < 0)
                        return r;
        }
}

static uint64_t rss_kib(pid_t pid) {
        _cleanup_free_ char *text = NULL;
        char path[64], num[32];
        const char *p;
        uint64_t v = 0;

        (void)snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        if (read_full_file(path, 65536, &text) < 0 || !(p = strstr(text, "VmRSS:")))
                return 0;
        p += 6 + strspn(p + 6, " \t");
        (void)snprintf(num, sizeof(num), "%.*s", (int)strspn(p, "0123456789"), p);
        return safe_atou64(num, &v) < 0 ? 0 : v;
}

int main(int argc, char **argv) {
        _cleanup_(store_freep) Store *store = NULL;
        _cleanup_(vm_freep) Vm *vm = NULL;
        _cleanup_free_ char *cache = NULL, *templates = NULL, *run = NULL, *setup = NULL,
                            *exec = NULL;
        _cleanup_free_ uint64_t *ping = NULL, *ex = NULL;
        size_t setup_len = 0, exec_len = 0;
        uint64_t mib = 256, n = 20, t0;
        const char *cmd = "true";
        HutchError e = {};
        VmConfig c = {
                .accel = VM_ACCEL_TCG, .vcpus = 1, .use_template = true, .boot_timeout_ms = 60000};
        int r;

        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--cold") == 0)
                        c.use_template = false;
                else if (strcmp(argv[i], "--accel") == 0 && i + 1 < argc)
                        c.accel = vm_accel_from_string(argv[++i]);
                else if (strcmp(argv[i], "--memory") == 0 && i + 1 < argc) {
                        if (safe_atou64(argv[++i], &mib) < 0)
                                return 2;
                } else if (strcmp(argv[i], "--cmd") == 0 && i + 1 < argc)
                        cmd = argv[++i];
                else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
                        if (safe_atou64(argv[++i], &n) < 0)
                                return 2;
                } else {
                        (void)fprintf(stderr,
                                      "usage: %s [--cold] [--accel kvm|tcg] [--memory "
                                      "MIB] [--cmd PATH] [-n N]\n",
                                      argv[0]);
                        return 2;
                }
        }
        if ((int)c.accel < 0 || n == 0 || n > 10000 || mib < 64) {
                (void)fprintf(stderr, "bad arguments\n");
                return 2;
        }
        c.ram_bytes = mib << 20;
        r = store_open(&store, &e);
        if (r < 0) {
                (void)fprintf(stderr, "%s\n", e.msg);
                return 1;
        }
        if (asprintf(&cache, "%s/vm", store->home) < 0 ||
            vm_template_dir(store->runtime, store->home, &templates) < 0 ||
            asprintf(&run, "%s/vm-bench-XXXXXX", store->state) < 0 || !mkdtemp(run))
                return 1;
        c.cache_dir = cache;
        c.template_dir = templates;
        c.run_dir = run;
        /* The host base as `hutch run` shares it (its plan_filesystem()):
         * without /etc the loader has no ld.so.cache and looks for libc in
         * 18 places, each a 9p round trip that a real sandbox never makes. */
        c.shares[0] = (VmShare){.path = "/usr", .read_only = true};
        c.shares[1] = (VmShare){.path = "/etc", .read_only = true};
        c.n_shares = 2;
        r = agent_payload_add(&setup, &setup_len, "mount=", "h0:ro:/usr");
        if (r >= 0)
                r = agent_payload_add(&setup, &setup_len, "mount=", "h1:ro:/etc");
        if (r >= 0)
                r = agent_payload_add(&setup, &setup_len, "link=", "/bin:usr/bin");
        if (r >= 0)
                r = agent_payload_add(&setup, &setup_len, "link=", "/lib:usr/lib");
        if (r >= 0)
                r = agent_payload_add(&setup, &setup_len, "link=", "/lib64:usr/lib64");
        if (r >= 0)
                r = agent_payload_add(&exec, &exec_len, "a:", cmd);
        if (r >= 0)
                r = agent_payload_add(&exec, &exec_len, "e:", "PATH=/usr/bin");
        if (r >= 0)
                r = agent_payload_add(&exec, &exec_len, "c:", "/");
        ping = calloc(n, sizeof(uint64_t));
        ex = calloc(n, sizeof(uint64_t));
        if (r < 0 || !ping || !ex)
                return 1;

        t0 = now_us();
        r = vm_start(&c, &vm, &e);
        if (r >= 0)
                r = vm_agent_request(vm, AGENT_MSG_SETUP, 0, setup, setup_len, AGENT_MSG_READY, &e);
        if (r < 0) {
                (void)fprintf(stderr, "%s\n", e.msg);
                goto out;
        }
        (void)printf("start %s\nstart_ms %.1f\n",
                     vm->start == VM_START_COLD    ? "cold"
                     : vm->start == VM_START_BUILT ? "built"
                                                   : "template",
                     (double)(now_us() - t0) / 1000.0);
        for (uint64_t i = 0; r >= 0 && i < n; i++) {
                t0 = now_us();
                r = agent_frame_write(vm->agent_fd, AGENT_MSG_PING, 0, "x", 1);
                if (r >= 0)
                        r = wait_for(vm, AGENT_MSG_PONG);
                ping[i] = now_us() - t0;
        }
        for (uint64_t i = 0; r >= 0 && i < n; i++) {
                t0 = now_us();
                r = agent_frame_write(vm->agent_fd, AGENT_MSG_EXEC, 0, exec, exec_len);
                if (r >= 0)
                        r = agent_frame_write(vm->agent_fd, AGENT_MSG_STDIN, 0, NULL, 0);
                if (r >= 0)
                        r = wait_for(vm, AGENT_MSG_EXIT);
                ex[i] = now_us() - t0;
        }
        if (r < 0) {
                (void)fprintf(stderr, "the guest failed: %s\n", strerror(-r));
                goto out;
        }
        (void)printf("ping_ms %.2f\nexec_ms %.2f\nrss_kib %" PRIu64 "\n", median_ms(ping, n),
                     median_ms(ex, n), rss_kib(vm->pid));
out:
        vm = vm_free(vm);
        (void)rm_rf_at(AT_FDCWD, run);
        return r < 0 ? 1 : 0;
}
