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
	footprintBegin = "<!-- footprint: begin (cd bench && go run . -only footprint -out FILE replaces this section) -->"
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
	fmt.Fprint(b, " leasehold ÷ client-go | target for leasehold | verdict |\n|---|")
	for range f.impls {
		fmt.Fprint(b, "---|")
	}
	fmt.Fprint(b, "---|---|---|\n")
	row := func(name string, cell func(implFootprint) string, ratio, target, verdict string) {
		fmt.Fprintf(b, "| %s |", name)
		for _, im := range f.impls {
			fmt.Fprintf(b, " %s |", cell(im))
		}
		fmt.Fprintf(b, " %s | %s | %s |\n", ratio, target, verdict)
	}
	ratioOf := func(a, c float64) string {
		if c == 0 {
			return ""
		}
		return fmt.Sprintf("%.2f×", a/c)
	}
	judge := func(met bool, missed string, args ...any) string {
		if met {
			return "met"
		}
		return "**missed**: " + fmt.Sprintf(missed, args...)
	}
	var ref *implFootprint // leasehold as of -footprint-ref, if measured
	for i := range f.impls {
		if strings.HasPrefix(f.impls[i].impl.name, "leasehold at ") {
			ref = &f.impls[i]
		}
	}

	const maxBinary = 25e6
	unused := slices.DeleteFunc(slices.Clone(lh.apiGroups), func(g string) bool { return slices.Contains(usedGroups, g) })
	row("binary, stripped", func(im implFootprint) string { return fmt.Sprintf("%.1f MB", float64(im.binaryBytes)/1e6) },
		ratioOf(float64(lh.binaryBytes), float64(cg.binaryBytes)), "≤ 25 MB",
		judge(lh.binaryBytes <= maxBinary, "%.1f MB, %.0f%% over", float64(lh.binaryBytes)/1e6, 100*(float64(lh.binaryBytes)/maxBinary-1)))
	row("packages linked (`go list -deps`, standard library included); `k8s.io/api` groups among them; the full clientset `k8s.io/client-go/kubernetes`",
		func(im implFootprint) string {
			if im.packages == 0 {
				return "—"
			}
			return fmt.Sprintf("%d; %d; %s", im.packages, len(im.apiGroups), yesNo(im.clientset))
		}, "", "only the groups it uses: "+strings.Join(usedGroups, ", ")+"; no",
		judge(len(unused) == 0 && !lh.clientset, "%s it does not use; clientset: %s", plural(len(unused), "group"), yesNo(lh.clientset)))
	idle := func(im implFootprint) float64 { return float64(medianInt(rssOf(im.idle))) }
	anon := func(im implFootprint) float64 { return float64(medianInt(anonOf(im.idle))) }
	const maxIdleRatio = 0.6
	row(fmt.Sprintf("RSS idle, leading (median of %d samples over %v)", len(lh.idle), f.window.Round(time.Second)),
		func(im implFootprint) string { return fmt.Sprintf("%.1f MiB", idle(im)/(1<<20)) },
		ratioOf(idle(lh), idle(cg)), fmt.Sprintf("≤ %.1f× (%.1f MiB)", maxIdleRatio, maxIdleRatio*idle(cg)/(1<<20)),
		judge(idle(lh) <= maxIdleRatio*idle(cg), "%.2f×, %.1f MiB over", idle(lh)/idle(cg), (idle(lh)-maxIdleRatio*idle(cg))/(1<<20)))
	row("… of which anonymous (heap, stacks: each pod's own) / file-backed (the binary's pages: shared by every process that maps the same file)",
		func(im implFootprint) string {
			return fmt.Sprintf("%.1f / %.1f MiB", anon(im)/(1<<20), (idle(im)-anon(im))/(1<<20))
		}, "", "", "")
	added := func(im implFootprint) float64 { return float64(medianInt(rssOf(im.withWatch))) - idle(im) }
	maxAdded := 12 * float64(f.watchers) / 1000 * (1 << 20)
	row(fmt.Sprintf("RSS added by %d open watchers (½ long-poll, ½ SSE; median of %d samples)", f.watchers, len(lh.withWatch)),
		func(im implFootprint) string { return fmt.Sprintf("%+.1f MiB", added(im)/(1<<20)) },
		ratioOf(added(lh), added(cg)), fmt.Sprintf("≤ %.0f MiB (12 MiB per 1,000)", maxAdded/(1<<20)),
		judge(added(lh) <= maxAdded, "%.1f MiB over", (added(lh)-maxAdded)/(1<<20)))
	cpu := func(im implFootprint) float64 { return im.cpu.Seconds() / im.cpuWindow.Seconds() }
	row(fmt.Sprintf("CPU while leading, over %v", lh.cpuWindow.Round(time.Second)),
		func(im implFootprint) string { return fmt.Sprintf("%.2f %%", 100*cpu(im)) },
		ratioOf(lh.cpu.Seconds(), cg.cpu.Seconds()), "≤ 0.5 % of one core", judge(cpu(lh) <= 0.005, "%.2f %%", 100*cpu(lh)))
	const maxStart = 150 * time.Millisecond
	row(fmt.Sprintf("process start → `/readyz` 200, p50 / p95 (n=%d; a Lease held by another, apiserver on loopback)", len(lh.starts)),
		func(im implFootprint) string {
			return fmt.Sprintf("%v / %v", quantile(im.starts, 0.5), quantile(im.starts, 0.95))
		}, ratioOf(float64(quantile(lh.starts, 0.5)), float64(quantile(cg.starts, 0.5))), "p50 ≤ 150ms",
		judge(quantile(lh.starts, 0.5) <= maxStart, "p50 %v", quantile(lh.starts, 0.5)))
	vsRef := func(a, c float64) string { return fmt.Sprintf("%.2f× %s's", a/c, ref.impl.name) }
	row(fmt.Sprintf("`GET /v1/status`, %d connections, closed loop: throughput (median of %d rounds of %v, alternating)", r.opts.statusConns, len(lh.rates), f.statusLen),
		func(im implFootprint) string { return fmt.Sprintf("%.0f req/s", median(im.rates)) },
		ratioOf(median(lh.rates), median(cg.rates)), "no regression", refOr(ref, func(ref implFootprint) string { return vsRef(median(lh.rates), median(ref.rates)) }))
	row("… p50 / p99 over every round",
		func(im implFootprint) string {
			return fmt.Sprintf("%v / %v", quantile(im.latencies, 0.5), quantile(im.latencies, 0.99))
		}, ratioOf(float64(quantile(lh.latencies, 0.99)), float64(quantile(cg.latencies, 0.99)))+" (p99)", "no regression",
		refOr(ref, func(ref implFootprint) string {
			return vsRef(float64(quantile(lh.latencies, 0.99)), float64(quantile(ref.latencies, 0.99))) + " (p99)"
		}))

	// Notes: why the figures are what they are, from this run.
	fmt.Fprintln(b)
	if len(unused) > 0 {
		fmt.Fprintf(b, "- API groups: leasehold links %s of `k8s.io/api` besides %s because it imports client-go's typed clients (from %s); "+
			"each typed client's package imports client-go's scheme, which registers every group. "+
			"Only Lease and Pod clients of its own, on a scheme of those two groups alone, would leave them out.\n",
			plural(len(unused), "group"), strings.Join(usedGroups, " and "), strings.Join(lh.typedVia, ", "))
	}
	fl := f.floor
	flIdle := float64(medianInt(rssOf(fl.idle)))
	flAdded := float64(medianInt(rssOf(fl.withWatch))) - flIdle
	fmt.Fprintf(b, "- RSS idle: %.1f MiB of leasehold's %.1f MiB are file-backed, the pages of its binary it has touched (the kernel maps a file's pages in runs around each fault, so this part follows the binary's size, column by column above); "+
		"that part alone is %.2f× client-go's whole RSS. The anonymous part, %.1f MiB, is %.2f× client-go's; of it, the Go heap live after GC is %s (the idle heap profile below), "+
		"and the rest the heap's headroom until the next GC, goroutine stacks and the runtime's own. "+
		"The floor (`bench/floor`: the libraries the product is built on, client-go's REST client with the lean Lease client, Prometheus' client and gorilla/mux, initialised as the sidecar initialises them, "+
		"behind an API that does nothing) holds %.1f MiB at rest in this run, %.2f× client-go's RSS: leasehold's election, watch and API add %+.1f MiB to it.\n",
		(idle(lh)-anon(lh))/(1<<20), idle(lh)/(1<<20), (idle(lh)-anon(lh))/idle(cg), anon(lh)/(1<<20), anon(lh)/anon(cg), profileTotal(f.profile.idleTop),
		flIdle/(1<<20), flIdle/idle(cg), (idle(lh)-flIdle)/(1<<20))

	per := func(v float64) float64 { return v / float64(f.watchers) }
	p := r.footprint.profile
	live := func(before, after memstats) float64 {
		return per(after.HeapInuse-before.HeapInuse) + per(after.StackInuse-before.StackInuse)
	}
	fmt.Fprintf(b, "- Watchers: the floor (the same listener with handlers that only block, no election) adds %+.1f MiB for the same %d watchers in this run: what net/http costs per connection. "+
		"Each open request holds two goroutines of net/http's (one serves the connection, one watches it for the client leaving) and its connection's read and write buffers and its response buffer "+
		"(`bufio.NewReaderSize`, `bufio.NewWriterSize` in the heap profile below). Live memory per watcher after GC: leasehold %.1f KiB, the floor %.1f KiB (%.2f×):\n\n",
		flAdded/(1<<20), f.watchers, live(p.before, p.after)/1024, live(fl.before, fl.after)/1024, live(p.before, p.after)/live(fl.before, fl.after))
	fmt.Fprintln(b, "| per open watcher | leasehold | the floor |\n|---|---|---|")
	fmt.Fprintf(b, "| goroutines | %.2f | %.2f |\n", per(p.after.Goroutines-p.before.Goroutines), per(fl.after.Goroutines-fl.before.Goroutines))
	fmt.Fprintf(b, "| heap in use | %.1f KiB | %.1f KiB |\n", per(p.after.HeapInuse-p.before.HeapInuse)/1024, per(fl.after.HeapInuse-fl.before.HeapInuse)/1024)
	fmt.Fprintf(b, "| goroutine stacks | %.1f KiB | %.1f KiB |\n", per(p.after.StackInuse-p.before.StackInuse)/1024, per(fl.after.StackInuse-fl.before.StackInuse)/1024)

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

