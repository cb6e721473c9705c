// Package member is the decision core of one member of a lease group: its
// membership (the member Lease it keeps, the others' it follows) and its
// plan (which of its elections campaign, and whom each hands its Lease to
// when it leaves), as a pure function of its state, one input and the
// local time, like package decide's Machine for one election.
//
// A Machine performs no I/O and reads no clock. Its driver (package group)
// feeds it the member Leases' list and watch events, the answer to the one
// member Lease request it asked for, the elections' states, the answers to
// its candidacy calls, fitness changes, stay-outs and shutdown, with the
// local time of each, and carries out the Output. The same Machine runs,
// unchanged, in package group's deterministic simulator beside the real
// decide.Machine of every Lease.
//
// # Membership
//
// A member writes a member Lease named LeaseName(group, identity), labelled
// Label=group, holding its identity, renewed every third of its TTL (the
// elections' leaseDuration), with what the others need: the Leases it
// serves (ServesAnnotation), its priority and start time (for Successor),
// and its stay-outs (DeclinedAnnotation). It deletes it when it leaves
// (unfit, or stopping).
//
// A member is live, in this instance's view, from the moment a version of
// its member Lease is observed until that version has been observed for
// the smaller of the record's leaseDurationSeconds and this instance's own
// TTL: local time only, as for elections, so clock offsets between nodes
// do no harm, and a member Lease that nobody renews (a crashed member, a
// hand edit, a restore) stops counting within one TTL of this instance's
// last observation of it, whatever duration it claims. The live member
// with the smallest identity deletes the member Leases of departed
// members once they have stayed unchanged for collectAfter TTLs, with UID
// and resourceVersion preconditions (collect).
//
// Membership decides who campaigns for what, never who may lead: that
// stays with each Lease's election, so a wrong view costs balance or
// time, never safety.
//
// # Plan
//
// A Lease is only ever given to a live member that serves it: the Leases
// are planned in classes of those the same members serve (balanced), each
// class shared fairly (Assign) in the natural order of its names, so that
// members running different Lease lists under one group name (a rolling
// update that changes the shards) agree on every Lease they share, and
// every Lease served by a live member has a candidate.
package member
