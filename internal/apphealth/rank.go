package apphealth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// Rank is what the app's rank endpoint (LEASEHOLD_APP_RANK_URL) last
// answered: the generation of its data and its position in it, for
// data-aware failover. Known is false before the first valid answer and
// after any failed probe: a rank that cannot be read now is not trusted.
type Rank struct {
	Known      bool
	Generation string
	Position   int64
	// ObservedAt is when the latest probe completed (the Prober's clock);
	// zero before the first.
	ObservedAt time.Time
	// LastError is why the latest probe failed, "" after a valid answer.
	LastError string
}

// RankConfig describes the rank probe of one app.
type RankConfig struct {
	// URL is the absolute http or https URL to GET; a 2xx answer's body is
	// {"generation": "<string>", "position": <int64>}.
	URL string
	// Timeout bounds each probe, at most Interval; Interval is the time
	// between the starts of two probes (the health check's).
	Timeout, Interval time.Duration

	// Clock drives the Interval ticker and stamps ObservedAt; nil means
	// the real clock. Client, if set, sends the probes (as Config.Client).
	Clock  clock.WithTicker
	Client *http.Client
	Logger *slog.Logger
	// OnRank, if set, is called from Run's goroutine after every probe
	// (each may carry a new position) with the new Rank. Probing pauses
	// until it returns.
	OnRank func(ctx context.Context, r Rank)
}

// Validate checks c's URL, Timeout and Interval by Config's rules (the
// thresholds do not apply), with the same *rule.Error.
func (c *RankConfig) Validate() error {
	hc := Config{URL: c.URL, Timeout: c.Timeout, Interval: c.Interval, FailureThreshold: 1, SuccessThreshold: 1}
	return hc.Validate()
}

// RankProber probes the app's rank endpoint. Create it with NewRank, start
// it with Run (once), and read its Rank from any goroutine. Its requests
// follow the health probe's contract (package doc): GET, no redirects,
// no proxy, a fresh connection each, each bounded by Timeout, probes never
// overlap; at most 4 KiB of the answer is read.
type RankProber struct {
	cfg       RankConfig
	clock     clock.WithTicker
	client    *http.Client
	transport *http.Transport
	log       *slog.Logger
	rank      atomic.Pointer[Rank] // written by Run's goroutine only
	started   atomic.Bool
}

// NewRank checks cfg and returns a RankProber that has not started. Its
// Rank is unknown.
func NewRank(cfg RankConfig) (*RankProber, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &RankProber{cfg: cfg, clock: cfg.Clock, log: cfg.Logger}
	if p.clock == nil {
		p.clock = clock.RealClock{}
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	p.client, p.transport = probeClient(cfg.Client)
	p.rank.Store(&Rank{})
	return p, nil
}

// Rank is the latest probe's result.
func (p *RankProber) Rank() Rank { return *p.rank.Load() }

// Run probes at once and then every Interval until ctx ends, then returns
// nil (a probe under way is abandoned and discarded). Run may be called
// once.
func (p *RankProber) Run(ctx context.Context) error {
	if !p.started.CompareAndSwap(false, true) {
		return errors.New("apphealth: rank Run called twice")
	}
	every(ctx, p.clock, p.cfg.Interval, p.transport, p.check)
	return nil
}

// check runs one probe and records its result, unless ctx ended meanwhile.
func (p *RankProber) check(ctx context.Context) {
	status, body, err := p.probe(ctx)
	if ctx.Err() != nil {
		return
	}
	r, err := ParseRank(status, body, err)
	r.ObservedAt = p.clock.Now()
	if err != nil {
		r.LastError = err.Error()
	}
	prev := p.Rank()
	p.rank.Store(&r)
	switch {
	case r.Known && (!prev.Known || prev.Generation != r.Generation):
		p.log.Info("app rank known", "generation", r.Generation, "position", r.Position)
	case !r.Known && (prev.Known || prev.ObservedAt.IsZero()):
		p.log.Warn("app rank unknown: it ranks last as a successor", "err", r.LastError)
	}
	if p.cfg.OnRank != nil {
		p.cfg.OnRank(ctx, r)
	}
}

// probe sends one request and returns the answer's status and body (at
// most maxBody of it), or why none came.
func (p *RankProber) probe(ctx context.Context) (int, []byte, error) {
	reqCtx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, p.cfg.URL, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("Accept", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, nil, describe(reqCtx, err, p.cfg.Timeout)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	_ = resp.Body.Close()
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("reading body: %w", describe(reqCtx, err, p.cfg.Timeout))
	}
	return resp.StatusCode, body, nil
}

// ParseRank is the rank a probe's outcome gives: its status, its body,
// and the error of the request (nil when an answer came). Known only for
// a 2xx answer whose body is at most 4 KiB of one JSON object with a
// string "generation" and an integer "position" (int64); anything else
// is an unknown rank and the reason.
func ParseRank(status int, body []byte, err error) (Rank, error) {
	switch {
	case err != nil:
		return Rank{}, err
	case status < 200 || status > 299:
		return Rank{}, fmt.Errorf("status %d", status)
	case len(body) > maxBody:
		return Rank{}, fmt.Errorf("answer longer than %d bytes", maxBody)
	}
	var v struct {
		Generation *string      `json:"generation"`
		Position   *json.Number `json:"position"`
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return Rank{}, fmt.Errorf(`answer is not {"generation": "<string>", "position": <int64>}: %v`, err)
	}
	if v.Generation == nil || v.Position == nil {
		return Rank{}, errors.New(`answer lacks "generation" or "position"`)
	}
	pos, err := v.Position.Int64()
	if err != nil {
		return Rank{}, fmt.Errorf(`"position" %s is not an int64`, v.Position.String())
	}
	return Rank{Known: true, Generation: *v.Generation, Position: pos}, nil
}
