package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// report is the bench's output: one table comparing the implementations,
// the HTTP API's figures, the app-aware features' figures, and how they
// were obtained.
type report struct {
	opts      options
	results   []results
	http      httpFigures
	app       appFigures
	footprint footprintFigures
	groups    lgFigures // set after newReport, when the section ran
	handover  hoFigures // likewise
	machine   string
	date      string
}

func newReport(opts options, r []results, h httpFigures, a appFigures, f footprintFigures) *report {
	return &report{opts: opts, results: r, http: h, app: a, footprint: f, machine: machine(), date: time.Now().UTC().Format("2006-01-02 15:04 MST")}
}

// markdown renders the report; plot names the latency plot to embed ("" for none).
func (r *report) markdown(plot string) string {
	var b strings.Builder
	switch {
	case r.opts.only == "overlap":
		r.overlapMarkdown(&b)
		return b.String()
	case len(r.results) == 0: // -only footprint, -only groups, -only handover
		r.footprintMarkdown(&b)
		r.groupsMarkdown(&b)
		r.handoverMarkdown(&b)
		return b.String()
	}
	o := r.opts
	fmt.Fprintf(&b, "leasehold vs client-go's LeaderElector (ReleaseOnCancel), 3 instances each, same real kube-apiserver, same run.\n")
	fmt.Fprintf(&b, "Timings for both: leaseDuration %v, renewDeadline %v, retryPeriod %v.\n\n", o.leaseDuration, o.renewDeadline, o.retryPeriod)
	fmt.Fprintln(&b, "| figure | leasehold | client-go LeaderElector | client-go ÷ leasehold (p50) | target for leasehold |")
	fmt.Fprintln(&b, "|---|---|---|---|---|")
	lh, cg := r.results[0], r.results[1]
	latencyRow := func(name string, a, c []time.Duration, target string) {
		fmt.Fprintf(&b, "| %s, p50 / p95 (n=%d / %d) | %v / %v | %v / %v | %.2f× | %s |\n", name, len(a), len(c),
			quantile(a, 0.5), quantile(a, 0.95), quantile(c, 0.5), quantile(c, 0.95), ratio(quantile(c, 0.5), quantile(a, 0.5)), target)
	}
	latencyRow("graceful handover (SIGTERM → successor leads)", lh.handovers, cg.handovers, "≤ 100ms / ≤ 300ms")
	latencyRow("crash failover (SIGKILL → new leader)", lh.failovers, cg.failovers, fmt.Sprintf("≤ leaseDuration + retryPeriod = %v", o.leaseDuration+o.retryPeriod))
	reqRow := func(name string, a, c float64, target string) {
		fmt.Fprintf(&b, "| %s | %.1f | %.1f | | %s |\n", name, a, c, target)
	}
	reqRow(fmt.Sprintf("API requests per minute, leader (over %v)", lh.requests.window.Round(time.Second)),
		lh.requests.perMinute(lh.requests.leaderRequests), cg.requests.perMinute(cg.requests.leaderRequests),
		fmt.Sprintf("one write per renewal (%.0f/min)", time.Minute.Seconds()/o.retryPeriod.Seconds()))
	if lh.requests.renewals > 0 {
		fmt.Fprintf(&b, "| leasehold leader: requests per renewal (%.0f / %.0f), of which Gets | %.2f, %.0f Gets | | | 1, no Get |\n",
			lh.requests.leaderRequests, lh.requests.renewals, lh.requests.leaderRequests/lh.requests.renewals, lh.requests.leaderGets)
	}
	reqRow("API requests per minute, per candidate", lh.requests.perMinute(lh.requests.candidateRequests)/float64(lh.requests.candidates),
		cg.requests.perMinute(cg.requests.candidateRequests)/float64(cg.requests.candidates), "0 while its watch is healthy")
	fmt.Fprintf(&b, "| handover/failover trials with no successor within 3 × leaseDuration; groups restarted because nobody led | %d; %d | %d; %d | | 0; 0 |\n",
		lh.misses, lh.restarts, cg.misses, cg.restarts)
	fmt.Fprintf(&b, "\nPartition and pause trials, and the overlaps they showed: [below](#overlap-under-faults).\n")

	h := r.http
	fmt.Fprintf(&b, "\nleasehold's localhost HTTP API (one sidecar; the load generator shares the 2 cores):\n\n")
	fmt.Fprintln(&b, "| figure | value | target |\n|---|---|---|")
	fmt.Fprintf(&b, "| `GET /v1/status`, %d connections, closed loop: throughput; p50 / p99 | %.0f req/s; %v / %v | ≥ 20,000 req/s |\n",
		h.statusConns, h.statusRate, quantile(h.statusLatencies, 0.5), quantile(h.statusLatencies, 0.99))
	fmt.Fprintf(&b, "| `GET /v1/status` at an offered %d req/s (achieved %.0f): p50 / p99 | %v / %v | p99 < 5ms |\n",
		pacedRate, h.pacedRate, quantile(h.pacedLatencies, 0.5), quantile(h.pacedLatencies, 0.99))
	fmt.Fprintf(&b, "| watch notification: Lease change → each of %d watchers answered (½ long-poll, ½ SSE), p50 / p99 / max (n=%d) | %v / %v / %v | p99 ≤ 50ms |\n",
		h.watchers, len(h.wakeLatencies), quantile(h.wakeLatencies, 0.5), quantile(h.wakeLatencies, 0.99), quantile(h.wakeLatencies, 1))
	fmt.Fprintf(&b, "| RSS idle / with %d watchers | %.1f MiB / %.1f MiB | ≤ 30 MiB / ≤ 60 MiB |\n", h.watchers, mib(h.rssIdle), mib(h.rssWatchers))
	if plot != "" {
		fmt.Fprintf(&b, "\n![handover and failover latency, every trial](%s)\n", plot)
	}
	r.appMarkdown(&b)
	fmt.Fprintf(&b, "\nCommand: `%s`, %s.\nMachine: %s.\n", strings.TrimSpace(o.command), r.date, r.machine)
	b.WriteString("\n")
	r.overlapMarkdown(&b)
	if r.footprint.ran {
		b.WriteString("\n")
		r.footprintMarkdown(&b)
	}
	if r.groups.ran {
		b.WriteString("\n")
		r.groupsMarkdown(&b)
	}
	if r.handover.ran {
		b.WriteString("\n")
		r.handoverMarkdown(&b)
	}
	return b.String()
}

