package main

import (
	"context"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/overlap"
	"github.com/leasehold/leasehold/pkg/api"
)

// sample is one answer to GET /v1/status, or one Lease's status in an
// answer to GET /v1/leases: the instance claimed (or not) leadership at
// some instant between sent and received.
type sample struct {
	inst           *fleet.Instance
	sent, received time.Time
	leader         bool
	token          api.FencingToken
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
// one same instant, by the rule of internal/testing/overlap (the fault
// suite's): each instance's consecutive leader:true samples under one token
// prove it led throughout [first received, last sent] (a term does not end
// and restart with the same token; client-go's elector, without tokens,
// never campaigns again), and two instances overlap when such spans
// intersect, or when one's single sample lies wholly inside the other's
// span.
func overlaps(samples []sample) bool {
	return len(overlap.Check(observations(samples))) > 0
}

// observations are samples as the overlap checker takes them. A sample
// without a token carries its term in the token's place: client-go's
// baseline in group mode numbers its own terms of each Lease, and runs
// again after losing one, so its terms must be told apart; without either
// (the single-Lease baseline, which never campaigns again) the token is 0.
// For a lease group, pass the samples of one Lease at a time (lgObserver).
func observations(samples []sample) []overlap.Observation[*fleet.Instance] {
	obs := make([]overlap.Observation[*fleet.Instance], len(samples))
	for i, s := range samples {
		token := s.token
		if token == 0 && s.term > 0 {
			token = api.FencingToken(s.term)
		}
		obs[i] = overlap.Observation[*fleet.Instance]{Member: s.inst, Sent: s.sent, Recv: s.received, Leader: s.leader, Token: token}
	}
	return obs
}
