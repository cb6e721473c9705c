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
	"math/bits"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kelseyhightower/envconfig"
	"k8s.io/apimachinery/pkg/util/validation"
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

	// PodLabel is the label key the leader sets to "true" on its own Pod
	// (LEASEHOLD_POD_LABEL, a qualified label name; off when empty). Pod
	// locates that Pod; it is set only when PodLabel is.
	PodLabel string
	Pod      PodRef

	// Pprof serves Go's profiles under /debug/pprof/ on the OPS listener
	// (LEASEHOLD_PPROF, default false; parsed by strconv.ParseBool), for
	// measuring the sidecar's own footprint: a profile costs CPU and memory
	// while it is taken.
	Pprof bool
}

// spec is what envconfig fills in. Field names map to variable names through
// split_words (APIAddr -> LEASEHOLD_API_ADDR). An `envconfig:"NAME"` tag is
// deliberately not used: envconfig v1.4.0 falls back to the unprefixed NAME
// when LEASEHOLD_NAME is unset, which would let an unrelated LOG_LEVEL or
// IDENTITY in the container's environment configure the sidecar.
type spec struct {
	LeaseName         string `split_words:"true"`
	Leases            string
	Shards            *int // nil when unset
	Group             string
	Balance           *bool         // nil when unset
	Candidate         bool          `default:"true"`
	LeaseNamespace    string        `split_words:"true"`
	Identity          *string       // nil when LEASEHOLD_IDENTITY is unset
	LeaseDuration     time.Duration `split_words:"true" default:"15s"`
	RenewDeadline     time.Duration `split_words:"true" default:"10s"`
	RetryPeriod       time.Duration `split_words:"true" default:"2s"`
	APIAddr           string        `split_words:"true" default:"127.0.0.1:4040"`
	OpsAddr           string        `split_words:"true" default:":4041"`
	ReleaseOnShutdown bool          `split_words:"true" default:"true"`
	LogLevel          string        `split_words:"true" default:"info"`
	LogFormat         string        `split_words:"true" default:"json"`

	AppHealthURL              string        `split_words:"true"`
	AppHealthTimeout          time.Duration `split_words:"true" default:"1s"`
	AppHealthInterval         time.Duration `split_words:"true" default:"2s"`
	AppHealthFailureThreshold int           `split_words:"true" default:"3"`
	PodLabel                  string        `split_words:"true"`
	Pprof                     bool
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
	varReleaseOnShutdown = Prefix + "_RELEASE_ON_SHUTDOWN"
	varLogLevel          = Prefix + "_LOG_LEVEL"
	varLogFormat         = Prefix + "_LOG_FORMAT"

	varAppHealthURL              = Prefix + "_APP_HEALTH_URL"
	varAppHealthTimeout          = Prefix + "_APP_HEALTH_TIMEOUT"
	varAppHealthInterval         = Prefix + "_APP_HEALTH_INTERVAL"
	varAppHealthFailureThreshold = Prefix + "_APP_HEALTH_FAILURE_THRESHOLD"
	varPodLabel                  = Prefix + "_POD_LABEL"

	varLeases    = Prefix + "_LEASES"
	varShards    = Prefix + "_SHARDS"
	varGroup     = Prefix + "_GROUP"
	varBalance   = Prefix + "_BALANCE"
	varCandidate = Prefix + "_CANDIDATE"
)

// Error is a configuration error: the variable Var breaks Rule. Every error
// Load returns for a bad or missing setting is an *Error.
type Error struct {
	// Var is the full environment variable name, e.g.
	// "LEASEHOLD_RENEW_DEADLINE".
	Var string
	// Rule describes the rule broken, with the offending values.
	Rule string
}

// Error returns "<Var>: <Rule>" on a single line (any line breaks in Rule are
// replaced by spaces).
func (e *Error) Error() string {
	rule := strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(e.Rule)
	return e.Var + ": " + rule
}

