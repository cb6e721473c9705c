package examples_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/leasehold/leasehold/internal/fencepolicy"
	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
	"github.com/leasehold/leasehold/internal/testing/poll"
)

const (
	controlPlaneLease = "control-plane"
	primaryConfigMap  = "current-primary" // the example's default
	// resync is how often the example's leader re-asserts its choice:
	// short, so that the paused leader's next write comes soon.
	resync = 200 * time.Millisecond
)

// TestControlPlane runs the control-plane example (control-plane/main.go)
// as two replicas, a and b, each next to its own sidecar (with
// LEASEHOLD_FENCING_FLOOR), and plays the scenario of the design notes: a
// leader paused between its "am I leader?" check and its write.
//
//  1. a leads and records itself as the primary in the fenced ConfigMap.
//  2. a's app stops itself (SIGSTOP) after the check of its next write
//     (PAUSE_BEFORE_WRITE=2), with a valid token; the test then pauses
//     a's sidecar too: the whole pod is paused.
//  3. b's sidecar takes over once a's Lease has expired, and b's app
//     records b with its larger token.
//  4. a's app resumes (SIGCONT) and sends the write it had checked, with
//     its old token, blind (a server-side apply, no resourceVersion).
//
// With the policy that `leasehold fencing-policy` prints installed, the
// apiserver refuses that write (403, rule 2: b's token is on the stored
// object), a's app stops, and the ConfigMap still names b with b's token,
// also once a's sidecar has resumed and follows b. When b's app has not
// written (it is not started), the write is refused all the same, by rule
// 3 (the Lease shows b's term, from its acquiring write's floor on), and
// the ConfigMap keeps a's first write. Without the policy the same write
// lands: the refusal is the policy's doing, not the app's nor the
// sidecar's.
//
// The policies stay installed until the whole test ends: on the
// apiserver, removing the last binding whose paramKind is Lease stops its
// Lease informer for good, and rule 3 then reads any Lease that informer
// held, frozen (kubernetes/kubernetes#130887); a variant whose Lease was
// created just before would see no new term.
func TestControlPlane(t *testing.T) {
	kubetest.Require(t, cluster)
	bin, err := fleet.BuildCommand(t.Context(), t.TempDir(), "./control-plane")
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range []pausedLeader{
		{name: "fenced, the successor has written", fenced: true, successorWrites: true},
		{name: "fenced, the successor has not written", fenced: true},
		{name: "without the policy, the paused leader's write lands", successorWrites: true},
	} {
		t.Run(sc.name, func(st *testing.T) { sc.play(st, t, bin) })
	}
}

// pausedLeader is one variant of TestControlPlane's scenario.
type pausedLeader struct {
	name string
	// fenced installs the policy; successorWrites starts b's app.
	fenced, successorWrites bool
}

