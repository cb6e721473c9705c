package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/config"
	"github.com/leasehold/leasehold/internal/group"
	"github.com/leasehold/leasehold/internal/kubeclient"
	"github.com/leasehold/leasehold/internal/podlabel"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
	"github.com/leasehold/leasehold/internal/testing/poll"
)

// The sidecar in-process, through its seam (newSidecar, Run), against the
// real apiserver: the process-level tests (sidecar_test.go,
// shutdown_test.go) cover signals and exit statuses.

// inProcess is one sidecar built by newSidecar, with what its test needs to
// look at it.
type inProcess struct {
	cfg      config.Config
	sc       *sidecar
	api, ops string // http://host:port
	probes   atomic.Int64
	pods     interface {
		Get(context.Context, string, metav1.GetOptions) (*corev1.Pod, error)
	}
	cluster  *kubetest.Cluster
	registry *prometheus.Registry
}

const (
	inProcessPod   = "pod-a"
	inProcessLabel = "leasehold.io/leader"
)

// newInProcess configures a sidecar from the environment as the binary
// does (config.Loader), with health-gated candidacy on an app that answers
// 200 and the leader label on a Pod of its own, and builds it on the shared
// apiserver with fresh listeners and registry. env changes that
// environment: a variable set to "" is left unset.
func newInProcess(t *testing.T, env ...string) *inProcess {
	t.Helper()
	cluster := sharedCluster(t)
	ns, err := cluster.CreateNamespace(t.Context(), "inproc")
	if err != nil {
		t.Fatal(err)
	}
	cs := cluster.Clientset()
	// No controller manager creates the default ServiceAccount that
	// admission looks up for every Pod.
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(t.Context(),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: inProcessPod},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: new(false),
			Containers:                   []corev1.Container{{Name: "app", Image: "example.com/app:1"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := &inProcess{pods: cs.CoreV1().Pods(ns), cluster: cluster, registry: prometheus.NewRegistry()}
	app := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { p.probes.Add(1) }))
	t.Cleanup(app.Close)

	vars := map[string]string{
		"LEASEHOLD_LEASE_NAME":                   "app",
		"LEASEHOLD_LEASE_NAMESPACE":              ns,
		"POD_NAME":                               inProcessPod,
		"POD_NAMESPACE":                          ns,
		"LEASEHOLD_LEASE_DURATION":               "3s",
		"LEASEHOLD_RENEW_DEADLINE":               "2s",
		"LEASEHOLD_RETRY_PERIOD":                 "500ms",
		"LEASEHOLD_APP_HEALTH_URL":               app.URL + "/healthz",
		"LEASEHOLD_APP_HEALTH_INTERVAL":          "100ms",
		"LEASEHOLD_APP_HEALTH_TIMEOUT":           "100ms",
		"LEASEHOLD_APP_HEALTH_FAILURE_THRESHOLD": "1",
		"LEASEHOLD_POD_LABEL":                    inProcessLabel,
	}
	for i := 0; i+1 < len(env); i += 2 {
		vars[env[i]] = env[i+1]
	}
	for k, v := range vars {
		if v != "" {
			t.Setenv(k, v)
		}
	}
	if p.cfg, err = config.Load(); err != nil {
		t.Fatal(err)
	}
	rest, err := kubeclient.New(kubeclient.Options{Kubeconfig: cluster.Admin().Kubeconfig, UserAgent: "leasehold/in-process-test"})
	if err != nil {
		t.Fatal(err)
	}
	api, ops := listen(t), listen(t)
	p.api, p.ops = "http://"+api.Addr().String(), "http://"+ops.Addr().String()
	p.sc, err = newSidecar(p.cfg, sidecarDeps{
		rest: rest, api: api, ops: ops, registry: p.registry,
		log: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// run starts Run in the background; its error arrives on the channel.
func (p *inProcess) run(ctx context.Context) <-chan error {
	done := make(chan error, 1)
	go func() { done <- p.sc.Run(ctx) }()
	return done
}

// holder reads the Lease's holder from the apiserver.
func (p *inProcess) holder(t *testing.T) string {
	t.Helper()
	l, err := p.cluster.Clientset().CoordinationV1().Leases(p.cfg.LeaseNamespace).Get(context.Background(), "app", metav1.GetOptions{})
	if err != nil {
		t.Errorf("get the Lease: %v", err)
		return "<error>"
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// label reads the leader label of the sidecar's Pod from the apiserver.
func (p *inProcess) label(t *testing.T) string {
	t.Helper()
	pod, err := p.pods.Get(context.Background(), inProcessPod, metav1.GetOptions{})
	if err != nil {
		t.Errorf("get the Pod: %v", err)
		return "<error>"
	}
	return pod.Labels[inProcessLabel]
}

// watchers reads the leasehold_watchers gauge: the open blocking requests.
func (p *inProcess) watchers(t *testing.T) float64 {
	t.Helper()
	families, err := p.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range families {
		if f.GetName() == "leasehold_watchers" {
			for _, m := range f.GetMetric() {
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

// status is the part of /v1/status these tests read.
type status struct {
	Leader bool   `json:"leader"`
	Holder string `json:"holder"`
	Index  uint64 `json:"index"`
}

// apiAnswer is one answer of the sidecar's API.
type apiAnswer struct {
	code       int
	retryAfter string
	status     status // when code is 200 and the body is a status
	err        error
}

// getAnswer sends GET url and reads the answer, within ctx.
func getAnswer(ctx context.Context, url string) apiAnswer {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return apiAnswer{err: err}
	}
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}).Do(req)
	if err != nil {
		return apiAnswer{err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	r := apiAnswer{code: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), err: err}
	if r.err == nil && r.code == http.StatusOK && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		r.err = json.Unmarshal(body, &r.status)
	}
	return r
}

// getSoon is getAnswer bounded by a few seconds: an answer that should come at
// once.
func getSoon(url string) apiAnswer {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return getAnswer(ctx, url)
}

// await polls cond until it holds, failing t after a generous bound.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, 30*time.Second, 20*time.Millisecond, what, cond)
}

// The shutdown order, step by step, as the world sees it: the test stops
// the shutdown after each step (sidecar.stepped) and reads the readiness,
// the API, the Lease and the Pod label from the apiserver, and an open
// long-poll. Each step has its effect before the next begins:
//
//  1. readiness fails, and nothing else: still leading, the Lease still
//     held, the label still "true", the open long-poll still open;
//  2. the prober stops: no probe after it, and still no release;
//  3. the election stops reporting and releases: the open long-poll is
//     told leader:false, the Lease's holder is empty, /v1/leader says 503,
//     and the API still serves;
//  4. the labeler clears the label: "false";
//  5. blocking requests end: a long-poll at the current index is refused
//     with 503 and Retry-After at once;
//  6. the servers close: the API refuses connections.
func TestShutdownOrderInProcess(t *testing.T) {
	p := newInProcess(t)
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	done := p.run(ctx)

	var st status
	await(t, "leadership", func() bool {
		r := getSoon(p.api + "/v1/status")
		st = r.status
		return r.err == nil && r.status.Leader
	})
	await(t, `leader label "true"`, func() bool { return p.label(t) == "true" })
	if h := p.holder(t); h != p.cfg.Identity {
		t.Fatalf("the Lease's holder is %q, want this sidecar %q", h, p.cfg.Identity)
	}
	pollCtx, cancelPoll := context.WithTimeout(t.Context(), time.Minute)
	defer cancelPoll()
	poll := make(chan apiAnswer, 1)
	go func() {
		poll <- getAnswer(pollCtx, p.api+"/v1/watch?index="+strconv.FormatUint(st.Index, 10)+"&wait=1m")
	}()
	await(t, "open long-poll", func() bool { return p.watchers(t) == 1 })

	var steps []string
	var probesAfterProber int64
	p.sc.stepped = func(step string) {
		steps = append(steps, step)
		switch step {
		case stepReadiness:
			if r := getSoon(p.ops + "/readyz"); r.code != http.StatusServiceUnavailable {
				t.Errorf("%s: /readyz %d (err %v), want 503", step, r.code, r.err)
			}
			if r := getSoon(p.api + "/v1/leader"); r.code != http.StatusOK {
				t.Errorf("%s: /v1/leader %d (err %v), want 200: still leading", step, r.code, r.err)
			}
			if h := p.holder(t); h != p.cfg.Identity {
				t.Errorf("%s: the Lease's holder %q, want still this sidecar", step, h)
			}
			if l := p.label(t); l != "true" {
				t.Errorf("%s: label %q, want still true", step, l)
			}
			if len(poll) != 0 {
				t.Errorf("%s: the open long-poll was answered: %+v", step, <-poll)
			}
		case stepProber:
			probesAfterProber = p.probes.Load()
			if h := p.holder(t); h != p.cfg.Identity {
				t.Errorf("%s: the Lease's holder %q, want still this sidecar", step, h)
			}
		case stepElection:
			if h := p.holder(t); h != "" {
				t.Errorf("%s: the Lease's holder %q, want it released", step, h)
			}
			select {
			case r := <-poll:
				if r.err != nil || r.code != http.StatusOK || r.status.Leader || r.status.Index <= st.Index {
					t.Errorf("%s: the open long-poll answered %d %+v (err %v), want 200 with leader:false at a later index", step, r.code, r.status, r.err)
				}
			case <-time.After(10 * time.Second):
				t.Errorf("%s: the open long-poll was not answered", step)
			}
			if r := getSoon(p.api + "/v1/leader"); r.code != http.StatusServiceUnavailable {
				t.Errorf("%s: /v1/leader %d (err %v), want 503 from a serving API", step, r.code, r.err)
			}
		case stepLabeler:
			if l := p.label(t); l != "false" {
				t.Errorf("%s: label %q, want false", step, l)
			}
		case stepBlocking:
			r := getSoon(p.api + "/v1/status")
			if r.err != nil || r.code != http.StatusOK {
				t.Errorf("%s: /v1/status %d (err %v), want 200", step, r.code, r.err)
				break
			}
			r = getSoon(p.api + "/v1/watch?index=" + strconv.FormatUint(r.status.Index, 10) + "&wait=1m")
			if r.code != http.StatusServiceUnavailable || r.retryAfter == "" {
				t.Errorf("%s: a long-poll at the current index answered %d, Retry-After %q (err %v), want 503 with Retry-After", step, r.code, r.retryAfter, r.err)
			}
		case stepServers:
			if r := getSoon(p.api + "/v1/status"); r.err == nil {
				t.Errorf("%s: the API answered %d, want a refused connection", step, r.code)
			}
		}
	}
	shutDown(t, stop, done, &steps)
	if n := p.probes.Load(); probesAfterProber == 0 || n != probesAfterProber {
		t.Errorf("%d probes when the prober stopped, %d at the end: want some, and none after it stopped", probesAfterProber, n)
	}
}

// A task or server that fails ends Run with its error, through the same
// shutdown: here the API's listener is closed under it, so its server
// fails at once; the election, started all the same, stops, and Run
// returns the server's error.
func TestAFailureShutsDownAndIsReturned(t *testing.T) {
	p := newInProcess(t)
	p.sc.servers[0].listener.Close()
	var steps []string
	p.sc.stepped = func(step string) { steps = append(steps, step) }
	select {
	case err := <-p.run(t.Context()):
		if err == nil || !strings.HasPrefix(err.Error(), "api server: ") || !errors.Is(err, net.ErrClosed) {
			t.Errorf("Run: %v, want the API server's failure", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return within a minute of the API server's failure")
	}
	if want := []string{stepReadiness, stepProber, stepElection, stepLabeler, stepBlocking, stepServers}; !slices.Equal(steps, want) {
		t.Errorf("shutdown steps %q, want %q", steps, want)
	}
}

// In group mode the same order holds, for every Lease at once: until the
// election step the sidecar still leads each Lease it holds, keeps its
// member Lease and each Lease's leader label (<key>-<lease>) true on its
// Pod, next to the group's election label, with a
// leasehold_pod_label_leader series per Lease; by then it has left the
// membership (its member Lease is gone) and released every Lease; after
// the labeler step every label of its Pod is false.
func TestShutdownOrderInProcessGroup(t *testing.T) {
	p := newInProcess(t, "LEASEHOLD_SHARDS", "2")
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	done := p.run(ctx)
	leases := p.cfg.Leases
	leaseClient := p.cluster.Clientset().CoordinationV1().Leases(p.cfg.LeaseNamespace)
	// holders are the Leases' holders ("<missing>" for one not created).
	holders := func() map[string]string {
		out := map[string]string{}
		for _, name := range leases {
			l, err := leaseClient.Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				out[name] = "<missing>"
				continue
			}
			out[name] = ptrValue(l.Spec.HolderIdentity)
		}
		return out
	}
	members := func() int {
		list, err := leaseClient.List(context.Background(), metav1.ListOptions{LabelSelector: group.MemberLabel + "=" + p.cfg.Group})
		if err != nil {
			t.Errorf("list member Leases: %v", err)
			return -1
		}
		return len(list.Items)
	}
	allMine := func() bool {
		for _, h := range holders() {
			if h != p.cfg.Identity {
				return false
			}
		}
		return true
	}
	await(t, "every Lease held", allMine)
	await(t, "its member Lease", func() bool { return members() == 1 })
	// labels are the Pod's leader labels, one per Lease, and its election label.
	labels := func() map[string]string {
		pod, err := p.pods.Get(context.Background(), inProcessPod, metav1.GetOptions{})
		if err != nil {
			t.Errorf("get the Pod: %v", err)
			return nil
		}
		out := map[string]string{podlabel.GroupKey: pod.Labels[podlabel.GroupKey], podlabel.LeaseKey: pod.Labels[podlabel.LeaseKey]}
		for _, name := range leases {
			k := podlabel.GroupLeaderKey(inProcessLabel, name)
			out[k] = pod.Labels[k]
		}
		return out
	}
	wantLabels := func(value string) map[string]string {
		out := map[string]string{podlabel.GroupKey: p.cfg.Group, podlabel.LeaseKey: ""}
		for _, name := range leases {
			out[podlabel.GroupLeaderKey(inProcessLabel, name)] = value
		}
		return out
	}
	await(t, "every Lease's leader label true", func() bool { return maps.Equal(labels(), wantLabels("true")) })
	for _, name := range leases {
		if v := gaugeValue(t, p.registry, "leasehold_pod_label_leader", map[string]string{"lease": name, "group": p.cfg.Group, "namespace": p.cfg.LeaseNamespace}); v != 1 {
			t.Errorf("leasehold_pod_label_leader{lease=%q} %v, want 1", name, v)
		}
	}

	var steps []string
	p.sc.stepped = func(step string) {
		steps = append(steps, step)
		switch step {
		case stepReadiness, stepProber:
			if !allMine() || members() != 1 {
				t.Errorf("%s: holders %v, %d member Leases; want every Lease still held and its member Lease", step, holders(), members())
			}
			if r := getSoon(p.api + "/v1/leases/" + leases[0] + "/leader"); r.code != http.StatusOK {
				t.Errorf("%s: /v1/leases/%s/leader %d (err %v), want 200: still leading", step, leases[0], r.code, r.err)
			}
			if got := labels(); !maps.Equal(got, wantLabels("true")) {
				t.Errorf("%s: labels %v, want still %v", step, got, wantLabels("true"))
			}
		case stepLabeler:
			if got := labels(); !maps.Equal(got, wantLabels("false")) {
				t.Errorf("%s: labels %v, want %v", step, got, wantLabels("false"))
			}
		case stepElection:
			for name, h := range holders() {
				if h != "" {
					t.Errorf("%s: %s held by %q, want it released", step, name, h)
				}
			}
			if n := members(); n != 0 {
				t.Errorf("%s: %d member Leases, want its own gone", step, n)
			}
			if r := getSoon(p.api + "/v1/leases/" + leases[0] + "/leader"); r.code != http.StatusServiceUnavailable {
				t.Errorf("%s: /v1/leases/%s/leader %d (err %v), want 503 from a serving API", step, leases[0], r.code, r.err)
			}
		case stepServers:
			if r := getSoon(p.api + "/v1/leases"); r.err == nil {
				t.Errorf("%s: the API answered %d, want a refused connection", step, r.code)
			}
		}
	}
	shutDown(t, stop, done, &steps)
}

// gaugeValue is the value of the gauge name whose series carries labels
// (and maybe others); -1 when there is none.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if maps.Equal(got, labels) {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

func ptrValue(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// shutDown ends Run's context, as a signal does, waits for Run to return
// nil, and checks that the sidecar took every shutdown step, in order.
func shutDown(t *testing.T, stop context.CancelFunc, done <-chan error, steps *[]string) {
	t.Helper()
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v, want nil after its context ended", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return within a minute of its context's end")
	}
	want := []string{stepReadiness, stepProber, stepElection, stepLabeler, stepBlocking, stepServers}
	if !slices.Equal(*steps, want) {
		t.Errorf("shutdown steps %q, want %q", *steps, want)
	}
}
