package decide

import (
	"errors"
	"slices"
	"strconv"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leasehold/leasehold/internal/fence"
)

// store is an in-memory model of the apiserver and etcd for one Lease, with
// the behaviour the decision core relies on: one global revision counter
// (other objects' writes move it too), resourceVersion preconditions on
// Update (409), AlreadyExists on Create, NotFound on a missing object or
// namespace, the Lease's validation (durations > 0, transitions ≥ 0), and
// watch events in commit order. Every version is kept, with its writer,
// for the checker, and so is the writer of every write to another object
// that an instance made (its member Lease: see otherWrite). It can be
// restored to a snapshot, as etcd can (restore).
type store struct {
	namespace, name  string
	namespaceMissing bool

	rev      int64
	peak     int64                  // the largest revision before a restore that took the revision back, 0 if none did
	lease    *coordinationv1.Lease  // nil when missing
	versions []version              // every version of the Lease committed, in commit order
	byRev    map[int64][]int        // resourceVersion → indexes in versions: more than one only after a restore that reused revisions
	latest   int                    // index of the Lease's latest version (its deletion included), -1 before the first
	others   map[int64][]otherWrite // revision of a write to another object → those writes
	writes   int                    // writes committed, of the Lease and of other objects: their order
	created  int                    // Leases created, for their UIDs
	watchers []func(watchEvent)
}

// version is one committed state of the Lease.
type version struct {
	index  int // in store.versions
	order  int // among all the writes committed (store.writes)
	rev    int64
	writer string // identity of the instance that wrote it, "admin" for hand edits
	holder string
	lease  *coordinationv1.Lease // nil: the deletion
	prev   int                   // index of the version before it, -1 for the first
	// floor is, for a simulated instance's write, the largest
	// resourceVersion that instance had been given when it sent it.
	floor fence.Token
}

// watchEvent is one change, as the watch reports it.
type watchEvent struct {
	lease *coordinationv1.Lease // nil: deleted
	rv    string
}

var leasesResource = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

func newStore(namespace, name string) *store {
	return &store{namespace: namespace, name: name, rev: 100, byRev: map[int64][]int{}, latest: -1, others: map[int64][]otherWrite{}}
}

func (s *store) get() (*coordinationv1.Lease, error) {
	if s.lease == nil {
		return nil, apierrors.NewNotFound(leasesResource, s.name)
	}
	return s.lease, nil
}

func (s *store) create(writer string, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	switch {
	case s.namespaceMissing:
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, s.namespace)
	case s.lease != nil:
		return nil, apierrors.NewAlreadyExists(leasesResource, s.name)
	}
	if err := validate(l); err != nil {
		return nil, err
	}
	s.created++
	l.UID = types.UID("uid-" + strconv.Itoa(s.created)) // unique, as the apiserver's, even where a restore reuses revisions
	return s.commit(writer, l), nil
}

// The store takes the objects written to it (the Machine builds each body
// afresh and keeps no reference), and the objects it hands out are shared,
// never changed: the Machine copies a record before it builds a write on it.

