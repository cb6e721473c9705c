package main_test

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
	"github.com/leasehold/leasehold/pkg/api"
)

// ran is one run of the built binary.
type ran struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// leasehold runs the built binary bin with args and exactly the environment
// env, and waits (generously) for it to exit.
func leasehold(t *testing.T, bin string, env []string, args ...string) ran {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), generous)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	err := cmd.Run()
	r := ran{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start)}
	if exit, ok := errors.AsType[*exec.ExitError](err); ok {
		r.code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("leasehold %q: %v (stderr %s)", args, err, r.stderr)
	}
	if ctx.Err() != nil {
		t.Fatalf("leasehold %q still ran after %v: it never exits (stderr %s)", args, generous, r.stderr)
	}
	return r
}

// addrOf is the host:port of an instance's API, for --addr.
func addrOf(in *fleet.Instance) string { return strings.TrimPrefix(in.APIURL, "http://") }

// An argument leasehold does not know exits 2 with the usage, at once, and
// starts nothing: no candidate, so no Lease, although the environment
// would let the sidecar run (the control at the end starts one with it).
// Without the apiserver (go test -short) the exit statuses and messages
// are checked all the same.
func TestUnknownArgumentsExitTwoAndStartNothing(t *testing.T) {
	env := []string{"PATH=" + os.Getenv("PATH"), "LEASEHOLD_LEASE_NAME=app", "POD_NAME=bogus", "POD_NAMESPACE=default",
		"LEASEHOLD_API_ADDR=" + freeAddr(t), "LEASEHOLD_OPS_ADDR=" + freeAddr(t)}
	var f fleet.Config
	if cluster != nil {
		f = newFleet(t)
		env = append(env, "KUBECONFIG="+cluster.Admin().Kubeconfig, "POD_NAMESPACE="+f.Namespace)
	}
	for _, args := range [][]string{
		{"bogus"}, {"--version2"}, {"-v"}, {"--leader"}, {""}, {"sidecar", "extra"}, {"sidecar", "x", "--help"},
		{"status", "extra"}, {"token", "--bogus"}, {"wait", "--timeout", "forever"}, {"release", "--for", "-1s"},
	} {
		r := leasehold(t, binary, env, args...)
		if r.code != 2 || !strings.Contains(r.stderr, "Run 'leasehold help") || r.stdout != "" {
			t.Errorf("leasehold %q: exit %d, stdout %q, stderr %q; want exit 2 and the hint to leasehold help on stderr", args, r.code, r.stdout, r.stderr)
		}
		if strings.Contains(r.stderr, "leasehold started") || r.took > 5*time.Second {
			t.Errorf("leasehold %q: took %v, stderr %q: it started the sidecar", args, r.took, r.stderr)
		}
	}
	if cluster == nil {
		return
	}
	leases := cluster.Clientset().CoordinationV1().Leases(f.Namespace)
	if _, err := leases.Get(t.Context(), "app", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Lease app after the usage errors: %v; want none: a candidate ran", err)
	}
	// Control: the same environment, with no arguments, is a candidate.
	// It is ready once it has found the Lease missing; the empty record it
	// creates then lands a round trip later.
	start(t, f, "control")
	var err error
	eventually(t, "Lease app with a sidecar running", func() bool {
		_, err = leases.Get(t.Context(), "app", metav1.GetOptions{})
		return err == nil
	}, func() string { return err.Error() })
}

// Help and version exit 0 from the built binary.
func TestHelpAndVersionOfTheBinary(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}, {"status", "--help"}, {"help", "wait"}, {"sidecar", "-h"}, {"release", "-h"}} {
		r := leasehold(t, binary, nil, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "usage: leasehold") || r.stderr != "" {
			t.Errorf("leasehold %q: exit %d, stdout %q, stderr %q; want 0 and the usage", args, r.code, r.stdout, r.stderr)
		}
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := leasehold(t, binary, nil, args...)
		// fleet stamps the binary with -X main.version=test.
		if r.code != 0 || !strings.HasPrefix(r.stdout, "leasehold test (") || strings.Count(r.stdout, "\n") != 1 {
			t.Errorf("leasehold %q: exit %d, stdout %q; want 0 and one line with the stamped version", args, r.code, r.stdout)
		}
	}
}

