package podlabel

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The lease group of the group tests: two Leases, two members.
const groupName = "workers"

var (
	alphaKey = GroupLeaderKey(labelKey, "alpha") // leasehold.io/leader-alpha
	betaKey  = GroupLeaderKey(labelKey, "beta")
	gammaKey = GroupLeaderKey(labelKey, "gamma") // a Lease of the group no member here follows
)

// A lease group of two Leases (alpha, beta) on two members' Pods (w-0,
// w-1), each member running a Labeler per Lease, on the real apiserver:
//
//   - each Lease's leader's Pod carries true for that Lease, the other Pod
//     false, and both the group's election label (no leasehold.io/lease);
//   - a Lease's cleanup clears a stale true of its own Lease only (not the
//     same Pod's true of gamma, a Lease nobody here follows), only on its
//     group's Pods: another group's Pod with both keys true, and a running
//     single-Lease app whose key is the group's alpha key, keep theirs
//     through several cleanups of both leaders;
//   - a release of alpha moves alpha's label to the other member and leaves
//     beta's where it is;
//   - on shutdown a member's Labelers take every true of its Pod off (no
//     other member of the group runs by then to do it for them).
func TestGroupLabelsEachLeasesLeader(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createPods("", "w-0", "w-1", "solo-0")
	f.createPod("stale", map[string]string{alphaKey: "true", gammaKey: "true", GroupKey: groupName})
	otherGroup := map[string]string{alphaKey: "true", betaKey: "true", GroupKey: "cart"}
	f.createPod("other-group", otherGroup)

	solo := f.startWith(election{lease: "solo", key: alphaKey}, "solo-0", "solo-0", nil)
	member := func(pod, lease string) *candidate {
		return f.startWith(election{group: groupName, lease: lease, key: labelKey}, pod, pod, nil)
	}
	// w-0 campaigns for alpha first, w-1 for beta: each leads one.
	w0alpha, w1beta := member("w-0", "alpha"), member("w-1", "beta")
	f.eventually("w-0 leads alpha, w-1 beta", func() string {
		if !w0alpha.elector.Snapshot().IsLeader(time.Now()) || !w1beta.elector.Snapshot().IsLeader(time.Now()) {
			return fmt.Sprintf("holders: alpha %q, beta %q", f.holderOf("alpha"), f.holderOf("beta"))
		}
		return ""
	})
	w0beta, w1alpha := member("w-0", "beta"), member("w-1", "alpha")

	want := map[string]map[string]string{ // pod → key → value ("" absent)
		"w-0":         {alphaKey: "true", betaKey: "false", GroupKey: groupName, LeaseKey: ""},
		"w-1":         {alphaKey: "false", betaKey: "true", GroupKey: groupName, LeaseKey: ""},
		"stale":       {alphaKey: "false", gammaKey: "true", GroupKey: groupName},
		"other-group": otherGroup,
		"solo-0":      {alphaKey: "true", LeaseKey: "solo", GroupKey: ""},
	}
	f.eventually("each Lease's leader carries true for it, the other member false", func() string { return f.wrongLabels(want) })

	base := map[*candidate]int{w0alpha: w0alpha.rounds.count(), w1beta: w1beta.rounds.count()}
	f.eventuallyWithin(generous+resyncRounds*resync, fmt.Sprintf("each group leader completes %d more cleanups", resyncRounds), func() string {
		for l, n := range base {
			if got := l.rounds.count() - n; got < resyncRounds {
				return fmt.Sprintf("%s (%s): %d cleanups", l.id, l.lease, got)
			}
		}
		return ""
	})
	if wrong := f.wrongLabels(want); wrong != "" {
		t.Errorf("after %d cleanups of each leader: %s", resyncRounds, wrong)
	}
	if logs := solo.logs.String(); strings.Contains(logs, "does not carry the leader label") {
		t.Errorf("the single-Lease app's own true was changed by someone else:\n%s", logs)
	}

	// A release moves alpha to w-1; beta stays with w-1, w-0's beta false.
	if _, err := w0alpha.elector.Release(t.Context(), time.Hour); err != nil {
		t.Fatal(err)
	}
	want["w-0"] = map[string]string{alphaKey: "false", betaKey: "false", GroupKey: groupName, LeaseKey: ""}
	want["w-1"] = map[string]string{alphaKey: "true", betaKey: "true", GroupKey: groupName, LeaseKey: ""}
	f.eventually("alpha's label moved to w-1 with alpha", func() string {
		if !w1alpha.elector.Snapshot().IsLeader(time.Now()) {
			return fmt.Sprintf("alpha's holder %q", f.holderOf("alpha"))
		}
		return f.wrongLabels(want)
	})

	// w-0 goes first, so that w-1's trues can only be taken off by its own
	// Labelers' last writes.
	w0alpha.stop(t)
	w0beta.stop(t)
	w1alpha.stop(t)
	w1beta.stop(t)
	want["w-1"] = map[string]string{alphaKey: "false", betaKey: "false", GroupKey: groupName, LeaseKey: ""}
	if wrong := f.wrongLabels(want); wrong != "" {
		t.Errorf("after both members stopped: %s", wrong)
	}
	noFailures(t, solo, w0alpha, w0beta, w1alpha, w1beta)
}

// wrongLabels lists the labels of want's Pods that differ from want (a
// value "" wants the label absent); "" when none does.
func (f *fixture) wrongLabels(want map[string]map[string]string) string {
	f.t.Helper()
	pods, err := f.admin.CoreV1().Pods(f.namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	var wrong []string
	for _, p := range pods.Items {
		for key, v := range want[p.Name] {
			if got := p.Labels[key]; got != v {
				wrong = append(wrong, fmt.Sprintf("%s: %s=%q (want %q)", p.Name, key, got, v))
			}
		}
	}
	slices.Sort(wrong)
	return strings.Join(wrong, ", ")
}
