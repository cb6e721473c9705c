package main

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/fleet"
)

// requestCounts are the API requests made over a window of renewals.
type requestCounts struct {
	renewals          float64 // the leader's renew writes in the window
	leaderRequests    float64 // every request the leader sent
	leaderGets        float64
	candidateRequests float64 // every request the candidates sent, all together
	candidates        int
}

// countRequests reads leasehold_kube_requests_total and
// leasehold_renew_duration_seconds (its count is the renew writes) from
// every instance, lets `renewals` retry periods pass, and reads them again.
func countRequests(ctx context.Context, g *group, retryPeriod time.Duration, renewals int) (requestCounts, error) {
	leader, err := fleet.AwaitLeadership(ctx, g.instances)
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
	select {
	case <-time.After(time.Duration(renewals) * retryPeriod): // the measurement window
	case <-ctx.Done():
		return requestCounts{}, ctx.Err()
	}
	after, err := scrape()
	if err != nil {
		return requestCounts{}, err
	}
	var c requestCounts
	for i, inst := range g.instances {
		delta := func(name string, labels map[string]string) float64 {
			return after[i].Sum(name, labels) - before[i].Sum(name, labels)
		}
		requests := delta("leasehold_kube_requests_total", nil)
		if inst == leader.Instance {
			c.renewals = delta("leasehold_renew_duration_seconds", nil)
			c.leaderRequests = requests
			c.leaderGets = delta("leasehold_kube_requests_total", map[string]string{"verb": "get"})
		} else {
			c.candidateRequests += requests
			c.candidates++
		}
	}
	return c, nil
}
