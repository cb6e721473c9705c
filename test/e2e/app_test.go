package e2e

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/testing/poll"
)

// Health-gated candidacy (scenario 11): every gated member probes its own
// fake app, served from this test process, whose answers the scenario sets.

// Health-check settings of the gated members: well inside the lease timings,
// so that a health withdrawal is visibly faster than an expiry.
const (
	appInterval  = 200 * time.Millisecond // LEASEHOLD_APP_HEALTH_INTERVAL
	appTimeout   = 100 * time.Millisecond // LEASEHOLD_APP_HEALTH_TIMEOUT
	appThreshold = 2                      // LEASEHOLD_APP_HEALTH_FAILURE_THRESHOLD

	// healthWithdrawBound: an app that fails from t on has failed its
	// sidecar's first probe by t + interval + timeout (the next tick comes
	// within one interval) and the threshold-th by t + threshold × interval
	// + timeout; the leader steps down as soon as that probe ends.
	healthWithdrawBound = appThreshold*appInterval + appTimeout
	// healthFailoverBound: then it releases the Lease, which a candidate
	// with a healthy app takes within a handover. It is below
	// leaseDuration − retryPeriod, the earliest a takeover by expiry could
	// happen after the fault (the leader renewed at most retryPeriod
	// before it), so meeting it proves a release, not an expiry.
	healthFailoverBound = healthWithdrawBound + handoverBound
	// healthReturnBound: an app that answers 2xx again from t on has passed
	// a probe by t + interval + timeout (one success is enough).
	healthReturnBound = appInterval + appTimeout + schedulingSlack
	// withdrawWindow is how long before a withdrawn term's last leader:true
	// answer its app may have started failing (see termInfo.released).
	withdrawWindow = healthWithdrawBound + schedulingSlack
)

// appMode is what a fake app does with its sidecar's health probes.
type appMode int

const (
	appHealthy appMode = iota // 200
	appFailing                // 503
	appHanging                // no answer: the probe times out
	appCrashed                // no listener: connection refused
)

func (m appMode) String() string {
	return [...]string{"healthy", "503", "hanging", "crashed"}[m]
}

// appSpan is one mode of an app, from from until the next span's from.
type appSpan struct {
	mode appMode
	from time.Time
}

// fakeApp is the app beside one gated member: an HTTP server on a fixed
// loopback port whose /healthz answers as its mode says. A crash closes
// the listener and every open connection, so probes get "connection
// refused" as from a dead process; a restart listens again on the same
// address (Go sets SO_REUSEADDR, so connections in TIME_WAIT do not stop
// it), so the sidecar's LEASEHOLD_APP_HEALTH_URL stays right, as a restarted
// container's would. A plain net/http Server is used rather than httptest's
// because httptest cannot re-open a listener on the same address.
type fakeApp struct {
	name string
	addr string // host:port, the same across crashes
	URL  string

	mu       sync.Mutex
	mode     appMode
	srv      *http.Server // nil while crashed
	serving  sync.WaitGroup
	spans    []appSpan // every mode set, in order
	firstOK  time.Time // when the first 200 was decided; zero before
	lastOK   time.Time // when the latest 200 was decided
	answered map[appMode]int
	quit     chan struct{} // closed by close: hanging handlers return
	closed   bool
}

// newFakeApp starts a fake app in mode and stops it when t ends.
func newFakeApp(t testing.TB, name string, mode appMode) *fakeApp {
	t.Helper()
	// A loopback address of its own: while the app is crashed, nothing
	// else (no listener, no outgoing connection from 127.0.0.1) can take
	// the port it restarts on.
	ln, err := net.Listen("tcp", "127.0.83.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := &fakeApp{
		name:     name,
		addr:     ln.Addr().String(),
		answered: map[appMode]int{},
		quit:     make(chan struct{}),
		mode:     mode,
		spans:    []appSpan{{mode, time.Now()}},
	}
	a.URL = "http://" + a.addr + "/healthz"
	if mode == appCrashed {
		ln.Close()
	} else {
		a.serve(ln)
	}
	t.Cleanup(a.close)
	return a
}

