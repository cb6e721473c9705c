package benchdoc

// Handover is handover.json: the leader address, the forwarding proxy and
// handover to a chosen successor.
type Handover struct {
	Run           Run      `json:"run"`
	Trials        int      `json:"trials"`
	LeaseDuration Duration `json:"leaseDuration"`
	RenewDeadline Duration `json:"renewDeadline"`
	RetryPeriod   Duration `json:"retryPeriod"`
	// Targets (issue 13).
	HandoverTarget Duration `json:"handoverTarget"`
	AddressTarget  Duration `json:"addressTarget"`
	AddedP50Target Duration `json:"addedP50Target"`
	AddedP99Target Duration `json:"addedP99Target"`
	// Rollouts are leasehold with HANDOVER=successor, leasehold's default,
	// then client-go's.
	Rollouts      []Rollout  `json:"rollouts"`
	Releases      Dist       `json:"releases"` // POST /v1/release?to= → the named member leads
	ReleaseOther  int        `json:"releaseOther"`
	ReleaseMisses int        `json:"releaseMisses"`
	ReleaseAddr   Address    `json:"releaseAddr"`
	Proxy         *Proxy     `json:"proxy,omitempty"`
	InProcess     *InProcess `json:"inProcess,omitempty"`
	Load          *UnderLoad `json:"load,omitempty"`
	Fencing       *Fenced    `json:"fencing,omitempty"`
	// The verdicts of leasehold's (HANDOVER=successor) figures.
	ChangesVerdict     Verdict `json:"changesVerdict"`
	HandoverVerdict    Verdict `json:"handoverVerdict"`
	ReleaseVerdict     Verdict `json:"releaseVerdict"`
	AddressVerdict     Verdict `json:"addressVerdict"`
	ReleaseAddrVerdict Verdict `json:"releaseAddrVerdict"`
	MissesVerdict      Verdict `json:"missesVerdict"`
}

// Rollout are one implementation's rolling updates.
type Rollout struct {
	Name      string  `json:"name"`
	Changes   Ints    `json:"changes"` // leadership changes per rollout
	Mean      float64 `json:"mean"`
	Exactly1  int     `json:"exactly1"`
	Handovers Dist    `json:"handovers"` // the leader's SIGTERM → another member leads
	ToNewest  int     `json:"toNewest"`
	Addr      Address `json:"addr"`
	Misses    int     `json:"misses"`
	NoLeader  int     `json:"noLeader"`
}

// Address is how soon followers named the successor's address.
type Address struct {
	Lag   Dist `json:"lag"`
	Wrong int  `json:"wrong"`
	None  int  `json:"none"`
}

// Proxy is the proxy's latency through real sidecars (to the
// microsecond).
type Proxy struct {
	Direct      Dist    `json:"direct"`
	ViaLeader   Dist    `json:"viaLeader"`
	ViaFollower Dist    `json:"viaFollower"`
	Failed      int     `json:"failed"` // answers not 200
	Verdict     Verdict `json:"verdict"`
}

// InProcess is the product's BenchmarkProxy in one process.
type InProcess struct {
	Requests    int      `json:"requests"`
	Err         string   `json:"err,omitempty"`
	Direct50    Duration `json:"direct50"`
	Direct99    Duration `json:"direct99"`
	Proxied50   Duration `json:"proxied50"`
	Proxied99   Duration `json:"proxied99"`
	Forwarded50 Duration `json:"forwarded50"`
	Forwarded99 Duration `json:"forwarded99"`
}

// UnderLoad is the graceful handovers under load on every proxy.
type UnderLoad struct {
	Trials       int     `json:"trials"`
	Window       Dist    `json:"window"`   // first refused request sent → last answered
	Handover     Dist    `json:"handover"` // SIGTERM → the successor leads
	WithRefusals int     `json:"withRefusals"`
	Longer       int     `json:"longer"` // trials whose window was longer than their handover
	Refused503   int     `json:"refused503"`
	Refused502   int     `json:"refused502"`
	Served       int     `json:"served"`
	OldRefused   int     `json:"oldRefused"`
	Errors       int     `json:"errors"`
	Misses       int     `json:"misses"`
	Verdict      Verdict `json:"verdict"`
}

// Fenced judges by their tokens the requests the apps served.
type Fenced struct {
	Apps    int     `json:"apps"`
	Judged  int     `json:"judged"`
	Direct  int     `json:"direct"`
	Stale   int     `json:"stale"`
	NoToken int     `json:"noToken"`
	NotOwn  int     `json:"notOwn"`
	Tokens  int     `json:"tokens"`
	Verdict Verdict `json:"verdict"`
}
