package main_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/httpapi"
	"github.com/leasehold/leasehold/internal/testing/fleet"
)

// chartMemoryLimit is the leasehold container's memory limit in the chart
// (charts/leasehold/values.yaml, resources.limits.memory).
const chartMemoryLimit = 64 << 20

// rssOf is a process's resident memory (/proc/<pid>/smaps_rollup, Rss).
func rssOf(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "Rss:" && f[2] == "kB" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no Rss for pid %d", pid)
	return 0
}

// peakRSS samples the process's RSS 10 times, 200 ms apart, and returns
// the largest.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	var peak int64
	for range 10 {
		peak = max(peak, rssOf(t, pid))
		time.Sleep(200 * time.Millisecond)
	}
	return peak
}

// rssPeak samples a process's RSS every 5 ms, from start until stop, and
// returns the largest.
type rssPeak struct {
	stop chan struct{}
	peak chan int64
}

func sampleRSS(t *testing.T, pid int) *rssPeak {
	t.Helper()
	p := &rssPeak{stop: make(chan struct{}), peak: make(chan int64, 1)}
	go func() {
		var peak int64
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			if data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm"); err == nil {
				if f := strings.Fields(string(data)); len(f) > 1 {
					pages, _ := strconv.ParseInt(f[1], 10, 64)
					peak = max(peak, pages*int64(os.Getpagesize()))
				}
			}
			select {
			case <-p.stop:
				p.peak <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return p
}

// end stops the sampling and returns the peak.
func (p *rssPeak) end() int64 {
	close(p.stop)
	return <-p.peak
}

// rawRequest opens a connection to the listener of base (http://host:port)
// and sends GET path on it, with Accept: text/event-stream when sse, and
// returns the connection without reading: the test process keeps almost
// nothing per connection (no goroutine, no buffer), so the sidecar's
// memory is what it measures.
func rawRequest(t *testing.T, base, path string, sse bool) net.Conn {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	accept := ""
	if sse {
		accept = "Accept: text/event-stream\r\n"
	}
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", path, u.Host, accept); err != nil {
		t.Fatal(err)
	}
	return c
}

// awaitMetric polls inst's metric name (summed) until it is want.
func awaitMetric(t *testing.T, inst *fleet.Instance, name string, labels map[string]string, want float64) {
	t.Helper()
	var m fleet.Metrics
	var err error
	eventually(t, fmt.Sprintf("%s%v = %v", name, labels, want), func() bool {
		m, err = inst.Metrics(t.Context())
		return err == nil && m.Sum(name, labels) == want
	}, func() string {
		if err != nil {
			return err.Error()
		}
		return fmt.Sprintf("%s%v = %v", name, labels, m.Sum(name, labels))
	})
}

// answeredAndClosed reads the answer on c, checks it with check, and then
// that the sidecar closes the connection: nothing of it stays open.
func answeredAndClosed(c net.Conn, check func(resp *http.Response, body []byte) error) error {
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if err := check(resp, body); err != nil {
		return err
	}
	if n, err := br.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		return fmt.Errorf("after the answer: read %d bytes, %v; want the connection closed (EOF)", n, err)
	}
	return nil
}

