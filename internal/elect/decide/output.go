package decide

import (
	"log/slog"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/leasehold/leasehold/internal/fence"
)

// Output is what one Step asks the driver to do, in this order: log, count,
// answer Replies, publish Report (before the request leaves: nobody may read
// "leader" while a release is written), start AwaitHolds, send Request.
type Output struct {
	// Request is the API request to send now, nil for none. A Machine has
	// at most one request outstanding: it asks for no other until it has
	// been given the Result of this one.
	Request *Request
	// Wake is when to feed a Tick at the latest: unless Stopped, always
	// after the step's own time (the step did all that was due then), so
	// never the zero time.
	Wake time.Time
	// Replies answer Release and SetCandidate inputs.
	Replies []Reply
	// AwaitHolds, when not zero, asks to be told (HoldsCleared) once no
	// hold on the term with this token remains. The Machine waits for it at
	// most until that term's validity ends.
	AwaitHolds fence.Token
	// Logs are the log lines of this step.
	Logs []Log
	// Counts are the events of this step, for metrics.
	Counts Counts
	// Report is the state to publish.
	Report Report
	// Stopped is set once, after Stop, when nothing is left to do.
	Stopped bool
	// Fatal, when set, means the election cannot go on safely.
	Fatal error
}

// Verb is the API verb of a Request.
type Verb string

const (
	Get    Verb = "get"
	Create Verb = "create"
	Update Verb = "update"
)

// Purpose is why a Request is sent.
type Purpose string

const (
	Read        Purpose = "read"         // Get: learn the Lease's state
	Placeholder Purpose = "create"       // Create: an empty record to acquire
	Acquire     Purpose = "acquire"      // Update: start a term
	Renew       Purpose = "renew"        // Update: extend the term
	ReleaseRead Purpose = "release-read" // Get: does this instance hold it?
	ReleaseSend Purpose = "release"      // Update: the signed release
)

// Request is one API request on the Lease. Lease is the body of a Create or
// Update (with the resourceVersion precondition of an Update), nil for Get.
type Request struct {
	Verb    Verb
	Purpose Purpose
	Lease   *coordinationv1.Lease
}

// Reply answers the Release or SetCandidate input with the same ID.
type Reply struct {
	ID       uint64
	Released bool // a release was written
	Err      error
}

// Log is one log line.
type Log struct {
	Level slog.Level
	Msg   string
	Args  []any
}

// Counts are the events of one step.
type Counts struct {
	HolderChanges int // the Lease's holder changed, as observed
	RenewFailures int // renew writes that failed
	Errors        int // requests that failed with an error (not a conflict): see Report.LastError
}

// Report is the election state as published to readers.
type Report struct {
	// Leading is true while this instance holds a term; ValidUntil is its
	// validity's end (local clock), zero unless Leading.
	Leading    bool
	ValidUntil time.Time

	Holder string      // the Lease's holder, "" when none or unknown
	Term   int32       // leaseTransitions of the holder's term; people only
	Token  fence.Token // the current term's token: own when leading, else the holder's, as seen on its acquire or credibly published; 0 when unknown
	// LeaderAddress is the holder's advertised address (its
	// Config.AdvertiseAddress): own when leading, else as the holder wrote
	// it on the record; "" when it has none or there is no holder. It says
	// nothing of validity: a holder leads validly only before FreeAt.
	LeaderAddress string
	// Generation is the generation last published on the record
	// (GenerationAnnotation), this instance's own while it leads and knows
	// one; "" when none. It is the reference of a successor's rank.
	Generation string
	// ReservedFor is the successor a signed release was handed to, while
	// it goes first (others wait until FreeAt); "" otherwise. It is this
	// instance's own identity when the Lease was handed to it.
	ReservedFor string
	// HandedOver is true while the record names this instance and was
	// written by the previous holder, handing the Lease over
	// (HandedOverAnnotation): until this instance's first write on it.
	HandedOver bool

	AcquiredAt time.Time // the Lease's acquireTime, as written by the holder
	RenewedAt  time.Time // the Lease's renewTime, as written by the holder
	ObservedAt time.Time // local time this instance first observed the current version
	// FreeAt is when the record becomes free for this instance to take, as
	// it judges the claim of the holder (or of a holder it may not have
	// seen) on the current version: zero when it is free now, missing, or
	// this instance's own. A holder other than this instance leads validly,
	// as far as this instance can tell, only before FreeAt.
	FreeAt time.Time

	Observed  bool      // the Lease has been read, or found missing, at least once
	WatchUp   bool      // a watch on the Lease is open
	Candidate bool      // campaigning or leading: not withdrawn, not staying out, not stopping
	Heartbeat time.Time // local time of this step

	// LastError is the last failed request's error, "" once a later
	// request succeeded; LastErrorAt is when it failed.
	LastError   string
	LastErrorAt time.Time
}
