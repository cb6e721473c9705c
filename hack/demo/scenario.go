package main

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/leasehold/leasehold/internal/fence"
	"github.com/leasehold/leasehold/internal/httpapi"
	"github.com/leasehold/leasehold/internal/testing/fleet"
)

// The demo's timings: short, but legal (renewDeadline > 1.2 × retryPeriod,
// renewDeadline + retryPeriod < leaseDuration). Production defaults are
// 15s/10s/2s.
const (
	leaseDuration = 6 * time.Second
	renewDeadline = 4 * time.Second
	retryPeriod   = 1 * time.Second
)

const (
	// electionBound is how long any election may take before the demo
	// gives up: generous, for loaded CI machines.
	electionBound = 30 * time.Second
	// exitBound is how long a SIGTERMed sidecar may take to exit: it
	// promises renewDeadline; a second more for a loaded machine.
	exitBound = renewDeadline + time.Second
)

// Pauses that let a newcomer read the table.
const (
	watchRenewals = 3 * time.Second
	afterChange   = 2 * time.Second
)

var names = []string{"alpha", "bravo", "charlie"}

// term is one leader's term as the demo saw it begin.
type term struct {
	name   string
	status httpapi.Status
}

// results is what the scenario measured.
type results struct {
	terms              []term // in order: elected, after failover, after handover
	failover, handover time.Duration
	failoverVictim     string
	handoverVictim     string
	handoverExit       time.Duration // from the SIGTERM to the process's exit
	problems           []string      // each one fails the demo
}

// scenario runs the three steps on running instances, narrated on v.
type scenario struct {
	v         *view
	instances []*fleet.Instance
	res       results
}

func (s *scenario) run(ctx context.Context) error {
	leader, err := s.elect(ctx)
	if err != nil {
		return err
	}
	if leader, err = s.failover(ctx, leader); err != nil {
		return err
	}
	if err := s.handover(ctx, leader); err != nil {
		return err
	}
	s.fencing()
	return sleep(ctx, afterChange)
}

// elect is step 1: three candidates, one leader.
func (s *scenario) elect(ctx context.Context) (*fleet.Instance, error) {
	s.v.Step(fmt.Sprintf("Step 1: three candidates, one wins. The Lease does not exist yet: the sidecars create it empty "+
		"and wait one leaseDuration (%v), since a newcomer cannot know that nobody still leads; then each tries to write "+
		"itself into it, and the apiserver lets exactly one write win (optimistic concurrency). The leader renews every %v: "+
		"each renewal restarts its \"valid for\" at %v and the followers' \"lease free in\" at %v.",
		leaseDuration, retryPeriod, renewDeadline, leaseDuration))
	ctx, cancel := context.WithTimeout(ctx, electionBound)
	defer cancel()
	leader, st, err := fleet.WaitLeader(ctx, s.instances, 20*time.Millisecond)
	if err != nil {
		return nil, fmt.Errorf("no leader among %d candidates within %v: %w", len(s.instances), electionBound, err)
	}
	s.res.terms = append(s.res.terms, term{leader.Name, st})
	s.v.Printf("✓ %s leads with fencing token %v, term %d; %s follow", leader.Name, st.FencingToken, st.Term, namesOf(s.alive(leader)))
	return leader, sleep(ctx, watchRenewals)
}

// failover is step 2: SIGKILL the leader; a survivor takes over once the
// Lease expires.
func (s *scenario) failover(ctx context.Context, victim *fleet.Instance) (*fleet.Instance, error) {
	s.v.Step(fmt.Sprintf("Step 2: SIGKILL the leader — nobody releases the Lease, so the others wait for it to expire "+
		"(leaseDuration, %v after they last saw it change), judged by their own clocks…", leaseDuration))
	survivors := s.alive(victim)
	s.v.Printf("→ SIGKILL %s (%s each hold GET /v1/leader?wait=1m open, to time the takeover)", victim.Name, namesOf(survivors))
	t, err := measureTakeover(ctx, survivors, electionBound, func() error { return victim.Signal(syscall.SIGKILL) })
	if err != nil {
		return nil, fmt.Errorf("failover after SIGKILL of %s: %w", victim.Name, err)
	}
	s.res.failover, s.res.failoverVictim = t.took, victim.Name
	s.newTerm(t, fmt.Sprintf("failover: %s leads %s after the SIGKILL", t.leader.Name, measured(t.took)))
	return t.leader, sleep(ctx, afterChange)
}

