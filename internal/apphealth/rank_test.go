package apphealth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testing/poll"
)

func TestParseRank(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		err    error
		want   Rank
		fails  string
	}{
		{"valid", 200, `{"generation":"h-7","position":42}`, nil, Rank{Known: true, Generation: "h-7", Position: 42}, ""},
		{"extra fields are ignored", 204, `{"generation":"","position":0,"lag":3}`, nil, Rank{Known: true}, ""},
		{"the largest int64", 200, `{"generation":"g","position":9223372036854775807}`, nil, Rank{Known: true, Generation: "g", Position: 1<<63 - 1}, ""},
		{"transport error", 0, "", errors.New("connection refused"), Rank{}, "connection refused"},
		{"not 2xx", 503, `{"generation":"g","position":1}`, nil, Rank{}, "status 503"},
		{"not JSON", 200, `ok`, nil, Rank{}, "is not"},
		{"no position", 200, `{"generation":"g"}`, nil, Rank{}, "lacks"},
		{"no generation", 200, `{"position":1}`, nil, Rank{}, "lacks"},
		{"a fractional position", 200, `{"generation":"g","position":1.5}`, nil, Rank{}, "not an int64"},
		{"past int64", 200, `{"generation":"g","position":9223372036854775808}`, nil, Rank{}, "not an int64"},
		{"a numeric generation", 200, `{"generation":7,"position":1}`, nil, Rank{}, "is not"},
		{"too long", 200, `{"generation":"` + strings.Repeat("x", maxBody) + `","position":1}`, nil, Rank{}, "longer"},
	}
	for _, c := range cases {
		got, err := ParseRank(c.status, []byte(c.body), c.err)
		if got != c.want {
			t.Errorf("%s: rank %+v; want %+v", c.name, got, c.want)
		}
		if (c.fails == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.fails)) {
			t.Errorf("%s: err %v; want one containing %q", c.name, err, c.fails)
		}
	}
}

// The prober reports every probe's rank to OnRank: known while the app
// answers, unknown at the first probe that fails.
func TestRankProberReportsEveryProbe(t *testing.T) {
	var position, down atomic.Int64
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() != 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(fmt.Sprintf(`{"generation":"h1","position":%d}`, position.Load())))
	}))
	defer app.Close()
	got := make(chan Rank, 100)
	p, err := NewRank(RankConfig{URL: app.URL, Timeout: 20 * time.Millisecond, Interval: 20 * time.Millisecond,
		OnRank: func(_ context.Context, r Rank) { got <- r }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	wait := func(want func(Rank) bool, what string) {
		t.Helper()
		poll.Until(t, generous, 5*time.Millisecond, what, func() bool {
			for {
				select {
				case r := <-got:
					if want(r) {
						return true
					}
				default:
					return false
				}
			}
		})
	}
	wait(func(r Rank) bool { return r.Known && r.Generation == "h1" && r.Position == 0 }, "the first rank")
	position.Store(5)
	wait(func(r Rank) bool { return r.Known && r.Position == 5 }, "the new position")
	down.Store(1)
	wait(func(r Rank) bool { return !r.Known && r.LastError == "status 503" }, "an unknown rank")
	if r := p.Rank(); r.Known || r.ObservedAt.IsZero() {
		t.Errorf("Rank() = %+v; want unknown, dated", r)
	}
	if _, err := NewRank(RankConfig{URL: "ftp://x", Timeout: time.Second, Interval: time.Second}); err == nil {
		t.Error("an ftp URL was accepted")
	}
}
