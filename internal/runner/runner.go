package runner

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os/exec"
	"time"

	"k8s.io/utils/clock"

	"github.com/leasehold/leasehold/internal/fence"
	"github.com/leasehold/leasehold/pkg/client"
)

// Exit statuses of the runner itself; otherwise it exits with the
// command's status.
const (
	ExitOK     = 0
	ExitFailed = 1 // the command cannot be started
	ExitUsage  = 2 // a command line that breaks a rule
)

// Config is a runner's set-up: the command line plus what the process
// provides.
type Config struct {
	Options

	// Env is the command's inherited environment (os.Environ()), to which
	// LEASEHOLD_FENCING_TOKEN and LEASEHOLD_TERM are added.
	Env []string
	// The command's standard streams; nil means the null device.
	Stdin          io.Reader
	Stdout, Stderr io.Writer

	Logger *slog.Logger // nil: discard
	Clock  clock.Clock  // nil: the real clock
	Client *http.Client // nil: a client that never uses a proxy
}

// term is one term of this instance as the runner sees it.
type term struct {
	token  fence.Token
	number int32
	// since is when the runner first saw this instance lead this term.
	since time.Time
	// deadline is the runner's own, conservative end of the term's
	// validity: the largest (request sent + validForMs) of its answers.
	deadline time.Time
}

// runner is the state of one Run.
type runner struct {
	cfg     Config
	path    string // the resolved command
	clock   clock.Clock
	log     *slog.Logger
	watcher *watcher

	cur             *term    // nil while this instance is not seen leading
	proc            *process // nil while the command is not running
	fresh           bool     // ask the next request without index: it must not block
	start, deadline alarm

	holder *holder
	// noHolds: the sidecar answered POST /v1/hold with 404 (a leasehold
	// older than holds), so commands start without a hold, as before.
	noHolds bool
	// refused is the token of the last term whose hold the sidecar refused:
	// that term is ending, and its command never starts.
	refused fence.Token
	// holdRetryAt is when to ask again for a hold on the current term after
	// a request got no answer; holdRetry paces those requests.
	holdRetryAt time.Time
	holdRetry   client.Backoff
}

