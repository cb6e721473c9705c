package chart_test

import (
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/leasehold/leasehold/internal/testing/fleet"
	"github.com/leasehold/leasehold/internal/testing/kubetest"
)

// scrapeRounds is how many times each sidecar is scraped, scrapeEvery
// apart; promtool sees the rounds scrapeStep apart (Prometheus' usual
// interval), so that rate() over [1m] spans four of them.
const (
	scrapeRounds = 5
	scrapeEvery  = time.Second
	scrapeStep   = 15 * time.Second
)

// A dashboard mode is a fleet of real sidecars and what the dashboard must
// show for it.
type dashboardMode struct {
	name   string
	leases []string // the Leases the lease variable must offer
	// election is the constant label, besides namespace, that every
	// leasehold_* series carries: lease, or group.
	election, electionValue string
	// absent are the panels that have no data in this mode, with why.
	absent map[string]string
}

// Every query of the dashboard, its variables' included, returns data
// against what real sidecars export, in single-Lease mode (two sidecars
// with app health, the leader label and the forwarding proxy, requests
// sent through it) and in a lease group (two members of three shards, with
// app health and the forwarding proxy, requests for every Lease sent
// through it, and one naming none): the scrapes of every sidecar, labelled as a PodMonitor's
// targets are (instance, pod, job; honorLabels keeps the sidecar's
// namespace), are promtool's input series, and each panel's query, with
// the variables set to the namespace and every Lease, must give a sample
// that is not NaN. The lease variable must offer exactly the mode's
// Leases. The only panels left empty are those of a feature the mode
// cannot have (members and moves are a group's).
//
// The sidecars are scraped scrapeRounds times scrapeEvery apart; promtool
// places the rounds scrapeStep apart, so the values are real and only
// their timestamps are stretched (rates come out smaller than they were).
//
// The same scrapes check that every leasehold_* series carries namespace
// and the election (lease; in a group, group, and lease only naming one of
// its Leases), that the alerts of both renderings name only exported
// metrics, and api/openapi.yaml's list of series: every family exported in
// either mode is listed there with its own labels, and every listed one was
// exported.
func TestDashboardQueriesReturnDataFromLiveSidecars(t *testing.T) {
	kubetest.Require(t, cluster)
	bin := promtool(t)
	t.Parallel()
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") }))
	t.Cleanup(app.Close)
	upstream := strings.TrimPrefix(app.URL, "http://")

	exported := map[string]map[string]bool{} // family → its own label names (without namespace, lease, group)
	single := dashboardMode{name: "one Lease", leases: []string{"dash"}, election: "lease", electionValue: "dash", absent: map[string]string{
		"Members seen": "a single Lease keeps no membership",
		"Lease moves":  "a single Lease keeps no membership",
	}}
	t.Run(single.name, func(t *testing.T) {
		ns := newNamespace(t, "dash")
		createPods(t, ns, "a", "b")
		insts, proxies := startProxiedPair(t, ns, upstream, func(a *fleet.Instance) { waitLeader(t, a) },
			"LEASEHOLD_APP_HEALTH_URL="+app.URL+"/healthz", "LEASEHOLD_POD_LABEL=leasehold.io/leader")
		// Requests through both proxies before every round of scrapes:
		// local on the leader, forwarded on the follower.
		traffic := func() {
			for _, proxy := range proxies {
				resp, err := http.Get(proxy)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("GET %s: %d", proxy, resp.StatusCode)
				}
			}
		}
		waitClockRate(t, insts)
		checkDashboardQueries(t, bin, ns, single, insts, traffic, exported)
	})
	group := dashboardMode{name: "a lease group", leases: []string{"dash-0", "dash-1", "dash-2"}, election: "group", electionValue: "dash", absent: map[string]string{}}
	t.Run(group.name, func(t *testing.T) {
		ns := newNamespace(t, "dash-group")
		createPods(t, ns, "a", "b")
		insts, proxies := startProxiedPair(t, ns, upstream, func(*fleet.Instance) {},
			"LEASEHOLD_SHARDS=3", "LEASEHOLD_APP_HEALTH_URL="+app.URL+"/healthz", "LEASEHOLD_POD_LABEL=leasehold.io/leader")
		eventually(t, generous, "both members hold Leases, every Lease is held, and both know where its leader is", func() bool {
			held := map[string]bool{}
			for _, inst := range insts {
				ls, err := inst.Leases(t.Context())
				if err != nil {
					return false
				}
				for _, st := range ls.Leases {
					if st.LeaderAddress.Address == "" {
						return false
					}
					if st.Leader {
						held[inst.Name] = true
						held[st.Lease] = true
					}
				}
			}
			return len(held) == 2+len(group.leases)
		})
		// Requests for every Lease through both proxies before every round
		// of scrapes (local or forwarded, by who leads it), and one that
		// names no Lease (400).
		traffic := func() {
			for _, proxy := range proxies {
				for _, lease := range append(slices.Clone(group.leases), "") {
					req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, proxy, nil)
					if err != nil {
						t.Fatal(err)
					}
					want := http.StatusBadRequest
					if lease != "" {
						req.Header.Set("X-Leasehold-Lease", lease)
						want = http.StatusOK
					}
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if resp.StatusCode != want {
						t.Fatalf("GET %s for %q: %d, want %d", proxy, lease, resp.StatusCode, want)
					}
				}
			}
		}
		waitClockRate(t, insts)
		checkDashboardQueries(t, bin, ns, group, insts, traffic, exported)
	})
	if t.Failed() {
		return
	}
	checkOpenAPIMetrics(t, exported)
	checkAlertsNameExportedMetrics(t, exported)
}

