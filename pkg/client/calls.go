package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/leasehold/leasehold/pkg/api"
)

// DefaultWait is how long Watch and WaitLeader ask the sidecar to block per
// request (the API allows at most 10m).
const DefaultWait = 5 * time.Minute

// DefaultStayOut, given to Release, lets the sidecar choose how long to stay
// out of the election: its lease duration.
const DefaultStayOut time.Duration = -1

// Status asks GET /v1/status (for a Lease of a group, GET
// /v1/leases/{lease}): this instance's view of the Lease now. A status
// that says leader is true only at the moment the sidecar answered: before
// a write, ask Token.
func (c *Client) Status(ctx context.Context) (api.Status, error) {
	a, err := c.do(ctx, http.MethodGet, c.path("/v1/status", ""), nil, c.timeout)
	if err != nil {
		return api.Status{}, err
	}
	if a.code != http.StatusOK {
		return api.Status{}, errorOf(a)
	}
	return decode[api.Status](a, "a status")
}

// Leader asks GET /v1/leader?wait=wait once (for a Lease of a group, GET
// /v1/leases/{lease}/leader): with wait > 0 the sidecar blocks until this
// instance leads, at most wait (≤ 10m); with 0 it answers at once. It
// returns the status whether or not this instance leads (st.Leader says);
// an error only for an answer that is no status (such as 503 shutting_down)
// or no answer. WaitLeader loops on it.
func (c *Client) Leader(ctx context.Context, wait time.Duration) (api.Status, error) {
	var q url.Values
	timeout := c.timeout
	if wait > 0 {
		q = url.Values{"wait": {wait.String()}}
		timeout = blockingTimeout(wait)
	}
	a, err := c.do(ctx, http.MethodGet, c.path("/v1/leader", "/leader"), q, timeout)
	if err != nil {
		return api.Status{}, err
	}
	// 503 with a status (not an error body) is "not leading, the wait ran out".
	if a.code != http.StatusOK && (a.code != http.StatusServiceUnavailable || isErrorBody(a.body)) {
		return api.Status{}, errorOf(a)
	}
	return decode[api.Status](a, "a status")
}

// Token asks GET /v1/token (for a Lease of a group, GET
// /v1/leases/{lease}/token): this instance's fencing token and the validity
// left, if it is the valid leader now. When it is not, the error is an
// *Error that matches ErrNotLeader (any 503 is an *Error with StatusCode
// 503). Ask before each write, and give the write the token.
func (c *Client) Token(ctx context.Context) (api.Token, error) {
	a, err := c.do(ctx, http.MethodGet, c.path("/v1/token", "/token"), nil, c.timeout)
	if err != nil {
		return api.Token{}, err
	}
	if a.code != http.StatusOK {
		return api.Token{}, errorOf(a)
	}
	var t api.Token
	if json.Unmarshal(a.body, &t) != nil || t.FencingToken == 0 {
		return api.Token{}, errUnexpected(a, "a token", errors.New(excerpt(a.body)))
	}
	return t, nil
}

// Release asks POST /v1/release?for=stayOut (for a Lease of a group, POST
// /v1/leases/{lease}/release): if this instance leads, it stops claiming
// leadership at once and releases the Lease, after the holds on the term
// have ended (at most when its validity ends); leading or not, it then
// stays out of the election for stayOut (≤ 1h; DefaultStayOut, or any
// negative value, lets the sidecar choose its lease duration). Idempotent.
// The answer says whether a release was written, and the state after it.
func (c *Client) Release(ctx context.Context, stayOut time.Duration) (api.Release, error) {
	return c.ReleaseTo(ctx, stayOut, "")
}

