/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The table of E2B sandboxes (e2b-internal.h): records on disk shared by
 * the server's forks, the lookups envd makes, lifetimes. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "api/hutch-ext.h"
#include "base64.h"
#include "e2b-internal.h"
#include "fd-util.h"
#include "log.h"
#include "serve-util.h"
#include "time-util.h"

#define RECORD_MAX (1U << 20)
/* How long a kill's end waits for the keeper's exit on its pidfd before
 * hutch_destroy() takes over (its own wait is the judge). */
#define E2B_KEEPER_EXIT_WAIT_MS 10000

static int random_fill(void *p, size_t n) {
        ssize_t k = getrandom(p, n, 0);

        if (k < 0)
                return negative_errno();
        return (size_t)k == n ? 0 : -EIO;
}

int e2b_id_new(char ret[E2B_ID_LEN + 1]) {
        static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
        uint8_t raw[E2B_ID_LEN];
        int r;

        r = random_fill(raw, sizeof(raw));
        if (r < 0)
                return r;
        /* 252 = 7 * 36: no bias from the modulo. */
        for (size_t i = 0; i < E2B_ID_LEN; i++) {
                while (raw[i] >= 252) {
                        r = random_fill(&raw[i], 1);
                        if (r < 0)
                                return r;
                }
                ret[i] = alphabet[raw[i] % 36];
        }
        ret[E2B_ID_LEN] = '\0';
        return 0;
}

int e2b_token_new(char ret[E2B_TOKEN_LEN + 1]) {
        static const char alphabet[] =
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        uint8_t raw[E2B_TOKEN_LEN];
        int r;

        /* 43 characters of 64: 258 bits. */
        r = random_fill(raw, sizeof(raw));
        if (r < 0)
                return r;
        for (size_t i = 0; i < E2B_TOKEN_LEN; i++)
                ret[i] = alphabet[raw[i] & 63];
        ret[E2B_TOKEN_LEN] = '\0';
        return 0;
}

int e2b_table_open(E2bServer *srv) {
        _cleanup_(hutch_ext_store_paths_done) HutchExtStorePaths store = {};
        _cleanup_free_ char *lock_path = NULL;
        HutchError err = {};
        int r;

        srv->table_lock = -EBADF;
        r = hutch_ext_store_paths(&store, &err);
        if (r < 0) {
                log_error("%s", err.msg[0] ? err.msg : strerror(-r));
                return r;
        }
        if (asprintf(&srv->table_dir, "%s/e2b", store.home) < 0) {
                srv->table_dir = NULL;
                return log_error_errno(-ENOMEM, "out of memory");
        }
        if (mkdir(srv->table_dir, 0700) < 0 && errno != EEXIST)
                return log_error_errno(negative_errno(), "cannot create '%s': %m", srv->table_dir);
        if (asprintf(&lock_path, "%s/server.lock", srv->table_dir) < 0) {
                lock_path = NULL;
                return log_error_errno(-ENOMEM, "out of memory");
        }
        srv->table_lock = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (srv->table_lock < 0)
                return log_error_errno(negative_errno(), "cannot open '%s': %m", lock_path);
        if (flock(srv->table_lock, LOCK_EX | LOCK_NB) < 0)
                return log_error_errno(-EBUSY, "another hutch serve --e2b serves this store ('%s')",
                                       srv->table_dir);
        return 0;
}

void e2b_table_close(E2bServer *srv) {
        if (srv->table_lock >= 0)
                (void)close(srv->table_lock);
        srv->table_lock = -EBADF;
}

int e2b_table_lock(const E2bServer *srv, const char *id) {
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -EBADF;

        if (!e2b_id_is_valid(id))
                return -ENOENT;
        if (asprintf(&path, "%s/%s.lock", srv->table_dir, id) < 0) {
                path = NULL;
                return -ENOMEM;
        }
        for (;;) {
                struct stat a, b;

                fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
                if (fd < 0)
                        return negative_errno();
                while (flock(fd, LOCK_EX) < 0)
                        if (errno != EINTR)
                                return negative_errno();
                /* The holder before us may have removed the lock file
                 * (e2b_table_remove()): a lock on that file is no lock,
                 * since the next opener makes a new one. Again on the file
                 * the name holds now. */
                if (fstat(fd, &a) < 0)
                        return negative_errno();
                if (stat(path, &b) < 0) {
                        if (errno != ENOENT)
                                return negative_errno();
                } else if (a.st_dev == b.st_dev && a.st_ino == b.st_ino)
                        return TAKE_FD(fd);
                fd = safe_close(fd);
        }
}

