package runner

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/leasehold/leasehold/pkg/client"
)

// Defaults of the command line.
const (
	DefaultSidecar = client.DefaultURL
	DefaultGrace   = 3 * time.Second
	// DefaultStartMargin is how much longer than grace the start delay is
	// by default: time for the previous holder's runner to learn of its
	// loss (one long-poll answer on loopback) and for its SIGKILL timer to
	// fire on a loaded node.
	DefaultStartMargin = time.Second
)

// Usage is the synopsis of `leasehold run`.
const Usage = "usage: leasehold run [--addr URL] [--grace DURATION] [--start-delay DURATION] [--lease NAME | --each] -- COMMAND [ARG...]"

// Options are what the command line of `leasehold run` sets.
type Options struct {
	// Sidecar is the base URL of the sidecar's API listener.
	Sidecar *url.URL
	// Grace is the time between SIGTERM and SIGKILL when the command is
	// stopped.
	Grace time.Duration
	// StartDelay is how long this instance must be seen leading one term
	// before the command starts; longer than Grace (see the package doc).
	StartDelay time.Duration
	// Lease, for a sidecar with a lease group, is the Lease whose holding
	// runs the command; "" for a sidecar with one Lease.
	Lease string
	// Each runs one copy of the command per Lease of the sidecar's group
	// that this instance holds (RunEach).
	Each bool
	// Command is the command to run and its arguments; never empty.
	Command []string
}

// UsageError is a command line that breaks a rule. Its message is one line
// that names the flag or argument and the rule.
type UsageError struct{ msg string }

func (e *UsageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &UsageError{msg: "leasehold run: " + fmt.Sprintf(format, args...)}
}

// ParseArgs parses the arguments that follow `run`. It returns a
// *UsageError for a command line that breaks a rule, and flag.ErrHelp for
// -h or --help (print PrintDefaults then).
func ParseArgs(args []string) (Options, error) {
	fs, addr, grace, startDelay, lease, each := flagSet()
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return Options{}, err
		}
		return Options{}, usagef("%v", err)
	}
	rest := fs.Args()
	consumed := len(args) - len(rest)
	if consumed == 0 || args[consumed-1] != "--" {
		return Options{}, usagef("missing -- before the command (%s)", Usage)
	}
	if len(rest) == 0 || rest[0] == "" {
		return Options{}, usagef("missing command after -- (%s)", Usage)
	}
	addrFlag := "--addr"
	addrSet, aliasSet := false, false
	fs.Visit(func(f *flag.Flag) {
		addrSet = addrSet || f.Name == "addr"
		aliasSet = aliasSet || f.Name == "sidecar"
	})
	if addrSet && aliasSet {
		return Options{}, usagef("--addr and --sidecar: give one (--sidecar is another name of --addr)")
	}
	if aliasSet {
		addrFlag = "--sidecar"
	}
	u, err := client.ParseAddr(*addr)
	if err != nil {
		return Options{}, usagef("%s %v", addrFlag, err)
	}
	if *grace <= 0 {
		return Options{}, usagef("--grace %s: must be positive", *grace)
	}
	delay := *startDelay
	if delay == 0 {
		delay = *grace + DefaultStartMargin
	} else if delay <= *grace {
		return Options{}, usagef("--start-delay %s: must be longer than --grace (%s), so that a predecessor stopped at a handover has been SIGKILLed before this command starts", delay, *grace)
	}
	if *lease != "" && *each {
		return Options{}, usagef("--lease %q and --each: choose one (one Lease of the group, or a copy per Lease held)", *lease)
	}
	leaseSet := false
	fs.Visit(func(f *flag.Flag) { leaseSet = leaseSet || f.Name == "lease" })
	if leaseSet && (*lease == "" || strings.ContainsAny(*lease, "/?#%")) {
		return Options{}, usagef("--lease %q: want the name of a Lease of the sidecar's group", *lease)
	}
	return Options{Sidecar: u, Grace: *grace, StartDelay: delay, Lease: *lease, Each: *each, Command: rest}, nil
}

// PrintDefaults writes the synopsis and the flags to w.
func PrintDefaults(w io.Writer) {
	fs, _, _, _, _, _ := flagSet()
	fs.SetOutput(w)
	fmt.Fprintln(w, Usage)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Runs COMMAND while this instance leads, as its sidecar reports (docs/run.md).")
	fmt.Fprintln(w, "With a lease group: --lease NAME runs it while this instance holds that Lease;")
	fmt.Fprintln(w, "--each runs one copy per Lease held, with LEASEHOLD_LEASE set to its name.")
	fmt.Fprintln(w)
	fs.PrintDefaults()
}

func flagSet() (*flag.FlagSet, *string, *time.Duration, *time.Duration, *string, *bool) {
	fs := flag.NewFlagSet("leasehold run", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported by the caller, on one line
	addr := fs.String("addr", DefaultSidecar, "the leasehold sidecar's API at `URL` (http:// or https://, no path) or HOST:PORT")
	fs.StringVar(addr, "sidecar", DefaultSidecar, "another name of --addr, for scripts written before it")
	grace := fs.Duration("grace", DefaultGrace, "time between SIGTERM and SIGKILL when the command is stopped")
	startDelay := fs.Duration("start-delay", 0,
		"how long this instance must be seen leading before the command starts; longer than --grace (default --grace + 1s)")
	lease := fs.String("lease", "", "with a lease group: run while this instance holds the Lease `NAME`")
	each := fs.Bool("each", false, "with a lease group: run one copy of the command per Lease held (LEASEHOLD_LEASE names it)")
	return fs, addr, grace, startDelay, lease, each
}
