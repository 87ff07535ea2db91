/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch-oci: runc's command line over hutch's containment (oci.h,
 * docs/oci.md). */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup/cgroup.h"
#include "fd-util.h"
#include "hutch-error.h"
#include "macro.h"
#include "oci.h"
#include "parse-util.h"
#include "policy/policy.h"
#include "rm-rf.h"
#include "sandbox/proxy-spawn.h"
#include "sandbox/secrets.h"
#include "time-util.h"

#define OCI_VERSION "1.2.0"

/* Command-line options: set once by main() before anything forks. */
static const char *arg_root = NULL;
static FILE *arg_log = NULL;
static bool arg_log_json = false;
static bool arg_debug = false;
static bool arg_systemd_cgroup = false;

static void oci_log(const char *level, const char *fmt, ...) _printf_(2, 3);
static void oci_log(const char *level, const char *fmt, ...) {
        _cleanup_free_ char *msg = NULL;
        va_list ap;
        int n;

        if (strcmp(level, "debug") == 0 && !arg_debug)
                return;
        va_start(ap, fmt);
        n = vasprintf(&msg, fmt, ap);
        va_end(ap);
        if (n < 0)
                return;
        if (arg_log) {
                char ts[64];
                struct timespec now;
                struct tm tm;

                (void)clock_gettime(CLOCK_REALTIME, &now);
                (void)gmtime_r(&now.tv_sec, &tm);
                (void)strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
                if (arg_log_json) {
                        json_t *o = json_pack("{s:s, s:s, s:s}", "level", level, "msg", msg, "time",
                                              ts);
                        char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;

                        if (s)
                                fprintf(arg_log, "%s\n", s);
                        free(s);
                        json_decref(o);
                } else
                        fprintf(arg_log, "time=\"%s\" level=%s msg=\"%s\"\n", ts, level, msg);
                (void)fflush(arg_log);
        }
        if (strcmp(level, "error") == 0 || !arg_log)
                fprintf(stderr, "hutch-oci: %s\n", msg);
}

static int fail(int r, const char *fmt, ...) _printf_(2, 3);
static int fail(int r, const char *fmt, ...) {
        _cleanup_free_ char *msg = NULL;
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&msg, fmt, ap) < 0)
                msg = NULL;
        va_end(ap);
        if (r < 0)
                oci_log("error", "%s: %s", msg ? msg : "error", strerror(-r));
        else
                oci_log("error", "%s", msg ? msg : "error");
        return EXIT_FAILURE;
}

static bool id_valid(const char *id) {
        if (!id || !*id || strlen(id) > 1024 || strcmp(id, ".") == 0 || strcmp(id, "..") == 0)
                return false;
        for (const char *c = id; *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                      (*c >= '0' && *c <= '9') || strchr("_+-.", *c)))
                        return false;
        return true;
}

static char *state_path(const char *id, const char *file) {
        char *p = NULL;

        if (asprintf(&p, "%s/%s%s%s", arg_root, id, file ? "/" : "", file ? file : "") < 0)
                return NULL;
        return p;
}

/* Field 22 of /proc/PID/stat (start time), which tells a reused pid apart;
 * 0 when the process is gone or a zombie. */
static unsigned long long pid_start_time(pid_t pid) {
        _cleanup_free_ char *s = NULL;
        char path[64], *p, state;
        unsigned long long st = 0;

        (void)snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        if (read_full_file(path, 4096, &s) < 0)
                return 0;
        p = strrchr(s, ')');
        if (!p || sscanf(p + 1,
                         " %c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
                         "%*s %*s %*s %llu",
                         &state, &st) != 2)
                return 0;
        return state == 'Z' || state == 'X' ? 0 : st;
}

typedef struct State {
        json_t *json; /* the state file */
        pid_t pid;
        const char *status;
} State;

static void state_done(State *s) {
        json_decref(s->json);
}

static int state_load(const char *id, State *ret) {
        _cleanup_free_ char *path = NULL, *fifo = NULL, *freezer = NULL;
        json_error_t jerr;
        json_t *j;
        unsigned long long st;

        if (!id_valid(id))
                return -EINVAL;
        path = state_path(id, "state.json");
        fifo = state_path(id, "exec.fifo");
        if (!path || !fifo)
                return -ENOMEM;
        j = json_load_file(path, 0, &jerr);
        if (!j)
                return access(path, F_OK) < 0 ? -ENOENT : -EBADMSG;
        ret->json = j;
        ret->pid = (pid_t)json_integer_value(json_object_get(j, "pid"));
        st = (unsigned long long)json_integer_value(json_object_get(j, "starttime"));
        if (ret->pid <= 0 || pid_start_time(ret->pid) != st)
                ret->status = "stopped";
        else if (access(fifo, F_OK) == 0)
                ret->status = "created";
        else {
                const char *fz = json_string_value(json_object_get(j, "freezer"));
                const char *v2 = json_string_value(json_object_get(j, "freezer_v2"));
                _cleanup_free_ char *fs = NULL;

                ret->status = "running";
                if (fz && asprintf(&freezer, "%s/freezer.state", fz) >= 0 &&
                    read_full_file(freezer, 64, &fs) >= 0 && strncmp(fs, "FROZEN", 6) == 0)
                        ret->status = "paused";
                /* cgroup v2: cgroup.freeze says what was asked ("1"). */
                if (!fz && v2 && asprintf(&freezer, "%s/cgroup.freeze", v2) >= 0 &&
                    read_full_file(freezer, 64, &fs) >= 0 && fs[0] == '1')
                        ret->status = "paused";
        }
        return 0;
}

static int load_or_fail(const char *id, State *s) {
        int r = state_load(id, s);

        if (r == -ENOENT)
                return fail(0, "container \"%s\" does not exist", id);
        if (r < 0)
                return fail(r, "cannot load the state of container \"%s\"", id);
        return 0;
}

/* ---- hooks ---- */

static json_t *state_public(State *s);

/* Runs the hooks of @stage with the state JSON @state on their stdin, one
 * after the other (oci_hooks_run()); a failure is logged with the hook's
 * path. Returns 0 or -errno / -ECHILD. */
static int hooks_run(json_t *hooks, const char *stage, json_t *state) {
        _cleanup_free_ char *text = json_dumps(state, JSON_COMPACT);
        char what[PATH_MAX + 64];
        int r;

        if (!text)
                return -ENOMEM;
        r = oci_hooks_run(hooks, stage, text, what, sizeof(what));
        if (r < 0)
                oci_log("error", "%s", what);
        return r;
}

/* `create`'s part while the container's init waits before pivot_root
 * ("H"): hutch-proxy started for @net (serving the listening sockets
 * @proxy_fds; with secrets its configuration from @secrets, which is freed
 * as soon as the proxy's memfd holds it, and its CA read back), the
 * prestart and createRuntime hooks run, then "h" + the CA's subject hash +
 * the state JSON (status "creating") sent to the init on @sync_fd with
 * the CA memfd. The init runs the createContainer hooks with it, and
 * later the startContainer ones. 0, or -errno with @reterr filled. */
