package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestWatchAnswersAtOnceWhenIndexDiffers(t *testing.T) {
	f := newFixture(t, candidate())
	f.publish(leading()) // Index idx(1)
	// Older indices (of this process or, as 0 and 7, of an earlier one) and
	// newer ones (as a client of a later process would send) alike.
	for _, target := range []string{"/v1/watch", "/v1/watch?wait=10m", "/v1/watch?index=0&wait=10m", "/v1/watch?index=7&wait=10m",
		"/v1/watch?index=" + idxs(0) + "&wait=10m", "/v1/watch?index=" + idxs(1000) + "&wait=10m"} {
		rec := do(f.srv.APIHandler(), http.MethodGet, target)
		if rec.Code != http.StatusOK {
			t.Errorf("%s: code = %d", target, rec.Code)
		}
		got := decode(t, rec)
		if got["index"] != float64(idx(1)) || got["leader"] != true || rec.Header().Get(indexHeader) != idxs(1) {
			t.Errorf("%s: %v (header %q), want the status at index %d", target, got, rec.Header().Get(indexHeader), idx(1))
		}
	}
}

func TestWatchBlocksUntilIndexChanges(t *testing.T) {
	f := newFixture(t, candidate())
	url := live(t, f.srv.APIHandler())
	answer := get(t.Context(), url+"/v1/watch?index="+idxs(0)+"&wait=10m")
	f.waitWatchers(1)

	renewal := candidate()
	renewal.RenewedAt = t0 // same holder, term, token: Index stays idx(0)
	f.publish(renewal)
	changed := f.publish(leading())

	r := receive(t, answer)
	if r.code != http.StatusOK || r.body["index"] != float64(changed.Index) || r.body["leader"] != true {
		t.Errorf("answer = %d %v, want 200 with the status at index %d", r.code, r.body, changed.Index)
	}
	if r.header.Get(indexHeader) != idxs(1) {
		t.Errorf("%s = %q, want %s", indexHeader, r.header.Get(indexHeader), idxs(1))
	}
	f.waitWatchers(0)
}

func TestWatchAnswersSameIndexWhenWaitEnds(t *testing.T) {
	f := newFixture(t, candidate())
	url := live(t, f.srv.APIHandler())
	start := time.Now()
	r := receive(t, get(t.Context(), url+"/v1/watch?index="+idxs(0)+"&wait=100ms"))
	elapsed := time.Since(start)
	if r.code != http.StatusOK || r.body["index"] != float64(idx(0)) || r.header.Get(indexHeader) != idxs(0) {
		t.Errorf("answer = %d %v, want 200 with the unchanged status", r.code, r.body)
	}
	if elapsed < 100*time.Millisecond {
		t.Errorf("answered after %s, before the wait of 100ms", elapsed)
	}
}

func TestWatchEndsWhenTheClientGoes(t *testing.T) {
	f := newFixture(t, candidate())
	url := live(t, f.srv.APIHandler())

	ctx, cancel := context.WithCancel(t.Context())
	gone := get(ctx, url+"/v1/watch?index="+idxs(0)+"&wait=10m")
	f.waitWatchers(1)
	cancel()
	<-gone
	f.waitWatchers(0)
}

func TestWatchRejectsBadParameters(t *testing.T) {
	f := newFixture(t, candidate())
	for _, q := range []string{
		"index=x", "index=-1", "index=1.5", "index=", "index=18446744073709551616",
		"wait=5", "wait=-1s", "wait=10m1s", "wait=1h", "wait=", "index=1&wait=forever", "%zz",
	} {
		for _, accept := range []string{"", "text/event-stream"} {
			rec := do(f.srv.APIHandler(), http.MethodGet, "/v1/watch?"+q, "Accept", accept)
			wantError(t, rec, http.StatusBadRequest, codeBadParameter)
		}
	}
	if f.srv.watchers.Load() != 0 {
		t.Error("a rejected request counted as a watcher")
	}
}

func TestJitterIsBounded(t *testing.T) {
	for _, wait := range []time.Duration{0, time.Nanosecond, 100 * time.Millisecond, maxWait} {
		for range 100 {
			if j := jitter(wait); j < 0 || j > wait/16 {
				t.Fatalf("jitter(%s) = %s, want within [0, %s]", wait, j, wait/16)
			}
		}
	}
}

func TestAcceptsEventStream(t *testing.T) {
	for accept, want := range map[string]bool{
		"text/event-stream":                     true,
		"Text/Event-Stream; charset=utf-8":      true,
		"application/json, text/event-stream":   true,
		"application/json":                      false,
		"":                                      false,
		"text/event-streams":                    false,
		"*/*":                                   false,
		";;;, text/event-stream;q=0.5, garbage": true,
	} {
		r, _ := http.NewRequest(http.MethodGet, "/v1/watch", nil)
		r.Header.Set("Accept", accept)
		if got := acceptsEventStream(r); got != want {
			t.Errorf("Accept %q: %v, want %v", accept, got, want)
		}
	}
}

// frame is one Server-Sent Events frame: an event, a comment, or a retry
// field.
type frame struct {
	id, event, data, comment, retry string
}

