package fencepolicy

import (
	"time"

	"fmt"
	"github.com/leasehold/leasehold/internal/testing/poll"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Each test below runs twice (variant): with the whole policy, where the
// rule refuses the write, and with the policy less that rule, where the
// same write lands. So each fails if its rule is removed.

// Rule 1: a create or update of a fenced object carries a well-formed token.
func TestRule1WritesCarryAToken(t *testing.T) {
	variant(t, "rule 1", 0, 0, func(t *testing.T, f *fixture, full bool) {
		for i, tc := range []struct{ name, token string }{
			{"none", ""}, {"not a number", "abc"}, {"leading zero", "042"}, {"zero", "0"},
			{"negative", "-5"}, {"19 digits", "1000000000000000000"},
		} {
			_, err := f.configMaps().Create(f.ctx, f.configMap(fmt.Sprintf("c%d", i), tc.token), metav1.CreateOptions{})
			outcome(t, full, "create with token "+tc.name, err, "rule 1", "leasehold.io/fencing-token")
		}
		cm := f.create("stamped", "42")
		if !full {
			return
		}
		bad := restamp(cm, "x42")
		_, err := f.configMaps().Update(f.ctx, bad, metav1.UpdateOptions{})
		wantRefused(t, "update with a malformed token", err, "rule 1", `got "x42"`)
	})
}

// Rule 2: an update's token is not lower than the stored object's.
func TestRule2NoWriteBelowTheStoredToken(t *testing.T) {
	variant(t, "rule 2", 5, 0, func(t *testing.T, f *fixture, full bool) {
		cm := f.create("primary", "100")
		newer, err := f.configMaps().Update(f.ctx, restamp(cm, "100"), metav1.UpdateOptions{})
		wantLanded(t, "update with the same token", err)
		_, err = f.configMaps().Update(f.ctx, restamp(newer, "50"), metav1.UpdateOptions{})
		outcome(t, full, "update with a lower token", err, "rule 2", "token 50 is lower than token 100 on the stored object")
	})
}

// Rule 3: a write's token is not lower than the current term's on the
// Lease: the larger of the published token and the floor.
func TestRule3NoWriteBelowTheLeasesToken(t *testing.T) {
	variant(t, "rule 3", 100, 0, func(t *testing.T, f *fixture, full bool) {
		_, err := f.configMaps().Create(f.ctx, f.configMap("old-create", "99"), metav1.CreateOptions{})
		outcome(t, full, "create below the published token", err, "rule 3", "token 99 is lower than the current term's token 100")
		cm := f.create("primary", "100")

		// A new term's floor is above every older token, before its token
		// is published: an update that keeps the stored (older) token is
		// refused too.
		f.setLeaseAndWait(100, 150)
		_, err = f.configMaps().Update(f.ctx, restamp(cm, "100"), metav1.UpdateOptions{})
		outcome(t, full, "update below the floor", err, "rule 3", "token 100 is lower than the current term's token 150")
		_, err = f.configMaps().Create(f.ctx, f.configMap("at-floor", "150"), metav1.CreateOptions{})
		wantLanded(t, "create at the floor", err)
		f.setLeaseAndWait(170, 150)
		_, err = f.configMaps().Create(f.ctx, f.configMap("below-token", "160"), metav1.CreateOptions{})
		outcome(t, full, "create above the floor, below the published token", err, "rule 3", "token 160 is lower than the current term's token 170")
	})
}

// Rule 4: an update does not take the label or the token off a fenced object.
func TestRule4FencedObjectsStayFenced(t *testing.T) {
	variant(t, "rule 4", 100, 0, func(t *testing.T, f *fixture, full bool) {
		cm := f.create("primary", "100")
		unlabelled := restamp(cm, "100")
		delete(unlabelled.Labels, FencedByLabel)
		_, err := f.configMaps().Update(f.ctx, unlabelled, metav1.UpdateOptions{})
		outcome(t, full, "update that takes the label off", err, "rule 4", "leasehold.io/fenced-by=leader")

		if !full {
			return
		}
		relabelled := restamp(cm, "100")
		relabelled.Labels[FencedByLabel] = "another"
		_, err = f.configMaps().Update(f.ctx, relabelled, metav1.UpdateOptions{})
		wantRefused(t, "update that moves it to another Lease", err, "rule 4")
		unstamped := restamp(cm, "100")
		delete(unstamped.Annotations, TokenAnnotation)
		_, err = f.configMaps().Update(f.ctx, unstamped, metav1.UpdateOptions{})
		wantRefused(t, "update that takes the token off", err, "rule 4")
	})
}

// The delete rule: only a version the current term marked deletable, named
// by the delete's resourceVersion precondition.
func TestDeleteRuleOnlyWhatTheCurrentTermMarked(t *testing.T) {
	variant(t, "delete rule", 100, 0, func(t *testing.T, f *fixture, full bool) {
		cm := f.create("unmarked", "100")
		err := f.configMaps().Delete(f.ctx, cm.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &cm.ResourceVersion}})
		outcome(t, full, "delete of an unmarked object", err, "delete rule", "it is not marked deletable")
		if !full {
			return
		}
		marked := f.mark(f.create("marked", "100"), "100")
		err = f.configMaps().Delete(f.ctx, marked.Name, metav1.DeleteOptions{})
		wantRefused(t, "delete without a precondition", err, "delete rule", "the delete has no resourceVersion precondition")
		err = f.configMaps().Delete(f.ctx, marked.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &marked.ResourceVersion}})
		wantLanded(t, "delete of the marked version", err)

		old := f.mark(f.create("marked-by-an-older-term", "100"), "100")
		f.setLeaseAndWait(200, 0)
		err = f.configMaps().Delete(f.ctx, old.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &old.ResourceVersion}})
		wantRefused(t, "delete of a version an older term marked", err, "delete rule", "it was marked with token 100, lower than the current term's token 200")
	})
}

// mark writes cm deletable with token and returns the written version.
func (f *fixture) mark(cm *corev1.ConfigMap, token string) *corev1.ConfigMap {
	f.t.Helper()
	m := restamp(cm, token)
	m.Annotations[DeletableAnnotation] = "true"
	written, err := f.configMaps().Update(f.ctx, m, metav1.UpdateOptions{})
	if err != nil {
		f.t.Fatalf("mark %s deletable: %v", cm.Name, err)
	}
	return written
}

// In a namespace being deleted, deletes are not fenced, so that namespace
// deletion finishes (kubetest runs no namespace controller: the namespace
// stays Terminating, and the test deletes in its place).
func TestDeletesInADeletedNamespaceAreNotFenced(t *testing.T) {
	f := newFixture(t, 100, 0)
	cm := f.create("unmarked", "100")
	err := f.configMaps().Delete(f.ctx, cm.Name, metav1.DeleteOptions{})
	wantRefused(t, "delete of an unmarked object while the namespace lives", err, "delete rule")
	if err := f.cs.CoreV1().Namespaces().Delete(f.ctx, f.namespace, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, generous, 20*time.Millisecond, "the unmarked object deleted in the Terminating namespace", func() bool {
		return f.configMaps().Delete(f.ctx, cm.Name, metav1.DeleteOptions{}) == nil
	})
}