static int pre_pivot_create(int sync_fd, json_t *cfg, const char *id, pid_t pid, const char *bundle,
                            const Policy *net, SecretSet **secrets, const int proxy_fds[2],
                            HutchError *reterr) {
        json_t *hooks = json_object_get(cfg, "hooks"), *ann = json_object_get(cfg, "annotations");
        _cleanup_close_ int config = -EBADF, ca_r = -EBADF, ca_w = -EBADF, ca = -EBADF;
        _cleanup_free_ char *text = NULL, *msg = NULL;
        uint64_t hash = 0;
        int pipes[2], r;
        json_t *hs;

        if (net && *secrets) {
                config = secret_set_config_memfd(*secrets);
                /* SECURITY: from here on only the memfd (and then the
                 * proxy) holds the real values. */
                *secrets = secret_set_free(*secrets);
                if (config < 0)
                        return hutch_error_set(reterr, -config,
                                               "cannot write hutch-proxy's configuration");
                if (pipe2(pipes, O_CLOEXEC) < 0)
                        return hutch_error_set(reterr, errno, "pipe: %m");
                ca_r = pipes[0];
                ca_w = pipes[1];
        }
        if (net) {
                /* The proxy's own lines are text: they go to a text log,
                 * never into the JSON lines an engine parses. */
                HutchError e = {};

                r = oci_net_proxy_start(net, id, pid, proxy_fds,
                                        arg_log && !arg_log_json ? fileno(arg_log) : -EBADF, config,
                                        ca_w, &e);
                if (r < 0)
                        return hutch_error_set(reterr, -r, "io.hutch.* annotations: %s", e.msg);
        }
        if (ca_r >= 0) {
                ca_w = safe_close(ca_w);
                r = sandbox_ca_receive(ca_r, &ca, &hash, reterr);
                if (r < 0)
                        return r;
        }
        hs = json_pack("{s:s, s:s, s:s, s:i, s:s, s:o}", "ociVersion", OCI_VERSION, "id", id,
                       "status", "creating", "pid", (int)pid, "bundle", bundle, "annotations",
                       ann ? json_incref(ann) : json_object());
        if (!hs)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        r = hooks_run(hooks, "prestart", hs);
        if (r >= 0)
                r = hooks_run(hooks, "createRuntime", hs);
        text = r >= 0 ? json_dumps(hs, JSON_COMPACT) : NULL;
        json_decref(hs);
        if (r < 0)
                return hutch_error_set(reterr, -r, "the createRuntime hooks failed");
        if (!text || asprintf(&msg, "h%016llx%s", (unsigned long long)hash, text) < 0)
                return hutch_error_set(reterr, ENOMEM, "out of memory");
        r = send_with_fds(sync_fd, msg, strlen(msg), &ca, ca >= 0 ? 1 : 0);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot send the state to the container's init");
        return 0;
}

/* ---- commands ---- */

typedef struct Opt {
        const char *name; /* "--bundle" */
        char short_name;  /* 'b' or 0 */
        bool has_arg;
        const char **value; /* where the argument goes (or "1" for a flag) */
} Opt;

/* Parses options of a subcommand ("--x v", "--x=v", "-x v"), up to "--" or
 * the first positional argument (runc's rule); leaves the
 * positional arguments in @ret_pos. Returns 0 or -EINVAL (logged). */
static int parse_opts(int argc, char **argv, const Opt *opts, size_t n_opts, char ***ret_pos,
                      int *ret_n) {
        char **pos = calloc((size_t)argc + 1, sizeof(char *));
        int np = 0;

        if (!pos)
                return -ENOMEM;
        for (int i = 0; i < argc; i++) {
                const char *a = argv[i], *eq;
                const Opt *o = NULL;
                size_t len;

                /* As runc: options end at "--" or at the first positional
                 * argument (the container id), so `exec ID sh -c CMD`
                 * passes -c to the command. */
                if (strcmp(a, "--") == 0 || a[0] != '-' || strcmp(a, "-") == 0) {
                        for (int k = strcmp(a, "--") == 0 ? i + 1 : i; k < argc; k++)
                                pos[np++] = argv[k];
                        break;
                }
                eq = strchr(a, '=');
                len = eq ? (size_t)(eq - a) : strlen(a);
                for (size_t k = 0; k < n_opts && !o; k++) {
                        const char *nm = opts[k].name;
                        if ((a[1] == '-' && strlen(nm) == len && strncmp(a, nm, len) == 0) ||
                            (a[1] != '-' && len == 2 && a[1] == opts[k].short_name))
                                o = &opts[k];
                        /* runc also accepts "-bundle" spelled with one dash */
                        if (!o && a[1] != '-' && strlen(nm) == len + 1 &&
                            strncmp(a + 1, nm + 2, len - 1) == 0)
                                o = &opts[k];
                }
                if (!o) {
                        free(pos);
                        oci_log("error", "unknown option '%s'", a);
                        return -EINVAL;
                }
                if (!o->has_arg)
                        *o->value = "1";
                else if (eq)
                        *o->value = eq + 1;
                else if (i + 1 < argc)
                        *o->value = argv[++i];
                else {
                        free(pos);
                        oci_log("error", "option '%s' needs a value", a);
                        return -EINVAL;
                }
        }
        *ret_pos = pos;
        *ret_n = np;
        return 0;
}

static void now_rfc3339(char *buf, size_t size) {
        struct timespec now;
        struct tm tm;
        char base[32];

        (void)clock_gettime(CLOCK_REALTIME, &now);
        (void)gmtime_r(&now.tv_sec, &tm);
        (void)strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
        (void)snprintf(buf, size, "%s.%09ldZ", base, now.tv_nsec);
}

static int write_pid_file(const char *path, pid_t pid) {
        _cleanup_free_ char *dir = strdup(path), *tmp = NULL;
        char s[32];
        int r;

        if (!dir)
                return -ENOMEM;
        (void)snprintf(s, sizeof(s), "%d", (int)pid);
        if (asprintf(&tmp, "%s.tmp%d", path, (int)getpid()) < 0)
                return -ENOMEM;
        {
                _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);

                if (fd < 0)
                        return -errno;
                r = loop_write(fd, s, strlen(s));
                if (r < 0) {
                        (void)unlink(tmp);
                        return r;
                }
        }
        if (rename(tmp, path) < 0) {
                r = -errno;
                (void)unlink(tmp);
                return r;
        }
        return 0;
}

static int write_maps(pid_t pid, json_t *linux_obj) {
        static const char *const keys[2] = {"uidMappings", "gidMappings"};
        static const char *const files[2] = {"uid_map", "gid_map"};

        for (int k = 0; k < 2; k++) {
                _cleanup_free_ char *text = NULL;
                size_t len = 0, i;
                json_t *m;
                char path[64];
                FILE *f;
                int r;

                f = open_memstream(&text, &len);
                if (!f)
                        return -ENOMEM;
                json_array_foreach(json_object_get(linux_obj, keys[k]), i, m)
                        fprintf(f, "%lld %lld %lld\n",
                                json_integer_value(json_object_get(m, "containerID")),
                                json_integer_value(json_object_get(m, "hostID")),
                                json_integer_value(json_object_get(m, "size")));
                (void)fclose(f);
                if (len == 0)
                        return -EINVAL;
                (void)snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, files[k]);
                r = write_string_file(path, text);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Connects to the engine's console socket (a unix stream socket). */
static int console_connect(const char *path) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int fd;

        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, path, strlen(path));
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int r = -errno;
                (void)close(fd);
                return r;
        }
        return fd;
}

