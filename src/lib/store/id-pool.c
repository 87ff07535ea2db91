/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "ns/userns.h"
#include "parse-util.h"
#include "store/id-pool.h"
#include "strv.h"

#define ID_POOL_HEADER "hutch-id-pool 1\n"
#define ID_POOL_FILE_MAX (8U << 20)
#define ID_POOL_ID_LEN 16

typedef struct PoolEntry {
        uint32_t base;
        char id[ID_POOL_ID_LEN + 1];
        char *home;
} PoolEntry;

typedef struct Pool {
        PoolEntry *e;
        size_t n;
} Pool;

static void pool_done(Pool *p) {
        for (size_t i = 0; i < p->n; i++)
                free(p->e[i].home);
        p->e = mfree(p->e);
        p->n = 0;
}

static const char *pool_dir(void) {
#if HUTCH_TEST_HOOKS
        const char *d = getenv("HUTCH_TEST_ID_POOL");

        if (d && d[0] == '/')
                return d;
#endif
        return ID_POOL_DIR;
}

static uint32_t pool_size(void) {
#if HUTCH_TEST_HOOKS
        const char *s = getenv("HUTCH_TEST_ID_POOL_SIZE");
        uint32_t n;

        if (s && safe_atou32(s, &n) >= 0 && n > 0 && n <= ID_POOL_SIZE)
                return n;
#endif
        return ID_POOL_SIZE;
}

bool id_pool_overlaps_subids(const char *text, uint32_t base, uint32_t count) {
        for (const char *line = text; line && *line;) {
                const char *end = strchrnul(line, '\n');
                _cleanup_free_ char *l = strndup(line, (size_t)(end - line));
                char *c1, *c2;
                uint32_t s, n;

                line = *end ? end + 1 : NULL;
                if (!l || l[0] == '#')
                        continue;
                c1 = strchr(l, ':');
                c2 = c1 ? strchr(c1 + 1, ':') : NULL;
                if (!c2)
                        continue;
                *c2 = 0;
                if (safe_atou32(c1 + 1, &s) < 0 || safe_atou32(c2 + 1, &n) < 0 || n == 0)
                        continue;
                if ((uint64_t)s < (uint64_t)base + count && (uint64_t)s + n > base)
                        return true;
        }
        return false;
}

static bool id_is_valid(const char *id) {
        if (strlen(id) != ID_POOL_ID_LEN)
                return false;
        for (const char *c = id; *c; c++)
                if (hex_digit(*c) < 0)
                        return false;
        return true;
}

/* Parses the pool file: our own, written atomically, so a line that does
 * not parse is a damaged pool (-EBADMSG), never skipped: a range skipped
 * would be handed out twice. */
static int pool_parse(const char *text, Pool *ret) {
        Pool p = {};
        const char *line;

        if (strncmp(text, ID_POOL_HEADER, strlen(ID_POOL_HEADER)) != 0)
                return -EBADMSG;
        line = text + strlen(ID_POOL_HEADER);
        while (*line) {
                const char *end = strchrnul(line, '\n');
                _cleanup_free_ char *l = strndup(line, (size_t)(end - line));
                char *sp1, *sp2;
                PoolEntry *grown;
                uint32_t base;

                line = *end ? end + 1 : end;
                if (!l)
                        goto nomem;
                sp1 = strchr(l, ' ');
                sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
                if (!sp2 || sp2[1] != '/')
                        goto bad;
                *sp1 = *sp2 = 0;
                if (safe_atou32(l, &base) < 0 || !id_is_valid(sp1 + 1))
                        goto bad;
                grown = reallocarray(p.e, p.n + 1, sizeof(PoolEntry));
                if (!grown)
                        goto nomem;
                p.e = grown;
                p.e[p.n] = (PoolEntry){.base = base, .home = strdup(sp2 + 1)};
                if (!p.e[p.n].home)
                        goto nomem;
                memcpy(p.e[p.n].id, sp1 + 1, ID_POOL_ID_LEN + 1);
                p.n++;
        }
        *ret = p;
        return 0;
bad:
        pool_done(&p);
        return -EBADMSG;
nomem:
        pool_done(&p);
        return -ENOMEM;
}

