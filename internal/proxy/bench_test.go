package proxy

import (
	"context"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"
)

// BenchmarkProxy sends GET requests one at a time over a kept-alive
// connection to the same loopback app: direct, via the leader's Proxy (one
// hop) and via a follower's Proxy (two hops). ns/op is the mean latency;
// p50-µs and p99-µs are per request. The proxy's added latency is the
// difference between via-proxy and direct.
//
//	go test -run '^$' -bench BenchmarkProxy -benchtime 20000x -count 5 ./internal/proxy/
func BenchmarkProxy(b *testing.B) {
	app := newApp(b, "app")
	leader := newInstance(b, Config{Upstream: app.addr(), View: leading(1, 1)})
	follower := newInstance(b, Config{Upstream: "127.0.0.1:1", View: following(leader.addr())})
	app.handle(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "ok")
	})
	for _, bc := range []struct{ name, url string }{
		{"direct", app.srv.URL + "/"},
		{"via-proxy", leader.url() + "/"},
		{"via-follower", follower.url() + "/"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := newClient(b)
			req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, bc.url, nil)
			if err != nil {
				b.Fatal(err)
			}
			send := func() {
				res, err := c.Transport.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, res.Body)
				_ = res.Body.Close()
				if res.StatusCode != http.StatusOK {
					b.Fatalf("%s: %s", bc.url, res.Status)
				}
			}
			send() // a kept-alive connection
			took := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				send()
				took = append(took, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(took)
			b.ReportMetric(float64(quantile(took, 0.50))/1e3, "p50-µs")
			b.ReportMetric(float64(quantile(took, 0.99))/1e3, "p99-µs")
		})
	}
}

// quantile is the nearest-rank q-quantile of sorted d.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(max(int(q*float64(len(sorted))+0.5)-1, 0), len(sorted)-1)]
}
