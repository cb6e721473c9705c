package main

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/leasehold/leasehold/internal/config"
)

// The group mode (LEASEHOLD_SHARDS=N with LEASEHOLD_LEASE_NAME, or
// LEASEHOLD_LEASES, read as the sidecar reads them) is the pattern that
// projects needing one leader per shard or per role hand-roll with
// client-go: one LeaderElector per Lease, each in its own goroutine, all
// campaigning for every Lease (greedy: there is no membership and no
// balancing; LEASEHOLD_BALANCE is ignored). Since Run campaigns once, each
// goroutine runs a new LeaderElector whenever the last one lost its
// Lease, until SIGTERM, which cancels every Run, releasing each Lease held
// (ReleaseOnCancel) before the process exits 0.
//
// It answers GET /v1/leases[?index=N&wait=D] with leasehold's body:
// {"index", "members": null, "leases": [status, …]}, the statuses in
// configured order, each {"identity","lease","leader","holder","term",…}
// where leader is the app's view (OnStartedLeading called, its context not
// yet cancelled) and term counts this process's terms of that Lease (a
// stand-in for a token, so that samples of two terms are told apart). The
// index moves whenever one of the Leases' leader changes; a blocking query
// answers when it differs from N.

// groupState is the app's view of every Lease.
type groupState struct {
	identity string
	leases   []*shardState

	mu      sync.Mutex
	index   uint64
	changed chan struct{} // closed and replaced on every change
}

// shardState is one Lease's elector and the app's view of it.
type shardState struct {
	name    string
	mu      sync.Mutex
	elector *leaderelection.LeaderElector // the current one
	leading bool
	terms   int32
}

// groupStatus is one Lease's status in GET /v1/leases.
type groupStatus struct {
	Identity     string `json:"identity"`
	Lease        string `json:"lease"`
	Leader       bool   `json:"leader"`
	Holder       string `json:"holder"`
	Term         int32  `json:"term"`
	FencingToken int64  `json:"fencingToken"`
}

type groupBody struct {
	Index   uint64        `json:"index"`
	Members *int          `json:"members"`
	Leases  []groupStatus `json:"leases"`
}

// start records the start of a term of s and returns its number.
func (g *groupState) start(s *shardState) int32 {
	s.mu.Lock()
	s.terms++
	term := s.terms
	s.leading = true
	s.mu.Unlock()
	g.bump()
	return term
}

// stop records the end of term of s, unless a later term has begun (a
// late callback of a lost elector must not end its successor's term).
func (g *groupState) stop(s *shardState, term int32) {
	s.mu.Lock()
	ended := s.leading && s.terms == term
	if ended {
		s.leading = false
	}
	s.mu.Unlock()
	if ended {
		g.bump()
	}
}

// bump moves the index and wakes the blocking queries.
func (g *groupState) bump() {
	g.mu.Lock()
	g.index++
	close(g.changed)
	g.changed = make(chan struct{})
	g.mu.Unlock()
}

// body is every Lease's status now, and the channel closed on the next
// change.
func (g *groupState) body() (groupBody, <-chan struct{}) {
	g.mu.Lock()
	b := groupBody{Index: g.index, Leases: make([]groupStatus, 0, len(g.leases))}
	changed := g.changed
	g.mu.Unlock()
	for _, s := range g.leases {
		s.mu.Lock()
		st := groupStatus{Identity: g.identity, Lease: s.name, Leader: s.leading, Term: s.terms}
		el := s.elector
		s.mu.Unlock()
		if el != nil {
			st.Holder = el.GetLeader()
		}
		b.Leases = append(b.Leases, st)
	}
	return b, changed
}

// handleLeases serves GET /v1/leases[?index=N&wait=D].
func (g *groupState) handleLeases(w http.ResponseWriter, r *http.Request) {
	b, changed := g.body()
	if index, err := strconv.ParseUint(r.URL.Query().Get("index"), 10, 64); err == nil && index == b.Index {
		wait := 5 * time.Minute
		if d, err := time.ParseDuration(r.URL.Query().Get("wait")); err == nil {
			wait = d
		}
		timer := time.NewTimer(wait)
		defer timer.Stop()
		select {
		case <-changed:
		case <-timer.C:
		case <-r.Context().Done():
			return
		}
		b, _ = g.body()
	}
	writeJSON(w, http.StatusOK, b)
}

// runGroup campaigns for every Lease of cfg until ctx ends, then returns
// once every elector has released what it held.
func runGroup(ctx context.Context, cfg config.Config, clientset kubernetes.Interface, g *groupState) error {
	var wg sync.WaitGroup
	for _, s := range g.leases {
		wg.Go(func() {
			for ctx.Err() == nil {
				var mine atomic.Int32 // this elector's term, 0 before it leads
				el, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
					Lock: &resourcelock.LeaseLock{
						LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.LeaseNamespace, Name: s.name},
						Client:     clientset.CoordinationV1(),
						LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
					},
					LeaseDuration:   cfg.LeaseDuration,
					RenewDeadline:   cfg.RenewDeadline,
					RetryPeriod:     cfg.RetryPeriod,
					ReleaseOnCancel: true,
					Name:            s.name,
					Callbacks: leaderelection.LeaderCallbacks{
						OnStartedLeading: func(ctx context.Context) {
							term := g.start(s)
							mine.Store(term)
							<-ctx.Done()
							g.stop(s, term)
						},
						OnStoppedLeading: func() {
							if term := mine.Load(); term != 0 {
								g.stop(s, term)
							}
						},
					},
				})
				if err != nil {
					panic(err) // the configuration was checked by config.Load
				}
				s.mu.Lock()
				s.elector = el
				s.mu.Unlock()
				el.Run(ctx) // returns when this term is lost or ctx ends (releasing)
			}
		})
	}
	wg.Wait()
	return nil
}

func newGroupState(cfg config.Config) *groupState {
	g := &groupState{identity: cfg.Identity, changed: make(chan struct{})}
	for _, name := range cfg.Leases {
		g.leases = append(g.leases, &shardState{name: name})
	}
	return g
}
