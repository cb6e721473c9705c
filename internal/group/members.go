package group

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/leasehold/leasehold/internal/elect"
)

// MemberLabel marks a member Lease with the name of its group.
const MemberLabel = "leasehold.io/member-of"

// MemberLeaseName is the name of identity's member Lease in group: the
// group's name, "-member-", and 16 hex digits of a SHA-256 of the identity
// (identities need not be valid object names).
func MemberLeaseName(group, identity string) string {
	sum := sha256.Sum256([]byte(identity))
	return group + "-member-" + hex.EncodeToString(sum[:8])
}

// LeaseClient is what a group needs of a client of the Leases of its
// namespace: an election's needs, plus Delete for the member Lease.
type LeaseClient interface {
	elect.LeaseClient
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// Members is the group's membership as one instance sees it at a moment.
// Immutable.
type Members struct {
	// Identities are the live members, sorted.
	Identities []string
	// JoinedAt is the local time a member last joined (appeared among
	// Identities), zero when none has.
	JoinedAt time.Time
	// Listed is true once the member Leases have been listed: before that,
	// Identities says nothing.
	Listed bool
	// Declined are, per live member, the Leases it stays out of now
	// (DeclinedAnnotation); nil when none.
	Declined map[string][]string
	// Info is what each live member publishes about itself, by identity.
	Info map[string]MemberInfo
	// Versions are the resourceVersions of the live members' member Leases
	// as observed, by identity: the witness of a handover in one write
	// (elect.Heir.Witness). A change of them alone is not notified.
	Versions map[string]string
}

// MemberInfo is what a member publishes on its member Lease for the choice
// of a successor (Successor).
type MemberInfo struct {
	// Priority is the member's LEASEHOLD_PRIORITY (PriorityAnnotation); 0
	// when absent or not an integer.
	Priority int64
	// StartedAt is when the member's process started, by its own wall
	// clock (StartedAtAnnotation); zero when absent or malformed.
	StartedAt time.Time
}

// membership keeps this instance's member Lease while it is a member, and
// follows the group's member Leases (list and watch by MemberLabel).
//
// A member is live, in this instance's view, from the moment a version of
// its member Lease is observed until that version has been observed for
// the record's leaseDurationSeconds: local time only, as for elections, so
// clock offsets between nodes do no harm. A member renews every third of
// its TTL, and deletes its Lease when it leaves (unfit, or shutting down),
// so the others see it go within a round trip. Membership decides who
// campaigns for what, never who may lead: that stays with each Lease's
// election, so a wrong view costs balance, never safety.
type membership struct {
	group, identity, name string
	ttl                   time.Duration
	leases                LeaseClient
	clock                 clock.WithTicker
	log                   *slog.Logger
	timeout               time.Duration // bound of each request
	notify                chan<- struct{}
	declines              *declines  // this member's own, written on its member Lease
	info                  MemberInfo // this member's own, written on its member Lease

	current atomic.Pointer[Members]
	sent    atomic.Pointer[[]memberWrite] // this member's latest writes, newest last (sentAt)
	wanted  atomic.Bool                   // be a member: set by setMember
	wake    chan struct{}                 // capacity 1: wanted changed

	// Owned by run.
	records  map[string]memberRecord // by Lease name
	joinedAt time.Time
	listed   bool
	want     bool                  // be a member, as last read from wanted
	own      *coordinationv1.Lease // as last written, nil when not written
	renewAt  time.Time
	written  string // DeclinedAnnotation as last written
}

// memberWrite is one of this member's writes of its member Lease: the
// resourceVersion it got, and the local time before it was sent.
type memberWrite struct {
	version string
	sentAt  time.Time
}

// keptWrites is how many of its latest member Lease writes a member
// remembers for sentAt: a leaver names the version of it that it observed,
// which may be a renewal or two behind.
const keptWrites = 4

// sentAt is when this member sent the write of its member Lease that got
// resourceVersion version (local time, before sending), if it is one of
// the latest it made. Safe for concurrent use; it never blocks.
func (m *membership) sentAt(version string) (time.Time, bool) {
	if writes := m.sent.Load(); writes != nil {
		for _, w := range *writes {
			if w.version == version {
				return w.sentAt, true
			}
		}
	}
	return time.Time{}, false
}

// wrote remembers a write of the member Lease (sentAt).
func (m *membership) wrote(version string, sentAt time.Time) {
	var writes []memberWrite
	if old := m.sent.Load(); old != nil {
		writes = *old
	}
	writes = append(slices.Clone(writes[max(len(writes)-keptWrites+1, 0):]), memberWrite{version, sentAt})
	m.sent.Store(&writes)
}

// memberRecord is one member Lease as observed.
type memberRecord struct {
	identity        string
	resourceVersion string
	seenAt          time.Time
	ttl             time.Duration
	declined        map[string]time.Time // ends of its stay-outs, on this instance's clock (localDeclines)
	info            MemberInfo
}

func (r memberRecord) liveAt(now time.Time) bool {
	return r.identity != "" && now.Before(r.seenAt.Add(r.ttl))
}

// memberEvent is what the watcher saw.
type memberEvent struct {
	list    []coordinationv1.Lease // a fresh list: replaces all records
	listed  bool
	lease   *coordinationv1.Lease // added or modified
	deleted string                // name of a deleted member Lease
}

func (m *membership) load() *Members { return m.current.Load() }

// identities are the live members; none before the first publish.
func (m *Members) identities() []string {
	if m == nil {
		return nil
	}
	return m.Identities
}

// setMember asks the loop to join (true) or leave (false). It never
// blocks.
func (m *membership) setMember(member bool) {
	m.wanted.Store(member)
	m.poke()
}

// poke wakes the loop: membership wanted, or this member's declines,
// changed. It never blocks.
func (m *membership) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// run keeps membership until ctx ends, then deletes the member Lease (if
// written) and returns.
func (m *membership) run(ctx context.Context) {
	events := make(chan memberEvent)
	watchCtx, stopWatch := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.watch(watchCtx, events)
	}()
	defer func() {
		stopWatch()
		<-done
		m.leave()
	}()
	for {
		if want := m.wanted.Load(); want != m.want {
			if !want {
				m.leave()
			}
			m.want = want
		}
		now := m.clock.Now()
		declined := encodeDeclines(m.declines.current(now))
		if m.want && (m.own == nil || !now.Before(m.renewAt) || declined != m.written) {
			m.upkeep(ctx, declined)
			now = m.clock.Now()
		}
		m.publish(now)
		timer := m.clock.NewTimer(max(m.nextWake(now).Sub(now), 0))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case ev := <-events:
			m.observe(m.clock.Now(), ev)
		case <-m.wake:
		case <-timer.C():
		}
		timer.Stop()
	}
}

