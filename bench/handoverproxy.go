package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
	"github.com/leasehold/leasehold/pkg/api"
	"github.com/leasehold/leasehold/pkg/client"
)

// standIn is the app beside one sidecar: it answers every request 200 "ok"
// and records when it received it and under which fencing token the proxy
// sent it.
type standIn struct {
	index int // in hoProxyRun.apps
	addr  string
	srv   *http.Server
	done  chan struct{}

	mu     sync.Mutex
	served []servedReq
}

// servedReq is one request an app served.
type servedReq struct {
	app    int // the app's index
	at     time.Time
	token  api.FencingToken // 0: no X-Leasehold-Fencing-Token
	direct bool             // sent by the bench straight to the app (path /direct), not through a proxy
}

func newStandIn(index int) (*standIn, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	a := &standIn{index: index, addr: ln.Addr().String(), done: make(chan struct{})}
	a.srv = &http.Server{ReadHeaderTimeout: time.Minute, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := servedReq{app: a.index, at: time.Now(), direct: r.URL.Path == "/direct"}
		if tok, err := strconv.ParseUint(r.Header.Get(api.FencingTokenHeader), 10, 64); err == nil {
			s.token = api.FencingToken(tok)
		}
		a.mu.Lock()
		a.served = append(a.served, s)
		a.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "ok")
	})}
	go func() {
		defer close(a.done)
		_ = a.srv.Serve(ln)
	}()
	return a, nil
}

func (a *standIn) close() {
	_ = a.srv.Close()
	<-a.done
}

func (a *standIn) records() []servedReq {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.served)
}

// hoProxied is one sidecar of the proxy group: its proxy (also its
// advertised address) in front of its app.
type hoProxied struct {
	hoMember
	app *standIn
}

// hoProxyRun is the proxy group's run.
type hoProxyRun struct {
	cluster *kubetest.Cluster
	cfg     fleet.Config
	fig     *hoFigures
	opts    options

	watch   *leaseWatch
	members []*hoProxied // running
	apps    []*standIn   // every app, by index
	owner   []string     // the identity of each app's sidecar, by index
	started int
}

func (p *hoProxyRun) log(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: handover: proxy group: %s\n", fmt.Sprintf(format, args...))
}

func (p *hoProxyRun) bound() time.Duration { return 3 * p.cfg.LeaseDuration }

func (p *hoProxyRun) start(ctx context.Context) (*hoProxied, error) {
	app, err := newStandIn(len(p.apps))
	if err != nil {
		return nil, err
	}
	p.apps = append(p.apps, app)
	p.owner = append(p.owner, "")
	port, err := kubetest.FreePort()
	if err != nil {
		return nil, err
	}
	m := &hoProxied{app: app}
	m.addr = "127.0.0.1:" + strconv.Itoa(port)
	cfg := p.cfg
	cfg.Env = append(slices.Clone(cfg.Env),
		"LEASEHOLD_ADVERTISE_ADDRESS="+m.addr, "LEASEHOLD_PROXY_ADDR="+m.addr, "LEASEHOLD_PROXY_UPSTREAM="+app.addr)
	p.started++
	if m.inst, err = cfg.Start(ctx, fmt.Sprintf("px-%d", p.started), false); err != nil {
		return nil, err
	}
	st, err := m.inst.Status(ctx)
	if err != nil {
		return nil, err
	}
	m.identity = st.Identity
	p.owner[app.index] = st.Identity
	p.members = append(p.members, m)
	return m, nil
}

func (p *hoProxyRun) instances() []*fleet.Instance {
	var out []*fleet.Instance
	for _, m := range p.members {
		out = append(out, m.inst)
	}
	return out
}

func (p *hoProxyRun) byInstance(inst *fleet.Instance) *hoProxied {
	for _, m := range p.members {
		if m.inst == inst {
			return m
		}
	}
	return nil
}