int e2b_table_load(const E2bServer *srv, const char *id, json_t **ret) {
        _cleanup_free_ char *path = NULL, *text = NULL;
        json_t *rec;
        int r;

        if (!e2b_id_is_valid(id))
                return -ENOENT;
        if (asprintf(&path, "%s/%s.json", srv->table_dir, id) < 0) {
                path = NULL;
                return -ENOMEM;
        }
        r = read_full_file(path, RECORD_MAX, &text);
        if (r < 0)
                return r;
        rec = json_loads(text, 0, NULL);
        if (!json_is_object(rec)) {
                json_decref(rec);
                return -EBADMSG;
        }
        *ret = rec;
        return 0;
}

int e2b_table_save(const E2bServer *srv, json_t *rec) {
        _cleanup_free_ char *text = json_dumps(rec, JSON_COMPACT), *name = NULL;
        const char *id = json_string_value(json_object_get(rec, "sandboxID"));

        if (!text || !id || asprintf(&name, "%s.json", id) < 0)
                return -ENOMEM;
        return write_file_atomic(srv->table_dir, name, text, strlen(text));
}

int e2b_table_save_volatile(const E2bServer *srv, json_t *rec) {
        _cleanup_free_ char *text = json_dumps(rec, JSON_COMPACT), *name = NULL;
        const char *id = json_string_value(json_object_get(rec, "sandboxID"));

        if (!text || !id || asprintf(&name, "%s.json", id) < 0)
                return -ENOMEM;
        return write_file_replace(srv->table_dir, name, text, strlen(text));
}

void e2b_table_remove(const E2bServer *srv, const char *id) {
        _cleanup_free_ char *json = NULL, *lock = NULL;

        if (asprintf(&json, "%s/%s.json", srv->table_dir, id) >= 0)
                (void)unlink(json);
        else
                json = NULL;
        e2b_rules_remove(srv, id);
        if (asprintf(&lock, "%s/%s.lock", srv->table_dir, id) >= 0)
                (void)unlink(lock);
        else
                lock = NULL;
}

/* Whether @name is a record's file name in the table ("<id>.json"), its
 * id into @id. */
static bool record_id(const char *name, char id[E2B_ID_LEN + 1]) {
        if (strlen(name) != E2B_ID_LEN + 5 || strcmp(name + E2B_ID_LEN, ".json") != 0)
                return false;
        memcpy(id, name, E2B_ID_LEN);
        id[E2B_ID_LEN] = '\0';
        return true;
}

int e2b_table_list(const E2bServer *srv, json_t **ret) {
        _cleanup_(closedirp) DIR *d = opendir(srv->table_dir);
        json_t *arr = json_array();
        struct dirent *de;

        if (!arr)
                return -ENOMEM;
        if (!d) {
                json_decref(arr);
                return negative_errno();
        }
        while ((de = readdir(d))) {
                char id[E2B_ID_LEN + 1];
                json_t *rec;

                if (!record_id(de->d_name, id))
                        continue;
                if (e2b_table_load(srv, id, &rec) < 0)
                        continue;
                if (json_array_append_new(arr, rec) < 0) {
                        json_decref(arr);
                        return -ENOMEM;
                }
        }
        *ret = arr;
        return 0;
}

/* @herr (the core's, from a call that returned @r < 0) as @err, the
 * public form; nothing without @err. */
static void error_from(hutch_error *err, const HutchError *herr, int r) {
        if (!err)
                return;
        *err = (hutch_error){.code = herr->errnum > 0 ? herr->errnum : -r};
        (void)snprintf(err->message, sizeof(err->message), "%s",
                       herr->msg[0] ? herr->msg : strerror(-r));
}

static const char *rec_str(json_t *rec, const char *key) {
        return json_string_value(json_object_get(rec, key));
}

static int ref_from(json_t *rec, E2bSandboxRef *out) {
        const char *id = rec_str(rec, "sandboxID"), *name = rec_str(rec, "name"),
                   *state = rec_str(rec, "state");

        if (!id || !name || !state || strlen(id) != E2B_ID_LEN || strlen(name) >= sizeof(out->name))
                return -EBADMSG;
        /* A sandbox being created is not there yet; one being killed
         * is gone. */
        if (strcmp(state, "creating") == 0 || strcmp(state, "killing") == 0)
                return -ENOENT;
        memcpy(out->id, id, E2B_ID_LEN + 1);
        strcpy(out->name, name);
        out->paused = strcmp(state, "paused") == 0;
        return 0;
}