/* Opens the pool's lock file, takes its flock when @exclusive (the fd
 * holds it) and reads the pool. */
static int pool_open(bool exclusive, int *ret_lock, Pool *ret) {
        _cleanup_free_ char *lockp = NULL, *path = NULL, *text = NULL;
        _cleanup_close_ int fd = -EBADF;
        const char *dir = pool_dir();
        int r;

        /* SECURITY: a pool folder planted by another user, or writable by
         * others, is refused: whoever can write the pool can make two
         * sandboxes share a range. */
        r = mkdir_private(dir);
        if (r < 0)
                return r;
        if (asprintf(&lockp, "%s/id-pool.lock", dir) < 0 || asprintf(&path, "%s/id-pool", dir) < 0)
                return -ENOMEM;
        fd = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return negative_errno();
        while (exclusive && flock(fd, LOCK_EX) < 0)
                if (errno != EINTR)
                        return negative_errno();
        r = read_full_file(path, ID_POOL_FILE_MAX, &text);
        if (r == -ENOENT) {
                *ret = (Pool){};
                *ret_lock = TAKE_FD(fd);
                return 0;
        }
        if (r < 0)
                return r;
        r = pool_parse(text, ret);
        if (r < 0)
                return r;
        *ret_lock = TAKE_FD(fd);
        return 0;
}

/* Removes the temp files of the pool's earlier writes that a killed
 * writer left (write_file_atomic() names them ".id-pool.tmp-PID"): the
 * caller holds the pool's lock, so no write is under way. */
static void pool_temps_remove(void) {
        _cleanup_(closedirp) DIR *d = opendir(pool_dir());
        struct dirent *de;

        while (d && (de = readdir(d)))
                if (strncmp(de->d_name, ".id-pool.tmp-", 13) == 0)
                        (void)unlinkat(dirfd(d), de->d_name, 0);
}

/* Writes @p as the pool file; the caller holds the pool's lock. */
static int pool_write(const Pool *p) {
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        FILE *f;

        pool_temps_remove();

        f = open_memstream(&text, &len);
        if (!f)
                return -ENOMEM;
        fputs(ID_POOL_HEADER, f);
        for (size_t i = 0; i < p->n; i++)
                fprintf(f, "%u %s %s\n", p->e[i].base, p->e[i].id, p->e[i].home);
        if (fclose(f) != 0)
                return -ENOMEM;
        return write_file_atomic(pool_dir(), "id-pool", text, len);
}

static void pool_drop(Pool *p, size_t i) {
        free(p->e[i].home);
        memmove(p->e + i, p->e + i + 1, (p->n - i - 1) * sizeof(PoolEntry));
        p->n--;
}

static bool pool_holds(const Pool *p, uint32_t base) {
        for (size_t i = 0; i < p->n; i++)
                if (p->e[i].base == base)
                        return true;
        return false;
}

/* The running leases (store/id-pool.h): byte i of id-pool.lock, locked
 * with an open file description lock (F_OFD_SETLK) by the process that
 * runs a sandbox on range i. The kernel drops it when the last fd of that
 * description closes, however the holder ends (SIGKILL too), so a lease is
 * never left behind; and locks of two descriptions conflict even within
 * one process (hutch serve's several runs). */
static uint32_t range_index(uint32_t base) {
        return (base - ID_POOL_BASE) / USERNS_RANGE_SIZE;
}

static struct flock lease_lock(short type, uint32_t base) {
        return (struct flock){
                .l_type = type,
                .l_whence = SEEK_SET,
                .l_start = (off_t)range_index(base),
                .l_len = 1,
        };
}

/* Does another open file description hold the lease of @base? Returns 1,
 * 0, or -errno. */
static int lease_held(int fd, uint32_t base) {
        struct flock l = lease_lock(F_WRLCK, base);

        if (fcntl(fd, F_OFD_GETLK, &l) < 0)
                return negative_errno();
        return l.l_type != F_UNLCK;
}

/* Takes the lease of @base on @fd's description. Returns 1, 0 when
 * another description holds it, or -errno. */
static int lease_take(int fd, uint32_t base) {
        struct flock l = lease_lock(F_WRLCK, base);

        if (fcntl(fd, F_OFD_SETLK, &l) >= 0)
                return 1;
        if (errno == EAGAIN || errno == EACCES)
                return 0;
        return negative_errno();
}

