package main

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/httpapi"
	"github.com/leasehold/leasehold/internal/testing/fleet"
)

// takeover is one measured change of leader.
type takeover struct {
	leader *fleet.Instance
	status httpapi.Status // the new leader's 200 answer
	sent   time.Time      // just before the signal was sent
	took   time.Duration  // from sent to the new leader's 200
}

// measureTakeover times a change of leader the way an app would see it.
// It parks GET /v1/leader?wait=1m on every survivor (fleet.AwaitLeadership),
// checks that each survivor really holds it open (its leasehold_watchers
// gauge counts it), then calls act, which sends the signal, and returns the
// first survivor to answer 200. took is the arrival of that 200 minus the
// moment just before the signal, both monotonic clock readings. It fails if
// no survivor leads within bound.
func measureTakeover(ctx context.Context, survivors []*fleet.Instance, bound time.Duration, act func() error) (takeover, error) {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()

	before := make([]float64, len(survivors))
	for i, inst := range survivors {
		n, err := watchers(ctx, inst)
		if err != nil {
			return takeover{}, err
		}
		before[i] = n
	}
	type result struct {
		l   fleet.Leadership
		err error
	}
	answer := make(chan result, 1)
	go func() {
		l, err := fleet.AwaitLeadership(ctx, survivors)
		answer <- result{l, err}
	}()
	answered := false
	defer func() {
		if !answered {
			cancel() // ends the long-polls; AwaitLeadership returns once all have
			<-answer
		}
	}()

	for i, inst := range survivors {
		for {
			n, err := watchers(ctx, inst)
			if err != nil {
				return takeover{}, err
			}
			if n > before[i] {
				break // parked
			}
			select {
			case r := <-answer:
				answered = true
				if r.err != nil {
					return takeover{}, fmt.Errorf("waiting for leadership: %w", r.err)
				}
				return takeover{}, fmt.Errorf("%s led before the signal was sent", r.l.Instance.Name)
			case <-ctx.Done():
				return takeover{}, fmt.Errorf("%s: long-poll not open: %w", inst.Name, ctx.Err())
			case <-time.After(5 * time.Millisecond):
			}
		}
	}

	sent := time.Now()
	if err := act(); err != nil {
		return takeover{}, err
	}
	r := <-answer
	answered = true
	if r.err != nil {
		return takeover{}, fmt.Errorf("no survivor became leader within %v: %w", bound, r.err)
	}
	return takeover{leader: r.l.Instance, status: r.l.Status, sent: sent, took: r.l.At.Sub(sent)}, nil
}

// watchers reads inst's leasehold_watchers gauge: its open long-polls,
// leader waits and SSE streams. The live view only polls /v1/status, so
// the gauge counts the demo's long-poll and nothing else.
func watchers(ctx context.Context, inst *fleet.Instance) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	m, err := inst.Metrics(ctx)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", inst.Name, err)
	}
	if _, ok := m["leasehold_watchers"]; !ok {
		return 0, fmt.Errorf("%s: no leasehold_watchers in /metrics", inst.Name)
	}
	return m.Sum("leasehold_watchers", nil), nil
}
