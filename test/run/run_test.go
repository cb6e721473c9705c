package run

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testing/kubetest"
)

// a) With three instances, a command runs only while its instance leads:
// every beat carries a token that instance reported while leader, and
// beats begin at least the start delay after the term was acquired. A release hands
// the command over to another instance.
func TestCommandRunsOnlyWhileItsInstanceLeads(t *testing.T) {
	t.Parallel()
	tr := newTrial(t)
	for _, name := range []string{"a", "b", "c"} {
		tr.start(name, false)
	}
	first := tr.awaitRun(0, nil)
	release(t, first.m)
	second := tr.awaitRun(first.token, first.m)
	tr.awaitStopped(first.m)
	tr.awaitBeats(second.m, second.token, 50)

	tr.stopSampling()
	tr.checkRunsWhileLeading()
	tr.checkNoOverlap()
	tr.checkRunnersRunning()
}

// b) A partition of the leader's sidecar from the apiserver: the runner's
// deadline (or the sidecar's leader:false) stops the command. A command
// that ignores SIGTERM is SIGKILLed grace later: its last beat is no later
// than the last reported validUntil + grace + slack; one that obeys stops
// by validUntil + slack. The successor's command starts after it stopped.
func TestPartitionStopsTheCommandWhenValidityEnds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		env   []string
		bound time.Duration // after the last reported validUntil
	}{
		{"SIGTERM ignored", []string{"BEAT_IGNORE_TERM=1"}, grace + slack},
		{"SIGTERM obeyed", nil, slack},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr := newTrial(t)
			tr.start("a", true, tc.env...)
			tr.start("b", true, tc.env...)
			old := tr.awaitRun(0, nil)
			cut := time.Now()
			old.m.inst.Proxy.Cut()
			succ := tr.awaitRun(old.token, old.m)
			tr.awaitStopped(old.m)
			t.Logf("cut %s's link at %s; %s took over; %s's runner stopped its command: %s",
				old.m.name, clock(cut), succ.m.name, old.m.name, stopReason(old.m))

			tr.stopSampling()
			tm := old.m.terms(t)[old.token]
			if tm == nil {
				t.Fatalf("%s never reported leading with token %d", old.m.name, old.token)
			}
			runs := runsOf(t, old.m)
			last := runs[len(runs)-1]
			if last.token != old.token {
				t.Fatalf("%s ran %v after the partition; want nothing after token %d", old.m.name, last, old.token)
			}
			t.Logf("last reported validUntil %s; last beat %s (%v later, bound %v)",
				clock(tm.validUntil), clock(last.last), last.last.Sub(tm.validUntil).Round(time.Millisecond), tc.bound)
			if last.last.After(tm.validUntil.Add(tc.bound)) {
				t.Errorf("%s's command beat until %v after its last reported validity; bound %v",
					old.m.name, last.last.Sub(tm.validUntil), tc.bound)
			}
			_, sigterms := beatsOf(t, old.m.beats)
			if len(sigterms) != 1 {
				t.Fatalf("%s's command got SIGTERM %d times, want once", old.m.name, len(sigterms))
			}
			if tc.bound > slack {
				// It outlived the SIGTERM until the SIGKILL, grace later.
				if lived := last.last.Sub(sigterms[0]); lived < grace/2 {
					t.Errorf("a command that ignores SIGTERM last beat %v after it, want about grace (%v): killed too early", lived, grace)
				}
			}
			tr.checkRunsWhileLeading()
			tr.checkNoOverlap()
			tr.checkRunnersRunning()
		})
	}
}

// c) Runs of different instances never overlap, across a handover by
// SIGTERM to the leading sidecar (its runner carries on next to a dead
// sidecar), by POST /v1/release, a sidecar crash (SIGKILL) and a partition,
// with commands that ignore SIGTERM, so that each old run lasts until its
// SIGKILL, grace after its runner saw the loss.
func TestNoOverlapAcrossHandovers(t *testing.T) {
	t.Parallel()
	tr := newTrial(t)
	for _, name := range []string{"a", "b", "c", "d"} {
		tr.start(name, true, "BEAT_IGNORE_TERM=1") // each stop waits the full grace
	}
	cur := tr.awaitRun(0, nil)
	for _, fault := range []struct {
		name string
		do   func(m *member)
	}{
		{"SIGTERM to the sidecar", func(m *member) {
			if err := m.inst.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		}},
		{"POST /v1/release", func(m *member) { release(t, m) }},
		{"sidecar crash (SIGKILL)", func(m *member) {
			if err := m.inst.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}},
		{"partition", func(m *member) { m.inst.Proxy.Cut() }},
	} {
		tr.awaitBeats(cur.m, cur.token, 20)
		at := time.Now()
		fault.do(cur.m)
		next := tr.awaitRun(cur.token, cur.m)
		t.Logf("%s to %s: %s's command ran %v later", fault.name, cur.m.name, next.m.name, next.first.Sub(at).Round(time.Millisecond))
		tr.awaitStopped(cur.m)
		t.Logf("%s's runner stopped its command: %s", cur.m.name, stopReason(cur.m))
		cur = next
	}

	tr.stopSampling()
	if runs := tr.checkNoOverlap(); len(runs) < 5 {
		t.Errorf("%d runs, want one before and one after each of the 4 handovers", len(runs))
	}
	tr.checkRunsWhileLeading()
	tr.checkRunnersRunning()
}

