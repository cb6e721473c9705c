package chart_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/leasehold/leasehold/internal/testing/kubetest"
	"github.com/leasehold/leasehold/internal/testing/poll"
)

// PromtoolEnv names the environment variable that points at the promtool
// binary (make promtool-bin); without it, <module root>/.cache/promtool/current/promtool.
const PromtoolEnv = "LEASEHOLD_PROMTOOL"

// The Prometheus Operator's CRDs that the chart's monitoring objects are
// validated against come from the operator's own Go module, at a pinned
// version whose zip hash (as in a go.sum line) is checked: `go mod download`
// fetches it through the Go module proxy once into the module cache (4 MB,
// under a second), and the CRDs are read from example/prometheus-operator-crd.
const (
	promOperatorModule  = "github.com/prometheus-operator/prometheus-operator"
	promOperatorVersion = "v0.85.0"
	promOperatorSum     = "h1:M5xLCLEoaW2IJfnuCwFzzpL+jSVQu3KGT84Pye+fW8s="
)

// monitoringCRDs are the CRDs the chart renders objects of.
var monitoringCRDs = []string{"servicemonitors", "podmonitors", "prometheusrules"}

// promtool returns the promtool binary, skipping t under -short when it is
// missing and failing it otherwise.
func promtool(t testing.TB) string {
	t.Helper()
	bin := os.Getenv(PromtoolEnv)
	if bin == "" {
		bin = filepath.Join(root, ".cache", "promtool", "current", "promtool")
	}
	if _, err := os.Stat(bin); err != nil {
		if testing.Short() {
			t.Skip("needs promtool (make promtool-bin)")
		}
		t.Fatalf("promtool not found (run `make promtool-bin`, or set %s): %v", PromtoolEnv, err)
	}
	return bin
}

var (
	crdsOnce sync.Once
	crdsErr  error
)

// installMonitoringCRDs installs the Prometheus Operator's ServiceMonitor,
// PodMonitor and PrometheusRule CRDs into the test cluster, once per test
// binary, and waits until discovery serves them: from then on the API
// server validates those objects against the CRDs' schemas.
func installMonitoringCRDs(t testing.TB) {
	t.Helper()
	kubetest.Require(t, cluster)
	crdsOnce.Do(func() { crdsErr = installCRDs() })
	if crdsErr != nil {
		t.Fatalf("installing the Prometheus Operator CRDs: %v", crdsErr)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cluster.Admin().Config)
	if err != nil {
		t.Fatal(err)
	}
	served := 0
	poll.UntilReport(t, generous, 100*time.Millisecond, "monitoring.coreos.com/v1 served", func() bool {
		var list *metav1.APIResourceList
		list, err = dc.ServerResourcesForGroupVersion("monitoring.coreos.com/v1")
		served = 0
		if err == nil {
			for _, r := range list.APIResources {
				if slices.Contains(monitoringCRDs, r.Name) {
					served++
				}
			}
		}
		return served == len(monitoringCRDs)
	}, func() string { return fmt.Sprintf("%d of %v (%v)", served, monitoringCRDs, err) })
}

func installCRDs() error {
	dir, err := downloadModule(promOperatorModule, promOperatorVersion, promOperatorSum)
	if err != nil {
		return err
	}
	cfg := cluster.Admin().Config
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, name := range monitoringCRDs {
		data, err := os.ReadFile(filepath.Join(dir, "example", "prometheus-operator-crd", "monitoring.coreos.com_"+name+".yaml"))
		if err != nil {
			return err
		}
		var obj unstructured.Unstructured
		if err := yaml.Unmarshal(data, &obj.Object); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if _, err := crds.Create(ctx, &obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create CRD %s: %w", obj.GetName(), err)
		}
	}
	return nil
}

