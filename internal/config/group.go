package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/leasehold/leasehold/internal/elect/decide"
	"github.com/leasehold/leasehold/internal/group"
)

// Election says which Leases this instance follows and how.
type Election struct {
	// Leases are the Leases this instance follows, in configured order:
	// LEASEHOLD_LEASE_NAME alone, the roles of LEASEHOLD_LEASES, or
	// <LEASEHOLD_LEASE_NAME>-0 … -<N-1> for LEASEHOLD_SHARDS=N.
	Leases []string
	// Group is the lease group's name (LEASEHOLD_GROUP; default: the
	// shards' LEASEHOLD_LEASE_NAME, or "roles-" and 8 hex digits of a hash
	// of the role names); "" for a single Lease (LEASEHOLD_LEASE_NAME
	// without LEASEHOLD_SHARDS).
	Group string
	// Balance spreads a group's Leases fairly over its members
	// (LEASEHOLD_BALANCE, default true; only with a group).
	Balance bool
	// Candidate is false for an observer, which follows and reports but
	// never campaigns (LEASEHOLD_CANDIDATE, default true).
	Candidate bool
	// Handover hands what this instance holds, when it leaves (shutdown,
	// health step-down), to a chosen successor (LEASEHOLD_HANDOVER=successor;
	// any: released to anyone). Unset, it is on for a candidate of a
	// balanced group, whose heirs the fair share names and whose membership
	// exists anyway, and off elsewhere. It needs membership, so a single
	// Lease with it keeps a member Lease too (see MemberGroup).
	Handover bool
	// Priority ranks this instance as a successor (LEASEHOLD_PRIORITY,
	// default 0; only with Handover): the highest wins, then the newest.
	Priority int64
	// Ranked is data-aware failover (LEASEHOLD_APP_RANK_URL, one Lease
	// only): the app's rank orders successors before Priority, and a
	// candidate defers to better-ranked members when the Lease becomes
	// free. It needs membership, as Handover does.
	Ranked bool
}

// MemberGroup is the name members are grouped under: the group's, or with
// a single Lease and Handover or Ranked the Lease's own; "" without
// membership (a single Lease handed to anyone).
func (e Election) MemberGroup() string {
	if e.Group == "" && (e.Handover || e.Ranked) {
		return e.Leases[0]
	}
	return e.Group
}

// Grouped reports whether a lease group is configured.
func (e Election) Grouped() bool { return e.Group != "" }

// election checks rules 1 and 10: which Leases, and which variables make a
// group. The group's own rules (its name, its Leases) are group's
// (validateElection).
func election(s spec) (Election, error) {
	e := Election{Candidate: s.Candidate, Balance: true}
	_, balanceSet := os.LookupEnv(varBalance)
	switch {
	case s.Leases != "" && s.LeaseName != "":
		return Election{}, errorf(varLeases, "set together with %s=%q: set %s for one Lease (or, with %s, for shards), or %s for named roles, not both",
			varLeaseName, s.LeaseName, varLeaseName, varShards, varLeases)
	case s.Leases != "" && s.Shards != nil:
		return Election{}, errorf(varShards, "set together with %s: shards are named after %s; named roles are listed in %s", varLeases, varLeaseName, varLeases)
	case s.Leases != "":
		for r := range strings.SplitSeq(s.Leases, ",") {
			r = strings.TrimSpace(r)
			if errs := validation.IsDNS1123Subdomain(r); len(errs) > 0 {
				return Election{}, errorf(varLeases, "%q is not a valid Lease name (DNS subdomain): %s", r, strings.Join(errs, "; "))
			}
			e.Leases = append(e.Leases, r)
		}
		sorted := slices.Sorted(slices.Values(e.Leases))
		sum := sha256.Sum256([]byte(strings.Join(sorted, ",")))
		e.Group = "roles-" + hex.EncodeToString(sum[:4])
	case s.LeaseName == "":
		return Election{}, errorf(varLeaseName, "required: the name of the Lease to contend for (or %s for named roles)", varLeases)
	default:
		if errs := validation.IsDNS1123Subdomain(s.LeaseName); len(errs) > 0 {
			return Election{}, errorf(varLeaseName, "%q is not a valid Lease name (DNS subdomain): %s", s.LeaseName, strings.Join(errs, "; "))
		}
		if s.Shards == nil {
			e.Leases = []string{s.LeaseName}
			break
		}
		if n := *s.Shards; n < 1 || n > group.MaxLeases {
			return Election{}, errorf(varShards, "%d shards: want 1 to %d", n, group.MaxLeases)
		}
		for i := range *s.Shards {
			e.Leases = append(e.Leases, fmt.Sprintf("%s-%d", s.LeaseName, i))
		}
		if errs := validation.IsDNS1123Subdomain(e.Leases[len(e.Leases)-1]); len(errs) > 0 {
			return Election{}, errorf(varShards, "the shard Lease %q is not a valid Lease name (DNS subdomain): %s", e.Leases[len(e.Leases)-1], strings.Join(errs, "; "))
		}
		e.Group = s.LeaseName
	}

	switch {
	case e.Group == "" && s.Group != "":
		return Election{}, errorf(varGroup, "has no effect on a single Lease; set %s or %s for a group", varLeases, varShards)
	case e.Group == "" && balanceSet:
		return Election{}, errorf(varBalance, "has no effect on a single Lease; set %s or %s for a group", varLeases, varShards)
	case e.Group == "":
		return e, nil
	case s.Group != "":
		e.Group = s.Group
	}
	if balanceSet {
		e.Balance = *s.Balance
	}
	return e, nil
}

