package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/httpapi"
)

// clearEnv unsets every LEASEHOLD_* variable, POD_NAME, POD_NAMESPACE and the
// unprefixed names envconfig could fall back to, for the duration of the
// test. t.Setenv registers the restore (and forbids t.Parallel); the
// following os.Unsetenv makes the variable truly unset, which envconfig
// distinguishes from set-but-empty.
func clearEnv(t *testing.T) {
	t.Helper()
	names := []string{
		"POD_NAME", "POD_NAMESPACE",
		"LEASE_NAME", "LEASE_NAMESPACE", "IDENTITY", "LEASE_DURATION", "RENEW_DEADLINE",
		"RETRY_PERIOD", "API_ADDR", "OPS_ADDR", "RELEASE_ON_SHUTDOWN", "LOG_LEVEL", "LOG_FORMAT", "PPROF",
		"LEASES", "SHARDS", "GROUP", "BALANCE", "CANDIDATE",
	}
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, Prefix+"_") {
			names = append(names, name)
		}
	}
	for _, name := range names {
		t.Setenv(name, "")
		if err := os.Unsetenv(name); err != nil {
			t.Fatal(err)
		}
	}
}

// setEnv clears the environment, then sets env.
func setEnv(t *testing.T, env map[string]string) {
	t.Helper()
	clearEnv(t)
	for k, v := range env {
		t.Setenv(k, v)
	}
}

// testLoader never touches the real host: a fixed hostname and suffix, and a
// namespace file that does not exist.
func testLoader(t *testing.T) Loader {
	return Loader{
		Hostname:      func() (string, error) { return "host-1", nil },
		NamespaceFile: filepath.Join(t.TempDir(), "absent"),
		RandomSuffix:  func() string { return "abcd2345" },
	}
}

// base is the minimal valid environment.
func base() map[string]string {
	return map[string]string{
		"LEASEHOLD_LEASE_NAME":      "my-lease",
		"LEASEHOLD_LEASE_NAMESPACE": "default",
	}
}

func with(kv ...string) map[string]string {
	env := base()
	for i := 0; i < len(kv); i += 2 {
		env[kv[i]] = kv[i+1]
	}
	return env
}

func TestDefaults(t *testing.T) {
	setEnv(t, base())
	c, err := testLoader(t).Load()
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		LeaseName:         "my-lease",
		LeaseNamespace:    "default",
		Identity:          "host-1_abcd2345",
		LeaseDuration:     15 * time.Second,
		RenewDeadline:     10 * time.Second,
		RetryPeriod:       2 * time.Second,
		APIAddr:           "127.0.0.1:4040",
		OpsAddr:           ":4041",
		ReleaseOnShutdown: true,
		LogLevel:          slog.LevelInfo,
		LogFormat:         "json",
		Election:          Election{Leases: []string{"my-lease"}, Balance: true, Candidate: true},

		MaxBlockingRequests: httpapi.DefaultMaxBlockingRequests,
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
}

func TestAllVariablesHonored(t *testing.T) {
	setEnv(t, map[string]string{
		"LEASEHOLD_LEASE_NAME":          "other.lease",
		"LEASEHOLD_LEASE_NAMESPACE":     "kube-system",
		"LEASEHOLD_IDENTITY":            "me",
		"LEASEHOLD_LEASE_DURATION":      "30s",
		"LEASEHOLD_RENEW_DEADLINE":      "20s",
		"LEASEHOLD_RETRY_PERIOD":        "5s",
		"LEASEHOLD_API_ADDR":            "[::1]:8080",
		"LEASEHOLD_OPS_ADDR":            "localhost:9090",
		"LEASEHOLD_RELEASE_ON_SHUTDOWN": "false",
		"LEASEHOLD_LOG_LEVEL":           "DEBUG",
		"LEASEHOLD_LOG_FORMAT":          "Text",
		"LEASEHOLD_PPROF":               "true",
		"LEASEHOLD_CANDIDATE":           "false",
		"LEASEHOLD_ADVERTISE_ADDRESS":   "10.0.0.7:4042",
		"LEASEHOLD_FENCING_FLOOR":       "true",

		"LEASEHOLD_MAX_BLOCKING_REQUESTS": "2000",
	})
	c, err := testLoader(t).Load()
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		LeaseName:         "other.lease",
		LeaseNamespace:    "kube-system",
		Identity:          "me",
		LeaseDuration:     30 * time.Second,
		RenewDeadline:     20 * time.Second,
		RetryPeriod:       5 * time.Second,
		APIAddr:           "[::1]:8080",
		OpsAddr:           "localhost:9090",
		ReleaseOnShutdown: false,
		LogLevel:          slog.LevelDebug,
		LogFormat:         "text",
		Pprof:             true,
		Election:          Election{Leases: []string{"other.lease"}, Balance: true, Candidate: false},
		AdvertiseAddress:  "10.0.0.7:4042",
		FencingFloor:      true,

		MaxBlockingRequests: 2000,
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
	if !c.ElectionConfig().FencingFloor {
		t.Error("LEASEHOLD_FENCING_FLOOR=true did not reach the election's configuration")
	}
}

// Unprefixed variables of the same names must not configure the sidecar
// (envconfig falls back to them when a field has an `envconfig:"NAME"` tag).
func TestUnprefixedVariablesIgnored(t *testing.T) {
	setEnv(t, with(
		"LEASE_DURATION", "abc",
		"LOG_LEVEL", "bogus",
		"IDENTITY", "",
		"API_ADDR", "nonsense",
		"RELEASE_ON_SHUTDOWN", "false",
		"PPROF", "true",
		"LEASES", "a,b",
		"SHARDS", "3",
		"BALANCE", "false",
		"CANDIDATE", "false",
	))
	c, err := testLoader(t).Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.LeaseDuration != 15*time.Second || c.LogLevel != slog.LevelInfo || c.Identity != "host-1_abcd2345" ||
		c.APIAddr != "127.0.0.1:4040" || !c.ReleaseOnShutdown || c.Pprof || c.Grouped() || !c.Candidate {
		t.Errorf("unprefixed variables leaked into %+v", c)
	}
}

func TestLogLevels(t *testing.T) {
	for in, want := range map[string]slog.Level{
		"debug": slog.LevelDebug, "Info": slog.LevelInfo, "WARN": slog.LevelWarn, "error": slog.LevelError,
	} {
		setEnv(t, with("LEASEHOLD_LOG_LEVEL", in))
		c, err := testLoader(t).Load()
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if c.LogLevel != want {
			t.Errorf("%s: got %v, want %v", in, c.LogLevel, want)
		}
	}
}

func TestValidAddrs(t *testing.T) {
	for _, addr := range []string{":0", ":65535", "0.0.0.0:80", "[::]:80", "[fe80::1%eth0]:80", "My-Host.example.com:80", "localhost:4040"} {
		setEnv(t, with("LEASEHOLD_API_ADDR", addr, "LEASEHOLD_OPS_ADDR", addr))
		if _, err := testLoader(t).Load(); err != nil {
			t.Errorf("%q: %v", addr, err)
		}
	}
}