// Run waits for leadership, runs the command while this instance leads,
// stops it when leadership ends, and waits again, as the package doc
// describes, until the command ends on its own or ctx ends (the runner's
// SIGTERM or SIGINT). It returns the exit status for the runner's process.
// Every goroutine it starts has ended when it returns, and so has the
// command.
func Run(ctx context.Context, cfg Config) int {
	r := &runner{cfg: cfg, clock: cfg.Clock, log: cfg.Logger}
	if r.clock == nil {
		r.clock = clock.RealClock{}
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.start.clock, r.deadline.clock = r.clock, r.clock
	path, err := exec.LookPath(cfg.Command[0])
	if err != nil {
		r.log.Error("cannot start the command", "command", cfg.Command[0], "err", err)
		return ExitFailed
	}
	r.path = path
	sc, err := newSidecar(cfg.Sidecar, cfg.Client, cfg.Lease)
	if err != nil {
		r.log.Error("cannot ask the sidecar", "sidecar", cfg.Sidecar.Redacted(), "err", err)
		return ExitFailed
	}
	r.watcher = newWatcher(sc, r.clock, r.log)
	defer r.watcher.close()
	r.holder = newHolder(sc, r.log)
	defer r.holder.close()
	defer r.start.stop()
	defer r.deadline.stop()
	r.log.Info("waiting for leadership", "sidecar", cfg.Sidecar.Redacted(), "grace", cfg.Grace, "startDelay", cfg.StartDelay, "command", cfg.Command[0])
	return r.loop(ctx)
}

// loop handles one event at a time: an answer of the sidecar, the start
// delay or the validity deadline passing, the command exiting, or ctx
// ending.
func (r *runner) loop(ctx context.Context) int {
	for {
		if r.watcher.ask(ctx, r.wait(), r.fresh) {
			r.fresh = false
		}
		var why string // why the running command must stop, if it must
		select {
		case <-ctx.Done():
			if r.proc == nil {
				r.log.Info("signal received: exiting (no command running)")
				return ExitOK
			}
			r.log.Info("signal received: stopping the command", "pid", r.proc.pid())
			return r.stop("the runner received a signal")

		case <-r.proc.Done():
			code := r.proc.status()
			r.log.Info("command exited on its own: exiting with its status", "pid", r.proc.pid(), "status", code)
			r.proc.killLeftovers(r.log)
			r.proc.endHold()
			return code

		case a := <-r.watcher.results:
			r.watcher.received(a)
			why = r.observe(a)

		case <-r.deadline.C():
			r.deadline.stop()

		case <-r.start.C():
			r.start.stop()
			if r.startable() && r.holder.pending == 0 {
				if r.noHolds {
					if err := r.run(nil); err != nil {
						return ExitFailed
					}
				} else {
					r.holder.ask(r.cur.token) // the command starts once the hold is granted
				}
			}

		case res := <-r.holder.results:
			r.holder.received()
			if err := r.held(res); err != nil {
				return ExitFailed
			}
		}

		if r.cur != nil && !r.clock.Now().Before(r.cur.deadline) {
			r.log.Warn("validity ran out without a renewed answer from the sidecar", "fencingToken", r.cur.token)
			why = "the validity deadline passed"
			r.cur = nil
		}
		if r.proc != nil && (r.cur == nil || r.cur.token != r.proc.token) {
			code, stopped := r.stopped(why)
			if !stopped {
				return code // it exited on its own meanwhile
			}
			if ctx.Err() != nil {
				r.log.Info("signal received while stopping the command: exiting with its status", "status", code)
				return code
			}
			r.log.Info("waiting for leadership again")
		}
		if r.cur == nil {
			r.holder.abandon(0)
			r.deadline.stop()
			r.start.stop()
			continue
		}
		r.holder.abandon(r.cur.token)
		r.deadline.set(r.cur.deadline)
		if r.proc == nil && r.holder.pending == 0 && r.cur.token != r.refused {
			r.start.set(later(r.cur.since.Add(r.cfg.StartDelay), r.holdRetryAt))
		} else {
			r.start.stop()
		}
	}
}

// startable reports whether the command may start now for the current
// term, its start delay having passed: it does not run, and this instance
// leads a term with validity left.
func (r *runner) startable() bool {
	return r.proc == nil && r.cur != nil && r.clock.Now().Before(r.cur.deadline)
}

// held takes in the outcome of a hold request: the command starts under a
// granted hold if its term is still current; a sidecar without holds is
// noted (warned once) and the command starts without; a refusal (the term
// is ending) means the term's command never starts; no answer is asked
// again after a backoff. It returns an error only if the command cannot be
// started.
func (r *runner) held(res holdResult) error {
	current := r.startable() && r.cur.token == res.token
	_, refused := errors.AsType[*client.Error](res.err)
	switch {
	case res.err == nil:
		r.holdRetry.Reset()
		if !current {
			r.log.Debug("hold granted for a term that is over: ending it", "fencingToken", res.token)
			res.hold.close()
			return nil
		}
		return r.run(res.hold)
	case errors.Is(res.err, errHoldsUnsupported):
		r.noHolds = true
		r.log.Warn("the sidecar does not support holds (a leasehold older than POST /v1/hold): commands start without one, "+
			"so a release does not wait for the command to stop and only the start delay keeps runs apart; upgrade the sidecar",
			"err", res.err)
		if current {
			return r.run(nil)
		}
	case refused:
		r.refused = res.token
		r.log.Info("the sidecar refused to hold the term (it is ending): the command does not start for it",
			"fencingToken", res.token, "err", res.err)
	case current:
		delay, _ := r.holdRetry.Delay(res.err, r.clock.Now())
		r.holdRetryAt = r.clock.Now().Add(delay)
		r.log.Warn("the sidecar did not grant the hold; asking again", "fencingToken", res.token, "err", res.err, "retryIn", delay)
	}
	return nil
}

// observe takes in an answer and reports why the running command (if any)
// must stop, "" if it need not.
//
// The deadline an answer gives, sent + validForMs, is as old as the
// request: a long-poll that blocked for a while gives little or none. So an
// answer to a long-poll that shows this instance leading and took longer
// than minWait to come back is followed at once by a request that does not
// block (fresh), whose deadline is then nearly the whole validity.
func (r *runner) observe(a answer) string {
	st := a.status
	now := r.clock.Now()
	r.fresh = st.Leader && a.indexed && now.Sub(a.sent) > minWait
	if !st.Leader || st.FencingToken == 0 { // 0 is "unknown", never a term's token
		if r.cur != nil {
			r.log.Info("this instance no longer leads", "fencingToken", r.cur.token, "holder", st.Holder)
			r.cur = nil
		}
		return "leadership was lost"
	}
	until := a.sent.Add(time.Duration(st.ValidForMs) * time.Millisecond)
	if r.cur != nil && r.cur.token == st.FencingToken {
		if until.After(r.cur.deadline) {
			r.cur.deadline = until
		}
		return ""
	}
	r.cur = nil
	why := "a new term began: the command's token is stale"
	if !until.After(now) {
		// Leading, but the answer is too old to vouch for any validity
		// left: the fresh answer asked next will tell.
		r.log.Debug("this instance leads, but the answer is too old: asking again", "fencingToken", st.FencingToken)
		return why
	}
	r.cur = &term{token: st.FencingToken, number: st.Term, since: now, deadline: until}
	r.holdRetryAt = time.Time{}
	r.holdRetry.Reset()
	r.log.Info("this instance leads: the command starts after the start delay",
		"fencingToken", st.FencingToken, "term", st.Term, "validForMs", until.Sub(now).Milliseconds(), "startDelay", r.cfg.StartDelay)
	return why
}

// wait is the long-poll wait to ask for: half the validity left while this
// instance leads, so that a renewed validity arrives before the deadline
// (the server adds at most wait/16), else the longest.
func (r *runner) wait() time.Duration {
	if r.cur == nil {
		return maxWait
	}
	return min(max(r.cur.deadline.Sub(r.clock.Now())/2, minWait), maxWait)
}

// run starts the command for the current term, under h (nil when the
// sidecar has no holds), which it ends once the command has exited. A
// command that cannot be started is logged, and h ended.
func (r *runner) run(h *hold) error {
	p, err := startProcess(r.path, r.cfg.Command, r.cfg.Env, r.cfg.Stdin, r.cfg.Stdout, r.cfg.Stderr, r.cur, r.clock.Now())
	if err != nil {
		h.close()
		r.log.Error("cannot start the command", "command", r.cfg.Command[0], "err", err)
		return err
	}
	p.hold = h
	r.proc = p
	r.log.Info("command started", "pid", p.pid(), "fencingToken", r.cur.token, "term", r.cur.number,
		"validForMs", r.cur.deadline.Sub(r.clock.Now()).Milliseconds(), "held", h != nil)
	return nil
}

// stopped stops the running command because of why; it reports the
// command's status, and false if the command had exited on its own first.
func (r *runner) stopped(why string) (int, bool) {
	p := r.proc
	r.proc = nil
	r.log.Warn("stopping the command: SIGTERM to its process group", "reason", why, "pid", p.pid(), "fencingToken", p.token)
	if !p.stop(r.clock, r.cfg.Grace, r.log) {
		code := p.status()
		r.log.Info("command exited on its own: exiting with its status", "pid", p.pid(), "status", code)
		p.killLeftovers(r.log)
		p.endHold()
		return code, false
	}
	p.endHold()
	code := p.status()
	r.log.Info("command stopped", "pid", p.pid(), "status", code, "ranFor", r.clock.Since(p.started).Round(time.Millisecond))
	return code, true
}

// stop stops the running command because of why and returns its status.
func (r *runner) stop(why string) int {
	code, _ := r.stopped(why)
	return code
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
