package decide

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// simMix is a fault mix: which faults a history draws, and how often.
type simMix int

const (
	// defaultMix: a fault every 0.2–2.2 lease durations, drawn evenly
	// among every kind the history allows (sim.fault).
	defaultMix simMix = iota
	// stressMix: a fault every 0.05–0.55 lease durations, half of them
	// handovers in one write to a named successor (sim.stressFault).
	stressMix
)

func (m simMix) String() string {
	if m == stressMix {
		return "stress"
	}
	return "default"
}

// parseMix reads a mix's name, as String writes it.
func parseMix(name string) (simMix, error) {
	for _, m := range []simMix{defaultMix, stressMix} {
		if m.String() == name {
			return m, nil
		}
	}
	return 0, fmt.Errorf("unknown fault mix %q: want default or stress", name)
}

// stress redraws p for the stress mix, which aims at the paths that the
// default mix reaches seldom: a successor that is out of the election
// (withdrawn, refusing handovers, staying out after a release) when a
// handover reaches it, releases it, loses that release's answer and comes
// back before its watch shows the release; many member Lease writes, so a
// leaver's witness is fresh; lost answers; watch events that come late;
// and, in a third of the histories, etcd restored from a snapshot.
func (p *simParams) stress(rng *rand.Rand) {
	t := p.timing
	p.mix = stressMix
	p.faultEvery = time.Duration(float64(t.LeaseDuration) * (0.05 + 0.5*rng.Float64()))
	p.loss = []float64{0.05, 0.1, 0.2, 0.3}[rng.IntN(4)]
	p.memberEvery = time.Duration((0.5 + rng.Float64()) * float64(t.RetryPeriod))
	p.timing.AcceptHandovers = rng.IntN(2) == 0
	p.handEdits = rng.IntN(4) != 0
	p.watchLag = rng.IntN(2) == 0
	p.restores = rng.IntN(3) == 0
}

// stressFault injects one fault of the stress mix: half the time the
// leader hands the Lease over to another instance in one write; else an
// instance is taken out of the election briefly, an admin edits the
// Lease, etcd is restored from a snapshot (in a third of the histories),
// or one of the default mix's faults.
func (s *sim) stressFault() {
	live := s.live()
	switch k := s.rng.IntN(10); {
	case k < 5:
		s.handOver(live)
	case k == 5 && len(live) > 0:
		s.takeOut(live[s.rng.IntN(len(live))])
	case k == 6 && s.params.handEdits:
		s.handEdit()
	case k == 7 && s.params.restores:
		s.restore()
	default:
		s.fault()
	}
}

// handOver has the instance that reports leading hand the Lease over in
// one write to another live instance (handOverTo); half the time the heir
// is taken out of the election first, briefly (takeOut); see also
// handedOver.
func (s *sim) handOver(live []*instance) {
	s.handOverTo(live, "handover", s.takeOut)
}

// takeOut takes in out of the election for up to about a retryPeriod, so
// that it is often back before the answers and the watch events of what
// it did meanwhile: withdrawn as a group member whose app is unhealthy
// (refusing handovers), withdrawn from a Lease outside its member's share
// (accepting handovers with AcceptHandovers), or staying out after a
// release (`release?for=`).
func (s *sim) takeOut(in *instance) {
	upTo := time.Duration((0.2 + 1.3*s.rng.Float64()) * float64(s.params.timing.RetryPeriod))
	s.tracef("%s is taken out of the election for up to %v", in.identity, upTo)
	switch s.rng.IntN(3) {
	case 0:
		s.withdrawFor(in, "", "", true, upTo)
	case 1:
		s.withdrawFor(in, "", "", false, upTo)
	case 2:
		s.releaseFor(in, "", "", time.Duration(s.rng.Float64()*float64(upTo)))
	}
}

// handedOver is told that a handover in one write to heir landed. In the
// stress mix, half the time, a live heir is taken out of the election at
// once (takeOut), before its watch delivers the handover; a third of those
// times its watch breaks just after it delivers the handover, so that the
// heir may not see what follows (its own release) before it is back.
func (s *sim) handedOver(heir string) {
	if s.params.mix != stressMix || s.rng.IntN(2) != 0 {
		return
	}
	for _, in := range s.live() {
		if in.identity != heir {
			continue
		}
		s.takeOut(in)
		if gen := in.watchGen; in.watchOpen && s.rng.IntN(3) == 0 {
			s.at(in.lastWatch+time.Microsecond, func() {
				if in.watchGen == gen {
					s.breakWatch(in, "stream closed by the server")
				}
			})
		}
	}
}

// watchLag is how much later than its latency a watch event comes: in
// histories with watchLag, one event in five comes up to two retry periods
// late (an apiserver's watch cache behind etcd), and the stream's later
// events after it. Never in the quiet tail.
func (s *sim) watchLag() time.Duration {
	if !s.params.watchLag || s.now >= s.params.duration || s.rng.IntN(4) != 0 {
		return 0
	}
	return time.Duration(s.rng.Int64N(int64(3 * s.params.timing.RetryPeriod)))
}
