package main

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/leasehold/leasehold/internal/config"
)

// configVars are the environment variables config.Load reads; every case
// below starts with all of them unset.
var configVars = []string{
	"POD_NAME", "POD_NAMESPACE", "LEASEHOLD_LEASE_NAME", "LEASEHOLD_LEASE_NAMESPACE", "LEASEHOLD_IDENTITY",
	"LEASEHOLD_LEASE_DURATION", "LEASEHOLD_RENEW_DEADLINE", "LEASEHOLD_RETRY_PERIOD", "LEASEHOLD_API_ADDR",
	"LEASEHOLD_OPS_ADDR", "LEASEHOLD_RELEASE_ON_SHUTDOWN", "LEASEHOLD_LOG_LEVEL", "LEASEHOLD_LOG_FORMAT",
	"LEASEHOLD_APP_HEALTH_URL", "LEASEHOLD_APP_HEALTH_TIMEOUT", "LEASEHOLD_APP_HEALTH_INTERVAL",
	"LEASEHOLD_APP_HEALTH_FAILURE_THRESHOLD", "LEASEHOLD_APP_HEALTH_SUCCESS_THRESHOLD", "LEASEHOLD_POD_LABEL", "LEASEHOLD_PPROF",
	"LEASEHOLD_MAX_BLOCKING_REQUESTS", "LEASEHOLD_FENCING_FLOOR",
}

