package main

import (
	"fmt"
	"io"

	"github.com/leasehold/leasehold/internal/runner"
)

// runSubcommand is `leasehold run` (runcmd.go) in the command list.
func runSubcommand() *command {
	return &command{
		name:    "run",
		summary: "run a command only while this instance leads (docs/run.md)",
		usage:   runner.Usage[len("usage: "):],
		help:    func(w io.Writer, _ func(string) string) { runner.PrintDefaults(w) },
		// Its usage errors are one line naming the flag or argument and the
		// rule (runner.ParseArgs; docs/run.md), as scripts may rely on.
		run: func(args []string, e *env) int {
			return runCommand(args, e.stdout, e.stderr)
		},
	}
}

// installSubcommand is `leasehold install` (install.go) in the command
// list; -h and --help print its help.
func installSubcommand() *command {
	c := &command{
		name:    "install",
		summary: "copy this binary to PATH, for an init container (docs/run.md)",
		usage:   "leasehold install PATH|DIR",
	}
	c.help = func(w io.Writer, _ func(string) string) {
		fmt.Fprintf(w, "usage: %s\n\n%s\n", c.usage, `Copies this binary to PATH atomically (a temporary file in the same folder,
mode 0755, synced, then renamed), so that an init container can share it with
the app container through an emptyDir: the image has no shell and no cp. When
the argument is an existing folder, the copy is DIR/leasehold.

Exit status: 0 copied; 1 the copy failed; 2 a usage error.`)
	}
	c.run = func(args []string, e *env) int {
		if len(args) == 1 && isHelpFlag(args[0]) {
			c.help(e.stdout, e.getenv)
			return exitDone
		}
		return installCommand(args, e.stderr)
	}
	return c
}
