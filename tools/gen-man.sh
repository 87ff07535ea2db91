#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# tools/gen-man.sh HUTCH VERSION PAGE OUT [POLICY_MD]
#
# Writes the man page PAGE to OUT through pandoc. The source of each page
# is the text hutch itself prints, so the pages and --help never disagree:
#   hutch          `hutch --help` (hutch(1))
#   hutch-VERB     `hutch VERB --help` (hutch-VERB(1))
#   hutch.json     POLICY_MD, docs/policy.md (hutch.json(5))
# Run by meson at build time (docs/man/meson.build) when pandoc is found.
set -euo pipefail

[ $# -ge 4 ] || {
        echo "usage: $0 HUTCH VERSION PAGE OUT [POLICY_MD]" >&2
        exit 2
}
hutch=$1
version=$2
page=$3
out=$4

# Escapes text for pandoc's markdown (outside code spans).
md_escape() {
        sed -e 's/[][\\`*_<>#|$~^]/\\&/g'
}

# The help text as markdown: the usage lines as a line block in SYNOPSIS,
# "  FLAG   what it does" lines as a definition list, other lines as text.
help_to_md() {
        awk '
        function esc(s) { gsub(/[][\\`*_<>#|$~^]/, "\\\\&", s); return s }
        BEGIN { section = "syn"; print "# SYNOPSIS"; print "" }
        section == "syn" && /^(usage: |       )hutch/ {
                sub(/^(usage: |       )/, "")
                print "| " esc($0)
                next
        }
        section == "syn" { section = "desc"; print ""; print "# DESCRIPTION"; print "" }
        /^  +-/ && match($0, /[^ ]  +[^ ]/) {
                flag = substr($0, 1, RSTART); sub(/^ +/, "", flag)
                what = substr($0, RSTART + 1); sub(/^ +/, "", what)
                gsub(/`/, "", flag)
                print ""
                print "`" flag "`"
                print ":   " esc(what)
                print ""
                next
        }
        /^  +[a-z]/ && match($0, /[^ ]  +[^ ]/) {
                word = substr($0, 1, RSTART); sub(/^ +/, "", word)
                what = substr($0, RSTART + 1); sub(/^ +/, "", what)
                print ""
                print "**" esc(word) "**"
                print ":   " esc(what)
                print ""
                next
        }
        /^$/ { print ""; next }
        { print esc($0) "  " }
        '
}

see_also="hutch(1), hutch-run(1), hutch-create(1), hutch-exec(1), hutch.json(5)"

case "$page" in
hutch.json)
        [ $# -eq 5 ] || {
                echo "$0: hutch.json needs docs/policy.md" >&2
                exit 2
        }
        pandoc -s -f markdown-smart -t man \
                -M title=HUTCH.JSON -M section=5 -M header="hutch manual" \
                -M footer="hutch $version" "$5" -o "$out"
        ;;
hutch)
        {
                echo "# NAME"
                echo
                echo "hutch - sandboxes for AI agents"
                echo
                "$hutch" --help | help_to_md
                echo
                echo "# EXIT STATUS"
                echo
                echo "125 when hutch itself fails (one line on stderr says why); for run and"
                echo "exec, the command's status, 126 when it cannot be executed, 127 when it"
                echo "is not found, 128+N when it was killed by signal N."
                echo
                echo "# SEE ALSO"
                echo
                echo "$see_also"
        } | pandoc -s -f markdown-smart -t man -M title=HUTCH -M section=1 \
                -M header="hutch manual" -M footer="hutch $version" -o "$out"
        ;;
hutch-*)
        verb=${page#hutch-}
        summary=$("$hutch" --help | awk -v v="$verb" '/^  [a-z]/ && $1 == v { $1 = ""; sub(/^ /, ""); print; exit }')
        [ -n "$summary" ] || {
                echo "$0: '$verb' is not a verb of 'hutch --help'" >&2
                exit 1
        }
        {
                echo "# NAME"
                echo
                echo "hutch-$verb - $(printf '%s\n' "$summary" | md_escape)"
                echo
                "$hutch" "$verb" --help | help_to_md
                echo
                echo "# SEE ALSO"
                echo
                echo "$see_also"
        } | pandoc -s -f markdown-smart -t man -M title="HUTCH-${verb^^}" -M section=1 \
                -M header="hutch manual" -M footer="hutch $version" -o "$out"
        ;;
*)
        echo "$0: unknown page '$page'" >&2
        exit 2
        ;;
esac
