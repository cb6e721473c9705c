// Package fence holds leasehold's two safety rules: what a fencing token is,
// and how long a leader's term is valid.
//
// # Fencing tokens
//
// The token of a term is the resourceVersion that the apiserver returned for
// the write that acquired the term, as an integer. Since Kubernetes 1.35
// resourceVersions are comparable integers (KEP-5504) and, with etcd, they
// are etcd's global revisions: every write to any object takes a larger one.
// So a term acquired after another always has a larger token, whether it
// follows a graceful handover, a crash failover, the same instance
// re-acquiring after a release, or the Lease being deleted and created again.
// Storage that rejects any write whose token is smaller than the largest it
// has seen therefore rejects every deposed leader.
//
// The Lease's leaseTransitions (the "term" number) is kept for people but is
// no token: it restarts at 0 when the Lease is recreated, and the apiserver
// only checks that it is ≥ 0, so any writer can set it to anything.
//
// Assumption: etcd's revisions never go backwards. Restoring etcd from a
// snapshot without --bump-revision breaks this, for leasehold as for every
// resourceVersion-based precondition in Kubernetes. What the election still
// promises across a restore, with --bump-revision or without, is in
// package decide ("Across an etcd restore").
//
// # Validity
//
// A leader's term is valid until ValidUntil(sent, renewDeadline): the local
// monotonic time at which its last successful acquire or renew write was
// *sent*, plus renewDeadline. See ValidUntil for the guarantee.
package fence
