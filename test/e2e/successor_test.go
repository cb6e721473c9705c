package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/fence"
	"github.com/leasehold/leasehold/internal/proxy"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
	"github.com/leasehold/leasehold/internal/testing/poll"
	"github.com/leasehold/leasehold/internal/testing/upgrade"
)

// standIn is the app beside one sidecar: it records every request it
// serves with the fencing token the proxy attached, and answers with its
// name; a request with Upgrade: echo is switched to a connection that
// echoes each line, prefixed with the app's name and that token.
type standIn struct {
	name   string
	srv    *httptest.Server
	mu     sync.Mutex
	tokens map[fence.Token]int
}

func newStandIn(t *testing.T, name string) *standIn {
	a := &standIn{name: name, tokens: map[fence.Token]int{}}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := strconv.ParseUint(r.Header.Get(proxy.HeaderFencingToken), 10, 64)
		a.mu.Lock()
		a.tokens[fence.Token(tok)]++
		a.mu.Unlock()
		if r.Header.Get("Upgrade") == "echo" {
			echo(w, name+" "+strconv.FormatUint(tok, 10)+": ")
			return
		}
		io.WriteString(w, name)
	}))
	t.Cleanup(a.srv.Close) // after its sidecar's Stop: upgraded connections have closed
	return a
}

// echo switches w's connection to the echo protocol: every line read is
// written back after prefix, until the connection closes.
func echo(w http.ResponseWriter, prefix string) {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	upgrade.Echo(brw, "echo", prefix)
}

func (a *standIn) served() map[fence.Token]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[fence.Token]int{}
	for k, v := range a.tokens {
		out[k] = v
	}
	return out
}

// proxied is one sidecar with its advertised forwarding proxy and its app.
type proxied struct {
	*member
	app   *standIn
	proxy string // host:port, also its advertised address
}

// proxiedOf returns the element of ps that is m.
func proxiedOf(ps []*proxied, m *member) *proxied {
	for _, p := range ps {
		if p.member == m {
			return p
		}
	}
	panic("no proxied sidecar is " + m.Name)
}

func (e *env) startProxied(name string, extra ...string) *proxied {
	e.t.Helper()
	port, err := kubetest.FreePort()
	if err != nil {
		e.t.Fatal(err)
	}
	p := &proxied{app: newStandIn(e.t, name), proxy: "127.0.0.1:" + strconv.Itoa(port)}
	env := append([]string{
		"LEASEHOLD_ADVERTISE_ADDRESS=" + p.proxy,
		"LEASEHOLD_PROXY_ADDR=" + p.proxy,
		"LEASEHOLD_PROXY_UPSTREAM=" + p.app.srv.Listener.Addr().String(),
	}, extra...)
	p.member = e.startEnv(name, nil, env...)
	return p
}

// awaitLeaderAddress waits until every running member of ps reports want
// as leaderAddress, and returns how long that took from since.
func (e *env) awaitLeaderAddress(ps []*proxied, want string, since time.Time) time.Duration {
	e.t.Helper()
	poll.Until(e.t, generousWait, 5*time.Millisecond, "leaderAddress "+want+" everywhere", func() bool {
		all := true
		for _, p := range ps {
			if !p.running() {
				continue
			}
			ctx, cancel := context.WithTimeout(e.ctx, time.Second)
			st, err := p.Status(ctx)
			cancel()
			all = all && err == nil && st.LeaderAddress.Address == want
		}
		return all
	})
	return time.Since(since)
}

