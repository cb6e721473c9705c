package runner

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The command starts once the start delay has passed since the runner first
// saw the term, not a moment earlier, with the term's token and number; the
// runner watches with half the validity left as wait.
func TestStartsOnlyAfterTheStartDelay(t *testing.T) {
	s := newSetup(t, leading(42, 3, 60*time.Second, 1), 500*time.Millisecond, obeying)
	s.cfg.StartDelay = 2 * time.Second // the start waits for it, not for grace
	startRun(t, s.cfg)

	first := s.sidecar.awaitRequests(t, "", 1)
	if first[0].wait != maxWait {
		t.Errorf("first watch asked wait=%v, want %v", first[0].wait, maxWait)
	}
	polls := s.sidecar.awaitRequests(t, "1", 1)
	if polls[0].wait != 30*time.Second {
		t.Errorf("watch while leading asked wait=%v, want half the 60s validity", polls[0].wait)
	}
	s.clock.Step(2*time.Second - time.Millisecond)
	s.sidecar.kick()
	s.sidecar.awaitRequests(t, "1", 2) // the runner has handled the answer
	if r := s.logs.find("command started"); len(r) != 0 || len(s.lines()) != 0 {
		t.Fatalf("command started %v into a 2s start delay", r[0].at.Sub(t0))
	}

	s.clock.Step(time.Millisecond)
	s.awaitLine(t, "start", 1)
	if got := s.starts()[0][1:]; !slices.Equal(got, []string{"42", "3"}) {
		t.Errorf("command saw token and term %v, want [42 3]", got)
	}
	if at := s.logs.await(t, "command started", 1).at; !at.Equal(t0.Add(2 * time.Second)) {
		t.Errorf("command started at fake +%v, want +2s", at.Sub(t0))
	}
}

// A new term during the start delay starts the delay again, measured from
// when the runner saw the new term; the command runs with the new token.
func TestANewTermDuringTheDelayRestartsIt(t *testing.T) {
	s := newSetup(t, leading(42, 3, 60*time.Second, 1), 2*time.Second, obeying)
	startRun(t, s.cfg)
	s.sidecar.awaitRequests(t, "1", 1)

	s.clock.Step(1500 * time.Millisecond)
	s.sidecar.set(leading(43, 4, 60*time.Second, 2))
	s.sidecar.awaitRequests(t, "2", 1)

	s.clock.Step(time.Second) // +2.5s: token 42's start would have come
	s.sidecar.kick()
	s.sidecar.awaitRequests(t, "2", 2)
	if r := s.logs.find("command started"); len(r) != 0 {
		t.Fatalf("command started at fake +%v, 1s after the new term", r[0].at.Sub(t0))
	}

	s.clock.Step(time.Second) // +3.5s: 2s after the new term was seen
	s.awaitLine(t, "start", 1)
	if got := s.starts(); len(got) != 1 || !slices.Equal(got[0][1:], []string{"43", "4"}) {
		t.Errorf("starts %v, want one with token 43, term 4", got)
	}
	if at := s.logs.await(t, "command started", 1).at; !at.Equal(t0.Add(3500 * time.Millisecond)) {
		t.Errorf("command started at fake +%v, want +3.5s", at.Sub(t0))
	}
}

// A long-poll that blocked longer than the validity it reports gives no
// deadline (sent + validForMs has passed): the runner asks again at once,
// without an index, and counts the start delay from that fresh answer.
func TestAnAnswerTooOldIsAskedAgain(t *testing.T) {
	s := newSetup(t, following(7, 1), time.Second, obeying)
	startRun(t, s.cfg)
	s.sidecar.awaitRequests(t, "1", 1) // blocked from +0

	s.clock.Step(10 * time.Second)
	s.sidecar.set(leading(42, 3, 5*time.Second, 2)) // answers the request sent at +0: deadline +5s, past
	if fresh := s.sidecar.awaitRequests(t, "", 2); fresh[1].wait != maxWait {
		t.Errorf("fresh request asked wait=%v, want %v", fresh[1].wait, maxWait)
	}
	polls := s.sidecar.awaitRequests(t, "2", 1)
	if polls[0].wait != 2500*time.Millisecond {
		t.Errorf("watch asked wait=%v after the fresh answer (5s of validity), want 2.5s", polls[0].wait)
	}
	s.clock.Step(time.Second)
	s.awaitLine(t, "start", 1)
	if at := s.logs.await(t, "command started", 1).at; !at.Equal(t0.Add(11 * time.Second)) {
		t.Errorf("command started at fake +%v, want +11s (fresh answer at +10s, start delay 1s)", at.Sub(t0))
	}
}

