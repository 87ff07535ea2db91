/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch-oci: the systemd form of /linux/cgroupsPath ("slice:prefix:name",
 * what engines pass with --systemd-cgroup): the container's cgroup is a
 * transient scope unit that systemd creates over D-Bus with the
 * container's init in it, Delegate=yes and the resource limits as unit
 * properties (oci.h, docs/oci.md).
 *
 * The D-Bus client is sd-bus from libsystemd (the one dependency this
 * adds): the bus protocol (SASL, marshalling, matching the JobRemoved
 * signal of our job) is systemd's own code, the peer is systemd, and
 * every host that can serve this form has the library. Built without it,
 * the form is refused and `features` says "systemd": false. */

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <unistd.h>

#if HAVE_LIBSYSTEMD
#include <systemd/sd-bus.h>
#endif

#include "hutch-error.h"
#include "macro.h"
#include "oci.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

/* How long systemd may take to run the start or stop job of a scope. */
#define SYSTEMD_JOB_TIMEOUT_USEC (30ULL * 1000000ULL)

bool oci_systemd_built(void) {
        return HAVE_LIBSYSTEMD;
}

/* Characters of a unit name (systemd's unit-name rules) other than the
 * separators of cgroupsPath. */
static bool unit_chars_valid(const char *s) {
        for (; *s; s++)
                if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                      (*s >= '0' && *s <= '9') || strchr("-_.\\@", *s)))
                        return false;
        return true;
}