static int cmd_create(int argc, char **argv) {
        const char *bundle = ".", *pid_file = NULL, *console = NULL, *no_pivot = NULL,
                   *no_keyring = NULL, *preserve = NULL;
        const Opt opts[] = {
                {"--bundle", 'b', true, &bundle},
                {"--pid-file", 0, true, &pid_file},
                {"--console-socket", 0, true, &console},
                {"--no-pivot", 0, false, &no_pivot},
                {"--no-new-keyring", 0, false, &no_keyring},
                {"--preserve-fds", 0, true, &preserve},
        };
        _cleanup_free_ char **pos = NULL, *abs_bundle = NULL, *cfg_path = NULL, *dir = NULL,
                            *fifo = NULL, *rootfs = NULL;
        json_t *cfg, *linux_obj, *ns, *state;
        json_error_t jerr;
        HutchError err = {};
        Cgroups cg = {};
        _cleanup_(policy_freep) Policy *net = NULL;
        _cleanup_(secret_set_freep) SecretSet *secrets = NULL;
        _cleanup_(json_decrefp) json_t *env_plan = NULL;
        OciInit init = {.sync_fd = -EBADF};
        int flags = 0, sv[2], np, r, proxy_fds[2] = {-EBADF, -EBADF};
        size_t n_proxy_fds = 0;
        bool scope_started = false;
        _cleanup_free_ char *scope_cgroup = NULL;
        uint32_t npreserve = 0;
        uint64_t timeout_ms = 0;
        const char *id;
        char created[64], msg[1100];
        ssize_t n;
        size_t i;
        pid_t pid;

        r = parse_opts(argc, argv, opts, ELEMENTSOF(opts), &pos, &np);
        if (r < 0)
                return EXIT_FAILURE;
        if (np != 1)
                return fail(0, "create needs exactly one container id");
        id = pos[0];
        if (!id_valid(id))
                return fail(0, "invalid container id \"%s\"", id);
        if (preserve && safe_atou32(preserve, &npreserve) < 0)
                return fail(0, "bad --preserve-fds '%s'", preserve);
        abs_bundle = realpath(bundle, NULL);
        if (!abs_bundle)
                return fail(-errno, "bundle '%s'", bundle);
        if (asprintf(&cfg_path, "%s/config.json", abs_bundle) < 0)
                return fail(-ENOMEM, "create");
        cfg = json_load_file(cfg_path, JSON_REJECT_DUPLICATES, &jerr);
        if (!cfg)
                return fail(0, "cannot parse '%s': %s (line %d)", cfg_path, jerr.text, jerr.line);
        r = oci_config_validate(cfg, &err);
        if (r >= 0)
                r = oci_net_from_annotations(json_object_get(cfg, "annotations"), &net, &err);
        if (r >= 0)
                r = oci_timeout_from_annotations(json_object_get(cfg, "annotations"), &timeout_ms,
                                                 &err);
        if (r < 0)
                return fail(0, "config.json: %s", err.msg);
        /* The real values are read now, before anything is created: a
         * missing or bad file is the engine's error at once. */
        if (net && secret_set_load(net, NULL, &secrets, &err) < 0)
                return fail(0, "config.json: %s", err.msg);
        if (net && (oci_net_env_plan(secrets, &env_plan) < 0 ||
                    oci_net_env_apply(json_object_get(cfg, "process"), env_plan) < 0))
                return fail(-ENOMEM, "create");
        linux_obj = json_object_get(cfg, "linux");

        r = oci_mkdir_p(arg_root);
        if (r < 0)
                return fail(r, "cannot create the state root '%s'", arg_root);
        dir = state_path(id, NULL);
        fifo = state_path(id, "exec.fifo");
        if (!dir || !fifo)
                return fail(-ENOMEM, "create");
        if (mkdir(dir, 0711) < 0)
                return errno == EEXIST ? fail(0, "container \"%s\" already exists", id)
                                       : fail(-errno, "cannot create '%s'", dir);
        if (mkfifo(fifo, 0600) < 0) {
                r = fail(-errno, "mkfifo '%s'", fifo);
                goto undo_dir;
        }

        json_array_foreach(json_object_get(linux_obj, "namespaces"), i, ns) {
                const char *type = json_string_value(json_object_get(ns, "type"));
                const char *path = json_string_value(json_object_get(ns, "path"));
                int f = oci_namespace_flag(type);

                if (!path || !*path) {
                        flags |= f;
                        continue;
                }
                if (init.n_ns >= ELEMENTSOF(init.ns_fds)) {
                        r = fail(0, "too many namespaces");
                        goto undo_dir;
                }
                init.ns_fds[init.n_ns] = open(path, O_RDONLY | O_CLOEXEC);
                if (init.ns_fds[init.n_ns] < 0) {
                        r = fail(-errno, "namespace path '%s'", path);
                        goto undo_dir;
                }
                init.ns_types[init.n_ns] = f;
                /* A pid namespace applies to children: join it here. */
                if (f == CLONE_NEWPID && setns(init.ns_fds[init.n_ns], CLONE_NEWPID) < 0) {
                        r = fail(-errno, "join pid namespace '%s'", path);
                        goto undo_dir;
                }
                init.n_ns++;
        }
        if (!(flags & CLONE_NEWNS)) {
                r = fail(0, "config.json: a new mount namespace is required");
                goto undo_dir;
        }
        r = cgroups_plan(id, linux_obj, arg_systemd_cgroup, &cg, &err);
        if (r < 0) {
                r = fail(0, "cgroups: %s", err.msg);
                goto undo_dir;
        }
        /* The systemd form: systemd makes the scope with the init in it,
         * after the clone below. */
        r = cg.systemd_unit
                    ? 0
                    : cgroups_apply(&cg, json_object_get(linux_obj, "resources"), false, &err);
        if (r < 0) {
                r = fail(0, "cgroups: %s", err.msg);
                goto undo_cgroups;
        }
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
                r = fail(-errno, "socketpair");
                goto undo_cgroups;
        }
        init.console_fd = -EBADF;
        if (json_is_true(json_object_get(json_object_get(cfg, "process"), "terminal"))) {
                if (!console) {
                        r = fail(0, "process.terminal needs --console-socket");
                        goto undo_cgroups;
                }
                init.console_fd = console_connect(console);
                if (init.console_fd < 0) {
                        r = fail(init.console_fd, "cannot connect to the console socket '%s'",
                                 console);
                        goto undo_cgroups;
                }
        }
        init.config = cfg;
        init.bundle = abs_bundle;
        init.fifo = fifo;
        init.preserve_fds = (int)npreserve;
        init.new_netns = flags & CLONE_NEWNET;
        init.proxy = net != NULL;
        {
                json_t *hooks = json_object_get(cfg, "hooks");
                init.pre_pivot = net || oci_hooks_any(hooks, "prestart") ||
                                 oci_hooks_any(hooks, "createRuntime") ||
                                 oci_hooks_any(hooks, "createContainer") ||
                                 oci_hooks_any(hooks, "startContainer");
        }
        (void)fflush(NULL);
        pid = (pid_t)syscall(SYS_clone, (unsigned long)(flags & ~CLONE_NEWCGROUP) | SIGCHLD, NULL,
                             NULL, NULL, NULL);
        if (pid < 0) {
                r = fail(-errno, "clone");
                goto undo_cgroups;
        }
        if (pid == 0) {
                (void)close(sv[0]);
                init.sync_fd = sv[1];
                oci_init_run(&init);
        }
        (void)close(sv[1]);
        if ((flags & CLONE_NEWUSER) && (r = write_maps(pid, linux_obj)) < 0) {
                r = fail(r, "cannot write the uid/gid mappings");
                goto undo_child;
        }
        if (cg.systemd_unit) {
                json_t *res = json_object_get(linux_obj, "resources");

                r = oci_systemd_scope_start(cg.systemd_slice, cg.systemd_unit, id, pid, res,
                                            &scope_cgroup, &err);
                scope_started = r >= 0;
                if (r >= 0)
                        r = cgroups_plan_at(&cg, scope_cgroup, &err);
                if (r >= 0)
                        r = cgroups_apply(&cg, res, false, &err);
                if (r >= 0 && !cg.v2)
                        r = hutch_error_set(&err, EOPNOTSUPP, "systemd cgroups: no cgroup v2");
                if (r < 0) {
                        r = fail(0, "cgroups: %s", err.msg);
                        goto undo_child;
                }
        }
        r = cgroups_attach(&cg, pid);
        if (r < 0) {
                r = fail(r, "cannot move the container into its cgroups");
                goto undo_child;
        }
        if (write(sv[0], "G", 1) != 1) {
                r = fail(-errno, "cannot start the container's init");
                goto undo_child;
        }
        n = oci_recv_fds(sv[0], msg, sizeof(msg) - 1, proxy_fds, 2, &n_proxy_fds);
        if (n > 0 && msg[0] == 'P' && net && n_proxy_fds > 0) {
                /* An interface besides lo (a pod's network): the wall in
                 * front of it before anything of the container's runs. */
                msg[n] = '\0';
                if (n > 1 &&
                    oci_net_wall(pid, msg + 1, json_object_get(cfg, "process"), &err) < 0) {
                        r = fail(0, "io.hutch.allow-host: %s", err.msg);
                        goto undo_child;
                }
                n = read(sv[0], msg, sizeof(msg) - 1);
        }
        if (n > 0 && msg[0] == 'H' && init.pre_pivot) {
                r = pre_pivot_create(sv[0], cfg, id, pid, abs_bundle, net, &secrets, proxy_fds,
                                     &err);
                if (r < 0) {
                        r = fail(0, "%s", err.msg);
                        goto undo_child;
                }
                n = read(sv[0], msg, sizeof(msg) - 1);
        }
        if (n <= 0 || msg[0] != 'R') {
                msg[n > 0 ? n : 0] = '\0';
                r = fail(0, "container init failed: %s",
                         n > 1 ? msg + 1 : "it exited before reporting");
                goto undo_child;
        }
        (void)close(sv[0]);
        for (i = 0; i < n_proxy_fds; i++)
                proxy_fds[i] = safe_close(proxy_fds[i]);

        rootfs = strdup(json_string_value(json_object_get(json_object_get(cfg, "root"), "path")));
        now_rfc3339(created, sizeof(created));
        state = json_pack("{s:s, s:s, s:i, s:I, s:s, s:s, s:s, s:s, s:O, s:[]}", "ociVersion",
                          OCI_VERSION, "id", id, "pid", (int)pid, "starttime",
                          (json_int_t)pid_start_time(pid), "bundle", abs_bundle, "rootfs",
                          rootfs ? rootfs : "", "created", created, "owner", "", "annotations",
                          json_object_get(cfg, "annotations") ? json_object_get(cfg, "annotations")
                                                              : json_object(),
                          "cgroups");
        for (i = 0; state && i < cg.n; i++)
                (void)json_array_append_new(json_object_get(state, "cgroups"),
                                            json_string(cg.paths[i]));
        if (state && json_object_get(cfg, "hooks"))
                (void)json_object_set(state, "hooks", json_object_get(cfg, "hooks"));
        if (state && cg.freezer)
                (void)json_object_set_new(state, "freezer", json_string(cg.freezer));
        else if (state && cg.v2)
                (void)json_object_set_new(state, "freezer_v2", json_string(cg.v2));
        if (state && cg.systemd_unit)
                (void)json_object_set_new(state, "systemd_unit", json_string(cg.systemd_unit));
        if (state && scope_cgroup)
                (void)json_object_set_new(state, "systemd_cgroup", json_string(scope_cgroup));
        if (state && env_plan)
                (void)json_object_set(state, "hutch_env", env_plan);
        if (state && timeout_ms > 0)
                (void)json_object_set_new(state, "timeout_ms",
                                          json_integer((json_int_t)timeout_ms));
        {
                _cleanup_free_ char *s = state ? json_dumps(state, JSON_COMPACT) : NULL;
                json_decref(state);
                r = s ? write_file_atomic(dir, "state.json", s, strlen(s)) : -ENOMEM;
        }
        if (r < 0) {
                r = fail(r, "cannot write the state");
                goto undo_child;
        }
        if (pid_file && (r = write_pid_file(pid_file, pid)) < 0) {
                r = fail(r, "cannot write the pid file '%s'", pid_file);
                goto undo_child;
        }
        cgroups_done(&cg);
        json_decref(cfg);
        return EXIT_SUCCESS;

