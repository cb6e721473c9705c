package main

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// The groups section sits between these markers in the report file, so
// that -only groups can replace it alone.
const (
	groupsBegin = "<!-- groups: begin (cd bench && go run . -only groups -out FILE replaces this section) -->"
	groupsEnd   = "<!-- groups: end -->"
)

// groupsMarkdown renders the groups section, markers included (nothing
// when it did not run).
func (r *report) groupsMarkdown(b *strings.Builder) {
	f := r.groups
	if !f.ran || len(f.impls) < 2 {
		return
	}
	lh, cg := f.impls[0], f.impls[1]
	quota := f.leases / f.members
	mean := float64(f.leases) / float64(f.members)
	needed := f.leases - quota // moves a scale-up from one member needs: all but the first member's share
	fmt.Fprintf(b, "%s\n## Lease groups (issue 12)\n\n", groupsBegin)
	fmt.Fprintf(b, "leasehold with a group's defaults (balanced; `LEASEHOLD_HANDOVER` unset, which in a balanced group is `successor`: a leaver hands each Lease to its heir in one write) vs the pattern client-go users hand-roll: one client-go LeaderElector per Lease in one process "+
		"(`bench/baseline` with the same `LEASEHOLD_SHARDS`: every elector campaigns for its Lease, greedy; one that loses its Lease is run again; ReleaseOnCancel). "+
		"%d shards (`LEASEHOLD_LEASE_NAME=orders LEASEHOLD_SHARDS=%d`), same real kube-apiserver, same run, trials alternating between the two; "+
		"%d trials each, every trial in a namespace of its own. Timings for both: leaseDuration %v, renewDeadline %v, retryPeriod %v (the sidecar's defaults).\n\n",
		f.leases, f.leases, f.trials, f.leaseDuration, f.renewDeadline, f.retryPeriod)

	fmt.Fprintln(b, "| figure | leasehold | client-go, one LeaderElector per Lease | client-go ÷ leasehold | target for leasehold | verdict |")
	fmt.Fprintln(b, "|---|---|---|---|---|---|")
	row := func(figure, a, c, ratio, target, verdict string) {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", figure, a, c, ratio, target, verdict)
	}

	// 1. Scale-up.
	settleTarget := 2 * f.leaseDuration
	settleCell := func(im lgImpl) string {
		var d []time.Duration
		never := 0
		var observed []time.Duration
		for _, t := range im.trials {
			observed = append(observed, t.observed)
			if t.settledOK {
				d = append(d, t.settled)
			} else {
				never++
			}
		}
		if len(d) == 0 {
			return fmt.Sprintf("never, in %d of %d (observed %v after the last start)", never, len(im.trials), quantile(observed, 0.5).Round(time.Second))
		}
		s := fmt.Sprintf("%v (%v–%v)", quantile(d, 0.5), quantile(d, 0), quantile(d, 1))
		if never > 0 {
			s += fmt.Sprintf("; never in %d of %d", never, len(im.trials))
		}
		return s
	}
	lhSettled, lhWorst := true, time.Duration(0)
	for _, t := range lh.trials {
		lhSettled = lhSettled && t.settledOK
		lhWorst = max(lhWorst, t.settled)
	}
	row(fmt.Sprintf("1 → %d members: last member's start → every member holds exactly %d (each member's own `GET /v1/leases`), median (min–max) of %d trials",
		f.members, quota, len(lh.trials)), settleCell(lh), settleCell(cg), "",
		fmt.Sprintf("≤ 2 × leaseDuration = %v", settleTarget),
		judgeIf(lhSettled && lhWorst <= settleTarget, "every trial", "worst trial %s", worstSettle(lh, settleTarget)))

	moves := func(im lgImpl, after bool) []int {
		var v []int
		for _, t := range im.trials {
			if after {
				if t.settledOK {
					v = append(v, t.movesAfterSettle)
				}
				continue
			}
			v = append(v, t.moves)
		}
		return v
	}
	lhMoves := moves(lh, false)
	row("Lease moves during that scale-up (a Lease's holder changing from one identity to another, a release in between or not, on the bench's watch of the Leases; from the added members' start to the end of the observation), median (min–max)",
		intsCell(lhMoves), intsCell(moves(cg, false)), "", fmt.Sprintf("exactly %d", needed),
		judgeIf(len(lhMoves) > 0 && slices.Min(lhMoves) == needed && slices.Max(lhMoves) == needed, "every trial", "%s", intsCell(lhMoves)))
	after := moves(lh, true)
	row(fmt.Sprintf("Leases whose holder changed after every member held %d, until the end of the observation (from the members' own answers), median (min–max)", quota), intsCell(after), "—", "", "0",
		judgeIf(len(after) > 0 && slices.Max(after) == 0, "every trial", "%s", intsCell(after)))

	mom := func(im lgImpl) []float64 {
		var v []float64
		for _, t := range im.trials {
			v = append(v, t.maxOverMean(f.leases))
		}
		return v
	}
	lhMom, cgMom := mom(lh), mom(cg)
	var observed []time.Duration
	for _, t := range slices.Concat(lh.trials, cg.trials) {
		observed = append(observed, t.observed)
	}
	row(fmt.Sprintf("max / mean Leases per member at the end of the observation (mean = %d / %d = %.0f; read %v–%v after the last member's start), median (min–max)",
		f.leases, f.members, mean, quantile(observed, 0).Round(100*time.Millisecond), quantile(observed, 1).Round(100*time.Millisecond)),
		floatsCell(lhMom), floatsCell(cgMom), ratioCell(median(cgMom), median(lhMom)), "1.0 (client-go: expect 4.0)",
		judgeIf(len(lhMom) > 0 && slices.Max(lhMom) <= 1.0, "every trial", "%s", floatsCell(lhMom)))
	fmt.Fprintf(b, "| … Leases held per member then, each trial | %s | %s | | | |\n", heldCell(lh), heldCell(cg))

	// 2. Graceful exit, crash.
	lat := func(d []time.Duration) string {
		if len(d) == 0 {
			return "—"
		}
		return fmt.Sprintf("%v / %v / %v (n=%d)", quantile(d, 0.5), quantile(d, 0.99), quantile(d, 1), len(d))
	}
	const gracefulTarget = 100 * time.Millisecond
	row(fmt.Sprintf("graceful exit (SIGTERM) of one of %d members: SIGTERM → each of its Leases held by another member (that member's blocking `GET /v1/leases` answer), p50 / p99 / max (n: its Leases, every trial)", f.members),
		lat(lh.graceful), lat(cg.graceful), ratioCell(float64(quantile(cg.graceful, 0.99)), float64(quantile(lh.graceful, 0.99)))+" (p99)",
		fmt.Sprintf("p99 ≤ %v", gracefulTarget),
		judgeIf(len(lh.graceful) > 0 && quantile(lh.graceful, 0.99) <= gracefulTarget && lh.gracefulMisses == 0, "", "p99 %v", quantile(lh.graceful, 0.99)))
	row("… of which SIGTERM → the write that lets the Lease go: a release, or (leasehold) a handover naming the heir (its arrival on the bench's watch of the Leases), p50 / p99 / max (n)",
		lat(lh.gracefulToRelease), lat(cg.gracefulToRelease), ratioCell(float64(quantile(cg.gracefulToRelease, 0.99)), float64(quantile(lh.gracefulToRelease, 0.99)))+" (p99)", "", "")
	row("… and that write → held by another member, p50 / p99 / max (n)",
		lat(lh.gracefulFromRelease), lat(cg.gracefulFromRelease), ratioCell(float64(quantile(cg.gracefulFromRelease, 0.99)), float64(quantile(lh.gracefulFromRelease, 0.99)))+" (p99)", "", "")
	crashTarget := f.leaseDuration + f.retryPeriod
	row(fmt.Sprintf("crash (SIGKILL) of one of %d members: SIGKILL → each of its Leases held by another member, p50 / p99 / max (n)", f.members),
		lat(lh.crash), lat(cg.crash), ratioCell(float64(quantile(cg.crash, 0.99)), float64(quantile(lh.crash, 0.99)))+" (p99)",
		fmt.Sprintf("≤ leaseDuration + retryPeriod = %v (max)", crashTarget),
		judgeIf(len(lh.crash) > 0 && quantile(lh.crash, 1) <= crashTarget && lh.crashMisses == 0, "", "max %v", quantile(lh.crash, 1)))
	row("Leases the stopped member held, each trial: graceful exit; crash", intsCell2(lh.gracefulHeld, lh.crashHeld), intsCell2(cg.gracefulHeld, cg.crashHeld), "", "", "")
	row(fmt.Sprintf("Leases not held again within 3 × leaseDuration (%v): graceful exit; crash", 3*f.leaseDuration),
		fmt.Sprintf("%d; %d", lh.gracefulMisses, lh.crashMisses), fmt.Sprintf("%d; %d", cg.gracefulMisses, cg.crashMisses), "", "0; 0",
		judgeIf(lh.gracefulMisses+lh.crashMisses == 0, "", "%d; %d", lh.gracefulMisses, lh.crashMisses))

	row("for scale: one Lease write by the bench (Update, admin client), every 200ms through every trial, p50 / p99 / max (n)", lat(lh.probe), lat(cg.probe), "", "", "")

	// 3. Overlaps.
	row(fmt.Sprintf("Leases with two valid holders at once, any trial (certain overlaps in every member's `GET /v1/leases` sampled every %v, each Lease judged on its own; %d / %d samples)",
		f.sampleInterval, lh.samples, cg.samples),
		fmt.Sprintf("%d of %d", lh.overlapLeases, lh.leaseTrials), fmt.Sprintf("%d of %d", cg.overlapLeases, cg.leaseTrials), "", "0",
		judgeIf(lh.overlapLeases == 0, "", "%d", lh.overlapLeases))

	// 4. Requests.
	lq, cq := lh.requests, cg.requests
	lhFormula := float64(lq.held)*time.Minute.Seconds()/f.retryPeriod.Seconds() + float64(lq.members)*time.Minute.Seconds()/(f.leaseDuration.Seconds()/3)
	cgCandidates := cq.members*f.leases - cq.held
	cgFormula := float64(cq.held)*time.Minute.Seconds()/f.retryPeriod.Seconds() + float64(cgCandidates)*time.Minute.Seconds()/(1.6*f.retryPeriod.Seconds())
	lhMeasured, cgMeasured := lq.perMinute(lq.total), cq.perMinute(cq.total)
	within := math.Abs(lhMeasured/lhFormula - 1)
	row(fmt.Sprintf("apiserver requests per minute of the settled group of %d (every member's `leasehold_kube_requests_total`, over %v, trial 1): measured / formula",
		f.members, lq.window.Round(time.Second)),
		fmt.Sprintf("%.0f / %.0f", lhMeasured, lhFormula), fmt.Sprintf("%.0f / %.0f", cgMeasured, cgFormula), ratioCell(cgMeasured, lhMeasured),
		fmt.Sprintf("held × 60 / retryPeriod + members × 60 / (leaseDuration / 3) = %d × %.0f + %d × %.0f; no candidate polling",
			lq.held, time.Minute.Seconds()/f.retryPeriod.Seconds(), lq.members, time.Minute.Seconds()/(f.leaseDuration.Seconds()/3)),
		judgeIf(within <= 0.05 && lq.byVerb["get"] == 0, fmt.Sprintf("within %.1f %%", 100*within), "%.1f %% off; %.0f Gets", 100*within, lq.byVerb["get"]))
	row("… by verb, per minute", verbsCell(lq), verbsCell(cq), "", "", "")
	if lq.renewals > 0 {
		row("… leasehold: renew writes (`leasehold_renew_duration_seconds`) / the rest (member Leases: create, renew, delete); versions seen on the Lease watch: shard Leases / member Leases, per minute",
			fmt.Sprintf("%.0f / %.0f; %.0f / %.0f", lq.perMinute(lq.renewals), lq.perMinute(lq.total-lq.renewals), lq.perMinute(float64(lq.shardWrites)), lq.perMinute(float64(lq.memberWrites))),
			fmt.Sprintf("versions seen: %.0f / %.0f", cq.perMinute(float64(cq.shardWrites)), cq.perMinute(float64(cq.memberWrites))), "",
			fmt.Sprintf("%d × %.0f = %.0f; %d × %.0f = %.0f", lq.held, time.Minute.Seconds()/f.retryPeriod.Seconds(), float64(lq.held)*time.Minute.Seconds()/f.retryPeriod.Seconds(),
				lq.members, time.Minute.Seconds()/(f.leaseDuration.Seconds()/3), float64(lq.members)*time.Minute.Seconds()/(f.leaseDuration.Seconds()/3)), "")
	}

	// 5. One process, a large group.
	if big := f.big; big.ran && len(big.impls) >= 2 {
		bl, bc := big.impls[0], big.impls[1]
		rss := func(im lgBigImpl) float64 { return mib(medianInt(rssOf(im.mem))) }
		// CPU is the median window's share of one core, in percent.
		cpu := func(im lgBigImpl) float64 {
			if len(im.cpuShares) == 0 {
				return 0
			}
			return 100 * median(im.cpuShares)
		}
		cpuCell := func(im lgBigImpl) string {
			if len(im.cpuShares) < 2 {
				return fmt.Sprintf("%.2f %%", cpu(im))
			}
			return fmt.Sprintf("%.2f %% (%.2f–%.2f)", cpu(im), 100*slices.Min(im.cpuShares), 100*slices.Max(im.cpuShares))
		}
		const maxRSS, maxCPU = 60.0, 5.0
		heldAll := slices.Min(bl.held) == big.leases
		// Without every Lease held there is no steady state to judge: the
		// figures are what the process used meanwhile.
		judgeBig := func(ok bool, figure string) string {
			if !heldAll {
				return fmt.Sprintf("**missed**: no steady state (it held %d–%d of %d, the row below); %s meanwhile", slices.Min(bl.held), slices.Max(bl.held), big.leases, figure)
			}
			return judgeIf(ok, "", "%s", figure)
		}
		row(fmt.Sprintf("one process, %d Leases (`LEASEHOLD_SHARDS=%d`, alone): RSS, median of %d samples over %v", big.leases, big.leases, len(bl.mem), bl.cpuWindow.Round(time.Second)),
			fmt.Sprintf("%.1f MiB", rss(bl)), fmt.Sprintf("%.1f MiB", rss(bc)), ratioCell(rss(bc), rss(bl)), fmt.Sprintf("≤ %.0f MiB", maxRSS),
			judgeBig(rss(bl) <= maxRSS, fmt.Sprintf("%.1f MiB", rss(bl))))
		row(fmt.Sprintf("… CPU, of one core: median (min–max) of %d consecutive windows of %v, both processes in the same windows", len(bl.cpuShares), big.window.Round(time.Second)),
			cpuCell(bl), cpuCell(bc), ratioCell(cpu(bc), cpu(bl)), fmt.Sprintf("≤ %.0f %% (median)", maxCPU),
			judgeBig(cpu(bl) <= maxCPU, fmt.Sprintf("%.2f %%", cpu(bl))))
		heldCellBig := func(im lgBigImpl) string {
			s := fmt.Sprintf("%d / %d / %d", slices.Min(im.held), medianOfInts(im.held), slices.Max(im.held))
			if im.allAfter > 0 {
				return s + fmt.Sprintf("; all %d after %v", big.leases, im.allAfter.Round(100*time.Millisecond))
			}
			return s + fmt.Sprintf("; never all %d within %v of its start", big.leases, 3*f.leaseDuration)
		}
		row(fmt.Sprintf("… Leases held through those windows, min / median / max of %d samples; start → first holding all %d", len(bl.held), big.leases),
			heldCellBig(bl), heldCellBig(bc), "", fmt.Sprintf("%d throughout", big.leases),
			judgeIf(heldAll, "", "%d–%d of %d", slices.Min(bl.held), slices.Max(bl.held), big.leases))
		need := float64(big.leases) / f.retryPeriod.Seconds()
		perSec := func(im lgBigImpl, v float64) float64 { return v / im.cpuWindow.Seconds() }
		row(fmt.Sprintf("… updates per second over those windows (needed to renew all %d every retryPeriod: %.0f); requests that failed (no answer, or ≥ 400)", big.leases, need),
			fmt.Sprintf("%.1f; %.0f", perSec(bl, bl.byVerb["update"]), bl.errors), fmt.Sprintf("%.1f; %.0f", perSec(bc, bc.byVerb["update"]), bc.errors), "", "", "")
	}

	fmt.Fprintf(b, "\n- **Held** means the member's own `GET /v1/leases` says `leader: true` for the Lease, which leasehold judges at the moment it answers (validity included) and client-go's baseline reports as the app's view (OnStartedLeading's context not yet cancelled). "+
		"The bench follows each member with a blocking `GET /v1/leases?index=N` (answered as soon as any of its Leases changes holder or leadership), so the arrival of the answer times the change; "+
		"client-go's baseline answers the same query, moving its index when one of its Leases' leadership changes.\n")
	fmt.Fprintf(b, "- **Scale-up**: the first member starts alone and holds all %d Leases (leasehold takes one lease duration: a new Lease is created empty and taken only after that); "+
		"then the other %d start at once, and the clock starts at the last one's process start. The observation lasts at least %v after it, and for leasehold until every member holds its share "+
		"(at most 3 × leaseDuration); max / mean is read then from each member's `GET /v1/leases`. client-go's electors never give a Lease up, so after the scale-up the first member keeps all %d "+
		"and the others poll: its max / mean is read after the same %v.\n", f.leases, f.members-1, f.window, f.leases, f.window)
	fmt.Fprintf(b, "- **Graceful exit and crash**: at a random phase of two retry periods, one member is stopped: leasehold's at random among the %d (each holds %d), client-go's the one holding the most "+
		"(the others hold none), and every Lease it held (its `GET /v1/leases` just before the signal) is timed until another member holds it. "+
		"Between the two, a replacement member starts (and, for leasehold, the shares are fair again), so the crash also strikes one of %d.\n", f.members, quota, f.members)
	fmt.Fprintf(b, "- **Two valid holders**: every member's `GET /v1/leases` is sampled every %v through every trial; for each Lease on its own, the rule of `internal/testing/overlap` (the overlap section's above: a member's consecutive `leader: true` samples under one token prove it led from the first one's receipt to the last one's sending; "+
		"two members overlap when such spans intersect, or when one's single sample lies wholly inside the other's span) counts an overlap only when certain. "+
		"client-go's baseline has no token: the count of its own terms of the Lease stands in for one. "+
		"A handover quicker than the sampling interval cannot show one.\n", f.sampleInterval)
	fmt.Fprintf(b, "- **Requests**: leasehold's leader renews each Lease it holds with one Update every retryPeriod; each member renews its member Lease every leaseDuration / 3; "+
		"a member's electors of the Leases it does not campaign for only watch, so there is no candidate polling. "+
		"client-go: one Update per renewal by the holder (client-go's fast path for a valid leader), and every other elector Gets its Lease every retryPeriod × U(1, 2.2) (JitterFactor 1.2, a mean of 1.6 × retryPeriod): "+
		"formula held × 60 / retryPeriod + (members × Leases − held) × 60 / (1.6 × retryPeriod).\n")
	fmt.Fprintf(b, "- **Noise**: the machine is shared, and the figures are those of one run; compare the two columns of this run rather than figures across runs.\n")
	fmt.Fprintf(b, "\nCommand: `%s`, %s.\nMachine: %s.\n%s\n", strings.TrimSpace(r.opts.command), r.date, r.machine, groupsEnd)
}

