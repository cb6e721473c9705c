package runner

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/fence"
)

// holdTimeout bounds a hold request until its grant (the headers and the
// body's one line) has arrived.
const holdTimeout = requestSlack

// maxGrant bounds the grant's one line of JSON.
const maxGrant = 64 << 10

// errHoldsUnsupported is a sidecar that answers POST /v1/hold with 404: a
// leasehold older than holds.
var errHoldsUnsupported = errors.New("404 Not Found: no holds on this sidecar")

// hold is a hold the sidecar granted on one term (POST /v1/hold): an open
// answer. While it is open, a voluntary release of that term waits, at most
// until the term's validity ends. Closing the connection ends it.
type hold struct {
	token  fence.Token
	cancel context.CancelFunc
	done   chan struct{} // closed once the connection is closed and its reader has ended
}

// close ends the hold: it closes the connection, which tells the sidecar,
// and waits for the goroutine that read it. It is idempotent, and a no-op
// on nil.
func (h *hold) close() {
	if h == nil {
		return
	}
	h.cancel()
	<-h.done
}

// hold asks POST /v1/hold?token=token. On a grant (200, then one line of
// JSON with held: true) it returns the open hold, whose connection a
// goroutine reads until the hold is closed or the sidecar ends it (logged:
// the runner's validity deadline then still governs). It gives up on the
// grant after holdTimeout. Errors: errHoldsUnsupported for a 404, a
// *statusError for any other answer (the sidecar refuses: the term is
// ending), anything else when there was no answer.
//
// The hold's lifetime is not ctx's: ctx only cancels the request until it
// is granted, so that a signal to the runner does not end the hold before
// its command has stopped.
func (s *sidecar) hold(ctx context.Context, token fence.Token, log *slog.Logger) (*hold, error) {
	u := *s.base
	u.Path += "/v1/hold"
	if s.lease != "" {
		u.Path = s.base.Path + "/v1/leases/" + url.PathEscape(s.lease) + "/hold"
	}
	u.RawQuery = url.Values{"token": {token.String()}}.Encode()
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel) // ctx cancels the request until the grant
	timer := time.AfterFunc(holdTimeout, cancel)
	granted := false
	defer func() {
		stop()
		timer.Stop()
		if !granted {
			cancel()
		}
	}()
	req, err := http.NewRequestWithContext(hctx, http.MethodPost, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		if resp.StatusCode == http.StatusNotFound {
			return nil, fmt.Errorf("POST %s: %w", u.Redacted(), errHoldsUnsupported)
		}
		return nil, &statusError{
			msg:        fmt.Sprintf("POST %s: status %d: %.200s", u.Redacted(), resp.StatusCode, body),
			retryAfter: resp.Header.Get("Retry-After"),
		}
	}
	br := bufio.NewReaderSize(resp.Body, maxGrant)
	line, err := br.ReadSlice('\n')
	var grant struct {
		Held         bool        `json:"held"`
		FencingToken fence.Token `json:"fencingToken"`
	}
	if err == nil {
		err = json.Unmarshal(line, &grant)
	}
	if err == nil && !grant.Held {
		err = errors.New(`the answer lacks "held": true`)
	}
	if err != nil || !stop() || !timer.Stop() {
		resp.Body.Close()
		return nil, fmt.Errorf("POST %s: read the grant: %w", u.Redacted(), cmpErr(err, context.Cause(hctx)))
	}
	granted = true
	h := &hold{token: token, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		defer resp.Body.Close()
		_, err := io.Copy(io.Discard, br)
		if hctx.Err() == nil {
			log.Warn("the sidecar ended the hold on the term (it is shutting down, or gone); the validity deadline still governs",
				"fencingToken", token, "err", err)
		}
	}()
	return h, nil
}

// cmpErr is err, or else alt.
func cmpErr(err, alt error) error {
	if err != nil {
		return err
	}
	return alt
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