// openStream opens an SSE stream and returns its response and a channel of
// its frames, closed when the stream ends. It checks that the stream starts
// with a frame of only the retry field (sseRetry in milliseconds), and
// leaves that frame out.
func openStream(t *testing.T, url string, header ...string) (*http.Response, <-chan frame) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	frames := make(chan frame, 100)
	go func() {
		defer close(frames)
		sc := bufio.NewScanner(resp.Body)
		var fr frame
		first := true
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "" && first:
				if want := (frame{retry: strconv.FormatInt(sseRetry.Milliseconds(), 10)}); fr != want {
					t.Errorf("first SSE frame = %+v, want %+v", fr, want)
				}
				first, fr = false, frame{}
			case line == "":
				frames <- fr
				fr = frame{}
			case strings.HasPrefix(line, ":"):
				fr.comment = strings.TrimSpace(line[1:])
			case strings.HasPrefix(line, "id: "):
				fr.id = line[len("id: "):]
			case strings.HasPrefix(line, "event: "):
				fr.event = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				fr.data = line[len("data: "):]
			case strings.HasPrefix(line, "retry: "):
				fr.retry = line[len("retry: "):]
			default:
				t.Errorf("unexpected SSE line %q", line)
			}
		}
	}()
	return resp, frames
}

// next waits (generously) for the next frame; ok is false if the stream ended.
func next(t *testing.T, frames <-chan frame) (frame, bool) {
	t.Helper()
	select {
	case fr, ok := <-frames:
		return fr, ok
	case <-time.After(generous):
		t.Fatal("no SSE frame")
		return frame{}, false
	}
}

// wantEvent checks that fr is a status event for index, and returns its data.
func wantEvent(t *testing.T, fr frame, ok bool, index uint64) map[string]any {
	t.Helper()
	if !ok {
		t.Fatalf("stream ended, want the event for index %d", index)
	}
	if fr.id != strconv.FormatUint(index, 10) || fr.event != "status" {
		t.Fatalf("frame = %+v, want id %d, event status", fr, index)
	}
	var data map[string]any
	if err := json.Unmarshal([]byte(fr.data), &data); err != nil {
		t.Fatalf("data %q: %v", fr.data, err)
	}
	if got := num(t, data, "index"); got != int64(index) {
		t.Errorf("data index = %d, want %d", got, index)
	}
	return data
}

func TestSSESendsCurrentStateThenChanges(t *testing.T) {
	f := newFixture(t, candidate())
	url := live(t, f.srv.APIHandler())
	resp, frames := openStream(t, url+"/v1/watch")
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type = %q", ct)
	}
	if got := resp.Header.Get(indexHeader); got != idxs(0) {
		t.Errorf("%s = %q, want %s", indexHeader, got, idxs(0))
	}
	fr, ok := next(t, frames)
	if data := wantEvent(t, fr, ok, idx(0)); data["leader"] != false || data["holder"] != other {
		t.Errorf("initial event = %v", data)
	}
	f.waitWatchers(1)

	f.publish(leading())
	fr, ok = next(t, frames)
	if data := wantEvent(t, fr, ok, idx(1)); data["leader"] != true || data["fencingToken"] != float64(1042) {
		t.Errorf("change event = %v", data)
	}
	f.publish(candidate())
	fr, ok = next(t, frames)
	wantEvent(t, fr, ok, idx(2))
}

func TestSSELastEventID(t *testing.T) {
	// The client has seen index idx(1): no initial event; the first is the
	// next change. Last-Event-ID wins over the index parameter.
	for name, c := range map[string]struct {
		target string
		header []string
	}{
		"Last-Event-ID": {"/v1/watch?index=" + idxs(0), []string{"Last-Event-ID", idxs(1)}},
		"index":         {"/v1/watch?index=" + idxs(1), nil},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, candidate())
			f.publish(leading()) // Index idx(1)
			_, frames := openStream(t, live(t, f.srv.APIHandler())+c.target, c.header...)
			f.waitWatchers(1)
			next1 := leading()
			next1.Term++
			changed := f.publish(next1)
			fr, ok := next(t, frames)
			wantEvent(t, fr, ok, changed.Index)
		})
	}

	// An older (of this process, or of an earlier one), newer (of a later
	// one) or malformed Last-Event-ID gets the current state first.
	f := newFixture(t, candidate())
	f.publish(leading())
	url := live(t, f.srv.APIHandler())
	for _, id := range []string{"0", "99", idxs(0), idxs(1000), "not-a-number"} {
		_, frames := openStream(t, url+"/v1/watch", "Last-Event-ID", id)
		fr, ok := next(t, frames)
		wantEvent(t, fr, ok, idx(1))
	}
}

func TestSSEHeartbeat(t *testing.T) {
	f := newFixture(t, candidate())
	f.srv.heartbeat = 10 * time.Millisecond
	url := live(t, f.srv.APIHandler())
	_, frames := openStream(t, url+"/v1/watch", "Last-Event-ID", idxs(0))
	fr, ok := next(t, frames)
	if !ok || fr.comment != "heartbeat" || fr.id != "" || fr.event != "" {
		t.Errorf("first frame = %+v, %v; want a heartbeat comment only", fr, ok)
	}
}

func TestSSEEndsWhenWaitEnds(t *testing.T) {
	f := newFixture(t, candidate())
	url := live(t, f.srv.APIHandler())
	start := time.Now()
	_, frames := openStream(t, url+"/v1/watch?wait=100ms")
	fr, ok := next(t, frames)
	wantEvent(t, fr, ok, idx(0))
	if _, ok := next(t, frames); ok {
		t.Fatal("stream went on after its wait")
	}
	if elapsed := time.Since(start); elapsed < 100*time.Millisecond {
		t.Errorf("stream ended after %s, before its wait of 100ms", elapsed)
	}
	f.waitWatchers(0)
}

// listen opens a loopback listener.
func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}