// nextWake is the next renewal or member expiry.
func (m *membership) nextWake(now time.Time) time.Time {
	wake := now.Add(m.ttl)
	if m.want {
		if m.own == nil {
			wake = now.Add(m.timeout) // retry a failed write
		}
		if m.renewAt.Before(wake) {
			wake = m.renewAt
		}
	}
	for _, r := range m.records {
		if end := r.seenAt.Add(r.ttl); end.After(now) && end.Before(wake) {
			wake = end
		}
		for _, until := range r.declined {
			if until.After(now) && until.Before(wake) {
				wake = until // a stay-out ends: publish, and write the annotation without it
			}
		}
	}
	return wake
}

// upkeep creates or renews the member Lease, with declined as its
// DeclinedAnnotation.
func (m *membership) upkeep(ctx context.Context, declined string) {
	reqCtx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	now := m.clock.Now()
	var written *coordinationv1.Lease
	var err error
	if m.own == nil {
		written, err = m.leases.Create(reqCtx, m.record(now, nil, declined), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			var got *coordinationv1.Lease
			if got, err = m.leases.Get(reqCtx, m.name, metav1.GetOptions{}); err == nil {
				written, err = m.leases.Update(reqCtx, m.record(now, got, declined), metav1.UpdateOptions{})
			}
		}
	} else {
		written, err = m.leases.Update(reqCtx, m.record(now, m.own, declined), metav1.UpdateOptions{})
	}
	if err != nil {
		m.log.Warn("member Lease write failed", "err", err)
		if m.own != nil && (apierrors.IsConflict(err) || apierrors.IsNotFound(err)) {
			m.own = nil // edited or deleted by someone else: write afresh
		}
		m.renewAt = now.Add(m.timeout)
		return
	}
	m.own, m.written = written, declined
	m.wrote(written.ResourceVersion, now)
	m.renewAt = now.Add(m.ttl / 3)
	m.observe(m.clock.Now(), memberEvent{lease: written})
}

// record is the member Lease to write at now, on base (nil for a Create),
// with declined as its DeclinedAnnotation.
func (m *membership) record(now time.Time, base *coordinationv1.Lease, declined string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{}
	if base != nil {
		l = base.DeepCopy()
	}
	l.Name = m.name
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[MemberLabel] = m.group
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[PriorityAnnotation] = strconv.FormatInt(m.info.Priority, 10)
	if !m.info.StartedAt.IsZero() {
		l.Annotations[StartedAtAnnotation] = m.info.StartedAt.UTC().Format(time.RFC3339Nano)
	}
	if declined != "" {
		l.Annotations[DeclinedAnnotation] = declined
	} else {
		delete(l.Annotations, DeclinedAnnotation)
	}
	t := metav1.NewMicroTime(now)
	l.Spec.HolderIdentity = ptr.To(m.identity)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(m.ttl / time.Second))
	l.Spec.RenewTime = &t
	if l.Spec.AcquireTime == nil {
		l.Spec.AcquireTime = &t
	}
	return l
}

