package chart_test

import (
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/leasehold/leasehold/internal/httpapi"
)

// helm lint --strict passes for the defaults, every ci values file and the
// worked example of a user's chart.
func TestHelmLint(t *testing.T) {
	requireHelm(t)
	t.Parallel()
	runs := map[string][]string{"defaults": {chartDir}, "example my-app": {exampleChart(t)}}
	for _, file := range ciValues(t) {
		runs[filepath.Base(file)] = []string{chartDir, "-f", file}
	}
	for name, args := range runs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out := mustHelm(t, append([]string{"lint", "--strict"}, args...)...)
			if !strings.Contains(out, "0 chart(s) failed") {
				t.Fatalf("helm lint:\n%s", out)
			}
		})
	}
}

// chartMeta is what the labels must carry.
type chartMeta struct{ Name, Version, AppVersion string }

func readChartMeta(t testing.TB) chartMeta {
	t.Helper()
	out := mustHelm(t, "show", "chart", chartDir)
	var m chartMeta
	if err := yaml.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// expectation is what one ci values file must render, beyond the
// invariants every rendering satisfies.
type expectation struct {
	kinds          []string // sorted kinds of the rendered objects
	native         bool     // leasehold as a native sidecar in the demo
	fullname       string
	lease          string
	serviceAccount string
	podLabel       bool // the Role also lists and patches Pods
	// rules, if set, is the Role's instead of leastPrivilege(lease) (a
	// lease group, or an observer); leases the Leases the helm test reads
	// (default: lease). lease "" means LEASEHOLD_LEASE_NAME is unset.
	rules  []rbacv1.PolicyRule
	leases []string
	check  func(t *testing.T, sidecar, app *corev1.Container, d *appsv1.Deployment)
}

var ciExpectations = map[string]expectation{
	"default-values.yaml": {
		kinds:    []string{"Pod", "Role", "RoleBinding", "ServiceAccount"},
		fullname: "ci-leasehold", lease: "ci-leasehold", serviceAccount: "ci-leasehold",
	},
	"demo-values.yaml": {
		kinds: []string{"Deployment", "Pod", "Role", "RoleBinding", "ServiceAccount"}, native: true,
		fullname: "ci-leasehold", lease: "ci-leasehold", serviceAccount: "ci-leasehold",
		check: func(t *testing.T, sidecar, _ *corev1.Container, d *appsv1.Deployment) {
			if *d.Spec.Replicas != 3 {
				t.Errorf("replicas %d, want 3", *d.Spec.Replicas)
			}
			wantEnv(t, sidecar, map[string]string{
				"LEASEHOLD_LEASE_DURATION": "5s", "LEASEHOLD_RENEW_DEADLINE": "3s", "LEASEHOLD_RETRY_PERIOD": "1s",
				"LEASEHOLD_LOG_LEVEL": "debug", "LEASEHOLD_LOG_FORMAT": "text", "LEASEHOLD_RELEASE_ON_SHUTDOWN": "true",
				// The chart's default is the sidecar's, which its memory limit is sized for.
				"LEASEHOLD_MAX_BLOCKING_REQUESTS": strconv.Itoa(httpapi.DefaultMaxBlockingRequests),
			})
		},
	},
	"custom-values.yaml": {
		kinds: []string{"Deployment", "Pod", "Role", "RoleBinding", "ServiceAccount"}, native: true,
		fullname: "orders-election", lease: "orders.leader", serviceAccount: "orders",
		check: func(t *testing.T, sidecar, app *corev1.Container, d *appsv1.Deployment) {
			if want := "registry.example.com/platform/leasehold@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"; sidecar.Image != want {
				t.Errorf("image %q, want %q", sidecar.Image, want)
			}
			wantEnv(t, sidecar, map[string]string{
				"LEASEHOLD_RELEASE_ON_SHUTDOWN": "false", "GOMEMLIMIT": "48MiB",
				"LEASEHOLD_API_ADDR": "127.0.0.1:14040", "LEASEHOLD_OPS_ADDR": ":14041",
				"LEASEHOLD_MAX_BLOCKING_REQUESTS": "1000000", // a whole number, not 1e+06
			})
			wantEnv(t, app, map[string]string{"LEASEHOLD_URL": "http://127.0.0.1:14040"})
			if s := d.Spec.Template.Spec.ImagePullSecrets; len(s) != 1 || s[0].Name != "registry-credentials" {
				t.Errorf("imagePullSecrets %v", s)
			}
		},
	},
	"existing-serviceaccount-values.yaml": {
		kinds: []string{"Deployment", "Pod", "Role", "RoleBinding"}, native: true,
		fullname: "ci-leasehold", lease: "ci-leasehold", serviceAccount: "existing-leasehold",
	},
	"no-rbac-values.yaml": {
		kinds:    []string{"Pod", "ServiceAccount"},
		fullname: "ci-leasehold", lease: "ci-leasehold", serviceAccount: "ci-leasehold",
	},
	"app-aware-values.yaml": {
		kinds: []string{"Deployment", "Pod", "Role", "RoleBinding", "ServiceAccount"}, native: true,
		fullname: "ci-leasehold", lease: "ci-leasehold", serviceAccount: "ci-leasehold", podLabel: true,
		check: func(t *testing.T, sidecar, _ *corev1.Container, _ *appsv1.Deployment) {
			wantEnv(t, sidecar, map[string]string{
				"LEASEHOLD_APP_HEALTH_URL": "http://127.0.0.1:8080/healthz", "LEASEHOLD_APP_HEALTH_TIMEOUT": "500ms",
				"LEASEHOLD_APP_HEALTH_INTERVAL": "1s", "LEASEHOLD_APP_HEALTH_FAILURE_THRESHOLD": "2",
				"LEASEHOLD_APP_HEALTH_SUCCESS_THRESHOLD": "3",
				"LEASEHOLD_POD_LABEL":                    "example.com/leader",
			})
		},
	},
	"rank-values.yaml": {
		kinds: []string{"Deployment", "Pod", "Role", "RoleBinding", "ServiceAccount"}, native: true,
		fullname: "ci-leasehold", lease: "ci-leasehold", serviceAccount: "ci-leasehold", rules: groupRules,
		check: func(t *testing.T, sidecar, _ *corev1.Container, _ *appsv1.Deployment) {
			wantEnv(t, sidecar, map[string]string{
				"LEASEHOLD_APP_RANK_URL": "http://127.0.0.1:8080/rank", "LEASEHOLD_APP_HEALTH_TIMEOUT": "500ms",
				"LEASEHOLD_APP_HEALTH_INTERVAL": "1s", "LEASEHOLD_PRIORITY": "5",
			})
			// Successor by the sidecar's default; no health gate.
			wantUnset(t, sidecar, "LEASEHOLD_HANDOVER", "LEASEHOLD_APP_HEALTH_URL")
		},
	},
	"run-mode-values.yaml": {
		kinds: []string{"Deployment", "Pod", "Role", "RoleBinding", "ServiceAccount"}, native: true,
		fullname: "ci-leasehold", lease: "ci-leasehold", serviceAccount: "ci-leasehold",
		check: func(t *testing.T, sidecar, app *corev1.Container, d *appsv1.Deployment) {
			spec := d.Spec.Template.Spec
			if len(spec.InitContainers) != 2 || spec.InitContainers[0].Name != "leasehold-install" {
				t.Fatalf("init containers %v: want leasehold-install, then the sidecar", spec.InitContainers)
			}
			installer := spec.InitContainers[0]
			if installer.Image != sidecar.Image || !slices.Equal(installer.Args, []string{"install", "/leasehold-bin/leasehold"}) ||
				installer.RestartPolicy != nil {
				t.Errorf("installer: image %q args %v restartPolicy %v; want the sidecar's image, install into the volume, run once",
					installer.Image, installer.Args, installer.RestartPolicy)
			}
			wantRestricted(t, "leasehold-install", installer.SecurityContext)
			if len(spec.Volumes) != 1 || spec.Volumes[0].Name != "leasehold-bin" || spec.Volumes[0].EmptyDir == nil {
				t.Errorf("volumes %v: want the emptyDir leasehold-bin", spec.Volumes)
			}
			mounted := func(c corev1.Container, readOnly bool) bool {
				return len(c.VolumeMounts) == 1 && c.VolumeMounts[0].Name == "leasehold-bin" &&
					c.VolumeMounts[0].MountPath == "/leasehold-bin" && c.VolumeMounts[0].ReadOnly == readOnly
			}
			if !mounted(installer, false) || !mounted(*app, true) {
				t.Errorf("mounts: installer %v, app %v; want leasehold-bin at /leasehold-bin, read-only in the app", installer.VolumeMounts, app.VolumeMounts)
			}
			apiURL := "http://127.0.0.1:4040"
			if want := []string{"/leasehold-bin/leasehold", "run", "--addr", apiURL, "--"}; len(app.Command) < len(want) || !slices.Equal(app.Command[:len(want)], want) {
				t.Errorf("app command %v: want it under %v", app.Command, want)
			}
		},
	},
	"monitoring-values.yaml": {
		kinds:  []string{"ConfigMap", "Deployment", "Pod", "PrometheusRule", "Role", "RoleBinding", "Service", "ServiceAccount", "ServiceMonitor"},
		native: true, fullname: "ci-leasehold", lease: "ci-leasehold", serviceAccount: "ci-leasehold",
	},
	"podmonitor-values.yaml": {
		kinds:  []string{"Deployment", "Pod", "PodMonitor", "Role", "RoleBinding", "ServiceAccount"},
		native: true, fullname: "ci-leasehold", lease: "ci-leasehold", serviceAccount: "ci-leasehold",
	},
	"shards-values.yaml": {
		kinds: []string{"Deployment", "Pod", "Role", "RoleBinding", "ServiceAccount"}, native: true,
		fullname: "ci-leasehold", lease: "orders", serviceAccount: "ci-leasehold",
		rules:  groupRules,
		leases: []string{"orders-0", "orders-1", "orders-2", "orders-3"},
		check: func(t *testing.T, sidecar, app *corev1.Container, _ *appsv1.Deployment) {
			wantEnv(t, sidecar, map[string]string{"LEASEHOLD_SHARDS": "4", "LEASEHOLD_GROUP": "orders-workers", "LEASEHOLD_BALANCE": "true"})
			wantUnset(t, sidecar, "LEASEHOLD_LEASES", "LEASEHOLD_CANDIDATE")
			if !strings.Contains(strings.Join(app.Args, "\n"), "/v1/leases") {
				t.Errorf("the demo app of a group must follow /v1/leases: %v", app.Args)
			}
		},
	},
	"roles-observer-values.yaml": {
		kinds: []string{"Deployment", "Pod", "Role", "RoleBinding", "ServiceAccount"}, native: true,
		fullname: "ci-leasehold", lease: "", serviceAccount: "ci-leasehold",
		rules:  observerRules("scheduler", "compactor", "reporter"),
		leases: []string{"scheduler", "compactor", "reporter"},
		check: func(t *testing.T, sidecar, app *corev1.Container, _ *appsv1.Deployment) {
			wantEnv(t, sidecar, map[string]string{
				"LEASEHOLD_LEASES": "scheduler,compactor,reporter", "LEASEHOLD_GROUP": "ci-leasehold",
				"LEASEHOLD_BALANCE": "true", "LEASEHOLD_CANDIDATE": "false",
			})
			if !slices.Contains(app.Command, "--each") {
				t.Errorf("run mode with a group: want leasehold run --each, got %v", app.Command)
			}
		},
	},
	"fencing-values.yaml": {
		kinds: []string{"Deployment", "Pod", "Role", "RoleBinding", "ServiceAccount",
			"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicyBinding"},
		native: true, fullname: "ci-leasehold", lease: "", serviceAccount: "ci-leasehold",
		rules:  groupRules,
		leases: []string{"scheduler", "compactor"},
		check: func(t *testing.T, sidecar, _ *corev1.Container, _ *appsv1.Deployment) {
			wantEnv(t, sidecar, map[string]string{"LEASEHOLD_LEASES": "scheduler,compactor", "LEASEHOLD_FENCING_FLOOR": "true"})
		},
	},
	"plain-container-values.yaml": {
		kinds: []string{"Deployment", "Pod", "Role", "RoleBinding", "ServiceAccount"}, native: false,
		fullname: "ci-leasehold", lease: "ci-leasehold", serviceAccount: "ci-leasehold",
	},
}

// helm template with every ci/*-values.yaml renders what that file asks
// for, and every rendering satisfies the chart's invariants: the standard
// labels, the exact least-privilege Role on the Lease the sidecar is told to
// use, the Downward API identity, a restricted securityContext with a
// read-only root filesystem, the resources, and a native sidecar (init
// container, restartPolicy Always, startupProbe on the OPS port's /readyz).
func TestTemplateCIValues(t *testing.T) {
	requireHelm(t)
	t.Parallel()
	meta := readChartMeta(t)
	files := ciValues(t)
	for _, file := range files {
		name := filepath.Base(file)
		want, ok := ciExpectations[name]
		if !ok {
			t.Errorf("%s has no expectation in ciExpectations: add one", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			objs := render(t, "ci", "ci-ns", chartDir, "-f", file)
			var kinds []string
			for _, o := range objs {
				kinds = append(kinds, o.GetKind())
				wantLabels(t, o, meta, "ci")
				if o.GetNamespace() != "" && o.GetNamespace() != "ci-ns" {
					t.Errorf("%s %s in namespace %q", o.GetKind(), o.GetName(), o.GetNamespace())
				}
			}
			slices.Sort(kinds)
			if !slices.Equal(kinds, want.kinds) {
				t.Fatalf("rendered kinds %v, want %v", kinds, want.kinds)
			}
			checkRendering(t, objs, want)
		})
	}
}

// checkRendering checks the invariants of one rendering.
func checkRendering(t *testing.T, objs []*unstructured.Unstructured, want expectation) {
	t.Helper()
	for _, sa := range only(objs, "ServiceAccount") {
		if sa.GetName() != want.serviceAccount {
			t.Errorf("ServiceAccount %q, want %q", sa.GetName(), want.serviceAccount)
		}
	}
	if roles := only(objs, "Role"); len(roles) > 0 {
		role := convert[rbacv1.Role](t, roles[0])
		if role.Name != want.fullname {
			t.Errorf("Role %q, want %q", role.Name, want.fullname)
		}
		rules := leastPrivilege(want.lease)
		if want.rules != nil {
			rules = slices.Clone(want.rules)
		}
		if want.podLabel {
			rules = append(rules, podLabelRule)
		}
		if diff := ruleDiff(role.Rules, rules); diff != "" {
			t.Errorf("Role rules: %s", diff)
		}
		binding := convert[rbacv1.RoleBinding](t, one(t, objs, "RoleBinding"))
		wantSubject := rbacv1.Subject{Kind: "ServiceAccount", Name: want.serviceAccount, Namespace: "ci-ns"}
		if binding.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}) ||
			len(binding.Subjects) != 1 || binding.Subjects[0] != wantSubject {
			t.Errorf("RoleBinding %+v %+v: want Role %s bound to %+v only", binding.RoleRef, binding.Subjects, role.Name, wantSubject)
		}
	}
	for _, pod := range only(objs, "Pod") { // the helm test
		p := convert[corev1.Pod](t, pod)
		if p.Annotations["helm.sh/hook"] != "test" {
			t.Errorf("Pod %s is not a helm test hook: %v", p.Name, p.Annotations)
		}
		if p.Spec.ServiceAccountName != want.serviceAccount {
			t.Errorf("test pod runs as %q, want %q", p.Spec.ServiceAccountName, want.serviceAccount)
		}
		leases := want.leases
		if leases == nil {
			leases = []string{want.lease}
		}
		read := "get"
		if want.rules != nil && !slices.Contains(want.rules[0].Verbs, "get") && !slices.Contains(want.rules[0].Verbs, "create") {
			read = "list" // an observer's Role has no get
		}
		wantEnv(t, &p.Spec.Containers[0], map[string]string{"LEASE": strings.Join(leases, " "), "READ": read})
		wantRestricted(t, "test pod", p.Spec.Containers[0].SecurityContext)
	}
	for _, obj := range only(objs, "Deployment") {
		d := convert[appsv1.Deployment](t, obj)
		spec := d.Spec.Template.Spec
		if spec.ServiceAccountName != want.serviceAccount {
			t.Errorf("demo runs as %q, want %q", spec.ServiceAccountName, want.serviceAccount)
		}
		var sidecar *corev1.Container
		if want.native {
			sidecar = container(spec.InitContainers, "leasehold")
			if sidecar == nil || sidecar.RestartPolicy == nil || *sidecar.RestartPolicy != corev1.ContainerRestartPolicyAlways {
				t.Fatalf("leasehold is not a native sidecar (init container with restartPolicy Always): %+v", spec.InitContainers)
			}
			if container(spec.Containers, "leasehold") != nil {
				t.Error("leasehold is also a plain container")
			}
		} else {
			sidecar = container(spec.Containers, "leasehold")
			if sidecar == nil || sidecar.RestartPolicy != nil || len(spec.InitContainers) != 0 {
				t.Fatalf("want leasehold as a plain container: init %+v", spec.InitContainers)
			}
		}
		app := container(spec.Containers, "app")
		if app == nil {
			t.Fatal("no app container")
		}
		checkSidecar(t, sidecar, want.lease)
		if _, set := envValue(sidecar, "LEASEHOLD_POD_LABEL"); set != want.podLabel {
			t.Errorf("LEASEHOLD_POD_LABEL set: %v, want %v (off by default, with the Role's pods rule)", set, want.podLabel)
		}
		_, apiPort, _ := net.SplitHostPort(mustEnv(t, sidecar, "LEASEHOLD_API_ADDR"))
		wantEnv(t, app, map[string]string{"LEASEHOLD_URL": "http://127.0.0.1:" + apiPort})
		wantRestricted(t, "app", app.SecurityContext)
		if want.check != nil {
			want.check(t, sidecar, app, d)
		}
	}
}

