package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
)

// pacedRate is the offered load at which GET /v1/status latency is judged:
// the throughput target.
const pacedRate = 20000

// httpFigures are the HTTP API's figures, measured on one real sidecar.
type httpFigures struct {
	statusConns     int
	statusRate      float64 // requests per second
	statusLatencies []time.Duration
	pacedRate       float64 // achieved rate under an offered load of pacedRate
	pacedLatencies  []time.Duration
	watchers        int
	wakeLatencies   []time.Duration // lease change → each watcher answered
	rssIdle         int64           // bytes
	rssWatchers     int64
}

// benchHTTP runs one sidecar that follows a Lease held by hand with a long
// duration, so it never campaigns, and measures: GET /v1/status throughput
// and latency with conns keep-alive connections; RSS idle; RSS with
// `watchers` open watchers (half long-polls, half SSE streams); and, over
// `changes` changes of the Lease's holder written by an admin, the time
// from just before each write until every watcher has its answer.
func benchHTTP(ctx context.Context, cluster *kubetest.Cluster, base fleet.Config, conns, watchers, changes int, load time.Duration) (httpFigures, error) {
	f := httpFigures{statusConns: conns, watchers: watchers}
	ns, err := cluster.CreateNamespace(ctx, "bench-http")
	if err != nil {
		return f, err
	}
	leases := cluster.Clientset().CoordinationV1().Leases(ns)
	now := metav1.NowMicro()
	if _, err := leases.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "held"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("holder-0"), LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime: &now, RenewTime: &now,
		},
	}, metav1.CreateOptions{}); err != nil {
		return f, err
	}
	cfg := base
	cfg.Namespace, cfg.Lease = ns, "held"
	cfg.Env = append(slices.Clone(cfg.Env), watchersBound(watchers))
	inst, err := cfg.Start(ctx, "http-bench", false)
	if err != nil {
		return f, err
	}
	defer inst.Stop()

	time.Sleep(2 * time.Second) // let the process settle before reading its idle RSS (a measurement, not a synchronisation)
	if f.rssIdle, err = rss(inst.PID()); err != nil {
		return f, err
	}
	if f.statusRate, f.statusLatencies, err = loadStatus(ctx, inst.APIURL, conns, load, 0); err != nil {
		return f, err
	}
	if f.pacedRate, f.pacedLatencies, err = loadStatus(ctx, inst.APIURL, conns, load, pacedRate); err != nil {
		return f, err
	}

	w := newWatcherPool(inst.APIURL, watchers)
	defer w.close()
	if err := w.open(ctx); err != nil {
		return f, err
	}
	if f.rssWatchers, err = rss(inst.PID()); err != nil {
		return f, err
	}
	for i := range changes {
		sent := time.Now()
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			l, err := leases.Get(ctx, "held", metav1.GetOptions{})
			if err != nil {
				return err
			}
			renew := metav1.NowMicro()
			l.Spec.HolderIdentity, l.Spec.RenewTime = ptr.To(fmt.Sprintf("holder-%d", i+1)), &renew
			_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
			return err
		}); err != nil {
			return f, err
		}
		arrivals, err := w.awaitAll(ctx, 30*time.Second)
		if err != nil {
			return f, err
		}
		for _, at := range arrivals {
			f.wakeLatencies = append(f.wakeLatencies, at.Sub(sent))
		}
	}
	return f, nil
}

