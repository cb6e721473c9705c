package proxy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/leasehold/leasehold/internal/fence"
	"github.com/leasehold/leasehold/internal/rule"
	"github.com/leasehold/leasehold/pkg/api"
)

// The headers the proxy sets. Every request header whose name starts with
// X-Leasehold- (compared case-insensitively, "_" counting as "-") is
// removed from what the client sent before the proxy sets its own.
const (
	// HeaderFencingToken carries, on requests forwarded to the local app,
	// the token of the term this instance validly led when the request was
	// forwarded, in decimal.
	HeaderFencingToken = api.FencingTokenHeader
	// HeaderTerm carries, beside HeaderFencingToken, that term's number
	// (the Lease's leaseTransitions): for people, not a token.
	HeaderTerm = api.TermHeader
	// HeaderForwarded is the loop guard: a follower sets it on the requests
	// it forwards to the leader's proxy, with its own marker as the value.
	// A proxy that is not the valid leader answers such a request with 503
	// (CodeForwardLoop) instead of forwarding it again.
	HeaderForwarded = "X-Leasehold-Forwarded"
	// HeaderLease names, beside HeaderForwarded, the Lease the forwarded
	// request is for, as namespace/name (Config.Lease, or one of
	// Config.Leases). A proxy that receives a forwarded request naming
	// another Lease answers 503 (CodeWrongLease) and delivers it to no one.
	// A proxy of a lease group (Config.Leases) also reads it on a client's
	// request, where it names the Lease whose leader's app must answer
	// (namespace/name, or the name alone), and sets it to the Lease's name
	// on the requests to its app.
	HeaderLease = "X-Leasehold-Lease"
)

// reservedPrefix is the lower-case prefix of the headers only the proxy
// sets.
const reservedPrefix = "x-leasehold-"

// View is what the proxy knows about leadership at one instant.
type View struct {
	// Leading is true when this instance validly leads at the instant asked
	// (already checked against validity).
	Leading bool
	// Token is this instance's fencing token while Leading. A View that is
	// Leading carries a non-zero Token.
	Token fence.Token
	// Term is the term's leaseTransitions, while Leading.
	Term int32
	// LeaderAddress is the host:port of the current valid leader's proxy,
	// "" when unknown or when no instance validly leads. It is used only
	// when not Leading.
	LeaderAddress string
}

// Config configures a Proxy.
type Config struct {
	// Upstream is the host:port of the local app (e.g. 127.0.0.1:8080),
	// reached over plain HTTP.
	Upstream string
	// Lease is the Lease whose leader's app this proxy serves, as
	// namespace/name: the value of HeaderLease on the requests it forwards,
	// and the only one it accepts on the forwarded requests it receives.
	Lease string
	// View tells whether this instance leads at now. The proxy calls it
	// once per request to decide, at the moment of forwarding (the package
	// doc says exactly when, and when it asks again), from the request's
	// goroutine, and from CloseEndedTerms' caller; it must be safe for
	// concurrent use and must not block.
	View func(now time.Time) View
	// Leases, instead of Lease and View, makes this a proxy of a lease
	// group: each request names its Lease in HeaderLease and is decided by
	// that Lease's View (see the package doc). Their names are distinct.
	Leases []Lease
	// Clock gives the now passed to View and times the requests for the
	// metrics; nil is the real clock.
	Clock clock.PassiveClock
	// Registerer gets the proxy's metrics; nil: not registered.
	Registerer prometheus.Registerer
	// Logger gets the proxy's errors; nil discards them.
	Logger *slog.Logger
	// RetryAfter is the Retry-After of the 503 answers, rounded up to whole
	// seconds, at least 1 (so 0 means 1 s).
	RetryAfter time.Duration
	// Transport sends the forwarded requests, to the app and to the
	// leader's proxy; nil is the default (DefaultTransport).
	Transport http.RoundTripper
}

// component prefixes the messages of New's errors.
const component = "proxy"

