package main

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/testing/fleet"
)

// requestCounts are the API requests made over a window, from each
// instance's leasehold_kube_requests_total (both implementations count
// their requests with internal/kubeclient).
type requestCounts struct {
	window            time.Duration
	leaderRequests    float64 // every request the leader sent
	leaderGets        float64
	renewals          float64 // leasehold only: the leader's renew writes (leasehold_renew_duration_seconds count)
	candidateRequests float64 // every request the candidates sent, all together
	candidates        int
}

func (c requestCounts) perMinute(n float64) float64 { return n / c.window.Minutes() }

// countRequests scrapes every instance, lets window pass, and scrapes again.
func countRequests(ctx context.Context, g *group, window time.Duration) (requestCounts, error) {
	leader, err := g.leader(ctx)
	if err != nil {
		return requestCounts{}, err
	}
	scrape := func() ([]fleet.Metrics, error) {
		var all []fleet.Metrics
		for _, inst := range g.instances {
			m, err := inst.Metrics(ctx)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", inst.Name, err)
			}
			all = append(all, m)
		}
		return all, nil
	}
	before, err := scrape()
	if err != nil {
		return requestCounts{}, err
	}
	start := time.Now()
	select {
	case <-time.After(window): // the measurement window
	case <-ctx.Done():
		return requestCounts{}, ctx.Err()
	}
	after, err := scrape()
	if err != nil {
		return requestCounts{}, err
	}
	c := requestCounts{window: time.Since(start)}
	for i, inst := range g.instances {
		delta := func(name string, labels map[string]string) float64 {
			return after[i].Sum(name, labels) - before[i].Sum(name, labels)
		}
		requests := delta("leasehold_kube_requests_total", nil)
		if inst == leader.Instance {
			c.leaderRequests = requests
			c.leaderGets = delta("leasehold_kube_requests_total", map[string]string{"verb": "get"})
			c.renewals = delta("leasehold_renew_duration_seconds", nil)
		} else {
			c.candidateRequests += requests
			c.candidates++
		}
	}
	return c, nil
}
