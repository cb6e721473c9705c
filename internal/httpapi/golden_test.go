package httpapi

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// goldenPath holds the answers of the single-Lease endpoints as the Server
// gave them before lease groups existed (recorded at commit 5463e56 with
// LEASEHOLD_UPDATE_GOLDEN=1; the Go version of leasehold_build_info
// replaced by GOVERSION; re-recorded once since, to add the series of
// leasehold_blocking_requests_refused_total to /metrics and nothing else):
// single-Lease mode must keep answering them byte for byte. Re-record it
// only for a change of the API that is meant.
const goldenPath = "testdata/single_lease.golden"

// Single-Lease mode answers every endpoint that predates lease groups
// exactly as before: status, headers and body, in every state (candidate,
// leading, expired and stalled, shutting down, blocking requests ended).
func TestSingleLeaseAnswersUnchanged(t *testing.T) {
	f := newFixture(t, candidate())
	api, ops := f.srv.APIHandler(), f.srv.OpsHandler()
	type request struct {
		h              http.Handler
		listener       string
		method, target string
		header         []string
	}
	sse := []string{"Accept", "text/event-stream"}
	requests := []request{
		{api, "api", "GET", "/v1/status", nil},
		{api, "api", "GET", "/v1/leader", nil},
		{api, "api", "GET", "/v1/leader?wait=x", nil},
		{api, "api", "GET", "/v1/token", nil},
		{api, "api", "GET", "/v1/watch", nil},
		{api, "api", "GET", "/v1/watch?index=7&wait=10m", nil},
		{api, "api", "GET", "/v1/watch?index=x", nil},
		{api, "api", "GET", "/v1/watch?wait=11m", nil},
		{api, "api", "GET", "/v1/watch?index=%zz", nil},
		{api, "api", "GET", "/", nil},
		{api, "api", "PUT", "/v1/status", nil},
		{api, "api", "DELETE", "/v1/watch", nil},
		{api, "api", "GET", "/v1/release", nil},
		{api, "api", "POST", "/v1/release?for=x", nil},
		{api, "api", "POST", "/v1/release?for=2h", nil},
		{api, "api", "POST", "/v1/hold?token=1", nil},
		{api, "api", "POST", "/v1/hold?token=x", nil},
		{api, "api", "POST", "/v1/hold", nil},
		{api, "api", "GET", "/v1/hold", nil},
		{api, "api", "GET", "/v1/nope", nil},
		{ops, "ops", "GET", "/livez", nil},
		{ops, "ops", "GET", "/readyz", nil},
		{ops, "ops", "GET", "/metrics", nil},
		{ops, "ops", "GET", "/v1/status", nil},
		{ops, "ops", "GET", "/v1/leader", nil},
		{ops, "ops", "GET", "/v1/leader?wait=1s&wait=x", nil},
		{ops, "ops", "GET", "/v1/token", nil},
		{ops, "ops", "POST", "/readyz", nil},
	}
	var out bytes.Buffer
	record := func(state string, reqs []request) {
		for _, r := range reqs {
			rec := do(r.h, r.method, r.target, r.header...)
			fmt.Fprintf(&out, "### %s: %s %s %s %v\n%d\n", state, r.listener, r.method, r.target, r.header, rec.Code)
			var names []string
			for k := range rec.Header() {
				names = append(names, k)
			}
			slices.Sort(names)
			for _, k := range names {
				fmt.Fprintf(&out, "%s: %s\n", k, strings.Join(rec.Header()[k], ", "))
			}
			fmt.Fprintf(&out, "\n%s\n", rec.Body.Bytes())
		}
	}
	record("candidate", requests)
	f.publish(leading())
	f.clock.SetTime(t0.Add(2500 * time.Millisecond))
	record("leading", append(requests, request{api, "api", "GET", "/v1/leader?wait=1m", nil}))
	record("leading: release", []request{{api, "api", "POST", "/v1/release?for=30s", nil}, {api, "api", "POST", "/v1/release", nil}})
	f.publish(leading())
	f.clock.SetTime(t0.Add(3 * leaseDuration)) // the validity ran out, the loop stalled
	record("expired, stalled", requests)
	f.srv.BeginShutdown()
	record("shutting down", requests)
	f.srv.EndBlockingRequests()
	record("ended", append(requests,
		request{api, "api", "GET", "/v1/watch?index=" + idxs(3) + "&wait=10m", nil},
		request{api, "api", "GET", "/v1/watch?index=" + idxs(2) + "&wait=10m", nil},
		request{api, "api", "GET", "/v1/leader?wait=1m", nil},
		request{api, "api", "GET", "/v1/watch", sse},
		request{api, "api", "GET", "/v1/watch?index=" + idxs(1), sse},
		request{api, "api", "GET", "/v1/watch?index=" + idxs(3), sse},
		request{api, "api", "GET", "/v1/watch", append(slices.Clone(sse), "Last-Event-ID", idxs(3))},
		request{api, "api", "POST", "/v1/hold?token=1042", nil},
	))

	got := bytes.ReplaceAll(out.Bytes(), []byte(runtime.Version()), []byte("GOVERSION")) // of leasehold_build_info
	if os.Getenv("LEASEHOLD_UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(goldenPath, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		gotLines, wantLines := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gotLines), len(wantLines)) {
			var g, w string
			if i < len(gotLines) {
				g = gotLines[i]
			}
			if i < len(wantLines) {
				w = wantLines[i]
			}
			if g != w {
				t.Fatalf("%s: line %d differs:\ngot  %q\nwant %q", goldenPath, i+1, g, w)
			}
		}
	}
}
