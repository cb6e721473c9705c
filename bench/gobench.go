package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// proxyInProcess runs the product's own Go benchmark of its forwarding
// proxy (BenchmarkProxy in internal/proxy: an app, a leader's and a
// follower's proxy in one process, n requests each way over kept-alive
// connections) and returns its p50 and p99 per way, for comparison with
// the figures measured on real sidecar processes in the same run.
func proxyInProcess(ctx context.Context, n int) (hoOverhead, error) {
	in := hoOverhead{ran: true, requests: n}
	root, err := productDir(ctx)
	if err != nil {
		return in, err
	}
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", "^BenchmarkProxy$",
		"-benchtime", strconv.Itoa(n)+"x", "-count", "1", "./internal/proxy")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return in, fmt.Errorf("go test -bench BenchmarkProxy: %w\n%s", err, out)
	}
	ways, err := parseProxyBench(out)
	if err != nil {
		return in, err
	}
	in.direct50, in.direct99 = ways["direct"][0], ways["direct"][1]
	in.proxied50, in.proxied99 = ways["via-proxy"][0], ways["via-proxy"][1]
	in.forwarded50, in.forwarded99 = ways["via-follower"][0], ways["via-follower"][1]
	return in, nil
}

// parseProxyBench reads BenchmarkProxy's p50-µs and p99-µs metrics from go
// test's output, by sub-benchmark: direct, via-proxy and via-follower.
func parseProxyBench(out []byte) (map[string][2]time.Duration, error) {
	ways := map[string][2]time.Duration{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || !strings.HasPrefix(f[0], "BenchmarkProxy/") {
			continue
		}
		name := strings.TrimPrefix(f[0], "BenchmarkProxy/")
		if i := strings.LastIndexByte(name, '-'); i > 0 { // the GOMAXPROCS suffix
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		var q [2]time.Duration
		found := 0
		for i := 2; i+1 < len(f); i += 2 {
			k := map[string]int{"p50-µs": 0, "p99-µs": 1}
			j, ok := k[f[i+1]]
			if !ok {
				continue
			}
			us, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("BenchmarkProxy/%s: %s %s: %w", name, f[i], f[i+1], err)
			}
			q[j] = time.Duration(us * float64(time.Microsecond)).Round(time.Microsecond)
			found++
		}
		if found != 2 {
			return nil, fmt.Errorf("BenchmarkProxy/%s: no p50-µs and p99-µs in %q", name, sc.Text())
		}
		ways[name] = q
	}
	for _, w := range []string{"direct", "via-proxy", "via-follower"} {
		if _, ok := ways[w]; !ok {
			return nil, fmt.Errorf("BenchmarkProxy printed no %s figures:\n%s", w, out)
		}
	}
	return ways, nil
}

// productDir is the directory of the leasehold module the bench measures.
func productDir(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/leasehold/leasehold").Output()
	if err != nil {
		return "", fmt.Errorf("go list -m github.com/leasehold/leasehold: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}
