package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/leasehold/leasehold/internal/buildflags"
	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
)

// The footprint section measures what one instance costs a pod, each
// implementation side by side in one run at the sidecar's default
// configuration (default timings, no features on): binary size and linked
// packages, RSS idle while leading, RSS added by open watchers, CPU while
// leading, start-up time to readiness and GET /v1/status throughput. It
// also measures the floor (bench/floor: the product's libraries at rest, and net/http per watcher), the floor of the watchers'
// cost, and profiles leasehold (LEASEHOLD_PPROF) to show where its memory
// goes.

// footprintImpl is one binary the section measures.
type footprintImpl struct {
	name   string
	binary string
	env    []string // extra environment, e.g. GOMEMLIMIT
	// pkg and dir name the main package and the module folder it is
	// listed in (go list -deps); pkg "" when unknown (a binary given with
	// -footprint-extra).
	pkg, dir string
}

// footprintFigures are the section's figures.
type footprintFigures struct {
	ran       bool
	window    time.Duration // the idle window: CPU and RSS samples
	watchers  int
	statusLen time.Duration // each round of GET /v1/status load
	impls     []implFootprint
	floor     floorFigures
	profile   profileFigures
}

// implFootprint are one implementation's figures.
type implFootprint struct {
	impl        footprintImpl
	binaryBytes int64
	packages    int      // in the binary's graph (go list -deps); 0 when unknown
	apiGroups   []string // k8s.io/api/<group>/<version> packages in that graph
	clientset   bool     // k8s.io/client-go/kubernetes itself in that graph
	typedVia    []string // packages outside client-go that import k8s.io/client-go/kubernetes[/...]
	idle        []memSample
	cpu         time.Duration // CPU time used over the idle window
	cpuWindow   time.Duration
	withWatch   []memSample
	starts      []time.Duration // process start → first /readyz 200
	rates       []float64       // GET /v1/status closed-loop throughput, one per round
	latencies   []time.Duration // every request of every round
}

// floorFigures are the floor program's (bench/floor): the product's libraries at rest, net/http per watcher.
type floorFigures struct {
	idle, withWatch []memSample
	before, after   memstats // after two GCs, without and with the watchers
}

// memSample is one reading of a process's resident memory.
type memSample struct {
	rss, anon int64 // bytes; anon is the anonymous part, the rest is file-backed (the binary's pages)
}

// memstats is the Go runtime's view after garbage collection.
type memstats struct {
	HeapInuse  float64 `json:"heapInuse"`
	StackInuse float64 `json:"stackInuse"`
	Goroutines float64 `json:"goroutines"`
}

// profileFigures are leasehold's runtime figures, idle and with the
// watchers open, from an instance run with LEASEHOLD_PPROF.
type profileFigures struct {
	before, after memstats
	idleTop       string         // go tool pprof -top of the heap in use, idle
	heapTop       string         // go tool pprof -top of the heap in use added by the watchers
	goroutines    map[string]int // open goroutines with the watchers, by where they wait
}

// footprintLease is held by hand, so that instances started on it observe
// it at once and never campaign: the start-up measurement.
const footprintLease = "held"

