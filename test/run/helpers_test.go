package run

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/fence"
	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
	"github.com/leasehold/leasehold/internal/testing/overlap"
	"github.com/leasehold/leasehold/pkg/api"
	"github.com/leasehold/leasehold/pkg/client"
)

// runner is one `leasehold run` process.
type runner struct {
	cmd    *exec.Cmd
	log    string
	exited chan struct{}
}

// startRunner starts `leasehold run --addr <sidecar> --grace <grace>
// --start-delay <startDelay> -- command...` with env (plus PATH), its output in logPath. When the test
// ends it is sent SIGTERM, and SIGKILL if it has not exited generous later.
func startRunner(t *testing.T, sidecar, logPath string, env []string, command ...string) *runner {
	t.Helper()
	return startRunnerWith(t, sidecar, logPath, env, nil, command...)
}

// startRunnerWith is startRunner with flags added before the "--".
func startRunnerWith(t *testing.T, sidecar, logPath string, env, flags []string, command ...string) *runner {
	t.Helper()
	args := append([]string{"run", "--addr", sidecar, "--grace", grace.String(), "--start-delay", startDelay.String()}, flags...)
	args = append(append(args, "--"), command...)
	out, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{cmd: exec.Command(binary, args...), log: logPath, exited: make(chan struct{})}
	r.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	r.cmd.Stdout, r.cmd.Stderr = out, out
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		out.Close()
		t.Fatal(err)
	}
	go func() {
		_ = r.cmd.Wait() // the status is read from ProcessState
		out.Close()
		close(r.exited)
	}()
	t.Cleanup(func() {
		if r.running() {
			_ = r.cmd.Process.Signal(syscall.SIGCONT) // a paused runner cannot handle SIGTERM
			_ = r.cmd.Process.Signal(syscall.SIGTERM)
		}
		select {
		case <-r.exited:
		case <-time.After(generous):
			t.Errorf("runner %s still running %v after SIGTERM", logPath, generous)
			_ = r.cmd.Process.Kill()
			<-r.exited
		}
	})
	return r
}

func (r *runner) running() bool {
	select {
	case <-r.exited:
		return false
	default:
		return true
	}
}

// exitCode waits (at most within) for the runner to exit and returns its
// exit status.
func (r *runner) exitCode(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-r.exited:
		return r.cmd.ProcessState.ExitCode()
	case <-time.After(within):
		t.Fatalf("runner still running after %v; log:\n%s", within, kubetest.LogTail(r.log, 20))
		return 0
	}
}

// member is one sidecar, the runner next to it, and what a sampler saw of
// the sidecar's status.
type member struct {
	name   string
	inst   *fleet.Instance
	runner *runner
	beats  string // the beater's file

	mu      sync.Mutex
	samples []sample
}

// sample is one GET /v1/status answer, received within [sent, recv].
type sample struct {
	sent, recv time.Time
	st         api.Status
}

func (m *member) record(s sample) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.samples = append(m.samples, s)
}

// exited reports whether the member's sidecar has exited.
func (m *member) exited() bool {
	select {
	case <-m.inst.Exited():
		return true
	default:
		return false
	}
}

// term is what the sampler saw of one term of a member.
type term struct {
	acquiredAt time.Time // as reported
	validUntil time.Time // the latest reported
	lastLeader time.Time // recv of the last leader:true sample
	// leadingAtEnd: the member's last sample still reported this term and
	// its sidecar still runs, so the term's later beats may be covered by
	// renewals nobody sampled.
	leadingAtEnd bool
}

// terms returns, by token, the terms the member reported while leader.
func (m *member) terms(t *testing.T) map[fence.Token]*term {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[fence.Token]*term{}
	for _, s := range m.samples {
		if !s.st.Leader {
			continue
		}
		tm := out[s.st.FencingToken]
		if tm == nil {
			tm = &term{acquiredAt: parseTime(t, s.st.AcquiredAt)}
			out[s.st.FencingToken] = tm
		}
		tm.validUntil = later(tm.validUntil, parseTime(t, s.st.ValidUntil))
		tm.lastLeader = s.recv
	}
	if n := len(m.samples); n > 0 && m.samples[n-1].st.Leader && !m.exited() {
		out[m.samples[n-1].st.FencingToken].leadingAtEnd = true
	}
	return out
}

