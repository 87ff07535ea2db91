/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* store/id-pool.h: the machine's pool of host id ranges for root's
 * sandboxes, in a folder of the test's own ($HUTCH_TEST_ID_POOL): a
 * sandbox keeps its range, the lowest free range is handed out (so a
 * released one is reused), a full pool is -ENOSPC, a damaged pool file
 * is -EBADMSG (never read around), and ranges that overlap the ids of
 * /etc/subuid-style lines are skipped. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "ns/userns.h"
#include "rm-rf.h"
#include "store/id-pool.h"
#include "test.h"

#define R USERNS_RANGE_SIZE

static char *pool_setup(const char *size) {
        char *p = strdup("/tmp/hutch-test-idpool-XXXXXX");

        ASSERT_NOT_NULL(p);
        ASSERT_NOT_NULL(mkdtemp(p));
        ASSERT_OK(setenv("HUTCH_TEST_ID_POOL", p, 1));
        if (size)
                ASSERT_OK(setenv("HUTCH_TEST_ID_POOL_SIZE", size, 1));
        else
                ASSERT_OK(unsetenv("HUTCH_TEST_ID_POOL_SIZE"));
        return p;
}

static void pool_teardown(char *dir) {
        ASSERT_OK(rm_rf_at(AT_FDCWD, dir));
        free(dir);
}

static void put_file(const char *path, const char *text) {
        FILE *f = fopen(path, "we");

        ASSERT_NOT_NULL(f);
        ASSERT_TRUE(fputs(text, f) >= 0 || text[0] == 0);
        ASSERT_OK(fclose(f));
}

static uint32_t claim(const char *home, const char *id, uint32_t hint) {
        uint32_t base = 0;

        ASSERT_OK(id_pool_claim(home, id, hint, NULL, 0, &base, NULL, NULL));
        return base;
}

TEST(subid_overlap_is_judged_on_every_line) {
        static const char text[] = "alice:100000:65536\n"
                                   "# comment:2147483648:1\n"
                                   "bob:not-a-number:5\n"
                                   "carol:2147549184:1\n";

        ASSERT_TRUE(id_pool_overlaps_subids(text, 100000, R));
        ASSERT_TRUE(id_pool_overlaps_subids(text, 100000 - R + 1, R));
        ASSERT_FALSE(id_pool_overlaps_subids(text, 100000 - R, R));
        ASSERT_FALSE(id_pool_overlaps_subids(text, 100000 + R, R));
        /* The comment is no range, carol's one id is. */
        ASSERT_FALSE(id_pool_overlaps_subids(text, ID_POOL_BASE, R));
        ASSERT_TRUE(id_pool_overlaps_subids(text, ID_POOL_BASE + R, R));
        ASSERT_FALSE(id_pool_overlaps_subids("", ID_POOL_BASE, R));
        ASSERT_FALSE(id_pool_overlaps_subids("dave:4294967295:1", ID_POOL_BASE, R));
        ASSERT_TRUE(id_pool_overlaps_subids("dave:0:4294967295", ID_POOL_BASE, R));
}

TEST(a_sandbox_keeps_its_range_and_the_lowest_free_is_reused) {
        char *dir = pool_setup(NULL);

        ASSERT_EQ(claim(dir, "00000000000000aa", 0), ID_POOL_BASE);
        ASSERT_EQ(claim(dir, "00000000000000bb", 0), ID_POOL_BASE + R);
        ASSERT_EQ(claim(dir, "00000000000000aa", ID_POOL_BASE + 9 * R), ID_POOL_BASE);
        ASSERT_EQ(claim(dir, "00000000000000cc", 0), ID_POOL_BASE + 2 * R);
        ASSERT_OK(id_pool_release(dir, "00000000000000aa"));
        ASSERT_OK(id_pool_release(dir, "00000000000000aa")); /* nothing held: 0 */
        ASSERT_EQ(claim(dir, "00000000000000dd", 0), ID_POOL_BASE);
        /* A free hint is taken; a held one, or one outside the pool, not. */
        ASSERT_EQ(claim(dir, "00000000000000ee", ID_POOL_BASE + 7 * R), ID_POOL_BASE + 7 * R);
        ASSERT_EQ(claim(dir, "00000000000000ff", ID_POOL_BASE + R), ID_POOL_BASE + 3 * R);
        ASSERT_EQ(claim(dir, "0000000000000011", ID_POOL_BASE + 1), ID_POOL_BASE + 4 * R);
        ASSERT_EQ(claim(dir, "0000000000000012", 4096), ID_POOL_BASE + 5 * R);
        /* The same id in another store is another sandbox. */
        ASSERT_EQ(claim("/", "00000000000000bb", 0), ID_POOL_BASE + 6 * R);
        pool_teardown(dir);
}

