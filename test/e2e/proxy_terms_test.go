package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/pkg/client"
)

// closeBound bounds how long after its term ended a long-lived connection
// may stay open: the proxy closes it when it learns the term ended, a few
// milliseconds later; without that, it stays open as long as its client
// keeps it.
const closeBound = 5 * time.Second

// An upgraded connection (Upgrade: echo, the shape of a WebSocket) through
// the forwarding proxies, against a real election: opened through a
// follower's proxy (two hops) and through the leader's own, it reaches the
// leader's app with the leader's token and carries bytes both ways; when
// the leader releases the Lease (its term ends), both connections close
// within closeBound, and a new one reaches the new leader's app under its
// token.
func TestProxyClosesUpgradedConnectionsWhenTheTermEnds(t *testing.T) {
	runScenario(t, "proxy-upgrade", func(e *env) {
		ps := []*proxied{e.startProxied("a"), e.startProxied("b"), e.startProxied("c")}
		leaderMember, st := e.awaitOneLeader(generousWait)
		leader := proxiedOf(ps, leaderMember)
		e.awaitLeaderAddress(ps, leader.proxy, time.Now())
		var follower *proxied
		for _, p := range ps {
			if p != leader {
				follower = p
				break
			}
		}
		want := fmt.Sprintf("%s %d: ", leader.app.name, st.FencingToken)
		direct, via := e.openEcho(leader.proxy), e.openEcho(follower.proxy)
		for name, c := range map[string]*echoConn{"direct": direct, "through " + follower.Name: via} {
			if got := c.echo(t, "hello"); got != want+"hello" {
				t.Fatalf("%s: the upgraded connection answered %q, want %q", name, got, want+"hello")
			}
		}

		released := e.release(leader.member, 30*time.Second)
		for name, c := range map[string]*echoConn{"direct": direct, "through " + follower.Name: via} {
			took, err := c.closedWithin(closeBound)
			if err != nil {
				t.Errorf("%s: the upgraded connection of the ended term: %v", name, err)
				continue
			}
			t.Logf("%s: the upgraded connection closed %v after the release was asked", name, took.Sub(released).Round(time.Millisecond))
		}

		next := e.awaitTerm(released, st.FencingToken, handoverBound)
		successor := proxiedOf(ps, next.m)
		e.awaitLeaderAddress(ps, successor.proxy, time.Now())
		again := e.openEcho(leader.proxy) // the old leader's proxy forwards it
		if got, want := again.echo(t, "again"), fmt.Sprintf("%s %d: again", successor.app.name, next.st.FencingToken); got != want {
			t.Errorf("a new upgraded connection answered %q, want %q", got, want)
		}
	})
}

// release asks m to release the Lease and stay out for stayOut (POST
// /v1/release), and returns when it asked; from then on m's term may end
// early, as after a SIGTERM.
func (e *env) release(m *member, stayOut time.Duration) time.Time {
	e.t.Helper()
	api, err := client.New(m.APIURL)
	if err != nil {
		e.t.Fatal(err)
	}
	defer api.CloseIdleConnections()
	m.mu.Lock()
	m.terminated = time.Now() // not an exit: the end of its term, asked by the test
	m.mu.Unlock()
	at := time.Now()
	if _, err := api.Release(e.ctx, stayOut); err != nil {
		e.t.Fatal(err)
	}
	return at
}

// echoConn is an upgraded connection of the echo protocol.
type echoConn struct {
	conn net.Conn
	r    *bufio.Reader
}

// openEcho upgrades a connection to proxy (host:port) to the echo protocol;
// it is closed at the trial's end.
func (e *env) openEcho(proxy string) *echoConn {
	e.t.Helper()
	var d net.Dialer
	ctx, cancel := context.WithTimeout(e.ctx, generousWait)
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp", proxy)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(generousWait))
	req, _ := http.NewRequest(http.MethodGet, "http://"+proxy+"/ws", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "echo")
	if err := req.Write(conn); err != nil {
		e.t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	res, err := http.ReadResponse(r, req)
	if err != nil {
		e.t.Fatal(err)
	}
	if res.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(res.Body)
		e.t.Fatalf("upgrade through %s: %s %s", proxy, res.Status, body)
	}
	return &echoConn{conn: conn, r: r}
}

// echo sends msg and returns the line that comes back, without its newline.
func (c *echoConn) echo(t *testing.T, msg string) string {
	t.Helper()
	if _, err := io.WriteString(c.conn, msg+"\n"); err != nil {
		t.Fatal(err)
	}
	line, err := c.r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(line, "\n")
}

// closedWithin waits for the connection to end (EOF or reset: the proxy
// closed it) and returns when it did; an error if it is still open after
// bound.
func (c *echoConn) closedWithin(bound time.Duration) (time.Time, error) {
	_ = c.conn.SetReadDeadline(time.Now().Add(bound))
	_, err := io.Copy(io.Discard, c.r)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return time.Time{}, fmt.Errorf("still open %v later", bound)
	}
	return time.Now(), nil
}
