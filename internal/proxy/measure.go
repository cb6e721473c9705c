package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Latency is the p50 and p99 of one way of sending requests.
type Latency struct {
	P50, P99 time.Duration
}

// Overhead is what MeasureOverhead measured: the latencies of requests sent
// straight to an app on loopback, through a leader's Proxy to it, and
// through a follower's Proxy and then the leader's, n of each.
type Overhead struct {
	Requests int // per way
	Direct   Latency
	// Proxied is through the leader's Proxy (one hop).
	Proxied Latency
	// Forwarded is through a follower's Proxy and the leader's (two hops).
	Forwarded Latency
}

// AddedP50 and AddedP99 are what the leader's Proxy adds to calling the
// app directly, at the same percentile.
func (o Overhead) AddedP50() time.Duration { return o.Proxied.P50 - o.Direct.P50 }
func (o Overhead) AddedP99() time.Duration { return o.Proxied.P99 - o.Direct.P99 }

// MeasureOverhead measures the latency the proxy adds, in one process, on
// loopback: it starts a stand-in app (it answers every request 200 with a
// 2-byte body), a Proxy whose View always leads in front of it, and a
// Proxy whose View follows with the first as the leader, each on its own
// HTTP server, then sends n GET requests each way (direct, via the leader's
// Proxy, via the follower's), one at a time and interleaved (direct,
// proxied, forwarded, direct, ...), so that the three ways share the
// machine's noise, over kept-alive connections (after one warm-up
// request each). It times each request from sending to the last byte of
// the body. Everything it started is stopped when it returns. It stops
// early with ctx's error.
func MeasureOverhead(ctx context.Context, n int) (Overhead, error) {
	if n < 1 {
		return Overhead{}, fmt.Errorf("%s: MeasureOverhead needs n ≥ 1, got %d", component, n)
	}
	var (
		servers []*http.Server
		serving sync.WaitGroup
	)
	serve := func(h http.Handler) (string, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: time.Minute}
		servers = append(servers, srv)
		serving.Go(func() { _ = srv.Serve(ln) })
		return ln.Addr().String(), nil
	}
	var proxies []*Proxy
	client := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4, DisableCompression: true}
	defer func() {
		client.CloseIdleConnections()
		for _, s := range servers {
			stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if s.Shutdown(stop) != nil {
				_ = s.Close()
			}
			cancel()
		}
		serving.Wait()
		for _, p := range proxies {
			p.CloseIdleConnections()
		}
	}()

	app, err := serve(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "ok")
	}))
	if err != nil {
		return Overhead{}, err
	}
	leader, err := New(Config{Upstream: app, Lease: "bench/overhead", View: func(time.Time) View { return View{Leading: true, Token: 1, Term: 1} }})
	if err != nil {
		return Overhead{}, err
	}
	proxies = append(proxies, leader)
	leaderAddr, err := serve(leader)
	if err != nil {
		return Overhead{}, err
	}
	follower, err := New(Config{Upstream: app, Lease: "bench/overhead", View: func(time.Time) View { return View{LeaderAddress: leaderAddr} }})
	if err != nil {
		return Overhead{}, err
	}
	proxies = append(proxies, follower)
	followerAddr, err := serve(follower)
	if err != nil {
		return Overhead{}, err
	}

	targets := []string{"http://" + app + "/", "http://" + leaderAddr + "/", "http://" + followerAddr + "/"}
	took := make([][]time.Duration, len(targets))
	for i := range took {
		took[i] = make([]time.Duration, 0, n)
	}
	one := func(url string) (time.Duration, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, err
		}
		start := time.Now()
		res, err := client.RoundTrip(req)
		if err != nil {
			return 0, err
		}
		_, err = io.Copy(io.Discard, res.Body)
		d := time.Since(start)
		_ = res.Body.Close()
		if err == nil && res.StatusCode != http.StatusOK {
			err = errors.New(url + ": " + res.Status)
		}
		return d, err
	}
	for _, url := range targets { // warm-up: a kept-alive connection each
		if _, err := one(url); err != nil {
			return Overhead{}, err
		}
	}
	for range n {
		for i, url := range targets {
			d, err := one(url)
			if err != nil {
				return Overhead{}, err
			}
			took[i] = append(took[i], d)
		}
	}
	lat := func(d []time.Duration) Latency {
		slices.Sort(d)
		return Latency{P50: quantile(d, 0.50), P99: quantile(d, 0.99)}
	}
	return Overhead{Requests: n, Direct: lat(took[0]), Proxied: lat(took[1]), Forwarded: lat(took[2])}, nil
}

// quantile is the nearest-rank q-quantile of sorted d (the bench's rule).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(max(int(q*float64(len(sorted))+0.5)-1, 0), len(sorted)-1)]
}