// env is the gated member's LEASEHOLD_APP_HEALTH_* settings.
func (a *fakeApp) env() []string {
	return []string{
		"LEASEHOLD_APP_HEALTH_URL=" + a.URL,
		"LEASEHOLD_APP_HEALTH_TIMEOUT=" + appTimeout.String(),
		"LEASEHOLD_APP_HEALTH_INTERVAL=" + appInterval.String(),
		"LEASEHOLD_APP_HEALTH_FAILURE_THRESHOLD=" + strconv.Itoa(appThreshold),
	}
}

// serve serves ln; a.mu held or a not shared yet.
func (a *fakeApp) serve(ln net.Listener) {
	srv := &http.Server{Handler: a, ReadHeaderTimeout: 5 * time.Second}
	a.srv = srv
	a.serving.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			panic(fmt.Sprintf("fake app: %v", err)) // Accept fails only when closed
		}
	})
}

// set switches the app to mode and returns when the switch began: from
// then on a probe may get the new answer. A crash has taken effect (no
// listener) when set returns, and so has a restart (listening again). The
// recorded span of a failing mode starts before the switch, that of the
// healthy mode after it, so that failingDuring never misses a failure. A
// restart that cannot listen again fails t.
func (a *fakeApp) set(t testing.TB, mode appMode) (time.Time, error) {
	at := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return at, errors.New("fake app closed")
	}
	switch {
	case mode == appCrashed && a.srv != nil:
		a.srv.Close() // the listener and every connection; Serve returns
		a.srv = nil
	case mode != appCrashed && a.srv == nil:
		a.serve(listenAgain(t, "the app of "+a.name, a.addr))
	}
	a.mode = mode
	from := at
	if mode == appHealthy {
		from = time.Now()
	}
	a.spans = append(a.spans, appSpan{mode, from})
	return at, nil
}

// listenAgain listens on addr for who, retrying while the old socket goes;
// it fails t after generousWait.
func listenAgain(t testing.TB, who, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	var err error
	poll.UntilReport(t, generousWait, 10*time.Millisecond, who+" listening again on "+addr, func() bool {
		ln, err = net.Listen("tcp", addr)
		return err == nil
	}, func() string { return err.Error() })
	return ln
}

// ServeHTTP answers a probe as the current mode says.
func (a *fakeApp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	mode := a.mode
	if mode == appHealthy {
		now := time.Now()
		if a.firstOK.IsZero() {
			a.firstOK = now
		}
		a.lastOK = now
	}
	a.answered[mode]++
	quit := a.quit
	a.mu.Unlock()
	switch mode {
	case appHealthy:
		w.WriteHeader(http.StatusOK)
	case appFailing:
		w.WriteHeader(http.StatusServiceUnavailable)
	case appHanging:
		select { // until the probe gives up (or much later: no answer then either)
		case <-r.Context().Done():
		case <-quit:
		case <-time.After(time.Minute):
		}
		panic(http.ErrAbortHandler) // close without an answer
	case appCrashed:
		// A connection accepted just before the crash: it dies with it.
		panic(http.ErrAbortHandler)
	}
}

// failingDuring reports whether the app was set to a failing mode at some
// instant of [lo, hi].
func (a *fakeApp) failingDuring(lo, hi time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, s := range a.spans {
		if s.mode == appHealthy || s.from.After(hi) {
			continue
		}
		if i+1 == len(a.spans) || a.spans[i+1].from.After(lo) {
			return true
		}
	}
	return false
}

// oks returns when the app first and last decided to answer 200 (zero if
// never).
func (a *fakeApp) oks() (first, last time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.firstOK, a.lastOK
}

// answers describes how the app answered probes and how often the test set
// each mode.
func (a *fakeApp) answers() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	set := map[appMode]int{}
	for _, s := range a.spans[1:] {
		set[s.mode]++
	}
	return fmt.Sprintf("%s answered %d×200, %d×503, %d hung, %d aborted by a crash; set %d× healthy, %d× 503, %d× hanging, %d× crashed",
		a.name, a.answered[appHealthy], a.answered[appFailing], a.answered[appHanging], a.answered[appCrashed],
		set[appHealthy], set[appFailing], set[appHanging], set[appCrashed])
}

// close stops the app for good and waits for its server to end.
func (a *fakeApp) close() {
	a.mu.Lock()
	if !a.closed {
		a.closed = true
		close(a.quit)
		if a.srv != nil {
			a.srv.Close()
			a.srv = nil
		}
	}
	a.mu.Unlock()
	a.serving.Wait()
}

