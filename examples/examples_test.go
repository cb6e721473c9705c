// The examples run here exactly as they would in a pod: each one is a child
// process (under its real interpreter) next to a real leasehold sidecar that
// holds a real Lease in a real apiserver, and it writes to a fenced store.
// The tests take leadership away by hand and check that the example stops
// writing at once, never writes with a stale or missing token, resumes with
// a larger token when it leads again, stops on a 409 from the store, and
// exits 0 on SIGTERM.
package examples_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
	"github.com/leasehold/leasehold/internal/testing/poll"
	"github.com/leasehold/leasehold/pkg/api"
)

var (
	cluster *kubetest.Cluster
	sidecar string // the built leasehold binary
)

func TestMain(m *testing.M) { os.Exit(fleet.Main(m, &cluster, &sidecar)) }

const (
	leaseDuration = 3 * time.Second
	renewDeadline = 2 * time.Second
	retryPeriod   = 500 * time.Millisecond
	leaseName     = "worker"

	// stopBound is how long after the Lease is taken away a write of the old
	// term may still arrive: generous for CI noise (the sidecar steps down
	// within milliseconds, and the example checks before every 50 ms write).
	stopBound = time.Second
	// steadyWrites is how many writes of a term the test waits for before it
	// acts, so that the example is in its working loop, not at its start.
	steadyWrites = 5
	// exitBound is how long an example may take to exit after SIGTERM.
	exitBound = 5 * time.Second
	// generous bounds the waits for what the examples, the sidecars and
	// the apiserver do in their own time (a takeover waits a lease
	// duration out); it never decides an outcome.
	generous = 30 * time.Second
)

// An example is one language's worker and how to start it.
type example struct {
	name string
	// command returns the argv that runs the example. It fails the test when
	// the interpreter is missing: CI installs them (.ci/run), so a missing
	// one is a broken machine, not a reason to skip.
	command func(t *testing.T) []string
}

var examples = []example{
	{"python", interpreted("python/worker.py", "python3")},
	{"node", interpreted("node/worker.js", "node")},
	{"shell", interpreted("shell/worker.sh", "sh", "curl")},
	{"go", buildGo},
}

// interpreted runs script with the first of tools; every tool must be on PATH.
func interpreted(script string, tools ...string) func(t *testing.T) []string {
	return func(t *testing.T) []string {
		t.Helper()
		var paths []string
		for _, tool := range tools {
			p, err := exec.LookPath(tool)
			if err != nil {
				t.Fatalf("%s is not installed: the example needs it (CI installs it with .ci/run; apt-get install python3 nodejs curl): %v", tool, err)
			}
			paths = append(paths, p)
		}
		abs, err := filepath.Abs(script)
		if err != nil {
			t.Fatal(err)
		}
		return []string{paths[0], abs}
	}
}

// buildGo compiles the Go example, as a user would build their app.
func buildGo(t *testing.T) []string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "worker")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./go").CombinedOutput(); err != nil {
		t.Fatalf("go build ./go: %v\n%s", err, out)
	}
	return []string{bin}
}

func TestExamples(t *testing.T) {
	kubetest.Require(t, cluster)
	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) { testExample(t, ex) })
	}
}

