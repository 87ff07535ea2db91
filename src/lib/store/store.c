/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "rm-rf.h"
#include "sha256.h"
#include "store/disk-image.h"
#include "store/id-pool.h"
#include "store/layers.h"
#include "store/store.h"
#include "strv.h"
#include "time-util.h"

#define SNAPSHOT_CHAIN_MAX 64

/* Test hook: with HUTCH_TEST_CRASH_POINT=@where in the environment, the
 * process dies here by SIGKILL, as a crash or a kill -9 would make it (the
 * crash-safety tests stop a snapshot between each two of its steps).
 * Compiled only with -Dtest_hooks (on unless buildtype=release). */
static void crash_point(const char *where) {
#if HUTCH_TEST_HOOKS
        const char *want = getenv("HUTCH_TEST_CRASH_POINT");

        if (want && strcmp(want, where) == 0)
                (void)raise(SIGKILL);
#else
        (void)where;
#endif
}

int store_new_id(char **ret) {
        uint64_t v = 0;
        char *s;

        if (getrandom(&v, sizeof(v), 0) != sizeof(v))
                return -EIO;
        if (asprintf(&s, "%016llx", (unsigned long long)v) < 0)
                return -ENOMEM;
        *ret = s;
        return 0;
}

bool store_name_is_valid(const char *name) {
        size_t n;

        if (!name || !((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= '0' && name[0] <= '9')))
                return false;
        n = strlen(name);
        if (n > STORE_NAME_MAX)
                return false;
        for (size_t i = 1; i < n; i++) {
                char c = name[i];

                if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
                      c == '-'))
                        return false;
        }
        return true;
}