// checkSidecar checks the leasehold container: Lease, Downward API
// identity, probes on the OPS port, resources, securityContext.
func checkSidecar(t *testing.T, c *corev1.Container, lease string) {
	t.Helper()
	if lease == "" {
		wantUnset(t, c, "LEASEHOLD_LEASE_NAME")
	} else {
		wantEnv(t, c, map[string]string{"LEASEHOLD_LEASE_NAME": lease})
	}
	for name, path := range map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"} {
		var got string
		for _, e := range c.Env {
			if e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
				got = e.ValueFrom.FieldRef.FieldPath
			}
		}
		if got != path {
			t.Errorf("%s from the Downward API: fieldPath %q, want %q", name, got, path)
		}
	}
	apiHost, _, err := net.SplitHostPort(mustEnv(t, c, "LEASEHOLD_API_ADDR"))
	if err != nil || apiHost != "127.0.0.1" {
		t.Errorf("LEASEHOLD_API_ADDR must be on loopback only: %v %q", err, apiHost)
	}
	_, opsPort, err := net.SplitHostPort(mustEnv(t, c, "LEASEHOLD_OPS_ADDR"))
	if err != nil {
		t.Fatal(err)
	}
	var opsContainerPort string
	for _, p := range c.Ports {
		if p.Name == "leasehold-ops" {
			opsContainerPort = strconv.Itoa(int(p.ContainerPort))
		}
	}
	if opsContainerPort != opsPort {
		t.Errorf("port leasehold-ops is %q, the sidecar listens on %q", opsContainerPort, opsPort)
	}
	for name, probe := range map[string]*corev1.Probe{"startupProbe": c.StartupProbe, "readinessProbe": c.ReadinessProbe, "livenessProbe": c.LivenessProbe} {
		path := "/readyz"
		if name == "livenessProbe" {
			path = "/livez" // liveness never depends on leadership
		}
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path || probe.HTTPGet.Port.String() != "leasehold-ops" {
			t.Errorf("%s: want GET %s on port leasehold-ops, got %+v", name, path, probe)
		}
	}
	for what, got := range map[string]resource.Quantity{
		"requests.cpu": c.Resources.Requests[corev1.ResourceCPU], "requests.memory": c.Resources.Requests[corev1.ResourceMemory],
		"limits.memory": c.Resources.Limits[corev1.ResourceMemory],
	} {
		want := map[string]string{"requests.cpu": "10m", "requests.memory": "32Mi", "limits.memory": "64Mi"}[what]
		if got.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("resources %s = %s, want %s", what, got.String(), want)
		}
	}
	if _, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		t.Error("a CPU limit throttles renewals: want none")
	}
	wantRestricted(t, "leasehold", c.SecurityContext)
	if sc := c.SecurityContext; sc != nil && (sc.RunAsUser == nil || *sc.RunAsUser != 65532) {
		t.Errorf("leasehold runAsUser %v, want the image's 65532", sc.RunAsUser)
	}
}