// downloadModule fetches module@version through the Go module proxy into
// the module cache (a no-op once there) and returns its directory, after
// checking that its hash is sum.
func downloadModule(module, version, sum string) (string, error) {
	tmp, err := os.MkdirTemp("", "leasehold-modules-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir = tmp // outside any module: nothing to record in a go.mod or go.sum
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var got struct{ Dir, Sum, Error string }
	if jsonErr := json.Unmarshal(out, &got); err != nil || jsonErr != nil || got.Error != "" {
		return "", fmt.Errorf("go mod download %s@%s: %v %s %s", module, version, err, got.Error, stderr.String())
	}
	if got.Sum != sum {
		return "", fmt.Errorf("%s@%s has hash %s, want %s", module, version, got.Sum, sum)
	}
	return got.Dir, nil
}

// monitoringValues is the ci values file that turns every monitoring
// object on.
const (
	monitoringValues = "monitoring-values.yaml"
	podMonitorValues = "podmonitor-values.yaml"
)

// Off by default, each monitoring object is rendered exactly when its
// switch is on, with the settings it is given: the ServiceMonitor with the
// headless Service it selects in front of the sidecar's OPS port, the
// PodMonitor on the Pods that run the sidecar (the demo's, or
// metrics.podSelector), the PrometheusRule on this release's Lease with
// alertLabels on every alert, and the dashboard ConfigMap labelled for
// Grafana's sidecar with dashboards/leasehold.json as it is.
func TestMonitoringRendering(t *testing.T) {
	requireHelm(t)
	t.Parallel()
	monitoring := []string{"Service", "ServiceMonitor", "PodMonitor", "PrometheusRule", "ConfigMap"}
	kindsOf := func(objs []*unstructured.Unstructured) []string {
		var kinds []string
		for _, o := range objs {
			if slices.Contains(monitoring, o.GetKind()) {
				kinds = append(kinds, o.GetKind())
			}
		}
		slices.Sort(kinds)
		return kinds
	}
	demo := []string{"--set", "demo.enabled=true"}
	for name, c := range map[string]struct {
		args []string
		want []string
	}{
		"defaults":                 {nil, nil},
		"demo":                     {demo, nil},
		"serviceMonitor":           {append(demo, "--set", "metrics.serviceMonitor.enabled=true"), []string{"Service", "ServiceMonitor"}},
		"podMonitor":               {append(demo, "--set", "metrics.podMonitor.enabled=true"), []string{"PodMonitor"}},
		"prometheusRule":           {[]string{"--set", "prometheusRule.enabled=true"}, []string{"PrometheusRule"}},
		"grafanaDashboard":         {[]string{"--set", "grafanaDashboard.enabled=true"}, []string{"ConfigMap"}},
		"podMonitor, own selector": {[]string{"--set", "metrics.podMonitor.enabled=true", "--set", "metrics.podSelector.app=orders"}, []string{"PodMonitor"}},
		"everything":               {[]string{"-f", filepath.Join(chartDir, "ci", monitoringValues)}, []string{"ConfigMap", "PrometheusRule", "Service", "ServiceMonitor"}},
		"the PodMonitor values":    {[]string{"-f", filepath.Join(chartDir, "ci", podMonitorValues)}, []string{"PodMonitor"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := kindsOf(render(t, "ci", "ci-ns", chartDir, c.args...)); !slices.Equal(got, c.want) {
				t.Errorf("monitoring objects %v, want %v", got, c.want)
			}
		})
	}

	// Without the demo there are no Pods to select unless podSelector names them.
	for _, monitor := range []string{"serviceMonitor", "podMonitor"} {
		_, err := helm(t, "template", "ci", chartDir, "--set", "metrics."+monitor+".enabled=true")
		if err == nil || !strings.Contains(err.Error(), "metrics.podSelector is required") {
			t.Errorf("%s without the demo or podSelector: %v, want an error naming metrics.podSelector", monitor, err)
		}
	}

	objs := render(t, "ci", "ci-ns", chartDir, "-f", filepath.Join(chartDir, "ci", monitoringValues))
	meta := readChartMeta(t)
	for _, o := range objs {
		wantLabels(t, o, meta, "ci")
	}
	demoPods := map[string]string{"app.kubernetes.io/name": "leasehold", "app.kubernetes.io/instance": "ci", "app.kubernetes.io/component": "demo"}
	if got := nestedStrings(t, one(t, objs, "Deployment"), "spec", "template", "metadata", "labels"); !isSubset(demoPods, got) {
		t.Fatalf("the demo's Pods are labelled %v, not %v", got, demoPods)
	}

	svc := convert[corev1.Service](t, one(t, objs, "Service"))
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || !maps.Equal(svc.Spec.Selector, demoPods) || len(svc.Spec.Ports) != 1 ||
		svc.Spec.Ports[0].Name != "leasehold-ops" || svc.Spec.Ports[0].TargetPort.IntValue() != 4041 || svc.Labels["app.kubernetes.io/component"] != "metrics" {
		t.Errorf("metrics Service: %+v %v; want headless, selecting the demo's Pods, port leasehold-ops → 4041", svc.Spec, svc.Labels)
	}
	sm := one(t, objs, "ServiceMonitor")
	if got := nestedStrings(t, sm, "spec", "selector", "matchLabels"); !isSubset(got, svc.Labels) || len(got) == 0 {
		t.Errorf("ServiceMonitor selects %v, the Service is labelled %v", got, svc.Labels)
	}
	if sm.GetLabels()["release"] != "kube-prometheus-stack" {
		t.Errorf("ServiceMonitor labels %v: want serviceMonitor.labels", sm.GetLabels())
	}
	wantEndpoint(t, "ServiceMonitor", sm, "endpoints", "30s")
	pm := one(t, render(t, "ci", "ci-ns", chartDir, "-f", filepath.Join(chartDir, "ci", podMonitorValues)), "PodMonitor")
	if got := nestedStrings(t, pm, "spec", "selector", "matchLabels"); !maps.Equal(got, demoPods) {
		t.Errorf("PodMonitor selects %v, want the demo's Pods %v", got, demoPods)
	}
	wantEndpoint(t, "PodMonitor", pm, "podMetricsEndpoints", "")

	own := render(t, "ci", "ci-ns", chartDir, "--set", "metrics.podMonitor.enabled=true", "--set", "metrics.podSelector.app=orders")
	if got := nestedStrings(t, one(t, own, "PodMonitor"), "spec", "selector", "matchLabels"); !maps.Equal(got, map[string]string{"app": "orders"}) {
		t.Errorf("PodMonitor with podSelector selects %v, want app=orders", got)
	}

	rules := renderedRules(t, objs)
	if len(rules) != 9 {
		t.Errorf("%d alerts, want 9", len(rules))
	}
	for _, r := range rules {
		if r.Labels["team"] != "platform" || r.Labels["severity"] == "" {
			t.Errorf("%s: labels %v, want a severity and the alertLabels (team: platform)", r.Alert, r.Labels)
		}
		if r.Annotations["summary"] == "" || r.Annotations["description"] == "" ||
			r.Annotations["runbook_url"] != "https://github.com/leasehold/leasehold/blob/main/charts/leasehold/README.md#"+strings.ToLower(r.Alert) {
			t.Errorf("%s: annotations %v", r.Alert, r.Annotations)
		}
		for _, sel := range selectors(r.Expr) {
			if !strings.Contains(sel.matchers, `namespace="ci-ns"`) || !strings.Contains(sel.matchers, `lease="ci-leasehold"`) {
				t.Errorf("%s: %s{%s} is not limited to this release's Lease", r.Alert, sel.name, sel.matchers)
			}
		}
	}
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		if !strings.Contains(string(readme), "#### "+r.Alert+"\n") {
			t.Errorf("README.md has no heading %q, which the runbook_url of %s points at", "#### "+r.Alert, r.Alert)
		}
	}

	cm := convert[corev1.ConfigMap](t, one(t, objs, "ConfigMap"))
	file, err := os.ReadFile(filepath.Join(chartDir, "dashboards", "leasehold.json"))
	if err != nil {
		t.Fatal(err)
	}
	if cm.Labels["grafana_dashboard"] != "1" || cm.Annotations["grafana_folder"] != "Platform" ||
		cm.Data["leasehold.json"] != strings.TrimSuffix(string(file), "\n") {
		t.Errorf("dashboard ConfigMap: labels %v, annotations %v, data equal to dashboards/leasehold.json: %v",
			cm.Labels, cm.Annotations, cm.Data["leasehold.json"] == strings.TrimSuffix(string(file), "\n"))
	}
}

