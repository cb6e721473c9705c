// Package config reads and validates the leasehold sidecar's configuration
// from LEASEHOLD_* environment variables.
//
// Every variable is read with the LEASEHOLD_ prefix only: an unprefixed
// variable of the same name (LEASE_DURATION, LOG_LEVEL, ...) that happens to
// be in the container's environment is never consulted.
package config

import (
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kelseyhightower/envconfig"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/leasehold/leasehold/internal/elect/decide"
	"github.com/leasehold/leasehold/internal/httpapi"
	"github.com/leasehold/leasehold/internal/podlabel"
	"github.com/leasehold/leasehold/internal/rule"
)

// Prefix is the prefix, without the trailing underscore, of every
// environment variable this package reads (other than POD_NAME and
// POD_NAMESPACE).
const Prefix = "LEASEHOLD"

// DefaultNamespaceFile is the service-account namespace file Kubernetes
// mounts into pods; it is the last fallback for the Lease namespace.
const DefaultNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// maxIdentityLen bounds LEASEHOLD_IDENTITY, in characters.
const maxIdentityLen = 253

// Config is the sidecar's whole configuration, read from LEASEHOLD_*
// environment variables. A Config returned by Load or Loader.Load without an
// error has every default applied and satisfies every rule documented on
// Loader.Load.
type Config struct {
	// LeaseName is the name of the coordination.k8s.io Lease
	// (LEASEHOLD_LEASE_NAME; a DNS subdomain): the one Lease, or the
	// shards' prefix; "" when LEASEHOLD_LEASES names roles.
	LeaseName string

	// Election says which Leases this instance follows: one, or a group of
	// named roles or shards; and whether it campaigns (see group.go).
	Election

	// LeaseNamespace is the namespace of the Lease (LEASEHOLD_LEASE_NAMESPACE;
	// default $POD_NAMESPACE, else the contents of the in-cluster namespace
	// file; a DNS label).
	LeaseNamespace string

	// Identity is this candidate's holder identity (LEASEHOLD_IDENTITY,
	// used verbatim; default "<POD_NAME or hostname>_<random suffix>").
	//
	// The default is never a bare hostname or PID: both have collided across
	// pods and containers in real incidents (hostNetwork pods share the
	// node's hostname, a pod's containers share one hostname, and every
	// container has its own PID namespace so PIDs repeat), and two
	// candidates with one identity both believe they hold the Lease. The
	// random suffix, drawn afresh for each process, also makes a restarted
	// container a new candidate rather than one that silently resumes its
	// predecessor's leadership.
	Identity string

	// LeaseDuration is how long non-leaders wait after the last observed
	// renewal before they may take the Lease (LEASEHOLD_LEASE_DURATION,
	// default 15s; whole seconds, at least 1s).
	LeaseDuration time.Duration

	// RenewDeadline is how long the leader keeps retrying renewal before it
	// gives up leadership (LEASEHOLD_RENEW_DEADLINE, default 10s).
	RenewDeadline time.Duration

	// RetryPeriod is the interval between acquire/renew attempts
	// (LEASEHOLD_RETRY_PERIOD, default 2s).
	RetryPeriod time.Duration

	// APIAddr is the host:port the local leadership API listens on
	// (LEASEHOLD_API_ADDR, default "127.0.0.1:4040").
	APIAddr string

	// OpsAddr is the host:port the health/metrics server listens on
	// (LEASEHOLD_OPS_ADDR, default ":4041").
	OpsAddr string

	// MaxBlockingRequests bounds the blocking requests (long-polls and
	// leader waits while they wait, SSE streams, holds) that each of the
	// API and OPS listeners serves at once; beyond it they are refused with
	// 503 (LEASEHOLD_MAX_BLOCKING_REQUESTS, default
	// httpapi.DefaultMaxBlockingRequests; at least 1).
	MaxBlockingRequests int

	// ReleaseOnShutdown makes the sidecar release the Lease when it stops
	// while leading (LEASEHOLD_RELEASE_ON_SHUTDOWN, default true; parsed by
	// strconv.ParseBool).
	ReleaseOnShutdown bool

	// LogLevel is the minimum log level (LEASEHOLD_LOG_LEVEL: debug, info,
	// warn or error, case-insensitive; default info).
	LogLevel slog.Level

	// LogFormat is the log output format (LEASEHOLD_LOG_FORMAT: json or
	// text, case-insensitive, stored lower-case; default json).
	LogFormat string

	// AppHealth gates candidacy on the app's health; off when its URL is
	// empty (see features.go).
	AppHealth AppHealth

	// AppRank is data-aware failover's probe of the app's rank; off when
	// its URL is empty (see features.go). On, Election.Ranked is set.
	AppRank AppRank

	// PodLabel is the label key the leader sets to "true" on its own Pod
	// (LEASEHOLD_POD_LABEL, a qualified label name; off when empty); with a
	// lease group, each Lease's leader sets PodLabel-<lease> (see
	// PodLabelConfig). Pod locates that Pod; it is set only when PodLabel
	// is.
	PodLabel string
	Pod      PodRef

	// Pprof serves Go's profiles under /debug/pprof/ on the OPS listener
	// (LEASEHOLD_PPROF, default false; parsed by strconv.ParseBool), for
	// measuring the sidecar's own footprint: a profile costs CPU and memory
	// while it is taken.
	Pprof bool

	// AdvertiseAddress is where other instances reach this one (host:port,
	// LEASEHOLD_ADVERTISE_ADDRESS; off when empty). While it leads, it
	// writes it on its Lease (each Lease of a group) as
	// leasehold.io/leader-address, and every instance reports the valid
	// leader's as leaderAddress.
	AdvertiseAddress string

	// FencingFloor publishes, on every write that starts a term, a floor
	// for the new term's token on the Lease (LEASEHOLD_FENCING_FLOOR,
	// default false; parsed by strconv.ParseBool): what the fencing
	// policy (leasehold fencing-policy) compares a fenced write's token
	// with until the term's first renewal publishes the token itself.
	FencingFloor bool

	// ProxyAddr is where the forwarding proxy listens (LEASEHOLD_PROXY_ADDR,
	// host:port; off when empty), and ProxyUpstream the local app it
	// forwards to while this instance leads (LEASEHOLD_PROXY_UPSTREAM,
	// host:port). A follower forwards to the leader's advertised address,
	// which is its proxy's.
	ProxyAddr, ProxyUpstream string
}

