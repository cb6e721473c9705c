// Package logging sets up the process's structured logger and routes klog,
// client-go's logger, into it.
package logging

import (
	"flag"
	"io"
	"log/slog"
	"strconv"

	"k8s.io/klog/v2"
)

// New returns the process's slog.Logger writing to w at level: as JSON
// objects when format is "json", as slog's key=value text when it is
// "text" (any other value is taken as "json"; config validates it).
//
// New also configures the process-wide klog (klog has only global state):
// klog and every klog.FromContext/Background logger client-go uses write
// through the returned logger's handler, so everything the process logs is
// structured and goes to w. klog verbosity n maps to slog level -n and klog's
// -v is set to match level, so at Info and above no V(n>=1) message appears,
// and at Debug (-4) V(1) through V(4) do (client-go's per-request traces, V(6)
// and up, never do). Call it once, from main, before any other goroutine
// logs: klog's reconfiguration is not safe against concurrent log calls.
func New(w io.Writer, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	if format == "text" {
		h = slog.NewTextHandler(w, opts)
	} else {
		h = slog.NewJSONHandler(w, opts)
	}
	logger := slog.New(h)

	// klog checks its own -v before handing a V(n) message to the logger,
	// so -v must admit every level the handler enables.
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	if err := fs.Set("v", strconv.Itoa(max(0, -int(level)))); err != nil {
		panic("logging: klog rejected -v: " + err.Error()) // a non-negative integer is always valid
	}
	klog.SetSlogLogger(logger)
	return logger
}
