package fleet

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/leasehold/leasehold/internal/testing/kubetest"
)

// Main runs a test package of sidecar processes, for use in TestMain: it
// builds the sidecar into a temporary folder, runs the tests against one
// kubetest Cluster, and removes the binary afterwards. With -short it
// builds the binary all the same (cheap once the build cache is warm) but
// starts no cluster (*cluster stays nil: kubetest.Main), so that tests that
// need only the binary (exit statuses, usage errors) run as unit tests on a
// machine without the kube binaries, and those that need the apiserver skip
// (kubetest.Require). A failed build fails the package.
func Main(m *testing.M, cluster **kubetest.Cluster, binary *string) int {
	flag.Parse()
	dir, err := os.MkdirTemp("", "leasehold-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if *binary, err = Build(context.Background(), dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return kubetest.Main(m, cluster)
}

// StartTest starts one sidecar for test t (no proxy), fails t if it cannot,
// and stops it when t ends.
func (c Config) StartTest(t testing.TB, name string) *Instance {
	t.Helper()
	return c.StartTestVia(t, name, false)
}

// StartTestVia is StartTest, with the sidecar's apiserver traffic crossing
// its own Proxy (Instance.Proxy, which the test can cut) when viaProxy.
func (c Config) StartTestVia(t testing.TB, name string, viaProxy bool) *Instance {
	t.Helper()
	inst, err := c.Start(t.Context(), name, viaProxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(inst.Stop)
	return inst
}
