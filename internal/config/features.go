package config

import (
	"os"
	"time"

	"github.com/leasehold/leasehold/internal/apphealth"
	"github.com/leasehold/leasehold/internal/podlabel"
)

// AppHealth configures health-gated candidacy: the sidecar campaigns only
// while the app's health endpoint answers 2xx, and steps down and releases
// the Lease when it fails FailureThreshold probes in a row; it campaigns
// again after SuccessThreshold probes in a row pass.
type AppHealth struct {
	// URL is probed with GET (LEASEHOLD_APP_HEALTH_URL; empty turns the
	// feature off).
	URL string
	// Timeout bounds each probe (LEASEHOLD_APP_HEALTH_TIMEOUT, default 1s,
	// at most Interval).
	Timeout time.Duration
	// Interval is the time between probes (LEASEHOLD_APP_HEALTH_INTERVAL,
	// default 2s).
	Interval time.Duration
	// FailureThreshold is how many failed probes in a row make the app
	// unhealthy (LEASEHOLD_APP_HEALTH_FAILURE_THRESHOLD, default 3).
	FailureThreshold int
	// SuccessThreshold is how many passed probes in a row make the app
	// healthy, at start and after it was unhealthy
	// (LEASEHOLD_APP_HEALTH_SUCCESS_THRESHOLD, default 1).
	SuccessThreshold int
}

// Enabled reports whether health-gated candidacy is on.
func (a AppHealth) Enabled() bool { return a.URL != "" }

// AppRank configures data-aware failover: the app's rank endpoint is
// probed on the health check's schedule, and the rank ranks this instance
// as a successor (package member's CompareRanks).
type AppRank struct {
	// URL is probed with GET (LEASEHOLD_APP_RANK_URL; empty turns the
	// feature off).
	URL string
	// Timeout and Interval are the health check's
	// (LEASEHOLD_APP_HEALTH_TIMEOUT, LEASEHOLD_APP_HEALTH_INTERVAL).
	Timeout, Interval time.Duration
}

// Enabled reports whether data-aware failover is on.
func (a AppRank) Enabled() bool { return a.URL != "" }

// Config is the rank prober's configuration: what apphealth.NewRank needs
// besides the clock, client, logger and OnRank.
func (a AppRank) Config() apphealth.RankConfig {
	return apphealth.RankConfig{URL: a.URL, Timeout: a.Timeout, Interval: a.Interval}
}

// appRank checks rule 13 against the election e (rule 1's).
func appRank(s spec, e Election) (AppRank, error) {
	if s.AppRankURL == "" {
		return AppRank{}, nil
	}
	switch {
	case e.Grouped():
		return AppRank{}, errorf(varAppRankURL, "set with a lease group (%s): one app's rank ranks it for one Lease; unset one", groupVars(s))
	case !e.Candidate:
		return AppRank{}, errorf(varCandidate, "false (an observer, which is never a successor) together with %s (data-aware failover): unset one", varAppRankURL)
	}
	a := AppRank{URL: s.AppRankURL, Timeout: s.AppHealthTimeout, Interval: s.AppHealthInterval}
	rc := a.Config()
	vars := fieldVars{"apphealth.URL": varAppRankURL, "apphealth.Timeout": varAppHealthTimeout, "apphealth.Interval": varAppHealthInterval}
	if err := fromRule(rc.Validate(), vars, ""); err != nil {
		return AppRank{}, err
	}
	return a, nil
}

// PodRef names the Pod the sidecar runs in.
type PodRef struct {
	Namespace string // POD_NAMESPACE, else the service-account namespace file
	Name      string // POD_NAME
}

// Config is the prober's configuration for a: what apphealth.New needs
// besides the clock, client, logger, metrics and OnChange.
func (a AppHealth) Config() apphealth.Config {
	return apphealth.Config{URL: a.URL, Timeout: a.Timeout, Interval: a.Interval,
		FailureThreshold: a.FailureThreshold, SuccessThreshold: a.SuccessThreshold}
}

