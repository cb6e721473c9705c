package benchdoc

// Fencing is fencing.json (bench/fencing): ConfigMap updates with the
// fencing policy and without, interleaved one for one on one apiserver,
// timed to the microsecond.
type Fencing struct {
	Run     Run  `json:"run"`
	Updates int  `json:"updates"` // on each side
	With    Dist `json:"with"`
	Without Dist `json:"without"`
}

// Node is node.json, written by test/node's TestMemoryBesideClientGo (in
// the product module) into the directory LEASEHOLD_BENCH_JSON names: the
// kubelet's working set of the chart's demo pod's containers on a real
// node. Sizes are bytes.
type Node struct {
	Run      Run      `json:"run"`
	Samples  int      `json:"samples"`  // median of this many
	Every    Duration `json:"every"`    // apart
	Rest     Duration `json:"rest"`     // at rest before sampling
	Watchers int      `json:"watchers"` // long-poll watches opened on leasehold
	Request  int64    `json:"request"`  // the chart's memory request
	Limit    int64    `json:"limit"`    // and limit
	// Idle and WithWatchers are leasehold's working set; Baseline the
	// client-go LeaderElector's, idle, in the same pod.
	Idle         int64 `json:"idle"`
	WithWatchers int64 `json:"withWatchers"`
	Baseline     int64 `json:"baseline"`
	Restarts     int32 `json:"restarts"` // of leasehold's container
}
