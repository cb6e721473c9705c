package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/pkg/api"
)

// Error is an answer of the sidecar other than the one the call expects:
// an error answer of the API ({"error": ..., "code": ...}), or any other
// status (a proxy's page, a sidecar older than this client).
type Error struct {
	Method string
	// URL is the request's URL without its query (the message says what
	// was wrong with a parameter), password redacted.
	URL        string
	StatusCode int
	// Code is the API's error code; "" when the body is not an error body
	// with a code (a sidecar older than codes sends none). Treat a code this
	// package does not know as its StatusCode.
	Code api.ErrorCode
	// Message is the error body's message, for people; "" when the body is
	// not an error body.
	Message string
	// Header is the answer's headers (Retry-After, X-Leasehold-Index).
	Header http.Header
	// Body is the answer's body, as read.
	Body []byte
}

// Error is "METHOD URL: the sidecar answered STATUS: message", with the
// start of the body when it is not an error body.
func (e *Error) Error() string {
	return fmt.Sprintf("%s %s: the sidecar answered %d %s: %s", e.Method, e.URL, e.StatusCode, http.StatusText(e.StatusCode), e.describe())
}

// describe is the message, else the start of the body.
func (e *Error) describe() string {
	if e.Message != "" {
		return e.Message
	}
	return excerpt(e.Body)
}

// excerpt is the start of body, for a message: at most 200 bytes, "(no
// body)" when empty.
func excerpt(body []byte) string {
	msg := strings.TrimSpace(string(body))
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	if msg == "" {
		return "(no body)"
	}
	return msg
}

// Is reports whether target is the sentinel of e's code (ErrNotLeader,
// ErrConflict, ErrShuttingDown, ErrLeaseGroup, ErrUnknownLease).
func (e *Error) Is(target error) bool {
	c, ok := target.(codeError)
	return ok && e.Code != "" && api.ErrorCode(c) == e.Code
}

// RetryAfter is the delay the answer's Retry-After header asks for, in
// either of its forms: delta-seconds, or an HTTP date judged by now (0 when
// it has passed). ok is false when the header is absent or malformed. Every
// 503 of the API carries one.
func (e *Error) RetryAfter(now time.Time) (d time.Duration, ok bool) {
	return ParseRetryAfter(e.Header.Get("Retry-After"), now)
}

// ParseRetryAfter reads a Retry-After value: delta-seconds (a non-negative
// integer; one too large for a time.Duration is the largest one), or an
// HTTP date judged by now (0 when it has passed). ok is false when value is
// neither.
func ParseRetryAfter(value string, now time.Time) (d time.Duration, ok bool) {
	if secs, err := strconv.ParseUint(value, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		if secs > uint64(math.MaxInt64/int64(time.Second)) {
			return math.MaxInt64, true
		}
		return time.Duration(secs) * time.Second, true
	}
	if at, err := http.ParseTime(value); err == nil {
		return max(at.Sub(now), 0), true
	}
	return 0, false
}

// codeError is the sentinel of an error code.
type codeError api.ErrorCode

func (c codeError) Error() string { return "leasehold: " + string(c) }

// Sentinels of the API's error codes, for errors.Is: an *Error matches the
// one of its Code.
var (
	// ErrNotLeader: GET /v1/token while this instance is not the valid
	// leader. Stop writing.
	ErrNotLeader error = codeError(api.CodeNotLeader)
	// ErrConflict: a hold refused, because this instance does not lead with
	// that token or the term is being released. Do not start what the hold
	// was to protect.
	ErrConflict error = codeError(api.CodeConflict)
	// ErrShuttingDown: the sidecar is shutting down. Ask again after
	// Retry-After.
	ErrShuttingDown error = codeError(api.CodeShuttingDown)
	// ErrLeaseGroup: the sidecar serves a lease group, and the call names no
	// Lease: use Lease(name).
	ErrLeaseGroup error = codeError(api.CodeLeaseGroup)
	// ErrUnknownLease: the sidecar serves no Lease of the name Lease was
	// given. Also wrapped by Poll and Watch when GET /v1/leases lacks it.
	ErrUnknownLease error = codeError(api.CodeUnknownLease)
)

// errorOf describes an answer other than the one expected.
func errorOf(a *answer) *Error {
	u := *a.url
	u.RawQuery = ""
	e := &Error{Method: a.method, URL: u.Redacted(), StatusCode: a.code, Header: a.header, Body: a.body}
	var body api.Error
	if json.Unmarshal(a.body, &body) == nil {
		e.Message, e.Code = body.Message, body.Code
	}
	return e
}

// isErrorBody reports whether body is an error body of the API (it has a
// message), as opposed to a status.
func isErrorBody(body []byte) bool {
	var e api.Error
	return json.Unmarshal(body, &e) == nil && e.Message != ""
}

// permanent reports whether asking again cannot change the outcome of err:
// an answer 4xx (a bad parameter, a wrong Lease name, a lease group), or a
// Lease the group lacks.
func permanent(err error) bool {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.StatusCode >= 400 && e.StatusCode < 500
	}
	return errors.Is(err, ErrUnknownLease)
}