// docHeader opens the report file.
const docHeader = "# Benchmarks\n\nGenerated by `make bench`; medians and ratios come from one run in which both implementations ran on the same apiserver.\n\n"

// The overlap section sits between these markers in the report file, so
// that -only overlap can replace it alone.
const (
	overlapBegin = "<!-- overlap: begin (cd bench && go run . -only overlap -out FILE replaces this section) -->"
	overlapEnd   = "<!-- overlap: end -->"
)

// overlapMarkdown renders the partition and pause trials, markers included.
func (r *report) overlapMarkdown(b *strings.Builder) {
	o := r.opts
	lh, cg := r.results[0], r.results[1]
	fmt.Fprintf(b, "%s\n## Overlap under faults\n\n", overlapBegin)
	fmt.Fprintf(b, "leasehold vs client-go's LeaderElector (ReleaseOnCancel), 3 instances each, same real kube-apiserver, same run; "+
		"leaseDuration %v, renewDeadline %v, retryPeriod %v. Each trial deposes the leader without stopping it, at a random phase of the renew cycle: "+
		"partition black-holes its link to the apiserver, pause SIGSTOPs it, until another instance leads and at least leaseDuration + 500ms has passed; "+
		"then the fault ends, the deposed leader is asked at once whether it leads, and sampling goes on for 200ms. "+
		"Every instance's `GET /v1/status` is sampled every %v throughout; the deposed leader is replaced after each trial.\n\n",
		o.leaseDuration, o.renewDeadline, o.retryPeriod, sampleInterval)
	fmt.Fprintln(b, "| figure | leasehold | client-go LeaderElector | target for leasehold |")
	fmt.Fprintln(b, "|---|---|---|---|")
	faultRow := func(name string, a, c faultResults) {
		fmt.Fprintf(b, "| %s: trials with overlap / deposed leader's first answer said leader / no successor within 3 × leaseDuration | %d / %d / %d of %d | %d / %d / %d of %d | 0 |\n",
			name, a.overlaps, a.firstAfter, a.misses, a.trials, c.overlaps, c.firstAfter, c.misses, c.trials)
	}
	faultRow("partition (black-holed until another leads, > leaseDuration)", lh.partition, cg.partition)
	faultRow("pause (SIGSTOP > leaseDuration, then SIGCONT)", lh.pause, cg.pause)
	recoveryRow := func(name string, a, c faultResults) {
		fmt.Fprintf(b, "| %s → successor leads, p50 / p95 | %v / %v | %v / %v | ≤ leaseDuration + retryPeriod = %v |\n", name,
			quantile(a.recoveries, 0.5), quantile(a.recoveries, 0.95), quantile(c.recoveries, 0.5), quantile(c.recoveries, 0.95), o.leaseDuration+o.retryPeriod)
	}
	recoveryRow("partition, cut", lh.partition, cg.partition)
	recoveryRow("pause, SIGSTOP", lh.pause, cg.pause)
	fmt.Fprintf(b, "\nAn overlap is counted only when certain, by the rule of `internal/testing/overlap`, which the fault suite (`test/e2e`) and `test/run` apply too: "+
		"an instance's consecutive leader:true samples under one token prove it led from the first one's receipt to the last one's sending; "+
		"two instances overlap when such spans of theirs intersect (bounds included), or when one's single sample lies wholly inside the other's span. "+
		"For client-go, \"leader\" is the app's view: OnStartedLeading's context not yet cancelled; it has no token, and its leader:true samples not separated by a leader:false one are one term (it never campaigns again). "+
		"A successor that \"leads\" within milliseconds of a fault was already claiming leadership: an overlap that began before the fault.\n")
	fmt.Fprintf(b, "\nCommand: `%s`, %s.\nMachine: %s.\n%s\n", strings.TrimSpace(o.command), r.date, r.machine, overlapEnd)
}

