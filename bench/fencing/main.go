// Command fencing measures what the fencing policy (leasehold
// fencing-policy) costs the apiserver's writes: on one real kube-apiserver
// (internal/testing/kubetest), -updates updates of a fenced ConfigMap in a
// namespace with the policy for its Lease, interleaved one for one with
// updates of the same ConfigMap in a namespace without a policy, each timed
// by the client from send to answer. It prints the p50 and p99 of both
// and their ratios, one run, as docs/benchmarks.md renders them, and with
// -out writes them to that document's fencing.json (bench/benchdoc) and
// renders the document again (`make bench-fencing`).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/leasehold/leasehold/bench/benchdoc"
	"github.com/leasehold/leasehold/internal/fence"
	"github.com/leasehold/leasehold/internal/fencepolicy"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
)

func main() {
	updates := flag.Int("updates", 2000, "updates timed on each side")
	out := flag.String("out", "", "also write the figures to <out without .md>/fencing.json, then render out from every section file there")
	flag.Parse()
	if *updates < 100 {
		fmt.Fprintln(os.Stderr, "fencing: -updates must be at least 100 (p99 needs them)")
		os.Exit(2)
	}
	command := "cd bench && go run ./fencing " + strings.Join(os.Args[1:], " ")
	if err := run(*updates, command, *out); err != nil {
		fmt.Fprintln(os.Stderr, "fencing:", err)
		os.Exit(1)
	}
}

func run(updates int, command, out string) (err error) {
	ctx := context.Background()
	c, err := kubetest.Start(ctx, kubetest.Options{})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, c.Stop()) }()
	cs := c.Clientset()
	fenced, err := setUp(ctx, c, true)
	if err != nil {
		return err
	}
	plain, err := setUp(ctx, c, false)
	if err != nil {
		return err
	}
	// Warm up both paths (connections, caches), then time them in turn.
	var with, without []time.Duration
	for i := range updates + 100 {
		for _, side := range []struct {
			ns  string
			out *[]time.Duration
		}{{fenced, &with}, {plain, &without}} {
			cm := configMap(side.ns, i)
			start := time.Now()
			if _, err := cs.CoreV1().ConfigMaps(side.ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("update in %s: %w", side.ns, err)
			}
			if i >= 100 {
				*side.out = append(*side.out, time.Since(start))
			}
		}
	}
	// The policy really refused: a stale write is refused in the fenced
	// namespace (else the figures measure nothing).
	stale := configMap(fenced, 0)
	stale.Annotations[fencepolicy.TokenAnnotation] = "1"
	if _, err := cs.CoreV1().ConfigMaps(fenced).Update(ctx, stale, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), "leasehold fencing rule") {
		return fmt.Errorf("a stale write in the fenced namespace: %v; want refused by the policy", err)
	}
	f := &benchdoc.Fencing{
		Run: benchdoc.NewRun(command), Updates: updates,
		With: benchdoc.NewDist(with, roundMicro), Without: benchdoc.NewDist(without, roundMicro),
	}
	if out != "" {
		dir := benchdoc.DataDir(out)
		if err := benchdoc.Write(dir, "fencing", f); err != nil {
			return err
		}
		if err := benchdoc.RenderFile(dir, out); err != nil {
			return err
		}
	}
	md, err := benchdoc.Render(benchdoc.Doc{Fencing: f})
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(md)
	return err
}

// roundMicro rounds to the microsecond: updates take milliseconds.
func roundMicro(d time.Duration) time.Duration { return d.Round(time.Microsecond) }

// token is the token the fenced ConfigMap is written with, and the Lease
// publishes.
const token fence.Token = 1000

// setUp makes a namespace with the Lease and the ConfigMap, and with
// withPolicy the fencing policy for them, enforced when it returns.
func setUp(ctx context.Context, c *kubetest.Cluster, withPolicy bool) (string, error) {
	cs := c.Clientset()
	ns, err := c.CreateNamespace(ctx, "bench-fencing")
	if err != nil {
		return "", err
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "leader", Namespace: ns, Annotations: map[string]string{fence.Annotation: token.String()}}}
	if _, err := cs.CoordinationV1().Leases(ns).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, -1), metav1.CreateOptions{}); err != nil {
		return "", err
	}
	if !withPolicy {
		return ns, nil
	}
	policy, binding := fencepolicy.Objects(fencepolicy.Options{Lease: "leader", Namespace: ns, Resources: fencepolicy.DefaultResources})
	adm := cs.AdmissionregistrationV1()
	if _, err := adm.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	if _, err := adm.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	return ns, enforced(ctx, cs, ns)
}

// enforced waits until the policy refuses an unstamped write in ns.
func enforced(ctx context.Context, cs kubernetes.Interface, ns string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		cm := configMap(ns, 0)
		delete(cm.Annotations, fencepolicy.TokenAnnotation)
		_, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), "leasehold fencing rule") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the policy not enforced in %s within a minute (last: %v)", ns, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// configMap is the fenced ConfigMap of ns at write i (unconditional
// updates: no resourceVersion).
func configMap(ns string, i int) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: "state", Namespace: ns,
			Labels:      map[string]string{fencepolicy.FencedByLabel: "leader"},
			Annotations: map[string]string{fencepolicy.TokenAnnotation: token.String()},
		},
		Data: map[string]string{"primary": fmt.Sprint(i)},
	}
}
