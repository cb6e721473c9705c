package rank

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/group/member"
	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
	"github.com/leasehold/leasehold/internal/testing/poll"
)

// Timings of every sidecar here (the e2e suite's): the deferral step is
// leaseDuration/15 = 200ms, its bound 600ms.
const (
	leaseDuration = 3 * time.Second
	renewDeadline = 2 * time.Second
	retryPeriod   = 500 * time.Millisecond
	probeInterval = 200 * time.Millisecond
	failovers     = 20
)

// app is a stand-in for one replica's rank endpoint: it answers its rank,
// or 503 while down.
type app struct {
	mu         sync.Mutex
	generation string
	position   int64
	down       bool
	srv        *httptest.Server
}

func newApp(t *testing.T) *app {
	a := &app{}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.down {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, `{"generation":%q,"position":%d}`, a.generation, a.position)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *app) set(gen string, pos int64, down bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.generation, a.position, a.down = gen, pos, down
}

// replica is one sidecar with its app.
type replica struct {
	*fleet.Instance
	app      *app
	identity string
}

type fixture struct {
	t      *testing.T
	cfg    fleet.Config
	ranked bool
	n      int
}

func newFixture(t *testing.T, ranked bool) *fixture {
	kubetest.Require(t, cluster)
	ns, err := cluster.CreateNamespace(t.Context(), "rank")
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, ranked: ranked, cfg: fleet.Config{
		Binary: binary, Cluster: cluster, Namespace: ns, Lease: "db",
		LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		Dir: t.TempDir(),
	}}
}

// start starts a replica whose app answers gen/pos.
func (f *fixture) start(gen string, pos int64) *replica {
	f.t.Helper()
	f.n++
	a := newApp(f.t)
	a.set(gen, pos, false)
	cfg := f.cfg
	if f.ranked {
		cfg.Env = append(slices.Clone(cfg.Env), "LEASEHOLD_APP_RANK_URL="+a.srv.URL+"/rank",
			"LEASEHOLD_APP_HEALTH_INTERVAL="+probeInterval.String(), "LEASEHOLD_APP_HEALTH_TIMEOUT="+probeInterval.String())
	}
	inst := cfg.StartTest(f.t, fmt.Sprintf("r%d", f.n))
	st, err := inst.Status(f.t.Context())
	if err != nil {
		f.t.Fatal(err)
	}
	return &replica{Instance: inst, app: a, identity: st.Identity}
}

// agree waits until every replica names want as the best candidate.
func agree(t *testing.T, rs []*replica, want string) {
	t.Helper()
	poll.Until(t, 30*time.Second, 20*time.Millisecond, "every replica names "+want+" the best candidate", func() bool {
		for _, r := range rs {
			st, err := r.Status(t.Context())
			if err != nil || st.Rank == nil || st.Rank.BestCandidate == nil || *st.Rank.BestCandidate != want {
				return false
			}
		}
		return true
	})
}

// failover SIGKILLs leader and returns who leads among rest, and how long
// after the kill it first reported leader:true.
func failover(t *testing.T, leader *replica, rest []*replica) (*replica, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	instances := make([]*fleet.Instance, len(rest))
	for i, r := range rest {
		instances[i] = r.Instance
	}
	killed := time.Now()
	if err := leader.Signal(9); err != nil {
		t.Fatal(err)
	}
	next, _, err := fleet.WaitLeader(ctx, instances, 5*time.Millisecond)
	took := time.Since(killed)
	if err != nil {
		t.Fatal(err)
	}
	<-leader.Exited()
	for _, r := range rest {
		if r.Instance == next {
			return r, took
		}
	}
	t.Fatal("leader not among the replicas")
	return nil, 0
}