// usedGroups are the API groups leasehold uses: Leases, and Pods for the
// leader label.
var usedGroups = []string{"coordination/v1", "core/v1"}

// refOr is f(*ref), or "" without a ref.
func refOr(ref *implFootprint, f func(implFootprint) string) string {
	if ref == nil {
		return ""
	}
	return f(*ref)
}

// profileTotal is the total of a go tool pprof -top output ("… of 1560.65kB
// total"), "?" when it has none.
func profileTotal(top string) string {
	_, rest, ok := strings.Cut(top, "% of ")
	total, _, ok2 := strings.Cut(rest, " total")
	if !ok || !ok2 {
		return "?"
	}
	return total
}

// plural is "1 thing" or "n things".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
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
	return replaceSection(path, footprintBegin, footprintEnd, b.String())
}

// replaceSection replaces the section between the markers begin and end
// (included) of the file at path with section, keeping the rest of the
// file; a file without the section gets it appended, and a missing file is
// created.
func replaceSection(path, begin, end, section string) error {
	old, err := os.ReadFile(path)
	switch {
	case os.IsNotExist(err):
		return os.WriteFile(path, []byte(docHeader+section), 0o644)
	case err != nil:
		return err
	}
	doc := string(old)
	b, e := strings.Index(doc, begin), strings.Index(doc, end)
	if b < 0 || e < b {
		return os.WriteFile(path, []byte(strings.TrimRight(doc, "\n")+"\n\n"+section), 0o644)
	}
	doc = doc[:b] + section + strings.TrimPrefix(doc[e+len(end):], "\n")
	return os.WriteFile(path, []byte(doc), 0o644)
}