// wantEndpoint checks the one scrape endpoint of a monitor: the sidecar's
// OPS port by name, /metrics, leasehold's own labels honoured, and the
// interval given (none when "").
func wantEndpoint(t *testing.T, kind string, monitor *unstructured.Unstructured, field, interval string) {
	t.Helper()
	endpoints, _, _ := unstructured.NestedSlice(monitor.Object, "spec", field)
	if len(endpoints) != 1 {
		t.Fatalf("%s: %d endpoints, want 1", kind, len(endpoints))
	}
	ep := endpoints[0].(map[string]any)
	if ep["port"] != "leasehold-ops" || ep["path"] != "/metrics" || ep["honorLabels"] != true {
		t.Errorf("%s endpoint %v: want port leasehold-ops, path /metrics, honorLabels", kind, ep)
	}
	if got, _ := ep["interval"].(string); got != interval {
		t.Errorf("%s interval %q, want %q", kind, got, interval)
	}
}

func nestedStrings(t testing.TB, obj *unstructured.Unstructured, fields ...string) map[string]string {
	t.Helper()
	m, _, err := unstructured.NestedStringMap(obj.Object, fields...)
	if err != nil {
		t.Fatalf("%s %s %v: %v", obj.GetKind(), obj.GetName(), fields, err)
	}
	return m
}

