package decide

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/rule"
)

// TestValidate is the table of Config's rules: each broken rule is reported
// as a *rule.Error naming every field it relates, with its value; the
// boundaries that must pass pass.
func TestValidate(t *testing.T) {
	valid := func() Config {
		return Config{Namespace: "ns", Name: "app", Identity: "me",
			LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
	}
	timings := func(lease, renew, retry string) func(*Config) {
		return func(c *Config) {
			c.LeaseDuration, c.RenewDeadline, c.RetryPeriod = mustDuration(lease), mustDuration(renew), mustDuration(retry)
		}
	}
	for _, tc := range []struct {
		name   string
		change func(*Config)
		// want is the message; "" for a valid Config.
		want       string
		wantFields []string
	}{
		{"defaults", func(*Config) {}, "", nil},
		{"smallest", timings("1s", "600ms", "200ms"), "", nil}, // 600ms > 1.2×200ms; 800ms < 1s
		{"renew just over 1.2 retry", timings("15s", "2401ms", "2s"), "", nil},
		{"renew plus retry just under lease", timings("15s", "12999ms", "2s"), "", nil},
		{"near the int64 limit", timings("2562047h", "2000000h", "1h"), "", nil},

		{"no namespace", func(c *Config) { c.Namespace = "" }, `decide: the Lease's namespace "" is required`, []string{"Namespace"}},
		{"no name", func(c *Config) { c.Name = "" }, `decide: the Lease's name "" is required`, []string{"Name"}},
		{"no identity", func(c *Config) { c.Identity = "" }, `decide: identity "" is required`, []string{"Identity"}},

		{"lease fractional", timings("15500ms", "10s", "2s"), "decide: leaseDuration (15.5s) must be a whole number of seconds and at least 1s", []string{"LeaseDuration"}},
		{"lease zero", timings("0s", "10s", "2s"), "decide: leaseDuration (0s) must be a whole number of seconds and at least 1s", []string{"LeaseDuration"}},
		{"lease negative", timings("-15s", "10s", "2s"), "decide: leaseDuration (-15s) must be a whole number of seconds and at least 1s", []string{"LeaseDuration"}},

		{"retry zero", timings("15s", "10s", "0s"), "decide: retryPeriod (0s) must be greater than 0", []string{"RetryPeriod"}},
		{"retry negative", timings("15s", "10s", "-1s"), "decide: retryPeriod (-1s) must be greater than 0", []string{"RetryPeriod"}},

		{"renew equals 1.2 retry", timings("15s", "2400ms", "2s"), "decide: renewDeadline (2.4s) must be greater than 1.2 × retryPeriod (2s)", []string{"RenewDeadline", "RetryPeriod"}},
		{"renew below retry", timings("15s", "2s", "3s"), "decide: renewDeadline (2s) must be greater than 1.2 × retryPeriod (3s)", []string{"RenewDeadline", "RetryPeriod"}},
		{"renew negative", timings("15s", "-10s", "2s"), "decide: renewDeadline (-10s) must be greater than 1.2 × retryPeriod (2s)", []string{"RenewDeadline", "RetryPeriod"}},
		{"renew 1.2 retry would overflow", timings("2562047h", "2000000h", "1800000h"), "decide: renewDeadline (2000000h0m0s) must be greater than 1.2 × retryPeriod (1800000h0m0s)", []string{"RenewDeadline", "RetryPeriod"}},

		{"renew plus retry equals lease", timings("15s", "13s", "2s"), "decide: renewDeadline (13s) + retryPeriod (2s) must be less than leaseDuration (15s)", []string{"RenewDeadline", "RetryPeriod", "LeaseDuration"}},
		{"renew plus retry exceeds lease", timings("15s", "10s", "6s"), "decide: renewDeadline (10s) + retryPeriod (6s) must be less than leaseDuration (15s)", []string{"RenewDeadline", "RetryPeriod", "LeaseDuration"}},
		{"renew beyond lease", timings("15s", "20s", "2s"), "decide: renewDeadline (20s) + retryPeriod (2s) must be less than leaseDuration (15s)", []string{"RenewDeadline", "RetryPeriod", "LeaseDuration"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.change(&c)
			err := c.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("%+v: %v", c, err)
				}
				return
			}
			re, ok := errors.AsType[*rule.Error](err)
			if !ok {
				t.Fatalf("Validate() = %v (%T), want a *rule.Error", err, err)
			}
			if err.Error() != tc.want {
				t.Errorf("message %q, want %q", err, tc.want)
			}
			var fields []string
			for _, f := range re.Fields {
				fields = append(fields, f.Name)
			}
			if !reflect.DeepEqual(fields, tc.wantFields) {
				t.Errorf("fields %v, want %v", fields, tc.wantFields)
			}
		})
	}
}

func mustDuration(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return d
}