// validate checks c: Upstream is a host:port with a host and a port; Lease
// is namespace/name and View is set, or instead Leases has Leases of
// distinct namespace/names, each with its View; RetryAfter is not negative.
func (c *Config) validate() error {
	upstream := rule.Field{Name: "Upstream", Label: "upstream", Value: c.Upstream}
	if c.Upstream == "" {
		return rule.Errorf(component, "%s is required", upstream)
	}
	host, port, err := net.SplitHostPort(c.Upstream)
	switch {
	case err != nil:
		return rule.Errorf(component, "%s must be host:port, e.g. 127.0.0.1:8080", upstream)
	case host == "":
		return rule.Errorf(component, "%s has no host", upstream)
	case port == "":
		return rule.Errorf(component, "%s has no port", upstream)
	}
	if c.Leases != nil {
		if err := c.validateLeases(); err != nil {
			return err
		}
	} else {
		lease := rule.Field{Name: "Lease", Label: "lease", Value: c.Lease}
		if !isLeaseName(c.Lease) {
			return rule.Errorf(component, "%s must be namespace/name", lease)
		}
		if c.View == nil {
			return rule.Errorf(component, "%s is required", rule.Field{Name: "View", Label: "view", Value: nil})
		}
	}
	if c.RetryAfter < 0 {
		return rule.Errorf(component, "%s must not be negative", rule.Field{Name: "RetryAfter", Label: "retryAfter", Value: c.RetryAfter})
	}
	return nil
}

// validateLeases checks Leases, for validate: at least one, without Lease
// or View; each namespace/name, with its View; no name twice.
func (c *Config) validateLeases() error {
	leases := rule.Field{Name: "Leases", Label: "leases", Value: len(c.Leases)}
	switch {
	case len(c.Leases) == 0:
		return rule.Errorf(component, "%s lists no Lease", leases)
	case c.Lease != "" || c.View != nil:
		return rule.Errorf(component, "%s is set with Lease or View: set one Lease with its View, or Leases", leases)
	}
	names := map[string]bool{}
	for i, l := range c.Leases {
		field := rule.Field{Name: fmt.Sprintf("Leases[%d].Name", i), Label: fmt.Sprintf("leases[%d].name", i), Value: l.Name}
		switch {
		case !isLeaseName(l.Name):
			return rule.Errorf(component, "%s must be namespace/name", field)
		case l.View == nil:
			return rule.Errorf(component, "%s is required", rule.Field{Name: fmt.Sprintf("Leases[%d].View", i), Label: fmt.Sprintf("leases[%d].view", i), Value: nil})
		}
		_, name, _ := strings.Cut(l.Name, "/")
		if names[name] {
			return rule.Errorf(component, "%s: a Lease of that name is listed already (a request may name a Lease by its name alone)", field)
		}
		names[name] = true
	}
	return nil
}

// isLeaseName reports whether s is namespace/name.
func isLeaseName(s string) bool {
	ns, name, ok := strings.Cut(s, "/")
	return ok && ns != "" && name != "" && !strings.Contains(name, "/")
}

