package kubeclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func TestRequestVerb(t *testing.T) {
	const leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
	tests := []struct {
		method, target, want string
	}{
		{"POST", leases, "create"},
		{"PUT", leases + "/foo", "update"},
		{"PATCH", leases + "/foo", "patch"},
		{"DELETE", leases + "/foo", "delete"},
		{"HEAD", "/readyz", "head"},

		{"GET", leases, "list"},
		{"GET", leases + "/", "list"},
		{"GET", leases + "/foo", "get"},
		{"GET", "/api/v1/namespaces/default/pods/p/status", "get"},
		{"GET", "/api/v1/namespaces/default/configmaps", "list"},
		{"GET", "/api/v1/namespaces", "list"},
		{"GET", "/api/v1/namespaces/default", "get"},
		{"GET", "/api/v1/nodes", "list"},
		{"GET", "/api/v1/nodes/n1", "get"},
		{"GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles", "list"},
		{"GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/admin", "get"},

		{"GET", leases + "?watch=true&resourceVersion=5", "watch"},
		{"GET", leases + "?watch=1", "watch"},
		{"GET", leases + "/foo?watch=true", "watch"},
		{"GET", leases + "?watch=false", "list"},
		{"GET", leases + "?watch=bogus", "list"},

		{"GET", "/", "get"},
		{"GET", "/readyz", "get"},
		{"GET", "/version", "get"},
		{"GET", "/api", "get"},
		{"GET", "/api/v1", "get"},
		{"GET", "/apis", "get"},
		{"GET", "/apis/coordination.k8s.io", "get"},
		{"GET", "/apis/coordination.k8s.io/v1", "get"},
		{"GET", "/openapi/v3", "get"},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.target)
		if err != nil {
			t.Fatal(err)
		}
		if got := requestVerb(tt.method, u); got != tt.want {
			t.Errorf("requestVerb(%s %s) = %q, want %q", tt.method, tt.target, got, tt.want)
		}
	}
}

func TestWrapCountsRequests(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPut:
			w.WriteHeader(http.StatusConflict)
		case http.MethodPost:
			w.WriteHeader(http.StatusCreated)
		}
	}))
	m := NewRequestMetrics(prometheus.NewRegistry())
	client := &http.Client{Transport: m.Wrap(srv.Client().Transport)}

	const leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
	do := func(method, target string) error {
		req, err := http.NewRequest(method, srv.URL+target, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	for _, r := range []struct{ method, target string }{
		{"GET", leases + "/foo"},
		{"GET", leases + "/foo"},
		{"PUT", leases + "/foo"},
		{"POST", leases},
		{"GET", leases + "?watch=true"},
	} {
		if err := do(r.method, r.target); err != nil {
			t.Fatalf("%s %s: %v", r.method, r.target, err)
		}
	}
	srv.Close()
	if err := do("GET", leases+"/foo"); err == nil {
		t.Fatal("GET against a closed server succeeded")
	}

	for _, c := range []struct {
		verb, code string
		want       float64
	}{
		{"get", "200", 2},
		{"update", "409", 1},
		{"create", "201", 1},
		{"watch", "200", 1},
		{"get", "error", 1},
		{"list", "200", 0},
		{"get", "", 3},
		{"", "200", 3},
		{"", "", 6},
	} {
		if got := m.Count(c.verb, c.code); got != c.want {
			t.Errorf("Count(%q, %q) = %v, want %v", c.verb, c.code, got, c.want)
		}
	}
}

func TestNewRequestMetricsRegisters(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewRequestMetrics(reg)
	m.requests.WithLabelValues("get", "200").Inc()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(families) != 1 || families[0].GetName() != "leasehold_kube_requests_total" {
		t.Fatalf("gathered %v, want leasehold_kube_requests_total", families)
	}
}

// writeKubeconfig writes a kubeconfig with two contexts whose current one
// points at server, and returns its path.
func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{
			"other": {Server: "https://other.invalid:6443"},
			"test":  {Server: server},
		},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{"u": {Token: "t0ken"}},
		Contexts: map[string]*clientcmdapi.Context{
			"other": {Cluster: "other", AuthInfo: "u"},
			"test":  {Cluster: "test", AuthInfo: "u"},
		},
		CurrentContext: "test",
	}
	if err := clientcmd.WriteToFile(cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestNewFromKubeconfig(t *testing.T) {
	path := writeKubeconfig(t, "https://127.0.0.1:6443")
	cfg, err := New(Options{Kubeconfig: path, UserAgent: "leasehold/test"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:6443" {
		t.Errorf("Host = %q, want the current context's server", cfg.Host)
	}
	if cfg.QPS != 50 || cfg.Burst != 100 {
		t.Errorf("QPS, Burst = %v, %v, want 50, 100", cfg.QPS, cfg.Burst)
	}
	if cfg.Timeout != 0 {
		t.Errorf("Timeout = %v, want 0", cfg.Timeout)
	}
	if cfg.UserAgent != "leasehold/test" {
		t.Errorf("UserAgent = %q, want leasehold/test", cfg.UserAgent)
	}
	if cfg.BearerToken != "t0ken" {
		t.Errorf("BearerToken = %q, want the kubeconfig user's", cfg.BearerToken)
	}
	if cfg.WrapTransport != nil {
		t.Error("WrapTransport set without Requests")
	}
	for _, tc := range []struct {
		steady float64
		qps    float32
		burst  int
	}{{10, 50, 100}, {25, 50, 100}, {128.5, 257, 514}} {
		cfg, err := New(Options{Kubeconfig: path, Steady: tc.steady})
		if err != nil {
			t.Fatal(err)
		}
		if cfg.QPS != tc.qps || cfg.Burst != tc.burst {
			t.Errorf("Steady %v: QPS, Burst = %v, %v, want %v, %v", tc.steady, cfg.QPS, cfg.Burst, tc.qps, tc.burst)
		}
	}
}

func TestNewMissingKubeconfig(t *testing.T) {
	_, err := New(Options{Kubeconfig: filepath.Join(t.TempDir(), "absent")})
	if err == nil || !strings.Contains(err.Error(), "absent") {
		t.Fatalf("err = %v, want one naming the kubeconfig path", err)
	}
}

// TestNewCountsClientRequests drives a real clientset built from New's
// config, checking that Requests and UserAgent are wired into its transport.
func TestNewCountsClientRequests(t *testing.T) {
	userAgents := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case userAgents <- r.UserAgent():
		default:
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"foo","namespace":"default"}}`))
	}))
	defer srv.Close()

	m := NewRequestMetrics(prometheus.NewRegistry())
	cfg, err := New(Options{Kubeconfig: writeKubeconfig(t, srv.URL), UserAgent: "leasehold/test", Requests: m})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoordinationV1().Leases("default").Get(context.Background(), "foo", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := m.Count("get", "200"); got != 1 {
		t.Errorf(`Count("get", "200") = %v, want 1`, got)
	}
	if ua := <-userAgents; ua != "leasehold/test" {
		t.Errorf("server saw User-Agent %q, want leasehold/test", ua)
	}
}

func TestNewOutsideCluster(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	_, err := New(Options{})
	if err == nil {
		t.Fatal("New with no kubeconfig succeeded outside a cluster")
	}
	for _, want := range []string{"in-cluster config unavailable", "KUBECONFIG"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}
