package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultURL is where a sidecar with the default LEASEHOLD_API_ADDR
// answers, in the same pod.
const DefaultURL = "http://127.0.0.1:4040"

// DefaultTimeout bounds a request that does not block (see WithTimeout).
// It is long because POST /v1/release answers only once the release is
// written, after the holds on the term have ended (at most when its
// validity ends).
const DefaultTimeout = time.Minute

// RequestSlack is added to the wait of a blocking request, and to the
// sidecar's jitter (at most wait/16), to give up on a sidecar that does not
// answer it.
const RequestSlack = 5 * time.Second

// MaxBody bounds the body read from the sidecar. It is far above any
// answer of the API: GET /v1/leases of 1024 Leases, each with a long
// lastError, is about 1 MiB.
const MaxBody = 8 << 20

// Client asks one sidecar's API, about its single Lease or, after Lease,
// about one Lease of its lease group. It is safe for concurrent use.
type Client struct {
	base     *url.URL // scheme://host[/path], the path without a trailing slash
	http     *http.Client
	timeout  time.Duration
	ua       string
	onAnswer func(Answer)
	lease    string // "": the single Lease (/v1/status, ...); else /v1/leases/{lease}/...
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient has the Client send its requests with hc instead of its own
// client, which never uses a proxy. hc should not use a proxy either: the
// sidecar is in the same pod. hc's Timeout, if any, bounds every request,
// the blocking ones too.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithTimeout bounds each request that does not block (and a Hold until it
// is granted) to d; 0 leaves them bounded by ctx alone. DefaultTimeout by
// default.
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithUserAgent sets the User-Agent of every request (net/http's default
// otherwise).
func WithUserAgent(ua string) Option { return func(c *Client) { c.ua = ua } }

// OnAnswer has f called with every answer of the sidecar, whatever its
// status, before the client interprets it: for a program that shows or
// forwards the API's JSON verbatim (leasehold's own CLI does, with -o json),
// or logs it. For a granted Hold, Body is the grant's line. f is called on
// the goroutine of the call, and must be safe for concurrent use if the
// Client is used concurrently; it must not keep Header or Body past its
// return unless it copies them.
func OnAnswer(f func(Answer)) Option { return func(c *Client) { c.onAnswer = f } }

// Answer is one answer of the sidecar, as OnAnswer sees it.
type Answer struct {
	Method     string
	URL        string // the request's URL (password redacted)
	StatusCode int
	Header     http.Header
	Body       []byte // at most MaxBody bytes
}

// New returns a Client of the sidecar whose API is at baseURL: an http://
// or https:// URL with a host, and optionally a path prefix; no query,
// fragment or user information. "" means DefaultURL.
func New(baseURL string, opts ...Option) (*Client, error) {
	if baseURL == "" {
		baseURL = DefaultURL
	}
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.User != nil || u.Opaque != "" {
		return nil, fmt.Errorf("leasehold client: base URL %q: want http://HOST:PORT or https://HOST:PORT, such as %s", baseURL, DefaultURL)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	c := &Client{base: u, timeout: DefaultTimeout}
	for _, o := range opts {
		o(c)
	}
	if c.http == nil {
		// A sidecar in the same pod is never reached through a proxy, and
		// the app's HTTP_PROXY must not say otherwise.
		transport := http.DefaultTransport.(*http.Transport).Clone()
		transport.Proxy = nil
		c.http = &http.Client{Transport: transport}
	}
	return c, nil
}

// Lease returns a Client whose calls are about the Lease name of the
// sidecar's lease group: Status, Leader, Token, Release and Hold use
// /v1/leases/{name}/..., and Poll and Watch follow GET /v1/leases (the
// group has no per-Lease watch). Leases is the group's either way. Lease("")
// returns a Client of the sidecar's single Lease. The Clients share
// connections and options.
func (c *Client) Lease(name string) *Client {
	l := *c
	l.lease = name
	return &l
}

// LeaseName is the Lease that Lease named, "" for the single Lease.
func (c *Client) LeaseName() string { return c.lease }

// CloseIdleConnections closes the connections to the sidecar that are not
// in use (those of WithHTTPClient's client too).
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// path is the API path, escaped, of a request about the single Lease
// (unnamed, such as "/v1/token") or, for a Lease of a group,
// /v1/leases/{lease} plus named (such as "/token").
func (c *Client) path(unnamed, named string) string {
	if c.lease == "" {
		return unnamed
	}
	return "/v1/leases/" + url.PathEscape(c.lease) + named
}

// url is the URL of the escaped path with query q (nil for none).
func (c *Client) url(path string, q url.Values) *url.URL {
	u := *c.base
	u.RawPath = c.base.EscapedPath() + path
	if p, err := url.PathUnescape(u.RawPath); err == nil {
		u.Path = p
	}
	u.RawQuery = q.Encode()
	return &u
}

// answer is one answer, read.
type answer struct {
	method string
	url    *url.URL
	code   int
	header http.Header
	body   []byte
}

// do sends method path?q and reads the answer, within timeout (0: ctx
// alone). An error is a *url.Error: no answer, or a broken one. Any answer,
// whatever its status, is returned to be judged.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, timeout time.Duration) (*answer, error) {
	u := c.url(path, q)
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	req, err := c.newRequest(ctx, method, u)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
	if err != nil {
		return nil, &url.Error{Op: urlOp(method), URL: u.Redacted(), Err: fmt.Errorf("read the answer: %w", err)}
	}
	a := &answer{method: method, url: u, code: resp.StatusCode, header: resp.Header, body: body}
	c.observe(a)
	return a, nil
}

// newRequest builds a request with the client's headers.
func (c *Client) newRequest(ctx context.Context, method string, u *url.URL) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return nil, &url.Error{Op: urlOp(method), URL: u.Redacted(), Err: err}
	}
	req.Header.Set("Accept", "application/json")
	if c.ua != "" {
		req.Header.Set("User-Agent", c.ua)
	}
	return req, nil
}

// observe passes a to OnAnswer's function, if any.
func (c *Client) observe(a *answer) {
	if c.onAnswer != nil {
		c.onAnswer(Answer{Method: a.method, URL: a.url.Redacted(), StatusCode: a.code, Header: a.header, Body: a.body})
	}
}

// urlOp is the Op of a *url.Error for method, as net/http writes it ("Get").
func urlOp(method string) string {
	if method == "" {
		return "Get"
	}
	return method[:1] + strings.ToLower(method[1:])
}

// blockingTimeout bounds a request that may block for wait: the wait, the
// sidecar's jitter (at most wait/16) and RequestSlack.
func blockingTimeout(wait time.Duration) time.Duration { return wait + wait/16 + RequestSlack }

// errUnexpected reports a 200 whose body is not what the API defines.
func errUnexpected(a *answer, what string, err error) error {
	return fmt.Errorf("%s %s: not %s: %w", a.method, a.url.Redacted(), what, err)
}