// checkElectionLabels checks that every series of family carries the
// namespace and mode's election label, and in a group, that the series
// about one Lease name one of the group's Leases.
func checkElectionLabels(t *testing.T, mode dashboardMode, ns string, family *dto.MetricFamily) {
	t.Helper()
	for _, m := range family.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if got["namespace"] != ns || got[mode.election] != mode.electionValue {
			t.Errorf("%s: %s%v: want namespace=%s, %s=%s", mode.name, family.GetName(), got, ns, mode.election, mode.electionValue)
		}
		if lease, ok := got["lease"]; ok && !slices.Contains(mode.leases, lease) {
			t.Errorf("%s: %s%v: lease %q is not one of %v", mode.name, family.GetName(), got, lease, mode.leases)
		}
	}
}

// checkAlertsNameExportedMetrics checks that the alerts, for one Lease and
// for a group, name only metrics the sidecars exported (a histogram as
// its _bucket, _sum and _count series). The dashboard's queries are
// proven by returning data.
func checkAlertsNameExportedMetrics(t *testing.T, exported map[string]map[string]bool) {
	t.Helper()
	requireHelm(t)
	names := map[string]bool{}
	for name := range exported {
		for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
			names[name+suffix] = true
		}
	}
	var named []string
	for _, args := range [][]string{
		{"--set", "prometheusRule.enabled=true"},
		{"-f", filepath.Join(chartDir, "ci", "shards-values.yaml"), "--set", "prometheusRule.enabled=true"},
	} {
		for _, r := range renderedRules(t, render(t, "ci", "ci-ns", chartDir, args...)) {
			for _, name := range metricNames(r.Expr) {
				if !names[name] {
					t.Errorf("%s: %q names %s, which no sidecar exported", r.Alert, r.Expr, name)
				}
				if !slices.Contains(named, name) {
					named = append(named, name)
				}
			}
		}
	}
	slices.Sort(named)
	t.Logf("the alerts use %d metrics, all exported: %v", len(named), named)
}