int e2b_sandbox_find(const E2bServer *srv, const char *id, E2bSandboxRef *out) {
        json_t *rec = NULL;
        int r;

        r = e2b_table_load(srv, id, &rec);
        if (r < 0)
                return r == -EBADMSG ? -ENOENT : r;
        r = ref_from(rec, out);
        json_decref(rec);
        return r;
}

/* Constant-time equality of two strings (of any lengths): SHA-256 of both
 * first, as serve_token_check() does. */
static bool secret_equal(const char *a, const char *b) {
        uint8_t ha[32], hb[32];
        unsigned n = 0;

        if (EVP_Digest(a, strlen(a), ha, &n, EVP_sha256(), NULL) != 1 ||
            EVP_Digest(b, strlen(b), hb, &n, EVP_sha256(), NULL) != 1)
                return false;
        return CRYPTO_memcmp(ha, hb, sizeof(ha)) == 0;
}

int e2b_sandbox_lookup(const E2bServer *srv, const char *sandbox_id, const char *access_token,
                       E2bSandboxRef *out) {
        json_t *rec = NULL;
        const char *token;
        E2bSandboxRef ref;
        int r;

        if (!sandbox_id)
                return -ENOENT;
        r = e2b_table_load(srv, sandbox_id, &rec);
        if (r < 0)
                return r == -EBADMSG ? -ENOENT : r;
        r = ref_from(rec, &ref);
        token = rec_str(rec, "accessToken");
        /* SECURITY: a secure sandbox's envd needs its token. */
        if (r >= 0 && token && (!access_token || !secret_equal(token, access_token)))
                r = -EACCES;
        json_decref(rec);
        if (r < 0)
                return r;
        if (ref.paused)
                return -EAGAIN;
        *out = ref;
        return 0;
}

int e2b_sandbox_lookup_signature(const E2bServer *srv, const char *path, const char *operation,
                                 const char *user, const char *signature, uint64_t expiration,
                                 E2bSandboxRef *out) {
        json_t *all = NULL, *rec;
        size_t i;
        int r, found = -EACCES;

        if (!path || !operation || !signature)
                return -EACCES;
        if (expiration > 0 && expiration * 1000 < time_realtime_ms())
                return -EACCES;
        r = e2b_table_list(srv, &all);
        if (r < 0)
                return r;
        json_array_foreach(all, i, rec) {
                _cleanup_free_ char *raw = NULL, *b64 = NULL, *want = NULL;
                const char *token = rec_str(rec, "accessToken");
                uint8_t digest[32];
                unsigned n = 0;
                size_t len;
                E2bSandboxRef ref;
                int k;

                if (!token)
                        continue;
                k = expiration > 0
                            ? asprintf(&raw, "%s:%s:%s:%s:%llu", path, operation, user ? user : "",
                                       token, (unsigned long long)expiration)
                            : asprintf(&raw, "%s:%s:%s:%s", path, operation, user ? user : "",
                                       token);
                if (k < 0) {
                        raw = NULL;
                        found = -ENOMEM;
                        break;
                }
                if (EVP_Digest(raw, (size_t)k, digest, &n, EVP_sha256(), NULL) != 1 ||
                    base64_encode(digest, sizeof(digest), &b64) < 0)
                        continue;
                len = strlen(b64);
                while (len > 0 && b64[len - 1] == '=')
                        b64[--len] = '\0';
                if (asprintf(&want, "v1_%s", b64) < 0) {
                        want = NULL;
                        continue;
                }
                /* SECURITY: compared in constant time, as the token is. */
                if (!secret_equal(want, signature) || ref_from(rec, &ref) < 0)
                        continue;
                found = ref.paused ? -EAGAIN : 0;
                if (found == 0)
                        *out = ref;
                break;
        }
        json_decref(all);
        return found;
}

