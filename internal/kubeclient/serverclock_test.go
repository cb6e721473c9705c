package kubeclient

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// A server whose clock is 3s ahead: every response's Date says so, and
// the bounds contain 3s and narrow well below one sample's second; a
// response without Date records nothing; the window keeps the newest.
func TestServerClockBoundsTheOffsetFromDateHeaders(t *testing.T) {
	const ahead = 3 * time.Second
	dated := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if dated {
			w.Header().Set("Date", time.Now().Add(ahead).UTC().Format(http.TimeFormat))
		} else {
			w.Header()["Date"] = nil // net/http adds none
		}
	}))
	defer srv.Close()
	c := NewServerClock(nil)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	series := func() int {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, f := range families {
			n += len(f.GetMetric())
		}
		return n
	}
	client := &http.Client{Transport: c.Wrap(http.DefaultTransport)}
	get := func() {
		t.Helper()
		resp, err := client.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}

	dated = false
	get()
	if _, ok := c.Offset(); ok {
		t.Fatal("an offset from a response without Date")
	}
	if n := series(); n != 0 {
		t.Errorf("%d series before any Date, want none", n)
	}
	dated = true
	for range serverSamples + 6 {
		get()
		time.Sleep(37 * time.Millisecond) // spreads the samples' phases within the second
	}
	off, ok := c.Offset()
	if !ok {
		t.Fatal("no offset")
	}
	if !(off.Lower < ahead && ahead < off.Upper) {
		t.Errorf("bounds (%v, %v) do not contain %v", off.Lower, off.Upper, ahead)
	}
	// Phases 37ms apart across two seconds: the intersection is about one
	// step plus a round trip wide, far less than one sample's second.
	if w := off.Upper - off.Lower; w > 500*time.Millisecond {
		t.Errorf("width %v: the samples did not narrow it", w)
	}
	if off.Samples != serverSamples {
		t.Errorf("from %d samples, want the window's %d", off.Samples, serverSamples)
	}
	if n := series(); n != 2 {
		t.Errorf("%d series, want bound=lower and bound=upper", n)
	}
}