func TestRules(t *testing.T) {
	long := strings.Repeat("x", 254)
	tests := []struct {
		name string
		env  map[string]string
		// file, if non-nil, is written to the namespace file.
		file     *string
		hostname func() (string, error)
		wantVar  string
		// wantIn are substrings the message must contain.
		wantIn []string
	}{
		// envconfig parse errors.
		{name: "duration unparsable", env: with("LEASEHOLD_LEASE_DURATION", "abc"),
			wantVar: "LEASEHOLD_LEASE_DURATION", wantIn: []string{`"abc"`}},
		{name: "duration set empty", env: with("LEASEHOLD_RETRY_PERIOD", ""),
			wantVar: "LEASEHOLD_RETRY_PERIOD", wantIn: []string{`""`}},
		{name: "bool unparsable", env: with("LEASEHOLD_RELEASE_ON_SHUTDOWN", "yes please"),
			wantVar: "LEASEHOLD_RELEASE_ON_SHUTDOWN", wantIn: []string{`"yes please"`}},
		{name: "pprof unparsable", env: with("LEASEHOLD_PPROF", "on"),
			wantVar: "LEASEHOLD_PPROF", wantIn: []string{`"on"`}},

		// 1. Lease name.
		{name: "lease name missing", env: map[string]string{"LEASEHOLD_LEASE_NAMESPACE": "default"},
			wantVar: "LEASEHOLD_LEASE_NAME", wantIn: []string{"required"}},
		{name: "lease name invalid", env: with("LEASEHOLD_LEASE_NAME", "My_Lease"),
			wantVar: "LEASEHOLD_LEASE_NAME", wantIn: []string{`"My_Lease"`, "DNS subdomain"}},
		{name: "lease name too long", env: with("LEASEHOLD_LEASE_NAME", long),
			wantVar: "LEASEHOLD_LEASE_NAME", wantIn: []string{long}},

		// 10. Lease groups: which variables make one (the group's own rules are
		// group's: TestComponentRulesNameTheirVariables).
		{name: "roles with a lease name", env: with("LEASEHOLD_LEASES", "a,b"),
			wantVar: "LEASEHOLD_LEASES", wantIn: []string{"LEASEHOLD_LEASE_NAME", `"my-lease"`, "not both"}},
		{name: "roles with shards", env: map[string]string{"LEASEHOLD_LEASES": "a,b", "LEASEHOLD_SHARDS": "2", "LEASEHOLD_LEASE_NAMESPACE": "default"},
			wantVar: "LEASEHOLD_SHARDS", wantIn: []string{"LEASEHOLD_LEASES"}},
		{name: "role invalid", env: map[string]string{"LEASEHOLD_LEASES": "a,B_b", "LEASEHOLD_LEASE_NAMESPACE": "default"},
			wantVar: "LEASEHOLD_LEASES", wantIn: []string{`"B_b"`, "DNS subdomain"}},
		{name: "role empty", env: map[string]string{"LEASEHOLD_LEASES": "a,,b", "LEASEHOLD_LEASE_NAMESPACE": "default"},
			wantVar: "LEASEHOLD_LEASES", wantIn: []string{`""`}},
		{name: "shards zero", env: with("LEASEHOLD_SHARDS", "0"),
			wantVar: "LEASEHOLD_SHARDS", wantIn: []string{"0 shards", "1 to 1024"}},
		{name: "shards too many", env: with("LEASEHOLD_SHARDS", "1025"),
			wantVar: "LEASEHOLD_SHARDS", wantIn: []string{"1025", "1 to 1024"}},
		{name: "shards unparsable", env: with("LEASEHOLD_SHARDS", "many"),
			wantVar: "LEASEHOLD_SHARDS", wantIn: []string{`"many"`}},
		{name: "shards without a lease name", env: map[string]string{"LEASEHOLD_SHARDS": "4", "LEASEHOLD_LEASE_NAMESPACE": "default"},
			wantVar: "LEASEHOLD_LEASE_NAME", wantIn: []string{"required"}},
		{name: "shard names too long", env: with("LEASEHOLD_LEASE_NAME", strings.Repeat("x", 252), "LEASEHOLD_SHARDS", "10"),
			wantVar: "LEASEHOLD_SHARDS", wantIn: []string{"-9", "DNS subdomain"}},
		{name: "group without a group", env: with("LEASEHOLD_GROUP", "g"),
			wantVar: "LEASEHOLD_GROUP", wantIn: []string{"single Lease"}},
		{name: "balance without a group", env: with("LEASEHOLD_BALANCE", "false"),
			wantVar: "LEASEHOLD_BALANCE", wantIn: []string{"single Lease"}},
		{name: "balance unparsable", env: with("LEASEHOLD_SHARDS", "2", "LEASEHOLD_BALANCE", "fair"),
			wantVar: "LEASEHOLD_BALANCE", wantIn: []string{`"fair"`}},
		{name: "candidate unparsable", env: with("LEASEHOLD_CANDIDATE", "maybe"),
			wantVar: "LEASEHOLD_CANDIDATE", wantIn: []string{`"maybe"`}},

		// 8. Observer and group constraints.
		{name: "observer with health-gated candidacy", env: with("LEASEHOLD_CANDIDATE", "false", "LEASEHOLD_APP_HEALTH_URL", "http://127.0.0.1:8080/healthz"),
			wantVar: "LEASEHOLD_CANDIDATE", wantIn: []string{"observer", "LEASEHOLD_APP_HEALTH_URL"}},
		{name: "group of too many Leases with the leader label", env: with("LEASEHOLD_SHARDS", "65", "LEASEHOLD_POD_LABEL", "leader", "POD_NAME", "p", "POD_NAMESPACE", "default"),
			wantVar: "LEASEHOLD_POD_LABEL", wantIn: []string{"65 Leases (LEASEHOLD_SHARDS)", "at most 64 Leases"}},

		// 2. Namespace.
		{name: "namespace unresolvable", env: map[string]string{"LEASEHOLD_LEASE_NAME": "l"},
			wantVar: "LEASEHOLD_LEASE_NAMESPACE", wantIn: []string{"POD_NAMESPACE", "absent"}},
		{name: "namespace file empty", env: map[string]string{"LEASEHOLD_LEASE_NAME": "l"}, file: ptr(" \n"),
			wantVar: "LEASEHOLD_LEASE_NAMESPACE", wantIn: []string{"empty"}},
		{name: "namespace invalid", env: with("LEASEHOLD_LEASE_NAMESPACE", "a.b"),
			wantVar: "LEASEHOLD_LEASE_NAMESPACE", wantIn: []string{`"a.b"`, "DNS label", "LEASEHOLD_LEASE_NAMESPACE"}},
		{name: "pod namespace invalid", env: map[string]string{"LEASEHOLD_LEASE_NAME": "l", "POD_NAMESPACE": "Prod"},
			wantVar: "LEASEHOLD_LEASE_NAMESPACE", wantIn: []string{`"Prod"`, "from POD_NAMESPACE"}},
		{name: "namespace file invalid", env: map[string]string{"LEASEHOLD_LEASE_NAME": "l"}, file: ptr("bad_ns\n"),
			wantVar: "LEASEHOLD_LEASE_NAMESPACE", wantIn: []string{`"bad_ns"`, "namespace"}},

		// 3. Identity.
		{name: "identity empty", env: with("LEASEHOLD_IDENTITY", ""),
			wantVar: "LEASEHOLD_IDENTITY", wantIn: []string{`""`, "blank"}},
		{name: "identity blank", env: with("LEASEHOLD_IDENTITY", " \t"),
			wantVar: "LEASEHOLD_IDENTITY", wantIn: []string{`" \t"`, "blank"}},
		{name: "identity too long", env: with("LEASEHOLD_IDENTITY", long),
			wantVar: "LEASEHOLD_IDENTITY", wantIn: []string{"254", "253"}},
		{name: "hostname fails", env: base(), hostname: func() (string, error) { return "", errors.New("uts broken") },
			wantVar: "LEASEHOLD_IDENTITY", wantIn: []string{"uts broken"}},
		{name: "hostname empty", env: base(), hostname: func() (string, error) { return "", nil },
			wantVar: "LEASEHOLD_IDENTITY", wantIn: []string{"hostname is empty"}},

		// 5. Addresses.
		{name: "api addr no port", env: with("LEASEHOLD_API_ADDR", "127.0.0.1"),
			wantVar: "LEASEHOLD_API_ADDR", wantIn: []string{`"127.0.0.1"`, "host:port"}},
		{name: "api addr port out of range", env: with("LEASEHOLD_API_ADDR", "127.0.0.1:65536"),
			wantVar: "LEASEHOLD_API_ADDR", wantIn: []string{`"65536"`, "0 to 65535"}},
		{name: "api addr port empty", env: with("LEASEHOLD_API_ADDR", "127.0.0.1:"),
			wantVar: "LEASEHOLD_API_ADDR", wantIn: []string{`port ""`}},
		{name: "api addr named port", env: with("LEASEHOLD_API_ADDR", ":http"),
			wantVar: "LEASEHOLD_API_ADDR", wantIn: []string{`"http"`}},
		{name: "api addr bad host", env: with("LEASEHOLD_API_ADDR", "bad_host:80"),
			wantVar: "LEASEHOLD_API_ADDR", wantIn: []string{`"bad_host"`}},
		{name: "ops addr negative port", env: with("LEASEHOLD_OPS_ADDR", ":-1"),
			wantVar: "LEASEHOLD_OPS_ADDR", wantIn: []string{`"-1"`}},
		{name: "ops addr too many colons", env: with("LEASEHOLD_OPS_ADDR", "::1:80"),
			wantVar: "LEASEHOLD_OPS_ADDR", wantIn: []string{`"::1:80"`}},
		{name: "max blocking requests zero", env: with("LEASEHOLD_MAX_BLOCKING_REQUESTS", "0"),
			wantVar: "LEASEHOLD_MAX_BLOCKING_REQUESTS", wantIn: []string{"0 must be at least 1", "unset it for the default, 300"}},
		{name: "max blocking requests negative", env: with("LEASEHOLD_MAX_BLOCKING_REQUESTS", "-5"),
			wantVar: "LEASEHOLD_MAX_BLOCKING_REQUESTS", wantIn: []string{"-5 must be at least 1"}},
		{name: "max blocking requests unparsable", env: with("LEASEHOLD_MAX_BLOCKING_REQUESTS", "lots"),
			wantVar: "LEASEHOLD_MAX_BLOCKING_REQUESTS", wantIn: []string{`"lots"`}},
		{name: "max blocking requests set empty", env: with("LEASEHOLD_MAX_BLOCKING_REQUESTS", ""),
			wantVar: "LEASEHOLD_MAX_BLOCKING_REQUESTS", wantIn: []string{`""`}},

		// 6. Logging.
		{name: "log level unknown", env: with("LEASEHOLD_LOG_LEVEL", "trace"),
			wantVar: "LEASEHOLD_LOG_LEVEL", wantIn: []string{`"trace"`}},
		{name: "log level with offset", env: with("LEASEHOLD_LOG_LEVEL", "info+2"),
			wantVar: "LEASEHOLD_LOG_LEVEL", wantIn: []string{`"info+2"`}},
		{name: "log format unknown", env: with("LEASEHOLD_LOG_FORMAT", "logfmt"),
			wantVar: "LEASEHOLD_LOG_FORMAT", wantIn: []string{`"logfmt"`}},

		// 7. App health: the variables (the rules are apphealth's).
		{name: "health threshold unparsable", env: with("LEASEHOLD_APP_HEALTH_URL", "http://127.0.0.1:8080/healthz", "LEASEHOLD_APP_HEALTH_FAILURE_THRESHOLD", "three"),
			wantVar: "LEASEHOLD_APP_HEALTH_FAILURE_THRESHOLD", wantIn: []string{`"three"`}},
		{name: "health tuning without url", env: with("LEASEHOLD_APP_HEALTH_INTERVAL", "5s"),
			wantVar: "LEASEHOLD_APP_HEALTH_INTERVAL", wantIn: []string{"no effect without LEASEHOLD_APP_HEALTH_URL"}},
		{name: "success threshold without url", env: with("LEASEHOLD_APP_HEALTH_SUCCESS_THRESHOLD", "3"),
			wantVar: "LEASEHOLD_APP_HEALTH_SUCCESS_THRESHOLD", wantIn: []string{"no effect without LEASEHOLD_APP_HEALTH_URL"}},
		{name: "success threshold unparsable", env: with("LEASEHOLD_APP_HEALTH_URL", "http://127.0.0.1:8080/healthz", "LEASEHOLD_APP_HEALTH_SUCCESS_THRESHOLD", "2.5"),
			wantVar: "LEASEHOLD_APP_HEALTH_SUCCESS_THRESHOLD", wantIn: []string{`"2.5"`}},

		// 9. Pod label: the Pod (the rules are podlabel's).
		{name: "pod label without pod name", env: with("LEASEHOLD_POD_LABEL", "leasehold.io/leader", "POD_NAMESPACE", "default"),
			wantVar: "LEASEHOLD_POD_LABEL", wantIn: []string{"requires POD_NAME"}},
		{name: "pod label without pod namespace", env: with("LEASEHOLD_POD_LABEL", "leader", "POD_NAME", "p"),
			wantVar: "LEASEHOLD_POD_LABEL", wantIn: []string{"POD_NAMESPACE not set", "absent"}},

		// 12. The forwarding proxy.
		{name: "proxy upstream without proxy addr", env: with("LEASEHOLD_PROXY_UPSTREAM", "127.0.0.1:8080"),
			wantVar: "LEASEHOLD_PROXY_UPSTREAM", wantIn: []string{"without LEASEHOLD_PROXY_ADDR"}},
		{name: "proxy without advertise address", env: with("LEASEHOLD_PROXY_ADDR", ":4050", "LEASEHOLD_PROXY_UPSTREAM", "127.0.0.1:8080"),
			wantVar: "LEASEHOLD_PROXY_ADDR", wantIn: []string{"without LEASEHOLD_ADVERTISE_ADDRESS"}},
		{name: "proxy in a group without advertise address", env: with("LEASEHOLD_SHARDS", "2", "LEASEHOLD_PROXY_ADDR", ":4050", "LEASEHOLD_PROXY_UPSTREAM", "127.0.0.1:8080"),
			wantVar: "LEASEHOLD_PROXY_ADDR", wantIn: []string{"without LEASEHOLD_ADVERTISE_ADDRESS"}},
		{name: "proxy in a group of observers", env: with("LEASEHOLD_SHARDS", "2", "LEASEHOLD_CANDIDATE", "false", "LEASEHOLD_PROXY_ADDR", ":4050",
			"LEASEHOLD_PROXY_UPSTREAM", "127.0.0.1:8080", "LEASEHOLD_ADVERTISE_ADDRESS", "10.0.0.7:4050"),
			wantVar: "LEASEHOLD_PROXY_ADDR", wantIn: []string{"LEASEHOLD_CANDIDATE=false", "observer"}},

		// Order: the first broken rule is reported.
		{name: "order name before namespace", env: map[string]string{"LEASEHOLD_LEASE_NAME": "Bad"},
			wantVar: "LEASEHOLD_LEASE_NAME"},
		{name: "order duration before addr", env: with("LEASEHOLD_LEASE_DURATION", "1500ms", "LEASEHOLD_API_ADDR", "x"),
			wantVar: "LEASEHOLD_LEASE_DURATION"},
		{name: "order identity before the election's rules", env: with("LEASEHOLD_IDENTITY", "", "LEASEHOLD_RETRY_PERIOD", "0s"),
			wantVar: "LEASEHOLD_IDENTITY"},
		{name: "order group name before timings", env: with("LEASEHOLD_SHARDS", "2", "LEASEHOLD_GROUP", "Orders", "LEASEHOLD_RETRY_PERIOD", "0s"),
			wantVar: "LEASEHOLD_GROUP"},
		{name: "order api before ops", env: with("LEASEHOLD_API_ADDR", "x", "LEASEHOLD_OPS_ADDR", "y"),
			wantVar: "LEASEHOLD_API_ADDR"},
		{name: "order level before format", env: with("LEASEHOLD_LOG_LEVEL", "x", "LEASEHOLD_LOG_FORMAT", "y"),
			wantVar: "LEASEHOLD_LOG_LEVEL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			setEnv(t, tc.env)
			l := testLoader(t)
			if tc.file != nil {
				l.NamespaceFile = filepath.Join(t.TempDir(), "namespace")
				if err := os.WriteFile(l.NamespaceFile, []byte(*tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if tc.hostname != nil {
				l.Hostname = tc.hostname
			}
			c, err := l.Load()
			if err == nil {
				t.Fatalf("no error; got %+v", c)
			}
			if !reflect.DeepEqual(c, Config{}) {
				t.Errorf("non-zero Config returned with error: %+v", c)
			}
			ce, ok := errors.AsType[*Error](err)
			if !ok {
				t.Fatalf("error %v (%T) is not a *config.Error", err, err)
			}
			if ce.Var != tc.wantVar {
				t.Errorf("Var = %q, want %q (error: %v)", ce.Var, tc.wantVar, err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, tc.wantVar+": ") {
				t.Errorf("message %q does not start with %q", msg, tc.wantVar+": ")
			}
			if strings.ContainsAny(msg, "\r\n") {
				t.Errorf("message is not one line: %q", msg)
			}
			for _, s := range tc.wantIn {
				if !strings.Contains(msg, s) {
					t.Errorf("message %q does not contain %q", msg, s)
				}
			}
		})
	}
}

// The components own their rules (decide, group, apphealth, podlabel: one
// table test each); Load maps the variables to their Configs and names the
// variables in their errors. One case per kind of translation: a rule
// about one variable keeps "<VAR>: <rule>", a rule relating several names
// each with its value, and a field read from another variable than the
// one reported is named after it.
func TestComponentRulesNameTheirVariables(t *testing.T) {
	nsFile := filepath.Join(t.TempDir(), "namespace")
	if err := os.WriteFile(nsFile, []byte("Bad\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	health := []string{"LEASEHOLD_APP_HEALTH_URL", "http://127.0.0.1:8080/healthz"}
	label := []string{"LEASEHOLD_POD_LABEL", "leasehold.io/leader", "POD_NAME", "p", "POD_NAMESPACE", "default"}
	for _, tc := range []struct {
		name     string
		env      map[string]string
		wantVars []string // Var, then (for a relation) the others
		// want is the whole message, or with a trailing "…" its beginning.
		want string
	}{
		// decide.
		{"one Lease: lease duration", with("LEASEHOLD_LEASE_DURATION", "1500ms"), []string{"LEASEHOLD_LEASE_DURATION"},
			"LEASEHOLD_LEASE_DURATION: leaseDuration (1.5s) must be a whole number of seconds and at least 1s"},
		{"one Lease: retry period", with("LEASEHOLD_RETRY_PERIOD", "-1s"), []string{"LEASEHOLD_RETRY_PERIOD"},
			"LEASEHOLD_RETRY_PERIOD: retryPeriod (-1s) must be greater than 0"},
		{"one Lease: renew deadline and retry period", with("LEASEHOLD_RETRY_PERIOD", "3s", "LEASEHOLD_RENEW_DEADLINE", "2s"),
			[]string{"LEASEHOLD_RENEW_DEADLINE", "LEASEHOLD_RETRY_PERIOD"},
			"LEASEHOLD_RENEW_DEADLINE=2s must be greater than 1.2 × LEASEHOLD_RETRY_PERIOD=3s"},
		{"one Lease: all three timings", with("LEASEHOLD_RENEW_DEADLINE", "14s"),
			[]string{"LEASEHOLD_RENEW_DEADLINE", "LEASEHOLD_RETRY_PERIOD", "LEASEHOLD_LEASE_DURATION"},
			"LEASEHOLD_RENEW_DEADLINE=14s + LEASEHOLD_RETRY_PERIOD=2s must be less than LEASEHOLD_LEASE_DURATION=15s"},
		{"advertise address without a port", with("LEASEHOLD_ADVERTISE_ADDRESS", "10.0.0.7"), []string{"LEASEHOLD_ADVERTISE_ADDRESS"},
			"LEASEHOLD_ADVERTISE_ADDRESS: advertise address \"10.0.0.7\" must be host:port …"},
		{"advertise address without a host", with("LEASEHOLD_ADVERTISE_ADDRESS", ":4042"), []string{"LEASEHOLD_ADVERTISE_ADDRESS"},
			"LEASEHOLD_ADVERTISE_ADDRESS: advertise address \":4042\" must be host:port with a host (a DNS name or an IP address)"},
		{"advertise address port 0", with("LEASEHOLD_ADVERTISE_ADDRESS", "10.0.0.7:0"), []string{"LEASEHOLD_ADVERTISE_ADDRESS"},
			"LEASEHOLD_ADVERTISE_ADDRESS: advertise address \"10.0.0.7:0\" must be host:port with a port from 1 to 65535"},
		{"a group: the same address rule", with("LEASEHOLD_SHARDS", "2", "LEASEHOLD_ADVERTISE_ADDRESS", "[::1]:99999"), []string{"LEASEHOLD_ADVERTISE_ADDRESS"},
			"LEASEHOLD_ADVERTISE_ADDRESS: advertise address \"[::1]:99999\" must be host:port with a port from 1 to 65535"},
		{"a group: the same timings", with("LEASEHOLD_SHARDS", "2", "LEASEHOLD_RETRY_PERIOD", "9s"),
			[]string{"LEASEHOLD_RENEW_DEADLINE", "LEASEHOLD_RETRY_PERIOD"},
			"LEASEHOLD_RENEW_DEADLINE=10s must be greater than 1.2 × LEASEHOLD_RETRY_PERIOD=9s"},

		// group.
		{"group name", with("LEASEHOLD_SHARDS", "2", "LEASEHOLD_GROUP", "a b"), []string{"LEASEHOLD_GROUP"},
			`LEASEHOLD_GROUP: group name "a b" must be a label value (at most 63 characters: letters, digits, '-', '_', '.'): …`},
		{"group name makes bad member names", with("LEASEHOLD_SHARDS", "2", "LEASEHOLD_GROUP", "Orders"), []string{"LEASEHOLD_GROUP"},
			`LEASEHOLD_GROUP: group name "Orders" does not make valid member Lease names (<group>-member-<hash>, a DNS subdomain): …`},
		{"the shards' prefix names the group", with("LEASEHOLD_LEASE_NAME", strings.Repeat("x", 64), "LEASEHOLD_SHARDS", "2"), []string{"LEASEHOLD_LEASE_NAME"},
			`LEASEHOLD_LEASE_NAME: group name "` + strings.Repeat("x", 64) + `" must be a label value …`},
		{"a role twice", map[string]string{"LEASEHOLD_LEASES": "a,b, a", "LEASEHOLD_LEASE_NAMESPACE": "default"}, []string{"LEASEHOLD_LEASES"},
			`LEASEHOLD_LEASES: Lease "a" is listed twice`},
		{"too many roles", map[string]string{"LEASEHOLD_LEASES": roles(1025), "LEASEHOLD_LEASE_NAMESPACE": "default"}, []string{"LEASEHOLD_LEASES"},
			"LEASEHOLD_LEASES: 1025 Leases: want 1 to 1024"},

		// apphealth.
		{"health URL", with("LEASEHOLD_APP_HEALTH_URL", "tcp://127.0.0.1:8080"), []string{"LEASEHOLD_APP_HEALTH_URL"},
			`LEASEHOLD_APP_HEALTH_URL: "tcp://127.0.0.1:8080" must be an absolute http:// or https:// URL`},
		{"health URL password", with("LEASEHOLD_APP_HEALTH_URL", "ftp://user:secret@app/healthz"), []string{"LEASEHOLD_APP_HEALTH_URL"},
			`LEASEHOLD_APP_HEALTH_URL: "ftp://user:xxxxx@app/healthz" must be an absolute http:// or https:// URL`},
		{"health interval", with(append(health, "LEASEHOLD_APP_HEALTH_INTERVAL", "0s")...), []string{"LEASEHOLD_APP_HEALTH_INTERVAL"},
			"LEASEHOLD_APP_HEALTH_INTERVAL: interval (0s) must be greater than 0"},
		{"health threshold", with(append(health, "LEASEHOLD_APP_HEALTH_FAILURE_THRESHOLD", "0")...), []string{"LEASEHOLD_APP_HEALTH_FAILURE_THRESHOLD"},
			"LEASEHOLD_APP_HEALTH_FAILURE_THRESHOLD: failureThreshold (0) must be at least 1"},
		{"health success threshold", with(append(health, "LEASEHOLD_APP_HEALTH_SUCCESS_THRESHOLD", "0")...), []string{"LEASEHOLD_APP_HEALTH_SUCCESS_THRESHOLD"},
			"LEASEHOLD_APP_HEALTH_SUCCESS_THRESHOLD: successThreshold (0) must be at least 1"},
		{"health timeout and interval", with(append(health, "LEASEHOLD_APP_HEALTH_TIMEOUT", "3s")...),
			[]string{"LEASEHOLD_APP_HEALTH_TIMEOUT", "LEASEHOLD_APP_HEALTH_INTERVAL"},
			"LEASEHOLD_APP_HEALTH_TIMEOUT=3s must not exceed LEASEHOLD_APP_HEALTH_INTERVAL=2s"},

		// podlabel, reported on LEASEHOLD_POD_LABEL.
		{"label key", with(append(label, "LEASEHOLD_POD_LABEL", "leasehold.io/")...), []string{"LEASEHOLD_POD_LABEL"},
			`LEASEHOLD_POD_LABEL: "leasehold.io/" is not a valid label key: …`},
		{"the election label", with(append(label, "LEASEHOLD_POD_LABEL", "leasehold.io/lease")...), []string{"LEASEHOLD_POD_LABEL"},
			`LEASEHOLD_POD_LABEL: "leasehold.io/lease" is the election label that leasehold writes next to the leader label; choose another key, such as leasehold.io/leader`},
		{"POD_NAME", with(append(label, "POD_NAME", "Pod_1")...), []string{"LEASEHOLD_POD_LABEL"},
			`LEASEHOLD_POD_LABEL: POD_NAME "Pod_1" is not a valid Pod name: …`},
		{"POD_NAMESPACE", with(append(label, "POD_NAMESPACE", "Apps")...), []string{"LEASEHOLD_POD_LABEL"},
			`LEASEHOLD_POD_LABEL: POD_NAMESPACE "Apps" is not a valid DNS label: …`},
		{"the namespace file", map[string]string{"LEASEHOLD_LEASE_NAME": "l", "LEASEHOLD_LEASE_NAMESPACE": "default", "LEASEHOLD_POD_LABEL": "leader", "POD_NAME": "p"},
			[]string{"LEASEHOLD_POD_LABEL"},
			`LEASEHOLD_POD_LABEL: the namespace in ` + nsFile + ` "Bad" is not a valid DNS label: …`},
		{"a group: the first Lease whose key is too long", map[string]string{"LEASEHOLD_LEASES": "alpha," + strings.Repeat("b", 57) + "," + strings.Repeat("c", 58),
			"LEASEHOLD_LEASE_NAMESPACE": "default", "LEASEHOLD_POD_LABEL": "leasehold.io/leader", "POD_NAME": "p", "POD_NAMESPACE": "default"},
			[]string{"LEASEHOLD_POD_LABEL"},
			`LEASEHOLD_POD_LABEL: "leasehold.io/leader" with the Lease "` + strings.Repeat("b", 57) + `" of the group makes the leader label key "leasehold.io/leader-` + strings.Repeat("b", 57) +
				`", which is not a valid label key: name part must be no more than 63 bytes; shorten the key or the Lease's name`},
		{"shards: the key of the last shard", with(append(label, "LEASEHOLD_LEASE_NAME", strings.Repeat("s", 54), "LEASEHOLD_SHARDS", "11")...),
			[]string{"LEASEHOLD_POD_LABEL"},
			`LEASEHOLD_POD_LABEL: "leasehold.io/leader" with the Lease "` + strings.Repeat("s", 54) + `-10" of the group makes the leader label key …`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setEnv(t, tc.env)
			l := testLoader(t)
			l.NamespaceFile = nsFile
			_, err := l.Load()
			ce, ok := errors.AsType[*Error](err)
			if !ok {
				t.Fatalf("error %v (%T) is not a *config.Error", err, err)
			}
			vars := []string{ce.Var}
			if ce.Vars != nil {
				vars = ce.Vars
			}
			if ce.Var != tc.wantVars[0] || !reflect.DeepEqual(vars, tc.wantVars) {
				t.Errorf("Var %q, Vars %q; want %q", ce.Var, ce.Vars, tc.wantVars)
			}
			msg := err.Error()
			if prefix, cut := strings.CutSuffix(tc.want, "…"); !cut && msg != tc.want || cut && !strings.HasPrefix(msg, prefix) {
				t.Errorf("message\n%s\nwant\n%s", msg, tc.want)
			}
			if strings.ContainsAny(msg, "\r\n") {
				t.Errorf("message is not one line: %q", msg)
			}
		})
	}
}

// roles returns n distinct role names, comma-separated.
func roles(n int) string {
	var r []string
	for i := range n {
		r = append(r, fmt.Sprintf("r%d", i))
	}
	return strings.Join(r, ",")
}

func TestErrorOneLine(t *testing.T) {
	err := &Error{Var: "LEASEHOLD_X", Rule: "a\nb\r\nc"}
	if got, want := err.Error(), "LEASEHOLD_X: a b c"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestIdentityFromPodName(t *testing.T) {
	setEnv(t, with("POD_NAME", "web-7d9f-xk2p"))
	c, err := testLoader(t).Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.Identity != "web-7d9f-xk2p_abcd2345" {
		t.Errorf("Identity = %q", c.Identity)
	}
}

func TestIdentityHostnameFallback(t *testing.T) {
	setEnv(t, with("POD_NAME", "")) // set but empty counts as unset
	c, err := testLoader(t).Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.Identity != "host-1_abcd2345" {
		t.Errorf("Identity = %q", c.Identity)
	}
}

// The real suffix: 8 lower-case base32 characters, different for each load,
// and never a bare pod name or hostname.
func TestIdentityRandomSuffix(t *testing.T) {
	setEnv(t, with("POD_NAME", "web-0"))
	re := regexp.MustCompile(`^web-0_[a-z2-7]{8}$`)
	l := testLoader(t)
	l.RandomSuffix = nil
	seen := map[string]bool{}
	for range 2 {
		c, err := l.Load()
		if err != nil {
			t.Fatal(err)
		}
		if !re.MatchString(c.Identity) {
			t.Errorf("Identity %q does not match %s", c.Identity, re)
		}
		seen[c.Identity] = true
	}
	if len(seen) != 2 {
		t.Errorf("two loads gave the same identity: %v", seen)
	}

	// Zero Loader: real hostname, never bare.
	clearEnv(t)
	t.Setenv("LEASEHOLD_LEASE_NAME", "l")
	t.Setenv("LEASEHOLD_LEASE_NAMESPACE", "default")
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	host, err := os.Hostname()
	if err != nil {
		t.Skip("no hostname:", err)
	}
	if !regexp.MustCompile(`^` + regexp.QuoteMeta(host) + `_[a-z2-7]{8}$`).MatchString(c.Identity) {
		t.Errorf("Identity = %q, want %q + _ + 8 random chars", c.Identity, host)
	}
}

func TestIdentityOverrideVerbatim(t *testing.T) {
	const id = "  Some Identity/with:odd chars  "
	setEnv(t, with("LEASEHOLD_IDENTITY", id, "POD_NAME", "web-0"))
	c, err := testLoader(t).Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.Identity != id {
		t.Errorf("Identity = %q, want %q", c.Identity, id)
	}
}

func TestNamespaceFallbacks(t *testing.T) {
	nsFile := filepath.Join(t.TempDir(), "namespace")
	if err := os.WriteFile(nsFile, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"variable wins", map[string]string{"LEASEHOLD_LEASE_NAMESPACE": "from-var", "POD_NAMESPACE": "from-pod"}, "from-var"},
		{"POD_NAMESPACE", map[string]string{"POD_NAMESPACE": "from-pod"}, "from-pod"},
		{"empty variable falls back", map[string]string{"LEASEHOLD_LEASE_NAMESPACE": "", "POD_NAMESPACE": "from-pod"}, "from-pod"},
		{"file", nil, "from-file"},
		{"file after empty POD_NAMESPACE", map[string]string{"POD_NAMESPACE": ""}, "from-file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"LEASEHOLD_LEASE_NAME": "l"}
			for k, v := range tc.env {
				env[k] = v
			}
			setEnv(t, env)
			l := testLoader(t)
			l.NamespaceFile = nsFile
			c, err := l.Load()
			if err != nil {
				t.Fatal(err)
			}
			if c.LeaseNamespace != tc.want {
				t.Errorf("LeaseNamespace = %q, want %q", c.LeaseNamespace, tc.want)
			}
		})
	}

	t.Run("none", func(t *testing.T) {
		setEnv(t, map[string]string{"LEASEHOLD_LEASE_NAME": "l"})
		_, err := testLoader(t).Load() // namespace file absent
		if ce, ok := errors.AsType[*Error](err); !ok || ce.Var != "LEASEHOLD_LEASE_NAMESPACE" {
			t.Errorf("err = %v, want *Error for LEASEHOLD_LEASE_NAMESPACE", err)
		}
	})
}

func ptr[T any](v T) *T { return &v }

func TestAppHealth(t *testing.T) {
	setEnv(t, with("LEASEHOLD_APP_HEALTH_URL", "http://127.0.0.1:8080/healthz"))
	c, err := testLoader(t).Load()
	if err != nil {
		t.Fatal(err)
	}
	want := AppHealth{URL: "http://127.0.0.1:8080/healthz", Timeout: time.Second, Interval: 2 * time.Second, FailureThreshold: 3, SuccessThreshold: 1}
	if c.AppHealth != want || !c.AppHealth.Enabled() {
		t.Errorf("got %+v, want %+v (enabled)", c.AppHealth, want)
	}

	setEnv(t, with("LEASEHOLD_APP_HEALTH_URL", "https://app.local:8443/ready?deep=1",
		"LEASEHOLD_APP_HEALTH_TIMEOUT", "250ms", "LEASEHOLD_APP_HEALTH_INTERVAL", "250ms", "LEASEHOLD_APP_HEALTH_FAILURE_THRESHOLD", "1",
		"LEASEHOLD_APP_HEALTH_SUCCESS_THRESHOLD", "3"))
	if c, err = testLoader(t).Load(); err != nil {
		t.Fatal(err)
	}
	want = AppHealth{URL: "https://app.local:8443/ready?deep=1", Timeout: 250 * time.Millisecond, Interval: 250 * time.Millisecond, FailureThreshold: 1, SuccessThreshold: 3}
	if c.AppHealth != want {
		t.Errorf("got %+v, want %+v", c.AppHealth, want)
	}

	setEnv(t, base())
	if c, err = testLoader(t).Load(); err != nil || c.AppHealth.Enabled() {
		t.Errorf("off by default: got %+v, %v", c.AppHealth, err)
	}
}

func TestPodLabel(t *testing.T) {
	// The Pod's namespace comes from POD_NAMESPACE, not from the Lease's.
	setEnv(t, with("LEASEHOLD_POD_LABEL", "leasehold.io/leader", "POD_NAME", "app-7d4-x2", "POD_NAMESPACE", "apps"))
	c, err := testLoader(t).Load()
	if err != nil {
		t.Fatal(err)
	}
	if want := (PodRef{Namespace: "apps", Name: "app-7d4-x2"}); c.PodLabel != "leasehold.io/leader" || c.Pod != want || c.LeaseNamespace != "default" {
		t.Errorf("got label %q pod %+v lease namespace %q", c.PodLabel, c.Pod, c.LeaseNamespace)
	}

	// Else from the service-account namespace file.
	setEnv(t, with("LEASEHOLD_POD_LABEL", "leader", "POD_NAME", "p"))
	l := testLoader(t)
	l.NamespaceFile = filepath.Join(t.TempDir(), "namespace")
	if err := os.WriteFile(l.NamespaceFile, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err = l.Load(); err != nil {
		t.Fatal(err)
	}
	if want := (PodRef{Namespace: "from-file", Name: "p"}); c.Pod != want {
		t.Errorf("got %+v, want %+v", c.Pod, want)
	}

	// With a lease group, a labeler per Lease, of the group: up to
	// podlabel.MaxGroupLeases Leases.
	setEnv(t, with("LEASEHOLD_LEASE_NAME", "web", "LEASEHOLD_SHARDS", "64", "LEASEHOLD_POD_LABEL", "leasehold.io/leader", "POD_NAME", "p", "POD_NAMESPACE", "default"))
	if c, err = testLoader(t).Load(); err != nil {
		t.Fatal(err)
	}
	got := c.PodLabelConfig("web-63")
	if got.Key != "leasehold.io/leader" || got.LeaseName != "web-63" || got.Group != "web" || got.Namespace != "default" {
		t.Errorf("PodLabelConfig(web-63) = %+v", got)
	}
	if one := (Config{PodLabel: "k", Election: Election{Leases: []string{"l"}}}).PodLabelConfig("l"); one.Group != "" {
		t.Errorf("a single Lease's labeler has Group %q", one.Group)
	}

	// Off by default: POD_NAME alone does not turn it on.
	setEnv(t, with("POD_NAME", "p"))
	if c, err = testLoader(t).Load(); err != nil || c.PodLabel != "" || c.Pod != (PodRef{}) {
		t.Errorf("off by default: got %q %+v, %v", c.PodLabel, c.Pod, err)
	}
}

func TestLeaseGroups(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want Election
	}{{
		name: "shards",
		env:  with("LEASEHOLD_LEASE_NAME", "orders", "LEASEHOLD_SHARDS", "3"),
		want: Election{Leases: []string{"orders-0", "orders-1", "orders-2"}, Group: "orders", Balance: true, Candidate: true, Handover: true},
	}, {
		name: "roles, in configured order, with a group name of their own",
		env:  map[string]string{"LEASEHOLD_LEASES": "scheduler, compactor,reporter", "LEASEHOLD_LEASE_NAMESPACE": "default", "LEASEHOLD_GROUP": "my-app"},
		want: Election{Leases: []string{"scheduler", "compactor", "reporter"}, Group: "my-app", Balance: true, Candidate: true, Handover: true},
	}, {
		name: "roles, greedy observer",
		env:  map[string]string{"LEASEHOLD_LEASES": "b,a", "LEASEHOLD_LEASE_NAMESPACE": "default", "LEASEHOLD_BALANCE": "false", "LEASEHOLD_CANDIDATE": "false"},
		want: Election{Leases: []string{"b", "a"}, Group: rolesGroup("a,b"), Balance: false, Candidate: false},
	}, {
		name: "the default group name of roles does not depend on their order",
		env:  map[string]string{"LEASEHOLD_LEASES": "a,b", "LEASEHOLD_LEASE_NAMESPACE": "default"},
		want: Election{Leases: []string{"a", "b"}, Group: rolesGroup("a,b"), Balance: true, Candidate: true, Handover: true},
	}, {
		name: "one Lease, observed",
		env:  with("LEASEHOLD_CANDIDATE", "false"),
		want: Election{Leases: []string{"my-lease"}, Balance: true, Candidate: false},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			setEnv(t, tc.env)
			c, err := testLoader(t).Load()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.Election, tc.want) {
				t.Errorf("got  %+v\nwant %+v", c.Election, tc.want)
			}
		})
	}
}

// Rule 12: the forwarding proxy runs beside a candidate that advertises
// an address, for one Lease or for a lease group.
func TestProxy(t *testing.T) {
	proxy := []string{"LEASEHOLD_PROXY_ADDR", ":4050", "LEASEHOLD_PROXY_UPSTREAM", "127.0.0.1:8080", "LEASEHOLD_ADVERTISE_ADDRESS", "10.0.0.7:4050"}
	for name, env := range map[string]map[string]string{
		"one Lease": with(proxy...),
		"shards":    with(append([]string{"LEASEHOLD_SHARDS", "3"}, proxy...)...),
		"roles":     {"LEASEHOLD_LEASES": "a,b", "LEASEHOLD_LEASE_NAMESPACE": "default", proxy[0]: proxy[1], proxy[2]: proxy[3], proxy[4]: proxy[5]},
	} {
		t.Run(name, func(t *testing.T) {
			setEnv(t, env)
			c, err := testLoader(t).Load()
			if err != nil {
				t.Fatal(err)
			}
			if c.ProxyAddr != ":4050" || c.ProxyUpstream != "127.0.0.1:8080" {
				t.Errorf("proxy %q upstream %q", c.ProxyAddr, c.ProxyUpstream)
			}
		})
	}
}

func rolesGroup(sorted string) string {
	sum := sha256.Sum256([]byte(sorted))
	return "roles-" + hex.EncodeToString(sum[:4])
}

// Rule 11: handover to a successor, with its priority; errors name the
// variable; a single Lease with it groups its members under its own name,
// which must make valid member Lease names.
func TestHandover(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      map[string]string
		want     Election // when wantVar is ""
		wantVar  string
		wantRule string
	}{
		{name: "default: any", env: base(), want: Election{Leases: []string{"my-lease"}, Balance: true, Candidate: true}},
		{name: "successor, one Lease", env: with("LEASEHOLD_HANDOVER", "Successor", "LEASEHOLD_PRIORITY", "-3"),
			want: Election{Leases: []string{"my-lease"}, Balance: true, Candidate: true, Handover: true, Priority: -3}},
		{name: "successor, shards", env: with("LEASEHOLD_HANDOVER", "successor", "LEASEHOLD_SHARDS", "2"),
			want: Election{Leases: []string{"my-lease-0", "my-lease-1"}, Group: "my-lease", Balance: true, Candidate: true, Handover: true}},
		{name: "default in a balanced group: successor", env: with("LEASEHOLD_SHARDS", "2"),
			want: Election{Leases: []string{"my-lease-0", "my-lease-1"}, Group: "my-lease", Balance: true, Candidate: true, Handover: true}},
		{name: "any in a balanced group", env: with("LEASEHOLD_SHARDS", "2", "LEASEHOLD_HANDOVER", "any"),
			want: Election{Leases: []string{"my-lease-0", "my-lease-1"}, Group: "my-lease", Balance: true, Candidate: true}},
		{name: "default in a greedy group: any", env: with("LEASEHOLD_SHARDS", "2", "LEASEHOLD_BALANCE", "false"),
			want: Election{Leases: []string{"my-lease-0", "my-lease-1"}, Group: "my-lease", Candidate: true}},
		{name: "default for a group's observer: nothing to hand over", env: with("LEASEHOLD_SHARDS", "2", "LEASEHOLD_CANDIDATE", "false"),
			want: Election{Leases: []string{"my-lease-0", "my-lease-1"}, Group: "my-lease", Balance: true}},
		{name: "priority in a balanced group needs successor set", env: with("LEASEHOLD_SHARDS", "2", "LEASEHOLD_PRIORITY", "1"),
			wantVar: "LEASEHOLD_PRIORITY", wantRule: "has no effect without LEASEHOLD_HANDOVER=successor"},
		{name: "unknown mode", env: with("LEASEHOLD_HANDOVER", "newest"), wantVar: "LEASEHOLD_HANDOVER", wantRule: `"newest" must be any`},
		{name: "priority without successor", env: with("LEASEHOLD_PRIORITY", "5"), wantVar: "LEASEHOLD_PRIORITY", wantRule: "has no effect without LEASEHOLD_HANDOVER=successor"},
		{name: "priority not an integer", env: with("LEASEHOLD_HANDOVER", "successor", "LEASEHOLD_PRIORITY", "high"), wantVar: "LEASEHOLD_PRIORITY", wantRule: `"high"`},
		{name: "observer", env: with("LEASEHOLD_HANDOVER", "successor", "LEASEHOLD_CANDIDATE", "false"), wantVar: "LEASEHOLD_HANDOVER", wantRule: "an observer holds nothing to hand over"},
		{name: "a Lease name too long to group members", env: with("LEASEHOLD_HANDOVER", "successor", "LEASEHOLD_LEASE_NAME", strings.Repeat("x", 64)),
			wantVar: "LEASEHOLD_LEASE_NAME", wantRule: "must be a label value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setEnv(t, tc.env)
			c, err := testLoader(t).Load()
			if tc.wantVar == "" {
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(c.Election, tc.want) {
					t.Errorf("election %+v, want %+v", c.Election, tc.want)
				}
				if tc.want.Handover && c.MemberGroup() != "my-lease" {
					t.Errorf("member group %q, want my-lease", c.MemberGroup())
				}
				return
			}
			e, ok := errors.AsType[*Error](err)
			if !ok || e.Var != tc.wantVar || !strings.Contains(err.Error(), tc.wantRule) {
				t.Fatalf("error %v; want one on %s saying %q", err, tc.wantVar, tc.wantRule)
			}
		})
	}
}