/* Is [@base, @base + @count) inside one extent of the kernel map @text
 * ("INSIDE OUTSIDE COUNT" lines of /proc/self/uid_map)? Where hutch runs
 * in a user namespace (a container), only the ids mapped there can be
 * given to a sandbox. No map read (NULL): the initial namespace. */
static bool mapped_here(const char *text, uint32_t base, uint32_t count) {
        if (!text)
                return true;
        for (const char *line = text; line && *line;) {
                unsigned long long in, out, n;

                if (sscanf(line, "%llu %llu %llu", &in, &out, &n) == 3 && base >= in &&
                    (unsigned long long)base + count <= in + n)
                        return true;
                line = strchr(line, '\n');
                line = line ? line + 1 : NULL;
        }
        return false;
}

typedef struct Tables {
        char *subuid, *subgid, *uid_map, *gid_map;
} Tables;

static void tables_done(Tables *t) {
        t->subuid = mfree(t->subuid);
        t->subgid = mfree(t->subgid);
        t->uid_map = mfree(t->uid_map);
        t->gid_map = mfree(t->gid_map);
}

/* Is @base the first id of a range of the pool that no user's sub-ids
 * overlap and that is mapped where hutch runs? */
static bool pool_range_usable(uint32_t base, uint32_t size, const Tables *t) {
        if (base < ID_POOL_BASE || (base - ID_POOL_BASE) % USERNS_RANGE_SIZE != 0 ||
            range_index(base) >= size)
                return false;
        return !(t->subuid && id_pool_overlaps_subids(t->subuid, base, USERNS_RANGE_SIZE)) &&
               !(t->subgid && id_pool_overlaps_subids(t->subgid, base, USERNS_RANGE_SIZE)) &&
               mapped_here(t->uid_map, base, USERNS_RANGE_SIZE) &&
               mapped_here(t->gid_map, base, USERNS_RANGE_SIZE);
}

static int pool_add(Pool *p, uint32_t base, const char *home, const char *id) {
        PoolEntry *grown;

        grown = reallocarray(p->e, p->n + 1, sizeof(PoolEntry));
        if (!grown)
                return -ENOMEM;
        p->e = grown;
        p->e[p->n] = (PoolEntry){.base = base, .home = strdup(home)};
        if (!p->e[p->n].home)
                return -ENOMEM;
        memcpy(p->e[p->n].id, id, ID_POOL_ID_LEN + 1);
        p->n++;
        return 0;
}

static bool pool_holds_id(const Pool *p, const char *home, const char *id) {
        for (size_t i = 0; i < p->n; i++)
                if (strcmp(p->e[i].home, home) == 0 && strcmp(p->e[i].id, id) == 0)
                        return true;
        return false;
}

/* SECURITY: the ranges @home's records name that the pool lost (its file
 * wiped while they ran) are held again before anything is handed out, so
 * a new sandbox never gets a range a sandbox of this store holds. A range
 * another pool line holds meanwhile stays theirs (its sandbox gets a new
 * one when it next starts). A leased range is put back too: the lease may
 * be the sandbox's own keeper's; if it is a run's (that took the range
 * while the pool was lost), the line only keeps the range from new
 * claims, and the sandbox, starting, gives it up for a new one
 * (id_pool_claim() takes the lease or moves). Returns whether the pool
 * changed, or -errno. */
static int pool_restore(Pool *p, const char *home, const IdPoolHold *held, size_t n_held,
                        uint32_t size) {
        bool changed = false;
        int r;

        for (size_t i = 0; i < n_held; i++) {
                const IdPoolHold *h = held + i;

                if (!id_is_valid(h->id) || h->base < ID_POOL_BASE ||
                    (h->base - ID_POOL_BASE) % USERNS_RANGE_SIZE != 0 ||
                    range_index(h->base) >= size || pool_holds_id(p, home, h->id) ||
                    pool_holds(p, h->base))
                        continue;
                r = pool_add(p, h->base, home, h->id);
                if (r < 0)
                        return r;
                changed = true;
        }
        return changed;
}

