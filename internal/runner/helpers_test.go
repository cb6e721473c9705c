package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/leasehold/leasehold/internal/fence"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
	"github.com/leasehold/leasehold/internal/testing/poll"
	"github.com/leasehold/leasehold/pkg/api"
)

// TestMain checks that no goroutine of a Run outlives it.
func TestMain(m *testing.M) {
	os.Exit(kubetest.LeakCheck(m.Run()))
}

// generous bounds real-time waits on a shared, noisy machine; it never
// decides an outcome.
const generous = 20 * time.Second

// t0 is the fake clock's start.
var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// leading is the status of an instance that leads with token tok.
func leading(tok fence.Token, term int32, validFor time.Duration, index uint64) api.Status {
	return api.Status{Identity: "me", Leader: true, Holder: "me", Term: term, FencingToken: tok,
		ValidForMs: validFor.Milliseconds(), Index: index}
}

// following is the status of an instance that does not lead.
func following(tok fence.Token, index uint64) api.Status {
	return api.Status{Identity: "me", Holder: "other", Term: 1, FencingToken: tok, Index: index}
}

// watchRequest is one GET /v1/watch the fake sidecar received.
type watchRequest struct {
	index    string // "" when absent
	wait     time.Duration
	answered bool
}

// fakeSidecar serves GET /v1/watch like the sidecar, from a status the test
// sets: at once when the index parameter is absent or differs from the
// status's, else when the test sets a status or kicks. It ignores wait
// (the runner's clock is fake), and never answers while it hangs. It
// serves POST /v1/hold as the test's holdMode says (by default it grants
// every hold), and records every hold request.
type fakeSidecar struct {
	srv     *httptest.Server
	closing chan struct{}
	once    sync.Once

	mu       sync.Mutex
	st       api.Status
	wake     chan struct{} // closed to answer every blocked request
	hang     bool
	refusal  *refusal // when set, every request gets it
	requests []*watchRequest
	blocked  int // requests being held right now

	holdMode  holdMode
	holdReqs  []*holdReq
	endHolds  chan struct{}  // closed to end every granted hold from the sidecar's side
	onHoldEnd func(*holdReq) // called (with mu not held) when a granted hold ends
}

// holdMode is how the fake sidecar answers POST /v1/hold.
type holdMode int

const (
	holdGrant       holdMode = iota // 200 and a line of JSON, then open until the client leaves or endHold
	holdUnsupported                 // 404, as a sidecar older than holds
	holdRefuse                      // 409, as when the term is ending
	holdHang                        // no answer until the client leaves
	holdDrop                        // the connection closed without an answer
)

// holdReq is one POST /v1/hold the fake sidecar received.
type holdReq struct {
	token   string
	granted bool
	ended   bool // granted, then ended: the client left or the test ended it
	gone    bool // the client left before an answer (holdHang)
}

func newFakeSidecar(t *testing.T, st api.Status) *fakeSidecar {
	f := &fakeSidecar{st: st, wake: make(chan struct{}), closing: make(chan struct{}), endHolds: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.close)
	return f
}

func (f *fakeSidecar) url() *url.URL {
	u, _ := url.Parse(f.srv.URL)
	return u
}

// close stops the server: held requests end without an answer.
func (f *fakeSidecar) close() {
	f.once.Do(func() {
		close(f.closing)
		f.srv.CloseClientConnections()
		f.srv.Close()
	})
}

