package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasehold/leasehold/internal/group"
)

// handingElection is a fakeElection with a membership of members: it
// hands over as group.Election does, refusing non-members.
type handingElection struct {
	*fakeElection
	members []string
	to      chan string
}

func (h handingElection) HandOver(ctx context.Context, stayOut time.Duration, to string) (bool, error) {
	for _, m := range h.members {
		if m == to {
			h.to <- to
			return h.Release(ctx, stayOut)
		}
	}
	return false, fmt.Errorf("successor %q: %w", to, group.ErrUnknownSuccessor)
}

// POST /v1/release?to=: handed to a member; 409 unknown_successor for
// anyone else and 409 handover_unavailable without membership, nothing
// released either way; 400 for an empty to.
func TestReleaseTo(t *testing.T) {
	t.Run("without membership", func(t *testing.T) {
		f := newFixture(t, leading())
		wantError(t, do(f.srv.APIHandler(), http.MethodPost, "/v1/release?to=b"), http.StatusConflict, codeNoHandover)
		if got := f.el.stayOuts(); len(got) != 0 {
			t.Errorf("released %v; want nothing", got)
		}
	})

	handing := func(t *testing.T) (*fixture, handingElection) {
		f := newFixture(t, leading())
		h := handingElection{fakeElection: f.el, members: []string{"b"}, to: make(chan string, 1)}
		f.reg = prometheus.NewRegistry()
		srv, err := New(Options{Election: h, Clock: f.clock, LeaseDuration: leaseDuration, Registry: f.reg})
		if err != nil {
			t.Fatal(err)
		}
		f.srv = srv
		return f, h
	}
	t.Run("to a member", func(t *testing.T) {
		f, h := handing(t)
		rec := do(f.srv.APIHandler(), http.MethodPost, "/v1/release?to=b&for=30s")
		if rec.Code != http.StatusOK || !decode(t, rec)["released"].(bool) {
			t.Fatalf("status %d body %s", rec.Code, rec.Body)
		}
		if got := <-h.to; got != "b" {
			t.Errorf("handed to %q", got)
		}
		if got := f.el.stayOuts(); len(got) != 1 || got[0] != 30*time.Second {
			t.Errorf("stay-outs %v, want [30s]", got)
		}
	})
	t.Run("to a non-member", func(t *testing.T) {
		f, _ := handing(t)
		wantError(t, do(f.srv.APIHandler(), http.MethodPost, "/v1/release?to=zed"), http.StatusConflict, codeUnknownSuccessor)
		if got := f.el.stayOuts(); len(got) != 0 {
			t.Errorf("released %v; want nothing", got)
		}
	})
	t.Run("empty to", func(t *testing.T) {
		f, _ := handing(t)
		wantError(t, do(f.srv.APIHandler(), http.MethodPost, "/v1/release?to="), http.StatusBadRequest, codeBadParameter)
	})
}
