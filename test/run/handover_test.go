package run

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// f) The handover time, SIGTERM to the leader's sidecar → the successor's
// command starts, with runners attached and not paused, whose commands obey
// SIGTERM: the old runner stops its command and closes its hold within
// milliseconds, so the handover takes about the start delay, as it did
// before holds. LEASEHOLD_HANDOVER_TRIALS sets the number of handovers
// (default 3); the times are logged (go test -v -run HandoverTime).
func TestHandoverTime(t *testing.T) {
	t.Parallel()
	trials := 3
	if v := os.Getenv("LEASEHOLD_HANDOVER_TRIALS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("LEASEHOLD_HANDOVER_TRIALS=%q: want a positive integer", v)
		}
		trials = n
	}
	tr := newTrial(t)
	tr.start("m0", false)
	tr.start("m1", false)
	cur := tr.awaitRun(0, nil)
	var took, release []time.Duration
	for i := range trials {
		tr.awaitBeats(cur.m, cur.token, 20)
		at := time.Now()
		if err := cur.m.inst.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		next := tr.awaitRun(cur.token, cur.m)
		tr.awaitStopped(cur.m)
		acquired := next.m.terms(t)[next.token].acquiredAt
		took = append(took, next.first.Sub(at))
		release = append(release, acquired.Sub(at))
		t.Logf("handover %d: SIGTERM to %s → %s acquired %v later, its command started %v later",
			i+1, cur.m.name, next.m.name, acquired.Sub(at).Round(100*time.Microsecond), next.first.Sub(at).Round(100*time.Microsecond))
		if bound := startDelay + slack; next.first.Sub(at) > bound {
			t.Errorf("handover %d took %v, want at most the start delay plus slack (%v)", i+1, next.first.Sub(at), bound)
		}
		tr.start(fmt.Sprintf("m%d", i+2), false) // a candidate for the next handover
		cur = next
	}
	tr.stopSampling()
	tr.checkNoOverlap()
	t.Logf("SIGTERM → successor acquired, over %d handovers: %s", trials, spread(release))
	t.Logf("SIGTERM → successor's command started, over %d handovers: %s", trials, spread(took))
}

// spread describes durations: min, median, max.
func spread(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	r := func(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }
	return fmt.Sprintf("min %v, median %v, max %v", r(s[0]), r(s[len(s)/2]), r(s[len(s)-1]))
}
