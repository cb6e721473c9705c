package runner

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/leasehold/leasehold/pkg/client"
)

// EnvLease names, in the environment of each copy `leasehold run --each`
// starts, the Lease that copy runs for.
const EnvLease = "LEASEHOLD_LEASE"

// restartDelay is how long RunEach waits before it follows a Lease again
// after its copy of the command exited on its own.
const restartDelay = time.Second

// RunEach is `leasehold run --each`: it asks the sidecar for its group's
// Leases (GET /v1/leases, retried until it answers), then runs, for each
// Lease, a runner of its own (Run with Options.Lease set) whose command
// gets LEASEHOLD_LEASE=<name> besides LEASEHOLD_FENCING_TOKEN and
// LEASEHOLD_TERM. So a copy runs while, and only while, this instance holds
// its Lease, under every rule of the package doc (start delay, hold,
// validity deadline, stop at once on a loss): copies of one Lease in
// different pods never overlap, as single commands never do. A copy that
// exits on its own is followed again after restartDelay, and starts again
// under the same rules. RunEach returns ExitOK once ctx ends and every copy
// has stopped, ExitFailed if the command cannot be found.
func RunEach(ctx context.Context, cfg Config) int {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sc, err := newSidecar(cfg.Sidecar, cfg.Client, "")
	if err != nil {
		log.Error("cannot ask the sidecar", "sidecar", cfg.Sidecar.Redacted(), "err", err)
		return ExitFailed
	}
	names, ok := groupLeases(ctx, sc, log)
	if !ok {
		return ExitOK // ctx ended before the sidecar answered
	}
	log.Info("running a copy of the command per Lease held", "leases", len(names))
	var copies sync.WaitGroup
	statuses := make(chan int, len(names))
	for _, name := range names {
		copies.Go(func() {
			c := cfg
			c.Lease, c.Each = name, false
			c.Env = append(slices.DeleteFunc(slices.Clone(cfg.Env), func(kv string) bool { return strings.HasPrefix(kv, EnvLease+"=") }), EnvLease+"="+name)
			c.Logger = log.With("lease", name)
			for {
				code := Run(ctx, c)
				if ctx.Err() != nil {
					return
				}
				if code == ExitFailed {
					statuses <- code
					return
				}
				c.Logger.Info("the command's copy exited on its own: following the Lease again", "status", code, "after", restartDelay)
				select {
				case <-ctx.Done():
					return
				case <-time.After(restartDelay):
				}
			}
		})
	}
	copies.Wait()
	close(statuses)
	for code := range statuses {
		return code
	}
	return ExitOK
}

// groupLeases asks GET /v1/leases until the sidecar answers 200 or ctx
// ends, again after failures as client.Backoff says, and returns the names
// of its Leases.
func groupLeases(ctx context.Context, sc *sidecar, log *slog.Logger) ([]string, bool) {
	defer sc.client.CloseIdleConnections()
	var backoff client.Backoff
	for {
		names, err := sc.leaseNames(ctx)
		if err == nil {
			return names, true
		}
		delay, _ := backoff.Delay(err, time.Now())
		log.Warn("cannot list the sidecar's Leases; retrying", "err", err, "retryIn", delay)
		select {
		case <-ctx.Done():
			return nil, false
		case <-time.After(delay):
		}
	}
}

// leaseNames asks GET /v1/leases once, giving up after requestSlack.
func (s *sidecar) leaseNames(ctx context.Context) ([]string, error) {
	all, err := s.client.Leases(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(all.Leases))
	for _, st := range all.Leases {
		names = append(names, st.Lease)
	}
	return names, nil
}
