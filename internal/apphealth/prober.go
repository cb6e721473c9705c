package apphealth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/leasehold/leasehold/internal/rule"
)

const (
	// userAgent names leasehold's probes in the app's access log.
	userAgent = "leasehold-probe"
	// maxBody is how much of an answer's body a probe reads (and discards).
	maxBody = 4 << 10
)

// Config describes the health check of one app.
type Config struct {
	// URL is the absolute http or https URL to GET, e.g.
	// http://127.0.0.1:8080/healthz.
	URL string
	// Timeout bounds each probe: connecting, the answer's headers and
	// reading its body. At most Interval.
	Timeout time.Duration
	// Interval is the time between the starts of two probes.
	Interval time.Duration
	// FailureThreshold is how many consecutive failed probes make a healthy
	// app unhealthy. At least 1.
	FailureThreshold int
	// SuccessThreshold is how many consecutive successful probes make an
	// unhealthy app healthy, a new Prober's included (Kubernetes probes'
	// successThreshold). At least 1; 1 makes the first success enough.
	SuccessThreshold int

	// Clock drives the Interval ticker and stamps Status times; nil means
	// the real clock. Each probe's Timeout is always real time.
	Clock clock.WithTicker
	// Client sends the probes; nil means a client that never uses a proxy
	// and never reuses a connection. A Client given here is copied and
	// made not to follow redirects; its Transport is used as it is.
	Client *http.Client
	// Logger receives the prober's log lines; nil discards them.
	Logger *slog.Logger
	// Metrics receives the prober's metrics; nil means unregistered ones.
	Metrics *Metrics
	// OnChange, if set, is called from Run's goroutine on every change of
	// Status.Healthy (including the first success) with the new Status.
	// Probing pauses until it returns.
	OnChange func(ctx context.Context, s Status)
}

// Validate checks c's settings (not its Clock, Client, Logger, Metrics or
// OnChange) and returns the first broken rule as a *rule.Error naming the
// fields it relates, with their values (a URL's password redacted):
//
//   - URL is an absolute http or https URL with a host;
//   - Timeout and Interval are greater than 0, Timeout at most Interval;
//   - FailureThreshold and SuccessThreshold are at least 1.
func (c *Config) Validate() error {
	_, err := c.validate()
	return err
}

// validate is Validate, returning the parsed URL.
func (c *Config) validate() (*url.URL, error) {
	u, err := url.Parse(c.URL)
	if c.URL == "" {
		return nil, rule.Errorf(component, "%s is required", rule.Field{Name: "URL", Label: "URL", Value: c.URL})
	}
	if err != nil {
		// The parser's message quotes the URL.
		return nil, rule.Errorf(component, "%s is not a URL: %v", rule.Field{Name: "URL", Value: c.URL}, errors.Unwrap(err))
	}
	var (
		address   = rule.Field{Name: "URL", Value: u.Redacted()}
		timeout   = rule.Field{Name: "Timeout", Label: "timeout", Value: c.Timeout}
		interval  = rule.Field{Name: "Interval", Label: "interval", Value: c.Interval}
		threshold = rule.Field{Name: "FailureThreshold", Label: "failureThreshold", Value: c.FailureThreshold}
		successes = rule.Field{Name: "SuccessThreshold", Label: "successThreshold", Value: c.SuccessThreshold}
	)
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, rule.Errorf(component, "%s must be an absolute http:// or https:// URL", address)
	case u.Host == "" || u.Hostname() == "":
		return nil, rule.Errorf(component, "%s has no host", address)
	case c.Timeout <= 0:
		return nil, rule.Errorf(component, "%s must be greater than 0", timeout)
	case c.Interval <= 0:
		return nil, rule.Errorf(component, "%s must be greater than 0", interval)
	case c.Timeout > c.Interval:
		return nil, rule.Errorf(component, "%s must not exceed %s", timeout, interval)
	case c.FailureThreshold < 1:
		return nil, rule.Errorf(component, "%s must be at least 1", threshold)
	case c.SuccessThreshold < 1:
		return nil, rule.Errorf(component, "%s must be at least 1", successes)
	}
	return u, nil
}

// component prefixes the messages of Validate.
const component = "apphealth"

// Prober checks the app's health. Create it with New, start it with Run
// (once), and read its state with Status from any goroutine.
type Prober struct {
	cfg       Config
	clock     clock.WithTicker
	client    *http.Client
	transport *http.Transport // the default client's; nil with Config.Client
	log       *slog.Logger
	metrics   *Metrics

	status  atomic.Pointer[Status] // written by Run's goroutine only
	started atomic.Bool
}

