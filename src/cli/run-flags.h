/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Flag parsing for `hutch run`, kept apart from run.c so unit tests can
 * cover it. Fills the same Policy the JSON policy file fills, through
 * hutch-ext.h's door (the CLI never sees its fields). */

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

#include "api/hutch-ext.h"
#include "hutch-error.h"

typedef enum RunArgsMode {
        RUN_ARGS_RUN,    /* hutch run [FLAGS] -- CMD... */
        RUN_ARGS_CREATE, /* hutch create NAME [FLAGS]: no command; --from, --idle-timeout;
                          * a workspace without a mode is an overlay */
        RUN_ARGS_UPDATE, /* hutch update NAME [FLAGS]: as create, without --from and
                          * --idle-timeout, over the sandbox's policy */
} RunArgsMode;

typedef struct RunArgs {
        struct Policy *policy;    /* owned; hutch_ext_policy_*() */
        char **command;           /* owned; argv of the command, at least one entry (run), or
                                   * the positional arguments (create) */
        char *json_path;          /* --json FILE, or NULL */
        int json_fd;              /* --json-fd N, or -EBADF */
        bool help;                /* --help was given: print run_args_usage() and exit 0 */
        bool quiet;               /* run: -q, --quiet: no refusal lines after the command */
        bool tty;                 /* run: -t, --tty: a pty made in the sandbox (docs/terminal.md) */
        bool interactive;         /* run: -i, --interactive: with -t, stdin relayed to it */
        char *from;               /* create: --from SNAPSHOT, or NULL */
        uint64_t idle_timeout_ms; /* create: --idle-timeout, or 0 */
        bool policy_given;        /* create: a policy flag or --policy was given */
} RunArgs;

void run_args_done(RunArgs *a);

/* Parses @argv (argv[0] is "run") into @ret. --policy FILE is applied first
 * wherever it appears, then the other flags in order, so flags override the
 * file. The command follows the flags, optionally after "--"; it must not
 * be empty unless --help was given. Every bad input is -EINVAL (or the
 * errno of a failed file read) with @reterr naming the flag and value, e.g.
 * "invalid size '12q' in --tmpfs '/tmp:size=12q'". Policy validation
 * against the host (policy_validate()) is also run here. @ret is written
 * only on success. */
int run_args_parse(int argc, char **argv, RunArgs *ret, HutchError *reterr);

/* The same for @mode (run_args_parse() is RUN_ARGS_RUN). */
int run_args_parse_mode(int argc, char **argv, RunArgsMode mode, RunArgs *ret, HutchError *reterr);

/* RUN_ARGS_UPDATE: the flags are applied over @policy_json (a sandbox's
 * stored policy) instead of the defaults, after any --policy file. */
int run_args_parse_update(int argc, char **argv, const char *policy_json, RunArgs *ret,
                          HutchError *reterr);

/* Prints the flag reference of `hutch run`. */
void run_args_usage(FILE *f);

/* The entry of the NULL-terminated @candidates nearest to @word (at most
 * one edit per three characters away, a swap of neighbours being one), or
 * NULL when none is near: for "did you mean" hints. */
const char *word_nearest(const char *word, const char *const *candidates);

/* The long option of @options nearest to @arg ("--memroy=1g" or
 * "memroy"), without its dashes, or NULL. */
const char *option_nearest(const char *arg, const struct option *options);

/* Checks before anything is created that -w names a directory that will
 * exist when a one-shot sandbox of the namespace backend starts (the root
 * holds only mount points; the system directories, the workspace and the
 * binds show host directories; tmpfs mounts start empty). -ENOENT or
 * -ENOTDIR with @reterr naming the path; 0 when it exists or cannot be
 * told from the host. */
int run_args_check_workdir(const struct Policy *p, HutchError *reterr);

/* After a command exited 127 (not found): prints a hint to stderr when
 * @command[0] contains a space (use separate words or sh -c) or looks like
 * an image name ("python:3.12", "library/debian" that is no path here). */
void command_not_found_hint(char *const *command);
