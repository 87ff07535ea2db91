/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch diff / hutch apply: a persistent sandbox's changes to its overlay
 * workspace, shown or written back to the host folder (docs/persistent.md). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "api/hutch-ext.h"
#include "cli-util.h"
#include "cli.h"
#include "fd-util.h"
#include "log.h"
#include "macro.h"
#include "persist.h"
#include "strv.h"

/* One file's line counts, from its unified diff. */
typedef struct StatLine {
        char *path; /* escaped */
        size_t added, removed;
        bool binary;
} StatLine;

/* Counts the '+' and '-' lines of the hunks of the patch of change @i (its
 * git header lines, "--- a/P" and "+++ b/P" before the first "@@"
 * excepted), written by hutch_ext_diff_patch() into a memfd. */
static int diff_count_lines(const HutchExtDiff *d, size_t i, StatLine *ret, HutchError *reterr) {
        _cleanup_close_ int fd = -EBADF;
        FILE *f;
        _cleanup_free_ char *line = NULL;
        size_t cap = 0;
        bool in_hunk = false;
        int r;

        fd = memfd_create("hutch-diff-stat", MFD_CLOEXEC);
        if (fd < 0)
                return -errno;
        r = hutch_ext_diff_patch(d, i, fd, reterr);
        if (r < 0)
                return r;
        if (lseek(fd, 0, SEEK_SET) < 0)
                return -errno;
        f = fdopen(fd, "r");
        if (!f)
                return -errno;
        fd = -EBADF;
        while (getline(&line, &cap, f) >= 0) {
                if (strncmp(line, "@@", 2) == 0)
                        in_hunk = true;
                else if (strncmp(line, "Binary files ", 13) == 0)
                        ret->binary = true;
                else if (!in_hunk)
                        continue;
                else if (line[0] == '+')
                        ret->added++;
                else if (line[0] == '-')
                        ret->removed++;
        }
        r = ferror(f) ? -EIO : 0;
        (void)fclose(f);
        return r;
}

/* git diff --stat's shape: " PATH | N +++--" per file (symlinks and
 * directories are left to --name-status, as git tracks no directories),
 * then " F files changed, I insertions(+), D deletions(-)". */
static int diff_print_git_stat(const HutchExtDiff *d, HutchError *reterr) {
        enum { BAR = 50 };
        size_t n = hutch_ext_diff_count(d);
        _cleanup_free_ StatLine *lines = calloc(n ? n : 1, sizeof(StatLine));
        size_t k = 0, width = 0, most = 0, added = 0, removed = 0;
        int r = 0;

        if (!lines)
                return -ENOMEM;
        for (size_t i = 0; i < n && r >= 0; i++) {
                _cleanup_free_ char *path = NULL;

                r = hutch_ext_diff_entry(d, i, &path);
                if (r == 0)
                        continue; /* not a regular file */
                if (r > 0) {
                        lines[k].path = TAKE_PTR(path);
                        r = diff_count_lines(d, i, &lines[k], reterr);
                }
                if (r >= 0) {
                        width = MAX(width, strlen(lines[k].path));
                        most = MAX(most, lines[k].added + lines[k].removed);
                        added += lines[k].added;
                        removed += lines[k].removed;
                }
                k++;
        }
        for (size_t i = 0; i < k && r >= 0; i++) {
                size_t total = lines[i].added + lines[i].removed, plus = lines[i].added,
                       minus = lines[i].removed;

                if (lines[i].binary) {
                        (void)printf(" %-*s | Bin\n", (int)width, lines[i].path);
                        continue;
                }
                /* Scaled to the bar, as git does, each side at least one. */
                if (most > BAR) {
                        plus = plus ? MAX((size_t)1, plus * BAR / most) : 0;
                        minus = minus ? MAX((size_t)1, minus * BAR / most) : 0;
                }
                (void)printf(" %-*s | %zu ", (int)width, lines[i].path, total);
                for (size_t j = 0; j < plus; j++)
                        (void)putchar('+');
                for (size_t j = 0; j < minus; j++)
                        (void)putchar('-');
                (void)putchar('\n');
        }
        if (r >= 0 && n == 0) {
                (void)printf("no changes\n");
        } else if (r >= 0) {
                (void)printf(" %zu file%s changed", k, k == 1 ? "" : "s");
                if (added || !removed)
                        (void)printf(", %zu insertion%s(+)", added, added == 1 ? "" : "s");
                if (removed || !added)
                        (void)printf(", %zu deletion%s(-)", removed, removed == 1 ? "" : "s");
                (void)putchar('\n');
        }
        for (size_t i = 0; i < k; i++)
                free(lines[i].path);
        if (r >= 0 && (fflush(stdout) != 0 || ferror(stdout)))
                r = -EIO;
        return r;
}

