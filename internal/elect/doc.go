// Package elect is leasehold's election over one coordination.k8s.io/v1
// Lease: an Elector campaigns until its context ends (acquire, renew, step
// down, campaign again), and readers get immutable Snapshots.
//
// Every decision is taken by the pure decision core, package decide, whose
// doc states the safety contract (validity, when a record is free, token
// order, safe release, hand edits). This package is the thin I/O around it
// (driver.go): one goroutine owns the decide.Machine, feeds it watch events,
// API answers, timer ticks and callers' requests with the local time, and
// carries out its outputs: it publishes a Snapshot, answers callers, and
// sends the one API request the Machine asked for, on a goroutine of its
// own, so that watch events and release requests are taken while a request
// is in flight. Every goroutine (the loop, the watcher, the request in
// flight) has ended when Run returns.
//
// # Contract for readers
//
//   - Leadership is reported, never cached: Snapshot.IsLeader(now) is true
//     only while now is before the term's ValidUntil, so a paused or
//     partitioned sidecar stops claiming leadership on time, even if its
//     loop cannot run.
//   - A Snapshot that says a term ended is published before any release of
//     that term is written; a release then waits for the holds on the term
//     (Elector.Hold), at most until its validity ends.
//   - Snapshot.Index moves exactly when Leading, Holder, Term or Token
//     change, and starts at the process's start time in microseconds, so
//     indices of different processes do not collide.
//
// # Requests to the apiserver
//
//   - The Lease is read and written through client-go's typed
//     coordination/v1 client; optimistic concurrency is the apiserver's
//     resourceVersion precondition, and the resourceVersion returned by the
//     write that acquires a term is that term's fencing token.
//   - Candidates watch the one Lease (field selector on its name) and take a
//     released Lease within a round trip. If the watch is forbidden or
//     broken they poll every RetryPeriod, and say so in a log line and the
//     leasehold_watch_up gauge.
//   - The leader renews with one optimistic Update of its cached object, and
//     reads the Lease only after a conflict.
//
// Why neither client-go's LeaderElector nor resourcelock.LeaseLock is used:
// docs/design.md.
package elect
