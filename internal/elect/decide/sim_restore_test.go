package decide

import "time"

// maxSnapshots is how many of its latest snapshots a history keeps to
// restore from.
const maxSnapshots = 8

// takeSnapshots takes a snapshot of the store now, as a backup of etcd
// would, and again every 0.25–1 lease durations until the faults end.
func (s *sim) takeSnapshots() {
	if s.now >= s.params.duration {
		return
	}
	s.snapshots = append(s.snapshots, s.store.snapshot())
	if len(s.snapshots) > maxSnapshots {
		s.snapshots = s.snapshots[1:]
	}
	lease := s.params.timing.LeaseDuration
	s.at(s.now+time.Duration((0.25+0.75*s.rng.Float64())*float64(lease)), s.takeSnapshots)
}

// restore restores etcd from one of the snapshots kept, as an admin does
// with etcdutl snapshot restore, half the time with --bump-revision (the
// documented way: later writes take revisions above every earlier one)
// and half the time without (later writes reuse the revisions written
// since the snapshot). Either way the Lease is the snapshot's again, with
// its resourceVersion and UID, and so are the member Leases (writes since
// the snapshot are gone: no leaver observes them any more); every watch is
// cut off (--mark-compacted), and lists again. Snapshots taken after the
// one restored were of a timeline that no longer is, and are dropped.
func (s *sim) restore() {
	if len(s.snapshots) == 0 {
		return
	}
	i := s.rng.IntN(len(s.snapshots))
	snap := s.snapshots[i]
	s.snapshots = s.snapshots[:i+1]
	var bump int64
	if s.rng.IntN(2) == 0 {
		bump = 1 + s.rng.Int64N(200)
	}
	s.store.restore(snap, bump)
	s.tracef("etcd restored from the snapshot at revision %d (the Lease %s), bump-revision %d: the revision is %d",
		snap.rev, describeLease(snap.lease, ""), bump, s.store.rev)
	for _, in := range s.instances {
		kept := in.members[:0]
		for _, rv := range in.members {
			if int64(tokenOf(rv)) <= snap.rev {
				kept = append(kept, rv)
			}
		}
		in.members = kept
	}
	s.check.restored(bump > 0)
	for _, in := range s.instances {
		if in.alive {
			s.breakWatch(in, "etcd restored: watch compacted")
		}
	}
}

// landed is told that a write of an instance's landed. In histories with
// restores, one write in ten is followed at once by a restore, so that its
// answer (and others in flight) comes from a timeline that no longer is.
func (s *sim) landed() {
	if s.params.restores && s.now < s.params.duration && s.rng.IntN(10) == 0 {
		s.at(s.now, s.restore)
	}
}

// quietTail starts the quiet tail's recovery probe once every fault is in
// and the store's revision is above every revision written before a
// restore without --bump-revision: until then an instance rightly refuses
// a term whose token is not above a resourceVersion it saw, so liveness is
// judged only from there on. Meanwhile other objects' writes move the
// revision on, as they do in any cluster.
func (s *sim) quietTail() {
	p := s.params
	if s.store.rev <= s.store.peak {
		s.store.bump(1 + s.rng.Int64N(50))
		s.check.disturbed(s.now)
		s.end = max(s.end, s.now+p.quiet)
		if s.now > p.duration+maxCatchUp*p.timing.LeaseDuration {
			s.check.fail("the revision is still %d, not above %d, %v after the faults ended", s.store.rev, s.store.peak, s.now-p.duration)
			return
		}
		s.at(s.now+p.timing.RetryPeriod, s.quietTail)
		return
	}
	probeAt := s.check.quietFrom + s.check.livenessBound()
	s.end = probeAt + s.check.probeBound() + 3*p.timing.LeaseDuration
	s.at(probeAt, s.startProbe)
}

// maxCatchUp bounds, in lease durations, how long the store's revision
// may take to pass the largest one written before a restore without
// --bump-revision: member Lease writes move it on every retryPeriod or so.
const maxCatchUp = 100
