package fencepolicy

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Patches and server-side apply are fenced as updates: the apiserver
// evaluates the policy on the object the patch produces. Each kind of
// patch is refused when it stamps a token below the stored one (rule 2)
// and when it leaves the stored token, from an older term, in place
// (rule 3); one that stamps the current token lands.
func TestPatchesAndApplyAreFenced(t *testing.T) {
	f := newFixture(t, 100, 0)
	patches := []struct {
		name  string
		typ   types.PatchType
		patch func(token, data string) string // token "": leave it
	}{
		{"json merge patch", types.MergePatchType, mergePatch},
		{"strategic merge patch", types.StrategicMergePatchType, mergePatch},
		{"json patch", types.JSONPatchType, func(token, data string) string {
			ops := []string{fmt.Sprintf(`{"op":"add","path":"/data/primary","value":%q}`, data)}
			if token != "" {
				ops = append(ops, fmt.Sprintf(`{"op":"replace","path":"/metadata/annotations/leasehold.io~1fencing-token","value":%q}`, token))
			}
			return "[" + strings.Join(ops, ",") + "]"
		}},
		{"server-side apply", types.ApplyPatchType, func(token, data string) string {
			ann := ""
			if token != "" {
				ann = fmt.Sprintf(`,"annotations":{%q:%q}`, TokenAnnotation, token)
			}
			return fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"NAME","labels":{%q:%q}%s},"data":{"primary":%q}}`, FencedByLabel, leaseName, ann, data)
		}},
	}
	for i, p := range patches {
		t.Run(p.name, func(t *testing.T) {
			name := fmt.Sprintf("patched-%d", i)
			f.create(name, "120")
			send := func(patch string) (*corev1.ConfigMap, error) {
				opts := metav1.PatchOptions{}
				if p.typ == types.ApplyPatchType {
					opts.FieldManager, opts.Force = "leader", new(true)
				}
				return f.cs.CoreV1().ConfigMaps(f.namespace).Patch(f.ctx, name, p.typ, []byte(strings.ReplaceAll(patch, "NAME", name)), opts)
			}
			_, err := send(p.patch("110", "b"))
			wantRefused(t, "a lower token than the stored one", err, "rule 2", "token 110 is lower than token 120")
			_, err = send(p.patch("120", "c"))
			wantLanded(t, "the stored token", err)
			_, err = send(p.patch("90", "d"))
			wantRefused(t, "a lower token than both", err, "rule 2", "token 90 is lower than token 120")
		})
	}
	// An older term's token left in place by a patch that does not stamp
	// one: refused by rule 3 once the Lease shows a newer term.
	f.setLeaseAndWait(130, 0)
	for i, p := range patches {
		t.Run(p.name+" leaving an older term's token", func(t *testing.T) {
			name := fmt.Sprintf("patched-%d", i)
			opts := metav1.PatchOptions{}
			patch := p.patch("", "e")
			if p.typ == types.ApplyPatchType {
				// The apply's manager owns the annotation: an apply that
				// names the old token keeps it.
				opts.FieldManager, opts.Force = "leader", new(true)
				patch = p.patch("120", "e")
			}
			send := func(patch string) error {
				_, err := f.cs.CoreV1().ConfigMaps(f.namespace).Patch(f.ctx, name, p.typ, []byte(strings.ReplaceAll(patch, "NAME", name)), opts)
				return err
			}
			wantRefused(t, "an older term's token kept", send(patch), "rule 3", "token 120 is lower than the current term's token 130")
			err := send(p.patch("130", "f"))
			wantLanded(t, "the current token", err)
		})
	}
}

func mergePatch(token, data string) string {
	ann := ""
	if token != "" {
		ann = fmt.Sprintf(`"metadata":{"annotations":{%q:%q}},`, TokenAnnotation, token)
	}
	return fmt.Sprintf(`{%s"data":{"primary":%q}}`, ann, data)
}
