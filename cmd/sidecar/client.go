package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// defaultAddr is where the client subcommands find the sidecar when neither
// --addr nor LEASEHOLD_API_ADDR says otherwise: the sidecar's default
// LEASEHOLD_API_ADDR.
const defaultAddr = "127.0.0.1:4040"

// maxAnswer bounds the body read from the sidecar.
const maxAnswer = 1 << 20

// sidecarClient asks the local sidecar's HTTP API. It never goes through a
// proxy: the sidecar is in the same pod, and an HTTP_PROXY set for the app
// must not say otherwise.
type sidecarClient struct {
	base *url.URL // http://host:port, no path
	http *http.Client
}

func newSidecarClient(base *url.URL) *sidecarClient {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.Proxy = nil
	return &sidecarClient{base: base, http: &http.Client{Transport: transport}}
}

// answer is one answer of the sidecar: its status code, headers and body
// (at most maxAnswer bytes).
type answer struct {
	code   int
	header http.Header
	body   []byte
}

// apiError is an error body of the API: {"error": "...", "code": "..."}
// (code is absent from sidecars that do not send it).
type apiError struct {
	Error string `json:"error"`
	Code  string `json:"code,omitempty"`
}

// errorMessage returns the message of an error body, or "" when body is
// not one (a status body, or not JSON).
func errorMessage(body []byte) string {
	var e apiError
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	return e.Error
}

// unreachableError is a request that got no answer: the sidecar is not
// listening on that address, or did not answer in time.
type unreachableError struct {
	url string
	err error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("no answer from the sidecar at %s: %v", e.url, e.err)
}

func (e *unreachableError) Unwrap() error { return e.err }

// refusedError is an answer the command cannot use: a status code it does
// not expect, with the body's error message (or the body itself) for the
// user.
type refusedError struct {
	method, url string
	code        int
	message     string
	retryAfter  string // the Retry-After header, "" when absent
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("%s %s: the sidecar answered %d %s: %s", e.method, e.url, e.code, http.StatusText(e.code), e.message)
}

// refused describes an answer to method path that the command does not
// expect.
func (c *sidecarClient) refused(method, path string, a answer) *refusedError {
	msg := errorMessage(a.body)
	if msg == "" {
		msg = strings.TrimSpace(string(a.body))
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		if msg == "" {
			msg = "(no body)"
		}
	}
	return &refusedError{method: method, url: c.url(path, nil), code: a.code, message: msg, retryAfter: a.header.Get("Retry-After")}
}

// url is the address of path with query q (nil for none).
func (c *sidecarClient) url(path string, q url.Values) string {
	u := *c.base
	u.Path = path
	if q != nil {
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// do sends method path?q and reads the answer, giving up after timeout. An
// error is an *unreachableError: any answer, whatever its status, is
// returned for the command to judge.
func (c *sidecarClient) do(ctx context.Context, method, path string, q url.Values, timeout time.Duration) (answer, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	u := c.url(path, q)
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return answer{}, &unreachableError{url: u, err: err}
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "leasehold-cli/"+currentVersion().Version)
	resp, err := c.http.Do(req)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err // the URL is in unreachableError already
		}
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within %v", timeout)
		}
		return answer{}, &unreachableError{url: u, err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return answer{}, &unreachableError{url: u, err: fmt.Errorf("read the answer: %w", err)}
	}
	return answer{code: resp.StatusCode, header: resp.Header, body: body}, nil
}

// close releases the client's idle connections.
func (c *sidecarClient) close() { c.http.CloseIdleConnections() }

// sidecarURL turns --addr (or LEASEHOLD_API_ADDR) into the API's base URL.
// It accepts HOST:PORT or http://HOST:PORT. An unspecified host (":4040",
// "0.0.0.0:4040", "[::]:4040": a listen address) means this host's loopback
// address of the same family.
func sidecarURL(addr string) (*url.URL, error) {
	hostport := addr
	if strings.Contains(addr, "://") {
		u, err := url.Parse(addr)
		if err != nil || u.Scheme != "http" || u.Host == "" || (u.Path != "" && u.Path != "/") ||
			u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return nil, fmt.Errorf("%q: want HOST:PORT or http://HOST:PORT, such as %s", addr, defaultAddr)
		}
		hostport = u.Host
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, fmt.Errorf("%q: want HOST:PORT or http://HOST:PORT, such as %s", addr, defaultAddr)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return nil, fmt.Errorf("%q: port %q must be a number from 1 to 65535", addr, port)
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.Is6() {
			host = "::1"
		}
	} else if host == "" {
		host = "127.0.0.1"
	}
	return &url.URL{Scheme: "http", Host: net.JoinHostPort(host, port)}, nil
}
