package examples_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
)

// imageBinary is where the image puts leasehold: the Dockerfile's
// ENTRYPOINT (exec form, the binary alone). Exec hooks in its container
// name it so.
func imageBinary(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var entrypoint []string
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "ENTRYPOINT "); ok {
			entrypoint = nil
			if err := json.Unmarshal([]byte(rest), &entrypoint); err != nil {
				t.Fatalf("Dockerfile ENTRYPOINT %s: %v", rest, err)
			}
		}
	}
	if len(entrypoint) != 1 {
		t.Fatalf("Dockerfile ENTRYPOINT %q: want the binary alone", entrypoint)
	}
	return entrypoint[0]
}

// The pre-1.29 manifest's preStop hook is on the leasehold container
// itself, runs the image's own binary (the app image needs no curl), and
// does what its comment says, run exactly as written against a real
// sidecar: the leader steps down and releases at once (a peer takes over
// with a larger token), stays out of the election, and a second run of the
// hook (the kubelet may retry it) also exits 0; SIGTERM then finds nothing
// to release and exits 0.
func TestPreStopManifestReleasesWithTheImagesBinary(t *testing.T) {
	data, err := os.ReadFile("manifests/deployment-prestop.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict(data, &d); err != nil {
		t.Fatal(err)
	}
	var hook []string
	var hookEnv []corev1.EnvVar
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
			continue
		}
		if c.Name != "leasehold" {
			t.Errorf("container %s has a preStop hook: the hook belongs on the leasehold container", c.Name)
			continue
		}
		if c.Lifecycle.PreStop.Exec == nil {
			t.Fatalf("leasehold's preStop hook is not exec: %+v", c.Lifecycle.PreStop)
		}
		hook, hookEnv = c.Lifecycle.PreStop.Exec.Command, c.Env
	}
	if bin := imageBinary(t); len(hook) < 2 || hook[0] != bin || hook[1] != "release" {
		t.Fatalf("leasehold's preStop hook %q: want [%s release ...] (the image's binary)", hook, bin)
	}
	if slices.ContainsFunc(hookEnv, func(e corev1.EnvVar) bool { return e.Name == "LEASEHOLD_API_ADDR" }) {
		t.Fatal("the manifest sets LEASEHOLD_API_ADDR: the test below assumes the default")
	}

	kubetest.Require(t, cluster)
	ns, err := cluster.CreateNamespace(t.Context(), "prestop")
	if err != nil {
		t.Fatal(err)
	}
	f := fleet.Config{
		Binary: sidecar, Cluster: cluster, Namespace: ns, Lease: leaseName,
		LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		Dir: t.TempDir(),
	}
	a := f.StartTest(t, "a")
	first := awaitLeadership(t, a)
	b := f.StartTest(t, "b")

	// In the pod, the hook runs in leasehold's container: the sidecar's
	// own environment, where the default LEASEHOLD_API_ADDR is the
	// address both use; here each sidecar has a port of its own.
	runHook := func() (code int, stdout, stderr string) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, sidecar, hook[1:]...)
		cmd.Env = []string{"LEASEHOLD_API_ADDR=" + strings.TrimPrefix(a.APIURL, "http://")}
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		err := cmd.Run()
		if exit, ok := err.(*exec.ExitError); ok {
			return exit.ExitCode(), out.String(), errOut.String()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, out.String(), errOut.String()
	}
	code, stdout, stderr := runHook()
	if code != 0 || !strings.HasPrefix(stdout, "released the Lease "+ns+"/"+leaseName) {
		t.Fatalf("the hook: exit %d, stdout %q, stderr %q; want 0, released", code, stdout, stderr)
	}
	if st, err := a.Status(t.Context()); err != nil || st.Leader || st.Candidate {
		t.Errorf("a after the hook: %+v, %v; want neither leader nor candidate", st, err)
	}
	second := awaitLeadership(t, b)
	if second.Status.FencingToken <= first.Status.FencingToken {
		t.Errorf("b leads with token %d, not above a's %d", second.Status.FencingToken, first.Status.FencingToken)
	}
	if code, stdout, stderr := runHook(); code != 0 || !strings.HasPrefix(stdout, "not holding the Lease") {
		t.Errorf("the hook again: exit %d, stdout %q, stderr %q; want 0, nothing to release", code, stdout, stderr)
	}

	// Then the kubelet sends SIGTERM: a exits 0 and b keeps leading.
	if err := a.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("a still runs 10s after SIGTERM")
	}
	if a.ExitCode() != 0 {
		t.Errorf("a exited %d after SIGTERM, want 0", a.ExitCode())
	}
	if st, err := b.Status(t.Context()); err != nil || !st.Leader || st.FencingToken != second.Status.FencingToken {
		t.Errorf("b after a's SIGTERM: %+v, %v; want still leading the same term", st, err)
	}
}