static bool ends_with(const char *s, const char *suffix) {
        size_t n = strlen(s), m = strlen(suffix);

        return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* A slice name: "-.slice" (the root), or dash-separated non-empty parts
 * ending in ".slice" ("a-b.slice" is "a.slice/a-b.slice"). */
static bool slice_valid(const char *s) {
        size_t n = strlen(s);

        if (strcmp(s, "-.slice") == 0)
                return true;
        if (!ends_with(s, ".slice") || n == strlen(".slice") || !unit_chars_valid(s))
                return false;
        if (s[0] == '-' || s[n - strlen(".slice") - 1] == '-' || strstr(s, "--"))
                return false;
        return true;
}

int oci_systemd_path_parse(const char *cgroups_path, const char *id, char **ret_slice,
                           char **ret_unit, HutchError *reterr) {
        _cleanup_free_ char *copy = NULL, *slice = NULL, *unit = NULL;
        const char *parts[3];
        char *p, *c;
        size_t n = 0;

        /* runc's default for an engine that passes no path. */
        if (!cgroups_path || !*cgroups_path)
                cgroups_path = NULL;
        if (asprintf(&copy, "%s", cgroups_path ? cgroups_path : "system.slice:hutch-oci:") < 0)
                return -ENOMEM;
        /* The third part keeps any further colon (refused below). */
        for (p = copy; n < 3; p = c + 1) {
                parts[n++] = p;
                c = strchr(p, ':');
                if (!c || n == 3)
                        break;
                *c = '\0';
        }
        if (n != 3 || strchr(parts[2], ':'))
                return hutch_error_set_pointer(reterr, EINVAL, "/linux/cgroupsPath",
                                               "bad systemd /linux/cgroupsPath '%s': expected "
                                               "'slice:prefix:name'",
                                               cgroups_path);
        if (!cgroups_path)
                parts[2] = id;
        for (size_t i = 0; i < 3; i++)
                if (strstr(parts[i], "..") || strchr(parts[i], '/') || !unit_chars_valid(parts[i]))
                        return hutch_error_set_pointer(
                                reterr, EINVAL, "/linux/cgroupsPath",
                                "bad systemd /linux/cgroupsPath '%s': part '%s' is not a unit "
                                "name",
                                cgroups_path ? cgroups_path : "", parts[i]);
        if (*parts[0] && !slice_valid(parts[0]))
                return hutch_error_set_pointer(reterr, EINVAL, "/linux/cgroupsPath",
                                               "bad systemd /linux/cgroupsPath '%s': '%s' is "
                                               "not a slice name (NAME.slice)",
                                               cgroups_path, parts[0]);
        if (!*parts[2])
                return hutch_error_set_pointer(reterr, EINVAL, "/linux/cgroupsPath",
                                               "bad systemd /linux/cgroupsPath '%s': no name",
                                               cgroups_path);
        if (ends_with(parts[2], ".slice"))
                return hutch_error_set_pointer(reterr, EOPNOTSUPP, "/linux/cgroupsPath",
                                               "systemd /linux/cgroupsPath '%s': a slice as the "
                                               "container's own unit is not supported",
                                               cgroups_path);
        slice = strdup(*parts[0] ? parts[0] : "system.slice");
        if (!slice || asprintf(&unit, "%s%s%s.scope", parts[1], *parts[1] ? "-" : "", parts[2]) < 0)
                return -ENOMEM;
        if (strlen(unit) > 255)
                return hutch_error_set_pointer(reterr, EINVAL, "/linux/cgroupsPath",
                                               "systemd /linux/cgroupsPath '%s': unit name too "
                                               "long",
                                               cgroups_path);
        *ret_slice = TAKE_PTR(slice);
        *ret_unit = TAKE_PTR(unit);
        return 0;
}

int oci_systemd_check_host(HutchError *reterr) {
        struct statfs sfs;

        if (!HAVE_LIBSYSTEMD)
                return hutch_error_set_pointer(reterr, EOPNOTSUPP, "/linux/cgroupsPath",
                                               "systemd cgroups: hutch-oci was built without "
                                               "libsystemd (sd-bus)");
        if (geteuid() != 0)
                return hutch_error_set_pointer(reterr, EOPNOTSUPP, "/linux/cgroupsPath",
                                               "systemd cgroups: only as root (a rootless "
                                               "user's systemd is not supported)");
        /* sd_booted()'s test: systemd as init creates this directory. */
        if (access("/run/systemd/system", F_OK) < 0)
                return hutch_error_set_pointer(reterr, EOPNOTSUPP, "/linux/cgroupsPath",
                                               "systemd cgroups (--systemd-cgroup or a "
                                               "'slice:prefix:name' cgroupsPath) need systemd "
                                               "running as init, and systemd is not running "
                                               "here (no /run/systemd/system)");
        if (statfs("/sys/fs/cgroup", &sfs) < 0 || sfs.f_type != CGROUP2_SUPER_MAGIC)
                return hutch_error_set_pointer(reterr, EOPNOTSUPP, "/linux/cgroupsPath",
                                               "systemd cgroups: only on a pure cgroup v2 host "
                                               "(/sys/fs/cgroup is not cgroup2: a hybrid or v1 "
                                               "layout)");
        return 0;
}

#if HAVE_LIBSYSTEMD

static void bus_unrefp(sd_bus **b) {
        sd_bus_flush_close_unref(*b);
}

static void msg_unrefp(sd_bus_message **m) {
        sd_bus_message_unref(*m);
}

typedef struct JobWait {
        const char *path; /* the job's object path, NULL until known */
        char *result;     /* "done", "failed", ... once removed */
} JobWait;

static int on_job_removed(sd_bus_message *m, void *userdata, sd_bus_error *e) {
        JobWait *w = userdata;
        const char *path = NULL, *unit = NULL, *result = NULL;
        uint32_t id;

        (void)e;
        if (sd_bus_message_read(m, "uoss", &id, &path, &unit, &result) < 0)
                return 0;
        if (w->path && strcmp(path, w->path) == 0 && !w->result)
                w->result = strdup(result);
        return 0;
}

/* The system bus, or, where no D-Bus daemon runs, systemd's own socket
 * (root only, which hutch-oci's systemd cgroups are). */
static int bus_connect(sd_bus **ret, HutchError *reterr) {
        sd_bus *bus = NULL;
        int r, r2;

        r = sd_bus_open_system(&bus);
        if (r >= 0) {
                *ret = bus;
                return 0;
        }
        r2 = sd_bus_new(&bus);
        if (r2 >= 0)
                r2 = sd_bus_set_address(bus, "unix:path=/run/systemd/private");
        if (r2 >= 0)
                r2 = sd_bus_start(bus);
        if (r2 < 0) {
                sd_bus_unref(bus);
                return hutch_error_set(reterr, -r,
                                       "systemd cgroups: cannot connect to the system bus (%s) "
                                       "nor to systemd (%s)",
                                       strerror(-r), strerror(-r2));
        }
        *ret = bus;
        return 0;
}

/* Connects with a match for JobRemoved already in place, so that the
 * signal of a job started afterwards cannot be missed, and subscribes:
 * systemd sends its job signals on the system bus only while some client
 * is subscribed. */
static int bus_open(sd_bus **ret, JobWait *w, HutchError *reterr) {
        sd_bus *bus = NULL;
        int r;

        r = bus_connect(&bus, reterr);
        if (r < 0)
                return r;
        r = sd_bus_match_signal(bus, NULL, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                "org.freedesktop.systemd1.Manager", "JobRemoved", on_job_removed,
                                w);
        if (r >= 0)
                r = sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                       "org.freedesktop.systemd1.Manager", "Subscribe", NULL, NULL,
                                       NULL);
        if (r < 0) {
                sd_bus_flush_close_unref(bus);
                return hutch_error_set(reterr, -r, "systemd cgroups: cannot watch systemd's jobs");
        }
        *ret = bus;
        return 0;
}

