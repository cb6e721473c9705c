package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testing/upgrade"
	"github.com/leasehold/leasehold/pkg/api"
)

// longLivedApp is an app stand-in with an echoing upgrade (/ws: 101 once
// its gate is open, then every line back, prefixed), an endless event
// stream (/events: an event every time the client asks for one), and a
// slow answer of known length (/slow: answers once release is closed). Its
// upgrade handlers end when the proxy closes their connections; close
// closes what is left and waits for them.
type longLivedApp struct {
	*app
	release  chan struct{}
	handlers sync.WaitGroup

	mu    sync.Mutex
	gate  chan struct{} // /ws answers 101 once it is closed
	conns []net.Conn
}

func newLongLivedApp(t *testing.T) *longLivedApp {
	a := &longLivedApp{app: newApp(t, "app"), release: make(chan struct{}), gate: make(chan struct{})}
	close(a.gate)
	a.handle(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ws":
			a.serveUpgrade(w)
		case "/events":
			w.Header().Set("Content-Type", "text/event-stream")
			rc := http.NewResponseController(w)
			for i := 0; ; i++ {
				_, _ = fmt.Fprintf(w, "data: event %d\n\n", i)
				if rc.Flush() != nil {
					return
				}
				select {
				case <-time.After(10 * time.Millisecond): // a stream that goes on; its pace decides nothing
				case <-r.Context().Done():
					return
				}
			}
		case "/slow":
			select {
			case <-a.release:
			case <-r.Context().Done():
				return
			}
			w.Header().Set("Content-Length", "4")
			_, _ = io.WriteString(w, "done")
		}
	})
	t.Cleanup(a.close)
	return a
}

// closeGate makes /ws wait before it answers 101, until the returned func
// is called.
func (a *longLivedApp) closeGate() (open func()) {
	gate := make(chan struct{})
	a.mu.Lock()
	a.gate = gate
	a.mu.Unlock()
	return func() { close(gate) }
}

func (a *longLivedApp) serveUpgrade(w http.ResponseWriter) {
	a.mu.Lock()
	gate := a.gate
	a.mu.Unlock()
	<-gate
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	a.mu.Lock()
	a.conns = append(a.conns, conn)
	a.handlers.Add(1)
	a.mu.Unlock()
	defer a.handlers.Done()
	upgrade.Echo(brw, "websocket", "echo: ")
}

// close ends what the proxy left open and waits for the upgrade handlers.
func (a *longLivedApp) close() {
	a.mu.Lock()
	for _, c := range a.conns {
		_ = c.Close()
	}
	a.mu.Unlock()
	a.handlers.Wait()
}

// upgrading is a client's upgrade request to /ws through a proxy, sent.
type upgrading struct {
	conn net.Conn
	r    *bufio.Reader
	req  *http.Request
}

// sendUpgrade sends an upgrade request to /ws through the proxy at addr;
// the connection is closed at the test's end.
func sendUpgrade(t *testing.T, addr string) *upgrading {
	t.Helper()
	return sendUpgradeFor(t, addr, "")
}

// sendUpgradeFor is sendUpgrade for the Lease lease (HeaderLease; none
// when "").
func sendUpgradeFor(t *testing.T, addr, lease string) *upgrading {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, generous)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(generous))
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/ws", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	if lease != "" {
		req.Header.Set(HeaderLease, lease)
	}
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	return &upgrading{conn: conn, r: bufio.NewReader(conn), req: req}
}

// switched reads the answer to the upgrade: it must be 101.
func (u *upgrading) switched(t *testing.T) *upgrading {
	t.Helper()
	res, err := http.ReadResponse(u.r, u.req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("the upgrade was answered %s", res.Status)
	}
	return u
}

// dialUpgrade opens an upgraded connection to /ws through the proxy at addr.
func dialUpgrade(t *testing.T, addr string) *upgrading { return sendUpgrade(t, addr).switched(t) }