// trial is one test's namespace and Lease, its members and their samplers.
type trial struct {
	t       *testing.T
	cfg     fleet.Config
	members []*member

	ctx      context.Context
	stop     context.CancelFunc
	samplers sync.WaitGroup
}

func newTrial(t *testing.T) *trial {
	ns, err := kubetest.Require(t, cluster).CreateNamespace(t.Context(), "run")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	tr := &trial{
		t: t,
		cfg: fleet.Config{
			Binary: binary, Cluster: cluster, Namespace: ns, Lease: "app",
			LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
			Dir: t.TempDir(),
		},
		ctx: ctx, stop: stop,
	}
	t.Cleanup(tr.stopSampling) // runs last: after every runner and sidecar has stopped
	t.Cleanup(func() {
		if t.Failed() {
			for _, m := range tr.members {
				t.Logf("--- %s sidecar log tail:\n%s\n--- %s runner log tail:\n%s",
					m.name, kubetest.LogTail(m.inst.LogPath, 15), m.name, kubetest.LogTail(m.runner.log, 15))
			}
		}
	})
	return tr
}

// start launches a sidecar named name (through its own proxy with
// viaProxy), a runner next to it that runs the beater with env, and a
// sampler of the sidecar's status.
func (tr *trial) start(name string, viaProxy bool, env ...string) *member {
	tr.t.Helper()
	inst, err := tr.cfg.Start(tr.t.Context(), name, viaProxy)
	if err != nil {
		tr.t.Fatal(err)
	}
	tr.t.Cleanup(inst.Stop)
	m := &member{name: name, inst: inst, beats: filepath.Join(tr.cfg.Dir, name+".beats")}
	m.runner = startRunner(tr.t, inst.APIURL, filepath.Join(tr.cfg.Dir, name+".runner.log"),
		append([]string{"BEAT_FILE=" + m.beats}, env...), beater)
	tr.members = append(tr.members, m)
	tr.samplers.Go(func() { tr.sample(m) })
	return m
}

