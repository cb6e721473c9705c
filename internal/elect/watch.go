package elect

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/leasehold/leasehold/internal/elect/decide"
)

// watchLease lists and watches the one Lease (field selector on its name)
// with WatchLeases, and sends what it sees to out (decide.Observed,
// WatchUp, WatchDown), until ctx ends. An object is versioned by its own
// resourceVersion; absence by the list's. Each observation names the
// version its stream delivered before it (Follows).
func (e *Elector) watchLease(ctx context.Context, out chan<- decide.Input) {
	var last string // the version this stream delivered last; "" when none
	send := func(ev decide.Input) bool {
		select {
		case out <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	selector := fields.OneTermEqualSelector("metadata.name", e.cfg.Name).String()
	WatchLeases(ctx, e.cfg.Leases, metav1.ListOptions{FieldSelector: selector}, e.clock, e.cfg.requestTimeout(), e.cfg.RetryPeriod, LeaseEvents{
		Listed: func(list *coordinationv1.LeaseList) bool {
			listed := decide.Observed{ResourceVersion: list.ResourceVersion}
			last = ""
			if len(list.Items) > 0 {
				listed.Lease, listed.ResourceVersion = &list.Items[0], list.Items[0].ResourceVersion
				last = listed.ResourceVersion
			}
			return send(listed)
		},
		Up: func() bool { return send(decide.WatchUp{}) },
		Changed: func(l *coordinationv1.Lease, deleted bool) bool {
			follows := last
			if deleted {
				last = ""
				return send(decide.Observed{ResourceVersion: l.ResourceVersion, Follows: follows})
			}
			last = l.ResourceVersion
			return send(decide.Observed{Lease: l, ResourceVersion: l.ResourceVersion, Follows: follows})
		},
		Down: func(err error) bool { return send(decide.WatchDown{Err: err}) },
	})
}
