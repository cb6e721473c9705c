package group

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/elect/decide"
	"github.com/leasehold/leasehold/internal/rule"
)

// TestValidate is the table of the group's own rules (the elections' are
// decide's, checked with the first Lease as the name).
func TestValidate(t *testing.T) {
	valid := func() Config {
		return Config{Name: "orders", Leases: []string{"orders-0", "orders-1"},
			Election: decide.Config{Namespace: "ns", Identity: "me",
				LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}}
	}
	leases := func(n int) []string {
		var l []string
		for i := range n {
			l = append(l, "s-"+strconv.Itoa(i))
		}
		return l
	}
	for _, tc := range []struct {
		name      string
		change    func(*Config)
		want      string // "" for valid
		wantField string
	}{
		{"valid", func(*Config) {}, "", ""},
		{"63 characters", func(c *Config) { c.Name = strings.Repeat("g", 63) }, "", ""},
		{"MaxLeases", func(c *Config) { c.Leases = leases(MaxLeases) }, "", ""},
		{"no name with several Leases", func(c *Config) { c.Name = "" }, `group: group name "" must be a label value (at most 63 characters: letters, digits, '-', '_', '.'): required with several Leases, Balance, Handover or Rank`, "Name"},
		{"no name, one Lease: no membership", func(c *Config) { c.Name, c.Leases = "", []string{strings.Repeat("l", 253)} }, "", ""},
		{"no name, one Lease, Handover", func(c *Config) { c.Name, c.Leases, c.Handover = "", []string{"orders"}, true }, "required with several Leases", "Name"},
		{"no name, one Lease, Balance", func(c *Config) { c.Name, c.Leases, c.Balance = "", []string{"orders"}, true }, "required with several Leases", "Name"},
		{"no name, one Lease: the election's rules", func(c *Config) { c.Name, c.Leases, c.Election.RetryPeriod = "", []string{"orders"}, 9*time.Second }, "decide: renewDeadline (10s) must be greater than 1.2 × retryPeriod (9s)", "RenewDeadline"},
		{"name not a label value", func(c *Config) { c.Name = "a b" }, `group: group name "a b" must be a label value`, "Name"},
		{"name too long", func(c *Config) { c.Name = strings.Repeat("g", 64) }, "must be a label value", "Name"},
		{"name makes bad member names", func(c *Config) { c.Name = "Orders" }, `group: group name "Orders" does not make valid member Lease names (<group>-member-<hash>, a DNS subdomain): `, "Name"},
		{"no Leases", func(c *Config) { c.Leases = nil }, "group: 0 Leases: want 1 to 1024", "Leases"},
		{"too many Leases", func(c *Config) { c.Leases = leases(MaxLeases + 1) }, "group: 1025 Leases: want 1 to 1024", "Leases"},
		{"a Lease twice", func(c *Config) { c.Leases = []string{"a", "b", "a"} }, `group: Lease "a" is listed twice`, "Leases"},
		{"the elections' rules", func(c *Config) { c.Election.RetryPeriod = 9 * time.Second }, "decide: renewDeadline (10s) must be greater than 1.2 × retryPeriod (9s)", "RenewDeadline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.change(&c)
			err := c.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			re, ok := errors.AsType[*rule.Error](err)
			if !ok {
				t.Fatalf("Validate() = %v (%T), want a *rule.Error", err, err)
			}
			if !strings.Contains(err.Error(), tc.want) || re.Fields[0].Name != tc.wantField {
				t.Errorf("Validate() = %q about %s, want it to contain %q, about %s", err, re.Fields[0].Name, tc.want, tc.wantField)
			}
		})
	}
}
