// Package decide is leasehold's election decision core: every decision of
// one candidate for one coordination.k8s.io/v1 Lease, as a pure function of
// its state, one input and the local time.
//
// A Machine performs no I/O and reads no clock. Its driver (package elect)
// feeds it inputs (watch observations, the answer to the one API request it
// asked for, timer ticks, release and candidacy requests, shutdown) with the
// local time of each, and carries out the Output: send the request, publish
// the Report, answer callers, log, wake it again by Output.Wake, which is
// always after the step's own time (never the zero time): a Machine woken
// at a time at which nothing is due would spin. The same Machine runs,
// unchanged, in the deterministic simulator of this package's tests,
// against an in-memory Lease store that enforces resourceVersion
// preconditions, under lost requests and answers, late watch events,
// partitions, pauses, clock drift, hand edits, handovers and etcd restores,
// in a default and a stress fault mix; its checker (checker_test.go) judges
// every step against the safety contract below (across a restore, as far
// as it promises), each Wake, and liveness. In the style of etcd's
// raft.Node.Step.
//
// # Safety contract
//
// The guarantee: no two instances report a valid term at the same instant,
// as long as every instance of one Lease runs with the same timings
// (leaseDuration, renewDeadline, retryPeriod) and clock rates differ by less
// than fence.MaxClockDrift. It rests on these rules.
//
//   - Validity. A term is valid until the send time of its last successful
//     acquire or renew write plus renewDeadline (fence.ValidUntil), never
//     longer; an answer that arrives after that does not revive the term.
//   - Every acquisition is one Update conditioned on the resourceVersion of
//     the record judged free, built on that record as the apiserver returned
//     it, so it also carries its UID: Leases allow create-on-update, and for
//     a Lease deleted meanwhile it is the UID's precondition that makes the
//     apiserver refuse the Update (409) instead of creating the Lease anew.
//     A missing Lease is never acquired by Create:
//     a candidate creates an empty placeholder record and acquires that,
//     because "absent now" says nothing about what happened in between
//     (another instance may have created, led and lost a Lease that was then
//     deleted), while a resourceVersion precondition proves that the record
//     did not change between its observation and the write.
//   - When a record is free. A record held by another identity is free at
//     the local time this instance first observed that version plus the
//     larger of its leaseDurationSeconds and this instance's own
//     leaseDuration; a claim's expiry never moves earlier (a hand-shortened
//     duration changes nothing). An empty record is free at once only when
//     its holder signed the release (ReleasedByAnnotation), or when this
//     instance observed it while its own term was valid (nobody else can
//     have acquired in that time); any other empty record is free only after
//     this instance has itself observed that version for the same full
//     duration (a fresh candidate has observed nothing, and a claim from
//     before failed polls is stale). A record that names this instance is
//     its own write (identities are unique per process), or a handover to
//     it, and is taken back at once, with a new term: that is how an
//     acquire whose answer was lost is recovered without waiting out the
//     Lease.
//   - Step-down is immediate: the term ends the moment a read, a watch event
//     or a write's answer shows the Lease deleted, emptied or held by
//     someone else, and before any voluntary release is written.
//   - Tokens: a term's fencing token is the resourceVersion of the write
//     that acquired it, and must exceed every resourceVersion seen before
//     that write was sent; otherwise (etcd restored without --bump-revision)
//     the term is refused, the record released and the attempt backed off.
//     A read or write answer older than what was seen before it was sent is
//     taken as such a rollback, so a leader still steps down on it.
//   - Release never erases a successor: it is an Update conditioned on the
//     resourceVersion of a record that names this instance as holder,
//     signed with ReleasedByAnnotation. That record is the latest this
//     instance knows (its own last write, or a version it observed since)
//     when that names it and no outcome is unknown; otherwise, and after
//     such a write conflicts, a fresh read. Either way the write lands only
//     on a stored record that names this instance. A release ends the term
//     first; with holds on the term (a `leasehold run` command still
//     running), it waits for them to end, at most until the term's validity
//     ends.
//   - A handover in one write (HandedOverAnnotation) is such a release that
//     names the successor as the new holder. The successor leads on it
//     without writing only when it can date the record from below by a
//     write of its own that the leaver cites, having observed it first
//     (Observed.WitnessSentAt): the term is valid until fence.ValidUntil of
//     that write's send time, which precedes the record's write and so
//     every other instance's observation of it; the token is the record's
//     resourceVersion, which must be the largest seen. A handover starts
//     at most one term, none once its heir has sent a release of it (that
//     release may have landed unseen, and another instance may lead
//     since), and none while a read is owed or the outcome of a write of
//     this instance's is unknown: a release whose answer is lost is read
//     back like an acquire whose answer is lost. Otherwise the record is
//     taken back by a write, or released, as any record naming it.
//
// # Across an etcd restore
//
// A restore from a snapshot serves a past version of the Lease as the
// present, with its resourceVersion and UID. An answer older than what was
// known when its request was sent, or at that very resourceVersion but not
// the record then known (the Lease, known missing; another object), is
// taken as the truth (a rollback), so instances follow the restored record.
// What still holds:
//
//   - With --bump-revision (the documented way), tokens keep growing:
//     every write after the restore takes a revision above every earlier
//     one, and no term starts on a write of this instance's from before the
//     restore once it has observed a later record that starts another
//     term (one whose answer comes just after the restore may start,
//     unaware, after a term begun since, with the smaller token: a
//     storage that saw the larger refuses its writes). But within renewDeadline of the restore a term may start while
//     another is valid: an instance whose latest knowledge is the restored
//     version, and whose claim on it ran out, rightly writes on it at once,
//     though a term begun since that version may be valid; so may one that
//     led across the restore, on a record it finds emptied or deleted (its
//     term's validity said nobody else could have acquired). The older term
//     ends at its next renewal (the conflict) or with its validity. Any
//     other two terms are exclusive as ever.
//   - Without --bump-revision, later writes reuse revisions. Each instance
//     still starts no term with a token at or below a resourceVersion it
//     saw (refusing the term, releasing the record and backing off), its
//     reports never go back, and a leader steps down on a rolled-back read
//     that shows another holder. Nothing more, until the revision has
//     passed every one written before the restore: a precondition on a
//     reused resourceVersion can land on another record, as for every
//     resourceVersion precondition in Kubernetes.
//
// # Another holder's token
//
// A term's token can only be published on the Lease by a later write than
// the one that acquired it: the holder's first renewal, a retryPeriod after
// the acquire like every renewal, publishes it (fence.Annotation). An
// instance whose watch delivered the acquire right after the version it
// already knew (Observed.Follows) reports the token at once: no write came
// between the two versions, so the acquire is its term's first, and its
// resourceVersion is the token. Any other instance reports the published
// token, once it is credible. The tokens an instance reports never go
// backwards.
//
// Hand edits the contract assumes away: writing a live instance's identity
// into holderIdentity, and forging ReleasedByAnnotation on an empty record.
// Both are indistinguishable from that instance's own writes.
package decide
