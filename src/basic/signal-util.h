/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Signal state for a process about to run code that is not ours (a
 * sandboxed command, the keeper exec'd from an agent's process): whatever
 * the parent ignored or blocked must not carry over. */

/* Sets every signal's disposition to SIG_DFL and unblocks all signals. */
void signals_reset_default(void);