// createPods creates Pods of those names in ns (never scheduled: no
// kubelet runs), for the leader label to patch.
func createPods(t *testing.T, ns string, names ...string) {
	t.Helper()
	cs := cluster.Clientset()
	// No controller manager creates the default ServiceAccount, which
	// admission looks up for every Pod.
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(t.Context(),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{
				AutomountServiceAccountToken: new(false),
				SecurityContext: &corev1.PodSecurityContext{
					RunAsNonRoot:   new(true),
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
				Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1", SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: new(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				}}},
			},
		}
		if _, err := cs.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// waitClockRate waits until some instance bounds the rate of some Lease
// holder's clock, so that the holder-clock series are exported.
func waitClockRate(t *testing.T, insts []*fleet.Instance) {
	t.Helper()
	eventually(t, generous, "a follower bounds the holder's clock rate", func() bool {
		for _, inst := range insts {
			ls, err := inst.Leases(t.Context())
			if err != nil {
				return false
			}
			for _, st := range ls.Leases {
				if st.HolderClock != nil && st.HolderClock.RateLower != nil {
					return true
				}
			}
		}
		return false
	})
}

// checkDashboardQueries scrapes insts (after traffic, each round), writes
// the scrapes as promtool's input series and every dashboard query as an
// expression test, and runs `promtool test rules` on it; it adds the
// families scraped to exported.
func checkDashboardQueries(t *testing.T, bin, ns string, mode dashboardMode, insts []*fleet.Instance, traffic func(), exported map[string]map[string]bool) {
	t.Helper()
	series := map[string][]string{} // series → its value in each round ("_" when absent)
	tick := time.NewTicker(scrapeEvery)
	defer tick.Stop()
	for round := range scrapeRounds {
		if round > 0 {
			<-tick.C
		}
		traffic()
		for _, inst := range insts {
			scrape, err := inst.Metrics(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			target := map[string]string{"instance": strings.TrimPrefix(inst.OpsURL, "http://"), "pod": inst.Name, "job": ns + "/leasehold"}
			for name, family := range scrape {
				if !strings.HasPrefix(name, "leasehold_") && !strings.HasPrefix(name, "leader_election_") {
					continue
				}
				recordLabels(exported, family)
				if round == 0 {
					checkElectionLabels(t, mode, ns, family)
				}
				for key, v := range samples(family, target) {
					if series[key] == nil {
						series[key] = slices.Repeat([]string{"_"}, scrapeRounds)
					}
					series[key][round] = strconv.FormatFloat(v, 'g', -1, 64)
				}
			}
		}
	}

	d, _ := readDashboard(t)
	vars := strings.NewReplacer(
		"$namespace", ns,
		"$lease", "("+strings.Join(mode.leases, "|")+")",
		"$__rate_interval", "1m",
	)
	evalAt := time.Duration(scrapeRounds-1) * scrapeStep
	type sample struct {
		Labels string  `json:"labels"`
		Value  float64 `json:"value"`
	}
	type exprTest struct {
		Expr       string   `json:"expr"`
		EvalTime   string   `json:"eval_time"`
		ExpSamples []sample `json:"exp_samples"`
	}
	var tests []exprTest
	// The variables, label_values(selector, label) evaluated as group by
	// (label) (selector): the namespace offers ns, lease exactly the mode's
	// Leases.
	offers := map[string][]string{"namespace": {ns}, "lease": mode.leases}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValuesQuery.FindStringSubmatch(v.Definition)
		if m == nil || offers[v.Name] == nil {
			t.Errorf("variable %s: %q is not a label_values(selector, label) query the test knows", v.Name, v.Definition)
			continue
		}
		var want []sample
		for _, value := range offers[v.Name] {
			want = append(want, sample{fmt.Sprintf(`{%s=%q}`, m[2], value), 1})
		}
		tests = append(tests, exprTest{Expr: vars.Replace(fmt.Sprintf("group by (%s) (%s)", m[2], m[1])), EvalTime: evalAt.String(), ExpSamples: want})
	}
	var panels []string
	for _, p := range d.Panels {
		if _, ok := mode.absent[p.Title]; ok {
			continue
		}
		panels = append(panels, p.Title)
		for _, target := range p.Targets {
			e := vars.Replace(target.Expr)
			// A sample that is not NaN (NaN != NaN): count() of them is 1 or more.
			tests = append(tests, exprTest{Expr: fmt.Sprintf("count((%s) == (%s)) > bool 0", e, e), EvalTime: evalAt.String(),
				ExpSamples: []sample{{"{}", 1}}})
		}
	}
	for title := range mode.absent {
		if !slices.ContainsFunc(d.Panels, func(p dashboardPanel) bool { return p.Title == title }) {
			t.Errorf("no panel %q, which the test expects to be empty in %s", title, mode.name)
		}
	}

	var input []map[string]string
	for _, key := range slices.Sorted(maps.Keys(series)) {
		input = append(input, map[string]string{"series": key, "values": strings.Join(series[key], " ")})
	}
	file := map[string]any{
		"rule_files":          []string{},
		"evaluation_interval": scrapeStep.String(),
		"tests": []any{map[string]any{
			"name":             "dashboard, " + mode.name,
			"interval":         scrapeStep.String(),
			"input_series":     input,
			"promql_expr_test": tests,
		}},
	}
	data, err := yaml.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dashboard.test.yaml"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), bin, "test", "rules", "dashboard.test.yaml")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("promtool test rules on %d series of %d sidecars (%s): %v\n%s", len(series), len(insts), filepath.Join(dir, "dashboard.test.yaml"), err, out)
		return
	}
	t.Logf("%s: %d queries of %d panels return data from %d series of %d sidecars; empty by design: %v", mode.name, len(tests), len(panels), len(series), len(insts), mode.absent)
}

// labelValuesQuery is a Grafana variable query label_values(selector,
// label): the selector, and the label.
var labelValuesQuery = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// samples returns the series of family as promtool's input notation
// (name{labels}) with their values, each series labelled also with target;
// a histogram as its _bucket (le), _sum and _count series.
func samples(family *dto.MetricFamily, target map[string]string) map[string]float64 {
	out := map[string]float64{}
	key := func(name string, m *dto.Metric, extra ...string) string {
		labels := maps.Clone(target)
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for i := 0; i < len(extra); i += 2 {
			labels[extra[i]] = extra[i+1]
		}
		var pairs []string
		for _, k := range slices.Sorted(maps.Keys(labels)) {
			pairs = append(pairs, k+"="+strconv.Quote(labels[k]))
		}
		return name + "{" + strings.Join(pairs, ", ") + "}"
	}
	name := family.GetName()
	for _, m := range family.GetMetric() {
		switch {
		case m.Counter != nil:
			out[key(name, m)] = m.GetCounter().GetValue()
		case m.Gauge != nil:
			out[key(name, m)] = m.GetGauge().GetValue()
		case m.Untyped != nil:
			out[key(name, m)] = m.GetUntyped().GetValue()
		case m.Histogram != nil:
			h := m.GetHistogram()
			inf := false
			for _, b := range h.GetBucket() {
				le := strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)
				inf = inf || le == "+Inf"
				out[key(name+"_bucket", m, "le", le)] = float64(b.GetCumulativeCount())
			}
			if !inf {
				out[key(name+"_bucket", m, "le", "+Inf")] = float64(h.GetSampleCount())
			}
			out[key(name+"_sum", m)] = h.GetSampleSum()
			out[key(name+"_count", m)] = float64(h.GetSampleCount())
		}
	}
	return out
}

