package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/leasehold/leasehold/internal/logging"
	"github.com/leasehold/leasehold/internal/runner"
)

// runCommand is `leasehold run [flags] -- command [args...]` (args are
// those after "run"): it runs the command while this instance leads (see
// internal/runner) and returns the runner's exit status.
func runCommand(args []string, stdout, stderr io.Writer) int {
	opts, err := runner.ParseArgs(args)
	if errors.Is(err, flag.ErrHelp) {
		runner.PrintDefaults(stdout)
		return runner.ExitOK
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return runner.ExitUsage
	}
	log := logging.New(stderr, "text", slog.LevelInfo).With("component", "leasehold-run")
	signals, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	run := runner.Run
	if opts.Each {
		run = runner.RunEach
	}
	return run(signals, runner.Config{
		Options: opts,
		Env:     os.Environ(),
		Stdin:   os.Stdin,
		Stdout:  os.Stdout,
		Stderr:  os.Stderr,
		Logger:  log,
	})
}
