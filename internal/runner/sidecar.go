package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/leasehold/leasehold/internal/httpapi"
)

// Bounds of the long-poll wait the runner asks for.
const (
	minWait = 50 * time.Millisecond
	maxWait = 5 * time.Minute
)

// Retrying an unreachable sidecar: the first retry after minBackoff, then
// doubling up to maxBackoff. An answer other than 200 with Retry-After (a
// sidecar shutting down answers 503 with it) is retried after that long
// instead, within [minBackoff, maxRetryAfter].
const (
	minBackoff    = 100 * time.Millisecond
	maxBackoff    = time.Second
	maxRetryAfter = 30 * time.Second
)

// requestSlack is added to a watch's wait (and the server's jitter, at most
// wait/16) to time out a request that the sidecar does not answer.
const requestSlack = 5 * time.Second

// maxBody bounds the status body read from the sidecar.
const maxBody = 1 << 20

// sidecar is the client of the sidecar's GET /v1/watch, or, for one Lease
// of a group, of GET /v1/leases.
type sidecar struct {
	base   *url.URL
	client *http.Client
	lease  string // the Lease of a group to follow; "" for the one Lease
}

func newSidecar(base *url.URL, client *http.Client, lease string) *sidecar {
	if client == nil {
		// A sidecar in the same pod is never reached through a proxy, and
		// the app's HTTP_PROXY must not say otherwise.
		transport := http.DefaultTransport.(*http.Transport).Clone()
		transport.Proxy = nil
		client = &http.Client{Transport: transport}
	}
	return &sidecar{base: base, client: client, lease: lease}
}

// leases is the part of the body of GET /v1/leases the runner reads.
type leases struct {
	Index  uint64           `json:"index"`
	Leases []httpapi.Status `json:"leases"`
}

// watch asks GET /v1/watch?wait=wait[&index=index] and decodes the status;
// for a Lease of a group, GET /v1/leases with the same parameters, and
// returns that Lease's status with the group's Index (the index the next
// request watches from). It gives up after wait plus the server's jitter
// plus requestSlack.
func (s *sidecar) watch(ctx context.Context, index uint64, hasIndex bool, wait time.Duration) (httpapi.Status, error) {
	q := url.Values{"wait": {wait.String()}}
	if hasIndex {
		q.Set("index", strconv.FormatUint(index, 10))
	}
	u := *s.base
	u.Path += "/v1/watch"
	if s.lease != "" {
		u.Path = s.base.Path + "/v1/leases"
	}
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(ctx, wait+wait/16+requestSlack)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return httpapi.Status{}, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return httpapi.Status{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return httpapi.Status{}, fmt.Errorf("GET %s: read the answer: %w", u.Redacted(), err)
	}
	if resp.StatusCode != http.StatusOK {
		return httpapi.Status{}, &statusError{
			msg:        fmt.Sprintf("GET %s: status %d: %.200s", u.Redacted(), resp.StatusCode, body),
			retryAfter: resp.Header.Get("Retry-After"),
		}
	}
	if s.lease != "" {
		return s.leaseOf(body, u)
	}
	var st httpapi.Status
	if err := json.Unmarshal(body, &st); err != nil {
		return httpapi.Status{}, fmt.Errorf("GET %s: decode the status: %w", u.Redacted(), err)
	}
	return st, nil
}

// leaseOf picks s.lease's status out of a GET /v1/leases body, with the
// group's Index.
func (s *sidecar) leaseOf(body []byte, u url.URL) (httpapi.Status, error) {
	var all leases
	if err := json.Unmarshal(body, &all); err != nil {
		return httpapi.Status{}, fmt.Errorf("GET %s: decode the leases: %w", u.Redacted(), err)
	}
	for _, st := range all.Leases {
		if st.Lease == s.lease {
			st.Index = all.Index
			return st, nil
		}
	}
	return httpapi.Status{}, fmt.Errorf("GET %s: the sidecar follows no Lease named %q", u.Redacted(), s.lease)
}

// statusError is an answer of the sidecar other than 200.
type statusError struct {
	msg        string
	retryAfter string // the Retry-After header, "" when absent
}

func (e *statusError) Error() string { return e.msg }

// retryDelay is how long to wait before asking again after err: the
// Retry-After of a statusError (delta-seconds or an HTTP date, judged by
// clk), clamped to [minBackoff, maxRetryAfter]; ok is false when err has
// none, or none that parses.
func retryDelay(err error, clk clock.PassiveClock) (d time.Duration, ok bool) {
	se, isStatus := errors.AsType[*statusError](err)
	if !isStatus || se.retryAfter == "" {
		return 0, false
	}
	if secs, perr := strconv.ParseInt(se.retryAfter, 10, 64); perr == nil || (errors.Is(perr, strconv.ErrRange) && secs > 0) {
		if secs < 0 {
			return 0, false
		}
		d = time.Duration(min(secs, int64(maxRetryAfter/time.Second)+1)) * time.Second
	} else if at, perr := http.ParseTime(se.retryAfter); perr == nil {
		d = at.Sub(clk.Now())
	} else {
		return 0, false
	}
	return min(max(d, minBackoff), maxRetryAfter), true
}

// answer is one status from the sidecar, with the runner's clock reading
// taken just before the request that got it was sent: the sidecar computed
// it later, so sent + validForMs never overstates the validity.
type answer struct {
	status  httpapi.Status
	sent    time.Time
	indexed bool // the request had an index: it may have blocked
}

// watcher keeps at most one watch request in flight, on a goroutine of its
// own, so that the runner's loop never blocks on the sidecar: its timers
// fire whether or not the sidecar answers. A request retries, with a short
// backoff or after the sidecar's Retry-After, until the sidecar answers or
// the watcher is closed.
type watcher struct {
	sidecar *sidecar
	clock   clock.Clock
	log     *slog.Logger

	results chan answer // capacity 1: a finished request never blocks

	busy     bool // a request is in flight, or its answer is unread
	index    uint64
	hasIndex bool
	cancel   context.CancelFunc
	wg       sync.WaitGroup
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
	index, hasIndex := w.index, w.hasIndex && !fresh
	w.wg.Go(func() { w.fetch(ctx, index, hasIndex, wait) })
	return true
}

// received records an answer taken from results: the next request watches
// from its index.
func (w *watcher) received(a answer) {
	w.busy = false
	w.cancel()
	w.index, w.hasIndex = a.status.Index, true
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
// when ctx does. Between attempts it waits backoff (from minBackoff,
// doubling up to maxBackoff), or the Retry-After the sidecar asked for
// (retryDelay). The runner's loop keeps its own timers meanwhile: waiting
// here never delays the validity deadline.
func (w *watcher) fetch(ctx context.Context, index uint64, hasIndex bool, wait time.Duration) {
	backoff := minBackoff
	for attempt := 1; ; attempt++ {
		sent := w.clock.Now()
		st, err := w.sidecar.watch(ctx, index, hasIndex, wait)
		if err == nil {
			if attempt > 1 {
				w.log.Info("sidecar answers again", "attempts", attempt)
			}
			w.results <- answer{status: st, sent: sent, indexed: hasIndex}
			return
		}
		if ctx.Err() != nil {
			return
		}
		delay := backoff
		if d, ok := retryDelay(err, w.clock); ok {
			delay = d
			w.log.Warn("sidecar asked to retry later", "err", err, "attempt", attempt, "retryIn", delay)
		} else {
			w.log.Warn("sidecar did not answer; retrying", "err", err, "attempt", attempt, "retryIn", delay)
		}
		timer := w.clock.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C():
		}
		backoff = min(2*backoff, maxBackoff)
	}
}
