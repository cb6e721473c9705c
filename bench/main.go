// Command bench measures leasehold against a real kube-apiserver, side by
// side with a baseline built on client-go's own LeaderElector
// (bench/baseline), in the same run and on the same apiserver (`make
// bench`):
//
//   - graceful handover (SIGTERM to the leader) and crash failover (SIGKILL)
//     latency, until a successor's GET /v1/leader long-poll answers 200;
//   - API requests made by the leader per renewal and by candidates;
//   - overlaps (two instances claiming leadership at once, with certainty)
//     in partition and process-pause trials;
//   - for leasehold alone, the localhost HTTP API's throughput, watcher
//     wake-up latency and memory;
//   - for leasehold alone, the app-aware features: how soon a replica with
//     a healthy app leads after the leader's app fails (health-gated
//     candidacy), and how far the leader label lags behind leadership;
//   - the footprint of one instance at the default configuration, side by
//     side: binary size and linked packages, RSS idle while leading and
//     with open watchers, CPU while leading, start-up time to readiness,
//     GET /v1/status throughput, with net/http alone as the floor of the
//     watchers' cost and leasehold's heap profile (footprint.go). It can run
//     alone: -only footprint;
//   - lease groups, side by side with one client-go LeaderElector per Lease:
//     a scale-up from one member to several (time until the shares are
//     fair, Lease moves, max / mean Leases per member), each Lease of a
//     member that exits gracefully or crashes held again, Leases with two
//     valid holders at once, the settled group's apiserver requests, and the
//     memory and CPU of one process holding a large group (groups.go). It
//     can run alone: -only groups;
//   - the leader address, the forwarding proxy and handover to a chosen
//     successor (issue 13): leadership changes in rolling updates,
//     leasehold with LEASEHOLD_HANDOVER=successor side by side with its
//     default and client-go; SIGTERM and POST /v1/release?to= → the
//     successor leads; leaderAddress on the followers; the proxy's added
//     latency through real sidecars; 503s and fencing through the proxies
//     during handovers (handover.go). It can run alone: -only handover.
//
// The overlap trials (partition and pause) can run alone too: -only overlap
// (with -partitions and -pauses; about 7 s per trial, 5 minutes for 10 of
// each per implementation).
// Overlaps, in those trials and per Lease in the lease groups, are judged
// by internal/testing/overlap, the fault suite's rule.
//
// Each section's figures, summarised, with the command, the date and the
// machine, are a JSON file of package benchdoc's schema. The run prints
// the sections it measured as the document renders them; with -out
// (docs/benchmarks.md) it writes each of their files into the document's
// data directory (docs/benchmarks/<section>.json), replacing only those
// (with -only, that one section's), and the latency plot beside the
// document, then renders the document from every section file there
// through benchdoc's one template. -render measures nothing and only
// renders (make bench-render).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/leasehold/leasehold/bench/benchdoc"
	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
)

