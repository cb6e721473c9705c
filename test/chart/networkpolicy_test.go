package chart_test

import (
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The NetworkPolicy is opt-in: the defaults and every ci values file (each
// a mode) render none.
func TestNetworkPolicyOnlyWhenEnabled(t *testing.T) {
	requireHelm(t)
	t.Parallel()
	runs := map[string][]string{"defaults": nil}
	for _, file := range ciValues(t) {
		runs[filepath.Base(file)] = []string{"-f", file}
	}
	for name, args := range runs {
		if got := only(render(t, "ci", "shop", chartDir, args...), "NetworkPolicy"); len(got) != 0 {
			t.Errorf("%s: renders %d NetworkPolicy objects without networkPolicy.enabled", name, len(got))
		}
	}
}

// networkPolicyValues enables the policy for the demo's Pods, with the OPS
// port moved off its default, the peers a monitoring namespace's
// Prometheus, and proxy as given.
func networkPolicyValues(t *testing.T, proxy bool) string {
	t.Helper()
	return writeValues(t, `demo:
  enabled: true
ports:
  ops: 14041
proxy:
  enabled: `+strconv.FormatBool(proxy)+`
  port: 14050
networkPolicy:
  enabled: true
  from:
    - namespaceSelector:
        matchLabels:
          kubernetes.io/metadata.name: monitoring
      podSelector:
        matchLabels:
          app.kubernetes.io/name: prometheus
`)
}

// Enabled, the NetworkPolicy selects exactly the Pods that run the sidecar
// and admits networkPolicy.from to the OPS port, the very port the sidecar
// listens on (LEASEHOLD_OPS_ADDR) and its probes use; with the proxy, the
// replicas to the proxy's port; nothing else. The API server accepts it
// (server-side dry-run).
func TestNetworkPolicyAdmitsTheOpsPort(t *testing.T) {
	requireHelm(t)
	t.Parallel()
	for _, proxy := range []bool{false, true} {
		t.Run("proxy="+strconv.FormatBool(proxy), func(t *testing.T) {
			t.Parallel()
			objs := render(t, "ci", "shop", chartDir, "-f", networkPolicyValues(t, proxy))
			np := convert[networkingv1.NetworkPolicy](t, one(t, objs, "NetworkPolicy"))
			deploy := convert[appsv1.Deployment](t, one(t, objs, "Deployment"))
			sidecar := container(deploy.Spec.Template.Spec.InitContainers, "leasehold")
			if sidecar == nil {
				t.Fatal("the demo Deployment has no leasehold init container")
			}

			selector, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
			if err != nil || selector.Empty() || !selector.Matches(labels.Set(deploy.Spec.Template.Labels)) {
				t.Errorf("podSelector %v does not select the demo's Pods %v (%v)", np.Spec.PodSelector, deploy.Spec.Template.Labels, err)
			}
			if len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress || len(np.Spec.Egress) != 0 {
				t.Errorf("policyTypes %v, egress %v: want Ingress only", np.Spec.PolicyTypes, np.Spec.Egress)
			}

			_, opsAddrPort, _ := net.SplitHostPort(mustEnv(t, sidecar, "LEASEHOLD_OPS_ADDR"))
			opsPort, _ := strconv.Atoi(opsAddrPort)
			named := map[string]int32{}
			for _, p := range sidecar.Ports {
				named[p.Name] = p.ContainerPort
			}
			if opsPort != 14041 || named["leasehold-ops"] != 14041 {
				t.Fatalf("the sidecar listens on %q, its port leasehold-ops is %d; want 14041 (ports.ops)", opsAddrPort, named["leasehold-ops"])
			}
			for _, probe := range []*corev1.Probe{sidecar.StartupProbe, sidecar.LivenessProbe, sidecar.ReadinessProbe} {
				if probe != nil && probe.HTTPGet != nil && probe.HTTPGet.Port.String() != "leasehold-ops" {
					t.Errorf("a probe uses port %s, not leasehold-ops", probe.HTTPGet.Port.String())
				}
			}

			tcp := corev1.ProtocolTCP
			ops := intstr.FromInt32(int32(opsPort))
			want := []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}},
					PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "prometheus"}},
				}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &ops, Protocol: &tcp}},
			}}
			if proxy {
				if named["leasehold-proxy"] != 14050 {
					t.Fatalf("the sidecar's port leasehold-proxy is %d, want 14050 (proxy.port)", named["leasehold-proxy"])
				}
				proxyPort := intstr.FromInt32(named["leasehold-proxy"])
				want = append(want, networkingv1.NetworkPolicyIngressRule{
					From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &np.Spec.PodSelector}},
					Ports: []networkingv1.NetworkPolicyPort{{Port: &proxyPort, Protocol: &tcp}},
				})
			}
			if !equality.Semantic.DeepEqual(np.Spec.Ingress, want) {
				t.Errorf("ingress %+v, want %+v", np.Spec.Ingress, want)
			}

			ns := newNamespace(t, "netpol")
			if err := newApplier(t).dryRun(t.Context(), ns, one(t, render(t, "ci", ns, chartDir, "-f", networkPolicyValues(t, proxy)), "NetworkPolicy")); err != nil {
				t.Errorf("server-side dry-run: %v", err)
			}
		})
	}
}

// Without Pods to select (no demo, no metrics.podSelector) the policy is
// refused at render time, saying what to set.
func TestNetworkPolicyNeedsPodsToSelect(t *testing.T) {
	requireHelm(t)
	t.Parallel()
	_, err := helm(t, "template", "ci", chartDir, "--set", "networkPolicy.enabled=true")
	if err == nil || !strings.Contains(err.Error(), "metrics.podSelector is required for metrics.serviceMonitor, metrics.podMonitor and networkPolicy unless demo.enabled") {
		t.Errorf("helm template with networkPolicy.enabled alone: %v, want the podSelector message", err)
	}
}
