package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/leasehold/leasehold/pkg/client"
)

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

// call runs f, a request of the client, with ctx bounded by timeout, and
// returns its error as noAnswer describes it.
func call(ctx context.Context, timeout time.Duration, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return noAnswer(f(ctx), timeout)
}

// noAnswer is err with a request that got no answer (a *url.Error) as an
// *unreachableError ("no answer within timeout" when its deadline passed;
// timeout 0: "no answer in time"); any other error as it is (a
// *client.Error for an answer the command does not expect).
func noAnswer(err error, timeout time.Duration) error {
	ue, ok := errors.AsType[*url.Error](err)
	if !ok {
		return err
	}
	err = ue.Err // the URL is in unreachableError already
	switch {
	case errors.Is(err, context.DeadlineExceeded) && timeout > 0:
		err = fmt.Errorf("no answer within %v", timeout)
	case errors.Is(err, context.DeadlineExceeded):
		err = errors.New("no answer in time")
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
