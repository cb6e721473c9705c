package kubetest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
)

// Main runs a test package's tests against one shared Cluster, for use in
// TestMain:
//
//	var cluster *kubetest.Cluster
//	func TestMain(m *testing.M) { os.Exit(kubetest.Main(m, &cluster)) }
//
// With `go test -short` no cluster is started and *cluster stays nil; tests
// that need it call Require to skip. Otherwise a cluster that fails to start
// fails the whole package: integration tests are never skipped silently.
func Main(m *testing.M, cluster **Cluster) int {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	c, err := Start(context.Background(), Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubetest:", err)
		return 1
	}
	*cluster = c
	code := m.Run()
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "kubetest: stop:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Require skips t when the package runs without a cluster (go test -short).
func Require(t testing.TB, c *Cluster) *Cluster {
	t.Helper()
	if c == nil {
		t.Skip("integration test: needs the real apiserver (run without -short)")
	}
	return c
}