undo_child:
        for (i = 0; i < n_proxy_fds; i++)
                proxy_fds[i] = safe_close(proxy_fds[i]);
        (void)kill(pid, SIGKILL);
        (void)waitpid(pid, NULL, 0);
undo_cgroups:
        if (scope_started)
                (void)oci_systemd_scope_stop(cg.systemd_unit);
        for (i = 0; i < cg.n; i++)
                (void)cgroup_remove_tree(cg.paths[i]);
        cgroups_done(&cg);
undo_dir:
        (void)rm_rf_at(AT_FDCWD, dir);
        json_decref(cfg);
        return r;
}

/* 1 when @fd is readable within @ms milliseconds, 0 when the time ran out,
 * -errno if polling failed. */
static int wait_fd_readable(int fd, uint64_t ms) {
        uint64_t end = time_monotonic_ms() + ms, now;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int r;

        while ((now = time_monotonic_ms()) < end) {
                uint64_t left = end - now;

                r = poll(&pfd, 1, left > INT_MAX ? INT_MAX : (int)left);
                if (r > 0)
                        return 1;
                if (r < 0 && errno != EINTR)
                        return -errno;
        }
        return 0;
}

/* io.hutch.timeout: a daemon of its own session (the engine's shim, not
 * hutch-oci, waits for the container) that holds the init's pidfd and,
 * if the init still runs after @ms, kills every process of the
 * container's cgroups with SIGKILL (the engine sees 137) and logs why. It
 * ends as soon as the init does, and holds none of the engine's pipes.
 * A watcher that cannot be started is logged and the container killed:
 * a limit asked for is never silently dropped. */
static void timeout_watch(State *s, uint64_t ms) {
        unsigned long long st =
                (unsigned long long)json_integer_value(json_object_get(s->json, "starttime"));
        _cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, s->pid, 0);
        int status, nul, r, log_fd = arg_log ? fileno(arg_log) : -EBADF;
        pid_t pid;

        if (pid_start_time(s->pid) != st)
                return; /* the init is gone already: nothing to time */
        if (pidfd < 0) {
                oci_log("error", "cannot watch io.hutch.timeout (%s): the container is killed",
                        strerror(errno));
                (void)cgroup_signal_all(s->json, SIGKILL);
                return;
        }
        (void)fflush(NULL);
        pid = fork();
        if (pid == 0) {
                if (setsid() < 0 || (pid = fork()) < 0)
                        _exit(1);
                if (pid > 0)
                        _exit(0);
                /* The pidfd goes to 3 and the log to 4, everything else
                 * (the engine's pipes) is closed. */
                nul = open("/dev/null", O_RDWR | O_CLOEXEC);
                pidfd = fcntl(pidfd, F_DUPFD, 10);
                log_fd = log_fd >= 0 ? fcntl(log_fd, F_DUPFD, 10) : -EBADF;
                if (nul < 0 || pidfd < 0 || (arg_log && log_fd < 0) ||
                    dup2(nul, STDIN_FILENO) < 0 || dup2(nul, STDOUT_FILENO) < 0 ||
                    dup2(nul, STDERR_FILENO) < 0 || dup2(pidfd, 3) < 0)
                        _exit(1);
                if (log_fd >= 0 && (dup2(log_fd, 4) < 0 || !(arg_log = fdopen(4, "a"))))
                        _exit(1);
                (void)close_range(log_fd >= 0 ? 5 : 4, ~0U, 0);
                r = wait_fd_readable(3, ms);
                if (r == 1)
                        _exit(0);
                if (r == 0)
                        oci_log("error", "container %s ran past io.hutch.timeout (%llu ms): killed",
                                json_string_value(json_object_get(s->json, "id")),
                                (unsigned long long)ms);
                else
                        oci_log("error", "cannot watch io.hutch.timeout: the container is killed");
                (void)cgroup_signal_all(s->json, SIGKILL);
                (void)syscall(SYS_pidfd_send_signal, 3, SIGKILL, NULL, 0);
                _exit(0);
        }
        if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0) {
                oci_log("error", "cannot watch io.hutch.timeout: the container is killed");
                (void)cgroup_signal_all(s->json, SIGKILL);
        }
}