// handover checks rule 11: LEASEHOLD_HANDOVER is any or successor (unset:
// successor for a candidate of a balanced group and with Ranked, else any),
// LEASEHOLD_PRIORITY only with successor set, and successor set not with
// an observer (which holds nothing to hand over).
func handover(s spec, e *Election) error {
	mode := strings.ToLower(strings.TrimSpace(s.Handover))
	switch mode {
	case "":
		e.Handover = (e.Group != "" && e.Balance && e.Candidate) || e.Ranked
	case "any":
	case "successor":
		e.Handover = true
	default:
		return errorf(varHandover, "%q must be any (release to any candidate) or successor (hand over to the member with the highest %s, newest first)", s.Handover, varPriority)
	}
	switch {
	case s.Priority != nil && mode != "successor" && !(mode == "" && e.Ranked):
		return errorf(varPriority, "has no effect without %s=successor", varHandover)
	case mode == "successor" && !e.Candidate:
		return errorf(varHandover, "successor together with %s=false: an observer holds nothing to hand over; unset one", varCandidate)
	case s.Priority != nil:
		e.Priority = *s.Priority
	}
	return nil
}

// ElectionConfig is the decision core's configuration shared by every
// Lease of this instance: what elect.New (with the Lease client, clock,
// logger and metrics) or a group needs. Name is the first Lease's (the
// only one's, without a group; a group names each election).
func (c Config) ElectionConfig() decide.Config {
	return decide.Config{
		Namespace:        c.LeaseNamespace,
		Name:             c.Leases[0],
		Identity:         c.Identity,
		LeaseDuration:    c.LeaseDuration,
		RenewDeadline:    c.RenewDeadline,
		RetryPeriod:      c.RetryPeriod,
		ReleaseOnStop:    c.ReleaseOnShutdown,
		AdvertiseAddress: c.AdvertiseAddress,
		FencingFloor:     c.FencingFloor,
		// No term before the app was seen healthy; an observer never
		// campaigns.
		StartWithdrawn: c.AppHealth.Enabled() || !c.Candidate,
	}
}

// GroupConfig is the configuration of the election as a lease group: a
// group, or a single Lease as a greedy group of one (Name MemberGroup: ""
// without membership, the Lease's own name with Handover or Ranked). It is
// what group.New needs besides the Lease client, clock, logger, registerer
// and start time.
func (c Config) GroupConfig() group.Config {
	return group.Config{
		Name:      c.MemberGroup(),
		Leases:    c.Leases,
		Election:  c.ElectionConfig(),
		Candidate: c.Candidate,
		Balance:   c.Balance && c.Grouped(),
		Handover:  c.Handover,
		Priority:  c.Priority,

		Rank:       c.Ranked,
		RankPeriod: c.AppRank.Interval,
	}
}

// validateElection checks rule 4: the decision core's rules, and with a
// group first the group's, on the variables their fields come from.
func (c Config) validateElection(s spec) error {
	vars := fieldVars{
		"decide.Namespace":        varLeaseNamespace,
		"decide.Name":             varLeaseName,
		"decide.Identity":         varIdentity,
		"decide.LeaseDuration":    varLeaseDuration,
		"decide.RenewDeadline":    varRenewDeadline,
		"decide.RetryPeriod":      varRetryPeriod,
		"decide.AdvertiseAddress": varAdvertiseAddress,
	}
	if !c.Grouped() {
		ec := c.ElectionConfig()
		if err := fromRule(ec.Validate(), vars, ""); err != nil || c.MemberGroup() == "" {
			return err
		}
		// Membership under the Lease's own name.
		vars["group.Name"] = varLeaseName
		gc := c.GroupConfig()
		return fromRule(gc.Validate(), vars, "")
	}
	vars["group.Leases"] = groupVars(s)
	vars["group.Name"] = varGroup
	if s.Group == "" && s.Leases == "" {
		vars["group.Name"] = varLeaseName // the shards' prefix names the group
	}
	gc := c.GroupConfig()
	err := fromRule(gc.Validate(), vars, "")
	if e, ok := errors.AsType[*Error](err); ok && e.Var == varLeaseName && s.Group == "" {
		e.Rule += "; set " + varGroup + " to name the group"
	}
	return err
}

// groupVars names the variables that configured the group.
func groupVars(s spec) string {
	if s.Leases != "" {
		return varLeases
	}
	return varShards
}
