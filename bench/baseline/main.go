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
//   - GET /readyz, GET /metrics (leasehold_kube_requests_total) on the OPS
//     address.
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
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
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
	ops := http.NewServeMux()
	ops.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	ops.Handle("GET /metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	go http.Serve(apiListener, api) //nolint:errcheck // the process ends with Run
	go http.Serve(opsListener, ops) //nolint:errcheck

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
	changed chan struct{} // closed and replaced on every change
}

func (s *leaderState) set(leading bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leading != leading {
		s.leading = leading
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
}

func (s *leaderState) status() status {
	leading, _ := s.get()
	return status{Identity: s.identity, Leader: leading, Holder: s.elector.GetLeader()}
}

func (s *leaderState) handleStatus(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.status())
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
	st := s.status()
	code := http.StatusOK
	if !st.Leader {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, st)
}