// tooMany checks the refusal of a blocking request beyond the bound.
func tooMany(resp *http.Response, body []byte) error {
	var e struct{ Error, Code string }
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "5" ||
		json.Unmarshal(body, &e) != nil || e.Code != "too_many_blocking_requests" {
		return fmt.Errorf("%d, Retry-After %q, %s; want 503 too_many_blocking_requests with Retry-After 5", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	return nil
}

// ok checks a 200.
func ok(resp *http.Response, body []byte) error {
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%d %s, want 200", resp.StatusCode, body)
	}
	return nil
}

// kernelPerConnection is what the kernel holds for each open connection of
// the sidecar's, charged to its container's memory beside the RSS (slab:
// the socket, its file, inode, dentry and epoll entry). Measured on this
// machine's kernel: 5.0 KiB per socket, from /proc/meminfo's Slab with
// 2,000 loopback connections open (docs/using.md, "Bounded blocking
// requests").
const kernelPerConnection = 5 << 10

// The bound of blocking requests keeps a sidecar at its defaults inside
// the chart's memory limit however many connections arrive, on the real
// binary over real connections: with both listeners filled to the default
// bound (long-polls and SSE streams, half each), and then as many again
// refused on the OPS listener (which any pod may reach) and as many status
// requests answered there, the peak RSS plus the kernel's memory of the
// open connections stays below chartMemoryLimit. Each refusal is 503 with
// Retry-After and the JSON error, and every connection beyond the bound is
// closed once answered, so none leaves anything behind: the sidecar's
// goroutines and open files return to what the bound alone holds. The
// probes pass throughout.
func TestBlockingRequestsStayWithinTheChartMemoryLimit(t *testing.T) {
	f := newFleet(t)
	bound := httpapi.DefaultMaxBlockingRequests // LEASEHOLD_MAX_BLOCKING_REQUESTS unset, as in the chart
	inst, st := startLeader(t, f, "a")
	pid := inst.PID()
	idle := peakRSS(t, pid)

	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	sampler := sampleRSS(t, pid)
	current := strconv.FormatUint(st.Index, 10)
	for i := range bound {
		if i%2 == 1 {
			conns = append(conns, rawRequest(t, inst.APIURL, "/v1/watch", true), rawRequest(t, inst.OpsURL, "/v1/leases", true))
		} else {
			conns = append(conns, rawRequest(t, inst.APIURL, "/v1/watch?wait=10m&index="+current, false),
				rawRequest(t, inst.OpsURL, "/v1/leases?wait=10m&index="+current, false))
		}
	}
	awaitMetric(t, inst, "leasehold_watchers", nil, float64(2*bound))
	full := peakRSS(t, pid)
	m, err := inst.Metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	goroutines, fds := m.Sum("go_goroutines", nil), m.Sum("process_open_fds", nil)

	beyond := 2 * bound
	errs := make(chan error, 2*beyond)
	for batch := 0; batch < beyond; batch += 100 {
		var wg sync.WaitGroup
		for i := batch; i < min(batch+100, beyond); i++ {
			c := rawRequest(t, inst.OpsURL, "/v1/leases?wait=10m&index="+current, i%2 == 1)
			s := rawRequest(t, inst.OpsURL, "/v1/status", false)
			wg.Go(func() { errs <- answeredAndClosed(c, tooMany) })
			wg.Go(func() { errs <- answeredAndClosed(s, ok) })
		}
		for _, probe := range []string{"/livez", "/readyz"} {
			if err := answeredAndClosed(rawRequest(t, inst.OpsURL, probe, false), ok); err != nil {
				t.Fatalf("%s with the bound full: %v", probe, err)
			}
		}
		wg.Wait()
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	peak := sampler.end()
	awaitMetric(t, inst, "leasehold_blocking_requests_refused_total", map[string]string{"listener": "ops"}, float64(beyond))
	awaitMetric(t, inst, "leasehold_blocking_requests_refused_total", map[string]string{"listener": "api"}, 0)
	after := peakRSS(t, pid)

	kernel := int64(2*bound) * kernelPerConnection
	t.Logf("bound %d per listener; RSS idle %.1f MiB, with both listeners full %.1f MiB (%.1f KiB per blocking request), "+
		"peak through %d refused and %d status requests beyond it %.1f MiB (%.1f KiB per blocking request), after %.1f MiB; "+
		"with the kernel's %.1f MiB for the connections: %.1f MiB of the chart's %d MiB",
		bound, mib(idle), mib(full), float64(full-idle)/float64(2*bound)/1024, beyond, beyond, mib(peak),
		float64(peak-idle)/float64(2*bound)/1024, mib(after), mib(kernel), mib(peak+kernel), chartMemoryLimit>>20)
	if peak+kernel >= chartMemoryLimit {
		t.Errorf("peak RSS %.1f MiB + kernel %.1f MiB exceeds the chart's memory limit of %d MiB", mib(peak), mib(kernel), chartMemoryLimit>>20)
	}
	// Nothing of the connections beyond the bound stays: the goroutines and
	// the open files are those of the bound's (the scrapes' own connection
	// aside).
	var g, n float64
	eventually(t, "the connections beyond the bound gone", func() bool {
		m, err := inst.Metrics(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		g, n = m.Sum("go_goroutines", nil), m.Sum("process_open_fds", nil)
		return g <= goroutines+2 && n <= fds+2
	}, func() string {
		return fmt.Sprintf("%v goroutines, %v open files; with the bound full %v and %v", g, n, goroutines, fds)
	})
	// The bound frees as its requests end.
	conns[1].Close()
	awaitMetric(t, inst, "leasehold_watchers", nil, float64(2*bound-1))
	conns = append(conns, rawRequest(t, inst.OpsURL, "/v1/leases?wait=10m&index="+current, false))
	awaitMetric(t, inst, "leasehold_watchers", nil, float64(2*bound))
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
