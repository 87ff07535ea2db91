# SPDX-License-Identifier: LGPL-2.1-or-later
# bash completion for hutch: verbs, flags (read from `hutch VERB --help`,
# so they are never out of date), sandbox and snapshot names (from the
# store: `hutch ls -q`, `hutch snapshot ls -q`), files where a flag takes
# one. Installed by meson into bash-completion's completions directory.

# The verbs, from `hutch --help`.
_hutch_verbs() {
        "$1" --help 2>/dev/null | awk '/^  [a-z]/ { print $1 }'
}

# The flags of VERB, from `hutch VERB --help`.
_hutch_flags() {
        "$1" "$2" --help 2>/dev/null |
                grep -oE -- '(^|[][ ,|])--?[A-Za-z][A-Za-z-]*' |
                sed -e 's/^[][ ,|]//' | sort -u
}

_hutch() {
        local cur prev hutch verb i positional=0
        cur=${COMP_WORDS[COMP_CWORD]}
        prev=${COMP_WORDS[COMP_CWORD - 1]}
        hutch=${COMP_WORDS[0]}
        COMPREPLY=()

        if ((COMP_CWORD == 1)); then
                mapfile -t COMPREPLY < <(compgen -W "$(_hutch_verbs "$hutch") help" -- "$cur")
                return
        fi
        verb=${COMP_WORDS[1]}

        # A flag's value.
        case $prev in
        --from)
                mapfile -t COMPREPLY < <(compgen -W "$("$hutch" snapshot ls -q 2>/dev/null)" -- "$cur")
                return
                ;;
        --network)
                mapfile -t COMPREPLY < <(compgen -W "none allow" -- "$cur")
                return
                ;;
        --dns)
                mapfile -t COMPREPLY < <(compgen -W "proxy transparent" -- "$cur")
                return
                ;;
        --backend)
                mapfile -t COMPREPLY < <(compgen -W "ns vm" -- "$cur")
                return
                ;;
        --vm-accel)
                mapfile -t COMPREPLY < <(compgen -W "kvm tcg" -- "$cur")
                return
                ;;
        -v | --volume | --workspace | --policy | --json | --audit-log | --upstream-ca | \
                --vm-kernel | -o | --tmpfs | -w | --workdir)
                mapfile -t COMPREPLY < <(compgen -f -- "$cur")
                return
                ;;
        esac

        if [[ $cur == -* ]]; then
                mapfile -t COMPREPLY < <(compgen -W "$(_hutch_flags "$hutch" "$verb")" -- "$cur")
                return
        fi

        # How many words that are no flag come before this one.
        for ((i = 2; i < COMP_CWORD; i++)); do
                [[ ${COMP_WORDS[i]} == -* ]] || positional=$((positional + 1))
        done
        case $verb in
        help)
                ((positional == 0)) &&
                        mapfile -t COMPREPLY < <(compgen -W "$(_hutch_verbs "$hutch")" -- "$cur")
                ;;
        exec | stop | rm | logs | diff | apply | mcp)
                ((positional == 0)) &&
                        mapfile -t COMPREPLY < <(compgen -W "$("$hutch" ls -q 2>/dev/null)" -- "$cur")
                ;;
        ps | kill | wait)
                ((positional == 0)) &&
                        mapfile -t COMPREPLY < <(compgen -W "$("$hutch" ls -q 2>/dev/null)" -- "$cur")
                ;;
        port)
                ((positional == 0)) &&
                        mapfile -t COMPREPLY < <(compgen -W "$("$hutch" ls -q 2>/dev/null)" -- "$cur")
                ((positional == 1)) && mapfile -t COMPREPLY < <(compgen -W "add rm" -- "$cur")
                ;;
        snapshot)
                if ((positional == 0)); then
                        mapfile -t COMPREPLY < <(compgen -W "ls rm export import $("$hutch" ls -q 2>/dev/null)" -- "$cur")
                elif ((positional == 1)); then
                        case ${COMP_WORDS[2]} in
                        rm | export)
                                mapfile -t COMPREPLY < <(compgen -W "$("$hutch" snapshot ls -q 2>/dev/null)" -- "$cur")
                                ;;
                        import)
                                mapfile -t COMPREPLY < <(compgen -f -- "$cur")
                                ;;
                        esac
                fi
                ;;
        image)
                if ((positional == 0)); then
                        mapfile -t COMPREPLY < <(compgen -W "import pull ls inspect rm gc" -- "$cur")
                elif ((positional == 1)); then
                        case ${COMP_WORDS[2]} in
                        inspect | rm)
                                mapfile -t COMPREPLY < <(compgen -W "$("$hutch" image ls -q 2>/dev/null)" -- "$cur")
                                ;;
                        import)
                                mapfile -t COMPREPLY < <(compgen -f -- "$cur")
                                ;;
                        esac
                fi
                ;;
        run)
                # The command: a program name.
                mapfile -t COMPREPLY < <(compgen -c -- "$cur")
                ;;
        esac
}

complete -F _hutch hutch
