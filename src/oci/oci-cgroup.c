/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch-oci: the container's cgroups from config.json's cgroupsPath and
 * linux.resources (oci.h, docs/oci.md). */

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cgroup/cgroup.h"
#include "fd-util.h"
#include "hutch-error.h"
#include "macro.h"
#include "oci.h"
#include "parse-util.h"

static int write_at(const char *dir, const char *file, const char *value) {
        _cleanup_free_ char *p = NULL;

        if (asprintf(&p, "%s/%s", dir, file) < 0)
                return -ENOMEM;
        return write_string_file(p, value);
}

/* mkdir -p with mode 0755. */
int oci_mkdir_p(const char *path) {
        _cleanup_free_ char *c = strdup(path);

        if (!c)
                return -ENOMEM;
        for (char *p = c + 1; *p; p++)
                if (*p == '/') {
                        *p = '\0';
                        if (mkdir(c, 0755) < 0 && errno != EEXIST)
                                return -errno;
                        *p = '/';
                }
        if (mkdir(c, 0755) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

void cgroups_done(Cgroups *c) {
        for (size_t i = 0; i < c->n; i++)
                free(c->paths[i]);
        free(c->systemd_slice);
        free(c->systemd_unit);
}

static char *cgroups_add(Cgroups *c, const char *mount, const char *rel) {
        char *p = NULL;

        if (!mount)
                return NULL;
        for (size_t i = 0; i < c->n; i++)
                if (strncmp(c->paths[i], mount, strlen(mount)) == 0 &&
                    strcmp(c->paths[i] + strlen(mount), rel) == 0)
                        return c->paths[i];
        if (c->n >= MAX_CGROUPS || asprintf(&p, "%s%s", mount, rel) < 0)
                return NULL;
        c->paths[c->n++] = p;
        return p;
}

/* A test build can leave the v1 devices controller out, so that a
 * hybrid host's tests see the cgroup v2 device program alone
 * (HUTCH_OCI_TEST_NO_V1_DEVICES=1; release builds have no such knob). */
static bool test_no_v1_devices(void) {
#if HUTCH_TEST_HOOKS
        return getenv("HUTCH_OCI_TEST_NO_V1_DEVICES") != NULL;
#else
        return false;
#endif
}

/* Where the container's cgroups go: cgroupsPath (default
 * "/hutch-oci/<id>") below every hierarchy hutch uses. */
int cgroups_plan(const char *id, json_t *linux_obj, bool systemd, Cgroups *ret,
                 HutchError *reterr) {
        const char *cp = json_string_value(json_object_get(linux_obj, "cgroupsPath"));
        _cleanup_free_ char *rel = NULL;
        int r;

        if (systemd && cp && *cp && !strchr(cp, ':'))
                return hutch_error_set_pointer(reterr, EINVAL, "/linux/cgroupsPath",
                                               "--systemd-cgroup needs /linux/cgroupsPath in the "
                                               "form 'slice:prefix:name', not '%s'",
                                               cp);
        if (systemd || (cp && strchr(cp, ':'))) {
                r = oci_systemd_path_parse(cp, id, &ret->systemd_slice, &ret->systemd_unit, reterr);
                if (r < 0)
                        return r;
                return oci_systemd_check_host(reterr);
        }
        if (cp && (strstr(cp, "..") || !*cp))
                return hutch_error_set_pointer(reterr, EINVAL, "/linux/cgroupsPath",
                                               "bad /linux/cgroupsPath '%s'", cp);
        if (asprintf(&rel, "%s%s", cp ? (cp[0] == '/' ? "" : "/") : "/hutch-oci/", cp ? cp : id) <
            0)
                return -ENOMEM;
        return cgroups_plan_at(ret, rel, reterr);
}

int cgroups_plan_at(Cgroups *ret, const char *rel, HutchError *reterr) {
        CgroupTopology t = {};
        struct stat st;
        int r;

        t.privileged = true;
        r = cgroup_topology_detect(&t, reterr);
        if (r < 0)
                return r;
        ret->memory_v = t.controllers[CGROUP_MEMORY].version;
        ret->pids_v = t.controllers[CGROUP_PIDS].version;
        ret->cpu_v = t.controllers[CGROUP_CPU].version;
        ret->memory = cgroups_add(ret, t.controllers[CGROUP_MEMORY].mount, rel);
        ret->pids = cgroups_add(ret, t.controllers[CGROUP_PIDS].mount, rel);
        ret->cpu = cgroups_add(ret, t.controllers[CGROUP_CPU].mount, rel);
        (void)cgroups_add(ret, t.cpuacct.mount, rel);
        ret->freezer = cgroups_add(ret, t.freezer.mount, rel);
        ret->v2 = cgroups_add(ret, t.v2.mount, rel);
        if (stat("/sys/fs/cgroup/devices/devices.allow", &st) == 0 && !test_no_v1_devices())
                ret->devices = cgroups_add(ret, "/sys/fs/cgroup/devices", rel);
        cgroup_topology_done(&t);
        return 0;
}

static int write_u64(const char *dir, const char *file, long long v) {
        char s[32];

        (void)snprintf(s, sizeof(s), "%lld", v);
        return write_at(dir, file, s);
}

/* The default devices every container gets (oci.h's oci_default_devices,
 * which oci-init.c bind-mounts) stay usable after the config's device
 * rules, as the runtime-spec's "default devices" require. */
static int cgroups_allow_default_devices(Cgroups *c, json_t *devices) {
        if (!c->devices || json_array_size(devices) == 0)
                return 0;
        for (size_t i = 0; i < ELEMENTSOF(oci_default_devices); i++) {
                const OciDefaultDevice *d = &oci_default_devices[i];
                char rule[48], minor[16] = "*";
                int r;

                if (d->minor >= 0)
                        (void)snprintf(minor, sizeof(minor), "%d", d->minor);
                (void)snprintf(rule, sizeof(rule), "c %u:%s rwm", d->major, minor);
                r = write_at(c->devices, "devices.allow", rule);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* linux.resources.devices: written to the v1 devices controller where
 * there is one, and, where the container has a cgroup v2 directory, an
 * eBPF device program attached to it (oci-devices.c), both in force (the
 * kernel checks both). On a host with no v1 controller the program is the
 * only wall, so failing to attach it fails the create; with the v1
 * controller enforcing the same rules it may fail (a kernel without
 * cgroup BPF). The rules cannot change later where a program holds them
 * (a second one would only narrow them): `update` refuses. */
static int cgroups_apply_devices(Cgroups *c, json_t *devices, bool update, HutchError *reterr) {
        HutchError e2 = {};
        json_t *v;
        size_t i;
        int r;

        if (json_array_size(devices) == 0)
                return 0;
        if (!c->devices && !c->v2)
                return hutch_error_set_pointer(reterr, EOPNOTSUPP, "/linux/resources/devices",
                                               "/linux/resources/devices needs the v1 devices "
                                               "controller or cgroup v2");
        if (update && c->v2)
                return hutch_error_set_pointer(reterr, EOPNOTSUPP, "/linux/resources/devices",
                                               "/linux/resources/devices cannot change on a "
                                               "created container under cgroup v2");
        json_array_foreach(devices, i, v) {
                const char *type = json_string_value(json_object_get(v, "type"));
                const char *access = json_string_value(json_object_get(v, "access"));
                json_t *maj = json_object_get(v, "major"), *min = json_object_get(v, "minor");
                char rule[96], smaj[24] = "*", smin[24] = "*";

                if (!c->devices)
                        break;
                if (json_is_integer(maj) && json_integer_value(maj) >= 0)
                        (void)snprintf(smaj, sizeof(smaj), "%lld", json_integer_value(maj));
                if (json_is_integer(min) && json_integer_value(min) >= 0)
                        (void)snprintf(smin, sizeof(smin), "%lld", json_integer_value(min));
                (void)snprintf(rule, sizeof(rule), "%s %s:%s %s", type ? type : "a", smaj, smin,
                               access ? access : "rwm");
                r = write_at(c->devices,
                             json_is_true(json_object_get(v, "allow")) ? "devices.allow"
                                                                       : "devices.deny",
                             rule);
                if (r < 0)
                        return hutch_error_set_pointer(reterr, -r, "/linux/resources/devices",
                                                       "cannot apply device rule '%s'", rule);
        }
        r = cgroups_allow_default_devices(c, devices);
        if (r < 0)
                return hutch_error_set_pointer(reterr, -r, "/linux/resources/devices",
                                               "cannot allow the default devices");
        if (!c->v2)
                return 0;
        r = oci_devices_bpf_attach(c->v2, devices, c->devices ? &e2 : reterr);
        return c->devices ? 0 : r;
}

/* SECURITY: a limit that cannot be applied fails the create. */
int cgroups_apply(Cgroups *c, json_t *res, bool update, HutchError *reterr) {
        json_t *mem = json_object_get(res, "memory"), *pids = json_object_get(res, "pids"),
               *cpu = json_object_get(res, "cpu");
        size_t i;
        int r;

        for (i = 0; i < c->n; i++) {
                r = oci_mkdir_p(c->paths[i]);
                if (r < 0)
                        return hutch_error_set(reterr, -r, "cannot create cgroup '%s'",
                                               c->paths[i]);
        }
        if (json_is_integer(json_object_get(mem, "limit"))) {
                long long lim = json_integer_value(json_object_get(mem, "limit"));
                long long swap = json_is_integer(json_object_get(mem, "swap"))
                                         ? json_integer_value(json_object_get(mem, "swap"))
                                         : 0;

                if (!c->memory)
                        return hutch_error_set_pointer(reterr, EOPNOTSUPP,
                                                       "/linux/resources/memory",
                                                       "no cgroup hierarchy serves memory");
                if (c->memory_v == CGROUP_VERSION_2) {
                        r = write_u64(c->memory, "memory.max", lim);
                        if (r >= 0 && swap > 0)
                                r = swap < 0 ? 0
                                             : write_u64(c->memory, "memory.swap.max",
                                                         swap > lim ? swap - lim : 0);
                } else {
                        r = write_u64(c->memory, "memory.limit_in_bytes", lim);
                        if (r >= 0 && swap > 0) {
                                r = write_u64(c->memory, "memory.memsw.limit_in_bytes", swap);
                                if (r == -ENOENT) {
                                        /* no swap accounting: fine without swap */
                                        _cleanup_free_ char *sw = NULL;
                                        r = read_full_file("/proc/swaps", 65536, &sw);
                                        if (r >= 0 && strchr(sw, '\n') &&
                                            strchr(sw, '\n')[1] != '\0')
                                                r = -EOPNOTSUPP;
                                }
                        }
                }
                if (r < 0)
                        return hutch_error_set_pointer(reterr, -r, "/linux/resources/memory",
                                                       "cannot set the memory limit");
        }
        if (json_is_integer(json_object_get(pids, "limit"))) {
                long long lim = json_integer_value(json_object_get(pids, "limit"));

                if (!c->pids)
                        return hutch_error_set_pointer(reterr, EOPNOTSUPP, "/linux/resources/pids",
                                                       "no cgroup hierarchy serves pids");
                r = lim <= 0 ? write_at(c->pids, "pids.max", "max")
                             : write_u64(c->pids, "pids.max", lim);
                if (r < 0)
                        return hutch_error_set_pointer(reterr, -r, "/linux/resources/pids",
                                                       "cannot set the pids limit");
        }
        if (json_is_integer(json_object_get(cpu, "quota")) ||
            json_is_integer(json_object_get(cpu, "shares"))) {
                long long quota = json_integer_value(json_object_get(cpu, "quota"));
                long long period = json_is_integer(json_object_get(cpu, "period"))
                                           ? json_integer_value(json_object_get(cpu, "period"))
                                           : 100000;
                long long shares = json_integer_value(json_object_get(cpu, "shares"));

                if (!c->cpu)
                        return hutch_error_set_pointer(reterr, EOPNOTSUPP, "/linux/resources/cpu",
                                                       "no cgroup hierarchy serves cpu");
                r = 0;
                if (c->cpu_v == CGROUP_VERSION_2) {
                        char s[64];
                        if (quota > 0) {
                                (void)snprintf(s, sizeof(s), "%lld %lld", quota, period);
                                r = write_at(c->cpu, "cpu.max", s);
                        }
                        if (r >= 0 && shares > 0)
                                r = write_u64(c->cpu, "cpu.weight",
                                              1 + ((shares - 2) * 9999) / 262142);
                } else {
                        if (quota > 0) {
                                r = write_u64(c->cpu, "cpu.cfs_period_us", period);
                                if (r >= 0)
                                        r = write_u64(c->cpu, "cpu.cfs_quota_us", quota);
                        }
                        if (r >= 0 && shares > 0)
                                r = write_u64(c->cpu, "cpu.shares", shares);
                }
                if (r < 0)
                        return hutch_error_set_pointer(reterr, -r, "/linux/resources/cpu",
                                                       "cannot set the cpu limit");
        }
        return cgroups_apply_devices(c, json_object_get(res, "devices"), update, reterr);
}

int cgroups_attach(Cgroups *c, pid_t pid) {
        for (size_t i = 0; i < c->n; i++) {
                int r = write_u64(c->paths[i], "cgroup.procs", pid);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Signals every process of the container's cgroup (the first path is
 * enough: every hierarchy holds the same processes). */
int cgroup_signal_all(json_t *state, int sig) {
        json_t *paths = json_object_get(state, "cgroups"), *v;
        size_t i;

        json_array_foreach(paths, i, v) {
                _cleanup_free_ char *procs = NULL, *file = NULL;
                char *line, *save = NULL;

                if (asprintf(&file, "%s/cgroup.procs", json_string_value(v)) < 0)
                        return -ENOMEM;
                if (read_full_file(file, 1 << 20, &procs) < 0)
                        continue;
                for (line = strtok_r(procs, "\n", &save); line;
                     line = strtok_r(NULL, "\n", &save)) {
                        int pid;
                        if (safe_atoi(line, &pid) >= 0 && pid > 0)
                                (void)kill(pid, sig);
                }
                return 0;
        }
        return 0;
}

bool cgroups_empty(json_t *state) {
        json_t *v;
        size_t i;

        json_array_foreach(json_object_get(state, "cgroups"), i, v) {
                _cleanup_free_ char *procs = NULL, *file = NULL;

                if (asprintf(&file, "%s/cgroup.procs", json_string_value(v)) < 0)
                        return false;
                if (read_full_file(file, 1 << 20, &procs) >= 0 && procs[0])
                        return false;
        }
        return true;
}

int cgroups_remove(json_t *state) {
        json_t *v;
        size_t i;
        int ret = 0;

        json_array_foreach(json_object_get(state, "cgroups"), i, v) {
                int r = cgroup_remove_tree(json_string_value(v));
                if (r < 0 && ret == 0)
                        ret = r;
        }
        return ret;
}