static int cmd_start(int argc, char **argv) {
        _cleanup_(state_done) State s = {};
        _cleanup_free_ char *fifo = NULL;
        _cleanup_close_ int fd = -EBADF;

        if (argc != 1)
                return fail(0, "start needs exactly one container id");
        if (load_or_fail(argv[0], &s) != 0)
                return EXIT_FAILURE;
        if (strcmp(s.status, "created") != 0)
                return fail(0, "cannot start a container that is %s", s.status);
        fifo = state_path(argv[0], "exec.fifo");
        if (!fifo)
                return fail(-ENOMEM, "start");
        fd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
                return fail(-errno, "cannot open the exec fifo");
        if (write(fd, "S", 1) != 1)
                return fail(-errno, "cannot release the container");
        (void)unlink(fifo);
        if (json_integer_value(json_object_get(s.json, "timeout_ms")) > 0)
                timeout_watch(&s,
                              (uint64_t)json_integer_value(json_object_get(s.json, "timeout_ms")));
        if (json_object_get(s.json, "hooks")) {
                json_t *pub;

                s.status = "running";
                pub = state_public(&s);
                if (!pub || hooks_run(json_object_get(s.json, "hooks"), "poststart", pub) < 0)
                        oci_log("warning", "a poststart hook failed");
                json_decref(pub);
        }
        return EXIT_SUCCESS;
}

static json_t *state_public(State *s) {
        json_t *o = json_pack(
                "{s:O, s:O, s:s, s:i, s:O, s:O, s:O, s:O, s:O}", "ociVersion",
                json_object_get(s->json, "ociVersion"), "id", json_object_get(s->json, "id"),
                "status", s->status, "pid", strcmp(s->status, "stopped") == 0 ? 0 : (int)s->pid,
                "bundle", json_object_get(s->json, "bundle"), "rootfs",
                json_object_get(s->json, "rootfs"), "created", json_object_get(s->json, "created"),
                "owner", json_object_get(s->json, "owner"), "annotations",
                json_object_get(s->json, "annotations"));
        return o;
}

static int cmd_state(int argc, char **argv) {
        _cleanup_(state_done) State s = {};
        _cleanup_free_ char *out = NULL;
        json_t *o;

        if (argc != 1)
                return fail(0, "state needs exactly one container id");
        if (load_or_fail(argv[0], &s) != 0)
                return EXIT_FAILURE;
        o = state_public(&s);
        out = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
        json_decref(o);
        if (!out)
                return fail(-ENOMEM, "state");
        printf("%s\n", out);
        return EXIT_SUCCESS;
}

static int parse_signal(const char *s) {
        static const struct {
                const char *name;
                int sig;
        } t[] = {
                {"HUP", SIGHUP},       {"INT", SIGINT},   {"QUIT", SIGQUIT},   {"ILL", SIGILL},
                {"TRAP", SIGTRAP},     {"ABRT", SIGABRT}, {"BUS", SIGBUS},     {"FPE", SIGFPE},
                {"KILL", SIGKILL},     {"USR1", SIGUSR1}, {"SEGV", SIGSEGV},   {"USR2", SIGUSR2},
                {"PIPE", SIGPIPE},     {"ALRM", SIGALRM}, {"TERM", SIGTERM},   {"CHLD", SIGCHLD},
                {"CONT", SIGCONT},     {"STOP", SIGSTOP}, {"TSTP", SIGTSTP},   {"TTIN", SIGTTIN},
                {"TTOU", SIGTTOU},     {"URG", SIGURG},   {"XCPU", SIGXCPU},   {"XFSZ", SIGXFSZ},
                {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH}, {"IO", SIGIO},
                {"PWR", SIGPWR},       {"SYS", SIGSYS},
        };
        int n;

        if (safe_atoi(s, &n) >= 0)
                return n > 0 && n < 65 ? n : -EINVAL;
        if (strncasecmp(s, "SIG", 3) == 0)
                s += 3;
        for (size_t i = 0; i < ELEMENTSOF(t); i++)
                if (strcasecmp(s, t[i].name) == 0)
                        return t[i].sig;
        return -EINVAL;
}

static int cmd_kill(int argc, char **argv) {
        const char *all = NULL;
        const Opt opts[] = {{"--all", 'a', false, &all}};
        _cleanup_(state_done) State s = {};
        _cleanup_free_ char **pos = NULL;
        int np, sig = SIGTERM;

        if (parse_opts(argc, argv, opts, ELEMENTSOF(opts), &pos, &np) < 0)
                return EXIT_FAILURE;
        if (np < 1 || np > 2)
                return fail(0, "kill needs a container id and an optional signal");
        if (np == 2 && (sig = parse_signal(pos[1])) < 0)
                return fail(0, "unknown signal \"%s\"", pos[1]);
        if (load_or_fail(pos[0], &s) != 0)
                return EXIT_FAILURE;
        if (all) {
                (void)cgroup_signal_all(s.json, sig);
                return EXIT_SUCCESS;
        }
        if (strcmp(s.status, "stopped") == 0)
                return fail(0, "container not running");
        if (kill(s.pid, sig) < 0)
                return fail(-errno, "kill");
        return EXIT_SUCCESS;
}

static int cmd_delete(int argc, char **argv) {
        const char *force = NULL;
        const Opt opts[] = {{"--force", 'f', false, &force}};
        _cleanup_(state_done) State s = {};
        _cleanup_free_ char **pos = NULL, *dir = NULL;
        const char *unit;
        int np, r;

        if (parse_opts(argc, argv, opts, ELEMENTSOF(opts), &pos, &np) < 0)
                return EXIT_FAILURE;
        if (np != 1)
                return fail(0, "delete needs exactly one container id");
        r = state_load(pos[0], &s);
        if (r == -ENOENT && force)
                return EXIT_SUCCESS;
        if (r < 0 && load_or_fail(pos[0], &s) != 0)
                return EXIT_FAILURE;
        if (strcmp(s.status, "stopped") != 0 && strcmp(s.status, "created") != 0 && !force)
                return fail(0, "cannot delete container \"%s\" that is %s", pos[0], s.status);
        /* Everything left in the cgroups dies; poll until they are empty. */
        for (int tries = 0; tries < 200; tries++) {
                if (strcmp(s.status, "stopped") != 0)
                        (void)kill(s.pid, SIGKILL);
                (void)cgroup_signal_all(s.json, SIGKILL);
                if (cgroups_empty(s.json))
                        break;
                (void)usleep(10000);
        }
        unit = json_string_value(json_object_get(s.json, "systemd_unit"));
        if (unit && oci_systemd_scope_stop(unit) < 0)
                oci_log("warning", "cannot stop the systemd unit '%s' of \"%s\"", unit, pos[0]);
        r = cgroups_remove(s.json);
        if (r < 0 && !(unit && r == -ENOENT))
                oci_log("warning", "cannot remove the cgroups of \"%s\": %s", pos[0], strerror(-r));
        if (json_object_get(s.json, "hooks")) {
                json_t *pub;

                s.status = "stopped";
                pub = state_public(&s);
                if (!pub || hooks_run(json_object_get(s.json, "hooks"), "poststop", pub) < 0)
                        oci_log("warning", "a poststop hook failed");
                json_decref(pub);
        }
        dir = state_path(pos[0], NULL);
        if (!dir)
                return fail(-ENOMEM, "delete");
        r = rm_rf_at(AT_FDCWD, dir);
        if (r < 0)
                return fail(r, "cannot remove '%s'", dir);
        return EXIT_SUCCESS;
}