func isSubset(sub, of map[string]string) bool {
	for k, v := range sub {
		if of[k] != v {
			return false
		}
	}
	return true
}

// alertRule is one rule of a PrometheusRule.
type alertRule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ruleGroups is the spec of a PrometheusRule, which is also the format of
// a Prometheus rules file.
type ruleGroups struct {
	Groups []struct {
		Name  string      `json:"name"`
		Rules []alertRule `json:"rules"`
	} `json:"groups"`
}

// renderedGroups returns the spec of the one PrometheusRule in objs.
func renderedGroups(t testing.TB, objs []*unstructured.Unstructured) ruleGroups {
	t.Helper()
	spec, _, _ := unstructured.NestedMap(one(t, objs, "PrometheusRule").Object, "spec")
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var groups ruleGroups
	if err := json.Unmarshal(data, &groups); err != nil {
		t.Fatal(err)
	}
	return groups
}

func renderedRules(t testing.TB, objs []*unstructured.Unstructured) []alertRule {
	t.Helper()
	var rules []alertRule
	for _, g := range renderedGroups(t, objs).Groups {
		rules = append(rules, g.Rules...)
	}
	return rules
}

// The chart's alerts, rendered with the default thresholds, pass `promtool
// check rules` and their unit tests under `promtool test rules`: for one
// Lease (testdata/alerts.test.yaml), every alert tested both firing and
// held back, LeaseholdAbsent firing with no series at all; for a lease
// group (ci/shards-values.yaml, testdata/alerts-group.test.yaml), the alerts
// a group judges differently (per Lease of the group, the group as a whole,
// its membership), each both firing and held back. The group's rules are
// the single Lease's plus LeaseholdGroupMembershipFlapping.
func TestAlertRulesPassPromtool(t *testing.T) {
	requireHelm(t)
	bin := promtool(t)
	t.Parallel()
	single := renderedGroups(t, render(t, "ci", "ci-ns", chartDir, "--set", "prometheusRule.enabled=true"))
	grouped := renderedGroups(t, render(t, "ci", "ci-ns", chartDir, "-f", filepath.Join(chartDir, "ci", "shards-values.yaml"), "--set", "prometheusRule.enabled=true"))
	singleAlerts, groupAlerts := alertNames(single), alertNames(grouped)
	if want := append(slices.Clone(singleAlerts), "LeaseholdGroupMembershipFlapping"); !slices.Equal(groupAlerts, want) {
		t.Errorf("a group's alerts are %v, want %v", groupAlerts, want)
	}
	for _, c := range []struct {
		name, testFile string
		groups         ruleGroups
		tested         []string // the alerts the file must test firing and held back
	}{
		{"one Lease", "alerts.test.yaml", single, singleAlerts},
		{"a lease group", "alerts-group.test.yaml", grouped, []string{"LeaseholdNoLeader", "LeaseholdMultipleLeaders", "LeaseholdAbsent", "LeaseholdGroupMembershipFlapping"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fires, quiet := promtoolRules(t, bin, c.groups, c.testFile)
			for _, alert := range c.tested {
				if !fires[alert] || !quiet[alert] {
					t.Errorf("%s: tested firing %v, held back %v; want both in testdata/%s", alert, fires[alert], quiet[alert], c.testFile)
				}
			}
		})
	}
}

