package group

import (
	"errors"
	"maps"
	"slices"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// gstore models the apiserver and etcd for every Lease of one namespace
// that a lease group touches: the group's Leases and its members' Leases.
// It keeps what the elections and the membership rely on: one global
// revision for all objects (a write to any object, or to an object outside
// the model, moves it), resourceVersion and UID preconditions, Leases'
// create-on-update (refused when the body carries a UID: the UID's
// precondition), AlreadyExists, NotFound,
// Delete with UID and resourceVersion preconditions, a list by label with the list's resourceVersion, the Lease's validation,
// and commits handed to the watches in commit order. Every committed
// version is kept, with its object and writer, for the checker.
type gstore struct {
	rev      int64
	objects  map[string]*coordinationv1.Lease
	versions gversions
	// committed is told of every commit, in commit order: the object as
	// committed, or nil and the last object for a deletion.
	committed func(name, rv string, l, gone *coordinationv1.Lease)
	// now is the real time, for the versions' commit times.
	now func() time.Duration
}

// gversion is one committed write, committed at real time at; acquiring:
// it can be a write that began its holder's term (acquireTime and
// renewTime stamped with one time, as decide's acquiring has it); witness:
// the write is a handover in one write to holder by writer, naming that
// version (decide.HandedOverAnnotation).
type gversion struct {
	name, writer, holder string
	acquiring            bool
	witness              string
	at                   time.Duration
}

// gversions are the committed versions by revision, from gstoreFirst on;
// a revision that no version of the model has (other objects' writes)
// holds the zero gversion, whose name is empty.
type gversions []gversion

// gstoreFirst is the store's first revision.
const gstoreFirst = 1001

// at is the version committed at revision rev, if any.
func (vs gversions) at(rev int64) (gversion, bool) {
	if rev < gstoreFirst || rev-gstoreFirst >= int64(len(vs)) {
		return gversion{}, false
	}
	v := vs[rev-gstoreFirst]
	return v, v.name != ""
}

// commit keeps v as the version of revision rev, the newest.
func (st *gstore) commit(rev int64, v gversion) {
	for int64(len(st.versions)) < rev-gstoreFirst {
		st.versions = append(st.versions, gversion{})
	}
	st.versions = append(st.versions, v)
}

var gsimLeases = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

func newGStore() *gstore {
	return &gstore{rev: gstoreFirst - 1, objects: map[string]*coordinationv1.Lease{}}
}

func (st *gstore) get(name string) (*coordinationv1.Lease, error) {
	if l := st.objects[name]; l != nil {
		return l, nil
	}
	return nil, apierrors.NewNotFound(gsimLeases, name)
}

func (st *gstore) create(writer string, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	if st.objects[l.Name] != nil {
		return nil, apierrors.NewAlreadyExists(gsimLeases, l.Name)
	}
	if err := gsimValidate(l); err != nil {
		return nil, err
	}
	l.UID = types.UID("uid-" + strconv.FormatInt(st.rev+1, 10))
	return st.put(writer, l), nil
}

// update is a PUT of l.Name; the objects handed out are shared and never
// changed, and the bodies written are taken (their writers build them
// afresh).
func (st *gstore) update(writer string, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	cur := st.objects[l.Name]
	if cur == nil {
		if l.UID != "" {
			return nil, apierrors.NewConflict(gsimLeases, l.Name, errors.New("Precondition failed: UID in precondition: "+string(l.UID)))
		}
		return st.create(writer, l)
	}
	if l.UID != "" && l.UID != cur.UID {
		return nil, apierrors.NewConflict(gsimLeases, l.Name, errors.New("Precondition failed: UID in precondition: "+string(l.UID)))
	}
	if l.ResourceVersion != cur.ResourceVersion {
		return nil, apierrors.NewConflict(gsimLeases, l.Name, errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	}
	if err := gsimValidate(l); err != nil {
		return nil, err
	}
	l.UID = cur.UID
	return st.put(writer, l), nil
}

// remove deletes name, as writer, if it exists and (uid not empty) has
// that UID.
func (st *gstore) remove(writer, name string, uid types.UID) error {
	return st.removeIf(writer, name, string(uid), "")
}

// removeIf deletes name, as writer, if it exists and has the UID uid and
// the resourceVersion rv, each when not empty (a Delete's preconditions).
func (st *gstore) removeIf(writer, name, uid, rv string) error {
	cur := st.objects[name]
	switch {
	case cur == nil:
		return apierrors.NewNotFound(gsimLeases, name)
	case uid != "" && types.UID(uid) != cur.UID:
		return apierrors.NewConflict(gsimLeases, name, errors.New("Precondition failed: UID in precondition: "+uid))
	case rv != "" && rv != cur.ResourceVersion:
		return apierrors.NewConflict(gsimLeases, name, errors.New("Precondition failed: ResourceVersion in precondition: "+rv))
	}
	st.rev++
	delete(st.objects, name)
	st.commit(st.rev, gversion{name: name, writer: writer, at: st.now()})
	st.committed(name, strconv.FormatInt(st.rev, 10), nil, cur)
	return nil
}

// edit changes an existing Lease by hand, without a precondition.
func (st *gstore) edit(name string, change func(*coordinationv1.Lease)) bool {
	cur := st.objects[name]
	if cur == nil {
		return false
	}
	l := cur.DeepCopy()
	change(l)
	st.put("admin", l)
	return true
}

// list returns the Leases labelled key=value, by name, and the list's
// resourceVersion.
func (st *gstore) list(key, value string) ([]coordinationv1.Lease, string) {
	var items []coordinationv1.Lease
	for _, name := range slices.Sorted(maps.Keys(st.objects)) {
		if l := st.objects[name]; l.Labels[key] == value {
			items = append(items, *l)
		}
	}
	return items, strconv.FormatInt(st.rev, 10)
}

func (st *gstore) put(writer string, l *coordinationv1.Lease) *coordinationv1.Lease {
	st.rev++
	l.ResourceVersion = strconv.FormatInt(st.rev, 10)
	l.Namespace = "ns"
	st.objects[l.Name] = l
	a, r := l.Spec.AcquireTime, l.Spec.RenewTime
	st.commit(st.rev, gversion{name: l.Name, writer: writer, holder: gsimHolder(l), acquiring: a != nil && r != nil && a.Equal(r), witness: handedWitness(l), at: st.now()})
	st.committed(l.Name, l.ResourceVersion, l, nil)
	return l
}

// gsimValidate is the apiserver's validation of a Lease spec.
func gsimValidate(l *coordinationv1.Lease) error {
	d, t := l.Spec.LeaseDurationSeconds, l.Spec.LeaseTransitions
	if (d != nil && *d <= 0) || (t != nil && *t < 0) {
		return apierrors.NewInvalid(schema.GroupKind{Group: "coordination.k8s.io", Kind: "Lease"}, l.Name, nil)
	}
	return nil
}

func gsimHolder(l *coordinationv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}