static bool is_id(const char *s) {
        if (!s || strlen(s) != 16)
                return false;
        for (size_t i = 0; i < 16; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

Store *store_free(Store *s) {
        if (!s)
                return NULL;
        free(s->home);
        free(s->state);
        free(s->runtime);
        free(s);
        return NULL;
}

static int pick_home(char **ret) {
        const char *home = getenv("HUTCH_HOME"), *xdg, *user_home;
        char *h = NULL;

        if (home && home[0] == '/')
                h = strdup(home);
        else if (geteuid() == 0)
                h = strdup("/var/lib/hutch");
        else if ((xdg = getenv("XDG_DATA_HOME")) && xdg[0] == '/')
                h = asprintf(&h, "%s/hutch", xdg) < 0 ? NULL : h;
        else if ((user_home = getenv("HOME")) && user_home[0] == '/')
                h = asprintf(&h, "%s/.local/share/hutch", user_home) < 0 ? NULL : h;
        else
                return -ENOENT;
        if (!h)
                return -ENOMEM;
        *ret = h;
        return 0;
}

/* Whether /run/user/UID is the caller's own (made by the login manager):
 * only then is it a place no other user can have made first. */
static bool run_user_is_ours(const char *path) {
        struct stat st;

        return lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
               !(st.st_mode & (S_IWGRP | S_IWOTH));
}

/* The caller's runtime folder, shared by all its stores (VM templates)
 * and holding one folder per store. SECURITY: never a name in a folder
 * that other users can write (a predictable /tmp/hutch-UID could be made
 * first by another user: issue 26): root's /run, $XDG_RUNTIME_DIR,
 * /run/user/UID when it is the caller's, else inside the store (@home,
 * private). */
static int pick_runtime(const char *home, char **ret) {
        _cleanup_free_ char *run_user = NULL;
        const char *xdg;
        char *p = NULL;

        if (geteuid() == 0)
                p = strdup("/run/hutch");
        else if ((xdg = getenv("XDG_RUNTIME_DIR")) && xdg[0] == '/')
                p = asprintf(&p, "%s/hutch", xdg) < 0 ? NULL : p;
        else if (asprintf(&run_user, "/run/user/%u", (unsigned)geteuid()) < 0)
                return -ENOMEM;
        else if (run_user_is_ours(run_user))
                p = asprintf(&p, "%s/hutch", run_user) < 0 ? NULL : p;
        else
                p = asprintf(&p, "%s/run", home) < 0 ? NULL : p;
        if (!p)
                return -ENOMEM;
        *ret = p;
        return 0;
}

/* The store's own folder in @runtime: "s-" and 12 hex digits of the
 * SHA-256 of the store's canonical path, so that two stores never share
 * a keeper's socket or lock (issue 15: a sandbox of one store ran its
 * commands in the same-named sandbox of another). */
static int store_key_path(const char *runtime, const char *canonical_home, char **ret) {
        unsigned char d[SHA256_DIGEST_SIZE];
        char hex[STORE_KEY_HEX + 1];
        Sha256 sh;

        sha256_init(&sh);
        sha256_update(&sh, canonical_home, strlen(canonical_home));
        sha256_finish(&sh, d);
        for (size_t i = 0; i < STORE_KEY_HEX / 2; i++)
                (void)snprintf(hex + 2 * i, 3, "%02x", d[i]);
        return asprintf(ret, "%s/s-%s", runtime, hex) < 0 ? -ENOMEM : 0;
}

/* SECURITY: the store's runtime folder names the store it belongs to
 * (the file "store"): a folder of another store (a hash collision, a
 * store moved) is refused, never shared. */
static int state_claim(const char *state, const char *canonical_home, HutchError *reterr) {
        _cleanup_free_ char *path = NULL, *text = NULL;
        int r;

        if (asprintf(&path, "%s/store", state) < 0)
                return -ENOMEM;
        r = read_full_file(path, PATH_MAX + 1, &text);
        if (r == -ENOENT) {
                r = write_file_atomic(state, "store", canonical_home, strlen(canonical_home));
                if (r < 0)
                        return hutch_error_set(reterr, -r, "cannot write %s: %s", path,
                                               strerror(-r));
                return 0;
        }
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot read %s: %s", path, strerror(-r));
        if (strcmp(text, canonical_home) != 0)
                return hutch_error_set(reterr, EEXIST,
                                       "the runtime directory %s belongs to the store %s, not %s",
                                       state, text, canonical_home);
        return 0;
}

static int store_pick_state(Store *s, HutchError *reterr) {
        _cleanup_free_ char *canonical = NULL;
        const char *explicit_state = getenv("HUTCH_STATE_DIR");
        int r;

        /* An explicit state folder is this store's alone (the caller's
         * word), and holds the templates too. */
        if (explicit_state && explicit_state[0] == '/') {
                s->state = strdup(explicit_state);
                s->runtime = strdup(explicit_state);
                if (!s->state || !s->runtime)
                        return -ENOMEM;
                r = mkdir_private(s->state);
                if (r < 0)
                        return mkdir_private_error("state directory", s->state, r, reterr);
                return 0;
        }
        canonical = realpath(s->home, NULL);
        if (!canonical)
                return hutch_error_set(reterr, errno, "cannot resolve the store %s: %m", s->home);
        r = pick_runtime(canonical, &s->runtime);
        if (r < 0)
                return r;
        r = store_key_path(s->runtime, canonical, &s->state);
        if (r < 0)
                return r;
        r = mkdir_private(s->runtime);
        if (r < 0)
                return mkdir_private_error("runtime directory", s->runtime, r, reterr);
        r = mkdir_private(s->state);
        if (r < 0)
                return mkdir_private_error("state directory", s->state, r, reterr);
        return state_claim(s->state, canonical, reterr);
}

int store_open(Store **ret, HutchError *reterr) {
        _cleanup_(store_freep) Store *s = calloc(1, sizeof(Store));
        static const char *const subdirs[] = {"sandboxes", "snapshots", NULL};
        int r;

        if (!s)
                return -ENOMEM;
        r = pick_home(&s->home);
        if (r == -ENOENT)
                return hutch_error_set(reterr, ENOENT,
                                       "no place for the store: set HUTCH_HOME or HOME");
        if (r < 0)
                return r;
        r = mkdir_private(s->home);
        if (r < 0)
                return mkdir_private_error("store", s->home, r, reterr);
        for (size_t i = 0; subdirs[i]; i++) {
                _cleanup_free_ char *p = NULL;

                if (asprintf(&p, "%s/%s", s->home, subdirs[i]) < 0)
                        return -ENOMEM;
                r = mkdir_private(p);
                if (r < 0)
                        return mkdir_private_error("store", p, r, reterr);
        }
        r = store_pick_state(s, reterr);
        if (r < 0)
                return r;
        r = idmapping_for_caller_ranged(NULL, NULL, NULL, &s->idmap);
        if (r < 0)
                return hutch_error_set(reterr, -r, "failed to pick the sandboxes' id range: %s",
                                       strerror(-r));
        *ret = TAKE_PTR(s);
        return 0;
}

static int join(const char *a, const char *b, const char *c, const char *d, char **ret) {
        char *s;
        int n = asprintf(&s, "%s/%s/%s%s%s", a, b, c, d ? "/" : "", d ? d : "");

        if (n < 0)
                return -ENOMEM;
        *ret = s;
        return 0;
}

typedef struct RmArgs {
        int dirfd;
        const char *name;
} RmArgs;

static int rm_in_range(void *userdata, HutchError *reterr) {
        const RmArgs *a = userdata;

        (void)reterr;
        return rm_rf_at(a->dirfd, a->name);
}

/* rm_rf_at(), then, where the user's sandboxes run with the ranged map
 * and their files may belong to the user's sub-ids (which the user cannot
 * read or delete), again in the store's user namespace (as podman
 * unshare): issue 17, docs/persistent.md "Id range". */
static int store_rm_rf(const Store *s, int dirfd, const char *name) {
        int r;

        r = rm_rf_at(dirfd, name);
        if (r >= 0 || !s->idmap.ranged || (r != -EACCES && r != -EPERM && r != -ENOTEMPTY))
                return r;
        return userns_run_ranged(&s->idmap, rm_in_range, &(RmArgs){dirfd, name}, NULL);
}

int store_enter_range(const Store *s, HutchError *reterr) {
        return userns_enter_ranged(&s->idmap, reterr);
}

int store_sandbox_path(const Store *s, const char *name, const char *sub, char **ret) {
        return join(s->home, "sandboxes", name, sub, ret);
}

int store_sandbox_data_path(const Store *s, const SandboxRecord *r, const char *sub, char **ret) {
        char *p;

        if (!r->data_dir)
                return join(s->home, "sandboxes", r->name, sub ? sub : "data", ret);
        if (!sub) {
                p = strdup(r->data_dir);
                if (!p)
                        return -ENOMEM;
                *ret = p;
                return 0;
        }
        /* @sub is "data/..." as for store_sandbox_path(). */
        if (strncmp(sub, "data/", 5) == 0)
                sub += 5;
        if (asprintf(&p, "%s/%s", r->data_dir, sub) < 0)
                return -ENOMEM;
        *ret = p;
        return 0;
}

int store_snapshot_path(const Store *s, const char *name, const char *sub, char **ret) {
        return join(s->home, "snapshots", name, sub, ret);
}

int store_state_path(const Store *s, const char *name, const char *sub, char **ret) {
        char *p;
        int n = asprintf(&p, "%s/%s%s%s", s->state, name, sub ? "/" : "", sub ? sub : "");

        if (n < 0)
                return -ENOMEM;
        *ret = p;
        return 0;
}

static int lock_path(const char *path, int *ret_fd) {
        _cleanup_close_ int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);

        if (fd < 0)
                return negative_errno();
        while (flock(fd, LOCK_EX) < 0)
                if (errno != EINTR)
                        return negative_errno();
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int store_lock_sandbox(const Store *s, const char *name, int *ret_fd) {
        _cleanup_free_ char *dir = NULL, *path = NULL;
        struct stat st;
        int r;

        r = store_sandbox_path(s, name, NULL, &dir);
        if (r < 0)
                return r;
        if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
                return -ENOENT;
        r = store_sandbox_path(s, name, "lock", &path);
        if (r < 0)
                return r;
        r = lock_path(path, ret_fd);
        /* Removed while we waited. */
        if (r >= 0 && lstat(dir, &st) < 0) {
                *ret_fd = safe_close(*ret_fd);
                return -ENOENT;
        }
        return r;
}

int store_lock_all(const Store *s, int *ret_fd) {
        _cleanup_free_ char *path = NULL;

        if (asprintf(&path, "%s/lock", s->home) < 0)
                return -ENOMEM;
        return lock_path(path, ret_fd);
}

bool store_keeper_running(const Store *s, const char *name) {
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -EBADF;

        if (store_state_path(s, name, "keeper.lock", &path) < 0)
                return false;
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return false;
        if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
                (void)flock(fd, LOCK_UN);
                return false;
        }
        return errno == EWOULDBLOCK;
}

/* ---- records ---- */

static int record_load_file(const char *path, json_t **ret) {
        _cleanup_free_ char *text = NULL;
        json_t *j;
        int r;

        r = read_full_file(path, STORE_RECORD_MAX, &text);
        if (r < 0)
                return r;
        j = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
        if (!json_is_object(j) ||
            json_integer_value(json_object_get(j, "version")) != STORE_RECORD_VERSION) {
                json_decref(j);
                return -EBADMSG;
        }
        *ret = j;
        return 0;
}

static char *jstrdup(json_t *o, const char *key) {
        const char *v = json_string_value(json_object_get(o, key));

        return v ? strdup(v) : NULL;
}

static uint64_t jnum(json_t *o, const char *key) {
        json_int_t v = json_integer_value(json_object_get(o, key));

        return v > 0 ? (uint64_t)v : 0;
}

SandboxRecord *sandbox_record_free(SandboxRecord *r) {
        if (!r)
                return NULL;
        free(r->name);
        free(r->id);
        free(r->policy_json);
        free(r->parent);
        free(r->data_dir);
        free(r);
        return NULL;
}

static void snapshot_record_clear(SnapshotRecord *r) {
        free(r->name);
        free(r->id);
        free(r->parent);
        strv_free(r->layers);
        free(r->policy_json);
        free(r->origin);
        free(r->origin_upper);
        free(r->suggested_policy_json);
        *r = (SnapshotRecord){};
}

SnapshotRecord *snapshot_record_free(SnapshotRecord *r) {
        if (!r)
                return NULL;
        snapshot_record_clear(r);
        free(r);
        return NULL;
}

static int sandbox_record_parse(json_t *j, SandboxRecord **ret) {
        _cleanup_(sandbox_record_freep) SandboxRecord *r = calloc(1, sizeof(SandboxRecord));
        json_t *policy = json_object_get(j, "policy");

        if (!r)
                return -ENOMEM;
        r->name = jstrdup(j, "name");
        r->id = jstrdup(j, "id");
        r->parent = jstrdup(j, "parent");
        r->created_ms = jnum(j, "created_ms");
        r->last_used_ms = jnum(j, "last_used_ms");
        r->gen = jnum(j, "gen");
        r->idle_timeout_ms = jnum(j, "idle_timeout_ms");
        r->disk_limit = jnum(j, "disk_limit");
        if (jnum(j, "id_base") > UINT32_MAX)
                return -EBADMSG;
        r->id_base = (uint32_t)jnum(j, "id_base");
        r->policy_json = json_is_object(policy) ? json_dumps(policy, JSON_COMPACT) : NULL;
        if (!r->name || !r->id || !r->policy_json || !store_name_is_valid(r->name) || !r->gen)
                return -EBADMSG;
        *ret = TAKE_PTR(r);
        return 0;
}

static int sandbox_record_write(const char *dir, const SandboxRecord *r, HutchError *reterr) {
        _cleanup_free_ char *text = NULL;
        json_t *policy = json_loads(r->policy_json, 0, NULL), *j;
        int q;

        if (!policy)
                return hutch_error_set(reterr, EINVAL, "invalid policy JSON");
        j = json_pack("{s:i,s:s,s:s,s:I,s:I,s:o,s:o,s:I,s:I,s:I,s:I}", "version",
                      STORE_RECORD_VERSION, "name", r->name, "id", r->id, "created_ms",
                      (json_int_t)r->created_ms, "last_used_ms", (json_int_t)r->last_used_ms,
                      "policy", policy, "parent", r->parent ? json_string(r->parent) : json_null(),
                      "gen", (json_int_t)r->gen, "idle_timeout_ms", (json_int_t)r->idle_timeout_ms,
                      "disk_limit", (json_int_t)r->disk_limit, "id_base", (json_int_t)r->id_base);
        if (!j)
                return -ENOMEM;
        text = json_dumps(j, JSON_INDENT(2));
        json_decref(j);
        if (!text)
                return -ENOMEM;
        q = write_file_atomic(dir, "sandbox.json", text, strlen(text));
        if (q < 0)
                return hutch_error_set(reterr, -q, "failed to write the record of '%s': %s",
                                       r->name, strerror(-q));
        return 0;
}

int store_sandbox_save(const Store *s, const SandboxRecord *r, HutchError *reterr) {
        _cleanup_free_ char *dir = NULL;
        int q;

        q = store_sandbox_path(s, r->name, NULL, &dir);
        if (q < 0)
                return q;
        return sandbox_record_write(dir, r, reterr);
}

int snapshot_record_to_json(const SnapshotRecord *r, char **ret) {
        json_t *layers = json_array(), *policy = json_loads(r->policy_json, 0, NULL), *j;
        json_t *suggested =
                r->suggested_policy_json ? json_loads(r->suggested_policy_json, 0, NULL) : NULL;
        char *text;

        STRV_FOREACH(l, r->layers)
                (void)json_array_append_new(layers, json_string(*l));
        if (!policy)
                policy = json_object();
        j = json_pack("{s:i,s:s,s:s,s:I,s:o,s:o,s:o,s:o,s:o,s:b,s:b,s:o}", "version",
                      STORE_RECORD_VERSION, "name", r->name, "id", r->id, "created_ms",
                      (json_int_t)r->created_ms, "parent",
                      r->parent ? json_string(r->parent) : json_null(), "layers", layers, "policy",
                      policy, "origin", r->origin ? json_string(r->origin) : json_null(),
                      "origin_upper", r->origin_upper ? json_string(r->origin_upper) : json_null(),
                      "has_manifest", r->has_manifest, "imported", r->imported, "suggested_policy",
                      suggested ? suggested : json_null());
        if (!j)
                return -ENOMEM;
        text = json_dumps(j, JSON_INDENT(2));
        json_decref(j);
        if (!text)
                return -ENOMEM;
        *ret = text;
        return 0;
}

static int snapshot_record_parse(json_t *j, SnapshotRecord **ret) {
        _cleanup_(snapshot_record_freep) SnapshotRecord *r = calloc(1, sizeof(SnapshotRecord));
        json_t *layers = json_object_get(j, "layers"), *v, *policy = json_object_get(j, "policy");
        json_t *suggested = json_object_get(j, "suggested_policy");
        size_t i;

        if (!r)
                return -ENOMEM;
        r->name = jstrdup(j, "name");
        r->id = jstrdup(j, "id");
        r->parent = jstrdup(j, "parent");
        r->origin = jstrdup(j, "origin");
        r->origin_upper = jstrdup(j, "origin_upper");
        r->created_ms = jnum(j, "created_ms");
        r->has_manifest = json_is_true(json_object_get(j, "has_manifest"));
        r->policy_json = json_is_object(policy) ? json_dumps(policy, JSON_COMPACT) : NULL;
        r->imported = json_is_true(json_object_get(j, "imported"));
        if (json_is_object(suggested)) {
                r->suggested_policy_json = json_dumps(suggested, JSON_COMPACT);
                if (!r->suggested_policy_json)
                        return -ENOMEM;
        }
        if (!r->name || !r->id || !store_name_is_valid(r->name) || !json_is_array(layers) ||
            json_array_size(layers) == 0 || json_array_size(layers) > SNAPSHOT_CHAIN_MAX ||
            !r->policy_json || (r->parent && !store_name_is_valid(r->parent)))
                return -EBADMSG;
        json_array_foreach(layers, i, v) {
                const char *l = json_string_value(v);

                /* SECURITY: a layer is a folder inside the snapshot's. */
                if (!l || !l[0] || l[0] == '/' || strstr(l, "..") || strv_extend(&r->layers, l) < 0)
                        return -EBADMSG;
        }
        *ret = TAKE_PTR(r);
        return 0;
}

int snapshot_record_from_json(const char *text, SnapshotRecord **ret, HutchError *reterr) {
        json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
        int r;

        if (!json_is_object(j)) {
                json_decref(j);
                return hutch_error_set(reterr, EBADMSG, "the snapshot record is not JSON");
        }
        r = snapshot_record_parse(j, ret);
        json_decref(j);
        if (r < 0)
                return hutch_error_set(reterr, -r, "invalid snapshot record");
        return 0;
}

int store_snapshot_load(const Store *s, const char *name_or_id, SnapshotRecord **ret,
                        HutchError *reterr) {
        _cleanup_strv_free_ char **names = NULL;
        int r;

        if (!name_or_id)
                return hutch_error_set(reterr, EINVAL, "no snapshot name or id given");
        if (store_name_is_valid(name_or_id)) {
                _cleanup_free_ char *path = NULL;
                json_t *j = NULL;

                r = store_snapshot_path(s, name_or_id, "snapshot.json", &path);
                if (r < 0)
                        return r;
                r = record_load_file(path, &j);
                if (r >= 0) {
                        r = snapshot_record_parse(j, ret);
                        json_decref(j);
                        if (r < 0)
                                return hutch_error_set(reterr, -r,
                                                       "the record of snapshot '%s' is damaged",
                                                       name_or_id);
                        return 0;
                }
                if (r != -ENOENT)
                        return hutch_error_set(reterr, -r, "cannot read snapshot '%s': %s",
                                               name_or_id, strerror(-r));
        }
        if (is_id(name_or_id) && store_list(s, "snapshots", &names) >= 0)
                STRV_FOREACH(n, names) {
                        _cleanup_(snapshot_record_freep) SnapshotRecord *c = NULL;

                        if (store_snapshot_load(s, *n, &c, NULL) >= 0 &&
                            strcmp(c->id, name_or_id) == 0) {
                                *ret = TAKE_PTR(c);
                                return 0;
                        }
                }
        return hutch_error_set(reterr, ENOENT, "no snapshot named '%s'", name_or_id);
}

int store_snapshot_chain(const Store *s, const char *parent, size_t max, char ***ret,
                         HutchError *reterr) {
        _cleanup_strv_free_ char **l = NULL;
        _cleanup_free_ char *cur = parent ? strdup(parent) : NULL;
        size_t depth = 0;
        int r;

        if (parent && !cur)
                return -ENOMEM;
        while (cur) {
                _cleanup_(snapshot_record_freep) SnapshotRecord *snap = NULL;

                if (++depth > SNAPSHOT_CHAIN_MAX)
                        return hutch_error_set(reterr, ELOOP, "snapshot chain too long");
                r = store_snapshot_load(s, cur, &snap, reterr);
                if (r < 0)
                        return r;
                STRV_FOREACH(layer, snap->layers) {
                        _cleanup_free_ char *p = NULL;

                        r = store_snapshot_path(s, snap->name, *layer, &p);
                        if (r < 0)
                                return r;
                        r = strv_push_take(&l, TAKE_PTR(p));
                        if (r < 0)
                                return r;
                }
                free(cur);
                cur = TAKE_PTR(snap->parent);
        }
        if (strv_length(l) > max)
                return hutch_error_set(reterr, E2BIG,
                                       "the snapshot chain has %zu layers; at most %zu can be "
                                       "stacked (create from a snapshot of a snapshot less often)",
                                       strv_length(l), max);
        *ret = TAKE_PTR(l);
        return 0;
}

/* ---- sandboxes ---- */

/* In a sandbox's folder while a snapshot of it, stopped, with a disk
 * image, is under way (sandbox_recover_image()). */
#define SNAPSHOT_PENDING "snapshot-pending"

static int upper_name(uint64_t gen, char *buf, size_t size) {
        int n = snprintf(buf, size, "upper-%llu", (unsigned long long)gen);

        return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* data/<upper>/{root,ws}, owned by the sandbox's root. */
static int make_layer_dirs(const Store *s, int dfd, const char *name) {
        static const char *const subs[] = {"root", "ws", NULL};
        _cleanup_close_ int fd = -EBADF;

        if (mkdirat(dfd, name, 0755) < 0 && errno != EEXIST)
                return negative_errno();
        fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        for (size_t i = 0; subs[i]; i++)
                if (mkdirat(fd, subs[i], 0755) < 0 && errno != EEXIST)
                        return negative_errno();
        if (s->idmap.privileged) {
                for (size_t i = 0; subs[i]; i++)
                        if (fchownat(fd, subs[i], s->idmap.uid_base, s->idmap.gid_base,
                                     AT_SYMLINK_NOFOLLOW) < 0)
                                return negative_errno();
                if (fchownat(dfd, name, s->idmap.uid_base, s->idmap.gid_base, AT_SYMLINK_NOFOLLOW) <
                    0)
                        return negative_errno();
        }
        return 0;
}

static int make_data_dir(const Store *s, const char *dir, uint64_t gen) {
        _cleanup_close_ int dfd = -EBADF;
        char upper[64];
        int r;

        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return negative_errno();
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return negative_errno();
        r = upper_name(gen, upper, sizeof(upper));
        if (r >= 0)
                r = make_layer_dirs(s, dfd, upper);
        if (r >= 0)
                r = make_layer_dirs(s, dfd, "work");
        /* The sandbox's root must reach its layers through data/. */
        if (r >= 0 && s->idmap.privileged && fchown(dfd, s->idmap.uid_base, s->idmap.gid_base) < 0)
                r = negative_errno();
        return r;
}

/* Whether the template @path can be copied as the image of @size bytes
 * (disk_template()): 1 yes, 0 no (something else is there), -ENOENT when
 * there is none. */
static int template_usable(const char *path, uint64_t size) {
        struct stat st;

        if (lstat(path, &st) < 0)
                return errno == ENOENT ? -ENOENT : 0;
        return S_ISREG(st.st_mode) && st.st_uid == geteuid() && !(st.st_mode & 0022) &&
               (uint64_t)st.st_size == size;
}

/* The empty disk image that new sandboxes' images of @size bytes are
 * copies of (issue 20: mkfs.ext4 was ~35 ms of every create; a copy of its
 * few hundred KiB of data is ~1 ms): disk-templates/ in the store, one per
 * size, owner of the layer folders (the store's id map) and layer
 * generation, made by the first create that needs it: mkfs.ext4 -d of a
 * data/ as make_data_dir() makes it, with logs/. The caller holds the
 * store's lock, so that one creator makes it; it is made in a temp folder
 * and renamed into place once mkfs.ext4 flushed it, so a template that
 * exists is whole, after a crash too. Its path into @ret. */
static int disk_template(const Store *s, uint64_t size, uint64_t gen, char **ret,
                         HutchError *reterr) {
        _cleanup_free_ char *dir = NULL, *path = NULL, *tmp = NULL, *src = NULL, *logs = NULL,
                            *img = NULL;
        _cleanup_close_ int dfd = -EBADF;
        int q;

        /* v1: the mkfs.ext4 options of disk_image_make(); a change of
         * them or of make_data_dir() changes the name. */
        if (asprintf(&dir, "%s/disk-templates", s->home) < 0 ||
            asprintf(&path, "%s/ext4-v1-%llu-%u-%u-%llu.img", dir, (unsigned long long)size,
                     (unsigned)s->idmap.uid_base, (unsigned)s->idmap.gid_base,
                     (unsigned long long)gen) < 0 ||
            asprintf(&tmp, "%s/.tmp-%llu", dir, (unsigned long long)size) < 0 ||
            asprintf(&src, "%s/data", tmp) < 0 || asprintf(&logs, "%s/logs", src) < 0 ||
            asprintf(&img, "%s/" DISK_IMAGE_NAME, tmp) < 0)
                return -ENOMEM;
        /* SECURITY: a template is used only when it is what its name
         * says: a regular file of ours, of exactly @size bytes (trusted by
         * name, one of another size gave a sandbox a disk of that size,
         * not its limit); anything else there is removed and made again
         * (the copy opens it without following links). */
        q = template_usable(path, size);
        if (q > 0) {
                *ret = TAKE_PTR(path);
                return 0;
        }
        if (q == 0) {
                q = store_rm_rf(s, AT_FDCWD, path);
                if (q < 0 && q != -ENOENT)
                        return hutch_error_set(reterr, -q, "cannot remove %s: %s", path,
                                               strerror(-q));
        }
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return hutch_error_set(reterr, errno, "cannot create %s: %m", dir);
        /* What a crash left while making one. */
        q = store_rm_rf(s, AT_FDCWD, tmp);
        if (q < 0 && q != -ENOENT)
                return hutch_error_set(reterr, -q, "cannot remove %s: %s", tmp, strerror(-q));
        if (mkdir(tmp, 0700) < 0)
                return hutch_error_set(reterr, errno, "cannot create %s: %m", tmp);
        q = make_data_dir(s, src, gen);
        if (q >= 0 && mkdir(logs, 0700) < 0)
                q = negative_errno();
        if (q < 0)
                (void)hutch_error_set(reterr, -q, "cannot create %s: %s", src, strerror(-q));
        if (q >= 0)
                q = disk_image_make(img, size, src, reterr);
        if (q >= 0 && rename(img, path) < 0)
                q = hutch_error_set(reterr, errno, "cannot create %s: %m", path);
        if (q >= 0) {
                dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (dfd < 0 || fsync(dfd) < 0)
                        q = hutch_error_set(reterr, errno, "cannot write %s: %m", dir);
        }
        (void)store_rm_rf(s, AT_FDCWD, tmp);
        if (q < 0)
                return q;
        *ret = TAKE_PTR(path);
        return 0;
}

/* Gives the new sandbox (its temp folder @tmp) a disk image of @size
 * bytes, a copy of the template (with logs/ inside, so that detached
 * execs' output counts too), and leaves its data/ empty, as the image's
 * mount point. */
static int make_disk_image(const Store *s, const char *tmp, const char *data, uint64_t size,
                           uint64_t gen, HutchError *reterr) {
        _cleanup_free_ char *image = NULL, *template = NULL;
        int q;

        if (asprintf(&image, "%s/" DISK_IMAGE_NAME, tmp) < 0)
                return -ENOMEM;
        q = disk_template(s, size, gen, &template, reterr);
        if (q >= 0)
                q = disk_image_copy(template, image, reterr);
        /* Fail closed: the limit is the image's size (the template may
         * have been swapped since it was checked). */
        if (q >= 0 && template_usable(image, size) <= 0)
                q = hutch_error_set(reterr, EIO, "%s is not a disk image of %llu bytes", image,
                                    (unsigned long long)size);
        if (q < 0)
                return q;
        {
                _cleanup_(closedirp) DIR *d = opendir(data);
                struct dirent *de;

                if (!d)
                        return hutch_error_set(reterr, errno, "cannot open %s: %m", data);
                while ((de = readdir(d)))
                        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
                                q = rm_rf_at(dirfd(d), de->d_name);
                                if (q < 0)
                                        return hutch_error_set(reterr, -q, "cannot empty %s: %s",
                                                               data, strerror(-q));
                        }
        }
        return 0;
}

/* The store's folder as the id pool names it: canonical, so that two
 * spellings of one store are one. */
static int pool_home(const Store *s, char **ret) {
        char *c = realpath(s->home, NULL);

        if (!c)
                return negative_errno();
        *ret = c;
        return 0;
}

/* The ranges of the id pool that the store's sandbox records name, for
 * id_pool_claim() to put back what a lost pool file forgot. A record that
 * cannot be read is skipped. */
static int pool_held(const Store *s, IdPoolHold **ret, size_t *ret_n) {
        _cleanup_strv_free_ char **names = NULL;
        _cleanup_free_ IdPoolHold *held = NULL;
        size_t n = 0;
        int r;

        r = store_list(s, "sandboxes", &names);
        if (r < 0)
                return r;
        held = calloc(strv_length(names) + 1, sizeof(IdPoolHold));
        if (!held)
                return -ENOMEM;
        STRV_FOREACH(name, names) {
                _cleanup_free_ char *path = NULL;
                const char *id;
                json_t *j = NULL;

                if (store_sandbox_path(s, *name, "sandbox.json", &path) < 0 ||
                    record_load_file(path, &j) < 0)
                        continue;
                id = json_string_value(json_object_get(j, "id"));
                if (id && strlen(id) < sizeof(held[n].id) && jnum(j, "id_base") != 0 &&
                    jnum(j, "id_base") <= UINT32_MAX) {
                        memcpy(held[n].id, id, strlen(id) + 1);
                        held[n++].base = (uint32_t)jnum(j, "id_base");
                }
                json_decref(j);
        }
        *ret = TAKE_PTR(held);
        *ret_n = n;
        return 0;
}

int store_sandbox_id_range(Store *s, SandboxRecord *r, uint32_t *ret_base, int *ret_lease,
                           HutchError *reterr) {
        _cleanup_free_ IdPoolHold *held = NULL;
        _cleanup_free_ char *home = NULL;
        _cleanup_close_ int lease = -EBADF;
        uint32_t base = 0;
        size_t n_held = 0;
        int q;

        if (!s->idmap.privileged) {
                *ret_base = 0;
                if (ret_lease)
                        *ret_lease = -EBADF;
                return 0;
        }
        q = pool_home(s, &home);
        if (q < 0)
                return hutch_error_set(reterr, -q, "cannot resolve the store %s: %s", s->home,
                                       strerror(-q));
        q = pool_held(s, &held, &n_held);
        if (q < 0)
                return hutch_error_set(reterr, -q, "cannot list the store %s: %s", s->home,
                                       strerror(-q));
        q = id_pool_claim(home, r->id, r->id_base, held, n_held, &base, ret_lease ? &lease : NULL,
                          reterr);
        if (q < 0)
                return q;
        if (base != r->id_base) {
                r->id_base = base;
                q = store_sandbox_save(s, r, reterr);
                if (q < 0)
                        return q;
        }
        *ret_base = base;
        if (ret_lease)
                *ret_lease = TAKE_FD(lease);
        return 0;
}

int store_sandbox_create(Store *s, SandboxRecord *r, HutchError *reterr) {
        _cleanup_free_ char *tmp = NULL, *final = NULL, *data = NULL, *logs = NULL, *home = NULL;
        _cleanup_close_ int lock = -EBADF;
        struct stat st;
        int q;

        q = store_lock_all(s, &lock);
        if (q < 0)
                return hutch_error_set(reterr, -q, "cannot lock the store: %s", strerror(-q));
        q = store_sandbox_path(s, r->name, NULL, &final);
        if (q < 0)
                return q;
        if (lstat(final, &st) == 0)
                return hutch_error_set(reterr, EEXIST, "a sandbox named '%s' already exists",
                                       r->name);
        /* The caller loaded the parent before taking the lock: `snapshot
         * rm`, which checks for dependents under this lock, may have
         * removed it since. */
        if (r->parent) {
                _cleanup_free_ char *parent = NULL;

                q = store_snapshot_path(s, r->parent, "snapshot.json", &parent);
                if (q < 0)
                        return q;
                if (lstat(parent, &st) < 0)
                        return hutch_error_set(reterr, ENOENT, "no snapshot named '%s'", r->parent);
        }
        if (asprintf(&tmp, "%s/sandboxes/.tmp-%s", s->home, r->id) < 0 ||
            asprintf(&data, "%s/data", tmp) < 0 || asprintf(&logs, "%s/logs", tmp) < 0)
                return -ENOMEM;
        /* As root, the sandbox's own range of the machine's id pool
         * (store/id-pool.h): a full pool is refused before anything is
         * made. */
        if (s->idmap.privileged) {
                _cleanup_free_ IdPoolHold *held = NULL;
                size_t n_held = 0;

                q = pool_home(s, &home);
                if (q < 0)
                        return hutch_error_set(reterr, -q, "cannot resolve the store %s: %s",
                                               s->home, strerror(-q));
                /* SECURITY: what the records hold, put back into a pool
                 * that lost it (store/id-pool.h). */
                q = pool_held(s, &held, &n_held);
                if (q < 0)
                        return hutch_error_set(reterr, -q, "cannot list the store %s: %s", s->home,
                                               strerror(-q));
                r->id_base = 0;
                q = id_pool_claim(home, r->id, 0, held, n_held, &r->id_base, NULL, reterr);
                if (q < 0)
                        return q;
        }
        if (mkdir(tmp, 0700) < 0) {
                q = hutch_error_set(reterr, errno, "cannot create %s: %m", tmp);
                goto release;
        }
        q = make_data_dir(s, data, r->gen);
        if (q >= 0 && mkdir(logs, 0700) < 0)
                q = negative_errno();
        if (q >= 0 && r->disk_limit != 0) {
                q = make_disk_image(s, tmp, data, r->disk_limit, r->gen, reterr);
                if (q < 0) {
                        (void)store_rm_rf(s, AT_FDCWD, tmp);
                        goto release;
                }
        }
        if (q < 0) {
                (void)store_rm_rf(s, AT_FDCWD, tmp);
                q = hutch_error_set(reterr, -q, "cannot create the sandbox's layers: %s",
                                    strerror(-q));
                goto release;
        }
        q = sandbox_record_write(tmp, r, reterr);
        if (q >= 0 && rename(tmp, final) < 0)
                q = hutch_error_set(reterr, errno, "cannot create %s: %m", final);
        if (q >= 0)
                return q;
        (void)store_rm_rf(s, AT_FDCWD, tmp);
release:
        if (home)
                (void)id_pool_release(home, r->id);
        return q;
}

int store_sandbox_remove(const Store *s, const char *name, HutchError *reterr) {
        _cleanup_free_ char *dir = NULL, *trash = NULL, *state = NULL, *id = NULL, *sid = NULL,
                            *home = NULL;
        int r;

        r = store_new_id(&id);
        if (r < 0)
                return r;
        r = store_sandbox_path(s, name, NULL, &dir);
        if (r < 0 || asprintf(&trash, "%s/sandboxes/.tmp-rm-%s", s->home, id) < 0)
                return -ENOMEM;
        /* Its id, for its range of the id pool: read before the record
         * goes. */
        if (s->idmap.privileged) {
                _cleanup_free_ char *rec_path = NULL;
                json_t *j = NULL;

                if (asprintf(&rec_path, "%s/sandbox.json", dir) >= 0 &&
                    record_load_file(rec_path, &j) >= 0) {
                        sid = jstrdup(j, "id");
                        json_decref(j);
                }
        }
        if (rename(dir, trash) < 0)
                return hutch_error_set(reterr, errno, "cannot remove %s: %m", dir);
        /* The sandbox is gone (its keeper was stopped): its range is free
         * for the next one. A failed release is left to `hutch gc`. */
        if (sid && pool_home(s, &home) >= 0)
                (void)id_pool_release(home, sid);
        r = store_rm_rf(s, AT_FDCWD, trash);
        if (store_state_path(s, name, NULL, &state) >= 0)
                (void)store_rm_rf(s, AT_FDCWD, state);
        if (r < 0)
                return hutch_error_set(reterr, -r, "removed '%s', but %s is left (hutch gc): %s",
                                       name, trash, strerror(-r));
        return 0;
}

static int name_compare(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

int store_list(const Store *s, const char *kind, char ***ret) {
        _cleanup_free_ char *dir = NULL;
        _cleanup_(closedirp) DIR *d = NULL;
        _cleanup_strv_free_ char **l = NULL;
        struct dirent *de;
        size_t n;
        int r;

        if (asprintf(&dir, "%s/%s", s->home, kind) < 0)
                return -ENOMEM;
        d = opendir(dir);
        if (!d)
                return negative_errno();
        while ((de = readdir(d)))
                if (store_name_is_valid(de->d_name)) {
                        r = strv_extend(&l, de->d_name);
                        if (r < 0)
                                return r;
                }
        n = strv_length(l);
        if (n > 1)
                qsort(l, n, sizeof(char *), name_compare);
        *ret = TAKE_PTR(l);
        return 0;
}

/* Puts things right after a snapshot of the stopped sandbox @r was
 * interrupted (the record names a layer that is not there): the snapshot
 * was committed (roll forward to the new layer) or not (move the layer
 * back from the temp folder). */
/* The same for a sandbox with a disk image, whose layer is copied, not
 * moved, and whose data/ is not mounted here: SNAPSHOT_PENDING says a
 * snapshot of the stopped sandbox was under way. Committed (a snapshot made
 * of this very layer exists): the sandbox moves on to it and to its next
 * layer, made in the image before the commit; the copied one is left to
 * the keeper to remove. Not committed: the sandbox stays as it is. */
/* Committed? Looks for the snapshot made of @r's layer @upper; when there
 * is one, @r moves on to it (its parent, the next generation) in memory and
 * 1 is returned; 0 when there is none, -ENOMEM. */
static int sandbox_move_to_snapshot(Store *s, SandboxRecord *r, const char *upper) {
        _cleanup_strv_free_ char **snaps = NULL;

        if (store_list(s, "snapshots", &snaps) < 0)
                return 0;
        STRV_FOREACH(n, snaps) {
                _cleanup_(snapshot_record_freep) SnapshotRecord *snap = NULL;

                if (store_snapshot_load(s, *n, &snap, NULL) < 0 || !snap->origin ||
                    !snap->origin_upper || strcmp(snap->origin, r->name) != 0 ||
                    strcmp(snap->origin_upper, upper) != 0)
                        continue;
                free(r->parent);
                r->parent = strdup(snap->name);
                if (!r->parent)
                        return -ENOMEM;
                r->gen++;
                return 1;
        }
        return 0;
}

static int sandbox_recover_image(Store *s, SandboxRecord *r, const char *upper,
                                 const char *pending) {
        int q;

        q = sandbox_move_to_snapshot(s, r, upper);
        if (q > 0)
                q = store_sandbox_save(s, r, NULL);
        if (q < 0)
                return q;
        return unlink(pending) < 0 && errno != ENOENT ? negative_errno() : 0;
}

static int sandbox_recover(Store *s, SandboxRecord *r) {
        _cleanup_free_ char *data = NULL, *snapdir = NULL;
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        char upper[64];
        struct stat st;
        int q;

        q = upper_name(r->gen, upper, sizeof(upper));
        if (q < 0)
                return q;
        if (r->disk_limit != 0) {
                _cleanup_free_ char *pending = NULL;

                q = store_sandbox_path(s, r->name, SNAPSHOT_PENDING, &pending);
                if (q < 0)
                        return q;
                return sandbox_recover_image(s, r, upper, pending);
        }
        q = store_sandbox_path(s, r->name, "data", &data);
        if (q < 0)
                return q;
        {
                _cleanup_free_ char *p = NULL;

                if (asprintf(&p, "%s/%s", data, upper) < 0)
                        return -ENOMEM;
                if (lstat(p, &st) == 0)
                        return 0; /* nothing to do */
        }
        /* Committed? A snapshot made of this very layer. */
        q = sandbox_move_to_snapshot(s, r, upper);
        if (q < 0)
                return q;
        if (q > 0) {
                _cleanup_close_ int dfd = open(data, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                char next[64];

                if (dfd < 0 || upper_name(r->gen, next, sizeof(next)) < 0)
                        return -EIO;
                q = make_layer_dirs(s, dfd, next);
                if (q < 0)
                        return q;
                return store_sandbox_save(s, r, NULL);
        }
        /* Not committed: the layer sits in a temp snapshot folder. */
        if (asprintf(&snapdir, "%s/snapshots", s->home) < 0)
                return -ENOMEM;
        d = opendir(snapdir);
        while (d && (de = readdir(d))) {
                _cleanup_free_ char *rec = NULL, *layer = NULL, *back = NULL;
                json_t *j = NULL;
                bool mine;

                if (strncmp(de->d_name, ".tmp-", 5) != 0)
                        continue;
                if (asprintf(&rec, "%s/%s/snapshot.json", snapdir, de->d_name) < 0 ||
                    asprintf(&layer, "%s/%s/layer", snapdir, de->d_name) < 0 ||
                    asprintf(&back, "%s/%s", data, upper) < 0)
                        return -ENOMEM;
                if (record_load_file(rec, &j) < 0)
                        continue;
                mine = json_string_value(json_object_get(j, "origin")) &&
                       json_string_value(json_object_get(j, "origin_upper")) &&
                       strcmp(json_string_value(json_object_get(j, "origin")), r->name) == 0 &&
                       strcmp(json_string_value(json_object_get(j, "origin_upper")), upper) == 0;
                json_decref(j);
                if (mine && rename(layer, back) == 0)
                        return 0;
        }
        return -ENOENT;
}

/* Recovery changes the sandbox: only under its lock. A caller that does
 * not hold it takes it here if it is free; if another command holds it
 * (a snapshot in progress), the sandbox is busy. */
static int sandbox_recover_locked(Store *s, SandboxRecord *r, bool locked) {
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -EBADF;
        char upper[64], sub[80];
        struct stat st;
        int q;

        q = upper_name(r->gen, upper, sizeof(upper));
        if (q < 0)
                return q;
        /* A sandbox with a disk image: its data/ is not mounted here; a
         * marker says when a snapshot was interrupted. */
        if (r->disk_limit != 0)
                (void)snprintf(sub, sizeof(sub), "%s", SNAPSHOT_PENDING);
        else
                (void)snprintf(sub, sizeof(sub), "data/%s", upper);
        q = store_sandbox_path(s, r->name, sub, &path);
        if (q < 0)
                return q;
        if ((lstat(path, &st) == 0) == (r->disk_limit == 0))
                return 0;
        if (!locked) {
                _cleanup_free_ char *lockp = NULL;

                q = store_sandbox_path(s, r->name, "lock", &lockp);
                if (q < 0)
                        return q;
                fd = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
                if (fd < 0)
                        return negative_errno();
                if (flock(fd, LOCK_EX | LOCK_NB) < 0)
                        return errno == EWOULDBLOCK ? -EBUSY : negative_errno();
        }
        return sandbox_recover(s, r);
}

static int sandbox_load_name(Store *s, const char *name, bool locked, SandboxRecord **ret) {
        _cleanup_free_ char *path = NULL;
        _cleanup_(sandbox_record_freep) SandboxRecord *r = NULL;
        json_t *j = NULL;
        int q;

        q = store_sandbox_path(s, name, "sandbox.json", &path);
        if (q < 0)
                return q;
        q = record_load_file(path, &j);
        if (q < 0)
                return q;
        q = sandbox_record_parse(j, &r);
        json_decref(j);
        if (q < 0)
                return q;
        if (strcmp(r->name, name) != 0)
                return -EBADMSG;
        q = sandbox_recover_locked(s, r, locked);
        if (q < 0)
                return q == -ENOENT ? -EUCLEAN : q;
        *ret = TAKE_PTR(r);
        return 0;
}

static int sandbox_load(Store *s, const char *name_or_id, bool locked, SandboxRecord **ret,
                        HutchError *reterr) {
        _cleanup_strv_free_ char **names = NULL;
        int r;

        if (store_name_is_valid(name_or_id)) {
                r = sandbox_load_name(s, name_or_id, locked, ret);
                if (r >= 0)
                        return 0;
                if (r == -EBUSY)
                        return hutch_error_set(reterr, EBUSY,
                                               "sandbox '%s' is busy (a snapshot of it is being "
                                               "made); try again",
                                               name_or_id);
                if (r == -EUCLEAN)
                        return hutch_error_set(reterr, EUCLEAN,
                                               "sandbox '%s' has lost its layer (an interrupted "
                                               "snapshot could not be undone)",
                                               name_or_id);
                if (r != -ENOENT)
                        return hutch_error_set(reterr, -r, "cannot read sandbox '%s': %s",
                                               name_or_id, strerror(-r));
        } else if (!is_id(name_or_id))
                return hutch_error_set(reterr, EINVAL,
                                       "invalid sandbox name '%s': it must match "
                                       "[a-z0-9][a-z0-9_.-]{0,62}",
                                       name_or_id);
        if (is_id(name_or_id) && store_list(s, "sandboxes", &names) >= 0)
                STRV_FOREACH(n, names) {
                        _cleanup_(sandbox_record_freep) SandboxRecord *c = NULL;

                        if (sandbox_load_name(s, *n, false, &c) >= 0 &&
                            strcmp(c->id, name_or_id) == 0) {
                                *ret = TAKE_PTR(c);
                                return 0;
                        }
                }
        return hutch_error_set(reterr, ENOENT, "no sandbox named '%s'", name_or_id);
}

int store_sandbox_load(Store *s, const char *name_or_id, SandboxRecord **ret, HutchError *reterr) {
        return sandbox_load(s, name_or_id, false, ret, reterr);
}

int store_open_sandbox(Store **ret_store, const char *name_or_id, SandboxRecord **ret,
                       HutchError *reterr) {
        _cleanup_(store_freep) Store *s = NULL;
        int r;

        r = store_open(&s, reterr);
        if (r < 0)
                return r;
        r = store_sandbox_load(s, name_or_id, ret, reterr);
        if (r < 0)
                return r;
        *ret_store = TAKE_PTR(s);
        return 0;
}

int store_sandbox_load_locked(Store *s, const char *name, SandboxRecord **ret, HutchError *reterr) {
        return sandbox_load(s, name, true, ret, reterr);
}

/* ---- snapshots ---- */

int store_snapshot_begin(const Store *s, char **ret_tmp, HutchError *reterr) {
        _cleanup_free_ char *id = NULL, *tmp = NULL;
        int r;

        r = store_new_id(&id);
        if (r < 0)
                return r;
        if (asprintf(&tmp, "%s/snapshots/.tmp-%s", s->home, id) < 0)
                return -ENOMEM;
        if (mkdir(tmp, 0700) < 0)
                return hutch_error_set(reterr, errno, "cannot create %s: %m", tmp);
        *ret_tmp = TAKE_PTR(tmp);
        return 0;
}

static int snapshot_write_record(const char *dir, const SnapshotRecord *r) {
        _cleanup_free_ char *text = NULL;
        int q;

        q = snapshot_record_to_json(r, &text);
        if (q < 0)
                return q;
        return write_file_atomic(dir, "snapshot.json", text, strlen(text));
}

int store_snapshot_commit(const Store *s, const char *tmp, const SnapshotRecord *r,
                          HutchError *reterr) {
        _cleanup_free_ char *final = NULL;
        struct stat st;
        int q;

        q = store_snapshot_path(s, r->name, NULL, &final);
        if (q < 0)
                return q;
        q = snapshot_write_record(tmp, r);
        if (q < 0)
                return hutch_error_set(reterr, -q, "cannot write the snapshot record: %s",
                                       strerror(-q));
        if (lstat(final, &st) == 0)
                return hutch_error_set(reterr, EEXIST, "a snapshot named '%s' already exists",
                                       r->name);
        if (rename(tmp, final) < 0)
                return hutch_error_set(reterr, errno, "cannot create %s: %m", final);
        return 0;
}

int store_file_copy(const char *from, const char *to_dir, const char *name) {
        _cleanup_free_ char *tmp = NULL, *path = NULL;
        _cleanup_close_ int in = -EBADF, out = -EBADF;
        char buf[65536];
        ssize_t n;
        int r = 0;

        in = open(from, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (in < 0)
                return negative_errno();
        if (asprintf(&tmp, "%s/.%s.tmp", to_dir, name) < 0 ||
            asprintf(&path, "%s/%s", to_dir, name) < 0)
                return -ENOMEM;
        out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (out < 0)
                return negative_errno();
        while (r >= 0 && (n = read(in, buf, sizeof(buf))) != 0)
                r = n < 0 ? negative_errno() : loop_write(out, buf, (size_t)n);
        if (r >= 0 && fsync(out) < 0)
                r = negative_errno();
        if (r >= 0 && rename(tmp, path) < 0)
                r = negative_errno();
        if (r < 0)
                (void)unlink(tmp);
        return r;
}

static int copy_manifest(const Store *s, const char *sandbox, const char *to_dir) {
        _cleanup_free_ char *from = NULL;
        int r;

        r = store_sandbox_path(s, sandbox, "ws-manifest", &from);
        if (r < 0)
                return r;
        r = store_file_copy(from, to_dir, "ws-manifest");
        if (r == -ENOENT)
                return 0;
        return r < 0 ? r : 1;
}

static int snapshot_record_for(const SandboxRecord *sb, const char *snap, const char *upper,
                               SnapshotRecord *ret) {
        int r;

        *ret = (SnapshotRecord){
                .name = strdup(snap),
                .created_ms = time_realtime_ms(),
                .parent = sb->parent ? strdup(sb->parent) : NULL,
                .policy_json = strdup(sb->policy_json),
                .origin = strdup(sb->name),
                .origin_upper = upper ? strdup(upper) : NULL,
        };
        r = store_new_id(&ret->id);
        if (r < 0)
                return r;
        r = strv_extend(&ret->layers, "layer");
        if (r < 0)
                return r;
        if (!ret->name || !ret->policy_json || !ret->origin || (sb->parent && !ret->parent) ||
            (upper && !ret->origin_upper))
                return -ENOMEM;
        return 0;
}

/* The record of a new snapshot of @r and its temp folder, holding a copy
 * of the sandbox's workspace record. */
static int snapshot_prepare(const Store *s, const SandboxRecord *r, const char *snap,
                            const char *upper, SnapshotRecord *rec, char **ret_tmp,
                            HutchError *reterr) {
        _cleanup_free_ char *tmp = NULL;
        int q;

        q = snapshot_record_for(r, snap, upper, rec);
        if (q < 0)
                return q;
        q = store_snapshot_begin(s, &tmp, reterr);
        if (q < 0)
                return q;
        q = copy_manifest(s, r->name, tmp);
        if (q < 0) {
                (void)store_rm_rf(s, AT_FDCWD, tmp);
                return hutch_error_set(reterr, -q, "failed to snapshot '%s': %s", r->name,
                                       strerror(-q));
        }
        rec->has_manifest = q > 0;
        *ret_tmp = TAKE_PTR(tmp);
        return 0;
}

static int layer_copy_path(const char *from, const char *to, HutchError *reterr);

int store_snapshot_stopped(Store *s, SandboxRecord *r, const char *snap, HutchError *reterr) {
        _cleanup_(snapshot_record_clear) SnapshotRecord rec = {};
        _cleanup_free_ char *tmp = NULL, *data = NULL, *from = NULL, *to = NULL, *final = NULL,
                            *pending = NULL;
        _cleanup_close_ int dfd = -EBADF, lock = -EBADF;
        char upper[64], next[64];
        struct stat st;
        int q;

        q = store_lock_all(s, &lock);
        if (q < 0)
                return hutch_error_set(reterr, -q, "cannot lock the store: %s", strerror(-q));
        q = store_snapshot_path(s, snap, NULL, &final);
        if (q < 0)
                return q;
        if (lstat(final, &st) == 0)
                return hutch_error_set(reterr, EEXIST, "a snapshot named '%s' already exists",
                                       snap);
        if (upper_name(r->gen, upper, sizeof(upper)) < 0 ||
            upper_name(r->gen + 1, next, sizeof(next)) < 0)
                return -ENAMETOOLONG;
        if (r->disk_limit != 0) {
                q = store_sandbox_path(s, r->name, SNAPSHOT_PENDING, &pending);
                if (q < 0)
                        return q;
                _cleanup_close_ int fd = -EBADF;

                fd = open(pending, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
                if (fd < 0 || fsync(fd) < 0)
                        return hutch_error_set(reterr, errno, "cannot create %s: %m", pending);
        }
        q = snapshot_prepare(s, r, snap, upper, &rec, &tmp, reterr);
        if (q < 0)
                goto fail;
        /* 1. the record in the temp folder (it names the layer's origin,
         *    which is what recovery goes by); */
        q = snapshot_write_record(tmp, &rec);
        if (q < 0)
                goto fail;
        crash_point("snapshot-1");
        /* 2. the sandbox's next, empty layer; */
        q = store_sandbox_data_path(s, r, NULL, &data);
        if (q < 0)
                goto fail;
        dfd = open(data, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) {
                q = negative_errno();
                goto fail;
        }
        q = make_layer_dirs(s, dfd, next);
        if (q < 0)
                goto fail;
        crash_point("snapshot-2");
        /* 3. the layer moves (a rename: O(1) whatever its size), or, out
         *    of a disk image (another file system), is copied; */
        if (asprintf(&from, "%s/%s", data, upper) < 0 || asprintf(&to, "%s/layer", tmp) < 0) {
                q = -ENOMEM;
                goto fail;
        }
        if (r->disk_limit != 0)
                q = layer_copy_path(from, to, reterr);
        else if (rename(from, to) < 0)
                q = negative_errno();
        if (q < 0)
                goto fail;
        crash_point("snapshot-3");
        /* 4. the snapshot appears (the commit point); */
        if (rename(tmp, final) < 0) {
                q = negative_errno();
                if (r->disk_limit == 0)
                        (void)rename(to, from);
                goto fail;
        }
        crash_point("snapshot-4");
        /* 5. the sandbox continues from it. A crash between 4 and 5 is
         *    rolled forward by the next load; with a disk image the
         *    sandbox then stays on its layer (the snapshot is a copy of
         *    it), and its keeper removes the unused one. */
        free(r->parent);
        r->parent = strdup(snap);
        if (!r->parent)
                return -ENOMEM;
        r->gen++;
        q = store_sandbox_save(s, r, reterr);
        if (q < 0)
                return q;
        /* 6. a copied layer is left behind in the image: it goes. The
         *    commit made now, while the image is mounted (with discard),
         *    gives its blocks back to the host; left to the unmount, it
         *    does not always (`hutch ls` would count them). */
        if (r->disk_limit != 0) {
                (void)store_rm_rf(s, dfd, upper);
                (void)syncfs(dfd);
                (void)unlink(pending);
        }
        return 0;
fail:
        if (tmp)
                (void)store_rm_rf(s, AT_FDCWD, tmp);
        if (r->disk_limit != 0 && dfd >= 0)
                (void)store_rm_rf(s, dfd, next);
        if (pending)
                (void)unlink(pending);
        if (reterr && reterr->errnum != 0)
                return q;
        return hutch_error_set(reterr, -q, "failed to snapshot '%s': %s", r->name, strerror(-q));
}

/* layer_copy() of the folder @from into the new folder @to. */
static int layer_copy_path(const char *from, const char *to, HutchError *reterr) {
        _cleanup_close_ int src = -EBADF, dst = -EBADF;

        src = open(from, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (src < 0)
                return negative_errno();
        if (mkdir(to, 0755) < 0)
                return negative_errno();
        dst = open(to, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dst < 0)
                return negative_errno();
        return layer_copy(src, dst, reterr);
}

typedef struct CopyArgs {
        StoreCopyFn fn;
        int src, dst;
} CopyArgs;

static int copy_in_range(void *userdata, HutchError *reterr) {
        const CopyArgs *a = userdata;

        return a->fn(a->src, a->dst, reterr);
}

int store_snapshot_copy(Store *s, const SandboxRecord *r, const char *snap, StoreCopyFn copy_layer,
                        HutchError *reterr) {
        _cleanup_(snapshot_record_clear) SnapshotRecord rec = {};
        _cleanup_free_ char *tmp = NULL, *from = NULL;
        _cleanup_close_ int src = -EBADF, dst = -EBADF, lock = -EBADF;
        char upper[64], sub[80];
        int q;

        q = store_lock_all(s, &lock);
        if (q < 0)
                return hutch_error_set(reterr, -q, "cannot lock the store: %s", strerror(-q));
        if (upper_name(r->gen, upper, sizeof(upper)) < 0)
                return -ENAMETOOLONG;
        q = snapshot_prepare(s, r, snap, NULL, &rec, &tmp, reterr);
        if (q < 0)
                return q;
        (void)snprintf(sub, sizeof(sub), "data/%s", upper);
        q = store_sandbox_data_path(s, r, sub, &from);
        if (q < 0)
                goto fail;
        src = open(from, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (src < 0) {
                q = negative_errno();
                goto fail;
        }
        {
                _cleanup_close_ int tfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

                if (tfd < 0 || mkdirat(tfd, "layer", 0755) < 0) {
                        q = negative_errno();
                        goto fail;
                }
                dst = openat(tfd, "layer", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (dst < 0) {
                        q = negative_errno();
                        goto fail;
                }
                if (s->idmap.privileged && fchown(dst, s->idmap.uid_base, s->idmap.gid_base) < 0) {
                        q = negative_errno();
                        goto fail;
                }
        }
        /* With the ranged map the layer holds files of the user's sub-ids:
         * read and chowned to them in the store's user namespace. */
        if (s->idmap.ranged)
                q = userns_run_ranged(&s->idmap, copy_in_range, &(CopyArgs){copy_layer, src, dst},
                                      reterr);
        else
                q = copy_layer(src, dst, reterr);
        if (q < 0) {
                (void)store_rm_rf(s, AT_FDCWD, tmp);
                return q;
        }
        crash_point("copy-1");
        q = store_snapshot_commit(s, tmp, &rec, reterr);
        if (q < 0) {
                (void)store_rm_rf(s, AT_FDCWD, tmp);
                return q;
        }
        return 0;
fail:
        (void)store_rm_rf(s, AT_FDCWD, tmp);
        return hutch_error_set(reterr, -q, "failed to snapshot '%s': %s", r->name, strerror(-q));
}

int store_sandbox_reset(Store *s, SandboxRecord *r, const char *snap, size_t max_layers,
                        HutchError *reterr) {
        _cleanup_(snapshot_record_freep) SnapshotRecord *target = NULL;
        _cleanup_strv_free_ char **chain = NULL;
        _cleanup_free_ char *data = NULL, *parent = NULL;
        _cleanup_close_ int dfd = -EBADF, lock = -EBADF;
        char upper[64], next[64];
        SandboxRecord moved;
        int q;

        q = store_lock_all(s, &lock);
        if (q < 0)
                return hutch_error_set(reterr, -q, "cannot lock the store: %s", strerror(-q));
        q = store_snapshot_load(s, snap, &target, reterr);
        if (q < 0)
                return q;
        q = store_snapshot_chain(s, target->name, max_layers, &chain, reterr);
        if (q < 0)
                return q;
        if (upper_name(r->gen, upper, sizeof(upper)) < 0 ||
            upper_name(r->gen + 1, next, sizeof(next)) < 0)
                return -ENAMETOOLONG;
        parent = strdup(target->name);
        if (!parent)
                return -ENOMEM;
        q = store_sandbox_data_path(s, r, NULL, &data);
        if (q < 0)
                return q;
        dfd = open(data, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return hutch_error_set(reterr, errno, "cannot open %s: %m", data);
        /* 1. the new, empty layer (an interrupted earlier reset may have
         *    left it: it is empty then too, or gc's to remove); */
        (void)store_rm_rf(s, dfd, next);
        q = make_layer_dirs(s, dfd, next);
        if (q < 0)
                return hutch_error_set(reterr, -q, "cannot create the sandbox's new layer: %s",
                                       strerror(-q));
        crash_point("reset-1");
        /* 2. the record: from now on the sandbox is the snapshot's; */
        moved = *r;
        moved.parent = parent;
        moved.gen = r->gen + 1;
        q = store_sandbox_save(s, &moved, reterr);
        if (q < 0) {
                (void)store_rm_rf(s, dfd, next);
                return q;
        }
        crash_point("reset-2");
        free(r->parent);
        r->parent = TAKE_PTR(parent);
        r->gen++;
        /* 3. its old layer goes (what is left, `hutch gc` removes); in a
         *    disk image, committed while it is mounted (step 6 of
         *    store_snapshot_stopped() says why). */
        (void)store_rm_rf(s, dfd, upper);
        if (r->disk_limit != 0)
                (void)syncfs(dfd);
        return 0;
}

int store_snapshot_dependent(const Store *s, const char *name, char **ret) {
        _cleanup_strv_free_ char **sbs = NULL, **snaps = NULL;
        int r;

        *ret = NULL;
        r = store_list(s, "sandboxes", &sbs);
        if (r < 0)
                return r;
        STRV_FOREACH(n, sbs) {
                _cleanup_free_ char *path = NULL;
                json_t *j = NULL;
                const char *p;

                if (store_sandbox_path(s, *n, "sandbox.json", &path) < 0 ||
                    record_load_file(path, &j) < 0)
                        continue;
                p = json_string_value(json_object_get(j, "parent"));
                if (p && strcmp(p, name) == 0) {
                        json_decref(j);
                        return asprintf(ret, "sandbox '%s'", *n) < 0 ? -ENOMEM : 1;
                }
                json_decref(j);
        }
        r = store_list(s, "snapshots", &snaps);
        if (r < 0)
                return r;
        STRV_FOREACH(n, snaps) {
                _cleanup_(snapshot_record_freep) SnapshotRecord *c = NULL;

                if (store_snapshot_load(s, *n, &c, NULL) >= 0 && c->parent &&
                    strcmp(c->parent, name) == 0)
                        return asprintf(ret, "snapshot '%s'", *n) < 0 ? -ENOMEM : 1;
        }
        return 0;
}

int store_snapshot_remove(const Store *s, const char *name, HutchError *reterr) {
        _cleanup_free_ char *dir = NULL, *trash = NULL, *id = NULL, *dep = NULL;
        _cleanup_close_ int lock = -EBADF;
        int r;

        r = store_lock_all(s, &lock);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot lock the store: %s", strerror(-r));
        r = store_snapshot_dependent(s, name, &dep);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot list the store: %s", strerror(-r));
        if (r > 0)
                return hutch_error_set(reterr, EBUSY,
                                       "snapshot '%s' is used by %s; remove that first", name, dep);
        r = store_new_id(&id);
        if (r < 0)
                return r;
        if (store_snapshot_path(s, name, NULL, &dir) < 0 ||
            asprintf(&trash, "%s/snapshots/.tmp-rm-%s", s->home, id) < 0)
                return -ENOMEM;
        if (rename(dir, trash) < 0)
                return hutch_error_set(reterr, errno, "cannot remove %s: %m", dir);
        r = store_rm_rf(s, AT_FDCWD, trash);
        if (r < 0)
                return hutch_error_set(reterr, -r, "removed '%s', but %s is left (hutch gc): %s",
                                       name, trash, strerror(-r));
        return 0;
}

/* ---- gc ---- */

int store_temp_hold(const char *tmp, int *ret_fd, HutchError *reterr) {
        _cleanup_close_ int fd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        /* A flock on the folder itself: nothing is added to it. */
        if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0)
                return hutch_error_set(reterr, errno, "cannot hold %s: %m", tmp);
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* Whether someone holds the temp folder @name of @dfd (store_temp_hold()). */
static bool temp_held(int dfd, const char *name) {
        _cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        if (fd < 0)
                return false;
        return flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
}

static int gc_temp(const Store *s, const char *dir, unsigned *n) {
        _cleanup_(closedirp) DIR *d = opendir(dir);
        struct dirent *de;

        if (!d)
                return negative_errno();
        while ((de = readdir(d)))
                if (strncmp(de->d_name, ".tmp-", 5) == 0 && !temp_held(dirfd(d), de->d_name) &&
                    store_rm_rf(s, dirfd(d), de->d_name) >= 0)
                        (*n)++;
        return 0;
}

int store_gc(Store *s, unsigned *ret_removed, HutchError *reterr) {
        _cleanup_strv_free_ char **sbs = NULL, **live = NULL;
        bool all_known = true;
        _cleanup_free_ char *dir = NULL;
        _cleanup_close_ int lock = -EBADF;
        unsigned n = 0;
        int r;

        r = store_lock_all(s, &lock);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot lock the store: %s", strerror(-r));
        r = store_list(s, "sandboxes", &sbs);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot list the store: %s", strerror(-r));
        /* Each sandbox first (recovery may need a temp snapshot folder). */
        STRV_FOREACH(name, sbs) {
                _cleanup_(sandbox_record_freep) SandboxRecord *rec = NULL;
                _cleanup_close_ int sl = -EBADF;
                _cleanup_free_ char *data = NULL;
                _cleanup_(closedirp) DIR *d = NULL;
                struct dirent *de;
                char upper[64];

                if (store_lock_sandbox(s, *name, &sl) < 0 ||
                    sandbox_load_name(s, *name, true, &rec) < 0) {
                        all_known = false;
                        continue;
                }
                if (strv_extend(&live, rec->id) < 0)
                        return -ENOMEM;
                if (upper_name(rec->gen, upper, sizeof(upper)) < 0 ||
                    store_sandbox_path(s, *name, "data", &data) < 0)
                        continue;
                d = opendir(data);
                while (d && (de = readdir(d)))
                        if (strncmp(de->d_name, "upper-", 6) == 0 &&
                            strcmp(de->d_name, upper) != 0 &&
                            store_rm_rf(s, dirfd(d), de->d_name) >= 0)
                                n++;
                if (!store_keeper_running(s, *name)) {
                        _cleanup_free_ char *state = NULL;

                        if (store_state_path(s, *name, NULL, &state) >= 0 &&
                            access(state, F_OK) == 0 && store_rm_rf(s, AT_FDCWD, state) >= 0)
                                n++;
                }
        }
        if (asprintf(&dir, "%s/snapshots", s->home) < 0)
                return -ENOMEM;
        (void)gc_temp(s, dir, &n);
        free(dir);
        if (asprintf(&dir, "%s/sandboxes", s->home) < 0) {
                dir = NULL;
                return -ENOMEM;
        }
        (void)gc_temp(s, dir, &n);
        /* The disk templates (disk_template()): a cache that the next
         * create of a size makes again; the store's lock keeps creates,
         * which copy them, out meanwhile. */
        free(dir);
        if (asprintf(&dir, "%s/disk-templates", s->home) < 0) {
                dir = NULL;
                return -ENOMEM;
        }
        {
                _cleanup_(closedirp) DIR *d = opendir(dir);
                struct dirent *de;

                while (d && (de = readdir(d)))
                        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 &&
                            store_rm_rf(s, dirfd(d), de->d_name) >= 0)
                                n++;
        }
        /* Ranges of the id pool held for this store's sandboxes that are
         * gone (an rm that was interrupted). SECURITY: only when every
         * sandbox's record was read: a range of one that could not be
         * read may be in use. The store's lock keeps creates out. */
        if (s->idmap.privileged && all_known) {
                _cleanup_free_ char *home = NULL;

                if (pool_home(s, &home) >= 0) {
                        r = id_pool_sweep(home, live);
                        if (r > 0)
                                n += (unsigned)r;
                }
        }
        *ret_removed = n;
        return 0;
}

static uint64_t usage_at(int dfd, unsigned depth) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        uint64_t sum = 0;

        if (depth > RM_RF_MAX_DEPTH) {
                (void)close(dfd);
                return 0;
        }
        d = fdopendir(dfd);
        if (!d) {
                (void)close(dfd);
                return 0;
        }
        while ((de = readdir(d))) {
                struct stat st;

                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                sum += (uint64_t)st.st_blocks * 512U;
                if (S_ISDIR(st.st_mode)) {
                        int fd = openat(dirfd(d), de->d_name,
                                        O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

                        if (fd >= 0)
                                sum += usage_at(fd, depth + 1);
                }
        }
        return sum;
}

uint64_t store_disk_usage(const char *path) {
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        return fd < 0 ? 0 : usage_at(fd, 0);
}