// New checks cfg and returns a Prober that has not started probing. Its
// Status is not healthy.
func New(cfg Config) (*Prober, error) {
	u, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	p := &Prober{
		cfg:     cfg,
		clock:   cfg.Clock,
		log:     cfg.Logger,
		metrics: cfg.Metrics,
	}
	if p.clock == nil {
		p.clock = clock.RealClock{}
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.metrics == nil {
		p.metrics = NewMetrics(nil)
	}
	p.log = p.log.With("url", u.Redacted())
	p.client, p.transport = probeClient(cfg.Client)
	p.status.Store(&Status{})
	return p, nil
}

// probeClient is the client probes of the app are sent with: a copy of c
// when it is given, else one that never uses a proxy and never reuses a
// connection (its transport returned, to be closed); either never follows
// a redirect.
func probeClient(c *http.Client) (*http.Client, *http.Transport) {
	var client *http.Client
	var transport *http.Transport
	if c != nil {
		cc := *c
		client = &cc
	} else {
		transport = &http.Transport{
			// Never a proxy: a probe of the app beside us must not go
			// through one configured for the app's outbound traffic.
			Proxy: nil,
			// A fresh connection for every probe, as the kubelet does: an
			// idle kept-alive connection could hide a hung app.
			DisableKeepAlives: true,
			// Ask for the body as it is.
			DisableCompression: true,
		}
		client = &http.Client{Transport: transport}
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return client, transport
}

// Run probes at once and then every Interval until ctx ends, then returns
// nil (also while a probe hangs: the probe is abandoned). It calls
// OnChange on every change of Healthy. Run may be called once.
func (p *Prober) Run(ctx context.Context) error {
	if !p.started.CompareAndSwap(false, true) {
		return errors.New("apphealth: Run called twice")
	}
	every(ctx, p.clock, p.cfg.Interval, p.transport, p.check)
	return nil
}

// check runs one probe and records its result, unless ctx ended meanwhile.
func (p *Prober) check(ctx context.Context) {
	start := time.Now() // real time, like the Timeout that bounds the probe
	err := p.probe(ctx)
	elapsed := time.Since(start)
	if ctx.Err() != nil {
		return // shutting down: the result says nothing about the app
	}

	prev := p.Status()
	next := judge(prev, err, p.clock.Now(), p.cfg.FailureThreshold, p.cfg.SuccessThreshold)
	changed := next.Healthy != prev.Healthy
	// Metrics first: whoever sees the new Status also sees them.
	p.metrics.duration.Observe(elapsed.Seconds())
	if err == nil {
		p.metrics.success.Inc()
	} else {
		p.metrics.failure.Inc()
	}
	switch {
	case changed && next.Healthy:
		p.metrics.healthy.Set(1)
	case changed:
		p.metrics.healthy.Set(0)
	}
	p.status.Store(&next)

	switch {
	case changed && next.Healthy:
		p.log.Info("app healthy")
	case changed:
		p.log.Warn("app unhealthy", "err", next.LastError, "failures", next.ConsecutiveFailures)
	case err != nil && !next.Healthy && next.ConsecutiveFailures == p.cfg.FailureThreshold:
		// Never healthy since the start: say once why we do not campaign.
		p.log.Warn("app not healthy yet", "err", next.LastError, "failures", next.ConsecutiveFailures)
	case err != nil:
		p.log.Debug("app health check failed", "err", next.LastError, "failures", next.ConsecutiveFailures)
	case !next.Healthy:
		p.log.Debug("app health check passed; not healthy until enough in a row pass",
			"successes", next.ConsecutiveSuccesses, "successThreshold", p.cfg.SuccessThreshold)
	}
	if changed && p.cfg.OnChange != nil {
		p.cfg.OnChange(ctx, next)
	}
}

// probe sends one request and returns why the app failed it, nil for a 2xx
// answer.
func (p *Prober) probe(ctx context.Context) error {
	reqCtx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, p.cfg.URL, nil)
	if err != nil {
		return err // not expected: New validated the URL
	}
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("Accept", "*/*")
	resp, err := p.client.Do(req)
	if err != nil {
		return p.describe(reqCtx, err)
	}
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
	_ = resp.Body.Close() // nothing to learn from closing a discarded body
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	if err != nil {
		return fmt.Errorf("reading body: %w", p.describe(reqCtx, err))
	}
	return nil
}

// describe turns a request error into a short reason: "timeout after 1s"
// when the probe's own deadline passed, else the error without the
// "Get <url>:" prefix (the URL is in every log line already).
func (p *Prober) describe(reqCtx context.Context, err error) error {
	return describe(reqCtx, err, p.cfg.Timeout)
}

// describe is Prober.describe for a probe bounded by timeout.
func describe(reqCtx context.Context, err error, timeout time.Duration) error {
	if errors.Is(reqCtx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("timeout after %s", timeout)
	}
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Err
	}
	return err
}
