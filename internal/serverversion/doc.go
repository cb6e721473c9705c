// Package serverversion reads the kube-apiserver's version once, at start,
// and says what it means for leasehold: whether the apiserver promises
// comparable resourceVersions (Kubernetes 1.35, KEP-5504), on which the
// fencing token's order rests, and whether it has native sidecars
// (Kubernetes 1.29), which the chart runs leasehold as.
//
// Assess is the decision, a pure function of the version; Checker does
// the read, logs the warnings once, and serves the result to the status
// and the metrics. A version that cannot be read is logged and changes
// nothing else: the sidecar runs as it would without the check.
package serverversion