static int job_wait(sd_bus *bus, JobWait *w, HutchError *reterr) {
        uint64_t waited = 0;
        int r;

        while (!w->result) {
                r = sd_bus_process(bus, NULL);
                if (r < 0)
                        return hutch_error_set(reterr, -r, "systemd cgroups: the bus failed");
                if (r > 0)
                        continue;
                if (waited >= SYSTEMD_JOB_TIMEOUT_USEC)
                        return hutch_error_set(reterr, ETIMEDOUT,
                                               "systemd cgroups: systemd did not finish job %s",
                                               w->path);
                r = sd_bus_wait(bus, 100000);
                if (r < 0)
                        return hutch_error_set(reterr, -r, "systemd cgroups: the bus failed");
                waited += 100000;
        }
        if (strcmp(w->result, "done") != 0)
                return hutch_error_set(reterr, EIO, "systemd cgroups: job %s ended '%s'", w->path,
                                       w->result);
        return 0;
}

/* systemd's version number (252 for "252.39-1~deb12u2"), 0 if unknown. */
static unsigned systemd_version(sd_bus *bus) {
        _cleanup_free_ char *v = NULL;
        unsigned n = 0;

        if (sd_bus_get_property_string(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                       "org.freedesktop.systemd1.Manager", "Version", NULL, &v) < 0)
                return 0;
        for (const char *c = v; *c >= '0' && *c <= '9' && n < 100000; c++)
                n = n * 10 + (unsigned)(*c - '0');
        return n;
}

/* The unit properties of linux.resources @res, the same values that
 * cgroups_apply() writes to the files (a later daemon-reload keeps them). */
static int append_resources(sd_bus_message *m, json_t *res) {
        json_t *mem = json_object_get(res, "memory"), *pids = json_object_get(res, "pids"),
               *cpu = json_object_get(res, "cpu");
        int r = 0;

        if (json_is_integer(json_object_get(mem, "limit"))) {
                long long lim = json_integer_value(json_object_get(mem, "limit"));
                long long swap = json_integer_value(json_object_get(mem, "swap"));

                r = sd_bus_message_append(m, "(sv)", "MemoryMax", "t",
                                          (uint64_t)(lim > 0 ? lim : 0));
                if (r >= 0 && swap > 0)
                        r = sd_bus_message_append(m, "(sv)", "MemorySwapMax", "t",
                                                  (uint64_t)(swap > lim ? swap - lim : 0));
        }
        if (r >= 0 && json_is_integer(json_object_get(pids, "limit"))) {
                long long lim = json_integer_value(json_object_get(pids, "limit"));

                r = sd_bus_message_append(m, "(sv)", "TasksMax", "t",
                                          lim <= 0 ? UINT64_MAX : (uint64_t)lim);
        }
        if (r >= 0 && json_integer_value(json_object_get(cpu, "quota")) > 0) {
                long long quota = json_integer_value(json_object_get(cpu, "quota"));
                long long period = json_integer_value(json_object_get(cpu, "period"));
                uint64_t per_sec;

                if (period <= 0)
                        period = 100000;
                /* systemd keeps the quota in whole percents (10 ms per
                 * second): rounded up, as runc does; cpu.max itself holds
                 * the exact value (cgroups_apply()). */
                per_sec = (uint64_t)quota * 1000000ULL / (uint64_t)period;
                per_sec = (per_sec + 9999) / 10000 * 10000;
                r = sd_bus_message_append(m, "(sv)", "CPUQuotaPerSecUSec", "t", per_sec);
                if (r >= 0)
                        r = sd_bus_message_append(m, "(sv)", "CPUQuotaPeriodUSec", "t",
                                                  (uint64_t)period);
        }
        if (r >= 0 && json_integer_value(json_object_get(cpu, "shares")) > 0) {
                long long shares = json_integer_value(json_object_get(cpu, "shares"));

                r = sd_bus_message_append(m, "(sv)", "CPUWeight", "t",
                                          (uint64_t)(1 + ((shares - 2) * 9999) / 262142));
        }
        return r;
}