// echo sends msg and reads its echo.
func (u *upgrading) echo(msg string) error {
	if _, err := io.WriteString(u.conn, msg+"\n"); err != nil {
		return err
	}
	line, err := u.r.ReadString('\n')
	if err != nil {
		return err
	}
	if line != "echo: "+msg+"\n" {
		return fmt.Errorf("read %q", line)
	}
	return nil
}

// endsWithin reports whether r reaches its end (EOF, or an error: the
// connection closed or reset) within bound, reading whatever still
// arrives. The reader is left to the test's cleanups otherwise.
func endsWithin(r io.Reader, bound time.Duration) error {
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, r)
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-time.After(bound):
		return fmt.Errorf("still open after %v", bound)
	}
}

// termView is a View whose term the test sets: leading with token while it
// is not 0, else not leading.
type termView struct{ token atomic.Uint64 }

func (v *termView) view(time.Time) View {
	if tok := v.token.Load(); tok != 0 {
		return View{Leading: true, Token: api.FencingToken(tok), Term: int32(tok)}
	}
	return View{}
}

// Upgraded connections and streamed answers that the leader's proxy
// forwarded to the app under a term are closed, on both sides, once that
// term has ended (CloseEndedTerms), directly and through a follower's
// proxy; while the term goes on (renewals), they stay open. A request still
// waiting for the app's answer when the term ends is answered in full; an
// upgrade the app accepts only after its term has ended is closed at once.
func TestLongLivedExchangesEndWithTheirTerm(t *testing.T) {
	// A close takes a few milliseconds; a connection that is not closed stays
	// open for as long as the test runs.
	const bound = 2 * time.Second
	app := newLongLivedApp(t)
	var tv termView
	tv.token.Store(500)
	leader := newInstance(t, Config{Upstream: app.addr(), View: tv.view})
	follower := newInstance(t, Config{Upstream: "127.0.0.1:1", View: following(leader.addr())})
	c := newClient(t)

	direct, via := dialUpgrade(t, leader.addr()), dialUpgrade(t, follower.addr())
	res, err := c.Get(leader.url() + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	events := bufio.NewReader(res.Body)
	if line, err := events.ReadString('\n'); err != nil || line != "data: event 0\n" {
		t.Fatalf("first event %q, %v", line, err)
	}
	slow := make(chan answer, 1)
	go func() {
		res, err := c.Get(leader.url() + "/slow")
		if err != nil {
			slow <- answer{status: -1, body: err.Error()}
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		slow <- answer{status: res.StatusCode, body: string(b)}
	}()
	eventually(t, "/slow to reach the app", func() bool { return len(app.requests()) == 4 }) // /ws twice, /events, /slow

	// The term goes on: nothing is closed.
	leader.p.CloseEndedTerms()
	for _, u := range []*upgrading{direct, via} {
		if err := u.echo("still the same term"); err != nil {
			t.Fatalf("an upgraded connection of a term that goes on: %v", err)
		}
	}

	// The term ends.
	tv.token.Store(0)
	leader.p.CloseEndedTerms()
	for name, u := range map[string]*upgrading{"direct": direct, "through the follower": via} {
		if err := endsWithin(u.r, bound); err != nil {
			t.Errorf("the upgraded connection %s, once its term ended: %v", name, err)
		}
	}
	if err := endsWithin(events, bound); err != nil {
		t.Errorf("the event stream, once its term ended: %v", err)
	}
	close(app.release)
	if got := <-slow; got.status != 200 || got.body != "done" {
		t.Errorf("the request waiting for its answer when the term ended: %d %q, want 200 done", got.status, got.body)
	}

	// An upgrade the app accepts after the term it was forwarded under ended.
	tv.token.Store(501)
	open := app.closeGate()
	late := sendUpgrade(t, leader.addr())
	eventually(t, "the late upgrade to reach the app", func() bool { return len(app.requests()) == 5 })
	tv.token.Store(0)
	leader.p.CloseEndedTerms()
	open()
	if err := endsWithin(late.r, bound); err != nil {
		t.Errorf("an upgrade accepted after its term ended: %v", err)
	}
}
