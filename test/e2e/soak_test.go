package e2e

import (
	"fmt"
	"io"
	"sync"
	"text/tabwriter"
	"time"
)

// tally counts one scenario's results over the trials of a run.
type tally struct {
	trials, failed         int
	overlaps, regressions  int
	others, livenessMissed int
	recoveries             int
	worstRecovery          time.Duration
	overBound              int // times over a documented bound, within failsAfter
}

var tallies struct {
	sync.Mutex
	order []string
	by    map[string]*tally
}

func tallyFor(scenario string) *tally {
	tallies.Lock()
	defer tallies.Unlock()
	if tallies.by == nil {
		tallies.by = map[string]*tally{}
	}
	t, ok := tallies.by[scenario]
	if !ok {
		t = &tally{}
		tallies.by[scenario] = t
		tallies.order = append(tallies.order, scenario)
	}
	return t
}

func (t *tally) addTrial(vs []violation, failed bool) {
	tallies.Lock()
	defer tallies.Unlock()
	t.trials++
	if failed {
		t.failed++
	}
	for _, v := range vs {
		switch v.kind {
		case overlapped:
			t.overlaps++
		case regression:
			t.regressions++
		default:
			t.others++
		}
	}
}

func (t *tally) addRecovery(d time.Duration) {
	tallies.Lock()
	defer tallies.Unlock()
	t.recoveries++
	t.worstRecovery = max(t.worstRecovery, d)
}

func (t *tally) addOverBound() {
	tallies.Lock()
	defer tallies.Unlock()
	t.overBound++
}

func (t *tally) addLivenessFailure() {
	tallies.Lock()
	defer tallies.Unlock()
	t.livenessMissed++
}

// printSummary writes one line per scenario that ran.
func printSummary(w io.Writer) {
	tallies.Lock()
	defer tallies.Unlock()
	if len(tallies.order) == 0 {
		return
	}
	fmt.Fprintf(w, "\nleasehold fault suite: %d trial(s) per scenario (leaseDuration %v, renewDeadline %v, retryPeriod %v)\n",
		*soak, leaseDuration, renewDeadline, retryPeriod)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\ttrials\tfailed\toverlaps\ttoken regressions\tother violations\tliveness misses\tover bound\tworst recovery")
	var sum tally
	for _, name := range tallies.order {
		t := tallies.by[name]
		worst := "-"
		if t.recoveries > 0 {
			worst = t.worstRecovery.Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", name, t.trials, t.failed, t.overlaps, t.regressions, t.others, t.livenessMissed, t.overBound, worst)
		sum.trials += t.trials
		sum.failed += t.failed
		sum.overlaps += t.overlaps
		sum.regressions += t.regressions
		sum.others += t.others
		sum.livenessMissed += t.livenessMissed
		sum.overBound += t.overBound
	}
	fmt.Fprintf(tw, "total\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", sum.trials, sum.failed, sum.overlaps, sum.regressions, sum.others, sum.livenessMissed, sum.overBound)
	tw.Flush()
}