int e2b_sandbox_kill_begin(const E2bServer *srv, const char *id, int *ret_lock, int *ret_keeper,
                           hutch_error *err) {
        _cleanup_close_ int lock = -EBADF, keeper = -EBADF;
        HutchError herr = {};
        json_t *rec = NULL;
        int r;

        lock = e2b_table_lock(srv, id);
        if (lock < 0)
                return lock;
        r = e2b_table_load(srv, id, &rec);
        if (r < 0) {
                /* Nothing here (or gone meanwhile): no lock file left. */
                e2b_table_remove(srv, id);
                return r == -EBADMSG ? -ENOENT : r;
        }
        /* Answered once its processes are gone: the keeper's exit and
         * its disk image's release are waited for by the removal of its
         * files after the answer (issue 20, docs/e2b.md). */
        r = hutch_ext_halt(rec_str(rec, "name"), &keeper, &herr);
        if (r == -ENOENT)
                r = 0;
        /* SECURITY: its proxy is gone with it: the real values of its
         * rules go before the answer, not with its files after it. */
        if (r >= 0)
                e2b_rules_remove(srv, id);
        if (r < 0)
                error_from(err, &herr, r);
        if (r >= 0 && json_object_set_new(rec, "state", json_string("killing")) < 0)
                r = -ENOMEM;
        /* For the readers until the files are gone (list, health): lost
         * in a crash, the "running" record before it has its sandbox
         * destroyed at the server's next start all the same. */
        if (r >= 0)
                r = e2b_table_save_volatile(srv, rec);
        json_decref(rec);
        if (r < 0)
                return r;
        *ret_lock = TAKE_FD(lock);
        *ret_keeper = TAKE_FD(keeper);
        return 0;
}

int e2b_sandbox_kill_end(const E2bServer *srv, const char *id, int lock, int keeper,
                         hutch_error *err) {
        _cleanup_close_ int held = lock, exiting = keeper;
        json_t *rec = NULL;
        int r;

        /* The keeper's exit, on its pidfd: hutch_destroy() would poll for
         * it. Bounded by hutch_destroy()'s own wait, which stays the
         * judge. */
        if (exiting >= 0)
                (void)poll(&(struct pollfd){.fd = exiting, .events = POLLIN}, 1,
                           E2B_KEEPER_EXIT_WAIT_MS);

        r = e2b_table_load(srv, id, &rec);
        if (r < 0) {
                e2b_table_remove(srv, id);
                return r == -EBADMSG ? -ENOENT : r;
        }
        r = hutch_destroy(rec_str(rec, "name"), err);
        json_decref(rec);
        if (r < 0 && r != -ENOENT)
                return r;
        e2b_table_remove(srv, id);
        return 0;
}

int e2b_sandbox_kill(const E2bServer *srv, const char *id, hutch_error *err) {
        int lock = -EBADF, keeper = -EBADF, r;

        r = e2b_sandbox_kill_begin(srv, id, &lock, &keeper, err);
        if (r < 0)
                return r;
        return e2b_sandbox_kill_end(srv, id, lock, keeper, err);
}

int e2b_sandbox_pause_locked(const E2bServer *srv, json_t *rec, hutch_error *err) {
        const char *name = rec_str(rec, "name");
        HutchError herr = {};
        bool memory;
        int r;

        /* E2B's pause keeps the processes: frozen where the host can
         * (issue 20), else stopped with its files kept, and the record
         * says which (docs/e2b.md "Pause"). */
        r = hutch_ext_pause(name, true, &herr);
        /* Frozen for a snapshot meanwhile (hutch snapshot): not a sandbox
         * that cannot be frozen, so not stopped either; the caller tries
         * again later or answers 409. */
        if (r == -EBUSY) {
                error_from(err, &herr, r);
                return r;
        }
        memory = r >= 0;
        if (!memory) {
                log_info("E2B sandbox '%s' cannot be frozen (%s): stopped, its files kept",
                         rec_str(rec, "sandboxID"), herr.msg[0] ? herr.msg : strerror(-r));
                r = hutch_stop(name, err);
                if (r < 0)
                        return r;
        }
        if (json_object_set_new(rec, "state", json_string("paused")) < 0 ||
            json_object_set_new(rec, "pausedMemory", json_boolean(memory)) < 0)
                return -ENOMEM;
        return e2b_table_save(srv, rec);
}

int e2b_sandbox_unpause_locked(json_t *rec, hutch_error *err) {
        HutchError herr = {};
        int r = 0;

        if (json_is_true(json_object_get(rec, "pausedMemory")))
                r = hutch_ext_pause(rec_str(rec, "name"), false, &herr);
        (void)json_object_del(rec, "pausedMemory");
        /* Stopped meanwhile (its keeper's idle stop, a snapshot): its
         * files are there, its processes start again on demand. */
        if (r == -ENOTCONN)
                r = 0;
        if (r < 0)
                error_from(err, &herr, r);
        return r;
}