// benchFootprint runs the section on impls (leasehold first, the client-go
// baseline second, then any others) and on net/http alone.
func benchFootprint(ctx context.Context, cluster *kubetest.Cluster, base fleet.Config, impls []footprintImpl, floorBinary string, opts options) (footprintFigures, error) {
	f := footprintFigures{ran: true, window: opts.footprintWindow, watchers: opts.watchers, statusLen: opts.statusLoad}
	for _, impl := range impls {
		r := implFootprint{impl: impl}
		if err := staticFootprint(ctx, &r); err != nil {
			return f, fmt.Errorf("%s: %w", impl.name, err)
		}
		f.impls = append(f.impls, r)
	}
	ns, err := cluster.CreateNamespace(ctx, "bench-footprint")
	if err != nil {
		return f, err
	}
	now := metav1.NowMicro()
	if _, err := cluster.Clientset().CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: footprintLease},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("someone-else"), LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime: &now, RenewTime: &now,
		},
	}, metav1.CreateOptions{}); err != nil {
		return f, err
	}
	// Default configuration: no timings, no features.
	cfg := fleet.Config{Cluster: cluster, Namespace: ns, Dir: base.Dir}

	// One instance of each, each leading a Lease of its own, and net/http
	// alone beside them.
	var running []*fleet.Instance
	defer func() {
		for _, inst := range running {
			inst.Stop()
		}
	}()
	for i, impl := range impls {
		c := cfg
		c.Binary, c.Lease = impl.binary, fmt.Sprintf("footprint-%d", i)
		c.Env = append(slices.Clone(impl.env), watchersBound(f.watchers))
		inst, err := c.Start(ctx, fmt.Sprintf("fp%d", i), false)
		if err != nil {
			return f, fmt.Errorf("%s: %w", impl.name, err)
		}
		running = append(running, inst)
	}
	floorCfg := cfg
	floorCfg.Binary, floorCfg.Lease = floorBinary, "unused"
	floor, err := floorCfg.Start(ctx, "floor", false)
	if err != nil {
		return f, fmt.Errorf("net/http alone: %w", err)
	}
	defer floor.Stop()
	fmt.Fprintf(os.Stderr, "bench: footprint: waiting until every implementation leads (leasehold: one lease duration, 15s, after it created the Lease)\n")
	if err := allLead(ctx, running, time.Minute); err != nil {
		return f, err
	}
	if err := sleep(ctx, 10*time.Second); err != nil { // settle after the first term began (a measurement, not a synchronisation)
		return f, err
	}

	// Idle while leading: CPU over the window, RSS sampled through it.
	fmt.Fprintf(os.Stderr, "bench: footprint: idle window of %v\n", f.window)
	pids := []int{floor.PID()}
	for _, inst := range running {
		pids = append(pids, inst.PID())
	}
	idle, cpu, took, err := watchIdle(ctx, pids, f.window)
	if err != nil {
		return f, err
	}
	f.floor.idle = idle[0]
	for i := range f.impls {
		f.impls[i].idle, f.impls[i].cpu, f.impls[i].cpuWindow = idle[i+1], cpu[i+1], took
	}
	if err := allLead(ctx, running, 0); err != nil {
		return f, fmt.Errorf("after the idle window: %w", err)
	}
	if err := floorMemstats(ctx, floor, &f.floor.before); err != nil {
		return f, err
	}

	// Watchers, one process at a time.
	fmt.Fprintf(os.Stderr, "bench: footprint: %d watchers on each\n", f.watchers)
	for i, inst := range running {
		if f.impls[i].withWatch, err = withWatchers(ctx, inst, f.watchers, nil); err != nil {
			return f, fmt.Errorf("%s: watchers: %w", f.impls[i].impl.name, err)
		}
	}
	if f.floor.withWatch, err = withWatchers(ctx, floor, f.watchers, func() error {
		return floorMemstats(ctx, floor, &f.floor.after)
	}); err != nil {
		return f, fmt.Errorf("net/http alone: watchers: %w", err)
	}

	// GET /v1/status, rounds alternating between implementations.
	fmt.Fprintf(os.Stderr, "bench: footprint: GET /v1/status, %d rounds of %v each\n", opts.footprintRounds, f.statusLen)
	for range opts.footprintRounds {
		for i, inst := range running {
			rate, lat, err := loadStatus(ctx, inst.APIURL, opts.statusConns, f.statusLen, 0)
			if err != nil {
				return f, fmt.Errorf("%s: GET /v1/status: %w", f.impls[i].impl.name, err)
			}
			f.impls[i].rates = append(f.impls[i].rates, rate)
			f.impls[i].latencies = append(f.impls[i].latencies, lat...)
		}
	}
	for _, inst := range running {
		inst.Stop() // release the cores for the starts
	}
	running = nil
	floor.Stop()

	// Start-up, alternating between implementations.
	fmt.Fprintf(os.Stderr, "bench: footprint: %d starts of each\n", opts.starts)
	held := cfg
	held.Lease, held.ReadyPoll = footprintLease, 2*time.Millisecond
	for n := range opts.starts {
		for i, impl := range impls {
			c := held
			c.Binary, c.Env = impl.binary, impl.env
			inst, err := c.Start(ctx, fmt.Sprintf("start%d-%d", i, n), false)
			if err != nil {
				return f, fmt.Errorf("%s: start: %w", impl.name, err)
			}
			inst.Stop()
			f.impls[i].starts = append(f.impls[i].starts, inst.Ready.Sub(inst.Started))
		}
	}

	// Where leasehold's memory goes.
	fmt.Fprintf(os.Stderr, "bench: footprint: profiling leasehold (LEASEHOLD_PPROF)\n")
	prof := held
	prof.Binary, prof.ReadyPoll, prof.Env = impls[0].binary, 0, []string{watchersBound(f.watchers)}
	if f.profile, err = profileLeasehold(ctx, prof, base.Dir, f.watchers); err != nil {
		return f, fmt.Errorf("profile: %w", err)
	}
	return f, nil
}

