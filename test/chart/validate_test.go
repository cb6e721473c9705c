package chart_test

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/leasehold/leasehold/internal/config"
	"github.com/leasehold/leasehold/internal/podlabel"
)

// timingVars are the sidecar's variables each chart value below sets.
var timingVars = map[string]string{
	"timings.leaseDuration": "LEASEHOLD_LEASE_DURATION",
	"timings.renewDeadline": "LEASEHOLD_RENEW_DEADLINE",
	"timings.retryPeriod":   "LEASEHOLD_RETRY_PERIOD",
	"appHealth.url":         "LEASEHOLD_APP_HEALTH_URL",
	"appHealth.timeout":     "LEASEHOLD_APP_HEALTH_TIMEOUT",
	"appHealth.interval":    "LEASEHOLD_APP_HEALTH_INTERVAL",
}

// sidecarError is what the sidecar says at start (internal/config) of
// the chart's defaults with values set as the chart sets their variables:
// nil when it starts.
func sidecarError(t *testing.T, values map[string]string) error {
	t.Helper()
	// The chart's defaults, which the sidecar's are too.
	env := map[string]string{
		"LEASEHOLD_LEASE_NAME": "orders", "LEASEHOLD_LEASE_NAMESPACE": "shop", "LEASEHOLD_IDENTITY": "orders-0",
		"LEASEHOLD_LEASE_DURATION": "15s", "LEASEHOLD_RENEW_DEADLINE": "10s", "LEASEHOLD_RETRY_PERIOD": "2s",
	}
	if values["appHealth.url"] != "" {
		env["LEASEHOLD_APP_HEALTH_TIMEOUT"], env["LEASEHOLD_APP_HEALTH_INTERVAL"] = "1s", "2s"
	}
	for value, v := range values {
		if strings.HasPrefix(value, "appHealth.") && values["appHealth.url"] == "" {
			continue // the chart sets the health variables only with the URL
		}
		env[timingVars[value]] = v
	}
	return loadSidecar(t, env)
}