// leave deletes the member Lease, if written.
func (m *membership) leave() {
	if m.own == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.timeout)
	defer cancel()
	err := m.leases.Delete(ctx, m.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &m.own.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		m.log.Warn("member Lease delete failed; the others see this member go when it expires", "err", err)
	}
	m.own = nil
	delete(m.records, m.name)
}

// observe applies a watcher event at now.
func (m *membership) observe(now time.Time, ev memberEvent) {
	switch {
	case ev.listed:
		fresh := map[string]memberRecord{}
		for i := range ev.list {
			l := &ev.list[i]
			if old, ok := m.records[l.Name]; ok && old.resourceVersion == l.ResourceVersion {
				fresh[l.Name] = old // the same version: its clock keeps running
				continue
			}
			fresh[l.Name] = recordOf(now, l)
		}
		m.records, m.listed = fresh, true
	case ev.lease != nil:
		old, ok := m.records[ev.lease.Name]
		if ok && !newerRV(ev.lease.ResourceVersion, old.resourceVersion) {
			return // stale or already known
		}
		m.records[ev.lease.Name] = recordOf(now, ev.lease)
	case ev.deleted != "":
		delete(m.records, ev.deleted)
	}
}

// recordOf is member Lease l as observed at now.
func recordOf(now time.Time, l *coordinationv1.Lease) memberRecord {
	r := memberRecord{resourceVersion: l.ResourceVersion, seenAt: now, ttl: time.Second, declined: localDeclines(now, l), info: infoOf(l)}
	if l.Spec.HolderIdentity != nil {
		r.identity = *l.Spec.HolderIdentity
	}
	if d := l.Spec.LeaseDurationSeconds; d != nil && *d > 0 {
		r.ttl = time.Duration(*d) * time.Second
	}
	return r
}

// newerRV reports whether resourceVersion a is newer than b (a malformed
// one counts as newer: it cannot be ordered).
func newerRV(a, b string) bool {
	c, err := resourceversion.CompareResourceVersion(a, b)
	return err != nil || c > 0
}

// publish publishes the live members at now, and notifies on a change.
func (m *membership) publish(now time.Time) {
	var ids []string
	var declined map[string][]string
	info := map[string]MemberInfo{}
	versions := map[string]string{}
	for _, r := range m.records {
		if !r.liveAt(now) {
			continue
		}
		ids = append(ids, r.identity)
		info[r.identity] = r.info
		versions[r.identity] = r.resourceVersion
		for lease, until := range r.declined {
			if now.Before(until) {
				if declined == nil {
					declined = map[string][]string{}
				}
				declined[r.identity] = append(declined[r.identity], lease)
			}
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	for _, leases := range declined {
		slices.Sort(leases)
	}
	prev := m.load()
	same := prev != nil && prev.Listed == m.listed && slices.Equal(prev.Identities, ids) && reflect.DeepEqual(prev.Declined, declined) && maps.Equal(prev.Info, info)
	if same && maps.Equal(prev.Versions, versions) {
		return
	}
	if prev != nil {
		for _, id := range ids {
			if !slices.Contains(prev.Identities, id) {
				m.joinedAt = now
				break
			}
		}
	}
	m.current.Store(&Members{Identities: ids, JoinedAt: m.joinedAt, Listed: m.listed, Declined: declined, Info: info, Versions: versions})
	if same {
		return // only a renewal: nothing to plan on
	}
	select {
	case m.notify <- struct{}{}:
	default:
	}
}

// watch lists and watches the member Leases (elect.WatchLeases) until ctx
// ends, sending what it sees to out; it lists again after any error, with
// a backoff that doubles from the request timeout.
func (m *membership) watch(ctx context.Context, out chan<- memberEvent) {
	send := func(ev memberEvent) bool {
		select {
		case out <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	opts := metav1.ListOptions{LabelSelector: MemberLabel + "=" + m.group}
	elect.WatchLeases(ctx, m.leases, opts, m.clock, m.timeout, m.timeout, elect.LeaseEvents{
		Listed: func(list *coordinationv1.LeaseList) bool { return send(memberEvent{list: list.Items, listed: true}) },
		Changed: func(l *coordinationv1.Lease, deleted bool) bool {
			if deleted {
				return send(memberEvent{deleted: l.Name})
			}
			return send(memberEvent{lease: l})
		},
		Down: func(err error) bool {
			m.log.Debug("member watch ended", "err", err)
			return true
		},
	})
}
