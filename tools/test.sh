#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# tools/test.sh: builds hutch and runs every test, from a clean clone.
#
#   1. build/      meson + ninja with -Dwerror=true, unit tests
#   2. build-asan/ the same under ASan+UBSan, unit tests
#      build-rel/  a release build (-O3, _FORTIFY_SOURCE=3) with -Dwerror=true,
#                  unit tests (FORTIFY's run-time checks)
#   3. lint        clang-format (no diff allowed), no // comments in src/,
#                  the scripts checked by ShellCheck, and which folder of
#                  src/ includes which (tools/check-layering.py)
#   4. pytest      tests/integration against build/ (as root this includes
#                  the unprivileged-user runs)
#
# Ends with one line "N passed, N failed" (unit tests and pytest counted
# per test, each build and lint step as one check) and exits non-zero if
# anything failed. CI sets HUTCH_TEST_MUST_WORK=1 (see .ci/run) so that
# skipped integration tests count as failures.
set -uo pipefail

cd "$(dirname "$0")/.." || exit 1

tools/deps.sh test || exit 1

passed=0
failed=0
failures=()

pass() {
        passed=$((passed + $1))
}

fail() {
        failed=$((failed + $1))
        failures+=("$2")
}

check() {
        # check NAME CMD...: one pass or one fail.
        local name=$1
        shift
        echo "=== $name"
        if "$@"; then
                pass 1
        else
                fail 1 "$name"
        fi
}

# Sets up (or reconfigures) build dir $1 with the remaining meson options.
setup_build() {
        local dir=$1
        shift
        if [ -f "$dir/build.ninja" ]; then
                meson configure "$dir" "$@"
        else
                meson setup "$dir" "$@"
        fi
}

build() {
        local dir=$1
        shift
        setup_build "$dir" "$@" && ninja -C "$dir"
}

# Runs the unit suite in build dir $1 and adds meson test's counts.
unit_tests() {
        local dir=$1 log ok fail
        echo "=== unit tests ($dir)"
        log=$(mktemp)
        meson test -C "$dir" --suite unit --print-errorlogs 2>&1 | tee "$log"
        ok=$(awk '/^Ok:/ {print $2}' "$log")
        fail=$(awk '/^(Fail|Unexpected Pass|Timeout):/ {n += $NF} END {print n + 0}' "$log")
        rm -f "$log"
        if [ -z "$ok" ]; then
                fail 1 "unit tests ($dir): no summary from meson test"
                return
        fi
        pass "$ok"
        if [ "$fail" -gt 0 ]; then
                fail "$fail" "unit tests ($dir)"
        fi
}

clang_format_check() {
        local files
        mapfile -t files < <(find src tests -name '*.c' -o -name '*.h' | sort)
        [ ${#files[@]} -gt 0 ] || return 0
        clang-format --dry-run --Werror "${files[@]}"
}

# docs/style.md §6: `//` comments fail CI. Strings, character constants and
# block comments are skipped, so "http://" in either is fine.
no_line_comments() {
        /usr/bin/python3 - <<'PYEOF'
import pathlib
import sys

bad = []
for path in sorted(pathlib.Path("src").rglob("*")):
    if path.suffix not in (".c", ".h"):
        continue
    text = path.read_text(errors="replace")
    i, line, state = 0, 1, "code"
    while i < len(text):
        c, nxt = text[i], text[i + 1 : i + 2]
        if c == "\n":
            line += 1
        if state == "code":
            if c == "/" and nxt == "/":
                bad.append(f"{path}:{line}: // comment")
                while i < len(text) and text[i] != "\n":
                    i += 1
                continue
            if c == "/" and nxt == "*":
                state, i = "block", i + 2
                continue
            if c in "\"'":
                state, quote = "quote", c
        elif state == "block":
            if c == "*" and nxt == "/":
                state, i = "code", i + 2
                continue
        elif state == "quote":
            if c == "\\":
                i += 2
                continue
            if c == quote or c == "\n":
                state = "code"
        i += 1
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
PYEOF
}

shellcheck_scripts() {
        shellcheck tools/*.sh .ci/run bench/*.sh tools/completion/hutch.bash
}

# Runs pytest and adds its counts.
integration_tests() {
        local log summary p f e
        echo "=== integration tests (pytest)"
        log=$(mktemp)
        HUTCH_BUILD_DIR="$PWD/build" /usr/bin/python3 -m pytest -q tests/integration 2>&1 | tee "$log"
        summary=$(grep -E '^=* *[0-9]+ (passed|failed|skipped|error)|^=* *no tests ran' "$log" | tail -1)
        rm -f "$log"
        if [ -z "$summary" ]; then
                fail 1 "pytest: no summary"
                return
        fi
        p=$(grep -oE '[0-9]+ passed' <<<"$summary" | grep -oE '[0-9]+' || true)
        f=$(grep -oE '[0-9]+ failed' <<<"$summary" | grep -oE '[0-9]+' || true)
        e=$(grep -oE '[0-9]+ errors?' <<<"$summary" | grep -oE '[0-9]+' || true)
        pass "${p:-0}"
        if [ $(( ${f:-0} + ${e:-0} )) -gt 0 ]; then
                fail $(( ${f:-0} + ${e:-0} )) "pytest"
        fi
        if [ "${p:-0}" -eq 0 ] && [ $(( ${f:-0} + ${e:-0} )) -eq 0 ]; then
                fail 1 "pytest: nothing passed"
        fi
}

echo "=== build (werror)"
if build build -Dwerror=true; then
        pass 1
        unit_tests build
        built=1
else
        fail 1 "build (werror)"
        built=0
fi

echo "=== build-asan (address,undefined)"
if build build-asan -Db_sanitize=address,undefined -Dwerror=true; then
        pass 1
        export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
        export ASAN_OPTIONS=detect_leaks=1
        unit_tests build-asan
else
        fail 1 "build-asan"
fi

echo "=== build-rel (release: -O3, _FORTIFY_SOURCE=3)"
if build build-rel --buildtype=release -Dwerror=true; then
        pass 1
        # FORTIFY's run-time checks abort what the other builds let pass.
        unit_tests build-rel
else
        fail 1 "build-rel (release)"
fi

check "clang-format" clang_format_check
check "no // comments in src/" no_line_comments
check "shellcheck" shellcheck_scripts
check "include layering" /usr/bin/python3 tools/check-layering.py

if [ "$built" -eq 1 ]; then
        integration_tests
else
        fail 1 "pytest: not run, the build failed"
fi

echo
if [ ${#failures[@]} -gt 0 ]; then
        echo "failed stages: ${failures[*]}"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