// staticFootprint reads what the binary is: its size, and (when its package
// is known) the packages of its graph, the k8s.io/api groups among them,
// whether the full clientset is one of them, and which packages outside
// client-go import client-go's typed clients (each of which registers every
// group in client-go's scheme).
func staticFootprint(ctx context.Context, r *implFootprint) error {
	fi, err := os.Stat(r.impl.binary)
	if err != nil {
		return err
	}
	r.binaryBytes = fi.Size()
	if r.impl.pkg == "" {
		return nil
	}
	deps, err := goListDeps(ctx, r.impl.dir, r.impl.pkg)
	if err != nil {
		return err
	}
	r.packages = len(deps)
	for _, pkg := range slices.Sorted(maps.Keys(deps)) {
		if g, ok := strings.CutPrefix(pkg, "k8s.io/api/"); ok {
			r.apiGroups = append(r.apiGroups, g)
		}
		r.clientset = r.clientset || pkg == "k8s.io/client-go/kubernetes"
		if strings.HasPrefix(pkg, "k8s.io/client-go/") {
			continue
		}
		if slices.ContainsFunc(deps[pkg], func(imp string) bool { return strings.HasPrefix(imp, "k8s.io/client-go/kubernetes") }) {
			r.typedVia = append(r.typedVia, strings.TrimPrefix(pkg, "github.com/leasehold/leasehold/"))
		}
	}
	return nil
}

// goListDeps lists the packages of pkg's graph for the Dockerfile's build
// (CGO_ENABLED=0), standard library included, each with its imports.
func goListDeps(ctx context.Context, dir, pkg string) (map[string][]string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -deps %s: %w\n%s", pkg, err, stderr.Bytes())
	}
	deps := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		if fields := strings.Fields(line); len(fields) > 0 {
			deps[fields[0]] = fields[1:]
		}
	}
	return deps, nil
}

// allLead waits until every instance says leader:true, at most bound (0:
// ask once).
func allLead(ctx context.Context, instances []*fleet.Instance, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for {
		var notYet []string
		for _, inst := range instances {
			if st, err := inst.Status(ctx); err != nil || !st.Leader {
				notYet = append(notYet, inst.Name)
			}
		}
		if len(notYet) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not leading: %s", strings.Join(notYet, ", "))
		}
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return err
		}
	}
}

// watchIdle samples the memory of every process 13 times over window (at
// its start, its end and 11 times between) and returns the samples and the
// CPU time each used over the window, without sending them any request.
func watchIdle(ctx context.Context, pids []int, window time.Duration) ([][]memSample, []time.Duration, time.Duration, error) {
	const samples = 13
	mem := make([][]memSample, len(pids))
	cpu := make([]time.Duration, len(pids))
	for i, pid := range pids {
		t, err := cpuTime(pid)
		if err != nil {
			return nil, nil, 0, err
		}
		cpu[i] = -t
	}
	start := time.Now()
	for n := range samples {
		if n > 0 {
			if err := sleep(ctx, window/(samples-1)); err != nil {
				return nil, nil, 0, err
			}
		}
		for i, pid := range pids {
			s, err := memOf(pid)
			if err != nil {
				return nil, nil, 0, err
			}
			mem[i] = append(mem[i], s)
		}
	}
	took := time.Since(start)
	for i, pid := range pids {
		t, err := cpuTime(pid)
		if err != nil {
			return nil, nil, 0, err
		}
		cpu[i] += t
	}
	return mem, cpu, took, nil
}

// withWatchers opens n watchers (half long-poll, half SSE) on inst, lets
// the process settle, samples its memory 5 times a second apart, calls
// also (if not nil) while they are still open, and closes them.
func withWatchers(ctx context.Context, inst *fleet.Instance, n int, also func() error) ([]memSample, error) {
	w := newWatcherPool(inst.APIURL, n)
	defer w.close()
	if err := w.open(ctx); err != nil {
		return nil, err
	}
	if err := sleep(ctx, 3*time.Second); err != nil {
		return nil, err
	}
	var mem []memSample
	for range 5 {
		s, err := memOf(inst.PID())
		if err != nil {
			return nil, err
		}
		mem = append(mem, s)
		if err := sleep(ctx, time.Second); err != nil {
			return nil, err
		}
	}
	if also != nil {
		if err := also(); err != nil {
			return nil, err
		}
	}
	return mem, nil
}

