package chart_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/leasehold/leasehold/internal/testing/kubetest"
)

// warnings collects the API server's warning headers (Pod Security "warn"
// mode, deprecated APIs, duplicate env names, ...).
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

// applier creates objects of any kind, by their GroupVersionKind, with the
// admin's credentials.
type applier struct {
	dyn      dynamic.Interface
	mapper   meta.RESTMapper
	warnings *warnings
}

func newApplier(t testing.TB) *applier {
	t.Helper()
	installMonitoringCRDs(t) // before discovery, so that the mapper knows their kinds
	cfg := rest.CopyConfig(kubetest.Require(t, cluster).Admin().Config)
	w := &warnings{}
	cfg.WarningHandler = w
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		t.Fatal(err)
	}
	return &applier{dyn: dynamic.NewForConfigOrDie(cfg), mapper: restmapper.NewDiscoveryRESTMapper(groups), warnings: w}
}

// dryRun creates obj in namespace with server-side dry-run: the API server
// decodes it with strict field validation (an unknown or duplicate field is
// an error), defaults, validates and admits it (RBAC escalation checks, Pod
// Security, ServiceAccount admission) and persists nothing. Any warning is
// an error too.
func (a *applier) dryRun(ctx context.Context, namespace string, obj *unstructured.Unstructured) error {
	return a.create(ctx, namespace, obj, true)
}

func (a *applier) create(ctx context.Context, namespace string, obj *unstructured.Unstructured, dryRun bool) error {
	gvk := obj.GroupVersionKind()
	mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	var client dynamic.ResourceInterface = a.dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		client = a.dyn.Resource(mapping.Resource).Namespace(namespace)
	}
	opts := metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	a.warnings.take()
	_, err = client.Create(ctx, obj, opts)
	if w := a.warnings.take(); err == nil && len(w) > 0 {
		err = fmt.Errorf("warnings: %q", w)
	}
	return err
}

// podOf turns a workload's pod template into a Pod, so that Pod Security
// admission judges it (on a Deployment it only warns).
func podOf(t testing.TB, workload *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	template, ok, err := unstructured.NestedMap(workload.Object, "spec", "template")
	if err != nil || !ok {
		t.Fatalf("%s %s has no pod template: %v", workload.GetKind(), workload.GetName(), err)
	}
	pod := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod", "spec": template["spec"]}}
	if md, ok := template["metadata"].(map[string]any); ok {
		pod.Object["metadata"] = md
	}
	pod.SetGenerateName(workload.GetName() + "-")
	return pod
}

// serviceAccountsOf lists the ServiceAccounts the pods of objs run as.
func serviceAccountsOf(objs []*unstructured.Unstructured) []string {
	seen := map[string]bool{}
	var out []string
	for _, o := range objs {
		path := []string{"spec", "template", "spec", "serviceAccountName"}
		if o.GetKind() == "Pod" {
			path = []string{"spec", "serviceAccountName"}
		}
		if name, _, _ := unstructured.NestedString(o.Object, path...); name != "" && !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	return out
}

// Every object that helm template renders, for every ci values file and for
// the worked example of a user's chart, and every object of the plain
// manifests in examples/manifests/, is accepted by the real API server
// with server-side dry-run: real schemas with strict field validation, and
// admission. Namespaces enforce the "restricted" Pod Security Standard, and
// each Deployment's pod template is also submitted as a Pod, which Pod
// Security judges. No warning is allowed either.
func TestRenderedObjectsPassServerSideDryRun(t *testing.T) {
	kubetest.Require(t, cluster)
	requireHelm(t)
	t.Parallel()
	sources := map[string]func(t *testing.T, ns string) []*unstructured.Unstructured{}
	example := exampleChart(t)
	sources["example my-app"] = func(t *testing.T, ns string) []*unstructured.Unstructured {
		return render(t, "ci", ns, example)
	}
	for _, file := range ciValues(t) {
		sources[filepath.Base(file)] = func(t *testing.T, ns string) []*unstructured.Unstructured {
			return render(t, "ci", ns, chartDir, "-f", file)
		}
	}
	// Plain manifests (examples/manifests/*.yaml), applied to the test's
	// namespace whatever namespace they name.
	manifests, err := filepath.Glob(filepath.Join(root, "examples", "manifests", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range manifests {
		sources["manifest "+filepath.Base(file)] = func(t *testing.T, ns string) []*unstructured.Unstructured {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := decode(string(data))
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			for _, o := range objs {
				o.SetNamespace("")
			}
			return objs
		}
	}
	for name, source := range sources {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a := newApplier(t)
			ns := newNamespace(t, "dryrun")
			objs := source(t, ns)
			var pods []*unstructured.Unstructured
			for _, o := range objs {
				switch o.GetKind() {
				case "Pod":
					pods = append(pods, o)
					continue
				case "Deployment":
					pods = append(pods, podOf(t, o))
				}
				if err := a.dryRun(t.Context(), ns, o); err != nil {
					t.Errorf("%s %s: %v", o.GetKind(), o.GetName(), err)
				}
			}
			// ServiceAccount admission rejects a Pod whose ServiceAccount
			// does not exist, and a dry-run creates nothing: create them.
			for _, sa := range serviceAccountsOf(objs) {
				_, err := cluster.Clientset().CoreV1().ServiceAccounts(ns).Create(t.Context(),
					&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
			}
			for _, p := range pods {
				if err := a.dryRun(t.Context(), ns, p); err != nil {
					t.Errorf("Pod %s%s: %v", p.GetName(), p.GetGenerateName(), err)
				}
			}
			t.Logf("%d objects and %d pods accepted", len(objs), len(pods))
		})
	}
}

// The dry-run checks have teeth: in the same kind of namespace, the API
// server rejects a misspelled field and a pod that breaks "restricted".
func TestDryRunRejectsWhatTheChartMustNotRender(t *testing.T) {
	kubetest.Require(t, cluster)
	requireHelm(t)
	t.Parallel()
	a := newApplier(t)
	ns := newNamespace(t, "teeth")
	objs := render(t, "ci", ns, chartDir, "--set", "demo.enabled=true")

	sa := one(t, objs, "ServiceAccount").DeepCopy()
	sa.Object["automountServiceAccountTokens"] = true
	if err := a.dryRun(t.Context(), ns, sa); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Errorf("misspelled field: got %v, want an unknown-field error", err)
	}

	if err := a.create(t.Context(), ns, one(t, objs, "ServiceAccount"), false); err != nil {
		t.Fatal(err)
	}
	pod := podOf(t, one(t, objs, "Deployment"))
	if err := a.dryRun(t.Context(), ns, pod); err != nil {
		t.Fatalf("control: %v", err)
	}
	init, _, _ := unstructured.NestedSlice(pod.Object, "spec", "initContainers")
	sidecar := init[0].(map[string]any)
	unstructured.RemoveNestedField(sidecar, "securityContext", "allowPrivilegeEscalation")
	if err := unstructured.SetNestedSlice(pod.Object, init, "spec", "initContainers"); err != nil {
		t.Fatal(err)
	}
	if err := a.dryRun(t.Context(), ns, pod); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "PodSecurity") {
		t.Errorf("sidecar without allowPrivilegeEscalation=false: got %v, want Forbidden by PodSecurity", err)
	}
}

