package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
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
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
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

// TestBoundaries covers the edges of the timing rules that must pass.
func TestBoundaries(t *testing.T) {
	for _, tc := range []struct{ lease, renew, retry string }{
		{"1s", "600ms", "200ms"},       // 600ms > 1.2×200ms=240ms; 800ms < 1s
		{"15s", "2401ms", "2s"},        // just over 1.2×retry
		{"15s", "12999ms", "2s"},       // renew+retry just under lease
		{"2562047h", "2000000h", "1h"}, // near the int64 limit: no overflow
	} {
		setEnv(t, with("LEASEHOLD_LEASE_DURATION", tc.lease, "LEASEHOLD_RENEW_DEADLINE", tc.renew, "LEASEHOLD_RETRY_PERIOD", tc.retry))
		if _, err := testLoader(t).Load(); err != nil {
			t.Errorf("%+v: %v", tc, err)
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

		// 12. Lease groups.
		{name: "roles with a lease name", env: with("LEASEHOLD_LEASES", "a,b"),
			wantVar: "LEASEHOLD_LEASES", wantIn: []string{"LEASEHOLD_LEASE_NAME", `"my-lease"`, "not both"}},
		{name: "roles with shards", env: map[string]string{"LEASEHOLD_LEASES": "a,b", "LEASEHOLD_SHARDS": "2", "LEASEHOLD_LEASE_NAMESPACE": "default"},
			wantVar: "LEASEHOLD_SHARDS", wantIn: []string{"LEASEHOLD_LEASES"}},
		{name: "role invalid", env: map[string]string{"LEASEHOLD_LEASES": "a,B_b", "LEASEHOLD_LEASE_NAMESPACE": "default"},
			wantVar: "LEASEHOLD_LEASES", wantIn: []string{`"B_b"`, "DNS subdomain"}},
		{name: "role empty", env: map[string]string{"LEASEHOLD_LEASES": "a,,b", "LEASEHOLD_LEASE_NAMESPACE": "default"},
			wantVar: "LEASEHOLD_LEASES", wantIn: []string{`""`}},
		{name: "role twice", env: map[string]string{"LEASEHOLD_LEASES": "a,b, a", "LEASEHOLD_LEASE_NAMESPACE": "default"},
			wantVar: "LEASEHOLD_LEASES", wantIn: []string{`"a"`, "twice"}},
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
		{name: "shards' prefix too long for a group name", env: with("LEASEHOLD_LEASE_NAME", strings.Repeat("x", 64), "LEASEHOLD_SHARDS", "2"),
			wantVar: "LEASEHOLD_LEASE_NAME", wantIn: []string{"label value", "LEASEHOLD_GROUP"}},
		{name: "group invalid", env: with("LEASEHOLD_SHARDS", "2", "LEASEHOLD_GROUP", "a b"),
			wantVar: "LEASEHOLD_GROUP", wantIn: []string{`"a b"`}},
		{name: "group upper case", env: with("LEASEHOLD_SHARDS", "2", "LEASEHOLD_GROUP", "Orders"),
			wantVar: "LEASEHOLD_GROUP", wantIn: []string{`"Orders"`, "member Lease"}},
		{name: "group without a group", env: with("LEASEHOLD_GROUP", "g"),
			wantVar: "LEASEHOLD_GROUP", wantIn: []string{"single Lease"}},
		{name: "balance without a group", env: with("LEASEHOLD_BALANCE", "false"),
			wantVar: "LEASEHOLD_BALANCE", wantIn: []string{"single Lease"}},
		{name: "balance unparsable", env: with("LEASEHOLD_SHARDS", "2", "LEASEHOLD_BALANCE", "fair"),
			wantVar: "LEASEHOLD_BALANCE", wantIn: []string{`"fair"`}},
		{name: "candidate unparsable", env: with("LEASEHOLD_CANDIDATE", "maybe"),
			wantVar: "LEASEHOLD_CANDIDATE", wantIn: []string{`"maybe"`}},

		// 13. Observer and group constraints.
		{name: "observer with health-gated candidacy", env: with("LEASEHOLD_CANDIDATE", "false", "LEASEHOLD_APP_HEALTH_URL", "http://127.0.0.1:8080/healthz"),
			wantVar: "LEASEHOLD_CANDIDATE", wantIn: []string{"observer", "LEASEHOLD_APP_HEALTH_URL"}},
		{name: "group with the leader label", env: with("LEASEHOLD_SHARDS", "2", "LEASEHOLD_POD_LABEL", "leader", "POD_NAME", "p", "POD_NAMESPACE", "default"),
			wantVar: "LEASEHOLD_POD_LABEL", wantIn: []string{"LEASEHOLD_SHARDS"}},

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

		// 4. Lease duration.
		{name: "lease duration fractional", env: with("LEASEHOLD_LEASE_DURATION", "15500ms"),
			wantVar: "LEASEHOLD_LEASE_DURATION", wantIn: []string{"15.5s", "whole"}},
		{name: "lease duration under 1s", env: with("LEASEHOLD_LEASE_DURATION", "0s"),
			wantVar: "LEASEHOLD_LEASE_DURATION", wantIn: []string{"(0s)"}},
		{name: "lease duration negative", env: with("LEASEHOLD_LEASE_DURATION", "-15s"),
			wantVar: "LEASEHOLD_LEASE_DURATION", wantIn: []string{"(-15s)"}},

		// 5. Retry period.
		{name: "retry period zero", env: with("LEASEHOLD_RETRY_PERIOD", "0s"),
			wantVar: "LEASEHOLD_RETRY_PERIOD", wantIn: []string{"retryPeriod (0s)"}},
		{name: "retry period negative", env: with("LEASEHOLD_RETRY_PERIOD", "-1s"),
			wantVar: "LEASEHOLD_RETRY_PERIOD", wantIn: []string{"retryPeriod (-1s)"}},

		// 6. renewDeadline > 1.2 × retryPeriod.
		{name: "renew equals 1.2 retry", env: with("LEASEHOLD_RENEW_DEADLINE", "2400ms"),
			wantVar: "LEASEHOLD_RENEW_DEADLINE", wantIn: []string{"renewDeadline (2.4s)", "1.2", "retryPeriod (2s)"}},
		{name: "renew below retry", env: with("LEASEHOLD_RENEW_DEADLINE", "1s"),
			wantVar: "LEASEHOLD_RENEW_DEADLINE", wantIn: []string{"renewDeadline (1s)", "retryPeriod (2s)"}},
		{name: "renew negative", env: with("LEASEHOLD_RENEW_DEADLINE", "-10s"),
			wantVar: "LEASEHOLD_RENEW_DEADLINE", wantIn: []string{"renewDeadline (-10s)"}},
		{name: "renew 1.2 retry huge", env: with("LEASEHOLD_LEASE_DURATION", "2562047h", "LEASEHOLD_RENEW_DEADLINE", "2000000h", "LEASEHOLD_RETRY_PERIOD", "1800000h"),
			wantVar: "LEASEHOLD_RENEW_DEADLINE", wantIn: []string{"1.2"}},

		// 7. renewDeadline + retryPeriod < leaseDuration.
		{name: "renew plus retry equals lease", env: with("LEASEHOLD_RENEW_DEADLINE", "13s"),
			wantVar: "LEASEHOLD_RENEW_DEADLINE", wantIn: []string{"renewDeadline (13s) + retryPeriod (2s) must be less than leaseDuration (15s)"}},
		{name: "renew plus retry exceeds lease", env: with("LEASEHOLD_RENEW_DEADLINE", "10s", "LEASEHOLD_RETRY_PERIOD", "6s"),
			wantVar: "LEASEHOLD_RENEW_DEADLINE", wantIn: []string{"renewDeadline (10s) + retryPeriod (6s) must be less than leaseDuration (15s)"}},
		{name: "renew beyond lease", env: with("LEASEHOLD_RENEW_DEADLINE", "20s"),
			wantVar: "LEASEHOLD_RENEW_DEADLINE", wantIn: []string{"renewDeadline (20s)", "leaseDuration (15s)"}},

		// 8. Addresses.
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

		// 9. Logging.
		{name: "log level unknown", env: with("LEASEHOLD_LOG_LEVEL", "trace"),
			wantVar: "LEASEHOLD_LOG_LEVEL", wantIn: []string{`"trace"`}},
		{name: "log level with offset", env: with("LEASEHOLD_LOG_LEVEL", "info+2"),
			wantVar: "LEASEHOLD_LOG_LEVEL", wantIn: []string{`"info+2"`}},
		{name: "log format unknown", env: with("LEASEHOLD_LOG_FORMAT", "logfmt"),
			wantVar: "LEASEHOLD_LOG_FORMAT", wantIn: []string{`"logfmt"`}},

		// 10. App health.
		{name: "health url unparsable", env: with("LEASEHOLD_APP_HEALTH_URL", "http://[::1"),
			wantVar: "LEASEHOLD_APP_HEALTH_URL", wantIn: []string{`"http://[::1"`, "not a URL"}},
		{name: "health url scheme", env: with("LEASEHOLD_APP_HEALTH_URL", "tcp://127.0.0.1:8080"),
			wantVar: "LEASEHOLD_APP_HEALTH_URL", wantIn: []string{"http:// or https://"}},
		{name: "health url relative", env: with("LEASEHOLD_APP_HEALTH_URL", "/healthz"),
			wantVar: "LEASEHOLD_APP_HEALTH_URL", wantIn: []string{`"/healthz"`}},
		{name: "health url no host", env: with("LEASEHOLD_APP_HEALTH_URL", "http:///healthz"),
			wantVar: "LEASEHOLD_APP_HEALTH_URL", wantIn: []string{"no host"}},
		{name: "health interval zero", env: with("LEASEHOLD_APP_HEALTH_URL", "http://127.0.0.1:8080/healthz", "LEASEHOLD_APP_HEALTH_INTERVAL", "0s"),
			wantVar: "LEASEHOLD_APP_HEALTH_INTERVAL", wantIn: []string{"(0s)", "greater than 0"}},
		{name: "health timeout negative", env: with("LEASEHOLD_APP_HEALTH_URL", "http://127.0.0.1:8080/healthz", "LEASEHOLD_APP_HEALTH_TIMEOUT", "-1s"),
			wantVar: "LEASEHOLD_APP_HEALTH_TIMEOUT", wantIn: []string{"(-1s)"}},
		{name: "health timeout over interval", env: with("LEASEHOLD_APP_HEALTH_URL", "http://127.0.0.1:8080/healthz", "LEASEHOLD_APP_HEALTH_TIMEOUT", "3s"),
			wantVar: "LEASEHOLD_APP_HEALTH_TIMEOUT", wantIn: []string{"timeout (3s)", "LEASEHOLD_APP_HEALTH_INTERVAL (2s)"}},
		{name: "health threshold zero", env: with("LEASEHOLD_APP_HEALTH_URL", "http://127.0.0.1:8080/healthz", "LEASEHOLD_APP_HEALTH_FAILURE_THRESHOLD", "0"),
			wantVar: "LEASEHOLD_APP_HEALTH_FAILURE_THRESHOLD", wantIn: []string{"(0)", "at least 1"}},
		{name: "health threshold unparsable", env: with("LEASEHOLD_APP_HEALTH_URL", "http://127.0.0.1:8080/healthz", "LEASEHOLD_APP_HEALTH_FAILURE_THRESHOLD", "three"),
			wantVar: "LEASEHOLD_APP_HEALTH_FAILURE_THRESHOLD", wantIn: []string{`"three"`}},
		{name: "health tuning without url", env: with("LEASEHOLD_APP_HEALTH_INTERVAL", "5s"),
			wantVar: "LEASEHOLD_APP_HEALTH_INTERVAL", wantIn: []string{"no effect without LEASEHOLD_APP_HEALTH_URL"}},

		// 11. Pod label.
		{name: "pod label invalid", env: with("LEASEHOLD_POD_LABEL", "leasehold.io/", "POD_NAME", "p", "POD_NAMESPACE", "default"),
			wantVar: "LEASEHOLD_POD_LABEL", wantIn: []string{`"leasehold.io/"`, "label key"}},
		{name: "pod label is the election label", env: with("LEASEHOLD_POD_LABEL", "leasehold.io/lease", "POD_NAME", "p", "POD_NAMESPACE", "default"),
			wantVar: "LEASEHOLD_POD_LABEL", wantIn: []string{`"leasehold.io/lease"`, "election label", "choose another key"}},
		{name: "pod label without pod name", env: with("LEASEHOLD_POD_LABEL", "leasehold.io/leader", "POD_NAMESPACE", "default"),
			wantVar: "LEASEHOLD_POD_LABEL", wantIn: []string{"requires POD_NAME"}},
		{name: "pod label bad pod name", env: with("LEASEHOLD_POD_LABEL", "leader", "POD_NAME", "Pod_1", "POD_NAMESPACE", "default"),
			wantVar: "LEASEHOLD_POD_LABEL", wantIn: []string{`POD_NAME "Pod_1"`}},
		{name: "pod label without pod namespace", env: with("LEASEHOLD_POD_LABEL", "leader", "POD_NAME", "p"),
			wantVar: "LEASEHOLD_POD_LABEL", wantIn: []string{"POD_NAMESPACE not set", "absent"}},
		{name: "pod label bad pod namespace file", env: with("LEASEHOLD_POD_LABEL", "leader", "POD_NAME", "p"), file: ptr("Bad\n"),
			wantVar: "LEASEHOLD_POD_LABEL", wantIn: []string{`"Bad"`, "DNS label"}},

		// Order: the first broken rule is reported.
		{name: "order name before namespace", env: map[string]string{"LEASEHOLD_LEASE_NAME": "Bad"},
			wantVar: "LEASEHOLD_LEASE_NAME"},
		{name: "order duration before addr", env: with("LEASEHOLD_LEASE_DURATION", "1500ms", "LEASEHOLD_API_ADDR", "x"),
			wantVar: "LEASEHOLD_LEASE_DURATION"},
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
	want := AppHealth{URL: "http://127.0.0.1:8080/healthz", Timeout: time.Second, Interval: 2 * time.Second, FailureThreshold: 3}
	if c.AppHealth != want || !c.AppHealth.Enabled() {
		t.Errorf("got %+v, want %+v (enabled)", c.AppHealth, want)
	}

	setEnv(t, with("LEASEHOLD_APP_HEALTH_URL", "https://app.local:8443/ready?deep=1",
		"LEASEHOLD_APP_HEALTH_TIMEOUT", "250ms", "LEASEHOLD_APP_HEALTH_INTERVAL", "250ms", "LEASEHOLD_APP_HEALTH_FAILURE_THRESHOLD", "1"))
	if c, err = testLoader(t).Load(); err != nil {
		t.Fatal(err)
	}
	want = AppHealth{URL: "https://app.local:8443/ready?deep=1", Timeout: 250 * time.Millisecond, Interval: 250 * time.Millisecond, FailureThreshold: 1}
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
		want: Election{Leases: []string{"orders-0", "orders-1", "orders-2"}, Group: "orders", Balance: true, Candidate: true},
	}, {
		name: "roles, in configured order, with a group name of their own",
		env:  map[string]string{"LEASEHOLD_LEASES": "scheduler, compactor,reporter", "LEASEHOLD_LEASE_NAMESPACE": "default", "LEASEHOLD_GROUP": "my-app"},
		want: Election{Leases: []string{"scheduler", "compactor", "reporter"}, Group: "my-app", Balance: true, Candidate: true},
	}, {
		name: "roles, greedy observer",
		env:  map[string]string{"LEASEHOLD_LEASES": "b,a", "LEASEHOLD_LEASE_NAMESPACE": "default", "LEASEHOLD_BALANCE": "false", "LEASEHOLD_CANDIDATE": "false"},
		want: Election{Leases: []string{"b", "a"}, Group: rolesGroup("a,b"), Balance: false, Candidate: false},
	}, {
		name: "the default group name of roles does not depend on their order",
		env:  map[string]string{"LEASEHOLD_LEASES": "a,b", "LEASEHOLD_LEASE_NAMESPACE": "default"},
		want: Election{Leases: []string{"a", "b"}, Group: rolesGroup("a,b"), Balance: true, Candidate: true},
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

func rolesGroup(sorted string) string {
	sum := sha256.Sum256([]byte(sorted))
	return "roles-" + hex.EncodeToString(sum[:4])
}
