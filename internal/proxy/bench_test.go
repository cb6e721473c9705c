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

// MeasureOverhead returns sane figures and leaves nothing running (the
// package's leak check).
func TestMeasureOverhead(t *testing.T) {
	o, err := MeasureOverhead(context.Background(), 200)
	if err != nil {
		t.Fatal(err)
	}
	for name, l := range map[string]Latency{"direct": o.Direct, "proxied": o.Proxied, "forwarded": o.Forwarded} {
		if l.P50 <= 0 || l.P99 < l.P50 {
			t.Errorf("%s: %+v", name, l)
		}
	}
	if o.Requests != 200 {
		t.Errorf("Requests = %d", o.Requests)
	}
	t.Logf("n=%d direct %v/%v, via the leader's proxy %v/%v (added %v/%v), via a follower %v/%v",
		o.Requests, o.Direct.P50, o.Direct.P99, o.Proxied.P50, o.Proxied.P99, o.AddedP50(), o.AddedP99(), o.Forwarded.P50, o.Forwarded.P99)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := MeasureOverhead(ctx, 10); err == nil {
		t.Error("MeasureOverhead with a cancelled context succeeded")
	}
	if _, err := MeasureOverhead(context.Background(), 0); err == nil {
		t.Error("MeasureOverhead(0) succeeded")
	}
}
