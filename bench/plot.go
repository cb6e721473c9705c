package main

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// svg draws every handover and failover trial of both implementations as
// dots on a logarithmic time axis, one row per series, with the median
// marked: the distributions side by side.
func (r *report) svg() string {
	type series struct {
		label string
		d     []time.Duration
		color string
	}
	colors := []string{"#1f77b4", "#d62728"}
	var rows []series
	for _, kind := range []string{"handover", "failover"} {
		for i, res := range r.results {
			d := res.handovers
			if kind == "failover" {
				d = res.failovers
			}
			rows = append(rows, series{label: kind + " — " + res.impl.name, d: d, color: colors[i%len(colors)]})
		}
	}
	const (
		width, left, right, rowHeight, top = 900, 250, 30, 40, 40
	)
	lo, hi := math.Log10(float64(time.Millisecond)), math.Log10(float64(100*time.Second))
	x := func(d time.Duration) float64 {
		v := math.Log10(math.Max(float64(d), float64(time.Millisecond)))
		return left + (v-lo)/(hi-lo)*(width-left-right)
	}
	height := top + rowHeight*len(rows) + 40
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="14">Handover and failover latency, every trial (log scale; | = median)</text>`+"\n", left)
	for _, tick := range []time.Duration{time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond, time.Second, 10 * time.Second, 100 * time.Second} {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", x(tick), top-10, x(tick), height-30)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%v</text>`+"\n", x(tick), height-12, tick)
	}
	for i, s := range rows {
		y := top + rowHeight*i + rowHeight/2
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-10, y+4, s.label)
		for _, d := range s.d {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%d" r="4" fill="%s" fill-opacity="0.5"/>`+"\n", x(d), y, s.color)
		}
		if len(s.d) > 0 {
			m := x(quantile(s.d, 0.5))
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black" stroke-width="2"/>`+"\n", m, y-12, m, y+12)
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}