// Leadership that ends during the start delay starts nothing; while not
// leading the runner watches with the longest wait; a signal then exits 0.
func TestNoStartWhenLeadershipEndsDuringTheDelay(t *testing.T) {
	s := newSetup(t, leading(42, 3, 60*time.Second, 1), 2*time.Second, obeying)
	run := startRun(t, s.cfg)
	s.sidecar.awaitRequests(t, "1", 1)

	s.clock.Step(time.Second)
	s.sidecar.set(following(50, 2))
	if polls := s.sidecar.awaitRequests(t, "2", 1); polls[0].wait != maxWait {
		t.Errorf("watch while not leading asked wait=%v, want %v", polls[0].wait, maxWait)
	}
	s.clock.Step(5 * time.Second)
	s.sidecar.kick()
	s.sidecar.awaitRequests(t, "2", 2)
	if r := s.logs.find("command started"); len(r) != 0 {
		t.Fatalf("command started at fake +%v though leadership ended during the delay", r[0].at.Sub(t0))
	}

	run.cancel()
	if code := run.exit(t); code != 0 {
		t.Errorf("exit status %d after a signal with no command running, want 0", code)
	}
}

// The command inherits the runner's environment, with the term's
// LEASEHOLD_FENCING_TOKEN and LEASEHOLD_TERM replacing any inherited ones.
func TestEnvironment(t *testing.T) {
	s := newSetup(t, leading(1042, 5, 60*time.Second, 7), time.Second,
		`echo "start $$ $LEASEHOLD_FENCING_TOKEN $LEASEHOLD_TERM $FOO $(env | grep -c '^LEASEHOLD_')" >> "$BEATS"`)
	s.cfg.Env = append(s.cfg.Env, "FOO=bar", "LEASEHOLD_FENCING_TOKEN=1", "LEASEHOLD_TERM=9")
	run := startRun(t, s.cfg)
	got := s.awaitStart(t)
	if want := []string{"1042", "5", "bar", "2"}; !slices.Equal(got[1:], want) {
		t.Errorf("command saw token, term, FOO, count of LEASEHOLD_ variables %v, want %v", got[1:], want)
	}
	if code := run.exit(t); code != 0 {
		t.Errorf("exit status %d, want the command's 0", code)
	}
}

// Leadership lost (leader:false) or a new term (another token) SIGTERMs the
// command's process group; the runner then waits for leadership again and
// runs the command again with the new token. A signal to the runner stops
// it too, and the runner exits with the command's status.
func TestSIGTERMWhenLeadershipEnds(t *testing.T) {
	for name, end := range map[string]func(s *setup){
		"leader false": func(s *setup) {
			s.sidecar.set(following(44, 2))
			s.sidecar.awaitRequests(t, "2", 1)
			s.sidecar.set(leading(45, 5, 60*time.Second, 3))
		},
		"new token": func(s *setup) {
			s.sidecar.set(leading(45, 5, 60*time.Second, 3))
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := newSetup(t, leading(42, 3, 60*time.Second, 1), 2*time.Second, obeying)
			run := startRun(t, s.cfg)
			s.awaitStart(t)

			end(s)
			s.awaitLine(t, "term", 1)
			if st := s.logs.await(t, "command stopped", 1).attrs["status"]; st != "3" {
				t.Errorf("stopped command's status %s, want its own 3", st)
			}
			if run.returned() {
				t.Fatalf("runner exited (%d) when leadership ended; want it to wait again", run.code)
			}

			s.sidecar.awaitRequests(t, "3", 1)
			s.clock.Step(2 * time.Second)
			s.awaitLine(t, "start", 2)
			if got := s.starts(); len(got) != 2 || got[1][1] != "45" {
				t.Errorf("starts %v, want a second one with token 45", got)
			}

			run.cancel()
			s.awaitLine(t, "term", 2)
			if code := run.exit(t); code != 3 {
				t.Errorf("exit status %d after a signal, want the command's 3", code)
			}
		})
	}
}

