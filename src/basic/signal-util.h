/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

/* Signal state for a process about to run code that is not ours (a
 * sandboxed command, the keeper exec'd from an agent's process): whatever
 * the parent ignored or blocked must not carry over. */

/* Sets every signal's disposition to SIG_DFL and unblocks all signals. */
void signals_reset_default(void);
/* Only the dispositions: the mask stays as it is. */
void signals_reset_dispositions(void);

/* Whether @name is "@prefix<pid>-..." for a process that no longer exists
 * (kill(pid, 0) fails with ESRCH): what a supervisor killed with SIGKILL
 * left behind, named after its pid. A name of another shape, or a pid in
 * use by anyone, is false. */
bool name_pid_is_gone(const char *name, const char *prefix);