// spec is what envconfig fills in. Field names map to variable names through
// split_words (APIAddr -> LEASEHOLD_API_ADDR). An `envconfig:"NAME"` tag is
// deliberately not used: envconfig v1.4.0 falls back to the unprefixed NAME
// when LEASEHOLD_NAME is unset, which would let an unrelated LOG_LEVEL or
// IDENTITY in the container's environment configure the sidecar.
type spec struct {
	LeaseName           string `split_words:"true"`
	Leases              string
	Shards              *int // nil when unset
	Group               string
	Balance             *bool         // nil when unset
	Candidate           bool          `default:"true"`
	LeaseNamespace      string        `split_words:"true"`
	Identity            *string       // nil when LEASEHOLD_IDENTITY is unset
	LeaseDuration       time.Duration `split_words:"true" default:"15s"`
	RenewDeadline       time.Duration `split_words:"true" default:"10s"`
	RetryPeriod         time.Duration `split_words:"true" default:"2s"`
	APIAddr             string        `split_words:"true" default:"127.0.0.1:4040"`
	OpsAddr             string        `split_words:"true" default:":4041"`
	MaxBlockingRequests *int          `split_words:"true"` // nil when unset: httpapi's default
	ReleaseOnShutdown   bool          `split_words:"true" default:"true"`
	LogLevel            string        `split_words:"true" default:"info"`
	LogFormat           string        `split_words:"true" default:"json"`

	AppHealthURL              string        `split_words:"true"`
	AppHealthTimeout          time.Duration `split_words:"true" default:"1s"`
	AppHealthInterval         time.Duration `split_words:"true" default:"2s"`
	AppHealthFailureThreshold int           `split_words:"true" default:"3"`
	AppHealthSuccessThreshold int           `split_words:"true" default:"1"`
	AppRankURL                string        `split_words:"true"`
	PodLabel                  string        `split_words:"true"`
	Pprof                     bool
	AdvertiseAddress          string `split_words:"true"`
	FencingFloor              bool   `split_words:"true"`
	Handover                  string // "" when unset: see handover
	Priority                  *int64 // nil when unset
	ProxyAddr                 string `split_words:"true"`
	ProxyUpstream             string `split_words:"true"`
}