// play runs the variant in t; parent removes the policy when it ends.
func (sc pausedLeader) play(t, parent *testing.T, bin string) {
	ctx := t.Context()
	ns, err := cluster.CreateNamespace(ctx, "control-plane")
	if err != nil {
		t.Fatal(err)
	}
	f := fleet.Config{
		Binary: sidecar, Cluster: cluster, Namespace: ns, Lease: controlPlaneLease,
		LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		Env: []string{"LEASEHOLD_FENCING_FLOOR=true"}, Dir: t.TempDir(),
	}
	a := startSidecar(t, f, "a")
	first := awaitLeadership(t, a) // a leads: its sidecar has created the Lease, the policy's parameter
	if sc.fenced {
		applyPrintedFencingPolicy(t, parent, ns)
	}
	b := startSidecar(t, f, "b")

	// The app may create and patch ConfigMaps (server-side apply), nothing else.
	user, err := cluster.UserWithRole(ctx, ns, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "control-plane"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "patch"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"POD_NAMESPACE=" + ns, "LEASEHOLD_LEASE_NAME=" + controlPlaneLease, "KUBECONFIG=" + user.Kubeconfig, "RESYNC=" + resync.String()}
	appA := startWorker(t, []string{bin}, a.APIURL, "", "a", append(env, "PAUSE_BEFORE_WRITE=2")...)
	if sc.successorWrites {
		startWorker(t, []string{bin}, b.APIURL, "", "b", env...)
	}

	// 1. a records itself, with its token.
	token1 := first.Status.FencingToken
	recorded := awaitPrimary(t, ns, "a", token1.String())

	// 2. a's app has checked for its second write and stopped itself;
	// a's sidecar is paused with it.
	poll.Until(t, generous, 5*time.Millisecond, "a's app stopped before its second write", func() bool {
		return processStopped(t, appA.cmd.Process.Pid)
	})
	if !strings.Contains(readLog(t, appA), "pausing before write 2, with token "+token1.String()) {
		t.Fatalf("a's app paused without a checked write of token %d:\n%s", token1, readLog(t, appA))
	}
	if err := a.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}

	// 3. b takes over and, with its app, records itself with its larger
	// token; without, the test waits until admission sees b's term.
	second := awaitLeadership(t, b)
	token2 := second.Status.FencingToken
	if token2 <= token1 {
		t.Fatalf("b's token %d is not above a's %d", token2, token1)
	}
	want, wantRule := "b", "rule 2 "
	if sc.successorWrites {
		recorded = awaitPrimary(t, ns, "b", token2.String())
	} else {
		want, wantRule = "a", "rule 3 "
		if sc.fenced {
			awaitTermAdmitted(t, ns)
		}
	}

	// 4. a's app resumes and sends its write with the old token.
	if err := appA.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var outcome string
	poll.Until(t, generous, 5*time.Millisecond, "a's write after the pause answered", func() bool {
		outcome = afterPause(readLog(t, appA))
		return outcome != ""
	})
	if !sc.fenced {
		if !strings.HasPrefix(outcome, "recorded primary=a") || !strings.Contains(outcome, "with token "+token1.String()) {
			t.Fatalf("without the policy, a's write after the pause: %q; want it recorded with token %d (the split brain the policy prevents)", outcome, token1)
		}
		t.Logf("without the policy, the paused leader's write with token %d landed over b's %d: %s", token1, token2, outcome)
		return
	}
	if !strings.HasPrefix(outcome, "refused:") || !strings.Contains(outcome, "leasehold fencing "+wantRule) {
		t.Fatalf("a's write with token %d after the pause: %q; want refused by the fencing policy's %s", token1, outcome, wantRule)
	}
	t.Logf("a's write after the pause: %s", outcome)
	checkUnchanged := func(when string) {
		t.Helper()
		cm := getPrimary(t, ns)
		if cm.Data["primary"] != want || cm.Annotations[fencepolicy.TokenAnnotation] != recorded.Annotations[fencepolicy.TokenAnnotation] {
			t.Fatalf("%s the ConfigMap names %q with token %q; want %s with %s", when, cm.Data["primary"], cm.Annotations[fencepolicy.TokenAnnotation], want, recorded.Annotations[fencepolicy.TokenAnnotation])
		}
		if !sc.successorWrites && cm.ResourceVersion != recorded.ResourceVersion {
			t.Fatalf("%s the ConfigMap is at resourceVersion %s; want a's first write's, %s: no one else wrote it", when, cm.ResourceVersion, recorded.ResourceVersion)
		}
	}
	checkUnchanged("after the refusal")

	// a's sidecar resumes and follows b; a's app, waiting for a term
	// newer than the refused one, writes nothing more.
	if err := a.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, generous, 10*time.Millisecond, "a's sidecar following b", func() bool {
		st, err := a.Status(ctx)
		return err == nil && !st.Leader && st.Holder == second.Status.Holder
	})
	checkUnchanged("once a's sidecar follows b")
	if after := strings.SplitAfter(readLog(t, appA), "refused:")[1]; strings.Contains(after, "recorded") || strings.Contains(after, "refused:") {
		t.Errorf("a's app wrote again after the refusal:\n%s", after)
	}
}

// awaitTermAdmitted waits until admission compares tokens with a newer
// term than the one that wrote the ConfigMap: a dry-run update of it as
// it is (its own token, so rule 2 holds) is refused by rule 3. The
// apiserver reads the Lease from its cache; this waits that cache's delay
// out.
func awaitTermAdmitted(t *testing.T, ns string) {
	t.Helper()
	var last error
	poll.UntilReport(t, generous, 5*time.Millisecond, "admission seeing the new term", func() bool {
		probe := getPrimary(t, ns)
		if probe.Data == nil {
			probe.Data = map[string]string{}
		}
		probe.Data["probe"] = "1" // never a no-op
		_, last = cluster.Clientset().CoreV1().ConfigMaps(ns).Update(t.Context(), probe, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return last != nil && strings.Contains(last.Error(), "leasehold fencing rule 3 ")
	}, func() string { return fmt.Sprintf("the last dry-run update's answer: %v", last) })
}

// startSidecar starts a sidecar of f named name, stopped when the test ends.
func startSidecar(t *testing.T, f fleet.Config, name string) *fleet.Instance {
	t.Helper()
	inst, err := f.Start(t.Context(), name, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(inst.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			log, _ := os.ReadFile(inst.LogPath)
			t.Logf("sidecar %s's log:\n%s", name, log)
		}
	})
	return inst
}

