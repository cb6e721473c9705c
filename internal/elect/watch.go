package elect

import (
	"context"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/leasehold/leasehold/internal/elect/decide"
)

// maxWatchBackoff caps the delay between attempts to (re)open the watch.
const maxWatchBackoff = 30 * time.Second

// watchLease lists and watches the one Lease (field selector on its name)
// and sends what it sees to out (decide.Observed, WatchUp, WatchDown), until
// ctx ends. This is a hand-written
// list+watch rather than a client-go Reflector: for a single object the loop
// needs to know at each moment whether a watch stream is open (so it can
// fall back to polling), which a Reflector does not expose.
func (e *Elector) watchLease(ctx context.Context, out chan<- decide.Input) {
	send := func(ev decide.Input) bool {
		select {
		case out <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	leases := e.cfg.Leases
	selector := fields.OneTermEqualSelector("metadata.name", e.cfg.Name).String()
	backoff := e.cfg.RetryPeriod
	for ctx.Err() == nil {
		opened := e.clock.Now()
		err := e.watchOnce(ctx, leases, selector, send)
		if ctx.Err() != nil {
			return
		}
		if !send(decide.WatchDown{Err: err}) {
			return
		}
		if e.clock.Since(opened) > maxWatchBackoff {
			backoff = e.cfg.RetryPeriod // the last stream was healthy for a while
		}
		select {
		case <-ctx.Done():
			return
		case <-e.clock.After(backoff):
		}
		backoff = min(2*backoff, maxWatchBackoff)
	}
}

// leaseLister is the part of the typed Lease client the watcher uses.
type leaseLister interface {
	List(ctx context.Context, opts metav1.ListOptions) (*coordinationv1.LeaseList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// watchOnce lists, then watches from the list's resourceVersion until the
// stream ends. It returns why the stream ended.
func (e *Elector) watchOnce(ctx context.Context, leases leaseLister, selector string, send func(decide.Input) bool) error {
	listCtx, cancel := context.WithTimeout(ctx, e.cfg.requestTimeout())
	list, err := leases.List(listCtx, metav1.ListOptions{FieldSelector: selector})
	cancel()
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	// An object is versioned by its own resourceVersion; absence by the
	// list's.
	listed := decide.Observed{ResourceVersion: list.ResourceVersion}
	if len(list.Items) > 0 {
		listed.Lease, listed.ResourceVersion = &list.Items[0], list.Items[0].ResourceVersion
	}
	if !send(listed) {
		return ctx.Err()
	}
	w, err := leases.Watch(ctx, metav1.ListOptions{
		FieldSelector:       selector,
		ResourceVersion:     list.ResourceVersion,
		AllowWatchBookmarks: true,
	})
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	defer w.Stop()
	if !send(decide.WatchUp{}) {
		return ctx.Err()
	}
	for {
		var ev watch.Event
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-w.ResultChan():
			if !ok {
				return errors.New("watch: stream closed by the server")
			}
			ev = e
		}
		switch ev.Type {
		case watch.Added, watch.Modified:
			if l, ok := ev.Object.(*coordinationv1.Lease); ok && !send(decide.Observed{Lease: l, ResourceVersion: l.ResourceVersion}) {
				return ctx.Err()
			}
		case watch.Deleted:
			if l, ok := ev.Object.(*coordinationv1.Lease); ok && !send(decide.Observed{ResourceVersion: l.ResourceVersion}) {
				return ctx.Err()
			}
		case watch.Error:
			return fmt.Errorf("watch: %w", apierrors.FromObject(ev.Object))
		}
	}
}