// Full variable names, as they appear in errors.
const (
	varLeaseName         = Prefix + "_LEASE_NAME"
	varLeaseNamespace    = Prefix + "_LEASE_NAMESPACE"
	varIdentity          = Prefix + "_IDENTITY"
	varLeaseDuration     = Prefix + "_LEASE_DURATION"
	varRenewDeadline     = Prefix + "_RENEW_DEADLINE"
	varRetryPeriod       = Prefix + "_RETRY_PERIOD"
	varAPIAddr           = Prefix + "_API_ADDR"
	varOpsAddr           = Prefix + "_OPS_ADDR"
	varMaxBlocking       = Prefix + "_MAX_BLOCKING_REQUESTS"
	varReleaseOnShutdown = Prefix + "_RELEASE_ON_SHUTDOWN"
	varLogLevel          = Prefix + "_LOG_LEVEL"
	varLogFormat         = Prefix + "_LOG_FORMAT"

	varAppHealthURL              = Prefix + "_APP_HEALTH_URL"
	varAppHealthTimeout          = Prefix + "_APP_HEALTH_TIMEOUT"
	varAppHealthInterval         = Prefix + "_APP_HEALTH_INTERVAL"
	varAppHealthFailureThreshold = Prefix + "_APP_HEALTH_FAILURE_THRESHOLD"
	varAppHealthSuccessThreshold = Prefix + "_APP_HEALTH_SUCCESS_THRESHOLD"
	varPodLabel                  = Prefix + "_POD_LABEL"
	varAppRankURL                = Prefix + "_APP_RANK_URL"

	varLeases    = Prefix + "_LEASES"
	varShards    = Prefix + "_SHARDS"
	varGroup     = Prefix + "_GROUP"
	varBalance   = Prefix + "_BALANCE"
	varCandidate = Prefix + "_CANDIDATE"

	varAdvertiseAddress = Prefix + "_ADVERTISE_ADDRESS"
	varHandover         = Prefix + "_HANDOVER"
	varPriority         = Prefix + "_PRIORITY"
	varProxyAddr        = Prefix + "_PROXY_ADDR"
	varProxyUpstream    = Prefix + "_PROXY_UPSTREAM"
)

// Error is a configuration error: the variable Var breaks Rule. Every error
// Load returns for a bad or missing setting is an *Error.
type Error struct {
	// Var is the full environment variable name, e.g.
	// "LEASEHOLD_RENEW_DEADLINE": the variable the rule is about.
	Var string
	// Vars, for a rule that relates several variables, names every one of
	// them, Var first; nil for a rule about Var alone.
	Vars []string
	// Rule describes the rule broken, with the offending values; for a rule
	// relating several variables, it names each as NAME=value.
	Rule string
}

// Error returns the message on a single line (any line breaks in Rule are
// replaced by spaces): "<Var>: <Rule>", or for a rule relating several
// variables Rule alone, which names each of them with its value, Var first:
//
//	LEASEHOLD_LEASE_DURATION: leaseDuration (1.5s) must be a whole number of seconds and at least 1s
//	LEASEHOLD_RENEW_DEADLINE=2s must be greater than 1.2 × LEASEHOLD_RETRY_PERIOD=3s
func (e *Error) Error() string {
	rule := strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(e.Rule)
	if len(e.Vars) > 1 {
		return rule
	}
	return e.Var + ": " + rule
}

func errorf(variable, format string, args ...any) *Error {
	return &Error{Var: variable, Rule: fmt.Sprintf(format, args...)}
}

// fieldVars names, for a component's rules, the variable each field of its
// Config comes from: keys are "<component>.<Field>" (rule.Error's Component
// and Field.Name), e.g. "decide.RenewDeadline".
type fieldVars map[string]string

