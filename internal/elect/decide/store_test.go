package decide

import (
	"errors"
	"strconv"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// store is an in-memory model of the apiserver and etcd for one Lease, with
// the behaviour the decision core relies on: one global revision counter
// (other objects' writes move it too), resourceVersion preconditions on
// Update (409), AlreadyExists on Create, NotFound on a missing object or
// namespace, the Lease's validation (durations > 0, transitions ≥ 0), and
// watch events in commit order. Every version is kept, with its writer,
// for the checker, and so is the writer of every write to another object
// that an instance made (its member Lease: see otherWrite).
type store struct {
	namespace, name  string
	namespaceMissing bool

	rev      int64
	lease    *coordinationv1.Lease // nil when missing
	versions map[int64]version
	latest   int64            // revision of the Lease's latest version (its deletion included)
	others   map[int64]string // revision of a write to another object → its writer
	watchers []func(watchEvent)
}

// version is one committed state of the Lease.
type version struct {
	writer string // identity of the instance that wrote it, "admin" for hand edits
	holder string
	lease  *coordinationv1.Lease // nil: the deletion
	prev   int64                 // revision of the version before it, 0 for the first
}

// watchEvent is one change, as the watch reports it.
type watchEvent struct {
	lease *coordinationv1.Lease // nil: deleted
	rv    string
}

var leasesResource = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

func newStore(namespace, name string) *store {
	return &store{namespace: namespace, name: name, rev: 100, versions: map[int64]version{}, others: map[int64]string{}}
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
	l.UID = types.UID("uid-" + strconv.FormatInt(s.rev+1, 10))
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
	s.versions[s.rev] = version{writer: "admin", prev: s.latest}
	s.latest = s.rev
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
	s.others[s.rev] = writer
	return strconv.FormatInt(s.rev, 10)
}

// previous is the version the Lease's version rev replaced, and whether
// there was one.
func (s *store) previous(rev int64) (version, bool) {
	v, ok := s.versions[s.versions[rev].prev]
	return v, ok
}

func (s *store) commit(writer string, l *coordinationv1.Lease) *coordinationv1.Lease {
	s.rev++
	l.ResourceVersion = strconv.FormatInt(s.rev, 10)
	l.Namespace, l.Name = s.namespace, s.name
	s.lease = l
	s.versions[s.rev] = version{writer: writer, holder: holderOf(l), lease: l, prev: s.latest}
	s.latest = s.rev
	s.notify(watchEvent{lease: l, rv: l.ResourceVersion})
	return l
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
