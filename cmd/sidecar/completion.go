package main

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

// Shells `leasehold completion` writes a script for.
var completionShells = []string{"bash", "zsh"}

// completionCommand is `leasehold completion bash|zsh`: it prints a shell
// completion script for leasehold's commands, their flags, the values of
// -o, the commands after help and the shells after completion. The
// commands are commands(), and each one's flags are read from its own help
// (the flag package's list), so the script cannot drift from the CLI.
func completionCommand() *command {
	c := &command{
		name:    "completion",
		summary: "print a shell completion script (bash or zsh)",
		usage:   "leasehold completion bash|zsh",
	}
	c.help = func(w io.Writer, _ func(string) string) {
		fmt.Fprintf(w, "usage: %s\n\n%s\n", c.usage, `Prints a completion script for leasehold's commands and flags.

  source <(leasehold completion bash)    # bash, e.g. in ~/.bashrc
  source <(leasehold completion zsh)     # zsh, after compinit, e.g. in ~/.zshrc
  leasehold completion zsh > "${fpath[1]}/_leasehold"   # or install it once

Exit status: 0 printed; 2 a usage error.`)
	}
	c.run = func(args []string, e *env) int {
		switch {
		case len(args) == 1 && isHelpFlag(args[0]):
			c.help(e.stdout, e.getenv)
			return exitDone
		case len(args) != 1:
			return usageError(e, c, "want one argument, the shell: bash or zsh")
		}
		cmds := completionCommands(e.getenv)
		switch args[0] {
		case "bash":
			writeBashCompletion(e.stdout, cmds)
		case "zsh":
			writeZshCompletion(e.stdout, cmds)
		default:
			return usageError(e, c, fmt.Sprintf("unknown shell %q: want bash or zsh", args[0]))
		}
		return exitDone
	}
	return c
}

// completedCommand is what the scripts complete of one command.
type completedCommand struct {
	name, summary string
	flags         []string // with their dashes: --addr, -o
	// args completes the words after the flags: "commands", "shells",
	// "files" or "".
	args string
}

// helpFlag matches a flag in a help's flag list (flag.PrintDefaults):
// "  -addr HOST:PORT", "  -o format", "  -each".
var helpFlag = regexp.MustCompile(`(?m)^  -([A-Za-z0-9][-A-Za-z0-9]*)\b`)

// completionCommands lists what the scripts complete: every command, in
// the usage's order, with the flags of its help. One-letter flags are
// offered with one dash (-o), the others with two (--addr), as the docs
// write them; the flag package accepts both.
func completionCommands(getenv func(string) string) []completedCommand {
	var out []completedCommand
	for _, c := range commands() {
		var help bytes.Buffer
		c.help(&help, getenv)
		cc := completedCommand{name: c.name, summary: c.summary}
		for _, m := range helpFlag.FindAllStringSubmatch(help.String(), -1) {
			flag := "--" + m[1]
			if len(m[1]) == 1 {
				flag = "-" + m[1]
			}
			if !slices.Contains(cc.flags, flag) {
				cc.flags = append(cc.flags, flag)
			}
		}
		switch c.name {
		case "help":
			cc.args = "commands"
		case "completion":
			cc.args = "shells"
		case "install":
			cc.args = "files"
		}
		out = append(out, cc)
	}
	return out
}

func commandNames(cmds []completedCommand) string {
	names := make([]string, len(cmds))
	for i, c := range cmds {
		names[i] = c.name
	}
	return strings.Join(names, " ")
}

// writeBashCompletion writes the bash script: `complete -F _leasehold
// leasehold` (and /leasehold, the image's path).
func writeBashCompletion(w io.Writer, cmds []completedCommand) {
	fmt.Fprintf(w, `# bash completion for leasehold (leasehold completion bash).
# Load it with: source <(leasehold completion bash)
_leasehold() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    COMPREPLY=()
    if [[ $COMP_CWORD -eq 1 ]]; then
        COMPREPLY=($(compgen -W %q -- "$cur"))
        return
    fi
    if [[ $prev == -o ]]; then
        COMPREPLY=($(compgen -W "text json" -- "$cur"))
        return
    fi
    case ${COMP_WORDS[1]} in
`, commandNames(cmds))
	for _, c := range cmds {
		var words string
		switch c.args {
		case "commands":
			words = `[[ $COMP_CWORD -eq 2 ]] && COMPREPLY=($(compgen -W "` + commandNames(cmds) + `" -- "$cur"))`
		case "shells":
			words = `[[ $COMP_CWORD -eq 2 ]] && COMPREPLY=($(compgen -W "` + strings.Join(completionShells, " ") + `" -- "$cur"))`
		case "files":
			words = `COMPREPLY=($(compgen -f -- "$cur"))`
		default:
			words = `COMPREPLY=($(compgen -W "` + strings.Join(c.flags, " ") + `" -- "$cur"))`
		}
		fmt.Fprintf(w, "        %s) %s ;;\n", c.name, words)
	}
	fmt.Fprint(w, `    esac
}
complete -F _leasehold leasehold /leasehold
`)
}

// writeZshCompletion writes the zsh script: a completion function that
// works installed in $fpath (as _leasehold) and sourced after compinit.
func writeZshCompletion(w io.Writer, cmds []completedCommand) {
	fmt.Fprint(w, `#compdef leasehold
# zsh completion for leasehold (leasehold completion zsh).
# Load it with: source <(leasehold completion zsh), after compinit.
_leasehold() {
    local -a commands
    commands=(
`)
	for _, c := range cmds {
		fmt.Fprintf(w, "        %s\n", zshQuote(c.name+":"+c.summary))
	}
	fmt.Fprint(w, `    )
    if (( CURRENT == 2 )); then
        _describe 'command' commands
        return
    fi
    if [[ ${words[CURRENT-1]} == -o ]]; then
        compadd -- text json
        return
    fi
    case ${words[2]} in
`)
	for _, c := range cmds {
		var words string
		switch c.args {
		case "commands":
			words = `(( CURRENT == 3 )) && _describe 'command' commands`
		case "shells":
			words = `(( CURRENT == 3 )) && compadd -- ` + strings.Join(completionShells, " ")
		case "files":
			words = `_files`
		default:
			words = `compadd -- ` + strings.Join(c.flags, " ")
		}
		fmt.Fprintf(w, "        %s) %s ;;\n", c.name, words)
	}
	fmt.Fprint(w, `    esac
}
if [[ ${funcstack[1]} == _leasehold ]]; then
    _leasehold "$@"
else
    compdef _leasehold leasehold /leasehold
fi
`)
}

// zshQuote quotes s for zsh in single quotes (a ' inside becomes '\”).
func zshQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "'\\''") + "'"
}