// sample polls m's /v1/status every 10 ms until the trial stops sampling
// or the sidecar exits.
func (tr *trial) sample(m *member) {
	for tr.ctx.Err() == nil {
		ctx, cancel := context.WithTimeout(tr.ctx, time.Second)
		sent := time.Now()
		st, err := m.inst.Status(ctx)
		cancel()
		if err == nil {
			m.record(sample{sent: sent, recv: time.Now(), st: st})
		}
		select {
		case <-tr.ctx.Done():
		case <-m.inst.Exited():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (tr *trial) stopSampling() {
	tr.stop()
	tr.samplers.Wait()
}

// beat is one line of a beater.
type beat struct {
	at    time.Time
	token fence.Token
}

// beatsOf reads a beater's file: its beats, and when it got SIGTERM.
func beatsOf(t *testing.T, path string) (beats []beat, sigterms []time.Time) {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		t.Fatal(err)
	}
	// A line counts once its newline is written. The beater writes each
	// line with one write(2), but a read racing that write can see part of
	// it (the kernel copies a write that spans a page boundary a page at a
	// time, and the file grows after each): the text after the last
	// newline is a write in progress, not a beat yet.
	lines := strings.Split(string(data), "\n")
	for _, line := range lines[:len(lines)-1] {
		fields := strings.Fields(line)
		if len(fields) == 3 && fields[0] == "#" && fields[1] == "SIGTERM" {
			sigterms = append(sigterms, unixNanos(t, fields[2]))
			continue
		}
		if len(fields) != 3 {
			t.Fatalf("%s: malformed line %q", path, line)
		}
		tok, err := strconv.ParseUint(fields[1], 10, 64)
		if err != nil || tok == 0 {
			t.Fatalf("%s: line %q: token %q is not a token", path, line, fields[1])
		}
		beats = append(beats, beat{at: unixNanos(t, fields[0]), token: fence.Token(tok)})
	}
	return beats, sigterms
}

// run is a stretch of consecutive beats of one member under one token: a
// run of internal/testing/overlap, whose observations are the beats.
type run struct {
	m           *member
	token       fence.Token
	first, last time.Time
	beats       int
}

func (r run) String() string {
	return fmt.Sprintf("%s:%d [%s, %s] (%d beats)", r.m.name, r.token, clock(r.first), clock(r.last), r.beats)
}

// observations returns m's beats as observations for the overlap checker:
// each is an instant at which m's command certainly ran under its token
// (Sent == Recv).
func observations(t *testing.T, m *member) []overlap.Observation[*member] {
	beats, _ := beatsOf(t, m.beats)
	obs := make([]overlap.Observation[*member], len(beats))
	for i, b := range beats {
		obs[i] = overlap.Observation[*member]{Member: m, Sent: b.at, Recv: b.at, Leader: true, Token: b.token}
	}
	return obs
}

func runOf(r overlap.Run[*member]) run {
	return run{m: r.Member, token: r.Token, first: r.First().Sent, last: r.Last().Sent, beats: len(r.Obs)}
}

// runsOf groups m's beats into runs.
func runsOf(t *testing.T, m *member) []run {
	var runs []run
	for _, r := range overlap.Runs(observations(t, m)) {
		runs = append(runs, runOf(r))
	}
	return runs
}

// allRuns returns every member's runs, by start.
func (tr *trial) allRuns() []run {
	var all []run
	for _, m := range tr.members {
		all = append(all, runsOf(tr.t, m)...)
	}
	slices.SortFunc(all, func(a, b run) int { return a.first.Compare(b.first) })
	return all
}

// awaitRun waits for a run with a token above after, by a member other
// than not (if not nil), and returns it.
func (tr *trial) awaitRun(after fence.Token, not *member) run {
	tr.t.Helper()
	var found run
	var runs []run
	eventually(tr.t, fmt.Sprintf("a command run with a token above %d", after), func() bool {
		runs = tr.allRuns()
		for _, r := range runs {
			if r.token > after && r.m != not {
				found = r
				return true
			}
		}
		return false
	}, func() string { return fmt.Sprintf("runs: %v", runs) })
	return found
}

// awaitStopped waits for m's runner to log that it stopped the command as
// many times as the command ran.
func (tr *trial) awaitStopped(m *member) {
	tr.t.Helper()
	eventually(tr.t, m.name+"'s runner stopped the command", func() bool {
		data, _ := os.ReadFile(m.runner.log)
		return strings.Count(string(data), `msg="command stopped"`) >= len(runsOf(tr.t, m))
	}, nil)
}

// awaitBeats waits until m has beaten n times under token.
func (tr *trial) awaitBeats(m *member, token fence.Token, n int) {
	tr.t.Helper()
	eventually(tr.t, fmt.Sprintf("%s beat %d times under token %d", m.name, n, token), func() bool {
		for _, r := range runsOf(tr.t, m) {
			if r.token == token && r.beats >= n {
				return true
			}
		}
		return false
	}, nil)
}

// stopReason returns the reason m's runner last logged for stopping the
// command.
func stopReason(m *member) string {
	data, _ := os.ReadFile(m.runner.log)
	reason := "(none logged)"
	for line := range strings.Lines(string(data)) {
		if _, after, ok := strings.Cut(line, `msg="stopping the command`); ok {
			if _, r, ok := strings.Cut(after, `reason="`); ok {
				reason, _, _ = strings.Cut(r, `"`)
			}
		}
	}
	return reason
}

// checkRunsWhileLeading checks every run of every member: its token is one
// that member's sidecar reported while leader, its first beat is at least
// the start delay after the term was acquired, and its last is no later than the
// term's validity plus grace plus slack. A run whose term a still running
// sidecar reported in its last sample is judged only up to that sample: the
// term may have been renewed since.
func (tr *trial) checkRunsWhileLeading() {
	tr.t.Helper()
	for _, m := range tr.members {
		terms := m.terms(tr.t)
		for _, r := range runsOf(tr.t, m) {
			tm, ok := terms[r.token]
			if !ok {
				tr.t.Errorf("%v: %s never reported leading with token %d", r, m.name, r.token)
				continue
			}
			if r.first.Before(tm.acquiredAt.Add(startDelay)) {
				tr.t.Errorf("%v began %v after the term was acquired (%s), before the start delay %v",
					r, r.first.Sub(tm.acquiredAt), clock(tm.acquiredAt), startDelay)
			}
			last := r.last
			if tm.leadingAtEnd && last.After(tm.lastLeader) {
				last = tm.lastLeader
			}
			if bound := tm.validUntil.Add(grace + slack); last.After(bound) {
				tr.t.Errorf("%v ran until %v after the term's last reported validity (%s)",
					r, last.Sub(tm.validUntil), clock(tm.validUntil))
			}
		}
	}
}

// checkNoOverlap checks with internal/testing/overlap that no two members'
// commands certainly ran at one same instant (a beat of one member between
// the first and last beat of a run of another, bounds included), and logs
// the runs and their gaps.
func (tr *trial) checkNoOverlap() []run {
	tr.t.Helper()
	var obs []overlap.Observation[*member]
	for _, m := range tr.members {
		obs = append(obs, observations(tr.t, m)...)
	}
	for _, p := range overlap.Check(obs) {
		tr.t.Errorf("runs overlap by %v: %v and %v", p.By(), runOf(p.A), runOf(p.B))
	}
	runs := tr.allRuns()
	var desc []string
	for i, r := range runs {
		if i > 0 {
			desc = append(desc, fmt.Sprintf("-(%v)->", r.first.Sub(runs[i-1].last).Round(time.Millisecond)))
		}
		desc = append(desc, r.String())
	}
	tr.t.Logf("runs: %s", strings.Join(desc, " "))
	return runs
}

// checkRunnersRunning checks that every runner still runs: a runner is a
// supervisor, it never exits because leadership ended.
func (tr *trial) checkRunnersRunning() {
	tr.t.Helper()
	for _, m := range tr.members {
		if !m.runner.running() {
			tr.t.Errorf("%s: runner exited (%v); it must wait for leadership again", m.name, m.runner.cmd.ProcessState)
		}
	}
}

// awaitPaused waits until every thread of process pid is stopped (SIGSTOP
// is obeyed asynchronously: a thread running on another CPU may still act
// for a moment after kill returns).
func awaitPaused(t *testing.T, pid int) {
	t.Helper()
	eventually(t, fmt.Sprintf("process %d stopped after SIGSTOP", pid), func() bool {
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		if err != nil || len(tasks) == 0 {
			t.Fatalf("process %d: no threads in /proc (%v)", pid, err)
		}
		for _, task := range tasks {
			data, err := os.ReadFile(task)
			if err != nil {
				return false // a thread that just exited; look again
			}
			// The state follows the command name, which is in parentheses.
			_, after, _ := strings.Cut(string(data), ") ")
			if state := strings.Fields(after); len(state) == 0 || (state[0] != "T" && state[0] != "t") {
				return false
			}
		}
		return true
	}, nil)
}

// release asks m's sidecar to give up leadership (POST /v1/release).
func release(t *testing.T, m *member) {
	t.Helper()
	c, err := client.New(m.inst.APIURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	if _, err := c.Release(t.Context(), client.DefaultStayOut); err != nil {
		t.Fatal(err)
	}
}

func parseTime(t *testing.T, s string) time.Time {
	t.Helper()
	if s == "" {
		return time.Time{}
	}
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

func unixNanos(t *testing.T, s string) time.Time {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("timestamp %q: %v", s, err)
	}
	return time.Unix(0, n)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func clock(at time.Time) string { return at.Format("15:04:05.000") }