// handover is step 3: SIGTERM the leader; it releases the Lease and a
// watching candidate takes it at once.
func (s *scenario) handover(ctx context.Context, victim *fleet.Instance) error {
	s.v.Step("Step 3: SIGTERM the new leader — it releases the Lease on the way out; the watchers take it within milliseconds.")
	survivors := s.alive(victim)
	exited := make(chan time.Time, 1)
	go func() { <-victim.Exited(); exited <- time.Now() }()
	s.v.Printf("→ SIGTERM %s (%s holds GET /v1/leader?wait=1m open, to time the takeover)", victim.Name, namesOf(survivors))
	t, err := measureTakeover(ctx, survivors, electionBound, func() error { return victim.Signal(syscall.SIGTERM) })
	if err != nil {
		return fmt.Errorf("handover after SIGTERM of %s: %w", victim.Name, err)
	}
	s.res.handover, s.res.handoverVictim = t.took, victim.Name
	s.newTerm(t, fmt.Sprintf("handover: %s leads %s after the SIGTERM", t.leader.Name, measured(t.took)))

	select {
	case at := <-exited:
		s.res.handoverExit = at.Sub(t.sent)
		if code := victim.ExitCode(); code != 0 {
			s.problem(fmt.Sprintf("%s exited with status %d after SIGTERM, want 0", victim.Name, code))
		} else {
			s.v.Printf("✓ %s exited with status 0, %s after the SIGTERM", victim.Name, measured(s.res.handoverExit))
		}
	case <-time.After(exitBound - time.Since(t.sent)):
		s.problem(fmt.Sprintf("%s still running %v after SIGTERM", victim.Name, exitBound))
	case <-ctx.Done():
		return ctx.Err()
	}
	return sleep(ctx, afterChange)
}

// fencing is the closing step: the tokens of the three terms.
func (s *scenario) fencing() {
	s.v.Step("Fencing tokens only grow: " + joinTokens(tokensOf(s.res.terms), " → ") + ". The app sends its token with every write; " +
		"storage that rejects a token smaller than the largest it has seen shuts out a deposed leader's late writes.")
}

// newTerm records a takeover's new term, checks that its token is larger
// than the previous term's, and asks every other instance at once whether
// it leads: the answers join the view's, which checkOverlap judges at the
// end (an answer leader:true is an overlap only if it is certain).
func (s *scenario) newTerm(t takeover, what string) {
	prev := s.res.terms[len(s.res.terms)-1]
	s.res.terms = append(s.res.terms, term{t.leader.Name, t.status})
	before, after := prev.status.FencingToken, t.status.FencingToken
	mark := "✓"
	if after <= before {
		mark = "✗"
	}
	s.v.Printf("%s %s; fencing token %v → %v, term %d → %d", mark, what, before, after, prev.status.Term, t.status.Term)
	if after <= before {
		s.problem(fmt.Sprintf("fencing token did not increase: %v → %v", before, after))
	}
	for _, inst := range s.alive(t.leader) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		sent := time.Now()
		st, err := inst.Status(ctx)
		cancel()
		if err == nil {
			s.v.record(inst, sent, time.Now(), st)
		}
	}
}

// problem reports a failed check; the demo goes on and exits non-zero.
func (s *scenario) problem(msg string) {
	s.res.problems = append(s.res.problems, msg)
	s.v.Printf("✗ %s", msg)
}

// alive lists the instances still running, except skip.
func (s *scenario) alive(skip *fleet.Instance) []*fleet.Instance {
	var out []*fleet.Instance
	for _, inst := range s.instances {
		select {
		case <-inst.Exited():
			continue
		default:
		}
		if inst != skip {
			out = append(out, inst)
		}
	}
	return out
}

// namesOf joins the instances' names: "a", "a and b", "a, b and c".
func namesOf(instances []*fleet.Instance) string {
	var names []string
	for _, inst := range instances {
		names = append(names, inst.Name)
	}
	return joinNames(names...)
}

// joinNames joins names: "a", "a and b", "a, b and c".
func joinNames(names ...string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// tokensOf lists the terms' fencing tokens, in order.
func tokensOf(terms []term) []fence.Token {
	var tokens []fence.Token
	for _, t := range terms {
		tokens = append(tokens, t.status.FencingToken)
	}
	return tokens
}

// joinTokens joins tokens with sep: "812 → 845 → 871".
func joinTokens(tokens []fence.Token, sep string) string {
	var s []string
	for _, t := range tokens {
		s = append(s, t.String())
	}
	return strings.Join(s, sep)
}

// increasing reports whether tokens strictly increase.
func increasing(tokens []fence.Token) bool {
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			return false
		}
	}
	return true
}

// measured formats a measured duration: milliseconds below a second, else seconds.
func measured(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// sleep waits d, or less if ctx ends (then it returns ctx's error).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
