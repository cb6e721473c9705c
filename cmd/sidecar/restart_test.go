package main_test

import (
	"context"
	"net/http"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/api"
)

// A client that kept an index across a sidecar restart is answered at once
// by the restarted process, whose indices start above any its predecessor
// reached: a long-poll with the old index does not block on a state the
// client never saw, and an SSE client reconnecting with the old
// Last-Event-ID gets the current state first. The restarted process is in
// the very state its predecessor was in (following the same leader), which
// with indices that restart at 0 would carry the same index: the long-poll
// would then block for its whole wait (10m), and the stream would send
// nothing but heartbeats.
func TestClientKeepsItsIndexAcrossARestart(t *testing.T) {
	f := newFleet(t)
	_, leader := startLeader(t, f, "b")
	follows := func(st api.Status) bool {
		return !st.Leader && st.Holder == leader.Identity && st.FencingToken == leader.FencingToken
	}
	a := start(t, f, "a")
	before := waitStatus(t, a, "a follows b", follows)

	if err := a.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Exited():
	case <-time.After(generous):
		t.Fatal("a still runs after SIGTERM")
	}
	a = start(t, f, "a") // a new process, as after a container restart
	after := waitStatus(t, a, "the restarted a follows b", follows)
	if after.Index <= before.Index {
		t.Errorf("restarted process at index %d, not above its predecessor's %d", after.Index, before.Index)
	}
	old := strconv.FormatUint(before.Index, 10)

	ctx, cancel := context.WithTimeout(t.Context(), generous)
	defer cancel()
	r := <-longPoll(ctx, a.APIURL+"/v1/watch?index="+old+"&wait=10m")
	switch {
	case r.err != nil:
		t.Errorf("long-poll with the old index %s: %v; it blocked on a state the client never saw", old, r.err)
	case r.code != http.StatusOK || r.status.Index != after.Index || !follows(r.status):
		t.Errorf("long-poll with the old index %s: %d %+v, want 200 with the current state at index %d", old, r.code, r.status, after.Index)
	}

	frames, err := stream(ctx, a.APIURL+"/v1/watch?wait=10m", old)
	if err != nil {
		t.Fatal(err)
	}
	ev, ok, timedOut := nextFrame(frames)
	if timedOut || !ok || ev.comment != "" || ev.id != after.Index || ev.status.Index != after.Index || !follows(ev.status) {
		t.Errorf("SSE reconnecting with Last-Event-ID %s: first frame %+v (ended %v, timed out %v), want the current state at index %d", old, ev, !ok, timedOut, after.Index)
	}
}