// Leader address and forwarding proxy, over a graceful handover: every
// member reports the valid leader's address; requests sent to any member's
// proxy are served by the leader's app only, with the leader's token; after
// the leader's SIGTERM, the addresses and the serving move to the new
// leader, and no app serves a request under a token that is not its own
// member's current one.
func TestLeaderAddressAndProxy(t *testing.T) {
	runScenario(t, "proxy", func(e *env) {
		ps := []*proxied{e.startProxied("a"), e.startProxied("b"), e.startProxied("c")}
		leader, st := e.awaitOneLeader(generousWait)
		var old *proxied
		for _, p := range ps {
			if p.member == leader {
				old = p
			}
		}
		e.awaitLeaderAddress(ps, old.proxy, time.Now())

		// Load every proxy, all through the handover.
		type outcome struct {
			code   int
			app    string
			sent   time.Time
			answer time.Time
		}
		var (
			mu       sync.Mutex
			outcomes []outcome
			load     sync.WaitGroup
		)
		ctx, stopLoad := context.WithCancel(e.ctx)
		client := &http.Client{Timeout: 5 * time.Second}
		for _, p := range ps {
			load.Go(func() {
				for ctx.Err() == nil {
					sent := time.Now()
					resp, err := client.Get("http://" + p.proxy + "/work")
					if err != nil {
						if !p.running() {
							return
						}
						time.Sleep(time.Millisecond)
						continue
					}
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					mu.Lock()
					outcomes = append(outcomes, outcome{resp.StatusCode, string(body), sent, time.Now()})
					mu.Unlock()
				}
			})
		}
		time.Sleep(300 * time.Millisecond) // load before the handover; its length decides nothing
		struck := e.terminate(old.member)
		next := e.awaitTerm(struck, st.FencingToken, renewDeadline)
		var successor *proxied
		for _, p := range ps {
			if p.member == next.m {
				successor = p
			}
		}
		took := e.awaitLeaderAddress(ps, successor.proxy, next.recv)
		t.Logf("leaderAddress names the successor everywhere %v after it first answered leader:true", took.Round(time.Millisecond))
		e.awaitExit(old.member, struck)
		time.Sleep(300 * time.Millisecond) // load after the handover; its length decides nothing
		stopLoad()
		load.Wait()

		// Only leaders' apps served, each under its own member's token.
		for _, p := range ps {
			for tok, n := range p.app.served() {
				switch {
				case p == old && tok == st.FencingToken, p == successor && tok == next.st.FencingToken:
				default:
					t.Errorf("%s's app served %d requests under token %d (the old leader's %d, the successor's %d)", p.Name, n, tok, st.FencingToken, next.st.FencingToken)
				}
			}
		}
		var ok, refused int
		var firstRefused, lastRefused time.Time
		for _, o := range outcomes {
			switch o.code {
			case http.StatusOK:
				ok++
			case http.StatusServiceUnavailable, http.StatusBadGateway:
				refused++
				if firstRefused.IsZero() {
					firstRefused = o.sent
				}
				lastRefused = o.answer
			default:
				t.Errorf("an answer %d from %s", o.code, o.app)
			}
		}
		if ok == 0 {
			t.Fatal("no request was served")
		}
		window := "none"
		if refused > 0 {
			window = fmt.Sprint(lastRefused.Sub(firstRefused).Round(time.Millisecond))
		}
		t.Logf("%d requests served, %d refused (503/502) around the handover, over %s", ok, refused, window)
	})
}

// A rolling update of 3 replicas with LEASEHOLD_HANDOVER=successor (start
// a new pod, SIGTERM an old one, three times; the leader is old at the
// start): leadership moves exactly once, to a new pod.
func TestRollingUpdateMovesLeadershipOnce(t *testing.T) {
	runScenario(t, "rollout", func(e *env) {
		e.cfg.Env = append(e.cfg.Env, "LEASEHOLD_HANDOVER=successor")
		log := e.watchLease()
		olds := []*member{e.start("old-1")}
		first, _ := e.awaitOneLeader(generousWait)
		olds = append(olds, e.start("old-2"), e.start("old-3"))
		e.awaitMembers(3)
		// The leader goes first, as the worst case for a rollout.
		for i, o := range olds {
			if o == first && i != 0 {
				olds[0], olds[i] = olds[i], olds[0]
			}
		}
		begun := time.Now()
		var news []*member
		for i, o := range olds {
			news = append(news, e.start(fmt.Sprintf("new-%d", i+1)))
			e.awaitMembers(4)
			e.awaitExit(o, e.terminate(o))
			e.awaitMembers(3)
		}
		leader, _ := e.awaitOneLeader(generousWait)
		var holders []string
		for _, ev := range log.since(begun) {
			if ev.holder != "" && (len(holders) == 0 || holders[len(holders)-1] != ev.holder) {
				holders = append(holders, ev.holder)
			}
		}
		if prev, ok := log.lastBefore(begun, func(ev leaseEvent) bool { return ev.holder != "" }); ok && len(holders) > 0 && holders[0] == prev.holder {
			holders = holders[1:]
		}
		t.Logf("holders during the rollout: %v; leader at the end: %s", holders, leader.Name)
		if len(holders) != 1 || !memberIn(leader, news) {
			t.Errorf("leadership moved %d times (%v), want exactly once, to a new pod", len(holders), holders)
		}
	})
}

// awaitMembers waits until every running member counts n members
// (leasehold_members).
func (e *env) awaitMembers(n int) {
	e.t.Helper()
	poll.Until(e.t, generousWait, 10*time.Millisecond, fmt.Sprintf("every member counting %d members", n), func() bool {
		all := true
		for _, m := range e.members {
			if !m.running() {
				continue
			}
			ctx, cancel := context.WithTimeout(e.ctx, time.Second)
			ms, err := m.Metrics(ctx)
			cancel()
			all = all && err == nil && ms.Sum("leasehold_members", nil) == float64(n)
		}
		return all
	})
}