// ReleaseTo is Release, handing the Lease to the member with identity to
// (POST /v1/release?to=): it takes the Lease within a round trip while the
// other candidates leave it alone for the renew deadline. When to is not a
// live member other than this instance the sidecar releases nothing and
// answers 409 (an *Error with code api.CodeUnknownSuccessor, or
// api.CodeHandoverUnavailable when it has no membership). An empty to is
// Release.
func (c *Client) ReleaseTo(ctx context.Context, stayOut time.Duration, to string) (api.Release, error) {
	q := url.Values{}
	if stayOut >= 0 {
		q.Set("for", stayOut.String())
	}
	if to != "" {
		q.Set("to", to)
	}
	a, err := c.do(ctx, http.MethodPost, c.path("/v1/release", "/release"), q, c.timeout)
	if err != nil {
		return api.Release{}, err
	}
	if a.code != http.StatusOK {
		return api.Release{}, errorOf(a)
	}
	return decode[api.Release](a, "a release answer")
}

// Leases asks GET /v1/leases: every Lease's status, in configured order
// (with a single Lease, that one). It is the group's on a Client that Lease
// returned too.
func (c *Client) Leases(ctx context.Context) (api.Leases, error) {
	return c.pollLeases(ctx, 0, 0)
}

// pollLeases asks GET /v1/leases, blocking while the group's index is
// index (0: none) for at most wait (0: not at all).
func (c *Client) pollLeases(ctx context.Context, index uint64, wait time.Duration) (api.Leases, error) {
	a, err := c.do(ctx, http.MethodGet, "/v1/leases", pollQuery(index, wait), c.pollTimeout(index, wait))
	if err != nil {
		return api.Leases{}, err
	}
	if a.code != http.StatusOK {
		return api.Leases{}, errorOf(a)
	}
	return decode[api.Leases](a, "a list of Leases")
}

// Poll is one blocking query, the step of Watch: GET
// /v1/watch?index=index&wait=wait answers at once if the state's index is
// not index (or index is 0), else when it changes or wait (plus up to
// wait/16 of jitter) has passed; a return does not promise a change. It
// returns the status and next, the index to give the next Poll.
//
// For a Lease of a group it asks GET /v1/leases with the group's index (the
// group has no per-Lease watch) and returns that Lease's status, whose Index
// is the Lease's own, and next, the group's index: a Poll returns when any
// Lease of the group, or the member count, changes. A group that lacks the
// Lease is an error that matches ErrUnknownLease.
func (c *Client) Poll(ctx context.Context, index uint64, wait time.Duration) (st api.Status, next uint64, err error) {
	if c.lease != "" {
		all, err := c.pollLeases(ctx, index, wait)
		if err != nil {
			return api.Status{}, 0, err
		}
		for _, st := range all.Leases {
			if st.Lease == c.lease {
				return st, all.Index, nil
			}
		}
		return api.Status{}, 0, fmt.Errorf("GET %s: the sidecar serves no Lease named %q: %w",
			c.url("/v1/leases", nil).Redacted(), c.lease, ErrUnknownLease)
	}
	a, err := c.do(ctx, http.MethodGet, "/v1/watch", pollQuery(index, wait), c.pollTimeout(index, wait))
	if err != nil {
		return api.Status{}, 0, err
	}
	if a.code != http.StatusOK {
		return api.Status{}, 0, errorOf(a)
	}
	st, err = decode[api.Status](a, "a status")
	return st, st.Index, err
}

// pollQuery is the query of a blocking query: wait when > 0 (the sidecar's
// default, 5m, otherwise), index when not 0.
func pollQuery(index uint64, wait time.Duration) url.Values {
	q := url.Values{}
	if wait > 0 {
		q.Set("wait", wait.String())
	}
	if index != 0 {
		q.Set("index", strconv.FormatUint(index, 10))
	}
	return q
}

// pollTimeout bounds a blocking query: by its wait (the sidecar's default
// wait when 0 and it has an index), or, without a wait or an index (it does
// not block), by the client's timeout.
func (c *Client) pollTimeout(index uint64, wait time.Duration) time.Duration {
	switch {
	case wait > 0:
		return blockingTimeout(wait)
	case index != 0:
		return blockingTimeout(DefaultWait)
	default:
		return c.timeout
	}
}

// decode decodes a 200's body as a T.
func decode[T any](a *answer, what string) (T, error) {
	var v T
	if err := json.Unmarshal(a.body, &v); err != nil {
		return v, errUnexpected(a, what, err)
	}
	return v, nil
}