// d) The runner exits with the status of a command that ends on its own,
// and after SIGTERM with the status of the command it stopped: the
// command's own (it obeys) or 137 (it ignored SIGTERM: SIGKILL after grace).
func TestExitStatusEndToEnd(t *testing.T) {
	t.Parallel()
	tr := newTrial(t)
	inst := tr.cfg.StartTest(t, "a")
	dir := tr.cfg.Dir

	seven := startRunner(t, inst.APIURL, filepath.Join(dir, "exit7.log"), nil, "sh", "-c", "exit 7")
	if code := seven.exitCode(t, generous); code != 7 {
		t.Errorf("runner of `exit 7` exited %d, want 7; log:\n%s", code, kubetest.LogTail(seven.log, 10))
	}

	for _, tc := range []struct {
		name string
		env  []string
		want int
	}{
		{"obeys", []string{"BEAT_TERM_EXIT=5"}, 5},
		{"ignores", []string{"BEAT_IGNORE_TERM=1"}, 128 + 9},
	} {
		beats := filepath.Join(dir, tc.name+".beats")
		r := startRunner(t, inst.APIURL, filepath.Join(dir, tc.name+".log"), append(tc.env, "BEAT_FILE="+beats), beater)
		m := &member{name: tc.name, beats: beats}
		eventually(t, tc.name+": the command ran", func() bool { return len(runsOf(t, m)) > 0 },
			func() string { return "log:\n" + kubetest.LogTail(r.log, 10) })
		sent := time.Now()
		if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		code := r.exitCode(t, generous)
		took := time.Since(sent)
		if code != tc.want {
			t.Errorf("%s: runner exited %d after SIGTERM, want %d; log:\n%s", tc.name, code, tc.want, kubetest.LogTail(r.log, 10))
		}
		if _, sigterms := beatsOf(t, beats); len(sigterms) != 1 {
			t.Errorf("%s: the command got SIGTERM %d times, want once", tc.name, len(sigterms))
		}
		if tc.want == 128+9 && took < grace {
			t.Errorf("%s: runner exited %v after SIGTERM, before grace %v", tc.name, took, grace)
		}
		t.Logf("%s: exit status %d, %v after SIGTERM", tc.name, code, took.Round(time.Millisecond))
	}
}

// Usage errors of `run` and `install` exit 2 with one line naming the flag
// or argument.
func TestUsageErrorsExitTwo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--grace", "0s", "--", "true"}, "--grace"},
		{[]string{"run", "--sidecar", "localhost:0", "--", "true"}, "--sidecar"},
		{[]string{"run", "--addr", "ftp://localhost:4040", "--", "true"}, "--addr"},
		{[]string{"run", "--bogus", "--", "true"}, "-bogus"},
		{[]string{"run", "true"}, "missing --"},
		{[]string{"run", "--"}, "missing command"},
		{[]string{"install"}, "PATH"},
		{[]string{"install", "a", "b"}, "PATH"},
	} {
		cmd := exec.Command(binary, tc.args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 2 {
			t.Errorf("%q: %v, want exit status 2", tc.args, err)
		}
		if out := strings.TrimSpace(stderr.String()); strings.Contains(out, "\n") || !strings.Contains(out, tc.want) {
			t.Errorf("%q: stderr %q: want one line naming %s", tc.args, out, tc.want)
		}
	}
}

// `leasehold install PATH` copies the binary exactly, executable; a
// folder that does not exist is a failure (1).
func TestInstallCopiesTheBinary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dst := filepath.Join(dir, "leasehold-bin", "leasehold")
	if err := os.Mkdir(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second install replaces the first
		if out, err := exec.Command(binary, "install", dst).CombinedOutput(); err != nil {
			t.Fatalf("install: %v\n%s", err, out)
		}
	}
	want, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("installed copy (%d bytes) differs from the binary (%d bytes)", len(got), len(want))
	}
	if fi, err := os.Stat(dst); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("installed copy: %v, mode %v; want 0755", err, fi.Mode())
	}
	if entries, _ := os.ReadDir(filepath.Dir(dst)); len(entries) != 1 {
		t.Errorf("folder holds %d entries, want only the binary (no temporary file left)", len(entries))
	}
	// The copy runs: its own usage error.
	if err := exec.Command(dst, "run").Run(); err == nil || err.(*exec.ExitError).ExitCode() != 2 {
		t.Errorf("installed copy `run` without a command: %v, want exit status 2", err)
	}

	cmd := exec.Command(binary, "install", filepath.Join(dir, "missing", "leasehold"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil || err.(*exec.ExitError).ExitCode() != 1 || !strings.Contains(stderr.String(), "leasehold install:") {
		t.Errorf("install into a missing folder: %v, stderr %q; want exit status 1 and a message", err, stderr.String())
	}
}