// fromRule translates a component's broken rule (a *rule.Error from its
// Config's Validate) into an *Error naming variables instead of fields. A
// rule relating one variable is reported on it, or on subject if not
// empty (the variable that turned the component on), with fields from
// other variables named after them (POD_NAME "Pod_1"); a rule relating
// several variables names each as NAME=value. Any other error is returned
// wrapped (a bug, not a configuration error).
func fromRule(err error, vars fieldVars, subject string) error {
	if err == nil {
		return nil
	}
	re, ok := errors.AsType[*rule.Error](err)
	if !ok || len(re.Fields) == 0 {
		return fmt.Errorf("config: %w", err)
	}
	name := func(f rule.Field) string {
		if v, ok := vars[re.Component+"."+f.Name]; ok {
			return v
		}
		return re.Component + "." + f.Name
	}
	var related []string
	for _, f := range re.Fields {
		if v := name(f); !slices.Contains(related, v) {
			related = append(related, v)
		}
	}
	if len(related) > 1 {
		return &Error{Var: related[0], Vars: related, Rule: re.Text(func(f rule.Field) string {
			return name(f) + "=" + rule.ShowValue(f.Value)
		})}
	}
	e := &Error{Var: related[0]}
	if subject != "" {
		e.Var = subject
	}
	e.Rule = re.Text(func(f rule.Field) string {
		if v := name(f); v != e.Var {
			f.Label = v
		}
		return f.String()
	})
	return e
}

// Loader loads a Config, with the environment-dependent inputs other than
// environment variables replaceable (for tests). The zero Loader uses the
// real ones.
type Loader struct {
	// Hostname returns the host name for the default identity when POD_NAME
	// is unset. Nil means os.Hostname.
	Hostname func() (string, error)
	// NamespaceFile is read for the default namespace when neither
	// LEASEHOLD_LEASE_NAMESPACE nor POD_NAMESPACE is set. Empty means
	// DefaultNamespaceFile.
	NamespaceFile string
	// RandomSuffix returns the suffix appended to the default identity. Nil
	// means 8 random lower-case base32 characters from crypto/rand.
	RandomSuffix func() string
}

// Load reads the configuration from the process environment with the real
// hostname, namespace file and randomness. It is Loader{}.Load().
func Load() (Config, error) {
	return Loader{}.Load()
}

