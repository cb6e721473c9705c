// Command baseline is what a user would write from client-go's
// documentation: a leaderelection.LeaderElector on a LeaseLock with
// ReleaseOnCancel and the same timings as leasehold. The bench runs it side
// by side with leasehold, on the same apiserver, through the same HTTP
// questions, so that the two are measured alike:
//
//   - GET /v1/status → {"identity","leader","holder"}, where leader is the
//     app's view in client-go's model: OnStartedLeading has been called and
//     its context is not yet cancelled;
//   - GET /v1/leader[?wait=D] → 200 when leader, else 503 (after waiting up
//     to D for leadership);
//   - GET /v1/watch?index=N&wait=D, a blocking query like leasehold's: the
//     status at once when its index differs from N, else when it changes or
//     D has passed; with Accept: text/event-stream, Server-Sent Events (the
//     status, then one event per change, a heartbeat comment every 15s).
//     The index counts changes of leadership. It is written as a user would
//     write it from net/http's documentation: a timer per long-poll, a
//     timer and a ticker per stream;
//   - GET /readyz, GET /metrics (leasehold_kube_requests_total) on the OPS
//     address.
//
// With a lease group configured (LEASEHOLD_SHARDS or LEASEHOLD_LEASES) it
// runs one LeaderElector per Lease instead, and answers GET /v1/leases
// (group.go).
//
// It reads leasehold's own LEASEHOLD_* variables (internal/config) so the
// bench's process runner starts both the same way. client-go's Run
// campaigns once, so, as the library's examples do, the process exits
// (status 1) when it loses leadership, and the bench starts a new one in its
// place, as a kubelet would restart the container. SIGTERM cancels Run's
// context, which releases the Lease (ReleaseOnCancel), and exits 0.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/leasehold/leasehold/internal/config"
	"github.com/leasehold/leasehold/internal/kubeclient"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "baseline:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	registry := prometheus.NewRegistry()
	restConfig, err := kubeclient.New(kubeclient.Options{
		Kubeconfig: os.Getenv("KUBECONFIG"), UserAgent: "leasehold-bench-baseline",
		Requests: kubeclient.NewRequestMetrics(registry),
	})
	if err != nil {
		return err
	}
	clientset, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	if cfg.Grouped() {
		return serveGroup(cfg, clientset, registry)
	}
	state := &leaderState{identity: cfg.Identity, changed: make(chan struct{})}
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.LeaseNamespace, Name: cfg.LeaseName},
			Client:     clientset.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
		},
		LeaseDuration:   cfg.LeaseDuration,
		RenewDeadline:   cfg.RenewDeadline,
		RetryPeriod:     cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				state.set(true)
				<-ctx.Done()
				state.set(false)
			},
			OnStoppedLeading: func() { state.set(false) },
		},
	})
	if err != nil {
		return err
	}
	state.elector = elector

	apiListener, err := net.Listen("tcp", cfg.APIAddr)
	if err != nil {
		return err
	}
	opsListener, err := net.Listen("tcp", cfg.OpsAddr)
	if err != nil {
		return err
	}
	api := http.NewServeMux()
	api.HandleFunc("GET /v1/status", state.handleStatus)
	api.HandleFunc("GET /v1/leader", state.handleLeader)
	api.HandleFunc("GET /v1/watch", state.handleWatch)
	ops := http.NewServeMux()
	ops.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	ops.Handle("GET /metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	go http.Serve(apiListener, api) //nolint:errcheck // the process ends with Run
	go http.Serve(opsListener, ops) //nolint:errcheck
	// internal/testing/fleet trusts /readyz only once the process has logged this.
	fmt.Fprintf(os.Stderr, "baseline: leasehold started (api %s, ops %s)\n", apiListener.Addr(), opsListener.Addr())

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	elector.Run(ctx) // returns when leadership is lost or ctx ends (releasing)
	if ctx.Err() == nil {
		return errors.New("lost leadership; exiting so that a new process campaigns again")
	}
	return nil
}

// leaderState is the app's view of leadership in client-go's model.
type leaderState struct {
	identity string
	elector  *leaderelection.LeaderElector

	mu      sync.Mutex
	leading bool
	index   uint64        // changes of leading so far
	changed chan struct{} // closed and replaced on every change
}

