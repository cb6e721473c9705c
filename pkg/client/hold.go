package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/leasehold/leasehold/pkg/api"
)

// maxGrant bounds the grant's one line of JSON.
const maxGrant = 64 << 10

// Hold is a hold on one term, granted by POST /v1/hold: an open answer.
// While it is open, every voluntary release of that term (POST
// /v1/release, a health step-down, the sidecar's shutdown) ends the term at
// once (leader: false) but writes the release only once the hold has ended,
// and at the latest when the term's validity ends. So another instance
// cannot take the Lease over by a release while the work the hold protects
// still runs. A process that dies gives its hold up (its connection
// closes); one that is paused keeps it.
type Hold struct {
	token  api.FencingToken
	status api.Status
	cancel context.CancelFunc
	done   chan struct{} // closed once the connection is closed and its reader has ended
	err    error         // why the hold ended, if not by Close; set before done is closed
}

// Hold asks POST /v1/hold?token=token (for a Lease of a group, POST
// /v1/leases/{lease}/hold): hold the term with that fencing token. It
// returns once the hold is granted (200, and the grant's line of JSON with
// held: true) or refused. ctx and the client's timeout bound the request
// until the grant only; the hold then lasts until Close, or until the
// sidecar ends it (see Done). Errors: a refusal is an *Error; one that
// matches ErrConflict means this instance does not lead with that token or
// the term is being released, so do not start what the hold was to protect;
// a sidecar older than holds answers 404.
func (c *Client) Hold(ctx context.Context, token api.FencingToken) (*Hold, error) {
	u := c.url(c.path("/v1/hold", "/hold"), url.Values{"token": {token.String()}})
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)   // ctx cancels the request until the grant
	stopTimer := func() bool { return true } // reports false if the timeout has fired
	if c.timeout > 0 {
		stopTimer = time.AfterFunc(c.timeout, cancel).Stop
	}
	granted := false
	defer func() {
		stop()
		stopTimer()
		if !granted {
			cancel()
		}
	}()
	req, err := c.newRequest(hctx, http.MethodPost, u)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
		if err != nil {
			return nil, &url.Error{Op: "Post", URL: u.Redacted(), Err: fmt.Errorf("read the answer: %w", err)}
		}
		a := &answer{method: http.MethodPost, url: u, code: resp.StatusCode, header: resp.Header, body: body}
		c.observe(a)
		return nil, errorOf(a)
	}
	br := bufio.NewReaderSize(resp.Body, maxGrant)
	line, err := br.ReadSlice('\n')
	var grant api.Held
	if err == nil {
		c.observe(&answer{method: http.MethodPost, url: u, code: resp.StatusCode, header: resp.Header, body: line})
		err = json.Unmarshal(line, &grant)
	}
	if err == nil && !grant.Held {
		err = errors.New(`the answer lacks "held": true`)
	}
	if err != nil || !stop() || !stopTimer() {
		resp.Body.Close()
		if err == nil {
			err = context.Cause(hctx)
		}
		return nil, &url.Error{Op: "Post", URL: u.Redacted(), Err: fmt.Errorf("read the grant: %w", err)}
	}
	granted = true
	h := &Hold{token: token, status: grant.Status, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		defer resp.Body.Close()
		_, err := io.Copy(io.Discard, br)
		if hctx.Err() == nil { // not Close: the sidecar ended it, or the connection broke
			if err == nil {
				err = io.EOF
			}
			h.err = err
		}
	}()
	return h, nil
}

// Token is the fencing token of the held term.
func (h *Hold) Token() api.FencingToken { return h.token }

// Status is the state when the hold was granted.
func (h *Hold) Status() api.Status { return h.status }

// Done is closed once the hold has ended: by Close, or by the sidecar (it
// ends every hold once it is shutting down and its election has stopped,
// when there is nothing left to hold), or because the connection broke.
// A hold that ends before its work does protects nothing more: the term's
// validity still bounds the work.
func (h *Hold) Done() <-chan struct{} { return h.done }

// Err is, once Done is closed, why the hold ended if Close did not end it:
// io.EOF when the sidecar ended the answer, else the connection's error.
// It is nil while the hold is open, and when Close ended it.
func (h *Hold) Err() error {
	select {
	case <-h.done:
		return h.err
	default:
		return nil
	}
}

// Close ends the hold: it closes the connection, which tells the sidecar,
// and waits until the hold's reader has ended. It is idempotent, and a
// no-op on a nil *Hold.
func (h *Hold) Close() error {
	if h == nil {
		return nil
	}
	h.cancel()
	<-h.done
	return nil
}