// applyPrintedFencingPolicy applies what `leasehold fencing-policy --lease
// controlPlaneLease --namespace ns` prints (as `| kubectl apply -f -`
// would), deletes it when the test keep ends, and waits until admission
// enforces it: a fenced ConfigMap without a token is refused by rule 1.
func applyPrintedFencingPolicy(t, keep *testing.T, ns string) {
	t.Helper()
	ctx := t.Context()
	out, err := exec.CommandContext(ctx, sidecar, "fencing-policy", "--lease", controlPlaneLease, "--namespace", ns).Output()
	if err != nil {
		t.Fatalf("leasehold fencing-policy: %v", err)
	}
	docs := bytes.Split(out, []byte("\n---\n"))
	if len(docs) != 2 {
		t.Fatalf("leasehold fencing-policy printed %d documents; want the policy and its binding:\n%s", len(docs), out)
	}
	var policy admissionregistrationv1.ValidatingAdmissionPolicy
	var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
	if err := yaml.UnmarshalStrict(docs[0], &policy); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(docs[1], &binding); err != nil {
		t.Fatal(err)
	}
	adm := cluster.Clientset().AdmissionregistrationV1()
	if _, err := adm.ValidatingAdmissionPolicies().Create(ctx, &policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	keep.Cleanup(func() {
		_ = adm.ValidatingAdmissionPolicyBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
		_ = adm.ValidatingAdmissionPolicies().Delete(context.Background(), policy.Name, metav1.DeleteOptions{})
	})
	if _, err := adm.ValidatingAdmissionPolicyBindings().Create(ctx, &binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "probe", Namespace: ns, Labels: map[string]string{fencepolicy.FencedByLabel: controlPlaneLease},
	}}
	poll.Until(t, generous, 10*time.Millisecond, "the fencing policy enforced", func() bool {
		_, err := cluster.Clientset().CoreV1().ConfigMaps(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "leasehold fencing rule 1")
	})
}

// awaitPrimary waits until the ConfigMap names primary, stamped with
// token, and returns it.
func awaitPrimary(t *testing.T, ns, primary, token string) *corev1.ConfigMap {
	t.Helper()
	var cm *corev1.ConfigMap
	poll.Until(t, generous, 10*time.Millisecond, "the ConfigMap naming "+primary+" with token "+token, func() bool {
		cm = getPrimary(t, ns)
		return cm.Data["primary"] == primary && cm.Annotations[fencepolicy.TokenAnnotation] == token
	})
	if cm.Labels[fencepolicy.FencedByLabel] != controlPlaneLease {
		t.Errorf("the ConfigMap's labels %v; want %s=%s", cm.Labels, fencepolicy.FencedByLabel, controlPlaneLease)
	}
	return cm
}

// getPrimary reads the example's ConfigMap (empty while it does not exist).
func getPrimary(t *testing.T, ns string) *corev1.ConfigMap {
	t.Helper()
	cm, err := cluster.Clientset().CoreV1().ConfigMaps(ns).Get(t.Context(), primaryConfigMap, metav1.GetOptions{})
	if err != nil {
		return &corev1.ConfigMap{}
	}
	return cm
}

// afterPause is the first line the example logged on a write's outcome
// after it paused ("recorded …" or "refused: …"), "" while there is none.
func afterPause(log string) string {
	_, after, paused := strings.Cut(log, "pausing before write")
	if !paused {
		return ""
	}
	for line := range strings.Lines(after) {
		if i := strings.Index(line, "recorded primary="); i >= 0 {
			return strings.TrimSpace(line[i:])
		}
		if i := strings.Index(line, "refused:"); i >= 0 {
			return strings.TrimSpace(line[i:])
		}
	}
	return ""
}

func readLog(t *testing.T, w *worker) string {
	t.Helper()
	b, err := os.ReadFile(w.logPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// processStopped reports whether the process pid is stopped by a signal
// (state T in /proc/pid/stat).
func processStopped(t *testing.T, pid int) bool {
	t.Helper()
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// pid (comm) state …: comm may hold spaces and parentheses.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(fields) > 0 && fields[0] == "T"
}
