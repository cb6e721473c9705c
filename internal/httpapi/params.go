package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/leasehold/leasehold/internal/fence"
)

// params are a request's query parameters. Every parse error is the
// client's: handlers answer it with 400.
type params struct {
	values url.Values
}

// queryOf parses r's query string, rejecting malformed escapes that
// url.URL.Query would silently drop.
func queryOf(r *http.Request) (params, error) {
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return params{}, fmt.Errorf("malformed query string: %v", err)
	}
	return params{values: v}, nil
}

// duration reads parameter name as a Go duration (time.ParseDuration, e.g.
// "30s", "5m"): def when absent; an error when empty, malformed, negative or
// above limit.
func (p params) duration(name string, def, limit time.Duration) (time.Duration, error) {
	if !p.values.Has(name) {
		return def, nil
	}
	raw := p.values.Get(name)
	d, err := time.ParseDuration(raw)
	switch {
	case err != nil:
		return 0, fmt.Errorf("invalid %s %q: want a duration such as 30s or 5m", name, raw)
	case d < 0:
		return 0, fmt.Errorf("invalid %s %q: must not be negative", name, raw)
	case d > limit:
		return 0, fmt.Errorf("invalid %s %q: at most %s", name, raw, limit)
	}
	return d, nil
}

// index reads parameter name as an Index (a non-negative integer); ok is
// false when it is absent.
func (p params) index(name string) (idx uint64, ok bool, err error) {
	if !p.values.Has(name) {
		return 0, false, nil
	}
	raw := p.values.Get(name)
	idx, err = strconv.ParseUint(raw, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("invalid %s %q: want a non-negative integer", name, raw)
	}
	return idx, true, nil
}

// token reads parameter name as a fencing token: a positive integer;
// required.
func (p params) token(name string) (fence.Token, error) {
	if !p.values.Has(name) {
		return 0, fmt.Errorf("missing %s: want a fencing token, a positive integer", name)
	}
	raw := p.values.Get(name)
	n, err := strconv.ParseUint(raw, 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("invalid %s %q: want a fencing token, a positive integer", name, raw)
	}
	return fence.Token(n), nil
}

// identity reads parameter name as a holder identity: "" when absent; an
// error when present but empty.
func (p params) identity(name string) (string, error) {
	if !p.values.Has(name) {
		return "", nil
	}
	if v := p.values.Get(name); v != "" {
		return v, nil
	}
	return "", fmt.Errorf("empty %s: want a member's identity, or leave %s out", name, name)
}