// DefaultTransport returns the Transport a Proxy uses when Config.Transport
// is nil: HTTP/1.1 with keep-alives, tuned for an app on loopback and
// peers in the same cluster. Each call returns a new Transport.
//
//   - No proxy: HTTP_PROXY and friends, meant for the app's own outbound
//     traffic, never carry the app's inbound requests.
//   - Up to 64 idle connections per host (net/http's default is 2, which
//     makes a busy proxy open and close a connection per request).
//   - An idle connection is closed after 1 s, before the idle timeouts of
//     common app servers (gunicorn 2 s, Node.js and uvicorn 5 s) end it
//     from the other side: a request written onto a connection the app is
//     closing fails, and a request with a body is never sent again (502).
//   - Connecting times out after 5 s (a leader's address that no longer
//     answers); there is no timeout on the answer, so long polls, SSE and
//     upgraded connections last as long as the app keeps them.
//   - No compression is asked for on the client's behalf: bodies pass
//     through as the app sends them.
func DefaultTransport() *http.Transport {
	return &http.Transport{
		Proxy: nil,
		DialContext: (&net.Dialer{
			Timeout:   5 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
	}
}

// Proxy is the forwarding proxy: an http.Handler. Create it with New. It is
// safe for concurrent use and starts no goroutine of its own (net/http's
// Transport and ReverseProxy start theirs per connection, and end them
// with the connection; CloseIdleConnections ends the idle ones).
type Proxy struct {
	upstream *url.URL
	// leases are the Leases served: Config.Lease alone, or Config.Leases.
	leases     []*served
	group      *groupRouting // nil for one Lease
	clock      clock.PassiveClock
	log        *slog.Logger
	retryAfter string // the header's value
	marker     string // this proxy's value of HeaderForwarded
	base       http.RoundTripper
	rp         *httputil.ReverseProxy
	lastPeer   atomic.Int64 // when the last request from another proxy arrived (UnixNano of the clock), 0 before the first
}

// New checks cfg and returns a Proxy. Its errors name the Config field at
// fault (a *rule.Error), or say that registering the metrics failed.
func New(cfg Config) (*Proxy, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var id [8]byte
	_, _ = rand.Read(id[:]) // never fails (crypto/rand)
	p := &Proxy{
		upstream:   &url.URL{Scheme: "http", Host: cfg.Upstream},
		clock:      cfg.Clock,
		log:        cfg.Logger,
		retryAfter: strconv.Itoa(retryAfterSeconds(cfg.RetryAfter)),
		marker:     hex.EncodeToString(id[:]),
		base:       cfg.Transport,
	}
	if p.clock == nil {
		p.clock = clock.RealClock{}
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	p.log = p.log.With("upstream", cfg.Upstream)
	if p.base == nil {
		p.base = DefaultTransport()
	}
	if err := p.setUpLeases(cfg); err != nil {
		return nil, err
	}
	errLog := p.log // ReverseProxy's own lines: with the Lease, when there is one
	if p.group == nil {
		errLog = p.leases[0].log
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      guard{p},
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.errorHandler,
		// FlushInterval 0: a response is flushed to the client after each
		// write when it is an event stream (text/event-stream) or of
		// unknown length (chunked), as ReverseProxy decides; a response
		// of known length is copied through the server's buffer.
		FlushInterval: 0,
		ErrorLog:      slog.NewLogLogger(errLog.Handler(), slog.LevelWarn),
		// Reuse the buffers response bodies are copied through (without a
		// pool, ReverseProxy allocates 32 KiB per request).
		BufferPool: &bufferPool{},
	}
	return p, nil
}

// bufferPool is the ReverseProxy's BufferPool: 32 KiB buffers (the size
// ReverseProxy would allocate), reused.
type bufferPool struct{ pool sync.Pool }

func (b *bufferPool) Get() []byte {
	if buf, ok := b.pool.Get().(*[]byte); ok {
		return *buf
	}
	return make([]byte, 32*1024)
}

func (b *bufferPool) Put(buf []byte) { b.pool.Put(&buf) }

// retryAfterSeconds is d rounded up to whole seconds, at least 1.
func retryAfterSeconds(d time.Duration) int {
	return max(1, int((d+time.Second-1)/time.Second))
}

// setUpLeases sets up the Leases cfg names, with their series: for one Lease,
// registered with Config.Registerer as they are; for a group, each Lease's
// labelled with lease (its name), and the group's routing.
func (p *Proxy) setUpLeases(cfg Config) error {
	leases := cfg.Leases
	if leases == nil {
		leases = []Lease{{Name: cfg.Lease, View: cfg.View}}
	}
	var registered []*metrics
	unregister := func() {
		for _, m := range registered {
			m.unregister()
		}
	}
	for _, l := range leases {
		_, name, _ := strings.Cut(l.Name, "/")
		reg := cfg.Registerer
		if cfg.Leases != nil && reg != nil {
			reg = prometheus.WrapRegistererWith(prometheus.Labels{"lease": name}, reg)
		}
		m, err := newMetrics(reg)
		if err != nil {
			unregister()
			return err
		}
		registered = append(registered, m)
		s := &served{lease: l.Name, name: name, view: l.View, log: p.log.With("lease", l.Name), metrics: m}
		s.terms.open = map[fence.Token]map[*exchange]struct{}{}
		p.leases = append(p.leases, s)
	}
	if cfg.Leases != nil {
		g, err := newGroupRouting(p.leases, cfg.Registerer)
		if err != nil {
			unregister()
			return err
		}
		p.group = g
	}
	return nil
}

// Marker is this proxy's value of HeaderForwarded on the requests it
// forwards to the leader's proxy: random, made by New.
func (p *Proxy) Marker() string { return p.marker }

// CloseIdleConnections closes the transport's idle kept-alive connections
// (those of Config.Transport if it has such a method), ending their
// goroutines. Call it once the server serving the Proxy has shut down.
func (p *Proxy) CloseIdleConnections() {
	if c, ok := p.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// LastForwarded is when the latest request forwarded by another proxy
// (with HeaderForwarded) arrived, by Config.Clock; zero before the first.
// A leaving instance keeps its proxy serving until its followers, having
// seen the new leader, have stopped sending to it.
func (p *Proxy) LastForwarded() time.Time {
	if n := p.lastPeer.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// outcome is what the proxy did with a request: the metrics' label.
type outcome string

const (
	local     outcome = "local"     // forwarded to the app beside this leader
	forwarded outcome = "forwarded" // forwarded to the leader's proxy
	rejected  outcome = "rejected"  // answered by the proxy itself, not forwarded
)

// exchange is one request's state, shared by ServeHTTP and the
// ReverseProxy's hooks through the request's context. All of them run on
// the request's goroutine (a Transport's goroutines never see it), so it
// needs no lock.
type exchange struct {
	start    time.Time
	lease    *served // the Lease the request is for
	outcome  outcome
	target   string      // host:port forwarded to
	token    fence.Token // the term's token, when forwarded to the app (local)
	looped   bool        // the request came with HeaderForwarded
	from     string      // its value: the marker of the proxy that forwarded it
	reject   *rejection  // set when the request must not be forwarded
	code     int         // the status answered, once known
	took     time.Duration
	recorded bool // the metrics have counted it
	// cancel ends the request to the target (and so an upgraded
	// connection, or a response being streamed): when its term ends.
	// Safe to call from any goroutine.
	cancel context.CancelFunc
	held   bool // terms holds it (set by terms.add, on the request's goroutine)
}

type exchangeKey struct{}

func exchangeOf(ctx context.Context) *exchange {
	x, _ := ctx.Value(exchangeKey{}).(*exchange)
	return x
}

// ServeHTTP forwards r to the local app when this instance leads r's
// Lease, to the leader's proxy when another does, and otherwise answers
// 503 itself; in a group, a request that names none of its Leases is
// answered 400, 404 or 503 (see the package doc).
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	x := &exchange{start: p.clock.Now(), lease: p.leases[0]}
	_, fromPeer := r.Header[HeaderForwarded]
	if fromPeer {
		p.lastPeer.Store(x.start.UnixNano())
	}
	if p.group != nil {
		var rej *rejection
		if x.lease, rej = p.group.pick(r.Header, fromPeer); rej != nil {
			p.refuse(w, r, rej)
			return
		}
	}
	ctx, cancel := context.WithCancel(context.WithValue(r.Context(), exchangeKey{}, x))
	x.cancel = cancel
	defer cancel()
	defer x.lease.terms.remove(x) // also when ReverseProxy aborts a stream (a panic)
	defer func() {
		// An upgraded connection is counted when it ends, with the time
		// its 101 took; every other answer was counted when its status
		// was known.
		if !x.recorded && x.code != 0 {
			p.record(x, x.code, x.took)
		}
	}()
	p.rp.ServeHTTP(w, r.WithContext(ctx))
}

// rewrite is the ReverseProxy's Rewrite hook: the decision, taken from one
// View read now, at the last point before the request is handed to the
// transport (see the package doc).
func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	x := exchangeOf(pr.Out.Context())
	in, out := pr.In, pr.Out
	_, x.looped = in.Header[HeaderForwarded]
	x.from = in.Header.Get(HeaderForwarded)
	lease, named := in.Header[HeaderLease]
	stripReserved(out.Header)
	if p.group == nil && x.looped && named && (len(lease) != 1 || lease[0] != x.lease.lease) {
		x.outcome = rejected
		x.reject = &rejection{status: http.StatusServiceUnavailable, code: CodeWrongLease,
			msg: fmt.Sprintf("this proxy serves the Lease %s, and the request was forwarded for %s (%s: %s): the address its sender took for its leader's is no longer that; try again",
				x.lease.lease, strings.Join(lease, ", "), HeaderForwarded, x.from)}
		return
	}
	if p.route(x, out, x.lease.view(p.clock.Now()), pr.SetURL); x.reject != nil {
		return
	}
	// The client's Host, as NewSingleHostReverseProxy keeps it, so that the
	// app sees the name it was called by, also through the leader's proxy.
	out.Host = in.Host
	// X-Forwarded-For lists every hop: the inbound list, then the address
	// the request came from. X-Forwarded-Host and -Proto are passed on when
	// the request has them (a follower's proxy or an ingress set them), and
	// otherwise are In's Host and "http".
	host, proto := in.Header.Get("X-Forwarded-Host"), in.Header.Get("X-Forwarded-Proto")
	if prior := in.Header["X-Forwarded-For"]; len(prior) > 0 {
		out.Header["X-Forwarded-For"] = prior
	}
	pr.SetXForwarded()
	if host != "" {
		out.Header.Set("X-Forwarded-Host", host)
	}
	if proto != "" {
		out.Header.Set("X-Forwarded-Proto", proto)
	}
}

// route applies the decision v, the View of x's Lease, gives to out: sets
// its target (with setURL) and the headers of that route, and records them
// in x; or records in x the rejection to answer. It is the same decision
// for a request's first attempt (rewrite) and for its one more after the
// leader's proxy refused the connection (guard).
func (p *Proxy) route(x *exchange, out *http.Request, v View, setURL func(*url.URL)) {
	switch {
	case v.Leading:
		x.outcome, x.target, x.token = local, p.upstream.Host, v.Token
		setURL(p.upstream)
		out.Header.Del(HeaderForwarded)
		out.Header.Del(HeaderLease)
		if p.group != nil {
			out.Header.Set(HeaderLease, x.lease.name)
		}
		out.Header.Set(HeaderFencingToken, v.Token.String())
		out.Header.Set(HeaderTerm, strconv.FormatInt(int64(v.Term), 10))
	case x.looped:
		x.outcome = rejected
		x.reject = &rejection{status: http.StatusServiceUnavailable, code: CodeForwardLoop,
			msg: fmt.Sprintf("this instance is not the leader and the request was already forwarded once (%s: %s); leadership is changing, try again",
				HeaderForwarded, x.from)}
	case v.LeaderAddress == "":
		x.outcome = rejected
		x.reject = &rejection{status: http.StatusServiceUnavailable, code: CodeNoLeader,
			msg: "no instance validly leads now, or its address is not known yet; try again"}
	default:
		x.outcome, x.target, x.token = forwarded, v.LeaderAddress, 0
		setURL(&url.URL{Scheme: "http", Host: v.LeaderAddress})
		out.Header.Del(HeaderFencingToken)
		out.Header.Del(HeaderTerm)
		out.Header.Set(HeaderForwarded, p.marker)
		out.Header.Set(HeaderLease, x.lease.lease)
	}
}

// stripReserved removes the headers named X-Leasehold-* (case-insensitive,
// "_" counting as "-", since CGI-style servers fold both into "_").
func stripReserved(h http.Header) {
	for k := range h {
		if len(k) < len(reservedPrefix) {
			continue
		}
		reserved := true
		for i := range len(reservedPrefix) {
			c := k[i] | 0x20 // lower case for letters; '-' and '_' stay apart
			if k[i] == '_' {
				c = '-'
			}
			if c != reservedPrefix[i] {
				reserved = false
				break
			}
		}
		if reserved {
			delete(h, k)
		}
	}
}

// rejection is a request the proxy answers itself: the error guard's
// RoundTrip returns, and errorHandler answers.
type rejection struct {
	status int
	code   Code
	msg    string
}

func (r *rejection) Error() string { return r.msg }

// guard is the ReverseProxy's Transport: it hands a request on to the real
// transport unless the decision rejected it, in which case it returns the
// rejection at once: nothing is sent anywhere. A request to the leader's
// proxy that was refused at connect goes once more where the leader is now
// known to be (refused.go).
type guard struct{ p *Proxy }

func (g guard) RoundTrip(req *http.Request) (*http.Response, error) {
	x := exchangeOf(req.Context())
	if x != nil && x.reject != nil {
		if req.Body != nil {
			_ = req.Body.Close() // RoundTrip's contract (ReverseProxy's body ignores it)
		}
		return nil, x.reject
	}
	if x == nil || x.outcome != forwarded {
		return g.p.base.RoundTrip(req)
	}
	return g.p.forward(x, req)
}

// modifyResponse counts a response once its status is known (a 101 once
// the upgraded connection ends, or fails to start).
func (p *Proxy) modifyResponse(res *http.Response) error {
	x := exchangeOf(res.Request.Context())
	if x == nil {
		return nil
	}
	took := p.clock.Since(x.start)
	if x.outcome == local && longLived(res) {
		x.lease.terms.add(p, x)
	}
	if res.StatusCode == http.StatusSwitchingProtocols {
		x.code, x.took = res.StatusCode, took
		return nil
	}
	p.record(x, res.StatusCode, took)
	return nil
}

// errorHandler answers a request that was not forwarded: 503 for a
// rejection, 502 when the app or the leader's proxy gave no answer (or an
// upgrade could not be completed), and never sends the request again.
func (p *Proxy) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	x := exchangeOf(r.Context())
	var rej *rejection
	switch {
	case errors.As(err, &rej):
		x.lease.log.Debug("proxy: request rejected", "code", rej.code, "method", r.Method, "path", r.URL.Path)
	case x == nil || x.outcome == "":
		// ReverseProxy refused the request before the decision (an Upgrade
		// header naming no printable protocol).
		rej = &rejection{status: http.StatusBadRequest, code: CodeBadRequest, msg: err.Error()}
		if x != nil {
			x.outcome = rejected
		}
	default:
		what := "the app at " + x.target
		if x.outcome == forwarded {
			what = "the leader's proxy at " + x.target
		}
		rej = &rejection{status: http.StatusBadGateway, code: CodeUpstreamUnavailable,
			msg: what + " gave no answer: " + err.Error() + " (the request is not sent again)"}
		if r.Context().Err() != nil {
			x.lease.log.Debug("proxy: client went away", "outcome", x.outcome, "target", x.target, "err", err)
		} else {
			x.lease.log.Warn("proxy: upstream gave no answer", "outcome", x.outcome, "target", x.target, "err", err)
		}
	}
	if x != nil {
		x.code = rej.status
		if !x.recorded {
			p.record(x, rej.status, p.clock.Since(x.start))
		}
	}
	if rej.status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", p.retryAfter)
	}
	writeError(w, rej.status, rej.code, rej.msg)
}

// record counts x once, answered with code after took.
func (p *Proxy) record(x *exchange, code int, took time.Duration) {
	x.recorded = true
	o := x.outcome
	if o == "" {
		o = rejected
	}
	x.lease.metrics.observe(o, code, took)
}
