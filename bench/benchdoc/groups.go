package benchdoc

// Groups is groups.json: lease groups, leasehold beside one client-go
// LeaderElector per Lease.
type Groups struct {
	Run            Run      `json:"run"`
	Leases         int      `json:"leases"` // LEASEHOLD_SHARDS
	Members        int      `json:"members"`
	Trials         int      `json:"trials"`
	LeaseDuration  Duration `json:"leaseDuration"`
	RenewDeadline  Duration `json:"renewDeadline"`
	RetryPeriod    Duration `json:"retryPeriod"`
	Window         Duration `json:"window"`
	SampleInterval Duration `json:"sampleInterval"`
	// Quota is each member's fair share, Mean Leases / Members, Needed the
	// moves a scale-up from one member needs.
	Quota  int     `json:"quota"`
	Mean   float64 `json:"mean"`
	Needed int     `json:"needed"`
	// Targets: the scale-up settled, a graceful exit's p99, a crash's max;
	// LivenessBound is 3 × leaseDuration.
	SettleTarget   Duration `json:"settleTarget"`
	GracefulTarget Duration `json:"gracefulTarget"`
	CrashTarget    Duration `json:"crashTarget"`
	LivenessBound  Duration `json:"livenessBound"`
	// ObservedMin and ObservedMax bound when max / mean was read (after
	// the last member's start), over both implementations' trials.
	ObservedMin Duration `json:"observedMin"`
	ObservedMax Duration `json:"observedMax"`
	// Impls are leasehold's, then client-go's.
	Impls []GroupsImpl `json:"impls"`
	// FormulaRenew and FormulaMember are a holder's renewals and a
	// member's member-Lease renewals per minute.
	FormulaRenew  float64 `json:"formulaRenew"`
	FormulaMember float64 `json:"formulaMember"`
	// The verdicts of leasehold's figures.
	SettleVerdict   Verdict    `json:"settleVerdict"`
	MovesVerdict    Verdict    `json:"movesVerdict"`
	AfterVerdict    Verdict    `json:"afterVerdict"`
	BalanceVerdict  Verdict    `json:"balanceVerdict"`
	GracefulVerdict Verdict    `json:"gracefulVerdict"`
	CrashVerdict    Verdict    `json:"crashVerdict"`
	MissesVerdict   Verdict    `json:"missesVerdict"`
	OverlapVerdict  Verdict    `json:"overlapVerdict"`
	RequestsVerdict Verdict    `json:"requestsVerdict"`
	Big             *GroupsBig `json:"big,omitempty"`
}

// GroupsImpl are one implementation's figures over every trial.
type GroupsImpl struct {
	Name string `json:"name"`
	// Settled: last member's start → every member holds its share, of the
	// trials in which that happened; Never counts the others, and
	// ObservedP50 is the median observation when none settled.
	Settled     Dist     `json:"settled"`
	Never       int      `json:"never"`
	ObservedP50 Duration `json:"observedP50"`
	Moves       Ints     `json:"moves"`       // Lease moves during the scale-up
	MovesAfter  Ints     `json:"movesAfter"`  // Leases whose holder changed after settling
	MaxOverMean Floats   `json:"maxOverMean"` // at the end of the observation
	Held        [][]int  `json:"held"`        // Leases per member then, each trial, most first
	// Per Lease of the stopped member, every trial.
	Graceful            Dist          `json:"graceful"`
	GracefulToRelease   Dist          `json:"gracefulToRelease"`
	GracefulFromRelease Dist          `json:"gracefulFromRelease"`
	Crash               Dist          `json:"crash"`
	GracefulHeld        []int         `json:"gracefulHeld"`
	CrashHeld           []int         `json:"crashHeld"`
	GracefulMisses      int           `json:"gracefulMisses"`
	CrashMisses         int           `json:"crashMisses"`
	Probe               Dist          `json:"probe"` // one Lease write by the bench every 200ms
	OverlapLeases       int           `json:"overlapLeases"`
	LeaseTrials         int           `json:"leaseTrials"`
	Samples             int           `json:"samples"`
	Requests            GroupRequests `json:"requests"`
}

// Ints summarises a few counts: median (the upper one), min and max; N 0
// when there were none.
type Ints struct {
	N      int `json:"n"`
	Median int `json:"median"`
	Min    int `json:"min"`
	Max    int `json:"max"`
}

// Floats likewise.
type Floats struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// GroupRequests are the settled group's apiserver requests (trial 1), per
// minute over Window.
type GroupRequests struct {
	Window       Duration `json:"window"`
	Members      int      `json:"members"`
	Held         int      `json:"held"`
	Total        float64  `json:"total"`
	Formula      float64  `json:"formula"`
	ByVerb       []Verb   `json:"byVerb"`
	Renewals     float64  `json:"renewals"` // leasehold only
	Rest         float64  `json:"rest"`     // leasehold: total − renewals
	ShardWrites  float64  `json:"shardWrites"`
	MemberWrites float64  `json:"memberWrites"`
}

// Verb is one verb's requests per minute.
type Verb struct {
	Verb      string  `json:"verb"`
	PerMinute float64 `json:"perMinute"`
}

// GroupsBig is one process of each implementation holding a large group.
type GroupsBig struct {
	Leases        int       `json:"leases"`
	Window        Duration  `json:"window"`
	Windows       int       `json:"windows"`
	MaxRSS        float64   `json:"maxRSS"` // MiB
	MaxCPU        float64   `json:"maxCPU"` // percent of one core, median window
	NeedPerSecond float64   `json:"needPerSecond"`
	HeldAll       bool      `json:"heldAll"` // leasehold held every Lease in every sample
	Impls         []BigImpl `json:"impls"`
	RSSVerdict    Verdict   `json:"rssVerdict"`
	CPUVerdict    Verdict   `json:"cpuVerdict"`
	HeldVerdict   Verdict   `json:"heldVerdict"`
}

// BigImpl is one such process.
type BigImpl struct {
	Name             string   `json:"name"`
	RSS              float64  `json:"rss"` // MiB, median
	MemSamples       int      `json:"memSamples"`
	CPUWindow        Duration `json:"cpuWindow"` // every window, end to end
	CPU              Floats   `json:"cpu"`       // percent of one core, over the windows
	Held             Ints     `json:"held"`      // Leases held, over the samples
	AllAfter         Duration `json:"allAfter"`  // start → holding all; 0 when never
	UpdatesPerSecond float64  `json:"updatesPerSecond"`
	Errors           float64  `json:"errors"`
}