// alertNames lists the alerts of groups, in order.
func alertNames(groups ruleGroups) []string {
	var names []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Alert)
		}
	}
	return names
}

// promtoolRules writes groups as rules.yaml next to a copy of
// testdata/testFile, runs `promtool check rules` and `promtool test rules`
// on them, and returns which alerts the file tests firing and held back.
func promtoolRules(t *testing.T, bin string, groups ruleGroups, testFile string) (fires, quiet map[string]bool) {
	t.Helper()
	dir := t.TempDir()
	rules, err := yaml.Marshal(groups)
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join("testdata", testFile))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"rules.yaml": rules, testFile: tests} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), bin, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
		if err != nil {
			t.Fatalf("promtool %s: %v", strings.Join(args, " "), err)
		}
	}
	run("check", "rules", "rules.yaml")
	run("test", "rules", testFile)

	var unit struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `json:"alertname"`
				ExpAlerts []map[string]any `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(tests, &unit); err != nil {
		t.Fatal(err)
	}
	fires, quiet = map[string]bool{}, map[string]bool{}
	for _, tc := range unit.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	return fires, quiet
}

// selector is one vector selector of a PromQL expression: a metric name
// and its label matchers ("" when it has none).
type selector struct{ name, matchers string }

var (
	promqlString  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	promqlMatcher = regexp.MustCompile(`\{[^{}]*\}`)
	promqlRange   = regexp.MustCompile(`\[[^\]]*\]`)
	promqlGroup   = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlIdent   = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	labelValues   = regexp.MustCompile(`^\s*label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)?\s*(\{[^}]*\})?\s*,?\s*[a-zA-Z_]*\s*\)\s*$`)
	metricAndSel  = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^{}]*\})?`)
)

// promqlKeywords are identifiers of PromQL that are not metric names and
// are not followed by a parenthesis.
var promqlKeywords = []string{"and", "or", "unless", "bool", "offset", "inf", "nan", "Inf", "NaN"}

// metricNames lists the metric names an expression selects: PromQL, or a
// Grafana label_values(metric{...}, label) variable query. It blanks out
// string literals, label matchers, ranges and grouping clauses, then keeps
// the identifiers that are not function calls, keywords or numbers.
func metricNames(expr string) []string {
	if m := labelValues.FindStringSubmatch(expr); m != nil {
		if m[1] == "" {
			return nil
		}
		return []string{m[1]}
	}
	s := promqlString.ReplaceAllString(expr, `""`)
	s = promqlMatcher.ReplaceAllString(s, " ")
	s = promqlRange.ReplaceAllString(s, " ")
	s = promqlGroup.ReplaceAllString(s, " ")
	var names []string
	for _, loc := range promqlIdent.FindAllStringIndex(s, -1) {
		word, rest := s[loc[0]:loc[1]], strings.TrimLeft(s[loc[1]:], " \t\n")
		if strings.HasPrefix(rest, "(") || slices.Contains(promqlKeywords, word) ||
			(loc[0] > 0 && (s[loc[0]-1] >= '0' && s[loc[0]-1] <= '9' || s[loc[0]-1] == '.' || s[loc[0]-1] == '$')) {
			continue // a function or aggregation, a keyword, an exponent or unit, a Grafana variable
		}
		if !slices.Contains(names, word) {
			names = append(names, word)
		}
	}
	return names
}