// A command that ignores SIGTERM is SIGKILLed, with its whole group, once
// grace has passed since the SIGTERM, and not before.
func TestSIGKILLAfterGraceWhenSIGTERMIsIgnored(t *testing.T) {
	s := newSetup(t, leading(42, 3, 60*time.Second, 1), 2*time.Second, ignoring)
	run := startRun(t, s.cfg)
	pid, _ := strconv.Atoi(s.awaitStart(t)[0])

	s.sidecar.set(following(44, 2))
	term := s.awaitLine(t, "term", 1)
	s.awaitLine(t, "beat", term+1) // it outlived the SIGTERM: the fake clock has not moved
	if r := s.logs.find("command stopped"); len(r) != 0 {
		t.Fatal("command stopped before grace passed")
	}
	s.clock.Step(2*time.Second - time.Millisecond)
	s.clock.Step(time.Millisecond)
	stopped := s.logs.await(t, "command stopped", 1)
	if stopped.attrs["status"] != "137" {
		t.Errorf("stopped command's status %s, want 137 (SIGKILL)", stopped.attrs["status"])
	}
	if kill := s.logs.await(t, "SIGKILL", 1); !kill.at.Equal(t0.Add(4 * time.Second)) {
		t.Errorf("SIGKILL at fake +%v, want +4s (SIGTERM at +2s, grace 2s)", kill.at.Sub(t0))
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("command (pid %d) still exists after it was stopped: %v", pid, err)
	}
	if run.returned() {
		t.Fatalf("runner exited (%d); want it to wait for leadership again", run.code)
	}
}

// The validity deadline (request sent + validForMs, moved by every answer
// with more validity) stops the command when the sidecar hangs (a request
// in flight) or is gone (retried with backoff), on the runner's own timer.
func TestDeadlineStopsTheCommandWhenTheSidecarIsSilent(t *testing.T) {
	for name, silence := range map[string]func(s *setup){
		"hangs":   func(s *setup) { s.sidecar.setHang(true) },
		"is gone": func(s *setup) { s.sidecar.close() },
	} {
		t.Run(name, func(t *testing.T) {
			s := newSetup(t, leading(42, 3, 10*time.Second, 1), time.Second, obeying)
			run := startRun(t, s.cfg)
			s.awaitStart(t) // started at +1s; deadline +10s

			// At +4s the answer to the request sent at +0 keeps the deadline
			// at +10s; it took long, so a fresh request (no index) follows
			// at once, and its answer, sent at +4s, moves the deadline to
			// +14s: the next watch asks wait=5s.
			s.clock.Step(3 * time.Second)
			s.sidecar.kick()
			s.sidecar.awaitRequests(t, "", 2)
			if polls := s.sidecar.awaitRequests(t, "1", 2); polls[1].wait != 5*time.Second {
				t.Errorf("watch asked wait=%v with 10s of validity left, want 5s", polls[1].wait)
			}
			silence(s)
			if name == "hangs" && s.sidecar.heldNow() == 0 {
				t.Fatal("no request in flight")
			}

			s.clock.Step(6 * time.Second) // +10s: the first answer's deadline
			s.clock.Step(4 * time.Second) // +14s
			s.awaitLine(t, "term", 1)
			ran := s.logs.await(t, "validity ran out", 1)
			if !ran.at.Equal(t0.Add(14 * time.Second)) {
				t.Errorf("deadline passed at fake +%v, want +14s", ran.at.Sub(t0))
			}
			if name == "hangs" && s.sidecar.heldNow() == 0 {
				t.Error("the deadline fired only once no request was in flight")
			}
			if name == "is gone" {
				// Logged by the watcher once its held request fails: after
				// the sidecar closed, in no order with the deadline.
				s.logs.await(t, "sidecar did not answer", 1)
			}
			s.logs.await(t, "command stopped", 1)
			if run.returned() {
				t.Fatalf("runner exited (%d); want it to wait for leadership again", run.code)
			}
		})
	}
}