// Rule 13: data-aware failover. It takes one Lease and a candidate, keeps
// membership under the Lease's name, defaults the handover to successor
// (with a priority allowed), is probed on the health check's schedule, and
// every error names the variable.
func TestAppRank(t *testing.T) {
	const url = "http://127.0.0.1:8090/rank"
	for _, tc := range []struct {
		name     string
		env      map[string]string
		want     AppRank
		handover bool
		wantVar  string
		wantRule string
	}{
		{name: "off by default", env: base()},
		{name: "on: the health schedule's defaults, successor handover", env: with("LEASEHOLD_APP_RANK_URL", url, "LEASEHOLD_PRIORITY", "2"),
			want: AppRank{URL: url, Timeout: time.Second, Interval: 2 * time.Second}, handover: true},
		{name: "its own schedule without a health URL", env: with("LEASEHOLD_APP_RANK_URL", url, "LEASEHOLD_APP_HEALTH_INTERVAL", "500ms", "LEASEHOLD_APP_HEALTH_TIMEOUT", "200ms"),
			want: AppRank{URL: url, Timeout: 200 * time.Millisecond, Interval: 500 * time.Millisecond}, handover: true},
		{name: "handover any stays any", env: with("LEASEHOLD_APP_RANK_URL", url, "LEASEHOLD_HANDOVER", "any"),
			want: AppRank{URL: url, Timeout: time.Second, Interval: 2 * time.Second}},
		{name: "not a URL", env: with("LEASEHOLD_APP_RANK_URL", "ftp://x/rank"), wantVar: "LEASEHOLD_APP_RANK_URL", wantRule: "http"},
		{name: "with a group", env: with("LEASEHOLD_APP_RANK_URL", url, "LEASEHOLD_SHARDS", "2"), wantVar: "LEASEHOLD_APP_RANK_URL", wantRule: "one Lease"},
		{name: "with an observer", env: with("LEASEHOLD_APP_RANK_URL", url, "LEASEHOLD_CANDIDATE", "false"), wantVar: "LEASEHOLD_CANDIDATE", wantRule: "never a successor"},
		{name: "a threshold without a health URL", env: with("LEASEHOLD_APP_RANK_URL", url, "LEASEHOLD_APP_HEALTH_FAILURE_THRESHOLD", "2"),
			wantVar: "LEASEHOLD_APP_HEALTH_FAILURE_THRESHOLD", wantRule: "has no effect without LEASEHOLD_APP_HEALTH_URL"},
		{name: "timeout over interval", env: with("LEASEHOLD_APP_RANK_URL", url, "LEASEHOLD_APP_HEALTH_TIMEOUT", "3s"),
			wantVar: "LEASEHOLD_APP_HEALTH_TIMEOUT", wantRule: "must not exceed"},
		{name: "a Lease name too long to group members", env: with("LEASEHOLD_APP_RANK_URL", url, "LEASEHOLD_LEASE_NAME", strings.Repeat("x", 64)),
			wantVar: "LEASEHOLD_LEASE_NAME", wantRule: "must be a label value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setEnv(t, tc.env)
			c, err := testLoader(t).Load()
			if tc.wantVar == "" {
				if err != nil {
					t.Fatal(err)
				}
				if c.AppRank != tc.want || c.Ranked != tc.want.Enabled() || c.Handover != tc.handover {
					t.Errorf("rank %+v, ranked %v, handover %v; want %+v, %v, %v", c.AppRank, c.Ranked, c.Handover, tc.want, tc.want.Enabled(), tc.handover)
				}
				if tc.want.Enabled() && (c.MemberGroup() != "my-lease" || !c.GroupConfig().Rank) {
					t.Errorf("member group %q, group rank %v; want my-lease, true", c.MemberGroup(), c.GroupConfig().Rank)
				}
				return
			}
			e, ok := errors.AsType[*Error](err)
			if !ok || e.Var != tc.wantVar || !strings.Contains(err.Error(), tc.wantRule) {
				t.Fatalf("error %v; want one on %s saying %q", err, tc.wantVar, tc.wantRule)
			}
		})
	}
}