// helm install puts the chart into the real API server (no kubelet: the
// demo's pods never run, as expected), the ServiceAccount it installed can
// elect with the sidecar through its RoleBinding, helm upgrade works, a
// misspelled value fails the install, and helm uninstall removes it all.
func TestHelmInstallUpgradeUninstall(t *testing.T) {
	kubetest.Require(t, cluster)
	requireHelm(t)
	t.Parallel()
	ns := newNamespace(t, "install")
	kubeconfig := cluster.Admin().Kubeconfig
	demoValues := filepath.Join(chartDir, "ci", "demo-values.yaml")
	hl := func(args ...string) string {
		return mustHelm(t, append(args, "--namespace", ns, "--kubeconfig", kubeconfig)...)
	}

	out := hl("install", "demo", chartDir, "-f", demoValues)
	for _, want := range []string{"STATUS: deployed", "Lease:           demo-leasehold", "kubectl --namespace " + ns + " get lease demo-leasehold"} {
		if !strings.Contains(out, want) {
			t.Errorf("helm install output lacks %q:\n%s", want, out)
		}
	}
	cs := cluster.Clientset()
	if _, err := cs.RbacV1().Roles(ns).Get(t.Context(), "demo-leasehold", metav1.GetOptions{}); err != nil {
		t.Error(err)
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Get(t.Context(), "demo-leasehold", metav1.GetOptions{}); err != nil {
		t.Error(err)
	}
	d, err := cs.AppsV1().Deployments(ns).Get(t.Context(), "demo-leasehold-demo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sidecarSpec := container(d.Spec.Template.Spec.InitContainers, "leasehold")
	if sidecarSpec == nil || sidecarSpec.RestartPolicy == nil || *sidecarSpec.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Fatalf("stored Deployment has no native sidecar: %+v", d.Spec.Template.Spec.InitContainers)
	}
	if pods, err := cs.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{}); err != nil || len(pods.Items) != 0 {
		t.Errorf("pods after install: %v %v; want none (the test pod is a hook of helm test only)", err, pods)
	}

	// The installed ServiceAccount, with a token from the TokenRequest API,
	// runs the real sidecar to leadership through the installed RoleBinding.
	lease, _ := envValue(sidecarSpec, "LEASEHOLD_LEASE_NAME")
	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), "demo-leasehold",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := fleetConfig(t, ns, lease, &kubetest.User{Name: "demo-leasehold", Kubeconfig: tokenKubeconfig(t, tok.Status.Token)})
	inst := start(t, f, "installed")
	st := waitLeader(t, inst)
	t.Logf("sidecar as system:serviceaccount:%s:demo-leasehold leads lease %s with token %d", ns, lease, st.FencingToken)
	inst.Stop()

	out = hl("upgrade", "demo", chartDir, "-f", demoValues, "--set", "demo.replicas=1")
	if !strings.Contains(out, "REVISION: 2") {
		t.Errorf("helm upgrade:\n%s", out)
	}
	if d, err := cs.AppsV1().Deployments(ns).Get(t.Context(), "demo-leasehold-demo", metav1.GetOptions{}); err != nil || *d.Spec.Replicas != 1 {
		t.Errorf("after upgrade: %v, replicas %v", err, d.Spec.Replicas)
	}

	_, err = helm(t, "install", "typo", chartDir, "--set", "demo.replcas=3", "--namespace", ns, "--kubeconfig", kubeconfig)
	if err == nil || !strings.Contains(err.Error(), "additional properties 'replcas' not allowed") {
		t.Errorf("install with a misspelled value: %v", err)
	}
	if list := hl("list", "--all", "-q"); strings.TrimSpace(list) != "demo" {
		t.Errorf("releases: %q, want demo only", list)
	}

	hl("uninstall", "demo", "--wait")
	if _, err := cs.RbacV1().Roles(ns).Get(t.Context(), "demo-leasehold", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Role after uninstall: %v", err)
	}
}

// tokenKubeconfig writes a kubeconfig that authenticates with a bearer token.
func tokenKubeconfig(t testing.TB, token string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: cluster.Host(), CertificateAuthorityData: cluster.Admin().Config.CAData}
	kc.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: "sa"}
	kc.CurrentContext = "kubetest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}