func main() {
	var opts options
	flag.IntVar(&opts.handovers, "handovers", 20, "graceful handover trials (SIGTERM to the leader), per implementation")
	flag.IntVar(&opts.failovers, "failovers", 10, "crash failover trials (SIGKILL to the leader), per implementation")
	flag.IntVar(&opts.partitions, "partitions", 20, "partition trials (black-hole the leader until another leads), per implementation")
	flag.IntVar(&opts.pauses, "pauses", 20, "pause trials (SIGSTOP the leader for longer than leaseDuration), per implementation")
	flag.DurationVar(&opts.leaseDuration, "lease-duration", 5*time.Second, "leaseDuration of both implementations")
	flag.DurationVar(&opts.renewDeadline, "renew-deadline", 3*time.Second, "renewDeadline of both implementations")
	flag.DurationVar(&opts.retryPeriod, "retry-period", time.Second, "retryPeriod of both implementations")
	flag.DurationVar(&opts.requestWindow, "request-window", 30*time.Second, "how long to count API requests for")
	flag.IntVar(&opts.statusConns, "status-conns", 64, "keep-alive connections loading GET /v1/status")
	flag.DurationVar(&opts.statusLoad, "status-load", 5*time.Second, "how long to load GET /v1/status")
	flag.IntVar(&opts.watchers, "watchers", 1000, "open watchers (half long-poll, half SSE)")
	flag.IntVar(&opts.changes, "changes", 10, "Lease changes the watchers are woken by")
	flag.IntVar(&opts.appTrials, "app-trials", 20, "app-aware feature trials: app failures, and leader-label handovers and failovers (each); 0 skips them")
	flag.DurationVar(&opts.appInterval, "app-health-interval", time.Second, "LEASEHOLD_APP_HEALTH_INTERVAL in the app-failure trials")
	flag.DurationVar(&opts.appTimeout, "app-health-timeout", 500*time.Millisecond, "LEASEHOLD_APP_HEALTH_TIMEOUT in the app-failure trials")
	flag.IntVar(&opts.appThreshold, "app-health-threshold", 3, "LEASEHOLD_APP_HEALTH_FAILURE_THRESHOLD in the app-failure trials")
	flag.StringVar(&opts.out, "out", "", "also write each measured section's figures to <out without .md>/<section>.json (and the latency plot beside out), then render out from every section file there")
	flag.BoolVar(&opts.render, "render", false, "measure nothing: only render -out from its section files")
	flag.StringVar(&opts.only, "only", "", `run only this section: "footprint", "overlap" (the partition and pause trials), "groups" or "handover"; with -out, only that section's file is replaced`)
	flag.DurationVar(&opts.footprintWindow, "footprint-window", time.Minute, "footprint: the idle window over which CPU is measured and RSS sampled")
	flag.IntVar(&opts.footprintRounds, "footprint-rounds", 5, "footprint: rounds of GET /v1/status load (each -status-load long) per implementation")
	flag.IntVar(&opts.starts, "starts", 20, "footprint: starts of each implementation, timed to /readyz 200")
	flag.StringVar(&opts.footprintRef, "footprint-ref", "", "footprint: also measure leasehold as of this git revision (a column of its own)")
	flag.StringVar(&opts.footprintGomemlimit, "footprint-gomemlimit", "", "footprint: also measure leasehold with this GOMEMLIMIT (a column of its own)")
	flag.Func("footprint-extra", "footprint: also measure this leasehold-compatible binary, as name=path (repeatable)", func(v string) error {
		name, path, ok := strings.Cut(v, "=")
		if !ok || name == "" || path == "" {
			return fmt.Errorf("want name=path, got %q", v)
		}
		opts.footprintExtra = append(opts.footprintExtra, footprintImpl{name: name, binary: path})
		return nil
	})
	flag.IntVar(&opts.groupsTrials, "groups-trials", 3, "groups: trials per implementation (each: scale-up, graceful exit, crash)")
	flag.IntVar(&opts.groupsShards, "groups-shards", 64, "groups: LEASEHOLD_SHARDS of the group")
	flag.IntVar(&opts.groupsMembers, "groups-members", 4, "groups: members after the scale-up from one")
	flag.DurationVar(&opts.groupsLeaseDuration, "groups-lease-duration", 15*time.Second, "groups: leaseDuration of both implementations (default: the sidecar's)")
	flag.DurationVar(&opts.groupsRenewDeadline, "groups-renew-deadline", 10*time.Second, "groups: renewDeadline of both implementations (default: the sidecar's)")
	flag.DurationVar(&opts.groupsRetryPeriod, "groups-retry-period", 2*time.Second, "groups: retryPeriod of both implementations (default: the sidecar's)")
	flag.DurationVar(&opts.groupsWindow, "groups-window", 15*time.Second, "groups: how long after the last member's start the scale-up is observed at least (max / mean is read at its end)")
	flag.DurationVar(&opts.groupsSampleInterval, "groups-sample-interval", 25*time.Millisecond, "groups: how often each member's GET /v1/leases is sampled for the overlap check")
	flag.IntVar(&opts.groupsBig, "groups-big", 256, "groups: Leases of the one-process group whose memory and CPU are measured; 0 skips it")
	flag.DurationVar(&opts.groupsBigWindow, "groups-big-window", 30*time.Second, "groups: one window over which that process's CPU is measured and RSS sampled")
	flag.IntVar(&opts.groupsBigWindows, "groups-big-windows", 3, "groups: consecutive windows of that process; its CPU is the median window's")
	flag.IntVar(&opts.handoverTrials, "handover-trials", 20, "handover: rolling updates of 3 replicas per implementation (leasehold with HANDOVER=successor, leasehold default, client-go)")
	flag.IntVar(&opts.handoverReleases, "handover-releases", 20, "handover: POST /v1/release?to= handovers to a random member, timed")
	flag.IntVar(&opts.handoverProxyTrials, "handover-proxy-trials", 20, "handover: graceful handovers (SIGTERM to the leader) under load on every forwarding proxy")
	flag.IntVar(&opts.handoverRequests, "handover-requests", 20000, "handover: requests each way (direct, via the leader's proxy, via a follower's) for the proxy's added latency; 0 skips it")
	flag.Parse()
	if opts.only != "" && opts.only != "footprint" && opts.only != "overlap" && opts.only != "groups" && opts.only != "handover" {
		fmt.Fprintf(os.Stderr, "bench: -only %q: the sections that run alone are footprint, overlap, groups and handover\n", opts.only)
		os.Exit(2)
	}
	if opts.handoverTrials < 1 || opts.handoverReleases < 0 || opts.handoverProxyTrials < 0 || opts.handoverRequests < 0 {
		fmt.Fprintln(os.Stderr, "bench: -handover-trials must be at least 1; -handover-releases, -handover-proxy-trials and -handover-requests not negative")
		os.Exit(2)
	}
	if opts.groupsMembers < 1 || opts.groupsShards < opts.groupsMembers || opts.groupsTrials < 1 {
		fmt.Fprintln(os.Stderr, "bench: -groups-trials must be at least 1, and -groups-shards at least -groups-members, at least 1")
		os.Exit(2)
	}
	if opts.render {
		if opts.out == "" {
			fmt.Fprintln(os.Stderr, "bench: -render needs -out, the document to render")
			os.Exit(2)
		}
		if err := benchdoc.RenderFile(benchdoc.DataDir(opts.out), opts.out); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	opts.command = "cd bench && go run . " + strings.Join(os.Args[1:], " ")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type options struct {
	handovers, failovers, partitions, pauses  int
	leaseDuration, renewDeadline, retryPeriod time.Duration
	requestWindow                             time.Duration
	statusConns, watchers, changes            int
	statusLoad                                time.Duration
	appTrials, appThreshold                   int
	appInterval, appTimeout                   time.Duration
	out, command                              string
	render                                    bool
	only                                      string
	footprintWindow                           time.Duration
	footprintRounds, starts                   int
	footprintRef, footprintGomemlimit         string
	footprintExtra                            []footprintImpl
	groupsTrials, groupsShards, groupsMembers int
	groupsLeaseDuration, groupsRenewDeadline  time.Duration
	groupsRetryPeriod, groupsWindow           time.Duration
	groupsSampleInterval, groupsBigWindow     time.Duration
	groupsBig, groupsBigWindows               int
	handoverTrials, handoverReleases          int
	handoverProxyTrials, handoverRequests     int
}

// implementation is one thing being measured: a binary that answers
// leasehold's GET /v1/status and /v1/leader and reads LEASEHOLD_* variables.
type implementation struct {
	name   string
	binary string
}

// results are one implementation's figures.
type results struct {
	impl                 implementation
	misses, restarts     int // see group
	handovers, failovers []time.Duration
	requests             requestCounts
	partition, pause     faultResults
}

func run(ctx context.Context, opts options) error {
	cluster, err := kubetest.Start(ctx, kubetest.Options{})
	if err != nil {
		return err
	}
	defer cluster.Stop()
	dir, err := os.MkdirTemp("", "leasehold-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	leasehold, err := fleet.Build(ctx, dir)
	if err != nil {
		return err
	}
	baseline, err := fleet.BuildCommand(ctx, dir, "github.com/leasehold/leasehold/bench/baseline")
	if err != nil {
		return err
	}
	base := fleet.Config{
		Cluster: cluster, Dir: dir,
		LeaseDuration: opts.leaseDuration, RenewDeadline: opts.renewDeadline, RetryPeriod: opts.retryPeriod,
	}
	fmt.Fprintf(os.Stderr, "bench: leaseDuration %v, renewDeadline %v, retryPeriod %v\n", opts.leaseDuration, opts.renewDeadline, opts.retryPeriod)

	rep := &report{opts: opts, run: benchdoc.NewRun(opts.command)}
	impls := []implementation{{"leasehold", leasehold}, {"client-go LeaderElector", baseline}}
	if opts.only == "" || opts.only == "footprint" {
		if rep.footprint, err = footprintRun(ctx, cluster, base, dir, leasehold, baseline, opts); err != nil {
			return fmt.Errorf("footprint: %w", err)
		}
	}
	switch opts.only {
	case "overlap":
		for _, impl := range impls {
			r, err := measureOverlap(ctx, cluster, base, impl, opts)
			if err != nil {
				return fmt.Errorf("%s: %w", impl.name, err)
			}
			rep.results = append(rep.results, r)
		}
	case "":
		for _, impl := range impls {
			r, err := measure(ctx, cluster, base, impl, opts)
			if err != nil {
				return fmt.Errorf("%s: %w", impl.name, err)
			}
			rep.results = append(rep.results, r)
		}
		base.Binary = leasehold
		if rep.http, err = benchHTTP(ctx, cluster, base, opts.statusConns, opts.watchers, opts.changes, opts.statusLoad); err != nil {
			return err
		}
		if rep.app, err = benchApp(ctx, cluster, base, opts); err != nil {
			return err
		}
		rep.election = true
	}
	if opts.only == "" || opts.only == "groups" {
		if rep.groups, err = benchGroups(ctx, cluster, dir, leasehold, baseline, opts); err != nil {
			return fmt.Errorf("groups: %w", err)
		}
	}
	if opts.only == "" || opts.only == "handover" {
		if rep.handover, err = benchHandover(ctx, cluster, dir, leasehold, baseline, opts); err != nil {
			return fmt.Errorf("handover: %w", err)
		}
	}
	// The section files first: a figure the template cannot render loses
	// no measurement.
	if opts.out != "" {
		if err := rep.write(opts.out); err != nil {
			return err
		}
	}
	md, err := benchdoc.Render(rep.doc(""))
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(md)
	return err
}

// footprintRun builds what the footprint section measures besides the two
// implementations (net/http alone; leasehold at -footprint-ref) and runs
// it.
func footprintRun(ctx context.Context, cluster *kubetest.Cluster, base fleet.Config, dir, leasehold, baseline string, opts options) (footprintFigures, error) {
	floor, err := fleet.BuildCommand(ctx, dir, "github.com/leasehold/leasehold/bench/floor")
	if err != nil {
		return footprintFigures{}, err
	}
	impls := []footprintImpl{
		{name: "leasehold", binary: leasehold, pkg: "github.com/leasehold/leasehold/cmd/sidecar"},
		{name: "client-go LeaderElector", binary: baseline, pkg: "github.com/leasehold/leasehold/bench/baseline"},
	}
	if opts.footprintGomemlimit != "" {
		impls = append(impls, footprintImpl{
			name: "leasehold, GOMEMLIMIT=" + opts.footprintGomemlimit, binary: leasehold, pkg: "github.com/leasehold/leasehold/cmd/sidecar",
			env: []string{"GOMEMLIMIT=" + opts.footprintGomemlimit},
		})
	}
	if opts.footprintRef != "" {
		ref, err := buildAt(ctx, dir, opts.footprintRef)
		if err != nil {
			return footprintFigures{}, err
		}
		impls = append(impls, ref)
	}
	impls = append(impls, opts.footprintExtra...)
	return benchFootprint(ctx, cluster, base, impls, floor, opts)
}

// measure runs every election trial on one implementation, in a namespace
// of its own, with three instances each behind its own cuttable proxy.
func measure(ctx context.Context, cluster *kubetest.Cluster, base fleet.Config, impl implementation, opts options) (results, error) {
	r := results{impl: impl}
	ns, err := cluster.CreateNamespace(ctx, "bench")
	if err != nil {
		return r, err
	}
	cfg := base
	cfg.Binary, cfg.Namespace, cfg.Lease = impl.binary, ns, "bench"
	g := &group{cfg: cfg, name: impl.name}
	defer g.stop()
	if err := g.fill(ctx, 3); err != nil {
		return r, err
	}
	if r.requests, err = countRequests(ctx, g, opts.requestWindow); err != nil {
		return r, err
	}
	if r.handovers, err = g.trials(ctx, "handover", opts.handovers, syscall.SIGTERM); err != nil {
		return r, err
	}
	if r.failovers, err = g.trials(ctx, "failover", opts.failovers, syscall.SIGKILL); err != nil {
		return r, err
	}
	if err := g.overlapTrials(ctx, &r, opts); err != nil {
		return r, err
	}
	r.misses, r.restarts = g.misses, g.restarts
	return r, nil
}

// measureOverlap runs only the overlap trials (-only overlap), on a group
// of its own as measure does.
func measureOverlap(ctx context.Context, cluster *kubetest.Cluster, base fleet.Config, impl implementation, opts options) (results, error) {
	r := results{impl: impl}
	ns, err := cluster.CreateNamespace(ctx, "bench")
	if err != nil {
		return r, err
	}
	cfg := base
	cfg.Binary, cfg.Namespace, cfg.Lease = impl.binary, ns, "bench"
	g := &group{cfg: cfg, name: impl.name}
	defer g.stop()
	if err := g.fill(ctx, 3); err != nil {
		return r, err
	}
	err = g.overlapTrials(ctx, &r, opts)
	r.misses, r.restarts = g.misses, g.restarts
	return r, err
}

// overlapTrials runs the partition and pause trials.
func (g *group) overlapTrials(ctx context.Context, r *results, opts options) error {
	var err error
	if r.partition, err = g.faultTrials(ctx, partition, opts.partitions); err != nil {
		return err
	}
	r.pause, err = g.faultTrials(ctx, pause, opts.pauses)
	return err
}
