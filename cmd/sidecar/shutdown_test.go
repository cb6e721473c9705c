package main_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
)

// SIGTERM to the leader, with a long-poll and an SSE stream open on its
// current state: both are told leader:false (the step-down, before the
// release), not cut short with the stale leader:true; then the stream
// ends, a long-poll at the new index is refused with 503 and Retry-After
// (or finds the listener closed), and the process exits 0.
func TestSIGTERMTellsWatchersBeforeEndingThem(t *testing.T) {
	f := newFleet(t)
	a, st := startLeader(t, f, "a")
	ctx, cancel := context.WithTimeout(t.Context(), generous)
	defer cancel()
	current := strconv.FormatUint(st.Index, 10)
	poll := longPoll(ctx, a.APIURL+"/v1/watch?index="+current+"&wait=10m")
	frames, err := stream(ctx, a.APIURL+"/v1/watch?wait=10m", current)
	if err != nil {
		t.Fatal(err)
	}
	waitWatchers(t, a, 2)

	if err := a.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := <-poll
	if r.err != nil || r.code != http.StatusOK || r.status.Leader || r.status.Index <= st.Index {
		t.Errorf("open long-poll on SIGTERM: %d %+v (err %v), want 200 with leader:false at a later index", r.code, r.status, r.err)
	}
	ev, ok, timedOut := nextFrame(frames)
	if !ok || ev.comment != "" || ev.status.Leader || ev.id <= st.Index {
		t.Errorf("open SSE stream on SIGTERM: first frame %+v (ended %v, timed out %v), want an event with leader:false", ev, !ok, timedOut)
	}
	for ok && !timedOut {
		_, ok, timedOut = nextFrame(frames)
	}
	if timedOut {
		t.Error("SSE stream did not end on SIGTERM")
	}

	// A client that goes on asking from the index it got is told each
	// further change (the release empties the holder), then refused with
	// 503 and Retry-After while the process stops, or finds no listener
	// once it has: it is never answered at once, in a loop, with nothing new.
	index := r.status.Index
	for changes := 0; ; changes++ {
		again := <-longPoll(ctx, a.APIURL+"/v1/watch?index="+strconv.FormatUint(index, 10)+"&wait=10m")
		if errors.Is(again.err, context.DeadlineExceeded) {
			t.Fatalf("long-poll at index %d during shutdown: no answer within %v", index, generous)
		}
		if again.err != nil || again.code != http.StatusOK || changes == 5 {
			if again.err == nil && (again.code != http.StatusServiceUnavailable || again.retryAfter == "") {
				t.Errorf("long-poll during shutdown after %d changes: %d, Retry-After %q, body %s; want 503 with Retry-After", changes, again.code, again.retryAfter, again.body)
			}
			break
		}
		if again.status.Index == index || again.status.Leader {
			t.Errorf("long-poll at index %d during shutdown: %+v, want a change without leadership", index, again.status)
			break
		}
		index = again.status.Index
	}
	select {
	case <-a.Exited():
	case <-time.After(generous):
		t.Fatal("still running after SIGTERM")
	}
	if code := a.ExitCode(); code != 0 {
		t.Errorf("exit status %d after SIGTERM, want 0", code)
	}
}

// waitWatchers polls the instance's leasehold_watchers gauge until n
// blocking requests are open.
func waitWatchers(t *testing.T, inst *fleet.Instance, n float64) {
	t.Helper()
	var m fleet.Metrics
	var err error
	eventually(t, fmt.Sprintf("leasehold_watchers = %v", n), func() bool {
		m, err = inst.Metrics(t.Context())
		return err == nil && m.Sum("leasehold_watchers", nil) == n
	}, func() string {
		return fmt.Sprintf("leasehold_watchers = %v (err %v)", m.Sum("leasehold_watchers", nil), err)
	})
}

// SIGTERM to a leader with connections still open that the servers' stop
// cannot wait out: a connection to each listener that sends nothing, and a
// request through the forwarding proxy to an app that does not answer. The
// sidecar releases, closes them at the shutdown bound, and exits 0 within
// that bound (plus the release), not 1.
func TestSIGTERMWithConnectionsOpenExitsZero(t *testing.T) {
	f := newFleet(t)
	hung := make(chan struct{})
	var reached atomic.Int64
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		select {
		case <-hung:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(app.Close)
	t.Cleanup(func() { close(hung) }) // before app.Close: the handler returns
	port, err := kubetest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	proxyAddr := "127.0.0.1:" + strconv.Itoa(port)
	f.Env = append(f.Env, "LEASEHOLD_ADVERTISE_ADDRESS="+proxyAddr, "LEASEHOLD_PROXY_ADDR="+proxyAddr,
		"LEASEHOLD_PROXY_UPSTREAM="+app.Listener.Addr().String())
	a, _ := startLeader(t, f, "a")

	for _, addr := range []string{strings.TrimPrefix(a.APIURL, "http://"), strings.TrimPrefix(a.OpsURL, "http://"), proxyAddr} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
	}
	stuck := longPoll(t.Context(), "http://"+proxyAddr+"/never-answered")
	eventually(t, "the request through the proxy reached the app", func() bool { return reached.Load() > 0 }, nil)

	took, err := a.Terminate(generous)
	if err != nil {
		t.Fatal(err)
	}
	if code := a.ExitCode(); code != 0 {
		t.Errorf("exit status %d after SIGTERM with connections open, want 0; log tail:\n%s", code, kubetest.LogTail(a.LogPath, 10))
	}
	if r := <-stuck; r.err == nil {
		t.Errorf("the stuck request was answered %d", r.code)
	}
	t.Logf("exited %v after SIGTERM", took.Round(time.Millisecond))
}
