package fencepolicy

import (
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/leasehold/leasehold/internal/fence"
)

// The names of the contract (see the package documentation).
const (
	// FencedByLabel marks a fenced object; its value is the Lease's name.
	FencedByLabel = "leasehold.io/fenced-by"
	// TokenAnnotation carries a fenced write's fencing token. It is the
	// same key as the Lease's published token (fence.Annotation).
	TokenAnnotation = fence.Annotation
	// DeletableAnnotation, set to "true" by a write of the current term,
	// allows that version of the object to be deleted.
	DeletableAnnotation = "leasehold.io/deletable"
)

// tokenPattern is what rules 1–3 accept as a token: a positive decimal
// integer without leading zeros (as fence.FromResourceVersion) of at most
// 18 digits, so that CEL's int() (64-bit) never overflows on it.
const tokenPattern = `^[1-9][0-9]{0,17}$`

// Objects returns the policy and its binding for o, which must be valid
// (Options.Validate). Both are named Options.Name.
func Objects(o Options) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	return build(o, rules)
}

// build is Objects with the given validations (tests drop one at a time).
func build(o Options, validations []rule) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	name := o.Name()
	labels := map[string]string{"app.kubernetes.io/managed-by": "leasehold"}
	var resourceRules []admissionregistrationv1.NamedRuleWithOperations
	for _, r := range o.Resources {
		resourceRules = append(resourceRules, admissionregistrationv1.NamedRuleWithOperations{
			RuleWithOperations: admissionregistrationv1.RuleWithOperations{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete},
				Rule: admissionregistrationv1.Rule{
					APIGroups:   []string{r.Group},
					APIVersions: []string{"*"},
					Resources:   []string{r.Resource},
					Scope:       ptr.To(admissionregistrationv1.NamespacedScope),
				},
			},
		})
	}
	var vs []admissionregistrationv1.Validation
	for _, r := range validations {
		vs = append(vs, admissionregistrationv1.Validation{
			Expression:        r.expression,
			Message:           r.message,
			MessageExpression: r.messageExpression,
			Reason:            ptr.To(metav1.StatusReasonForbidden),
		})
	}
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			ParamKind: &admissionregistrationv1.ParamKind{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": o.Namespace}},
				// Matches when the stored object or the written one
				// carries the label, so rule 4 sees the label taken off.
				ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{FencedByLabel: o.Lease}},
				ResourceRules:  resourceRules,
			},
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			Variables:     variables(o),
			Validations:   vs,
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: name,
			ParamRef: &admissionregistrationv1.ParamRef{
				Name:                    o.Lease,
				Namespace:               o.Namespace,
				ParameterNotFoundAction: ptr.To(admissionregistrationv1.DenyAction),
			},
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	return policy, binding
}

// annotation is the CEL expression for the value of annotation key on
// object expr ("" when the object, its annotations or the key are absent).
func annotation(expr, key string) string {
	return fmt.Sprintf(`(%[1]s != null && has(%[1]s.metadata.annotations) && %[2]q in %[1]s.metadata.annotations ? %[1]s.metadata.annotations[%[2]q] : '')`, expr, key)
}

// labelled is the CEL expression: object expr carries FencedByLabel with
// the Lease's name.
func labelled(expr, lease string) string {
	return fmt.Sprintf(`%[1]s != null && has(%[1]s.metadata.labels) && %[2]q in %[1]s.metadata.labels && %[1]s.metadata.labels[%[2]q] == %[3]q`, expr, FencedByLabel, lease)
}

// asToken is the CEL expression: the token string variable v as an int,
// 0 when it is not a token.
func asToken(v string) string {
	return fmt.Sprintf(`variables.%[1]s.matches(%[2]q) ? int(variables.%[1]s) : 0`, v, tokenPattern)
}