// profileLeasehold measures where leasehold's memory goes, idle and with n
// watchers open, on two instances with LEASEHOLD_PPROF: the runtime's
// figures after garbage collection and the goroutines by where they wait
// on one, and heap profiles on another that samples every allocation (which
// itself inflates the heap, so its figures are not used).
func profileLeasehold(ctx context.Context, cfg fleet.Config, dir string, n int) (profileFigures, error) {
	var p profileFigures
	measure := func(name string, env []string, idle, open func(*fleet.Instance) error) error {
		c := cfg
		c.Env = append(slices.Clone(cfg.Env), env...)
		inst, err := c.Start(ctx, name, false)
		if err != nil {
			return err
		}
		defer inst.Stop()
		if err := sleep(ctx, 3*time.Second); err != nil {
			return err
		}
		if err := idle(inst); err != nil {
			return err
		}
		w := newWatcherPool(inst.APIURL, n)
		defer w.close()
		if err := w.open(ctx); err != nil {
			return err
		}
		if err := sleep(ctx, 2*time.Second); err != nil {
			return err
		}
		return open(inst)
	}
	err := measure("pprof", []string{"LEASEHOLD_PPROF=true"}, func(inst *fleet.Instance) (err error) {
		p.before, err = gcAndRead(ctx, inst, "")
		return err
	}, func(inst *fleet.Instance) error {
		var err error
		if p.after, err = gcAndRead(ctx, inst, ""); err != nil {
			return err
		}
		goroutines, err := fetch(ctx, inst.OpsURL+"/debug/pprof/goroutine?debug=1")
		p.goroutines = goroutinesByPlace(string(goroutines))
		return err
	})
	if err != nil {
		return p, err
	}
	idleHeap, watchHeap := filepath.Join(dir, "heap-idle.pb.gz"), filepath.Join(dir, "heap-watchers.pb.gz")
	err = measure("pprof-heap", []string{"LEASEHOLD_PPROF=true", "GODEBUG=memprofilerate=1"}, func(inst *fleet.Instance) error {
		_, err := gcAndRead(ctx, inst, idleHeap)
		return err
	}, func(inst *fleet.Instance) error {
		_, err := gcAndRead(ctx, inst, watchHeap)
		return err
	})
	if err != nil {
		return p, err
	}
	if p.idleTop, err = pprofTop(ctx, idleHeap); err != nil {
		return p, err
	}
	if p.heapTop, err = pprofTop(ctx, "-diff_base", idleHeap, watchHeap); err != nil {
		return p, err
	}
	return p, nil
}

// pprofTop is go tool pprof -top of the heap in use (args: the profiles),
// from its table's header on.
func pprofTop(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", append([]string{"tool", "pprof", "-top", "-nodecount=12", "-sample_index=inuse_space"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go tool pprof: %w\n%s", err, stderr.Bytes())
	}
	text := string(out)
	if i := strings.Index(text, "Showing nodes"); i >= 0 {
		text = text[i:]
	}
	return text, nil
}

// gcAndRead collects garbage twice (the second empties the sync.Pools'
// victim caches) through the heap profile, saves the second profile to
// path (unless ""), and reads the runtime's figures from /metrics.
func gcAndRead(ctx context.Context, inst *fleet.Instance, path string) (memstats, error) {
	var m memstats
	var heap []byte
	for range 2 {
		var err error
		if heap, err = fetch(ctx, inst.OpsURL+"/debug/pprof/heap?gc=1"); err != nil {
			return m, err
		}
	}
	if path != "" {
		if err := os.WriteFile(path, heap, 0o644); err != nil {
			return m, err
		}
	}
	metrics, err := inst.Metrics(ctx)
	if err != nil {
		return m, err
	}
	m.HeapInuse = metrics.Sum("go_memstats_heap_inuse_bytes", nil)
	m.StackInuse = metrics.Sum("go_memstats_stack_inuse_bytes", nil)
	m.Goroutines = metrics.Sum("go_goroutines", nil)
	return m, nil
}

// floorMemstats reads bench/floor's runtime figures (after two GCs).
func floorMemstats(ctx context.Context, inst *fleet.Instance, m *memstats) error {
	body, err := fetch(ctx, inst.OpsURL+"/memstats")
	if err != nil {
		return err
	}
	return json.Unmarshal(body, m)
}

// fetch GETs url and returns its body; anything but 200 is an error.
func fetch(ctx context.Context, url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	if _, err := body.ReadFrom(resp.Body); err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d", url, resp.StatusCode)
	}
	return body.Bytes(), nil
}