// judgeIf is "met" (and detail) when ok, else "**missed**: " and the figure.
func judgeIf(ok bool, detail, missed string, args ...any) string {
	if ok {
		if detail == "" || strings.HasPrefix(detail, "met") {
			return strings.TrimSpace("met" + strings.TrimPrefix(detail, "met"))
		}
		return "met (" + detail + ")"
	}
	return "**missed**: " + fmt.Sprintf(missed, args...)
}

func worstSettle(im lgImpl, target time.Duration) string {
	never := 0
	var worst time.Duration
	for _, t := range im.trials {
		if !t.settledOK {
			never++
		}
		worst = max(worst, t.settled)
	}
	if never > 0 {
		return fmt.Sprintf("never settled in %d of %d", never, len(im.trials))
	}
	return fmt.Sprintf("%v > %v", worst.Round(time.Millisecond), target)
}

func intsCell(v []int) string {
	if len(v) == 0 {
		return "—"
	}
	return fmt.Sprintf("%d (%d–%d)", medianOfInts(v), slices.Min(v), slices.Max(v))
}

func intsCell2(a, c []int) string {
	join := func(v []int) string {
		s := make([]string, len(v))
		for i, x := range v {
			s[i] = fmt.Sprint(x)
		}
		return strings.Join(s, ", ")
	}
	return join(a) + "; " + join(c)
}

func floatsCell(v []float64) string {
	if len(v) == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f (%.2f–%.2f)", median(v), slices.Min(v), slices.Max(v))
}

func heldCell(im lgImpl) string {
	var s []string
	for _, t := range im.trials {
		h := slices.Clone(t.held)
		slices.Sort(h)
		slices.Reverse(h)
		s = append(s, strings.Trim(strings.Join(strings.Fields(fmt.Sprint(h)), " "), "[]"))
	}
	return strings.Join(s, "; ")
}

func verbsCell(r lgRequests) string {
	var s []string
	for _, verb := range slices.Sorted(maps.Keys(r.byVerb)) {
		s = append(s, fmt.Sprintf("%s %.0f", verb, r.perMinute(r.byVerb[verb])))
	}
	if len(s) == 0 {
		return "—"
	}
	return strings.Join(s, ", ")
}

func ratioCell(a, c float64) string {
	if c == 0 || a == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f×", a/c)
}

// medianOfInts is the upper median of v (0 when empty).
func medianOfInts(v []int) int {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
