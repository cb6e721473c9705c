package benchdoc

// Footprint is footprint.json: one instance of each implementation at the
// sidecar's default configuration, and the floor (bench/floor).
type Footprint struct {
	Run Run `json:"run"`
	// Impls are leasehold, client-go LeaderElector, then any others
	// (GOMEMLIMIT, leasehold at -footprint-ref, -footprint-extra).
	Impls       []FootprintImpl `json:"impls"`
	Window      Duration        `json:"window"` // the idle window: CPU and RSS samples
	Watchers    int             `json:"watchers"`
	StatusConns int             `json:"statusConns"`
	StatusLen   Duration        `json:"statusLen"` // each round of GET /v1/status load
	UsedGroups  []string        `json:"usedGroups"`
	// Unused are the k8s.io/api groups leasehold links but does not use;
	// TypedVia the packages that bring client-go's typed clients in.
	Unused   []string `json:"unused"`
	TypedVia []string `json:"typedVia"`
	// MaxBinary, MaxIdleRatio (of client-go's idle RSS), MaxAdded, MaxCPU
	// (a share of one core) and MaxStart are the targets.
	MaxBinary    int64    `json:"maxBinary"`
	MaxIdleRatio float64  `json:"maxIdleRatio"`
	MaxAdded     float64  `json:"maxAdded"`
	MaxCPU       float64  `json:"maxCPU"`
	MaxStart     Duration `json:"maxStart"`
	// Ref names the column of leasehold at -footprint-ref, "" without one.
	Ref string `json:"ref,omitempty"`
	// The verdicts of leasehold's figures.
	BinaryVerdict   Verdict `json:"binaryVerdict"`
	PackagesVerdict Verdict `json:"packagesVerdict"`
	IdleVerdict     Verdict `json:"idleVerdict"`
	AddedVerdict    Verdict `json:"addedVerdict"`
	CPUVerdict      Verdict `json:"cpuVerdict"`
	StartVerdict    Verdict `json:"startVerdict"`
	Floor           Floor   `json:"floor"`
	Profile         Profile `json:"profile"`
}

// FootprintImpl are one binary's figures.
type FootprintImpl struct {
	Name        string `json:"name"`
	BinaryBytes int64  `json:"binaryBytes"`
	Packages    int    `json:"packages"` // go list -deps; 0 when unknown
	APIGroups   int    `json:"apiGroups"`
	Clientset   bool   `json:"clientset"`
	// IdleRSS and IdleAnon are medians over the idle window; WatchRSS the
	// median with the watchers open.
	IdleSamples  int      `json:"idleSamples"`
	IdleRSS      float64  `json:"idleRSS"`
	IdleAnon     float64  `json:"idleAnon"`
	WatchSamples int      `json:"watchSamples"`
	WatchRSS     float64  `json:"watchRSS"`
	CPU          Duration `json:"cpu"` // CPU time over CPUWindow
	CPUWindow    Duration `json:"cpuWindow"`
	CPUShare     float64  `json:"cpuShare"`
	Starts       Dist     `json:"starts"` // process start → /readyz 200
	Rounds       int      `json:"rounds"`
	Rate         float64  `json:"rate"` // median round's GET /v1/status throughput
	Latency      Dist     `json:"latency"`
}

// Floor are the floor program's figures (bench/floor).
type Floor struct {
	IdleRSS  float64  `json:"idleRSS"`
	WatchRSS float64  `json:"watchRSS"`
	Before   MemStats `json:"before"` // after GC, without the watchers
	After    MemStats `json:"after"`  // and with them
}

// MemStats is the Go runtime's view after garbage collection.
type MemStats struct {
	HeapInuse  float64 `json:"heapInuse"`
	StackInuse float64 `json:"stackInuse"`
	Goroutines float64 `json:"goroutines"`
}

// Profile is leasehold's runtime view, from an instance run with
// LEASEHOLD_PPROF.
type Profile struct {
	Before     MemStats     `json:"before"`
	After      MemStats     `json:"after"`
	IdleTop    string       `json:"idleTop"`    // go tool pprof -top of the heap in use, idle
	HeapTop    string       `json:"heapTop"`    // ... added by the watchers
	Goroutines []Goroutines `json:"goroutines"` // with the watchers open, most first
}

// Goroutines counts the goroutines waiting in one place.
type Goroutines struct {
	Where string `json:"where"`
	Count int    `json:"count"`
}
