package e2e

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/fence"
	"github.com/leasehold/leasehold/internal/testing/proxyload"
)

// handoversPerMode is how many times TestProxyHandoversUnderLoad SIGTERMs
// the leader in each handover mode: 2 × 25 = 50 graceful handovers.
const handoversPerMode = 25

// Graceful handovers under load through the forwarding proxies: three
// proxied sidecars, a client per sidecar sending GETs and POSTs to its
// proxy without pause; the leader is SIGTERMed, the successor leads, the
// old leader exits, a new sidecar takes its place, 25 times with the
// default handover (release to anyone) and 25 times with
// LEASEHOLD_HANDOVER=successor. No proxy answers 502 (a follower that
// finds the old leader's proxy gone forwards once more to the leader as now
// known, or answers 503 with Retry-After; the old leader's proxy closes
// only once its followers have stopped forwarding to it), no proxy of a
// sidecar that stays leaves a request unanswered, every SIGTERMed sidecar
// exits 0, and each app serves only under its own member's tokens. The 503s
// of each handover are reported as a window (first sent to last answered),
// at the proxies that stay and at the leaving leader's own, and 503s in
// the steady state between handovers are counted.
func TestProxyHandoversUnderLoad(t *testing.T) {
	var all handoverTally
	for _, mode := range []struct{ name, env string }{
		{"any", "LEASEHOLD_HANDOVER=any"},
		{"successor", "LEASEHOLD_HANDOVER=successor"},
	} {
		t.Run(mode.name, func(t *testing.T) {
			runScenario(t, "proxy-handovers-"+mode.name, func(e *env) {
				e.cfg.Env = append(e.cfg.Env, mode.env)
				all.add(e.proxyHandovers(handoversPerMode))
			})
		})
	}
	t.Logf("%d handovers under load: %d answers 502; SIGTERMed sidecars exiting non-zero: %d of %d; 503s between handovers: %d",
		all.handovers, all.badGateway, all.badExits, all.handovers, all.between)
	all.log(t)
}

// handoverTally sums what proxyHandovers measured.
type handoverTally struct {
	handovers, badGateway, badExits int
	between                         int // 503s to requests sent once a handover had settled, before the next SIGTERM
	// followers and leaving are the 503 windows of each handover (first 503
	// sent to last 503 answered) at the proxies of the sidecars that stay,
	// and at the SIGTERMed leader's own proxy; 0 for a handover without
	// any 503 there.
	followers, leaving []time.Duration
}

func (a *handoverTally) add(b handoverTally) {
	a.handovers += b.handovers
	a.badGateway += b.badGateway
	a.badExits += b.badExits
	a.between += b.between
	a.followers = append(a.followers, b.followers...)
	a.leaving = append(a.leaving, b.leaving...)
}

// log reports the 503 windows.
func (a *handoverTally) log(t *testing.T) {
	logWindows(t, "followers' proxies", a.followers)
	logWindows(t, "the leaving leader's proxy", a.leaving)
}

func logWindows(t *testing.T, where string, windows []time.Duration) {
	if len(windows) == 0 {
		return
	}
	w := slices.Sorted(slices.Values(windows))
	none := 0
	for _, d := range w {
		if d == 0 {
			none++
		}
	}
	t.Logf("503 window per handover at %s (first 503 sent → last 503 answered; 0 without any), n=%d: p50 %v, p90 %v, max %v; %d without a 503",
		where, len(w), w[len(w)/2].Round(time.Microsecond), w[len(w)*9/10].Round(time.Microsecond), w[len(w)-1].Round(time.Microsecond), none)
}

// slot is one place of the fleet: the proxied sidecar that holds it now.
type slot struct{ current atomic.Pointer[proxied] }