// leader waits for the leader, and until every member names its address.
func (p *hoProxyRun) leader(ctx context.Context) (*hoProxied, error) {
	wctx, cancel := context.WithTimeout(ctx, p.bound())
	defer cancel()
	l, err := fleet.AwaitLeadership(wctx, p.instances())
	if err != nil {
		return nil, err
	}
	m := p.byInstance(l.Instance)
	for _, o := range p.members {
		if err := awaitStatus(ctx, o.inst, p.bound(), "leaderAddress "+m.addr, func(st api.Status) bool { return st.LeaderAddress.Address == m.addr }); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (p *hoProxyRun) run(ctx context.Context) error {
	ns, err := p.cluster.CreateNamespace(ctx, "bench-proxy")
	if err != nil {
		return err
	}
	p.cfg.Namespace = ns
	if p.watch, err = startLeaseWatch(ctx, p.cluster.Clientset(), ns); err != nil {
		return err
	}
	if _, err := p.start(ctx); err != nil {
		return err
	}
	if _, err := p.leader(ctx); err != nil {
		return err
	}
	for range 2 {
		if _, err := p.start(ctx); err != nil {
			return err
		}
	}
	if err := awaitMemberCount(ctx, p.instances(), 3, p.bound()); err != nil {
		return err
	}
	if err := p.overhead(ctx); err != nil {
		return fmt.Errorf("overhead: %w", err)
	}
	for i := range p.opts.handoverReleases {
		if err := p.release(ctx, i+1); err != nil {
			return fmt.Errorf("release %d: %w", i+1, err)
		}
	}
	for i := range p.opts.handoverProxyTrials {
		if err := p.underLoad(ctx, i+1); err != nil {
			return fmt.Errorf("handover under load %d: %w", i+1, err)
		}
	}
	p.judge()
	return nil
}

// overhead sends n requests each way, interleaved: straight to the
// leader's app, through the leader's proxy, through a follower's proxy.
func (p *hoProxyRun) overhead(ctx context.Context) error {
	n := p.opts.handoverRequests
	if n <= 0 {
		return nil
	}
	leader, err := p.leader(ctx)
	if err != nil {
		return err
	}
	follower := p.members[0]
	if follower == leader {
		follower = p.members[1]
	}
	client := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4, DisableCompression: true}
	defer client.CloseIdleConnections()
	targets := []string{"http://" + leader.app.addr + "/direct", "http://" + leader.addr + "/work", "http://" + follower.addr + "/work"}
	took := [3][]time.Duration{}
	one := func(u string) (time.Duration, bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return 0, false, err
		}
		start := time.Now()
		res, err := client.RoundTrip(req)
		if err != nil {
			return 0, false, err
		}
		_, err = io.Copy(io.Discard, res.Body)
		d := time.Since(start)
		_ = res.Body.Close()
		return d, res.StatusCode == http.StatusOK, err
	}
	for _, u := range targets { // warm-up: a kept-alive connection each
		if _, _, err := one(u); err != nil {
			return err
		}
	}
	for range n {
		for i, u := range targets {
			d, ok, err := one(u)
			if err != nil {
				return err
			}
			if !ok {
				p.fig.overheadFailed++
				continue
			}
			took[i] = append(took[i], d)
		}
	}
	p.fig.direct, p.fig.viaLeader, p.fig.viaFollower = took[0], took[1], took[2]
	p.log("overhead, %d requests each way: direct p50 %v p99 %v; via the leader's proxy p50 %v p99 %v; via a follower's p50 %v p99 %v; %d not 200",
		n, quantile(took[0], 0.5), quantile(took[0], 0.99), quantile(took[1], 0.5), quantile(took[1], 0.99), quantile(took[2], 0.5), quantile(took[2], 0.99), p.fig.overheadFailed)
	in, err := proxyInProcess(ctx, n)
	if err != nil {
		in.err = err.Error()
	}
	p.fig.inProcess = in
	return nil
}

