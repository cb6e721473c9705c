package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"

	"github.com/leasehold/leasehold/internal/fence"
	"github.com/leasehold/leasehold/pkg/client"
)

// errHoldsUnsupported is a sidecar that answers POST /v1/hold with 404: a
// leasehold older than holds.
var errHoldsUnsupported = errors.New("404 Not Found: no holds on this sidecar")

// hold is a hold the sidecar granted on one term (POST /v1/hold): an open
// answer. While it is open, a voluntary release of that term waits, at most
// until the term's validity ends. Closing the connection ends it.
type hold struct {
	token fence.Token
	held  *client.Hold
	done  chan struct{} // closed once the hold has ended and its end has been logged
}

// close ends the hold: it closes the connection, which tells the sidecar,
// and waits for the goroutine that followed it. It is idempotent, and a
// no-op on nil.
func (h *hold) close() {
	if h == nil {
		return
	}
	h.held.Close()
	<-h.done
}

// hold asks POST /v1/hold?token=token (client.Client.Hold). On a grant it
// returns the open hold, whose end by the sidecar a goroutine logs (the
// runner's validity deadline then still governs). It gives up on the grant
// after requestSlack. Errors: errHoldsUnsupported for a 404, a
// *client.Error for any other answer (the sidecar refuses: the term is
// ending), anything else when there was no answer.
//
// The hold's lifetime is not ctx's: ctx only cancels the request until it
// is granted, so that a signal to the runner does not end the hold before
// its command has stopped.
func (s *sidecar) hold(ctx context.Context, token fence.Token, log *slog.Logger) (*hold, error) {
	held, err := s.client.Hold(ctx, token)
	if e, ok := errors.AsType[*client.Error](err); ok && e.StatusCode == http.StatusNotFound {
		return nil, fmt.Errorf("%s %s: %w", e.Method, e.URL, errHoldsUnsupported)
	}
	if err != nil {
		return nil, err
	}
	h := &hold{token: token, held: held, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		<-held.Done()
		if err := held.Err(); err != nil {
			log.Warn("the sidecar ended the hold on the term (it is shutting down, or gone); the validity deadline still governs",
				"fencingToken", token, "err", err)
		}
	}()
	return h, nil
}

// holdResult is the outcome of one hold request: the open hold, or why
// there is none.
type holdResult struct {
	token fence.Token
	hold  *hold
	err   error
}

// holder sends hold requests, one at a time, on a goroutine of its own, so
// that the runner's loop never blocks on the sidecar (as watcher does for
// watches).
type holder struct {
	sidecar *sidecar
	log     *slog.Logger

	results chan holdResult // capacity 1: a finished request never blocks

	pending fence.Token // the term of the request in flight or its unread result; 0 when none
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

func newHolder(s *sidecar, log *slog.Logger) *holder {
	return &holder{sidecar: s, log: log, results: make(chan holdResult, 1)}
}

// ask requests a hold on the term with token; the caller has checked that
// none is pending.
func (h *holder) ask(token fence.Token) {
	ctx, cancel := context.WithCancel(context.Background())
	h.pending, h.cancel = token, cancel
	h.wg.Go(func() {
		hd, err := h.sidecar.hold(ctx, token, h.log)
		h.results <- holdResult{token: token, hold: hd, err: err}
	})
}

// received records that the pending request's result was taken from
// results: the hold, if any, is the caller's now.
func (h *holder) received() {
	h.cancel()
	h.pending, h.cancel = 0, nil
}

// abandon cancels the pending request unless it is for token; its result
// still arrives (and its hold, if it was granted meanwhile, is the
// caller's to close).
func (h *holder) abandon(token fence.Token) {
	if h.pending != 0 && h.pending != token {
		h.cancel()
	}
}

// close cancels the pending request, waits for its goroutine, and closes
// any hold granted but not taken from results.
func (h *holder) close() {
	if h.cancel != nil {
		h.cancel()
	}
	h.wg.Wait()
	select {
	case res := <-h.results:
		res.hold.close()
	default:
	}
}