static bool rec_expired(json_t *rec, uint64_t now_ms) {
        const char *state = rec_str(rec, "state");
        json_int_t end = json_integer_value(json_object_get(rec, "endAt"));

        return state && strcmp(state, "running") == 0 && end > 0 && (uint64_t)end <= now_ms;
}

bool e2b_table_expired(const E2bServer *srv, uint64_t now_ms) {
        json_t *all = NULL, *rec;
        bool any = false;
        size_t i;

        if (e2b_table_list(srv, &all) < 0)
                return false;
        json_array_foreach(all, i, rec) any = any || rec_expired(rec, now_ms);
        json_decref(all);
        return any;
}

void e2b_table_sweep(const E2bServer *srv, uint64_t now_ms) {
        json_t *all = NULL, *rec;
        size_t i;

        if (e2b_table_list(srv, &all) < 0)
                return;
        json_array_foreach(all, i, rec) {
                const char *id = rec_str(rec, "sandboxID");
                _cleanup_close_ int lock = -EBADF;
                hutch_error err = {};
                json_t *cur = NULL;
                int r;

                if (!rec_expired(rec, now_ms) || !id)
                        continue;
                lock = e2b_table_lock(srv, id);
                if (lock < 0)
                        continue;
                /* Again under the lock: a setTimeout may have come. */
                if (e2b_table_load(srv, id, &cur) < 0)
                        continue;
                if (!rec_expired(cur, time_realtime_ms())) {
                        json_decref(cur);
                        continue;
                }
                if (json_is_true(json_object_get(cur, "autoPause"))) {
                        r = e2b_sandbox_pause_locked(srv, cur, &err);
                        /* Busy (a snapshot's freeze): the next sweep. */
                        if (r >= 0 || r == -EBUSY) {
                                json_decref(cur);
                                continue;
                        }
                        /* The lifetime is a limit: a sandbox that cannot
                         * be paused at its end is killed instead. */
                        log_error("cannot pause E2B sandbox '%s' at its end, killing it: %s", id,
                                  err.message[0] ? err.message : strerror(-r));
                }
                err = (hutch_error){};
                r = hutch_destroy(rec_str(cur, "name"), &err);
                if (r < 0 && r != -ENOENT)
                        log_error("cannot end E2B sandbox '%s': %s", id,
                                  err.message[0] ? err.message : strerror(-r));
                else
                        e2b_table_remove(srv, id);
                json_decref(cur);
        }
        json_decref(all);
}

/* A record that cannot be read: its sandbox goes by the name its create
 * gave it ("e2b-<id>", e2b-control.c), and the record with it. The
 * running and killing states are written without fsync (docs/e2b.md), so
 * after a power loss a record can be empty: its sandbox must not outlive
 * it unseen. */
static void destroy_unreadable(const E2bServer *srv, const char *id) {
        char name[E2B_ID_LEN + 5];
        hutch_error err = {};
        int r;

        (void)snprintf(name, sizeof(name), "e2b-%s", id);
        r = hutch_destroy(name, &err);
        if (r < 0 && r != -ENOENT) {
                log_error("cannot destroy E2B sandbox '%s' (its record is unreadable): %s", id,
                          err.message[0] ? err.message : strerror(-r));
                return;
        }
        e2b_table_remove(srv, id);
}

void e2b_table_destroy_all(const E2bServer *srv) {
        _cleanup_(closedirp) DIR *d = opendir(srv->table_dir);
        struct dirent *de;

        while (d && (de = readdir(d))) {
                char id[E2B_ID_LEN + 1];
                hutch_error err = {};
                json_t *rec = NULL;
                int r;

                if (!record_id(de->d_name, id))
                        continue;
                r = e2b_table_load(srv, id, &rec);
                if (r == -EBADMSG) {
                        destroy_unreadable(srv, id);
                        continue;
                }
                json_decref(rec);
                if (r < 0)
                        continue;
                r = e2b_sandbox_kill(srv, id, &err);
                if (r < 0 && r != -ENOENT)
                        log_error("cannot destroy E2B sandbox '%s': %s", id,
                                  err.message[0] ? err.message : strerror(-r));
        }
}