// appHealthVars names the variables of apphealth.Config's fields.
var appHealthVars = fieldVars{
	"apphealth.URL":              varAppHealthURL,
	"apphealth.Timeout":          varAppHealthTimeout,
	"apphealth.Interval":         varAppHealthInterval,
	"apphealth.FailureThreshold": varAppHealthFailureThreshold,
	"apphealth.SuccessThreshold": varAppHealthSuccessThreshold,
}

// appHealth checks rule 7. With no URL it returns the zero AppHealth, and
// an error if a tuning variable was set anyway.
func appHealth(s spec) (AppHealth, error) {
	if s.AppHealthURL == "" {
		for _, v := range []string{varAppHealthTimeout, varAppHealthInterval, varAppHealthFailureThreshold, varAppHealthSuccessThreshold} {
			if _, set := os.LookupEnv(v); set && (s.AppRankURL == "" || v == varAppHealthFailureThreshold || v == varAppHealthSuccessThreshold) {
				return AppHealth{}, errorf(v, "has no effect without %s; set both or neither", varAppHealthURL)
			}
		}
		return AppHealth{}, nil
	}
	a := AppHealth{
		URL:              s.AppHealthURL,
		Timeout:          s.AppHealthTimeout,
		Interval:         s.AppHealthInterval,
		FailureThreshold: s.AppHealthFailureThreshold,
		SuccessThreshold: s.AppHealthSuccessThreshold,
	}
	ac := a.Config()
	if err := fromRule(ac.Validate(), appHealthVars, ""); err != nil {
		return AppHealth{}, err
	}
	return a, nil
}

// PodLabelConfig is the configuration of the labeler of the Lease lease
// (one of Leases: with a group, each Lease has its own labeler, which
// keeps podlabel.GroupLeaderKey(PodLabel, lease)): what podlabel.New needs
// besides the clients, the clock, logger and metrics. The label is off
// when PodLabel is empty.
func (c Config) PodLabelConfig(lease string) podlabel.Config {
	return podlabel.Config{
		Namespace:      c.Pod.Namespace,
		PodName:        c.Pod.Name,
		Key:            c.PodLabel,
		LeaseNamespace: c.LeaseNamespace,
		LeaseName:      lease,
		Group:          c.Group,
		RetryPeriod:    c.RetryPeriod,
		// The leader clears other Pods' stale labels once per lease
		// duration.
		Resync: c.LeaseDuration,
	}
}

// validatePodLabel checks podlabel's rules (rule 9) for each Lease's
// labeler, on LEASEHOLD_POD_LABEL; podNamespace says where the Pod's
// namespace came from, leases which variable named the Leases.
func (c Config) validatePodLabel(podNamespace, leases string) error {
	vars := fieldVars{
		"podlabel.Key":            varPodLabel,
		"podlabel.PodName":        "POD_NAME",
		"podlabel.Namespace":      podNamespace,
		"podlabel.LeaseNamespace": varLeaseNamespace,
		"podlabel.LeaseName":      leases,
		"podlabel.RetryPeriod":    varRetryPeriod,
		"podlabel.Resync":         varLeaseDuration,
	}
	for _, lease := range c.Leases {
		pc := c.PodLabelConfig(lease)
		if err := fromRule(pc.Validate(), vars, varPodLabel); err != nil {
			return err
		}
	}
	return nil
}

// podRef finds this sidecar's Pod (rule 9): POD_NAME, and the namespace
// from POD_NAMESPACE or else the namespace file, and says where the
// namespace came from.
func (l Loader) podRef() (pod PodRef, source string, err error) {
	pod = PodRef{Name: os.Getenv("POD_NAME"), Namespace: os.Getenv("POD_NAMESPACE")}
	if pod.Name == "" {
		return PodRef{}, "", errorf(varPodLabel, "requires POD_NAME (from the Downward API, fieldRef metadata.name) to find the Pod to label")
	}
	if pod.Namespace != "" {
		return pod, "POD_NAMESPACE", nil
	}
	why := "requires the Pod's namespace: POD_NAMESPACE not set"
	if pod.Namespace, source, err = l.namespaceFile(varPodLabel, why); err != nil {
		return PodRef{}, "", err
	}
	return pod, "the namespace in " + source, nil
}
