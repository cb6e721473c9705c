package group

import (
	"testing"
	"time"
)

func TestDeclinesAnnotation(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.UTC)
	d := &declines{}
	d.set("orders-1", at)
	d.set("orders-2", at.Add(-time.Second))
	current := d.current(at.Add(-time.Millisecond))
	if len(current) != 1 || !current["orders-1"].Equal(at) {
		t.Fatalf("current = %v, want only orders-1", current)
	}
	value := encodeDeclines(current)
	if value != `{"orders-1":"2026-12-01T10:00:00.123456789Z"}` {
		t.Errorf("annotation %s", value)
	}
	back := decodeDeclines(value)
	if len(back) != 1 || !back["orders-1"].Equal(at) {
		t.Errorf("decoded %v", back)
	}
	for _, bad := range []string{"", "{", `{"orders-1":"soon"}`, `["orders-1"]`} {
		if got := decodeDeclines(bad); len(got) != 0 {
			t.Errorf("decodeDeclines(%q) = %v, want nothing declined", bad, got)
		}
	}
	if encodeDeclines(nil) != "" || len(d.current(at)) != 0 {
		t.Error("ended stay-outs are still declined")
	}
}
