package e2e

import (
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
)

// Timings of every sidecar in the suite: short, so the suite stays fast, and
// valid (renewDeadline + retryPeriod < leaseDuration).
const (
	leaseDuration = 3 * time.Second
	renewDeadline = 2 * time.Second
	retryPeriod   = 500 * time.Millisecond

	instances = 3 // sidecar processes per scenario
)

// Fault parameters (durations of the faults themselves, never used to
// synchronise).
const (
	// outage is how long the apiserver stays down in the outage scenario:
	// ten lease durations, so that every term's validity runs out while it
	// is down and the sidecars must ride out a long outage without exiting.
	outage = 30 * time.Second
	// pause is how long the leader stays SIGSTOPped: longer than
	// leaseDuration, so the others must have taken over.
	pause = leaseDuration + time.Second
)

// generousWait is the slack a wait allows, beyond any bound the test judges
// (failsAfter), before giving up: for a precondition, or for an outcome the
// test judges otherwise; it never decides an outcome.
const generousWait = 30 * time.Second

// Documented recovery bounds.
const (
	// schedulingSlack allows for process scheduling on a shared, noisy
	// 2-core machine running the suite under -race, and for the observer's
	// sampling period.
	schedulingSlack = time.Second
	// failoverBound: a Lease nobody renews is taken once leaseDuration has
	// passed since its last renewal was observed, by a candidate that
	// watches (at once) or polls (within retryPeriod).
	failoverBound = leaseDuration + retryPeriod + schedulingSlack
	// handoverBound: a released Lease is taken within a round trip by a
	// watching candidate, within 1.2 × retryPeriod by a polling one.
	handoverBound = retryPeriod*6/5 + schedulingSlack
	// exitBound: a SIGTERMed sidecar releases within renewDeadline and
	// closes its servers within 2s more; generous for a loaded machine.
	exitBound = renewDeadline + 2*time.Second + schedulingSlack
	// freshBound: a fresh sidecar has read the Lease by the time it is
	// ready (/readyz) and takes a record nobody holds a lease duration after
	// it first observed it (for a missing Lease: the empty placeholder it
	// creates, one round trip later). Measured from its readiness.
	freshBound = leaseDuration + retryPeriod + schedulingSlack
	// staleBound: a candidate whose link heals learns the Lease's state by
	// its next poll (within 1.2 × retryPeriod, plus the request timeout of
	// max(retryPeriod, 1s) for a read sent just before the heal), and takes
	// an emptied or re-created record a lease duration after that.
	// Measured from the hand edit, which comes just before the heal.
	staleBound = max(retryPeriod, time.Second) + retryPeriod*6/5 + leaseDuration + schedulingSlack
)

// failsAfter is how long after a fault a recovery bounded by bound (an
// exit, a step-down, a Lease write, a new leader) may come before the suite
// fails it: twice the bound. The bounds are the product's promises plus a
// second of scheduling slack; on a shared, noisy 2-core machine running the
// suite under -race, scheduling alone can add more than that. Twice the
// bound is still several times the period each is made of (a retry period
// for a handover, a lease duration for a failover): a recovery that never
// comes, or that waits on a mechanism several periods long (a backoff cap,
// a chain of request timeouts, another term), fails. The exact timings are
// proven in simulated time (internal/elect/decide). A time over the bound
// but within twice it is logged and counted in the summary ("over bound").
func failsAfter(bound time.Duration) time.Duration { return 2 * bound }

// Scenario 15 (namespace missing) runs with timings of its own, so that
// the backoff's effect is plain: retryPeriod 1s, doubling up to
// min(leaseDuration, 4 × retryPeriod) = 4s.
const (
	nsLeaseDuration = 4 * time.Second
	nsRenewDeadline = 2 * time.Second
	nsRetryPeriod   = time.Second
	nsMaxBackoff    = 4 * time.Second
	// nsRefusals is how many refused Creates in a row (404: no namespace)
	// each sidecar is watched sending, after the first: spaced by the
	// backoff, they take at least 1s + 2s + 4s + 4s.
	nsRefusals = 4
	// nsBound: once the namespace exists, the next Create (within the
	// backoff cap) makes the placeholder, which is taken a lease duration
	// after it was observed, by a watching candidate at once, by a polling
	// one within retryPeriod.
	nsBound = nsMaxBackoff + nsLeaseDuration + nsRetryPeriod + schedulingSlack
)

var (
	soak = flag.Int("soak", 1, "run each scenario this many times (make e2e-soak); a summary is printed at the end")
	// sidecarFlag runs the suite against another build of the sidecar, e.g.
	// one from before a fix, to show what a scenario catches.
	sidecarFlag = flag.String("sidecar", "", "run this sidecar binary instead of the one built from cmd/sidecar")

	cluster *kubetest.Cluster
	binary  string
)

// sidecarBinary is the binary the trials start: -sidecar if given, else
// the one fleet.Main built from this tree.
func sidecarBinary() string {
	if *sidecarFlag != "" {
		return *sidecarFlag
	}
	return binary
}

func TestMain(m *testing.M) {
	flag.Parse()
	if *soak < 1 {
		fmt.Fprintln(os.Stderr, "e2e: -soak must be at least 1")
		os.Exit(2)
	}
	code := fleet.Main(m, &cluster, &binary)
	if *sidecarFlag != "" {
		fmt.Printf("e2e: ran the sidecar binary %s (-sidecar), not this tree's\n", *sidecarFlag)
	}
	printSummary(os.Stdout)
	// Every observer, sampler and process waiter has a visible end.
	// Connections kept alive by shared HTTP transports are not ours.
	os.Exit(kubetest.LeakCheck(code))
}
