package fleet

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/leasehold/leasehold/internal/kubetest"
)

// Main runs a test package of sidecar processes, for use in TestMain: it
// builds the sidecar into a temporary folder (not with -short, which runs
// no integration test), runs the tests against one kubetest Cluster, and
// removes the binary afterwards.
func Main(m *testing.M, cluster **kubetest.Cluster, binary *string) int {
	flag.Parse()
	if !testing.Short() {
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
	}
	return kubetest.Main(m, cluster)
}

// StartTest starts one sidecar for test t (no proxy), fails t if it cannot,
// and stops it when t ends.
func (c Config) StartTest(t testing.TB, name string) *Instance {
	t.Helper()
	inst, err := c.Start(t.Context(), name, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(inst.Stop)
	return inst
}