// loadSidecar is what the sidecar says at start (internal/config) with
// exactly the variables env (and no other LEASEHOLD_*, POD_NAME or
// POD_NAMESPACE): nil when it starts.
func loadSidecar(t *testing.T, env map[string]string) error {
	t.Helper()
	for _, v := range os.Environ() {
		if name, _, _ := strings.Cut(v, "="); strings.HasPrefix(name, config.Prefix+"_") || name == "POD_NAME" || name == "POD_NAMESPACE" {
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	_, err := config.Loader{NamespaceFile: "/nonexistent/namespace"}.Load()
	return err
}

// helm template refuses exactly the timings the sidecar refuses at start
// (each relational rule of decide.Config and apphealth.Config, and the
// single-value rules among them), with the sidecar's own message followed
// by the values to change, and renders the ones it accepts, boundaries
// included: the two are compared case by case, internal/config being the
// reference.
func TestRenderRefusesTheTimingsTheSidecarRefuses(t *testing.T) {
	requireHelm(t)
	for name, tc := range map[string]struct {
		values map[string]string
		hint   string // the values the chart's message names; "" when both accept
	}{
		"defaults": {nil, ""},
		"renewDeadline below 1.2 × retryPeriod (the issue's)":  {map[string]string{"timings.renewDeadline": "1s"}, "(set timings.renewDeadline, timings.retryPeriod)"},
		"renewDeadline exactly 1.2 × retryPeriod":              {map[string]string{"timings.renewDeadline": "2.4s"}, "(set timings.renewDeadline, timings.retryPeriod)"},
		"renewDeadline just above 1.2 × retryPeriod":           {map[string]string{"timings.renewDeadline": "2401ms"}, ""},
		"fractions shown as Go shows them":                     {map[string]string{"timings.renewDeadline": "1.5s", "timings.retryPeriod": "1.25s"}, "(set timings.renewDeadline, timings.retryPeriod)"},
		"microseconds":                                         {map[string]string{"timings.renewDeadline": "1500us", "timings.retryPeriod": "1250µs"}, "(set timings.renewDeadline, timings.retryPeriod)"},
		"renewDeadline zero":                                   {map[string]string{"timings.renewDeadline": "0s"}, "(set timings.renewDeadline, timings.retryPeriod)"},
		"renewDeadline + retryPeriod equal to leaseDuration":   {map[string]string{"timings.renewDeadline": "13s"}, "(set timings.renewDeadline, timings.retryPeriod, timings.leaseDuration)"},
		"renewDeadline + retryPeriod just below leaseDuration": {map[string]string{"timings.renewDeadline": "12999ms"}, ""},
		"minutes shown as Go shows them":                       {map[string]string{"timings.leaseDuration": "1m30s", "timings.renewDeadline": "1m25s", "timings.retryPeriod": "5s"}, "(set timings.renewDeadline, timings.retryPeriod, timings.leaseDuration)"},
		"hours":                                                {map[string]string{"timings.leaseDuration": "1h", "timings.renewDeadline": "59m", "timings.retryPeriod": "1m"}, "(set timings.renewDeadline, timings.retryPeriod, timings.leaseDuration)"},
		"leaseDuration zero":                                   {map[string]string{"timings.leaseDuration": "0s"}, "(set timings.leaseDuration)"},
		"retryPeriod zero":                                     {map[string]string{"timings.retryPeriod": "0s"}, "(set timings.retryPeriod)"},
		"app health defaults":                                  {map[string]string{"appHealth.url": "http://127.0.0.1:8080/healthz"}, ""},
		"health timeout beyond the interval":                   {map[string]string{"appHealth.url": "http://127.0.0.1:8080/healthz", "appHealth.timeout": "3s"}, "(set appHealth.timeout, appHealth.interval)"},
		"health timeout equal to the interval":                 {map[string]string{"appHealth.url": "http://127.0.0.1:8080/healthz", "appHealth.timeout": "2s"}, ""},
		"health timeout zero":                                  {map[string]string{"appHealth.url": "http://127.0.0.1:8080/healthz", "appHealth.timeout": "0s"}, "(set appHealth.timeout)"},
		"health interval zero":                                 {map[string]string{"appHealth.url": "http://127.0.0.1:8080/healthz", "appHealth.timeout": "0s", "appHealth.interval": "0s"}, "(set appHealth.timeout)"},
		"health timings without a URL":                         {map[string]string{"appHealth.timeout": "3s"}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			args := []string{"template", "orders", chartDir, "--namespace", "shop"}
			for k, v := range tc.values {
				args = append(args, "--set-string", k+"="+v)
			}
			want := sidecarError(t, tc.values)
			_, err := helm(t, args...)
			switch {
			case want == nil && err == nil:
				if tc.hint != "" {
					t.Errorf("both accept %v, want a refusal naming %s", tc.values, tc.hint)
				}
			case want == nil:
				t.Errorf("helm template refuses %v, which the sidecar accepts:\n%v", tc.values, err)
			case err == nil:
				t.Errorf("helm template renders %v, which the sidecar refuses: %v", tc.values, want)
			default:
				if _, ok := errors.AsType[*config.Error](want); !ok {
					t.Fatalf("the sidecar's error %v is not a configuration error", want)
				}
				if !strings.Contains(err.Error(), want.Error()+" "+tc.hint) {
					t.Errorf("helm template's error does not carry the sidecar's message %q and then %q:\n%v", want, tc.hint, err)
				}
			}
		})
	}
}

// helm template refuses, with a lease group and podLabel.enabled, exactly
// what the sidecar refuses at start (rules 8 and 9 of internal/config):
// more than podlabel.MaxGroupLeases Leases, and a Lease whose leader label
// key <podLabel.key>-<lease> is no qualified label name (the first such
// Lease named), with the sidecar's own message followed by the values to
// change; boundaries on both sides. The sidecar's variables are the ones
// the chart renders for these values (release orders in shop).
func TestRenderRefusesThePodLabelKeysTheSidecarRefuses(t *testing.T) {
	requireHelm(t)
	roles := func(names ...string) ([]string, map[string]string) {
		return []string{"--set", "leases={" + strings.Join(names, ",") + "}"},
			map[string]string{"LEASEHOLD_LEASES": strings.Join(names, ","), "LEASEHOLD_GROUP": "orders-leasehold"}
	}
	shards := func(prefix string, n int) ([]string, map[string]string) {
		return []string{"--set", "leaseName=" + prefix, "--set", "shards=" + strconv.Itoa(n)},
			map[string]string{"LEASEHOLD_LEASE_NAME": prefix, "LEASEHOLD_SHARDS": strconv.Itoa(n), "LEASEHOLD_GROUP": prefix}
	}
	many := make([]string, podlabel.MaxGroupLeases+1)
	for i := range many {
		many[i] = "r" + strconv.Itoa(i)
	}
	b56, b57, s54 := strings.Repeat("b", 56), strings.Repeat("b", 57), strings.Repeat("s", 54)
	key60 := "example.com/" + strings.Repeat("k", 60)
	for name, tc := range map[string]struct {
		group func() ([]string, map[string]string)
		key   string // podLabel.key; "" for the default
		hint  string // the values the chart's message names; "" when both accept
	}{
		"roles, the longest key":          {func() ([]string, map[string]string) { return roles("alpha", b56) }, "", ""},
		"roles, a key one too long":       {func() ([]string, map[string]string) { return roles("alpha", b57, b57+"c") }, "", "(set podLabel.key, leases)"},
		"shards, the longest key":         {func() ([]string, map[string]string) { return shards(s54, 10) }, "", ""},
		"shards, the last key too long":   {func() ([]string, map[string]string) { return shards(s54, 11) }, "", "(set podLabel.key, leaseName)"},
		"a long key, a short role":        {func() ([]string, map[string]string) { return roles("ab") }, key60, ""},
		"a long key, a role one too long": {func() ([]string, map[string]string) { return roles("abc") }, key60, "(set podLabel.key, leases)"},
		"the most shards":                 {func() ([]string, map[string]string) { return shards("web", podlabel.MaxGroupLeases) }, "", ""},
		"one shard too many":              {func() ([]string, map[string]string) { return shards("web", podlabel.MaxGroupLeases+1) }, "", "(set podLabel.enabled, shards)"},
		"one role too many":               {func() ([]string, map[string]string) { return roles(many...) }, "", "(set podLabel.enabled, leases)"},
	} {
		t.Run(name, func(t *testing.T) {
			args, env := tc.group()
			args = append([]string{"template", "orders", chartDir, "--namespace", "shop", "--set", "podLabel.enabled=true"}, args...)
			env["LEASEHOLD_POD_LABEL"] = "leasehold.io/leader"
			if tc.key != "" {
				args = append(args, "--set", "podLabel.key="+tc.key)
				env["LEASEHOLD_POD_LABEL"] = tc.key
			}
			env["LEASEHOLD_LEASE_NAMESPACE"], env["LEASEHOLD_IDENTITY"], env["POD_NAME"], env["POD_NAMESPACE"] = "shop", "orders-0", "orders-0", "shop"
			want := loadSidecar(t, env)
			_, err := helm(t, args...)
			switch {
			case want == nil && err == nil:
				if tc.hint != "" {
					t.Errorf("both accept, want a refusal naming %s", tc.hint)
				}
			case want == nil:
				t.Errorf("helm template refuses what the sidecar accepts:\n%v", err)
			case err == nil:
				t.Errorf("helm template renders what the sidecar refuses: %v", want)
			default:
				if _, ok := errors.AsType[*config.Error](want); !ok {
					t.Fatalf("the sidecar's error %v is not a configuration error", want)
				}
				if !strings.Contains(err.Error(), want.Error()+" "+tc.hint) {
					t.Errorf("helm template's error does not carry the sidecar's message %q and then %q:\n%v", want, tc.hint, err)
				}
			}
		})
	}
}

// The forwarding proxy: helm template renders what the sidecar accepts, for
// one Lease and for a lease group (shards or roles), and refuses what it
// refuses (an observer), with the sidecar's own reason. What is rendered
// is what starts: the sidecar container's environment, as rendered (the
// Downward API's values given), loads.
func TestRenderAcceptsTheProxyWhereTheSidecarDoes(t *testing.T) {
	requireHelm(t)
	for name, tc := range map[string]struct {
		args    []string
		refusal string // "" when both accept
	}{
		"one Lease": {nil, ""},
		"shards":    {[]string{"--set", "shards=2"}, ""},
		"roles":     {[]string{"--set", "leases={scheduler,compactor}"}, ""},
		"observer":  {[]string{"--set", "candidate=false"}, "an observer never leads"},
	} {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"template", "ci", chartDir, "--namespace", "ci-ns", "--set", "demo.enabled=true", "--set", "proxy.enabled=true"}, tc.args...)
			out, err := helm(t, args...)
			if tc.refusal != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refusal) {
					t.Fatalf("helm template %v: %v, want a refusal saying %q", tc.args, err, tc.refusal)
				}
				return
			}
			if err != nil {
				t.Fatalf("helm template %v: %v", tc.args, err)
			}
			objs, err := decode(out)
			if err != nil {
				t.Fatal(err)
			}
			d := convert[appsv1.Deployment](t, one(t, objs, "Deployment"))
			c := container(d.Spec.Template.Spec.InitContainers, "leasehold")
			wantEnv(t, c, map[string]string{"LEASEHOLD_PROXY_ADDR": ":4050", "LEASEHOLD_PROXY_UPSTREAM": "127.0.0.1:8080", "LEASEHOLD_ADVERTISE_ADDRESS": "$(POD_IP):4050"})
			if err := loadRendered(t, c); err != nil {
				t.Errorf("the sidecar refuses what helm template rendered for %v: %v", tc.args, err)
			}
		})
	}
}

// loadRendered loads the sidecar's configuration from c's environment as
// the kubelet gives it: the Downward API's fields (POD_NAME,
// POD_NAMESPACE, POD_IP) with values of a Pod, $(VAR) references expanded.
func loadRendered(t *testing.T, c *corev1.Container) error {
	t.Helper()
	for _, v := range os.Environ() {
		if name, _, _ := strings.Cut(v, "="); strings.HasPrefix(name, config.Prefix+"_") || strings.HasPrefix(name, "POD_") {
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
	}
	downward := map[string]string{"metadata.name": "ci-7d4-x2", "metadata.namespace": "ci-ns", "status.podIP": "10.0.0.7"}
	set := map[string]string{}
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			v = downward[e.ValueFrom.FieldRef.FieldPath]
		}
		for name, value := range set {
			v = strings.ReplaceAll(v, "$("+name+")", value)
		}
		set[e.Name] = v
		t.Setenv(e.Name, v)
	}
	_, err := config.Loader{NamespaceFile: "/nonexistent/namespace"}.Load()
	return err
}
