package main_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	sidecar "github.com/leasehold/leasehold/cmd/sidecar"
	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
	"github.com/leasehold/leasehold/pkg/api"
)

var (
	cluster *kubetest.Cluster
	binary  string
)

func TestMain(m *testing.M) {
	sidecar.SharedCluster = &cluster // for the in-process tests (package main)
	os.Exit(fleet.Main(m, &cluster, &binary))
}

const (
	leaseDuration = 3 * time.Second
	renewDeadline = 2 * time.Second
	retryPeriod   = 500 * time.Millisecond
)

func newFleet(t *testing.T) fleet.Config {
	t.Helper()
	ns, err := kubetest.Require(t, cluster).CreateNamespace(t.Context(), "sidecar")
	if err != nil {
		t.Fatal(err)
	}
	return fleet.Config{
		Binary: binary, Cluster: cluster, Namespace: ns, Lease: "app",
		LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		Dir: t.TempDir(),
	}
}

func start(t testing.TB, f fleet.Config, name string) *fleet.Instance {
	t.Helper()
	return f.StartTest(t, name)
}

// startLeader starts a lone instance and waits until it leads.
func startLeader(t *testing.T, f fleet.Config, name string) (*fleet.Instance, api.Status) {
	t.Helper()
	in := start(t, f, name)
	_, st, err := fleet.WaitLeader(t.Context(), []*fleet.Instance{in}, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	return in, st
}

// Bad configuration stops the process at start: exit status 2 and one line
// that names the variable and the rule.
func TestBadConfigurationExitsTwoNamingTheVariable(t *testing.T) {
	for variable, value := range map[string]string{
		"LEASEHOLD_LEASE_DURATION": "1500ms",
		"LEASEHOLD_RENEW_DEADLINE": "14s",
		"LEASEHOLD_LEASE_NAME":     "Not_A_Name",
		"LEASEHOLD_API_ADDR":       "localhost",
		"LEASEHOLD_LEASES":         "scheduler,compactor", // with LEASEHOLD_LEASE_NAME: exit 2, naming both
		"LEASEHOLD_SHARDS":         "0",
	} {
		t.Run(variable, func(t *testing.T) {
			cmd := exec.Command(binary)
			cmd.Env = []string{"LEASEHOLD_LEASE_NAME=app", "POD_NAMESPACE=default", variable + "=" + value}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 2 {
				t.Fatalf("exit: %v, want status 2", err)
			}
			out := strings.TrimSpace(stderr.String())
			if strings.Count(out, "\n") != 0 || !strings.Contains(out, variable) {
				t.Fatalf("stderr %q: want one line naming %s", out, variable)
			}
			if variable == "LEASEHOLD_LEASES" && !strings.Contains(out, "LEASEHOLD_LEASE_NAME") {
				t.Fatalf("stderr %q: want it to name LEASEHOLD_LEASE_NAME too", out)
			}
		})
	}
}

// SIGTERM to the leader: it releases the Lease (the first write of the
// Lease after SIGTERM that does not name it is its own signed release, not
// the successor's acquire of an expired record) and exits 0; the other
// instance then takes over with a larger token. The exit is bounded by
// exitBound.
func TestSIGTERMReleasesAndExitsZero(t *testing.T) {
	f := newFleet(t)
	a := start(t, f, "a")
	b := start(t, f, "b")
	instances := []*fleet.Instance{a, b}
	leader, before, err := fleet.WaitLeader(t.Context(), instances, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	other := a
	if leader == a {
		other = b
	}

	writes := watchLease(t, f.Namespace, "app")
	took := terminate(t, leader)
	if code := leader.ExitCode(); code != 0 {
		t.Fatalf("exit status %d after SIGTERM, want 0", code)
	}
	release := writes.next(t, "a write that does not name the leader", func(l *coordinationv1.Lease) bool { return holderOf(l) != before.Identity })
	if holderOf(release) != "" || release.Annotations[elect.ReleasedByAnnotation] != before.Identity {
		t.Errorf("first write after SIGTERM not naming the leader: holder %q, %s %q; want the leader's own release",
			holderOf(release), elect.ReleasedByAnnotation, release.Annotations[elect.ReleasedByAnnotation])
	}

	_, after, err := fleet.WaitLeader(t.Context(), []*fleet.Instance{other}, 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if after.FencingToken <= before.FencingToken {
		t.Errorf("successor token %d not above %d", after.FencingToken, before.FencingToken)
	}
	t.Logf("exit after SIGTERM: %v; successor leads with token %d (was %d)", took, after.FencingToken, before.FencingToken)

	lease, err := cluster.Clientset().CoordinationV1().Leases(f.Namespace).Get(t.Context(), "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := *lease.Spec.HolderIdentity; h != after.Identity {
		t.Errorf("holder %q, want the successor %q", h, after.Identity)
	}
}

// exitBound bounds a sidecar's exit after SIGTERM. The sidecar bounds its
// release on shutdown by renewDeadline plus two request timeouts (4s here)
// even when the apiserver does not answer; a healthy exit takes
// milliseconds. Several times the period involved, so that only a sidecar
// stuck in its shutdown, not a loaded machine, exceeds it.
const exitBound = 5 * renewDeadline

// terminate sends in SIGTERM and waits at most exitBound for it to exit;
// it returns how long the exit took.
func terminate(t *testing.T, in *fleet.Instance) time.Duration {
	t.Helper()
	took, err := in.Terminate(exitBound)
	if err != nil {
		t.Fatal(err)
	}
	return took
}

// leaseWrites are the writes of one Lease from the moment watchLease was
// called on, in the order etcd made them.
type leaseWrites struct{ events <-chan watch.Event }

// watchLease watches the Lease name in namespace ns from its current
// version on, until the test ends.
func watchLease(t *testing.T, ns, name string) *leaseWrites {
	t.Helper()
	leases := cluster.Clientset().CoordinationV1().Leases(ns)
	current, err := leases.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := leases.Watch(t.Context(), metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
		ResourceVersion: current.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return &leaseWrites{events: w.ResultChan()}
}

// next returns the next write for which match holds, the ones before it
// passed over; it gives up after generous.
func (lw *leaseWrites) next(t *testing.T, what string, match func(*coordinationv1.Lease) bool) *coordinationv1.Lease {
	t.Helper()
	timeout := time.After(generous)
	for {
		select {
		case ev, ok := <-lw.events:
			if !ok {
				t.Fatalf("the watch of the Lease closed before %s", what)
			}
			if l, isLease := ev.Object.(*coordinationv1.Lease); isLease && ev.Type != watch.Deleted && match(l) {
				return l
			}
		case <-timeout:
			t.Fatalf("no %s within %v", what, generous)
		}
	}
}

func holderOf(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// The identity defaults to POD_NAME plus a per-process random suffix, so a
// restarted pod with the same name is a new candidate.
func TestIdentityIsPodNamePlusPerProcessSuffix(t *testing.T) {
	f := newFleet(t)
	first := start(t, f, "pod")
	st1, err := first.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	first.Stop()
	second := start(t, f, "pod")
	st2, err := second.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(st1.Identity, "pod_") || !strings.HasPrefix(st2.Identity, "pod_") || st1.Identity == st2.Identity {
		t.Errorf("identities %q and %q: want pod_<suffix>, different per process", st1.Identity, st2.Identity)
	}
}

// An observer (LEASEHOLD_CANDIDATE=false) of one Lease follows the leader,
// reports its holder and token, and never takes the Lease, even after the
// leader has gone and released it.
func TestObserverNeverCampaigns(t *testing.T) {
	f := newFleet(t)
	leader, st := startLeader(t, f, "leader")
	obsFleet := f
	obsFleet.Env = append(slices.Clone(f.Env), "LEASEHOLD_CANDIDATE=false")
	obs := start(t, obsFleet, "observer")
	var got api.Status
	var err error
	eventually(t, fmt.Sprintf("the observer reports holder %q, token %d, candidate false", st.Holder, st.FencingToken), func() bool {
		got, err = obs.Status(t.Context())
		return err == nil && got.Holder == st.Holder && got.FencingToken == st.FencingToken && !got.Candidate && !got.Leader
	}, func() string { return fmt.Sprintf("observer's status %+v (err %v)", got, err) })
	stopGracefully(t, leader) // releases the Lease: a candidate would take it at once
	// The observer reports the free Lease: the step where a candidate sends
	// its acquire has run. Then a new candidate starts and takes the Lease,
	// which its process start, list and watch make far longer than the
	// observer's own acquire would have taken; once the observer reports the
	// new holder, the Lease was free to it all that while, and a write of
	// its own would have been answered (and counted) by then.
	observe := func(what string, ok func(api.Status) bool) {
		t.Helper()
		eventually(t, "the observer reported "+what, func() bool {
			got, err = obs.Status(t.Context())
			if err == nil && (got.Leader || got.Holder == got.Identity) {
				t.Fatalf("the observer took the Lease: %+v", got)
			}
			return err == nil && ok(got)
		}, func() string { return fmt.Sprintf("%+v (err %v)", got, err) })
	}
	observe("the released Lease", func(got api.Status) bool { return got.Holder == "" })
	start(t, f, "late")
	observe("the new holder", func(got api.Status) bool { return strings.HasPrefix(got.Holder, "late_") })
	m, err := obs.Metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"create", "update", "patch", "delete"} {
		if n := m.Sum("leasehold_kube_requests_total", map[string]string{"verb": verb}); n != 0 {
			t.Errorf("the observer sent %v %s requests; an observer never writes", n, verb)
		}
	}
}

// stopGracefully sends SIGTERM and waits until the process has exited.
func stopGracefully(t *testing.T, in *fleet.Instance) {
	t.Helper()
	if err := in.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-in.Exited():
	case <-time.After(20 * time.Second):
		t.Fatal("still running 20s after SIGTERM")
	}
}
