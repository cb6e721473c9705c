package member

import "time"

// plan asks each election for the candidacy the plan wants, one Call at a
// time per election (Output.Calls), and sets the plan's own wake: while a
// member, balanced (balanced) or greedy (every Lease; with Ranked, not
// those it defers on to a better-ranked member: deferrals); while not (unfit),
// none, leaving each election with its Lease handed to its heir when
// Handover is set. A Lease handed to this member while it was withdrawn
// from it (decide.Config.AcceptHandovers) and not wanted is withdrawn
// again. A stopping member asks nothing: its elections stop.
func (m *Machine) plan(now time.Time) {
	m.planWake = time.Time{}
	if m.stopping {
		return
	}
	var want []bool
	switch {
	case !m.fit:
		want = make([]bool, len(m.cfg.Leases))
	case !m.cfg.Balance:
		want = make([]bool, len(m.cfg.Leases))
		for i := range want {
			want[i] = true
		}
		if m.cfg.Ranked {
			m.deferrals(now, want)
		}
	default:
		if HandedTo(m.cfg.Identity, m.states) {
			m.handedAt = now
		}
		var ok bool
		if want, m.planWake, ok = balanced(m.cfg.Identity, now, m.members, m.classes, m.states, m.cfg.Settle, m.handedAt, &m.wants); !ok {
			m.planWake = time.Time{}
			return // too early to judge: change nothing
		}
	}
	leave := !m.fit
	var heirs []Heir
	for i, w := range want {
		handedUnwanted := !w && m.states[i].Leading
		if (w == m.requested[i] && leave == m.left[i] && !handedUnwanted) || m.inflight[i] {
			continue
		}
		m.requested[i], m.left[i], m.inflight[i] = w, leave, true
		call := Call{Lease: i, Candidate: w, Leave: leave, Reason: "this Lease is in this member's share"}
		switch {
		case leave:
			call.Reason = "not a member"
			if m.cfg.Handover && heirs == nil {
				heirs = m.heirs(now) // leaving the group: hand over, as on shutdown
			}
			if heirs != nil {
				call.To = heirs[i]
			}
		case !w:
			call.Reason = "this Lease is not in this member's share"
		}
		m.out.Calls = append(m.out.Calls, call)
	}
}

// heirs are whom this member hands each Lease to when it leaves, as its
// view says at now (a zero Heir: to anyone): in a balanced group, the heir
// the fair share among the others gives it (heirs); otherwise the best
// Successor among the members that serve it and do not decline it. Each
// witness is that member's member Lease as observed.
func (m *Machine) heirs(now time.Time) []Heir {
	out := make([]Heir, len(m.cfg.Leases))
	var to []string
	if m.cfg.Balance {
		to = heirs(m.cfg.Identity, now, m.members, m.classes, m.states)
	}
	for i := range out {
		if to != nil {
			out[i] = heirOf(m.members, to[i])
		} else {
			out[i] = heirOf(m.members, Successor(m.cfg.Identity, m.cfg.Leases[i], m.states[i].Generation, m.members))
		}
	}
	return out
}

// deferrals withdraws from want, at now, the Leases this member defers on
// to a better-ranked live member (Deferral), and wakes the plan when the
// first deferral ends. It first dates when each Lease became free
// (freeSince): the end of the claim last seen, or now for a Lease found
// free before that end (a release).
func (m *Machine) deferrals(now time.Time, want []bool) {
	step := RankDeferStep(m.cfg.TTL)
	for i, s := range m.states {
		switch {
		case !s.FreeAt.IsZero():
			m.freeSince[i] = s.FreeAt
		case m.freeSince[i].IsZero() || m.freeSince[i].After(now):
			m.freeSince[i] = now
		}
		until, ok := Deferral(m.cfg.Identity, m.rank, s, m.freeSince[i], m.members, step)
		if !ok || !now.Before(until) {
			continue
		}
		want[i] = false
		if m.planWake.IsZero() || until.Before(m.planWake) {
			m.planWake = until
		}
	}
}