/* Opens the namespaces of @pid that differ from ours, user first. */
static int open_container_namespaces(pid_t pid, OciInit *init) {
        static const struct {
                const char *name;
                int type;
        } t[] = {
                {"user", CLONE_NEWUSER}, {"ipc", CLONE_NEWIPC},       {"uts", CLONE_NEWUTS},
                {"net", CLONE_NEWNET},   {"cgroup", CLONE_NEWCGROUP}, {"pid", CLONE_NEWPID},
                {"mnt", CLONE_NEWNS},
        };

        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                char theirs[64], ours[64];
                struct stat a, b;
                int fd;

                (void)snprintf(theirs, sizeof(theirs), "/proc/%d/ns/%s", (int)pid, t[i].name);
                (void)snprintf(ours, sizeof(ours), "/proc/self/ns/%s", t[i].name);
                if (stat(theirs, &a) < 0)
                        return -errno;
                if (stat(ours, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev)
                        continue;
                fd = open(theirs, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        return -errno;
                init->ns_fds[init->n_ns] = fd;
                init->ns_types[init->n_ns++] = t[i].type;
        }
        return 0;
}

static int cmd_exec(int argc, char **argv) {
        const char *process_file = NULL, *detach = NULL, *pid_file = NULL, *tty = NULL,
                   *console = NULL, *cwd = NULL, *preserve = NULL;
        const Opt opts[] = {
                {"--process", 'p', true, &process_file}, {"--detach", 'd', false, &detach},
                {"--pid-file", 0, true, &pid_file},      {"--tty", 't', false, &tty},
                {"--console-socket", 0, true, &console}, {"--cwd", 0, true, &cwd},
                {"--preserve-fds", 0, true, &preserve},
        };
        _cleanup_(state_done) State s = {};
        _cleanup_free_ char **pos = NULL, *cfg_path = NULL;
        json_t *cfg = NULL, *process = NULL, *v;
        json_error_t jerr;
        HutchError err = {};
        OciInit init = {.sync_fd = -EBADF};
        uint32_t npreserve = 0;
        int np, sv[2], status, r;
        char msg[1100];
        ssize_t n;
        size_t i;
        pid_t pid;

        if (parse_opts(argc, argv, opts, ELEMENTSOF(opts), &pos, &np) < 0)
                return EXIT_FAILURE;
        if (np < 1)
                return fail(0, "exec needs a container id");
        if (preserve && safe_atou32(preserve, &npreserve) < 0)
                return fail(0, "bad --preserve-fds '%s'", preserve);
        if (load_or_fail(pos[0], &s) != 0)
                return EXIT_FAILURE;
        if (strcmp(s.status, "running") != 0)
                return fail(0, "cannot exec in a container that is %s", s.status);
        if (asprintf(&cfg_path, "%s/config.json",
                     json_string_value(json_object_get(s.json, "bundle"))) < 0)
                return fail(-ENOMEM, "exec");
        cfg = json_load_file(cfg_path, 0, &jerr);
        if (!cfg)
                return fail(0, "cannot parse '%s': %s", cfg_path, jerr.text);
        if (process_file) {
                process = json_load_file(process_file, JSON_REJECT_DUPLICATES, &jerr);
                if (!process) {
                        r = fail(0, "cannot parse '%s': %s", process_file, jerr.text);
                        goto out;
                }
        } else {
                /* runc exec ID CMD...: the config's process with new args. */
                process = json_deep_copy(json_object_get(cfg, "process"));
                if (!process || np < 2) {
                        r = fail(0, "exec needs --process FILE or a command");
                        goto out;
                }
                v = json_array();
                for (int k = 1; k < np; k++)
                        (void)json_array_append_new(v, json_string(pos[k]));
                (void)json_object_set_new(process, "args", v);
        }
        if (cwd)
                (void)json_object_set_new(process, "cwd", json_string(cwd));
        /* The process finds the container's proxy, and its secrets'
         * placeholders, like its init does. */
        if (json_object_get(s.json, "hutch_env") &&
            oci_net_env_apply(process, json_object_get(s.json, "hutch_env")) < 0) {
                r = fail(-ENOMEM, "exec");
                goto out;
        }
        r = oci_process_validate(process, &err);
        if (r < 0) {
                r = fail(0, "process: %s", err.msg);
                goto out;
        }
        r = open_container_namespaces(s.pid, &init);
        if (r < 0) {
                r = fail(r, "cannot open the namespaces of pid %d", (int)s.pid);
                goto out;
        }
        /* A pid namespace applies to children: join it here. */
        for (i = 0; i < init.n_ns; i++)
                if (init.ns_types[i] == CLONE_NEWPID && setns(init.ns_fds[i], CLONE_NEWPID) < 0) {
                        r = fail(-errno, "join the container's pid namespace");
                        goto out;
                }
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
                r = fail(-errno, "socketpair");
                goto out;
        }
        if (tty)
                (void)json_object_set_new(process, "terminal", json_true());
        init.console_fd = -EBADF;
        if (json_is_true(json_object_get(process, "terminal"))) {
                if (!console) {
                        r = fail(0, "a terminal needs --console-socket");
                        goto out;
                }
                init.console_fd = console_connect(console);
                if (init.console_fd < 0) {
                        r = fail(init.console_fd, "cannot connect to the console socket '%s'",
                                 console);
                        goto out;
                }
        }
        init.config = cfg;
        init.preserve_fds = (int)npreserve;
        (void)fflush(NULL);
        pid = fork();
        if (pid < 0) {
                r = fail(-errno, "fork");
                goto out;
        }
        if (pid == 0) {
                (void)close(sv[0]);
                init.sync_fd = sv[1];
                oci_exec_run(&init, process);
        }
        (void)close(sv[1]);
        json_array_foreach(json_object_get(s.json, "cgroups"), i, v) {
                _cleanup_free_ char *procs = NULL;
                char spid[32];

                (void)snprintf(spid, sizeof(spid), "%d", (int)pid);
                if (asprintf(&procs, "%s/cgroup.procs", json_string_value(v)) < 0 ||
                    write_string_file(procs, spid) < 0) {
                        (void)kill(pid, SIGKILL);
                        (void)waitpid(pid, NULL, 0);
                        r = fail(0, "cannot move the process into '%s'", json_string_value(v));
                        goto out;
                }
        }
        if (write(sv[0], "G", 1) != 1) {
                (void)kill(pid, SIGKILL);
                (void)waitpid(pid, NULL, 0);
                r = fail(-errno, "cannot release the process");
                goto out;
        }
        n = read(sv[0], msg, sizeof(msg) - 1);
        (void)close(sv[0]);
        if (n > 0) {
                msg[n] = '\0';
                (void)waitpid(pid, NULL, 0);
                r = fail(0, "exec failed: %s", msg + 1);
                goto out;
        }
        if (pid_file && (r = write_pid_file(pid_file, pid)) < 0) {
                r = fail(r, "cannot write the pid file '%s'", pid_file);
                goto out;
        }
        if (detach) {
                r = EXIT_SUCCESS;
                goto out;
        }
        if (waitpid(pid, &status, 0) < 0) {
                r = fail(-errno, "waitpid");
                goto out;
        }
        r = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
out:
        for (i = 0; i < init.n_ns; i++)
                (void)close(init.ns_fds[i]);
        json_decref(process);
        json_decref(cfg);
        return r;
}