// rounds plays n crash failovers: each round, three candidates with
// random distinct positions of the leader's generation (setup may change
// them), the leader's own rank unknown so the best candidate is among
// them; the leader is killed and a new replica joins for the next round.
// It returns the failover times, and how many rounds the expected one won.
func rounds(f *fixture, n int, setup func(rng *rand.Rand, cands []*replica) (want *replica)) (times []time.Duration, wins int) {
	t := f.t
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 28))
	leader := f.start("g1", 1<<40)
	if _, _, err := fleet.WaitLeader(t.Context(), []*fleet.Instance{leader.Instance}, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	cands := []*replica{f.start("g1", 0), f.start("g1", 0), f.start("g1", 0)}
	for round := range n {
		want := setup(rng, cands)
		if f.ranked {
			leader.app.set("", 0, true) // the leader ranks last: the best is a candidate
			agree(t, append([]*replica{leader}, cands...), want.identity)
		}
		next, took := failover(t, leader, cands)
		times = append(times, took)
		if next == want {
			wins++
		}
		t.Logf("round %d: %s leads after %v (expected %s)", round+1, next.Name, took.Round(time.Millisecond), want.Name)
		cands = slices.DeleteFunc(cands, func(r *replica) bool { return r == next })
		leader = next
		leader.app.set("g1", 1<<40, false)
		cands = append(cands, f.start("g1", 0))
	}
	return times, wins
}

// distinct gives the candidates random distinct positions of generation
// g1; the best is the one with the highest.
func distinct(rng *rand.Rand, cands []*replica) *replica {
	perm := rng.Perm(1000)[:len(cands)]
	best := cands[0]
	for i, c := range cands {
		c.app.set("g1", int64(perm[i]), false)
		if perm[i] > perm[slices.Index(cands, best)] {
			best = c
		}
	}
	return best
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// The best-ranked live candidate leads after every crash failover, and
// the failover takes at most the deferral bound longer than the
// rank-less default; both measured here, one after the other.
func TestCrashFailoverElectsTheBestRanked(t *testing.T) {
	ranked := newFixture(t, true)
	rankedTimes, wins := rounds(ranked, failovers, distinct)
	plain := newFixture(t, false)
	plainTimes, _ := rounds(plain, failovers, distinct)
	t.Logf("FIGURE best-ranked leads: %d of %d crash failovers", wins, failovers)
	t.Logf("FIGURE failover after SIGKILL, median of %d: ranked %v, rank-less %v, ratio %.2f (deferral bound %v)", failovers,
		median(rankedTimes).Round(time.Millisecond), median(plainTimes).Round(time.Millisecond),
		float64(median(rankedTimes))/float64(median(plainTimes)), member.RankDeferBound(leaseDuration))
	if wins != failovers {
		t.Errorf("the best-ranked candidate led in %d of %d failovers", wins, failovers)
	}
}

// With the best candidate's app down (its rank unknown), the next best
// leads, within the deferral bound of an ordinary failover.
func TestBestAppDownNextBestLeads(t *testing.T) {
	f := newFixture(t, true)
	const n = 5
	times, wins := rounds(f, n, func(rng *rand.Rand, cands []*replica) *replica {
		distinct(rng, cands)
		byPos := slices.Clone(cands)
		slices.SortFunc(byPos, func(a, b *replica) int { return int(b.app.position - a.app.position) })
		byPos[0].app.set("g1", byPos[0].app.position, true) // the best's app is down
		return byPos[1]
	})
	bound := leaseDuration + retryPeriod + member.RankDeferBound(leaseDuration) + time.Second
	t.Logf("FIGURE best's app down: next best leads in %d of %d; failover median %v, max %v (bound %v)", wins, n,
		median(times).Round(time.Millisecond), slices.Max(times).Round(time.Millisecond), bound)
	if wins != n {
		t.Errorf("the next best led in %d of %d", wins, n)
	}
	if slices.Max(times) > 2*bound {
		t.Errorf("slowest failover %v, over twice the bound %v", slices.Max(times), bound)
	}
}

// A lower position of the last leader's generation wins over a higher one
// of another generation.
func TestMatchingGenerationWinsOverHigherPosition(t *testing.T) {
	f := newFixture(t, true)
	const n = 5
	_, wins := rounds(f, n, func(rng *rand.Rand, cands []*replica) *replica {
		i := rng.IntN(len(cands))
		for j, c := range cands {
			c.app.set("g0", int64(5000+rng.IntN(1000)+j), false) // another generation, higher positions
		}
		cands[i].app.set("g1", int64(rng.IntN(100)), false)
		return cands[i]
	})
	t.Logf("FIGURE differing generations: the matching generation (lower position) leads in %d of %d", wins, n)
	if wins != n {
		t.Errorf("the matching generation led in %d of %d", wins, n)
	}
}
