package runner

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/leasehold/leasehold/pkg/api"
	"github.com/leasehold/leasehold/pkg/client"
)

// Bounds of the long-poll wait the runner asks for.
const (
	minWait = 50 * time.Millisecond
	maxWait = 5 * time.Minute
)

// requestSlack is added to a watch's wait (and the server's jitter, at most
// wait/16) to time out a request that the sidecar does not answer
// (client.RequestSlack); it also bounds a request that does not block, and
// a hold until it is granted.
const requestSlack = client.RequestSlack

// sidecar is the runner's client of the sidecar's API: GET /v1/watch, or,
// for one Lease of a group, GET /v1/leases (client.Client.Poll); POST
// /v1/hold; GET /v1/leases.
type sidecar struct {
	client *client.Client
}

// newSidecar is the client of the sidecar at base, about lease ("" for its
// one Lease), sending with hc (nil: a client that never uses a proxy).
func newSidecar(base *url.URL, hc *http.Client, lease string) (*sidecar, error) {
	opts := []client.Option{client.WithTimeout(requestSlack)}
	if hc != nil {
		opts = append(opts, client.WithHTTPClient(hc))
	}
	c, err := client.New(base.String(), opts...)
	if err != nil {
		return nil, err
	}
	return &sidecar{client: c.Lease(lease)}, nil
}

// watch asks GET /v1/watch?wait=wait[&index=index] (no index when 0) and
// returns the status and the index the next request watches from; for a
// Lease of a group, GET /v1/leases with the same parameters, that Lease's
// status, and the group's index. It gives up after wait plus the server's
// jitter plus requestSlack.
func (s *sidecar) watch(ctx context.Context, index uint64, wait time.Duration) (api.Status, uint64, error) {
	return s.client.Poll(ctx, index, wait)
}

// answer is one status from the sidecar, with the runner's clock reading
// taken just before the request that got it was sent: the sidecar computed
// it later, so sent + validForMs never overstates the validity.
type answer struct {
	status  api.Status
	next    uint64 // the index the next request watches from
	sent    time.Time
	indexed bool // the request had an index: it may have blocked
}

// watcher keeps at most one watch request in flight, on a goroutine of its
// own, so that the runner's loop never blocks on the sidecar: its timers
// fire whether or not the sidecar answers. A request retries, by
// client.Backoff, until the sidecar answers or the watcher is closed.
type watcher struct {
	sidecar *sidecar
	clock   clock.Clock
	log     *slog.Logger

	results chan answer // capacity 1: a finished request never blocks

	busy   bool   // a request is in flight, or its answer is unread
	index  uint64 // the index to watch from; 0 before the first answer
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newWatcher(s *sidecar, clk clock.Clock, log *slog.Logger) *watcher {
	return &watcher{sidecar: s, clock: clk, log: log, results: make(chan answer, 1)}
}

// ask sends a watch request with wait, from the last index seen (or, when
// fresh, without an index: the sidecar answers at once), unless one is
// already in flight. It reports whether it sent one.
func (w *watcher) ask(ctx context.Context, wait time.Duration, fresh bool) bool {
	if w.busy {
		return false
	}
	w.busy = true
	ctx, w.cancel = context.WithCancel(ctx)
	index := w.index
	if fresh {
		index = 0
	}
	w.wg.Go(func() { w.fetch(ctx, index, wait) })
	return true
}

// received records an answer taken from results: the next request watches
// from its index.
func (w *watcher) received(a answer) {
	w.busy = false
	w.cancel()
	w.index = a.next
}

// close cancels the request in flight, if any, waits for its goroutine, and
// closes idle connections.
func (w *watcher) close() {
	if w.cancel != nil {
		w.cancel()
	}
	w.wg.Wait()
	w.sidecar.client.CloseIdleConnections()
}

// fetch asks until the sidecar answers, then delivers the answer. It ends
// when ctx does. Between attempts it waits as client.Backoff says, on the
// runner's clock: a short backoff, or the Retry-After of a 503. The
// runner's loop keeps its own timers meanwhile: waiting here never delays
// the validity deadline.
func (w *watcher) fetch(ctx context.Context, index uint64, wait time.Duration) {
	var backoff client.Backoff
	for attempt := 1; ; attempt++ {
		sent := w.clock.Now()
		st, next, err := w.sidecar.watch(ctx, index, wait)
		if err == nil {
			if attempt > 1 {
				w.log.Info("sidecar answers again", "attempts", attempt)
			}
			w.results <- answer{status: st, next: next, sent: sent, indexed: index != 0}
			return
		}
		if ctx.Err() != nil {
			return
		}
		delay, asked := backoff.Delay(err, w.clock.Now())
		// The timer is armed before the line is logged: the wait is measured
		// from the answer, and a reader of the log knows the retry is set.
		timer := w.clock.NewTimer(delay)
		if asked {
			w.log.Warn("sidecar asked to retry later", "err", err, "attempt", attempt, "retryIn", delay)
		} else {
			w.log.Warn("sidecar did not answer; retrying", "err", err, "attempt", attempt, "retryIn", delay)
		}
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C():
		}
	}
}
