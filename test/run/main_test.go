package run

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
)

// Timings of every sidecar here: short, as in test/e2e. grace is the
// runner's SIGTERM-to-SIGKILL time; startDelay, longer, is how long a term
// must be seen before its command starts, which is what keeps a new run
// from overlapping one stopped at a handover.
const (
	leaseDuration = 3 * time.Second
	renewDeadline = 2 * time.Second
	retryPeriod   = 500 * time.Millisecond
	grace         = 600 * time.Millisecond
	startDelay    = time.Second

	// slack allows for scheduling on a shared, loaded 2-core machine in
	// bounds on when a command stops.
	slack = time.Second
	// generous bounds waits for things that must happen; it never decides
	// an outcome.
	generous = 30 * time.Second
)

var (
	cluster *kubetest.Cluster
	binary  string // the leasehold binary: sidecar, `run` and `install`
	beater  string // test/run/beater
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	flag.Parse()
	if !testing.Short() {
		dir, err := os.MkdirTemp("", "leasehold-beater-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		if beater, err = fleet.BuildCommand(context.Background(), dir, "github.com/leasehold/leasehold/test/run/beater"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	// Every sampler and process waiter has a visible end.
	return kubetest.LeakCheck(fleet.Main(m, &cluster, &binary))
}