// The runner exits with the status of a command that ends on its own; a
// death by signal n is 128+n.
func TestExitStatusPassthrough(t *testing.T) {
	for script, want := range map[string]int{
		"exit 0":          0,
		"exit 7":          7,
		"kill -KILL $$":   128 + 9,
		"kill -USR1 $$":   128 + 10,
		"exec sleep 0.01": 0,
	} {
		t.Run(script, func(t *testing.T) {
			s := newSetup(t, leading(42, 3, 60*time.Second, 1), time.Second, `echo start >> "$BEATS"; `+script)
			run := startRun(t, s.cfg)
			s.awaitStart(t)
			if code := run.exit(t); code != want {
				t.Errorf("exit status %d, want %d", code, want)
			}
			s.logs.await(t, "command exited on its own", 1)
		})
	}
}

// A signal to the runner stops the command and the runner exits with its
// status: 143 for a command that SIGTERM kills, 137 for one SIGKILLed
// after grace.
func TestSignalToTheRunner(t *testing.T) {
	t.Run("killed by SIGTERM", func(t *testing.T) {
		s := newSetup(t, leading(42, 3, 60*time.Second, 1), time.Second, `echo start >> "$BEATS"; exec sleep 100`)
		run := startRun(t, s.cfg)
		s.awaitStart(t)
		run.cancel()
		if code := run.exit(t); code != 128+15 {
			t.Errorf("exit status %d, want 143", code)
		}
	})
	t.Run("SIGTERM ignored", func(t *testing.T) {
		s := newSetup(t, leading(42, 3, 60*time.Second, 1), time.Second, ignoring)
		run := startRun(t, s.cfg)
		s.awaitStart(t)
		run.cancel()
		s.awaitLine(t, "term", 1)
		if run.returned() {
			t.Fatal("runner returned before grace passed")
		}
		s.clock.Step(time.Second)
		if code := run.exit(t); code != 128+9 {
			t.Errorf("exit status %d, want 137", code)
		}
	})
}