// wantRestricted checks a container securityContext against the
// "restricted" Pod Security Standard on its own (not relying on the pod's),
// plus a read-only root filesystem. The API server checks it too (dry-run
// in a namespace that enforces restricted).
func wantRestricted(t *testing.T, who string, sc *corev1.SecurityContext) {
	t.Helper()
	switch {
	case sc == nil:
		t.Errorf("%s: no securityContext", who)
	case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
		t.Errorf("%s: runAsNonRoot is not true", who)
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Errorf("%s: allowPrivilegeEscalation is not false", who)
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0:
		t.Errorf("%s: capabilities %+v, want drop ALL", who, sc.Capabilities)
	case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("%s: seccompProfile %+v, want RuntimeDefault", who, sc.SeccompProfile)
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Errorf("%s: readOnlyRootFilesystem is not true", who)
	}
}

// leastPrivilege is the Role the sidecar needs, and all it may have.
func leastPrivilege(lease string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{lease},
			Verbs: []string{"get", "update", "list", "watch"}},
	}
}

// groupRules is the Role of a lease group's members: create, get, update,
// delete, list and watch on Leases, none restricted by name (the member
// Lease's name depends on the identity; the members are found by label).
var groupRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
	{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "update", "delete"}},
	{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"list", "watch"}},
}

