package main

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"
)

// The footprint section sits between these markers in the report file, so
// that -only footprint can replace it alone.
const (
	footprintBegin = "<!-- footprint: begin (go run ./bench -only footprint -out FILE replaces this section) -->"
	footprintEnd   = "<!-- footprint: end -->"
)

// footprintMarkdown renders the footprint section, markers included
// (nothing when it did not run).
func (r *report) footprintMarkdown(b *strings.Builder) {
	f := r.footprint
	if !f.ran {
		return
	}
	lh, cg := f.impls[0], f.impls[1]
	fmt.Fprintf(b, "%s\n## Footprint of one instance (default configuration)\n\n", footprintBegin)
	fmt.Fprintf(b, "One instance of each, side by side in one run, at the sidecar's default configuration (leaseDuration 15s, renewDeadline 10s, retryPeriod 2s; no feature on), "+
		"each leading a Lease of its own on the same apiserver. Binaries built as the Dockerfile builds them (`CGO_ENABLED=0 -trimpath -ldflags \"-s -w\"`). "+
		"The load generator shares the 2 cores. Absolute figures are noisy; the ratios come from one run.\n\n")

	fmt.Fprint(b, "| figure |")
	for _, im := range f.impls {
		fmt.Fprintf(b, " %s |", im.impl.name)
	}
	fmt.Fprint(b, " leasehold ÷ client-go | target for leasehold |\n|---|")
	for range f.impls {
		fmt.Fprint(b, "---|")
	}
	fmt.Fprint(b, "---|---|\n")
	row := func(name string, cell func(implFootprint) string, ratio, target string) {
		fmt.Fprintf(b, "| %s |", name)
		for _, im := range f.impls {
			fmt.Fprintf(b, " %s |", cell(im))
		}
		fmt.Fprintf(b, " %s | %s |\n", ratio, target)
	}
	ratioOf := func(a, c float64) string {
		if c == 0 {
			return ""
		}
		return fmt.Sprintf("%.2f×", a/c)
	}

	row("binary, stripped", func(im implFootprint) string { return fmt.Sprintf("%.1f MB", float64(im.binaryBytes)/1e6) },
		ratioOf(float64(lh.binaryBytes), float64(cg.binaryBytes)), "≤ 25 MB")
	row("packages linked (`go list -deps`, standard library included); `k8s.io/api` groups among them; the full clientset `k8s.io/client-go/kubernetes`",
		func(im implFootprint) string {
			if im.packages == 0 {
				return "—"
			}
			return fmt.Sprintf("%d; %d; %s", im.packages, len(im.apiGroups), yesNo(im.clientset))
		}, "", "only the groups it uses: coordination/v1, core/v1; no")
	idle := func(im implFootprint) float64 { return float64(medianInt(rssOf(im.idle))) }
	row(fmt.Sprintf("RSS idle, leading (median of %d samples over %v)", len(lh.idle), f.window.Round(time.Second)),
		func(im implFootprint) string { return fmt.Sprintf("%.1f MiB", idle(im)/(1<<20)) },
		ratioOf(idle(lh), idle(cg)), "≤ 0.6×")
	row("… of which anonymous (heap, stacks: each pod's own) / file-backed (the binary's pages: shared by every process that maps the same file)",
		func(im implFootprint) string {
			anon := float64(medianInt(anonOf(im.idle)))
			return fmt.Sprintf("%.1f / %.1f MiB", anon/(1<<20), (idle(im)-anon)/(1<<20))
		}, "", "")
	added := func(im implFootprint) float64 { return float64(medianInt(rssOf(im.withWatch))) - idle(im) }
	row(fmt.Sprintf("RSS added by %d open watchers (½ long-poll, ½ SSE; median of %d samples)", f.watchers, len(lh.withWatch)),
		func(im implFootprint) string { return fmt.Sprintf("%+.1f MiB", added(im)/(1<<20)) },
		ratioOf(added(lh), added(cg)), fmt.Sprintf("≤ %d MiB per 1,000", 12))
	row(fmt.Sprintf("CPU while leading, over %v", lh.cpuWindow.Round(time.Second)),
		func(im implFootprint) string {
			return fmt.Sprintf("%.2f %%", 100*im.cpu.Seconds()/im.cpuWindow.Seconds())
		},
		ratioOf(lh.cpu.Seconds(), cg.cpu.Seconds()), "≤ 0.5 % of one core")
	row(fmt.Sprintf("process start → `/readyz` 200, p50 / p95 (n=%d; a Lease held by another, apiserver on loopback)", len(lh.starts)),
		func(im implFootprint) string {
			return fmt.Sprintf("%v / %v", quantile(im.starts, 0.5), quantile(im.starts, 0.95))
		}, ratioOf(float64(quantile(lh.starts, 0.5)), float64(quantile(cg.starts, 0.5))), "p50 ≤ 150ms")
	row(fmt.Sprintf("`GET /v1/status`, %d connections, closed loop: throughput (median of %d rounds of %v)", r.opts.statusConns, len(lh.rates), f.statusLen),
		func(im implFootprint) string { return fmt.Sprintf("%.0f req/s", median(im.rates)) },
		ratioOf(median(lh.rates), median(cg.rates)), "no regression")
	row("… p50 / p99 over every round",
		func(im implFootprint) string {
			return fmt.Sprintf("%v / %v", quantile(im.latencies, 0.5), quantile(im.latencies, 0.99))
		}, ratioOf(float64(quantile(lh.latencies, 0.99)), float64(quantile(cg.latencies, 0.99)))+" (p99)", "no regression")

	fl := f.floor
	flIdle := float64(medianInt(rssOf(fl.idle)))
	flAdded := float64(medianInt(rssOf(fl.withWatch))) - flIdle
	per := func(_ memstats, v float64) float64 { return v / float64(f.watchers) }
	fmt.Fprintf(b, "\nThe floor of the watchers' cost: net/http alone (`bench/nethttp`: the same listener with handlers that only block, no election), in the same run: "+
		"RSS idle %.1f MiB, added by %d watchers %+.1f MiB. Per watcher, after two garbage collections (live memory only, no heap headroom):\n\n",
		flIdle/(1<<20), f.watchers, flAdded/(1<<20))
	p := r.footprint.profile
	fmt.Fprintln(b, "| per open watcher | leasehold | net/http alone |\n|---|---|---|")
	fmt.Fprintf(b, "| goroutines | %.2f | %.2f |\n", per(p.after, p.after.Goroutines-p.before.Goroutines), per(fl.after, fl.after.Goroutines-fl.before.Goroutines))
	fmt.Fprintf(b, "| heap in use | %.1f KiB | %.1f KiB |\n", per(p.after, p.after.HeapInuse-p.before.HeapInuse)/1024, per(fl.after, fl.after.HeapInuse-fl.before.HeapInuse)/1024)
	fmt.Fprintf(b, "| goroutine stacks | %.1f KiB | %.1f KiB |\n", per(p.after, p.after.StackInuse-p.before.StackInuse)/1024, per(fl.after, fl.after.StackInuse-fl.before.StackInuse)/1024)

	fmt.Fprintf(b, "\nleasehold's goroutines with the %d watchers open, by where they wait (goroutine profile; `LEASEHOLD_PPROF=true`):\n\n", f.watchers)
	places := slices.SortedFunc(maps.Keys(p.goroutines), func(a, c string) int { return p.goroutines[c] - p.goroutines[a] })
	fmt.Fprintln(b, "| where | goroutines |\n|---|---|")
	for _, place := range places {
		fmt.Fprintf(b, "| `%s` | %d |\n", place, p.goroutines[place])
	}
	fmt.Fprintf(b, "\n<details><summary>leasehold's heap in use, idle (after GC; <code>go tool pprof -top</code>, every allocation sampled)</summary>\n\n```\n%s```\n</details>\n", p.idleTop)
	fmt.Fprintf(b, "\n<details><summary>leasehold's heap in use added by the %d watchers (after GC; <code>go tool pprof -top -diff_base</code>)</summary>\n\n```\n%s```\n</details>\n", f.watchers, p.heapTop)

	fmt.Fprintf(b, "\nCommand: `%s`, %s.\nMachine: %s.\n%s\n", strings.TrimSpace(r.opts.command), r.date, r.machine, footprintEnd)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// writeFootprint replaces the footprint section of the report file at path
// (between the markers) with this run's, or appends it when the file has
// none; it creates the file when missing.
func (r *report) writeFootprint(path string) error {
	var b strings.Builder
	r.footprintMarkdown(&b)
	section := b.String()
	old, err := os.ReadFile(path)
	switch {
	case os.IsNotExist(err):
		return os.WriteFile(path, []byte(docHeader+section), 0o644)
	case err != nil:
		return err
	}
	doc := string(old)
	begin, end := strings.Index(doc, footprintBegin), strings.Index(doc, footprintEnd)
	if begin < 0 || end < begin {
		return os.WriteFile(path, []byte(strings.TrimRight(doc, "\n")+"\n\n"+section), 0o644)
	}
	doc = doc[:begin] + section + strings.TrimPrefix(doc[end+len(footprintEnd):], "\n")
	return os.WriteFile(path, []byte(doc), 0o644)
}
