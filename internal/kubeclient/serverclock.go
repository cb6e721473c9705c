package kubeclient

import (
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/utils/clock"

	"github.com/leasehold/leasehold/internal/clockskew"
)

// serverSamples is how many of the newest responses ServerClock bounds the
// offset from: with a renewal every retry period (2s by default) about
// two minutes of them, over which the clocks' drift (clockskew.ServerDrift)
// widens the oldest interval by a tenth of a millisecond.
const serverSamples = 64

// ServerClock bounds the apiserver's wall-clock offset from this
// instance's, from the Date header of every response sent through the
// transports it wraps (clockskew.BoundServerOffset over the newest
// serverSamples). It is safe for concurrent use: the transports record,
// readers (the status handler, a scrape) take Offset.
type ServerClock struct {
	clock clock.PassiveClock

	mu      sync.Mutex
	samples []clockskew.ServerSample // the newest, oldest first
}

// NewServerClock returns a ServerClock reading clk (nil: the real clock)
// around each round trip.
func NewServerClock(clk clock.PassiveClock) *ServerClock {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &ServerClock{clock: clk}
}

// Wrap returns a RoundTripper that sends each request through rt and
// records, for a response with a valid Date header, when the request was
// sent and the headers arrived. Its signature fits rest.Config.Wrap.
func (c *ServerClock) Wrap(rt http.RoundTripper) http.RoundTripper {
	return &dateRoundTripper{clock: c, next: rt}
}

// Offset is the current bound, false before any response carried a Date.
func (c *ServerClock) Offset() (clockskew.ServerOffset, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return clockskew.BoundServerOffset(c.samples)
}

func (c *ServerClock) record(s clockskew.ServerSample) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.samples) == serverSamples {
		c.samples = append(c.samples[:0], c.samples[1:]...)
	}
	c.samples = append(c.samples, s)
}

// offsetDesc is leasehold_apiserver_clock_offset_seconds.
var offsetDesc = prometheus.NewDesc("leasehold_apiserver_clock_offset_seconds",
	"Bounds on the apiserver's wall-clock offset from this instance's (apiserver minus local), from the Date headers of its responses (whole seconds) and each request's round trip: bound=lower and bound=upper. Absent before the first response.",
	[]string{"bound"}, nil)

// Describe implements prometheus.Collector.
func (c *ServerClock) Describe(ch chan<- *prometheus.Desc) { ch <- offsetDesc }

// Collect implements prometheus.Collector: the two bounds, nothing before
// the first response.
func (c *ServerClock) Collect(ch chan<- prometheus.Metric) {
	off, ok := c.Offset()
	if !ok {
		return
	}
	ch <- prometheus.MustNewConstMetric(offsetDesc, prometheus.GaugeValue, off.Lower.Seconds(), "lower")
	ch <- prometheus.MustNewConstMetric(offsetDesc, prometheus.GaugeValue, off.Upper.Seconds(), "upper")
}

// dateRoundTripper is the RoundTripper returned by ServerClock.Wrap.
type dateRoundTripper struct {
	clock *ServerClock
	next  http.RoundTripper
}

var _ utilnet.RoundTripperWrapper = (*dateRoundTripper)(nil)

func (d *dateRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	sent := d.clock.clock.Now()
	resp, err := d.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	received := d.clock.clock.Now()
	if date, perr := http.ParseTime(resp.Header.Get("Date")); perr == nil {
		d.clock.record(clockskew.ServerSample{Sent: sent, Received: received, Date: date})
	}
	return resp, nil
}

// WrappedRoundTripper returns the RoundTripper beneath.
func (d *dateRoundTripper) WrappedRoundTripper() http.RoundTripper { return d.next }