// electionLabels are the constant labels every leasehold_* series carries
// (namespace, and lease or group), and the per-Lease lease of a group's.
var electionLabels = []string{"namespace", "lease", "group"}

// recordLabels adds family's own label names (those of any of its series,
// without electionLabels) to exported.
func recordLabels(exported map[string]map[string]bool, family *dto.MetricFamily) {
	own := exported[family.GetName()]
	if own == nil {
		own = map[string]bool{}
		exported[family.GetName()] = own
	}
	for _, m := range family.GetMetric() {
		for _, l := range m.GetLabel() {
			if !slices.Contains(electionLabels, l.GetName()) {
				own[l.GetName()] = true
			}
		}
	}
}

// checkOpenAPIMetrics compares the list of series in the description of
// GET /metrics in api/openapi.yaml (lines "- `name{label, ...}` ...") with
// what the sidecars exported.
func checkOpenAPIMetrics(t *testing.T, exported map[string]map[string]bool) {
	t.Helper()
	documented := openAPIMetrics(t)
	for _, name := range slices.Sorted(maps.Keys(exported)) {
		labels := slices.Sorted(maps.Keys(exported[name]))
		doc, ok := documented[name]
		switch {
		case !ok:
			t.Errorf("api/openapi.yaml (GET /metrics) does not list %s%v, which the sidecar exports", name, labels)
		case !slices.Equal(doc, labels):
			t.Errorf("api/openapi.yaml lists %s with the labels %v; the sidecar exports it with %v", name, doc, labels)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(documented)) {
		if _, ok := exported[name]; !ok {
			t.Errorf("api/openapi.yaml (GET /metrics) lists %s, which no sidecar of either mode exported", name)
		}
	}
	t.Logf("api/openapi.yaml lists the %d series the sidecars export", len(documented))
}

// openAPIMetrics reads the list of series of GET /metrics from
// api/openapi.yaml: each line of its description that starts with "- `"
// names one, with its own labels in braces.
func openAPIMetrics(t *testing.T) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "api", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	if err := yaml.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	get, _ := spec.Paths["/metrics"]["get"].(map[string]any)
	desc, _ := get["description"].(string)
	out := map[string][]string{}
	for line := range strings.Lines(desc) {
		line = strings.TrimSpace(line)
		rest, ok := strings.CutPrefix(line, "- `")
		if !ok {
			continue
		}
		series, _, ok := strings.Cut(rest, "`")
		if !ok {
			t.Fatalf("api/openapi.yaml, GET /metrics: %q has no closing backquote", line)
		}
		name, labels, _ := strings.Cut(strings.TrimSuffix(series, "}"), "{")
		var own []string
		for l := range strings.SplitSeq(labels, ",") {
			if l = strings.TrimSpace(l); l != "" {
				own = append(own, l)
			}
		}
		slices.Sort(own)
		if _, dup := out[name]; dup {
			t.Errorf("api/openapi.yaml lists %s twice", name)
		}
		out[name] = own
	}
	if len(out) == 0 {
		t.Fatal("api/openapi.yaml, GET /metrics: no series listed (lines starting with \"- `\")")
	}
	return out
}

// startProxiedPair starts sidecars a and b of the Lease (or shards) "dash"
// in ns with env, each with a forwarding proxy to upstream on a port of its
// own, and calls first with a before b starts. It returns them and their
// proxies' URLs.
func startProxiedPair(t *testing.T, ns, upstream string, first func(a *fleet.Instance), env ...string) ([]*fleet.Instance, []string) {
	t.Helper()
	var insts []*fleet.Instance
	var proxies []string
	for _, name := range []string{"a", "b"} {
		port, err := kubetest.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		f := fleetConfig(t, ns, "dash", nil)
		f.Env = append(slices.Clone(env),
			"LEASEHOLD_PROXY_ADDR="+addr, "LEASEHOLD_PROXY_UPSTREAM="+upstream, "LEASEHOLD_ADVERTISE_ADDRESS="+addr)
		insts = append(insts, start(t, f, name))
		proxies = append(proxies, "http://"+addr+"/")
		if name == "a" {
			first(insts[0])
		}
	}
	return insts, proxies
}