// testExample runs one example through a whole life: lead and write, lose
// the Lease to an intruder and stop, lead again with a larger token and
// resume, get fenced by the store and stop, then exit 0 on SIGTERM.
func testExample(t *testing.T, ex example) {
	argv := ex.command(t)
	ctx := t.Context()
	ns, err := cluster.CreateNamespace(ctx, "examples-"+ex.name)
	if err != nil {
		t.Fatal(err)
	}
	f := fleet.Config{
		Binary: sidecar, Cluster: cluster, Namespace: ns, Lease: leaseName,
		LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		Dir: t.TempDir(),
	}
	inst, err := f.Start(ctx, "pod", false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(inst.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sidecar log: %s", inst.LogPath)
		}
	})
	store := newStore(t)
	w := startWorker(t, argv, inst.APIURL, store.URL+"/write", ex.name)
	started := time.Now()

	// 1. The sidecar leads and the example writes with the term's token.
	first := awaitLeadership(t, inst)
	if first.Status.FencingToken == 0 {
		t.Fatalf("leading with token 0: %+v", first.Status)
	}
	token1 := uint64(first.Status.FencingToken)
	store.await(t, fmt.Sprintf("%d writes with token %d", steadyWrites, token1), func(ws []write) bool {
		return countToken(ws, token1) >= steadyWrites
	})
	t.Logf("first write with token %d %v after start", token1, firstWith(store.writes(), token1).Sub(started).Round(time.Millisecond))

	// 2. Take the Lease away by hand: the sidecar steps down at once.
	taken := takeLease(t, ns)
	awaitStepDown(t, inst)

	// 3. Once the intruder's Lease expires (leaseDuration after it was
	// taken) the sidecar leads again, with a larger token, and the example
	// resumes with it. The wait also gives the example ≥ 2 s after the stop
	// bound in which to (wrongly) write again.
	second := awaitLeadership(t, inst)
	token2 := uint64(second.Status.FencingToken)
	if token2 <= token1 {
		t.Fatalf("new term's token %d is not above %d", token2, token1)
	}
	acquired, err := time.Parse(time.RFC3339Nano, second.Status.AcquiredAt)
	if err != nil {
		t.Fatalf("acquiredAt %q: %v", second.Status.AcquiredAt, err)
	}
	// The old term's writes are all in: check them now, so an example that
	// kept writing fails on that, not on a timeout below.
	terms := termsInForce{token1, taken, token2, acquired}
	terms.check(t, store.writes())
	if t.Failed() {
		return
	}
	store.await(t, fmt.Sprintf("%d writes with the new token %d", steadyWrites, token2), func(ws []write) bool {
		return countToken(ws, token2) >= steadyWrites
	})
	ws := store.writes()
	terms.check(t, ws)
	var lastOld time.Time
	for _, wr := range ws {
		if wr.Token == token1 {
			lastOld = wr.At
		}
	}
	t.Logf("writes: %d with token %d (the last at T%s, T = Lease taken), then %d with token %d (the first %v after the new term began)",
		countToken(ws, token1), token1, signed(lastOld.Sub(taken)),
		countToken(ws, token2), token2, firstWith(ws, token2).Sub(acquired).Round(time.Millisecond))
	if t.Failed() {
		return
	}

	// 4. A newer writer has written (the store's fence jumps): the next write
	// is refused with 409 and the example stops, though its sidecar leads,
	// and waits for a term newer than the fenced one, blocked on the watch:
	// the sidecar counts its long-poll as open. That block is the event
	// that shows the example left its write loop, so it had every chance
	// to write again by then: any write after the 409 fails, and one that
	// comes first fails at once. An example that sent back a mangled index
	// (the index is a start time in microseconds, far above 2^32; 32-bit
	// arithmetic or a lossy float would change it) would be answered at
	// once, again and again, and never count.
	if idx := second.Status.Index; idx < 1<<40 {
		t.Errorf("sidecar index %d: want a start time in microseconds, to test the example with a large index", idx)
	}
	store.raiseFence(token2 + 1_000_000)
	store.await(t, "a write refused with 409", func(ws []write) bool {
		return firstRejected(ws) >= 0
	})
	noWriteAfter409 := func() {
		ws := store.writes()
		if after := len(ws) - 1 - firstRejected(ws); after != 0 {
			t.Fatalf("%d writes after the store refused token %d; want none", after, token2)
		}
	}
	awaitBlockedWatch(t, inst, noWriteAfter409)
	noWriteAfter409()
	if st, err := inst.Status(ctx); err != nil || !st.Leader || uint64(st.FencingToken) != token2 {
		t.Errorf("sidecar status %+v, %v: want still leading with token %d (else the 409 was not what stopped the example)", st, err, token2)
	}

	// 5. SIGTERM, while it blocks on the watch: it exits 0, promptly.
	w.terminate(t)
}

// termsInForce describes the two terms of a test: the old term's token is in
// force until the Lease is taken (plus stopBound), no token while the
// intruder holds it, the new term's from when it was acquired.
type termsInForce struct {
	old      uint64
	taken    time.Time
	new      uint64
	acquired time.Time
}

