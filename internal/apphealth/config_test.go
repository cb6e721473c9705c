package apphealth

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/rule"
)

// TestNewValidatesConfig is the table of Config's rules (Validate): each
// broken rule is reported naming the fields it relates, with their values.
func TestNewValidatesConfig(t *testing.T) {
	valid := Config{URL: "http://127.0.0.1:8080/healthz", Timeout: time.Second, Interval: 5 * time.Second, FailureThreshold: 3, SuccessThreshold: 3}
	for _, tc := range []struct {
		name    string
		mutate  func(*Config)
		wantErr string // "" for valid
	}{
		{"valid", func(*Config) {}, ""},
		{"https with query", func(c *Config) { c.URL = "https://app.example:8443/health?full=1" }, ""},
		{"timeout equals interval", func(c *Config) { c.Timeout = c.Interval }, ""},
		{"threshold 1", func(c *Config) { c.FailureThreshold = 1 }, ""},
		{"no URL", func(c *Config) { c.URL = "" }, `URL "" is required`},
		{"relative URL", func(c *Config) { c.URL = "/healthz" }, `"/healthz" must be an absolute http:// or https:// URL`},
		{"host without scheme", func(c *Config) { c.URL = "127.0.0.1:8080/healthz" }, "URL"},
		{"other scheme", func(c *Config) { c.URL = "tcp://127.0.0.1:8080" }, `"tcp://127.0.0.1:8080" must be an absolute http:// or https:// URL`},
		{"no host", func(c *Config) { c.URL = "http:///healthz" }, `"http:///healthz" has no host`},
		{"port only", func(c *Config) { c.URL = "http://:8080/healthz" }, "has no host"},
		{"unparsable", func(c *Config) { c.URL = "http://[::1/healthz" }, `"http://[::1/healthz" is not a URL: missing ']' in host`},
		{"zero timeout", func(c *Config) { c.Timeout = 0 }, "timeout (0s) must be greater than 0"},
		{"negative timeout", func(c *Config) { c.Timeout = -time.Second }, "timeout (-1s) must be greater than 0"},
		{"zero interval", func(c *Config) { c.Interval = 0; c.Timeout = 0 }, "timeout (0s) must be greater than 0"},
		{"zero interval only", func(c *Config) { c.Interval = 0 }, "interval (0s) must be greater than 0"},
		{"timeout beyond interval", func(c *Config) { c.Timeout = 6 * time.Second }, "timeout (6s) must not exceed interval (5s)"},
		{"zero threshold", func(c *Config) { c.FailureThreshold = 0 }, "failureThreshold (0) must be at least 1"},
		{"negative threshold", func(c *Config) { c.FailureThreshold = -1 }, "failureThreshold (-1) must be at least 1"},
		{"success threshold 1", func(c *Config) { c.SuccessThreshold = 1 }, ""},
		{"zero success threshold", func(c *Config) { c.SuccessThreshold = 0 }, "successThreshold (0) must be at least 1"},
		{"negative success threshold", func(c *Config) { c.SuccessThreshold = -2 }, "successThreshold (-2) must be at least 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := valid
			tc.mutate(&cfg)
			p, err := New(cfg)
			if tc.wantErr == "" {
				if err != nil || p == nil {
					t.Fatalf("New(%+v) = %v, want a Prober", cfg, err)
				}
				if s := p.Status(); s != (Status{}) {
					t.Errorf("new Prober's status = %+v, want the zero Status (not healthy)", s)
				}
				return
			}
			if err == nil {
				t.Fatalf("New(%+v) succeeded, want an error containing %q", cfg, tc.wantErr)
			}
			if _, ok := errors.AsType[*rule.Error](err); !ok {
				t.Errorf("New error %v (%T) is not a *rule.Error", err, err)
			}
			if !strings.HasPrefix(err.Error(), "apphealth: ") || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("New error = %q, want one starting \"apphealth: \" and containing %q", err, tc.wantErr)
			}
		})
	}
}

// The URL's password never reaches an error message.
func TestNewRedactsPassword(t *testing.T) {
	_, err := New(Config{URL: "ftp://user:secret@app/healthz", Timeout: time.Second, Interval: time.Second, FailureThreshold: 1, SuccessThreshold: 1})
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("New error = %v, want an error without the password", err)
	}
}