TEST(sweep_releases_only_the_store_s_sandboxes_that_are_gone) {
        char *dir = pool_setup(NULL);
        char *live[] = {(char *)"00000000000000bb", NULL};

        (void)claim(dir, "00000000000000aa", 0);
        (void)claim(dir, "00000000000000bb", 0);
        (void)claim("/", "00000000000000cc", 0);
        ASSERT_EQ(id_pool_sweep(dir, live), 1);
        ASSERT_EQ(id_pool_sweep(dir, live), 0);
        ASSERT_EQ(claim(dir, "00000000000000bb", 0), ID_POOL_BASE + R);
        ASSERT_EQ(claim("/", "00000000000000cc", 0), ID_POOL_BASE + 2 * R);
        ASSERT_EQ(claim(dir, "00000000000000dd", 0), ID_POOL_BASE);
        pool_teardown(dir);
}

TEST(a_full_pool_is_enospc_and_ranges_of_a_gone_store_are_free) {
        char *dir = pool_setup("2"), *gone = NULL;
        HutchError e = {};
        uint32_t base = 7;

        ASSERT_TRUE(asprintf(&gone, "%s/store", dir) > 0);
        ASSERT_OK(mkdir(gone, 0700));
        (void)claim(dir, "00000000000000aa", 0);
        ASSERT_EQ(claim(gone, "00000000000000bb", 0), ID_POOL_BASE + R);
        ASSERT_ERROR(id_pool_claim(dir, "00000000000000cc", 0, NULL, 0, &base, NULL, &e), ENOSPC);
        ASSERT_NOT_NULL(strstr(e.msg, "all 2 ranges"));
        ASSERT_EQ(base, 7U); /* untouched */
        ASSERT_OK(rmdir(gone));
        ASSERT_EQ(claim(dir, "00000000000000cc", 0), ID_POOL_BASE + R);
        free(gone);
        pool_teardown(dir);
}

TEST(a_lost_pool_is_rebuilt_from_the_store_s_records) {
        char *dir = pool_setup(NULL), *file = NULL;
        const IdPoolHold held[] = {
                {"00000000000000aa", ID_POOL_BASE + R},
                {"00000000000000bb", ID_POOL_BASE + 3 * R},
                {"00000000000000cc", ID_POOL_BASE + 2 * R}, /* another store holds it now */
                {"00000000000000dd", ID_POOL_BASE + 1},     /* not a range of the pool */
        };
        uint32_t base = 0;

        ASSERT_TRUE(asprintf(&file, "%s/id-pool", dir) > 0);
        /* The pool file lost: another store took the third range since. */
        ASSERT_EQ(claim("/", "00000000000000ee", ID_POOL_BASE + 2 * R), ID_POOL_BASE + 2 * R);
        /* A new sandbox of the store gets none of the ranges its records
         * hold: aa's and bb's are put back first, cc's stays the other
         * store's. */
        ASSERT_OK(id_pool_claim(dir, "00000000000000ff", 0, held, ELEMENTSOF(held), &base, NULL,
                                NULL));
        ASSERT_EQ(base, ID_POOL_BASE);
        ASSERT_OK(id_pool_claim(dir, "0000000000000011", 0, held, ELEMENTSOF(held), &base, NULL,
                                NULL));
        ASSERT_EQ(base, ID_POOL_BASE + 4 * R);
        ASSERT_EQ(claim(dir, "00000000000000aa", 0), ID_POOL_BASE + R);
        ASSERT_EQ(claim(dir, "00000000000000bb", 0), ID_POOL_BASE + 3 * R);
        /* cc gets a new range when it next starts. */
        ASSERT_EQ(claim(dir, "00000000000000cc", ID_POOL_BASE + 2 * R), ID_POOL_BASE + 5 * R);
        /* Negative twin: without the records, the lost ranges are handed
         * out again. */
        ASSERT_OK(unlink(file));
        ASSERT_EQ(claim(dir, "0000000000000022", 0), ID_POOL_BASE);
        ASSERT_EQ(claim(dir, "0000000000000033", 0), ID_POOL_BASE + R);
        free(file);
        pool_teardown(dir);
}