// check fails t, once per kind of fault (with a count and the first case),
// for every write that did not carry the token of the term in force when it
// arrived, or that the store refused.
func (tf termsInForce) check(t *testing.T, ws []write) {
	t.Helper()
	type fault struct {
		n     int
		first write
	}
	var kinds []string
	faults := map[string]*fault{}
	for _, w := range ws {
		var kind string
		switch {
		case w.Token == 0:
			kind = "carried no fencing token"
		case w.Code != http.StatusOK:
			kind = fmt.Sprintf("was refused by the store (HTTP %d) while one term was in force", w.Code)
		case w.Token == tf.old && w.At.Sub(tf.taken) > stopBound:
			kind = fmt.Sprintf("carried the old term's token %d more than %v after the Lease was taken: the example kept working", tf.old, stopBound)
		case w.Token == tf.new && w.At.Before(tf.acquired):
			kind = fmt.Sprintf("carried the new term's token %d before the term began", tf.new)
		case w.Token != tf.old && w.Token != tf.new:
			kind = fmt.Sprintf("carried a token that is neither the old term's (%d) nor the new one's (%d)", tf.old, tf.new)
		default:
			continue
		}
		if faults[kind] == nil {
			faults[kind] = &fault{first: w}
			kinds = append(kinds, kind)
		}
		faults[kind].n++
	}
	for _, kind := range kinds {
		f := faults[kind]
		t.Errorf("%d writes %s; the first: token %d from %q at T%s (T = Lease taken)",
			f.n, kind, f.first.Token, f.first.Writer, signed(f.first.At.Sub(tf.taken)))
	}
}

// awaitLeadership long-polls the sidecar until it leads.
func awaitLeadership(t *testing.T, inst *fleet.Instance) fleet.Leadership {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), generous)
	defer cancel()
	l, err := fleet.AwaitLeadership(ctx, []*fleet.Instance{inst})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// awaitStepDown polls the sidecar's status until it no longer leads.
func awaitStepDown(t *testing.T, inst *fleet.Instance) {
	t.Helper()
	var st api.Status
	var err error
	poll.UntilReport(t, 5*time.Second, 5*time.Millisecond, "the sidecar stepping down after the Lease was taken", func() bool {
		st, err = inst.Status(t.Context())
		return err == nil && !st.Leader
	}, func() string { return fmt.Sprintf("%+v, %v", st, err) })
}

// awaitBlockedWatch polls the sidecar's leasehold_watchers gauge until one
// blocking request (the example's watch) is open, calling meanwhile at
// each poll (to fail at once on what the example must not do before).
func awaitBlockedWatch(t *testing.T, inst *fleet.Instance, meanwhile func()) {
	t.Helper()
	var m fleet.Metrics
	var err error
	poll.UntilReport(t, generous, 10*time.Millisecond, "the example's watch blocked", func() bool {
		meanwhile()
		m, err = inst.Metrics(t.Context())
		return err == nil && m.Sum("leasehold_watchers", nil) == 1
	}, func() string {
		return fmt.Sprintf("leasehold_watchers: %v, %v; does it send back the index it got?", m.Sum("leasehold_watchers", nil), err)
	})
}

// takeLease makes "intruder" the holder, as admin, with a fresh renewTime,
// and returns when the update returned.
func takeLease(t *testing.T, ns string) time.Time {
	t.Helper()
	leases := cluster.Clientset().CoordinationV1().Leases(ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		lease, err := leases.Get(t.Context(), leaseName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.NewMicroTime(time.Now())
		holder, seconds := "intruder", int32(leaseDuration/time.Second)
		lease.Spec.HolderIdentity = &holder
		lease.Spec.LeaseDurationSeconds = &seconds
		lease.Spec.AcquireTime, lease.Spec.RenewTime = &now, &now
		_, err = leases.Update(t.Context(), lease, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("take the Lease: %v", err)
	}
	return time.Now()
}

// A worker is a running example.
type worker struct {
	cmd     *exec.Cmd
	exited  chan struct{}
	logPath string // its stdout and stderr
}

// startWorker runs argv in its own process group, pointed at the sidecar
// and the store, with env added to the environment. Its output goes to a
// log that is shown if the test fails; the whole group is killed when the
// test ends.
func startWorker(t *testing.T, argv []string, leaseholdURL, storeURL, name string, env ...string) *worker {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "LEASEHOLD_URL="+leaseholdURL, "STORE_URL="+storeURL, "WORKER_NAME="+name)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatal(err)
	}
	w := &worker{cmd: cmd, exited: make(chan struct{}), logPath: logPath}
	go func() {
		_ = cmd.Wait() // the status is read from ProcessState
		logFile.Close()
		close(w.exited)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the worker and any child (curl)
		<-w.exited
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			t.Logf("%s example's log:\n%s", name, out)
		}
	})
	return w
}

