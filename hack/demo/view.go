package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/leasehold/leasehold/internal/fence"
	"github.com/leasehold/leasehold/internal/httpapi"
	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/overlap"
)

// sampleEvery is how often the live view asks every instance for its status.
const sampleEvery = 200 * time.Millisecond

// role is what an instance is, as its own /v1/status says.
type role int

const (
	down role = iota
	follower
	leader
)

func (r role) String() string {
	switch r {
	case leader:
		return "LEADER"
	case follower:
		return "follower"
	default:
		return "down"
	}
}

// row is one instance in the table.
type row struct {
	name     string
	identity string
	role     role
	token    fence.Token
	term     int32
	validFor time.Duration // the leader's remaining validity
	freeIn   time.Duration // a follower's wait until it judges the Lease expired
	hasFree  bool          // freeIn is known
}

// rowOf describes one instance's status, judged at now. A follower's
// "lease free in" is its own observation time plus leaseDuration, as the
// sidecar judges expiry (both times are this machine's clock).
func rowOf(name string, st httpapi.Status, leaseDuration time.Duration, now time.Time) row {
	r := row{name: name, identity: st.Identity, role: follower, token: st.FencingToken, term: st.Term}
	if st.Leader {
		r.role = leader
		r.validFor = time.Duration(st.ValidForMs) * time.Millisecond
		return r
	}
	switch observed, err := time.Parse(time.RFC3339Nano, st.ObservedAt); {
	case st.Holder == "":
		r.hasFree = true // released or missing: free now
	case st.Holder == st.Identity:
		// Its own term has just lapsed: nothing to wait for.
	case err == nil:
		r.freeIn, r.hasFree = max(observed.Add(leaseDuration).Sub(now), 0), true
	}
	return r
}

// seconds formats d as seconds with one decimal, rounded down so that it
// never overstates validity.
func seconds(d time.Duration) string {
	tenths := d / (100 * time.Millisecond)
	return fmt.Sprintf("%d.%ds", tenths/10, tenths%10)
}

// rowFormat lays out the table's columns.
const rowFormat = "%-8s %-17s %-8s %7s %5s %10s  %s"

var tableHeader = fmt.Sprintf(rowFormat, "NAME", "IDENTITY", "ROLE", "TOKEN", "TERM", "VALID FOR", "LEASE FREE IN")

func (r row) String() string {
	token, term, valid, free := "-", "-", "-", "-"
	if r.role != down {
		if r.token != 0 {
			token = r.token.String()
		}
		term = fmt.Sprint(r.term)
	}
	if r.role == leader {
		valid = seconds(r.validFor)
	}
	if r.role == follower && r.hasFree {
		free = "now"
		if r.freeIn > 0 {
			free = seconds(r.freeIn)
		}
	}
	return fmt.Sprintf(rowFormat, r.name, r.identity, r.role, token, term, valid, free)
}

// changeKey is what makes a row worth a line in plain mode: everything but
// the ever-moving clocks.
func (r row) changeKey() string {
	return fmt.Sprintf("%s|%s|%s|%d|%d", r.name, r.identity, r.role, r.token, r.term)
}

// view prints the demo. On a terminal it keeps a live region at the bottom
// (the current step's narration and the table) and redraws it in place;
// elsewhere (CI, a pipe) it prints one line per change, so logs stay
// readable. Permanent lines (events, results) go above the live region.
type view struct {
	out           io.Writer
	tty           bool
	width         int
	leaseDuration time.Duration
	start         time.Time

	mu        sync.Mutex
	instances []*fleet.Instance
	rows      []row
	printed   []string // plain mode: the changeKey last printed per row
	step      string
	drawn     int // terminal lines of the live region on screen now
	live      bool

	stop func()
	done chan struct{}

	obsMu sync.Mutex
	obs   []overlap.Observation[*fleet.Instance] // every status answer, for checkOverlap
}

// record keeps one status answer of inst, received within [sent, recv].
func (v *view) record(inst *fleet.Instance, sent, recv time.Time, st httpapi.Status) {
	v.obsMu.Lock()
	defer v.obsMu.Unlock()
	v.obs = append(v.obs, overlap.Observation[*fleet.Instance]{Member: inst, Sent: sent, Recv: recv, Leader: st.Leader, Token: st.FencingToken})
}

// checkOverlap checks every status answer recorded with the fault suite's
// rule (internal/testing/overlap): no two instances certainly led at one
// same instant. It prints the verdict and returns a problem per overlap.
func (v *view) checkOverlap() []string {
	v.obsMu.Lock()
	obs := slices.Clone(v.obs)
	v.obsMu.Unlock()
	var problems []string
	for _, p := range overlap.Check(obs) {
		problems = append(problems, fmt.Sprintf("two leaders at once: %s (token %v) from %s and %s (token %v) from %s",
			p.A.Member.Name, p.A.Token, v.clock(p.A.First().Sent), p.B.Member.Name, p.B.Token, v.clock(p.B.First().Sent)))
	}
	for _, p := range problems {
		v.Printf("✗ %s", p)
	}
	if len(problems) == 0 {
		v.Printf("✓ never two leaders at once: %d status answers checked (internal/testing/overlap)", len(obs))
	}
	return problems
}

// clock formats at as the time since the view started.
func (v *view) clock(at time.Time) string {
	return fmt.Sprintf("t+%.2fs", at.Sub(v.start).Seconds())
}

