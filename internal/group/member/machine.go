package member

import (
	"fmt"
	"log/slog"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/leasehold/leasehold/internal/elect/decide"
)

// Machine is the state of one member of a lease group: its membership (the
// member Lease it keeps, the others' it follows) and its plan (which of
// its elections campaign). It is not safe for concurrent use: one
// goroutine (the driver's) owns it.
type Machine struct {
	cfg      Config
	name     string               // this member's member Lease
	serves   string               // ServesAnnotation, this member's own
	declines map[string]time.Time // this member's stay-outs, by Lease: ends on the local clock

	// Membership.
	records   map[string]record // by member Lease name
	live      []record          // view's scratch: the live records (empty between steps)
	ids       []string          // view's scratch: their identities
	listed    bool
	joinedAt  time.Time
	members   *Members              // as last published
	classes   []class               // of members: the Leases by the members that serve them
	natural   []int                 // this member's Leases, by index, in natural order of their names
	viewDirty bool                  // a record changed since the view was last computed
	viewUntil time.Time             // the view may change with no record changing then
	fit       bool                  // a member, as health-gated candidacy lets it be
	own       *coordinationv1.Lease // as last written, nil when not written
	renewAt   time.Time
	retryAt   time.Time // no member Lease write before this (after a failure)
	written   string    // DeclinedAnnotation as last written
	writes    []Write   // the latest writes, newest last
	pending   *pending
	collectAt map[string]time.Time // a member Lease whose collection failed is not tried again before this

	// Rank (Config.Ranked).
	rank        Rank      // this member's, as SetRank last gave it
	rankAt      time.Time // when it was observed
	writtenRank Rank      // the rank as last written, position aside (rankKey)

	// Plan.
	states    []LeaseState
	requested []bool // candidacy last asked of each election
	// left[i]: election i was last asked to leave (this instance is not a
	// member), so it refuses Leases handed to it; an election merely
	// withdrawn is outside this member's share and accepts them.
	left     []bool
	inflight []bool // a Call on that election is under way
	handedAt time.Time
	planWake time.Time
	wants    wants // the balanced plan's last candidacy, reused while its inputs stay the same
	// freeSince[i]: when Lease i became free (or will, at the end of the
	// claim last seen), for the rank deferral (Deferral).
	freeSince []time.Time

	stopping, stopped bool

	out Output // being built by the current Step
}

// pending is the member Lease request outstanding.
type pending struct {
	purpose  Purpose
	sentAt   time.Time // the write's first request's (Join's, for a Rejoin's read and the Renew after it)
	declined string    // DeclinedAnnotation the write carries
	rank     Rank      // the rank the write carries
	name     string    // the collected member Lease's name
}

// New returns a Machine for cfg. Feed it Start first.
func New(cfg Config) (*Machine, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	n := len(cfg.Leases)
	m := &Machine{
		cfg:       cfg,
		name:      LeaseName(cfg.Group, cfg.Identity),
		serves:    EncodeServes(cfg.Leases),
		declines:  map[string]time.Time{},
		records:   map[string]record{},
		collectAt: map[string]time.Time{},
		fit:       !cfg.StartUnfit,
		natural:   naturalOrder(cfg.Leases),
		states:    make([]LeaseState, n),
		requested: make([]bool, n),
		left:      make([]bool, n),
		inflight:  make([]bool, n),
		freeSince: make([]time.Time, n),
	}
	for i := range m.requested {
		m.requested[i] = !cfg.Balance && m.fit // a greedy member's electors start campaigning
	}
	return m, nil
}

// Step applies one input at the local time now and returns what to do.
// states are the latest states of this member's elections, in configured
// order (one per Config.Leases), as their electors report them at now:
// every step plans on them, so they must be current, not only the last
// noticeable ones (a holder's FreeAt moves with every renewal it writes).
// now must not go backwards between steps.
func (m *Machine) Step(now time.Time, states []LeaseState, in Input) Output {
	m.out = Output{}
	if m.stopped {
		m.out.Stopped = true
		return m.out
	}
	m.elections(states)
	records := len(m.records)
	m.handle(now, in)
	m.viewDirty = m.viewDirty || len(m.records) != records
	m.keep(now)
	m.publish(now)
	m.plan(now)
	m.out.Wake = m.nextWake(now)
	m.out.Stopped = m.stopped
	return m.out
}