// observerRules is an observer's Role: list and watch on its Leases.
func observerRules(leases ...string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
		ResourceNames: leases, Verbs: []string{"list", "watch"}}}
}

// podLabelRule is what the leader label adds to the Role.
var podLabelRule = rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "patch"}}

func ruleDiff(got, want []rbacv1.PolicyRule) string {
	if len(got) != len(want) {
		return "got " + rulesString(got) + ", want " + rulesString(want)
	}
	for i := range got {
		g, w := got[i], want[i]
		if !slices.Equal(g.APIGroups, w.APIGroups) || !slices.Equal(g.Resources, w.Resources) ||
			!slices.Equal(g.ResourceNames, w.ResourceNames) || !slices.Equal(g.Verbs, w.Verbs) || len(g.NonResourceURLs) != 0 {
			return "got " + rulesString(got) + ", want " + rulesString(want)
		}
	}
	return ""
}

func rulesString(rules []rbacv1.PolicyRule) string {
	out, _ := yaml.Marshal(rules)
	return "\n" + string(out)
}

func wantLabels(t *testing.T, o *unstructured.Unstructured, meta chartMeta, release string) {
	t.Helper()
	want := map[string]string{
		"app.kubernetes.io/name":       meta.Name,
		"app.kubernetes.io/instance":   release,
		"app.kubernetes.io/version":    meta.AppVersion,
		"app.kubernetes.io/managed-by": "Helm",
		"helm.sh/chart":                meta.Name + "-" + meta.Version,
	}
	got := o.GetLabels()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s %s: label %s=%q, want %q (labels %v)", o.GetKind(), o.GetName(), k, got[k], v, got)
		}
	}
}

