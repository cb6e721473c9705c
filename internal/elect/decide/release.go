package decide

import (
	"fmt"
	"log/slog"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/leasehold/leasehold/internal/fence"
)

// maxReleaseAttempts bounds the writes of a release that keeps conflicting
// with concurrent writers.
const maxReleaseAttempts = 5

// releasing is a release under way: wait for holds, then write, on the
// latest record this instance knows when that names it and no outcome is
// unknown, else (and after a conflict) on a fresh read.
type releasing struct {
	replies []uint64 // Release and SetCandidate inputs to answer when done
	// holdUntil, when set, is how long to wait for the ended term's holds
	// (HoldsCleared clears it): at most until that term's validity ends.
	holdUntil time.Time
	// onlyIfMine skips the read when nothing suggests this instance holds
	// the Lease (on Stop: the cache names someone else, and no acquire's
	// outcome is unknown).
	onlyIfMine bool
	to         string                // the successor the release is handed to; "" for anyone
	witness    string                // a write of to's: hand over in one write (HandedOverAnnotation)
	attempts   int                   // release writes that conflicted
	target     *coordinationv1.Lease // a record naming this instance: the release is conditioned on it
}

// leave ends the term, if any (reports say so before anything is written),
// and releases the Lease if it names this instance (planRelease),
// handed to successor to when set (in one write with witness); the caller
// id is answered when done. A release already under way goes on as it was
// asked.
func (m *Machine) leave(now time.Time, reason string, id uint64, to, witness string) {
	token, validUntil := m.lastToken(), m.validUntil()
	m.stepDown(now, reason, clearShield)
	if m.release == nil {
		m.startRelease(token, validUntil, false, to, witness)
	}
	m.release.replies = append(m.release.replies, id)
}

// startRelease begins a release, handed to successor to when set (in one
// write with witness). When token is not zero (a term just ended), it
// first waits for the holds on that term, at most until validUntil.
func (m *Machine) startRelease(token fence.Token, validUntil time.Time, onlyIfMine bool, to, witness string) {
	if to == "" || to == m.cfg.Identity {
		to, witness = "", ""
	}
	m.release = &releasing{onlyIfMine: onlyIfMine, to: to, witness: witness}
	if token != 0 {
		m.release.holdUntil = validUntil
		m.out.AwaitHolds = token
	}
}

// validUntil is the current term's validity end, zero when not leading.
func (m *Machine) validUntil() time.Time {
	if m.term == nil {
		return time.Time{}
	}
	return m.term.validUntil
}

// planRelease sends the release's next request, or ends it.
func (m *Machine) planRelease(now time.Time) {
	r := m.release
	if !r.holdUntil.IsZero() {
		if now.Before(r.holdUntil) {
			return // a hold on the ended term remains
		}
		r.holdUntil = time.Time{}
	}
	switch {
	case r.target != nil:
		m.send(now, ReleaseSend)
	case r.onlyIfMine && !m.namesMe() && !m.uncertain:
		m.finishRelease(false, nil)
	case r.attempts == 0 && m.namesMe() && !m.uncertain && !m.needRead:
		// The latest record this instance knows names it: write on it.
		// The precondition makes the write land only if that is still
		// the stored record; a conflict reads afresh.
		r.target = m.lease
		m.send(now, ReleaseSend)
	default:
		m.send(now, ReleaseRead)
	}
}

func (m *Machine) releaseReadResult(now time.Time, p *pending, r Result) {
	switch {
	case r.Err == nil && r.Lease != nil:
		m.observe(now, r.Lease, "", p)
		m.uncertain = false
		if holderOf(r.Lease) != m.cfg.Identity {
			m.finishRelease(false, nil) // not ours (any more): nothing to release
			return
		}
		m.release.target = r.Lease
	case apierrors.IsNotFound(r.Err):
		if !m.observe(now, nil, "", p) {
			return // an absence it cannot date: read again
		}
		m.uncertain = false
		m.finishRelease(false, nil)
	default:
		m.failed(now, ReleaseRead, "release: read the Lease", errOrEmpty(r.Err))
		m.finishRelease(false, fmt.Errorf("release: read the Lease: %w", errOrEmpty(r.Err)))
	}
}

func (m *Machine) releaseSendResult(now time.Time, p *pending, r Result) {
	m.release.target = nil
	switch {
	case r.Err == nil && r.Lease != nil:
		m.lastOwnRV = r.Lease.ResourceVersion
		m.observe(now, r.Lease, "", p)
		if h := holderOf(r.Lease); h != "" {
			m.logf(slog.LevelInfo, "handed the Lease over", "to", h)
		} else {
			m.logf(slog.LevelInfo, "released the Lease")
		}
		m.finishRelease(true, nil)
	case apierrors.IsConflict(r.Err):
		m.release.attempts++
		if m.release.attempts >= maxReleaseAttempts {
			m.finishRelease(false, fmt.Errorf("release: still conflicting after %d attempts", maxReleaseAttempts))
		}
		// else: written meanwhile; read again
	case apierrors.IsNotFound(r.Err):
		m.observe(now, nil, "", p)
		m.finishRelease(false, nil)
	default:
		// The write may have landed: as after an acquire whose answer was
		// lost, nothing is decided on the record before a fresh read.
		m.uncertain, m.needRead = true, true
		m.failed(now, ReleaseSend, "release", errOrEmpty(r.Err))
		m.finishRelease(false, fmt.Errorf("release: %w", errOrEmpty(r.Err)))
	}
}

// finishRelease answers the callers and ends the release.
func (m *Machine) finishRelease(released bool, err error) {
	if err != nil && m.stopping {
		m.logf(slog.LevelWarn, "release on shutdown failed; others take over when the Lease expires", "err", err)
	}
	for _, id := range m.release.replies {
		m.reply(id, released, err)
	}
	m.release = nil
}