// handle applies one input.
func (m *Machine) handle(now time.Time, in Input) {
	switch in := in.(type) {
	case Start, Tick:
	case Listed:
		fresh := map[string]record{}
		for i := range in.Items {
			l := &in.Items[i]
			if old, ok := m.records[l.Name]; ok && old.resourceVersion == l.ResourceVersion {
				fresh[l.Name] = old // the same version: its clock keeps running
				continue
			}
			fresh[l.Name] = recordOf(now, l, m.cfg.TTL, m.records[l.Name])
		}
		m.records, m.listed, m.viewDirty = fresh, true, true
	case Changed:
		m.observe(now, in.Lease)
	case Deleted:
		delete(m.records, in.Name)
	case Result:
		m.result(now, in)
	case CandidacyDone:
		if in.Lease >= 0 && in.Lease < len(m.inflight) {
			m.inflight[in.Lease] = false
		}
	case SetFit:
		if in.Fit != m.fit {
			m.logf(slog.LevelInfo, "group membership changed by health-gated candidacy", "member", in.Fit, "reason", in.Reason)
		}
		m.fit = in.Fit
	case Decline:
		m.declines[in.Lease] = in.Until
	case SetRank:
		if m.cfg.Ranked {
			m.rank, m.rankAt = in.Rank, in.ObservedAt
		}
	case Stop:
		if !m.stopping {
			m.stopping = true
			m.out.Heirs = make([]Heir, len(m.cfg.Leases))
			if m.cfg.Handover {
				m.out.Heirs = m.heirs(now)
			}
		}
	default:
		panic(fmt.Sprintf("member: unknown input %T", in))
	}
}

// observe records a member Lease as observed at now, unless it is stale.
func (m *Machine) observe(now time.Time, l *coordinationv1.Lease) {
	if old, ok := m.records[l.Name]; ok && !newerRV(l.ResourceVersion, old.resourceVersion) {
		return // stale or already known
	}
	m.records[l.Name] = recordOf(now, l, m.cfg.TTL, m.records[l.Name])
	m.viewDirty = true
}

// elections takes the elections' latest states and counts the moves.
func (m *Machine) elections(states []LeaseState) {
	if len(states) != len(m.states) {
		panic(fmt.Sprintf("member: %d election states for %d Leases", len(states), len(m.states)))
	}
	for i, s := range states {
		switch {
		case s.Leading && !m.states[i].Leading:
			m.out.Moves.In++
		case !s.Leading && m.states[i].Leading:
			m.out.Moves.Out++
		}
	}
	copy(m.states, states) // the driver may reuse its slice
}

// nextWake is when the Machine must step next: a renewal or a retry of
// the member Lease, a member's expiry or a stay-out's end, a collection
// coming due, or the plan's own wake.
func (m *Machine) nextWake(now time.Time) time.Time {
	wake := now.Add(m.cfg.TTL)
	at := func(t time.Time) {
		if t.After(now) && t.Before(wake) {
			wake = t
		}
	}
	if m.stopped {
		return wake
	}
	if m.pending == nil && m.fit && !m.stopping {
		if m.own == nil {
			at(m.retryAt)
		} else {
			at(latest(m.renewAt, m.retryAt))
		}
	}
	for name, r := range m.records {
		at(r.seenAt.Add(r.ttl))
		at(r.seenAt.Add(collectAfter * m.cfg.TTL))
		at(m.collectAt[name])
		for _, until := range r.declined {
			at(until) // a stay-out ends: plan without it
		}
	}
	for _, until := range m.declines {
		at(until) // write the annotation without it
	}
	at(m.planWake)
	return wake
}

func (m *Machine) logf(level slog.Level, msg string, args ...any) {
	m.out.Logs = append(m.out.Logs, decide.Log{Level: level, Msg: msg, Args: args})
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
