package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
)

// lgBig is one process of each implementation following a large group
// alone (LEASEHOLD_SHARDS=leases), side by side, each in a namespace of
// its own: its memory and CPU at steady state, measured as the footprint
// section measures them, and how many of its Leases it held meanwhile.
type lgBig struct {
	ran     bool
	leases  int
	window  time.Duration // one CPU window
	windows int           // consecutive windows
	impls   []lgBigImpl
}

type lgBigImpl struct {
	name      string
	allAfter  time.Duration // start → first answer holding every Lease; 0 when never within the bound
	held      []int         // Leases held, sampled through the window
	mem       []memSample
	cpu       time.Duration      // over every window
	cpuWindow time.Duration      // every window, end to end
	cpuShares []float64          // each window's CPU time / its length
	byVerb    map[string]float64 // requests over the window
	errors    float64            // requests over the window that got no answer, or an answer ≥ 400
	renewals  float64            // leasehold: renew writes over the window
}

// benchBigGroup starts one process of each implementation on a group of
// opts.groupsBig Leases, at the section's timings, waits until each holds
// every Lease (at most three lease durations past its start; first
// acquisition of a new Lease takes leasehold one lease duration), lets it
// settle, then, over opts.groupsBigWindows consecutive windows of
// opts.groupsBigWindow, samples its RSS and Leases held 12 times a window
// (and once at the start) and measures its CPU time in each window: the
// machine is shared, and the median of several windows is steadier than
// one.
func benchBigGroup(ctx context.Context, cluster *kubetest.Cluster, dir string, impls []implementation, opts options) (lgBig, error) {
	b := lgBig{ran: true, leases: opts.groupsBig, window: opts.groupsBigWindow, windows: opts.groupsBigWindows}
	base := opts.lgConfig(cluster, dir)
	base.Env = []string{fmt.Sprintf("LEASEHOLD_SHARDS=%d", opts.groupsBig)}
	var running []*fleet.Instance
	defer func() {
		for _, inst := range running {
			inst.Stop()
		}
	}()
	for i, impl := range impls {
		ns, err := cluster.CreateNamespace(ctx, "bench-groups-big")
		if err != nil {
			return b, err
		}
		c := base
		c.Binary, c.Namespace = impl.binary, ns
		inst, err := c.Start(ctx, fmt.Sprintf("big%d", i), false)
		if err != nil {
			return b, fmt.Errorf("%s: %w", impl.name, err)
		}
		running = append(running, inst)
		b.impls = append(b.impls, lgBigImpl{name: impl.name})
	}
	fmt.Fprintf(os.Stderr, "bench: groups: %d Leases on one process of each: waiting until each holds all (at most %v)\n", b.leases, 3*base.LeaseDuration)
	deadline := time.Now().Add(3 * base.LeaseDuration)
	for {
		pending := 0
		for i, inst := range running {
			if b.impls[i].allAfter != 0 {
				continue
			}
			if l, err := inst.Leases(ctx); err == nil && heldIn(l.Leases) == b.leases {
				b.impls[i].allAfter = time.Since(inst.Started)
				continue
			}
			pending++
		}
		if pending == 0 || time.Now().After(deadline) {
			break
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return b, err
		}
	}
	if err := sleep(ctx, 10*time.Second); err != nil { // settle (a measurement, not a synchronisation)
		return b, err
	}

	fmt.Fprintf(os.Stderr, "bench: groups: %d Leases: %d windows of %v\n", b.leases, b.windows, b.window)
	scrape := func() ([]fleet.Metrics, error) {
		var all []fleet.Metrics
		for _, inst := range running {
			m, err := inst.Metrics(ctx)
			if err != nil {
				return nil, err
			}
			all = append(all, m)
		}
		return all, nil
	}
	before, err := scrape()
	if err != nil {
		return b, err
	}
	cpuNow := func() ([]time.Duration, error) {
		ts := make([]time.Duration, len(running))
		for i, inst := range running {
			t, err := cpuTime(inst.PID())
			if err != nil {
				return nil, err
			}
			ts[i] = t
		}
		return ts, nil
	}
	sample := func() error {
		for i, inst := range running {
			s, err := memOf(inst.PID())
			if err != nil {
				return err
			}
			b.impls[i].mem = append(b.impls[i].mem, s)
			held := 0
			if l, err := inst.Leases(ctx); err == nil {
				held = heldIn(l.Leases)
			}
			b.impls[i].held = append(b.impls[i].held, held)
		}
		return nil
	}
	// 12 samples a window, after one at the start: 13 over one window.
	const samplesPerWindow = 12
	first, err := cpuNow()
	if err != nil {
		return b, err
	}
	start := time.Now()
	if err := sample(); err != nil {
		return b, err
	}
	windowStart, windowCPU := start, first
	for range b.windows {
		for range samplesPerWindow {
			if err := sleep(ctx, b.window/samplesPerWindow); err != nil {
				return b, err
			}
			if err := sample(); err != nil {
				return b, err
			}
		}
		cpu, err := cpuNow()
		if err != nil {
			return b, err
		}
		now := time.Now()
		for i := range running {
			b.impls[i].cpuShares = append(b.impls[i].cpuShares, (cpu[i]-windowCPU[i]).Seconds()/now.Sub(windowStart).Seconds())
		}
		windowStart, windowCPU = now, cpu
	}
	took := time.Since(start)
	after, err := scrape()
	if err != nil {
		return b, err
	}
	for i := range running {
		im := &b.impls[i]
		im.cpu, im.cpuWindow = windowCPU[i]-first[i], took
		im.byVerb = map[string]float64{}
		for _, verb := range []string{"get", "list", "watch", "create", "update", "delete"} {
			if d := after[i].Sum("leasehold_kube_requests_total", map[string]string{"verb": verb}) - before[i].Sum("leasehold_kube_requests_total", map[string]string{"verb": verb}); d != 0 {
				im.byVerb[verb] = d
			}
		}
		im.errors = failedRequests(after[i]) - failedRequests(before[i])
		im.renewals = after[i].Sum("leasehold_renew_duration_seconds", nil) - before[i].Sum("leasehold_renew_duration_seconds", nil)
		fmt.Fprintf(os.Stderr, "bench: groups: %d Leases: %s: held %v, RSS median %.1f MiB, CPU %.2f %% (by window %.2f), requests %v, failed %.0f\n",
			b.leases, im.name, im.held, mib(medianInt(rssOf(im.mem))), 100*im.cpu.Seconds()/took.Seconds(), im.cpuShares, im.byVerb, im.errors)
	}
	return b, nil
}

// failedRequests are the requests of a scrape that got no answer (code
// "error") or one of 400 and above.
func failedRequests(m fleet.Metrics) float64 {
	family, ok := m["leasehold_kube_requests_total"]
	if !ok {
		return 0
	}
	var n float64
	for _, metric := range family.GetMetric() {
		for _, l := range metric.GetLabel() {
			if l.GetName() == "code" && (l.GetValue() == "error" || l.GetValue() >= "400") {
				n += metric.GetCounter().GetValue()
			}
		}
	}
	return n
}
