/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The subcommands. Each takes argv starting at its own name ("run", ...)
 * and returns the process exit status. */

/* hutch's own failures exit with 125 (docker's convention), so they are
 * never confused with the command's 126/127/128+N. */
#define HUTCH_EXIT_FAILURE 125

int verb_run(int argc, char **argv);
int verb_doctor(int argc, char **argv);
int verb_create(int argc, char **argv);
int verb_update(int argc, char **argv);
int verb_exec(int argc, char **argv);
int verb_ls(int argc, char **argv);
int verb_stop(int argc, char **argv);
int verb_rm(int argc, char **argv);
int verb_logs(int argc, char **argv);
int verb_gc(int argc, char **argv);
int verb_snapshot(int argc, char **argv);
int verb_diff(int argc, char **argv);
int verb_apply(int argc, char **argv);
int verb_serve(int argc, char **argv);
int verb_keeper(int argc, char **argv);
int verb_mcp(int argc, char **argv);
int verb_image(int argc, char **argv);
