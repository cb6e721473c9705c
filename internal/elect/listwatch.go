package elect

import (
	"context"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
)

// MaxWatchBackoff caps the delay between attempts to list and watch again.
const MaxWatchBackoff = 30 * time.Second

// LeaseLister lists and watches the Leases of one namespace: the part of a
// Lease client that WatchLeases uses.
type LeaseLister interface {
	List(ctx context.Context, opts metav1.ListOptions) (*coordinationv1.LeaseList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// LeaseEvents receives what WatchLeases sees, in order, from one goroutine:
// for each stream, Listed (the list that starts it), Up once the watch is
// open, Changed for each Lease added, modified or deleted (then only its
// name and resourceVersion are sure), and Down (why it ended). Each
// returns false to stop WatchLeases; Up and Down may be nil.
type LeaseEvents struct {
	Listed  func(list *coordinationv1.LeaseList) bool
	Up      func() bool
	Changed func(l *coordinationv1.Lease, deleted bool) bool
	Down    func(err error) bool
}

// WatchLeases lists the Leases that opts selects (each List bounded by
// timeout), then watches them from the list's resourceVersion, with
// bookmarks, reporting to ev, until ctx ends or ev says stop. After a
// stream ends it lists and watches again, after a backoff that doubles from
// first up to MaxWatchBackoff, and starts over from first after a stream
// that lasted longer than that.
//
// It is a hand-written list and watch rather than a client-go Reflector:
// its callers need to know when a stream is open and when it ends (an
// election falls back to polling), which a Reflector does not expose.
func WatchLeases(ctx context.Context, leases LeaseLister, opts metav1.ListOptions, clk clock.Clock, timeout, first time.Duration, ev LeaseEvents) {
	backoff := first
	for ctx.Err() == nil {
		opened := clk.Now()
		stopped, err := watchOnce(ctx, leases, opts, timeout, ev)
		if stopped || ctx.Err() != nil {
			return
		}
		if ev.Down != nil && !ev.Down(err) {
			return
		}
		if clk.Since(opened) > MaxWatchBackoff {
			backoff = first // the last stream was healthy for a while
		}
		select {
		case <-ctx.Done():
			return
		case <-clk.After(backoff):
		}
		backoff = min(2*backoff, MaxWatchBackoff)
	}
}

// watchOnce lists, then watches from the list's resourceVersion until the
// stream ends: whether ev said stop, and else why it ended.
func watchOnce(ctx context.Context, leases LeaseLister, opts metav1.ListOptions, timeout time.Duration, ev LeaseEvents) (stopped bool, err error) {
	listCtx, cancel := context.WithTimeout(ctx, timeout)
	list, err := leases.List(listCtx, opts)
	cancel()
	if err != nil {
		return false, fmt.Errorf("list: %w", err)
	}
	if !ev.Listed(list) {
		return true, nil
	}
	opts.ResourceVersion, opts.AllowWatchBookmarks = list.ResourceVersion, true
	w, err := leases.Watch(ctx, opts)
	if err != nil {
		return false, fmt.Errorf("watch: %w", err)
	}
	defer w.Stop()
	if ev.Up != nil && !ev.Up() {
		return true, nil
	}
	for {
		var e watch.Event
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case got, ok := <-w.ResultChan():
			if !ok {
				return false, errors.New("watch: stream closed by the server")
			}
			e = got
		}
		switch e.Type {
		case watch.Error:
			return false, fmt.Errorf("watch: %w", apierrors.FromObject(e.Object))
		case watch.Added, watch.Modified, watch.Deleted:
			if l, ok := e.Object.(*coordinationv1.Lease); ok && !ev.Changed(l, e.Type == watch.Deleted) {
				return true, nil
			}
		}
		// A bookmark moves nothing: the next list starts afresh anyway.
	}
}
