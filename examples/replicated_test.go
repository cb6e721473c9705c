package examples_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
	"github.com/leasehold/leasehold/internal/testing/poll"
)

// kvReplica is one pod of the replicated key-value example: its sidecar
// (LEASEHOLD_APP_RANK_URL at the worker's /rank, the worker's address
// advertised) and the worker.
type kvReplica struct {
	name    string
	sidecar *fleet.Instance
	worker  *worker
	url     string // the worker's http://127.0.0.1:<port>
}

// TestReplicatedKVFailsOverToTheReplicaWithTheData runs three replicas of
// examples/python/replicated_kv.py: the primary takes 20 writes while one
// replica is paused after the first 10, so it holds half the data when
// the primary dies. Of the two left, the one with all 20 is promoted (its
// rank's position is higher), every write is readable from it, and the
// lagging replica catches up from it.
func TestReplicatedKVFailsOverToTheReplicaWithTheData(t *testing.T) {
	kubetest.Require(t, cluster)
	argv := interpreted("python/replicated_kv.py", "python3")(t)
	ns, err := cluster.CreateNamespace(t.Context(), "examples-kv")
	if err != nil {
		t.Fatal(err)
	}
	start := func(name string) *kvReplica {
		t.Helper()
		port, err := kubetest.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		f := fleet.Config{
			Binary: sidecar, Cluster: cluster, Namespace: ns, Lease: "kv",
			LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
			Env: []string{"LEASEHOLD_APP_RANK_URL=http://" + addr + "/rank", "LEASEHOLD_ADVERTISE_ADDRESS=" + addr,
				"LEASEHOLD_APP_HEALTH_INTERVAL=200ms", "LEASEHOLD_APP_HEALTH_TIMEOUT=200ms"},
			Dir: t.TempDir(),
		}
		inst := f.StartTest(t, name)
		r := &kvReplica{name: name, sidecar: inst, url: "http://" + addr}
		r.worker = startWorker(t, argv, inst.APIURL, "", name, "KV_ADDR="+addr) // it writes to no store
		poll.Until(t, 20*time.Second, 50*time.Millisecond, name+"'s worker answers its rank", func() bool {
			_, err := r.rank()
			return err == nil
		})
		return r
	}
	primary := start("kv-a")
	if _, _, err := fleet.WaitLeader(t.Context(), []*fleet.Instance{primary.sidecar}, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	full, lagging := start("kv-b"), start("kv-c")

	put := func(from, to int) {
		t.Helper()
		for i := from; i <= to; i++ {
			if code := primary.put(t, fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i)); code != http.StatusOK {
				t.Fatalf("PUT k%d to the primary: %d", i, code)
			}
		}
	}
	put(1, 10)
	for _, r := range []*kvReplica{full, lagging} {
		r.awaitPosition(t, 10)
	}
	if err := lagging.worker.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	put(11, 20)
	full.awaitPosition(t, 20)

	// The primary dies (its worker and its sidecar); the lagging replica
	// wakes with positions 1..10 only, the primary no longer there to pull
	// from.
	if err := primary.worker.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := primary.sidecar.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := lagging.worker.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	next, _, err := fleet.WaitLeader(t.Context(), []*fleet.Instance{full.sidecar, lagging.sidecar}, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if next != full.sidecar {
		t.Fatalf("%s was promoted; %s, which has all 20 writes, should have been", lagging.name, full.name)
	}
	for _, r := range []*kvReplica{full, lagging} {
		r.awaitPosition(t, 20)
		for i := 1; i <= 20; i++ {
			if v := r.get(t, fmt.Sprintf("k%d", i)); v != fmt.Sprintf("v%d", i) {
				t.Errorf("%s: k%d = %q after the failover, want v%d", r.name, i, v, i)
			}
		}
	}
}

// kvRank is the worker's GET /rank.
type kvRank struct {
	Generation string `json:"generation"`
	Position   int64  `json:"position"`
}

func (r *kvReplica) rank() (kvRank, error) {
	var rk kvRank
	resp, err := http.Get(r.url + "/rank")
	if err != nil {
		return rk, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return rk, fmt.Errorf("GET /rank: %s", resp.Status)
	}
	return rk, json.NewDecoder(resp.Body).Decode(&rk)
}

// awaitPosition waits until r has applied the writes up to pos.
func (r *kvReplica) awaitPosition(t *testing.T, pos int64) {
	t.Helper()
	poll.Until(t, 30*time.Second, 50*time.Millisecond, fmt.Sprintf("%s at position %d", r.name, pos), func() bool {
		rk, err := r.rank()
		return err == nil && rk.Position >= pos
	})
}

func (r *kvReplica) put(t *testing.T, key, value string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, r.url+"/kv/"+key, bytes.NewBufferString(value))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// get is key's value on r, "" when r does not have it.
func (r *kvReplica) get(t *testing.T, key string) string {
	t.Helper()
	resp, err := http.Get(r.url + "/kv/" + key)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Value string `json:"value"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&body) != nil {
		return ""
	}
	return body.Value
}
