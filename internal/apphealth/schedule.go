package apphealth

import (
	"context"
	"net/http"
	"time"

	"k8s.io/utils/clock"
)

// every is the probers' schedule: it calls check at once and then every
// interval on clk until ctx ends, then returns. The ticker starts before
// the first check, so that a tick falling into any check is held for the
// loop, never lost; checks never overlap. transport, when not nil, has its
// idle connections closed on return.
func every(ctx context.Context, clk clock.WithTicker, interval time.Duration, transport *http.Transport, check func(context.Context)) {
	if transport != nil {
		defer transport.CloseIdleConnections()
	}
	ticker := clk.NewTicker(interval)
	defer ticker.Stop()
	for ctx.Err() == nil {
		check(ctx)
		select {
		case <-ctx.Done():
		case <-ticker.C():
		}
	}
}