// selectors lists the vector selectors of the leasehold metrics in expr,
// with their matchers.
func selectors(expr string) []selector {
	var out []selector
	for _, m := range metricAndSel.FindAllStringSubmatch(promqlString.ReplaceAllStringFunc(expr, func(s string) string {
		return strings.NewReplacer("{", "(", "}", ")").Replace(s) // keep quotes, drop braces inside strings
	}), -1) {
		if strings.HasPrefix(m[1], "leasehold_") {
			out = append(out, selector{name: m[1], matchers: strings.Trim(m[2], "{}")})
		}
	}
	return out
}

// The extraction of metric names from expressions finds the selected
// metrics and nothing else.
func TestMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum by (pod) (rate(leasehold_renew_failures_total{namespace="$namespace", lease="$lease"}[$__rate_interval]))`: {"leasehold_renew_failures_total"},
		`histogram_quantile(0.99, sum by (le) (rate(x_bucket{a="b"}[5m]))) > 1e-3`:                                      {"x_bucket"},
		`max(a) by (lease) / on(lease) group_left(pod) b unless c offset 5m == bool 1`:                                  {"a", "b", "c"},
		`label_values(leasehold_build_info{namespace="$namespace"}, lease)`:                                             {"leasehold_build_info"},
		`label_values(leasehold_build_info, namespace)`:                                                                 {"leasehold_build_info"},
		`leasehold_watch_up{pod=~"a|b"} == 0`:                                                                           {"leasehold_watch_up"},
		`count(up{job="x(y)"})`:                                                                                         {"up"},
	} {
		if got := metricNames(expr); !slices.Equal(got, want) {
			t.Errorf("metricNames(%q) = %v, want %v", expr, got, want)
		}
	}
	if got := selectors(`a{b="c"} + leasehold_x{namespace="n", lease="l"} / leasehold_y`); !slices.Equal(got, []selector{{"leasehold_x", `namespace="n", lease="l"`}, {"leasehold_y", ""}}) {
		t.Errorf("selectors = %v", got)
	}
}

// dashboard is what the tests read of dashboards/leasehold.json.
type dashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
			Query      any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []dashboardPanel `json:"panels"`
}

// dashboardPanel is what the tests read of one panel.
type dashboardPanel struct {
	Title   string `json:"title"`
	Type    string `json:"type"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

func readDashboard(t testing.TB) (*dashboard, []string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir, "dashboards", "leasehold.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(data) {
		t.Fatal("dashboards/leasehold.json is not valid JSON")
	}
	var d dashboard
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("dashboards/leasehold.json: %v", err)
	}
	var exprs []string
	for _, p := range d.Panels {
		for _, target := range p.Targets {
			exprs = append(exprs, target.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			exprs = append(exprs, v.Definition)
			if q, ok := v.Query.(map[string]any); ok {
				exprs = append(exprs, fmt.Sprint(q["query"]))
			}
		}
	}
	return &d, exprs
}

// servingLeases limits a dashboard query on a series of the process
// (leasehold_watchers, leasehold_members, ...: in a lease group they carry
// group, not lease) to the instances that serve the chosen Leases: those
// that export leasehold_leader for one of them, on the same target.
const servingLeases = ` and on (instance) leasehold_leader{namespace="$namespace", lease=~"$lease"}`