var appSeed = flag.Uint64("appseed", 0, "seed of scenario 11's flapping schedule; 0 picks one per trial (logged)")

// allDown is a stretch of a flapping schedule in which no app answers 2xx.
type allDown struct {
	from, to time.Time             // every app failing throughout
	lastOK   map[*member]time.Time // each app's latest 200 before from
}

// flapper drives the gated members' apps through a seeded random schedule.
type flapper struct {
	e       *env
	members []*member
	rng     *rand.Rand
	down    []allDown
	changes int
}

func newFlapper(e *env, members []*member) *flapper {
	seed := *appSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	e.t.Logf("flapping schedule: seed %d (replay: go test -run TestAppHealth ./test/e2e -args -appseed=%d)", seed, seed)
	return &flapper{e: e, members: members, rng: rand.New(rand.NewPCG(seed, 0))}
}

func (f *flapper) set(m *member, mode appMode) time.Time {
	f.e.t.Helper()
	at, err := m.app.set(f.e.t, mode)
	if err != nil {
		f.e.t.Fatal(err)
	}
	f.changes++
	return at
}

// failure picks one of the failing modes.
func (f *flapper) failure() appMode {
	return []appMode{appFailing, appHanging, appCrashed}[f.rng.IntN(3)]
}

// flap switches every app, independently, to a random mode (healthy half
// the time) for a random slot of interval/2 to 2 × interval, again and
// again for d.
func (f *flapper) flap(d time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		for _, m := range f.members {
			mode := appHealthy
			if f.rng.IntN(2) == 0 {
				mode = f.failure()
			}
			f.set(m, mode)
		}
		slot := appInterval/2 + time.Duration(f.rng.Int64N(int64(appInterval*3/2)))
		time.Sleep(slot)
	}
}

// allDown fails every app (each in a random failing mode) for d.
func (f *flapper) allDown(d time.Duration) {
	for _, m := range f.members {
		f.set(m, f.failure())
	}
	s := allDown{from: time.Now(), lastOK: map[*member]time.Time{}}
	time.Sleep(d)
	s.to = time.Now() // before any app answers 2xx again
	for _, m := range f.members {
		_, s.lastOK[m] = m.app.oks()
	}
	f.down = append(f.down, s)
}

// checkAllDown checks, from the observer's samples, that in every stretch
// with no healthy app each member withdrew within healthWithdrawBound (plus
// slack) of its start, and that none led again before the stretch ended. A
// member has certainly withdrawn for good when one answer says it is no
// candidate and that its app is unhealthy after a probe that completed
// later than the app's last 200: that 200 has been seen, and no other comes
// until the stretch ends.
func (f *flapper) checkAllDown(samples []sample) {
	e := f.e
	for i, s := range f.down {
		for _, m := range f.members {
			var withdrawn *sample
			for j := range samples {
				o := &samples[j]
				if o.m != m || !o.recv.After(s.from) || !o.recv.Before(s.to) {
					continue
				}
				if withdrawn == nil {
					if h := o.st.AppHealth; h != nil && !o.st.Candidate && !o.st.Leader && !h.Healthy {
						if checked, err := parseTime(h.LastCheckAt); err == nil && checked.After(s.lastOK[m]) {
							withdrawn = o
						}
					}
					continue
				}
				if o.st.Leader && o.sent.After(withdrawn.recv) {
					e.t.Errorf("no app healthy since %s, %s withdrew (%s), yet leads again: %s", clock(s.from), m.Name, withdrawn, o)
					break
				}
			}
			bound := healthWithdrawBound + schedulingSlack
			switch {
			case withdrawn == nil:
				e.t.Errorf("no app healthy from %s to %s (%v): %s never reported that it withdrew", clock(s.from), clock(s.to), s.to.Sub(s.from).Round(time.Millisecond), m.Name)
			case withdrawn.recv.Sub(s.from) > bound:
				e.t.Errorf("no app healthy from %s: %s withdrew only after %v, bound %v", clock(s.from), m.Name, withdrawn.recv.Sub(s.from), bound)
			default:
				e.t.Logf("all apps down (stretch %d): %s out of the election after %v (bound %v)", i+1, m.Name, withdrawn.recv.Sub(s.from).Round(time.Millisecond), bound)
			}
		}
	}
}