func (s *leaderState) set(leading bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leading != leading {
		s.leading = leading
		s.index++
		close(s.changed)
		s.changed = make(chan struct{})
	}
}

func (s *leaderState) get() (bool, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leading, s.changed
}

type status struct {
	Identity string `json:"identity"`
	Leader   bool   `json:"leader"`
	Holder   string `json:"holder"`
	Index    uint64 `json:"index"`
}

// status returns the status and the channel closed on its next change.
func (s *leaderState) status() (status, <-chan struct{}) {
	s.mu.Lock()
	st := status{Identity: s.identity, Leader: s.leading, Index: s.index}
	changed := s.changed
	s.mu.Unlock()
	st.Holder = s.elector.GetLeader()
	return st, changed
}

func (s *leaderState) handleStatus(w http.ResponseWriter, _ *http.Request) {
	st, _ := s.status()
	writeJSON(w, http.StatusOK, st)
}

func (s *leaderState) handleLeader(w http.ResponseWriter, r *http.Request) {
	wait, _ := time.ParseDuration(r.URL.Query().Get("wait"))
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for leading, changed := s.get(); !leading && wait > 0; leading, changed = s.get() {
		select {
		case <-changed:
		case <-timer.C:
			wait = 0
		case <-r.Context().Done():
			return
		}
	}
	st, _ := s.status()
	code := http.StatusOK
	if !st.Leader {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, st)
}

// handleWatch serves GET /v1/watch?index=N&wait=D (default 5m): a long-poll,
// or Server-Sent Events with Accept: text/event-stream.
func (s *leaderState) handleWatch(w http.ResponseWriter, r *http.Request) {
	wait := 5 * time.Minute
	if d, err := time.ParseDuration(r.URL.Query().Get("wait")); err == nil {
		wait = d
	}
	st, changed := s.status()
	if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		s.stream(w, r, wait, st, changed)
		return
	}
	if index, err := strconv.ParseUint(r.URL.Query().Get("index"), 10, 64); err == nil && index == st.Index {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		select {
		case <-changed:
		case <-timer.C:
		case <-r.Context().Done():
			return
		}
		st, _ = s.status()
	}
	writeJSON(w, http.StatusOK, st)
}

// stream sends the status, then one event per change and a heartbeat
// comment every 15s, until wait has passed or the client leaves.
func (s *leaderState) stream(w http.ResponseWriter, r *http.Request, wait time.Duration, st status, changed <-chan struct{}) {
	w.Header().Set("Content-Type", "text/event-stream")
	timer := time.NewTimer(wait)
	defer timer.Stop()
	heartbeat := time.NewTicker(15 * time.Second)
	defer heartbeat.Stop()
	rc := http.NewResponseController(w)
	send := func(text string) bool {
		_, err := fmt.Fprint(w, text)
		return err == nil && rc.Flush() == nil
	}
	event := func(st status) string {
		data, _ := json.Marshal(st)
		return fmt.Sprintf("id: %d\nevent: status\ndata: %s\n\n", st.Index, data)
	}
	for ok := send(event(st)); ok; {
		select {
		case <-changed:
			st, changed = s.status()
			ok = send(event(st))
		case <-heartbeat.C:
			ok = send(": heartbeat\n\n")
		case <-timer.C:
			return
		case <-r.Context().Done():
			return
		}
	}
}

// serveGroup is run for a lease group: one LeaderElector per Lease
// (group.go), GET /v1/leases, and the OPS endpoints.
func serveGroup(cfg config.Config, clientset kubernetes.Interface, registry *prometheus.Registry) error {
	g := newGroupState(cfg)
	apiListener, err := net.Listen("tcp", cfg.APIAddr)
	if err != nil {
		return err
	}
	opsListener, err := net.Listen("tcp", cfg.OpsAddr)
	if err != nil {
		return err
	}
	api := http.NewServeMux()
	api.HandleFunc("GET /v1/leases", g.handleLeases)
	ops := http.NewServeMux()
	ops.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	ops.Handle("GET /metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	go http.Serve(apiListener, api) //nolint:errcheck // the process ends with runGroup
	go http.Serve(opsListener, ops) //nolint:errcheck
	fmt.Fprintf(os.Stderr, "baseline: leasehold started (api %s, ops %s, %d Leases)\n", apiListener.Addr(), opsListener.Addr(), len(cfg.Leases))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return runGroup(ctx, cfg, clientset, g)
}