func mustEnv(t *testing.T, c *corev1.Container, name string) string {
	t.Helper()
	v, ok := envValue(c, name)
	if !ok {
		t.Fatalf("container %s has no %s", c.Name, name)
	}
	return v
}

func wantUnset(t *testing.T, c *corev1.Container, names ...string) {
	t.Helper()
	for _, name := range names {
		if v, ok := envValue(c, name); ok {
			t.Errorf("container %s: %s=%q, want it unset", c.Name, name, v)
		}
	}
}

func wantEnv(t *testing.T, c *corev1.Container, want map[string]string) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if got, ok := envValue(c, name); !ok || got != want[name] {
			t.Errorf("container %s: %s=%q (set: %v), want %q", c.Name, name, got, ok, want[name])
		}
	}
}

// A misspelled key, a negative duration or a value of the wrong form fails
// helm template with a message from the schema that names the value.
func TestBadValuesFailWithAClearMessage(t *testing.T) {
	requireHelm(t)
	t.Parallel()
	const schema = "values don't meet the specifications of the schema"
	for name, tc := range map[string]struct {
		args []string
		want []string
	}{
		"misspelled top-level key":  {[]string{"--set", "leaseNmae=orders"}, []string{schema, "additional properties 'leaseNmae' not allowed"}},
		"misspelled nested key":     {[]string{"--set", "demo.enabld=true"}, []string{schema, "at '/demo'", "additional properties 'enabld' not allowed"}},
		"negative leaseDuration":    {[]string{"--set", "timings.leaseDuration=-5s"}, []string{schema, "at '/timings/leaseDuration': '-5s' does not match pattern"}},
		"negative retryPeriod":      {[]string{"--set", "timings.retryPeriod=-1s"}, []string{schema, "at '/timings/retryPeriod': '-1s' does not match pattern"}},
		"fractional leaseDuration":  {[]string{"--set", "timings.leaseDuration=1500ms"}, []string{schema, "at '/timings/leaseDuration'"}},
		"duration without unit":     {[]string{"--set", "timings.renewDeadline=10"}, []string{schema, "at '/timings/renewDeadline'"}},
		"bad lease name":            {[]string{"--set", "leaseName=Orders_Leader"}, []string{schema, "at '/leaseName'"}},
		"unknown pull policy":       {[]string{"--set", "image.pullPolicy=Sometimes"}, []string{schema, "at '/image/pullPolicy': value must be one of"}},
		"string for a boolean":      {[]string{"--set", "rbac.create=yes"}, []string{schema, "at '/rbac/create': got string, want boolean"}},
		"negative replicas":         {[]string{"--set", "demo.replicas=-1"}, []string{schema, "at '/demo/replicas'"}},
		"port out of range":         {[]string{"--set", "ports.ops=70000"}, []string{schema, "at '/ports/ops'"}},
		"unknown log level":         {[]string{"--set", "log.level=verbose"}, []string{schema, "at '/log/level'"}},
		"health url not http":       {[]string{"--set", "appHealth.url=tcp://127.0.0.1:8080"}, []string{schema, "at '/appHealth/url'"}},
		"health threshold zero":     {[]string{"--set", "appHealth.failureThreshold=0"}, []string{schema, "at '/appHealth/failureThreshold'"}},
		"success threshold zero":    {[]string{"--set", "appHealth.successThreshold=0"}, []string{schema, "at '/appHealth/successThreshold'"}},
		"success threshold string":  {[]string{"--set-string", "appHealth.successThreshold=3"}, []string{schema, "at '/appHealth/successThreshold'"}},
		"max blocking zero":         {[]string{"--set", "maxBlockingRequests=0"}, []string{schema, "at '/maxBlockingRequests'"}},
		"max blocking negative":     {[]string{"--set", "maxBlockingRequests=-1"}, []string{schema, "at '/maxBlockingRequests'"}},
		"max blocking fractional":   {[]string{"--set", "maxBlockingRequests=2.5"}, []string{schema, "at '/maxBlockingRequests'"}},
		"max blocking in a file":    {[]string{"-f", writeValues(t, "maxBlockingRequests: 1.5\n")}, []string{schema, "at '/maxBlockingRequests'"}},
		"health interval no unit":   {[]string{"--set", "appHealth.interval=2"}, []string{schema, "at '/appHealth/interval'"}},
		"bad pod label key":         {[]string{"--set", "podLabel.key=leader label"}, []string{schema, "at '/podLabel/key'"}},
		"election label as key":     {[]string{"--set", "podLabel.key=leasehold.io/lease"}, []string{schema, "at '/podLabel/key'"}},
		"misspelled monitor key":    {[]string{"--set", "metrics.serviceMonitor.enable=true"}, []string{schema, "at '/metrics/serviceMonitor'", "additional properties 'enable' not allowed"}},
		"scrape interval no unit":   {[]string{"--set", "metrics.podMonitor.interval=30"}, []string{schema, "at '/metrics/podMonitor/interval'"}},
		"alert for not a duration":  {[]string{"--set", "prometheusRule.noLeader.for=soon"}, []string{schema, "at '/prometheusRule/noLeader/for'"}},
		"failure ratio above 1":     {[]string{"--set", "prometheusRule.renewalsFailing.ratio=10"}, []string{schema, "at '/prometheusRule/renewalsFailing/ratio'"}},
		"bad alert label name":      {[]string{"--set", "prometheusRule.alertLabels.team-name=x"}, []string{schema, "invalid propertyName 'team-name'"}},
		"misspelled key in a file":  {[]string{"-f", writeValues(t, "timings:\n  leaseDurationSeconds: 15\n")}, []string{schema, "additional properties 'leaseDurationSeconds' not allowed"}},
		"no ServiceAccount name":    {[]string{"--set", "serviceAccount.create=false"}, []string{"serviceAccount.name is required when serviceAccount.create is false"}},
		"native sidecar on 1.28":    {[]string{"--set", "demo.enabled=true", "--kube-version", "1.28.5"}, []string{"chart requires kubeVersion: >=1.29.0-0", "v1.28.5"}},
		"bad value in a subchart":   {[]string{"--set", "leasehold.timings.retryPeriod=-2s", "--example"}, []string{schema, "leasehold:", "at '/timings/retryPeriod'"}},
		"misspelled subchart value": {[]string{"--set", "leasehold.leaseNmae=x", "--example"}, []string{schema, "additional properties 'leaseNmae' not allowed"}},
		// Lease groups and observer mode: what the sidecar refuses at start
		// (rules 12 and 13 of its configuration) fails the rendering.
		"too many shards":           {[]string{"--set", "shards=1025"}, []string{schema, "at '/shards'"}},
		"negative shards":           {[]string{"--set", "shards=-1"}, []string{schema, "at '/shards'"}},
		"role not a DNS subdomain":  {[]string{"--set", "leases={scheduler,Compactor}"}, []string{schema, "at '/leases/1'"}},
		"role listed twice":         {[]string{"--set", "leases={a,b,a}"}, []string{schema, "at '/leases'"}},
		"group not a label value":   {[]string{"--set", "shards=2", "--set", "group=Orders_Workers"}, []string{schema, "at '/group'"}},
		"string for candidate":      {[]string{"--set", "candidate=no"}, []string{schema, "at '/candidate'"}},
		"leases and shards":         {[]string{"--set", "leases={a}", "--set", "shards=2"}, []string{"leases (a) and shards (2) are both set", "set one of them"}},
		"leases and leaseName":      {[]string{"--set", "leases={a}", "--set", "leaseName=orders"}, []string{`leases is set together with leaseName="orders"`, "unset leaseName"}},
		"group without a group":     {[]string{"--set", "group=orders"}, []string{`group="orders" has no effect on a single Lease`}},
		"balance without a group":   {[]string{"--set", "balance=false"}, []string{"balance=false has no effect on a single Lease"}},
		"shard name too long":       {[]string{"--set", "shards=10", "--set", "leaseName=" + strings.Repeat("a", 252)}, []string{"shards=10: the shard Lease", "longer than 253 characters"}},
		"full name not a group":     {[]string{"--set", "shards=2", "--set", "fullnameOverride=Orders"}, []string{`the group name "Orders" must be a label value`, "set group"}},
		"observer with app health":  {[]string{"--set", "candidate=false", "--set", "appHealth.url=http://127.0.0.1:8080/healthz"}, []string{"candidate=false (an observer, which never campaigns) together with appHealth.url"}},
		"pod label, 65 shards":      {[]string{"--set", "shards=65", "--set", "podLabel.enabled=true"}, []string{"LEASEHOLD_POD_LABEL: set with a lease group of 65 Leases (LEASEHOLD_SHARDS)", "(set podLabel.enabled, shards)"}},
		"rank url not http":         {[]string{"--set", "appRank.url=tcp://127.0.0.1:8080/rank"}, []string{schema, "at '/appRank/url'"}},
		"group with a rank":         {[]string{"--set", "shards=2", "--set", "appRank.url=http://127.0.0.1:8080/rank"}, []string{`appRank.url="http://127.0.0.1:8080/rank" with a lease group`, "one app's rank ranks it for one Lease"}},
		"observer with a rank":      {[]string{"--set", "candidate=false", "--set", "appRank.url=http://127.0.0.1:8080/rank"}, []string{"candidate=false (an observer, which is never a successor) together with appRank.url"}},
		"rank with a long Lease":    {[]string{"--set", "appRank.url=http://127.0.0.1:8080/rank", "--set", "leaseName=" + strings.Repeat("a", 64)}, []string{"appRank.url groups the members under the Lease's name", "shorten leaseName"}},
		"priority, rank, any":       {[]string{"--set", "appRank.url=http://127.0.0.1:8080/rank", "--set", "handover=any", "--set", "priority=3"}, []string{"priority=3 has no effect without handover=successor"}},
		"rank probe timing":         {[]string{"--set", "appRank.url=http://127.0.0.1:8080/rank", "--set", "appHealth.timeout=3s"}, []string{"LEASEHOLD_APP_HEALTH_TIMEOUT=3s must not exceed LEASEHOLD_APP_HEALTH_INTERVAL=2s"}},
		"group checks in subcharts": {[]string{"--set", "leasehold.shards=2", "--set", "leasehold.leases={a}", "--example"}, []string{"leases (a) and shards (2) are both set"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			chart, args := chartDir, tc.args
			if i := slices.Index(args, "--example"); i >= 0 {
				chart, args = exampleChart(t), slices.Delete(slices.Clone(args), i, i+1)
			}
			out, err := helm(t, append([]string{"template", "bad", chart}, args...)...)
			if err == nil {
				t.Fatalf("helm template %v succeeded:\n%s", args, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}

func writeValues(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The worked example of a user's chart (examples/my-app) adds leasehold to
// its own pod template with `include "leasehold.container"
// .Subcharts.leasehold`: the sidecar it renders uses the Lease, the
// ServiceAccount and the image that the leasehold dependency's Role and
// RoleBinding are made for.
func TestExampleUserChartIncludesTheSidecar(t *testing.T) {
	requireHelm(t)
	t.Parallel()
	objs := render(t, "shop", "ci-ns", exampleChart(t))
	d := convert[appsv1.Deployment](t, one(t, objs, "Deployment"))
	if d.Name != "shop-my-app" {
		t.Errorf("Deployment %q", d.Name)
	}
	spec := d.Spec.Template.Spec
	sidecar := container(spec.InitContainers, "leasehold")
	if sidecar == nil || sidecar.RestartPolicy == nil || *sidecar.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Fatalf("the example's pod has no native leasehold sidecar: %+v", spec.InitContainers)
	}
	checkSidecar(t, sidecar, "my-app-leader")
	if sidecar.Image != "ghcr.io/leasehold/leasehold:"+readChartMeta(t).AppVersion {
		t.Errorf("image %q: want the leasehold chart's appVersion, not my-app's", sidecar.Image)
	}
	role := convert[rbacv1.Role](t, one(t, objs, "Role"))
	if diff := ruleDiff(role.Rules, leastPrivilege("my-app-leader")); diff != "" {
		t.Errorf("Role rules: %s", diff)
	}
	sa := one(t, objs, "ServiceAccount")
	binding := convert[rbacv1.RoleBinding](t, one(t, objs, "RoleBinding"))
	if spec.ServiceAccountName != sa.GetName() || binding.Subjects[0].Name != sa.GetName() {
		t.Errorf("pod runs as %q; ServiceAccount %q; bound %q", spec.ServiceAccountName, sa.GetName(), binding.Subjects[0].Name)
	}
	app := container(spec.Containers, "my-app")
	wantEnv(t, app, map[string]string{"LEASEHOLD_URL": "http://127.0.0.1:4040"})
}

// The Role grants only what the mode needs, and no rule of it is implied by
// the others (RBAC rules add up, so such a rule would grant nothing):
//   - one Lease (the default): byte for byte the Role of before lease groups
//     (testdata/role-default.golden.yaml): create, and get, update, list,
//     watch on the Lease by name;
//   - a lease group (named roles or shards, balanced or greedy): create,
//     get, update, delete, list, watch on Leases, none by name, because the
//     member Lease's name depends on the identity and the members are
//     listed by label;
//   - an observer (candidate=false), one Lease or a group: list and watch
//     on the Lease(s) by name, nothing else.
//
// The sidecar's environment says the same mode. test/chart/rbac*_test.go
// prove each verb necessary and the whole sufficient.
func TestRoleGrantsOnlyWhatTheModeNeeds(t *testing.T) {
	requireHelm(t)
	t.Parallel()
	meta := readChartMeta(t)
	golden, err := os.ReadFile(filepath.Join("testdata", "role-default.golden.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.NewReplacer("{{VERSION}}", meta.Version, "{{APPVERSION}}", meta.AppVersion).Replace(string(golden))
	if got := mustHelm(t, "template", "ci", chartDir, "--namespace", "ci-ns", "-s", "templates/role.yaml"); got != want {
		t.Errorf("the default Role changed; got:\n%s\nwant (testdata/role-default.golden.yaml):\n%s", got, want)
	}

	shards := []string{"ci-leasehold-0", "ci-leasehold-1", "ci-leasehold-2"}
	for name, tc := range map[string]struct {
		args  []string
		rules []rbacv1.PolicyRule
		env   map[string]string // the mode's settings; the others of modeVars unset
	}{
		"single Lease": {nil, leastPrivilege("ci-leasehold"), map[string]string{"LEASEHOLD_LEASE_NAME": "ci-leasehold"}},
		"shards": {[]string{"--set", "shards=3"}, groupRules, map[string]string{
			"LEASEHOLD_LEASE_NAME": "ci-leasehold", "LEASEHOLD_SHARDS": "3", "LEASEHOLD_GROUP": "ci-leasehold", "LEASEHOLD_BALANCE": "true"}},
		"shards, released to anyone on leaving": {[]string{"--set", "shards=3", "--set", "handover=any"}, groupRules, map[string]string{
			"LEASEHOLD_LEASE_NAME": "ci-leasehold", "LEASEHOLD_SHARDS": "3", "LEASEHOLD_GROUP": "ci-leasehold", "LEASEHOLD_BALANCE": "true", "LEASEHOLD_HANDOVER": "any"}},
		"single Lease, released to anyone (as by default)": {[]string{"--set", "handover=any"}, leastPrivilege("ci-leasehold"), map[string]string{
			"LEASEHOLD_LEASE_NAME": "ci-leasehold", "LEASEHOLD_HANDOVER": "any"}},
		"single Lease, ranked (successor by default, priority allowed)": {[]string{"--set", "appRank.url=http://127.0.0.1:8080/rank", "--set", "priority=2"}, groupRules, map[string]string{
			"LEASEHOLD_LEASE_NAME": "ci-leasehold", "LEASEHOLD_APP_RANK_URL": "http://127.0.0.1:8080/rank", "LEASEHOLD_PRIORITY": "2",
			"LEASEHOLD_APP_HEALTH_TIMEOUT": "1s", "LEASEHOLD_APP_HEALTH_INTERVAL": "2s"}},
		"named roles, greedy, own group name": {[]string{"--set", "leases={scheduler,compactor}", "--set", "balance=false", "--set", "group=jobs"}, groupRules, map[string]string{
			"LEASEHOLD_LEASES": "scheduler,compactor", "LEASEHOLD_GROUP": "jobs", "LEASEHOLD_BALANCE": "false"}},
		"observer of one Lease": {[]string{"--set", "candidate=false", "--set", "leaseName=orders"}, observerRules("orders"), map[string]string{
			"LEASEHOLD_LEASE_NAME": "orders", "LEASEHOLD_CANDIDATE": "false"}},
		"observer of shards": {[]string{"--set", "candidate=false", "--set", "shards=3"}, observerRules(shards...), map[string]string{
			"LEASEHOLD_LEASE_NAME": "ci-leasehold", "LEASEHOLD_SHARDS": "3", "LEASEHOLD_GROUP": "ci-leasehold", "LEASEHOLD_BALANCE": "true", "LEASEHOLD_CANDIDATE": "false"}},
		"observer of roles": {[]string{"--set", "candidate=false", "--set", "leases={a,b}"}, observerRules("a", "b"), map[string]string{
			"LEASEHOLD_LEASES": "a,b", "LEASEHOLD_GROUP": "ci-leasehold", "LEASEHOLD_BALANCE": "true", "LEASEHOLD_CANDIDATE": "false"}},
		"shards with the pod label": {[]string{"--set", "shards=3", "--set", "podLabel.enabled=true"}, append(slices.Clone(groupRules), podLabelRule), map[string]string{
			"LEASEHOLD_LEASE_NAME": "ci-leasehold", "LEASEHOLD_SHARDS": "3", "LEASEHOLD_GROUP": "ci-leasehold", "LEASEHOLD_BALANCE": "true", "LEASEHOLD_POD_LABEL": "leasehold.io/leader"}},
		"observer with the pod label": {[]string{"--set", "candidate=false", "--set", "podLabel.enabled=true"},
			append(observerRules("ci-leasehold"), podLabelRule), map[string]string{
				"LEASEHOLD_LEASE_NAME": "ci-leasehold", "LEASEHOLD_CANDIDATE": "false", "LEASEHOLD_POD_LABEL": "leasehold.io/leader"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			objs := render(t, "ci", "ci-ns", chartDir, append([]string{"--set", "demo.enabled=true"}, tc.args...)...)
			role := convert[rbacv1.Role](t, one(t, objs, "Role"))
			if diff := ruleDiff(role.Rules, tc.rules); diff != "" {
				t.Errorf("Role rules: %s", diff)
			}
			if i := impliedRule(role.Rules); i >= 0 {
				t.Errorf("rule %d of the Role is implied by the others: %s", i, rulesString(role.Rules))
			}
			d := convert[appsv1.Deployment](t, one(t, objs, "Deployment"))
			c := container(d.Spec.Template.Spec.InitContainers, "leasehold")
			wantEnv(t, c, tc.env)
			for _, v := range append(slices.Clone(modeVars), "LEASEHOLD_LEASE_NAME") {
				if _, ok := tc.env[v]; !ok {
					wantUnset(t, c, v)
				}
			}
		})
	}
}

// impliedRule returns the index of a rule whose every grant another rule
// of rules also makes, or -1.
func impliedRule(rules []rbacv1.PolicyRule) int {
	grants := func(r rbacv1.PolicyRule, group, resource, verb, name string) bool {
		return (slices.Contains(r.APIGroups, group) || slices.Contains(r.APIGroups, "*")) &&
			(slices.Contains(r.Resources, resource) || slices.Contains(r.Resources, "*")) &&
			(slices.Contains(r.Verbs, verb) || slices.Contains(r.Verbs, "*")) &&
			(len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, name))
	}
	for i, r := range rules {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{"\x00any"} // a name no rule lists: only an unrestricted rule grants it
		}
		implied := true
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					for _, n := range names {
						byOther := false
						for j, o := range rules {
							if j != i && grants(o, g, res, v, n) {
								byOther = true
								break
							}
						}
						implied = implied && byOther
					}
				}
			}
		}
		if implied {
			return i
		}
	}
	return -1
}
