package podlabel

import (
	"os"
	"testing"

	"github.com/leasehold/leasehold/internal/testing/kubetest"
)

var cluster *kubetest.Cluster

// TestMain runs the tests against one real apiserver, then checks that no
// goroutine outlived its test: every Run, Elector and Proxy has an end.
// Connections that client-go's shared transports keep alive are ignored.
func TestMain(m *testing.M) {
	os.Exit(kubetest.LeakCheck(kubetest.Main(m, &cluster)))
}