// release hands the leader's Lease to a random other member with POST
// /v1/release?to=, timed from the request's sending until that member's
// blocking GET /v1/leader?wait= answers 200.
func (p *hoProxyRun) release(ctx context.Context, n int) error {
	leader, err := p.leader(ctx)
	if err != nil {
		return err
	}
	if err := sleepRandom(ctx, 2*p.cfg.RetryPeriod); err != nil {
		return err
	}
	var hm []*hoMember
	for _, m := range p.members {
		hm = append(hm, &m.hoMember)
	}
	target := pickOther(hm, &leader.hoMember)
	watches, err := startAddrWatches(ctx, slices.DeleteFunc(slices.Clone(hm), func(m *hoMember) bool { return m == target }), leader.addr)
	if err != nil {
		return err
	}
	defer func() {
		for _, w := range watches {
			w.cancel()
		}
	}()
	var others []*fleet.Instance
	for _, m := range p.members {
		if m != leader {
			others = append(others, m.inst)
		}
	}
	next, took, err := awaitFirst(ctx, others, p.bound(), func() error {
		sc, err := client.New(leader.inst.APIURL)
		if err != nil {
			return err
		}
		defer sc.CloseIdleConnections()
		_, err = sc.ReleaseTo(ctx, 0, target.identity)
		return err
	})
	if errors.Is(err, fleet.ErrNoLeader) && ctx.Err() == nil {
		p.fig.releaseMisses++
		p.log("release %d: no one leads within %v", n, p.bound())
		return nil
	}
	if err != nil {
		return err
	}
	if next.Instance != target.inst {
		p.fig.releaseOther++
		p.log("release %d: %s leads, not %s, the member named", n, next.Instance.Name, target.inst.Name)
		return nil
	}
	p.fig.releases = append(p.fig.releases, took)
	lags, wrong, none := collectAddr(watches, target, next.At, p.bound())
	p.fig.releaseAddrLag = append(p.fig.releaseAddrLag, lags...)
	p.fig.releaseAddrWrong += wrong
	p.fig.releaseAddrNone += none
	p.log("release %d: %s → %s leads in %v; followers' leaderAddress %v after (%d wrong, %d none)",
		n, leader.inst.Name, next.Instance.Name, took.Round(time.Microsecond), roundAll(lags), wrong, none)
	return nil
}

// proxyOutcome is one request of the load.
type proxyOutcome struct {
	viaOld         bool // through the old leader's own proxy
	sent, answered time.Time
	code           int // 0: no HTTP answer
}

// underLoad loads every proxy, SIGTERMs the leader, times the handover and
// the refusals, and replaces the old leader with a new member.
func (p *hoProxyRun) underLoad(ctx context.Context, n int) error {
	leader, err := p.leader(ctx)
	if err != nil {
		return err
	}
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var (
		mu   sync.Mutex
		outs []proxyOutcome
		load sync.WaitGroup
	)
	for _, m := range p.members {
		load.Go(func() {
			tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 2, DisableCompression: true}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
			for loadCtx.Err() == nil {
				o := proxyOutcome{viaOld: m == leader, sent: time.Now()}
				req, _ := http.NewRequestWithContext(loadCtx, http.MethodGet, "http://"+m.addr+"/work", nil)
				resp, err := client.Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					o.code = resp.StatusCode
				}
				o.answered = time.Now()
				if loadCtx.Err() != nil {
					return
				}
				mu.Lock()
				outs = append(outs, o)
				mu.Unlock()
				if err != nil {
					select {
					case <-m.inst.Exited():
						return
					case <-time.After(time.Millisecond):
					}
				}
			}
		})
	}
	if err := sleep(ctx, 300*time.Millisecond); err != nil { // load before the handover
		return err
	}
	if err := sleepRandom(ctx, 2*p.cfg.RetryPeriod); err != nil {
		return err
	}
	var others []*fleet.Instance
	for _, m := range p.members {
		if m != leader {
			others = append(others, m.inst)
		}
	}
	next, took, err := awaitFirst(ctx, others, p.bound(), func() error { return leader.inst.Signal(syscall.SIGTERM) })
	missed := errors.Is(err, fleet.ErrNoLeader) && ctx.Err() == nil
	if err != nil && !missed {
		return err
	}
	select {
	case <-leader.inst.Exited():
	case <-time.After(p.bound()):
		p.log("%s did not exit within %v of SIGTERM", leader.inst.Name, p.bound())
	}
	if !missed {
		succ := p.byInstance(next.Instance)
		for _, o := range p.members {
			if o != leader {
				_ = awaitStatus(ctx, o.inst, p.bound(), "leaderAddress "+succ.addr, func(st api.Status) bool { return st.LeaderAddress.Address == succ.addr })
			}
		}
	}
	if err := sleep(ctx, 300*time.Millisecond); err != nil { // load after the handover
		return err
	}
	stopLoad()
	load.Wait()
	leader.inst.Stop()
	p.members = slices.DeleteFunc(p.members, func(m *hoProxied) bool { return m == leader })
	if missed {
		p.fig.proxyMisses++
		p.log("handover under load %d: no successor within %v", n, p.bound())
	} else {
		t := summarizeLoad(outs)
		t.handover = took
		p.fig.proxyTrials = append(p.fig.proxyTrials, t)
		p.log("handover under load %d: %s → %s leads in %v; refused via non-leaders' proxies over %v (%d 503, %d 502); %d served, %d refused via the old leader's proxy, %d without answer",
			n, leader.inst.Name, next.Instance.Name, took.Round(time.Microsecond), t.window.Round(time.Microsecond), t.refused503, t.refused502, t.served, t.oldRefused, t.errors)
	}
	if _, err := p.start(ctx); err != nil {
		return err
	}
	return awaitMemberCount(ctx, p.instances(), 3, p.bound())
}

