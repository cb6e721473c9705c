package main

import (
	"testing"
	"time"
)

// parseProxyBench reads go test's benchmark lines (with or without the
// GOMAXPROCS suffix), and refuses output that lacks a way or a metric.
func TestParseProxyBench(t *testing.T) {
	out := []byte(`goos: linux
BenchmarkProxy/direct-2         	   20000	     45123 ns/op	        23.10 p50-µs	       138.0 p99-µs	    5000 B/op	      50 allocs/op
BenchmarkProxy/via-proxy-2      	   20000	     90000 ns/op	        58.00 p50-µs	       345.0 p99-µs
BenchmarkProxy/via-follower     	   20000	    150000 ns/op	        93.00 p50-µs	       633.4 p99-µs
PASS
`)
	ways, err := parseProxyBench(out)
	if err != nil {
		t.Fatal(err)
	}
	us := func(f float64) time.Duration {
		return time.Duration(f * float64(time.Microsecond)).Round(time.Microsecond)
	}
	want := map[string][2]time.Duration{
		"direct": {us(23.1), us(138)}, "via-proxy": {us(58), us(345)}, "via-follower": {us(93), us(633.4)},
	}
	for w, q := range want {
		if ways[w] != q {
			t.Errorf("%s: %v, want %v", w, ways[w], q)
		}
	}
	if _, err := parseProxyBench(out[:len(out)-90]); err == nil {
		t.Error("output without via-follower parsed")
	}
	if _, err := parseProxyBench([]byte("BenchmarkProxy/direct-2 10 5 ns/op 3 p50-µs\n")); err == nil {
		t.Error("a line without p99-µs parsed")
	}
}
