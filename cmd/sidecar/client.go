package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/pkg/client"
)

// defaultAddr is where the client subcommands find the sidecar when neither
// --addr nor LEASEHOLD_API_ADDR says otherwise: the sidecar's default
// LEASEHOLD_API_ADDR.
const defaultAddr = "127.0.0.1:4040"

// sidecarClient asks the local sidecar's HTTP API through pkg/client
// (which never goes through a proxy: the sidecar is in the same pod, and an
// HTTP_PROXY set for the app must not say otherwise). It keeps the body of
// the last answer, which -o json prints verbatim: fields this client does
// not know (a newer sidecar's) are kept.
type sidecarClient struct {
	*client.Client
	last []byte // the body of the last answer
}

// newSidecarClient is the client of the sidecar at base, about lease (""
// for its one Lease). Each command bounds its requests itself (call).
func newSidecarClient(base *url.URL, lease string) (*sidecarClient, error) {
	sc := &sidecarClient{}
	c, err := client.New(base.String(),
		client.WithTimeout(0),
		client.WithUserAgent("leasehold-cli/"+currentVersion().Version),
		client.OnAnswer(func(a client.Answer) { sc.last = a.Body }))
	if err != nil {
		return nil, err
	}
	sc.Client = c.Lease(lease)
	return sc, nil
}

// close releases the client's idle connections.
func (c *sidecarClient) close() { c.CloseIdleConnections() }

// call runs f, a request of the client, with ctx bounded by timeout. A
// request that got no answer (a *url.Error) is returned as an
// *unreachableError; any other error as f returned it (a *client.Error for
// an answer the command does not expect).
func call(ctx context.Context, timeout time.Duration, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := f(ctx)
	ue, ok := errors.AsType[*url.Error](err)
	if !ok {
		return err
	}
	err = ue.Err // the URL is in unreachableError already
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("no answer within %v", timeout)
	}
	return &unreachableError{url: ue.URL, err: err}
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
