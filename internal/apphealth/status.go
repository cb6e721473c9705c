package apphealth

import "time"

// Status is the Prober's state after its latest completed probe. It is a
// value: the Prober never changes a Status it has handed out.
type Status struct {
	// Healthy is false until SuccessThreshold consecutive probes pass (the
	// first 2xx answer, with the default of 1), true from then on until
	// FailureThreshold consecutive probes fail, and so on.
	Healthy bool
	// ConsecutiveFailures counts the probes that failed since the last
	// success (or since the start); 0 right after a success.
	ConsecutiveFailures int
	// ConsecutiveSuccesses counts the probes that passed since the last
	// failure (or since the start); 0 right after a failure.
	ConsecutiveSuccesses int
	// Checks counts the completed probes, successful or not.
	Checks uint64
	// LastCheckAt is when the latest probe completed (zero before the
	// first); LastSuccessAt when the latest successful one did.
	LastCheckAt, LastSuccessAt time.Time
	// LastError describes why the latest probe failed ("status 503",
	// "timeout after 1s", or the transport error); "" after a success.
	LastError string
	// ChangedAt is when Healthy last changed (zero until the first success).
	ChangedAt time.Time
}

// Status returns the state after the latest completed probe. It is safe to
// call from any goroutine, before, during and after Run.
func (p *Prober) Status() Status { return *p.status.Load() }