func (f *fakeSidecar) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/hold" && r.Method == http.MethodPost {
		f.serveHold(w, r)
		return
	}
	if r.URL.Path != "/v1/watch" || r.Method != http.MethodGet {
		http.NotFound(w, r)
		return
	}
	wait, err := time.ParseDuration(r.URL.Query().Get("wait"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req := &watchRequest{index: r.URL.Query().Get("index"), wait: wait}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	for f.hang || (f.refusal == nil && req.index != "" && req.index == strconv.FormatUint(f.st.Index, 10)) {
		wake := f.wake
		f.blocked++
		f.mu.Unlock()
		select {
		case <-wake:
		case <-r.Context().Done():
		case <-f.closing:
		}
		f.mu.Lock()
		f.blocked--
		select {
		case <-wake:
			if !f.hang {
				goto answer // kicked: answer even with the same index
			}
			continue
		default:
			f.mu.Unlock()
			return // the client left, or the server closes
		}
	}
answer:
	st, refused := f.st, f.refusal
	req.answered = true
	f.mu.Unlock()
	if refused != nil {
		if refused.retryAfter != "" {
			w.Header().Set("Retry-After", refused.retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(refused.code)
		_, _ = w.Write([]byte(`{"error":"refused by the test"}`))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Leasehold-Index", strconv.FormatUint(st.Index, 10))
	_ = json.NewEncoder(w).Encode(st)
}

// serveHold answers POST /v1/hold as holdMode says.
func (f *fakeSidecar) serveHold(w http.ResponseWriter, r *http.Request) {
	req := &holdReq{token: r.URL.Query().Get("token")}
	f.mu.Lock()
	f.holdReqs = append(f.holdReqs, req)
	mode, end, onEnd := f.holdMode, f.endHolds, f.onHoldEnd
	f.mu.Unlock()
	switch mode {
	case holdUnsupported:
		http.NotFound(w, r)
	case holdRefuse:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write([]byte(`{"error":"not leading with that token"}`))
	case holdHang:
		select {
		case <-r.Context().Done():
		case <-f.closing:
		}
		f.mu.Lock()
		req.gone = true
		f.mu.Unlock()
	case holdDrop:
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	case holdGrant:
		f.mu.Lock()
		req.granted = true
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = fmt.Fprintf(w, "{\"held\":true,\"fencingToken\":%s,\"leader\":true}\n", req.token)
		_ = http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
		case <-end:
		case <-f.closing:
		}
		if onEnd != nil {
			onEnd(req)
		}
		f.mu.Lock()
		req.ended = true
		f.mu.Unlock()
	}
}

// setHoldMode sets how later hold requests are answered.
func (f *fakeSidecar) setHoldMode(m holdMode) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.holdMode = m
}

// setOnHoldEnd sets a func called when a granted hold ends, before it is
// recorded as ended.
func (f *fakeSidecar) setOnHoldEnd(fn func(*holdReq)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onHoldEnd = fn
}

// endHold ends every granted hold from the sidecar's side (as a sidecar
// that shuts down does).
func (f *fakeSidecar) endHold() {
	f.mu.Lock()
	defer f.mu.Unlock()
	close(f.endHolds)
	f.endHolds = make(chan struct{})
}

// holds returns a copy of the hold requests received so far.
func (f *fakeSidecar) holds() []holdReq {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]holdReq, len(f.holdReqs))
	for i, h := range f.holdReqs {
		out[i] = *h
	}
	return out
}

// openHolds is the number of granted holds not ended.
func (f *fakeSidecar) openHolds() int {
	n := 0
	for _, h := range f.holds() {
		if h.granted && !h.ended {
			n++
		}
	}
	return n
}

// set publishes st and answers every held request (unless hanging).
func (f *fakeSidecar) set(st api.Status) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st = st
	close(f.wake)
	f.wake = make(chan struct{})
}

// kick answers every held request with the current status.
func (f *fakeSidecar) kick() {
	f.mu.Lock()
	defer f.mu.Unlock()
	close(f.wake)
	f.wake = make(chan struct{})
}

// refusal is an answer other than 200: the code, and a Retry-After header
// unless "".
type refusal struct {
	code       int
	retryAfter string
}

// refuse makes the sidecar answer every request, held ones included, with
// r (nil: answer as usual again).
func (f *fakeSidecar) refuse(r *refusal) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refusal = r
	close(f.wake)
	f.wake = make(chan struct{})
}

// setHang makes the sidecar hold every request, held ones included.
func (f *fakeSidecar) setHang(hang bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hang = hang
}

// index is the current status's index, as the runner sends it back.
func (f *fakeSidecar) index() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strconv.FormatUint(f.st.Index, 10)
}

func (f *fakeSidecar) heldNow() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.blocked
}

// requestsFor returns the requests received with index parameter index
// ("" for none).
func (f *fakeSidecar) requestsFor(index string) []watchRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []watchRequest
	for _, r := range f.requests {
		if r.index == index {
			out = append(out, *r)
		}
	}
	return out
}

// awaitRequests waits until n requests with index parameter index have
// arrived, and returns them. The runner sends a request only after it has
// handled the previous answer completely (its timers are armed), so this
// is how a test knows the runner has taken an answer in.
func (f *fakeSidecar) awaitRequests(t *testing.T, index string, n int) []watchRequest {
	t.Helper()
	eventually(t, fmt.Sprintf("%d watch requests with index=%q", n, index), func() bool {
		return len(f.requestsFor(index)) >= n
	})
	return f.requestsFor(index)
}

// eventually polls cond until it holds, failing t after generous.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, generous, 2*time.Millisecond, what, cond)
}

// record is one log record of the runner, with the fake clock's time when
// it was logged.
type record struct {
	msg   string
	attrs map[string]string
	at    time.Time
}

// logs captures the runner's log records (and echoes them to the test log).
type logs struct {
	t     *testing.T
	clock *clocktesting.FakeClock
	mu    *sync.Mutex
	recs  *[]record
	with  []slog.Attr
}

func newLogs(t *testing.T, clk *clocktesting.FakeClock) *logs {
	return &logs{t: t, clock: clk, mu: &sync.Mutex{}, recs: &[]record{}}
}

func (l *logs) Enabled(context.Context, slog.Level) bool { return true }

