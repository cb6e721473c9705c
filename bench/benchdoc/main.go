package benchdoc

// Main is main.json: the election table of a full run (make bench), the
// localhost HTTP API's figures and the app-aware features.
type Main struct {
	Run           Run      `json:"run"`
	LeaseDuration Duration `json:"leaseDuration"`
	RenewDeadline Duration `json:"renewDeadline"`
	RetryPeriod   Duration `json:"retryPeriod"`
	// Impls are leasehold's figures, then client-go LeaderElector's.
	Impls []MainImpl `json:"impls"`
	// Expiry is leaseDuration + retryPeriod, the failover's target.
	Expiry Duration `json:"expiry"`
	// RenewalsPerMinute is the target of the leader's requests: one write
	// per retryPeriod.
	RenewalsPerMinute float64 `json:"renewalsPerMinute"`
	HTTP              HTTP    `json:"http"`
	// Plot is the latency plot written beside the document, "" for none.
	Plot string `json:"plot,omitempty"`
	// App is absent when the app-aware trials were skipped.
	App *App `json:"app,omitempty"`
}

// MainImpl are one implementation's election figures.
type MainImpl struct {
	Name      string `json:"name"`
	Handovers Dist   `json:"handovers"` // SIGTERM to the leader → a successor's GET /v1/leader answers 200
	Failovers Dist   `json:"failovers"` // SIGKILL → likewise
	// Requests are counted from leasehold_kube_requests_total over RequestWindow.
	RequestWindow              Duration `json:"requestWindow"`
	LeaderRequestsPerMinute    float64  `json:"leaderRequestsPerMinute"`
	CandidateRequestsPerMinute float64  `json:"candidateRequestsPerMinute"` // per candidate
	LeaderRequests             float64  `json:"leaderRequests"`             // over the window
	LeaderGets                 float64  `json:"leaderGets"`
	Renewals                   float64  `json:"renewals"` // leasehold only: renew writes over the window; 0 for client-go
	Misses                     int      `json:"misses"`   // handover and failover trials with no successor within 3 × leaseDuration
	Restarts                   int      `json:"restarts"` // groups restarted because nobody led
}

// HTTP are the figures of leasehold's localhost HTTP API, one sidecar.
type HTTP struct {
	StatusConns     int     `json:"statusConns"`
	StatusRate      float64 `json:"statusRate"` // closed loop, requests per second
	Status          Dist    `json:"status"`
	OfferedRate     int     `json:"offeredRate"`
	PacedRate       float64 `json:"pacedRate"` // achieved at OfferedRate
	Paced           Dist    `json:"paced"`
	Watchers        int     `json:"watchers"`
	Wake            Dist    `json:"wake"` // Lease change → each watcher answered
	RSSIdle         int64   `json:"rssIdle"`
	RSSWithWatchers int64   `json:"rssWithWatchers"`
}

// App are the app-aware features' figures (leasehold only).
type App struct {
	Trials int `json:"trials"`
	// The health-gated candidacy trials: the probes' settings, and the
	// leader's app failing → another instance leads.
	Interval    Duration `json:"interval"`
	Timeout     Duration `json:"timeout"`
	Threshold   int      `json:"threshold"`
	Takeovers   Dist     `json:"takeovers"`
	Misses      int      `json:"misses"`      // no successor within threshold × interval + 3 × leaseDuration
	StillLeader int      `json:"stillLeader"` // the old leader still said leader: true once its successor led
	// DetectMin and DetectMax bound the detection: (threshold − 1) ×
	// interval and threshold × interval; Expiry is leaseDuration +
	// retryPeriod.
	DetectMin Duration `json:"detectMin"`
	DetectMax Duration `json:"detectMax"`
	Expiry    Duration `json:"expiry"`
	// HandoverP50 is the election table's leasehold handover p50, 0 when
	// it has none.
	HandoverP50 Duration `json:"handoverP50"`
	Label       string   `json:"label"` // LEASEHOLD_POD_LABEL
	// LabelHandovers (SIGTERM) and LabelFailovers (SIGKILL) are the
	// leader-label trials.
	LabelHandovers LabelTrials `json:"labelHandovers"`
	LabelFailovers LabelTrials `json:"labelFailovers"`
}

// LabelTrials are one kind of leader-label trial.
type LabelTrials struct {
	Lead     Dist `json:"lead"`     // signal → the successor leads
	Labelled Dist `json:"labelled"` // signal → the labels are exactly right
	Lag      Dist `json:"lag"`      // labelled − lead
	Misses   int  `json:"misses"`   // no successor within 3 × leaseDuration
	Wrong    int  `json:"wrong"`    // labels not exactly right within 3 × leaseDuration of the successor leading
}

// Overlap is overlap.json: the partition and pause trials.
type Overlap struct {
	Run            Run      `json:"run"`
	LeaseDuration  Duration `json:"leaseDuration"`
	RenewDeadline  Duration `json:"renewDeadline"`
	RetryPeriod    Duration `json:"retryPeriod"`
	SampleInterval Duration `json:"sampleInterval"`
	Expiry         Duration `json:"expiry"` // leaseDuration + retryPeriod
	// Impls are leasehold's, then client-go LeaderElector's.
	Impls []OverlapImpl `json:"impls"`
}

// OverlapImpl are one implementation's fault trials.
type OverlapImpl struct {
	Name      string `json:"name"`
	Partition Faults `json:"partition"`
	Pause     Faults `json:"pause"`
}

// Faults count what the trials of one fault showed.
type Faults struct {
	Trials     int  `json:"trials"`
	Overlaps   int  `json:"overlaps"`   // trials with two instances leading at once, with certainty
	FirstAfter int  `json:"firstAfter"` // the deposed leader's first answer after the fault said leader: true
	Misses     int  `json:"misses"`     // no successor within 3 × leaseDuration
	Recoveries Dist `json:"recoveries"` // fault → a successor leads
}
