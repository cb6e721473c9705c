// Package fencepolicy builds the ValidatingAdmissionPolicy (and its
// binding) with which the kube-apiserver itself enforces leasehold's
// fencing tokens on Kubernetes objects: a deposed leader's writes are
// refused where they land, atomically with the write, with no webhook to
// run.
//
// # The contract
//
// A fenced object is an object of the configured resources, in the Lease's
// namespace, labelled FencedByLabel: <lease name>. Every create and update
// of a fenced object carries TokenAnnotation: "<token>", the writer's
// fencing token in decimal. The apiserver refuses, with a message naming
// the rule (and both tokens where there are two):
//
//  1. a create or update without the annotation, or with one that is not a
//     positive decimal integer of at most 18 digits;
//  2. an update whose token is lower than the token on the stored object.
//     The stored object is the one the write replaces (admission runs
//     inside the apiserver's optimistic-concurrency loop), so this holds
//     atomically: once a newer leader has written an object, no write of
//     an older one lands on it;
//  3. a create or update whose token is lower than the current term's as
//     the Lease shows it: the larger of its published token
//     (fence.Annotation, from the term's first renewal on) and its floor
//     (fence.FloorAnnotation, written by the acquiring write itself when
//     the sidecar runs with LEASEHOLD_FENCING_FLOOR=true). The apiserver
//     reads the Lease from its watch cache, so this rule lags the Lease by
//     that cache's delay;
//  4. an update that takes the label or the annotation off a fenced
//     object.
//
// Deletes carry no token, so a delete is allowed only when the current term
// asked for it (the delete rule): the stored object carries
// DeletableAnnotation: "true" and a token not lower than the current
// term's (the leader stamped it with an update, fenced by rules 1–4), and
// the delete names that version in a resourceVersion precondition. A
// deposed leader therefore deletes nothing that the current term has not
// marked; with the precondition, nothing written since it was marked. One
// exception: in a namespace being deleted, deletes are not fenced, so that
// namespace deletion finishes.
//
// A binding whose Lease does not exist refuses every write to the fenced
// objects (parameterNotFoundAction: Deny); so does any error evaluating the
// policy (failurePolicy: Fail).
package fencepolicy