func newView(out io.Writer, tty bool, width int, leaseDuration time.Duration) *view {
	return &view{out: out, tty: tty, width: width, leaseDuration: leaseDuration, start: time.Now()}
}

// stamp prefixes lines with the time since the view started.
func (v *view) stamp() string {
	return fmt.Sprintf("t+%5.2fs  ", time.Since(v.start).Seconds())
}

// Printf prints a permanent line, stamped.
func (v *view) Printf(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.clear()
	fmt.Fprintln(v.out, v.stamp()+fmt.Sprintf(format, args...))
	v.draw()
}

// Step sets the narration of the current step. In plain mode it prints the
// narration and the whole table; later lines show only what changes.
func (v *view) Step(text string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.step = text
	if v.tty && v.live {
		v.clear()
		v.draw()
		return
	}
	fmt.Fprintln(v.out)
	for _, l := range wrap(text, v.width-1) {
		fmt.Fprintln(v.out, l)
	}
	if !v.live {
		return
	}
	fmt.Fprintln(v.out, strings.Repeat(" ", len(v.stamp()))+tableHeader)
	for i, r := range v.rows {
		v.printed[i] = r.changeKey()
		fmt.Fprintln(v.out, v.stamp()+r.String())
	}
}

// Start shows instances, sampled every sampleEvery until Stop. It returns
// after the first sample.
func (v *view) Start(ctx context.Context, instances []*fleet.Instance) {
	v.mu.Lock()
	v.instances = instances
	v.rows = make([]row, len(instances))
	v.mu.Unlock()
	rows := v.sample(ctx)
	v.mu.Lock()
	v.rows, v.printed, v.live, v.start = rows, make([]string, len(rows)), true, time.Now()
	for i, r := range rows {
		v.printed[i] = r.changeKey() // plain mode: Step prints the first table
	}
	v.clear()
	v.draw()
	v.mu.Unlock()

	ctx, cancel := context.WithCancel(ctx)
	v.stop, v.done = cancel, make(chan struct{})
	go func() {
		defer close(v.done)
		tick := time.NewTicker(sampleEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			v.update(v.sample(ctx))
		}
	}()
}

// Stop ends sampling after one last update, and leaves the last table on a
// terminal's screen; later lines print below it.
func (v *view) Stop() {
	if v.stop == nil {
		return
	}
	v.stop()
	<-v.done
	v.update(v.sample(context.Background()))
	v.mu.Lock()
	defer v.mu.Unlock()
	v.live, v.drawn, v.stop = false, 0, nil
}

// sample asks every instance for its status, concurrently.
func (v *view) sample(ctx context.Context) []row {
	v.mu.Lock()
	instances, last := v.instances, append([]row(nil), v.rows...)
	v.mu.Unlock()
	rows := make([]row, len(instances))
	var wg sync.WaitGroup
	for i, inst := range instances {
		wg.Go(func() {
			rows[i] = row{name: inst.Name, identity: last[i].identity, role: down}
			select {
			case <-inst.Exited():
				return
			default:
			}
			ctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			sent := time.Now()
			if st, err := inst.Status(ctx); err == nil {
				recv := time.Now()
				v.record(inst, sent, recv, st)
				rows[i] = rowOf(inst.Name, st, v.leaseDuration, recv)
			}
		})
	}
	wg.Wait()
	return rows
}

// update shows rows: a redraw on a terminal, changed rows elsewhere.
func (v *view) update(rows []row) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.live {
		return
	}
	v.rows = rows
	if v.tty {
		v.clear()
		v.draw()
		return
	}
	for i, r := range rows {
		if key := r.changeKey(); key != v.printed[i] {
			v.printed[i] = key
			fmt.Fprintln(v.out, v.stamp()+r.String())
		}
	}
}

// clear erases the live region (terminal only): cursor up to its first
// line, then erase to the end of the screen.
func (v *view) clear() {
	if v.tty && v.drawn > 0 {
		fmt.Fprintf(v.out, "\x1b[%dA\r\x1b[J", v.drawn)
		v.drawn = 0
	}
}

// draw prints the live region (terminal only): the narration and the
// table, every line cut to the width so that the count of lines is exact.
func (v *view) draw() {
	if !v.tty || !v.live {
		return
	}
	lines := []string{""}
	lines = append(lines, wrap(v.step, v.width-1)...)
	lines = append(lines, "", "  "+tableHeader)
	for _, r := range v.rows {
		lines = append(lines, "  "+r.String())
	}
	for _, l := range lines {
		fmt.Fprintln(v.out, truncate(l, v.width-1))
	}
	v.drawn = len(lines)
}

// wrap breaks text into lines of at most width characters, at spaces.
func wrap(text string, width int) []string {
	var lines []string
	for _, para := range strings.Split(text, "\n") {
		line := ""
		for _, word := range strings.Fields(para) {
			switch {
			case line == "":
				line = word
			case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) <= width:
				line += " " + word
			default:
				lines = append(lines, line)
				line = word
			}
		}
		lines = append(lines, line)
	}
	return lines
}

// truncate cuts s to at most width characters.
func truncate(s string, width int) string {
	if width <= 0 || utf8.RuneCountInString(s) <= width {
		return s
	}
	return string([]rune(s)[:width])
}
