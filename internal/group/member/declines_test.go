package member

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDeclinesAnnotation(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.UTC)
	m := &Machine{declines: map[string]time.Time{"orders-1": at, "orders-2": at.Add(-time.Second)}}
	current := m.currentDeclines(at.Add(-time.Millisecond))
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
	if encodeDeclines(nil) != "" || len(m.currentDeclines(at)) != 0 {
		t.Error("ended stay-outs are still declined")
	}
}

// A stay-out lasts, on the reader's clock, what was left of it when its
// writer wrote the record, whatever the offset between the two clocks.
func TestDeclinesAreTimedFromTheRecordsRenewTime(t *testing.T) {
	writer := time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC) // half an hour ahead of the reader
	reader := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	l := &coordinationv1.Lease{}
	l.Annotations = map[string]string{DeclinedAnnotation: encodeDeclines(map[string]time.Time{"orders-1": writer.Add(40 * time.Second)})}
	l.Spec.RenewTime = &metav1.MicroTime{Time: writer}
	if got := localDeclines(reader, l)["orders-1"]; !got.Equal(reader.Add(40 * time.Second)) {
		t.Errorf("stay-out ends at %v on the reader's clock; want %v", got, reader.Add(40*time.Second))
	}
	l.Spec.RenewTime = nil
	if got := localDeclines(reader, l)["orders-1"]; !got.Equal(writer.Add(40 * time.Second)) {
		t.Errorf("without a renewTime: ends at %v; want the written %v", got, writer.Add(40*time.Second))
	}
}