// A binary built without -X main.version reports what Go recorded: the
// module version (else "dev") and the VCS revision when there is one.
func TestUnstampedBinaryFallsBackToBuildInfo(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "leasehold")
	build := exec.CommandContext(t.Context(), "go", "build", "-trimpath", "-o", bin, "github.com/leasehold/leasehold/cmd/sidecar")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	want := "leasehold dev ("
	if v := info.Main.Version; v != "" && v != "(devel)" {
		want = "leasehold " + v + " ("
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" {
			want += "revision " + s.Value
		}
	}
	r := leasehold(t, bin, nil, "version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, want) {
		t.Errorf("version: exit %d, %q; want it to start %q", r.code, r.stdout, want)
	}
	t.Logf("unstamped: %s", strings.TrimSpace(r.stdout))
}

// With no sidecar listening, the client commands exit 3 at once and say
// where they looked.
func TestClientCommandsWithoutASidecar(t *testing.T) {
	addr := freeAddr(t)
	for _, args := range [][]string{{"status"}, {"token"}, {"release"}, {"wait", "--timeout", "300ms"}} {
		r := leasehold(t, binary, nil, append(args, "--addr", addr)...)
		if r.code != 3 || !strings.Contains(r.stderr, "no answer from the sidecar at http://"+addr) {
			t.Errorf("leasehold %q: exit %d, stderr %q; want 3 naming the address", args, r.code, r.stderr)
		}
	}
}

