package logging

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// Tests here reconfigure the process-wide klog, so none runs in parallel;
// each restores klog's state when it ends.

// newForTest calls New with a fresh buffer and restores klog afterwards.
func newForTest(t *testing.T, format string, level slog.Level) (*slog.Logger, *bytes.Buffer) {
	t.Helper()
	state := klog.CaptureState()
	t.Cleanup(state.Restore)
	var buf bytes.Buffer
	return New(&buf, format, level), &buf
}

// records flushes klog and decodes every line of buf as a JSON object.
func records(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	klog.Flush()
	var out []map[string]any
	for line := range strings.Lines(buf.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("line %q is not JSON: %v", line, err)
		}
		out = append(out, rec)
	}
	return out
}

// messages returns the msg of each record.
func messages(recs []map[string]any) []string {
	var msgs []string
	for _, r := range recs {
		msgs = append(msgs, r["msg"].(string))
	}
	return msgs
}

func TestJSONInfo(t *testing.T) {
	logger, buf := newForTest(t, "json", slog.LevelInfo)

	logger.Info("hello", "a", 1)
	logger.Debug("slog debug")
	klog.InfoS("x", "k", "v")
	klog.V(1).InfoS("klog v1")
	klog.Background().V(1).Info("contextual v1")
	klog.ErrorS(nil, "klog error")

	recs := records(t, buf)
	if got, want := strings.Join(messages(recs), ","), "hello,x,klog error"; got != want {
		t.Fatalf("messages = %s, want %s", got, want)
	}
	if recs[0]["level"] != "INFO" || recs[0]["a"] != float64(1) {
		t.Errorf("slog record = %v, want level INFO and a=1", recs[0])
	}
	if recs[1]["level"] != "INFO" || recs[1]["k"] != "v" {
		t.Errorf("klog record = %v, want level INFO and k=v", recs[1])
	}
	if recs[2]["level"] != "ERROR" {
		t.Errorf("klog error record = %v, want level ERROR", recs[2])
	}
}

func TestJSONDebug(t *testing.T) {
	logger, buf := newForTest(t, "json", slog.LevelDebug)

	logger.Debug("slog debug")
	klog.V(2).InfoS("klog v2")
	klog.V(4).InfoS("klog v4")
	klog.V(5).InfoS("klog v5")
	klog.Background().V(4).Info("contextual v4")
	klog.Background().V(5).Info("contextual v5")

	got := strings.Join(messages(records(t, buf)), ",")
	if want := "slog debug,klog v2,klog v4,contextual v4"; got != want {
		t.Fatalf("messages = %s, want %s", got, want)
	}
}

func TestText(t *testing.T) {
	logger, buf := newForTest(t, "text", slog.LevelWarn)

	logger.Info("dropped")
	logger.Warn("kept", "k", "v")
	klog.InfoS("klog info dropped")
	klog.ErrorS(nil, "klog kept")
	klog.Flush()

	want := []string{
		"level=WARN msg=kept k=v",
		"level=ERROR msg=\"klog kept\"",
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("output = %q, want %d lines", buf.String(), len(want))
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d = %q, want it to contain %q", i, lines[i], w)
		}
	}
}
