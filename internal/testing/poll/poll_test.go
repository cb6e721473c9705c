package poll

import (
	"strings"
	"testing"
	"time"
)

// fakeT records a Fatalf instead of ending the goroutine's test.
type fakeT struct {
	testing.TB
	failed string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = format
	panic(f)
}

func TestUntil(t *testing.T) {
	n := 0
	Until(t, time.Minute, time.Millisecond, "counted to 3", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Errorf("cond called %d times, want 3", n)
	}
	f := &fakeT{TB: t}
	func() {
		defer func() { _ = recover() }()
		Until(f, 20*time.Millisecond, time.Millisecond, "never", func() bool { return false })
	}()
	if !strings.HasPrefix(f.failed, "not %s within") {
		t.Errorf("Fatalf %q: want the deadline to fail the test", f.failed)
	}
}