// loadStatus sends GET /v1/status over conns keep-alive connections for d
// and returns the achieved rate and every latency. With rate 0 each
// connection sends its next request as soon as the last one is answered
// (maximum throughput). With a rate, requests are sent on a fixed schedule
// spread over the connections, and latency is counted from each request's
// scheduled time, so a slow answer that delays the next request is not
// hidden (no coordinated omission).
func loadStatus(ctx context.Context, apiURL string, conns int, d time.Duration, rate float64) (float64, []time.Duration, error) {
	transport := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	perConn := make([][]time.Duration, conns)
	errs := make(chan error, conns)
	var wg sync.WaitGroup
	interval := time.Duration(0) // between one connection's requests
	if rate > 0 {
		interval = time.Duration(float64(conns) / rate * float64(time.Second))
	}
	start := time.Now()
	for c := range conns {
		wg.Go(func() {
			next := start.Add(interval * time.Duration(c) / time.Duration(conns))
			for ctx.Err() == nil {
				t := time.Now()
				if interval > 0 {
					if wait := time.Until(next); wait > 0 {
						select {
						case <-time.After(wait):
						case <-ctx.Done():
							return
						}
					}
					t, next = next, next.Add(interval)
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, apiURL+"/v1/status", nil)
				resp, err := client.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("status %d", resp.StatusCode)
					return
				}
				perConn[c] = append(perConn[c], time.Since(t))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return 0, nil, err
	}
	all := slices.Concat(perConn...)
	return float64(len(all)) / elapsed.Seconds(), all, nil
}

// watcherPool holds open watchers: even ones long-poll /v1/watch, odd ones
// read an SSE stream. Each reports the arrival of every new index.
type watcherPool struct {
	apiURL   string
	n        int
	client   *http.Client
	arrivals chan arrival
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

type arrival struct {
	index uint64
	at    time.Time
}

// watchersBound is the setting that lets a sidecar serve n watchers on its
// API listener, with room for 100 more blocking requests of the bench's
// own: its bound of blocking requests per listener
// (LEASEHOLD_MAX_BLOCKING_REQUESTS, 300 by default) is below the
// benchmarks' 1,000 watchers. It changes nothing
// else, so what each watcher costs is what the figures measure. Other
// implementations ignore it.
func watchersBound(n int) string {
	return "LEASEHOLD_MAX_BLOCKING_REQUESTS=" + strconv.Itoa(n+100)
}

func newWatcherPool(apiURL string, n int) *watcherPool {
	return &watcherPool{
		apiURL:   apiURL,
		n:        n,
		client:   &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}},
		arrivals: make(chan arrival, 4*n),
	}
}

// open starts the watchers and returns once every one is connected and
// has read the current index.
func (p *watcherPool) open(ctx context.Context) error {
	ctx, p.cancel = context.WithCancel(ctx)
	ready := make(chan error, p.n)
	for i := range p.n {
		if i%2 == 0 {
			p.wg.Go(func() { p.longPoll(ctx, ready) })
		} else {
			p.wg.Go(func() { p.sse(ctx, ready) })
		}
	}
	for range p.n {
		if err := <-ready; err != nil {
			return err
		}
	}
	// Connections the long-polls' first requests left idle would hold a
	// goroutine and buffers in the server besides the watchers'.
	p.client.CloseIdleConnections()
	return nil
}

func (p *watcherPool) longPoll(ctx context.Context, ready chan<- error) {
	index, err := p.status(ctx, "/v1/status")
	ready <- err
	for err == nil {
		// The blocking request is sent before the change; it answers with
		// the new index.
		var next uint64
		next, err = p.status(ctx, "/v1/watch?wait=5m&index="+strconv.FormatUint(index, 10))
		if err == nil && next != index {
			p.arrivals <- arrival{index: next, at: time.Now()}
			index = next
		}
	}
}

func (p *watcherPool) status(ctx context.Context, path string) (uint64, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.apiURL+path, nil)
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK { // e.g. 503 while the sidecar shuts down: no index
		return 0, fmt.Errorf("GET %s: status %d", path, resp.StatusCode)
	}
	var st struct {
		Index uint64 `json:"index"`
	}
	return st.Index, json.NewDecoder(resp.Body).Decode(&st)
}

func (p *watcherPool) sse(ctx context.Context, ready chan<- error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.apiURL+"/v1/watch?wait=10m", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := p.client.Do(req)
	if err != nil {
		ready <- err
		return
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	first := true
	for lines.Scan() {
		id, ok := strings.CutPrefix(lines.Text(), "id: ")
		if !ok {
			continue
		}
		at := time.Now()
		if first {
			ready <- nil // the current state arrived: connected
			first = false
			continue
		}
		index, _ := strconv.ParseUint(id, 10, 64)
		p.arrivals <- arrival{index: index, at: at}
	}
	if first {
		ready <- fmt.Errorf("SSE stream ended before its first event: %v", lines.Err())
	}
}

// awaitAll collects one arrival per watcher.
func (p *watcherPool) awaitAll(ctx context.Context, limit time.Duration) ([]time.Time, error) {
	deadline := time.After(limit)
	var at []time.Time
	for len(at) < p.n {
		select {
		case a := <-p.arrivals:
			at = append(at, a.at)
		case <-deadline:
			return nil, fmt.Errorf("only %d of %d watchers answered within %v", len(at), p.n, limit)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return at, nil
}

func (p *watcherPool) close() {
	if p.cancel != nil {
		p.cancel()
	}
	p.wg.Wait()
}

// rss reads a process's resident set size from /proc.
func rss(pid int) (int64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}
