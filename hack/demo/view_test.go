package main

import (
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/fence"
	"github.com/leasehold/leasehold/internal/httpapi"
)

func TestSecondsRoundsDown(t *testing.T) {
	for d, want := range map[time.Duration]string{
		3999 * time.Millisecond:  "3.9s",
		4 * time.Second:          "4.0s",
		99 * time.Millisecond:    "0.0s",
		12345 * time.Millisecond: "12.3s",
	} {
		if got := seconds(d); got != want {
			t.Errorf("seconds(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestRowOf(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	lead := rowOf("alpha", httpapi.Status{Identity: "alpha_x", Leader: true, Holder: "alpha_x", FencingToken: 7, Term: 2, ValidForMs: 3250}, 6*time.Second, now)
	if lead.role != leader || lead.validFor != 3250*time.Millisecond || lead.token != 7 || lead.term != 2 {
		t.Errorf("leader row: %+v", lead)
	}
	follow := rowOf("bravo", httpapi.Status{Identity: "bravo_y", Holder: "alpha_x", FencingToken: 7,
		ObservedAt: now.Add(-2 * time.Second).Format(time.RFC3339Nano)}, 6*time.Second, now)
	if follow.role != follower || !follow.hasFree || follow.freeIn != 4*time.Second {
		t.Errorf("follower row: %+v", follow)
	}
	expired := rowOf("bravo", httpapi.Status{Identity: "bravo_y", Holder: "alpha_x",
		ObservedAt: now.Add(-9 * time.Second).Format(time.RFC3339Nano)}, 6*time.Second, now)
	if !expired.hasFree || expired.freeIn != 0 || !strings.HasSuffix(expired.String(), "now") {
		t.Errorf("expired row: %+v %q", expired, expired.String())
	}
	released := rowOf("bravo", httpapi.Status{Identity: "bravo_y"}, 6*time.Second, now)
	if !released.hasFree || released.freeIn != 0 {
		t.Errorf("released row: %+v", released)
	}
}

// Every row lines up with the header.
func TestRowsAlignWithHeader(t *testing.T) {
	rows := []row{
		{name: "charlie", identity: "charlie_abcdefgh", role: leader, token: 1234567, term: 12, validFor: 3900 * time.Millisecond},
		{name: "alpha", identity: "alpha_abcdefgh", role: follower, token: 5, hasFree: true, freeIn: 5 * time.Second},
		{name: "bravo", identity: "bravo_abcdefgh", role: down},
	}
	col := strings.Index(tableHeader, "LEASE FREE IN")
	for _, r := range rows {
		s := r.String()
		if len(s) < col || s[col-2:col] != "  " || s[col] == ' ' {
			t.Errorf("row %q does not align with header %q", s, tableHeader)
		}
	}
}

func TestWrapAndTruncate(t *testing.T) {
	got := wrap("one two three four", 9)
	if want := []string{"one two", "three", "four"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("wrap = %q, want %q", got, want)
	}
	if got := truncate("→→→→", 2); got != "→→" {
		t.Errorf("truncate = %q", got)
	}
}

func TestJoinNamesAndTokens(t *testing.T) {
	if got := joinNames("a", "b", "c"); got != "a, b and c" {
		t.Errorf("joinNames = %q", got)
	}
	if !increasing([]fence.Token{1, 2, 3}) || increasing([]fence.Token{1, 1}) {
		t.Error("increasing is wrong")
	}
}
