package elect_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/internal/elect/decide"
	"github.com/leasehold/leasehold/internal/testing/poll"
)

// versionedLeases is a fake clientset for narrow tests on a fake clock. Its
// Lease reactors add what client-go's fake tracker lacks and these tests
// need: resourceVersions from a counter the test may set back (an etcd
// restored without --bump-revision), 409 on a stale precondition, and
// answers the test may lose (the write lands, the client times out). List
// and watch are refused, so the elector polls. The real-apiserver tests
// prove the apiserver's side of these rules.
type versionedLeases struct {
	cs *fake.Clientset

	mu       sync.Mutex
	rv       int64
	lose     int            // the next n updates land, but their answers are lost
	requests map[string]int // by verb
	acquires []time.Time    // when each update that names a holder other than the stored one was sent
}

var leasesGVR = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}

func newVersionedLeases(initial *coordinationv1.Lease) *versionedLeases {
	v := &versionedLeases{cs: fake.NewClientset(initial), rv: 1000, requests: map[string]int{}}
	v.cs.PrependReactor("*", "leases", v.react)
	return v
}

func (v *versionedLeases) react(a k8stesting.Action) (bool, runtime.Object, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.requests[a.GetVerb()]++
	switch a.GetVerb() {
	case "list", "watch":
		return true, nil, apierrors.NewForbidden(leasesGVR.GroupResource(), "", nil)
	case "create":
		obj := a.(k8stesting.CreateAction).GetObject().(*coordinationv1.Lease)
		v.rv++
		obj.ResourceVersion = strconv.FormatInt(v.rv, 10)
		return false, nil, nil // stamped; the tracker stores it
	case "update":
		obj := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		cur, err := v.cs.Tracker().Get(leasesGVR, obj.Namespace, obj.Name)
		if err != nil {
			return true, nil, err
		}
		if holder(obj) != "" && holder(obj) != holder(cur.(*coordinationv1.Lease)) {
			v.acquires = append(v.acquires, time.Now())
		}
		if cur.(*coordinationv1.Lease).ResourceVersion != obj.ResourceVersion {
			return true, nil, apierrors.NewConflict(leasesGVR.GroupResource(), obj.Name, nil)
		}
		v.rv++
		obj.ResourceVersion = strconv.FormatInt(v.rv, 10)
		if err := v.cs.Tracker().Update(leasesGVR, obj, obj.Namespace); err != nil {
			return true, nil, err
		}
		if v.lose > 0 {
			v.lose--
			return true, nil, context.DeadlineExceeded
		}
		return true, obj, nil
	}
	return false, nil, nil
}

// rollBack sets the revision counter back to rv and writes lease at the
// next revision, as an admin would on an etcd restored without
// --bump-revision.
func (v *versionedLeases) rollBack(rv int64, lease *coordinationv1.Lease) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.rv = rv + 1
	lease.ResourceVersion = strconv.FormatInt(v.rv, 10)
	if err := v.cs.Tracker().Update(leasesGVR, lease, lease.Namespace); err != nil {
		panic(err)
	}
}

func (v *versionedLeases) count(verb string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.requests[verb]
}

// awaitAcquires waits until n more acquires (updates that name a holder
// other than the stored one) have been sent since the call, and returns when
// each was sent, on this process's monotonic clock.
func (v *versionedLeases) awaitAcquires(t *testing.T, n int) []time.Time {
	t.Helper()
	v.mu.Lock()
	from := len(v.acquires)
	v.mu.Unlock()
	return awaitTimes(t, fmt.Sprintf("%d acquires", n), n, func() []time.Time {
		v.mu.Lock()
		defer v.mu.Unlock()
		return slices.Clone(v.acquires[from:])
	})
}

func (v *versionedLeases) loseNextUpdates(n int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.lose = n
}

// releasedLease is a Lease its last holder released: free at once.
func releasedLease() *coordinationv1.Lease {
	empty := ""
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "l", ResourceVersion: "900",
			Annotations: map[string]string{elect.ReleasedByAnnotation: "previous"},
		},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &empty, AcquireTime: &metav1.MicroTime{}},
	}
}

// runOnFake runs an elector "a" with the test timings (lease 3s, renew
// deadline 2s, retry 500ms) on v, on the real clock, until the test ends.
func runOnFake(t *testing.T, v *versionedLeases) *elect.Elector {
	t.Helper()
	return runUntilCleanup(t, elect.Config{
		Config: decide.Config{
			Namespace: "ns", Name: "l", Identity: "a",
			LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		},
		Leases: v.cs.CoordinationV1().Leases("ns"),
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
}

// waitElector polls e until cond holds (at most generous) and returns the
// time it took.
func waitElector(t *testing.T, e *elect.Elector, what string, cond func(*elect.Snapshot) bool) time.Duration {
	t.Helper()
	start := time.Now()
	var s *elect.Snapshot
	poll.UntilReport(t, generous, 5*time.Millisecond, what, func() bool {
		s = e.Snapshot()
		return cond(s)
	}, func() string { return fmt.Sprintf("snapshot %+v", *s) })
	return time.Since(start)
}

// testWriter sends log lines to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
