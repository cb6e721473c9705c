// Package rank measures data-aware failover (LEASEHOLD_APP_RANK_URL) on a
// real kube-apiserver with real sidecar processes: who leads after a
// SIGKILL of the leader, and how long it takes, beside the rank-less
// default in the same run.
package rank

import (
	"os"
	"testing"

	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
)

var (
	cluster *kubetest.Cluster
	binary  string
)

func TestMain(m *testing.M) { os.Exit(fleet.Main(m, &cluster, &binary)) }