// The dashboard is valid JSON with the panels a platform team expects,
// each query limited to the chosen namespace and Leases: a per-Lease series
// by its lease label (which it has in every mode), a series of the process
// as one of the instances that serve them.
func TestDashboard(t *testing.T) {
	d, exprs := readDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q, title %q: want both", d.UID, d.Title)
	}
	var titles []string
	for _, p := range d.Panels {
		titles = append(titles, p.Title)
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
	}
	for _, want := range []string{"Leader over time", "Holder changes", "Renew latency", "Validity left", "Watchers and holds",
		"Leases per member", "Unheld Leases", "Lease moves", "Proxy requests", "App health", "Holder clock rate"} {
		if !slices.Contains(titles, want) {
			t.Errorf("no panel %q (panels %v)", want, titles)
		}
	}
	var variables []string
	for _, v := range d.Templating.List {
		variables = append(variables, v.Name)
	}
	if !slices.Equal(variables, []string{"datasource", "namespace", "lease"}) {
		t.Errorf("variables %v, want datasource, namespace, lease", variables)
	}
	for _, expr := range exprs {
		if len(metricNames(expr)) == 0 {
			t.Errorf("%q selects no metric", expr)
		}
		if strings.HasPrefix(expr, "label_values(") {
			continue
		}
		for _, sel := range selectors(expr) {
			if !strings.Contains(sel.matchers, `namespace="$namespace"`) ||
				!strings.Contains(sel.matchers, `lease=~"$lease"`) && !strings.Contains(expr, servingLeases) {
				t.Errorf("%s{%s} in %q is not limited to $namespace and $lease (by its lease label, or as a series of the instances that serve $lease)", sel.name, sel.matchers, expr)
			}
		}
	}
}

// The API server checks the chart's monitoring objects against the
// Prometheus Operator's CRD schemas (TestRenderedObjectsPassServerSideDryRun
// dry-runs ci/monitoring-values.yaml), and that check has teeth: a
// misspelled field, a value of the wrong type and a malformed duration are
// rejected.
func TestMonitoringCRDsRejectWhatTheChartMustNotRender(t *testing.T) {
	installMonitoringCRDs(t)
	requireHelm(t)
	t.Parallel()
	a := newApplier(t)
	ns := newNamespace(t, "crd-teeth")
	objs := render(t, "ci", ns, chartDir, "-f", filepath.Join(chartDir, "ci", monitoringValues))
	objs = append(objs, one(t, render(t, "ci", ns, chartDir, "-f", filepath.Join(chartDir, "ci", podMonitorValues)), "PodMonitor"))
	for _, kind := range []string{"ServiceMonitor", "PodMonitor", "PrometheusRule"} {
		if err := a.dryRun(t.Context(), ns, one(t, objs, kind)); err != nil {
			t.Fatalf("control: %s: %v", kind, err)
		}
	}
	for name, c := range map[string]struct {
		kind   string
		change func(map[string]any)
		want   string
	}{
		"misspelled field": {"ServiceMonitor", func(o map[string]any) {
			spec := o["spec"].(map[string]any)
			spec["endpoint"] = spec["endpoints"]
			delete(spec, "endpoints")
		}, "unknown field"},
		"honorLabels as a string": {"PodMonitor", func(o map[string]any) {
			o["spec"].(map[string]any)["podMetricsEndpoints"].([]any)[0].(map[string]any)["honorLabels"] = "yes"
		}, "honorLabels"},
		"malformed for": {"PrometheusRule", func(o map[string]any) {
			group := o["spec"].(map[string]any)["groups"].([]any)[0].(map[string]any)
			group["rules"].([]any)[0].(map[string]any)["for"] = "a minute"
		}, "for"},
	} {
		obj := one(t, objs, c.kind).DeepCopy()
		c.change(obj.Object)
		if err := a.dryRun(t.Context(), ns, obj); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error about %s", name, err, c.want)
		}
	}
}