static int unit_object_path(sd_bus *bus, const char *unit, char **ret, HutchError *reterr) {
        _cleanup_(msg_unrefp) sd_bus_message *reply = NULL;
        sd_bus_error e = SD_BUS_ERROR_NULL;
        const char *path;
        int r;

        r = sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                               "org.freedesktop.systemd1.Manager", "GetUnit", &e, &reply, "s",
                               unit);
        if (r < 0) {
                hutch_error_set(reterr, -r, "systemd cgroups: no unit '%s': %s", unit,
                                e.message ? e.message : strerror(-r));
                sd_bus_error_free(&e);
                return r;
        }
        r = sd_bus_message_read(reply, "o", &path);
        if (r < 0)
                return hutch_error_set(reterr, -r, "systemd cgroups: bad GetUnit reply");
        *ret = strdup(path);
        return *ret ? 0 : -ENOMEM;
}

int oci_systemd_scope_start(const char *slice, const char *unit, const char *id, pid_t pid,
                            json_t *res, char **ret_cgroup, HutchError *reterr) {
        _cleanup_(bus_unrefp) sd_bus *bus = NULL;
        _cleanup_(msg_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        _cleanup_free_ char *desc = NULL, *upath = NULL, *cgroup = NULL, *job = NULL;
        sd_bus_error e = SD_BUS_ERROR_NULL;
        JobWait w = {};
        const char *jp;
        int r;

        r = bus_open(&bus, &w, reterr);
        if (r < 0)
                return r;
        if (asprintf(&desc, "hutch-oci container %s", id) < 0)
                return -ENOMEM;
        r = sd_bus_message_new_method_call(
                bus, &m, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                "org.freedesktop.systemd1.Manager", "StartTransientUnit");
        if (r >= 0)
                r = sd_bus_message_append(m, "ss", unit, "fail");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "(sv)");
        if (r >= 0)
                r = sd_bus_message_append(m, "(sv)(sv)(sv)(sv)(sv)(sv)(sv)(sv)", "Description", "s",
                                          desc, "Slice", "s", slice, "PIDs", "au", 1, (uint32_t)pid,
                                          "Delegate", "b", 1, "DefaultDependencies", "b", 0,
                                          "MemoryAccounting", "b", 1, "TasksAccounting", "b", 1,
                                          "CPUAccounting", "b", 1);
        /* From systemd 253 a scope has OOMPolicy, "stop" by default: one
         * OOM kill in the container would stop the whole scope, where an
         * engine expects only the kernel's victim to die (runc sets the
         * same). */
        if (r >= 0 && systemd_version(bus) >= 253)
                r = sd_bus_message_append(m, "(sv)", "OOMPolicy", "s", "continue");
        if (r >= 0)
                r = append_resources(m, res);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r >= 0)
                r = sd_bus_message_append(m, "a(sa(sv))", 0);
        if (r < 0)
                return hutch_error_set(reterr, -r, "systemd cgroups: cannot build the request");
        r = sd_bus_call(bus, m, 0, &e, &reply);
        if (r < 0) {
                if (sd_bus_error_has_name(&e, "org.freedesktop.systemd1.UnitExists"))
                        hutch_error_set_pointer(reterr, EEXIST, "/linux/cgroupsPath",
                                                "systemd cgroups: unit '%s' already exists", unit);
                else
                        hutch_error_set(reterr, -r,
                                        "systemd cgroups: systemd refused to start '%s': %s", unit,
                                        e.message ? e.message : strerror(-r));
                sd_bus_error_free(&e);
                return r;
        }
        r = sd_bus_message_read(reply, "o", &jp);
        if (r < 0)
                return hutch_error_set(reterr, -r, "systemd cgroups: bad StartTransientUnit reply");
        job = strdup(jp);
        if (!job)
                return -ENOMEM;
        w.path = job;
        r = job_wait(bus, &w, reterr);
        free(w.result);
        if (r < 0)
                goto stop;
        r = unit_object_path(bus, unit, &upath, reterr);
        if (r < 0)
                goto stop;
        r = sd_bus_get_property_string(bus, "org.freedesktop.systemd1", upath,
                                       "org.freedesktop.systemd1.Scope", "ControlGroup", &e,
                                       &cgroup);
        if (r < 0 || !cgroup || cgroup[0] != '/' || strstr(cgroup, "..")) {
                hutch_error_set(reterr, r < 0 ? -r : EIO,
                                "systemd cgroups: no control group for '%s'", unit);
                sd_bus_error_free(&e);
                r = r < 0 ? r : -EIO;
                goto stop;
        }
        *ret_cgroup = TAKE_PTR(cgroup);
        return 0;
