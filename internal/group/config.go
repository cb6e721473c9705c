package group

import (
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"

	"github.com/leasehold/leasehold/internal/elect/decide"
	"github.com/leasehold/leasehold/internal/group/member"
	"github.com/leasehold/leasehold/internal/rule"
)

// MaxLeases bounds the size of a group.
const MaxLeases = 1024

// Config describes one instance of a lease group.
type Config struct {
	// Name is the group's name: the value of MemberLabel on its members'
	// Leases, and the prefix of their names. Every replica of the group
	// uses the same. "" makes a group of one Lease without membership: no
	// member Lease is written or watched (so Balance, Handover and Rank are
	// off), the group registers none of its own series and adds no group
	// key to log lines, and a candidate's elector campaigns on its own, as
	// a single Lease does.
	Name string
	// Leases are the names of the group's Leases, in configured order.
	Leases []string
	// Election holds the settings every Lease's election shares: the
	// namespace, identity, timings, ReleaseOnStop and StartWithdrawn (not a
	// member until SetCandidate(true), for health-gated candidacy); its
	// Name is ignored.
	Election decide.Config

	// Candidate is false for an observer: it follows every Lease and
	// reports, never campaigns, and is not a member.
	Candidate bool
	// Balance spreads the Leases fairly over the live members (Assign);
	// false campaigns for every Lease (greedy, as one client-go
	// LeaderElector per Lease does).
	Balance bool
	// Handover hands this member's Leases to a chosen successor when it
	// leaves (shutdown, or SetCandidate(false)): the live member Successor
	// picks, by Priority and StartedAt. Off, they are released to anyone.
	Handover bool
	// Priority and StartedAt are what this member publishes for the others'
	// choice of a successor (MemberInfo); StartedAt zero is not published.
	Priority  int64
	StartedAt time.Time
	// Rank turns on data-aware failover (a greedy group: not with
	// Balance): SetRank's rank is published on the member Lease and its
	// generation on each Lease this member holds; successors are chosen
	// by rank first, and a candidate defers to better-ranked live members
	// when a Lease becomes free (member.Deferral). RankPeriod is the rank
	// prober's period.
	Rank       bool
	RankPeriod time.Duration

	// Leases reads and writes the Leases of the namespace.
	Client LeaseClient
	// Clock is the time source; nil means the real clock.
	Clock clock.WithTicker
	// Logger receives log lines; nil discards them. The group adds its
	// own key to every line, group=Name (and each election its lease and
	// identity): a Logger that already carries one of them would log it
	// twice.
	Logger *slog.Logger
	// Registerer receives the group's metrics and, wrapped with a lease
	// label per Lease, each election's; nil registers none.
	Registerer prometheus.Registerer
	// LeaseLabeled says Registerer already labels every series with the
	// Lease (a group of one Lease, kept for its membership): the elections'
	// metrics are then registered as they are.
	LeaseLabeled bool
}

// Validate checks c's settings (not its Client, Clock, Logger or
// Registerer) and returns the first broken rule as a *rule.Error naming the
// fields it relates, with their values:
//
//   - Name is a label value (at most 63 characters) that makes valid member
//     Lease names (MemberLeaseName: <name>-member-<hash>, a DNS subdomain),
//     or "" for one Lease with Balance, Handover and Rank off;
//   - there are 1 to MaxLeases Leases, none listed twice;
//   - Election satisfies decide.Config.Validate, with the first Lease as its
//     Name;
//   - Rank is not set together with Balance, and has a positive
//     RankPeriod.
func (c *Config) Validate() error {
	name := rule.Field{Name: "Name", Label: "group name", Value: c.Name}
	if c.Name == "" && len(c.Leases) == 1 && !c.Balance && !c.Handover && !c.Rank {
		return c.validateElection()
	}
	if errs := validation.IsValidLabelValue(c.Name); len(errs) > 0 || c.Name == "" {
		if c.Name == "" {
			errs = append(errs, "required with several Leases, Balance, Handover or Rank")
		}
		return rule.Errorf(component, "%s must be a label value (at most 63 characters: letters, digits, '-', '_', '.'): %s", name, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(member.LeaseName(c.Name, "")); len(errs) > 0 {
		return rule.Errorf(component, "%s does not make valid member Lease names (<group>-member-<hash>, a DNS subdomain): %s", name, strings.Join(errs, "; "))
	}
	if n := len(c.Leases); n == 0 || n > MaxLeases {
		return rule.Errorf(component, "%s Leases: want 1 to %d", rule.Field{Name: "Leases", Value: n}, MaxLeases)
	}
	seen := map[string]bool{}
	for _, l := range c.Leases {
		if seen[l] {
			return rule.Errorf(component, "%s is listed twice", rule.Field{Name: "Leases", Label: "Lease", Value: l})
		}
		seen[l] = true
	}
	if c.Rank && (c.Balance || c.RankPeriod <= 0) {
		return rule.Errorf(component, "%s needs a group that is not balanced (%s) and a positive %s",
			rule.Field{Name: "Rank", Label: "rank", Value: c.Rank}, rule.Field{Name: "Balance", Label: "balance", Value: c.Balance},
			rule.Field{Name: "RankPeriod", Label: "rank period", Value: c.RankPeriod})
	}
	return c.validateElection()
}

// validateElection checks Election, with the first Lease as its Name.
func (c *Config) validateElection() error {
	e := c.Election
	e.Name = c.Leases[0]
	return e.Validate()
}

// membership reports whether the candidates of the group keep member
// Leases (Name is set).
func (c *Config) membership() bool { return c.Name != "" }

// electionConfig is the election of the group's Lease name: a member
// campaigns only for what its plan gives it; an observer never does; a
// greedy member campaigns for all once fit. A balanced member's plan
// decides what it keeps: a Lease handed to it is taken even while its
// elector is withdrawn. So is one handed to a ranked member while it
// defers; its leader publishes its generation.
func (c *Config) electionConfig(name string) decide.Config {
	ec := c.Election
	ec.Name = name
	ec.StartWithdrawn = !c.Candidate || c.Balance || c.Election.StartWithdrawn
	ec.AcceptHandovers = c.Candidate && (c.Balance || c.Rank)
	ec.PublishGeneration = c.Candidate && c.Rank
	return ec
}

// memberConfig is what the member's decision core needs of c.
func (c *Config) memberConfig() member.Config {
	return member.Config{
		Group:          c.Name,
		Identity:       c.Election.Identity,
		Leases:         c.Leases,
		TTL:            c.Election.LeaseDuration,
		Settle:         c.settleTime(),
		RequestTimeout: c.requestTimeout(),
		Balance:        c.Balance,
		Handover:       c.Handover,
		Info:           member.Info{Priority: c.Priority, StartedAt: c.StartedAt},
		StartUnfit:     c.Election.StartWithdrawn,
		Ranked:         c.Rank,
		RankPeriod:     c.RankPeriod,
	}
}

// component prefixes the messages of Validate.
const component = "group"

// settleTime is how long after a member joined the others wait before they
// give Leases up to rebalance: members of one scale-up join within it, and
// each Lease then moves once.
func (c *Config) settleTime() time.Duration { return 2 * c.Election.RetryPeriod }

// requestTimeout bounds each membership request, as elect bounds its own.
func (c *Config) requestTimeout() time.Duration { return max(c.Election.RetryPeriod, time.Second) }