TEST(a_lease_holds_a_range_until_its_fd_closes) {
        char *dir = pool_setup(NULL), *file = NULL;
        uint32_t a = 0, b = 0, c = 0;
        int fa = -EBADF, fb = -EBADF, fc = -EBADF;

        ASSERT_TRUE(asprintf(&file, "%s/id-pool", dir) > 0);
        /* Two one-shot runs: two ranges, nothing written to the pool. */
        ASSERT_OK(id_pool_lease(&a, &fa, NULL));
        ASSERT_OK(id_pool_lease(&b, &fb, NULL));
        ASSERT_EQ(a, ID_POOL_BASE);
        ASSERT_EQ(b, ID_POOL_BASE + R);
        ASSERT_TRUE(access(file, F_OK) < 0);
        /* A new sandbox skips the leased ranges (its hint too), and a run
         * skips the pool's. */
        ASSERT_EQ(claim(dir, "00000000000000aa", 0), ID_POOL_BASE + 2 * R);
        ASSERT_EQ(claim(dir, "00000000000000bb", ID_POOL_BASE), ID_POOL_BASE + 3 * R);
        ASSERT_OK(id_pool_lease(&c, &fc, NULL));
        ASSERT_EQ(c, ID_POOL_BASE + 4 * R);
        /* Negative twin: a closed lease is free again, first. */
        fa = safe_close(fa);
        ASSERT_OK(id_pool_lease(&a, &fa, NULL));
        ASSERT_EQ(a, ID_POOL_BASE);
        /* A run never waits for the pool's flock (a claim's fsync). */
        {
                char *lockp = NULL;
                uint32_t d = 0;
                int held = -EBADF, fd = -EBADF;

                ASSERT_TRUE(asprintf(&lockp, "%s/id-pool.lock", dir) > 0);
                held = open(lockp, O_RDWR | O_CLOEXEC);
                ASSERT_TRUE(held >= 0);
                ASSERT_OK(flock(held, LOCK_EX));
                ASSERT_OK(id_pool_lease(&d, &fd, NULL));
                ASSERT_EQ(d, ID_POOL_BASE + 5 * R);
                safe_close(fd);
                safe_close(held);
                free(lockp);
        }
        safe_close(fa);
        safe_close(fb);
        safe_close(fc);
        free(file);
        pool_teardown(dir);
}

TEST(a_running_sandbox_keeps_its_range_after_a_lost_pool) {
        char *dir = pool_setup(NULL), *file = NULL;
        uint32_t base = 0, c = 0;
        int fk = -EBADF, fc = -EBADF;

        ASSERT_TRUE(asprintf(&file, "%s/id-pool", dir) > 0);
        /* Its keeper holds the lease of its range while it runs. */
        ASSERT_OK(id_pool_claim(dir, "00000000000000aa", 0, NULL, 0, &base, &fk, NULL));
        ASSERT_EQ(base, ID_POOL_BASE);
        ASSERT_TRUE(fk >= 0);
        ASSERT_OK(unlink(file));
        /* Another store (no records of aa) and a run get other ranges. */
        ASSERT_EQ(claim("/", "00000000000000cc", 0), ID_POOL_BASE + R);
        ASSERT_OK(id_pool_lease(&c, &fc, NULL));
        ASSERT_EQ(c, ID_POOL_BASE + 2 * R);
        /* Negative twin: the keeper gone, the lost range is free. */
        fk = safe_close(fk);
        ASSERT_EQ(claim("/", "00000000000000dd", 0), ID_POOL_BASE);
        safe_close(fc);
        free(file);
        pool_teardown(dir);
}

