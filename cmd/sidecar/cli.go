package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/leasehold/leasehold/pkg/client"
)

// Exit statuses of the client subcommands (status, token, wait, release),
// of version and help, and of a command line that names no known command.
// The sidecar's own (exitOK, exitFailed, exitConfig) are in run.go.
const (
	exitDone      = 0 // done; for token and wait: this instance leads
	exitNotLeader = 1 // token: not leading; wait: not leading when --timeout passed
	exitUsage     = 2 // a usage error, or a value the sidecar refused with 400
	exitNoAnswer  = 3 // no answer from the sidecar, or an error answer
)

// env is what a subcommand may use of its process: tests replace every
// part.
type env struct {
	ctx            context.Context
	stdout, stderr io.Writer
	getenv         func(string) string
	now            func() time.Time
	// sidecar runs the sidecar and returns its exit status (run).
	sidecar func(stderr io.Writer) int
}

// command is one subcommand of leasehold.
type command struct {
	name    string
	summary string // one line, for the command list
	// usage is the synopsis, without the leading "usage: ".
	usage string
	// help prints the whole help: the synopsis, what it does, its flags,
	// its exit statuses.
	help func(w io.Writer, getenv func(string) string)
	// run runs the command with the arguments after its name and returns
	// the exit status.
	run func(args []string, e *env) int
}

// commands lists the subcommands in the order the usage shows them.
func commands() []*command {
	return []*command{
		sidecarCommand(),
		statusCommand(),
		tokenCommand(),
		waitCommand(),
		releaseCommand(),
		runSubcommand(),
		installSubcommand(),
		fencingPolicyCommand(),
		versionCommand(),
		completionCommand(),
		helpCommand(),
	}
}

func lookup(name string) *command {
	for _, c := range commands() {
		if c.name == name {
			return c
		}
	}
	return nil
}

// cli runs leasehold with the arguments after the program name and returns
// the exit status. With no argument it runs the sidecar, as the chart, the
// manifests and the image's ENTRYPOINT do; anything it does not know is a
// usage error (exit 2) and never starts a candidate.
func cli(args []string, e *env) int {
	if len(args) == 0 {
		return e.sidecar(e.stderr)
	}
	switch args[0] {
	case "-h", "-help", "--help":
		if len(args) > 1 {
			return usageError(e, nil, fmt.Sprintf("unexpected argument %q after %s", args[1], args[0]))
		}
		printUsage(e.stdout)
		return exitDone
	case "-version", "--version":
		return versionCommand().run(args[1:], e)
	}
	if c := lookup(args[0]); c != nil {
		return c.run(args[1:], e)
	}
	what := "command"
	if strings.HasPrefix(args[0], "-") {
		what = "flag"
	}
	return usageError(e, nil, fmt.Sprintf("unknown %s %q", what, args[0]))
}

// usageError reports a usage error of c (nil: of leasehold itself) on
// stderr and returns exitUsage: leasehold's is one line naming the problem
// and the hint to 'leasehold help'; a command's adds its synopsis between
// the two.
func usageError(e *env, c *command, msg string) int {
	if c == nil {
		fmt.Fprintf(e.stderr, "leasehold: %s\nRun 'leasehold help' for usage.\n", msg)
		return exitUsage
	}
	fmt.Fprintf(e.stderr, "leasehold %s: %s\nusage: %s\nRun 'leasehold help %s' for details.\n", c.name, msg, c.usage, c.name)
	return exitUsage
}

// printUsage writes leasehold's usage: every command and the exit statuses.
func printUsage(w io.Writer) {
	fmt.Fprint(w, `leasehold: a leader-election sidecar for Kubernetes.

usage: leasehold [COMMAND] [ARG...]

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-14s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
With no command, leasehold runs the sidecar (the same as 'leasehold sidecar'),
configured by LEASEHOLD_* environment variables: this is how the chart, the
manifests and the image's ENTRYPOINT start it.

status, token, wait and release ask the sidecar in this pod, on its local API
at --addr (default: $LEASEHOLD_API_ADDR, else `+client.DefaultAddr+`). They work
in the image, which holds nothing but the binary:
  kubectl exec POD -c leasehold -- /leasehold status

`+clientExitStatuses+`
Run 'leasehold help COMMAND' (or 'leasehold COMMAND --help') for a command's
flags and exit statuses. Documentation: https://github.com/leasehold/leasehold
`)
}

// clientExitStatuses documents the exit statuses of the client commands.
const clientExitStatuses = `Exit status of status, token, wait and release:
  0  done (token, wait: this instance leads)
  1  not the leader (token), or not leading when --timeout passed (wait)
  2  usage error: an unknown command, flag or argument, a bad value, or a
     value the sidecar refused (400)
  3  no answer from the sidecar (nothing listening at --addr, or no answer
     in time), or an error answer (shutting down, a failed release)
`

// helpCommand is `leasehold help [COMMAND]`.
func helpCommand() *command {
	c := &command{
		name:    "help",
		summary: "show the usage, or a command's help",
		usage:   "leasehold help [COMMAND]",
	}
	c.help = func(w io.Writer, _ func(string) string) {
		fmt.Fprintf(w, "usage: %s\n\nShows leasehold's usage, or the help of COMMAND (the same as 'leasehold COMMAND --help').\n", c.usage)
	}
	c.run = func(args []string, e *env) int {
		switch {
		case len(args) == 0:
			printUsage(e.stdout)
			return exitDone
		case len(args) > 1:
			return usageError(e, c, fmt.Sprintf("unexpected argument %q", args[1]))
		case isHelpFlag(args[0]):
			c.help(e.stdout, e.getenv)
			return exitDone
		}
		target := lookup(args[0])
		if target == nil {
			return usageError(e, c, fmt.Sprintf("unknown command %q", args[0]))
		}
		target.help(e.stdout, e.getenv)
		return exitDone
	}
	return c
}

// isHelpFlag reports whether arg asks for help, as the flag package
// understands it.
func isHelpFlag(arg string) bool {
	switch arg {
	case "-h", "-help", "--h", "--help":
		return true
	}
	return false
}

// parseFlags parses args with fs for command c: it returns done with the
// exit status when the command must not go on (help printed: 0; a usage
// error reported: 2). Positional arguments are usage errors.
func parseFlags(fs *flag.FlagSet, c *command, args []string, e *env) (status int, done bool) {
	fs.SetOutput(io.Discard) // errors are reported by usageError, help by c.help
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.help(e.stdout, e.getenv)
			return exitDone, true
		}
		return usageError(e, c, err.Error()), true
	}
	if fs.NArg() > 0 {
		return usageError(e, c, fmt.Sprintf("unexpected argument %q", fs.Arg(0))), true
	}
	return 0, false
}

// printCommandHelp writes the help of a command with flags fs: the
// synopsis, about, the flags and, if not "", the exit statuses.
func printCommandHelp(w io.Writer, c *command, about string, fs *flag.FlagSet, exits string) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n", c.usage, strings.TrimSpace(about))
	if fs != nil {
		fmt.Fprintln(w, "\nFlags:")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
	if exits != "" {
		fmt.Fprintf(w, "\n%s", exits)
	}
}
