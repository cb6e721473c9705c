package examples_test

import (
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
)

// TestShardedWorker runs the sharded Python worker next to two sidecars of
// one group of 4 shards: each pod works on the 2 shards it holds, every
// write carries its shard's token, and when one pod's sidecar stops, the
// other takes its shards over (with larger tokens) and works on all 4;
// then the worker exits 0 on SIGTERM.
func TestShardedWorker(t *testing.T) {
	kubetest.Require(t, cluster)
	argv := interpreted("python/sharded_worker.py", "python3")(t)
	ns, err := cluster.CreateNamespace(t.Context(), "examples-sharded")
	if err != nil {
		t.Fatal(err)
	}
	f := fleet.Config{
		Binary: sidecar, Cluster: cluster, Namespace: ns, Lease: "orders",
		LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		Env: []string{"LEASEHOLD_SHARDS=4"}, Dir: t.TempDir(),
	}
	store := newStore(t)
	pods := map[string]*fleet.Instance{}
	workers := map[string]*worker{}
	for _, name := range []string{"pod-a", "pod-b"} {
		inst, err := f.Start(t.Context(), name, false)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(inst.Stop)
		pods[name] = inst
		workers[name] = startWorker(t, argv, inst.APIURL, store.URL+"/write", name)
	}
	shards := []string{"orders-0", "orders-1", "orders-2", "orders-3"}

	// 1. Settled: each pod writes 2 of the shards, every shard is written.
	store.await(t, "each pod writing 2 shards", func(ws []write) bool {
		byWriter := recentShards(ws, 500*time.Millisecond)
		return len(byWriter["pod-a"]) == 2 && len(byWriter["pod-b"]) == 2 &&
			len(slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(byWriter["pod-a"]), byWriter["pod-b"]...))))) == 4
	})
	checkShardTokens(t, store.writes(), shards)
	before := store.writes()

	// 2. pod-b's sidecar stops (releasing its shards): pod-a takes them over
	// and works on all 4, each taken shard under a larger token.
	if err := pods["pod-b"].Signal(syscall.SIGTERM); err != nil { // it releases its shards
		t.Fatal(err)
	}
	store.await(t, "pod-a writing all 4 shards", func(ws []write) bool {
		return len(recentShards(ws, 500*time.Millisecond)["pod-a"]) == 4
	})
	ws := store.writes()
	checkShardTokens(t, ws, shards)
	for _, shard := range shards {
		if last, now := lastAccepted(before, shard), lastAccepted(ws, shard); last.Writer == "pod-b" && now.Token <= last.Token {
			t.Errorf("%s: pod-a writes with token %d, not above pod-b's %d", shard, now.Token, last.Token)
		}
	}

	// 3. SIGTERM: the worker exits 0.
	w := workers["pod-a"]
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.exited:
		if code := w.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("exit status %d after SIGTERM, want 0", code)
		}
	case <-time.After(exitBound):
		t.Fatalf("still running %v after SIGTERM", exitBound)
	}
}

// recentShards is, per writer, the shards it wrote (accepted) in the last
// window of ws.
func recentShards(ws []write, window time.Duration) map[string][]string {
	out := map[string][]string{}
	if len(ws) == 0 {
		return out
	}
	since := ws[len(ws)-1].At.Add(-window)
	for _, w := range ws {
		if w.Code == 200 && w.At.After(since) && !slices.Contains(out[w.Writer], w.Shard) {
			out[w.Writer] = append(out[w.Writer], w.Shard)
		}
	}
	return out
}

// checkShardTokens checks that every write names a shard of the group and
// that, per shard, the tokens of accepted writes never go down (the store
// enforces it; this checks that the workers stamp their own shard's token).
func checkShardTokens(t *testing.T, ws []write, shards []string) {
	t.Helper()
	last := map[string]uint64{}
	for _, w := range ws {
		if !slices.Contains(shards, w.Shard) {
			t.Fatalf("a write for shard %q, not one of %v", w.Shard, shards)
		}
		if w.Code != 200 {
			continue
		}
		if w.Token < last[w.Shard] {
			t.Fatalf("%s: accepted token %d after %d", w.Shard, w.Token, last[w.Shard])
		}
		last[w.Shard] = w.Token
	}
}

func lastAccepted(ws []write, shard string) write {
	var last write
	for _, w := range ws {
		if w.Shard == shard && w.Code == 200 {
			last = w
		}
	}
	if last.Shard == "" {
		panic(fmt.Sprintf("no accepted write for %s", shard))
	}
	return last
}