static int cmd_ps(int argc, char **argv) {
        const char *format = "table";
        const Opt opts[] = {{"--format", 'f', true, &format}};
        _cleanup_(state_done) State s = {};
        _cleanup_free_ char **pos = NULL, *file = NULL, *procs = NULL;
        json_t *first = NULL, *arr;
        char *line, *save = NULL, *out;
        int np;

        if (parse_opts(argc, argv, opts, ELEMENTSOF(opts), &pos, &np) < 0)
                return EXIT_FAILURE;
        if (np < 1)
                return fail(0, "ps needs a container id");
        if (strcmp(format, "table") != 0 && strcmp(format, "json") != 0)
                return fail(0, "unknown --format '%s'", format);
        if (load_or_fail(pos[0], &s) != 0)
                return EXIT_FAILURE;
        first = json_array_get(json_object_get(s.json, "cgroups"), 0);
        if (!first || asprintf(&file, "%s/cgroup.procs", json_string_value(first)) < 0)
                return fail(0, "container \"%s\" has no cgroup", pos[0]);
        if (read_full_file(file, 1 << 20, &procs) < 0)
                procs = strdup("");
        arr = json_array();
        if (strcmp(format, "table") == 0)
                printf("PID\tCMD\n");
        for (line = strtok_r(procs, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                _cleanup_free_ char *cmd = NULL;
                char path[64];
                int pid;

                if (safe_atoi(line, &pid) < 0)
                        continue;
                if (strcmp(format, "json") == 0) {
                        (void)json_array_append_new(arr, json_integer(pid));
                        continue;
                }
                (void)snprintf(path, sizeof(path), "/proc/%d/comm", pid);
                if (read_full_file(path, 256, &cmd) < 0)
                        continue;
                cmd[strcspn(cmd, "\n")] = '\0';
                printf("%d\t%s\n", pid, cmd);
        }
        if (strcmp(format, "json") == 0) {
                out = json_dumps(arr, JSON_COMPACT);
                printf("%s\n", out ? out : "[]");
                free(out);
        }
        json_decref(arr);
        return EXIT_SUCCESS;
}

/* update --resources FILE|-: the new linux.resources, applied to the
 * container's cgroups with the same rules (and refusals) as create. */
static int cmd_update(int argc, char **argv) {
        const char *resources = NULL;
        const Opt opts[] = {{"--resources", 'r', true, &resources}};
        _cleanup_(state_done) State s = {};
        _cleanup_free_ char **pos = NULL, *cfg_path = NULL;
        json_t *res, *cfg, *wrapper;
        json_error_t jerr;
        HutchError err = {};
        Cgroups cg = {};
        const char *unit;
        int np, r;

        if (parse_opts(argc, argv, opts, ELEMENTSOF(opts), &pos, &np) < 0)
                return EXIT_FAILURE;
        if (np != 1 || !resources)
                return fail(0, "update needs --resources FILE|- and a container id");
        if (load_or_fail(pos[0], &s) != 0)
                return EXIT_FAILURE;
        res = strcmp(resources, "-") == 0 ? json_loadf(stdin, 0, &jerr)
                                          : json_load_file(resources, 0, &jerr);
        if (!res)
                return fail(0, "cannot parse the resources: %s", jerr.text);
        wrapper = json_pack("{s:{s:o}}", "linux", "resources", res);
        r = wrapper ? oci_resources_validate(res, &err) : -ENOMEM;
        if (r < 0) {
                json_decref(wrapper);
                return fail(r, "resources: %s", err.msg);
        }
        if (asprintf(&cfg_path, "%s/config.json",
                     json_string_value(json_object_get(s.json, "bundle"))) < 0) {
                json_decref(wrapper);
                return fail(-ENOMEM, "update");
        }
        cfg = json_load_file(cfg_path, 0, &jerr);
        unit = json_string_value(json_object_get(s.json, "systemd_unit"));
        if (unit) {
                /* The scope's cgroup as systemd made it (the v2 path). */
                const char *rel = json_string_value(json_object_get(s.json, "systemd_cgroup"));
                r = rel ? cgroups_plan_at(&cg, rel, &err) : -EBADMSG;
        } else
                r = cfg ? cgroups_plan(pos[0], json_object_get(cfg, "linux"), false, &cg, &err)
                        : -EBADMSG;
        if (r >= 0)
                r = cgroups_apply(&cg, res, true, &err);
        if (r >= 0 && unit)
                r = oci_systemd_scope_set(unit, res, &err);
        cgroups_done(&cg);
        json_decref(cfg);
        json_decref(wrapper);
        if (r < 0)
                return fail(0, "update: %s", err.msg[0] ? err.msg : strerror(-r));
        return EXIT_SUCCESS;
}

static int cmd_list(int argc, char **argv) {
        const char *format = "table", *quiet = NULL;
        const Opt opts[] = {{"--format", 'f', true, &format}, {"--quiet", 'q', false, &quiet}};
        _cleanup_free_ char **pos = NULL;
        _cleanup_(closedirp) DIR *d = NULL;
        json_t *arr = json_array();
        struct dirent *de;
        int np;

        if (parse_opts(argc, argv, opts, ELEMENTSOF(opts), &pos, &np) < 0)
                return EXIT_FAILURE;
        if (strcmp(format, "table") != 0 && strcmp(format, "json") != 0)
                return fail(0, "unknown --format '%s'", format);
        d = opendir(arg_root);
        if (!quiet && strcmp(format, "table") == 0)
                printf("ID\tPID\tSTATUS\tBUNDLE\tCREATED\tOWNER\n");
        while (d && (de = readdir(d))) {
                State s = {};

                if (de->d_name[0] == '.' || state_load(de->d_name, &s) < 0)
                        continue;
                if (quiet)
                        printf("%s\n", de->d_name);
                else if (strcmp(format, "table") == 0)
                        printf("%s\t%d\t%s\t%s\t%s\t%s\n", de->d_name,
                               strcmp(s.status, "stopped") ? (int)s.pid : 0, s.status,
                               json_string_value(json_object_get(s.json, "bundle")),
                               json_string_value(json_object_get(s.json, "created")), "root");
                else
                        (void)json_array_append_new(arr, state_public(&s));
                state_done(&s);
        }
        if (!quiet && strcmp(format, "json") == 0) {
                char *out = json_dumps(arr, JSON_COMPACT);
                printf("%s\n", out ? out : "[]");
                free(out);
        }
        json_decref(arr);
        return EXIT_SUCCESS;
}

static int cmd_freeze(int argc, char **argv, bool frozen) {
        _cleanup_(state_done) State s = {};
        _cleanup_free_ char *file = NULL;
        const char *fz, *v2;
        int r;

        if (argc != 1)
                return fail(0, "%s needs exactly one container id", frozen ? "pause" : "resume");
        if (load_or_fail(argv[0], &s) != 0)
                return EXIT_FAILURE;
        if (strcmp(s.status, frozen ? "running" : "paused") != 0)
                return fail(0, "container \"%s\" is %s", argv[0], s.status);
        fz = json_string_value(json_object_get(s.json, "freezer"));
        v2 = json_string_value(json_object_get(s.json, "freezer_v2"));
        if (!fz && !v2)
                return fail(0, "no freezer cgroup for \"%s\"", argv[0]);
        if (asprintf(&file, "%s/%s", fz ? fz : v2, fz ? "freezer.state" : "cgroup.freeze") < 0)
                return fail(-ENOMEM, "freeze");
        r = write_string_file(file, fz ? (frozen ? "FROZEN" : "THAWED") : (frozen ? "1" : "0"));
        if (r < 0)
                return fail(r, "cannot write '%s'", file);
        return EXIT_SUCCESS;
}

static int cmd_features(void) {
        static const char *const ns[] = {"pid", "network", "mount", "ipc", "uts", "user", "cgroup"};
        json_t *o, *caps = json_array(), *nss = json_array();
        char *out;

        for (int c = 0; oci_cap_to_name(c); c++)
                (void)json_array_append_new(caps, json_string(oci_cap_to_name(c)));
        for (size_t i = 0; i < ELEMENTSOF(ns); i++)
                (void)json_array_append_new(nss, json_string(ns[i]));
        o = json_pack("{s:s, s:s, s:[ssssss], s:[ssssssssssssssssssssssssssss], "
                      "s:{s:o, s:o, s:{s:b, s:b, s:b}, s:{s:b, s:[sssssss], s:[ssss]}, s:{s:b}}, "
                      "s:{s:s, s:s, s:s, s:s, s:s}}",
                      "ociVersionMin", "1.0.0", "ociVersionMax", OCI_VERSION, "hooks", "prestart",
                      "createRuntime", "createContainer", "startContainer", "poststart", "poststop",
                      "mountOptions", "ro", "rw", "nosuid", "suid", "nodev", "dev", "noexec",
                      "exec", "sync", "async", "dirsync", "noatime", "atime", "nodiratime",
                      "diratime", "relatime", "norelatime", "strictatime", "nostrictatime", "bind",
                      "rbind", "private", "rprivate", "shared", "rshared", "slave", "rslave",
                      "unbindable", "linux", "namespaces", nss, "capabilities", caps, "cgroup",
                      "v1", 1, "v2", 1, "systemd", oci_systemd_built(), "seccomp", "enabled", 1,
                      "actions", "SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO", "SCMP_ACT_KILL",
                      "SCMP_ACT_KILL_THREAD", "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_TRAP",
                      "SCMP_ACT_LOG", "operators", "SCMP_CMP_EQ", "SCMP_CMP_NE",
                      "SCMP_CMP_MASKED_EQ", "SCMP_CMP_GT", "apparmor", "enabled", 0, "annotations",
                      "io.hutch.seccomp",
                      "hutch's deny list is always loaded before the config's filter",
                      "io.hutch.no-new-privileges", "always on", "io.hutch.allow-host",
                      "hutch-proxy for a loopback-only network namespace (docs/oci.md)",
                      "io.hutch.secret", "a placeholder in the container, the key in hutch-proxy",
                      "io.hutch.timeout", "the container is killed past it");
        if (!o)
                return fail(-ENOMEM, "features");
        out = json_dumps(o, JSON_INDENT(2));
        printf("%s\n", out ? out : "{}");
        free(out);
        json_decref(o);
        return EXIT_SUCCESS;
}

static void usage(void) {
        printf("hutch-oci: hutch's containment as an OCI runtime (runc's command line)\n\n"
               "hutch-oci [--root DIR] [--log FILE] [--log-format text|json] [--debug]\n"
               "          [--systemd-cgroup] COMMAND ...\n\n"
               "Commands: create, start, state, kill, delete, exec, ps, update, list, pause, "
               "resume,\n"
               "features\n"
               "See docs/oci.md.\n");
}

int main(int argc, char **argv) {
        const char *log_path = NULL, *log_format = "text", *cmd;
        _cleanup_free_ char *root_buf = NULL;
        int i, r;

        for (i = 1; i < argc && argv[i][0] == '-'; i++) {
                const char *a = argv[i], *val = NULL, *eq = strchr(a, '=');
                size_t len = eq ? (size_t)(eq - a) : strlen(a);

#define IS(name) (strlen(name) == len && strncmp(a, name, len) == 0)
                if (IS("--version") || IS("-v")) {
                        printf("hutch-oci version %s\nspec: %s\n", HUTCH_VERSION, OCI_VERSION);
                        return EXIT_SUCCESS;
                }
                if (IS("--help") || IS("-h")) {
                        usage();
                        return EXIT_SUCCESS;
                }
                if (IS("--debug")) {
                        arg_debug = true;
                        continue;
                }
                if (IS("--systemd-cgroup")) {
                        arg_systemd_cgroup = true; /* oci-systemd.c */
                        continue;
                }
                if (IS("--rootless"))
                        continue; /* cgroupsPath's form decides; see docs/oci.md */
                if (!IS("--root") && !IS("--log") && !IS("--log-format") && !IS("--criu")) {
                        fprintf(stderr, "hutch-oci: unknown global option '%s'\n", a);
                        return EXIT_FAILURE;
                }
                val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
                if (!val) {
                        fprintf(stderr, "hutch-oci: option '%s' needs a value\n", a);
                        return EXIT_FAILURE;
                }
                if (IS("--root"))
                        arg_root = val;
                else if (IS("--log"))
                        log_path = val;
                else if (IS("--log-format"))
                        log_format = val;
#undef IS
        }
        if (strcmp(log_format, "json") == 0)
                arg_log_json = true;
        else if (strcmp(log_format, "text") != 0) {
                fprintf(stderr, "hutch-oci: unknown --log-format '%s'\n", log_format);
                return EXIT_FAILURE;
        }
        if (log_path) {
                arg_log = fopen(log_path, "ae");
                if (!arg_log) {
                        fprintf(stderr, "hutch-oci: cannot open log '%s': %m\n", log_path);
                        return EXIT_FAILURE;
                }
        }
        if (!arg_root) {
                const char *xdg = getenv("XDG_RUNTIME_DIR");
                if (geteuid() != 0 && xdg && asprintf(&root_buf, "%s/hutch-oci", xdg) >= 0)
                        arg_root = root_buf;
                else
                        arg_root = "/run/hutch-oci";
        }
        if (i >= argc) {
                usage();
                return EXIT_FAILURE;
        }
        cmd = argv[i++];
        argc -= i;
        argv += i;
        if (strcmp(cmd, "create") == 0)
                r = cmd_create(argc, argv);
        else if (strcmp(cmd, "start") == 0)
                r = cmd_start(argc, argv);
        else if (strcmp(cmd, "state") == 0)
                r = cmd_state(argc, argv);
        else if (strcmp(cmd, "kill") == 0)
                r = cmd_kill(argc, argv);
        else if (strcmp(cmd, "delete") == 0)
                r = cmd_delete(argc, argv);
        else if (strcmp(cmd, "list") == 0)
                r = cmd_list(argc, argv);
        else if (strcmp(cmd, "exec") == 0)
                r = cmd_exec(argc, argv);
        else if (strcmp(cmd, "ps") == 0)
                r = cmd_ps(argc, argv);
        else if (strcmp(cmd, "update") == 0)
                r = cmd_update(argc, argv);
        else if (strcmp(cmd, "pause") == 0)
                r = cmd_freeze(argc, argv, true);
        else if (strcmp(cmd, "resume") == 0)
                r = cmd_freeze(argc, argv, false);
        else if (strcmp(cmd, "features") == 0)
                r = cmd_features();
        else
                r = fail(0, "command '%s' is not supported by hutch-oci (docs/oci.md)", cmd);
        if (arg_log)
                (void)fclose(arg_log);
        return r;
}