int verb_diff(int argc, char **argv) {
        _cleanup_(hutch_ext_diff_freep) HutchExtDiff *d = NULL;
        _cleanup_strv_free_ char **paths = NULL;
        const char *name = NULL;
        bool stat_only = false, as_json = false, name_status = false;
        HutchError err = {};
        int r;

        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--stat") == 0)
                        stat_only = true;
                else if (strcmp(argv[i], "--name-status") == 0)
                        name_status = true;
                else if (strcmp(argv[i], "--json") == 0)
                        as_json = true;
                else if (argv[i][0] == '-' && strcmp(argv[i], "--") != 0) {
                        log_error("usage: hutch diff NAME [--stat | --name-status | --json] "
                                  "[PATH...]");
                        return HUTCH_EXIT_FAILURE;
                } else if (strcmp(argv[i], "--") == 0)
                        continue;
                else if (!name)
                        name = argv[i];
                else if (strv_extend(&paths, argv[i]) < 0)
                        return HUTCH_EXIT_FAILURE;
        }
        if (!name || stat_only + as_json + name_status > 1) {
                log_error("usage: hutch diff NAME [--stat | --name-status | --json] [PATH...]");
                return HUTCH_EXIT_FAILURE;
        }
        r = hutch_ext_paths_normalize(paths, &err);
        if (r < 0)
                return cli_fail(&err, r);
        r = hutch_ext_diff_open(name, paths, &d, &err);
        if (r < 0)
                return cli_fail(&err, r);
        if (as_json) {
                _cleanup_free_ char *text = NULL;

                r = hutch_ext_diff_json(d, &text);
                if (r >= 0)
                        (void)printf("%s\n", text ? text : "[]");
        } else if (name_status)
                r = hutch_ext_diff_name_status(d, stdout);
        else if (stat_only)
                r = diff_print_git_stat(d, &err);
        else {
                (void)fflush(stdout);
                r = hutch_ext_diff_patch(d, HUTCH_EXT_DIFF_ALL, STDOUT_FILENO, &err);
        }
        if (r < 0)
                return err.msg[0] ? cli_fail(&err, r) : HUTCH_EXIT_FAILURE;
        return 0;
}

int verb_apply(int argc, char **argv) {
        _cleanup_(hutch_ext_apply_done) HutchExtApply a = {};
        _cleanup_strv_free_ char **paths = NULL;
        const char *name = NULL;
        bool force = false, modes = false;
        HutchError err = {};
        int r;

        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--force") == 0 || strcmp(argv[i], "-f") == 0)
                        force = true;
                else if (strcmp(argv[i], "--modes") == 0)
                        modes = true;
                else if (strcmp(argv[i], "--") == 0)
                        continue;
                else if (argv[i][0] == '-') {
                        log_error("usage: hutch apply NAME [--force] [--modes] [PATH...]");
                        return HUTCH_EXIT_FAILURE;
                } else if (!name)
                        name = argv[i];
                else if (strv_extend(&paths, argv[i]) < 0)
                        return HUTCH_EXIT_FAILURE;
        }
        if (!name) {
                log_error("usage: hutch apply NAME [--force] [--modes] [PATH...]");
                return HUTCH_EXIT_FAILURE;
        }
        r = hutch_ext_paths_normalize(paths, &err);
        if (r < 0)
                return cli_fail(&err, r);
        r = hutch_ext_apply(name, paths, force, modes, &a, &err);
        if (r == -EEXIST && !a.applied) {
                STRV_FOREACH(c, a.conflicts)
                        log_error(
                                "conflict: '%s' changed on the host since the sandbox was created",
                                *c);
                log_error("nothing was applied; use --force to overwrite the host's changes");
                return HUTCH_EXIT_FAILURE;
        }
        /* SECURITY: what a sandbox asked for and did not get is said. */
        STRV_FOREACH(m, a.modes_kept)
                log_warning("%s: no group/other write or sticky bit the host's entry did not "
                            "have (--modes applies them)",
                            *m);
        if (a.applied)
                (void)printf("applied %zu change%s to %s\n", a.n_applied,
                             a.n_applied == 1 ? "" : "s", a.workspace);
        if (r < 0)
                return cli_fail(&err, r);
        return 0;
}
