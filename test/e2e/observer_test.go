package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/httpapi"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
)

const (
	// sampleEvery is the pause between two samples of one instance.
	sampleEvery = 5 * time.Millisecond
	// sampleTimeout bounds one GET /v1/status. An instance that does not
	// answer in time (SIGSTOPped, say) gives no sample.
	sampleTimeout = 250 * time.Millisecond
)

// sample is one answer of GET /v1/status. The instance computed it at some
// instant within [sent, recv], both read from this process's clock.
type sample struct {
	m          *member
	seq        int // order among m's samples (one sampler per member: sequential)
	sent, recv time.Time
	st         httpapi.Status
	validUntil time.Time // parsed st.ValidUntil; zero when absent
	acquiredAt time.Time // parsed st.AcquiredAt; zero when absent
}

func (s sample) String() string {
	return fmt.Sprintf("%s [%s, %s] leader=%v token=%d acquiredAt=%s validUntil=%s validForMs=%d holder=%q",
		s.m.Name, clock(s.sent), clock(s.recv), s.st.Leader, s.st.FencingToken,
		clock(s.acquiredAt), clock(s.validUntil), s.st.ValidForMs, s.st.Holder)
}

// clock formats t for messages: wall clock with microseconds.
func clock(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format("15:04:05.000000")
}

// observer samples the status of every member it watches, each in its own
// goroutine, from Watch until Stop, and records unexpected exits.
type observer struct {
	client *http.Client
	stop   chan struct{}
	wg     sync.WaitGroup

	mu       sync.Mutex
	samples  []sample
	perCount map[*member]int
	problems []string // undecodable answers, unexpected exits
}

func newObserver() *observer {
	transport := &http.Transport{MaxIdleConnsPerHost: 2, DisableCompression: true}
	return &observer{
		client:   &http.Client{Transport: transport},
		stop:     make(chan struct{}),
		perCount: map[*member]int{},
	}
}

// Watch samples m until m exits or the observer stops.
func (o *observer) Watch(m *member) {
	o.wg.Add(2)
	go func() { defer o.wg.Done(); o.sampleLoop(m) }()
	go func() { defer o.wg.Done(); o.exitWatch(m) }()
}

// Stop ends sampling and waits for the samplers.
func (o *observer) Stop() {
	close(o.stop)
	o.wg.Wait()
	o.client.Transport.(*http.Transport).CloseIdleConnections()
}

func (o *observer) sampleLoop(m *member) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-o.stop:
			return
		case <-m.Exited():
			return
		case <-timer.C:
		}
		o.sampleOnce(m)
		timer.Reset(sampleEvery)
	}
}

func (o *observer) sampleOnce(m *member) {
	ctx, cancel := context.WithTimeout(context.Background(), sampleTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.APIURL+"/v1/status", nil)
	if err != nil {
		panic(err) // a fixed, valid URL
	}
	sent := time.Now()
	resp, err := o.client.Do(req)
	if err != nil {
		return // paused, exiting or overloaded: no sample
	}
	defer resp.Body.Close()
	var st httpapi.Status
	err = json.NewDecoder(resp.Body).Decode(&st)
	recv := time.Now()
	if ctx.Err() != nil {
		return
	}
	if err != nil || resp.StatusCode != http.StatusOK {
		o.problem("%s: GET /v1/status: %d, %v", m.Name, resp.StatusCode, err)
		return
	}
	s := sample{m: m, sent: sent, recv: recv, st: st}
	if s.validUntil, err = parseTime(st.ValidUntil); err != nil {
		o.problem("%s: validUntil %q: %v", m.Name, st.ValidUntil, err)
		return
	}
	if s.acquiredAt, err = parseTime(st.AcquiredAt); err != nil {
		o.problem("%s: acquiredAt %q: %v", m.Name, st.AcquiredAt, err)
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	s.seq = o.perCount[m]
	o.perCount[m]++
	o.samples = append(o.samples, s)
}

func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	return time.Parse(time.RFC3339Nano, s)
}

// exitWatch records an exit the test did not cause.
func (o *observer) exitWatch(m *member) {
	select {
	case <-o.stop:
	case <-m.Exited():
		if !m.exitExpected() {
			o.problem("%s exited unexpectedly with status %d; log tail:\n%s", m.Name, m.ExitCode(), kubetest.LogTail(m.LogPath, 20))
		}
	}
}

func (o *observer) problem(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.problems = append(o.problems, fmt.Sprintf(format, args...))
}

// Samples returns a copy of every sample so far, in the order recorded.
func (o *observer) Samples() []sample {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]sample(nil), o.samples...)
}

// Problems returns what the observer found wrong besides the invariants.
func (o *observer) Problems() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.problems...)
}

// await returns the sample, among those received after after, with the
// earliest recv for which match holds, once one exists; or an error when ctx
// ends first.
func (o *observer) await(ctx context.Context, after time.Time, match func(sample) bool) (sample, error) {
	from := 0
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	for {
		o.mu.Lock()
		batch := o.samples[from:]
		from = len(o.samples)
		o.mu.Unlock()
		var best *sample
		for i := range batch {
			s := &batch[i]
			if s.recv.After(after) && match(*s) && (best == nil || s.recv.Before(best.recv)) {
				best = s
			}
		}
		if best != nil {
			return *best, nil
		}
		select {
		case <-ctx.Done():
			return sample{}, ctx.Err()
		case <-tick.C:
		}
	}
}
