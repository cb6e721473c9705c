// Package elect is leasehold's election state machine over one
// coordination.k8s.io/v1 Lease.
//
// An Elector campaigns for the Lease until its context ends: it acquires the
// Lease when it is free or expired, renews it while it leads, steps down the
// moment it learns that it lost it, and campaigns again after any loss or
// release. One goroutine (Run's) owns every piece of election state; readers
// get immutable Snapshots.
//
// # Safety contract
//
//   - Leadership is reported, never cached: Snapshot.IsLeader(now) is true
//     only while now is before the term's ValidUntil, which is the send time
//     of the last successful acquire/renew write plus RenewDeadline
//     (fence.ValidUntil states the guarantee and its clock assumption). A
//     paused or partitioned sidecar therefore stops claiming leadership on
//     time, even if its loop cannot run.
//   - Step-down is immediate: the term ends as soon as the loop sees another
//     holder or a deleted Lease (by watch, by Get, or by the Get that follows
//     a 409), not RenewDeadline later.
//   - Every term has a fencing token (package fence): the resourceVersion of
//     the write that acquired it. Tokens only grow.
//   - Release never erases a successor: it writes an empty holder only when
//     a fresh Get shows this instance holds the Lease, with that Get's
//     resourceVersion as the precondition. The term ends (and snapshots say
//     so) before the release is written.
//   - Expiry of another holder's Lease is judged as client-go judges it: at
//     the local monotonic time this instance observed the record change,
//     plus the holder's leaseDurationSeconds. renewTime is never compared
//     with the local clock, so a constant clock offset between nodes does
//     no harm.
//   - A Lease is free at once only when its holder released it (the release
//     is signed with ReleasedByAnnotation) or when this instance was the
//     holder. A Lease deleted, or emptied by someone else, while another
//     instance held it is free only when that holder's last record expires:
//     the holder may not have seen the change and rightly claims leadership
//     until its validity ends. (The issue asked for deleted Leases to be
//     taken at once; that would break the first guarantee whenever the old
//     holder learns of the deletion later than a candidate re-creates the
//     Lease, which the fault suite observed.)
//   - Candidacy can be withdrawn (Elector.SetCandidate, used for
//     health-gated candidacy): a withdrawn instance ends its term before
//     anything else, releases the Lease as above, and never acquires until
//     it is put back. An elector configured with StartWithdrawn never starts
//     a term before its first SetCandidate(true).
//
// # What is reused from client-go, and why not its LeaderElector
//
// The Lease is read and written through client-go's typed coordination/v1
// client, which owns serialization (including MicroTime's six fractional
// digits), and optimistic concurrency is the apiserver's resourceVersion
// precondition. resourcelock.LeaseLock is not used because it hides the
// resourceVersion of the write it makes, which is the fencing token, and
// cannot add or remove the token annotation.
//
// The loop itself is written here because tools/leaderelection's (v0.37.2)
// falls short of what an app that trusts us needs: Run is one-shot; after a
// 409 from a real takeover the OnStartedLeading context lives until
// RenewDeadline passes; tryRelease decides with the stale cached record, so
// a healed, deposed leader can erase its successor's Lease; it has no
// fencing token (leaseTransitions is no token: it restarts at 0 with a new
// Lease and anyone may set it); it does not enforce
// renewDeadline + retryPeriod < leaseDuration; and candidates notice a
// released Lease only at their next poll. Here candidates watch the one
// Lease (field selector on its name) and take a released Lease within a
// round trip; if the watch is forbidden or broken they poll every
// RetryPeriod, and say so in a log line and the leasehold_watch_up gauge.
//
// The leader renews with one optimistic Update of its cached object, as
// client-go does, and falls back to a Get only on a conflict.
package elect