// Load reads LEASEHOLD_* variables (plus POD_NAME and POD_NAMESPACE), applies
// defaults and validates. It checks the rules below in order and returns the
// first broken one as an *Error naming the variable (a rule relating several
// variables names each, with its value); a value that cannot be parsed at
// all (e.g. "abc" for a duration or bool) is reported first, also as an
// *Error.
//
// The rules of the components are theirs, written once in their Configs'
// Validate (decide, group, apphealth, podlabel): Load maps the variables to
// those Configs (ElectionConfig, GroupConfig, AppHealth.Config,
// PodLabelConfig), and reports a broken rule on the variables its fields
// come from. The rules of the variables themselves are Load's own.
//
//  1. The Leases: LEASEHOLD_LEASE_NAME is set and a valid DNS subdomain,
//     or else LEASEHOLD_LEASES is (rule 10).
//  2. The namespace resolves — LEASEHOLD_LEASE_NAMESPACE, else POD_NAMESPACE,
//     else the trimmed contents of NamespaceFile; an empty variable counts as
//     unset — and is a valid DNS label.
//  3. LEASEHOLD_IDENTITY, if set (even to ""), is not blank and is at most
//     253 characters. If unset, the identity defaults to POD_NAME (if
//     non-empty) or the hostname, plus "_" and a random suffix; failing to
//     get a hostname is an error.
//  4. The election's rules (decide.Config.Validate): LEASEHOLD_LEASE_DURATION
//     is a whole number of seconds, at least 1s; LEASEHOLD_RETRY_PERIOD is
//     greater than 0; LEASEHOLD_RENEW_DEADLINE is greater than 1.2 ×
//     LEASEHOLD_RETRY_PERIOD; renewDeadline + retryPeriod is less than
//     leaseDuration; and LEASEHOLD_ADVERTISE_ADDRESS, if set, is host:port
//     with a host and a port from 1 to 65535. With a group, the group's rules come first
//     (group.Config.Validate): its name (LEASEHOLD_GROUP, or the shards'
//     LEASEHOLD_LEASE_NAME) is a label value that makes valid member Lease
//     names, and LEASEHOLD_LEASES has at most 1024 Leases, none twice.
//  5. LEASEHOLD_API_ADDR and LEASEHOLD_OPS_ADDR are host:port, the port
//     numeric in 0..65535, the host empty, an IP address or a host name;
//     LEASEHOLD_MAX_BLOCKING_REQUESTS, if set, is an integer of at least 1.
//  6. LEASEHOLD_LOG_LEVEL is debug, info, warn or error and
//     LEASEHOLD_LOG_FORMAT is json or text, both case-insensitive.
//  7. LEASEHOLD_APP_HEALTH_URL, if set, satisfies apphealth's rules
//     (apphealth.Config.Validate): an absolute http or https URL with a
//     host; _TIMEOUT and _INTERVAL greater than 0, the timeout at most the
//     interval; _FAILURE_THRESHOLD and _SUCCESS_THRESHOLD at least 1. The
//     four tuning variables are errors when set without the URL (they
//     would silently do nothing).
//  8. LEASEHOLD_CANDIDATE=false (an observer) is an error with
//     LEASEHOLD_APP_HEALTH_URL (an observer never campaigns); a group of
//     more than 64 Leases (podlabel.MaxGroupLeases) is an error with
//     LEASEHOLD_POD_LABEL (a label, and Pod patches, per Lease).
//  9. LEASEHOLD_POD_LABEL, if set, needs POD_NAME and the Pod's namespace:
//     POD_NAMESPACE, else the namespace file (never
//     LEASEHOLD_LEASE_NAMESPACE: the Lease may live elsewhere than the Pod);
//     then podlabel's rules (podlabel.Config.Validate), reported on
//     LEASEHOLD_POD_LABEL: a qualified label name other than
//     leasehold.io/lease (podlabel.LeaseKey, the election label), a valid
//     Pod name and namespace; with a group, for every Lease L of it,
//     LEASEHOLD_POD_LABEL-L (the Lease's leader label) a qualified label
//     name too (its name part at most 63 characters), the error naming the
//     first Lease that breaks it.
//  10. A lease group is LEASEHOLD_LEASES (named roles: comma-separated DNS
//     subdomains) or LEASEHOLD_SHARDS=N (1 to 1024) with
//     LEASEHOLD_LEASE_NAME; LEASEHOLD_LEASES with LEASEHOLD_LEASE_NAME or
//     with LEASEHOLD_SHARDS is an error naming both; LEASEHOLD_GROUP and
//     LEASEHOLD_BALANCE are errors without a group (they would do nothing).
//     (Checked with rule 1.)
//  11. LEASEHOLD_HANDOVER is any (the default) or successor,
//     case-insensitive; LEASEHOLD_PRIORITY (an integer) is an error without
//     successor, and successor is an error with LEASEHOLD_CANDIDATE=false.
//     With successor, a single Lease's name is also its members' group
//     name, so it must be a label value that makes valid member Lease names
//     (group.Config.Validate, reported on LEASEHOLD_LEASE_NAME). (Checked
//     after rule 1; the name with rule 4.)
//  12. LEASEHOLD_PROXY_ADDR and LEASEHOLD_PROXY_UPSTREAM are set together
//     or not at all; the first is a listen address (as rule 5), the second
//     host:port with a host and a port from 1 to 65535; the proxy needs
//     LEASEHOLD_ADVERTISE_ADDRESS (the followers forward to the leader's
//     advertised address, which must be its proxy's; in a group, each
//     Lease's leader's), and an observer cannot serve it (it never leads).
//     (Checked after rule 8.)
//  13. LEASEHOLD_APP_RANK_URL, if set, is an absolute http or https URL
//     with a host, probed with LEASEHOLD_APP_HEALTH_TIMEOUT and
//     LEASEHOLD_APP_HEALTH_INTERVAL (which it allows without
//     LEASEHOLD_APP_HEALTH_URL); it is an error with a lease group (one
//     app's rank ranks it for one Lease) and with LEASEHOLD_CANDIDATE=false
//     (an observer is never a successor). It keeps membership under the
//     Lease's own name (as rule 11's successor, whose name rules apply,
//     reported on LEASEHOLD_LEASE_NAME), and makes LEASEHOLD_HANDOVER
//     default to successor, with LEASEHOLD_PRIORITY allowed. (Checked after
//     rule 1.)
func (l Loader) Load() (Config, error) {
	var s spec
	if err := envconfig.Process(Prefix, &s); err != nil {
		if pe, ok := errors.AsType[*envconfig.ParseError](err); ok {
			return Config{}, errorf(pe.KeyName, "cannot parse %q as %s: %v", pe.Value, pe.TypeName, pe.Err)
		}
		return Config{}, fmt.Errorf("config: %w", err)
	}

	c := Config{
		LeaseName:         s.LeaseName,
		LeaseDuration:     s.LeaseDuration,
		RenewDeadline:     s.RenewDeadline,
		RetryPeriod:       s.RetryPeriod,
		APIAddr:           s.APIAddr,
		OpsAddr:           s.OpsAddr,
		ReleaseOnShutdown: s.ReleaseOnShutdown,
		Pprof:             s.Pprof,
		AdvertiseAddress:  s.AdvertiseAddress,
		FencingFloor:      s.FencingFloor,
		ProxyAddr:         s.ProxyAddr,
		ProxyUpstream:     s.ProxyUpstream,
	}

	// 1 and 10. The Leases.
	var err error
	if c.Election, err = election(s); err != nil {
		return Config{}, err
	}
	// 13. Data-aware failover (before rule 11: it changes its default).
	if c.AppRank, err = appRank(s, c.Election); err != nil {
		return Config{}, err
	}
	c.Ranked = c.AppRank.Enabled()
	if err := handover(s, &c.Election); err != nil {
		return Config{}, err
	}

	// 2. Namespace.
	ns, err := l.namespace(s.LeaseNamespace)
	if err != nil {
		return Config{}, err
	}
	c.LeaseNamespace = ns

	// 3. Identity.
	id, err := l.identity(s.Identity)
	if err != nil {
		return Config{}, err
	}
	c.Identity = id

	// 4. The election's rules: the decision core's, and the group's.
	if err := c.validateElection(s); err != nil {
		return Config{}, err
	}

	// 5. Listen addresses.
	if err := checkAddr(varAPIAddr, c.APIAddr); err != nil {
		return Config{}, err
	}
	if err := checkAddr(varOpsAddr, c.OpsAddr); err != nil {
		return Config{}, err
	}
	if c.MaxBlockingRequests, err = maxBlockingRequests(s.MaxBlockingRequests); err != nil {
		return Config{}, err
	}

	// 6. Logging.
	switch strings.ToLower(s.LogLevel) {
	case "debug":
		c.LogLevel = slog.LevelDebug
	case "info":
		c.LogLevel = slog.LevelInfo
	case "warn":
		c.LogLevel = slog.LevelWarn
	case "error":
		c.LogLevel = slog.LevelError
	default:
		return Config{}, errorf(varLogLevel, "%q must be one of debug, info, warn, error", s.LogLevel)
	}
	switch f := strings.ToLower(s.LogFormat); f {
	case "json", "text":
		c.LogFormat = f
	default:
		return Config{}, errorf(varLogFormat, "%q must be one of json, text", s.LogFormat)
	}

	// 7. App health.
	if c.AppHealth, err = appHealth(s); err != nil {
		return Config{}, err
	}

	// 8. Observer and group constraints.
	if !c.Candidate && c.AppHealth.Enabled() {
		return Config{}, errorf(varCandidate, "false (an observer, which never campaigns) together with %s (health-gated candidacy): unset one", varAppHealthURL)
	}
	if c.Grouped() && s.PodLabel != "" && len(c.Leases) > podlabel.MaxGroupLeases {
		return Config{}, errorf(varPodLabel, "set with a lease group of %d Leases (%s): the leader label keeps one label per Lease on the Pod, and patches the Pod for each Lease's change; at most %d Leases", len(c.Leases), groupVars(s), podlabel.MaxGroupLeases)
	}

	// 12. The forwarding proxy.
	if err := c.validateProxy(); err != nil {
		return Config{}, err
	}

	// 9. Pod label.
	if s.PodLabel != "" {
		pod, source, err := l.podRef()
		if err != nil {
			return Config{}, err
		}
		c.PodLabel, c.Pod = s.PodLabel, pod
		leases := varLeaseName
		if c.Grouped() {
			leases = groupVars(s)
		}
		if err := c.validatePodLabel(source, leases); err != nil {
			return Config{}, err
		}
	}

	return c, nil
}

