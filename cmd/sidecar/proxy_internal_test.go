package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/leasehold/leasehold/internal/elect"
	"github.com/leasehold/leasehold/internal/fence"
	"github.com/leasehold/leasehold/internal/proxy"
	"github.com/leasehold/leasehold/internal/testing/upgrade"
)

// followTerms, on a fake clock and snapshots published by hand: an
// upgraded connection forwarded under a term stays open while the term is
// renewed (a renewal publishes no change; the term's old validity passes),
// closes once its validity runs out without a renewal (nothing is
// published then), and one of a later term closes when a step-down is
// published.
func TestFollowTermsClosesWhenTheTermEnds(t *testing.T) {
	const bound = 5 * time.Second // a close takes milliseconds; without one the connection stays open
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	term := func(token uint64, validUntil time.Time) elect.Snapshot {
		return elect.Snapshot{Namespace: "ns", Lease: "app", Leading: true, Holder: "me", Term: 1, Token: fence.Token(token), ValidUntil: validUntil}
	}
	pub := elect.NewPublisher(term(5, t0.Add(2*time.Second)))

	cfg := proxy.Config{Lease: "ns/app", Clock: clk, View: func(now time.Time) proxy.View { return viewOf(pub.Load(), now) }}
	addr := startEchoProxy(t, cfg, proxy.HeaderFencingToken, func(ctx context.Context, p *proxy.Proxy) error {
		return followTerms(ctx, pub.Load, clk, p)
	})
	// awaitTimer waits until followTerms has checked and set its timer.
	awaitTimer := func(what string) {
		t.Helper()
		await(t, "followTerms's timer set ("+what+")", clk.HasWaiters)
	}

	first := upgradeEcho(t, addr)
	first.roundTrip(t, "5: ", "hello")
	awaitTimer("start")

	// Renewed: the old validity passes, the term goes on.
	pub.Publish(term(5, t0.Add(4*time.Second)))
	clk.SetTime(t0.Add(2500 * time.Millisecond))
	awaitTimer("after the first validity passed")
	first.roundTrip(t, "5: ", "still term 5")

	// Not renewed: its validity runs out, and nothing is published.
	clk.SetTime(t0.Add(4500 * time.Millisecond))
	if err := first.closedWithin(bound); err != nil {
		t.Errorf("term 5, its validity run out: %v", err)
	}

	// A later term, ended by a published step-down.
	pub.Publish(term(6, t0.Add(20*time.Second)))
	second := upgradeEcho(t, addr)
	second.roundTrip(t, "6: ", "hello")
	stepDown := term(6, time.Time{})
	stepDown.Leading = false
	pub.Publish(stepDown)
	if err := second.closedWithin(bound); err != nil {
		t.Errorf("term 6, after the step-down: %v", err)
	}
}

// followEveryTerm follows each Lease of a group: an upgraded connection
// forwarded under Lease b's term closes when b's step-down is published,
// while one under a's term, of the same token, stays open until a's is.
func TestFollowEveryTermFollowsEachLease(t *testing.T) {
	const bound = 5 * time.Second
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	term := func(lease string, leading bool) elect.Snapshot {
		return elect.Snapshot{Namespace: "ns", Lease: lease, Leading: leading, Holder: "me", Term: 1, Token: 5, ValidUntil: t0.Add(time.Hour)}
	}
	pubs := map[string]*elect.Publisher{"a": elect.NewPublisher(term("a", true)), "b": elect.NewPublisher(term("b", true))}
	var leases []proxy.Lease
	var snapshots []func() *elect.Snapshot
	for _, name := range []string{"a", "b"} {
		leases = append(leases, proxy.Lease{Name: "ns/" + name, View: viewFunc(pubs[name].Load)})
		snapshots = append(snapshots, pubs[name].Load)
	}
	addr := startEchoProxy(t, proxy.Config{Leases: leases, Clock: clk}, proxy.HeaderLease, func(ctx context.Context, p *proxy.Proxy) error {
		return followEveryTerm(ctx, snapshots, clk, p)
	})

	onA, onB := upgradeEchoFor(t, addr, "a"), upgradeEchoFor(t, addr, "b")
	onA.roundTrip(t, "a: ", "hello")
	onB.roundTrip(t, "b: ", "hello")
	pubs["b"].Publish(term("b", false))
	if err := onB.closedWithin(bound); err != nil {
		t.Errorf("b's connection, after b's step-down: %v", err)
	}
	onA.roundTrip(t, "a: ", "a's term goes on")
	pubs["a"].Publish(term("a", false))
	if err := onA.closedWithin(bound); err != nil {
		t.Errorf("a's connection, after a's step-down: %v", err)
	}
}

// startEchoProxy starts an app that echoes on upgraded connections, each
// line prefixed with the request's header header and ": ", a proxy of cfg
// in front of it (cfg.Upstream is the app), and follow(ctx, proxy) until
// the test ends (its error fails the test); it returns the proxy's
// address.
func startEchoProxy(t *testing.T, cfg proxy.Config, header string, follow func(context.Context, *proxy.Proxy) error) string {
	t.Helper()
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		upgrade.Echo(brw, "echo", r.Header.Get(header)+": ")
	}))
	t.Cleanup(app.Close)
	cfg.Upstream = app.Listener.Addr().String()
	p, err := proxy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- follow(ctx, p) }()
	t.Cleanup(func() { // cleanups run last first: the follower ends before the servers close
		srv.Close()
		p.CloseIdleConnections()
	})
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("following the terms: %v", err)
		}
	})
	return srv.Listener.Addr().String()
}

// echoConn is an upgraded connection to the echo app.
type echoConn struct {
	conn net.Conn
	r    *bufio.Reader
}

func upgradeEcho(t *testing.T, addr string) *echoConn {
	t.Helper()
	return upgradeEchoFor(t, addr, "")
}

// upgradeEchoFor is upgradeEcho for the Lease lease of a group (none when
// "").
func upgradeEchoFor(t *testing.T, addr, lease string) *echoConn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/ws", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "echo")
	if lease != "" {
		req.Header.Set(proxy.HeaderLease, lease)
	}
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	res, err := http.ReadResponse(r, req)
	if err != nil || res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", res, err)
	}
	return &echoConn{conn: conn, r: r}
}

func (c *echoConn) roundTrip(t *testing.T, prefix, msg string) {
	t.Helper()
	_ = c.conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c.conn, msg+"\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := c.r.ReadString('\n'); err != nil || line != prefix+msg+"\n" {
		t.Fatalf("echo: %q, %v; want %q", line, err, prefix+msg+"\n")
	}
}

// closedWithin reads until the connection ends; an error if it is still
// open after bound.
func (c *echoConn) closedWithin(bound time.Duration) error {
	_ = c.conn.SetReadDeadline(time.Now().Add(bound))
	_, err := io.Copy(io.Discard, c.r)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return fmt.Errorf("still open %v later", bound)
	}
	return nil
}
