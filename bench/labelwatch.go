package main

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// labelWatch follows one label on every Pod of a namespace through a Pod
// watch (as the EndpointSlice controller behind a Service does), and
// remembers when the latest change arrived.
type labelWatch struct {
	pods   corev1client.PodInterface
	key    string
	cancel context.CancelFunc
	done   chan struct{} // closed when run has returned
	err    error         // why run returned early; read after done

	mu        sync.Mutex
	values    map[string]string // Pod name → label value ("" when absent)
	changedAt time.Time         // when the event that last changed values arrived
	changed   chan struct{}     // closed (and replaced) on every change
}

// startLabelWatch lists the Pods and watches them until stop.
func startLabelWatch(ctx context.Context, pods corev1client.PodInterface, key string) *labelWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &labelWatch{pods: pods, key: key, cancel: cancel, done: make(chan struct{}),
		values: map[string]string{}, changed: make(chan struct{})}
	go func() {
		defer close(w.done)
		w.err = w.run(ctx)
	}()
	return w
}

// run lists and then watches from the list's resourceVersion, and lists
// again when the watch ends (the apiserver ends watches after a while),
// until ctx ends.
func (w *labelWatch) run(ctx context.Context) error {
	for {
		list, err := w.pods.List(ctx, metav1.ListOptions{})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("list pods: %w", err)
		}
		values := map[string]string{}
		for _, p := range list.Items {
			values[p.Name] = p.Labels[w.key]
		}
		w.update(func(v map[string]string) { clear(v); maps.Copy(v, values) })
		watcher, err := w.pods.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watch pods: %w", err)
		}
		w.follow(watcher)
		watcher.Stop()
		if ctx.Err() != nil {
			return nil
		}
	}
}

// follow applies the watch's events until it ends or reports an error.
func (w *labelWatch) follow(watcher watch.Interface) {
	for ev := range watcher.ResultChan() {
		pod, ok := ev.Object.(*corev1.Pod)
		switch {
		case ev.Type == watch.Error:
			return // list again
		case !ok:
		case ev.Type == watch.Deleted:
			w.update(func(v map[string]string) { delete(v, pod.Name) })
		default:
			w.update(func(v map[string]string) { v[pod.Name] = pod.Labels[w.key] })
		}
	}
}

// update applies change and, if it changed a value, stamps and announces it.
func (w *labelWatch) update(change func(map[string]string)) {
	at := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	before := maps.Clone(w.values)
	change(w.values)
	if maps.Equal(before, w.values) {
		return
	}
	w.changedAt = at
	close(w.changed)
	w.changed = make(chan struct{})
}

// await waits up to bound until want holds for the label values, and
// returns when the change that made it hold arrived (which may be before
// await was called).
func (w *labelWatch) await(ctx context.Context, bound time.Duration, want func(map[string]string) bool) (time.Time, error) {
	timeout := time.After(bound)
	for {
		w.mu.Lock()
		ok, at, changed, values := want(w.values), w.changedAt, w.changed, maps.Clone(w.values)
		w.mu.Unlock()
		if ok {
			return at, nil
		}
		select {
		case <-changed:
		case <-w.done:
			return time.Time{}, fmt.Errorf("pod watch ended: %v", w.err)
		case <-timeout:
			return time.Time{}, fmt.Errorf("%w: labels %v", errLabelsWrong, values)
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}

func (w *labelWatch) stop() error {
	w.cancel()
	<-w.done
	return w.err
}
