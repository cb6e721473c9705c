package clockskew

import (
	"testing"
	"time"
)

// sampleAt is the response to a request sent at local time sent, answered
// rtt later, from an apiserver whose clock is offset ahead and reads its
// clock halfway through.
func sampleAt(sent time.Time, rtt, offset time.Duration) ServerSample {
	server := sent.Add(rtt / 2).Add(offset)
	return ServerSample{Sent: sent, Received: sent.Add(rtt), Date: server.Truncate(time.Second)}
}

func TestBoundServerOffset(t *testing.T) {
	const rtt = 4 * time.Millisecond
	for name, tc := range map[string]struct {
		samples     []ServerSample
		offset      time.Duration // the true offset the bounds must contain
		n           int
		widthAtMost time.Duration
	}{
		"one sample: a second plus the round trip": {
			samples: []ServerSample{sampleAt(t0.Add(300*time.Millisecond), rtt, 2*time.Second)},
			offset:  2 * time.Second, n: 1, widthAtMost: time.Second + rtt,
		},
		"phases across a second narrow it to a few round trips": {
			samples: func() []ServerSample {
				var s []ServerSample
				for i := range 40 {
					s = append(s, sampleAt(t0.Add(time.Duration(i)*527*time.Millisecond), rtt, -1500*time.Millisecond))
				}
				return s
			}(),
			offset: -1500 * time.Millisecond, n: 40, widthAtMost: 60 * time.Millisecond,
		},
		"a clock slewing at the limit stays inside the bounds": {
			samples: func() []ServerSample {
				var s []ServerSample
				for i := range 64 {
					at := time.Duration(i) * 2017 * time.Millisecond
					s = append(s, sampleAt(t0.Add(at), rtt, 300*time.Millisecond+time.Duration(ServerDrift*float64(at))))
				}
				return s
			}(),
			offset: 300*time.Millisecond + time.Duration(ServerDrift*float64(63*2017*time.Millisecond)), n: 64, widthAtMost: time.Second,
		},
		"a step: only the samples since it count": {
			samples: []ServerSample{
				sampleAt(t0, rtt, 0), sampleAt(t0.Add(2*time.Second), rtt, 0),
				sampleAt(t0.Add(4*time.Second), rtt, 5*time.Second), sampleAt(t0.Add(6*time.Second+400*time.Millisecond), rtt, 5*time.Second),
			},
			offset: 5 * time.Second, n: 2, widthAtMost: time.Second + rtt,
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, ok := BoundServerOffset(tc.samples)
			if !ok {
				t.Fatal("no bounds")
			}
			if !(got.Lower < tc.offset && tc.offset < got.Upper) {
				t.Errorf("bounds (%v, %v) do not contain the offset %v", got.Lower, got.Upper, tc.offset)
			}
			if got.Samples != tc.n {
				t.Errorf("from %d samples, want %d", got.Samples, tc.n)
			}
			if w := got.Upper - got.Lower; w > tc.widthAtMost {
				t.Errorf("width %v, want at most %v", w, tc.widthAtMost)
			}
			if got.At != tc.samples[len(tc.samples)-1].Received {
				t.Errorf("At %v, want the newest sample's arrival", got.At)
			}
		})
	}
	if _, ok := BoundServerOffset(nil); ok {
		t.Error("bounds without samples")
	}
}
