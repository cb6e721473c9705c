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
	simSeeds  = flag.Int("sim.seeds", 6000, "number of seeded histories of the default fault mix TestSimulation plays")
	simStress = flag.Int("sim.stress", 4000, "number of seeded histories of the stress fault mix TestSimulation plays")
	simFirst  = flag.Uint64("sim.first", 1, "first seed TestSimulation plays, in each mix")
	simSeed   = flag.Uint64("sim.seed", 0, "play only this seed (of the mix -sim.mix), and print its whole history")
	simMixArg = flag.String("sim.mix", "default", "the fault mix of -sim.seed: default or stress")
)

// TestSimulation plays seeded histories of the simulator (see sim), under
// the default fault mix and under the stress mix, and fails on the first
// history of each that the checker rejects, printing its seed, the
// violation and the end of its trace. It logs how many one-write
// handovers landed, how many terms were adopted from one and how many
// fencing floors were judged, and fails if a run of at least
// minAdoptionSeeds histories adopted none or judged no floor: the path
// would then go unchecked. A seed replays exactly:
//
//	go test ./internal/elect/decide -run TestSimulation -sim.mix=stress -sim.seed=N -v
func TestSimulation(t *testing.T) {
	if *simSeed != 0 {
		mix, err := parseMix(*simMixArg)
		if err != nil {
			t.Fatal(err)
		}
		s := newSim(*simSeed, mix)
		s.tracing = true
		err = s.run()
		for _, line := range s.trace {
			t.Log(line)
		}
		t.Logf("seed %d (%s mix): %+v", *simSeed, mix, s.params)
		t.Logf("%d one-write handovers landed, %d terms adopted (%d while withdrawn), %d fencing floors judged", s.handovers, s.check.adopted, s.check.adoptedWithdrawn, s.check.floors)
		if err != nil {
			t.Fatalf("seed %d (%s mix): %v", *simSeed, mix, err)
		}
		return
	}
	t.Run("default", func(t *testing.T) { playSims(t, defaultMix, *simSeeds) })
	t.Run("stress", func(t *testing.T) { playSims(t, stressMix, *simStress) })
}

// playSims plays n histories of mix from seed -sim.first on, on every
// core, and fails on the smallest failing seed among those played.
func playSims(t *testing.T, mix simMix, n int) {
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
		floors           atomic.Int64
	)
	next.Store(*simFirst)
	last := *simFirst + uint64(n)
	started := time.Now()
	var workers sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		workers.Go(func() {
			for !failed.Load() {
				seed := next.Add(1) - 1
				if seed >= last {
					return
				}
				s := newSim(seed, mix)
				err := s.run()
				histories.Add(1)
				steps.Add(int64(s.steps))
				handovers.Add(int64(s.handovers))
				adopted.Add(int64(s.check.adopted))
				adoptedWithdrawn.Add(int64(s.check.adoptedWithdrawn))
				floors.Add(int64(s.check.floors))
				if err != nil {
					replay := newSim(seed, mix) // the same history, traced
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
		t.Fatalf("%s mix, seed %d: %v\n… last %d steps of its history:\n%s\nreplay: go test ./internal/elect/decide -run TestSimulation -sim.mix=%s -sim.seed=%d -v",
			mix, firstSeed, firstErr, len(tail), strings.Join(tail, "\n"), mix, firstSeed)
	}
	t.Logf("%s mix: %d histories (seeds %d–%d), %d steps, in %v: no violation", mix, histories.Load(), *simFirst, last-1, steps.Load(), time.Since(started).Round(time.Millisecond))
	t.Logf("%d one-write handovers landed, %d terms adopted from one (%d by a withdrawn instance, AcceptHandovers)", handovers.Load(), adopted.Load(), adoptedWithdrawn.Load())
	t.Logf("%d fencing floors of term-starting writes judged", floors.Load())
	if histories.Load() >= minAdoptionSeeds && (adopted.Load() == 0 || adoptedWithdrawn.Load() == 0) {
		t.Fatalf("%d histories adopted %d handovers, %d while withdrawn: the one-write handover went unchecked", histories.Load(), adopted.Load(), adoptedWithdrawn.Load())
	}
	if histories.Load() >= minAdoptionSeeds && floors.Load() == 0 {
		t.Fatalf("%d histories judged no fencing floor: the floor went unchecked", histories.Load())
	}
}

// minAdoptionSeeds is the number of histories in which terms adopted from
// a one-write handover, by candidates and by withdrawn instances, are
// certain to occur.
const minAdoptionSeeds = 1000
