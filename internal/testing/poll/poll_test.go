package poll

import (
	"fmt"
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
	f.failed = fmt.Sprintf(format, args...)
	panic(f)
}

// fails runs wait against a fakeT and returns its failure message ("" when
// wait returned).
func fails(t *testing.T, wait func(testing.TB)) string {
	f := &fakeT{TB: t}
	func() {
		defer func() { _ = recover() }()
		wait(f)
	}()
	return f.failed
}

func TestUntil(t *testing.T) {
	n := 0
	Until(t, time.Minute, time.Millisecond, "counted to 3", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Errorf("cond called %d times, want 3", n)
	}
	failed := fails(t, func(tb testing.TB) {
		Until(tb, 20*time.Millisecond, time.Millisecond, "never", func() bool { return false })
	})
	if failed != "not never within 20ms" {
		t.Errorf("Fatalf %q: want the deadline to fail the test", failed)
	}
}

func TestUntilReport(t *testing.T) {
	n, reported := 0, 0
	UntilReport(t, time.Minute, time.Millisecond, "counted to 3", func() bool { n++; return n == 3 },
		func() string { reported++; return "" })
	if n != 3 || reported != 0 {
		t.Errorf("cond called %d times, report %d; want 3 and 0 (report only on failure)", n, reported)
	}
	last := 0
	failed := fails(t, func(tb testing.TB) {
		UntilReport(tb, 20*time.Millisecond, time.Millisecond, "never", func() bool { last++; return false },
			func() string { return fmt.Sprintf("last count %d", last) })
	})
	if !strings.HasPrefix(failed, "not never within 20ms: last count ") || strings.HasSuffix(failed, " 0") {
		t.Errorf("Fatalf %q: want the deadline to fail the test with the last state cond saw", failed)
	}
	failed = fails(t, func(tb testing.TB) {
		UntilReport(tb, 20*time.Millisecond, time.Millisecond, "never", func() bool { return false }, nil)
	})
	if failed != "not never within 20ms" {
		t.Errorf("Fatalf %q with a nil report: want the plain deadline failure", failed)
	}
}
