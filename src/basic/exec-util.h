/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The last step of starting a command, shared by the sandbox init and the
 * microVM's agent so that both end a failed exec the same way. */

#include "macro.h"

/* Runs @argv with the environment @envp; argv[0] is searched as execvp()
 * does, in the PATH of @envp (it becomes environ first). When the
 * exec fails it writes "hutch: CMD: command not found" (ENOENT, exit 127)
 * or "hutch: CMD: REASON" (exit 126) to stderr: the shell's codes. */
_noreturn_ void exec_or_exit(char **argv, char **envp);