TEST(a_runs_lease_wins_over_a_record_when_its_sandbox_starts) {
        char *dir = pool_setup(NULL), *file = NULL, *text = NULL;
        const IdPoolHold held[] = {{"00000000000000ee", ID_POOL_BASE}};
        uint32_t base = 0, r0 = 0;
        int fr = -EBADF, fe = -EBADF;

        ASSERT_TRUE(asprintf(&file, "%s/id-pool", dir) > 0);
        /* A run took ee's range while the pool file was lost. */
        ASSERT_OK(id_pool_lease(&r0, &fr, NULL));
        ASSERT_EQ(r0, ID_POOL_BASE);
        /* ee's record is put back (the lease might be its keeper's)... */
        ASSERT_OK(id_pool_claim(dir, "00000000000000ff", 0, held, 1, &base, NULL, NULL));
        ASSERT_EQ(base, ID_POOL_BASE + R);
        /* ...but ee, starting, cannot take the lease: a new range. */
        ASSERT_OK(id_pool_claim(dir, "00000000000000ee", ID_POOL_BASE, held, 1, &base, &fe, NULL));
        ASSERT_EQ(base, ID_POOL_BASE + 2 * R);
        fe = safe_close(fe);
        /* A pool line for ee on the run's range: given up for a new one. */
        ASSERT_TRUE(asprintf(&text, "hutch-id-pool 1\n%u 00000000000000ee %s\n", ID_POOL_BASE,
                             dir) > 0);
        put_file(file, text);
        ASSERT_OK(id_pool_claim(dir, "00000000000000ee", ID_POOL_BASE, NULL, 0, &base, &fe, NULL));
        ASSERT_EQ(base, ID_POOL_BASE + R);
        fe = safe_close(fe);
        /* Negative twin: the run ended, the record is put back. */
        fr = safe_close(fr);
        ASSERT_OK(unlink(file));
        ASSERT_OK(id_pool_claim(dir, "0000000000000011", 0, held, 1, &base, NULL, NULL));
        ASSERT_EQ(base, ID_POOL_BASE + R);
        ASSERT_EQ(claim(dir, "00000000000000ee", 0), ID_POOL_BASE);
        free(text);
        free(file);
        pool_teardown(dir);
}

TEST(bad_input_and_a_damaged_pool_are_refused) {
        char *dir = pool_setup(NULL), *file = NULL;
        static const char *const damaged[] = {
                "",
                "hutch-id-pool 2\n",
                "hutch-id-pool 1\nx 00000000000000aa /\n",
                "hutch-id-pool 1\n2147483648 00000000000000aa\n",
                "hutch-id-pool 1\n2147483648 0000000000000g /\n",
                "hutch-id-pool 1\n2147483648 00000000000000aa relative\n",
                "hutch-id-pool 1\n4294967296 00000000000000aa /\n",
        };
        uint32_t base = 7;

        ASSERT_ERROR(id_pool_claim("relative", "00000000000000aa", 0, NULL, 0, &base, NULL, NULL),
                     EINVAL);
        ASSERT_ERROR(id_pool_claim("/a\nb", "00000000000000aa", 0, NULL, 0, &base, NULL, NULL),
                     EINVAL);
        ASSERT_ERROR(id_pool_claim(dir, "short", 0, NULL, 0, &base, NULL, NULL), EINVAL);
        ASSERT_ERROR(id_pool_claim(dir, "00000000000000AA-", 0, NULL, 0, &base, NULL, NULL),
                     EINVAL);
        ASSERT_TRUE(asprintf(&file, "%s/id-pool", dir) > 0);
        for (size_t i = 0; i < ELEMENTSOF(damaged); i++) {
                put_file(file, damaged[i]);
                ASSERT_ERROR(id_pool_claim(dir, "00000000000000aa", 0, NULL, 0, &base, NULL, NULL),
                             EBADMSG);
                ASSERT_ERROR(id_pool_release(dir, "00000000000000aa"), EBADMSG);
        }
        ASSERT_EQ(base, 7U);
        free(file);
        pool_teardown(dir);
}

DEFINE_TEST_MAIN