// variables are the values the rules share.
func variables(o Options) []admissionregistrationv1.Variable {
	v := func(name, expr string) admissionregistrationv1.Variable {
		return admissionregistrationv1.Variable{Name: name, Expression: expr}
	}
	return []admissionregistrationv1.Variable{
		// The written object's token, as written, and as a number.
		v("written", annotation("object", TokenAnnotation)),
		v("wellFormed", fmt.Sprintf(`variables.written.matches(%q)`, tokenPattern)),
		v("token", asToken("written")),
		// The stored object's.
		v("storedText", annotation("oldObject", TokenAnnotation)),
		v("stored", asToken("storedText")),
		// The current term's token as the Lease shows it: the larger of
		// its published token and its floor.
		v("publishedText", annotation("params", fence.Annotation)),
		v("floorText", annotation("params", fence.FloorAnnotation)),
		v("published", asToken("publishedText")),
		v("floor", asToken("floorText")),
		v("current", `variables.published > variables.floor ? variables.published : variables.floor`),
		v("lease", `params.metadata.namespace + '/' + params.metadata.name`),
		v("wasFenced", labelled("oldObject", o.Lease)),
		v("isFenced", labelled("object", o.Lease)),
		v("deletable", annotation("oldObject", DeletableAnnotation)+` == 'true'`),
		v("precondition", `has(request.options) && request.options != null && has(request.options.preconditions) && has(request.options.preconditions.resourceVersion) ? string(request.options.preconditions.resourceVersion) : ''`),
		v("namespaceDeleting", `namespaceObject != null && has(namespaceObject.metadata.deletionTimestamp)`),
	}
}

// rule is one validation of the policy.
type rule struct {
	name, expression, message, messageExpression string
}

// rules are the policy's validations, in the order the apiserver reports
// the first that fails: rule 4 before rule 1, so that taking the token off
// is reported as such.
var rules = []rule{
	{
		name:       "rule 4",
		expression: `request.operation != 'UPDATE' || !variables.wasFenced || (variables.isFenced && variables.written != '')`,
		message:    "leasehold fencing rule 4: an update may not take the label " + FencedByLabel + " or the annotation " + TokenAnnotation + " off a fenced object",
		messageExpression: `'leasehold fencing rule 4 (Lease ' + variables.lease + '): an update may not take the label ` + FencedByLabel + `=' + params.metadata.name + ' or the annotation ` + TokenAnnotation +
			` off a fenced object'`,
	},
	{
		name:       "rule 1",
		expression: `request.operation == 'DELETE' || variables.wellFormed`,
		message:    "leasehold fencing rule 1: a write to a fenced object must carry the annotation " + TokenAnnotation + " with the writer's fencing token",
		messageExpression: `'leasehold fencing rule 1 (Lease ' + variables.lease + '): a write to a fenced object must carry the annotation ` + TokenAnnotation +
			` with the writer\'s fencing token, a positive decimal integer; got ' + (variables.written == '' ? 'none' : '"' + variables.written + '"')`,
	},
	{
		name:              "rule 2",
		expression:        `request.operation != 'UPDATE' || !variables.wellFormed || variables.token >= variables.stored`,
		message:           "leasehold fencing rule 2: the write's fencing token is lower than the stored object's: a newer leader wrote it; this writer is no longer the leader",
		messageExpression: `'leasehold fencing rule 2 (Lease ' + variables.lease + '): token ' + string(variables.token) + ' is lower than token ' + string(variables.stored) + ' on the stored object: a newer leader wrote it; this writer is no longer the leader'`,
	},
	{
		name:              "rule 3",
		expression:        `request.operation == 'DELETE' || !variables.wellFormed || variables.token >= variables.current`,
		message:           "leasehold fencing rule 3: the write's fencing token is lower than the current term's on the Lease; this writer is no longer the leader",
		messageExpression: `'leasehold fencing rule 3 (Lease ' + variables.lease + '): token ' + string(variables.token) + ' is lower than the current term\'s token ' + string(variables.current) + ' on the Lease; this writer is no longer the leader'`,
	},
	{
		name: "delete rule",
		expression: `request.operation != 'DELETE' || variables.namespaceDeleting ||
  (variables.deletable && variables.stored >= variables.current && variables.precondition != '')`,
		message: "leasehold fencing delete rule: a fenced object may only be deleted after a write of the current term set " + DeletableAnnotation + `: "true", with that write's resourceVersion as the delete's precondition`,
		messageExpression: `'leasehold fencing delete rule (Lease ' + variables.lease + '): a fenced object may only be deleted after a write of the current term set ` + DeletableAnnotation +
			`: "true", with that write\'s resourceVersion as the delete\'s precondition; ' +
  (!variables.deletable ? 'it is not marked deletable' :
   variables.stored < variables.current ? 'it was marked with token ' + string(variables.stored) + ', lower than the current term\'s token ' + string(variables.current) :
   'the delete has no resourceVersion precondition')`,
	},
}