// terminate sends the worker SIGTERM and fails t unless it exits 0 within
// exitBound.
func (w *worker) terminate(t *testing.T) {
	t.Helper()
	sent := time.Now()
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.exited:
	case <-time.After(exitBound):
		t.Fatalf("still running %v after SIGTERM", exitBound)
	}
	if !w.cmd.ProcessState.Success() {
		t.Errorf("after SIGTERM: %v, want exit status 0", w.cmd.ProcessState)
	}
	t.Logf("exited %v after SIGTERM", time.Since(sent).Round(time.Millisecond))
}

// A write is one POST the store received.
type write struct {
	At     time.Time
	Token  uint64 // 0 when absent or malformed
	Writer string
	Shard  string // ?shard=, "" for the single-Lease examples
	Code   int    // the store's answer
}

// store is a fenced store: it accepts a POST whose ?token= is at least the
// largest token it has accepted for the same ?shard= (absent for one
// Lease), refuses a smaller one with 409 (and a missing one with 400), and
// records every write.
type store struct {
	*httptest.Server
	mu     sync.Mutex
	fences map[string]uint64 // by shard
	log    []write
}

func newStore(t *testing.T) *store {
	s := &store{fences: map[string]uint64{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *store) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	_, _ = io.Copy(io.Discard, r.Body)
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, `{"error":"POST only"}`, http.StatusMethodNotAllowed)
		return
	}
	token, err := strconv.ParseUint(r.URL.Query().Get("token"), 10, 64)
	shard := r.URL.Query().Get("shard")
	s.mu.Lock()
	defer s.mu.Unlock()
	code, body := http.StatusOK, `{"ok":true}`
	switch {
	case err != nil || token == 0:
		code, body = http.StatusBadRequest, `{"error":"no fencing token"}`
	case token < s.fences[shard]:
		code, body = http.StatusConflict, fmt.Sprintf(`{"error":"stale fencing token %d < %d"}`, token, s.fences[shard])
	default:
		s.fences[shard] = token
	}
	s.log = append(s.log, write{At: at, Token: token, Writer: r.URL.Query().Get("writer"), Shard: shard, Code: code})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, body)
}

// raiseFence acts as if a writer with token had written.
func (s *store) raiseFence(token uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fences[""] = max(s.fences[""], token)
}

func (s *store) writes() []write {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]write(nil), s.log...)
}

// await polls the store's log until done holds, or fails after generous.
func (s *store) await(t *testing.T, what string, done func([]write) bool) {
	t.Helper()
	var ws []write
	poll.UntilReport(t, generous, 10*time.Millisecond, what, func() bool {
		ws = s.writes()
		return done(ws)
	}, func() string { return fmt.Sprintf("%d writes", len(ws)) })
}

// signed formats d rounded to the millisecond, with its sign.
func signed(d time.Duration) string {
	if d = d.Round(time.Millisecond); d >= 0 {
		return "+" + d.String()
	}
	return d.String()
}

func countToken(ws []write, token uint64) int {
	n := 0
	for _, w := range ws {
		if w.Token == token {
			n++
		}
	}
	return n
}

func firstWith(ws []write, token uint64) time.Time {
	for _, w := range ws {
		if w.Token == token {
			return w.At
		}
	}
	return time.Time{}
}

// firstRejected returns the index of the first write refused with 409, or -1.
func firstRejected(ws []write) int {
	for i, w := range ws {
		if w.Code == http.StatusConflict {
			return i
		}
	}
	return -1
}