// summarizeLoad reads one handover's load: the window from the first
// request refused (503 or 502) through a proxy other than the old
// leader's being sent to the last such being answered (0 when none was).
func summarizeLoad(outs []proxyOutcome) hoProxyTrial {
	var t hoProxyTrial
	var first, last time.Time
	for _, o := range outs {
		refused := o.code == http.StatusServiceUnavailable || o.code == http.StatusBadGateway
		switch {
		case o.code == http.StatusOK:
			t.served++
		case o.viaOld && refused:
			t.oldRefused++
		case o.viaOld:
		case o.code == 0:
			t.errors++
		case refused:
			if o.code == http.StatusServiceUnavailable {
				t.refused503++
			} else {
				t.refused502++
			}
			if first.IsZero() || o.sent.Before(first) {
				first = o.sent
			}
			if o.answered.After(last) {
				last = o.answered
			}
		}
	}
	if !first.IsZero() {
		t.window = last.Sub(first)
	}
	return t
}

// judge judges every request the apps served by its fencing token.
func (p *hoProxyRun) judge() {
	tokens := termTokens(p.watch.events(), p.cfg.Lease)
	own := map[int]map[api.FencingToken]bool{}
	var all []servedReq
	for _, a := range p.apps {
		own[a.index] = tokens[p.owner[a.index]]
		all = append(all, a.records()...)
	}
	p.fig.fencing = judgeFencing(all, own)
	p.log("fencing: %+v", p.fig.fencing)
}

func (p *hoProxyRun) stop() {
	for _, m := range p.members {
		m.inst.Stop()
	}
	p.members = nil
	for _, a := range p.apps {
		a.close()
	}
	p.apps = nil
	if p.watch != nil {
		p.watch.stop()
		p.watch = nil
	}
}

// termTokens are the fencing tokens of each holder's terms of lease, from
// the Lease's versions in the order the watch saw them: the
// resourceVersion of each acquiring write (a version naming a holder other
// than the version before it, none included; the watch starts before the
// Lease exists), and every token published on a version of that holder.
func termTokens(events []leaseEvent, lease string) map[string]map[api.FencingToken]bool {
	out := map[string]map[api.FencingToken]bool{}
	add := func(holder string, t api.FencingToken) {
		if out[holder] == nil {
			out[holder] = map[api.FencingToken]bool{}
		}
		out[holder][t] = true
	}
	prev := ""
	for _, e := range events {
		if e.lease != lease {
			continue
		}
		if e.holder != "" && e.holder != prev {
			if t, ok := tokenOf(e.rv); ok {
				add(e.holder, t)
			}
		}
		if e.holder != "" && e.token != 0 {
			add(e.holder, e.token)
		}
		prev = e.holder
	}
	return out
}

// fencingVerdict judges the requests the apps served.
type fencingVerdict struct {
	judged  int // served through a proxy
	direct  int // sent straight to an app by the bench, not judged
	stale   int // under a token lower than one another app had served before
	noToken int
	notOwn  int // under a token that is not one of its own member's terms
	apps    int
	tokens  int // distinct tokens served
}

// judgeFencing counts, over every request served through a proxy, those
// served without a token, under a token that is not one of the app's own
// member's (own, by app), and those received after another app had served
// a request under a larger token (a deposed leader's app serving after its
// successor's began).
func judgeFencing(reqs []servedReq, own map[int]map[api.FencingToken]bool) fencingVerdict {
	v := fencingVerdict{apps: len(own)}
	reqs = slices.Clone(reqs)
	slices.SortStableFunc(reqs, func(a, b servedReq) int { return a.at.Compare(b.at) })
	maxBy := map[int]api.FencingToken{}
	seen := map[api.FencingToken]bool{}
	for _, r := range reqs {
		if r.direct {
			v.direct++
			continue
		}
		v.judged++
		if r.token == 0 {
			v.noToken++
			continue
		}
		seen[r.token] = true
		if !own[r.app][r.token] {
			v.notOwn++
		}
		for app, m := range maxBy {
			if app != r.app && m > r.token {
				v.stale++
				break
			}
		}
		maxBy[r.app] = max(maxBy[r.app], r.token)
	}
	v.tokens = len(seen)
	return v
}
