package run

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/fence"
	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
	"github.com/leasehold/leasehold/internal/testing/overlap"
	"github.com/leasehold/leasehold/internal/testing/poll"
)

// TestEachRunsOneCopyPerLeaseHeld: two sidecars of a group of 2 shards,
// each with `leasehold run --each`: each pod runs one copy, for the shard
// it holds, with LEASEHOLD_LEASE naming it (the beater writes to a file of
// that name). When one sidecar stops, the other pod starts a copy for the
// shard it takes over, with a larger token; per shard, the copies of the
// two pods never run at the same time.
func TestEachRunsOneCopyPerLeaseHeld(t *testing.T) {
	t.Parallel()
	ns, err := kubetest.Require(t, cluster).CreateNamespace(t.Context(), "run-each")
	if err != nil {
		t.Fatal(err)
	}
	cfg := fleet.Config{
		Binary: binary, Cluster: cluster, Namespace: ns, Lease: "app",
		LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		Env: []string{"LEASEHOLD_SHARDS=2"}, Dir: t.TempDir(),
	}
	shards := []string{"app-0", "app-1"}
	pods := map[string]*fleet.Instance{}
	dirs := map[string]string{}
	for _, name := range []string{"a", "b"} {
		inst, err := cfg.Start(t.Context(), name, false)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(inst.Stop)
		pods[name] = inst
		dirs[name] = filepath.Join(cfg.Dir, name+"-beats")
		if err := os.Mkdir(dirs[name], 0o755); err != nil {
			t.Fatal(err)
		}
		r := startRunnerWith(t, inst.APIURL, filepath.Join(cfg.Dir, name+".runner.log"),
			[]string{"BEAT_DIR=" + dirs[name]}, []string{"--each"}, beater)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("--- %s runner log tail:\n%s", name, kubetest.LogTail(r.log, 20))
			}
		})
	}
	beating := func(pod, shard string, after fence.Token) bool {
		beats, _ := beatsOf(t, filepath.Join(dirs[pod], shard+".beats"))
		n := 0
		for _, b := range beats {
			if b.token > after {
				n++
			}
		}
		return n >= 20
	}
	eventually(t, "each pod running a copy for one shard", func() bool {
		return (beating("a", "app-0", 0) && beating("b", "app-1", 0)) || (beating("a", "app-1", 0) && beating("b", "app-0", 0))
	}, nil)
	bShard := "app-0"
	if beating("b", "app-1", 0) {
		bShard = "app-1"
	}
	bBeats, _ := beatsOf(t, filepath.Join(dirs["b"], bShard+".beats"))
	bToken := bBeats[len(bBeats)-1].token

	if err := pods["b"].Signal(syscall.SIGTERM); err != nil { // it releases its shard
		t.Fatal(err)
	}
	eventually(t, "a running a copy for b's shard "+bShard+" with a larger token", func() bool {
		return beating("a", bShard, bToken)
	}, nil)
	for _, shard := range shards {
		checkCopiesApart(t, shard, dirs["a"], dirs["b"])
	}
}

// checkCopiesApart checks with internal/testing/overlap that the copies
// for shard of different pods (beat directories) never certainly ran at
// one same instant, and that their tokens increase in time.
func checkCopiesApart(t *testing.T, shard string, dirs ...string) {
	t.Helper()
	var obs []overlap.Observation[string]
	for _, dir := range dirs {
		beats, _ := beatsOf(t, filepath.Join(dir, shard+".beats"))
		for _, b := range beats {
			obs = append(obs, overlap.Observation[string]{Member: dir, Sent: b.at, Recv: b.at, Leader: true, Token: b.token})
		}
	}
	for _, p := range overlap.Check(obs) {
		t.Errorf("%s: copies under tokens %d and %d overlap by %v", shard, p.A.Token, p.B.Token, p.By())
	}
	runs := overlap.Runs(obs)
	slices.SortFunc(runs, func(x, y overlap.Run[string]) int { return x.First().Sent.Compare(y.First().Sent) })
	for i := 1; i < len(runs); i++ {
		if runs[i].Token <= runs[i-1].Token {
			t.Errorf("%s: token %d ran after token %d", shard, runs[i].Token, runs[i-1].Token)
		}
	}
	if len(runs) == 0 {
		t.Errorf("%s: no copy ran", shard)
	}
	t.Logf("%s: %d copies, one after another", shard, len(runs))
}

// eventually polls cond until it holds, failing the test after generous
// with report's account of the last state cond saw (nil: none).
func eventually(t *testing.T, what string, cond func() bool, report func() string) {
	t.Helper()
	poll.UntilReport(t, generous, 20*time.Millisecond, what, cond, report) // polling files
}
