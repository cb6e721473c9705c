package benchdoc

import (
	"fmt"
	"strings"
	"text/template"
	"time"
)

// funcs are the template's helpers: formatting and the little arithmetic
// the document shows (ratios, differences, per-watcher shares).
var funcs = template.FuncMap{
	"ratio":   ratio,
	"mib":     func(bytes any) string { return fmt.Sprintf("%.1f", num(bytes)/(1<<20)) },
	"kib":     func(bytes any) string { return fmt.Sprintf("%.1f", num(bytes)/(1<<10)) },
	"pct":     func(share any) string { return fmt.Sprintf("%.2f", 100*num(share)) },
	"verdict": verdict,
	"lat":     lat,
	"join":    func(s []string, sep string) string { return strings.Join(s, sep) },
	"ints":    ints,
	"plural":  plural,
	"yesno":   func(b bool) string { return map[bool]string{true: "yes", false: "no"}[b] },
	"sub":     func(a, b any) float64 { return num(a) - num(b) },
	"div":     func(a, b any) float64 { return num(a) / num(b) },
	"mul":     func(a, b any) float64 { return num(a) * num(b) },
	"add":     add,
	"subd":    func(a, b Duration) Duration { return a - b },
	"args":    func(v ...any) []any { return v },
	"irange":  irange,
	"frange":  frange,
	"held":    held,
	"verbs":   verbs,
	// profileTotal is the total of a go tool pprof -top output ("… of
	// 1560.65kB total"), "?" when it has none.
	"profileTotal": func(top string) string {
		_, rest, ok := strings.Cut(top, "% of ")
		total, _, ok2 := strings.Cut(rest, " total")
		if !ok || !ok2 {
			return "?"
		}
		return total
	},
}

func add(v ...any) float64 {
	sum := 0.0
	for _, x := range v {
		sum += num(x)
	}
	return sum
}

// irange is "median (min–max)", "—" for none.
func irange(v Ints) string {
	if v.N == 0 {
		return "—"
	}
	return fmt.Sprintf("%d (%d–%d)", v.Median, v.Min, v.Max)
}

// frange likewise, to two decimals.
func frange(v Floats) string {
	if v.N == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f (%.2f–%.2f)", v.Median, v.Min, v.Max)
}

// held is each trial's Leases per member, "16 16 16 16; 16 16 16 16".
func held(trials [][]int) string {
	s := make([]string, len(trials))
	for i, t := range trials {
		s[i] = ints(t, " ")
	}
	return strings.Join(s, "; ")
}

// verbs is "get 3587, update 1915", "—" for none.
func verbs(v []Verb) string {
	if len(v) == 0 {
		return "—"
	}
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf("%s %.0f", x.Verb, x.PerMinute)
	}
	return strings.Join(s, ", ")
}

// num is a figure as a float64: ints, floats and durations (nanoseconds).
func num(v any) float64 {
	switch v := v.(type) {
	case int:
		return float64(v)
	case int32:
		return float64(v)
	case int64:
		return float64(v)
	case float64:
		return v
	case Duration:
		return float64(v)
	case time.Duration:
		return float64(v)
	}
	panic(fmt.Sprintf("benchdoc: %T is not a number", v))
}

// ratio is a / b as "1.23×", "" when either is zero.
func ratio(a, b any) string {
	x, y := num(a), num(b)
	if x == 0 || y == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f×", x/y)
}

// verdict is "met", "met (detail)" or "**missed**: figure".
func verdict(v Verdict) string {
	switch {
	case !v.Met:
		return "**missed**: " + v.Note
	case v.Note == "":
		return "met"
	}
	return "met (" + v.Note + ")"
}

// lat is "p50 / p99 / max (n=N)", "—" for none.
func lat(d Dist) string {
	if d.N == 0 {
		return "—"
	}
	return fmt.Sprintf("%v / %v / %v (n=%d)", d.P50, d.P99, d.Max, d.N)
}

// ints joins counts with sep.
func ints(v []int, sep string) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, sep)
}

// plural is "1 thing" or "n things".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
