"""`mcsync completion bash|zsh|fish`: shell completion made from the parser itself.

The scripts are generated from `cli.args.build_parser()` — the commands, each command's
flags, the `-o` formats — so a new flag completes without anyone editing a script. Where a
name goes (`describe cluster <TAB>`, `--cluster <TAB>`, `describe import <TAB>`, `get
export <TAB>`), they ask the hub as kubectl does: `mcsync <list> -o name` with the hub
URL, token file, context and config the command line already holds (else the usual
variables and config file), a short timeout, and errors silenced, so completing never
blocks on a hub that is down: it then offers nothing. zsh loads the bash script through
`bashcompinit`, as kubectl's users know it.
"""

from __future__ import annotations

import argparse

from cli.args import _VALUE_FLAGS, OUTPUTS, PLURALS, SHELLS, Shell, build_parser


def _commands() -> dict[str, list[str]]:
    """Command words (`clusters register` as two) → the flags it takes (and, for `get`
    and `describe`, the words that may follow)."""
    parser = build_parser()
    found: dict[str, list[str]] = {"": _flags(parser)}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[name] = _flags(sub)
                for inner in sub._actions:
                    if isinstance(inner, argparse._SubParsersAction):
                        for word, leaf in inner.choices.items():
                            found[f"{name} {word}"] = _flags(leaf)
    found["get"] = sorted({*found.get("get", []), *PLURALS})
    found["describe"] = []
    for kind in ("export", "import", "cluster", "conflict"):
        if f"get {kind}" in found:
            found[f"describe {kind}"] = found[f"get {kind}"]
    return found


# Where a name goes: command words -> the list whose `-o name` refs complete it (the ref
# is what follows the kind's `KIND/` prefix).
NAME_LISTS: dict[str, str] = {
    "get cluster": "clusters",
    "describe cluster": "clusters",
    "clusters deregister": "clusters",
    "clusters allow-withdrawal": "clusters",
    "clusters set-scope": "clusters",
    "clusters rotate-token": "clusters",
    "get import": "imports",
    "describe import": "imports",
    "get conflict": "conflicts",
    "describe conflict": "conflicts",
    "endpoints": "imports",
    "get export": "exports",
    "describe export": "exports",
}
# The flags that say which hub to ask; the completion passes them on.
HUB_FLAGS = ("--hub-url", "--token-file", "--context", "--config", "--certificate-authority")


def _flags(parser: argparse.ArgumentParser) -> list[str]:
    return sorted({f for a in parser._actions for f in a.option_strings if f.startswith("--")})


def _outputs() -> list[str]:
    return [o.split("=")[0] + ("=" if "=" in o else "") for o in OUTPUTS]


def bash() -> str:
    commands = _commands()
    top = sorted({name.split(" ")[0] for name in commands if name})
    cases = []
    for name, flags in sorted(commands.items()):
        if not name:
            continue
        words = name.split(" ")
        subcommands = sorted(
            other.split(" ")[1] for other in commands
            if " " in other and other.split(" ")[0] == words[0] and len(words) == 1
        )
        choices = " ".join(flags + subcommands + (list(SHELLS) if name == "completion" else []))
        cases.append(f'        "{name}") words_="{choices}" ;;')
    case_lines = "\n".join(cases)
    name_cases = "\n".join(
        f'        "{name}") list_="{kind}" ;;' for name, kind in sorted(NAME_LISTS.items()))
    hub_flags = "|".join(HUB_FLAGS)
    value_flags = "|".join(sorted(_VALUE_FLAGS))
    return f"""# bash completion for mcsync; source <(mcsync completion bash)
_mcsync_names() {{
    # The refs of `mcsync $1 -o name` (KIND/ stripped), asking the hub the command line names.
    local -a hub=()
    local i
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${{COMP_WORDS[i]}}" in
            {hub_flags}) hub+=("${{COMP_WORDS[i]}}" "${{COMP_WORDS[i+1]}}") ;;
        esac
    done
    "${{COMP_WORDS[0]}}" "${{hub[@]}}" --request-timeout 3 "$1" -o name 2>/dev/null \
        | sed 's|^[a-z]*/||'
}}
_mcsync() {{
    local cur prev cmd i word list_
    cur="${{COMP_WORDS[COMP_CWORD]}}"
    prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    if [[ "$prev" == "-o" || "$prev" == "--output" ]]; then
        COMPREPLY=($(compgen -W "{" ".join(_outputs())}" -- "$cur"))
        return
    fi
    if [[ "$prev" == "--cluster" ]]; then
        COMPREPLY=($(compgen -W "$(_mcsync_names clusters)" -- "$cur"))
        return
    fi
    cmd=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        word="${{COMP_WORDS[i]}}"
        case "$word" in
            {value_flags}) ((i++)); continue ;;  # and its value
            -*) continue ;;
        esac
        if [[ -z "$cmd" ]]; then cmd="$word"
        elif [[ "$cmd" == "clusters" || "$cmd" == "get" || "$cmd" == "config" \\
                || "$cmd" == "describe" ]] \\
             && [[ "$cmd" != *" "* ]]; then cmd="$cmd $word"; break
        fi
    done
    list_=""
    case "$cmd" in
{name_cases}
    esac
    if [[ -n "$list_" && "$cur" != -* ]]; then
        COMPREPLY=($(compgen -W "$(_mcsync_names "$list_")" -- "$cur"))
        return
    fi
    local words_=""
    case "$cmd" in
        "") words_="{" ".join(top)} {" ".join(commands[""])}" ;;
{case_lines}
    esac
    COMPREPLY=($(compgen -W "$words_" -- "$cur"))
}}
complete -o default -F _mcsync mcsync
"""


def zsh() -> str:
    return ("#compdef mcsync\n# zsh completion for mcsync; source <(mcsync completion zsh)\n"
            "autoload -U +X bashcompinit && bashcompinit\n" + bash())


def fish() -> str:
    commands = _commands()
    lines = ["# fish completion for mcsync; mcsync completion fish | source"]
    tops = sorted({name.split(" ")[0] for name in commands if name})
    lines.append(f"complete -c mcsync -f -n '__fish_use_subcommand' -a '{' '.join(tops)}'")
    for name, flags in sorted(commands.items()):
        words = name.split(" ")
        if len(words) == 2:
            lines.append(f"complete -c mcsync -f -n '__fish_seen_subcommand_from {words[0]}' "
                         f"-a '{words[1]}'")
        condition = f"__fish_seen_subcommand_from {words[-1]}" if name else "true"
        for flag in flags:
            lines.append(f"complete -c mcsync -n '{condition}' -l {flag[2:]}")
    lines.append(f"complete -c mcsync -s o -l output -x -a '{' '.join(_outputs())}'")
    lines.append("function __mcsync_names; mcsync --request-timeout 3 $argv[1] -o name "
                 "2>/dev/null | string replace -r '^[a-z]*/' ''; end")
    lines.append("complete -c mcsync -l cluster -x -a '(__mcsync_names clusters)'")
    for name, kind in sorted(NAME_LISTS.items()):
        lines.append(f"complete -c mcsync -f -n '__fish_seen_subcommand_from "
                     f"{name.split(' ')[-1]}' -a '(__mcsync_names {kind})'")
    lines.append(f"complete -c mcsync -f -n '__fish_seen_subcommand_from completion' "
                 f"-a '{' '.join(SHELLS)}'")
    return "\n".join(lines) + "\n"


SCRIPTS = {"bash": bash, "zsh": zsh, "fish": fish}


def script(shell: Shell) -> str:
    return SCRIPTS[shell]()
