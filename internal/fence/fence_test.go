package fence

import (
	"testing"
	"time"
)

func TestFromResourceVersion(t *testing.T) {
	for rv, want := range map[string]Token{"1": 1, "42": 42, "18446744073709551615": 1<<64 - 1} {
		got, err := FromResourceVersion(rv)
		if err != nil || got != want {
			t.Errorf("FromResourceVersion(%q) = %d, %v; want %d", rv, got, err, want)
		}
	}
	for _, rv := range []string{"", "0", "007", "+5", "-1", "1.5", "abc", "18446744073709551616", " 5"} {
		if got, err := FromResourceVersion(rv); err == nil {
			t.Errorf("FromResourceVersion(%q) = %d, want an error", rv, got)
		}
	}
}

func TestPublished(t *testing.T) {
	if got, ok := Published(map[string]string{Annotation: "123"}); !ok || got != 123 {
		t.Errorf("Published(123) = %d, %v", got, ok)
	}
	for _, ann := range []map[string]string{nil, {}, {Annotation: ""}, {Annotation: "x"}, {"other": "5"}} {
		if got, ok := Published(ann); ok {
			t.Errorf("Published(%v) = %d, want not ok", ann, got)
		}
	}
}

func TestCredible(t *testing.T) {
	cases := []struct {
		published, leaseRV Token
		want               bool
	}{
		{published: 10, leaseRV: 11, want: true},
		{published: 10, leaseRV: 10, want: false}, // cannot publish the RV of the publishing write itself
		{published: 99, leaseRV: 11, want: false}, // made up by hand
	}
	for _, c := range cases {
		if got := Credible(c.published, c.leaseRV); got != c.want {
			t.Errorf("Credible(%d, %d) = %v, want %v", c.published, c.leaseRV, got, c.want)
		}
	}
}

func TestValidUntil(t *testing.T) {
	sent := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	if got := ValidUntil(sent, 10*time.Second); !got.Equal(sent.Add(10 * time.Second)) {
		t.Errorf("ValidUntil = %v", got)
	}
}

func TestMaxClockDrift(t *testing.T) {
	if got := MaxClockDrift(15*time.Second, 10*time.Second); got != 0.2 {
		t.Errorf("MaxClockDrift(15s, 10s) = %v, want 0.2", got)
	}
}