// proxyHandovers runs n graceful handovers under load (see
// TestProxyHandoversUnderLoad) and returns what it measured. It fails the
// trial on a 502, a request a staying sidecar's proxy left unanswered, an
// exit status other than 0, or a request an app served under a token not
// its member's.
func (e *env) proxyHandovers(n int) (tally handoverTally) {
	t := e.t
	slots := make([]*slot, instances)
	var ps []*proxied
	for i := range slots {
		slots[i] = &slot{}
		p := e.startProxied(string(rune('a' + i)))
		slots[i].current.Store(p)
		ps = append(ps, p)
	}
	running := func() []*proxied {
		var out []*proxied
		for _, s := range slots {
			out = append(out, s.current.Load())
		}
		return out
	}
	leaderMember, st := e.awaitOneLeader(generousWait)
	leader := proxiedOf(ps, leaderMember)
	token := st.FencingToken
	held := map[*proxied][]fence.Token{leader: {token}}

	load := proxyload.Start(e.ctx, len(slots), func(client int) proxyload.Target[*proxied] {
		p := slots[client].current.Load()
		return proxyload.Target[*proxied]{Addr: p.proxy, Via: p}
	})
	defer load.Stop()

	// Handover k runs from struckAt[k] (the SIGTERM) until settledAt[k]:
	// the old leader has exited, a new sidecar has taken its place, and
	// every sidecar reports the successor's address.
	var struckAt, settledAt []time.Time
	var leaving []*proxied
	e.awaitLeaderAddress(running(), leader.proxy, time.Now())
	for k := range n {
		struck := e.terminate(leader.member)
		struckAt, leaving = append(struckAt, struck), append(leaving, leader)
		next := e.awaitTerm(struck, token, handoverBound)
		successor := proxiedOf(running(), next.m)
		e.awaitExit(leader.member, struck)
		if leader.ExitCode() != 0 {
			tally.badExits++
		}
		replacement := e.startProxied(fmt.Sprintf("n%02d", k))
		for _, s := range slots {
			if s.current.Load() == leader {
				s.current.Store(replacement)
			}
		}
		ps = append(ps, replacement)
		leader, token = successor, next.st.FencingToken
		held[leader] = append(held[leader], token)
		e.awaitLeaderAddress(running(), leader.proxy, time.Now())
		settledAt = append(settledAt, time.Now())
	}
	answers := load.Stop()

	// Every answer a proxy gave, and what the clients saw without one.
	codes := map[int]int{}
	var refused, cut int // no answer: refused at connect (a proxy gone), or cut after sending
	for _, a := range answers {
		switch {
		case a.Err != nil && isDialError(a.Err):
			refused++
		case a.Err != nil:
			cut++
			if slices.Contains(leaving, a.Via) {
				t.Logf("%s %s to the SIGTERMed %s's own proxy: no answer: %v", clock(a.Sent), a.Method, a.Via.Name, a.Err)
			} else {
				t.Errorf("%s %s to %s's proxy, which was not stopped: no answer: %v", clock(a.Sent), a.Method, a.Via.Name, a.Err)
			}
		default:
			codes[a.Code]++
			if a.Code != http.StatusOK && a.Code != http.StatusServiceUnavailable {
				t.Errorf("%s %s to %s's proxy answered %d: %s", clock(a.Sent), a.Method, a.Via.Name, a.Code, a.Body)
			}
		}
	}
	tally.handovers, tally.badGateway = n, codes[http.StatusBadGateway]
	t.Logf("%d handovers, %d requests answered by a proxy: %v; %d refused at connect (a SIGTERMed sidecar's proxy once it had closed), %d sent to one and not answered (its client's kept-alive connection closed as it sent)",
		n, len(answers)-refused-cut, codes, refused, cut)
	if codes[http.StatusOK] == 0 {
		t.Fatal("no request was served")
	}

	// Each 503 belongs to the handover under way when it was answered (a
	// request sent just before a SIGTERM may be refused just after it),
	// from its SIGTERM until the next one; one answered after a handover
	// settled and before the next SIGTERM came in the steady state.
	// The window of a handover runs from the first of its 503s sent to the
	// last answered, at the proxies that stay and at the leaving one's.
	for k, from := range struckAt {
		to := time.Now()
		if k+1 < len(struckAt) {
			to = struckAt[k+1]
		}
		var window [2]struct{ first, last time.Time } // followers, leaving
		for _, a := range answers {
			if a.Code != http.StatusServiceUnavailable || a.Received.Before(from) || !a.Received.Before(to) {
				continue
			}
			if a.Sent.After(settledAt[k]) {
				tally.between++
				t.Logf("%s %s to %s's proxy, between handovers: 503 %s", clock(a.Sent), a.Method, a.Via.Name, strings.TrimSpace(a.Body))
				continue
			}
			w := &window[0]
			if a.Via == leaving[k] {
				w = &window[1]
			}
			if w.first.IsZero() || a.Sent.Before(w.first) {
				w.first = a.Sent
			}
			if a.Received.After(w.last) {
				w.last = a.Received
			}
		}
		f, l := window[0].last.Sub(window[0].first), window[1].last.Sub(window[1].first)
		tally.followers, tally.leaving = append(tally.followers, f), append(tally.leaving, l)
		t.Logf("handover %d: SIGTERM to %s at %s, settled %v later; 503 window at the followers' proxies %v, at its own %v",
			k, leaving[k].Name, clock(from), settledAt[k].Sub(from).Round(time.Millisecond), f.Round(time.Millisecond), l.Round(time.Millisecond))
	}
	tally.log(t)

	// Each app served only under the tokens of its own member's terms.
	for _, p := range ps {
		for tok, count := range p.app.served() {
			if !slices.Contains(held[p], tok) {
				t.Errorf("%s's app served %d requests under token %d; its member's terms: %v", p.Name, count, tok, held[p])
			}
		}
	}
	return tally
}

// isDialError reports whether err is a failure to connect: nothing was
// sent.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
