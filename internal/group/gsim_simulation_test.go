package group

import (
	"flag"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/elect/decide"
	"github.com/leasehold/leasehold/internal/fence"
)

var (
	gsimSeeds = flag.Int("gsim.seeds", 400, "number of seeded group histories TestGSim plays")
	gsimFirst = flag.Uint64("gsim.first", 1, "first seed TestGSim plays")
	gsimSeed  = flag.Uint64("gsim.seed", 0, "play only this seed of TestGSim, and print its whole history")
)

// gsimOutcome is what one history came to.
type gsimOutcome struct {
	seed  uint64
	err   error
	steps int
	late  float64 // how much of the convergence bound it used
	up    bool    // a clean scale-up
	// declines asked, observers started, and how much of takeoverBound the
	// tail's decline took (-1: none judged)
	declines, observers int
	take                float64
	// handovers in one write written, adopted by their heirs, observations
	// of one its heir could not date, and adopted Leases a plan withdrew
	// from again
	handovers, adopted, undated, rewithdrawn int
}

func playGSim(seed uint64, tracing bool) (*gsim, gsimOutcome) {
	s := newGSim(seed)
	s.tracing = tracing
	err := s.run()
	o := gsimOutcome{seed: seed, err: err, steps: s.steps, late: s.check.late, up: s.p.joiners > 0, declines: s.declines, observers: s.watchers, take: -1,
		handovers: s.handovers, adopted: s.adopted, undated: s.undated, rewithdrawn: s.rewithdrawn}
	if t := s.check.take; t != nil && t.done {
		o.take = s.check.takeLate
	}
	return s, o
}

// TestGSim plays seeded histories of the group simulator (see gsim) and
// fails on the first one the checker rejects, with its seed, the
// violation and the end of its trace. A seed replays exactly:
//
//	go test ./internal/group -run TestGSim -gsim.seed=N -v
func TestGSim(t *testing.T) {
	if *gsimSeed != 0 {
		s, o := playGSim(*gsimSeed, true)
		for _, line := range s.trace {
			t.Log(line)
		}
		t.Logf("seed %d: %+v", o.seed, s.p)
		if o.err != nil {
			t.Fatalf("seed %d: %v", o.seed, o.err)
		}
		return
	}
	began := time.Now()
	seeds := make(chan uint64)
	outcomes := make(chan gsimOutcome)
	var workers sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		workers.Go(func() {
			for seed := range seeds {
				_, o := playGSim(seed, false)
				outcomes <- o
			}
		})
	}
	go func() {
		defer close(seeds)
		for seed := *gsimFirst; seed < *gsimFirst+uint64(*gsimSeeds); seed++ {
			seeds <- seed
		}
	}()
	go func() {
		workers.Wait()
		close(outcomes)
	}()
	var (
		failed                         *gsimOutcome
		failedSeeds                    []uint64
		histories, scaled              int
		failures                       int
		steps                          int64
		late, take                     float64
		declines, observers, takeovers int
		handovers, adopted, undated    int
		rewithdrawn                    int
	)
	for o := range outcomes {
		histories++
		steps += int64(o.steps)
		late = max(late, o.late)
		if o.up {
			scaled++
		}
		declines += o.declines
		observers += o.observers
		handovers += o.handovers
		adopted += o.adopted
		undated += o.undated
		rewithdrawn += o.rewithdrawn
		if o.take >= 0 {
			takeovers++
			take = max(take, o.take)
		}
		if o.err != nil {
			failures++
			failedSeeds = append(failedSeeds, o.seed)
			if failed == nil || o.seed < failed.seed {
				failed = &o
			}
		}
	}
	if failed != nil {
		s, _ := playGSim(failed.seed, true)
		tail := s.trace[max(len(s.trace)-80, 0):]
		slices.Sort(failedSeeds)
		t.Fatalf("%d of %d histories failed (seeds %v); the first, seed %d: %v\n… last %d lines of its history:\n%s\nreplay: go test ./internal/group -run TestGSim -gsim.seed=%d -v",
			failures, histories, failedSeeds[:min(len(failedSeeds), 20)], failed.seed, failed.err, len(tail), strings.Join(tail, "\n"), failed.seed)
	}
	t.Logf("%d histories (seeds %d–%d; %d clean scale-ups; %d declines, %d observers), %d steps, in %v: no violation; the slowest convergence took %.0f%% of its bound, the slowest of %d takeovers of a declined Lease %.0f%% of its",
		histories, *gsimFirst, *gsimFirst+uint64(*gsimSeeds)-1, scaled, declines, observers, steps, time.Since(began).Round(time.Millisecond), 100*late, takeovers, 100*take)
	t.Logf("handovers in one write: %d written, %d adopted by their heirs without writing (%d withdrawn again by a plan that did not want them); %d observations of one by its heir could not be dated",
		handovers, adopted, rewithdrawn, undated)
	// About two histories in five hand over, each several times: so many
	// seeds without one adopted handover means the path is not modelled.
	if histories >= 100 && adopted == 0 {
		t.Fatalf("no handover in one write was adopted in %d histories (%d written): the simulation does not reach that path", histories, handovers)
	}
}

// TestGSimScaleUp64 is the scale-up of issue 12's benchmark, simulated:
// 64 shards held by one member, then 3 more join together on a healthy
// network. Exactly 48 Leases change hands, and each member ends with 16.
func TestGSimScaleUp64(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		rng := rand.New(rand.NewPCG(seed, 64))
		t0 := gsimTimings[rng.IntN(len(gsimTimings))]
		p := gparams{
			timing: decide.Config{
				Namespace: "ns", LeaseDuration: t0[0], RenewDeadline: t0[1], RetryPeriod: t0[2],
				ReleaseOnStop: true,
			},
			leases:  64,
			latency: time.Duration(1+rng.IntN(20)) * time.Millisecond,
			drift:   0.9 * fence.MaxClockDrift(t0[0], t0[1]) * rng.Float64(),
		}
		p.cleanScaleUp(3)
		s := buildGSim(seed, rng, rand.New(rand.NewPCG(seed, 0xdec1)), p)
		if err := s.run(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if len(s.check.heldAt) != 64 {
			t.Fatalf("seed %d: not a clean scale-up", seed)
		}
		t.Logf("seed %d: 1 → 4 members, 64 Leases: fair share (%s) %v after the last member started (bound %v)",
			seed, s.check.shares(), (s.check.converged - s.check.quietFrom).Round(time.Millisecond), s.check.bound())
	}
}
