package decide

import (
	"flag"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var (
	simSeeds = flag.Int("sim.seeds", 10000, "number of seeded histories TestSimulation plays")
	simFirst = flag.Uint64("sim.first", 1, "first seed TestSimulation plays")
	simSeed  = flag.Uint64("sim.seed", 0, "play only this seed, and print its whole history")
)

// TestSimulation plays seeded histories of the simulator (see sim) and
// fails on the first history the checker rejects, printing its seed, the
// violation and the end of its trace. It logs how many one-write handovers
// landed and how many terms were adopted from one, and fails if a run of
// at least minAdoptionSeeds histories adopted none: the path would then go
// unchecked. A seed replays exactly:
//
//	go test ./internal/elect/decide -run TestSimulation -sim.seed=N -v
func TestSimulation(t *testing.T) {
	if *simSeed != 0 {
		s := newSim(*simSeed)
		s.tracing = true
		err := s.run()
		for _, line := range s.trace {
			t.Log(line)
		}
		t.Logf("seed %d: %+v", *simSeed, s.params)
		t.Logf("%d one-write handovers landed, %d terms adopted (%d while withdrawn)", s.handovers, s.check.adopted, s.check.adoptedWithdrawn)
		if err != nil {
			t.Fatalf("seed %d: %v", *simSeed, err)
		}
		return
	}
	var (
		next             atomic.Uint64
		failed           atomic.Bool
		mu               sync.Mutex
		firstSeed        uint64
		firstErr         error
		firstTrace       []string
		histories, steps atomic.Int64
		handovers        atomic.Int64
		adopted          atomic.Int64
		adoptedWithdrawn atomic.Int64
	)
	next.Store(*simFirst)
	last := *simFirst + uint64(*simSeeds)
	started := time.Now()
	var workers sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		workers.Go(func() {
			for !failed.Load() {
				seed := next.Add(1) - 1
				if seed >= last {
					return
				}
				s := newSim(seed)
				err := s.run()
				histories.Add(1)
				steps.Add(int64(s.steps))
				handovers.Add(int64(s.handovers))
				adopted.Add(int64(s.check.adopted))
				adoptedWithdrawn.Add(int64(s.check.adoptedWithdrawn))
				if err != nil {
					replay := newSim(seed) // the same history, traced
					replay.tracing = true
					replay.run()
					mu.Lock()
					if firstErr == nil || seed < firstSeed {
						firstSeed, firstErr, firstTrace = seed, err, replay.trace
					}
					mu.Unlock()
					failed.Store(true)
				}
			}
		})
	}
	workers.Wait()
	if firstErr != nil {
		tail := firstTrace[max(len(firstTrace)-60, 0):]
		t.Fatalf("seed %d: %v\n… last %d steps of its history:\n%s\nreplay: go test ./internal/elect/decide -run TestSimulation -sim.seed=%d -v",
			firstSeed, firstErr, len(tail), strings.Join(tail, "\n"), firstSeed)
	}
	t.Logf("%d histories (seeds %d–%d), %d steps, in %v: no violation", histories.Load(), *simFirst, last-1, steps.Load(), time.Since(started).Round(time.Millisecond))
	t.Logf("%d one-write handovers landed, %d terms adopted from one (%d by a withdrawn instance, AcceptHandovers)", handovers.Load(), adopted.Load(), adoptedWithdrawn.Load())
	if histories.Load() >= minAdoptionSeeds && (adopted.Load() == 0 || adoptedWithdrawn.Load() == 0) {
		t.Fatalf("%d histories adopted %d handovers, %d while withdrawn: the one-write handover went unchecked", histories.Load(), adopted.Load(), adoptedWithdrawn.Load())
	}
}

// minAdoptionSeeds is the number of histories in which terms adopted from
// a one-write handover, by candidates and by withdrawn instances, are
// certain to occur.
const minAdoptionSeeds = 1000