// namespace resolves and validates the Lease namespace (rule 2).
func (l Loader) namespace(fromEnv string) (string, error) {
	ns, source := fromEnv, varLeaseNamespace
	if ns == "" {
		ns, source = os.Getenv("POD_NAMESPACE"), "POD_NAMESPACE"
	}
	if ns == "" {
		var err error
		if ns, source, err = l.namespaceFile(varLeaseNamespace, "not set, POD_NAMESPACE not set"); err != nil {
			return "", err
		}
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return "", errorf(varLeaseNamespace, "namespace %q (from %s) is not a valid DNS label: %s", ns, source, strings.Join(errs, "; "))
	}
	return ns, nil
}

// namespaceFile reads the namespace from NamespaceFile; a failure is
// reported on variable, after why the file was needed.
func (l Loader) namespaceFile(variable, why string) (ns, path string, err error) {
	path = l.NamespaceFile
	if path == "" {
		path = DefaultNamespaceFile
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", errorf(variable, "%s, and the namespace file could not be read: %v", why, err)
	}
	if ns = strings.TrimSpace(string(b)); ns == "" {
		return "", "", errorf(variable, "%s, and the namespace file %s is empty", why, path)
	}
	return ns, path, nil
}

// identity validates an explicit identity or builds the default (rule 3).
func (l Loader) identity(fromEnv *string) (string, error) {
	if fromEnv != nil {
		id := *fromEnv
		if strings.TrimSpace(id) == "" {
			return "", errorf(varIdentity, "%q is blank; unset it to use the default identity", id)
		}
		if n := utf8.RuneCountInString(id); n > maxIdentityLen {
			return "", errorf(varIdentity, "identity is %d characters long, more than %d", n, maxIdentityLen)
		}
		return id, nil
	}

	base := os.Getenv("POD_NAME")
	if base == "" {
		hostname := l.Hostname
		if hostname == nil {
			hostname = os.Hostname
		}
		h, err := hostname()
		if err != nil {
			return "", errorf(varIdentity, "not set, POD_NAME not set, and the hostname is unavailable: %v", err)
		}
		if h == "" {
			return "", errorf(varIdentity, "not set, POD_NAME not set, and the hostname is empty")
		}
		base = h
	}
	suffix := l.RandomSuffix
	if suffix == nil {
		suffix = randomSuffix
	}
	return base + "_" + suffix(), nil
}

