package main

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// printTable prints the figures as one Markdown table.
func printTable(w io.Writer, opts options, handovers, failovers []time.Duration, r requestCounts) {
	fmt.Fprintf(w, "\nleasehold election, 3 sidecars, real kube-apiserver; leaseDuration %v, renewDeadline %v, retryPeriod %v\n\n",
		opts.leaseDuration, opts.renewDeadline, opts.retryPeriod)
	fmt.Fprintln(w, "| figure | n | median | p95 | min | max | target |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	row := func(name string, d []time.Duration, target string) {
		s := slices.Clone(d)
		slices.Sort(s)
		fmt.Fprintf(w, "| %s | %d | %v | %v | %v | %v | %s |\n", name, len(s),
			quantile(s, 0.5), quantile(s, 0.95), s[0].Round(time.Microsecond), s[len(s)-1].Round(time.Microsecond), target)
	}
	if len(handovers) > 0 {
		row("graceful handover (SIGTERM → successor leads)", handovers, "median ≤ 100ms")
	}
	if len(failovers) > 0 {
		row("crash failover (SIGKILL → new leader)", failovers, fmt.Sprintf("≤ leaseDuration + retryPeriod = %v", opts.leaseDuration+opts.retryPeriod))
	}
	fmt.Fprintf(w, "\n| requests over %d retry periods | value | target |\n|---|---|---|\n", opts.renewals)
	perRenew := 0.0
	if r.renewals > 0 {
		perRenew = r.leaderRequests / r.renewals
	}
	fmt.Fprintf(w, "| leader: API requests per renewal (%v requests / %v renewals) | %.2f | 1 |\n", r.leaderRequests, r.renewals, perRenew)
	fmt.Fprintf(w, "| leader: Gets | %v | 0 |\n", r.leaderGets)
	fmt.Fprintf(w, "| watching candidates (%d): requests | %v | 0 |\n", r.candidates, r.candidateRequests)
}

// quantile is the nearest-rank quantile of sorted durations.
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted))+0.5) - 1
	i = min(max(i, 0), len(sorted)-1)
	return sorted[i].Round(time.Microsecond)
}

// printHTTPTable prints the HTTP API's figures.
func printHTTPTable(w io.Writer, f httpFigures) {
	sort := func(d []time.Duration) []time.Duration { s := slices.Clone(d); slices.Sort(s); return s }
	status, paced, wake := sort(f.statusLatencies), sort(f.pacedLatencies), sort(f.wakeLatencies)
	fmt.Fprintln(w, "\nlocalhost HTTP API, one sidecar")
	fmt.Fprintln(w, "\n| figure | value | target |\n|---|---|---|")
	fmt.Fprintf(w, "| GET /v1/status, %d keep-alive connections, closed loop: throughput | %.0f req/s | ≥ 20,000 req/s |\n", f.statusConns, f.statusRate)
	fmt.Fprintf(w, "| GET /v1/status latency at that saturation: p50 / p99 (n=%d) | %v / %v | |\n", len(status), quantile(status, 0.5), quantile(status, 0.99))
	fmt.Fprintf(w, "| GET /v1/status latency at an offered %d req/s (achieved %.0f): p50 / p99 (n=%d) | %v / %v | p99 < 5ms |\n",
		pacedRate, f.pacedRate, len(paced), quantile(paced, 0.5), quantile(paced, 0.99))
	fmt.Fprintf(w, "| %d watchers, Lease change → every watcher answered: p50 / p99 / max (n=%d) | %v / %v / %v | p99 ≤ 50ms |\n",
		f.watchers, len(wake), quantile(wake, 0.5), quantile(wake, 0.99), wake[len(wake)-1].Round(time.Microsecond))
	fmt.Fprintf(w, "| RSS idle | %.1f MiB | ≤ 30 MiB |\n", float64(f.rssIdle)/(1<<20))
	fmt.Fprintf(w, "| RSS with %d watchers | %.1f MiB | ≤ 60 MiB |\n", f.watchers, float64(f.rssWatchers)/(1<<20))
}