// status, token, wait and release against real sidecars: a leader a and a
// follower b. The commands find the sidecar through LEASEHOLD_API_ADDR, as
// `kubectl exec -c leasehold -- /leasehold status` does in the sidecar's
// own container, or through --addr.
func TestClientCommandsAgainstARealSidecar(t *testing.T) {
	f := newFleet(t)
	a, leading := startLeader(t, f, "a")
	b := start(t, f, "b")
	waitStatus(t, b, "b follows a", func(st api.Status) bool { return st.Holder == leading.Identity })
	inContainer := func(in *fleet.Instance) []string { return []string{"LEASEHOLD_API_ADDR=" + addrOf(in)} }

	// status: a table, or the API's JSON.
	r := leasehold(t, binary, inContainer(a), "status")
	if r.code != 0 || !strings.Contains(r.stdout, "\nleader         yes, valid for ") ||
		!strings.Contains(r.stdout, "\nholder         "+leading.Identity+" (this instance)\n") ||
		!strings.Contains(r.stdout, "lease          "+f.Namespace+"/app\n") {
		t.Errorf("status of the leader: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("leasehold status, in the leader's container:\n%s", r.stdout)
	r = leasehold(t, binary, nil, "status", "-o", "json", "--addr", addrOf(b))
	var st api.Status
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || r.code != 0 || st.Leader || st.Holder != leading.Identity || !strings.HasPrefix(st.Identity, "b_") {
		t.Errorf("status -o json of the follower: exit %d, %+v (%v)", r.code, st, err)
	}

	// token: the leader's, exit 0; the follower's, exit 1.
	r = leasehold(t, binary, inContainer(a), "token")
	if r.code != 0 || r.stdout != strconv.FormatUint(uint64(leading.FencingToken), 10)+"\n" {
		t.Errorf("token of the leader: exit %d, stdout %q, want %d", r.code, r.stdout, leading.FencingToken)
	}
	r = leasehold(t, binary, inContainer(b), "token")
	if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "not leader") {
		t.Errorf("token of the follower: exit %d, stdout %q, stderr %q; want 1, not leader", r.code, r.stdout, r.stderr)
	}

	// wait: the follower times out with exit 1: not before its timeout,
	// and not many times later (a wait that ignored its timeout would block
	// until the helper's limit, generous).
	r = leasehold(t, binary, inContainer(b), "wait", "--timeout", "500ms")
	if r.code != 1 || !strings.Contains(r.stderr, "not leading after 500ms (holder: "+leading.Identity+")") {
		t.Errorf("wait --timeout 500ms on the follower: exit %d, stderr %q; want 1", r.code, r.stderr)
	}
	if r.took < 500*time.Millisecond || r.took > 20*500*time.Millisecond {
		t.Errorf("wait --timeout 500ms took %v; want 500ms to 20 × that", r.took)
	}

	// A wait on the follower blocks in the sidecar (one open request)
	// until the leader releases; then it exits 0, leading with a larger token.
	waiting := exec.CommandContext(t.Context(), binary, "wait", "-o", "json", "--timeout", generous.String())
	waiting.Env = inContainer(b)
	var waitOut, waitErr bytes.Buffer
	waiting.Stdout, waiting.Stderr = &waitOut, &waitErr
	waiting.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := waiting.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- waiting.Wait() }()
	waitWatchers(t, b, 1)

	r = leasehold(t, binary, inContainer(a), "release", "--for", "1m")
	if r.code != 0 || r.stdout != "released the Lease "+f.Namespace+"/app; out of the election for 1m0s\n" {
		t.Errorf("release of the leader: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	released := time.Now()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("wait on the follower: %v, stderr %s", err, waitErr.String())
		}
	case <-time.After(generous):
		t.Fatal("wait on the follower did not return after the release")
	}
	if err := json.Unmarshal(waitOut.Bytes(), &st); err != nil || !st.Leader || st.FencingToken <= leading.FencingToken {
		t.Fatalf("wait on the follower printed %q (%v): want it leading with a token above %d", waitOut.String(), err, leading.FencingToken)
	}
	t.Logf("wait returned %v after the release exited, leading with token %d", time.Since(released).Round(time.Millisecond), st.FencingToken)

	// a is out of the election: no token, a wait times out, and a second
	// release is harmless.
	r = leasehold(t, binary, inContainer(a), "token")
	if r.code != 1 {
		t.Errorf("token of the released instance: exit %d, want 1", r.code)
	}
	r = leasehold(t, binary, inContainer(a), "status", "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.Leader || st.Candidate {
		t.Errorf("status of the released instance: %+v (%v): want neither leader nor candidate", st, err)
	}
	r = leasehold(t, binary, inContainer(a), "release")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "not holding the Lease") {
		t.Errorf("second release: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// A value the sidecar refuses is a usage error, with its message.
	r = leasehold(t, binary, inContainer(a), "release", "--for", "2h")
	if r.code != 2 || !strings.Contains(r.stderr, "400 Bad Request: invalid for") {
		t.Errorf("release --for 2h: exit %d, stderr %q; want 2 and the sidecar's message", r.code, r.stderr)
	}
}

// freeAddr is a loopback host:port where nothing listens (now).
func freeAddr(t *testing.T) string {
	t.Helper()
	port, err := kubetest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// With a lease group the client commands take --lease NAME; without it
// they exit 2 and say so.
func TestClientCommandsWithALeaseGroup(t *testing.T) {
	f := newFleet(t)
	f.Env = append(f.Env, "LEASEHOLD_SHARDS=2")
	a := start(t, f, "a")
	env := []string{"LEASEHOLD_API_ADDR=" + addrOf(a)}

	r := leasehold(t, binary, env, "status")
	if r.code != 2 || !strings.Contains(r.stderr, "--lease NAME") {
		t.Errorf("status without --lease: exit %d, stderr %q; want 2 and a hint at --lease", r.code, r.stderr)
	}
	// A lone member takes both shards a lease duration after it started
	// (they did not exist: each is created empty, then acquired).
	r = leasehold(t, binary, env, "wait", "--lease", "app-1", "--timeout", generous.String())
	if r.code != 0 || !strings.Contains(r.stdout, "leading: term") {
		t.Fatalf("wait --lease app-1: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = leasehold(t, binary, env, "status", "--lease", "app-1", "-o", "json")
	var st api.Status
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || r.code != 0 || st.Lease != "app-1" || !st.Leader {
		t.Fatalf("status --lease app-1: exit %d, %+v (%v)", r.code, st, err)
	}
	r = leasehold(t, binary, env, "token", "--lease", "app-1")
	if r.code != 0 || r.stdout != st.FencingToken.String()+"\n" {
		t.Errorf("token --lease app-1: exit %d, stdout %q, want %s", r.code, r.stdout, st.FencingToken)
	}
	r = leasehold(t, binary, env, "release", "--lease", "app-1", "--for", "10s")
	if r.code != 0 {
		t.Errorf("release --lease app-1: exit %d, stderr %q", r.code, r.stderr)
	}
	r = leasehold(t, binary, env, "token", "--lease", "app-1")
	if r.code != 1 {
		t.Errorf("token --lease app-1 after the release: exit %d, want 1 (not leader)", r.code)
	}
	r = leasehold(t, binary, env, "status", "--lease", "nope")
	if r.code != 3 || !strings.Contains(r.stderr, "unknown_lease") && !strings.Contains(r.stderr, "nope") {
		t.Errorf("status --lease nope: exit %d, stderr %q", r.code, r.stderr)
	}
}