// goroutinesByPlace sums a goroutine profile (debug=1) by where each
// goroutine is: the innermost frame in a leasehold package, else the
// outermost frame that is not runtime.goexit.
func goroutinesByPlace(profile string) map[string]int {
	places := map[string]int{}
	for block := range strings.SplitSeq(profile, "\n\n") {
		lines := strings.Split(strings.TrimSpace(block), "\n")
		if strings.HasPrefix(lines[0], "goroutine profile:") { // the first block opens with the total
			lines = lines[1:]
		}
		if len(lines) == 0 {
			continue
		}
		count, _, ok := strings.Cut(lines[0], " @ ")
		n, err := strconv.Atoi(count)
		if !ok || err != nil {
			continue
		}
		var frames []string
		for _, l := range lines[1:] {
			fields := strings.Fields(l)
			if len(fields) >= 3 && fields[0] == "#" {
				fn, _, _ := strings.Cut(fields[2], "+0x")
				frames = append(frames, fn)
			}
		}
		place := "?"
		for i := len(frames) - 1; i >= 0; i-- {
			if frames[i] != "runtime.goexit" {
				place = frames[i]
				break
			}
		}
		for _, fn := range frames {
			if strings.HasPrefix(fn, "github.com/leasehold/") {
				place = fn
				break
			}
		}
		places[strings.TrimPrefix(place, "github.com/leasehold/leasehold/")] += n
	}
	return places
}

// memOf reads a process's resident memory from /proc/<pid>/smaps_rollup.
func memOf(pid int) (memSample, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return memSample{}, err
	}
	var s memSample
	for line := range strings.Lines(string(data)) {
		fields := strings.Fields(line)
		if len(fields) != 3 || fields[2] != "kB" {
			continue
		}
		kb, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			return memSample{}, err
		}
		switch fields[0] {
		case "Rss:":
			s.rss = kb * 1024
		case "Anonymous:":
			s.anon = kb * 1024
		}
	}
	if s.rss == 0 {
		return memSample{}, fmt.Errorf("no Rss for pid %d", pid)
	}
	return s, nil
}

// userHZ is the unit of /proc/<pid>/stat's times (USER_HZ, 100 on Linux).
const userHZ = 100

// cpuTime is the CPU time (user + system) a process has used so far.
func cpuTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces.
	_, rest, ok := strings.Cut(string(data), ") ")
	fields := strings.Fields(rest)
	if !ok || len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(fields[12], 10, 64) // field 15
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * time.Second / userHZ, nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// buildAt builds leasehold's sidecar as of git revision rev, with the same
// flags as fleet.Build (today's release flags, internal/buildflags), for
// the footprint section's "before" column.
func buildAt(ctx context.Context, dir, rev string) (footprintImpl, error) {
	src := filepath.Join(dir, "src-"+rev)
	if err := os.MkdirAll(src, 0o755); err != nil {
		return footprintImpl{}, err
	}
	// git archive run in a subdirectory (bench/) archives only that
	// subdirectory: run it at the repository's top level.
	top, err := exec.CommandContext(ctx, "git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return footprintImpl{}, fmt.Errorf("git rev-parse --show-toplevel: %w", err)
	}
	archive := exec.CommandContext(ctx, "git", "archive", "--format=tar", rev)
	archive.Dir = strings.TrimSpace(string(top))
	extract := exec.CommandContext(ctx, "tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return footprintImpl{}, err
	}
	extract.Stdin = pipe
	var stderr bytes.Buffer
	archive.Stderr, extract.Stderr = &stderr, &stderr
	if err := extract.Start(); err != nil {
		return footprintImpl{}, err
	}
	if err := archive.Run(); err != nil {
		return footprintImpl{}, fmt.Errorf("git archive %s: %w\n%s", rev, err, stderr.Bytes())
	}
	if err := extract.Wait(); err != nil {
		return footprintImpl{}, fmt.Errorf("tar: %w\n%s", err, stderr.Bytes())
	}
	bin := filepath.Join(dir, "leasehold-"+rev)
	flags := buildflags.Release()
	cmd := exec.CommandContext(ctx, "go", slices.Concat([]string{"build"}, flags.Args("test"), []string{"-o", bin, "./cmd/sidecar"})...)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), flags.Env()...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return footprintImpl{}, fmt.Errorf("go build at %s: %w\n%s", rev, err, out)
	}
	return footprintImpl{name: "leasehold at " + rev, binary: bin, pkg: "./cmd/sidecar", dir: src}, nil
}

// median of int64 values.
func medianInt(v []int64) int64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// rssOf and anonOf pick one field of every sample.
func rssOf(s []memSample) []int64  { return pick(s, func(m memSample) int64 { return m.rss }) }
func anonOf(s []memSample) []int64 { return pick(s, func(m memSample) int64 { return m.anon }) }

func pick(s []memSample, f func(memSample) int64) []int64 {
	out := make([]int64, len(s))
	for i, m := range s {
		out[i] = f(m)
	}
	return out
}
