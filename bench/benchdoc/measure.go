package benchdoc

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// NewDist summarises d, each quantile rounded by round (nil: not rounded).
func NewDist(d []time.Duration, round func(time.Duration) time.Duration) Dist {
	if len(d) == 0 {
		return Dist{}
	}
	if round == nil {
		round = func(d time.Duration) time.Duration { return d }
	}
	s := slices.Sorted(slices.Values(d))
	q := func(q float64) Duration {
		return Duration(round(s[min(max(int(q*float64(len(s))+0.5)-1, 0), len(s)-1)]))
	}
	return Dist{N: len(s), Min: q(0), P50: q(0.5), P95: q(0.95), P99: q(0.99), Max: q(1)}
}

// NewRun describes a run of command on this machine, now.
func NewRun(command string) Run {
	return Run{Command: strings.TrimSpace(command), Date: time.Now().UTC().Format("2006-01-02 15:04 MST"), Machine: Machine()}
}

// Machine describes where the bench runs.
func Machine() string {
	model := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(data)) {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	mem := ""
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		if line, _, ok := strings.Cut(string(data), "\n"); ok {
			mem = ", " + strings.Join(strings.Fields(line)[1:], " ") + " memory"
		}
	}
	return fmt.Sprintf("%d CPUs (%s)%s, %s/%s, %s, shared and noisy", runtime.NumCPU(), model, mem, runtime.GOOS, runtime.GOARCH, runtime.Version())
}