stop:
        /* The scope was started: it must not outlive the failed create. */
        (void)oci_systemd_scope_stop(unit);
        return r;
}

int oci_systemd_scope_set(const char *unit, json_t *res, HutchError *reterr) {
        _cleanup_(bus_unrefp) sd_bus *bus = NULL;
        _cleanup_(msg_unrefp) sd_bus_message *m = NULL;
        sd_bus_error e = SD_BUS_ERROR_NULL;
        int r;

        r = bus_connect(&bus, reterr);
        if (r < 0)
                return r;
        r = sd_bus_message_new_method_call(bus, &m, "org.freedesktop.systemd1",
                                           "/org/freedesktop/systemd1",
                                           "org.freedesktop.systemd1.Manager", "SetUnitProperties");
        if (r >= 0)
                r = sd_bus_message_append(m, "sb", unit, 1);
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "(sv)");
        if (r >= 0)
                r = append_resources(m, res);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r < 0)
                return hutch_error_set(reterr, -r, "systemd cgroups: cannot build the request");
        r = sd_bus_call(bus, m, 0, &e, NULL);
        if (r < 0) {
                hutch_error_set(reterr, -r,
                                "systemd cgroups: cannot set the properties of '%s': %s", unit,
                                e.message ? e.message : strerror(-r));
                sd_bus_error_free(&e);
        }
        return r;
}

int oci_systemd_scope_stop(const char *unit) {
        _cleanup_(bus_unrefp) sd_bus *bus = NULL;
        _cleanup_(msg_unrefp) sd_bus_message *reply = NULL;
        sd_bus_error e = SD_BUS_ERROR_NULL;
        HutchError err = {};
        JobWait w = {};
        const char *jp;
        char *job = NULL;
        int r;

        r = bus_open(&bus, &w, &err);
        if (r < 0)
                return r;
        r = sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                               "org.freedesktop.systemd1.Manager", "StopUnit", &e, &reply, "ss",
                               unit, "replace");
        if (r < 0) {
                /* Gone already: a scope stops by itself once empty. */
                bool gone = sd_bus_error_has_name(&e, "org.freedesktop.systemd1.NoSuchUnit");
                sd_bus_error_free(&e);
                if (!gone)
                        return r;
        } else if (sd_bus_message_read(reply, "o", &jp) >= 0 && (job = strdup(jp))) {
                w.path = job;
                (void)job_wait(bus, &w, &err);
                free(w.result);
                free(job);
        }
        /* An OOM kill leaves the scope "failed", listed until reset. */
        (void)sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                 "org.freedesktop.systemd1.Manager", "ResetFailedUnit", NULL, NULL,
                                 "s", unit);
        return 0;
}

#else

int oci_systemd_scope_start(const char *slice, const char *unit, const char *id, pid_t pid,
                            json_t *res, char **ret_cgroup, HutchError *reterr) {
        (void)slice, (void)unit, (void)id, (void)pid, (void)res, (void)ret_cgroup;
        return oci_systemd_check_host(reterr);
}

int oci_systemd_scope_set(const char *unit, json_t *res, HutchError *reterr) {
        (void)unit, (void)res;
        return oci_systemd_check_host(reterr);
}

int oci_systemd_scope_stop(const char *unit) {
        (void)unit;
        return -EOPNOTSUPP;
}

#endif