func errorf(variable, format string, args ...any) *Error {
	return &Error{Var: variable, Rule: fmt.Sprintf(format, args...)}
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
// first broken one as an *Error naming the variable; a value that cannot be
// parsed at all (e.g. "abc" for a duration or bool) is reported first, also
// as an *Error.
//
//  1. The Leases: LEASEHOLD_LEASE_NAME is set and a valid DNS subdomain,
//     or else LEASEHOLD_LEASES is (rule 12).
//  2. The namespace resolves — LEASEHOLD_LEASE_NAMESPACE, else POD_NAMESPACE,
//     else the trimmed contents of NamespaceFile; an empty variable counts as
//     unset — and is a valid DNS label.
//  3. LEASEHOLD_IDENTITY, if set (even to ""), is not blank and is at most
//     253 characters. If unset, the identity defaults to POD_NAME (if
//     non-empty) or the hostname, plus "_" and a random suffix; failing to
//     get a hostname is an error.
//  4. LEASEHOLD_LEASE_DURATION is a whole number of seconds, at least 1s
//     (the Lease stores whole seconds).
//  5. LEASEHOLD_RETRY_PERIOD is greater than 0.
//  6. LEASEHOLD_RENEW_DEADLINE is greater than 1.2 × retryPeriod
//     (client-go's rule).
//  7. renewDeadline + retryPeriod is less than leaseDuration (reported on
//     LEASEHOLD_RENEW_DEADLINE): otherwise a leader can still believe it
//     leads after the others have judged its lease expired.
//  8. LEASEHOLD_API_ADDR and LEASEHOLD_OPS_ADDR are host:port, the port
//     numeric in 0..65535, the host empty, an IP address or a host name.
//  9. LEASEHOLD_LOG_LEVEL is debug, info, warn or error and
//     LEASEHOLD_LOG_FORMAT is json or text, both case-insensitive.
//  10. LEASEHOLD_APP_HEALTH_URL, if set, is an absolute http or https URL
//     with a host; LEASEHOLD_APP_HEALTH_INTERVAL and _TIMEOUT are greater
//     than 0, the timeout at most the interval; _FAILURE_THRESHOLD is at
//     least 1. The three tuning variables are errors when set without the
//     URL (they would silently do nothing).
//  11. LEASEHOLD_POD_LABEL, if set, is a qualified label name other than
//     leasehold.io/lease (podlabel.LeaseKey, the election label), POD_NAME is
//     set, and the Pod's namespace resolves: POD_NAMESPACE, else the
//     namespace file (never LEASEHOLD_LEASE_NAMESPACE: the Lease may live
//     elsewhere than the Pod).
//  12. A lease group is LEASEHOLD_LEASES (named roles: comma-separated DNS
//     subdomains, no repeats) or LEASEHOLD_SHARDS=N (1 to 1024) with
//     LEASEHOLD_LEASE_NAME; LEASEHOLD_LEASES with LEASEHOLD_LEASE_NAME or
//     with LEASEHOLD_SHARDS is an error naming both; at most 1024 Leases.
//     LEASEHOLD_GROUP, and the shards' default group name
//     LEASEHOLD_LEASE_NAME, is a label value that makes valid member Lease
//     names; LEASEHOLD_GROUP and LEASEHOLD_BALANCE are errors without a
//     group (they would do nothing).
//  13. LEASEHOLD_CANDIDATE=false (an observer) is an error with
//     LEASEHOLD_APP_HEALTH_URL (an observer never campaigns); a group is an
//     error with LEASEHOLD_POD_LABEL (the label marks the leader of one
//     Lease).
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
	}

	// 1 and 12. The Leases.
	var err error
	if c.Election, err = election(s); err != nil {
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

	// 4. Lease duration.
	if c.LeaseDuration < time.Second || c.LeaseDuration%time.Second != 0 {
		return Config{}, errorf(varLeaseDuration, "leaseDuration (%s) must be a whole number of seconds and at least 1s", c.LeaseDuration)
	}

	// 5. Retry period.
	if c.RetryPeriod <= 0 {
		return Config{}, errorf(varRetryPeriod, "retryPeriod (%s) must be greater than 0", c.RetryPeriod)
	}

	// 6. renewDeadline > 1.2 × retryPeriod, i.e. 5·renew > 6·retry, computed
	// in 128 bits so that no duration can overflow it.
	if c.RenewDeadline <= 0 || !mulGreater(uint64(c.RenewDeadline), 5, uint64(c.RetryPeriod), 6) {
		return Config{}, errorf(varRenewDeadline, "renewDeadline (%s) must be greater than 1.2 × retryPeriod (%s)", c.RenewDeadline, c.RetryPeriod)
	}

	// 7. renewDeadline + retryPeriod < leaseDuration. All three are positive
	// here, so leaseDuration - renewDeadline cannot overflow.
	if c.RetryPeriod >= c.LeaseDuration-c.RenewDeadline {
		return Config{}, errorf(varRenewDeadline, "renewDeadline (%s) + retryPeriod (%s) must be less than leaseDuration (%s)", c.RenewDeadline, c.RetryPeriod, c.LeaseDuration)
	}

	// 8. Listen addresses.
	if err := checkAddr(varAPIAddr, c.APIAddr); err != nil {
		return Config{}, err
	}
	if err := checkAddr(varOpsAddr, c.OpsAddr); err != nil {
		return Config{}, err
	}

	// 9. Logging.
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

	// 10. App health.
	if c.AppHealth, err = appHealth(s); err != nil {
		return Config{}, err
	}

	// 13. Observer and group constraints.
	if !c.Candidate && c.AppHealth.Enabled() {
		return Config{}, errorf(varCandidate, "false (an observer, which never campaigns) together with %s (health-gated candidacy): unset one", varAppHealthURL)
	}
	if c.Grouped() && s.PodLabel != "" {
		return Config{}, errorf(varPodLabel, "set with a lease group (%s): the leader label marks the leader of one Lease; unset it", groupVars(s))
	}

	// 11. Pod label.
	if s.PodLabel != "" {
		pod, err := l.podRef(s.PodLabel)
		if err != nil {
			return Config{}, err
		}
		c.PodLabel, c.Pod = s.PodLabel, pod
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

// mulGreater reports whether a·ka > b·kb, exactly.
func mulGreater(a, ka, b, kb uint64) bool {
	ahi, alo := bits.Mul64(a, ka)
	bhi, blo := bits.Mul64(b, kb)
	return ahi > bhi || (ahi == bhi && alo > blo)
}

// checkAddr checks a listen address (rule 8).
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