func (l *logs) Handle(_ context.Context, r slog.Record) error {
	rec := record{msg: r.Message, attrs: map[string]string{}, at: l.clock.Now()}
	var line strings.Builder
	line.WriteString(r.Level.String() + " " + r.Message)
	add := func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		fmt.Fprintf(&line, " %s=%s", a.Key, a.Value)
		return true
	}
	for _, a := range l.with {
		add(a)
	}
	r.Attrs(add)
	l.mu.Lock()
	*l.recs = append(*l.recs, rec)
	l.mu.Unlock()
	l.t.Logf("runner [fake %s]: %s", rec.at.Sub(t0), line.String())
	return nil
}

func (l *logs) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *l
	c.with = append(append([]slog.Attr(nil), l.with...), attrs...)
	return &c
}

func (l *logs) WithGroup(string) slog.Handler { return l }

// find returns the records whose message contains msg.
func (l *logs) find(msg string) []record {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []record
	for _, r := range *l.recs {
		if strings.Contains(r.msg, msg) {
			out = append(out, r)
		}
	}
	return out
}

// await waits for the n-th record whose message contains msg.
func (l *logs) await(t *testing.T, msg string, n int) record {
	t.Helper()
	eventually(t, fmt.Sprintf("log record %d %q", n, msg), func() bool { return len(l.find(msg)) >= n })
	return l.find(msg)[n-1]
}

// running is one Run on its own goroutine.
type running struct {
	cancel context.CancelFunc
	done   chan struct{}
	code   int
}

// startRun runs Run(cfg) until the test ends (or the test cancels it), and
// makes sure it has returned by then.
func startRun(t *testing.T, cfg Config) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.code = Run(ctx, cfg)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(generous):
			t.Error("Run did not return after its context ended")
		}
	})
	return r
}

// exit waits for Run to return and returns its exit status.
func (r *running) exit(t *testing.T) int {
	t.Helper()
	select {
	case <-r.done:
		return r.code
	case <-time.After(generous):
		t.Fatal("Run did not return")
		return 0
	}
}

func (r *running) returned() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// setup is one test's fake clock, fake sidecar and log, and a Config for
// them that runs script with /bin/sh.
type setup struct {
	clock   *clocktesting.FakeClock
	sidecar *fakeSidecar
	logs    *logs
	beats   string // the file the scripts write to ($BEATS)
	cfg     Config
}

func newSetup(t *testing.T, st api.Status, grace time.Duration, script string) *setup {
	clk := clocktesting.NewFakeClock(t0)
	s := &setup{clock: clk, sidecar: newFakeSidecar(t, st), logs: newLogs(t, clk)}
	s.beats = filepath.Join(t.TempDir(), "beats")
	s.cfg = Config{
		Options: Options{Sidecar: s.sidecar.url(), Grace: grace, StartDelay: grace, Command: []string{"/bin/sh", "-c", script}},
		Env:     []string{"PATH=" + os.Getenv("PATH"), "BEATS=" + s.beats},
		Logger:  slog.New(s.logs),
		Clock:   clk,
	}
	return s
}

// Scripts. Each sets its SIGTERM trap, then writes "start <pid> <token>
// <term>" to $BEATS (so a test that saw "start" may signal it) and "beat"
// every 20 ms; on SIGTERM it writes "term" and then exits 3 (obeying) or
// carries on (ignoring).
const (
	obeying  = `trap 'echo term >> "$BEATS"; exit 3' TERM; echo "start $$ $LEASEHOLD_FENCING_TOKEN $LEASEHOLD_TERM" >> "$BEATS"; while :; do echo beat >> "$BEATS"; sleep 0.02; done`
	ignoring = `trap 'echo term >> "$BEATS"' TERM; echo "start $$ $LEASEHOLD_FENCING_TOKEN $LEASEHOLD_TERM" >> "$BEATS"; while :; do echo beat >> "$BEATS"; sleep 0.02; done`
)

// lines returns the lines of the beats file so far.
func (s *setup) lines() []string {
	data, err := os.ReadFile(s.beats)
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

// awaitLine waits for the n-th line that starts with prefix and returns
// its index among all lines.
func (s *setup) awaitLine(t *testing.T, prefix string, n int) int {
	t.Helper()
	at := -1
	eventually(t, fmt.Sprintf("line %d starting with %q in the command's output", n, prefix), func() bool {
		seen := 0
		for i, l := range s.lines() {
			if strings.HasPrefix(l, prefix) {
				if seen++; seen == n {
					at = i
					return true
				}
			}
		}
		return false
	})
	return at
}

// starts returns the "start" lines: pid, token, term of each start.
func (s *setup) starts() [][]string {
	var out [][]string
	for _, l := range s.lines() {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "start" {
			out = append(out, f[1:])
		}
	}
	return out
}

// awaitStart has the runner take in the first answer and then steps the
// fake clock by the start delay; it returns the first start line's fields.
func (s *setup) awaitStart(t *testing.T) []string {
	t.Helper()
	s.sidecar.awaitRequests(t, s.sidecar.index(), 1)
	s.clock.Step(s.cfg.StartDelay)
	s.awaitLine(t, "start", 1)
	return s.starts()[0]
}
