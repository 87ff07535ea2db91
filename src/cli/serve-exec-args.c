/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "serve-exec-args.h"
#include "macro.h"

const ServeField serve_exec_fields[] = {
        {"argv", SERVE_FIELD_STRV, offsetof(ExecArgs, argv), true},
        {"env", SERVE_FIELD_ENV, offsetof(ExecArgs, env), false},
        {"cwd", SERVE_FIELD_STRING, offsetof(ExecArgs, cwd), false},
        {"timeout_ms", SERVE_FIELD_U64, offsetof(ExecArgs, timeout_ms), false},
        {"stdin", SERVE_FIELD_STRING, offsetof(ExecArgs, stdin_text), false},
        {"stdin_base64", SERVE_FIELD_STRING, offsetof(ExecArgs, stdin_base64), false},
        {"user", SERVE_FIELD_STRING, offsetof(ExecArgs, user), false},
        {"output_limit", SERVE_FIELD_U64, offsetof(ExecArgs, output_limit), false},
        {"detach", SERVE_FIELD_BOOL, offsetof(ExecArgs, detach), false},
        {"stdin_open", SERVE_FIELD_BOOL, offsetof(ExecArgs, stdin_open), false},
};

const size_t serve_exec_n_fields = ELEMENTSOF(serve_exec_fields);
