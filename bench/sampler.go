package main

import (
	"context"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/fence"
	"github.com/leasehold/leasehold/internal/fleet"
)

// sample is one answer to GET /v1/status: the instance claimed (or not)
// leadership at some instant between sent and received.
type sample struct {
	inst           *fleet.Instance
	sent, received time.Time
	leader         bool
	token          fence.Token
	// term tells terms apart where there is no token (client-go's
	// baseline in group mode counts its own terms of each Lease); 0 when
	// not reported.
	term int32
}

// sampler asks every instance for its status every few milliseconds.
type sampler struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	samples []sample
}

const sampleInterval = 5 * time.Millisecond

func startSampler(ctx context.Context, instances []*fleet.Instance) *sampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &sampler{cancel: cancel}
	for _, inst := range instances {
		s.wg.Go(func() {
			for ctx.Err() == nil {
				s.sampleNow(ctx, inst)
				select {
				case <-time.After(sampleInterval):
				case <-ctx.Done():
				}
			}
		})
	}
	return s
}

// sampleNow asks inst once and records the answer (none if it does not
// answer within 250ms, as a paused or dead process does not).
func (s *sampler) sampleNow(ctx context.Context, inst *fleet.Instance) sample {
	ctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
	defer cancel()
	sent := time.Now()
	st, err := inst.Status(ctx)
	if err != nil {
		return sample{}
	}
	smp := sample{inst: inst, sent: sent, received: time.Now(), leader: st.Leader, token: st.FencingToken}
	s.mu.Lock()
	s.samples = append(s.samples, smp)
	s.mu.Unlock()
	return smp
}

// stop ends sampling and returns the samples.
func (s *sampler) stop() []sample {
	s.cancel()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples
}

// overlaps reports whether two instances certainly claimed leadership at
// the same instant. An instance B certainly leads from the receipt of one
// leader:true sample to the sending of a later one, when every sample of B
// in between also said leader:true with the same token and term (a term
// does not end and restart with the same token; client-go's single-Lease
// baseline never re-campaigns, and its group mode numbers its terms). If
// another instance A said leader:true in a sample lying wholly inside such
// a span, both claimed leadership at once. For a lease group, call it on
// the samples of one Lease at a time (lgObserver).
func overlaps(samples []sample) bool {
	_, _, ok := overlapWitness(samples)
	return ok
}

// overlapWitness is overlaps with its evidence: the span over which one
// instance certainly led, with the first and last samples bounding it, and
// the other instance's leader:true sample inside it.
func overlapWitness(samples []sample) (span, sample, bool) {
	byInst := map[*fleet.Instance][]sample{}
	for _, s := range samples {
		byInst[s.inst] = append(byInst[s.inst], s)
	}
	for b, bs := range byInst {
		for _, sp := range leaderSpans(bs) {
			for a, as := range byInst {
				if a == b {
					continue
				}
				for _, s := range as {
					if s.leader && sp.from.Before(s.sent) && s.received.Before(sp.to) {
						return sp, s, true
					}
				}
			}
		}
	}
	return span{}, sample{}, false
}

// span is a time over which one instance certainly led: from the receipt
// of first to the sending of last, both leader:true with one token.
type span struct {
	from, to    time.Time
	first, last sample
}

// leaderSpans are the spans over which one instance certainly led (its
// samples are in sending order).
func leaderSpans(samples []sample) []span {
	var spans []span
	for i := 0; i < len(samples); {
		if !samples[i].leader {
			i++
			continue
		}
		j := i
		for j+1 < len(samples) && samples[j+1].leader && samples[j+1].token == samples[i].token && samples[j+1].term == samples[i].term {
			j++
		}
		if j > i {
			spans = append(spans, span{from: samples[i].received, to: samples[j].sent, first: samples[i], last: samples[j]})
		}
		i = j + 1
	}
	return spans
}
