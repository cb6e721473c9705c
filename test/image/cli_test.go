package image_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
)

// execImageBinary runs the image's binary with args, with exactly the environment
// env, from /, as uid/gid 65532 when the test runs as root (as
// `kubectl exec -c leasehold -- /leasehold ...` does in the image: no
// shell, no HOME, the container's environment).
func execImageBinary(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), generous)
	defer cancel()
	bin := binary
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() == 0 {
		// A copy that uid 65532 may run, in a folder it may not write.
		dir, err := os.MkdirTemp("", "leasehold-cli-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		bin = dir + "/leasehold"
		copyFile(t, binary, bin, 0o555)
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		attr.Credential = &syscall.Credential{Uid: nonroot, Gid: nonroot, Groups: []uint32{}}
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env, cmd.Dir = env, "/"
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.SysProcAttr = attr
	err := cmd.Run()
	if exit, ok := err.(*exec.ExitError); ok {
		return exit.ExitCode(), out.String(), errOut.String()
	} else if err != nil {
		t.Fatalf("%s %q: %v", binary, args, err)
	}
	return 0, out.String(), errOut.String()
}

// The image's binary reports the version the Dockerfile stamps.
func TestImageBinaryReportsItsVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, stdout, _ := execImageBinary(t, nil, args...)
		if code != 0 || !strings.HasPrefix(stdout, "leasehold "+version+" (") {
			t.Errorf("%q: exit %d, %q; want 0 and leasehold %s", args, code, stdout, version)
		}
	}
}

// In the image, with nothing but the binary: `kubectl exec -c leasehold --
// /leasehold status` (and token) ask the sidecar in the same container,
// found through the container's LEASEHOLD_API_ADDR.
func TestImageBinaryAsksItsSidecar(t *testing.T) {
	kubetest.Require(t, cluster)
	ns, err := cluster.CreateNamespace(t.Context(), "image-cli")
	if err != nil {
		t.Fatal(err)
	}
	f := fleet.Config{Binary: binary, Cluster: cluster, Namespace: ns, Lease: "image-cli",
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond, Dir: t.TempDir()}
	in := f.StartTest(t, "pod")
	_, st, err := fleet.WaitLeader(t.Context(), []*fleet.Instance{in}, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"LEASEHOLD_API_ADDR=" + strings.TrimPrefix(in.APIURL, "http://")}
	code, stdout, stderr := execImageBinary(t, env, "status")
	if code != 0 || !strings.Contains(stdout, "\nleader         yes, valid for ") || !strings.Contains(stdout, "\nidentity       "+st.Identity+"\n") {
		t.Errorf("status: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, stderr = execImageBinary(t, env, "token")
	if code != 0 || stdout != strconv.FormatUint(uint64(st.FencingToken), 10)+"\n" {
		t.Errorf("token: exit %d, stdout %q, stderr %q; want %d", code, stdout, stderr, st.FencingToken)
	}
}