// A command that cannot be started is named and the runner exits 1: at
// once when it is not found, and without retrying when it cannot be
// started once leading.
func TestCommandThatCannotStart(t *testing.T) {
	t.Run("not found", func(t *testing.T) {
		s := newSetup(t, leading(42, 3, 60*time.Second, 1), time.Second, "")
		s.cfg.Command = []string{"leasehold-no-such-command"}
		if code := Run(t.Context(), s.cfg); code != ExitFailed {
			t.Errorf("exit status %d, want 1", code)
		}
		if r := s.logs.find("cannot start"); len(r) != 1 || r[0].attrs["command"] != "leasehold-no-such-command" {
			t.Errorf("log %v: want one record naming the command", r)
		}
	})
	t.Run("gone when leading", func(t *testing.T) {
		s := newSetup(t, leading(42, 3, 60*time.Second, 1), time.Second, "")
		script := filepath.Join(t.TempDir(), "app.sh")
		if err := os.WriteFile(script, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		s.cfg.Command = []string{script}
		run := startRun(t, s.cfg)
		s.sidecar.awaitRequests(t, "1", 1)
		if err := os.Remove(script); err != nil {
			t.Fatal(err)
		}
		s.clock.Step(time.Second)
		if code := run.exit(t); code != ExitFailed {
			t.Errorf("exit status %d, want 1", code)
		}
		if r := s.logs.find("cannot start"); len(r) != 1 || r[0].attrs["command"] != script {
			t.Errorf("log %v: want one record naming the command", r)
		}
	})
}

// Command lines that break a rule are usage errors: one line naming the
// flag or argument and the rule.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--bogus", "--", "true"}, "-bogus"},
		{[]string{"true"}, "missing --"},
		{[]string{"--grace", "1s", "true"}, "missing --"},
		{[]string{}, "missing --"},
		{[]string{"--"}, "missing command"},
		{[]string{"--sidecar", "ftp://127.0.0.1:4040", "--", "true"}, "--sidecar"},
		{[]string{"--sidecar", "127.0.0.1:0", "--", "true"}, "--sidecar"},
		{[]string{"--addr", "ftp://127.0.0.1:4040", "--", "true"}, "--addr"},
		{[]string{"--addr", "http://127.0.0.1:4040/v1", "--", "true"}, "--addr"},
		{[]string{"--addr", "127.0.0.1:4040", "--sidecar", "127.0.0.1:4040", "--", "true"}, "--addr and --sidecar: give one"},
		{[]string{"--sidecar", "http://127.0.0.1:4040/v1", "--", "true"}, "--sidecar"},
		{[]string{"--sidecar", "http://127.0.0.1:4040?x=1", "--", "true"}, "--sidecar"},
		{[]string{"--sidecar", "http://", "--", "true"}, "--sidecar"},
		{[]string{"--grace", "0s", "--", "true"}, "--grace 0s: must be positive"},
		{[]string{"--grace", "-1s", "--", "true"}, "--grace -1s: must be positive"},
		{[]string{"--grace", "soon", "--", "true"}, "-grace"},
		{[]string{"--grace"}, "-grace"},
		{[]string{"--grace", "2s", "--start-delay", "2s", "--", "true"}, "--start-delay 2s: must be longer than --grace (2s)"},
		{[]string{"--start-delay", "1s", "--", "true"}, "--start-delay 1s: must be longer than --grace (3s)"},
		{[]string{"--start-delay", "-1s", "--", "true"}, "--start-delay -1s"},
		{[]string{"--lease", "orders-1", "--each", "--", "true"}, "--lease \"orders-1\" and --each: choose one"},
		{[]string{"--lease", "", "--", "true"}, "--lease \"\""},
		{[]string{"--lease", "a/b", "--", "true"}, "--lease \"a/b\""},
		{[]string{"--each=maybe", "--", "true"}, "-each"},
	} {
		_, err := ParseArgs(tc.args)
		var usage *UsageError
		if !errors.As(err, &usage) {
			t.Errorf("%q: %v, want a usage error", tc.args, err)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, tc.want) || !strings.HasPrefix(msg, "leasehold run: ") {
			t.Errorf("%q: %q, want one line starting with \"leasehold run: \" naming %q", tc.args, msg, tc.want)
		}
	}

	opts, err := ParseArgs([]string{"--sidecar", "http://localhost:9/", "-grace=250ms", "--", "sh", "-c", "echo --grace"})
	if err != nil {
		t.Fatal(err)
	}
	if opts.Sidecar.String() != "http://localhost:9" || opts.Grace != 250*time.Millisecond || opts.StartDelay != 1250*time.Millisecond ||
		!slices.Equal(opts.Command, []string{"sh", "-c", "echo --grace"}) {
		t.Errorf("parsed %+v", opts)
	}
	for _, flag := range []string{"--addr", "--sidecar"} { // --sidecar: another name of --addr
		for addr, want := range map[string]string{"127.0.0.1:9": "http://127.0.0.1:9", "https://localhost:9/": "https://localhost:9", ":9": "http://127.0.0.1:9"} {
			opts, err := ParseArgs([]string{flag, addr, "--", "app"})
			if err != nil || opts.Sidecar.String() != want {
				t.Errorf("%s %s: %v, %v; want %s", flag, addr, opts.Sidecar, err, want)
			}
		}
	}
	opts, err = ParseArgs([]string{"--grace", "1s", "--start-delay", "1500ms", "--", "app"})
	if err != nil || opts.StartDelay != 1500*time.Millisecond {
		t.Errorf("--start-delay: %+v, %v", opts, err)
	}
	opts, err = ParseArgs([]string{"--lease", "orders-1", "--", "app"})
	if err != nil || opts.Lease != "orders-1" || opts.Each {
		t.Errorf("--lease: %+v, %v", opts, err)
	}
	opts, err = ParseArgs([]string{"--each", "--", "app"})
	if err != nil || opts.Lease != "" || !opts.Each {
		t.Errorf("--each: %+v, %v", opts, err)
	}
	opts, err = ParseArgs([]string{"--", "app"})
	if err != nil || opts.Lease != "" || opts.Each || opts.Sidecar.String() != DefaultSidecar || opts.Grace != DefaultGrace || opts.StartDelay != DefaultGrace+DefaultStartMargin {
		t.Errorf("defaults: %+v, %v", opts, err)
	}
}
