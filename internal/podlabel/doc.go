// Package podlabel keeps a leader label on the sidecar's own Pod, so that a
// Service whose selector includes the label routes only to the leader.
//
// With a key such as leasehold.io/leader, the Labeler patches its own Pod
// with <key>=true while its Elector leads and <key>=false while it does not.
// Routing by label, unlike routing by readiness, lets a rolling update make
// progress: followers stay Ready, so the Deployment never waits on a Pod that
// is unready only because it is not the leader.
//
// Every write of the own Pod also sets the election label
// leasehold.io/lease (LeaseKey) to a value naming the election's Lease: its
// name when the Lease lives in the Pod's namespace, <namespace>_<name> when
// it lives elsewhere, and sha256_ plus 32 hex digits of the SHA-256 of
// <namespace>/<name> when that would exceed the 63 characters a label value
// may have. Several apps (several Leases) may therefore use the same key in
// one namespace: each leader clears only its own election's Pods.
//
// # Contract
//
//   - Level-triggered, one goroutine: the desired value is Snapshot.Leading
//     of the Source (the Elector). The Labeler blocks on Snapshot.Changed and
//     never polls; the Elector publishes Leading=false itself when a term's
//     validity runs out, so a partitioned leader's Labeler tries to remove
//     its label on time. Whenever the desired value differs from the value
//     last written successfully, the Labeler writes it with a JSON merge
//     patch of metadata.labels, each request bounded by max(RetryPeriod, 1s).
//     A failed write is retried after RetryPeriod, and changes that arrive
//     meanwhile are coalesced: the latest desired value is what is written.
//   - Start-up repair: at start the value on the Pod is unknown (a crash may
//     have left true behind), so the Labeler writes at once: false, unless
//     the Elector already leads.
//   - Others' stale labels: a leader that crashed or was partitioned cannot
//     remove its own true. So when this instance starts a term, and then
//     every Resync while it leads, it lists the Pods of its namespace with
//     <key>=true and its own election label, and patches the leader label of
//     every other one to false (after its own true is written). Each of
//     those patches carries the listed resourceVersion as a precondition,
//     and is sent only while Snapshot.IsLeader holds, so a deposed leader's
//     delayed cleanup cannot clear its successor's fresh true (the
//     successor's write changed the resourceVersion: 409).
//   - Other elections: a Pod without this election's label is never
//     patched, whatever its leader label says: another app's leader keeps
//     its true. That includes a Pod labelled by a leasehold older than the
//     election label (it wrote only <key>): its stale true is no longer
//     cleared by a leader, only by its own sidecar's next write (start-up
//     repair included, which adds the election label) or by the Pod's
//     replacement, as in a rolling update to this version. Until then a
//     Service selecting the label may also route to it, as it may to any
//     stale true.
//   - Races the resync closes: an old leader's delayed true patch may land
//     after the new leader's cleanup; the next resync clears it. The same
//     list also shows whether the leader's own Pod still carries true and
//     its election label; if something changed either (say, a deposed
//     leader's delayed cleanup that slipped through), the leader writes both
//     again. Without a leader nobody clears stale labels; a Service then
//     routes to whatever Pod still carries true, until a leader exists.
//   - The label is a routing hint, never a fence: for a moment two Pods may
//     both carry true (or none), and requests may reach a former leader. An
//     app that must not act twice checks the fencing token (package fence).
//   - Shutdown: when Run's context ends and the Pod may carry true (true was
//     written, or a write was in flight, or nothing is known yet), the
//     Labeler writes false once more, bounded by 2s, with a fresh context.
//     So on SIGTERM the sidecar removes traffic from itself before it goes.
//     After a crash (SIGKILL) the label stays until the next leader's
//     cleanup or the restarted sidecar's start-up repair, whichever is first.
//
// # RBAC
//
// The sidecar's ServiceAccount needs the verbs patch and list on pods (core
// API group) in its namespace: patch for its own label and for clearing the
// others', list for finding stale ones. A forbidden request is logged with
// the missing verb, a 404 of the own Pod at error level with the Pod's name
// (POD_NAME or the namespace is wrong); both are retried every RetryPeriod
// and counted in leasehold_pod_label_failures_total.
package podlabel