// randomSuffix returns 8 lower-case base32 characters (40 bits) from
// crypto/rand.
func randomSuffix() string {
	return strings.ToLower(rand.Text()[:8])
}

// checkAddr checks a listen address (rule 5).
func checkAddr(variable, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errorf(variable, "%q is not host:port: %v", addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return errorf(variable, "port %q in %q must be a number from 0 to 65535", port, addr)
	}
	if host == "" {
		return nil
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return nil
	}
	if errs := validation.IsDNS1123Subdomain(strings.ToLower(host)); len(errs) > 0 {
		return errorf(variable, "host %q in %q is neither an IP address nor a valid host name", host, addr)
	}
	return nil
}

// maxBlockingRequests is LEASEHOLD_MAX_BLOCKING_REQUESTS, or the HTTP
// layer's default when unset (rule 5).
func maxBlockingRequests(fromEnv *int) (int, error) {
	switch {
	case fromEnv == nil:
		return httpapi.DefaultMaxBlockingRequests, nil
	case *fromEnv < 1:
		return 0, errorf(varMaxBlocking, "%d must be at least 1 (the blocking requests each listener serves at once; unset it for the default, %d)",
			*fromEnv, httpapi.DefaultMaxBlockingRequests)
	}
	return *fromEnv, nil
}

// validateProxy checks rule 12.
func (c Config) validateProxy() error {
	switch {
	case c.ProxyAddr == "" && c.ProxyUpstream == "":
		return nil
	case c.ProxyAddr == "":
		return errorf(varProxyUpstream, "set without %s: set both to run the forwarding proxy, or neither", varProxyAddr)
	case c.ProxyUpstream == "":
		return errorf(varProxyAddr, "set without %s (the local app to forward to): set both, or neither", varProxyUpstream)
	}
	if err := checkAddr(varProxyAddr, c.ProxyAddr); err != nil {
		return err
	}
	if err := decide.ValidateAddress(c.ProxyUpstream); err != nil {
		return errorf(varProxyUpstream, "%q %v", c.ProxyUpstream, err)
	}
	switch {
	case c.AdvertiseAddress == "":
		return errorf(varProxyAddr, "set without %s: followers forward to the leader's advertised address, so set it to this Pod's address and the proxy's port", varAdvertiseAddress)
	case !c.Candidate:
		return errorf(varProxyAddr, "set with %s=false: an observer never leads, so it would only forward; run the proxy beside a candidate", varCandidate)
	}
	return nil
}