// update is a PUT. Leases allow create-on-update: a PUT of a missing Lease
// creates it, unless the body carries a UID, whose precondition then fails
// (409), as it does for a Lease deleted and created again. The
// resourceVersion is checked only against an existing object.
func (s *store) update(writer string, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	switch {
	case s.lease == nil && l.UID == "":
		return s.create(writer, l)
	case s.lease == nil, l.UID != "" && l.UID != s.lease.UID:
		return nil, apierrors.NewConflict(leasesResource, s.name, errors.New("Precondition failed: UID in precondition: "+string(l.UID)))
	case l.ResourceVersion != s.lease.ResourceVersion:
		return nil, apierrors.NewConflict(leasesResource, s.name, errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	}
	if err := validate(l); err != nil {
		return nil, err
	}
	return s.commit(writer, l), nil
}

// edit changes the Lease by hand, as an admin would (no precondition), if
// it exists.
func (s *store) edit(change func(*coordinationv1.Lease)) bool {
	if s.lease == nil {
		return false
	}
	l := s.lease.DeepCopy()
	change(l)
	s.commit("admin", l)
	return true
}

// remove deletes the Lease by hand, if it exists.
func (s *store) remove() bool {
	if s.lease == nil {
		return false
	}
	s.rev++
	s.lease = nil
	s.add(version{rev: s.rev, writer: "admin"})
	s.notify(watchEvent{rv: strconv.FormatInt(s.rev, 10)})
	return true
}

// bump moves the global revision, as writes to other objects do.
func (s *store) bump(n int64) { s.rev += n }

// otherWrite commits writer's write to another object in the same store
// (its member Lease, whose resourceVersion a leaver names as the witness
// of a handover): it takes the next revision, and returns it.
func (s *store) otherWrite(writer string) string {
	s.rev++
	s.writes++
	s.others[s.rev] = append(s.others[s.rev], otherWrite{writer: writer, order: s.writes})
	return strconv.FormatInt(s.rev, 10)
}

// otherWrite is a write to another object: its writer, and its place
// among all the writes committed.
type otherWrite struct {
	writer string
	order  int
}

// wroteOther reports whether writer wrote another object at revision rev
// before v was committed (in commit order: after a restore that reused
// revisions, not always in the order of their revisions).
func (s *store) wroteOther(rev int64, writer string, v version) bool {
	return slices.ContainsFunc(s.others[rev], func(w otherWrite) bool { return w.writer == writer && w.order < v.order })
}

// versionsAt lists the versions of the Lease committed at revision rev:
// one at most, unless a restore reused revisions.
func (s *store) versionsAt(rev int64) []version {
	var vs []version
	for _, i := range s.byRev[rev] {
		vs = append(vs, s.versions[i])
	}
	return vs
}

// version is the version of the Lease committed last at revision rev.
func (s *store) version(rev int64) (version, bool) {
	vs := s.versionsAt(rev)
	if len(vs) == 0 {
		return version{prev: -1}, false
	}
	return vs[len(vs)-1], true
}

// previous is the version that v replaced, and whether there was one.
func (s *store) previous(v version) (version, bool) {
	if v.prev < 0 {
		return version{prev: -1}, false
	}
	return s.versions[v.prev], true
}

// snapshot is the store's state at one moment, which restore brings back.
type snapshot struct {
	rev    int64
	lease  *coordinationv1.Lease
	latest int
}

func (s *store) snapshot() snapshot { return snapshot{rev: s.rev, lease: s.lease, latest: s.latest} }

// restore brings the store back to snap, as etcdutl snapshot restore
// does: the Lease is the snapshot's again, with the resourceVersion and
// UID it had then. With bump (--bump-revision) the revision counter moves
// on by bump from the largest revision ever written, so later writes take
// revisions above every earlier one; with 0 it goes back to the
// snapshot's (peak keeps the largest before), and later writes reuse the
// revisions written since. It sends no watch event: etcd's watchers are
// cut off (--mark-compacted).
func (s *store) restore(snap snapshot, bump int64) {
	if bump > 0 {
		s.rev = max(s.rev, s.peak) + bump
	} else {
		s.peak = max(s.peak, s.rev)
		s.rev = snap.rev
	}
	s.lease, s.latest = snap.lease, snap.latest
}

func (s *store) commit(writer string, l *coordinationv1.Lease) *coordinationv1.Lease {
	s.rev++
	l.ResourceVersion = strconv.FormatInt(s.rev, 10)
	l.Namespace, l.Name = s.namespace, s.name
	s.lease = l
	s.add(version{rev: s.rev, writer: writer, holder: holderOf(l), lease: l})
	s.notify(watchEvent{lease: l, rv: l.ResourceVersion})
	return l
}

// add records v as the Lease's latest version.
func (s *store) add(v version) {
	s.writes++
	v.prev, v.index, v.order = s.latest, len(s.versions), s.writes
	s.versions = append(s.versions, v)
	s.latest = len(s.versions) - 1
	s.byRev[v.rev] = append(s.byRev[v.rev], s.latest)
}

func (s *store) notify(ev watchEvent) {
	for _, w := range s.watchers {
		w(ev)
	}
}

// validate applies the apiserver's validation of a Lease spec.
func validate(l *coordinationv1.Lease) error {
	if d := l.Spec.LeaseDurationSeconds; d != nil && *d <= 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: "coordination.k8s.io", Kind: "Lease"}, l.Name, nil)
	}
	if t := l.Spec.LeaseTransitions; t != nil && *t < 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: "coordination.k8s.io", Kind: "Lease"}, l.Name, nil)
	}
	return nil
}
