package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
)

// leaderLabel is the label key the leader-label trials use.
const leaderLabel = "leasehold.io/leader"

// errLabelsWrong: the labels did not become exactly right in time.
var errLabelsWrong = errors.New("labels not exactly right")

// labelTrials are what one kind of leader-label trial showed.
type labelTrials struct {
	kind     string
	lead     []time.Duration // signal → the successor's long-poll answers 200
	labelled []time.Duration // signal → the labels are exactly right
	lag      []time.Duration // labels exactly right − successor leads
	misses   int             // no successor within the bound
	wrong    int             // a successor led, but the labels were not exactly right within the bound
}

// benchLabel runs n handover trials (SIGTERM to the leader) and n failover
// trials (SIGKILL; the dead leader's stale true is the new leader's to
// clear), alternately, on three instances with LEASEHOLD_POD_LABEL, each
// with a Pod of its name (no kubelet runs: the Pods stay Pending). A trial
// times from the signal until the successor leads, and until the Pods'
// labels, as a Pod watch by the admin client sees them, are exactly right:
// the successor's true, every other Pod's false. The stopped leader is then
// restarted under the same name.
func benchLabel(ctx context.Context, cluster *kubetest.Cluster, base fleet.Config, n int) (handovers, failovers labelTrials, err error) {
	handovers, failovers = labelTrials{kind: "handover"}, labelTrials{kind: "failover"}
	ns, err := cluster.CreateNamespace(ctx, "bench-label")
	if err != nil {
		return handovers, failovers, err
	}
	core := cluster.Clientset().CoreV1()
	// No controller manager runs to create the default ServiceAccount, which
	// Pod admission looks up.
	if _, err := core.ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		return handovers, failovers, err
	}
	cfg := base
	cfg.Namespace, cfg.Lease = ns, "bench-label"
	cfg.Env = append(slices.Clone(base.Env), "LEASEHOLD_POD_LABEL="+leaderLabel)
	configs := map[string]fleet.Config{}
	for i := range 3 {
		name := fmt.Sprintf("pod-%d", i+1)
		if _, err := core.Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{
				AutomountServiceAccountToken: ptr.To(false),
				Containers:                   []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
			},
		}, metav1.CreateOptions{}); err != nil {
			return handovers, failovers, err
		}
		configs[name] = cfg
	}
	w := startLabelWatch(ctx, core.Pods(ns), leaderLabel)
	defer func() {
		if werr := w.stop(); err == nil {
			err = werr
		}
	}()
	bound := 3 * base.LeaseDuration
	g := newFixedGroup(configs, bound)
	defer g.stop()
	if err := g.startAll(ctx); err != nil {
		return handovers, failovers, err
	}
	for i := range 2 * n {
		trials, sig := &handovers, syscall.SIGTERM
		if i%2 == 1 {
			trials, sig = &failovers, syscall.SIGKILL
		}
		if err := labelTrial(ctx, g, w, trials, sig, i/2+1); err != nil {
			return handovers, failovers, fmt.Errorf("%s %d: %w", trials.kind, i/2+1, err)
		}
	}
	return handovers, failovers, nil
}

// labelTrial runs one trial: wait for a leader whose labels are exactly
// right, wait a random phase, send the leader sig, time the successor's
// leadership and the labels, and restart the old leader under its name.
func labelTrial(ctx context.Context, g *fixedGroup, w *labelWatch, t *labelTrials, sig syscall.Signal, trial int) error {
	leader, err := g.leader(ctx)
	if err != nil {
		return err
	}
	if _, err := w.await(ctx, g.bound, labelledFor(leader.Instance.Name)); err != nil {
		return fmt.Errorf("before the signal, leader %s: %w", leader.Instance.Name, err)
	}
	if err := sleepRandom(ctx, 2*g.configs[leader.Instance.Name].RetryPeriod); err != nil {
		return err
	}
	next, took, err := awaitFirst(ctx, g.others(leader.Instance), g.bound, func() error { return leader.Instance.Signal(sig) })
	switch {
	case errors.Is(err, fleet.ErrNoLeader) && ctx.Err() == nil:
		t.misses++
		fmt.Fprintf(os.Stderr, "bench: leader label: %s %2d: no successor within %v\n", t.kind, trial, g.bound)
	case err != nil:
		return err
	default:
		if err := checkSuccessor(leader, next); err != nil {
			return err
		}
		struck := next.At.Add(-took)
		labelled, err := w.await(ctx, g.bound, labelledFor(next.Instance.Name))
		switch {
		case errors.Is(err, errLabelsWrong):
			t.wrong++
			fmt.Fprintf(os.Stderr, "bench: leader label: %s %2d: %v after %s led\n", t.kind, trial, err, next.Instance.Name)
		case err != nil:
			return err
		default:
			t.lead = append(t.lead, took)
			t.labelled = append(t.labelled, labelled.Sub(struck))
			t.lag = append(t.lag, labelled.Sub(next.At))
			fmt.Fprintf(os.Stderr, "bench: leader label: %s %2d: leads %v, labelled %v, lag %v (%s → %s)\n", t.kind, trial,
				took.Round(time.Microsecond), labelled.Sub(struck).Round(time.Microsecond), labelled.Sub(next.At).Round(time.Microsecond),
				leader.Instance.Name, next.Instance.Name)
		}
	}
	select {
	case <-leader.Instance.Exited():
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.restart(ctx, leader.Instance.Name)
}

// labelledFor is the exactly-right condition for leader: three Pods, the
// leader's labelled true, the others false.
func labelledFor(leader string) func(map[string]string) bool {
	return func(values map[string]string) bool {
		if len(values) != 3 {
			return false
		}
		for name, v := range values {
			want := "false"
			if name == leader {
				want = "true"
			}
			if v != want {
				return false
			}
		}
		return true
	}
}
