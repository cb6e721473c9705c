// Package e2e is leasehold's fault suite: real sidecar processes (the built
// binary, three or more per scenario, each with its own cuttable proxy to a
// real kube-apiserver) are put through the faults that break leader
// election in production, while an observer samples every instance's
// GET /v1/status every few milliseconds and checks what apps rely on.
//
// All code is in _test.go files; run it with `go test ./test/e2e` (part of
// `make test`, each scenario once) or `make e2e-soak` (each scenario
// -soak=N times, with a summary of trials, overlaps, token regressions and
// worst recovery time per scenario).
//
// # Invariants (checked on every trial, from the observer's samples)
//
// A sample is an interval [sent, recv] of the test's clock: the instance
// computed its answer at some unknown instant inside it. Only certain
// violations are reported.
//
//   - No overlap of samples, by the rule of internal/testing/overlap (the
//     one checker of this suite, test/run and the bench). A run of
//     consecutive leader:true samples of one term proves the instance led
//     throughout [first.recv, last.sent] (a term is one unbroken span of
//     validity); a single sample proves it led at one unknown instant of
//     [sent, recv]. Two instances overlap when such certain spans of theirs
//     intersect, bounds included (a single-sample run counts only if its
//     whole window lies inside the other's span). So A.recv < B.sent is
//     never a violation.
//   - No overlap of reported terms. Each term (instance, token) reports its
//     acquiredAt and, in every leader:true answer, its validUntil; these are
//     wall-clock times of one machine, comparable with each other and with
//     the test's clock. A term's promise runs from acquiredAt to the largest
//     validUntil it reported, because an app may act until then without
//     asking again. Only a term that this test ended voluntarily may end
//     its promise early: its interval then ends at its last leader:true
//     sample. That is a term whose instance the test SIGTERMed (it releases
//     the Lease), or, with health-gated candidacy, one whose app the test
//     made fail shortly before the term ended (the instance withdraws and
//     releases; the successor acquires long before the withdrawn term's
//     validUntil, so an app that acts on validUntil without asking again
//     while failing its own health check is protected by the fencing token
//     alone). No two terms of different instances may overlap.
//   - Validity is never overstated: a leader:true answer carries a
//     validUntil later than the request's send time, and validForMs no
//     larger than validUntil − sent.
//   - A term never resumes: once an instance answered "not leader (under
//     this token)", it never answers leader:true with that token again.
//   - Monotonic tokens: the tokens of terms, ordered by acquiredAt, strictly
//     increase across all instances, all trials and all scenarios of a run;
//     and no instance ever reports a (non-zero) fencingToken smaller than
//     one it reported before. 0 means "unknown" (API contract) and is not
//     a token.
//   - No process exits unless the test stopped it, and no log shows a panic.
//   - Liveness: after every fault, a new term (a larger token) is reported
//     within the scenario's documented bound, and then exactly one instance
//     reports leader:true. Each recovery time is measured (on this
//     process's clock, from the fault) and logged; a trial fails beyond
//     twice the bound (failsAfter: a shared, noisy machine), and the times
//     over the bound but within that are counted ("over bound").
//
// # Scenarios
//
// Three sidecars each unless said otherwise, every one with its own
// cuttable link to the apiserver (scenarios_test.go and unseen_test.go;
// bounds in main_test.go and app_test.go). The first leader of a fresh
// Lease appears only a lease duration after the first sidecar started (it
// creates an empty placeholder and acquires it a lease duration later);
// every scenario waits for it with the generous bound `steady`.
//
//  1. Crash: SIGKILL the leader; another leads once the Lease expires.
//  2. Graceful handover: SIGTERM the leader; it releases and exits 0, and
//     another leads within a round trip.
//  3. Partition: cut the leader's link until another leads, then heal; the
//     successor is not disturbed.
//  4. Partition, heal, then SIGTERM the old leader at once: its release
//     must not erase the successor's Lease.
//  5. Pause: SIGSTOP the leader beyond leaseDuration; its first answer
//     after SIGCONT says leader:false.
//  6. API server outage of 30s; nobody leads beyond its validity and one
//     leads again after the restart.
//  7. Lease deleted (and emptied) while held, also while its holder cannot
//     hear it.
//  8. Lease edited by hand to another holder.
//  9. Hostile Lease content (missing fields, forged and overflowing token
//     annotations, MaxInt32 transitions).
//  10. Rolling restart, one instance after the other.
//  11. Health-gated candidacy under a flapping, crashing app: each sidecar
//     probes its own fake app in the test process (200, 503, hanging past
//     the timeout, or crashed: listener closed, connection refused, and
//     later re-opened on the same URL). A sidecar whose app never answered
//     2xx never campaigns; when the leader's app crashes it steps down,
//     writes a release (seen by an admin's watch) and a sidecar with a
//     healthy app leads within threshold × interval + timeout +
//     handoverBound, before the Lease could have expired; every app then
//     flaps on a seeded random schedule (-appseed replays one) with
//     stretches where none is healthy, in which nobody leads once
//     withdrawn; with all apps healthy again exactly one leads, with a
//     healthy app.
//
// Scenarios 12 to 14 take the Lease from a holder that cannot hear it and
// then give the choice to a candidate that cannot judge the edit from what
// it sees now; each term's start is also checked against the rule that
// covers it (waitRule: a full lease duration after the candidate could
// first have observed the edit). The sidecar of an older build fails each
// of them with overlaps (-sidecar runs the suite against another binary).
//
//  12. Hand edit with a fresh candidate: the holder (and everyone else) is
//     cut off, the Lease (a) deleted, (b) emptied, and a new sidecar
//     started, the only one that can act. It must not lead before the
//     cut-off holder's validity ended, nor before a lease duration after
//     its start; it leads within freshBound of being ready.
//  13. Stale claims, two sidecars whose clients drop a dead link after
//     about 2s, so that a partition ends their watch instead of having it
//     replayed on the heal. (c) The candidate is cut off for longer than
//     leaseDuration while the leader renews, then the leader is cut off,
//     the Lease emptied (then, roles swapped, deleted), the candidate
//     healed. (d) Own stale claim: x leads and is cut off, y takes over
//     unseen by x, y is cut off, the Lease deleted, x healed: x must not
//     lead while y is valid. Recovery within staleBound of the edit.
//  14. leaseDurationSeconds shortened by hand to 1 while the holder is cut
//     off: neither the watching candidates nor a fresh one started after
//     the edit take it before the holder's validity ended, nor before a
//     lease duration after the edit; one leads within failoverBound.
//  15. Namespace missing (two sidecars, retryPeriod 1s, leaseDuration 4s):
//     each refused Create comes at least the backoff after the one before
//     (it doubles up to 4s; counted between two scrapes, over
//     nsRefusals more), logs the failure once naming the namespace, and
//     reports it as lastError with lastErrorAt (counted in
//     leasehold_lease_request_errors_total); /readyz answers 200 (the
//     Lease's absence has been observed). Once the namespace is created, an
//     empty placeholder appears and one leads a lease duration after it
//     was created, within nsBound, with lastError null.
//
// The leader address, the forwarding proxy and handover to a successor
// (successor_test.go, proxy_handover_test.go, proxy_terms_test.go; every
// sidecar with its own proxy and a stand-in app that records the tokens it
// served):
//
//   - Leader address and proxy over one SIGTERM under load; a rolling
//     update with LEASEHOLD_HANDOVER=successor moves leadership once.
//   - 50 graceful handovers under load (25 releasing to anyone, 25 with
//     LEASEHOLD_HANDOVER=successor), a client per proxy sending GETs and
//     POSTs without pause: no proxy answers 502, no staying proxy leaves a
//     request unanswered, every SIGTERMed sidecar exits 0, each app serves
//     only under its own member's tokens; the 503 window per handover is
//     logged (p50, p90, max), at the staying proxies and at the leaving
//     one's.
//   - An upgraded connection through a follower's proxy and one through
//     the leader's close within closeBound of the leader's release; a new
//     one reaches the new leader's app under its token.
package e2e