static int tables_read(Tables *t, HutchError *reterr) {
        int r;

        r = read_full_file("/etc/subuid", 1U << 20, &t->subuid);
        if (r < 0 && r != -ENOENT)
                return hutch_error_set(reterr, -r, "cannot read /etc/subuid: %s", strerror(-r));
        r = read_full_file("/etc/subgid", 1U << 20, &t->subgid);
        if (r < 0 && r != -ENOENT)
                return hutch_error_set(reterr, -r, "cannot read /etc/subgid: %s", strerror(-r));
        /* COMPAT(containers): in a user namespace of its own, hutch can
         * map only what is mapped there. */
        (void)read_full_file("/proc/self/uid_map", 1U << 16, &t->uid_map);
        (void)read_full_file("/proc/self/gid_map", 1U << 16, &t->gid_map);
        return 0;
}

/* Is @base free for a new holder: in no pool entry, usable, and leased
 * by no one? With @take, its lease is taken on @lock's description (the
 * check and the taking are one step). Returns 1, 0, or -errno. */
static int range_free(const Pool *p, const Tables *t, uint32_t size, int lock, bool take,
                      uint32_t base) {
        if (pool_holds(p, base) || !pool_range_usable(base, size, t))
                return 0;
        if (take)
                return lease_take(lock, base);
        return lease_held(lock, base) == 0;
}

/* Picks the lowest free range (@hint first, when it is free). Returns 1
 * and @ret_base, 0 when there is none, or -errno. */
static int pool_pick(const Pool *p, const Tables *t, uint32_t size, int lock, bool take,
                     uint32_t hint, uint32_t *ret_base) {
        int r;

        if (hint != 0) {
                r = range_free(p, t, size, lock, take, hint);
                if (r != 0) {
                        if (r > 0)
                                *ret_base = hint;
                        return r;
                }
        }
        for (uint32_t i = 0; i < size; i++) {
                uint32_t base = ID_POOL_BASE + i * USERNS_RANGE_SIZE;

                r = range_free(p, t, size, lock, take, base);
                if (r != 0) {
                        if (r > 0)
                                *ret_base = base;
                        return r;
                }
        }
        return 0;
}

static int pool_full(uint32_t size, HutchError *reterr) {
        return hutch_error_set(reterr, ENOSPC,
                               "no free id range for a new sandbox: all %u ranges of the "
                               "pool %s/id-pool are held by root's sandboxes (remove some "
                               "with 'hutch rm', or run 'hutch gc' in each store), or "
                               "overlap /etc/subuid, or are not mapped where hutch runs",
                               size, pool_dir());
}

/* Hands the pool's lock fd, which holds a lease, to the caller: the
 * pool's flock goes, the lease stays with the description. */
static int lease_hand_out(int *lock, int *ret_lease) {
        if (flock(*lock, LOCK_UN) < 0)
                return negative_errno();
        *ret_lease = TAKE_FD(*lock);
        return 0;
}