// docs/troubleshooting.md lists the configuration errors the sidecar exits
// 2 with as the code words them: each fragment below is both in the real
// message (from internal/config, for the environment given) and in the
// document.
func TestTroubleshootingQuotesTheConfigErrors(t *testing.T) {
	doc, err := os.ReadFile("../../docs/troubleshooting.md")
	if err != nil {
		t.Fatal(err)
	}
	base := map[string]string{"LEASEHOLD_LEASE_NAME": "app", "POD_NAMESPACE": "shop", "POD_NAME": "pod"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "<unset>" {
				delete(m, kv[i])
			} else {
				m[kv[i]] = kv[i+1]
			}
		}
		return m
	}
	health := []string{"LEASEHOLD_APP_HEALTH_URL", "http://127.0.0.1:8080/healthz"}
	label := []string{"LEASEHOLD_POD_LABEL", "leasehold.io/leader"}
	for _, tc := range []struct {
		env       map[string]string
		fragments []string
	}{
		{with("LEASEHOLD_LEASE_NAME", "<unset>"), []string{"LEASEHOLD_LEASE_NAME: required: the name of the Lease to contend for"}},
		{with("LEASEHOLD_LEASE_NAME", "My_Lease"), []string{`LEASEHOLD_LEASE_NAME: "My_Lease" is not a valid Lease name (DNS subdomain): `}},
		{with("POD_NAMESPACE", "<unset>"), []string{"LEASEHOLD_LEASE_NAMESPACE: not set, POD_NAMESPACE not set, and the namespace file could not be read: "}},
		{with("POD_NAMESPACE", "Shop"), []string{`LEASEHOLD_LEASE_NAMESPACE: namespace "Shop" (from POD_NAMESPACE) is not a valid DNS label: `}},
		{with("LEASEHOLD_IDENTITY", ""), []string{`LEASEHOLD_IDENTITY: "" is blank; unset it to use the default identity`}},
		{with("LEASEHOLD_IDENTITY", strings.Repeat("x", 300)), []string{"LEASEHOLD_IDENTITY: identity is 300 characters long, more than 253"}},
		{with("POD_NAME", "<unset>"), []string{"LEASEHOLD_IDENTITY: not set, POD_NAME not set, and the hostname is unavailable: "}},
		{with("LEASEHOLD_LEASE_DURATION", "1500ms"), []string{"LEASEHOLD_LEASE_DURATION: leaseDuration (1.5s) must be a whole number of seconds and at least 1s"}},
		{with("LEASEHOLD_RETRY_PERIOD", "0s"), []string{"LEASEHOLD_RETRY_PERIOD: retryPeriod (0s) must be greater than 0"}},
		{with("LEASEHOLD_RENEW_DEADLINE", "2s"), []string{"LEASEHOLD_RENEW_DEADLINE=2s must be greater than 1.2 × LEASEHOLD_RETRY_PERIOD=2s"}},
		{with("LEASEHOLD_RENEW_DEADLINE", "14s"), []string{"LEASEHOLD_RENEW_DEADLINE=14s + LEASEHOLD_RETRY_PERIOD=2s must be less than LEASEHOLD_LEASE_DURATION=15s"}},
		{with("LEASEHOLD_LEASE_DURATION", "15"), []string{`LEASEHOLD_LEASE_DURATION: cannot parse "15" as time.Duration: time: missing unit in duration "15"`}},
		{with("LEASEHOLD_API_ADDR", "localhost"), []string{`LEASEHOLD_API_ADDR: "localhost" is not host:port: `}},
		{with("LEASEHOLD_API_ADDR", "127.0.0.1:api"), []string{`port "`, " must be a number from 0 to 65535"}},
		{with("LEASEHOLD_OPS_ADDR", "not_a_host:4041"), []string{" is neither an IP address nor a valid host name"}},
		{with("LEASEHOLD_MAX_BLOCKING_REQUESTS", "0"), []string{"LEASEHOLD_MAX_BLOCKING_REQUESTS: 0 must be at least 1 (the blocking requests each listener serves at once; unset it for the default, 300)"}},
		{with("LEASEHOLD_LOG_LEVEL", "trace"), []string{`LEASEHOLD_LOG_LEVEL: "trace" must be one of debug, info, warn, error`}},
		{with("LEASEHOLD_LOG_FORMAT", "yaml"), []string{`LEASEHOLD_LOG_FORMAT: "yaml" must be one of json, text`}},
		{with("LEASEHOLD_APP_HEALTH_INTERVAL", "1s"), []string{"LEASEHOLD_APP_HEALTH_INTERVAL: has no effect without LEASEHOLD_APP_HEALTH_URL; set both or neither"}},
		{with("LEASEHOLD_APP_HEALTH_URL", "http://[::1"), []string{"LEASEHOLD_APP_HEALTH_URL: ", " is not a URL: "}},
		{with("LEASEHOLD_APP_HEALTH_URL", "ftp://host/x"), []string{" must be an absolute http:// or https:// URL"}},
		{with("LEASEHOLD_APP_HEALTH_URL", "http:///healthz"), []string{" has no host"}},
		{with(append(health, "LEASEHOLD_APP_HEALTH_INTERVAL", "0s")...), []string{"LEASEHOLD_APP_HEALTH_INTERVAL: interval (0s) must be greater than 0"}},
		{with(append(health, "LEASEHOLD_APP_HEALTH_TIMEOUT", "0s")...), []string{"LEASEHOLD_APP_HEALTH_TIMEOUT: timeout (0s) must be greater than 0"}},
		{with(append(health, "LEASEHOLD_APP_HEALTH_TIMEOUT", "3s")...), []string{"LEASEHOLD_APP_HEALTH_TIMEOUT=3s must not exceed LEASEHOLD_APP_HEALTH_INTERVAL=2s"}},
		{with(append(health, "LEASEHOLD_APP_HEALTH_FAILURE_THRESHOLD", "0")...), []string{"LEASEHOLD_APP_HEALTH_FAILURE_THRESHOLD: failureThreshold (0) must be at least 1"}},
		{with(append(health, "LEASEHOLD_APP_HEALTH_SUCCESS_THRESHOLD", "0")...), []string{"LEASEHOLD_APP_HEALTH_SUCCESS_THRESHOLD: successThreshold (0) must be at least 1"}},
		{with("LEASEHOLD_POD_LABEL", "-bad"), []string{"LEASEHOLD_POD_LABEL: ", " is not a valid label key: "}},
		{with("LEASEHOLD_POD_LABEL", "leasehold.io/lease"), []string{`"leasehold.io/lease" is the election label that leasehold writes next to the leader label; choose another key, such as leasehold.io/leader`}},
		{with(append(label, "POD_NAME", "<unset>", "LEASEHOLD_IDENTITY", "me")...), []string{"LEASEHOLD_POD_LABEL: requires POD_NAME (from the Downward API, fieldRef metadata.name) to find the Pod to label"}},
		{with(append(label, "POD_NAME", "Bad_Name")...), []string{`POD_NAME "`, `" is not a valid Pod name: `}},
		{with(append(label, "POD_NAMESPACE", "<unset>", "LEASEHOLD_LEASE_NAMESPACE", "shop")...),
			[]string{"LEASEHOLD_POD_LABEL: requires the Pod's namespace: POD_NAMESPACE not set, and the namespace file could not be read: "}},
		{with(append(label, "POD_NAMESPACE", "Shop", "LEASEHOLD_LEASE_NAMESPACE", "shop")...), []string{`POD_NAMESPACE "`, `" is not a valid DNS label: `}},
	} {
		for _, v := range configVars {
			t.Setenv(v, "")
			os.Unsetenv(v)
		}
		for k, v := range tc.env {
			t.Setenv(k, v)
		}
		_, err := config.Loader{
			NamespaceFile: "/nonexistent/namespace",
			Hostname:      func() (string, error) { return "", errors.New("no hostname in this test") },
		}.Load()
		if _, ok := errors.AsType[*config.Error](err); !ok {
			t.Errorf("%v: %v, want a configuration error", tc.env, err)
			continue
		}
		for _, f := range tc.fragments {
			if !strings.Contains(err.Error(), f) {
				t.Errorf("%v: the error %q does not contain %q", tc.env, err, f)
			}
			if !strings.Contains(string(doc), f) {
				t.Errorf("docs/troubleshooting.md does not quote %q (the error: %q)", f, err)
			}
		}
	}
}

// The documents this CLI and its docs added or changed link only to files
// that exist, and to headings that exist in them.
func TestDocsLinksResolve(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, doc := range []string{"README.md", "docs/cli.md", "docs/troubleshooting.md", "docs/compatibility.md",
		"docs/migration.md", "docs/using.md", "examples/README.md", "charts/leasehold/README.md", "CONTRIBUTING.md", "SECURITY.md"} {
		path := filepath.Join("..", "..", doc)
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(text), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			dest := path
			if file != "" {
				dest = filepath.Join(filepath.Dir(path), file)
			}
			if _, err := os.Stat(dest); err != nil {
				t.Errorf("%s links to %s: %v", doc, target, err)
				continue
			}
			if anchor == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			if !slices.Contains(headingAnchors(t, dest), anchor) {
				t.Errorf("%s links to %s: no heading with anchor #%s in %s", doc, target, anchor, dest)
			}
		}
	}
}

// headingAnchors lists the anchors GitHub gives the headings of a Markdown
// file: lower case, punctuation other than - and _ dropped, spaces to -.
func headingAnchors(t *testing.T, path string) []string {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var anchors []string
	inCode := false
	for line := range strings.Lines(string(text)) {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		anchors = append(anchors, b.String())
	}
	return anchors
}
