package main

import (
	"context"
	"fmt"
)

// task is a background goroutine of the sidecar with a visible end: stop
// cancels it and waits until it has returned.
type task struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// startTask runs run in a goroutine until stop; a non-nil error it returns
// goes to failures (buffered: one slot per task and server).
func startTask(name string, run func(context.Context) error, failures chan<- error) *task {
	ctx, cancel := context.WithCancel(context.Background())
	t := &task{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(t.done)
		if err := run(ctx); err != nil {
			failures <- fmt.Errorf("%s: %w", name, err)
		}
	}()
	return t
}

// stop ends the task and waits for it; stopping a nil or stopped task does
// nothing.
func (t *task) stop() {
	if t == nil {
		return
	}
	t.cancel()
	<-t.done
}