int id_pool_claim(const char *home, const char *id, uint32_t hint, const IdPoolHold *held,
                  size_t n_held, uint32_t *ret_base, int *ret_lease, HutchError *reterr) {
        _cleanup_(tables_done) Tables t = {};
        _cleanup_close_ int lock = -EBADF;
        _cleanup_(pool_done) Pool p = {};
        uint32_t size = pool_size(), base = 0;
        bool changed = false;
        int r;

        if (home[0] != '/' || strchr(home, '\n') || !id_is_valid(id))
                return hutch_error_set(reterr, EINVAL, "cannot hold an id range for '%s'", home);
        r = pool_open(true, &lock, &p);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot use the id pool in %s: %s", pool_dir(),
                                       strerror(-r));
        r = pool_restore(&p, home, held, n_held, size);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot use the id pool in %s: %s", pool_dir(),
                                       strerror(-r));
        changed = r > 0;
        for (size_t i = 0; i < p.n; i++) {
                if (strcmp(p.e[i].home, home) != 0 || strcmp(p.e[i].id, id) != 0)
                        continue;
                /* SECURITY: its range, unless someone runs on it (a run
                 * that took it while the pool file was lost): then a new
                 * one. */
                r = ret_lease ? lease_take(lock, p.e[i].base) : 1;
                if (r < 0)
                        return hutch_error_set(reterr, -r, "cannot use the id pool in %s: %s",
                                               pool_dir(), strerror(-r));
                if (r == 0) {
                        pool_drop(&p, i);
                        changed = true;
                        break;
                }
                r = changed ? pool_write(&p) : 0;
                if (r < 0)
                        return hutch_error_set(reterr, -r, "cannot write the id pool in %s: %s",
                                               pool_dir(), strerror(-r));
                *ret_base = p.e[i].base;
                return ret_lease ? lease_hand_out(&lock, ret_lease) : 0;
        }
        /* A store whose folder is gone runs no sandbox: its ranges are free. */
        for (size_t i = p.n; i > 0; i--) {
                struct stat st;

                if (stat(p.e[i - 1].home, &st) < 0 && errno == ENOENT) {
                        pool_drop(&p, i - 1);
                        changed = true;
                }
        }
        r = tables_read(&t, reterr);
        if (r < 0)
                return r;
        r = pool_pick(&p, &t, size, lock, ret_lease != NULL, hint, &base);
        if (r <= 0) {
                if (changed)
                        (void)pool_write(&p);
                if (r < 0)
                        return hutch_error_set(reterr, -r, "cannot use the id pool in %s: %s",
                                               pool_dir(), strerror(-r));
                return pool_full(size, reterr);
        }
        r = pool_add(&p, base, home, id);
        if (r < 0)
                return r;
        r = pool_write(&p);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot write the id pool in %s: %s", pool_dir(),
                                       strerror(-r));
        *ret_base = base;
        return ret_lease ? lease_hand_out(&lock, ret_lease) : 0;
}

/* SECURITY: without the pool's flock, so that a run never waits for a
 * claim's fsync: the lease alone decides who runs on a range (a keeper
 * takes its range's lease before it uses it, and moves when a run holds
 * it), and the pool file, replaced atomically, is read whole, old or
 * new. A run that read the pool just before a claim wrote it may lease
 * the range that claim hands a new sandbox, which then moves when it
 * starts; two sandboxes never run on one range. */
int id_pool_lease(uint32_t *ret_base, int *ret_lease, HutchError *reterr) {
        _cleanup_(tables_done) Tables t = {};
        _cleanup_close_ int lock = -EBADF;
        _cleanup_(pool_done) Pool p = {};
        uint32_t size = pool_size(), base = 0;
        int r;

        r = pool_open(false, &lock, &p);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot use the id pool in %s: %s", pool_dir(),
                                       strerror(-r));
        r = tables_read(&t, reterr);
        if (r < 0)
                return r;
        r = pool_pick(&p, &t, size, lock, true, 0, &base);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot use the id pool in %s: %s", pool_dir(),
                                       strerror(-r));
        if (r == 0)
                return pool_full(size, reterr);
        r = lease_hand_out(&lock, ret_lease);
        if (r < 0)
                return hutch_error_set(reterr, -r, "cannot use the id pool in %s: %s", pool_dir(),
                                       strerror(-r));
        *ret_base = base;
        return 0;
}

int id_pool_release(const char *home, const char *id) {
        _cleanup_close_ int lock = -EBADF;
        _cleanup_(pool_done) Pool p = {};
        bool changed = false;
        int r;

        r = pool_open(true, &lock, &p);
        if (r < 0)
                return r;
        for (size_t i = p.n; i > 0; i--)
                if (strcmp(p.e[i - 1].home, home) == 0 && strcmp(p.e[i - 1].id, id) == 0) {
                        pool_drop(&p, i - 1);
                        changed = true;
                }
        return changed ? pool_write(&p) : 0;
}

int id_pool_sweep(const char *home, char *const *live) {
        _cleanup_close_ int lock = -EBADF;
        _cleanup_(pool_done) Pool p = {};
        int r, n = 0;

        r = pool_open(true, &lock, &p);
        if (r < 0)
                return r;
        for (size_t i = p.n; i > 0; i--)
                if (strcmp(p.e[i - 1].home, home) == 0 && !strv_contains(live, p.e[i - 1].id)) {
                        pool_drop(&p, i - 1);
                        n++;
                }
        if (n == 0)
                return 0;
        r = pool_write(&p);
        return r < 0 ? r : n;
}
