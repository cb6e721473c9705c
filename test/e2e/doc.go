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
//   - No overlap of samples. A run of consecutive leader:true samples of one
//     term proves the instance led throughout [first.recv, last.sent] (a
//     term is one unbroken span of validity); a single sample proves it led
//     at one unknown instant of [sent, recv]. Two instances overlap when
//     such certain spans of theirs intersect (a single-sample run counts
//     only if its whole window lies inside the other's span). So
//     A.recv < B.sent is never a violation.
//   - No overlap of reported terms. Each term (instance, token) reports its
//     acquiredAt and, in every leader:true answer, its validUntil; these are
//     wall-clock times of one machine, comparable with each other and with
//     the test's clock. A term's promise runs from acquiredAt to the largest
//     validUntil it reported, because an app may act until then without
//     asking again. Only a term that this test ended voluntarily (SIGTERM,
//     which releases the Lease) may end its promise early: its interval
//     then ends at its last leader:true sample. No two terms of different
//     instances may overlap.
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
//     reports leader:true. Each recovery time is measured and logged.
package e2e