// write saves the report and its plot beside it; with -only footprint,
// -only overlap, -only groups or -only handover, only that section of the
// file.
func (r *report) write(path string) error {
	switch {
	case r.opts.only == "overlap":
		var b strings.Builder
		r.overlapMarkdown(&b)
		return replaceSection(path, overlapBegin, overlapEnd, b.String())
	case len(r.results) == 0 && r.handover.ran:
		var b strings.Builder
		r.handoverMarkdown(&b)
		return replaceSection(path, handoverBegin, handoverEnd, b.String())
	case len(r.results) == 0 && r.groups.ran:
		var b strings.Builder
		r.groupsMarkdown(&b)
		return replaceSection(path, groupsBegin, groupsEnd, b.String())
	case len(r.results) == 0:
		return r.writeFootprint(path)
	}
	plot := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)) + "-latency.svg"
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), plot), []byte(r.svg()), 0o644); err != nil {
		return err
	}
	doc := docHeader + r.markdown(plot)
	return os.WriteFile(path, []byte(doc), 0o644)
}

// quantile is the nearest-rank quantile of durations.
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := min(max(int(q*float64(len(s))+0.5)-1, 0), len(s)-1)
	return roundDuration(s[i])
}

func roundDuration(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(10 * time.Microsecond)
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// machine describes where the bench ran.
func machine() string {
	model := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(data)) {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	mem := ""
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		if line, _, ok := strings.Cut(string(data), "\n"); ok {
			mem = ", " + strings.Join(strings.Fields(line)[1:], " ") + " memory"
		}
	}
	return fmt.Sprintf("%d CPUs (%s)%s, %s/%s, %s, shared and noisy", runtime.NumCPU(), model, mem, runtime.GOOS, runtime.GOARCH, runtime.Version())
}
