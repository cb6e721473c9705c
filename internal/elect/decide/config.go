package decide

import (
	"errors"
	"fmt"
	"math/bits"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/rule"
)

// Config describes one candidate for one Lease.
type Config struct {
	// Namespace and Name locate the Lease.
	Namespace, Name string
	// Identity is this candidate's holderIdentity. It must be unique among
	// all candidates and across restarts: a record naming it is taken to be
	// this instance's own write.
	Identity string

	// LeaseDuration is how long others wait, after first observing a
	// version of the record, before they take it. Whole seconds.
	LeaseDuration time.Duration
	// RenewDeadline is how long a term stays valid after the send time of
	// its last successful write.
	RenewDeadline time.Duration
	// RetryPeriod is the interval between renewals, between polls when the
	// watch is unavailable, and the first backoff after an error.
	RetryPeriod time.Duration

	// ReleaseOnStop releases the Lease on Stop when this instance holds it.
	ReleaseOnStop bool
	// StartWithdrawn starts out of the election, until SetCandidate(true).
	StartWithdrawn bool
	// AcceptHandovers takes a Lease handed to this instance
	// (HandedOverAnnotation) even while it is withdrawn, though never
	// while it stays out (Release) or stops. A balanced lease group sets
	// it: its planner withdraws each elector from the Leases outside the
	// member's share, and decides, once the Lease is held, whether the
	// member keeps it. Without it, or after SetCandidate.RefuseHandovers
	// (the member is out of the group), a withdrawn instance releases a
	// record handed to it.
	AcceptHandovers bool
	// AdvertiseAddress, when set, is where others reach this instance
	// (host:port). It is written on every acquire and renewal
	// (LeaderAddressAnnotation), and taken off by the release, so that every
	// instance can report the current holder's address.
	AdvertiseAddress string
	// FencingFloor makes every write that starts a term (an acquire, a
	// handover) publish fence.FloorAnnotation: the replaced record's
	// resourceVersion + 1, a floor for the new term's token that is above
	// every earlier term's, so that an admission policy comparing tokens
	// with the Lease (leasehold fencing-policy) refuses the earlier terms'
	// writes from the acquiring write on instead of from the first renewal.
	// Without it, a term-starting write takes any floor off.
	FencingFloor bool
	// PublishGeneration writes the generation SetGeneration last gave (the
	// app's rank, for data-aware failover) on every acquire and renewal
	// (GenerationAnnotation), so that the candidates know the last
	// leader's when it is gone. Off, the annotation is left as it is.
	PublishGeneration bool
}

// Validate checks c's rules and returns the first broken one as a
// *rule.Error naming the fields it relates, with their values:
//
//   - Namespace, Name and Identity are set;
//   - LeaseDuration is a whole number of seconds, at least 1s (the Lease
//     stores whole seconds);
//   - RetryPeriod is greater than 0;
//   - RenewDeadline is greater than 1.2 × RetryPeriod (client-go's rule);
//   - RenewDeadline + RetryPeriod is less than LeaseDuration, the rule
//     client-go omits: otherwise a leader can still believe it leads after
//     the others have judged its lease expired;
//   - AdvertiseAddress, when set, is host:port (see ValidateAddress).
//
// The relations are computed exactly: no duration overflows them.
func (c *Config) Validate() error {
	var (
		namespace = rule.Field{Name: "Namespace", Label: "namespace", Value: c.Namespace}
		name      = rule.Field{Name: "Name", Label: "name", Value: c.Name}
		identity  = rule.Field{Name: "Identity", Label: "identity", Value: c.Identity}
		lease     = rule.Field{Name: "LeaseDuration", Label: "leaseDuration", Value: c.LeaseDuration}
		renew     = rule.Field{Name: "RenewDeadline", Label: "renewDeadline", Value: c.RenewDeadline}
		retry     = rule.Field{Name: "RetryPeriod", Label: "retryPeriod", Value: c.RetryPeriod}
		advertise = rule.Field{Name: "AdvertiseAddress", Label: "advertise address", Value: c.AdvertiseAddress}
	)
	switch {
	case c.Namespace == "":
		return rule.Errorf(component, "the Lease's %s is required", namespace)
	case c.Name == "":
		return rule.Errorf(component, "the Lease's %s is required", name)
	case c.Identity == "":
		return rule.Errorf(component, "%s is required", identity)
	case c.LeaseDuration < time.Second || c.LeaseDuration%time.Second != 0:
		return rule.Errorf(component, "%s must be a whole number of seconds and at least 1s", lease)
	case c.RetryPeriod <= 0:
		return rule.Errorf(component, "%s must be greater than 0", retry)
	// 5·renew > 6·retry, in 128 bits.
	case c.RenewDeadline <= 0 || !mulGreater(uint64(c.RenewDeadline), 5, uint64(c.RetryPeriod), 6):
		return rule.Errorf(component, "%s must be greater than 1.2 × %s", renew, retry)
	// All three are positive here: leaseDuration - renewDeadline cannot
	// overflow.
	case c.RetryPeriod >= c.LeaseDuration-c.RenewDeadline:
		return rule.Errorf(component, "%s + %s must be less than %s", renew, retry, lease)
	case c.AdvertiseAddress != "":
		if err := ValidateAddress(c.AdvertiseAddress); err != nil {
			return rule.Errorf(component, "%s %v", advertise, err)
		}
	}
	return nil
}

// ValidateAddress checks that address is host:port, as a client dials it:
// a host (a name, an IPv4 address, or an IPv6 address in brackets) that is
// neither empty nor holds spaces, and a port from 1 to 65535. The error
// says what is wrong, without naming the setting.
func ValidateAddress(address string) error {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("must be host:port (%v)", err)
	}
	if host == "" || strings.ContainsAny(host, " \t\r\n/") {
		return errors.New("must be host:port with a host (a DNS name or an IP address)")
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return errors.New("must be host:port with a port from 1 to 65535")
	}
	return nil
}

// component prefixes the messages of Validate.
const component = "decide"

// mulGreater reports whether a·ka > b·kb, exactly.
func mulGreater(a, ka, b, kb uint64) bool {
	ahi, alo := bits.Mul64(a, ka)
	bhi, blo := bits.Mul64(b, kb)
	return ahi > bhi || (ahi == bhi && alo > blo)
}

// maxBackoff caps the delay before a candidate retries after an error:
// long enough that a persistent error (a missing namespace, a 403) costs
// one request every few seconds, short enough that a healed partition is
// noticed within a few retry periods.
func (c *Config) maxBackoff() time.Duration {
	return min(c.LeaseDuration, 4*c.RetryPeriod)
}
